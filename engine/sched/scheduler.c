/*
 * The continuous batcher. scheduler.h explains the policy; sequence.h the
 * per-sequence state; block_manager.h the KV blocks and the prefix cache.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/scheduler.h"
#include "sched/sequence.h"
#include "common/constraint.h"
#include "common/defaults.h"
#include "common/priority.h"
#include "model/pool.h"
#include "model/score.h"


struct llm_sched {
    llm_backend         *be;
    llm_sched_options    opt;          /* resolved; eos_ids points at eos */
    int32_t             *eos;          /* (opt.n_eos_ids) */
    int                  n_vocab;
    llm_block_manager    bm;

    llm_seq             *wait_head;    /* sorted by seq_before() */
    llm_seq             *wait_tail;
    int                  n_waiting;
    llm_seq            **running;      /* (max_num_seqs) sorted likewise */
    int                  n_running;
    uint64_t             next_arrival;
    llm_seq             *compiling;    /* waiting for their constraint */
    int                  n_compiling;
    uint32_t            *mask;         /* (mask_words) of the constrained
                                          sequence being sampled */
    int                  mask_words;
    int                  in_step;      /* cancel defers while set */
    int                  preempted_now;    /* a preemption in this step */
    int                  admit_stopped;    /* a waiting one found no blocks:
                                              nobody behind it is admitted */
    int                  giving_way;   /* this step: the batch classes give
                                          way to a lower one */
    llm_seq            **cand;         /* (max_num_seqs) running snapshot */

    /* the batch being built: one entry per sequence, tokens flattened */
    int                  n_tokens;
    int32_t             *tok;          /* (max_batched_tokens) */
    int32_t             *pos;          /* (max_batched_tokens) */
    int32_t             *tok_type;     /* (max_batched_tokens) token types
                                          (a score model's pairs) */
    int                  n_typed;      /* tokens of type 1 this step */
    int32_t             *tok_seq;      /* (max_batched_tokens) batch entry */
    int                  n_seqs;
    llm_seq            **bseq;         /* (max_num_seqs) */
    int32_t             *chunk;        /* (max_num_seqs) tokens fed */
    const int32_t      **tables;       /* (max_num_seqs) block tables */
    int32_t             *table_len;    /* (max_num_seqs) */
    int32_t             *table_stride; /* (max_num_seqs) a group's row */
    int                  n_logits;
    int32_t             *logit_idx;    /* (max_logits) token index */
    llm_seq            **logit_seq;    /* (max_logits); a speculating
                                          sequence's 1 + n_draft rows
                                          follow each other */
    float               *logits;       /* (max_logits, n_vocab) */
    llm_sampler        **samplers;     /* (max_logits) of logit_seq */
    int32_t             *sampled;      /* (max_logits) ids the backend drew */
    int                  max_logits;   /* max_num_seqs + spec_rows */
    int                  spec_rows;    /* logit rows for drafts per step */
    int                  draft_rows;   /* of them used in this step */
    int                  on_backend;   /* this step sampled by the backend */
    float               *fork_row;     /* (n_vocab) a forking parent's logits
                                          before its own sample */
    float               *fork_scratch; /* (n_vocab) one choice's copy */
    int                  dim;          /* the model's hidden size */
    int                  n_hidden;     /* embeddings' rows in this step */
    int32_t             *hidden_idx;   /* (max_batched_tokens) token index */
    llm_seq            **hidden_seq;   /* (max_batched_tokens) */
    float               *hidden;       /* (max_batched_tokens, dim) */

    llm_sched_stats      st;           /* counters; gauges filled on read */
};


static uint64_t
now_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}


/*
 * (class, priority, fair rank, arrival): does a run before b? The value
 * orders inside its class as vLLM's priority does (a client that moved
 * itself later, priority 50, waits behind 0 even if it came first);
 * fairness across keys orders the requests of one value.
 */
static int
seq_before(const llm_seq *a, const llm_seq *b)
{
    if (a->klass != b->klass) {
        return a->klass < b->klass;
    }
    if (a->priority != b->priority) {
        return a->priority < b->priority;
    }
    if (a->rank != b->rank) {
        return a->rank < b->rank;
    }
    return a->arrival < b->arrival;
}


/* the batch classes: LLM_PRIORITY_BATCH's class and every one above it */
static int
is_batch_class(int64_t klass)
{
    return klass >= llm_priority_class(LLM_PRIORITY_BATCH);
}


/* ---------------------------------------------------------------------------
 * queues
 */

static void
wait_insert(llm_sched *s, llm_seq *q)
{
    llm_seq  *after = s->wait_tail;

    while (after != NULL && seq_before(q, after)) {
        after = after->prev;
    }
    q->prev = after;
    q->next = after != NULL ? after->next : s->wait_head;
    if (q->next != NULL) {
        q->next->prev = q;
    } else {
        s->wait_tail = q;
    }
    if (after != NULL) {
        after->next = q;
    } else {
        s->wait_head = q;
    }
    q->state = LLM_SEQ_WAITING;
    s->n_waiting++;
}


static void
wait_remove(llm_sched *s, llm_seq *q)
{
    if (q->prev != NULL) {
        q->prev->next = q->next;
    } else {
        s->wait_head = q->next;
    }
    if (q->next != NULL) {
        q->next->prev = q->prev;
    } else {
        s->wait_tail = q->prev;
    }
    q->prev = q->next = NULL;
    s->n_waiting--;
}


static void
running_insert(llm_sched *s, llm_seq *q)
{
    int  i = s->n_running;

    while (i > 0 && seq_before(q, s->running[i - 1])) {
        s->running[i] = s->running[i - 1];
        i--;
    }
    s->running[i] = q;
    s->n_running++;
    q->state = LLM_SEQ_RUNNING;
}


static void
running_remove(llm_sched *s, llm_seq *q)
{
    int  i;

    for (i = 0; i < s->n_running && s->running[i] != q; i++) {
        /* find it */
    }
    if (i == s->n_running) {
        return;
    }
    memmove(&s->running[i], &s->running[i + 1],
            (s->n_running - i - 1) * sizeof(*s->running));
    s->n_running--;
}


/* the compiling list: unordered; the compiler holds q as a waiter */
static void
compiling_insert(llm_sched *s, llm_seq *q)
{
    q->prev = NULL;
    q->next = s->compiling;
    if (q->next != NULL) {
        q->next->prev = q;
    }
    s->compiling = q;
    s->n_compiling++;
    q->state = LLM_SEQ_COMPILING;
}


static void
compiling_remove(llm_sched *s, llm_seq *q)
{
    if (q->prev != NULL) {
        q->prev->next = q->next;
    } else {
        s->compiling = q->next;
    }
    if (q->next != NULL) {
        q->next->prev = q->prev;
    }
    q->prev = q->next = NULL;
    s->n_compiling--;
    llm_compiler_forget(s->opt.compiler, q);
}


/* ---------------------------------------------------------------------------
 * sequence life cycle
 */

static void
seq_free(llm_sched *s, llm_seq *q)
{
    while (q->n_forks > 0) {
        seq_free(s, q->forks[--q->n_forks]);
    }
    free(q->forks);
    llm_matcher_free(q->matcher);
    if (q->compiled != NULL) {
        llm_compiled_release(s->opt.compiler, q->compiled);
    }
    llm_sampler_free(&q->sampler);
    llm_blocks_table_free(&q->blocks);
    free(q->tokens);
    free(q->stop_ids);
    free(q->pool);
    free(q);
}


static void seq_finish(llm_sched *s, llm_seq *q, llm_seq_finish finish,
    const char *message, int32_t stop_token);


/* a FORKING choice leaves its parent's list (order kept) */
static void
fork_remove(llm_seq *q)
{
    llm_seq  *p = q->parent;
    int       i;

    for (i = 0; p != NULL && i < p->n_forks; i++) {
        if (p->forks[i] == q) {
            memmove(p->forks + i, p->forks + i + 1,
                    (p->n_forks - i - 1) * sizeof(*p->forks));
            p->n_forks--;
            break;
        }
    }
    q->parent = NULL;
}


/* choice 0 ended before its first token: the choices waiting for it end
   the same way (a STOP or LENGTH without a token cannot happen) */
static void
forks_finish(llm_sched *s, llm_seq *p, llm_seq_finish finish,
    const char *message)
{
    llm_seq  *c;
    int       i;

    /* a cancel of one of them from an on_finish below is ignored */
    for (i = 0; i < p->n_forks; i++) {
        p->forks[i]->cancel = LLM_SEQ_CANCEL_IGNORED;
        p->forks[i]->parent = NULL;
    }
    while (p->n_forks > 0) {
        c = p->forks[0];
        memmove(p->forks, p->forks + 1, (p->n_forks - 1) * sizeof(*p->forks));
        p->n_forks--;
        seq_finish(s, c, finish, message, -1);
    }
}


/* out of the queues, blocks released, on_finish, freed */
static void
seq_finish(llm_sched *s, llm_seq *q, llm_seq_finish finish,
    const char *message, int32_t stop_token)
{
    llm_seq_result  r;

    if (q->state == LLM_SEQ_WAITING) {
        wait_remove(s, q);
    } else if (q->state == LLM_SEQ_COMPILING) {
        compiling_remove(s, q);
    } else if (q->state == LLM_SEQ_FORKING) {
        fork_remove(q);
    } else {
        running_remove(s, q);
    }
    llm_blocks_release(&s->bm, &q->blocks);
    if (q->n_forks > 0) {
        forks_finish(s, q, finish, message);
    }

    memset(&r, 0, sizeof(r));
    r.finish = finish;
    r.message = message != NULL ? message : "";
    r.stop_token = stop_token;
    r.n_prompt = q->n_prompt;
    r.n_cached = q->n_cached;
    r.n_generated = q->n_tokens - q->n_prompt;
    r.n_preempted = q->n_preempted;
    r.t_arrival_ns = q->t_arrival_ns;
    r.t_scheduled_ns = q->t_scheduled_ns;
    r.t_first_token_ns = q->t_first_token_ns;
    r.t_done_ns = now_ns();
    s->st.finished++;
    if (finish == LLM_SEQ_CANCELLED) {
        s->st.cancelled++;
    }
    /* a cancel of q from inside its own on_finish is ignored */
    q->cancel = LLM_SEQ_CANCEL_IGNORED;
    if (s->opt.on_finish != NULL) {
        s->opt.on_finish(q->user, &r);
    }
    seq_free(s, q);
}


/* blocks back to the pool, recomputed later; the sampler is kept so the
   tokens that follow are unchanged */
static void
seq_preempt(llm_sched *s, llm_seq *q)
{
    running_remove(s, q);
    llm_blocks_release(&s->bm, &q->blocks);
    q->n_computed = 0;
    if (q->pool != NULL) {
        memset(q->pool, 0, (size_t) s->dim * sizeof(*q->pool));
    }
    q->n_preempted++;
    s->st.preemptions++;
    s->preempted_now = 1;
    wait_insert(s, q);
}


static int
seq_create(llm_sched *s, const llm_request *req, int max_tokens,
    llm_seq **out, char *err, size_t err_len)
{
    llm_seq  *q = calloc(1, sizeof(*q));

    *out = NULL;
    if (q == NULL) {
        snprintf(err, err_len, "out of memory for a sequence");
        return LLM_SCHED_NO_MEMORY;
    }
    q->n_prompt = q->n_tokens = req->n_prompt;
    q->max_tokens = max_tokens;
    q->cap = req->n_prompt + max_tokens;
    q->tokens = malloc(q->cap * sizeof(*q->tokens));
    q->stop_ids = malloc((req->n_stop_ids + 1) * sizeof(*q->stop_ids));
    if (q->tokens == NULL || q->stop_ids == NULL
        || llm_blocks_table_init(&q->blocks, &s->bm, q->cap) != 0)
    {
        seq_free(s, q);
        snprintf(err, err_len, "out of memory for a sequence of %d tokens",
                 req->n_prompt + max_tokens);
        return LLM_SCHED_NO_MEMORY;
    }
    memcpy(q->tokens, req->prompt, req->n_prompt * sizeof(*q->tokens));
    if (req->n_stop_ids > 0) {
        memcpy(q->stop_ids, req->stop_ids,
               req->n_stop_ids * sizeof(*q->stop_ids));
    }
    if (req->embed) {
        q->embed_dims = req->embed_dims > 0 ? req->embed_dims : s->dim;
        q->type_split = req->type_split;
        q->pool = calloc(s->dim, sizeof(*q->pool));
        if (q->pool == NULL) {
            seq_free(s, q);
            snprintf(err, err_len, "out of memory for an embedding");
            return LLM_SCHED_NO_MEMORY;
        }
    }
    q->n_stop_ids = req->n_stop_ids;
    q->ignore_eos = req->ignore_eos;
    q->priority = req->priority;
    q->klass = llm_priority_class(req->priority);
    q->fair_key = req->fair_key;
    q->user = req->user;
    q->spec = req->speculative >= 0 ? s->opt.spec_draft_tokens : 0;
    q->spec_len = q->spec;
    if (llm_sampler_init(&q->sampler, &req->sampling, s->n_vocab, err,
                         err_len) != 0)
    {
        seq_free(s, q);
        return LLM_SCHED_BAD_REQUEST;
    }
    if (llm_sampler_add_prompt(&q->sampler, req->prompt, req->n_prompt)
        != 0)
    {
        snprintf(err, err_len, "%s", q->sampler.err);
        seq_free(s, q);
        return LLM_SCHED_NO_MEMORY;
    }
    *out = q;
    return LLM_SCHED_OK;
}


/* ---------------------------------------------------------------------------
 * admission
 */

/* an embedding: the model pools, no choices or constraint, the prompt
   within max_model_len and the pool, dims within the model's */
static int
check_embed(llm_sched *s, const llm_request *req, int *max_tokens,
    char *err, size_t err_len)
{
    int64_t  need;

    *max_tokens = 0;
    if (s->be->model->cfg.pooling == LLM_POOL_NONE) {
        snprintf(err, err_len, "the model is not an embedding model");
        return LLM_SCHED_BAD_REQUEST;
    }
    /* an encoder attends both ways: its input is one forward, never
       chunked (encoder.h) */
    if (s->be->model->cfg.encoder
        && req->n_prompt > s->opt.max_prefill_tokens)
    {
        snprintf(err, err_len, "the input has %d tokens; an encoder reads "
                 "its input in one forward of at most %d tokens "
                 "(max_batched_tokens)", req->n_prompt,
                 s->opt.max_prefill_tokens);
        return LLM_SCHED_TOO_LONG;
    }
    if (s->be->model->cfg.encoder
        && req->n_prompt > s->be->model->cfg.max_seq_len)
    {
        snprintf(err, err_len, "the input has %d tokens, more than the "
                 "model's %d positions", req->n_prompt,
                 s->be->model->cfg.max_seq_len);
        return LLM_SCHED_TOO_LONG;
    }
    if (req->n_choices > 1 || req->constraint_kind != LLM_CONSTRAINT_NONE
        || req->embed_dims < 0 || req->embed_dims > s->dim)
    {
        snprintf(err, err_len, "an embedding takes no choices or "
                 "constraint, and 0..%d dimensions", s->dim);
        return LLM_SCHED_BAD_REQUEST;
    }
    if (req->type_split < 0 || req->type_split >= req->n_prompt
        || (s->be->model->cfg.score != LLM_SCORE_NONE
            ? req->embed_dims != 0 : req->type_split != 0))
    {
        snprintf(err, err_len, "a score takes no dimensions, an embedding "
                 "no token types; type_split within the input");
        return LLM_SCHED_BAD_REQUEST;
    }
    if (req->n_prompt > s->opt.max_model_len) {
        snprintf(err, err_len, "the input has %d tokens, more than "
                 "max_model_len %d", req->n_prompt, s->opt.max_model_len);
        return LLM_SCHED_TOO_LONG;
    }
    need = (req->n_prompt + s->bm.block_size - 1) / s->bm.block_size
           * s->bm.n_groups;
    if (need > s->bm.n_blocks) {
        snprintf(err, err_len, "the input (%d tokens) needs %d KV blocks; "
                 "the whole pool has %d", req->n_prompt, (int) need,
                 s->bm.n_blocks);
        return LLM_SCHED_TOO_LONG;
    }
    return LLM_SCHED_OK;
}


static int
check_request(llm_sched *s, const llm_request *req, int *max_tokens,
    char *err, size_t err_len)
{
    int      i, len = s->opt.max_model_len, waiting, peak;
    int64_t  need;

    if (req->n_prompt < 1 || req->prompt == NULL) {
        snprintf(err, err_len, "the prompt is empty");
        return LLM_SCHED_BAD_REQUEST;
    }
    if (req->n_stop_ids < 0 || (req->n_stop_ids > 0 && !req->stop_ids)) {
        snprintf(err, err_len, "invalid stop token list");
        return LLM_SCHED_BAD_REQUEST;
    }
    for (i = 0; i < req->n_prompt; i++) {
        if (req->prompt[i] < 0 || req->prompt[i] >= s->n_vocab) {
            snprintf(err, err_len, "prompt token %d: id %d outside the "
                     "vocabulary of %d", i, req->prompt[i], s->n_vocab);
            return LLM_SCHED_BAD_REQUEST;
        }
    }
    if (req->embed) {
        return check_embed(s, req, max_tokens, err, err_len);
    }
    if (req->n_prompt >= len) {
        snprintf(err, err_len, "the prompt has %d tokens; max_model_len %d "
                 "leaves no room for output", req->n_prompt, len);
        return LLM_SCHED_TOO_LONG;
    }
    *max_tokens = req->max_tokens > 0 ? req->max_tokens
                                      : len - req->n_prompt;
    if (req->n_prompt + (int64_t) *max_tokens > len) {
        snprintf(err, err_len, "prompt (%d tokens) + max_tokens (%d) "
                 "exceeds max_model_len %d", req->n_prompt, *max_tokens,
                 len);
        return LLM_SCHED_TOO_LONG;
    }
    /* the last generated token is never fed back, so it needs no KV */
    need = (req->n_prompt + *max_tokens - 1 + s->bm.block_size - 1)
           / s->bm.block_size;
    peak = llm_blocks_peak(&s->bm, req->n_prompt + *max_tokens - 1,
                           s->opt.max_batched_tokens);
    if (req->n_choices < 0 || req->n_choices > LLM_SCHED_MAX_CHOICES
        || (req->n_choices > 1
            && (req->choice_users == NULL || req->choice_out == NULL)))
    {
        snprintf(err, err_len, "invalid choice count %d (1..%d)",
                 req->n_choices, LLM_SCHED_MAX_CHOICES);
        return LLM_SCHED_BAD_REQUEST;
    }
    /* each further choice shares the prompt's full blocks only */
    if (req->n_choices > 1) {
        need += (int64_t) (req->n_choices - 1)
                * (need - req->n_prompt / s->bm.block_size);
    }
    need *= s->bm.n_groups;             /* pages, as the pool counts */
    /* with a window a sequence holds at most its peak at once (dropped
       pages go back to the pool): each choice its own, counted apart */
    if (peak * (int64_t) (req->n_choices > 1 ? req->n_choices : 1) < need) {
        need = peak * (int64_t) (req->n_choices > 1 ? req->n_choices : 1);
    }
    if (need > s->bm.n_blocks) {
        snprintf(err, err_len, "prompt (%d tokens) + %d x max_tokens (%d) "
                 "needs %d KV blocks of %d tokens; the whole pool has %d",
                 req->n_prompt, req->n_choices > 1 ? req->n_choices : 1,
                 *max_tokens, (int) need, s->bm.block_size,
                 s->bm.n_blocks);
        return LLM_SCHED_TOO_LONG;
    }
    /* requests that free batch places will take at the next step are not
       queued: max_queued counts only those that will have to wait (the
       compiling ones included: they wait too) */
    waiting = s->n_waiting + s->n_compiling;
    if (waiting - (s->opt.max_num_seqs - s->n_running) >= s->opt.max_queued)
    {
        snprintf(err, err_len, "the waiting queue holds %d requests beyond "
                 "the free batch places (max_queued_requests %d)",
                 waiting - (s->opt.max_num_seqs - s->n_running),
                 s->opt.max_queued);
        return LLM_SCHED_QUEUE_FULL;
    }
    return LLM_SCHED_OK;
}


/* ---------------------------------------------------------------------------
 * output constraints (sched/compile.h compiles them off this thread)
 */

static int
check_constraint(llm_sched *s, const llm_request *req, char *err,
    size_t err_len)
{
    if (req->constraint_kind == LLM_CONSTRAINT_NONE) {
        return LLM_SCHED_OK;
    }
    if (req->constraint_kind < LLM_CONSTRAINT_JSON_OBJECT
        || req->constraint_kind > LLM_CONSTRAINT_REGEX
        || req->constraint_len > LLM_CONSTRAINT_MAX_BYTES
        || (req->constraint_len > 0 && req->constraint == NULL)
        || (req->json_ws != LLM_JSON_WS_COMPACT
            && req->json_ws != LLM_JSON_WS_FLEXIBLE)
        || (req->strict != 0 && req->strict != 1))
    {
        snprintf(err, err_len, "invalid output constraint (kind %d, %zu "
                 "bytes)", req->constraint_kind, req->constraint_len);
        return LLM_SCHED_BAD_REQUEST;
    }
    if (s->opt.compiler == NULL) {
        snprintf(err, err_len, "structured outputs are not available: the "
                 "engine has no grammar vocabulary for this model");
        return LLM_SCHED_BAD_REQUEST;
    }
    return LLM_SCHED_OK;
}


/* q follows grammar e from now on (the reference is q's, or released) */
static int
constraint_attach(llm_sched *s, llm_seq *q, llm_compiled *e, char *err,
    size_t err_len)
{
    if (llm_compiled_grammar(e) == NULL) {
        snprintf(err, err_len, "%s", llm_compiled_error(e));
        llm_compiled_release(s->opt.compiler, e);
        return LLM_SCHED_BAD_REQUEST;
    }
    q->matcher = llm_matcher_new(llm_compiled_grammar(e));
    if (q->matcher == NULL) {
        snprintf(err, err_len, "out of memory for a grammar matcher");
        llm_compiled_release(s->opt.compiler, e);
        return LLM_SCHED_NO_MEMORY;
    }
    q->compiled = e;
    if (s->opt.on_constraint != NULL) {
        s->opt.on_constraint(q->user,
                             llm_grammar_relaxed(llm_compiled_grammar(e)));
    }
    return LLM_SCHED_OK;
}


/* a cached grammar now (*compiling 0), or q waits for the compile thread */
static int
constraint_start(llm_sched *s, llm_seq *q, const llm_request *req,
    int *compiling, char *err, size_t err_len)
{
    llm_compiled  *e;
    const char    *text = req->constraint;
    size_t         len = req->constraint_len;
    int            rc;

    *compiling = 0;
    if (req->constraint_kind == LLM_CONSTRAINT_NONE) {
        return LLM_SCHED_OK;
    }
    if (req->constraint_kind == LLM_CONSTRAINT_JSON_OBJECT) {
        text = "";          /* the text is ignored: one cache entry */
        len = 0;
    }
    rc = llm_compiler_get(s->opt.compiler, req->constraint_kind,
                          req->json_ws, req->strict, text, len, q, &e);
    if (rc < 0) {
        snprintf(err, err_len, "out of memory for a constraint");
        return LLM_SCHED_NO_MEMORY;
    }
    if (rc == 0) {
        *compiling = 1;
        return LLM_SCHED_OK;
    }
    return constraint_attach(s, q, e, err, err_len);
}


/* the compile threads' results: compiled ones queue, refused ones end */
static void
collect_compiled(llm_sched *s)
{
    llm_compiled  *e;
    llm_seq       *q;
    void          *w;
    char           msg[320];

    if (s->opt.compiler == NULL || s->n_compiling == 0) {
        return;
    }
    while (llm_compiler_take(s->opt.compiler, &w, &e)) {
        q = w;
        if (constraint_attach(s, q, e, msg, sizeof(msg)) != LLM_SCHED_OK) {
            seq_finish(s, q, LLM_SEQ_REFUSED, msg, -1);
            continue;
        }
        compiling_remove(s, q);
        wait_insert(s, q);
    }
}


/*
 * q's place in its class's round robin over fair keys (start-time fair
 * queueing with one unit per request): rank = max(V, the key's last
 * queued rank) + 1, where V is the class's virtual time: the largest rank
 * running in the class, or just below the smallest one waiting when none
 * runs. So a key with 50 queued requests takes ranks V+1..V+50 and a key
 * arriving later with one takes V+1: it runs second, not 51st. Ranks only
 * compare within a class; a preempted sequence keeps its rank (ahead).
 */
static uint64_t
fair_rank(const llm_sched *s, const llm_seq *q)
{
    const llm_seq  *w;
    uint64_t        v = 0, wmin = UINT64_MAX, last = 0;
    int             i, running = 0;

    for (i = 0; i < s->n_running; i++) {
        if (s->running[i]->klass == q->klass) {
            running = 1;
            if (s->running[i]->rank > v) {
                v = s->running[i]->rank;
            }
        }
    }
    for (w = s->wait_head; w != NULL; w = w->next) {
        if (w->klass != q->klass) {
            continue;
        }
        if (w->rank < wmin) {
            wmin = w->rank;
        }
        if (w->fair_key == q->fair_key && w->rank > last) {
            last = w->rank;
        }
    }
    if (!running && wmin != UINT64_MAX) {
        v = wmin - 1;
    }
    return (last > v ? last : v) + 1;
}


/* choices 1..n-1 of q's request: FORKING, each with its own sampler
   (seed + i where a seed is given, else its own drawn one) */
static int
forks_create(llm_sched *s, llm_seq *q, const llm_request *req,
    int max_tokens, char *err, size_t err_len)
{
    llm_request  cr;
    llm_seq     *c;
    int          i, rc;

    q->forks = calloc(req->n_choices - 1, sizeof(*q->forks));
    if (q->forks == NULL) {
        snprintf(err, err_len, "out of memory for %d choices",
                 req->n_choices);
        return LLM_SCHED_NO_MEMORY;
    }
    for (i = 1; i < req->n_choices; i++) {
        cr = *req;
        cr.user = req->choice_users[i - 1];
        cr.sampling.seed = req->sampling.seed + (uint64_t) i;
        rc = seq_create(s, &cr, max_tokens, &c, err, err_len);
        if (rc != LLM_SCHED_OK) {
            return rc;      /* seq_free(q) frees the ones made */
        }
        c->state = LLM_SEQ_FORKING;
        c->parent = q;
        q->forks[q->n_forks++] = c;
    }
    return LLM_SCHED_OK;
}


int
llm_sched_add(llm_sched *s, const llm_request *req, llm_seq **out,
    char *err, size_t err_len)
{
    llm_seq  *q;
    int       i, rc, max_tokens = 0, compiling = 0;

    *out = NULL;
    rc = check_request(s, req, &max_tokens, err, err_len);
    if (rc == LLM_SCHED_OK) {
        rc = check_constraint(s, req, err, err_len);
    }
    if (rc == LLM_SCHED_OK) {
        rc = seq_create(s, req, max_tokens, &q, err, err_len);
    }
    if (rc == LLM_SCHED_OK && req->n_choices > 1) {
        rc = forks_create(s, q, req, max_tokens, err, err_len);
        if (rc != LLM_SCHED_OK) {
            seq_free(s, q);
        }
    }
    if (rc == LLM_SCHED_OK) {
        rc = constraint_start(s, q, req, &compiling, err, err_len);
        if (rc != LLM_SCHED_OK) {
            seq_free(s, q);
        }
    }
    if (rc != LLM_SCHED_OK) {
        return rc;
    }
    for (i = 0; i < q->n_forks; i++) {
        req->choice_out[i] = q->forks[i];
        q->forks[i]->t_arrival_ns = now_ns();
    }
    q->arrival = s->next_arrival++;
    q->rank = fair_rank(s, q);
    q->t_arrival_ns = now_ns();
    if (compiling) {
        compiling_insert(s, q);
    } else {
        wait_insert(s, q);
    }
    s->st.constrained += req->constraint_kind != LLM_CONSTRAINT_NONE;
    s->st.requests++;
    s->st.prompt_tokens += req->n_prompt;
    *out = q;
    return LLM_SCHED_OK;
}


void
llm_sched_cancel(llm_sched *s, llm_seq *q)
{
    if (q == NULL || q->cancel != LLM_SEQ_CANCEL_NONE) {
        return;
    }
    if (s->in_step) {
        q->cancel = LLM_SEQ_CANCEL_PENDING;
        return;
    }
    seq_finish(s, q, LLM_SEQ_CANCELLED, "", -1);
}


/* ---------------------------------------------------------------------------
 * schedule: build the batch
 */

static int
may_emit(llm_sched *s, llm_seq *q)
{
    return s->opt.can_emit == NULL || s->opt.can_emit(q->user);
}


/* feed tokens[n_computed .. n_computed + n) of q in this step; the last
   q->n_draft of them are speculative drafts (beyond n_tokens), each with
   its logits row */
static void
batch_add(llm_sched *s, llm_seq *q, int n)
{
    int  e = s->n_seqs++, i, real = n - q->n_draft;

    s->bseq[e] = q;
    s->chunk[e] = n;
    s->tables[e] = q->blocks.ids;
    s->table_len[e] = q->blocks.n;
    s->table_stride[e] = q->blocks.cap;
    for (i = 0; i < n; i++) {
        s->tok[s->n_tokens] = q->tokens[q->n_computed + i];
        s->pos[s->n_tokens] = q->n_computed + i;
        s->tok_type[s->n_tokens] = q->type_split > 0
                                   && q->n_computed + i >= q->type_split;
        s->n_typed += s->tok_type[s->n_tokens];
        s->tok_seq[s->n_tokens] = e;
        s->n_tokens++;
    }
    for (i = 0; q->pool != NULL && i < n; i++) {
        if (llm_pool_wants(s->be->model->cfg.pooling, q->n_computed + i,
                           q->n_prompt))
        {
            s->hidden_idx[s->n_hidden] = s->n_tokens - n + i;
            s->hidden_seq[s->n_hidden] = q;
            s->n_hidden++;
        }
    }
    if (q->pool == NULL && q->n_computed + real == q->n_tokens) {
        for (i = q->n_draft; i >= 0; i--) {
            s->logit_idx[s->n_logits] = s->n_tokens - 1 - i;
            s->logit_seq[s->n_logits] = q;
            s->n_logits++;
        }
    }
    /* register the blocks this chunk fills now, so a sequence admitted
       later in this step shares them instead of computing them again
       (not the drafts': they are registered once accepted) */
    llm_blocks_commit(&s->bm, &q->blocks, q->tokens, q->n_computed + real);
    q->in_batch = 1;
    q->last_step = s->st.steps + 1;
    if (q->t_scheduled_ns == 0) {
        q->t_scheduled_ns = now_ns();
    }
}


/* the running sequence to preempt: the last in order (the lowest class,
 * then the newest in its round robin) not already in this step's batch;
 * q itself when nothing after it is left. Running is sorted by class, so
 * the victim is never of a higher class than the sequence asking. */
static llm_seq *
pick_victim(llm_sched *s)
{
    int  i;

    for (i = s->n_running - 1; i >= 0; i--) {
        if (!s->running[i]->in_batch) {
            return s->running[i];
        }
    }
    return NULL;
}


/* a running sequence of a lower class than waiting q (a larger class
 * number), not in this step's batch, the last one first; NULL if none */
static llm_seq *
pick_lower_class_victim(llm_sched *s, const llm_seq *q)
{
    int  i;

    for (i = s->n_running - 1; i >= 0; i--) {
        if (s->running[i]->klass <= q->klass) {
            return NULL;
        }
        if (!s->running[i]->in_batch) {
            return s->running[i];
        }
    }
    return NULL;
}


/* give running q its next n tokens, preempting others for blocks; 0, or
 * -1 when q itself had to be preempted */
static int
reserve_running(llm_sched *s, llm_seq *q, int n)
{
    llm_seq  *victim;

    /* the pages that left the window first: this step may need their
       place (block_manager.h, "Layer groups and sliding windows") */
    llm_blocks_slide(&s->bm, &q->blocks, q->n_computed);
    while (llm_blocks_ensure(&s->bm, &q->blocks, q->n_computed + n) != 0) {
        victim = pick_victim(s);
        seq_preempt(s, victim);
        if (victim == q) {
            return -1;
        }
    }
    return 0;
}


/* ---------------------------------------------------------------------------
 * speculative decoding: n-gram drafts from the sequence's own tokens
 */

/*
 * Prompt lookup: the last k tokens (k = spec_ngram down to 2, or 1 when
 * spec_ngram is 1) found earlier in prompt + output, latest occurrence
 * first; the tokens that followed it, at most max, are copied to
 * tokens[n_tokens..]. Returns how many (0: no match).
 */
static int
propose_drafts(const llm_sched *s, llm_seq *q, int max)
{
    const int32_t  *t = q->tokens;
    int             n = q->n_tokens, k, i, j, d, k_min;

    k_min = s->opt.spec_ngram < 2 ? s->opt.spec_ngram : 2;
    for (k = s->opt.spec_ngram; k >= k_min; k--) {
        if (k >= n) {
            continue;
        }
        for (i = n - k - 1; i >= 0; i--) {
            for (j = 0; j < k && t[i + j] == t[n - k + j]; j++) {
                /* compare */
            }
            if (j < k) {
                continue;
            }
            for (d = 0; d < max && i + k + d < n; d++) {
                q->tokens[n + d] = t[i + k + d];
            }
            return d;
        }
    }
    return 0;
}


static int
emit_room(const llm_sched *s, const llm_seq *q)
{
    return s->opt.emit_room != NULL ? s->opt.emit_room(q->user) : INT_MAX;
}


/*
 * Drafts for decode q, whose one real token already has its block: as many
 * as its setting, its remaining max_tokens, the consumer's room, the
 * token budget (leaving one per decode still to schedule) and the step's
 * draft logit rows allow, and only on blocks free now, leaving one for
 * each decode still to schedule (drafts never cause a preemption). Sets
 * q->n_draft.
 */
static void
plan_drafts(llm_sched *s, llm_seq *q, int tokens_left, int decodes_after)
{
    int  max = q->spec_len;

    q->n_draft = 0;
    if (max <= 0 || q->matcher != NULL) {
        return;
    }
    if (max > q->max_tokens - (q->n_tokens - q->n_prompt) - 1) {
        max = q->max_tokens - (q->n_tokens - q->n_prompt) - 1;
    }
    if (max > emit_room(s, q) - 1) {
        max = emit_room(s, q) - 1;
    }
    if (max > tokens_left - 1 - decodes_after) {
        max = tokens_left - 1 - decodes_after;
    }
    if (max > s->spec_rows - s->draft_rows) {
        max = s->spec_rows - s->draft_rows;
    }
    if (max <= 0) {
        return;
    }
    max = propose_drafts(s, q, max);
    /* a block left for each decode still to come, so that drafts never
       make a later decode preempt someone */
    while (max > 0
           && (llm_blocks_needed(&s->bm, &q->blocks, q->n_tokens + max)
               > llm_blocks_n_available(&s->bm) - decodes_after
               || llm_blocks_ensure(&s->bm, &q->blocks, q->n_tokens + max)
                  != 0))
    {
        max--;
    }
    q->n_draft = max;
    s->draft_rows += max;
}


/* what a step may still spend: tokens, and of them prefill tokens */
typedef struct {
    int  tokens;
    int  prefill;
} sched_budget;


/* does q give way in this step (a batch class while a lower one runs)? */
static int
gives_way(const llm_sched *s, const llm_seq *q)
{
    return s->giving_way && is_batch_class(q->klass);
}


/* the yielding sequences share a small budget: least recently run first,
   so the share goes round the batch class instead of to its first few */
static int
cmp_last_step(const void *a, const void *b)
{
    const llm_seq  *x = *(llm_seq *const *) a, *y = *(llm_seq *const *) b;

    if (x->last_step != y->last_step) {
        return x->last_step < y->last_step ? -1 : 1;
    }
    return seq_before(x, y) ? -1 : seq_before(y, x);
}


/* running sequences of group `yielding` (gives_way() equal to it): the
 * decodes (one token left) when decodes_only, else the partly prefilled
 * ones. Walks a snapshot: preemption changes running[] under it. */
static void
schedule_running(llm_sched *s, int yielding, int decodes_only,
    sched_budget *b)
{
    llm_seq  *q;
    int       i, n, nc = 0;

    for (i = 0; i < s->n_running; i++) {
        if (gives_way(s, s->running[i]) == yielding) {
            s->cand[nc++] = s->running[i];
        }
    }
    if (yielding) {
        qsort(s->cand, nc, sizeof(*s->cand), cmp_last_step);
    }
    for (i = 0; i < nc && b->tokens > 0; i++) {
        q = s->cand[i];
        n = q->n_tokens - q->n_computed;
        if (q->state != LLM_SEQ_RUNNING || q->in_batch
            || (decodes_only && n != 1) || (!decodes_only && n == 1))
        {
            continue;
        }
        if (!decodes_only && n > b->prefill) {
            n = b->prefill;
        }
        if (n > b->tokens) {
            n = b->tokens;
        }
        if (n == 0 || (q->n_computed + n == q->n_tokens && !may_emit(s, q))) {
            continue;
        }
        if (reserve_running(s, q, n) != 0) {
            continue;       /* q went back to the waiting queue */
        }
        if (decodes_only) {
            plan_drafts(s, q, b->tokens, nc - i - 1);
            n += q->n_draft;
        }
        batch_add(s, q, n);
        b->tokens -= n;
        if (!decodes_only) {
            b->prefill -= n;
        }
    }
}


/* blocks a newly admitted sequence must leave free, so that admission
 * does not at once force the running ones into preemption */
static int
admit_watermark(const llm_sched *s)
{
    return s->n_running > 0 ? s->bm.n_blocks / 100 : 0;
}


/* do q's next n tokens fit, after preempting running sequences of lower
 * classes for them (never of q's own class or a higher one)? */
static int
admit_fits(llm_sched *s, llm_seq *q, int n)
{
    llm_seq  *victim;

    while (llm_blocks_needed(&s->bm, &q->blocks, q->n_computed + n)
           + admit_watermark(s) > llm_blocks_n_available(&s->bm))
    {
        victim = pick_lower_class_victim(s, q);
        if (victim == NULL) {
            return 0;
        }
        seq_preempt(s, victim);
    }
    return 1;
}


static void
schedule_waiting(llm_sched *s, int yielding, sched_budget *b)
{
    llm_seq  *q, *next;
    int       hit, n, held;

    for (q = s->wait_head; q != NULL && b->tokens > 0 && b->prefill > 0
         && s->n_running < s->opt.max_num_seqs && !s->admit_stopped;
         q = next)
    {
        next = q->next;
        if (gives_way(s, q) != yielding) {
            continue;
        }
        /* an embedding pools the states of its own tokens: none taken
           from the cache */
        hit = q->pool != NULL ? 0
              : llm_blocks_match_prefix(&s->bm, &q->blocks, q->tokens,
                                        q->n_tokens);
        q->n_computed = hit;
        llm_blocks_slide(&s->bm, &q->blocks, hit);
        n = q->n_tokens - q->n_computed;
        if (n > b->prefill) {
            n = b->prefill;
        }
        if (n > b->tokens) {
            n = b->tokens;
        }
        if (s->be->model->cfg.encoder && n < q->n_tokens - q->n_computed) {
            /* an encoder's input in one step or not yet (FCFS) */
            s->admit_stopped = 1;
            break;
        }
        held = q->n_computed + n == q->n_tokens && !may_emit(s, q);
        if (held || !admit_fits(s, q, n)) {
            llm_blocks_release(&s->bm, &q->blocks);
            q->n_computed = 0;
            if (held) {
                continue;   /* held back by its consumer, not by memory */
            }
            s->admit_stopped = 1;   /* FCFS: no overtaking for memory */
            break;
        }
        /* a victim preempted for q went back into the queue: after q, as
           it is of a lower class, so next is read again */
        next = q->next;
        llm_blocks_ensure(&s->bm, &q->blocks, q->n_computed + n);
        s->st.prefix_hit_tokens += hit;
        if (q->t_scheduled_ns == 0) {
            q->n_cached = hit < q->n_prompt ? hit : q->n_prompt;
        }
        wait_remove(s, q);
        running_insert(s, q);
        batch_add(s, q, n);
        b->tokens -= n;
        b->prefill -= n;
    }
}


/* one group: its decodes first, then its prefill chunks, then admission
   (unless this step had to preempt for a running one: it would thrash) */
static void
schedule_group(llm_sched *s, int yielding, sched_budget *b)
{
    schedule_running(s, yielding, 1, b);
    schedule_running(s, yielding, 0, b);
    if (!s->preempted_now) {
        schedule_waiting(s, yielding, b);
    }
}


/* does a class below the batch classes have work (running or waiting)?
   Both queues are sorted by class, so their heads say */
static int
lower_class_has_work(const llm_sched *s)
{
    return (s->n_running > 0 && !is_batch_class(s->running[0]->klass))
           || (s->wait_head != NULL && !is_batch_class(s->wait_head->klass));
}


/*
 * The step's batch. Decodes come first, so every running decode that may
 * emit gets its token (max_num_seqs <= max_batched_tokens); prefill chunks
 * (running, then admission) spend at most max_prefill_tokens. While a class
 * below the batch classes has work, the batch classes form a second group
 * that may add at most batch_share percent of the first group's tokens
 * (all of the budget when the first group could schedule nothing: held
 * back or out of memory), least recently run first.
 */
static int
schedule(llm_sched *s)
{
    sched_budget  b;
    int           share;

    b.tokens = s->opt.max_batched_tokens;
    b.prefill = s->opt.max_prefill_tokens;
    s->n_tokens = s->n_seqs = s->n_logits = s->n_hidden = s->n_typed = 0;
    s->draft_rows = 0;
    s->preempted_now = 0;
    s->admit_stopped = 0;
    s->giving_way = lower_class_has_work(s);
    schedule_group(s, 0, &b);
    if (s->giving_way) {
        share = (int) ((int64_t) s->n_tokens * s->opt.batch_share / 100);
        if (s->n_tokens > 0 && share < b.tokens) {
            b.tokens = share;
        }
        schedule_group(s, 1, &b);
    }
    return s->n_tokens;
}


/* ---------------------------------------------------------------------------
 * forward, sample, publish
 */

/* the backend may draw this step's tokens itself (the CUDA backend on the
   GPU) when it can and no sequence wants logprobs, which it does not give,
   or follows a constraint, whose mask it does not apply */
static int
backend_samples(const llm_sched *s)
{
    if (s->be->iface.forward_sample == NULL || !s->opt.backend_sampling) {
        return 0;
    }
    for (int e = 0; e < s->n_logits; e++) {
        if (s->logit_seq[e]->sampler.params.logprobs
            || s->logit_seq[e]->matcher != NULL
            || s->logit_seq[e]->n_draft > 0
            || s->logit_seq[e]->n_forks > 0)
        {
            return 0;
        }
    }
    return 1;
}


static int
run_batch(llm_sched *s)
{
    llm_batch  b;

    memset(&b, 0, sizeof(b));
    b.n_tokens = s->n_tokens;
    b.token = s->tok;
    b.pos = s->pos;
    b.type = s->n_typed > 0 ? s->tok_type : NULL;
    b.seq = s->tok_seq;
    b.n_seqs = s->n_seqs;
    b.block_table = s->tables;
    b.n_blocks = s->table_len;
    b.n_groups = s->bm.n_groups;
    b.table_stride = s->table_stride;
    b.n_logits = s->n_logits;
    b.logit_idx = s->logit_idx;
    b.logits = s->logits;
    b.n_hidden = s->n_hidden;
    b.hidden_idx = s->hidden_idx;
    b.hidden = s->hidden;
    s->on_backend = backend_samples(s);
    if (!s->on_backend) {
        return llm_backend_forward(s->be, &b);
    }
    for (int e = 0; e < s->n_logits; e++) {
        s->samplers[e] = &s->logit_seq[e]->sampler;
    }
    return s->be->iface.forward_sample(s->be, &b, s->samplers, s->sampled);
}


static int
is_stop(const llm_sched *s, const llm_seq *q, int32_t id)
{
    return llm_is_stop_token(id, q->stop_ids, q->n_stop_ids)
           || (!q->ignore_eos
               && llm_is_stop_token(id, s->eos, s->opt.n_eos_ids));
}


/* q's next token id (drawn by its sampler: logprobs in lpp when wanted),
   sent; q ends when it is done (done: its constraint is complete).
   Returns 1 when q ended (freed) or was cancelled from on_token */
static int
publish(llm_sched *s, llm_seq *q, int32_t id, const llm_sample_out *lpp,
    int done)
{
    q->tokens[q->n_tokens++] = id;
    s->st.generation_tokens++;
    if (q->t_first_token_ns == 0) {
        q->t_first_token_ns = now_ns();
    }
    if (s->opt.on_token != NULL) {
        s->opt.on_token(q->user, id, lpp);
    }
    if (q->cancel != LLM_SEQ_CANCEL_NONE) {
        return 1;           /* cancelled from on_token: reaped after */
    }
    if (is_stop(s, q, id)) {
        seq_finish(s, q, LLM_SEQ_STOP, "", id);
    } else if (done) {
        seq_finish(s, q, LLM_SEQ_STOP, "", -1);
    } else if (q->n_tokens - q->n_prompt >= q->max_tokens) {
        seq_finish(s, q, LLM_SEQ_LENGTH, "", -1);
    } else {
        return 0;
    }
    return 1;
}


/*
 * A constrained sequence's logits: -inf for every token its grammar does
 * not allow next, and for its stop tokens while the output could not end
 * there. Returns the tokens left.
 */
static int
mask_logits(llm_sched *s, llm_seq *q, float *row)
{
    int       id, k, n = 0, can_end, n_gram = s->opt.n_grammar_vocab;
    int32_t   stop;

    if (llm_matcher_mask(q->matcher, s->mask) == 0) {
        return 0;
    }
    for (id = 0; id < s->n_vocab; id++) {
        if (id < n_gram && (s->mask[id >> 5] >> (id & 31) & 1u)) {
            n++;
        } else {
            row[id] = -INFINITY;
        }
    }
    can_end = llm_matcher_can_end(q->matcher);
    for (k = 0; !can_end && k < q->n_stop_ids + s->opt.n_eos_ids; k++) {
        if (k >= q->n_stop_ids && q->ignore_eos) {
            break;
        }
        stop = k < q->n_stop_ids ? q->stop_ids[k]
                                 : s->eos[k - q->n_stop_ids];
        /* a vocabulary stop token the grammar names (Harmony's <|call|>,
           <|return|>) stays where it is named: the matcher set its bit,
           which for those it sets only there */
        if (stop >= 0 && stop < n_gram
            && (s->mask[stop >> 5] >> (stop & 31) & 1u)
            && llm_is_stop_token(stop, s->opt.grammar_stop_ids,
                                 s->opt.n_grammar_stop_ids))
        {
            continue;
        }
        if (stop >= 0 && stop < s->n_vocab && row[stop] > -INFINITY) {
            row[stop] = -INFINITY;
            n--;
        }
    }
    return n;
}


/* the grammar follows the token drawn; 1 when it is complete (done) */
static int
constraint_accept(llm_sched *s, llm_seq *q, int32_t id, int *done)
{
    *done = 0;
    if (is_stop(s, q, id)) {
        return 0;           /* allowed only where the output could end */
    }
    if (llm_matcher_accept(q->matcher, id) != 0) {
        return -1;
    }
    *done = llm_matcher_is_done(q->matcher);
    return 0;
}


/* q's token from its logits row (masked and sampled here) */
static void
sample_row(llm_sched *s, llm_seq *q, float *row)
{
    llm_sample_out   lp, *lpp = q->sampler.params.logprobs ? &lp : NULL;
    int32_t          id;
    int              done = 0;
    char             msg[96];

    if (q->matcher != NULL && llm_matcher_is_done(q->matcher)) {
        seq_finish(s, q, LLM_SEQ_STOP, "", -1);     /* an empty match */
        return;
    }
    if (q->matcher != NULL && mask_logits(s, q, row) == 0) {
        seq_finish(s, q, LLM_SEQ_ERROR, "the output constraint allows no "
                   "token here", -1);
        return;
    }
    id = llm_sample(&q->sampler, row, s->n_vocab, lpp);
    if (id < 0) {
        seq_finish(s, q, LLM_SEQ_ERROR, q->sampler.err, -1);
        return;
    }
    if (q->matcher != NULL && constraint_accept(s, q, id, &done) != 0) {
        snprintf(msg, sizeof(msg), "the output constraint refused token "
                 "%d after allowing it", id);
        seq_finish(s, q, LLM_SEQ_ERROR, msg, -1);
        return;
    }
    publish(s, q, id, lpp, done);
}


/*
 * Verify q's drafts, tokens[n_tokens .. n_tokens + nd), with logit rows
 * e .. e + nd: row i gives the token at the i-th draft's place, drawn by
 * llm_sample_draft (greedy: the argmax; sampled: accepted with p(draft),
 * else the residual). A draft that came out stands and its K/V is kept; the
 * first one that did not ends the run with the token drawn instead; when
 * all stand, row nd gives one more token. Every token goes through
 * publish, so stop tokens and max_tokens cut the run where they fall. The
 * blocks taken for rejected drafts go back.
 */
static void
verify_drafts(llm_sched *s, llm_seq *q, int e, int nd)
{
    llm_sample_out   lp, *lpp = q->sampler.params.logprobs ? &lp : NULL;
    float           *row;
    int32_t          id, draft;
    int              i, hit;

    q->n_draft = 0;
    s->st.spec_drafts++;
    s->st.spec_draft_tokens += nd;
    for (i = 0; i <= nd; i++) {
        row = s->logits + (size_t) (e + i) * s->n_vocab;
        draft = i < nd ? q->tokens[q->n_tokens] : -1;
        id = draft >= 0 ? llm_sample_draft(&q->sampler, row, s->n_vocab,
                                           draft, lpp)
                        : llm_sample(&q->sampler, row, s->n_vocab, lpp);
        if (id < 0) {
            seq_finish(s, q, LLM_SEQ_ERROR, q->sampler.err, -1);
            return;
        }
        hit = id == draft;
        s->st.spec_accepted_tokens += hit;
        if (i < nd) {
            /* the next draft length: one past the run that stood, so a
               sequence whose drafts fail feeds few tokens for nothing */
            q->spec_len = hit ? (i + 2 < q->spec ? i + 2 : q->spec) : i + 1;
        }
        q->n_computed += hit;       /* its K/V, computed with it, stands */
        if (publish(s, q, id, lpp, 0)) {
            return;                 /* ended, or cancelled: reaped after */
        }
        if (!hit) {
            break;
        }
    }
    /* the rejected drafts' K/V past n_computed is overwritten later; their
       blocks were never registered */
    llm_blocks_truncate(&s->bm, &q->blocks, q->n_computed);
    llm_blocks_commit(&s->bm, &q->blocks, q->tokens, q->n_computed);
}


/*
 * Choice c of p's request takes p's prompt KV: references on the full
 * blocks, a backend copy of the partial last one, its own matcher. 1: it
 * runs and samples now; 0: it queued (no batch place, block or copy) and
 * computes the prompt itself; -1: it ended (out of memory).
 */
static int
fork_one(llm_sched *s, llm_seq *p, llm_seq *c)
{
    int32_t  src[LLM_KV_MAX_GROUPS], dst[LLM_KV_MAX_GROUPS];
    int      g;

    if (p->compiled != NULL) {
        llm_compiled_ref(p->compiled);
        c->compiled = p->compiled;
        c->matcher = llm_matcher_new(llm_compiled_grammar(p->compiled));
        if (c->matcher == NULL) {
            seq_finish(s, c, LLM_SEQ_ERROR, "out of memory for a grammar "
                       "matcher", -1);
            return -1;
        }
    }
    c->arrival = p->arrival;
    c->rank = p->rank;
    if (s->n_running >= s->opt.max_num_seqs
        || s->be->iface.copy_block == NULL
        || llm_blocks_fork(&s->bm, &c->blocks, &p->blocks, p->n_computed,
                           src, dst) != 0)
    {
        c->state = LLM_SEQ_WAITING;
        wait_insert(s, c);
        return 0;
    }
    for (g = 0; g < s->bm.n_groups && dst[g] >= 0
                && s->be->iface.copy_block(s->be, dst[g], src[g]) == 0; g++)
    {
        /* every group's page of the partial block */
    }
    if (g < s->bm.n_groups && dst[g] >= 0) {
        llm_blocks_release(&s->bm, &c->blocks);
        c->state = LLM_SEQ_WAITING;
        wait_insert(s, c);
        return 0;
    }
    c->n_computed = p->n_computed;
    c->n_cached = p->n_cached;
    c->t_scheduled_ns = p->t_scheduled_ns;
    c->last_step = p->last_step;
    c->state = LLM_SEQ_RUNNING;
    running_insert(s, c);
    return 1;
}


/* p's prompt is computed and row holds its logits: its waiting choices
   fork now, p draws its token, then each choice draws its own from the
   same row */
static void
fork_and_sample(llm_sched *s, llm_seq *p, float *row)
{
    llm_seq  **forks = p->forks;
    uint8_t    run[LLM_SCHED_MAX_CHOICES];
    size_t     bytes = (size_t) s->n_vocab * sizeof(*row);
    int        i, n = p->n_forks;

    memcpy(s->fork_row, row, bytes);
    p->forks = NULL;
    p->n_forks = 0;
    for (i = 0; i < n; i++) {
        forks[i]->parent = NULL;
        run[i] = fork_one(s, p, forks[i]) == 1;
    }
    sample_row(s, p, row);
    for (i = 0; i < n; i++) {
        if (run[i] && forks[i]->cancel == LLM_SEQ_CANCEL_NONE) {
            memcpy(s->fork_scratch, s->fork_row, bytes);
            sample_row(s, forks[i], s->fork_scratch);
        }
    }
    free(forks);
}


/* logit row e's token: drawn by the backend this step, or sampled here */
static void
sample_and_publish(llm_sched *s, llm_seq *q, int e)
{
    float  *row = s->logits + (size_t) e * s->n_vocab;

    if (s->on_backend) {
        publish(s, q, s->sampled[e], NULL, 0);
    } else if (q->n_forks > 0) {
        fork_and_sample(s, q, row);
    } else {
        sample_row(s, q, row);
    }
}


/* the step's hidden rows into their embeddings' pools (token order);
   an embedding whose whole input is in is finished and sent */
static void
embed_rows(llm_sched *s, int n_embed)
{
    float              score;
    const llm_config  *cfg = &s->be->model->cfg;
    llm_seq           *q;
    int                e;

    for (e = 0; e < s->n_hidden; e++) {
        llm_pool_add(cfg->pooling, s->hidden_seq[e]->pool,
                     s->hidden + (size_t) e * s->dim, s->dim);
    }
    for (e = 0; e < n_embed; e++) {
        q = s->bseq[e];
        if (q->n_computed < q->n_prompt
            || q->cancel != LLM_SEQ_CANCEL_NONE)
        {
            continue;
        }
        llm_pool_finish(q->pool, q->n_prompt, cfg->pooling,
                        cfg->pool_normalize, q->embed_dims);
        q->t_first_token_ns = now_ns();
        if (cfg->score != LLM_SCORE_NONE) {
            /* a score model: the pooled row through its head, one float */
            if (llm_score(s->be->model, q->pool, &score) != 0) {
                seq_finish(s, q, LLM_SEQ_ERROR, "the model's score head "
                           "failed", -1);
                continue;
            }
            if (s->opt.on_embedding != NULL) {
                s->opt.on_embedding(q->user, &score, 1);
            }
        } else if (s->opt.on_embedding != NULL) {
            s->opt.on_embedding(q->user, q->pool, q->embed_dims);
        }
        /* bseq[e] is not read again: finishing frees q */
        seq_finish(s, q, LLM_SEQ_STOP, NULL, -1);
    }
}


static void
postprocess(llm_sched *s)
{
    llm_seq  *q;
    int       e, nd, n_embed = 0;

    for (e = 0; e < s->n_seqs; e++) {
        q = s->bseq[e];
        q->in_batch = 0;
        q->n_computed += s->chunk[e] - q->n_draft;
        if (q->pool != NULL) {
            /* sampling below may finish (free) this batch's generations:
               the embeddings move to the front of bseq, which nothing
               reads after this step, and embed_rows reads only them */
            s->bseq[n_embed++] = q;
        }
    }
    for (e = 0; e < s->n_logits; e += 1 + nd) {
        q = s->logit_seq[e];
        nd = q->n_draft;
        if (q->cancel != LLM_SEQ_CANCEL_NONE) {
            q->n_draft = 0;
        } else if (nd > 0) {
            verify_drafts(s, q, e, nd);
        } else {
            sample_and_publish(s, q, e);
        }
    }
    embed_rows(s, n_embed);
}


/* a FORKING choice cancelled during the step, or NULL */
static llm_seq *
fork_cancelled(llm_seq *p)
{
    int  i;

    for (i = 0; i < p->n_forks; i++) {
        if (p->forks[i]->cancel == LLM_SEQ_CANCEL_PENDING) {
            return p->forks[i];
        }
    }
    return NULL;
}


static llm_seq *
find_cancelled_fork(llm_sched *s)
{
    llm_seq  *q, *c;
    int       i;

    for (i = 0; i < s->n_running; i++) {
        if ((c = fork_cancelled(s->running[i])) != NULL) {
            return c;
        }
    }
    for (q = s->wait_head; q != NULL; q = q->next) {
        if ((c = fork_cancelled(q)) != NULL) {
            return c;
        }
    }
    for (q = s->compiling; q != NULL; q = q->next) {
        if ((c = fork_cancelled(q)) != NULL) {
            return c;
        }
    }
    return NULL;
}


/* the first sequence cancelled from a callback during the step, or NULL */
static llm_seq *
find_cancelled(llm_sched *s)
{
    llm_seq  *q;
    int       i;

    for (i = 0; i < s->n_running; i++) {
        if (s->running[i]->cancel == LLM_SEQ_CANCEL_PENDING) {
            return s->running[i];
        }
    }
    for (q = s->wait_head; q != NULL; q = q->next) {
        if (q->cancel == LLM_SEQ_CANCEL_PENDING) {
            return q;
        }
    }
    for (q = s->compiling; q != NULL; q = q->next) {
        if (q->cancel == LLM_SEQ_CANCEL_PENDING) {
            return q;
        }
    }
    return find_cancelled_fork(s);
}


/* one at a time, with cancels from these on_finish calls deferred too, so
   no queue changes under an iteration */
static void
reap_cancelled(llm_sched *s)
{
    llm_seq  *q;

    s->in_step = 1;
    while ((q = find_cancelled(s)) != NULL) {
        seq_finish(s, q, LLM_SEQ_CANCELLED, "", -1);
    }
    s->in_step = 0;
}


static void
fail_batch(llm_sched *s)
{
    char  msg[sizeof(s->be->err)];
    int   e;

    snprintf(msg, sizeof(msg), "%s", s->be->err);
    for (e = 0; e < s->n_seqs; e++) {
        s->bseq[e]->in_batch = 0;
        llm_blocks_forget(&s->bm, &s->bseq[e]->blocks);
    }
    for (e = 0; e < s->n_seqs; e++) {
        seq_finish(s, s->bseq[e], LLM_SEQ_ERROR, msg, -1);
    }
}


/* what the batch just built feeds: a decode entry feeds one generated
   token, any other entry prompt (or, after preemption, recomputed) ones */
static void
count_step(llm_sched *s, int n)
{
    llm_seq  *q;
    int       e, decodes = 0;

    for (e = 0; e < s->n_seqs; e++) {
        q = s->bseq[e];
        decodes += s->chunk[e] - q->n_draft == 1
                   && q->n_computed >= q->n_prompt;
    }
    s->st.last_step_tokens = n;
    s->st.last_step_decodes = decodes;
    s->st.last_step_prefills = s->n_seqs - decodes;
}


int
llm_sched_step(llm_sched *s)
{
    int  n, rc;

    collect_compiled(s);
    n = schedule(s);
    rc = n;
    if (n == 0) {
        return 0;
    }
    count_step(s, n);
    if (s->opt.on_step != NULL) {
        s->opt.on_step(s->opt.step_arg, n);
    }
    s->in_step = 1;
    if (run_batch(s) == 0) {
        s->st.steps++;
        s->st.computed_tokens += n;
        postprocess(s);
    } else {
        fail_batch(s);
        rc = -1;
    }
    reap_cancelled(s);
    return rc;
}


int
llm_sched_has_work(const llm_sched *s)
{
    return s->n_running > 0 || s->n_waiting > 0 || s->n_compiling > 0;
}


void
llm_sched_stats_get(const llm_sched *s, llm_sched_stats *st)
{
    *st = s->st;
    st->running = s->n_running;
    st->waiting = s->n_waiting;
    st->compiling = s->n_compiling;
    st->kv_blocks_total = s->bm.n_blocks;
    st->kv_blocks_used = llm_blocks_n_used(&s->bm);
    st->kv_blocks_cached = llm_blocks_n_cached(&s->bm);
    st->kv_blocks_slid = s->bm.slid;
}


/* ---------------------------------------------------------------------------
 * create / free
 */

void
llm_sched_options_default(llm_sched_options *o)
{
    memset(o, 0, sizeof(*o));
    o->max_num_seqs = LLM_DEFAULT_MAX_NUM_SEQS;
    o->max_queued = LLM_DEFAULT_MAX_QUEUED;
    o->batch_share = LLM_DEFAULT_BATCH_SHARE;
    o->prefix_caching = 1;
    o->backend_sampling = 1;
    o->spec_ngram = LLM_SPEC_DEFAULT_NGRAM;
}


static int
resolve_options(llm_sched *s, const llm_sched_options *o, char *err,
    size_t err_len)
{
    const llm_backend  *be = s->be;
    int                 ctx = be->model->cfg.max_seq_len;

    s->opt = *o;
    /* an encoder writes no KV (backend/encoder.h): its blocks hold
       nothing another input could reuse, so none is registered */
    if (be->model->cfg.encoder) {
        s->opt.prefix_caching = 0;
    }
    if (s->opt.max_batched_tokens == 0) {
        s->opt.max_batched_tokens = be->opt.max_batch_tokens;
    }
    if (s->opt.max_model_len == 0) {
        s->opt.max_model_len = ctx;
    }
    if (s->opt.max_prefill_tokens == 0) {
        s->opt.max_prefill_tokens = s->opt.max_batched_tokens;
    }
    if (s->opt.n_blocks == 0) {
        s->opt.n_blocks = be->opt.kv_n_blocks;
    }
    if (s->opt.n_grammar_vocab == 0) {
        s->opt.n_grammar_vocab = s->n_vocab;
    }
    if (s->opt.max_num_seqs < 1 || s->opt.max_num_seqs > 65536
        || s->opt.max_batched_tokens < 1
        || s->opt.max_batched_tokens > be->opt.max_batch_tokens
        || s->opt.max_model_len < 2 || s->opt.max_model_len > ctx
        || s->opt.max_prefill_tokens < 1
        || s->opt.max_prefill_tokens > s->opt.max_batched_tokens
        || s->opt.batch_share < 0 || s->opt.batch_share > 100
        || s->opt.max_queued < 0 || s->opt.n_blocks < 1
        || s->opt.n_blocks > be->opt.kv_n_blocks || s->opt.n_eos_ids < 0
        || s->opt.spec_draft_tokens < 0
        || s->opt.spec_draft_tokens > LLM_SPEC_MAX_DRAFT
        || (s->opt.spec_draft_tokens > 0
            && (s->opt.spec_ngram < 1 || s->opt.spec_ngram > LLM_SPEC_MAX_NGRAM)))
    {
        snprintf(err, err_len, "scheduler: invalid options: max_num_seqs %d "
                 "(1..65536), max_batched_tokens %d (1..%d, the backend's), "
                 "max_model_len %d (2..%d, the model's), max_prefill_tokens "
                 "%d (1..max_batched_tokens), batch_share %d (0..100), "
                 "max_queued %d, n_blocks %d (1..%d, the backend's pool), "
                 "spec_draft_tokens %d (0..%d), spec_ngram %d (1..%d)",
                 s->opt.max_num_seqs, s->opt.max_batched_tokens,
                 be->opt.max_batch_tokens, s->opt.max_model_len, ctx,
                 s->opt.max_prefill_tokens, s->opt.batch_share,
                 s->opt.max_queued, s->opt.n_blocks, be->opt.kv_n_blocks,
                 s->opt.spec_draft_tokens, LLM_SPEC_MAX_DRAFT,
                 s->opt.spec_ngram, LLM_SPEC_MAX_NGRAM);
        return -1;
    }
    return 0;
}


llm_sched *
llm_sched_create(llm_backend *be, const llm_sched_options *o, char *err,
    size_t err_len)
{
    llm_sched      *s = calloc(1, sizeof(*s));
    llm_kv_layout   lo;
    int             ns, nt;

    if (s == NULL) {
        snprintf(err, err_len, "scheduler: out of memory");
        return NULL;
    }
    s->be = be;
    s->n_vocab = be->model->cfg.vocab_size;
    /* n_blocks counts logical blocks of every layer, as the backend's
       pool does: the block manager's ids are its pages (model/kv.h) */
    if (llm_config_kv_layout(&be->model->cfg, &lo, NULL, NULL) != 0) {
        snprintf(err, err_len, "scheduler: out of memory");
        free(s);
        return NULL;
    }
    if (resolve_options(s, o, err, err_len) != 0
        || llm_blocks_init(&s->bm, s->opt.n_blocks * lo.n_groups,
                           be->opt.kv_block_size, s->opt.prefix_caching,
                           err, err_len) != 0)
    {
        free(s);
        return NULL;
    }
    llm_blocks_set_layout(&s->bm, &lo);
    ns = s->opt.max_num_seqs;
    nt = s->opt.max_batched_tokens;
    /* draft rows for up to LLM_SPEC_MAX_SEQS speculating sequences a step */
    s->spec_rows = (ns < LLM_SPEC_MAX_SEQS ? ns : LLM_SPEC_MAX_SEQS)
                   * s->opt.spec_draft_tokens;
    s->max_logits = ns + s->spec_rows;
    s->eos = malloc((s->opt.n_eos_ids + 1) * sizeof(*s->eos));
    s->running = malloc(ns * sizeof(*s->running));
    s->cand = malloc(ns * sizeof(*s->cand));
    s->tok = malloc(nt * sizeof(*s->tok));
    s->pos = malloc(nt * sizeof(*s->pos));
    s->tok_type = malloc(nt * sizeof(*s->tok_type));
    s->tok_seq = malloc(nt * sizeof(*s->tok_seq));
    s->bseq = malloc(ns * sizeof(*s->bseq));
    s->chunk = malloc(ns * sizeof(*s->chunk));
    s->tables = malloc(ns * sizeof(*s->tables));
    s->table_len = malloc(ns * sizeof(*s->table_len));
    s->table_stride = malloc(ns * sizeof(*s->table_stride));
    s->logit_idx = malloc(s->max_logits * sizeof(*s->logit_idx));
    s->logit_seq = malloc(s->max_logits * sizeof(*s->logit_seq));
    s->logits = malloc((size_t) s->max_logits * s->n_vocab
                       * sizeof(*s->logits));
    if (s->logits != NULL) {
        /* touched now, not row by row as the batch first grows */
        memset(s->logits, 0, (size_t) s->max_logits * s->n_vocab
                             * sizeof(*s->logits));
    }
    s->samplers = malloc(s->max_logits * sizeof(*s->samplers));
    s->sampled = malloc(s->max_logits * sizeof(*s->sampled));
    s->mask_words = ((s->opt.n_grammar_vocab > s->n_vocab
                      ? s->opt.n_grammar_vocab : s->n_vocab) + 31) / 32;
    s->mask = malloc(s->mask_words * sizeof(*s->mask));
    s->fork_row = malloc(s->n_vocab * sizeof(*s->fork_row));
    s->fork_scratch = malloc(s->n_vocab * sizeof(*s->fork_scratch));
    s->dim = be->model->cfg.dim;
    if (be->model->cfg.pooling != LLM_POOL_NONE) {
        s->hidden_idx = malloc(nt * sizeof(*s->hidden_idx));
        s->hidden_seq = malloc(nt * sizeof(*s->hidden_seq));
        s->hidden = malloc((size_t) nt * s->dim * sizeof(*s->hidden));
        if (s->hidden_idx == NULL || s->hidden_seq == NULL
            || s->hidden == NULL)
        {
            snprintf(err, err_len, "scheduler: out of memory for the "
                     "hidden states of %d tokens", nt);
            llm_sched_free(s);
            return NULL;
        }
    }
    if (s->eos == NULL || s->running == NULL || s->cand == NULL
        || s->tok == NULL
        || s->tok_type == NULL
        || s->pos == NULL || s->tok_seq == NULL || s->bseq == NULL
        || s->chunk == NULL || s->tables == NULL || s->table_len == NULL
        || s->table_stride == NULL
        || s->logit_idx == NULL || s->logit_seq == NULL || s->logits == NULL
        || s->samplers == NULL || s->sampled == NULL || s->mask == NULL
        || s->fork_row == NULL || s->fork_scratch == NULL)
    {
        /* the message before the free: it reads s->n_vocab */
        snprintf(err, err_len, "scheduler: out of memory for %d sequences "
                 "of a %d-token vocabulary", ns, s->n_vocab);
        llm_sched_free(s);
        return NULL;
    }
    if (s->opt.n_eos_ids > 0) {
        memcpy(s->eos, o->eos_ids, s->opt.n_eos_ids * sizeof(*s->eos));
    }
    s->opt.eos_ids = s->eos;
    return s;
}


void
llm_sched_free(llm_sched *s)
{
    llm_seq  *q, *next;
    int       i;

    if (s == NULL) {
        return;
    }
    for (q = s->wait_head; q != NULL; q = next) {
        next = q->next;
        seq_free(s, q);
    }
    for (i = 0; i < s->n_running; i++) {
        seq_free(s, s->running[i]);
    }
    for (q = s->compiling; q != NULL; q = next) {
        next = q->next;
        llm_compiler_forget(s->opt.compiler, q);
        seq_free(s, q);
    }
    llm_blocks_free(&s->bm);
    free(s->eos);
    free(s->running);
    free(s->cand);
    free(s->tok);
    free(s->tok_type);
    free(s->pos);
    free(s->tok_seq);
    free(s->bseq);
    free(s->chunk);
    free(s->tables);
    free(s->table_len);
    free(s->table_stride);
    free(s->logit_idx);
    free(s->logit_seq);
    free(s->samplers);
    free(s->sampled);
    free(s->mask);
    free(s->fork_row);
    free(s->fork_scratch);
    free(s->hidden_idx);
    free(s->hidden_seq);
    free(s->hidden);
    free(s->logits);
    free(s);
}
