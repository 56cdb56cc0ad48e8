/*
 * Anthropic's Messages API: POST /v1/messages and /v1/messages/count_tokens
 * in an llm_api location (docs/api.md). The body is translated to a chat
 * request (engine/api/messages.c) and goes the chat path; this file is the
 * request's side and the objects that need no stream: which URIs are
 * Anthropic's, the translation, the token count, the error object
 * {"type":"error","error":{"type","message"}}. The reply's shapes are
 * ngx_http_llm_messages_sse.c's. Nothing here sends: the callers do.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"
#include "api/messages.h"


static ngx_uint_t
ngx_http_llm_messages_ends(ngx_http_request_t *r, const char *suffix)
{
    size_t  n = ngx_strlen(suffix);

    return r->uri.len >= n
           && ngx_strncmp(r->uri.data + r->uri.len - n, suffix, n) == 0;
}


/* the URIs whose replies and errors are Anthropic's */
ngx_uint_t
ngx_http_llm_messages_uri(ngx_http_request_t *r)
{
    return ngx_http_llm_messages_ends(r, "/messages")
           || ngx_http_llm_messages_ends(r, "/messages/count_tokens");
}


/* the Messages body in *body becomes the chat request it stands for;
   NGX_DECLINED: refused, err says why */
ngx_int_t
ngx_http_llm_messages_body(ngx_http_llm_ctx_t *ctx, u_char **body,
    size_t *len, llm_api_error *err)
{
    char                     *chat;
    size_t                    n;
    u_char                   *p;
    llm_api_limits            lim;
    llm_messages_opts         opts;
    ngx_http_llm_loc_conf_t  *llcf;
    ngx_http_request_t       *r = ctx->request;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    llm_api_limits_default(&lim);
    lim.max_body = llcf->max_body_size;

    chat = llm_messages_to_chat((char *) *body, *len, ctx->count_only, &lim,
                                &opts, &n, err);
    if (chat == NULL) {
        return NGX_DECLINED;
    }

    p = ngx_pnalloc(r->pool, n + 1);
    if (p == NULL) {
        free(chat);
        return NGX_ERROR;
    }
    ngx_memcpy(p, chat, n + 1);
    free(chat);

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm: messages as chat: %uz bytes, thinking %i", n,
                   (ngx_int_t) opts.thinking);

    ctx->thinking = opts.thinking;
    *body = p;
    *len = n;

    return NGX_OK;
}


/* /count_tokens: the prompt the chat template and tokenizer made */
cJSON *
ngx_http_llm_messages_count(ngx_http_llm_ctx_t *ctx)
{
    cJSON  *json;

    json = cJSON_CreateObject();
    if (json == NULL
        || cJSON_AddNumberToObject(json, "input_tokens", ctx->n_prompt)
           == NULL)
    {
        cJSON_Delete(json);
        return NULL;
    }

    return json;
}


/* the error object (NULL: out of memory); the log line is the caller's */
cJSON *
ngx_http_llm_messages_error(ngx_uint_t status, const char *msg)
{
    cJSON  *root, *err;

    root = cJSON_CreateObject();
    err = NULL;

    if (root == NULL
        || cJSON_AddStringToObject(root, "type", "error") == NULL
        || (err = cJSON_AddObjectToObject(root, "error")) == NULL
        || cJSON_AddStringToObject(err, "type",
                                   llm_messages_error_type(status)) == NULL
        || cJSON_AddStringToObject(err, "message", msg) == NULL)
    {
        cJSON_Delete(root);
        return NULL;
    }

    return root;
}


/* the error object of nginx's own statuses (msg is ASCII) */
ngx_buf_t *
ngx_http_llm_messages_page(ngx_pool_t *pool, ngx_uint_t status,
    const char *msg)
{
    ngx_buf_t   *b;
    const char  *type = llm_messages_error_type(status);

    b = ngx_create_temp_buf(pool, ngx_strlen(msg) + ngx_strlen(type) + 64);
    if (b == NULL) {
        return NULL;
    }

    b->last = ngx_sprintf(b->last, "{\"type\":\"error\",\"error\":{\"type\":"
                          "\"%s\",\"message\":\"%s\"}}\n", type, msg);
    return b;
}
