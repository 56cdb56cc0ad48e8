/*
 * libFuzzer harness for the engine's reading of a ring slot: the bytes
 * are the image of a GENERATE slot as a worker (or a bug in one) wrote it,
 * given to llm_slot_request() (engine/server/server_slot.c), the check the
 * engine runs before a slot's request reaches the scheduler. The slot is
 * allocated at its exact size, so a read past it is an ASan report.
 *
 *   build/fuzz/fuzz_slot fuzz/corpus/slot
 *
 * Beyond "no crash": a request it accepts has every count inside the
 * ring's limits, a prompt of 1..max_prompt tokens, max_tokens >= 0, and
 * sampling parameters the sampler's own check answers (either way) without
 * a fault; every prompt and stop id is read, and every byte of the output
 * constraint, whose text must lie inside the slot's prompt[], with a
 * json_ws and strict the compiler knows.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "params/sampling.h"
#include "ring/ngx_llm_ring.h"
#include "sched/scheduler.h"
#include "server/server_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int              i;
    char             err[256];
    int64_t          sum;
    uint32_t         max_prompt;
    llm_slot        *sl;
    llm_request      req;
    llm_logit_bias   bias[LLM_RING_MAX_BIAS];

    if (size < 4) {
        return 0;
    }
    /* the ring's limit, as the engine set it: 1..LLM_RING_MAX_PROMPT */
    memcpy(&max_prompt, data, 4);
    max_prompt = max_prompt % LLM_RING_MAX_PROMPT + 1;
    data += 4;
    size -= 4;

    sl = calloc(1, sizeof(llm_slot));
    memcpy(sl, data, size < sizeof(llm_slot) ? size : sizeof(llm_slot));

    err[0] = '\0';
    if (llm_slot_request(sl, max_prompt, &req, bias, err, sizeof(err)) != 0) {
        if (err[0] == '\0') {
            abort();
        }
        free(sl);
        return 0;
    }

    if (req.n_prompt < 1 || (uint32_t) req.n_prompt > max_prompt
        || req.n_stop_ids < 0 || req.n_stop_ids > LLM_RING_MAX_STOP_IDS
        || req.sampling.n_logit_bias < 0
        || req.sampling.n_logit_bias > LLM_RING_MAX_BIAS
        || req.sampling.top_logprobs < 0
        || req.sampling.top_logprobs > LLM_RING_MAX_TOP_LP
        || req.max_tokens < 0 || req.prompt != sl->prompt
        || req.constraint_kind < LLM_CONSTRAINT_NONE
        || req.constraint_kind > LLM_CONSTRAINT_REGEX
        || req.constraint_len > LLM_CONSTRAINT_MAX_BYTES
        || req.constraint + req.constraint_len
           > (const char *) sl->prompt + sizeof(sl->prompt)
        || (req.json_ws != LLM_JSON_WS_COMPACT
            && req.json_ws != LLM_JSON_WS_FLEXIBLE)
        || (req.strict != 0 && req.strict != 1))
    {
        abort();
    }
    sum = 0;
    for (i = 0; i < req.n_prompt; i++) {
        sum += req.prompt[i];
    }
    for (i = 0; i < req.n_stop_ids; i++) {
        sum += req.stop_ids[i];
    }
    for (i = 0; i < req.sampling.n_logit_bias; i++) {
        sum += req.sampling.logit_bias[i].token;
    }
    for (i = 0; i < (int) req.constraint_len; i++) {
        sum += req.constraint[i];
    }
    (void) llm_sampling_check(&req.sampling, err, sizeof(err));

    free(sl);
    return sum == INT64_MIN;    /* keeps the reads */
}
