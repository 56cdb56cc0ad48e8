/*
 * CUDA kernels of the llama forward pass (see kernels_cuda.h for the
 * contract of each). Each kernel is the CPU backend's step written for
 * threads; the references they are checked against are in
 * t/unit/test_cuda.c.
 *
 * defines: the launchers of kernels_cuda.h
 */
#include "kernels_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdio.h>

typedef __nv_bfloat16 bf16;

/* enum ggml_type values (engine/format/gguf.h; not included: C header) */
enum {
    T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7,
    T_Q8_0 = 8, T_Q2_K = 10, T_Q3_K = 11, T_Q4_K = 12, T_Q5_K = 13,
    T_Q6_K = 14, T_IQ4_NL = 20, T_IQ4_XS = 23, T_BF16 = 30, T_MXFP4 = 39
};


extern "C" int
llm_cuda_check_at(int code, const char *what, const char *file, int line,
    char *err, size_t err_len)
{
    if (code == 0) {
        return 0;
    }
    if (err != NULL) {
        snprintf(err, err_len, "%s:%d: %s: %s (%s)", file, line, what,
                 cudaGetErrorString((cudaError_t) code),
                 cudaGetErrorName((cudaError_t) code));
    } else {
        fprintf(stderr, "%s:%d: %s: %s (%s)\n", file, line, what,
                cudaGetErrorString((cudaError_t) code),
                cudaGetErrorName((cudaError_t) code));
    }
    return -1;
}


/* the launch's own error (bad configuration); execution errors surface at
 * the next synchronizing call */
static int
launched(void)
{
    return (int) cudaGetLastError();
}


static unsigned
blocks_for(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;

    return (unsigned) (b < 65535u * 16u ? (b > 0 ? b : 1) : 65535u * 16u);
}


__device__ __forceinline__ float
warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}


__device__ __forceinline__ float
warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    }
    return v;
}


/* sum over the CTA (blockDim.x a multiple of 32, at most 1024) */
__device__ float
block_sum(float v)
{
    __shared__ float part[32];
    int              lane = threadIdx.x % 32, w = threadIdx.x / 32;
    int              nw = blockDim.x / 32;

    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) {
        part[w] = v;
    }
    __syncthreads();
    v = lane < nw ? part[lane] : 0.0f;
    return warp_sum(v);
}


/* ---------------------------------------------------------------------------
 * embedding gather
 */

__global__ void
embed_kernel(float *x, const bf16 *table, const int32_t *tokens, int dim)
{
    const bf16  *row = table + (size_t) tokens[blockIdx.x] * dim;
    float       *out = x + (size_t) blockIdx.x * dim;

    for (int c = threadIdx.x; c < dim; c += blockDim.x) {
        out[c] = __bfloat162float(row[c]);
    }
}


extern "C" int
llm_cuda_embed(llm_cuda_stream st, float *x, const llm_bf16 *table,
    const int32_t *tokens, int n, int dim)
{
    if (n <= 0) {
        return 0;
    }
    embed_kernel<<<n, 256, 0, st>>>(x, (const bf16 *) table, tokens, dim);
    return launched();
}


/* ---------------------------------------------------------------------------
 * RMSNorm fused with the residual add
 */

__global__ void
add_rmsnorm_kernel(bf16 *out, float *x, const float *delta, const float *w,
    const int32_t *rows, int dim, float eps)
{
    int     r = rows != NULL ? rows[blockIdx.x] : (int) blockIdx.x;
    float  *xr = x + (size_t) r * dim;
    bf16   *o = out + (size_t) blockIdx.x * dim;
    float   ss = 0.0f, v, inv;

    for (int c = threadIdx.x; c < dim; c += blockDim.x) {
        v = xr[c];
        if (delta != NULL) {
            v += delta[(size_t) r * dim + c];
            xr[c] = v;
        }
        ss += v * v;
    }
    ss = block_sum(ss);
    inv = 1.0f / sqrtf(ss / (float) dim + eps);
    for (int c = threadIdx.x; c < dim; c += blockDim.x) {
        o[c] = __float2bfloat16_rn(w[c] * (xr[c] * inv));
    }
}


extern "C" int
llm_cuda_add_rmsnorm(llm_cuda_stream st, llm_bf16 *out, float *x,
    const float *delta, const float *w, const int32_t *rows, int n, int dim,
    float eps)
{
    if (n <= 0) {
        return 0;
    }
    add_rmsnorm_kernel<<<n, dim >= 2048 ? 1024 : 256, 0, st>>>(
        (bf16 *) out, x, delta, w, rows, dim, eps);
    return launched();
}


/* ---------------------------------------------------------------------------
 * bias, QK-norm, RoPE on the fused QKV rows
 */

__global__ void
rope_kernel(float *qkv, int ld, const float *bias, const float *q_norm,
    const float *k_norm, const int32_t *pos, const float *inv_freq,
    int n_heads, int n_kv_heads, int hd, int rope_dim, int neox, float eps)
{
    float  *row = qkv + (size_t) blockIdx.x * ld;
    int     lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int     nw = blockDim.x / 32, half = rope_dim / 2;
    int     total = n_heads + n_kv_heads;
    float   p = (float) pos[blockIdx.x];

    if (bias != NULL) {
        for (int e = threadIdx.x; e < (n_heads + 2 * n_kv_heads) * hd;
             e += blockDim.x)
        {
            row[e] += bias[e];
        }
        __syncthreads();
    }
    for (int h = warp; h < total; h += nw) {
        float        *x = row + (size_t) h * hd;
        const float  *nw_ = h < n_heads ? q_norm : k_norm;

        if (nw_ != NULL) {
            float ss = 0.0f, inv;

            for (int e = lane; e < hd; e += 32) {
                ss += x[e] * x[e];
            }
            inv = 1.0f / sqrtf(warp_sum(ss) / (float) hd + eps);
            for (int e = lane; e < hd; e += 32) {
                x[e] = nw_[e] * (x[e] * inv);
            }
            __syncwarp();
        }
        for (int j = lane; j < half; j += 32) {
            int    a = neox ? j : 2 * j, b = neox ? j + half : 2 * j + 1;
            float  sn, cs, x0 = x[a], x1 = x[b];

            sincosf(p * inv_freq[j], &sn, &cs);
            x[a] = x0 * cs - x1 * sn;
            x[b] = x0 * sn + x1 * cs;
        }
    }
}


extern "C" int
llm_cuda_rope(llm_cuda_stream st, float *qkv, int ld, const float *bias,
    const float *q_norm, const float *k_norm, const int32_t *pos,
    const float *inv_freq, int n, int n_heads, int n_kv_heads, int head_dim,
    int rope_dim, int neox, float eps)
{
    if (n <= 0) {
        return 0;
    }
    rope_kernel<<<n, 128, 0, st>>>(qkv, ld, bias, q_norm, k_norm, pos,
                                   inv_freq, n_heads, n_kv_heads, head_dim,
                                   rope_dim, neox, eps);
    return launched();
}


/* ---------------------------------------------------------------------------
 * K/V into paged blocks
 */

__device__ __forceinline__ size_t
kv_offset(int32_t block, int layer, int n_layers, int bs, int kv_dim,
    int slot)
{
    return ((size_t) block * n_layers + layer) * 2 * bs * kv_dim
           + (size_t) slot * kv_dim;
}


__global__ void
kv_write_kernel(bf16 *pool, const float *qkv, int ld, int q_dim,
    const int32_t *seq, const int32_t *pos, const int32_t *tables,
    int table_stride, int layer, int n_layers, int bs, int kv_dim)
{
    int           i = blockIdx.x, p = pos[i];
    int32_t       blk = tables[(size_t) seq[i] * table_stride + p / bs];
    bf16         *k = pool + kv_offset(blk, layer, n_layers, bs, kv_dim,
                                       p % bs);
    bf16         *v = k + (size_t) bs * kv_dim;
    const float  *src = qkv + (size_t) i * ld + q_dim;

    for (int e = threadIdx.x; e < kv_dim; e += blockDim.x) {
        k[e] = __float2bfloat16_rn(src[e]);
        v[e] = __float2bfloat16_rn(src[kv_dim + e]);
    }
}


extern "C" int
llm_cuda_kv_write(llm_cuda_stream st, llm_bf16 *pool, const float *qkv,
    int ld, int q_dim, const int32_t *seq, const int32_t *pos,
    const int32_t *tables, int table_stride, int n, int layer, int n_layers,
    int block_size, int kv_dim)
{
    if (n <= 0) {
        return 0;
    }
    kv_write_kernel<<<n, 128, 0, st>>>((bf16 *) pool, qkv, ld, q_dim, seq,
                                       pos, tables, table_stride, layer,
                                       n_layers, block_size, kv_dim);
    return launched();
}


/* ---------------------------------------------------------------------------
 * paged attention (flash style)
 *
 * Version 1: one CTA of 4 warps per (tile, kv head). The CTA's query rows
 * (n_q tokens x group heads, at most 16) sit in shared memory; K and V
 * stream through shared memory 32 positions at a time (bf16 -> float), K
 * rows padded by one float so lane j reading K[j][e] hits distinct banks.
 * Warp w owns rows w, w+4, w+8, w+12: lane j scores position t0+j, the
 * warp keeps the running max m, the sum l and its share of the output
 * (elements lane + 32k) in registers: the online softmax of FlashAttention.
 */
#define ATTN_WARPS   4
#define ATTN_CHUNK   32
#define ATTN_RPW     (LLM_CUDA_ATTN_MAX_ROWS / ATTN_WARPS)

template <int EPT>
__global__ void __launch_bounds__(ATTN_WARPS * 32)
attention_kernel(bf16 *out, const float *qkv, int ld, const bf16 *pool,
    const llm_cuda_attn_tile *tiles, const int32_t *pos,
    const int32_t *tables, int table_stride, int layer, int n_layers,
    int bs, int n_heads, int n_kv_heads, int hd)
{
    __shared__ float  q_s[LLM_CUDA_ATTN_MAX_ROWS][LLM_CUDA_MAX_HEAD_DIM];
    __shared__ float  k_s[ATTN_CHUNK][LLM_CUDA_MAX_HEAD_DIM + 1];
    __shared__ float  v_s[ATTN_CHUNK][LLM_CUDA_MAX_HEAD_DIM];

    llm_cuda_attn_tile  tile = tiles[blockIdx.x];
    int                 kvh = blockIdx.y, group = n_heads / n_kv_heads;
    int                 kv_dim = n_kv_heads * hd, rows = tile.n_q * group;
    int                 lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int32_t      *table = tables + (size_t) tile.seq * table_stride;
    float               scale = 1.0f / sqrtf((float) hd);
    float               m[ATTN_RPW], l[ATTN_RPW], acc[ATTN_RPW][EPT];
    int                 rpos[ATTN_RPW], max_pos = 0;

    if (tile.n_q <= 0) {
        return;                       /* padding of a graph bucket */
    }
    for (int idx = threadIdx.x; idx < rows * hd; idx += blockDim.x) {
        int r = idx / hd, e = idx % hd;
        int t = tile.token + r / group, h = kvh * group + r % group;

        q_s[r][e] = qkv[(size_t) t * ld + (size_t) h * hd + e];
    }
    for (int j = 0; j < tile.n_q; j++) {
        max_pos = max(max_pos, pos[tile.token + j]);
    }
#pragma unroll
    for (int j = 0; j < ATTN_RPW; j++) {
        int r = warp + ATTN_WARPS * j;

        m[j] = -INFINITY;
        l[j] = 0.0f;
        rpos[j] = r < rows ? pos[tile.token + r / group] : -1;
#pragma unroll
        for (int k = 0; k < EPT; k++) {
            acc[j][k] = 0.0f;
        }
    }

    for (int t0 = 0; t0 <= max_pos; t0 += ATTN_CHUNK) {
        int n_valid = min(ATTN_CHUNK, max_pos + 1 - t0);

        __syncthreads();              /* q_s written / last chunk used */
        for (int idx = threadIdx.x; idx < ATTN_CHUNK * hd;
             idx += blockDim.x)
        {
            int    jj = idx / hd, e = idx % hd, t = t0 + jj;
            float  kf = 0.0f, vf = 0.0f;

            if (jj < n_valid) {
                const bf16 *k = pool + kv_offset(table[t / bs], layer,
                                                 n_layers, bs, kv_dim,
                                                 t % bs)
                                + (size_t) kvh * hd + e;

                kf = __bfloat162float(k[0]);
                vf = __bfloat162float(k[(size_t) bs * kv_dim]);
            }
            k_s[jj][e] = kf;
            v_s[jj][e] = vf;
        }
        __syncthreads();

#pragma unroll
        for (int j = 0; j < ATTN_RPW; j++) {
            int    r = warp + ATTN_WARPS * j, t = t0 + lane;
            float  s = -INFINITY, cm, m_new, corr, p;

            if (r >= rows || t0 > rpos[j]) {
                continue;             /* warp-uniform */
            }
            if (t <= rpos[j]) {
                float d = 0.0f;

                for (int e = 0; e < hd; e++) {
                    d += q_s[r][e] * k_s[lane][e];
                }
                s = d * scale;
            }
            cm = warp_max(s);
            m_new = fmaxf(m[j], cm);
            corr = expf(m[j] - m_new);
            p = t <= rpos[j] ? expf(s - m_new) : 0.0f;
            l[j] = l[j] * corr + warp_sum(p);
#pragma unroll
            for (int k = 0; k < EPT; k++) {
                acc[j][k] *= corr;
            }
            for (int jj = 0; jj < n_valid; jj++) {
                float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
                for (int k = 0; k < EPT; k++) {
                    int e = lane + 32 * k;

                    if (e < hd) {
                        acc[j][k] += pj * v_s[jj][e];
                    }
                }
            }
            m[j] = m_new;
        }
    }

#pragma unroll
    for (int j = 0; j < ATTN_RPW; j++) {
        int r = warp + ATTN_WARPS * j;

        if (r < rows) {
            int   t = tile.token + r / group, h = kvh * group + r % group;
            bf16 *o = out + (size_t) t * n_heads * hd + (size_t) h * hd;

#pragma unroll
            for (int k = 0; k < EPT; k++) {
                int e = lane + 32 * k;

                if (e < hd) {
                    o[e] = __float2bfloat16_rn(acc[j][k] / l[j]);
                }
            }
        }
    }
}


extern "C" int
llm_cuda_attention(llm_cuda_stream st, llm_bf16 *out, const float *qkv,
    int ld, const llm_bf16 *pool, const llm_cuda_attn_tile *tiles,
    int n_tiles, const int32_t *pos, const int32_t *tables, int table_stride,
    int layer, int n_layers, int block_size, int n_heads, int n_kv_heads,
    int head_dim)
{
    dim3  grid(n_tiles, n_kv_heads);
    int   ept = (head_dim + 31) / 32;

    if (n_tiles <= 0) {
        return 0;
    }
    if (head_dim > LLM_CUDA_MAX_HEAD_DIM || n_kv_heads <= 0
        || n_heads % n_kv_heads != 0
        || n_heads / n_kv_heads > LLM_CUDA_ATTN_MAX_ROWS)
    {
        return (int) cudaErrorInvalidValue;
    }
#define ATTN_ARGS (bf16 *) out, qkv, ld, (const bf16 *) pool, tiles, pos, \
    tables, table_stride, layer, n_layers, block_size, n_heads, n_kv_heads, \
    head_dim
    switch (ept) {
    case 1: attention_kernel<1><<<grid, ATTN_WARPS * 32, 0, st>>>(ATTN_ARGS);
            break;
    case 2: attention_kernel<2><<<grid, ATTN_WARPS * 32, 0, st>>>(ATTN_ARGS);
            break;
    default:
            attention_kernel<4><<<grid, ATTN_WARPS * 32, 0, st>>>(ATTN_ARGS);
            break;
    }
#undef ATTN_ARGS
    return launched();
}


/* ---------------------------------------------------------------------------
 * SiLU * mul
 */

__global__ void
silu_mul_kernel(bf16 *out, const float *gu, int n, int hidden)
{
    size_t total = (size_t) n * hidden;

    for (size_t idx = blockIdx.x * (size_t) blockDim.x + threadIdx.x;
         idx < total; idx += (size_t) gridDim.x * blockDim.x)
    {
        size_t  i = idx / hidden, j = idx % hidden;
        float   g = gu[i * 2 * hidden + j], u = gu[i * 2 * hidden + hidden + j];

        out[idx] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
    }
}


extern "C" int
llm_cuda_silu_mul(llm_cuda_stream st, llm_bf16 *out, const float *gu, int n,
    int hidden)
{
    size_t total = (size_t) n * hidden;

    if (total == 0) {
        return 0;
    }
    silu_mul_kernel<<<blocks_for(total, 256), 256, 0, st>>>((bf16 *) out,
                                                            gu, n, hidden);
    return launched();
}


/* ---------------------------------------------------------------------------
 * GGUF types to bf16, one thread per element (load time only)
 */

__device__ __forceinline__ float
half_at(const uint8_t *p)
{
    return __half2float(__ushort_as_half((unsigned short) (p[0] | p[1] << 8)));
}


/* as llm_q4k_scale_min (kernels/quant.c) */
__device__ __forceinline__ void
q4k_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}


/* ggml's value tables (kernels/quant_nl.c) */
__constant__ int8_t kv_iq4nl[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113
};
__constant__ int8_t kv_mxfp4[16] = {
    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12
};


/* nibble e (0..31) of 16 bytes: low nibbles first */
__device__ __forceinline__ int
nib_at(const uint8_t *qs, int e)
{
    return e < 16 ? qs[e] & 0xf : qs[e - 16] >> 4;
}


/* the added types, as llm_dequant_ext (kernels/quant_dot.c and the family
 * files): each product and difference rounded once, as there */
__device__ float
dequant_ext_one(const uint8_t *row, uint32_t type, int64_t c)
{
    const uint8_t  *b;
    int             e = (int) (c % 32), E = (int) (c % 256), q, sc, m;
    unsigned        qh;

    switch (type) {
    case T_Q5_0:
        b = row + (c / 32) * 22;
        qh = b[2] | b[3] << 8 | b[4] << 16 | (unsigned) b[5] << 24;
        q = nib_at(b + 6, e) | ((qh >> e) & 1) << 4;
        return __fmul_rn(half_at(b), (float) (q - 16));
    case T_Q5_1:
        b = row + (c / 32) * 24;
        qh = b[4] | b[5] << 8 | b[6] << 16 | (unsigned) b[7] << 24;
        q = nib_at(b + 8, e) | ((qh >> e) & 1) << 4;
        return __fadd_rn(__fmul_rn(half_at(b), (float) q), half_at(b + 2));
    case T_IQ4_NL:
        b = row + (c / 32) * 18;
        return __fmul_rn(half_at(b), (float) kv_iq4nl[nib_at(b + 2, e)]);
    case T_MXFP4: {
        unsigned bits;
        b = row + (c / 32) * 17;
        bits = b[0] < 2 ? 0x00200000u << b[0] : (unsigned) (b[0] - 1) << 23;
        return __fmul_rn(__uint_as_float(bits),
                         (float) kv_mxfp4[nib_at(b + 1, e)]);
    }
    case T_Q2_K:
        b = row + (c / 256) * 84;
        sc = b[E / 16] & 0xf;
        m = b[E / 16] >> 4;
        q = (b[16 + 32 * (E / 128) + E % 32] >> (2 * ((E % 128) / 32))) & 3;
        return __fsub_rn(__fmul_rn(__fmul_rn(half_at(b + 80), (float) sc),
                                   (float) q),
                         __fmul_rn(half_at(b + 82), (float) m));
    case T_Q3_K: {
        int j = E / 16;
        b = row + (c / 256) * 110;
        sc = ((b[96 + j % 8] >> (4 * (j / 8))) & 0xf)
             | ((b[104 + j % 4] >> (2 * (j / 4))) & 3) << 4;
        q = (b[32 + 32 * (E / 128) + E % 32] >> (2 * ((E % 128) / 32))) & 3;
        q -= (b[E % 32] >> (E / 32)) & 1 ? 0 : 4;
        return __fmul_rn(__fmul_rn(half_at(b + 108), (float) (sc - 32)),
                         (float) q);
    }
    case T_Q5_K:
        b = row + (c / 256) * 176;
        q4k_scale_min(b + 4, E / 32, &sc, &m);
        q = b[48 + 32 * (E / 64) + E % 32];
        q = (E % 64) < 32 ? q & 0xf : q >> 4;
        q |= ((b[16 + E % 32] >> (E / 32)) & 1) << 4;
        return __fsub_rn(__fmul_rn(__fmul_rn(half_at(b), (float) sc),
                                   (float) q),
                         __fmul_rn(half_at(b + 2), (float) m));
    default: {                                          /* IQ4_XS */
        int s = E / 32;
        unsigned sh;
        b = row + (c / 256) * 136;
        sh = b[2] | b[3] << 8;
        sc = ((b[4 + s / 2] >> (4 * (s % 2))) & 0xf) | ((sh >> (2 * s)) & 3) << 4;
        return __fmul_rn(__fmul_rn(half_at(b), (float) (sc - 32)),
                         (float) kv_iq4nl[nib_at(b + 8 + 16 * s, e)]);
    }
    }
}


__device__ float
dequant_one(const uint8_t *row, uint32_t type, int64_t c)
{
    const uint8_t  *b;
    int             e, q;

    switch (type) {
    case T_F32:
        return ((const float *) row)[c];
    case T_F16:
        return half_at(row + 2 * c);
    case T_BF16:
        return __uint_as_float((unsigned) (row[2 * c] | row[2 * c + 1] << 8)
                               << 16);
    case T_Q4_0:
        b = row + (c / 32) * 18;
        e = (int) (c % 32);
        q = e < 16 ? (b[2 + e] & 0xf) : (b[2 + e - 16] >> 4);
        return half_at(b) * (float) (q - 8);
    case T_Q4_1:
        b = row + (c / 32) * 20;
        e = (int) (c % 32);
        q = e < 16 ? (b[4 + e] & 0xf) : (b[4 + e - 16] >> 4);
        /* _rn: no fused multiply-add, so bits equal the CPU's */
        return __fadd_rn(__fmul_rn(half_at(b), (float) q), half_at(b + 2));
    case T_Q8_0:
        b = row + (c / 32) * 34;
        return half_at(b) * (float) (int8_t) b[2 + c % 32];
    case T_Q4_K: {
        int   k, w, sub, sc, m;

        b = row + (c / 256) * 144;
        e = (int) (c % 256);
        k = e / 64;
        w = e % 64;
        sub = 2 * k + (w >= 32);
        q4k_scale_min(b + 4, sub, &sc, &m);
        q = b[16 + 32 * k + w % 32];
        q = w < 32 ? (q & 0xf) : (q >> 4);
        return __fsub_rn(__fmul_rn(__fmul_rn(half_at(b), (float) sc),
                                   (float) q),
                         __fmul_rn(half_at(b + 2), (float) m));
    }
    case T_Q5_0: case T_Q5_1: case T_IQ4_NL: case T_MXFP4:
    case T_Q2_K: case T_Q3_K: case T_Q5_K: case T_IQ4_XS:
        return dequant_ext_one(row, type, c);
    case T_Q6_K: {
        int             half, g, l, lo;
        const uint8_t  *ql, *qh;

        b = row + (c / 256) * 210;
        e = (int) (c % 256);
        half = e / 128;
        g = (e % 128) / 32;
        l = e % 32;
        ql = b + 64 * half;
        qh = b + 128 + 32 * half;
        lo = ql[l + 32 * (g & 1)];
        lo = g >= 2 ? lo >> 4 : lo & 0xf;
        q = (lo | (((qh[l] >> (2 * g)) & 3) << 4)) - 32;
        return half_at(b + 208) * (float) (int8_t) b[192 + e / 16]
               * (float) q;
    }
    }
    return 0.0f;
}


__global__ void
dequant_kernel(bf16 *out, const uint8_t *src, uint32_t type, int64_t rows,
    int64_t cols, size_t row_stride)
{
    int64_t total = rows * cols;

    for (int64_t idx = blockIdx.x * (int64_t) blockDim.x + threadIdx.x;
         idx < total; idx += (int64_t) gridDim.x * blockDim.x)
    {
        int64_t r = idx / cols, c = idx % cols;

        out[idx] = __float2bfloat16_rn(dequant_one(src + r * row_stride,
                                                   type, c));
    }
}


extern "C" int
llm_cuda_dequant_bf16(llm_cuda_stream st, llm_bf16 *out, const void *src,
    uint32_t type, int64_t rows, int64_t cols, size_t row_stride)
{
    int64_t blk;

    switch (type) {
    case T_F32: case T_F16: case T_BF16: blk = 1; break;
    case T_Q4_0: case T_Q4_1: case T_Q8_0: case T_Q5_0: case T_Q5_1:
    case T_IQ4_NL: case T_MXFP4: blk = 32; break;
    case T_Q2_K: case T_Q3_K: case T_Q4_K: case T_Q5_K: case T_Q6_K:
    case T_IQ4_XS: blk = 256; break;
    default: return -1;
    }
    if (cols % blk != 0) {
        return -1;
    }
    if (rows * cols == 0) {
        return 0;
    }
    dequant_kernel<<<blocks_for((size_t) (rows * cols), 256), 256, 0, st>>>(
        (bf16 *) out, (const uint8_t *) src, type, rows, cols, row_stride);
    return launched();
}


/* ---------------------------------------------------------------------------
 * argmax
 */

__global__ void
argmax_kernel(int32_t *out, const float *logits, int vocab)
{
    __shared__ float  best_v[1024];
    __shared__ int    best_i[1024];
    const float      *x = logits + (size_t) blockIdx.x * vocab;
    float             bv = -INFINITY;
    int               bi = vocab, t = threadIdx.x;

    for (int j = t; j < vocab; j += blockDim.x) {
        if (x[j] > bv || (x[j] == bv && j < bi)) {
            bv = x[j];
            bi = j;
        }
    }
    best_v[t] = bv;
    best_i[t] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) {
            float ov = best_v[t + s];
            int   oi = best_i[t + s];

            if (ov > best_v[t] || (ov == best_v[t] && oi < best_i[t])) {
                best_v[t] = ov;
                best_i[t] = oi;
            }
        }
        __syncthreads();
    }
    if (t == 0) {
        out[blockIdx.x] = best_i[0] < vocab ? best_i[0] : 0;
    }
}


extern "C" int
llm_cuda_argmax(llm_cuda_stream st, int32_t *out, const float *logits, int n,
    int vocab)
{
    if (n <= 0) {
        return 0;
    }
    argmax_kernel<<<n, 1024, 0, st>>>(out, logits, vocab);
    return launched();
}


/* ---------------------------------------------------------------------------
 * sampling (engine/sample/sampler.c on the device; see kernels_cuda.h)
 *
 * Every float operation that sampler.c does in plain C (x86-64 SSE, no
 * FMA contraction) is written with a _rn intrinsic here, because nvcc
 * would otherwise fuse a * b + c into one rounding and change bits.
 */
#define S_BLOCK       256        /* sampler.c BLOCK */
#define S_GROUP       16         /* sampler.c GROUP */
#define S_SMALL       16         /* sampler.c SMALL_RANGE */
#define S_WINDOW      8.0f       /* sampler.c WINDOW_START */
#define S_THREADS     256

typedef struct {
    float    x;
    float    e;
    int32_t  token;
} s_cand;

/* one row's view of its scratch and of what the parallel passes found */
typedef struct {
    const float  *l;         /* (n) edited logits */
    int           n;
    float         max, inv_t, lo;
    const float  *bmass;     /* (n_blocks) mass of each block of 256 */
    const float  *btop;      /* (n_blocks) largest x of the block */
    const float  *gmax;      /* (n / 16 + 1) largest x of each group */
    s_cand       *cand;      /* (n) candidates */
    uint64_t     *rng;       /* (4) xoshiro256** state */
} s_row;


__host__ __device__ static size_t
s_align(size_t b)
{
    return (b + 255) & ~(size_t) 255;
}


/* per-row scratch: block masses, block tops, group maxima, candidates */
static size_t
s_row_bytes(int vocab)
{
    size_t nb = (size_t) vocab / S_BLOCK + 1, ng = (size_t) vocab / S_GROUP + 1;

    return s_align(nb * sizeof(float)) * 2 + s_align(ng * sizeof(float))
           + s_align((size_t) vocab * sizeof(s_cand));
}


extern "C" size_t
llm_cuda_sample_scratch_bytes(int n, int vocab)
{
    return n > 0 && vocab > 0 ? (size_t) n * s_row_bytes(vocab) : 0;
}


/* sampler.c's exp_v for one lane: Cephes expf, x <= 0; 0 below -87 and
 * for NaN */
static __device__ float
s_exp(float x)
{
    float  n, r, r2, p;

    if (!(x >= -87.0f)) {
        return 0.0f;
    }
    n = __fsub_rn(__fadd_rn(__fmul_rn(x, 1.44269504088896341f),
                            12582912.0f), 12582912.0f);
    r = __fsub_rn(x, __fmul_rn(n, 0.693359375f));
    r = __fsub_rn(r, __fmul_rn(n, -2.12194440e-4f));
    r2 = __fmul_rn(r, r);
    p = 1.9875691500e-4f;
    p = __fadd_rn(__fmul_rn(p, r), 1.3981999507e-3f);
    p = __fadd_rn(__fmul_rn(p, r), 8.3334519073e-3f);
    p = __fadd_rn(__fmul_rn(p, r), 4.1665795894e-2f);
    p = __fadd_rn(__fmul_rn(p, r), 1.6666665459e-1f);
    p = __fadd_rn(__fmul_rn(p, r), 5.0000001201e-1f);
    p = __fadd_rn(__fadd_rn(__fmul_rn(p, r2), r), 1.0f);
    return __fmul_rn(p, __int_as_float(((int) n + 127) << 23));
}


/* x of token t: (l - max) / T as sampler.c computes it; -inf past the
 * row (its padding) */
static __device__ __forceinline__ float
s_x(const s_row *r, int t)
{
    return t < r->n ? __fmul_rn(__fsub_rn(r->l[t], r->max), r->inv_t)
                    : -INFINITY;
}


/* exp_block's e for one token: 0 below lo */
static __device__ __forceinline__ float
s_e(float x, float lo)
{
    return x >= lo ? s_exp(x) : 0.0f;
}


/* glibc's expf is within 0.502 ulp: correctly rounded but for rare
 * near-halfway cases; this is correctly rounded but for rarer ones */
static __device__ __forceinline__ float
s_expf(float x)
{
    return (float) exp((double) x);
}


/* --- sampler.c's RNG ---------------------------------------------------- */

static __device__ __forceinline__ uint64_t
s_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}


static __device__ double
s_uniform(uint64_t *st)
{
    uint64_t result = s_rotl(st[1] * 5, 7) * 9, t = st[1] << 17;

    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = s_rotl(st[3], 45);
    return (double) (result >> 11) * 0x1.0p-53;
}


/* --- sampler.c's selection, one thread ------------------------------------ */

static __device__ __forceinline__ int
s_before(const s_cand *a, const s_cand *b)
{
    return a->x > b->x || (a->x == b->x && a->token < b->token);
}


static __device__ __forceinline__ void
s_swap(s_cand *c, size_t i, size_t j)
{
    s_cand t = c[i];

    c[i] = c[j];
    c[j] = t;
}


static __device__ void
s_sort_range(s_cand *c, size_t lo, size_t hi)
{
    for (size_t i = lo + 1; i < hi; i++) {
        for (size_t j = i; j > lo && s_before(&c[j], &c[j - 1]); j--) {
            s_swap(c, j, j - 1);
        }
    }
}


static __device__ size_t
s_partition(s_cand *c, size_t lo, size_t hi)
{
    size_t mid = lo + (hi - lo) / 2, last = hi - 1, store = lo;

    if (s_before(&c[mid], &c[lo])) {
        s_swap(c, mid, lo);
    }
    if (s_before(&c[last], &c[lo])) {
        s_swap(c, last, lo);
    }
    if (s_before(&c[mid], &c[last])) {
        s_swap(c, mid, last);
    }
    for (size_t i = lo; i < last; i++) {
        if (s_before(&c[i], &c[last])) {
            s_swap(c, i, store++);
        }
    }
    s_swap(c, store, last);
    return store;
}


static __device__ size_t
s_select_top_k(s_cand *c, size_t m, size_t k, float *kth_out)
{
    size_t lo = 0, hi = m, p, kept;
    float  kth;

    if (k >= m) {
        return m;
    }
    while (hi - lo > S_SMALL) {
        p = s_partition(c, lo, hi);
        if (p == k - 1 || p == k) {
            lo = hi = p;
            break;
        }
        if (p < k) {
            lo = p + 1;
        } else {
            hi = p;
        }
    }
    s_sort_range(c, lo, hi);
    kth = c[0].x;
    for (size_t i = 0; i < k; i++) {
        kth = c[i].x < kth ? c[i].x : kth;
    }
    kept = k;
    for (size_t i = k; i < m; i++) {
        if (c[i].x == kth) {
            s_swap(c, i, kept++);
        }
    }
    *kth_out = kth;
    return kept;
}


static __device__ size_t
s_select_by_mass(s_cand *c, size_t m, double need)
{
    size_t lo = 0, hi = m, p;
    double acc = 0.0, left;

    while (hi - lo > S_SMALL) {
        p = s_partition(c, lo, hi);
        left = 0.0;
        for (size_t i = lo; i < p; i++) {
            left = __dadd_rn(left, (double) c[i].e);
        }
        if (p == 0 || __dadd_rn(acc, left) < need) {
            acc = __dadd_rn(acc, __dadd_rn(left, (double) c[p].e));
            lo = p + 1;
        } else {
            hi = p;
        }
    }
    s_sort_range(c, lo, hi);
    for (p = lo; p < hi; p++) {
        if (p > 0 && acc >= need) {
            break;
        }
        acc = __dadd_rn(acc, (double) c[p].e);
    }
    return p;
}


/* sampler.c's scan: candidates x >= cut with e > 0, in token order, and
 * the mass of the row */
static __device__ size_t
s_scan(const s_row *r, float cut, double *z_all)
{
    size_t  count = 0;
    double  z = 0.0;

    for (int b = 0; b < r->n; b += S_BLOCK) {
        z = __dadd_rn(z, (double) r->bmass[b / S_BLOCK]);
        if (!(r->btop[b / S_BLOCK] >= cut)) {
            continue;
        }
        for (int j = 0; j < S_BLOCK; j++) {
            float x = s_x(r, b + j), e = s_e(x, r->lo);

            if (x >= cut && e > 0.0f) {
                r->cand[count].x = x;
                r->cand[count].e = e;
                r->cand[count].token = b + j;
                count++;
            }
        }
    }
    *z_all = z;
    return count;
}


static __device__ size_t
s_gather_top_k(const s_row *r, size_t top_k)
{
    float   cut = r->lo > -FLT_MAX ? r->lo : -FLT_MAX;
    size_t  count = 0, limit = 2 * top_k + 1024;

    for (int b = 0; b < r->n; b += S_BLOCK) {
        if (!(r->btop[b / S_BLOCK] >= cut)) {
            continue;
        }
        for (int j = 0; j < S_BLOCK; j++) {
            float x;

            if (!(r->gmax[(b + j) / S_GROUP] >= cut)) {
                j += S_GROUP - 1;
                continue;
            }
            x = s_x(r, b + j);
            if (!(x >= cut)) {
                continue;
            }
            if (count == limit) {
                count = s_select_top_k(r->cand, count, top_k, &cut);
                if (count == limit) {
                    limit *= 2;
                }
                if (!(x >= cut)) {
                    continue;
                }
            }
            r->cand[count].x = x;
            r->cand[count].token = b + j;
            count++;
        }
    }
    count = s_select_top_k(r->cand, count, top_k, &cut);
    for (size_t i = 0; i < count; i++) {
        r->cand[i].e = s_expf(r->cand[i].x);
    }
    return count;
}


static __device__ size_t
s_gather_above(const s_row *r)
{
    size_t count = 0;

    for (int b = 0; b < r->n; b += S_BLOCK) {
        if (!(r->btop[b / S_BLOCK] >= r->lo)) {
            continue;
        }
        for (int j = 0; j < S_BLOCK; j++) {
            float x;

            if (!(r->gmax[(b + j) / S_GROUP] >= r->lo)) {
                j += S_GROUP - 1;
                continue;
            }
            x = s_x(r, b + j);
            if (x >= r->lo) {
                r->cand[count].x = x;
                r->cand[count].e = s_expf(x);
                r->cand[count].token = b + j;
                count++;
            }
        }
    }
    return count;
}


static __device__ size_t
s_gather_top_p(const s_row *r, float top_p, double *z_all)
{
    float   window = S_WINDOW;
    double  z_cand;
    size_t  count;

    for ( ;; ) {
        count = s_scan(r, -window, z_all);
        if (window > 88.0f) {
            return count;
        }
        z_cand = 0.0;
        for (size_t i = 0; i < count; i++) {
            z_cand = __dadd_rn(z_cand, (double) r->cand[i].e);
        }
        if (z_cand >= __dmul_rn((double) top_p, *z_all)) {
            return count;
        }
        window = __fmul_rn(window, 2.0f);
    }
}


/* truncation and the draw: the token, consuming one uniform */
static __device__ int32_t
s_draw(const s_row *r, const llm_cuda_sample_params *p)
{
    double  z = 0.0, z_all = 0.0, target, acc = 0.0;
    size_t  kept, count;
    int     b, last = -1;

    if (p->top_k > 0 || p->top_p < 1.0f || p->min_p > 0.0f) {
        if (p->top_k > 0) {
            count = s_gather_top_k(r, (size_t) p->top_k);
        } else if (p->min_p > 0.0f) {
            count = s_gather_above(r);
        } else {
            count = s_gather_top_p(r, p->top_p, &z_all);
        }
        if (p->top_k > 0 || p->min_p > 0.0f) {
            for (size_t i = 0; i < count; i++) {
                z_all = __dadd_rn(z_all, (double) r->cand[i].e);
            }
        }
        kept = count;
        if (p->top_p < 1.0f) {
            kept = s_select_by_mass(r->cand, kept,
                                    __dmul_rn((double) p->top_p, z_all));
        }
        for (size_t i = 0; i < kept; i++) {
            z = __dadd_rn(z, (double) r->cand[i].e);
        }
        target = __dmul_rn(s_uniform(r->rng), z);
        for (size_t i = 0; i < kept; i++) {
            acc = __dadd_rn(acc, (double) r->cand[i].e);
            if (target < acc) {
                return r->cand[i].token;
            }
        }
        return r->cand[kept - 1].token;
    }

    /* no truncation: the block by its mass, then the token inside */
    for (b = 0; b < r->n; b += S_BLOCK) {
        z = __dadd_rn(z, (double) r->bmass[b / S_BLOCK]);
    }
    target = __dmul_rn(s_uniform(r->rng), z);
    for (b = 0; b < r->n; b += S_BLOCK) {
        if ((double) r->bmass[b / S_BLOCK] > 0.0) {
            last = b;
        }
        if (target < __dadd_rn(acc, (double) r->bmass[b / S_BLOCK])) {
            break;
        }
        acc = __dadd_rn(acc, (double) r->bmass[b / S_BLOCK]);
    }
    b = b < r->n ? b : last;
    last = -1;
    for (int j = 0; j < S_BLOCK; j++) {
        float e = s_e(s_x(r, b + j), r->lo);

        if (e > 0.0f) {
            acc = __dadd_rn(acc, (double) e);
            last = b + j;
            if (target < acc) {
                return b + j;
            }
        }
    }
    return last;
}


/* --- the parallel passes -------------------------------------------------- */

/* sampler.c's penalized(), then the bias before it */
static __device__ float
s_edit(float l, const llm_cuda_token_edit *e, const llm_cuda_sample_params *p,
    int penalties)
{
    if (e->has_bias) {
        l = __fadd_rn(l, e->bias);
    }
    if (penalties && e->seen) {
        if (p->repetition_penalty != 1.0f) {
            l = l > 0.0f ? __fdiv_rn(l, p->repetition_penalty)
                         : __fmul_rn(l, p->repetition_penalty);
        }
        if (e->n_output > 0) {
            l = __fsub_rn(l, __fmul_rn((float) e->n_output,
                                       p->frequency_penalty));
            l = __fsub_rn(l, p->presence_penalty);
        }
    }
    return l;
}


/* exp_block for block b: its mass in sampler.c's lane order (4 lanes,
 * each a running sum of every 4th token, then lanes 0..3 added to 0) */
static __device__ void
s_block_pass(const s_row *r, int b, float *mass, float *top)
{
    float  lane[4] = { 0.0f, 0.0f, 0.0f, 0.0f }, t = -INFINITY, s = 0.0f;

    for (int j = 0; j < S_BLOCK; j++) {
        float x = s_x(r, b * S_BLOCK + j);

        lane[j % 4] = __fadd_rn(lane[j % 4], s_e(x, r->lo));
        t = fmaxf(t, x);
    }
    for (int k = 0; k < 4; k++) {
        s = __fadd_rn(s, lane[k]);
    }
    *mass = s;
    *top = t;
}


static __device__ float
s_block_max(float v, float *red)
{
    __syncthreads();
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        }
        __syncthreads();
    }
    return red[0];
}


__global__ void __launch_bounds__(S_THREADS)
sample_kernel(int32_t *out, float *logits, int vocab,
    const llm_cuda_sample_params *params, const llm_cuda_token_edit *edits,
    uint64_t *rng, char *scratch, size_t row_bytes)
{
    __shared__ float  red[S_THREADS];
    __shared__ int    first;
    const llm_cuda_sample_params  *p = &params[blockIdx.x];
    float             *l = logits + (size_t) blockIdx.x * vocab;
    char              *sc = scratch + (size_t) blockIdx.x * row_bytes;
    size_t             nb = (size_t) vocab / S_BLOCK + 1;
    int                tid = threadIdx.x, penalties, greedy, t;
    float              m = -INFINITY;
    s_row              r;

    penalties = p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f
                || p->frequency_penalty != 0.0f;
    for (int i = tid; i < p->n_edits; i += blockDim.x) {
        const llm_cuda_token_edit *e = &edits[p->edit_off + i];

        l[e->token] = s_edit(l[e->token], e, p, penalties);
    }
    __syncthreads();

    for (t = tid; t < vocab; t += blockDim.x) {
        m = fmaxf(m, l[t]);                 /* NaN is skipped */
    }
    m = s_block_max(m, red);
    greedy = p->temperature < LLM_CUDA_GREEDY_EPS;

    if (greedy) {
        /* sampler.c's argmax: the first index holding the maximum */
        if (tid == 0) {
            first = vocab;
        }
        __syncthreads();
        for (t = tid; t < vocab; t += blockDim.x) {
            if (l[t] == m) {
                atomicMin(&first, t);
                break;
            }
        }
        __syncthreads();
        if (tid == 0) {
            out[blockIdx.x] = m > -INFINITY && first < vocab ? first : -1;
        }
        return;
    }
    if (!isfinite(m)) {
        if (tid == 0) {
            out[blockIdx.x] = -1;           /* rng not consumed */
        }
        return;
    }

    r.l = l;
    r.n = vocab;
    r.max = m;
    r.inv_t = p->inv_t;
    r.lo = p->lo;
    r.bmass = (const float *) sc;
    r.btop = (const float *) (sc + s_align(nb * sizeof(float)));
    r.gmax = (const float *) (sc + 2 * s_align(nb * sizeof(float)));
    r.cand = (s_cand *) (sc + 2 * s_align(nb * sizeof(float))
                         + s_align(((size_t) vocab / S_GROUP + 1)
                                   * sizeof(float)));
    r.rng = rng + 4 * (size_t) blockIdx.x;

    for (int b = tid; b * S_BLOCK < vocab; b += blockDim.x) {
        s_block_pass(&r, b, (float *) &r.bmass[b], (float *) &r.btop[b]);
    }
    for (int g = tid; g * S_GROUP < vocab; g += blockDim.x) {
        float gm = -INFINITY;

        for (int j = 0; j < S_GROUP; j++) {
            gm = fmaxf(gm, s_x(&r, g * S_GROUP + j));
        }
        ((float *) r.gmax)[g] = gm;
    }
    __syncthreads();
    if (tid == 0) {
        out[blockIdx.x] = s_draw(&r, p);
    }
}


extern "C" int
llm_cuda_sample(llm_cuda_stream st, int32_t *out, float *logits, int n,
    int vocab, const llm_cuda_sample_params *params,
    const llm_cuda_token_edit *edits, uint64_t *rng, void *scratch)
{
    if (n <= 0) {
        return 0;
    }
    if (vocab <= 0 || scratch == NULL) {
        return -1;
    }
    sample_kernel<<<n, S_THREADS, 0, st>>>(out, logits, vocab, params, edits,
                                           rng, (char *) scratch,
                                           s_row_bytes(vocab));
    return launched();
}


/* ---------------------------------------------------------------------------
 * the ordered sum of tensor-parallel partials
 */

__global__ void
sum_parts_kernel(float *out, const float *const *parts, int n_parts,
    size_t n)
{
    for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
         i += (size_t) gridDim.x * blockDim.x)
    {
        float acc = parts[0][i];

        for (int p = 1; p < n_parts; p++) {
            acc = __fadd_rn(acc, parts[p][i]);
        }
        out[i] = acc;
    }
}


extern "C" int
llm_cuda_sum_parts(llm_cuda_stream st, float *out, const float *const *parts,
    int n_parts, size_t n)
{
    if (n == 0) {
        return 0;
    }
    if (n_parts < 1) {
        return -1;
    }
    sum_parts_kernel<<<blocks_for(n, 256), 256, 0, st>>>(out, parts, n_parts,
                                                         n);
    return launched();
}


/* ---------------------------------------------------------------------------
 * fills and conversions
 */

__device__ __forceinline__ uint64_t
splitmix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}


__global__ void
fill_uniform_kernel(bf16 *p, size_t n, uint64_t seed, float scale)
{
    for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
         i += (size_t) gridDim.x * blockDim.x)
    {
        uint64_t  h = splitmix64(seed * 0x100000001b3ull + i);
        float     u = (float) (h >> 40) * (1.0f / 16777216.0f);

        p[i] = __float2bfloat16_rn((2.0f * u - 1.0f) * scale);
    }
}


extern "C" int
llm_cuda_fill_uniform(llm_cuda_stream st, llm_bf16 *p, size_t n,
    uint64_t seed, float scale)
{
    if (n == 0) {
        return 0;
    }
    fill_uniform_kernel<<<blocks_for(n, 256), 256, 0, st>>>((bf16 *) p, n,
                                                            seed, scale);
    return launched();
}


__global__ void
fill_const_kernel(float *p, size_t n, float v)
{
    for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
         i += (size_t) gridDim.x * blockDim.x)
    {
        p[i] = v;
    }
}


extern "C" int
llm_cuda_fill_const(llm_cuda_stream st, float *p, size_t n, float v)
{
    if (n == 0) {
        return 0;
    }
    fill_const_kernel<<<blocks_for(n, 256), 256, 0, st>>>(p, n, v);
    return launched();
}


__global__ void
f32_to_bf16_kernel(bf16 *out, const float *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
         i += (size_t) gridDim.x * blockDim.x)
    {
        out[i] = __float2bfloat16_rn(in[i]);
    }
}


extern "C" int
llm_cuda_f32_to_bf16(llm_cuda_stream st, llm_bf16 *out, const float *in,
    size_t n)
{
    if (n == 0) {
        return 0;
    }
    f32_to_bf16_kernel<<<blocks_for(n, 256), 256, 0, st>>>((bf16 *) out, in,
                                                           n);
    return launched();
}


/* ---------------------------------------------------------------------------
 * memory wrappers for C callers
 */

extern "C" int
llm_cuda_device_count(int *n)
{
    *n = 0;
    return (int) cudaGetDeviceCount(n);
}


extern "C" int
llm_cuda_malloc(void **p, size_t bytes)
{
    return (int) cudaMalloc(p, bytes);
}


extern "C" int
llm_cuda_free(void *p)
{
    return (int) cudaFree(p);
}


extern "C" int
llm_cuda_upload(void *dst, const void *host_src, size_t bytes)
{
    return (int) cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice);
}


extern "C" int
llm_cuda_download(void *host_dst, const void *src, size_t bytes)
{
    return (int) cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost);
}


extern "C" int
llm_cuda_sync(void)
{
    return (int) cudaDeviceSynchronize();
}
