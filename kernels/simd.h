/*
 * Internal to kernels/: the tile kernels that llm_matmul dispatches to, one
 * set per instruction set (matmul.c: scalar reference order; simd_avx2.c,
 * simd_avx512.c: the same order, vectorized).
 *
 * The canonical order every set must reproduce exactly (docs/kernels.md):
 *  - float weights (F32/F16/BF16), float x: element j accumulates into
 *    lane j % 32 with fmaf; lanes reduce as
 *    s[k] = (a[k] + a[k+8]) + (a[k+16] + a[k+24]), then llm_hsum8(s).
 *  - 32-element blocks (Q4_0, Q4_1, Q8_0) x q8a: block b gives the exact
 *    integer isum = sum of its 32 products; acc[b % 8] = fmaf(d_w * d_x,
 *    (float) isum, acc[b % 8]); Q4_1 also msum[b % 8] = fmaf(m_w, s_x,
 *    msum[b % 8]); result llm_hsum8(acc) (+ llm_hsum8(msum) for Q4_1).
 *  - K-quants x q8k: each super-block gives exact integers (scaled sums,
 *    and for Q4_K the min sum); one float accumulator takes them with
 *    fmaf, super-block after super-block.
 */
#ifndef NGX_LLM_SIMD_H
#define NGX_LLM_SIMD_H

#include <stddef.h>
#include <stdint.h>

/* Decode (one activation row) reads every weight once, from DRAM: the
 * packed kernels ask for the bytes this far ahead of the block they read
 * (simd_avx512_kp.c; simd_avx512.c but for Q4_0/Q4_1, which keep 4 KB).
 * At 2 threads on huge pages 1 KB beat 2 and 4 KB by 4-12% (bench/decode
 * on the 8B Q4_K_M/Q8_0 and gpt-oss shapes; docs/perf.md "Prefetch
 * distance at two threads"). */
#define LLM_DECODE_PF_AHEAD  1024

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
 * kernel is used). A set may lay out the q8a activations of the
 * 32-element types its own way (same values): q32_layout gives the bytes
 * for n_x rows and the act_stride its kernels expect, q32_pack places row
 * i of n_x there (for Q4_0, Q4_1 and Q8_0 only). Its q4_0/q4_1/q8_0 kernels are used only from q32_min_n_x
 * activation rows on (below that, the next lower set's). */
typedef struct {
    llm_tile_fn     f32, f16, bf16, q4_0, q4_1, q8_0, q4_K, q6_K;
    /* the added types (quant_vals.h), against q8a / q8k rows */
    llm_tile_fn     q5_0, q5_1, iq4_nl, mxfp4, q2_K, q3_K, q5_K, iq4_xs;
    /* packed weights (tensor.h, llm_pack), against llm_act_p rows: a
       tile is one or two groups of 16 rows (n_w <= 32 rows stored), w
       the first group's first block, w_stride the bytes from one group
       to the next */
    llm_tile_fn     q4_0p, q4_1p, q8_0p, q5_0p, iq4_nlp, mxfp4p, q4_Kp,
                    q6_Kp, q5_Kp, iq4_xsp;
    int             q32_min_n_x;
    size_t        (*q32_layout)(int n_blocks, int n_x, size_t *act_stride);
    void          (*q32_pack)(uint32_t type, const void *q8a, int n_blocks,
                              int n_x, int i, uint8_t *act);
} llm_kernel_set;

/* one activation block for packed weights: q8a's values, and the exact
 * sum of qs (Q4_0, Q5_0, Q8_0 quants are unsigned w + 8, w + 16,
 * w + 128, IQ4_NL's and MXFP4's values + 128: the kernels subtract 8, 16 or 128
 * times it) */
typedef struct {
    int8_t    qs[32];
    float     d;
    float     s;
    int32_t   sum;
    int32_t   pad;
} llm_act_p;

_Static_assert(sizeof(llm_act_p) == 48, "llm_act_p is 48 bytes");

/* where the parts of block b of a packed group are */
static inline size_t
llm_pack_block_bytes(uint32_t type_bytes)
{
    return (size_t) 16 * type_bytes;
}

/* pack.c: bytes before the quants in a packed block of type */
size_t llm_pack_quants_at(uint32_t type);

/* a packed Q4_K super-block (pack.c): d, dmin, then the scale dwords
 * and the quant dwords at these offsets */
#define LLM_PACK_Q4K_SC  64
#define LLM_PACK_Q4K_QS  256
/* a packed Q6_K super-block: d, then scales, ql, qh dwords */
#define LLM_PACK_Q6K_SC  32
#define LLM_PACK_Q6K_QL  288
#define LLM_PACK_Q6K_QH  2336
/* Q5_K: as Q4_K's, qh then the quants; IQ4_XS: d, scales_h, then */
#define LLM_PACK_Q5K_QH  256
#define LLM_PACK_Q5K_QS  768
#define LLM_PACK_IQ4XS_SL  64
#define LLM_PACK_IQ4XS_QS  128

/* pack.c: row l of a packed K-quant super-block from (dir 0) or back into
 * (dir 1) its block as stored in GGUF */
void llm_pack_k_row(uint32_t type, uint8_t *packed, int l, uint8_t *blk,
    int dir);

/* simd_avx2_ext.c: the added types on AVX2 (plain q8a / q8k rows: no
 * set lays out their activations its own way) */
void llm_avx2_tile_q5_0(const llm_tile *t);
void llm_avx2_tile_q5_1(const llm_tile *t);
void llm_avx2_tile_iq4_nl(const llm_tile *t);
void llm_avx2_tile_mxfp4(const llm_tile *t);
void llm_avx2_tile_q2_K(const llm_tile *t);
void llm_avx2_tile_q3_K(const llm_tile *t);
void llm_avx2_tile_q5_K(const llm_tile *t);
void llm_avx2_tile_iq4_xs(const llm_tile *t);

/* simd_avx512_k.c: the K-quants on AVX-512 VNNI (plain q8k rows) */
void llm_avx512_tile_q4_K(const llm_tile *t);
void llm_avx512_tile_q6_K(const llm_tile *t);
void llm_avx512_tile_q5_0(const llm_tile *t);
void llm_avx512_tile_iq4_nl(const llm_tile *t);
void llm_avx512_tile_mxfp4(const llm_tile *t);

/* simd_avx512_kp.c: packed K-quants (tensor.h) against plain q8k rows */
void llm_avx512_tile_q4_Kp(const llm_tile *t);
void llm_avx512_tile_q6_Kp(const llm_tile *t);
void llm_avx512_tile_q5_Kp(const llm_tile *t);
void llm_avx512_tile_iq4_xsp(const llm_tile *t);

/* simd_avx512_kpx.c: a tile of two packed groups of type (Q4_K, Q5_K,
 * Q6_K, IQ4_XS) against many q8k rows */
void llm_avx512_tile_kpx(uint32_t type, const llm_tile *t);

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
