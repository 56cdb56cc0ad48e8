/*
 * OpenAI's POST /v1/embeddings body and reply (issue 32). No nginx types:
 * t/unit/test_embeddings_api.c. The inputs are read as they come (texts
 * to tokenize, or token ids); each becomes one EMBED ring slot
 * (docs/protocol.md), and the reply is built from their vectors.
 *
 * defines: LLM_EMBED_MAX_INPUTS, llm_embed_request, llm_embed_root,
 *          llm_embed_parse,
 *          llm_embed_request_free, llm_embed_reply
 */
#ifndef NGX_LLM_API_EMBEDDINGS_H
#define NGX_LLM_API_EMBEDDINGS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "api/request.h"

#define LLM_EMBED_MAX_INPUTS  2048      /* OpenAI's bound on input[] */

typedef struct {
    char      *model;           /* required, non-empty */
    int        n_inputs;        /* 1..LLM_EMBED_MAX_INPUTS */
    char     **text;            /* (n_inputs) NUL-terminated UTF-8, or NULL
                                   where the input is token ids */
    size_t    *text_len;        /* (n_inputs) */
    int32_t  **ids;             /* (n_inputs) token ids, or NULL where
                                   text; each below lim->vocab_size */
    int       *n_ids;           /* (n_inputs) */
    int        base64;          /* encoding_format "base64" (else float) */
    int        dimensions;      /* 0: not given; else >= 1 */
} llm_embed_request;

/*
 * body (len bytes): model, input (a string, an array of strings, an
 * array of token ids, an array of arrays of ids: none empty),
 * encoding_format (float | base64), dimensions (an integer >= 1), user (a
 * string, unused). 0, or -1 with err filled as OpenAI's 400 (413 past
 * lim->max_body); req is always safe to free.
 */
/* a body (len bytes) within lim as a cJSON object, or NULL with err
   filled as llm_api_parse fills it (also api/rerank.c's) */
cJSON *llm_embed_root(const char *body, size_t len,
    const llm_api_limits *lim, llm_api_error *err);

int llm_embed_parse(llm_embed_request *req, const char *body, size_t len,
    const llm_api_limits *lim, llm_api_error *err);

void llm_embed_request_free(llm_embed_request *req);

/*
 * The reply: {"object": "list", "data": [{"object": "embedding", "index":
 * i, "embedding": [floats] or base64 of little-endian float32}], "model",
 * "usage": {"prompt_tokens", "total_tokens"}}; vec[i] has dims floats.
 * cJSON_Delete() it; NULL when memory ran out.
 */
cJSON *llm_embed_reply(const char *model, const float *const *vec, int n,
    int dims, int base64, long prompt_tokens);

#endif /* NGX_LLM_API_EMBEDDINGS_H */
