/*
 * Replies of our own: a JSON body, OpenAI's error object (and the one log
 * line that says the same), 503 with Retry-After when the engine is not
 * there. Every reply is valid UTF-8 whatever it echoes (a URI, a model
 * file's name), so a strict client can always decode it.
 *
 * And nginx's own error replies in an llm_api location (a malformed chunked
 * body, a 500 from a handler): a header filter and a body filter turn its
 * HTML page into the same JSON error object. Filters rather than
 * error_page: an error_page needs a location to send the request to,
 * which a module cannot add to the user's server{}, and a filter still
 * lets the user's own error_page win (nginx redirects before it builds
 * the page).
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"
#include "api/json_strict.h"
#include "text/utf8.h"


/* what an HTTP status means, told as OpenAI's error object (its type is
   ngx_http_llm_error_type()'s) */
typedef struct {
    ngx_uint_t                  status;
    const char                 *code;
    const char                 *message;
} ngx_http_llm_status_error_t;


static ngx_http_llm_status_error_t  ngx_http_llm_status_errors[] = {
    { NGX_HTTP_BAD_REQUEST, "invalid_request",
      "The HTTP request could not be read: it is malformed (for example "
      "an invalid chunked request body)." },
    { NGX_HTTP_REQUEST_TIME_OUT, "request_timeout",
      "The request body did not arrive in time." },
    { NGX_HTTP_REQUEST_ENTITY_TOO_LARGE, "request_too_large",
      "The request body is larger than this server accepts." },
    { NGX_HTTP_REQUEST_URI_TOO_LARGE, "uri_too_long",
      "The request URI is longer than this server accepts." },
    { NGX_HTTP_INTERNAL_SERVER_ERROR, "internal_error",
      "The server had an error while processing the request." },
    { NGX_HTTP_BAD_GATEWAY, "bad_gateway",
      "The server got a bad reply from the service behind it." },
    { NGX_HTTP_SERVICE_UNAVAILABLE, "service_unavailable",
      "The server cannot take the request now." },
    { NGX_HTTP_GATEWAY_TIME_OUT, "gateway_timeout",
      "The service behind the server did not reply in time." },
    { 0, NULL, NULL }
};


/* marks a reply whose headers the filter rewrote: its content type points
   here (an array of its own; a literal may share the address of ours) */
static u_char  ngx_http_llm_page_type[] = "application/json";

static ngx_http_output_header_filter_pt  ngx_http_llm_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_llm_next_body_filter;


/*
 * len bytes of s as valid UTF-8 into p: each byte that starts no valid
 * sequence becomes U+FFFD. Returns the bytes written; p NULL: the bytes
 * it would write.
 */
static size_t
ngx_http_llm_utf8_copy(u_char *p, const u_char *s, size_t len)
{
    size_t  i, n, out;

    for (i = 0, out = 0; i < len; i += n) {
        n = llm_utf8_len(s + i, len - i);

        if (n == 0) {
            if (p != NULL) {
                p = ngx_cpymem(p, "\xef\xbf\xbd", 3);
            }
            out += 3;
            n = 1;
            continue;
        }

        if (p != NULL) {
            p = ngx_cpymem(p, s + i, n);
        }
        out += n;
    }

    return out;
}


/* s as valid UTF-8: s itself when it is, else a pool copy */
static const char *
ngx_http_llm_utf8_valid(ngx_pool_t *pool, const char *s)
{
    u_char  *p;
    size_t   len, n;

    if (s == NULL) {
        return NULL;
    }

    len = ngx_strlen(s);
    n = ngx_http_llm_utf8_copy(NULL, (u_char *) s, len);

    if (n == len) {
        return s;
    }

    p = ngx_pnalloc(pool, n + 1);
    if (p == NULL) {
        return NULL;
    }

    ngx_http_llm_utf8_copy(p, (u_char *) s, len);
    p[n] = '\0';

    return (char *) p;
}


/* the end of the text start..end without a character cut off at it */
static u_char *
ngx_http_llm_utf8_cut(u_char *start, u_char *end)
{
    return start + llm_utf8_cut(start, end - start);
}


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
    size_t      len, n;
    ngx_buf_t  *b;

    text = cJSON_PrintUnformatted(json);
    cJSON_Delete(json);

    if (text == NULL) {
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "llm: cannot serialize a JSON response");
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* cJSON copies bytes >= 0x80 as they are, valid or not */
    len = ngx_strlen(text);
    n = ngx_http_llm_utf8_copy(NULL, (u_char *) text, len);

    b = ngx_create_temp_buf(r->pool, n + 1);
    if (b == NULL) {
        free(text);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b->last += ngx_http_llm_utf8_copy(b->last, (u_char *) text, len);
    *b->last++ = '\n';
    free(text);

    return ngx_http_llm_send_body(r, status, b);
}


ngx_int_t
ngx_http_llm_retry_after(ngx_http_request_t *r, ngx_uint_t seconds)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    /* the first one set says it: a quota's wait, not the default second */
    for (part = &r->headers_out.headers.part; part; part = part->next) {
        h = part->elts;
        for (i = 0; i < part->nelts; i++) {
            if (h[i].hash && h[i].key.len == sizeof("Retry-After") - 1
                && ngx_strncasecmp(h[i].key.data, (u_char *) "Retry-After",
                                   h[i].key.len) == 0)
            {
                return NGX_OK;
            }
        }
    }

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


/* the error object written by hand, without cJSON: no allocation but
   the buffer's, and the same bytes cJSON writes for these strings */
static ngx_buf_t *
ngx_http_llm_error_buf(ngx_pool_t *pool, const char *type,
    const char *param, const char *code, const char *msg)
{
    u_char     *p;
    size_t      len;
    ngx_buf_t  *b;

    len = sizeof("{\"error\":{\"message\":,\"type\":,\"param\":,"
                 "\"code\":}}\n") - 1
          + ngx_http_llm_plain_len(msg) + ngx_http_llm_plain_len(type)
          + ngx_http_llm_plain_len(param) + ngx_http_llm_plain_len(code);

    b = ngx_create_temp_buf(pool, len);
    if (b == NULL) {
        return NULL;
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

    return b;
}


/*
 * The error object when cJSON could not allocate it: the same fields,
 * written by hand, so an out-of-memory error still answers with its own
 * status and code.
 */
static ngx_int_t
ngx_http_llm_error_plain(ngx_http_request_t *r, ngx_uint_t status,
    const char *param, const char *code, const char *msg)
{
    ngx_buf_t  *b;

    ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                  "llm: cJSON could not build the error reply, "
                  "written without it");

    b = ngx_http_llm_error_buf(r->pool, ngx_http_llm_error_type(status, code),
                               param, code, msg);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

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
    const char *param, const char *code, const char *msg)
{
    cJSON       *root, *err;
    ngx_uint_t   level;

    /* a message may quote the URI or a value as it came */
    msg = ngx_http_llm_utf8_valid(r->pool, msg);
    if (msg == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (param != NULL) {
        param = ngx_http_llm_utf8_valid(r->pool, param);
        if (param == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    level = (status >= 500) ? NGX_LOG_ERR : NGX_LOG_INFO;
    ngx_log_error(level, r->connection->log, 0, "llm: %ui %s%s%s", status,
                  msg, param ? " param=" : "", param ? param : "");

    if (ngx_http_llm_messages_uri(r)) {
        root = ngx_http_llm_messages_error(status, msg);
        return root ? ngx_http_llm_send_json(r, status, root)
                    : NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

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
        || cJSON_AddStringToObject(err, "type",
                                   ngx_http_llm_error_type(status, code))
           == NULL
        || ngx_http_llm_add_nullable(err, "param", param) == NULL
        || ngx_http_llm_add_nullable(err, "code", code) == NULL)
    {
        cJSON_Delete(root);
        return ngx_http_llm_error_plain(r, status, param, code, msg);
    }

    return ngx_http_llm_send_json(r, status, root);
}


/*
 * OpenAI's "type" of an error, from its status: the one home of the rule.
 * A 429 of a token quota (code rate_limit_exceeded) is "tokens", as
 * OpenAI's tokens-per-minute limit answers; any other 429 is
 * "rate_limit_error".
 */
const char *
ngx_http_llm_error_type(ngx_uint_t status, const char *code)
{
    if (status == NGX_HTTP_TOO_MANY_REQUESTS) {
        return (code && ngx_strcmp(code, "rate_limit_exceeded") == 0)
               ? "tokens" : "rate_limit_error";
    }

    return status >= NGX_HTTP_INTERNAL_SERVER_ERROR ? "server_error"
                                                    : "invalid_request_error";
}


/* fmt's text into msg (size bytes), never cut inside a character */
static void
ngx_http_llm_message(u_char *msg, size_t size, const char *fmt, va_list args)
{
    u_char  *p;

    p = ngx_vslprintf(msg, msg + size - 1, fmt, args);

    if (p == msg + size - 1) {
        /* full: it may have been cut inside a character */
        p = ngx_http_llm_utf8_cut(msg, p);
    }
    *p = '\0';
}


ngx_int_t
ngx_http_llm_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *code, const char *fmt, ...)
{
    u_char   msg[NGX_HTTP_LLM_ERROR_LEN];
    va_list  args;

    va_start(args, fmt);
    ngx_http_llm_message(msg, sizeof(msg), fmt, args);
    va_end(args);

    return ngx_http_llm_error_json(r, status, NULL, code, (char *) msg);
}


/*
 * A step of the request's pipeline refuses it: the error is described in
 * the request's context, not sent; the status returned tells the one
 * place that answers (ngx_http_llm_answer()) to send it.
 */
ngx_int_t
ngx_http_llm_refuse(ngx_http_llm_ctx_t *ctx, ngx_uint_t status,
    const char *code, const char *fmt, ...)
{
    va_list                args;
    ngx_http_llm_error_t  *err;

    err = ngx_pcalloc(ctx->request->pool, sizeof(ngx_http_llm_error_t));
    ctx->error = err;

    if (err == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;     /* nginx's page */
    }

    err->status = status;
    if (code != NULL) {
        ngx_cpystrn((u_char *) err->code, (u_char *) code,
                    sizeof(err->code));
    }

    va_start(args, fmt);
    ngx_http_llm_message(err->message, sizeof(err->message), fmt, args);
    va_end(args);

    return status;
}


/* a refusal of the request parser's: its status, field and code */
ngx_int_t
ngx_http_llm_refuse_api(ngx_http_llm_ctx_t *ctx, llm_api_error *api)
{
    ngx_int_t  status;

    status = ngx_http_llm_refuse(ctx, api->status,
                                 api->code[0] ? api->code : NULL,
                                 "%s", api->message);

    if (ctx->error != NULL && api->param[0]) {
        ngx_cpystrn((u_char *) ctx->error->param, (u_char *) api->param,
                    sizeof(ctx->error->param));
    }

    return status;
}


/*
 * The one place that decides what a request refused by a step of its
 * pipeline is sent. A step returns NGX_OK, NGX_DONE (the request went on:
 * to the engine, or to a wait), NGX_ERROR or an HTTP status; a status the
 * step described with ngx_http_llm_refuse() goes out as OpenAI's error
 * object, any other as nginx's page for it (JSON through the filters
 * below). Returns what finalizes the request.
 */
ngx_int_t
ngx_http_llm_answer(ngx_http_llm_ctx_t *ctx, ngx_int_t rc)
{
    ngx_http_llm_error_t  *err = ctx->error;

    if (rc < NGX_HTTP_SPECIAL_RESPONSE || err == NULL
        || (ngx_int_t) err->status != rc)
    {
        return rc;
    }

    ctx->error = NULL;

    return ngx_http_llm_error_json(ctx->request, err->status,
                                   err->param[0] ? err->param : NULL,
                                   err->code[0] ? err->code : NULL,
                                   (char *) err->message);
}


/* the engine is not there: 503 and why, sent or as a step's refusal */
static const char  ngx_http_llm_not_ready[] = "engine not ready: %s";


ngx_int_t
ngx_http_llm_unavailable(ngx_http_request_t *r, ngx_http_llm_peer_t *peer)
{
    return ngx_http_llm_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                   "engine_unavailable",
                                   ngx_http_llm_not_ready,
                                   ngx_http_llm_peer_reason(peer));
}


ngx_int_t
ngx_http_llm_refuse_unavailable(ngx_http_llm_ctx_t *ctx)
{
    return ngx_http_llm_refuse(ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                               "engine_unavailable", ngx_http_llm_not_ready,
                               ngx_http_llm_peer_reason(ctx->peer));
}


/* ---------------------------------------------------------------------- */
/* nginx's own error replies, as JSON                                     */

static ngx_http_llm_status_error_t *
ngx_http_llm_status_error(ngx_uint_t status)
{
    ngx_http_llm_status_error_t  *e;

    for (e = ngx_http_llm_status_errors; e->status; e++) {
        if (e->status == status) {
            return e;
        }
    }

    return NULL;
}


/* a status nginx chose, answered as we answer ours */
ngx_int_t
ngx_http_llm_send_status(ngx_http_request_t *r, ngx_uint_t status)
{
    ngx_http_llm_status_error_t  *e;

    e = ngx_http_llm_status_error(status);
    if (e == NULL) {
        return ngx_http_llm_send_error(r, status, NULL, "The request failed "
                                       "with HTTP status %ui.", status);
    }

    return ngx_http_llm_send_error(r, status, e->code, "%s", e->message);
}


/* the error object standing for status, as the filters send it */
static ngx_buf_t *
ngx_http_llm_page(ngx_http_request_t *r, ngx_uint_t status)
{
    off_t                         n;
    u_char                        msg[128];
    ngx_http_llm_loc_conf_t      *llcf;
    ngx_http_llm_status_error_t  *e;

    if (ngx_http_llm_messages_uri(r)) {
        e = ngx_http_llm_status_error(status);
        return ngx_http_llm_messages_page(r->pool, status,
                                          e ? e->message
                                            : "The request failed.");
    }

    /* core's client_max_body_size is llm_max_body_size (merge_loc_conf):
       say which limit, and the declared size when there is one */
    if (status == NGX_HTTP_REQUEST_ENTITY_TOO_LARGE) {
        llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

        /* the header: content_length_n is the bytes read by now (chunked)
           or 0 (a discarded body) */
        n = (!r->headers_in.chunked && r->headers_in.content_length != NULL)
            ? ngx_atoof(r->headers_in.content_length->value.data,
                        r->headers_in.content_length->value.len)
            : NGX_ERROR;

        if (n > 0) {
            *ngx_snprintf(msg, sizeof(msg) - 1, "request body of %O bytes "
                          "is over the limit of %uz bytes", n,
                          llcf->max_body_size) = '\0';
        } else {
            *ngx_snprintf(msg, sizeof(msg) - 1, "request body is over the "
                          "limit of %uz bytes", llcf->max_body_size) = '\0';
        }

        return ngx_http_llm_error_buf(r->pool,
                                      ngx_http_llm_error_type(status, NULL),
                                      NULL, "request_too_large",
                                      (char *) msg);
    }

    e = ngx_http_llm_status_error(status);
    if (e != NULL) {
        return ngx_http_llm_error_buf(r->pool,
                                      ngx_http_llm_error_type(status, e->code),
                                      NULL, e->code, e->message);
    }

    *ngx_snprintf(msg, sizeof(msg) - 1, "The request failed with HTTP "
                  "status %ui.", status) = '\0';

    return ngx_http_llm_error_buf(r->pool,
                                  ngx_http_llm_error_type(status, NULL),
                                  NULL, NULL, (char *) msg);
}


/*
 * nginx's page for an error in an llm_api location: its special response
 * handler set err_status and, for the statuses that have a page,
 * text/html (we never send HTML; a status without a page has no type).
 */
static ngx_int_t
ngx_http_llm_header_filter(ngx_http_request_t *r)
{
    ngx_buf_t                *b;
    ngx_uint_t                level;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    if (llcf->role != NGX_HTTP_LLM_ROLE_API
        || r != r->main
        || r->err_status < NGX_HTTP_BAD_REQUEST
        || !(r->headers_out.content_type.len == 0
             || (r->headers_out.content_type.len == sizeof("text/html") - 1
                 && ngx_strncmp(r->headers_out.content_type.data,
                                "text/html", sizeof("text/html") - 1) == 0)))
    {
        return ngx_http_llm_next_header_filter(r);
    }

    b = ngx_http_llm_page(r, r->headers_out.status);
    if (b == NULL) {
        return NGX_ERROR;
    }

    level = (r->headers_out.status >= 500) ? NGX_LOG_ERR : NGX_LOG_INFO;
    ngx_log_error(level, r->connection->log, 0,
                  "llm: %ui from nginx, sent as an OpenAI error object",
                  r->headers_out.status);

    if (r->headers_out.status == NGX_HTTP_SERVICE_UNAVAILABLE
        && ngx_http_llm_retry_after(r, 1) != NGX_OK)
    {
        return NGX_ERROR;
    }

    r->headers_out.content_type.data = ngx_http_llm_page_type;
    r->headers_out.content_type.len = sizeof(ngx_http_llm_page_type) - 1;
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;
    r->headers_out.charset.len = 0;
    r->headers_out.content_length_n = b->last - b->pos;

    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = NULL;
    }

    return ngx_http_llm_next_header_filter(r);
}


/* the page's body, swallowed; ours in its place with the last buffer (the
   header filter's content type says which replies: the same pointer) */
static ngx_int_t
ngx_http_llm_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_buf_t    *b;
    ngx_uint_t    last;
    ngx_chain_t  *cl, out;

    if (r->headers_out.content_type.data != ngx_http_llm_page_type
        || in == NULL)
    {
        return ngx_http_llm_next_body_filter(r, in);
    }

    last = 0;

    for (cl = in; cl; cl = cl->next) {
        last |= cl->buf->last_buf;
        cl->buf->pos = cl->buf->last;
        cl->buf->file_pos = cl->buf->file_last;
    }

    if (!last) {
        return NGX_OK;
    }

    b = ngx_http_llm_page(r, r->headers_out.status);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->last_buf = 1;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    return ngx_http_llm_next_body_filter(r, &out);
}


ngx_int_t
ngx_http_llm_reply_filter_init(ngx_conf_t *cf)
{
    ngx_http_llm_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_llm_header_filter;

    ngx_http_llm_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_llm_body_filter;

    return NGX_OK;
}
