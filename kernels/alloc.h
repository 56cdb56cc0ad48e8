/*
 * The memory a step allocates: activation scratch that grows with the
 * batch (kernels/matmul.c per thread, the CPU backend's fused jobs). When
 * it cannot grow, the matmul or the step fails and says so, and the
 * engine keeps serving (the scheduler ends that step's sequences with the
 * error); nothing aborts. A test hook makes one allocation fail on
 * purpose, so tests reach those paths without exhausting memory.
 *
 * Weights packed at load and the KV pool are read again every decode step,
 * gigabytes of them: llm_alloc_huge asks transparent huge pages for them
 * (docs/kernels.md, huge pages).
 *
 * defines: llm_alloc_aligned, llm_alloc_huge, llm_huge_advise,
 *          llm_test_fail_alloc_after
 */
#ifndef NGX_LLM_ALLOC_H
#define NGX_LLM_ALLOC_H

#include <stddef.h>

/* size bytes aligned to 64 (a cache line; the AVX-512 kernels load
 * 64-byte groups), released with free(); NULL when out of memory or when
 * the test hook fails it */
void *llm_alloc_aligned(size_t size);

/* 2 MB: the x86-64 transparent huge page (the alignment llm_alloc_huge
 * gives, the unit its memory may be rounded up to when resident) */
#define LLM_HUGE_PAGE  ((size_t) 2 << 20)

/* size bytes aligned to LLM_HUGE_PAGE, the range rounded up to whole huge
 * pages and advised MADV_HUGEPAGE before first touch (with THP in
 * "madvise" mode, the kernel default of many distributions, only advised
 * memory gets them), released with free(); NULL as llm_alloc_aligned.
 * The advice is a hint: where it is refused the memory is plain pages. */
void *llm_alloc_huge(size_t size);

/* MADV_HUGEPAGE on the whole huge pages inside [p, p + size) (a mapping
 * of the caller's own, e.g. the KV pool); 0, or -1 where refused */
int llm_huge_advise(void *p, size_t size);

/*
 * Tests only: after the next n calls of llm_alloc_aligned succeed (from
 * any thread), the one that follows fails, once; n < 0 (the default)
 * turns the hook off. Compiled in always: a check of one atomic per
 * allocation, and allocations happen only when a buffer grows.
 */
void llm_test_fail_alloc_after(int n);

#endif
