/*
 * Internal to kernels/: the tile kernels that llm_matmul dispatches to, one
 * set per instruction set (matmul.c: scalar reference order; simd_avx2.c,
 * simd_avx512.c: the same order, vectorized).
 *
 * The canonical order every set must reproduce exactly (docs/kernels.md):
 *  - float weights (F32/F16/BF16), float x: element j accumulates into
 *    lane j % 32 with fmaf; lanes reduce as
 *    s[k] = (a[k] + a[k+8]) + (a[k+16] + a[k+24]), then llm_hsum8(s).
 *  - 32-element blocks (Q4_0, Q4_1, Q8_0) x q8a: block b, group k of four
 *    consecutive elements gives an exact integer g; lane (b % 2) * 8 + k
 *    accumulates fmaf(d_w * d_x, (float) g, lane); Q4_1's minimum term
 *    m_w * s_x accumulates with fmaf in msum[b % 2]; result
 *    llm_hsum8(a[k] + a[k+8]) + (msum[0] + msum[1]).
 *  - K-quants x q8k: each super-block gives exact integers (scaled sums,
 *    and for Q4_K the min sum); one float accumulator takes them with
 *    fmaf, super-block after super-block.
 */
#ifndef NGX_LLM_SIMD_H
#define NGX_LLM_SIMD_H

#include <stddef.h>
#include <stdint.h>

/* one tile: n_w weight rows times n_x activation rows */
typedef struct {
    const uint8_t  *w;          /* first weight row */
    size_t          w_stride;   /* bytes between weight rows */
    int             n_w;
    const uint8_t  *act;        /* first activation row (float or blocks) */
    size_t          act_stride; /* bytes between activation rows */
    int             n_x;
    int             n;          /* elements per row (cols) */
    float          *out;        /* out[i * ld_out + r] */
    size_t          ld_out;
} llm_tile;

typedef void (*llm_tile_fn)(const llm_tile *t);

/* kernels by ggml type; NULL where a set has none (the next lower set's
 * kernel is used). A set may want the q8a activations of the 32-element
 * types rearranged (q32_pack, same values): then its q4_0/q4_1/q8_0
 * kernels read act rows of q32_act_bytes(blocks) bytes made by q32_pack. */
typedef struct {
    llm_tile_fn     f32, f16, bf16, q4_0, q4_1, q8_0, q4_K, q6_K;
    size_t        (*q32_act_bytes)(int n_blocks);
    void          (*q32_pack)(uint32_t type, const void *q8a, int n_blocks,
                              uint8_t *dst);
} llm_kernel_set;

extern const llm_kernel_set llm_kernels_scalar;
extern const llm_kernel_set llm_kernels_avx2;
extern const llm_kernel_set llm_kernels_avx512;

static inline float
llm_hsum8(const float s[8])
{
    float t0 = s[0] + s[4], t1 = s[1] + s[5], t2 = s[2] + s[6],
          t3 = s[3] + s[7];
    return (t0 + t2) + (t1 + t3);
}

#endif
