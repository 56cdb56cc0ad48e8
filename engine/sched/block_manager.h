/*
 * Block manager: which KV block belongs to which sequence, and the prefix
 * cache.
 *
 * Design note (after vLLM's block manager and nano-vllm's). The backend
 * owns the KV storage (kv.h): a pool of n_blocks blocks of block_size token
 * slots. This file owns the ids. A sequence holds a block table; position p
 * lives in table->ids[p / block_size]. A block has a reference count: a
 * block shared by several sequences (a common system prompt) is stored
 * once.
 *
 * Prefix caching. Once every slot of a block has been computed, the block
 * is FULL and its content is a pure function of the token ids from position
 * 0 to its end. It is registered under
 *
 *     hash = H(hash of the previous block of the sequence, its token ids)
 *
 * so one hash names a whole prefix. A new sequence looks its leading full
 * blocks up, takes references on the hits and computes only the rest. The
 * block's token ids and its parent's hash are stored beside its hash and
 * compared on lookup: a wrong hit would need two different prefixes whose
 * 64-bit chain hashes collide, not merely two colliding block hashes.
 *
 * A block whose count drops to 0 keeps its content: if it is registered it
 * joins an LRU list of evictable blocks (still a hit for the next request),
 * otherwise it is free. Allocation takes a free block first, then evicts
 * the least recently released cached block. Both kinds count as available:
 * llm_blocks_n_available() is what admission and preemption reason about.
 *
 * A sequence never writes into a registered block, except in the one
 * forward that computes it: the scheduler registers the blocks a batch will
 * fill before running it, so a second sequence scheduled in the same step
 * can share a prefix the first is computing (the backend writes every K/V
 * of a layer before any attention of that layer reads the cache, backend.h).
 * If that forward fails, llm_blocks_forget() drops them again. A lookup
 * never hands out the block holding the last token of the query, so the
 * caller always computes at least one token (it needs that token's logits)
 * and no copy-on-write is needed.
 *
 * Layer groups and sliding windows (llm_blocks_set_layout, model/kv.h;
 * docs/models.md "KV cache of windowed layers"), after vLLM's hybrid KV
 * cache manager. The layers fall into G groups of one kind each (full
 * attention, or the sliding window W); the pool's ids are pages of one
 * group's layers, and a table holds one row of pages per group, group g's
 * page of logical block k at ids[g * cap + k]. Every operation below acts
 * on every group alike (a logical block takes G pages), except one: a
 * query at position p of a sliding layer reads keys p - W + 1 .. p, so
 * once a sequence's next step starts at position n (every query of it at
 * >= n), a sliding group's page whose every position is < n - W + 1 is
 * never read again: llm_blocks_slide() drops it and marks its entry -1.
 * Full groups keep all theirs. The table keeps its length (t->n counts
 * logical blocks; t->n_dropped leading ones of the sliding rows are
 * holes); the backends never read an entry before the window's first
 * block. Mistral (every layer sliding) is G = 1 with that group sliding;
 * a model without windows is G = 1, nothing dropped.
 *
 * Prefix caching with groups: a page is registered under its logical
 * block's chain hash and its group; a dropped page that was registered
 * keeps its content in the LRU list like any released one. A hit on
 * logical block k takes every group's page of it, so a prefix is a hit
 * only while every group still has every page from position 0 cached:
 * exact, and simpler than vLLM's rule (a sliding group needs only the
 * pages in the window of the hit's end); the hit's sequence drops its
 * sliding pages outside the window at once.
 *
 * defines: llm_block_table, llm_block_manager, llm_blocks_init,
 *          llm_blocks_free, llm_blocks_table_init, llm_blocks_table_free,
 *          llm_blocks_match_prefix, llm_blocks_needed, llm_blocks_ensure,
 *          llm_blocks_commit, llm_blocks_fork, llm_blocks_forget,
 *          llm_blocks_release, llm_blocks_truncate,
 *          llm_blocks_set_layout, llm_blocks_slide, llm_blocks_peak,
 *          llm_blocks_n_available,
 *          llm_blocks_n_used, llm_blocks_n_cached
 */
#ifndef NGX_LLM_BLOCK_MANAGER_H
#define NGX_LLM_BLOCK_MANAGER_H

#include <stddef.h>
#include <stdint.h>

#include "model/kv.h"

/* one sequence's blocks */
typedef struct {
    int32_t      *ids;          /* (n_groups, cap) page ids: group g's
                                   page of position p at
                                   ids[g * cap + p / block_size] */
    int           n;            /* logical blocks covering positions, the
                                   dropped ones included */
    int           n_dropped;    /* leading blocks released out of the
                                   window: -1 in the sliding groups' rows */
    int           cap;
    int           n_hashed;     /* leading blocks registered or matched */
    uint64_t      last_hash;    /* hash of block n_hashed - 1 (0: none) */
} llm_block_table;

typedef struct {
    int           n_blocks;     /* pages (blocks when n_groups is 1) */
    int           block_size;
    int           prefix_caching;   /* 0: no hashes, no lookups */
    int           n_groups;     /* pages of a logical block (1) */
    int           window;       /* the sliding groups' window (keys
                                   p - window + 1 .. p); 0: none */
    uint8_t       sliding[LLM_KV_MAX_GROUPS];  /* 1: the group drops */

    int32_t      *ref;          /* (n_blocks) sequences holding the block */
    uint64_t     *hash;         /* (n_blocks) valid where registered[] */
    uint64_t     *parent;       /* (n_blocks) hash of the previous block */
    uint8_t      *registered;   /* (n_blocks) 1: in the hash map */
    uint8_t      *group;        /* (n_blocks) group of a registered page */
    int32_t      *tokens;       /* (n_blocks, block_size) ids of a
                                   registered block, checked on lookup */

    int32_t      *free_ids;     /* (n_blocks) stack of unregistered,
                                   unreferenced blocks */
    int           n_free;

    /* evictable: registered, ref 0; a doubly linked LRU list by id */
    int32_t      *lru_prev;     /* (n_blocks) -1: none */
    int32_t      *lru_next;     /* (n_blocks) -1: none */
    int32_t       lru_head;     /* least recently released: evicted first */
    int32_t       lru_tail;
    int           n_evictable;

    /* hash -> block id, open addressing with linear probing */
    int32_t      *map;          /* (map_cap) -1: empty */
    uint32_t      map_cap;      /* power of two, >= 2 * n_blocks */

    uint64_t      evictions;    /* cached blocks reused for new content */
    uint64_t      slid;         /* blocks dropped out of the window */
} llm_block_manager;

/* 0, or -1 with a message in err (bad sizes, out of memory) */
int llm_blocks_init(llm_block_manager *bm, int n_blocks, int block_size,
    int prefix_caching, char *err, size_t err_len);
void llm_blocks_free(llm_block_manager *bm);

/* an empty table able to hold max_tokens positions in every group; 0 or
 * -1 (no memory) */
int llm_blocks_table_init(llm_block_table *t, const llm_block_manager *bm,
    int max_tokens);
void llm_blocks_table_free(llm_block_table *t);

/*
 * On an empty table: take references on the cached blocks that hold
 * tokens[0..k*block_size), for the largest k with k*block_size < n_tokens
 * whose blocks are all cached. Returns the number of tokens whose KV is
 * now available (k * block_size, 0 without prefix caching).
 */
int llm_blocks_match_prefix(llm_block_manager *bm, llm_block_table *t,
    const int32_t *tokens, int n_tokens);

/* pages the table must gain to hold n_tokens positions (every group) */
int llm_blocks_needed(const llm_block_manager *bm, const llm_block_table *t,
    int n_tokens);

/* grow the table to hold n_tokens positions: 0, or -1 and nothing taken
 * when fewer than llm_blocks_needed() blocks are available */
int llm_blocks_ensure(llm_block_manager *bm, llm_block_table *t,
    int n_tokens);

/* tokens[0..n_computed) have their KV in the table's blocks, or will have
 * it once the current batch has run: register the blocks that became full
 * in the prefix cache */
void llm_blocks_commit(llm_block_manager *bm, llm_block_table *t,
    const int32_t *tokens, int n_computed);

/*
 * On an empty table t: share src's blocks holding positions [0, n_tokens)
 * (a forked choice, scheduler.h): a reference on each full one (none on
 * holes), a fresh page per group for a partial last one, which the caller
 * fills from copy_src[g] (copy_dst[g]; (n_groups) each, all -1 when
 * n_tokens ends on a block boundary). 0, or -1 and nothing taken when no
 * page is left.
 */
int llm_blocks_fork(llm_block_manager *bm, llm_block_table *t,
    const llm_block_table *src, int n_tokens, int32_t *copy_src,
    int32_t *copy_dst);

/* take the table's blocks out of the prefix cache (their content is not
 * to be trusted: the forward that was to compute them failed) */
void llm_blocks_forget(llm_block_manager *bm, llm_block_table *t);

/* drop every block of the table (last ones first, so they are evicted
 * first); the table is empty afterwards and can be reused */
void llm_blocks_release(llm_block_manager *bm, llm_block_table *t);

/* keep only the blocks holding positions 0..n_tokens-1: the ones taken
 * for speculative drafts that were rejected go back (never a registered
 * block: drafts are committed only once accepted) */
void llm_blocks_truncate(llm_block_manager *bm, llm_block_table *t,
    int n_tokens);

/* the layer groups (model/kv.h): set once, before any table is made;
 * the pool's n_blocks are then pages */
void llm_blocks_set_layout(llm_block_manager *bm, const llm_kv_layout *lo);

/* the next step's queries are at positions >= pos: drop the sliding
 * groups' leading pages no query of it reads (every position
 * < pos - window + 1), the last first; returns how many pages were
 * dropped (0 without a window) */
int llm_blocks_slide(llm_block_manager *bm, llm_block_table *t, int pos);

/* the most pages a sequence of n_tokens positions holds at once when a
 * step feeds it at most `chunk` tokens: every full group's whole sequence,
 * each sliding group's window and chunk (never more than the sequence) */
int llm_blocks_peak(const llm_block_manager *bm, int n_tokens, int chunk);

/* free + evictable blocks: what an allocation can get */
int llm_blocks_n_available(const llm_block_manager *bm);
/* blocks referenced by at least one sequence */
int llm_blocks_n_used(const llm_block_manager *bm);
/* blocks registered in the prefix cache (referenced or not) */
int llm_blocks_n_cached(const llm_block_manager *bm);

#endif
