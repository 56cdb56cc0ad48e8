/*
 * AVX-512 VNNI kernels for the 32-element block types (Q4_0, Q4_1, Q8_0),
 * the types of the default model; the others use the AVX2 kernels.
 *
 * Two blocks fill one 512-bit register, so one vpdpbusd gives both blocks'
 * group sums: lanes 0-7 block 2p, lanes 8-15 block 2p+1 - exactly the
 * even/odd lanes of the canonical order (simd.h), so one accumulator per
 * activation row holds both parities. A weight row's two blocks are
 * unpacked once and used for up to four activation rows, which is what
 * makes a batch cheap.
 *
 * vpdpbusd multiplies unsigned by signed bytes. Q4_1 nibbles are unsigned
 * already; Q4_0 uses q (0..15) and Q8_0 uses w + 128, and the activation
 * pack supplies the correction -8 or -128 times each group's sum of x as
 * the accumulator's starting value, so the integer is still exactly
 * sum (w * x) over the group.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "simd.h"

/* activations of one block pair, as the kernels read them */
typedef struct {
    int8_t    qs[64];         /* block 2p, then 2p+1 (zeros past the end) */
    float     d16[16];        /* d of block 2p eight times, then of 2p+1 */
    int32_t   bias[16];       /* -k * group sum (k: 8 Q4_0, 128 Q8_0) */
    float     s[16];          /* s of 2p, of 2p+1, then zeros */
} act_pair;

_Static_assert(sizeof(act_pair) == 256, "act_pair is four cache lines");


__attribute__((unused)) static size_t
q32_act_bytes(int n_blocks)
{
    return (size_t) (n_blocks + 1) / 2 * sizeof(act_pair);
}


__attribute__((unused)) static void
q32_pack(uint32_t type, const void *src, int n_blocks, uint8_t *dst)
{
    const llm_block_q8a *x = src;
    int k = type == GGML_TYPE_Q4_0 ? 8 : (type == GGML_TYPE_Q8_0 ? 128 : 0);

    for (int p = 0; p < (n_blocks + 1) / 2; p++) {
        act_pair *a = (act_pair *) dst + p;
        memset(a, 0, sizeof(*a));
        for (int h = 0; h < 2 && 2 * p + h < n_blocks; h++) {
            const llm_block_q8a *b = &x[2 * p + h];
            memcpy(a->qs + 32 * h, b->qs, 32);
            for (int g = 0; g < 8; g++) {
                int sum = b->qs[4 * g] + b->qs[4 * g + 1] + b->qs[4 * g + 2]
                          + b->qs[4 * g + 3];
                a->d16[8 * h + g] = b->d;
                a->bias[8 * h + g] = -k * sum;
            }
            a->s[h] = b->s;
        }
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


/* two blocks' nibbles: block 0 in bytes 0-31 (low nibbles, then high),
 * block 1 in bytes 32-63 */
TGT static INLINE __m512i
unpack2(const uint8_t *q0, const uint8_t *q1)
{
    __m256i v = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *) q0)),
        _mm_loadu_si128((const __m128i *) q1), 1);
    __m512i d = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0),
                                         _mm512_castsi256_si512(v));

    d = _mm512_srlv_epi64(d, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
    return _mm512_and_si512(d, _mm512_set1_epi8(0x0f));
}


TGT static INLINE __m256i
unpack1(const uint8_t *q)
{
    __m128i v = _mm_loadu_si128((const __m128i *) q);
    __m128i m4 = _mm_set1_epi8(0x0f);

    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4),
                            _mm_and_si128(v, m4));
}


/* one weight row against XR (1..4) activation rows */
TGT static INLINE void
row_x(const int kind, const int bytes, const int XR, int nb,
    const uint8_t *w, const uint8_t *act, size_t act_stride, float *out,
    size_t ld_out)
{
    const int qoff = kind == Q4_1 ? 4 : 2;
    __m512 acc[4];
    __m128 macc[4];
    int p;

#pragma GCC unroll 4
    for (int x = 0; x < XR; x++) {
        acc[x] = _mm512_setzero_ps();
        macc[x] = _mm_setzero_ps();
    }
    for (p = 0; p < nb / 2; p++) {
        const uint8_t *w0 = w + 2 * p * bytes, *w1 = w0 + bytes;
        __m512i q;
        if (kind == Q8_0) {
            q = _mm512_inserti64x4(_mm512_castsi256_si512(
                    _mm256_loadu_si256((const __m256i *) (w0 + 2))),
                    _mm256_loadu_si256((const __m256i *) (w1 + 2)), 1);
            q = _mm512_xor_si512(q, _mm512_set1_epi8((char) 0x80));
        } else {
            q = unpack2(w0 + qoff, w1 + qoff);
        }
        __m512 dw = _mm512_insertf32x8(_mm512_set1_ps(half(w0)),
                                       _mm256_set1_ps(half(w1)), 1);
        __m128 mw = _mm_setzero_ps();
        if (kind == Q4_1) {
            mw = _mm_set_ps(0.0f, 0.0f, half(w1 + 2), half(w0 + 2));
        }
#pragma GCC unroll 4
        for (int x = 0; x < XR; x++) {
            const act_pair *a = (const act_pair *) (act + x * act_stride) + p;
            __m512i g = kind == Q4_1 ? _mm512_setzero_si512()
                                     : _mm512_loadu_si512(a->bias);
            g = _mm512_dpbusd_epi32(g, q, _mm512_loadu_si512(a->qs));
            __m512 dd = _mm512_mul_ps(dw, _mm512_loadu_ps(a->d16));
            acc[x] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(g), acc[x]);
            if (kind == Q4_1) {
                macc[x] = _mm_fmadd_ps(mw, _mm_loadu_ps(a->s), macc[x]);
            }
        }
    }
    if (nb & 1) {                    /* last, even block: lanes 0-7 only */
        const uint8_t *w0 = w + 2 * p * bytes;
        __m256i q;
        if (kind == Q8_0) {
            q = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *) (w0 + 2)),
                                 _mm256_set1_epi8((char) 0x80));
        } else {
            q = unpack1(w0 + qoff);
        }
        __m256 dw = _mm256_set1_ps(half(w0));
        /* lanes 1-3 zero: msum[1] gets + 0 * 0, which leaves it as is */
        __m128 mw = _mm_set_ss(kind == Q4_1 ? half(w0 + 2) : 0.0f);
#pragma GCC unroll 4
        for (int x = 0; x < XR; x++) {
            const act_pair *a = (const act_pair *) (act + x * act_stride) + p;
            __m256i g = kind == Q4_1 ? _mm256_setzero_si256()
                      : _mm256_loadu_si256((const __m256i *) a->bias);
            g = _mm256_dpbusd_epi32(g, q, _mm256_loadu_si256((const __m256i *) a->qs));
            __m256 dd = _mm256_mul_ps(dw, _mm256_loadu_ps(a->d16));
            __m256 lo = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(g),
                                        _mm512_castps512_ps256(acc[x]));
            acc[x] = _mm512_insertf32x8(acc[x], lo, 0);
            if (kind == Q4_1) {
                macc[x] = _mm_fmadd_ps(mw, _mm_load_ss(a->s), macc[x]);
            }
        }
    }
#pragma GCC unroll 4
    for (int x = 0; x < XR; x++) {
        __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(acc[x]),
                                  _mm512_extractf32x8_ps(acc[x], 1));
        float m0 = _mm_cvtss_f32(macc[x]);
        float m1 = _mm_cvtss_f32(_mm_shuffle_ps(macc[x], macc[x], 1));
        out[x * ld_out] = hsum8_ps(s8) + (m0 + m1);
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

const llm_kernel_set llm_kernels_avx512 = { 0 };

#endif
