/*
 * HTTP handlers: the OpenAI-compatible API and the health check.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include <cjson/cJSON.h>

#include "ngx_http_llm_module.h"


#define NGX_HTTP_LLM_PING_TIMEOUT  1000     /* ms; BRIEF 9.12 */


static ngx_int_t ngx_http_llm_models(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_health_ping(ngx_http_request_t *r);


/* ---------------------------------------------------------------------- */
/* responses                                                              */

ngx_int_t
ngx_http_llm_send_json(ngx_http_request_t *r, ngx_uint_t status,
    cJSON *json)
{
    char         *text;
    size_t        len;
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    text = cJSON_PrintUnformatted(json);
    cJSON_Delete(json);

    if (text == NULL) {
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "llm: cannot serialize a JSON response");
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    len = ngx_strlen(text);

    b = ngx_create_temp_buf(r->pool, len + 1);
    if (b == NULL) {
        free(text);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b->last = ngx_cpymem(b->last, text, len);
    *b->last++ = '\n';
    free(text);

    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    r->headers_out.status = status;
    r->headers_out.content_length_n = b->last - b->pos;
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;

    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


static ngx_int_t
ngx_http_llm_retry_after(ngx_http_request_t *r, ngx_uint_t seconds)
{
    ngx_table_elt_t  *h;

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->hash = 1;
    ngx_str_set(&h->key, "Retry-After");
    h->value.data = ngx_pnalloc(r->pool, NGX_INT_T_LEN);
    if (h->value.data == NULL) {
        return NGX_ERROR;
    }
    h->value.len = ngx_sprintf(h->value.data, "%ui", seconds)
                   - h->value.data;

    return NGX_OK;
}


/* OpenAI's error object, and one log line saying the same */
static ngx_int_t
ngx_http_llm_error_json(ngx_http_request_t *r, ngx_uint_t status,
    const char *type, const char *param, const char *code, const char *msg)
{
    cJSON       *root, *err;
    ngx_uint_t   level;

    level = (status >= 500) ? NGX_LOG_ERR : NGX_LOG_INFO;
    ngx_log_error(level, r->connection->log, 0, "llm: %ui %s%s%s", status,
                  msg, param ? " param=" : "", param ? param : "");

    if (status == NGX_HTTP_SERVICE_UNAVAILABLE
        || status == NGX_HTTP_TOO_MANY_REQUESTS)
    {
        if (ngx_http_llm_retry_after(r, 1) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    root = cJSON_CreateObject();
    err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(err, "message", msg);
    cJSON_AddStringToObject(err, "type", type);

    if (param) {
        cJSON_AddStringToObject(err, "param", param);
    } else {
        cJSON_AddNullToObject(err, "param");
    }

    if (code) {
        cJSON_AddStringToObject(err, "code", code);
    } else {
        cJSON_AddNullToObject(err, "code");
    }

    return ngx_http_llm_send_json(r, status, root);
}


ngx_int_t
ngx_http_llm_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *type, const char *code, const char *fmt, ...)
{
    u_char   msg[512], *p;
    va_list  args;

    va_start(args, fmt);
    p = ngx_vslprintf(msg, msg + sizeof(msg) - 1, fmt, args);
    va_end(args);
    *p = '\0';

    return ngx_http_llm_error_json(r, status, type, NULL, code, (char *) msg);
}


/* a request the parser refused: its status, field and code */
ngx_int_t
ngx_http_llm_send_api_error(ngx_http_request_t *r, llm_api_error *err)
{
    return ngx_http_llm_error_json(r, err->status,
                                   err->status >= 500 ? "server_error"
                                   : "invalid_request_error",
                                   err->param[0] ? err->param : NULL,
                                   err->code[0] ? err->code : NULL,
                                   err->message);
}


ngx_int_t
ngx_http_llm_unavailable(ngx_http_request_t *r, ngx_http_llm_peer_t *peer)
{
    return ngx_http_llm_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                   "server_error", "engine_unavailable",
                                   "engine not ready: %s",
                                   ngx_http_llm_peer_reason(peer));
}


/* ---------------------------------------------------------------------- */
/* waiting on the engine                                                  */

static void
ngx_http_llm_ctx_cleanup(void *data)
{
    ngx_http_llm_ctx_t *ctx = data;

    ngx_http_llm_peer_unwait(&ctx->waiter);
    ngx_http_llm_slot_release(&ctx->slot);

    if (ctx->deadline.timer_set) {
        ngx_del_timer(&ctx->deadline);
    }

    ngx_http_llm_ctx_free_generation(ctx);
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
    ctx->slot.data = ctx;
    ctx->waiter.data = ctx;
    ctx->deadline.data = ctx;
    ctx->deadline.log = r->connection->log;

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
 * BRIEF 9.3: at start API requests wait (bounded) for the engine instead of
 * failing, so nothing races "503 not ready" after a start or a restart.
 */
ngx_int_t
ngx_http_llm_when_ready(ngx_http_request_t *r, ngx_http_llm_peer_t *peer,
    ngx_int_t (*ready)(ngx_http_request_t *r))
{
    ngx_int_t                 rc;
    ngx_http_llm_ctx_t       *ctx;
    ngx_http_llm_loc_conf_t  *llcf;

    rc = ngx_http_llm_peer_ready(peer);

    if (rc == NGX_OK) {
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


/* ---------------------------------------------------------------------- */
/* /v1/...                                                                */

static ngx_uint_t
ngx_http_llm_uri_ends(ngx_http_request_t *r, const char *suffix)
{
    size_t  n = ngx_strlen(suffix);

    return r->uri.len >= n
           && ngx_strncmp(r->uri.data + r->uri.len - n, suffix, n) == 0;
}


ngx_int_t
ngx_http_llm_api_handler(ngx_http_request_t *r)
{
    ngx_int_t                 rc;
    ngx_http_llm_peer_t      *peer;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    peer = ngx_http_llm_peer_get(llcf->engine, r->connection->log);
    if (peer == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (ngx_http_llm_uri_ends(r, "/models")) {
        if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
            return ngx_http_llm_send_error(r, NGX_HTTP_NOT_ALLOWED,
                                           "invalid_request_error",
                                           "method_not_allowed",
                                           "use GET for %V", &r->uri);
        }

        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        return ngx_http_llm_when_ready(r, peer, ngx_http_llm_models);
    }

    if (ngx_http_llm_uri_ends(r, "/chat/completions")
        || ngx_http_llm_uri_ends(r, "/completions"))
    {
        if (r->method != NGX_HTTP_POST) {
            rc = ngx_http_discard_request_body(r);
            if (rc != NGX_OK) {
                return rc;
            }
            return ngx_http_llm_send_error(r, NGX_HTTP_NOT_ALLOWED,
                                           "invalid_request_error",
                                           "method_not_allowed",
                                           "use POST for %V", &r->uri);
        }

        return ngx_http_llm_generate(r, ngx_http_llm_uri_ends(r,
                                                 "/chat/completions"));
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    return ngx_http_llm_send_error(r, NGX_HTTP_NOT_FOUND,
                                   "invalid_request_error", "unknown_url",
                                   "unknown endpoint %V", &r->uri);
}


static ngx_int_t
ngx_http_llm_models(ngx_http_request_t *r)
{
    cJSON                       *root, *data, *m, *meta;
    llm_ring_header             *ring;
    llm_model_facts             *f;
    ngx_http_llm_loc_conf_t     *llcf;
    ngx_http_llm_engine_conf_t  *ecf;
    char                         id[256];

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    ecf = llcf->engine;

    ring = ngx_http_llm_peer_ring(ecf->peer);
    if (ring == NULL) {
        return ngx_http_llm_unavailable(r, ecf->peer);
    }

    /* the engine wrote these; copy, and terminate its strings ourselves */
    f = ngx_palloc(r->pool, sizeof(llm_model_facts));
    if (f == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ngx_memcpy(f, &ring->model, sizeof(llm_model_facts));
    f->arch[sizeof(f->arch) - 1] = '\0';
    f->name[sizeof(f->name) - 1] = '\0';
    f->file_type[sizeof(f->file_type) - 1] = '\0';

    ngx_cpystrn((u_char *) id, ecf->served_model_name.data,
                ngx_min(ecf->served_model_name.len + 1, sizeof(id)));

    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    data = cJSON_AddArrayToObject(root, "data");

    m = cJSON_CreateObject();
    cJSON_AddItemToArray(data, m);
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created",
                            (double) (ngx_time()
                                      - (ngx_http_llm_now_ns()
                                         - ring->started_ns) / 1000000000));
    cJSON_AddStringToObject(m, "owned_by", "ngx_llm");
    cJSON_AddNumberToObject(m, "max_model_len",
                            (double) ngx_min(ecf->max_model_len,
                                             f->context_length
                                             ? f->context_length
                                             : ecf->max_model_len));

    meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddStringToObject(meta, "architecture", f->arch);
    cJSON_AddStringToObject(meta, "name", f->name);
    cJSON_AddStringToObject(meta, "tensor_type", f->file_type);
    cJSON_AddNumberToObject(meta, "parameters", (double) f->n_params);
    cJSON_AddNumberToObject(meta, "weight_bytes", (double) f->weight_bytes);
    cJSON_AddNumberToObject(meta, "context_length", f->context_length);
    cJSON_AddNumberToObject(meta, "vocab_size", f->vocab_size);
    cJSON_AddNumberToObject(meta, "layers", f->n_layers);
    cJSON_AddNumberToObject(meta, "embedding_length", f->dim);
    cJSON_AddNumberToObject(meta, "heads", f->n_heads);
    cJSON_AddNumberToObject(meta, "kv_heads", f->n_kv_heads);
    cJSON_AddNumberToObject(meta, "engine_pid", ring->engine_pid);

    return ngx_http_llm_send_json(r, NGX_HTTP_OK, root);
}


/* ---------------------------------------------------------------------- */
/* health: a timed round trip over the ring (BRIEF 9.12)                  */

static ngx_int_t
ngx_http_llm_health_reply(ngx_http_request_t *r, ngx_http_llm_peer_t *peer,
    ngx_uint_t answered)
{
    cJSON            *root;
    uint64_t          now;
    ngx_int_t         rc;
    const char       *reason;
    llm_ring_header  *ring;

    rc = ngx_http_llm_peer_ready(peer);
    ring = ngx_http_llm_peer_ring(peer);

    root = cJSON_CreateObject();

    if (!answered || rc != NGX_OK || ring == NULL) {
        reason = (answered || ring == NULL)
                 ? ngx_http_llm_peer_reason(peer)
                 : "engine did not answer over the ring within 1 s";

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
    ngx_http_llm_peer_t      *peer;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    peer = llcf->engine->peer;

    ctx = ngx_http_llm_ctx_create(r, peer);
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = ngx_http_llm_slot_claim(peer, &ctx->slot, LLM_KIND_PING);
    if (rc != NGX_OK) {
        return ngx_http_llm_health_reply(r, peer, 0);
    }

    ctx->slot.handler = ngx_http_llm_ping_answer;
    ctx->deadline.handler = ngx_http_llm_ping_timeout;

    if (ngx_http_llm_slot_submit(&ctx->slot) != NGX_OK) {
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
                                       "invalid_request_error",
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
