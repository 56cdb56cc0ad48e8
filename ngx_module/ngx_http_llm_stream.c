/*
 * A generation's token stream, from its ring slot to the client: the
 * engine's WAKE or the client's write event runs one loop of three
 * halves, as ngx_event_pipe.c does: read what the engine wrote (detokenize,
 * hold back stop strings), finish when the generation ended, flush the
 * output to nginx.
 *
 * A slow client never holds the engine: past max_buffered bytes of unsent
 * output this request stops reading its stream, the stream fills up, and
 * the engine skips the sequence (keeping its KV) until there is room.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


/* llm_deadline 0 (none): a week, still a timer, which a graceful reload
   waits for */
#define NGX_HTTP_LLM_NO_DEADLINE_MS  (7 * 86400000)


static void ngx_http_llm_stream_on_slot(ngx_http_llm_slot_t *s);
static void ngx_http_llm_stream_run(ngx_http_llm_ctx_t *ctx);
static ngx_int_t ngx_http_llm_stream_split(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last, const char *text,
    size_t len, llm_out_token *o, ngx_uint_t role);
static ngx_int_t ngx_http_llm_stream_read(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last, ngx_uint_t *more);
static ngx_int_t ngx_http_llm_stream_end(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last);
static ngx_int_t ngx_http_llm_stream_done(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t ***last);
static ngx_int_t ngx_http_llm_stream_flush(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t *out);
static void ngx_http_llm_stream_write_handler(ngx_http_request_t *r);
static void ngx_http_llm_stream_deadline(ngx_event_t *ev);


/* the request went to the engine: its events come here from now on */
void
ngx_http_llm_stream_start(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    ngx_uint_t                i;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    for (i = 0; i < ctx->n_choices; i++) {
        ctx->choices[i].slot.handler = ngx_http_llm_stream_on_slot;
    }

    /*
     * Always a timer, and not cancelable: an old worker exits on reload
     * once only cancelable timers are left, and would cut the stream.
     */
    ctx->deadline.handler = ngx_http_llm_stream_deadline;
    ngx_add_timer(&ctx->deadline, llcf->deadline ? llcf->deadline
                                                 : NGX_HTTP_LLM_NO_DEADLINE_MS);

    r->read_event_handler = ngx_http_test_reading;
    r->write_event_handler = ngx_http_llm_stream_write_handler;
    r->main->count++;
}


static void
ngx_http_llm_stream_on_slot(ngx_http_llm_slot_t *s)
{
    ngx_http_llm_stream_run(s->data);      /* the request's */
}


/*
 * The read and end halves of every choice still going, in index order
 * (a stream interleaves their chunks as they come), then the request's
 * end once every choice ended. Answers as the halves do.
 */
static ngx_int_t
ngx_http_llm_stream_choices(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    ngx_uint_t *more)
{
    ngx_int_t               rc;
    ngx_uint_t              i, n, ended;
    ngx_http_llm_choice_t  *c;

    n = ctx->n_choices;
    ended = 0;

    for (i = 0; i < n; i++) {
        c = &ctx->choices[i];
        if (c->ended) {
            ended++;
            continue;
        }

        rc = ngx_http_llm_stream_read(ctx, c, last, more);

        if (rc == NGX_DONE) {
            rc = ngx_http_llm_stream_end(ctx, c, last);
            if (rc == NGX_OK && !ctx->failed) {
                c->ended = 1;
                ended++;
            }
        }

        if (rc != NGX_OK || ctx->failed) {
            return rc;
        }
    }

    if (ended == n) {
        return ngx_http_llm_stream_done(ctx, last);
    }

    return NGX_OK;
}


/*
 * One pass per event. The halves answer NGX_OK (output built, flush it),
 * NGX_DONE (read: the generation ended, finish it), NGX_AGAIN (output
 * waits for the client, whose write event runs the next pass) or
 * NGX_ERROR (the half finished the request). A pass that stopped reading
 * at max_buffered runs again once nginx took everything.
 */
static void
ngx_http_llm_stream_run(ngx_http_llm_ctx_t *ctx)
{
    ngx_int_t     rc;
    ngx_uint_t    more;
    ngx_chain_t  *out, **last;

    while (!ctx->finished) {
        out = NULL;
        last = &out;
        more = 0;

        rc = ngx_http_llm_stream_choices(ctx, &last, &more);

        if (rc != NGX_OK) {
            return;
        }

        if (ngx_http_llm_stream_flush(ctx, out) != NGX_OK || !more) {
            return;
        }
    }
}


/* ---------------------------------------------------------------------- */
/* the read half                                                          */

/* how much output waits for a slow client */
static size_t
ngx_http_llm_pending(ngx_chain_t *cl)
{
    size_t  n = 0;

    for ( /* void */ ; cl; cl = cl->next) {
        n += ngx_buf_size(cl->buf);
    }

    return n;
}


/*
 * The schema keywords the engine relaxed (not strict), which it wrote in
 * choice 0's slot before any token: counted, logged at info, and named in
 * the x-llm-schema-relaxed header. The engine's text is checked as the
 * ring's every field: terminated, and printable ASCII only.
 */
static void
ngx_http_llm_stream_relaxed(ngx_http_llm_ctx_t *ctx)
{
    size_t                    n, i;
    llm_slot                 *sl = ctx->choices[0].slot.slot;
    ngx_http_request_t       *r = ctx->request;
    ngx_http_llm_counters_t  *cnt;

    ctx->relaxed_read = 1;

    if (sl == NULL || ctx->req.constraint_kind == LLM_CONSTRAINT_NONE) {
        return;
    }

    n = ngx_strnlen((u_char *) sl->relaxed, sizeof(sl->relaxed));
    for (i = 0; i < n; i++) {
        if (sl->relaxed[i] < 0x20 || sl->relaxed[i] > 0x7e) {
            break;
        }
    }
    if (n == sizeof(sl->relaxed) || i < n) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "llm: the engine's list of relaxed schema keywords "
                      "is not printable terminated text; ignored");
        return;
    }
    if (n == 0) {
        return;
    }

    ctx->relaxed.data = ngx_pnalloc(r->pool, n);
    if (ctx->relaxed.data == NULL) {
        return;
    }
    ngx_memcpy(ctx->relaxed.data, sl->relaxed, n);
    ctx->relaxed.len = n;

    cnt = ngx_http_llm_counters(ctx->ecf);
    if (cnt) {
        (void) ngx_atomic_fetch_add(&cnt->schema_relaxed, 1);
    }
    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "llm: schema keywords relaxed (not strict): %V",
                  &ctx->relaxed);
}


/* x-llm-schema-relaxed, when the engine relaxed the schema */
static ngx_int_t
ngx_http_llm_relaxed_header(ngx_http_llm_ctx_t *ctx)
{
    ngx_table_elt_t  *h;

    if (ctx->relaxed.len == 0) {
        return NGX_OK;
    }

    h = ngx_list_push(&ctx->request->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }
    h->hash = 1;
    ngx_str_set(&h->key, "x-llm-schema-relaxed");
    h->value = ctx->relaxed;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_stream_header(ngx_http_llm_ctx_t *ctx)
{
    ngx_int_t            rc;
    ngx_table_elt_t     *h;
    ngx_http_request_t  *r = ctx->request;

    r->headers_out.status = NGX_HTTP_OK;
    ngx_str_set(&r->headers_out.content_type, "text/event-stream");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_length_n = -1;

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        ngx_http_llm_ctx_finish(ctx, NGX_ERROR);
        return NGX_ERROR;
    }
    h->hash = 1;
    ngx_str_set(&h->key, "Cache-Control");
    ngx_str_set(&h->value, "no-cache");

    /* proxies in front must not buffer the stream */
    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        ngx_http_llm_ctx_finish(ctx, NGX_ERROR);
        return NGX_ERROR;
    }
    h->hash = 1;
    ngx_str_set(&h->key, "X-Accel-Buffering");
    ngx_str_set(&h->value, "no");

    if (ngx_http_llm_relaxed_header(ctx) != NGX_OK) {
        ngx_http_llm_ctx_finish(ctx, NGX_ERROR);
        return NGX_ERROR;
    }

    ctx->sse_started = 1;

    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK) {
        ngx_http_llm_ctx_finish(ctx, rc);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * The stream failed after its headers went out: the error becomes its
 * last event, and the status it would have had goes to the log, as every
 * other error's does.
 */
static ngx_int_t
ngx_http_llm_stream_fail(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last, ngx_uint_t status, const char *code, const char *msg)
{
    ngx_uint_t  level;

    level = (status >= 500) ? NGX_LOG_ERR : NGX_LOG_INFO;
    ngx_log_error(level, ctx->request->connection->log, 0,
                  "llm: %ui stream ended by an error: %s", status, msg);

    c->finish = LLM_FINISH_ERROR;
    ctx->failed = 1;                            /* no choice follows */

    if (ngx_http_llm_format_error(ctx, last, status, code, msg) != NGX_OK) {
        ngx_http_llm_ctx_finish(ctx, NGX_ERROR);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* the engine died with this request in it */
static ngx_int_t
ngx_http_llm_stream_lost(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last)
{
    if (!ctx->sse_started) {
        ngx_http_llm_ctx_finish(ctx, ngx_http_llm_unavailable(ctx->request,
                                                              ctx->peer));
        return NGX_ERROR;
    }

    return ngx_http_llm_stream_fail(ctx, c, last,
                                    NGX_HTTP_SERVICE_UNAVAILABLE,
                                    "engine_unavailable",
                                    ngx_http_llm_peer_reason(ctx->peer));
}


/* the engine wrote head: it can only be 0..CAP ahead of us */
static ngx_int_t
ngx_http_llm_stream_corrupt(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last, uint32_t head)
{
    ngx_http_request_t  *r = ctx->request;

    ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                  "llm: corrupt stream in ring slot %uD (%uD written, "
                  "%uD read): request failed", c->slot.index, head,
                  c->consumed);

    ngx_http_llm_peer_release(&c->slot);
    c->finish = LLM_FINISH_ERROR;

    if (!ctx->sse_started) {
        ngx_http_llm_ctx_finish(ctx,
            ngx_http_llm_send_error(r, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                    "engine_error",
                                    "corrupt stream from the engine"));
        return NGX_ERROR;
    }

    return ngx_http_llm_stream_fail(ctx, c, last,
                                    NGX_HTTP_INTERNAL_SERVER_ERROR,
                                    "engine_error",
                                    "corrupt stream from the engine");
}


/* what the read half needs once per choice */
static ngx_int_t
ngx_http_llm_stream_alloc(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c)
{
    ngx_http_request_t  *r = ctx->request;

    if (!ctx->stream && ctx->req.sampling.logprobs && c->lps == NULL) {
        c->lps = ngx_array_create(r->pool, 16, sizeof(ngx_http_llm_lp_t));
        if (c->lps == NULL) {
            return NGX_ERROR;
        }
    }

    if (c->detok_buf == NULL) {
        c->detok_buf = ngx_palloc(r->pool,
                                  llm_detok_max_out(ctx->ecf->tokenizer));
        if (c->detok_buf == NULL) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* one token: its text through the detokenizer and the stop strings, out */
static ngx_int_t
ngx_http_llm_stream_token(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last, llm_out_token *o)
{
    int                 n;
    ngx_uint_t          role;
    llm_stop_out        so;
    llm_tokenizer      *t = ctx->ecf->tokenizer;
    ngx_http_llm_lp_t  *lp;

    role = (c->n_completion == 0);
    c->consumed++;
    c->n_completion++;

    if (ctx->t_first_ns == 0) {
        ctx->t_first_ns = ngx_http_llm_now_ns();

        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                       "llm: ring slot %uD: first token after %uL us",
                       c->slot.index,
                       (ctx->t_first_ns - ctx->t_submit_ns) / 1000);
    }

    if ((uint32_t) o->token >= (uint32_t) llm_tokenizer_n_vocab(t)) {
        ngx_log_error(NGX_LOG_ALERT, ctx->request->connection->log, 0,
                      "llm: engine sent token %D outside the vocabulary",
                      o->token);
        return NGX_OK;
    }

    n = llm_detok_push(t, &c->detok, o->token, c->detok_buf,
                       llm_detok_max_out(t));
    if (n < 0) {
        n = 0;
    }

    if (llm_stop_push(&c->stop, c->detok_buf, n, &so) != 0) {
        return NGX_ERROR;
    }

    if (so.stopped) {
        c->stopped = 1;
        c->finish = LLM_FINISH_STOP;
    }

    if (c->lps) {
        lp = ngx_array_push(c->lps);
        if (lp == NULL) {
            return NGX_ERROR;
        }
        lp->o = *o;
        lp->offset = c->text_offset;
    }

    if (c->out_active) {
        return ngx_http_llm_stream_split(ctx, c, last, so.text, so.len, o,
                                         role);
    }

    /* OpenAI streams one chunk per token, the first with the role */
    if (so.len || role || (ctx->stream && ctx->req.sampling.logprobs)) {
        return ngx_http_llm_format_chunk(ctx, c, last, (u_char *) so.text,
                                         so.len, o, role);
    }

    return NGX_OK;
}


/*
 * Text through the splitter (api/reply.h): thinking and answer go out
 * as they come; what may be a tool call waits for the end.
 */
static ngx_int_t
ngx_http_llm_stream_split(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last, const char *text, size_t len, llm_out_token *o,
    ngx_uint_t role)
{
    llm_reply_piece  p;

    if (llm_reply_push(&c->out, text, len, &p) != 0) {
        return NGX_ERROR;
    }

    if (p.content_len || p.reasoning_len || role
        || (o && ctx->stream && ctx->req.sampling.logprobs))
    {
        return ngx_http_llm_format_delta(ctx, c, last, &p, o, role);
    }

    return NGX_OK;
}


/*
 * The end of a split reply: the held text, then the calls. A reply that
 * looked like a call and was not one goes out as content, counted and
 * logged: a client that asked for tools should be able to see why none
 * came.
 */
static ngx_int_t
ngx_http_llm_stream_split_end(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last, const char *text,
    size_t len)
{
    llm_reply_piece           p;
    ngx_http_llm_counters_t  *cnt;

    if (len && ngx_http_llm_stream_split(ctx, c, last, text, len, NULL, 0)
               != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (llm_reply_finish(&c->out, &p) != 0) {
        return NGX_ERROR;
    }

    if ((p.content_len || p.reasoning_len)
        && ngx_http_llm_format_delta(ctx, c, last, &p, NULL, 0) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (c->out.failed) {
        cnt = ngx_http_llm_counters(ctx->ecf);
        if (cnt) {
            (void) ngx_atomic_fetch_add(&cnt->tool_parse_failures, 1);
        }
        ngx_log_error(NGX_LOG_INFO, ctx->request->connection->log, 0,
                      "llm: the reply looked like a tool call (%s format) "
                      "but is not one: %s; sent as content",
                      llm_tool_format_name(c->out.format), c->out.why);
    }

    if (c->out.dropped) {
        cnt = ngx_http_llm_counters(ctx->ecf);
        if (cnt) {
            (void) ngx_atomic_fetch_add(&cnt->tool_calls_dropped, 1);
        }
        ngx_log_error(NGX_LOG_INFO, ctx->request->connection->log, 0,
                      "llm: the reply was cut in a tool call (%s format): "
                      "%d finished call(s) kept, the unfinished one "
                      "dropped", llm_tool_format_name(c->out.format),
                      c->out.n_calls);
    }

    if (ctx->stream && c->out.n_calls
        && ngx_http_llm_format_tool_calls(ctx, c, last) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * Take what the engine wrote, up to max_buffered of output. NGX_DONE: the
 * generation ended (a stop string here, or the engine's finish).
 */
static ngx_int_t
ngx_http_llm_stream_read(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last, ngx_uint_t *more)
{
    size_t                    pending;
    uint32_t                  head, state;
    ngx_int_t                 rc;
    ngx_uint_t                full;
    llm_slot                 *sl = c->slot.slot;
    ngx_chain_t             **mark;
    ngx_http_llm_loc_conf_t  *llcf;

    if (sl == NULL) {
        return ngx_http_llm_stream_lost(ctx, c, last);
    }

    llcf = ngx_http_get_module_loc_conf(ctx->request, ngx_http_llm_module);

    pending = ngx_http_llm_pending(ctx->busy);
    if (pending > llcf->max_buffered) {
        return NGX_AGAIN;
    }

    if (ngx_http_llm_stream_alloc(ctx, c) != NGX_OK) {
        ngx_http_llm_ctx_finish(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return NGX_ERROR;
    }

    state = atomic_load_explicit(&sl->state, memory_order_acquire);
    head = atomic_load_explicit(&sl->out_head, memory_order_acquire);
    full = (head - c->consumed) >= LLM_RING_OUT_CAP;

    if (head - c->consumed > LLM_RING_OUT_CAP) {
        return ngx_http_llm_stream_corrupt(ctx, c, last, head);
    }

    if (!ctx->relaxed_read && head != c->consumed) {
        ngx_http_llm_stream_relaxed(ctx);
    }

    if (ctx->stream && !ctx->sse_started && head != c->consumed
        && ngx_http_llm_stream_header(ctx) != NGX_OK)
    {
        return NGX_ERROR;
    }

    rc = NGX_OK;

    while (c->consumed != head && !c->stopped && rc == NGX_OK) {

        /* a stream takes no more than max_buffered from the ring: the rest
           waits there, and the engine holds the sequence when it fills */
        if (ctx->stream && pending > llcf->max_buffered) {
            *more = 1;
            break;
        }

        /* the token quota is spent: the generation ends as at max_tokens,
           and stream_end's release cancels the engine's sequence */
        if (ngx_http_llm_quota_spend(ctx) != NGX_OK) {
            c->stopped = 1;
            c->finish = LLM_FINISH_LENGTH;
            break;
        }

        mark = *last;
        rc = ngx_http_llm_stream_token(ctx, c, last,
                                       &sl->out[c->consumed
                                                % LLM_RING_OUT_CAP]);
        pending += ngx_http_llm_pending(*mark);
    }

    atomic_store_explicit(&sl->out_tail, c->consumed, memory_order_release);
    if (full) {
        ngx_http_llm_peer_kick(&c->slot);       /* the engine held it */
    }

    if (rc != NGX_OK) {
        ngx_http_llm_ctx_finish(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return NGX_ERROR;
    }

    if (c->stopped || (state == LLM_SLOT_DONE && c->consumed == head)) {
        return NGX_DONE;
    }

    return NGX_OK;          /* more to come */
}


/* ---------------------------------------------------------------------- */
/* the finish half                                                        */

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


/* the engine refused the request before its first token: a JSON error */
static void
ngx_http_llm_stream_refused(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c)
{
    char         msg[LLM_RING_REASON_LEN];
    ngx_uint_t   status;
    const char  *code;

    ngx_memcpy(msg, c->slot.slot->message, sizeof(msg));
    msg[sizeof(msg) - 1] = '\0';
    status = ngx_http_llm_engine_status(c->slot.slot->error, &code);

    ngx_http_llm_peer_release(&c->slot);

    ngx_http_llm_ctx_finish(ctx,
        ngx_http_llm_send_error(ctx->request, status, code, "%s", msg));
}


/* the generation ended: the held-back text, the last chunk or the reply */
static ngx_int_t
ngx_http_llm_stream_end(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last)
{
    ngx_int_t            rc;
    llm_slot            *sl = c->slot.slot;
    llm_stop_out         so;
    ngx_http_request_t  *r = ctx->request;

    ctx->t_done_ns = ngx_http_llm_now_ns();

    if (c->index == 0) {
        /* choice 0's slot is the request's */
        ctx->n_cached = sl->n_cached;
        ctx->t_scheduled_ns = sl->t_scheduled_ns;
    }

    if (!c->stopped) {
        c->finish = sl->finish;

        if (c->finish == LLM_FINISH_ERROR && c->n_completion == 0
            && !ctx->sse_started)
        {
            ngx_http_llm_stream_refused(ctx, c);
            return NGX_ERROR;
        }
    }

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm: ring slot %uD finished: %s, %uD tokens, %uD cached",
                   c->slot.index, ngx_http_llm_finish_name(c),
                   c->n_completion, sl->n_cached);

    ngx_http_llm_peer_release(&c->slot);        /* cancels if still running */

    if (c->finish == LLM_FINISH_ERROR && ctx->sse_started) {
        return ngx_http_llm_stream_fail(ctx, c, last,
                                        NGX_HTTP_INTERNAL_SERVER_ERROR,
                                        "engine_error",
                                        "the engine failed this request");
    }

    rc = NGX_OK;

    /* a stop string drops what it held back; the quota's cut does not */
    if (!c->stopped || c->finish == LLM_FINISH_LENGTH) {
        llm_stop_flush(&c->stop, &so);
        if (c->out_active) {
            rc = ngx_http_llm_stream_split_end(ctx, c, last, so.text,
                                               so.len);

        } else if (so.len) {
            rc = ngx_http_llm_format_chunk(ctx, c, last, (u_char *) so.text,
                                           so.len, NULL, 0);
        }

    } else if (c->out_active) {
        rc = ngx_http_llm_stream_split_end(ctx, c, last, NULL, 0);
    }

    if (rc == NGX_OK && ctx->stream && !ctx->sse_started
        && ngx_http_llm_stream_header(ctx) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (rc == NGX_OK && ctx->stream) {
        rc = ngx_http_llm_format_finish(ctx, c, last);
    }

    if (rc != NGX_OK) {
        ngx_http_llm_ctx_finish(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* every choice ended: the quota settles, the last chunks or the reply */
static ngx_int_t
ngx_http_llm_stream_done(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last)
{
    ngx_int_t            rc;
    ngx_http_request_t  *r = ctx->request;

    ngx_http_llm_quota_settle(ctx);

    if (ngx_http_llm_format_final(ctx, last) != NGX_OK) {
        ngx_http_llm_ctx_finish(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return NGX_ERROR;
    }

    if (!ctx->stream) {
        if (ngx_http_llm_relaxed_header(ctx) != NGX_OK) {
            ngx_http_llm_ctx_finish(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR);
            return NGX_ERROR;
        }
        rc = ngx_http_send_header(r);
        if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
            ngx_http_llm_ctx_finish(ctx, rc);
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* ---------------------------------------------------------------------- */
/* the flush half                                                         */

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


/* every choice ended and let its slot go */
static ngx_uint_t
ngx_http_llm_request_ended(ngx_http_llm_ctx_t *ctx)
{
    ngx_uint_t              i;
    ngx_http_llm_choice_t  *c;

    for (i = 0; i < ctx->n_choices; i++) {
        c = &ctx->choices[i];
        if (c->slot.slot != NULL
            || (c->finish == LLM_FINISH_NONE && !c->stopped))
        {
            return 0;
        }
    }

    return 1;
}


/* NGX_OK: nginx took all of it; NGX_AGAIN: some waits for the client */
static ngx_int_t
ngx_http_llm_stream_flush(ngx_http_llm_ctx_t *ctx, ngx_chain_t *out)
{
    ngx_int_t            rc;
    ngx_http_request_t  *r = ctx->request;

    if (out == NULL) {
        return NGX_AGAIN;
    }

    rc = ngx_http_output_filter(r, out);
    ngx_chain_update_chains(r->pool, &ctx->free, &ctx->busy, &out,
                            (ngx_buf_tag_t) &ngx_http_llm_module);

    if (rc == NGX_ERROR) {
        ngx_http_llm_ctx_finish(ctx, NGX_ERROR);
        return NGX_ERROR;
    }

    if (rc == NGX_AGAIN && ngx_http_llm_wait_writable(r) != NGX_OK) {
        ngx_http_llm_ctx_finish(ctx, NGX_ERROR);
        return NGX_ERROR;
    }

    if (ctx->failed || ngx_http_llm_request_ended(ctx)) {
        /* everything is queued: nginx flushes it and closes */
        ngx_http_llm_ctx_finish(ctx, rc);
        return NGX_DONE;
    }

    return (rc == NGX_OK && !r->connection->buffered) ? NGX_OK : NGX_AGAIN;
}


/* the client read some: send what waits, then read more of the stream */
static void
ngx_http_llm_stream_write_handler(ngx_http_request_t *r)
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

    ngx_http_llm_stream_run(ctx);
}


static void
ngx_http_llm_stream_deadline(ngx_event_t *ev)
{
    ngx_chain_t         *out, **last;
    ngx_http_llm_ctx_t  *ctx = ev->data;

    ngx_log_error(NGX_LOG_ERR, ctx->request->connection->log, 0,
                  "llm: 504 deadline passed after %uD tokens, sequence "
                  "aborted", ngx_http_llm_completion_tokens(ctx));

    ngx_http_llm_release_choices(ctx);          /* the engine drops them */

    if (!ctx->sse_started) {
        ngx_http_llm_ctx_finish(ctx,
                                ngx_http_llm_send_error(ctx->request,
                                    NGX_HTTP_GATEWAY_TIME_OUT,
                                    "deadline_exceeded",
                                    "the generation deadline passed"));
        return;
    }

    out = NULL;
    last = &out;

    /* $llm_finish_reason (choice 0's) says error */
    if (ngx_http_llm_stream_fail(ctx, &ctx->choices[0], &last,
                                 NGX_HTTP_GATEWAY_TIME_OUT,
                                 "deadline_exceeded",
                                 "the generation deadline passed")
        != NGX_OK)
    {
        return;
    }

    ngx_http_llm_ctx_finish(ctx, ngx_http_output_filter(ctx->request, out));
}
