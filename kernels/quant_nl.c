/*
 * The non-linear 4-bit types: IQ4_NL and MXFP4 (32-element blocks) and
 * IQ4_XS (256-element super-blocks of IQ4_NL values with 6-bit sub-block
 * scales), as ggml-common.h lays them out: their value tables, unpacking
 * to integers (quant_vals.h) and quantizers of our own (a scale search
 * like ggml's: the scales that map the block's extreme onto the table's
 * extreme, give or take 7 steps, the best by least squares).
 *
 * defines: llm_kvalues_iq4nl, llm_kvalues_mxfp4, llm_e8m0_half,
 *          llm_unpack_nl, llm_unpack_iq4_xs, llm_quantize_nl
 */
#include <math.h>
#include <string.h>

#include "quant_vals.h"
#include "tensor_type.h"


const int8_t llm_kvalues_iq4nl[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10,
    1, 13, 25, 38, 53, 69, 89, 113,
};

/* E2M1 values times 2 */
const int8_t llm_kvalues_mxfp4[16] = {
    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
};


float
llm_e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t) (e - 1) << 23;
    float f;

    memcpy(&f, &bits, 4);
    return f;
}


/* nibbles as Q4_0: element j < 16 low nibble of qs[j], else high of
 * qs[j - 16] */
static int
nibble(const uint8_t qs[16], int j)
{
    return j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4;
}


void
llm_unpack_nl(uint32_t type, const void *blk, llm_q32_vals *v)
{
    const int8_t *kv;
    const uint8_t *qs;

    if (type == GGML_TYPE_IQ4_NL) {
        const llm_block_iq4_nl *b = blk;
        kv = llm_kvalues_iq4nl;
        qs = b->qs;
        v->d = llm_fp16_to_fp32(b->d);
    } else {
        const llm_block_mxfp4 *b = blk;
        kv = llm_kvalues_mxfp4;
        qs = b->qs;
        v->d = llm_e8m0_half(b->e);
    }
    for (int j = 0; j < LLM_QK; j++) {
        v->q[j] = kv[nibble(qs, j)];
    }
    v->m = 0.0f;
    v->has_min = 0;
}


void
llm_unpack_iq4_xs(const llm_block_iq4_xs *b, llm_qk_vals *v)
{
    for (int s = 0; s < 8; s++) {
        int ls = (b->scales_l[s / 2] >> (4 * (s % 2))) & 0xf;
        ls |= ((b->scales_h >> (2 * s)) & 3) << 4;
        v->sc[s] = (int16_t) (ls - 32);
        v->mn[s] = 0;
        for (int j = 0; j < LLM_QK; j++) {
            v->q[32 * s + j] = llm_kvalues_iq4nl[nibble(b->qs + 16 * s, j)];
        }
    }
    v->sub = 32;
    v->has_min = 0;
    v->d = llm_fp16_to_fp32(b->d);
    v->dmin = 0.0f;
}


/* --- quantization -------------------------------------------------------- */

/* the index of the IQ4_NL value nearest to v (the table ascends: the
 * lower of two equally near) */
static int
nearest_nl(float v)
{
    const int8_t *kv = llm_kvalues_iq4nl;
    int lo = 0, hi = 15;

    if (v <= kv[0]) {
        return 0;
    }
    if (v >= kv[15]) {
        return 15;
    }
    while (hi - lo > 1) {                       /* kv[lo] < v <= kv[hi] */
        int mid = (lo + hi) / 2;
        if (v > kv[mid]) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return v - kv[lo] <= kv[hi] - v ? lo : hi;
}


/* the index of the table value nearest to v (first of equals) */
static int
nearest(const int8_t kv[16], float v)
{
    int best = 0;
    float err = fabsf(v - kv[0]);

    for (int k = 1; k < 16; k++) {
        if (fabsf(v - kv[k]) < err) {
            err = fabsf(v - kv[k]);
            best = k;
        }
    }
    return best;
}


/* n values onto d * llm_kvalues_iq4nl[idx]: returns d, the scale of
 * least squares error among those that put the extreme on the table's
 * ends, 7 steps either way */
static float
nl_fit(const float *x, int n, uint8_t *idx)
{
    float amax = 0.0f, max = 0.0f, best = 0.0f, best_d = 0.0f;
    uint8_t tmp[LLM_QK];

    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (n <= 0) {
        return 0.0f;
    }
    memset(idx, 8, (size_t) n);              /* value 1: d = 0 makes 0 */
    if (amax == 0.0f) {
        return 0.0f;
    }
    for (int t = -7; t <= 7; t++) {
        float id = ((float) t + llm_kvalues_iq4nl[0]) / max;
        float sqx = 0.0f, sq2 = 0.0f;
        for (int j = 0; j < n; j++) {
            tmp[j] = (uint8_t) nearest_nl(x[j] * id);
            float q = llm_kvalues_iq4nl[tmp[j]];
            sqx += q * x[j];
            sq2 += q * q;
        }
        if (sq2 > 0.0f && sqx * sqx / sq2 > best) {
            best = sqx * sqx / sq2;
            best_d = sqx / sq2;
            memcpy(idx, tmp, n);
        }
    }
    return best_d;
}


static void
pack_nibbles(const uint8_t idx[LLM_QK], uint8_t qs[16])
{
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t) (idx[j] | idx[j + 16] << 4);
    }
}


static void
quantize_iq4_xs(const float *x, llm_block_iq4_xs *b)
{
    uint8_t idx[LLM_QK];
    float s[8], smax = 0.0f, d, id;

    for (int k = 0; k < 8; k++) {
        s[k] = nl_fit(x + 32 * k, LLM_QK, idx);
        smax = fabsf(s[k]) > fabsf(smax) ? s[k] : smax;
    }
    d = smax / -32.0f;
    b->d = llm_fp32_to_fp16(d);
    d = llm_fp16_to_fp32(b->d);
    id = d != 0.0f ? 1.0f / d : 0.0f;
    b->scales_h = 0;
    memset(b->scales_l, 0, sizeof(b->scales_l));
    for (int k = 0; k < 8; k++) {
        int ls = (int) lroundf(s[k] * id);
        ls = ls < -32 ? -32 : ls > 31 ? 31 : ls;
        float dl = d * (float) ls, il = dl != 0.0f ? 1.0f / dl : 0.0f;
        for (int j = 0; j < LLM_QK; j++) {
            idx[j] = (uint8_t) (dl != 0.0f ? nearest_nl(x[32 * k + j] * il)
                                           : 8);
        }
        pack_nibbles(idx, b->qs + 16 * k);
        b->scales_l[k / 2] |= (uint8_t) (((ls + 32) & 0xf) << (4 * (k % 2)));
        b->scales_h |= (uint16_t) (((ls + 32) >> 4) << (2 * k));
    }
}


void
llm_quantize_nl(uint32_t type, const float *x, void *row, int64_t nb)
{
    uint8_t idx[LLM_QK];

    for (int64_t i = 0; i < nb; i++) {
        if (type == GGML_TYPE_IQ4_XS) {
            quantize_iq4_xs(x + LLM_QK_K * i, (llm_block_iq4_xs *) row + i);
        } else if (type == GGML_TYPE_IQ4_NL) {
            llm_block_iq4_nl *b = (llm_block_iq4_nl *) row + i;
            b->d = llm_fp32_to_fp16(nl_fit(x + LLM_QK * i, LLM_QK, idx));
            pack_nibbles(idx, b->qs);
        } else {                                   /* MXFP4, as gguf-py */
            llm_block_mxfp4 *b = (llm_block_mxfp4 *) row + i;
            const float *v = x + LLM_QK * i;
            float amax = 0.0f, d;
            for (int j = 0; j < LLM_QK; j++) {
                amax = fmaxf(amax, fabsf(v[j]));
            }
            int e = amax > 0.0f ? (int) floorf(log2f(amax)) - 2 + 127 : 0;
            b->e = (uint8_t) (e < 0 ? 0 : e > 254 ? 254 : e);
            d = llm_e8m0_half(b->e);
            for (int j = 0; j < LLM_QK; j++) {
                idx[j] = (uint8_t) nearest(llm_kvalues_mxfp4, v[j] / d);
            }
            pack_nibbles(idx, b->qs);
        }
    }
}
