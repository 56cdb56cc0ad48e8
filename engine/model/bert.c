/*
 * BERT-family encoders: configuration and weight views (bert.h).
 *
 * GGUF, as llama.cpp's converter writes it: <arch>.embedding_length,
 * block_count, feed_forward_length, attention.head_count,
 * attention.layer_norm_epsilon, context_length, rope.freq_base
 * (nomic-bert), tokenizer.ggml.token_type_count; tensors token_embd,
 * position_embd (bert), token_types, token_embd_norm, blk.N.attn_{q,k,v,
 * output}, attn_output_norm, ffn_{up,gate,down}, layer_output_norm, and
 * for a cross-encoder cls (the pooler) and cls.output (the classifier).
 * Hugging Face: BertModel / BertForSequenceClassification (bert. prefix)
 * and NomicBertModel, renamed to those names (llm_bert_hf_name).
 *
 * defines: llm_bert_arch, llm_bert_config_gguf, llm_bert_config_hf,
 *          llm_bert_hf_name, llm_bert_load, llm_bert_free
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matmul.h"
#include "model/bert.h"
#include "model/pool.h"
#include "model/score.h"

#define BERT_MAX  (1 << 20)


int
llm_bert_arch(const char *arch)
{
    return strcmp(arch, "bert") == 0 || strcmp(arch, "nomic-bert") == 0
           || strcmp(arch, "nomic_bert") == 0;
}


/* the checks both formats share, once the sizes are in */
static int
bert_config_check(llm_model *m)
{
    llm_config  *c = &m->cfg;

    c->nomic = strcmp(c->arch, "bert") != 0;
    if (c->n_heads < 1 || c->dim % c->n_heads != 0) {
        return llm_model_fail(m, "hidden size %d is not a multiple of %d heads",
                              c->dim, c->n_heads);
    }
    if (c->n_layers > 1024) {
        return llm_model_fail(m, "%d layers (at most 1024)", c->n_layers);
    }
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->dim / c->n_heads;
    c->rope_dim = c->nomic ? c->head_dim : 0;
    c->rope_neox = 1;
    c->rope_theta_local = c->rope_theta;
    c->rope_linear = 1.0f;
    c->embd_scale = 1.0f;
    c->att_scale = 1.0f / sqrtf((float) c->head_dim);
    c->encoder = 1;
    c->tied_output = 1;
    if (c->nomic && c->head_dim % 2 != 0) {
        return llm_model_fail(m, "head size %d is odd (rotary)", c->head_dim);
    }
    if (c->n_types < 0 || c->n_types > 16) {
        return llm_model_fail(m, "%d token types (0..16)", c->n_types);
    }
    return 0;
}


static int
gguf_int(llm_model *m, const char *suffix, int required, int dflt, int *out)
{
    char      key[128];
    uint64_t  v;

    snprintf(key, sizeof(key), "%s.%s", m->cfg.arch, suffix);
    if (gguf_find_kv(&m->gguf, key) == NULL && !required) {
        *out = dflt;
        return 0;
    }
    if (gguf_get_u64(&m->gguf, key, &v) != 0 || v < 1 || v > BERT_MAX) {
        return llm_model_fail(m, "metadata key '%s' is missing or not an "
                              "integer in 1..%d", key, BERT_MAX);
    }
    *out = (int) v;
    return 0;
}


static int
gguf_float(llm_model *m, const char *suffix, int required, float dflt,
    float *out)
{
    char  key[128];

    snprintf(key, sizeof(key), "%s.%s", m->cfg.arch, suffix);
    if (gguf_find_kv(&m->gguf, key) == NULL && !required) {
        *out = dflt;
        return 0;
    }
    if (gguf_get_f32(&m->gguf, key, out) != 0 || !(*out > 0.0f)) {
        return llm_model_fail(m, "metadata key '%s' is missing or not a "
                              "positive float", key);
    }
    return 0;
}


int
llm_bert_config_gguf(llm_model *m)
{
    llm_config  *c = &m->cfg;
    char         key[128];
    uint64_t     v;
    int          causal = 0;

    if (gguf_int(m, "embedding_length", 1, 0, &c->dim) != 0
        || gguf_int(m, "block_count", 1, 0, &c->n_layers) != 0
        || gguf_int(m, "feed_forward_length", 1, 0, &c->hidden_dim) != 0
        || gguf_int(m, "attention.head_count", 1, 0, &c->n_heads) != 0
        || gguf_int(m, "context_length", 1, 0, &c->max_seq_len) != 0
        || gguf_float(m, "attention.layer_norm_epsilon", 1, 0,
                      &c->norm_eps) != 0
        || gguf_float(m, "rope.freq_base", 0, 10000.0f, &c->rope_theta) != 0)
    {
        return -1;
    }
    snprintf(key, sizeof(key), "%s.attention.causal", c->arch);
    if (gguf_find_kv(&m->gguf, key) != NULL
        && (gguf_get_bool(&m->gguf, key, &causal) != 0 || causal))
    {
        return llm_model_fail(m, "%s: a causal encoder is not supported", key);
    }
    /* a cross-encoder's head is loaded with the weights, before
       pool_config.c reads the pooling of embedders */
    snprintf(key, sizeof(key), "%s.pooling_type", c->arch);
    if (gguf_get_u64(&m->gguf, key, &v) == 0 && v == LLM_POOL_RANK) {
        c->pooling = LLM_POOL_RANK;
    }
    c->n_types = 2;
    if (gguf_find_kv(&m->gguf, "tokenizer.ggml.token_type_count") != NULL) {
        if (gguf_get_u64(&m->gguf, "tokenizer.ggml.token_type_count", &v)
            != 0 || v > 16)
        {
            return llm_model_fail(m, "tokenizer.ggml.token_type_count is not "
                                  "an integer in 0..16");
        }
        c->n_types = (int) v;
    }
    return bert_config_check(m);
}


static int
hf_int(llm_model *m, const cJSON *root, const char *key, int required,
    int dflt, int *out)
{
    const cJSON  *v = cJSON_GetObjectItemCaseSensitive(root, key);
    double        d = cJSON_GetNumberValue(v);

    if ((v == NULL || cJSON_IsNull(v)) && !required) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !(d >= 1 && d <= BERT_MAX) || d != (int) d) {
        return llm_model_fail(m, "config.json: \"%s\" is missing or not an "
                              "integer in 1..%d", key, BERT_MAX);
    }
    *out = (int) d;
    return 0;
}


static int
hf_float(llm_model *m, const cJSON *root, const char *key, float dflt,
    float *out)
{
    const cJSON  *v = cJSON_GetObjectItemCaseSensitive(root, key);

    if (v == NULL || cJSON_IsNull(v)) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0)) {
        return llm_model_fail(m, "config.json: \"%s\" is not a positive number",
                              key);
    }
    *out = (float) v->valuedouble;
    return 0;
}


/* "architectures": ["BertForSequenceClassification"] and the like */
static int
hf_is(const cJSON *root, const char *arch)
{
    const cJSON  *a;

    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(root,
                                                           "architectures"))
    {
        if (cJSON_IsString(a) && strcmp(a->valuestring, arch) == 0) {
            return 1;
        }
    }
    return 0;
}


int
llm_bert_config_hf(llm_model *m, const cJSON *root)
{
    llm_config    *c = &m->cfg;
    const cJSON   *act, *pt, *rp, *labels;
    const char    *want;
    int            n_labels;

    c->nomic = strcmp(c->arch, "bert") != 0;
    act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    want = c->nomic ? "silu" : "gelu";
    if (act != NULL && !(cJSON_IsString(act)
                         && strcmp(act->valuestring, want) == 0))
    {
        return llm_model_fail(m, "config.json: hidden_act must be \"%s\" for "
                              "%s (erf GELU / SwiGLU)", want, c->arch);
    }
    pt = cJSON_GetObjectItemCaseSensitive(root, "position_embedding_type");
    if (pt != NULL && !(cJSON_IsString(pt)
                        && strcmp(pt->valuestring, "absolute") == 0))
    {
        return llm_model_fail(m, "config.json: position_embedding_type must be "
                              "\"absolute\"");
    }
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "is_decoder"))) {
        return llm_model_fail(m, "config.json: is_decoder (causal) is not "
                              "supported");
    }
    c->rope_theta = 10000.0f;
    rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (c->nomic && rp != NULL) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(rp, "rope_type");

        if (type != NULL && !(cJSON_IsString(type)
                              && strcmp(type->valuestring, "default") == 0))
        {
            return llm_model_fail(m, "config.json: rope_type must be "
                                  "\"default\"");
        }
        if (hf_float(m, rp, "rope_theta", 10000.0f, &c->rope_theta) != 0) {
            return -1;
        }
    }
    if (hf_int(m, root, "hidden_size", 1, 0, &c->dim) != 0
        || hf_int(m, root, "num_hidden_layers", 1, 0, &c->n_layers) != 0
        || hf_int(m, root, "intermediate_size", 1, 0, &c->hidden_dim) != 0
        || hf_int(m, root, "num_attention_heads", 1, 0, &c->n_heads) != 0
        || hf_int(m, root, "max_position_embeddings", 1, 0,
                  &c->max_seq_len) != 0
        || hf_int(m, root, "type_vocab_size", 0, 2, &c->n_types) != 0
        || hf_float(m, root, "layer_norm_eps", 1e-12f, &c->norm_eps) != 0)
    {
        return -1;
    }
    if (hf_is(root, "BertForSequenceClassification")) {
        labels = cJSON_GetObjectItemCaseSensitive(root, "id2label");
        n_labels = cJSON_IsObject(labels) ? cJSON_GetArraySize(labels) : 1;
        if (hf_int(m, root, "num_labels", 0, n_labels, &n_labels) != 0) {
            return -1;
        }
        if (n_labels != 1) {
            return llm_model_fail(m, "config.json: a sequence classifier of %d "
                                  "labels is not a cross-encoder (one label)",
                                  n_labels);
        }
        c->pooling = LLM_POOL_RANK;
    } else if (!hf_is(root, "BertModel") && !hf_is(root, "NomicBertModel")
               && cJSON_GetObjectItemCaseSensitive(root, "architectures"))
    {
        return llm_model_fail(m, "config.json: architectures must be "
                              "BertModel, BertForSequenceClassification or "
                              "NomicBertModel");
    }
    return bert_config_check(m);
}


static const struct { const char *hf, *gguf; } bert_names[] = {
    { "embeddings.word_embeddings.weight", "token_embd.weight" },
    { "embeddings.position_embeddings.weight", "position_embd.weight" },
    { "embeddings.token_type_embeddings.weight", "token_types.weight" },
    { "embeddings.LayerNorm.weight", "token_embd_norm.weight" },
    { "embeddings.LayerNorm.bias", "token_embd_norm.bias" },
    { "emb_ln.weight", "token_embd_norm.weight" },
    { "emb_ln.bias", "token_embd_norm.bias" },
    { "pooler.dense.weight", "cls.weight" },
    { "pooler.dense.bias", "cls.bias" },
    { "classifier.weight", "cls.output.weight" },
    { "classifier.bias", "cls.output.bias" },
};

static const struct { const char *hf, *gguf; } bert_layer_names[] = {
    { "attention.self.query", "attn_q" },
    { "attention.self.key", "attn_k" },
    { "attention.self.value", "attn_v" },
    { "attention.output.dense", "attn_output" },
    { "attention.output.LayerNorm", "attn_output_norm" },
    { "intermediate.dense", "ffn_up" },
    { "output.dense", "ffn_down" },
    { "output.LayerNorm", "layer_output_norm" },
};

/* nomic-ai's own checkpoints (and transformers 5's save of
   NomicBertModel) under encoder.layers. */
static const struct { const char *hf, *gguf; } nomic_orig_names[] = {
    { "attn.Wqkv", "attn_qkv" },
    { "attn.out_proj", "attn_output" },
    { "norm1", "attn_output_norm" },
    { "mlp.fc11", "ffn_up" },
    { "mlp.fc12", "ffn_gate" },
    { "mlp.fc2", "ffn_down" },
    { "norm2", "layer_output_norm" },
};

static const struct { const char *hf, *gguf; } nomic_layer_names[] = {
    { "self_attn.q_proj", "attn_q" },
    { "self_attn.k_proj", "attn_k" },
    { "self_attn.v_proj", "attn_v" },
    { "self_attn.o_proj", "attn_output" },
    { "post_attention_layernorm", "attn_output_norm" },
    { "mlp.gate_proj", "ffn_gate" },
    { "mlp.up_proj", "ffn_up" },
    { "mlp.down_proj", "ffn_down" },
    { "post_mlp_layernorm", "layer_output_norm" },
};


static int
nomic_orig_name(const llm_config *c, const char *hf, char *out, size_t len)
{
    const char  *kind;
    char        *end;
    size_t       i, k;
    long         layer;

    layer = strtol(hf, &end, 10);
    if (end == hf || *end != '.' || layer < 0 || layer >= c->n_layers
        || (kind = strrchr(end + 1, '.')) == NULL)
    {
        return -1;
    }
    k = (size_t) (kind - (end + 1));
    for (i = 0; i < sizeof(nomic_orig_names) / sizeof(nomic_orig_names[0]);
         i++)
    {
        if (strlen(nomic_orig_names[i].hf) == k
            && strncmp(end + 1, nomic_orig_names[i].hf, k) == 0)
        {
            snprintf(out, len, "blk.%ld.%s%s", layer,
                     nomic_orig_names[i].gguf, kind);
            return 0;
        }
    }
    return -1;
}


int
llm_bert_hf_name(const llm_model *m, const char *hf, char *out, size_t len)
{
    const llm_config  *c = &m->cfg;
    const char        *pre, *kind, *dot;
    char              *end;
    size_t             i, n, k;
    long               layer;

    if (strncmp(hf, "bert.", 5) == 0) {
        hf += 5;
    } else if (strncmp(hf, "nomic_bert.", 11) == 0) {
        hf += 11;
    }
    if (strstr(hf, "position_ids") != NULL
        || strstr(hf, "token_type_ids") != NULL)
    {
        return 1;
    }
    if (strncmp(hf, "pooler.", 7) == 0 && c->pooling != LLM_POOL_RANK) {
        return 1;       /* sentence-transformers saves BertModel's pooler */
    }
    for (i = 0; i < sizeof(bert_names) / sizeof(bert_names[0]); i++) {
        if (strcmp(hf, bert_names[i].hf) == 0) {
            snprintf(out, len, "%s", bert_names[i].gguf);
            return 0;
        }
    }
    pre = c->nomic ? "layers." : "encoder.layer.";
    n = strlen(pre);
    if (c->nomic && strncmp(hf, "encoder.layers.", 15) == 0) {
        return nomic_orig_name(c, hf + 15, out, len);
    }
    if (strncmp(hf, pre, n) != 0) {
        return -1;
    }
    layer = strtol(hf + n, &end, 10);
    if (end == hf + n || *end != '.' || layer < 0 || layer >= c->n_layers) {
        return -1;
    }
    kind = strrchr(end + 1, '.');
    if (kind == NULL) {
        return -1;
    }
    dot = end + 1;
    k = (size_t) (kind - dot);
    for (i = 0; i < (c->nomic ? sizeof(nomic_layer_names)
                                / sizeof(nomic_layer_names[0])
                              : sizeof(bert_layer_names)
                                / sizeof(bert_layer_names[0])); i++)
    {
        const char *h = c->nomic ? nomic_layer_names[i].hf
                                 : bert_layer_names[i].hf;
        const char *g = c->nomic ? nomic_layer_names[i].gguf
                                 : bert_layer_names[i].gguf;

        if (strlen(h) == k && strncmp(dot, h, k) == 0) {
            snprintf(out, len, "blk.%ld.%s%s", layer, g, kind);
            return 0;
        }
    }
    return -1;
}


/* ---------------------------------------------------------------------------
 * views
 */

static int
bert_matrix(llm_model *m, llm_bert_find_fn find, const char *name,
    int rows, int cols, int required, llm_tensor *out)
{
    const gguf_tensor  *t = find(m, name);
    char                err[256];

    memset(out, 0, sizeof(*out));
    if (t == NULL) {
        return required ? llm_model_fail(m, "tensor '%s' is missing", name) : 0;
    }
    if (t->n_dims != 2 || t->ne[0] != (uint64_t) cols
        || (rows > 0 && t->ne[1] != (uint64_t) rows))
    {
        return llm_model_fail(m, "tensor '%s': expected shape [%d, %d] (ggml "
                              "order), got [%llu, %llu] with %u dims", name,
                              cols, rows, (unsigned long long) t->ne[0],
                              (unsigned long long) t->ne[1], t->n_dims);
    }
    out->data = t->data;
    out->type = t->type;
    out->rows = (int) t->ne[1];
    out->cols = cols;
    out->row_stride = ggml_row_size(t->type, cols);
    if (llm_tensor_check(out, err, sizeof(err)) != 0) {
        return llm_model_fail(m, "tensor '%s': %s", name, err);
    }
    return 0;
}


static int
bert_vector(llm_model *m, llm_bert_find_fn find, const char *name, int n,
    int required, const float **out)
{
    const gguf_tensor  *t = find(m, name);

    *out = NULL;
    if (t == NULL) {
        return required ? llm_model_fail(m, "tensor '%s' is missing", name) : 0;
    }
    if (t->n_dims != 1 || t->ne[0] != (uint64_t) n
        || t->type != GGML_TYPE_F32)
    {
        return llm_model_fail(m, "tensor '%s': expected F32 [%d], got %s "
                              "[%llu] with %u dims", name, n,
                              ggml_type_name(t->type),
                              (unsigned long long) t->ne[0], t->n_dims);
    }
    *out = t->data;
    return 0;
}


static int
bert_layer(llm_model *m, llm_bert_find_fn find, int i, llm_bert_layer *l)
{
    const llm_config  *c = &m->cfg;
    int                d = c->dim, h = c->hidden_dim, bias = !c->nomic;
    char               n[96];

#define BLK(what)  (snprintf(n, sizeof(n), "blk.%d.%s", i, what), n)
    if (find(m, BLK("attn_qkv.weight")) != NULL) {
        /* fused (nomic's Wqkv, llama.cpp's attn_qkv): q, k, v row blocks */
        if (bert_matrix(m, find, n, 3 * d, d, 1, &l->wq) != 0) {
            return -1;
        }
        l->wk = llm_tensor_rows(&l->wq, d, d);
        l->wv = llm_tensor_rows(&l->wq, 2 * d, d);
        l->wq = llm_tensor_rows(&l->wq, 0, d);
    } else if (bert_matrix(m, find, BLK("attn_q.weight"), d, d, 1, &l->wq)
               || bert_matrix(m, find, BLK("attn_k.weight"), d, d, 1, &l->wk)
               || bert_matrix(m, find, BLK("attn_v.weight"), d, d, 1,
                              &l->wv))
    {
        return -1;
    }
    if (bert_matrix(m, find, BLK("attn_output.weight"), d, d, 1, &l->wo)
        || bert_vector(m, find, BLK("attn_q.bias"), d, bias, &l->bq)
        || bert_vector(m, find, BLK("attn_k.bias"), d, bias, &l->bk)
        || bert_vector(m, find, BLK("attn_v.bias"), d, bias, &l->bv)
        || bert_vector(m, find, BLK("attn_output.bias"), d, bias, &l->bo)
        || bert_vector(m, find, BLK("attn_output_norm.weight"), d, 1,
                       &l->attn_norm_w)
        || bert_vector(m, find, BLK("attn_output_norm.bias"), d, 1,
                       &l->attn_norm_b)
        || bert_matrix(m, find, BLK("ffn_up.weight"), h, d, 1, &l->up)
        || bert_matrix(m, find, BLK("ffn_gate.weight"), h, d, c->nomic,
                       &l->gate)
        || bert_matrix(m, find, BLK("ffn_down.weight"), d, h, 1, &l->down)
        || bert_vector(m, find, BLK("ffn_up.bias"), h, bias, &l->up_b)
        || bert_vector(m, find, BLK("ffn_down.bias"), d, bias, &l->down_b)
        || bert_vector(m, find, BLK("layer_output_norm.weight"), d, 1,
                       &l->out_norm_w)
        || bert_vector(m, find, BLK("layer_output_norm.bias"), d, 1,
                       &l->out_norm_b))
    {
        return -1;
    }
#undef BLK
    if (!c->nomic && l->gate.data != NULL) {
        return llm_model_fail(m, "layer %d: a bert layer has no ffn_gate", i);
    }
    return 0;
}


/* ---------------------------------------------------------------------------
 * the cross-encoder's head (model/score.h's hook)
 */

/*
 * logit = classifier(tanh(pooler(h))), h (dim) the [CLS] state of the last
 * layer, as transformers' BertForSequenceClassification; without a pooler
 * (llama.cpp's converter drops pooler.dense) logit = classifier(h), as
 * llama.cpp's rank pooling computes it. One row through the matmul
 * kernels, one thread: the same sums as any batch (encoder.h).
 */
static int
bert_score_head(const llm_model *m, const float *h, float *logit)
{
    const llm_bert  *b = m->bert;
    float            p[LLM_SCORE_MAX_DIM];
    int              i, d = m->cfg.dim;

    if (b == NULL || b->classifier.data == NULL || d > LLM_SCORE_MAX_DIM) {
        return -1;
    }
    if (b->pooler.data == NULL) {
        memcpy(p, h, (size_t) d * sizeof(float));
    } else {
        if (llm_matmul(NULL, p, h, 1, &b->pooler) != 0) {
            return -1;
        }
        for (i = 0; i < d; i++) {
            p[i] = tanhf(p[i] + b->pooler_b[i]);
        }
    }
    if (llm_matmul(NULL, logit, p, 1, &b->classifier) != 0) {
        return -1;
    }
    if (b->classifier_b != NULL) {
        *logit += b->classifier_b[0];
    }
    return 0;
}


/* the pooler (cls, optional) and the classifier (cls.output, one label):
   the score hook reads the [CLS] state */
static int
bert_head(llm_model *m, llm_bert_find_fn find)
{
    const gguf_tensor  *t;
    llm_config         *c = &m->cfg;
    llm_bert           *b = m->bert;
    int                 d = c->dim;

    t = find(m, "cls.output.weight");
    if (t != NULL && t->n_dims == 2 && t->ne[0] == (uint64_t) d
        && t->ne[1] != 1)
    {
        return llm_model_fail(m, "tensor 'cls.output.weight' has %llu rows: a "
                              "classifier of %llu labels is not a "
                              "cross-encoder (one label)",
                              (unsigned long long) t->ne[1],
                              (unsigned long long) t->ne[1]);
    }
    if (d > LLM_SCORE_MAX_DIM) {
        return llm_model_fail(m, "a cross-encoder of hidden size %d (at most "
                              "%d)", d, LLM_SCORE_MAX_DIM);
    }
    if (bert_matrix(m, find, "cls.weight", d, d, 0, &b->pooler)
        || bert_vector(m, find, "cls.bias", d, b->pooler.data != NULL,
                       &b->pooler_b)
        || bert_matrix(m, find, "cls.output.weight", 1, d, 1,
                       &b->classifier)
        || bert_vector(m, find, "cls.output.bias", 1, 0, &b->classifier_b))
    {
        return -1;
    }
    c->pooling = LLM_POOL_CLS;
    c->pool_normalize = 0;
    c->score = LLM_SCORE_CLASSIFIER;
    m->score_head = bert_score_head;
    return 0;
}


int
llm_bert_load(llm_model *m, llm_bert_find_fn find)
{
    llm_config  *c = &m->cfg;
    llm_bert    *b;
    int          i, d = c->dim;

    if (m->tp_size > 1) {
        return llm_model_fail(m, "tensor parallelism is not implemented for "
                              "encoders (%s)", c->arch);
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return llm_model_fail(m, "out of memory");
    }
    m->bert = b;
    b->layers = calloc(c->n_layers, sizeof(*b->layers));
    if (b->layers == NULL) {
        return llm_model_fail(m, "out of memory for %d layers", c->n_layers);
    }
    if (bert_matrix(m, find, "token_embd.weight", 0, d, 1, &m->tok_embd)
        || bert_matrix(m, find, "position_embd.weight", 0, d, !c->nomic,
                       &b->pos_embd)
        || bert_matrix(m, find, "token_types.weight", 0, d, 0, &b->type_embd)
        || bert_vector(m, find, "token_embd_norm.weight", d, 1,
                       &b->embd_norm_w)
        || bert_vector(m, find, "token_embd_norm.bias", d, 1,
                       &b->embd_norm_b))
    {
        return -1;
    }
    c->vocab_size = m->tok_embd.rows;
    m->output = m->tok_embd;
    if (b->pos_embd.data != NULL && b->pos_embd.rows < c->max_seq_len) {
        c->max_seq_len = b->pos_embd.rows;
    }
    b->n_types = b->type_embd.data != NULL ? b->type_embd.rows : 0;
    for (i = 0; i < c->n_layers; i++) {
        if (bert_layer(m, find, i, &b->layers[i]) != 0) {
            return -1;
        }
    }
    if (c->pooling != LLM_POOL_RANK) {
        return 0;
    }
    return bert_head(m, find);
}


void
llm_bert_free(llm_model *m)
{
    if (m->bert != NULL) {
        free(m->bert->layers);
        free(m->bert);
        m->bert = NULL;
    }
}
