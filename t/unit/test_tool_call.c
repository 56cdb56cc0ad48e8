/*
 * Tool calling and reasoning (api/reply.h, api/tools.h): every parser
 * on fixed replies, good and malformed, whole and split at every byte; the
 * request's checks; the published templates rendering tools, past calls
 * and tool results; the generic system message on SmolLM2's template; the
 * grammar that enforces tool_choice "required".
 */
#define _GNU_SOURCE     /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "format/gguf.h"
#include "api/request.h"
#include "jinja/jinja.h"
#include "api/json_strict.h"
#include "text/utf8.h"
#include "tokenizer/tokenizer.h"
#include "api/reply.h"
#include "api/tools.h"

#define TOOLS_JSON                                                            \
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","         \
    "\"description\":\"Weather of a city\",\"parameters\":{\"type\":"         \
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"             \
    "\"required\":[\"city\"]}}},"                                             \
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\","             \
    "\"description\":\"Current time\",\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]"

static cJSON  *tools;


/* $FIXTURES/llama.cpp/templates/name */
static char *
template_file(const char *name, size_t *len)
{
    char  rel[512], path[1024];

    snprintf(rel, sizeof(rel), "llama.cpp/templates/%s", name);
    return tap_slurp(tap_fixture(path, sizeof(path), rel), len);
}


/* ---------------------------------------------------------------------------
 * the parsers
 */

typedef struct {
    char  reasoning[512];
    char  content[512];
    char  calls[512];
    int   failed;
} summary;


static void
add(char *dst, size_t cap, const char *s, size_t n)
{
    size_t  l = strlen(dst);

    if (l + n + 1 <= cap) {
        memcpy(dst + l, s, n);
        dst[l + n] = '\0';
    }
}


static void
take(summary *sm, const llm_reply_piece *p)
{
    add(sm->reasoning, sizeof(sm->reasoning), p->reasoning ? p->reasoning
                                                           : "",
        p->reasoning_len);
    add(sm->content, sizeof(sm->content), p->content ? p->content : "",
        p->content_len);
}


/* the reply pushed in pieces cut at the given offsets (n_cuts of them) */
static void
run_cuts(summary *sm, int fmt, int reasoning, int in_think, int parallel,
    const char *text, const size_t *cuts, int n_cuts)
{
    llm_reply      o;
    llm_reply_piece  p;
    size_t         at = 0, len = strlen(text), to;
    int            i;

    memset(sm, 0, sizeof(*sm));
    llm_reply_init(&o, fmt, reasoning, in_think, parallel, tools);
    for (i = 0; i <= n_cuts; i++) {
        to = i < n_cuts ? cuts[i] : len;
        llm_reply_push(&o, text + at, to - at, &p);
        take(sm, &p);
        at = to;
    }
    llm_reply_finish(&o, &p);
    take(sm, &p);
    for (i = 0; i < o.n_calls; i++) {
        add(sm->calls, sizeof(sm->calls), o.calls[i].name,
            strlen(o.calls[i].name));
        add(sm->calls, sizeof(sm->calls), ":", 1);
        add(sm->calls, sizeof(sm->calls), o.calls[i].arguments,
            strlen(o.calls[i].arguments));
        add(sm->calls, sizeof(sm->calls), ";", 1);
    }
    sm->failed = o.failed;
    llm_reply_free(&o);
}


static int
same(const summary *a, const summary *b)
{
    return strcmp(a->reasoning, b->reasoning) == 0
           && strcmp(a->content, b->content) == 0
           && strcmp(a->calls, b->calls) == 0 && a->failed == b->failed;
}


typedef struct {
    int          fmt;
    int          reasoning;
    int          in_think;
    int          parallel;
    const char  *text;
    const char  *want_reasoning;
    const char  *want_content;
    const char  *want_calls;
    int          want_failed;
    const char  *what;
} parse_case;

#define H  LLM_TOOL_FMT_HERMES
#define L  LLM_TOOL_FMT_LLAMA3
#define M  LLM_TOOL_FMT_MISTRAL
#define G  LLM_TOOL_FMT_GENERIC
#define N  LLM_TOOL_FMT_NONE
#define W  "get_weather:{\"city\":\"Paris\"};"
#define WT "get_weather:{\"city\":\"Paris\"};get_time:{};"
#define HC(args) "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " \
                 args "}\n</tool_call>"

static const parse_case  cases[] = {
    /* Hermes / Qwen */
    { H, 0, 0, 1, HC("{\"city\": \"Paris\"}"), "", "", W, 0, "hermes: a call" },
    { H, 0, 0, 1, "Let me look.\n\n" HC("{\"city\": \"Paris\"}"), "",
      "Let me look.", W, 0, "hermes: text before the call" },
    { H, 0, 0, 1, HC("{\"city\": \"Paris\"}") "\n<tool_call>\n{\"name\": "
      "\"get_time\", \"arguments\": {}}\n</tool_call>", "", "", WT, 0,
      "hermes: two calls" },
    { H, 0, 0, 0, HC("{\"city\": \"Paris\"}") "\n<tool_call>\n{\"name\": "
      "\"get_time\", \"arguments\": {}}\n</tool_call>", "", "", W, 0,
      "hermes: parallel_tool_calls false keeps the first" },
    { H, 0, 0, 1, HC("{\"city\": \"Paris\"}") "\nDone.", "", "Done.", W, 0,
      "hermes: text after the call is content" },
    { H, 0, 0, 1, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}", "", "", W, 0,
      "hermes: no closing tag, complete JSON (cut at EOS)" },
    { H, 0, 0, 1, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Par", "",
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Par", "", 1, "hermes: truncated JSON is content, failed" },
    { H, 0, 0, 1, "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n"
      "</tool_call>", "", "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": "
      "{}}\n</tool_call>", "", 1, "hermes: unknown function" },
    { H, 0, 0, 1, HC("5"), "", HC("5"), "", 1,
      "hermes: arguments not an object" },
    { H, 0, 0, 1, HC("\"{\\\"city\\\": \\\"Paris\\\"}\""), "", "", W, 0,
      "hermes: arguments as a JSON string" },
    { H, 0, 0, 1, "<tool_call>\n[1,2]\n</tool_call>", "",
      "<tool_call>\n[1,2]\n</tool_call>", "", 1,
      "hermes: a call that is not an object" },
    { H, 0, 0, 1, "Use a <b>tag</b> or x <tool", "",
      "Use a <b>tag</b> or x <tool", "", 0,
      "hermes: plain text, a partial tag at the end" },
    { H, 0, 0, 1, "Hello\n\n", "", "Hello\n\n", "", 0,
      "hermes: trailing blanks of a plain answer kept" },
    { N, 0, 0, 1, HC("{\"city\": \"Paris\"}"), "", HC("{\"city\": \"Paris\"}"),
      "", 0, "none: never parsed" },

    /* Llama 3.x */
    { L, 0, 0, 1, "{\"name\": \"get_weather\", \"parameters\": {\"city\": "
      "\"Paris\"}}", "", "", W, 0, "llama3: a call" },
    { L, 0, 0, 1, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": "
      "{\"city\": \"Paris\"}}", "", "", W, 0, "llama3: after <|python_tag|>" },
    { L, 0, 0, 1, "{\"name\": \"get_weather\", \"parameters\": {\"city\": "
      "\"Paris\"}}; {\"name\": \"get_time\", \"parameters\": {}}", "", "", WT,
      0, "llama3: two calls" },
    { L, 0, 0, 1, "{\"answer\": 42}", "", "{\"answer\": 42}", "", 0,
      "llama3: a JSON answer without name is content" },
    { L, 0, 0, 1, "{\"name\": \"get_weather\", \"parameters\": {\"city\": ",
      "", "{\"name\": \"get_weather\", \"parameters\": {\"city\": ", "", 1,
      "llama3: truncated" },
    { L, 0, 0, 1, "The set {a, b}.", "", "The set {a, b}.", "", 0,
      "llama3: braces inside text" },
    { L, 0, 0, 1, "{\"name\": \"get_weather\", \"parameters\": [1]}", "",
      "{\"name\": \"get_weather\", \"parameters\": [1]}", "", 1,
      "llama3: parameters not an object" },

    /* Mistral */
    { M, 0, 0, 1, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}]", "", "", W, 0, "mistral: [TOOL_CALLS][...]" },
    { M, 0, 0, 1, "[{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}, {\"name\": \"get_time\", \"arguments\": {}}]", "", "", WT,
      0, "mistral: the control token hidden, two calls" },
    { M, 0, 0, 1, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}"
      "[TOOL_CALLS]get_time[ARGS]{}", "", "", WT, 0,
      "mistral: name[ARGS]{...} (v11)" },
    { M, 0, 0, 1, "Sure. [TOOL_CALLS][{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\"}}]", "", "Sure.", W, 0,
      "mistral: text before" },
    { M, 0, 0, 1, "[1, 2] are numbers", "", "[1, 2] are numbers", "", 0,
      "mistral: a bracket in text" },
    { M, 0, 0, 1, "[TOOL_CALLS][{\"name\": \"get_weather\"", "",
      "[TOOL_CALLS][{\"name\": \"get_weather\"", "", 1, "mistral: truncated" },

    /* generic */
    { G, 0, 0, 1, "{\"tool_calls\": [{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\"}}]}", "", "", W, 0,
      "generic: tool_calls" },
    { G, 0, 0, 1, "{\"tool_call\": {\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\"}}}", "", "", W, 0,
      "generic: tool_call" },
    { G, 0, 0, 1, "{\"response\": \"Hi there\"}", "", "Hi there", "", 0,
      "generic: response" },
    { G, 0, 0, 1, "{\"tool_calls\": [{\"name\": \"nope\", \"arguments\": "
      "{}}]}", "", "{\"tool_calls\": [{\"name\": \"nope\", \"arguments\": "
      "{}}]}", "", 1, "generic: unknown function" },
    { G, 0, 0, 1, "{\"tool_calls\": [", "", "{\"tool_calls\": [", "", 1,
      "generic: truncated" },
    { G, 0, 0, 1, "Hello!", "", "Hello!", "", 0, "generic: plain answer" },
    { G, 0, 0, 1, "  {\"a\": 1}", "", "  {\"a\": 1}", "", 0,
      "generic: other JSON is content" },

    /* reasoning */
    { N, 1, 0, 1, "<think>\nI should greet.\n</think>\n\nHello!",
      "I should greet.", "Hello!", "", 0, "reasoning: think, then answer" },
    { N, 1, 1, 1, "I should greet.\n</think>\n\nHello!", "I should greet.",
      "Hello!", "", 0, "reasoning: the prompt opened <think>" },
    { N, 1, 0, 1, "Hello!", "", "Hello!", "", 0,
      "reasoning: no thinking" },
    { N, 1, 0, 1, "<think>\nhmm, a < b and </thin", "hmm, a < b and </thin",
      "", "", 0, "reasoning: cut inside the thinking" },
    { N, 1, 0, 1, "<thinking>x</thinking>", "", "<thinking>x</thinking>", "",
      0, "reasoning: <thinking> is not <think>" },
    { N, 1, 0, 1, "<think>\n\n</think>\n\nHi", "", "Hi", "", 0,
      "reasoning: empty thinking" },
    { H, 1, 0, 1, "<think>\nWeather: call it.\n</think>\n\n"
      HC("{\"city\": \"Paris\"}"), "Weather: call it.", "", W, 0,
      "reasoning then a hermes call" },
    { N, 0, 0, 1, "<think>x</think>y", "", "<think>x</think>y", "", 0,
      "reasoning off: the tags are content" },
};


static void
test_parsers(void)
{
    summary   whole, cut, bytes;
    size_t    len, k, all[1024];
    unsigned  i;
    int       split_ok;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const parse_case  *c = &cases[i];

        run_cuts(&whole, c->fmt, c->reasoning, c->in_think, c->parallel,
                 c->text, NULL, 0);
        is_str(whole.reasoning, c->want_reasoning, "%s: reasoning", c->what);
        is_str(whole.content, c->want_content, "%s: content", c->what);
        is_str(whole.calls, c->want_calls, "%s: calls", c->what);
        is_int(whole.failed, c->want_failed, "%s: failed", c->what);

        /* split at every byte position, then one byte at a time */
        len = strlen(c->text);
        split_ok = 1;
        for (k = 1; k < len; k++) {
            run_cuts(&cut, c->fmt, c->reasoning, c->in_think, c->parallel,
                     c->text, &k, 1);
            if (!same(&whole, &cut)) {
                printf("# split at %zu: content \"%s\" reasoning \"%s\" "
                       "calls \"%s\"\n", k, cut.content, cut.reasoning,
                       cut.calls);
                split_ok = 0;
                break;
            }
        }
        for (k = 0; k + 1 < len && k < 1024; k++) {
            all[k] = k + 1;
        }
        run_cuts(&bytes, c->fmt, c->reasoning, c->in_think, c->parallel,
                 c->text, all, (int) k);
        ok(split_ok && same(&whole, &bytes),
           "%s: split at every byte = whole", c->what);
    }
}


/* what a stream lets out before the end: text before a call, never the
   call's own text */
static void
test_held_back(void)
{
    llm_reply      o;
    llm_reply_piece  p;
    const char    *t = "Checking.\n<tool_call>\n{\"name\": \"get_weather\", "
                       "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    char           out[256] = "";
    size_t         i;

    llm_reply_init(&o, H, 0, 0, 1, tools);
    for (i = 0; t[i]; i++) {
        llm_reply_push(&o, t + i, 1, &p);
        add(out, sizeof(out), p.content ? p.content : "", p.content_len);
    }
    is_str(out, "Checking.", "stream: only the text before the call went out");
    llm_reply_finish(&o, &p);
    is_int(p.content_len, 0, "stream: nothing more at the end");
    is_int(o.n_calls, 1, "stream: the call at the end");
    llm_reply_free(&o);

    llm_reply_init(&o, G, 0, 0, 1, tools);
    llm_reply_push(&o, "Hel", 3, &p);
    is_int(p.content_len, 3, "generic: plain text goes out at once");
    llm_reply_free(&o);

    llm_reply_init(&o, N, 1, 0, 1, NULL);
    llm_reply_push(&o, "<think>\nab", 10, &p);
    is_int(p.reasoning_len, 2, "reasoning streams as it comes");
    llm_reply_push(&o, "c</th", 5, &p);
    ok(p.reasoning_len == 1 && p.reasoning[0] == 'c',
       "a partial </think> is held back");
    llm_reply_free(&o);
}


static void
test_ids_and_json(void)
{
    llm_tool_call  c[2];
    char          *j;
    int            k, okc = 1;

    llm_tool_call_id(c[0].id, H);
    llm_tool_call_id(c[1].id, M);
    ok(strlen(c[0].id) == 29 && strncmp(c[0].id, "call_", 5) == 0,
       "id: call_ + 24 (%s)", c[0].id);
    for (k = 5; k < 29; k++) {
        okc &= (c[0].id[k] >= 'a' && c[0].id[k] <= 'z')
               || (c[0].id[k] >= 'A' && c[0].id[k] <= 'Z')
               || (c[0].id[k] >= '0' && c[0].id[k] <= '9');
    }
    ok(okc, "id: alphanumerics");
    is_int(strlen(c[1].id), 9, "id: 9 for Mistral's templates");
    strcpy(c[0].id, "call_x");
    c[0].name = "get_weather";
    c[0].arguments = "{\"city\":\"Paris\"}";
    j = llm_tool_calls_json(c, 1, 0);
    is_str(j, "[{\"id\":\"call_x\",\"type\":\"function\",\"function\":{\"name\":"
           "\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]",
           "tool_calls JSON: arguments as a string");
    free(j);
    j = llm_tool_call_delta(&c[0], 2, 1);
    is_str(j, "{\"tool_calls\":[{\"index\":2,\"id\":\"call_x\",\"type\":"
           "\"function\",\"function\":{\"name\":\"get_weather\","
           "\"arguments\":\"\"}}]}", "stream delta: the head of a call");
    free(j);
    j = llm_tool_call_delta(&c[0], 2, 0);
    is_str(j, "{\"tool_calls\":[{\"index\":2,\"function\":{\"arguments\":"
           "\"{\\\"city\\\":\\\"Paris\\\"}\"}}]}",
           "stream delta: then its arguments");
    free(j);
    j = llm_tool_calls_json(c, 1, 1);
    ok(j && strncmp(j, "[{\"index\":0,\"id\"", 16) == 0,
       "stream deltas carry index");
    free(j);
}


/* ---------------------------------------------------------------------------
 * the request
 */

typedef struct {
    const char  *extra;     /* fields after messages */
    int          status;
    const char  *param;
    const char  *code;
} req_case;

static const req_case  req_cases[] = {
    { ",\"tools\":" TOOLS_JSON, 0, "", "" },
    { ",\"tools\":{}", 400, "tools", "invalid_type" },
    { ",\"tools\":[]", 400, "tools", "empty_array" },
    { ",\"tools\":[{\"type\":\"code_interpreter\"}]", 400, "tools[0].type",
      "unsupported_value" },
    { ",\"tools\":[{\"type\":\"function\"}]", 400, "tools[0].function",
      "missing_required_parameter" },
    { ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]",
      400, "tools[0].function.name", "invalid_value" },
    { ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\"}},"
      "{\"type\":\"function\",\"function\":{\"name\":\"a\"}}]", 400,
      "tools[1].function.name", "invalid_value" },
    { ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\","
      "\"parameters\":[]}}]", 400, "tools[0].function.parameters",
      "invalid_type" },
    { ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\","
      "\"parameters\":{\"type\":\"string\"}}}]", 400,
      "tools[0].function.parameters", "invalid_value" },
    { ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\","
      "\"strict\":1}}]", 400, "tools[0].function.strict", "invalid_type" },
    { ",\"tools\":" TOOLS_JSON ",\"tool_choice\":\"sometimes\"", 400,
      "tool_choice", "invalid_value" },
    { ",\"tools\":" TOOLS_JSON ",\"tool_choice\":{\"type\":\"function\","
      "\"function\":{\"name\":\"nope\"}}", 400, "tool_choice.function.name",
      "invalid_value" },
    { ",\"tools\":" TOOLS_JSON ",\"tool_choice\":{\"type\":\"function\"}",
      400, "tool_choice.function.name", "missing_required_parameter" },
    { ",\"tools\":" TOOLS_JSON ",\"tool_choice\":3", 400, "tool_choice",
      "invalid_type" },
    { ",\"tool_choice\":\"required\"", 400, "tool_choice", "invalid_value" },
    { ",\"tool_choice\":\"none\"", 0, "", "" },
    { ",\"tools\":" TOOLS_JSON ",\"parallel_tool_calls\":1", 400,
      "parallel_tool_calls", "invalid_type" },
    { ",\"functions\":[{\"name\":\"a\"}]", 400, "functions",
      "unsupported_parameter" },
    { ",\"function_call\":\"auto\"", 400, "function_call",
      "unsupported_parameter" },
};


static int
parse_req(llm_api_request *r, const char *messages, const char *extra,
    llm_api_error *e)
{
    char  body[8192];

    snprintf(body, sizeof(body), "{\"model\":\"m\",\"messages\":%s%s}",
             messages, extra);
    return llm_api_parse(r, body, strlen(body), LLM_API_CHAT, NULL, e);
}


static void
test_request(void)
{
    llm_api_request  r;
    llm_api_error    e;
    unsigned         i;
    int              rc;
    char            *m;

    for (i = 0; i < sizeof(req_cases) / sizeof(req_cases[0]); i++) {
        const req_case  *c = &req_cases[i];

        rc = parse_req(&r, "[{\"role\":\"user\",\"content\":\"hi\"}]",
                       c->extra, &e);
        if (c->status == 0) {
            ok(rc == 0, "accepted: %s (%s)", c->extra, e.message);
        } else {
            ok(rc == -1 && e.status == c->status
               && strcmp(e.param, c->param) == 0
               && strcmp(e.code, c->code) == 0,
               "refused: %s -> %d %s %s (%s)", c->extra, e.status, e.param,
               e.code, e.message);
        }
        llm_api_request_free(&r);
    }

    /* a quoted value cut inside a character: the message stays UTF-8 */
    rc = parse_req(&r, "[{\"role\":\"user\",\"content\":\"hi\"}]",
                   ",\"tools\":[{\"type\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                   "\\u00e9\"}]", &e);
    {
        size_t  k, n = strlen(e.message), step;
        int     utf8 = 1;

        for (k = 0; k < n; k += step) {
            step = llm_utf8_len((const unsigned char *) e.message + k, n - k);
            if (step == 0) {
                utf8 = 0;
                break;
            }
        }
        ok(rc == -1 && utf8, "an error quoting a cut character is UTF-8: %s",
           e.message);
    }
    llm_api_request_free(&r);

    rc = parse_req(&r, "[{\"role\":\"user\",\"content\":\"hi\"}]",
                   ",\"tools\":" TOOLS_JSON, &e);
    ok(rc == 0 && r.tool_choice == LLM_TOOL_CHOICE_AUTO
       && r.parallel_tool_calls == 1 && cJSON_GetArraySize(r.tools) == 2,
       "tools given: auto, parallel by default");
    llm_api_request_free(&r);
    rc = parse_req(&r, "[{\"role\":\"user\",\"content\":\"hi\"}]",
                   ",\"tools\":" TOOLS_JSON ",\"tool_choice\":{\"type\":"
                   "\"function\",\"function\":{\"name\":\"get_time\"}},"
                   "\"parallel_tool_calls\":false", &e);
    ok(rc == 0 && r.tool_choice == LLM_TOOL_CHOICE_NAMED
       && strcmp(r.tool_name, "get_time") == 0 && r.parallel_tool_calls == 0,
       "a named function, parallel off");
    llm_api_request_free(&r);

    /* the tool turns */
    rc = parse_req(&r, "[{\"role\":\"user\",\"content\":\"hi\"},"
                   "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"
                   "[{\"id\":\"call_1\",\"type\":\"function\",\"function\":"
                   "{\"name\":\"get_weather\",\"arguments\":"
                   "\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"
                   "{\"role\":\"tool\",\"tool_call_id\":\"call_1\","
                   "\"content\":\"18C\"}]", "", &e);
    m = rc == 0 ? cJSON_PrintUnformatted(r.messages) : NULL;
    is_str(m, "[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\","
           "\"content\":\"\",\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
           "\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":"
           "\"Paris\"}}}]},{\"role\":\"tool\",\"content\":\"18C\","
           "\"tool_call_id\":\"call_1\"}]",
           "tool turns kept, arguments as an object, content \"\"");
    free(m);
    llm_api_request_free(&r);

    rc = parse_req(&r, "[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":"
                   "\"c\",\"function\":{\"name\":\"f\"}}]}]", "", &e);
    ok(rc == -1 && strcmp(e.param, "messages[0].tool_calls[0].function."
                          "arguments") == 0, "a past call without arguments");
    llm_api_request_free(&r);
    rc = parse_req(&r, "[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":"
                   "[{}]}]", "", &e);
    ok(rc == -1 && strcmp(e.param, "messages[0].tool_calls") == 0,
       "tool_calls only in assistant turns");
    llm_api_request_free(&r);
    rc = parse_req(&r, "[{\"role\":\"tool\",\"tool_call_id\":7,\"content\":"
                   "\"x\"}]", "", &e);
    ok(rc == -1 && strcmp(e.param, "messages[0].tool_call_id") == 0,
       "tool_call_id must be a string");
    llm_api_request_free(&r);
}


/* ---------------------------------------------------------------------------
 * the templates
 */

#define CONVERSATION                                                          \
    "[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"                \
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"                \
    "[{\"id\":\"abc123xyz\",\"type\":\"function\",\"function\":"              \
    "{\"name\":\"get_weather\",\"arguments\":"                               \
    "\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},"                                  \
    "{\"role\":\"tool\",\"tool_call_id\":\"abc123xyz\","                      \
    "\"content\":\"18C and sunny\"}]"


/* the conversation rendered with a template's source src */
static char *
render(const char *src, size_t len, const char *extra, int *format)
{
    llm_api_request   r;
    llm_api_error     e;
    jinja_tmpl       *t;
    cJSON            *msgs, *vars, *special;
    const cJSON      *tl;
    char              err[256], *out = NULL;
    size_t            olen;

    *format = llm_tool_format_detect(src, len);
    if (parse_req(&r, CONVERSATION, extra, &e) != 0) {
        printf("# parse: %s\n", e.message);
        return NULL;
    }
    t = jinja_parse(src, len, err, sizeof(err));
    if (t == NULL || llm_tools_template_input(&r, *format, &msgs, &tl) != 0)
    {
        printf("# template: %s\n", err);
        llm_api_request_free(&r);
        jinja_free(t);
        return NULL;
    }
    special = cJSON_Parse("{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\"}");
    vars = jinja_chat_context(msgs, tl, 1, special, NULL);
    if (jinja_render(t, vars, &out, &olen, err, sizeof(err)) != 0) {
        printf("# render: %s\n", err);
        out = NULL;
    }
    if (getenv("TOOL_RENDER")) {
        printf("# ---\n%s\n# ---\n", out ? out : "(none)");
    }
    cJSON_Delete(special);
    cJSON_Delete(vars);
    cJSON_Delete(msgs);
    jinja_free(t);
    llm_api_request_free(&r);
    return out;
}


static char *
render_fixture(const char *name, const char *extra, int *format)
{
    char   *src, *out;
    size_t  len;

    src = template_file(name, &len);
    if (src == NULL) {
        return NULL;
    }
    out = render(src, len, extra, format);
    free(src);
    return out;
}


typedef struct {
    const char  *file;
    int          format;
    const char  *has[4];
} tmpl_case;

static const tmpl_case  tmpl_cases[] = {
    { "Qwen-Qwen2.5-7B-Instruct.jinja", H, {
      "<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
      "\"get_weather\"",
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>",
      "<tool_response>\n18C and sunny\n</tool_response>", NULL } },
    { "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", H, {
      "<tools>",
      "\"name\": \"get_weather\"",
      "\"arguments\": {\"city\": \"Paris\"}",
      "18C and sunny" } },
    { "Qwen-Qwen3-0.6B.jinja", H, {
      "\"name\": \"get_weather\"",
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>",
      "<tool_response>\n18C and sunny\n</tool_response>", NULL } },
    { "meta-llama-Llama-3.1-8B-Instruct.jinja", L, {
      "\"name\": \"get_weather\"",
      "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
      "<|start_header_id|>ipython<|end_header_id|>\n\n\"18C and sunny\"",
      NULL } },
    { "mistralai-Mistral-Nemo-Instruct-2407.jinja", M, {
      "[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": "
      "\"get_weather\"",
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}, \"id\": \"abc123xyz\"}]</s>",
      "[TOOL_RESULTS]{\"content\": 18C and sunny, \"call_id\": "
      "\"abc123xyz\"}[/TOOL_RESULTS]", NULL } },
};


static void
test_templates(void)
{
    unsigned  i, k;
    char     *out;
    int       fmt;

    for (i = 0; i < sizeof(tmpl_cases) / sizeof(tmpl_cases[0]); i++) {
        const tmpl_case  *c = &tmpl_cases[i];

        out = render_fixture(c->file, ",\"tools\":" TOOLS_JSON, &fmt);
        ok(out != NULL, "%s renders tools and tool turns", c->file);
        is_str(llm_tool_format_name(fmt), llm_tool_format_name(c->format),
               "%s: format detected", c->file);
        for (k = 0; k < 4 && c->has[k]; k++) {
            char  what[160], *q;

            /* a TAP description is one line */
            snprintf(what, sizeof(what), "%s", c->has[k]);
            for (q = what; *q; q++) {
                *q = (*q == '\n') ? '|' : *q;
            }
            ok(out && strstr(out, c->has[k]), "%s has %s", c->file, what);
        }
        ok(out && strstr(out, "You can call these tools") == NULL,
           "%s: no generic system message", c->file);
        free(out);
    }

    /* other published templates: the format each gets */
    {
        static const struct { const char *file; int format; } det[] = {
            { "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", H },
            { "Qwen-QwQ-32B.jinja", H },
            { "meta-llama-Llama-3.2-3B-Instruct.jinja", L },
            { "meta-llama-Llama-3.3-70B-Instruct.jinja", L },
            { "Mistral-Small-3.2-24B-Instruct-2506.jinja", M },
            { "unsloth-mistral-Devstral-Small-2507.jinja", M },
            { "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", G },
            { "google-gemma-2-2b-it.jinja", G },
            { "microsoft-Phi-3.5-mini-instruct.jinja", G },
        };
        char   *src;
        size_t  len;

        for (i = 0; i < sizeof(det) / sizeof(det[0]); i++) {
            src = template_file(det[i].file, &len);
            is_str(llm_tool_format_name(src ? llm_tool_format_detect(src, len)
                                            : -1),
                   llm_tool_format_name(det[i].format), "%s: %s",
                   det[i].file, llm_tool_format_name(det[i].format));
            free(src);
        }
    }
}


/* DeepSeek-R1's generation prompt opens <think>; Qwen3's does not */
static void
test_prompt_in_think(void)
{
    char   *out;
    int     fmt;

    out = render_fixture("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "",
                         &fmt);
    /* its template cannot take tool turns (it concatenates arguments as a
       string); a plain conversation shows the generation prompt */
    free(out);
    {
        char   *src, *r, err[256];
        size_t  len, rlen;
        jinja_tmpl  *t;
        cJSON  *msgs, *vars;

        src = template_file("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
                            &len);
        t = src ? jinja_parse(src, len, err, sizeof(err)) : NULL;
        msgs = cJSON_Parse("[{\"role\":\"user\",\"content\":\"hi\"}]");
        vars = jinja_chat_context(msgs, NULL, 1, NULL, NULL);
        r = NULL;
        if (t && jinja_render(t, vars, &r, &rlen, err, sizeof(err)) == 0) {
            ok(llm_reply_prompt_in_think(r, rlen),
               "DeepSeek-R1: the generation prompt opens <think>");
        } else {
            ok(0, "DeepSeek-R1 renders: %s", err);
        }
        free(r);
        free(src);
        jinja_free(t);
        cJSON_Delete(vars);

        src = template_file("Qwen-Qwen3-0.6B.jinja", &len);
        t = src ? jinja_parse(src, len, err, sizeof(err)) : NULL;
        vars = jinja_chat_context(msgs, NULL, 1, NULL, NULL);
        r = NULL;
        ok(t && jinja_render(t, vars, &r, &rlen, err, sizeof(err)) == 0
           && !llm_reply_prompt_in_think(r, rlen),
           "Qwen3: the model opens <think> itself");
        free(r);
        cJSON_Delete(vars);
        {
            cJSON  *extra = cJSON_Parse("{\"enable_thinking\":false}");

            vars = jinja_chat_context(msgs, NULL, 1, NULL, extra);
            cJSON_Delete(extra);
        }
        r = NULL;
        ok(t && jinja_render(t, vars, &r, &rlen, err, sizeof(err)) == 0
           && !llm_reply_prompt_in_think(r, rlen)
           && strstr(r, "<think>\n\n</think>"),
           "Qwen3 enable_thinking false: an empty thinking, closed");
        free(r);
        free(src);
        jinja_free(t);
        cJSON_Delete(vars);
        cJSON_Delete(msgs);
    }
}


/* SmolLM2's template knows no tools: the generic system message */
static void
test_generic_smollm2(void)
{
    gguf_file    g;
    const char  *src;
    uint64_t     len;
    char        *out;
    int          fmt;

    if (gguf_open(&g, tap_model()) != 0
        || gguf_get_str(&g, "tokenizer.chat_template", &src, &len) != 0)
    {
        ok(0, "SmolLM2's chat template");
        return;
    }
    ok(memmem(src, len, "tool", 4) == NULL, "SmolLM2's template has no "
       "tool support");
    out = render(src, len, ",\"tools\":" TOOLS_JSON, &fmt);
    is_int(fmt, G, "SmolLM2: generic format");
    ok(out && strstr(out, "<|im_start|>system\nYou can call these tools "
                          "(their parameters are JSON Schemas):\n"
                          "{\"name\":\"get_weather\",\"description\":"
                          "\"Weather of a city\",\"parameters\":"),
       "SmolLM2: the tools in a system message");
    ok(out && strstr(out, "{\"tool_calls\": [{\"name\": \"<tool name>\", "
                          "\"arguments\": {<the arguments>}}]}\n"
                          "Otherwise, answer the user normally."),
       "SmolLM2: the JSON to answer in");
    ok(out && strstr(out, "<|im_start|>assistant\n{\"tool_calls\":[{\"name\":"
                          "\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}"
                          "]}<|im_end|>"),
       "SmolLM2: a past call as that JSON");
    ok(out && strstr(out, "<|im_start|>user\n{\"tool_response\":{"
                          "\"tool_call_id\":\"abc123xyz\",\"content\":"
                          "\"18C and sunny\"}}<|im_end|>"),
       "SmolLM2: a tool result as a user turn");
    free(out);

    out = render(src, len, ",\"tools\":" TOOLS_JSON ",\"tool_choice\":"
                 "\"required\",\"parallel_tool_calls\":false", &fmt);
    ok(out && strstr(out, "You must call at least one tool. Call one tool at "
                          "a time."), "SmolLM2: required, one at a time");
    free(out);
    out = render(src, len, ",\"tools\":" TOOLS_JSON ",\"tool_choice\":"
                 "\"none\"", &fmt);
    ok(out && strstr(out, "You can call") == NULL
       && strstr(out, "{\"tool_calls\":[{\"name\":\"get_weather\""),
       "SmolLM2: none: no tools, the past call still rendered");
    free(out);
    gguf_close(&g);
}


/* ---------------------------------------------------------------------------
 * the grammar
 */

#define ALT_W "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":"    \
    "\"get_weather\"},\"%s\":{\"type\":\"object\",\"properties\":{\"city\":"  \
    "{\"type\":\"string\"}},\"required\":[\"city\"],"                         \
    "\"additionalProperties\":false}},\"required\":"                           \
    "[\"name\",\"%s\"],\"additionalProperties\":false}"
#define ALT_T "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":"    \
    "\"get_time\"},\"%s\":{\"type\":\"object\",\"properties\":{},"             \
    "\"additionalProperties\":false}},"                                        \
    "\"required\":[\"name\",\"%s\"],\"additionalProperties\":false}"


static llm_tokenizer *
tokenizer_with_tool_tokens(void)
{
    char            path[1024], dir[] = "/tmp/test_tool_call.XXXXXX", err[256];
    char           *src, *j;
    size_t          len;
    cJSON          *tj, *added, *vocab;
    llm_tokenizer  *t = NULL;
    FILE           *f;
    int             id;
    const char     *tags[] = { "<tool_call>", "</tool_call>", "[TOOL_CALLS]" };

    src = tap_slurp(tap_fixture(path, sizeof(path),
                                "tokenizers/qwen2-bpe/tokenizer.json"), &len);
    tj = src ? cJSON_Parse(src) : NULL;
    free(src);
    if (tj == NULL || mkdtemp(dir) == NULL) {
        cJSON_Delete(tj);
        return NULL;
    }
    added = cJSON_GetObjectItem(tj, "added_tokens");
    vocab = cJSON_GetObjectItem(cJSON_GetObjectItem(tj, "model"), "vocab");
    id = cJSON_GetArraySize(vocab) + cJSON_GetArraySize(added);
    for (int i = 0; i < 3; i++, id++) {
        cJSON  *a = cJSON_CreateObject();

        cJSON_AddNumberToObject(a, "id", id);
        cJSON_AddStringToObject(a, "content", tags[i]);
        cJSON_AddBoolToObject(a, "single_word", 0);
        cJSON_AddBoolToObject(a, "lstrip", 0);
        cJSON_AddBoolToObject(a, "rstrip", 0);
        cJSON_AddBoolToObject(a, "normalized", 0);
        cJSON_AddBoolToObject(a, "special", i == 2);
        cJSON_AddItemToArray(added, a);
    }
    j = cJSON_PrintUnformatted(tj);
    cJSON_Delete(tj);
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    f = fopen(path, "w");
    if (f && j) {
        fputs(j, f);
        fclose(f);
        t = llm_tokenizer_load_hf(dir, err, sizeof(err));
        if (t == NULL) {
            printf("# %s\n", err);
        }
    }
    free(j);
    unlink(path);
    rmdir(dir);
    return t;
}


static void
test_grammar(void)
{
    char            want[4096], *g;
    size_t          len;
    llm_tokenizer  *tok;
    int32_t         tc;

    g = llm_tool_grammar(H, tools, NULL, 8, NULL, &len);
    snprintf(want, sizeof(want),
             "root ::= call-block (\"\\n\" call-block){0,7}\n"
             "call-block ::= \"<tool_call>\" \"\\n\" call \"\\n\" "
             "\"</tool_call>\"\n"
             "call ::= %%json {\"anyOf\":[" ALT_W "," ALT_T "]}\n",
             "arguments", "arguments", "arguments", "arguments");
    is_str(g, want, "hermes required, up to 8 calls: tags as text");
    ok(g && len == strlen(g), "grammar length");
    free(g);

    g = llm_tool_grammar(H, tools, "get_time", 1, NULL, &len);
    snprintf(want, sizeof(want),
             "root ::= call-block\n"
             "call-block ::= \"<tool_call>\" \"\\n\" call \"\\n\" "
             "\"</tool_call>\"\n"
             "call ::= %%json {\"anyOf\":[" ALT_T "]}\n",
             "arguments", "arguments");
    is_str(g, want, "hermes named function, one call");
    free(g);

    g = llm_tool_grammar(L, tools, "get_weather", 1, NULL, &len);
    snprintf(want, sizeof(want),
             "root ::= call\ncall ::= %%json {\"anyOf\":[" ALT_W "]}\n",
             "parameters", "parameters");
    is_str(g, want, "llama3: parameters");
    free(g);

    g = llm_tool_grammar(M, tools, NULL, 3, NULL, &len);
    snprintf(want, sizeof(want),
             "root ::= \"[TOOL_CALLS]\" \"[\" call (\", \" call){0,2} \"]\"\n"
             "call ::= %%json {\"anyOf\":[" ALT_W "," ALT_T "]}\n",
             "arguments", "arguments", "arguments", "arguments");
    is_str(g, want, "mistral: up to 3 calls");
    free(g);

    g = llm_tool_grammar(G, tools, "get_weather", 1, NULL, &len);
    snprintf(want, sizeof(want),
             "root ::= %%json {\"type\":\"object\",\"properties\":"
             "{\"tool_calls\":{\"type\":\"array\",\"items\":{\"anyOf\":["
             ALT_W "]},\"minItems\":1,\"maxItems\":1}},\"required\":"
             "[\"tool_calls\"],\"additionalProperties\":false}\n",
             "arguments", "arguments");
    is_str(g, want, "generic: one call, maxItems 1");
    free(g);

    /* a vocabulary where the tags are tokens of their own (Qwen2.5's) */
    tok = tokenizer_with_tool_tokens();
    ok(tok != NULL, "a qwen2 vocabulary with <tool_call> tokens");
    if (tok) {
        g = llm_tool_grammar(H, tools, "get_time", 1, tok, &len);
        ok(g && strstr(g, "call-block ::= <tool_call> \"\\n\" call \"\\n\" "
                          "</tool_call>\n"),
           "hermes: <tool_call> as the token");
        free(g);
        tc = llm_token_lookup(tok, "[TOOL_CALLS]", 12);
        g = llm_tool_grammar(M, tools, "get_time", 1, tok, &len);
        snprintf(want, sizeof(want), "root ::= <[%d]> \"[\" call \"]\"\n",
                 (int) tc);
        ok(tc >= 0 && g && strncmp(g, want, strlen(want)) == 0,
           "mistral: [TOOL_CALLS] as token id %d", (int) tc);
        free(g);
        llm_tokenizer_free(tok);
    }
}


/* a reply constrained to calls (tool_choice required / named), cut by
   max_tokens: the finished calls stay, the cut one goes, no content */
static void
test_cut(void)
{
    static const struct {
        int          fmt;
        int          parallel;
        const char  *text;
        const char  *calls;
        const char  *name;
    } cases[] = {
        { G, 1, "{\"tool_calls\":[{\"name\":\"get_time\",\"arguments\":{}},"
                "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Par",
          "get_time:{};", "generic: the first call kept, the cut one dropped" },
        { G, 1, "{\"tool_calls\": [ {\"name\": \"get_time\", \"arguments\": "
                "{}} , {\"name\": \"get_weather\", \"arguments\": "
                "{\"city\": \"Paris\"}}, {\"na",
          "get_time:{};get_weather:{\"city\":\"Paris\"};",
          "generic, flexible blanks: two kept" },
        { G, 1, "{\"tool_calls\":[{\"name\":\"get_wea", "",
          "generic: cut in the first call, no call" },
        { G, 1, "{\"tool_", "", "generic: cut in the envelope" },
        { G, 0, "{\"tool_calls\":[{\"name\":\"get_time\",\"arguments\":{}},"
                "{\"name\":\"get_time\",\"arguments\":{}},{",
          "get_time:{};", "generic, parallel false: the first only" },
        { H, 1, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"
                "</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"ar",
          "get_time:{};", "hermes: the closed call kept" },
        { H, 1, "<tool_ca", "", "hermes: cut in the tag" },
        { M, 1, "[TOOL_CALLS][{\"name\": \"get_time\", \"arguments\": {}}, "
                "{\"name\": \"get_weather\", \"arguments\": {\"ci",
          "get_time:{};", "mistral: the first call kept" },
        { L, 1, "{\"name\": \"get_time\", \"parameters\": {}}; {\"name\": \"g",
          "get_time:{};", "llama3: the first call kept" },
    };
    llm_reply        o;
    llm_reply_piece  p;
    char             calls[512], content[512];
    size_t           i, k;
    int              c;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        calls[0] = content[0] = '\0';
        llm_reply_init(&o, cases[i].fmt, 0, 0, cases[i].parallel, tools);
        o.constrained = 1;
        /* token by token, as a stream */
        for (k = 0; cases[i].text[k]; k++) {
            llm_reply_push(&o, cases[i].text + k, 1, &p);
            add(content, sizeof(content), p.content ? p.content : "",
                p.content_len);
        }
        llm_reply_finish(&o, &p);
        add(content, sizeof(content), p.content ? p.content : "",
            p.content_len);
        for (c = 0; c < o.n_calls; c++) {
            add(calls, sizeof(calls), o.calls[c].name,
                strlen(o.calls[c].name));
            add(calls, sizeof(calls), ":", 1);
            add(calls, sizeof(calls), o.calls[c].arguments,
                strlen(o.calls[c].arguments));
            add(calls, sizeof(calls), ";", 1);
        }
        is_str(calls, cases[i].calls, "%s", cases[i].name);
        ok(content[0] == '\0' && o.dropped && !o.failed,
           "%s: no content, dropped, not failed (content \"%s\")",
           cases[i].name, content);
        llm_reply_free(&o);
    }

    /* a whole constrained reply is not dropped */
    llm_reply_init(&o, G, 0, 0, 1, tools);
    o.constrained = 1;
    llm_reply_push(&o, "{\"tool_calls\":[{\"name\":\"get_time\","
                   "\"arguments\":{}}]}", 52, &p);
    llm_reply_finish(&o, &p);
    ok(o.n_calls == 1 && !o.dropped, "a whole constrained reply: one call");
    llm_reply_free(&o);
}


int
main(void)
{
    tools = cJSON_Parse(TOOLS_JSON);

    test_parsers();
    test_held_back();
    test_ids_and_json();
    test_request();
    test_templates();
    test_prompt_in_think();
    test_generic_smollm2();
    test_grammar();
    test_cut();

    cJSON_Delete(tools);
    return tap_done();
}
