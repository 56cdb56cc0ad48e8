/*
 * libFuzzer harness for chat-template rendering: the input is a JSON
 * conversation (an array of messages, or an object with "messages" and
 * "tools"), rendered through real templates as the module renders them
 * (jinja_chat_context, then jinja_render_spans with its limits). The first
 * byte picks the template, the second add_generation_prompt; the rest is
 * the JSON text.
 *
 *   FIXTURES=~/.cache/ngx_llm/fixtures build/fuzz/fuzz_chat fuzz/corpus/chat
 *
 * Beyond "no crash": a render that succeeds gives the same text as
 * jinja_render_ex() byte for byte, its request spans are sorted, disjoint,
 * non-adjacent and inside the text; a failure says why.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/jinja.h"

/* the SmolLM2 one from t/data (as FUZZ_TEMPLATES_DATA), the others from
   the fixtures: tools, thinking, strict role order, system folding */
static const char *const  tmpl_names[] = {
    "t/data/templates/SmolLM2-135M-Instruct.jinja",
    "llama.cpp/templates/meta-llama-Llama-3.1-8B-Instruct.jinja",
    "llama.cpp/templates/Qwen-Qwen2.5-7B-Instruct.jinja",
    "llama.cpp/templates/Qwen-Qwen3-0.6B.jinja",
    "llama.cpp/templates/NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
    "llama.cpp/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "llama.cpp/templates/google-gemma-2-2b-it.jinja",
    "llama.cpp/templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    "llama.cpp/templates/microsoft-Phi-3.5-mini-instruct.jinja",
};

#define N_TMPL  (sizeof(tmpl_names) / sizeof(tmpl_names[0]))

static jinja_tmpl  *tmpls[N_TMPL];
static cJSON       *special;

static const char *const  trusted[] = { "bos_token", "eos_token", NULL };


static jinja_tmpl *
load(const char *path)
{
    char        err[256], *src;
    long        n;
    FILE       *f;
    jinja_tmpl *t;

    f = fopen(path, "rb");
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0) {
        fprintf(stderr, "fuzz_chat: cannot read %s\n", path);
        exit(1);
    }
    rewind(f);
    src = malloc((size_t) n + 1);
    if (fread(src, 1, (size_t) n, f) != (size_t) n) {
        fprintf(stderr, "fuzz_chat: cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    t = jinja_parse(src, (size_t) n, err, sizeof(err));
    free(src);
    if (t == NULL) {
        fprintf(stderr, "fuzz_chat: %s: %s\n", path, err);
        exit(1);
    }
    return t;
}


int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char         path[4096];
    size_t       i;
    const char  *fixtures = getenv("FIXTURES");
    const char  *top = getenv("FUZZ_TOP");

    (void) argc;
    (void) argv;
    if (fixtures == NULL || fixtures[0] == '\0') {
        fprintf(stderr, "fuzz_chat: FIXTURES is not set (the folder make "
                "deps fills; make fuzz sets it)\n");
        exit(1);
    }
    for (i = 0; i < N_TMPL; i++) {
        if (strncmp(tmpl_names[i], "t/", 2) == 0) {
            /* the repository's own: from FUZZ_TOP, else the current folder */
            snprintf(path, sizeof(path), "%s/%s", top ? top : ".",
                     tmpl_names[i]);
        } else {
            snprintf(path, sizeof(path), "%s/%s", fixtures, tmpl_names[i]);
        }
        tmpls[i] = load(path);
    }
    special = cJSON_CreateObject();
    cJSON_AddStringToObject(special, "bos_token", "<s>");
    cJSON_AddStringToObject(special, "eos_token", "</s>");
    return 0;
}


static void
check_spans(const jinja_span *sp, size_t n, size_t out_len)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        if (sp[i].start >= sp[i].end || sp[i].end > out_len
            || (i > 0 && sp[i].start <= sp[i - 1].end))
        {
            fprintf(stderr, "fuzz_chat: span %zu [%zu, %zu) of %zu bytes "
                    "is out of order or range\n", i, sp[i].start, sp[i].end,
                    out_len);
            abort();
        }
    }
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int            rc, rc2;
    char           err[256], err2[256], *out, *out2;
    size_t         out_len, out2_len, n_spans;
    cJSON         *json, *messages, *tools, *ctx;
    jinja_span    *spans;
    jinja_limits   lim;
    jinja_tmpl    *t;

    if (size < 2) {
        return 0;
    }
    t = tmpls[data[0] % N_TMPL];
    json = cJSON_ParseWithLength((const char *) data + 2, size - 2);
    if (json == NULL) {
        return 0;
    }
    if (cJSON_IsArray(json)) {
        messages = json;
        tools = NULL;
    } else {
        messages = cJSON_GetObjectItemCaseSensitive(json, "messages");
        tools = cJSON_GetObjectItemCaseSensitive(json, "tools");
    }
    ctx = jinja_chat_context(messages, tools, data[1] & 1, special, NULL);
    if (ctx == NULL) {
        cJSON_Delete(json);
        return 0;
    }

    lim = jinja_limits_default();
    err[0] = err2[0] = '\0';
    spans = NULL;
    n_spans = 0;
    rc = jinja_render_spans(t, ctx, trusted, &lim, &out, &out_len, &spans,
                            &n_spans, err, sizeof(err));
    rc2 = jinja_render_ex(t, ctx, &lim, &out2, &out2_len, err2, sizeof(err2));

    if (rc != rc2) {
        fprintf(stderr, "fuzz_chat: render with spans %d, without %d (%s%s)\n",
                rc, rc2, err, err2);
        abort();
    }
    if (rc == 0) {
        if (out_len != out2_len || memcmp(out, out2, out_len) != 0) {
            fprintf(stderr, "fuzz_chat: the texts with and without spans "
                    "differ\n");
            abort();
        }
        check_spans(spans, n_spans, out_len);
        free(out);
        free(out2);
        free(spans);

    } else if (err[0] == '\0') {
        fprintf(stderr, "fuzz_chat: a failed render without a message\n");
        abort();
    }

    cJSON_Delete(ctx);
    cJSON_Delete(json);
    return 0;
}
