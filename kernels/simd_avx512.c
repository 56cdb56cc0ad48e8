/*
 * AVX-512 VNNI kernels for the 32-element block types (Q4_0, Q4_1, Q8_0).
 * Both keep every integer a block's exact sum without horizontal
 * reductions by choosing what the 16 lanes of a register are:
 *
 * Small batches (n_x < 8, decode): lanes are 16 consecutive blocks of one
 * row. Sixteen weight blocks are transposed in registers so that vector v
 * holds group v (bytes 4v..4v+3) of each block; the activations are packed
 * in the same lane order once per call; eight vpdpbusd then leave each
 * block's exact sum in its lane.
 *
 * Large batches (n_x >= 8: prefill, big decode batches): lanes are
 * activation rows. Sixteen activation rows are interleaved by
 * groups of four bytes, so for one weight block, eight vpdpbusd with one
 * broadcast weight group each leave in lane l the exact integer sum of
 * the block's 32 products with row l: no horizontal reductions, and the
 * block's float work (scale product, convert, fma) is one instruction
 * each for all sixteen rows. Block b goes to accumulator register b % 8,
 * so lane l follows the canonical order of simd.h exactly.
 *
 * vpdpbusd multiplies unsigned (weights) by signed (activations) bytes:
 * Q4_1 nibbles are unsigned; Q4_0 uses q = w + 8 and Q8_0 w + 128, and
 * the accumulator starts from -8 (-128) times the row's block sum of x,
 * kept with the packed activations, so the integer is still sum (w * x).
 *
 * Also the float weights' tiles (F32, F16, BF16): register-blocked, 4
 * weight rows by 3 activation rows a pass, 8 by 1 at one activation row
 * (below).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quant.h"
#include "simd.h"
#include "tensor_type.h"

#define LANES  16

/* per group of 16 activation rows, per block (large batches); and per
 * row, per chunk of 16 blocks (small batches; lane j is block j) */
typedef struct {
    int8_t    qs[8][LANES][4];   /* [group k][lane][byte] */
    int32_t   bias[LANES];       /* -8 or -128 times the block sum (Q4_0, Q8_0) */
    float     d[LANES];
    float     s[LANES];
} act_block;

_Static_assert(sizeof(act_block) == 704, "act_block is 11 cache lines");

#define SMALL_N_X  8             /* below: lanes are blocks */


static int
bias_factor(uint32_t type)
{
    return type == GGML_TYPE_Q4_0 ? 8 : (type == GGML_TYPE_Q8_0 ? 128 : 0);
}


static int
block_sum(const llm_block_q8a *b)
{
    int sum = 0;

    for (int j = 0; j < LLM_QK; j++) {
        sum += b->qs[j];
    }
    return sum;
}


static size_t
q32_layout(int nb, int n_x, size_t *act_stride)
{
    if (n_x < SMALL_N_X) {
        *act_stride = (size_t) (nb + LANES - 1) / LANES * sizeof(act_block);
        return *act_stride * n_x;
    }
    *act_stride = (size_t) nb * sizeof(act_block);       /* per 16 rows */
    return *act_stride * ((n_x + LANES - 1) / LANES);
}


static void
pack_small(uint32_t type, const llm_block_q8a *x, int nb, int i,
    uint8_t *act)
{
    size_t stride;
    act_block *a;

    q32_layout(nb, 1, &stride);
    a = (act_block *) (act + stride * i);
    for (int c = 0; c * LANES < nb; c++) {
        for (int j = 0; j < LANES; j++) {
            int b = c * LANES + j;
            if (b < nb) {
                for (int g = 0; g < 8; g++) {
                    memcpy(a[c].qs[g][j], x[b].qs + 4 * g, 4);
                }
                a[c].bias[j] = -bias_factor(type) * block_sum(&x[b]);
                a[c].d[j] = x[b].d;
                a[c].s[j] = x[b].s;
            }
        }
    }
}


static void
q32_pack(uint32_t type, const void *src, int nb, int n_x, int i,
    uint8_t *act)
{
    const llm_block_q8a *x = src;
    act_block *a = (act_block *) act + (size_t) (i / LANES) * nb;
    int l = i % LANES;

    if (n_x < SMALL_N_X) {
        pack_small(type, x, nb, i, act);
        return;
    }
    for (int b = 0; b < nb; b++) {
        for (int g = 0; g < 8; g++) {
            memcpy(a[b].qs[g][l], x[b].qs + 4 * g, 4);
        }
        a[b].bias[l] = -bias_factor(type) * block_sum(&x[b]);
        a[b].d[l] = x[b].d;
        a[b].s[l] = x[b].s;
    }
}


#if defined(__x86_64__)

#include <immintrin.h>

#define TGT __attribute__((target( \
    "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")))
#define INLINE __attribute__((always_inline)) inline

enum { Q4_0, Q4_1, Q8_0, Q5_0, IQ4NL, MXFP4 };

/* packed kinds: the offset the unsigned quants carry (their integer is
 * the byte minus it; the kernels take off the offset times the sum of x)
 * and where the quants start in a packed block (pack.c) */
#define KIND_BIAS(kind)  ((kind) == Q4_1 ? 0 : (kind) == Q4_0 ? 8 \
                          : (kind) == Q5_0 ? 16 : 128)
#define KIND_QA(kind)    ((kind) == Q4_1 ? 64 : (kind) == Q5_0 ? 96 \
                          : (kind) == MXFP4 ? 16 : 32)


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


/* the block's 32 weights as unsigned bytes, element order */
TGT static INLINE void
unsigned_weights(const int kind, const uint8_t *blk, uint32_t out[8])
{
    __m256i q;

    if (kind == Q8_0) {
        q = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *) (blk + 2)),
                             _mm256_set1_epi8((char) 0x80));
    } else {
        __m128i v = _mm_loadu_si128(
            (const __m128i *) (blk + (kind == Q4_1 ? 4 : 2)));
        __m128i m4 = _mm_set1_epi8(0x0f);
        q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4),
                             _mm_and_si128(v, m4));
    }
    _mm256_storeu_si256((__m256i *) out, q);
}


/* block b of one weight row into accumulator register j = b % 8 */
TGT static INLINE void
block(const int kind, const uint8_t *blk, const act_block *a, __m512 *acc,
    __m512 *macc)
{
    uint32_t wd[8];
    __m512i g;

    unsigned_weights(kind, blk, wd);
    g = kind == Q4_1 ? _mm512_setzero_si512() : _mm512_loadu_si512(a->bias);
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        g = _mm512_dpbusd_epi32(g, _mm512_set1_epi32((int) wd[k]),
                                _mm512_loadu_si512(a->qs[k]));
    }
    __m512 dd = _mm512_mul_ps(_mm512_set1_ps(half(blk)),
                              _mm512_loadu_ps(a->d));
    *acc = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(g), *acc);
    if (kind == Q4_1) {
        *macc = _mm512_fmadd_ps(_mm512_set1_ps(half(blk + 2)),
                                _mm512_loadu_ps(a->s), *macc);
    }
}


/* canonical hsum8 over the eight registers, lane by lane */
TGT static INLINE __m512
hsum8_regs(const __m512 v[8])
{
    __m512 t0 = _mm512_add_ps(v[0], v[4]), t1 = _mm512_add_ps(v[1], v[5]);
    __m512 t2 = _mm512_add_ps(v[2], v[6]), t3 = _mm512_add_ps(v[3], v[7]);

    return _mm512_add_ps(_mm512_add_ps(t0, t2), _mm512_add_ps(t1, t3));
}


/* one weight row against one group of 16 activation rows (n valid) */
TGT static INLINE void
row_group(const int kind, const int bytes, int nb, const uint8_t *w,
    const act_block *a, int n, float *out, size_t ld_out)
{
    __m512 acc[8], macc[8], r;
    float res[LANES];

#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        acc[j] = macc[j] = _mm512_setzero_ps();
    }
    for (int b0 = 0; b0 < nb; b0 += 8) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            if (b0 + j < nb) {
                block(kind, w + (b0 + j) * bytes, &a[b0 + j], &acc[j],
                      &macc[j]);
            }
        }
    }
    r = hsum8_regs(acc);
    if (kind == Q4_1) {
        r = _mm512_add_ps(r, hsum8_regs(macc));
    }
    _mm512_storeu_ps(res, r);
    for (int l = 0; l < n; l++) {
        out[l * ld_out] = res[l];
    }
}


/* 4x4 transposes of dwords inside each 128-bit lane of a, b, c, d:
 * out[q] lane L slot m = (a, b, c, d)[m] lane L dword q */
TGT static INLINE void
transpose4(__m512i a, __m512i b, __m512i c, __m512i d, __m512i out[4])
{
    __m512i t0 = _mm512_unpacklo_epi32(a, b), t1 = _mm512_unpackhi_epi32(a, b);
    __m512i t2 = _mm512_unpacklo_epi32(c, d), t3 = _mm512_unpackhi_epi32(c, d);

    out[0] = _mm512_unpacklo_epi64(t0, t2);
    out[1] = _mm512_unpackhi_epi64(t0, t2);
    out[2] = _mm512_unpacklo_epi64(t1, t3);
    out[3] = _mm512_unpackhi_epi64(t1, t3);
}


TGT static INLINE __m128i
load16_or_zero(const uint8_t *p, int present)
{
    return present ? _mm_loadu_si128((const __m128i *) p) : _mm_setzero_si128();
}


TGT static INLINE __m256i
load32_or_zero(const uint8_t *p, int present)
{
    return present ? _mm256_loadu_si256((const __m256i *) p)
                   : _mm256_setzero_si256();
}


/* 16 Q4_0/Q4_1 blocks (n present) as 8 vectors of unsigned groups, lane j
 * = block j: z[m] holds blocks m, 4+m, 8+m, 12+m (one per 128-bit lane),
 * so after the in-lane transpose lane 4L + m is block 4L + m */
TGT static INLINE void
transpose_q4(const uint8_t *w, int bytes, int off, int n, __m512i g[8])
{
    __m512i z[4], o[4];
    __m512i m4 = _mm512_set1_epi8(0x0f);

#pragma GCC unroll 8
    for (int m = 0; m < 4; m++) {
        const uint8_t *b = w + m * bytes + off;
        __m512i v = _mm512_castsi128_si512(load16_or_zero(b, m < n));
        v = _mm512_inserti32x4(v, load16_or_zero(b + 4 * bytes, 4 + m < n), 1);
        v = _mm512_inserti32x4(v, load16_or_zero(b + 8 * bytes, 8 + m < n), 2);
        z[m] = _mm512_inserti32x4(v, load16_or_zero(b + 12 * bytes, 12 + m < n), 3);
    }
    transpose4(z[0], z[1], z[2], z[3], o);
#pragma GCC unroll 8
    for (int q = 0; q < 4; q++) {
        g[q] = _mm512_and_si512(o[q], m4);
        g[q + 4] = _mm512_and_si512(_mm512_srli_epi16(o[q], 4), m4);
    }
}


/* 16 Q8_0 blocks as 8 vectors of groups + 128 (unsigned), lane j = block
 * j: z[m] = blocks m and 8+m; two in-lane transposes give, per dword q,
 * blocks 0-3 and 8-11 (from z[0..3]) and 4-7 and 12-15 (from z[4..7]) */
TGT static INLINE void
transpose_q8(const uint8_t *w, int bytes, int n, __m512i g[8])
{
    __m512i z[8], o[4], p[4];
    const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19,
                                         8, 9, 10, 11, 24, 25, 26, 27);
    const __m512i hi = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23,
                                         12, 13, 14, 15, 28, 29, 30, 31);

#pragma GCC unroll 8
    for (int m = 0; m < 8; m++) {
        const uint8_t *b = w + m * bytes + 2;
        z[m] = _mm512_inserti64x4(_mm512_castsi256_si512(
                   load32_or_zero(b, m < n)),
                   load32_or_zero(b + 8 * bytes, 8 + m < n), 1);
    }
    transpose4(z[0], z[1], z[2], z[3], o);
    transpose4(z[4], z[5], z[6], z[7], p);
#pragma GCC unroll 8
    for (int q = 0; q < 4; q++) {
        g[q] = _mm512_xor_si512(_mm512_permutex2var_epi32(o[q], lo, p[q]),
                                _mm512_set1_epi8((char) 0x80));
        g[q + 4] = _mm512_xor_si512(_mm512_permutex2var_epi32(o[q], hi, p[q]),
                                    _mm512_set1_epi8((char) 0x80));
    }
}


TGT static INLINE void
transpose4_256(__m256i a, __m256i b, __m256i c, __m256i d, __m256i out[4])
{
    __m256i t0 = _mm256_unpacklo_epi32(a, b), t1 = _mm256_unpackhi_epi32(a, b);
    __m256i t2 = _mm256_unpacklo_epi32(c, d), t3 = _mm256_unpackhi_epi32(c, d);

    out[0] = _mm256_unpacklo_epi64(t0, t2);
    out[1] = _mm256_unpackhi_epi64(t0, t2);
    out[2] = _mm256_unpacklo_epi64(t1, t3);
    out[3] = _mm256_unpackhi_epi64(t1, t3);
}


/* the same for a last chunk of at most 8 blocks, in 256-bit registers
 * (lanes 0-7 of the 16-lane layout): z[m] = blocks m, 4+m */
TGT static INLINE void
transpose_q4_8(const uint8_t *w, int bytes, int off, int n, __m256i g[8])
{
    __m256i z[4], o[4], m4 = _mm256_set1_epi8(0x0f);

#pragma GCC unroll 8
    for (int m = 0; m < 4; m++) {
        const uint8_t *b = w + m * bytes + off;
        z[m] = _mm256_set_m128i(load16_or_zero(b + 4 * bytes, 4 + m < n),
                                load16_or_zero(b, m < n));
    }
    transpose4_256(z[0], z[1], z[2], z[3], o);
#pragma GCC unroll 8
    for (int q = 0; q < 4; q++) {
        g[q] = _mm256_and_si256(o[q], m4);
        g[q + 4] = _mm256_and_si256(_mm256_srli_epi16(o[q], 4), m4);
    }
}


/* z[m] = block m; lanes 0-3 of dword q from z[0..3], 4-7 from z[4..7] */
TGT static INLINE void
transpose_q8_8(const uint8_t *w, int bytes, int n, __m256i g[8])
{
    __m256i z[8], o[4], p[4];

#pragma GCC unroll 8
    for (int m = 0; m < 8; m++) {
        z[m] = _mm256_xor_si256(load32_or_zero(w + m * bytes + 2, m < n),
                                _mm256_set1_epi8((char) 0x80));
    }
    transpose4_256(z[0], z[1], z[2], z[3], o);
    transpose4_256(z[4], z[5], z[6], z[7], p);
#pragma GCC unroll 8
    for (int q = 0; q < 4; q++) {
        g[q] = _mm256_permute2x128_si256(o[q], p[q], 0x20);
        g[q + 4] = _mm256_permute2x128_si256(o[q], p[q], 0x31);
    }
}


TGT static INLINE uint32_t
dword_or_zero(const uint8_t *p, int present)
{
    uint32_t v = 0;

    if (present) {
        memcpy(&v, p, 4);
    }
    return v;
}


/* the first four bytes of blocks 0..15 (zero from block n on): d in the
 * low half, Q4_1's m in the high half; built in registers (a gather is
 * slow on some cores, and a vector load of scalar stores stalls store
 * forwarding) */
TGT static INLINE __m512i
first_dwords(const uint8_t *w, int bytes, int n)
{
    __m128i q[4];

#pragma GCC unroll 8
    for (int m = 0; m < 4; m++) {
        const uint8_t *b = w + 4 * m * bytes;
        __m128i v = _mm_cvtsi32_si128((int) dword_or_zero(b, 4 * m < n));
        v = _mm_insert_epi32(v, (int) dword_or_zero(b + bytes, 4 * m + 1 < n), 1);
        v = _mm_insert_epi32(v, (int) dword_or_zero(b + 2 * bytes, 4 * m + 2 < n), 2);
        q[m] = _mm_insert_epi32(v, (int) dword_or_zero(b + 3 * bytes, 4 * m + 3 < n), 3);
    }
    return _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(
               _mm512_castsi128_si512(q[0]), q[1], 1), q[2], 2), q[3], 3);
}


/* exact block sums of 16 blocks (lane j = block j) for one activation
 * row: four short dpbusd chains (integers: grouping cannot matter) */
TGT static INLINE __m512i
block_sums16(const int kind, const __m512i g[8], const act_block *a)
{
    __m512i i0 = kind == Q4_1 ? _mm512_setzero_si512()
                              : _mm512_loadu_si512(a->bias);
    __m512i i1 = _mm512_setzero_si512(), i2 = i1, i3 = i1;

    i0 = _mm512_dpbusd_epi32(i0, g[0], _mm512_loadu_si512(a->qs[0]));
    i1 = _mm512_dpbusd_epi32(i1, g[1], _mm512_loadu_si512(a->qs[1]));
    i2 = _mm512_dpbusd_epi32(i2, g[2], _mm512_loadu_si512(a->qs[2]));
    i3 = _mm512_dpbusd_epi32(i3, g[3], _mm512_loadu_si512(a->qs[3]));
    i0 = _mm512_dpbusd_epi32(i0, g[4], _mm512_loadu_si512(a->qs[4]));
    i1 = _mm512_dpbusd_epi32(i1, g[5], _mm512_loadu_si512(a->qs[5]));
    i2 = _mm512_dpbusd_epi32(i2, g[6], _mm512_loadu_si512(a->qs[6]));
    i3 = _mm512_dpbusd_epi32(i3, g[7], _mm512_loadu_si512(a->qs[7]));
    return _mm512_add_epi32(_mm512_add_epi32(i0, i1), _mm512_add_epi32(i2, i3));
}


/* the same for lanes 0-7 (a last chunk of at most 8 blocks) */
TGT static INLINE __m256i
block_sums8(const int kind, const __m256i g[8], const act_block *a)
{
    __m256i i0 = kind == Q4_1 ? _mm256_setzero_si256()
                              : _mm256_loadu_si256((const __m256i *) a->bias);
    __m256i i1 = _mm256_setzero_si256(), i2 = i1, i3 = i1;

#define QS8(v) _mm256_loadu_si256((const __m256i *) a->qs[v])
    i0 = _mm256_dpbusd_epi32(i0, g[0], QS8(0));
    i1 = _mm256_dpbusd_epi32(i1, g[1], QS8(1));
    i2 = _mm256_dpbusd_epi32(i2, g[2], QS8(2));
    i3 = _mm256_dpbusd_epi32(i3, g[3], QS8(3));
    i0 = _mm256_dpbusd_epi32(i0, g[4], QS8(4));
    i1 = _mm256_dpbusd_epi32(i1, g[5], QS8(5));
    i2 = _mm256_dpbusd_epi32(i2, g[6], QS8(6));
    i3 = _mm256_dpbusd_epi32(i3, g[7], QS8(7));
#undef QS8
    return _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
}


/* one weight row against n_x < 8 activation rows, 16 blocks at a time;
 * blocks 16c + m and then 16c + 8 + m go into acc[m] */
TGT static INLINE void
row_small(const int kind, const int bytes, int nb, const uint8_t *w,
    const uint8_t *act, size_t act_stride, int n_x, float *out,
    size_t ld_out)
{
    __m256 acc[SMALL_N_X], macc[SMALL_N_X];

    for (int x = 0; x < n_x; x++) {
        acc[x] = macc[x] = _mm256_setzero_ps();
    }
    for (int c = 0; c * LANES < nb; c++) {
        const uint8_t *wc = w + (size_t) c * LANES * bytes;
        int n = nb - c * LANES < LANES ? nb - c * LANES : LANES;
        __m512i dm = first_dwords(wc, bytes, n);
        __m512 dwv = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));
        __m512 mwv = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(
                         _mm512_srli_epi32(dm, 16)));

        if (n <= 8) {                /* half the work for a short tail */
            __m256i g[8];
            __m256 dw8 = _mm512_castps512_ps256(dwv);
            __m256 mw8 = _mm512_castps512_ps256(mwv);
            if (kind == Q8_0) {
                transpose_q8_8(wc, bytes, n, g);
            } else {
                transpose_q4_8(wc, bytes, kind == Q4_1 ? 4 : 2, n, g);
            }
            for (int x = 0; x < n_x; x++) {
                const act_block *a = (const act_block *) (act + x * act_stride) + c;
                __m256 gf = _mm256_cvtepi32_ps(block_sums8(kind, g, a));
                __m256 dd = _mm256_mul_ps(dw8, _mm256_loadu_ps(a->d));
                acc[x] = _mm256_fmadd_ps(dd, gf, acc[x]);
                if (kind == Q4_1) {
                    macc[x] = _mm256_fmadd_ps(mw8, _mm256_loadu_ps(a->s), macc[x]);
                }
            }
            continue;
        }

        __m512i g[8];
        if (kind == Q8_0) {
            transpose_q8(wc, bytes, n, g);
        } else {
            transpose_q4(wc, bytes, kind == Q4_1 ? 4 : 2, n, g);
        }
        for (int x = 0; x < n_x; x++) {
            const act_block *a = (const act_block *) (act + x * act_stride) + c;
            __m512 gf = _mm512_cvtepi32_ps(block_sums16(kind, g, a));
            __m512 dd = _mm512_mul_ps(dwv, _mm512_loadu_ps(a->d));
            acc[x] = _mm256_fmadd_ps(_mm512_castps512_ps256(dd),
                                     _mm512_castps512_ps256(gf), acc[x]);
            acc[x] = _mm256_fmadd_ps(_mm512_extractf32x8_ps(dd, 1),
                                     _mm512_extractf32x8_ps(gf, 1), acc[x]);
            if (kind == Q4_1) {
                __m512 sv = _mm512_loadu_ps(a->s);
                macc[x] = _mm256_fmadd_ps(_mm512_castps512_ps256(mwv),
                                          _mm512_castps512_ps256(sv), macc[x]);
                macc[x] = _mm256_fmadd_ps(_mm512_extractf32x8_ps(mwv, 1),
                                          _mm512_extractf32x8_ps(sv, 1), macc[x]);
            }
        }
    }
    for (int x = 0; x < n_x; x++) {
        out[x * ld_out] = kind == Q4_1 ? hsum8_ps(acc[x]) + hsum8_ps(macc[x])
                                       : hsum8_ps(acc[x]);
    }
}


TGT static INLINE void
tile_q32(const int kind, const int bytes, const llm_tile *t)
{
    int nb = t->n / LLM_QK;

    if (t->n_x < SMALL_N_X) {
        for (int r = 0; r < t->n_w; r++) {
            row_small(kind, bytes, nb, t->w + r * t->w_stride, t->act,
                      t->act_stride, t->n_x, t->out + r, t->ld_out);
        }
        return;
    }
    for (int i = 0; i < t->n_x; i += LANES) {
        const act_block *a = (const act_block *) (t->act
                             + (size_t) (i / LANES) * t->act_stride);
        int n = t->n_x - i < LANES ? t->n_x - i : LANES;
        for (int r = 0; r < t->n_w; r++) {
            row_group(kind, bytes, nb, t->w + r * t->w_stride, a, n,
                      t->out + i * t->ld_out + r, t->ld_out);
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


/* --- packed weights (pack.c): lanes are 16 weight rows ------------------ */

/*
 * One group of 16 packed rows against X <= 4 activation rows. A block's
 * 8 quant vectors are loaded (and for 4-bit types unpacked) once for the
 * X rows; each activation dword is broadcast to the 16 rows. The eight
 * accumulators of the canonical order are taken one at a time (blocks
 * j, j + 8, ... into accumulator j), so only X of them are live.
 */
/* Decode reads every weight once, from DRAM: ask for the bytes this far
 * ahead of the block being read. A group of 16 rows is only 6-15 KB at
 * SmolLM2's widths, too short for the hardware prefetcher to ramp up
 * before the next one (which the prefetch reaches into). Q4_0 and Q4_1
 * keep 4 KB: SmolLM2 Q4_1 (96 MB, within this machine's last-level
 * cache) decodes 1.15-1.4x faster at 4 KB than at 1 KB; the other types
 * take LLM_DECODE_PF_AHEAD (simd.h: gpt-oss's MXFP4 1.07-1.12x, the 8B
 * Q8_0 1.04-1.08x at 1 KB against 4 KB; docs/perf.md "Prefetch distance
 * at two threads"). Q8_0 also asks L2 for the bytes PF_L2_Q8 ahead: its
 * decode kernel streamed 14.5-16.5 GB/s a thread against 19 for a plain
 * read loop (not for its 64-byte quant loads that straddle two lines:
 * a copy with them aligned read the same); with it the 8B Q8_0 decodes
 * 1.05x faster at two threads (3.84-4.05 against 3.77-3.81 tok/s, four
 * interleaved runs; 4 KB 1.04x, 8 KB 0.97x), the 1B 1.03-1.09x; MXFP4
 * lost 1% with it (session 15). */
#define PF_AHEAD_Q4  4096
#define PF_L2_Q8     2048

TGT static INLINE void
prefetch_ahead(const int kind, const uint8_t *blk, size_t bytes)
{
    const size_t ahead = (kind == Q4_0 || kind == Q4_1)
                         ? PF_AHEAD_Q4 : LLM_DECODE_PF_AHEAD;

    for (size_t o = 0; o < bytes; o += 64) {
        _mm_prefetch((const char *) blk + ahead + o, _MM_HINT_T0);
    }
    if (kind == Q8_0) {
        for (size_t o = 0; o < bytes; o += 64) {
            _mm_prefetch((const char *) blk + PF_L2_Q8 + o, _MM_HINT_T1);
        }
    }
}


/* a block of a packed group made ready once for many activation rows:
 * the 8 quant vectors as unsigned bytes, then d and Q4_1's m as floats */
#define UB_BYTES   640
/* 60 KB on the stack (two groups: 120 KB, in L2): 96 blocks take a
 * gpt-oss expert's 2880 columns (90 blocks), which at 64 fell to
 * packed_x's unpack per pass of 4 rows (1.4x the time, bench/matmul
 * packed MXFP4, docs/perf.md) */
#define UB_BLOCKS  96

/* the 4-bit kinds' quant vectors made unsigned bytes of their integer
 * plus KIND_BIAS: Q5_0's fifth bits added under hm's byte masks, IQ4_NL's
 * and MXFP4's nibbles looked up as value + 128 */
TGT static INLINE void
finish_nibbles(const int kind, const uint8_t *blk, __m512i g[8])
{
    if (kind == Q5_0) {
        const __m512i v16 = _mm512_set1_epi8(16);
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            uint64_t hm;
            memcpy(&hm, blk + 32 + 8 * k, 8);
            g[k] = _mm512_mask_add_epi8(g[k], _cvtu64_mask64(hm), g[k], v16);
        }
    } else if (kind == IQ4NL || kind == MXFP4) {
        const __m512i tbl = _mm512_broadcast_i32x4(_mm_xor_si128(
            _mm_loadu_si128((const __m128i *) (kind == IQ4NL
                                               ? llm_kvalues_iq4nl
                                               : llm_kvalues_mxfp4)),
            _mm_set1_epi8((char) 0x80)));
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            g[k] = _mm512_shuffle_epi8(tbl, g[k]);
        }
    }
}


/* a packed block's 16 scales as floats: f16 d, or MXFP4's E8M0 bytes as
 * llm_e8m0_half exactly (normal: (e - 1) << 23; e < 2: the subnormal
 * 0x00200000 << e) */
TGT static INLINE __m512
packed_scales(const int kind, const uint8_t *blk)
{
    if (kind == MXFP4) {
        __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)
                                                         blk));
        __m512i normal = _mm512_slli_epi32(
            _mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
        __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
        __mmask16 small = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2));

        return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal,
                                                           sub));
    }
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) blk));
}


TGT static INLINE void
unpack_group(const int kind, const uint8_t *w, size_t pb, int nb, uint8_t *ub)
{
    const int qa = KIND_QA(kind);
    const __m512i m4 = _mm512_set1_epi8(0x0f);

    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t) b * pb;
        uint8_t *u = ub + (size_t) b * UB_BYTES;
        prefetch_ahead(kind, blk, pb);

        if (kind == Q8_0) {
            for (int k = 0; k < 8; k++) {
                _mm512_store_si512(u + 64 * k,
                                   _mm512_loadu_si512(blk + qa + 64 * k));
            }
        } else {
            __m512i g[8];
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) {
                __m512i v = _mm512_loadu_si512(blk + qa + 64 * q);
                g[q] = _mm512_and_si512(v, m4);
                g[q + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            }
            finish_nibbles(kind, blk, g);
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                _mm512_store_si512(u + 64 * k, g[k]);
            }
        }
        _mm512_store_ps(u + 512, packed_scales(kind, blk));
        if (kind == Q4_1) {
            _mm512_store_ps(u + 576, _mm512_cvtph_ps(_mm256_loadu_si256(
                                         (const __m256i *) (blk + 32))));
        }
    }
}


/* a packed block's 16 rows as 8 vectors of unsigned bytes (group k:
 * bytes 4k..4k+3 of every row), its scales d and, for Q4_1, mins m */
TGT static INLINE void
packed_block(const int kind, const uint8_t *blk, __m512i g[8], __m512 *dw,
    __m512 *mw)
{
    const int qa = KIND_QA(kind);
    const __m512i m4 = _mm512_set1_epi8(0x0f);

    *dw = packed_scales(kind, blk);
    *mw = kind == Q4_1 ? _mm512_cvtph_ps(_mm256_loadu_si256(
                             (const __m256i *) (blk + 32)))
                       : _mm512_setzero_ps();
    if (kind == Q8_0) {
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            g[k] = _mm512_loadu_si512(blk + qa + 64 * k);
        }
        return;
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        __m512i v = _mm512_loadu_si512(blk + qa + 64 * q);
        g[q] = _mm512_and_si512(v, m4);
        g[q + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
    finish_nibbles(kind, blk, g);
}


/* the exact integer sums of a block's 16 rows with one activation block
 * (two chains of vpdpbusd), scaled and added into acc */
TGT static INLINE __m512
packed_dot(const int kind, const __m512i g[8], __m512 dw,
    const llm_act_p *a, __m512 acc)
{
    const int bias = -KIND_BIAS(kind);
    const int32_t *qd = (const int32_t *) a->qs;
    __m512i i0 = kind == Q4_1 ? _mm512_setzero_si512()
                              : _mm512_set1_epi32(bias * a->sum);
    __m512i i1 = _mm512_setzero_si512();

    i0 = _mm512_dpbusd_epi32(i0, g[0], _mm512_set1_epi32(qd[0]));
    i1 = _mm512_dpbusd_epi32(i1, g[1], _mm512_set1_epi32(qd[1]));
    i0 = _mm512_dpbusd_epi32(i0, g[2], _mm512_set1_epi32(qd[2]));
    i1 = _mm512_dpbusd_epi32(i1, g[3], _mm512_set1_epi32(qd[3]));
    i0 = _mm512_dpbusd_epi32(i0, g[4], _mm512_set1_epi32(qd[4]));
    i1 = _mm512_dpbusd_epi32(i1, g[5], _mm512_set1_epi32(qd[5]));
    i0 = _mm512_dpbusd_epi32(i0, g[6], _mm512_set1_epi32(qd[6]));
    i1 = _mm512_dpbusd_epi32(i1, g[7], _mm512_set1_epi32(qd[7]));
    return _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(a->d)),
                           _mm512_cvtepi32_ps(_mm512_add_epi32(i0, i1)), acc);
}


TGT static INLINE void
packed_x(const int kind, const int X, const uint8_t *w, size_t pb, int nb,
    const uint8_t *ub, const uint8_t *act, size_t act_stride, float *out,
    size_t ld_out, __mmask16 rows)
{
    __m512 ra[4][8], rm[4][8];

    for (int j = 0; j < 8; j++) {
        __m512 acc[4], macc[4];

#pragma GCC unroll 4
        for (int x = 0; x < X; x++) {
            acc[x] = macc[x] = _mm512_setzero_ps();
        }
        for (int b = j; b < nb; b += 8) {
            const uint8_t *blk = w + (size_t) b * pb;
            __m512 dw, mw = _mm512_setzero_ps();
            __m512i g[8];

            if (ub != NULL) {
                const uint8_t *u = ub + (size_t) b * UB_BYTES;
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++) {
                    g[k] = _mm512_load_si512(u + 64 * k);
                }
                dw = _mm512_load_ps(u + 512);
                if (kind == Q4_1) {
                    mw = _mm512_load_ps(u + 576);
                }
            } else {
                packed_block(kind, blk, g, &dw, &mw);
            }
#pragma GCC unroll 4
            for (int x = 0; x < X; x++) {
                const llm_act_p *a = (const llm_act_p *) (act + x * act_stride)
                                     + b;

                acc[x] = packed_dot(kind, g, dw, a, acc[x]);
                if (kind == Q4_1) {
                    macc[x] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a->s),
                                              macc[x]);
                }
            }
        }
#pragma GCC unroll 4
        for (int x = 0; x < X; x++) {
            ra[x][j] = acc[x];
            rm[x][j] = macc[x];
        }
    }
    for (int x = 0; x < X; x++) {
        __m512 r = hsum8_regs(ra[x]);
        if (kind == Q4_1) {
            r = _mm512_add_ps(r, hsum8_regs(rm[x]));
        }
        _mm512_mask_storeu_ps(out + x * ld_out, rows, r);
    }
}


/* one activation row (decode): the same sums as packed_x with X = 1, but
 * the blocks are read in memory order with all eight accumulators live,
 * so the weights stream forward (packed_x's eight passes of stride 8
 * blocks defeat the hardware prefetcher); prefetch_ahead asks for them
 * early too */

TGT static INLINE void
packed_1(const int kind, const uint8_t *w, size_t pb, int nb,
    const uint8_t *act, float *out, __mmask16 rows)
{
    __m512 acc[8], macc[8], r;
    const llm_act_p *a = (const llm_act_p *) act;

#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        acc[j] = macc[j] = _mm512_setzero_ps();
    }
    for (int b0 = 0; b0 < nb; b0 += 8) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            const int b = b0 + j;
            if (b >= nb) {
                break;
            }
            const uint8_t *blk = w + (size_t) b * pb;
            __m512 dw, mw;
            __m512i g[8];

            prefetch_ahead(kind, blk, pb);
            packed_block(kind, blk, g, &dw, &mw);
            acc[j] = packed_dot(kind, g, dw, &a[b], acc[j]);
            if (kind == Q4_1) {
                macc[j] = _mm512_fmadd_ps(mw, _mm512_set1_ps(a[b].s), macc[j]);
            }
        }
    }
    r = hsum8_regs(acc);
    if (kind == Q4_1) {
        r = _mm512_add_ps(r, hsum8_regs(macc));
    }
    _mm512_mask_storeu_ps(out, rows, r);
}


/*
 * Two groups (32 weight rows) against X activation rows, from unpacked
 * copies: each activation dword broadcast feeds two vpdpbusd (one per
 * group) and each weight vector X of them, where packed_x's feeds one and
 * X. Per block and row the loads fall from about 1.3 per vpdpbusd to 0.75,
 * which is what bounds prefill's matmuls. The same sums as packed_x per
 * group (one integer chain instead of two: integers are exact).
 */
TGT static INLINE void
packed_x2(const int kind, const int X, const uint8_t *ub, int nb,
    const uint8_t *act, size_t act_stride, float *out, size_t ld_out,
    __mmask16 rows0, __mmask16 rows1)
{
    __m512 ra[4][2][8], rm[4][2][8];
    const int bias = -KIND_BIAS(kind);
    const uint8_t *ub1 = ub + (size_t) nb * UB_BYTES;

    for (int j = 0; j < 8; j++) {
        __m512 acc[4][2], macc[4][2];

#pragma GCC unroll 4
        for (int x = 0; x < X; x++) {
            acc[x][0] = acc[x][1] = macc[x][0] = macc[x][1]
                = _mm512_setzero_ps();
        }
        for (int b = j; b < nb; b += 8) {
            const uint8_t *u0 = ub + (size_t) b * UB_BYTES;
            const uint8_t *u1 = ub1 + (size_t) b * UB_BYTES;
            const llm_act_p *a[4];
            __m512i is[4][2];

#pragma GCC unroll 4
            for (int x = 0; x < X; x++) {
                a[x] = (const llm_act_p *) (act + x * act_stride) + b;
                is[x][0] = is[x][1] = kind == Q4_1
                    ? _mm512_setzero_si512()
                    : _mm512_set1_epi32(bias * a[x]->sum);
            }
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                __m512i g0 = _mm512_load_si512(u0 + 64 * k);
                __m512i g1 = _mm512_load_si512(u1 + 64 * k);
#pragma GCC unroll 4
                for (int x = 0; x < X; x++) {
                    __m512i bk = _mm512_set1_epi32(
                                     ((const int32_t *) a[x]->qs)[k]);
                    is[x][0] = _mm512_dpbusd_epi32(is[x][0], g0, bk);
                    is[x][1] = _mm512_dpbusd_epi32(is[x][1], g1, bk);
                }
            }
            __m512 dw0 = _mm512_load_ps(u0 + 512);
            __m512 dw1 = _mm512_load_ps(u1 + 512);
#pragma GCC unroll 4
            for (int x = 0; x < X; x++) {
                __m512 d = _mm512_set1_ps(a[x]->d);
                acc[x][0] = _mm512_fmadd_ps(_mm512_mul_ps(dw0, d),
                                            _mm512_cvtepi32_ps(is[x][0]),
                                            acc[x][0]);
                acc[x][1] = _mm512_fmadd_ps(_mm512_mul_ps(dw1, d),
                                            _mm512_cvtepi32_ps(is[x][1]),
                                            acc[x][1]);
            }
            if (kind == Q4_1) {
                __m512 mw0 = _mm512_load_ps(u0 + 576);
                __m512 mw1 = _mm512_load_ps(u1 + 576);
#pragma GCC unroll 4
                for (int x = 0; x < X; x++) {
                    __m512 sx = _mm512_set1_ps(a[x]->s);
                    macc[x][0] = _mm512_fmadd_ps(mw0, sx, macc[x][0]);
                    macc[x][1] = _mm512_fmadd_ps(mw1, sx, macc[x][1]);
                }
            }
        }
#pragma GCC unroll 4
        for (int x = 0; x < X; x++) {
            ra[x][0][j] = acc[x][0];
            ra[x][1][j] = acc[x][1];
            rm[x][0][j] = macc[x][0];
            rm[x][1][j] = macc[x][1];
        }
    }
    for (int x = 0; x < X; x++) {
        for (int g = 0; g < 2; g++) {
            __m512 r = hsum8_regs(ra[x][g]);
            if (kind == Q4_1) {
                r = _mm512_add_ps(r, hsum8_regs(rm[x][g]));
            }
            _mm512_mask_storeu_ps(out + x * ld_out + 16 * g,
                                  g ? rows1 : rows0, r);
        }
    }
}


/* a tile of two groups (n_w > 16) and many activation rows */
TGT static INLINE void
tile_packed2(const int kind, const int bytes, const llm_tile *t)
{
    size_t pb = (size_t) 16 * bytes;
    int nb = t->n / LLM_QK, i;
    __mmask16 rows1 = (__mmask16) ((1u << (t->n_w - 16)) - 1);
    uint8_t ubuf[2 * UB_BLOCKS * UB_BYTES] __attribute__((aligned(64)));

    unpack_group(kind, t->w, pb, nb, ubuf);
    unpack_group(kind, t->w + t->w_stride, pb, nb,
                 ubuf + (size_t) nb * UB_BYTES);
    for (i = 0; i + 4 <= t->n_x; i += 4) {
        packed_x2(kind, 4, ubuf, nb, t->act + i * t->act_stride,
                  t->act_stride, t->out + i * t->ld_out, t->ld_out, 0xffff,
                  rows1);
    }
    switch (t->n_x - i) {
    case 3:
        packed_x2(kind, 3, ubuf, nb, t->act + i * t->act_stride,
                  t->act_stride, t->out + i * t->ld_out, t->ld_out, 0xffff,
                  rows1);
        break;
    case 2:
        packed_x2(kind, 2, ubuf, nb, t->act + i * t->act_stride,
                  t->act_stride, t->out + i * t->ld_out, t->ld_out, 0xffff,
                  rows1);
        break;
    case 1:
        packed_x2(kind, 1, ubuf, nb, t->act + i * t->act_stride,
                  t->act_stride, t->out + i * t->ld_out, t->ld_out, 0xffff,
                  rows1);
        break;
    }
}


TGT static INLINE void
tile_packed1(const int kind, const int bytes, const llm_tile *t)
{
    size_t pb = (size_t) 16 * bytes;
    int nb = t->n / LLM_QK, i;
    __mmask16 rows = (__mmask16) ((1u << t->n_w) - 1);
    uint8_t ubuf[UB_BLOCKS * UB_BYTES] __attribute__((aligned(64)));
    const uint8_t *ub = NULL;

    if (t->n_x == 1) {
        packed_1(kind, t->w, pb, nb, t->act, t->out, rows);
        return;
    }
    /* two or more activation rows: unpack the group once for all of them
       (reading it in memory order) instead of once per pass of 4, whose
       eight passes of stride 8 blocks would each read it from DRAM */
    if (nb <= UB_BLOCKS) {
        unpack_group(kind, t->w, pb, nb, ubuf);
        ub = ubuf;
    }
    for (i = 0; i + 4 <= t->n_x; i += 4) {
        packed_x(kind, 4, t->w, pb, nb, ub, t->act + i * t->act_stride,
                 t->act_stride, t->out + i * t->ld_out, t->ld_out, rows);
    }
    switch (t->n_x - i) {
    case 3:
        packed_x(kind, 3, t->w, pb, nb, ub, t->act + i * t->act_stride,
                 t->act_stride, t->out + i * t->ld_out, t->ld_out, rows);
        break;
    case 2:
        packed_x(kind, 2, t->w, pb, nb, ub, t->act + i * t->act_stride,
                 t->act_stride, t->out + i * t->ld_out, t->ld_out, rows);
        break;
    case 1:
        packed_x(kind, 1, t->w, pb, nb, ub, t->act + i * t->act_stride,
                 t->act_stride, t->out + i * t->ld_out, t->ld_out, rows);
        break;
    }
}


/* a tile of one group, or two (matmul.c hands two for many activation
 * rows): two groups of up to 64 blocks go to tile_packed2 */
TGT static INLINE void
tile_packed(const int kind, const int bytes, const llm_tile *t)
{
    llm_tile one;

    if (t->n_w <= 16) {
        tile_packed1(kind, bytes, t);
        return;
    }
    if (t->n / LLM_QK <= UB_BLOCKS) {
        tile_packed2(kind, bytes, t);
        return;
    }
    one = *t;
    one.n_w = 16;
    tile_packed1(kind, bytes, &one);
    one.w += t->w_stride;
    one.n_w = t->n_w - 16;
    one.out += 16;
    tile_packed1(kind, bytes, &one);
}


TGT static void
tile_q4_0p(const llm_tile *t)
{
    tile_packed(Q4_0, sizeof(llm_block_q4_0), t);
}


TGT static void
tile_q4_1p(const llm_tile *t)
{
    tile_packed(Q4_1, sizeof(llm_block_q4_1), t);
}


TGT static void
tile_q8_0p(const llm_tile *t)
{
    tile_packed(Q8_0, sizeof(llm_block_q8_0), t);
}


TGT static void
tile_q5_0p(const llm_tile *t)
{
    tile_packed(Q5_0, sizeof(llm_block_q5_0), t);
}


TGT static void
tile_iq4_nlp(const llm_tile *t)
{
    tile_packed(IQ4NL, sizeof(llm_block_iq4_nl), t);
}


TGT static void
tile_mxfp4p(const llm_tile *t)
{
    tile_packed(MXFP4, sizeof(llm_block_mxfp4), t);
}


/* --- float weights: register-blocked tiles ------------------------------ */

/*
 * F32/F16/BF16 weights x float rows, FR weight rows by FC activation rows
 * a pass: each weight vector is loaded (and converted) once and used for
 * every activation row. simd.h's order per output: element j goes to lane
 * j % 32 (register lo: lanes 0..15, hi: 16..31) with fma; a short last
 * chunk fmas only its lanes (masked, the others keep their value); then
 * s[k] = (a[k] + a[k+8]) + (a[k+16] + a[k+24]) and llm_hsum8's order.
 */
enum { F32W, F16W, BF16W };
#define FR 4                    /* weight rows a pass */
#define FC 3                    /* activation rows a pass (2*FR*FC zmm) */
/* weight rows a pass at one activation row (decode: 2*FR1 + FR1 + 1 zmm):
 * twice the rows streaming from DRAM at once, F16 n_x 1 over 519 MB on
 * one thread 12.5-12.9 -> 13.4-13.7 GB/s (docs/perf.md) */
#define FR1 8
/* one activation row (decode) streams its weights from DRAM: each of the
 * weight rows prefetched this many bytes ahead, and near a row's end the
 * same place in the row FR1 on (the next pass's, whose first bytes were
 * cold otherwise: 7 of every 8 rows started on a miss). gpt-oss-20b-8l
 * decode at 2 threads (bench/decode; the F16 classifier and attention
 * are 76% of its bytes): 1024 ahead, no next pass 14.62-15.52 tokens/s;
 * with it 15.47-16.21; at 512 16.05-16.29 (docs/perf.md "Prefetch distance at
 * two threads") */
#define FLOAT_PREFETCH  512
/* fully unrolled, so that acc[][][] lives in registers; not under the
   sanitizers, whose build needs the same operations, not the registers,
   and compiled 1.5x slower unrolled (as attention.c's ATT_UNROLL) */
#if defined(__SANITIZE_ADDRESS__)
#define UNROLL
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNROLL
#endif
#endif
#ifndef UNROLL
#define UNROLL _Pragma("GCC unroll 8")
#endif

TGT static INLINE __m512
load16_w(const int kind, const uint8_t *w, int j, __mmask16 m)
{
    if (kind == F32W) {
        return _mm512_maskz_loadu_ps(m, (const float *) w + j);
    }
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *) w + j);
    if (kind == F16W) {
        return _mm512_cvtph_ps(h);
    }
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h),
                                                 16));
}


TGT static INLINE float
reduce32_ps(__m512 lo, __m512 hi)
{
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(lo),
                             _mm512_extractf32x8_ps(lo, 1));
    __m256 b = _mm256_add_ps(_mm512_castps512_ps256(hi),
                             _mm512_extractf32x8_ps(hi, 1));
    return hsum8_ps(_mm256_add_ps(a, b));
}


/* lanes m of the 16 at element j, half lh (0: lanes 0..15 of the 32) */
#define FLOAT_STEP(j, m, lh)                                                  \
    do {                                                                      \
        __m512 wv[FR1];                                                       \
        UNROLL for (int r = 0; r < nr; r++) {                                 \
            wv[r] = load16_w(kind, w + r * t->w_stride, (j), (m));            \
        }                                                                     \
        UNROLL for (int i = 0; i < nc; i++) {                                 \
            __m512 xv = _mm512_maskz_loadu_ps((m), x[i] + (j));               \
            UNROLL for (int r = 0; r < nr; r++) {                             \
                acc[r][i][lh] = _mm512_mask3_fmadd_ps(wv[r], xv,              \
                                                      acc[r][i][lh], (m));    \
            }                                                                 \
        }                                                                     \
    } while (0)

/* nr weight rows from w by nc activation rows from row i0 (constants
 * where inlined, so acc stays in registers) */
TGT static INLINE void
float_block(const int kind, const llm_tile *t, const uint8_t *w, int r0,
            int i0, const int nr, const int nc)
{
    __m512 acc[FR1][FC][2];
    const float *x[FC];
    int n = t->n, j = 0;

    UNROLL for (int i = 0; i < nc; i++) {
        x[i] = (const float *) (t->act + (i0 + i) * t->act_stride);
        UNROLL for (int r = 0; r < nr; r++) {
            acc[r][i][0] = _mm512_setzero_ps();
            acc[r][i][1] = _mm512_setzero_ps();
        }
    }
    for ( ; j + 32 <= n; j += 32) {
        if (nc == 1) {                /* decode: see FLOAT_PREFETCH */
            const size_t row = (kind == F32W ? 4 : 2) * (size_t) n;
            size_t off = (kind == F32W ? 4 : 2) * (size_t) j + FLOAT_PREFETCH;
            const uint8_t *p = off < row ? w + off
                               : w + nr * t->w_stride + (off - row);
            UNROLL for (int r = 0; r < nr; r++) {
                _mm_prefetch((const char *) (p + r * t->w_stride),
                             _MM_HINT_T0);
            }
        }
        FLOAT_STEP(j, 0xffff, 0);
        FLOAT_STEP(j + 16, 0xffff, 1);
    }
    if (j < n) {                    /* lanes 0..n-j-1 of the last chunk */
        int left = n - j;
        __mmask16 m0 = left >= 16 ? 0xffff : (__mmask16) ((1u << left) - 1);
        __mmask16 m1 = left <= 16 ? 0 : (__mmask16) ((1u << (left - 16)) - 1);
        FLOAT_STEP(j, m0, 0);
        if (m1) {
            FLOAT_STEP(j + 16, m1, 1);
        }
    }
    UNROLL for (int i = 0; i < nc; i++) {
        UNROLL for (int r = 0; r < nr; r++) {
            t->out[(i0 + i) * t->ld_out + r0 + r] =
                reduce32_ps(acc[r][i][0], acc[r][i][1]);
        }
    }
}

#undef FLOAT_STEP


TGT static INLINE void
float_rows(const int kind, const llm_tile *t, int r0, const int nr)
{
    const uint8_t *w = t->w + r0 * t->w_stride;
    int i = 0;

    for ( ; i + FC <= t->n_x; i += FC) {
        float_block(kind, t, w, r0, i, nr, FC);
    }
    switch (t->n_x - i) {
    case 2: float_block(kind, t, w, r0, i, nr, 2); break;
    case 1: float_block(kind, t, w, r0, i, nr, 1); break;
    }
}


TGT static INLINE void
tile_float(const int kind, const llm_tile *t)
{
    int r = 0;

    if (t->n_x == 1) {              /* decode: see FR1 */
        for ( ; r + FR1 <= t->n_w; r += FR1) {
            float_block(kind, t, t->w + r * t->w_stride, r, 0, FR1, 1);
        }
    }
    for ( ; r + FR <= t->n_w; r += FR) {
        float_rows(kind, t, r, FR);
    }
    switch (t->n_w - r) {
    case 3: float_rows(kind, t, r, 3); break;
    case 2: float_rows(kind, t, r, 2); break;
    case 1: float_rows(kind, t, r, 1); break;
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


const llm_kernel_set llm_kernels_avx512 = {
    .f32 = tile_f32, .f16 = tile_f16, .bf16 = tile_bf16,
    .q4_0 = tile_q4_0, .q4_1 = tile_q4_1, .q8_0 = tile_q8_0,
    .q4_K = llm_avx512_tile_q4_K, .q6_K = llm_avx512_tile_q6_K,
    .q5_0 = llm_avx512_tile_q5_0, .iq4_nl = llm_avx512_tile_iq4_nl,
    .mxfp4 = llm_avx512_tile_mxfp4,
    .q4_0p = tile_q4_0p, .q4_1p = tile_q4_1p, .q8_0p = tile_q8_0p,
    .q5_0p = tile_q5_0p, .iq4_nlp = tile_iq4_nlp, .mxfp4p = tile_mxfp4p,
    .q4_Kp = llm_avx512_tile_q4_Kp, .q6_Kp = llm_avx512_tile_q6_Kp,
    .q5_Kp = llm_avx512_tile_q5_Kp, .iq4_xsp = llm_avx512_tile_iq4_xsp,
    .q32_min_n_x = 1, .q32_layout = q32_layout, .q32_pack = q32_pack,
};

#else

const llm_kernel_set llm_kernels_avx512 = {
    .q32_min_n_x = 1 << 30, .q32_layout = q32_layout, .q32_pack = q32_pack,
};

#endif
