/*
 * The pooling requests of an llm_api location (docs/api.md, issue 32):
 * OpenAI's POST /v1/embeddings (an embedding engine) and POST /v1/rerank
 * (a score engine). Each kind is a table of three steps,
 * ngx_http_llm_pooled_t: read the body (api/embeddings.c,
 * api/rerank.c), turn the inputs into ids once the engine's facts are
 * known, write the reply. The rest is shared: each input (a text, or a
 * query-document pair) is one EMBED ring slot (docs/protocol.md): up to
 * NGX_HTTP_LLM_EMBED_FLIGHT of them in the ring at once, the next one
 * submitted as one comes back, so a long input list does not take the
 * whole ring. The reply is built once every vector (or score) is in; the
 * first refusal ends the request (its other slots cancelled).
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"
#include "api/embeddings.h"
#include "api/rerank.h"


#define NGX_HTTP_LLM_EMBED_FLIGHT  16     /* slots one request holds */

typedef struct ngx_http_llm_embed_s  ngx_http_llm_embed_t;

/* one kind of pooling request */
typedef struct {
    ngx_str_t    name;              /* "embeddings", "rerank": logs */
    const char  *input;             /* the field an input is named by */
    /* the body (len bytes) into the request; an HTTP status to answer,
       ctx->error set, or NGX_OK */
    ngx_int_t  (*parse)(ngx_http_llm_embed_t *e, u_char *body, size_t len);
    /* the engine is ready: does it serve this kind; the inputs' ids,
       e->n_inputs, e->dims (floats per answer); NGX_OK or a status */
    ngx_int_t  (*start)(ngx_http_llm_embed_t *e, llm_ring_header *ring);
    cJSON     *(*reply)(ngx_http_llm_embed_t *e);
} ngx_http_llm_pooled_t;

typedef struct {
    ngx_http_llm_slot_t     slot;
    ngx_uint_t              input;        /* the input it computes */
    ngx_uint_t              busy;         /* 1: in the ring */
    ngx_http_llm_embed_t   *e;
} ngx_http_llm_embed_slot_t;

struct ngx_http_llm_embed_s {
    ngx_http_request_t         *request;
    ngx_http_llm_ctx_t         *ctx;
    const ngx_http_llm_pooled_t *kind;
    llm_embed_request           req;        /* malloc'd: freed by cleanup */
    llm_rerank_request          rq;         /* the same */
    ngx_uint_t                  n_inputs;
    int32_t                   **ids;        /* (n_inputs) each input's */
    uint32_t                   *n_ids;
    uint32_t                   *split;      /* (n_inputs) type_split, or
                                               NULL: 0 */
    float                     **vec;        /* (n_inputs) dims floats */
    uint32_t                    dims;       /* 1 for a score */
    ngx_uint_t                  next;       /* next input to submit */
    ngx_uint_t                  n_done;
    ngx_uint_t                  n_flight;
    ngx_http_llm_embed_slot_t   slots[NGX_HTTP_LLM_EMBED_FLIGHT];
    long                        prompt_tokens;
    unsigned                    ended:1;
};


static ngx_int_t ngx_http_llm_pooled(ngx_http_request_t *r,
    const ngx_http_llm_pooled_t *kind);
static void ngx_http_llm_embed_cleanup(void *data);
static void ngx_http_llm_embed_body(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_embed_parse(ngx_http_llm_embed_t *e,
    u_char *body, size_t len);
static ngx_int_t ngx_http_llm_embed_tokenize(ngx_http_llm_embed_t *e);
static ngx_int_t ngx_http_llm_embed_check(ngx_http_llm_embed_t *e,
    llm_ring_header *ring);
static cJSON *ngx_http_llm_embed_reply(ngx_http_llm_embed_t *e);
static ngx_int_t ngx_http_llm_rerank_parse(ngx_http_llm_embed_t *e,
    u_char *body, size_t len);
static ngx_int_t ngx_http_llm_rerank_start(ngx_http_llm_embed_t *e,
    llm_ring_header *ring);
static cJSON *ngx_http_llm_rerank_reply(ngx_http_llm_embed_t *e);
static ngx_int_t ngx_http_llm_pooled_total(ngx_http_llm_embed_t *e);
static ngx_int_t ngx_http_llm_embed_start(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_embed_fill(ngx_http_llm_embed_t *e);
static void ngx_http_llm_embed_slot_handler(ngx_http_llm_slot_t *s);
static void ngx_http_llm_embed_end(ngx_http_llm_embed_t *e, ngx_int_t rc);


static const ngx_http_llm_pooled_t  ngx_http_llm_pooled_embeddings = {
    ngx_string("embeddings"),
    "input",
    ngx_http_llm_embed_parse,
    ngx_http_llm_embed_check,
    ngx_http_llm_embed_reply
};


static const ngx_http_llm_pooled_t  ngx_http_llm_pooled_rerank = {
    ngx_string("rerank"),
    "documents",
    ngx_http_llm_rerank_parse,
    ngx_http_llm_rerank_start,
    ngx_http_llm_rerank_reply
};


ngx_int_t
ngx_http_llm_embeddings(ngx_http_request_t *r)
{
    return ngx_http_llm_pooled(r, &ngx_http_llm_pooled_embeddings);
}


ngx_int_t
ngx_http_llm_rerank(ngx_http_request_t *r)
{
    return ngx_http_llm_pooled(r, &ngx_http_llm_pooled_rerank);
}


static ngx_int_t
ngx_http_llm_pooled(ngx_http_request_t *r, const ngx_http_llm_pooled_t *kind)
{
    ngx_int_t                 rc;
    ngx_pool_cleanup_t       *cln;
    ngx_http_llm_ctx_t       *ctx;
    ngx_http_llm_peer_t      *peer;
    ngx_http_llm_embed_t     *e;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    peer = ngx_http_llm_peer_get(llcf->engine, r->connection->log);
    if (peer == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx = ngx_http_llm_ctx_create(r, peer);
    e = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_embed_t));
    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (ctx == NULL || e == NULL || cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    cln->handler = ngx_http_llm_embed_cleanup;
    cln->data = e;

    ctx->ecf = llcf->engine;
    ctx->embed = e;
    e->request = r;
    e->ctx = ctx;
    e->kind = kind;

    r->request_body_in_single_buf = 1;

    rc = ngx_http_read_client_request_body(r, ngx_http_llm_embed_body);
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


/* the request's slots back (the engine stops those still running) */
static void
ngx_http_llm_embed_release(ngx_http_llm_embed_t *e)
{
    ngx_uint_t  i;

    for (i = 0; i < NGX_HTTP_LLM_EMBED_FLIGHT; i++) {
        if (e->slots[i].busy) {
            e->slots[i].busy = 0;
            ngx_http_llm_peer_release(&e->slots[i].slot);
        }
    }
}


static void
ngx_http_llm_embed_cleanup(void *data)
{
    ngx_http_llm_embed_t  *e = data;

    ngx_http_llm_embed_release(e);
    llm_embed_request_free(&e->req);
    llm_rerank_request_free(&e->rq);
}


static void
ngx_http_llm_embed_body(ngx_http_request_t *r)
{
    u_char                *body;
    size_t                 len;
    ngx_int_t              rc;
    ngx_http_llm_ctx_t    *ctx;
    ngx_http_llm_embed_t  *e;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);
    e = ctx->embed;

    body = ngx_http_llm_body_bytes(r, &len);
    if (body == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    rc = e->kind->parse(e, body, len);
    if (rc != NGX_OK) {
        ngx_http_finalize_request(r, ngx_http_llm_answer(ctx, rc));
        return;
    }

    ngx_http_finalize_request(r, ngx_http_llm_when_ready(r, ctx->peer,
                                             ngx_http_llm_embed_start));
}


/* the location's API limits for a body of this engine's model */
static void
ngx_http_llm_pooled_limits(ngx_http_llm_embed_t *e, llm_api_limits *lim)
{
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(e->request, ngx_http_llm_module);
    llm_api_limits_default(lim);
    lim->max_body = llcf->max_body_size;
    if (e->ctx->ecf->tokenizer != NULL) {
        llm_api_limits_model(lim, e->ctx->ecf->tokenizer);
    }
}


/* the body's model is the served one (required: NULL is refused) */
static ngx_int_t
ngx_http_llm_pooled_model(ngx_http_llm_embed_t *e, const char *model)
{
    ngx_str_t  *name = &e->ctx->ecf->served_model_name;

    if (model != NULL && ngx_strlen(model) == name->len
        && ngx_strncmp(model, name->data, name->len) == 0)
    {
        return NGX_OK;
    }

    return ngx_http_llm_refuse(e->ctx, NGX_HTTP_NOT_FOUND, "model_not_found",
                               "The model `%s` does not exist",
                               model ? model : "");
}


/* /v1/embeddings: OpenAI's body, texts tokenized before the engine */
static ngx_int_t
ngx_http_llm_embed_parse(ngx_http_llm_embed_t *e, u_char *body, size_t len)
{
    ngx_int_t       rc;
    llm_api_error   err;
    llm_api_limits  lim;

    ngx_http_llm_pooled_limits(e, &lim);

    if (llm_embed_parse(&e->req, (char *) body, len, &lim, &err) != 0) {
        return ngx_http_llm_refuse_api(e->ctx, &err);
    }

    rc = ngx_http_llm_pooled_model(e, e->req.model);
    if (rc != NGX_OK) {
        return rc;
    }

    e->n_inputs = (ngx_uint_t) e->req.n_inputs;

    return ngx_http_llm_embed_tokenize(e);
}


/* every input as ids: text through the model's tokenizer (special
   tokens added as completions add them, none parsed from the text) */
static ngx_int_t
ngx_http_llm_embed_tokenize(ngx_http_llm_embed_t *e)
{
    int                          n, cap;
    ngx_uint_t                   i;
    ngx_http_llm_ctx_t          *ctx = e->ctx;
    ngx_http_llm_engine_conf_t  *ecf = ctx->ecf;
    ngx_pool_t                  *pool = e->request->pool;

    e->ids = ngx_pcalloc(pool, e->n_inputs * sizeof(int32_t *));
    e->n_ids = ngx_pcalloc(pool, e->n_inputs * sizeof(uint32_t));
    if (e->ids == NULL || e->n_ids == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    for (i = 0; i < (ngx_uint_t) e->req.n_inputs; i++) {
        if (e->req.ids[i] != NULL) {
            e->ids[i] = e->req.ids[i];
            n = e->req.n_ids[i];

        } else {
            if (ecf->tokenizer == NULL) {
                return ngx_http_llm_refuse(ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                                           "engine_unavailable",
                                           "the model is unusable, see the "
                                           "server's error log");
            }
            cap = (int) ngx_min(e->req.text_len[i] + 8,
                                (size_t) LLM_RING_MAX_PROMPT + 1);
            e->ids[i] = ngx_palloc(pool, cap * sizeof(int32_t));
            if (e->ids[i] == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }
            n = llm_tokenize(ecf->tokenizer, e->req.text[i],
                             e->req.text_len[i], 1, 0, e->ids[i], cap);
            if (n < 0) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }
        }

        if (n > LLM_RING_MAX_PROMPT) {
            return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                       "context_length_exceeded",
                                       "input[%ui] has more than the %d "
                                       "tokens a request can hold", i,
                                       LLM_RING_MAX_PROMPT);
        }
        if (n == 0) {
            return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                       "invalid_value",
                                       "input[%ui] has no tokens", i);
        }
        e->n_ids[i] = (uint32_t) n;
        e->prompt_tokens += n;
    }

    return ngx_http_llm_pooled_total(e);
}


/* the request's inputs within llm_max_input_tokens */
static ngx_int_t
ngx_http_llm_pooled_total(ngx_http_llm_embed_t *e)
{
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(e->request, ngx_http_llm_module);

    if ((ngx_uint_t) e->prompt_tokens <= llcf->max_input_tokens) {
        return NGX_OK;
    }

    ngx_log_error(NGX_LOG_INFO, e->request->connection->log, 0,
                  "llm: %V of %l tokens refused, llm_max_input_tokens %ui",
                  &e->kind->name, e->prompt_tokens, llcf->max_input_tokens);

    ngx_http_llm_refuse(e->ctx, NGX_HTTP_BAD_REQUEST,
                        "context_length_exceeded",
                        "the request's %s have %l tokens in all, more than "
                        "the %ui this server takes in one request",
                        e->kind->input, e->prompt_tokens,
                        llcf->max_input_tokens);
    if (e->ctx->error == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ngx_cpystrn((u_char *) e->ctx->error->param, (u_char *) e->kind->input,
                sizeof(e->ctx->error->param));

    return NGX_HTTP_BAD_REQUEST;
}


/* the refusal set by ngx_http_llm_refuse() names dimensions */
static ngx_int_t
ngx_http_llm_embed_dims_refused(ngx_http_llm_ctx_t *ctx)
{
    if (ctx->error == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ngx_cpystrn((u_char *) ctx->error->param, (u_char *) "dimensions",
                sizeof(ctx->error->param));
    return NGX_HTTP_BAD_REQUEST;
}


/* the status of the refusal ctx->error holds */
static ngx_int_t
ngx_http_llm_embed_status(ngx_http_llm_ctx_t *ctx)
{
    return ctx->error ? (ngx_int_t) ctx->error->status
                      : NGX_HTTP_INTERNAL_SERVER_ERROR;
}


/* the engine is ready: is it an embedder, are the dimensions its own */
static ngx_int_t
ngx_http_llm_embed_check(ngx_http_llm_embed_t *e, llm_ring_header *ring)
{
    ngx_http_llm_ctx_t  *ctx = e->ctx;

    if (ring->model.pooling == 0 || ring->model.score != 0) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "invalid_value",
                                   "The model `%V` is not an embedding "
                                   "model: it does not serve "
                                   "/v1/embeddings%s",
                                   &ctx->ecf->served_model_name,
                                   ring->model.score ? " (a reranker: "
                                   "/v1/rerank)" : "");
    }

    e->dims = e->req.dimensions ? (uint32_t) e->req.dimensions
                                : ring->model.dim;
    if (e->dims > ring->model.dim) {
        ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST, "invalid_value",
                            "dimensions %uD is more than the model's %uD",
                            e->dims, ring->model.dim);
        return ngx_http_llm_embed_dims_refused(ctx);
    }
    if (e->dims != ring->model.dim && !ring->model.matryoshka) {
        /* vLLM's words */
        ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST, "invalid_value",
                            "Model \"%V\" does not support matryoshka "
                            "representation, changing output dimensions "
                            "will lead to poor results.",
                            &ctx->ecf->served_model_name);
        return ngx_http_llm_embed_dims_refused(ctx);
    }

    return NGX_OK;
}


static cJSON *
ngx_http_llm_embed_reply(ngx_http_llm_embed_t *e)
{
    return llm_embed_reply(e->req.model, (const float *const *) e->vec,
                           e->req.n_inputs, (int) e->dims, e->req.base64,
                           e->prompt_tokens);
}


/* /v1/rerank: the body; the pairs are tokenized once the engine says how
   its model reads them */
static ngx_int_t
ngx_http_llm_rerank_parse(ngx_http_llm_embed_t *e, u_char *body, size_t len)
{
    llm_api_error   err;
    llm_api_limits  lim;

    ngx_http_llm_pooled_limits(e, &lim);

    if (llm_rerank_parse(&e->rq, (char *) body, len, &lim, &err) != 0) {
        return ngx_http_llm_refuse_api(e->ctx, &err);
    }

    e->n_inputs = (ngx_uint_t) e->rq.n_docs;

    /* model is optional, as in vLLM's and llama-server's rerank */
    return e->rq.model ? ngx_http_llm_pooled_model(e, e->rq.model) : NGX_OK;
}


/* a score engine: each (query, document) pair as its model reads it */
static ngx_int_t
ngx_http_llm_rerank_start(ngx_http_llm_embed_t *e, llm_ring_header *ring)
{
    int                          n, cap, split;
    ngx_uint_t                   i;
    ngx_pool_t                  *pool = e->request->pool;
    ngx_http_llm_ctx_t          *ctx = e->ctx;
    llm_rerank_request          *rq = &e->rq;
    const llm_tokenizer         *tok = ctx->ecf->tokenizer;

    if (ring->model.score == 0) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "invalid_value",
                                   "The model `%V` is not a reranker: it "
                                   "does not serve /v1/rerank",
                                   &ctx->ecf->served_model_name);
    }
    if (tok == NULL) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                                   "engine_unavailable",
                                   "the model is unusable, see the "
                                   "server's error log");
    }

    e->dims = 1;
    e->ids = ngx_pcalloc(pool, e->n_inputs * sizeof(int32_t *));
    e->n_ids = ngx_pcalloc(pool, e->n_inputs * sizeof(uint32_t));
    e->split = ngx_pcalloc(pool, e->n_inputs * sizeof(uint32_t));
    if (e->ids == NULL || e->n_ids == NULL || e->split == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    for (i = 0; i < e->n_inputs; i++) {
        cap = (int) ngx_min(rq->query_len + rq->doc_len[i] + 512,
                            (size_t) LLM_RING_MAX_PROMPT + 1);
        e->ids[i] = ngx_palloc(pool, cap * sizeof(int32_t));
        if (e->ids[i] == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        split = 0;
        n = ring->model.score == 1
            ? llm_rerank_yes_no_ids(tok, rq->instruction, rq->query,
                                    rq->query_len, rq->doc[i],
                                    rq->doc_len[i], e->ids[i], cap)
            : llm_rerank_pair_ids(tok, rq->query, rq->query_len, rq->doc[i],
                                  rq->doc_len[i], e->ids[i], cap, &split);
        if (n < 0) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        if (n > cap || n > (int) ring->max_prompt) {
            ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                "context_length_exceeded",
                                "documents[%ui] with the query has more "
                                "than the %uD tokens a request can hold",
                                i, ngx_min((uint32_t) cap, ring->max_prompt));
            if (ctx->error == NULL) {
                return NGX_HTTP_INTERNAL_SERVER_ERROR;
            }
            ngx_cpystrn((u_char *) ctx->error->param,
                        (u_char *) "documents", sizeof(ctx->error->param));
            return NGX_HTTP_BAD_REQUEST;
        }
        e->n_ids[i] = (uint32_t) n;
        e->split[i] = (uint32_t) split;
        e->prompt_tokens += n;
    }

    return ngx_http_llm_pooled_total(e);
}


static cJSON *
ngx_http_llm_rerank_reply(ngx_http_llm_embed_t *e)
{
    char       *id, *model;
    float      *score;
    ngx_str_t  *name = &e->ctx->ecf->served_model_name;
    ngx_uint_t  i;

    score = ngx_palloc(e->request->pool, e->n_inputs * sizeof(float));
    model = ngx_pnalloc(e->request->pool, name->len + 1);
    id = ngx_pnalloc(e->request->pool, 32);
    if (score == NULL || model == NULL || id == NULL) {
        return NULL;
    }
    for (i = 0; i < e->n_inputs; i++) {
        score[i] = e->vec[i][0];
    }
    *ngx_cpymem(model, name->data, name->len) = '\0';
    /* $llm_request_id */
    e->ctx->id.data = (u_char *) id;
    e->ctx->id.len = ngx_snprintf((u_char *) id, 31, "rerank-%08xD%08xD",
                                  (uint32_t) ngx_random(),
                                  (uint32_t) ngx_random())
                     - (u_char *) id;
    id[e->ctx->id.len] = '\0';

    return llm_rerank_reply(&e->rq, id, model, score, e->prompt_tokens);
}


/* the engine is ready: the kind's checks, then the first slots */
static ngx_int_t
ngx_http_llm_embed_start(ngx_http_request_t *r)
{
    ngx_int_t                    rc;
    ngx_uint_t                   i;
    llm_ring_header             *ring;
    ngx_http_llm_ctx_t          *ctx;
    ngx_http_llm_embed_t        *e;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);
    e = ctx->embed;
    ring = ngx_http_llm_peer_ring(ctx->peer);

    rc = e->kind->start(e, ring);
    if (rc != NGX_OK) {
        return ngx_http_llm_answer(ctx, rc);
    }

    /* llm_token_quota takes the inputs' tokens; nothing is generated */
    ctx->n_prompt = (uint32_t) e->prompt_tokens;
    ctx->max_tokens = 0;
    ctx->req.given |= LLM_API_GIVEN_MAX_TOKENS;
    rc = ngx_http_llm_quota_admit(r, ctx);
    if (rc != NGX_OK) {
        return ngx_http_llm_answer(ctx, rc);
    }
    ctx->t_submit_ns = ngx_http_llm_now_ns();

    e->vec = ngx_palloc(r->pool, e->n_inputs * sizeof(float *));
    if (e->vec == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    for (i = 0; i < e->n_inputs; i++) {
        e->vec[i] = ngx_palloc(r->pool, e->dims * sizeof(float));
        if (e->vec[i] == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    if (ngx_http_llm_embed_fill(e) != NGX_OK) {
        ngx_http_llm_embed_release(e);
        ctx->n_prompt = 0;      /* refused: no quota spent */
        return ngx_http_llm_answer(ctx, ngx_http_llm_embed_status(ctx));
    }

    r->read_event_handler = ngx_http_test_reading;
    r->main->count++;

    return NGX_DONE;
}


/* submit inputs while the request has slots to spare and the ring has
   room; NGX_ERROR with ctx->error set when none can go */
static ngx_int_t
ngx_http_llm_embed_fill(ngx_http_llm_embed_t *e)
{
    ngx_int_t                    rc;
    ngx_uint_t                   i;
    llm_slot                    *sl;
    ngx_http_llm_embed_slot_t   *es;

    for (i = 0; i < NGX_HTTP_LLM_EMBED_FLIGHT
                && e->next < e->n_inputs; i++)
    {
        es = &e->slots[i];
        if (es->busy) {
            continue;
        }

        es->e = e;
        es->slot.handler = ngx_http_llm_embed_slot_handler;
        es->slot.data = es;
        es->slot.log = e->request->connection->log;

        rc = ngx_http_llm_peer_claim(e->ctx->peer, &es->slot,
                                     LLM_KIND_EMBED);
        if (rc == NGX_BUSY && e->n_flight > 0) {
            break;      /* the next comes when one of ours is back */
        }
        if (rc == NGX_BUSY) {
            ngx_http_llm_refuse(e->ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                "queue_full", "too many requests in "
                                "flight, retry later");
            return NGX_ERROR;
        }
        if (rc != NGX_OK) {
            ngx_http_llm_refuse(e->ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                                "engine_unavailable",
                                "engine not ready: %s",
                                ngx_http_llm_peer_reason(e->ctx->peer));
            return NGX_ERROR;
        }

        sl = es->slot.slot;
        es->input = e->next++;
        es->busy = 1;
        ngx_memcpy(sl->prompt, e->ids[es->input],
                   e->n_ids[es->input] * sizeof(int32_t));
        sl->n_prompt = e->n_ids[es->input];
        sl->embed_dims = e->split ? 0 : e->dims;
        sl->type_split = e->split ? e->split[es->input] : 0;
        sl->n_vector = 0;
        e->n_flight++;
        (void) ngx_http_llm_peer_submit(&es->slot);
    }

    return NGX_OK;
}


/* a slot of ours changed (WAKE), or the engine is gone (slot NULL) */
static void
ngx_http_llm_embed_slot_handler(ngx_http_llm_slot_t *s)
{
    uint32_t                     st, n;
    llm_slot                    *sl = s->slot;
    ngx_http_llm_embed_slot_t   *es = s->data;
    ngx_http_llm_embed_t        *e = es->e;
    ngx_http_llm_ctx_t          *ctx = e->ctx;
    ngx_http_request_t          *r = e->request;

    if (sl == NULL) {
        /* the engine is gone: peer_lost calls each of our slots' handlers
           in turn, so the last one answers (the request's pool is freed
           by the answer, and no handler of ours may run after it) */
        es->busy = 0;
        if (--e->n_flight == 0) {
            ngx_http_llm_embed_end(e, ngx_http_llm_refuse_unavailable(ctx));
        }
        return;
    }

    st = atomic_load_explicit(&sl->state, memory_order_acquire);
    if (st != LLM_SLOT_DONE) {
        return;
    }

    n = sl->n_vector;
    if (ctx->t_scheduled_ns == 0 && sl->t_scheduled_ns != 0) {
        ctx->t_scheduled_ns = sl->t_scheduled_ns;     /* the first input's */
    }
    if (sl->finish == LLM_FINISH_STOP && n == e->dims) {
        if (ctx->t_first_ns == 0) {
            ctx->t_first_ns = ngx_http_llm_now_ns();
        }
        ngx_memcpy(e->vec[es->input], llm_slot_vector(sl),
                   n * sizeof(float));
        es->busy = 0;
        e->n_flight--;
        e->n_done++;
        ngx_http_llm_peer_release(s);

        if (e->n_done == e->n_inputs) {
            ngx_http_llm_embed_end(e, NGX_OK);
            return;
        }
        if (ngx_http_llm_embed_fill(e) != NGX_OK) {
            ngx_http_llm_embed_end(e, ngx_http_llm_embed_status(ctx));
        }
        return;
    }

    sl->message[sizeof(sl->message) - 1] = '\0';

    if (sl->finish == LLM_FINISH_STOP) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "llm: %V answer of %uD floats, %uD asked",
                      &e->kind->name, n, e->dims);
        ngx_http_llm_refuse(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                            "engine_error", "the engine sent a vector of "
                            "another size");

    } else if (sl->error == LLM_ERR_BAD_REQUEST) {
        ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST, "invalid_value",
                            "%s[%ui]: %s", e->kind->input, es->input,
                            sl->message);

    } else if (sl->error == LLM_ERR_TOO_LONG) {
        ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                            "context_length_exceeded", "%s[%ui]: %s",
                            e->kind->input, es->input, sl->message);

    } else if (sl->error == LLM_ERR_QUEUE_FULL) {
        ngx_http_llm_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS, "queue_full",
                            "%s", sl->message);

    } else {
        ngx_http_llm_refuse(ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                            "engine_unavailable", "%s", sl->message);
    }

    es->busy = 0;
    e->n_flight--;
    ngx_http_llm_peer_release(s);
    ngx_http_llm_embed_end(e, ngx_http_llm_embed_status(ctx));
}


/* the answer: the reply when rc is NGX_OK, else the refusal of status rc
   (ctx->error) */
static void
ngx_http_llm_embed_end(ngx_http_llm_embed_t *e, ngx_int_t rc)
{
    cJSON                *json;
    ngx_http_request_t   *r = e->request;

    if (e->ended) {
        return;
    }
    e->ended = 1;

    ngx_http_llm_embed_release(e);
    e->ctx->t_done_ns = ngx_http_llm_now_ns();

    if (rc != NGX_OK) {
        /* a request that failed costs no quota: $llm_prompt_tokens 0 */
        e->ctx->n_prompt = 0;
        rc = ngx_http_llm_answer(e->ctx, rc);

    } else {
        json = e->kind->reply(e);
        rc = json ? ngx_http_llm_send_json(r, NGX_HTTP_OK, json)
                  : NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_http_finalize_request(r, rc);
}
