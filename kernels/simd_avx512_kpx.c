/*
 * AVX-512 VNNI prefill tiles of packed K-quant weights (pack.c's layouts)
 * against many q8k activation rows (issue 28), equal to their scalar
 * references bit for bit (matmul.c's packed tiles, docs/numerics.md
 * rule 8).
 *
 * simd_avx512_kp.c unpacks a group's quants (nibbles, Q5_K's fifth bits,
 * Q6_K's two planes, IQ4_XS's table) for every pass of 4 activation rows:
 * for Q6_K that unpacking costs as much as the products. Here the tile's
 * two groups are unpacked once per call, KC super-blocks at a time, into
 * a common form on the stack that all the tile's activation rows (up to
 * matmul.c's PACKED_X_BLOCK) then read:
 *   q[64]   vector e: dword e of the 16 rows' 256 elements (elements
 *           4e..4e+3, reference order) as unsigned bytes: Q4_K q, Q5_K
 *           q, Q6_K q + 32, IQ4_XS value + 128;
 *   sc[16]  int32 lanes: the rows' scale of sub-block s (8 of 32
 *           elements, or Q6_K's 16 of 16): Q4_K/Q5_K's 6-bit scale,
 *           Q6_K's int8, IQ4_XS's ls - 32;
 *   m[8]    int16 pairs: what the 16-element q8k sums bsums[2p] and
 *           bsums[2p+1] are multiplied by: Q4_K/Q5_K the sub-block's
 *           min (twice), Q6_K 32 sc, IQ4_XS 128 sc (the bias of q);
 *   d, dmin floats of the 16 rows.
 * Per super-block and activation row: each sub-block's exact sum g_s
 * from vpdpbusd (one activation dword broadcast feeds both groups), isum
 * += g_s * sc_s (vpmulld), ib = sum_p m_p . bsum pair p (vpdpwssd); then
 * Q4_K/Q5_K: acc = fma(d dx, isum, acc), acc = fma(-(dmin dx), ib, acc);
 * Q6_K/IQ4_XS: acc = fma(d dx, isum - ib, acc). Every integer is the
 * reference's (exact, |.| < 2^31: Q6_K's isum at most 16 * 16 * 63 *
 * 128 * 128), the floats in its order; the accumulators go through the
 * output between chunks of KC super-blocks (a float's round trip is
 * exact).
 *
 * While a chunk's products run, the next chunk's packed bytes (after the
 * last, the next tile's first) are prefetched into L2, spread over the
 * products' super-blocks: at 16 activation rows (a serving step) a tile
 * from DRAM took 1.2-1.3x its time from the cache without it, 1.01-1.11x
 * with it (bench/matmul stream, session 15).
 *
 * defines: llm_avx512_tile_kpx (simd.h)
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <string.h>

#include "quant.h"
#include "simd.h"
#include "simd_avx512_kq.h"
#include "tensor_type.h"

/* one super-block of one group, unpacked (the layout above) */
#define U_Q     0
#define U_SC    4096
#define U_M     (U_SC + 16 * 64)
#define U_D     (U_M + 8 * 64)
#define U_DMIN  (U_D + 64)
#define U_BYTES (U_DMIN + 64)
/* super-blocks unpacked at a time: two groups of 8 are 92 KB on the
 * stack (L2), 2048 columns (a 1B model's width) in one chunk */
#define KC      8

enum { KX_Q4_K, KX_Q5_K, KX_Q6_K, KX_IQ4_XS };


/* v (int32 lanes, values fit int16) twice in each lane: an int16 pair */
KQ_TGT static KQ_INLINE __m512i
pair_same(__m512i v)
{
    return _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi32(0xffff)),
                           _mm512_slli_epi32(v, 16));
}


/* Q4_K (q5 0) or Q5_K (q5 1): quants, 6-bit scales and mins */
KQ_TGT static KQ_INLINE void
unpack_q45k(const int q5, const uint8_t *blk, uint8_t *u)
{
    __m512i sc[2], mn[2];

    /* packed vector k = 8 c + r: low nibbles elements 64 c + 4 r ..,
       high nibbles 32 further (dwords 16 c + r, + 8) */
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        for (int r = 0; r < 8; r++) {
            __m512i lo, hi;

            kq_q45k_quants(q5, blk, c, r, &lo, &hi);
            _mm512_store_si512(u + U_Q + 64 * (16 * c + r), lo);
            _mm512_store_si512(u + U_Q + 64 * (16 * c + 8 + r), hi);
        }
    }

    kq_q4k_scales(blk, sc, mn);
    for (int j = 0; j < 8; j++) {
        _mm512_store_si512(u + U_SC + 64 * j, kq_byte(sc, j));
        /* sub-block j is 16-element sums 2j and 2j + 1: pairs j */
        _mm512_store_si512(u + U_M + 64 * j, pair_same(kq_byte(mn, j)));
    }
    _mm512_store_ps(u + U_D, kq_f16x16(blk));
    _mm512_store_ps(u + U_DMIN, kq_f16x16(blk + 32));
}


/* Q6_K: q + 32 from the ql nibble and two qh bits; int8 scales */
KQ_TGT static KQ_INLINE void
unpack_q6k(const uint8_t *blk, uint8_t *u)
{
    /* half h, dword m of its ql/qh: elements 128 h + 32 c + 4 m ..
       (dword 32 h + 8 c + m) for c = 0..3 */
    for (int h = 0; h < 2; h++) {
        for (int m = 0; m < 8; m++) {
            __m512i q[4];

            kq_q6k_quants(blk, h, m, q);
            for (int c = 0; c < 4; c++) {
                _mm512_store_si512(u + U_Q + 64 * (32 * h + 8 * c + m), q[c]);
            }
        }
    }
    for (int t = 0; t < 4; t++) {
        __m512i v = kq_q6k_sc(blk, t), e, o;

        for (int i = 0; i < 4; i++) {
            _mm512_store_si512(u + U_SC + 64 * (4 * t + i),
                               kq_q6k_scale(v, i));
        }
        /* pairs 2t (scales 4t, 4t + 1) and 2t + 1 (4t + 2, 4t + 3): the
           int8 bytes widened to int16 in place, times 32 */
        kq_q6k_pairs(v, &e, &o);
        __m512i p0 = _mm512_or_si512(
            _mm512_and_si512(e, _mm512_set1_epi32(0xffff)),
            _mm512_slli_epi32(o, 16));
        __m512i p1 = _mm512_or_si512(
            _mm512_srli_epi32(e, 16),
            _mm512_andnot_si512(_mm512_set1_epi32(0xffff), o));
        _mm512_store_si512(u + U_M + 64 * (2 * t), _mm512_slli_epi16(p0, 5));
        _mm512_store_si512(u + U_M + 64 * (2 * t + 1),
                           _mm512_slli_epi16(p1, 5));
    }
    _mm512_store_ps(u + U_D, kq_f16x16(blk));
}


/* IQ4_XS: values + 128 by table; scales ls - 32 */
KQ_TGT static KQ_INLINE void
unpack_iq4xs(const uint8_t *blk, uint8_t *u)
{
    const __m512i tbl = kq_iq4_table();
    __m512i s[2];

    for (int k = 0; k < 32; k++) {
        __m512i lo, hi;

        kq_iq4xs_quants(tbl, blk, k, &lo, &hi);
        _mm512_store_si512(u + U_Q + 64 * (8 * (k / 4) + k % 4), lo);
        _mm512_store_si512(u + U_Q + 64 * (8 * (k / 4) + 4 + k % 4), hi);
    }
    kq_iq4xs_scales(blk, s);
    for (int j = 0; j < 8; j++) {
        __m512i sc = kq_iq4xs_scale(s, j);

        _mm512_store_si512(u + U_SC + 64 * j, sc);
        _mm512_store_si512(u + U_M + 64 * j,
                           pair_same(_mm512_slli_epi32(sc, 7)));
    }
    _mm512_store_ps(u + U_D, kq_f16x16(blk));
}


/* super-blocks b0 .. b0 + n - 1 of the group at w into ub */
KQ_TGT static KQ_INLINE void
unpack_chunk(const int kind, const uint8_t *w, size_t pb, int b0, int n,
    uint8_t *ub)
{
    for (int b = 0; b < n; b++) {
        const uint8_t *blk = w + (size_t) (b0 + b) * pb;
        uint8_t *u = ub + (size_t) b * U_BYTES;
        if (kind == KX_Q6_K) {
            unpack_q6k(blk, u);
        } else if (kind == KX_IQ4_XS) {
            unpack_iq4xs(blk, u);
        } else {
            unpack_q45k(kind == KX_Q5_K, blk, u);
        }
    }
}


/* one super-block's exact sums into the 16 rows' accumulator as the
 * reference does: Q4_K/Q5_K d x dx x scaled sum, then less dmin x dx x
 * the mins' sum (two fmaf); Q6_K/IQ4_XS d x dx x (sum - bias) (one) */
KQ_TGT static KQ_INLINE __m512
kpx_acc(const int kind, __m512 d, __m512 dmin, __m512 dx, __m512i is,
    __m512i ib, __m512 acc)
{
    if (kind == KX_Q4_K || kind == KX_Q5_K) {
        acc = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(is),
                              acc);
        return _mm512_fnmadd_ps(_mm512_mul_ps(dmin, dx),
                                _mm512_cvtepi32_ps(ib), acc);
    }
    return _mm512_fmadd_ps(_mm512_mul_ps(d, dx),
                           _mm512_cvtepi32_ps(_mm512_sub_epi32(is, ib)), acc);
}


/* the cache lines of len bytes from p into L2 */
KQ_TGT static KQ_INLINE void
prefetch_l2(const uint8_t *p, size_t len)
{
    for (size_t o = 0; o < len; o += 64) {
        _mm_prefetch((const char *) p + o, _MM_HINT_T1);
    }
}


/* X <= 4 activation rows against the two unpacked groups u0, u1 (n
 * super-blocks from b0); acc from (first: zero) and back to out; per
 * super-block, pf_b bytes of the packed weights at pf[0], pf[1] (the
 * next chunk's share of this call) into L2 */
KQ_TGT static KQ_INLINE void
kpx_rows(const int kind, const int X, const uint8_t *u0, const uint8_t *u1,
    int b0, int n, int first, const uint8_t *act, size_t act_stride,
    float *out, size_t ld_out, __mmask16 rows0, __mmask16 rows1,
    const uint8_t *const *pf, size_t pf_b)
{
    const int sub = kind == KX_Q6_K ? 4 : 8;      /* dwords per sub-block */
    __m512 acc[4][2];

#pragma GCC unroll 4
    for (int x = 0; x < X; x++) {
        if (first) {
            acc[x][0] = acc[x][1] = _mm512_setzero_ps();
        } else {
            acc[x][0] = _mm512_maskz_loadu_ps(rows0, out + x * ld_out);
            acc[x][1] = _mm512_maskz_loadu_ps(rows1, out + x * ld_out + 16);
        }
    }
    for (int b = 0; b < n; b++) {
        const uint8_t *v0 = u0 + (size_t) b * U_BYTES;
        const uint8_t *v1 = u1 + (size_t) b * U_BYTES;
        const llm_block_q8k *a[4];
        __m512i is[4][2], ib[4][2];

        prefetch_l2(pf[0] + b * pf_b, pf_b);
        prefetch_l2(pf[1] + b * pf_b, pf_b);
#pragma GCC unroll 4
        for (int x = 0; x < X; x++) {
            a[x] = (const llm_block_q8k *) (act + x * act_stride) + b0 + b;
            is[x][0] = is[x][1] = _mm512_setzero_si512();
        }
        for (int s = 0; s < 64 / sub; s++) {
            __m512i g[4][2];

#pragma GCC unroll 4
            for (int x = 0; x < X; x++) {
                g[x][0] = g[x][1] = _mm512_setzero_si512();
            }
#pragma GCC unroll 8
            for (int k = 0; k < sub; k++) {
                int e = sub * s + k;
                __m512i w0 = _mm512_load_si512(v0 + U_Q + 64 * e);
                __m512i w1 = _mm512_load_si512(v1 + U_Q + 64 * e);
#pragma GCC unroll 4
                for (int x = 0; x < X; x++) {
                    __m512i bx = _mm512_set1_epi32(
                                     ((const int32_t *) a[x]->qs)[e]);
                    g[x][0] = _mm512_dpbusd_epi32(g[x][0], w0, bx);
                    g[x][1] = _mm512_dpbusd_epi32(g[x][1], w1, bx);
                }
            }
            __m512i s0 = _mm512_load_si512(v0 + U_SC + 64 * s);
            __m512i s1 = _mm512_load_si512(v1 + U_SC + 64 * s);
#pragma GCC unroll 4
            for (int x = 0; x < X; x++) {
                is[x][0] = _mm512_add_epi32(is[x][0],
                                            _mm512_mullo_epi32(g[x][0], s0));
                is[x][1] = _mm512_add_epi32(is[x][1],
                                            _mm512_mullo_epi32(g[x][1], s1));
            }
        }
        /* the mins or the bias, against the 16-element sums in pairs */
#pragma GCC unroll 4
        for (int x = 0; x < X; x++) {
            ib[x][0] = ib[x][1] = _mm512_setzero_si512();
        }
#pragma GCC unroll 8
        for (int p = 0; p < 8; p++) {
            __m512i m0 = _mm512_load_si512(v0 + U_M + 64 * p);
            __m512i m1 = _mm512_load_si512(v1 + U_M + 64 * p);
#pragma GCC unroll 4
            for (int x = 0; x < X; x++) {
                __m512i bs = _mm512_set1_epi32(
                                 ((const int32_t *) a[x]->bsums)[p]);
                ib[x][0] = _mm512_dpwssd_epi32(ib[x][0], m0, bs);
                ib[x][1] = _mm512_dpwssd_epi32(ib[x][1], m1, bs);
            }
        }
        __m512 d0 = _mm512_load_ps(v0 + U_D), d1 = _mm512_load_ps(v1 + U_D);
        __m512 n0 = d0, n1 = d1;                /* Q6_K, IQ4_XS: unused */
        if (kind == KX_Q4_K || kind == KX_Q5_K) {
            n0 = _mm512_load_ps(v0 + U_DMIN);
            n1 = _mm512_load_ps(v1 + U_DMIN);
        }
#pragma GCC unroll 4
        for (int x = 0; x < X; x++) {
            __m512 dx = _mm512_set1_ps(a[x]->d);
            acc[x][0] = kpx_acc(kind, d0, n0, dx, is[x][0], ib[x][0],
                                acc[x][0]);
            acc[x][1] = kpx_acc(kind, d1, n1, dx, is[x][1], ib[x][1],
                                acc[x][1]);
        }
    }
#pragma GCC unroll 4
    for (int x = 0; x < X; x++) {
        _mm512_mask_storeu_ps(out + x * ld_out, rows0, acc[x][0]);
        _mm512_mask_storeu_ps(out + x * ld_out + 16, rows1, acc[x][1]);
    }
}


/* a tile of two groups (16 < n_w <= 32) and many activation rows */
KQ_TGT static KQ_INLINE void
tile_kpx(const int kind, const size_t bytes, const llm_tile *t)
{
    uint8_t ub[2 * KC * U_BYTES] __attribute__((aligned(64)));
    size_t pb = llm_pack_block_bytes(bytes);
    int nb = t->n / LLM_QK_K, i;
    __mmask16 rows1 = (__mmask16) ((1u << (t->n_w - 16)) - 1);

    for (int b0 = 0; b0 < nb; b0 += KC) {
        int n = nb - b0 < KC ? nb - b0 : KC;
        const uint8_t *pf[2];
        size_t pf_len, pf_b;

        /* while this chunk's products run, the next chunk's packed bytes
           into L2, or after the last the next tile's first: at a few
           activation rows (a serving step) the weights' stream from DRAM
           is otherwise not overlapped with the products */
        if (b0 + KC < nb) {
            pf[0] = t->w + (size_t) (b0 + KC) * pb;
            pf_len = (size_t) (nb - b0 - KC < KC ? nb - b0 - KC : KC) * pb;
        } else {
            pf[0] = t->w + 2 * t->w_stride;
            pf_len = (size_t) (nb < KC ? nb : KC) * pb;
        }
        pf[1] = pf[0] + t->w_stride;
        /* spread over the chunk's (n_x + 3) / 4 calls of n super-blocks,
           at least a line a super-block: at many rows the later calls
           reach past the next chunk, into bytes the stream reads soon;
           a prefetch past the tensor's end does not fault */
        pf_b = (pf_len / ((t->n_x + 3) / 4) / n + 63) & ~(size_t) 63;
        unpack_chunk(kind, t->w, pb, b0, n, ub);
        unpack_chunk(kind, t->w + t->w_stride, pb, b0, n, ub + KC * U_BYTES);
#define KPX_ROWS(X)                                                           \
        kpx_rows(kind, X, ub, ub + KC * U_BYTES, b0, n, b0 == 0,              \
                 t->act + i * t->act_stride, t->act_stride,                   \
                 t->out + i * t->ld_out, t->ld_out, 0xffff, rows1,            \
                 pf, pf_b);                                                   \
        pf[0] += n * pf_b;                                                    \
        pf[1] += n * pf_b
        for (i = 0; i + 4 <= t->n_x; i += 4) {
            KPX_ROWS(4);
        }
        switch (t->n_x - i) {
        case 3: KPX_ROWS(3); break;
        case 2: KPX_ROWS(2); break;
        case 1: KPX_ROWS(1); break;
        }
#undef KPX_ROWS
    }
}


KQ_TGT void
llm_avx512_tile_kpx(uint32_t type, const llm_tile *t)
{
    switch (type) {
    case GGML_TYPE_Q4_K:
        tile_kpx(KX_Q4_K, sizeof(llm_block_q4_K), t);
        break;
    case GGML_TYPE_Q5_K:
        tile_kpx(KX_Q5_K, sizeof(llm_block_q5_K), t);
        break;
    case GGML_TYPE_Q6_K:
        tile_kpx(KX_Q6_K, sizeof(llm_block_q6_K), t);
        break;
    default:
        tile_kpx(KX_IQ4_XS, sizeof(llm_block_iq4_xs), t);
        break;
    }
}

#endif
