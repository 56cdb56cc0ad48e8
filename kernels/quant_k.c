/*
 * The K-quants beside Q4_K and Q6_K: Q2_K, Q3_K and Q5_K as ggml-common.h
 * lays them out, unpacked to integers (quant_vals.h); and quantizers of
 * our own for all five K-quants (the weight quantizer's types): per
 * sub-block a scale (and a min) fitted to its range, the sub-block scales
 * quantized against the super-block's d (and dmin), then each weight
 * rounded to the nearest step of its sub-block's final scale.
 *
 * defines: llm_q4k_scale_min, llm_q3k_scale, llm_unpack_k, llm_quantize_k
 */
#include <math.h>
#include <string.h>

#include "quant_vals.h"
#include "tensor_type.h"


void
llm_q4k_scale_min(const uint8_t s[12], int j, int *sc, int *m)
{
    /* bytes 0-3: sc0..3 + top bits of sc4..7; 4-7: m0..3 + top bits of
     * m4..7; 8-11: low nibbles sc4..7, high nibbles m4..7 */
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}


int
llm_q3k_scale(const uint8_t s[12], int j)
{
    /* low 4 bits: nibble j / 8 of byte j % 8; high 2: bits 2 (j / 4) of
     * byte 8 + j % 4 */
    int lo = (s[j % 8] >> (4 * (j / 8))) & 0xf;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;

    return lo | hi << 4;
}


/* the 2-bit field of element e (128h + 32s + l): bits 2s of qs[32h + l] */
static int
q2_bits(const uint8_t qs[64], int e)
{
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}


void
llm_unpack_k(uint32_t type, const void *blk, llm_qk_vals *v)
{
    if (type == GGML_TYPE_Q2_K) {
        const llm_block_q2_K *b = blk;
        for (int s = 0; s < 16; s++) {
            v->sc[s] = b->scales[s] & 0xf;
            v->mn[s] = b->scales[s] >> 4;
        }
        for (int e = 0; e < LLM_QK_K; e++) {
            v->q[e] = (int8_t) q2_bits(b->qs, e);
        }
        v->sub = 16;
        v->has_min = 1;
        v->d = llm_fp16_to_fp32(b->d);
        v->dmin = llm_fp16_to_fp32(b->dmin);
    } else if (type == GGML_TYPE_Q3_K) {
        const llm_block_q3_K *b = blk;
        for (int s = 0; s < 16; s++) {
            v->sc[s] = (int16_t) (llm_q3k_scale(b->scales, s) - 32);
            v->mn[s] = 0;
        }
        for (int e = 0; e < LLM_QK_K; e++) {
            int h = (b->hmask[e % 32] >> (e / 32)) & 1;
            v->q[e] = (int8_t) (q2_bits(b->qs, e) - (h ? 0 : 4));
        }
        v->sub = 16;
        v->has_min = 0;
        v->d = llm_fp16_to_fp32(b->d);
        v->dmin = 0.0f;
    } else {                                            /* Q5_K */
        const llm_block_q5_K *b = blk;
        for (int s = 0; s < 8; s++) {
            int sc, m;
            llm_q4k_scale_min(b->scales, s, &sc, &m);
            v->sc[s] = (int16_t) sc;
            v->mn[s] = (int16_t) m;
        }
        for (int e = 0; e < LLM_QK_K; e++) {
            int lo = b->qs[32 * (e / 64) + e % 32];
            lo = (e % 64) < 32 ? lo & 0xf : lo >> 4;
            v->q[e] = (int8_t) (lo | ((b->qh[e % 32] >> (e / 32)) & 1) << 4);
        }
        v->sub = 32;
        v->has_min = 1;
        v->d = llm_fp16_to_fp32(b->d);
        v->dmin = llm_fp16_to_fp32(b->dmin);
    }
}


/* --- quantization -------------------------------------------------------- */

static int
clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}


/* unsigned sub-blocks with a min (Q2_K, Q4_K, Q5_K): x ~ scale * q - mn,
 * q in 0..nmax, mn >= 0 (the min is never above 0, as ggml's) */
static void
fit_min(const float *x, int n, int nmax, float *scale, float *mn)
{
    float min = 0.0f, max = 0.0f;

    for (int j = 0; j < n; j++) {
        min = fminf(min, x[j]);
        max = fmaxf(max, x[j]);
    }
    *scale = (max - min) / (float) nmax;
    *mn = -min;
}


/* signed sub-blocks (Q3_K, Q6_K): the value of largest magnitude onto
 * -nlow, so the signed scale may be negative */
static float
fit_signed(const float *x, int n, int nlow)
{
    float amax = 0.0f, max = 0.0f;

    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max / (float) -nlow;
}


/* super-block scale: d with d * 63 (or 15) covering the largest sub-block
 * value, stored as f16; the sub-block values as integers of it */
static float
super_scale(const float *v, int n, int lmax, int *l, llm_half *h)
{
    float max = 0.0f, d, id;

    for (int s = 0; s < n; s++) {
        max = fmaxf(max, v[s]);
    }
    *h = llm_fp32_to_fp16(max / (float) lmax);
    d = llm_fp16_to_fp32(*h);
    id = d > 0.0f ? 1.0f / d : 0.0f;
    for (int s = 0; s < n; s++) {
        l[s] = clampi((int) lroundf(v[s] * id), 0, lmax);
    }
    return d;
}


/* element values with a min: q = round((x + dmin * lm) / (d * ls)) */
static void
round_min(const float *x, int n, float d, int ls, float dmin, int lm,
    int nmax, int *q)
{
    float sc = d * (float) ls, m = dmin * (float) lm;
    float id = sc > 0.0f ? 1.0f / sc : 0.0f;

    for (int j = 0; j < n; j++) {
        q[j] = clampi((int) lroundf((x[j] + m) * id), 0, nmax);
    }
}


/* Q4_K / Q5_K scales: sc_j and m_j, 6 bits each, in scales[12] (the
 * inverse of llm_q4k_scale_min) */
static void
pack_scale_min(const int *ls, const int *lm, uint8_t s[12])
{
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            s[j] = (uint8_t) ls[j];
            s[j + 4] = (uint8_t) lm[j];
        } else {
            s[j + 4] = (uint8_t) ((ls[j] & 0xf) | (lm[j] & 0xf) << 4);
            s[j - 4] |= (uint8_t) ((ls[j] >> 4) << 6);
            s[j] |= (uint8_t) ((lm[j] >> 4) << 6);
        }
    }
}


/* Q2_K (sub 16, q 0..3, 4-bit scales), Q4_K (sub 32, 0..15, 6-bit),
 * Q5_K (sub 32, 0..31, 6-bit): the integers of one super-block */
static void
quantize_kmin(const float *x, int sub, int nmax, int lmax, int *q, int *ls,
    int *lm, llm_half *hd, llm_half *hm)
{
    int ns = LLM_QK_K / sub;
    float sc[16] = { 0 }, mn[16] = { 0 }, d, dmin;

    for (int s = 0; s < ns; s++) {
        fit_min(x + sub * s, sub, nmax, &sc[s], &mn[s]);
    }
    d = super_scale(sc, ns, lmax, ls, hd);
    dmin = super_scale(mn, ns, lmax, lm, hm);
    for (int s = 0; s < ns; s++) {
        round_min(x + sub * s, sub, d, ls[s], dmin, lm[s], nmax, q + sub * s);
    }
}


/* Q3_K (sub 16, q -4..3), Q6_K (sub 16, q -32..31): signed sub-block
 * scales in -32..31 (Q3_K) or -128..127 (Q6_K) */
static float
quantize_ksigned(const float *x, int nlow, int lmin, int lmax, int *q,
    int *ls, llm_half *hd)
{
    float sc[16], smax = 0.0f, d, id;

    for (int s = 0; s < 16; s++) {
        sc[s] = fit_signed(x + 16 * s, 16, nlow);
        smax = fabsf(sc[s]) > fabsf(smax) ? sc[s] : smax;
    }
    *hd = llm_fp32_to_fp16(smax / (float) lmin);
    d = llm_fp16_to_fp32(*hd);
    id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int s = 0; s < 16; s++) {
        ls[s] = clampi((int) lroundf(sc[s] * id), lmin, lmax);
        float dl = d * (float) ls[s], il = dl != 0.0f ? 1.0f / dl : 0.0f;
        for (int j = 0; j < 16; j++) {
            q[16 * s + j] = clampi((int) lroundf(x[16 * s + j] * il), -nlow,
                                   nlow - 1);
        }
    }
    return d;
}


static void
put_q2_bits(uint8_t qs[64], const int *u)
{
    memset(qs, 0, 64);
    for (int e = 0; e < LLM_QK_K; e++) {
        qs[32 * (e / 128) + e % 32] |= (uint8_t) ((u[e] & 3)
                                                  << (2 * ((e % 128) / 32)));
    }
}


/* the low nibble of element e of Q4_K and Q5_K: element 64k + l (l < 32)
 * in the low nibble of qs[32k + l], 64k + 32 + l in its high nibble */
static void
put_nibbles_k(uint8_t qs[128], const int *q)
{
    memset(qs, 0, 128);
    for (int e = 0; e < LLM_QK_K; e++) {
        qs[32 * (e / 64) + e % 32] |= (uint8_t) ((q[e] & 0xf)
                                                 << (4 * ((e % 64) / 32)));
    }
}


static void
quantize_super(uint32_t type, const float *x, void *blk)
{
    int q[LLM_QK_K], ls[16], lm[16];

    switch (type) {
    case GGML_TYPE_Q2_K: {
        llm_block_q2_K *b = blk;
        quantize_kmin(x, 16, 3, 15, q, ls, lm, &b->d, &b->dmin);
        for (int s = 0; s < 16; s++) {
            b->scales[s] = (uint8_t) (ls[s] | lm[s] << 4);
        }
        put_q2_bits(b->qs, q);
        break;
    }
    case GGML_TYPE_Q4_K: {
        llm_block_q4_K *b = blk;
        quantize_kmin(x, 32, 15, 63, q, ls, lm, &b->d, &b->dmin);
        pack_scale_min(ls, lm, b->scales);
        put_nibbles_k(b->qs, q);
        break;
    }
    case GGML_TYPE_Q5_K: {
        llm_block_q5_K *b = blk;
        quantize_kmin(x, 32, 31, 63, q, ls, lm, &b->d, &b->dmin);
        pack_scale_min(ls, lm, b->scales);
        put_nibbles_k(b->qs, q);
        memset(b->qh, 0, sizeof(b->qh));
        for (int e = 0; e < LLM_QK_K; e++) {
            b->qh[e % 32] |= (uint8_t) ((q[e] >> 4) << (e / 32));
        }
        break;
    }
    case GGML_TYPE_Q3_K: {
        llm_block_q3_K *b = blk;
        quantize_ksigned(x, 4, -32, 31, q, ls, &b->d);
        memset(b->scales, 0, sizeof(b->scales));
        memset(b->hmask, 0, sizeof(b->hmask));
        for (int s = 0; s < 16; s++) {
            int u = ls[s] + 32;
            b->scales[s % 8] |= (uint8_t) ((u & 0xf) << (4 * (s / 8)));
            b->scales[8 + s % 4] |= (uint8_t) ((u >> 4) << (2 * (s / 4)));
        }
        for (int e = 0; e < LLM_QK_K; e++) {
            q[e] += 4;                          /* 0..7: bit 2 in hmask */
            b->hmask[e % 32] |= (uint8_t) ((q[e] >> 2) << (e / 32));
        }
        put_q2_bits(b->qs, q);
        break;
    }
    default: {                                          /* Q6_K */
        llm_block_q6_K *b = blk;
        quantize_ksigned(x, 32, -128, 127, q, ls, &b->d);
        memset(b->ql, 0, sizeof(b->ql));
        memset(b->qh, 0, sizeof(b->qh));
        for (int s = 0; s < 16; s++) {
            b->scales[s] = (int8_t) ls[s];
        }
        /* as q6k_value in quant.c: element 128h + 32g + l */
        for (int e = 0; e < LLM_QK_K; e++) {
            int h = e / 128, g = (e % 128) / 32, l = e % 32, u = q[e] + 32;
            b->ql[64 * h + l + 32 * (g & 1)] |= (uint8_t) ((u & 0xf)
                                                           << (4 * (g >= 2)));
            b->qh[32 * h + l] |= (uint8_t) ((u >> 4) << (2 * g));
        }
        break;
    }
    }
}


void
llm_quantize_k(uint32_t type, const float *x, void *row, int64_t nb)
{
    size_t bytes = ggml_type_size(type);

    for (int64_t i = 0; i < nb; i++) {
        quantize_super(type, x + LLM_QK_K * i, (uint8_t *) row + bytes * i);
    }
}
