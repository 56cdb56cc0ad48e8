/*
 * llm_alloc_aligned and its failure hook (see alloc.h).
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "alloc.h"

/* successful allocations before the failing one; -1: off */
static atomic_int  fail_after = -1;


void *
llm_alloc_aligned(size_t size)
{
    void  *p;
    int    n = atomic_load_explicit(&fail_after, memory_order_relaxed);

    /* the common case is one relaxed load; a set hook counts down once
     * per allocation, and the one that takes it from 0 to -1 fails */
    while (n >= 0
           && !atomic_compare_exchange_weak(&fail_after, &n, n - 1))
    {
        /* n was reloaded: another thread counted first */
    }
    if (n == 0) {
        return NULL;
    }
    if (posix_memalign(&p, 64, size != 0 ? size : 64) != 0) {
        return NULL;
    }
    return p;
}


void
llm_test_fail_alloc_after(int n)
{
    atomic_store(&fail_after, n < 0 ? -1 : n);
}
