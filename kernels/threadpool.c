/*
 * Thread pool: spin-then-futex wake-up (see threadpool.h for why).
 *
 * Two counters carry all synchronisation. `gen` is bumped by the caller to
 * publish a job; `pending` counts workers still running it. Whoever goes to
 * sleep first announces it (n_sleeping, caller_sleeping) and then re-checks
 * the counter inside FUTEX_WAIT, so a wake-up can never be lost: with
 * sequentially consistent atomics either the waker sees the announcement
 * or the sleeper sees the new value.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "threadpool.h"

/* about 50-100 us of waiting before sleeping: longer than the gap between
 * two matmuls of a decode step, far shorter than the gap between steps.
 * After the first PAUSE_ITERS the waiter yields between checks, so that on
 * an oversubscribed machine the thread it waits for can have the core. */
#define SPIN_ITERS   20000
#define PAUSE_ITERS  2000

struct llm_threadpool {
    int               n_threads;      /* including the caller */
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


static void
futex_wait(void *addr, int val)
{
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}


static void
futex_wake(void *addr, int n)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}


static inline void
cpu_relax(int iter)
{
    if (iter >= PAUSE_ITERS) {
        sched_yield();
        return;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}


/* returns the new generation once it differs from seen */
static unsigned
wait_for_job(llm_threadpool *tp, unsigned seen)
{
    unsigned g;

    for (int i = 0; i < SPIN_ITERS; i++) {
        g = atomic_load_explicit(&tp->gen, memory_order_acquire);
        if (g != seen) {
            return g;
        }
        cpu_relax(i);
    }
    for ( ;; ) {
        atomic_fetch_add(&tp->n_sleeping, 1);
        g = atomic_load(&tp->gen);
        if (g == seen) {
            futex_wait(&tp->gen, (int) seen);
            g = atomic_load(&tp->gen);
        }
        atomic_fetch_sub(&tp->n_sleeping, 1);
        if (g != seen) {
            return g;
        }
    }
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
        seen = wait_for_job(tp, seen);
        if (atomic_load(&tp->stop)) {
            return NULL;
        }
        tp->fn(tp->ctx, ith, tp->n_threads);
        if (atomic_fetch_sub(&tp->pending, 1) == 1
            && atomic_load(&tp->caller_sleeping))
        {
            futex_wake(&tp->pending, 1);
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
    if (tp->threads == NULL) {
        free(tp);
        return NULL;
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
publish(llm_threadpool *tp)
{
    atomic_fetch_add(&tp->gen, 1);
    if (atomic_load(&tp->n_sleeping) > 0) {
        futex_wake(&tp->gen, INT_MAX);
    }
}


static void
wait_for_workers(llm_threadpool *tp)
{
    int left;

    for (int i = 0; i < SPIN_ITERS; i++) {
        if (atomic_load_explicit(&tp->pending, memory_order_acquire) == 0) {
            return;
        }
        cpu_relax(i);
    }
    atomic_store(&tp->caller_sleeping, 1);
    while ((left = atomic_load(&tp->pending)) != 0) {
        futex_wait(&tp->pending, left);
    }
    atomic_store(&tp->caller_sleeping, 0);
}


void
llm_threadpool_run(llm_threadpool *tp, llm_task_fn fn, void *ctx)
{
    if (tp == NULL || tp->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    tp->fn = fn;
    tp->ctx = ctx;
    atomic_store(&tp->pending, tp->n_threads - 1);
    publish(tp);
    fn(ctx, 0, tp->n_threads);
    wait_for_workers(tp);
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
    publish(tp);
    for (int i = 0; i < tp->n_threads - 1; i++) {
        pthread_join(tp->threads[i], NULL);
    }
    free(tp->threads);
    free(tp);
}
