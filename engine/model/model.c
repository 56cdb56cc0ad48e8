/*
 * Model loading: llama-family config from GGUF metadata or a Hugging Face
 * config.json, and weight views checked against it (see model.h for the
 * layout, the TP split and how HF tensors become GGUF-named views).
 *
 * defines: llm_model_load, llm_model_load_fd, llm_model_free,
 *          llm_model_weight_bytes, llm_model_rope_inv_freq,
 *          llm_model_rope_inv_freq_local, llm_config_layer_window,
 *          llm_model_tokenizer, llm_model_chat_template,
 *          llm_hf_chat_template
 */
#include "format/hf_config.h"
#include "model/bert.h"
#include "model/gpt_oss.h"
#include "model/model.h"
#include "model/moe.h"
#include "quant.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#define LLM_MAX_DIM     (1 << 20)
#define LLM_MAX_LAYERS  1024


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
            return llm_model_fail(m, "metadata key '%s' is missing", key);
        }
        *out = dflt;
        return 0;
    }
    if (gguf_get_u64(&m->gguf, key, &v) != 0 || v == 0 || v > LLM_MAX_DIM) {
        return llm_model_fail(m, "metadata key '%s' is not an integer in "
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
            return llm_model_fail(m, "metadata key '%s' is missing", key);
        }
        *out = dflt;
        return 0;
    }
    if (gguf_get_f32(&m->gguf, key, out) != 0 || !(*out > 0.0f)) {
        return llm_model_fail(m, "metadata key '%s' is not a positive float",
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
        return llm_model_fail(m, "metadata key 'general.architecture' is "
                              "missing");
    }
    if (len >= LLM_ARCH_MAX) {
        len = LLM_ARCH_MAX - 1;
    }
    memcpy(c->arch, s, len);
    c->arch[len] = '\0';

    /* encoders: their own config and views (bert.c) */
    if (llm_bert_arch(c->arch)) {
        return 0;
    }
    /* llama and mistral are the same graph; the qwens add quirks */
    if (strcmp(c->arch, "llama") == 0 || strcmp(c->arch, "mistral") == 0) {
        return 0;
    }
    if (strcmp(c->arch, "qwen2") == 0) {
        c->qkv_bias = 1;
        c->rope_neox = 1;
        return 0;
    }
    if (llm_gpt_oss_arch(c->arch)) {
        c->gpt_oss = c->router_topk_softmax = c->swiglu_oai = 1;
        c->qkv_bias = 1;
        c->rope_neox = 1;
        return 0;
    }
    if (strcmp(c->arch, "qwen3") == 0 || llm_moe_arch(c->arch)) {
        c->qk_norm = 1;
        c->rope_neox = 1;
        return 0;
    }
    if (strcmp(c->arch, "gemma3") == 0) {
        c->gemma = 1;
        c->qk_norm = 1;
        c->rope_neox = 1;
        return 0;
    }
    return llm_model_fail(m, "architecture '%s' is not supported (llama, "
                          "mistral, qwen2, qwen3, qwen3moe, gemma3, gpt-oss, "
                          "bert, nomic-bert are)", c->arch);
}


/*
 * attention.sliding_window_pattern: gguf-py writes an integer n (a global
 * layer every n-th) or one bool per layer (true: sliding); the bools must
 * make such a pattern. Absent: dflt (llama.cpp fixes 6 for gemma3, 2 for
 * gpt-oss).
 */
static int
gguf_swa_pattern(llm_model *m, int dflt)
{
    llm_config     *c = &m->cfg;
    const char     *key = arch_key(m, "attention.sliding_window_pattern");
    const uint8_t  *b;
    const void     *data;
    uint32_t        type;
    uint64_t        n, i;

    if (gguf_get_arr(&m->gguf, key, &type, &n, &data) != 0) {
        return get_int(m, "attention.sliding_window_pattern",
                       &c->swa_pattern, 0, dflt);
    }
    if (type != GGUF_TYPE_BOOL || n != (uint64_t) c->n_layers) {
        return llm_model_fail(m, "metadata key '%s' must be an integer or %d "
                              "bools", key, c->n_layers);
    }
    b = data;
    for (i = 0; i < n && b[i]; i++) {
        /* the first global layer */
    }
    c->swa_pattern = (int) i + 1;
    for (i = 0; i < n; i++) {
        if ((b[i] != 0) != (llm_config_layer_window(c, (int) i) != 0)) {
            return llm_model_fail(m, "metadata key '%s' is not a global layer "
                                  "every %d (the only pattern supported)", key,
                                  c->swa_pattern);
        }
    }
    return 0;
}


/*
 * gemma3 in GGUF (llama.cpp's keys): the window, the local/global pattern
 * (llama.cpp fixes it at 6; our oracle writes sliding_window_pattern for
 * its tiny model), the local rope base (llama.cpp: 10000 unless
 * rope.freq_base_swa), linear rope scaling of the global layers, and the
 * attention scale, which llama.cpp derives: 1/sqrt(head_dim), for 27B (62
 * layers) 1/sqrt(dim/heads), what query_pre_attn_scalar says for each
 * size (query_pre_attn_scalar when written, as our oracle does). The
 * norms' weights are stored as 1 + w by the converter.
 */
static int
read_gemma3(llm_model *m)
{
    llm_config  *c = &m->cfg;
    const char  *type;
    uint64_t     len;
    float        q_scalar;
    int          scalar;

    scalar = c->n_layers == 62 ? c->dim / c->n_heads : c->head_dim;
    if (get_int(m, "attention.sliding_window", &c->sliding_window, 1, 0)
        || gguf_swa_pattern(m, 6)
        || get_float(m, "rope.freq_base_swa", &c->rope_theta_local, 0,
                     10000.0f)
        || get_float(m, "rope.scaling.factor", &c->rope_linear, 0, 1.0f)
        || get_float(m, "attention.query_pre_attn_scalar", &q_scalar, 0,
                     (float) scalar))
    {
        return -1;
    }
    if (gguf_get_str(&m->gguf, arch_key(m, "rope.scaling.type"), &type,
                     &len) == 0
        && !(len == 6 && memcmp(type, "linear", 6) == 0)
        && !(len == 4 && memcmp(type, "none", 4) == 0))
    {
        return llm_model_fail(m, "%s '%.*s' is not supported (linear is)",
                              arch_key(m, "rope.scaling.type"),
                              (int) (len < 32 ? len : 32), type);
    }
    c->att_scale = (float) (1.0 / sqrt((double) q_scalar));
    return 0;
}


/* YaRN's parameters in range; the attention factor defaults to 0.1
 * ln(factor) + 1 (transformers' get_mscale, llama.cpp's) and scales cos
 * and sin of q and k both, so scores by its square: folded into
 * att_scale, which needs every dimension rotated */
static int
yarn_check(llm_model *m)
{
    llm_config  *c = &m->cfg;

    if (!(c->rope_factor >= 1.0f) || !(c->rope_orig_ctx >= 1.0f)
        || !(c->rope_yarn_beta_fast > 0.0f)
        || !(c->rope_yarn_beta_slow > 0.0f))
    {
        return llm_model_fail(m, "yarn rope scaling needs factor >= 1, an "
                              "original context >= 1 and positive betas");
    }
    if (c->rope_dim != c->head_dim) {
        return llm_model_fail(m, "yarn rope scaling with a partial rotary "
                              "dimension (%d of %d) is not supported",
                              c->rope_dim, c->head_dim);
    }
    if (c->rope_yarn_attn == 0.0f) {
        c->rope_yarn_attn = c->rope_factor <= 1.0f ? 1.0f
            : (float) (0.1 * log((double) c->rope_factor) + 1.0);
    }
    return 0;
}


/* YaRN in GGUF (llama.cpp's keys): rope.scaling.type "yarn" with
 * rope.scaling.factor, original_context_length and yarn_beta_fast/slow;
 * llama.cpp always truncates the ramp's ends and takes the attention
 * factor as 0.1 ln(factor) + 1 */
static int
gguf_yarn(llm_model *m)
{
    llm_config  *c = &m->cfg;
    const char  *type;
    uint64_t     len;
    int          orig;

    if (gguf_get_str(&m->gguf, arch_key(m, "rope.scaling.type"), &type,
                     &len) != 0
        || !(len == 4 && memcmp(type, "yarn", 4) == 0))
    {
        return 0;
    }
    c->rope_yarn = 1;
    c->rope_yarn_truncate = 1;
    if (get_float(m, "rope.scaling.factor", &c->rope_factor, 1, 0) != 0
        || get_int(m, "rope.scaling.original_context_length", &orig, 1, 0)
           != 0
        || get_float(m, "rope.scaling.yarn_beta_fast",
                     &c->rope_yarn_beta_fast, 0, 32.0f) != 0
        || get_float(m, "rope.scaling.yarn_beta_slow",
                     &c->rope_yarn_beta_slow, 0, 1.0f) != 0)
    {
        return -1;
    }
    c->rope_orig_ctx = (float) orig;
    /* gpt-oss's published config says truncate false, which transformers
     * follows (llama.cpp truncates every model's ramp) */
    c->rope_yarn_truncate = !c->gpt_oss;
    return yarn_check(m);
}


/* what every architecture derives the same way once its keys are read */
static void
config_finish(llm_config *c)
{
    if (c->att_scale == 0.0f) {
        c->att_scale = 1.0f / sqrtf((float) c->head_dim);
    }
    if (c->rope_yarn) {
        c->att_scale *= c->rope_yarn_attn * c->rope_yarn_attn;
    }
    if (c->rope_theta_local == 0.0f) {
        c->rope_theta_local = c->rope_theta;
    }
    if (c->rope_linear == 0.0f) {
        c->rope_linear = 1.0f;
    }
    /* transformers: hidden_size ** 0.5 as a float32 tensor (in a bf16
       run rounded to bf16; our activations are float32, as llama.cpp's) */
    c->embd_scale = c->gemma ? sqrtf((float) c->dim) : 1.0f;
}


int
llm_config_layer_window(const llm_config *c, int layer)
{
    if (c->swa_pattern > 0 && (layer + 1) % c->swa_pattern == 0) {
        return 0;
    }
    return c->sliding_window;
}


int
llm_config_kv_layout(const llm_config *c, llm_kv_layout *lo, int *group,
    int *slot)
{
    int  i, *w = malloc((c->n_layers > 0 ? c->n_layers : 1) * sizeof(int));

    if (w == NULL) {
        return -1;
    }
    /* an encoder attends to every position: no window drops anything */
    for (i = 0; i < c->n_layers; i++) {
        w[i] = c->encoder ? 0 : llm_config_layer_window(c, i);
    }
    llm_kv_layout_of(lo, w, c->n_layers);
    for (i = 0; group != NULL && i < c->n_layers; i++) {
        llm_kv_layer_page(lo, w, i, &group[i], &slot[i]);
    }
    free(w);
    return 0;
}


static int
read_config(llm_model *m)
{
    llm_config  *c = &m->cfg;
    int          key_len;

    if (read_arch(m) != 0) {
        return -1;
    }
    if (llm_bert_arch(c->arch)) {
        return llm_bert_config_gguf(m);
    }
    if (get_int(m, "embedding_length", &c->dim, 1, 0) != 0
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
        return llm_model_fail(m, "%d layers is more than %d", c->n_layers,
                              LLM_MAX_LAYERS);
    }
    if (c->n_heads % c->n_kv_heads != 0) {
        return llm_model_fail(m, "head_count %d is not a multiple of "
                              "head_count_kv %d", c->n_heads, c->n_kv_heads);
    }
    if (c->dim % c->n_heads != 0
        && gguf_find_kv(&m->gguf, arch_key(m, "attention.key_length"))
           == NULL)
    {
        return llm_model_fail(m, "embedding_length %d is not a multiple of "
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
        return llm_model_fail(m, "rope.dimension_count %d must be even and at "
                              "most the head size %d", c->rope_dim,
                              c->head_dim);
    }
    if (llm_moe_arch(c->arch) && llm_moe_gguf_config(m) != 0) {
        return -1;
    }
    if (c->gemma) {
        if (read_gemma3(m) != 0) {
            return -1;
        }
    } else if (c->gpt_oss) {
        /* llama.cpp's gpt-oss keys: the window, a global layer every
         * second unless the pattern key says otherwise */
        if (get_int(m, "attention.sliding_window", &c->sliding_window, 1, 0)
            || gguf_swa_pattern(m, 2) || gguf_yarn(m))
        {
            return -1;
        }
    } else if (get_int(m, "attention.sliding_window", &c->sliding_window, 0,
                       0) != 0
               || gguf_yarn(m) != 0)
    {
        return -1;
    }
    config_finish(c);
    return 0;
}


/* ---------------------------------------------------------------------------
 * tensors
 */

/* a tensor by GGUF name in either format; NULL if absent */
static const gguf_tensor *
lookup_tensor(const llm_model *m, const char *name)
{
    int  i;

    if (!m->hf) {
        return gguf_find_tensor(&m->gguf, name);
    }
    for (i = 0; i < m->n_hf_tensors; i++) {
        if (strcmp(m->hf_tensors[i].name, name) == 0) {
            return &m->hf_tensors[i];
        }
    }
    return NULL;
}


static const gguf_tensor *
find_tensor(llm_model *m, const char *name)
{
    const gguf_tensor  *t = lookup_tensor(m, name);

    if (t == NULL) {
        llm_model_fail(m, "tensor '%s' is missing", name);
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
        return llm_model_fail(m, "tensor '%s': expected shape [%d, %d] (ggml "
                              "order: cols, rows), got [%llu, %llu, %llu, "
                              "%llu] with %u dims", name, cols, rows,
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
        return llm_model_fail(m, "tensor '%s': expected shape [%d], got [%llu, "
                              "%llu] with %u dims", name, n,
                              (unsigned long long) t->ne[0],
                              (unsigned long long) t->ne[1], t->n_dims);
    }
    if (t->type != GGML_TYPE_F32) {
        return llm_model_fail(m, "tensor '%s': expected type F32, got %s", name,
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
            return llm_model_fail(m, "tensor '%s' (%s, %d cols) cannot be "
                                  "split by whole %u-element blocks in %d "
                                  "parts", name, ggml_type_name(t->type),
                                  t->cols, block, tp);
        }
        *t = llm_tensor_cols(t, r * n, n);
    }
    if (llm_tensor_check(t, err, sizeof(err)) != 0) {
        return llm_model_fail(m, "tensor '%s': %s", name, err);
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
        || get_layer_vector(m, i, c->gpt_oss ? "post_attention_norm.weight"
                                             : "ffn_norm.weight", c->dim,
                            &l->ffn_norm))
    {
        return -1;
    }
    if (c->n_expert > 0) {
        if (llm_moe_load_layer(m, i, lookup_tensor) != 0
            || (c->gpt_oss && llm_gpt_oss_load_layer(m, i, lookup_tensor)))
        {
            return -1;
        }
    } else if (get_split(m, i, "ffn_gate", c->hidden_dim, c->dim, 1,
                         &l->w_gate)
               || get_split(m, i, "ffn_up", c->hidden_dim, c->dim, 1,
                            &l->w_up)
               || get_split(m, i, "ffn_down", c->dim, c->hidden_dim, 0,
                            &l->w_down))
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
    if (c->gemma) {
        if (get_layer_vector(m, i, "post_attention_norm.weight", c->dim,
                             &l->attn_post_norm)
            || get_layer_vector(m, i, "post_ffw_norm.weight", c->dim,
                                &l->ffn_post_norm))
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

    if (c->encoder) {
        return llm_bert_load(m, lookup_tensor);
    }
    t = find_tensor(m, "token_embd.weight");
    if (t == NULL) {
        return -1;
    }
    if (t->n_dims != 2 || t->ne[1] > LLM_MAX_DIM * 4) {
        return llm_model_fail(m, "tensor 'token_embd.weight' must be 2-D with "
                              "at most %d rows", LLM_MAX_DIM * 4);
    }
    c->vocab_size = (int) t->ne[1];
    if (gguf_get_u64(&m->gguf, arch_key(m, "vocab_size"), &vocab) == 0
        && vocab != (uint64_t) c->vocab_size)
    {
        return llm_model_fail(m, "%s is %llu but token_embd.weight has %d rows",
                              arch_key(m, "vocab_size"),
                              (unsigned long long) vocab, c->vocab_size);
    }
    if (get_matrix(m, "token_embd.weight", c->vocab_size, c->dim,
                   &m->tok_embd) != 0
        || get_vector(m, "output_norm.weight", c->dim, &m->out_norm) != 0)
    {
        return -1;
    }
    c->tied_output = lookup_tensor(m, "output.weight") == NULL;
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
        return llm_model_fail(m, "tensor parallel size %d does not divide the "
                              "heads (%d, kv %d) and hidden size %d",
                              m->tp_size, c->n_heads, c->n_kv_heads,
                              c->hidden_dim);
    }
    if (c->n_expert > 0 && m->tp_size > 1) {
        return llm_model_fail(m, "tensor parallelism is not implemented for "
                              "mixture-of-experts models (%s)", c->arch);
    }
    m->layers = calloc(c->n_layers, sizeof(llm_layer));
    if (c->n_expert > 0 && m->layers != NULL) {
        m->experts = calloc((size_t) c->n_layers * 3 * c->n_expert,
                            sizeof(llm_tensor));
    }
    if (m->layers == NULL || (c->n_expert > 0 && m->experts == NULL)) {
        return llm_model_fail(m, "out of memory for %d layers", c->n_layers);
    }
    for (i = 0; i < c->n_layers; i++) {
        if (load_layer(m, i) != 0) {
            return -1;
        }
    }
    /* llama3 rope scaling in GGUF: per-frequency divisors */
    if (!m->hf && lookup_tensor(m, "rope_freqs.weight") != NULL
        && get_vector(m, "rope_freqs.weight", c->rope_dim / 2,
                      &c->rope_freqs) != 0)
    {
        return -1;
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
    if (read_config(m) != 0 || load_weights(m) != 0
        || llm_model_pooling_gguf(m) != 0)
    {
        return -1;
    }
    return 0;
}


static int hf_load(llm_model *m, int dirfd);


static int
model_init(llm_model *m, const char *path, int tp_rank, int tp_size)
{
    memset(m, 0, sizeof(*m));
    m->gguf.fd = -1;
    m->path = strdup(path ? path : "(model)");
    if (m->path == NULL) {
        snprintf(m->err, sizeof(m->err), "%s: out of memory", path);
        return -1;
    }
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
    struct stat  st;
    int          fd, rc;

    if (model_init(m, path, tp_rank, tp_size) != 0) {
        return -1;
    }
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            return llm_model_fail(m, "cannot open directory: %s",
                                  strerror(errno));
        }
        rc = hf_load(m, fd);
        close(fd);
        return rc;
    }
    return model_finish_load(m, gguf_open(&m->gguf, path));
}


int
llm_model_load_fd(llm_model *m, int fd, const char *path_for_messages,
    int tp_rank, int tp_size)
{
    struct stat  st;

    if (model_init(m, path_for_messages, tp_rank, tp_size) != 0) {
        return -1;
    }
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        return hf_load(m, fd);
    }
    return model_finish_load(m, gguf_open_fd(&m->gguf, fd,
                                             path_for_messages));
}


void
llm_model_free(llm_model *m)
{
    int  i;

    free(m->layers);
    m->layers = NULL;
    llm_bert_free(m);
    free(m->experts);
    m->experts = NULL;
    gguf_close(&m->gguf);
    for (i = 0; i < m->n_hf_tensors; i++) {
        free(m->hf_tensors[i].name);
    }
    free(m->hf_tensors);
    m->hf_tensors = NULL;
    m->n_hf_tensors = 0;
    for (i = 0; i < m->n_st; i++) {
        st_close(&m->st[i]);
    }
    free(m->st);
    m->st = NULL;
    m->n_st = 0;
    for (i = 0; i < m->n_owned; i++) {
        free(m->owned[i]);
    }
    free(m->owned);
    m->owned = NULL;
    m->n_owned = 0;
    free(m->path);
    m->path = NULL;
}


/* ---------------------------------------------------------------------------
 * Hugging Face directories
 */

#define HF_MAX_SHARDS  1024


/* n floats owned by the model (freed with it) */
static float *
own_floats(llm_model *m, size_t n)
{
    return llm_model_own(m, n * sizeof(float));
}


static cJSON *
json_at(llm_model *m, int dirfd, const char *name, int required)
{
    char    err[512];
    char   *text;
    size_t  len;
    cJSON  *j;

    text = llm_hf_read_at(dirfd, m->path, name, required, &len, err,
                          sizeof(err));
    if (text == NULL) {
        if (err[0] != '\0') {
            snprintf(m->err, sizeof(m->err), "%s", err);
        }
        return NULL;
    }
    j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        llm_model_fail(m, "%s is not a JSON object", name);
        return NULL;
    }
    return j;
}


/* config.json integer in 1..LLM_MAX_DIM; absent or null: dflt */
static int
cfg_int(llm_model *m, const cJSON *root, const char *key, int required,
    int dflt, int *out)
{
    const cJSON  *v = cJSON_GetObjectItemCaseSensitive(root, key);
    double        d;

    if (v == NULL || cJSON_IsNull(v)) {
        if (required) {
            return llm_model_fail(m, "config.json: \"%s\" is missing", key);
        }
        *out = dflt;
        return 0;
    }
    d = cJSON_GetNumberValue(v);
    if (!cJSON_IsNumber(v) || !(d >= 1 && d <= LLM_MAX_DIM) || d != (int) d) {
        return llm_model_fail(m, "config.json: \"%s\" is not an integer in "
                              "1..%d", key, LLM_MAX_DIM);
    }
    *out = (int) d;
    return 0;
}


static int
cfg_float(llm_model *m, const cJSON *root, const char *key, int required,
    float dflt, float *out)
{
    const cJSON  *v = cJSON_GetObjectItemCaseSensitive(root, key);

    if (v == NULL || cJSON_IsNull(v)) {
        if (required) {
            return llm_model_fail(m, "config.json: \"%s\" is missing", key);
        }
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


static int
cfg_true(const cJSON *root, const char *key)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, key));
}


/*
 * Rope: rope_theta and rope_scaling (transformers 4) or rope_parameters
 * (transformers 5, theta inside). Only "default" and "llama3" scaling are
 * implemented; anything else is refused rather than run wrong.
 */
/* transformers' _compute_yarn_parameters: factor and
 * original_max_position_embeddings required, beta_fast 32, beta_slow 1,
 * truncate true, attention_factor from factor (DeepSeek's mscale and
 * mscale_all_dim are refused by name) */
static int
hf_yarn(llm_model *m, const cJSON *sc)
{
    llm_config    *c = &m->cfg;
    const cJSON   *tr = cJSON_GetObjectItemCaseSensitive(sc, "truncate");

    if (cJSON_GetObjectItemCaseSensitive(sc, "mscale") != NULL
        || cJSON_GetObjectItemCaseSensitive(sc, "mscale_all_dim") != NULL)
    {
        return llm_model_fail(m, "config.json: yarn rope scaling with mscale "
                              "or mscale_all_dim is not supported");
    }
    if (tr != NULL && !cJSON_IsNull(tr) && !cJSON_IsBool(tr)) {
        return llm_model_fail(m, "config.json: yarn \"truncate\" is not a "
                              "boolean");
    }
    c->rope_yarn = 1;
    c->rope_yarn_truncate = !cJSON_IsFalse(tr);
    if (cfg_float(m, sc, "factor", 1, 0, &c->rope_factor) != 0
        || cfg_float(m, sc, "original_max_position_embeddings", 1, 0,
                     &c->rope_orig_ctx) != 0
        || cfg_float(m, sc, "beta_fast", 0, 32.0f, &c->rope_yarn_beta_fast)
           != 0
        || cfg_float(m, sc, "beta_slow", 0, 1.0f, &c->rope_yarn_beta_slow)
           != 0
        || cfg_float(m, sc, "attention_factor", 0, 0.0f,
                     &c->rope_yarn_attn) != 0)
    {
        return -1;
    }
    return yarn_check(m);
}


static int
hf_rope(llm_model *m, const cJSON *root)
{
    llm_config    *c = &m->cfg;
    const cJSON   *sc, *type;
    const char    *name;

    sc = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (!cJSON_IsObject(sc)) {
        sc = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    }
    if (cfg_float(m, root, "rope_theta", 0, 10000.0f, &c->rope_theta) != 0
        || (cJSON_IsObject(sc)
            && cJSON_GetObjectItemCaseSensitive(sc, "rope_theta") != NULL
            && cfg_float(m, sc, "rope_theta", 1, 0, &c->rope_theta) != 0))
    {
        return -1;
    }
    if (sc == NULL || cJSON_IsNull(sc)) {
        return 0;
    }
    if (!cJSON_IsObject(sc)) {
        return llm_model_fail(m, "config.json: \"rope_scaling\" is not an "
                              "object");
    }
    type = cJSON_GetObjectItemCaseSensitive(sc, "rope_type");
    if (type == NULL) {
        type = cJSON_GetObjectItemCaseSensitive(sc, "type");
    }
    name = cJSON_IsString(type) ? type->valuestring : "default";
    if (strcmp(name, "default") == 0) {
        return 0;
    }
    if (strcmp(name, "yarn") == 0) {
        return hf_yarn(m, sc);
    }
    if (strcmp(name, "llama3") != 0) {
        return llm_model_fail(m, "config.json: rope scaling type \"%.32s\" is "
                              "not supported (default, llama3, yarn are)",
                              name);
    }
    c->rope_llama3 = 1;
    if (cfg_float(m, sc, "factor", 1, 0, &c->rope_factor) != 0
        || cfg_float(m, sc, "low_freq_factor", 1, 0,
                     &c->rope_low_freq_factor) != 0
        || cfg_float(m, sc, "high_freq_factor", 1, 0,
                     &c->rope_high_freq_factor) != 0
        || cfg_float(m, sc, "original_max_position_embeddings", 1, 0,
                     &c->rope_orig_ctx) != 0)
    {
        return -1;
    }
    if (!(c->rope_high_freq_factor > c->rope_low_freq_factor)) {
        return llm_model_fail(m, "config.json: llama3 rope scaling needs "
                              "high_freq_factor > low_freq_factor");
    }
    return 0;
}


static int
hf_arch(llm_model *m, const cJSON *root)
{
    llm_config   *c = &m->cfg;
    const cJSON  *type = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const cJSON  *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");

    if (!cJSON_IsString(type)) {
        return llm_model_fail(m, "config.json: \"model_type\" is missing");
    }
    snprintf(c->arch, sizeof(c->arch), "%s", type->valuestring);
    if (strcmp(c->arch, "qwen2") == 0) {
        c->qkv_bias = 1;
    } else if (llm_gpt_oss_arch(c->arch)) {
        c->gpt_oss = c->router_topk_softmax = c->swiglu_oai = 1;
        c->qkv_bias = 1;      /* and o_proj's bias (gpt_oss.c) */
    } else if (strcmp(c->arch, "qwen3") == 0 || llm_moe_arch(c->arch)) {
        c->qk_norm = 1;
    } else if (strcmp(c->arch, "llama") != 0
               && strcmp(c->arch, "mistral") != 0)
    {
        return llm_model_fail(m, "config.json: model_type \"%s\" is not "
                              "supported (llama, mistral, qwen2, qwen3, "
                              "qwen3_moe, gemma3_text, gemma3, gpt_oss are)",
                              c->arch);
    }
    c->rope_neox = 1;     /* HF's rotate-half Q/K order, see model.h */
    if (act != NULL && !(cJSON_IsString(act)
                         && strcmp(act->valuestring, "silu") == 0))
    {
        return llm_model_fail(m, "config.json: hidden_act must be \"silu\"");
    }
    if ((cfg_true(root, "attention_bias") && !c->gpt_oss)
        || cfg_true(root, "mlp_bias"))
    {
        return llm_model_fail(m, "config.json: attention_bias / mlp_bias (bias "
                              "on every projection) is not supported");
    }
    return 0;
}


/* gemma3 (multimodal, 4B and larger) nests the text model's config under
 * text_config; gemma3_text (270M, 1B) and every other type do not */
static const cJSON *
hf_text_config(const cJSON *root)
{
    const cJSON  *type = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const cJSON  *text = cJSON_GetObjectItemCaseSensitive(root,
                                                          "text_config");

    if (cJSON_IsString(type) && strcmp(type->valuestring, "gemma3") == 0
        && cJSON_IsObject(text))
    {
        return text;
    }
    return root;
}


static int
cfg_null(const cJSON *root, const char *key)
{
    const cJSON  *v = cJSON_GetObjectItemCaseSensitive(root, key);

    return v == NULL || cJSON_IsNull(v);
}


/* one layer type's rope of transformers 5's per-type rope_parameters:
 * theta, and "linear" scaling's factor (default: none) */
static int
hf_gemma3_rope_type(llm_model *m, const cJSON *rp, const char *kind,
    float *theta, float *factor)
{
    const cJSON  *p = cJSON_GetObjectItemCaseSensitive(rp, kind);
    const cJSON  *type;
    const char   *name;

    if (!cJSON_IsObject(p)) {
        return 0;
    }
    type = cJSON_GetObjectItemCaseSensitive(p, "rope_type");
    name = cJSON_IsString(type) ? type->valuestring : "default";
    if (cfg_float(m, p, "rope_theta", 0, *theta, theta) != 0) {
        return -1;
    }
    if (strcmp(name, "linear") == 0) {
        return cfg_float(m, p, "factor", 1, 0, factor);
    }
    if (strcmp(name, "default") != 0) {
        return llm_model_fail(m, "config.json: %s rope type \"%.32s\" is not "
                              "supported (default, linear are)", kind, name);
    }
    return 0;
}


/*
 * Gemma 3's text config, with transformers' Gemma3TextConfig defaults for
 * absent keys (the 4B-27B configs write only what differs). Rope:
 * transformers 4's rope_theta, rope_local_base_freq and rope_scaling
 * (linear, global layers only), or 5's rope_parameters per layer type.
 * Layer kinds: layer_types, else sliding_window_pattern (default 6).
 */
static int
hf_config_gemma3(llm_model *m, const cJSON *root)
{
    llm_config    *c = &m->cfg;
    const cJSON   *act, *types, *e, *rp, *sc;
    float          q_scalar, local_factor = 1.0f;
    int            i, pattern;

    snprintf(c->arch, sizeof(c->arch), "gemma3");
    c->gemma = 1;
    c->qk_norm = 1;
    c->rope_neox = 1;
    act = cJSON_GetObjectItemCaseSensitive(root, "hidden_activation");
    if (act == NULL) {
        act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    }
    if (act != NULL && !(cJSON_IsString(act)
                         && strcmp(act->valuestring, "gelu_pytorch_tanh")
                            == 0))
    {
        return llm_model_fail(m, "config.json: gemma3's hidden_activation must "
                              "be \"gelu_pytorch_tanh\"");
    }
    if (cfg_true(root, "attention_bias")
        || cfg_true(root, "use_bidirectional_attention")
        || !cfg_null(root, "final_logit_softcapping")
        || !cfg_null(root, "attn_logit_softcapping"))
    {
        return llm_model_fail(m, "config.json: attention_bias, "
                              "use_bidirectional_attention and logit "
                              "softcapping are not supported");
    }
    if (cfg_int(m, root, "hidden_size", 0, 2304, &c->dim) != 0
        || cfg_int(m, root, "num_hidden_layers", 0, 26, &c->n_layers) != 0
        || cfg_int(m, root, "intermediate_size", 0, 9216, &c->hidden_dim)
        || cfg_int(m, root, "num_attention_heads", 0, 8, &c->n_heads) != 0
        || cfg_int(m, root, "num_key_value_heads", 0, 4, &c->n_kv_heads)
        || cfg_int(m, root, "head_dim", 0, 256, &c->head_dim) != 0
        || cfg_int(m, root, "max_position_embeddings", 0, 131072,
                   &c->max_seq_len) != 0
        || cfg_int(m, root, "sliding_window", 0, 4096, &c->sliding_window)
        || cfg_int(m, root, "sliding_window_pattern", 0, 6, &pattern) != 0
        || cfg_float(m, root, "rms_norm_eps", 0, 1e-6f, &c->norm_eps) != 0
        || cfg_float(m, root, "query_pre_attn_scalar", 0, 256.0f, &q_scalar)
        || cfg_float(m, root, "rope_theta", 0, 1000000.0f, &c->rope_theta)
        || cfg_float(m, root, "rope_local_base_freq", 0, 10000.0f,
                     &c->rope_theta_local) != 0)
    {
        return -1;
    }
    if (c->n_layers > LLM_MAX_LAYERS || c->n_heads % c->n_kv_heads != 0
        || c->head_dim % 2 != 0)
    {
        return llm_model_fail(m, "config.json: %d layers (at most %d), %d "
                              "heads (a multiple of %d kv heads), head_dim %d "
                              "(even)", c->n_layers, LLM_MAX_LAYERS, c->n_heads,
                              c->n_kv_heads, c->head_dim);
    }
    c->rope_dim = c->head_dim;
    c->att_scale = (float) (1.0 / sqrt((double) q_scalar));
    c->rope_linear = 1.0f;
    sc = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
    if (cJSON_IsObject(rp)) {
        if (hf_gemma3_rope_type(m, rp, "full_attention", &c->rope_theta,
                                &c->rope_linear) != 0
            || hf_gemma3_rope_type(m, rp, "sliding_attention",
                                   &c->rope_theta_local, &local_factor) != 0)
        {
            return -1;
        }
        if (local_factor != 1.0f) {
            return llm_model_fail(m, "config.json: rope scaling of the sliding "
                                  "layers is not supported");
        }
    } else if (cJSON_IsObject(sc)) {
        cJSON *wrap = cJSON_CreateObject();

        if (wrap == NULL) {
            return llm_model_fail(m, "out of memory");
        }
        cJSON_AddItemReferenceToObject(wrap, "full_attention", (cJSON *) sc);
        i = hf_gemma3_rope_type(m, wrap, "full_attention", &c->rope_theta,
                                &c->rope_linear);
        cJSON_Delete(wrap);
        if (i != 0) {
            return -1;
        }
    }
    /* the window's layers: "sliding_attention" or "full_attention" each;
       we run the patterns Gemma 3 has, a global layer every n-th */
    c->swa_pattern = pattern;
    types = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (types != NULL && !cJSON_IsNull(types)) {
        if (!cJSON_IsArray(types)
            || cJSON_GetArraySize(types) != c->n_layers)
        {
            return llm_model_fail(m, "config.json: layer_types must list the "
                                  "%d layers", c->n_layers);
        }
        c->swa_pattern = 0;
        i = 0;
        cJSON_ArrayForEach(e, types) {
            if (!cJSON_IsString(e)
                || (strcmp(e->valuestring, "full_attention") != 0
                    && strcmp(e->valuestring, "sliding_attention") != 0))
            {
                return llm_model_fail(m, "config.json: layer_types[%d] is not "
                                      "\"full_attention\" or "
                                      "\"sliding_attention\"", i);
            }
            if (c->swa_pattern == 0
                && strcmp(e->valuestring, "full_attention") == 0)
            {
                c->swa_pattern = i + 1;
            }
            i++;
        }
        if (c->swa_pattern == 0) {
            c->swa_pattern = c->n_layers + 1;     /* no global layer */
        }
        i = 0;
        cJSON_ArrayForEach(e, types) {
            if ((strcmp(e->valuestring, "full_attention") == 0)
                != (llm_config_layer_window(c, i) == 0))
            {
                return llm_model_fail(m, "config.json: layer_types is not a "
                                      "global layer every %d (the only pattern "
                                      "supported)", c->swa_pattern);
            }
            i++;
        }
    }
    c->tied_output = cJSON_GetObjectItemCaseSensitive(root,
                         "tie_word_embeddings") == NULL
                     || cfg_true(root, "tie_word_embeddings");
    config_finish(c);
    return 0;
}


static int
hf_config(llm_model *m, const cJSON *root)
{
    llm_config    *c = &m->cfg;
    const cJSON   *sw, *type;

    type = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (cJSON_IsString(type) && llm_bert_arch(type->valuestring)) {
        snprintf(c->arch, sizeof(c->arch), "%s",
                 strcmp(type->valuestring, "bert") == 0 ? "bert"
                                                        : "nomic-bert");
        return llm_bert_config_hf(m, root);
    }
    if (cJSON_IsString(type) && (strcmp(type->valuestring, "gemma3") == 0
                                 || strcmp(type->valuestring, "gemma3_text")
                                    == 0))
    {
        return hf_config_gemma3(m, hf_text_config(root));
    }

    if (hf_arch(m, root) != 0
        || cfg_int(m, root, "hidden_size", 1, 0, &c->dim) != 0
        || cfg_int(m, root, "num_hidden_layers", 1, 0, &c->n_layers) != 0
        || cfg_int(m, root, "intermediate_size", 1, 0, &c->hidden_dim) != 0
        || cfg_int(m, root, "num_attention_heads", 1, 0, &c->n_heads) != 0
        || cfg_int(m, root, "num_key_value_heads", 0, c->n_heads,
                   &c->n_kv_heads) != 0
        || cfg_int(m, root, "max_position_embeddings", 1, 0,
                   &c->max_seq_len) != 0
        || cfg_float(m, root, "rms_norm_eps", 1, 0, &c->norm_eps) != 0
        || hf_rope(m, root) != 0)
    {
        return -1;
    }
    if (c->n_layers > LLM_MAX_LAYERS || c->n_heads % c->n_kv_heads != 0) {
        return llm_model_fail(m, "config.json: %d layers (at most %d), %d "
                              "heads (must be a multiple of %d kv heads)",
                              c->n_layers, LLM_MAX_LAYERS, c->n_heads,
                              c->n_kv_heads);
    }
    if (cfg_int(m, root, "head_dim", 0, c->dim / c->n_heads, &c->head_dim)
        != 0)
    {
        return -1;
    }
    if (!cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(root, "head_dim"))
        && c->dim % c->n_heads != 0)
    {
        return llm_model_fail(m, "config.json: hidden_size %d is not a "
                              "multiple of num_attention_heads %d", c->dim,
                              c->n_heads);
    }
    c->rope_dim = c->head_dim;
    if (c->head_dim % 2 != 0) {
        return llm_model_fail(m, "config.json: head size %d is odd",
                              c->head_dim);
    }
    /* qwen2/3 carry sliding_window with use_sliding_window false; mistral
     * has only sliding_window (null when off) */
    if (cfg_true(root, "use_sliding_window")) {
        return llm_model_fail(m, "config.json: use_sliding_window (per-layer "
                              "windows) is not supported");
    }
    sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (cJSON_GetObjectItemCaseSensitive(root, "use_sliding_window") == NULL
        && sw != NULL && !cJSON_IsNull(sw)
        && cfg_int(m, root, "sliding_window", 1, 0, &c->sliding_window) != 0)
    {
        return -1;
    }
    c->tied_output = cfg_true(root, "tie_word_embeddings");
    config_finish(c);
    if (c->gpt_oss && llm_gpt_oss_hf_config(m, root) != 0) {
        return -1;
    }
    if (llm_moe_arch(c->arch)) {
        return llm_moe_hf_config(m, root);
    }
    return 0;
}


/* vocab_size of the (text) config; gemma3's default when absent */
static int
hf_vocab(llm_model *m, const cJSON *root, int *vocab)
{
    return cfg_int(m, hf_text_config(root), "vocab_size", !m->cfg.gemma,
                   262208, vocab);
}


int
llm_model_config_json(llm_model *m, const char *dir, const char *text,
    size_t len)
{
    int     rc;
    cJSON  *root;

    memset(m, 0, sizeof(*m));
    m->path = (char *) dir;
    root = cJSON_ParseWithLength(text, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return llm_model_fail(m, "config.json is not a JSON object");
    }
    rc = hf_config(m, root);
    if (rc == 0) {
        rc = hf_vocab(m, root, &m->cfg.vocab_size);
    }
    cJSON_Delete(root);
    m->path = NULL;
    return rc;
}


/* HF tensor names of one layer, after "model.layers.N." */
static const struct {
    const char  *hf;
    const char  *gguf;
    int          quirk;      /* 1: qkv_bias only, 2: qk_norm only */
} hf_layer_names[] = {
    { "input_layernorm.weight",          "attn_norm.weight",   0 },
    { "self_attn.q_proj.weight",         "attn_q.weight",      0 },
    { "self_attn.k_proj.weight",         "attn_k.weight",      0 },
    { "self_attn.v_proj.weight",         "attn_v.weight",      0 },
    { "self_attn.o_proj.weight",         "attn_output.weight", 0 },
    { "self_attn.q_proj.bias",           "attn_q.bias",        1 },
    { "self_attn.k_proj.bias",           "attn_k.bias",        1 },
    { "self_attn.v_proj.bias",           "attn_v.bias",        1 },
    { "self_attn.q_norm.weight",         "attn_q_norm.weight", 2 },
    { "self_attn.k_norm.weight",         "attn_k_norm.weight", 2 },
    { "post_attention_layernorm.weight", "ffn_norm.weight",    0 },
    { "mlp.gate_proj.weight",            "ffn_gate.weight",    0 },
    { "mlp.up_proj.weight",              "ffn_up.weight",      0 },
    { "mlp.down_proj.weight",            "ffn_down.weight",    0 },
};

/* gemma3's norms around attention and FFN (llama.cpp's names): looked up
 * before the table above, whose post_attention_layernorm is llama's
 * ffn_norm */
static const struct {
    const char  *hf;
    const char  *gguf;
} hf_gemma3_names[] = {
    { "post_attention_layernorm.weight",   "post_attention_norm.weight" },
    { "pre_feedforward_layernorm.weight",  "ffn_norm.weight" },
    { "post_feedforward_layernorm.weight", "post_ffw_norm.weight" },
};

/* a multimodal gemma3's text model under another prefix (transformers 4:
 * language_model.model., 5: model.language_model.), and the vision parts
 * a text engine leaves alone */
static const char *hf_gemma3_text_prefixes[] = {
    "language_model.model.", "model.language_model.",
};
static const char *hf_gemma3_skipped[] = {
    "vision_tower.", "multi_modal_projector.", "model.vision_tower.",
    "model.multi_modal_projector.",
};


/*
 * A HF tensor name -> its GGUF name in out. 0 mapped, 1 to be skipped
 * (rotary caches, a tied lm_head), LLM_GPT_OSS_HF_RAW kept raw for
 * gpt_oss.c, -1 not part of this architecture, -2 refused (m->err set).
 */
static int
hf_gguf_name(const llm_model *m, const char *hf, char *out, size_t len)
{
    const llm_config  *c = &m->cfg;
    const char        *rest;
    char              *end, buf[256];
    long               layer;
    size_t             i, n;

    if (c->encoder) {
        return llm_bert_hf_name(m, hf, out, len);
    }

    for (i = 0; c->gemma && i < sizeof(hf_gemma3_skipped) / sizeof(char *);
         i++)
    {
        if (strncmp(hf, hf_gemma3_skipped[i],
                    strlen(hf_gemma3_skipped[i])) == 0)
        {
            return 1;
        }
    }
    for (i = 0; c->gemma
                && i < sizeof(hf_gemma3_text_prefixes) / sizeof(char *); i++)
    {
        n = strlen(hf_gemma3_text_prefixes[i]);
        if (strncmp(hf, hf_gemma3_text_prefixes[i], n) == 0) {
            snprintf(buf, sizeof(buf), "model.%s", hf + n);
            hf = buf;
            break;
        }
    }
    if (c->gemma && strcmp(hf, "language_model.lm_head.weight") == 0) {
        hf = "lm_head.weight";
    }

    if (strcmp(hf, "model.embed_tokens.weight") == 0) {
        snprintf(out, len, "token_embd.weight");
        return 0;
    }
    if (strcmp(hf, "model.norm.weight") == 0) {
        snprintf(out, len, "output_norm.weight");
        return 0;
    }
    if (strcmp(hf, "lm_head.weight") == 0) {
        snprintf(out, len, "output.weight");
        return c->tied_output ? 1 : 0;
    }
    if (strncmp(hf, "model.layers.", 13) != 0) {
        return -1;
    }
    layer = strtol(hf + 13, &end, 10);
    if (end == hf + 13 || *end != '.' || layer < 0 || layer >= c->n_layers) {
        return -1;
    }
    rest = end + 1;
    if (strcmp(rest, "self_attn.rotary_emb.inv_freq") == 0) {
        return 1;
    }
    for (i = 0; c->gemma && i < sizeof(hf_gemma3_names)
                                / sizeof(hf_gemma3_names[0]); i++)
    {
        if (strcmp(rest, hf_gemma3_names[i].hf) == 0) {
            snprintf(out, len, "blk.%ld.%s", layer, hf_gemma3_names[i].gguf);
            return 0;
        }
    }
    if (c->gpt_oss) {
        int rc = llm_gpt_oss_hf_name((llm_model *) m, layer, rest, out, len);

        if (rc != -2) {
            return rc == -1 ? -2 : rc;
        }
    }
    if (c->n_expert > 0) {
        if (llm_moe_hf_name(m, layer, rest, out, len) == 0) {
            return 0;
        }
        if (strncmp(rest, "mlp.", 4) == 0) {
            return -1;     /* no dense FFN in a MoE layer */
        }
    }
    for (i = 0; i < sizeof(hf_layer_names) / sizeof(hf_layer_names[0]);
         i++)
    {
        if (strcmp(rest, hf_layer_names[i].hf) != 0) {
            continue;
        }
        if ((hf_layer_names[i].quirk == 1 && !c->qkv_bias)
            || (hf_layer_names[i].quirk == 2 && !c->qk_norm))
        {
            return -1;
        }
        snprintf(out, len, "blk.%ld.%s", layer, hf_layer_names[i].gguf);
        return 0;
    }
    return -1;
}


/* one safetensors tensor into the GGUF-named table */
static int
hf_add_tensor(llm_model *m, const st_file *f, const st_tensor *t)
{
    gguf_tensor  *g;
    char          name[128];
    float        *wide;
    uint32_t      k;
    int           rc, shift;

    rc = hf_gguf_name(m, t->name, name, sizeof(name));
    if (rc == 1) {
        return 0;
    }
    if (rc == -2) {
        return -1;
    }
    if (rc < 0) {
        return llm_model_fail(m, "%s: tensor '%s' is not part of a %s model",
                              f->path, t->name, m->cfg.arch);
    }
    if (lookup_tensor(m, name) != NULL) {
        return llm_model_fail(m, "%s: tensor '%s' is stored twice", f->path,
                              t->name);
    }
    if ((t->type == ST_TYPE_U8) != (rc == LLM_GPT_OSS_HF_RAW
                                    && strstr(name, "_bias") == NULL))
    {
        return llm_model_fail(m, "%s: tensor '%s': dtype U8 is for gpt-oss's "
                              "MXFP4 *_blocks and *_scales only", f->path,
                              t->name);
    }
    if (rc != LLM_GPT_OSS_HF_RAW && (t->n_dims < 1 || t->n_dims > 2)) {
        return llm_model_fail(m, "%s: tensor '%s' has %u dimensions (1 or 2 "
                              "expected)", f->path, t->name, t->n_dims);
    }
    g = &m->hf_tensors[m->n_hf_tensors];
    memset(g, 0, sizeof(*g));
    g->name = strdup(name);
    if (g->name == NULL) {
        return llm_model_fail(m, "out of memory");
    }
    m->n_hf_tensors++;
    g->n_dims = t->n_dims;
    for (k = 0; k < GGUF_MAX_DIMS; k++) {
        g->ne[k] = k < t->n_dims ? t->shape[t->n_dims - 1 - k] : 1;
    }
    g->type = t->type;
    g->data = t->data;
    g->nbytes = t->nbytes;
    if (rc == LLM_GPT_OSS_HF_RAW) {
        return 0;               /* repacked by llm_gpt_oss_hf_experts */
    }
    shift = m->cfg.gemma && strlen(name) >= 11
            && strcmp(name + strlen(name) - 11, "norm.weight") == 0;
    if (t->n_dims == 1 && (t->type != GGML_TYPE_F32 || shift)) {
        /* norms and biases are read as floats by the forward; gemma's
           norms scale by 1 + w, which GGUF stores (llama.cpp's converter
           adds the 1), so we add it here, in float32 as transformers */
        wide = own_floats(m, t->shape[0]);
        if (wide == NULL) {
            return llm_model_fail(m, "out of memory for '%s'", t->name);
        }
        llm_dequant_row(t->type, t->data, wide, (int64_t) t->shape[0]);
        for (k = 0; shift && k < t->shape[0]; k++) {
            wide[k] = 1.0f + wide[k];
        }
        g->data = wide;
        g->type = GGML_TYPE_F32;
        g->nbytes = t->shape[0] * sizeof(float);
    }
    return 0;
}


/* file names of the shards in the index's weight_map, each once */
static int
hf_shard_names(llm_model *m, const cJSON *map, const char **names, int max)
{
    const cJSON  *e;
    const char   *s;
    int           n = 0, i;

    cJSON_ArrayForEach(e, map) {
        s = cJSON_GetStringValue(e);
        if (s == NULL || s[0] == '\0' || s[0] == '.' || strchr(s, '/')) {
            return llm_model_fail(m, "model.safetensors.index.json: tensor "
                                  "'%s' maps to a bad file name", e->string);
        }
        for (i = 0; i < n && strcmp(names[i], s) != 0; i++) {
            /* seen? */
        }
        if (i == n) {
            if (n == max) {
                return llm_model_fail(m, "model.safetensors.index.json: more "
                                      "than %d files", max);
            }
            names[n++] = s;
        }
    }
    if (n == 0) {
        return llm_model_fail(m, "model.safetensors.index.json: weight_map is "
                              "empty");
    }
    return n;
}


static int
hf_open_shard(llm_model *m, int dirfd, const char *name)
{
    char      path[1024];
    st_file  *f = &m->st[m->n_st];

    snprintf(path, sizeof(path), "%s/%s", m->path, name);
    m->n_st++;
    if (st_open_at(f, dirfd, name, path) != 0) {
        snprintf(m->err, sizeof(m->err), "%s", f->err);
        return -1;
    }
    return 0;
}


/* model.safetensors, or every shard of model.safetensors.index.json */
static int
hf_open_weights(llm_model *m, int dirfd)
{
    cJSON         *index;
    const cJSON   *map, *e;
    const char   **names;
    int            n, i, rc = -1;

    m->err[0] = '\0';
    index = json_at(m, dirfd, "model.safetensors.index.json", 0);
    if (index == NULL) {
        if (m->err[0] != '\0') {
            return -1;
        }
        m->st = calloc(1, sizeof(st_file));
        if (m->st == NULL) {
            return llm_model_fail(m, "out of memory");
        }
        return hf_open_shard(m, dirfd, "model.safetensors");
    }
    map = cJSON_GetObjectItemCaseSensitive(index, "weight_map");
    names = calloc(HF_MAX_SHARDS, sizeof(char *));
    m->st = calloc(HF_MAX_SHARDS, sizeof(st_file));
    if (names == NULL || m->st == NULL) {
        llm_model_fail(m, "out of memory");
        goto done;
    }
    if (!cJSON_IsObject(map)) {
        llm_model_fail(m, "model.safetensors.index.json: no weight_map object");
        goto done;
    }
    n = hf_shard_names(m, map, names, HF_MAX_SHARDS);
    if (n < 0) {
        goto done;
    }
    for (i = 0; i < n; i++) {
        if (hf_open_shard(m, dirfd, names[i]) != 0) {
            goto done;
        }
    }
    /* every tensor the index names is where it says */
    cJSON_ArrayForEach(e, map) {
        for (i = 0; strcmp(names[i], e->valuestring) != 0; i++) {
            /* its shard */
        }
        if (st_find(&m->st[i], e->string) == NULL) {
            llm_model_fail(m, "model.safetensors.index.json: tensor '%s' is "
                           "not in %s", e->string, e->valuestring);
            goto done;
        }
    }
    rc = n > 0 ? 0 : -1;

done:
    free(names);
    cJSON_Delete(index);
    return rc;
}


static int
hf_load(llm_model *m, int dirfd)
{
    llm_config  *c = &m->cfg;
    cJSON       *config;
    uint64_t     total = 0, j;
    int          i, vocab, rc;

    m->hf = 1;
    config = json_at(m, dirfd, "config.json", 1);
    if (config == NULL) {
        return -1;
    }
    rc = hf_config(m, config);
    if (rc == 0) {
        rc = hf_vocab(m, config, &vocab);
    }
    cJSON_Delete(config);
    if (rc != 0 || hf_open_weights(m, dirfd) != 0) {
        return -1;
    }
    for (i = 0; i < m->n_st; i++) {
        total += m->st[i].n_tensors;
    }
    if (c->gpt_oss) {
        total += (uint64_t) LLM_GPT_OSS_EXTRA_TENSORS * c->n_layers;
    }
    m->hf_tensors = calloc(total ? total : 1, sizeof(gguf_tensor));
    if (m->hf_tensors == NULL) {
        return llm_model_fail(m, "out of memory for %llu tensors",
                              (unsigned long long) total);
    }
    for (i = 0; i < m->n_st; i++) {
        for (j = 0; j < m->st[i].n_tensors; j++) {
            if (hf_add_tensor(m, &m->st[i], &m->st[i].tensors[j]) != 0) {
                return -1;
            }
        }
    }
    if (c->gpt_oss && llm_gpt_oss_hf_experts(m, lookup_tensor) != 0) {
        return -1;
    }
    if (!c->tied_output && lookup_tensor(m, "output.weight") == NULL) {
        return llm_model_fail(m, "tie_word_embeddings is false but "
                              "lm_head.weight is missing");
    }
    if (load_weights(m) != 0 || llm_model_pooling_hf(m, dirfd) != 0) {
        return -1;
    }
    if (vocab != c->vocab_size) {
        return llm_model_fail(m, "config.json: vocab_size %d but "
                              "embed_tokens has %d rows", vocab, c->vocab_size);
    }
    return 0;
}


/* ---------------------------------------------------------------------------
 * rope frequencies, tokenizer and chat template of either format
 */

void
llm_model_rope_inv_freq_local(const llm_model *m, float *inv_freq)
{
    const llm_config  *c = &m->cfg;
    int                i;

    if (!c->gemma) {
        llm_model_rope_inv_freq(m, inv_freq);
        return;
    }
    for (i = 0; i < c->rope_dim / 2; i++) {
        inv_freq[i] = 1.0f / powf(c->rope_theta_local,
                                  (float) (2 * i) / (float) c->rope_dim);
    }
}


/* the dimension (of rope_dim) that turns n times over rope_orig_ctx */
static double
yarn_dim(const llm_config *c, double n)
{
    return c->rope_dim * log(c->rope_orig_ctx / (n * 2.0 * M_PI))
           / (2.0 * log((double) c->rope_theta));
}


/* transformers' _compute_yarn_parameters for frequency i (extrap =
 * theta^-(2i/d)): the ramp's ends in double as Python's math, the
 * blend in float32 as torch */
static float
yarn_freq(const llm_config *c, float extrap, int i)
{
    double  lo = yarn_dim(c, c->rope_yarn_beta_fast);
    double  hi = yarn_dim(c, c->rope_yarn_beta_slow);
    float   pos_freq = 1.0f / extrap, interp, ramp, ext;

    if (c->rope_yarn_truncate) {
        lo = floor(lo);
        hi = ceil(hi);
    }
    lo = lo > 0 ? lo : 0;
    hi = hi < c->rope_dim - 1 ? hi : c->rope_dim - 1;
    if (lo == hi) {
        hi += 0.001;                  /* transformers: no singularity */
    }
    interp = 1.0f / (c->rope_factor * pos_freq);
    ramp = ((float) i - (float) lo) / (float) (hi - lo);
    ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
    ext = 1.0f - ramp;
    return interp * (1.0f - ext) + extrap * ext;
}


void
llm_model_rope_inv_freq(const llm_model *m, float *inv_freq)
{
    const llm_config  *c = &m->cfg;
    float              wavelen, smooth, scaled, lo_wl, hi_wl;
    int                i;

    /* lo_wl/hi_wl: wavelengths above lo_wl are slowed by factor, below
     * hi_wl kept, and interpolated in between (transformers'
     * _compute_llama3_parameters, in float32 like torch) */
    lo_wl = c->rope_orig_ctx / c->rope_low_freq_factor;
    hi_wl = c->rope_orig_ctx / c->rope_high_freq_factor;
    for (i = 0; i < c->rope_dim / 2; i++) {
        inv_freq[i] = 1.0f / powf(c->rope_theta,
                                  (float) (2 * i) / (float) c->rope_dim);
        if (c->rope_freqs != NULL) {
            inv_freq[i] /= c->rope_freqs[i];
        } else if (c->rope_yarn) {
            inv_freq[i] = yarn_freq(c, inv_freq[i], i);
        } else if (c->rope_llama3) {
            wavelen = (float) (2.0 * M_PI) / inv_freq[i];
            scaled = wavelen > lo_wl ? inv_freq[i] / c->rope_factor
                                     : inv_freq[i];
            if (!(wavelen < hi_wl) && !(wavelen > lo_wl)) {
                smooth = (c->rope_orig_ctx / wavelen
                          - c->rope_low_freq_factor)
                         / (c->rope_high_freq_factor
                            - c->rope_low_freq_factor);
                scaled = (1.0f - smooth) * scaled / c->rope_factor
                         + smooth * scaled;
            }
            inv_freq[i] = scaled;
        } else if (c->rope_linear != 1.0f) {
            inv_freq[i] /= c->rope_linear;    /* transformers' "linear" */
        }
    }
}


llm_tokenizer *
llm_model_tokenizer(const llm_model *m, char *err, size_t errlen)
{
    if (m->hf) {
        return llm_tokenizer_load_hf(m->path, err, errlen);
    }
    return llm_tokenizer_load_gguf(&m->gguf, err, errlen);
}


char *
llm_model_chat_template(const llm_model *m, char *err, size_t errlen)
{
    const char  *src;
    uint64_t     len;
    char        *out;
    int          fd;

    err[0] = '\0';
    if (m->hf) {
        fd = open(m->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            snprintf(err, errlen, "%s: cannot open directory: %s", m->path,
                     strerror(errno));
            return NULL;
        }
        out = llm_hf_chat_template(fd, m->path, err, errlen);
        close(fd);
        return out;
    }
    if (gguf_get_str(&m->gguf, "tokenizer.chat_template", &src, &len) != 0) {
        return NULL;
    }
    out = strndup(src, len);
    if (out == NULL) {
        snprintf(err, errlen, "%s: out of memory", m->path);
    }
    return out;
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

    for (i = 0; c->encoder && m->bert != NULL && i < c->n_layers; i++) {
        const llm_bert_layer *l = &m->bert->layers[i];

        b += view_bytes(&l->wq) + view_bytes(&l->wk) + view_bytes(&l->wv)
             + view_bytes(&l->wo) + view_bytes(&l->up)
             + view_bytes(&l->gate) + view_bytes(&l->down);
    }
    for (i = 0; !c->encoder && i < c->n_layers; i++) {
        const llm_layer *l = &m->layers[i];

        b += view_bytes(&l->wq) + view_bytes(&l->wk) + view_bytes(&l->wv)
             + view_bytes(&l->wo)
             + (c->gemma ? 4 : 2) * (uint64_t) c->dim * sizeof(float);
        b += c->n_expert > 0 ? llm_moe_weight_bytes(m, i)
             : view_bytes(&l->w_gate) + view_bytes(&l->w_up)
               + view_bytes(&l->w_down);
    }
    b += ggml_row_size(m->tok_embd.type, c->dim);    /* one embedding row */
    b += view_bytes(&m->output) + (uint64_t) c->dim * sizeof(float);
    return b;
}
