/*
 * The MoE FFN step, fused (one pool job, moe_cpu.c) against the unfused
 * path (three llm_matmul pool jobs per routed expert, the code before the
 * fused step), interleaved in one process so that load from others on the
 * machine hits both alike (docs/perf.md).
 *
 *   build/bench/moe --model MOE.gguf [--threads 2] [--tokens 1,128,512]
 *                   [--rounds 8] [--pack 1]
 *
 * For each token count n: n random input rows (the same for both), then
 * `rounds` rounds of one forward of every MoE layer with each variant, in
 * ABBA order, timed per layer pass; prints the median of each, their
 * ratio (unfused / fused: above 1 means the fused step is faster), the
 * median process CPU time of each (cpu_u, cpu_f: on a shared machine the
 * wall times measure the load, the CPU times the work), the expert
 * weight bytes a pass read (MB read: the experts some token was routed
 * to, gate + up + down, in every layer), the load average, and whether both left the same bits (they must: the
 * fused step changes no result). --pack 1 (the default) packs every
 * expert first as the CPU backend does at load (backend_cpu.c pack_all),
 * so that the kernels are the engine's; --pack 0 reads them in place.
 *
 * defines: main
 */
#include "alloc.h"
#include "backend/moe_cpu.h"
#include "model/model.h"
#include "threadpool.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ROUNDS  64


static double
now_s(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


static int
cmp_double(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return (x > y) - (x < y);
}


/* every expert view of m packed in place of its file rows (those llm_pack
 * takes); the packed copies are left to the process's exit. 0, or -1 */
static int
pack_experts(llm_model *m)
{
    size_t       n = (size_t) m->cfg.n_layers * 3 * m->cfg.n_expert;
    llm_tensor  *w, src;
    void        *dst;

    for (size_t i = 0; i < n; i++) {
        w = &m->experts[i];
        if (!llm_pack_useful(w)) {
            continue;
        }
        if ((dst = llm_alloc_aligned(llm_pack_size(w))) == NULL) {
            return -1;
        }
        src = *w;
        llm_pack(&src, dst, w);
    }
    return 0;
}


static double
cpu_s(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


static size_t
tensor_bytes(const llm_tensor *w)
{
    size_t  groups = w->pack ? (size_t) (w->rows + w->pack - 1) / w->pack
                             : (size_t) w->rows;

    return groups * w->row_stride;
}


/* one pass over every MoE layer: x += moe_l(xb) for each layer l; *cpu
 * the process CPU seconds it took, *bytes the expert weight bytes it
 * read (the experts some token was routed to) */
static double
pass(llm_moe_cpu *mc, const llm_model *m, float *x, const float *xb, int n,
    double *cpu, size_t *bytes)
{
    double  t0 = now_s(), c0 = cpu_s();

    *bytes = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        const llm_layer  *y = &m->layers[l];

        if (llm_moe_cpu_forward(mc, x, xb, n, y) != 0) {
            fprintf(stderr, "moe: out of memory\n");
            exit(1);
        }
        for (int e = 0; e < mc->n_expert; e++) {
            if (mc->count[e + 1] > mc->count[e]) {
                *bytes += tensor_bytes(&y->exp_gate[e])
                          + tensor_bytes(&y->exp_up[e])
                          + tensor_bytes(&y->exp_down[e]);
            }
        }
    }
    *cpu = cpu_s() - c0;
    return now_s() - t0;
}


int
main(int argc, char **argv)
{
    const char      *path = NULL, *toks = "1,128,512";
    int              threads = 2, rounds = 8, pack = 1, i;
    llm_model        m;
    llm_moe_cpu      mc;
    llm_threadpool  *tp;
    double           load = 0.0;
    FILE            *f;

    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--model") == 0) {
            path = argv[i + 1];
        } else if (strcmp(argv[i], "--threads") == 0) {
            threads = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--tokens") == 0) {
            toks = argv[i + 1];
        } else if (strcmp(argv[i], "--rounds") == 0) {
            rounds = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--pack") == 0) {
            pack = atoi(argv[i + 1]);
        }
    }
    if (path == NULL || threads < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: moe --model MOE.gguf [--threads N] "
                "[--tokens 1,128,512] [--rounds 1..%d] [--pack 0|1]\n", MAX_ROUNDS);
        return 2;
    }
    if (llm_model_load(&m, path, 0, 1) != 0) {
        fprintf(stderr, "moe: %s\n", m.err);
        return 1;
    }
    if (m.cfg.n_expert == 0) {
        fprintf(stderr, "moe: %s has no experts\n", path);
        return 1;
    }
    if (pack && pack_experts(&m) != 0) {
        fprintf(stderr, "moe: out of memory packing the experts\n");
        return 1;
    }
    tp = llm_threadpool_create(threads);
    printf("%s: %d MoE layers, %d experts of %d, %d per token, dim %d, "
           "%d threads, experts %s\n", path, m.cfg.n_layers, m.cfg.n_expert,
           m.cfg.expert_ff, m.cfg.n_expert_used, m.cfg.dim, threads,
           pack ? "packed" : "in place");
    printf("%6s %12s %12s %8s %9s %9s %8s %6s %s\n", "tokens", "unfused ms",
           "fused ms", "ratio", "cpu_u ms", "cpu_f ms", "MB read", "load",
           "bits");

    for (const char *p = toks; *p != '\0'; ) {
        int      n = atoi(p), d = m.cfg.dim, same;
        size_t   len = (size_t) n * d;
        float   *xb, *xa, *xf;
        double   tu[MAX_ROUNDS], tf[MAX_ROUNDS], cu[MAX_ROUNDS];
        double   cf[MAX_ROUNDS];
        size_t   bytes;
        uint32_t r = 7;

        if (n < 1 || tp == NULL
            || llm_moe_cpu_init(&mc, &m.cfg, n, tp, 0) != 0)
        {
            fprintf(stderr, "moe: bad token count or out of memory\n");
            return 1;
        }
        xb = malloc(sizeof(float) * len);
        xa = calloc(len, sizeof(float));
        xf = calloc(len, sizeof(float));
        if (xb == NULL || xa == NULL || xf == NULL) {
            fprintf(stderr, "moe: out of memory\n");
            return 1;
        }
        for (size_t j = 0; j < len; j++) {     /* rmsnormed-like rows */
            r = r * 1664525u + 1013904223u;
            xb[j] = ((float) (r >> 8) / 16777216.0f - 0.5f) * 3.4f;
        }
        for (i = 0; i < rounds; i++) {          /* ABBA */
            int  fused_first = i % 2;

            mc.fused = fused_first;
            (fused_first ? tf : tu)[i] = pass(&mc, &m, fused_first ? xf : xa,
                                              xb, n, &(fused_first ? cf : cu)[i],
                                              &bytes);
            mc.fused = !fused_first;
            (fused_first ? tu : tf)[i] = pass(&mc, &m, fused_first ? xa : xf,
                                              xb, n, &(fused_first ? cu : cf)[i],
                                              &bytes);
        }
        same = memcmp(xa, xf, sizeof(float) * len) == 0;
        qsort(tu, rounds, sizeof(double), cmp_double);
        qsort(tf, rounds, sizeof(double), cmp_double);
        qsort(cu, rounds, sizeof(double), cmp_double);
        qsort(cf, rounds, sizeof(double), cmp_double);
        if ((f = fopen("/proc/loadavg", "r")) != NULL) {
            if (fscanf(f, "%lf", &load) != 1) {
                load = 0.0;
            }
            fclose(f);
        }
        printf("%6d %12.2f %12.2f %7.2fx %9.2f %9.2f %8.1f %6.2f %s\n", n,
               tu[rounds / 2] * 1e3, tf[rounds / 2] * 1e3,
               tu[rounds / 2] / tf[rounds / 2], cu[rounds / 2] * 1e3,
               cf[rounds / 2] * 1e3, bytes / 1e6, load,
               same ? "equal" : "DIFFER");
        fflush(stdout);
        free(xb);
        free(xa);
        free(xf);
        llm_moe_cpu_free(&mc);
        while (*p != '\0' && *p != ',') {
            p++;
        }
        if (*p == ',') {
            p++;
        }
    }
    llm_threadpool_free(tp);
    llm_model_free(&m);
    return 0;
}
