/*
 * AVX-512 VNNI kernels of the K-quants against q8k rows (issue 28), equal
 * to their scalar references bit for bit: each super-block's integers are
 * exact whatever instructions add them, and the float operations are the
 * reference's, one by one, in its order (simd.h, docs/numerics.md rule 8).
 *
 * Q4_K: a weight super-block is unpacked once into four vectors of 64
 * unsigned nibbles, vector k holding sub-blocks 2k (bytes 0-31) and 2k+1
 * (bytes 32-63), so it meets 64 consecutive activation bytes as they lie
 * in the q8k block; its 6-bit scales and mins are decoded once with
 * 32-bit masks. Then, per activation row (up to XCHUNK rows per unpack):
 * four vpdpbusd give dword sums of four products (|sum| <= 7680: they fit
 * 16 bits), four vpdpwssd multiply them by their sub-block's scale and
 * add them, the mins meet the q8k block sums in one vpmaddwd, and one
 * reduction gives both integers.
 *
 * Q5_0 (the type most of a Q4_K_M file's rows of 576 get): lanes are
 * eight consecutive blocks, so lane k is the reference's acc[b % 8] and
 * one vfmadd serves eight blocks. Two blocks fill a vector: nibbles put
 * in element order by one 128-bit-lane shuffle and a blend, the fifth
 * bit added under the 64-bit mask that is their two qh words. vpdpbusd
 * takes q + 16 (unsigned) against x, minus 16 times the sums of x (one
 * vpdpbusd more); a shuffle/unpack tree reduces four vectors' dwords to
 * the eight blocks' exact sums.
 *
 * Q6_K: as Q4_K, the six bits put together per 64 elements (the two
 * high bits by a 16-bit variable shift of qh), scales per 16 elements;
 * the -32 offset comes off as 32 times the scales against the q8k sums.
 *
 * IQ4_NL: as Q5_0, the nibbles looked up by vpshufb in the value table
 * plus 128 (unsigned), minus 128 times the sums of x.
 *
 * MXFP4 (gpt-oss's experts): as IQ4_NL with its own value table; the
 * eight E8M0 exponents become llm_e8m0_half's floats by integer shifts
 * (normal: (e - 1) << 23; e < 2: the subnormal 0x00200000 << e).
 *
 * defines: llm_avx512_tile_q4_K, llm_avx512_tile_q6_K,
 * llm_avx512_tile_q5_0, llm_avx512_tile_iq4_nl, llm_avx512_tile_mxfp4
 * (simd.h's AVX-512 set)
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "quant.h"
#include "simd.h"

#define TGT __attribute__((target( \
    "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")))
#define INLINE __attribute__((always_inline)) inline
#define XCHUNK  16                 /* activation rows per weight unpack */

/* one Q4_K super-block, ready for any number of activation rows */
typedef struct {
    __m512i   q[4];      /* sub-blocks 2k | 2k+1 as bytes 0..15 */
    __m512i   sc[4];     /* dword lanes 0-7: scale 2k, 8-15: scale 2k+1 */
    __m256i   mins;      /* int16 lanes 2j, 2j+1: min j */
    float     d, dmin;
} q4k_unpacked;


TGT static INLINE float
half_to_float(uint16_t h)
{
    return _cvtsh_ss(h);
}


/* the 12 scale bytes as 8 scales (bytes 0-7 of sc) and 8 mins (of mn):
 * the layout llm_q4k_scale_min reads one at a time */
TGT static INLINE void
q4k_scales(const uint8_t s[12], uint8_t sc[8], uint8_t mn[8])
{
    uint32_t u[3], o[4];

    memcpy(u, s, 12);
    o[0] = u[0] & 0x3f3f3f3f;                             /* sc0..3 */
    o[1] = (u[2] & 0x0f0f0f0f) | ((u[0] >> 6) & 0x03030303) << 4; /* sc4..7 */
    o[2] = u[1] & 0x3f3f3f3f;                             /* m0..3 */
    o[3] = ((u[2] >> 4) & 0x0f0f0f0f) | ((u[1] >> 6) & 0x03030303) << 4;
    memcpy(sc, o, 8);
    memcpy(mn, o + 2, 8);
}


TGT static INLINE void
q4k_unpack(const llm_block_q4_K *w, q4k_unpacked *u)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    uint8_t sc[8], mn[8];

    for (int h = 0; h < 2; h++) {
        __m512i a = _mm512_loadu_si512(w->qs + 64 * h);
        __m512i lo = _mm512_and_si512(a, m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(a, 4), m4);
        /* 128-bit lanes 0,1 of lo (sub-block 4h) then of hi (4h+1); lanes
         * 2,3 of each (4h+2, 4h+3) */
        u->q[2 * h] = _mm512_shuffle_i64x2(lo, hi, 0x44);
        u->q[2 * h + 1] = _mm512_shuffle_i64x2(lo, hi, 0xee);
    }
    q4k_scales(w->scales, sc, mn);
    __m512i s32 = _mm512_cvtepu8_epi32(_mm_loadl_epi64((const void *) sc));
    for (int k = 0; k < 4; k++) {
        __m512i idx = _mm512_set_epi32(
            2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1,
            2 * k + 1, 2 * k + 1, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k,
            2 * k, 2 * k);
        u->sc[k] = _mm512_permutexvar_epi32(idx, s32);
    }
    __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const void *) mn));
    u->mins = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16),
                               _mm_unpacklo_epi16(m16, m16));
    u->d = half_to_float(w->d);
    u->dmin = half_to_float(w->dmin);
}


/* one super-block against one q8k block: the reference's two fmaf */
TGT static INLINE float
q4k_block(const q4k_unpacked *u, const llm_block_q8k *x, float acc)
{
    __m512i s = _mm512_setzero_si512();

    for (int k = 0; k < 4; k++) {
        __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u->q[k],
                                         _mm512_loadu_si512(x->qs + 64 * k));
        s = _mm512_dpwssd_epi32(s, dp, u->sc[k]);
    }
    __m256i mn = _mm256_madd_epi16(
        _mm256_loadu_si256((const __m256i *) x->bsums), u->mins);
    __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s),
                                  _mm512_extracti64x4_epi64(s, 1));
    __m256i h = _mm256_hadd_epi32(s8, mn);
    __m128i h2 = _mm_add_epi32(_mm256_castsi256_si128(h),
                               _mm256_extracti128_si256(h, 1));
    h2 = _mm_hadd_epi32(h2, h2);
    int isum = _mm_cvtsi128_si32(h2), imin = _mm_extract_epi32(h2, 1);

    acc = fmaf(u->d * x->d, (float) isum, acc);
    return fmaf(-(u->dmin * x->d), (float) imin, acc);
}


/* the tile loop of the super-block types: each weight super-block
 * unpacked once for up to XCHUNK activation rows, one float accumulator
 * per output taking the super-blocks in order */
#define TILE_K(name, wtype, utype, unpack, block)                             \
TGT void                                                                      \
name(const llm_tile *t)                                                       \
{                                                                             \
    int nb = t->n / LLM_QK_K;                                                 \
                                                                              \
    for (int r = 0; r < t->n_w; r++) {                                        \
        const wtype *w = (const void *) (t->w + (size_t) r * t->w_stride);    \
        for (int i0 = 0; i0 < t->n_x; i0 += XCHUNK) {                         \
            int ni = t->n_x - i0 < XCHUNK ? t->n_x - i0 : XCHUNK;             \
            float acc[XCHUNK] = { 0 };                                        \
            for (int b = 0; b < nb; b++) {                                    \
                utype u;                                                      \
                unpack(w + b, &u);                                            \
                for (int i = 0; i < ni; i++) {                                \
                    const llm_block_q8k *x = (const void *)                   \
                        (t->act + (size_t) (i0 + i) * t->act_stride);         \
                    acc[i] = block(&u, x + b, acc[i]);                        \
                }                                                             \
            }                                                                 \
            for (int i = 0; i < ni; i++) {                                    \
                t->out[(size_t) (i0 + i) * t->ld_out + r] = acc[i];           \
            }                                                                 \
        }                                                                     \
    }                                                                         \
}

TILE_K(llm_avx512_tile_q4_K, llm_block_q4_K, q4k_unpacked, q4k_unpack,
       q4k_block)


/* one Q6_K super-block: q + 32 (0..63) in element order, 64 a vector */
typedef struct {
    __m512i   q[4];
    __m512i   sc[4];     /* dword lane j of vector v: scale 4v + j / 4,
                            in the low 16 bits (signed), high bits 0 */
    __m256i   sc16;      /* the 16 scales as int16 */
    float     d;
} q6k_unpacked;


TGT static INLINE void
q6k_unpack(const llm_block_q6_K *w, q6k_unpacked *u)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(3);
    /* 16-bit shift counts: elements 0-31 of a vector take qh bits 0-1
     * (then 4-5), elements 32-63 bits 2-3 (then 6-7) */
    const __m512i sh_a = _mm512_inserti64x4(_mm512_setzero_si512(),
                                            _mm256_set1_epi16(2), 1);
    const __m512i sh_b = _mm512_add_epi16(sh_a, _mm512_set1_epi16(4));

    for (int h = 0; h < 2; h++) {
        __m512i l = _mm512_loadu_si512(w->ql + 64 * h);
        __m256i qh = _mm256_loadu_si256((const __m256i *) (w->qh + 32 * h));
        __m512i hh = _mm512_inserti64x4(_mm512_castsi256_si512(qh), qh, 1);
        __m512i ha = _mm512_and_si512(_mm512_srlv_epi16(hh, sh_a), m2);
        __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(hh, sh_b), m2);
        u->q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4),
                                      _mm512_slli_epi16(ha, 4));
        u->q[2 * h + 1] = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
            _mm512_slli_epi16(hb, 4));
    }
    __m128i s8 = _mm_loadu_si128((const __m128i *) w->scales);
    __m512i s32 = _mm512_and_si512(_mm512_cvtepi8_epi32(s8),
                                   _mm512_set1_epi32(0xffff));
    for (int v = 0; v < 4; v++) {
        __m512i idx = _mm512_set_epi32(
            4 * v + 3, 4 * v + 3, 4 * v + 3, 4 * v + 3, 4 * v + 2, 4 * v + 2,
            4 * v + 2, 4 * v + 2, 4 * v + 1, 4 * v + 1, 4 * v + 1, 4 * v + 1,
            4 * v, 4 * v, 4 * v, 4 * v);
        u->sc[v] = _mm512_permutexvar_epi32(idx, s32);
    }
    u->sc16 = _mm256_cvtepi8_epi16(s8);
    u->d = half_to_float(w->d);
}


/* the reference's integer: sum over sub-blocks of scale times the sum
 * of (q - 32) x, as sum of scale * q x minus 32 sum of scale * bsum */
TGT static INLINE float
q6k_block(const q6k_unpacked *u, const llm_block_q8k *x, float acc)
{
    __m512i s = _mm512_setzero_si512();

    for (int v = 0; v < 4; v++) {
        __m512i dp = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u->q[v],
                                         _mm512_loadu_si512(x->qs + 64 * v));
        s = _mm512_dpwssd_epi32(s, dp, u->sc[v]);
    }
    __m256i bias = _mm256_madd_epi16(
        _mm256_loadu_si256((const __m256i *) x->bsums), u->sc16);
    __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s),
                                  _mm512_extracti64x4_epi64(s, 1));
    __m256i h = _mm256_hadd_epi32(s8, bias);
    __m128i h2 = _mm_add_epi32(_mm256_castsi256_si128(h),
                               _mm256_extracti128_si256(h, 1));
    h2 = _mm_hadd_epi32(h2, h2);
    int total = _mm_cvtsi128_si32(h2) - 32 * _mm_extract_epi32(h2, 1);

    return fmaf(u->d * x->d, (float) total, acc);
}

TILE_K(llm_avx512_tile_q6_K, llm_block_q6_K, q6k_unpacked, q6k_unpack,
       q6k_block)


/* eight 32-element blocks (fewer at a row's end: missing ones are zero) */
typedef struct {
    __m512i   q[4];      /* blocks 2k | 2k+1 as unsigned bytes: Q5_0 q + 16
                            (0..31), IQ4_NL, MXFP4 value + 128 */
    __m256    d;         /* lane k: block k's scale */
    int       n;         /* blocks present */
} q32_group;


/* the nibbles of two blocks (16 bytes each; b may be NULL) in element
 * order: 128-bit lanes a, a, b, b, low nibbles in the first of each pair
 * (elements 0-15), high in the second (16-31) */
TGT static INLINE __m512i
nibbles_pair(const uint8_t *qa, const uint8_t *qb)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m128i vb = qb != NULL ? _mm_loadu_si128((const __m128i *) qb)
                            : _mm_setzero_si128();
    __m256i y = _mm256_set_m128i(vb, _mm_loadu_si128((const __m128i *) qa));
    __m512i z = _mm512_shuffle_i64x2(_mm512_castsi256_si512(y),
                                     _mm512_castsi256_si512(y), 0x50);

    return _mm512_mask_blend_epi64(0xcc, _mm512_and_si512(z, m4),
        _mm512_and_si512(_mm512_srli_epi16(z, 4), m4));
}


TGT static INLINE __m512i
q5_0_pair(const llm_block_q5_0 *a, const llm_block_q5_0 *b)
{
    uint32_t ha, hb = 0;

    memcpy(&ha, a->qh, 4);
    if (b != NULL) {
        memcpy(&hb, b->qh, 4);
    }
    return _mm512_or_si512(nibbles_pair(a->qs, b ? b->qs : NULL),
        _mm512_maskz_mov_epi8((__mmask64) ha | (__mmask64) hb << 32,
                              _mm512_set1_epi8(0x10)));
}


/* a scalar of each of n structs (stride bytes apart) gathered into lanes
 * 0..n-1 of a vector, the rest zero: gathers, as scalar stores read back
 * as a vector stall on store forwarding (measured: 43% of the kernel) */
TGT static INLINE __m256i
gather_dwords(const void *base, int stride, int n)
{
    const __m256i idx = _mm256_mullo_epi32(_mm256_set1_epi32(stride),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));

    return _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(),
                                        (__mmask8) ((1u << n) - 1), idx,
                                        base, 1);
}


/* the fp16 scales at the start of n blocks (the low 16 bits of a dword) */
TGT static INLINE __m256
gather_half(const void *blocks, int stride, int n)
{
    return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(
        gather_dwords(blocks, stride, n)));
}


TGT static INLINE void
q5_0_unpack(const llm_block_q5_0 *w, int n, q32_group *g)
{
    for (int k = 0; k < 4; k++) {
        g->q[k] = 2 * k < n ? q5_0_pair(w + 2 * k, 2 * k + 1 < n
                                        ? w + 2 * k + 1 : NULL)
                            : _mm512_setzero_si512();
    }
    g->d = gather_half(w, sizeof(llm_block_q5_0), n);
    g->n = n;
}


/* llm_e8m0_half of the exponent bytes at the start of n blocks, exactly
 * (lanes past n: any value; the caller masks them) */
TGT static INLINE __m256
gather_e8m0_half(const void *blocks, int stride, int n)
{
    __m256i e = _mm256_and_si256(gather_dwords(blocks, stride, n),
                                 _mm256_set1_epi32(0xff));
    __m256i normal = _mm256_slli_epi32(
        _mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    __mmask8 small = _mm256_cmplt_epi32_mask(e, _mm256_set1_epi32(2));

    return _mm256_castsi256_ps(_mm256_mask_blend_epi32(small, normal, sub));
}


_Static_assert(offsetof(llm_block_iq4_nl, qs) + LLM_QK / 2
               == sizeof(llm_block_iq4_nl)
               && offsetof(llm_block_mxfp4, qs) + LLM_QK / 2
               == sizeof(llm_block_mxfp4), "the nibbles end the block");

/* IQ4_NL or MXFP4 (the scale's bytes, then 16 of nibbles: stride bytes
 * a block): the nibbles looked up in values + 128 (unsigned), the scales
 * fp16 (e8m0 0) or E8M0 (e8m0 1); inlined with constant arguments, one
 * body for the two types */
TGT static INLINE void
nl4_unpack(const uint8_t *w, const size_t stride, const int8_t *values,
    const int e8m0, int n, q32_group *g)
{
    const size_t qs = stride - LLM_QK / 2;
    /* the value table + 128 (MXFP4's: 116..140), in every 128-bit lane
       for vpshufb */
    __m128i kv = _mm_add_epi8(_mm_loadu_si128((const __m128i *) values),
                              _mm_set1_epi8((char) 0x80));
    __m512i table = _mm512_broadcast_i32x4(kv);

    for (int k = 0; k < 4; k++) {
        g->q[k] = 2 * k < n
            ? _mm512_shuffle_epi8(table, nibbles_pair(
                  w + 2 * k * stride + qs,
                  2 * k + 1 < n ? w + (2 * k + 1) * stride + qs : NULL))
            : _mm512_setzero_si512();
    }
    g->d = e8m0 ? gather_e8m0_half(w, (int) stride, n)
                : gather_half(w, (int) stride, n);
    g->n = n;
}


TGT static INLINE void
iq4_nl_unpack(const llm_block_iq4_nl *w, int n, q32_group *g)
{
    nl4_unpack((const uint8_t *) w, sizeof(*w), llm_kvalues_iq4nl, 0, n, g);
}


TGT static INLINE void
mxfp4_unpack(const llm_block_mxfp4 *w, int n, q32_group *g)
{
    nl4_unpack((const uint8_t *) w, sizeof(*w), llm_kvalues_mxfp4, 1, n, g);
}


/* lane k of the result: the exact sum of 4-byte group dwords 8k..8k+7 of
 * the four vectors read as one (block k's 32 products) */
TGT static INLINE __m256i
sum_blocks8(__m512i v0, __m512i v1, __m512i v2, __m512i v3)
{
    /* 128-bit lane c: block c's (then c + 4's) four partial sums */
    __m512i s01 = _mm512_add_epi32(_mm512_shuffle_i64x2(v0, v1, 0x88),
                                   _mm512_shuffle_i64x2(v0, v1, 0xdd));
    __m512i s23 = _mm512_add_epi32(_mm512_shuffle_i64x2(v2, v3, 0x88),
                                   _mm512_shuffle_i64x2(v2, v3, 0xdd));
    __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(s01, s23),
                                 _mm512_unpackhi_epi32(s01, s23));
    u = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, 0x4e));
    /* dword 4c: block c, 4c + 1: block c + 4 */
    const __m512i idx = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0,
                                         13, 9, 5, 1, 12, 8, 4, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(idx, u));
}


/* a group against eight q8a blocks: the reference's acc[b % 8] fmaf;
 * the weights were stored as q + bias */
TGT static INLINE __m256
q32_group_dot(const q32_group *g, const llm_block_q8a *x, __m256 acc,
              int bias)
{
    const __m512i biasv = _mm512_set1_epi8((char) bias);
    __m512i dp[4];

    for (int k = 0; k < 4; k++) {
        __m512i xv = _mm512_setzero_si512();
        if (2 * k < g->n) {
            __m256i xa = _mm256_loadu_si256((const __m256i *) x[2 * k].qs);
            __m256i xb = 2 * k + 1 < g->n
                ? _mm256_loadu_si256((const __m256i *) x[2 * k + 1].qs)
                : _mm256_setzero_si256();
            xv = _mm512_inserti64x4(_mm512_castsi256_si512(xa), xb, 1);
        }
        dp[k] = _mm512_sub_epi32(
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), g->q[k], xv),
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), biasv, xv));
    }
    __m256 dx = _mm256_castsi256_ps(
        gather_dwords(&x->d, sizeof(llm_block_q8a), g->n));
    __m256 isum = _mm256_cvtepi32_ps(sum_blocks8(dp[0], dp[1], dp[2], dp[3]));
    __mmask8 live = (__mmask8) ((1u << g->n) - 1);
    return _mm256_mask3_fmadd_ps(_mm256_mul_ps(g->d, dx),
                                 isum, acc, live);
}


#define TILE_32(name, wtype, unpack, bias)                                    \
TGT void                                                                      \
name(const llm_tile *t)                                                       \
{                                                                             \
    int nb = t->n / LLM_QK;                                                   \
                                                                              \
    for (int r = 0; r < t->n_w; r++) {                                        \
        const wtype *w = (const void *) (t->w + (size_t) r * t->w_stride);    \
        for (int i0 = 0; i0 < t->n_x; i0 += XCHUNK) {                         \
            int ni = t->n_x - i0 < XCHUNK ? t->n_x - i0 : XCHUNK;             \
            __m256 acc[XCHUNK];                                               \
            for (int i = 0; i < ni; i++) {                                    \
                acc[i] = _mm256_setzero_ps();                                 \
            }                                                                 \
            for (int b = 0; b < nb; b += 8) {                                 \
                q32_group g;                                                  \
                unpack(w + b, nb - b < 8 ? nb - b : 8, &g);                   \
                for (int i = 0; i < ni; i++) {                                \
                    const llm_block_q8a *x = (const void *)                   \
                        (t->act + (size_t) (i0 + i) * t->act_stride);         \
                    acc[i] = q32_group_dot(&g, x + b, acc[i], bias);          \
                }                                                             \
            }                                                                 \
            for (int i = 0; i < ni; i++) {                                    \
                float a[8];                                                   \
                _mm256_storeu_ps(a, acc[i]);                                  \
                t->out[(size_t) (i0 + i) * t->ld_out + r] = llm_hsum8(a);     \
            }                                                                 \
        }                                                                     \
    }                                                                         \
}

TILE_32(llm_avx512_tile_q5_0, llm_block_q5_0, q5_0_unpack, 16)
TILE_32(llm_avx512_tile_iq4_nl, llm_block_iq4_nl, iq4_nl_unpack, 128)
TILE_32(llm_avx512_tile_mxfp4, llm_block_mxfp4, mxfp4_unpack, 128)

#endif
