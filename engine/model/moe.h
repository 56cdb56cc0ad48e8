/*
 * Mixture of experts (qwen3moe): the loader's half. A MoE layer replaces
 * the dense FFN by a router (ffn_gate_inp, (n_expert, dim)) and n_expert
 * SwiGLU experts of expert_ff. Each expert is a plain 2-D llm_tensor view,
 * so the kernels, packing and every quantized type apply to it unchanged:
 *   GGUF (llama.cpp): ffn_{gate,up,down}_exps.weight, 3-D ggml shape
 *     (cols, rows, n_expert); expert e is the view at e * rows row
 *     strides (each expert's rows are contiguous, whole blocks);
 *   HF: mlp.experts.E.{gate,up,down}_proj.weight, one 2-D tensor each,
 *     renamed blk.L.ffn_{gate,up,down}_exps.E.weight by the loader.
 * The forward (routing, grouping by expert) is backend/moe_cpu.c.
 *
 * defines: llm_moe_find_fn, llm_moe_arch, llm_moe_gguf_config,
 *          llm_moe_hf_config, llm_moe_hf_name, llm_moe_load_layer,
 *          llm_moe_weight_bytes
 */
#ifndef NGX_LLM_MOE_H
#define NGX_LLM_MOE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "model/model.h"

/* 1 if arch (GGUF "qwen3moe", "gpt-oss"; HF "qwen3_moe", "gpt_oss") is a
 * MoE architecture */
int llm_moe_arch(const char *arch);
/* expert_count, expert_used_count, expert_feed_forward_length and
 * expert_weights_norm (default 1, as llama.cpp's qwen3moe graph) */
int llm_moe_gguf_config(llm_model *m);
/* num_experts (num_local_experts in transformers 5), num_experts_per_tok,
 * moe_intermediate_size (gpt-oss: intermediate_size), norm_topk_prob;
 * every layer sparse */
int llm_moe_hf_config(llm_model *m, const cJSON *root);
/* rest: a HF layer tensor name after "model.layers.L."; 0 and out set to
 * the GGUF name for the router and per-expert tensors, -1 otherwise */
int llm_moe_hf_name(const llm_model *m, long layer, const char *rest,
    char *out, size_t len);
/* the loader's tensor lookup by GGUF name, either format; NULL if absent */
typedef const gguf_tensor *(*llm_moe_find_fn)(const llm_model *m,
    const char *name);
/* layer i's router and expert views into m->layers[i]; 0 or -1 with
 * m->err set */
int llm_moe_load_layer(llm_model *m, int i, llm_moe_find_fn find);
/* the bytes one token reads from a MoE layer: router + n_expert_used
 * experts (the experts are assumed equally sized) */
uint64_t llm_moe_weight_bytes(const llm_model *m, int layer);

#endif
