/*
 * One sequence as the scheduler tracks it: its tokens, how many of them
 * have their KV computed, its blocks, its sampler and its timings.
 *
 * Design note (nano-vllm's Sequence). tokens[] holds the prompt followed by
 * the generated ids. n_computed counts the leading tokens whose K/V are in
 * the sequence's blocks; the step feeds tokens[n_computed..] (a prefill
 * chunk, or the one last sampled token of a decode) and samples a new token
 * when the fed chunk reaches the end. Preemption sets n_computed back to 0
 * and keeps everything else, so recompute is just a longer prefill.
 *
 * Internal to the scheduler (and its tests); the engine sees llm_seq as an
 * opaque handle.
 *
 * defines: llm_seq_state, llm_seq_cancel, llm_seq
 */
#ifndef NGX_LLM_SEQUENCE_H
#define NGX_LLM_SEQUENCE_H

#include <stdint.h>

#include "grammar/grammar.h"
#include "sched/block_manager.h"
#include "sched/compile.h"
#include "sample/sampler.h"

typedef enum {
    LLM_SEQ_WAITING = 0,        /* in the waiting queue (new or preempted) */
    LLM_SEQ_RUNNING = 1,        /* holds a batch place and blocks */
    LLM_SEQ_COMPILING = 2,      /* its constraint is being compiled
                                   (sched/compile.h); then WAITING */
    LLM_SEQ_FORKING = 3,        /* choice 1.. of a request with n > 1: in
                                   no queue, waits for its parent's prompt
                                   (docs/scheduler.md, "n choices") */
} llm_seq_state;

/* where a sequence stands with llm_sched_cancel */
typedef enum {
    LLM_SEQ_CANCEL_NONE = 0,    /* live: a cancel finishes it */
    LLM_SEQ_CANCEL_PENDING,     /* cancelled during a step: reaped after */
    LLM_SEQ_CANCEL_IGNORED      /* finishing (its on_finish runs): a cancel
                                   now is ignored */
} llm_seq_cancel;

struct llm_seq {
    uint64_t          arrival;      /* admission order, FCFS tie-break */
    int64_t           priority;     /* lower first */
    int64_t           klass;        /* llm_priority_class(priority) */
    uint64_t          fair_key;     /* 0: no key (one key of its own) */
    uint64_t          rank;         /* fair order within the class: start
                                       tag of the key's round robin */
    uint64_t          last_step;    /* the step that last ran it */
    llm_seq_state     state;
    void             *user;

    int32_t          *tokens;       /* (cap) prompt, then generated ids */
    int               n_tokens;
    int               n_prompt;
    int               cap;          /* n_prompt + max_tokens */
    int               n_computed;   /* leading tokens with K/V in blocks */
    int               max_tokens;   /* generated tokens allowed */
    int               spec;         /* drafts a step may verify (0: no
                                       speculation) */
    int               spec_len;     /* drafts the next step proposes: one
                                       past the last run accepted, up to
                                       spec */
    int               n_draft;      /* drafts in this step's batch, at
                                       tokens[n_tokens ..] (cap holds them:
                                       at most max_tokens - 1 left) */

    int32_t          *stop_ids;     /* (n_stop_ids) */
    int               n_stop_ids;
    int               ignore_eos;

    llm_sampler       sampler;      /* kept across preemption */
    llm_compiled     *compiled;     /* the constraint's grammar, or NULL */
    llm_matcher      *matcher;      /* where the output is in it; kept
                                       across preemption (recompute
                                       accepts nothing again) */
    llm_block_table   blocks;

    int               n_cached;     /* prefix-cache hit at first schedule */
    int               n_preempted;
    llm_seq_cancel    cancel;       /* llm_sched_cancel's state */
    int               in_batch;     /* scheduled in the current step */

    llm_seq         **forks;        /* (n_forks) choices 1.. waiting for
                                       this one's first token (FORKING) */
    int               n_forks;
    llm_seq          *parent;       /* FORKING: the choice 0 it forks from */
    int               embed_dims;   /* an embedding: the dims it returns,
                                       else 0 */
    int               type_split;   /* tokens from here are type 1; 0: none
                                       (llm_request's) */
    float            *pool;         /* (dim) an embedding's pooling so far
                                       (model/pool.h), zeroed on preempt */

    uint64_t          t_arrival_ns;
    uint64_t          t_scheduled_ns;
    uint64_t          t_first_token_ns;

    llm_seq          *prev;         /* waiting (or compiling) queue links */
    llm_seq          *next;
};

#endif
