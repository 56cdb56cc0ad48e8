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
#include "tensor_type.h"

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



/* --- 32-element blocks --------------------------------------------------- */

/*
 * 32-element types. Lanes are 8 consecutive blocks: 8 weight blocks are
 * transposed in registers so that vector v holds group v (bytes 4v..4v+3)
 * of each block, the activations are packed once per call in the same
 * lane order, and maddubs/madd over the 8 groups leave each block's exact
 * sum in its lane. Then one cvt/mul/fma per 8 blocks, lane i of the
 * accumulator being the canonical acc[b % 8].
 */
typedef struct {
    int8_t    qs[8][8][4];       /* [group][lane][byte] */
    int32_t   bias[8];           /* Q4_0: -8 times the block sum, lane order */
    float     d[8];              /* block order */
    float     s[8];
} act8;

_Static_assert(sizeof(act8) == 352, "act8 is 352 bytes");


/* which block of an 8-block chunk lane j holds after the transpose */
static int
lane_block(uint32_t type, int j)
{
    return type == GGML_TYPE_Q8_0 ? j : 2 * (j % 4) + j / 4;
}


static size_t
q32_layout(int nb, int n_x, size_t *act_stride)
{
    *act_stride = (size_t) (nb + 7) / 8 * sizeof(act8);
    return *act_stride * n_x;
}


static void
q32_pack(uint32_t type, const void *src, int nb, int n_x, int i,
    uint8_t *act)
{
    const llm_block_q8a *x = src;
    size_t stride;
    act8 *a;

    (void) n_x;
    q32_layout(nb, 1, &stride);
    a = (act8 *) (act + stride * i);
    for (int c = 0; c * 8 < nb; c++) {
        for (int j = 0; j < 8; j++) {
            int b = c * 8 + lane_block(type, j), sum = 0;
            if (b < nb) {
                for (int g = 0; g < 8; g++) {
                    memcpy(a[c].qs[g][j], x[b].qs + 4 * g, 4);
                }
                for (int e = 0; e < LLM_QK; e++) {
                    sum += x[b].qs[e];
                }
                a[c].bias[j] = type == GGML_TYPE_Q4_0 ? -8 * sum : 0;
            }
            if (c * 8 + j < nb) {
                a[c].d[j] = x[c * 8 + j].d;
                a[c].s[j] = x[c * 8 + j].s;
            }
        }
    }
}


/* 4x4 dword transposes inside each 128-bit lane:
 * out[q] lane L slot m = (a, b, c, d)[m] lane L dword q */
TGT static INLINE void
transpose4(__m256i a, __m256i b, __m256i c, __m256i d, __m256i out[4])
{
    __m256i t0 = _mm256_unpacklo_epi32(a, b), t1 = _mm256_unpackhi_epi32(a, b);
    __m256i t2 = _mm256_unpacklo_epi32(c, d), t3 = _mm256_unpackhi_epi32(c, d);

    out[0] = _mm256_unpacklo_epi64(t0, t2);
    out[1] = _mm256_unpackhi_epi64(t0, t2);
    out[2] = _mm256_unpacklo_epi64(t1, t3);
    out[3] = _mm256_unpackhi_epi64(t1, t3);
}


TGT static INLINE __m128i
load16_or_zero(const uint8_t *p, int present)
{
    return present ? _mm_loadu_si128((const __m128i *) p) : _mm_setzero_si128();
}


/* 8 nibble blocks (n present): z[m] = blocks 2m, 2m+1; lane 4L + m is
 * block 2m + L */
TGT static INLINE void
transpose_q4(const uint8_t *w, int bytes, int off, int n, __m256i g[8])
{
    __m256i z[4], o[4], m4 = _mm256_set1_epi8(0x0f);

#pragma GCC unroll 4
    for (int m = 0; m < 4; m++) {
        const uint8_t *b = w + 2 * m * bytes + off;
        z[m] = _mm256_set_m128i(load16_or_zero(b + bytes, 2 * m + 1 < n),
                                load16_or_zero(b, 2 * m < n));
    }
    transpose4(z[0], z[1], z[2], z[3], o);
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        g[q] = _mm256_and_si256(o[q], m4);
        g[q + 4] = _mm256_and_si256(_mm256_srli_epi16(o[q], 4), m4);
    }
}


TGT static INLINE __m256i
load32_or_zero(const uint8_t *p, int present)
{
    return present ? _mm256_loadu_si256((const __m256i *) p)
                   : _mm256_setzero_si256();
}


/* 8 Q8_0 blocks: z[m] = block m; lane j is block j */
TGT static INLINE void
transpose_q8(const uint8_t *w, int bytes, int n, __m256i g[8])
{
    __m256i z[8], o[4], p[4];

#pragma GCC unroll 8
    for (int m = 0; m < 8; m++) {
        z[m] = load32_or_zero(w + m * bytes + 2, m < n);
    }
    transpose4(z[0], z[1], z[2], z[3], o);
    transpose4(z[4], z[5], z[6], z[7], p);
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        g[q] = _mm256_permute2x128_si256(o[q], p[q], 0x20);
        g[q + 4] = _mm256_permute2x128_si256(o[q], p[q], 0x31);
    }
}


/* d (and Q4_1's m) of 8 blocks, zeros from block n on */
TGT static INLINE void
scales8(const uint8_t *w, int bytes, int n, int with_m, __m256 *d, __m256 *m)
{
    __m128i dh = _mm_setzero_si128(), mh = _mm_setzero_si128();
    uint16_t h[8] = { 0 }, hm[8] = { 0 };

    for (int j = 0; j < n; j++) {
        memcpy(&h[j], w + j * bytes, 2);
        if (with_m) {
            memcpy(&hm[j], w + j * bytes + 2, 2);
        }
    }
    dh = _mm_set_epi16((short) h[7], (short) h[6], (short) h[5], (short) h[4],
                       (short) h[3], (short) h[2], (short) h[1], (short) h[0]);
    mh = _mm_set_epi16((short) hm[7], (short) hm[6], (short) hm[5], (short) hm[4],
                       (short) hm[3], (short) hm[2], (short) hm[1], (short) hm[0]);
    *d = _mm256_cvtph_ps(dh);
    *m = _mm256_cvtph_ps(mh);
}


/* one weight row against n_x activation rows, 8 blocks at a time */
TGT static INLINE void
row_blocks(const uint32_t kind, const int bytes, int nb, const uint8_t *w,
    const uint8_t *act, size_t act_stride, int n_x, float *out,
    size_t ld_out)
{
    /* lane j holds block lane_block(j); idx[i] = the lane of block i */
    const __m256i perm = kind == 2 ? _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)
                                   : _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i ones = _mm256_set1_epi16(1);

    for (int i0 = 0; i0 < n_x; i0 += 4) {
        int nx = n_x - i0 < 4 ? n_x - i0 : 4;
        __m256 acc[4], macc[4];

        for (int x = 0; x < nx; x++) {
            acc[x] = macc[x] = _mm256_setzero_ps();
        }
        for (int c = 0; c * 8 < nb; c++) {
            const uint8_t *wc = w + (size_t) c * 8 * bytes;
            int n = nb - c * 8 < 8 ? nb - c * 8 : 8;
            __m256i g[8];
            __m256 dw, mw;

            if (kind == 2) {
                transpose_q8(wc, bytes, n, g);
            } else {
                transpose_q4(wc, bytes, kind == 1 ? 4 : 2, n, g);
            }
            scales8(wc, bytes, n, kind == 1, &dw, &mw);
            for (int x = 0; x < nx; x++) {
                const act8 *a = (const act8 *) (act + (i0 + x) * act_stride) + c;
                __m256i isum;
                if (kind == 2) {
                    /* signed x signed: |w| times x with w's sign; int16
                     * pairs can reach 32512, so widen every group */
                    isum = _mm256_setzero_si256();
#pragma GCC unroll 8
                    for (int v = 0; v < 8; v++) {
                        __m256i xv = _mm256_loadu_si256((const __m256i *) a->qs[v]);
                        __m256i p = _mm256_maddubs_epi16(
                            _mm256_sign_epi8(g[v], g[v]),
                            _mm256_sign_epi8(xv, g[v]));
                        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));
                    }
                } else {
                    /* nibbles: int16 sums of 8 groups stay below 30480 */
                    __m256i p = _mm256_setzero_si256();
#pragma GCC unroll 8
                    for (int v = 0; v < 8; v++) {
                        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(g[v],
                                _mm256_loadu_si256((const __m256i *) a->qs[v])));
                    }
                    isum = _mm256_madd_epi16(p, ones);
                    if (kind == 0) {
                        isum = _mm256_add_epi32(isum, _mm256_loadu_si256(
                                   (const __m256i *) a->bias));
                    }
                }
                __m256 gf = _mm256_cvtepi32_ps(
                    _mm256_permutevar8x32_epi32(isum, perm));
                __m256 dd = _mm256_mul_ps(dw, _mm256_loadu_ps(a->d));
                acc[x] = _mm256_fmadd_ps(dd, gf, acc[x]);
                if (kind == 1) {
                    macc[x] = _mm256_fmadd_ps(mw, _mm256_loadu_ps(a->s), macc[x]);
                }
            }
        }
        for (int x = 0; x < nx; x++) {
            out[(i0 + x) * ld_out] = kind == 1
                ? hsum8_ps(acc[x]) + hsum8_ps(macc[x]) : hsum8_ps(acc[x]);
        }
    }
}


TGT static INLINE void
tile_q32(const uint32_t kind, const int bytes, const llm_tile *t)
{
    int nb = t->n / LLM_QK;

    for (int r = 0; r < t->n_w; r++) {
        row_blocks(kind, bytes, nb, t->w + r * t->w_stride, t->act,
                   t->act_stride, t->n_x, t->out + r, t->ld_out);
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


/* --- float weights: blocked tiles --------------------------------------- */

/*
 * One weight row by FC2 activation rows a pass: each weight vector is
 * loaded (and converted) once for the FC2 rows; 4 * FC2 accumulators,
 * lane j % 32 each; a last chunk of fewer than 32 goes through a[32] with
 * fmaf, lane after lane; then s[k] = (a[k] + a[k+8]) + (a[k+16] + a[k+24])
 * and llm_hsum8's order (simd.h).
 */
enum { F32W, F16W, BF16W };
#define FC2 3
#define UNROLL _Pragma("GCC unroll 8")

TGT static INLINE __m256
load8_w(const int kind, const uint8_t *w, int j)
{
    return kind == F32W ? load8_f32(w + 4 * (size_t) j)
           : kind == F16W ? load8_f16(w + 2 * (size_t) j)
           : load8_bf16(w + 2 * (size_t) j);
}


TGT static INLINE float
w_at(const int kind, const uint8_t *w, int j)
{
    return kind == F32W ? f32_at(w, j) : kind == F16W ? f16_at(w, j)
           : bf16_at(w, j);
}


TGT static INLINE void
float_block(const int kind, const llm_tile *t, int r, int i0, const int nc)
{
    const uint8_t *w = t->w + r * t->w_stride;
    const float *x[FC2];
    __m256 acc[FC2][4];
    int n = t->n, j = 0;

    UNROLL for (int i = 0; i < nc; i++) {
        x[i] = (const float *) (t->act + (i0 + i) * t->act_stride);
        UNROLL for (int q = 0; q < 4; q++) {
            acc[i][q] = _mm256_setzero_ps();
        }
    }
    for ( ; j + 32 <= n; j += 32) {
        UNROLL for (int q = 0; q < 4; q++) {
            __m256 wv = load8_w(kind, w, j + 8 * q);
            UNROLL for (int i = 0; i < nc; i++) {
                acc[i][q] = _mm256_fmadd_ps(wv,
                                            _mm256_loadu_ps(x[i] + j + 8 * q),
                                            acc[i][q]);
            }
        }
    }
    UNROLL for (int i = 0; i < nc; i++) {
        float a[32], s[8], *o = &t->out[(i0 + i) * t->ld_out + r];
        if (j == n) {
            *o = hsum8_ps(_mm256_add_ps(_mm256_add_ps(acc[i][0], acc[i][1]),
                                        _mm256_add_ps(acc[i][2], acc[i][3])));
            continue;
        }
        UNROLL for (int q = 0; q < 4; q++) {
            _mm256_storeu_ps(a + 8 * q, acc[i][q]);
        }
        for (int jj = j, k = 0; jj < n; jj++, k++) {
            a[k] = fmaf(w_at(kind, w, jj), x[i][jj], a[k]);
        }
        for (int k = 0; k < 8; k++) {
            s[k] = (a[k] + a[k + 8]) + (a[k + 16] + a[k + 24]);
        }
        *o = llm_hsum8(s);
    }
}


TGT static INLINE void
tile_float(const int kind, const llm_tile *t)
{
    for (int r = 0; r < t->n_w; r++) {
        int i = 0;
        for ( ; i + FC2 <= t->n_x; i += FC2) {
            float_block(kind, t, r, i, FC2);
        }
        switch (t->n_x - i) {
        case 2: float_block(kind, t, r, i, 2); break;
        case 1: float_block(kind, t, r, i, 1); break;
        }
    }
}


TGT static void
tile_f32(const llm_tile *t)
{
    tile_float(F32W, t);
}


TGT static void
tile_f16(const llm_tile *t)
{
    tile_float(F16W, t);
}


TGT static void
tile_bf16(const llm_tile *t)
{
    tile_float(BF16W, t);
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

TILE(tile_q4_K, dot_q4_K(t->n, w, x))
TILE(tile_q6_K, dot_q6_K(t->n, w, x))

const llm_kernel_set llm_kernels_avx2 = {
    .f32 = tile_f32, .f16 = tile_f16, .bf16 = tile_bf16, .q4_0 = tile_q4_0,
    .q4_1 = tile_q4_1, .q8_0 = tile_q8_0, .q4_K = tile_q4_K,
    .q6_K = tile_q6_K, .q32_min_n_x = 1, .q32_layout = q32_layout,
    .q32_pack = q32_pack, .q5_0 = llm_avx2_tile_q5_0,
    .q5_1 = llm_avx2_tile_q5_1, .iq4_nl = llm_avx2_tile_iq4_nl,
    .mxfp4 = llm_avx2_tile_mxfp4, .q2_K = llm_avx2_tile_q2_K,
    .q3_K = llm_avx2_tile_q3_K, .q5_K = llm_avx2_tile_q5_K,
    .iq4_xs = llm_avx2_tile_iq4_xs,
};

#else

#include "simd.h"

const llm_kernel_set llm_kernels_avx2 = { 0 };

#endif
