/*
 * Anthropic's Messages API, the reply (ngx_http_llm_messages.c is the
 * request's side): the message object of a reply that did not stream, and
 * a stream's events: message_start, ping, content_block_start / _delta
 * (text_delta, thinking_delta, signature_delta, input_json_delta) /
 * _stop, message_delta, message_stop, and error: the output table
 * ngx_http_llm_messages_output (ngx_http_llm_format.c calls it where it
 * writes OpenAI's shapes); nothing here sends.
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


static ngx_int_t ngx_http_llm_messages_delta(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last,
    const llm_reply_piece *piece, const llm_out_token *o, ngx_uint_t role);
static ngx_int_t ngx_http_llm_messages_tool_calls(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last);
static ngx_int_t ngx_http_llm_messages_finish(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last);
static ngx_int_t ngx_http_llm_messages_done(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t ***last);
static ngx_int_t ngx_http_llm_messages_json(ngx_http_llm_ctx_t *ctx,
    ngx_buf_t **bp);
static ngx_int_t ngx_http_llm_messages_error_event(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t ***last, ngx_uint_t status, const char *code,
    const char *msg);


/* /v1/messages (and its count_tokens, which never streams) */
const ngx_http_llm_output_t  ngx_http_llm_messages_output = {
    ngx_http_llm_messages_delta,
    ngx_http_llm_messages_tool_calls,
    ngx_http_llm_messages_finish,
    ngx_http_llm_messages_done,
    ngx_http_llm_messages_json,
    ngx_http_llm_messages_error_event
};


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
static ngx_int_t
ngx_http_llm_messages_delta(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last, const llm_reply_piece *piece, const llm_out_token *o,
    ngx_uint_t role)
{
    if (ngx_http_llm_messages_start(ctx, last) != NGX_OK
        || ngx_http_llm_messages_text(ctx, last, NGX_HTTP_LLM_MSG_THINKING,
                                      (u_char *) piece->reasoning,
                                      piece->reasoning_len) != NGX_OK
        || ngx_http_llm_messages_text(ctx, last, NGX_HTTP_LLM_MSG_TEXT,
                                      (u_char *) piece->content,
                                      piece->content_len) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* each call: a tool_use block, its input as one input_json_delta */
static ngx_int_t
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


/* the choice ended: its open block closes (message_delta is done's) */
static ngx_int_t
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

    *bp = b;
    return NGX_OK;
}


/* the stream's last events, message_delta and message_stop */
static ngx_int_t
ngx_http_llm_messages_done(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last)
{
    u_char                 *p, *seq;
    size_t                  len;
    uint32_t                cached;
    ngx_buf_t              *b;
    const char             *reason;
    ngx_http_llm_choice_t  *c = &ctx->choices[0];

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

    return ngx_http_llm_format_last(ctx, last, b);
}


/* the last event of a stream that failed after its headers went out */
static ngx_int_t
ngx_http_llm_messages_error_event(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t ***last, ngx_uint_t status, const char *code,
    const char *msg)
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
