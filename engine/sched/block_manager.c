/*
 * Block manager: refcounted KV block ids, prefix cache with LRU eviction.
 * block_manager.h explains the design.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/block_manager.h"


/* ---------------------------------------------------------------------------
 * hashing
 */

/* the chain hash of one full block: parent's hash, then its token ids */
static uint64_t
block_hash(uint64_t parent, const int32_t *tokens, int n)
{
    uint64_t  h = parent ^ 0x243f6a8885a308d3ull;
    int       i;

    for (i = 0; i < n; i++) {
        h ^= (uint32_t) tokens[i];
        h *= 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    return h;
}


static uint32_t
map_slot(const llm_block_manager *bm, uint64_t h)
{
    return (uint32_t) (h ^ (h >> 32)) & (bm->map_cap - 1);
}


/* group g's registered page with this content, or -1 */
static int32_t
map_find(const llm_block_manager *bm, uint64_t h, uint64_t parent,
    const int32_t *tokens, int g)
{
    uint32_t  i, mask = bm->map_cap - 1;
    int32_t   id;
    size_t    bytes = (size_t) bm->block_size * sizeof(int32_t);

    for (i = map_slot(bm, h); bm->map[i] >= 0; i = (i + 1) & mask) {
        id = bm->map[i];
        if (bm->hash[id] == h && bm->parent[id] == parent
            && bm->group[id] == g
            && memcmp(bm->tokens + (size_t) id * bm->block_size, tokens,
                      bytes) == 0)
        {
            return id;
        }
    }
    return -1;
}


static void
map_insert(llm_block_manager *bm, int32_t id)
{
    uint32_t  i, mask = bm->map_cap - 1;

    for (i = map_slot(bm, bm->hash[id]); bm->map[i] >= 0; i = (i + 1) & mask)
    {
        /* probe on: the map holds at most n_blocks of 2 * n_blocks slots */
    }
    bm->map[i] = id;
}


/* backward-shift deletion keeps every probe chain unbroken without
 * tombstones */
static void
map_remove(llm_block_manager *bm, int32_t id)
{
    uint32_t  i, j, home, mask = bm->map_cap - 1;

    for (i = map_slot(bm, bm->hash[id]); bm->map[i] != id;
         i = (i + 1) & mask)
    {
        /* a registered block is always in the map */
    }
    j = i;
    for ( ;; ) {
        bm->map[i] = -1;
        for ( ;; ) {
            j = (j + 1) & mask;
            if (bm->map[j] < 0) {
                return;
            }
            home = map_slot(bm, bm->hash[bm->map[j]]);
            /* move map[j] back into the hole at i unless its home lies
               cyclically in (i, j] */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
                break;
            }
        }
        bm->map[i] = bm->map[j];
        i = j;
    }
}


/* ---------------------------------------------------------------------------
 * LRU list of evictable blocks
 */

static void
lru_push_tail(llm_block_manager *bm, int32_t id)
{
    bm->lru_prev[id] = bm->lru_tail;
    bm->lru_next[id] = -1;
    if (bm->lru_tail >= 0) {
        bm->lru_next[bm->lru_tail] = id;
    } else {
        bm->lru_head = id;
    }
    bm->lru_tail = id;
    bm->n_evictable++;
}


static void
lru_unlink(llm_block_manager *bm, int32_t id)
{
    int32_t  p = bm->lru_prev[id], n = bm->lru_next[id];

    if (p >= 0) {
        bm->lru_next[p] = n;
    } else {
        bm->lru_head = n;
    }
    if (n >= 0) {
        bm->lru_prev[n] = p;
    } else {
        bm->lru_tail = p;
    }
    bm->lru_prev[id] = bm->lru_next[id] = -1;
    bm->n_evictable--;
}


/* ---------------------------------------------------------------------------
 * life cycle
 */

int
llm_blocks_init(llm_block_manager *bm, int n_blocks, int block_size,
    int prefix_caching, char *err, size_t err_len)
{
    int  i;

    memset(bm, 0, sizeof(*bm));
    if (n_blocks < 1 || n_blocks > (1 << 28) || block_size < 1
        || block_size > 4096)
    {
        snprintf(err, err_len, "block manager: %d blocks of %d tokens "
                 "(1..2^28 blocks of 1..4096 allowed)", n_blocks, block_size);
        return -1;
    }
    bm->n_blocks = n_blocks;
    bm->block_size = block_size;
    bm->prefix_caching = prefix_caching;
    bm->n_groups = 1;
    bm->map_cap = 16;
    while (bm->map_cap < 2 * (uint32_t) n_blocks) {
        bm->map_cap *= 2;
    }
    bm->ref = calloc(n_blocks, sizeof(*bm->ref));
    bm->hash = calloc(n_blocks, sizeof(*bm->hash));
    bm->parent = calloc(n_blocks, sizeof(*bm->parent));
    bm->registered = calloc(n_blocks, sizeof(*bm->registered));
    bm->group = calloc(n_blocks, sizeof(*bm->group));
    bm->tokens = malloc((size_t) n_blocks * block_size * sizeof(int32_t));
    bm->free_ids = malloc(n_blocks * sizeof(*bm->free_ids));
    bm->lru_prev = malloc(n_blocks * sizeof(*bm->lru_prev));
    bm->lru_next = malloc(n_blocks * sizeof(*bm->lru_next));
    bm->map = malloc(bm->map_cap * sizeof(*bm->map));
    if (bm->ref == NULL || bm->hash == NULL || bm->parent == NULL
        || bm->registered == NULL || bm->group == NULL || bm->tokens == NULL
        || bm->free_ids == NULL || bm->lru_prev == NULL
        || bm->lru_next == NULL || bm->map == NULL)
    {
        llm_blocks_free(bm);
        snprintf(err, err_len, "block manager: out of memory for %d blocks",
                 n_blocks);
        return -1;
    }
    /* popped from the top: block 0 first, like kv.c's allocator */
    for (i = 0; i < n_blocks; i++) {
        bm->free_ids[i] = n_blocks - 1 - i;
        bm->lru_prev[i] = bm->lru_next[i] = -1;
    }
    bm->n_free = n_blocks;
    bm->lru_head = bm->lru_tail = -1;
    memset(bm->map, 0xff, bm->map_cap * sizeof(*bm->map));
    return 0;
}


void
llm_blocks_free(llm_block_manager *bm)
{
    free(bm->ref);
    free(bm->hash);
    free(bm->parent);
    free(bm->registered);
    free(bm->group);
    free(bm->tokens);
    free(bm->free_ids);
    free(bm->lru_prev);
    free(bm->lru_next);
    free(bm->map);
    memset(bm, 0, sizeof(*bm));
}


int
llm_blocks_table_init(llm_block_table *t, const llm_block_manager *bm,
    int max_tokens)
{
    memset(t, 0, sizeof(*t));
    t->cap = (max_tokens + bm->block_size - 1) / bm->block_size;
    if (t->cap < 1) {
        t->cap = 1;
    }
    t->ids = malloc((size_t) t->cap * bm->n_groups * sizeof(*t->ids));
    return t->ids != NULL ? 0 : -1;
}


void
llm_blocks_table_free(llm_block_table *t)
{
    free(t->ids);
    memset(t, 0, sizeof(*t));
}


/* ---------------------------------------------------------------------------
 * allocation
 */

/* a block with ref 1 for new content: a free one, else the least recently
 * released cached one (forgotten by the cache); -1 when none is left */
static int32_t
take_block(llm_block_manager *bm)
{
    int32_t  id;

    if (bm->n_free > 0) {
        id = bm->free_ids[--bm->n_free];
    } else if (bm->lru_head >= 0) {
        id = bm->lru_head;
        lru_unlink(bm, id);
        map_remove(bm, id);
        bm->registered[id] = 0;
        bm->evictions++;
    } else {
        return -1;
    }
    bm->ref[id] = 1;
    return id;
}


static void
drop_block(llm_block_manager *bm, int32_t id)
{
    if (--bm->ref[id] > 0) {
        return;
    }
    if (bm->registered[id]) {
        lru_push_tail(bm, id);
    } else {
        bm->free_ids[bm->n_free++] = id;
    }
}


/* group g's row of the table */
static int32_t *
row(const llm_block_table *t, int g)
{
    return t->ids + (size_t) g * t->cap;
}


int
llm_blocks_match_prefix(llm_block_manager *bm, llm_block_table *t,
    const int32_t *tokens, int n_tokens)
{
    const int32_t  *blk;
    uint64_t        h;
    int32_t         id[LLM_KV_MAX_GROUPS];
    int             k, g, max_k;

    if (!bm->prefix_caching || t->n != 0 || n_tokens < 1) {
        return 0;
    }
    /* the block holding the last token is never matched: its logits are
       needed, so at least that token is computed */
    max_k = (n_tokens - 1) / bm->block_size;
    if (max_k > t->cap) {
        max_k = t->cap;
    }
    t->last_hash = 0;
    for (k = 0; k < max_k; k++) {
        blk = tokens + (size_t) k * bm->block_size;
        h = block_hash(t->last_hash, blk, bm->block_size);
        for (g = 0; g < bm->n_groups; g++) {
            id[g] = map_find(bm, h, t->last_hash, blk, g);
            if (id[g] < 0) {
                break;
            }
        }
        if (g < bm->n_groups) {
            break;              /* a hit needs every group's page */
        }
        for (g = 0; g < bm->n_groups; g++) {
            if (bm->ref[id[g]] == 0) {
                lru_unlink(bm, id[g]);
            }
            bm->ref[id[g]]++;
            row(t, g)[k] = id[g];
        }
        t->n++;
        t->last_hash = h;
    }
    t->n_hashed = t->n;
    return t->n * bm->block_size;
}


int
llm_blocks_needed(const llm_block_manager *bm, const llm_block_table *t,
    int n_tokens)
{
    int  need = (n_tokens + bm->block_size - 1) / bm->block_size - t->n;

    return need > 0 ? need * bm->n_groups : 0;
}


int
llm_blocks_ensure(llm_block_manager *bm, llm_block_table *t, int n_tokens)
{
    int  g, need = llm_blocks_needed(bm, t, n_tokens);

    if (need > llm_blocks_n_available(bm)
        || t->n + need / bm->n_groups > t->cap)
    {
        return -1;
    }
    for ( ; need > 0; need -= bm->n_groups) {
        for (g = 0; g < bm->n_groups; g++) {
            row(t, g)[t->n] = take_block(bm);
        }
        t->n++;
    }
    return 0;
}


void
llm_blocks_commit(llm_block_manager *bm, llm_block_table *t,
    const int32_t *tokens, int n_computed)
{
    const int32_t  *blk;
    uint64_t        h;
    int32_t         id;
    int             g, full = n_computed / bm->block_size;

    if (!bm->prefix_caching) {
        return;
    }
    if (full > t->n) {
        full = t->n;
    }
    for ( ; t->n_hashed < full; t->n_hashed++) {
        blk = tokens + (size_t) t->n_hashed * bm->block_size;
        h = block_hash(t->last_hash, blk, bm->block_size);
        for (g = 0; g < bm->n_groups; g++) {
            id = row(t, g)[t->n_hashed];
            /* another sequence may have registered the same content
               first: keep its copy, ours goes back to the free list when
               released; a page dropped out of the window (after a failed
               forward's llm_blocks_forget) only continues the chain */
            if (id >= 0 && !bm->registered[id]
                && map_find(bm, h, t->last_hash, blk, g) < 0)
            {
                bm->hash[id] = h;
                bm->parent[id] = t->last_hash;
                bm->group[id] = (uint8_t) g;
                memcpy(bm->tokens + (size_t) id * bm->block_size, blk,
                       bm->block_size * sizeof(int32_t));
                bm->registered[id] = 1;
                map_insert(bm, id);
            }
        }
        t->last_hash = h;
    }
}


int
llm_blocks_fork(llm_block_manager *bm, llm_block_table *t,
    const llm_block_table *src, int n_tokens, int32_t *copy_src,
    int32_t *copy_dst)
{
    int32_t  id;
    int      k, g, full = n_tokens / bm->block_size,
             partial = n_tokens % bm->block_size != 0;

    for (g = 0; g < bm->n_groups; g++) {
        copy_src[g] = copy_dst[g] = -1;
    }
    if (t->n != 0 || full + partial > src->n || full + partial > t->cap
        || (partial && llm_blocks_n_available(bm) < bm->n_groups))
    {
        return -1;
    }
    for (g = 0; g < bm->n_groups; g++) {
        for (k = 0; k < full; k++) {
            id = row(src, g)[k];
            if (id >= 0) {
                bm->ref[id]++;      /* held by src: not in the LRU */
            }
            row(t, g)[k] = id;      /* -1 where src dropped it */
        }
        if (partial) {
            copy_src[g] = row(src, g)[full];
            copy_dst[g] = take_block(bm);
            row(t, g)[full] = copy_dst[g];
        }
    }
    t->n = full + partial;
    t->n_dropped = src->n_dropped < full ? src->n_dropped : full;
    /* only full blocks are registered: the chain continues from there */
    t->n_hashed = src->n_hashed;
    t->last_hash = src->last_hash;
    return 0;
}


void
llm_blocks_forget(llm_block_manager *bm, llm_block_table *t)
{
    int32_t  id;
    int      k, g;

    for (g = 0; g < bm->n_groups; g++) {
        for (k = 0; k < t->n; k++) {
            id = row(t, g)[k];
            if (id >= 0 && bm->registered[id]) {
                map_remove(bm, id);
                bm->registered[id] = 0;
            }
        }
    }
    t->n_hashed = 0;
    t->last_hash = 0;
}


/* drop logical blocks [keep, t->n), the last first */
static void
drop_tail(llm_block_manager *bm, llm_block_table *t, int keep)
{
    int  g;

    while (t->n > keep) {
        t->n--;
        for (g = 0; g < bm->n_groups; g++) {
            if (row(t, g)[t->n] >= 0) {
                drop_block(bm, row(t, g)[t->n]);
            }
        }
    }
}


void
llm_blocks_release(llm_block_manager *bm, llm_block_table *t)
{
    drop_tail(bm, t, 0);
    t->n_dropped = 0;
    t->n_hashed = 0;
    t->last_hash = 0;
}


void
llm_blocks_truncate(llm_block_manager *bm, llm_block_table *t, int n_tokens)
{
    int  keep = (n_tokens + bm->block_size - 1) / bm->block_size;

    if (keep < t->n_hashed) {
        keep = t->n_hashed;     /* registered content is never dropped */
    }
    drop_tail(bm, t, keep);
}


/* ---------------------------------------------------------------------------
 * layer groups, sliding window
 */

void
llm_blocks_set_layout(llm_block_manager *bm, const llm_kv_layout *lo)
{
    bm->n_groups = lo->n_groups;
    bm->window = lo->window;
    memcpy(bm->sliding, lo->sliding, sizeof(bm->sliding));
}


int
llm_blocks_slide(llm_block_manager *bm, llm_block_table *t, int pos)
{
    int  k, g, drop, n = 0;

    if (bm->window == 0 || pos - bm->window + 1 <= 0) {
        return 0;
    }
    /* block k holds positions k*bs .. (k+1)*bs - 1: dropped when even the
       last is before the window of the first query */
    drop = (pos - bm->window + 1) / bm->block_size;
    if (drop > t->n) {
        drop = t->n;
    }
    /* the last first, so the LRU list evicts a prefix's head last (as
       llm_blocks_release): a later hit needs the whole chain */
    for (k = drop - 1; k >= t->n_dropped; k--) {
        for (g = 0; g < bm->n_groups; g++) {
            if (bm->sliding[g]) {
                drop_block(bm, row(t, g)[k]);
                row(t, g)[k] = -1;
                n++;
            }
        }
    }
    if (drop > t->n_dropped) {
        t->n_dropped = drop;
    }
    bm->slid += n;
    return n;
}


int
llm_blocks_peak(const llm_block_manager *bm, int n_tokens, int chunk)
{
    int  all = (n_tokens + bm->block_size - 1) / bm->block_size, w, g, n = 0;

    /* a step from n holds positions n - window + 1 .. n + chunk - 1 (those
       before 0 aside), which straddle at most one more block boundary
       than their count needs */
    w = bm->window == 0 ? all
        : (bm->window - 1 + chunk + bm->block_size - 1) / bm->block_size + 1;
    for (g = 0; g < bm->n_groups; g++) {
        n += bm->sliding[g] && w < all ? w : all;
    }
    return n;
}


/* ---------------------------------------------------------------------------
 * counters
 */

int
llm_blocks_n_available(const llm_block_manager *bm)
{
    return bm->n_free + bm->n_evictable;
}


int
llm_blocks_n_used(const llm_block_manager *bm)
{
    return bm->n_blocks - bm->n_free - bm->n_evictable;
}


int
llm_blocks_n_cached(const llm_block_manager *bm)
{
    int  i, n = 0;

    for (i = 0; i < bm->n_blocks; i++) {
        n += bm->registered[i];
    }
    return n;
}
