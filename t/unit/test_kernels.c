/*
 * CPU kernels: block layouts (hand-built blocks with exact values), the
 * conversions, real GGUF tensors, llm_matmul against a float reference,
 * and the numerics contract: every instruction set gives the scalar
 * kernels' bits, and batch size, thread count and views change nothing;
 * out of memory (alloc.h's hook) is a return value, not an abort.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "activation.h"
#include "alloc.h"
#include "norm.h"
#include "rope.h"
#include "format/gguf.h"
#include "isa.h"
#include "matmul.h"
#include "quant.h"
#include "threadpool.h"
#include "tap.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

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
    return (float) (rnd() % 2000001) / 1000000.0f - 1.0f;
}


/* --- conversions ---------------------------------------------------------- */

static void
test_conversions(void)
{
    int bad = 0;

    ok(llm_fp16_to_fp32(0x3c00) == 1.0f, "fp16 1.0");
    ok(llm_fp16_to_fp32(0xc000) == -2.0f, "fp16 -2.0");
    ok(llm_fp16_to_fp32(0x7bff) == 65504.0f, "fp16 max 65504");
    ok(llm_fp16_to_fp32(0x0001) == 0x1p-24f, "fp16 smallest subnormal");
    ok(llm_fp16_to_fp32(0x3555) == 0x1.554p-2f, "fp16 0x3555 = 0.333252");
    ok(isinf(llm_fp16_to_fp32(0xfc00)), "fp16 -inf");
    ok(llm_bf16_to_fp32(0x3f80) == 1.0f, "bf16 1.0");
    ok(llm_bf16_to_fp32(0xc0a0) == -5.0f, "bf16 -5.0");

    /* every finite half survives fp16 -> fp32 -> fp16 */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00) {
            continue;
        }
        if (llm_fp32_to_fp16(llm_fp16_to_fp32((llm_half) h)) != h) {
            bad++;
        }
    }
    is_int(bad, 0, "fp16 round trip of all finite halves");
    is_int(llm_fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00,
           "fp32 -> fp16 tie rounds to even (down)");
    is_int(llm_fp32_to_fp16(1.0f + 0x3p-11f), 0x3c02,
           "fp32 -> fp16 tie rounds to even (up)");
    is_int(llm_fp32_to_fp16(70000.0f), 0x7c00, "fp32 -> fp16 overflow is inf");
}


/* --- hand-built blocks ---------------------------------------------------- */

static int
same(const float *got, const float *want, int n)
{
    for (int i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            printf("#   element %d: got %.9g, want %.9g\n", i, got[i], want[i]);
            return 0;
        }
    }
    return 1;
}


static void
test_dequant_32(void)
{
    float got[32], want[32];
    llm_block_q4_0 b40;
    llm_block_q4_1 b41;
    llm_block_q8_0 b80;

    /* Q4_0: d = 0.5; byte j = (15 - j) << 4 | j */
    b40.d = 0x3800;
    for (int j = 0; j < 16; j++) {
        b40.qs[j] = (uint8_t) (j | (15 - j) << 4);
        want[j] = 0.5f * (float) (j - 8);
        want[j + 16] = 0.5f * (float) (15 - j - 8);
    }
    llm_dequant_row(GGML_TYPE_Q4_0, &b40, got, 32);
    ok(same(got, want, 32), "Q4_0 block: low nibbles 0..15, high 16..31");
    ok(got[0] == -4.0f && got[16] == 3.5f && got[31] == -4.0f,
       "Q4_0 spot values -4, 3.5, -4");

    /* Q4_1: d = 0.25, m = -1 */
    b41.d = 0x3400;
    b41.m = 0xbc00;
    for (int j = 0; j < 16; j++) {
        b41.qs[j] = (uint8_t) (j | (15 - j) << 4);
        want[j] = 0.25f * (float) j - 1.0f;
        want[j + 16] = 0.25f * (float) (15 - j) - 1.0f;
    }
    llm_dequant_row(GGML_TYPE_Q4_1, &b41, got, 32);
    ok(same(got, want, 32), "Q4_1 block");
    ok(got[15] == 2.75f && got[16] == 2.75f && got[31] == -1.0f,
       "Q4_1 spot values 2.75, 2.75, -1");

    /* Q8_0: d = 2, q = j - 16 and the extreme -128 */
    b80.d = 0x4000;
    for (int j = 0; j < 32; j++) {
        b80.qs[j] = (int8_t) (j - 16);
        want[j] = 2.0f * (float) (j - 16);
    }
    b80.qs[0] = -128;
    want[0] = -256.0f;
    llm_dequant_row(GGML_TYPE_Q8_0, &b80, got, 32);
    ok(same(got, want, 32), "Q8_0 block including -128");
}


/* Q4_K scale/min packing written from the format's description, the
 * inverse of what the kernels read */
static void
pack_q4k_scales(uint8_t s[12], const int sc[8], const int m[8])
{
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t) ((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = (uint8_t) ((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        s[j + 8] = (uint8_t) ((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
}


static void
test_dequant_k(void)
{
    static float got[256], want[256];
    llm_block_q4_K k4;
    llm_block_q6_K k6;
    int sc[8], m[8];

    /* Q4_K: d = 1, dmin = 0.5, scales that use the high bits */
    k4.d = 0x3c00;
    k4.dmin = 0x3800;
    for (int j = 0; j < 8; j++) {
        sc[j] = j + 1 + (j >= 4 ? 40 : 0);
        m[j] = 2 * j + 3 + (j >= 4 ? 32 : 0);
    }
    pack_q4k_scales(k4.scales, sc, m);
    memset(k4.qs, 0, sizeof(k4.qs));
    for (int e = 0; e < 256; e++) {
        int j = e / 32, l = e % 32, q = (l + j) % 16;
        k4.qs[32 * (j / 2) + l] |= (uint8_t) ((j & 1) ? q << 4 : q);
        want[e] = 1.0f * (float) sc[j] * (float) q - 0.5f * (float) m[j];
    }
    llm_dequant_row(GGML_TYPE_Q4_K, &k4, got, 256);
    ok(same(got, want, 256), "Q4_K block: 8 sub-blocks, 6-bit scales/mins");
    /* element 0: 1*1*0 - 0.5*3; element 255 (j 7, l 31): 48*6 - 0.5*49 */
    ok(got[0] == -1.5f && got[255] == 263.5f, "Q4_K spot values -1.5, 263.5");

    /* Q6_K: d = 0.5, scales k - 8, q = 7e mod 64 */
    k6.d = 0x3800;
    for (int k = 0; k < 16; k++) {
        k6.scales[k] = (int8_t) (k - 8);
    }
    memset(k6.ql, 0, sizeof(k6.ql));
    memset(k6.qh, 0, sizeof(k6.qh));
    for (int e = 0; e < 256; e++) {
        int h = e / 128, g = (e % 128) / 32, l = e % 32, q = (7 * e) % 64;
        k6.ql[64 * h + l + 32 * (g & 1)] |= (uint8_t) ((g >= 2) ? (q & 15) << 4
                                                                : (q & 15));
        k6.qh[32 * h + l] |= (uint8_t) ((q >> 4) << (2 * g));
        want[e] = 0.5f * (float) (e / 16 - 8) * (float) (q - 32);
    }
    llm_dequant_row(GGML_TYPE_Q6_K, &k6, got, 256);
    ok(same(got, want, 256), "Q6_K block: ql/qh split, signed scales");
    /* element 1: 0.5 * -8 * (7 - 32); element 200: 0.5 * 4 * (56 - 32) */
    ok(got[1] == 100.0f && got[200] == 48.0f, "Q6_K spot values 100, 48");
}


/* --- real tensors --------------------------------------------------------- */

static void
test_real_tensors(void)
{
    static const char *files[] = { "q8_0", "q4_1", "q4_0", "f16", "bf16" };
    char path[1024];
    gguf_file ref, q;
    const char *name = "blk.0.ffn_gate.weight";

    tap_fixture(path, sizeof(path), "models/tiny260K-f32.gguf");
    if (gguf_open(&ref, path) != 0) {
        ok(0, "open %s: %s", path, ref.err);
        gguf_close(&ref);
        return;
    }
    const gguf_tensor *tr = gguf_find_tensor(&ref, name);
    ok(tr && tr->type == GGML_TYPE_F32, "f32 file has %s", name);

    for (size_t f = 0; tr && f < sizeof(files) / sizeof(files[0]); f++) {
        char rel[64];

        snprintf(rel, sizeof(rel), "models/tiny260K-%s.gguf", files[f]);
        tap_fixture(path, sizeof(path), rel);
        if (gguf_open(&q, path) != 0) {
            ok(0, "open %s: %s", path, q.err);
            gguf_close(&q);
            continue;
        }
        const gguf_tensor *tq = gguf_find_tensor(&q, name);
        int cols = (int) tq->ne[0], rows = (int) tq->ne[1];
        float *deq = malloc(sizeof(float) * cols);
        const float *exact = tr->data;
        double worst = 0.0;
        int bad = 0;
        size_t rb = ggml_row_size(tq->type, cols);

        /* each element within half a quantization step of the f32 value:
         * step = max|block| / 7.5 (4-bit) or / 127 (8-bit), 2^-8 relative
         * for the 16-bit floats */
        for (int r = 0; r < rows; r++) {
            llm_dequant_row(tq->type, (const uint8_t *) tq->data + r * rb,
                            deq, cols);
            for (int c0 = 0; c0 < cols; c0 += 32) {
                float amax = 0.0f;
                const float *e = exact + (size_t) r * cols + c0;
                for (int j = 0; j < 32; j++) {
                    amax = fmaxf(amax, fabsf(e[j]));
                }
                for (int j = 0; j < 32; j++) {
                    float err = fabsf(deq[c0 + j] - e[j]), tol;
                    switch (tq->type) {
                    case GGML_TYPE_Q8_0: tol = amax / 127 * 0.51f + amax * 1e-3f; break;
                    case GGML_TYPE_Q4_0: tol = amax / 8 * 1.01f + amax * 1e-3f; break; /* the far extreme clamps to 15: one step */
                    case GGML_TYPE_Q4_1: tol = 2 * amax / 15 * 0.51f + amax * 1e-3f; break;
                    default: tol = fabsf(e[j]) * 0x1p-8f; break;
                    }
                    if (err > tol) {
                        bad++;
                    }
                    worst = fmax(worst, err / (amax + 1e-30));
                }
            }
        }
        ok(tq->type != GGML_TYPE_F32 && bad == 0, "%s %s (%s, %dx%d): "
           "dequant within half a step of f32 (worst %.4f of max)", files[f],
           name, ggml_type_name(tq->type), rows, cols, worst);
        free(deq);
        gguf_close(&q);
    }
    gguf_close(&ref);
}


/* --- matmul ---------------------------------------------------------------- */

typedef struct {
    uint32_t   type;
    int        rows, cols;
    uint8_t   *data;
    llm_tensor t;
} test_matrix;


/* random weights: floats quantized by llm_quantize_row, or for the
 * K-quants random bytes with sane scales (any bytes are a valid block) */
static void
make_matrix(test_matrix *m, uint32_t type, int rows, int cols)
{
    int bb = llm_quant_block_bytes(type), blk = llm_quant_block(type);
    size_t rb = (size_t) (cols / blk) * bb;
    float *row = malloc(sizeof(float) * cols);

    m->type = type;
    m->rows = rows;
    m->cols = cols;
    m->data = malloc(rb * rows + 1);
    for (int r = 0; r < rows; r++) {
        uint8_t *dst = m->data + r * rb;
        if (type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q6_K) {
            for (size_t k = 0; k < rb; k++) {
                dst[k] = (uint8_t) rnd();
            }
            for (int b = 0; b < cols / blk; b++) {
                llm_half d = llm_fp32_to_fp16(0.001f + 0.01f * fabsf(rndf()));
                if (type == GGML_TYPE_Q4_K) {
                    memcpy(dst + b * bb, &d, 2);
                    d = llm_fp32_to_fp16(0.002f * fabsf(rndf()));
                    memcpy(dst + b * bb + 2, &d, 2);
                } else {
                    memcpy(dst + b * bb + 208, &d, 2);
                }
            }
            continue;
        }
        for (int c = 0; c < cols; c++) {
            row[c] = rndf();
        }
        llm_quantize_row(type, row, dst, cols);
    }
    m->t = llm_tensor_make(m->data, type, rows, cols);
    free(row);
}


/* |exact - computed| bound for one output: activation rounding moves each
 * x by at most d/2 = max|x over its block| / 254, so the dot moves by at
 * most sum over blocks of (amax_b / 254) * sum_b |w|; float rounding of
 * n products adds at most ~ n * 2^-24 * sum |w x| (taken as 1e-5 relative,
 * with a floor). Float weights see no activation quantization. */
static double
error_bound(const test_matrix *m, const float *wrow, const float *x)
{
    int qb = llm_quant_block(m->type) == 1 ? 0
             : (llm_quant_block(m->type) == LLM_QK ? LLM_QK : LLM_QK_K);
    double bound = 0.0, mag = 0.0;

    for (int c = 0; c < m->cols; c++) {
        mag += fabs((double) wrow[c] * x[c]);
    }
    for (int c0 = 0; qb && c0 < m->cols; c0 += qb) {
        double amax = 0.0, wsum = 0.0;
        for (int j = c0; j < c0 + qb; j++) {
            amax = fmax(amax, fabs(x[j]));
            wsum += fabs(wrow[j]);
        }
        bound += amax / 254.0 * wsum * 1.0001;
    }
    return bound + 1e-5 * mag + 1e-6;
}


static void
test_matmul_accuracy(const test_matrix *m, int n_x, llm_threadpool *tp)
{
    float *x = malloc(sizeof(float) * n_x * m->cols);
    float *got = malloc(sizeof(float) * n_x * m->rows);
    float *ref = malloc(sizeof(float) * n_x * m->rows);
    float *wrow = malloc(sizeof(float) * m->cols);
    int bad = 0;
    double worst = 0.0;

    for (int k = 0; k < n_x * m->cols; k++) {
        x[k] = rndf() * (k % 7 == 0 ? 4.0f : 1.0f);
    }
    llm_matmul(tp, got, x, n_x, &m->t);
    llm_matmul_ref(ref, x, n_x, &m->t);
    for (int r = 0; r < m->rows; r++) {
        llm_dequant_row(m->type, m->data + r * m->t.row_stride, wrow, m->cols);
        for (int i = 0; i < n_x; i++) {
            double err = fabs((double) got[i * m->rows + r] - ref[i * m->rows + r]);
            double tol = error_bound(m, wrow, x + i * m->cols);
            worst = fmax(worst, err / tol);
            bad += err > tol;
        }
    }
    ok(bad == 0, "%s %dx%d, n_x %d, %s: within the error bound "
       "(worst %.2f of it)", ggml_type_name(m->type), m->rows, m->cols, n_x,
       llm_kernels_isa_name(llm_kernels_isa()), worst);
    free(x);
    free(got);
    free(ref);
    free(wrow);
}


/* bit-exactness: other instruction sets, batch sizes, thread counts. 24
 * rows cover every kernel shape: the AVX-512 32-element kernels switch
 * from lanes-as-blocks (n_x < 8) to lanes-as-rows (16 rows per group, the
 * last group partial) */
static void
test_matmul_invariants(const test_matrix *m, llm_threadpool **pools)
{
    enum { NX = 24 };
    static const int batches[] = { 7, 13, 16 };
    size_t on = (size_t) NX * m->rows;
    float *x = malloc(sizeof(float) * NX * m->cols);
    float *base = malloc(sizeof(float) * on), *got = malloc(sizeof(float) * on);
    int isa0 = llm_kernels_isa();
    const char *tn = ggml_type_name(m->type);

    for (int k = 0; k < NX * m->cols; k++) {
        x[k] = rndf();
    }
    llm_kernels_set_isa(LLM_ISA_SCALAR);
    llm_matmul(NULL, base, x, NX, &m->t);

    for (int isa = LLM_ISA_AVX2; isa <= LLM_ISA_AVX512; isa++) {
        int diff = 0;
        if (llm_kernels_set_isa(isa) != 0) {
            ok(1, "# skip %s %s: not on this CPU", tn, llm_kernels_isa_name(isa));
            continue;
        }
        llm_matmul(pools[1], got, x, NX, &m->t);
        diff += memcmp(got, base, on * 4) != 0;
        for (int i = 0; i < 3; i++) {
            llm_matmul(pools[0], got + i * m->rows, x + i * m->cols, 1, &m->t);
            diff += memcmp(got + i * m->rows, base + i * m->rows,
                           sizeof(float) * m->rows) != 0;
        }
        ok(diff == 0, "%s %dx%d: %s == scalar, bit for bit (n_x 24 and 1)",
           tn, m->rows, m->cols, llm_kernels_isa_name(isa));
    }
    llm_kernels_set_isa(isa0);

    /* one row at a time, then batches at several offsets on 1..3 threads */
    int diff = 0;
    for (int i = 0; i < NX; i++) {
        llm_matmul(pools[0], got + i * m->rows, x + i * m->cols, 1, &m->t);
    }
    diff += memcmp(got, base, on * 4) != 0;
    ok(diff == 0, "%s: n_x 1 == n_x 24, bit for bit", tn);
    for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
        int n = batches[b];
        for (int off = 0; off + n <= NX; off += 4) {
            memcpy(got, base, on * 4);
            llm_matmul(pools[off % 3], got + off * m->rows, x + off * m->cols,
                       n, &m->t);
            diff += memcmp(got, base, on * 4) != 0;
        }
    }
    ok(diff == 0, "%s: n_x 7, 13, 16 at offsets 0, 4, 8..., 1-3 threads == "
       "n_x 24, bit for bit", tn);
    free(x);
    free(base);
    free(got);
}


/* activation quantization: llm_quantize_row_q8a (AVX2 where the CPU has
 * it) == the scalar definition, bit for bit, on random rows and on the
 * edges: exact halves (amax 127 makes x / d = x), zeros, signed zeros,
 * tiny and huge values */
/* RoPE: the kernel == the definition bit for bit for rope_dim 2..130 in
 * both pair orders, and a rotation keeps each pair's length */
static void
test_rope(void)
{
    float   x[130], ref[130], got[130], cs[65], sn[65];
    double  worst = 0.0;
    int     d, i, neox, same = 1;

    for (i = 0; i < 65; i++) {
        cs[i] = cosf(0.37f * (float) i + 0.1f);
        sn[i] = sinf(0.37f * (float) i + 0.1f);
    }
    for (i = 0; i < 130; i++) {
        x[i] = rndf() * 4.0f;
    }
    for (neox = 0; neox <= 1; neox++) {
        for (d = 2; d <= 130; d += 2) {
            memcpy(ref, x, sizeof(x));
            memcpy(got, x, sizeof(x));
            llm_rope_head_ref(ref, cs, sn, d, neox);
            llm_rope_head(got, cs, sn, d, neox);
            same &= memcmp(ref, got, sizeof(x)) == 0;
            for (i = 0; i < d / 2; i++) {
                int a = neox ? i : 2 * i, b = neox ? i + d / 2 : 2 * i + 1;
                double n0 = (double) x[a] * x[a] + (double) x[b] * x[b];
                double n1 = (double) ref[a] * ref[a]
                            + (double) ref[b] * ref[b];
                double e = fabs(n1 - n0) / (n0 + 1e-30);
                worst = e > worst ? e : worst;
            }
        }
    }
    ok(same, "rope (%s) == llm_rope_head_ref, bit for bit, rope_dim 2..130, "
       "both pair orders", llm_kernels_isa_name(llm_kernels_isa()));
    ok(worst < 1e-5, "rope keeps each pair's length (worst relative change "
       "%.2e)", worst);
}


/* RMSNorm: the kernel == the definition bit for bit at lengths 1..40,
 * 576 and 1536, in place too, and within 1e-6 relative of double */
static void
test_rmsnorm(void)
{
    enum { N = 1536 };
    float   *x = malloc(sizeof(float) * N), *w = malloc(sizeof(float) * N);
    float   *ref = malloc(sizeof(float) * N), *got = malloc(sizeof(float) * N);
    static const int extra[] = { 64, 576, 1536 };
    double  worst = 0.0, ss;
    int     i, n, k, same = 1;

    for (i = 0; i < N; i++) {
        x[i] = rndf() * 3.0f;
        w[i] = 0.5f + rndf();
    }
    for (k = 0; k < 40 + 3; k++) {
        n = k < 40 ? k + 1 : extra[k - 40];
        llm_rmsnorm_ref(ref, x, w, n, 1e-5f);
        llm_rmsnorm(got, x, w, n, 1e-5f);
        same &= memcmp(ref, got, sizeof(float) * n) == 0;
        memcpy(got, x, sizeof(float) * n);
        llm_rmsnorm(got, got, w, n, 1e-5f);              /* in place */
        same &= memcmp(ref, got, sizeof(float) * n) == 0;
        for (ss = 0.0, i = 0; i < n; i++) {
            ss += (double) x[i] * x[i];
        }
        for (i = 0; i < n; i++) {
            double want = w[i] * (x[i] / sqrt(ss / n + 1e-5));
            double e = fabs(ref[i] - want) / (fabs(want) + 1e-30);
            worst = e > worst ? e : worst;
        }
    }
    ok(same, "rmsnorm (%s) == llm_rmsnorm_ref, bit for bit, lengths 1..40, "
       "64, 576, 1536, in place too", llm_kernels_isa_name(llm_kernels_isa()));
    ok(worst < 1e-6, "rmsnorm within 1e-6 relative of double precision "
       "(worst %.2e)", worst);
    free(x);
    free(w);
    free(ref);
    free(got);
}


/* SwiGLU: the kernel == the definition bit for bit at every length (the
 * tail through the definition), within 2e-7 relative of double
 * precision, and the edges: 0, -0, huge of both signs, below e's range
 * (e^-87.5 is 0 there: silu(-87.5) = -8.7e-37 comes out as -0) */
static void
test_swiglu(void)
{
    enum { N = 1000 };
    float   g[N], up[N], ref[N], got[N];
    double  worst = 0.0;
    int     i, same = 1, n;

    for (i = 0; i < N; i++) {
        g[i] = (float) ((i * 7919) % 2001 - 1000) / 37.0f;   /* +-27 */
        up[i] = (float) ((i * 104729) % 201 - 100) / 50.0f;
    }
    g[0] = 0.0f;
    g[1] = -0.0f;
    g[2] = 100.0f;
    g[3] = -100.0f;
    g[4] = 3e38f;
    g[5] = -3e38f;
    g[6] = -87.5f;
    /* 1..40, then every 97 up to N, N last: ref holds all N at the end */
    for (n = 1; n <= N; n = n < 40 ? n + 1 : (n < N && n + 97 > N ? N
                                                                 : n + 97)) {
        memcpy(ref, g, sizeof(float) * n);
        memcpy(got, g, sizeof(float) * n);
        llm_swiglu_ref(ref, up, n);
        llm_swiglu(got, up, n);
        same &= memcmp(ref, got, sizeof(float) * n) == 0;
    }
    ok(same, "swiglu (%s) == llm_swiglu_ref, bit for bit, lengths 1..%d",
       llm_kernels_isa_name(llm_kernels_isa()), N);
    for (i = 0; i < N; i++) {
        double want = (double) g[i] / (1.0 + exp(-(double) g[i])) * up[i];
        double err = fabs(ref[i] - want) / (fabs(want) > 1e-30 ? fabs(want)
                                                                : 1.0);
        if (i != 4 && i != 5) {
            worst = err > worst ? err : worst;
        }
    }
    ok(worst < 1e-6 && ref[0] == 0.0f && ref[3] == 0.0f && ref[6] == 0.0f
       && ref[2] == 100.0f * up[2] && ref[4] == g[4] * up[4] && ref[5] == 0.0f,
       "swiglu within 1e-6 relative of double precision (worst %.2e); "
       "0, +-100, +-3e38 and -87.5 as expected", worst);
}


/* GeGLU (tanh GELU): the kernel == the definition bit for bit at every
 * length, within 2e-5 relative of transformers' gelu_pytorch_tanh in
 * double precision (for g near -10, z is near -70 and its float rounding,
 * 4e-6 absolute, is e^z's relative error: float32 torch has it too), and the edges: 0, +-100, +-3e38 */
static void
test_geglu(void)
{
    enum { N = 1000 };
    float   g[N], up[N], ref[N], got[N];
    double  worst = 0.0;
    int     i, same = 1, n;

    for (i = 0; i < N; i++) {
        g[i] = (float) ((i * 7919) % 2001 - 1000) / 97.0f;   /* +-10 */
        up[i] = (float) ((i * 104729) % 201 - 100) / 50.0f;
    }
    g[0] = 0.0f;
    g[1] = -0.0f;
    g[2] = 100.0f;
    g[3] = -100.0f;
    g[4] = 3e38f;
    g[5] = -3e38f;
    for (n = 1; n <= N; n = n < 40 ? n + 1 : (n < N && n + 97 > N ? N
                                                                 : n + 97)) {
        memcpy(ref, g, sizeof(float) * n);
        memcpy(got, g, sizeof(float) * n);
        llm_geglu_ref(ref, up, n);
        llm_geglu(got, up, n);
        same &= memcmp(ref, got, sizeof(float) * n) == 0;
    }
    ok(same, "geglu (%s) == llm_geglu_ref, bit for bit, lengths 1..%d",
       llm_kernels_isa_name(llm_kernels_isa()), N);
    for (i = 6; i < N; i++) {
        double x = g[i];
        /* 0.5 (1 + tanh(u)) as 1 / (1 + e^-2u): the same value, without
           the cancellation of 1 + tanh(u) near -1 */
        double u = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
        double want = x / (1.0 + exp(-2.0 * u)) * up[i];
        double err = fabs(ref[i] - want) / (fabs(want) > 1e-30 ? fabs(want)
                                                                : 1.0);
        worst = err > worst ? err : worst;
    }
    ok(worst < 2e-5 && ref[0] == 0.0f && ref[3] == 0.0f
       && ref[2] == 100.0f * up[2] && ref[4] == g[4] * up[4] && ref[5] == 0.0f,
       "geglu within 2e-5 relative of double-precision gelu_tanh (worst "
       "%.2e); 0, +-100, +-3e38 as expected", worst);
}


/* gpt-oss's clamped SwiGLU: kernel == reference bit for bit, every
 * length; against double precision (transformers' GptOssExperts: gate
 * clamped at 7, up to [-7, 7], (up + 1) * gate * sigmoid(1.702 gate));
 * the clamps at their edges */
static void
test_swiglu_oai(void)
{
    enum { N = 1000 };
    float   g[N], up[N], ref[N], got[N];
    double  worst = 0.0;
    int     i, same = 1, n;

    for (i = 0; i < N; i++) {
        g[i] = (float) ((i * 7919) % 2001 - 1000) / 83.0f;   /* +-12 */
        up[i] = (float) ((i * 104729) % 2001 - 1000) / 83.0f;
    }
    g[0] = 0.0f;
    g[1] = 7.0f;
    g[2] = 100.0f;   up[2] = 100.0f;
    g[3] = -100.0f;  up[3] = -100.0f;
    g[4] = 3e38f;    up[4] = -3e38f;
    for (n = 1; n <= N; n = n < 40 ? n + 1 : (n < N && n + 97 > N ? N
                                                                 : n + 97)) {
        memcpy(ref, g, sizeof(float) * n);
        memcpy(got, g, sizeof(float) * n);
        llm_swiglu_oai_ref(ref, up, n);
        llm_swiglu_oai(got, up, n);
        same &= memcmp(ref, got, sizeof(float) * n) == 0;
    }
    ok(same, "swiglu_oai (%s) == llm_swiglu_oai_ref, bit for bit, lengths "
       "1..%d", llm_kernels_isa_name(llm_kernels_isa()), N);
    for (i = 0; i < N; i++) {
        double x = g[i] < 7.0 ? g[i] : 7.0;
        double u = up[i] < -7.0 ? -7.0 : up[i] > 7.0 ? 7.0 : up[i];
        double want = (u + 1.0) * (x / (1.0 + exp(-1.702 * x)));
        double err = fabs(ref[i] - want) / (fabs(want) > 1e-30 ? fabs(want)
                                                                : 1.0);
        worst = err > worst ? err : worst;
    }
    /* the double formula clamps too: g = 100 and 3e38 count as 7, up
       +-100 and -3e38 as +-7 (indices 2-4 are in worst) */
    ok(worst < 5e-6 && ref[0] == 0.0f && ref[3] == 0.0f,
       "swiglu_oai within 5e-6 relative of double precision (worst %.2e); "
       "the clamps at 0, 7, +-100, +-3e38", worst);
}


static void
test_quantize_q8a(void)
{
    enum { NB = 64 };
    static float x[NB * LLM_QK];
    static llm_block_q8a a[NB], b[NB];
    int i, j;

    for (i = 0; i < NB * LLM_QK; i++) {
        x[i] = rndf() * (i % 7 == 0 ? 100.0f : 1.0f);
    }
    for (j = 0; j < LLM_QK; j++) {
        x[j] = (j == 0) ? 127.0f : (float) (j - 16) + 0.5f;    /* halves */
        x[LLM_QK + j] = 0.0f;
        x[2 * LLM_QK + j] = (j & 1) ? -0.0f : 0.0f;
        x[3 * LLM_QK + j] = 1e-30f * (float) (j - 10);
        x[4 * LLM_QK + j] = 1e30f * (float) (j - 10);
        x[5 * LLM_QK + j] = (j == 3) ? -127.0f : -(float) j * 0.5f;
    }
    llm_quantize_row_q8a(x, a, NB * LLM_QK);
    llm_quantize_row_q8a_ref(x, b, NB * LLM_QK);
    ok(memcmp(a, b, sizeof(a)) == 0, "q8a activations: dispatched (%s) == "
       "scalar, bit for bit, %d blocks with halves, zeros, -0, tiny, huge",
       __builtin_cpu_supports("avx2") ? "avx2" : "scalar", NB);
    ok(b[0].qs[1] == -15 && b[0].qs[2] == -14 && b[0].qs[17] == 2
       && b[0].qs[16] == 1, "q8a: halves round away from zero "
       "(-14.5 -> -15, 1.5 -> 2, 0.5 -> 1)");

    /* q8k (K-quants' activations): the same x, and a super-block of
       halves (d = 1) */
    static llm_block_q8k ka[NB * LLM_QK / LLM_QK_K + 1],
                         kb[NB * LLM_QK / LLM_QK_K + 1];
    static float xk[NB * LLM_QK + LLM_QK_K];
    memcpy(xk, x, sizeof(x));
    for (j = 0; j < LLM_QK_K; j++) {
        xk[NB * LLM_QK + j] = (j % 32 == 0) ? 127.0f
                              : (float) (j % 32 - 16) + 0.5f;
    }
    llm_quantize_row_q8k(xk, ka, NB * LLM_QK + LLM_QK_K);
    llm_quantize_row_q8k_ref(xk, kb, NB * LLM_QK + LLM_QK_K);
    ok(memcmp(ka, kb, sizeof(ka)) == 0, "q8k activations: dispatched (%s) "
       "== scalar, bit for bit (d, qs, bsums), %d super-blocks",
       __builtin_cpu_supports("avx2") ? "avx2" : "scalar",
       NB * LLM_QK / LLM_QK_K + 1);
    i = NB * LLM_QK / LLM_QK_K;
    ok(kb[i].d == 1.0f && kb[i].qs[1] == -15 && kb[i].qs[17] == 2
       && kb[i].bsums[0] == 127 - 15 - 14 - 13 - 12 - 11 - 10 - 9 - 8 - 7
                            - 6 - 5 - 4 - 3 - 2 - 1,
       "q8k: halves round away from zero, bsums of 16");
}


/* prepared activations (llm_act_make once, llm_matmul_act per row range,
 * as the CPU backend's fused decode jobs use them) equal llm_matmul bit
 * for bit, on every instruction set, for the decode-sized n_x, with rows
 * read through a leading dimension wider than cols */
static void
test_prepared(const test_matrix *m)
{
    enum { NX = 8, PAD = 64 };
    size_t ld = (size_t) m->cols + PAD;
    float *x = malloc(sizeof(float) * NX * ld), *xc;
    float *want = malloc(sizeof(float) * NX * m->rows);
    float *got = malloc(sizeof(float) * NX * m->rows);
    void *buf = NULL;
    int isa0 = llm_kernels_isa(), diff = 0, runs = 0;
    const char *tn = ggml_type_name(m->type);
    llm_act a;

    xc = malloc(sizeof(float) * NX * m->cols);
    for (size_t k = 0; k < NX * ld; k++) {
        x[k] = rndf();
    }
    for (int i = 0; i < NX; i++) {
        memcpy(xc + (size_t) i * m->cols, x + i * ld, sizeof(float) * m->cols);
    }
    for (int isa = LLM_ISA_SCALAR; isa <= LLM_ISA_AVX512; isa++) {
        if (llm_kernels_set_isa(isa) != 0) {
            continue;
        }
        for (int n = 1; n <= NX; n++) {
            free(buf);
            buf = NULL;
            if (posix_memalign(&buf, 64, llm_act_size(&m->t, n) + 1) != 0) {
                break;
            }
            llm_matmul(NULL, want, xc, n, &m->t);
            memset(got, 0xff, sizeof(float) * n * m->rows);
            llm_act_make(&a, buf, x, ld, n, &m->t);
            /* three uneven row ranges, the last one first */
            int cut[4] = { 0, 5, m->rows / 2 + 3, m->rows };
            for (int r = 2; r >= 0; r--) {
                llm_tensor v = llm_tensor_rows(&m->t, cut[r],
                                               cut[r + 1] - cut[r]);
                llm_matmul_act(got + cut[r], m->rows, &a, &v);
            }
            diff += memcmp(got, want, sizeof(float) * n * m->rows) != 0;
            runs++;
        }
    }
    llm_kernels_set_isa(isa0);
    ok(runs > 0 && diff == 0, "%s %dx%d: prepared activations, row ranges == "
       "llm_matmul bit for bit (n_x 1..8, %d runs)", tn, m->rows, m->cols,
       runs);
    free(buf);
    free(x);
    free(xc);
    free(want);
    free(got);
}


/* a block-aligned column range and a row range through row_stride equal
 * the same matrices built contiguous */
static void
test_views(uint32_t type, llm_threadpool *tp)
{
    int blk = llm_quant_block(type) == 1 ? 32 : llm_quant_block(type);
    int rows = 21, cols = 4 * blk, c0 = blk, nc = 2 * blk, r0 = 5, nr = 11;
    test_matrix wide, narrow;
    size_t bb = llm_quant_block_bytes(type) * (llm_quant_block(type) == 1 ? 32 : 1);
    float x[2 * 1024], a[2 * 32], b[2 * 32];

    make_matrix(&wide, type, rows, cols);
    make_matrix(&narrow, type, nr, nc);
    for (int r = 0; r < nr; r++) {
        memcpy(narrow.data + r * narrow.t.row_stride,
               wide.data + (r0 + r) * wide.t.row_stride + (c0 / blk) * bb,
               narrow.t.row_stride);
    }
    for (int k = 0; k < 2 * nc; k++) {
        x[k] = rndf();
    }
    llm_tensor v = llm_tensor_cols(&wide.t, c0, nc);
    v = llm_tensor_rows(&v, r0, nr);
    ok(v.row_stride == wide.t.row_stride && v.cols == nc && v.rows == nr,
       "%s view keeps the row stride", ggml_type_name(type));
    llm_matmul(tp, a, x, 2, &v);
    llm_matmul(tp, b, x, 2, &narrow.t);
    ok(memcmp(a, b, sizeof(float) * 2 * nr) == 0, "%s: view of columns "
       "%d..%d, rows %d..%d == contiguous copy", ggml_type_name(type), c0,
       c0 + nc - 1, r0, r0 + nr - 1);
    free(wide.data);
    free(narrow.data);
}


/* float weights: the register-blocked tiles (several weight rows by
 * several activation rows a pass, short last passes of both) == scalar
 * bit for bit on every instruction set, for n_x 1..21 and 300, on the
 * matrix and on a view of its rows 5.. and columns 8.. (last chunks of
 * 4 and 24 columns) */
static void
test_float_tiles(const test_matrix *m, llm_threadpool **pools)
{
    enum { NX = 21, NX_BIG = 300 };
    size_t on = (size_t) NX_BIG * m->rows;
    float *x = malloc(sizeof(float) * NX_BIG * m->cols);
    float *base = malloc(sizeof(float) * on), *got = malloc(sizeof(float) * on);
    int isa0 = llm_kernels_isa(), r0 = 5, c0 = 8;
    const char *tn = ggml_type_name(m->type);
    llm_tensor v = llm_tensor_cols(&m->t, c0, m->cols - c0);

    v = llm_tensor_rows(&v, r0, m->rows - r0);
    for (int k = 0; k < NX_BIG * m->cols; k++) {
        x[k] = rndf();
    }
    for (int isa = LLM_ISA_AVX2; isa <= LLM_ISA_AVX512; isa++) {
        int diff = 0, runs = 0;
        if (llm_kernels_set_isa(isa) != 0) {
            ok(1, "# skip %s %s: not on this CPU", tn, llm_kernels_isa_name(isa));
            continue;
        }
        for (int view = 0; view < 2; view++) {
            const llm_tensor *t = view ? &v : &m->t;
            size_t n = (size_t) t->rows;
            for (int nx = 1; nx <= NX + 1; nx++) {
                int k = nx <= NX ? nx : NX_BIG;
                llm_kernels_set_isa(LLM_ISA_SCALAR);
                llm_matmul(NULL, base, x, k, t);
                llm_kernels_set_isa(isa);
                llm_matmul(pools[k % 3], got, x, k, t);
                diff += memcmp(got, base, sizeof(float) * k * n) != 0;
                runs++;
            }
        }
        ok(diff == 0, "%s %dx%d: %s == scalar, bit for bit (n_x 1..%d and "
           "%d, the matrix and a view of rows %d.., columns %d.., %d runs)",
           tn, m->rows, m->cols, llm_kernels_isa_name(isa), NX, NX_BIG, r0,
           c0, runs);
    }
    llm_kernels_set_isa(isa0);
    free(x);
    free(base);
    free(got);
}


/* packed weights (llm_pack): every kernel on them, any n_x, threads,
 * prepared activations and row/column views give the unpacked matrix's
 * bits; the packing itself refused where it cannot apply */
static void
test_packed(const test_matrix *m, llm_threadpool **pools)
{
    enum { NX = 21, NX_BIG = 300 };
    const char *tn = ggml_type_name(m->type);
    int isa0 = llm_kernels_isa(), diff = 0, runs = 0, n_rows;
    size_t on = (size_t) NX * m->rows;
    float *x, *want, *got;
    void *buf = NULL, *pd;
    llm_tensor p, v, vp;
    llm_act a;

    int blk = llm_quant_block(m->type);

    if (m->type == GGML_TYPE_F32 || m->type == GGML_TYPE_F16
        || m->type == GGML_TYPE_BF16)
    {
        return;                                  /* not a packed type */
    }
    on = (size_t) NX_BIG * m->rows;
    x = malloc(sizeof(float) * NX_BIG * m->cols);
    want = malloc(sizeof(float) * on);
    got = malloc(sizeof(float) * on);
    for (int k = 0; k < NX_BIG * m->cols; k++) {
        x[k] = rndf();
    }
    pd = llm_alloc_aligned(llm_pack_size(&m->t));
    llm_pack(&m->t, pd, &p);
    n_rows = (m->rows + 15) / 16 * 16;
    ok(p.pack == LLM_PACK_ROWS && p.rows == m->rows
       && llm_pack_size(&m->t) == (size_t) n_rows * m->t.row_stride,
       "%s %dx%d packed: %d rows in groups of 16, the same bytes per row",
       tn, m->rows, m->cols, m->rows);
    /* llm_pack_row gives every row back as stored (a tied embedding's
       lookups read the packed classifier through it) */
    {
        uint8_t *row = malloc(m->t.row_stride);
        int bad = 0;

        for (int r = 0; r < m->rows; r++) {
            memset(row, 0x5a, m->t.row_stride);
            llm_pack_row(&p, r, row);
            bad += memcmp(row, (const uint8_t *) m->t.data
                          + (size_t) r * m->t.row_stride,
                          m->t.row_stride) != 0;
        }
        is_int(bad, 0, "%s %dx%d: llm_pack_row returns each row's bytes",
               tn, m->rows, m->cols);
        free(row);
    }

    for (int isa = LLM_ISA_SCALAR; isa <= LLM_ISA_AVX512; isa++) {
        if (llm_kernels_set_isa(isa) != 0) {
            continue;
        }
        /* 1..21, and 300: more than a pass of the packed kernels' tiles
           takes (matmul.c, PACKED_X_BLOCK) */
        static const int ns[] = { 1, 2, 3, 4, 5, 6, 11, 16, 21, NX_BIG };
        for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
            int n = ns[ni];
            for (int th = 0; th < 3; th++) {
                llm_kernels_set_isa(LLM_ISA_SCALAR);
                llm_matmul(NULL, want, x, n, &m->t);
                llm_kernels_set_isa(isa);
                memset(got, 0xff, sizeof(float) * n * m->rows);
                llm_matmul(pools[th], got, x, n, &p);
                diff += memcmp(got, want, sizeof(float) * n * m->rows) != 0;
                runs++;
            }
            /* prepared activations over row ranges of whole groups */
            free(buf);
            buf = llm_alloc_aligned(llm_act_size(&p, n));
            llm_act_make(&a, buf, x, m->cols, n, &p);
            memset(got, 0xff, sizeof(float) * n * m->rows);
            for (int r0 = 0; r0 < m->rows; r0 += 32) {
                int nr = m->rows - r0 < 32 ? m->rows - r0 : 32;
                v = llm_tensor_rows(&p, r0, nr);
                llm_matmul_act(got + r0, m->rows, &a, &v);
            }
            diff += memcmp(got, want, sizeof(float) * n * m->rows) != 0;
            runs++;
        }
    }
    llm_kernels_set_isa(isa0);
    ok(runs > 0 && diff == 0, "%s %dx%d packed == unpacked, bit for bit "
       "(every instruction set, n_x 1..%d and %d, 1-3 threads, prepared "
       "row ranges: %d runs)", tn, m->rows, m->cols, NX, NX_BIG, runs);

    /* a column range of the packed matrix == of the unpacked one */
    if (m->cols >= 3 * blk) {
        v = llm_tensor_cols(&m->t, blk, m->cols - 2 * blk);
        vp = llm_tensor_cols(&p, blk, m->cols - 2 * blk);
        vp = llm_tensor_rows(&vp, 16, m->rows - 16);
        v = llm_tensor_rows(&v, 16, m->rows - 16);
        llm_matmul(pools[1], want, x, 3, &v);
        llm_matmul(pools[1], got, x, 3, &vp);
        ok(memcmp(got, want, sizeof(float) * 3 * v.rows) == 0, "%s packed: "
           "view of columns %d..%d, rows 16.. == unpacked view", tn, blk,
           m->cols - blk - 1);
    }
    free(pd);
    free(buf);
    free(x);
    free(want);
    free(got);
}


static void
test_checks(void)
{
    char err[256] = "";
    uint8_t buf[64] = { 0 };
    llm_tensor t = llm_tensor_make(buf, 16, 1, 256);    /* IQ2_XXS */

    t.row_stride = 64;
    is_int(llm_tensor_check(&t, err, sizeof(err)), -1, "IQ2_XXS is refused");
    ok(strstr(err, "IQ2_XXS") != NULL, "message names the type: %s", err);
    t = llm_tensor_make(buf, GGML_TYPE_Q4_1, 1, 48);
    is_int(llm_tensor_check(&t, err, sizeof(err)), -1, "48 Q4_1 columns refused");
    ok(strstr(err, "48") != NULL, "message names the column count: %s", err);
    t = llm_tensor_make(buf, GGML_TYPE_Q4_K, 1, 256);
    t.row_stride = 100;
    is_int(llm_tensor_check(&t, err, sizeof(err)), -1, "short row stride refused");
}


/* --- out of memory ------------------------------------------------------------ */

typedef struct {
    const test_matrix  *m;
    float              *out;
    const float        *x;
    int                 n_x;
    llm_threadpool     *tp;
    int                 rc;
} matmul_arg;


static void *
matmul_thread(void *p)
{
    matmul_arg *a = p;

    a->rc = llm_matmul(a->tp, a->out, a->x, a->n_x, &a->m->t);
    return NULL;
}


/* llm_matmul on a new thread: its activation scratch starts empty, so the
 * call has to allocate */
static int
matmul_fresh_thread(matmul_arg *a)
{
    pthread_t t;

    if (pthread_create(&t, NULL, matmul_thread, a) != 0) {
        return -2;
    }
    pthread_join(t, NULL);
    return a->rc;
}


/* a matmul without memory for its activations returns -1 and writes
 * nothing; the next call works. The batch (24 x 4096) is large enough to
 * be quantized on tp's threads, each packing through its own row of the
 * scratch, and must still give the scalar bits. */
static void
test_out_of_memory(llm_threadpool *tp)
{
    enum { NX = 24, COLS = 4096 };
    size_t on = (size_t) NX * 37;
    float *x = malloc(sizeof(float) * NX * COLS);
    float *want = malloc(sizeof(float) * on), *got = malloc(sizeof(float) * on);
    void *p1, *p2, *p3;
    int isa0 = llm_kernels_isa(), rc, untouched = 1;
    test_matrix m;
    matmul_arg a;

    make_matrix(&m, GGML_TYPE_Q4_0, 37, COLS);
    for (int k = 0; k < NX * COLS; k++) {
        x[k] = rndf();
    }
    llm_kernels_set_isa(LLM_ISA_SCALAR);
    llm_matmul(NULL, want, x, NX, &m.t);
    llm_kernels_set_isa(isa0);

    memset(got, 0x5a, sizeof(float) * on);
    a = (matmul_arg) { &m, got, x, NX, tp, 0 };
    llm_test_fail_alloc_after(0);
    rc = matmul_fresh_thread(&a);
    llm_test_fail_alloc_after(-1);
    for (size_t i = 0; i < sizeof(float) * on; i++) {
        untouched &= ((uint8_t *) got)[i] == 0x5a;
    }
    ok(rc == -1 && untouched, "out of memory: llm_matmul returns -1 and "
       "leaves out alone (rc %d)", rc);
    rc = matmul_fresh_thread(&a);
    ok(rc == 0 && memcmp(got, want, sizeof(float) * on) == 0,
       "the next call works: Q4_0 24x4096 quantized on %d threads (%s) == "
       "scalar, bit for bit", llm_threadpool_size(tp),
       llm_kernels_isa_name(isa0));

    llm_test_fail_alloc_after(0);
    rc = llm_matmul_ref(got, x, 1, &m.t);
    llm_test_fail_alloc_after(-1);
    ok(rc == -1, "out of memory: llm_matmul_ref returns -1");
    ok(llm_matmul_ref(got, x, 1, &m.t) == 0, "... and then works");

    llm_test_fail_alloc_after(1);
    p1 = llm_alloc_aligned(100);
    p2 = llm_alloc_aligned(100);
    p3 = llm_alloc_aligned(100);
    ok(p1 != NULL && p2 == NULL && p3 != NULL && ((uintptr_t) p1 & 63) == 0
       && ((uintptr_t) p3 & 63) == 0, "the hook after 1: one allocation "
       "(64-byte aligned), one failure, then off");
    free(p1);
    free(p3);

    /* huge: 2 MB aligned, every byte usable (3 MB: a rounded-up tail),
       the same hook */
    llm_test_fail_alloc_after(0);
    p1 = llm_alloc_huge(3u << 20);
    p2 = llm_alloc_huge(3u << 20);
    ok(p1 == NULL && p2 != NULL && ((uintptr_t) p2 % LLM_HUGE_PAGE) == 0,
       "llm_alloc_huge: the hook fails it once; then 2 MB aligned");
    memset(p2, 0x5a, 3u << 20);
    ok(((uint8_t *) p2)[(3u << 20) - 1] == 0x5a
       && llm_huge_advise(p2, 1u << 20) == -1,
       "llm_alloc_huge: all 3 MB written; advice on less than a whole "
       "huge page is refused");
    free(p2);
    free(m.data);
    free(x);
    free(want);
    free(got);
}


/* --- thread pool --------------------------------------------------------------- */

typedef struct {
    atomic_int calls[8];
    atomic_int nth_seen;
} count_ctx;

static void
count_task(void *p, int ith, int nth)
{
    count_ctx *c = p;

    atomic_fetch_add(&c->calls[ith], 1);
    atomic_store(&c->nth_seen, nth);
}


static void
sleep_task(void *p, int ith, int nth)
{
    struct timespec ts = { 0, 1000000 };

    (void) p;
    (void) ith;
    (void) nth;
    nanosleep(&ts, NULL);
}


static void
test_threadpool(void)
{
    for (int n = 1; n <= 4; n++) {
        llm_threadpool *tp = llm_threadpool_create(n);
        count_ctx c;
        int runs = n <= 2 ? 20000 : 2000, good = 1;

        memset(&c, 0, sizeof(c));
        for (int k = 0; k < runs; k++) {
            llm_threadpool_run(tp, count_task, &c);
        }
        for (int i = 0; i < 8; i++) {
            good &= atomic_load(&c.calls[i]) == (i < n ? runs : 0);
        }
        ok(tp && good && c.nth_seen == n, "pool of %d: every ith runs once "
           "per job over %d jobs", n, runs);
        llm_threadpool_free(tp);
    }

    /* busy time: each thread's time inside jobs, summed */
    for (int n = 1; n <= 2; n++) {
        llm_threadpool *tp = llm_threadpool_create(n);
        uint64_t before = llm_threadpool_busy_ns(tp), after;

        for (int k = 0; k < 20; k++) {
            llm_threadpool_run(tp, sleep_task, NULL);
        }
        after = llm_threadpool_busy_ns(tp);
        ok(before == 0 && after >= (uint64_t) n * 20 * 1000000
           && after < (uint64_t) n * 20 * 1000000 * 20, "pool of %d: 20 jobs "
           "of 1 ms on each thread: %.1f ms busy", n, after / 1e6);
        llm_threadpool_free(tp);
    }
    ok(llm_threadpool_busy_ns(NULL) == 0, "no pool: no busy time");
    ok(llm_threadpool_create(0) == NULL, "pool of 0 threads refused");
}


int
main(void)
{
    static const uint32_t types[] = {
        GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0,
        GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K,
        GGML_TYPE_Q5_0, GGML_TYPE_IQ4_NL, GGML_TYPE_Q5_K, GGML_TYPE_IQ4_XS,
        GGML_TYPE_MXFP4,
    };
    llm_threadpool *pools[3];

    printf("# kernels: %s\n", llm_kernels_isa_name(llm_kernels_isa()));
    for (int i = 0; i < 3; i++) {
        pools[i] = llm_threadpool_create(i + 1);
    }
    test_conversions();
    test_dequant_32();
    test_dequant_k();
    test_real_tensors();
    test_checks();
    test_threadpool();
    test_quantize_q8a();
    test_swiglu();
    test_geglu();
    test_swiglu_oai();
    test_rmsnorm();
    test_rope();
    test_out_of_memory(pools[2]);

    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        int blk = llm_quant_block(types[t]);
        /* odd rows (not a multiple of threads or tiles); columns: 3 blocks
         * (odd block count) or 2 super-blocks; float types an odd 172 */
        int cols = blk == 1 ? 172 : (blk == LLM_QK ? 96 : 512);
        test_matrix m, big;
        make_matrix(&m, types[t], 37, cols);
        test_matmul_accuracy(&m, 1, pools[1]);
        test_matmul_accuracy(&m, 7, pools[2]);
        test_matmul_invariants(&m, pools);
        /* SmolLM2-like: 576 columns (18 blocks) */
        make_matrix(&big, types[t], 67, blk == LLM_QK_K ? 768 : 576);
        test_matmul_accuracy(&big, 5, pools[1]);
        test_matmul_invariants(&big, pools);
        test_prepared(&m);
        test_prepared(&big);
        test_packed(&m, pools);
        test_packed(&big, pools);
        /* wider than the AVX-512 kernel's unpacked-group buffer (96
         * blocks): small batches take its other path */
        if (blk == LLM_QK) {
            test_matrix wide;
            make_matrix(&wide, types[t], 35, 100 * LLM_QK);
            test_packed(&wide, pools);
            free(wide.data);
        }
        /* MXFP4: E8M0 exponents over their range, the subnormal scales
         * of 0 and 1 included (the packed kernels rebuild
         * llm_e8m0_half from the bytes) */
        if (types[t] == GGML_TYPE_MXFP4) {
            static const uint8_t es[] = { 0, 1, 2, 3, 64, 127, 128, 200 };
            test_matrix odd;
            make_matrix(&odd, types[t], 37, 96);
            for (int r = 0; r < odd.rows; r++) {
                for (int b = 0; b < odd.cols / LLM_QK; b++) {
                    odd.data[(size_t) r * odd.t.row_stride
                             + b * sizeof(llm_block_mxfp4)]
                        = es[(3 * r + b) % 8];
                }
            }
            test_packed(&odd, pools);
            free(odd.data);
        }
        /* K-quants: more super-blocks than the AVX-512 prefill tile
         * unpacks at a time (simd_avx512_kpx.c, KC 8): its accumulators
         * pass through the output between chunks */
        if (blk == LLM_QK_K) {
            test_matrix wide;
            make_matrix(&wide, types[t], 35, 9 * LLM_QK_K);
            test_packed(&wide, pools);
            free(wide.data);
        }
        if (blk == 1) {
            test_float_tiles(&m, pools);
            test_float_tiles(&big, pools);
        }
        /* float rows wider than matmul.c's activation block holds 24 of
         * (FLOAT_X_BYTES: 16 rows of 12288): n_x 24 takes two passes */
        if (blk == 1) {
            test_matrix wide;
            make_matrix(&wide, types[t], 21, 12288);
            test_matmul_invariants(&wide, pools);
            free(wide.data);
        }
        test_views(types[t], pools[1]);
        free(m.data);
        free(big.data);
    }
    for (int i = 0; i < 3; i++) {
        llm_threadpool_free(pools[i]);
    }
    return tap_done();
}
