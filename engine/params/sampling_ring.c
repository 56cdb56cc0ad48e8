/*
 * The ring slot's copy of the sampling parameters (params/sampling_ring.h).
 */
#include "params/sampling_ring.h"

#include <string.h>


void
llm_sampling_to_ring(const llm_sampling_params *s, llm_sampling *p)
{
    memset(p, 0, sizeof(*p));
    p->temperature = s->temperature;
    p->top_p = s->top_p;
    p->top_k = s->top_k;
    p->min_p = s->min_p;
    p->presence_penalty = s->presence_penalty;
    p->frequency_penalty = s->frequency_penalty;
    p->repetition_penalty = s->repetition_penalty;
    p->seed = s->seed;
    p->has_seed = s->has_seed;
    p->logprobs = s->logprobs;
    p->top_logprobs = s->top_logprobs;
}


void
llm_sampling_from_ring(const llm_sampling *p, llm_sampling_params *s)
{
    llm_sampling_params_default(s);
    s->temperature = p->temperature;
    s->top_k = p->top_k;
    s->top_p = p->top_p;
    s->min_p = p->min_p;
    s->seed = p->seed;
    s->has_seed = p->has_seed != 0;
    s->presence_penalty = p->presence_penalty;
    s->frequency_penalty = p->frequency_penalty;
    s->repetition_penalty = p->repetition_penalty;
    s->logprobs = p->logprobs != 0;
    s->top_logprobs = (int) p->top_logprobs;
}
