/*
 * Activations of the feed-forward block.
 *
 * SwiGLU: gate[i] = silu(gate[i]) * up[i], with silu(g) = g * sigmoid(g)
 * computed from e = e^-|g| (exp_neg.h) as
 *
 *   s = (g >= 0 ? 1 : e) / (1 + e);  gate[i] = (g * s) * up[i]
 *
 * the same operations in the scalar definition and the AVX-512 kernel,
 * so an element's value does not depend on which of them computed it
 * (which depends on the thread split): the numerics rule of
 * docs/numerics.md.
 *
 * GeGLU (Gemma): gate[i] = gelu_tanh(gate[i]) * up[i], transformers'
 * gelu_pytorch_tanh 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))),
 * computed as g * sigmoid(z) with z = g * (c1 + c3 * g * g), c1 =
 * 2 sqrt(2/pi), c3 = c1 * 0.044715 (1 + tanh(u) = 2 sigmoid(2u)), the
 * sigmoid as in SwiGLU; scalar and AVX-512 again the same operations.
 *
 * Clamped SwiGLU (gpt-oss, transformers' GptOssExperts): g = min(g, 7),
 * u = min(max(u, -7), 7), gate[i] = (u + 1) * (g * sigmoid(1.702 g)),
 * the sigmoid of z = 1.702 g as in SwiGLU; scalar and AVX-512 again the
 * same operations.
 *
 * GELU (BERT, transformers' "gelu"): x[i] = 0.5 x (1 + erf(x / sqrt 2)),
 * erf in double; a scalar definition only (once per FFN element).
 *
 * defines: llm_gelu_erf, llm_swiglu, llm_swiglu_ref, llm_geglu, llm_geglu_ref,
 *          llm_swiglu_oai, llm_swiglu_oai_ref, LLM_SWIGLU_OAI_LIMIT,
 *          LLM_SWIGLU_OAI_ALPHA
 */
#ifndef NGX_LLM_ACTIVATION_H
#define NGX_LLM_ACTIVATION_H

#include <stddef.h>

void llm_gelu_erf(float *x, size_t n);

/* the best kernel for this CPU (llm_kernels_isa) */
void llm_swiglu(float *gate, const float *up, size_t n);

/* the definition, scalar */
void llm_swiglu_ref(float *gate, const float *up, size_t n);

/* GeGLU with tanh GELU: the best kernel, and the scalar definition */
void llm_geglu(float *gate, const float *up, size_t n);
void llm_geglu_ref(float *gate, const float *up, size_t n);

/* gpt-oss's clamped SwiGLU: the best kernel, and the scalar definition */
#define LLM_SWIGLU_OAI_LIMIT  7.0f
#define LLM_SWIGLU_OAI_ALPHA  1.702f

void llm_swiglu_oai(float *gate, const float *up, size_t n);
void llm_swiglu_oai_ref(float *gate, const float *up, size_t n);

#endif
