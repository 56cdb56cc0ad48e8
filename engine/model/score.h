/*
 * Scoring (rerank, issue 32): a score model reads one query-document pair
 * per input and answers one relevance score in [0, 1] instead of a
 * vector. The input is pooled as an embedder's (model/pool.h: the final
 * hidden states after the final norm, cfg.pooling, never normalised),
 * then a head turns that row h(dim) into the score:
 *
 *   LLM_SCORE_YES_NO     a causal LM asked to answer "yes" or "no"
 *                        (Qwen3-Reranker, its prompt in api/rerank.h):
 *                        softmax([logit(no), logit(yes)])[yes] at the last
 *                        position, the two logits the output (lm_head)
 *                        rows cfg.score_yes and cfg.score_no times h.
 *   LLM_SCORE_CLASSIFIER a cross-encoder (BERT's ForSequenceClassification
 *                        with one label): sigmoid(logit), the logit from
 *                        the model's own head, m->score_head.
 *
 * The hook for a cross-encoder's loader: set cfg.pooling (LLM_POOL_CLS),
 * cfg.score = LLM_SCORE_CLASSIFIER and m->score_head, a function
 *     int head(const llm_model *m, const float *h, float *logit)
 * that reads h (dim, the pooled row: the [CLS] state of the last layer)
 * and its own weights (the pooler's dense + tanh, the classifier) and
 * writes one logit; 0, or -1 on a fault. It runs on the engine's loop
 * thread once per finished input (no batching, no allocation needed
 * beyond the stack; keep it small). The pair's token types reach the
 * forward as llm_batch.type (backend.h): prompt[type_split..] is type 1.
 *
 * defines: llm_score_type, llm_score_type_name, llm_task_parse,
 *          llm_model_task, llm_score
 */
#ifndef NGX_LLM_SCORE_H
#define NGX_LLM_SCORE_H

#include "common/task.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

/* the widest row a yes/no head reads (its stack buffer) */
#define LLM_SCORE_MAX_DIM  16384

enum llm_score_type {
    LLM_SCORE_NONE = 0,
    LLM_SCORE_YES_NO = 1,
    LLM_SCORE_CLASSIFIER = 2,
};

/* "none", "yes_no", "classifier"; "unknown" past the enum */
const char *llm_score_type_name(int type);

/* "auto", "generate", "embed", "score" into *task: 0, or -1 */
int llm_task_parse(const char *name, int *task);

/*
 * The task applied to a loaded model, over what its metadata said
 * (pool_config.c): generate drops the pooling; embed keeps the metadata's
 * pooling, else pools the last token, L2-normalised (a decoder embedder
 * without sentence-transformers files, vLLM's default); score keeps a
 * cross-encoder's head, else makes a causal LM a yes/no reranker (its
 * "yes" and "no" tokens looked up in tok) pooling the last token. A model
 * that cannot serve the task is refused with m->err: 0, or -1.
 */
int llm_model_task(llm_model *m, int task, const llm_tokenizer *tok);

/* *score from the pooled row h (dim) by the model's head: 0, or -1 */
int llm_score(const llm_model *m, const float *h, float *score);

#endif /* NGX_LLM_SCORE_H */
