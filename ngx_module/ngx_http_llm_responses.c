/*
 * POST /v1/responses: the request translated into a chat one before the
 * chat path parses it (api/responses.h), hosted tools dropped with a
 * header and a log line (or refused under llm_responses_strict_tools),
 * and the reply of choice 0 as a response object with its output items.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


static void
ngx_http_llm_responses_cleanup(void *data)
{
    llm_responses_free(data);
}


/*
 * *body becomes the chat body (the translation's, freed with the pool);
 * lim's body size was checked on the client's body. NGX_OK, or what the
 * refusal answers.
 */
ngx_int_t
ngx_http_llm_responses_parse(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    llm_api_limits *lim, u_char **body, size_t *len)
{
    llm_api_error             err;
    ngx_table_elt_t          *h;
    ngx_pool_cleanup_t       *cln;
    llm_responses_req        *rq = ctx->responses;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (llm_responses_parse(rq, (char *) *body, *len, lim,
                            llcf->responses_strict_tools, &err)
        != 0)
    {
        llm_responses_free(rq);
        return ngx_http_llm_refuse_api(ctx, &err);
    }
    cln->handler = ngx_http_llm_responses_cleanup;
    cln->data = rq;

    if (rq->previous_id != NULL) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "previous_response_id_unsupported",
                                   "previous_response_id needs stored "
                                   "responses, and this location has no "
                                   "llm_responses_zone: resend the "
                                   "conversation in input");
    }

    if (rq->stream) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "unsupported_value",
                                   "stream is not supported on "
                                   "/v1/responses yet");
    }

    if (rq->hosted[0]) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "llm: responses: hosted tools dropped: %s",
                      rq->hosted);

        h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        h->hash = 1;
        ngx_str_set(&h->key, "X-LLM-Dropped-Tools");
        h->value.data = (u_char *) rq->hosted;
        h->value.len = ngx_strlen(rq->hosted);
    }

    *body = (u_char *) rq->chat;
    *len = rq->chat_len;
    lim->max_body = 0;

    return NGX_OK;
}


/* the thinking's length in tokens: the model wrote it, so it re-encodes
   to about what was generated */
static uint32_t
ngx_http_llm_responses_count(ngx_http_llm_ctx_t *ctx, const u_char *text,
    size_t len)
{
    int  n;

    if (len == 0) {
        return 0;
    }

    n = llm_tokenize(ctx->ecf->tokenizer, (const char *) text, len, 0, 0,
                     NULL, 0);

    return n > 0 ? (uint32_t) n : 0;
}


/* the response object of a request that did not stream */
ngx_int_t
ngx_http_llm_responses_final(ngx_http_llm_ctx_t *ctx, ngx_buf_t **bp)
{
    char                    *json, *id;
    size_t                   len;
    cJSON                   *o;
    ngx_buf_t               *b;
    llm_responses_result     res;
    ngx_http_llm_choice_t   *c = &ctx->choices[0];

    id = ngx_pnalloc(ctx->request->pool, ctx->id.len + 1);
    if (id == NULL) {
        return NGX_ERROR;
    }
    ngx_memcpy(id, ctx->id.data, ctx->id.len);
    id[ctx->id.len] = '\0';

    ngx_memzero(&res, sizeof(res));
    res.id = id;
    res.created_at = ctx->created;
    res.model = (char *) ctx->ecf->served_model_name.data;
    res.with_output = 1;

    if (c->text) {
        res.text = (char *) c->text->pos;
        res.text_len = c->text->last - c->text->pos;
    }

    if (c->out_active) {
        res.calls = c->out.calls;
        res.n_calls = c->out.n_calls;

        if (c->out.reasoning && c->reasoning
            && c->reasoning->last > c->reasoning->pos)
        {
            res.reasoning = (char *) c->reasoning->pos;
            res.reasoning_len = c->reasoning->last - c->reasoning->pos;
            res.reasoning_tokens = ngx_http_llm_responses_count(ctx,
                                        c->reasoning->pos, res.reasoning_len);
        }
    }

    if (c->finish == LLM_FINISH_LENGTH) {
        res.status = "incomplete";
        res.incomplete = "max_output_tokens";

    } else {
        res.status = "completed";
    }

    res.input_tokens = ctx->n_prompt;
    res.cached_tokens = ctx->n_cached;
    res.output_tokens = c->n_completion;
    if (res.reasoning_tokens > res.output_tokens) {
        res.reasoning_tokens = res.output_tokens;
    }

    o = llm_responses_object(ctx->responses, &res);
    json = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (json == NULL) {
        return NGX_ERROR;
    }

    len = ngx_strlen(json);
    b = ngx_create_temp_buf(ctx->request->pool, len + 1);
    if (b == NULL) {
        cJSON_free(json);
        return NGX_ERROR;
    }
    b->last = ngx_cpymem(b->last, json, len);
    *b->last++ = '\n';
    cJSON_free(json);

    *bp = b;
    return NGX_OK;
}
