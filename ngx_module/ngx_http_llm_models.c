/*
 * GET /v1/models: the served model, with the facts the engine wrote into
 * its ring header (a model file's name may be any bytes: the reply is made
 * valid UTF-8 where it is sent, ngx_http_llm_send_json).
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


ngx_int_t
ngx_http_llm_models_handler(ngx_http_request_t *r)
{
    char                        *id;
    cJSON                       *root, *data, *m, *meta;
    ngx_uint_t                   len;
    llm_model_facts             *f;
    llm_ring_header             *ring;
    ngx_http_llm_loc_conf_t     *llcf;
    ngx_http_llm_engine_conf_t  *ecf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    ecf = llcf->engine;

    ring = ngx_http_llm_peer_ring(ecf->peer);
    if (ring == NULL) {
        return ngx_http_llm_unavailable(r, ecf->peer);
    }

    /* the engine wrote these; copy, and terminate its strings ourselves */
    f = ngx_palloc(r->pool, sizeof(llm_model_facts));
    if (f == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ngx_memcpy(f, &ring->model, sizeof(llm_model_facts));
    f->arch[sizeof(f->arch) - 1] = '\0';
    f->name[sizeof(f->name) - 1] = '\0';
    f->file_type[sizeof(f->file_type) - 1] = '\0';

    /* whole: a cut could split a character */
    id = ngx_pnalloc(r->pool, ecf->served_model_name.len + 1);
    if (id == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    ngx_cpystrn((u_char *) id, ecf->served_model_name.data,
                ecf->served_model_name.len + 1);

    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    data = cJSON_AddArrayToObject(root, "data");

    m = cJSON_CreateObject();
    cJSON_AddItemToArray(data, m);
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created",
                            (double) (ngx_time()
                                      - (ngx_http_llm_now_ns()
                                         - ring->started_ns) / 1000000000));
    cJSON_AddStringToObject(m, "owned_by", "ngx_llm");
    /* ngx_min() does not parenthesize its arguments: no ?: inside it */
    len = f->context_length ? f->context_length : ecf->max_model_len;
    cJSON_AddNumberToObject(m, "max_model_len",
                            (double) ngx_min(ecf->max_model_len, len));

    meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddStringToObject(meta, "architecture", f->arch);
    cJSON_AddStringToObject(meta, "name", f->name);
    cJSON_AddStringToObject(meta, "tensor_type", f->file_type);
    cJSON_AddNumberToObject(meta, "parameters", (double) f->n_params);
    cJSON_AddNumberToObject(meta, "weight_bytes", (double) f->weight_bytes);
    cJSON_AddNumberToObject(meta, "context_length", f->context_length);
    cJSON_AddNumberToObject(meta, "vocab_size", f->vocab_size);
    cJSON_AddNumberToObject(meta, "layers", f->n_layers);
    cJSON_AddNumberToObject(meta, "embedding_length", f->dim);
    cJSON_AddNumberToObject(meta, "heads", f->n_heads);
    cJSON_AddNumberToObject(meta, "kv_heads", f->n_kv_heads);
    cJSON_AddNumberToObject(meta, "engine_pid", ring->engine_pid);
    if (ecf->sha256.len) {
        /* checked by the master at configuration time (model_sha256) */
        cJSON_AddStringToObject(meta, "sha256", (char *) ecf->sha256.data);
    }

    return ngx_http_llm_send_json(r, NGX_HTTP_OK, root);
}
