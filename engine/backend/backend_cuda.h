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
 *          llm_backend_cuda_forward_greedy, llm_backend_cuda_forward_sample,
 *          llm_cuda_sampler_export, llm_cuda_sampler_edits_needed,
 *          llm_backend_cuda_weight_bytes, llm_backend_cuda_set_graphs
 */
#ifndef NGX_LLM_BACKEND_CUDA_H
#define NGX_LLM_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "kernels_cuda.h"
#include "sample/sampler.h"

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

/*
 * forward, then each requested logit row i drawn on the device with
 * samplers[i] (engine/sample/sampler.c's rules and RNG; kernels_cuda.h): ids
 * (n_logits) get the tokens, and every sampler's RNG and counts advance
 * exactly as llm_sample would advance them, so a sequence may switch
 * between CPU and GPU sampling between steps. Samplers that want
 * logprobs are refused (sample those on the CPU from forward's logits).
 * b->logits is not written. 0, or -1 with be->err set.
 */
int llm_backend_cuda_forward_sample(llm_backend *be, const llm_batch *b,
    llm_sampler *const *samplers, int32_t *ids);

/* a CPU sampler's state as one device row: p (edit_off left 0 for the
 * caller to set) and its bias and penalty edits, one per token, into
 * edits; returns the number written, or -1 when more than max_edits
 * (llm_cuda_sampler_edits_needed) are needed */
int llm_cuda_sampler_export(const llm_sampler *s, llm_cuda_sample_params *p,
    llm_cuda_token_edit *edits, int max_edits);
int llm_cuda_sampler_edits_needed(const llm_sampler *s);

/* bytes of weights one decode step reads (every matrix once, one
 * embedding row): the roofline's numerator */
uint64_t llm_backend_cuda_weight_bytes(const llm_backend *be);

/* 1 (default): decode batches replay CUDA graphs; 0: plain launches */
void llm_backend_cuda_set_graphs(llm_backend *be, int on);

#ifdef __cplusplus
}
#endif

#endif
