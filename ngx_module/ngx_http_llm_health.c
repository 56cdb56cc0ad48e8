/*
 * llm_health: a timed round trip over the ring (docs/architecture.md). It never
 * waits for readiness: it reports it, for load balancers.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


#define NGX_HTTP_LLM_PING_TIMEOUT  1000     /* ms; docs/architecture.md */


static ngx_int_t ngx_http_llm_health_ping(ngx_http_request_t *r);


static ngx_int_t
ngx_http_llm_health_reply(ngx_http_request_t *r, ngx_http_llm_peer_t *peer,
    ngx_uint_t answered)
{
    u_char            buf[64];
    cJSON            *root;
    uint64_t          now;
    ngx_int_t         rc;
    ngx_msec_t        stalled;
    const char       *reason;
    llm_ring_header  *ring;

    rc = ngx_http_llm_peer_ready(peer);
    ring = ngx_http_llm_peer_ring(peer);

    root = cJSON_CreateObject();

    if (!answered || rc != NGX_OK || ring == NULL) {
        reason = (answered || ring == NULL)
                 ? ngx_http_llm_peer_reason(peer)
                 : "engine did not answer over the ring within 1 s";

        stalled = ngx_http_llm_peer_stalled(peer);
        if (stalled) {
            *ngx_snprintf(buf, sizeof(buf) - 1, "engine stalled: no "
                          "progress for %M ms", stalled) = '\0';
            reason = (char *) buf;
        }

        cJSON_AddStringToObject(root, "status", "unavailable");
        cJSON_AddStringToObject(root, "reason", reason);
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm: health: unavailable: %s", reason);
        ngx_http_llm_retry_after(r, 1);
        return ngx_http_llm_send_json(r, NGX_HTTP_SERVICE_UNAVAILABLE, root);
    }

    now = ngx_http_llm_now_ns();
    cJSON_AddStringToObject(root, "status", "ready");
    cJSON_AddNumberToObject(root, "engine_pid", ring->engine_pid);
    cJSON_AddNumberToObject(root, "uptime_s",
                            (double) ((now - ring->started_ns) / 1000000000));
    cJSON_AddNumberToObject(root, "heartbeat_age_ms",
                            (double) ((now - atomic_load(&ring->heartbeat_ns))
                                      / 1000000));

    return ngx_http_llm_send_json(r, NGX_HTTP_OK, root);
}


static void
ngx_http_llm_ping_answer(ngx_http_llm_slot_t *s)
{
    uint32_t             st;
    ngx_http_llm_ctx_t  *ctx = s->data;

    if (s->slot != NULL) {
        st = atomic_load_explicit(&s->slot->state, memory_order_acquire);
        if (st != LLM_SLOT_DONE) {
            return;
        }
    }

    ngx_http_llm_ctx_finish(ctx, ngx_http_llm_health_reply(ctx->request,
                                                           ctx->peer,
                                                           s->slot != NULL));
}


static void
ngx_http_llm_ping_timeout(ngx_event_t *ev)
{
    ngx_http_llm_ctx_t *ctx = ev->data;

    ngx_http_llm_ctx_finish(ctx, ngx_http_llm_health_reply(ctx->request,
                                                           ctx->peer, 0));
}


static ngx_int_t
ngx_http_llm_health_ping(ngx_http_request_t *r)
{
    ngx_int_t                 rc;
    ngx_http_llm_ctx_t       *ctx;
    ngx_http_llm_slot_t      *s;
    ngx_http_llm_peer_t      *peer;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    peer = llcf->engine->peer;

    ctx = ngx_http_llm_ctx_create(r, peer);
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* a ping is a request of one slot: its one choice's */
    if (ngx_http_llm_choices_create(ctx, 1) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    s = &ctx->choices[0].slot;

    rc = ngx_http_llm_peer_claim(peer, s, LLM_KIND_PING);
    if (rc != NGX_OK) {
        return ngx_http_llm_health_reply(r, peer, 0);
    }

    s->handler = ngx_http_llm_ping_answer;
    ctx->deadline.handler = ngx_http_llm_ping_timeout;

    if (ngx_http_llm_peer_submit(s) != NGX_OK) {
        return ngx_http_llm_health_reply(r, peer, 0);
    }

    ngx_add_timer(&ctx->deadline, NGX_HTTP_LLM_PING_TIMEOUT);

    r->read_event_handler = ngx_http_test_reading;
    r->main->count++;

    return NGX_DONE;
}


ngx_int_t
ngx_http_llm_health_handler(ngx_http_request_t *r)
{
    ngx_int_t                 rc;
    ngx_http_llm_peer_t      *peer;
    ngx_http_llm_loc_conf_t  *llcf;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return ngx_http_llm_send_error(r, NGX_HTTP_NOT_ALLOWED,
                                       "method_not_allowed",
                                       "use GET for %V", &r->uri);
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    peer = ngx_http_llm_peer_get(llcf->engine, r->connection->log);
    if (peer == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* health never waits for readiness: it reports it */
    if (ngx_http_llm_peer_ring(peer) == NULL) {
        return ngx_http_llm_health_reply(r, peer, 1);
    }

    return ngx_http_llm_health_ping(r);
}
