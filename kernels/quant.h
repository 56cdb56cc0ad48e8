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
 * defines: llm_block_*, llm_fp16_to_fp32, llm_fp32_to_fp16, llm_bf16_to_fp32,
 *          llm_dequant_row, llm_quantize_row, llm_quantize_row_q8a,
 *          llm_quantize_row_q8k, llm_quant_block, llm_quant_block_bytes
 */
#ifndef NGX_LLM_QUANT_H
#define NGX_LLM_QUANT_H

#include <stddef.h>
#include <stdint.h>

#define LLM_QK    32               /* elements per block: Q4_0, Q4_1, Q8_0 */
#define LLM_QK_K  256              /* elements per super-block: K-quants */

typedef uint16_t llm_half;         /* IEEE binary16 bits */

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
_Static_assert(sizeof(llm_block_q8a) == 40, "Q8A block is 40 bytes");
_Static_assert(sizeof(llm_block_q8k) == 292, "Q8_K block is 292 bytes");

float llm_fp16_to_fp32(llm_half h);
llm_half llm_fp32_to_fp16(float f);        /* round to nearest even */
float llm_bf16_to_fp32(uint16_t h);

/* sub-block j (0..7) scale and min of a Q4_K block */
void llm_q4k_scale_min(const uint8_t scales[12], int j, int *sc, int *m);

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

/* round-to-nearest weight quantizers, for tests, benches and tiny models:
 * F32, F16, BF16, Q8_0, Q4_0, Q4_1; returns -1 for other types */
int llm_quantize_row(uint32_t type, const float *x, void *row, int64_t n);

/* activation quantizers: d = max|x| / 127, q = round(x / d);
 * n a multiple of 32 (q8a) or 256 (q8k) */
void llm_quantize_row_q8a(const float *x, llm_block_q8a *y, int64_t n);
/* the scalar definition; llm_quantize_row_q8a (AVX2 where the CPU has it)
 * gives the same bits */
void llm_quantize_row_q8a_ref(const float *x, llm_block_q8a *y, int64_t n);
void llm_quantize_row_q8k(const float *x, llm_block_q8k *y, int64_t n);

#endif
