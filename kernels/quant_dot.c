/*
 * The added types (quant_vals.h) as one family: dispatch to each
 * family's unpacking and quantizer, the dequantization formula, and the
 * reference dot products that define their canonical order (the SIMD
 * kernels reproduce these bit for bit; docs/kernels.md).
 *
 * defines: llm_is_q32x, llm_is_qkx, llm_unpack_q32, llm_unpack_qk,
 *          llm_dequant_ext, llm_quantize_ext, llm_dot_q32x_ref,
 *          llm_dot_qkx_step, llm_dot_qkx_ref
 */
#include <math.h>
#include <string.h>

#include "quant_vals.h"
#include "simd.h"
#include "tensor_type.h"


int
llm_is_q32x(uint32_t type)
{
    return type == GGML_TYPE_Q5_0 || type == GGML_TYPE_Q5_1
           || type == GGML_TYPE_IQ4_NL || type == GGML_TYPE_MXFP4;
}


int
llm_is_qkx(uint32_t type)
{
    return type == GGML_TYPE_Q2_K || type == GGML_TYPE_Q3_K
           || type == GGML_TYPE_Q5_K || type == GGML_TYPE_IQ4_XS;
}


void
llm_unpack_q32(uint32_t type, const void *blk, llm_q32_vals *v)
{
    if (type == GGML_TYPE_Q5_0 || type == GGML_TYPE_Q5_1) {
        llm_unpack_q5(type, blk, v);
    } else {
        llm_unpack_nl(type, blk, v);
    }
}


void
llm_unpack_qk(uint32_t type, const void *blk, llm_qk_vals *v)
{
    if (type == GGML_TYPE_IQ4_XS) {
        llm_unpack_iq4_xs(blk, v);
    } else {
        llm_unpack_k(type, blk, v);
    }
}


/* the formula of quant_vals.h; one rounding per value where gguf-py's
 * dequantizers round once too (d * q and d * sc are exact), so the
 * values equal theirs bit for bit (t/unit/test_quant_types.c) */
void
llm_dequant_ext(uint32_t type, const void *row, float *y, int64_t nb)
{
    const uint8_t *p = row;
    size_t bytes = ggml_type_size(type);
    llm_q32_vals v;
    llm_qk_vals k;

    for (int64_t i = 0; i < nb; i++, p += bytes) {
        if (llm_is_q32x(type)) {
            llm_unpack_q32(type, p, &v);
            for (int j = 0; j < LLM_QK; j++) {
                *y++ = v.has_min ? v.d * (float) v.q[j] + v.m
                                 : v.d * (float) v.q[j];
            }
            continue;
        }
        llm_unpack_qk(type, p, &k);
        for (int e = 0; e < LLM_QK_K; e++) {
            float dl = k.d * (float) k.sc[e / k.sub];
            *y++ = k.has_min ? dl * (float) k.q[e]
                               - k.dmin * (float) k.mn[e / k.sub]
                             : dl * (float) k.q[e];
        }
    }
}


int
llm_quantize_ext(uint32_t type, const float *x, void *row, int64_t n)
{
    switch (type) {
    case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q5_1:
        llm_quantize_q5(type, x, row, n / LLM_QK);
        return 0;
    case GGML_TYPE_IQ4_NL:
    case GGML_TYPE_MXFP4:
        llm_quantize_nl(type, x, row, n / LLM_QK);
        return 0;
    case GGML_TYPE_IQ4_XS:
        llm_quantize_nl(type, x, row, n / LLM_QK_K);
        return 0;
    case GGML_TYPE_Q2_K:
    case GGML_TYPE_Q3_K:
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K:
    case GGML_TYPE_Q6_K:
        llm_quantize_k(type, x, row, n / LLM_QK_K);
        return 0;
    default:
        return -1;
    }
}


float
llm_dot_q32x_ref(uint32_t type, int n, const uint8_t *w,
    const llm_block_q8a *x)
{
    size_t bytes = ggml_type_size(type);
    float acc[8] = { 0 }, msum[8] = { 0 };
    llm_q32_vals v;

    for (int b = 0; b < n / LLM_QK; b++, w += bytes) {
        int isum = 0;
        llm_unpack_q32(type, w, &v);
        for (int j = 0; j < LLM_QK; j++) {
            isum += v.q[j] * x[b].qs[j];
        }
        acc[b % 8] = fmaf(v.d * x[b].d, (float) isum, acc[b % 8]);
        if (v.has_min) {
            msum[b % 8] = fmaf(v.m, x[b].s, msum[b % 8]);
        }
    }
    if (type == GGML_TYPE_Q5_1) {
        return llm_hsum8(acc) + llm_hsum8(msum);
    }
    return llm_hsum8(acc);
}


float
llm_dot_qkx_step(uint32_t type, const uint8_t *w, const llm_block_q8k *x,
    float acc)
{
    int isum = 0, imin = 0;
    llm_qk_vals v;

    llm_unpack_qk(type, w, &v);
    for (int s = 0; s < LLM_QK_K / v.sub; s++) {
        int g = 0, xs = 0;
        for (int e = v.sub * s; e < v.sub * (s + 1); e++) {
            g += v.q[e] * x->qs[e];
        }
        for (int k = v.sub / 16 * s; k < v.sub / 16 * (s + 1); k++) {
            xs += x->bsums[k];
        }
        isum += v.sc[s] * g;
        imin += v.mn[s] * xs;
    }
    acc = fmaf(v.d * x->d, (float) isum, acc);
    if (v.has_min) {
        acc = fmaf(-(v.dmin * x->d), (float) imin, acc);
    }
    return acc;
}


float
llm_dot_qkx_ref(uint32_t type, int n, const uint8_t *w,
    const llm_block_q8k *x)
{
    size_t bytes = ggml_type_size(type);
    float acc = 0.0f;

    for (int b = 0; b < n / LLM_QK_K; b++, w += bytes) {
        acc = llm_dot_qkx_step(type, w, &x[b], acc);
    }
    return acc;
}
