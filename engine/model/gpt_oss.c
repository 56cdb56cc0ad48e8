/*
 * gpt-oss, the loader's half (gpt_oss.h for the layout of both formats).
 *
 * defines: llm_gpt_oss_arch, llm_gpt_oss_hf_config, llm_gpt_oss_hf_name,
 *          llm_gpt_oss_hf_experts, llm_gpt_oss_load_layer
 */
#include "activation.h"
#include "model/gpt_oss.h"
#include "quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* HF layer names (after "model.layers.L.") -> GGUF ("blk.L." + gguf) or,
 * raw, an internal name the repacking reads */
static const struct {
    const char  *hf;
    const char  *gguf;
    int          raw;
} oss_names[] = {
    { "self_attn.sinks",                 "attn_sinks.weight",          0 },
    { "self_attn.o_proj.bias",           "attn_output.bias",           0 },
    { "post_attention_layernorm.weight", "post_attention_norm.weight", 0 },
    { "mlp.router.weight",               "ffn_gate_inp.weight",        0 },
    { "mlp.router.bias",                 "ffn_gate_inp.bias",          0 },
    { "mlp.experts.gate_up_proj_blocks", "hf.gate_up_proj_blocks",     1 },
    { "mlp.experts.gate_up_proj_scales", "hf.gate_up_proj_scales",     1 },
    { "mlp.experts.gate_up_proj_bias",   "hf.gate_up_proj_bias",       1 },
    { "mlp.experts.down_proj_blocks",    "hf.down_proj_blocks",        1 },
    { "mlp.experts.down_proj_scales",    "hf.down_proj_scales",        1 },
    { "mlp.experts.down_proj_bias",      "hf.down_proj_bias",          1 },
};


int
llm_gpt_oss_arch(const char *arch)
{
    return strcmp(arch, "gpt-oss") == 0 || strcmp(arch, "gpt_oss") == 0;
}


int
llm_gpt_oss_hf_config(llm_model *m, const cJSON *root)
{
    llm_config    *c = &m->cfg;
    const cJSON   *types, *e, *q, *v;
    int            i = 0;

    v = cJSON_GetObjectItemCaseSensitive(root, "swiglu_limit");
    if (v != NULL && cJSON_GetNumberValue(v) != LLM_SWIGLU_OAI_LIMIT) {
        return llm_model_fail(m, "config.json: swiglu_limit must be 7 (the "
                              "kernel's clamp)");
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "swiglu_alpha");
    if (v != NULL
        && (float) cJSON_GetNumberValue(v) != LLM_SWIGLU_OAI_ALPHA)
    {
        return llm_model_fail(m, "config.json: swiglu_alpha must be 1.702");
    }
    q = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    if (q != NULL && !cJSON_IsNull(q)) {
        v = cJSON_GetObjectItemCaseSensitive(q, "quant_method");
        if (!cJSON_IsString(v) || strcmp(v->valuestring, "mxfp4") != 0) {
            return llm_model_fail(m, "config.json: quantization_config other "
                                  "than mxfp4 is not supported");
        }
    }
    if (c->sliding_window <= 0) {
        return llm_model_fail(m, "config.json: gpt_oss needs "
                              "\"sliding_window\"");
    }
    /* transformers' default and every published config: sliding, full,
       sliding, ... (a global layer every second: swa_pattern 2) */
    c->swa_pattern = 2;
    types = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (types == NULL || cJSON_IsNull(types)) {
        return 0;
    }
    if (!cJSON_IsArray(types) || cJSON_GetArraySize(types) != c->n_layers) {
        return llm_model_fail(m, "config.json: layer_types must list the %d "
                              "layers", c->n_layers);
    }
    cJSON_ArrayForEach(e, types) {
        const char *want = i % 2 ? "full_attention" : "sliding_attention";

        if (!cJSON_IsString(e) || strcmp(e->valuestring, want) != 0) {
            return llm_model_fail(m, "config.json: layer_types[%d] is not "
                                  "\"%s\" (sliding and full layers alternate, "
                                  "the only pattern supported)", i, want);
        }
        i++;
    }
    return 0;
}


int
llm_gpt_oss_hf_name(llm_model *m, long layer, const char *rest, char *out,
    size_t len)
{
    size_t  i;

    for (i = 0; i < sizeof(oss_names) / sizeof(oss_names[0]); i++) {
        if (strcmp(rest, oss_names[i].hf) == 0) {
            snprintf(out, len, "blk.%ld.%s", layer, oss_names[i].gguf);
            return oss_names[i].raw ? LLM_GPT_OSS_HF_RAW : 0;
        }
    }
    if (strcmp(rest, "mlp.experts.gate_up_proj") == 0
        || strcmp(rest, "mlp.experts.down_proj") == 0)
    {
        llm_model_fail(m, "tensor 'model.layers.%ld.%s': gpt-oss experts are "
                       "read as MXFP4 *_blocks and *_scales (the published "
                       "checkpoints); unquantized experts are not supported",
                       layer, rest);
        return -1;
    }
    return -2;
}


/* a raw HF tensor of layer i, checked: type (U8, or a float type for
 * biases: type 0 accepts F32, F16, BF16) and ggml-order dims */
static const gguf_tensor *
raw(llm_model *m, llm_moe_find_fn find, int i, const char *what, int u8,
    uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2, uint64_t ne3)
{
    const gguf_tensor  *t;
    char                name[96];
    uint64_t            ne[4] = { ne0, ne1, ne2, ne3 };
    uint32_t            k;
    int                 bad;

    snprintf(name, sizeof(name), "blk.%d.hf.%s", i, what);
    t = find(m, name);
    if (t == NULL) {
        llm_model_fail(m, "tensor 'model.layers.%d.mlp.experts.%s' is missing",
                       i, what);
        return NULL;
    }
    bad = t->n_dims != n_dims
          || (u8 ? t->type != ST_TYPE_U8
                 : t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16
                   && t->type != GGML_TYPE_BF16);
    for (k = 0; k < n_dims; k++) {
        bad |= t->ne[k] != ne[k];
    }
    if (bad) {
        llm_model_fail(m, "tensor 'model.layers.%d.mlp.experts.%s': expected "
                       "%s of shape (ggml order) [%llu, %llu, %llu, %llu] in "
                       "%u dims", i, what, u8 ? "U8" : "F32/F16/BF16",
                       (unsigned long long) ne0, (unsigned long long) ne1,
                       (unsigned long long) ne2, (unsigned long long) ne3,
                       n_dims);
        return NULL;
    }
    return t;
}


/* one HF MXFP4 row (nb blocks: 16 code bytes each, element 2j in the low
 * nibble of byte j, and a scale byte each) -> ggml's llm_block_mxfp4 */
static void
repack_row(llm_block_mxfp4 *out, const uint8_t *codes,
    const uint8_t *scales, size_t nb)
{
    size_t  b;
    int     j;

    for (b = 0; b < nb; b++) {
        const uint8_t  *q = codes + b * 16;
        uint8_t         v[32];

        for (j = 0; j < 16; j++) {
            v[2 * j] = q[j] & 0x0f;
            v[2 * j + 1] = q[j] >> 4;
        }
        out[b].e = scales[b];
        for (j = 0; j < 16; j++) {
            out[b].qs[j] = (uint8_t) (v[j] | (v[j + 16] << 4));
        }
    }
}


/* a new tensor at the end of m->hf_tensors, data owned by the model */
static gguf_tensor *
add_tensor(llm_model *m, int i, const char *what, uint32_t type,
    uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2,
    uint64_t nbytes)
{
    gguf_tensor  *g = &m->hf_tensors[m->n_hf_tensors];
    char          name[96];

    snprintf(name, sizeof(name), "blk.%d.%s", i, what);
    memset(g, 0, sizeof(*g));
    g->name = strdup(name);
    g->data = llm_model_own(m, nbytes);
    if (g->name == NULL || g->data == NULL) {
        free(g->name);
        g->name = NULL;
        llm_model_fail(m, "out of memory for '%s'", name);
        return NULL;
    }
    m->n_hf_tensors++;
    g->type = type;
    g->n_dims = n_dims;
    g->ne[0] = ne0;
    g->ne[1] = ne1;
    g->ne[2] = ne2;
    g->ne[3] = 1;
    g->nbytes = nbytes;
    return g;
}


/* experts (E, rows_out * stride, cols) of blocks/scales, rows r0, r0 +
 * stride, ... into a ggml MXFP4 tensor (cols, rows_out, E) */
static int
repack(llm_model *m, int i, const char *what, const gguf_tensor *blocks,
    const gguf_tensor *scales, int rows_out, int stride, int r0, int cols)
{
    const llm_config  *c = &m->cfg;
    gguf_tensor       *g;
    llm_block_mxfp4   *out;
    size_t             nb = cols / 32, e, r, src;

    g = add_tensor(m, i, what, GGML_TYPE_MXFP4, 3, cols, rows_out,
                   c->n_expert, (size_t) c->n_expert * rows_out * nb
                                * sizeof(llm_block_mxfp4));
    if (g == NULL) {
        return -1;
    }
    out = (llm_block_mxfp4 *) g->data;
    for (e = 0; e < (size_t) c->n_expert; e++) {
        for (r = 0; r < (size_t) rows_out; r++) {
            src = e * rows_out * stride + r * stride + r0;
            repack_row(out + (e * rows_out + r) * nb,
                       (const uint8_t *) blocks->data + src * nb * 16,
                       (const uint8_t *) scales->data + src * nb, nb);
        }
    }
    return 0;
}


/* biases (E, n * stride) of any float type, elements r0, r0 + stride, ...
 * into an F32 tensor (n, E) */
static int
split_bias(llm_model *m, int i, const char *what, const gguf_tensor *t,
    int n, int stride, int r0)
{
    const llm_config  *c = &m->cfg;
    gguf_tensor       *g;
    float             *row, *out;
    size_t             w = (size_t) n * stride, e;
    int                k;

    row = malloc(w * sizeof(float));
    g = row ? add_tensor(m, i, what, GGML_TYPE_F32, 2, n, c->n_expert, 0,
                         (size_t) c->n_expert * n * sizeof(float))
            : NULL;
    if (g == NULL) {
        free(row);
        return row ? -1 : llm_model_fail(m, "out of memory");
    }
    out = (float *) g->data;
    for (e = 0; e < (size_t) c->n_expert; e++) {
        llm_dequant_row(t->type, (const uint8_t *) t->data
                        + e * ggml_row_size(t->type, w), row, (int64_t) w);
        for (k = 0; k < n; k++) {
            out[e * n + k] = row[(size_t) k * stride + r0];
        }
    }
    free(row);
    return 0;
}


int
llm_gpt_oss_hf_experts(llm_model *m, llm_moe_find_fn find)
{
    const llm_config    *c = &m->cfg;
    const gguf_tensor   *gub, *gus, *gbias, *db, *ds, *dbias;
    uint64_t             E = c->n_expert, ff = c->expert_ff, dim = c->dim;
    int                  i;

    if (c->dim % 32 != 0 || c->expert_ff % 32 != 0) {
        return llm_model_fail(m, "gpt-oss: hidden size %d and expert size %d "
                              "must be multiples of 32 (MXFP4 blocks)", c->dim,
                              c->expert_ff);
    }
    for (i = 0; i < c->n_layers; i++) {
        gub = raw(m, find, i, "gate_up_proj_blocks", 1, 4, 16, dim / 32,
                  2 * ff, E);
        gus = gub ? raw(m, find, i, "gate_up_proj_scales", 1, 3, dim / 32,
                        2 * ff, E, 1) : NULL;
        gbias = gus ? raw(m, find, i, "gate_up_proj_bias", 0, 2, 2 * ff, E,
                          1, 1) : NULL;
        db = gbias ? raw(m, find, i, "down_proj_blocks", 1, 4, 16, ff / 32,
                         dim, E) : NULL;
        ds = db ? raw(m, find, i, "down_proj_scales", 1, 3, ff / 32, dim, E,
                      1) : NULL;
        dbias = ds ? raw(m, find, i, "down_proj_bias", 0, 2, dim, E, 1, 1)
                   : NULL;
        if (dbias == NULL) {
            return -1;
        }
        /* gate_up's rows interleave gate (even) and up (odd) */
        if (repack(m, i, "ffn_gate_exps.weight", gub, gus, ff, 2, 0, dim)
            || repack(m, i, "ffn_up_exps.weight", gub, gus, ff, 2, 1, dim)
            || repack(m, i, "ffn_down_exps.weight", db, ds, dim, 1, 0, ff)
            || split_bias(m, i, "ffn_gate_exps.bias", gbias, ff, 2, 0)
            || split_bias(m, i, "ffn_up_exps.bias", gbias, ff, 2, 1)
            || split_bias(m, i, "ffn_down_exps.bias", dbias, dim, 1, 0))
        {
            return -1;
        }
    }
    return 0;
}


/* a float vector (ne0, ne1) of layer i; F32 in place, F16/BF16 widened */
static int
floats(llm_model *m, llm_moe_find_fn find, int i, const char *what,
    uint64_t ne0, uint64_t ne1, const float **out)
{
    const gguf_tensor  *t;
    char                name[96];
    float              *wide;

    snprintf(name, sizeof(name), "blk.%d.%s", i, what);
    t = find(m, name);
    if (t == NULL || t->n_dims != (ne1 > 1 ? 2u : 1u) || t->ne[0] != ne0
        || (ne1 > 1 && t->ne[1] != ne1)
        || (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16
            && t->type != GGML_TYPE_BF16))
    {
        return llm_model_fail(m, "tensor '%s' is missing or not a float tensor "
                              "of shape [%llu, %llu]", name,
                              (unsigned long long) ne0,
                              (unsigned long long) ne1);
    }
    if (t->type == GGML_TYPE_F32) {
        *out = t->data;
        return 0;
    }
    wide = llm_model_own(m, ne0 * ne1 * sizeof(float));
    if (wide == NULL) {
        return llm_model_fail(m, "out of memory for '%s'", name);
    }
    llm_dequant_row(t->type, t->data, wide, (int64_t) (ne0 * ne1));
    *out = wide;
    return 0;
}


int
llm_gpt_oss_load_layer(llm_model *m, int i, llm_moe_find_fn find)
{
    const llm_config  *c = &m->cfg;
    llm_layer         *l = &m->layers[i];

    return floats(m, find, i, "attn_sinks.weight", c->n_heads, 1,
                  &l->attn_sinks)
           || floats(m, find, i, "attn_output.bias", c->dim, 1, &l->bo)
           || floats(m, find, i, "ffn_gate_inp.bias", c->n_expert, 1,
                     &l->router_b)
           || floats(m, find, i, "ffn_gate_exps.bias", c->expert_ff,
                     c->n_expert, &l->exp_gate_b)
           || floats(m, find, i, "ffn_up_exps.bias", c->expert_ff,
                     c->n_expert, &l->exp_up_b)
           || floats(m, find, i, "ffn_down_exps.bias", c->dim, c->n_expert,
                     &l->exp_down_b)
           ? -1 : 0;
}
