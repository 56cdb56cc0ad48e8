/*
 * Anthropic's Messages API: POST /v1/messages and /v1/messages/count_tokens
 * in an llm_api location (docs/api.md). The body is translated to a chat
 * request (engine/api/messages.c) and goes the chat path; this file writes
 * what goes back in Anthropic's shapes: the message object, the stream's
 * events (message_start, content_block_start / _delta / _stop,
 * message_delta, message_stop, ping), the token count and the error
 * object {"type":"error","error":{"type","message"}}.
 *
 * A stream's content blocks: thinking (when llm_reasoning splits it), text,
 * then one tool_use block per call, each opened when its first bytes come
 * and closed when another kind comes or the message ends.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"
#include "api/messages.h"


#define NGX_HTTP_LLM_MSG_NONE      0
#define NGX_HTTP_LLM_MSG_THINKING  1
#define NGX_HTTP_LLM_MSG_TEXT      2


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


/* the Messages body in *body becomes the chat request it stands for */
ngx_int_t
ngx_http_llm_messages_body(ngx_http_llm_ctx_t *ctx, u_char **body,
    size_t *len)
{
    char                     *chat;
    size_t                    n;
    u_char                   *p;
    llm_api_error             err;
    llm_api_limits            lim;
    llm_messages_opts         opts;
    ngx_http_llm_loc_conf_t  *llcf;
    ngx_http_request_t       *r = ctx->request;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    llm_api_limits_default(&lim);
    lim.max_body = llcf->max_body_size;

    chat = llm_messages_to_chat((char *) *body, *len, ctx->count_only, &lim,
                                &opts, &n, &err);
    if (chat == NULL) {
        return ngx_http_llm_refuse_api(ctx, &err);
    }

    p = ngx_pnalloc(r->pool, n + 1);
    if (p == NULL) {
        free(chat);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
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
ngx_int_t
ngx_http_llm_messages_count(ngx_http_llm_ctx_t *ctx)
{
    cJSON  *json;

    json = cJSON_CreateObject();
    if (json == NULL
        || cJSON_AddNumberToObject(json, "input_tokens", ctx->n_prompt)
           == NULL)
    {
        cJSON_Delete(json);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_llm_send_json(ctx->request, NGX_HTTP_OK, json);
}


/* the error object; the log line is the caller's */
ngx_int_t
ngx_http_llm_messages_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *msg)
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
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_llm_send_json(r, status, root);
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


/* one event: "event: name\ndata: head<s escaped>tail\n\n" */
static ngx_buf_t *
ngx_http_llm_messages_buf(ngx_http_llm_ctx_t *ctx, const char *name,
    const char *head, const u_char *s, size_t len, const char *tail)
{
    u_char     *p;
    ngx_buf_t  *b;

    b = ngx_http_llm_get_buf(ctx, ngx_strlen(name) + ngx_strlen(head)
                                  + 6 * len + ngx_strlen(tail) + 32);
    if (b == NULL) {
        return NULL;
    }

    p = ngx_sprintf(b->last, "event: %s\ndata: %s", name, head);
    if (len) {
        p = ngx_http_llm_json_escape(p, s, len);
    }
    b->last = ngx_sprintf(p, "%s\n\n", tail);
    b->flush = 1;

    return b;
}


static ngx_int_t
ngx_http_llm_messages_event(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    const char *name, const char *head, const u_char *s, size_t len,
    const char *tail)
{
    ngx_buf_t  *b;

    b = ngx_http_llm_messages_buf(ctx, name, head, s, len, tail);
    if (b == NULL) {
        return NGX_ERROR;
    }

    return ngx_http_llm_append(ctx, last, b);
}


/* message_start and a ping, before anything else of the stream */
static ngx_int_t
ngx_http_llm_messages_start(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last)
{
    u_char   head[512];

    if (ctx->msg_started) {
        return NGX_OK;
    }
    ctx->msg_started = 1;

    *ngx_snprintf(head, sizeof(head) - 1,
                  "{\"type\":\"message_start\",\"message\":{\"id\":\"%V\","
                  "\"type\":\"message\",\"role\":\"assistant\","
                  "\"model\":\"%V\",\"content\":[],\"stop_reason\":null,"
                  "\"stop_sequence\":null,\"usage\":{\"input_tokens\":%uD,"
                  "\"cache_creation_input_tokens\":0,"
                  "\"cache_read_input_tokens\":0,\"output_tokens\":0}}}",
                  &ctx->id, &ctx->ecf->served_model_name, ctx->n_prompt)
        = '\0';

    if (ngx_http_llm_messages_event(ctx, last, "message_start",
                                    (char *) head, NULL, 0, "")
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    return ngx_http_llm_messages_event(ctx, last, "ping",
                                       "{\"type\": \"ping\"}", NULL, 0, "");
}


/* the open block's end (a thinking block's signature first: none is
   made here, the event is there for clients that wait for it) */
static ngx_int_t
ngx_http_llm_messages_close(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last)
{
    u_char  head[128];

    if (ctx->msg_block == NGX_HTTP_LLM_MSG_NONE) {
        return NGX_OK;
    }

    if (ctx->msg_block == NGX_HTTP_LLM_MSG_THINKING) {
        *ngx_snprintf(head, sizeof(head) - 1,
                      "{\"type\":\"content_block_delta\",\"index\":%ui,"
                      "\"delta\":{\"type\":\"signature_delta\","
                      "\"signature\":\"\"}}", ctx->msg_index) = '\0';
        if (ngx_http_llm_messages_event(ctx, last, "content_block_delta",
                                        (char *) head, NULL, 0, "")
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    *ngx_snprintf(head, sizeof(head) - 1,
                  "{\"type\":\"content_block_stop\",\"index\":%ui}",
                  ctx->msg_index) = '\0';

    ctx->msg_block = NGX_HTTP_LLM_MSG_NONE;
    ctx->msg_index++;

    return ngx_http_llm_messages_event(ctx, last, "content_block_stop",
                                       (char *) head, NULL, 0, "");
}


/* bytes of one kind of block: opened if it is not the open one */
static ngx_int_t
ngx_http_llm_messages_text(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    ngx_uint_t kind, const u_char *s, size_t len)
{
    u_char       head[256];
    const char  *name;

    if (len == 0) {
        return NGX_OK;
    }

    name = (kind == NGX_HTTP_LLM_MSG_THINKING) ? "thinking" : "text";

    if (ctx->msg_block != kind) {
        if (ngx_http_llm_messages_close(ctx, last) != NGX_OK) {
            return NGX_ERROR;
        }

        *ngx_snprintf(head, sizeof(head) - 1,
                      "{\"type\":\"content_block_start\",\"index\":%ui,"
                      "\"content_block\":{\"type\":\"%s\",\"%s\":\"\"%s}}",
                      ctx->msg_index, name, name,
                      kind == NGX_HTTP_LLM_MSG_THINKING
                      ? ",\"signature\":\"\"" : "") = '\0';
        if (ngx_http_llm_messages_event(ctx, last, "content_block_start",
                                        (char *) head, NULL, 0, "")
            != NGX_OK)
        {
            return NGX_ERROR;
        }
        ctx->msg_block = kind;
    }

    *ngx_snprintf(head, sizeof(head) - 1,
                  "{\"type\":\"content_block_delta\",\"index\":%ui,"
                  "\"delta\":{\"type\":\"%s_delta\",\"%s\":\"",
                  ctx->msg_index, name, name) = '\0';

    return ngx_http_llm_messages_event(ctx, last, "content_block_delta",
                                       (char *) head, s, len, "\"}}");
}


/* what the splitter let out: thinking_delta and text_delta events */
ngx_int_t
ngx_http_llm_messages_delta(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    const u_char *reasoning, size_t rlen, const u_char *text, size_t tlen)
{
    if (ngx_http_llm_messages_start(ctx, last) != NGX_OK
        || ngx_http_llm_messages_text(ctx, last, NGX_HTTP_LLM_MSG_THINKING,
                                      reasoning, rlen) != NGX_OK
        || ngx_http_llm_messages_text(ctx, last, NGX_HTTP_LLM_MSG_TEXT,
                                      text, tlen) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* each call: a tool_use block, its input as one input_json_delta */
ngx_int_t
ngx_http_llm_messages_tool_calls(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last)
{
    int             i;
    u_char         *head;
    size_t          size;
    llm_tool_call  *call;

    if (ngx_http_llm_messages_start(ctx, last) != NGX_OK
        || ngx_http_llm_messages_close(ctx, last) != NGX_OK)
    {
        return NGX_ERROR;
    }

    for (i = 0; i < c->out.n_calls; i++) {
        call = &c->out.calls[i];

        size = 6 * ngx_strlen(call->name) + 256;
        head = ngx_pnalloc(ctx->request->pool, size);
        if (head == NULL) {
            return NGX_ERROR;
        }

        /* the name was matched against the request's tools: plain */
        *ngx_snprintf(head, size - 1,
                      "{\"type\":\"content_block_start\",\"index\":%ui,"
                      "\"content_block\":{\"type\":\"tool_use\","
                      "\"id\":\"%s\",\"name\":\"%s\",\"input\":{}}}",
                      ctx->msg_index, call->id, call->name) = '\0';
        if (ngx_http_llm_messages_event(ctx, last, "content_block_start",
                                        (char *) head, NULL, 0, "")
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        *ngx_snprintf(head, size - 1,
                      "{\"type\":\"content_block_delta\",\"index\":%ui,"
                      "\"delta\":{\"type\":\"input_json_delta\","
                      "\"partial_json\":\"", ctx->msg_index) = '\0';
        if (ngx_http_llm_messages_event(ctx, last, "content_block_delta",
                                        (char *) head,
                                        (u_char *) call->arguments,
                                        ngx_strlen(call->arguments), "\"}}")
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        *ngx_snprintf(head, size - 1,
                      "{\"type\":\"content_block_stop\",\"index\":%ui}",
                      ctx->msg_index) = '\0';
        ctx->msg_index++;
        if (ngx_http_llm_messages_event(ctx, last, "content_block_stop",
                                        (char *) head, NULL, 0, "")
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* the choice ended: its open block closes (message_delta is final's) */
ngx_int_t
ngx_http_llm_messages_finish(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last)
{
    if (ngx_http_llm_messages_start(ctx, last) != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_http_llm_messages_close(ctx, last);
}


/* stop_reason and the stop string that ended the reply (NULL: none) */
static const char *
ngx_http_llm_messages_stop(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    u_char **seq)
{
    int            which = c->stop.which;
    llm_stop_str  *s;

    *seq = NULL;

    if (c->stopped && which >= 0 && which < ctx->req.n_stop) {
        s = &ctx->req.stop[which];
        *seq = ngx_pnalloc(ctx->request->pool, s->len + 1);
        if (*seq != NULL) {
            *ngx_cpymem(*seq, s->ptr, s->len) = '\0';
        }
    }

    return llm_messages_stop_reason((int) c->finish,
                                    c->out_active ? c->out.n_calls : 0,
                                    *seq != NULL);
}


/* the message of a reply that did not stream */
static ngx_int_t
ngx_http_llm_messages_json(ngx_http_llm_ctx_t *ctx, ngx_buf_t **bp)
{
    char                   *text, *id, *model;
    cJSON                  *json;
    size_t                  len;
    u_char                 *seq;
    ngx_buf_t              *b;
    llm_messages_out        o;
    ngx_http_request_t     *r = ctx->request;
    ngx_http_llm_choice_t  *c = &ctx->choices[0];

    id = (char *) ngx_pnalloc(r->pool, ctx->id.len + 1);
    model = (char *) ngx_pnalloc(r->pool,
                                 ctx->ecf->served_model_name.len + 1);
    if (id == NULL || model == NULL) {
        return NGX_ERROR;
    }
    *ngx_cpymem(id, ctx->id.data, ctx->id.len) = '\0';
    *ngx_cpymem(model, ctx->ecf->served_model_name.data,
                ctx->ecf->served_model_name.len) = '\0';

    ngx_memzero(&o, sizeof(o));
    o.id = id;
    o.model = model;
    if (c->reasoning) {
        o.reasoning = (char *) c->reasoning->pos;
        o.reasoning_len = c->reasoning->last - c->reasoning->pos;
    }
    if (c->text) {
        o.text = (char *) c->text->pos;
        o.text_len = c->text->last - c->text->pos;
    }
    if (c->out_active) {
        o.calls = c->out.calls;
        o.n_calls = c->out.n_calls;
    }
    o.stop_reason = ngx_http_llm_messages_stop(ctx, c, &seq);
    o.stop_sequence = (char *) seq;
    o.cache_read_tokens = ngx_min(ctx->n_cached, ctx->n_prompt);
    o.input_tokens = ctx->n_prompt - o.cache_read_tokens;
    o.output_tokens = ngx_http_llm_completion_tokens(ctx);

    json = llm_messages_reply(&o);
    text = json ? cJSON_PrintUnformatted(json) : NULL;
    cJSON_Delete(json);
    if (text == NULL) {
        return NGX_ERROR;
    }

    len = ngx_strlen(text);
    b = ngx_http_llm_get_buf(ctx, len + 1);
    if (b == NULL) {
        free(text);
        return NGX_ERROR;
    }
    b->last = ngx_cpymem(b->last, text, len);
    *b->last++ = '\n';
    free(text);

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = b->last - b->pos;
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;

    *bp = b;
    return NGX_OK;
}


/* the stream's last events, message_delta and message_stop, or the
   message of a reply that did not stream */
ngx_int_t
ngx_http_llm_messages_final(ngx_http_llm_ctx_t *ctx, ngx_buf_t **bp)
{
    u_char                 *p, *seq;
    size_t                  len;
    uint32_t                cached;
    ngx_buf_t              *b;
    const char             *reason;
    ngx_http_llm_choice_t  *c = &ctx->choices[0];

    if (!ctx->stream) {
        return ngx_http_llm_messages_json(ctx, bp);
    }

    reason = ngx_http_llm_messages_stop(ctx, c, &seq);
    len = seq ? ngx_strlen(seq) : 0;
    cached = ngx_min(ctx->n_cached, ctx->n_prompt);

    b = ngx_http_llm_get_buf(ctx, 6 * len + 512);
    if (b == NULL) {
        return NGX_ERROR;
    }

    p = ngx_sprintf(b->last, "event: message_delta\ndata: {\"type\":"
                    "\"message_delta\",\"delta\":{\"stop_reason\":\"%s\","
                    "\"stop_sequence\":", reason);
    if (seq) {
        *p++ = '"';
        p = ngx_http_llm_json_escape(p, seq, len);
        *p++ = '"';
    } else {
        p = ngx_sprintf(p, "null");
    }
    b->last = ngx_sprintf(p, "},\"usage\":{\"input_tokens\":%uD,"
                          "\"cache_read_input_tokens\":%uD,"
                          "\"output_tokens\":%uD}}\n\n"
                          "event: message_stop\ndata: {\"type\":"
                          "\"message_stop\"}\n\n",
                          ctx->n_prompt - cached, cached,
                          ngx_http_llm_completion_tokens(ctx));

    *bp = b;
    return NGX_OK;
}


/* the last event of a stream that failed after its headers went out */
ngx_int_t
ngx_http_llm_messages_error_event(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t ***last, ngx_uint_t status, const char *msg)
{
    u_char      head[128];
    ngx_buf_t  *b;

    *ngx_snprintf(head, sizeof(head) - 1,
                  "{\"type\":\"error\",\"error\":{\"type\":\"%s\","
                  "\"message\":\"", llm_messages_error_type(status)) = '\0';

    b = ngx_http_llm_messages_buf(ctx, "error", (char *) head,
                                  (u_char *) msg, ngx_strlen(msg), "\"}}");
    if (b == NULL) {
        return NGX_ERROR;
    }
    b->last_buf = 1;

    return ngx_http_llm_append(ctx, last, b);
}
