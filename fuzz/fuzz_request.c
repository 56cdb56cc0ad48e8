/*
 * libFuzzer harness for the OpenAI request parser (both endpoints) and,
 * through the stop strings it accepts, the stop-string matcher.
 *
 *   make fuzz-smoke            (every harness, FUZZ_SECS=30 each)
 *   build/fuzz/fuzz_request -max_total_time=60 fuzz/corpus/request
 *
 * Beyond "no crash", it checks the parser's promises: on success every
 * value is in its documented range and the messages are normalised; on
 * failure the error is complete. The stop matcher, fed the request's text
 * in uneven pieces, must emit a prefix of it that holds no stop string.
 * Every text the strict JSON check accepts, cJSON must read too.
 */
#define _GNU_SOURCE     /* memmem */
#include "api/request.h"
#include "api/json_strict.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>


/* the error goes out as JSON text: it must be valid UTF-8 (a plain
   decoder, independent of the parser's own) */
static int
is_utf8(const char *s)
{
    const unsigned char  *p = (const unsigned char *) s;
    unsigned              cp, n, i;

    while (*p) {
        if (*p < 0x80) {
            p++;
            continue;
        }
        n = (*p >= 0xf0) ? 3 : (*p >= 0xe0) ? 2 : (*p >= 0xc0) ? 1 : 9;
        if (n == 9 || *p > 0xf4) {
            return 0;
        }
        cp = *p & (0x3f >> n);
        for (i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80) {
                return 0;
            }
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        if (cp < (n == 1 ? 0x80u : n == 2 ? 0x800u : 0x10000u)
            || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        {
            return 0;
        }
        p += n + 1;
    }
    return 1;
}


static void
check_error(const llm_api_error *e)
{
    if ((e->status != 400 && e->status != 413 && e->status != 500)
        || e->message[0] == '\0' || e->code[0] == '\0'
        || !is_utf8(e->message) || !is_utf8(e->param))
    {
        abort();
    }
}


static void
check_messages(const cJSON *msgs)
{
    const cJSON  *m, *role, *content;

    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) < 1) {
        abort();
    }
    cJSON_ArrayForEach(m, msgs) {
        role = cJSON_GetObjectItemCaseSensitive(m, "role");
        content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsString(role) || !cJSON_IsString(content)
            || (strcmp(role->valuestring, "system") != 0
                && strcmp(role->valuestring, "user") != 0
                && strcmp(role->valuestring, "assistant") != 0
                && strcmp(role->valuestring, "tool") != 0))
        {
            abort();
        }
        /* a tool result names its call; only assistants made calls */
        if ((strcmp(role->valuestring, "tool") == 0)
            != cJSON_IsString(cJSON_GetObjectItemCaseSensitive(
                   m, "tool_call_id"))
            || (cJSON_HasObjectItem(m, "tool_calls")
                && strcmp(role->valuestring, "assistant") != 0))
        {
            abort();
        }
    }
}


/* tools given: tool_choice one of ours, a name only when one is chosen */
static void
check_tools(const llm_api_request *r)
{
    if (r->tool_choice < LLM_TOOL_CHOICE_NONE
        || r->tool_choice > LLM_TOOL_CHOICE_NAMED
        || (r->tool_choice == LLM_TOOL_CHOICE_NAMED) != (r->tool_name != NULL)
        || (r->tools == NULL && r->tool_choice > LLM_TOOL_CHOICE_AUTO)
        || (r->tools != NULL && !cJSON_IsArray(r->tools)))
    {
        abort();
    }
}


static void
check_ranges(const llm_api_request *r, const llm_api_limits *lim)
{
    const llm_sampling_params  *s = &r->sampling;
    int                         i;

    if (r->model == NULL || r->model[0] == '\0'
        || !(s->temperature >= 0 && s->temperature <= 2)
        || !(s->top_p > 0 && s->top_p <= 1)
        || !(s->min_p >= 0 && s->min_p <= 1)
        || !(s->presence_penalty >= -2 && s->presence_penalty <= 2)
        || !(s->frequency_penalty >= -2 && s->frequency_penalty <= 2)
        || !(s->repetition_penalty > 0)
        || s->top_k < 0 || r->max_tokens < 0 || r->n != 1
        || s->top_logprobs < 0 || s->top_logprobs > LLM_MAX_TOP_LOGPROBS
        || r->n_stop > lim->max_stop || r->n_stop_ids > lim->max_stop_ids
        || r->n_logit_bias > lim->max_logit_bias
        || (r->include_usage && !r->stream))
    {
        abort();
    }
    for (i = 0; i < r->n_stop; i++) {
        if (r->stop[i].len == 0 || r->stop[i].len > lim->max_stop_len
            || strlen(r->stop[i].ptr) != r->stop[i].len)
        {
            abort();
        }
    }
    for (i = 0; i < r->n_logit_bias; i++) {
        if (r->logit_bias[i].token < 0
            || !(r->logit_bias[i].bias >= -100 && r->logit_bias[i].bias <= 100))
        {
            abort();
        }
    }
    for (i = 0; i < r->n_prompt_ids; i++) {
        if (r->prompt_ids[i] < 0) {
            abort();
        }
    }
    if (r->endpoint == LLM_API_CHAT) {
        check_messages(r->messages);
        check_tools(r);
    } else if ((r->prompt == NULL) == (r->prompt_ids == NULL)) {
        abort();    /* exactly one prompt form */
    }
}


/* feeds text through a matcher built from the request's stop strings */
static void
check_stop(const llm_api_request *r, const char *text, size_t len)
{
    llm_stop      m;
    llm_stop_out  o;
    char          err[128], *out;
    size_t        pos = 0, got = 0, chunk;
    int           i;

    if (llm_stop_init(&m, r->stop, r->n_stop, err, sizeof(err)) != 0) {
        abort();    /* the parser only lets non-empty strings through */
    }
    out = malloc(len + 1);
    o.stopped = 0;
    while (pos < len && !o.stopped) {
        chunk = 1 + (pos * 7 + len) % 5;
        chunk = chunk > len - pos ? len - pos : chunk;
        llm_stop_push(&m, text + pos, chunk, &o);
        memcpy(out + got, o.text, o.len);
        got += o.len;
        pos += chunk;
    }
    llm_stop_flush(&m, &o);
    memcpy(out + got, o.text, o.len);
    got += o.len;
    if (got > len || memcmp(out, text, got) != 0
        || (!o.stopped && got != len))
    {
        abort();
    }
    out[got] = '\0';
    for (i = 0; i < r->n_stop; i++) {
        if (memmem(out, got, r->stop[i].ptr, r->stop[i].len) != NULL) {
            abort();
        }
    }
    free(out);
    llm_stop_free(&m);
}


/* the request parser answers a cJSON failure after the strict check
   with "out of memory": that holds only if cJSON reads every text the
   check accepts */
static void
check_strict(const uint8_t *data, size_t size)
{
    cJSON            *j;
    llm_json_result   res;

    if (llm_json_check((const char *) data, size, 64, 0, 0, &res)
        != LLM_JSON_OK)
    {
        return;
    }
    j = cJSON_ParseWithLength((const char *) data, size);
    if (j == NULL) {
        abort();
    }
    cJSON_Delete(j);
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int  endpoints[] = { LLM_API_CHAT, LLM_API_COMPLETION };
    llm_api_limits    lim;
    llm_api_request   r;
    llm_api_error     e;
    size_t            i;

    check_strict(data, size);
    llm_api_limits_default(&lim);
    lim.max_body = 1 << 16;
    for (i = 0; i < 2; i++) {
        if (llm_api_parse(&r, (const char *) data, size, endpoints[i], &lim,
                          &e) == 0)
        {
            check_ranges(&r, &lim);
            if (r.prompt != NULL) {
                check_stop(&r, r.prompt, r.prompt_len);
            } else if (r.messages != NULL) {
                const char *t = cJSON_GetArrayItem(r.messages, 0)->child
                                ->next->valuestring;

                check_stop(&r, t, strlen(t));
            }
        } else {
            check_error(&e);
        }
        llm_api_request_free(&r);
    }
    return 0;
}
