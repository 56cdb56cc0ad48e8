/*
 * libFuzzer harness for the Jinja subset: parse arbitrary bytes as a
 * template and, when it parses, render it against a small chat context
 * with tight limits. Anything but a clean result or a clean error (a crash,
 * a leak, an overflow, a hang past the limits) is a bug.
 *
 *   make fuzz-smoke            (every harness, FUZZ_SECS=30 each)
 *   build/fuzz/fuzz_jinja -max_total_time=60 fuzz/corpus/jinja
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/jinja.h"

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
    char          err[256], *out;
    size_t        out_len;
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
    if (jinja_render_ex(t, context, &lim, &out, &out_len, err,
                        sizeof(err)) == 0) {
        if (strlen(out) > out_len) {
            abort();
        }
        free(out);
    }
    jinja_free(t);
    return 0;
}
