/*
 * DRAM read bandwidth, the denominator of the decode roofline
 * (docs/perf.md: all threads, at least 1 GiB, read-only).
 *
 * defines: llm_measure_read_bw, LLM_MEMBW_DEFAULT_BYTES
 */
#ifndef NGX_LLM_MEMBW_H
#define NGX_LLM_MEMBW_H

#include <stddef.h>

#define LLM_MEMBW_DEFAULT_BYTES  ((size_t) 1 << 30)   /* 1 GiB: >> any LLC */

/*
 * Reads `bytes` (0: 1 GiB) of pre-faulted memory with n_threads threads
 * (<= 0: every online CPU), each streaming its own contiguous slice with
 * the widest loads the CPU has (AVX2 when present), and returns the best
 * of several passes in GB/s (1e9 bytes per second). Returns -1 with errno
 * set (ENOMEM, EAGAIN for threads) on failure.
 */
double llm_measure_read_bw(int n_threads, size_t bytes);

#endif /* NGX_LLM_MEMBW_H */
