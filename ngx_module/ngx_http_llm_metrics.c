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

#define NGX_HTTP_LLM_METRICS_MAX  (32 * 1024)

typedef struct {
    u_char          *pos;
    u_char          *end;
    ngx_str_t       *model;
} ngx_http_llm_out_t;


static void
ngx_http_llm_out(ngx_http_llm_out_t *o, const char *fmt, ...)
{
    va_list  args;

    va_start(args, fmt);
    o->pos = ngx_vslprintf(o->pos, o->end, fmt, args);
    va_end(args);
}


static void
ngx_http_llm_out_hist(ngx_http_llm_out_t *o, const char *name,
    const char *help, llm_hist *h)
{
    int       b;
    uint64_t  cum, n;

    ngx_http_llm_out(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help,
                     name);

    cum = 0;
    for (b = 0; b < LLM_HIST_BUCKETS; b++) {
        n = atomic_load_explicit(&h->count[b], memory_order_relaxed);
        cum += n;
        ngx_http_llm_out(o, "%s_bucket{model_name=\"%V\",le=\"%.3f\"} %uL\n",
                         name, o->model, llm_hist_bounds[b], cum);
    }
    cum += atomic_load_explicit(&h->count[LLM_HIST_BUCKETS],
                                memory_order_relaxed);

    ngx_http_llm_out(o, "%s_bucket{model_name=\"%V\",le=\"+Inf\"} %uL\n"
                     "%s_count{model_name=\"%V\"} %uL\n"
                     "%s_sum{model_name=\"%V\"} %.6f\n",
                     name, o->model, cum, name, o->model, cum, name,
                     o->model,
                     atomic_load(&h->sum_us) / 1e6);
}


static void
ngx_http_llm_out_metric(ngx_http_llm_out_t *o, const char *name,
    const char *type, const char *help, uint64_t v)
{
    ngx_http_llm_out(o, "# HELP %s %s\n# TYPE %s %s\n%s{model_name=\"%V\"} "
                     "%uL\n", name, help, name, type, name, o->model, v);
}


static void
ngx_http_llm_engine_metrics(ngx_http_llm_out_t *o,
    ngx_http_llm_engine_conf_t *ecf)
{
    uint32_t                  i, used, total, n_slots, busy;
    llm_ring_header          *ring;
    llm_ring_stats           *st;
    ngx_http_llm_counters_t  *cnt;

    o->model = &ecf->served_model_name;
    ring = ecf->peer ? ngx_http_llm_peer_ring(ecf->peer) : NULL;

    ngx_http_llm_out_metric(o, "ngx_llm_engine_up", "gauge",
                            "1 when the engine is connected and ready",
                            ecf->peer
                            && ngx_http_llm_peer_ready(ecf->peer) == NGX_OK);

    cnt = ngx_http_llm_counters(ecf);
    if (cnt) {
        ngx_http_llm_out_metric(o, "ngx_llm_engine_starts_total", "counter",
                                "engine processes started by nginx",
                                cnt->engine_starts);
        ngx_http_llm_out_metric(o, "ngx_llm_engine_watchdog_restarts_total",
                                "counter",
                                "stalled engines the watchdog replaced",
                                cnt->watchdog_restarts);
        ngx_http_llm_out_metric(o, "ngx_llm_tool_call_parse_failures_total",
                                "counter",
                                "replies that looked like a tool call and "
                                "were not one (sent as content)",
                                cnt->tool_parse_failures);

        ngx_http_llm_out(o, "# HELP ngx_llm_http_requests_total API "
                         "requests answered, by status\n"
                         "# TYPE ngx_llm_http_requests_total counter\n");
        for (i = 0; i < NGX_HTTP_LLM_N_STATUS; i++) {
            if (ngx_http_llm_statuses[i]) {
                ngx_http_llm_out(o, "ngx_llm_http_requests_total{model_name="
                                 "\"%V\",status=\"%ui\"} %uA\n", o->model,
                                 ngx_http_llm_statuses[i], cnt->status[i]);
            } else {
                ngx_http_llm_out(o, "ngx_llm_http_requests_total{model_name="
                                 "\"%V\",status=\"other\"} %uA\n", o->model,
                                 cnt->status[i]);
            }
        }
    }

    if (ring == NULL) {
        return;
    }

    st = &ring->stats;

    ngx_http_llm_out_metric(o, "vllm:num_requests_running", "gauge",
                            "sequences in the running batch",
                            atomic_load(&st->running));
    ngx_http_llm_out_metric(o, "vllm:num_requests_waiting", "gauge",
                            "sequences waiting to be scheduled",
                            atomic_load(&st->waiting));

    used = atomic_load(&st->kv_blocks_used);
    total = atomic_load(&st->kv_blocks_total);
    ngx_http_llm_out(o, "# HELP vllm:kv_cache_usage_perc KV-cache usage, "
                     "1 means 100 percent\n# TYPE vllm:kv_cache_usage_perc "
                     "gauge\nvllm:kv_cache_usage_perc{model_name=\"%V\"} "
                     "%.6f\n", o->model,
                     total ? (double) used / total : 0.0);

    ngx_http_llm_out_metric(o, "vllm:prompt_tokens_total", "counter",
                            "prefill tokens processed",
                            atomic_load(&st->prompt_tokens));
    ngx_http_llm_out_metric(o, "vllm:generation_tokens_total", "counter",
                            "generated tokens",
                            atomic_load(&st->generation_tokens));
    ngx_http_llm_out_metric(o, "vllm:prefix_cache_queries_total", "counter",
                            "prompt tokens looked up in the prefix cache",
                            atomic_load(&st->prefix_queries));
    ngx_http_llm_out_metric(o, "vllm:prefix_cache_hits_total", "counter",
                            "prompt tokens found in the prefix cache",
                            atomic_load(&st->cached_tokens));
    ngx_http_llm_out_metric(o, "vllm:num_preemptions_total", "counter",
                            "sequences preempted for KV space",
                            atomic_load(&st->preemptions));

    ngx_http_llm_out(o, "# HELP vllm:request_success_total finished "
                     "requests by finish reason\n"
                     "# TYPE vllm:request_success_total counter\n");
    ngx_http_llm_out(o, "vllm:request_success_total{model_name=\"%V\","
                     "finished_reason=\"stop\"} %uL\n"
                     "vllm:request_success_total{model_name=\"%V\","
                     "finished_reason=\"length\"} %uL\n"
                     "vllm:request_success_total{model_name=\"%V\","
                     "finished_reason=\"abort\"} %uL\n"
                     "vllm:request_success_total{model_name=\"%V\","
                     "finished_reason=\"error\"} %uL\n",
                     o->model, atomic_load(&st->finished[LLM_FINISH_STOP]),
                     o->model, atomic_load(&st->finished[LLM_FINISH_LENGTH]),
                     o->model,
                     atomic_load(&st->finished[LLM_FINISH_CANCELLED]),
                     o->model, atomic_load(&st->finished[LLM_FINISH_ERROR]));

    ngx_http_llm_out_hist(o, "vllm:time_to_first_token_seconds",
                          "time to first token",
                          &st->hist[LLM_HIST_TTFT]);
    ngx_http_llm_out_hist(o, "vllm:inter_token_latency_seconds",
                          "time between tokens",
                          &st->hist[LLM_HIST_ITL]);
    ngx_http_llm_out_hist(o, "vllm:e2e_request_latency_seconds",
                          "request latency, submit to last token",
                          &st->hist[LLM_HIST_E2E]);
    ngx_http_llm_out_hist(o, "vllm:request_queue_time_seconds",
                          "time waiting before the first step",
                          &st->hist[LLM_HIST_QUEUE]);

    ngx_http_llm_out_metric(o, "ngx_llm_cancelled_total", "counter",
                            "sequences cancelled (client gone, deadline)",
                            atomic_load(&st->cancelled));
    ngx_http_llm_out_metric(o, "ngx_llm_engine_steps_total", "counter",
                            "engine steps (batched forwards) run",
                            atomic_load(&st->steps));
    ngx_http_llm_out_metric(o, "ngx_llm_kv_blocks_total", "gauge",
                            "KV-cache blocks in the pool", total);
    ngx_http_llm_out_metric(o, "ngx_llm_kv_blocks_cached", "gauge",
                            "KV-cache blocks held by the prefix cache only",
                            atomic_load(&st->kv_blocks_cached));

    n_slots = ring->n_slots;
    busy = 0;
    for (i = 0; i < n_slots; i++) {
        busy += atomic_load_explicit(&llm_ring_slot(ring, i)->state,
                                     memory_order_relaxed) != LLM_SLOT_FREE;
    }
    ngx_http_llm_out_metric(o, "ngx_llm_ring_slots_used", "gauge",
                            "ring slots in use", busy);
    ngx_http_llm_out_metric(o, "ngx_llm_ring_slots_total", "gauge",
                            "ring slots", n_slots);
}


ngx_int_t
ngx_http_llm_metrics_handler(ngx_http_request_t *r)
{
    ngx_int_t                     rc;
    ngx_buf_t                    *b;
    ngx_uint_t                    i;
    ngx_chain_t                   out;
    ngx_http_llm_out_t            o;
    ngx_http_llm_main_conf_t     *lmcf;
    ngx_http_llm_engine_conf_t  **ep;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);

    b = ngx_create_temp_buf(r->pool,
                            NGX_HTTP_LLM_METRICS_MAX
                            * ngx_max(lmcf->engines.nelts, 1));
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    o.pos = b->pos;
    o.end = b->end;

    ep = lmcf->engines.elts;
    for (i = 0; i < lmcf->engines.nelts; i++) {
        if (ep[i]->peer == NULL) {
            (void) ngx_http_llm_peer_get(ep[i], r->connection->log);
        }
        ngx_http_llm_engine_metrics(&o, ep[i]);
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
    uint64_t             ns;
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
        v->len = ngx_sprintf(p, "%uD", ctx->n_completion) - p;
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
        if (ctx->n_completion < 2 || ctx->t_done_ns == 0) {
            break;
        }
        ns = (ctx->t_done_ns - ctx->t_first_ns) / (ctx->n_completion - 1);
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
        if (ctx->finish == LLM_FINISH_NONE || ctx->finish > LLM_FINISH_ERROR) {
            break;
        }
        v->data = (u_char *) finish[ctx->finish];
        v->len = ngx_strlen(finish[ctx->finish]);
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
