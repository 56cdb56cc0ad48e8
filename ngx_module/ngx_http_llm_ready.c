/*
 * Waiting for the engine: a request that comes while the engine starts,
 * loads or restarts waits (bounded by ready_timeout) instead of failing.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


static void
ngx_http_llm_ready_handler(void *data, ngx_int_t ready)
{
    ngx_int_t            rc;
    ngx_http_llm_ctx_t  *ctx = data;

    if (ctx->deadline.timer_set) {
        ngx_del_timer(&ctx->deadline);
    }

    rc = ready ? ctx->ready(ctx->request)
               : ngx_http_llm_unavailable(ctx->request, ctx->peer);

    if (rc == NGX_DONE) {
        /* it went on to the engine: drop only the wait's reference */
        ngx_http_finalize_request(ctx->request, NGX_DONE);
        return;
    }

    ngx_http_llm_ctx_finish(ctx, rc);
}


static void
ngx_http_llm_ready_timeout(ngx_event_t *ev)
{
    ngx_http_llm_ctx_t *ctx = ev->data;

    ngx_http_llm_peer_unwait(&ctx->waiter);
    ngx_http_llm_ctx_finish(ctx,
                            ngx_http_llm_unavailable(ctx->request, ctx->peer));
}


/*
 * At start API requests wait (bounded by ready_timeout, docs/directives.md)
 * for the engine instead of failing, so nothing races "503 not ready" after
 * a start or a restart.
 */
ngx_int_t
ngx_http_llm_when_ready(ngx_http_request_t *r, ngx_http_llm_peer_t *peer,
    ngx_int_t (*ready)(ngx_http_request_t *r))
{
    ngx_int_t                 rc;
    ngx_msec_t                stalled;
    ngx_http_llm_ctx_t       *ctx;
    ngx_http_llm_loc_conf_t  *llcf;

    rc = ngx_http_llm_peer_ready(peer);

    if (rc == NGX_OK) {
        /* a hung engine would hold the request until its deadline */
        stalled = ngx_http_llm_peer_stalled(peer);
        if (stalled) {
            return ngx_http_llm_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                           "engine_stalled",
                                           "engine stalled: no progress "
                                           "for %M ms", stalled);
        }

        return ready(r);
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    if (rc == NGX_DECLINED || llcf->engine->ready_timeout == 0) {
        return ngx_http_llm_unavailable(r, peer);
    }

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);
    if (ctx == NULL) {
        ctx = ngx_http_llm_ctx_create(r, peer);
        if (ctx == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    ctx->ready = ready;
    ctx->waiter.handler = ngx_http_llm_ready_handler;
    ctx->deadline.handler = ngx_http_llm_ready_timeout;

    /* not cancelable: a reload must not cut a request that waits */
    ngx_add_timer(&ctx->deadline, llcf->engine->ready_timeout);
    ngx_http_llm_peer_wait(peer, &ctx->waiter);

    r->read_event_handler = ngx_http_test_reading;
    r->main->count++;

    return NGX_DONE;
}
