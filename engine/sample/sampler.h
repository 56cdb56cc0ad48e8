/*
 * Token sampling: turns one row of logits into the next token id of one
 * sequence, with the OpenAI / vLLM request parameters.
 *
 * Order of operations (vLLM v1's sampler; docs/sampling.md explains why):
 *
 *   raw logits --(logprobs, default mode: computed here)
 *     -> logit_bias           l += bias[id]
 *     -> repetition penalty   l > 0 ? l / r : l * r   (prompt + output ids)
 *     -> frequency, presence  l -= count * f + (count > 0) * p  (output ids)
 *     -> greedy if temperature < 1e-5: argmax, lowest id on ties
 *     -> temperature          x = l / T
 *     -> min_p                drop p < min_p * p_max
 *     -> top_k                keep x >= k-th largest x (ties at k kept)
 *     -> top_p                keep the shortest prefix (x desc, id asc)
 *                             whose mass reaches top_p of what is left
 *     -> draw                 inverse CDF with the sequence's own RNG
 *
 * A sampler belongs to one sequence: its RNG (seeded from the request's
 * seed) and its token counts live here, so the same seed and request give
 * the same tokens whatever batch the sequence runs in. Token counts are a
 * small open-addressing hash map sized by the distinct tokens seen, not by
 * the vocabulary (150k vocab x 64 sequences would cost 38 MB dense).
 *
 * defines: llm_sampler_init, llm_sampler_free, llm_sampler_add_prompt,
 *          llm_sampler_accept, llm_sample, llm_sample_draft,
 *          llm_sampler_distribution,
 *          llm_sampler_count, llm_is_stop_token
 */
#ifndef NGX_LLM_SAMPLER_H
#define NGX_LLM_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "params/sampling.h"

typedef struct {
    int32_t          token;
    float            logprob;
} llm_token_logprob;

typedef struct {
    float              logprob;   /* of the chosen token */
    int                n_top;     /* entries filled in top[] */
    llm_token_logprob  top[LLM_MAX_TOP_LOGPROBS]; /* logprob desc, id asc */
} llm_sample_out;

/* a token near the top of the distribution, gathered for truncation */
typedef struct {
    float            x;           /* (l' - max l') / T, <= 0 */
    float            e;           /* exp(x): unnormalized probability */
    int32_t          token;
} llm_candidate;

/* occurrence counts of one token in this sequence */
typedef struct {
    int32_t          token;       /* -1: empty slot */
    uint32_t         n_output;    /* times generated */
    uint32_t         in_prompt;   /* 1 if it occurs in the prompt */
} llm_token_count;

typedef struct {
    llm_sampling_params  params;  /* params.logit_bias points at bias */
    int                  n_vocab;
    uint64_t             seed;    /* the seed used (drawn if none given) */
    uint64_t             rng[4];  /* xoshiro256** state */

    llm_logit_bias      *bias;    /* (n_bias) sorted by token, merged */
    int                  n_bias;

    llm_token_count     *counts;  /* (counts_cap) open addressing */
    uint32_t             counts_cap;     /* power of two */
    uint32_t             counts_used;

    /* scratch, reused across calls */
    llm_candidate       *cand;    /* (cand_cap) */
    size_t               cand_cap;
    double              *blocks;  /* (n_vocab / 256 + 1) probability mass
                                     of each block of 256 tokens */
    llm_logit_bias      *undo;    /* (undo_cap) original logits edited */
    size_t               undo_cap;
    size_t               n_undo;

    char                 err[160];
} llm_sampler;

/*
 * Validates params against the vocabulary and sets the sampler up.
 * Returns 0, or -1 with a message in err (also kept in s->err).
 */
int llm_sampler_init(llm_sampler *s, const llm_sampling_params *p,
    int n_vocab, char *err, size_t err_len);
void llm_sampler_free(llm_sampler *s);

/* prompt tokens: they count for the repetition penalty only */
int llm_sampler_add_prompt(llm_sampler *s, const int32_t *ids, int n);

/* an output token that was not drawn by llm_sample (e.g. restored state);
   llm_sample records its own choice, do not accept it again */
int llm_sampler_accept(llm_sampler *s, int32_t id);

/*
 * Chooses the next token from logits (n_vocab floats), records it as an
 * output token and, when params.logprobs is set and out is not NULL, fills
 * out. logits are edited during the call and restored before it returns.
 * Returns the token id, or -1 (message in s->err) when n_vocab differs from
 * init's or no logit is a finite number.
 */
int llm_sample(llm_sampler *s, float *logits, int n_vocab,
    llm_sample_out *out);

/*
 * llm_sample at a position where a speculative draft proposed `draft`:
 * greedy picks the argmax as llm_sample does (the caller compares it with
 * the draft); sampled accepts draft with probability p(draft) under the
 * processed distribution p, else draws from p without draft, renormalised
 * (speculative sampling for a point-mass draft: the token is distributed
 * as llm_sample's). The token is recorded and returned, logprobs as
 * llm_sample's; -1 as llm_sample, or when draft is outside the vocabulary.
 */
int llm_sample_draft(llm_sampler *s, float *logits, int n_vocab,
    int32_t draft, llm_sample_out *out);

/*
 * The distribution llm_sample would draw from now, without drawing or
 * recording anything: probs gets n_vocab values, 0 for dropped tokens
 * (greedy: 1 on the argmax). Returns the number of tokens kept, or -1.
 */
int llm_sampler_distribution(llm_sampler *s, float *logits, int n_vocab,
    float *probs);

/* how often id was generated so far (0 if never) */
uint32_t llm_sampler_count(const llm_sampler *s, int32_t id);

/* 1 if id is one of the n_stop ids in stop_ids */
int llm_is_stop_token(int32_t id, const int32_t *stop_ids, int n_stop);

#endif /* NGX_LLM_SAMPLER_H */
