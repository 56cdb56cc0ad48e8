/*
 * SwiGLU and GeGLU (activation.h): the scalar definitions and AVX-512
 * kernels of the same operations, 16 elements at a time; gpt-oss's
 * clamped SwiGLU likewise; BERT's erf GELU (scalar).
 *
 * defines: llm_gelu_erf, llm_swiglu, llm_swiglu_ref, llm_geglu, llm_geglu_ref,
 *          llm_swiglu_oai, llm_swiglu_oai_ref
 */
#include <math.h>

#include "activation.h"
#include "exp_neg.h"
#include "isa.h"


void
llm_gelu_erf(float *x, size_t n)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        x[i] = (float) (0.5 * x[i] * (1.0 + erf(x[i] * M_SQRT1_2)));
    }
}


static inline float
swiglu1(float g, float up)
{
    float e = att_exp1(-fabsf(g));
    float s = (g >= 0.0f ? 1.0f : e) / (1.0f + e);

    return g * s * up;
}


void
llm_swiglu_ref(float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        gate[i] = swiglu1(gate[i], up[i]);
    }
}


/* gelu_tanh(g) = g * sigmoid(z), z = g * (GELU_C1 + GELU_C3 * g * g):
 * 0.5 * (1 + tanh(u)) is sigmoid(2u), u = sqrt(2/pi) * (g + 0.044715 g^3) */
#define GELU_C1  1.59576912160573071f    /* 2 * sqrt(2 / pi) */
#define GELU_C3  0.0713548162726008f     /* 2 * sqrt(2 / pi) * 0.044715 */


static inline float
geglu1(float g, float up)
{
    float z = g * (GELU_C1 + GELU_C3 * (g * g));
    float e = att_exp1(-fabsf(z));
    float s = (z >= 0.0f ? 1.0f : e) / (1.0f + e);

    return g * s * up;
}


void
llm_geglu_ref(float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        gate[i] = geglu1(gate[i], up[i]);
    }
}


/* (u + 1) * (g * sigmoid(1.702 g)) after the clamps, in GptOssExperts'
 * order (fminf and _mm512_min_ps both give the limit for a NaN g) */
static inline float
swiglu_oai1(float g, float up)
{
    float gc = fminf(g, LLM_SWIGLU_OAI_LIMIT);
    float u = fminf(fmaxf(up, -LLM_SWIGLU_OAI_LIMIT), LLM_SWIGLU_OAI_LIMIT);
    float z = gc * LLM_SWIGLU_OAI_ALPHA;
    float e = att_exp1(-fabsf(z));
    float s = (z >= 0.0f ? 1.0f : e) / (1.0f + e);

    return (u + 1.0f) * (gc * s);
}


void
llm_swiglu_oai_ref(float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        gate[i] = swiglu_oai1(gate[i], up[i]);
    }
}


#if defined(__x86_64__)

EXP_NEG_TGT static void
swiglu_oai_avx512(float *gate, const float *up, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 sign = _mm512_set1_ps(-0.0f);
    const __m512 lim = _mm512_set1_ps(LLM_SWIGLU_OAI_LIMIT);
    const __m512 nlim = _mm512_set1_ps(-LLM_SWIGLU_OAI_LIMIT);
    const __m512 alpha = _mm512_set1_ps(LLM_SWIGLU_OAI_ALPHA);
    size_t i;

    for (i = 0; i + 16 <= n; i += 16) {
        __m512 g = _mm512_min_ps(_mm512_loadu_ps(gate + i), lim);
        __m512 u = _mm512_min_ps(_mm512_max_ps(_mm512_loadu_ps(up + i),
                                               nlim), lim);
        __m512 z = _mm512_mul_ps(g, alpha);
        __m512 e = exp16(_mm512_or_ps(z, sign));           /* e^-|z| */
        __mmask16 pos = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(),
                                           _CMP_GE_OQ);
        __m512 s = _mm512_div_ps(_mm512_mask_blend_ps(pos, e, one),
                                 _mm512_add_ps(one, e));
        _mm512_storeu_ps(gate + i, _mm512_mul_ps(_mm512_add_ps(u, one),
                                                 _mm512_mul_ps(g, s)));
    }
    llm_swiglu_oai_ref(gate + i, up + i, n - i);
}


EXP_NEG_TGT static void
geglu_avx512(float *gate, const float *up, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 sign = _mm512_set1_ps(-0.0f);
    const __m512 c1 = _mm512_set1_ps(GELU_C1);
    const __m512 c3 = _mm512_set1_ps(GELU_C3);
    size_t i;

    for (i = 0; i + 16 <= n; i += 16) {
        __m512 g = _mm512_loadu_ps(gate + i);
        __m512 z = _mm512_mul_ps(g, _mm512_add_ps(c1, _mm512_mul_ps(c3,
                                     _mm512_mul_ps(g, g))));
        __m512 e = exp16(_mm512_or_ps(z, sign));           /* e^-|z| */
        __mmask16 pos = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(),
                                           _CMP_GE_OQ);
        __m512 s = _mm512_div_ps(_mm512_mask_blend_ps(pos, e, one),
                                 _mm512_add_ps(one, e));
        _mm512_storeu_ps(gate + i, _mm512_mul_ps(_mm512_mul_ps(g, s),
                                                 _mm512_loadu_ps(up + i)));
    }
    llm_geglu_ref(gate + i, up + i, n - i);
}


EXP_NEG_TGT static void
swiglu_avx512(float *gate, const float *up, size_t n)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 sign = _mm512_set1_ps(-0.0f);
    size_t i;

    for (i = 0; i + 16 <= n; i += 16) {
        __m512 g = _mm512_loadu_ps(gate + i);
        __m512 e = exp16(_mm512_or_ps(g, sign));           /* e^-|g| */
        __mmask16 pos = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(),
                                           _CMP_GE_OQ);
        __m512 s = _mm512_div_ps(_mm512_mask_blend_ps(pos, e, one),
                                 _mm512_add_ps(one, e));
        _mm512_storeu_ps(gate + i, _mm512_mul_ps(_mm512_mul_ps(g, s),
                                                 _mm512_loadu_ps(up + i)));
    }
    llm_swiglu_ref(gate + i, up + i, n - i);
}

#endif


void
llm_swiglu(float *gate, const float *up, size_t n)
{
#if defined(__x86_64__)
    if (llm_kernels_isa() == LLM_ISA_AVX512) {
        swiglu_avx512(gate, up, n);
        return;
    }
#endif
    llm_swiglu_ref(gate, up, n);
}


void
llm_geglu(float *gate, const float *up, size_t n)
{
#if defined(__x86_64__)
    if (llm_kernels_isa() == LLM_ISA_AVX512) {
        geglu_avx512(gate, up, n);
        return;
    }
#endif
    llm_geglu_ref(gate, up, n);
}


void
llm_swiglu_oai(float *gate, const float *up, size_t n)
{
#if defined(__x86_64__)
    if (llm_kernels_isa() == LLM_ISA_AVX512) {
        swiglu_oai_avx512(gate, up, n);
        return;
    }
#endif
    llm_swiglu_oai_ref(gate, up, n);
}
