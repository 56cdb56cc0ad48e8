/*
 * Rotary position embedding of one head: pairs (x[a], x[b]) rotated by a
 * position's angles (cs, sn: rope_dim/2 of each),
 *
 *   x[a] = x0 * cs[i] - x1 * sn[i];  x[b] = x0 * sn[i] + x1 * cs[i]
 *
 * with a = 2i, b = 2i + 1 (llama's GGUF order) or a = i, b = i +
 * rope_dim/2 (NEOX order). The scalar definition and the AVX-512 kernel
 * compute the same products and sums (an IEEE sum does not depend on
 * the order of its two terms), so the same bits.
 *
 * defines: llm_rope_head, llm_rope_head_ref
 */
#ifndef NGX_LLM_ROPE_H
#define NGX_LLM_ROPE_H

/* the best kernel for this CPU (llm_kernels_isa) */
void llm_rope_head(float *x, const float *cs, const float *sn, int rope_dim,
    int neox);

/* the definition, scalar */
void llm_rope_head_ref(float *x, const float *cs, const float *sn,
    int rope_dim, int neox);

#endif
