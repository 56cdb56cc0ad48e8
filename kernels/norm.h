/*
 * RMSNorm of one row: out[i] = w[i] * (x[i] * r), r = 1 / sqrt(ss / n +
 * eps) in double, where ss sums x[i]^2 in double in eight lanes (element
 * i into lane i % 8, in order) reduced by the tree
 *
 *   ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))
 *
 * The scalar definition and the AVX-512 kernel (8 double lanes, the tree
 * as halving adds) compute the same operations, so a row's result does
 * not depend on which ran it; in place (out == x) is allowed.
 *
 * LayerNorm of one row (BERT): out[i] = (x[i] - mean) * r * w[i] + b[i],
 * mean and variance (biased, as torch) in double in index order, r = 1 /
 * sqrt(var + eps). A scalar definition only: encoders call it once per
 * token and block, far from the matmuls' cost.
 *
 * defines: llm_rmsnorm, llm_rmsnorm_ref, llm_layernorm
 */
#ifndef NGX_LLM_NORM_H
#define NGX_LLM_NORM_H

/* the best kernel for this CPU (llm_kernels_isa) */
void llm_rmsnorm(float *out, const float *x, const float *w, int n,
    float eps);

/* the definition, scalar */
void llm_rmsnorm_ref(float *out, const float *x, const float *w, int n,
    float eps);

/* in place (out == x) allowed */
void llm_layernorm(float *out, const float *x, const float *w,
    const float *b, int n, float eps);

#endif
