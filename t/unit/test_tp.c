/*
 * Tensor parallelism on CPU ranks (engine/model/tp.h, docs/tp.md):
 *   - the reduction plan: slices per model, which sizes are valid, and a
 *     clear refusal for the others (SmolLM2 at 2, tiny260K Q4_1 at 4);
 *   - the ordered slice sum and the rank group (barriers keep every rank
 *     in step, runs repeat);
 *   - TP=N == TP=1 bit for bit: one schedule of three sequences (prefill
 *     chunks mixed with decodes, greedy continuation) gives identical
 *     logits (memcmp) and tokens on tiny260K F32 at 2 and 4 ranks,
 *     tiny260K Q4_1 at 2 (2 threads per rank: the fused decode path),
 *     SmolLM2 Q4_1 at 3, and in exact mode;
 *   - under TP a sequence run alone equals the same sequence batched;
 *   - the scheduler over a TP backend (prefix cache, preemption, greedy
 *     and seeded sampling) streams the same tokens as over TP=1;
 *   - tiny260K F32 at TP=1 and TP=4 continues as the reference (transformers) does.
 */
#include "tap.h"
#include "backend/backend.h"
#include "model/model.h"
#include "sched/scheduler.h"
#include "model/tp.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *smollm2;

/* BOS "Once upon a time" in tiny260K's vocabulary, then the reference's
 * greedy continuation (transformers: t/data/golden/tiny260K-f32.json,
 * case "plain", whose top-2 margins all exceed the float tolerance) */
static const int32_t story_ids[] = {
    1, 494, 267, 378, 342, 296, 273, 270, 262, 354, 263,
    286, 63, 151, 311, 188, 103, 416, 126, 312, 491, 502, 286, 63, 324, 274,
    63, 442, 63, 286, 26, 132, 110, 110, 110, 360, 132, 466, 309, 417, 324,
    132, 466,
};
#define STORY_PROMPT  11
#define STORY_LEN     ((int) (sizeof(story_ids) / sizeof(story_ids[0])))


static void
stories_path(char *out, size_t len, const char *type)
{
    char rel[64];

    snprintf(rel, sizeof(rel), "models/tiny260K-%s.gguf", type);
    tap_fixture(out, len, rel);
}


/* ---------------------------------------------------------------------------
 * a backend over rank 0 of tp
 */

typedef struct {
    llm_model     m;
    llm_backend  *be;
    char          err[768];
} rig;


static int
rig_open(rig *r, const char *path, int tp, int n_threads, int exact)
{
    llm_backend_options  o;

    r->be = NULL;
    r->err[0] = '\0';
    if (llm_model_load(&r->m, path, 0, tp) != 0) {
        snprintf(r->err, sizeof(r->err), "%s", r->m.err);
        return -1;
    }
    llm_backend_options_default(&o, &r->m);
    o.n_threads = n_threads;
    o.kv_n_blocks = 16;
    o.kv_block_size = 16;
    o.max_batch_tokens = 32;
    o.exact = exact;
    o.tp_slices = llm_tp_slices(&r->m);     /* TP=1 in TP=N's order */
    r->be = llm_backend_create("cpu", &r->m, &o, r->err, sizeof(r->err));
    return r->be != NULL ? 0 : -1;
}


static void
rig_close(rig *r)
{
    llm_backend_free(r->be);
    llm_model_free(&r->m);
}


/* ---------------------------------------------------------------------------
 * the plan
 */

static void
test_plan(void)
{
    char  path[1200];
    char  err[400];
    rig   r;

    stories_path(path, sizeof(path), "f32");
    if (ok(llm_model_load(&r.m, path, 0, 1) == 0, "tiny260K f32 loads")) {
        is_int(llm_tp_slices(&r.m), 4, "tiny260K f32: 4 slices (4 KV heads)");
        ok(llm_tp_check(&r.m, 2, err, sizeof(err)) == 0
           && llm_tp_check(&r.m, 4, err, sizeof(err)) == 0,
           "tiny260K f32: tp 2 and 4 reproduce tp 1");
        ok(llm_tp_check(&r.m, 3, err, sizeof(err)) != 0
           && strstr(err, "only a divisor of 4") != NULL,
           "tiny260K f32: tp 3 refused: \"%s\"", err);
    }
    llm_model_free(&r.m);

    stories_path(path, sizeof(path), "q4_1");
    if (ok(llm_model_load(&r.m, path, 0, 2) == 0, "tiny260K q4_1 loads at 2")) {
        is_int(llm_tp_slices(&r.m), 2,
               "tiny260K q4_1: 2 slices (wo: 64 cols of 32-blocks)");
    }
    llm_model_free(&r.m);

    ok(rig_open(&r, path, 4, 1, 0) != 0
       && strstr(r.err, "cannot be split by whole 32-element blocks") != NULL,
       "tiny260K q4_1 at tp 4 refused: \"%s\"", r.err);
    rig_close(&r);

    if (ok(llm_model_load(&r.m, smollm2, 0, 3) == 0, "SmolLM2 loads at 3")) {
        is_int(llm_tp_slices(&r.m), 3, "SmolLM2: 3 slices");
    }
    llm_model_free(&r.m);

    ok(rig_open(&r, "t/data/models/hf-mistral.gguf", 2, 1, 0) != 0
       && strstr(r.err, "tensor parallel size 2 does not divide the heads "
                 "(4, kv 1)") != NULL,
       "mistral (1 KV head) at tp 2 refused: \"%s\"", r.err);
    rig_close(&r);

    ok(rig_open(&r, smollm2, 2, 1, 0) != 0
       && strstr(r.err, "tensor parallel size 2 does not divide the heads "
                 "(9, kv 3)") != NULL,
       "SmolLM2 at tp 2 refused: \"%s\"", r.err);
    rig_close(&r);
}


/* ---------------------------------------------------------------------------
 * the ordered sum and the group
 */

static void
test_sum(void)
{
    float          a[300], b[300], c[300], x[300], want[300];
    const float   *slot[3] = { a, b, c };
    int            i, same = 1;

    for (i = 0; i < 300; i++) {
        a[i] = 1e8f * (i % 3 == 0 ? 1 : -1);
        b[i] = -a[i];
        c[i] = (float) i * 0.37f;
        x[i] = 2.0f;
        want[i] = 2.0f + ((a[i] + b[i]) + c[i]);
    }
    llm_tp_sum_slices(x, slot, 3, 0, 137);
    llm_tp_sum_slices(x, slot, 3, 137, 300);
    for (i = 0; i < 300; i++) {
        same &= memcmp(&x[i], &want[i], sizeof(float)) == 0;
    }
    ok(same, "sum_slices: x += (s0 + s1) + s2 in that order, any split");
    /* (1e8 + -1e8) + 1.11 keeps the 1.11, 1e8 + (-1e8 + 1.11) loses it */
    ok(x[3] == 2.0f + c[3] && a[3] + (b[3] + c[3]) == 0.0f,
       "sum_slices: the order is the one that matters in float (x[3] = %g)",
       x[3]);
}


#define GROUP_STEPS  200

typedef struct {
    atomic_int   counter;
    int          seen[4][GROUP_STEPS];
} group_job;

static llm_tp_group *the_group;


/* every rank bumps the counter once per step and reads it between two
 * barriers: all ranks must see exactly (step + 1) * n_ranks */
static void
group_task(void *arg, int rank, int n_ranks)
{
    group_job  *j = arg;
    int         s;

    for (s = 0; s < GROUP_STEPS; s++) {
        atomic_fetch_add(&j->counter, 1);
        llm_tp_barrier(the_group);
        j->seen[rank][s] = atomic_load(&j->counter);
        llm_tp_barrier(the_group);
    }
    (void) n_ranks;
}


static void
test_group(void)
{
    group_job   j;
    char        err[256];
    int         run, r, s, good = 1;

    the_group = llm_tp_group_create(4, err, sizeof(err));
    if (!ok(the_group != NULL, "group of 4 ranks starts")) {
        printf("# %s\n", err);
        return;
    }
    is_int(llm_tp_group_size(the_group), 4, "group size 4");
    for (run = 0; run < 3; run++) {
        memset(&j, 0, sizeof(j));
        atomic_init(&j.counter, 0);
        llm_tp_group_run(the_group, group_task, &j);
        for (r = 0; r < 4; r++) {
            for (s = 0; s < GROUP_STEPS; s++) {
                good &= j.seen[r][s] == (s + 1) * 4;
            }
        }
    }
    ok(good, "3 runs x %d barriers: every rank sees every step complete",
       GROUP_STEPS);
    llm_tp_group_free(the_group);
    ok(llm_tp_group_create(0, err, sizeof(err)) == NULL
       && strstr(err, "0 ranks") != NULL, "group of 0 refused: \"%s\"", err);
}


/* ---------------------------------------------------------------------------
 * TP=N == TP=1
 */

#define MAX_STEPS   16
#define MAX_LOGITS  4

/* what one run of the schedule produced */
typedef struct {
    int      vocab;
    int      n_steps;
    int      n_logits[MAX_STEPS];
    float   *logits[MAX_STEPS];     /* (n_logits[s], vocab) */
    int32_t  owner[MAX_STEPS][MAX_LOGITS];  /* sequence of each row */
    int32_t  gen[3][MAX_STEPS];     /* greedy tokens per sequence */
    int      n_gen[3];
    char     err[768];
} trace;


static int32_t
argmax(const float *v, int n)
{
    int  i, best = 0;

    for (i = 1; i < n; i++) {
        if (v[i] > v[best]) {
            best = i;
        }
    }
    return best;
}


static void
trace_free(trace *t)
{
    int  s;

    for (s = 0; s < t->n_steps; s++) {
        free(t->logits[s]);
    }
}


/*
 * The schedule (3 sequences, 2 KV blocks each, block size 16):
 *   step 0: seq 0 prompt (5 tokens) + seq 1 prompt part 1 (3 tokens)
 *   step 1: seq 0 decode + seq 1 prompt part 2 (4 tokens)
 *   steps 2..: seq 0 and seq 1 decode, seq 2 joins at step 3 with its
 *              whole prompt (4 tokens), then decodes
 * with `only` >= 0 only that sequence's tokens are run (the unbatched
 * reference for the same sequence).
 */
static int
run_schedule(const char *path, int tp, int n_threads, int exact,
    int n_steps, int only, trace *t)
{
    static const int32_t   prompt1[7] = { 1, 11, 29, 300, 7, 42, 9 };
    static const int32_t   prompt2[4] = { 1, 60, 61, 62 };
    static const int32_t   tables[3][2] = { { 0, 1 }, { 2, 3 }, { 4, 5 } };
    const int32_t         *tab[3] = { tables[0], tables[1], tables[2] };
    int32_t                nblk[3] = { 2, 2, 2 };
    int32_t                tok[32], pos[32], seq[32], want[MAX_LOGITS];
    int32_t                next[3], done[3] = { 0, 0, 0 };
    int                    n, nl, s, q, i, rc = 0;
    rig                    r;
    llm_batch              b;

    memset(t, 0, sizeof(*t));
    if (rig_open(&r, path, tp, n_threads, exact) != 0) {
        snprintf(t->err, sizeof(t->err), "%s", r.err);
        rig_close(&r);
        return -1;
    }
    t->vocab = r.m.cfg.vocab_size;

#define PUSH(sq, tk) do {                                                    \
        tok[n] = (tk); pos[n] = done[sq]++; seq[n] = (sq); n++;              \
    } while (0)
#define WANT(sq) do {                                                        \
        want[nl] = n - 1; t->owner[t->n_steps][nl] = (sq); nl++;                            \
    } while (0)

    for (s = 0; s < n_steps && rc == 0; s++) {
        n = 0;
        nl = 0;
        if (only < 0 || only == 0) {
            if (s == 0) {
                for (i = 0; i < STORY_PROMPT; i++) {
                    PUSH(0, story_ids[i] % t->vocab);
                }
            } else {
                PUSH(0, next[0]);
            }
            WANT(0);
        }
        if (only < 0 || only == 1) {
            if (s == 0) {
                for (i = 0; i < 3; i++) PUSH(1, prompt1[i] % t->vocab);
            } else if (s == 1) {
                for (i = 3; i < 7; i++) PUSH(1, prompt1[i] % t->vocab);
                WANT(1);
            } else {
                PUSH(1, next[1]);
                WANT(1);
            }
        }
        if ((only < 0 || only == 2) && s >= 3) {
            if (s == 3) {
                for (i = 0; i < 4; i++) PUSH(2, prompt2[i] % t->vocab);
            } else {
                PUSH(2, next[2]);
            }
            WANT(2);
        }
        if (n == 0) {
            continue;
        }
        t->logits[t->n_steps] = malloc((size_t) nl * t->vocab
                                       * sizeof(float));
        t->n_logits[t->n_steps] = nl;
        b = (llm_batch) { n, tok, pos, seq, 3, tab, nblk, nl, want,
                          t->logits[t->n_steps], 0, NULL, NULL, NULL, 0,
                          NULL };
        if (llm_backend_forward(r.be, &b) != 0) {
            snprintf(t->err, sizeof(t->err), "%s", r.be->err);
            rc = -1;
        }
        for (i = 0; i < nl; i++) {
            q = t->owner[t->n_steps][i];
            next[q] = argmax(t->logits[t->n_steps] + (size_t) i * t->vocab,
                             t->vocab);
            t->gen[q][t->n_gen[q]++] = next[q];
        }
        t->n_steps++;
    }
    rig_close(&r);
    return rc;
}


static int
same_logits(const trace *a, const trace *b)
{
    int  s;

    if (a->n_steps != b->n_steps) {
        return 0;
    }
    for (s = 0; s < a->n_steps; s++) {
        if (a->n_logits[s] != b->n_logits[s]
            || memcmp(a->logits[s], b->logits[s],
                      (size_t) a->n_logits[s] * a->vocab * sizeof(float)))
        {
            return 0;
        }
    }
    return 1;
}


static int
same_tokens(const trace *a, const trace *b)
{
    int  q;

    for (q = 0; q < 3; q++) {
        if (a->n_gen[q] != b->n_gen[q]
            || memcmp(a->gen[q], b->gen[q], a->n_gen[q] * sizeof(int32_t)))
        {
            return 0;
        }
    }
    return 1;
}


/* the largest |difference| of two runs' logits, to say how far apart a
 * failure is */
static double
max_diff(const trace *a, const trace *b)
{
    double  d = 0, e;
    size_t  i;
    int     s;

    for (s = 0; s < a->n_steps && s < b->n_steps; s++) {
        for (i = 0; i < (size_t) a->n_logits[s] * a->vocab; i++) {
            e = a->logits[s][i] - b->logits[s][i];
            d = e > d ? e : (-e > d ? -e : d);
        }
    }
    return d;
}


static void
check_tp(const char *name, const char *path, int tp, int threads1,
    int threads_n, int exact, int n_steps)
{
    trace  one, many;
    int    ok1, okn, q, n_tok = 0;

    ok1 = run_schedule(path, 1, threads1, exact, n_steps, -1, &one) == 0;
    okn = run_schedule(path, tp, threads_n, exact, n_steps, -1, &many) == 0;
    if (!ok(ok1 && okn, "%s: tp 1 and tp %d run the schedule", name, tp)) {
        printf("#   %s | %s\n", one.err, many.err);
    } else {
        for (q = 0; q < 3; q++) {
            n_tok += many.n_gen[q];
        }
        if (!ok(same_logits(&one, &many), "%s: tp %d logits == tp 1 (memcmp,"
                " %d steps, 3 sequences)", name, tp, one.n_steps))
        {
            printf("#   max |diff| %g\n", max_diff(&one, &many));
        }
        ok(same_tokens(&one, &many), "%s: tp %d greedy tokens == tp 1 (%d "
           "tokens)", name, tp, n_tok);
    }
    trace_free(&one);
    trace_free(&many);
}


/* the k-th logit row of sequence q in a run, NULL past the end */
static const float *
seq_row(const trace *t, int q, int k)
{
    int  s, i;

    for (s = 0; s < t->n_steps; s++) {
        for (i = 0; i < t->n_logits[s]; i++) {
            if (t->owner[s][i] == q && k-- == 0) {
                return t->logits[s] + (size_t) i * t->vocab;
            }
        }
    }
    return NULL;
}


/* under tp, each sequence alone == the same sequence in the batch */
static void
check_unbatched(const char *name, const char *path, int tp, int threads,
    int n_steps)
{
    trace         all, alone;
    const float  *x, *y;
    int           q, k, good = 1, ran, rows = 0;

    ran = run_schedule(path, tp, threads, 0, n_steps, -1, &all) == 0;
    for (q = 0; q < 3 && ran; q++) {
        ran = run_schedule(path, tp, threads, 0, n_steps, q, &alone) == 0;
        good &= alone.n_gen[q] == all.n_gen[q]
                && memcmp(alone.gen[q], all.gen[q],
                          all.n_gen[q] * sizeof(int32_t)) == 0;
        for (k = 0; (x = seq_row(&all, q, k)) != NULL; k++) {
            y = seq_row(&alone, q, k);
            good &= y != NULL && memcmp(x, y, all.vocab * sizeof(float)) == 0;
            rows++;
        }
        trace_free(&alone);
    }
    ok(ran && good && rows == all.n_gen[0] + all.n_gen[1] + all.n_gen[2],
       "%s: tp %d, each sequence alone == batched (%d logit rows, tokens)",
       name, tp, rows);
    trace_free(&all);
}


/* tiny260K F32 continues "Once upon a time" as the reference does, at tp */
static void
check_story(int tp)
{
    char   path[1200];
    trace  t;
    int    n = 0, rc;

    stories_path(path, sizeof(path), "f32");
    rc = run_schedule(path, tp, 2, 0, MAX_STEPS, 0, &t);
    while (rc == 0 && n < t.n_gen[0] && STORY_PROMPT + n < STORY_LEN
           && t.gen[0][n] == story_ids[STORY_PROMPT + n])
    {
        n++;
    }
    is_int(n, MAX_STEPS, "tiny260K f32 tp %d: greedy continues as the "
           "reference for %d tokens", tp, MAX_STEPS);
    trace_free(&t);
}


/* copy_block under tp copies the block on every rank: a decode through
 * copied blocks equals the same decode through the originals */
static void
check_copy_block(const char *path, int tp)
{
    static const int32_t  orig[2] = { 0, 1 }, copy[2] = { 5, 6 };
    const int32_t        *tab[1];
    int32_t               tok[20], pos[20], seq[20], nb = 2, last = 0;
    float                *a, *b;
    rig                   r;
    llm_batch             batch;
    int                   i, good = 0, refused = 0;

    if (rig_open(&r, path, tp, tp, 0) != 0) {
        ok(0, "copy_block: backend at tp %d: %s", tp, r.err);
        rig_close(&r);
        return;
    }
    a = malloc(r.m.cfg.vocab_size * sizeof(float));
    b = malloc(r.m.cfg.vocab_size * sizeof(float));
    for (i = 0; i < 20; i++) {
        tok[i] = 1 + (i * 29) % (r.m.cfg.vocab_size - 1);
        pos[i] = i;
        seq[i] = 0;
    }
    tab[0] = orig;
    batch = (llm_batch) { 19, tok, pos, seq, 1, tab, &nb, 1, &last, a,
                          0, NULL, NULL, NULL, 0, NULL };
    last = 18;
    if (llm_backend_forward(r.be, &batch) == 0
        && r.be->iface.copy_block(r.be, 5, 0) == 0
        && r.be->iface.copy_block(r.be, 6, 1) == 0)
    {
        /* position 19 through the originals, then through the copies */
        batch = (llm_batch) { 1, tok + 19, pos + 19, seq, 1, tab, &nb, 1,
                              &last, a, 0, NULL, NULL, NULL, 0, NULL };
        last = 0;
        good = llm_backend_forward(r.be, &batch) == 0;
        tab[0] = copy;
        batch.logits = b;
        good &= llm_backend_forward(r.be, &batch) == 0
                && memcmp(a, b, r.m.cfg.vocab_size * sizeof(float)) == 0;
    }
    refused = r.be->iface.copy_block(r.be, 16, 0) != 0
              && strstr(r.be->err, "outside the pool of 16") != NULL;
    ok(good, "tp %d: decode through copied KV blocks == through the "
       "originals (every rank's heads copied)", tp);
    ok(refused, "tp %d: copy to block 16 refused: \"%s\"", tp, r.be->err);
    free(a);
    free(b);
    rig_close(&r);
}


/* ---------------------------------------------------------------------------
 * the scheduler over a TP backend
 */

#define SCHED_JOBS  8
#define SCHED_OUT   24

typedef struct {
    int32_t  out[SCHED_OUT];
    int      n_out;
    int      finished;
} sched_rec;


static void
sched_on_token(void *user, int32_t token, const llm_sample_out *lp)
{
    sched_rec  *r = user;

    (void) lp;
    if (r->n_out < SCHED_OUT) {
        r->out[r->n_out] = token;
    }
    r->n_out++;
}


static void
sched_on_finish(void *user, const llm_seq_result *res)
{
    (void) res;
    ((sched_rec *) user)->finished = 1;
}


/* 8 requests sharing a 20-token prefix (prefix cache hits) in a pool of
 * 12 blocks of 16 (too small for all: preemption), half greedy, half
 * seeded sampling; 0 and the streams in rec, or -1 */
static int
run_sched(const char *path, int tp, int threads, sched_rec *rec,
    llm_sched_stats *st)
{
    llm_model            m;
    llm_backend_options  bo;
    llm_sched_options    so;
    llm_request          req;
    llm_backend         *be = NULL;
    llm_sched           *s = NULL;
    llm_seq             *seq;
    int32_t              prompt[40];
    char                 err[768];
    int                  j, i, steps = 0, rc = -1;

    memset(rec, 0, SCHED_JOBS * sizeof(*rec));
    if (llm_model_load(&m, path, 0, tp) != 0) {
        printf("# %s\n", m.err);
        goto done;
    }
    llm_backend_options_default(&bo, &m);
    bo.n_threads = threads;
    bo.kv_n_blocks = 12;
    bo.max_batch_tokens = 32;
    bo.tp_slices = llm_tp_slices(&m);
    be = llm_backend_create("cpu", &m, &bo, err, sizeof(err));
    llm_sched_options_default(&so);
    so.on_token = sched_on_token;
    so.on_finish = sched_on_finish;
    s = be != NULL ? llm_sched_create(be, &so, err, sizeof(err)) : NULL;
    if (s == NULL) {
        printf("# %s\n", err);
        goto done;
    }
    for (j = 0; j < SCHED_JOBS; j++) {
        for (i = 0; i < 40; i++) {
            prompt[i] = i < 20 ? 3 + (i * 37) % (m.cfg.vocab_size - 3)
                               : 3 + (i * 11 + j * 101) % (m.cfg.vocab_size
                                                           - 3);
        }
        memset(&req, 0, sizeof(req));
        req.prompt = prompt;
        req.n_prompt = 24 + 2 * j;
        llm_sampling_params_default(&req.sampling);
        if (j % 2) {
            req.sampling.temperature = 0.8f;
            req.sampling.seed = 1000 + j;
            req.sampling.has_seed = 1;
        } else {
            req.sampling.temperature = 0.0f;
        }
        req.max_tokens = SCHED_OUT;
        req.ignore_eos = 1;
        req.user = &rec[j];
        if (llm_sched_add(s, &req, &seq, err, sizeof(err)) != LLM_SCHED_OK) {
            printf("# add: %s\n", err);
            goto done;
        }
    }
    while (llm_sched_has_work(s) && steps++ < 1000) {
        if (llm_sched_step(s) < 0) {
            printf("# step: %s\n", be->err);
            goto done;
        }
    }
    llm_sched_stats_get(s, st);
    rc = 0;
done:
    llm_sched_free(s);
    llm_backend_free(be);
    llm_model_free(&m);
    return rc;
}


static void
check_sched(const char *name, const char *path, int tp, int threads_n)
{
    sched_rec        one[SCHED_JOBS], many[SCHED_JOBS];
    llm_sched_stats  st1, stn;
    int              j, same = 1, all = 1;

    if (!ok(run_sched(path, 1, 1, one, &st1) == 0
            && run_sched(path, tp, threads_n, many, &stn) == 0,
            "%s: scheduler runs 8 requests at tp 1 and tp %d", name, tp))
    {
        return;
    }
    for (j = 0; j < SCHED_JOBS; j++) {
        all &= one[j].finished && one[j].n_out == SCHED_OUT;
        same &= many[j].finished && many[j].n_out == one[j].n_out
                && memcmp(many[j].out, one[j].out, sizeof(one[j].out)) == 0;
    }
    ok(all && same, "%s: tp %d streams == tp 1 (8 x %d tokens; greedy and "
       "seeded)", name, tp, SCHED_OUT);
    ok(stn.preemptions > 0 && stn.prefix_hit_tokens > 0
       && stn.preemptions == st1.preemptions
       && stn.prefix_hit_tokens == st1.prefix_hit_tokens,
       "%s: with preemptions (%llu) and prefix hits (%llu tokens), as at "
       "tp 1", name, (unsigned long long) stn.preemptions,
       (unsigned long long) stn.prefix_hit_tokens);
}


int
main(void)
{
    char         path[1200];

    smollm2 = tap_model();

    test_plan();
    test_sum();
    test_group();

    stories_path(path, sizeof(path), "f32");
    check_tp("tiny260K f32", path, 2, 1, 2, 0, MAX_STEPS);
    check_tp("tiny260K f32", path, 4, 2, 4, 0, MAX_STEPS);
    check_tp("tiny260K f32 exact", path, 4, 1, 4, 1, 6);
    stories_path(path, sizeof(path), "f16");
    check_tp("tiny260K f16", path, 4, 1, 4, 0, MAX_STEPS);
    stories_path(path, sizeof(path), "q4_1");
    check_tp("tiny260K q4_1", path, 2, 2, 4, 0, MAX_STEPS);
    check_unbatched("tiny260K q4_1", path, 2, 4, MAX_STEPS);
    check_sched("tiny260K q4_1", path, 2, 2);
    stories_path(path, sizeof(path), "f32");
    check_sched("tiny260K f32", path, 4, 4);
    check_copy_block(path, 4);
    check_story(1);
    check_story(4);
    check_tp("SmolLM2 Q4_1", smollm2, 3, 2, 3, 0, 6);

    /* architecture quirks and the Hugging Face loader, tiny models made
     * by tools/oracle.py (4 heads, 2 KV heads) */
    check_tp("qwen2 GGUF (QKV bias)", "t/data/models/hf-qwen2.gguf", 2, 1, 2,
             0, 8);
    check_tp("qwen3 GGUF (QK-norm)", "t/data/models/hf-qwen3.gguf", 2, 1, 2,
             0, 8);
    check_tp("llama3 HF directory (rope scaling)", "t/data/models/hf-llama3",
             2, 1, 2, 0, 8);
    /* post norms after the row-split sums, local and global layers */
    check_tp("gemma3 HF directory (post norms, GeGLU)",
             "t/data/models/hf-gemma3", 2, 1, 2, 0, 8);
    check_tp("gemma3 GGUF", "t/data/models/hf-gemma3.gguf", 2, 1, 2, 0, 8);
    check_unbatched("gemma3 GGUF", "t/data/models/hf-gemma3.gguf", 1, 2, 8);
    return tap_done();
}
