/*
 * Observability: /metrics in Prometheus text (vLLM's names where the
 * meaning matches, so Gateway API inference routers work unchanged), the
 * $llm_* variables for log_format/map/limit_req, and per-engine counters
 * in a shared zone that outlive engine restarts and reloads.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <sys/random.h>

#include "ngx_http_llm_module.h"


static const ngx_uint_t  ngx_http_llm_statuses[NGX_HTTP_LLM_N_STATUS] = {
    200, 400, 404, 405, 408, 413, 429, 499, 500, 503, 504, 0
};


/* ---------------------------------------------------------------------- */
/* shared counters                                                        */

static ngx_int_t
ngx_http_llm_zone_init(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_slab_pool_t          *shpool;
    ngx_http_llm_counters_t  *cnt;

    if (data) {
        shm_zone->data = data;      /* a reload keeps the counts */
        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        shm_zone->data = shpool->data;
        return NGX_OK;
    }

    cnt = ngx_slab_calloc(shpool, sizeof(ngx_http_llm_counters_t));
    if (cnt == NULL) {
        return NGX_ERROR;
    }

    /* once per zone, so a reload keeps the engine's socket name too */
    if (getrandom(cnt->secret, sizeof(cnt->secret), 0)
        != (ssize_t) sizeof(cnt->secret))
    {
        ngx_log_error(NGX_LOG_EMERG, ngx_cycle->log, ngx_errno,
                      "llm: getrandom() for the engine's socket name failed");
        return NGX_ERROR;
    }

    shm_zone->data = cnt;
    shpool->data = cnt;

    return NGX_OK;
}


ngx_int_t
ngx_http_llm_counters_zone(ngx_conf_t *cf, ngx_http_llm_engine_conf_t *ecf)
{
    ngx_str_t  name;

    name.len = sizeof("llm_engine_") - 1 + ecf->name.len;
    name.data = ngx_pnalloc(cf->pool, name.len);
    if (name.data == NULL) {
        return NGX_ERROR;
    }
    ngx_sprintf(name.data, "llm_engine_%V", &ecf->name);

    ecf->zone = ngx_shared_memory_add(cf, &name, 8 * ngx_pagesize,
                                      &ngx_http_llm_module);
    if (ecf->zone == NULL) {
        return NGX_ERROR;
    }

    ecf->zone->init = ngx_http_llm_zone_init;
    ecf->zone->noreuse = 0;

    return NGX_OK;
}


/* log phase: every request an llm location answered, by status */
ngx_int_t
ngx_http_llm_log_handler(ngx_http_request_t *r)
{
    ngx_uint_t                i, status;
    ngx_http_llm_counters_t  *cnt;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    if (llcf->role != NGX_HTTP_LLM_ROLE_API || llcf->engine == NULL) {
        return NGX_OK;
    }

    cnt = ngx_http_llm_counters(llcf->engine);
    if (cnt == NULL) {
        return NGX_OK;
    }

    status = r->connection->error ? 499 : r->headers_out.status;

    for (i = 0; i < NGX_HTTP_LLM_N_STATUS - 1; i++) {
        if (ngx_http_llm_statuses[i] == status) {
            break;
        }
    }

    (void) ngx_atomic_fetch_add(&cnt->status[i], 1);

    return NGX_OK;
}


/* ---------------------------------------------------------------------- */
/* /metrics                                                               */

/*
 * The text format wants each family once: one HELP, one TYPE, then every
 * engine's series, told apart by their labels (model_name as vLLM writes
 * it, engine the llm_engine block's name). So the families are a table,
 * and each one's series function writes one engine's lines.
 */

#define NGX_HTTP_LLM_METRICS_MAX  (32 * 1024)     /* per engine */

typedef struct {
    ngx_http_llm_engine_conf_t  *ecf;
    llm_ring_header             *ring;      /* NULL: not connected */
    ngx_http_llm_counters_t     *cnt;       /* NULL: no zone */
    ngx_str_t                    labels;    /* model_name="..",engine=".." */
} ngx_http_llm_scrape_t;

typedef struct {
    u_char                      *pos;
    u_char                      *end;
} ngx_http_llm_out_t;

typedef struct ngx_http_llm_family_s  ngx_http_llm_family_t;

typedef void (*ngx_http_llm_series_pt)(ngx_http_llm_out_t *o,
    ngx_http_llm_scrape_t *e, const ngx_http_llm_family_t *f);

struct ngx_http_llm_family_s {
    const char                  *name;
    const char                  *type;
    const char                  *help;
    ngx_http_llm_series_pt       series;
    size_t                       data;      /* offset or index, by series */
    ngx_uint_t                   ring;      /* 1: written only when the
                                               engine is connected */
};


static void
ngx_http_llm_out(ngx_http_llm_out_t *o, const char *fmt, ...)
{
    va_list  args;

    va_start(args, fmt);
    o->pos = ngx_vslprintf(o->pos, o->end, fmt, args);
    va_end(args);
}


#define ngx_http_llm_stat32(e, off)                                          \
    atomic_load((_Atomic uint32_t *) ((u_char *) &(e)->ring->stats + (off)))
#define ngx_http_llm_stat64(e, off)                                          \
    atomic_load((_Atomic uint64_t *) ((u_char *) &(e)->ring->stats + (off)))


static void
ngx_http_llm_series_u64(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    ngx_http_llm_out(o, "%s{%V} %uL\n", f->name, &e->labels,
                     ngx_http_llm_stat64(e, f->data));
}


static void
ngx_http_llm_series_u32(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    ngx_http_llm_out(o, "%s{%V} %uD\n", f->name, &e->labels,
                     ngx_http_llm_stat32(e, f->data));
}


/* a u64 of nanoseconds, written in seconds */
static void
ngx_http_llm_series_ns(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    ngx_http_llm_out(o, "%s{%V} %.6f\n", f->name, &e->labels,
                     ngx_http_llm_stat64(e, f->data) / 1e9);
}


/* a counter of the shared zone (it outlives engine restarts) */
static void
ngx_http_llm_series_zone(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    if (e->cnt) {
        ngx_http_llm_out(o, "%s{%V} %uA\n", f->name, &e->labels,
                         *(ngx_atomic_t *) ((u_char *) e->cnt + f->data));
    }
}


static void
ngx_http_llm_series_up(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    ngx_http_llm_out(o, "%s{%V} %d\n", f->name, &e->labels,
                     e->ecf->peer
                     && ngx_http_llm_peer_ready(e->ecf->peer) == NGX_OK);
}


/* 1, with the model file's hash, where model_sha256 checked it */
static void
ngx_http_llm_series_model_info(ngx_http_llm_out_t *o,
    ngx_http_llm_scrape_t *e, const ngx_http_llm_family_t *f)
{
    if (e->ecf->sha256.len) {
        ngx_http_llm_out(o, "%s{%V,sha256=\"%V\"} 1\n", f->name, &e->labels,
                         &e->ecf->sha256);
    }
}


static void
ngx_http_llm_series_status(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    ngx_uint_t  i;

    if (e->cnt == NULL) {
        return;
    }

    for (i = 0; i < NGX_HTTP_LLM_N_STATUS; i++) {
        if (ngx_http_llm_statuses[i]) {
            ngx_http_llm_out(o, "%s{%V,status=\"%ui\"} %uA\n", f->name,
                             &e->labels, ngx_http_llm_statuses[i],
                             e->cnt->status[i]);
        } else {
            ngx_http_llm_out(o, "%s{%V,status=\"other\"} %uA\n", f->name,
                             &e->labels, e->cnt->status[i]);
        }
    }
}


static void
ngx_http_llm_series_kv_usage(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    uint32_t  used, total;

    used = atomic_load(&e->ring->stats.kv_blocks_used);
    total = atomic_load(&e->ring->stats.kv_blocks_total);

    ngx_http_llm_out(o, "%s{%V} %.6f\n", f->name, &e->labels,
                     total ? (double) used / total : 0.0);
}


/* what the Gateway API Inference Extension reads the pool's shape from */
static void
ngx_http_llm_series_cache_config(ngx_http_llm_out_t *o,
    ngx_http_llm_scrape_t *e, const ngx_http_llm_family_t *f)
{
    ngx_http_llm_out(o, "%s{%V,block_size=\"%uD\",num_gpu_blocks=\"%uD\"} 1\n",
                     f->name, &e->labels,
                     atomic_load(&e->ring->stats.kv_block_size),
                     atomic_load(&e->ring->stats.kv_blocks_total));
}


static void
ngx_http_llm_series_finished(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    ngx_uint_t         i;
    llm_ring_stats    *st = &e->ring->stats;
    static const struct {
        const char    *reason;
        ngx_uint_t     finish;
    } reasons[] = {
        { "stop", LLM_FINISH_STOP },
        { "length", LLM_FINISH_LENGTH },
        { "abort", LLM_FINISH_CANCELLED },
        { "error", LLM_FINISH_ERROR },
    };

    for (i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        ngx_http_llm_out(o, "%s{%V,finished_reason=\"%s\"} %uL\n", f->name,
                         &e->labels, reasons[i].reason,
                         atomic_load(&st->finished[reasons[i].finish]));
    }
}


/* one cumulative bucket line per bound, +Inf, count and sum */
static void
ngx_http_llm_out_buckets(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const char *name, _Atomic uint64_t *count, const double *bounds,
    int n_bounds, const char *fmt)
{
    int       b;
    u_char    le[32];
    uint64_t  cum;

    cum = 0;
    for (b = 0; b < n_bounds; b++) {
        cum += atomic_load_explicit(&count[b], memory_order_relaxed);
        *ngx_snprintf(le, sizeof(le) - 1, fmt, bounds[b]) = '\0';
        ngx_http_llm_out(o, "%s_bucket{%V,le=\"%s\"} %uL\n", name,
                         &e->labels, le, cum);
    }
    cum += atomic_load_explicit(&count[n_bounds], memory_order_relaxed);

    ngx_http_llm_out(o, "%s_bucket{%V,le=\"+Inf\"} %uL\n%s_count{%V} %uL\n",
                     name, &e->labels, cum, name, &e->labels, cum);
}


static void
ngx_http_llm_series_hist(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    llm_hist  *h = &e->ring->stats.hist[f->data];

    ngx_http_llm_out_buckets(o, e, f->name, h->count, llm_hist_bounds,
                             LLM_HIST_BUCKETS, "%.3f");
    ngx_http_llm_out(o, "%s_sum{%V} %.6f\n", f->name, &e->labels,
                     atomic_load(&h->sum_us) / 1e6);
}


static void
ngx_http_llm_series_step_tokens(ngx_http_llm_out_t *o,
    ngx_http_llm_scrape_t *e, const ngx_http_llm_family_t *f)
{
    llm_step_hist  *h = &e->ring->stats.step_tokens;

    ngx_http_llm_out_buckets(o, e, f->name, h->count, llm_step_hist_bounds,
                             LLM_STEP_HIST_BUCKETS, "%.1f");
    ngx_http_llm_out(o, "%s_sum{%V} %uL\n", f->name, &e->labels,
                     atomic_load(&h->sum));
}


static void
ngx_http_llm_series_phase(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    ngx_uint_t         i;
    static const char *phases[LLM_PHASE_COUNT] = {
        "prefill", "decode", "mixed", "idle"
    };

    for (i = 0; i < LLM_PHASE_COUNT; i++) {
        ngx_http_llm_out(o, "%s{%V,phase=\"%s\"} %.6f\n", f->name,
                         &e->labels, phases[i],
                         atomic_load(&e->ring->stats.phase_ns[i]) / 1e9);
    }
}


static void
ngx_http_llm_series_util(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    uint32_t  ppm = atomic_load(&e->ring->stats.compute_util_ppm);

    ngx_http_llm_out(o, "%s{%V} %.4f\n", f->name, &e->labels,
                     ngx_min(ppm, 1000000) / 1e6);
}


static void
ngx_http_llm_series_weights(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    ngx_http_llm_out(o, "%s{%V} %uL\n", f->name, &e->labels,
                     e->ring->model.weight_bytes);
}


/* KV blocks (the ring stats field at data) times the bytes of a block */
static void
ngx_http_llm_series_kv_bytes(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    ngx_http_llm_out(o, "%s{%V} %uL\n", f->name, &e->labels,
                     (uint64_t) ngx_http_llm_stat32(e, f->data)
                     * atomic_load(&e->ring->stats.kv_block_bytes));
}


/* only where the backend has a device NVML reads (cuda) */
static void
ngx_http_llm_series_device(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    if (atomic_load(&e->ring->stats.device_valid)) {
        ngx_http_llm_series_u64(o, e, f);
    }
}


/* engine errors by the ring's error code, and the requests nginx ended
   with 504 at their deadline */
static void
ngx_http_llm_series_errors(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    ngx_uint_t         i;
    llm_ring_stats    *st = &e->ring->stats;
    static const char *types[LLM_ERR_INTERNAL + 1] = {
        NULL, "bad_request", "too_long", "queue_full", "not_ready",
        "internal"
    };

    for (i = 1; i <= LLM_ERR_INTERNAL; i++) {
        ngx_http_llm_out(o, "%s{%V,type=\"%s\"} %uL\n", f->name, &e->labels,
                         types[i], atomic_load(&st->errors[i]));
    }

    for (i = 0; e->cnt && i < NGX_HTTP_LLM_N_STATUS; i++) {
        if (ngx_http_llm_statuses[i] == NGX_HTTP_GATEWAY_TIME_OUT) {
            ngx_http_llm_out(o, "%s{%V,type=\"timeout\"} %uA\n", f->name,
                             &e->labels, e->cnt->status[i]);
        }
    }
}


static void
ngx_http_llm_series_slots_used(ngx_http_llm_out_t *o,
    ngx_http_llm_scrape_t *e, const ngx_http_llm_family_t *f)
{
    uint32_t  i, busy;

    busy = 0;
    for (i = 0; i < e->ring->n_slots; i++) {
        busy += atomic_load_explicit(&llm_ring_slot(e->ring, i)->state,
                                     memory_order_relaxed) != LLM_SLOT_FREE;
    }

    ngx_http_llm_out(o, "%s{%V} %uD\n", f->name, &e->labels, busy);
}


static void
ngx_http_llm_series_slots(ngx_http_llm_out_t *o, ngx_http_llm_scrape_t *e,
    const ngx_http_llm_family_t *f)
{
    ngx_http_llm_out(o, "%s{%V} %uD\n", f->name, &e->labels,
                     e->ring->n_slots);
}


#define ngx_http_llm_stat(field)  offsetof(llm_ring_stats, field)
#define ngx_http_llm_zone(field)  offsetof(ngx_http_llm_counters_t, field)

static const ngx_http_llm_family_t  ngx_http_llm_families[] = {

    { "ngx_llm_engine_up", "gauge",
      "1 when the engine is connected and ready",
      ngx_http_llm_series_up, 0, 0 },
    { "ngx_llm_engine_starts_total", "counter",
      "engine processes started by nginx",
      ngx_http_llm_series_zone, ngx_http_llm_zone(engine_starts), 0 },
    { "ngx_llm_engine_watchdog_restarts_total", "counter",
      "stalled engines the watchdog replaced",
      ngx_http_llm_series_zone, ngx_http_llm_zone(watchdog_restarts), 0 },
    { "ngx_llm_http_requests_total", "counter",
      "API requests answered, by status",
      ngx_http_llm_series_status, 0, 0 },
    { "ngx_llm_tool_call_parse_failures_total", "counter",
      "replies that looked like a tool call and were not one (sent as "
      "content)",
      ngx_http_llm_series_zone, ngx_http_llm_zone(tool_parse_failures), 0 },
    { "ngx_llm_tool_calls_dropped_total", "counter",
      "replies constrained to tool calls cut by max_tokens in a call (the "
      "unfinished call dropped, the finished ones kept)",
      ngx_http_llm_series_zone, ngx_http_llm_zone(tool_calls_dropped), 0 },
    { "ngx_llm_schema_relaxed_total", "counter",
      "replies whose JSON schema had keywords relaxed (not strict; named "
      "in x-llm-schema-relaxed)",
      ngx_http_llm_series_zone, ngx_http_llm_zone(schema_relaxed), 0 },
    { "ngx_llm_model_info", "gauge",
      "the model file's sha256, checked at configuration time",
      ngx_http_llm_series_model_info, 0, 0 },

    /* the Gateway API Inference Extension's endpoint picker reads these */
    { "vllm:num_requests_running", "gauge",
      "sequences in the running batch",
      ngx_http_llm_series_u32, ngx_http_llm_stat(running), 1 },
    { "vllm:num_requests_waiting", "gauge",
      "sequences waiting to be scheduled",
      ngx_http_llm_series_u32, ngx_http_llm_stat(waiting), 1 },
    { "vllm:kv_cache_usage_perc", "gauge",
      "KV-cache usage, 1 means 100 percent",
      ngx_http_llm_series_kv_usage, 0, 1 },
    { "vllm:cache_config_info", "gauge",
      "KV-cache configuration: block_size tokens, num_gpu_blocks blocks",
      ngx_http_llm_series_cache_config, 0, 1 },

    { "vllm:prompt_tokens_total", "counter",
      "prefill tokens processed",
      ngx_http_llm_series_u64, ngx_http_llm_stat(prompt_tokens), 1 },
    { "vllm:generation_tokens_total", "counter",
      "generated tokens",
      ngx_http_llm_series_u64, ngx_http_llm_stat(generation_tokens), 1 },
    { "vllm:prefix_cache_queries_total", "counter",
      "prompt tokens looked up in the prefix cache",
      ngx_http_llm_series_u64, ngx_http_llm_stat(prefix_queries), 1 },
    { "vllm:prefix_cache_hits_total", "counter",
      "prompt tokens found in the prefix cache",
      ngx_http_llm_series_u64, ngx_http_llm_stat(cached_tokens), 1 },
    { "vllm:num_preemptions_total", "counter",
      "sequences preempted for KV space",
      ngx_http_llm_series_u64, ngx_http_llm_stat(preemptions), 1 },
    { "vllm:spec_decode_num_drafts_total", "counter",
      "speculative verifications run (one sequence's drafts in one step)",
      ngx_http_llm_series_u64, ngx_http_llm_stat(spec_drafts), 1 },
    { "vllm:spec_decode_num_draft_tokens_total", "counter",
      "speculative draft tokens proposed and verified",
      ngx_http_llm_series_u64, ngx_http_llm_stat(spec_draft_tokens), 1 },
    { "vllm:spec_decode_num_accepted_tokens_total", "counter",
      "speculative draft tokens accepted",
      ngx_http_llm_series_u64, ngx_http_llm_stat(spec_accepted_tokens), 1 },
    { "vllm:request_success_total", "counter",
      "finished requests by finish reason",
      ngx_http_llm_series_finished, 0, 1 },
    { "vllm:time_to_first_token_seconds", "histogram",
      "time to first token",
      ngx_http_llm_series_hist, LLM_HIST_TTFT, 1 },
    { "vllm:inter_token_latency_seconds", "histogram",
      "time between tokens",
      ngx_http_llm_series_hist, LLM_HIST_ITL, 1 },
    { "vllm:e2e_request_latency_seconds", "histogram",
      "request latency, submit to last token",
      ngx_http_llm_series_hist, LLM_HIST_E2E, 1 },
    { "vllm:request_queue_time_seconds", "histogram",
      "time waiting before the first step",
      ngx_http_llm_series_hist, LLM_HIST_QUEUE, 1 },
    { "vllm:iteration_tokens_total", "histogram",
      "tokens fed to the model per engine step",
      ngx_http_llm_series_step_tokens, 0, 1 },

    { "ngx_llm_cancelled_total", "counter",
      "sequences cancelled (client gone, deadline)",
      ngx_http_llm_series_u64, ngx_http_llm_stat(cancelled), 1 },
    { "ngx_llm_request_errors_total", "counter",
      "requests that ended in an error, by type (timeout: nginx's 504)",
      ngx_http_llm_series_errors, 0, 1 },
    { "ngx_llm_engine_steps_total", "counter",
      "engine steps (batched forwards) run",
      ngx_http_llm_series_u64, ngx_http_llm_stat(steps), 1 },
    { "ngx_llm_engine_phase_seconds_total", "counter",
      "engine time in steps that ran prompt tokens only (prefill), one "
      "generated token per sequence only (decode), both (mixed), or no "
      "step (idle)",
      ngx_http_llm_series_phase, 0, 1 },
    { "ngx_llm_compute_busy_seconds_total", "counter",
      "cpu backend: thread-seconds inside the model's kernels",
      ngx_http_llm_series_ns, ngx_http_llm_stat(compute_busy_ns), 1 },
    { "ngx_llm_compute_threads", "gauge",
      "cpu backend: threads of the compute pool",
      ngx_http_llm_series_u32, ngx_http_llm_stat(compute_threads), 1 },
    { "ngx_llm_compute_utilization", "gauge",
      "compute busy over the last second, 0-1: cpu pool busy time over "
      "wall time and threads, cuda NVML's utilization",
      ngx_http_llm_series_util, 0, 1 },
    { "ngx_llm_model_weights_bytes", "gauge",
      "bytes of the model's weights",
      ngx_http_llm_series_weights, 0, 1 },
    { "ngx_llm_kv_cache_reserved_bytes", "gauge",
      "bytes of the KV-cache pool",
      ngx_http_llm_series_kv_bytes, ngx_http_llm_stat(kv_blocks_total), 1 },
    { "ngx_llm_kv_cache_used_bytes", "gauge",
      "bytes of the KV-cache blocks sequences hold",
      ngx_http_llm_series_kv_bytes, ngx_http_llm_stat(kv_blocks_used), 1 },
    { "ngx_llm_kv_blocks_capacity", "gauge",
      "KV-cache blocks in the pool",
      ngx_http_llm_series_u32, ngx_http_llm_stat(kv_blocks_total), 1 },
    { "ngx_llm_kv_blocks_cached", "gauge",
      "KV-cache blocks held by the prefix cache only",
      ngx_http_llm_series_u32, ngx_http_llm_stat(kv_blocks_cached), 1 },
    { "ngx_llm_kv_blocks_slid_total", "counter",
      "KV-cache blocks sequences released because they left the sliding "
      "window of every layer",
      ngx_http_llm_series_u64, ngx_http_llm_stat(kv_blocks_slid), 1 },
    { "ngx_llm_engine_resident_memory_bytes", "gauge",
      "the engine process's resident memory",
      ngx_http_llm_series_u64, ngx_http_llm_stat(rss_bytes), 1 },
    { "ngx_llm_device_memory_used_bytes", "gauge",
      "cuda backend: device memory in use (NVML), every device summed",
      ngx_http_llm_series_device, ngx_http_llm_stat(device_mem_used), 1 },
    { "ngx_llm_device_memory_total_bytes", "gauge",
      "cuda backend: device memory (NVML), every device summed",
      ngx_http_llm_series_device, ngx_http_llm_stat(device_mem_total), 1 },
    { "ngx_llm_ring_slots_used", "gauge",
      "ring slots in use",
      ngx_http_llm_series_slots_used, 0, 1 },
    { "ngx_llm_ring_slots_capacity", "gauge",
      "ring slots",
      ngx_http_llm_series_slots, 0, 1 },
};


/* a label value as the text format quotes it: \, " and newline escaped */
static u_char *
ngx_http_llm_label_value(u_char *p, ngx_str_t *v)
{
    u_char  *s, *end;

    for (s = v->data, end = s + v->len; s < end; s++) {
        if (*s == '\\' || *s == '"') {
            *p++ = '\\';
            *p++ = *s;
        } else if (*s == '\n') {
            *p++ = '\\';
            *p++ = 'n';
        } else {
            *p++ = *s;
        }
    }

    return p;
}


static ngx_int_t
ngx_http_llm_scrape_init(ngx_http_request_t *r, ngx_http_llm_scrape_t *e,
    ngx_http_llm_engine_conf_t *ecf)
{
    u_char  *p;

    if (ecf->peer == NULL) {
        (void) ngx_http_llm_peer_get(ecf, r->connection->log);
    }

    e->ecf = ecf;
    e->ring = ecf->peer ? ngx_http_llm_peer_ring(ecf->peer) : NULL;
    e->cnt = ngx_http_llm_counters(ecf);

    p = ngx_pnalloc(r->pool, sizeof("model_name=\"\",engine=\"\"") - 1
                    + 2 * (ecf->served_model_name.len + ecf->name.len));
    if (p == NULL) {
        return NGX_ERROR;
    }

    e->labels.data = p;
    p = ngx_cpymem(p, "model_name=\"", sizeof("model_name=\"") - 1);
    p = ngx_http_llm_label_value(p, &ecf->served_model_name);
    p = ngx_cpymem(p, "\",engine=\"", sizeof("\",engine=\"") - 1);
    p = ngx_http_llm_label_value(p, &ecf->name);
    *p++ = '"';
    e->labels.len = p - e->labels.data;

    return NGX_OK;
}


ngx_int_t
ngx_http_llm_metrics_handler(ngx_http_request_t *r)
{
    ngx_int_t                     rc;
    ngx_buf_t                    *b;
    ngx_uint_t                    i, k, n;
    ngx_chain_t                   out;
    ngx_http_llm_out_t            o;
    ngx_http_llm_scrape_t        *e;
    ngx_http_llm_main_conf_t     *lmcf;
    ngx_http_llm_engine_conf_t  **ep;
    const ngx_http_llm_family_t  *f;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    n = lmcf->engines.nelts;
    ep = lmcf->engines.elts;

    e = ngx_palloc(r->pool, sizeof(ngx_http_llm_scrape_t) * ngx_max(n, 1));
    b = ngx_create_temp_buf(r->pool, NGX_HTTP_LLM_METRICS_MAX * (n + 1));
    if (e == NULL || b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    for (k = 0; k < n; k++) {
        if (ngx_http_llm_scrape_init(r, &e[k], ep[k]) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    o.pos = b->pos;
    o.end = b->end;

    for (i = 0; i < sizeof(ngx_http_llm_families)
                    / sizeof(ngx_http_llm_families[0]); i++)
    {
        f = &ngx_http_llm_families[i];
        ngx_http_llm_out(&o, "# HELP %s %s\n# TYPE %s %s\n", f->name,
                         f->help, f->name, f->type);

        for (k = 0; k < n; k++) {
            if (!f->ring || e[k].ring) {
                f->series(&o, &e[k], f);
            }
        }
    }

    if (o.pos == o.end) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "llm: /metrics is longer than its %uz byte buffer",
                      (size_t) (b->end - b->start));
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b->last = o.pos;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = b->last - b->pos;
    ngx_str_set(&r->headers_out.content_type,
                "text/plain; version=0.0.4; charset=utf-8");
    r->headers_out.content_type_len = r->headers_out.content_type.len;

    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


/* ---------------------------------------------------------------------- */
/* $llm_* variables                                                       */

enum {
    NGX_HTTP_LLM_VAR_MODEL = 0,
    NGX_HTTP_LLM_VAR_PROMPT_TOKENS,
    NGX_HTTP_LLM_VAR_COMPLETION_TOKENS,
    NGX_HTTP_LLM_VAR_CACHED_TOKENS,
    NGX_HTTP_LLM_VAR_TTFT,
    NGX_HTTP_LLM_VAR_TPOT,
    NGX_HTTP_LLM_VAR_QUEUE_TIME,
    NGX_HTTP_LLM_VAR_FINISH_REASON,
    NGX_HTTP_LLM_VAR_REQUEST_ID,
};


static ngx_int_t
ngx_http_llm_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    u_char              *p;
    uint32_t             n;
    uint64_t             ns;
    ngx_uint_t           fin;
    ngx_http_llm_ctx_t  *ctx;
    static const char   *finish[] = {
        "", "stop", "length", "cancelled", "error"
    };

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    if (ctx == NULL || ctx->ecf == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN + 8);
    if (p == NULL) {
        return NGX_ERROR;
    }

    v->data = p;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    switch (data) {

    case NGX_HTTP_LLM_VAR_MODEL:
        v->data = ctx->ecf->served_model_name.data;
        v->len = ctx->ecf->served_model_name.len;
        return NGX_OK;

    case NGX_HTTP_LLM_VAR_PROMPT_TOKENS:
        v->len = ngx_sprintf(p, "%uD", ctx->n_prompt) - p;
        return NGX_OK;

    case NGX_HTTP_LLM_VAR_COMPLETION_TOKENS:
        /* every choice's, as the reply's usage counts them */
        n = ngx_http_llm_completion_tokens(ctx);
        v->len = ngx_sprintf(p, "%uD", n) - p;
        return NGX_OK;

    case NGX_HTTP_LLM_VAR_CACHED_TOKENS:
        v->len = ngx_sprintf(p, "%uD", ctx->n_cached) - p;
        return NGX_OK;

    case NGX_HTTP_LLM_VAR_TTFT:
        if (ctx->t_first_ns == 0) {
            break;
        }
        ns = ctx->t_first_ns - ctx->t_submit_ns;
        v->len = ngx_sprintf(p, "%.3f", ns / 1e9) - p;
        return NGX_OK;

    case NGX_HTTP_LLM_VAR_TPOT:
        /* from the first token of any choice to the last choice's end */
        n = ngx_http_llm_completion_tokens(ctx);
        if (n < 2 || ctx->t_done_ns == 0) {
            break;
        }
        ns = (ctx->t_done_ns - ctx->t_first_ns) / (n - 1);
        v->len = ngx_sprintf(p, "%.4f", ns / 1e9) - p;
        return NGX_OK;

    case NGX_HTTP_LLM_VAR_QUEUE_TIME:
        if (ctx->t_scheduled_ns == 0 || ctx->t_scheduled_ns < ctx->t_submit_ns)
        {
            break;
        }
        ns = ctx->t_scheduled_ns - ctx->t_submit_ns;
        v->len = ngx_sprintf(p, "%.3f", ns / 1e9) - p;
        return NGX_OK;

    case NGX_HTTP_LLM_VAR_FINISH_REASON:
        /* the request's: choice 0's */
        fin = ctx->n_choices ? ctx->choices[0].finish : LLM_FINISH_NONE;
        if (fin == LLM_FINISH_NONE || fin > LLM_FINISH_ERROR) {
            break;
        }
        v->data = (u_char *) finish[fin];
        v->len = ngx_strlen(finish[fin]);
        return NGX_OK;

    case NGX_HTTP_LLM_VAR_REQUEST_ID:
        if (ctx->id.len == 0) {
            break;
        }
        v->data = ctx->id.data;
        v->len = ctx->id.len;
        return NGX_OK;
    }

    v->data = (u_char *) "-";
    v->len = 1;
    return NGX_OK;
}


static ngx_http_variable_t  ngx_http_llm_vars[] = {

    { ngx_string("llm_model"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_MODEL, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_prompt_tokens"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_PROMPT_TOKENS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_completion_tokens"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_COMPLETION_TOKENS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_cached_tokens"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_CACHED_TOKENS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_ttft"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_TTFT, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_tpot"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_TPOT, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_queue_time"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_QUEUE_TIME, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_finish_reason"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_FINISH_REASON, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_request_id"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_REQUEST_ID, NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


ngx_int_t
ngx_http_llm_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_http_llm_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}
