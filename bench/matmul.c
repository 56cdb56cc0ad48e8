/*
 * Microbenchmark of llm_matmul.
 *
 *   bench/matmul [threads] [seconds-per-case]
 *
 * 1. one 1536x576 Q4_1 matrix (SmolLM2's gate/up; fits in L2): GB/s of
 *    weight bytes at n_x = 1 and the time of n_x = 4 and 16 relative to 1;
 * 2. every weight matrix of a SmolLM2-135M-shaped model (30 layers of Q4_1
 *    projections + the 49152x576 Q8_0 classifier, about 96 MB, far beyond
 *    the last-level cache), multiplied in turn as one decode step does:
 *    GB/s against the DRAM read bandwidth measured here the same way
 *    (all threads, read-only, 1 GiB), i.e. the fraction of the roofline;
 * 3. the same for n_x = 4 and 16 (one step of a batch of decodes).
 * Best of several repeats: the machine may be shared.
 *
 *   bench/matmul [threads] [seconds-per-case] packed [TYPE]
 *
 * instead: per packable type (tensor.h, llm_pack), a 2048x2048 matrix (a
 * Llama-3.2-1B projection) as stored and packed, n_x = 1 (decode), 16 (a
 * serving step of 16 decodes) and 128 (prefill; MXFP4: a 2880x2880
 * gpt-oss-20b expert instead), the two
 * variants alternated round after round on the
 * calling thread alone, timed in its CPU time (a shared machine's load
 * does not enter); prints the best time of each and plain / packed
 * (TYPE, a name as ggml_type_name spells it: that type alone).
 *
 *   bench/matmul [threads] [seconds-per-case] stream
 *
 * instead: per packed K-quant type (and Q8_0), an 8192x2048 matrix packed
 * and copied to about 512 MB (beyond the last-level cache), multiplied at
 * n_x = 1 in turn on the calling thread, as one thread's share of decode;
 * GB/s in thread CPU time against a plain read loop over the same bytes,
 * the two alternated round after round (issue 28: how near one thread's
 * decode kernel gets to what the thread can read at all). Twice: the
 * copies on 4 KB pages (llm_alloc_aligned) and on transparent huge pages
 * (llm_alloc_huge, as the CPU backend packs), alternated in each round.
 * Then n_x = 16 (a serving step) over the huge-page copies against as
 * many passes over one copy (cache-resident): DRAM/cache time near 1
 * when the kernel hides the weights' stream behind its products.
 *
 *   bench/matmul [threads] [seconds-per-case] f16
 *
 * instead: F16 matrices of gpt-oss-20b's attention shapes (q 4096x2880,
 * o 2880x4096, k/v 512x2880) at n_x = 1, 128 and 512 on the calling
 * thread, best thread CPU time and GFLOP/s; then the n_x = 1 kernel over
 * a 2880-column F16 matrix copied to about 512 MB against the read loop,
 * as the stream case (the classifier's share of a decode token).
 *
 * Build: cc -O2 -pthread -Ikernels bench/matmul.c kernels/[a-z]*.c -lm
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "tensor_type.h"
#include "isa.h"
#include "matmul.h"
#include "quant.h"
#include "threadpool.h"

static double
now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


static llm_tensor
random_matrix(uint32_t type, int rows, int cols)
{
    size_t bytes = ggml_row_size(type, cols) * rows;
    uint8_t *p = malloc(bytes);
    float *row = malloc(sizeof(float) * cols);

    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < cols; c++) {
            row[c] = (float) ((r * 31 + c * 17) % 113) / 56.0f - 1.0f;
        }
        llm_quantize_row(type, row, p + ggml_row_size(type, cols) * r, cols);
    }
    free(row);
    return llm_tensor_make(p, type, rows, cols);
}


/* --- DRAM read bandwidth --------------------------------------------------- */

typedef struct {
    const uint64_t *buf;
    size_t          n;
    uint64_t        sink[64];
} bw_job;

static void
read_task(void *p, int ith, int nth)
{
    bw_job *job = p;
    size_t per = job->n / nth, i0 = per * ith;
    uint64_t a = 0, b = 0, c = 0, d = 0;

    for (size_t i = i0; i + 4 <= i0 + per; i += 4) {
        a ^= job->buf[i];
        b ^= job->buf[i + 1];
        c ^= job->buf[i + 2];
        d ^= job->buf[i + 3];
    }
    job->sink[ith % 64] = a ^ b ^ c ^ d;
}


static double
dram_gbs(llm_threadpool *tp)
{
    size_t bytes = (size_t) 1 << 30;
    bw_job job = { .n = bytes / 8 };
    uint64_t *buf = malloc(bytes);
    double best = 1e9;

    memset(buf, 1, bytes);
    job.buf = buf;
    for (int k = 0; k < 5; k++) {
        double t0 = now();
        llm_threadpool_run(tp, read_task, &job);
        double t = now() - t0;
        best = t < best ? t : best;
    }
    free(buf);
    return bytes / best / 1e9;
}


/* --- cases -------------------------------------------------------------- */

static double
best_time(llm_threadpool *tp, const llm_tensor *ws, int n_w, int n_x,
    float *x, float *out, double seconds)
{
    double best = 1e9, end = now() + seconds;

    for (int k = 0; k < 3 || now() < end; k++) {
        double t0 = now();
        for (int j = 0; j < n_w; j++) {
            llm_matmul(tp, out, x, n_x, &ws[j]);
        }
        double t = now() - t0;
        best = t < best ? t : best;
    }
    return best;
}


static double
thread_cpu(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


/* best thread CPU time of one call on the calling thread */
static double
best_cpu(const llm_tensor *w, int n_x, float *x, float *out, int reps)
{
    double best = 1e9;

    for (int k = 0; k < reps; k++) {
        double t0 = thread_cpu();
        llm_matmul(NULL, out, x, n_x, w);
        double t = thread_cpu() - t0;
        best = t < best ? t : best;
    }
    return best;
}


/* plain against packed per type, rounds alternated (the machine is
 * shared: a load change hits both variants alike) */
static void
packed_vs_plain(float *x, float *out, double secs, const char *only)
{
    static const uint32_t types[] = {
        GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q8_0, GGML_TYPE_Q5_0,
        GGML_TYPE_IQ4_NL, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q5_K,
        GGML_TYPE_IQ4_XS, GGML_TYPE_MXFP4,
    };
    static const int nxs[] = { 1, 16, 128 };

    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        int dim = types[t] == GGML_TYPE_MXFP4 ? 2880 : 2048;

        if (only != NULL && strcmp(only, ggml_type_name(types[t])) != 0) {
            continue;
        }
        llm_tensor w = random_matrix(types[t], dim, dim), p;
        void *pd;

        if (!llm_pack_useful(&w)) {
            printf("%-7s not packed on this CPU\n",
                   ggml_type_name(types[t]));
            free((void *) w.data);
            continue;
        }
        pd = llm_alloc_aligned(llm_pack_size(&w));
        llm_pack(&w, pd, &p);
        for (size_t n = 0; n < sizeof(nxs) / sizeof(nxs[0]); n++) {
            double bw = 1e9, bp = 1e9;
            for (int round = 0; round < 5; round++) {
                int reps = nxs[n] == 1 ? (int) (200 * secs) : (int) (4 * secs);
                double a = best_cpu(&w, nxs[n], x, out, reps + 1);
                double b = best_cpu(&p, nxs[n], x, out, reps + 1);
                bw = a < bw ? a : bw;
                bp = b < bp ? b : bp;
            }
            printf("%-7s %dx%d n_x=%-3d plain %8.1f us  packed %8.1f us"
                   "  plain/packed %.2fx (thread CPU time)\n",
                   ggml_type_name(types[t]), dim, dim, nxs[n], bw * 1e6,
                   bp * 1e6, bw / bp);
        }
        free(pd);
        free((void *) w.data);
    }
}


/* read_all's results land here, so the compiler keeps the loop */
static volatile uint64_t read_sink;


/* the xor of every 8 bytes of n_m buffers of `bytes` bytes */
static uint64_t
read_all(void *const *bufs, int n_m, size_t bytes)
{
    uint64_t a = 0, b = 0, c = 0, d = 0;

    for (int i = 0; i < n_m; i++) {
        const uint64_t *q = bufs[i];
        for (size_t j = 0; j + 4 <= bytes / 8; j += 4) {
            a ^= q[j];
            b ^= q[j + 1];
            c ^= q[j + 2];
            d ^= q[j + 3];
        }
    }
    return a ^ b ^ c ^ d;
}


/* best thread CPU seconds of the kernel over n_m packed matrices p and
 * of the read loop over their bytes, into *bk and *br */
static void
stream_round(const llm_tensor *p, void *const *bufs, int n_m, size_t ps,
    float *x, float *out, double *bk, double *br)
{
    double t0 = thread_cpu(), tk, tr;

    for (int i = 0; i < n_m; i++) {
        llm_matmul(NULL, out, x, 1, &p[i]);
    }
    tk = thread_cpu() - t0;
    t0 = thread_cpu();
    read_sink ^= read_all(bufs, n_m, ps);
    tr = thread_cpu() - t0;
    *bk = tk < *bk ? tk : *bk;
    *br = tr < *br ? tr : *br;
}


/* n_x = 16 (a serving step) over the n_m matrices p from DRAM against
 * n_m times one of them (from the cache): how much of the weights'
 * stream the kernel leaves unhidden behind its products */
static void
stream_16(uint32_t type, const llm_tensor *p, int n_m, size_t ps, float *x,
    float *out)
{
    double bd = 1e9, bc = 1e9;

    for (int r = 0; r < 5; r++) {
        double t0 = thread_cpu(), td, tc;

        for (int i = 0; i < n_m; i++) {
            llm_matmul(NULL, out, x, 16, &p[i]);
        }
        td = thread_cpu() - t0;
        t0 = thread_cpu();
        for (int i = 0; i < n_m; i++) {
            llm_matmul(NULL, out, x, 16, &p[0]);
        }
        tc = thread_cpu() - t0;
        bd = td < bd ? td : bd;
        bc = tc < bc ? tc : bc;
    }
    printf("%-7s n_x=16, huge pages: %.2f GB/s from DRAM, %.2f GB/s from "
           "the cache, DRAM/cache time %.2f\n", ggml_type_name(type),
           ps * (double) n_m / bd / 1e9, ps * (double) n_m / bc / 1e9,
           bd / bc);
}


/* one thread's decode kernel streaming from DRAM against its read loop,
 * on 4 KB pages (set 0) and on huge pages (set 1) */
static void
stream_vs_read(float *x, float *out)
{
    static const uint32_t types[] = {
        GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_XS,
        GGML_TYPE_Q8_0,
    };

    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        llm_tensor w = random_matrix(types[t], 8192, 2048), p[2][128];
        void *bufs[2][128];
        uint8_t *huge;
        size_t ps = llm_pack_size(&w);
        int n_m = (int) ((512u << 20) / ps), r, set;
        double bk[2] = { 1e9, 1e9 }, br[2] = { 1e9, 1e9 };

        if (!llm_pack_useful(&w)) {
            printf("%-7s not packed on this CPU\n", ggml_type_name(types[t]));
            free((void *) w.data);
            continue;
        }
        n_m = n_m > 128 ? 128 : n_m;
        huge = llm_alloc_huge(ps * n_m);
        for (int i = 0; i < n_m; i++) {
            bufs[0][i] = llm_alloc_aligned(ps);
            bufs[1][i] = huge + ps * i;
            llm_pack(&w, bufs[0][i], &p[0][i]);
            llm_pack(&w, bufs[1][i], &p[1][i]);
        }
        for (r = 0; r < 5; r++) {
            for (set = 0; set < 2; set++) {
                int s = (set + r) % 2;        /* the order alternates */
                stream_round(p[s], bufs[s], n_m, ps, x, out, &bk[s], &br[s]);
            }
        }
        for (set = 0; set < 2; set++) {
            printf("%-7s %d x 8192x2048 packed (%.0f MB, %s pages) n_x=1: "
                   "%.2f GB/s, read loop %.2f GB/s, kernel/read %.2f "
                   "(thread CPU time)\n",
                   ggml_type_name(types[t]), n_m, (double) ps * n_m / 1e6,
                   set ? "huge" : "4 KB", ps * (double) n_m / bk[set] / 1e9,
                   ps * (double) n_m / br[set] / 1e9, br[set] / bk[set]);
        }
        printf("%-7s huge / 4 KB pages: kernel %.2fx, read loop %.2fx\n",
               ggml_type_name(types[t]), bk[0] / bk[1], br[0] / br[1]);
        stream_16(types[t], p[1], n_m, ps, x, out);
        for (int i = 0; i < n_m; i++) {
            free(bufs[0][i]);
        }
        free(huge);
        free((void *) w.data);
    }
}


/* the float tiles at gpt-oss-20b's F16 shapes, and F16 decode vs reads */
static void
f16_cases(float *x, float *out, double secs)
{
    static const int shape[3][2] = { { 4096, 2880 }, { 2880, 4096 },
                                     { 512, 2880 } };
    static const int nxs[] = { 1, 128, 512 };

    for (int s = 0; s < 3; s++) {
        llm_tensor w = random_matrix(GGML_TYPE_F16, shape[s][0], shape[s][1]);
        for (int n = 0; n < 3; n++) {
            int reps = nxs[n] == 1 ? (int) (100 * secs) : (int) (4 * secs);
            double b = best_cpu(&w, nxs[n], x, out, reps + 1);
            printf("F16 %dx%d n_x=%-3d %9.1f us %7.1f GFLOP/s "
                   "(thread CPU time)\n", shape[s][0], shape[s][1], nxs[n],
                   b * 1e6, 2.0 * shape[s][0] * shape[s][1] * nxs[n] / b / 1e9);
        }
        free((void *) w.data);
    }

    llm_tensor w = random_matrix(GGML_TYPE_F16, 8192, 2880), p[128];
    void *bufs[128];
    size_t ps = ggml_row_size(w.type, w.cols) * w.rows;
    int n_m = (int) ((512u << 20) / ps);
    double bk = 1e9, br = 1e9;

    n_m = n_m > 128 ? 128 : n_m;
    for (int i = 0; i < n_m; i++) {
        bufs[i] = llm_alloc_aligned(ps);
        memcpy(bufs[i], w.data, ps);
        p[i] = llm_tensor_make(bufs[i], w.type, w.rows, w.cols);
    }
    for (int r = 0; r < 5; r++) {
        double t0 = thread_cpu();
        for (int i = 0; i < n_m; i++) {
            llm_matmul(NULL, out, x, 1, &p[i]);
        }
        double tk = thread_cpu() - t0;
        t0 = thread_cpu();
        read_sink ^= read_all(bufs, n_m, ps);
        double tr = thread_cpu() - t0;
        bk = tk < bk ? tk : bk;
        br = tr < br ? tr : br;
    }
    printf("F16 %d x 8192x2880 (%.0f MB) n_x=1: %.2f GB/s, read loop "
           "%.2f GB/s, kernel/read %.2f (thread CPU time)\n", n_m,
           (double) ps * n_m / 1e6, ps * (double) n_m / bk / 1e9,
           ps * (double) n_m / br / 1e9, br / bk);
    for (int i = 0; i < n_m; i++) {
        free(bufs[i]);
    }
    free((void *) w.data);
}


int
main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    double secs = argc > 2 ? atof(argv[2]) : 1.0;
    llm_threadpool *tp = llm_threadpool_create(threads);
    float *x = malloc(sizeof(float) * 128 * 49152);
    float *out = malloc(sizeof(float) * 128 * 49152);
    llm_tensor one, model[30 * 7 + 1];
    size_t model_bytes = 0;
    double t1, t4, t16;

    for (int k = 0; k < 128 * 49152; k++) {
        x[k] = (float) (k % 97) / 48.0f - 1.0f;
    }
    printf("kernels %s, %d threads\n", llm_kernels_isa_name(llm_kernels_isa()),
           threads);
    if (argc > 3 && strcmp(argv[3], "stream") == 0) {
        stream_vs_read(x, out);
        llm_threadpool_free(tp);
        return 0;
    }
    if (argc > 3 && strcmp(argv[3], "f16") == 0) {
        f16_cases(x, out, secs);
        llm_threadpool_free(tp);
        return 0;
    }
    if (argc > 3 && strcmp(argv[3], "packed") == 0) {
        packed_vs_plain(x, out, secs, argc > 4 ? argv[4] : NULL);
        llm_threadpool_free(tp);
        return 0;
    }

    one = random_matrix(GGML_TYPE_Q4_1, 1536, 576);
    size_t one_bytes = ggml_row_size(one.type, one.cols) * one.rows;
    t1 = best_time(tp, &one, 1, 1, x, out, secs);
    t4 = best_time(tp, &one, 1, 4, x, out, secs);
    t16 = best_time(tp, &one, 1, 16, x, out, secs);
    printf("Q4_1 1536x576 (%.0f KB, cache-resident): n_x=1 %.1f us = %.1f "
           "GB/s; n_x=4 %.2fx, n_x=16 %.2fx the time of n_x=1\n",
           one_bytes / 1024.0, t1 * 1e6, one_bytes / t1 / 1e9, t4 / t1,
           t16 / t1);

    for (int l = 0; l < 30; l++) {
        static const int shape[7][2] = {
            { 576, 576 }, { 192, 576 }, { 192, 576 }, { 576, 576 },
            { 1536, 576 }, { 1536, 576 }, { 576, 1536 },
        };
        for (int j = 0; j < 7; j++) {
            model[l * 7 + j] = random_matrix(GGML_TYPE_Q4_1, shape[j][0],
                                             shape[j][1]);
        }
    }
    model[210] = random_matrix(GGML_TYPE_Q8_0, 49152, 576);
    for (int j = 0; j < 211; j++) {
        model_bytes += ggml_row_size(model[j].type, model[j].cols) * model[j].rows;
    }
    double bw = dram_gbs(tp);
    t1 = best_time(tp, model, 211, 1, x, out, 3 * secs);
    t4 = best_time(tp, model, 211, 4, x, out, 3 * secs);
    t16 = best_time(tp, model, 211, 16, x, out, 3 * secs);
    printf("DRAM read bandwidth (%d threads, 1 GiB): %.1f GB/s\n", threads, bw);
    printf("SmolLM2-135M-shaped weights (%.1f MB, 211 matmuls):\n",
           model_bytes / 1e6);
    printf("  n_x=1 : %.2f ms/step, %.1f GB/s = %.0f%% of DRAM roofline "
           "(%.0f steps/s, roofline %.0f)\n", t1 * 1e3, model_bytes / t1 / 1e9,
           100.0 * model_bytes / t1 / 1e9 / bw, 1 / t1, bw * 1e9 / model_bytes);
    printf("  n_x=4 : %.2f ms/step, %.2fx the time of n_x=1 (%.0f rows/s)\n",
           t4 * 1e3, t4 / t1, 4 / t4);
    printf("  n_x=16: %.2f ms/step, %.2fx the time of n_x=1 (%.0f rows/s)\n",
           t16 * 1e3, t16 / t1, 16 / t16);
    llm_threadpool_free(tp);
    return 0;
}
