/*
 * Sampling parameters: the struct a request fills and the sampler reads,
 * what a request that sets nothing gets, and the range of every field.
 * One home for the worker (the request parser, the llm_sampling
 * directive) and the engine (the sampler checks what reaches it).
 *
 * defines: llm_sampling_params_default, llm_sampling_ranges,
 *          llm_sampling_range_find, llm_sampling_check
 */
#ifndef NGX_LLM_SAMPLING_H
#define NGX_LLM_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

#define LLM_SAMPLER_GREEDY_EPS   1e-5f  /* temperature below this: argmax */
#define LLM_MAX_TOP_LOGPROBS     20     /* OpenAI's limit for top_logprobs */
#define LLM_LOGIT_BIAS_MAX       100.0f /* OpenAI's range: [-100, 100] */

typedef struct {
    int32_t          token;
    float            bias;
} llm_logit_bias;

typedef enum {
    /* log_softmax of the model's logits as they came in: vLLM's default
       (logprobs_mode=raw_logprobs) and OpenAI's meaning */
    LLM_LOGPROBS_RAW = 0,
    /* log of the distribution actually sampled from: after bias,
       penalties, temperature and truncation; dropped tokens are -inf
       (vLLM's processed_logprobs) */
    LLM_LOGPROBS_PROCESSED = 1,
} llm_logprobs_mode;

typedef struct {
    float                  temperature;        /* >= 0; < 1e-5: greedy */
    int                    top_k;              /* <= 0: off */
    float                  top_p;              /* (0, 1]; 1: off */
    float                  min_p;              /* [0, 1]; 0: off */
    uint64_t               seed;
    int                    has_seed;           /* 0: seed from getrandom() */
    float                  presence_penalty;   /* [-2, 2] */
    float                  frequency_penalty;  /* [-2, 2] */
    float                  repetition_penalty; /* > 0; 1: off */
    const llm_logit_bias  *logit_bias;         /* copied by init */
    int                    n_logit_bias;
    int                    logprobs;           /* 1: fill llm_sample_out */
    int                    top_logprobs;       /* 0..20 */
    llm_logprobs_mode      logprobs_mode;
} llm_sampling_params;

/* what llm_sampling_params means when a request sets nothing */
void llm_sampling_params_default(llm_sampling_params *p);

/* which sampling fields a request set (llm_api_request.given) */
#define LLM_API_GIVEN_TEMPERATURE         0x0001u
#define LLM_API_GIVEN_TOP_P               0x0002u
#define LLM_API_GIVEN_TOP_K               0x0004u
#define LLM_API_GIVEN_MIN_P               0x0008u
#define LLM_API_GIVEN_PRESENCE_PENALTY    0x0010u
#define LLM_API_GIVEN_FREQUENCY_PENALTY   0x0020u
#define LLM_API_GIVEN_REPETITION_PENALTY  0x0040u

/* a float field and its OpenAI / vLLM range: [min, max], (min, max] when
   min_open; max HUGE_VAL: no upper bound */
typedef struct {
    const char  *name;
    double       min;
    int          min_open;
    double       max;
    size_t       offset;        /* of the float in llm_sampling_params */
    unsigned     given;         /* LLM_API_GIVEN_* */
} llm_sampling_range;

#define LLM_SAMPLING_N_RANGES  6
extern const llm_sampling_range  llm_sampling_ranges[LLM_SAMPLING_N_RANGES];

/* top_k: -1 and 0 both mean off (vLLM uses -1) */
#define LLM_TOP_K_MIN  -1

/* the range named name (len bytes), or NULL */
const llm_sampling_range *llm_sampling_range_find(const char *name,
    size_t len);

/* 1 when v is inside r */
int llm_sampling_in_range(const llm_sampling_range *r, double v);

/* 0 when every field is in its range, else -1 and a message naming the
   first field that is not */
int llm_sampling_check(const llm_sampling_params *p, char *err, size_t len);


#endif
