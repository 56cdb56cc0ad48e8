/*
 * $llm_prefix_hash: a hash of the first blocks of a request's prompt, for
 * a front nginx that routes with `hash $llm_prefix_hash consistent` to
 * the node whose prefix cache holds them (docs/operations.md, "Routing").
 *
 * An upstream's hash is evaluated when proxy_pass picks a peer, after the
 * content handler began: too late to read the body. So in a location with
 * llm_prefix_hash the body is read in the precontent phase, as the mirror
 * module does, and the phases resume when it is in; the prompt is rendered
 * and tokenized as ngx_http_llm_generate.c does it on the node, and the
 * hash kept for the variable. The body stays in r->request_body, in
 * memory or its temp file, for proxy_pass to send. The front answers
 * nothing itself: a body it cannot read as a request leaves the variable
 * empty, the upstream's hash falls back to round robin, and the node
 * answers with the error.
 *
 * In an llm_api location the variable hashes the prompt the engine was
 * given, the same way: a node's access log shows that its front and it
 * agree.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


/* the engine's prefix cache registers whole blocks of this many tokens
   (common/defaults.h, docs/scheduler.md) */
#define NGX_HTTP_LLM_PREFIX_BLOCK  LLM_KV_BLOCK_SIZE_DEFAULT


static ngx_int_t ngx_http_llm_prefix_handler(ngx_http_request_t *r);
static void ngx_http_llm_prefix_body(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_prefix_compute(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx, const char **why);
static ngx_int_t ngx_http_llm_prefix_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);


/* llm_prefix_hash NAME: an llm_tokenizer's or an llm_engine's name */
char *
ngx_http_llm_prefix_conf(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_loc_conf_t *llcf = conf;

    ngx_str_t                    *value;
    ngx_uint_t                    i, k;
    ngx_array_t                  *a[2];
    ngx_http_llm_main_conf_t     *lmcf;
    ngx_http_llm_engine_conf_t  **ep;

    if (llcf->prefix != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    value = cf->args->elts;
    lmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);

    a[0] = &lmcf->tokenizers;
    a[1] = &lmcf->engines;

    for (k = 0; k < 2; k++) {
        ep = a[k]->elts;
        for (i = 0; i < a[k]->nelts; i++) {
            if (ep[i]->name.len == value[1].len
                && ngx_strncmp(ep[i]->name.data, value[1].data,
                               value[1].len)
                   == 0)
            {
                llcf->prefix = ep[i];
                return NGX_CONF_OK;
            }
        }
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "unknown llm_tokenizer or llm_engine \"%V\" (define "
                       "it in http{} before its locations)", &value[1]);
    return NGX_CONF_ERROR;
}


/* llm_prefix_hash_tokens N: whole blocks, what the engine can share */
char *
ngx_http_llm_prefix_tokens_check(ngx_conf_t *cf, void *post, void *data)
{
    ngx_uint_t *n = data;

    ngx_str_t  *value;

    if (*n < NGX_HTTP_LLM_PREFIX_BLOCK || *n % NGX_HTTP_LLM_PREFIX_BLOCK
        || *n > LLM_RING_MAX_PROMPT)
    {
        value = cf->args->elts;
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid llm_prefix_hash_tokens \"%V\": a "
                           "multiple of %d (the engine's KV block) up to %d",
                           &value[1], NGX_HTTP_LLM_PREFIX_BLOCK,
                           LLM_RING_MAX_PROMPT);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


ngx_int_t
ngx_http_llm_prefix_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    /* after access: a client that auth refuses costs no tokenizing */
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_PRECONTENT_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_llm_prefix_handler;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_prefix_handler(ngx_http_request_t *r)
{
    ngx_int_t                 rc;
    ngx_http_llm_ctx_t       *ctx;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    /* llm_api reads the body itself and hashes its own prompt */
    if (llcf->prefix == NULL || llcf->role != NGX_HTTP_LLM_ROLE_NONE
        || r != r->main || r->method != NGX_HTTP_POST)
    {
        return NGX_DECLINED;
    }

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);
    if (ctx) {
        /* NGX_DONE while the body is read, then the next handler */
        return ctx->prefix_state;
    }

    /* no ecf: the other $llm_* variables stay empty in a front */
    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ctx->request = r;
    ctx->prefix_state = NGX_DONE;
    ngx_http_set_ctx(r, ctx, ngx_http_llm_module);

    rc = ngx_http_read_client_request_body(r, ngx_http_llm_prefix_body);
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    /* the count read_client_request_body took is the body's to drop */
    ngx_http_finalize_request(r, NGX_DONE);
    return NGX_DONE;
}


static void
ngx_http_llm_prefix_body(ngx_http_request_t *r)
{
    ngx_int_t            rc;
    const char          *why;
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    why = NULL;
    rc = ngx_http_llm_prefix_compute(r, ctx, &why);

    if (rc == NGX_ERROR) {
        ctx->prefix_state = NGX_HTTP_INTERNAL_SERVER_ERROR;

    } else {
        ctx->prefix_state = NGX_DECLINED;

        if (rc == NGX_DECLINED) {
            /* not the front's to refuse: the node answers the client */
            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                          "llm: no prefix hash: %s", why);
        }
    }

    /* the body stays in r->request_body for proxy_pass to send */
    r->write_event_handler = ngx_http_core_run_phases;
    ngx_http_core_run_phases(r);
}


/* ---------------------------------------------------------------------- */
/* the prompt as the node makes it                                        */

/* the body's bytes, from memory or the temp file; NULL: too big, or an
   error (logged) */
static u_char *
ngx_http_llm_prefix_bytes(ngx_http_request_t *r, size_t max, size_t *len,
    const char **why)
{
    u_char       *p, *body;
    size_t        n;
    ssize_t       got;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    n = 0;
    for (cl = r->request_body ? r->request_body->bufs : NULL; cl;
         cl = cl->next)
    {
        b = cl->buf;
        n += b->in_file ? (size_t) (b->file_last - b->file_pos)
                        : (size_t) (b->last - b->pos);
    }

    if (n > max) {
        *why = "the body is over llm_max_body_size";
        return NULL;
    }

    body = ngx_pnalloc(r->pool, n + 1);
    if (body == NULL) {
        *why = "out of memory";
        return NULL;
    }

    p = body;
    for (cl = r->request_body ? r->request_body->bufs : NULL; cl;
         cl = cl->next)
    {
        b = cl->buf;

        if (b->in_file) {
            /* over client_body_buffer_size: a local file, read once */
            got = ngx_read_file(b->file, p, b->file_last - b->file_pos,
                                b->file_pos);
            if (got != b->file_last - b->file_pos) {
                *why = "the body's temp file could not be read";
                return NULL;
            }
            p += got;
            continue;
        }

        if (b->last != b->pos) {
            p = ngx_cpymem(p, b->pos, b->last - b->pos);
        }
    }

    *p = '\0';
    *len = p - body;
    return body;
}


/* the prompt's ids into ctx->prompt, as ngx_http_llm_prompt() makes them */
static ngx_int_t
ngx_http_llm_prefix_prompt(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_engine_conf_t *ecf, ngx_http_llm_loc_conf_t *llcf,
    const char **why)
{
    int         n, cap, add_special;
    char        err[256];
    char       *text;
    size_t      len, n_spans;
    int32_t    *ids;
    llm_span   *spans;
    ngx_int_t   rc;

    if (ctx->req.prompt_ids && !ctx->chat) {
        ctx->prompt = ctx->req.prompt_ids;
        ctx->n_prompt = ctx->req.n_prompt_ids;
        return NGX_OK;
    }

    spans = NULL;
    n_spans = 0;

    if (ctx->chat) {
        if (ecf->chat_template == NULL) {
            *why = "the model has no chat template";
            return NGX_DECLINED;
        }

        rc = ngx_http_llm_render_template(r->pool, ctx, ecf,
                                          llcf->special_in_content, &text,
                                          &len, &spans, &n_spans, err,
                                          sizeof(err));
        if (rc != NGX_OK) {
            *why = "the chat template refused the messages";
            return rc;
        }
        add_special = 0;

    } else {
        text = ctx->req.prompt;
        len = ctx->req.prompt_len;
        add_special = 1;
    }

    /* only the first ids count: the tokenizer counts the rest, as
       snprintf does, without a buffer for them */
    cap = (int) llcf->prefix_tokens;

    ids = ngx_palloc(r->pool, cap * sizeof(int32_t));
    if (ids == NULL) {
        rc = NGX_ERROR;

    } else {
        n = llm_tokenize_spans(ecf->tokenizer, text, len, add_special, 1,
                               spans, n_spans, ids, cap);
        rc = n < 0 ? NGX_ERROR : NGX_OK;
        ctx->prompt = ids;
        ctx->n_prompt = n < 0 ? 0 : (uint32_t) ngx_min(n, cap);
    }

    if (ctx->chat) {
        free(text);
    }

    return rc;
}


/*
 * The first min(N, n) ids rounded down to whole blocks, as 16 hex digits
 * of FNV-1a. A prompt under one block shares no block with anything: its
 * ids hash whole, which still sends one text to one node.
 */
static ngx_int_t
ngx_http_llm_prefix_hash(ngx_http_request_t *r, const int32_t *ids,
    uint32_t n, ngx_uint_t tokens, ngx_str_t *out)
{
    size_t          i, len;
    uint64_t        h;
    const u_char   *p;

    len = ngx_min((size_t) n, tokens);
    if (len >= NGX_HTTP_LLM_PREFIX_BLOCK) {
        len -= len % NGX_HTTP_LLM_PREFIX_BLOCK;
    }

    h = 0xcbf29ce484222325ULL;
    p = (const u_char *) ids;

    for (i = 0; i < len * sizeof(int32_t); i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }

    out->data = ngx_pnalloc(r->pool, 16);
    if (out->data == NULL) {
        return NGX_ERROR;
    }
    out->len = ngx_sprintf(out->data, "%016xL", h) - out->data;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm: prefix hash over %uz tokens: %V", len, out);

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_prefix_compute(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    const char **why)
{
    u_char                      *body;
    size_t                       len;
    ngx_int_t                    rc;
    llm_api_error                err;
    llm_api_limits               lim;
    ngx_http_llm_loc_conf_t     *llcf;
    ngx_http_llm_engine_conf_t  *ecf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    ecf = llcf->prefix;

    if (ecf->tokenizer == NULL) {
        *why = "the model is unusable";
        return NGX_DECLINED;
    }

    body = ngx_http_llm_prefix_bytes(r, llcf->max_body_size, &len, why);
    if (body == NULL) {
        return NGX_DECLINED;
    }

    /* as the node's llm_api routes it (ngx_http_llm_api.c) */
    ctx->chat = r->uri.len >= sizeof("/chat/completions") - 1
                && ngx_strncmp(r->uri.data + r->uri.len
                               - (sizeof("/chat/completions") - 1),
                               "/chat/completions",
                               sizeof("/chat/completions") - 1)
                   == 0;

    llm_api_limits_default(&lim);
    lim.max_body = llcf->max_body_size;
    lim.max_prompt_ids = LLM_RING_MAX_PROMPT;
    lim.max_stop_ids = LLM_RING_MAX_STOP_IDS - 4;
    lim.max_logit_bias = LLM_RING_MAX_BIAS;
    lim.vocab_size = llm_tokenizer_n_vocab(ecf->tokenizer);

    if (llm_api_parse(&ctx->req, (char *) body, len,
                      ctx->chat ? LLM_API_CHAT : LLM_API_COMPLETION, &lim,
                      &err)
        != 0)
    {
        *why = "the body is not a valid request";
        return NGX_DECLINED;
    }

    rc = ngx_http_llm_prefix_prompt(r, ctx, ecf, llcf, why);
    if (rc == NGX_OK && ctx->n_prompt == 0) {
        *why = "the prompt is empty";
        rc = NGX_DECLINED;
    }

    if (rc == NGX_OK) {
        rc = ngx_http_llm_prefix_hash(r, ctx->prompt, ctx->n_prompt,
                                      llcf->prefix_tokens, &ctx->prefix_hash);
    }

    /* the ids belong to the parsed request (prompt_ids) or the pool */
    ctx->prompt = NULL;
    ctx->n_prompt = 0;
    llm_api_request_free(&ctx->req);

    return rc;
}


/* ---------------------------------------------------------------------- */
/* $llm_prefix_hash                                                       */

static ngx_int_t
ngx_http_llm_prefix_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_str_t                 h;
    ngx_http_llm_ctx_t       *ctx;
    ngx_http_llm_loc_conf_t  *llcf;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    if (ctx == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    h = ctx->prefix_hash;

    /* a node: the prompt its engine was given */
    if (h.len == 0 && ctx->ecf && ctx->prompt && ctx->n_prompt) {
        llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

        if (ngx_http_llm_prefix_hash(r, ctx->prompt, ctx->n_prompt,
                                     llcf->prefix_tokens, &h)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    if (h.len == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    v->data = h.data;
    v->len = h.len;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    return NGX_OK;
}


ngx_int_t
ngx_http_llm_prefix_add_variables(ngx_conf_t *cf)
{
    ngx_str_t             name = ngx_string("llm_prefix_hash");
    ngx_http_variable_t  *var;

    var = ngx_http_add_variable(cf, &name, NGX_HTTP_VAR_NOCACHEABLE);
    if (var == NULL) {
        return NGX_ERROR;
    }

    var->get_handler = ngx_http_llm_prefix_variable;

    return NGX_OK;
}
