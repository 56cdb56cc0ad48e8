/*
 * The weight quantizer: a GGUF file rewritten with its matrices in another
 * type, llama.cpp's `llama-quantize` for the llama-shaped models we serve.
 *
 * Design note. A file type (Q4_K_M, Q8_0, ...) names a default type and,
 * for the K-quant mixes, llama.cpp's rules (llama-quant.cpp,
 * llama_tensor_get_type) that give some tensors more bits: the output
 * (or the tied embedding) Q6_K, half-or-so of attn_v and ffn_down (the
 * first and last eighths and every third between) Q6_K in Q4_K_M, and so
 * on. A matrix whose rows do not fit the chosen type's 256-element
 * super-blocks falls back as llama.cpp's does (Q4_K -> Q5_0, Q5_K ->
 * Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K/IQ4_XS -> IQ4_NL; a row that fits no
 * block stays F16). Norms and 1-D tensors are copied. Any input type we
 * load is requantized (llama.cpp's --allow-requantize): through floats
 * (llm_dequant_row) into our quantizers (kernels/quant.h). Metadata is
 * copied with general.file_type and general.quantization_version set.
 *
 * Not taken from llama.cpp: importance matrices, its 70B-only and
 * mixture-of-experts rules, and its quantizers' search (ours fit each
 * sub-block's scale directly: kernels/quant_k.c); the mix is the same,
 * the blocks' values are not.
 *
 * defines: llm_quantize_file, llm_quantize_tensor_type, llm_quant_ftype
 */
#ifndef NGX_LLM_QUANTIZE_H
#define NGX_LLM_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* a llama.cpp file type (llama.h's LLAMA_FTYPE_MOSTLY_*) by its name */
typedef struct {
    const char  *name;          /* "Q4_K_M" */
    uint32_t     ftype;         /* its number in general.file_type */
    uint32_t     type;          /* the default tensor type */
} llm_quant_ftype;

/* the file type of name (case-insensitive), NULL if not one we make */
const llm_quant_ftype *llm_quant_ftype_find(const char *name);
/* "Q4_0, Q4_1, ..." for messages */
const char *llm_quant_ftype_list(void);

/* what a file type gives one tensor: name and shape (ne[0] = row length),
 * the model's layer count and grouped-query ratio n_head / n_head_kv, and
 * whether the file has an output.weight of its own; returns the type, or
 * the tensor's own when it is not to be quantized */
uint32_t llm_quantize_tensor_type(const llm_quant_ftype *ft, const char *name,
    uint32_t n_dims, const uint64_t *ne, uint32_t cur_type, int n_layer,
    int n_gqa, int has_output);

/* in -> out as file type ft; a line per tensor to log (may be NULL);
 * 0, or -1 with err set (out is then removed) */
int llm_quantize_file(const char *in, const char *out,
    const llm_quant_ftype *ft, FILE *log, char *err, size_t err_len);

#endif
