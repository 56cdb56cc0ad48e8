/*
 * AVX2 + FMA + F16C tile kernels. Each reproduces the canonical order of
 * simd.h exactly: integer block sums are exact whatever the instruction
 * (maddubs/madd group four consecutive products per int32 lane, the
 * grouping the order names), and every float operation is the one the
 * scalar kernel does, lane for lane.
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "quant.h"
#include "simd.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INLINE __attribute__((always_inline)) inline


TGT static inline float
hsum8_ps(__m256 v)
{
    __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(v),
                           _mm256_extractf128_ps(v, 1));
    __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
    return _mm_cvtss_f32(_mm_add_ss(t2, _mm_shuffle_ps(t2, t2, 1)));
}


TGT static inline float
half(const uint8_t *p)
{
    uint16_t h;

    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}


/* --- float weights ------------------------------------------------------- */

TGT static inline __m256
load8_f32(const uint8_t *w)
{
    return _mm256_loadu_ps((const float *) w);
}


TGT static inline __m256
load8_f16(const uint8_t *w)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) w));
}


TGT static inline __m256
load8_bf16(const uint8_t *w)
{
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) w));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}


#define FLOAT_DOT(name, load, esize, scalar_w)                                \
TGT static float                                                              \
name(int n, const uint8_t *w, const float *x)                                 \
{                                                                             \
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;               \
    float a[32], s[8];                                                        \
    int j = 0;                                                                \
                                                                              \
    for ( ; j + 32 <= n; j += 32) {                                           \
        a0 = _mm256_fmadd_ps(load(w + (j) * esize), _mm256_loadu_ps(x + j), a0); \
        a1 = _mm256_fmadd_ps(load(w + (j + 8) * esize),                       \
                             _mm256_loadu_ps(x + j + 8), a1);                 \
        a2 = _mm256_fmadd_ps(load(w + (j + 16) * esize),                      \
                             _mm256_loadu_ps(x + j + 16), a2);                \
        a3 = _mm256_fmadd_ps(load(w + (j + 24) * esize),                      \
                             _mm256_loadu_ps(x + j + 24), a3);                \
    }                                                                         \
    if (j == n) {                                                             \
        return hsum8_ps(_mm256_add_ps(_mm256_add_ps(a0, a1),                  \
                                      _mm256_add_ps(a2, a3)));                \
    }                                                                         \
    _mm256_storeu_ps(a, a0);                                                  \
    _mm256_storeu_ps(a + 8, a1);                                              \
    _mm256_storeu_ps(a + 16, a2);                                             \
    _mm256_storeu_ps(a + 24, a3);                                             \
    for (int t = 0; j < n; j++, t++) {                                        \
        a[t] = fmaf(scalar_w, x[j], a[t]);                                    \
    }                                                                         \
    for (int k = 0; k < 8; k++) {                                             \
        s[k] = (a[k] + a[k + 8]) + (a[k + 16] + a[k + 24]);                   \
    }                                                                         \
    return llm_hsum8(s);                                                      \
}

static inline float
f32_at(const uint8_t *w, int j)
{
    float f;

    memcpy(&f, w + 4 * (size_t) j, 4);
    return f;
}

TGT static inline float
f16_at(const uint8_t *w, int j)
{
    return half(w + 2 * (size_t) j);
}

static inline float
bf16_at(const uint8_t *w, int j)
{
    uint16_t h;

    memcpy(&h, w + 2 * (size_t) j, 2);
    return llm_bf16_to_fp32(h);
}

FLOAT_DOT(dot_f32, load8_f32, 4, f32_at(w, j))
FLOAT_DOT(dot_f16, load8_f16, 2, f16_at(w, j))
FLOAT_DOT(dot_bf16, load8_bf16, 2, bf16_at(w, j))


/* --- 32-element blocks --------------------------------------------------- */

/* 16 bytes of nibbles as 32 bytes 0..15: element j at byte j */
TGT static inline __m256i
unpack_nibbles(const uint8_t *qs)
{
    __m128i v = _mm_loadu_si128((const __m128i *) qs);
    __m128i m4 = _mm_set1_epi8(0x0f);

    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4),
                            _mm_and_si128(v, m4));
}


/*
 * Activations of the 32-element types, one row: the blocks' 32-byte qs
 * back to back, then d of every block, then s, each padded with zeros to a
 * multiple of 8 blocks so eight blocks' scales are one load.
 */
static size_t
q32_layout(int nb, int n_x, size_t *act_stride)
{
    size_t nb8 = (size_t) (nb + 7) / 8 * 8;

    *act_stride = (size_t) nb * 32 + nb8 * 8;
    return *act_stride * n_x;
}


static void
q32_pack(uint32_t type, const void *src, int nb, int n_x, int i,
    uint8_t *act)
{
    const llm_block_q8a *x = src;
    size_t stride;
    uint8_t *row;
    float *d, *s;

    (void) type;
    (void) n_x;
    q32_layout(nb, 1, &stride);
    row = act + stride * i;
    d = (float *) (row + (size_t) nb * 32);
    s = d + (nb + 7) / 8 * 8;
    for (int b = 0; b < nb; b++) {
        memcpy(row + 32 * b, x[b].qs, 32);
        d[b] = x[b].d;
        s[b] = x[b].s;
    }
}


/* lane j = sum of all eight int32 lanes of v[j] */
TGT static INLINE __m256i
block_totals(const __m256i v[8])
{
    __m256i h01 = _mm256_hadd_epi32(v[0], v[1]);
    __m256i h23 = _mm256_hadd_epi32(v[2], v[3]);
    __m256i h45 = _mm256_hadd_epi32(v[4], v[5]);
    __m256i h67 = _mm256_hadd_epi32(v[6], v[7]);
    __m256i q03 = _mm256_hadd_epi32(h01, h23);
    __m256i q47 = _mm256_hadd_epi32(h45, h67);

    return _mm256_add_epi32(_mm256_permute2x128_si256(q03, q47, 0x20),
                            _mm256_permute2x128_si256(q03, q47, 0x31));
}


/* eight (or, at the row's end, fewer) weight blocks made ready for any
 * number of activation rows: u = |w| (Q4_1: the nibbles), sw = w */
typedef struct {
    __m256i  u[8], sw[8];
    __m256   dw, mw;
    int      n;
} wchunk;


TGT static INLINE void
prepare(uint32_t kind, int bytes, const uint8_t *w, int n, wchunk *c)
{
    float dw[8] = { 0 }, mw[8] = { 0 };

    c->n = n;
    for (int j = 0; j < n; j++) {
        const uint8_t *blk = w + j * bytes;
        switch (kind) {
        case 0: /* Q4_0 */
            c->sw[j] = _mm256_sub_epi8(unpack_nibbles(blk + 2),
                                       _mm256_set1_epi8(8));
            c->u[j] = _mm256_sign_epi8(c->sw[j], c->sw[j]);
            break;
        case 1: /* Q4_1 */
            c->u[j] = unpack_nibbles(blk + 4);
            mw[j] = half(blk + 2);
            break;
        default: /* Q8_0 */
            c->sw[j] = _mm256_loadu_si256((const __m256i *) (blk + 2));
            c->u[j] = _mm256_sign_epi8(c->sw[j], c->sw[j]);
            break;
        }
        dw[j] = half(blk);
    }
    c->dw = _mm256_loadu_ps(dw);
    c->mw = _mm256_loadu_ps(mw);
}


/* one weight row against XR (1..4) activation rows, eight blocks at a
 * time: lane j of acc is the canonical acc[b % 8] */
TGT static INLINE void
row_x(const uint32_t kind, const int bytes, const int XR, int nb,
    const uint8_t *w, const uint8_t *act, size_t act_stride, float *out,
    size_t ld_out)
{
    size_t nb8 = (size_t) (nb + 7) / 8 * 8;
    __m256 acc[4], macc[4];
    wchunk c;

#pragma GCC unroll 4
    for (int x = 0; x < XR; x++) {
        acc[x] = macc[x] = _mm256_setzero_ps();
    }
    for (int b0 = 0; b0 < nb; b0 += 8) {
        prepare(kind, bytes, w + b0 * bytes, nb - b0 < 8 ? nb - b0 : 8, &c);
#pragma GCC unroll 4
        for (int x = 0; x < XR; x++) {
            const uint8_t *row = act + x * act_stride;
            const float *d = (const float *) (row + (size_t) nb * 32);
            __m256i v[8];
            for (int j = 0; j < 8; j++) {
                if (j >= c.n) {
                    v[j] = _mm256_setzero_si256();
                    continue;
                }
                __m256i xv = _mm256_loadu_si256(
                    (const __m256i *) (row + 32 * (b0 + j)));
                if (kind != 1) {
                    xv = _mm256_sign_epi8(xv, c.sw[j]);
                }
                v[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(c.u[j], xv),
                                         _mm256_set1_epi16(1));
            }
            __m256 g = _mm256_cvtepi32_ps(block_totals(v));
            __m256 dd = _mm256_mul_ps(c.dw, _mm256_loadu_ps(d + b0));
            acc[x] = _mm256_fmadd_ps(dd, g, acc[x]);
            if (kind == 1) {
                macc[x] = _mm256_fmadd_ps(c.mw, _mm256_loadu_ps(d + nb8 + b0),
                                          macc[x]);
            }
        }
    }
#pragma GCC unroll 4
    for (int x = 0; x < XR; x++) {
        out[x * ld_out] = kind == 1 ? hsum8_ps(acc[x]) + hsum8_ps(macc[x])
                                    : hsum8_ps(acc[x]);
    }
}


/* groups of four activation rows outside, the tile's weight rows inside
 * (the tile stays in L1 while the groups pass) */
TGT static INLINE void
tile_q32(const uint32_t kind, const int bytes, const llm_tile *t)
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
    tile_q32(0, sizeof(llm_block_q4_0), t);
}


TGT static void
tile_q4_1(const llm_tile *t)
{
    tile_q32(1, sizeof(llm_block_q4_1), t);
}


TGT static void
tile_q8_0(const llm_tile *t)
{
    tile_q32(2, sizeof(llm_block_q8_0), t);
}


/* --- K-quants ------------------------------------------------------------ */

TGT static inline int
hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v),
                              _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}


TGT static float
dot_q4_K(int n, const uint8_t *wp, const uint8_t *xp)
{
    const llm_block_q4_K *w = (const void *) wp;
    const llm_block_q8k *x = (const void *) xp;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    float acc = 0.0f;

    for (int b = 0; b < n / LLM_QK_K; b++) {
        __m256i isum = _mm256_setzero_si256();
        int imin = 0;
        for (int k = 0; k < 4; k++) {
            int sc0, m0, sc1, m1;
            __m256i q = _mm256_loadu_si256((const __m256i *) (w[b].qs + 32 * k));
            __m256i x0 = _mm256_loadu_si256((const __m256i *) (x[b].qs + 64 * k));
            __m256i x1 = _mm256_loadu_si256((const __m256i *) (x[b].qs + 64 * k + 32));
            llm_q4k_scale_min(w[b].scales, 2 * k, &sc0, &m0);
            llm_q4k_scale_min(w[b].scales, 2 * k + 1, &sc1, &m1);
            __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(q, m4), x0);
            __m256i p1 = _mm256_maddubs_epi16(
                _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), x1);
            isum = _mm256_add_epi32(isum,
                _mm256_madd_epi16(p0, _mm256_set1_epi16((short) sc0)));
            isum = _mm256_add_epi32(isum,
                _mm256_madd_epi16(p1, _mm256_set1_epi16((short) sc1)));
            imin += m0 * (x[b].bsums[4 * k] + x[b].bsums[4 * k + 1])
                  + m1 * (x[b].bsums[4 * k + 2] + x[b].bsums[4 * k + 3]);
        }
        float dd = half((const uint8_t *) &w[b].d) * x[b].d;
        float dm = half((const uint8_t *) &w[b].dmin) * x[b].d;
        acc = fmaf(dd, (float) hsum_epi32(isum), acc);
        acc = fmaf(-dm, (float) imin, acc);
    }
    return acc;
}


TGT static float
dot_q6_K(int n, const uint8_t *wp, const uint8_t *xp)
{
    const llm_block_q6_K *w = (const void *) wp;
    const llm_block_q8k *x = (const void *) xp;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3);
    float acc = 0.0f;

    for (int b = 0; b < n / LLM_QK_K; b++) {
        __m256i isum = _mm256_setzero_si256();
        int bias = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[b].ql + 64 * h, *qh = w[b].qh + 32 * h;
            const int8_t *sc = w[b].scales + 8 * h;
            __m256i l0 = _mm256_loadu_si256((const __m256i *) ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *) (ql + 32));
            __m256i hb = _mm256_loadu_si256((const __m256i *) qh);
            for (int g = 0; g < 4; g++) {
                __m256i lo = (g & 1) ? l1 : l0;
                lo = (g >= 2) ? _mm256_srli_epi16(lo, 4) : lo;
                __m256i hi = _mm256_and_si256(
                    _mm256_srli_epi16(hb, 2 * g), m2);
                __m256i q = _mm256_or_si256(_mm256_and_si256(lo, m4),
                                            _mm256_slli_epi16(hi, 4));
                __m256i xv = _mm256_loadu_si256(
                    (const __m256i *) (x[b].qs + 128 * h + 32 * g));
                __m256i scv = _mm256_set_m128i(
                    _mm_set1_epi16(sc[2 * g + 1]), _mm_set1_epi16(sc[2 * g]));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(
                    _mm256_maddubs_epi16(q, xv), scv));
            }
            for (int k = 0; k < 8; k++) {
                bias += sc[k] * x[b].bsums[8 * h + k];
            }
        }
        /* q was stored as q + 32 (unsigned for maddubs): remove 32 * sum */
        int total = hsum_epi32(isum) - 32 * bias;
        acc = fmaf(half((const uint8_t *) &w[b].d) * x[b].d, (float) total,
                   acc);
    }
    return acc;
}


/* --- tiles --------------------------------------------------------------- */

#define TILE(name, dot_call)                                                  \
TGT static void                                                               \
name(const llm_tile *t)                                                       \
{                                                                             \
    for (int r = 0; r < t->n_w; r++) {                                        \
        const uint8_t *w = t->w + r * t->w_stride;                            \
        for (int i = 0; i < t->n_x; i++) {                                    \
            const uint8_t *x = t->act + i * t->act_stride;                    \
            t->out[i * t->ld_out + r] = dot_call;                             \
        }                                                                     \
    }                                                                         \
}

TILE(tile_f32, dot_f32(t->n, w, (const float *) x))
TILE(tile_f16, dot_f16(t->n, w, (const float *) x))
TILE(tile_bf16, dot_bf16(t->n, w, (const float *) x))
TILE(tile_q4_K, dot_q4_K(t->n, w, x))
TILE(tile_q6_K, dot_q6_K(t->n, w, x))

const llm_kernel_set llm_kernels_avx2 = {
    tile_f32, tile_f16, tile_bf16, tile_q4_0, tile_q4_1, tile_q8_0,
    tile_q4_K, tile_q6_K, 1, q32_layout, q32_pack,
};

#else

#include "simd.h"

const llm_kernel_set llm_kernels_avx2 = { 0 };

#endif
