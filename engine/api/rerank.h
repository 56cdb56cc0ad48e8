/*
 * POST /v1/rerank (issue 32): the body vLLM, llama-server and Jina/Cohere
 * clients send, {"model", "query", "documents": [...], "top_n",
 * "return_documents"}, each document one pair (query, document) scored by
 * the engine's score model (model/score.h), and the reply: the results
 * sorted by relevance_score, highest first. No nginx types:
 * t/unit/test_rerank.c.
 *
 * How a pair becomes token ids depends on the model's head (the ring's
 * facts.score): a yes/no reranker (Qwen3-Reranker) reads its published
 * prompt, llm_rerank_yes_no_ids; a cross-encoder reads the tokenizer's
 * pair, llm_rerank_pair_ids, with token types split where the document
 * begins.
 *
 * defines: LLM_RERANK_MAX_DOCUMENTS, LLM_RERANK_INSTRUCTION,
 *          llm_rerank_request, llm_rerank_parse, llm_rerank_request_free,
 *          llm_rerank_yes_no_ids, llm_rerank_pair_ids, llm_rerank_reply
 */
#ifndef NGX_LLM_API_RERANK_H
#define NGX_LLM_API_RERANK_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "api/request.h"
#include "tokenizer/tokenizer.h"

#define LLM_RERANK_MAX_DOCUMENTS  1024  /* documents in one request */

/* Qwen3-Reranker's default instruction (its model card's code) */
#define LLM_RERANK_INSTRUCTION                                              \
    "Given a web search query, retrieve relevant passages that answer "     \
    "the query"

typedef struct {
    char      *model;           /* NULL: not given (the served model) */
    char      *query;           /* non-empty UTF-8 */
    size_t     query_len;
    int        n_docs;          /* 1..LLM_RERANK_MAX_DOCUMENTS */
    char     **doc;             /* (n_docs) non-empty UTF-8 */
    size_t    *doc_len;         /* (n_docs) */
    int        top_n;           /* 0: every document; else 1..n_docs */
    int        return_documents;    /* 1: each result carries its text */
    char      *instruction;     /* a yes/no reranker's <Instruct>; NULL:
                                   LLM_RERANK_INSTRUCTION */
} llm_rerank_request;

/*
 * body (len bytes): model (a string), query (a non-empty string),
 * documents (1..LLM_RERANK_MAX_DOCUMENTS non-empty strings, or objects
 * {"text": string}), top_n (an integer >= 0; above n_docs: all),
 * return_documents (a boolean, default false), instruction (a string;
 * ours), user (unused). 0, or -1 with err filled (400; 413 past
 * lim->max_body); req is always safe to free.
 */
int llm_rerank_parse(llm_rerank_request *req, const char *body, size_t len,
    const llm_api_limits *lim, llm_api_error *err);

void llm_rerank_request_free(llm_rerank_request *req);

/*
 * Qwen3-Reranker's prompt for one pair, as its model card builds it:
 * the system/user prefix and the assistant suffix tokenized with their
 * control tokens, between them "<Instruct>: %s\n<Query>: %s\n<Document>:
 * %s" tokenized as plain text (no control token parsed from the request),
 * no special tokens added. Returns the ids' count (at most cap written;
 * a count above cap means too small, as llm_tokenize), or -1.
 */
int llm_rerank_yes_no_ids(const llm_tokenizer *t, const char *instruction,
    const char *query, size_t query_len, const char *doc, size_t doc_len,
    int32_t *ids, int cap);

/*
 * A cross-encoder's pair: the query with the tokenizer's special tokens
 * ([CLS] q [SEP]), then the document's ([CLS] d [SEP]) less its leading
 * BOS/[CLS] when the tokenizer adds one, so [CLS] q [SEP] d [SEP];
 * *split is where the document starts (token type 1 from there). Returns
 * the count as llm_rerank_yes_no_ids.
 */
int llm_rerank_pair_ids(const llm_tokenizer *t, const char *query,
    size_t query_len, const char *doc, size_t doc_len, int32_t *ids,
    int cap, int *split);

/*
 * The reply: {"id", "object": "rerank", "model", "results": [{"index",
 * "relevance_score", "document": {"text"} when return_documents}] sorted
 * by score, highest first (ties by index), the first top_n (0: all),
 * "usage": {"prompt_tokens", "total_tokens"}}. cJSON_Delete() it; NULL
 * when memory ran out.
 */
cJSON *llm_rerank_reply(const llm_rerank_request *req, const char *id,
    const char *model, const float *score, long prompt_tokens);

#endif /* NGX_LLM_API_RERANK_H */
