/*
 * A fixed pool of worker threads for the forward pass's parallel loops.
 *
 * Decode calls llm_threadpool_run() hundreds of times per token, each job a
 * few microseconds long, so waking the workers must be cheap: workers spin
 * on a generation counter for a short while after each job and only then
 * sleep on a futex; the caller wakes sleepers only when there are any.
 * The calling thread is worker 0 and takes part in every job.
 *
 * defines: llm_threadpool_create, llm_threadpool_run, llm_threadpool_free,
 *          llm_threadpool_size, llm_threadpool_busy_ns
 */
#ifndef NGX_LLM_THREADPOOL_H
#define NGX_LLM_THREADPOOL_H

#include <stdint.h>

typedef struct llm_threadpool llm_threadpool;

/* fn(ctx, ith, nth) runs once for each ith in 0..nth-1, ith 0 on the
 * calling thread */
typedef void (*llm_task_fn)(void *ctx, int ith, int nth);

/* n_threads >= 1 counts the caller; NULL (errno set) if a thread cannot
 * be started */
llm_threadpool *llm_threadpool_create(int n_threads);

/* runs fn on every thread and returns when all have finished. tp may be
 * NULL (runs fn(ctx, 0, 1)). Not reentrant: fn must not call run on the
 * same pool, and one thread at a time may use a pool. */
void llm_threadpool_run(llm_threadpool *tp, llm_task_fn fn, void *ctx);

int llm_threadpool_size(const llm_threadpool *tp);   /* 1 for NULL */

/* nanoseconds the threads have spent inside jobs, summed over threads
   (0 for NULL): over wall time and llm_threadpool_size, the utilisation */
uint64_t llm_threadpool_busy_ns(const llm_threadpool *tp);

void llm_threadpool_free(llm_threadpool *tp);

#endif
