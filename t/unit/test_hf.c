/*
 * Hugging Face directories and architecture quirks.
 *
 *   1. safetensors headers: a valid file parses; each fault gives one
 *      message naming the file (and the tensor); no prefix of a real file
 *      parses or crashes.
 *   2. config.json refusals: what the engine does not implement is an
 *      error naming it (rope scaling types, per-layer sliding windows,
 *      architectures), never a silently wrong model.
 *   3. Both formats, one model: each tiny model of t/data/models loaded as
 *      a HF directory and as its GGUF conversion (written by
 *      tools/oracle.py, llama Q/K permuted to Meta order) gives the same
 *      logits, and the same as sharded safetensors and a directory fd.
 *   4. Dropping a quirk fails: with QKV bias, QK-norm, llama3 rope scaling,
 *      the rotate-half layout, the sliding window or byte fallback taken
 *      out, the logits (or prompt ids) leave the golden's tolerance by far.
 *   5. The chat template of tokenizer_config.json renders the golden's
 *      chat prompt byte for byte (HF's apply_chat_template output).
 *
 * Goldens (t/data/golden/hf-*.json) come from transformers in fp32 on the
 * directories; tolerance 0.01 in logits (weights are F32/F16/BF16 used as
 * stored; measured error ~5e-5).
 */
#define _GNU_SOURCE    /* O_PATH */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "tap.h"
#include "backend/backend.h"
#include "jinja/jinja.h"
#include "model/model.h"
#include "format/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/internal.h"      /* to take byte fallback away */

#define MODELS     "t/data/models"
#define GOLDENS    "t/data/golden"
#define TOL        0.01
#define MAX_IDS    1024


/* ---- helpers ---------------------------------------------------------------- */

static int
spit(const char *path, const void *data, size_t len)
{
    FILE  *f = fopen(path, "wb");
    int    rc;

    if (f == NULL) {
        return -1;
    }
    rc = fwrite(data, 1, len, f) == len ? 0 : -1;
    fclose(f);
    return rc;
}


static cJSON *
golden(const char *name)
{
    char    path[256], *text;
    cJSON  *g;

    snprintf(path, sizeof(path), "%s/%s.json", GOLDENS, name);
    text = tap_slurp(path, NULL);
    g = text ? cJSON_Parse(text) : NULL;
    free(text);
    return g;
}


static const cJSON *
golden_case(const cJSON *g, const char *name)
{
    const cJSON  *c;

    cJSON_ArrayForEach(c, cJSON_GetObjectItem(g, "cases")) {
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "name")),
                   name) == 0)
        {
            return c;
        }
    }
    return NULL;
}


static int
json_ids(const cJSON *arr, int32_t *out, int max)
{
    const cJSON  *v;
    int           n = 0;

    cJSON_ArrayForEach(v, arr) {
        if (n < max) {
            out[n++] = (int32_t) v->valuedouble;
        }
    }
    return n;
}


/* logits of the last of n tokens, one prefill; 0 on success */
static int
last_logits(const llm_model *m, const int32_t *ids, int n, float *out)
{
    llm_backend_options   o;
    llm_backend          *be;
    llm_batch             b;
    int32_t              *pos, *seq, *table, last = n - 1, i, n_blocks;
    const int32_t        *tables[1];
    char                  err[512];
    int                   rc;

    llm_backend_options_default(&o, m);
    o.n_threads = 1;
    be = llm_backend_create("cpu", m, &o, err, sizeof(err));
    if (be == NULL) {
        printf("# %s\n", err);
        return -1;
    }
    pos = malloc(n * sizeof(int32_t));
    seq = calloc(n, sizeof(int32_t));
    n_blocks = be->opt.kv_n_blocks;
    table = malloc(n_blocks * sizeof(int32_t));
    for (i = 0; i < n; i++) {
        pos[i] = i;
    }
    for (i = 0; i < n_blocks; i++) {
        table[i] = i;
    }
    tables[0] = table;
    memset(&b, 0, sizeof(b));
    b.n_tokens = n;
    b.token = ids;
    b.pos = pos;
    b.seq = seq;
    b.n_seqs = 1;
    b.block_table = tables;
    b.n_blocks = &n_blocks;
    b.n_logits = 1;
    b.logit_idx = &last;
    b.logits = out;
    rc = llm_backend_forward(be, &b);
    if (rc != 0) {
        printf("# forward: %s\n", be->err);
    }
    llm_backend_free(be);
    free(pos);
    free(seq);
    free(table);
    return rc;
}


/* max |logit - golden| over the golden case's top-20 ids; -1 on failure */
static double
golden_diff(const llm_model *m, const cJSON *c)
{
    int32_t        ids[MAX_IDS];
    float         *logits = malloc(m->cfg.vocab_size * sizeof(float));
    const cJSON   *pair;
    double         worst = 0, d;
    int            n;

    n = json_ids(cJSON_GetObjectItem(c, "prompt_ids"), ids, MAX_IDS);
    if (logits == NULL || last_logits(m, ids, n, logits) != 0) {
        free(logits);
        return -1;
    }
    cJSON_ArrayForEach(pair, cJSON_GetObjectItem(c, "top_logits")) {
        int id = (int) cJSON_GetArrayItem(pair, 0)->valuedouble;
        d = fabs(logits[id] - cJSON_GetArrayItem(pair, 1)->valuedouble);
        worst = d > worst ? d : worst;
    }
    free(logits);
    return worst;
}


/* ---- 1. safetensors headers ------------------------------------------------- */

/* a file: 8-byte length, header padded with spaces, data */
static size_t
st_build(uint8_t *buf, const char *header, const void *data, size_t n_data)
{
    size_t  h = strlen(header), pad = (8 - h % 8) % 8, i;

    for (i = 0; i < 8; i++) {
        buf[i] = (uint8_t) ((h + pad) >> (8 * i));
    }
    memcpy(buf + 8, header, h);
    memset(buf + 8 + h, ' ', pad);
    memcpy(buf + 8 + h + pad, data, n_data);
    return 8 + h + pad + n_data;
}


static void
st_expect_fault(const char *header, size_t n_data, const char *want,
    const char *what)
{
    static uint8_t  data[256], buf[4096];
    st_file         f;
    size_t          len = st_build(buf, header, data, n_data);
    int             rc = st_parse(&f, buf, len, "x.safetensors");

    ok(rc == -1 && strncmp(f.err, "x.safetensors: ", 15) == 0
       && strstr(f.err, want) != NULL, "safetensors: %s -> \"%s\"", what,
       f.err);
    st_close(&f);
}


static void
test_safetensors(void)
{
    static const float  w[6] = { 1, 2, 3, 4, 5, 6 };
    uint8_t             buf[4096], *copy;
    const st_tensor    *t;
    st_file             f;
    size_t              len, i;
    int                 bad = 0;

    len = st_build(buf, "{\"__metadata__\":{\"format\":\"pt\"},"
                   "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],"
                   "\"data_offsets\":[16,24]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],"
                   "\"data_offsets\":[0,16]}}", w, 24);
    ok(st_parse(&f, buf, len, "ok.safetensors") == 0, "valid file parses%s%s",
       f.err[0] ? ": " : "", f.err);
    t = st_find(&f, "a");
    ok(f.n_tensors == 2 && t != NULL && t->type == 0 && t->n_dims == 2
       && t->shape[0] == 2 && t->shape[1] == 2 && t->nbytes == 16
       && ((const float *) t->data)[3] == 4.0f,
       "F32 [2,2] tensor 'a' in place");
    t = st_find(&f, "b");
    ok(t != NULL && t->type == 30 && t->shape[0] == 4
       && (const uint8_t *) t->data == (const uint8_t *) st_find(&f, "a")->data
                                       + 16,
       "BF16 [4] tensor 'b' after it (ggml type 30)");
    ok(st_find(&f, "__metadata__") == NULL && st_find(&f, "c") == NULL,
       "__metadata__ is no tensor");
    st_close(&f);

    st_expect_fault("{\"a\":{\"dtype\":\"I8\",\"shape\":[4],"
                    "\"data_offsets\":[0,4]}}", 4,
                    "tensor 'a': dtype I8 is not supported", "dtype");
    st_expect_fault("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],"
                    "\"data_offsets\":[0,8]}}", 8,
                    "tensor 'a': 8 bytes of data for a F32 shape of 3",
                    "shape vs bytes");
    st_expect_fault("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],"
                    "\"data_offsets\":[0,16]}}", 8,
                    "tensor 'a': data_offsets end 16 is past the data",
                    "offsets past the end");
    st_expect_fault("{\"a\":{\"dtype\":\"F16\",\"shape\":[4],"
                    "\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F16\","
                    "\"shape\":[2],\"data_offsets\":[4,8]}}", 8,
                    "(overlap)", "overlapping tensors");
    st_expect_fault("{\"a\":{\"dtype\":\"F16\",\"shape\":[2],"
                    "\"data_offsets\":[4,8]}}", 8, "(hole)", "hole");
    st_expect_fault("{\"a\":{\"dtype\":\"F16\",\"shape\":[2],"
                    "\"data_offsets\":[0,4]}}", 8,
                    "tensors cover 4 of the 8 data bytes", "unused bytes");
    st_expect_fault("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
                    "\"data_offsets\":[2,6]},\"b\":{\"dtype\":\"F16\","
                    "\"shape\":[1],\"data_offsets\":[0,2]}}", 6,
                    "tensor 'a': data at file offset", "misaligned F32");
    st_expect_fault("{\"a\":{\"dtype\":\"F16\",\"shape\":[1],"
                    "\"data_offsets\":[0,2]},\"a\":{\"dtype\":\"F16\","
                    "\"shape\":[1],\"data_offsets\":[2,4]}}", 4,
                    "tensor 'a' is listed twice", "duplicate name");
    st_expect_fault("{\"a\":{\"dtype\":\"F16\",\"shape\":[-1],"
                    "\"data_offsets\":[0,2]}}", 2,
                    "shape[0] is not a non-negative integer", "negative dim");
    st_expect_fault("{\"a\":{\"dtype\":\"F16\",\"shape\":[1,1,1,1,1],"
                    "\"data_offsets\":[0,2]}}", 2, "5 dimensions",
                    "too many dims");
    st_expect_fault("{\"a\":{\"dtype\":\"F16\"}}", 0,
                    "needs \"dtype\" (string), \"shape\"", "missing fields");
    st_expect_fault("{\"a\":1", 0, "header is not a JSON object",
                    "broken JSON");
    st_expect_fault("{\"a\":{\"dtype\":\"F16\",\"shape\":[4294967296,"
                    "4294967296],\"data_offsets\":[0,2]}}", 2,
                    "shape overflows", "element count overflow");

    buf[0] = 0xff;
    buf[7] = 0x7f;
    ok(st_parse(&f, buf, 64, "big.safetensors") == -1
       && strstr(f.err, "big.safetensors: header length") == f.err,
       "huge header length -> \"%s\"", f.err);
    st_close(&f);

    /* every prefix of a real file fails cleanly */
    copy = (uint8_t *) tap_slurp(MODELS "/hf-qwen3/model.safetensors", &len);
    for (i = 0; copy != NULL && i < len; i += 1 + i / 16) {
        if (st_parse(&f, copy, i, "cut") != -1 || f.err[0] == '\0') {
            bad++;
        }
        st_close(&f);
    }
    ok(copy != NULL && bad == 0, "no prefix of hf-qwen3's safetensors "
       "parses (%d did)", bad);
    free(copy);

    ok(st_open(&f, "/nonexistent/m.safetensors") == -1
       && strstr(f.err, "/nonexistent/m.safetensors: cannot open") == f.err,
       "missing file -> \"%s\"", f.err);
    st_close(&f);
}


/* ---- 2. config.json refusals ------------------------------------------------ */

/* dir with hf-qwen2's files (symlinked), config.json edited: set key to
 * the JSON value (or remove it when value is NULL) */
static int
make_variant(const char *dir, const char *src, const char *key,
    const char *value)
{
    static const char  *files[] = { "model.safetensors", "tokenizer.json",
                                    "tokenizer_config.json" };
    char                a[1024], b[1024], cwd[512], *text, *out;
    cJSON              *cfg;
    size_t              i;

    mkdir(dir, 0700);
    if (getcwd(cwd, sizeof(cwd)) == NULL) {
        return -1;
    }
    for (i = 0; i < 3; i++) {
        snprintf(a, sizeof(a), "%s/%s/%s", cwd, src, files[i]);
        snprintf(b, sizeof(b), "%s/%s", dir, files[i]);
        unlink(b);
        if (symlink(a, b) != 0) {
            return -1;
        }
    }
    snprintf(a, sizeof(a), "%s/config.json", src);
    text = tap_slurp(a, NULL);
    cfg = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (cfg == NULL) {
        return -1;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(cfg, key);
    if (value != NULL) {
        cJSON_AddItemToObject(cfg, key, cJSON_Parse(value));
    }
    out = cJSON_Print(cfg);
    cJSON_Delete(cfg);
    snprintf(b, sizeof(b), "%s/config.json", dir);
    i = spit(b, out, strlen(out));
    free(out);
    return (int) i;
}


static void
expect_refusal_of(const char *src, const char *dir, const char *key,
    const char *value, const char *want)
{
    llm_model  m;

    if (make_variant(dir, src, key, value) != 0) {
        ok(0, "variant with %s = %s", key, value ? value : "(none)");
        return;
    }
    ok(llm_model_load(&m, dir, 0, 1) == -1 && strstr(m.err, dir) == m.err
       && strstr(m.err, want) != NULL, "%s = %s -> \"%s\"", key,
       value ? value : "(removed)", m.err);
    llm_model_free(&m);
}


static void
expect_refusal(const char *dir, const char *key, const char *value,
    const char *want)
{
    expect_refusal_of(MODELS "/hf-qwen2", dir, key, value, want);
}


static void
test_refusals(const char *tmp)
{
    char        dir[512];
    llm_model   m;

    snprintf(dir, sizeof(dir), "%s/variant", tmp);
    expect_refusal(dir, "rope_parameters",
                   "{\"rope_type\":\"dynamic\",\"factor\":4.0,"
                   "\"rope_theta\":10000.0}",
                   "rope scaling type \"dynamic\" is not supported");
    expect_refusal(dir, "rope_parameters",
                   "{\"rope_type\":\"yarn\",\"factor\":4.0,"
                   "\"rope_theta\":10000.0}",
                   "\"original_max_position_embeddings\" is missing");
    expect_refusal(dir, "rope_parameters",
                   "{\"rope_type\":\"yarn\",\"factor\":4.0,"
                   "\"original_max_position_embeddings\":16,\"mscale\":1,"
                   "\"mscale_all_dim\":1,\"rope_theta\":10000.0}",
                   "yarn rope scaling with mscale or mscale_all_dim is not "
                   "supported");
    expect_refusal(dir, "use_sliding_window", "true",
                   "use_sliding_window (per-layer windows) is not "
                   "supported");
    expect_refusal(dir, "model_type", "\"gemma2\"",
                   "model_type \"gemma2\" is not supported");
    /* gpt-oss: what the kernels do not implement, and bf16 experts */
    expect_refusal_of(MODELS "/hf-gptoss", dir, "swiglu_limit", "8.0",
                      "swiglu_limit must be 7");
    expect_refusal_of(MODELS "/hf-gptoss", dir, "layer_types",
                      "[\"full_attention\",\"sliding_attention\"]",
                      "layer_types[0] is not \"sliding_attention\"");
    expect_refusal_of(MODELS "/hf-gptoss", dir, "quantization_config",
                      "{\"quant_method\":\"fp8\"}",
                      "quantization_config other than mxfp4");
    expect_refusal_of(MODELS "/hf-gptoss", dir, "num_local_experts", "4",
                      "mlp.experts.gate_up_proj_blocks': expected U8 of "
                      "shape");
    /* transformers' unquantized experts (E, dim, 2ff): refused by name */
    if (make_variant(dir, MODELS "/hf-gptoss", "model_type", "\"gpt_oss\"")
        == 0)
    {
        /* the data from a buffer of its own: st_build copies it into
           buf after the header (a source inside buf overlapped) */
        static uint8_t        buf[8 + 256 + 2 * 8 * 64 * 128];
        static const uint8_t  zeros[2 * 8 * 64 * 128];
        char                  path[600];
        size_t                n = st_build(buf, "{\"model.layers.0.mlp."
                                           "experts.gate_up_proj\":{\"dtype"
                                           "\":\"BF16\",\"shape\":[8,64,"
                                           "128],\"data_offsets\":[0,"
                                           "131072]}}", zeros, sizeof(zeros));

        snprintf(path, sizeof(path), "%s/model.safetensors", dir);
        unlink(path);
        ok(spit(path, buf, n) == 0 && llm_model_load(&m, dir, 0, 1) == -1
           && strstr(m.err, "unquantized experts are not supported")
              != NULL, "gpt_oss bf16 experts -> \"%s\"", m.err);
        llm_model_free(&m);
        unlink(path);
    }
    ok(llm_model_load(&m, MODELS "/hf-gptoss", 0, 2) == -1
       && strstr(m.err, "tensor parallelism is not implemented") != NULL,
       "gpt_oss at tp 2 -> \"%s\"", m.err);
    llm_model_free(&m);
    expect_refusal(dir, "hidden_act", "\"gelu\"", "hidden_act must be");
    expect_refusal(dir, "num_hidden_layers", NULL,
                   "config.json: \"num_hidden_layers\" is missing");
    expect_refusal(dir, "vocab_size", "600",
                   "vocab_size 600 but embed_tokens has 603 rows");
    expect_refusal(dir, "hidden_size", "32", "token_embd.weight");
    expect_refusal(dir, "tie_word_embeddings", "false",
                   "tie_word_embeddings is false but lm_head.weight is "
                   "missing");
    /* a qwen2 file read as llama: its biases are no llama tensors */
    expect_refusal(dir, "model_type", "\"llama\"",
                   "model.safetensors: tensor "
                   "'model.layers.0.self_attn.k_proj.bias' is not part of "
                   "a llama model");

    /* mixture of experts (qwen3_moe) */
    expect_refusal_of(MODELS "/hf-qwen3moe", dir, "num_experts_per_tok",
                      "9", "9 used per token (1..experts)");
    expect_refusal_of(MODELS "/hf-qwen3moe", dir, "mlp_only_layers", "[1]",
                      "dense layers among the MoE layers");
    expect_refusal_of(MODELS "/hf-qwen3moe", dir, "num_local_experts", "4",
                      "tensor 'model.layers.0.mlp.experts.4.down_proj."
                      "weight' is not part of a qwen3_moe model");
    expect_refusal_of(MODELS "/hf-qwen3moe", dir, "moe_intermediate_size",
                      "16", "blk.0.ffn_gate_exps.0.weight': expected shape "
                      "[64, 16]");
    expect_refusal_of(MODELS "/hf-qwen3moe", dir, "num_local_experts",
                      NULL, "\"num_local_experts\" is missing");
    ok(llm_model_load(&m, MODELS "/hf-qwen3moe", 0, 2) == -1
       && strstr(m.err, "tensor parallelism is not implemented for "
                 "mixture-of-experts") != NULL, "qwen3_moe at tp 2 -> "
       "\"%s\"", m.err);
    llm_model_free(&m);

    ok(llm_model_load(&m, tmp, 0, 1) == -1
       && strstr(m.err, "config.json: cannot open") != NULL,
       "directory without config.json -> \"%s\"", m.err);
    llm_model_free(&m);
}


/* dir/model.safetensors: hf-gemma3's tensors renamed as a multimodal
 * gemma3 checkpoint names them (prefix replaces "model."), plus a vision
 * tower tensor; 0 on success */
static int
write_gemma3_multimodal(const char *dir, const char *prefix)
{
    static const float  vision[2] = { 1.0f, 2.0f };
    st_file             f;
    cJSON              *h = cJSON_CreateObject(), *e;
    uint64_t            off = 0, i, hl;
    uint8_t            *data, len8[8];
    char                path[1024], name[256], *text;
    double              sh[ST_MAX_DIMS];
    uint32_t            k;
    FILE               *out;

    if (st_open(&f, MODELS "/hf-gemma3/model.safetensors") != 0) {
        cJSON_Delete(h);
        return -1;
    }
    data = malloc(f.size + sizeof(vision));
    for (i = 0; data != NULL && i <= f.n_tensors; i++) {
        const st_tensor *t = i < f.n_tensors ? &f.tensors[i] : NULL;

        if (t == NULL) {
            snprintf(name, sizeof(name), "vision_tower.patch.weight");
        } else if (strncmp(t->name, "model.", 6) == 0) {
            snprintf(name, sizeof(name), "%s%s", prefix, t->name + 6);
        } else {
            snprintf(name, sizeof(name), "%s", t->name);
        }
        e = cJSON_AddObjectToObject(h, name);
        cJSON_AddStringToObject(e, "dtype", t == NULL || t->type == 0 ? "F32"
                                : t->type == 1 ? "F16" : "BF16");
        for (k = 0; t != NULL && k < t->n_dims; k++) {
            sh[k] = (double) t->shape[k];
        }
        if (t == NULL) {
            sh[0] = 2;
        }
        cJSON_AddItemToObject(e, "shape", cJSON_CreateDoubleArray(sh,
                                  t ? (int) t->n_dims : 1));
        sh[0] = (double) off;
        sh[1] = (double) (off + (t ? t->nbytes : sizeof(vision)));
        cJSON_AddItemToObject(e, "data_offsets",
                              cJSON_CreateDoubleArray(sh, 2));
        memcpy(data + off, t ? t->data : (const void *) vision,
               t ? t->nbytes : sizeof(vision));
        off += t ? t->nbytes : sizeof(vision);
    }
    text = cJSON_PrintUnformatted(h);
    hl = strlen(text);
    for (i = 0; i < 8; i++) {
        len8[i] = (uint8_t) (((hl + 7) / 8 * 8) >> (8 * i));
    }
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    unlink(path);
    out = data ? fopen(path, "wb") : NULL;
    if (out != NULL) {
        fwrite(len8, 1, 8, out);
        fwrite(text, 1, hl, out);
        fwrite("        ", 1, (8 - hl % 8) % 8, out);
        fwrite(data, 1, off, out);
        fclose(out);
    }
    free(text);
    free(data);
    cJSON_Delete(h);
    st_close(&f);
    return out != NULL ? 0 : -1;
}


/* hf-gemma3's config.json rewritten: as transformers 4 writes it (rope_theta,
 * rope_local_base_freq, rope_scaling, sliding_window_pattern instead of
 * rope_parameters and layer_types), or nested as a multimodal gemma3's
 * text_config; either gives the golden logits. Then gemma3's refusals. */
static void
test_gemma3_configs(const char *tmp)
{
    static const char  *names[] = {
        "with transformers 4's keys", "nested in text_config",
        "multimodal, tensors under language_model.model. (transformers 4)",
        "multimodal, tensors under model.language_model. (5)",
    };
    char          dir[512], path[1024], *text, *out;
    cJSON        *cfg, *root, *g = golden("hf-gemma3");
    const cJSON  *c = golden_case(g, "plain");
    llm_model     m;
    double        d;
    int           form;

    snprintf(dir, sizeof(dir), "%s/gemma3", tmp);
    for (form = 0; form < 4; form++) {
        if (make_variant(dir, MODELS "/hf-gemma3", "rope_parameters", NULL)
            != 0
            || (form >= 2
                && write_gemma3_multimodal(dir, form == 2
                                           ? "language_model.model."
                                           : "model.language_model.") != 0))
        {
            ok(0, "gemma3 variant");
            continue;
        }
        snprintf(path, sizeof(path), "%s/hf-gemma3/config.json", MODELS);
        text = tap_slurp(path, NULL);
        cfg = text ? cJSON_Parse(text) : NULL;
        free(text);
        if (cfg == NULL) {
            ok(0, "hf-gemma3 config.json parses");
            continue;
        }
        if (form == 0) {
            cJSON_DeleteItemFromObjectCaseSensitive(cfg, "rope_parameters");
            cJSON_DeleteItemFromObjectCaseSensitive(cfg, "layer_types");
            cJSON_AddNumberToObject(cfg, "rope_theta", 1000000.0);
            cJSON_AddNumberToObject(cfg, "rope_local_base_freq", 10000.0);
            cJSON_AddNumberToObject(cfg, "sliding_window_pattern", 2);
            cJSON_AddItemToObject(cfg, "rope_scaling", cJSON_Parse(
                "{\"rope_type\":\"linear\",\"factor\":8.0}"));
            root = cfg;
        } else {
            root = cJSON_CreateObject();
            cJSON_AddStringToObject(root, "model_type", "gemma3");
            cJSON_AddItemToObject(root, "text_config", cfg);
        }
        out = cJSON_Print(root);
        cJSON_Delete(root);
        snprintf(path, sizeof(path), "%s/config.json", dir);
        spit(path, out, strlen(out));
        free(out);
        if (!ok(llm_model_load(&m, dir, 0, 1) == 0, "gemma3 %s loads",
                names[form]))
        {
            printf("# %s\n", m.err);
            llm_model_free(&m);
            continue;
        }
        d = golden_diff(&m, c);
        ok(d >= 0 && d <= TOL && m.cfg.swa_pattern == 2
           && m.cfg.rope_linear == 8.0f && m.cfg.rope_theta_local == 10000.0f,
           "gemma3 %s: the golden logits (%.2g)", names[form], d);
        llm_model_free(&m);
    }
    cJSON_Delete(g);
}


static void
expect_gemma3_refusal(const char *dir, const char *key, const char *value,
    const char *want)
{
    llm_model  m;

    if (make_variant(dir, MODELS "/hf-gemma3", key, value) != 0) {
        ok(0, "variant with %s = %s", key, value ? value : "(none)");
        return;
    }
    ok(llm_model_load(&m, dir, 0, 1) == -1 && strstr(m.err, want) != NULL,
       "gemma3 %s = %s -> \"%s\"", key, value ? value : "(removed)",
       m.err);
    llm_model_free(&m);
}


static void
test_gemma3_refusals(const char *tmp)
{
    char  dir[512];

    snprintf(dir, sizeof(dir), "%s/gemma3r", tmp);
    expect_gemma3_refusal(dir, "final_logit_softcapping", "30.0",
                          "softcapping are not supported");
    expect_gemma3_refusal(dir, "hidden_activation", "\"gelu\"",
                          "must be \"gelu_pytorch_tanh\"");
    expect_gemma3_refusal(dir, "layer_types",
                          "[\"full_attention\",\"sliding_attention\"]",
                          "not a global layer every 1");
    expect_gemma3_refusal(dir, "rope_parameters",
                          "{\"full_attention\":{\"rope_type\":\"yarn\","
                          "\"factor\":8.0}}",
                          "full_attention rope type \"yarn\" is not "
                          "supported");
}


/* ---- 3. both formats, one model --------------------------------------------- */

static const char *hf_names[] = {
    "hf-llama", "hf-llama3", "hf-mistral", "hf-qwen2", "hf-qwen3",
    "hf-gemma3", "hf-qwen3moe", "hf-qwen3moe-nonorm", "hf-qwen2-yarn",
};


/* max |a - b| over the vocabulary for the golden's "plain" prompt */
static double
format_diff(const llm_model *a, const llm_model *b, const cJSON *c)
{
    int32_t   ids[MAX_IDS];
    int       n = json_ids(cJSON_GetObjectItem(c, "prompt_ids"), ids, MAX_IDS);
    int       i, v = a->cfg.vocab_size;
    float    *la = malloc(v * sizeof(float)), *lb = malloc(v * sizeof(float));
    double    worst = -1;

    if (la != NULL && lb != NULL && v == b->cfg.vocab_size
        && last_logits(a, ids, n, la) == 0 && last_logits(b, ids, n, lb) == 0)
    {
        worst = 0;
        for (i = 0; i < v; i++) {
            double d = fabs(la[i] - lb[i]);
            worst = d > worst ? d : worst;
        }
    }
    free(la);
    free(lb);
    return worst;
}


/* hf-gptoss: both formats, the same MXFP4 blocks (the directory's
 * repacked at load, the GGUF's as written), so the same logits */
static void
test_gptoss_formats(void)
{
    llm_model     hf, gg;
    cJSON        *g = golden("hf-gptoss");
    const cJSON  *c = golden_case(g, "plain");
    double        d = -1;
    int           i, same = 1;

    if (llm_model_load(&hf, MODELS "/hf-gptoss", 0, 1) != 0
        || llm_model_load(&gg, MODELS "/hf-gptoss.gguf", 0, 1) != 0)
    {
        printf("# %s / %s\n", hf.err, gg.err);
    } else {
        d = format_diff(&hf, &gg, c);
        for (i = 0; i < hf.cfg.n_layers; i++) {
            const llm_tensor *a = &hf.layers[i].exp_up[3];
            const llm_tensor *b = &gg.layers[i].exp_up[3];

            same &= a->type == GGML_TYPE_MXFP4 && b->type == a->type
                    && memcmp(a->data, b->data, a->rows * a->row_stride)
                       == 0;
        }
    }
    ok(same && hf.cfg.swa_pattern == 2 && gg.cfg.swa_pattern == 2
       && hf.cfg.rope_neox && gg.cfg.rope_neox && !hf.cfg.rope_yarn_truncate
       && !gg.cfg.rope_yarn_truncate && hf.cfg.sliding_window == 12
       && gg.cfg.sliding_window == 12,
       "hf-gptoss: the directory's *_blocks repacked == the GGUF's MXFP4 "
       "bytes; window 12 on every second layer, rotate-half, yarn not "
       "truncated, in both");
    ok(d == 0, "hf-gptoss: HF directory == GGUF over the whole vocabulary "
       "(max |dlogit| %.2g)", d);
    llm_model_free(&hf);
    llm_model_free(&gg);
    cJSON_Delete(g);
}


/* a copy of hf-llama3 with its weights in two shards and an index */
static int
make_sharded(const char *dir)
{
    st_file          f;
    cJSON           *h[2], *index, *map, *e;
    uint64_t         off[2] = { 0, 0 }, i;
    uint8_t         *data[2];
    char             path[1024], *text, name[2][48];
    int              s, rc = -1;
    size_t           hl;
    FILE            *out;

    if (st_open(&f, MODELS "/hf-llama3/model.safetensors") != 0) {
        return -1;
    }
    mkdir(dir, 0700);
    index = cJSON_CreateObject();
    map = cJSON_AddObjectToObject(index, "weight_map");
    for (s = 0; s < 2; s++) {
        h[s] = cJSON_CreateObject();
        data[s] = malloc(f.size);
        snprintf(name[s], sizeof(name[s]), "model-0000%d-of-00002"
                 ".safetensors", s + 1);
    }
    for (i = 0; i < f.n_tensors; i++) {
        const st_tensor *t = &f.tensors[i];
        double           sh[ST_MAX_DIMS];
        uint32_t         k;

        s = strstr(t->name, "layers.1.") != NULL;  /* layer 1: shard 2 */
        e = cJSON_AddObjectToObject(h[s], t->name);
        cJSON_AddStringToObject(e, "dtype", t->type == 0 ? "F32"
                                : t->type == 1 ? "F16" : "BF16");
        for (k = 0; k < t->n_dims; k++) {
            sh[k] = (double) t->shape[k];
        }
        cJSON_AddItemToObject(e, "shape", cJSON_CreateDoubleArray(sh,
                                                                  t->n_dims));
        sh[0] = (double) off[s];
        sh[1] = (double) (off[s] + t->nbytes);
        cJSON_AddItemToObject(e, "data_offsets",
                              cJSON_CreateDoubleArray(sh, 2));
        memcpy(data[s] + off[s], t->data, t->nbytes);
        off[s] += t->nbytes;
        cJSON_AddStringToObject(map, t->name, name[s]);
    }
    for (s = 0; s < 2; s++) {
        uint8_t  len8[8];

        text = cJSON_PrintUnformatted(h[s]);
        hl = strlen(text);
        for (i = 0; i < 8; i++) {
            len8[i] = (uint8_t) (((hl + 7) / 8 * 8) >> (8 * i));
        }
        snprintf(path, sizeof(path), "%s/%s", dir, name[s]);
        out = fopen(path, "wb");
        if (out != NULL) {
            fwrite(len8, 1, 8, out);
            fwrite(text, 1, hl, out);
            fwrite("        ", 1, (8 - hl % 8) % 8, out);
            fwrite(data[s], 1, off[s], out);
            fclose(out);
        }
        free(text);
        free(data[s]);
        cJSON_Delete(h[s]);
    }
    text = cJSON_Print(index);
    snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
    rc = spit(path, text, strlen(text));
    free(text);
    cJSON_Delete(index);
    st_close(&f);
    if (rc == 0) {
        char src[1024], cwd[512];

        if (getcwd(cwd, sizeof(cwd)) == NULL) {
            return -1;
        }
        snprintf(src, sizeof(src), "%s/" MODELS "/hf-llama3/config.json",
                 cwd);
        snprintf(path, sizeof(path), "%s/config.json", dir);
        unlink(path);
        rc = symlink(src, path);
    }
    return rc;
}


static void
test_formats(const char *tmp)
{
    char          dir[512], gpath[512], sdir[512];
    llm_model     hf, gg, sh;
    cJSON        *g;
    const cJSON  *c;
    double        d;
    size_t        i;
    int           fd;

    for (i = 0; i < sizeof(hf_names) / sizeof(hf_names[0]); i++) {
        snprintf(dir, sizeof(dir), "%s/%s", MODELS, hf_names[i]);
        snprintf(gpath, sizeof(gpath), "%s/%s.gguf", MODELS, hf_names[i]);
        g = golden(hf_names[i]);
        c = golden_case(g, "plain");
        if (!ok(llm_model_load(&hf, dir, 0, 1) == 0 && hf.hf
                && llm_model_load(&gg, gpath, 0, 1) == 0 && !gg.hf && c,
                "%s: directory and GGUF load", hf_names[i]))
        {
            printf("# %s / %s\n", hf.err, gg.err);
            llm_model_free(&hf);
            llm_model_free(&gg);
            cJSON_Delete(g);
            continue;
        }
        ok(hf.cfg.rope_neox == 1 && gg.cfg.rope_neox
           == (strncmp(hf.cfg.arch, "qwen", 4) == 0 || hf.cfg.gemma),
           "%s: rotate-half rope for HF, %s for its GGUF", hf_names[i],
           gg.cfg.rope_neox ? "too (qwen, gemma3)"
                            : "adjacent pairs (Meta order)");
        d = format_diff(&hf, &gg, c);
        ok(d >= 0 && d < 1e-3, "%s: HF directory == GGUF over the whole "
           "vocabulary (max |dlogit| %.2g)", hf_names[i], d);
        llm_model_free(&hf);
        llm_model_free(&gg);
        cJSON_Delete(g);
    }

    /* sharded + index, and a directory passed as an O_PATH descriptor */
    snprintf(sdir, sizeof(sdir), "%s/sharded", tmp);
    g = golden("hf-llama3");
    c = golden_case(g, "plain");
    ok(make_sharded(sdir) == 0, "two-shard copy of hf-llama3 written");
    if (llm_model_load(&sh, sdir, 0, 1) != 0) {
        printf("# %s\n", sh.err);
    }
    if (ok(sh.n_st == 2 && sh.layers != NULL, "sharded directory loads "
           "from %d files", sh.n_st))
    {
        d = golden_diff(&sh, c);
        ok(d >= 0 && d <= TOL, "sharded: golden logits within %g (%.2g)",
           TOL, d);
    }
    llm_model_free(&sh);
    fd = open(MODELS "/hf-llama3", O_PATH | O_DIRECTORY | O_CLOEXEC);
    ok(fd >= 0 && llm_model_load_fd(&sh, fd, "hf-llama3 (fd)", 0, 1) == 0
       && sh.hf, "directory descriptor (O_PATH) loads");
    d = golden_diff(&sh, c);
    ok(d >= 0 && d <= TOL, "by descriptor: golden logits within %g (%.2g)",
       TOL, d);
    llm_model_free(&sh);
    close(fd);
    cJSON_Delete(g);
}


/* ---- 4. dropping a quirk fails ---------------------------------------------- */

typedef enum {
    DROP_NONE, DROP_QKV_BIAS, DROP_QK_NORM, DROP_LLAMA3_ROPE,
    DROP_ROTATE_HALF, DROP_SLIDING_WINDOW,
    /* gemma3's */
    DROP_NORM_SHIFT, DROP_POST_NORMS, DROP_GEGLU, DROP_EMBD_SCALE,
    DROP_ATT_SCALE, DROP_LOCAL_ROPE, DROP_ROPE_LINEAR, DROP_GLOBAL_LAYERS,
    /* yarn's: the frequency ramp, the attention factor, truncation */
    DROP_YARN_RAMP, DROP_YARN_ATTN, DROP_YARN_NO_TRUNCATE,
    /* gpt-oss's */
    DROP_SINKS, DROP_O_BIAS, DROP_ROUTER_BIAS, DROP_EXPERT_BIAS,
    DROP_TOPK_SOFTMAX, DROP_SWIGLU_OAI, DROP_GATE_UP_ORDER,
} quirk;


/* a HF gemma3's norms are the model's float copies of 1 + w: back to w */
static void
unshift(const float *w, int n)
{
    float  *p = (float *) w;
    int     i;

    for (i = 0; p != NULL && i < n; i++) {
        p[i] -= 1.0f;
    }
}


static void
drop(llm_model *m, quirk q)
{
    int  i;

    for (i = 0; i < m->cfg.n_layers; i++) {
        if (q == DROP_QKV_BIAS) {
            m->layers[i].bq = m->layers[i].bk = m->layers[i].bv = NULL;
        }
        if (q == DROP_QK_NORM) {
            m->layers[i].q_norm = m->layers[i].k_norm = NULL;
        }
        if (q == DROP_SINKS) {
            m->layers[i].attn_sinks = NULL;
        }
        if (q == DROP_O_BIAS) {
            m->layers[i].bo = NULL;
        }
        if (q == DROP_ROUTER_BIAS) {
            m->layers[i].router_b = NULL;
        }
        if (q == DROP_EXPERT_BIAS) {
            m->layers[i].exp_gate_b = m->layers[i].exp_up_b = NULL;
            m->layers[i].exp_down_b = NULL;
        }
        if (q == DROP_GATE_UP_ORDER) {       /* gate = [..., 1::2] */
            llm_tensor *t = m->layers[i].exp_gate;
            const float *b = m->layers[i].exp_gate_b;

            m->layers[i].exp_gate = m->layers[i].exp_up;
            m->layers[i].exp_up = t;
            m->layers[i].exp_gate_b = m->layers[i].exp_up_b;
            m->layers[i].exp_up_b = b;
        }
        if (q == DROP_POST_NORMS) {
            m->layers[i].attn_post_norm = m->layers[i].ffn_post_norm = NULL;
        }
        if (q == DROP_NORM_SHIFT) {
            unshift(m->layers[i].attn_norm, m->cfg.dim);
            unshift(m->layers[i].ffn_norm, m->cfg.dim);
            unshift(m->layers[i].attn_post_norm, m->cfg.dim);
            unshift(m->layers[i].ffn_post_norm, m->cfg.dim);
            unshift(m->layers[i].q_norm, m->cfg.head_dim);
            unshift(m->layers[i].k_norm, m->cfg.head_dim);
        }
    }
    if (q == DROP_NORM_SHIFT) {
        unshift(m->out_norm, m->cfg.dim);
    }
    if (q == DROP_GEGLU) {
        m->cfg.gemma = 0;                     /* SwiGLU */
    }
    if (q == DROP_EMBD_SCALE) {
        m->cfg.embd_scale = 1.0f;
    }
    if (q == DROP_ATT_SCALE) {
        m->cfg.att_scale = 1.0f / sqrtf((float) m->cfg.head_dim);
    }
    if (q == DROP_LOCAL_ROPE) {
        m->cfg.rope_theta_local = m->cfg.rope_theta;
    }
    if (q == DROP_ROPE_LINEAR) {
        m->cfg.rope_linear = 1.0f;
    }
    if (q == DROP_GLOBAL_LAYERS) {
        m->cfg.swa_pattern = 0;               /* the window everywhere */
    }
    if (q == DROP_LLAMA3_ROPE) {
        m->cfg.rope_llama3 = 0;
        m->cfg.rope_freqs = NULL;
    }
    if (q == DROP_ROTATE_HALF) {
        m->cfg.rope_neox = !m->cfg.rope_neox;
    }
    if (q == DROP_SLIDING_WINDOW) {
        m->cfg.sliding_window = 0;
    }
    if (q == DROP_YARN_RAMP) {
        m->cfg.rope_yarn = 0;                 /* plain theta^-(2i/d) */
    }
    if (q == DROP_YARN_ATTN) {
        m->cfg.att_scale = 1.0f / sqrtf((float) m->cfg.head_dim);
    }
    if (q == DROP_YARN_NO_TRUNCATE) {
        m->cfg.rope_yarn_truncate = 1;        /* llama.cpp's ramp */
    }
    if (q == DROP_TOPK_SOFTMAX) {
        m->cfg.router_topk_softmax = 0;       /* softmax, then top-k */
        m->cfg.expert_norm = 0;
    }
    if (q == DROP_SWIGLU_OAI) {
        m->cfg.swiglu_oai = 0;                /* plain SwiGLU */
    }
}


static void
test_quirk_tol(const char *name, const char *fmt, quirk q, const char *what,
    double tol)
{
    char          path[512];
    llm_model     m;
    cJSON        *g = golden(name);
    const cJSON  *c = golden_case(g, "plain");
    double        keep, gone;

    snprintf(path, sizeof(path), "%s/%s%s", MODELS, name,
             strcmp(fmt, "gguf") == 0 ? ".gguf" : "");
    if (!ok(c != NULL && llm_model_load(&m, path, 0, 1) == 0,
            "%s (%s) loads", name, fmt))
    {
        llm_model_free(&m);
        cJSON_Delete(g);
        return;
    }
    keep = golden_diff(&m, c);
    drop(&m, q);
    gone = golden_diff(&m, c);
    ok(keep >= 0 && keep <= tol && gone > (tol < TOL * 2 ? 10 : 2) * tol,
       "%s (%s): with %s within %g (%.2g); without it %.3g off", name, fmt,
       what, tol, keep, gone);
    llm_model_free(&m);
    cJSON_Delete(g);
}


static void
test_quirk(const char *name, const char *fmt, quirk q, const char *what)
{
    test_quirk_tol(name, fmt, q, what, TOL);
}


/* gpt-oss: its golden's tolerance (MXFP4 experts, int8 activations:
 * test_golden.c); dropping a quirk must move the logits past twice it */
static void
test_gptoss_quirks(void)
{
    static const struct {
        const char  *fmt;
        quirk        q;
        const char  *what;
    } t[] = {
        { "hf",   DROP_SINKS,            "attention sinks" },
        { "gguf", DROP_SINKS,            "attention sinks" },
        { "hf",   DROP_SLIDING_WINDOW,   "sliding window" },
        { "gguf", DROP_GLOBAL_LAYERS,    "full layers (window everywhere)" },
        { "hf",   DROP_O_BIAS,           "o_proj bias" },
        { "gguf", DROP_QKV_BIAS,         "q/k/v biases" },
        { "hf",   DROP_ROUTER_BIAS,      "router bias" },
        { "gguf", DROP_ROUTER_BIAS,      "router bias" },
        { "hf",   DROP_EXPERT_BIAS,      "expert biases" },
        { "gguf", DROP_EXPERT_BIAS,      "expert biases" },
        { "hf",   DROP_SWIGLU_OAI,       "clamped SwiGLU" },
        { "gguf", DROP_SWIGLU_OAI,       "clamped SwiGLU" },
        { "hf",   DROP_GATE_UP_ORDER,    "gate = [..., ::2]" },
        { "hf",   DROP_YARN_RAMP,        "yarn frequencies" },
        { "gguf", DROP_YARN_ATTN,        "yarn attention factor" },
        { "hf",   DROP_YARN_NO_TRUNCATE, "yarn not truncated" },
        { "gguf", DROP_YARN_NO_TRUNCATE, "yarn not truncated" },
    };
    size_t  i;

    for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        test_quirk_tol("hf-gptoss", t[i].fmt, t[i].q, t[i].what, 0.5);
    }
}


/* byte fallback: the golden's "bytes" prompt (accents, CJK, an emoji) is
 * mostly <0xNN> tokens in the SentencePiece models; with the tokenizer's
 * byte tokens taken away (what an engine without byte fallback does:
 * <unk> per unknown character) the ids are no longer HF's */
static int
same_ids(const llm_tokenizer *t, const char *text, const int32_t *want,
    int n_want, int *n_bytes)
{
    int32_t  got[MAX_IDS];
    int      n, i, same;

    n = llm_tokenize(t, text, strlen(text), 1, 0, got, MAX_IDS);
    same = n == n_want;
    *n_bytes = 0;
    for (i = 0; same && i < n; i++) {
        same = got[i] == want[i];
        *n_bytes += llm_token_type(t, got[i]) == LLM_TOKEN_BYTE;
    }
    return same;
}


static void
test_byte_fallback(const char *name, const char *fmt)
{
    char            path[512], err[512];
    int32_t         want[MAX_IDS];
    int             n_want, n_bytes = 0, i, same, dropped;
    cJSON          *g = golden(name);
    const cJSON    *c = golden_case(g, "bytes");
    const char     *prompt = cJSON_GetStringValue(cJSON_GetObjectItem(c,
                                                                 "prompt"));
    llm_model       m;
    llm_tokenizer  *t = NULL;

    snprintf(path, sizeof(path), "%s/%s%s", MODELS, name,
             strcmp(fmt, "gguf") == 0 ? ".gguf" : "");
    n_want = json_ids(cJSON_GetObjectItem(c, "prompt_ids"), want, MAX_IDS);
    if (llm_model_load(&m, path, 0, 1) == 0) {
        t = llm_model_tokenizer(&m, err, sizeof(err));
    }
    same = t != NULL && same_ids(t, prompt, want, n_want, &n_bytes);
    ok(same && n_bytes >= 8, "%s (%s): \"bytes\" prompt ids as HF's, %d "
       "of them byte-fallback tokens", name, fmt, n_bytes);
    if (t != NULL) {
        for (i = 0; i < 256; i++) {
            t->byte_token[i] = -1;
        }
        dropped = same_ids(t, prompt, want, n_want, &n_bytes);
        ok(!dropped, "%s (%s): without byte fallback the ids differ", name,
           fmt);
    }
    llm_tokenizer_free(t);
    llm_model_free(&m);
    cJSON_Delete(g);
}


static void
test_quirks(void)
{
    test_quirk("hf-qwen2", "hf", DROP_QKV_BIAS, "QKV bias");
    test_quirk("hf-qwen2", "gguf", DROP_QKV_BIAS, "QKV bias");
    test_quirk("hf-qwen3", "hf", DROP_QK_NORM, "QK-norm");
    test_quirk("hf-qwen3", "gguf", DROP_QK_NORM, "QK-norm");
    test_quirk("hf-qwen2-yarn", "hf", DROP_YARN_RAMP, "yarn frequencies");
    test_quirk("hf-qwen2-yarn", "gguf", DROP_YARN_RAMP, "yarn frequencies");
    test_quirk("hf-qwen2-yarn", "hf", DROP_YARN_ATTN,
               "yarn attention factor");
    test_quirk("hf-qwen2-yarn", "gguf", DROP_YARN_ATTN,
               "yarn attention factor");
    test_quirk("hf-llama3", "hf", DROP_LLAMA3_ROPE, "llama3 rope scaling");
    test_quirk("hf-llama3", "gguf", DROP_LLAMA3_ROPE,
               "llama3 rope scaling (rope_freqs)");
    test_quirk("hf-llama", "hf", DROP_ROTATE_HALF, "rotate-half rope");
    test_quirk("hf-llama", "gguf", DROP_ROTATE_HALF,
               "Meta-order rope (not rotate-half)");
    test_quirk("hf-qwen3", "hf", DROP_ROTATE_HALF, "rotate-half rope");
    test_quirk("hf-mistral", "hf", DROP_SLIDING_WINDOW, "sliding window");
    test_quirk("hf-mistral", "gguf", DROP_SLIDING_WINDOW, "sliding window");
    test_quirk("hf-gemma3", "hf", DROP_NORM_SHIFT, "norms as 1 + w");
    test_quirk("hf-gemma3", "hf", DROP_POST_NORMS, "post norms");
    test_quirk("hf-gemma3", "gguf", DROP_POST_NORMS, "post norms");
    test_quirk("hf-gemma3", "hf", DROP_GEGLU, "GeGLU (not SwiGLU)");
    test_quirk("hf-gemma3", "gguf", DROP_EMBD_SCALE, "sqrt(dim) embedding "
               "scale");
    test_quirk("hf-gemma3", "hf", DROP_ATT_SCALE, "query_pre_attn_scalar");
    test_quirk("hf-gemma3", "gguf", DROP_ATT_SCALE, "query_pre_attn_scalar");
    test_quirk("hf-gemma3", "hf", DROP_LOCAL_ROPE, "local rope base");
    test_quirk("hf-gemma3", "gguf", DROP_LOCAL_ROPE, "local rope base");
    test_quirk("hf-gemma3", "hf", DROP_ROPE_LINEAR, "linear rope x8");
    test_quirk("hf-gemma3", "gguf", DROP_ROPE_LINEAR, "linear rope x8");
    test_quirk("hf-gemma3", "hf", DROP_SLIDING_WINDOW, "sliding window");
    test_quirk("hf-gemma3", "gguf", DROP_GLOBAL_LAYERS, "global layers");
    test_quirk("hf-gemma3", "hf", DROP_QK_NORM, "QK-norm");
    test_byte_fallback("hf-llama", "hf");
    test_byte_fallback("hf-llama", "gguf");
    test_byte_fallback("hf-mistral", "hf");
    test_gptoss_quirks();
}


/* ---- 5. chat templates ------------------------------------------------------ */

static void
add_token(cJSON *obj, const char *key, const llm_tokenizer *t, int32_t id)
{
    size_t      len;
    const char *s = id >= 0 ? llm_token_text(t, id, &len) : NULL;
    char       *copy = s ? strndup(s, len) : NULL;

    if (copy != NULL) {
        cJSON_AddStringToObject(obj, key, copy);
    }
    free(copy);
}


static void
test_templates(void)
{
    char            path[512], err[512], *src, *out = NULL;
    const char     *fmts[2] = { "", ".gguf" };
    size_t          i, f, out_len;
    llm_model       m;
    llm_tokenizer  *t;
    cJSON          *g, *special, *ctx;
    const cJSON    *c;
    jinja_tmpl     *tmpl;

    for (i = 0; i < sizeof(hf_names) / sizeof(hf_names[0]); i++) {
        for (f = 0; f < 2; f++) {
            snprintf(path, sizeof(path), "%s/%s%s", MODELS, hf_names[i],
                     fmts[f]);
            g = golden(hf_names[i]);
            c = golden_case(g, "chat");
            if (llm_model_load(&m, path, 0, 1) != 0) {
                ok(0, "%s loads: %s", path, m.err);
                llm_model_free(&m);
                cJSON_Delete(g);
                continue;
            }
            src = llm_model_chat_template(&m, err, sizeof(err));
            t = llm_model_tokenizer(&m, err, sizeof(err));
            special = cJSON_CreateObject();
            if (t != NULL) {
                add_token(special, "bos_token", t, llm_tokenizer_bos(t));
                add_token(special, "eos_token", t, llm_tokenizer_eos(t));
            }
            ctx = jinja_chat_context(cJSON_GetObjectItem(c, "messages"),
                                     NULL, 1, special, NULL);
            tmpl = src ? jinja_parse(src, strlen(src), err, sizeof(err))
                       : NULL;
            out = NULL;
            if (tmpl != NULL
                && jinja_render(tmpl, ctx, &out, &out_len, err, sizeof(err))
                   != 0)
            {
                out = NULL;
            }
            ok(out != NULL && strcmp(out, cJSON_GetStringValue(
                   cJSON_GetObjectItem(c, "prompt"))) == 0,
               "%s: chat template (%s) renders HF's prompt byte for byte",
               path, f ? "GGUF tokenizer.chat_template"
                       : "tokenizer_config.json");
            if (out == NULL) {
                printf("# %s\n", err);
            }
            free(out);
            free(src);
            jinja_free(tmpl);
            cJSON_Delete(ctx);
            cJSON_Delete(special);
            llm_tokenizer_free(t);
            llm_model_free(&m);
            cJSON_Delete(g);
        }
    }
}


int
main(void)
{
    char  tmp[] = "/tmp/test_hf.XXXXXX";

    if (mkdtemp(tmp) == NULL) {
        ok(0, "temporary directory");
        return tap_done();
    }
    test_safetensors();
    test_refusals(tmp);
    test_gemma3_configs(tmp);
    test_gemma3_refusals(tmp);
    test_formats(tmp);
    test_gptoss_formats();
    test_quirks();
    test_templates();
    /* the temporary files: symlinks and small copies */
    {
        char cmd[600];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
        if (system(cmd) != 0) {
            printf("# could not remove %s\n", tmp);
        }
    }
    return tap_done();
}
