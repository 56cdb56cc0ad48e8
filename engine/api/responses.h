/*
 * OpenAI's Responses API (POST /v1/responses) on the chat path: a request
 * is translated into the body of a chat completion (messages, tools,
 * tool_choice, response_format, max_tokens...), which api/request.c then
 * parses as any other, so templates, tool formats, constrained decoding
 * and reasoning are the chat path's. The answer goes the other way: the
 * reply's text, thinking and tool calls become Responses output items.
 *
 * Input items: messages (string content or input_text / output_text
 * parts), function_call, function_call_output, custom_tool_call(_output),
 * reasoning (given back by agents: dropped, encrypted_content with it).
 * Tools: function (strict unless "strict": false, OpenAI's Responses
 * rule), namespace (Codex: each tool offered flat as <ns>__<name>, a call
 * goes back with "namespace" and the tool's own name), custom (freeform:
 * offered as a function of one string argument "input", a call goes back
 * as a custom_tool_call); hosted tools (web_search, file_search, ...) are
 * never offered to the model: dropped and listed in hosted, or a 400 with
 * strict_tools. What is supported, dropped or refused: docs/api.md.
 *
 * defines: llm_responses_parse, llm_responses_free, llm_responses_param,
 *          llm_responses_text, llm_responses_print, llm_responses_item_id,
 *          llm_responses_message_item,
 *          llm_responses_reasoning_item, llm_responses_call_item,
 *          llm_responses_usage, llm_responses_object,
 *          llm_responses_stored
 */
#ifndef NGX_LLM_API_RESPONSES_H
#define NGX_LLM_API_RESPONSES_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "api/request.h"
#include "api/reply.h"

#define LLM_RESPONSES_HOSTED_MAX  256   /* bytes of the dropped list */

/* a tool as offered to the model, and as the client named it */
typedef struct {
    char    *name;          /* flat, unique: what the model calls */
    char    *tool;          /* the client's name (in its namespace) */
    char    *ns;            /* namespace, NULL for a top-level tool */
    int      custom;        /* freeform: the call's "input" string */
} llm_responses_tool;

typedef struct {
    char                *chat;      /* the chat completion body, malloc'ed,
                                       NUL-terminated */
    size_t               chat_len;
    cJSON               *echo;      /* the response object's request
                                       fields (instructions, tools, ...) */
    llm_responses_tool  *tools;     /* (n_tools) */
    int                  n_tools;
    char                 hosted[LLM_RESPONSES_HOSTED_MAX];  /* dropped
                                       hosted tools' types, ", " between;
                                       "" when none */
    char                *previous_id;   /* previous_response_id or NULL */
    cJSON               *items;     /* the conversation as input items: a
                                       stored one's, then this input's */
    int                  stream;
    int                  store;     /* default 1 (OpenAI's) */
    int                  thinking;  /* reasoning.effort as the template's
                                       enable_thinking: -1 not given, 0
                                       "none"/"minimal", 1 otherwise */
} llm_responses_req;

/*
 * Translates body (len bytes) into rq->chat. strict_tools: hosted tools
 * are a 400 naming them instead of dropped. lim: the body's size, depth
 * and values. prev (prev_len bytes, NULL: none): a stored response
 * (llm_responses_stored), whose conversation comes before the input. 0,
 * or -1 with err (param in the Responses request's words); rq can be
 * freed either way.
 */
int llm_responses_parse(llm_responses_req *rq, const char *body, size_t len,
    const llm_api_limits *lim, int strict_tools, const char *prev,
    size_t prev_len, llm_api_error *err);

/* what a store keeps of a response: {"conversation": rq's items and the
   response's output, "response": response}, malloc'ed JSON text (free()) */
char *llm_responses_stored(const llm_responses_req *rq,
    const cJSON *response);

void llm_responses_free(llm_responses_req *rq);

/* an error's param from the chat parser (max_tokens, response_format,
   messages[3]...) in the Responses request's words, in place */
void llm_responses_param(char *param, size_t size);

/* len bytes of text as a malloc'ed C string of valid UTF-8 (invalid
   bytes U+FFFD, NUL dropped); NULL on OOM */
char *llm_responses_text(const char *s, size_t len);

/* o as compact JSON text of valid UTF-8, malloc'ed (free()); NULL on
   OOM. Every text of ours goes out through it */
char *llm_responses_print(const cJSON *o);

/* "<prefix>_<the response id's tail><n>": an output item's id */
void llm_responses_item_id(char *out, size_t size, const char *prefix,
    const char *resp_id, int n);

/* output items, new cJSON objects (NULL on OOM); status "completed" or
   "in_progress" / "incomplete" */
cJSON *llm_responses_message_item(const char *id, const char *text,
    size_t len, const char *status);
cJSON *llm_responses_reasoning_item(const char *id, const char *text,
    size_t len);
cJSON *llm_responses_call_item(const llm_responses_req *rq, const char *id,
    const llm_tool_call *call, const char *status);

typedef struct {
    const char          *id;            /* resp_... */
    int64_t              created_at;
    const char          *model;
    const char          *status;        /* completed, incomplete, failed,
                                           in_progress */
    const char          *incomplete;    /* reason, or NULL */
    const char          *text;          /* the answer */
    size_t               text_len;
    const char          *reasoning;     /* NULL: the model did not think */
    size_t               reasoning_len;
    const llm_tool_call *calls;
    int                  n_calls;
    uint32_t             input_tokens;
    uint32_t             cached_tokens;
    uint32_t             output_tokens;
    uint32_t             reasoning_tokens;
    int                  with_output;   /* 0: "output": [] (the stream's
                                           response.created) */
    int                  stored;        /* "store" says so */
} llm_responses_result;

/* "usage": input, cached, output, reasoning and total tokens */
cJSON *llm_responses_usage(const llm_responses_result *res);

/* the response object, a new cJSON object (NULL on OOM) */
cJSON *llm_responses_object(const llm_responses_req *rq,
    const llm_responses_result *res);

#endif /* NGX_LLM_API_RESPONSES_H */
