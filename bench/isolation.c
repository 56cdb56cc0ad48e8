/*
 * Isolation of the interactive class from a saturating batch class
 * (docs/scheduler.md, "Benchmark: isolation"), in process: the scheduler
 * and the CPU backend, no nginx, no ring.
 *
 *   build/bench/isolation --model PATH [--threads 2] [--rounds 2]
 *       [--seconds 15] [--warmup 5] [--batch-streams 32]
 *       [--batch-prompt 1024] [--batch-tokens 64] [--inter-streams 2]
 *       [--inter-prompt 48] [--inter-tokens 32] [--think-ms 0]
 *       [--max-batched 256] [--max-prefill 64]
 *
 * Workload. Batch: --batch-streams closed-loop streams, each a sequence of
 * requests of --batch-prompt random token ids (never shared, so no prefix
 * hit) and --batch-tokens generated, resubmitted as soon as one ends.
 * Interactive: --inter-streams closed-loop streams of --inter-prompt
 * random ids and --inter-tokens generated, the next --think-ms after one
 * ends. Greedy, EOS ignored. KV holds every stream's whole sequence (no
 * preemption needed).
 *
 * Modes, interleaved in every round, each on a fresh scheduler over the
 * same backend, interactive measured for --seconds after --warmup of
 * batch load:
 *   idle       interactive alone
 *   classes    batch at LLM_PRIORITY_BATCH, fair_key 1; interactive at
 *              LLM_PRIORITY_INTERACTIVE, fair_key 2; --max-prefill
 *   one-class  everybody at priority 0, no keys (the old behaviour: one
 *              class), same --max-prefill
 *   today      one class and no prefill budget (max_prefill_tokens =
 *              max_batched_tokens): the scheduler before this change
 *
 * Per mode and round: interactive requests finished, TTFT p50/p95 (ms;
 * requests still without a first token at the end count with the time
 * they waited, a lower bound, flagged '>='), TPOT p50/p95 (ms, finished
 * requests), batch generated and processed (prefill + decode) tokens/s,
 * load average and the CPU cores the process got. Then per mode the
 * median over rounds of the p50s (TPOT: over the rounds that finished a
 * request) and their ratio to idle.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "common/priority.h"
#include "model/model.h"
#include "sched/scheduler.h"

#define ISO_MAX_STREAMS   256
#define ISO_MAX_REQS      100000
#define ISO_MAX_ROUNDS    16

enum { MODE_IDLE, MODE_CLASSES, MODE_ONE_CLASS, MODE_TODAY, N_MODES };

static const char *mode_name[N_MODES] = {
    "idle", "classes", "one-class", "today"
};

typedef struct {
    const char  *model;
    int          threads, rounds, seconds, warmup;
    int          batch_streams, batch_prompt, batch_tokens;
    int          inter_streams, inter_prompt, inter_tokens, think_ms;
    int          max_batched, max_prefill;
} iso_opts;

/* one request */
typedef struct {
    int              batch;         /* 1: batch stream */
    int              stream;
    int              n_out;
    int              done;
    double           t_submit;
    double           t_first;
    double           t_done;
} iso_req;

/* one stream's state */
typedef struct {
    iso_req         *cur;           /* NULL: between requests */
    double           next_at;       /* interactive: next submission */
} iso_stream;

typedef struct {
    int              n_done;        /* interactive finished in the window */
    int              censored;      /* TTFT p50 is a lower bound */
    double           ttft50, ttft95, tpot50, tpot95;   /* ms */
    double           batch_gen_tps, batch_proc_tps;
    double           load, cores;
} iso_result;

static iso_req      reqs[ISO_MAX_REQS];
static int          n_reqs;
static double       batch_gen_in_window;
static double       win_start, win_end;


static double
now_s(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


static double
cpu_s(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


static double
load_average(void)
{
    FILE    *f = fopen("/proc/loadavg", "r");
    double   la = -1;

    if (f != NULL) {
        if (fscanf(f, "%lf", &la) != 1) {
            la = -1;
        }
        fclose(f);
    }
    return la;
}


static void
on_token(void *user, int32_t token, const llm_sample_out *lp)
{
    iso_req  *r = user;
    double    t = now_s();

    (void) token;
    (void) lp;
    if (r->n_out++ == 0) {
        r->t_first = t;
    }
    if (r->batch && t >= win_start && t < win_end) {
        batch_gen_in_window++;
    }
}


static void
on_finish(void *user, const llm_seq_result *res)
{
    iso_req  *r = user;

    (void) res;
    r->done = 1;
    r->t_done = now_s();
}


static uint64_t  rng = 0x9e3779b97f4a7c15ull;

static uint32_t
rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t) (rng % n);
}


/* a new request of stream k: random ids, so nothing is a prefix hit */
static int
submit(llm_sched *s, const iso_opts *o, int mode, int batch, int k,
    int n_vocab, iso_stream *st)
{
    static int32_t  ids[32768];
    llm_request     rq;
    llm_seq        *q;
    iso_req        *r;
    char            err[512];
    int             i, n = batch ? o->batch_prompt : o->inter_prompt;

    if (n_reqs == ISO_MAX_REQS) {
        fprintf(stderr, "isolation: more than %d requests\n", ISO_MAX_REQS);
        return -1;
    }
    for (i = 0; i < n; i++) {
        ids[i] = 3 + rnd(n_vocab - 3);
    }
    r = &reqs[n_reqs++];
    memset(r, 0, sizeof(*r));
    r->batch = batch;
    r->stream = k;
    r->t_submit = now_s();
    memset(&rq, 0, sizeof(rq));
    rq.prompt = ids;
    rq.n_prompt = n;
    llm_sampling_params_default(&rq.sampling);
    rq.sampling.temperature = 0.0f;
    rq.max_tokens = batch ? o->batch_tokens : o->inter_tokens;
    rq.ignore_eos = 1;
    if (mode == MODE_CLASSES) {
        rq.priority = batch ? LLM_PRIORITY_BATCH : LLM_PRIORITY_INTERACTIVE;
        rq.fair_key = batch ? 1 : 2;
    }
    rq.user = r;
    if (llm_sched_add(s, &rq, &q, err, sizeof(err)) != LLM_SCHED_OK) {
        fprintf(stderr, "isolation: request refused: %s\n", err);
        return -1;
    }
    st->cur = r;
    return 0;
}


static int
cmp_double(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return (x > y) - (x < y);
}


static double
pct(double *v, int n, double p)
{
    int  i;

    if (n == 0) {
        return 0;
    }
    qsort(v, n, sizeof(*v), cmp_double);
    i = (int) (p * (n - 1) + 0.5);
    return v[i];
}


static int
run_mode(llm_backend *be, const iso_opts *o, int mode, iso_result *res)
{
    static iso_stream   bs[ISO_MAX_STREAMS], is[ISO_MAX_STREAMS];
    static double       ttft[ISO_MAX_REQS], tpot[ISO_MAX_REQS];
    llm_sched_options   so;
    llm_sched_stats     st0, st1;
    llm_sched          *s;
    char                err[512];
    double              t0, t, c0 = 0, inter_proc = 0;
    int                 i, k, n_ttft = 0, n_tpot = 0, censored = 0;
    int                 loaded = mode != MODE_IDLE, in_window = 0;
    int                 n_vocab = be->model->cfg.vocab_size;

    llm_sched_options_default(&so);
    so.max_batched_tokens = o->max_batched;
    so.max_prefill_tokens = mode == MODE_TODAY ? o->max_batched
                                               : o->max_prefill;
    so.on_token = on_token;
    so.on_finish = on_finish;
    s = llm_sched_create(be, &so, err, sizeof(err));
    if (s == NULL) {
        fprintf(stderr, "isolation: %s\n", err);
        return -1;
    }
    n_reqs = 0;
    batch_gen_in_window = 0;
    memset(bs, 0, sizeof(bs));
    memset(is, 0, sizeof(is));
    memset(&st0, 0, sizeof(st0));
    t0 = now_s();
    win_start = t0 + (loaded ? o->warmup : 0);
    win_end = win_start + o->seconds;
    for (k = 0; loaded && k < o->batch_streams; k++) {
        if (submit(s, o, mode, 1, k, n_vocab, &bs[k]) != 0) {
            goto failed;
        }
    }
    for (k = 0; k < o->inter_streams; k++) {
        is[k].next_at = win_start + k * 0.01;
    }
    while ((t = now_s()) < win_end) {
        if (!in_window && t >= win_start) {
            in_window = 1;
            llm_sched_stats_get(s, &st0);
            c0 = cpu_s();
        }
        for (k = 0; loaded && k < o->batch_streams; k++) {
            if (bs[k].cur->done
                && submit(s, o, mode, 1, k, n_vocab, &bs[k]) != 0)
            {
                goto failed;
            }
        }
        for (k = 0; k < o->inter_streams; k++) {
            if (is[k].cur != NULL && is[k].cur->done) {
                is[k].cur = NULL;
                is[k].next_at = t + o->think_ms / 1000.0;
            }
            if (is[k].cur == NULL && t >= is[k].next_at
                && submit(s, o, mode, 0, k, n_vocab, &is[k]) != 0)
            {
                goto failed;
            }
        }
        if (llm_sched_step(s) < 0) {
            fprintf(stderr, "isolation: step failed\n");
            goto failed;
        }
        if (!llm_sched_has_work(s)) {
            usleep(1000);
        }
    }
    llm_sched_stats_get(s, &st1);
    res->cores = (cpu_s() - c0) / o->seconds;
    res->load = load_average();

    /* interactive requests submitted in the window */
    for (i = 0; i < n_reqs; i++) {
        iso_req  *r = &reqs[i];

        if (r->batch || r->t_submit < win_start) {
            continue;
        }
        if (r->n_out > 0) {
            ttft[n_ttft++] = (r->t_first - r->t_submit) * 1e3;
        } else {
            ttft[n_ttft++] = (win_end - r->t_submit) * 1e3;
            censored++;
        }
        if (r->done) {
            res->n_done++;
            inter_proc += o->inter_prompt + r->n_out - 1;
            if (r->n_out > 1) {
                tpot[n_tpot++] = (r->t_done - r->t_first) * 1e3
                                 / (r->n_out - 1);
            }
        }
    }
    res->censored = censored;
    res->ttft50 = pct(ttft, n_ttft, 0.5);
    res->ttft95 = pct(ttft, n_ttft, 0.95);
    res->tpot50 = pct(tpot, n_tpot, 0.5);
    res->tpot95 = pct(tpot, n_tpot, 0.95);
    res->batch_gen_tps = batch_gen_in_window / o->seconds;
    res->batch_proc_tps = loaded
        ? ((double) (st1.computed_tokens - st0.computed_tokens) - inter_proc)
          / o->seconds
        : 0;
    llm_sched_free(s);
    return 0;

failed:
    llm_sched_free(s);
    return -1;
}


static int
parse_opts(iso_opts *o, int argc, char **argv)
{
    struct { const char *name; int *v; int lo, hi; } ints[] = {
        { "--threads", &o->threads, 1, 256 },
        { "--rounds", &o->rounds, 1, ISO_MAX_ROUNDS },
        { "--seconds", &o->seconds, 1, 3600 },
        { "--warmup", &o->warmup, 0, 3600 },
        { "--batch-streams", &o->batch_streams, 0, ISO_MAX_STREAMS },
        { "--batch-prompt", &o->batch_prompt, 1, 32768 },
        { "--batch-tokens", &o->batch_tokens, 1, 4096 },
        { "--inter-streams", &o->inter_streams, 1, ISO_MAX_STREAMS },
        { "--inter-prompt", &o->inter_prompt, 1, 32768 },
        { "--inter-tokens", &o->inter_tokens, 2, 4096 },
        { "--think-ms", &o->think_ms, 0, 600000 },
        { "--max-batched", &o->max_batched, 1, 65536 },
        { "--max-prefill", &o->max_prefill, 1, 65536 },
    };
    char  *end;
    long   v;
    int    i, j;

    memset(o, 0, sizeof(*o));
    o->threads = 2;
    o->rounds = 2;
    o->seconds = 15;
    o->warmup = 5;
    o->batch_streams = 32;
    o->batch_prompt = 1024;
    o->batch_tokens = 64;
    o->inter_streams = 2;
    o->inter_prompt = 48;
    o->inter_tokens = 32;
    o->max_batched = 256;
    o->max_prefill = 64;
    for (i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) {
            fprintf(stderr, "isolation: %s needs a value\n", argv[i]);
            return -1;
        }
        if (strcmp(argv[i], "--model") == 0) {
            o->model = argv[i + 1];
            continue;
        }
        for (j = 0; j < (int) (sizeof(ints) / sizeof(ints[0])); j++) {
            if (strcmp(argv[i], ints[j].name) == 0) {
                break;
            }
        }
        if (j == (int) (sizeof(ints) / sizeof(ints[0]))) {
            fprintf(stderr, "isolation: unknown option \"%s\"\n", argv[i]);
            return -1;
        }
        v = strtol(argv[i + 1], &end, 10);
        if (*end != '\0' || v < ints[j].lo || v > ints[j].hi) {
            fprintf(stderr, "isolation: %s %s: not an integer in %d..%d\n",
                    argv[i], argv[i + 1], ints[j].lo, ints[j].hi);
            return -1;
        }
        *ints[j].v = (int) v;
    }
    if (o->model == NULL) {
        fprintf(stderr, "isolation: --model PATH is required\n");
        return -1;
    }
    if (o->max_prefill > o->max_batched) {
        fprintf(stderr, "isolation: --max-prefill %d exceeds --max-batched "
                "%d\n", o->max_prefill, o->max_batched);
        return -1;
    }
    return 0;
}


/* 0 when n is 0 (no round had a sample) */
static double
median(double *v, int n)
{
    if (n == 0) {
        return 0;
    }
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}


int
main(int argc, char **argv)
{
    static iso_result     res[ISO_MAX_ROUNDS][N_MODES];
    iso_opts              o;
    llm_backend_options   bo;
    llm_backend          *be;
    llm_model             m;
    char                  err[512];
    double                v[ISO_MAX_ROUNDS], idle_ttft, idle_tpot;
    double                ttft[N_MODES], tpot[N_MODES], gen[N_MODES];
    double                proc[N_MODES];
    int                   r, n, md, per_seq, cens[N_MODES];

    if (parse_opts(&o, argc, argv) != 0) {
        return 2;
    }
    if (llm_model_load(&m, o.model, 0, 1) != 0) {
        fprintf(stderr, "isolation: %s\n", m.err);
        return 1;
    }
    llm_backend_options_default(&bo, &m);
    bo.n_threads = o.threads;
    bo.max_batch_tokens = o.max_batched;
    per_seq = (o.batch_prompt + o.batch_tokens + bo.kv_block_size - 1)
              / bo.kv_block_size;
    bo.kv_n_blocks = o.batch_streams * per_seq
                     + o.inter_streams * ((o.inter_prompt + o.inter_tokens
                                           + bo.kv_block_size - 1)
                                          / bo.kv_block_size) + 16;
    be = llm_backend_create("cpu", &m, &bo, err, sizeof(err));
    if (be == NULL) {
        fprintf(stderr, "isolation: %s\n", err);
        llm_model_free(&m);
        return 1;
    }
    printf("# isolation: %d batch streams (%d-token prompts, %d out), %d "
           "interactive (%d-token prompts, %d out, think %d ms), %d s after "
           "%d s warm-up, max_batched_tokens %d, max_prefill_tokens %d, "
           "batch_share %d%%, %d threads, %d rounds\n",
           o.batch_streams, o.batch_prompt, o.batch_tokens, o.inter_streams,
           o.inter_prompt, o.inter_tokens, o.think_ms, o.seconds, o.warmup,
           o.max_batched, o.max_prefill, LLM_DEFAULT_BATCH_SHARE, o.threads,
           o.rounds);
    printf("%-5s %-9s %5s %15s %9s %9s %9s %12s %12s %5s %5s\n", "round",
           "mode", "done", "TTFT p50 ms", "p95", "TPOT p50", "p95",
           "batch gen/s", "batch proc/s", "load", "cores");
    for (r = 0; r < o.rounds; r++) {
        for (md = 0; md < N_MODES; md++) {
            iso_result  *x = &res[r][md];

            memset(x, 0, sizeof(*x));
            if (run_mode(be, &o, md, x) != 0) {
                llm_backend_free(be);
                llm_model_free(&m);
                return 1;
            }
            printf("%-5d %-9s %5d %2s%13.1f %9.1f %9.2f %9.2f %12.1f "
                   "%12.1f %5.2f %5.2f\n", r + 1, mode_name[md], x->n_done,
                   x->censored * 2 > x->n_done ? ">=" : "", x->ttft50,
                   x->ttft95, x->tpot50, x->tpot95, x->batch_gen_tps,
                   x->batch_proc_tps, x->load, x->cores);
            fflush(stdout);
        }
    }
    for (md = 0; md < N_MODES; md++) {
        for (cens[md] = 0, r = 0; r < o.rounds; r++) {
            v[r] = res[r][md].ttft50;
            cens[md] |= res[r][md].censored * 2 > res[r][md].n_done;
        }
        ttft[md] = median(v, o.rounds);
        /* rounds that finished no interactive request have no TPOT */
        for (n = 0, r = 0; r < o.rounds; r++) {
            if (res[r][md].n_done > 0) {
                v[n++] = res[r][md].tpot50;
            }
        }
        tpot[md] = median(v, n);
        for (r = 0; r < o.rounds; r++) {
            v[r] = res[r][md].batch_gen_tps;
        }
        gen[md] = median(v, o.rounds);
        for (r = 0; r < o.rounds; r++) {
            v[r] = res[r][md].batch_proc_tps;
        }
        proc[md] = median(v, o.rounds);
    }
    idle_ttft = ttft[MODE_IDLE];
    idle_tpot = tpot[MODE_IDLE];
    printf("\n# median over rounds of the p50s; ratio to idle (targets: "
           "TTFT <= 2x, TPOT <= 1.5x)\n");
    printf("%-9s %14s %8s %12s %8s %12s %12s\n", "mode", "TTFT p50 ms",
           "ratio", "TPOT p50 ms", "ratio", "batch gen/s", "batch proc/s");
    for (md = 0; md < N_MODES; md++) {
        printf("%-9s %2s%12.1f %7.2fx %12.2f %7.2fx %12.1f %12.1f\n",
               mode_name[md], cens[md] ? ">=" : "", ttft[md],
               idle_ttft > 0 ? ttft[md] / idle_ttft : 0, tpot[md],
               idle_tpot > 0 ? tpot[md] / idle_tpot : 0, gen[md], proc[md]);
    }
    llm_backend_free(be);
    llm_model_free(&m);
    return 0;
}
