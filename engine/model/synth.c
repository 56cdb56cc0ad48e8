/*
 * Synthetic models (synth.h): the shapes, their keys and tensors, and the
 * streamed writer.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/file.h"
#include "format/gguf.h"
#include "model/gguf_write.h"
#include "model/synth.h"
#include "quant.h"
#include "tensor_type.h"

#define SYNTH_STD     0.02f
#define SYNTH_ALIGN   32
#define SYNTH_MAX_T   2048         /* tensors of the largest shape, and room */


/* a real model's numbers (its config.json / GGUF keys) */
typedef struct {
    const char  *arch;
    const char  *name;
    const char  *model;        /* what it is shaped like, for general.name */
    int          dim, layers, ffn, heads, kv_heads, head_dim, ctx;
    float        theta, eps;
    int          tied;         /* no output.weight: the embedding is used */
    int          experts, used, expert_ff;   /* qwen3moe, gpt-oss */
    int          window;       /* gpt-oss: the sliding layers' window */
    float        yarn_factor;  /* gpt-oss: YaRN, as its config.json */
    int          yarn_orig_ctx;
} synth_shape;

/* positional up to eps; the rest (zero where absent) by name */
static const synth_shape shapes[] = {
    { "llama", "1b", "Llama-3.2-1B", 2048, 16, 8192, 32, 8, 64, 131072,
      500000.0f, 1e-5f, .tied = 1 },
    { "llama", "8b", "Llama-3-8B", 4096, 32, 14336, 32, 8, 128, 8192,
      500000.0f, 1e-5f, .tied = 0 },
    { "llama", "tiny", "tiny llama", 64, 2, 128, 4, 2, 16, 2048,
      500000.0f, 1e-5f, .tied = 1 },
    /* Qwen3-30B-A3B: 48 layers; the default keeps 12 (--layers) */
    { "qwen3moe", "30b-a3b", "Qwen3-30B-A3B", 2048, 12, 6144, 32, 4, 128,
      40960, 1000000.0f, 1e-6f,
      .experts = 128, .used = 8, .expert_ff = 768 },
    { "qwen3moe", "tiny", "tiny qwen3moe", 64, 2, 128, 4, 2, 16, 2048,
      1000000.0f, 1e-6f, .experts = 8, .used = 2, .expert_ff = 32 },
    /* BAAI/bge-small-en-v1.5 */
    { "bert", "bge-small", "bge-small-en-v1.5", 384, 12, 1536, 12, 12, 32,
      512, 0.0f, 1e-12f, .tied = 1 },
    { "bert", "tiny", "tiny bert", 64, 2, 128, 4, 4, 16, 512,
      0.0f, 1e-12f, .tied = 1 },
    /* openai/gpt-oss-20b's config.json: 24 layers; the default keeps 8
       (--layers); the vocabulary is the one given (201088 in o200k) */
    { "gpt-oss", "20b", "gpt-oss-20b", 2880, 8, 2880, 64, 8, 64, 131072,
      150000.0f, 1e-5f, .experts = 32, .used = 4, .expert_ff = 2880,
      .window = 128, .yarn_factor = 32.0f, .yarn_orig_ctx = 4096 },
    { "gpt-oss", "tiny", "tiny gpt-oss", 64, 2, 64, 4, 2, 16, 2048,
      150000.0f, 1e-5f, .experts = 8, .used = 4, .expert_ff = 64,
      .window = 4, .yarn_factor = 32.0f, .yarn_orig_ctx = 4096 },
};

#define N_SHAPES  (sizeof(shapes) / sizeof(shapes[0]))

/* what a tensor holds */
enum { FILL_RANDOM, FILL_ONES, FILL_ZEROS };

typedef struct {
    char         name[64];
    uint32_t     n_dims;
    uint64_t     ne[3];
    uint32_t     type;
    int          fill;
} synth_tensor;

typedef struct {
    synth_tensor  t[SYNTH_MAX_T];
    int           n;
    uint32_t      mat_type;     /* the matrices' type */
} synth_list;


const char *
llm_synth_shapes(void)
{
    static char list[256];

    if (list[0] == '\0') {
        for (size_t i = 0; i < N_SHAPES; i++) {
            snprintf(list + strlen(list), sizeof(list) - strlen(list),
                     "%s%s %s", i ? ", " : "", shapes[i].arch,
                     shapes[i].name);
        }
    }
    return list;
}


static int
fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}


/* --- the tensors --------------------------------------------------------- */

/* add a tensor; 1-D ones are F32 (as llama.cpp's converter keeps them) */
static void
add(synth_list *l, int fill, uint32_t type, const char *fmt, int layer,
    uint64_t ne0, uint64_t ne1, uint64_t ne2)
{
    synth_tensor *t = &l->t[l->n++];

    snprintf(t->name, sizeof(t->name), fmt, layer);
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->n_dims = ne2 > 1 ? 3 : ne1 > 1 ? 2 : 1;
    t->type = t->n_dims == 1 ? GGML_TYPE_F32 : type;
    t->fill = fill;
}


static void
mat(synth_list *l, const char *fmt, int layer, uint64_t ne0, uint64_t ne1,
    uint64_t ne2)
{
    add(l, FILL_RANDOM, l->mat_type, fmt, layer, ne0, ne1, ne2);
}


static void
ones(synth_list *l, const char *fmt, int layer, uint64_t n)
{
    add(l, FILL_ONES, GGML_TYPE_F32, fmt, layer, n, 1, 1);
}


static void
zeros(synth_list *l, const char *fmt, int layer, uint64_t n)
{
    add(l, FILL_ZEROS, GGML_TYPE_F32, fmt, layer, n, 1, 1);
}


/* llama.cpp's names and layouts (ne[0] = the input / row length) */
static void
list_decoder(synth_list *l, const synth_shape *s, int layers, uint64_t vocab)
{
    uint64_t d = s->dim, q = (uint64_t) s->heads * s->head_dim,
             kv = (uint64_t) s->kv_heads * s->head_dim;

    mat(l, "token_embd.weight", 0, d, vocab, 1);
    ones(l, "output_norm.weight", 0, d);
    if (!s->tied) {
        mat(l, "output.weight", 0, d, vocab, 1);
    }
    for (int i = 0; i < layers; i++) {
        ones(l, "blk.%d.attn_norm.weight", i, d);
        mat(l, "blk.%d.attn_q.weight", i, d, q, 1);
        mat(l, "blk.%d.attn_k.weight", i, d, kv, 1);
        mat(l, "blk.%d.attn_v.weight", i, d, kv, 1);
        mat(l, "blk.%d.attn_output.weight", i, q, d, 1);
        ones(l, "blk.%d.ffn_norm.weight", i, d);
        if (s->experts > 0) {
            ones(l, "blk.%d.attn_q_norm.weight", i, s->head_dim);
            ones(l, "blk.%d.attn_k_norm.weight", i, s->head_dim);
            /* the router stays F32, as the converter writes it */
            add(l, FILL_RANDOM, GGML_TYPE_F32, "blk.%d.ffn_gate_inp.weight",
                i, d, s->experts, 1);
            mat(l, "blk.%d.ffn_gate_exps.weight", i, d, s->expert_ff,
                s->experts);
            mat(l, "blk.%d.ffn_up_exps.weight", i, d, s->expert_ff,
                s->experts);
            mat(l, "blk.%d.ffn_down_exps.weight", i, s->expert_ff, d,
                s->experts);
        } else {
            mat(l, "blk.%d.ffn_gate.weight", i, d, s->ffn, 1);
            mat(l, "blk.%d.ffn_up.weight", i, d, s->ffn, 1);
            mat(l, "blk.%d.ffn_down.weight", i, s->ffn, d, 1);
        }
    }
}


/* llama.cpp's gpt-oss: q/k/v/o biases, a sink logit per head, the FFN
 * norm named post_attention_norm, the router with a bias, experts in
 * MXFP4 with F32 biases (convert_hf_to_gguf.py repacks the checkpoint's
 * MXFP4 experts as they are; the other matrices take --type, F16 by
 * default, the router stays F32) */
static void
list_gpt_oss(synth_list *l, const synth_shape *s, int layers, uint64_t vocab)
{
    uint64_t d = s->dim, q = (uint64_t) s->heads * s->head_dim,
             kv = (uint64_t) s->kv_heads * s->head_dim, e = s->experts,
             ff = s->expert_ff;
    uint32_t x = GGML_TYPE_MXFP4, f32 = GGML_TYPE_F32;

    mat(l, "token_embd.weight", 0, d, vocab, 1);
    ones(l, "output_norm.weight", 0, d);
    mat(l, "output.weight", 0, d, vocab, 1);
    for (int i = 0; i < layers; i++) {
        ones(l, "blk.%d.attn_norm.weight", i, d);
        mat(l, "blk.%d.attn_q.weight", i, d, q, 1);
        zeros(l, "blk.%d.attn_q.bias", i, q);
        mat(l, "blk.%d.attn_k.weight", i, d, kv, 1);
        zeros(l, "blk.%d.attn_k.bias", i, kv);
        mat(l, "blk.%d.attn_v.weight", i, d, kv, 1);
        zeros(l, "blk.%d.attn_v.bias", i, kv);
        mat(l, "blk.%d.attn_output.weight", i, q, d, 1);
        zeros(l, "blk.%d.attn_output.bias", i, d);
        add(l, FILL_RANDOM, f32, "blk.%d.attn_sinks.weight", i, s->heads,
            1, 1);
        ones(l, "blk.%d.post_attention_norm.weight", i, d);
        add(l, FILL_RANDOM, f32, "blk.%d.ffn_gate_inp.weight", i, d, e, 1);
        zeros(l, "blk.%d.ffn_gate_inp.bias", i, e);
        add(l, FILL_RANDOM, x, "blk.%d.ffn_gate_exps.weight", i, d, ff, e);
        add(l, FILL_ZEROS, f32, "blk.%d.ffn_gate_exps.bias", i, ff, e, 1);
        add(l, FILL_RANDOM, x, "blk.%d.ffn_up_exps.weight", i, d, ff, e);
        add(l, FILL_ZEROS, f32, "blk.%d.ffn_up_exps.bias", i, ff, e, 1);
        add(l, FILL_RANDOM, x, "blk.%d.ffn_down_exps.weight", i, ff, d, e);
        add(l, FILL_ZEROS, f32, "blk.%d.ffn_down_exps.bias", i, d, e, 1);
    }
}


/* llama.cpp's BERT (LLM_ARCH_BERT): post-norm layers with biases */
static void
list_bert(synth_list *l, const synth_shape *s, int layers, uint64_t vocab)
{
    static const char *lin[] = { "attn_q", "attn_k", "attn_v", "attn_output" };
    char name[64];
    uint64_t d = s->dim;

    mat(l, "token_embd.weight", 0, d, vocab, 1);
    mat(l, "token_types.weight", 0, d, 2, 1);
    mat(l, "position_embd.weight", 0, d, s->ctx, 1);
    ones(l, "token_embd_norm.weight", 0, d);
    zeros(l, "token_embd_norm.bias", 0, d);
    for (int i = 0; i < layers; i++) {
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof(name), "blk.%%d.%s.weight", lin[k]);
            mat(l, name, i, d, d, 1);
            snprintf(name, sizeof(name), "blk.%%d.%s.bias", lin[k]);
            zeros(l, name, i, d);
        }
        ones(l, "blk.%d.attn_output_norm.weight", i, d);
        zeros(l, "blk.%d.attn_output_norm.bias", i, d);
        mat(l, "blk.%d.ffn_up.weight", i, d, s->ffn, 1);
        zeros(l, "blk.%d.ffn_up.bias", i, s->ffn);
        mat(l, "blk.%d.ffn_down.weight", i, s->ffn, d, 1);
        zeros(l, "blk.%d.ffn_down.bias", i, d);
        ones(l, "blk.%d.layer_output_norm.weight", i, d);
        zeros(l, "blk.%d.layer_output_norm.bias", i, d);
    }
}


/* --- the values ----------------------------------------------------------- */

static uint64_t
splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}


/* the tensor's own stream: FNV-1a of its name, mixed with the seed */
static uint64_t
tensor_seed(uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (const char *p = name; *p; p++) {
        h = (h ^ (uint8_t) *p) * 0x100000001b3ull;
    }
    h ^= seed * 0x9e3779b97f4a7c15ull;
    (void) splitmix64(&h);
    return h;
}


/* n values of mean 0 and deviation std: the sum of four 16-bit uniforms
 * (Irwin-Hall, variance 4/12 before scaling), bounded at 2 sqrt(3) std */
static void
fill_random(uint64_t *state, float *x, uint64_t n, float std)
{
    const float k = std * 1.7320508f / 65536.0f;    /* sqrt(3) / 2^16 */

    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = splitmix64(state);
        float s = (float) (r & 0xffff) + (float) ((r >> 16) & 0xffff)
                  + (float) ((r >> 32) & 0xffff) + (float) (r >> 48);
        x[i] = (s - 2.0f * 65535.0f) * k;
    }
}


static int
write_row(gguf_writer *w, uint32_t type, const float *f, void *row,
    uint64_t n)
{
    if (type == GGML_TYPE_F32) {
        gguf_w_bytes(w, f, n * sizeof(float));
        return 0;
    }
    if (type == GGML_TYPE_F16) {
        llm_half *h = row;
        for (uint64_t i = 0; i < n; i++) {
            h[i] = llm_fp32_to_fp16(f[i]);
        }
    } else if (llm_quantize_row(type, f, row, (int64_t) n) != 0) {
        return -1;
    }
    gguf_w_bytes(w, row, ggml_row_size(type, n));
    return 0;
}


static uint64_t
tensor_bytes(const synth_tensor *t)
{
    return ggml_row_size(t->type, t->ne[0]) * t->ne[1] * t->ne[2];
}


/* --- the file ------------------------------------------------------------- */

static const synth_shape *
find_shape(const char *arch, const char *name)
{
    for (size_t i = 0; i < N_SHAPES; i++) {
        if (strcmp(shapes[i].arch, arch) == 0
            && strcmp(shapes[i].name, name) == 0)
        {
            return &shapes[i];
        }
    }
    return NULL;
}


static void
arch_u32(gguf_writer *w, const char *arch, const char *key, uint32_t v)
{
    char k[128];

    snprintf(k, sizeof(k), "%s.%s", arch, key);
    gguf_w_kv_u32(w, k, v);
}


static void
arch_f32(gguf_writer *w, const char *arch, const char *key, float v)
{
    char k[128];

    snprintf(k, sizeof(k), "%s.%s", arch, key);
    gguf_w_kv_f32(w, k, v);
}


/* the architecture's keys, as llama.cpp's converter writes them; the
 * count written is returned */
static int
write_arch_keys(gguf_writer *w, const synth_shape *s, int layers,
    uint64_t vocab)
{
    const char *a = s->arch;
    int n = 0;

    arch_u32(w, a, "context_length", s->ctx); n++;
    arch_u32(w, a, "embedding_length", s->dim); n++;
    arch_u32(w, a, "block_count", layers); n++;
    arch_u32(w, a, "feed_forward_length", s->ffn); n++;
    arch_u32(w, a, "attention.head_count", s->heads); n++;
    if (strcmp(a, "bert") == 0) {
        char k[128];
        arch_f32(w, a, "attention.layer_norm_epsilon", s->eps); n++;
        snprintf(k, sizeof(k), "%s.attention.causal", a);
        gguf_w_kv_bool(w, k, 0); n++;
        arch_u32(w, a, "pooling_type", 2); n++;          /* CLS */
        return n;
    }
    arch_u32(w, a, "attention.head_count_kv", s->kv_heads); n++;
    arch_f32(w, a, "rope.freq_base", s->theta); n++;
    arch_f32(w, a, "attention.layer_norm_rms_epsilon", s->eps); n++;
    arch_u32(w, a, "attention.key_length", s->head_dim); n++;
    arch_u32(w, a, "attention.value_length", s->head_dim); n++;
    if (strcmp(a, "llama") == 0 || s->window > 0) {
        arch_u32(w, a, "rope.dimension_count", s->head_dim); n++;
        arch_u32(w, a, "vocab_size", (uint32_t) vocab); n++;
    }
    if (s->experts > 0) {
        arch_u32(w, a, "expert_count", s->experts); n++;
        arch_u32(w, a, "expert_used_count", s->used); n++;
        arch_u32(w, a, "expert_feed_forward_length", s->expert_ff); n++;
    }
    if (s->window > 0) {
        char k[128];
        arch_u32(w, a, "attention.sliding_window", s->window); n++;
        snprintf(k, sizeof(k), "%s.rope.scaling.type", a);
        gguf_w_kv_str(w, k, "yarn"); n++;
        arch_f32(w, a, "rope.scaling.factor", s->yarn_factor); n++;
        arch_u32(w, a, "rope.scaling.original_context_length",
                 s->yarn_orig_ctx); n++;
    }
    return n;
}


/* the vocab's tokenizer.* keys (the template replaced when given) */
static int
tokenizer_key(const gguf_kv *kv, const char *tmpl)
{
    return strncmp(kv->key, "tokenizer.", 10) == 0
           && !(tmpl && strcmp(kv->key, "tokenizer.chat_template") == 0);
}


static char *
read_text(const char *path, char *err, size_t err_len)
{
    char *buf = llm_read_file(path, 0, NULL);

    if (buf == NULL) {
        fail(err, err_len, "%s: %s", path, strerror(errno));
    }
    return buf;
}


int
llm_synth_file(const llm_synth_opts *o, const char *out, FILE *log,
    char *err, size_t err_len)
{
    const synth_shape *s = find_shape(o->arch, o->shape);
    gguf_file v;
    gguf_writer w = { NULL, 0, 0 };
    synth_list *l = NULL;
    const gguf_kv *toks;
    char *tmpl = NULL, name[160];
    float *f = NULL;
    void *row = NULL;
    uint64_t vocab, off = 0, max_ne0 = 1, n_kv = 0, total = 0;
    int layers, rc = -1, n_tok_kv = 0, has_ttc = 0;

    if (s == NULL) {
        return fail(err, err_len, "no shape '%s %s' (%s)", o->arch, o->shape,
                    llm_synth_shapes());
    }
    layers = o->layers > 0 ? o->layers : s->layers;
    if (gguf_open(&v, o->vocab) != 0) {
        rc = fail(err, err_len, "%s", v.err);
        gguf_close(&v);
        return rc;
    }
    toks = gguf_find_kv(&v, "tokenizer.ggml.tokens");
    if (toks == NULL || toks->type != GGUF_TYPE_ARRAY || toks->n == 0) {
        fail(err, err_len, "%s: no tokenizer.ggml.tokens", o->vocab);
        goto done;
    }
    vocab = toks->n;
    if (o->template_path
        && (tmpl = read_text(o->template_path, err, err_len)) == NULL)
    {
        goto done;
    }
    if ((l = calloc(1, sizeof(*l))) == NULL) {
        fail(err, err_len, "out of memory");
        goto done;
    }
    l->mat_type = o->type;
    if (strcmp(s->arch, "bert") == 0) {
        list_bert(l, s, layers, vocab);
    } else if (strcmp(s->arch, "gpt-oss") == 0) {
        list_gpt_oss(l, s, layers, vocab);
    } else {
        list_decoder(l, s, layers, vocab);
    }
    for (int i = 0; i < l->n; i++) {
        const synth_tensor *t = &l->t[i];
        if (t->ne[0] % ggml_type_block(t->type) != 0) {
            fail(err, err_len, "%s: rows of %llu do not fit %s blocks",
                 t->name, (unsigned long long) t->ne[0],
                 ggml_type_name(t->type));
            goto done;
        }
        max_ne0 = t->ne[0] > max_ne0 ? t->ne[0] : max_ne0;
    }
    f = malloc(max_ne0 * sizeof(float));
    row = malloc(max_ne0 * sizeof(float));
    if (f == NULL || row == NULL) {
        fail(err, err_len, "out of memory");
        goto done;
    }
    if ((w.f = fopen(out, "wb")) == NULL) {
        fail(err, err_len, "%s: %s", out, strerror(errno));
        goto done;
    }
    setvbuf(w.f, NULL, _IOFBF, 1 << 20);

    for (uint64_t i = 0; i < v.n_kv; i++) {
        n_tok_kv += tokenizer_key(&v.kv[i], tmpl);
        has_ttc |= strcmp(v.kv[i].key, "tokenizer.ggml.token_type_count")
                   == 0;
    }
    /* general.* 4, the arch's keys, tokenizer keys, template, type count */
    {
        gguf_writer count = { NULL, 0, 0 };          /* counts, no file */
        n_kv = 4 + write_arch_keys(&count, s, layers, vocab) + n_tok_kv
               + (tmpl != NULL)
               + (strcmp(s->arch, "bert") == 0 && !has_ttc);
    }
    gguf_w_u32(&w, 0x46554747);                              /* "GGUF" */
    gguf_w_u32(&w, 3);
    gguf_w_u64(&w, l->n);
    gguf_w_u64(&w, n_kv);
    gguf_w_kv_str(&w, "general.architecture", s->arch);
    snprintf(name, sizeof(name), "synthetic %s (%d layers, seed %llu)",
             s->model, layers, (unsigned long long) o->seed);
    gguf_w_kv_str(&w, "general.name", name);
    gguf_w_kv_u32(&w, "general.file_type", o->ftype);
    gguf_w_kv_u32(&w, "general.quantization_version", 2);
    (void) write_arch_keys(&w, s, layers, vocab);
    for (uint64_t i = 0; i < v.n_kv; i++) {
        const uint8_t *raw;
        uint64_t len;
        if (tokenizer_key(&v.kv[i], tmpl)) {
            gguf_kv_raw(&v.kv[i], &raw, &len);
            gguf_w_kv_raw(&w, v.kv[i].key, v.kv[i].type, raw, len);
        }
    }
    if (tmpl) {
        gguf_w_kv_str(&w, "tokenizer.chat_template", tmpl);
    }
    if (strcmp(s->arch, "bert") == 0 && !has_ttc) {
        gguf_w_kv_u32(&w, "tokenizer.ggml.token_type_count", 2);
    }

    for (int i = 0; i < l->n; i++) {
        const synth_tensor *t = &l->t[i];
        gguf_w_tensor_info(&w, t->name, t->n_dims, t->ne, t->type, off);
        off += tensor_bytes(t);
        off = (off + SYNTH_ALIGN - 1) / SYNTH_ALIGN * SYNTH_ALIGN;
    }
    gguf_w_pad(&w, SYNTH_ALIGN);

    for (int i = 0; i < l->n && !w.failed; i++) {
        const synth_tensor *t = &l->t[i];
        uint64_t state = tensor_seed(o->seed, t->name);
        uint64_t rows = t->ne[1] * t->ne[2];
        for (uint64_t r = 0; r < rows; r++) {
            if (t->fill == FILL_RANDOM) {
                fill_random(&state, f, t->ne[0], SYNTH_STD);
            } else {
                float c = t->fill == FILL_ONES ? 1.0f : 0.0f;
                for (uint64_t k = 0; k < t->ne[0]; k++) {
                    f[k] = c;
                }
            }
            if (write_row(&w, t->type, f, row, t->ne[0]) != 0) {
                fail(err, err_len, "%s: no quantizer for %s", t->name,
                     ggml_type_name(t->type));
                goto done;
            }
        }
        gguf_w_pad(&w, SYNTH_ALIGN);
        total += tensor_bytes(t);
    }
    if (fflush(w.f) != 0 || w.failed) {
        fail(err, err_len, "%s: write failed: %s", out, strerror(errno));
        goto done;
    }
    if (log) {
        fprintf(log, "%s: %s, %d layers, vocabulary %llu, %d tensors, "
                "%s matrices, %.1f MB\n", out, name, layers,
                (unsigned long long) vocab, l->n, ggml_type_name(o->type),
                total / 1e6);
    }
    rc = 0;

done:
    if (w.f && fclose(w.f) != 0 && rc == 0) {
        rc = fail(err, err_len, "%s: %s", out, strerror(errno));
    }
    if (rc != 0 && w.f) {
        (void) unlink(out);
    }
    free(tmpl);
    free(f);
    free(row);
    free(l);
    gguf_close(&v);
    return rc;
}
