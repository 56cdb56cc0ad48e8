/*
 * vLLM's POST /tokenize and /detokenize in an llm_api location
 * (docs/api.md). /tokenize reads its body as the chat or completion
 * request it stands for and stops once the prompt is token ids, so it
 * answers exactly the ids those endpoints send the engine; /detokenize
 * decodes ids with the served model's tokenizer. Neither needs the engine.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"
#include "api/tokenize.h"


/* the /tokenize body in *body becomes the request it stands for;
   NGX_DECLINED: refused, err says why */
ngx_int_t
ngx_http_llm_tokenize_body(ngx_http_llm_ctx_t *ctx, u_char **body,
    size_t *len, llm_api_error *err)
{
    char                        *text;
    size_t                       n;
    u_char                      *p, *model;
    llm_api_limits               lim;
    llm_tokenize_opts            opts;
    ngx_http_llm_loc_conf_t     *llcf;
    ngx_http_request_t          *r = ctx->request;
    ngx_http_llm_engine_conf_t  *ecf = ctx->ecf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    llm_api_limits_default(&lim);
    lim.max_body = llcf->max_body_size;

    model = ngx_pnalloc(r->pool, ecf->served_model_name.len + 1);
    if (model == NULL) {
        return NGX_ERROR;
    }
    *ngx_cpymem(model, ecf->served_model_name.data,
                ecf->served_model_name.len) = '\0';

    text = llm_tokenize_to_request((char *) *body, *len, (char *) model,
                                   &lim, &opts, &n, err);
    if (text == NULL) {
        return NGX_DECLINED;
    }

    p = ngx_pnalloc(r->pool, n + 1);
    if (p == NULL) {
        free(text);
        return NGX_ERROR;
    }
    ngx_memcpy(p, text, n + 1);
    free(text);

    ctx->chat = opts.chat;
    ctx->no_gen_prompt = !opts.add_generation_prompt;
    ctx->add_special = opts.add_special_tokens;
    ctx->token_strs = opts.return_token_strs;

    *body = p;
    *len = n;

    return NGX_OK;
}


/* {count, max_model_len, tokens, token_strs} of the prompt made */
ngx_int_t
ngx_http_llm_tokenize_reply(ngx_http_llm_ctx_t *ctx, cJSON **json)
{
    size_t                       len;
    cJSON                       *root, *ids, *strs;
    uint32_t                     i;
    const char                  *s;
    u_char                      *copy;
    ngx_http_llm_engine_conf_t  *ecf = ctx->ecf;

    if (ctx->n_prompt > LLM_RING_MAX_PROMPT) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "context_length_exceeded",
                                   "the prompt has %uD tokens, more than "
                                   "the %d a request can hold",
                                   ctx->n_prompt, LLM_RING_MAX_PROMPT);
    }

    root = cJSON_CreateObject();
    ids = cJSON_CreateIntArray((const int *) ctx->prompt,
                               (int) ctx->n_prompt);
    strs = NULL;

    if (root == NULL || ids == NULL
        || cJSON_AddNumberToObject(root, "count", ctx->n_prompt) == NULL
        || cJSON_AddNumberToObject(root, "max_model_len",
                                   ecf->context_length) == NULL
        || !cJSON_AddItemToObject(root, "tokens", ids))
    {
        cJSON_Delete(ids);
        goto failed;
    }

    if (!ctx->token_strs) {
        if (cJSON_AddNullToObject(root, "token_strs") == NULL) {
            goto failed;
        }
        *json = root;
        return NGX_OK;
    }

    strs = cJSON_AddArrayToObject(root, "token_strs");
    if (strs == NULL) {
        goto failed;
    }

    /* the vocabulary's text of each token, as convert_ids_to_tokens */
    for (i = 0; i < ctx->n_prompt; i++) {
        s = llm_token_text(ecf->tokenizer, ctx->prompt[i], &len);
        copy = ngx_pnalloc(ctx->request->pool, len + 1);
        if (copy == NULL) {
            goto failed;
        }
        if (len) {
            ngx_memcpy(copy, s, len);
        }
        copy[len] = '\0';
        if (!cJSON_AddItemToArray(strs, cJSON_CreateString((char *) copy))) {
            goto failed;
        }
    }

    *json = root;
    return NGX_OK;

failed:

    cJSON_Delete(root);
    return NGX_HTTP_INTERNAL_SERVER_ERROR;
}


/* /detokenize: {tokens} -> {prompt}, special tokens written as text (as
   vLLM's decode) */
ngx_int_t
ngx_http_llm_detokenize(ngx_http_llm_ctx_t *ctx, u_char *body, size_t len,
    cJSON **json)
{
    int                          n, got;
    char                        *text;
    int32_t                     *ids;
    llm_api_error                err;
    llm_api_limits               lim;
    ngx_http_llm_loc_conf_t     *llcf;
    ngx_http_llm_engine_conf_t  *ecf = ctx->ecf;

    llcf = ngx_http_get_module_loc_conf(ctx->request, ngx_http_llm_module);

    if (ecf->tokenizer == NULL) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                                   "engine_unavailable",
                                   "the model is unusable, see the "
                                   "server's error log");
    }

    llm_api_limits_default(&lim);
    lim.max_body = llcf->max_body_size;

    if (llm_detokenize_parse((char *) body, len,
                             llm_tokenizer_n_vocab(ecf->tokenizer), &lim,
                             &ids, &n, &err)
        != 0)
    {
        return ngx_http_llm_refuse_api(ctx, &err);
    }

    got = llm_detokenize(ecf->tokenizer, ids, n, 0, NULL, 0);
    text = (got >= 0) ? ngx_pnalloc(ctx->request->pool, got + 1) : NULL;
    if (text == NULL
        || llm_detokenize(ecf->tokenizer, ids, n, 0, text, got + 1) != got)
    {
        free(ids);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    free(ids);

    *json = cJSON_CreateObject();
    if (*json == NULL
        || cJSON_AddStringToObject(*json, "prompt", text) == NULL)
    {
        cJSON_Delete(*json);
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return NGX_OK;
}
