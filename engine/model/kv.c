/*
 * Paged KV cache storage and the trivial block allocator (see kv.h).
 *
 * defines: llm_kv_init, llm_kv_free, llm_kv_bytes_per_token, llm_kv_alloc,
 *          llm_kv_release, llm_kv_n_free, llm_kv_copy_block,
 *          llm_kv_layout_of, llm_kv_layer_page
 */
#include "model/kv.h"
#include "alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/mman.h>


int
llm_kv_init(llm_kv_cache *kv, int n_layers, int kv_dim, int block_size,
    int n_blocks, int dtype, char *err, size_t err_len)
{
    size_t  total;
    int     i;

    memset(kv, 0, sizeof(*kv));
    if (n_layers <= 0 || kv_dim <= 0 || block_size <= 0 || n_blocks <= 0
        || (dtype != LLM_KV_F16 && dtype != LLM_KV_F32))
    {
        snprintf(err, err_len, "KV cache: invalid size (%d layers, kv_dim "
                 "%d, %d blocks of %d tokens)", n_layers, kv_dim, n_blocks,
                 block_size);
        return -1;
    }
    kv->n_layers = n_layers;
    kv->kv_dim = kv_dim;
    kv->block_size = block_size;
    kv->n_blocks = n_blocks;
    kv->dtype = dtype;
    kv->elt_size = dtype == LLM_KV_F16 ? 2 : 4;
    kv->block_elts = (size_t) n_layers * 2 * block_size * kv_dim;
    if (__builtin_mul_overflow(kv->block_elts, (size_t) n_blocks, &total)
        || total > SIZE_MAX / kv->elt_size)
    {
        snprintf(err, err_len, "KV cache: %d blocks overflow memory sizes",
                 n_blocks);
        return -1;
    }
    /* mapped: untouched pages cost nothing until llm_kv_prefault() or a
     * block's first use */
    kv->data_bytes = total * kv->elt_size;
    kv->data = mmap(NULL, kv->data_bytes ? kv->data_bytes : 1,
                    PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                    0);
    if (kv->data == MAP_FAILED) {
        kv->data = NULL;
    }
    kv->free_ids = malloc((size_t) n_blocks * sizeof(int32_t));
    if (kv->data == NULL || kv->free_ids == NULL) {
        snprintf(err, err_len, "KV cache: out of memory for %zu bytes "
                 "(%d blocks of %d tokens)", total * kv->elt_size, n_blocks,
                 block_size);
        llm_kv_free(kv);
        return -1;
    }
    /* pop order 0, 1, 2, ...: the CLI's sequence gets blocks in order */
    for (i = 0; i < n_blocks; i++) {
        kv->free_ids[i] = n_blocks - 1 - i;
    }
    kv->n_free = n_blocks;
    return 0;
}


/*
 * Every page of the pool faulted in now (docs/operations.md,
 * pre-allocation): the engine's RSS is flat from its first request, and a
 * pool the machine cannot hold fails at start. MADV_POPULATE_WRITE
 * (Linux 5.14) fails with ENOMEM instead of a later OOM kill; older
 * kernels get a write per page.
 */
int
llm_kv_prefault(llm_kv_cache *kv, char *err, size_t err_len)
{
    size_t  off, page = (size_t) sysconf(_SC_PAGESIZE);

    if (kv->data_bytes == 0) {
        return 0;
    }
    /* attention reads a head's K and V from every block each step: on
     * huge pages (alloc.h) once the whole pool is resident anyway. A pool
     * left to fault in block by block stays on 4 KB pages: there a first
     * touch would fault in 2 MB around each block a few tokens use (the
     * 8B's generate peaked 154 MB higher, docs/perf.md). */
    (void) llm_huge_advise(kv->data, kv->data_bytes);
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE  23
#endif
    if (madvise(kv->data, kv->data_bytes, MADV_POPULATE_WRITE) == 0) {
        return 0;
    }
    if (errno != EINVAL) {
        snprintf(err, err_len, "KV cache: cannot fault in %zu bytes: %s",
                 kv->data_bytes, strerror(errno));
        return -1;
    }
    for (off = 0; off < kv->data_bytes; off += page) {
        kv->data[off] = 0;
    }
    return 0;
}


void
llm_kv_free(llm_kv_cache *kv)
{
    if (kv->data != NULL) {
        munmap(kv->data, kv->data_bytes ? kv->data_bytes : 1);
    }
    free(kv->free_ids);
    kv->data = NULL;
    kv->free_ids = NULL;
    kv->n_free = 0;
}


static int
gcd(int a, int b)
{
    while (b != 0) {
        int r = a % b;
        a = b;
        b = r;
    }
    return a;
}


void
llm_kv_layout_of(llm_kv_layout *lo, const int *window, int n_layers)
{
    int  i, n_full = 0, w = 0, same = 1;

    memset(lo, 0, sizeof(*lo));
    for (i = 0; i < n_layers; i++) {
        if (window[i] == 0) {
            n_full++;
        } else if (w == 0) {
            w = window[i];
        } else {
            same &= window[i] == w;
        }
    }
    lo->n_groups = 1;
    lo->per_group = n_layers;
    /* one window for every sliding layer, or none is freed (no such
       model is loaded today) */
    if (!same || n_layers < 1) {
        return;
    }
    if (n_full == 0) {
        lo->window = w;             /* mistral: the one group slides */
        lo->sliding[0] = 1;
        return;
    }
    if (n_full == n_layers
        || n_layers / gcd(n_full, n_layers - n_full) > LLM_KV_MAX_GROUPS)
    {
        return;
    }
    lo->per_group = gcd(n_full, n_layers - n_full);
    lo->n_groups = n_layers / lo->per_group;
    lo->window = w;
    for (i = n_full / lo->per_group; i < lo->n_groups; i++) {
        lo->sliding[i] = 1;
    }
}


void
llm_kv_layer_page(const llm_kv_layout *lo, const int *window, int layer,
    int *group, int *slot)
{
    int  i, k = 0, n_full = 0;

    if (lo->n_groups == 1) {
        *group = 0;
        *slot = layer;
        return;
    }
    /* k: the layer's index among the layers of its kind */
    for (i = 0; i < layer; i++) {
        k += (window[i] == 0) == (window[layer] == 0);
    }
    for (i = 0; window[layer] != 0 && i < lo->n_groups; i++) {
        n_full += !lo->sliding[i];
    }
    *group = n_full + k / lo->per_group;
    *slot = k % lo->per_group;
}


size_t
llm_kv_bytes_per_token(int n_layers, int kv_dim, int dtype)
{
    return (size_t) n_layers * 2 * kv_dim * (dtype == LLM_KV_F16 ? 2 : 4);
}


int
llm_kv_dtype_parse(const char *name)
{
    return strcmp(name, "f16") == 0 ? LLM_KV_F16
           : strcmp(name, "f32") == 0 ? LLM_KV_F32 : -1;
}


const char *
llm_kv_dtype_name(int dtype)
{
    return dtype == LLM_KV_F32 ? "f32" : "f16";
}


int32_t
llm_kv_alloc(llm_kv_cache *kv)
{
    return kv->n_free > 0 ? kv->free_ids[--kv->n_free] : -1;
}


void
llm_kv_release(llm_kv_cache *kv, int32_t block)
{
    if (block >= 0 && block < kv->n_blocks && kv->n_free < kv->n_blocks) {
        kv->free_ids[kv->n_free++] = block;
    }
}


int
llm_kv_n_free(const llm_kv_cache *kv)
{
    return kv->n_free;
}


void
llm_kv_copy_block(llm_kv_cache *kv, int32_t dst, int32_t src)
{
    size_t  bytes = kv->block_elts * kv->elt_size;

    memcpy(kv->data + (size_t) dst * bytes, kv->data + (size_t) src * bytes,
           bytes);
}
