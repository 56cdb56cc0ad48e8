/*
 * What the scheduler's unit tests share (test_scheduler.c and
 * test_sched_decode.c, on the CPU backend): a request's record of what the
 * callbacks gave it, a job (a prompt, its sampling, priority, key), the
 * backend and a scheduler made with the options the tests vary, submit,
 * drain, each job run alone (the reference a batch must equal), the pool
 * scrubbed between tests, and the check every test ends with. Static, as
 * in tap.h: each test file is a program of its own.
 *
 * defines: rec, job, MAX_OUT, MAX_REQ, on_token, on_finish, can_emit,
 *          make_backend, make_sched (and the opt_* it reads), rnd,
 *          make_job, submit, drain, run_alone, same_tokens, scrub_kv,
 *          idle_and_clean, secs, TIMED
 */
#ifndef NGX_LLM_SCHED_FIXTURE_H
#define NGX_LLM_SCHED_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "model/model.h"
#include "sched/scheduler.h"

#define MAX_OUT   256
#define MAX_REQ   600

typedef struct {
    int32_t          out[MAX_OUT];
    float            lp[MAX_OUT];      /* logprob of out[i], 0 without */
    int              n_out;
    int              n_finish;         /* on_finish calls: must end as 1 */
    llm_seq_result   res;              /* res.message: NULL, see msg */
    char             msg[256];         /* res.message, valid only during
                                          on_finish, copied */
    int              cancelled;        /* the test cancelled it */
    int              after_cancel;     /* tokens received after cancel */
    int              paused;           /* can_emit answers !paused */
    llm_seq         *seq;
    int              step_first;       /* step of the first token */
} rec;

static int   cur_step;


static void
on_token(void *user, int32_t token, const llm_sample_out *lp)
{
    rec  *r = user;

    if (r->cancelled) {
        r->after_cancel++;
    }
    if (r->n_out == 0) {
        r->step_first = cur_step;
    }
    if (r->n_out < MAX_OUT) {
        r->out[r->n_out] = token;
        r->lp[r->n_out] = lp != NULL ? lp->logprob : 0.0f;
    }
    r->n_out++;
}


static void
on_finish(void *user, const llm_seq_result *res)
{
    rec  *r = user;

    r->n_finish++;
    r->res = *res;
    snprintf(r->msg, sizeof(r->msg), "%s", res->message);
    r->res.message = NULL;
    r->seq = NULL;
}


static int
can_emit(void *user)
{
    return !((rec *) user)->paused;
}


/* ---------------------------------------------------------------------------
 * set-up helpers
 */

static llm_backend *
make_backend(const llm_model *m, int n_blocks, int max_batch, int threads)
{
    llm_backend_options  o;
    llm_backend         *be;
    char                 err[512];

    llm_backend_options_default(&o, m);
    o.n_threads = threads;
    o.kv_n_blocks = n_blocks;
    o.max_batch_tokens = max_batch;
    be = llm_backend_cpu_create(m, &o, err, sizeof(err));
    if (be == NULL) {
        printf("# %s\n", err);
    }
    return be;
}


/* what make_sched sets beyond its arguments (the class tests change them) */
static int  opt_max_prefill;        /* 0: max_batched_tokens */
static int  opt_batch_share = LLM_DEFAULT_BATCH_SHARE;
static int  opt_spec_draft;         /* spec_draft_tokens; 0: off */
static int  opt_spec_ngram = LLM_SPEC_DEFAULT_NGRAM;

/* on_step's record: calls, and the last step's tokens as announced */
static int  step_calls, step_announced;

static void
on_step(void *arg, int n_tokens)
{
    (void) arg;
    step_calls++;
    step_announced = n_tokens;
}


static llm_sched *
make_sched(llm_backend *be, int n_blocks, int prefix, int max_batched,
    int max_seqs)
{
    llm_sched_options  o;
    llm_sched         *s;
    char               err[512];

    llm_sched_options_default(&o);
    o.max_prefill_tokens = opt_max_prefill;
    o.batch_share = opt_batch_share;
    o.spec_draft_tokens = opt_spec_draft;
    o.spec_ngram = opt_spec_ngram;
    o.n_blocks = n_blocks;
    o.prefix_caching = prefix;
    o.max_batched_tokens = max_batched;
    o.max_num_seqs = max_seqs;
    o.on_token = on_token;
    o.on_finish = on_finish;
    o.can_emit = can_emit;
    o.on_step = on_step;
    s = llm_sched_create(be, &o, err, sizeof(err));
    if (s == NULL) {
        printf("# %s\n", err);
    }
    return s;
}


typedef struct {
    int32_t              prompt[200];
    int                  n_prompt;
    int                  max_tokens;
    llm_sampling_params  sp;
    int64_t              priority;
    uint64_t             fair_key;
    const int32_t       *stop;          /* one stop id, or NULL */
} job;


static uint64_t  rng_state = 0x2545f4914f6cdd1dull;

static uint32_t
rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t) (rng_state % n);
}


/* a greedy job: `shared` tokens common to all jobs made with the same
 * shared_seed, then random ones */
static void
make_job(job *j, int n_vocab, int shared, int n_prompt, int max_tokens,
    uint32_t shared_seed)
{
    uint64_t  saved;
    int       i;

    memset(j, 0, sizeof(*j));
    saved = rng_state;
    rng_state = 0x9e3779b97f4a7c15ull ^ shared_seed;
    for (i = 0; i < shared; i++) {
        j->prompt[i] = 3 + rnd(n_vocab - 3);
    }
    rng_state = saved;
    for (i = shared; i < n_prompt; i++) {
        j->prompt[i] = 3 + rnd(n_vocab - 3);
    }
    j->n_prompt = n_prompt;
    j->max_tokens = max_tokens;
    llm_sampling_params_default(&j->sp);
    j->sp.temperature = 0.0f;
}


static int
submit(llm_sched *s, const job *j, rec *r)
{
    llm_request  req;
    char         err[512];
    int          rc;

    memset(&req, 0, sizeof(req));
    memset(r, 0, sizeof(*r));
    req.prompt = j->prompt;
    req.n_prompt = j->n_prompt;
    req.sampling = j->sp;
    req.max_tokens = j->max_tokens;
    req.priority = j->priority;
    req.fair_key = j->fair_key;
    req.stop_ids = j->stop;
    req.n_stop_ids = j->stop != NULL;
    req.user = r;
    rc = llm_sched_add(s, &req, &r->seq, err, sizeof(err));
    if (rc != LLM_SCHED_OK) {
        printf("# add: %s\n", err);
    }
    return rc;
}


/* steps until idle; -1 on a backend error or after max_steps */
static int
drain(llm_sched *s, int max_steps)
{
    int  n = 0;

    while (llm_sched_has_work(s)) {
        if (n++ >= max_steps || llm_sched_step(s) < 0) {
            return -1;
        }
        cur_step++;
    }
    return n;
}


/* each job alone in a fresh scheduler (no prefix cache) */
static void
run_alone(llm_backend *be, const job *jobs, rec *recs, int n)
{
    llm_sched  *s;
    int         i;

    for (i = 0; i < n; i++) {
        s = make_sched(be, 0, 0, 0, 1);
        submit(s, &jobs[i], &recs[i]);
        drain(s, 10000);
        llm_sched_free(s);
    }
}


static int
same_tokens(const rec *a, const rec *b, int n, int *first_bad)
{
    int  i;

    for (i = 0; i < n; i++) {
        if (a[i].n_out != b[i].n_out
            || memcmp(a[i].out, b[i].out, a[i].n_out * sizeof(int32_t)) != 0
            || a[i].n_finish != 1 || b[i].n_finish != 1)
        {
            *first_bad = i;
            return 0;
        }
    }
    return 1;
}


/* overwrite every KV block with K/V of an unrelated prompt, so a test that
 * reads a block before it is computed cannot pass on a stale copy of the
 * right content left by an earlier test */
static void
scrub_kv(llm_backend *be, int n_vocab)
{
    static job   j;
    static rec   r;
    llm_sched   *s = make_sched(be, 0, 0, 0, 1);
    int          b;

    make_job(&j, n_vocab, 0, 20, 1, 99);
    submit(s, &j, &r);
    drain(s, 100);
    llm_sched_free(s);
    for (b = 1; b < be->opt.kv_n_blocks; b++) {
        be->iface.copy_block(be, b, 0);
    }
}




static int
idle_and_clean(llm_sched *s)
{
    llm_sched_stats  st;

    llm_sched_stats_get(s, &st);
    return st.running == 0 && st.waiting == 0 && st.kv_blocks_used == 0
           && !llm_sched_has_work(s);
}


static double
secs(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


#define TIMED(call) do {                                                     \
        double t0_ = secs();                                                 \
        call;                                                                \
        printf("# %s: %.2f s\n", #call, secs() - t0_);                      \
    } while (0)

#endif /* NGX_LLM_SCHED_FIXTURE_H */
