/*
 * Sampling parameters: defaults and ranges (params/sampling.h).
 */
#include "params/sampling.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


void
llm_sampling_params_default(llm_sampling_params *p)
{
    memset(p, 0, sizeof(*p));
    p->temperature = 1.0f;      /* OpenAI's default */
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repetition_penalty = 1.0f;
    p->logprobs_mode = LLM_LOGPROBS_RAW;
}


const llm_sampling_range  llm_sampling_ranges[LLM_SAMPLING_N_RANGES] = {
    { "temperature", 0, 0, 2,
      offsetof(llm_sampling_params, temperature), LLM_API_GIVEN_TEMPERATURE },
    { "top_p", 0, 1, 1,
      offsetof(llm_sampling_params, top_p), LLM_API_GIVEN_TOP_P },
    { "min_p", 0, 0, 1,
      offsetof(llm_sampling_params, min_p), LLM_API_GIVEN_MIN_P },
    { "presence_penalty", -2, 0, 2,
      offsetof(llm_sampling_params, presence_penalty),
      LLM_API_GIVEN_PRESENCE_PENALTY },
    { "frequency_penalty", -2, 0, 2,
      offsetof(llm_sampling_params, frequency_penalty),
      LLM_API_GIVEN_FREQUENCY_PENALTY },
    /* vLLM: any value > 0 */
    { "repetition_penalty", 0, 1, HUGE_VAL,
      offsetof(llm_sampling_params, repetition_penalty),
      LLM_API_GIVEN_REPETITION_PENALTY },
};


const llm_sampling_range *
llm_sampling_range_find(const char *name, size_t len)
{
    for (int i = 0; i < LLM_SAMPLING_N_RANGES; i++) {
        if (strlen(llm_sampling_ranges[i].name) == len
            && memcmp(llm_sampling_ranges[i].name, name, len) == 0)
        {
            return &llm_sampling_ranges[i];
        }
    }
    return NULL;
}


int
llm_sampling_in_range(const llm_sampling_range *r, double v)
{
    return isfinite(v) && (r->min_open ? v > r->min : v >= r->min)
           && v <= r->max;
}


int
llm_sampling_check(const llm_sampling_params *p, char *err, size_t len)
{
    for (int i = 0; i < LLM_SAMPLING_N_RANGES; i++) {
        const llm_sampling_range *r = &llm_sampling_ranges[i];
        float v = *(const float *) ((const char *) p + r->offset);

        if (!llm_sampling_in_range(r, v)) {
            if (r->max == HUGE_VAL) {
                snprintf(err, len, "%s must be a finite number %s %g, got %g",
                         r->name, r->min_open ? ">" : ">=", r->min, v);
            } else {
                snprintf(err, len, "%s must be in %c%g, %g], got %g",
                         r->name, r->min_open ? '(' : '[', r->min, r->max, v);
            }
            return -1;
        }
    }
    if (p->top_k < LLM_TOP_K_MIN) {
        snprintf(err, len, "top_k must be -1, 0 (off) or positive, got %d",
                 p->top_k);
        return -1;
    }
    if (p->top_logprobs < 0 || p->top_logprobs > LLM_MAX_TOP_LOGPROBS) {
        snprintf(err, len, "top_logprobs must be in [0, %d], got %d",
                 LLM_MAX_TOP_LOGPROBS, p->top_logprobs);
        return -1;
    }
    if (p->logprobs_mode != LLM_LOGPROBS_RAW
        && p->logprobs_mode != LLM_LOGPROBS_PROCESSED)
    {
        snprintf(err, len, "unknown logprobs mode %d", (int) p->logprobs_mode);
        return -1;
    }
    if (p->n_logit_bias < 0 || (p->n_logit_bias > 0 && !p->logit_bias)) {
        snprintf(err, len, "logit_bias: bad list (%d entries)",
                 p->n_logit_bias);
        return -1;
    }
    return 0;
}
