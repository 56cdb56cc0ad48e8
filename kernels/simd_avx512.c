/*
 * AVX-512 VNNI kernels for the 32-element block types (Q4_0, Q4_1, Q8_0),
 * the types of the default model; the others use the AVX2 kernels.
 *
 * Two blocks fill one 512-bit register with their groups of four bytes
 * interleaved: int32 lane 2k + h is group k of block 2p + h. One vpdpbusd
 * then gives both blocks' exact group sums, and lane 2k + h accumulates
 * exactly what the canonical order (simd.h) calls lane h * 8 + k; only the
 * place in the register differs, and the final reduction reads it back in
 * canonical order. The interleaving lets the per-block scales be loaded as
 * one broadcast pair (vbroadcastf32x2) instead of a 64-byte vector.
 *
 * A weight row's two blocks are unpacked once and used for up to four
 * activation rows; a tile's weight rows are visited for each group of four
 * activation rows while they sit in L1. That is what makes a batch cheap.
 *
 * vpdpbusd multiplies unsigned by signed bytes: Q4_1 nibbles are unsigned;
 * Q4_0 (q - 8) and Q8_0 are signed, so they use |w| and x negated where w
 * is negative, which gives the same products.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"
#include "simd.h"

/* activation row layout: n_pairs groups of 64 interleaved bytes, then
 * n_pairs (d, d) pairs, then n_pairs (s, s) pairs (zeros past the end) */
static size_t
q32_act_bytes(int n_blocks)
{
    size_t np = (size_t) (n_blocks + 1) / 2;

    return (np * 64 + np * 16 + 63) / 64 * 64;
}


static void
q32_pack(uint32_t type, const void *src, int n_blocks, uint8_t *dst)
{
    const llm_block_q8a *x = src;
    int np = (n_blocks + 1) / 2;
    float *d = (float *) (dst + (size_t) np * 64), *s = d + 2 * np;

    (void) type;
    memset(dst, 0, q32_act_bytes(n_blocks));
    for (int b = 0; b < n_blocks; b++) {
        int p = b / 2, h = b % 2;
        for (int k = 0; k < 8; k++) {
            memcpy(dst + 64 * p + 4 * (2 * k + h), x[b].qs + 4 * k, 4);
        }
        d[2 * p + h] = x[b].d;
        s[2 * p + h] = x[b].s;
    }
}


#if defined(__x86_64__)

#include <immintrin.h>

#define TGT __attribute__((target( \
    "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")))
#define INLINE __attribute__((always_inline)) inline

enum { Q4_0, Q4_1, Q8_0 };


TGT static INLINE float
half(const uint8_t *p)
{
    uint16_t h;

    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}


TGT static INLINE float
hsum8_ps(__m256 v)
{
    __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(v),
                           _mm256_extractf128_ps(v, 1));
    __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
    return _mm_cvtss_f32(_mm_add_ss(t2, _mm_shuffle_ps(t2, t2, 1)));
}


/* weights of blocks w0 and w1 (w1 NULL: none, lanes of odd h are then
 * garbage the caller masks off) as interleaved unsigned bytes u and the
 * mask of bytes whose weight is negative */
TGT static INLINE __m512i
load_weights(const int kind, const uint8_t *w0, const uint8_t *w1,
    __mmask64 *neg)
{
    __m512i q;

    if (kind == Q8_0) {
        __m512i v = _mm512_castsi256_si512(
            _mm256_loadu_si256((const __m256i *) (w0 + 2)));
        if (w1) {
            v = _mm512_inserti64x4(v, _mm256_loadu_si256(
                    (const __m256i *) (w1 + 2)), 1);
        }
        /* lane 2k + h <- dword k of block h (dwords 8h..8h+7) */
        q = _mm512_permutexvar_epi32(_mm512_set_epi32(
                15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0), v);
    } else {
        int off = kind == Q4_1 ? 4 : 2;
        __m256i v = _mm256_zextsi128_si256(
            _mm_loadu_si128((const __m128i *) (w0 + off)));
        if (w1) {
            v = _mm256_inserti128_si256(v,
                    _mm_loadu_si128((const __m128i *) (w1 + off)), 1);
        }
        /* group k < 4: low nibbles of qs dword k; k >= 4: high nibbles of
         * dword k - 4; block h's dwords are 4h..4h+3 */
        q = _mm512_permutexvar_epi32(_mm512_set_epi32(
                7, 3, 6, 2, 5, 1, 4, 0, 7, 3, 6, 2, 5, 1, 4, 0),
                _mm512_castsi256_si512(v));
        q = _mm512_srlv_epi32(q, _mm512_set_epi32(
                4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0));
        q = _mm512_and_si512(q, _mm512_set1_epi8(0x0f));
        if (kind == Q4_0) {
            q = _mm512_sub_epi8(q, _mm512_set1_epi8(8));
        }
    }
    *neg = 0;
    if (kind != Q4_1) {
        *neg = _mm512_movepi8_mask(q);
        q = _mm512_abs_epi8(q);
    }
    return q;
}


/* one weight row against XR (1..4) activation rows */
TGT static INLINE void
row_x(const int kind, const int bytes, const int XR, int nb,
    const uint8_t *w, const uint8_t *act, size_t act_stride, float *out,
    size_t ld_out)
{
    int np = (nb + 1) / 2, p;
    __m512 acc[4];
    __m128 macc[4];

#pragma GCC unroll 4
    for (int x = 0; x < XR; x++) {
        acc[x] = _mm512_setzero_ps();
        macc[x] = _mm_setzero_ps();
    }
    for (p = 0; p < np; p++) {
        const uint8_t *w0 = w + 2 * p * bytes;
        const uint8_t *w1 = 2 * p + 1 < nb ? w0 + bytes : NULL;
        __mmask64 neg;
        __m512i q = load_weights(kind, w0, w1, &neg);
        __m128 dw2 = _mm_set_ps(0.0f, 0.0f, w1 ? half(w1) : 0.0f, half(w0));
        __m512 dw = _mm512_broadcast_f32x2(dw2);
        __m128 mw2 = _mm_setzero_ps();
        if (kind == Q4_1) {
            /* no odd block: + 0 * 0 leaves msum[1] as it is */
            mw2 = _mm_set_ps(0.0f, 0.0f, w1 ? half(w1 + 2) : 0.0f,
                             half(w0 + 2));
        }
        /* the last pair of an odd count has an even block only */
        __mmask16 lanes = w1 ? 0xffff : 0x5555;
#pragma GCC unroll 4
        for (int x = 0; x < XR; x++) {
            const uint8_t *a = act + x * act_stride;
            const float *d2 = (const float *) (a + (size_t) np * 64) + 2 * p;
            __m512i xv = _mm512_loadu_si512(a + 64 * p);
            if (kind != Q4_1) {
                xv = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
            }
            __m512i g = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, xv);
            __m512 dx = _mm512_broadcast_f32x2(
                _mm_castpd_ps(_mm_load_sd((const double *) d2)));
            acc[x] = _mm512_mask3_fmadd_ps(_mm512_mul_ps(dw, dx),
                                           _mm512_cvtepi32_ps(g), acc[x],
                                           lanes);
            if (kind == Q4_1) {
                macc[x] = _mm_fmadd_ps(mw2, _mm_castpd_ps(_mm_load_sd(
                              (const double *) (d2 + 2 * np))), macc[x]);
            }
        }
    }
#pragma GCC unroll 4
    for (int x = 0; x < XR; x++) {
        /* canonical s[k] = lane(0, k) + lane(1, k) = acc[2k] + acc[2k+1] */
        __m512 t = _mm512_add_ps(acc[x], _mm512_permute_ps(acc[x], 0xb1));
        t = _mm512_permutexvar_ps(_mm512_set_epi32(
                0, 0, 0, 0, 0, 0, 0, 0, 14, 12, 10, 8, 6, 4, 2, 0), t);
        float m0 = _mm_cvtss_f32(macc[x]);
        float m1 = _mm_cvtss_f32(_mm_shuffle_ps(macc[x], macc[x], 1));
        out[x * ld_out] = hsum8_ps(_mm512_castps512_ps256(t)) + (m0 + m1);
    }
}


/* groups of four activation rows outside, the tile's weight rows inside:
 * the tile (ROWS_PER_TILE rows, a few KB) comes from memory once and stays
 * in L1 together with the four activation rows */
TGT static INLINE void
tile_q32(const int kind, const int bytes, const llm_tile *t)
{
    int nb = t->n / LLM_QK;

    for (int i = 0; i < t->n_x; i += 4) {
        const uint8_t *a = t->act + i * t->act_stride;
        for (int r = 0; r < t->n_w; r++) {
            const uint8_t *w = t->w + r * t->w_stride;
            float *o = t->out + i * t->ld_out + r;
            switch (t->n_x - i) {
            case 1: row_x(kind, bytes, 1, nb, w, a, t->act_stride, o, t->ld_out); break;
            case 2: row_x(kind, bytes, 2, nb, w, a, t->act_stride, o, t->ld_out); break;
            case 3: row_x(kind, bytes, 3, nb, w, a, t->act_stride, o, t->ld_out); break;
            default: row_x(kind, bytes, 4, nb, w, a, t->act_stride, o, t->ld_out); break;
            }
        }
    }
}


TGT static void
tile_q4_0(const llm_tile *t)
{
    tile_q32(Q4_0, sizeof(llm_block_q4_0), t);
}


TGT static void
tile_q4_1(const llm_tile *t)
{
    tile_q32(Q4_1, sizeof(llm_block_q4_1), t);
}


TGT static void
tile_q8_0(const llm_tile *t)
{
    tile_q32(Q8_0, sizeof(llm_block_q8_0), t);
}


const llm_kernel_set llm_kernels_avx512 = {
    .q4_0 = tile_q4_0, .q4_1 = tile_q4_1, .q8_0 = tile_q8_0,
    .q32_act_bytes = q32_act_bytes, .q32_pack = q32_pack,
};

#else

const llm_kernel_set llm_kernels_avx512 = {
    .q32_act_bytes = q32_act_bytes, .q32_pack = q32_pack,
};

#endif
