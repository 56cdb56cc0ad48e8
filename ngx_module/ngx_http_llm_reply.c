/*
 * Replies of our own: a JSON body, OpenAI's error object (and the one log
 * line that says the same), 503 with Retry-After when the engine is not
 * there.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


static ngx_int_t
ngx_http_llm_send_body(ngx_http_request_t *r, ngx_uint_t status,
    ngx_buf_t *b)
{
    ngx_int_t    rc;
    ngx_chain_t  out;

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


/* json as the reply, one line; json is freed */
ngx_int_t
ngx_http_llm_send_json(ngx_http_request_t *r, ngx_uint_t status,
    cJSON *json)
{
    char       *text;
    size_t      len;
    ngx_buf_t  *b;

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

    return ngx_http_llm_send_body(r, status, b);
}


ngx_int_t
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


/* a JSON string, or null, without cJSON */
static size_t
ngx_http_llm_plain_len(const char *s)
{
    size_t  n;

    if (s == NULL) {
        return sizeof("null") - 1;
    }

    n = ngx_strlen(s);

    return n + ngx_escape_json(NULL, (u_char *) s, n) + 2;
}


static u_char *
ngx_http_llm_plain_str(u_char *p, const char *s)
{
    if (s == NULL) {
        return ngx_cpymem(p, "null", sizeof("null") - 1);
    }

    *p++ = '"';
    p = (u_char *) ngx_escape_json(p, (u_char *) s, ngx_strlen(s));
    *p++ = '"';

    return p;
}


/*
 * The error object when cJSON could not allocate it: the same fields,
 * written by hand, so an out-of-memory error still answers with its own
 * status and code.
 */
static ngx_int_t
ngx_http_llm_error_plain(ngx_http_request_t *r, ngx_uint_t status,
    const char *type, const char *param, const char *code, const char *msg)
{
    u_char     *p;
    size_t      len;
    ngx_buf_t  *b;

    ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                  "llm: cJSON could not build the error reply, "
                  "written without it");

    len = sizeof("{\"error\":{\"message\":,\"type\":,\"param\":,"
                 "\"code\":}}\n") - 1
          + ngx_http_llm_plain_len(msg) + ngx_http_llm_plain_len(type)
          + ngx_http_llm_plain_len(param) + ngx_http_llm_plain_len(code);

    b = ngx_create_temp_buf(r->pool, len);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_cpymem(b->last, "{\"error\":{\"message\":",
                   sizeof("{\"error\":{\"message\":") - 1);
    p = ngx_http_llm_plain_str(p, msg);
    p = ngx_cpymem(p, ",\"type\":", sizeof(",\"type\":") - 1);
    p = ngx_http_llm_plain_str(p, type);
    p = ngx_cpymem(p, ",\"param\":", sizeof(",\"param\":") - 1);
    p = ngx_http_llm_plain_str(p, param);
    p = ngx_cpymem(p, ",\"code\":", sizeof(",\"code\":") - 1);
    p = ngx_http_llm_plain_str(p, code);
    b->last = ngx_cpymem(p, "}}\n", sizeof("}}\n") - 1);

    return ngx_http_llm_send_body(r, status, b);
}


static cJSON *
ngx_http_llm_add_nullable(cJSON *obj, const char *name, const char *value)
{
    return value ? cJSON_AddStringToObject(obj, name, value)
                 : cJSON_AddNullToObject(obj, name);
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
    err = (root != NULL) ? cJSON_AddObjectToObject(root, "error") : NULL;

    if (err == NULL
        || cJSON_AddStringToObject(err, "message", msg) == NULL
        || cJSON_AddStringToObject(err, "type", type) == NULL
        || ngx_http_llm_add_nullable(err, "param", param) == NULL
        || ngx_http_llm_add_nullable(err, "code", code) == NULL)
    {
        cJSON_Delete(root);
        return ngx_http_llm_error_plain(r, status, type, param, code, msg);
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
