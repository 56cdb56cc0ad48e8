/*
 * Single-stream decode and prefill speed against the machine's roofline
 * (docs/perf.md). Decode at batch 1 reads every weight once per token, so
 * its ceiling is DRAM read bandwidth / weight bytes per token.
 *
 *   cc -O2 -g -std=gnu11 -pthread -Iengine -Ikernels -Ibench \
 *       bench/decode.c bench/membw.c <engine library objects> \
 *       -lpcre2-8 -lcjson -lutf8proc -lm -o build/bench_decode
 *   build/bench_decode [--model PATH] [--threads N] [--prompt N]
 *                      [--decode N] [--bw 0|1]
 *
 * Prints one table: bandwidth, weight bytes, prefill tokens/s (one batch
 * of --prompt tokens, best of 3), decode tokens/s (--decode steps after
 * that prompt, best of 3, mean beside it) and decode as a fraction of the
 * roofline, then how much of the process's anonymous memory (the packed
 * weights, the KV pool) sits on transparent huge pages. --bw 0 skips the
 * bandwidth pass (1 GiB read 15 times; the
 * kernels table of make bench's peer mode needs only the two speeds):
 * bandwidth, roofline and the fraction then print as 0.
 */
#include "backend/backend.h"
#include "membw.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static double
now_s(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


/* kB of the process's anonymous memory, and of it on transparent huge
 * pages (/proc/self/smaps_rollup): the packed weights and the KV pool ask
 * for huge pages, and a fragmented machine may give 4 KB pages instead,
 * which decode reads slower (docs/perf.md) */
static void
anon_kb(long *anon, long *huge)
{
    char   line[256];
    FILE  *f = fopen("/proc/self/smaps_rollup", "r");

    *anon = *huge = -1;
    if (f == NULL) {
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        sscanf(line, "Anonymous: %ld kB", anon);
        sscanf(line, "AnonHugePages: %ld kB", huge);
    }
    fclose(f);
}


typedef struct {
    llm_backend    *be;
    int32_t         table[512];
    int32_t         n_blocks;
    float          *logits;
} bench_seq;


static int
run(bench_seq *s, const int32_t *ids, int n, int start)
{
    const int32_t  *tables[1] = { s->table };
    int32_t        *pos = malloc(sizeof(int32_t) * n);
    int32_t        *seq = calloc(n, sizeof(int32_t));
    int32_t         last = n - 1;
    int             i, rc;

    for (i = 0; i < n; i++) {
        pos[i] = start + i;
    }
    llm_batch b = { n, ids, pos, seq, 1, tables, &s->n_blocks, 1, &last,
                    s->logits, 0, NULL, NULL, NULL, 0, NULL };
    rc = llm_backend_forward(s->be, &b);
    if (rc != 0) {
        fprintf(stderr, "bench: %s\n", s->be->err);
    }
    free(pos);
    free(seq);
    return rc;
}


int
main(int argc, char **argv)
{
    const char           *path = getenv("MODEL");
    int                   threads = 2, n_prompt = 128, n_decode = 64;
    int                   measure_bw = 1;
    llm_model             m;
    llm_backend_options   o;
    bench_seq             s;
    char                  err[512];
    int32_t              *ids;
    double                bw, t0, prefill = 0, dt, decode, mean, roof;
    uint64_t              wbytes;
    int                   i, rep;
    long                  anon, huge;

    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--model") == 0) path = argv[i + 1];
        else if (strcmp(argv[i], "--threads") == 0) threads = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--prompt") == 0) n_prompt = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--decode") == 0) n_decode = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--bw") == 0) measure_bw = atoi(argv[i + 1]);
    }
    if (path == NULL) {
        fprintf(stderr, "bench: no model: --model FILE or MODEL=FILE "
                "(make bench passes the default model)\n");
        return 2;
    }
    if (threads < 1 || n_prompt < 1 || n_decode < 1
        || n_prompt + n_decode > 512 * 16)
    {
        fprintf(stderr, "bench: bad sizes\n");
        return 2;
    }
    if (llm_model_load(&m, path, 0, 1) != 0) {
        fprintf(stderr, "bench: %s\n", m.err);
        return 1;
    }
    llm_backend_options_default(&o, &m);
    o.n_threads = threads;
    o.max_batch_tokens = n_prompt;
    o.kv_n_blocks = (n_prompt + n_decode + 15) / 16;
    o.kv_prealloc = 1;          /* as the engine by default: every block
                                   is used here anyway */
    memset(&s, 0, sizeof(s));
    s.n_blocks = o.kv_n_blocks;
    for (i = 0; i < s.n_blocks; i++) {
        s.table[i] = i;
    }
    s.logits = malloc(sizeof(float) * m.cfg.vocab_size);
    s.be = llm_backend_create("cpu", &m, &o, err, sizeof(err));
    if (s.be == NULL) {
        fprintf(stderr, "bench: %s\n", err);
        return 1;
    }

    bw = measure_bw ? llm_measure_read_bw(threads, 0) : 0;
    wbytes = llm_model_weight_bytes(&m);

    ids = malloc(sizeof(int32_t) * (n_prompt + n_decode));
    for (i = 0; i < n_prompt + n_decode; i++) {
        ids[i] = (i * 7919 + 11) % m.cfg.vocab_size;
    }
    for (rep = 0; rep < 3; rep++) {
        t0 = now_s();
        if (run(&s, ids, n_prompt, 0) != 0) {
            return 1;
        }
        dt = now_s() - t0;
        if (rep == 0 || n_prompt / dt > prefill) {
            prefill = n_prompt / dt;
        }
    }
    /* best of 3 runs, like the bandwidth: the machine's limit, not its
     * average under other load; the mean is printed beside it */
    decode = 0;
    mean = 0;
    for (rep = 0; rep < 3; rep++) {
        t0 = now_s();
        for (i = 0; i < n_decode; i++) {
            if (run(&s, ids + n_prompt + i, 1, n_prompt + i) != 0) {
                return 1;
            }
        }
        dt = n_decode / (now_s() - t0);
        mean += dt / 3;
        decode = dt > decode ? dt : decode;
    }
    roof = bw * 1e9 / (double) wbytes;

    printf("model            %s\n", path);
    printf("threads          %d\n", threads);
    printf("read bandwidth   %.2f GB/s (%d threads, 1 GiB, read-only)\n",
           bw, threads);
    printf("weights/token    %.1f MB\n", wbytes / 1e6);
    printf("roofline         %.2f tokens/s\n", roof);
    printf("prefill          %.2f tokens/s (%d-token batch, best of 3)\n",
           prefill, n_prompt);
    printf("decode           %.2f tokens/s (batch 1, %d steps after %d, "
           "best of 3; mean %.1f)\n", decode, n_decode, n_prompt, mean);
    printf("decode/roofline  %.1f%%\n", roof > 0 ? 100.0 * decode / roof : 0);
    anon_kb(&anon, &huge);
    if (anon >= 0 && huge >= 0) {        /* no smaps_rollup: no line */
        printf("huge pages       %.1f of %.1f MB anonymous\n",
               huge / 1024.0, anon / 1024.0);
    }

    llm_backend_free(s.be);
    llm_model_free(&m);
    free(ids);
    free(s.logits);
    return 0;
}
