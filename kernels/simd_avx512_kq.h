/*
 * The pieces of a packed K-quant super-block (pack.c's layouts, simd.h's
 * LLM_PACK_* offsets) decoded for its 16 rows at once, with AVX-512: one
 * home for what the decode kernels (simd_avx512_kp.c, which decode a
 * group for every pass of 4 activation rows) and the prefill tiles
 * (simd_avx512_kpx.c, which decode it once into a buffer) both read.
 * Lanes are the 16 weight rows: a quant vector holds the same 4 bytes
 * (one dword) of every row, a scale vector one int32 per row.
 *
 * defines (static inline, x86-64): KQ_TGT, KQ_INLINE, kq_f16x16,
 * kq_fifth_bit, kq_q45k_quants, kq_q4k_scales, kq_byte, kq_q6k_quants,
 * kq_q6k_sc, kq_q6k_scale, kq_q6k_pairs, kq_iq4_table, kq_iq4xs_quants,
 * kq_iq4xs_scales, kq_iq4xs_scale
 */
#ifndef NGX_LLM_SIMD_AVX512_KQ_H
#define NGX_LLM_SIMD_AVX512_KQ_H

#if defined(__x86_64__)

#include <immintrin.h>

#include "quant.h"
#include "simd.h"

#define KQ_TGT __attribute__((target( \
    "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")))
#define KQ_INLINE __attribute__((always_inline)) inline


/* the 16 rows' fp16 at p (d at the block's start, Q4_K's dmin at 32) */
KQ_TGT static KQ_INLINE __m512
kq_f16x16(const uint8_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) p));
}


/* bit j of each byte of qh moved to bit 4 (Q5_K's fifth bit of
 * sub-block j) */
KQ_TGT static KQ_INLINE __m512i
kq_fifth_bit(__m512i qh, int j)
{
    __m512i v = j < 4 ? _mm512_slli_epi16(qh, 4 - j)
                      : (j == 4 ? qh : _mm512_srli_epi16(qh, j - 4));

    return _mm512_and_si512(v, _mm512_set1_epi8(0x10));
}


/* Q4_K (q5 0) or Q5_K (q5 1) quant dword r (0..7) of sub-blocks 2c (lo)
 * and 2c + 1 (hi), as unsigned bytes: elements 64 c + 4 r .. and 32
 * further */
KQ_TGT static KQ_INLINE void
kq_q45k_quants(const int q5, const uint8_t *blk, int c, int r, __m512i *lo,
    __m512i *hi)
{
    const int qs = q5 ? LLM_PACK_Q5K_QS : LLM_PACK_Q4K_QS;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i v = _mm512_loadu_si512(blk + qs + 64 * (8 * c + r));

    *lo = _mm512_and_si512(v, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    if (q5) {
        __m512i qh = _mm512_loadu_si512(blk + LLM_PACK_Q5K_QH + 64 * r);
        *lo = _mm512_or_si512(*lo, kq_fifth_bit(qh, 2 * c));
        *hi = _mm512_or_si512(*hi, kq_fifth_bit(qh, 2 * c + 1));
    }
}


/* Q4_K/Q5_K's 6-bit scales and mins (llm_q4k_scale_min), 16 rows: byte
 * j of each dword lane of sc[0] is scale j (j < 4), of sc[1] scale
 * 4 + j; mn likewise the mins */
KQ_TGT static KQ_INLINE void
kq_q4k_scales(const uint8_t *blk, __m512i sc[2], __m512i mn[2])
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i m3f = _mm512_set1_epi8(0x3f), m30 = _mm512_set1_epi8(0x30);
    __m512i v0 = _mm512_loadu_si512(blk + LLM_PACK_Q4K_SC);
    __m512i v1 = _mm512_loadu_si512(blk + LLM_PACK_Q4K_SC + 64);
    __m512i v2 = _mm512_loadu_si512(blk + LLM_PACK_Q4K_SC + 128);

    sc[0] = _mm512_and_si512(v0, m3f);
    sc[1] = _mm512_or_si512(_mm512_and_si512(v2, m4),
                            _mm512_and_si512(_mm512_srli_epi32(v0, 2), m30));
    mn[0] = _mm512_and_si512(v1, m3f);
    mn[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(v2, 4), m4),
                            _mm512_and_si512(_mm512_srli_epi32(v1, 2), m30));
}


/* byte j of kq_q4k_scales' pair v (scale or min j) as dword lanes */
KQ_TGT static KQ_INLINE __m512i
kq_byte(const __m512i v[2], int j)
{
    /* v[j < 4 ? 0 : 1], not v[j / 4]: constant indices keep the pair
       in registers where j is not */
    return _mm512_and_si512(_mm512_srli_epi32(j < 4 ? v[0] : v[1],
                                              8 * (j % 4)),
                            _mm512_set1_epi32(0xff));
}


/* Q6_K quant dword m (0..7) of half h as q + 32 (unsigned bytes), from
 * a ql nibble and two qh bits: q[c] holds elements 128 h + 32 c + 4 m ..
 * (c = 0..3) */
KQ_TGT static KQ_INLINE void
kq_q6k_quants(const uint8_t *blk, int h, int m, __m512i q[4])
{
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    __m512i la = _mm512_loadu_si512(blk + LLM_PACK_Q6K_QL
                                    + 64 * (16 * h + m));
    __m512i lb = _mm512_loadu_si512(blk + LLM_PACK_Q6K_QL
                                    + 64 * (16 * h + 8 + m));
    __m512i qh = _mm512_loadu_si512(blk + LLM_PACK_Q6K_QH
                                    + 64 * (8 * h + m));

    q[0] = _mm512_or_si512(_mm512_and_si512(la, m4),
               _mm512_and_si512(_mm512_slli_epi16(qh, 4), m30));
    q[1] = _mm512_or_si512(_mm512_and_si512(lb, m4),
               _mm512_and_si512(_mm512_slli_epi16(qh, 2), m30));
    q[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(la, 4), m4),
               _mm512_and_si512(qh, m30));
    q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lb, 4), m4),
               _mm512_and_si512(_mm512_srli_epi16(qh, 2), m30));
}


/* Q6_K's scale dword t (0..3): scales 4t .. 4t + 3 of the 16 rows */
KQ_TGT static KQ_INLINE __m512i
kq_q6k_sc(const uint8_t *blk, int t)
{
    return _mm512_loadu_si512(blk + LLM_PACK_Q6K_SC + 64 * t);
}


/* int8 byte i of kq_q6k_sc's v (scale 4t + i) as int32 lanes */
KQ_TGT static KQ_INLINE __m512i
kq_q6k_scale(__m512i v, int i)
{
    return _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * i), 24);
}


/* kq_q6k_sc's v widened to int16 in place: e holds scales 4t and 4t + 2
 * as an int16 pair, o scales 4t + 1 and 4t + 3 */
KQ_TGT static KQ_INLINE void
kq_q6k_pairs(__m512i v, __m512i *e, __m512i *o)
{
    *e = _mm512_srai_epi16(_mm512_slli_epi16(v, 8), 8);
    *o = _mm512_srai_epi16(v, 8);
}


/* IQ4_NL's 16 values + 128 (unsigned) in each 128-bit lane, for vpshufb */
KQ_TGT static KQ_INLINE __m512i
kq_iq4_table(void)
{
    return _mm512_broadcast_i32x4(_mm_xor_si128(
        _mm_loadu_si128((const __m128i *) llm_kvalues_iq4nl),
        _mm_set1_epi8((char) 0x80)));
}


/* IQ4_XS packed vector k (0..31) looked up in tbl: sub-block k / 4,
 * elements 32 (k / 4) + 4 (k % 4) .. (lo) and 16 further (hi) */
KQ_TGT static KQ_INLINE void
kq_iq4xs_quants(__m512i tbl, const uint8_t *blk, int k, __m512i *lo,
    __m512i *hi)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i v = _mm512_loadu_si512(blk + LLM_PACK_IQ4XS_QS + 64 * k);

    *lo = _mm512_shuffle_epi8(tbl, _mm512_and_si512(v, m4));
    *hi = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(v, 4),
                                                    m4));
}


/* IQ4_XS's scales of the 16 rows: s[0] scales_l (one dword a row),
 * s[1] scales_h (widened to dwords) */
KQ_TGT static KQ_INLINE void
kq_iq4xs_scales(const uint8_t *blk, __m512i s[2])
{
    s[0] = _mm512_loadu_si512(blk + LLM_PACK_IQ4XS_SL);
    s[1] = _mm512_cvtepu16_epi32(_mm256_loadu_si256(
               (const __m256i *) (blk + 32)));
}


/* ls - 32 of sub-block j from kq_iq4xs_scales' s, as int32 lanes */
KQ_TGT static KQ_INLINE __m512i
kq_iq4xs_scale(const __m512i s[2], int j)
{
    return _mm512_sub_epi32(_mm512_or_si512(
        _mm512_and_si512(_mm512_srli_epi32(s[0], 4 * j),
                         _mm512_set1_epi32(0x0f)),
        _mm512_slli_epi32(_mm512_and_si512(
            _mm512_srli_epi32(s[1], 2 * j), _mm512_set1_epi32(3)), 4)),
        _mm512_set1_epi32(32));
}

#endif
#endif
