/*
 * CUDA kernels of the llama forward pass, callable from C.
 *
 * Design note (after llm.c). Every kernel here has a readable CPU
 * reference it is tested against (t/unit/test_cuda.c): the references are
 * the CPU backend's own steps (engine/backend/backend_cpu.c) and kernels/quant.c's
 * dequantizers. Pointers are DEVICE pointers unless named host_*; shapes
 * are row-major. Activations that feed a GEMM are bf16 (the cuBLASLt
 * operands), everything a GEMM writes and the residual stream are fp32,
 * the KV cache is bf16.
 *
 * Paged KV layout on the GPU: the CPU's (engine/model/kv.h), in bf16:
 *
 *   pool: (n_blocks, n_layers, 2 [K, V], block_size, kv_dim) bf16
 *
 * so a block id names all layers' K and V of block_size positions, and the
 * scheduler's block tables mean the same on both backends. Block tables
 * are passed flattened: tables[s * table_stride + j] is sequence s's j-th
 * block.
 *
 * Every launcher returns 0 or a cudaError_t code (the caller reports it
 * with file and line; see llm_cuda_check below); launchers never
 * synchronize.
 *
 * defines: llm_cuda_stream, llm_cuda_attn_tile, llm_cuda_check_at,
 *          llm_cuda_embed, llm_cuda_add_rmsnorm, llm_cuda_rope,
 *          llm_cuda_kv_write, llm_cuda_attention, llm_cuda_silu_mul,
 *          llm_cuda_dequant_bf16, llm_cuda_argmax, llm_cuda_sample_params,
 *          llm_cuda_token_edit, llm_cuda_sample_scratch_bytes,
 *          llm_cuda_sample, llm_cuda_sum_parts, llm_cuda_fill_uniform,
 *          llm_cuda_fill_const, llm_cuda_f32_to_bf16, llm_cuda_malloc,
 *          llm_cuda_free, llm_cuda_upload, llm_cuda_download,
 *          llm_cuda_device_count, llm_cuda_sync
 */
#ifndef NGX_LLM_KERNELS_CUDA_H
#define NGX_LLM_KERNELS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cudaStream_t without the CUDA headers (it is this pointer type) */
typedef struct CUstream_st *llm_cuda_stream;

/* bf16 bits as seen from C */
typedef uint16_t llm_bf16;

/* a tile of attention queries: n_q consecutive batch tokens from `token`
 * on, all of sequence `seq`, each attending to positions 0..pos */
typedef struct {
    int32_t  seq;
    int32_t  token;
    int32_t  n_q;
    int32_t  pad_;
} llm_cuda_attn_tile;

/* largest head_dim / GQA group the attention kernel takes */
#define LLM_CUDA_MAX_HEAD_DIM     128
#define LLM_CUDA_ATTN_MAX_ROWS    16   /* n_q * group per tile */

/* 0, or -1 after printing "<file>:<line>: <what>: <cuda error>" into err
 * (err may be NULL: then to stderr) */
int llm_cuda_check_at(int code, const char *what, const char *file,
    int line, char *err, size_t err_len);
#define llm_cuda_check(code, what, err, len) \
    llm_cuda_check_at((code), (what), __FILE__, __LINE__, (err), (len))

/* x[i] = float(table[tokens[i]]), x (n, dim), table (vocab, dim) */
int llm_cuda_embed(llm_cuda_stream st, float *x, const llm_bf16 *table,
    const int32_t *tokens, int n, int dim);

/*
 * RMSNorm fused with the residual add. For output row i, source row
 * r = rows ? rows[i] : i:
 *     if delta: x[r] += delta[r]         (the residual add, in place)
 *     out[i] = bf16(w * (x[r] * 1/sqrt(mean(x[r]^2) + eps)))
 * x, delta (.., dim) fp32; w (dim) fp32; out (n, dim) bf16.
 */
int llm_cuda_add_rmsnorm(llm_cuda_stream st, llm_bf16 *out, float *x,
    const float *delta, const float *w, const int32_t *rows, int n, int dim,
    float eps);

/*
 * In place on the fused QKV rows (qkv (n, ld), q at column 0, k at
 * n_heads*hd, v at (n_heads + n_kv_heads)*hd): optional bias (qwen2,
 * bias laid out like a qkv row), optional per-head RMSNorm of q and k
 * (qwen3), then RoPE of q and k at pos[i]: the first rope_dim elements of
 * each head rotate as pairs (2j, 2j+1) (GGUF llama, "Meta") or (j,
 * j + rope_dim/2) (neox), by the angle pos * inv_freq[j].
 */
int llm_cuda_rope(llm_cuda_stream st, float *qkv, int ld, const float *bias,
    const float *q_norm, const float *k_norm, const int32_t *pos,
    const float *inv_freq, int n, int n_heads, int n_kv_heads, int head_dim,
    int rope_dim, int neox, float eps);

/* K and V of token i (in the fused qkv rows) into its slot of layer
 * `layer`: block tables[seq[i] * table_stride + pos[i] / block_size],
 * slot pos[i] % block_size */
int llm_cuda_kv_write(llm_cuda_stream st, llm_bf16 *pool, const float *qkv,
    int ld, int q_dim, const int32_t *seq, const int32_t *pos,
    const int32_t *tables, int table_stride, int n, int layer, int n_layers,
    int block_size, int kv_dim);

/*
 * Causal paged attention, flash style (online softmax over chunks of 32
 * positions read through the block table; no score matrix). One CTA per
 * (tile, kv head) computes all n_q * group query heads that share the KV
 * head, so each K/V chunk is read once per tile: decode tiles have n_q 1,
 * prefill tiles up to LLM_CUDA_ATTN_MAX_ROWS / group tokens.
 * q: rows of the fused qkv (n, ld) after RoPE; out (n, n_heads*hd) bf16.
 * head_dim <= LLM_CUDA_MAX_HEAD_DIM.
 */
int llm_cuda_attention(llm_cuda_stream st, llm_bf16 *out, const float *qkv,
    int ld, const llm_bf16 *pool, const llm_cuda_attn_tile *tiles,
    int n_tiles, const int32_t *pos, const int32_t *tables, int table_stride,
    int layer, int n_layers, int block_size, int n_heads, int n_kv_heads,
    int head_dim);

/* out[i][j] = bf16(silu(gu[i][j]) * gu[i][hidden + j]); gu (n, 2*hidden)
 * fp32 (the fused gate|up GEMM), out (n, hidden) */
int llm_cuda_silu_mul(llm_cuda_stream st, llm_bf16 *out, const float *gu,
    int n, int hidden);

/*
 * A GGUF tensor (rows x cols of `type`, rows row_stride bytes apart, as
 * uploaded raw to src) to bf16 out (rows, cols), round to nearest even.
 * Types: every type the CPU loads (tensor_type.h's GGML_TYPES_SUPPORTED:
 * F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K, IQ4_XS; the enum ggml_type
 * values); -1 for others.
 */
int llm_cuda_dequant_bf16(llm_cuda_stream st, llm_bf16 *out,
    const void *src, uint32_t type, int64_t rows, int64_t cols,
    size_t row_stride);

/* out[i] = index of the largest logits[i][*] (first on ties; NaN never
 * wins), logits (n, vocab) */
int llm_cuda_argmax(llm_cuda_stream st, int32_t *out, const float *logits,
    int n, int vocab);

/*
 * Sampling on the device, one row of logits per sequence, with the
 * semantics of engine/sample/sampler.c (docs/sampling.md: bias, repetition /
 * frequency / presence penalties, greedy, temperature, min_p, top_k,
 * top_p, then an inverse-CDF draw with the sequence's xoshiro256** state,
 * one 53-bit uniform per sampled row, none for greedy or failed rows).
 *
 * Design note. A CTA per row does the parallel passes (the edits, the row
 * maximum, greedy's argmax, the probability mass and top x of every block
 * of 256 tokens, the top x of every group of 16), then ONE thread of the
 * CTA runs sampler.c's selection as written: the same gathers in token
 * order with the same candidate-buffer limit, the same quickselect
 * partitions, the same double sums in the same order, the same draw. The
 * exp of the block passes is sampler.c's Cephes polynomial evaluated with
 * the same float operations (no FMA), so masses are bit-identical; the
 * candidates of top_k and min_p take (float) exp((double) x), which
 * equals glibc's expf whenever glibc rounds correctly (its bound is 0.502
 * ulp). A row therefore gives the CPU's token for the same logits and RNG
 * state, except when the draw's target falls within a rounding of a
 * boundary between two tokens (docs/cuda.md).
 *
 * Logprobs are not computed here (the engine samples rows that want them
 * on the CPU).
 */
#define LLM_CUDA_GREEDY_EPS  1e-5f    /* LLM_SAMPLER_GREEDY_EPS */

typedef struct {
    float    temperature;        /* < LLM_CUDA_GREEDY_EPS: argmax */
    float    inv_t;              /* 1.0f / temperature, as the CPU rounds */
    float    lo;                 /* logf(min_p), -INFINITY when min_p 0 */
    float    top_p;              /* (0, 1]; 1: off */
    float    min_p;              /* [0, 1]; 0: off */
    int32_t  top_k;              /* <= 0: off */
    float    presence_penalty;
    float    frequency_penalty;
    float    repetition_penalty; /* 1: off */
    int32_t  n_edits;            /* this row's entries of edits[] */
    int64_t  edit_off;           /* the first of them */
} llm_cuda_sample_params;

/* one token whose logit a row edits: logit_bias, then (when any penalty
 * is on and the token was seen) the penalties; one entry per token */
typedef struct {
    int32_t   token;
    int32_t   has_bias;
    float     bias;
    uint32_t  seen;              /* in the prompt or the output */
    uint32_t  n_output;          /* times generated */
    int32_t   pad_;
} llm_cuda_token_edit;

/* device scratch llm_cuda_sample needs for n rows of vocab */
size_t llm_cuda_sample_scratch_bytes(int n, int vocab);

/*
 * out[i] = the token sampled from row i of logits (n, vocab), or -1 when
 * the row has no finite logit (sampler.c fails the same way). params (n)
 * and edits are device arrays; rng (n, 4) is each row's xoshiro256**
 * state, advanced in place by one draw per sampled (non-greedy) row.
 * logits are edited in place (bias, penalties). scratch: at least
 * llm_cuda_sample_scratch_bytes(n, vocab) bytes.
 */
int llm_cuda_sample(llm_cuda_stream st, int32_t *out, float *logits, int n,
    int vocab, const llm_cuda_sample_params *params,
    const llm_cuda_token_edit *edits, uint64_t *rng, void *scratch);

/* out[i] = ((parts[0][i] + parts[1][i]) + parts[2][i]) + ... for i < n:
 * llm_tp_sum_slices' fixed order (engine/model/tp.h), for tensor parallel
 * ranks that share one device; parts is a device array of n_parts device
 * pointers */
int llm_cuda_sum_parts(llm_cuda_stream st, float *out,
    const float *const *parts, int n_parts, size_t n);

/* synthetic weights: p[i] = bf16(uniform in [-scale, scale)) from a hash
 * of (seed, i); deterministic for a seed */
int llm_cuda_fill_uniform(llm_cuda_stream st, llm_bf16 *p, size_t n,
    uint64_t seed, float scale);
int llm_cuda_fill_const(llm_cuda_stream st, float *p, size_t n, float v);
int llm_cuda_f32_to_bf16(llm_cuda_stream st, llm_bf16 *out, const float *in,
    size_t n);

/* thin wrappers so C code (tests, the CLI) needs no CUDA headers; each
 * returns 0 or the cudaError_t code */
int llm_cuda_device_count(int *n);
int llm_cuda_malloc(void **p, size_t bytes);
int llm_cuda_free(void *p);
int llm_cuda_upload(void *dst, const void *host_src, size_t bytes);
int llm_cuda_download(void *host_dst, const void *src, size_t bytes);
int llm_cuda_sync(void);

#ifdef __cplusplus
}
#endif

#endif
