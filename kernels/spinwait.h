/*
 * Waiting for a counter to move: spin, then yield, then sleep on a futex.
 * The thread pool's workers wait for a job this way and the tensor
 * parallel ranks for a step or a barrier (engine/model/tp.c).
 *
 * Design note. A waiter spins SPIN_ITERS times (PAUSE for the first
 * PAUSE_ITERS, then sched_yield, so that on an oversubscribed machine the
 * thread it waits for can have the core: about 50-100 us in all, longer
 * than the gap between two matmuls of a decode step, far shorter than the
 * gap between steps), then announces itself in *sleepers and re-checks the
 * word inside FUTEX_WAIT. The waker bumps the word and wakes only when
 * someone announced. A wake-up is never lost: with sequentially
 * consistent atomics either the waker sees the announcement or the
 * sleeper sees the new value.
 *
 * Header only: the spin loop is inlined into its callers as before.
 *
 * defines: LLM_SPIN_ITERS, LLM_PAUSE_ITERS, llm_futex_wait,
 *          llm_futex_wake, llm_spin_relax, llm_wait_change, llm_wake_bump
 */
#ifndef NGX_LLM_SPINWAIT_H
#define NGX_LLM_SPINWAIT_H

#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LLM_SPIN_ITERS   20000
#define LLM_PAUSE_ITERS  2000


/* sleeps while the 32-bit word at addr holds val (or until woken) */
static inline void
llm_futex_wait(void *addr, unsigned val)
{
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}


static inline void
llm_futex_wake(void *addr, int n)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}


/* one turn of a spin loop: PAUSE, or a yield after LLM_PAUSE_ITERS */
static inline void
llm_spin_relax(int iter)
{
    if (iter >= LLM_PAUSE_ITERS) {
        sched_yield();
        return;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}


/* returns *word once it differs from seen */
static inline unsigned
llm_wait_change(atomic_uint *word, unsigned seen, atomic_int *sleepers)
{
    unsigned  v;
    int       i;

    for (i = 0; i < LLM_SPIN_ITERS; i++) {
        v = atomic_load_explicit(word, memory_order_acquire);
        if (v != seen) {
            return v;
        }
        llm_spin_relax(i);
    }
    for ( ;; ) {
        atomic_fetch_add(sleepers, 1);
        v = atomic_load(word);
        if (v == seen) {
            llm_futex_wait(word, seen);
            v = atomic_load(word);
        }
        atomic_fetch_sub(sleepers, 1);
        if (v != seen) {
            return v;
        }
    }
}


/* *word += 1, waking every waiter of llm_wait_change when any sleeps */
static inline void
llm_wake_bump(atomic_uint *word, atomic_int *sleepers)
{
    atomic_fetch_add(word, 1);
    if (atomic_load(sleepers) > 0) {
        llm_futex_wake(word, INT_MAX);
    }
}

#endif
