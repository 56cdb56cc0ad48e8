/*
 * Paged KV cache storage (CPU) and a trivial block allocator.
 *
 * Design note. The cache is a pool of fixed-size blocks of `block_size`
 * token slots. One block holds, for every layer, the K and the V vectors of
 * its slots, so a block id alone names all of a token range's state and a
 * sequence is a list of block ids (its block table): position p lives in
 * block table[p / block_size], slot p % block_size. Layout of the pool:
 *
 *   data: (n_blocks, n_layers, 2 [K, V], block_size, kv_dim) f16 or f32
 *
 * kv_dim is this rank's n_kv_heads/tp * head_dim. Values are f16 by default
 * (half the memory and half the bytes attention reads, as llama.cpp and
 * vLLM keep them) or f32 (no rounding at all). A token's stored values
 * depend only on that token, so batching never changes them.
 *
 * Layer kinds (docs/models.md, "KV cache of windowed layers"). A model
 * with full-attention and sliding-window layers (gemma3, gpt-oss) splits
 * its layers into G groups of per_group layers of one kind, after vLLM's
 * hybrid KV cache manager: the pool's unit is then a page of one group's
 * layers, (per_group, 2, block_size, kv_dim), and a sequence holds one
 * table of pages per group, so a sliding group's pages that left the
 * window go back to the pool while the full groups keep theirs
 * (sched/block_manager.h). per_group = gcd(full layers, sliding layers),
 * full groups first, layers in order; any other model is one group of
 * every layer, a page being the block of old. llm_kv_init takes per_group
 * as n_layers. A caller that passes a single table per sequence (the CLI,
 * tests; llm_batch.n_groups 0) names logical blocks: block b is pages
 * b*G .. b*G + G-1.
 *
 * Which block belongs to which sequence is the scheduler's business; the
 * allocator here (a stack of free ids) is what the CLI and tests need and
 * what a block manager can build on (refcounts, prefix hashes).
 *
 * defines: llm_kv_cache, llm_kv_init, llm_kv_free, llm_kv_k, llm_kv_v,
 *          llm_kv_bytes_per_token, llm_kv_alloc, llm_kv_release,
 *          llm_kv_n_free, llm_kv_copy_block, llm_kv_dtype_parse,
 *          llm_kv_prefault, llm_kv_layout, llm_kv_layout_of,
 *          llm_kv_layer_page
 */
#ifndef NGX_LLM_KV_H
#define NGX_LLM_KV_H

#include <stddef.h>
#include <stdint.h>

enum llm_kv_dtype {
    LLM_KV_F16 = 0,            /* the default */
    LLM_KV_F32 = 1,
};

typedef struct {
    int       n_layers;        /* layers per page: every layer, or one
                                  group's (per_group, "Layer kinds") */
    int       kv_dim;          /* values per token per layer, K or V */
    int       block_size;      /* token slots per block */
    int       n_blocks;
    int       dtype;           /* enum llm_kv_dtype */
    size_t    elt_size;        /* 2 or 4 */
    size_t    block_elts;      /* n_layers * 2 * block_size * kv_dim */
    uint8_t  *data;            /* (n_blocks, n_layers, 2, block_size, kv_dim),
                                  mapped at init */
    size_t    data_bytes;
    int32_t  *free_ids;        /* (n_blocks) stack of free block ids */
    int       n_free;
} llm_kv_cache;

#define LLM_KV_MAX_GROUPS  64

typedef struct {
    int       n_groups;        /* G: pages of one logical block */
    int       per_group;       /* layers per page */
    int       window;          /* the sliding groups' window; 0: none */
    uint8_t   sliding[LLM_KV_MAX_GROUPS];  /* 1: pages leave the window */
} llm_kv_layout;

/* from each layer's window (0: full attention; (n_layers)) */
void llm_kv_layout_of(llm_kv_layout *lo, const int *window, int n_layers);
/* the group of `layer` and its slot in the group's pages */
void llm_kv_layer_page(const llm_kv_layout *lo, const int *window,
    int layer, int *group, int *slot);

/* 0, or -1 with a message in err (sizes invalid or out of memory) */
int llm_kv_init(llm_kv_cache *kv, int n_layers, int kv_dim, int block_size,
    int n_blocks, int dtype, char *err, size_t err_len);
void llm_kv_free(llm_kv_cache *kv);
/* fault every page of the pool in now; 0, or -1 with a message in err */
int llm_kv_prefault(llm_kv_cache *kv, char *err, size_t err_len);

/* K (or V) of `layer` in `block`: (block_size, kv_dim) values of dtype */
static inline void *
llm_kv_k(const llm_kv_cache *kv, int32_t block, int layer)
{
    return kv->data + ((size_t) block * kv->block_elts
                       + (size_t) layer * 2 * kv->block_size * kv->kv_dim)
                      * kv->elt_size;
}

static inline void *
llm_kv_v(const llm_kv_cache *kv, int32_t block, int layer)
{
    return (uint8_t *) llm_kv_k(kv, block, layer)
           + (size_t) kv->block_size * kv->kv_dim * kv->elt_size;
}

size_t llm_kv_bytes_per_token(int n_layers, int kv_dim, int dtype);

/* "f16" / "f32" -> enum llm_kv_dtype, -1 if neither */
int llm_kv_dtype_parse(const char *name);
const char *llm_kv_dtype_name(int dtype);

/* a free block id, or -1 when the pool is exhausted */
int32_t llm_kv_alloc(llm_kv_cache *kv);
void llm_kv_release(llm_kv_cache *kv, int32_t block);
int llm_kv_n_free(const llm_kv_cache *kv);

/* copy-on-write support for prefix sharing: page dst := src (its
 * layers) */
void llm_kv_copy_block(llm_kv_cache *kv, int32_t dst, int32_t src);

#endif
