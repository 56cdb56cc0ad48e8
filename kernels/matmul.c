/*
 * llm_matmul: activation quantization, work split over threads, dispatch
 * to the tile kernels of the best instruction set, and the scalar kernels
 * that define the canonical operation order (simd.h) the SIMD kernels
 * reproduce bit for bit.
 */
#include <math.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "isa.h"
#include "matmul.h"
#include "quant.h"
#include "quant_vals.h"
#include "simd.h"
#include "tensor_type.h"


/* --- scalar kernels (the canonical order) -------------------------------- */

static float
reduce32(const float a[32])
{
    float s[8];

    for (int k = 0; k < 8; k++) {
        s[k] = (a[k] + a[k + 8]) + (a[k + 16] + a[k + 24]);
    }
    return llm_hsum8(s);
}


static float
weight_f(uint32_t type, const uint8_t *w, int j)
{
    uint16_t h;

    if (type == GGML_TYPE_F32) {
        float f;
        memcpy(&f, w + 4 * (size_t) j, 4);
        return f;
    }
    memcpy(&h, w + 2 * (size_t) j, 2);
    return type == GGML_TYPE_F16 ? llm_fp16_to_fp32(h) : llm_bf16_to_fp32(h);
}


static float
dot_float(uint32_t type, int n, const uint8_t *w, const float *x)
{
    float a[32] = { 0 };

    for (int j = 0; j < n; j++) {
        a[j % 32] = fmaf(weight_f(type, w, j), x[j], a[j % 32]);
    }
    return reduce32(a);
}


/* the integer of element j of a 32-element weight block (Q4_1: q, no
 * minimum; Q4_0: q - 8) */
static int
weight_q(uint32_t type, const uint8_t *blk, int j)
{
    const uint8_t *qs;

    switch (type) {
    case GGML_TYPE_Q8_0:
        return ((const llm_block_q8_0 *) blk)->qs[j];
    case GGML_TYPE_Q4_0:
        qs = ((const llm_block_q4_0 *) blk)->qs;
        return (j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4) - 8;
    default: /* Q4_1 */
        qs = ((const llm_block_q4_1 *) blk)->qs;
        return j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4;
    }
}


static float
dot_q32(uint32_t type, int n, const uint8_t *w, const llm_block_q8a *x)
{
    int bytes = llm_quant_block_bytes(type);
    float acc[8] = { 0 }, msum[8] = { 0 };
    uint16_t dh, mh;

    for (int b = 0; b < n / LLM_QK; b++, w += bytes) {
        int isum = 0;
        for (int j = 0; j < LLM_QK; j++) {
            isum += weight_q(type, w, j) * x[b].qs[j];
        }
        memcpy(&dh, w, 2);
        acc[b % 8] = fmaf(llm_fp16_to_fp32(dh) * x[b].d, (float) isum,
                          acc[b % 8]);
        if (type == GGML_TYPE_Q4_1) {
            memcpy(&mh, w + 2, 2);
            msum[b % 8] = fmaf(llm_fp16_to_fp32(mh), x[b].s, msum[b % 8]);
        }
    }
    if (type == GGML_TYPE_Q4_1) {
        return llm_hsum8(acc) + llm_hsum8(msum);
    }
    return llm_hsum8(acc);
}


/* a Q4_K super-block's exact integers against a q8k block: the scaled
 * sums and the min sum */
static void
q4_K_ints(const llm_block_q4_K *w, const llm_block_q8k *x, int *isum,
    int *imin)
{
    *isum = 0;
    *imin = 0;
    for (int j = 0; j < 8; j++) {
        int sc, m, g = 0;
        const uint8_t *q = w->qs + 32 * (j / 2);
        const int8_t *xq = x->qs + 32 * j;
        llm_q4k_scale_min(w->scales, j, &sc, &m);
        for (int l = 0; l < 32; l++) {
            g += ((j & 1) ? q[l] >> 4 : q[l] & 0xf) * xq[l];
        }
        *isum += sc * g;
        *imin += m * (x->bsums[2 * j] + x->bsums[2 * j + 1]);
    }
}


/* acc after one super-block (the reference's two fmaf) */
static float
q4_K_step(const llm_block_q4_K *w, const llm_block_q8k *x, float acc)
{
    int isum, imin;

    q4_K_ints(w, x, &isum, &imin);
    float dd = llm_fp16_to_fp32(w->d) * x->d;
    float dm = llm_fp16_to_fp32(w->dmin) * x->d;
    acc = fmaf(dd, (float) isum, acc);
    return fmaf(-dm, (float) imin, acc);
}


static float
dot_q4_K(int n, const llm_block_q4_K *w, const llm_block_q8k *x)
{
    float acc = 0.0f;

    for (int b = 0; b < n / LLM_QK_K; b++) {
        acc = q4_K_step(&w[b], &x[b], acc);
    }
    return acc;
}


/* acc after one Q6_K super-block */
static float
q6_K_step(const llm_block_q6_K *w, const llm_block_q8k *x, float acc)
{
    float wf[LLM_QK_K];
    int isum = 0;
    /* the integers back from the reference dequantizer with d = 1,
     * scale 1: exact, small integers */
    llm_block_q6_K unit = *w;

    unit.d = 0x3c00;                                     /* 1.0 */
    memset(unit.scales, 1, sizeof(unit.scales));
    llm_dequant_row(GGML_TYPE_Q6_K, &unit, wf, LLM_QK_K);
    for (int k = 0; k < 16; k++) {
        int g = 0;
        for (int l = 16 * k; l < 16 * k + 16; l++) {
            g += (int) wf[l] * x->qs[l];
        }
        isum += w->scales[k] * g;
    }
    return fmaf(llm_fp16_to_fp32(w->d) * x->d, (float) isum, acc);
}


static float
dot_q6_K(int n, const llm_block_q6_K *w, const llm_block_q8k *x)
{
    float acc = 0.0f;

    for (int b = 0; b < n / LLM_QK_K; b++) {
        acc = q6_K_step(&w[b], &x[b], acc);
    }
    return acc;
}


static float
dot_scalar(uint32_t type, int n, const uint8_t *w, const uint8_t *act)
{
    switch (type) {
    case GGML_TYPE_F32:
    case GGML_TYPE_F16:
    case GGML_TYPE_BF16:
        return dot_float(type, n, w, (const float *) act);
    case GGML_TYPE_Q4_K:
        return dot_q4_K(n, (const void *) w, (const void *) act);
    case GGML_TYPE_Q6_K:
        return dot_q6_K(n, (const void *) w, (const void *) act);
    case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q5_1:
    case GGML_TYPE_IQ4_NL:
    case GGML_TYPE_MXFP4:
        return llm_dot_q32x_ref(type, n, w, (const void *) act);
    case GGML_TYPE_Q2_K:
    case GGML_TYPE_Q3_K:
    case GGML_TYPE_Q5_K:
    case GGML_TYPE_IQ4_XS:
        return llm_dot_qkx_ref(type, n, w, (const void *) act);
    default:
        return dot_q32(type, n, w, (const void *) act);
    }
}


static void
tile_scalar(uint32_t type, const llm_tile *t)
{
    for (int r = 0; r < t->n_w; r++) {
        const uint8_t *w = t->w + r * t->w_stride;
        for (int i = 0; i < t->n_x; i++) {
            t->out[i * t->ld_out + r] =
                dot_scalar(type, t->n, w, t->act + i * t->act_stride);
        }
    }
}

#define SCALAR_TILE(name, type)                                               \
    static void name(const llm_tile *t) { tile_scalar(type, t); }

SCALAR_TILE(tile_f32, GGML_TYPE_F32)
SCALAR_TILE(tile_f16, GGML_TYPE_F16)
SCALAR_TILE(tile_bf16, GGML_TYPE_BF16)
SCALAR_TILE(tile_q4_0, GGML_TYPE_Q4_0)
SCALAR_TILE(tile_q4_1, GGML_TYPE_Q4_1)
SCALAR_TILE(tile_q8_0, GGML_TYPE_Q8_0)
SCALAR_TILE(tile_q4_K, GGML_TYPE_Q4_K)
SCALAR_TILE(tile_q6_K, GGML_TYPE_Q6_K)
SCALAR_TILE(tile_q5_0, GGML_TYPE_Q5_0)
SCALAR_TILE(tile_q5_1, GGML_TYPE_Q5_1)
SCALAR_TILE(tile_iq4_nl, GGML_TYPE_IQ4_NL)
SCALAR_TILE(tile_mxfp4, GGML_TYPE_MXFP4)
SCALAR_TILE(tile_q2_K, GGML_TYPE_Q2_K)
SCALAR_TILE(tile_q3_K, GGML_TYPE_Q3_K)
SCALAR_TILE(tile_q5_K, GGML_TYPE_Q5_K)
SCALAR_TILE(tile_iq4_xs, GGML_TYPE_IQ4_XS)

/* packed weights (pack.c has the layout): dot_q32's order, one row of the
 * 16 a lane of each block; element j of row l's block as an integer */
static int
packed_q(uint32_t type, const uint8_t *blk, int l, int j)
{
    const uint8_t *q;
    int n;

    if (type == GGML_TYPE_Q8_0) {
        q = blk + 32 + 64 * (j / 4) + 4 * l + j % 4;
        return (int) *q - 128;
    }
    q = blk + llm_pack_quants_at(type) + 64 * ((j % 16) / 4) + 4 * l + j % 4;
    n = j < 16 ? *q & 0xf : *q >> 4;
    switch (type) {
    case GGML_TYPE_Q4_0:
        return n - 8;
    case GGML_TYPE_Q5_0:
        /* fifth bit: bit 4l + j % 4 of the byte mask of vector j / 4 */
        n |= (blk[32 + 8 * (j / 4) + (4 * l + j % 4) / 8]
              >> ((4 * l + j % 4) % 8) & 1) << 4;
        return n - 16;
    case GGML_TYPE_IQ4_NL:
        return llm_kvalues_iq4nl[n];
    case GGML_TYPE_MXFP4:
        return llm_kvalues_mxfp4[n];
    default: /* Q4_1 */
        return n;
    }
}


static float
packed_half(const uint8_t *p, int l)
{
    uint16_t h;

    memcpy(&h, p + 2 * l, 2);
    return llm_fp16_to_fp32(h);
}


static void
tile_packed_scalar(uint32_t type, const llm_tile *t)
{
    int      nb = t->n / LLM_QK;
    size_t   pb = llm_pack_block_bytes(llm_quant_block_bytes(type));

    for (int r = 0; r < t->n_w; r++) {
        int l = r % LLM_PACK_ROWS;
        const uint8_t *w = t->w + (size_t) (r / LLM_PACK_ROWS) * t->w_stride;
        for (int i = 0; i < t->n_x; i++) {
            const llm_act_p *x = (const llm_act_p *) (t->act
                                                      + i * t->act_stride);
            float acc[8] = { 0 }, msum[8] = { 0 };
            for (int b = 0; b < nb; b++) {
                const uint8_t *blk = w + b * pb;
                int isum = 0;
                for (int j = 0; j < LLM_QK; j++) {
                    isum += packed_q(type, blk, l, j) * x[b].qs[j];
                }
                float dw = type == GGML_TYPE_MXFP4 ? llm_e8m0_half(blk[l])
                                                   : packed_half(blk, l);
                acc[b % 8] = fmaf(dw * x[b].d, (float) isum, acc[b % 8]);
                if (type == GGML_TYPE_Q4_1) {
                    msum[b % 8] = fmaf(packed_half(blk + 32, l), x[b].s,
                                       msum[b % 8]);
                }
            }
            t->out[i * t->ld_out + r] = type == GGML_TYPE_Q4_1
                                        ? llm_hsum8(acc) + llm_hsum8(msum)
                                        : llm_hsum8(acc);
        }
    }
}


/* packed K-quants: each row rebuilt block by block, then the reference's
 * step (dot_q4_K's and dot_q6_K's order) */
static void
tile_packed_k(uint32_t type, const llm_tile *t)
{
    int      nb = t->n / LLM_QK_K;
    size_t   pb = llm_pack_block_bytes(llm_quant_block_bytes(type));
    union {                                 /* one block of any K-quant */
        uint8_t          b[sizeof(llm_block_q6_K)];
        llm_block_q4_K   q4;
        llm_block_q6_K   q6;
    } blk;

    for (int r = 0; r < t->n_w; r++) {
        int l = r % LLM_PACK_ROWS;
        const uint8_t *w = t->w + (size_t) (r / LLM_PACK_ROWS) * t->w_stride;
        for (int i = 0; i < t->n_x; i++) {
            const llm_block_q8k *x = (const llm_block_q8k *)
                                     (t->act + i * t->act_stride);
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                llm_pack_k_row(type, (uint8_t *) w + b * pb, l, blk.b, 1);
                if (type == GGML_TYPE_Q4_K) {
                    acc = q4_K_step(&blk.q4, &x[b], acc);
                } else if (type == GGML_TYPE_Q6_K) {
                    acc = q6_K_step(&blk.q6, &x[b], acc);
                } else {
                    acc = llm_dot_qkx_step(type, blk.b, &x[b], acc);
                }
            }
            t->out[i * t->ld_out + r] = acc;
        }
    }
}


static void
tile_q4_Kp(const llm_tile *t)
{
    tile_packed_k(GGML_TYPE_Q4_K, t);
}


static void
tile_q6_Kp(const llm_tile *t)
{
    tile_packed_k(GGML_TYPE_Q6_K, t);
}


static void
tile_q5_Kp(const llm_tile *t)
{
    tile_packed_k(GGML_TYPE_Q5_K, t);
}


static void
tile_iq4_xsp(const llm_tile *t)
{
    tile_packed_k(GGML_TYPE_IQ4_XS, t);
}


static void
tile_q4_0p(const llm_tile *t)
{
    tile_packed_scalar(GGML_TYPE_Q4_0, t);
}


static void
tile_q4_1p(const llm_tile *t)
{
    tile_packed_scalar(GGML_TYPE_Q4_1, t);
}


static void
tile_q8_0p(const llm_tile *t)
{
    tile_packed_scalar(GGML_TYPE_Q8_0, t);
}


static void
tile_q5_0p(const llm_tile *t)
{
    tile_packed_scalar(GGML_TYPE_Q5_0, t);
}


static void
tile_iq4_nlp(const llm_tile *t)
{
    tile_packed_scalar(GGML_TYPE_IQ4_NL, t);
}


static void
tile_mxfp4p(const llm_tile *t)
{
    tile_packed_scalar(GGML_TYPE_MXFP4, t);
}


const llm_kernel_set llm_kernels_scalar = {
    .f32 = tile_f32, .f16 = tile_f16, .bf16 = tile_bf16, .q4_0 = tile_q4_0,
    .q4_1 = tile_q4_1, .q8_0 = tile_q8_0, .q4_K = tile_q4_K,
    .q6_K = tile_q6_K, .q4_0p = tile_q4_0p, .q4_1p = tile_q4_1p,
    .q8_0p = tile_q8_0p, .q5_0p = tile_q5_0p, .iq4_nlp = tile_iq4_nlp,
    .mxfp4p = tile_mxfp4p, .q4_Kp = tile_q4_Kp, .q6_Kp = tile_q6_Kp,
    .q5_Kp = tile_q5_Kp,
    .iq4_xsp = tile_iq4_xsp,
    .q5_0 = tile_q5_0, .q5_1 = tile_q5_1,
    .iq4_nl = tile_iq4_nl, .mxfp4 = tile_mxfp4, .q2_K = tile_q2_K,
    .q3_K = tile_q3_K, .q5_K = tile_q5_K, .iq4_xs = tile_iq4_xs,
};


/* by instruction set, LLM_ISA_SCALAR .. LLM_ISA_AVX512 */
static const llm_kernel_set *const kernel_sets[] = {
    &llm_kernels_scalar, &llm_kernels_avx2, &llm_kernels_avx512,
};


static llm_tile_fn
pick_packed(const llm_kernel_set *set, uint32_t type)
{
    switch (type) {
    case GGML_TYPE_Q4_0: return set->q4_0p;
    case GGML_TYPE_Q4_1: return set->q4_1p;
    case GGML_TYPE_Q8_0: return set->q8_0p;
    case GGML_TYPE_Q5_0: return set->q5_0p;
    case GGML_TYPE_IQ4_NL: return set->iq4_nlp;
    case GGML_TYPE_MXFP4: return set->mxfp4p;
    case GGML_TYPE_Q4_K: return set->q4_Kp;
    case GGML_TYPE_Q6_K: return set->q6_Kp;
    case GGML_TYPE_Q5_K: return set->q5_Kp;
    case GGML_TYPE_IQ4_XS: return set->iq4_xsp;
    default:             return NULL;
    }
}


/* the kernel of the best set (current instruction set or below) for
 * packed weights of type */
static llm_tile_fn
packed_kernel(uint32_t type)
{
    for (int isa = llm_kernels_isa(); isa > 0; isa--) {
        if (pick_packed(kernel_sets[isa], type)) {
            return pick_packed(kernel_sets[isa], type);
        }
    }
    return pick_packed(&llm_kernels_scalar, type);
}


static llm_tile_fn
pick_kernel(const llm_kernel_set *set, uint32_t type)
{
    switch (type) {
    case GGML_TYPE_F32:  return set->f32;
    case GGML_TYPE_F16:  return set->f16;
    case GGML_TYPE_BF16: return set->bf16;
    case GGML_TYPE_Q4_0: return set->q4_0;
    case GGML_TYPE_Q4_1: return set->q4_1;
    case GGML_TYPE_Q8_0: return set->q8_0;
    case GGML_TYPE_Q4_K: return set->q4_K;
    case GGML_TYPE_Q6_K: return set->q6_K;
    case GGML_TYPE_Q5_0: return set->q5_0;
    case GGML_TYPE_Q5_1: return set->q5_1;
    case GGML_TYPE_IQ4_NL: return set->iq4_nl;
    case GGML_TYPE_MXFP4: return set->mxfp4;
    case GGML_TYPE_Q2_K: return set->q2_K;
    case GGML_TYPE_Q3_K: return set->q3_K;
    case GGML_TYPE_Q5_K: return set->q5_K;
    case GGML_TYPE_IQ4_XS: return set->iq4_xs;
    default:             return NULL;
    }
}


/* the best set of the current instruction set or below with a kernel
 * for type */
static const llm_kernel_set *
kernels_for(uint32_t type, int n_x)
{
    int q32 = llm_quant_block(type) == LLM_QK;

    for (int isa = llm_kernels_isa(); isa > 0; isa--) {
        if (pick_kernel(kernel_sets[isa], type)
            && (!q32 || n_x >= kernel_sets[isa]->q32_min_n_x))
        {
            return kernel_sets[isa];
        }
    }
    return &llm_kernels_scalar;
}


/* --- checks ---------------------------------------------------------------- */

int
llm_tensor_check(const llm_tensor *w, char *err, size_t err_len)
{
    int blk = llm_quant_block(w->type);

    if (blk == 0) {
        snprintf(err, err_len, "tensor type %s (%u) is not supported by "
                 "the CPU kernels", ggml_type_name(w->type), w->type);
        return -1;
    }
    if (w->rows < 0 || w->cols <= 0 || w->cols % blk) {
        snprintf(err, err_len, "a %s matrix needs a positive multiple of %d "
                 "columns, not %d", ggml_type_name(w->type), blk, w->cols);
        return -1;
    }
    if (w->pack != 0 && (w->pack != LLM_PACK_ROWS
                         || pick_packed(&llm_kernels_scalar, w->type) == NULL))
    {
        snprintf(err, err_len, "a %s matrix cannot be packed by %d rows",
                 ggml_type_name(w->type), w->pack);
        return -1;
    }
    if (w->row_stride < (size_t) (w->cols / blk) * llm_quant_block_bytes(w->type)
                        * (w->pack ? LLM_PACK_ROWS : 1))
    {
        snprintf(err, err_len, "row stride %zu is shorter than a row of %d "
                 "%s elements", w->row_stride, w->cols, ggml_type_name(w->type));
        return -1;
    }
    if (w->data == NULL && w->rows > 0) {
        snprintf(err, err_len, "matrix has no data");
        return -1;
    }
    return 0;
}


/* --- llm_matmul ---------------------------------------------------------- */

/* weight rows per tile handed to a kernel: a multiple of the kernels'
 * register tiles, small enough to stay in L1 while n_x rows pass */
#define ROWS_PER_TILE  8
#define PACKED2_MIN_N_X  8
/* activation rows a pass of a packed chunk's tiles takes (see below) */
#define PACKED_X_BLOCK   256

/* float weights: activation rows (cols floats each) a pass of a chunk's
 * tiles takes, about FLOAT_X_BYTES of them, so that they stay in L2 while
 * every tile of the chunk passes (F16 4096x2880 at n_x 512: 1.5x faster
 * than all 512 rows, 5.9 MB, at once; docs/perf.md) */
#define FLOAT_X_BYTES  (768 << 10)

static int
float_x_block(int cols)
{
    int xb = FLOAT_X_BYTES / (4 * cols);

    return xb < 16 ? 16 : xb;
}


typedef struct {
    const llm_tensor  *w;
    llm_tile_fn        kernel;
    const uint8_t     *act;
    size_t             act_stride;
    int                n_x;
    float             *out;
    size_t             ld_out;
    int                chunk;        /* rows per work item */
    atomic_int         next_row;

    /* quantization phase */
    const float       *x;
    size_t             ld_x;
    uint32_t           act_type;     /* 0: none, Q8_0: q8a, Q8_K: q8k */
    const llm_kernel_set *set;       /* q8a rows go through set->q32_pack */
    uint8_t           *pack_tmp;     /* q32_pack: one q8a row per
                                        quantizing thread, after the
                                        activations in their buffer */
    size_t             pack_tmp_size;
} matmul_job;


/* one row of q8a blocks as the kernels of packed weights read them */
static void
act_p_row(const llm_block_q8a *q, int nb, llm_act_p *a)
{
    for (int b = 0; b < nb; b++) {
        int sum = 0;
        for (int j = 0; j < LLM_QK; j++) {
            sum += q[b].qs[j];
        }
        memcpy(a[b].qs, q[b].qs, LLM_QK);
        a[b].d = q[b].d;
        a[b].s = q[b].s;
        a[b].sum = sum;
        a[b].pad = 0;
    }
}


static void
quantize_rows(matmul_job *job, int i0, int i1, int ith)
{
    int cols = job->w->cols;
    llm_block_q8a *tmp = NULL;

    if (job->pack_tmp != NULL) {
        tmp = (llm_block_q8a *) (job->pack_tmp
                                 + (size_t) ith * job->pack_tmp_size);
    }
    for (int i = i0; i < i1; i++) {
        uint8_t *dst = (uint8_t *) job->act + i * job->act_stride;
        const float *x = job->x + i * job->ld_x;
        if (job->act_type == GGML_TYPE_Q8_K) {
            llm_quantize_row_q8k(x, (llm_block_q8k *) dst, cols);
        } else if (job->w->pack) {
            llm_quantize_row_q8a(x, tmp, cols);
            act_p_row(tmp, cols / LLM_QK, (llm_act_p *) dst);
        } else if (tmp) {
            llm_quantize_row_q8a(x, tmp, cols);
            job->set->q32_pack(job->w->type, tmp, cols / LLM_QK, job->n_x,
                               i, (uint8_t *) job->act);
        } else {
            llm_quantize_row_q8a(x, (llm_block_q8a *) dst, cols);
        }
    }
}


static void
quantize_task(void *ctx, int ith, int nth)
{
    matmul_job *job = ctx;
    int per = (job->n_x + nth - 1) / nth;
    int i0 = ith * per, i1 = i0 + per < job->n_x ? i0 + per : job->n_x;

    if (i0 < i1) {
        quantize_rows(job, i0, i1, ith);
    }
}


static void
matmul_task(void *ctx, int ith, int nth)
{
    matmul_job *job = ctx;
    const llm_tensor *w = job->w;
    llm_tile t;

    (void) ith;
    (void) nth;
    t.w_stride = w->row_stride;
    t.act_stride = job->act_stride;
    t.n = w->cols;
    t.ld_out = job->ld_out;

    /* packed: two groups a tile for many activation rows (the AVX-512
       kernel shares each activation load between them) */
    int step = w->pack ? w->pack * (job->n_x >= PACKED2_MIN_N_X ? 2 : 1)
                       : ROWS_PER_TILE;
    /* packed and float weights: activation rows XB at a time through the
       chunk's tiles, so that they stay in L2 (prefill of hundreds or
       thousands of tokens); other layouts group activation rows by 16 and
       take them all */
    int xb = w->pack ? PACKED_X_BLOCK : job->n_x;
    if (llm_quant_block(w->type) == 1) {
        xb = float_x_block(w->cols);
    }

    for ( ;; ) {
        int r0 = atomic_fetch_add(&job->next_row, job->chunk);
        if (r0 >= w->rows) {
            return;
        }
        int r1 = r0 + job->chunk < w->rows ? r0 + job->chunk : w->rows;
        for (int x0 = 0; x0 < job->n_x; x0 += xb) {
            t.act = job->act + (size_t) x0 * job->act_stride;
            t.n_x = job->n_x - x0 < xb ? job->n_x - x0 : xb;
            for (int r = r0; r < r1; r += step) {
                t.w = (const uint8_t *) w->data
                      + (size_t) (w->pack ? r / w->pack : r) * w->row_stride;
                t.n_w = r1 - r < step ? r1 - r : step;
                t.out = job->out + (size_t) x0 * job->ld_out + r;
                job->kernel(&t);
            }
        }
    }
}


/* per calling thread, grown as needed: the quantized activations */
static __thread uint8_t *scratch;
static __thread size_t scratch_size;

/* a thread that exits (pool, TP rank) frees its scratch: the key's
 * destructor runs at thread exit, __thread storage alone would leak */
static pthread_key_t   scratch_key;
static pthread_once_t  scratch_once = PTHREAD_ONCE_INIT;


static void
scratch_key_create(void)
{
    (void) pthread_key_create(&scratch_key, free);
}


/* NULL when out of memory (the old scratch stays) */
static uint8_t *
scratch_get(size_t size)
{
    void *p;

    if (size > scratch_size) {
        /* cache-line aligned: the AVX-512 kernels load 64-byte groups */
        if ((p = llm_alloc_aligned(size)) == NULL) {
            return NULL;
        }
        free(scratch);
        scratch = p;
        scratch_size = size;
        (void) pthread_once(&scratch_once, scratch_key_create);
        (void) pthread_setspecific(scratch_key, p);
    }
    return scratch;
}


/* how w's kernels want n_x activation rows: act_type 0 (the floats
 * themselves), Q8_0 (q8a blocks, maybe packed) or Q8_K; the bytes they
 * take (0 for floats) and the stride between rows */
static size_t
act_plan(const llm_kernel_set *set, const llm_tensor *w, int n_x,
    uint32_t *act_type, size_t *act_stride)
{
    size_t bytes = 0;

    switch (llm_quant_block(w->type)) {
    case 1:
        *act_type = 0;
        return 0;
    case LLM_QK:
        *act_type = GGML_TYPE_Q8_0;
        if (w->pack) {
            *act_stride = (size_t) (w->cols / LLM_QK) * sizeof(llm_act_p);
            return *act_stride * n_x;
        }
        *act_stride = (size_t) (w->cols / LLM_QK) * sizeof(llm_block_q8a);
        if (set->q32_pack && !llm_is_q32x(w->type)) {
            bytes = set->q32_layout(w->cols / LLM_QK, n_x, act_stride);
        }
        break;
    default:
        *act_type = GGML_TYPE_Q8_K;
        *act_stride = (size_t) (w->cols / LLM_QK_K) * sizeof(llm_block_q8k);
        break;
    }
    return bytes ? bytes : *act_stride * n_x;
}


/* a job for n_x rows of x (ld_x floats apart) against w; its activations
 * are x itself until act_plan says the kernels want them quantized */
static void
job_init(matmul_job *job, const llm_tensor *w, float *out, size_t ld_out,
    const float *x, size_t ld_x, int n_x)
{
    char err[256];

    if (llm_tensor_check(w, err, sizeof(err)) != 0) {
        fprintf(stderr, "llm_matmul: %s\n", err);
        abort();
    }
    memset(job, 0, sizeof(*job));
    job->w = w;
    job->set = kernels_for(w->type, n_x);
    job->kernel = w->pack ? packed_kernel(w->type)
                          : pick_kernel(job->set, w->type);
    job->n_x = n_x;
    job->out = out;
    job->ld_out = ld_out;
    job->x = x;
    job->ld_x = ld_x;
    job->act = (const uint8_t *) x;
    job->act_stride = ld_x * sizeof(float);
}


#define ALIGN64(n)  (((n) + 63) & ~(size_t) 63)


/* threads that quantize the job's activations: tp's for large batches */
static int
act_threads(const matmul_job *job, llm_threadpool *tp)
{
    if (llm_threadpool_size(tp) > 1
        && (size_t) job->n_x * job->w->cols >= 65536)
    {
        return llm_threadpool_size(tp);
    }
    return 1;
}


/* bytes of one thread's q8a row for q32_pack, 0 when the set packs none */
static size_t
pack_tmp_size(const matmul_job *job)
{
    if (job->act_type != GGML_TYPE_Q8_0
        || (!job->w->pack && (llm_is_q32x(job->w->type)
                              || job->set->q32_pack == NULL)))
    {
        return 0;
    }
    return ALIGN64(sizeof(llm_block_q8a) * (size_t) (job->w->cols / LLM_QK));
}


/* what act_fill needs: the activations (bytes from act_plan), then a
 * q32_pack row for each of nth quantizing threads */
static size_t
act_buf_size(const matmul_job *job, size_t bytes, int nth)
{
    size_t tmp = pack_tmp_size(job);

    return tmp ? ALIGN64(bytes) + (size_t) nth * tmp : bytes;
}


/* the job's activations quantized into buf (act_buf_size bytes): padding
 * rows of packed layouts zeroed, large batches on tp's threads */
static void
act_fill(matmul_job *job, void *buf, size_t bytes, llm_threadpool *tp)
{
    job->act = buf;
    job->pack_tmp_size = pack_tmp_size(job);
    if (job->pack_tmp_size) {
        if (!job->w->pack) {
            memset(buf, 0, bytes);        /* padding rows of the layout */
        }
        job->pack_tmp = (uint8_t *) buf + ALIGN64(bytes);
    }
    if (act_threads(job, tp) > 1) {
        llm_threadpool_run(tp, quantize_task, job);
    } else {
        quantize_rows(job, 0, job->n_x, 0);
    }
}


int
llm_matmul_ld(llm_threadpool *tp, float *out, size_t ld_out, const float *x,
    size_t ld_x, int n_x, const llm_tensor *w)
{
    matmul_job job;
    size_t act_bytes;
    uint8_t *buf;
    int nth = llm_threadpool_size(tp);

    if (n_x <= 0 || w->rows == 0) {
        return 0;
    }
    job_init(&job, w, out, ld_out, x, ld_x, n_x);
    act_bytes = act_plan(job.set, w, n_x, &job.act_type, &job.act_stride);
    if (job.act_type) {
        buf = scratch_get(act_buf_size(&job, act_bytes,
                                       act_threads(&job, tp)));
        if (buf == NULL) {
            return -1;
        }
        act_fill(&job, buf, act_bytes, tp);
    }

    /* about four work items per thread, in whole tiles, so a thread that
     * is descheduled for a while does not hold up the others */
    job.chunk = (w->rows + 4 * nth - 1) / (4 * nth);
    job.chunk = (job.chunk + LLM_PACK_ROWS - 1) / LLM_PACK_ROWS * LLM_PACK_ROWS;
    atomic_init(&job.next_row, 0);
    llm_threadpool_run(tp, matmul_task, &job);
    return 0;
}


/* --- prepared activations -------------------------------------------------- */

size_t
llm_act_size(const llm_tensor *w, int n_x)
{
    matmul_job job;
    size_t bytes;

    memset(&job, 0, sizeof(job));
    job.w = w;
    job.set = kernels_for(w->type, n_x);
    bytes = act_plan(job.set, w, n_x, &job.act_type, &job.act_stride);
    /* llm_act_make quantizes on the calling thread: one packing row */
    return job.act_type ? act_buf_size(&job, bytes, 1) : 0;
}


void
llm_act_make(llm_act *a, void *buf, const float *x, size_t ld_x, int n_x,
    const llm_tensor *w)
{
    matmul_job job;
    size_t bytes;

    job_init(&job, w, NULL, 0, x, ld_x, n_x);
    bytes = act_plan(job.set, w, n_x, &job.act_type, &job.act_stride);
    if (job.act_type) {
        act_fill(&job, buf, bytes, NULL);
    }
    a->type = w->type;
    a->pack = w->pack;
    a->cols = w->cols;
    a->n_x = n_x;
    a->data = job.act;
    a->stride = job.act_stride;
}


void
llm_matmul_act(float *out, size_t ld_out, const llm_act *a,
    const llm_tensor *w)
{
    matmul_job job;

    if (w->type != a->type || w->cols != a->cols || w->pack != a->pack) {
        fprintf(stderr, "llm_matmul_act: activations made for %s x %d "
                "(pack %d), used with %s x %d (pack %d)\n",
                ggml_type_name(a->type), a->cols, a->pack,
                ggml_type_name(w->type), w->cols, w->pack);
        abort();
    }
    if (a->n_x <= 0 || w->rows == 0) {
        return;
    }
    job_init(&job, w, out, ld_out, NULL, 0, a->n_x);
    job.act = a->data;
    job.act_stride = a->stride;
    job.chunk = w->rows;
    atomic_init(&job.next_row, 0);
    matmul_task(&job, 0, 1);
}


int
llm_matmul(llm_threadpool *tp, float *out, const float *x, int n_x,
    const llm_tensor *w)
{
    return llm_matmul_ld(tp, out, w->rows, x, w->cols, n_x, w);
}


int
llm_matmul_ref(float *out, const float *x, int n_x, const llm_tensor *w)
{
    float *row = llm_alloc_aligned(sizeof(float) * (size_t) w->cols);

    if (row == NULL) {
        return -1;
    }
    for (int r = 0; r < w->rows; r++) {
        llm_dequant_row(w->type, (const uint8_t *) w->data + r * w->row_stride,
                        row, w->cols);
        for (int i = 0; i < n_x; i++) {
            double acc = 0.0;
            for (int c = 0; c < w->cols; c++) {
                acc += (double) row[c] * x[(size_t) i * w->cols + c];
            }
            out[(size_t) i * w->rows + r] = (float) acc;
        }
    }
    free(row);
    return 0;
}
