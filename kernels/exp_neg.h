/*
 * e^x for x <= 0, written as scalar and for 16 (AVX-512) and 8 (AVX2)
 * lanes with the same operations, so all give the same bits
 * (test_attention):
 * range reduction by ln 2 in two parts, a degree-7 polynomial by fmaf,
 * times 2^n (built from the exponent bits; exp16 by vscalefps, the same
 * correctly rounded product); relative error under 8e-8 on [-87, 0], and
 * 0 below -87 and for -inf and NaN. The attention's softmax and the
 * SwiGLU activation (activation.c) use it.
 *
 * defines (static inline): att_exp1, exp16 and exp8 (x86-64)
 */
#ifndef NGX_LLM_EXP_NEG_H
#define NGX_LLM_EXP_NEG_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define ATT_LOG2E   1.44269504088896341f
#define ATT_LN2_HI  0.693359375f
#define ATT_LN2_LO  -2.12194440e-4f
#define ATT_EXP_MIN -87.0f      /* below: 0 (2^n stays normal above) */

/* 1/k!, k = 7 .. 2, then 1 and 1: Taylor on |r| <= ln2/2, error < 6e-9 */
static const float att_exp_c[6] = {
    1.98412698e-4f, 1.38888889e-3f, 8.33333333e-3f, 4.16666667e-2f,
    1.66666667e-1f, 0.5f,
};


/* the scalar exponential, inlined where it is used so that a kernel
 * compiled for FMA computes fmaf with one instruction (same result) */
static inline __attribute__((always_inline)) float
att_exp1(float x)
{
    float     n, r, p, two_n;
    uint32_t  bits;
    int       k;

    if (!(x >= ATT_EXP_MIN)) {
        return 0.0f;
    }
    n = rintf(x * ATT_LOG2E);
    r = fmaf(n, -ATT_LN2_HI, x);
    r = fmaf(n, -ATT_LN2_LO, r);
    p = att_exp_c[0];
    for (k = 1; k < 6; k++) {
        p = fmaf(p, r, att_exp_c[k]);
    }
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    bits = (uint32_t) ((int32_t) n + 127) << 23;
    memcpy(&two_n, &bits, sizeof(two_n));
    return p * two_n;
}


#if defined(__x86_64__)

#include <immintrin.h>

#define EXP_NEG_TGT __attribute__((target( \
    "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

/* att_exp1 lane by lane: the same operations (2^n by vscalefps) */
EXP_NEG_TGT static inline __attribute__((always_inline)) __m512
exp16(__m512 x)
{
    __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(ATT_EXP_MIN),
                                      _CMP_GE_OQ);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(ATT_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT
                                    | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-ATT_LN2_HI), x);
    __m512 p = _mm512_set1_ps(att_exp_c[0]);

    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-ATT_LN2_LO), r);
#pragma GCC unroll 8
    for (int k = 1; k < 6; k++) {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(att_exp_c[k]));
    }
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    /* p * 2^n in one instruction: for n >= -126 (x >= ATT_EXP_MIN) the
       product by 2^n built from its exponent bits rounds to the same
       value, one correctly rounded product either way */
    return _mm512_maskz_scalef_ps(ok, p, n);
}


#define EXP_NEG_TGT2 __attribute__((target("avx2,fma,f16c")))

/* the same on 8 lanes (attention's AVX2 kernel) */
EXP_NEG_TGT2 static inline __attribute__((always_inline)) __m256
exp8(__m256 x)
{
    __m256 ok = _mm256_cmp_ps(x, _mm256_set1_ps(ATT_EXP_MIN), _CMP_GE_OQ);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(ATT_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-ATT_LN2_HI), x);
    __m256 p = _mm256_set1_ps(att_exp_c[0]);
    __m256i e;

    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-ATT_LN2_LO), r);
#pragma GCC unroll 8
    for (int k = 1; k < 6; k++) {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(att_exp_c[k]));
    }
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
                                           _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), ok);
}

#endif

#endif
