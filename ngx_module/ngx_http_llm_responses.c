/*
 * POST /v1/responses: the request translated into a chat one before the
 * chat path parses it (api/responses.h), hosted tools dropped with a
 * header and a log line (or refused under llm_responses_strict_tools),
 * and the reply of choice 0 as a response object with its output items,
 * whole or as the event stream the SDKs parse: response.created,
 * .in_progress, per item .output_item.added, its deltas and .done events,
 * .output_item.done, then response.completed or .incomplete (or error and
 * response.failed), each event numbered by sequence_number.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"

#include <sys/random.h>


#define NGX_HTTP_LLM_RESP_NONE       0
#define NGX_HTTP_LLM_RESP_REASONING  1
#define NGX_HTTP_LLM_RESP_TEXT       2


/* a text that grows in the request's pool */
typedef struct {
    u_char                     *data;
    size_t                      len;
    size_t                      cap;
} ngx_http_llm_resp_text_t;


/* the request (first: ctx->responses points at it) and its stream */
typedef struct {
    llm_responses_req           rq;
    ngx_uint_t                  seq;        /* the next sequence_number */
    ngx_uint_t                  n_out;      /* output items opened */
    ngx_uint_t                  open;       /* NGX_HTTP_LLM_RESP_* */
    size_t                      open_from;  /* the open item's text starts
                                               here in its buffer */
    char                        open_id[96];
    ngx_http_llm_resp_text_t    text;       /* the answer, whole */
    ngx_http_llm_resp_text_t    reasoning;  /* the thinking, whole */
    unsigned                    started:1;  /* response.created is out */
} ngx_http_llm_responses_t;


/* llm_responses_zone: stored responses by id, oldest evicted first */
typedef struct {
    ngx_http_llm_shm_t          shm;        /* LRU head: the newest */
    time_t                      ttl;
} ngx_http_llm_resp_zone_t;


/* from the rbtree node's color on, as limit_req's nodes */
typedef struct {
    u_char                      color;
    u_char                      pad;
    u_short                     id_len;
    ngx_queue_t                 queue;
    time_t                      expires;
    size_t                      len;        /* of the stored text */
    u_char                      data[1];    /* the id, then the text */
} ngx_http_llm_resp_node_t;


static ngx_int_t ngx_http_llm_responses_close(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t ***last);
static ngx_int_t ngx_http_llm_responses_delta(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last,
    const llm_reply_piece *piece, const llm_out_token *o, ngx_uint_t role);
static ngx_int_t ngx_http_llm_responses_calls(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last);
static ngx_int_t ngx_http_llm_responses_finish(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last);
static ngx_int_t ngx_http_llm_responses_done(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t ***last);
static ngx_int_t ngx_http_llm_responses_final(ngx_http_llm_ctx_t *ctx,
    ngx_buf_t **bp);
static ngx_int_t ngx_http_llm_responses_error(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t ***last, ngx_uint_t status, const char *code,
    const char *msg);


/* POST /v1/responses's output: the response object or its events */
const ngx_http_llm_output_t  ngx_http_llm_responses_output = {
    ngx_http_llm_responses_delta,
    ngx_http_llm_responses_calls,
    ngx_http_llm_responses_finish,
    ngx_http_llm_responses_done,
    ngx_http_llm_responses_final,
    ngx_http_llm_responses_error
};


llm_responses_req *
ngx_http_llm_responses_create(ngx_pool_t *pool)
{
    ngx_http_llm_responses_t  *rs;

    rs = ngx_pcalloc(pool, sizeof(ngx_http_llm_responses_t));

    return rs ? &rs->rq : NULL;
}


static void
ngx_http_llm_responses_cleanup(void *data)
{
    llm_responses_free(data);
}


/* ---------------------------------------------------------------------- */
/* the store: llm_responses_zone                                          */

static void
ngx_http_llm_resp_rbtree_insert(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel)
{
    ngx_rbtree_node_t         **p;
    ngx_http_llm_resp_node_t   *rn, *rnt;

    for ( ;; ) {

        if (node->key < temp->key) {
            p = &temp->left;

        } else if (node->key > temp->key) {
            p = &temp->right;

        } else {
            rn = (ngx_http_llm_resp_node_t *) &node->color;
            rnt = (ngx_http_llm_resp_node_t *) &temp->color;

            p = (ngx_memn2cmp(rn->data, rnt->data, rn->id_len, rnt->id_len)
                 < 0) ? &temp->left : &temp->right;
        }

        if (*p == sentinel) {
            break;
        }

        temp = *p;
    }

    *p = node;
    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}


static ngx_int_t
ngx_http_llm_resp_find_cmp(void *data, ngx_rbtree_node_t *node)
{
    ngx_str_t                 *id = data;
    ngx_http_llm_resp_node_t  *rn;

    rn = (ngx_http_llm_resp_node_t *) &node->color;

    return ngx_memn2cmp(id->data, rn->data, id->len, rn->id_len);
}


/* the node of id, or NULL; locked by the caller */
static ngx_rbtree_node_t *
ngx_http_llm_resp_lookup(ngx_http_llm_resp_zone_t *zone, ngx_str_t *id,
    uint32_t hash)
{
    return ngx_http_llm_shm_find(&zone->shm, hash,
                                 ngx_http_llm_resp_find_cmp, id);
}


static void
ngx_http_llm_resp_free_node(ngx_http_llm_resp_zone_t *zone,
    ngx_rbtree_node_t *node)
{
    ngx_http_llm_resp_node_t  *rn;

    rn = (ngx_http_llm_resp_node_t *) &node->color;
    ngx_http_llm_shm_free(&zone->shm, node, &rn->queue);
}


/* the entries past their ttl, oldest first; all of them (n 0) or n */
static void
ngx_http_llm_resp_expire(ngx_http_llm_resp_zone_t *zone, ngx_uint_t n)
{
    time_t                     now;
    ngx_queue_t               *q;
    ngx_http_llm_resp_node_t  *rn;

    now = ngx_time();

    while (!ngx_queue_empty(&zone->shm.sh->lru)) {
        q = ngx_queue_last(&zone->shm.sh->lru);
        rn = ngx_queue_data(q, ngx_http_llm_resp_node_t, queue);

        if (n == 0 && rn->expires > now) {
            return;
        }

        ngx_http_llm_resp_free_node(zone, (ngx_rbtree_node_t *)
                               ((u_char *) rn
                                - offsetof(ngx_rbtree_node_t, color)));
        if (n && --n == 0) {
            return;
        }
    }
}


/* a copy of id's stored text in pool, NULL: none (or no memory: *oom) */
static u_char *
ngx_http_llm_resp_get(ngx_shm_zone_t *shm_zone, ngx_pool_t *pool,
    ngx_str_t *id, size_t *len, ngx_uint_t *oom)
{
    u_char                    *text;
    uint32_t                   hash;
    ngx_rbtree_node_t         *node;
    ngx_http_llm_resp_node_t  *rn;
    ngx_http_llm_resp_zone_t  *zone = shm_zone->data;

    hash = ngx_crc32_short(id->data, id->len);
    text = NULL;
    *oom = 0;

    ngx_shmtx_lock(&zone->shm.shpool->mutex);

    ngx_http_llm_resp_expire(zone, 0);

    node = ngx_http_llm_resp_lookup(zone, id, hash);
    if (node != NULL) {
        rn = (ngx_http_llm_resp_node_t *) &node->color;

        /* a use makes it the newest: the last evicted */
        ngx_queue_remove(&rn->queue);
        ngx_queue_insert_head(&zone->shm.sh->lru, &rn->queue);

        text = ngx_pnalloc(pool, rn->len + 1);
        if (text == NULL) {
            *oom = 1;
        } else {
            ngx_memcpy(text, rn->data + rn->id_len, rn->len);
            text[rn->len] = '\0';
            *len = rn->len;
        }
    }

    ngx_shmtx_unlock(&zone->shm.shpool->mutex);

    return text;
}


/* NGX_OK, NGX_DECLINED: too big for the zone even when empty */
static ngx_int_t
ngx_http_llm_resp_put(ngx_shm_zone_t *shm_zone, ngx_str_t *id,
    const char *text, size_t len)
{
    size_t                     size;
    uint32_t                   hash;
    ngx_uint_t                 tries;
    ngx_rbtree_node_t         *node;
    ngx_http_llm_resp_node_t  *rn;
    ngx_http_llm_resp_zone_t  *zone = shm_zone->data;

    hash = ngx_crc32_short(id->data, id->len);
    size = offsetof(ngx_rbtree_node_t, color)
           + offsetof(ngx_http_llm_resp_node_t, data) + id->len + len;

    ngx_shmtx_lock(&zone->shm.shpool->mutex);

    ngx_http_llm_resp_expire(zone, 0);

    node = ngx_http_llm_resp_lookup(zone, id, hash);
    if (node != NULL) {
        ngx_http_llm_resp_free_node(zone, node);
    }

    /* bounded: the oldest go until it fits */
    for (tries = 0; ; tries++) {
        node = ngx_slab_alloc_locked(zone->shm.shpool, size);
        if (node != NULL || ngx_queue_empty(&zone->shm.sh->lru)) {
            break;
        }
        ngx_http_llm_resp_expire(zone, 1);
    }

    if (node == NULL) {
        ngx_shmtx_unlock(&zone->shm.shpool->mutex);
        return NGX_DECLINED;
    }

    node->key = hash;
    rn = (ngx_http_llm_resp_node_t *) &node->color;
    rn->id_len = (u_short) id->len;
    rn->len = len;
    rn->expires = ngx_time() + zone->ttl;
    ngx_memcpy(rn->data, id->data, id->len);
    ngx_memcpy(rn->data + id->len, text, len);

    ngx_rbtree_insert(&zone->shm.sh->rbtree, node);
    ngx_queue_insert_head(&zone->shm.sh->lru, &rn->queue);

    ngx_shmtx_unlock(&zone->shm.shpool->mutex);

    if (tries) {
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                       "llm: responses zone \"%V\": %ui evicted",
                       &shm_zone->shm.name, tries);
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_resp_delete(ngx_shm_zone_t *shm_zone, ngx_str_t *id)
{
    uint32_t                   hash;
    ngx_rbtree_node_t         *node;
    ngx_http_llm_resp_zone_t  *zone = shm_zone->data;

    hash = ngx_crc32_short(id->data, id->len);

    ngx_shmtx_lock(&zone->shm.shpool->mutex);

    node = ngx_http_llm_resp_lookup(zone, id, hash);
    if (node != NULL) {
        ngx_http_llm_resp_free_node(zone, node);
    }

    ngx_shmtx_unlock(&zone->shm.shpool->mutex);

    return node ? NGX_OK : NGX_DECLINED;
}


static ngx_int_t
ngx_http_llm_resp_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_llm_resp_zone_t  *ozone = data;
    ngx_http_llm_resp_zone_t  *zone = shm_zone->data;

    /* a reload: the stored responses stay */
    return ngx_http_llm_shm_init(shm_zone, &zone->shm,
                                 ozone ? &ozone->shm : NULL,
                                 ngx_http_llm_resp_rbtree_insert,
                                 "llm_responses_zone");
}


/* llm_responses_zone NAME SIZE TTL; */
char *
ngx_http_llm_responses_zone_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_llm_loc_conf_t  *llcf = conf;

    ssize_t                    size;
    ngx_str_t                 *value;
    time_t                     ttl;
    ngx_shm_zone_t            *shm_zone;
    ngx_http_llm_resp_zone_t  *zone;

    if (llcf->responses_zone != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    value = cf->args->elts;

    size = ngx_parse_size(&value[2]);
    if (size == NGX_ERROR || size < (ssize_t) (8 * ngx_pagesize)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid llm_responses_zone size \"%V\": at "
                           "least %uz", &value[2], 8 * ngx_pagesize);
        return NGX_CONF_ERROR;
    }

    ttl = ngx_parse_time(&value[3], 1);
    if (ttl == (time_t) NGX_ERROR || ttl == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid llm_responses_zone ttl \"%V\"",
                           &value[3]);
        return NGX_CONF_ERROR;
    }

    shm_zone = ngx_shared_memory_add(cf, &value[1], size,
                                     &ngx_http_llm_module);
    if (shm_zone == NULL) {
        return NGX_CONF_ERROR;
    }

    if (shm_zone->data) {
        zone = shm_zone->data;
        if (zone->ttl != ttl) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "llm_responses_zone \"%V\" is already "
                               "declared with another ttl", &value[1]);
            return NGX_CONF_ERROR;
        }

    } else {
        zone = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_resp_zone_t));
        if (zone == NULL) {
            return NGX_CONF_ERROR;
        }
        zone->ttl = ttl;
        shm_zone->init = ngx_http_llm_resp_init_zone;
        shm_zone->data = zone;
    }

    llcf->responses_zone = shm_zone;

    return NGX_CONF_OK;
}


/* previous_response_id: its conversation comes before the input */
static ngx_int_t
ngx_http_llm_responses_continue(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx, llm_api_limits *lim, u_char *body, size_t len)
{
    u_char                   *prev;
    size_t                    plen;
    ngx_str_t                 id;
    ngx_uint_t                oom;
    llm_api_error             err;
    llm_responses_req        *rq = ctx->responses;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    if (llcf->responses_zone == NULL) {
        return ngx_http_llm_refuse(ctx, NGX_HTTP_BAD_REQUEST,
                                   "previous_response_id_unsupported",
                                   "previous_response_id needs stored "
                                   "responses, and this location has no "
                                   "llm_responses_zone: resend the "
                                   "conversation in input");
    }

    id.data = (u_char *) rq->previous_id;
    id.len = ngx_strlen(rq->previous_id);

    prev = ngx_http_llm_resp_get(llcf->responses_zone, r->pool, &id, &plen,
                                 &oom);
    if (prev == NULL) {
        if (oom) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "llm: responses: previous response \"%V\" not found",
                      &id);
        return ngx_http_llm_refuse(ctx, NGX_HTTP_NOT_FOUND,
                                   "previous_response_not_found",
                                   "Previous response with id '%V' not "
                                   "found.", &id);
    }

    llm_responses_free(rq);

    if (llm_responses_parse(rq, (char *) body, len, lim,
                            llcf->responses_strict_tools, (char *) prev,
                            plen, &err)
        != 0)
    {
        return ngx_http_llm_refuse_api(ctx, &err);
    }

    return NGX_OK;
}


/* a finished response into the zone when the request asked for it */
static void
ngx_http_llm_responses_keep(ngx_http_llm_ctx_t *ctx, cJSON *o)
{
    char                     *text;
    ngx_http_request_t       *r = ctx->request;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    if (llcf->responses_zone == NULL || !ctx->responses->store) {
        return;
    }

    cJSON_ReplaceItemInObject(o, "store", cJSON_CreateTrue());

    text = llm_responses_stored(ctx->responses, o);
    if (text == NULL
        || ngx_http_llm_resp_put(llcf->responses_zone, &ctx->id, text,
                                 ngx_strlen(text))
           != NGX_OK)
    {
        cJSON_ReplaceItemInObject(o, "store", cJSON_CreateFalse());
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "llm: responses: \"%V\" not stored: %s",
                      &ctx->id, text ? "larger than llm_responses_zone"
                                     : "out of memory");
    }

    free(text);
}


/* GET and DELETE /v1/responses/{id} */
ngx_int_t
ngx_http_llm_responses_handler(ngx_http_request_t *r)
{
    u_char                   *text;
    size_t                    len;
    cJSON                    *stored, *json;
    ngx_int_t                 rc;
    ngx_str_t                 id;
    ngx_uint_t                oom;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_DELETE))) {
        return ngx_http_llm_send_error(r, NGX_HTTP_NOT_ALLOWED,
                                       "method_not_allowed",
                                       "use GET or DELETE for %V", &r->uri);
    }

    for (id.data = r->uri.data + r->uri.len; id.data > r->uri.data;
         id.data--)
    {
        if (id.data[-1] == '/') {
            break;
        }
    }
    id.len = r->uri.data + r->uri.len - id.data;

    if (llcf->responses_zone == NULL) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "llm: responses: \"%V\" asked for, no "
                      "llm_responses_zone", &id);
        return ngx_http_llm_send_error(r, NGX_HTTP_NOT_FOUND, "not_found",
                                       "Response with id '%V' not found: "
                                       "this location stores none (no "
                                       "llm_responses_zone).", &id);
    }

    if (r->method == NGX_HTTP_DELETE) {
        if (ngx_http_llm_resp_delete(llcf->responses_zone, &id) != NGX_OK) {
            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                          "llm: responses: \"%V\" not found to delete", &id);
            return ngx_http_llm_send_error(r, NGX_HTTP_NOT_FOUND,
                                           "not_found", "Response with id "
                                           "'%V' not found.", &id);
        }

        json = cJSON_CreateObject();
        if (json == NULL
            || cJSON_AddStringToObject(json, "object", "response") == NULL
            || cJSON_AddTrueToObject(json, "deleted") == NULL)
        {
            cJSON_Delete(json);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        text = ngx_pnalloc(r->pool, id.len + 1);
        if (text == NULL) {
            cJSON_Delete(json);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        *ngx_cpymem(text, id.data, id.len) = '\0';
        cJSON_AddStringToObject(json, "id", (char *) text);

        return ngx_http_llm_send_json(r, NGX_HTTP_OK, json);
    }

    text = ngx_http_llm_resp_get(llcf->responses_zone, r->pool, &id, &len,
                                 &oom);
    if (text == NULL) {
        if (oom) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "llm: responses: \"%V\" not found", &id);
        return ngx_http_llm_send_error(r, NGX_HTTP_NOT_FOUND, "not_found",
                                       "Response with id '%V' not found.",
                                       &id);
    }

    stored = cJSON_ParseWithLength((char *) text, len);
    json = cJSON_DetachItemFromObject(stored, "response");
    cJSON_Delete(stored);
    if (json == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_llm_send_json(r, NGX_HTTP_OK, json);
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
    ngx_int_t                 rc;
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
                            llcf->responses_strict_tools, NULL, 0, &err)
        != 0)
    {
        llm_responses_free(rq);
        return ngx_http_llm_refuse_api(ctx, &err);
    }
    cln->handler = ngx_http_llm_responses_cleanup;
    cln->data = rq;
    ctx->thinking = rq->thinking;   /* reasoning.effort */

    if (rq->previous_id != NULL) {
        rc = ngx_http_llm_responses_continue(r, ctx, lim, *body, *len);
        if (rc != NGX_OK) {
            return rc;
        }
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


/*
 * "resp_" and 128 random bits: a stored response is read and continued by
 * its id alone, so the id must not be guessed from another one
 */
ngx_int_t
ngx_http_llm_responses_new_id(ngx_http_llm_ctx_t *ctx)
{
    u_char      rnd[16], *p;
    ngx_uint_t  i;

    if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t) sizeof(rnd)) {
        ngx_log_error(NGX_LOG_ALERT, ctx->request->connection->log,
                      ngx_errno, "llm: getrandom() failed for a response id");
        return NGX_ERROR;
    }

    p = ngx_pnalloc(ctx->request->pool, sizeof("resp_") + 2 * 16);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ctx->id.data = p;
    p = ngx_cpymem(p, "resp_", sizeof("resp_") - 1);
    for (i = 0; i < sizeof(rnd); i++) {
        p = ngx_sprintf(p, "%02xd", rnd[i]);
    }
    ctx->id.len = p - ctx->id.data;

    /* also a C string: the item ids are made of it */
    *p = '\0';

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


/* what the response object says of choice 0: text and reasoning are
   the collected reply's (non-streaming) or the stream's */
static void
ngx_http_llm_responses_result(ngx_http_llm_ctx_t *ctx,
    llm_responses_result *res, char *id, const u_char *text, size_t tlen,
    const u_char *reasoning, size_t rlen)
{
    ngx_http_llm_choice_t  *c = &ctx->choices[0];

    ngx_memzero(res, sizeof(llm_responses_result));
    res->id = id;
    res->created_at = ctx->created;
    res->model = (char *) ctx->ecf->served_model_name.data;
    res->with_output = 1;
    res->text = (char *) text;
    res->text_len = tlen;

    if (c->out_active) {
        res->calls = c->out.calls;
        res->n_calls = c->out.n_calls;

        if (c->out.reasoning && rlen) {
            res->reasoning = (char *) reasoning;
            res->reasoning_len = rlen;
            res->reasoning_tokens = ngx_http_llm_responses_count(ctx,
                                                         reasoning, rlen);
        }
    }

    if (c->finish == LLM_FINISH_LENGTH) {
        res->status = "incomplete";
        res->incomplete = "max_output_tokens";

    } else {
        res->status = "completed";
    }

    res->input_tokens = ctx->n_prompt;
    res->cached_tokens = ctx->n_cached;
    res->output_tokens = c->n_completion;
    if (res->reasoning_tokens > res->output_tokens) {
        res->reasoning_tokens = res->output_tokens;
    }
}


static char *
ngx_http_llm_responses_id(ngx_http_llm_ctx_t *ctx)
{
    char  *id;

    id = ngx_pnalloc(ctx->request->pool, ctx->id.len + 1);
    if (id == NULL) {
        return NULL;
    }
    ngx_memcpy(id, ctx->id.data, ctx->id.len);
    id[ctx->id.len] = '\0';

    return id;
}


/* the response object of a request that did not stream */
static ngx_int_t
ngx_http_llm_responses_final(ngx_http_llm_ctx_t *ctx, ngx_buf_t **bp)
{
    char                    *json, *id;
    size_t                   len, tlen, rlen;
    cJSON                   *o;
    ngx_buf_t               *b;
    llm_responses_result     res;
    ngx_http_llm_choice_t   *c = &ctx->choices[0];

    id = ngx_http_llm_responses_id(ctx);
    if (id == NULL) {
        return NGX_ERROR;
    }

    tlen = c->text ? (size_t) (c->text->last - c->text->pos) : 0;
    rlen = c->reasoning ? (size_t) (c->reasoning->last - c->reasoning->pos)
                        : 0;
    ngx_http_llm_responses_result(ctx, &res, id,
                                  c->text ? c->text->pos : NULL, tlen,
                                  c->reasoning ? c->reasoning->pos : NULL,
                                  rlen);

    o = llm_responses_object(ctx->responses, &res);
    if (o != NULL) {
        ngx_http_llm_responses_keep(ctx, o);
    }
    json = o ? llm_responses_print(o) : NULL;
    cJSON_Delete(o);
    if (json == NULL) {
        return NGX_ERROR;
    }

    len = ngx_strlen(json);
    b = ngx_create_temp_buf(ctx->request->pool, len + 1);
    if (b == NULL) {
        free(json);
        return NGX_ERROR;
    }
    b->last = ngx_cpymem(b->last, json, len);
    *b->last++ = '\n';
    free(json);

    *bp = b;
    return NGX_OK;
}


/* ---------------------------------------------------------------------- */
/* the event stream                                                       */

static ngx_int_t
ngx_http_llm_resp_text_add(ngx_pool_t *pool, ngx_http_llm_resp_text_t *t,
    const u_char *s, size_t len)
{
    u_char  *p;
    size_t   cap;

    if (t->len + len > t->cap) {
        cap = ngx_max(2 * t->cap, t->len + len + 256);
        p = ngx_pnalloc(pool, cap);
        if (p == NULL) {
            return NGX_ERROR;
        }
        if (t->len) {
            ngx_memcpy(p, t->data, t->len);
        }
        t->data = p;
        t->cap = cap;
    }

    if (len) {
        ngx_memcpy(t->data + t->len, s, len);
        t->len += len;
    }

    return NGX_OK;
}


/* a buffer of the request's that the client has taken, or a new one
   (tagged as ngx_http_llm_format.c's, so both reuse each other's) */
static ngx_buf_t *
ngx_http_llm_responses_buf(ngx_http_llm_ctx_t *ctx, size_t size)
{
    u_char       *start, *end;
    ngx_buf_t    *b;
    ngx_chain_t  *cl, **ll;

    for (ll = &ctx->free; *ll; ll = &(*ll)->next) {
        cl = *ll;
        b = cl->buf;
        if ((size_t) (b->end - b->start) >= size) {
            *ll = cl->next;
            ngx_free_chain(ctx->request->pool, cl);
            start = b->start;
            end = b->end;
            ngx_memzero(b, sizeof(ngx_buf_t));
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


/* "event: <type>\ndata: <ev>\n\n" with the next sequence_number; ev is
   consumed. last_buf: the stream's last event */
static ngx_int_t
ngx_http_llm_responses_send(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    cJSON *ev, ngx_uint_t last_buf)
{
    char                      *json, *type;
    size_t                     len;
    ngx_buf_t                 *b;
    ngx_chain_t               *cl;
    ngx_http_llm_responses_t  *rs = (ngx_http_llm_responses_t *)
                                    ctx->responses;

    if (ev == NULL
        || cJSON_AddNumberToObject(ev, "sequence_number", rs->seq) == NULL)
    {
        cJSON_Delete(ev);
        return NGX_ERROR;
    }
    rs->seq++;

    type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ev, "type"));
    json = type ? llm_responses_print(ev) : NULL;
    if (json == NULL) {
        cJSON_Delete(ev);
        return NGX_ERROR;
    }

    len = ngx_strlen(json);
    b = ngx_http_llm_responses_buf(ctx, len + ngx_strlen(type) + 32);
    if (b != NULL) {
        b->last = ngx_sprintf(b->last, "event: %s\ndata: %*s\n\n", type,
                              len, json);
        b->flush = 1;
        if (last_buf) {
            b->last_buf = (ctx->request == ctx->request->main) ? 1 : 0;
            b->last_in_chain = 1;
        }
    }
    free(json);
    cJSON_Delete(ev);

    cl = b ? ngx_alloc_chain_link(ctx->request->pool) : NULL;
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
ngx_http_llm_responses_emit(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    cJSON *ev)
{
    return ngx_http_llm_responses_send(ctx, last, ev, 0);
}


/* {"type": type} with the item's place: output_index, item_id,
   content_index (content_index < 0: none) */
static cJSON *
ngx_http_llm_responses_event(const char *type, ngx_int_t output_index,
    const char *item_id, ngx_int_t content_index)
{
    cJSON  *ev;

    ev = cJSON_CreateObject();
    if (ev == NULL
        || cJSON_AddStringToObject(ev, "type", type) == NULL
        || (output_index >= 0
            && cJSON_AddNumberToObject(ev, "output_index", output_index)
               == NULL)
        || (item_id
            && cJSON_AddStringToObject(ev, "item_id", item_id) == NULL)
        || (content_index >= 0
            && cJSON_AddNumberToObject(ev, "content_index", content_index)
               == NULL))
    {
        cJSON_Delete(ev);
        return NULL;
    }

    return ev;
}


/* ev.name = item (consumed), or ev deleted when either is missing */
static cJSON *
ngx_http_llm_responses_with(cJSON *ev, const char *name, cJSON *item)
{
    if (ev == NULL || item == NULL
        || !cJSON_AddItemToObject(ev, name, item))
    {
        cJSON_Delete(ev);
        cJSON_Delete(item);
        return NULL;
    }

    return ev;
}


/* response.created and response.in_progress, once */
static ngx_int_t
ngx_http_llm_responses_start(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last)
{
    char                      *id;
    cJSON                     *ev;
    ngx_uint_t                 i;
    llm_responses_result       res;
    ngx_http_llm_responses_t  *rs = (ngx_http_llm_responses_t *)
                                    ctx->responses;
    static const char         *types[] = {
        "response.created", "response.in_progress"
    };

    if (rs->started) {
        return NGX_OK;
    }
    rs->started = 1;

    id = ngx_http_llm_responses_id(ctx);
    if (id == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(&res, sizeof(res));
    res.id = id;
    res.created_at = ctx->created;
    res.model = (char *) ctx->ecf->served_model_name.data;
    res.status = "in_progress";

    for (i = 0; i < 2; i++) {
        ev = ngx_http_llm_responses_event(types[i], -1, NULL, -1);
        ev = ngx_http_llm_responses_with(ev, "response",
                                   llm_responses_object(&rs->rq, &res));
        if (ngx_http_llm_responses_emit(ctx, last, ev) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* a new item: output_item.added, and for a message its part */
static ngx_int_t
ngx_http_llm_responses_open(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    ngx_uint_t what)
{
    cJSON                     *ev, *item, *part;
    ngx_http_llm_responses_t  *rs = (ngx_http_llm_responses_t *)
                                    ctx->responses;

    if (ngx_http_llm_responses_close(ctx, last) != NGX_OK) {
        return NGX_ERROR;
    }

    llm_responses_item_id(rs->open_id, sizeof(rs->open_id),
                          what == NGX_HTTP_LLM_RESP_TEXT ? "msg" : "rs",
                          (char *) ctx->id.data, (int) rs->n_out);

    if (what == NGX_HTTP_LLM_RESP_TEXT) {
        item = llm_responses_message_item(rs->open_id, "", 0, "in_progress");
        if (item) {
            cJSON_ReplaceItemInObject(item, "content", cJSON_CreateArray());
        }
        rs->open_from = rs->text.len;

    } else {
        item = llm_responses_reasoning_item(rs->open_id, "", 0);
        if (item) {
            cJSON_ReplaceItemInObject(item, "content", cJSON_CreateArray());
        }
        rs->open_from = rs->reasoning.len;
    }

    ev = ngx_http_llm_responses_event("response.output_item.added",
                                      rs->n_out, NULL, -1);
    ev = ngx_http_llm_responses_with(ev, "item", item);
    if (ngx_http_llm_responses_emit(ctx, last, ev) != NGX_OK) {
        return NGX_ERROR;
    }

    rs->open = what;

    if (what == NGX_HTTP_LLM_RESP_TEXT) {
        item = llm_responses_message_item(rs->open_id, "", 0, "in_progress");
        part = cJSON_DetachItemFromArray(cJSON_GetObjectItem(item,
                                                             "content"), 0);
        cJSON_DeleteItemFromObject(part, "logprobs");
        cJSON_Delete(item);

        ev = ngx_http_llm_responses_event("response.content_part.added",
                                          rs->n_out, rs->open_id, 0);
        ev = ngx_http_llm_responses_with(ev, "part", part);
        if (ngx_http_llm_responses_emit(ctx, last, ev) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* the open item's .done events and output_item.done */
static ngx_int_t
ngx_http_llm_responses_close(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last)
{
    char                      *text;
    cJSON                     *ev, *item, *part;
    size_t                     len;
    const u_char              *p;
    ngx_http_llm_responses_t  *rs = (ngx_http_llm_responses_t *)
                                    ctx->responses;

    if (rs->open == NGX_HTTP_LLM_RESP_NONE) {
        return NGX_OK;
    }

    if (rs->open == NGX_HTTP_LLM_RESP_TEXT) {
        p = rs->text.data + rs->open_from;
        len = rs->text.len - rs->open_from;
        item = llm_responses_message_item(rs->open_id, (char *) p, len,
                    ctx->choices[0].finish == LLM_FINISH_LENGTH
                    ? "incomplete" : "completed");
    } else {
        p = rs->reasoning.data + rs->open_from;
        len = rs->reasoning.len - rs->open_from;
        item = llm_responses_reasoning_item(rs->open_id, (char *) p, len);
    }
    text = llm_responses_text((char *) p, len);

    if (item == NULL || text == NULL) {
        cJSON_Delete(item);
        free(text);
        return NGX_ERROR;
    }

    if (rs->open == NGX_HTTP_LLM_RESP_TEXT) {
        ev = ngx_http_llm_responses_event("response.output_text.done",
                                          rs->n_out, rs->open_id, 0);
        if (ev == NULL || cJSON_AddStringToObject(ev, "text", text) == NULL
            || cJSON_AddArrayToObject(ev, "logprobs") == NULL)
        {
            cJSON_Delete(ev);
            ev = NULL;
        }
        if (ngx_http_llm_responses_emit(ctx, last, ev) != NGX_OK) {
            goto failed;
        }

        part = cJSON_Duplicate(cJSON_GetArrayItem(cJSON_GetObjectItem(item,
                                                     "content"), 0), 1);
        cJSON_DeleteItemFromObject(part, "logprobs");
        ev = ngx_http_llm_responses_event("response.content_part.done",
                                          rs->n_out, rs->open_id, 0);
        ev = ngx_http_llm_responses_with(ev, "part", part);
        if (ngx_http_llm_responses_emit(ctx, last, ev) != NGX_OK) {
            goto failed;
        }

    } else {
        ev = ngx_http_llm_responses_event("response.reasoning_text.done",
                                          rs->n_out, rs->open_id, 0);
        if (ev == NULL
            || cJSON_AddStringToObject(ev, "text", text) == NULL)
        {
            cJSON_Delete(ev);
            ev = NULL;
        }
        if (ngx_http_llm_responses_emit(ctx, last, ev) != NGX_OK) {
            goto failed;
        }
    }
    free(text);

    ev = ngx_http_llm_responses_event("response.output_item.done",
                                      rs->n_out, NULL, -1);
    ev = ngx_http_llm_responses_with(ev, "item", item);

    rs->open = NGX_HTTP_LLM_RESP_NONE;
    rs->n_out++;

    return ngx_http_llm_responses_emit(ctx, last, ev);

failed:

    free(text);
    cJSON_Delete(item);
    return NGX_ERROR;
}


/* one piece of thinking or answer (either may be empty) */
static ngx_int_t
ngx_http_llm_responses_piece(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    ngx_uint_t what, const u_char *s, size_t len)
{
    char                      *delta;
    cJSON                     *ev;
    ngx_http_llm_resp_text_t  *t;
    ngx_http_llm_responses_t  *rs = (ngx_http_llm_responses_t *)
                                    ctx->responses;

    if (len == 0) {
        return NGX_OK;
    }

    if (rs->open != what
        && ngx_http_llm_responses_open(ctx, last, what) != NGX_OK)
    {
        return NGX_ERROR;
    }

    t = (what == NGX_HTTP_LLM_RESP_TEXT) ? &rs->text : &rs->reasoning;
    if (ngx_http_llm_resp_text_add(ctx->request->pool, t, s, len)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    delta = llm_responses_text((char *) s, len);
    if (delta == NULL) {
        return NGX_ERROR;
    }

    ev = ngx_http_llm_responses_event(what == NGX_HTTP_LLM_RESP_TEXT
                                      ? "response.output_text.delta"
                                      : "response.reasoning_text.delta",
                                      rs->n_out, rs->open_id, 0);
    if (ev == NULL || cJSON_AddStringToObject(ev, "delta", delta) == NULL
        || (what == NGX_HTTP_LLM_RESP_TEXT
            && cJSON_AddArrayToObject(ev, "logprobs") == NULL))
    {
        cJSON_Delete(ev);
        ev = NULL;
    }
    free(delta);

    return ngx_http_llm_responses_emit(ctx, last, ev);
}


/* what the splitter (or the detokenizer) let out: thinking, then answer */
static ngx_int_t
ngx_http_llm_responses_delta(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
    ngx_chain_t ***last, const llm_reply_piece *piece, const llm_out_token *o,
    ngx_uint_t role)
{
    if (ngx_http_llm_responses_start(ctx, last) != NGX_OK
        || ngx_http_llm_responses_piece(ctx, last,
                                        NGX_HTTP_LLM_RESP_REASONING,
                                        (u_char *) piece->reasoning,
                                        piece->reasoning_len)
           != NGX_OK
        || ngx_http_llm_responses_piece(ctx, last, NGX_HTTP_LLM_RESP_TEXT,
                                        (u_char *) piece->content,
                                        piece->content_len)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* the calls, parsed at the end of the reply: each an item, its arguments
   (or a custom tool's input) in one delta */
static ngx_int_t
ngx_http_llm_responses_calls(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last)
{
    int                        i;
    char                       id[96];
    cJSON                     *ev, *item, *v;
    const char                *type, *arg, *text;
    llm_tool_call              empty;
    ngx_http_llm_responses_t  *rs = (ngx_http_llm_responses_t *)
                                    ctx->responses;

    if (ngx_http_llm_responses_start(ctx, last) != NGX_OK
        || ngx_http_llm_responses_close(ctx, last) != NGX_OK)
    {
        return NGX_ERROR;
    }

    for (i = 0; i < c->out.n_calls; i++) {
        llm_responses_item_id(id, sizeof(id), "fc", (char *) ctx->id.data,
                              (int) rs->n_out);

        item = llm_responses_call_item(&rs->rq, id, &c->out.calls[i],
                                       "completed");
        if (item == NULL) {
            return NGX_ERROR;
        }
        type = cJSON_GetStringValue(cJSON_GetObjectItem(item, "type"));
        arg = (ngx_strcmp(type, "custom_tool_call") == 0) ? "input"
                                                           : "arguments";
        text = cJSON_GetStringValue(cJSON_GetObjectItem(item, arg));

        empty = c->out.calls[i];
        empty.arguments = "";
        v = llm_responses_call_item(&rs->rq, id, &empty, "in_progress");
        if (v) {
            cJSON_ReplaceItemInObject(v, arg, cJSON_CreateString(""));
        }
        ev = ngx_http_llm_responses_event("response.output_item.added",
                                          rs->n_out, NULL, -1);
        ev = ngx_http_llm_responses_with(ev, "item", v);
        if (ngx_http_llm_responses_emit(ctx, last, ev) != NGX_OK) {
            cJSON_Delete(item);
            return NGX_ERROR;
        }

        ev = ngx_http_llm_responses_event(*arg == 'i'
                               ? "response.custom_tool_call_input.delta"
                               : "response.function_call_arguments.delta",
                               rs->n_out, id, -1);
        if (ev == NULL || cJSON_AddStringToObject(ev, "delta", text) == NULL)
        {
            cJSON_Delete(ev);
            ev = NULL;
        }
        if (ngx_http_llm_responses_emit(ctx, last, ev) != NGX_OK) {
            cJSON_Delete(item);
            return NGX_ERROR;
        }

        ev = ngx_http_llm_responses_event(*arg == 'i'
                               ? "response.custom_tool_call_input.done"
                               : "response.function_call_arguments.done",
                               rs->n_out, id, -1);
        if (ev == NULL || cJSON_AddStringToObject(ev, arg, text) == NULL) {
            cJSON_Delete(ev);
            ev = NULL;
        }
        if (ngx_http_llm_responses_emit(ctx, last, ev) != NGX_OK) {
            cJSON_Delete(item);
            return NGX_ERROR;
        }

        ev = ngx_http_llm_responses_event("response.output_item.done",
                                          rs->n_out, NULL, -1);
        ev = ngx_http_llm_responses_with(ev, "item", item);
        rs->n_out++;
        if (ngx_http_llm_responses_emit(ctx, last, ev) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* the reply ended: the open item closes; a reply of nothing is an empty
   message, as when it does not stream */
static ngx_int_t
ngx_http_llm_responses_finish(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last)
{
    ngx_http_llm_responses_t  *rs = (ngx_http_llm_responses_t *)
                                    ctx->responses;

    if (ngx_http_llm_responses_start(ctx, last) != NGX_OK) {
        return NGX_ERROR;
    }

    if (rs->n_out == 0 && rs->open != NGX_HTTP_LLM_RESP_TEXT
        && !(c->out_active && c->out.n_calls)
        && ngx_http_llm_responses_open(ctx, last, NGX_HTTP_LLM_RESP_TEXT)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    return ngx_http_llm_responses_close(ctx, last);
}


/* response.completed or response.incomplete: the whole response */
static ngx_int_t
ngx_http_llm_responses_done(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last)
{
    char                      *id;
    cJSON                     *ev, *o;
    llm_responses_result       res;
    ngx_http_llm_responses_t  *rs = (ngx_http_llm_responses_t *)
                                    ctx->responses;

    id = ngx_http_llm_responses_id(ctx);
    if (id == NULL) {
        return NGX_ERROR;
    }

    ngx_http_llm_responses_result(ctx, &res, id, rs->text.data,
                                  rs->text.len, rs->reasoning.data,
                                  rs->reasoning.len);

    o = llm_responses_object(&rs->rq, &res);
    if (o != NULL) {
        ngx_http_llm_responses_keep(ctx, o);
    }

    ev = ngx_http_llm_responses_event(res.incomplete
                                      ? "response.incomplete"
                                      : "response.completed", -1, NULL, -1);
    ev = ngx_http_llm_responses_with(ev, "response", o);

    return ngx_http_llm_responses_send(ctx, last, ev, 1);
}


/* the stream failed: an error event, then response.failed */
static ngx_int_t
ngx_http_llm_responses_error(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    ngx_uint_t status, const char *code, const char *msg)
{
    char                      *id;
    cJSON                     *ev, *o, *err;
    llm_responses_result       res;
    ngx_http_llm_responses_t  *rs = (ngx_http_llm_responses_t *)
                                    ctx->responses;

    ev = ngx_http_llm_responses_event("error", -1, NULL, -1);
    if (ev == NULL || cJSON_AddStringToObject(ev, "code", code) == NULL
        || cJSON_AddStringToObject(ev, "message", msg) == NULL
        || cJSON_AddNullToObject(ev, "param") == NULL)
    {
        cJSON_Delete(ev);
        ev = NULL;
    }
    if (ngx_http_llm_responses_emit(ctx, last, ev) != NGX_OK) {
        return NGX_ERROR;
    }

    id = ngx_http_llm_responses_id(ctx);
    if (id == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(&res, sizeof(res));
    res.id = id;
    res.created_at = ctx->created;
    res.model = (char *) ctx->ecf->served_model_name.data;
    res.status = "failed";

    o = llm_responses_object(&rs->rq, &res);
    err = cJSON_CreateObject();
    if (o == NULL || err == NULL
        || cJSON_AddStringToObject(err, "code", code) == NULL
        || cJSON_AddStringToObject(err, "message", msg) == NULL)
    {
        cJSON_Delete(o);
        cJSON_Delete(err);
        return NGX_ERROR;
    }
    cJSON_ReplaceItemInObject(o, "error", err);

    ev = ngx_http_llm_responses_event("response.failed", -1, NULL, -1);
    ev = ngx_http_llm_responses_with(ev, "response", o);

    return ngx_http_llm_responses_send(ctx, last, ev, 1);
}
