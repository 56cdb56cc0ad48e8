/*
 * Mixture of experts, the loader's half: config keys of both formats and
 * the router and expert views of a layer (moe.h for the layout).
 *
 * defines: llm_moe_arch, llm_moe_gguf_config, llm_moe_hf_config,
 *          llm_moe_hf_name, llm_moe_load_layer, llm_moe_weight_bytes
 */
#include "model/moe.h"
#include "quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOE_MAX_EXPERTS  1024

/* the three expert matrices: GGUF name stem, HF projection name */
static const struct {
    const char  *gguf;
    const char  *hf;
} moe_mats[3] = {
    { "ffn_gate_exps", "gate_proj" },
    { "ffn_up_exps",   "up_proj" },
    { "ffn_down_exps", "down_proj" },
};


int
llm_moe_arch(const char *arch)
{
    return strcmp(arch, "qwen3moe") == 0 || strcmp(arch, "qwen3_moe") == 0
           || strcmp(arch, "gpt-oss") == 0 || strcmp(arch, "gpt_oss") == 0;
}


static int
moe_check(llm_model *m)
{
    llm_config  *c = &m->cfg;

    if (c->n_expert < 1 || c->n_expert > MOE_MAX_EXPERTS
        || c->n_expert_used < 1 || c->n_expert_used > c->n_expert
        || c->expert_ff < 1)
    {
        return llm_model_fail(m, "mixture of experts: %d experts (1..%d), "
                              "%d used per token (1..experts), expert size "
                              "%d: invalid", c->n_expert, MOE_MAX_EXPERTS,
                              c->n_expert_used, c->expert_ff);
    }
    return 0;
}


static int
gguf_key_int(llm_model *m, const char *suffix, int *out)
{
    char      key[128];
    uint64_t  v;

    snprintf(key, sizeof(key), "%s.%s", m->cfg.arch, suffix);
    if (gguf_get_u64(&m->gguf, key, &v) != 0 || v > (1u << 20)) {
        return llm_model_fail(m, "metadata key '%s' is missing or not an "
                              "integer in 0..%d", key, 1 << 20);
    }
    *out = (int) v;
    return 0;
}


int
llm_moe_gguf_config(llm_model *m)
{
    llm_config  *c = &m->cfg;
    char         key[128];

    if (gguf_key_int(m, "expert_count", &c->n_expert) != 0
        || gguf_key_int(m, "expert_used_count", &c->n_expert_used) != 0
        || gguf_key_int(m, "expert_feed_forward_length", &c->expert_ff)
           != 0)
    {
        return -1;
    }
    /* llama.cpp's qwen3moe graph always renormalises; a file may say not
     * to (norm_topk_prob false), as tools/oracle.py writes it */
    c->expert_norm = 1;
    snprintf(key, sizeof(key), "%s.expert_weights_norm", c->arch);
    if (gguf_find_kv(&m->gguf, key) != NULL
        && gguf_get_bool(&m->gguf, key, &c->expert_norm) != 0)
    {
        return llm_model_fail(m, "metadata key '%s' is not a bool", key);
    }
    return moe_check(m);
}


static int
hf_int(llm_model *m, const cJSON *root, const char *key, int *out)
{
    const cJSON  *v = cJSON_GetObjectItemCaseSensitive(root, key);
    double        d = cJSON_GetNumberValue(v);

    if (!cJSON_IsNumber(v) || !(d >= 1 && d <= (1 << 20)) || d != (int) d) {
        return llm_model_fail(m, "config.json: \"%s\" is missing or not an "
                              "integer in 1..%d", key, 1 << 20);
    }
    *out = (int) d;
    return 0;
}


int
llm_moe_hf_config(llm_model *m, const cJSON *root)
{
    llm_config    *c = &m->cfg;
    const cJSON   *only, *step;
    const char    *experts = "num_experts";

    if (cJSON_GetObjectItemCaseSensitive(root, experts) == NULL) {
        experts = "num_local_experts";     /* transformers 5 */
    }
    if (hf_int(m, root, experts, &c->n_expert) != 0
        || hf_int(m, root, "num_experts_per_tok", &c->n_expert_used) != 0
        || hf_int(m, root, c->gpt_oss ? "intermediate_size"
                                      : "moe_intermediate_size",
                  &c->expert_ff) != 0)
    {
        return -1;
    }
    /* Qwen3MoeConfig's default is false */
    c->expert_norm = cJSON_IsTrue(
        cJSON_GetObjectItemCaseSensitive(root, "norm_topk_prob"));
    only = cJSON_GetObjectItemCaseSensitive(root, "mlp_only_layers");
    step = cJSON_GetObjectItemCaseSensitive(root, "decoder_sparse_step");
    if ((only != NULL && cJSON_GetArraySize(only) > 0)
        || (step != NULL && cJSON_GetNumberValue(step) != 1))
    {
        return llm_model_fail(m, "config.json: dense layers among the MoE "
                              "layers (mlp_only_layers, decoder_sparse_step "
                              "!= 1) are not supported");
    }
    return moe_check(m);
}


int
llm_moe_hf_name(const llm_model *m, long layer, const char *rest,
    char *out, size_t len)
{
    char  *end;
    long   e;
    int    k;

    if (strcmp(rest, "mlp.gate.weight") == 0) {
        snprintf(out, len, "blk.%ld.ffn_gate_inp.weight", layer);
        return 0;
    }
    if (strncmp(rest, "mlp.experts.", 12) != 0) {
        return -1;
    }
    e = strtol(rest + 12, &end, 10);
    if (end == rest + 12 || *end != '.' || e < 0 || e >= m->cfg.n_expert) {
        return -1;
    }
    for (k = 0; k < 3; k++) {
        size_t n = strlen(moe_mats[k].hf);

        if (strncmp(end + 1, moe_mats[k].hf, n) == 0
            && strcmp(end + 1 + n, ".weight") == 0)
        {
            snprintf(out, len, "blk.%ld.%s.%ld.weight", layer,
                     moe_mats[k].gguf, e);
            return 0;
        }
    }
    return -1;
}


/* expert e of matrix k of layer i: a slice of the 3-D GGUF tensor, or the
 * HF per-expert tensor; rows x cols, checked */
static int
expert_view(llm_model *m, llm_moe_find_fn find, int i, int k, int e,
    int rows, int cols, llm_tensor *out)
{
    const gguf_tensor  *t;
    char                name[128], err[256];
    size_t              rs;

    snprintf(name, sizeof(name), "blk.%d.%s.weight", i, moe_mats[k].gguf);
    t = find(m, name);
    if (t != NULL) {
        if (t->n_dims != 3 || t->ne[0] != (uint64_t) cols
            || t->ne[1] != (uint64_t) rows
            || t->ne[2] != (uint64_t) m->cfg.n_expert)
        {
            return llm_model_fail(m, "tensor '%s': expected shape [%d, %d, "
                                  "%d], got [%llu, %llu, %llu] with %u dims",
                                  name, cols, rows, m->cfg.n_expert,
                                  (unsigned long long) t->ne[0],
                                  (unsigned long long) t->ne[1],
                                  (unsigned long long) t->ne[2], t->n_dims);
        }
        rs = ggml_row_size(t->type, cols);
        *out = llm_tensor_make((const uint8_t *) t->data
                               + (size_t) e * rows * rs, t->type, rows, cols);
    } else {
        snprintf(name, sizeof(name), "blk.%d.%s.%d.weight", i,
                 moe_mats[k].gguf, e);
        t = find(m, name);
        if (t == NULL) {
            return llm_model_fail(m, "tensor 'blk.%d.%s.weight' (or its "
                                  "expert %d) is missing", i,
                                  moe_mats[k].gguf, e);
        }
        if (t->n_dims != 2 || t->ne[0] != (uint64_t) cols
            || t->ne[1] != (uint64_t) rows)
        {
            return llm_model_fail(m, "tensor '%s': expected shape [%d, %d]",
                                  name, cols, rows);
        }
        *out = llm_tensor_make(t->data, t->type, rows, cols);
    }
    if (llm_tensor_check(out, err, sizeof(err)) != 0) {
        return llm_model_fail(m, "tensor '%s' expert %d: %s", name, e, err);
    }
    return 0;
}


int
llm_moe_load_layer(llm_model *m, int i, llm_moe_find_fn find)
{
    const llm_config    *c = &m->cfg;
    llm_layer           *l = &m->layers[i];
    llm_tensor          *v = m->experts + (size_t) i * 3 * c->n_expert;
    const gguf_tensor   *t;
    char                 name[96], err[256];
    int                  e;

    snprintf(name, sizeof(name), "blk.%d.ffn_gate_inp.weight", i);
    t = find(m, name);
    if (t == NULL || t->n_dims != 2 || t->ne[0] != (uint64_t) c->dim
        || t->ne[1] != (uint64_t) c->n_expert)
    {
        return llm_model_fail(m, "tensor '%s' (the router) is missing or "
                              "not of shape [%d, %d]", name, c->dim,
                              c->n_expert);
    }
    l->router = llm_tensor_make(t->data, t->type, c->n_expert, c->dim);
    if (llm_tensor_check(&l->router, err, sizeof(err)) != 0) {
        return llm_model_fail(m, "tensor '%s': %s", name, err);
    }
    l->exp_gate = v;
    l->exp_up = v + c->n_expert;
    l->exp_down = v + 2 * c->n_expert;
    for (e = 0; e < c->n_expert; e++) {
        if (expert_view(m, find, i, 0, e, c->expert_ff, c->dim,
                        &l->exp_gate[e])
            || expert_view(m, find, i, 1, e, c->expert_ff, c->dim,
                           &l->exp_up[e])
            || expert_view(m, find, i, 2, e, c->dim, c->expert_ff,
                           &l->exp_down[e]))
        {
            return -1;
        }
    }
    return 0;
}


static uint64_t
bytes_of(const llm_tensor *t)
{
    return (uint64_t) t->rows * ggml_row_size(t->type, t->cols);
}


uint64_t
llm_moe_weight_bytes(const llm_model *m, int layer)
{
    const llm_layer  *l = &m->layers[layer];

    return bytes_of(&l->router)
           + (uint64_t) m->cfg.n_expert_used
             * (bytes_of(&l->exp_gate[0]) + bytes_of(&l->exp_up[0])
                + bytes_of(&l->exp_down[0]));
}
