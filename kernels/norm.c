/*
 * RMSNorm (norm.h): the scalar definition and an AVX-512 kernel of the
 * same operations; LayerNorm's scalar definition.
 */
#include <math.h>

#include "isa.h"
#include "norm.h"


static float
inv_rms(double ss, int n, float eps)
{
    return (float) (1.0 / sqrt(ss / n + eps));
}


void
llm_rmsnorm_ref(float *out, const float *x, const float *w, int n,
    float eps)
{
    double  l[8] = { 0 };
    float   r;
    int     i;

    for (i = 0; i < n; i++) {
        l[i % 8] += (double) x[i] * x[i];
    }
    r = inv_rms(((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])),
                n, eps);
    for (i = 0; i < n; i++) {
        out[i] = w[i] * (x[i] * r);
    }
}


void
llm_layernorm(float *out, const float *x, const float *w, const float *b,
    int n, float eps)
{
    double  mean = 0.0, var = 0.0, d;
    float   r, m;
    int     i;

    for (i = 0; i < n; i++) {
        mean += x[i];
    }
    mean /= n;
    for (i = 0; i < n; i++) {
        d = x[i] - mean;
        var += d * d;
    }
    r = (float) (1.0 / sqrt(var / n + eps));
    m = (float) mean;
    for (i = 0; i < n; i++) {
        out[i] = (x[i] - m) * r * w[i] + b[i];
    }
}


#if defined(__x86_64__)

#include <immintrin.h>

#define TGT __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))

/* x[i]^2 is exact in double, so the fma rounds once, as the definition's
 * separate add does */
TGT static void
rmsnorm_avx512(float *out, const float *x, const float *w, int n, float eps)
{
    __m512d  acc = _mm512_setzero_pd();
    __m256d  a;
    __m128d  b;
    __m512   vr;
    int      i;

    for (i = 0; i < n; i += 8) {
        __mmask8 k = n - i >= 8 ? 0xff : (__mmask8) ((1u << (n - i)) - 1);
        __m512d v = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, x + i));
        acc = _mm512_fmadd_pd(v, v, acc);
    }
    a = _mm256_add_pd(_mm512_castpd512_pd256(acc),
                      _mm512_extractf64x4_pd(acc, 1));       /* l0+l4 .. */
    b = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    vr = _mm512_set1_ps(inv_rms(_mm_cvtsd_f64(_mm_add_sd(b,
                                    _mm_unpackhi_pd(b, b))), n, eps));
    for (i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? 0xffff
                                  : (__mmask16) ((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(
                                  _mm512_maskz_loadu_ps(k, w + i),
                                  _mm512_mul_ps(v, vr)));
    }
}

#endif


void
llm_rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
#if defined(__x86_64__)
    if (llm_kernels_isa() == LLM_ISA_AVX512) {
        rmsnorm_avx512(out, x, w, n, eps);
        return;
    }
#endif
    llm_rmsnorm_ref(out, x, w, n, eps);
}
