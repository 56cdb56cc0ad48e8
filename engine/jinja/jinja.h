/*
 * A Jinja2 subset for chat templates: renders a model's own chat template
 * byte-identical to transformers' apply_chat_template(), which runs jinja2's
 * ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
 * loopcontrols extension, and the globals raise_exception, strftime_now,
 * namespace and dict, and a tojson filter that does not escape HTML.
 *
 * Parse once (config time), render many (per request): a parsed template is
 * never written by jinja_render(), so any number of threads may render it at
 * once. Nothing here keeps global mutable state. Rendering never trusts its
 * input: recursion, loop iterations, memory and output size are bounded and
 * running past a bound is an error, not a crash. The supported language is
 * listed in docs/jinja.md.
 *
 * defines: jinja_parse, jinja_render, jinja_render_ex, jinja_render_spans,
 *          jinja_free, jinja_limits_default, jinja_chat_context
 */
#ifndef NGX_LLM_JINJA_H
#define NGX_LLM_JINJA_H

#include <stddef.h>
#include <cjson/cJSON.h>

typedef struct jinja_tmpl jinja_tmpl;

typedef struct {
    size_t  max_output;      /* bytes of rendered text */
    size_t  max_memory;      /* bytes of scratch memory for one render */
    long    max_steps;       /* loop iterations + calls, all together */
    int     max_depth;       /* nested macro calls and expression depth */
    long long now;           /* strftime_now's clock: seconds since the
                                epoch, read as UTC; 0: the current local
                                time, as transformers (tests pin it) */
} jinja_limits;

/* 4 MiB output, 64 MiB scratch, 1M steps, depth 64, the current time */
jinja_limits jinja_limits_default(void);

/*
 * Parses a template. NULL on error, with "line N: message" in err (a template
 * we cannot parse is a load-time error).
 */
jinja_tmpl *jinja_parse(const char *src, size_t len, char *err, size_t errlen);

/*
 * Renders with the variables of the JSON object ctx (JSON null is Python's
 * None; a missing key is jinja2's Undefined). On success returns 0 and a
 * malloc'ed NUL-terminated *out (free() it) of *out_len bytes. On failure
 * returns -1 and a message in err: the text given to raise_exception()
 * verbatim, or "line N: message" for any other fault.
 */
int jinja_render(const jinja_tmpl *t, const cJSON *ctx, char **out,
    size_t *out_len, char *err, size_t errlen);
int jinja_render_ex(const jinja_tmpl *t, const cJSON *ctx,
    const jinja_limits *limits, char **out, size_t *out_len, char *err,
    size_t errlen);

/* bytes [start, end) of a rendered text */
typedef struct {
    size_t  start;
    size_t  end;
} jinja_span;

/*
 * jinja_render_ex() that also says which bytes of *out came from the
 * request: every string of ctx (values and keys, at any depth) is request
 * data except those under the top-level keys listed in trusted (NULL-ended;
 * the special tokens, "bos_token", "eos_token"). The marks follow the text
 * through concatenation, slices, methods and filters; the template's own
 * text is never marked. *spans (malloc'ed, free() it; NULL when none) holds
 * *n_spans sorted, disjoint, non-adjacent runs of marked bytes. The text is
 * the same jinja_render_ex() writes, byte for byte. The tokenizer encodes
 * these runs as plain text (llm_tokenize_spans), so a message cannot write
 * a control token (docs/jinja.md, "Request text").
 */
int jinja_render_spans(const jinja_tmpl *t, const cJSON *ctx,
    const char *const *trusted, const jinja_limits *limits, char **out,
    size_t *out_len, jinja_span **spans, size_t *n_spans, char *err,
    size_t errlen);

void jinja_free(jinja_tmpl *t);

/*
 * The context apply_chat_template() would render with (jinja/chat.c): the
 * special tokens (object of name -> string, e.g. bos_token, eos_token), the
 * messages with null-valued keys dropped and reasoning fields aliased, tools
 * (NULL or JSON null: None), documents None, add_generation_prompt, then the
 * keys of extra (e.g. enable_thinking, date_string), which win. Inputs are
 * copied; the caller cJSON_Delete()s the result. NULL if messages is not an
 * array of objects or memory runs out.
 */
cJSON *jinja_chat_context(const cJSON *messages, const cJSON *tools,
    int add_generation_prompt, const cJSON *special_tokens,
    const cJSON *extra);

#endif
