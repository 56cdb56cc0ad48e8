/*
 * The ring slot's copy of the sampling parameters (ring/ngx_llm_ring.h),
 * one function each way: the worker writes a slot, the engine reads it.
 * logit_bias, stop ids and max_tokens are the caller's.
 *
 * defines: llm_sampling_to_ring, llm_sampling_from_ring
 */
#ifndef NGX_LLM_SAMPLING_RING_H
#define NGX_LLM_SAMPLING_RING_H

#include "ring/ngx_llm_ring.h"
#include "params/sampling.h"

void llm_sampling_to_ring(const llm_sampling_params *s, llm_sampling *p);
void llm_sampling_from_ring(const llm_sampling *p, llm_sampling_params *s);

#endif
