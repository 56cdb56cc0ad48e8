/*
 * libFuzzer harness for the reply splitter (api/reply.h): thinking,
 * content and tool calls out of what a model wrote.
 *
 *   build/fuzz/fuzz_tool_call -max_total_time=60 fuzz/corpus/tool_call
 *
 * Input: byte 0 the format (0..6), byte 1 flags (1 reasoning, 2 the prompt
 * opened <think>, 4 parallel calls), byte 2 where to cut, then the reply.
 * Beyond "no crash": pushed whole, cut in two and byte by byte, the reply
 * gives the same reasoning, content and calls; every call names a known
 * function and has an object as its arguments; a reply without calls
 * loses none of its non-blank bytes (Harmony's markers excepted).
 */
#define _GNU_SOURCE     /* memmem */
#include "api/reply.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static cJSON  *tools;

typedef struct {
    char    *reasoning;
    size_t   reasoning_len;
    char    *content;
    size_t   content_len;
    char    *calls;
    int      failed;
} result;


static void
add(char **dst, size_t *len, const char *s, size_t n)
{
    if (n == 0) {
        return;
    }
    *dst = realloc(*dst, *len + n + 1);
    if (*dst == NULL) {
        abort();
    }
    memcpy(*dst + *len, s, n);
    *len += n;
    (*dst)[*len] = '\0';
}


static void
run(result *res, int fmt, int flags, const char *s, size_t n,
    const size_t *cuts, size_t n_cuts)
{
    llm_reply        o;
    llm_reply_piece  p;
    size_t           at = 0, to, i, clen = 0;
    cJSON           *args;

    memset(res, 0, sizeof(*res));
    llm_reply_init(&o, fmt, flags & 1, (flags & 2) != 0, (flags & 4) != 0,
                   tools);
    for (i = 0; i <= n_cuts; i++) {
        to = i < n_cuts ? cuts[i] : n;
        if (llm_reply_push(&o, s + at, to - at, &p) != 0) {
            abort();
        }
        add(&res->reasoning, &res->reasoning_len, p.reasoning,
            p.reasoning_len);
        add(&res->content, &res->content_len, p.content, p.content_len);
        at = to;
    }
    if (llm_reply_finish(&o, &p) != 0) {
        abort();
    }
    add(&res->reasoning, &res->reasoning_len, p.reasoning, p.reasoning_len);
    add(&res->content, &res->content_len, p.content, p.content_len);

    for (i = 0; i < (size_t) o.n_calls; i++) {
        if (strcmp(o.calls[i].name, "f") != 0
            && strcmp(o.calls[i].name, "g") != 0)
        {
            abort();            /* an unknown function came out */
        }
        args = cJSON_Parse(o.calls[i].arguments);
        if (!cJSON_IsObject(args)) {
            abort();            /* arguments that are not an object */
        }
        cJSON_Delete(args);
        add(&res->calls, &clen, o.calls[i].name, strlen(o.calls[i].name));
        add(&res->calls, &clen, o.calls[i].arguments,
            strlen(o.calls[i].arguments));
    }
    if (!(flags & 4) && o.n_calls > 1) {
        abort();
    }
    res->failed = o.failed;
    llm_reply_free(&o);
}


static int
same_text(const char *a, size_t al, const char *b, size_t bl)
{
    return al == bl && (al == 0 || memcmp(a, b, al) == 0);
}


static void
check_same(const result *a, const result *b)
{
    if (!same_text(a->reasoning, a->reasoning_len, b->reasoning,
                   b->reasoning_len)
        || !same_text(a->content, a->content_len, b->content, b->content_len)
        || !same_text(a->calls, a->calls ? strlen(a->calls) : 0, b->calls,
                      b->calls ? strlen(b->calls) : 0)
        || a->failed != b->failed)
    {
        abort();                /* a split changed the result */
    }
}


static void
result_free(result *r)
{
    free(r->reasoning);
    free(r->content);
    free(r->calls);
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    result   whole, two, bytes;
    size_t   n, cut, i, *all;
    int      fmt, flags;
    const char *s;

    if (tools == NULL) {
        tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":"
                            "\"f\"}},{\"type\":\"function\",\"function\":"
                            "{\"name\":\"g\"}}]");
    }
    if (size < 3) {
        return 0;
    }
    fmt = data[0] % (LLM_TOOL_FMT_HARMONY + 1);
    flags = data[1];
    s = (const char *) data + 3;
    n = size - 3;
    cut = n ? data[2] % (n + 1) : 0;

    run(&whole, fmt, flags, s, n, NULL, 0);
    run(&two, fmt, flags, s, n, &cut, 1);
    check_same(&whole, &two);

    all = malloc((n + 1) * sizeof(size_t));
    for (i = 0; i + 1 < n; i++) {
        all[i] = i + 1;
    }
    run(&bytes, fmt, flags, s, n, all, n ? n - 1 : 0);
    check_same(&whole, &bytes);
    free(all);

    /* no reasoning, no call, not a generic {"response"}, not Harmony
       (its markers are not content): the reply is the content, byte for
       byte */
    if (!(flags & 1) && whole.calls == NULL && fmt != LLM_TOOL_FMT_HARMONY
        && !(fmt == LLM_TOOL_FMT_GENERIC && memmem(s, n, "response", 8)))
    {
        if (!same_text(whole.content, whole.content_len, s, n)) {
            abort();            /* text lost */
        }
    }

    result_free(&whole);
    result_free(&two);
    result_free(&bytes);
    return 0;
}
