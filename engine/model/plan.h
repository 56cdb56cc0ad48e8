/*
 * The memory plan: what an engine with these settings allocates, per
 * tensor-parallel rank, before it serves its first request.
 *
 * Design note. One rule, two users: the engine computes its KV pool from
 * it at start (server_load.c, which logs the "memory plan" line and refuses to
 * start when the plan does not fit) and `ngx_llm_engine plan` prints it as
 * a table, for a GGUF file, a Hugging Face config.json or a bare shape, so
 * a model too big for this machine can be planned here. Numbers are bytes:
 *
 *   weights    per rank: column/row-split matrices / tp, embeddings,
 *              lm_head and norms whole on every rank (docs/tp.md)
 *   KV         n_layers * 2 * n_kv_heads * head_dim * elt per token
 *              (elt: f16 2, f32 4; the CUDA backend keeps bf16, 2)
 *   pool       kv_cache_memory / (block bytes) whole blocks; the CUDA
 *              backend without kv_cache_memory: kv_cache_ratio of the
 *              device's free memory after weights and workspace. An
 *              encoder keeps no KV (backend/encoder.h): 0 bytes, and
 *              blocks only as the scheduler's admission count, enough
 *              for max_num_seqs sequences of max_model_len
 *   workspace  what backend_cpu.c / backend_cuda.cu allocate at create for
 *              a step of max_batched_tokens, the scheduler's logits and
 *              block tables, and the ring (given by the caller: the model
 *              layer does not see the ring's ABI)
 *
 * defines: llm_plan_shape, llm_plan_options, llm_plan, llm_plan_shape_of,
 *          llm_plan_shape_weights, llm_plan_compute, llm_plan_weight_type,
 *          llm_plan_host_available
 */
#ifndef NGX_LLM_PLAN_H
#define NGX_LLM_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

typedef struct {
    int          n_layers;
    int          dim;              /* hidden size */
    int          n_heads;
    int          n_kv_heads;
    int          head_dim;
    int          hidden_dim;       /* intermediate size */
    int          n_expert;         /* MoE: experts per layer (0: dense) */
    int          expert_ff;        /* MoE: an expert's intermediate size */
    int          n_expert_used;    /* MoE: experts per token (top-k) */
    int          vocab_size;
    int          max_seq_len;      /* the model's context length */
    int          tied_output;      /* lm_head is the embedding */
    uint32_t     weight_type;      /* enum ggml_type of the matrices */
    uint32_t     expert_type;      /* of the experts' (gpt-oss's config:
                                      MXFP4); 0: weight_type */
    uint64_t     weight_bytes;     /* all ranks together */
    uint64_t     replicated_bytes; /* of those, on every rank: embeddings,
                                      lm_head, norms */
    int          encoder;          /* bert, nomic-bert: no KV at all */
    /* KV layer groups (model/kv.h); 0 (a shape made by hand): 1, none
       sliding */
    int          kv_groups;
    int          kv_sliding;       /* of them, groups with the window */
    int          kv_window;
} llm_plan_shape;

enum llm_plan_backend {
    LLM_PLAN_CPU = 0,
    LLM_PLAN_CUDA = 1,
};

typedef struct {
    int          backend;          /* enum llm_plan_backend */
    int          tp;               /* tensor_parallel */
    int          kv_dtype;         /* enum llm_kv_dtype (CPU only) */
    int          max_model_len;
    int          max_num_seqs;
    int          max_batched_tokens;
    int          threads;
    int          kv_block_size;
    uint64_t     kv_cache_bytes;   /* kv_cache_memory; 0: ratio (CUDA) */
    double       kv_cache_ratio;   /* of free device memory, CUDA only */
    uint64_t     ring_bytes;       /* the ring the engine maps */
    uint64_t     device_bytes;     /* memory this plan must fit into per
                                      GPU, or the host for all CPU ranks
                                      (MemAvailable, a cgroup limit); 0:
                                      unknown, not checked */
} llm_plan_options;

typedef struct {
    int          max_model_len;    /* after the model's context caps it */
    size_t       kv_elt_bytes;     /* 2 or 4 */
    size_t       kv_token_bytes;   /* all ranks together */
    size_t       kv_token_bytes_rank;
    size_t       kv_block_bytes_rank;
    int          kv_blocks;
    int          kv_tokens;
    uint64_t     kv_pool_bytes;    /* per rank */
    uint64_t     weight_bytes;     /* per rank */
    uint64_t     workspace_bytes;  /* per rank, ring included */
    uint64_t     total_bytes;      /* per rank: weights + pool + workspace */
    int          seqs_fit;         /* full max_model_len sequences (a
                                      sliding group holds only its
                                      window of each, model/kv.h) */
    int          all_fit;          /* max_num_seqs of them fit the pool */
    uint64_t     need_bytes;       /* what device_bytes must hold: CUDA
                                      total_bytes; CPU pool and workspace
                                      of all ranks (weights: a file
                                      mapping the kernel can page) */
    int          device_fit;       /* -1 unknown, 0 no, 1 yes */
    char         err[256];         /* why compute failed */
} llm_plan;

/* the shape of a loaded model (GGUF or HF directory): its config and the
 * bytes of its tensors, split by what tensor parallelism shards */
void llm_plan_shape_of(llm_plan_shape *sh, const llm_model *m);

/* the weights of a bare shape (a config.json, flags): the llama layout's
 * parameters at weight_type */
void llm_plan_shape_weights(llm_plan_shape *sh);

/* "bf16", "q4_1", ... -> enum ggml_type, or -1 */
int llm_plan_weight_type(const char *name);

/* 0, or -1 with p->err set (a shape tp does not divide, a pool that holds
 * less than one sequence of max_model_len) */
int llm_plan_compute(llm_plan *p, const llm_plan_shape *sh,
    const llm_plan_options *o);

/* bytes this process may still allocate on this machine (MemAvailable, or
 * the memory cgroup's limit less its usage when lower; *what names which);
 * 0 when unknown */
uint64_t llm_plan_host_available(const char **what);

#endif
