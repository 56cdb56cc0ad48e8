/*
 * POST /v1/chat/completions and /v1/completions: read and validate the
 * body, render the chat template, tokenize, hand the prompt to the engine
 * through a ring slot, then turn the token stream back into text (UTF-8
 * safe, stop strings held back) and send it as OpenAI JSON or SSE.
 *
 * A slow client never holds the engine: past max_buffered bytes of unsent
 * output this request stops reading its stream, the stream fills up, and
 * the engine skips the sequence (keeping its KV) until there is room.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


static void ngx_http_llm_body_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_prepare(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx, u_char *body, size_t len);
static ngx_int_t ngx_http_llm_submit(ngx_http_request_t *r);
static void ngx_http_llm_on_slot(ngx_http_llm_slot_t *s);
static void ngx_http_llm_consume(ngx_http_llm_ctx_t *ctx);
static void ngx_http_llm_write_handler(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_wait_writable(ngx_http_request_t *r);
static void ngx_http_llm_deadline_handler(ngx_event_t *ev);


static const char *ngx_http_llm_finish_names[] = {
    "null", "stop", "length", "cancelled", "error"
};


/* ---------------------------------------------------------------------- */
/* entry: read the body                                                   */

ngx_int_t
ngx_http_llm_generate(ngx_http_request_t *r, ngx_uint_t chat)
{
    ngx_int_t                 rc;
    ngx_http_llm_ctx_t       *ctx;
    ngx_http_llm_peer_t      *peer;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    /* our own 413, as OpenAI JSON, before reading a byte of it */
    if (r->headers_in.content_length_n > 0
        && (size_t) r->headers_in.content_length_n > llcf->max_body_size)
    {
        r->keepalive = 0;
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }
        return ngx_http_llm_send_error(r, NGX_HTTP_REQUEST_ENTITY_TOO_LARGE,
                                       "invalid_request_error",
                                       "request_too_large",
                                       "request body of %O bytes is over "
                                       "the limit of %uz bytes",
                                       r->headers_in.content_length_n,
                                       llcf->max_body_size);
    }

    peer = ngx_http_llm_peer_get(llcf->engine, r->connection->log);
    if (peer == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx = ngx_http_llm_ctx_create(r, peer);
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->ecf = llcf->engine;
    ctx->chat = chat;

    r->request_body_in_single_buf = 1;

    rc = ngx_http_read_client_request_body(r, ngx_http_llm_body_handler);
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


static u_char *
ngx_http_llm_body_bytes(ngx_http_request_t *r, size_t *len)
{
    u_char       *p, *body;
    size_t        n;
    ssize_t       got;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    if (r->request_body == NULL) {
        *len = 0;
        return (u_char *) "";
    }

    n = 0;
    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        b = cl->buf;
        n += b->in_file ? (size_t) (b->file_last - b->file_pos)
                        : (size_t) (b->last - b->pos);
    }

    body = ngx_pnalloc(r->pool, n + 1);
    if (body == NULL) {
        return NULL;
    }

    p = body;
    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        b = cl->buf;

        if (b->in_file) {
            /* larger than client_body_buffer_size: a local temp file */
            got = ngx_read_file(b->file, p, b->file_last - b->file_pos,
                                b->file_pos);
            if (got != b->file_last - b->file_pos) {
                return NULL;
            }
            p += got;
            continue;
        }

        p = ngx_cpymem(p, b->pos, b->last - b->pos);
    }

    *p = '\0';
    *len = p - body;
    return body;
}


static void
ngx_http_llm_body_handler(ngx_http_request_t *r)
{
    size_t               len;
    u_char              *body;
    ngx_int_t            rc;
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    body = ngx_http_llm_body_bytes(r, &len);
    if (body == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    /* an error response may have gone out already: then rc is its result */
    rc = ngx_http_llm_prepare(r, ctx, body, len);
    if (rc != NGX_OK || r->header_sent) {
        ngx_http_finalize_request(r, rc);
        return;
    }

    ngx_http_finalize_request(r, ngx_http_llm_when_ready(r, ctx->peer,
                                                         ngx_http_llm_submit));
}


/* ---------------------------------------------------------------------- */
/* the request: validate, render, tokenize                                */

static ngx_int_t
ngx_http_llm_render_chat(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    char **text, size_t *len)
{
    char                         err[512];
    cJSON                       *vars, *special;
    ngx_int_t                    rc;
    ngx_http_llm_engine_conf_t  *ecf = ctx->ecf;

    if (ecf->chat_template == NULL) {
        return ngx_http_llm_send_error(r, NGX_HTTP_BAD_REQUEST,
                                       "invalid_request_error",
                                       "no_chat_template",
                                       "the model has no chat template: use "
                                       "/v1/completions or set "
                                       "chat_template in llm_engine");
    }

    /* what transformers' apply_chat_template passes to the template */
    special = cJSON_CreateObject();
    if (special == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    cJSON_AddStringToObject(special, "bos_token",
                            ecf->bos_text.len ? (char *) ecf->bos_text.data
                                              : "");
    cJSON_AddStringToObject(special, "eos_token",
                            ecf->eos_text.len ? (char *) ecf->eos_text.data
                                              : "");

    vars = jinja_chat_context(ctx->req.messages, NULL, 1, special, NULL);
    cJSON_Delete(special);
    if (vars == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = NGX_OK;

    if (jinja_render(ecf->chat_template, vars, text, len, err, sizeof(err))
        != 0)
    {
        /* raise_exception() in a template is the template rejecting the
           conversation (roles out of order, say): the client's fault */
        rc = ngx_http_llm_send_error(r, NGX_HTTP_BAD_REQUEST,
                                     "invalid_request_error",
                                     "invalid_messages",
                                     "chat template: %s", err);
    }

    cJSON_Delete(vars);
    return rc;
}


static ngx_int_t
ngx_http_llm_tokenize(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    const char *text, size_t len, int add_special)
{
    int          n, cap;
    int32_t     *ids;
    llm_tokenizer  *t = ctx->ecf->tokenizer;

    cap = (int) ngx_min(len + 8, LLM_RING_MAX_PROMPT + 1);

    ids = ngx_palloc(r->pool, cap * sizeof(int32_t));
    if (ids == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* chat templates write their special tokens as text: parse them */
    n = llm_tokenize(t, text, len, add_special, 1, ids, cap);
    if (n < 0) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->prompt = ids;
    ctx->n_prompt = (uint32_t) n;   /* may exceed cap: checked by caller */

    return NGX_OK;
}


static void
ngx_http_llm_apply_defaults(ngx_http_llm_loc_conf_t *llcf,
    llm_api_request *req)
{
    unsigned              set = llcf->sampling_set & ~req->given;
    llm_sampling_params  *d = &llcf->sampling, *s = &req->sampling;

    if (set & LLM_API_GIVEN_TEMPERATURE) {
        s->temperature = d->temperature;
    }
    if (set & LLM_API_GIVEN_TOP_P) {
        s->top_p = d->top_p;
    }
    if (set & LLM_API_GIVEN_TOP_K) {
        s->top_k = d->top_k;
    }
    if (set & LLM_API_GIVEN_MIN_P) {
        s->min_p = d->min_p;
    }
    if (set & LLM_API_GIVEN_PRESENCE_PENALTY) {
        s->presence_penalty = d->presence_penalty;
    }
    if (set & LLM_API_GIVEN_FREQUENCY_PENALTY) {
        s->frequency_penalty = d->frequency_penalty;
    }
    if (set & LLM_API_GIVEN_REPETITION_PENALTY) {
        s->repetition_penalty = d->repetition_penalty;
    }
}


static ngx_int_t
ngx_http_llm_prepare(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    u_char *body, size_t len)
{
    char                        *text;
    size_t                       text_len;
    ngx_int_t                    rc;
    ngx_uint_t                   room;
    llm_api_error                err;
    llm_api_limits               lim;
    ngx_http_llm_loc_conf_t     *llcf;
    ngx_http_llm_engine_conf_t  *ecf = ctx->ecf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    llm_api_limits_default(&lim);
    lim.max_body = llcf->max_body_size;
    lim.max_prompt_ids = LLM_RING_MAX_PROMPT;
    lim.max_stop_ids = LLM_RING_MAX_STOP_IDS - 4;   /* room for EOS ids */
    lim.max_logit_bias = LLM_RING_MAX_BIAS;
    if (ecf->tokenizer) {
        lim.vocab_size = llm_tokenizer_n_vocab(ecf->tokenizer);
    }

    if (llm_api_parse(&ctx->req, (char *) body, len,
                      ctx->chat ? LLM_API_CHAT : LLM_API_COMPLETION, &lim,
                      &err)
        != 0)
    {
        return ngx_http_llm_send_api_error(r, &err);
    }
    ctx->req_parsed = 1;

    if (ngx_strlen(ctx->req.model) != ecf->served_model_name.len
        || ngx_strncmp(ctx->req.model, ecf->served_model_name.data,
                       ecf->served_model_name.len) != 0)
    {
        return ngx_http_llm_send_error(r, NGX_HTTP_NOT_FOUND,
                                       "invalid_request_error",
                                       "model_not_found",
                                       "The model `%s` does not exist",
                                       ctx->req.model);
    }

    if (ecf->tokenizer == NULL) {
        /* the file's fault is for the operator's log and /healthz */
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "llm: model \"%V\" unusable: %s", &ecf->model,
                      ecf->load_error ? ecf->load_error : "no tokenizer");
        return ngx_http_llm_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                       "server_error", "engine_unavailable",
                                       "the model is unusable, see the "
                                       "server's error log");
    }

    ngx_http_llm_apply_defaults(llcf, &ctx->req);
    ctx->stream = ctx->req.stream;

    if (ctx->chat) {
        rc = ngx_http_llm_render_chat(r, ctx, &text, &text_len);
        if (rc != NGX_OK) {
            return rc;
        }
        /* vLLM's rule: the template wrote the special tokens itself */
        rc = ngx_http_llm_tokenize(r, ctx, text, text_len, 0);
        free(text);

    } else if (ctx->req.prompt_ids) {
        ctx->prompt = ctx->req.prompt_ids;
        ctx->n_prompt = ctx->req.n_prompt_ids;
        rc = NGX_OK;

    } else {
        rc = ngx_http_llm_tokenize(r, ctx, ctx->req.prompt,
                                   ctx->req.prompt_len, 1);
    }

    if (rc != NGX_OK) {
        return rc;
    }

    /* BRIEF 9.5: a request that can never be served is a 400, at once */
    if (ctx->n_prompt == 0) {
        return ngx_http_llm_send_error(r, NGX_HTTP_BAD_REQUEST,
                                       "invalid_request_error",
                                       "empty_prompt",
                                       "the prompt is empty");
    }

    if (ctx->n_prompt >= ecf->context_length) {
        return ngx_http_llm_send_error(r, NGX_HTTP_BAD_REQUEST,
                                       "invalid_request_error",
                                       "context_length_exceeded",
                                       "This model's maximum context length "
                                       "is %ui tokens, but the prompt has "
                                       "%uD tokens",
                                       ecf->context_length, ctx->n_prompt);
    }

    room = ecf->context_length - ctx->n_prompt;

    if (ctx->req.max_tokens > 0 && (ngx_uint_t) ctx->req.max_tokens > room) {
        return ngx_http_llm_send_error(r, NGX_HTTP_BAD_REQUEST,
                                       "invalid_request_error",
                                       "context_length_exceeded",
                                       "This model's maximum context length "
                                       "is %ui tokens. However, you "
                                       "requested %uD tokens (%uD in the "
                                       "prompt, %d for the completion)",
                                       ecf->context_length,
                                       ctx->n_prompt + ctx->req.max_tokens,
                                       ctx->n_prompt, ctx->req.max_tokens);
    }

    ctx->max_tokens = ctx->req.max_tokens > 0 ? (uint32_t) ctx->req.max_tokens
                                              : (uint32_t) room;
    if (llcf->max_tokens && ctx->max_tokens > llcf->max_tokens) {
        ctx->max_tokens = llcf->max_tokens;
    }

    if (llm_stop_init(&ctx->stop, ctx->req.stop, ctx->req.n_stop,
                      (char *) body, len) != 0)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx->stop_inited = 1;

    llm_detok_init(&ctx->detok, LLM_DETOK_SKIP_SPECIAL);

    return NGX_OK;
}


void
ngx_http_llm_ctx_free_generation(ngx_http_llm_ctx_t *ctx)
{
    if (ctx->req_parsed) {
        llm_api_request_free(&ctx->req);
        ctx->req_parsed = 0;
    }

    if (ctx->stop_inited) {
        llm_stop_free(&ctx->stop);
        ctx->stop_inited = 0;
    }

}


/* ---------------------------------------------------------------------- */
/* into the ring                                                          */

static void
ngx_http_llm_fill_slot(ngx_http_llm_ctx_t *ctx, llm_slot *sl)
{
    int                   i, n;
    const int32_t        *eos;
    llm_sampling         *p = &sl->sampling;
    llm_api_request      *req = &ctx->req;
    llm_sampling_params  *s = &req->sampling;

    ngx_memzero(p, sizeof(llm_sampling));
    p->temperature = s->temperature;
    p->top_p = s->top_p;
    p->top_k = s->top_k;
    p->min_p = s->min_p;
    p->presence_penalty = s->presence_penalty;
    p->frequency_penalty = s->frequency_penalty;
    p->repetition_penalty = s->repetition_penalty;
    p->seed = s->seed;
    p->has_seed = s->has_seed;
    p->logprobs = s->logprobs;
    p->top_logprobs = s->top_logprobs;
    p->max_tokens = ctx->max_tokens;

    n = 0;
    if (!req->ignore_eos) {
        int k = llm_tokenizer_stop_ids(ctx->ecf->tokenizer, &eos);

        for (i = 0; i < k && n < LLM_RING_MAX_STOP_IDS; i++) {
            p->stop_ids[n++] = eos[i];
        }
    }
    for (i = 0; i < req->n_stop_ids && n < LLM_RING_MAX_STOP_IDS; i++) {
        p->stop_ids[n++] = req->stop_ids[i];
    }
    p->n_stop_ids = n;

    for (i = 0; i < req->n_logit_bias && i < LLM_RING_MAX_BIAS; i++) {
        p->bias_ids[i] = req->logit_bias[i].token;
        p->bias[i] = req->logit_bias[i].bias;
    }
    p->n_bias = i;

    sl->priority = req->priority;
    sl->n_prompt = ctx->n_prompt;
    ngx_memcpy(sl->prompt, ctx->prompt, ctx->n_prompt * sizeof(int32_t));
}


static ngx_int_t
ngx_http_llm_submit(ngx_http_request_t *r)
{
    ngx_int_t                 rc;
    ngx_table_elt_t          *h;
    ngx_http_llm_ctx_t       *ctx;
    ngx_http_llm_loc_conf_t  *llcf;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);
    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    if (ctx->n_prompt > ngx_http_llm_peer_ring(ctx->peer)->max_prompt) {
        return ngx_http_llm_send_error(r, NGX_HTTP_BAD_REQUEST,
                                       "invalid_request_error",
                                       "context_length_exceeded",
                                       "the prompt has %uD tokens, more "
                                       "than the engine takes",
                                       ctx->n_prompt);
    }

    rc = ngx_http_llm_slot_claim(ctx->peer, &ctx->slot, LLM_KIND_GENERATE);

    if (rc == NGX_BUSY) {
        return ngx_http_llm_send_error(r, NGX_HTTP_TOO_MANY_REQUESTS,
                                       "rate_limit_error", "queue_full",
                                       "too many requests in flight, "
                                       "retry later");
    }
    if (rc != NGX_OK) {
        return ngx_http_llm_unavailable(r, ctx->peer);
    }

    ngx_http_llm_fill_slot(ctx, ctx->slot.slot);
    ctx->slot.handler = ngx_http_llm_on_slot;
    ctx->created = ngx_time();
    ctx->t_submit_ns = ngx_http_llm_now_ns();

    ctx->id.data = ngx_pnalloc(r->pool, 48);
    if (ctx->id.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx->id.len = ngx_sprintf(ctx->id.data, "%s%016xL%08xD",
                              ctx->chat ? "chatcmpl-" : "cmpl-",
                              ctx->slot.slot->req_seq
                              ^ ((uint64_t) ngx_pid << 40),
                              (uint32_t) ngx_random())
                  - ctx->id.data;

    /* the id clients log (the SDKs read it as the request id) */
    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    h->hash = 1;
    ngx_str_set(&h->key, "X-Request-Id");
    h->value = ctx->id;

    if (ngx_http_llm_slot_submit(&ctx->slot) != NGX_OK) {
        return ngx_http_llm_unavailable(r, ctx->peer);
    }

    /*
     * Always a timer, and not cancelable: an old worker exits on reload
     * once only cancelable timers are left, and would cut the stream.
     */
    ctx->deadline.handler = ngx_http_llm_deadline_handler;
    ngx_add_timer(&ctx->deadline, llcf->deadline ? llcf->deadline
                                                 : 7 * 86400000);

    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_llm_write_handler;
    r->main->count++;

    return NGX_DONE;
}


/* ---------------------------------------------------------------------- */
/* output                                                                 */

/* length of the valid UTF-8 sequence at p, 0 if invalid */
static size_t
ngx_http_llm_utf8_len(const u_char *p, size_t n)
{
    size_t    len, i;
    uint32_t  c;

    if (p[0] < 0x80) {
        return 1;
    }

    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        len = 2;
        c = p[0] & 0x1f;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        len = 3;
        c = p[0] & 0x0f;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        len = 4;
        c = p[0] & 0x07;
    } else {
        return 0;
    }

    if (n < len) {
        return 0;
    }

    for (i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            return 0;
        }
        c = (c << 6) | (p[i] & 0x3f);
    }

    /* overlong, surrogate, or past U+10FFFF */
    if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10ffff))
        || (c >= 0xd800 && c <= 0xdfff))
    {
        return 0;
    }

    return len;
}


/*
 * A JSON string body (no quotes). Token pieces of byte-level vocabularies
 * can be parts of a character: invalid bytes become U+FFFD, so the JSON is
 * always valid UTF-8. Needs 6 bytes of room per input byte.
 */
static u_char *
ngx_http_llm_json_escape(u_char *dst, const u_char *src, size_t len)
{
    u_char          c;
    size_t          n;
    static u_char   hex[] = "0123456789abcdef";

    while (len) {
        c = *src;

        if (c >= 0x80) {
            n = ngx_http_llm_utf8_len(src, len);
            if (n == 0) {
                dst = ngx_cpymem(dst, "\\ufffd", 6);
                src++;
                len--;
                continue;
            }
            dst = ngx_cpymem(dst, src, n);
            src += n;
            len -= n;
            continue;
        }

        src++;
        len--;

        switch (c) {
        case '"':
        case '\\':
            *dst++ = '\\';
            *dst++ = c;
            break;
        case '\n':
            *dst++ = '\\';
            *dst++ = 'n';
            break;
        case '\r':
            *dst++ = '\\';
            *dst++ = 'r';
            break;
        case '\t':
            *dst++ = '\\';
            *dst++ = 't';
            break;
        default:
            if (c < 0x20) {
                *dst++ = '\\';
                *dst++ = 'u';
                *dst++ = '0';
                *dst++ = '0';
                *dst++ = hex[c >> 4];
                *dst++ = hex[c & 0xf];
            } else {
                *dst++ = c;
            }
        }
    }

    return dst;
}


static ngx_buf_t *
ngx_http_llm_get_buf(ngx_http_llm_ctx_t *ctx, size_t size)
{
    u_char       *start, *end;
    ngx_buf_t    *b;
    ngx_chain_t  *cl, **ll;

    /* a long stream reuses the buffers the client has taken */
    for (ll = &ctx->free; *ll; ll = &(*ll)->next) {
        cl = *ll;
        b = cl->buf;
        if ((size_t) (b->end - b->start) >= size) {
            *ll = cl->next;
            ngx_free_chain(ctx->request->pool, cl);
            start = b->start;
            end = b->end;
            ngx_memzero(b, sizeof(ngx_buf_t));     /* flags too */
            b->start = start;
            b->end = end;
            b->pos = start;
            b->last = start;
            b->temporary = 1;
            b->tag = (ngx_buf_tag_t) &ngx_http_llm_module;
            return b;
        }
    }

    b = ngx_create_temp_buf(ctx->request->pool, ngx_max(size, 1024));
    if (b == NULL) {
        return NULL;
    }
    b->tag = (ngx_buf_tag_t) &ngx_http_llm_module;
    return b;
}


/* b at the end of the output being built */
static ngx_int_t
ngx_http_llm_append(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    ngx_buf_t *b)
{
    ngx_chain_t  *cl;

    cl = ngx_alloc_chain_link(ctx->request->pool);
    if (cl == NULL) {
        return NGX_ERROR;
    }

    cl->buf = b;
    cl->next = NULL;
    **last = cl;
    *last = &cl->next;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_send_stream_header(ngx_http_llm_ctx_t *ctx)
{
    ngx_table_elt_t     *h;
    ngx_http_request_t  *r = ctx->request;

    r->headers_out.status = NGX_HTTP_OK;
    ngx_str_set(&r->headers_out.content_type, "text/event-stream");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_length_n = -1;

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    h->hash = 1;
    ngx_str_set(&h->key, "Cache-Control");
    ngx_str_set(&h->value, "no-cache");

    /* proxies in front must not buffer the stream */
    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    h->hash = 1;
    ngx_str_set(&h->key, "X-Accel-Buffering");
    ngx_str_set(&h->value, "no");

    ctx->header_sent = 1;
    return ngx_http_send_header(r);
}


/* the head of every chunk: data: {"id":...,"choices":[{"index":0, */
static u_char *
ngx_http_llm_chunk_head(ngx_http_llm_ctx_t *ctx, u_char *p)
{
    ngx_str_t  *model = &ctx->ecf->served_model_name;

    return ngx_sprintf(p, "data: {\"id\":\"%V\",\"object\":\"%s\","
                       "\"created\":%T,\"model\":\"%V\",\"choices\":"
                       "[{\"index\":0,",
                       &ctx->id, ctx->chat ? "chat.completion.chunk"
                                           : "text_completion",
                       ctx->created, model);
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


/* one token's text as an SSE chunk (or into the reply being built) */
static ngx_int_t
ngx_http_llm_emit(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    const u_char *text, size_t len, const llm_out_token *o, ngx_uint_t role)
{
    size_t        size;
    u_char       *p;
    ngx_buf_t    *b;

    if (!ctx->stream) {
        b = ctx->text;
        if (b == NULL || (size_t) (b->end - b->last) < len) {
            size = ngx_max(len, 256);
            if (b) {
                size += 2 * (b->last - b->pos);
            }
            b = ngx_http_llm_get_buf(ctx, size);
            if (b == NULL) {
                return NGX_ERROR;
            }
            if (ctx->text) {
                b->last = ngx_cpymem(b->last, ctx->text->pos,
                                     ctx->text->last - ctx->text->pos);
            }
            ctx->text = b;
        }
        b->last = ngx_cpymem(b->last, text, len);

        ctx->text_offset += len;
        return NGX_OK;
    }

    size = ngx_http_llm_chunk_head_len(ctx) + 6 * len + 128;
    if (o && ctx->req.sampling.logprobs) {
        size += ngx_http_llm_lp_size(ctx, o);
    }

    b = ngx_http_llm_get_buf(ctx, size);
    if (b == NULL) {
        return NGX_ERROR;
    }

    p = ngx_http_llm_chunk_head(ctx, b->last);

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
        e.offset = ctx->text_offset;
        p = ngx_http_llm_lp_json(ctx, p, &e, 1);
    } else {
        p = ngx_sprintf(p, "null");
    }
    ctx->text_offset += len;

    b->last = ngx_sprintf(p, ",\"finish_reason\":null}]}\n\n");
    b->flush = 1;

    if (ngx_http_llm_append(ctx, last, b) != NGX_OK) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


static const char *
ngx_http_llm_finish_name(ngx_http_llm_ctx_t *ctx)
{
    return ngx_http_llm_finish_names[ctx->finish <= LLM_FINISH_ERROR
                                     ? ctx->finish : LLM_FINISH_ERROR];
}


static u_char *
ngx_http_llm_usage_json(ngx_http_llm_ctx_t *ctx, u_char *p)
{
    return ngx_sprintf(p, "\"usage\":{\"prompt_tokens\":%uD,"
                       "\"completion_tokens\":%uD,\"total_tokens\":%uD,"
                       "\"prompt_tokens_details\":{\"cached_tokens\":%uD}}",
                       ctx->n_prompt, ctx->n_completion,
                       ctx->n_prompt + ctx->n_completion, ctx->n_cached);
}


/* the final chunk(s) of a stream, or the whole JSON reply */
static ngx_int_t
ngx_http_llm_send_final(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last)
{
    size_t               size, tlen;
    u_char              *p;
    ngx_buf_t           *b;
    ngx_uint_t           i;
    ngx_http_llm_lp_t   *e;
    ngx_http_request_t  *r = ctx->request;

    tlen = ctx->text ? (size_t) (ctx->text->last - ctx->text->pos) : 0;

    size = 2 * ngx_http_llm_chunk_head_len(ctx) + 6 * tlen + 512;
    if (!ctx->stream && ctx->lps) {
        e = ctx->lps->elts;
        for (i = 0; i < ctx->lps->nelts; i++) {
            size += ngx_http_llm_lp_size(ctx, &e[i].o);
        }
    }

    b = ngx_http_llm_get_buf(ctx, size);
    if (b == NULL) {
        return NGX_ERROR;
    }

    p = b->last;

    if (ctx->stream) {
        p = ngx_http_llm_chunk_head(ctx, p);
        p = ngx_sprintf(p, "%s,\"logprobs\":null,\"finish_reason\":\"%s\"}]}"
                        "\n\n", ctx->chat ? "\"delta\":{}" : "\"text\":\"\"",
                        ngx_http_llm_finish_name(ctx));

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

        p = ngx_sprintf(p, "data: [DONE]\n\n");

    } else {
        p = ngx_sprintf(p, "{\"id\":\"%V\",\"object\":\"%s\",\"created\":%T,"
                        "\"model\":\"%V\",\"choices\":[{\"index\":0,",
                        &ctx->id, ctx->chat ? "chat.completion"
                                            : "text_completion",
                        ctx->created, &ctx->ecf->served_model_name);
        p = ngx_sprintf(p, ctx->chat ? "\"message\":{\"role\":\"assistant\","
                                       "\"content\":\""
                                     : "\"text\":\"");
        if (tlen) {
            p = ngx_http_llm_json_escape(p, ctx->text->pos, tlen);
        }
        p = ngx_sprintf(p, ctx->chat ? "\"}," : "\",");
        if (ctx->lps) {
            p = ngx_sprintf(p, "\"logprobs\":");
            p = ngx_http_llm_lp_json(ctx, p, ctx->lps->elts, ctx->lps->nelts);
            *p++ = ',';
        } else {
            p = ngx_sprintf(p, "\"logprobs\":null,");
        }
        p = ngx_sprintf(p, "\"finish_reason\":\"%s\"}],",
                        ngx_http_llm_finish_name(ctx));
        p = ngx_http_llm_usage_json(ctx, p);
        p = ngx_sprintf(p, "}\n");

        r->headers_out.status = NGX_HTTP_OK;
        r->headers_out.content_length_n = p - b->last;
        ngx_str_set(&r->headers_out.content_type, "application/json");
        r->headers_out.content_type_len = r->headers_out.content_type.len;
    }

    b->last = p;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;
    b->flush = 1;

    if (ngx_http_llm_append(ctx, last, b) != NGX_OK) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* an error: a JSON error before the headers went out, an event after */
static ngx_int_t
ngx_http_llm_stream_error(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    ngx_uint_t status, const char *code, const char *msg)
{
    u_char       *p;
    ngx_buf_t    *b;

    ngx_log_error(NGX_LOG_ERR, ctx->request->connection->log, 0,
                  "llm: stream ended by an error: %s", msg);

    b = ngx_http_llm_get_buf(ctx, 6 * ngx_strlen(msg) + 256);
    if (b == NULL) {
        return NGX_ERROR;
    }

    p = ngx_sprintf(b->last, "data: {\"error\":{\"message\":\"");
    p = ngx_http_llm_json_escape(p, (u_char *) msg, ngx_strlen(msg));
    b->last = ngx_sprintf(p, "\",\"type\":\"server_error\",\"param\":null,"
                          "\"code\":\"%s\"}}\n\ndata: [DONE]\n\n", code);
    b->last_buf = 1;
    b->flush = 1;
    (void) status;

    if (ngx_http_llm_append(ctx, last, b) != NGX_OK) {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* ---------------------------------------------------------------------- */
/* the token stream                                                       */

static void
ngx_http_llm_on_slot(ngx_http_llm_slot_t *s)
{
    ngx_http_llm_consume(s->data);
}


static ngx_uint_t
ngx_http_llm_engine_status(uint32_t error, const char **code)
{
    switch (error) {
    case LLM_ERR_BAD_REQUEST:
        *code = "invalid_value";
        return NGX_HTTP_BAD_REQUEST;
    case LLM_ERR_TOO_LONG:
        *code = "context_length_exceeded";
        return NGX_HTTP_BAD_REQUEST;
    case LLM_ERR_QUEUE_FULL:
        *code = "queue_full";
        return NGX_HTTP_TOO_MANY_REQUESTS;
    case LLM_ERR_NOT_READY:
        *code = "engine_unavailable";
        return NGX_HTTP_SERVICE_UNAVAILABLE;
    default:
        *code = "engine_error";
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
}


/* how much output waits for a slow client */
static size_t
ngx_http_llm_pending(ngx_http_llm_ctx_t *ctx)
{
    size_t        n = 0;
    ngx_chain_t  *cl;

    for (cl = ctx->busy; cl; cl = cl->next) {
        n += ngx_buf_size(cl->buf);
    }

    return n;
}


static void
ngx_http_llm_consume(ngx_http_llm_ctx_t *ctx)
{
    char                     *buf;
    size_t                    n, buf_size, pending;
    uint32_t                  head, state, error, vocab;
    ngx_int_t                 rc;
    ngx_uint_t                status, role, full, more;
    const char               *code;
    llm_slot                 *sl;
    ngx_chain_t              *out, *cl, **last, **mark;
    llm_stop_out              so;
    llm_out_token            *o;
    ngx_http_llm_lp_t        *lp;
    ngx_http_request_t       *r = ctx->request;
    ngx_http_llm_loc_conf_t  *llcf;

    if (ctx->finished) {
        return;
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

again:

    out = NULL;
    last = &out;
    more = 0;
    sl = ctx->slot.slot;

    if (sl == NULL) {
        /* the engine died with this request in it */
        if (!ctx->header_sent) {
            ngx_http_llm_ctx_finish(ctx,
                                    ngx_http_llm_unavailable(r, ctx->peer));
            return;
        }
        ctx->finish = LLM_FINISH_ERROR;
        rc = ngx_http_llm_stream_error(ctx, &last, 503,
                                       "engine_unavailable",
                                       ngx_http_llm_peer_reason(ctx->peer));
        goto send;
    }

    if (ngx_http_llm_pending(ctx) > llcf->max_buffered) {
        return;     /* the write handler comes back when the client reads */
    }

    if (!ctx->stream && ctx->req.sampling.logprobs && ctx->lps == NULL) {
        ctx->lps = ngx_array_create(r->pool, 16, sizeof(ngx_http_llm_lp_t));
        if (ctx->lps == NULL) {
            ngx_http_llm_ctx_finish(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR);
            return;
        }
    }

    state = atomic_load_explicit(&sl->state, memory_order_acquire);
    head = atomic_load_explicit(&sl->out_head, memory_order_acquire);
    vocab = (uint32_t) llm_tokenizer_n_vocab(ctx->ecf->tokenizer);
    buf_size = llm_detok_max_out(ctx->ecf->tokenizer);
    if (ctx->detok_buf == NULL) {
        ctx->detok_buf = ngx_palloc(r->pool, buf_size);
        if (ctx->detok_buf == NULL) {
            ngx_http_llm_ctx_finish(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR);
            return;
        }
    }
    buf = ctx->detok_buf;
    full = (head - ctx->consumed) >= LLM_RING_OUT_CAP;

    /* the engine wrote head: it can only be 0..CAP ahead of us */
    if (head - ctx->consumed > LLM_RING_OUT_CAP) {
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "llm: corrupt stream in ring slot %uD (%uD written, "
                      "%uD read): request failed", ctx->slot.index, head,
                      ctx->consumed);
        ngx_http_llm_slot_release(&ctx->slot);
        ctx->finish = LLM_FINISH_ERROR;

        if (!ctx->header_sent) {
            ngx_http_llm_ctx_finish(ctx,
                ngx_http_llm_send_error(r, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                        "server_error", "engine_error",
                                        "corrupt stream from the engine"));
            return;
        }

        rc = ngx_http_llm_stream_error(ctx, &last, 500, "engine_error",
                                       "corrupt stream from the engine");
        goto send;
    }

    rc = NGX_OK;

    if (ctx->stream && !ctx->header_sent && head != ctx->consumed) {
        rc = ngx_http_llm_send_stream_header(ctx);
        if (rc == NGX_ERROR || rc > NGX_OK) {
            ngx_http_llm_ctx_finish(ctx, rc);
            return;
        }
    }

    pending = ngx_http_llm_pending(ctx);

    while (ctx->consumed != head && !ctx->stopped && rc == NGX_OK) {

        /* a stream takes no more than max_buffered from the ring: the rest
           waits there, and the engine holds the sequence when it fills */
        if (ctx->stream && pending > llcf->max_buffered) {
            more = 1;
            break;
        }

        mark = last;
        o = &sl->out[ctx->consumed % LLM_RING_OUT_CAP];
        role = (ctx->n_completion == 0);
        ctx->consumed++;
        ctx->n_completion++;

        if (ctx->t_first_ns == 0) {
            ctx->t_first_ns = ngx_http_llm_now_ns();
        }

        if ((uint32_t) o->token >= vocab) {
            ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                          "llm: engine sent token %D outside the vocabulary",
                          o->token);
            continue;
        }

        n = llm_detok_push(ctx->ecf->tokenizer, &ctx->detok, o->token, buf,
                           buf_size);
        if ((int) n < 0) {
            n = 0;
        }

        if (llm_stop_push(&ctx->stop, buf, n, &so) != 0) {
            rc = NGX_ERROR;
            break;
        }

        if (so.stopped) {
            ctx->stopped = 1;
            ctx->finish = LLM_FINISH_STOP;
        }

        if (ctx->lps) {
            lp = ngx_array_push(ctx->lps);
            if (lp == NULL) {
                rc = NGX_ERROR;
                break;
            }
            lp->o = *o;
            lp->offset = ctx->text_offset;
        }

        /* OpenAI streams one chunk per token, the first with the role */
        if (so.len || role || (ctx->stream && ctx->req.sampling.logprobs)) {
            rc = ngx_http_llm_emit(ctx, &last, (u_char *) so.text, so.len,
                                   o, role);
        }

        for (cl = *mark; cl; cl = cl->next) {
            pending += ngx_buf_size(cl->buf);
        }
    }

    atomic_store_explicit(&sl->out_tail, ctx->consumed, memory_order_release);
    if (full) {
        ngx_http_llm_slot_kick(&ctx->slot);     /* the engine held it */
    }

    if (rc != NGX_OK) {
        ngx_http_llm_ctx_finish(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    if (!ctx->stopped && !(state == LLM_SLOT_DONE && ctx->consumed == head)) {
        goto send;          /* more to come */
    }

    /* the end: from a stop string here, or the engine's finish */
    ctx->t_done_ns = ngx_http_llm_now_ns();
    ctx->n_cached = sl->n_cached;
    ctx->t_scheduled_ns = sl->t_scheduled_ns;

    if (!ctx->stopped) {
        ctx->finish = sl->finish;
        error = sl->error;

        if (ctx->finish == LLM_FINISH_ERROR && ctx->n_completion == 0
            && !ctx->header_sent)
        {
            char msg[LLM_RING_REASON_LEN];

            ngx_memcpy(msg, sl->message, sizeof(msg));
            msg[sizeof(msg) - 1] = '\0';
            status = ngx_http_llm_engine_status(error, &code);
            ngx_http_llm_slot_release(&ctx->slot);
            ngx_http_llm_ctx_finish(ctx,
                                    ngx_http_llm_send_error(r, status,
                                    status == NGX_HTTP_TOO_MANY_REQUESTS
                                    ? "rate_limit_error"
                                    : status >= 500 ? "server_error"
                                    : "invalid_request_error",
                                    code, "%s", msg));
            return;
        }
    }

    ngx_http_llm_slot_release(&ctx->slot);      /* cancels if still running */

    if (ctx->finish == LLM_FINISH_ERROR && ctx->header_sent) {
        rc = ngx_http_llm_stream_error(ctx, &last, 500, "engine_error",
                                       "the engine failed this request");
        goto send;
    }

    if (!ctx->stopped) {
        llm_stop_flush(&ctx->stop, &so);
        if (so.len) {
            rc = ngx_http_llm_emit(ctx, &last, (u_char *) so.text, so.len,
                                   NULL, 0);
        }
    }

    if (rc == NGX_OK) {
        if (ctx->stream && !ctx->header_sent) {
            rc = ngx_http_llm_send_stream_header(ctx);
            if (rc == NGX_ERROR || rc > NGX_OK) {
                ngx_http_llm_ctx_finish(ctx, rc);
                return;
            }
        }
        rc = ngx_http_llm_send_final(ctx, &last);
    }

    if (rc != NGX_OK) {
        ngx_http_llm_ctx_finish(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    if (!ctx->stream) {
        rc = ngx_http_send_header(r);
        if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
            ngx_http_llm_ctx_finish(ctx, rc);
            return;
        }
        ctx->header_sent = 1;
    }

send:

    if (out == NULL) {
        return;
    }

    rc = ngx_http_output_filter(r, out);
    ngx_chain_update_chains(r->pool, &ctx->free, &ctx->busy, &out,
                            (ngx_buf_tag_t) &ngx_http_llm_module);

    if (rc == NGX_ERROR) {
        ngx_http_llm_ctx_finish(ctx, NGX_ERROR);
        return;
    }

    if (rc == NGX_AGAIN && ngx_http_llm_wait_writable(r) != NGX_OK) {
        ngx_http_llm_ctx_finish(ctx, NGX_ERROR);
        return;
    }

    if (more && rc == NGX_OK && !r->connection->buffered) {
        goto again;         /* all sent: take the rest of the ring */
    }

    if (ctx->slot.slot == NULL && ctx->slot.handler == ngx_http_llm_on_slot
        && (ctx->finish != LLM_FINISH_NONE || ctx->stopped))
    {
        /* everything is queued: nginx flushes it and closes */
        ngx_http_llm_ctx_finish(ctx, rc);
    }
}


/*
 * Output waits in nginx for the client: watch for writability (epoll adds
 * the write event only on demand) under send_timeout, as ngx_http_writer.
 */
static ngx_int_t
ngx_http_llm_wait_writable(ngx_http_request_t *r)
{
    ngx_event_t               *wev = r->connection->write;
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    if (!wev->delayed && !wev->timer_set) {
        ngx_add_timer(wev, clcf->send_timeout);
    }

    return ngx_handle_write_event(wev, clcf->send_lowat);
}


/* the client read some: send what waits, then read more of the stream */
static void
ngx_http_llm_write_handler(ngx_http_request_t *r)
{
    ngx_int_t            rc;
    ngx_chain_t         *out;
    ngx_event_t         *wev;
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);
    wev = r->connection->write;

    if (wev->timedout) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, NGX_ETIMEDOUT,
                      "llm: client timed out reading the stream");
        r->connection->timedout = 1;
        ngx_http_llm_ctx_finish(ctx, NGX_HTTP_REQUEST_TIME_OUT);
        return;
    }

    out = NULL;
    rc = ngx_http_output_filter(r, NULL);
    ngx_chain_update_chains(r->pool, &ctx->free, &ctx->busy, &out,
                            (ngx_buf_tag_t) &ngx_http_llm_module);


    if (rc == NGX_ERROR) {
        ngx_http_llm_ctx_finish(ctx, NGX_ERROR);
        return;
    }

    if (r->connection->buffered) {
        if (ngx_http_llm_wait_writable(r) != NGX_OK) {
            ngx_http_llm_ctx_finish(ctx, NGX_ERROR);
        }
        return;
    }

    if (wev->timer_set) {
        ngx_del_timer(wev);
    }

    ngx_http_llm_consume(ctx);
}


static void
ngx_http_llm_deadline_handler(ngx_event_t *ev)
{
    ngx_chain_t         *out, **last;
    ngx_http_llm_ctx_t  *ctx = ev->data;

    ngx_log_error(NGX_LOG_ERR, ctx->request->connection->log, 0,
                  "llm: 504 deadline passed after %uD tokens, sequence "
                  "aborted", ctx->n_completion);

    ngx_http_llm_slot_release(&ctx->slot);      /* the engine drops it */

    if (!ctx->header_sent) {
        ngx_http_llm_ctx_finish(ctx,
                                ngx_http_llm_send_error(ctx->request,
                                    NGX_HTTP_GATEWAY_TIME_OUT,
                                    "server_error", "deadline_exceeded",
                                    "the generation deadline passed"));
        return;
    }

    out = NULL;
    last = &out;
    ctx->finish = LLM_FINISH_ERROR;

    if (ngx_http_llm_stream_error(ctx, &last, 504, "deadline_exceeded",
                                  "the generation deadline passed")
        != NGX_OK)
    {
        ngx_http_llm_ctx_finish(ctx, NGX_ERROR);
        return;
    }

    ngx_http_llm_ctx_finish(ctx, ngx_http_output_filter(ctx->request, out));
}
