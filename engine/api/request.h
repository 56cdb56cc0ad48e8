/*
 * OpenAI request bodies for POST /v1/chat/completions and /v1/completions:
 * parse, validate and normalise into one plain C struct the nginx worker
 * turns into a ring slot. No nginx types, so it is unit-tested and fuzzed
 * on its own.
 *
 * What is accepted, the defaults, the ranges and every error are listed in
 * docs/api.md; in short it follows OpenAI: unknown fields are ignored, a
 * JSON null is the same as an absent optional field, a wrong type or a value
 * out of range is a 400 naming the field in "param" (e.g. "temperature",
 * "messages[2].content"), and errors carry OpenAI's codes (invalid_type,
 * missing_required_parameter, decimal_above_max_value, ...).
 *
 * The body is checked before cJSON sees it: size (413 past max_body), then
 * RFC 8259 itself (api/json_strict.h: cJSON alone accepts NUL bytes as
 * whitespace, 02, "2." and bad \u escapes), UTF-8 validity, the nesting
 * depth (cJSON recurses once per level, so the worker's stack is bounded
 * by max_depth, not by the client) and the number of values. Everything
 * the result holds is a copy: the body can be freed right after the call.
 *
 * defines: llm_api_limits_default, llm_api_limits_model, llm_api_parse,
 *          llm_api_request_free, llm_api_stop_ids_to_ring
 */
#ifndef NGX_LLM_API_REQUEST_H
#define NGX_LLM_API_REQUEST_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "common/constraint.h"
#include "params/sampling.h"
#include "ring/ngx_llm_ring.h"
#include "api/stop.h"
#include "tokenizer/tokenizer.h"

#define LLM_API_CHAT        1   /* POST /v1/chat/completions */
#define LLM_API_COMPLETION  2   /* POST /v1/completions */

/* tool_choice: "none" (the default without tools), "auto" (with them),
   "required", or {"type": "function", "function": {"name": ...}} */
#define LLM_TOOL_CHOICE_NONE      0
#define LLM_TOOL_CHOICE_AUTO      1
#define LLM_TOOL_CHOICE_REQUIRED  2
#define LLM_TOOL_CHOICE_NAMED     3

/* bits of llm_api_request.given: which sampling fields the client set, so
   a location's default sampling values fill in only the others (the bits
   of the sampling fields are in params/sampling.h) */
#define LLM_API_GIVEN_SEED                0x0080u
#define LLM_API_GIVEN_MAX_TOKENS          0x0100u
#define LLM_API_GIVEN_PRIORITY            0x0200u

typedef struct {
    size_t  max_body;          /* bytes; a longer body is a 413 (0: none) */
    int     max_depth;         /* nesting of arrays and objects */
    size_t  max_values;        /* JSON values in the body: cJSON spends
                                  about 64 bytes on each, so this bounds a
                                  request's memory ([0,0,...] is 2 bytes
                                  of body per value) */
    int     max_messages;      /* chat: entries in messages */
    int     max_prompt_ids;    /* completions: token ids in prompt */
    int     vocab_size;        /* > 0: every token id must be below it */
    int     max_stop;          /* entries in stop (OpenAI: 4) */
    size_t  max_stop_len;      /* bytes of one stop string */
    int     max_stop_ids;      /* entries in stop_token_ids */
    int     max_logit_bias;    /* entries in logit_bias */
    int     max_top_logprobs;  /* chat top_logprobs (OpenAI: 20) */
    int     max_logprobs;      /* completions logprobs (OpenAI: 5) */
    int     max_n;             /* choices per request (llm_max_n) */
} llm_api_limits;

/* 4 MiB body (LLM_DEFAULT_MAX_BODY), depth 64, 100000 values, 4096
   messages, vocab unchecked, 4 stop strings of at most 1024 bytes,
   top_logprobs 20, completions logprobs 5, n 1; prompt ids, stop ids and
   biases: what one ring slot carries (32768, 16, 64) */
void llm_api_limits_default(llm_api_limits *lim);

/* the limits a model sets (t NULL: none): token ids below its vocabulary,
   and stop_token_ids only as many as a ring slot carries beside the
   model's own stop ids, which llm_api_stop_ids_to_ring writes first; more
   is a 400 naming stop_token_ids, never an id silently dropped */
void llm_api_limits_model(llm_api_limits *lim, const llm_tokenizer *t);

typedef struct {
    int     status;         /* 400, 413, or 500 when memory ran out */
    char    message[256];   /* OpenAI-style sentence */
    char    param[64];      /* offending field ("" means JSON null) */
    char    code[48];       /* OpenAI's code ("" means JSON null) */
} llm_api_error;

typedef struct {
    int                  endpoint;     /* LLM_API_CHAT | LLM_API_COMPLETION */
    char                *model;        /* required, non-empty */

    /* chat: [{"role": "system"|"user"|"assistant"|"tool", "content":
       string, "name"?: string, "tool_calls"?: [...], "tool_call_id"?:
       string}], ready for jinja_render's "messages" (developer is mapped
       to system, text parts joined with "\n", null content "" (Qwen3's
       template adds it to strings even in a turn of tool_calls);
       arguments of tool_calls parsed to objects, api/tools.h) */
    cJSON               *messages;

    /* completions: the prompt as text or as token ids, exactly one set */
    char                *prompt;       /* (prompt_len + 1) NUL-terminated */
    size_t               prompt_len;
    int32_t             *prompt_ids;   /* (n_prompt_ids) */
    int                  n_prompt_ids;
    char                *suffix;       /* fill in the middle: NULL, or
                                          (suffix_len + 1) bytes */
    size_t               suffix_len;

    int                  max_tokens;   /* >= 1; 0: not given */
    unsigned             given;        /* LLM_API_GIVEN_* */
    llm_sampling_params  sampling;     /* sampling.logit_bias -> below */
    llm_logit_bias      *logit_bias;   /* (n_logit_bias) in body order */
    int                  n_logit_bias;

    llm_stop_str        *stop;         /* (n_stop) copies, non-empty */
    int                  n_stop;
    int32_t             *stop_ids;     /* (n_stop_ids) stop_token_ids */
    int                  n_stop_ids;

    int                  n;            /* choices; 1 */
    int                  stream;
    int                  include_usage; /* stream_options.include_usage */
    int                  ignore_eos;   /* vLLM extension */
    int                  speculative;  /* -1: not given (the engine's
                                          setting), 0: off, 1: on */
    int                  priority;     /* vLLM extension: lower runs first */
    char                *user;         /* NULL when not given */

    /* the output constraint (response_format; tool_choice sets the same):
       LLM_CONSTRAINT_*, and its text (constraint_len + 1 bytes, NUL-
       terminated; NULL for none and json_object), at most
       LLM_CONSTRAINT_MAX_BYTES; a json_schema is compacted */
    int                  constraint_kind;
    char                *constraint;
    size_t               constraint_len;
    int                  constraint_strict;    /* json_schema.strict, or
                                                  a tool's function.strict:
                                                  what the grammar cannot
                                                  enforce is refused */

    /* tool calling (api/tools.h) */
    cJSON               *tools;        /* the tools array; NULL: none */
    int                  tool_choice;  /* LLM_TOOL_CHOICE_* */
    char                *tool_name;    /* the function tool_choice names */
    int                  parallel_tool_calls;  /* default 1 */

    /* chat: what the template is rendered with besides the messages */
    char                *reasoning_effort;  /* reasoning_effort, or NULL */
    cJSON               *template_kwargs;   /* chat_template_kwargs, or
                                               NULL */
} llm_api_request;

/*
 * Parses body (len bytes, no NUL needed) for endpoint. lim may be NULL for
 * the defaults. Returns 0 and fills req (free it with llm_api_request_free),
 * or -1 with err filled and req left empty (freeing it is still safe).
 */
int llm_api_parse(llm_api_request *req, const char *body, size_t len,
    int endpoint, const llm_api_limits *lim, llm_api_error *err);

void llm_api_request_free(llm_api_request *req);

/* the ids that end the sequence into a ring slot's sampling block: the
   model's stop ids (unless ignore_eos), then the request's; all of them
   when req was parsed under llm_api_limits_model's limits */
void llm_api_stop_ids_to_ring(const llm_api_request *req,
    const llm_tokenizer *t, llm_sampling *p);

#endif /* NGX_LLM_API_REQUEST_H */
