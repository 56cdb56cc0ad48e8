/*
 * Thinking, answer and tool calls out of a model's reply: the incremental
 * splitter, one parser per format, the ids, the JSON the reply carries,
 * and the grammar that enforces tool_choice "required" (api/reply.h).
 *
 * Two stages, one after the other:
 *
 *   reasoning   R_DETECT -> R_THINK -> R_AFTER -> R_CONTENT
 *               "<think>" opens the thinking (or the prompt did), "</think>"
 *               ends it; blanks around it are dropped
 *   tools       T_START -> T_TEXT -> T_CALL
 *               T_START holds a reply that may open with a call ("{",
 *               "[{", "<|python_tag|>"); T_TEXT lets text out but holds a
 *               tail that may be the start of "<tool_call>" or
 *               "[TOOL_CALLS]", and blanks that may precede one; T_CALL
 *               holds everything until the end, where it is parsed
 *
 * HARMONY has its own scanner (api/harmony.c) in place of both stages.
 *
 * defines: llm_tool_format_detect, llm_tool_format_name, llm_reply_init,
 *          llm_reply_push, llm_reply_finish, llm_reply_free,
 *          llm_reply_prompt_in_think, llm_tool_call_id, llm_tool_calls_json,
 *          llm_tool_call_delta, llm_tool_grammar
 */
#define _GNU_SOURCE     /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "api/reply.h"
#include "api/tool_xml.h"


enum { R_DETECT, R_THINK, R_AFTER, R_CONTENT };
enum { T_START, T_TEXT, T_CALL };

#define THINK_OPEN      "<think>"
#define THINK_CLOSE     "</think>"
#define HERMES_OPEN     "<tool_call>"
#define HERMES_CLOSE    "</tool_call>"
#define MISTRAL_OPEN    "[TOOL_CALLS]"
#define MISTRAL_ARGS    "[ARGS]"
#define PYTHON_TAG      "<|python_tag|>"
#define HARMONY_CHANNEL "<|channel|>"

/* parse_calls' results besides 0 (calls) and -1 (failed) */
#define NOT_A_CALL      2


/* ---------------------------------------------------------------------------
 * formats
 */

int
llm_tool_format_detect(const char *tmpl, size_t len)
{
    /* the template's own text names its format: the tag it teaches the
       model (Hermes-3-Llama-3.1 has both <tool_call> and Llama's headers:
       it writes <tool_call>, so that test comes first) */
    if (tmpl == NULL) {
        return LLM_TOOL_FMT_GENERIC;
    }
    if (memmem(tmpl, len, HARMONY_CHANNEL, sizeof(HARMONY_CHANNEL) - 1)) {
        return LLM_TOOL_FMT_HARMONY;
    }
    if (memmem(tmpl, len, HERMES_OPEN, sizeof(HERMES_OPEN) - 1)) {
        return memmem(tmpl, len, "<function=", 10) ? LLM_TOOL_FMT_QWEN3_XML
                                                   : LLM_TOOL_FMT_HERMES;
    }
    if (memmem(tmpl, len, MISTRAL_OPEN, sizeof(MISTRAL_OPEN) - 1)) {
        return LLM_TOOL_FMT_MISTRAL;
    }
    if (memmem(tmpl, len, PYTHON_TAG, sizeof(PYTHON_TAG) - 1)
        || (memmem(tmpl, len, "<|start_header_id|>", 19)
            && memmem(tmpl, len, "\"parameters\"", 12)))
    {
        return LLM_TOOL_FMT_LLAMA3;
    }
    return LLM_TOOL_FMT_GENERIC;
}


const char *
llm_tool_format_name(int format)
{
    static const char *const names[] = {
        "none", "generic", "hermes", "llama3", "mistral", "qwen3_xml",
        "harmony"
    };

    return format >= 0 && format <= LLM_TOOL_FMT_HARMONY ? names[format]
                                                            : "unknown";
}


/* ---------------------------------------------------------------------------
 * buffers
 */

static int
buf_add(llm_reply *o, llm_reply_buf *b, const char *s, size_t n)
{
    char    *p;
    size_t   cap;

    if (n == 0) {
        return 0;
    }
    if (b->len + n + 1 > b->cap) {
        cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) {
            cap *= 2;
        }
        p = realloc(b->p, cap);
        if (p == NULL) {
            o->oom = 1;
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}


/* drops the first n bytes */
static void
buf_cut(llm_reply_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->p, b->p + n, b->len - n);
        b->len -= n;
    }
    if (b->p) {
        b->p[b->len] = '\0';
    }
}


static int
is_blank(char c)
{
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}


static size_t
skip_blanks(const char *s, size_t i, size_t n)
{
    while (i < n && is_blank(s[i])) {
        i++;
    }
    return i;
}


/* bytes before the trailing blanks of s[0..n) */
static size_t
trim_end(const char *s, size_t n)
{
    while (n > 0 && is_blank(s[n - 1])) {
        n--;
    }
    return n;
}


static long
find(const char *s, size_t n, const char *what)
{
    const char  *f = n ? memmem(s, n, what, strlen(what)) : NULL;

    return f ? (long) (f - s) : -1;
}


/* the longest tail of s[0..n) that is a proper start of what */
static size_t
partial_tail(const char *s, size_t n, const char *what)
{
    size_t  k, w = strlen(what);

    for (k = w - 1 < n ? w - 1 : n; k > 0; k--) {
        if (memcmp(s + n - k, what, k) == 0) {
            return k;
        }
    }
    return 0;
}


/* 1: s starts with what, -1: s is a proper start of what, 0: neither */
static int
starts(const char *s, size_t n, const char *what)
{
    size_t  w = strlen(what);

    if (n == 0) {
        return -1;          /* an empty buffer (s may be NULL) */
    }
    if (n >= w) {
        return memcmp(s, what, w) == 0;
    }
    return memcmp(s, what, n) == 0 ? -1 : 0;
}


/* ---------------------------------------------------------------------------
 * the calls
 */

static int
tool_known(const cJSON *tools, const char *name)
{
    const cJSON  *t, *fn, *nm;

    cJSON_ArrayForEach(t, tools) {
        fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (cJSON_IsString(nm) && strcmp(nm->valuestring, name) == 0) {
            return 1;
        }
    }
    return 0;
}


static int
fail_why(llm_reply *o, const char *why, const char *arg)
{
    snprintf(o->why, sizeof(o->why), why, arg ? arg : "");
    return -1;
}


/* one call from its name and arguments (an object, or a string of one) */
static int
add_call(llm_reply *o, const cJSON *name, const cJSON *args)
{
    cJSON          *parsed = NULL;
    char           *text;
    llm_tool_call  *c;

    if (!cJSON_IsString(name) || name->valuestring[0] == '\0') {
        return fail_why(o, "a call without a function name", NULL);
    }
    if (!tool_known(o->tools, name->valuestring)) {
        return fail_why(o, "a call of the unknown function \"%.64s\"",
                        name->valuestring);
    }
    if (cJSON_IsString(args)) {
        parsed = cJSON_Parse(args->valuestring);
        args = parsed;
    }
    if (args != NULL && !cJSON_IsObject(args)) {
        cJSON_Delete(parsed);
        return fail_why(o, "the arguments of \"%.64s\" are not an object",
                        name->valuestring);
    }
    text = args ? cJSON_PrintUnformatted(args) : strdup("{}");
    cJSON_Delete(parsed);
    c = realloc(o->calls, (o->n_calls + 1) * sizeof(*c));
    if (text == NULL || c == NULL) {
        free(text);
        if (c) {
            o->calls = c;
        }
        o->oom = 1;
        return fail_why(o, "out of memory", NULL);
    }
    o->calls = c;
    c = &o->calls[o->n_calls];
    c->name = strdup(name->valuestring);
    c->arguments = text;
    if (c->name == NULL) {
        free(text);
        o->oom = 1;
        return fail_why(o, "out of memory", NULL);
    }
    llm_tool_call_id(c->id, o->format);
    o->n_calls++;
    return 0;
}


/* a JSON value at s[*i..n); *i moves past it */
static cJSON *
json_at(const char *s, size_t n, size_t *i)
{
    const char  *end = NULL;
    cJSON       *v;

    v = cJSON_ParseWithLengthOpts(s + *i, n - *i, &end, 0);
    if (v != NULL) {
        *i = end - s;
    }
    return v;
}


/* {"name": ..., key: {...}} with key "arguments" or "parameters" */
static int
add_call_object(llm_reply *o, const cJSON *obj)
{
    const cJSON  *args;

    if (!cJSON_IsObject(obj)) {
        return fail_why(o, "a call that is not a JSON object", NULL);
    }
    args = cJSON_GetObjectItemCaseSensitive(obj, "arguments");
    if (args == NULL) {
        args = cJSON_GetObjectItemCaseSensitive(obj, "parameters");
    }
    return add_call(o, cJSON_GetObjectItemCaseSensitive(obj, "name"), args);
}


/* <tool_call>{...}</tool_call>, blanks around and between */
static int
parse_hermes(llm_reply *o, const char *s, size_t n, size_t *rest)
{
    long     e;
    size_t   i = skip_blanks(s, 0, n), j, body_end, after;
    cJSON   *v;
    int      rc;

    while (starts(s + i, n - i, HERMES_OPEN) == 1) {
        i += sizeof(HERMES_OPEN) - 1;
        e = find(s + i, n - i, HERMES_CLOSE);
        /* a reply cut short may lack the closing tag (vLLM's parser takes
           it too) */
        body_end = e < 0 ? n : i + e;
        after = e < 0 ? n : body_end + sizeof(HERMES_CLOSE) - 1;
        j = skip_blanks(s, i, body_end);
        v = json_at(s, body_end, &j);
        if (v == NULL || skip_blanks(s, j, body_end) != body_end) {
            cJSON_Delete(v);
            return fail_why(o, "a <tool_call> that is not one JSON object",
                            NULL);
        }
        rc = add_call_object(o, v);
        cJSON_Delete(v);
        if (rc != 0) {
            return -1;
        }
        i = skip_blanks(s, after, n);
    }
    if (o->n_calls == 0) {
        return fail_why(o, "no <tool_call> after all", NULL);
    }
    *rest = i;
    return 0;
}


/* <tool_call><function=f><parameter=p>v</parameter></function></tool_call>,
   repeated (api/tool_xml.h); a JSON body as Hermes' */
static int
parse_qwen3_xml(llm_reply *o, const char *s, size_t n, size_t *rest)
{
    int      rc;
    long     e;
    char    *name;
    size_t   i = skip_blanks(s, 0, n), j, body_end, after;
    cJSON   *args, *v;

    while (starts(s + i, n - i, HERMES_OPEN) == 1) {
        i += sizeof(HERMES_OPEN) - 1;
        e = find(s + i, n - i, HERMES_CLOSE);
        body_end = e < 0 ? n : i + e;
        after = e < 0 ? n : body_end + sizeof(HERMES_CLOSE) - 1;
        j = skip_blanks(s, i, body_end);

        if (j < body_end && s[j] == '{') {
            v = json_at(s, body_end, &j);
            rc = (v != NULL && skip_blanks(s, j, body_end) == body_end)
                 ? add_call_object(o, v)
                 : fail_why(o, "a <tool_call> that is neither XML nor one "
                            "JSON object", NULL);
            cJSON_Delete(v);

        } else if (llm_tool_xml_call(s + i, body_end - i, o->tools, &name,
                                     &args, o->why, sizeof(o->why))
                   == 0)
        {
            v = cJSON_CreateString(name);
            rc = v ? add_call(o, v, args)
                   : fail_why(o, "out of memory", NULL);
            cJSON_Delete(v);
            cJSON_Delete(args);
            free(name);

        } else {
            rc = -1;
        }
        if (rc != 0) {
            return -1;
        }
        i = skip_blanks(s, after, n);
    }
    if (o->n_calls == 0) {
        return fail_why(o, "no <tool_call> after all", NULL);
    }
    *rest = i;
    return 0;
}


/* [TOOL_CALLS][{...}, ...] or [TOOL_CALLS]name[ARGS]{...}, repeated */
static int
parse_mistral(llm_reply *o, const char *s, size_t n, size_t *rest)
{
    long          a;
    size_t        i = skip_blanks(s, 0, n);
    cJSON        *v, *name;
    const cJSON  *c;
    int           rc, tagged;

    do {
        tagged = starts(s + i, n - i, MISTRAL_OPEN) == 1;
        if (tagged) {
            i = skip_blanks(s, i + sizeof(MISTRAL_OPEN) - 1, n);
        }
        if (i < n && s[i] == '[') {
            v = json_at(s, n, &i);
            if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0) {
                cJSON_Delete(v);
                return fail_why(o, "[TOOL_CALLS] without a JSON array of "
                                "calls", NULL);
            }
            rc = 0;
            cJSON_ArrayForEach(c, v) {
                if (rc == 0) {
                    rc = add_call_object(o, c);
                }
            }
            cJSON_Delete(v);
        } else if (tagged && (a = find(s + i, n - i, MISTRAL_ARGS)) > 0) {
            char  *nm = strndup(s + i, (size_t) a);

            i = skip_blanks(s, i + a + sizeof(MISTRAL_ARGS) - 1, n);
            v = json_at(s, n, &i);
            name = nm ? cJSON_CreateString(nm) : NULL;
            free(nm);
            rc = v ? add_call(o, name, v)
                   : fail_why(o, "[ARGS] not followed by JSON", NULL);
            cJSON_Delete(name);
            cJSON_Delete(v);
        } else {
            return fail_why(o, "[TOOL_CALLS] without a call", NULL);
        }
        if (rc != 0) {
            return -1;
        }
        i = skip_blanks(s, i, n);
    } while (starts(s + i, n - i, MISTRAL_OPEN) == 1);
    *rest = i;
    return 0;
}


/* <|python_tag|>? {"name": ..., "parameters": {...}} (; another)* */
static int
parse_llama3(llm_reply *o, const char *s, size_t n, size_t *rest)
{
    size_t   i = skip_blanks(s, 0, n);
    cJSON   *v;
    int      rc;

    if (starts(s + i, n - i, PYTHON_TAG) == 1) {
        i = skip_blanks(s, i + sizeof(PYTHON_TAG) - 1, n);
    }
    while (i < n && s[i] == '{') {
        v = json_at(s, n, &i);
        if (v == NULL) {
            return fail_why(o, "a call that is not valid JSON", NULL);
        }
        if (o->n_calls == 0
            && cJSON_GetObjectItemCaseSensitive(v, "name") == NULL)
        {
            cJSON_Delete(v);
            return NOT_A_CALL;      /* a JSON answer */
        }
        rc = add_call_object(o, v);
        cJSON_Delete(v);
        if (rc != 0) {
            return -1;
        }
        i = skip_blanks(s, i, n);
        if (i < n && s[i] == ';') {
            i = skip_blanks(s, i + 1, n);
        }
    }
    if (o->n_calls == 0) {
        return fail_why(o, "<|python_tag|> without a call", NULL);
    }
    *rest = i;
    return 0;
}


/* {"tool_calls": [...]} | {"tool_call": {...}} | {"response": "..."} */
static int
parse_generic(llm_reply *o, const char *s, size_t n, size_t *rest,
    llm_reply_buf *answer)
{
    size_t        i = skip_blanks(s, 0, n);
    cJSON        *v;
    const cJSON  *calls, *one, *resp, *c;
    int           rc = 0;

    v = json_at(s, n, &i);
    if (v == NULL) {
        return fail_why(o, "a reply that is not valid JSON", NULL);
    }
    calls = cJSON_GetObjectItemCaseSensitive(v, "tool_calls");
    one = cJSON_GetObjectItemCaseSensitive(v, "tool_call");
    resp = cJSON_GetObjectItemCaseSensitive(v, "response");
    if (calls != NULL) {
        if (!cJSON_IsArray(calls) || cJSON_GetArraySize(calls) == 0) {
            rc = fail_why(o, "\"tool_calls\" is not an array of calls", NULL);
        }
        cJSON_ArrayForEach(c, calls) {
            if (rc == 0) {
                rc = add_call_object(o, c);
            }
        }
    } else if (one != NULL) {
        rc = add_call_object(o, one);
    } else if (cJSON_IsString(resp)) {
        rc = buf_add(o, answer, resp->valuestring, strlen(resp->valuestring))
             == 0 ? NOT_A_CALL : -1;
    } else {
        rc = NOT_A_CALL;
    }
    cJSON_Delete(v);
    *rest = skip_blanks(s, i, n);
    return rc;
}


static void
free_calls(llm_reply *o)
{
    for (int i = 0; i < o->n_calls; i++) {
        free(o->calls[i].name);
        free(o->calls[i].arguments);
    }
    free(o->calls);
    o->calls = NULL;
    o->n_calls = 0;
}


/* parallel_tool_calls false: the first call only */
static void
keep_first(llm_reply *o)
{
    while (!o->parallel && o->n_calls > 1) {
        o->n_calls--;
        free(o->calls[o->n_calls].name);
        free(o->calls[o->n_calls].arguments);
    }
}


/* the calls of a JSON array opened at s[i] ('['), up to the first that
   is not a whole call: a constrained reply's array cut short */
static void
salvage_array(llm_reply *o, const char *s, size_t n, size_t i)
{
    cJSON  *v;
    int     rc;

    i = skip_blanks(s, i, n);
    if (i >= n || s[i] != '[') {
        return;
    }
    for (i++; ; i++) {
        i = skip_blanks(s, i, n);
        v = json_at(s, n, &i);
        rc = v ? add_call_object(o, v) : -1;
        cJSON_Delete(v);
        i = skip_blanks(s, i, n);
        if (rc != 0 || i >= n || s[i] != ',') {
            return;
        }
    }
}


/*
 * A constrained reply that did not parse was cut (the grammar allows
 * nothing else): the calls finished before the cut stay, the last one is
 * dropped. HERMES and LLAMA3 parse call by call, so o->calls has them
 * already; GENERIC and MISTRAL hold one array, walked again here.
 */
static void
salvage_calls(llm_reply *o, const char *s, size_t n)
{
    long    at;
    size_t  i;

    if (o->format == LLM_TOOL_FMT_GENERIC || o->format == LLM_TOOL_FMT_NONE) {
        free_calls(o);
        at = find(s, n, "\"tool_calls\"");
        if (at >= 0) {
            i = skip_blanks(s, (size_t) at + sizeof("\"tool_calls\"") - 1, n);
            if (i < n && s[i] == ':') {
                salvage_array(o, s, n, i + 1);
            }
        }

    } else if (o->format == LLM_TOOL_FMT_MISTRAL) {
        free_calls(o);
        i = skip_blanks(s, 0, n);
        if (starts(s + i, n - i, MISTRAL_OPEN) == 1) {
            i += sizeof(MISTRAL_OPEN) - 1;
        }
        salvage_array(o, s, n, i);
    }
    o->dropped = 1;
}


/* the end of a held call: calls, or the text back as content */
static void
parse_calls(llm_reply *o)
{
    int           rc;
    size_t        rest = 0, end, n = o->t_held.len;
    const char   *s = o->t_held.p;
    llm_reply_buf answer = { NULL, 0, 0 };

    switch (o->format) {
    case LLM_TOOL_FMT_HERMES:
        rc = parse_hermes(o, s, n, &rest);
        break;
    case LLM_TOOL_FMT_QWEN3_XML:
        rc = parse_qwen3_xml(o, s, n, &rest);
        break;
    case LLM_TOOL_FMT_MISTRAL:
        rc = parse_mistral(o, s, n, &rest);
        break;
    case LLM_TOOL_FMT_LLAMA3:
        rc = parse_llama3(o, s, n, &rest);
        break;
    default:
        rc = parse_generic(o, s, n, &rest, &answer);
        break;
    }

    if (rc == 0) {
        /* text after the calls is the answer's too (a parser may have
           taken the trailing blanks already: rest past the trimmed end) */
        end = trim_end(s, n);
        if (end > rest) {
            (void) buf_add(o, &o->o_content, s + rest, end - rest);
        }
        keep_first(o);

    } else if (o->constrained) {
        salvage_calls(o, s, n);
        keep_first(o);

    } else {
        free_calls(o);
        o->failed = (rc == -1);
        if (answer.len) {
            (void) buf_add(o, &o->o_content, answer.p, answer.len);
        } else {
            (void) buf_add(o, &o->o_content, s, n);
        }
    }
    free(answer.p);
    o->t_held.len = 0;
}


/* ---------------------------------------------------------------------------
 * the tool stage
 */

/* 1: s opens a call in this format, -1: it may, 0: it does not */
static int
opens_call(int format, const char *s, size_t n)
{
    static const char *const  hermes[] = { HERMES_OPEN, NULL };
    static const char *const  mistral[] = { MISTRAL_OPEN, "[{", NULL };
    static const char *const  llama3[] = { PYTHON_TAG, "{", NULL };
    static const char *const  generic[] = { "{", NULL };
    const char *const        *o;
    int                       r, best = 0;

    o = (format == LLM_TOOL_FMT_HERMES || format == LLM_TOOL_FMT_QWEN3_XML)
        ? hermes
        : format == LLM_TOOL_FMT_MISTRAL ? mistral
        : format == LLM_TOOL_FMT_LLAMA3 ? llama3 : generic;
    for (; *o; o++) {
        r = starts(s, n, *o);
        if (r == 1) {
            return 1;
        }
        if (r == -1) {
            best = -1;
        }
    }
    return best;
}


static const char *
call_marker(int format)
{
    return (format == LLM_TOOL_FMT_HERMES
            || format == LLM_TOOL_FMT_QWEN3_XML) ? HERMES_OPEN
           : format == LLM_TOOL_FMT_MISTRAL ? MISTRAL_OPEN : NULL;
}


static void
tool_run(llm_reply *o, int final)
{
    llm_reply_buf  *h = &o->t_held;
    const char   *marker = call_marker(o->format);
    size_t        i, end, keep;
    long          at;
    int           r;

    for ( ;; ) {
        switch (o->t_phase) {

        case T_START:
            i = skip_blanks(h->p, 0, h->len);
            if (i == h->len && !final) {
                return;
            }
            r = opens_call(o->format, h->p + i, h->len - i);
            if (r == -1 && !final) {
                return;
            }
            /* constrained, a start of the call is one cut short */
            o->t_phase = (r == 1 || (r == -1 && o->constrained)) ? T_CALL
                                                                  : T_TEXT;
            continue;

        case T_TEXT:
            at = marker ? find(h->p, h->len, marker) : -1;
            if (at >= 0) {
                /* the blanks before the call stay with it: dropped if it
                   is one, sent back with it if not */
                end = trim_end(h->p, (size_t) at);
                (void) buf_add(o, &o->o_content, h->p, end);
                buf_cut(h, end);
                o->t_phase = T_CALL;
                continue;
            }
            end = h->len;
            if (!final) {
                keep = marker ? partial_tail(h->p, h->len, marker) : 0;
                end = trim_end(h->p, h->len - keep);
            }
            (void) buf_add(o, &o->o_content, h->p, end);
            buf_cut(h, end);
            return;

        default:    /* T_CALL */
            if (final) {
                parse_calls(o);
            }
            return;
        }
    }
}


static void
tool_push(llm_reply *o, const char *s, size_t n)
{
    if (o->format == LLM_TOOL_FMT_NONE) {
        (void) buf_add(o, &o->o_content, s, n);
        return;
    }
    if (buf_add(o, &o->t_held, s, n) == 0) {
        tool_run(o, 0);
    }
}


/* ---------------------------------------------------------------------------
 * the reasoning stage
 */

static void
reason_out(llm_reply *o, const char *s, size_t n)
{
    size_t  i = 0;

    if (o->r_strip) {
        i = skip_blanks(s, 0, n);
        if (i < n) {
            o->r_strip = 0;
        }
    }
    (void) buf_add(o, &o->o_reasoning, s + i, n - i);
}


static void
reason_run(llm_reply *o, int final)
{
    llm_reply_buf  *h = &o->r_held;
    size_t        i, end;
    long          at;
    int           r;

    for ( ;; ) {
        switch (o->r_phase) {

        case R_DETECT:
            i = skip_blanks(h->p, 0, h->len);
            r = starts(h->p + i, h->len - i, THINK_OPEN);
            if (r == 1) {
                buf_cut(h, i + sizeof(THINK_OPEN) - 1);
                o->r_phase = R_THINK;
                o->r_strip = 1;
                continue;
            }
            if (r == -1 && !final) {
                return;
            }
            o->r_phase = R_CONTENT;
            continue;

        case R_THINK:
            at = find(h->p, h->len, THINK_CLOSE);
            if (at >= 0) {
                reason_out(o, h->p, trim_end(h->p, (size_t) at));
                buf_cut(h, (size_t) at + sizeof(THINK_CLOSE) - 1);
                o->r_phase = R_AFTER;
                continue;
            }
            end = h->len - (final ? 0 : partial_tail(h->p, h->len,
                                                     THINK_CLOSE));
            /* blanks wait: they may be the last before </think> */
            end = trim_end(h->p, end);
            reason_out(o, h->p, end);
            buf_cut(h, final ? h->len : end);
            return;

        case R_AFTER:
            i = skip_blanks(h->p, 0, h->len);
            buf_cut(h, i);
            if (h->len == 0) {
                return;
            }
            o->r_phase = R_CONTENT;
            continue;

        default:    /* R_CONTENT */
            tool_push(o, h->p, h->len);
            h->len = 0;
            return;
        }
    }
}


/* ---------------------------------------------------------------------------
 * HARMONY: the scanner's messages (api/harmony.h) into the reply
 */

/* a message to=functions.NAME: its body is the arguments' JSON */
static void
harmony_call(llm_reply *o, const char *recipient, const char *s, size_t n,
    int complete)
{
    cJSON       *name, *args;
    const char  *fn = recipient, *end = NULL;
    int          rc;

    if (strncmp(fn, "functions.", 10) == 0) {
        fn += 10;
    }
    if (!o->parallel && o->n_calls > 0) {
        return;                 /* the first call only */
    }
    args = cJSON_ParseWithLengthOpts(s, n, &end, 0);
    if (args != NULL && skip_blanks(s, (size_t) (end - s), n) != n) {
        cJSON_Delete(args);
        args = NULL;
    }
    name = cJSON_CreateString(fn);
    if (name == NULL) {
        o->oom = 1;
        cJSON_Delete(args);
        return;
    }
    rc = args ? add_call(o, name, args)
              : fail_why(o, "the arguments of \"%.64s\" are not JSON", fn);
    cJSON_Delete(name);
    cJSON_Delete(args);
    if (rc == 0) {
        return;
    }
    if (o->constrained && !complete) {
        o->dropped = 1;         /* the grammar's call, cut by max_tokens */
        return;
    }
    o->failed = 1;
    (void) buf_add(o, &o->o_content, s, n);
}


static void
harmony_emit(void *data, int kind, const char *recipient, const char *s,
    size_t n, int complete)
{
    llm_reply  *o = data;

    switch (kind) {
    case LLM_HARMONY_REASONING:
        /* without reasoning, the thinking is not the answer: dropped */
        if (o->reasoning) {
            (void) buf_add(o, &o->o_reasoning, s, n);
        }
        return;
    case LLM_HARMONY_CALL:
        harmony_call(o, recipient, s, n, complete);
        return;
    default:
        (void) buf_add(o, &o->o_content, s, n);
        return;
    }
}


/* ---------------------------------------------------------------------------
 * the interface
 */

void
llm_reply_init(llm_reply *o, int format, int reasoning, int in_think,
    int parallel, const cJSON *tools)
{
    memset(o, 0, sizeof(*o));
    o->format = format;
    o->reasoning = reasoning;
    o->parallel = parallel;
    o->tools = tools;
    o->r_phase = !reasoning ? R_CONTENT : in_think ? R_THINK : R_DETECT;
    o->r_strip = (reasoning && in_think);
    o->t_phase = T_START;
    llm_harmony_init(&o->harmony);

    /* the buffers are never NULL, so the stages may point into them
       (a failure here makes the first push fail) */
    o->r_held.p = malloc(64);
    o->t_held.p = malloc(64);
    o->o_reasoning.p = malloc(64);
    o->o_content.p = malloc(64);
    if (o->r_held.p && o->t_held.p && o->o_reasoning.p && o->o_content.p) {
        o->r_held.cap = o->t_held.cap = o->o_reasoning.cap
                      = o->o_content.cap = 64;
        o->r_held.p[0] = o->t_held.p[0] = o->o_reasoning.p[0]
                       = o->o_content.p[0] = '\0';
    } else {
        o->oom = 1;
    }
}


static void
piece_of(llm_reply *o, llm_reply_piece *piece)
{
    piece->reasoning = o->o_reasoning.p;
    piece->reasoning_len = o->o_reasoning.len;
    piece->content = o->o_content.p;
    piece->content_len = o->o_content.len;
}


int
llm_reply_push(llm_reply *o, const char *text, size_t len,
    llm_reply_piece *piece)
{
    if (o->oom) {
        memset(piece, 0, sizeof(*piece));
        return -1;
    }
    o->o_reasoning.len = 0;
    o->o_content.len = 0;

    if (o->format == LLM_TOOL_FMT_HARMONY) {
        (void) llm_harmony_push(&o->harmony, text, len, 0, harmony_emit, o);
        o->oom |= o->harmony.oom;
    } else if (o->reasoning) {
        if (buf_add(o, &o->r_held, text, len) == 0) {
            reason_run(o, 0);
        }
    } else {
        tool_push(o, text, len);
    }
    piece_of(o, piece);
    return o->oom ? -1 : 0;
}


int
llm_reply_finish(llm_reply *o, llm_reply_piece *piece)
{
    if (o->oom) {
        memset(piece, 0, sizeof(*piece));
        return -1;
    }
    o->o_reasoning.len = 0;
    o->o_content.len = 0;

    if (o->format == LLM_TOOL_FMT_HARMONY) {
        (void) llm_harmony_push(&o->harmony, NULL, 0, 1, harmony_emit, o);
        o->oom |= o->harmony.oom;
        piece_of(o, piece);
        return o->oom ? -1 : 0;
    }
    if (o->reasoning) {
        reason_run(o, 1);
    }
    if (o->format != LLM_TOOL_FMT_NONE) {
        tool_run(o, 1);
    }
    piece_of(o, piece);
    return o->oom ? -1 : 0;
}


void
llm_reply_free(llm_reply *o)
{
    free_calls(o);
    free(o->r_held.p);
    free(o->t_held.p);
    free(o->o_reasoning.p);
    free(o->o_content.p);
    llm_harmony_free(&o->harmony);
    memset(o, 0, sizeof(*o));
}


int
llm_reply_prompt_in_think(const char *prompt, size_t len)
{
    size_t  n = trim_end(prompt, len), w = sizeof(THINK_OPEN) - 1;

    return n >= w && memcmp(prompt + n - w, THINK_OPEN, w) == 0;
}


void
llm_tool_call_id(char *id, int format)
{
    static const char  alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                 "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char      rnd[24];
    size_t             i, n = (format == LLM_TOOL_FMT_MISTRAL) ? 9 : 24;
    char              *p = id;

    if (getrandom(rnd, n, GRND_NONBLOCK) != (ssize_t) n) {
        for (i = 0; i < n; i++) {
            rnd[i] = (unsigned char) rand();
        }
    }
    if (n == 24) {
        memcpy(id, "call_", 5);
        p = id + 5;
    }
    for (i = 0; i < n; i++) {
        /* 62 does not divide 256: a slight bias, harmless for an id */
        p[i] = alnum[rnd[i] % 62];
    }
    p[n] = '\0';
}


char *
llm_tool_calls_json(const llm_tool_call *calls, int n, int indexed)
{
    char   *text = NULL;
    cJSON  *arr, *c, *fn;
    int     ok = 1;

    arr = cJSON_CreateArray();
    for (int i = 0; arr && ok && i < n; i++) {
        c = cJSON_CreateObject();
        fn = cJSON_CreateObject();
        ok = c && fn
             && (!indexed || cJSON_AddNumberToObject(c, "index", i))
             && cJSON_AddStringToObject(c, "id", calls[i].id)
             && cJSON_AddStringToObject(c, "type", "function")
             && cJSON_AddStringToObject(fn, "name", calls[i].name)
             && cJSON_AddStringToObject(fn, "arguments", calls[i].arguments);
        if (ok) {
            cJSON_AddItemToObject(c, "function", fn);
            cJSON_AddItemToArray(arr, c);
        } else {
            cJSON_Delete(c);
            cJSON_Delete(fn);
        }
    }
    if (arr && ok) {
        text = cJSON_PrintUnformatted(arr);
    }
    cJSON_Delete(arr);
    return text;
}


char *
llm_tool_call_delta(const llm_tool_call *call, int index, int head)
{
    char   *text = NULL;
    cJSON  *d, *arr, *c, *fn;
    int     ok;

    d = cJSON_CreateObject();
    arr = cJSON_AddArrayToObject(d, "tool_calls");
    c = cJSON_CreateObject();
    fn = cJSON_CreateObject();
    ok = arr && c && fn && cJSON_AddNumberToObject(c, "index", index);
    if (ok && head) {
        ok = cJSON_AddStringToObject(c, "id", call->id)
             && cJSON_AddStringToObject(c, "type", "function")
             && cJSON_AddStringToObject(fn, "name", call->name)
             && cJSON_AddStringToObject(fn, "arguments", "");
    } else if (ok) {
        ok = cJSON_AddStringToObject(fn, "arguments", call->arguments) != NULL;
    }
    if (ok) {
        cJSON_AddItemToObject(c, "function", fn);
        cJSON_AddItemToArray(arr, c);
        text = cJSON_PrintUnformatted(d);
    } else {
        cJSON_Delete(c);
        cJSON_Delete(fn);
    }
    cJSON_Delete(d);
    return text;
}


/* ---------------------------------------------------------------------------
 * tool_choice "required" and a named function, as a grammar
 */

/*
 * additionalProperties false where a parameter schema's object does not
 * say: constrained decoders do so for generation (llama.cpp's
 * json-schema-to-grammar, xgrammar's strict mode), and a small model
 * otherwise invents keys until max_tokens. Walks the keywords that hold
 * schemas, never data (enum, const, default, examples).
 */
static void
close_objects(cJSON *s)
{
    static const char *const  one[] = {
        "items", "additionalItems", "contains", "not", "if", "then", "else",
        "additionalProperties", "unevaluatedProperties", NULL
    };
    static const char *const  many[] = {
        "properties", "patternProperties", "$defs", "definitions",
        "prefixItems", "anyOf", "oneOf", "allOf", NULL
    };
    const char *const        *k;
    cJSON                    *c;

    if (!cJSON_IsObject(s)) {
        return;
    }
    if (cJSON_GetObjectItemCaseSensitive(s, "properties") != NULL
        && cJSON_GetObjectItemCaseSensitive(s, "additionalProperties") == NULL
        && cJSON_GetObjectItemCaseSensitive(s, "patternProperties") == NULL)
    {
        cJSON_AddFalseToObject(s, "additionalProperties");
    }
    for (k = one; *k; k++) {
        close_objects(cJSON_GetObjectItemCaseSensitive(s, *k));
    }
    for (k = many; *k; k++) {
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(s, *k)) {
            close_objects(c);
        }
    }
}


/* anyOf over the tools (or the one named): {"name": const, key: params} */
static cJSON *
calls_schema(const cJSON *tools, const char *only, const char *key)
{
    const cJSON  *t, *fn, *nm, *params;
    cJSON        *any, *alts, *alt, *props, *name, *req, *args;

    any = cJSON_CreateObject();
    alts = cJSON_AddArrayToObject(any, "anyOf");
    if (alts == NULL) {
        cJSON_Delete(any);
        return NULL;
    }
    cJSON_ArrayForEach(t, tools) {
        fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(nm)
            || (only && strcmp(only, nm->valuestring) != 0))
        {
            continue;
        }
        params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        alt = cJSON_CreateObject();
        cJSON_AddItemToArray(alts, alt);
        props = cJSON_CreateObject();
        name = cJSON_CreateObject();
        req = cJSON_CreateArray();
        if (alt == NULL || props == NULL || name == NULL || req == NULL) {
            cJSON_Delete(props);
            cJSON_Delete(name);
            cJSON_Delete(req);
            cJSON_Delete(any);
            return NULL;
        }
        cJSON_AddStringToObject(alt, "type", "object");
        cJSON_AddStringToObject(name, "const", nm->valuestring);
        cJSON_AddItemToObject(props, "name", name);
        args = cJSON_IsObject(params) ? cJSON_Duplicate(params, 1)
                                      : cJSON_Parse("{\"type\":\"object\"}");
        close_objects(args);
        cJSON_AddItemToObject(props, key, args);
        cJSON_AddItemToObject(alt, "properties", props);
        cJSON_AddItemToArray(req, cJSON_CreateString("name"));
        cJSON_AddItemToArray(req, cJSON_CreateString(key));
        cJSON_AddItemToObject(alt, "required", req);
        cJSON_AddFalseToObject(alt, "additionalProperties");
    }
    return any;
}


/* a token of its own: written as the token (unquoted <...>, or <[id]>) */
static void
tag_term(char *out, size_t n, const llm_tokenizer *tok, const char *tag)
{
    int32_t  id = tok ? llm_token_lookup(tok, tag, strlen(tag)) : -1;

    if (id < 0) {
        snprintf(out, n, "\"%s\"", tag);
    } else if (tag[0] == '<') {
        snprintf(out, n, "%s", tag);
    } else {
        snprintf(out, n, "<[%d]>", (int) id);
    }
}


/*
 * HARMONY: one call message, maybe after one analysis message (gpt-oss
 * thinks before it calls): the model stops at <|call|>, so one call
 *
 *   root ::= analysis? call
 *   analysis ::= <|channel|> "analysis" <|message|> .* <|end|>
 *                <|start|> "assistant"
 *   call ::= <|channel|> "commentary to=functions." (f0 | f1 ...) <|call|>
 *   f0 ::= "NAME" " " <|constrain|> "json" <|message|> %json {params}
 *
 * Names are [a-zA-Z0-9_-] (api/tools.c), so they need no escape.
 */
static char *
harmony_grammar(const cJSON *tools, const char *only,
    const llm_tokenizer *tok, size_t *len)
{
    char          ch[32], msg[32], end[32], start[32], con[32], call[32];
    char         *out = NULL, *p, *schema;
    size_t        n = 0, cap = 0, need;
    int           k = 0, w;
    const cJSON  *t, *fn, *nm, *params;
    cJSON        *args;

    tag_term(ch, sizeof(ch), tok, "<|channel|>");
    tag_term(msg, sizeof(msg), tok, "<|message|>");
    tag_term(end, sizeof(end), tok, "<|end|>");
    tag_term(start, sizeof(start), tok, "<|start|>");
    tag_term(con, sizeof(con), tok, "<|constrain|>");
    tag_term(call, sizeof(call), tok, "<|call|>");

    /* a rule per tool, then the call rule that names them */
    cJSON_ArrayForEach(t, tools) {
        fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(nm)
            || (only && strcmp(only, nm->valuestring) != 0))
        {
            continue;
        }
        params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        args = cJSON_IsObject(params)
               ? cJSON_Duplicate(params, 1)
               : cJSON_Parse("{\"type\":\"object\"}");
        close_objects(args);
        schema = args ? cJSON_PrintUnformatted(args) : NULL;
        cJSON_Delete(args);
        if (schema == NULL) {
            free(out);
            return NULL;
        }
        need = n + strlen(schema) + strlen(nm->valuestring) + 160;
        if (need > cap) {
            cap = need * 2;
            p = realloc(out, cap);
            if (p == NULL) {
                free(schema);
                free(out);
                return NULL;
            }
            out = p;
        }
        w = snprintf(out + n, cap - n,
                     "f%d ::= \"%s\" \" \" %s \"json\" %s %%json %s\n",
                     k++, nm->valuestring, con, msg, schema);
        free(schema);
        n += (size_t) w;
    }

    need = n + 400 + (size_t) k * 16;
    p = realloc(out, need);
    if (p == NULL) {
        free(out);
        return NULL;
    }
    out = p;
    w = snprintf(out + n, need - n,
                 "root ::= analysis? call\n"
                 "analysis ::= %s \"analysis\" %s .* %s %s \"assistant\"\n"
                 "call ::= %s \"commentary to=functions.\" (",
                 ch, msg, end, start, ch);
    n += (size_t) w;
    for (int i = 0; i < k; i++) {
        n += (size_t) snprintf(out + n, need - n, "%sf%d", i ? " | " : "",
                               i);
    }
    n += (size_t) snprintf(out + n, need - n, ") %s\n", call);
    *len = n;
    return out;
}


char *
llm_tool_grammar(int format, const cJSON *tools, const char *name,
    int max_calls, const llm_tokenizer *tok, size_t *len)
{
    char    open[48], close[48], more[32], *schema, *out = NULL;
    cJSON  *any, *root, *props, *calls, *req;
    size_t  n;
    int     w = -1;

    if (max_calls < 1) {
        max_calls = 1;
    }
    if (format == LLM_TOOL_FMT_HARMONY) {
        return harmony_grammar(tools, name, tok, len);
    }
    any = calls_schema(tools, name,
                       format == LLM_TOOL_FMT_LLAMA3 ? "parameters"
                                                     : "arguments");
    if (any == NULL) {
        return NULL;
    }

    if (format == LLM_TOOL_FMT_GENERIC || format == LLM_TOOL_FMT_NONE) {
        root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "type", "object");
        props = cJSON_AddObjectToObject(root, "properties");
        calls = cJSON_AddObjectToObject(props, "tool_calls");
        req = cJSON_AddArrayToObject(root, "required");
        if (calls == NULL || req == NULL) {
            cJSON_Delete(root);
            cJSON_Delete(any);
            return NULL;
        }
        cJSON_AddStringToObject(calls, "type", "array");
        cJSON_AddItemToObject(calls, "items", any);
        cJSON_AddNumberToObject(calls, "minItems", 1);
        cJSON_AddNumberToObject(calls, "maxItems", max_calls);
        cJSON_AddItemToArray(req, cJSON_CreateString("tool_calls"));
        cJSON_AddFalseToObject(root, "additionalProperties");
        any = root;
    }

    schema = cJSON_PrintUnformatted(any);
    cJSON_Delete(any);
    if (schema == NULL) {
        return NULL;
    }
    n = strlen(schema) + 512;
    out = malloc(n);
    if (out == NULL) {
        free(schema);
        return NULL;
    }

    /* the calls after the first: {0,max_calls - 1} of them */
    more[0] = '\0';
    if (max_calls > 1) {
        snprintf(more, sizeof(more), "{0,%d}", max_calls - 1);
    }

    switch (format) {
    case LLM_TOOL_FMT_HERMES:
    case LLM_TOOL_FMT_QWEN3_XML:    /* a JSON body, which its parser reads */
        tag_term(open, sizeof(open), tok, HERMES_OPEN);
        tag_term(close, sizeof(close), tok, HERMES_CLOSE);
        w = snprintf(out, n,
                     "root ::= call-block%s%s\n"
                     "call-block ::= %s \"\\n\" call \"\\n\" %s\n"
                     "call ::= %%json %s\n",
                     max_calls > 1 ? " (\"\\n\" call-block)" : "", more,
                     open, close, schema);
        break;
    case LLM_TOOL_FMT_MISTRAL:
        tag_term(open, sizeof(open), tok, MISTRAL_OPEN);
        w = snprintf(out, n,
                     "root ::= %s \"[\" call%s%s \"]\"\n"
                     "call ::= %%json %s\n",
                     open, max_calls > 1 ? " (\", \" call)" : "", more,
                     schema);
        break;
    case LLM_TOOL_FMT_LLAMA3:
        w = snprintf(out, n,
                     "root ::= call%s%s\n"
                     "call ::= %%json %s\n",
                     max_calls > 1 ? " (\"; \" call)" : "", more, schema);
        break;
    default:
        w = snprintf(out, n, "root ::= %%json %s\n", schema);
        break;
    }
    free(schema);
    if (w < 0 || (size_t) w >= n) {
        free(out);
        return NULL;
    }
    *len = (size_t) w;
    return out;
}
