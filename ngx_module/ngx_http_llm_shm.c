/*
 * A keyed store in a shared-memory zone, limit_req's shape: a slab pool,
 * a red-black tree keyed by a 32-bit hash of the key (equal hashes ordered
 * by the store's own comparison), and an LRU queue whose tail is what a
 * full zone evicts first. The token quota zone (ngx_http_llm_quota.c) and
 * the stored responses (ngx_http_llm_responses.c) are two such stores;
 * their nodes start at the rbtree node's color byte, then an ngx_queue_t
 * of the LRU at the offset the caller gives.
 *
 * A reload keeps the store: a zone of the same name and size is adopted,
 * its tree and queue go on.
 *
 * defines: ngx_http_llm_shm_init, ngx_http_llm_shm_find,
 *          ngx_http_llm_shm_free
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"


/*
 * The zone's init handler's body: shm is the new cycle's store, old the
 * previous cycle's (NULL on a first start); what is the "llm_..._zone"
 * directive, for the slab pool's log lines.
 */
ngx_int_t
ngx_http_llm_shm_init(ngx_shm_zone_t *shm_zone, ngx_http_llm_shm_t *shm,
    ngx_http_llm_shm_t *old, ngx_rbtree_insert_pt insert, const char *what)
{
    size_t  len;

    if (old) {
        shm->sh = old->sh;
        shm->shpool = old->shpool;
        return NGX_OK;
    }

    shm->shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shm_zone->shm.exists) {
        shm->sh = shm->shpool->data;
        return NGX_OK;
    }

    shm->sh = ngx_slab_alloc(shm->shpool, sizeof(ngx_http_llm_shm_sh_t));
    if (shm->sh == NULL) {
        return NGX_ERROR;
    }

    shm->shpool->data = shm->sh;

    ngx_rbtree_init(&shm->sh->rbtree, &shm->sh->sentinel, insert);
    ngx_queue_init(&shm->sh->lru);

    len = sizeof(" in  \"\"") + ngx_strlen(what) + shm_zone->shm.name.len;

    shm->shpool->log_ctx = ngx_slab_alloc(shm->shpool, len);
    if (shm->shpool->log_ctx == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(shm->shpool->log_ctx, " in %s \"%V\"%Z", what,
                &shm_zone->shm.name);

    /* a full zone evicts or refuses, and says so itself */
    shm->shpool->log_nomem = 0;

    return NGX_OK;
}


/* the node whose key cmp() finds equal, or NULL; the zone is locked */
ngx_rbtree_node_t *
ngx_http_llm_shm_find(ngx_http_llm_shm_t *shm, uint32_t hash,
    ngx_http_llm_shm_cmp_pt cmp, void *key)
{
    ngx_int_t           rc;
    ngx_rbtree_node_t  *node, *sentinel;

    node = shm->sh->rbtree.root;
    sentinel = shm->sh->rbtree.sentinel;

    while (node != sentinel) {

        if (hash != node->key) {
            node = (hash < node->key) ? node->left : node->right;
            continue;
        }

        rc = cmp(key, node);
        if (rc == 0) {
            return node;
        }

        node = (rc < 0) ? node->left : node->right;
    }

    return NULL;
}


/* node out of the tree and its queue, back to the pool; locked */
void
ngx_http_llm_shm_free(ngx_http_llm_shm_t *shm, ngx_rbtree_node_t *node,
    ngx_queue_t *lru)
{
    ngx_queue_remove(lru);
    ngx_rbtree_delete(&shm->sh->rbtree, node);
    ngx_slab_free_locked(shm->shpool, node);
}
