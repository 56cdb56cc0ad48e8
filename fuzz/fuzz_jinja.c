/*
 * libFuzzer harness for the Jinja subset: parse arbitrary bytes as a
 * template and, when it parses, render it against a small chat context
 * with tight limits, plainly and with taint tracking (the same text, spans
 * inside it). Anything but a clean result or a clean error (a crash, a
 * leak, an overflow, a hang past the limits) is a bug.
 *
 *   make fuzz-smoke            (every harness, FUZZ_SECS=30 each)
 *   build/fuzz/fuzz_jinja -max_total_time=60 fuzz/corpus/jinja
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja.h"

static const char context_json[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi \\u00e9 \\ud83e\\udd99\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>x</think>Hello\","
    "  \"tool_calls\": [{\"type\": \"function\", \"function\":"
    "  {\"name\": \"f\", \"arguments\": {\"a\": [1, 2.5, null, true]}}}]},"
    " {\"role\": \"user\", \"content\": \"  bye \\n\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\","
    "  \"parameters\": {\"type\": \"object\", \"properties\":"
    "  {\"a\": {\"type\": \"array\"}}}}}],"
    " \"documents\": null, \"add_generation_prompt\": true,"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

static cJSON *context;


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const trusted[] = { "bos_token", "eos_token", NULL };
    char          err[256], *out, *out2;
    size_t        out_len, out2_len, n_spans;
    int           rc, rc2;
    jinja_span   *spans;
    jinja_tmpl   *t;
    jinja_limits  lim;

    if (context == NULL) {
        context = cJSON_Parse(context_json);
    }
    t = jinja_parse((const char *) data, size, err, sizeof(err));
    if (t == NULL) {
        /* a parse error must say where */
        if (strncmp(err, "line ", 5) != 0) {
            abort();
        }
        return 0;
    }
    lim = jinja_limits_default();
    lim.max_output = 1 << 16;
    lim.max_memory = 8 << 20;
    lim.max_steps = 20000;
    lim.max_depth = 64;
    rc = jinja_render_ex(t, context, &lim, &out, &out_len, err,
                         sizeof(err));
    if (rc == 0 && strlen(out) > out_len) {
        abort();
    }
    /* with taint tracking: the same result, the same text, and spans
       sorted, disjoint and inside it */
    rc2 = jinja_render_spans(t, context, trusted, &lim, &out2, &out2_len,
                             &spans, &n_spans, err, sizeof(err));
    if (rc2 != rc && (rc2 == 0 || strstr(err, "memory") == NULL)) {
        abort();
    }
    if (rc == 0 && rc2 == 0) {
        if (out2_len != out_len || memcmp(out, out2, out_len) != 0) {
            abort();
        }
        for (size_t i = 0; i < n_spans; i++) {
            if (spans[i].start >= spans[i].end || spans[i].end > out_len
                || (i > 0 && spans[i - 1].end >= spans[i].start))
            {
                abort();
            }
        }
    }
    if (rc == 0) {
        free(out);
    }
    if (rc2 == 0) {
        free(out2);
        free(spans);
    }
    jinja_free(t);
    return 0;
}
