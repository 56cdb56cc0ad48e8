/*
 * A model's reply as OpenAI's message: the thinking (reasoning_content),
 * the answer (content) and the tool calls (tool_calls), parsed from the
 * text the model wrote in its chat template's format.
 *
 * Formats, detected from the template's source (llm_tool_format_detect,
 * docs/api.md "Tool calling"):
 *
 *   HERMES   <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>,
 *            several in a row for parallel calls (Qwen2.5, Qwen3, QwQ,
 *            Hermes 2 Pro / 3): the template contains "<tool_call>"
 *   MISTRAL  [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...] (Nemo) or
 *            [TOOL_CALLS]f[ARGS]{...} (Small 3.2, Devstral): the template
 *            contains "[TOOL_CALLS]"; the detokenizer hides the control
 *            token, so a reply that starts with [{" is one too
 *   LLAMA3   {"name": "f", "parameters": {...}}, the whole reply, maybe
 *            after <|python_tag|> (Llama 3.1 / 3.2 / 3.3): the template
 *            contains "<|python_tag|>" or "\"parameters\""
 *   QWEN3_XML <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>
 *            \n</function>\n</tool_call> (Qwen3-Coder, Qwen3.5; api/tool_xml.h):
 *            the template contains "<tool_call>" and "<function="; a
 *            Hermes JSON body is read too (what the grammar of a
 *            required or named call makes)
 *   HARMONY  gpt-oss's channels (api/harmony.h): the template contains
 *            "<|channel|>". Its replies are always split, tools or not:
 *            analysis -> reasoning (dropped when reasoning is 0), final
 *            and commentary -> content, a message to=functions.NAME -> a
 *            call whose body is the arguments; the detokenizer must keep
 *            the special tokens (the markers are tokens)
 *   GENERIC  ours, for every other template: a system message describes
 *            the tools (llm_tools_system_prompt) and the model answers
 *            {"tool_calls": [{"name": "f", "arguments": {...}}]} or
 *            {"response": "..."} (llama-server's generic format, in spirit)
 *
 * The parser is incremental: text goes in as the detokenizer makes it, and
 * what may already go to the client comes out (content, reasoning). Text
 * that may be the start of a tool call is held back until the end, where
 * it is parsed: a valid call becomes tool_calls; anything else (truncated
 * JSON, an unknown function, arguments that are not an object) comes back
 * as content with failed set, never dropped. A reply constrained to calls
 * (llm_reply.constrained) that does not parse was cut by max_tokens: the
 * calls finished before the cut are kept, the unfinished one is dropped
 * (dropped set), and no text of the envelope becomes content. Pushing a text whole or split
 * at any byte gives the same result (t/unit/test_tool_call.c).
 *
 * defines: llm_tool_format_detect, llm_tool_format_name, llm_reply_init,
 *          llm_reply_push, llm_reply_finish, llm_reply_free, llm_tool_call_id,
 *          llm_tool_calls_json, llm_tool_call_delta, llm_tool_grammar
 */
#ifndef NGX_LLM_API_REPLY_H
#define NGX_LLM_API_REPLY_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "api/harmony.h"
#include "tokenizer/tokenizer.h"

#define LLM_TOOL_FMT_NONE       0   /* no parsing: tools absent or "none" */
#define LLM_TOOL_FMT_GENERIC    1
#define LLM_TOOL_FMT_HERMES     2
#define LLM_TOOL_FMT_LLAMA3     3
#define LLM_TOOL_FMT_MISTRAL    4
#define LLM_TOOL_FMT_QWEN3_XML  5
#define LLM_TOOL_FMT_HARMONY    6

/* the format of a template's tool calls; GENERIC when it has none we know */
int llm_tool_format_detect(const char *tmpl, size_t len);
const char *llm_tool_format_name(int format);

typedef struct {
    char    id[32];         /* "call_" + 24 alphanumerics (MISTRAL: 9) */
    char   *name;
    char   *arguments;      /* compact JSON text of an object */
} llm_tool_call;

typedef struct {
    char    *p;
    size_t   len;
    size_t   cap;
} llm_reply_buf;

/* what one push or the finish lets out; valid until the next call */
typedef struct {
    const char  *reasoning;
    size_t       reasoning_len;
    const char  *content;
    size_t       content_len;
} llm_reply_piece;

typedef struct {
    /* set by llm_reply_init */
    int             format;         /* LLM_TOOL_FMT_* */
    int             reasoning;      /* split <think>...</think> */
    int             parallel;       /* 0: the first call only */
    const cJSON    *tools;          /* the request's tools (names) */

    int             r_phase;        /* reasoning stage */
    int             t_phase;        /* tool stage */
    int             r_strip;        /* drop blanks at the thinking's start */
    llm_reply_buf   r_held;         /* text of the reasoning stage */
    llm_reply_buf   t_held;         /* content not yet let out */
    llm_reply_buf   o_reasoning;    /* this call's output */
    llm_reply_buf   o_content;
    llm_harmony     harmony;        /* HARMONY's scanner */
    int             oom;

    /* after llm_reply_finish */
    llm_tool_call  *calls;
    int             n_calls;
    int             failed;         /* looked like a call, did not parse */
    int             dropped;        /* constrained: an unfinished call cut
                                       off at the end, dropped */
    char            why[128];       /* why not, for the log */

    /* set by the caller after llm_reply_init: the reply is constrained to
       tool calls (tool_choice "required" or named), so a text that does
       not parse is one cut short: the calls finished before the cut are
       kept, the unfinished one dropped, and nothing becomes content */
    int             constrained;
} llm_reply;

/*
 * reasoning: 1 to split thinking from the answer; in_think: 1 when the
 * prompt already opened <think> (DeepSeek-R1's generation prompt ends in
 * it), so the reply starts inside the thinking. tools is borrowed.
 */
void llm_reply_init(llm_reply *o, int format, int reasoning, int in_think,
    int parallel, const cJSON *tools);

/* 0, or -1 when memory ran out */
int llm_reply_push(llm_reply *o, const char *text, size_t len,
    llm_reply_piece *piece);

/* the end of the reply: the held text, then calls / failed are set */
int llm_reply_finish(llm_reply *o, llm_reply_piece *piece);

void llm_reply_free(llm_reply *o);

/* 1 when the rendered prompt ends inside <think> (ignoring blanks) */
int llm_reply_prompt_in_think(const char *prompt, size_t len);

/* id: "call_" + 24 random alphanumerics, or 9 of them (Mistral's rule) */
void llm_tool_call_id(char *id, int format);

/* OpenAI's tool_calls array (with "index" for a stream when indexed) as
   compact JSON text, malloc'ed; NULL when memory ran out */
char *llm_tool_calls_json(const llm_tool_call *calls, int n, int indexed);

/*
 * One call as a stream's delta, OpenAI's shape that the SDKs' accumulators
 * rebuild: head 1: {"tool_calls":[{"index","id","type","function":{"name",
 * "arguments":""}}]}; head 0: {"tool_calls":[{"index","function":
 * {"arguments": the text}}]}. Malloc'ed JSON text, NULL on OOM.
 */
char *llm_tool_call_delta(const llm_tool_call *call, int index, int head);

/*
 * The grammar (LLM_CONSTRAINT_GRAMMAR, engine/grammar/grammar.h's dialect)
 * that makes a model write only tool calls in format: one of the tools
 * (name NULL) or the one named, 1..max_calls of them, then the end. A
 * parameter schema's objects that do not say additionalProperties get
 * false (docs/api.md, "Tool calling": a small model otherwise invents
 * keys until max_tokens). tok (may be NULL)
 * says whether "<tool_call>" / "[TOOL_CALLS]" are tokens of their own,
 * written then as the token. Malloc'ed text, *len bytes; NULL when memory
 * ran out.
 */
char *llm_tool_grammar(int format, const cJSON *tools, const char *name,
    int max_calls, const llm_tokenizer *tok, size_t *len);

#endif /* NGX_LLM_API_REPLY_H */
