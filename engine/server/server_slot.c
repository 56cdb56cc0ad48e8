/*
 * A GENERATE slot's request: the check the engine runs on what a worker
 * wrote before it reaches the scheduler. Apart from server.c so that
 * fuzz/fuzz_slot.c links it alone (with params/), not the whole engine.
 *
 * defines: llm_slot_request
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "params/sampling_ring.h"
#include "ring/ngx_llm_ring.h"
#include "sched/scheduler.h"
#include "server/server_int.h"


/*
 * The request a GENERATE slot asks for. The slot is the worker's memory:
 * every count is read once and checked against the ring's limits before
 * it indexes anything; req points into the slot (prompt, stop ids) and
 * into bias (LLM_RING_MAX_BIAS). Pure, so fuzz/fuzz_slot.c feeds it
 * arbitrary slot images. 0, or -1 with what is wrong in err.
 */
int
llm_slot_request(const llm_slot *sl, uint32_t max_prompt, llm_request *req,
    llm_logit_bias *bias, char *err, size_t errlen)
{
    uint32_t             i, n_prompt, n_stop, n_bias, top_lp, max_tokens;
    uint32_t             ckind, clen, json_ws, strict;
    const llm_sampling  *p = &sl->sampling;

    n_prompt = sl->n_prompt;
    n_stop = p->n_stop_ids;
    n_bias = p->n_bias;
    top_lp = p->top_logprobs;
    max_tokens = p->max_tokens;
    ckind = sl->constraint_kind;
    clen = sl->constraint_len;
    json_ws = sl->json_ws;
    strict = sl->strict;

    if (n_prompt == 0 || n_prompt > max_prompt
        || n_prompt > LLM_RING_MAX_PROMPT
        || n_stop > LLM_RING_MAX_STOP_IDS || n_bias > LLM_RING_MAX_BIAS
        || top_lp > LLM_RING_MAX_TOP_LP || max_tokens > INT32_MAX)
    {
        snprintf(err, errlen, "%u prompt tokens, %u stop ids, %u biases, "
                 "%u top logprobs, max_tokens %u", n_prompt, n_stop, n_bias,
                 top_lp, max_tokens);
        return -1;
    }

    /* the constraint's text shares prompt[] with the ids */
    if (ckind > LLM_CONSTRAINT_REGEX || clen > LLM_CONSTRAINT_MAX_BYTES
        || (uint64_t) n_prompt * sizeof(int32_t) + clen > sizeof(sl->prompt)
        || (ckind == LLM_CONSTRAINT_NONE && clen != 0)
        || (json_ws != LLM_JSON_WS_COMPACT && json_ws != LLM_JSON_WS_FLEXIBLE)
        || strict > 1)
    {
        snprintf(err, errlen, "constraint kind %u of %u bytes after %u "
                 "prompt tokens, json_ws %u, strict %u", ckind, clen,
                 n_prompt, json_ws, strict);
        return -1;
    }

    memset(req, 0, sizeof(*req));
    req->prompt = sl->prompt;
    req->n_prompt = (int) n_prompt;
    llm_sampling_from_ring(p, &req->sampling);
    req->sampling.top_logprobs = (int) top_lp;
    for (i = 0; i < n_bias; i++) {
        bias[i].token = p->bias_ids[i];
        bias[i].bias = p->bias[i];
    }
    req->sampling.logit_bias = bias;
    req->sampling.n_logit_bias = (int) n_bias;
    req->max_tokens = (int) max_tokens;
    req->stop_ids = p->stop_ids;
    req->n_stop_ids = (int) n_stop;
    req->ignore_eos = 1;    /* the worker sends the stop ids it wants */
    req->priority = sl->priority;
    req->constraint_kind = (int) ckind;
    req->constraint = (const char *) (sl->prompt + n_prompt);
    req->constraint_len = clen;
    req->json_ws = (int) json_ws;
    req->strict = (int) strict;
    req->fair_key = sl->fair_key;
    req->speculative = sl->speculative != 0 ? -1 : 0;

    return 0;
}
