/*
 * The scheduler's decoding features (scheduler.h), on the CPU backend and
 * tiny260K:
 *   - speculative decoding (prompt lookup): greedy output equal to decoding
 *     without it, tokens and logprobs bit for bit (on SmolLM2 too), seeded
 *     sampling reproducible and from the same distribution, the blocks of
 *     rejected drafts back at once, a stop token inside an accepted run;
 *   - a backend that samples where its logits are (as the CUDA backend
 *     does): the tokens the scheduler draws itself;
 *   - output constraints (issue 12): a grammar masks the sampler, compiles
 *     on a thread of its own, is cached, leaves the other sequences alone,
 *     and a constrained sequence gives the same tokens through a
 *     preemption;
 *   - n choices: one prefill, then forks sharing its blocks, each choice
 *     equal to its solo run, constrained ones too.
 * The batcher's own invariants are test_scheduler.c's; the helpers both
 * use are in sched_fixture.h.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "backend/backend.h"
#include "model/model.h"
#include "grammar/grammar.h"
#include "sched/compile.h"
#include "sched/scheduler.h"
#include "sched/sequence.h"
#include "tokenizer/tokenizer.h"
#include "sched_fixture.h"


/* ---------------------------------------------------------------------------
 * speculative decoding (prompt lookup, scheduler.h): greedy output equals
 * decoding without it bit for bit (tokens and logprobs), seeded sampling
 * is reproducible and draws from the same distribution, the blocks of
 * rejected drafts go back at once, a stop token inside an accepted run
 * ends the output where it falls
 */

#define NSJ  12

/* job i: a random phrase repeated (the drafts find it), every third one
 * random tokens; i % 4 == 0 asks for logprobs */
static void
make_spec_job(job *j, int n_vocab, int i, int max_tokens)
{
    int  k, period = 3 + i % 5, len = 12 + (i * 7) % 30;

    make_job(j, n_vocab, 0, len, max_tokens, 0);
    if (i % 3 != 2) {
        for (k = period; k < len; k++) {
            j->prompt[k] = j->prompt[k - period];
        }
    }
    j->sp.logprobs = i % 4 == 0;
}


/* every running sequence holds exactly the blocks its computed tokens
 * fill (nothing left over from rejected drafts) */
static int
blocks_tight(const llm_backend *be, const rec *r, int n)
{
    int  i, bs = be->opt.kv_block_size;

    for (i = 0; i < n; i++) {
        const llm_seq  *q = r[i].seq;

        if (q == NULL || r[i].n_finish != 0) {
            continue;
        }
        if (q->n_draft != 0
            || q->blocks.n != (q->state == LLM_SEQ_RUNNING
                               ? (q->n_computed + bs - 1) / bs : 0))
        {
            printf("# seq %d: %d blocks for %d computed tokens\n", i,
                   q->blocks.n, q->n_computed);
            return 0;
        }
    }
    return 1;
}


/* jobs (submitted at once, max_seqs at a time in the batch) with draft
 * tokens a step (0: off); *tight: blocks_tight held after every step */
static int  spec_pool;      /* run_spec's KV blocks; 0: the whole pool */

static void
run_spec(llm_backend *be, const job *jobs, rec *recs, int n, int draft,
    int max_seqs, int *tight, llm_sched_stats *st)
{
    llm_sched  *s;
    int         i, steps = 0;

    opt_spec_draft = draft;
    s = make_sched(be, spec_pool, 0, 64, max_seqs);
    opt_spec_draft = 0;
    for (i = 0; i < n; i++) {
        submit(s, &jobs[i], &recs[i]);
    }
    *tight = 1;
    while (llm_sched_has_work(s) && steps++ < 10000) {
        if (llm_sched_step(s) < 0) {
            break;
        }
        *tight = *tight && blocks_tight(be, recs, n);
    }
    llm_sched_stats_get(s, st);
    *tight = *tight && idle_and_clean(s);
    llm_sched_free(s);
}


static int
same_logprobs(const rec *a, const rec *b, int n)
{
    int  i;

    for (i = 0; i < n; i++) {
        if (memcmp(a[i].lp, b[i].lp, a[i].n_out * sizeof(float)) != 0) {
            return 0;
        }
    }
    return 1;
}


static void
test_spec_greedy(const char *name, llm_backend *be, int n_vocab, int n,
    int max_tokens)
{
    static job   jobs[NSJ];
    static rec   off[NSJ], on[NSJ], alone[NSJ];
    llm_sched_stats  st, st1;
    int          i, bad = -1, tight, tight1;

    for (i = 0; i < n; i++) {
        make_spec_job(&jobs[i], n_vocab, i, 3 + (i * 11) % max_tokens);
    }
    run_spec(be, jobs, off, n, 0, 64, &tight, &st);
    ok(st.spec_drafts == 0, "%s: spec off: no draft", name);

    run_spec(be, jobs, on, n, 5, 64, &tight, &st);
    ok(same_tokens(off, on, n, &bad) && same_logprobs(off, on, n),
       "%s: greedy, %d requests together: speculation on == off, tokens "
       "and logprobs (first bad %d)", name, n, bad);
    ok(st.spec_accepted_tokens > 0
       && st.spec_accepted_tokens < st.spec_draft_tokens,
       "%s: drafts accepted and rejected (%llu verifications, %llu "
       "drafts, %llu accepted)", name, (unsigned long long) st.spec_drafts,
       (unsigned long long) st.spec_draft_tokens,
       (unsigned long long) st.spec_accepted_tokens);
    printf("# %s: %llu steps for %llu tokens\n", name,
           (unsigned long long) st.steps,
           (unsigned long long) st.generation_tokens);
    ok(tight, "%s: after every step each sequence holds only its "
       "computed tokens' blocks; idle: none used", name);

    /* a small pool: preemption and recompute under speculation */
    spec_pool = n < NSJ ? 5 : 12;
    run_spec(be, jobs, off, n, 0, 64, &tight, &st);
    run_spec(be, jobs, on, n, 5, 64, &tight1, &st1);
    spec_pool = 0;
    ok(same_tokens(off, on, n, &bad) && same_logprobs(off, on, n) && tight1
       && st.preemptions > 0 && st1.spec_accepted_tokens > 0,
       "%s: %d-block pool: on == off (first bad %d), %llu and %llu "
       "preemptions", name, n < NSJ ? 5 : 12, bad, (unsigned long long) st.preemptions,
       (unsigned long long) st1.preemptions);

    /* one at a time: max_num_seqs 1, drafts of 3 */
    run_spec(be, jobs, alone, n, 3, 1, &tight1, &st1);
    ok(same_tokens(off, alone, n, &bad) && same_logprobs(off, alone, n)
       && tight1 && st1.spec_accepted_tokens > 0,
       "%s: one at a time, 3 drafts: == off (first bad %d), %llu "
       "accepted", name, bad, (unsigned long long) st1.spec_accepted_tokens);
}


/* a stop token inside an accepted run: spec on ends where spec off does */
static void
test_spec_stop(llm_backend *be, int n_vocab)
{
    static job   jobs[NSJ];
    static rec   ref[NSJ], off[NSJ], on[NSJ];
    llm_sched_stats  st;
    int          i, bad = -1, tight, stopped = 1;
    static int32_t stop[NSJ];

    for (i = 0; i < NSJ; i++) {
        make_spec_job(&jobs[i], n_vocab, i, 40);
    }
    run_spec(be, jobs, ref, NSJ, 0, 64, &tight, &st);
    for (i = 0; i < NSJ; i++) {
        stop[i] = ref[i].out[ref[i].n_out * 2 / 3];
        jobs[i].stop = &stop[i];
    }
    run_spec(be, jobs, off, NSJ, 0, 64, &tight, &st);
    run_spec(be, jobs, on, NSJ, 6, 64, &tight, &st);
    for (i = 0; i < NSJ; i++) {
        stopped = stopped && on[i].res.finish == LLM_SEQ_STOP
                  && on[i].res.stop_token == stop[i]
                  && on[i].out[on[i].n_out - 1] == stop[i];
    }
    ok(same_tokens(off, on, NSJ, &bad) && stopped && tight
       && st.spec_accepted_tokens > 0,
       "stop token inside the drafts: on == off (first bad %d), each "
       "ends STOP on it, %llu drafts accepted", bad,
       (unsigned long long) st.spec_accepted_tokens);
}


/* seeded sampling: reproducible, and the same distribution as without
 * speculation: histograms of the 2nd and 3rd token over many seeds */
#define NSEEDS  1536

static double
tv_distance(const int *a, const int *b, int n_vocab, int total)
{
    double  d = 0.0;
    int     t;

    for (t = 0; t < n_vocab; t++) {
        d += fabs((double) a[t] - b[t]) / total;
    }
    return d / 2;
}


static void
run_seeds(llm_backend *be, job *j, int n_vocab, int draft, uint64_t seed0,
    int *hist1, int *hist2, uint64_t *accepted, uint64_t *drafted)
{
    static rec   r[64];
    llm_sched_stats  st;
    int          i, k, tight;
    static job   js[64];

    *accepted = *drafted = 0;
    memset(hist1, 0, n_vocab * sizeof(int));
    memset(hist2, 0, n_vocab * sizeof(int));
    for (i = 0; i < NSEEDS; i += 16) {
        for (k = 0; k < 16; k++) {
            js[k] = *j;
            js[k].sp.seed = seed0 + i + k;
        }
        run_spec(be, js, r, 16, draft, 16, &tight, &st);
        *accepted += st.spec_accepted_tokens;
        *drafted += st.spec_draft_tokens;
        for (k = 0; k < 16; k++) {
            if (r[k].n_out >= 3) {
                hist1[r[k].out[1]]++;
                hist2[r[k].out[2]]++;
            }
        }
    }
}


static void
test_spec_sampled(llm_backend *be, int n_vocab)
{
    static job   jobs[NSJ];
    static rec   a[NSJ], b[NSJ];
    static int   h1_off[1024], h2_off[1024], h1_on[1024], h2_on[1024],
                 h1_null[1024], h2_null[1024];
    llm_sched_stats  st;
    uint64_t     acc, dr, acc0, dr0;
    double       d1, d2, n1, n2;
    job          j;
    int          i, bad = -1, tight;

    for (i = 0; i < NSJ; i++) {
        make_spec_job(&jobs[i], n_vocab, i, 30);
        jobs[i].sp.temperature = 0.8f;
        jobs[i].sp.has_seed = 1;
        jobs[i].sp.seed = 1000 + i;
        jobs[i].sp.top_p = i % 2 ? 0.9f : 1.0f;
    }
    run_spec(be, jobs, a, NSJ, 5, 64, &tight, &st);
    run_spec(be, jobs, b, NSJ, 5, 64, &tight, &st);
    ok(same_tokens(a, b, NSJ, &bad) && same_logprobs(a, b, NSJ) && tight
       && st.spec_draft_tokens > 0,
       "seeded sampling with speculation: reproducible (first bad %d), "
       "%llu drafts, %llu accepted", bad,
       (unsigned long long) st.spec_draft_tokens,
       (unsigned long long) st.spec_accepted_tokens);

    if (n_vocab > 1024) {
        return;
    }
    /* a repeated phrase, top_k 5 at temperature 1, 1-gram lookup: most
       steps draft, the drafts are often right and often not, so both the
       acceptance and the residual draw run. Other seeds for each run, so
       the histograms are independent samples (the same seeds would agree
       wherever nothing was drafted) */
    /* the model's own greedy text after BOS, then its start again: a
       text it copies */
    make_job(&j, n_vocab, 0, 1, 24, 0);
    j.prompt[0] = 1;
    run_spec(be, &j, a, 1, 0, 1, &tight, &st);
    for (i = 0; i < a[0].n_out + 8; i++) {
        j.prompt[1 + i] = a[0].out[i % a[0].n_out];
    }
    j.n_prompt = 1 + a[0].n_out + 8;

    j.max_tokens = 4;
    j.sp.temperature = 1.0f;
    j.sp.top_k = 5;
    j.sp.has_seed = 1;
    j.sp.logprobs = 0;
    opt_spec_ngram = 1;
    run_seeds(be, &j, n_vocab, 0, 1, h1_off, h2_off, &acc0, &dr0);
    run_seeds(be, &j, n_vocab, 0, 1 + NSEEDS, h1_null, h2_null, &acc0,
              &dr0);
    run_seeds(be, &j, n_vocab, 4, 1 + 2 * NSEEDS, h1_on, h2_on, &acc, &dr);
    opt_spec_ngram = LLM_SPEC_DEFAULT_NGRAM;
    d1 = tv_distance(h1_off, h1_on, n_vocab, NSEEDS);
    d2 = tv_distance(h2_off, h2_on, n_vocab, NSEEDS);
    n1 = tv_distance(h1_off, h1_null, n_vocab, NSEEDS);
    n2 = tv_distance(h2_off, h2_null, n_vocab, NSEEDS);
    printf("# %d seeds: total variation on/off %.4f %.4f, off/off (other "
           "seeds) %.4f %.4f; %llu drafts, %llu accepted\n", NSEEDS, d1,
           d2, n1, n2, (unsigned long long) dr, (unsigned long long) acc);
    ok(dr > (uint64_t) NSEEDS / 4 && acc > 0 && acc < dr,
       "distribution test drafts (%llu) and both accepts and rejects "
       "(%llu accepted)", (unsigned long long) dr, (unsigned long long) acc);
    ok(d1 < 0.12 && d2 < 0.12, "2nd and 3rd token over %d seeds: on and "
       "off within total variation 0.12 (%.4f, %.4f; off vs off on other "
       "seeds: %.4f, %.4f)", NSEEDS, d1, d2, n1, n2);
}


/* ---------------------------------------------------------------------------
 * a backend that samples where its logits are (as the CUDA backend does on
 * the GPU): here the CPU backend's forward, then llm_sample on each row
 */

static struct {
    llm_backend   *inner;
    float         *logits;           /* (max rows, vocab) */
    int            n_vocab;
    int            calls;            /* forward_sample calls */
} sampling_be;


static int
sampling_forward(llm_backend *be, const llm_batch *b)
{
    (void) be;
    return llm_backend_forward(sampling_be.inner, b);
}


static int
sampling_forward_sample(llm_backend *be, const llm_batch *b,
    llm_sampler *const *samplers, int32_t *ids)
{
    llm_batch  own = *b;

    (void) be;
    sampling_be.calls++;
    own.logits = sampling_be.logits;
    if (llm_backend_forward(sampling_be.inner, &own) != 0) {
        return -1;
    }
    for (int i = 0; i < b->n_logits; i++) {
        ids[i] = llm_sample(samplers[i], sampling_be.logits
                            + (size_t) i * sampling_be.n_vocab,
                            sampling_be.n_vocab, NULL);
        if (ids[i] < 0) {
            return -1;
        }
    }
    return 0;
}


static void
sampling_free(llm_backend *be)
{
    (void) be;
}


/* a step whose tokens the backend draws gives the tokens the scheduler
 * draws itself (greedy and seeded); a step with logprobs stays with the
 * scheduler (the backend gives no logprobs) */
static void
test_backend_sampling(llm_backend *be, int n_vocab)
{
    enum { N = 6 };
    static job   jobs[N];
    static rec   ref[N], got[N];
    llm_backend  wrap = *be;
    llm_sched   *s;
    int          i, bad = -1, calls;

    sampling_be.inner = be;
    sampling_be.n_vocab = n_vocab;
    sampling_be.logits = malloc((size_t) 64 * n_vocab * sizeof(float));
    wrap.iface.forward = sampling_forward;
    wrap.iface.forward_sample = sampling_forward_sample;
    wrap.iface.free = sampling_free;
    for (i = 0; i < N; i++) {
        make_job(&jobs[i], n_vocab, 0, 5 + 3 * i, 12, (uint32_t) i);
        if (i % 2) {
            jobs[i].sp.temperature = 0.9f;
            jobs[i].sp.top_p = 0.9f;
            jobs[i].sp.seed = 1000 + i;
            jobs[i].sp.has_seed = 1;
        }
    }
    s = make_sched(be, 0, 0, 0, N);
    for (i = 0; i < N; i++) {
        submit(s, &jobs[i], &ref[i]);
    }
    drain(s, 10000);
    llm_sched_free(s);

    s = make_sched(&wrap, 0, 0, 0, N);
    for (i = 0; i < N; i++) {
        submit(s, &jobs[i], &got[i]);
    }
    drain(s, 10000);
    llm_sched_free(s);
    ok(sampling_be.calls > 0 && same_tokens(ref, got, N, &bad),
       "backend sampling: %d steps drawn by the backend, tokens as the "
       "scheduler's own (first difference: job %d)", sampling_be.calls, bad);

    calls = sampling_be.calls;
    jobs[0].sp.logprobs = 1;
    jobs[0].sp.top_logprobs = 2;
    s = make_sched(&wrap, 0, 0, 0, N);
    submit(s, &jobs[0], &got[0]);
    drain(s, 10000);
    llm_sched_free(s);
    ok(sampling_be.calls == calls && got[0].n_out == ref[0].n_out
       && memcmp(got[0].out, ref[0].out, ref[0].n_out * sizeof(int32_t)) == 0,
       "backend sampling: a sequence that wants logprobs is sampled by the "
       "scheduler (%d backend calls)", sampling_be.calls - calls);
    free(sampling_be.logits);
}


/* ---------------------------------------------------------------------------
 * output constraints (issue 12): a grammar masks the sampler, compiles on
 * a thread of its own, is cached, and leaves the other sequences alone
 */

/* three answers the tiny model's characters can spell; none is a prefix
   of another, so the grammar is done at the end of each */
#define CONSTRAINT_GBNF  "root ::= \" the cat\" | \" a dog\" | \" Lily\""

static const char  *constraint_alts[] = { " the cat", " a dog", " Lily" };

static llm_grammar_vocab   *cvocab;
static const llm_tokenizer *ctok;
static int                  slow_compile_ms;


static llm_grammar *
slow_compile(const llm_grammar_vocab *v, int kind, const char *src,
    size_t len, const llm_grammar_limits *lim, char *err, size_t err_len)
{
    struct timespec  ts = { 0, slow_compile_ms * 1000000L };

    nanosleep(&ts, NULL);
    return llm_grammar_compile(v, kind, src, len, lim, err, err_len);
}


static llm_compiler *
make_compiler(int slow_ms)
{
    llm_compiler_options  o;
    char                  err[256];
    llm_compiler         *c;

    llm_compiler_options_default(&o);
    o.vocab = cvocab;
    if (slow_ms > 0) {
        slow_compile_ms = slow_ms;
        o.compile = slow_compile;
    }
    c = llm_compiler_create(&o, err, sizeof(err));
    if (c == NULL) {
        printf("# %s\n", err);
    }
    return c;
}


static int  constrained_max_queued = 256;

static llm_sched *
make_constrained_sched(llm_backend *be, llm_compiler *c, int n_blocks,
    int max_seqs)
{
    llm_sched_options  o;
    char               err[512];
    llm_sched         *s;

    llm_sched_options_default(&o);
    o.max_queued = constrained_max_queued;
    o.n_blocks = n_blocks;
    o.max_num_seqs = max_seqs;
    o.on_token = on_token;
    o.on_finish = on_finish;
    o.can_emit = can_emit;
    o.compiler = c;
    o.n_grammar_vocab = llm_tokenizer_n_vocab(ctok);
    o.eos_ids = (const int32_t[]) { llm_tokenizer_eos(ctok) };
    o.n_eos_ids = 1;
    o.n_grammar_stop_ids = llm_tokenizer_stop_ids(ctok, &o.grammar_stop_ids);
    s = llm_sched_create(be, &o, err, sizeof(err));
    if (s == NULL) {
        printf("# %s\n", err);
    }
    return s;
}


static int
submit_constrained(llm_sched *s, const job *j, rec *r, int kind,
    const char *src, char *err, size_t err_len)
{
    llm_request  req;

    memset(&req, 0, sizeof(req));
    memset(r, 0, sizeof(*r));
    req.prompt = j->prompt;
    req.n_prompt = j->n_prompt;
    req.sampling = j->sp;
    req.max_tokens = j->max_tokens;
    req.user = r;
    req.constraint_kind = kind;
    req.constraint = src;
    req.constraint_len = src ? strlen(src) : 0;
    req.json_ws = LLM_JSON_WS_FLEXIBLE;
    req.strict = 1;
    return llm_sched_add(s, &req, &r->seq, err, err_len);
}


/* steps until idle; a step with nothing to run (everything compiling)
   waits a millisecond for the compile thread; -1 after secs */
static int
drain_constrained(llm_sched *s, double secs)
{
    struct timespec  ts = { 0, 1000000L }, t0, t;
    int              n = 0, rc;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (llm_sched_has_work(s)) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) * 1e-9 > secs) {
            return -1;
        }
        rc = llm_sched_step(s);
        if (rc < 0) {
            return -1;
        }
        if (rc == 0) {
            nanosleep(&ts, NULL);
        }
        n++;
        cur_step++;
    }
    return n;
}


/* the text of r's tokens */
static void
rec_text(const rec *r, char *out, size_t cap)
{
    size_t       n = 0, len;
    const char  *p;
    int          i;

    for (i = 0; i < r->n_out && i < MAX_OUT; i++) {
        p = llm_token_piece(ctok, r->out[i], &len);
        if (p != NULL && n + len < cap) {
            memcpy(out + n, p, len);
            n += len;
        }
    }
    out[n] = '\0';
}


static int
is_alternative(const char *text)
{
    size_t  i;

    for (i = 0; i < sizeof(constraint_alts) / sizeof(*constraint_alts); i++) {
        if (strcmp(text, constraint_alts[i]) == 0) {
            return 1;
        }
    }
    return 0;
}


static int
is_alternative_prefix(const char *text)
{
    size_t  i;

    for (i = 0; i < sizeof(constraint_alts) / sizeof(*constraint_alts); i++) {
        if (strncmp(constraint_alts[i], text, strlen(text)) == 0) {
            return 1;
        }
    }
    return 0;
}


static char  last_relaxed[256];

static void
on_constraint(void *user, const char *relaxed)
{
    (void) user;
    snprintf(last_relaxed, sizeof(last_relaxed), "%s", relaxed);
}


/* one constrained request with its own json_ws and strict; drained */
static void
run_with_options(llm_sched *s, const job *j, rec *r, const char *schema,
    int json_ws, int strict)
{
    llm_request  req;
    char         err[256];

    memset(&req, 0, sizeof(req));
    memset(r, 0, sizeof(*r));
    req.prompt = j->prompt;
    req.n_prompt = j->n_prompt;
    req.sampling = j->sp;
    req.max_tokens = j->max_tokens;
    req.user = r;
    req.constraint_kind = LLM_CONSTRAINT_JSON_SCHEMA;
    req.constraint = schema;
    req.constraint_len = strlen(schema);
    req.json_ws = json_ws;
    req.strict = strict;
    last_relaxed[0] = '\0';
    if (llm_sched_add(s, &req, &r->seq, err, sizeof(err)) != LLM_SCHED_OK) {
        snprintf(r->msg, sizeof(r->msg), "%s", err);
        r->res.finish = LLM_SEQ_REFUSED;
        return;
    }
    drain_constrained(s, 60);
}


/* each request's json_ws and strict reach the compile, which caches on
   both: strict refuses what the same text relaxed compiles, and
   on_constraint names what was relaxed before the first token */
static void
test_constraint_options(llm_backend *be, int n_vocab)
{
    static const char  schema[] = "{\"type\":\"object\",\"properties\":"
        "{\"s\":{\"type\":\"string\",\"format\":\"iri-reference\"}},"
        "\"required\":[\"s\"],\"additionalProperties\":false}";
    static job          j;
    static rec          r;
    llm_compiler_stats  cs;
    llm_compiler       *c = make_compiler(0);
    llm_sched_options   o;
    llm_sched          *s;
    char                err[256];

    make_job(&j, n_vocab, 0, 4, 12, 901);
    llm_sched_options_default(&o);
    o.max_num_seqs = 2;
    o.on_token = on_token;
    o.on_finish = on_finish;
    o.on_constraint = on_constraint;
    o.compiler = c;
    o.n_grammar_vocab = llm_tokenizer_n_vocab(ctok);
    s = llm_sched_create(be, &o, err, sizeof(err));
    if (!ok(s != NULL && c != NULL, "a scheduler with on_constraint")) {
        printf("# %s\n", err);
        return;
    }

    run_with_options(s, &j, &r, schema, LLM_JSON_WS_COMPACT, 1);
    ok(r.res.finish == LLM_SEQ_REFUSED && strstr(r.msg, "iri-reference")
       && strstr(r.msg, "/properties/s"),
       "strict: refused, naming keyword and pointer (%s)", r.msg);

    run_with_options(s, &j, &r, schema, LLM_JSON_WS_COMPACT, 0);
    ok(r.res.finish != LLM_SEQ_REFUSED && r.n_out > 0,
       "not strict: the same text runs (%d tokens)", r.n_out);
    is_str(last_relaxed, "iri-reference-format@/properties/s",
           "on_constraint names what was relaxed");

    run_with_options(s, &j, &r, schema, LLM_JSON_WS_FLEXIBLE, 0);
    run_with_options(s, &j, &r, schema, LLM_JSON_WS_COMPACT, 0);
    llm_compiler_stats_get(c, &cs);
    ok(cs.compiles == 3 && cs.hits == 1,
       "one compile per (json_ws, strict): %llu compiles, %llu hits",
       (unsigned long long) cs.compiles, (unsigned long long) cs.hits);

    run_with_options(s, &j, &r, schema, 7, 0);
    ok(r.res.finish == LLM_SEQ_REFUSED, "json_ws 7: refused (%s)", r.msg);

    llm_sched_free(s);
    llm_compiler_free(c);
}


/* a grammar that names the model's stop token (Harmony's <|call|> and
   <|return|> are such) ends there STOP: the token is not masked while the
   grammar cannot end yet */
static void
test_constraint_named_stop(llm_backend *be, int n_vocab)
{
    static job     j;
    static rec     r;
    llm_compiler  *c = make_compiler(0);
    llm_sched     *s = c ? make_constrained_sched(be, c, 64, 2) : NULL;
    char           src[64], err[256], text[64];
    int32_t        eos = llm_tokenizer_eos(ctok);

    if (!ok(s != NULL, "a constrained scheduler")) {
        llm_compiler_free(c);
        return;
    }
    make_job(&j, n_vocab, 0, 4, 12, 903);
    snprintf(src, sizeof(src), "root ::= \"a\" <[%d]>", (int) eos);
    submit_constrained(s, &j, &r, LLM_CONSTRAINT_GRAMMAR, src, err,
                       sizeof(err));
    drain_constrained(s, 60);
    rec_text(&r, text, sizeof(text));
    ok(r.res.finish == LLM_SEQ_STOP && r.n_out >= 2
       && r.out[r.n_out - 1] == eos && strncmp(text, "a", 1) == 0,
       "a named stop token ends the output STOP (%d tokens, \"%s\", %s)",
       r.n_out, text, r.msg);
    llm_sched_free(s);
    llm_compiler_free(c);
}


/* greedy and sampled outputs match the grammar and end STOP when it is
   complete; a short max_tokens ends LENGTH on a prefix; the unconstrained
   sequences beside them give their solo tokens; a refused grammar ends
   before a token, with the compiler's message, and is cached as refused */
static void
test_constraint_outputs(llm_backend *be, int n_vocab)
{
    enum { N = 8 };
    static job   jobs[N];
    static rec   got[N], alone[N];
    char         text[512], err[512];
    llm_compiler_stats  cs;
    llm_compiler *c = make_compiler(0);
    llm_sched    *s = make_constrained_sched(be, c, 0, N);
    int           i, n_ok = 0, n_stop = 0, bad = -1, rc;

    for (i = 0; i < N; i++) {
        make_job(&jobs[i], n_vocab, 0, 4 + i, 40, (uint32_t) (300 + i));
        if (i > 0) {
            jobs[i].sp.temperature = 1.0f;
            jobs[i].sp.seed = 77 + i;
            jobs[i].sp.has_seed = 1;
        }
    }
    /* even jobs constrained, odd ones free */
    for (i = 0; i < N; i++) {
        rc = submit_constrained(s, &jobs[i], &got[i],
                                i % 2 ? LLM_CONSTRAINT_NONE
                                      : LLM_CONSTRAINT_GRAMMAR,
                                i % 2 ? NULL : CONSTRAINT_GBNF, err,
                                sizeof(err));
        if (rc != LLM_SCHED_OK) {
            printf("# add %d: %s\n", i, err);
        }
    }
    ok(drain_constrained(s, 60) > 0, "constrained batch drains");
    for (i = 0; i < N; i += 2) {
        rec_text(&got[i], text, sizeof(text));
        n_ok += is_alternative(text);
        n_stop += got[i].res.finish == LLM_SEQ_STOP
                  && got[i].res.stop_token == -1 && got[i].n_finish == 1;
        if (!is_alternative(text)) {
            printf("# job %d: \"%s\" (%d tokens, finish %d: %s)\n", i, text,
                   got[i].n_out, got[i].res.finish, got[i].msg);
        }
    }
    is_int(n_ok, N / 2, "every constrained output is one of the grammar's "
           "answers (greedy and 3 seeded at temperature 1)");
    is_int(n_stop, N / 2, "each ended STOP when the grammar was done");
    llm_compiler_stats_get(c, &cs);
    ok(cs.compiles == 1 && cs.hits + cs.compiles <= N / 2,
       "one grammar compiled for %d requests (%llu compiles, %llu cache "
       "hits)", N / 2, (unsigned long long) cs.compiles,
       (unsigned long long) cs.hits);

    /* the unconstrained ones are as when run alone */
    for (i = 1; i < N; i += 2) {
        llm_sched *s1 = make_sched(be, 0, 0, 0, 1);

        submit(s1, &jobs[i], &alone[i]);
        drain(s1, 10000);
        llm_sched_free(s1);
        if (got[i].n_out != alone[i].n_out
            || memcmp(got[i].out, alone[i].out,
                      alone[i].n_out * sizeof(int32_t)) != 0)
        {
            bad = i;
        }
    }
    is_int(bad, -1, "unconstrained sequences beside constrained ones give "
           "their solo tokens");

    /* max_tokens cuts it: LENGTH on a prefix of an answer */
    jobs[0].max_tokens = 1;
    submit_constrained(s, &jobs[0], &got[0], LLM_CONSTRAINT_GRAMMAR,
                       CONSTRAINT_GBNF, err, sizeof(err));
    drain_constrained(s, 60);
    rec_text(&got[0], text, sizeof(text));
    ok(got[0].res.finish == LLM_SEQ_LENGTH && got[0].n_out == 1
       && is_alternative_prefix(text) && !is_alternative(text),
       "max_tokens 1: LENGTH on \"%s\", a prefix of an answer", text);

    /* a grammar that does not compile: refused before any token */
    jobs[0].max_tokens = 10;
    rc = submit_constrained(s, &jobs[0], &got[0], LLM_CONSTRAINT_GRAMMAR,
                            "root ::= (", err, sizeof(err));
    drain_constrained(s, 60);
    ok(rc == LLM_SCHED_OK && got[0].res.finish == LLM_SEQ_REFUSED
       && got[0].n_out == 0 && got[0].n_finish == 1 && got[0].msg[0] != '\0',
       "a bad grammar: REFUSED, no token, message \"%s\"", got[0].msg);
    rc = submit_constrained(s, &jobs[0], &got[1], LLM_CONSTRAINT_GRAMMAR,
                            "root ::= (", err, sizeof(err));
    ok(rc == LLM_SCHED_BAD_REQUEST && strcmp(err, got[0].msg) == 0,
       "the same bad grammar again: refused at once from the cache");
    ok(idle_and_clean(s), "idle and clean after constrained requests");
    llm_sched_free(s);
    llm_compiler_free(c);

    /* no compiler: a constrained request is refused */
    s = make_sched(be, 0, 0, 0, 1);
    rc = submit_constrained(s, &jobs[0], &got[0], LLM_CONSTRAINT_JSON_OBJECT,
                            NULL, err, sizeof(err));
    ok(rc == LLM_SCHED_BAD_REQUEST, "no compiler: refused (%s)", err);
    rc = submit_constrained(s, &jobs[0], &got[0], 9, "x", err, sizeof(err));
    ok(rc == LLM_SCHED_BAD_REQUEST, "an unknown kind: refused (%s)", err);
    llm_sched_free(s);
}


static double
ms_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}


/* a compile of 400 ms does not stall a running stream: it keeps getting a
   token each step, the steps stay short, and the constrained sequence
   starts once its grammar is ready; a cancel while compiling leaks
   nothing; requests for one text being compiled share the compile */
static void
test_constraint_compile_thread(llm_backend *be, int n_vocab)
{
    static job   stream, cj;
    static rec   rs, rc1, rc2, rc3;
    char         err[512], text[512];
    llm_compiler_stats  cs;
    llm_compiler *c = make_compiler(400);
    llm_sched    *s = make_constrained_sched(be, c, 0, 4);
    double        t0, t, last, gap = 0, waited;
    int           tokens_during = 0, before;

    make_job(&stream, n_vocab, 0, 6, 200, 1);
    make_job(&cj, n_vocab, 0, 5, 30, 2);
    submit(s, &stream, &rs);
    llm_sched_step(s);          /* the stream runs */
    /* the adds are timed too: the engine's loop calls them */
    t0 = last = ms_now();
    submit_constrained(s, &cj, &rc1, LLM_CONSTRAINT_GRAMMAR,
                       CONSTRAINT_GBNF, err, sizeof(err));
    submit_constrained(s, &cj, &rc2, LLM_CONSTRAINT_GRAMMAR,
                       CONSTRAINT_GBNF, err, sizeof(err));
    submit_constrained(s, &cj, &rc3, LLM_CONSTRAINT_GRAMMAR,
                       CONSTRAINT_GBNF, err, sizeof(err));
    llm_sched_cancel(s, rc3.seq);
    ok(rc3.n_finish == 1 && rc3.res.finish == LLM_SEQ_CANCELLED,
       "cancelled while compiling");
    before = rs.n_out;
    while (rc1.n_out == 0 && rc1.n_finish == 0 && ms_now() - t0 < 5000) {
        llm_sched_step(s);
        t = ms_now();
        if (t - last > gap) {
            gap = t - last;
        }
        last = t;
        if (rc1.n_out == 0) {
            tokens_during = rs.n_out - before;
        }
    }
    waited = ms_now() - t0;
    /* a compile on the loop's thread would make one step of 400 ms; the
       bound leaves room for a loaded machine's scheduling */
    ok(waited >= 350 && tokens_during >= 10 && gap < 250,
       "while a grammar compiled for %.0f ms the stream got %d tokens, "
       "the longest step %.1f ms", waited, tokens_during, gap);
    drain_constrained(s, 60);
    rec_text(&rc1, text, sizeof(text));
    ok(is_alternative(text), "then the constrained one ran: \"%s\"", text);
    rec_text(&rc2, text, sizeof(text));
    ok(is_alternative(text) && rc2.n_out == rc1.n_out,
       "and its twin, from the same compile");
    llm_compiler_stats_get(c, &cs);
    ok(cs.compiles == 1, "three requests, one compile (%llu)",
       (unsigned long long) cs.compiles);
    ok(idle_and_clean(s), "idle and clean");
    llm_sched_free(s);

    /* compiling requests wait too: they count against max_queued */
    constrained_max_queued = 0;
    s = make_constrained_sched(be, c, 0, 1);
    constrained_max_queued = 256;
    ok(submit_constrained(s, &cj, &rc1, LLM_CONSTRAINT_REGEX, "[ab]+", err,
                          sizeof(err)) == LLM_SCHED_OK
       && submit_constrained(s, &cj, &rc2, LLM_CONSTRAINT_REGEX, "[ab]+",
                             err, sizeof(err)) == LLM_SCHED_QUEUE_FULL,
       "max_queued 0, one batch place: a second request beside one "
       "compiling is refused (%s)", err);
    drain_constrained(s, 60);
    ok(rc1.n_finish == 1 && idle_and_clean(s), "the first one ran");
    llm_sched_free(s);
    llm_compiler_free(c);
}


/* a constrained sequence preempted by a tiny pool and recomputed gives the
   tokens it gives unpreempted (its matcher is kept, nothing re-accepted);
   and it never goes to the backend's sampling */
static void
test_constraint_preempt(llm_backend *be, int n_vocab)
{
    enum { N = 6 };
    static job   jobs[N];
    static rec   ref[N], got[N];
    char         err[512];
    llm_sched_stats  st;
    llm_compiler *c = make_compiler(0);
    llm_backend   wrap = *be;
    llm_sched    *s;
    int           i, bad = -1, calls;
    /* long enough (in tiny260K's short tokens) to outgrow a tiny pool */
    const char   *g = "root ::= \" Once upon a time there was a little girl "
                      "named Lily who liked the park\" | \" Once upon a "
                      "time there was a big dog named Max who ran fast\"";

    for (i = 0; i < N; i++) {
        make_job(&jobs[i], n_vocab, 0, 10 + i, 30, (uint32_t) (500 + i));
        jobs[i].sp.temperature = 1.0f;
        jobs[i].sp.seed = 900 + i;
        jobs[i].sp.has_seed = 1;
    }
    s = make_constrained_sched(be, c, 0, N);
    for (i = 0; i < N; i++) {
        submit_constrained(s, &jobs[i], &ref[i], i % 2 ? LLM_CONSTRAINT_NONE
                           : LLM_CONSTRAINT_GRAMMAR, g, err, sizeof(err));
    }
    drain_constrained(s, 60);
    llm_sched_free(s);

    s = make_constrained_sched(be, c, 12, N);
    for (i = 0; i < N; i++) {
        submit_constrained(s, &jobs[i], &got[i], i % 2 ? LLM_CONSTRAINT_NONE
                           : LLM_CONSTRAINT_GRAMMAR, g, err, sizeof(err));
    }
    drain_constrained(s, 60);
    llm_sched_stats_get(s, &st);
    ok(st.preemptions > 0 && same_tokens(ref, got, N, &bad),
       "constrained and free sequences preempted %llu times give their "
       "tokens (first difference: job %d)",
       (unsigned long long) st.preemptions, bad);
    ok(ref[0].res.finish != LLM_SEQ_ERROR && ref[0].n_out >= 1,
       "the grammar ran (%d tokens, finish %d: %s)", ref[0].n_out,
       ref[0].res.finish, ref[0].msg);
    llm_sched_free(s);

    /* the backend would sample: the constrained ones stay with us */
    sampling_be.inner = be;
    sampling_be.n_vocab = n_vocab;
    sampling_be.logits = malloc((size_t) 64 * n_vocab * sizeof(float));
    wrap.iface.forward = sampling_forward;
    wrap.iface.forward_sample = sampling_forward_sample;
    wrap.iface.free = sampling_free;
    calls = sampling_be.calls;
    s = make_constrained_sched(&wrap, c, 0, N);
    submit_constrained(s, &jobs[0], &got[0], LLM_CONSTRAINT_GRAMMAR, g, err,
                       sizeof(err));
    drain_constrained(s, 60);
    llm_sched_free(s);
    ok(sampling_be.calls == calls && got[0].n_out == ref[0].n_out
       && memcmp(got[0].out, ref[0].out, ref[0].n_out * sizeof(int32_t)) == 0,
       "a constrained sequence is never sampled by the backend (%d calls)",
       sampling_be.calls - calls);
    free(sampling_be.logits);
    llm_compiler_free(c);
}


/* ---------------------------------------------------------------------------
 * n choices (scheduler.h): one prefill, then forks sharing its blocks
 */

#define NCH  3

/* j as one request of n choices into recs[0..n) (choice i: recs[i]) */
static int
submit_choices(llm_sched *s, const job *j, rec *recs, int n, int kind,
    const char *src)
{
    llm_request  req;
    void        *users[NCH];
    llm_seq     *seqs[NCH];
    char         err[512];
    int          i, rc;

    memset(&req, 0, sizeof(req));
    for (i = 0; i < n; i++) {
        memset(&recs[i], 0, sizeof(recs[i]));
        users[i] = &recs[i + 1];
    }
    req.prompt = j->prompt;
    req.n_prompt = j->n_prompt;
    req.sampling = j->sp;
    req.max_tokens = j->max_tokens;
    req.user = &recs[0];
    req.n_choices = n;
    req.choice_users = users;
    req.choice_out = seqs;
    req.constraint_kind = kind;
    req.constraint = src;
    req.constraint_len = src ? strlen(src) : 0;
    req.json_ws = LLM_JSON_WS_FLEXIBLE;
    req.strict = 1;
    rc = llm_sched_add(s, &req, &recs[0].seq, err, sizeof(err));
    if (rc != LLM_SCHED_OK) {
        printf("# add: %s\n", err);
        return rc;
    }
    for (i = 1; i < n; i++) {
        recs[i].seq = seqs[i - 1];
    }
    return rc;
}


/* the n solo runs of j with seeds seed, seed + 1, ... */
static void
run_seeds_alone(llm_backend *be, const job *j, rec *alone, int n)
{
    static job  js[NCH];
    int         i;

    for (i = 0; i < n; i++) {
        js[i] = *j;
        js[i].sp.seed = j->sp.seed + (uint64_t) i;
    }
    run_alone(be, js, alone, n);
}


static int
generated_fed(const rec *r, int n)
{
    int  i, t = 0;

    for (i = 0; i < n; i++) {
        t += r[i].n_out - 1;    /* the last token is never fed back */
    }
    return t;
}


static void
test_choices(llm_backend *be, int n_vocab)
{
    static job        j, g;
    static rec        got[NCH], alone[NCH];
    llm_sched_stats   st;
    llm_sched        *s;
    uint64_t          saved = rng_state;
    int               i, bad = -1, differ = 0, same, prefix, rc;

    scrub_kv(be, n_vocab);
    /* 21 prompt tokens: a partial last block of 16, copied per fork */
    make_job(&j, n_vocab, 0, 21, 14, 500);
    j.sp.temperature = 1.0f;
    j.sp.seed = 4242;
    j.sp.has_seed = 1;
    run_seeds_alone(be, &j, alone, NCH);
    for (i = 1; i < NCH; i++) {
        differ += alone[i].n_out != alone[0].n_out
                  || memcmp(alone[i].out, alone[0].out,
                            alone[0].n_out * sizeof(int32_t)) != 0;
    }
    ok(differ == NCH - 1, "choices: the solo runs of seeds s, s+1, s+2 "
       "differ (the test can tell forks apart)");

    for (prefix = 0; prefix <= 1; prefix++) {
        s = make_sched(be, 0, prefix, 0, 8);
        rc = submit_choices(s, &j, got, NCH, LLM_CONSTRAINT_NONE, NULL);
        ok(rc == LLM_SCHED_OK && drain(s, 200) > 0,
           "choices (prefix cache %d): n=3 drains", prefix);
        llm_sched_stats_get(s, &st);
        ok(same_tokens(got, alone, NCH, &bad),
           "choices (prefix cache %d): choice i == the solo run with seed "
           "+ i, token for token (first bad %d)", prefix, bad);
        is_int((int) st.computed_tokens, j.n_prompt + generated_fed(got, NCH),
               "choices (prefix cache %d): the prompt is computed once",
               prefix);
        ok(st.requests == 1 && st.prompt_tokens == (uint64_t) j.n_prompt
           && st.finished == NCH,
           "choices (prefix cache %d): one request, its prompt counted "
           "once, %d finished", prefix, NCH);
        ok(idle_and_clean(s), "choices (prefix cache %d): no block leaks",
           prefix);
        llm_sched_free(s);
    }

    /* a prompt ending on a block boundary: no partial block to copy */
    j.n_prompt = 16;
    run_seeds_alone(be, &j, alone, NCH);
    s = make_sched(be, 0, 0, 0, 8);
    submit_choices(s, &j, got, NCH, LLM_CONSTRAINT_NONE, NULL);
    drain(s, 200);
    llm_sched_stats_get(s, &st);
    ok(same_tokens(got, alone, NCH, &bad)
       && (int) st.computed_tokens == j.n_prompt + generated_fed(got, NCH)
       && idle_and_clean(s),
       "choices: a 16-token prompt (full blocks only) forks too (first bad "
       "%d)", bad);
    llm_sched_free(s);
    j.n_prompt = 21;

    /* no batch place for the forks: they queue and compute the prompt */
    run_seeds_alone(be, &j, alone, NCH);
    s = make_sched(be, 0, 1, 0, 1);
    submit_choices(s, &j, got, NCH, LLM_CONSTRAINT_NONE, NULL);
    drain(s, 300);
    ok(same_tokens(got, alone, NCH, &bad) && idle_and_clean(s),
       "choices: max_num_seqs 1, the forks queue; still == solo (first bad "
       "%d)", bad);
    llm_sched_free(s);

    /* greedy: n identical choices */
    make_job(&g, n_vocab, 0, 21, 14, 501);
    run_alone(be, &g, alone, 1);
    s = make_sched(be, 0, 1, 0, 8);
    submit_choices(s, &g, got, NCH, LLM_CONSTRAINT_NONE, NULL);
    drain(s, 200);
    for (i = 0, same = 0; i < NCH; i++) {
        same += same_tokens(&got[i], alone, 1, &bad);
    }
    is_int(same, NCH, "choices: greedy, every choice == the solo greedy run");
    ok(idle_and_clean(s), "choices: greedy, no block leaks");

    /* cancel before the fork: every choice ends CANCELLED, nothing leaks */
    submit_choices(s, &j, got, NCH, LLM_CONSTRAINT_NONE, NULL);
    llm_sched_cancel(s, got[0].seq);
    for (i = 0, same = 0; i < NCH; i++) {
        same += got[i].n_finish == 1 && got[i].n_out == 0
                && got[i].res.finish == LLM_SEQ_CANCELLED;
    }
    is_int(same, NCH, "choices: choice 0 cancelled before the fork ends "
           "the others too");
    ok(idle_and_clean(s), "choices: cancel before the fork, no leak");

    /* cancel a waiting fork alone, then the rest after a few tokens */
    submit_choices(s, &j, got, NCH, LLM_CONSTRAINT_NONE, NULL);
    llm_sched_cancel(s, got[2].seq);
    ok(got[2].n_finish == 1 && got[2].res.finish == LLM_SEQ_CANCELLED
       && got[0].n_finish == 0,
       "choices: one waiting fork cancelled, choice 0 goes on");
    for (i = 0; i < 4; i++) {
        llm_sched_step(s);
    }
    ok(got[0].n_out > 0 && got[1].n_out > 0 && got[1].n_finish == 0,
       "choices: the others run (%d, %d tokens)", got[0].n_out,
       got[1].n_out);
    llm_sched_cancel(s, got[0].seq);
    llm_sched_cancel(s, got[1].seq);
    ok(got[0].n_finish == 1 && got[1].n_finish == 1 && idle_and_clean(s),
       "choices: cancel after the fork, no leak");

    /* admission counts every choice's tokens */
    g.max_tokens = 400;
    g.n_prompt = 8;
    rc = submit_choices(s, &g, got, NCH, LLM_CONSTRAINT_NONE, NULL);
    is_int(rc, LLM_SCHED_TOO_LONG, "choices: n x max_tokens over the pool "
           "is refused TOO_LONG (one choice would fit)");
    llm_sched_free(s);
    rng_state = saved;      /* the later tests' prompts stay as they were */
}


/* n constrained choices: each fork has its own matcher, each output is
   one of the grammar's answers and the solo constrained run of its seed */
static void
test_choices_constrained(llm_backend *be, int n_vocab)
{
    static job     j, js[NCH];
    static rec     got[NCH], alone[NCH];
    char           text[512], err[512];
    llm_compiler  *c = make_compiler(0);
    llm_sched     *s;
    uint64_t       saved = rng_state;
    int            i, n_alt = 0, same = 0;

    make_job(&j, n_vocab, 0, 5, 40, 777);
    j.sp.temperature = 1.0f;
    j.sp.seed = 31;
    j.sp.has_seed = 1;
    for (i = 0; i < NCH; i++) {
        js[i] = j;
        js[i].sp.seed = j.sp.seed + (uint64_t) i;
        s = make_constrained_sched(be, c, 0, 4);
        submit_constrained(s, &js[i], &alone[i], LLM_CONSTRAINT_GRAMMAR,
                           CONSTRAINT_GBNF, err, sizeof(err));
        drain_constrained(s, 30);
        llm_sched_free(s);
    }
    s = make_constrained_sched(be, c, 0, 8);
    submit_choices(s, &j, got, NCH, LLM_CONSTRAINT_GRAMMAR, CONSTRAINT_GBNF);
    ok(drain_constrained(s, 30) > 0, "constrained choices drain");
    for (i = 0; i < NCH; i++) {
        rec_text(&got[i], text, sizeof(text));
        n_alt += is_alternative(text) && got[i].res.finish == LLM_SEQ_STOP;
        same += got[i].n_out == alone[i].n_out && got[i].n_finish == 1
                && memcmp(got[i].out, alone[i].out,
                          got[i].n_out * sizeof(int32_t)) == 0;
    }
    is_int(n_alt, NCH, "constrained n=3: every choice is one of the "
           "grammar's answers, ended STOP");
    is_int(same, NCH, "constrained n=3: choice i == the solo constrained run "
           "with seed + i");
    ok(idle_and_clean(s), "constrained n=3: no block leaks");
    llm_sched_free(s);
    llm_compiler_free(c);
    rng_state = saved;
}


static void
test_constraints(const llm_model *m, llm_backend *be)
{
    char            err[256];
    llm_tokenizer  *tok = llm_model_tokenizer(m, err, sizeof(err));

    if (!ok(tok != NULL, "tiny260K's tokenizer")) {
        printf("# %s\n", err);
        return;
    }
    ctok = tok;
    cvocab = llm_grammar_vocab_new(tok, err, sizeof(err));
    if (ok(cvocab != NULL, "a grammar vocabulary")) {
        test_constraint_outputs(be, m->cfg.vocab_size);
        test_constraint_named_stop(be, m->cfg.vocab_size);
        test_constraint_options(be, m->cfg.vocab_size);
        test_constraint_compile_thread(be, m->cfg.vocab_size);
        test_constraint_preempt(be, m->cfg.vocab_size);
        test_choices_constrained(be, m->cfg.vocab_size);
    } else {
        printf("# %s\n", err);
    }
    llm_grammar_vocab_free(cvocab);
    llm_tokenizer_free(tok);
}


/* ---------------------------------------------------------------------------
 * main
 */

int
main(void)
{
    const char  *model = tap_model();
    char         path[1200];
    llm_model    m;
    llm_backend *be;

    tap_fixture(path, sizeof(path), "models/tiny260K-q4_1.gguf");
    if (!ok(llm_model_load(&m, path, 0, 1) == 0, "tiny260K loads")) {
        printf("# %s\n", m.err);
        return tap_done();
    }
    /* one thread: tiny260K is too small for a second one to pay */
    be = make_backend(&m, 64, 64, 1);
    if (be != NULL) {
        TIMED(test_backend_sampling(be, m.cfg.vocab_size));
        TIMED(test_choices(be, m.cfg.vocab_size));
        TIMED(test_constraints(&m, be));
        TIMED(test_spec_greedy("tiny260K", be, m.cfg.vocab_size, NSJ, 40));
        TIMED(test_spec_stop(be, m.cfg.vocab_size));
        TIMED(test_spec_sampled(be, m.cfg.vocab_size));
    }
    llm_backend_free(be);
    llm_model_free(&m);

    /* make unit-asan runs this file again under ASan and UBSan, as
       test_scheduler: tiny260K is enough there, SmolLM2 under ASan takes
       minutes */
    if (getenv("SCHED_TINY_ONLY") != NULL) {
        return tap_done();
    }
    if (access(model, R_OK) != 0) {
        ok(0, "SmolLM2 model at %s (make deps fetches it)", model);
        return tap_done();
    }
    if (!ok(llm_model_load(&m, model, 0, 1) == 0, "SmolLM2 loads")) {
        printf("# %s\n", m.err);
        return tap_done();
    }
    be = make_backend(&m, 64, 64, 2);
    if (be != NULL) {
        /* 1-gram lookup: random-token prompts give few longer matches */
        opt_spec_ngram = 1;
        TIMED(test_spec_greedy("SmolLM2", be, m.cfg.vocab_size, 6, 16));
        opt_spec_ngram = LLM_SPEC_DEFAULT_NGRAM;
    }
    llm_backend_free(be);
    llm_model_free(&m);
    return tap_done();
}
