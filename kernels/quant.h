/*
 * Quantized tensor formats: GGUF/ggml block layouts, their scalar
 * dequantization reference, and the activation quantizers used inside the
 * quantized dot products of matmul.c.
 *
 * Design note. Weights stay in the file's format (mmapped, never expanded).
 * A quantized matmul quantizes its activations once per call into blocks
 * that match the weight's blocks, so each block's inner product is an exact
 * integer sum; only the per-block scaling is done in float, in an order
 * that matmul.c fixes by design (see docs/kernels.md). The block structs
 * below are byte-for-byte the on-disk layouts of ggml (ggml-common.h).
 *
 * defines: llm_block_*, llm_kvalues_iq4nl, llm_kvalues_mxfp4,
 *          llm_q3k_scale, llm_e8m0_half, llm_q4k_scale_min,
 *          llm_dequant_row, llm_quantize_row, llm_quantize_row_q8a,
 *          llm_quantize_row_q8k, llm_quant_block, llm_quant_block_bytes
 */
#ifndef NGX_LLM_QUANT_H
#define NGX_LLM_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "fp16.h"                  /* llm_half and its conversions */

#define LLM_QK    32               /* elements per block: Q4_0, Q4_1, Q5_0,
                                      Q5_1, Q8_0, IQ4_NL, MXFP4 */
#define LLM_QK_K  256              /* elements per super-block: K-quants */


/* Q4_0: x = d * (q - 8), q in 0..15; qs[j] holds element j (low nibble)
 * and element j + 16 (high nibble) */
typedef struct {
    llm_half  d;
    uint8_t   qs[LLM_QK / 2];
} llm_block_q4_0;

/* Q4_1: x = d * q + m, q in 0..15, nibbles as Q4_0 */
typedef struct {
    llm_half  d;
    llm_half  m;
    uint8_t   qs[LLM_QK / 2];
} llm_block_q4_1;

/* Q8_0: x = d * q, q in -128..127 */
typedef struct {
    llm_half  d;
    int8_t    qs[LLM_QK];
} llm_block_q8_0;

/* Q4_K: 8 sub-blocks of 32; x = d * sc[j] * q - dmin * m[j]; the 6-bit
 * sc/m pairs are packed in scales[12] (see llm_q4k_scale_min); qs holds
 * 64 elements per 32 bytes: low nibbles first 32, high nibbles next 32 */
typedef struct {
    llm_half  d;
    llm_half  dmin;
    uint8_t   scales[12];
    uint8_t   qs[LLM_QK_K / 2];
} llm_block_q4_K;

/* Q6_K: 16 sub-blocks of 16; x = d * scales[j] * (q - 32), q 6 bits:
 * low 4 bits in ql, high 2 bits in qh */
typedef struct {
    uint8_t   ql[LLM_QK_K / 2];
    uint8_t   qh[LLM_QK_K / 4];
    int8_t    scales[LLM_QK_K / 16];
    llm_half  d;
} llm_block_q6_K;

/* Q5_0: x = d * (q - 16), q 5 bits: low 4 as Q4_0's nibbles, bit 4 of
 * element j in bit j of qh (little-endian) */
typedef struct {
    llm_half  d;
    uint8_t   qh[4];
    uint8_t   qs[LLM_QK / 2];
} llm_block_q5_0;

/* Q5_1: x = d * q + m, q as Q5_0's without the offset */
typedef struct {
    llm_half  d;
    llm_half  m;
    uint8_t   qh[4];
    uint8_t   qs[LLM_QK / 2];
} llm_block_q5_1;

/* IQ4_NL: x = d * llm_kvalues_iq4nl[q], nibbles as Q4_0 */
typedef struct {
    llm_half  d;
    uint8_t   qs[LLM_QK / 2];
} llm_block_iq4_nl;

/* MXFP4: x = 2^(e - 128) * llm_kvalues_mxfp4[q] (E2M1 values doubled, so
 * the scale is half the E8M0 scale 2^(e - 127)), nibbles as Q4_0 */
typedef struct {
    uint8_t   e;
    uint8_t   qs[LLM_QK / 2];
} llm_block_mxfp4;

/* Q2_K: 16 sub-blocks of 16; x = d * (scales[j] & 15) * q
 * - dmin * (scales[j] >> 4), q 2 bits: element 128h + 32s + l in bits
 * 2s..2s+1 of qs[32h + l] */
typedef struct {
    uint8_t   scales[LLM_QK_K / 16];
    uint8_t   qs[LLM_QK_K / 4];
    llm_half  d;
    llm_half  dmin;
} llm_block_q2_K;

/* Q3_K: 16 sub-blocks of 16; x = d * (sc[j] - 32) * (q - 4 * !h), q 2 bits
 * as Q2_K's, h bit (e / 32) of hmask[e % 32], the 6-bit sc[j] packed in
 * scales[12] (see llm_q3k_scale) */
typedef struct {
    uint8_t   hmask[LLM_QK_K / 8];
    uint8_t   qs[LLM_QK_K / 4];
    uint8_t   scales[12];
    llm_half  d;
} llm_block_q3_K;

/* Q5_K: Q4_K's scales and nibbles, plus bit 4 of element 32j + l in bit j
 * of qh[l] */
typedef struct {
    llm_half  d;
    llm_half  dmin;
    uint8_t   scales[12];
    uint8_t   qh[LLM_QK_K / 8];
    uint8_t   qs[LLM_QK_K / 2];
} llm_block_q5_K;

/* IQ4_XS: 8 sub-blocks of 32; x = d * (ls[j] - 32) * llm_kvalues_iq4nl[q],
 * ls 6 bits: low 4 in nibble j % 2 of scales_l[j / 2], high 2 in bits
 * 2j..2j+1 of scales_h; each 16 bytes of qs one sub-block as Q4_0's */
typedef struct {
    llm_half  d;
    uint16_t  scales_h;
    uint8_t   scales_l[LLM_QK_K / 64];
    uint8_t   qs[LLM_QK_K / 2];
} llm_block_iq4_xs;

/* the non-linear 4-bit value tables (ggml-common.h's kvalues_iq4nl and
 * kvalues_mxfp4) */
extern const int8_t llm_kvalues_iq4nl[16];
extern const int8_t llm_kvalues_mxfp4[16];

/* activations for the 32-element types (like ggml's Q8_1, but float):
 * x ~= d * q, s = d * sum(q) (for Q4_1's minimum term) */
typedef struct {
    float     d;
    float     s;
    int8_t    qs[LLM_QK];
} llm_block_q8a;

/* activations for the K-quants (ggml's Q8_K): bsums[j] = sum of q over
 * elements 16j..16j+15 */
typedef struct {
    float     d;
    int8_t    qs[LLM_QK_K];
    int16_t   bsums[LLM_QK_K / 16];
} llm_block_q8k;

_Static_assert(sizeof(llm_block_q4_0) == 18, "Q4_0 block is 18 bytes");
_Static_assert(sizeof(llm_block_q4_1) == 20, "Q4_1 block is 20 bytes");
_Static_assert(sizeof(llm_block_q8_0) == 34, "Q8_0 block is 34 bytes");
_Static_assert(sizeof(llm_block_q4_K) == 144, "Q4_K block is 144 bytes");
_Static_assert(sizeof(llm_block_q6_K) == 210, "Q6_K block is 210 bytes");
_Static_assert(sizeof(llm_block_q5_0) == 22, "Q5_0 block is 22 bytes");
_Static_assert(sizeof(llm_block_q5_1) == 24, "Q5_1 block is 24 bytes");
_Static_assert(sizeof(llm_block_iq4_nl) == 18, "IQ4_NL block is 18 bytes");
_Static_assert(sizeof(llm_block_mxfp4) == 17, "MXFP4 block is 17 bytes");
_Static_assert(sizeof(llm_block_q2_K) == 84, "Q2_K block is 84 bytes");
_Static_assert(sizeof(llm_block_q3_K) == 110, "Q3_K block is 110 bytes");
_Static_assert(sizeof(llm_block_q5_K) == 176, "Q5_K block is 176 bytes");
_Static_assert(sizeof(llm_block_iq4_xs) == 136, "IQ4_XS block is 136 bytes");
_Static_assert(sizeof(llm_block_q8a) == 40, "Q8A block is 40 bytes");
_Static_assert(sizeof(llm_block_q8k) == 292, "Q8_K block is 292 bytes");


/* sub-block j (0..7) scale and min of a Q4_K block */
void llm_q4k_scale_min(const uint8_t scales[12], int j, int *sc, int *m);

/* sub-block j (0..15) scale of a Q3_K block, 0..63 (the stored value,
 * before the -32) */
int llm_q3k_scale(const uint8_t scales[12], int j);
/* the scale of a 32-element block of E8M0 exponent e, halved (the MXFP4
 * values are doubled): 2^(e - 128), exact (subnormal for e < 2) */
float llm_e8m0_half(uint8_t e);

/* elements per block and bytes per block of a supported weight type
 * (F32, F16, BF16: 1 element); 0 for anything else */
int llm_quant_block(uint32_t type);
int llm_quant_block_bytes(uint32_t type);

/*
 * Scalar reference: the n elements of one row of `type` (n a multiple of
 * the type's block) as float. An unsupported type is a bug in the caller
 * (the loader rejects such files): it aborts with a message.
 */
void llm_dequant_row(uint32_t type, const void *row, float *out, int64_t n);

/* weight quantizers, for the quantize command, tests and benches: every
 * supported type (round-to-nearest for F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1; a fitted scale for the others: quant_k.c, quant_nl.c); -1 for
 * another type or n not a multiple of its block */
int llm_quantize_row(uint32_t type, const float *x, void *row, int64_t n);

/* activation quantizers: d = max|x| / 127, q = round(x / d);
 * n a multiple of 32 (q8a) or 256 (q8k) */
void llm_quantize_row_q8a(const float *x, llm_block_q8a *y, int64_t n);
/* the scalar definition; llm_quantize_row_q8a (AVX2 where the CPU has it)
 * gives the same bits */
void llm_quantize_row_q8a_ref(const float *x, llm_block_q8a *y, int64_t n);
void llm_quantize_row_q8k(const float *x, llm_block_q8k *y, int64_t n);
void llm_quantize_row_q8k_ref(const float *x, llm_block_q8k *y, int64_t n);

#endif
