/*
 * Pooling: one embedding vector from the final hidden states (after the
 * final norm) of a prompt's tokens, as sentence-transformers' Pooling and
 * Normalize modules compute it for decoder embedders (Qwen3-Embedding:
 * last token, L2-normalised). Plain loops over floats, summed in token
 * order, so a vector depends on its own prompt only (batched == alone).
 *
 * defines: llm_pool_type, llm_pool_type_name, llm_pool_type_parse,
 *          llm_pool_wants, llm_pool_add, llm_pool_finish, llm_pool
 */
#ifndef NGX_LLM_POOL_H
#define NGX_LLM_POOL_H

#include <stddef.h>

/* GGUF's <arch>.pooling_type numbers (llama.cpp's enum llama_pooling_type) */
enum llm_pool_type {
    LLM_POOL_NONE = 0,      /* a generation model */
    LLM_POOL_MEAN = 1,
    LLM_POOL_CLS = 2,       /* the first token */
    LLM_POOL_LAST = 3,
    LLM_POOL_RANK = 4,      /* rerank: refused (not an embedder) */
};

/* "none", "mean", "cls", "last", "rank"; "unknown" past the enum */
const char *llm_pool_type_name(int type);

/*
 * A sentence-transformers pooling_mode or llama.cpp's name ("mean",
 * "cls", "last", "lasttoken", "none") into *type: 0, or -1 for any other
 * (max, weightedmean, ... are refused by name by the caller).
 */
int llm_pool_type_parse(const char *name, int *type);

/*
 * Pooling a token at a time, so a prompt prefilled in chunks (the
 * scheduler) pools exactly as one forward: acc(dim) starts zeroed, gets
 * llm_pool_add for each token pos 0..n-1 in order that llm_pool_wants,
 * then llm_pool_finish(acc, n, ...) leaves the vector in acc[0..dims).
 */
int llm_pool_wants(int type, int pos, int n);
void llm_pool_add(int type, float *acc, const float *row, int dim);
void llm_pool_finish(float *acc, int n, int type, int normalize, int dims);

/*
 * out(dim) = pool(hidden(n, dim)) over n >= 1 tokens, then, when
 * normalize, out /= max(||out||_2, 1e-12) (torch's F.normalize). Only the
 * first dims components are kept, before normalising (Matryoshka:
 * sentence-transformers' truncate_dim); dims in 1..dim. 0, or -1 for a
 * type that is not mean/cls/last.
 */
int llm_pool(const float *hidden, int n, int dim, int type, int normalize,
    int dims, float *out);

#endif /* NGX_LLM_POOL_H */
