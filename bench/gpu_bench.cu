/*
 * gpu_bench: the CUDA backend on synthetic Llama-3-8B and Llama-3.2-1B
 * shaped models (random bf16 weights made on the device, no file).
 *
 *   gpu_bench [--model 8b|1b|all] [--prompt N] [--gen N]
 *             [--batches 1,8,64,256] [--no-graphs] [--dry-run]
 *
 * Measures, in one run:
 *   - HBM bandwidth: a 2 GiB device-to-device copy, bytes read + written
 *     per second (best of 10);
 *   - per model and batch size B: B prompts of N tokens prefilled at once
 *     (chunks of max_batch_tokens), TTFT = time until every sequence has
 *     its first token (mean over sequences of the time their chunk
 *     finished); then --gen decode steps of all B sequences, greedy on
 *     the device: TPOT (mean and p50 step time) and tokens/s = B / TPOT;
 *   - batch 1: decode bytes per token (weights + the KV read) over TPOT,
 *     as a fraction of the copy bandwidth: the roofline figure.
 * --dry-run prints the plan (shapes, bytes, KV) without touching CUDA.
 */
extern "C" {
#include "backend/backend.h"
#include "backend/backend_cuda.h"
}

#include <cuda_runtime.h>

#include <algorithm>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#define CHECK(call) do {                                                     \
        cudaError_t e_ = (call);                                             \
        if (e_ != cudaSuccess) {                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,    \
                    cudaGetErrorString(e_));                                 \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

typedef struct {
    const char  *name;
    llm_config   cfg;
} shape;


static shape
shape_8b(void)
{
    shape s;

    memset(&s, 0, sizeof(s));
    s.name = "llama3-8b";
    snprintf(s.cfg.arch, sizeof(s.cfg.arch), "llama");
    s.cfg.dim = 4096;
    s.cfg.n_layers = 32;
    s.cfg.n_heads = 32;
    s.cfg.n_kv_heads = 8;
    s.cfg.head_dim = 128;
    s.cfg.hidden_dim = 14336;
    s.cfg.vocab_size = 128256;
    s.cfg.max_seq_len = 4096;
    s.cfg.rope_dim = 128;
    s.cfg.rope_theta = 500000.0f;
    s.cfg.norm_eps = 1e-5f;
    s.cfg.rope_neox = 1;
    return s;
}


static shape
shape_1b(void)
{
    shape s = shape_8b();

    s.name = "llama3.2-1b";
    s.cfg.dim = 2048;
    s.cfg.n_layers = 16;
    s.cfg.n_heads = 32;
    s.cfg.n_kv_heads = 8;
    s.cfg.head_dim = 64;
    s.cfg.hidden_dim = 8192;
    s.cfg.rope_dim = 64;
    s.cfg.tied_output = 1;
    return s;
}


static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


/* bytes read + written per second by a device-to-device copy */
static double
copy_bandwidth(void)
{
    size_t       bytes = (size_t) 2 << 30;
    void        *a, *b;
    cudaEvent_t  e0, e1;
    float        ms, best = 1e30f;
    int          i;

    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMemset(a, 1, bytes));
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    for (i = 0; i < 13; i++) {
        CHECK(cudaEventRecord(e0));
        CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 3 && ms < best) {
            best = ms;
        }
    }
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    return 2.0 * bytes / (best * 1e-3);
}


typedef struct {
    int                      n;          /* sequences */
    int                      per;        /* blocks per sequence */
    std::vector<int32_t>     blocks;     /* (n, per) */
    std::vector<const int32_t *> tables;
    std::vector<int32_t>     n_blocks;
    std::vector<int32_t>     last;       /* last token of each sequence */
    std::vector<int32_t>     len;
} seqs;


static void
seqs_init(seqs *s, int n, int per)
{
    int i;

    s->n = n;
    s->per = per;
    s->blocks.resize((size_t) n * per);
    s->tables.resize(n);
    s->n_blocks.assign(n, per);
    s->last.assign(n, 0);
    s->len.assign(n, 0);
    for (i = 0; i < n * per; i++) {
        s->blocks[i] = i;
    }
    for (i = 0; i < n; i++) {
        s->tables[i] = &s->blocks[(size_t) i * per];
    }
}


typedef struct {
    double  ttft_mean, prefill_s, tpot_mean, tpot_p50, tok_s, kv_read;
} result;


static int
run_batch(llm_backend *be, int B, int P, int G, result *r)
{
    int                   vocab = be->model->cfg.vocab_size;
    int                   max_t = be->opt.max_batch_tokens, bs = 16;
    int                   per = (P + G + bs - 1) / bs, i, k, step;
    std::vector<int32_t>  tok, pos, seq, lidx, ids;
    std::vector<double>   steps;
    seqs                  s;
    llm_batch             b;
    double                t0, t1, ttft_sum = 0.0;

    if ((long long) B * per > be->opt.kv_n_blocks) {
        fprintf(stderr, "batch %d needs %d KV blocks, pool has %d\n", B,
                B * per, be->opt.kv_n_blocks);
        return -1;
    }
    seqs_init(&s, B, per);
    /* prefill: whole prompts per chunk, as many as fit in max_t tokens */
    t0 = now_s();
    for (k = 0; k < B; ) {
        int first = k, n = 0;

        tok.clear(); pos.clear(); seq.clear(); lidx.clear();
        while (k < B && n + P <= max_t) {
            for (i = 0; i < P; i++) {
                tok.push_back((int32_t) ((k * 7919u + i * 104729u) % vocab));
                pos.push_back(i);
                seq.push_back(k - first);
            }
            n += P;
            lidx.push_back(n - 1);
            k++;
        }
        if (n == 0) {
            fprintf(stderr, "prompt of %d tokens > max_batch_tokens %d\n", P,
                    max_t);
            return -1;
        }
        ids.resize(lidx.size());
        memset(&b, 0, sizeof(b));
        b.n_tokens = n;
        b.token = tok.data();
        b.pos = pos.data();
        b.seq = seq.data();
        b.n_seqs = k - first;
        b.block_table = &s.tables[first];
        b.n_blocks = &s.n_blocks[first];
        b.n_logits = (int) lidx.size();
        b.logit_idx = lidx.data();
        if (llm_backend_cuda_forward_greedy(be, &b, ids.data()) != 0) {
            fprintf(stderr, "prefill: %s\n", be->err);
            return -1;
        }
        t1 = now_s();
        for (i = first; i < k; i++) {
            s.last[i] = ids[i - first];
            s.len[i] = P;
            ttft_sum += t1 - t0;
        }
    }
    r->prefill_s = now_s() - t0;
    r->ttft_mean = ttft_sum / B;

    /* decode: G steps of all B sequences */
    tok.resize(B); pos.resize(B); seq.resize(B); lidx.resize(B);
    ids.resize(B);
    for (step = 0; step < G; step++) {
        for (i = 0; i < B; i++) {
            tok[i] = s.last[i];
            pos[i] = s.len[i];
            seq[i] = i;
            lidx[i] = i;
        }
        memset(&b, 0, sizeof(b));
        b.n_tokens = B;
        b.token = tok.data();
        b.pos = pos.data();
        b.seq = seq.data();
        b.n_seqs = B;
        b.block_table = s.tables.data();
        b.n_blocks = s.n_blocks.data();
        b.n_logits = B;
        b.logit_idx = lidx.data();
        t0 = now_s();
        if (llm_backend_cuda_forward_greedy(be, &b, ids.data()) != 0) {
            fprintf(stderr, "decode: %s\n", be->err);
            return -1;
        }
        steps.push_back(now_s() - t0);
        for (i = 0; i < B; i++) {
            s.last[i] = ids[i];
            s.len[i]++;
        }
    }
    /* the first step of a bucket captures its graph: not timed */
    steps.erase(steps.begin());
    r->tpot_mean = 0.0;
    for (double x : steps) {
        r->tpot_mean += x;
    }
    r->tpot_mean /= steps.size();
    std::sort(steps.begin(), steps.end());
    r->tpot_p50 = steps[steps.size() / 2];
    r->tok_s = B / r->tpot_mean;
    r->kv_read = 0.0;
    return 0;
}


static void
usage(void)
{
    fprintf(stderr, "usage: gpu_bench [--model 8b|1b|all] [--prompt N] "
            "[--gen N] [--batches 1,8,64,256] [--no-graphs] [--dry-run]\n");
}


int
main(int argc, char **argv)
{
    const char           *which = "all", *batches = "1,8,64,256";
    int                   P = 128, G = 64, graphs = 1, dry = 0, i;
    std::vector<int>      bl;
    std::vector<shape>    shapes;
    double                bw = 0.0;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dry-run") == 0) {
            dry = 1;
        } else if (strcmp(argv[i], "--no-graphs") == 0) {
            graphs = 0;
        } else if (i + 1 < argc && strcmp(argv[i], "--model") == 0) {
            which = argv[++i];
        } else if (i + 1 < argc && strcmp(argv[i], "--prompt") == 0) {
            P = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--gen") == 0) {
            G = atoi(argv[++i]);
        } else if (i + 1 < argc && strcmp(argv[i], "--batches") == 0) {
            batches = argv[++i];
        } else {
            usage();
            return 2;
        }
    }
    for (const char *p = batches; *p; ) {
        int v = atoi(p);

        if (v < 1 || v > 4096) {
            fprintf(stderr, "gpu_bench: batch sizes 1..4096: %s\n", batches);
            return 2;
        }
        bl.push_back(v);
        p = strchr(p, ',');
        if (p == NULL) {
            break;
        }
        p++;
    }
    if (P < 1 || G < 2 || P + G > 4096) {
        fprintf(stderr, "gpu_bench: --prompt >= 1, --gen >= 2, sum <= 4096\n");
        return 2;
    }
    if (strcmp(which, "8b") == 0 || strcmp(which, "all") == 0) {
        shapes.push_back(shape_8b());
    }
    if (strcmp(which, "1b") == 0 || strcmp(which, "all") == 0) {
        shapes.push_back(shape_1b());
    }
    if (shapes.empty()) {
        usage();
        return 2;
    }

    printf("gpu_bench: prompt %d, gen %d, batches %s, graphs %s\n", P, G,
           batches, graphs ? "on" : "off");
    if (!dry) {
        bw = copy_bandwidth();
        printf("HBM copy bandwidth (read + write): %.0f GB/s\n", bw / 1e9);
    }
    for (shape &sh : shapes) {
        const llm_config     *c = &sh.cfg;
        llm_backend_options   o;
        llm_backend          *be;
        char                  err[512];
        int                   per = (P + G + 15) / 16, maxb = 0;
        double                kv_tok = 2.0 * c->n_layers * c->n_kv_heads
                                       * c->head_dim * 2;

        for (int B : bl) {
            maxb = B > maxb ? B : maxb;
        }
        memset(&o, 0, sizeof(o));
        o.n_threads = 1;
        o.kv_block_size = 16;
        o.kv_n_blocks = maxb * per + 16;
        o.max_batch_tokens = 8192;
        printf("\n%s: dim %d, %d layers, %d/%d heads x %d, hidden %d, vocab "
               "%d; KV %.0f KiB/token, %d blocks\n", sh.name, c->dim,
               c->n_layers, c->n_heads, c->n_kv_heads, c->head_dim,
               c->hidden_dim, c->vocab_size, kv_tok / 1024, o.kv_n_blocks);
        if (dry) {
            continue;
        }
        be = llm_backend_cuda_create_synthetic(c, &o, 1234, err, sizeof(err));
        if (be == NULL) {
            fprintf(stderr, "gpu_bench: %s\n", err);
            return 1;
        }
        llm_backend_cuda_set_graphs(be, graphs);
        uint64_t wb = llm_backend_cuda_weight_bytes(be);
        printf("weights read per decode token: %.3f GB\n", wb / 1e9);
        printf("%6s %10s %10s %10s %10s %12s %s\n", "batch", "TTFT_ms",
               "prefill_s", "TPOT_ms", "TPOT_p50", "decode_tok/s",
               "roofline");
        double tok1 = 0.0;
        for (int B : bl) {
            result  r;

            if (run_batch(be, B, P, G, &r) != 0) {
                llm_backend_free(be);
                return 1;
            }
            /* bytes per step: weights once + every sequence's KV (mean
             * context P + G/2) */
            double bytes = wb + (double) B * (P + G / 2.0) * kv_tok;
            double frac = bytes / r.tpot_mean / bw;

            if (B == 1) {
                tok1 = r.tok_s;
            }
            printf("%6d %10.2f %10.3f %10.3f %10.3f %12.0f %5.1f%% of %.0f "
                   "GB/s%s\n", B, r.ttft_mean * 1e3, r.prefill_s,
                   r.tpot_mean * 1e3, r.tpot_p50 * 1e3, r.tok_s, 100 * frac,
                   bw / 1e9, B == 1 ? "  <- batch-1 roofline" : "");
            if (B == 64 && tok1 > 0.0) {
                printf("       batch-64 throughput = %.1fx batch-1\n",
                       r.tok_s / tok1);
            }
            fflush(stdout);
        }
        llm_backend_free(be);
    }
    return 0;
}
