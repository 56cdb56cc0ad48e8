/*
 * gpt-oss (OpenAI's 20b and 120b): the loader's half. What differs from
 * a qwen3moe-shaped MoE model (moe.h), and where it is read from:
 *
 *   attention: q/k/v/o biases; a learned sink logit per head
 *     (HF self_attn.sinks, GGUF blk.N.attn_sinks.weight);
 *   layers: sliding window (128) on even layers, full on odd ones
 *     (HF layer_types, GGUF attention.sliding_window_pattern, default 2);
 *   the FFN norm is named post_attention_norm in GGUF (llama.cpp);
 *   router: HF mlp.router.{weight,bias}, GGUF ffn_gate_inp.{weight,bias};
 *   experts: MXFP4. HF stores them as the published checkpoint does:
 *     mlp.experts.gate_up_proj_blocks (E, 2ff, dim/32, 16) uint8 and
 *     _scales (E, 2ff, dim/32), rows interleaved gate, up, gate, up, ...
 *     (gate = [..., ::2], up = [..., 1::2]), each byte two FP4 codes
 *     (low nibble first); down_proj_blocks (E, dim, ff/32, 16) and
 *     _scales; biases gate_up_proj_bias (E, 2ff), down_proj_bias (E, dim).
 *     The loader repacks them once into ggml's MXFP4 blocks (scale byte,
 *     then 16 bytes whose low nibbles are elements 0..15 and high ones
 *     16..31: the same scale byte and codes, so the same values), split
 *     into gate and up, as 3-D tensors under llama.cpp's GGUF names
 *     (ffn_{gate,up,down}_exps.weight, ffn_{gate,up,down}_exps.bias);
 *     from there GGUF and HF share moe.c's expert views. Unquantized
 *     (bf16) expert tensors are refused by name.
 *
 * defines: llm_gpt_oss_arch, llm_gpt_oss_hf_config, llm_gpt_oss_hf_name,
 *          llm_gpt_oss_hf_experts, llm_gpt_oss_load_layer,
 *          LLM_GPT_OSS_HF_RAW, LLM_GPT_OSS_EXTRA_TENSORS
 */
#ifndef NGX_LLM_GPT_OSS_H
#define NGX_LLM_GPT_OSS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "model/moe.h"

/* llm_gpt_oss_hf_name's answer for a tensor kept raw (any dims, U8) until
 * llm_gpt_oss_hf_experts repacks it */
#define LLM_GPT_OSS_HF_RAW         2
/* tensors llm_gpt_oss_hf_experts adds per layer */
#define LLM_GPT_OSS_EXTRA_TENSORS  6

/* 1 if arch is GGUF "gpt-oss" or HF "gpt_oss" */
int llm_gpt_oss_arch(const char *arch);
/* config.json's gpt-oss keys after the common ones: layer_types (sliding
 * then full, alternating), swiglu_limit 7 and swiglu_alpha 1.702 (the
 * kernel's constants), quantization_config mxfp4 if any; 0 or -1 */
int llm_gpt_oss_hf_config(llm_model *m, const cJSON *root);
/* rest: a HF layer tensor name after "model.layers.L."; 0 and out set to
 * its GGUF name, LLM_GPT_OSS_HF_RAW and out set to an internal name, -1
 * with m->err set for bf16 experts, -2 if not a gpt-oss-only name */
int llm_gpt_oss_hf_name(llm_model *m, long layer, const char *rest,
    char *out, size_t len);
/* the raw expert tensors of every layer into ggml MXFP4 expert tensors
 * and F32 biases, appended to m->hf_tensors (room for
 * LLM_GPT_OSS_EXTRA_TENSORS per layer); 0 or -1 with m->err set */
int llm_gpt_oss_hf_experts(llm_model *m, llm_moe_find_fn find);
/* layer i's sinks, output bias, router and expert biases */
int llm_gpt_oss_load_layer(llm_model *m, int i, llm_moe_find_fn find);

#endif
