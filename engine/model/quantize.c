/*
 * The weight quantizer (quantize.h): llama.cpp's file types and mix
 * rules, the GGUF writer, and the row-by-row requantization.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/gguf.h"
#include "model/gguf_write.h"
#include "model/quantize.h"
#include "quant.h"
#include "tensor_type.h"


/* llama.h's LLAMA_FTYPE_* numbers, for the ones we make */
static const llm_quant_ftype ftypes[] = {
    { "F32",    0,  GGML_TYPE_F32 },
    { "F16",    1,  GGML_TYPE_F16 },
    { "Q4_0",   2,  GGML_TYPE_Q4_0 },
    { "Q4_1",   3,  GGML_TYPE_Q4_1 },
    { "Q8_0",   7,  GGML_TYPE_Q8_0 },
    { "Q5_0",   8,  GGML_TYPE_Q5_0 },
    { "Q5_1",   9,  GGML_TYPE_Q5_1 },
    { "Q2_K",   10, GGML_TYPE_Q2_K },
    { "Q3_K_S", 11, GGML_TYPE_Q3_K },
    { "Q3_K_M", 12, GGML_TYPE_Q3_K },
    { "Q3_K_L", 13, GGML_TYPE_Q3_K },
    { "Q4_K_S", 14, GGML_TYPE_Q4_K },
    { "Q4_K_M", 15, GGML_TYPE_Q4_K },
    { "Q5_K_S", 16, GGML_TYPE_Q5_K },
    { "Q5_K_M", 17, GGML_TYPE_Q5_K },
    { "Q6_K",   18, GGML_TYPE_Q6_K },
    { "IQ4_NL", 25, GGML_TYPE_IQ4_NL },
    { "IQ4_XS", 30, GGML_TYPE_IQ4_XS },
    { "BF16",   32, GGML_TYPE_BF16 },
};

#define N_FTYPES  (sizeof(ftypes) / sizeof(ftypes[0]))

#define QUANT_VERSION  2          /* ggml's GGML_QNT_VERSION */


const llm_quant_ftype *
llm_quant_ftype_find(const char *name)
{
    for (size_t i = 0; i < N_FTYPES; i++) {
        if (strcasecmp(name, ftypes[i].name) == 0) {
            return &ftypes[i];
        }
    }
    return NULL;
}


const char *
llm_quant_ftype_list(void)
{
    static char list[256];

    if (list[0] == '\0') {
        for (size_t i = 0; i < N_FTYPES; i++) {
            strcat(list, ftypes[i].name);
            strcat(list, i + 1 < N_FTYPES ? ", " : "");
        }
    }
    return list;
}


/* --- the mix (llama-quant.cpp, llama_tensor_get_type) ---------------------- */

static int
ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);

    return n >= t && strcmp(s + n - t, tail) == 0;
}


/* llama.cpp's use_more_bits: the first and last eighth of the layers and
 * every third one between */
static int
more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}


static int
is(const llm_quant_ftype *ft, const char *name)
{
    return strcmp(ft->name, name) == 0;
}


/* the type the mix gives a quantized tensor before the shape fallback */
static uint32_t
mix_type(const llm_quant_ftype *ft, const char *name, uint64_t nx,
    int layer, int n_layer, int n_gqa, int has_output)
{
    uint32_t t = ft->type;

    if (strcmp(name, "output.weight") == 0
        || (!has_output && strcmp(name, "token_embd.weight") == 0))
    {
        if (nx % ggml_type_block(t) != 0) {
            return GGML_TYPE_Q8_0;
        }
        return t == GGML_TYPE_Q8_0 ? t : GGML_TYPE_Q6_K;
    }
    if (strstr(name, "attn_v.weight")) {
        if (is(ft, "Q2_K")) {
            t = n_gqa >= 4 ? GGML_TYPE_Q4_K : GGML_TYPE_Q3_K;
        } else if (is(ft, "Q3_K_M")) {
            t = layer < 2 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
        } else if (is(ft, "Q3_K_L")) {
            t = GGML_TYPE_Q5_K;
        } else if ((is(ft, "IQ4_NL") || is(ft, "IQ4_XS")) && n_gqa >= 4) {
            t = GGML_TYPE_Q5_K;
        } else if ((is(ft, "Q4_K_M") || is(ft, "Q5_K_M"))
                   && more_bits(layer, n_layer))
        {
            t = GGML_TYPE_Q6_K;
        } else if (is(ft, "Q4_K_S") && layer < 4) {
            t = GGML_TYPE_Q5_K;
        }
    } else if (strstr(name, "ffn_down")) {
        if (is(ft, "Q2_K")) {
            t = GGML_TYPE_Q3_K;
        } else if (is(ft, "Q3_K_M")) {
            t = layer < n_layer / 16 ? GGML_TYPE_Q5_K : GGML_TYPE_Q4_K;
        } else if (is(ft, "Q3_K_L")) {
            t = GGML_TYPE_Q5_K;
        } else if (is(ft, "Q4_K_M")) {
            t = more_bits(layer, n_layer) ? GGML_TYPE_Q6_K : t;
        } else if (layer < n_layer / 8
                   && (is(ft, "IQ4_NL") || is(ft, "IQ4_XS")))
        {
            t = GGML_TYPE_Q5_K;
        } else if (is(ft, "Q5_K_M") && more_bits(layer, n_layer)) {
            t = GGML_TYPE_Q6_K;
        } else if (is(ft, "Q4_K_S") && layer < n_layer / 8) {
            t = GGML_TYPE_Q5_K;
        }
    } else if (strstr(name, "attn_output.weight")) {
        if (is(ft, "Q2_K")) {
            t = GGML_TYPE_Q3_K;
        } else if (is(ft, "Q3_K_M")) {
            t = GGML_TYPE_Q4_K;
        } else if (is(ft, "Q3_K_L")) {
            t = GGML_TYPE_Q5_K;
        }
    } else if (strstr(name, "attn_qkv.weight")) {
        if (is(ft, "Q3_K_M") || is(ft, "Q3_K_L")) {
            t = GGML_TYPE_Q4_K;
        } else if (is(ft, "Q4_K_M")) {
            t = GGML_TYPE_Q5_K;
        } else if (is(ft, "Q5_K_M")) {
            t = GGML_TYPE_Q6_K;
        }
    }
    return t;
}


/* rows that do not fit a type's block: llama.cpp's fallbacks */
static uint32_t
fallback(uint32_t t, uint64_t nx)
{
    if (nx % ggml_type_block(t) == 0) {
        return t;
    }
    switch (t) {
    case GGML_TYPE_Q2_K:
    case GGML_TYPE_Q3_K:   t = GGML_TYPE_Q4_0; break;
    case GGML_TYPE_IQ4_XS: t = GGML_TYPE_IQ4_NL; break;
    case GGML_TYPE_Q4_K:   t = GGML_TYPE_Q5_0; break;
    case GGML_TYPE_Q5_K:   t = GGML_TYPE_Q5_1; break;
    case GGML_TYPE_Q6_K:   t = GGML_TYPE_Q8_0; break;
    default:               break;
    }
    return nx % ggml_type_block(t) == 0 ? t : GGML_TYPE_F16;
}


uint32_t
llm_quantize_tensor_type(const llm_quant_ftype *ft, const char *name,
    uint32_t n_dims, const uint64_t *ne, uint32_t cur_type, int n_layer,
    int n_gqa, int has_output)
{
    int layer = -1;
    uint32_t t = ft->type;

    if (!ends_with(name, "weight") || n_dims < 2
        || strstr(name, "_norm.weight") || strstr(name, "ffn_gate_inp.weight")
        || strcmp(name, "rope_freqs.weight") == 0)
    {
        return cur_type;
    }
    if (t != GGML_TYPE_F32 && t != GGML_TYPE_F16 && t != GGML_TYPE_BF16) {
        (void) sscanf(name, "blk.%d.", &layer);
        t = mix_type(ft, name, ne[0], layer, n_layer, n_gqa, has_output);
    }
    return fallback(t, ne[0]);
}


/* --- the file -------------------------------------------------------------- */

static int
fail(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}


/* the model numbers the mix needs */
static void
model_numbers(const gguf_file *g, int *n_layer, int *n_gqa, int *has_output)
{
    char key[128];
    const char *arch;
    uint64_t alen;
    uint32_t n = 0, heads = 1, kv = 0;

    *has_output = gguf_find_tensor(g, "output.weight") != NULL;
    if (gguf_get_str(g, "general.architecture", &arch, &alen) == 0
        && alen < 64)
    {
        snprintf(key, sizeof(key), "%.*s.block_count", (int) alen, arch);
        (void) gguf_get_u32(g, key, &n);
        snprintf(key, sizeof(key), "%.*s.attention.head_count", (int) alen,
                 arch);
        (void) gguf_get_u32(g, key, &heads);
        snprintf(key, sizeof(key), "%.*s.attention.head_count_kv",
                 (int) alen, arch);
        if (gguf_get_u32(g, key, &kv) != 0 || kv == 0) {
            kv = heads;
        }
    }
    *n_layer = (int) n;
    *n_gqa = kv ? (int) (heads / kv) : 1;
}


static uint64_t
tensor_rows(const gguf_tensor *t)
{
    uint64_t rows = 1;

    for (uint32_t d = 1; d < t->n_dims; d++) {
        rows *= t->ne[d];
    }
    return rows;
}


/* t's data in type `to` into w, row by row through floats */
static int
write_tensor(gguf_writer *w, const gguf_tensor *t, uint32_t to, float *f,
    uint8_t *row)
{
    uint64_t rows = tensor_rows(t), ne0 = t->ne[0];
    uint64_t in_b = ggml_row_size(t->type, ne0), out_b = ggml_row_size(to, ne0);

    if (to == t->type) {
        gguf_w_bytes(w, t->data, t->nbytes);
        return 0;
    }
    for (uint64_t r = 0; r < rows; r++) {
        llm_dequant_row(t->type, (const uint8_t *) t->data + r * in_b, f,
                        (int64_t) ne0);
        if (llm_quantize_row(to, f, row, (int64_t) ne0) != 0) {
            return -1;
        }
        gguf_w_bytes(w, row, out_b);
    }
    return 0;
}


int
llm_quantize_file(const char *in, const char *out, const llm_quant_ftype *ft,
    FILE *log, char *err, size_t err_len)
{
    gguf_file g;
    gguf_writer w = { NULL, 0, 0 };
    uint32_t *types = NULL;
    float *f = NULL;
    uint8_t *row = NULL;
    uint64_t off, max_ne0 = 1, in_total = 0, out_total = 0;
    int n_layer, n_gqa, has_output, rc = -1, have_ft = 0, have_qv = 0;
    struct stat st_in, st_out;

    if (gguf_open(&g, in) != 0) {
        rc = fail(err, err_len, "%s", g.err);
        gguf_close(&g);
        return rc;
    }
    model_numbers(&g, &n_layer, &n_gqa, &has_output);
    types = calloc(g.n_tensors ? g.n_tensors : 1, sizeof(*types));
    if (types == NULL) {
        fail(err, err_len, "out of memory");
        goto done;
    }
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const gguf_tensor *t = &g.tensors[i];
        types[i] = llm_quantize_tensor_type(ft, t->name, t->n_dims, t->ne,
                                            t->type, n_layer, n_gqa,
                                            has_output);
        max_ne0 = t->ne[0] > max_ne0 ? t->ne[0] : max_ne0;
    }
    f = malloc(sizeof(float) * max_ne0);
    row = malloc(sizeof(float) * max_ne0);
    if (f == NULL || row == NULL) {
        fail(err, err_len, "out of memory for a row of %llu",
             (unsigned long long) max_ne0);
        goto done;
    }
    if (stat(out, &st_out) == 0 && stat(in, &st_in) == 0
        && st_out.st_dev == st_in.st_dev && st_out.st_ino == st_in.st_ino)
    {
        fail(err, err_len, "%s: the output is the input file", out);
        goto done;
    }
    if ((w.f = fopen(out, "wb")) == NULL) {
        fail(err, err_len, "%s: %s", out, strerror(errno));
        goto done;
    }

    /* header and metadata, general.file_type and quantization_version
     * set (added when the input has none) */
    for (uint64_t i = 0; i < g.n_kv; i++) {
        have_ft |= strcmp(g.kv[i].key, "general.file_type") == 0;
        have_qv |= strcmp(g.kv[i].key, "general.quantization_version") == 0;
    }
    gguf_w_u32(&w, 0x46554747);                              /* "GGUF" */
    gguf_w_u32(&w, 3);
    gguf_w_u64(&w, g.n_tensors);
    gguf_w_u64(&w, g.n_kv + !have_ft + !have_qv);
    for (uint64_t i = 0; i < g.n_kv; i++) {
        const gguf_kv *kv = &g.kv[i];
        const uint8_t *raw;
        uint64_t len;
        if (strcmp(kv->key, "general.file_type") == 0
            || strcmp(kv->key, "general.quantization_version") == 0)
        {
            gguf_w_kv_u32(&w, kv->key,
                          strcmp(kv->key, "general.file_type") == 0
                          ? ft->ftype : QUANT_VERSION);
            continue;
        }
        gguf_kv_raw(kv, &raw, &len);
        gguf_w_kv_raw(&w, kv->key, kv->type, raw, len);
    }
    if (!have_ft) {
        gguf_w_kv_u32(&w, "general.file_type", ft->ftype);
    }
    if (!have_qv) {
        gguf_w_kv_u32(&w, "general.quantization_version", QUANT_VERSION);
    }

    /* tensor index: offsets of the new sizes, each aligned */
    off = 0;
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const gguf_tensor *t = &g.tensors[i];
        gguf_w_tensor_info(&w, t->name, t->n_dims, t->ne, types[i], off);
        off += ggml_row_size(types[i], t->ne[0]) * tensor_rows(t);
        off = (off + g.alignment - 1) / g.alignment * g.alignment;
    }
    gguf_w_pad(&w, g.alignment);

    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const gguf_tensor *t = &g.tensors[i];
        uint64_t bytes = ggml_row_size(types[i], t->ne[0]) * tensor_rows(t);
        if (write_tensor(&w, t, types[i], f, row) != 0) {
            fail(err, err_len, "tensor '%s': no quantizer for %s", t->name,
                 ggml_type_name(types[i]));
            goto done;
        }
        gguf_w_pad(&w, g.alignment);
        in_total += t->nbytes;
        out_total += bytes;
        if (log) {
            fprintf(log, "%-32s %-6s -> %-6s %10llu -> %10llu bytes\n",
                    t->name, ggml_type_name(t->type),
                    ggml_type_name(types[i]), (unsigned long long) t->nbytes,
                    (unsigned long long) bytes);
        }
    }
    if (fflush(w.f) != 0 || w.failed) {
        fail(err, err_len, "%s: write failed: %s", out, strerror(errno));
        goto done;
    }
    if (log) {
        fprintf(log, "%s: %s, %llu tensors, %.1f MB -> %.1f MB\n", out,
                ft->name, (unsigned long long) g.n_tensors, in_total / 1e6,
                out_total / 1e6);
    }
    rc = 0;

done:
    if (w.f && fclose(w.f) != 0 && rc == 0) {
        rc = fail(err, err_len, "%s: %s", out, strerror(errno));
    }
    if (rc != 0 && w.f) {
        (void) unlink(out);
    }
    free(types);
    free(f);
    free(row);
    gguf_close(&g);
    return rc;
}
