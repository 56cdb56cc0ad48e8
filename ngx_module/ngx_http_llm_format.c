/*
 * Tokens to bytes: a generation's text as OpenAI's SSE chunks or its JSON
 * reply, logprobs in both forms, the error event of a stream that fails.
 * Written with ngx_sprintf into buffers a long stream reuses
 * (ngx_http_llm_buf.c); every string escaped into valid UTF-8. Nothing
 * here sends or decides: the stream does. A Messages request's shapes are
 * ngx_http_llm_messages_sse.c's.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


static ngx_int_t ngx_http_llm_openai_delta(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last,
    const llm_reply_piece *piece, const llm_out_token *o, ngx_uint_t role);
static ngx_int_t ngx_http_llm_openai_tool_calls(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last);
static ngx_int_t ngx_http_llm_openai_finish(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last);
static ngx_int_t ngx_http_llm_openai_done(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t ***last);
static ngx_int_t ngx_http_llm_openai_reply(ngx_http_llm_ctx_t *ctx,
    ngx_buf_t **bp);
static ngx_int_t ngx_http_llm_openai_error(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t ***last, ngx_uint_t status, const char *code,
    const char *msg);


/* /v1/completions and /v1/chat/completions */
static const ngx_http_llm_output_t  ngx_http_llm_openai_output = {
    ngx_http_llm_openai_delta,
    ngx_http_llm_openai_tool_calls,
    ngx_http_llm_openai_finish,
    ngx_http_llm_openai_done,
    ngx_http_llm_openai_reply,
    ngx_http_llm_openai_error
};


static const char *ngx_http_llm_finish_names[] = {
    "null", "stop", "length", "cancelled", "error"
};


/* the head of every chunk: data: {"id":...,"choices":[{"index":i, */
static u_char *
ngx_http_llm_chunk_head(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    u_char *p)
{
    ngx_str_t  *model = &ctx->ecf->served_model_name;

    return ngx_sprintf(p, "data: {\"id\":\"%V\",\"object\":\"%s\","
                       "\"created\":%T,\"model\":\"%V\",\"choices\":"
                       "[{\"index\":%ui,",
                       &ctx->id, ctx->chat ? "chat.completion.chunk"
                                           : "text_completion",
                       ctx->created, model, c->index);
}


static size_t
ngx_http_llm_chunk_head_len(ngx_http_llm_ctx_t *ctx)
{
    return 160 + ctx->id.len + ctx->ecf->served_model_name.len;
}


/* a token's text for logprobs: its decoded bytes */
static const u_char *
ngx_http_llm_piece(ngx_http_llm_ctx_t *ctx, int32_t id, size_t *len)
{
    const char  *t;

    t = llm_token_piece(ctx->ecf->tokenizer, id, len);
    if (t == NULL) {
        *len = 0;
        return (u_char *) "";
    }

    return (u_char *) t;
}


/* room for one token's logprobs: its pieces escaped, and as byte lists */
static size_t
ngx_http_llm_lp_size(ngx_http_llm_ctx_t *ctx, const llm_out_token *o)
{
    size_t    len, size;
    uint32_t  i;

    (void) ngx_http_llm_piece(ctx, o->token, &len);
    size = 10 * len + 128;

    for (i = 0; i < o->n_top && i < LLM_RING_MAX_TOP_LP; i++) {
        (void) ngx_http_llm_piece(ctx, o->top_ids[i], &len);
        size += 10 * len + 96;
    }

    return size;
}


/* "token":"...","logprob":x,"bytes":[...]: bytes rebuild split characters */
static u_char *
ngx_http_llm_lp_token(ngx_http_llm_ctx_t *ctx, u_char *p, int32_t id,
    float logprob)
{
    size_t          len, i;
    const u_char   *t;

    t = ngx_http_llm_piece(ctx, id, &len);
    p = ngx_cpymem(p, "\"token\":\"", 9);
    p = ngx_http_llm_json_escape(p, t, len);
    p = ngx_sprintf(p, "\",\"logprob\":%.6f,\"bytes\":[", (double) logprob);

    for (i = 0; i < len; i++) {
        p = ngx_sprintf(p, i ? ",%ud" : "%ud", (unsigned) t[i]);
    }

    *p++ = ']';
    return p;
}


/* chat: {"token","logprob","bytes","top_logprobs":[{"token",...}]} */
static u_char *
ngx_http_llm_lp_chat(ngx_http_llm_ctx_t *ctx, u_char *p,
    const llm_out_token *o)
{
    uint32_t  i;

    *p++ = '{';
    p = ngx_http_llm_lp_token(ctx, p, o->token, o->logprob);
    p = ngx_sprintf(p, ",\"top_logprobs\":[");

    for (i = 0; i < o->n_top && i < LLM_RING_MAX_TOP_LP; i++) {
        p = ngx_sprintf(p, i ? ",{" : "{");
        p = ngx_http_llm_lp_token(ctx, p, o->top_ids[i], o->top_lp[i]);
        *p++ = '}';
    }

    return ngx_sprintf(p, "]}");
}


/* completions' legacy form, one of its four arrays at a time */
static u_char *
ngx_http_llm_lp_legacy(ngx_http_llm_ctx_t *ctx, u_char *p,
    const llm_out_token *o, ngx_uint_t part, size_t offset)
{
    size_t          len;
    uint32_t        i;
    const u_char   *t;

    switch (part) {
    case 0:
        t = ngx_http_llm_piece(ctx, o->token, &len);
        *p++ = '"';
        p = ngx_http_llm_json_escape(p, t, len);
        *p++ = '"';
        return p;
    case 1:
        return ngx_sprintf(p, "%.6f", (double) o->logprob);
    case 2:
        *p++ = '{';
        for (i = 0; i < o->n_top && i < LLM_RING_MAX_TOP_LP; i++) {
            t = ngx_http_llm_piece(ctx, o->top_ids[i], &len);
            p = ngx_sprintf(p, "%s\"", i ? "," : "");
            p = ngx_http_llm_json_escape(p, t, len);
            p = ngx_sprintf(p, "\":%.6f", (double) o->top_lp[i]);
        }
        *p++ = '}';
        return p;
    default:
        return ngx_sprintf(p, "%uz", offset);
    }
}


/* the "logprobs" value for n tokens of this request */
static u_char *
ngx_http_llm_lp_json(ngx_http_llm_ctx_t *ctx, u_char *p,
    const ngx_http_llm_lp_t *e, ngx_uint_t n)
{
    ngx_uint_t   i, part;
    static const char  *names[] = {
        "tokens", "token_logprobs", "top_logprobs", "text_offset"
    };

    if (ctx->chat) {
        p = ngx_sprintf(p, "{\"content\":[");
        for (i = 0; i < n; i++) {
            if (i) {
                *p++ = ',';
            }
            p = ngx_http_llm_lp_chat(ctx, p, &e[i].o);
        }
        return ngx_sprintf(p, "]}");
    }

    *p++ = '{';
    for (part = 0; part < 4; part++) {
        p = ngx_sprintf(p, "%s\"%s\":[", part ? "," : "", names[part]);
        for (i = 0; i < n; i++) {
            if (i) {
                *p++ = ',';
            }
            p = ngx_http_llm_lp_legacy(ctx, p, &e[i].o, part, e[i].offset);
        }
        *p++ = ']';
    }
    *p++ = '}';

    return p;
}


/* a reply that does not stream: text at the end of *bp, which grows */
static ngx_int_t
ngx_http_llm_collect(ngx_http_llm_ctx_t *ctx, ngx_buf_t **bp,
    const u_char *text, size_t len)
{
    size_t      size;
    ngx_buf_t  *b = *bp;

    if (b == NULL || (size_t) (b->end - b->last) < len) {
        size = ngx_max(len, 256);
        if (b) {
            size += 2 * (b->last - b->pos);
        }
        b = ngx_http_llm_get_buf(ctx, size);
        if (b == NULL) {
            return NGX_ERROR;
        }
        if (*bp) {
            b->last = ngx_cpymem(b->last, (*bp)->pos, (*bp)->last - (*bp)->pos);
        }
        *bp = b;
    }
    if (len) {
        b->last = ngx_cpymem(b->last, text, len);
    }

    return NGX_OK;
}


/* one token's text as an OpenAI SSE chunk */
static ngx_int_t
ngx_http_llm_openai_chunk(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last, const u_char *text, size_t len,
    const llm_out_token *o, ngx_uint_t role)
{
    size_t        size;
    u_char       *p;
    ngx_buf_t    *b;

    size = ngx_http_llm_chunk_head_len(ctx) + 6 * len + 128;
    if (o && ctx->req.sampling.logprobs) {
        size += ngx_http_llm_lp_size(ctx, o);
    }

    b = ngx_http_llm_get_buf(ctx, size);
    if (b == NULL) {
        return NGX_ERROR;
    }

    p = ngx_http_llm_chunk_head(ctx, c, b->last);

    if (ctx->chat) {
        p = ngx_sprintf(p, "\"delta\":{%s\"content\":\"",
                        role ? "\"role\":\"assistant\"," : "");
        p = ngx_http_llm_json_escape(p, text, len);
        p = ngx_sprintf(p, "\"},\"logprobs\":");
    } else {
        p = ngx_sprintf(p, "\"text\":\"");
        p = ngx_http_llm_json_escape(p, text, len);
        p = ngx_sprintf(p, "\",\"logprobs\":");
    }

    if (o && ctx->req.sampling.logprobs) {
        ngx_http_llm_lp_t  e;

        e.o = *o;
        e.offset = c->text_offset;
        p = ngx_http_llm_lp_json(ctx, p, &e, 1);
    } else {
        p = ngx_sprintf(p, "null");
    }
    c->text_offset += len;

    b->last = ngx_sprintf(p, ",\"finish_reason\":null}]}\n\n");
    b->flush = 1;

    if (ngx_http_llm_append(ctx, last, b) != NGX_OK) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * A stream's piece as OpenAI's chunk: the thinking as reasoning_content,
 * the answer as content.
 */
static ngx_int_t
ngx_http_llm_openai_delta(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last, const llm_reply_piece *piece, const llm_out_token *o,
    ngx_uint_t role)
{
    size_t       size, clen = piece->content_len, rlen = piece->reasoning_len;
    u_char      *p;
    ngx_buf_t   *b;

    if (rlen == 0) {
        return ngx_http_llm_openai_chunk(ctx, c, last,
                                         (u_char *) piece->content, clen, o,
                                         role);
    }

    size = ngx_http_llm_chunk_head_len(ctx) + 6 * (clen + rlen) + 160;
    if (o && ctx->req.sampling.logprobs) {
        size += ngx_http_llm_lp_size(ctx, o);
    }

    b = ngx_http_llm_get_buf(ctx, size);
    if (b == NULL) {
        return NGX_ERROR;
    }

    p = ngx_http_llm_chunk_head(ctx, c, b->last);
    p = ngx_sprintf(p, "\"delta\":{%s\"reasoning_content\":\"",
                    role ? "\"role\":\"assistant\"," : "");
    p = ngx_http_llm_json_escape(p, (u_char *) piece->reasoning, rlen);
    if (clen) {
        p = ngx_sprintf(p, "\",\"content\":\"");
        p = ngx_http_llm_json_escape(p, (u_char *) piece->content, clen);
    }
    p = ngx_sprintf(p, "\"},\"logprobs\":");

    if (o && ctx->req.sampling.logprobs) {
        ngx_http_llm_lp_t  e;

        e.o = *o;
        e.offset = c->text_offset;
        p = ngx_http_llm_lp_json(ctx, p, &e, 1);
    } else {
        p = ngx_sprintf(p, "null");
    }
    c->text_offset += clen;

    b->last = ngx_sprintf(p, ",\"finish_reason\":null}]}\n\n");
    b->flush = 1;

    return ngx_http_llm_append(ctx, last, b);
}


/* one token's text: a stream's piece, or into the reply being built */
ngx_int_t
ngx_http_llm_format_chunk(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last, const u_char *text, size_t len,
    const llm_out_token *o, ngx_uint_t role)
{
    llm_reply_piece  piece;

    if (!ctx->stream) {
        if (ngx_http_llm_collect(ctx, &c->text, text, len) != NGX_OK) {
            return NGX_ERROR;
        }

        c->text_offset += len;
        return NGX_OK;
    }

    piece.reasoning = NULL;
    piece.reasoning_len = 0;
    piece.content = (const char *) text;
    piece.content_len = len;

    return ctx->output->delta(ctx, c, last, &piece, o, role);
}


/*
 * What the reply's splitter let out (c->out, api/reply.h): a stream's
 * piece, or the thinking and the answer into the reply being built.
 */
ngx_int_t
ngx_http_llm_format_delta(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last, const llm_reply_piece *piece, const llm_out_token *o,
    ngx_uint_t role)
{
    if (ctx->stream) {
        return ctx->output->delta(ctx, c, last, piece, o, role);
    }

    if (piece->reasoning_len
        && ngx_http_llm_collect(ctx, &c->reasoning,
                                (u_char *) piece->reasoning,
                                piece->reasoning_len)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    return ngx_http_llm_format_chunk(ctx, c, last, (u_char *) piece->content,
                                     piece->content_len, o, role);
}


/* one delta chunk of a stream: {"tool_calls":[...]} */
static ngx_int_t
ngx_http_llm_tool_chunk(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last, char *json)
{
    size_t      len;
    ngx_buf_t  *b;
    ngx_int_t   rc;

    if (json == NULL) {
        return NGX_ERROR;
    }
    len = ngx_strlen(json);

    rc = NGX_ERROR;
    b = ngx_http_llm_get_buf(ctx, ngx_http_llm_chunk_head_len(ctx) + len
                                  + 128);
    if (b != NULL) {
        b->last = ngx_http_llm_chunk_head(ctx, c, b->last);
        b->last = ngx_sprintf(b->last, "\"delta\":%*s,\"logprobs\":null,"
                              "\"finish_reason\":null}]}\n\n", len, json);
        b->flush = 1;
        rc = ngx_http_llm_append(ctx, last, b);
    }
    cJSON_free(json);

    return rc;
}


/*
 * A stream's tool calls, in OpenAI's shape, which the SDKs' accumulators
 * rebuild (llm_tool_call_delta): per call, the head with the name and
 * "arguments": "", then the arguments.
 */
static ngx_int_t
ngx_http_llm_openai_tool_calls(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last)
{
    int             i;
    llm_tool_call  *call;

    for (i = 0; i < c->out.n_calls; i++) {
        call = &c->out.calls[i];

        if (ngx_http_llm_tool_chunk(ctx, c, last,
                                    llm_tool_call_delta(call, i, 1))
            != NGX_OK
            || ngx_http_llm_tool_chunk(ctx, c, last,
                                       llm_tool_call_delta(call, i, 0))
               != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* the finish_reason the client sees */
const char *
ngx_http_llm_finish_name(ngx_http_llm_choice_t *c)
{
    /* a reply cut in a call says length, with the calls it finished */
    if (c->out_active && c->out.n_calls > 0 && !c->out.dropped
        && (c->finish == LLM_FINISH_STOP || c->finish == LLM_FINISH_LENGTH))
    {
        return "tool_calls";
    }

    return ngx_http_llm_finish_names[c->finish <= LLM_FINISH_ERROR
                                     ? c->finish : LLM_FINISH_ERROR];
}


/* the prompt once, every choice's completion (as OpenAI counts n) */
static u_char *
ngx_http_llm_usage_json(ngx_http_llm_ctx_t *ctx, u_char *p)
{
    uint32_t  completion = ngx_http_llm_completion_tokens(ctx);

    return ngx_sprintf(p, "\"usage\":{\"prompt_tokens\":%uD,"
                       "\"completion_tokens\":%uD,\"total_tokens\":%uD,"
                       "\"prompt_tokens_details\":{\"cached_tokens\":%uD}}",
                       ctx->n_prompt, completion,
                       ctx->n_prompt + completion, ctx->n_cached);
}


/* a choice's last chunk of a stream: its finish_reason */
static ngx_int_t
ngx_http_llm_openai_finish(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last)
{
    u_char     *p;
    ngx_buf_t  *b;

    b = ngx_http_llm_get_buf(ctx, ngx_http_llm_chunk_head_len(ctx) + 128);
    if (b == NULL) {
        return NGX_ERROR;
    }

    p = ngx_http_llm_chunk_head(ctx, c, b->last);
    b->last = ngx_sprintf(p, "%s,\"logprobs\":null,\"finish_reason\":"
                          "\"%s\"}]}\n\n",
                          ctx->chat ? "\"delta\":{}" : "\"text\":\"\"",
                          ngx_http_llm_finish_name(c));
    b->flush = 1;

    return ngx_http_llm_append(ctx, last, b);
}


/* a stream's usage chunk if asked for, [DONE] */
static ngx_int_t
ngx_http_llm_openai_done(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last)
{
    u_char     *p;
    ngx_buf_t  *b;

    b = ngx_http_llm_get_buf(ctx, ngx_http_llm_chunk_head_len(ctx) + 512);
    if (b == NULL) {
        return NGX_ERROR;
    }
    p = b->last;

    if (ctx->req.include_usage) {
        p = ngx_sprintf(p, "data: {\"id\":\"%V\",\"object\":\"%s\","
                        "\"created\":%T,\"model\":\"%V\","
                        "\"choices\":[],",
                        &ctx->id, ctx->chat ? "chat.completion.chunk"
                                            : "text_completion",
                        ctx->created, &ctx->ecf->served_model_name);
        p = ngx_http_llm_usage_json(ctx, p);
        p = ngx_sprintf(p, "}\n\n");
    }

    b->last = ngx_sprintf(p, "data: [DONE]\n\n");

    return ngx_http_llm_format_last(ctx, last, b);
}


/*
 * The message of a reply the splitter read: content null when there are
 * calls and no text, reasoning_content when llm_reasoning is on (null
 * when the model did not think), tool_calls when it called.
 */
static u_char *
ngx_http_llm_message_json(ngx_http_llm_choice_t *c, u_char *p, size_t tlen,
    const char *calls)
{
    size_t  rlen;

    p = ngx_sprintf(p, "\"message\":{\"role\":\"assistant\",\"content\":");
    if (tlen == 0 && calls) {
        p = ngx_sprintf(p, "null");
    } else {
        *p++ = '"';
        if (tlen) {
            p = ngx_http_llm_json_escape(p, c->text->pos, tlen);
        }
        *p++ = '"';
    }

    if (c->out.reasoning) {
        rlen = c->reasoning ? c->reasoning->last - c->reasoning->pos : 0;
        if (rlen) {
            p = ngx_sprintf(p, ",\"reasoning_content\":\"");
            p = ngx_http_llm_json_escape(p, c->reasoning->pos, rlen);
            *p++ = '"';
        } else {
            p = ngx_sprintf(p, ",\"reasoning_content\":null");
        }
    }

    if (calls) {
        p = ngx_sprintf(p, ",\"tool_calls\":%s", calls);
    }

    return ngx_sprintf(p, "},");
}


/* one choice of a reply that did not stream: {"index":i,...} */
static u_char *
ngx_http_llm_choice_json(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    u_char *p, size_t tlen, const char *calls)
{
    p = ngx_sprintf(p, "{\"index\":%ui,", c->index);
    if (c->out_active) {
        p = ngx_http_llm_message_json(c, p, tlen, calls);

    } else {
        p = ngx_sprintf(p, ctx->chat ? "\"message\":{\"role\":"
                                       "\"assistant\",\"content\":\""
                                     : "\"text\":\"");
        if (tlen) {
            p = ngx_http_llm_json_escape(p, c->text->pos, tlen);
        }
        p = ngx_sprintf(p, ctx->chat ? "\"}," : "\",");
    }

    if (c->lps) {
        p = ngx_sprintf(p, "\"logprobs\":");
        p = ngx_http_llm_lp_json(ctx, p, c->lps->elts, c->lps->nelts);
        *p++ = ',';
    } else {
        p = ngx_sprintf(p, "\"logprobs\":null,");
    }

    return ngx_sprintf(p, "\"finish_reason\":\"%s\"}",
                       ngx_http_llm_finish_name(c));
}


/* the room one choice's JSON takes, and its tool calls (free them) */
static ngx_int_t
ngx_http_llm_choice_size(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    size_t *size, char **calls)
{
    size_t              tlen;
    ngx_uint_t          i;
    ngx_http_llm_lp_t  *e;

    tlen = c->text ? (size_t) (c->text->last - c->text->pos) : 0;
    *size += 6 * tlen + 256;
    *calls = NULL;

    if (c->out_active) {
        if (c->out.n_calls) {
            *calls = llm_tool_calls_json(c->out.calls, c->out.n_calls, 0);
            if (*calls == NULL) {
                return NGX_ERROR;
            }
            *size += ngx_strlen(*calls);
        }
        if (c->reasoning) {
            *size += 6 * (c->reasoning->last - c->reasoning->pos);
        }
    }
    if (c->lps) {
        e = c->lps->elts;
        for (i = 0; i < c->lps->nelts; i++) {
            *size += ngx_http_llm_lp_size(ctx, &e[i].o);
        }
    }

    return NGX_OK;
}


/* the whole reply of a request that did not stream: every choice */
static ngx_int_t
ngx_http_llm_openai_reply(ngx_http_llm_ctx_t *ctx, ngx_buf_t **bp)
{
    char                   *calls[LLM_RING_MAX_CHOICES];
    u_char                 *p;
    size_t                  size, tlen;
    ngx_int_t               rc;
    ngx_uint_t              i, n = ctx->n_choices;
    ngx_buf_t              *b;
    ngx_http_llm_choice_t  *c;

    size = ngx_http_llm_chunk_head_len(ctx) + 512;
    rc = NGX_OK;

    for (i = 0; i < n; i++) {
        calls[i] = NULL;
        if (rc == NGX_OK) {
            rc = ngx_http_llm_choice_size(ctx, &ctx->choices[i], &size,
                                          &calls[i]);
        }
    }

    b = (rc == NGX_OK) ? ngx_http_llm_get_buf(ctx, size) : NULL;

    if (b != NULL) {
        p = ngx_sprintf(b->last, "{\"id\":\"%V\",\"object\":\"%s\","
                        "\"created\":%T,\"model\":\"%V\",\"choices\":[",
                        &ctx->id, ctx->chat ? "chat.completion"
                                            : "text_completion",
                        ctx->created, &ctx->ecf->served_model_name);
        for (i = 0; i < n; i++) {
            c = &ctx->choices[i];
            tlen = c->text ? (size_t) (c->text->last - c->text->pos) : 0;
            if (i > 0) {
                *p++ = ',';
            }
            p = ngx_http_llm_choice_json(ctx, c, p, tlen, calls[i]);
        }
        p = ngx_sprintf(p, "],");
        p = ngx_http_llm_usage_json(ctx, p);
        b->last = ngx_sprintf(p, "}\n");
    }

    for (i = 0; i < n; i++) {
        free(calls[i]);
    }

    *bp = b;
    return b ? NGX_OK : NGX_ERROR;
}


/* the request's last chunks (each choice sent its finish chunk), or the
   whole reply of a request that did not stream */
ngx_int_t
ngx_http_llm_format_final(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last)
{
    ngx_buf_t           *b;
    ngx_http_request_t  *r = ctx->request;

    if (ctx->stream) {
        return ctx->output->done(ctx, last);
    }

    if (ctx->output->reply(ctx, &b) != NGX_OK) {
        return NGX_ERROR;
    }

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = b->last - b->pos;
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;

    return ngx_http_llm_format_last(ctx, last, b);
}


/* the response's last buffer */
ngx_int_t
ngx_http_llm_format_last(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    ngx_buf_t *b)
{
    ngx_http_request_t  *r = ctx->request;

    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;
    b->flush = 1;

    return ngx_http_llm_append(ctx, last, b);
}


/* a stream's tool calls, once the choice's reply is read */
ngx_int_t
ngx_http_llm_format_tool_calls(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last)
{
    return ctx->output->tool_calls(ctx, c, last);
}


/* a stream's choice ended */
ngx_int_t
ngx_http_llm_format_finish(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last)
{
    return ctx->output->finish(ctx, c, last);
}


/* the last event of a stream that failed after its headers went out */
ngx_int_t
ngx_http_llm_format_error(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    ngx_uint_t status, const char *code, const char *msg)
{
    return ctx->output->error(ctx, last, status, code, msg);
}


/* OpenAI's error event, then [DONE] */
static ngx_int_t
ngx_http_llm_openai_error(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    ngx_uint_t status, const char *code, const char *msg)
{
    u_char     *p;
    size_t      len;
    ngx_buf_t  *b;

    len = ngx_strlen(msg);

    b = ngx_http_llm_get_buf(ctx, 6 * len + 256);
    if (b == NULL) {
        return NGX_ERROR;
    }

    p = ngx_sprintf(b->last, "data: {\"error\":{\"message\":\"");
    p = ngx_http_llm_json_escape(p, (u_char *) msg, len);
    b->last = ngx_sprintf(p, "\",\"type\":\"%s\",\"param\":null,"
                          "\"code\":\"%s\"}}\n\ndata: [DONE]\n\n",
                          ngx_http_llm_error_type(status, code), code);
    b->last_buf = 1;
    b->flush = 1;

    return ngx_http_llm_append(ctx, last, b);
}


/* the output of a request kind (NGX_HTTP_LLM_GEN_*) */
const ngx_http_llm_output_t *
ngx_http_llm_output(ngx_uint_t kind)
{
    switch (kind) {
    case NGX_HTTP_LLM_GEN_MESSAGES:
    case NGX_HTTP_LLM_GEN_COUNT:
        return &ngx_http_llm_messages_output;
    case NGX_HTTP_LLM_GEN_RESPONSES:
        return &ngx_http_llm_responses_output;
    default:
        return &ngx_http_llm_openai_output;
    }
}
