/*
 * The backend interface: what the scheduler calls to run the model.
 *
 * Design note (after ggml-backend and calm). A backend is an opaque handle
 * with a small function table: create (weights are already views into the
 * mmap; the backend allocates its KV pool and scratch), forward (one batch),
 * free. The CPU backend is always built; a CUDA backend fills the same
 * table.
 *
 * A forward takes one BATCH: n_tokens tokens of any number of sequences,
 * each token with its sequence index and position, so prefill chunks and
 * single decode tokens of different sequences run in one call. Each
 * sequence has a block table of KV block ids (paged KV, see kv.h): the
 * token at position p writes its K/V to block table[p / block_size], slot
 * p % block_size, and attends causally to positions 0..p of its sequence,
 * i.e. to what earlier calls cached plus earlier tokens of the same sequence
 * in this batch. A model with layer groups (kv.h, "Layer kinds": gemma3,
 * gpt-oss) takes either one table per sequence of logical blocks (block b
 * is pages b*G ..) or, from the scheduler, one row of pages per group
 * (n_groups, table_stride), whose sliding rows hold -1 before the window. The caller must have run positions 0..p-1 of a sequence
 * (in earlier calls or in this batch) before asking for position p.
 *
 * Numerics (docs/numerics.md, rule 1): every token's computation (norms, matmul rows,
 * attention over 0..p in order, logits) has the same reduction order
 * whatever the batch size, chunking or the token's place in the batch, so
 * the logits of a sequence are bit-for-bit identical batched or not.
 *
 * defines: llm_backend_options, llm_batch, llm_backend, llm_backend_iface,
 *          llm_backend_create, llm_backend_cpu_create, llm_backend_forward,
 *          llm_backend_free, llm_backend_options_default
 */
#ifndef NGX_LLM_BACKEND_H
#define NGX_LLM_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model/model.h"
#include "sample/sampler.h"
#include "common/defaults.h"


typedef struct {
    int        n_threads;          /* CPU threads including the caller */
    int        kv_block_size;      /* token slots per KV block */
    int        kv_n_blocks;        /* KV blocks in the pool */
    int        max_batch_tokens;   /* most tokens one forward may carry */
    int        kv_dtype;           /* enum llm_kv_dtype (kv.h): f16
                                      (default) or f32 */
    int        exact;              /* 1: float activations and double sums
                                      (llm_matmul_ref, one thread, slow),
                                      f32 KV: for tests against the fp32
                                      reference */
    int        tp_slices;          /* TP=1 only: cut the row-split (wo,
                                      down) sums into this many slices added
                                      in order (docs/tp.md). 0: one slice,
                                      the fastest; llm_tp_slices(m) makes
                                      TP=1 equal TP=N bit for bit (~12%
                                      slower). Ranks always use the plan. */
    int        kv_prealloc;        /* 1: fault the KV pool in at create
                                      (the engine; kv_cache_prealloc) */
} llm_backend_options;

typedef struct {
    int                     n_tokens;
    const int32_t          *token;        /* (n_tokens) token ids */
    const int32_t          *pos;          /* (n_tokens) position in its seq */
    const int32_t          *seq;          /* (n_tokens) index into the tables */
    int                     n_seqs;
    const int32_t * const  *block_table;  /* (n_seqs) KV block ids, position
                                             p in block_table[s][p / bs] */
    const int32_t          *n_blocks;     /* (n_seqs) length of each table */
    int                     n_logits;
    const int32_t          *logit_idx;    /* (n_logits) token indices whose
                                             logits are wanted */
    float                  *logits;       /* out: (n_logits, vocab_size) */
    int                     n_hidden;     /* embeddings (model/pool.h); CPU
                                             only, 0 elsewhere */
    const int32_t          *hidden_idx;   /* (n_hidden) token indices whose
                                             final hidden states (after the
                                             final norm) are wanted */
    float                  *hidden;       /* out: (n_hidden, dim) */
    const int32_t          *type;         /* (n_tokens) token types 0/1 of a
                                             cross-encoder's pairs
                                             (model/score.h); NULL: all 0.
                                             Decoders ignore it */
    int                     n_groups;     /* 0: block_table[s] names
                                             logical blocks of every layer
                                             (kv.h); else the backend's G:
                                             group g's page of block k at
                                             block_table[s][g * stride + k]
                                             (last: positional
                                             initialisers leave it 0) */
    const int32_t          *table_stride; /* (n_seqs) with n_groups: a
                                             group's row in the table */
} llm_batch;

/* what a backend accepts; llm_batch_check tests a batch against it */
typedef struct {
    int        max_tokens;        /* tokens per forward */
    int        vocab;
    int        max_seq_len;
    int        block_size;        /* KV tokens per block */
    int        n_blocks;          /* KV pages in the pool */
    int        n_groups;          /* pages of a logical block (kv.h) */
    int        need_logits;       /* logits buffer required for n_logits */
} llm_batch_limits;

/* 0, or -1 with one message in err naming the first bad index */
int llm_batch_check(const llm_batch *b, const llm_batch_limits *l,
    char *err, size_t err_len);

typedef struct llm_backend llm_backend;

/* what the compute is doing, for /metrics (docs/operations.md) */
typedef struct {
    uint64_t    busy_ns;            /* cpu: thread-ns inside kernels */
    int         n_threads;          /* cpu: the threads busy_ns is over */
    int         device_valid;       /* 1: the device_* fields were read */
    int         device_util;        /* percent busy, NVML's last period */
    uint64_t    device_mem_used;    /* bytes, every device summed */
    uint64_t    device_mem_total;
} llm_backend_usage;

struct llm_backend_iface {
    const char  *name;
    /* 0, or -1 with be->err set: an invalid batch (nothing is run), or
       no memory for the step's activations (the batch's KV slots and
       logits hold garbage: the caller ends its sequences and must not
       keep their blocks in the prefix cache); the next call may work */
    int        (*forward)(llm_backend *be, const llm_batch *batch);
    /* (optional, NULL: the caller samples from forward's logits) forward,
       then draw each requested logit row i with samplers[i] where the
       logits are (the GPU), advancing every sampler exactly as llm_sample
       would: ids (n_logits) get the tokens, logits are not written.
       Samplers that want logprobs are the caller's. 0, or -1 as forward */
    int        (*forward_sample)(llm_backend *be, const llm_batch *batch,
                                 llm_sampler *const *samplers, int32_t *ids);
    /* (optional, NULL: unsupported) KV page dst := src (the block
       manager's ids: one layer group's page, kv.h), for copy-on-write of
       a shared prefix block */
    int        (*copy_block)(llm_backend *be, int32_t dst, int32_t src);
    void       (*free)(llm_backend *be);
    /* (optional, NULL: nothing known) fill u; callable from another thread
       while a step runs */
    void       (*usage)(llm_backend *be, llm_backend_usage *u);
};

struct llm_backend {
    struct llm_backend_iface  iface;
    const llm_model          *model;
    llm_backend_options       opt;        /* as resolved by create */
    void                     *ctx;        /* the backend's own state */
    char                      err[512];
};

/* n_threads 2, blocks of 16, enough blocks for one context_length sequence,
 * max_batch_tokens 512, exact 0 */
void llm_backend_options_default(llm_backend_options *o,
    const llm_model *m);

/* "cpu" (or "cuda" where built); NULL with a message in err */
llm_backend *llm_backend_create(const char *name, const llm_model *m,
    const llm_backend_options *o, char *err, size_t err_len);
llm_backend *llm_backend_cpu_create(const llm_model *m,
    const llm_backend_options *o, char *err, size_t err_len);

static inline int
llm_backend_forward(llm_backend *be, const llm_batch *batch)
{
    return be->iface.forward(be, batch);
}

static inline void
llm_backend_usage_get(llm_backend *be, llm_backend_usage *u)
{
    memset(u, 0, sizeof(*u));
    if (be->iface.usage != NULL) {
        be->iface.usage(be, u);
    }
}

static inline void
llm_backend_free(llm_backend *be)
{
    if (be != NULL) {
        be->iface.free(be);
    }
}

#endif
