/*
 * The encoder forward (bert, nomic-bert; model/bert.h) and the backend
 * that runs it in the batcher.
 *
 * Design note. An encoder attends both ways, so a sequence's states need
 * its whole input: each sequence whole in one forward, no KV cache,
 * nothing kept after it. The batcher's step runs all its sequences in one
 * forward: the matmuls over every token of the step at once, attention
 * and positions within each sequence. Per token (x: (n, dim)):
 *
 *   x = LN(tok_embd[id] + type_embd[type] + pos_embd[p])   (bert: + pos)
 *   per layer:
 *     q, k, v = x Wq^T + bq, ...             (nomic-bert: no biases, and
 *                                              q, k rotated, rotate-half)
 *     a = softmax(q k^T / sqrt(head_dim)) v   over all n tokens, per head
 *     x = LN(x + a Wo^T + bo)                 post-norm
 *     f = gelu_erf(x Wup^T + bup) Wdown^T + bdown      (bert)
 *       = (silu(x Wgate^T) * x Wup^T) Wdown^T          (nomic-bert)
 *     x = LN(x + f)
 *
 * Numerics: each row's matmuls are the kernels' (batched == alone, any
 * thread count), attention sums in index order in float (the (token,
 * head) rows dealt to the threads, each row whole on one), LayerNorm in
 * double; so a sequence's states do not depend on what else is in the
 * step nor on the threads.
 *
 * The batcher's backend (llm_backend_cpu_create picks it for an encoder):
 * a batch must hold each sequence's whole input, positions 0..n-1 in
 * order (the scheduler never chunks an encoder's input); hidden rows
 * only, no logits; token types from llm_batch.type (a cross-encoder's
 * pair: 0, then 1 from the document; NULL: all 0, an embedder's text).
 * A cross-encoder's score is the scheduler's: the [CLS] row pooled, then
 * the model's head (model/score.h, bert.c's hook).
 *
 * defines: llm_encoder_forward, llm_encoder_score, llm_encoder_pair,
 *          llm_backend_encoder_create
 */
#ifndef NGX_LLM_ENCODER_H
#define NGX_LLM_ENCODER_H

#include <stdint.h>

#include "backend/backend.h"
#include "threadpool.h"

/*
 * hidden(n, dim) = the last layer's states of ids (n tokens, positions
 * 0..n-1) with token types types (n; NULL: all 0). tp may be NULL. 0, or
 * -1 with err set: not an encoder, n outside 1..max_seq_len, an id or
 * type out of range, no memory.
 */
int llm_encoder_forward(const llm_model *m, llm_threadpool *tp,
    const int32_t *ids, const int32_t *types, int n, float *hidden,
    char *err, size_t err_len);

/*
 * The cross-encoder (cfg.score LLM_SCORE_CLASSIFIER: BertForSequenceClassification
 * with one label) on one pair outside the batcher (the tests' reference):
 * *logit = m->score_head(state of token 0) = classifier(tanh(pooler(.))). ids and types as
 * llm_encoder_pair makes them ([CLS] query [SEP] document [SEP], types 0
 * then 1). The relevance score is sigmoid(*logit) (sentence-transformers'
 * CrossEncoder with one label). 0, or -1 with err set as
 * llm_encoder_forward, and for a model without the head.
 */
int llm_encoder_score(const llm_model *m, llm_threadpool *tp,
    const int32_t *ids, const int32_t *types, int n, float *logit,
    char *err, size_t err_len);

/*
 * A query and a document (token ids without specials) as BERT's pair
 * input: ids = [CLS] q [SEP] d [SEP], types 0 for [CLS] q [SEP] and 1
 * for d [SEP] (transformers' tokenizer(query, document)). Writes at most
 * max entries of each; returns nq + nd + 3.
 */
int llm_encoder_pair(int32_t cls, int32_t sep, const int32_t *q, int nq,
    const int32_t *d, int nd, int32_t *ids, int32_t *types, int max);

/* the batcher's backend for an encoder model (see above) */
llm_backend *llm_backend_encoder_create(const llm_model *m,
    const llm_backend_options *o, char *err, size_t err_len);

#endif
