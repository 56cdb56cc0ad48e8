/*
 * SwiGLU (activation.h): the scalar definition and an AVX-512 kernel of
 * the same operations, 16 elements at a time.
 */
#include <math.h>

#include "activation.h"
#include "exp_neg.h"
#include "isa.h"


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


#if defined(__x86_64__)

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
