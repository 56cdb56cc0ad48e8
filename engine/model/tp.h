/*
 * Tensor parallelism: the rank group and the fixed reduction order.
 *
 * Design note (Megatron split, docs/tp.md). Rank r of N holds a shard view
 * of every layer (model.h): column-split wq/wk/wv/gate/up (its heads, its
 * slice of the hidden features), row-split wo/down (the matching input
 * features). Each rank computes a partial product for wo and down; the
 * partials of all ranks are summed (the all-reduce) and every rank carries
 * on with the same residual stream.
 *
 * Numerics. Floating-point addition is not associative, so "sum the ranks'
 * partials" gives different bits for different N. Instead the sum over a
 * row-split matrix's input features is cut into a FIXED number of column
 * slices that depends only on the model (llm_tp_slices), never on N: every
 * slice is one matmul, and the slices' partials are added in slice order,
 * ((p0 + p1) + p2) + ..., at any N, TP=1 included. Rank r computes slices
 * r*S/N .. (r+1)*S/N-1, the exchange makes all S partials visible to every
 * rank, and every rank adds them in the same order, so TP=N == TP=1 bit for
 * bit whenever N divides S (llm_tp_check), whatever the thread timing.
 *
 * The rank group is N threads (the caller is rank 0) that run one function
 * per step and meet at barriers; the CPU backend exchanges partials through
 * shared memory between two barriers' worth of work. A CUDA backend can use
 * the same group (one thread per device) and plan; an NCCL all-reduce does
 * not keep this order (an all-gather of the slices followed by the same
 * ordered sum would).
 *
 * defines: LLM_TP_MAX_SLICES, llm_tp_slices, llm_tp_check,
 *          llm_tp_sum_slices, llm_tp_load_rank, llm_tp_group,
 *          llm_tp_group_create, llm_tp_group_run, llm_tp_barrier,
 *          llm_tp_group_size, llm_tp_group_free
 */
#ifndef NGX_LLM_TP_H
#define NGX_LLM_TP_H

#include <stddef.h>

#include "model/model.h"

/* the most slices a row-split matmul is cut into, hence the largest TP
 * that can reproduce TP=1 (8 GPUs per node); every slice costs TP=1 a
 * little (docs/tp.md), so a 32-KV-head model is not cut into 32 */
#define LLM_TP_MAX_SLICES  8

/*
 * The number of column slices S every row-split matmul (wo, down) is summed
 * from: the largest divisor S of n_kv_heads (at most LLM_TP_MAX_SLICES)
 * such that every layer's wo and ffn_down split into S slices of whole
 * quantization blocks. Depends only on the model's config and tensor types,
 * so m may be any rank's view. SmolLM2-135M: 3; stories260K F32/F16: 4,
 * its Q4/Q8 files: 2 (wo has 64 columns, two 32-element blocks).
 */
int llm_tp_slices(const llm_model *m);

/* 0 if tp_size ranks can reproduce TP=1 (tp_size divides llm_tp_slices);
 * otherwise -1 and one message in err naming the sizes that can */
int llm_tp_check(const llm_model *m, int tp_size, char *err, size_t err_len);

/* x[i] += ((slot[0][i] + slot[1][i]) + slot[2][i]) + ... for lo <= i < hi:
 * the ordered sum of the slices' partials (elementwise, so any split of
 * [lo, hi) across threads gives the same bits) */
void llm_tp_sum_slices(float *x, const float *const *slot, int n_slices,
    size_t lo, size_t hi);

/* load rank `rank` of rank0->tp_size from the same model as rank0: the
 * GGUF descriptor when it was opened from one, else rank0->path (a GGUF
 * file or a Hugging Face directory). Another set of views into the same
 * page cache, no copy. 0, or -1 with dst->err set (dst is safe to free). */
int llm_tp_load_rank(llm_model *dst, const llm_model *rank0, int rank);


typedef struct llm_tp_group llm_tp_group;

/* fn(arg, rank, n_ranks) runs once per rank, rank 0 on the caller */
typedef void (*llm_tp_rank_fn)(void *arg, int rank, int n_ranks);

/* n_ranks >= 1 threads counting the caller; NULL with a message in err */
llm_tp_group *llm_tp_group_create(int n_ranks, char *err, size_t err_len);

/* runs fn on every rank at once and returns when all have returned. One
 * caller at a time; fn may call llm_tp_barrier (every rank the same number
 * of times) but not run. */
void llm_tp_group_run(llm_tp_group *g, llm_tp_rank_fn fn, void *arg);

/* inside fn: returns once every rank has called it (release/acquire: what
 * a rank wrote before is visible to all ranks after). NULL: no-op. */
void llm_tp_barrier(llm_tp_group *g);

int llm_tp_group_size(const llm_tp_group *g);    /* 1 for NULL */

void llm_tp_group_free(llm_tp_group *g);

#endif
