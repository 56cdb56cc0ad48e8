/*
 * DRAM read bandwidth (see membw.h).
 *
 * How: one anonymous mapping (transparent huge pages asked for, so TLB
 * misses do not hide the DRAM limit), each thread first-touches its own
 * slice (page faults and NUMA placement happen before timing), then all
 * threads start together at a barrier and stream their slices with
 * 256-bit loads folded into four accumulators; the accumulators end in a
 * volatile sink so the compiler cannot drop a load. A pass is timed from
 * the release of the start barrier to the last thread reaching the end
 * barrier; the best of MEMBW_PASSES passes is reported, which is the
 * machine's limit rather than its average under other load.
 *
 * Build standalone: cc -O2 -pthread -DMEMBW_MAIN bench/membw.c -o membw
 *   ./membw [GiB] [threads]   prints GB/s for 1 thread and for N threads
 */
#include "membw.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define MEMBW_X86 1
#endif

#define MEMBW_PASSES   15       /* plus one untimed warm-up pass */
#define MEMBW_ALIGN    (2u << 20)

static volatile uint64_t membw_sink;


/* ------------------------------------------------------------------------
 * read kernels: sum 64-bit lanes of every byte in [p, p + n), n % 128 == 0
 * ------------------------------------------------------------------------ */

#ifdef MEMBW_X86

__attribute__((target("avx2")))
static uint64_t
read_avx2(const uint8_t *p, size_t n)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    uint64_t lanes[4];

    for (size_t i = 0; i < n; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *) (p + i)));
        a1 = _mm256_add_epi64(a1,
                 _mm256_load_si256((const __m256i *) (p + i + 32)));
        a2 = _mm256_add_epi64(a2,
                 _mm256_load_si256((const __m256i *) (p + i + 64)));
        a3 = _mm256_add_epi64(a3,
                 _mm256_load_si256((const __m256i *) (p + i + 96)));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    _mm256_storeu_si256((__m256i *) lanes, a0);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

#endif


static uint64_t
read_generic(const uint8_t *p, size_t n)
{
    const uint64_t *q = (const uint64_t *) p;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;

    for (size_t i = 0; i < n / 8; i += 4) {
        a0 += q[i];
        a1 += q[i + 1];
        a2 += q[i + 2];
        a3 += q[i + 3];
    }
    return a0 + a1 + a2 + a3;
}


typedef uint64_t (*read_fn)(const uint8_t *p, size_t n);

static read_fn
pick_reader(void)
{
#ifdef MEMBW_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        return read_avx2;
    }
#endif
    return read_generic;
}


/* ------------------------------------------------------------------------
 * threads
 * ------------------------------------------------------------------------ */

typedef struct {
    pthread_mutex_t     lock;      /* guards go and abort */
    pthread_cond_t      cond;
    int                 go;        /* every thread started */
    int                 abort;     /* a thread failed to start: exit */
    pthread_barrier_t   start;     /* n_threads + the timer */
    pthread_barrier_t   end;
    read_fn             read;
    int                 passes;
} membw_run;

typedef struct {
    membw_run          *run;
    uint8_t            *base;      /* this thread's slice */
    size_t              len;
} membw_worker;


static void *
worker_main(void *arg)
{
    membw_worker *w = arg;
    uint64_t sum = 0;

    /*
     * First touch from the thread that reads them, and a different value
     * in every word: identical pages could be merged by the hypervisor
     * (KSM) and then read from cache, which overstates DRAM bandwidth.
     */
    {
        uint64_t  *q = (uint64_t *) w->base;
        size_t     i, n = w->len / sizeof(uint64_t);

        for (i = 0; i < n; i++) {
            q[i] = (uint64_t) i * 0x9e3779b97f4a7c15ULL;
        }
    }

    pthread_mutex_lock(&w->run->lock);
    while (!w->run->go && !w->run->abort) {
        pthread_cond_wait(&w->run->cond, &w->run->lock);
    }
    pthread_mutex_unlock(&w->run->lock);
    if (w->run->abort) {
        return NULL;
    }

    for (int pass = 0; pass < w->run->passes; pass++) {
        pthread_barrier_wait(&w->run->start);
        sum += w->run->read(w->base, w->len);
        pthread_barrier_wait(&w->run->end);
    }
    membw_sink += sum;
    return NULL;
}


static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


static uint8_t *
map_buffer(size_t bytes, size_t *mapped)
{
    uint8_t *p;

    *mapped = bytes + MEMBW_ALIGN;
    p = mmap(NULL, *mapped, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    madvise(p, *mapped, MADV_HUGEPAGE);   /* a hint; fine if refused */
#endif
    return p;
}


/* the barriers count every worker, so either all start or none runs */
static int
start_workers(membw_run *run, int n_threads, membw_worker *w, pthread_t *tid)
{
    int started, err = 0;

    for (started = 0; started < n_threads; started++) {
        err = pthread_create(&tid[started], NULL, worker_main, &w[started]);
        if (err != 0) {
            break;
        }
    }

    pthread_mutex_lock(&run->lock);
    run->go = err == 0;
    run->abort = err != 0;
    pthread_cond_broadcast(&run->cond);
    pthread_mutex_unlock(&run->lock);

    if (err != 0) {
        for (int i = 0; i < started; i++) {
            pthread_join(tid[i], NULL);
        }
        errno = err;
        return -1;
    }
    return 0;
}


/* seconds of the fastest timed pass, or -1 */
static double
time_passes(membw_run *run, int n_threads, membw_worker *w)
{
    pthread_t *tid = malloc((size_t) n_threads * sizeof(*tid));
    double best = -1.0, t0, t;

    if (tid == NULL || start_workers(run, n_threads, w, tid) != 0) {
        free(tid);
        return -1.0;
    }

    for (int pass = 0; pass < run->passes; pass++) {
        pthread_barrier_wait(&run->start);
        t0 = now_s();
        pthread_barrier_wait(&run->end);
        t = now_s() - t0;
        if (pass > 0 && (best < 0.0 || t < best)) {   /* pass 0: warm-up */
            best = t;
        }
    }

    for (int i = 0; i < n_threads; i++) {
        pthread_join(tid[i], NULL);
    }
    free(tid);
    return best;
}


double
llm_measure_read_bw(int n_threads, size_t bytes)
{
    size_t mapped, slice;
    membw_worker *w;
    membw_run run;
    uint8_t *buf, *base;
    double best;

    if (n_threads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);

        n_threads = cpus > 0 ? (int) cpus : 1;
    }
    if (bytes == 0) {
        bytes = LLM_MEMBW_DEFAULT_BYTES;
    }
    /* whole 128-byte lines per thread */
    slice = bytes / (size_t) n_threads / 128 * 128;
    if (slice == 0) {
        errno = EINVAL;
        return -1.0;
    }

    w = malloc((size_t) n_threads * sizeof(*w));
    buf = w ? map_buffer(slice * (size_t) n_threads, &mapped) : NULL;
    if (buf == NULL) {
        free(w);
        errno = ENOMEM;
        return -1.0;
    }
    base = (uint8_t *) (((uintptr_t) buf + MEMBW_ALIGN - 1)
                        & ~(uintptr_t) (MEMBW_ALIGN - 1));

    memset(&run, 0, sizeof(run));
    pthread_mutex_init(&run.lock, NULL);
    pthread_cond_init(&run.cond, NULL);
    pthread_barrier_init(&run.start, NULL, (unsigned) n_threads + 1);
    pthread_barrier_init(&run.end, NULL, (unsigned) n_threads + 1);
    run.read = pick_reader();
    run.passes = MEMBW_PASSES + 1;
    for (int i = 0; i < n_threads; i++) {
        w[i].run = &run;
        w[i].base = base + (size_t) i * slice;
        w[i].len = slice;
    }

    best = time_passes(&run, n_threads, w);

    pthread_barrier_destroy(&run.start);
    pthread_barrier_destroy(&run.end);
    pthread_cond_destroy(&run.cond);
    pthread_mutex_destroy(&run.lock);
    munmap(buf, mapped);
    free(w);

    if (best <= 0.0) {
        return -1.0;
    }
    return (double) slice * n_threads / best / 1e9;
}


#ifdef MEMBW_MAIN

int
main(int argc, char **argv)
{
    double gib = argc > 1 ? atof(argv[1]) : 1.0;
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    size_t bytes = (size_t) (gib * (1u << 30));
    double one, all;

    if (threads <= 0) {
        threads = (int) sysconf(_SC_NPROCESSORS_ONLN);
    }
    if (gib <= 0) {
        fprintf(stderr, "usage: membw [GiB (default 1)] [threads]\n");
        return 2;
    }

    one = llm_measure_read_bw(1, bytes);
    all = llm_measure_read_bw(threads, bytes);
    if (one < 0 || all < 0) {
        fprintf(stderr, "membw: %s\n", strerror(errno));
        return 1;
    }
    printf("DRAM read bandwidth over %.2f GiB, best of %d passes:\n"
           "  1 thread:   %6.2f GB/s\n"
           "  %d threads: %6.2f GB/s\n", gib, MEMBW_PASSES, one, threads,
           all);
    return 0;
}

#endif
