/*
 * ngx_llm_engine bench: the batching workload of docs/perf.md run inside the
 * engine (no nginx, no ring), to measure what the scheduler and the batched
 * forward give before the serving path adds its own cost.
 *
 *   ngx_llm_engine bench --model PATH [--streams 1,4,16,64] [--tokens 64]
 *       [--threads 2] [--no-prefix-cache] [--max-batched-tokens 512]
 *       [--repeat 1] [--workload chat|grounded] [--speculative N]
 *       [--ngram K] [--spec-compare]
 *
 * Workload: 16 different one-sentence user messages rendered with the
 * model's own chat template (~40 tokens each on SmolLM2), N of them
 * submitted at once (message i % 16), greedy, `tokens` generated each with
 * EOS ignored. For every N: aggregate generated tokens/s (all tokens over
 * the wall time from submission to the last token), TTFT and TPOT
 * p50/p95/p99, and the mean forward time of pure decode steps at full
 * batch (the batched matmul's share). Then the ratio of aggregate
 * throughput at 16 streams to 1.
 *
 * --workload grounded: 8 input-grounded requests instead (edit, extract,
 * summarise or copy a given paragraph: the output copies spans of the
 * prompt), greedy, ending at EOS or `tokens`. --speculative N: prompt-
 * lookup speculative decoding with N drafts (--ngram K, default 3).
 * --spec-compare: for each stream count, `repeat` rounds of one run
 * without speculation and one with it, interleaved (so load from others
 * on the machine hits both alike); every run printed with the load
 * average, then the median tokens/s of each and their ratio.
 *
 * defines: llm_cli_bench
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "backend/backend.h"
#include "server/cli.h"
#include "jinja/jinja.h"
#include "model/model.h"
#include "sched/scheduler.h"
#include "tokenizer/tokenizer.h"

#define BENCH_MAX_STREAMS  1024
#define BENCH_MAX_PROMPT   256
#define BENCH_N_MESSAGES   16

/* input-grounded: the answer copies spans of the given text */
#define BENCH_N_GROUNDED   8

static const char *bench_grounded[BENCH_N_GROUNDED] = {
    "Rewrite the following text, replacing every \"cat\" with \"dog\". "
    "Keep everything else the same.\n\nThe cat sat by the window every "
    "morning. When the sun rose, the cat stretched and yawned. Our "
    "neighbour said the cat was the laziest animal on the street, but the "
    "cat did not care. At noon the cat ate its food and went back to "
    "sleep.",
    "Copy the following paragraph exactly, but fix the spelling "
    "mistakes.\n\nThe train to the city leaves the station at eight "
    "oclock. Passengers should by their tickets before they get on the "
    "train. The jouney takes about two hours, and there is a small cafe "
    "in the middle car where you can buy coffee and sandwiches.",
    "Extract every sentence that mentions water from this text and list "
    "them.\n\nThe garden needs care in the summer. Water the tomatoes "
    "every evening. The roses like full sun. Do not water the cactus more "
    "than once a month. Pick the beans when they are long and green. "
    "Fresh water in the bird bath keeps the birds coming back.",
    "Summarize this text in two sentences, using its own words where you "
    "can.\n\nThe library on Main Street will close for repairs from "
    "the first of June to the end of August. During the repairs, books "
    "can be returned at the town hall. The children's reading club will "
    "meet in the park on Saturday mornings. The library will reopen in "
    "September with a new computer room.",
    "Repeat the following list, adding a price of 2 dollars after each "
    "item.\n\n- apples\n- bread\n- milk\n- eggs\n- butter\n"
    "- cheese\n- rice\n- tea",
    "Change the following text from the past tense to the present tense."
    "\n\nTom walked to school. He carried a red bag and a green "
    "umbrella. At school he met his friend Anna. They played football in "
    "the yard and then they went to the classroom.",
    "Correct the grammar of this email and keep its content.\n\nDear "
    "Mr Smith, I am writing for ask about the meeting on Friday. Can we "
    "moving it to Monday? I has a doctor appointment on Friday morning. "
    "Thank you for you help. Best regards, Maria",
    "Turn this text into a numbered list of steps.\n\nFirst, boil "
    "water in a large pot. Then add salt and the pasta. Cook the pasta "
    "for ten minutes. Meanwhile, warm the tomato sauce in a pan. Drain "
    "the pasta, mix it with the sauce and serve it with cheese.",
};

static const char *bench_messages[BENCH_N_MESSAGES] = {
    "What is the capital of France and why is it famous?",
    "Explain in simple words how a rainbow forms in the sky.",
    "Write a short poem about a cat sleeping in the sun.",
    "Give me three tips for staying focused while studying.",
    "Why do leaves change color in the autumn season?",
    "Describe the taste of a fresh strawberry to a friend.",
    "How does a bicycle stay upright when it is moving?",
    "Suggest a name for a small bakery near the sea.",
    "What are the main differences between frogs and toads?",
    "Tell me a fun fact about the planet Jupiter.",
    "How should I prepare for my first job interview?",
    "Summarize the story of Little Red Riding Hood.",
    "What makes a good cup of coffee in the morning?",
    "Explain why the ocean water tastes salty.",
    "Recommend a hobby for someone who likes being outdoors.",
    "How do bees make honey from the flowers they visit?",
};

typedef struct {
    const char  *model;
    int          streams[16];
    int          n_streams;
    int          tokens;
    int          threads;
    int          prefix_caching;
    int          max_batched;
    int          repeat;       /* runs per stream count; the fastest kept */
    int          grounded;     /* --workload grounded */
    int          spec_draft;   /* --speculative: drafts a step, 0 off */
    int          spec_ngram;
    int          spec_compare; /* off and on interleaved, medians */
    int          first;        /* request i gets message first + i */
} bench_opts;

static int32_t  bench_eos = -1;     /* the model's end token (grounded) */

/* one request's record */
typedef struct {
    int              n_out;
    int              done;
    llm_seq_result   res;
} bench_req;

/* one forward's size and time, for the decode-step figure */
typedef struct {
    int              n_tokens;
    int              n_running;
    double           secs;
} bench_step;


static double
now_s(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


/* CPU seconds of the whole process (all threads): under contention from
   other processes, wall-clock figures stretch but this does not */
static double
cpu_s(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


static void
on_token(void *user, int32_t token, const llm_sample_out *lp)
{
    (void) token;
    (void) lp;
    ((bench_req *) user)->n_out++;
}


static void
on_finish(void *user, const llm_seq_result *r)
{
    bench_req  *b = user;

    b->done = 1;
    b->res = *r;
}


/* ---------------------------------------------------------------------------
 * options
 */

static void
usage(void)
{
    fprintf(stderr,
        "usage: ngx_llm_engine bench --model PATH [--streams 1,4,16,64] "
        "[--tokens 64]\n"
        "       [--threads 2] [--no-prefix-cache] "
        "[--max-batched-tokens 512] [--repeat 1]\n"
        "       [--workload chat|grounded] [--speculative N] [--ngram K] "
        "[--spec-compare]\n");
}


static int
parse_streams(bench_opts *o, const char *s)
{
    char  *end;
    long   v;

    o->n_streams = 0;
    while (*s != '\0' && o->n_streams < 16) {
        v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > BENCH_MAX_STREAMS
            || (*end != ',' && *end != '\0'))
        {
            return -1;
        }
        o->streams[o->n_streams++] = (int) v;
        s = *end == ',' ? end + 1 : end;
    }
    return o->n_streams > 0 ? 0 : -1;
}


static int
parse_int(const char *s, int lo, int hi, int *out)
{
    char  *end;
    long   v = strtol(s, &end, 10);

    if (end == s || *end != '\0' || v < lo || v > hi) {
        return -1;
    }
    *out = (int) v;
    return 0;
}


static int
parse_opts(bench_opts *o, int argc, char **argv)
{
    int  i;

    memset(o, 0, sizeof(*o));
    parse_streams(o, "1,4,16,64");
    o->tokens = 64;
    o->threads = 2;
    o->prefix_caching = 1;
    o->max_batched = 256;          /* the CPU engine's default */
    o->repeat = 1;
    o->spec_ngram = LLM_SPEC_DEFAULT_NGRAM;
    for (i = 1; i < argc; i++) {
        const char  *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--no-prefix-cache") == 0) {
            o->prefix_caching = 0;
            continue;
        }
        if (strcmp(a, "--spec-compare") == 0) {
            o->spec_compare = 1;
            continue;
        }
        if (v == NULL) {
            fprintf(stderr, "bench: %s needs a value\n", a);
            return -1;
        }
        i++;
        if (strcmp(a, "--model") == 0) {
            o->model = v;
        } else if (strcmp(a, "--streams") == 0) {
            if (parse_streams(o, v) != 0) {
                fprintf(stderr, "bench: --streams \"%s\": expected a comma "
                        "list of 1..%d\n", v, BENCH_MAX_STREAMS);
                return -1;
            }
        } else if (strcmp(a, "--tokens") == 0) {
            if (parse_int(v, 1, 4096, &o->tokens) != 0) {
                fprintf(stderr, "bench: --tokens \"%s\": 1..4096\n", v);
                return -1;
            }
        } else if (strcmp(a, "--threads") == 0) {
            if (parse_int(v, 1, 1024, &o->threads) != 0) {
                fprintf(stderr, "bench: --threads \"%s\": 1..1024\n", v);
                return -1;
            }
        } else if (strcmp(a, "--repeat") == 0) {
            if (parse_int(v, 1, 100, &o->repeat) != 0) {
                fprintf(stderr, "bench: --repeat \"%s\": 1..100\n", v);
                return -1;
            }
        } else if (strcmp(a, "--workload") == 0) {
            if (strcmp(v, "chat") != 0 && strcmp(v, "grounded") != 0) {
                fprintf(stderr, "bench: --workload \"%s\": chat or "
                        "grounded\n", v);
                return -1;
            }
            o->grounded = strcmp(v, "grounded") == 0;
        } else if (strcmp(a, "--speculative") == 0) {
            if (parse_int(v, 0, LLM_SPEC_MAX_DRAFT, &o->spec_draft) != 0) {
                fprintf(stderr, "bench: --speculative \"%s\": 0..%d\n", v,
                        LLM_SPEC_MAX_DRAFT);
                return -1;
            }
        } else if (strcmp(a, "--ngram") == 0) {
            if (parse_int(v, 1, LLM_SPEC_MAX_NGRAM, &o->spec_ngram) != 0) {
                fprintf(stderr, "bench: --ngram \"%s\": 1..%d\n", v,
                        LLM_SPEC_MAX_NGRAM);
                return -1;
            }
        } else if (strcmp(a, "--max-batched-tokens") == 0) {
            if (parse_int(v, 1, 65536, &o->max_batched) != 0) {
                fprintf(stderr, "bench: --max-batched-tokens \"%s\": "
                        "1..65536\n", v);
                return -1;
            }
        } else {
            fprintf(stderr, "bench: unknown option \"%s\"\n", a);
            return -1;
        }
    }
    if (o->model == NULL) {
        fprintf(stderr, "bench: --model PATH is required\n");
        return -1;
    }
    if (o->spec_compare && o->spec_draft == 0) {
        o->spec_draft = 5;
    }
    return 0;
}


/* ---------------------------------------------------------------------------
 * prompts
 */

static void
add_special(cJSON *obj, const char *name, const llm_tokenizer *tok,
    int32_t id)
{
    const char  *text;
    size_t       len;
    char        *copy;

    text = id >= 0 ? llm_token_text(tok, id, &len) : NULL;
    if (text == NULL) {
        return;
    }
    copy = strndup(text, len);
    if (copy != NULL) {
        cJSON_AddStringToObject(obj, name, copy);
        free(copy);
    }
}


/* one user message in the model's chat template (ChatML when the model
 * has none); malloc'ed text or NULL with a message printed */
static char *
render_message(const llm_model *m, const llm_tokenizer *tok,
    const jinja_tmpl *t, const char *msg)
{
    cJSON   *messages, *one, *special, *ctx;
    char    *out = NULL, err[512];
    size_t   out_len, n;

    if (t == NULL) {
        n = strlen(msg) + 128;
        out = malloc(n);
        if (out != NULL) {
            snprintf(out, n, "<|im_start|>user\n%s<|im_end|>\n"
                     "<|im_start|>assistant\n", msg);
        }
        return out;
    }
    messages = cJSON_CreateArray();
    one = cJSON_CreateObject();
    cJSON_AddStringToObject(one, "role", "user");
    cJSON_AddStringToObject(one, "content", msg);
    cJSON_AddItemToArray(messages, one);
    special = cJSON_CreateObject();
    add_special(special, "bos_token", tok, llm_tokenizer_bos(tok));
    add_special(special, "eos_token", tok, llm_tokenizer_eos(tok));
    ctx = jinja_chat_context(messages, NULL, 1, special, NULL);
    if (ctx == NULL || jinja_render(t, ctx, &out, &out_len, err,
                                    sizeof(err)) != 0)
    {
        fprintf(stderr, "bench: %s: chat template: %s\n", m->path,
                ctx == NULL ? "out of memory" : err);
        out = NULL;
    }
    cJSON_Delete(ctx);
    cJSON_Delete(special);
    cJSON_Delete(messages);
    return out;
}


/* the 16 prompts as token ids; 0, or -1 with a message printed */
static int
make_prompts(const llm_model *m, int grounded,
    int32_t ids[][BENCH_MAX_PROMPT], int *n_ids)
{
    llm_tokenizer        *tok;
    jinja_tmpl           *t = NULL;
    char                 *src, *text, err[512];
    int                   i, n, rc = 0;

    tok = llm_model_tokenizer(m, err, sizeof(err));
    if (tok == NULL) {
        fprintf(stderr, "bench: %s\n", err);
        return -1;
    }
    src = llm_model_chat_template(m, err, sizeof(err));
    if (src != NULL) {
        t = jinja_parse(src, strlen(src), err, sizeof(err));
        if (t == NULL) {
            fprintf(stderr, "bench: chat template: %s (using ChatML)\n",
                    err);
        }
        free(src);
    }
    bench_eos = llm_tokenizer_eos(tok);
    for (i = 0; i < BENCH_N_MESSAGES && rc == 0; i++) {
        text = render_message(m, tok, t, grounded
                              ? bench_grounded[i % BENCH_N_GROUNDED]
                              : bench_messages[i]);
        if (text == NULL) {
            rc = -1;
            break;
        }
        n = llm_tokenize(tok, text, strlen(text), 1, 1, ids[i],
                         BENCH_MAX_PROMPT);
        if (n < 1 || n > BENCH_MAX_PROMPT) {
            fprintf(stderr, "bench: message %d tokenizes to %d ids (1..%d "
                    "allowed)\n", i, n, BENCH_MAX_PROMPT);
            rc = -1;
        }
        n_ids[i] = n;
        free(text);
    }
    jinja_free(t);
    llm_tokenizer_free(tok);
    return rc;
}


/* ---------------------------------------------------------------------------
 * one measurement
 */

static int
cmp_double(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return (x > y) - (x < y);
}


/* nearest-rank percentile of n sorted values */
static double
pct(const double *v, int n, double p)
{
    int  k = (int) (p / 100.0 * n + 0.999999) - 1;

    if (n == 0) {
        return 0;
    }
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}


typedef struct {
    int      streams;
    double   wall;
    double   cpu;              /* process CPU seconds during the run */
    long     generated;
    double   tok_s;
    double   ttft[3];          /* p50, p95, p99 in seconds */
    double   tpot[3];
    double   decode_step;      /* mean forward of full-batch decode steps */
    int      n_decode_steps;
    llm_sched_stats  st;
} bench_result;


static int
run_streams(llm_backend *be, const bench_opts *o, int n,
    int32_t prompts[][BENCH_MAX_PROMPT], const int *n_ids, bench_result *r)
{
    static bench_req   reqs[BENCH_MAX_STREAMS];
    static double      ttft[BENCH_MAX_STREAMS], tpot[BENCH_MAX_STREAMS];
    llm_sched_options  so;
    llm_request        rq;
    llm_sched         *s;
    llm_seq           *q;
    bench_step        *steps;
    char               err[512];
    double             t0, c0, ts, dsum = 0;
    int                i, k, max_steps, n_steps = 0, n_tpot = 0, dn = 0, ret;

    llm_sched_options_default(&so);
    so.max_num_seqs = n > 64 ? n : 64;
    so.max_batched_tokens = o->max_batched;
    so.prefix_caching = o->prefix_caching;
    so.max_queued = n;
    so.on_token = on_token;
    so.on_finish = on_finish;
    so.spec_draft_tokens = o->spec_draft;
    so.spec_ngram = o->spec_ngram;
    so.eos_ids = &bench_eos;
    so.n_eos_ids = o->grounded && bench_eos >= 0;
    s = llm_sched_create(be, &so, err, sizeof(err));
    if (s == NULL) {
        fprintf(stderr, "bench: %s\n", err);
        return -1;
    }
    max_steps = n * (BENCH_MAX_PROMPT + o->tokens) + 16;
    steps = malloc(max_steps * sizeof(*steps));
    if (steps == NULL) {
        llm_sched_free(s);
        fprintf(stderr, "bench: out of memory\n");
        return -1;
    }
    memset(reqs, 0, sizeof(reqs));
    t0 = now_s();
    c0 = cpu_s();
    for (i = 0; i < n; i++) {
        memset(&rq, 0, sizeof(rq));
        k = (o->first + i) % BENCH_N_MESSAGES;
        rq.prompt = prompts[k];
        rq.n_prompt = n_ids[k];
        llm_sampling_params_default(&rq.sampling);
        rq.sampling.temperature = 0.0f;
        rq.max_tokens = o->tokens;
        rq.ignore_eos = !o->grounded;
        rq.user = &reqs[i];
        if (llm_sched_add(s, &rq, &q, err, sizeof(err)) != LLM_SCHED_OK) {
            fprintf(stderr, "bench: request %d refused: %s\n", i, err);
            free(steps);
            llm_sched_free(s);
            return -1;
        }
    }
    ret = 0;
    while (llm_sched_has_work(s) && n_steps < max_steps) {
        llm_sched_stats  st;

        llm_sched_stats_get(s, &st);
        ts = now_s();
        k = llm_sched_step(s);
        if (k < 0) {
            fprintf(stderr, "bench: step failed\n");
            ret = -1;
            break;
        }
        steps[n_steps].n_tokens = k;
        steps[n_steps].n_running = st.running;
        steps[n_steps].secs = now_s() - ts;
        n_steps++;
    }
    r->wall = now_s() - t0;
    r->cpu = cpu_s() - c0;
    llm_sched_stats_get(s, &r->st);
    llm_sched_free(s);

    r->streams = n;
    r->generated = 0;
    for (i = 0; i < n; i++) {
        r->generated += reqs[i].n_out;
        ttft[i] = (reqs[i].res.t_first_token_ns - reqs[i].res.t_arrival_ns)
                  * 1e-9;
        if (reqs[i].n_out > 1) {
            tpot[n_tpot++] = (reqs[i].res.t_done_ns
                              - reqs[i].res.t_first_token_ns) * 1e-9
                             / (reqs[i].n_out - 1);
        }
    }
    qsort(ttft, n, sizeof(double), cmp_double);
    qsort(tpot, n_tpot, sizeof(double), cmp_double);
    r->tok_s = r->generated / r->wall;
    r->ttft[0] = pct(ttft, n, 50);
    r->ttft[1] = pct(ttft, n, 95);
    r->ttft[2] = pct(ttft, n, 99);
    r->tpot[0] = pct(tpot, n_tpot, 50);
    r->tpot[1] = pct(tpot, n_tpot, 95);
    r->tpot[2] = pct(tpot, n_tpot, 99);
    /* pure decode at full batch: as many tokens as sequences were running
       before the step, and all n of them */
    for (i = 0; i < n_steps; i++) {
        if (steps[i].n_tokens == n && steps[i].n_running == n) {
            dsum += steps[i].secs;
            dn++;
        }
    }
    r->decode_step = dn > 0 ? dsum / dn : 0;
    r->n_decode_steps = dn;
    free(steps);
    return ret;
}


/* the fastest of o->repeat runs: other load on the machine only ever
   slows a run down */
static int
run_best(llm_backend *be, const bench_opts *o, int n,
    int32_t prompts[][BENCH_MAX_PROMPT], const int *n_ids, bench_result *r)
{
    bench_result  one;
    int           k;

    for (k = 0; k < o->repeat; k++) {
        if (run_streams(be, o, n, prompts, n_ids, &one) != 0) {
            return -1;
        }
        if (k == 0 || one.tok_s > r->tok_s) {
            *r = one;
        }
    }
    return 0;
}


static int
cmp_double_asc(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return (x > y) - (x < y);
}


/* the median of n values (sorted in place) */
static double
median(double *v, int n)
{
    qsort(v, n, sizeof(*v), cmp_double_asc);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}


static double load_average(void);

/*
 * --spec-compare at n streams: off, on, off, on ... (repeat rounds), each
 * run printed; the medians and their ratio. Greedy: both generate the
 * same tokens, so tokens/s compare like for like.
 */
static int
run_compare(llm_backend *be, const bench_opts *o, int n,
    int32_t prompts[][BENCH_MAX_PROMPT], const int *n_ids, double *ratio)
{
    static bench_result  off[100], on[100];
    static double        ws[2][100], cs[2][100], pair[2][100];
    bench_opts           v = *o;
    bench_result        *r, part;
    double               mo, mn, co, la;
    int                  k, spec, b, n_msg;

    /* fewer streams than messages: the batches one after another, so
       every run covers every message once */
    n_msg = o->grounded ? BENCH_N_GROUNDED : BENCH_N_MESSAGES;
    for (k = 0; k < o->repeat; k++) {
        for (spec = 0; spec < 2; spec++) {
            v.spec_draft = spec ? o->spec_draft : 0;
            r = spec ? &on[k] : &off[k];
            la = load_average();
            for (b = 0; b == 0 || b * n < n_msg; b++) {
                v.first = b * n;
                if (run_streams(be, &v, n, prompts, n_ids, &part) != 0) {
                    return -1;
                }
                if (b == 0) {
                    *r = part;
                    continue;
                }
                r->generated += part.generated;
                r->wall += part.wall;
                r->cpu += part.cpu;
                r->st.steps += part.st.steps;
                r->st.spec_drafts += part.st.spec_drafts;
                r->st.spec_draft_tokens += part.st.spec_draft_tokens;
                r->st.spec_accepted_tokens += part.st.spec_accepted_tokens;
            }
            r->tok_s = r->generated / r->wall;
            ws[spec][k] = r->tok_s;
            cs[spec][k] = r->generated / r->cpu;
            printf("%4s %7d %8ld %7.2f %6.2f %8.1f %8.1f %8llu %8llu %8llu "
                   "%5.1f%% %6llu %6.2f\n", spec ? "on" : "off", n,
                   r->generated, r->wall, r->cpu / r->wall, r->tok_s,
                   r->generated / r->cpu,
                   (unsigned long long) r->st.spec_drafts,
                   (unsigned long long) r->st.spec_draft_tokens,
                   (unsigned long long) r->st.spec_accepted_tokens,
                   r->st.spec_draft_tokens > 0
                   ? 100.0 * r->st.spec_accepted_tokens
                     / r->st.spec_draft_tokens : 0.0,
                   (unsigned long long) r->st.steps, la);
            fflush(stdout);
        }
    }
    /* each round's on / off: the pair ran back to back, under about
       the same load */
    for (k = 0; k < o->repeat; k++) {
        pair[0][k] = ws[1][k] / ws[0][k];
        pair[1][k] = cs[1][k] / cs[0][k];
    }
    *ratio = median(pair[0], o->repeat);
    co = median(pair[1], o->repeat);
    mo = median(ws[0], o->repeat);
    mn = median(ws[1], o->repeat);
    printf("# %d streams, %d rounds: median tok/s off %.1f, on %.1f; median "
           "of the rounds' on/off ratios: %.2fx wall, %.2fx per CPU "
           "second\n", n, o->repeat, mo, mn, *ratio, co);
    return 0;
}


static void
print_result(const bench_result *r)
{
    printf("%7d %8ld %7.2f %6.2f %8.1f %7.0f %7.0f %7.0f %7.1f %7.1f %7.1f "
           "%8.1f %6llu %5llu %6llu\n",
           r->streams, r->generated, r->wall, r->cpu / r->wall, r->tok_s,
           r->ttft[0] * 1e3, r->ttft[1] * 1e3, r->ttft[2] * 1e3,
           r->tpot[0] * 1e3, r->tpot[1] * 1e3, r->tpot[2] * 1e3,
           r->decode_step * 1e3,
           (unsigned long long) r->st.prefix_hit_tokens,
           (unsigned long long) r->st.preemptions,
           (unsigned long long) r->st.steps);
    fflush(stdout);
}


/* ---------------------------------------------------------------------------
 * entry
 */

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


int
llm_cli_bench(int argc, char **argv)
{
    static int32_t        prompts[BENCH_N_MESSAGES][BENCH_MAX_PROMPT];
    static bench_result   res[16];
    int                   n_ids[BENCH_N_MESSAGES];
    bench_opts            o;
    llm_backend_options   bo;
    llm_backend          *be;
    llm_model             m;
    bench_result          warm;
    char                  err[512];
    int                   i, max_n = 0, min_p = BENCH_MAX_PROMPT, max_p = 0;
    double                tok1 = 0, tok16 = 0;

    if (parse_opts(&o, argc, argv) != 0) {
        usage();
        return 2;
    }
    if (llm_model_load(&m, o.model, 0, 1) != 0) {
        fprintf(stderr, "bench: %s\n", m.err);
        llm_model_free(&m);
        return 1;
    }
    if (make_prompts(&m, o.grounded, prompts, n_ids) != 0) {
        llm_model_free(&m);
        return 1;
    }
    for (i = 0; i < BENCH_N_MESSAGES; i++) {
        min_p = n_ids[i] < min_p ? n_ids[i] : min_p;
        max_p = n_ids[i] > max_p ? n_ids[i] : max_p;
    }
    for (i = 0; i < o.n_streams; i++) {
        max_n = o.streams[i] > max_n ? o.streams[i] : max_n;
    }
    llm_backend_options_default(&bo, &m);
    bo.n_threads = o.threads;
    bo.max_batch_tokens = o.max_batched;
    /* every stream's whole sequence fits: no preemption in the bench */
    bo.kv_n_blocks = max_n * ((max_p + o.tokens + bo.kv_block_size - 1)
                              / bo.kv_block_size) + 1;
    be = llm_backend_create("cpu", &m, &bo, err, sizeof(err));
    if (be == NULL) {
        fprintf(stderr, "bench: %s\n", err);
        llm_model_free(&m);
        return 1;
    }
    printf("# bench: %s, %d threads, prompts %d..%d tokens (%d messages), "
           "%d generated each (%s), prefix cache %s, "
           "max_batched_tokens %d, %d KV blocks of %d, best of %d, "
           "load average %.2f\n",
           o.model, o.threads, min_p, max_p,
           o.grounded ? BENCH_N_GROUNDED : BENCH_N_MESSAGES, o.tokens,
           o.grounded ? "at most, to EOS" : "EOS ignored",
           o.prefix_caching ? "on" : "off", o.max_batched, bo.kv_n_blocks,
           bo.kv_block_size, o.repeat, load_average());

    /* warm-up: page the weights in, start the threads */
    if (run_streams(be, &o, 1, prompts, n_ids, &warm) != 0) {
        llm_backend_free(be);
        llm_model_free(&m);
        return 1;
    }
    if (o.spec_compare) {
        double  ratio;

        printf("# speculative decoding (prompt lookup): %d drafts, %d-gram, "
               "%s workload, greedy, interleaved off/on\n", o.spec_draft,
               o.spec_ngram, o.grounded ? "grounded" : "chat");
        printf("%4s %7s %8s %7s %6s %8s %8s %8s %8s %8s %6s %6s %6s\n",
               "spec", "streams", "gen_tok", "wall_s", "cores", "tok/s",
               "tok/cpus", "verifs", "drafted", "accepted", "acc", "steps",
               "load");
        for (i = 0; i < o.n_streams; i++) {
            if (run_compare(be, &o, o.streams[i], prompts, n_ids, &ratio)
                != 0)
            {
                break;
            }
        }
        printf("# load average now %.2f\n", load_average());
        llm_backend_free(be);
        llm_model_free(&m);
        return i == o.n_streams ? 0 : 1;
    }
    printf("%7s %8s %7s %6s %8s %7s %7s %7s %7s %7s %7s %8s %6s %5s %6s\n",
           "streams", "gen_tok", "wall_s", "cores", "tok/s", "ttft50", "ttft95",
           "ttft99", "tpot50", "tpot95", "tpot99", "dec_ms", "hit",
           "prmpt", "steps");
    printf("%7s %8s %7s %6s %8s %7s %7s %7s %7s %7s %7s %8s %6s %5s %6s\n",
           "", "", "", "used", "", "ms", "ms", "ms", "ms", "ms", "ms", "/step",
           "tok", "", "");
    for (i = 0; i < o.n_streams; i++) {
        if (run_best(be, &o, o.streams[i], prompts, n_ids, &res[i]) != 0) {
            break;
        }
        print_result(&res[i]);
        if (o.streams[i] == 1) {
            tok1 = res[i].tok_s;
        }
        if (o.streams[i] == 16) {
            tok16 = res[i].tok_s;
        }
    }
    if (tok1 > 0 && tok16 > 0) {
        printf("# aggregate throughput 16 streams / 1 stream: %.2fx "
               "(target >= 3x)\n", tok16 / tok1);
    }
    printf("# cores used: process CPU time / wall time (%d threads: %d when "
           "the machine is ours alone); dec_ms: mean forward of pure "
           "decode steps at full batch; load average now %.2f\n",
           o.threads, o.threads, load_average());
    llm_backend_free(be);
    llm_model_free(&m);
    return i == o.n_streams ? 0 : 1;
}
