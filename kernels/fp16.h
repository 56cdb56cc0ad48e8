/*
 * IEEE binary16 and bfloat16 bits, and their exact conversions to and
 * from float: below every block format (quant.h and the type families'
 * files use them; nothing here calls them).
 *
 * defines: llm_half, llm_fp16_to_fp32, llm_fp32_to_fp16, llm_bf16_to_fp32
 */
#ifndef NGX_LLM_FP16_H
#define NGX_LLM_FP16_H

#include <stdint.h>

typedef uint16_t llm_half;         /* IEEE binary16 bits */

float llm_fp16_to_fp32(llm_half h);
llm_half llm_fp32_to_fp16(float f);        /* round to nearest even */
float llm_bf16_to_fp32(uint16_t h);

#endif
