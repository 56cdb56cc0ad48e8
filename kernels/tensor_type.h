/*
 * Tensor element types: ggml's numbering (what GGUF files store), each
 * type's block of elements and bytes per block, and its name. The kernels
 * dispatch on it; the GGUF and safetensors readers check tensors with it.
 * Nothing here reads a file: it is the lowest layer, below engine/.
 *
 * defines: enum ggml_type, ggml_type_block, ggml_type_size,
 *          ggml_type_name, ggml_row_size, GGML_TYPES_SUPPORTED
 */
#ifndef NGX_LLM_TENSOR_TYPE_H
#define NGX_LLM_TENSOR_TYPE_H

#include <stdint.h>

/* tensor types (ggml numbering) */
enum ggml_type {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_IQ4_NL = 20,
    GGML_TYPE_IQ4_XS = 23,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_MXFP4 = 39,
    GGML_TYPE_COUNT = 42,       /* ggml's, with NVFP4 (40) and Q1_0 (41) */
};

/* the supported types, as the loaders' messages name them (the table in
 * tensor_type.c is the one home: a test holds them equal) */
#define GGML_TYPES_SUPPORTED  "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, " \
    "Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS"

/* block size in elements, bytes per block, name; size 0 = unsupported */
uint32_t ggml_type_block(uint32_t type);
uint32_t ggml_type_size(uint32_t type);
const char *ggml_type_name(uint32_t type);
/* bytes of a row of n elements, 0 if n is not a multiple of the block */
uint64_t ggml_row_size(uint32_t type, uint64_t n);

#endif
