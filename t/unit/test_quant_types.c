/*
 * The quantized block types, each against an outside definition:
 *  - llm_dequant_row of random blocks == the `gguf` package's dequantizers
 *    bit for bit (golden vectors in t/data/quant, tools/quant_golden.py);
 *  - each type's reference dot (quant_vals.h) against the float dot of
 *    its dequantized weights, within the activation-rounding bound;
 *  - llm_matmul on every instruction set == the reference dot bit for bit
 *    (n_x 1..9, row and column views, 1-3 threads);
 *  - our quantizer's blocks decode close to their input;
 *  - unsupported types are refused by name, and the supported list the
 *    loaders print is the type table's;
 *  - the quantizer's mix: llama.cpp's rules and fallbacks, tensor by
 *    tensor, for SmolLM2's shapes (30 layers, rows of 576 and 1536).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "matmul.h"
#include "model/quantize.h"
#include "quant.h"
#include "quant_vals.h"
#include "tensor_type.h"
#include "threadpool.h"
#include "tap.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint32_t
rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t) (rng >> 16);
}

static float
rndf(void)          /* -1 .. 1 */
{
    return (float) rnd() / 32768.0f / 32768.0f * 2.0f - 1.0f;
}

static const char *const golden_types[] = {
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "MXFP4",
    "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS",
};

static const uint32_t new_types[] = {
    GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL, GGML_TYPE_MXFP4,
    GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q5_K, GGML_TYPE_IQ4_XS,
};

#define N_NEW  (sizeof(new_types) / sizeof(new_types[0]))


static uint32_t
type_by_name(const char *name)
{
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++) {
        if (strcmp(ggml_type_name(t), name) == 0) {
            return t;
        }
    }
    return GGML_TYPE_COUNT;
}


static void *
read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    void *p = NULL;
    long n;

    if (f == NULL) {
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0
        && fseek(f, 0, SEEK_SET) == 0 && (p = malloc(n)) != NULL
        && fread(p, 1, n, f) != (size_t) n)
    {
        free(p);
        p = NULL;
    }
    *len = p ? (size_t) n : 0;
    fclose(f);
    return p;
}


/* our reference values == gguf-py's, every bit (+0 and -0 apart) */
static void
test_golden(void)
{
    for (size_t k = 0; k < sizeof(golden_types) / sizeof(golden_types[0]);
         k++)
    {
        char path[256];
        size_t nb, nv;
        uint32_t type = type_by_name(golden_types[k]);
        snprintf(path, sizeof(path), "t/data/quant/%s.blocks",
                 golden_types[k]);
        uint8_t *blocks = read_file(path, &nb);
        snprintf(path, sizeof(path), "t/data/quant/%s.f32", golden_types[k]);
        float *want = read_file(path, &nv);
        if (!ok(blocks && want && type < GGML_TYPE_COUNT,
                "%s golden vectors readable (run from the repository root)",
                golden_types[k]))
        {
            free(blocks);
            free(want);
            continue;
        }
        int64_t n = (int64_t) (nb / ggml_type_size(type))
                    * ggml_type_block(type);
        float *got = malloc(sizeof(float) * n);
        int bad = 0, first = -1;
        is_int(n * 4, nv, "%s: %lld values in the golden file",
               golden_types[k], (long long) n);
        llm_dequant_row(type, blocks, got, n);
        for (int64_t i = 0; i < n && (size_t) i * 4 < nv; i++) {
            if (memcmp(&got[i], &want[i], 4) != 0) {
                bad++;
                first = first < 0 ? (int) i : first;
            }
        }
        ok(bad == 0, "%s: %lld values == gguf-py's bit for bit (%d differ%s"
           "%.9g vs %.9g)", golden_types[k], (long long) n, bad,
           bad ? ", first " : "", first >= 0 ? got[first] : 0.0,
           first >= 0 ? want[first] : 0.0);
        free(got);
        free(blocks);
        free(want);
    }
}


/* the types gguf-py quantizes by ggml's reference rules: ours writes the
 * same bytes from the same floats */
static void
test_quantize_golden(void)
{
    static const char *const names[] = {
        "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "MXFP4",
    };

    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        char path[256];
        size_t nx, nq;
        uint32_t type = type_by_name(names[k]);
        snprintf(path, sizeof(path), "t/data/quant/%s.x", names[k]);
        float *x = read_file(path, &nx);
        snprintf(path, sizeof(path), "t/data/quant/%s.q", names[k]);
        uint8_t *want = read_file(path, &nq);
        if (!ok(x && want, "%s quantizer golden readable", names[k])) {
            free(x);
            free(want);
            continue;
        }
        int64_t n = (int64_t) (nx / 4);
        uint8_t *got = calloc(1, nq);
        int bad = 0, first = -1;
        is_int(ggml_row_size(type, n), nq, "%s: %lld values in %zu bytes",
               names[k], (long long) n, nq);
        is_int(llm_quantize_row(type, x, got, n), 0, "%s quantizes",
               names[k]);
        for (size_t i = 0; i < nq; i++) {
            if (got[i] != want[i]) {
                bad++;
                first = first < 0 ? (int) i : first;
            }
        }
        ok(bad == 0, "%s: llm_quantize_row == gguf-py's quantizer, %zu "
           "bytes (%d differ, first at %d)", names[k], nq, bad, first);
        free(got);
        free(x);
        free(want);
    }
}


/* random weights quantized by our quantizer: the blocks decode within a
 * fraction of the row's range (a gross layout error is far outside) */
static void
test_quantizer(void)
{
    enum { N = 1024 };
    static float x[N], y[N];
    static uint8_t row[N * 2];
    const uint32_t types[] = {
        GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL, GGML_TYPE_MXFP4,
        GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K,
        GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS,
    };
    /* rms error / rms of x, about 1.3 times what ours gives (a layout
     * error or a lost bit gives several times more) */
    const double limit[] = { 0.08, 0.04, 0.12, 0.15, 0.30, 0.23, 0.08,
                             0.045, 0.032, 0.12 };

    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        double e2 = 0.0, x2 = 0.0;
        for (int i = 0; i < N; i++) {
            /* a heavy tail like real weights: a few large values */
            x[i] = rndf() * (rnd() % 16 == 0 ? 4.0f : 1.0f);
        }
        is_int(llm_quantize_row(types[k], x, row, N), 0, "%s quantizes",
               ggml_type_name(types[k]));
        llm_dequant_row(types[k], row, y, N);
        for (int i = 0; i < N; i++) {
            e2 += (double) (y[i] - x[i]) * (y[i] - x[i]);
            x2 += (double) x[i] * x[i];
        }
        ok(sqrt(e2 / x2) < limit[k], "%s: relative rms error %.4f < %.3f",
           ggml_type_name(types[k]), sqrt(e2 / x2), limit[k]);
    }
    is_int(llm_quantize_row(GGML_TYPE_Q5_K, x, row, 100), -1,
           "Q5_K of 100 elements (not a multiple of 256) is refused");
}


/* random blocks of type (scales kept sane) */
static void
random_blocks(uint32_t type, uint8_t *p, int64_t nb)
{
    size_t bytes = ggml_type_size(type);

    for (size_t i = 0; i < bytes * nb; i++) {
        p[i] = (uint8_t) rnd();
    }
    for (int64_t b = 0; b < nb; b++, p += bytes) {
        llm_half d = llm_fp32_to_fp16(0.01f + 0.02f * (float) (rnd() % 64)
                                      / 64.0f);
        switch (type) {
        case GGML_TYPE_Q5_0: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ4_XS:
            memcpy(p, &d, 2);
            break;
        case GGML_TYPE_Q5_1: case GGML_TYPE_Q5_K:
            memcpy(p, &d, 2);
            memcpy(p + 2, &d, 2);
            break;
        case GGML_TYPE_MXFP4:
            p[0] = (uint8_t) (120 + rnd() % 6);
            break;
        case GGML_TYPE_Q2_K:
            memcpy(p + 80, &d, 2);
            memcpy(p + 82, &d, 2);
            break;
        case GGML_TYPE_Q3_K:
            memcpy(p + 108, &d, 2);
            break;
        }
    }
}


/* reference dot vs the float dot of the dequantized weights: activation
 * rounding moves each x by at most amax(block) / 254 */
static void
test_ref_accuracy(void)
{
    enum { COLS = 768 };
    static uint8_t w[COLS * 2];
    static float wf[COLS], x[COLS];
    static llm_block_q8a qa[COLS / LLM_QK];
    static llm_block_q8k qk[COLS / LLM_QK_K];

    for (size_t k = 0; k < N_NEW; k++) {
        uint32_t type = new_types[k];
        int blk = (int) ggml_type_block(type);
        double worst = 0.0;
        int fails = 0;
        for (int rep = 0; rep < 20; rep++) {
            random_blocks(type, w, COLS / blk);
            llm_dequant_row(type, w, wf, COLS);
            for (int i = 0; i < COLS; i++) {
                x[i] = rndf() * (rnd() % 8 == 0 ? 3.0f : 1.0f);
            }
            float got;
            if (blk == LLM_QK) {
                llm_quantize_row_q8a_ref(x, qa, COLS);
                got = llm_dot_q32x_ref(type, COLS, w, qa);
            } else {
                llm_quantize_row_q8k(x, qk, COLS);
                got = llm_dot_qkx_ref(type, COLS, w, qk);
            }
            double exact = 0.0, bound = 0.0, mag = 0.0;
            for (int b = 0; b < COLS / blk; b++) {
                double amax = 0.0, wsum = 0.0;
                for (int j = b * blk; j < (b + 1) * blk; j++) {
                    exact += (double) wf[j] * x[j];
                    amax = fmax(amax, fabs(x[j]));
                    wsum += fabs(wf[j]);
                    mag += fabs((double) wf[j] * x[j]);
                }
                bound += amax / 254.0 * wsum;
            }
            bound += 1e-5 * mag;
            worst = fmax(worst, fabs(got - exact) / bound);
            fails += fabs(got - exact) > bound;
        }
        ok(fails == 0, "%s reference dot within the activation-rounding "
           "bound of the float dot (worst %.3f of it, 20 rows of %d)",
           ggml_type_name(type), worst, COLS);
    }
}


/* llm_matmul (any ISA, threads, batch, views) == the reference dot */
static void
test_matmul_exact(void)
{
    enum { ROWS = 19, COLS = 1536, NX = 21 };
    static uint8_t w[ROWS * COLS * 2];
    static float x[NX * COLS], out[NX * ROWS], sub[NX * ROWS];
    static llm_block_q8a qa[COLS / LLM_QK];
    static llm_block_q8k qk[COLS / LLM_QK_K];
    llm_threadpool *tp3 = llm_threadpool_create(3);
    int isa_max = llm_kernels_isa();

    for (int i = 0; i < NX * COLS; i++) {
        x[i] = rndf() * (rnd() % 8 == 0 ? 3.0f : 1.0f);
    }
    for (size_t k = 0; k < N_NEW; k++) {
        uint32_t type = new_types[k];
        int blk = (int) ggml_type_block(type);
        /* 32-element types: 43 blocks, so kernels that take blocks by
         * eights meet a partial, odd group at the row's end */
        int cols = blk == LLM_QK ? COLS - 5 * LLM_QK : COLS;
        size_t rb = ggml_row_size(type, cols);
        llm_tensor t = llm_tensor_make(w, type, ROWS, cols);
        float want[NX * ROWS];
        random_blocks(type, w, (int64_t) ROWS * cols / blk);
        if (type == GGML_TYPE_MXFP4) {
            /* every fourth row's scales subnormal or the smallest normal
             * (e 0..3: both of llm_e8m0_half's branches), alone in their
             * sums so that a wrong one shows */
            for (int r = 3; r < ROWS; r += 4) {
                for (int b = 0; b < cols / blk; b++) {
                    w[r * rb + b * sizeof(llm_block_mxfp4)] =
                        (uint8_t) (rnd() % 4);
                }
            }
        }
        for (int i = 0; i < NX; i++) {
            if (blk == LLM_QK) {
                llm_quantize_row_q8a_ref(x + i * cols, qa, cols);
            } else {
                llm_quantize_row_q8k(x + i * cols, qk, cols);
            }
            for (int r = 0; r < ROWS; r++) {
                want[i * ROWS + r] = blk == LLM_QK
                    ? llm_dot_q32x_ref(type, cols, w + r * rb, qa)
                    : llm_dot_qkx_ref(type, cols, w + r * rb, qk);
            }
        }
        for (int isa = 0; isa <= isa_max; isa++) {
            int bad = 0;
            llm_kernels_set_isa(isa);
            for (int n_x = 1; n_x <= NX; n_x += 4) {
                llm_matmul(n_x == 5 ? tp3 : NULL, out, x, n_x, &t);
                bad += memcmp(out, want, sizeof(float) * n_x * ROWS) != 0;
            }
            /* a row view and a block-aligned column range */
            llm_tensor rv = llm_tensor_rows(&t, 3, 11);
            llm_matmul(NULL, sub, x, NX, &rv);
            for (int i = 0; i < NX; i++) {
                bad += memcmp(sub + i * 11, want + i * ROWS + 3,
                              sizeof(float) * 11) != 0;
            }
            ok(bad == 0, "%s on %s: llm_matmul == reference dot bit for "
               "bit (n_x 1..21 by 4; 3 threads; a row view)",
               ggml_type_name(type), llm_kernels_isa_name(isa));
            llm_tensor cv = llm_tensor_cols(&t, 2 * LLM_QK_K, 512);
            llm_tensor cc = llm_tensor_make(NULL, type, ROWS, 512);
            static uint8_t wc[ROWS * 512 * 2];
            for (int r = 0; r < ROWS; r++) {
                memcpy(wc + r * cc.row_stride,
                       w + r * rb + ggml_row_size(type, 2 * LLM_QK_K),
                       cc.row_stride);
            }
            cc.data = wc;
            llm_matmul_ld(NULL, out, ROWS, x + 2 * LLM_QK_K, cols, NX, &cv);
            llm_matmul_ld(NULL, sub, ROWS, x + 2 * LLM_QK_K, cols, NX, &cc);
            ok(memcmp(out, sub, sizeof(float) * NX * ROWS) == 0,
               "%s on %s: a column view == the same columns copied",
               ggml_type_name(type), llm_kernels_isa_name(isa));
        }
        llm_kernels_set_isa(isa_max);
    }
    llm_threadpool_free(tp3);
}


static void
test_refused(void)
{
    const uint32_t refused[] = { 16, 17, 18, 19, 21, 22, 24, 29, 31, 34, 35,
                                 36, 40, 41, 42, 1000 };
    const char *names[] = { "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ3_S",
                            "IQ2_S", "I8", "IQ1_M", "Q4_0_4_4", "TQ1_0",
                            "TQ2_0", "IQ4_NL_4_4", "NVFP4", "Q1_0",
                            "unknown", "unknown" };
    char err[256], list[512] = "";
    uint8_t buf[256] = { 0 };
    int n = 0;

    for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++) {
        llm_tensor t = llm_tensor_make(buf, refused[k], 1, 256);
        t.row_stride = 256;
        is_int(llm_tensor_check(&t, err, sizeof(err)), -1,
               "type %u is refused", refused[k]);
        ok(strstr(err, names[k]) != NULL, "message names %s: %s", names[k],
           err);
    }
    /* GGML_TYPES_SUPPORTED == the table's supported types */
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++) {
        if (ggml_type_block(t) != 0) {
            char name[32];
            snprintf(name, sizeof(name), "%s, ", ggml_type_name(t));
            n++;
            ok(strstr(GGML_TYPES_SUPPORTED ", ", name) != NULL,
               "%s is in the supported list", ggml_type_name(t));
            strcat(list, name);
        }
    }
    int commas = 0;
    for (const char *p = GGML_TYPES_SUPPORTED; *p; p++) {
        commas += *p == ',';
    }
    is_int(commas + 1, n, "the supported list names the %d types the table "
           "supports (%s)", n, list);
}


static int
ends_with_norm(const char *name)
{
    return strstr(name, "_norm.") != NULL;
}


/* the type ftype name gives tensor `name` with rows of nx */
static uint32_t
mix(const char *ftype, const char *name, uint64_t nx, int has_output,
    int n_gqa)
{
    uint64_t ne[2] = { nx, 64 };

    return llm_quantize_tensor_type(llm_quant_ftype_find(ftype), name,
                                    ends_with_norm(name) ? 1 : 2, ne,
                                    GGML_TYPE_Q4_1, 30, n_gqa, has_output);
}


static void
test_mix(void)
{
    static const struct {
        const char *ftype, *name;
        uint64_t    nx;
        int         has_output, n_gqa;
        uint32_t    want;
    } cases[] = {
        /* Q4_K_M on SmolLM2: 576-wide rows fall back Q4_K -> Q5_0, the
         * Q6_K ones -> Q8_0; ffn_down (1536) keeps K-quants, Q6_K on
         * use_more_bits layers (< 3, >= 26, (i - 3) % 3 == 2) */
        { "Q4_K_M", "blk.0.attn_q.weight", 576, 0, 3, GGML_TYPE_Q5_0 },
        { "Q4_K_M", "blk.0.attn_v.weight", 576, 0, 3, GGML_TYPE_Q8_0 },
        { "Q4_K_M", "blk.9.attn_v.weight", 576, 0, 3, GGML_TYPE_Q5_0 },
        { "Q4_K_M", "blk.0.ffn_down.weight", 1536, 0, 3, GGML_TYPE_Q6_K },
        { "Q4_K_M", "blk.4.ffn_down.weight", 1536, 0, 3, GGML_TYPE_Q4_K },
        { "Q4_K_M", "blk.5.ffn_down.weight", 1536, 0, 3, GGML_TYPE_Q6_K },
        { "Q4_K_M", "blk.26.ffn_down.weight", 1536, 0, 3, GGML_TYPE_Q6_K },
        { "Q4_K_M", "token_embd.weight", 576, 0, 3, GGML_TYPE_Q8_0 },
        { "Q4_K_M", "token_embd.weight", 2048, 1, 3, GGML_TYPE_Q4_K },
        { "Q4_K_M", "output.weight", 2048, 1, 3, GGML_TYPE_Q6_K },
        { "Q4_K_M", "blk.3.attn_norm.weight", 576, 0, 3, GGML_TYPE_Q4_1 },
        /* Q5_K_M: Q5_K -> Q5_1 */
        { "Q5_K_M", "blk.4.ffn_up.weight", 576, 0, 3, GGML_TYPE_Q5_1 },
        { "Q5_K_M", "blk.4.ffn_down.weight", 1536, 0, 3, GGML_TYPE_Q5_K },
        /* Q3_K_M: attn_v Q5_K in layers 0-1, Q4_K after; ffn_down Q5_K
         * below n/16 (30 / 16 = 1: layer 0), Q4_K after; attn_output
         * Q4_K */
        { "Q3_K_M", "blk.1.attn_v.weight", 2048, 1, 4, GGML_TYPE_Q5_K },
        { "Q3_K_M", "blk.2.attn_v.weight", 2048, 1, 4, GGML_TYPE_Q4_K },
        { "Q3_K_M", "blk.0.ffn_down.weight", 8192, 1, 4, GGML_TYPE_Q5_K },
        { "Q3_K_M", "blk.1.ffn_down.weight", 8192, 1, 4, GGML_TYPE_Q4_K },
        { "Q3_K_M", "blk.2.attn_output.weight", 2048, 1, 4, GGML_TYPE_Q4_K },
        { "Q3_K_M", "blk.2.ffn_gate.weight", 2048, 1, 4, GGML_TYPE_Q3_K },
        { "Q3_K_M", "blk.2.ffn_gate.weight", 576, 0, 3, GGML_TYPE_Q4_0 },
        /* Q2_K: attn_v Q4_K with GQA >= 4 (else Q3_K), ffn_down Q3_K;
         * Q2_K/Q3_K rows of 576 -> Q4_0, as llama.cpp d32676d */
        { "Q2_K", "blk.2.attn_v.weight", 2048, 1, 4, GGML_TYPE_Q4_K },
        { "Q2_K", "blk.2.attn_v.weight", 2048, 1, 3, GGML_TYPE_Q3_K },
        { "Q2_K", "blk.2.attn_v.weight", 576, 0, 3, GGML_TYPE_Q4_0 },
        { "Q2_K", "blk.2.ffn_down.weight", 1536, 0, 3, GGML_TYPE_Q3_K },
        { "Q2_K", "blk.2.attn_q.weight", 2048, 1, 4, GGML_TYPE_Q2_K },
        /* IQ4_XS: -> IQ4_NL for 576; attn_v Q5_K with GQA >= 4 */
        { "IQ4_XS", "blk.9.attn_q.weight", 576, 0, 3, GGML_TYPE_IQ4_NL },
        { "IQ4_XS", "blk.9.attn_v.weight", 2048, 1, 4, GGML_TYPE_Q5_K },
        { "IQ4_XS", "blk.1.ffn_down.weight", 1536, 0, 3, GGML_TYPE_Q5_K },
        /* plain types, and rows that fit no block: F16 */
        { "Q8_0", "blk.0.attn_q.weight", 576, 0, 3, GGML_TYPE_Q8_0 },
        { "Q4_0", "token_embd.weight", 576, 0, 3, GGML_TYPE_Q8_0 },
        { "F16", "blk.0.attn_q.weight", 576, 0, 3, GGML_TYPE_F16 },
        { "Q6_K", "blk.0.attn_q.weight", 100, 0, 3, GGML_TYPE_F16 },
        { "Q2_K", "blk.0.attn_q.weight", 100, 0, 3, GGML_TYPE_F16 },
    };

    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        uint32_t got = mix(cases[k].ftype, cases[k].name, cases[k].nx,
                           cases[k].has_output, cases[k].n_gqa);
        ok(got == cases[k].want, "%s: %s (%llu cols%s, GQA %d) -> %s (got %s)",
           cases[k].ftype, cases[k].name, (unsigned long long) cases[k].nx,
           cases[k].has_output ? ", output.weight" : "", cases[k].n_gqa,
           ggml_type_name(cases[k].want), ggml_type_name(got));
    }
    ok(llm_quant_ftype_find("q4_k_m") != NULL
       && llm_quant_ftype_find("IQ2_XXS") == NULL,
       "file types by name, case-insensitive; IQ2_XXS is not one we make");
}


int
main(void)
{
    test_golden();
    test_quantizer();
    test_quantize_golden();
    test_ref_accuracy();
    test_matmul_exact();
    test_refused();
    test_mix();
    return tap_done();
}
