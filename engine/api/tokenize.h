/*
 * vLLM's POST /tokenize and /detokenize bodies. A /tokenize body is the
 * chat or completion request it would be (messages or prompt), so the
 * prompt ids it answers are the ones those endpoints send; a /detokenize
 * body is a list of token ids. No nginx types: t/unit/test_tokenize_api.c.
 *
 * defines: llm_tokenize_to_request, llm_detokenize_parse
 */
#ifndef NGX_LLM_API_TOKENIZE_H
#define NGX_LLM_API_TOKENIZE_H

#include <stddef.h>
#include <stdint.h>

#include "api/request.h"

typedef struct {
    int     chat;                   /* messages (1) or prompt (0) */
    int     add_generation_prompt;  /* chat: 1 unless false */
    int     add_special_tokens;     /* -1: the endpoint's (prompt: on,
                                       messages: off, as vLLM) */
    int     return_token_strs;
} llm_tokenize_opts;

/*
 * body (len bytes) of a /tokenize request into the text of the chat or
 * completion request it stands for (malloc'd, *out_len bytes; free() it),
 * model filled in when the body has none (vLLM's model is optional).
 * NULL with err filled on a refusal.
 */
char *llm_tokenize_to_request(const char *body, size_t len,
    const char *model, const llm_api_limits *lim, llm_tokenize_opts *opts,
    size_t *out_len, llm_api_error *err);

/*
 * A /detokenize body {"model"?, "tokens": [ids]}: *ids (malloc'd, *n of
 * them, each in [0, n_vocab)). Returns 0, or -1 with err filled.
 */
int llm_detokenize_parse(const char *body, size_t len, int32_t n_vocab,
    const llm_api_limits *lim, int32_t **ids, int *n, llm_api_error *err);

#endif /* NGX_LLM_API_TOKENIZE_H */
