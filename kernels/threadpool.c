/*
 * Thread pool: spin-then-futex wake-up (see threadpool.h for why).
 *
 * Two counters carry all synchronisation. `gen` is bumped by the caller to
 * publish a job; `pending` counts workers still running it. Workers wait
 * for `gen` with llm_wait_change (spinwait.h); the caller waits for
 * `pending` to reach 0 the same way, spinning and then announcing itself
 * (caller_sleeping) before FUTEX_WAIT, so no wake-up is lost.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "spinwait.h"
#include "threadpool.h"

/* one thread's time inside jobs, on its own cache line: written by that
   thread only, read by llm_threadpool_busy_ns */
typedef struct {
    _Atomic uint64_t  ns;
    char              pad[56];
} busy_clock;

struct llm_threadpool {
    int               n_threads;      /* including the caller */
    busy_clock       *busy;           /* (n_threads) */
    pthread_t        *threads;        /* n_threads - 1 workers */
    llm_task_fn       fn;
    void             *ctx;
    atomic_uint       gen;            /* job generation */
    atomic_int        pending;        /* workers yet to finish the job */
    atomic_int        n_sleeping;     /* workers inside FUTEX_WAIT */
    atomic_int        caller_sleeping;
    atomic_int        stop;
};

typedef struct {
    llm_threadpool   *tp;
    int               ith;
} worker_arg;


static uint64_t
now_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}


/* fn on thread ith, its time added to that thread's clock */
static void
run_timed(llm_threadpool *tp, int ith)
{
    uint64_t  t0 = now_ns();

    tp->fn(tp->ctx, ith, tp->n_threads);
    atomic_store_explicit(&tp->busy[ith].ns,
                          atomic_load_explicit(&tp->busy[ith].ns,
                                               memory_order_relaxed)
                          + (now_ns() - t0), memory_order_relaxed);
}


static void *
worker_main(void *p)
{
    worker_arg *arg = p;
    llm_threadpool *tp = arg->tp;
    int ith = arg->ith;
    unsigned seen = 0;

    free(arg);
    for ( ;; ) {
        seen = llm_wait_change(&tp->gen, seen, &tp->n_sleeping);
        if (atomic_load(&tp->stop)) {
            return NULL;
        }
        run_timed(tp, ith);
        if (atomic_fetch_sub(&tp->pending, 1) == 1
            && atomic_load(&tp->caller_sleeping))
        {
            llm_futex_wake(&tp->pending, 1);
        }
    }
}


llm_threadpool *
llm_threadpool_create(int n_threads)
{
    llm_threadpool *tp;

    if (n_threads < 1) {
        errno = EINVAL;
        return NULL;
    }
    tp = calloc(1, sizeof(*tp));
    if (tp == NULL) {
        return NULL;
    }
    tp->n_threads = 1;
    tp->threads = calloc(n_threads, sizeof(pthread_t));
    tp->busy = aligned_alloc(64, n_threads * sizeof(busy_clock));
    if (tp->threads == NULL || tp->busy == NULL) {
        free(tp->threads);
        free(tp->busy);
        free(tp);
        return NULL;
    }
    for (int i = 0; i < n_threads; i++) {
        atomic_init(&tp->busy[i].ns, 0);
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *arg = malloc(sizeof(*arg));
        int rc = arg ? 0 : ENOMEM;
        if (arg) {
            arg->tp = tp;
            arg->ith = i;
            rc = pthread_create(&tp->threads[i - 1], NULL, worker_main, arg);
        }
        if (rc != 0) {
            free(arg);
            llm_threadpool_free(tp);
            errno = rc;
            return NULL;
        }
        tp->n_threads++;
    }
    return tp;
}


static void
wait_for_workers(llm_threadpool *tp)
{
    int left;

    for (int i = 0; i < LLM_SPIN_ITERS; i++) {
        if (atomic_load_explicit(&tp->pending, memory_order_acquire) == 0) {
            return;
        }
        llm_spin_relax(i);
    }
    atomic_store(&tp->caller_sleeping, 1);
    while ((left = atomic_load(&tp->pending)) != 0) {
        llm_futex_wait(&tp->pending, (unsigned) left);
    }
    atomic_store(&tp->caller_sleeping, 0);
}


void
llm_threadpool_run(llm_threadpool *tp, llm_task_fn fn, void *ctx)
{
    if (tp == NULL) {
        fn(ctx, 0, 1);
        return;
    }
    tp->fn = fn;
    tp->ctx = ctx;
    if (tp->n_threads == 1) {
        run_timed(tp, 0);
        return;
    }
    atomic_store(&tp->pending, tp->n_threads - 1);
    llm_wake_bump(&tp->gen, &tp->n_sleeping);
    run_timed(tp, 0);
    wait_for_workers(tp);
}


uint64_t
llm_threadpool_busy_ns(const llm_threadpool *tp)
{
    uint64_t  ns = 0;

    for (int i = 0; tp != NULL && i < tp->n_threads; i++) {
        ns += atomic_load_explicit(&tp->busy[i].ns, memory_order_relaxed);
    }
    return ns;
}


int
llm_threadpool_size(const llm_threadpool *tp)
{
    return tp ? tp->n_threads : 1;
}


void
llm_threadpool_free(llm_threadpool *tp)
{
    if (tp == NULL) {
        return;
    }
    atomic_store(&tp->stop, 1);
    llm_wake_bump(&tp->gen, &tp->n_sleeping);
    for (int i = 0; i < tp->n_threads - 1; i++) {
        pthread_join(tp->threads[i], NULL);
    }
    free(tp->threads);
    free(tp->busy);
    free(tp);
}
