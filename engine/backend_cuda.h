/*
 * CUDA backend: the llm_backend interface (backend.h) on one NVIDIA GPU.
 *
 * Design note. Weights are dequantized to bf16 on the device at create
 * (GGUF blocks uploaded raw, expanded by llm_cuda_dequant_bf16); the
 * projections sharing an input are fused into one matrix (wq|wk|wv,
 * gate|up) so a layer is four cuBLASLt GEMMs (bf16 operands, fp32
 * accumulation and output) and seven small kernels (kernels/kernels.cu).
 * The KV pool is bf16 in the CPU's block layout (kv.h), so block ids and
 * tables mean the same on both backends. Decode-only batches of up to 256
 * sequences replay a CUDA graph captured per batch-size bucket.
 *
 * Numerics: bf16 weights, activations and KV; fp32 residual stream,
 * norms, softmax and GEMM accumulation. Results are not bit-identical to
 * the CPU backend; docs/cuda.md states the tolerances the tests use.
 *
 * defines: llm_backend_cuda_create, llm_backend_cuda_create_synthetic,
 *          llm_backend_cuda_forward_greedy, llm_backend_cuda_weight_bytes,
 *          llm_backend_cuda_set_graphs
 */
#ifndef NGX_LLM_BACKEND_CUDA_H
#define NGX_LLM_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A backend for model m (tp_size 1). o->kv_n_blocks > 0 is taken as is
 * (and must fit); 0 sizes the pool from LLM_KV_CACHE_RATIO (environment,
 * default 0.90) of the device memory free after weights and activations.
 * The memory plan goes to stderr. NULL with a message in err.
 */
llm_backend *llm_backend_cuda_create(const llm_model *m,
    const llm_backend_options *o, char *err, size_t err_len);

/*
 * A model of shape cfg with random bf16 weights made on the device (no
 * file, nothing on the host): for benchmarks. Weights are uniform in
 * +-1/sqrt(fan_in), norms 1; the same seed gives the same weights.
 */
llm_backend *llm_backend_cuda_create_synthetic(const llm_config *cfg,
    const llm_backend_options *o, uint64_t seed, char *err, size_t err_len);

/* forward, then the argmax of each requested logit row on the device:
 * ids (n_logits), b->logits is not written (may be NULL) */
int llm_backend_cuda_forward_greedy(llm_backend *be, const llm_batch *b,
    int32_t *ids);

/* bytes of weights one decode step reads (every matrix once, one
 * embedding row): the roofline's numerator */
uint64_t llm_backend_cuda_weight_bytes(const llm_backend *be);

/* 1 (default): decode batches replay CUDA graphs; 0: plain launches */
void llm_backend_cuda_set_graphs(llm_backend *be, int on);

#ifdef __cplusplus
}
#endif

#endif
