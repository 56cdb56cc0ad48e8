/*
 * Internal to kernels/: the block types added after the first five (Q5_0,
 * Q5_1, IQ4_NL, MXFP4; Q2_K, Q3_K, Q5_K, IQ4_XS) read as small integers
 * and float scales. Each family's file (quant_q5.c, quant_k.c, quant_nl.c)
 * unpacks its blocks into these; the one generic formula below then gives
 * both the dequantized value (llm_dequant_row) and the reference dot
 * product (quant_dot.c), so a layout has one definition.
 *
 *   32-element types:  x_j = d * q_j + m           (m = 0 unless Q5_1)
 *   super-blocks:      x_e = (d * sc_s) * q_e - dmin * mn_s,
 *                      s = e / sub                 (no min: mn = 0)
 *
 * defines: llm_q32_vals, llm_qk_vals, llm_unpack_q32, llm_unpack_qk,
 *          llm_is_q32x, llm_is_qkx, llm_dequant_ext, llm_quantize_ext,
 *          llm_dot_q32x_ref, llm_dot_qkx_step, llm_dot_qkx_ref, llm_quantize_q5_0 ...
 */
#ifndef NGX_LLM_QUANT_VALS_H
#define NGX_LLM_QUANT_VALS_H

#include <stdint.h>

#include "quant.h"

typedef struct {
    int8_t    q[LLM_QK];
    float     d;
    float     m;
    int       has_min;        /* Q5_1 */
} llm_q32_vals;

typedef struct {
    int8_t    q[LLM_QK_K];
    int16_t   sc[16];         /* per sub-block, signed */
    int16_t   mn[16];         /* per sub-block; 0 without a min */
    int       sub;            /* elements per sub-block: 16 or 32 */
    int       has_min;        /* Q2_K, Q5_K */
    float     d;
    float     dmin;
} llm_qk_vals;

/* 1 if type is one of the added 32-element (q32x) or super-block (qkx)
 * types */
int llm_is_q32x(uint32_t type);
int llm_is_qkx(uint32_t type);

/* one block of a q32x type (Q5_0, Q5_1: quant_q5.c; IQ4_NL, MXFP4:
 * quant_nl.c) / of a qkx type (Q2_K, Q3_K, Q5_K: quant_k.c; IQ4_XS:
 * quant_nl.c) */
void llm_unpack_q32(uint32_t type, const void *blk, llm_q32_vals *v);
void llm_unpack_qk(uint32_t type, const void *blk, llm_qk_vals *v);
void llm_unpack_q5(uint32_t type, const void *blk, llm_q32_vals *v);
void llm_unpack_nl(uint32_t type, const void *blk, llm_q32_vals *v);
void llm_unpack_k(uint32_t type, const void *blk, llm_qk_vals *v);
void llm_unpack_iq4_xs(const llm_block_iq4_xs *b, llm_qk_vals *v);

/* nb blocks of an added type as floats (the formula above) */
void llm_dequant_ext(uint32_t type, const void *row, float *y, int64_t nb);

/* weight quantizers of the added types and of Q4_K, Q6_K (quant_k.c,
 * quant_q5.c, quant_nl.c); n a multiple of the block; -1 for a type
 * without one */
int llm_quantize_ext(uint32_t type, const float *x, void *row, int64_t n);
void llm_quantize_q5(uint32_t type, const float *x, void *row, int64_t nb);
void llm_quantize_k(uint32_t type, const float *x, void *row, int64_t nb);
void llm_quantize_nl(uint32_t type, const float *x, void *row, int64_t nb);

/*
 * The reference dots (docs/numerics.md, docs/kernels.md) of n elements:
 * q32x against q8a, in dot_q32's order (acc[b % 8], msum[b % 8] for a
 * min, hsum8); qkx against q8k, one accumulator, fmaf per super-block of
 * the exact integers isum = sum_s sc_s * sum_{e in s} q_e x_e, then
 * (with a min) imin = sum_s mn_s * sum_{e in s} x_e.
 */
float llm_dot_q32x_ref(uint32_t type, int n, const uint8_t *w,
    const llm_block_q8a *x);
float llm_dot_qkx_ref(uint32_t type, int n, const uint8_t *w,
    const llm_block_q8k *x);
/* acc after one super-block w of a qkx type against x (the reference's
 * step) */
float llm_dot_qkx_step(uint32_t type, const uint8_t *w,
    const llm_block_q8k *x, float acc);

#endif
