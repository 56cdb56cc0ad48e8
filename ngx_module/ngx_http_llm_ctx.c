/*
 * A request's context: created when an llm location takes the request,
 * released once, whichever comes first of its end and the client leaving.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


/* n choices, each with its slot, whose events come to the request */
ngx_int_t
ngx_http_llm_choices_create(ngx_http_llm_ctx_t *ctx, ngx_uint_t n)
{
    ngx_uint_t              i;
    ngx_http_llm_choice_t  *c;

    c = ngx_pcalloc(ctx->request->pool, n * sizeof(ngx_http_llm_choice_t));
    if (c == NULL) {
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        c[i].index = i;
        c[i].slot.data = ctx;
        c[i].slot.log = ctx->request->connection->log;
    }

    ctx->choices = c;
    ctx->n_choices = n;

    return NGX_OK;
}


/* every choice's slot goes back (the engine cancels what still runs) */
void
ngx_http_llm_release_choices(ngx_http_llm_ctx_t *ctx)
{
    ngx_uint_t  i;

    for (i = 0; i < ctx->n_choices; i++) {
        ngx_http_llm_peer_release(&ctx->choices[i].slot);
    }
}


static void
ngx_http_llm_ctx_cleanup(void *data)
{
    ngx_http_llm_ctx_t *ctx = data;

    ngx_http_llm_peer_unwait(&ctx->waiter);
    ngx_http_llm_release_choices(ctx);

    if (ctx->deadline.timer_set) {
        ngx_del_timer(&ctx->deadline);
    }
}


ngx_http_llm_ctx_t *
ngx_http_llm_ctx_create(ngx_http_request_t *r, ngx_http_llm_peer_t *peer)
{
    ngx_http_llm_ctx_t        *ctx;
    ngx_http_cleanup_t        *cln;

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_ctx_t));
    if (ctx == NULL) {
        return NULL;
    }

    cln = ngx_http_cleanup_add(r, 0);
    if (cln == NULL) {
        return NULL;
    }
    cln->handler = ngx_http_llm_ctx_cleanup;
    cln->data = ctx;

    ctx->request = r;
    ctx->peer = peer;
    ctx->waiter.data = ctx;
    ctx->deadline.data = ctx;
    ctx->deadline.log = r->connection->log;
    ctx->output = ngx_http_llm_output(NGX_HTTP_LLM_GEN_COMPLETION);

    ngx_http_set_ctx(r, ctx, ngx_http_llm_module);

    return ctx;
}


/* the request leaves our hands: respond once, release what it held */
void
ngx_http_llm_ctx_finish(ngx_http_llm_ctx_t *ctx, ngx_int_t rc)
{
    if (ctx->finished) {
        return;
    }
    ctx->finished = 1;

    ngx_http_llm_ctx_cleanup(ctx);
    ngx_http_finalize_request(ctx->request, rc);
}
