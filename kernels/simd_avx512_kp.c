/*
 * AVX-512 VNNI kernels of packed K-quant weights (tensor.h, pack.c: 16
 * rows interleaved per super-block) against plain q8k rows (issue 28),
 * equal to their scalar references bit for bit (simd.h, matmul.c's
 * packed tiles; docs/numerics.md rule 8).
 *
 * Q4_K. Lanes are the 16 weight rows of a group, so no reduction crosses
 * lanes: a quant vector holds the same 4 bytes of every row, and one
 * vpdpbusd against a broadcast activation dword adds four products to
 * each row's lane. Per super-block and activation row: per sub-block
 * eight vpdpbusd give its exact sum g_j, one vpmulld multiplies it by the
 * row's 6-bit scale (decoded for all 16 rows at once from the three scale
 * dwords with byte masks and 32-bit shifts) and adds it to isum; the mins
 * meet the q8k sums of 32 elements in four vpdpwssd (int16 pairs of mins
 * against pairs of sums); then the reference's two fmaf, one instruction
 * each for the 16 rows. Up to four activation rows share each unpacked
 * quant vector; one activation row (decode) streams the weights in
 * memory order with prefetch. A tile of two groups and KPX_MIN_N_X or
 * more activation rows (prefill) goes to simd_avx512_kpx.c, which
 * unpacks the groups once for all the rows.
 *
 * Q6_K. The same lanes; a quant vector of 64 unsigned bytes q + 32 is
 * a ql nibble OR-ed with two qh bits moved to bits 4-5 (16-bit shifts and
 * a byte mask), four such vectors from two ql vectors and one qh vector.
 * Per sub-block of 16 elements four vpdpbusd and one vpmulld by the
 * row's int8 scale (sign-extended by 32-bit shifts); the +32 comes off as
 * 32 times (scales . q8k sums of 16), eight vpdpwssd of int16 pairs.
 *
 * Q5_K: Q4_K's kernel with the fifth bit of sub-block j (bit j of a qh
 * byte) moved to bit 4 by one 16-bit shift and a byte mask and OR-ed in.
 *
 * IQ4_XS: per sub-block of 32, eight vpdpbusd against the nibbles looked
 * up by vpshufb as value + 128 (unsigned), started from -128 times the
 * sub-block's q8k sum, one vpmulld by the 6-bit scale minus 32 (decoded
 * for 16 rows from scales_l and scales_h by 32-bit shifts).
 *
 * Decode (one activation row) streams each group's super-blocks in
 * memory order and prefetches LLM_DECODE_PF_AHEAD (simd.h) ahead.
 *
 * defines: llm_avx512_tile_q4_Kp, llm_avx512_tile_q6_Kp,
 *          llm_avx512_tile_q5_Kp, llm_avx512_tile_iq4_xsp (simd.h's
 *          AVX-512 set)
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <string.h>

#include "quant.h"
#include "simd.h"
#include "simd_avx512_kq.h"
#include "tensor_type.h"

/* activation rows from which a tile of two groups goes to
 * simd_avx512_kpx.c (its unpacking once pays from this many on) */
#define KPX_MIN_N_X  8


KQ_TGT static KQ_INLINE void
prefetch_ahead(const uint8_t *blk, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 64) {
        _mm_prefetch((const char *) blk + LLM_DECODE_PF_AHEAD + o,
                     _MM_HINT_T0);
    }
}


/* mins 2i and 2i+1 of the 16 rows as int16 pairs, from the four min
 * bytes of m (mins 0..3 or 4..7) starting at byte 2 (i % 2) */
KQ_TGT static KQ_INLINE __m512i
min_pair(__m512i m, int i)
{
    __m512i v = (i % 2) ? _mm512_srli_epi32(m, 16) : m;

    return _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi32(0xff)),
                           _mm512_and_si512(_mm512_slli_epi32(v, 8),
                                            _mm512_set1_epi32(0xff0000)));
}


/* q8k sums of sub-blocks 2i and 2i+1 (32 elements each) as an int16
 * pair (|sum| <= 4064) */
KQ_TGT static KQ_INLINE int32_t
bsum_pair(const llm_block_q8k *a, int i)
{
    int lo = a->bsums[4 * i] + a->bsums[4 * i + 1];
    int hi = a->bsums[4 * i + 2] + a->bsums[4 * i + 3];

    return (int32_t) ((uint32_t) (uint16_t) lo | (uint32_t) hi << 16);
}


/* one group of 16 packed Q4_K (q5 0) or Q5_K (q5 1) rows against X <= 4
 * activation rows */
KQ_TGT static KQ_INLINE void
q4kp_x(const int q5, const int X, const uint8_t *w, size_t pb, int nb,
    const uint8_t *act, size_t act_stride, float *out, size_t ld_out,
    __mmask16 rows, const int stream)
{
    __m512 acc[4];

#pragma GCC unroll 4
    for (int x = 0; x < X; x++) {
        acc[x] = _mm512_setzero_ps();
    }
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t) b * pb;
        const llm_block_q8k *a[4];
        __m512i isum[4], imin[4], sc[2], mn[2];

        if (stream) {
            prefetch_ahead(blk, pb);
        }
        kq_q4k_scales(blk, sc, mn);

#pragma GCC unroll 4
        for (int x = 0; x < X; x++) {
            a[x] = (const llm_block_q8k *) (act + x * act_stride) + b;
            isum[x] = _mm512_setzero_si512();
        }
        /* sub-blocks 2i (low nibbles) and 2i+1 (high) */
        for (int i = 0; i < 4; i++) {
            __m512i glo[4], ghi[4];

#pragma GCC unroll 4
            for (int x = 0; x < X; x++) {
                glo[x] = ghi[x] = _mm512_setzero_si512();
            }
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                __m512i lo, hi;

                kq_q45k_quants(q5, blk, i, k, &lo, &hi);
#pragma GCC unroll 4
                for (int x = 0; x < X; x++) {
                    const int32_t *xq = (const int32_t *) a[x]->qs;
                    glo[x] = _mm512_dpbusd_epi32(glo[x], lo,
                                 _mm512_set1_epi32(xq[16 * i + k]));
                    ghi[x] = _mm512_dpbusd_epi32(ghi[x], hi,
                                 _mm512_set1_epi32(xq[16 * i + 8 + k]));
                }
            }
            __m512i s0 = kq_byte(sc, 2 * i), s1 = kq_byte(sc, 2 * i + 1);
#pragma GCC unroll 4
            for (int x = 0; x < X; x++) {
                isum[x] = _mm512_add_epi32(isum[x], _mm512_add_epi32(
                              _mm512_mullo_epi32(glo[x], s0),
                              _mm512_mullo_epi32(ghi[x], s1)));
            }
        }

        __m512 dw = kq_f16x16(blk), dmw = kq_f16x16(blk + 32);
        __m512i mp0 = min_pair(mn[0], 0), mp1 = min_pair(mn[0], 1);
        __m512i mp2 = min_pair(mn[1], 0), mp3 = min_pair(mn[1], 1);
#pragma GCC unroll 4
        for (int x = 0; x < X; x++) {
            imin[x] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mp0,
                          _mm512_set1_epi32(bsum_pair(a[x], 0)));
            imin[x] = _mm512_dpwssd_epi32(imin[x], mp1,
                          _mm512_set1_epi32(bsum_pair(a[x], 1)));
            imin[x] = _mm512_dpwssd_epi32(imin[x], mp2,
                          _mm512_set1_epi32(bsum_pair(a[x], 2)));
            imin[x] = _mm512_dpwssd_epi32(imin[x], mp3,
                          _mm512_set1_epi32(bsum_pair(a[x], 3)));

            __m512 dx = _mm512_set1_ps(a[x]->d);
            acc[x] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx),
                                     _mm512_cvtepi32_ps(isum[x]), acc[x]);
            acc[x] = _mm512_fnmadd_ps(_mm512_mul_ps(dmw, dx),
                                      _mm512_cvtepi32_ps(imin[x]), acc[x]);
        }
    }
#pragma GCC unroll 4
    for (int x = 0; x < X; x++) {
        _mm512_mask_storeu_ps(out + x * ld_out, rows, acc[x]);
    }
}


/* one group of 16 packed Q6_K rows against X <= 4 activation rows */
KQ_TGT static KQ_INLINE void
q6kp_x(const int X, const uint8_t *w, size_t pb, int nb, const uint8_t *act,
    size_t act_stride, float *out, size_t ld_out, __mmask16 rows,
    const int stream)
{
    __m512 acc[4];

#pragma GCC unroll 4
    for (int x = 0; x < X; x++) {
        acc[x] = _mm512_setzero_ps();
    }
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t) b * pb;
        const llm_block_q8k *a[4];
        __m512i isum[4], ibias[4];

        if (stream) {
            prefetch_ahead(blk, pb);
        }
#pragma GCC unroll 4
        for (int x = 0; x < X; x++) {
            a[x] = (const llm_block_q8k *) (act + x * act_stride) + b;
            isum[x] = ibias[x] = _mm512_setzero_si512();
        }
        /* half h (128 elements), sub-blocks 8h + 2c + s (c = 0..3): the
           elements 32c + 16s .. of the half, dwords m = 4s .. 4s + 3 */
        for (int h = 0; h < 2; h++) {
            for (int s = 0; s < 2; s++) {
                __m512i g[4][4];

#pragma GCC unroll 4
                for (int x = 0; x < X; x++) {
                    g[x][0] = g[x][1] = g[x][2] = g[x][3]
                        = _mm512_setzero_si512();
                }
#pragma GCC unroll 4
                for (int m = 4 * s; m < 4 * s + 4; m++) {
                    __m512i q[4];

                    kq_q6k_quants(blk, h, m, q);
#pragma GCC unroll 4
                    for (int x = 0; x < X; x++) {
                        const int32_t *xq = (const int32_t *) a[x]->qs;
#pragma GCC unroll 4
                        for (int c = 0; c < 4; c++) {
                            g[x][c] = _mm512_dpbusd_epi32(g[x][c], q[c],
                                _mm512_set1_epi32(xq[32 * h + 8 * c + m]));
                        }
                    }
                }
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    int k = 8 * h + 2 * c + s;
                    __m512i sc = kq_q6k_scale(kq_q6k_sc(blk, k / 4), k % 4);
#pragma GCC unroll 4
                    for (int x = 0; x < X; x++) {
                        isum[x] = _mm512_add_epi32(isum[x],
                                      _mm512_mullo_epi32(g[x][c], sc));
                    }
                }
            }
        }
        /* 32 (sum_k sc_k bsums_k): scales 4t, 4t+2 and 4t+1, 4t+3 as
           int16 pairs against the same pairs of sums */
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            __m512i pe, po;

            kq_q6k_pairs(kq_q6k_sc(blk, t), &pe, &po);
#pragma GCC unroll 4
            for (int x = 0; x < X; x++) {
                const int16_t *bs = a[x]->bsums + 4 * t;
                int32_t e = (int32_t) ((uint32_t) (uint16_t) bs[0]
                                       | (uint32_t) (uint16_t) bs[2] << 16);
                int32_t o = (int32_t) ((uint32_t) (uint16_t) bs[1]
                                       | (uint32_t) (uint16_t) bs[3] << 16);
                ibias[x] = _mm512_dpwssd_epi32(ibias[x], pe,
                                               _mm512_set1_epi32(e));
                ibias[x] = _mm512_dpwssd_epi32(ibias[x], po,
                                               _mm512_set1_epi32(o));
            }
        }

        __m512 dw = kq_f16x16(blk);
#pragma GCC unroll 4
        for (int x = 0; x < X; x++) {
            __m512i is = _mm512_sub_epi32(isum[x],
                                          _mm512_slli_epi32(ibias[x], 5));
            acc[x] = _mm512_fmadd_ps(_mm512_mul_ps(dw,
                                                   _mm512_set1_ps(a[x]->d)),
                                     _mm512_cvtepi32_ps(is), acc[x]);
        }
    }
#pragma GCC unroll 4
    for (int x = 0; x < X; x++) {
        _mm512_mask_storeu_ps(out + x * ld_out, rows, acc[x]);
    }
}


/* one group of 16 packed IQ4_XS rows against X <= 4 activation rows */
KQ_TGT static KQ_INLINE void
iq4xsp_x(const int X, const uint8_t *w, size_t pb, int nb,
    const uint8_t *act, size_t act_stride, float *out, size_t ld_out,
    __mmask16 rows, const int stream)
{
    const __m512i tbl = kq_iq4_table();
    __m512 acc[4];

#pragma GCC unroll 4
    for (int x = 0; x < X; x++) {
        acc[x] = _mm512_setzero_ps();
    }
    for (int b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t) b * pb;
        const llm_block_q8k *a[4];
        __m512i isum[4], sls[2];

        if (stream) {
            prefetch_ahead(blk, pb);
        }
        kq_iq4xs_scales(blk, sls);
#pragma GCC unroll 4
        for (int x = 0; x < X; x++) {
            a[x] = (const llm_block_q8k *) (act + x * act_stride) + b;
            isum[x] = _mm512_setzero_si512();
        }
        for (int j = 0; j < 8; j++) {
            __m512i g[4];
            __m512i sc = kq_iq4xs_scale(sls, j);      /* ls - 32 */

            /* the values + 128 (unsigned): take off 128 times the sum of
               the sub-block's activations */
#pragma GCC unroll 4
            for (int x = 0; x < X; x++) {
                g[x] = _mm512_set1_epi32(-128 * (a[x]->bsums[2 * j]
                                                 + a[x]->bsums[2 * j + 1]));
            }
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                __m512i lo, hi;

                kq_iq4xs_quants(tbl, blk, 4 * j + k, &lo, &hi);
#pragma GCC unroll 4
                for (int x = 0; x < X; x++) {
                    const int32_t *xq = (const int32_t *) a[x]->qs;
                    g[x] = _mm512_dpbusd_epi32(g[x], lo,
                               _mm512_set1_epi32(xq[8 * j + k]));
                    g[x] = _mm512_dpbusd_epi32(g[x], hi,
                               _mm512_set1_epi32(xq[8 * j + 4 + k]));
                }
            }
#pragma GCC unroll 4
            for (int x = 0; x < X; x++) {
                isum[x] = _mm512_add_epi32(isum[x],
                                           _mm512_mullo_epi32(g[x], sc));
            }
        }
        __m512 dw = kq_f16x16(blk);
#pragma GCC unroll 4
        for (int x = 0; x < X; x++) {
            acc[x] = _mm512_fmadd_ps(_mm512_mul_ps(dw,
                                                   _mm512_set1_ps(a[x]->d)),
                                     _mm512_cvtepi32_ps(isum[x]), acc[x]);
        }
    }
#pragma GCC unroll 4
    for (int x = 0; x < X; x++) {
        _mm512_mask_storeu_ps(out + x * ld_out, rows, acc[x]);
    }
}


enum { KP_Q4_K, KP_Q5_K, KP_Q6_K, KP_IQ4_XS };

#define KP_X(X, ...)                                                          \
    (kind == KP_Q6_K ? q6kp_x(X, __VA_ARGS__)                                 \
     : kind == KP_IQ4_XS ? iq4xsp_x(X, __VA_ARGS__)                           \
     : q4kp_x(kind == KP_Q5_K, X, __VA_ARGS__))

/* one group (n_w <= 16 rows) against all the tile's activation rows */
KQ_TGT static KQ_INLINE void
kp_group(const int kind, const size_t bytes, const uint8_t *w, int n_w,
    const llm_tile *t, int x0, int n_x, int col)
{
    size_t pb = llm_pack_block_bytes(bytes);
    int nb = t->n / LLM_QK_K, i;
    __mmask16 rows = (__mmask16) ((1u << n_w) - 1);
    const uint8_t *act = t->act + (size_t) x0 * t->act_stride;
    float *out = t->out + (size_t) x0 * t->ld_out + col;

    if (n_x == 1) {
        KP_X(1, w, pb, nb, act, t->act_stride, out, t->ld_out, rows, 1);
        return;
    }
    for (i = 0; i + 4 <= n_x; i += 4) {
        KP_X(4, w, pb, nb, act + i * t->act_stride, t->act_stride,
               out + i * t->ld_out, t->ld_out, rows, 0);
    }
    switch (n_x - i) {
    case 3:
        KP_X(3, w, pb, nb, act + i * t->act_stride, t->act_stride,
               out + i * t->ld_out, t->ld_out, rows, 0);
        break;
    case 2:
        KP_X(2, w, pb, nb, act + i * t->act_stride, t->act_stride,
               out + i * t->ld_out, t->ld_out, rows, 0);
        break;
    case 1:
        KP_X(1, w, pb, nb, act + i * t->act_stride, t->act_stride,
               out + i * t->ld_out, t->ld_out, rows, 0);
        break;
    }
}


/* a tile of one or two groups: activation rows 16 at a time through both
 * groups, so they are read from L1 for the second */
KQ_TGT static KQ_INLINE void
tile_kp(const int kind, const size_t bytes, const llm_tile *t)
{
    static const uint32_t types[] = {
        GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS,
    };

    /* prefill: two groups unpacked once for all the rows
       (simd_avx512_kpx.c) */
    if (t->n_w > 16 && t->n_x >= KPX_MIN_N_X) {
        llm_avx512_tile_kpx(types[kind], t);
        return;
    }
    for (int x0 = 0; x0 < t->n_x; x0 += 16) {
        int nx = t->n_x - x0 < 16 ? t->n_x - x0 : 16;
        for (int g = 0; g * 16 < t->n_w; g++) {
            int nw = t->n_w - 16 * g < 16 ? t->n_w - 16 * g : 16;
            kp_group(kind, bytes, t->w + (size_t) g * t->w_stride, nw, t, x0,
                     nx, 16 * g);
        }
    }
}


KQ_TGT void
llm_avx512_tile_q4_Kp(const llm_tile *t)
{
    tile_kp(KP_Q4_K, sizeof(llm_block_q4_K), t);
}


KQ_TGT void
llm_avx512_tile_q6_Kp(const llm_tile *t)
{
    tile_kp(KP_Q6_K, sizeof(llm_block_q6_K), t);
}


KQ_TGT void
llm_avx512_tile_q5_Kp(const llm_tile *t)
{
    tile_kp(KP_Q5_K, sizeof(llm_block_q5_K), t);
}


KQ_TGT void
llm_avx512_tile_iq4_xsp(const llm_tile *t)
{
    tile_kp(KP_IQ4_XS, sizeof(llm_block_iq4_xs), t);
}

#endif
