/*
 * AVX2 kernels of the added types (quant_vals.h: Q5_0, Q5_1, IQ4_NL,
 * MXFP4; Q2_K, Q3_K, Q5_K, IQ4_XS), equal to their scalar references in
 * quant_dot.c bit for bit: the integer sums are exact whatever
 * instructions add them, and the float operations are the reference's,
 * one by one, in its order. A weight block is unpacked once (32-element
 * types with vector shuffles, super-blocks by the scalar unpacking) and
 * met by up to XCHUNK activation rows before the next.
 *
 * The first correct step (issue 25); speed is issue 28.
 *
 * defines: llm_avx2_tile_q5_0 ... llm_avx2_tile_iq4_xs (simd.h's set)
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "quant_vals.h"
#include "simd.h"
#include "tensor_type.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define XCHUNK  16                 /* activation rows per weight block */


TGT static inline int
hsum_i32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v),
                              _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}


/* products of 32 signed bytes w (|w| <= 127) and x (|x| <= 127) as 8
 * int32 partial sums: lanes 0-3 elements 0-15, lanes 4-7 elements 16-31 */
TGT static inline __m256i
dot32(__m256i w, __m256i x)
{
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w),
                                     _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}


/* --- 32-element blocks ---------------------------------------------------- */

/* the 32 nibbles of qs in element order (low nibbles 0-15, high 16-31) */
TGT static inline __m256i
nibbles(const uint8_t qs[16])
{
    __m128i q = _mm_loadu_si128((const __m128i *) qs);
    __m128i m4 = _mm_set1_epi8(0x0f);

    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4),
                            _mm_and_si128(q, m4));
}


/* 16 in byte j where bit j of the little-endian qh is set */
TGT static inline __m256i
bit4(const uint8_t qh[4])
{
    uint32_t h;
    __m256i v, bits;

    memcpy(&h, qh, 4);
    v = _mm256_shuffle_epi8(_mm256_set1_epi32((int) h),
        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                         2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    bits = _mm256_set1_epi64x((long long) 0x8040201008040201ull);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
    return _mm256_and_si256(v, _mm256_set1_epi8(16));
}


/* block blk of type as 32 signed bytes, its scale and minimum */
TGT static inline __m256i
unpack32(uint32_t type, const uint8_t *blk, float *d, float *m)
{
    __m256i kv;

    switch (type) {
    case GGML_TYPE_Q5_0: {
        const llm_block_q5_0 *b = (const void *) blk;
        *d = _cvtsh_ss(b->d);
        return _mm256_sub_epi8(_mm256_or_si256(nibbles(b->qs), bit4(b->qh)),
                               _mm256_set1_epi8(16));
    }
    case GGML_TYPE_Q5_1: {
        const llm_block_q5_1 *b = (const void *) blk;
        *d = _cvtsh_ss(b->d);
        *m = _cvtsh_ss(b->m);
        return _mm256_or_si256(nibbles(b->qs), bit4(b->qh));
    }
    case GGML_TYPE_IQ4_NL: {
        const llm_block_iq4_nl *b = (const void *) blk;
        *d = _cvtsh_ss(b->d);
        kv = _mm256_broadcastsi128_si256(
            _mm_loadu_si128((const __m128i *) llm_kvalues_iq4nl));
        return _mm256_shuffle_epi8(kv, nibbles(b->qs));
    }
    default: {                                          /* MXFP4 */
        const llm_block_mxfp4 *b = (const void *) blk;
        *d = llm_e8m0_half(b->e);
        kv = _mm256_broadcastsi128_si256(
            _mm_loadu_si128((const __m128i *) llm_kvalues_mxfp4));
        return _mm256_shuffle_epi8(kv, nibbles(b->qs));
    }
    }
}


/* llm_dot_q32x_ref for n_x activation rows at once */
TGT static void
tile_q32x(uint32_t type, const llm_tile *t)
{
    size_t bytes = ggml_type_size(type);
    int nb = t->n / LLM_QK, min = type == GGML_TYPE_Q5_1;

    for (int r = 0; r < t->n_w; r++) {
        const uint8_t *w = t->w + r * t->w_stride;
        for (int i0 = 0; i0 < t->n_x; i0 += XCHUNK) {
            int nx = t->n_x - i0 < XCHUNK ? t->n_x - i0 : XCHUNK;
            float acc[XCHUNK][8], msum[XCHUNK][8];
            memset(acc, 0, sizeof(acc));
            memset(msum, 0, sizeof(msum));
            for (int b = 0; b < nb; b++) {
                float d, m = 0.0f;
                __m256i q = unpack32(type, w + b * bytes, &d, &m);
                for (int i = 0; i < nx; i++) {
                    const llm_block_q8a *x = (const llm_block_q8a *)
                        (t->act + (i0 + i) * t->act_stride) + b;
                    __m256i xv = _mm256_loadu_si256((const __m256i *) x->qs);
                    int isum = hsum_i32(dot32(q, xv));
                    acc[i][b % 8] = fmaf(d * x->d, (float) isum,
                                         acc[i][b % 8]);
                    if (min) {
                        msum[i][b % 8] = fmaf(m, x->s, msum[i][b % 8]);
                    }
                }
            }
            for (int i = 0; i < nx; i++) {
                t->out[(i0 + i) * t->ld_out + r] = min
                    ? llm_hsum8(acc[i]) + llm_hsum8(msum[i])
                    : llm_hsum8(acc[i]);
            }
        }
    }
}


/* --- super-blocks ----------------------------------------------------------- */

/* llm_dot_qkx_ref for n_x activation rows at once */
TGT static void
tile_qkx(uint32_t type, const llm_tile *t)
{
    size_t bytes = ggml_type_size(type);
    int nb = t->n / LLM_QK_K;
    llm_qk_vals v;

    for (int r = 0; r < t->n_w; r++) {
        const uint8_t *w = t->w + r * t->w_stride;
        for (int i0 = 0; i0 < t->n_x; i0 += XCHUNK) {
            int nx = t->n_x - i0 < XCHUNK ? t->n_x - i0 : XCHUNK;
            float acc[XCHUNK] = { 0 };
            for (int b = 0; b < nb; b++) {
                llm_unpack_qk(type, w + b * bytes, &v);
                __m256i scv[8];
                /* scales as int32 lanes of dot32's layout: lanes 0-3 take
                   the first 16 elements of a 32-element chunk, 4-7 the
                   next 16 */
                for (int c = 0; c < 8; c++) {
                    int s0 = v.sub == 16 ? v.sc[2 * c] : v.sc[c];
                    int s1 = v.sub == 16 ? v.sc[2 * c + 1] : v.sc[c];
                    scv[c] = _mm256_setr_epi32(s0, s0, s0, s0,
                                               s1, s1, s1, s1);
                }
                for (int i = 0; i < nx; i++) {
                    const llm_block_q8k *x = (const llm_block_q8k *)
                        (t->act + (i0 + i) * t->act_stride) + b;
                    __m256i isv = _mm256_setzero_si256();
                    int imin = 0;
                    for (int c = 0; c < 8; c++) {
                        __m256i wq = _mm256_loadu_si256(
                            (const __m256i *) (v.q + 32 * c));
                        __m256i xq = _mm256_loadu_si256(
                            (const __m256i *) (x->qs + 32 * c));
                        isv = _mm256_add_epi32(isv, _mm256_mullo_epi32(
                            dot32(wq, xq), scv[c]));
                    }
                    if (v.has_min) {
                        for (int k = 0; k < 16; k++) {
                            imin += v.mn[k / (v.sub / 16)] * x->bsums[k];
                        }
                    }
                    acc[i] = fmaf(v.d * x->d, (float) hsum_i32(isv), acc[i]);
                    if (v.has_min) {
                        acc[i] = fmaf(-(v.dmin * x->d), (float) imin, acc[i]);
                    }
                }
            }
            for (int i = 0; i < nx; i++) {
                t->out[(i0 + i) * t->ld_out + r] = acc[i];
            }
        }
    }
}


#define TILE32(name, type)                                                    \
    TGT void name(const llm_tile *t) { tile_q32x(type, t); }
#define TILEK(name, type)                                                     \
    TGT void name(const llm_tile *t) { tile_qkx(type, t); }

TILE32(llm_avx2_tile_q5_0, GGML_TYPE_Q5_0)
TILE32(llm_avx2_tile_q5_1, GGML_TYPE_Q5_1)
TILE32(llm_avx2_tile_iq4_nl, GGML_TYPE_IQ4_NL)
TILE32(llm_avx2_tile_mxfp4, GGML_TYPE_MXFP4)
TILEK(llm_avx2_tile_q2_K, GGML_TYPE_Q2_K)
TILEK(llm_avx2_tile_q3_K, GGML_TYPE_Q3_K)
TILEK(llm_avx2_tile_q5_K, GGML_TYPE_Q5_K)
TILEK(llm_avx2_tile_iq4_xs, GGML_TYPE_IQ4_XS)

#endif
