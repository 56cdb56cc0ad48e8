/*
 * The continuous batcher: requests in, tokens out, one engine step at a
 * time, independent of nginx and of the ring.
 *
 * Design note (nano-vllm's step, vLLM v1's token-budget scheduling). One
 * call to llm_sched_step() is one iteration:
 *
 *     batch = schedule();     running decodes + prefill chunks
 *     forward(batch);         one llm_backend_forward for all of them
 *     sample(batch);          each sequence's own sampler
 *     publish(batch);         on_token / on_finish callbacks
 *
 * schedule() spends a token budget (max_batched_tokens): first one token
 * for every running sequence that decodes (or the next chunk of one whose
 * prompt is only partly computed), then prefill chunks of waiting
 * sequences, all in queue order, while the budget, max_prefill_tokens and
 * max_num_seqs allow. A long prompt is thereby split over several steps
 * and running decodes continue every step. A new request joins at the
 * next step; a finished or cancelled one leaves at once.
 *
 * Queue order (docs/scheduler.md): class (common/priority.h: a band of 100
 * priority values), then a fair rank (round robin over fair_key within the
 * class), then priority, then arrival. While a class below the batch
 * classes has work, the batch classes give way: they get at most
 * batch_share percent of the tokens the lower classes scheduled in a step.
 *
 * KV memory is paged (block_manager.h). When a running sequence needs a
 * block and none is left, the last running sequence in queue order (the
 * lowest class, newest) is preempted; a waiting one that does not fit
 * preempts running ones of lower classes: its blocks are released (full ones stay in the prefix cache),
 * it goes back to the waiting queue ahead of newer requests, and it is
 * recomputed later from its prompt plus the tokens it already generated.
 * Its sampler is kept, so the tokens that follow are exactly those it would
 * have produced without preemption (greedy and seeded sampling alike; the
 * forward is bit-exact whatever the batch, docs/numerics.md, rule 1).
 *
 * Admission (docs/scheduler.md): llm_sched_add() refuses a request that can never
 * be served (prompt + max_tokens over max_model_len, or more KV blocks than
 * the whole pool) with LLM_SCHED_TOO_LONG and the reason, and one that finds
 * max_queued sequences waiting with LLM_SCHED_QUEUE_FULL. Otherwise it waits.
 *
 * Output constraints (structured outputs, docs/api.md): a request with a
 * constraint waits in the COMPILING state while options.compiler compiles
 * it on its own thread (sched/compile.h; a cached grammar skips that), so
 * the running sequences keep stepping; then it queues as any other, or
 * ends LLM_SEQ_REFUSED with the compiler's message before any token. At
 * each of its tokens the logits of what its grammar forbids are set to
 * -inf (and its stop tokens' while the output could not end there), the
 * token drawn is accepted by its matcher, and it ends STOP when the
 * grammar is complete; max_tokens still ends it LENGTH. It is never
 * sampled on the backend, and preemption keeps its matcher (recompute
 * feeds its tokens again, accepts none).
 *
 * n choices (docs/scheduler.md): a request with n_choices n > 1 is n
 * sequences. Choice 0 runs as any other; the others wait in no queue
 * (FORKING) until choice 0 has computed its prompt. Then, at its first
 * sample, each takes references on the prompt's full blocks, a copy of
 * the partial last one (backend copy_block), a fresh matcher of the same
 * grammar, and samples its first token from the same logits row with its
 * own sampler (seed + i when seeded). Where no batch place, block or
 * copy_block is left, a choice queues instead and computes the prompt
 * itself (the prefix cache shares the full blocks). A choice 0 that ends
 * before its first token ends the waiting choices with it.
 *
 * Backpressure: a sequence whose can_emit(user) says 0 is skipped in that
 * step (it keeps its blocks and is not preempted for it), so a slow client
 * never blocks the engine.
 *
 * Single-threaded: every call must come from the engine's loop thread.
 * Callbacks may call llm_sched_cancel(); they must not call step or add.
 *
 * defines: llm_sched, llm_seq, llm_request, llm_seq_result,
 *          llm_sched_options, llm_sched_stats, llm_sched_options_default,
 *          llm_sched_create, llm_sched_free, llm_sched_add,
 *          llm_sched_cancel, llm_sched_step, llm_sched_has_work,
 *          llm_sched_stats_get
 */
#ifndef NGX_LLM_SCHEDULER_H
#define NGX_LLM_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "common/defaults.h"
#include "sample/sampler.h"
#include "sched/compile.h"

/* LLM_SPEC_MAX_DRAFT, LLM_SPEC_MAX_NGRAM: common/defaults.h */
#define LLM_SPEC_DEFAULT_NGRAM  LLM_DEFAULT_SPEC_NGRAM_SIZE
#define LLM_SPEC_MAX_SEQS       16  /* sequences that speculate in a step
                                       (the draft logit rows it holds) */
#define LLM_SCHED_MAX_CHOICES   128     /* n_choices of one request */

typedef struct llm_sched  llm_sched;
typedef struct llm_seq    llm_seq;

typedef struct {
    const int32_t        *prompt;       /* (n_prompt) token ids, copied */
    int                   n_prompt;     /* >= 1 */
    llm_sampling_params   sampling;     /* copied (logit_bias included) */
    int                   max_tokens;   /* <= 0: up to max_model_len */
    const int32_t        *stop_ids;     /* (n_stop_ids) end the sequence;
                                           copied */
    int                   n_stop_ids;
    int                   ignore_eos;   /* do not stop on options.eos_ids */
    int64_t               priority;     /* lower runs first; 0 default;
                                           class = common/priority.h */
    uint64_t              fair_key;     /* round robin among keys within a
                                           class; 0: no key */
    void                 *user;         /* passed back to every callback */
    int                   constraint_kind;  /* LLM_CONSTRAINT_*: the output
                                               must match it */
    const char           *constraint;   /* (constraint_len) its text,
                                           copied */
    size_t                constraint_len;
    int                   json_ws;      /* LLM_JSON_WS_*: its JSON */
    int                   strict;       /* 1: what the grammar cannot
                                           enforce is refused; 0: relaxed */
    int                   speculative;  /* 0: as options.spec_draft_tokens
                                           says; -1: no speculation */
    int                   n_choices;    /* 0, 1: one; n > 1: n sequences
                                           share the prompt's prefill and
                                           fork before the first token */
    void *const          *choice_users; /* (n_choices - 1) user of choices
                                           1..n-1 (choice 0's is user) */
    llm_seq             **choice_out;   /* (n_choices - 1) their handles,
                                           each valid until its on_finish */
    int                   embed;        /* 1: an embedding (the model's
                                           cfg.pooling): prefill only, no
                                           logits, no prefix-cache lookup;
                                           on_embedding, then on_finish
                                           STOP; max_tokens, sampling,
                                           stops and choices unused */
    int                   embed_dims;   /* 0: the model's dim; else the
                                           first embed_dims (Matryoshka),
                                           1..dim */
    int                   type_split;   /* an embedding on a score model:
                                           prompt[type_split..] are token
                                           type 1 (a cross-encoder's second
                                           segment); 0: all type 0 */
} llm_request;

/* what llm_sched_add answers (the server maps these to the ring's codes) */
typedef enum {
    LLM_SCHED_OK = 0,
    LLM_SCHED_BAD_REQUEST,              /* empty prompt, bad token, params */
    LLM_SCHED_TOO_LONG,                 /* can never fit */
    LLM_SCHED_QUEUE_FULL,               /* max_queued sequences waiting */
    LLM_SCHED_NO_MEMORY,
} llm_sched_rc;

/* why a sequence ended (the server maps these to the ring's reasons) */
typedef enum {
    LLM_SEQ_STOP = 1,                   /* eos or a stop token */
    LLM_SEQ_LENGTH,                     /* max_tokens or max_model_len */
    LLM_SEQ_CANCELLED,                  /* llm_sched_cancel */
    LLM_SEQ_ERROR,                      /* message says why */
    LLM_SEQ_REFUSED,                    /* before its first token: its
                                           constraint does not compile
                                           (message: the compiler's) */
} llm_seq_finish;

/* how a sequence ended, given to on_finish */
typedef struct {
    llm_seq_finish        finish;
    const char           *message;      /* ERROR: why; else "" */
    int32_t               stop_token;   /* STOP: the id that stopped it
                                           (also sent by on_token); else -1 */
    int                   n_prompt;
    int                   n_cached;     /* prompt tokens taken from the prefix
                                           cache when it was first scheduled */
    int                   n_generated;  /* tokens sent by on_token */
    int                   n_preempted;  /* times it was preempted */
    uint64_t              t_arrival_ns;     /* CLOCK_MONOTONIC: add() */
    uint64_t              t_scheduled_ns;   /* first step that ran it; 0 if
                                               never */
    uint64_t              t_first_token_ns; /* 0 if no token */
    uint64_t              t_done_ns;
} llm_seq_result;

typedef struct {
    int              max_num_seqs;        /* running at once; default 64 */
    int              max_batched_tokens;  /* tokens per step; default and
                                             maximum: the backend's
                                             max_batch_tokens */
    int              max_prefill_tokens;  /* prefill tokens (prompt chunks,
                                             recomputes) per step, after the
                                             decodes; 0 (default):
                                             max_batched_tokens */
    int              batch_share;         /* percent: while a class below
                                             LLM_PRIORITY_BATCH's runs, the
                                             classes from it up add at most
                                             this share of that step's
                                             tokens; default 25, 0: paused */
    int              max_model_len;       /* prompt + output; default: the
                                             model's context length */
    int              max_queued;          /* waiting sequences; default 256 */
    int              n_blocks;            /* KV blocks to use; 0: the
                                             backend's whole pool */
    int              prefix_caching;      /* 1 (default): on */
    int              backend_sampling;    /* 1 (default): a backend that
                                             samples where its logits are
                                             (CUDA) draws the tokens of a
                                             step without logprobs */
    const int32_t   *eos_ids;             /* (n_eos_ids) the model's end
                                             tokens, stop unless ignore_eos;
                                             copied */
    int              n_eos_ids;
    llm_compiler    *compiler;            /* compiles constrained requests
                                             (NULL: they are refused);
                                             outlives the scheduler */
    int              n_grammar_vocab;     /* tokens the compiler's vocabulary
                                             has (0: the model's) */
    const int32_t   *grammar_stop_ids;    /* the vocabulary's stop tokens,
                                             which a grammar allows only
                                             where it may end or where it
                                             names them (Harmony's <|call|>);
                                             outlives the scheduler */
    int              n_grammar_stop_ids;
    int              spec_draft_tokens;   /* prompt-lookup speculative
                                             decoding: drafts per step and
                                             sequence, 0 (default): off;
                                             1..LLM_SPEC_MAX_DRAFT */
    int              spec_ngram;          /* the n-gram looked up (n down
                                             to 2); default 3 */

    /* a token for the sequence (lp: NULL unless sampling.logprobs) */
    void           (*on_token)(void *user, int32_t token,
                               const llm_sample_out *lp);
    /* an embedding request's vector (dims floats, normalised as the
       model says), right before its on_finish */
    void           (*on_embedding)(void *user, const float *vec, int dims);
    /* the sequence ended; its llm_seq is freed right after this returns */
    void           (*on_finish)(void *user, const llm_seq_result *r);
    /* (optional) the constraint's grammar is attached, before any token:
       relaxed lists what it relaxed ("" when nothing, llm_grammar_relaxed) */
    void           (*on_constraint)(void *user, const char *relaxed);
    /* (optional, NULL: always 1) 0: the consumer is full, skip this
       sequence in this step */
    int            (*can_emit)(void *user);
    /* (optional, NULL: unlimited) tokens the consumer takes now; a
       speculating sequence verifies at most this many minus one drafts,
       as a step may then send it 1 + drafts tokens */
    int            (*emit_room)(void *user);
    /* (optional) a step of n_tokens is built and its forward begins:
       step_arg, not a sequence's user (the engine's watchdog sign) */
    void           (*on_step)(void *step_arg, int n_tokens);
    void            *step_arg;
} llm_sched_options;

typedef struct {
    int              running;             /* sequences holding a batch place */
    int              waiting;             /* queued (new and preempted) */
    int              kv_blocks_total;
    int              kv_blocks_used;      /* referenced by a sequence */
    int              kv_blocks_cached;    /* in the prefix cache */
    uint64_t         kv_blocks_slid;      /* dropped out of the sliding
                                             window (block_manager.h) */
    uint64_t         requests;            /* admitted */
    uint64_t         finished;            /* ended, any reason */
    uint64_t         prompt_tokens;       /* of admitted requests */
    uint64_t         generation_tokens;   /* sent by on_token */
    uint64_t         prefix_hit_tokens;   /* prompt tokens not recomputed
                                             thanks to the prefix cache */
    uint64_t         computed_tokens;     /* tokens run through forward */
    uint64_t         preemptions;
    uint64_t         cancelled;
    uint64_t         steps;               /* forwards run */
    int              compiling;           /* waiting for their constraint */
    uint64_t         constrained;         /* admitted with a constraint */
    /* the last step that ran: tokens fed, and its batch entries feeding
       prompt (or recomputed) tokens and feeding one generated token */
    int              last_step_tokens;
    int              last_step_prefills;
    int              last_step_decodes;
    /* speculative decoding: verifications run (a sequence's drafts in
       one step), drafts fed, drafts that stood */
    uint64_t         spec_drafts;
    uint64_t         spec_draft_tokens;
    uint64_t         spec_accepted_tokens;
} llm_sched_stats;

/* the defaults above: 0 in a size field means "resolve at create" */
void llm_sched_options_default(llm_sched_options *o);

/* NULL with a message in err (options out of range, out of memory) */
llm_sched *llm_sched_create(llm_backend *be, const llm_sched_options *o,
    char *err, size_t err_len);
/* frees every sequence without callbacks, then the scheduler */
void llm_sched_free(llm_sched *s);

/*
 * Queue a request. Returns LLM_SCHED_OK (0) and *out (the handle for
 * cancel, valid until on_finish returns), or LLM_SCHED_TOO_LONG,
 * LLM_SCHED_QUEUE_FULL, LLM_SCHED_BAD_REQUEST (empty prompt, token outside the
 * vocabulary, invalid sampling parameters) or LLM_SCHED_NO_MEMORY,
 * with the reason in err. No callback is called for a refused request.
 */
int llm_sched_add(llm_sched *s, const llm_request *req, llm_seq **out,
    char *err, size_t err_len);

/*
 * End a sequence: its blocks are freed and on_finish (CANCELLED) is called
 * before this returns, so no token is computed for it again. Called from a
 * callback during a step, it takes effect at the end of that step and no
 * further on_token is sent for it.
 */
void llm_sched_cancel(llm_sched *s, llm_seq *q);

/*
 * One iteration. Returns the number of tokens run through the model (0:
 * nothing runnable: idle, or every sequence held back by can_emit), or -1
 * when the backend failed: the batch's sequences then end with
 * LLM_SEQ_ERROR and the backend's message.
 */
int llm_sched_step(llm_sched *s);

/* 1 while any sequence is waiting or running */
int llm_sched_has_work(const llm_sched *s);

void llm_sched_stats_get(const llm_sched *s, llm_sched_stats *st);

#endif
