/*
 * The CPU forward of a mixture-of-experts FFN (qwen3moe), for
 * backend_cpu.c's layer: route every token, group the tokens by expert,
 * run each routed expert once as a small GEMM over its tokens (gate and
 * up from one quantization of its inputs), add each token's weighted
 * expert outputs back to its residual row. The whole step is one pool
 * job, the router's rows its first items (moe_cpu.c).
 *
 * Batching invariance (docs/numerics.md): a token's result never depends
 * on the other tokens of its step, because
 *   - the router logits, the expert GEMMs and the down projections are
 *     matmuls whose output rows depend only on their own input rows (the
 *     kernels' contract, the same one the dense FFN relies on): an
 *     expert's group of tokens, its row chunks and the threads that take
 *     them change no bit of a row (llm_matmul_act == llm_matmul);
 *   - activations are quantized per row, the GLU is elementwise (SIMD ==
 *     scalar), softmax and top-k are per token (ties: lower expert id);
 *   - a token's k expert outputs are summed, each element from zero, in
 *     its own top-k order (by descending probability), then added to its
 *     residual row: the order of experts in the step and of tokens within
 *     an expert's group changes no sum.
 * test_model checks it bit for bit on the tiny MoE models (batched ==
 * unbatched, and a step whose tokens share their experts == each alone ==
 * the unfused reference).
 *
 * gpt-oss (cfg router_topk_softmax, swiglu_oai): llm_moe_cpu_forward adds
 * the router's bias, routes by softmax over the top k, passes the
 * experts' biases (each added to its matmul's output row before the GLU,
 * or to the expert's output before the weighted sum) and runs the clamped
 * SwiGLU (llm_swiglu_oai) as the GLU. Another router may fill mc->sel and
 * mc->weight (n, k) itself and call llm_moe_cpu_experts.
 *
 * defines: llm_moe_cpu, llm_moe_weights, llm_moe_cpu_init,
 *          llm_moe_cpu_free, llm_moe_cpu_forward, llm_moe_cpu_experts,
 *          llm_moe_route, llm_moe_route_topk_softmax
 */
#ifndef NGX_LLM_MOE_CPU_H
#define NGX_LLM_MOE_CPU_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "matmul.h"
#include "model/model.h"
#include "threadpool.h"

/* one layer's experts: n_expert 2-D views each (model.h's llm_layer),
 * and optional biases added after each matmul (gpt-oss; NULL: none) */
typedef struct {
    const llm_tensor  *gate;       /* (n_expert) views (expert_ff, dim) */
    const llm_tensor  *up;         /* (n_expert) views (expert_ff, dim) */
    const llm_tensor  *down;       /* (n_expert) views (dim, expert_ff) */
    const float       *gate_b;     /* (n_expert, expert_ff) or NULL */
    const float       *up_b;       /* (n_expert, expert_ff) or NULL */
    const float       *down_b;     /* (n_expert, dim) or NULL */
} llm_moe_weights;

struct llm_moe_item;

typedef struct {
    llm_threadpool  *tp;
    int              exact;      /* llm_matmul_ref, llm_swiglu_ref */
    int              dim;
    int              n_expert;
    int              k;          /* experts per token */
    int              ff;         /* expert hidden size */
    int              norm;       /* renormalise the top-k weights */
    int              fused;      /* 1: one pool job (default); 0: three
                                    llm_matmul per expert (tests) */
    int              topk_softmax;  /* gpt-oss: top-k, then softmax */
    /* gate = glu(gate, up), elementwise: llm_swiglu by default */
    void           (*glu)(float *gate, const float *up, size_t n);
    void           (*glu_ref)(float *gate, const float *up, size_t n);
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
    /* the fused job's state (moe_cpu.c) */
    const llm_tensor *router;    /* llm_moe_cpu_forward: the router's rows */
    const float     *router_b;   /*   are the job's first items */
    const float     *xb;
    int              n;
    llm_act          act_r;      /* xb for the router */
    uint8_t         *rbuf;       /* act_r's quantized rows, if any */
    size_t           rbuf_size;
    atomic_int       next_rrow;
    atomic_int       router_left; /* router row chunks not done */
    atomic_int       routed;     /* 1: tokens routed, items planned */
    int              plan_rc;    /* fused_plan's: -1 out of memory */
    const llm_moe_weights *ew;
    float           *x_out;
    struct llm_moe_item *items;
    int              n_items;
    atomic_int       next_item;
    atomic_int       down_left;
    atomic_int      *ready;      /* (n_expert) activations made: 1, 2 */
    atomic_int      *pending;    /* (n_expert) gate/up items not done */
    llm_act         *act_g;      /* (n_expert) per routed expert */
    llm_act         *act_u;
    llm_act         *act_d;
    size_t          *off_g;      /* (n_expert) into abuf; off_u SIZE_MAX: */
    size_t          *off_u;      /*   up reads act_g */
    size_t          *off_d;
    uint8_t         *abuf;       /* the step's quantized activations */
    size_t           abuf_size;
} llm_moe_cpu;

/* scratch for max_tokens tokens of m's config; 0 or -1 (out of memory) */
int llm_moe_cpu_init(llm_moe_cpu *mc, const llm_config *cfg, int max_tokens,
    llm_threadpool *tp, int exact);
void llm_moe_cpu_free(llm_moe_cpu *mc);
/* x(n, dim) += moe(xb(n, dim)) for layer l; 0, or -1 when a matmul had no
 * memory for its activations */
int llm_moe_cpu_forward(llm_moe_cpu *mc, float *x, const float *xb, int n,
    const llm_layer *l);
/* x(n, dim) += experts(xb(n, dim)) as routed by mc->sel and mc->weight
 * (n, k), which the caller filled (llm_moe_route or its own router); 0, or
 * -1 out of memory (the fused job's activations: x untouched) */
int llm_moe_cpu_experts(llm_moe_cpu *mc, float *x, const float *xb, int n,
    const llm_moe_weights *ew);
/* one token's routing from its router logits (n_expert): the k experts in
 * descending probability (ties: lower id first) and their weights, as
 * transformers' Qwen3MoeTopKRouter (softmax in float, top-k, optional
 * renormalisation) */
void llm_moe_route(const float *logits, int n_expert, int k, int norm,
    int32_t *sel, float *weight);

/* gpt-oss's router (GptOssTopKRouter): the k largest logits (the
 * router's bias already added), same order and ties as llm_moe_route,
 * then softmax over those k only. Not yet called: no gpt-oss loader
 * (docs/models.md) */
void llm_moe_route_topk_softmax(const float *logits, int n_expert, int k,
    int32_t *sel, float *weight);

#endif
