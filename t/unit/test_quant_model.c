/*
 * Every added type through the whole forward pass: the tiny llama with
 * rows of 256 (t/data/models/tiny-q4k-untied.gguf), its matrices
 * requantized in memory to one type at a time, run by the CPU backend's
 * fast kernels (quantized activations, the type's own blocks) and by its
 * exact mode (dequantized weights, float activations, double sums: the
 * float reference of the same weights). They differ by activation
 * rounding only (docs/numerics.md, rule 2): the logits stay within a
 * stated bound and the top token agrees. A kernel that reads a layout
 * wrong lands far outside (a Q5_0 offset of 15 instead of 16 in the AVX2
 * kernel moves them by 5.9 and changes the top token: checked).
 * The tiny qwen3moe likewise, its experts requantized to the 32-element
 * block types (its rows are 64 and 32 long): measured 0.09-0.15.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "model/model.h"
#include "quant.h"
#include "tensor.h"
#include "tensor_type.h"
#include "tap.h"

#define MODEL_PATH  "t/data/models/tiny-q4k-untied.gguf"

static const int32_t prompt[] = { 1, 403, 407, 261, 378, 10, 90, 160, 33 };
#define N_PROMPT  ((int) (sizeof(prompt) / sizeof(prompt[0])))

/* buffers of the requantized matrices, freed after each type */
static void *bufs[256];
static int   n_bufs;


/* w's rows in `type`, in a new buffer */
static int
requant(llm_tensor *w, uint32_t type)
{
    size_t rb = ggml_row_size(type, w->cols);
    uint8_t *p = malloc(rb * w->rows);
    float *f = malloc(sizeof(float) * w->cols);

    if (p == NULL || f == NULL || n_bufs == 256) {
        free(p);
        free(f);
        return -1;
    }
    for (int r = 0; r < w->rows; r++) {
        llm_dequant_row(w->type, (const uint8_t *) w->data + r * w->row_stride,
                        f, w->cols);
        if (llm_quantize_row(type, f, p + r * rb, w->cols) != 0) {
            free(p);
            free(f);
            return -1;
        }
    }
    free(f);
    *w = llm_tensor_make(p, type, w->rows, w->cols);
    bufs[n_bufs++] = p;
    return 0;
}


/* the last position's logits of the prompt; 0 or -1 */
static int
forward(const llm_model *m, int exact, float *logits)
{
    char err[512];
    llm_backend_options o;
    llm_backend *be;
    int32_t table[1] = { 0 }, n_blocks = 1, pos[N_PROMPT], seq[N_PROMPT];
    int32_t last = N_PROMPT - 1;
    const int32_t *tables[1] = { table };
    int rc;

    llm_backend_options_default(&o, m);
    o.kv_n_blocks = 1;
    o.max_batch_tokens = 16;
    o.exact = exact;
    if ((be = llm_backend_cpu_create(m, &o, err, sizeof(err))) == NULL) {
        printf("# backend: %s\n", err);
        return -1;
    }
    for (int i = 0; i < N_PROMPT; i++) {
        pos[i] = i;
        seq[i] = 0;
    }
    llm_batch b = { N_PROMPT, prompt, pos, seq, 1, tables, &n_blocks, 1,
                    &last, logits, 0, NULL, NULL, NULL, 0, NULL };
    rc = llm_backend_forward(be, &b);
    llm_backend_free(be);
    return rc;
}


static int
argmax(const float *x, int n)
{
    int best = 0;

    for (int i = 1; i < n; i++) {
        best = x[i] > x[best] ? i : best;
    }
    return best;
}


/*
 * The tiny qwen3moe (t/data/models/hf-qwen3moe.gguf, rows of 64 and 32:
 * the 32-element block types) with its attention and every expert
 * requantized: experts run in their own blocks like dense weights.
 */
static void
test_moe(const uint32_t *types, size_t n_types, float bound)
{
    for (size_t k = 0; k < n_types; k++) {
        llm_model m;
        uint32_t type = types[k];
        int rc = 0;

        if (llm_model_load(&m, "t/data/models/hf-qwen3moe.gguf", 0, 1)
            != 0)
        {
            ok(0, "qwen3moe loads: %s", m.err);
            return;
        }
        for (int l = 0; l < m.cfg.n_layers; l++) {
            llm_layer *L = &m.layers[l];
            rc |= requant(&L->wq, type) | requant(&L->wk, type)
                  | requant(&L->wv, type) | requant(&L->wo, type);
            for (int e = 0; e < m.cfg.n_expert; e++) {
                rc |= requant(&L->exp_gate[e], type)
                      | requant(&L->exp_up[e], type)
                      | requant(&L->exp_down[e], type);
            }
        }
        float *fast = malloc(sizeof(float) * m.cfg.vocab_size);
        float *ref = malloc(sizeof(float) * m.cfg.vocab_size);
        if (ok(rc == 0 && forward(&m, 1, ref) == 0
               && forward(&m, 0, fast) == 0,
               "qwen3moe %s: attention and experts requantized, both "
               "forwards run", ggml_type_name(type)))
        {
            float diff = 0.0f, amax = 0.0f;
            for (int i = 0; i < m.cfg.vocab_size; i++) {
                diff = fmaxf(diff, fabsf(fast[i] - ref[i]));
                amax = fmaxf(amax, fabsf(ref[i]));
            }
            ok(diff <= bound, "qwen3moe %s: fast kernels within %g of the "
               "exact forward (max |dlogit| %.5f, logits up to %.2f)",
               ggml_type_name(type), bound, diff, amax);
            is_int(argmax(fast, m.cfg.vocab_size),
                   argmax(ref, m.cfg.vocab_size),
                   "qwen3moe %s: same top token", ggml_type_name(type));
        }
        free(fast);
        free(ref);
        llm_model_free(&m);
        while (n_bufs > 0) {
            free(bufs[--n_bufs]);
        }
    }
}


int
main(void)
{
    static const uint32_t types[] = {
        GGML_TYPE_Q4_K, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL,
        GGML_TYPE_MXFP4, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q5_K,
        GGML_TYPE_IQ4_XS,
    };
    /* max |fast - exact| over the vocabulary: measured 0.16-0.28 for
     * every type here, Q4_K's established kernels included (0.27), with
     * logits up to about 10: twice the largest */
    const float bound = 0.6f;

    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        llm_model m;
        uint32_t type = types[k];
        int rc = 0;

        if (llm_model_load(&m, MODEL_PATH, 0, 1) != 0) {
            ok(0, "%s loads (run from the repository root): %s", MODEL_PATH,
               m.err);
            return tap_done();
        }
        for (int l = 0; l < m.cfg.n_layers; l++) {
            llm_layer *L = &m.layers[l];
            rc |= requant(&L->wq, type) | requant(&L->wk, type)
                  | requant(&L->wv, type) | requant(&L->wo, type)
                  | requant(&L->w_gate, type) | requant(&L->w_up, type)
                  | requant(&L->w_down, type);
        }
        rc |= requant(&m.output, type);
        float *fast = malloc(sizeof(float) * m.cfg.vocab_size);
        float *ref = malloc(sizeof(float) * m.cfg.vocab_size);
        if (!ok(rc == 0 && forward(&m, 1, ref) == 0
                && forward(&m, 0, fast) == 0,
                "%s: every matrix requantized, both forwards run",
                ggml_type_name(type)))
        {
            goto next;
        }
        float diff = 0.0f, amax = 0.0f;
        for (int i = 0; i < m.cfg.vocab_size; i++) {
            diff = fmaxf(diff, fabsf(fast[i] - ref[i]));
            amax = fmaxf(amax, fabsf(ref[i]));
        }
        ok(diff <= bound, "%s: fast kernels within %g of the exact forward "
           "(max |dlogit| %.5f, logits up to %.2f)", ggml_type_name(type),
           bound, diff, amax);
        is_int(argmax(fast, m.cfg.vocab_size), argmax(ref, m.cfg.vocab_size),
               "%s: same top token", ggml_type_name(type));
    next:
        free(fast);
        free(ref);
        llm_model_free(&m);
        while (n_bufs > 0) {
            free(bufs[--n_bufs]);
        }
    }
    static const uint32_t moe_types[] = {
        GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL,
        GGML_TYPE_MXFP4,
    };
    test_moe(moe_types, sizeof(moe_types) / sizeof(moe_types[0]), bound);
    return tap_done();
}
