/*
 * avx512 tile kernels (filled in below); a NULL entry falls back to the
 * scalar kernel of matmul.c.
 */
#include "simd.h"

const llm_kernel_set llm_kernels_avx512 = { 0 };
