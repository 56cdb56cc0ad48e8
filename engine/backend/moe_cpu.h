/*
 * The CPU forward of a mixture-of-experts FFN (qwen3moe), for
 * backend_cpu.c's layer: route every token, group the tokens by expert,
 * run each expert once as a small GEMM over its tokens, add each token's
 * weighted expert outputs back to its residual row.
 *
 * Batching invariance (docs/numerics.md): a token's result never depends
 * on the other tokens of its step, because
 *   - the router logits, the expert GEMMs and the down projections are
 *     matmuls whose output rows depend only on their own input rows (the
 *     kernels' contract, the same one the dense FFN relies on);
 *   - softmax and top-k are per token (ties: the lower expert id first);
 *   - a token's k expert outputs are summed in its own top-k order (by
 *     descending probability), into a zeroed accumulator, then added to
 *     its residual row: the order of experts in the step and of tokens
 *     within an expert's group changes no sum.
 * test_model checks it bit for bit on the tiny MoE models.
 *
 * defines: llm_moe_cpu, llm_moe_cpu_init, llm_moe_cpu_free,
 *          llm_moe_cpu_forward, llm_moe_route,
 *          llm_moe_route_topk_softmax
 */
#ifndef NGX_LLM_MOE_CPU_H
#define NGX_LLM_MOE_CPU_H

#include <stdint.h>

#include "model/model.h"
#include "threadpool.h"

typedef struct {
    llm_threadpool  *tp;
    int              exact;      /* llm_matmul_ref, llm_swiglu_ref */
    int              dim;
    int              n_expert;
    int              k;          /* experts per token */
    int              ff;         /* expert hidden size */
    int              norm;       /* renormalise the top-k weights */
    int              topk_softmax;  /* gpt-oss: top-k, then softmax */
    int              swiglu_oai;    /* gpt-oss: the clamped SwiGLU */
    /* scratch for max_tokens tokens */
    float           *logits;     /* (n, n_expert) router logits */
    int32_t         *sel;        /* (n, k) experts, top-k order */
    float           *weight;     /* (n, k) their weights */
    int32_t         *pos;        /* (n, k) row of (token, j) in the groups */
    int32_t         *count;      /* (n_expert + 1) group offsets */
    int32_t         *next;       /* (n_expert) next free row of a group */
    float           *xg;         /* (n*k, dim) inputs grouped by expert */
    float           *g;          /* (n*k, ff) gate, then silu(gate)*up */
    float           *u;          /* (n*k, ff) up */
    float           *y;          /* (n*k, dim) expert outputs */
    float           *acc;        /* (dim) one token's weighted sum */
} llm_moe_cpu;

/* scratch for max_tokens tokens of m's config; 0 or -1 (out of memory) */
int llm_moe_cpu_init(llm_moe_cpu *mc, const llm_config *cfg, int max_tokens,
    llm_threadpool *tp, int exact);
void llm_moe_cpu_free(llm_moe_cpu *mc);
/* x(n, dim) += moe(xb(n, dim)) for layer l; 0, or -1 when a matmul had no
 * memory for its activations */
int llm_moe_cpu_forward(llm_moe_cpu *mc, float *x, const float *xb, int n,
    const llm_layer *l);
/* one token's routing from its router logits (n_expert): the k experts in
 * descending probability (ties: lower id first) and their weights, as
 * transformers' Qwen3MoeTopKRouter (softmax in float, top-k, optional
 * renormalisation) */
void llm_moe_route(const float *logits, int n_expert, int k, int norm,
    int32_t *sel, float *weight);

/* gpt-oss's router (GptOssTopKRouter): the k largest logits (the
 * router's bias already added), same order and ties as llm_moe_route,
 * then softmax over those k only */
void llm_moe_route_topk_softmax(const float *logits, int n_expert, int k,
    int32_t *sel, float *weight);

#endif
