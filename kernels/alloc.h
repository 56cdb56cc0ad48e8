/*
 * The memory a step allocates: activation scratch that grows with the
 * batch (kernels/matmul.c per thread, the CPU backend's fused jobs). When
 * it cannot grow, the matmul or the step fails and says so, and the
 * engine keeps serving (the scheduler ends that step's sequences with the
 * error); nothing aborts. A test hook makes one allocation fail on
 * purpose, so tests reach those paths without exhausting memory.
 *
 * defines: llm_alloc_aligned, llm_test_fail_alloc_after
 */
#ifndef NGX_LLM_ALLOC_H
#define NGX_LLM_ALLOC_H

#include <stddef.h>

/* size bytes aligned to 64 (a cache line; the AVX-512 kernels load
 * 64-byte groups), released with free(); NULL when out of memory or when
 * the test hook fails it */
void *llm_alloc_aligned(size_t size);

/*
 * Tests only: after the next n calls of llm_alloc_aligned succeed (from
 * any thread), the one that follows fails, once; n < 0 (the default)
 * turns the hook off. Compiled in always: a check of one atomic per
 * allocation, and allocations happen only when a buffer grows.
 */
void llm_test_fail_alloc_after(int n);

#endif
