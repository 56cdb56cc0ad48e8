/*
 * llm_api: the routes under the location (/models, /chat/completions,
 * /completions, /messages, /messages/count_tokens, /tokenize,
 * /detokenize, /responses, /embeddings) and the answers to wrong methods and
 * unknown paths.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


static ngx_uint_t
ngx_http_llm_uri_ends(ngx_http_request_t *r, const char *suffix)
{
    size_t  n = ngx_strlen(suffix);

    return r->uri.len >= n
           && ngx_strncmp(r->uri.data + r->uri.len - n, suffix, n) == 0;
}


/* the URI is <collection>/<one segment>: /v1/responses/resp_... */
static ngx_uint_t
ngx_http_llm_uri_item(ngx_http_request_t *r, const char *collection)
{
    u_char  *p, *end = r->uri.data + r->uri.len;
    size_t   n = ngx_strlen(collection);

    for (p = end; p > r->uri.data && p[-1] != '/'; p--) { /* void */ }

    return p > r->uri.data && p < end
           && (size_t) (p - 1 - r->uri.data) >= n
           && ngx_strncmp(p - 1 - n, collection, n) == 0;
}


ngx_int_t
ngx_http_llm_api_handler(ngx_http_request_t *r)
{
    ngx_int_t                 rc;
    ngx_http_llm_peer_t      *peer;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    peer = ngx_http_llm_peer_get(llcf->engine, r->connection->log);
    if (peer == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (ngx_http_llm_uri_ends(r, "/models")) {
        if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
            return ngx_http_llm_send_error(r, NGX_HTTP_NOT_ALLOWED,
                                           "method_not_allowed",
                                           "use GET for %V", &r->uri);
        }

        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        return ngx_http_llm_when_ready(r, peer, ngx_http_llm_models_handler);
    }

    if (ngx_http_llm_messages_uri(r)
        || ngx_http_llm_uri_ends(r, "/tokenize")
        || ngx_http_llm_uri_ends(r, "/detokenize")
        || ngx_http_llm_uri_ends(r, "/chat/completions")
        || ngx_http_llm_uri_ends(r, "/completions"))
    {
        if (r->method != NGX_HTTP_POST) {
            rc = ngx_http_discard_request_body(r);
            if (rc != NGX_OK) {
                return rc;
            }
            return ngx_http_llm_send_error(r, NGX_HTTP_NOT_ALLOWED,
                                           "method_not_allowed",
                                           "use POST for %V", &r->uri);
        }

        return ngx_http_llm_generate(r,
                   ngx_http_llm_uri_ends(r, "/messages/count_tokens")
                   ? NGX_HTTP_LLM_GEN_COUNT
                   : ngx_http_llm_uri_ends(r, "/messages")
                   ? NGX_HTTP_LLM_GEN_MESSAGES
                   : ngx_http_llm_uri_ends(r, "/tokenize")
                   ? NGX_HTTP_LLM_GEN_TOKENIZE
                   : ngx_http_llm_uri_ends(r, "/detokenize")
                   ? NGX_HTTP_LLM_GEN_DETOKENIZE
                   : ngx_http_llm_uri_ends(r, "/chat/completions")
                   ? NGX_HTTP_LLM_GEN_CHAT : NGX_HTTP_LLM_GEN_COMPLETION);
    }

    if (ngx_http_llm_uri_ends(r, "/embeddings")
        || ngx_http_llm_uri_ends(r, "/rerank"))
    {
        if (r->method != NGX_HTTP_POST) {
            rc = ngx_http_discard_request_body(r);
            if (rc != NGX_OK) {
                return rc;
            }
            return ngx_http_llm_send_error(r, NGX_HTTP_NOT_ALLOWED,
                                           "method_not_allowed",
                                           "use POST for %V", &r->uri);
        }
        return ngx_http_llm_uri_ends(r, "/rerank") ? ngx_http_llm_rerank(r)
                                                   : ngx_http_llm_embeddings(r);
    }
    if (ngx_http_llm_uri_item(r, "/responses")) {
        return ngx_http_llm_responses_handler(r);
    }

    if (ngx_http_llm_uri_ends(r, "/responses")) {
        if (r->method != NGX_HTTP_POST) {
            rc = ngx_http_discard_request_body(r);
            if (rc != NGX_OK) {
                return rc;
            }
            return ngx_http_llm_send_error(r, NGX_HTTP_NOT_ALLOWED,
                                           "method_not_allowed",
                                           "use POST for %V", &r->uri);
        }

        return ngx_http_llm_generate(r, NGX_HTTP_LLM_GEN_RESPONSES);
    }

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    return ngx_http_llm_send_error(r, NGX_HTTP_NOT_FOUND,
                                   "unknown_url",
                                   "unknown endpoint %V", &r->uri);
}
