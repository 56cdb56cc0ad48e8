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
 * defines: llm_swiglu, llm_swiglu_ref
 */
#ifndef NGX_LLM_ACTIVATION_H
#define NGX_LLM_ACTIVATION_H

#include <stddef.h>

/* the best kernel for this CPU (llm_kernels_isa) */
void llm_swiglu(float *gate, const float *up, size_t n);

/* the definition, scalar */
void llm_swiglu_ref(float *gate, const float *up, size_t n);

#endif
