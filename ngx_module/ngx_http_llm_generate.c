/*
 * POST /v1/chat/completions and /v1/completions, from the request to a
 * ring slot: read and validate the body, render the chat template,
 * tokenize, admit (context, priority, token quotas), then claim a slot, write the
 * prompt and the sampling parameters into it and submit it. From there the
 * stream (ngx_http_llm_stream.c) takes the request.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


static void ngx_http_llm_body_handler(ngx_http_request_t *r);
static void ngx_http_llm_body_read(ngx_http_request_t *r);
static void ngx_http_llm_generation_free(void *data);
static ngx_int_t ngx_http_llm_prepare(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx, u_char *body, size_t len);
static ngx_int_t ngx_http_llm_submit(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_to_ring(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
static ngx_int_t ngx_http_llm_tool_choice(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);


/* ---------------------------------------------------------------------- */
/* entry: read the body                                                   */

ngx_int_t
ngx_http_llm_generate(ngx_http_request_t *r, ngx_uint_t kind)
{
    ngx_int_t                 rc;
    ngx_pool_cleanup_t       *cln;
    ngx_http_llm_ctx_t       *ctx;
    ngx_http_llm_peer_t      *peer;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    /* a body over llm_max_body_size is core's 413 (client_max_body_size,
       set by merge_loc_conf), as JSON through the reply filter */

    peer = ngx_http_llm_peer_get(llcf->engine, r->connection->log);
    if (peer == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx = ngx_http_llm_ctx_create(r, peer);
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    cln->handler = ngx_http_llm_generation_free;
    cln->data = ctx;

    ctx->ecf = llcf->engine;
    ctx->chat = (kind != NGX_HTTP_LLM_GEN_COMPLETION);
    ctx->messages = (kind == NGX_HTTP_LLM_GEN_MESSAGES
                     || kind == NGX_HTTP_LLM_GEN_COUNT);
    ctx->tokenize = (kind == NGX_HTTP_LLM_GEN_TOKENIZE);
    ctx->detokenize = (kind == NGX_HTTP_LLM_GEN_DETOKENIZE);
    ctx->count_only = (kind == NGX_HTTP_LLM_GEN_COUNT || ctx->tokenize);
    ctx->output = ngx_http_llm_output(kind);
    ctx->thinking = -1;
    ctx->add_special = -1;
    if (kind == NGX_HTTP_LLM_GEN_RESPONSES) {
        ctx->responses = ngx_http_llm_responses_create(r->pool);
        if (ctx->responses == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    r->request_body_in_single_buf = 1;

    /* a status of nginx's (a malformed chunked body, say) goes out as
       JSON through the filters of ngx_http_llm_reply.c */
    rc = ngx_http_read_client_request_body(r, ngx_http_llm_body_handler);
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    if (rc == NGX_AGAIN) {
        ctx->read_body = r->read_event_handler;
        r->read_event_handler = ngx_http_llm_body_read;
    }

    return NGX_DONE;
}


/*
 * The rest of the body, read by nginx's handler, except a timeout:
 * client_body_timeout makes nginx close the connection without a word,
 * and a client should hear why (408).
 */
static void
ngx_http_llm_body_read(ngx_http_request_t *r)
{
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    if (!r->connection->read->timedout) {
        ctx->read_body(r);
        return;
    }

    r->connection->read->timedout = 0;
    r->read_event_handler = ngx_http_block_reading;
    r->keepalive = 0;
    r->lingering_close = 0;

    ngx_http_finalize_request(r, ngx_http_llm_send_status(r,
                                                NGX_HTTP_REQUEST_TIME_OUT));
}


u_char *
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

        /* a chunked body split over reads leaves empty buffers (pos NULL):
           memcpy's source must not be NULL even for 0 bytes */
        if (b->last != b->pos) {
            p = ngx_cpymem(p, b->pos, b->last - b->pos);
        }
    }

    *p = '\0';
    *len = p - body;
    return body;
}


static void
ngx_http_llm_body_handler(ngx_http_request_t *r)
{
    cJSON               *json;
    size_t               len;
    u_char              *body;
    ngx_int_t            rc;
    llm_api_error        err;
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    body = ngx_http_llm_body_bytes(r, &len);
    if (body == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    if (ctx->detokenize) {
        json = NULL;
        rc = ngx_http_llm_detokenize(ctx, body, len, &json);
        ngx_http_finalize_request(r, rc == NGX_OK
                                     ? ngx_http_llm_send_json(r, NGX_HTTP_OK,
                                                              json)
                                     : ngx_http_llm_answer(ctx, rc));
        return;
    }

    /* a Messages or /tokenize body is read as the request it stands for */
    rc = ctx->messages ? ngx_http_llm_messages_body(ctx, &body, &len, &err)
         : ctx->tokenize ? ngx_http_llm_tokenize_body(ctx, &body, &len, &err)
         : NGX_OK;

    if (rc == NGX_DECLINED) {
        rc = ngx_http_llm_refuse_api(ctx, &err);

    } else if (rc == NGX_OK) {
        rc = ngx_http_llm_prepare(r, ctx, body, len);
    }

    if (rc == NGX_DONE) {
        /* count_tokens, /tokenize: the prompt is made, nothing generates */
        json = NULL;
        if (ctx->tokenize) {
            rc = ngx_http_llm_tokenize_reply(ctx, &json);
        } else {
            json = ngx_http_llm_messages_count(ctx);
            rc = json ? NGX_OK : NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        ngx_http_finalize_request(r, rc == NGX_OK
                                     ? ngx_http_llm_send_json(r, NGX_HTTP_OK,
                                                              json)
                                     : ngx_http_llm_answer(ctx, rc));
        return;
    }

    if (rc != NGX_OK) {
        ngx_http_finalize_request(r, ngx_http_llm_answer(ctx, rc));
        return;
    }

    ngx_http_finalize_request(r, ngx_http_llm_when_ready(r, ctx->peer,
                                                         ngx_http_llm_submit));
}


/* ---------------------------------------------------------------------- */
/* the request: validate, render, tokenize                                */

/* the special tokens are the template's own text; every other string of
   the context is the request's */
static const char *const  ngx_http_llm_trusted[] = {
    "bos_token", "eos_token", NULL
};


/*
 * The template's variables besides the conversation, later ones winning:
 * the thinking switch of Messages and Responses (enable_thinking), the
 * request's reasoning_effort (gpt-oss), its chat_template_kwargs. NULL:
 * out of memory.
 */
static cJSON *
ngx_http_llm_template_extra(ngx_http_llm_ctx_t *ctx)
{
    cJSON        *extra, *kw;
    const cJSON  *k;

    extra = cJSON_CreateObject();
    if (extra == NULL) {
        return NULL;
    }

    if (ctx->thinking >= 0
        && cJSON_AddBoolToObject(extra, "enable_thinking", ctx->thinking)
           == NULL)
    {
        goto failed;
    }

    if (ctx->req.reasoning_effort
        && cJSON_AddStringToObject(extra, "reasoning_effort",
                                   ctx->req.reasoning_effort)
           == NULL)
    {
        goto failed;
    }

    cJSON_ArrayForEach(k, ctx->req.template_kwargs) {
        kw = cJSON_Duplicate(k, 1);
        if (kw == NULL) {
            goto failed;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(extra, k->string);
        cJSON_AddItemToObject(extra, k->string, kw);
    }

    return extra;

failed:

    cJSON_Delete(extra);
    return NULL;
}


/*
 * Renders ecf's chat template for ctx's request as transformers'
 * apply_chat_template does. *spans (pool memory, *n_spans of them) are
 * the bytes of the text that came from the request, which the tokenizer
 * reads as plain text so a message cannot write a control token (open a
 * system turn, docs/jinja.md); none with llm_special_tokens_in_content.
 * NGX_DECLINED: the template refused the conversation (err says why);
 * NGX_ERROR: out of memory. The node and a routing front
 * (ngx_http_llm_prefix.c) both render with it, so both see the same ids.
 */
ngx_int_t
ngx_http_llm_render_template(ngx_pool_t *pool, ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_engine_conf_t *ecf, ngx_flag_t special_in_content,
    char **text, size_t *len, llm_span **spans, size_t *n_spans, char *err,
    size_t err_len)
{
    cJSON         *vars, *special, *msgs, *extra;
    size_t         i, n;
    const cJSON   *tools;
    ngx_int_t      rc;
    jinja_span    *js;
    jinja_limits   lim;

    *spans = NULL;
    *n_spans = 0;

    /* what transformers' apply_chat_template passes to the template */
    special = cJSON_CreateObject();
    if (special == NULL) {
        return NGX_ERROR;
    }
    cJSON_AddStringToObject(special, "bos_token",
                            ecf->bos_text.len ? (char *) ecf->bos_text.data
                                              : "");
    cJSON_AddStringToObject(special, "eos_token",
                            ecf->eos_text.len ? (char *) ecf->eos_text.data
                                              : "");

    /* tools and the tool turns as the template's format takes them */
    if (llm_tools_template_input(&ctx->req, ecf->tool_format, &msgs, &tools)
        != 0)
    {
        cJSON_Delete(special);
        return NGX_ERROR;
    }

    extra = ngx_http_llm_template_extra(ctx);
    if (extra == NULL) {
        cJSON_Delete(special);
        cJSON_Delete(msgs);
        return NGX_ERROR;
    }

    vars = jinja_chat_context(msgs, tools, !ctx->no_gen_prompt, special,
                              extra);
    cJSON_Delete(extra);
    cJSON_Delete(special);
    cJSON_Delete(msgs);
    if (vars == NULL) {
        return NGX_ERROR;
    }

    rc = NGX_OK;
    js = NULL;
    n = 0;
    lim = jinja_limits_default();

    if ((special_in_content
         ? jinja_render_ex(ecf->chat_template, vars, &lim, text, len, err,
                           err_len)
         : jinja_render_spans(ecf->chat_template, vars, ngx_http_llm_trusted,
                              &lim, text, len, &js, &n, err, err_len))
        != 0)
    {
        *text = NULL;
        rc = NGX_DECLINED;

    } else if (n > 0) {
        *spans = ngx_palloc(pool, n * sizeof(llm_span));
        if (*spans == NULL) {
            free(*text);
            *text = NULL;
            rc = NGX_ERROR;

        } else {
            for (i = 0; i < n; i++) {
                (*spans)[i].start = js[i].start;
                (*spans)[i].end = js[i].end;
            }
            *n_spans = n;
        }
    }

    free(js);
    cJSON_Delete(vars);
    return rc;
}


static ngx_int_t
ngx_http_llm_render_chat(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    char **text, size_t *len, llm_span **spans, size_t *n_spans)
{
    char                         err[512];
    ngx_int_t                    rc;
    ngx_http_llm_loc_conf_t     *llcf;
    ngx_http_llm_engine_conf_t  *ecf = ctx->ecf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    *spans = NULL;
    *n_spans = 0;

    if (ecf->chat_template == NULL) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "no_chat_template",
                                   "the model has no chat template: use "
                                   "/v1/completions or set "
                                   "chat_template in llm_engine");
    }

    rc = ngx_http_llm_render_template(r->pool, ctx, ecf,
                                      llcf->special_in_content, text, len,
                                      spans, n_spans, err, sizeof(err));
    if (rc == NGX_DECLINED) {
        /* raise_exception() in a template is the template rejecting the
           conversation (roles out of order, say): the client's fault */
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "invalid_messages",
                                   "chat template: %s", err);
    }

    return rc == NGX_OK ? NGX_OK : NGX_HTTP_INTERNAL_SERVER_ERROR;
}


static ngx_int_t
ngx_http_llm_tokenize(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    const char *text, size_t len, int add_special, const llm_span *spans,
    size_t n_spans)
{
    int          n, cap;
    int32_t     *ids;
    llm_tokenizer  *t = ctx->ecf->tokenizer;

    cap = (int) ngx_min(len + 8, LLM_RING_MAX_PROMPT + 1);

    ids = ngx_palloc(r->pool, cap * sizeof(int32_t));
    if (ids == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* chat templates write their special tokens as text: parse them, but
       not in the spans that came from the request */
    n = llm_tokenize_spans(t, text, len, add_special, 1, spans, n_spans, ids,
                           cap);
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


/*
 * tool_choice "required" or a named function: the grammar that lets the
 * model write only calls (api/reply.h), in the output constraint the
 * engine enforces.
 */
static ngx_int_t
ngx_http_llm_tool_choice(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    int                       max_calls;
    size_t                    len;
    llm_api_error             err;
    llm_api_request          *req = &ctx->req;
    ngx_http_llm_loc_conf_t  *llcf;

    if (req->tool_choice != LLM_TOOL_CHOICE_REQUIRED
        && req->tool_choice != LLM_TOOL_CHOICE_NAMED)
    {
        return NGX_OK;
    }

    ngx_memzero(&err, sizeof(err));
    err.status = NGX_HTTP_BAD_REQUEST;
    ngx_cpystrn((u_char *) err.param, (u_char *) "tool_choice",
                sizeof(err.param));

    if (req->constraint_kind != LLM_CONSTRAINT_NONE) {
        ngx_cpystrn((u_char *) err.code, (u_char *) "invalid_value",
                    sizeof(err.code));
        ngx_cpystrn((u_char *) err.message, (u_char *)
                    "response_format and tool_choice 'required' or a named "
                    "function cannot be used together.", sizeof(err.message));
        return ngx_http_llm_refuse_api(ctx, &err);
    }

    /* a named function or parallel_tool_calls false: one call, then the
       end; else up to llm_max_tool_calls */
    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    max_calls = (req->tool_choice == LLM_TOOL_CHOICE_NAMED
                 || !req->parallel_tool_calls)
                ? 1 : (int) llcf->max_tool_calls;

    req->constraint = llm_tool_grammar(ctx->ecf->tool_format, req->tools,
                                       req->tool_name, max_calls,
                                       ctx->ecf->tokenizer, &len);
    if (req->constraint == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    req->constraint_len = len;
    req->constraint_kind = LLM_CONSTRAINT_GRAMMAR;

    if (len > LLM_CONSTRAINT_MAX_BYTES) {
        ngx_cpystrn((u_char *) err.param, (u_char *) "tools",
                    sizeof(err.param));
        ngx_cpystrn((u_char *) err.code, (u_char *) "invalid_value",
                    sizeof(err.code));
        ngx_snprintf((u_char *) err.message, sizeof(err.message) - 1,
                     "the tools' schemas make a grammar of %uz bytes, more "
                     "than the %d the engine takes.%Z", len,
                     LLM_CONSTRAINT_MAX_BYTES);
        return ngx_http_llm_refuse_api(ctx, &err);
    }

    return NGX_OK;
}


/* the body as a request of ours, for the model this location serves */
static ngx_int_t
ngx_http_llm_parse(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    u_char *body, size_t len)
{
    ngx_int_t                    rc;
    llm_api_error                err;
    llm_api_limits               lim;
    ngx_http_llm_loc_conf_t     *llcf;
    ngx_http_llm_engine_conf_t  *ecf = ctx->ecf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    llm_api_limits_default(&lim);
    llm_api_limits_model(&lim, ecf->tokenizer);
    lim.max_body = llcf->max_body_size;
    lim.max_n = (int) llcf->max_n;

    if (ctx->responses) {
        /* a Responses request becomes a chat body (api/responses.h) */
        rc = ngx_http_llm_responses_parse(r, ctx, &lim, &body, &len);
        if (rc != NGX_OK) {
            return rc;
        }
    }

    if (llm_api_parse(&ctx->req, (char *) body, len,
                      ctx->chat ? LLM_API_CHAT : LLM_API_COMPLETION, &lim,
                      &err)
        != 0)
    {
        if (ctx->responses) {
            llm_responses_param(err.param, sizeof(err.param));
        }
        return ngx_http_llm_refuse_api(ctx, &err);
    }
    ctx->req_parsed = 1;

    if (ngx_strlen(ctx->req.model) != ecf->served_model_name.len
        || ngx_strncmp(ctx->req.model, ecf->served_model_name.data,
                       ecf->served_model_name.len) != 0)
    {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_NOT_FOUND,
                                   "model_not_found",
                                   "The model `%s` does not exist",
                                   ctx->req.model);
    }

    if (ecf->tokenizer == NULL) {
        /* the file's fault is for the operator's log and /healthz */
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "llm: model \"%V\" unusable: %s", &ecf->model,
                      ecf->load_error ? ecf->load_error : "no tokenizer");
        return ngx_http_llm_refuse(ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                                   "engine_unavailable",
                                   "the model is unusable, see the "
                                   "server's error log");
    }

    ngx_http_llm_apply_defaults(llcf, &ctx->req);
    ctx->stream = ctx->req.stream;

    return ngx_http_llm_tool_choice(r, ctx);
}


/*
 * The reply's splitter, for a chat request with tools (not "none") or
 * under llm_reasoning: the format is the template's; a prompt that ends
 * in <think> (DeepSeek-R1's) makes the reply start inside the thinking.
 */
static void
ngx_http_llm_split_init(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    const char *prompt, size_t len)
{
    int                       format, in_think;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    format = (ctx->req.tools && ctx->req.tool_choice != LLM_TOOL_CHOICE_NONE)
             ? (int) ctx->ecf->tool_format : LLM_TOOL_FMT_NONE;

    /* Harmony's channels are markers in every reply: always split */
    if (ctx->ecf->tool_format == LLM_TOOL_FMT_HARMONY) {
        format = LLM_TOOL_FMT_HARMONY;
    }

    if (format == LLM_TOOL_FMT_NONE && !llcf->reasoning) {
        return;
    }

    in_think = llcf->reasoning && llm_reply_prompt_in_think(prompt, len);

    /* each choice's splitter is made by ngx_http_llm_output_init() */
    ctx->split = 1;
    ctx->out_format = format;
    ctx->out_in_think = in_think;

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm: reply split: tools %s, reasoning %i, in think %d",
                   llm_tool_format_name(format), llcf->reasoning, in_think);
}


/* fill in the middle: <pre> prompt <suf> suffix <mid>, for a model that
   has the tokens (found at load, tokenizer/fim.h) */
static ngx_int_t
ngx_http_llm_fim(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    int                          n, cap;
    int32_t                     *ids;
    ngx_http_llm_engine_conf_t  *ecf = ctx->ecf;

    if (ecf->fim.pre < 0) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "unsupported_value",
                                   "suffix: the model `%V` has no "
                                   "fill-in-the-middle tokens",
                                   &ecf->served_model_name);
    }

    if (ctx->req.prompt == NULL) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "unsupported_value",
                                   "suffix: the prompt must be text for "
                                   "fill in the middle");
    }

    cap = (int) ngx_min(ctx->req.prompt_len + ctx->req.suffix_len + 8,
                        LLM_RING_MAX_PROMPT + 1);

    ids = ngx_palloc(r->pool, cap * sizeof(int32_t));
    if (ids == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    n = llm_fim_prompt(ecf->tokenizer, &ecf->fim, ctx->req.prompt,
                       ctx->req.prompt_len, ctx->req.suffix,
                       ctx->req.suffix_len, ids, cap);
    if (n < 0) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->prompt = ids;
    ctx->n_prompt = (uint32_t) n;   /* may exceed cap: checked by caller */

    return NGX_OK;
}


/* the prompt as token ids: rendered and tokenized, or given as ids */
static ngx_int_t
ngx_http_llm_prompt(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    char       *text;
    size_t      len, n_spans;
    llm_span   *spans;
    ngx_int_t   rc;

    if (!ctx->chat && ctx->req.suffix) {
        return ngx_http_llm_fim(r, ctx);
    }

    if (ctx->req.prompt_ids && !ctx->chat) {
        ctx->prompt = ctx->req.prompt_ids;
        ctx->n_prompt = ctx->req.n_prompt_ids;
        return NGX_OK;
    }

    /* /tokenize's add_special_tokens, else the endpoint's rule */
    if (!ctx->chat) {
        return ngx_http_llm_tokenize(r, ctx, ctx->req.prompt,
                                     ctx->req.prompt_len,
                                     ctx->add_special != 0, NULL, 0);
    }

    rc = ngx_http_llm_render_chat(r, ctx, &text, &len, &spans, &n_spans);
    if (rc != NGX_OK) {
        return rc;
    }

    ngx_http_llm_split_init(r, ctx, text, len);

    /* vLLM's rule: the template wrote the special tokens itself */
    rc = ngx_http_llm_tokenize(r, ctx, text, len, ctx->add_special == 1,
                               spans, n_spans);
    free(text);

    return rc;
}


/*
 * Admission (docs/scheduler.md): a request that can never be served is a 400 at
 * once, not a failure in the engine; then its token budget.
 */
static ngx_int_t
ngx_http_llm_admit(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    ngx_uint_t                   room;
    ngx_http_llm_loc_conf_t     *llcf;
    ngx_http_llm_engine_conf_t  *ecf = ctx->ecf;

    if (ctx->n_prompt == 0) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "empty_prompt",
                                   "the prompt is empty");
    }

    if (ctx->req.speculative == 1 && !ecf->speculative_ngram) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "speculative",
                                   "speculative decoding is not enabled "
                                   "for this model (speculative_ngram "
                                   "in its llm_engine block)");
    }

    if (ctx->n_prompt >= ecf->context_length) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "context_length_exceeded",
                                   "This model's maximum context length "
                                   "is %ui tokens, but the prompt has "
                                   "%uD tokens",
                                   ecf->context_length, ctx->n_prompt);
    }

    room = ecf->context_length - ctx->n_prompt;

    if (ctx->req.max_tokens > 0 && (ngx_uint_t) ctx->req.max_tokens > room) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "context_length_exceeded",
                                   "This model's maximum context length "
                                   "is %ui tokens. However, you "
                                   "requested %uD tokens (%uD in the "
                                   "prompt, %d for the completion)",
                                   ecf->context_length,
                                   ctx->n_prompt + ctx->req.max_tokens,
                                   ctx->n_prompt, ctx->req.max_tokens);
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    ctx->max_tokens = ctx->req.max_tokens > 0 ? (uint32_t) ctx->req.max_tokens
                                              : (uint32_t) room;
    if (llcf->max_tokens && ctx->max_tokens > llcf->max_tokens) {
        ctx->max_tokens = llcf->max_tokens;
    }

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm: admitted: %uD prompt tokens, up to %uD more, "
                   "stream:%ui", ctx->n_prompt, ctx->max_tokens,
                   (ngx_uint_t) ctx->stream);

    return NGX_OK;
}


/*
 * The choices (n in the request), and the text side of each: stop strings,
 * an incremental detokenizer, the splitter of reasoning and tool calls.
 */
static ngx_int_t
ngx_http_llm_output_init(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    u_char *body, size_t len)
{
    ngx_uint_t                i;
    ngx_http_llm_choice_t    *c;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    if (ngx_http_llm_choices_create(ctx, ngx_max(ctx->req.n, 1)) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    for (i = 0; i < ctx->n_choices; i++) {
        c = &ctx->choices[i];

        if (llm_stop_init(&c->stop, ctx->req.stop, ctx->req.n_stop,
                          (char *) body, len)
            != 0)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        c->stop_inited = 1;

        /* Harmony's parser reads the markers, which are special tokens */
        llm_detok_init(&c->detok, ctx->out_format == LLM_TOOL_FMT_HARMONY
                                  ? 0 : LLM_DETOK_SKIP_SPECIAL);

        if (ctx->split) {
            llm_reply_init(&c->out, ctx->out_format, llcf->reasoning,
                         ctx->out_in_think, ctx->req.parallel_tool_calls,
                         ctx->req.tool_choice == LLM_TOOL_CHOICE_NONE
                         ? NULL : ctx->req.tools);
            /* the tool grammar: a reply that does not parse was cut */
            c->out.constrained =
                ctx->req.tool_choice == LLM_TOOL_CHOICE_REQUIRED
                || ctx->req.tool_choice == LLM_TOOL_CHOICE_NAMED;
            c->out_active = 1;
        }
    }

    return NGX_OK;
}


/*
 * The steps from body to a prompt the engine can take. Each returns NGX_OK
 * or what ngx_http_llm_answer() makes the reply of: a status (described
 * by ngx_http_llm_refuse() when the step refused the request) or
 * NGX_ERROR. None sends anything.
 */
static ngx_int_t
ngx_http_llm_prepare(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    u_char *body, size_t len)
{
    ngx_int_t  rc;

    rc = ngx_http_llm_parse(r, ctx, body, len);
    if (rc != NGX_OK) {
        return rc;
    }

    rc = ngx_http_llm_prompt(r, ctx);
    if (rc != NGX_OK) {
        return rc;
    }

    if (ctx->count_only) {
        return NGX_DONE;            /* counted: nothing to generate */
    }

    rc = ngx_http_llm_admit(r, ctx);
    if (rc != NGX_OK) {
        return rc;
    }

    rc = ngx_http_llm_priority(r, ctx);
    if (rc != NGX_OK) {
        return rc;
    }

    /* last: the tokens it takes go back if a later step refuses */
    rc = ngx_http_llm_quota_admit(r, ctx);
    if (rc != NGX_OK) {
        return rc;
    }

    return ngx_http_llm_output_init(r, ctx, body, len);
}


/* the parser's and the stop matchers' memory goes with the request's pool */
static void
ngx_http_llm_generation_free(void *data)
{
    ngx_uint_t              i;
    ngx_http_llm_ctx_t     *ctx = data;
    ngx_http_llm_choice_t  *c;

    for (i = 0; i < ctx->n_choices; i++) {
        c = &ctx->choices[i];

        if (c->stop_inited) {
            llm_stop_free(&c->stop);
            c->stop_inited = 0;
        }

        if (c->out_active) {
            llm_reply_free(&c->out);
            c->out_active = 0;
        }
    }

    if (ctx->req_parsed) {
        llm_api_request_free(&ctx->req);
        ctx->req_parsed = 0;
    }
}


/* ---------------------------------------------------------------------- */
/* into the ring                                                          */

/* llm_json_whitespace auto: what a request's constraint is written in */
static uint32_t
ngx_http_llm_json_ws_auto(llm_api_request *req)
{
    if (req->constraint_kind == LLM_CONSTRAINT_JSON_OBJECT
        || req->tool_choice == LLM_TOOL_CHOICE_REQUIRED
        || req->tool_choice == LLM_TOOL_CHOICE_NAMED)
    {
        return LLM_JSON_WS_FLEXIBLE;
    }

    return LLM_JSON_WS_COMPACT;
}


static void
ngx_http_llm_fill_slot(ngx_http_llm_ctx_t *ctx, llm_slot *sl)
{
    int                       i;
    llm_sampling             *p = &sl->sampling;
    llm_api_request          *req = &ctx->req;
    llm_sampling_params      *s = &req->sampling;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(ctx->request, ngx_http_llm_module);

    llm_sampling_to_ring(s, p);
    p->max_tokens = ctx->max_tokens;

    llm_api_stop_ids_to_ring(req, ctx->ecf->tokenizer, p);

    for (i = 0; i < req->n_logit_bias && i < LLM_RING_MAX_BIAS; i++) {
        p->bias_ids[i] = req->logit_bias[i].token;
        p->bias[i] = req->logit_bias[i].bias;
    }
    p->n_bias = i;

    sl->priority = ctx->priority;
    sl->fair_key = ctx->fair_key;
    sl->speculative = req->speculative == 0;    /* 1: off for it */
    sl->n_prompt = ctx->n_prompt;
    ngx_memcpy(sl->prompt, ctx->prompt, ctx->n_prompt * sizeof(int32_t));

    /* the constraint's text follows the ids (checked to fit by submit) */
    sl->constraint_kind = req->constraint_kind;
    sl->constraint_len = (uint32_t) req->constraint_len;
    /* auto: compact for a response_format schema or grammar; a free
       json_object and tool calls stay flexible (measured, docs/api.md
       "JSON whitespace") */
    sl->json_ws = llcf->json_ws != NGX_HTTP_LLM_JSON_WS_AUTO
                  ? (uint32_t) llcf->json_ws
                  : ngx_http_llm_json_ws_auto(req);
    sl->strict = req->constraint_strict;
    sl->relaxed[0] = '\0';     /* the engine writes it before a token */
    if (req->constraint_len) {
        ngx_memcpy(llm_slot_constraint(sl), req->constraint,
                   req->constraint_len);
    }
}


/* the slot carries the prompt's ids and the constraint's text together */
static ngx_int_t
ngx_http_llm_constraint_too_big(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx)
{
    llm_api_error  err;

    ngx_memzero(&err, sizeof(err));
    err.status = NGX_HTTP_BAD_REQUEST;
    ngx_cpystrn((u_char *) err.param, (u_char *) "response_format",
                sizeof(err.param));
    ngx_cpystrn((u_char *) err.code, (u_char *) "string_above_max_length",
                sizeof(err.code));
    ngx_snprintf((u_char *) err.message, sizeof(err.message) - 1,
                 "Invalid 'response_format': its %uz bytes and the "
                 "prompt's %uD tokens do not fit in %uz bytes of a request "
                 "(4 bytes a token)%Z", ctx->req.constraint_len,
                 ctx->n_prompt, sizeof(((llm_slot *) NULL)->prompt));

    return ngx_http_llm_refuse_api(ctx, &err);
}


/* a CHOICE slot for each further choice, listed in choice 0's (the
   request's) */
static ngx_int_t
ngx_http_llm_claim_choices(ngx_http_llm_ctx_t *ctx)
{
    ngx_int_t               rc;
    ngx_uint_t              i;
    llm_slot               *sl;
    ngx_http_llm_choice_t  *c;

    sl = ctx->choices[0].slot.slot;
    sl->n_choices = (uint32_t) ctx->n_choices;

    for (i = 1; i < ctx->n_choices; i++) {
        c = &ctx->choices[i];

        rc = ngx_http_llm_peer_claim(ctx->peer, &c->slot, LLM_KIND_CHOICE);
        if (rc != NGX_OK) {
            return rc;
        }

        c->slot.slot->n_choices = 0;
        sl->choice_slots[i - 1] = c->slot.index;
    }

    return NGX_OK;
}


/*
 * The engine is ready: the request goes into the ring, or is refused
 * (too long for the slot, the queue full, the engine gone); answered as
 * the steps before it are.
 */
static ngx_int_t
ngx_http_llm_submit(ngx_http_request_t *r)
{
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    return ngx_http_llm_answer(ctx, ngx_http_llm_to_ring(r, ctx));
}


/* NGX_DONE: submitted, the stream has the request */
static ngx_int_t
ngx_http_llm_to_ring(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    ngx_int_t             rc;
    ngx_uint_t            i;
    llm_slot             *sl;
    ngx_table_elt_t      *h;

    if (ctx->n_prompt > ngx_http_llm_peer_ring(ctx->peer)->max_prompt) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "context_length_exceeded",
                                   "the prompt has %uD tokens, more "
                                   "than the engine takes",
                                   ctx->n_prompt);
    }

    if (ctx->n_prompt * sizeof(int32_t) + ctx->req.constraint_len
        > sizeof(((llm_slot *) NULL)->prompt))
    {
        return ngx_http_llm_constraint_too_big(r, ctx);
    }

    /* choice 0's slot is the request's */
    rc = ngx_http_llm_peer_claim(ctx->peer, &ctx->choices[0].slot,
                                 LLM_KIND_GENERATE);

    if (rc == NGX_BUSY) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                   "queue_full",
                                   "too many requests in flight, "
                                   "retry later");
    }
    if (rc != NGX_OK) {
        return ngx_http_llm_refuse_unavailable(ctx);
    }

    rc = ngx_http_llm_claim_choices(ctx);
    if (rc != NGX_OK) {
        ngx_http_llm_release_choices(ctx);
        if (rc == NGX_BUSY) {
            return ngx_http_llm_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                       "queue_full",
                                       "too many requests in flight "
                                       "for %ui choices, retry later",
                                       ctx->n_choices);
        }
        return ngx_http_llm_refuse_unavailable(ctx);
    }

    sl = ctx->choices[0].slot.slot;

    ngx_http_llm_fill_slot(ctx, sl);
    ctx->created = ngx_time();
    ctx->t_submit_ns = ngx_http_llm_now_ns();

    ctx->id.data = ngx_pnalloc(r->pool, 48);
    if (ctx->id.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx->id.len = ngx_sprintf(ctx->id.data, "%s%016xL%08xD",
                              ctx->messages ? "msg_"
                              : ctx->chat ? "chatcmpl-" : "cmpl-",
                              sl->req_seq
                              ^ ((uint64_t) ngx_pid << 40),
                              (uint32_t) ngx_random())
                  - ctx->id.data;

    if (ctx->responses && ngx_http_llm_responses_new_id(ctx) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* the id clients log (the SDKs read it as the request id) */
    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    h->hash = 1;
    ngx_str_set(&h->key, "X-Request-Id");
    h->value = ctx->id;

    /* the choices' slots first: the engine takes them with choice 0's */
    for (i = 1; i <= ctx->n_choices; i++) {
        if (ngx_http_llm_peer_submit(&ctx->choices[i % ctx->n_choices].slot)
            != NGX_OK)
        {
            return ngx_http_llm_refuse_unavailable(ctx);
        }
    }

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm: ring slot %uD submitted as %V, %ui choices",
                   ctx->choices[0].slot.index, &ctx->id, ctx->n_choices);

    ngx_http_llm_stream_start(r, ctx);

    return NGX_DONE;
}
