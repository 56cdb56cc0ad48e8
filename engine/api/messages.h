/*
 * Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens)
 * on top of the chat path: a Messages body is translated into the body of
 * an OpenAI chat request, which llm_api_parse then reads, so templates,
 * tools, constrained decoding and reasoning are the chat path's own; the
 * reply is built back in Anthropic's shape. No nginx types: unit-tested on
 * its own (t/unit/test_messages.c). The fields: docs/api.md.
 *
 * defines: llm_messages_to_chat, llm_messages_stop_reason,
 *          llm_messages_error_type, llm_messages_reply
 */
#ifndef NGX_LLM_API_MESSAGES_H
#define NGX_LLM_API_MESSAGES_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "api/request.h"
#include "api/reply.h"

/* what a Messages request asks beside the chat request */
typedef struct {
    int     thinking;       /* -1: not given, 0: disabled, 1: enabled (the
                               template's enable_thinking) */
} llm_messages_opts;

/*
 * body (len bytes) of a Messages request into the text of an OpenAI chat
 * request (malloc'd, NUL-terminated, *out_len bytes; free() it).
 * count_only: /count_tokens, where max_tokens is not required. Returns
 * NULL with err filled (status 400 or 413; code is Anthropic's error type)
 * when the body is not a Messages request we serve.
 */
char *llm_messages_to_chat(const char *body, size_t len, int count_only,
    const llm_api_limits *lim, llm_messages_opts *opts, size_t *out_len,
    llm_api_error *err);

/* enum llm_finish, the calls the reply made and whether a stop string
   ended it -> "end_turn", "max_tokens", "stop_sequence", "tool_use" */
const char *llm_messages_stop_reason(int finish, int n_calls, int stopped);

/* Anthropic's error "type" for an HTTP status */
const char *llm_messages_error_type(int status);

/* a reply that did not stream */
typedef struct {
    const char           *id;           /* msg_... */
    const char           *model;
    const char           *reasoning;    /* NULL: none */
    size_t                reasoning_len;
    const char           *text;
    size_t                text_len;
    const llm_tool_call  *calls;
    int                   n_calls;
    const char           *stop_reason;
    const char           *stop_sequence; /* NULL: null */
    unsigned              input_tokens;  /* not read from the cache */
    unsigned              cache_read_tokens;
    unsigned              output_tokens;
} llm_messages_out;

/* the message object; NULL when memory ran out */
cJSON *llm_messages_reply(const llm_messages_out *o);

#endif /* NGX_LLM_API_MESSAGES_H */
