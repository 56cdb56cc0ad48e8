/*
 * Model loading: llama-family config from GGUF metadata, and weight views
 * checked against it (see model.h for the layout and the TP split).
 *
 * defines: llm_model_load, llm_model_load_fd, llm_model_free,
 *          llm_model_weight_bytes
 */
#include "model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLM_MAX_DIM     (1 << 20)
#define LLM_MAX_LAYERS  1024


static int
model_fail(llm_model *m, const char *fmt, ...)
{
    va_list  ap;
    int      n;

    n = snprintf(m->err, sizeof(m->err), "%s: ",
                 m->gguf.path ? m->gguf.path : "(model)");
    if (n < 0 || (size_t) n >= sizeof(m->err)) {
        return -1;
    }
    va_start(ap, fmt);
    vsnprintf(m->err + n, sizeof(m->err) - n, fmt, ap);
    va_end(ap);
    return -1;
}


/* ---------------------------------------------------------------------------
 * config
 */

/* "<arch>.<suffix>" */
static const char *
arch_key(const llm_model *m, const char *suffix)
{
    static __thread char  key[128];

    snprintf(key, sizeof(key), "%s.%s", m->cfg.arch, suffix);
    return key;
}


static int
get_int(llm_model *m, const char *suffix, int *out, int required, int dflt)
{
    const char  *key = arch_key(m, suffix);
    uint64_t     v;

    if (gguf_find_kv(&m->gguf, key) == NULL) {
        if (required) {
            return model_fail(m, "metadata key '%s' is missing", key);
        }
        *out = dflt;
        return 0;
    }
    if (gguf_get_u64(&m->gguf, key, &v) != 0 || v == 0 || v > LLM_MAX_DIM) {
        return model_fail(m, "metadata key '%s' is not an integer in "
                          "1..%d", key, LLM_MAX_DIM);
    }
    *out = (int) v;
    return 0;
}


static int
get_float(llm_model *m, const char *suffix, float *out, int required,
    float dflt)
{
    const char  *key = arch_key(m, suffix);

    if (gguf_find_kv(&m->gguf, key) == NULL) {
        if (required) {
            return model_fail(m, "metadata key '%s' is missing", key);
        }
        *out = dflt;
        return 0;
    }
    if (gguf_get_f32(&m->gguf, key, out) != 0 || !(*out > 0.0f)) {
        return model_fail(m, "metadata key '%s' is not a positive float",
                          key);
    }
    return 0;
}


static int
read_arch(llm_model *m)
{
    llm_config  *c = &m->cfg;
    const char  *s;
    uint64_t     len;

    if (gguf_get_str(&m->gguf, "general.architecture", &s, &len) != 0) {
        return model_fail(m, "metadata key 'general.architecture' is "
                          "missing");
    }
    if (len >= LLM_ARCH_MAX) {
        len = LLM_ARCH_MAX - 1;
    }
    memcpy(c->arch, s, len);
    c->arch[len] = '\0';

    /* llama and mistral are the same graph; the qwens add quirks */
    if (strcmp(c->arch, "llama") == 0 || strcmp(c->arch, "mistral") == 0) {
        return 0;
    }
    if (strcmp(c->arch, "qwen2") == 0) {
        c->qkv_bias = 1;
        c->rope_neox = 1;
        return 0;
    }
    if (strcmp(c->arch, "qwen3") == 0) {
        c->qk_norm = 1;
        c->rope_neox = 1;
        return 0;
    }
    return model_fail(m, "architecture '%s' is not supported (llama, "
                      "mistral, qwen2, qwen3 are)", c->arch);
}


static int
read_config(llm_model *m)
{
    llm_config  *c = &m->cfg;
    int          key_len;

    if (read_arch(m) != 0
        || get_int(m, "embedding_length", &c->dim, 1, 0) != 0
        || get_int(m, "block_count", &c->n_layers, 1, 0) != 0
        || get_int(m, "feed_forward_length", &c->hidden_dim, 1, 0) != 0
        || get_int(m, "attention.head_count", &c->n_heads, 1, 0) != 0
        || get_int(m, "attention.head_count_kv", &c->n_kv_heads, 0,
                   c->n_heads) != 0
        || get_int(m, "context_length", &c->max_seq_len, 1, 0) != 0
        || get_float(m, "rope.freq_base", &c->rope_theta, 0, 10000.0f) != 0
        || get_float(m, "attention.layer_norm_rms_epsilon", &c->norm_eps,
                     1, 0) != 0)
    {
        return -1;
    }
    if (c->n_layers > LLM_MAX_LAYERS) {
        return model_fail(m, "%d layers is more than %d", c->n_layers,
                          LLM_MAX_LAYERS);
    }
    if (c->n_heads % c->n_kv_heads != 0) {
        return model_fail(m, "head_count %d is not a multiple of "
                          "head_count_kv %d", c->n_heads, c->n_kv_heads);
    }
    if (c->dim % c->n_heads != 0
        && gguf_find_kv(&m->gguf, arch_key(m, "attention.key_length"))
           == NULL)
    {
        return model_fail(m, "embedding_length %d is not a multiple of "
                          "head_count %d", c->dim, c->n_heads);
    }
    if (get_int(m, "attention.key_length", &key_len, 0,
                c->dim / c->n_heads) != 0)
    {
        return -1;
    }
    c->head_dim = key_len;
    if (get_int(m, "rope.dimension_count", &c->rope_dim, 0, c->head_dim)
        != 0)
    {
        return -1;
    }
    if (c->rope_dim > c->head_dim || c->rope_dim % 2 != 0) {
        return model_fail(m, "rope.dimension_count %d must be even and at "
                          "most the head size %d", c->rope_dim, c->head_dim);
    }
    return 0;
}


/* ---------------------------------------------------------------------------
 * tensors
 */

static const gguf_tensor *
find_tensor(llm_model *m, const char *name)
{
    const gguf_tensor  *t = gguf_find_tensor(&m->gguf, name);

    if (t == NULL) {
        model_fail(m, "tensor '%s' is missing", name);
    }
    return t;
}


/* a matrix with ne = (cols, rows), as a full (unsharded) view */
static int
get_matrix(llm_model *m, const char *name, int rows, int cols,
    llm_tensor *out)
{
    const gguf_tensor  *t = find_tensor(m, name);

    if (t == NULL) {
        return -1;
    }
    if (t->n_dims != 2 || t->ne[0] != (uint64_t) cols
        || t->ne[1] != (uint64_t) rows)
    {
        return model_fail(m, "tensor '%s': expected shape [%d, %d] (ggml "
                          "order: cols, rows), got [%llu, %llu, %llu, %llu] "
                          "with %u dims", name, cols, rows,
                          (unsigned long long) t->ne[0],
                          (unsigned long long) t->ne[1],
                          (unsigned long long) t->ne[2],
                          (unsigned long long) t->ne[3], t->n_dims);
    }
    out->data = t->data;
    out->type = t->type;
    out->rows = rows;
    out->cols = cols;
    out->row_stride = ggml_row_size(t->type, cols);
    return 0;
}


static int
get_vector(llm_model *m, const char *name, int n, const float **out)
{
    const gguf_tensor  *t = find_tensor(m, name);

    if (t == NULL) {
        return -1;
    }
    if (t->n_dims != 1 || t->ne[0] != (uint64_t) n) {
        return model_fail(m, "tensor '%s': expected shape [%d], got [%llu, "
                          "%llu] with %u dims", name, n,
                          (unsigned long long) t->ne[0],
                          (unsigned long long) t->ne[1], t->n_dims);
    }
    if (t->type != GGML_TYPE_F32) {
        return model_fail(m, "tensor '%s': expected type F32, got %s", name,
                          ggml_type_name(t->type));
    }
    *out = t->data;
    return 0;
}


/* this rank's shard of a full view; the split must fall on whole rows
 * (column-split) or whole quantization blocks (row-split) */
static int
shard(llm_model *m, const char *name, llm_tensor *t, int column_split)
{
    char      err[256];
    int       tp = m->tp_size, r = m->tp_rank, n;
    uint32_t  block = ggml_type_block(t->type);

    if (column_split) {
        n = t->rows / tp;
        *t = llm_tensor_rows(t, r * n, n);
    } else {
        n = t->cols / tp;
        if (t->cols % tp != 0 || n % block != 0) {
            return model_fail(m, "tensor '%s' (%s, %d cols) cannot be split "
                              "by whole %u-element blocks in %d parts", name,
                              ggml_type_name(t->type), t->cols, block, tp);
        }
        *t = llm_tensor_cols(t, r * n, n);
    }
    if (llm_tensor_check(t, err, sizeof(err)) != 0) {
        return model_fail(m, "tensor '%s': %s", name, err);
    }
    return 0;
}


static int
get_split(llm_model *m, int layer, const char *what, int rows, int cols,
    int column_split, llm_tensor *out)
{
    char  name[96];

    snprintf(name, sizeof(name), "blk.%d.%s.weight", layer, what);
    if (get_matrix(m, name, rows, cols, out) != 0) {
        return -1;
    }
    return shard(m, name, out, column_split);
}


static int
get_layer_vector(llm_model *m, int layer, const char *what, int n,
    const float **out)
{
    char  name[96];

    snprintf(name, sizeof(name), "blk.%d.%s", layer, what);
    return get_vector(m, name, n, out);
}


static int
load_layer(llm_model *m, int i)
{
    llm_config  *c = &m->cfg;
    llm_layer   *l = &m->layers[i];
    int          q_dim = c->n_heads * c->head_dim;
    int          kv_dim = c->n_kv_heads * c->head_dim;
    int          tp = m->tp_size, r = m->tp_rank;

    if (get_layer_vector(m, i, "attn_norm.weight", c->dim, &l->attn_norm)
        || get_split(m, i, "attn_q", q_dim, c->dim, 1, &l->wq)
        || get_split(m, i, "attn_k", kv_dim, c->dim, 1, &l->wk)
        || get_split(m, i, "attn_v", kv_dim, c->dim, 1, &l->wv)
        || get_split(m, i, "attn_output", c->dim, q_dim, 0, &l->wo)
        || get_layer_vector(m, i, "ffn_norm.weight", c->dim, &l->ffn_norm)
        || get_split(m, i, "ffn_gate", c->hidden_dim, c->dim, 1, &l->w_gate)
        || get_split(m, i, "ffn_up", c->hidden_dim, c->dim, 1, &l->w_up)
        || get_split(m, i, "ffn_down", c->dim, c->hidden_dim, 0, &l->w_down))
    {
        return -1;
    }
    if (c->qkv_bias) {
        if (get_layer_vector(m, i, "attn_q.bias", q_dim, &l->bq)
            || get_layer_vector(m, i, "attn_k.bias", kv_dim, &l->bk)
            || get_layer_vector(m, i, "attn_v.bias", kv_dim, &l->bv))
        {
            return -1;
        }
        l->bq += r * (q_dim / tp);
        l->bk += r * (kv_dim / tp);
        l->bv += r * (kv_dim / tp);
    }
    if (c->qk_norm) {
        if (get_layer_vector(m, i, "attn_q_norm.weight", c->head_dim,
                             &l->q_norm)
            || get_layer_vector(m, i, "attn_k_norm.weight", c->head_dim,
                                &l->k_norm))
        {
            return -1;
        }
    }
    return 0;
}


static int
load_weights(llm_model *m)
{
    llm_config          *c = &m->cfg;
    const gguf_tensor   *t;
    uint64_t             vocab;
    int                  i;

    t = find_tensor(m, "token_embd.weight");
    if (t == NULL) {
        return -1;
    }
    if (t->n_dims != 2 || t->ne[1] > LLM_MAX_DIM * 4) {
        return model_fail(m, "tensor 'token_embd.weight' must be 2-D with at "
                          "most %d rows", LLM_MAX_DIM * 4);
    }
    c->vocab_size = (int) t->ne[1];
    if (gguf_get_u64(&m->gguf, arch_key(m, "vocab_size"), &vocab) == 0
        && vocab != (uint64_t) c->vocab_size)
    {
        return model_fail(m, "%s is %llu but token_embd.weight has %d rows",
                          arch_key(m, "vocab_size"),
                          (unsigned long long) vocab, c->vocab_size);
    }
    if (get_matrix(m, "token_embd.weight", c->vocab_size, c->dim,
                   &m->tok_embd) != 0
        || get_vector(m, "output_norm.weight", c->dim, &m->out_norm) != 0)
    {
        return -1;
    }
    c->tied_output = gguf_find_tensor(&m->gguf, "output.weight") == NULL;
    if (c->tied_output) {
        m->output = m->tok_embd;
    } else if (get_matrix(m, "output.weight", c->vocab_size, c->dim,
                          &m->output) != 0)
    {
        return -1;
    }

    if (c->n_heads % m->tp_size || c->n_kv_heads % m->tp_size
        || c->hidden_dim % m->tp_size)
    {
        return model_fail(m, "tensor parallel size %d does not divide the "
                          "heads (%d, kv %d) and hidden size %d", m->tp_size,
                          c->n_heads, c->n_kv_heads, c->hidden_dim);
    }
    m->layers = calloc(c->n_layers, sizeof(llm_layer));
    if (m->layers == NULL) {
        return model_fail(m, "out of memory for %d layers", c->n_layers);
    }
    for (i = 0; i < c->n_layers; i++) {
        if (load_layer(m, i) != 0) {
            return -1;
        }
    }
    return 0;
}


static int
model_finish_load(llm_model *m, int rc)
{
    if (rc != 0) {
        snprintf(m->err, sizeof(m->err), "%s", m->gguf.err);
        return -1;
    }
    if (read_config(m) != 0 || load_weights(m) != 0) {
        return -1;
    }
    return 0;
}


static int
model_init(llm_model *m, int tp_rank, int tp_size)
{
    memset(m, 0, sizeof(*m));
    m->gguf.fd = -1;
    if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size) {
        snprintf(m->err, sizeof(m->err), "tensor parallel rank %d of %d is "
                 "invalid", tp_rank, tp_size);
        return -1;
    }
    m->tp_rank = tp_rank;
    m->tp_size = tp_size;
    return 0;
}


int
llm_model_load(llm_model *m, const char *path, int tp_rank, int tp_size)
{
    if (model_init(m, tp_rank, tp_size) != 0) {
        return -1;
    }
    return model_finish_load(m, gguf_open(&m->gguf, path));
}


int
llm_model_load_fd(llm_model *m, int fd, const char *path_for_messages,
    int tp_rank, int tp_size)
{
    if (model_init(m, tp_rank, tp_size) != 0) {
        return -1;
    }
    return model_finish_load(m, gguf_open_fd(&m->gguf, fd,
                                             path_for_messages));
}


void
llm_model_free(llm_model *m)
{
    free(m->layers);
    m->layers = NULL;
    gguf_close(&m->gguf);
}


static uint64_t
view_bytes(const llm_tensor *t)
{
    return (uint64_t) t->rows * ggml_row_size(t->type, t->cols);
}


uint64_t
llm_model_weight_bytes(const llm_model *m)
{
    const llm_config  *c = &m->cfg;
    uint64_t           b = 0;
    int                i;

    for (i = 0; i < c->n_layers; i++) {
        const llm_layer *l = &m->layers[i];

        b += view_bytes(&l->wq) + view_bytes(&l->wk) + view_bytes(&l->wv)
             + view_bytes(&l->wo) + view_bytes(&l->w_gate)
             + view_bytes(&l->w_up) + view_bytes(&l->w_down)
             + 2 * (uint64_t) c->dim * sizeof(float);
    }
    b += ggml_row_size(m->tok_embd.type, c->dim);    /* one embedding row */
    b += view_bytes(&m->output) + (uint64_t) c->dim * sizeof(float);
    return b;
}
