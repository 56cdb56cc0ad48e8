/*
 * Who may use how much, and how soon: per-key token quotas in a shared
 * zone (llm_token_quota_zone, llm_token_quota), the location's priority
 * class (llm_priority) and the key the engine is fair across
 * (llm_fair_key). docs/directives.md has the exact semantics.
 *
 * A quota is a token bucket per key and limit: it holds up to burst
 * tokens and refills at tokens per `per`, continuously and exactly (the
 * refill's remainder is kept, nothing is rounded away). At admission a
 * request takes its prompt and the completion it may write from every
 * bucket of its location, or none and is refused (429) before the engine
 * sees it; completion tokens are counted as the stream reads them, and
 * the part of the reservation not used goes back when the request ends.
 *
 * The zone is a keyed store of ngx_http_llm_shm.c (limit_req's shape: a
 * slab pool, a red-black tree of keys, an LRU queue to expire idle ones);
 * a reload with the same size keeps it.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


#define NGX_HTTP_LLM_QUOTA_MAX_TOKENS  1000000000        /* 10^9 */
#define NGX_HTTP_LLM_QUOTA_MAX_PER     (30 * 86400000ULL) /* 30 days, ms */


/* llm_token_quota_zone: the shm zone's data */
typedef struct {
    ngx_http_llm_shm_t          shm;        /* the buckets, LRU first */
    ngx_http_complex_value_t    key;
} ngx_http_llm_quota_zone_t;


/* what a bucket is found by: the key and the limit it counts for */
typedef struct {
    ngx_str_t                  *key;
    ngx_http_llm_quota_t       *limit;
} ngx_http_llm_quota_find_t;


/* one key's bucket for one limit, after the rbtree node's key */
typedef struct {
    u_char                      color;
    u_char                      dummy;
    u_short                     len;        /* of data, the key */
    ngx_queue_t                 queue;
    uint64_t                    tokens;     /* the limit it counts for */
    uint64_t                    per;
    uint64_t                    burst;
    uint64_t                    level;      /* tokens in the bucket */
    uint64_t                    frac;       /* refill remainder, in
                                               token-ms / per */
    ngx_msec_t                  last;       /* when level was exact */
    ngx_uint_t                  refs;       /* requests holding tokens */
    u_char                      data[1];
} ngx_http_llm_quota_node_t;


/* what one request holds of one quota */
typedef struct {
    ngx_http_llm_quota_t       *quota;
    ngx_http_llm_quota_node_t  *node;       /* NULL: empty key, not counted */
    uint64_t                    held;       /* tokens taken from the bucket */
} ngx_http_llm_quota_hold_t;


struct ngx_http_llm_quota_req_s {
    ngx_http_llm_quota_hold_t  *holds;
    ngx_uint_t                  n_holds;
    ngx_http_llm_ctx_t         *ctx;
    uint64_t                    reserved;   /* completion tokens held */
    uint64_t                    paid;       /* completion tokens used */
    uint64_t                    remaining;  /* the tightest bucket's */
    unsigned                    counted:1;  /* some key was not empty */
    unsigned                    settled:1;
};


/* ---------------------------------------------------------------------- */
/* the bucket's arithmetic (zone locked)                                  */

/*
 * ms until the bucket holds need tokens. The bounds of the directive's
 * numbers (10^9 tokens, 30 days) keep deficit * per within 64 bits.
 */
static uint64_t
ngx_http_llm_quota_wait(ngx_http_llm_quota_t *q, ngx_http_llm_quota_node_t *lq,
    uint64_t need)
{
    uint64_t  num;

    if (lq->level >= need) {
        return 0;
    }

    num = (need - lq->level) * q->per - lq->frac;

    return (num + q->tokens - 1) / q->tokens;
}


static void
ngx_http_llm_quota_refill(ngx_http_llm_quota_t *q,
    ngx_http_llm_quota_node_t *lq, ngx_msec_t now)
{
    uint64_t        acc, full;
    ngx_msec_int_t  elapsed;

    elapsed = (ngx_msec_int_t) (now - lq->last);
    if (elapsed <= 0) {
        return;
    }
    lq->last = now;

    full = ngx_http_llm_quota_wait(q, lq, q->burst);

    if ((uint64_t) elapsed >= full) {
        lq->level = q->burst;
        lq->frac = 0;
        return;
    }

    /* elapsed < full: elapsed * tokens < burst * per + tokens */
    acc = (uint64_t) elapsed * q->tokens + lq->frac;
    lq->level += acc / q->per;
    lq->frac = acc % q->per;
}


static void
ngx_http_llm_quota_refund(ngx_http_llm_quota_t *q,
    ngx_http_llm_quota_node_t *lq, uint64_t n)
{
    lq->level += n;

    if (lq->level >= q->burst) {
        lq->level = q->burst;
        lq->frac = 0;
    }
}


/* ---------------------------------------------------------------------- */
/* the tree of keys (zone locked)                                         */

/* keys order first, then the limits: a key has a bucket per limit */
static ngx_int_t
ngx_http_llm_quota_cmp(u_char *key, size_t len, uint64_t tokens, uint64_t per,
    uint64_t burst, ngx_http_llm_quota_node_t *lq)
{
    ngx_int_t  rc;

    rc = ngx_memn2cmp(key, lq->data, len, (size_t) lq->len);
    if (rc != 0) {
        return rc;
    }

    if (tokens != lq->tokens) {
        return tokens < lq->tokens ? -1 : 1;
    }
    if (per != lq->per) {
        return per < lq->per ? -1 : 1;
    }
    if (burst != lq->burst) {
        return burst < lq->burst ? -1 : 1;
    }

    return 0;
}


static void
ngx_http_llm_quota_rbtree_insert(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel)
{
    ngx_rbtree_node_t          **p;
    ngx_http_llm_quota_node_t   *lq, *lqt;

    lq = (ngx_http_llm_quota_node_t *) &node->color;

    for ( ;; ) {

        if (node->key != temp->key) {
            p = (node->key < temp->key) ? &temp->left : &temp->right;

        } else {
            lqt = (ngx_http_llm_quota_node_t *) &temp->color;
            p = (ngx_http_llm_quota_cmp(lq->data, lq->len, lq->tokens,
                                        lq->per, lq->burst, lqt) < 0)
                ? &temp->left : &temp->right;
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
ngx_http_llm_quota_find_cmp(void *data, ngx_rbtree_node_t *node)
{
    ngx_http_llm_quota_find_t  *find = data;

    return ngx_http_llm_quota_cmp(find->key->data, find->key->len,
                                  find->limit->tokens, find->limit->per,
                                  find->limit->burst,
                                  (ngx_http_llm_quota_node_t *) &node->color);
}


/*
 * Idle keys go from the LRU tail: up to two whose buckets are full again
 * (they would start full anyway), or, when memory ran out, the oldest one
 * nobody holds tokens of, full or not.
 */
static void
ngx_http_llm_quota_expire(ngx_http_llm_quota_zone_t *zone,
    ngx_http_llm_quota_t *q, ngx_uint_t force)
{
    ngx_uint_t                  n;
    ngx_queue_t                *qu;
    ngx_rbtree_node_t          *node;
    ngx_http_llm_quota_t        lim;
    ngx_http_llm_quota_node_t  *lq;

    for (n = 0; n < 2; n++) {

        if (ngx_queue_empty(&zone->shm.sh->lru)) {
            return;
        }

        qu = ngx_queue_last(&zone->shm.sh->lru);
        lq = ngx_queue_data(qu, ngx_http_llm_quota_node_t, queue);

        if (lq->refs) {
            return;
        }

        if (!force || n > 0) {
            lim = *q;
            lim.tokens = lq->tokens;
            lim.per = lq->per;
            lim.burst = lq->burst;

            ngx_http_llm_quota_refill(&lim, lq, ngx_current_msec);
            if (lq->level < lq->burst) {
                return;
            }
        }

        node = (ngx_rbtree_node_t *)
                   ((u_char *) lq - offsetof(ngx_rbtree_node_t, color));
        ngx_http_llm_shm_free(&zone->shm, node, qu);
    }
}


/* the key's bucket for q, a new full one if there is none; NULL: no memory */
static ngx_http_llm_quota_node_t *
ngx_http_llm_quota_lookup(ngx_http_llm_quota_t *q, ngx_str_t *key,
    ngx_log_t *log)
{
    size_t                      size;
    uint32_t                    hash;
    ngx_rbtree_node_t          *node;
    ngx_http_llm_quota_node_t  *lq;
    ngx_http_llm_quota_find_t   find;
    ngx_http_llm_quota_zone_t  *zone = q->shm_zone->data;

    hash = ngx_crc32_short(key->data, key->len);
    find.key = key;
    find.limit = q;

    node = ngx_http_llm_shm_find(&zone->shm, hash,
                                 ngx_http_llm_quota_find_cmp, &find);
    if (node != NULL) {
        lq = (ngx_http_llm_quota_node_t *) &node->color;
        ngx_queue_remove(&lq->queue);
        ngx_queue_insert_head(&zone->shm.sh->lru, &lq->queue);
        ngx_http_llm_quota_refill(q, lq, ngx_current_msec);
        return lq;
    }

    size = offsetof(ngx_rbtree_node_t, color)
           + offsetof(ngx_http_llm_quota_node_t, data)
           + key->len;

    ngx_http_llm_quota_expire(zone, q, 0);

    node = ngx_slab_alloc_locked(zone->shm.shpool, size);
    if (node == NULL) {
        ngx_http_llm_quota_expire(zone, q, 1);

        node = ngx_slab_alloc_locked(zone->shm.shpool, size);
        if (node == NULL) {
            ngx_log_error(NGX_LOG_ALERT, log, 0,
                          "llm: llm_token_quota_zone \"%V\" is full: no "
                          "room for a new key", &q->shm_zone->shm.name);
            return NULL;
        }

        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "llm: llm_token_quota_zone \"%V\" is full: the "
                      "longest idle key was dropped",
                      &q->shm_zone->shm.name);
    }

    node->key = hash;

    lq = (ngx_http_llm_quota_node_t *) &node->color;
    lq->len = (u_short) key->len;
    lq->tokens = q->tokens;
    lq->per = q->per;
    lq->burst = q->burst;
    lq->level = q->burst;
    lq->frac = 0;
    lq->last = ngx_current_msec;
    lq->refs = 0;
    ngx_memcpy(lq->data, key->data, key->len);

    ngx_rbtree_insert(&zone->shm.sh->rbtree, node);
    ngx_queue_insert_head(&zone->shm.sh->lru, &lq->queue);

    return lq;
}


/* ---------------------------------------------------------------------- */
/* replies                                                                */

/* a duration as OpenAI's headers write it: 17ms, 45s, 6m0s, 1h0m0s */
static u_char *
ngx_http_llm_quota_duration(u_char *p, uint64_t ms)
{
    uint64_t  s;

    if (ms < 1000) {
        return ngx_sprintf(p, "%uLms", ms);
    }

    s = (ms + 999) / 1000;

    if (s >= 3600) {
        return ngx_sprintf(p, "%uLh%uLm%uLs", s / 3600, s % 3600 / 60, s % 60);
    }

    if (s >= 60) {
        return ngx_sprintf(p, "%uLm%uLs", s / 60, s % 60);
    }

    return ngx_sprintf(p, "%uLs", s);
}


static ngx_int_t
ngx_http_llm_quota_header(ngx_http_request_t *r, const char *name,
    u_char *value, size_t len)
{
    ngx_table_elt_t  *h;

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->hash = 1;
    h->key.data = (u_char *) name;
    h->key.len = ngx_strlen(name);
    h->value.data = ngx_pnalloc(r->pool, len);
    if (h->value.data == NULL) {
        return NGX_ERROR;
    }
    ngx_memcpy(h->value.data, value, len);
    h->value.len = len;

    return NGX_OK;
}


/* x-ratelimit-*-tokens: OpenAI's headers, of the bucket that is tightest */
static ngx_int_t
ngx_http_llm_quota_headers(ngx_http_request_t *r, uint64_t limit,
    uint64_t remaining, uint64_t reset_ms)
{
    u_char  buf[NGX_INT64_LEN + 16], *p;

    p = ngx_sprintf(buf, "%uL", limit);
    if (ngx_http_llm_quota_header(r, "x-ratelimit-limit-tokens", buf,
                                  p - buf)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    p = ngx_sprintf(buf, "%uL", remaining);
    if (ngx_http_llm_quota_header(r, "x-ratelimit-remaining-tokens", buf,
                                  p - buf)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    p = ngx_http_llm_quota_duration(buf, reset_ms);

    return ngx_http_llm_quota_header(r, "x-ratelimit-reset-tokens", buf,
                                     p - buf);
}


/* 429 as OpenAI sends it for tokens per minute: type "tokens" */
static ngx_int_t
ngx_http_llm_quota_refuse(ngx_http_llm_ctx_t *ctx, ngx_http_llm_quota_t *q,
    uint64_t level, uint64_t need, uint64_t wait_ms, uint64_t reset_ms)
{
    u_char               per[32], in[32], *p;
    ngx_http_request_t  *r = ctx->request;

    if (ngx_http_llm_quota_headers(r, q->burst, level, reset_ms) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_http_llm_quota_duration(per, q->per);
    *p = '\0';

    if (need > q->burst) {
        /* waiting cannot help: the bucket never holds that much */
        if (ngx_http_llm_retry_after(r, (reset_ms + 999) / 1000 + 1)
            != NGX_OK)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        return ngx_http_llm_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                                   "rate_limit_exceeded",
                                   "Request too large for tokens per %s "
                                   "(llm_token_quota zone=%V): Limit %uL, "
                                   "Requested %uL. The input or output "
                                   "tokens must be reduced in order to run "
                                   "successfully.",
                                   per, &q->shm_zone->shm.name, q->burst,
                                   need);
    }

    p = ngx_http_llm_quota_duration(in, wait_ms);
    *p = '\0';

    if (ngx_http_llm_retry_after(r, ngx_max((wait_ms + 999) / 1000, 1))
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_llm_refuse(ctx, NGX_HTTP_TOO_MANY_REQUESTS,
                               "rate_limit_exceeded",
                               "Rate limit reached for tokens per %s "
                               "(llm_token_quota zone=%V): Limit %uL, "
                               "Remaining %uL, Requested %uL. Please "
                               "try again in %s.",
                               per, &q->shm_zone->shm.name, q->burst,
                               level, need, in);
}


/* ---------------------------------------------------------------------- */
/* a request's tokens                                                     */

/* give back what each hold has beyond keep tokens; refs-- when releasing */
static void
ngx_http_llm_quota_give_back(ngx_http_llm_quota_req_t *qr, uint64_t keep,
    ngx_uint_t release)
{
    ngx_uint_t                  i;
    ngx_http_llm_quota_hold_t  *h;
    ngx_http_llm_quota_zone_t  *zone;

    for (i = 0; i < qr->n_holds; i++) {
        h = &qr->holds[i];
        if (h->node == NULL) {
            continue;
        }

        zone = h->quota->shm_zone->data;
        ngx_shmtx_lock(&zone->shm.shpool->mutex);

        ngx_http_llm_quota_refill(h->quota, h->node, ngx_current_msec);
        if (h->held > keep) {
            ngx_http_llm_quota_refund(h->quota, h->node, h->held - keep);
            h->held = keep;
        }

        if (release) {
            h->node->refs--;
        }

        ngx_shmtx_unlock(&zone->shm.shpool->mutex);

        if (release) {
            h->node = NULL;
        }
    }
}


/* the tightest bucket, for the headers and $llm_quota_remaining */
static ngx_int_t
ngx_http_llm_quota_report(ngx_http_request_t *r, ngx_http_llm_quota_req_t *qr,
    ngx_uint_t headers)
{
    uint64_t                    level, reset, best_reset, limit;
    ngx_uint_t                  i, found;
    ngx_http_llm_quota_hold_t  *h;
    ngx_http_llm_quota_zone_t  *zone;

    found = 0;
    best_reset = 0;
    limit = 0;

    for (i = 0; i < qr->n_holds; i++) {
        h = &qr->holds[i];
        if (h->node == NULL) {
            continue;
        }

        zone = h->quota->shm_zone->data;
        ngx_shmtx_lock(&zone->shm.shpool->mutex);
        ngx_http_llm_quota_refill(h->quota, h->node, ngx_current_msec);
        level = h->node->level;
        reset = ngx_http_llm_quota_wait(h->quota, h->node, h->quota->burst);
        ngx_shmtx_unlock(&zone->shm.shpool->mutex);

        if (!found || level < qr->remaining) {
            found = 1;
            qr->remaining = level;
            best_reset = reset;
            limit = h->quota->burst;
        }
    }

    if (!found || !headers) {
        return NGX_OK;
    }

    return ngx_http_llm_quota_headers(r, limit, qr->remaining, best_reset);
}


/* the request ends: what it did not use goes back to the buckets */
static void
ngx_http_llm_quota_cleanup(void *data)
{
    ngx_http_llm_quota_req_t  *qr = data;

    ngx_http_llm_quota_settle(qr->ctx);
}


void
ngx_http_llm_quota_settle(ngx_http_llm_ctx_t *ctx)
{
    uint64_t                   used;
    ngx_http_llm_quota_req_t  *qr = ctx->quota;

    if (qr == NULL || qr->settled) {
        return;
    }
    qr->settled = 1;

    /* a request the engine never got, or refused (its queue was full,
       say), costs nothing */
    used = ctx->n_prompt + qr->paid;

    if (ctx->t_submit_ns == 0
        || (ctx->n_choices > 0 && ctx->choices[0].finish == LLM_FINISH_ERROR
            && ngx_http_llm_completion_tokens(ctx) == 0))
    {
        used = 0;
    }

    ngx_http_llm_quota_give_back(qr, used, 0);
    (void) ngx_http_llm_quota_report(ctx->request, qr, 0);
    ngx_http_llm_quota_give_back(qr, used, 1);     /* refs only */

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ctx->request->connection->log, 0,
                   "llm: quota settled: %uL tokens used of %uL held, "
                   "%uL remaining", used, ctx->n_prompt + qr->reserved,
                   qr->remaining);
}


/* take n from one bucket; NGX_DECLINED: it holds less */
static ngx_int_t
ngx_http_llm_quota_take(ngx_http_llm_quota_hold_t *h, uint64_t n)
{
    ngx_int_t                   rc;
    ngx_http_llm_quota_zone_t  *zone = h->quota->shm_zone->data;

    ngx_shmtx_lock(&zone->shm.shpool->mutex);

    ngx_http_llm_quota_refill(h->quota, h->node, ngx_current_msec);

    if (h->node->level >= n) {
        h->node->level -= n;
        h->held += n;
        rc = NGX_OK;

    } else {
        rc = NGX_DECLINED;
    }

    ngx_shmtx_unlock(&zone->shm.shpool->mutex);

    return rc;
}


static void
ngx_http_llm_quota_untake(ngx_http_llm_quota_hold_t *h, uint64_t n)
{
    ngx_http_llm_quota_zone_t  *zone = h->quota->shm_zone->data;

    ngx_shmtx_lock(&zone->shm.shpool->mutex);
    ngx_http_llm_quota_refund(h->quota, h->node, n);
    h->held -= n;
    ngx_shmtx_unlock(&zone->shm.shpool->mutex);
}


/*
 * One quota at admission: the key's bucket, refilled, must
 * cover the prompt and *completion (a max_tokens the client gave), or the
 * prompt and one token (none given: then *completion shrinks to what the
 * bucket holds). NGX_DECLINED: refused, *rc the status (the 429 described).
 */
static ngx_int_t
ngx_http_llm_quota_reserve(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_quota_hold_t *h, ngx_str_t *key, uint64_t *completion,
    ngx_uint_t given, ngx_int_t *rc, uint64_t *left)
{
    uint64_t                    need, level, wait, reset;
    ngx_http_llm_quota_t       *q = h->quota;
    ngx_http_llm_quota_node_t  *lq;
    ngx_http_llm_quota_zone_t  *zone = q->shm_zone->data;

    ngx_shmtx_lock(&zone->shm.shpool->mutex);

    lq = ngx_http_llm_quota_lookup(q, key, r->connection->log);
    if (lq == NULL) {
        ngx_shmtx_unlock(&zone->shm.shpool->mutex);
        *rc = ngx_http_llm_refuse(ctx, NGX_HTTP_SERVICE_UNAVAILABLE,
                                  "quota_zone_full",
                                  "the server's quota zone is full, "
                                  "retry later");
        return NGX_DECLINED;
    }

    need = ctx->n_prompt + (given ? *completion : 1);

    if (lq->level < need) {
        level = lq->level;
        *left = level;
        wait = (need <= q->burst) ? ngx_http_llm_quota_wait(q, lq, need) : 0;
        reset = ngx_http_llm_quota_wait(q, lq, q->burst);
        ngx_shmtx_unlock(&zone->shm.shpool->mutex);

        *rc = ngx_http_llm_quota_refuse(ctx, q, level, need, wait, reset);
        return NGX_DECLINED;
    }

    if (!given) {
        *completion = ngx_min(*completion, lq->level - ctx->n_prompt);
    }

    lq->level -= ctx->n_prompt + *completion;
    lq->refs++;
    h->node = lq;
    h->held = ctx->n_prompt + *completion;

    ngx_shmtx_unlock(&zone->shm.shpool->mutex);

    return NGX_OK;
}


/*
 * Admission: every quota of the location takes the prompt and the
 * completion the request may write (max_tokens; without it, up to what
 * the tightest bucket holds, more taken as the stream goes), or the
 * request is refused with 429 before the engine does any work.
 */
ngx_int_t
ngx_http_llm_quota_admit(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    ngx_int_t                   rc;
    ngx_str_t                   key;
    uint64_t                    completion;
    ngx_uint_t                  i, given;
    ngx_http_cleanup_t         *cln;
    ngx_http_llm_quota_t       *q;
    ngx_http_llm_quota_req_t   *qr;
    ngx_http_llm_loc_conf_t    *llcf;
    ngx_http_llm_quota_zone_t  *zone;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    if (llcf->quotas == NULL) {
        return NGX_OK;
    }

    qr = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_quota_req_t));
    if (qr == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    qr->holds = ngx_pcalloc(r->pool, llcf->quotas->nelts
                                     * sizeof(ngx_http_llm_quota_hold_t));
    if (qr->holds == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln = ngx_http_cleanup_add(r, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }
    cln->handler = ngx_http_llm_quota_cleanup;
    cln->data = qr;

    qr->ctx = ctx;
    ctx->quota = qr;

    given = (ctx->req.given & LLM_API_GIVEN_MAX_TOKENS) != 0;
    /* every choice may write max_tokens */
    completion = (uint64_t) ctx->max_tokens
                 * (ctx->req.n > 1 ? (uint64_t) ctx->req.n : 1);
    q = llcf->quotas->elts;

    for (i = 0; i < llcf->quotas->nelts; i++) {
        zone = q[i].shm_zone->data;
        qr->holds[i].quota = &q[i];
        qr->n_holds = i + 1;

        if (ngx_http_complex_value(r, &zone->key, &key) != NGX_OK) {
            ngx_http_llm_quota_give_back(qr, 0, 1);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        if (key.len == 0) {
            continue;           /* as limit_req: an empty key is not counted */
        }

        if (key.len > 65535) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "llm: the key of llm_token_quota_zone \"%V\" is "
                          "longer than 65535 bytes: %uz",
                          &q[i].shm_zone->shm.name, key.len);
            ngx_http_llm_quota_give_back(qr, 0, 1);
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        if (ngx_http_llm_quota_reserve(r, ctx, &qr->holds[i], &key,
                                       &completion, given, &rc,
                                       &qr->remaining)
            != NGX_OK)
        {
            /* $llm_quota_remaining: what the refusing bucket holds */
            ngx_http_llm_quota_give_back(qr, 0, 1);
            qr->settled = 1;
            qr->counted = 1;
            return rc;
        }

        qr->counted = 1;
    }

    /* a later bucket may have held less: the earlier ones keep as much */
    ngx_http_llm_quota_give_back(qr, ctx->n_prompt + completion, 0);
    qr->reserved = completion;

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm: quota: %uD prompt and %uL completion tokens held "
                   "of %ui quotas", ctx->n_prompt, completion,
                   llcf->quotas->nelts);

    if (!qr->counted) {
        return NGX_OK;
    }

    if (ngx_http_llm_quota_report(r, qr, 1) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return NGX_OK;
}


/*
 * One more completion token, as the stream reads it: within the
 * reservation, or one more from every bucket. NGX_DECLINED: a bucket is
 * empty, the generation ends here with finish_reason "length".
 */
ngx_int_t
ngx_http_llm_quota_spend(ngx_http_llm_ctx_t *ctx)
{
    ngx_uint_t                 i, j;
    ngx_http_llm_quota_req_t  *qr = ctx->quota;

    if (qr == NULL || !qr->counted) {
        return NGX_OK;
    }

    if (qr->paid < qr->reserved) {
        qr->paid++;
        return NGX_OK;
    }

    for (i = 0; i < qr->n_holds; i++) {
        if (qr->holds[i].node == NULL) {
            continue;
        }

        if (ngx_http_llm_quota_take(&qr->holds[i], 1) != NGX_OK) {
            break;
        }
    }

    if (i < qr->n_holds) {
        /* all or none: the buckets before the empty one get theirs back */
        for (j = 0; j < i; j++) {
            if (qr->holds[j].node != NULL) {
                ngx_http_llm_quota_untake(&qr->holds[j], 1);
            }
        }

        ngx_log_error(NGX_LOG_INFO, ctx->request->connection->log, 0,
                      "llm: token quota of llm_token_quota_zone \"%V\" "
                      "spent after %uL completion tokens: generation cut "
                      "with finish_reason \"length\"",
                      &qr->holds[i].quota->shm_zone->shm.name, qr->paid);
        return NGX_DECLINED;
    }

    qr->reserved++;
    qr->paid++;

    return NGX_OK;
}


/* $llm_quota_remaining: the tightest bucket's tokens, "-" when none */
static ngx_int_t
ngx_http_llm_quota_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    u_char              *p;
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    if (ctx == NULL || ctx->quota == NULL || !ctx->quota->counted) {
        v->not_found = 1;
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    v->data = p;
    v->len = ngx_sprintf(p, "%uL", ctx->quota->remaining) - p;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    return NGX_OK;
}


ngx_int_t
ngx_http_llm_quota_add_variables(ngx_conf_t *cf)
{
    ngx_str_t             name = ngx_string("llm_quota_remaining");
    ngx_http_variable_t  *var;

    var = ngx_http_add_variable(cf, &name, NGX_HTTP_VAR_NOCACHEABLE);
    if (var == NULL) {
        return NGX_ERROR;
    }

    var->get_handler = ngx_http_llm_quota_variable;

    return NGX_OK;
}


/* ---------------------------------------------------------------------- */
/* priority and fairness                                                  */

/* "interactive", "batch" or an int32; NGX_ERROR: none of these */
static ngx_int_t
ngx_http_llm_priority_parse(ngx_str_t *s, int64_t *prio)
{
    u_char      *p;
    int64_t      v;
    ngx_uint_t   neg;

    if (s->len == sizeof("interactive") - 1
        && ngx_strncmp(s->data, "interactive", s->len) == 0)
    {
        *prio = LLM_PRIORITY_INTERACTIVE;
        return NGX_OK;
    }

    if (s->len == sizeof("batch") - 1
        && ngx_strncmp(s->data, "batch", s->len) == 0)
    {
        *prio = LLM_PRIORITY_BATCH;
        return NGX_OK;
    }

    p = s->data;
    neg = (s->len > 1 && *p == '-');
    p += neg;

    if (p == s->data + s->len || s->len > 11) {
        return NGX_ERROR;
    }

    for (v = 0; p < s->data + s->len; p++) {
        if (*p < '0' || *p > '9') {
            return NGX_ERROR;
        }
        v = v * 10 + (*p - '0');
    }

    v = neg ? -v : v;
    if (v < INT32_MIN || v > INT32_MAX) {
        return NGX_ERROR;
    }

    *prio = v;
    return NGX_OK;
}


/* FNV-1a, 64 bits; 0 is "no key" to the engine */
static uint64_t
ngx_http_llm_fair_hash(ngx_str_t *s)
{
    size_t    i;
    uint64_t  h = 0xcbf29ce484222325ULL;

    for (i = 0; i < s->len; i++) {
        h = (h ^ s->data[i]) * 0x100000001b3ULL;
    }

    return h ? h : 1;
}


/*
 * The request's priority: the location's class, or later if the body's
 * "priority" asks for later (lower runs first: a client may move itself
 * back, never ahead). And the hash of llm_fair_key's value.
 */
ngx_int_t
ngx_http_llm_priority(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    int64_t                   class;
    ngx_str_t                 v;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    class = LLM_PRIORITY_INTERACTIVE;

    if (llcf->priority != NULL) {
        if (ngx_http_complex_value(r, llcf->priority, &v) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        if (ngx_http_llm_priority_parse(&v, &class) != NGX_OK) {
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "llm: llm_priority evaluated to \"%V\", not "
                          "interactive, batch or a 32-bit integer", &v);
            return ngx_http_llm_refuse(ctx, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                       "bad_priority",
                                       "the server's llm_priority is "
                                       "misconfigured");
        }
    }

    ctx->priority = class;

    if ((ctx->req.given & LLM_API_GIVEN_PRIORITY)
        && ctx->req.priority > class)
    {
        ctx->priority = ctx->req.priority;
    }

    ctx->fair_key = 0;

    if (llcf->fair_key != NULL) {
        if (ngx_http_complex_value(r, llcf->fair_key, &v) != NGX_OK) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        if (v.len) {
            ctx->fair_key = ngx_http_llm_fair_hash(&v);
        }
    }

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm: priority %L (class %L, body %d)", ctx->priority,
                   class, ctx->req.priority);

    return NGX_OK;
}


/* ---------------------------------------------------------------------- */
/* configuration                                                          */

static ngx_int_t
ngx_http_llm_quota_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_llm_quota_zone_t  *ozone = data;
    ngx_http_llm_quota_zone_t  *zone = shm_zone->data;

    /* a reload with the same size: the buckets go on */
    if (ozone
        && (zone->key.value.len != ozone->key.value.len
            || ngx_strncmp(zone->key.value.data, ozone->key.value.data,
                           zone->key.value.len)
               != 0))
    {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "llm_token_quota_zone \"%V\" uses the \"%V\" key "
                      "while previously it used the \"%V\" key",
                      &shm_zone->shm.name, &zone->key.value,
                      &ozone->key.value);
        return NGX_ERROR;
    }

    return ngx_http_llm_shm_init(shm_zone, &zone->shm,
                                 ozone ? &ozone->shm : NULL,
                                 ngx_http_llm_quota_rbtree_insert,
                                 "llm_token_quota_zone");
}


/* llm_token_quota_zone KEY zone=NAME:SIZE; */
char *
ngx_http_llm_quota_zone_conf(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    u_char                            *p;
    ssize_t                            size;
    ngx_str_t                         *value, name, s;
    ngx_uint_t                         i;
    ngx_shm_zone_t                    *shm_zone;
    ngx_http_llm_quota_zone_t         *zone;
    ngx_http_compile_complex_value_t   ccv;

    value = cf->args->elts;

    zone = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_quota_zone_t));
    if (zone == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));
    ccv.cf = cf;
    ccv.value = &value[1];
    ccv.complex_value = &zone->key;

    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    size = 0;
    ngx_str_null(&name);

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "zone=", 5) != 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid parameter \"%V\": "
                               "llm_token_quota_zone takes only zone=",
                               &value[i]);
            return NGX_CONF_ERROR;
        }

        name.data = value[i].data + 5;
        p = (u_char *) ngx_strchr(name.data, ':');

        if (p == NULL) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid zone size \"%V\": zone=NAME:SIZE",
                               &value[i]);
            return NGX_CONF_ERROR;
        }

        name.len = p - name.data;
        s.data = p + 1;
        s.len = value[i].data + value[i].len - s.data;

        size = ngx_parse_size(&s);

        if (size == NGX_ERROR || name.len == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid zone size \"%V\": zone=NAME:SIZE",
                               &value[i]);
            return NGX_CONF_ERROR;
        }

        if (size < (ssize_t) (8 * ngx_pagesize)) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "llm_token_quota_zone \"%V\" is too small: "
                               "%V, at least %uz", &value[i], &s,
                               8 * ngx_pagesize);
            return NGX_CONF_ERROR;
        }
    }

    if (name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" must have \"zone\" parameter",
                           &cmd->name);
        return NGX_CONF_ERROR;
    }

    shm_zone = ngx_shared_memory_add(cf, &name, size, &ngx_http_llm_module);
    if (shm_zone == NULL) {
        return NGX_CONF_ERROR;
    }

    if (shm_zone->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "llm_token_quota_zone \"%V\" is already declared",
                           &name);
        return NGX_CONF_ERROR;
    }

    shm_zone->init = ngx_http_llm_quota_init_zone;
    shm_zone->data = zone;

    return NGX_CONF_OK;
}


/* a tokens=/burst= number: 1..10^9 */
static ngx_int_t
ngx_http_llm_quota_number(ngx_str_t *s, uint64_t *n)
{
    ngx_int_t  v;

    v = ngx_atoi(s->data, s->len);
    if (v == NGX_ERROR || v < 1 || v > NGX_HTTP_LLM_QUOTA_MAX_TOKENS) {
        return NGX_ERROR;
    }

    *n = (uint64_t) v;
    return NGX_OK;
}


/* llm_token_quota zone=NAME tokens=N per=TIME [burst=N]; */
char *
ngx_http_llm_quota_conf(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_loc_conf_t *llcf = conf;

    ngx_int_t              per;
    ngx_str_t             *value, s;
    ngx_uint_t             i;
    ngx_shm_zone_t        *shm_zone;
    ngx_http_llm_quota_t  *q, *qs;

    value = cf->args->elts;

    shm_zone = NULL;
    q = NULL;

    if (llcf->quotas == NULL) {
        llcf->quotas = ngx_array_create(cf->pool, 2,
                                        sizeof(ngx_http_llm_quota_t));
        if (llcf->quotas == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    q = ngx_array_push(llcf->quotas);
    if (q == NULL) {
        return NGX_CONF_ERROR;
    }
    ngx_memzero(q, sizeof(ngx_http_llm_quota_t));

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "zone=", 5) == 0) {
            s.len = value[i].len - 5;
            s.data = value[i].data + 5;

            shm_zone = ngx_shared_memory_add(cf, &s, 0, &ngx_http_llm_module);
            if (shm_zone == NULL) {
                return NGX_CONF_ERROR;
            }
            continue;
        }

        if (ngx_strncmp(value[i].data, "tokens=", 7) == 0) {
            s.len = value[i].len - 7;
            s.data = value[i].data + 7;

            if (ngx_http_llm_quota_number(&s, &q->tokens) != NGX_OK) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid tokens \"%V\": 1 to %d",
                                   &value[i], NGX_HTTP_LLM_QUOTA_MAX_TOKENS);
                return NGX_CONF_ERROR;
            }
            continue;
        }

        if (ngx_strncmp(value[i].data, "burst=", 6) == 0) {
            s.len = value[i].len - 6;
            s.data = value[i].data + 6;

            if (ngx_http_llm_quota_number(&s, &q->burst) != NGX_OK) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid burst \"%V\": 1 to %d",
                                   &value[i], NGX_HTTP_LLM_QUOTA_MAX_TOKENS);
                return NGX_CONF_ERROR;
            }
            continue;
        }

        if (ngx_strncmp(value[i].data, "per=", 4) == 0) {
            s.len = value[i].len - 4;
            s.data = value[i].data + 4;

            per = ngx_parse_time(&s, 0);
            if (per == NGX_ERROR || per < 1000
                || (uint64_t) per > NGX_HTTP_LLM_QUOTA_MAX_PER)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid per \"%V\": a time from 1s to "
                                   "30d, such as 1m, 1h or 1d", &value[i]);
                return NGX_CONF_ERROR;
            }
            q->per = (uint64_t) per;
            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\"", &value[i]);
        return NGX_CONF_ERROR;
    }

    if (shm_zone == NULL || q->tokens == 0 || q->per == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" needs zone=, tokens= and per=",
                           &cmd->name);
        return NGX_CONF_ERROR;
    }

    if (q->burst == 0) {
        q->burst = q->tokens;
    }

    q->shm_zone = shm_zone;

    qs = llcf->quotas->elts;
    for (i = 0; i + 1 < llcf->quotas->nelts; i++) {
        if (qs[i].shm_zone == shm_zone && qs[i].tokens == q->tokens
            && qs[i].per == q->per && qs[i].burst == q->burst)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "duplicate llm_token_quota for zone \"%V\"",
                               &shm_zone->shm.name);
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


/* the zones llm_token_quota names exist: checked once the http{} is read */
char *
ngx_http_llm_quota_merge(ngx_conf_t *cf, ngx_http_llm_loc_conf_t *prev,
    ngx_http_llm_loc_conf_t *conf)
{
    ngx_uint_t             i;
    ngx_http_llm_quota_t  *q;

    if (conf->quotas == NULL) {
        conf->quotas = prev->quotas;
    }

    if (conf->priority == NULL) {
        conf->priority = prev->priority;
    }

    if (conf->fair_key == NULL) {
        conf->fair_key = prev->fair_key;
    }

    if (conf->quotas == NULL) {
        return NGX_CONF_OK;
    }

    q = conf->quotas->elts;
    for (i = 0; i < conf->quotas->nelts; i++) {
        if (q[i].shm_zone->data == NULL
            || q[i].shm_zone->init != ngx_http_llm_quota_init_zone)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "unknown llm_token_quota_zone \"%V\"",
                               &q[i].shm_zone->shm.name);
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


/* llm_priority interactive | batch | N | $variable */
char *
ngx_http_llm_priority_conf(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_loc_conf_t *llcf = conf;

    int64_t    prio;
    ngx_str_t *value;
    char      *rv;

    if (llcf->priority != NULL) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_http_script_variables_count(&value[1]) == 0
        && ngx_http_llm_priority_parse(&value[1], &prio) != NGX_OK)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid llm_priority \"%V\": interactive, batch, "
                           "a 32-bit integer or a variable", &value[1]);
        return NGX_CONF_ERROR;
    }

    rv = ngx_http_set_complex_value_slot(cf, cmd, conf);

    return rv;
}
