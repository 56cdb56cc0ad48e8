/*
 * llm_alloc_aligned, llm_alloc_huge and their failure hook (see alloc.h).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "alloc.h"

/* successful allocations before the failing one; -1: off */
static atomic_int  fail_after = -1;


/* 1 when the test hook fails this allocation */
static int
hook_fails(void)
{
    int  n = atomic_load_explicit(&fail_after, memory_order_relaxed);

    /* the common case is one relaxed load; a set hook counts down once
     * per allocation, and the one that takes it from 0 to -1 fails */
    while (n >= 0
           && !atomic_compare_exchange_weak(&fail_after, &n, n - 1))
    {
        /* n was reloaded: another thread counted first */
    }
    return n == 0;
}


void *
llm_alloc_aligned(size_t size)
{
    void  *p;

    if (hook_fails()) {
        return NULL;
    }
    if (posix_memalign(&p, 64, size != 0 ? size : 64) != 0) {
        return NULL;
    }
    return p;
}


/*
 * A decode step streams every weight once: with 4 KB pages that is one
 * TLB miss (a page walk) every 64 cache lines, and the hardware
 * prefetchers stop at each page's end; 2 MB pages cut the walks 512-fold
 * (bench/membw.c measures the read roofline on such pages too). The
 * rounding costs at most one huge page less 4 KB of resident memory.
 */
void *
llm_alloc_huge(size_t size)
{
    size_t  whole = (size + LLM_HUGE_PAGE - 1) & ~(LLM_HUGE_PAGE - 1);
    void   *p;

    if (hook_fails()) {
        return NULL;
    }
    if (posix_memalign(&p, LLM_HUGE_PAGE, whole != 0 ? whole : 64) != 0) {
        return NULL;
    }
    (void) llm_huge_advise(p, whole);
    return p;
}


int
llm_huge_advise(void *p, size_t size)
{
#ifdef MADV_HUGEPAGE
    uintptr_t  lo = ((uintptr_t) p + LLM_HUGE_PAGE - 1)
                    & ~(uintptr_t) (LLM_HUGE_PAGE - 1);
    uintptr_t  hi = ((uintptr_t) p + size) & ~(uintptr_t) (LLM_HUGE_PAGE - 1);

    if (hi <= lo) {
        return -1;
    }
    return madvise((void *) lo, hi - lo, MADV_HUGEPAGE);
#else
    (void) p;
    (void) size;
    return -1;
#endif
}


void
llm_test_fail_alloc_after(int n)
{
    atomic_store(&fail_after, n < 0 ? -1 : n);
}
