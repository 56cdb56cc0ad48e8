/*
 * The ring's counters and gauges, which the workers' /metrics and
 * watchdog read (docs/operations.md, docs/architecture.md): engine time
 * by phase (idle, prefill, decode, mixed), the slowest recent step, the
 * tokens of each step, the latency histograms, the scheduler's counts,
 * resident memory and compute use, and alive_ns from a thread of its own.
 *
 * defines: llm_now_ns, llm_phase_idle, llm_step, llm_on_step,
 *          llm_alive_thread, llm_usage_thread, llm_hist_add,
 *          llm_publish_stats
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "ring/ngx_llm_ring.h"
#include "sched/scheduler.h"
#include "server/server_int.h"

#define LLM_ALIVE_TICK_NS     (100ULL * 1000000ULL)
#define LLM_STEP_WINDOW       64      /* steps a "recent" slowest spans */


uint64_t
llm_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}


/*
 * The watchdog's measures (docs/architecture.md): the slowest of the last
 * 64 to 128 steps that ran the model, so a worker allows an 8B model on a
 * CPU, or a sanitizer build, steps of its own size; and the slowest time
 * per token of those steps that fed several, which sizes a long prefill
 * step before it runs (llm_on_step). That one is kept when a window has
 * no such step: decode-only windows do not forget what a prompt costs.
 */
static void
llm_step_timed(llm_server *s, uint64_t ns)
{
    uint64_t  per;

    if (ns > s->step_max_ns[0]) {
        s->step_max_ns[0] = ns;
    }

    if (s->step_tokens > 1) {
        per = ns / (uint64_t) s->step_tokens;
        if (per > s->token_max_ns[0]) {
            s->token_max_ns[0] = per;
        }
    }

    if (++s->steps_in_window == LLM_STEP_WINDOW) {
        s->step_max_ns[1] = s->step_max_ns[0];
        s->step_max_ns[0] = 0;
        if (s->token_max_ns[0] != 0) {
            s->token_max_ns[1] = s->token_max_ns[0];
            s->token_max_ns[0] = 0;
        }
        s->steps_in_window = 0;
    }

    atomic_store(&s->ring->step_slowest_ns,
                 s->step_max_ns[0] > s->step_max_ns[1] ? s->step_max_ns[0]
                                                       : s->step_max_ns[1]);
}


/*
 * A step of n tokens begins (the scheduler's on_step): what it is expected
 * to take, its tokens at the slowest recent time per token (the slowest
 * step's time per token before one of several tokens ran), for a worker
 * to allow 20 times that (ring version 11). The per-token time of a short
 * step carries its fixed cost (the weights read once), so a long prompt's
 * step is overestimated (its attention over a long context aside, which
 * the factor 20 covers): a hang in its step is caught later than in a
 * short step, in proportion.
 */
void
llm_on_step(void *arg, int n_tokens)
{
    uint64_t     per, n;
    llm_server  *s = arg;

    per = s->token_max_ns[0] > s->token_max_ns[1] ? s->token_max_ns[0]
                                                  : s->token_max_ns[1];
    if (per == 0) {
        per = s->step_max_ns[0] > s->step_max_ns[1] ? s->step_max_ns[0]
                                                    : s->step_max_ns[1];
    }

    s->step_tokens = n_tokens;
    n = n_tokens > 0 ? (uint64_t) n_tokens : 0;
    atomic_store(&s->ring->step_expect_ns, n * per);
}


/* the time since the last mark to the idle phase */
void
llm_phase_idle(llm_server *s, uint64_t now)
{
    if (s->phase_mark_ns != 0 && now > s->phase_mark_ns) {
        atomic_fetch_add_explicit(&s->ring->stats.phase_ns[LLM_PHASE_IDLE],
                                  now - s->phase_mark_ns,
                                  memory_order_relaxed);
    }
    s->phase_mark_ns = now;
}


/* a step that ran the model: its time by phase, its tokens */
static void
llm_step_account(llm_server *s, llm_sched *sched, uint64_t ns)
{
    int               b, phase;
    llm_ring_stats   *rs = &s->ring->stats;
    llm_sched_stats   st;

    llm_sched_stats_get(sched, &st);

    phase = st.last_step_decodes == 0 ? LLM_PHASE_PREFILL
            : st.last_step_prefills == 0 ? LLM_PHASE_DECODE
            : LLM_PHASE_MIXED;
    atomic_fetch_add_explicit(&rs->phase_ns[phase], ns,
                              memory_order_relaxed);

    for (b = 0; b < LLM_STEP_HIST_BUCKETS
                && st.last_step_tokens > llm_step_hist_bounds[b]; b++)
    {
        /* find the bucket */
    }
    atomic_fetch_add_explicit(&rs->step_tokens.count[b], 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&rs->step_tokens.sum,
                              (uint64_t) st.last_step_tokens,
                              memory_order_relaxed);
}


/* a step of the model, timed when it ran one */
int
llm_step(llm_server *s, llm_sched *sched)
{
    int       rc;
    uint64_t  t0, t1;

    t0 = llm_now_ns();
    llm_phase_idle(s, t0);
    rc = llm_sched_step(sched);

    if (rc != 0) {
        t1 = llm_now_ns();
        llm_step_timed(s, t1 - t0);
        llm_step_account(s, sched, t1 - t0);
        s->phase_mark_ns = t1;

        /* the step's end is a turn: a worker that reads no expected time
           (it reads that first) then reads this heartbeat, not the one
           before the step */
        atomic_store(&s->ring->heartbeat_ns, t1);
        atomic_store(&s->ring->step_expect_ns, 0);
    }

    return rc;
}


/* the engine's resident bytes, from /proc/self/statm */
static uint64_t
llm_rss_bytes(void)
{
    FILE                *f;
    unsigned long long   size, resident;

    f = fopen("/proc/self/statm", "r");
    if (f == NULL) {
        return 0;
    }
    if (fscanf(f, "%llu %llu", &size, &resident) != 2) {
        resident = 0;
    }
    fclose(f);

    return resident * (uint64_t) sysconf(_SC_PAGESIZE);
}


/*
 * Memory and compute gauges, each tick of the usage thread (NVML may
 * take a while; the loop must not wait for it). last[] holds the busy and
 * wall time when the utilisation was last computed: over a second or more,
 * so one 100 ms tick of a step does not swing it.
 */
static void
llm_sample_usage(llm_server *s, uint64_t last[2])
{
    uint64_t            now, wall;
    llm_ring_stats     *rs = &s->ring->stats;
    llm_backend_usage   u;

    atomic_store(&rs->rss_bytes, llm_rss_bytes());

    if (atomic_load_explicit(&s->sched, memory_order_acquire) == NULL) {
        return;             /* the backend is not made yet */
    }

    llm_backend_usage_get(s->backend, &u);
    now = llm_now_ns();
    atomic_store(&rs->compute_busy_ns, u.busy_ns);
    atomic_store(&rs->compute_threads, (uint32_t) u.n_threads);

    if (u.device_valid) {
        atomic_store(&rs->compute_util_ppm, (uint32_t) u.device_util * 10000);
        atomic_store(&rs->device_mem_used, u.device_mem_used);
        atomic_store(&rs->device_mem_total, u.device_mem_total);
        atomic_store(&rs->device_valid, 1);

        return;
    }

    if (last[1] == 0 || u.n_threads == 0) {
        last[0] = u.busy_ns;
        last[1] = now;
        return;
    }

    if (now - last[1] >= 1000000000ULL) {
        wall = (now - last[1]) * (uint64_t) u.n_threads;
        atomic_store(&rs->compute_util_ppm,
                     (uint32_t) ((u.busy_ns - last[0]) * 1000000 / wall));
        last[0] = u.busy_ns;
        last[1] = now;
    }
}


/*
 * alive_ns: a sign of life that a long step does not stop, as the loop's
 * heartbeat does; only a stopped or frozen process stops it. Its signals
 * are blocked as the loop's are (created after llm_setup_events). It does
 * nothing else: the gauges (/proc, NVML) can block for seconds on a busy
 * machine, and a 1 s watchdog would then kill a healthy engine.
 */
void *
llm_alive_thread(void *arg)
{
    llm_server       *s = arg;
    struct timespec   ts = { 0, LLM_ALIVE_TICK_NS };

    for ( ;; ) {
        atomic_store(&s->ring->alive_ns, llm_now_ns());
        nanosleep(&ts, NULL);
    }

    return NULL;
}


/* the memory and compute gauges, as often, in a thread of their own */
void *
llm_usage_thread(void *arg)
{
    uint64_t          last[2] = { 0, 0 };
    llm_server       *s = arg;
    struct timespec   ts = { 0, LLM_ALIVE_TICK_NS };

    for ( ;; ) {
        llm_sample_usage(s, last);
        nanosleep(&ts, NULL);
    }

    return NULL;
}


void
llm_hist_add(llm_hist *h, uint64_t ns)
{
    int     b;
    double  secs = ns / 1e9;

    for (b = 0; b < LLM_HIST_BUCKETS && secs > llm_hist_bounds[b]; b++) {
        /* find the bucket */
    }
    atomic_fetch_add_explicit(&h->count[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, ns / 1000, memory_order_relaxed);
}


void
llm_publish_stats(llm_server *s, llm_sched *sched)
{
    llm_sched_stats   st;
    llm_ring_stats   *rs = &s->ring->stats;

    llm_sched_stats_get(sched, &st);
    atomic_store(&rs->running, (uint32_t) st.running);
    atomic_store(&rs->waiting, (uint32_t) (st.waiting + st.compiling));
    atomic_store(&rs->kv_blocks_total, (uint32_t) st.kv_blocks_total);
    atomic_store(&rs->kv_blocks_used, (uint32_t) st.kv_blocks_used);
    atomic_store(&rs->kv_blocks_cached, (uint32_t) st.kv_blocks_cached);
    atomic_store(&rs->kv_blocks_slid, st.kv_blocks_slid);
    atomic_store(&rs->requests, st.requests);
    atomic_store(&rs->prompt_tokens, st.prompt_tokens);
    atomic_store(&rs->generation_tokens, st.generation_tokens);
    atomic_store(&rs->cached_tokens, st.prefix_hit_tokens);
    atomic_store(&rs->prefix_queries, st.prompt_tokens);
    atomic_store(&rs->preemptions, st.preemptions);
    atomic_store(&rs->cancelled, st.cancelled);
    atomic_store(&rs->steps, st.steps);
    atomic_store(&rs->spec_drafts, st.spec_drafts);
    atomic_store(&rs->spec_draft_tokens, st.spec_draft_tokens);
    atomic_store(&rs->spec_accepted_tokens, st.spec_accepted_tokens);
}
