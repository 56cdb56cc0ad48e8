/*
 * CUDA backend (see backend_cuda.h for the design note, backend.h for the
 * batch contract).
 *
 * One step, for n tokens at once (shapes per rank; tp 1 for now):
 *
 *   upload the batch (ids, positions, tiles, block tables): one copy
 *   x = embed(tokens)                                   (n, dim) fp32
 *   per layer:
 *     xb  = rmsnorm(x += y) * attn_norm                 (n, dim) bf16
 *     qkv = xb @ Wqkv^T                                 (n, q+2kv) fp32
 *     bias, qk-norm, rope on qkv; K, V -> paged pool    bf16
 *     att = paged causal attention(q, pool)             (n, q_dim) bf16
 *     y   = att @ Wo^T                                  (n, dim) fp32
 *     xb  = rmsnorm(x += y) * ffn_norm
 *     gu  = xb @ Wgu^T                                  (n, 2*hidden) fp32
 *     hb  = silu(gate) * up                             (n, hidden) bf16
 *     y   = hb @ Wdown^T                                (n, dim) fp32
 *   x += y; logits = rmsnorm(x[wanted]) * out_norm @ output^T, in chunks
 *   of LOGIT_ROWS rows copied to the host
 *
 * Every CUDA and cuBLASLt call is checked; a failure leaves
 * "file:line: call: error" in be->err.
 *
 * defines: llm_backend_cuda_create, llm_backend_cuda_create_synthetic,
 *          llm_backend_cuda_forward_greedy, llm_backend_cuda_weight_bytes,
 *          llm_backend_cuda_set_graphs
 */
extern "C" {
#include "backend/backend.h"
#include "backend/backend_cuda.h"
#include "backend/gpu_stats.h"
#include "format/gguf.h"
#include "kernels_cuda.h"
#include "sample/sampler.h"
#include "model/tp.h"

/* from kernels/quant.h (a C11 header C++ cannot include) */
int llm_quant_block(uint32_t type);
int llm_quant_block_bytes(uint32_t type);
}

#include <cublasLt.h>
#include <nccl.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOGIT_ROWS      256          /* logits computed per GEMM chunk */
#define SAMPLE_ROWS     32           /* rows per sampling launch: bounds
                                        the candidate scratch (12 bytes x
                                        vocab per row) */
#define GEMM_PLANS      64           /* cached cuBLASLt plans */
#define WORKSPACE_BYTES (32u << 20)

static const int graph_buckets[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256 };
#define N_BUCKETS  (int) (sizeof(graph_buckets) / sizeof(graph_buckets[0]))

typedef struct {
    llm_bf16  *wqkv;      /* (q_dim + 2*kv_dim, dim) wq|wk|wv */
    llm_bf16  *wo;        /* (dim, q_dim) */
    llm_bf16  *wgu;       /* (2*hidden, dim) gate|up */
    llm_bf16  *wdown;     /* (dim, hidden) */
    float     *attn_norm; /* (dim) */
    float     *ffn_norm;  /* (dim) */
    float     *bqkv;      /* (q_dim + 2*kv_dim) qwen2, else NULL */
    float     *q_norm;    /* (head_dim) qwen3, else NULL */
    float     *k_norm;    /* (head_dim) qwen3, else NULL */
} cu_layer;

typedef struct {
    int                      m, n, k;
    cublasLtMatmulDesc_t     desc;
    cublasLtMatrixLayout_t   a, b, c;
    cublasLtMatmulAlgo_t     algo;
} gemm_plan;

/* device addresses of one batch's metadata for a layout of L rows */
typedef struct {
    int32_t             *tok;     /* (L) */
    int32_t             *pos;     /* (L) */
    int32_t             *seq;     /* (L) compact sequence index */
    int32_t             *lidx;    /* (L) logit rows */
    llm_cuda_attn_tile  *tiles;   /* (L) */
    int32_t             *tables;  /* (L + 1, table_stride) */
    size_t               ints;    /* int32s of the whole layout */
} meta_view;

typedef struct {
    llm_model          synth;        /* the model of a synthetic backend */
    /* tensor parallelism (docs/cuda.md): this rank of n_ranks, on device
     * `device`; y is summed over the ranks after wo and after down */
    int                device, rank, n_ranks;
    ncclComm_t         comm;         /* NULL: one rank, or ranks sharing a
                                        device (host-ordered sum below) */
    llm_tp_group      *group;        /* shared device: the rank threads */
    float            **peer_y;       /* shared device: (n_ranks) every
                                        rank's y, a device array */
    float             *ysum;         /* shared device: (n, dim) the sum */
    int                kv_divisor;   /* ranks sharing this device's pool
                                        budget */
    cudaStream_t       st;
    cublasLtHandle_t   lt;
    void              *workspace;
    int                dim, q_dim, kv_dim, qkv_dim, hidden, vocab;
    int                n_layers, n_heads, n_kv_heads, head_dim;
    int                max_tokens, table_stride, n_blocks, bs;
    int                graphs_on;
    uint64_t           weight_bytes;     /* read per decode token */
    /* weights */
    llm_bf16          *tok_embd;   /* (vocab, dim) */
    llm_bf16          *output;     /* (vocab, dim), tok_embd when tied */
    float             *out_norm;   /* (dim) */
    float             *inv_freq;   /* (rope_dim / 2) */
    cu_layer          *layers;     /* host array (n_layers) */
    /* KV pool: n_blocks + 1 blocks, the last a scratch block for the
     * padding rows of graph buckets */
    llm_bf16          *pool;       /* (n_blocks + 1, layers, 2, bs, kv_dim) */
    /* activations, for max_tokens rows */
    float             *x;          /* (n, dim) residual stream */
    float             *y;          /* (n, dim) output of wo / down */
    llm_bf16          *xb;         /* (n, dim) normed */
    float             *qkv;        /* (n, qkv_dim) */
    llm_bf16          *att;        /* (n, q_dim) */
    float             *gu;         /* (n, 2*hidden) */
    llm_bf16          *hb;         /* (n, hidden) */
    llm_bf16          *xl;         /* (LOGIT_ROWS, dim) normed logit rows */
    float             *logits;     /* (LOGIT_ROWS, vocab) */
    int32_t           *ids;        /* (LOGIT_ROWS) argmax or sampled */
    /* device sampling (llm_backend_cuda_forward_sample) */
    void              *samp_scratch;   /* llm_cuda_sample_scratch_bytes
                                          (SAMPLE_ROWS, vocab) */
    llm_cuda_sample_params *samp_p;    /* (SAMPLE_ROWS) device */
    uint64_t          *samp_rng;       /* (SAMPLE_ROWS, 4) device */
    llm_cuda_token_edit *samp_edits;   /* (samp_edits_cap) device */
    llm_cuda_sample_params *samp_p_host;   /* pinned, same shapes */
    uint64_t          *samp_rng_host;
    llm_cuda_token_edit *samp_edits_host;
    int32_t           *samp_ids_host;  /* (SAMPLE_ROWS) */
    size_t             samp_edits_cap;
    /* batch metadata: pinned host staging and its device copy */
    int32_t           *meta_host;
    int32_t           *meta_dev;
    int32_t           *seq_map;    /* (n_seqs seen) batch seq -> compact */
    int                seq_map_len;
    gemm_plan          plans[GEMM_PLANS];
    int                n_plans, next_plan;
    cudaGraphExec_t    graph[N_BUCKETS];
} cu_ctx;


static int
be_fail(llm_backend *be, const char *fmt, ...)
{
    va_list  ap;

    va_start(ap, fmt);
    vsnprintf(be->err, sizeof(be->err), fmt, ap);
    va_end(ap);
    return -1;
}


#define CK(call) do {                                                        \
        cudaError_t e_ = (call);                                             \
        if (e_ != cudaSuccess) {                                             \
            return llm_cuda_check_at((int) e_, #call, __FILE__, __LINE__,   \
                                     be->err, sizeof(be->err));              \
        }                                                                    \
    } while (0)

/* our launchers: 0, a cudaError_t, or -1 for invalid arguments */
#define CKK(call) do {                                                       \
        int k_ = (call);                                                     \
        if (k_ == -1) {                                                      \
            return be_fail(be, "%s:%d: %s: invalid arguments", __FILE__,     \
                           __LINE__, #call);                                 \
        }                                                                    \
        if (k_ != 0) {                                                       \
            return llm_cuda_check_at(k_, #call, __FILE__, __LINE__,         \
                                     be->err, sizeof(be->err));              \
        }                                                                    \
    } while (0)

#define CKLT(call) do {                                                      \
        cublasStatus_t s_ = (call);                                          \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                   \
            return be_fail(be, "%s:%d: %s: %s", __FILE__, __LINE__, #call,   \
                           cublasLtGetStatusString(s_));                     \
        }                                                                    \
    } while (0)


#define CKN(call) do {                                                       \
        ncclResult_t n_ = (call);                                            \
        if (n_ != ncclSuccess) {                                             \
            return be_fail(be, "%s:%d: %s: %s", __FILE__, __LINE__, #call,   \
                           ncclGetErrorString(n_));                          \
        }                                                                    \
    } while (0)


/* ---------------------------------------------------------------------------
 * GEMM: D(n, m) fp32 = X(n, k) bf16 @ W(m, k)^T bf16, fp32 accumulation.
 * Column-major, as cuBLASLt sees it: D (m x n) = op(W_cm)^T (m x k) times
 * X_cm (k x n), W_cm being W's rows as columns (k x m, ld k).
 */

static int
plan_make(llm_backend *be, gemm_plan *p, int m, int n, int k)
{
    cu_ctx                          *c = (cu_ctx *) be->ctx;
    cublasOperation_t                ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtMatmulPreference_t       pref;
    cublasLtMatmulHeuristicResult_t  h;
    size_t                           ws = WORKSPACE_BYTES;
    int                              found = 0;

    p->m = m;
    p->n = n;
    p->k = k;
    CKLT(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CKLT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                        &ta, sizeof(ta)));
    CKLT(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                        &tb, sizeof(tb)));
    CKLT(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, k, m, k));
    CKLT(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, k, n, k));
    CKLT(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, m, n, m));
    CKLT(cublasLtMatmulPreferenceCreate(&pref));
    CKLT(cublasLtMatmulPreferenceSetAttribute(pref,
             CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    CKLT(cublasLtMatmulAlgoGetHeuristic(c->lt, p->desc, p->a, p->b, p->c,
                                        p->c, pref, 1, &h, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0) {
        return be_fail(be, "cuBLASLt has no bf16 GEMM for m %d n %d k %d", m,
                       n, k);
    }
    p->algo = h.algo;
    return 0;
}


static void
plan_free(gemm_plan *p)
{
    if (p->desc != NULL) {
        cublasLtMatmulDescDestroy(p->desc);
        cublasLtMatrixLayoutDestroy(p->a);
        cublasLtMatrixLayoutDestroy(p->b);
        cublasLtMatrixLayoutDestroy(p->c);
    }
    memset(p, 0, sizeof(*p));
}


static int
gemm(llm_backend *be, float *d, const llm_bf16 *x, int n, const llm_bf16 *w,
    int m, int k)
{
    cu_ctx     *c = (cu_ctx *) be->ctx;
    gemm_plan  *p = NULL;
    float       one = 1.0f, zero = 0.0f;
    int         i;

    for (i = 0; i < c->n_plans; i++) {
        if (c->plans[i].m == m && c->plans[i].n == n && c->plans[i].k == k) {
            p = &c->plans[i];
            break;
        }
    }
    if (p == NULL) {
        if (c->n_plans < GEMM_PLANS) {
            p = &c->plans[c->n_plans++];
        } else {
            p = &c->plans[c->next_plan];           /* round-robin reuse */
            c->next_plan = (c->next_plan + 1) % GEMM_PLANS;
            plan_free(p);
        }
        if (plan_make(be, p, m, n, k) != 0) {
            plan_free(p);
            return -1;
        }
    }
    CKLT(cublasLtMatmul(c->lt, p->desc, &one, w, p->a, x, p->b, &zero, d,
                        p->c, d, p->c, &p->algo, c->workspace,
                        WORKSPACE_BYTES, c->st));
    return 0;
}


/* ---------------------------------------------------------------------------
 * batch metadata
 */

static meta_view
meta_at(const cu_ctx *c, int32_t *base, int L)
{
    meta_view  v;

    v.tok = base;
    v.pos = base + L;
    v.seq = base + 2 * L;
    v.lidx = base + 3 * L;
    v.tiles = (llm_cuda_attn_tile *) (base + 4 * L);
    v.tables = base + 8 * L;
    v.ints = 8 * (size_t) L + (size_t) (L + 1) * c->table_stride;
    return v;
}


static int
check_batch(llm_backend *be, const llm_batch *b)
{
    cu_ctx            *c = (cu_ctx *) be->ctx;
    llm_batch_limits   l;

    l.max_tokens = c->max_tokens;
    l.vocab = c->vocab;
    l.max_seq_len = be->model->cfg.max_seq_len;
    l.block_size = c->bs;
    l.n_blocks = c->n_blocks;
    l.n_groups = 1;         /* windowed models are refused */
    l.need_logits = 0;      /* forward_greedy/sample need no logits */

    return llm_batch_check(b, &l, be->err, sizeof(be->err));
}


/*
 * Stage the batch for a layout of L >= n_tokens rows (L > n_tokens: the
 * padding rows of a graph bucket, which write to the scratch block and
 * attend to nothing). Sequences are renumbered 0.. in order of first use,
 * so only the tables of sequences in the batch travel. Returns the number
 * of attention tiles.
 */
static int
stage_batch(cu_ctx *c, const llm_batch *b, int L, meta_view *hv)
{
    int   group = c->n_heads / c->n_kv_heads;
    int   qmax = LLM_CUDA_ATTN_MAX_ROWS / group;
    int   i, j, s, cs, n_cs = 0, n_tiles = 0, nb;

    *hv = meta_at(c, c->meta_host, L);
    for (s = 0; s < b->n_seqs && s < c->seq_map_len; s++) {
        c->seq_map[s] = -1;
    }
    for (i = 0; i < L; i++) {
        if (i >= b->n_tokens) {              /* padding row */
            hv->tok[i] = 0;
            hv->pos[i] = 0;
            hv->seq[i] = L;
            hv->lidx[i] = i;
            hv->tiles[i].n_q = 0;
            continue;
        }
        s = b->seq[i];
        cs = c->seq_map[s];
        if (cs < 0) {
            cs = c->seq_map[s] = n_cs++;
            nb = b->n_blocks[s] < c->table_stride ? b->n_blocks[s]
                                                  : c->table_stride;
            memcpy(hv->tables + (size_t) cs * c->table_stride,
                   b->block_table[s], nb * sizeof(int32_t));
        }
        hv->tok[i] = b->token[i];
        hv->pos[i] = b->pos[i];
        hv->seq[i] = cs;
        hv->lidx[i] = i < b->n_logits ? b->logit_idx[i] : i;
        if (n_tiles > 0 && hv->tiles[n_tiles - 1].seq == cs
            && hv->tiles[n_tiles - 1].token + hv->tiles[n_tiles - 1].n_q == i
            && hv->tiles[n_tiles - 1].n_q < qmax)
        {
            hv->tiles[n_tiles - 1].n_q++;
        } else {
            hv->tiles[n_tiles].seq = cs;
            hv->tiles[n_tiles].token = i;
            hv->tiles[n_tiles].n_q = 1;
            hv->tiles[n_tiles].pad_ = 0;
            n_tiles++;
        }
    }
    for (j = n_tiles; j < L; j++) {
        hv->tiles[j].seq = 0;
        hv->tiles[j].token = 0;
        hv->tiles[j].n_q = 0;
        hv->tiles[j].pad_ = 0;
    }
    /* the scratch sequence: every block is the scratch block */
    for (j = 0; j < c->table_stride; j++) {
        hv->tables[(size_t) L * c->table_stride + j] = c->n_blocks;
    }
    return n_tiles;
}


static int
upload_batch(llm_backend *be, int L, int n_seqs_used)
{
    cu_ctx     *c = (cu_ctx *) be->ctx;
    meta_view   hv = meta_at(c, c->meta_host, L);
    size_t      head = 8 * (size_t) L;

    /* the head, the used tables, and the scratch table (last row) */
    CK(cudaMemcpyAsync(c->meta_dev, c->meta_host,
                       (head + (size_t) n_seqs_used * c->table_stride)
                       * sizeof(int32_t), cudaMemcpyHostToDevice, c->st));
    CK(cudaMemcpyAsync(c->meta_dev + head + (size_t) L * c->table_stride,
                       hv.tables + (size_t) L * c->table_stride,
                       c->table_stride * sizeof(int32_t),
                       cudaMemcpyHostToDevice, c->st));
    return 0;
}


/* ---------------------------------------------------------------------------
 * the forward pass on the device, for a staged layout of L rows
 */

/*
 * The all-reduce after wo and after down: y (n, dim) := sum over ranks.
 * With a communicator, ncclAllReduce in fp32 (NCCL's order: TP=N matches
 * TP=1 within a tolerance, docs/cuda.md). Ranks sharing one device (a
 * test mode) add every rank's y in rank order, between host barriers.
 */
static int
allreduce(llm_backend *be, int n)
{
    cu_ctx  *c = (cu_ctx *) be->ctx;
    size_t   count = (size_t) n * c->dim;

    if (c->n_ranks == 1) {
        return 0;
    }
    if (c->comm != NULL) {
        CKN(ncclAllReduce(c->y, c->y, count, ncclFloat, ncclSum, c->comm,
                          c->st));
        return 0;
    }
    CK(cudaStreamSynchronize(c->st));
    llm_tp_barrier(c->group);                /* every y written */
    CKK(llm_cuda_sum_parts(c->st, c->ysum, (const float *const *) c->peer_y,
                           c->n_ranks, count));
    CK(cudaStreamSynchronize(c->st));
    llm_tp_barrier(c->group);                /* every y read */
    CK(cudaMemcpyAsync(c->y, c->ysum, count * sizeof(float),
                       cudaMemcpyDeviceToDevice, c->st));
    return 0;
}


static int
run_layers(llm_backend *be, int L, int n_tiles)
{
    cu_ctx            *c = (cu_ctx *) be->ctx;
    const llm_config  *cfg = &be->model->cfg;
    meta_view          dv = meta_at(c, c->meta_dev, L);
    int                layer;

    CKK(llm_cuda_embed(c->st, c->x, c->tok_embd, dv.tok, L, c->dim));
    for (layer = 0; layer < c->n_layers; layer++) {
        const cu_layer *w = &c->layers[layer];

        CKK(llm_cuda_add_rmsnorm(c->st, c->xb, c->x, layer > 0 ? c->y : NULL,
                                 w->attn_norm, NULL, L, c->dim,
                                 cfg->norm_eps));
        if (gemm(be, c->qkv, c->xb, L, w->wqkv, c->qkv_dim, c->dim) != 0) {
            return -1;
        }
        CKK(llm_cuda_rope(c->st, c->qkv, c->qkv_dim, w->bqkv, w->q_norm,
                          w->k_norm, dv.pos, c->inv_freq, L, c->n_heads,
                          c->n_kv_heads, c->head_dim, cfg->rope_dim,
                          cfg->rope_neox, cfg->norm_eps));
        CKK(llm_cuda_kv_write(c->st, c->pool, c->qkv, c->qkv_dim, c->q_dim,
                              dv.seq, dv.pos, dv.tables, c->table_stride, L,
                              layer, c->n_layers, c->bs, c->kv_dim));
        CKK(llm_cuda_attention(c->st, c->att, c->qkv, c->qkv_dim, c->pool,
                               dv.tiles, n_tiles, dv.pos, dv.tables,
                               c->table_stride, layer, c->n_layers, c->bs,
                               c->n_heads, c->n_kv_heads, c->head_dim));
        if (gemm(be, c->y, c->att, L, w->wo, c->dim, c->q_dim) != 0
            || allreduce(be, L) != 0)
        {
            return -1;
        }
        CKK(llm_cuda_add_rmsnorm(c->st, c->xb, c->x, c->y, w->ffn_norm,
                                 NULL, L, c->dim, cfg->norm_eps));
        if (gemm(be, c->gu, c->xb, L, w->wgu, 2 * c->hidden, c->dim) != 0) {
            return -1;
        }
        CKK(llm_cuda_silu_mul(c->st, c->hb, c->gu, L, c->hidden));
        if (gemm(be, c->y, c->hb, L, w->wdown, c->dim, c->hidden) != 0
            || allreduce(be, L) != 0)
        {
            return -1;
        }
    }
    /* the last residual add (the normed rows are not used) */
    CKK(llm_cuda_add_rmsnorm(c->st, c->xb, c->x, c->y, c->out_norm, NULL, L,
                             c->dim, cfg->norm_eps));
    return 0;
}


/* logits (and, with ids, their argmax) of rows lidx[off .. off+n-1] */
static int
run_logits(llm_backend *be, const int32_t *lidx_dev, int n, int argmax)
{
    cu_ctx  *c = (cu_ctx *) be->ctx;

    CKK(llm_cuda_add_rmsnorm(c->st, c->xl, c->x, NULL, c->out_norm, lidx_dev,
                             n, c->dim, be->model->cfg.norm_eps));
    if (gemm(be, c->logits, c->xl, n, c->output, c->vocab, c->dim) != 0) {
        return -1;
    }
    if (argmax) {
        CKK(llm_cuda_argmax(c->st, c->ids, c->logits, n, c->vocab));
    }
    return 0;
}


static int
bucket_of(int n)
{
    int i;

    for (i = 0; i < N_BUCKETS; i++) {
        if (graph_buckets[i] >= n) {
            return i;
        }
    }
    return -1;
}


/* a decode batch: one token per sequence, every token's logits, in
 * order: the shape the graphs were captured for */
static int
is_decode(const llm_batch *b)
{
    int i, j;

    if (b->n_logits != b->n_tokens || b->n_tokens > LOGIT_ROWS) {
        return 0;
    }
    for (i = 0; i < b->n_tokens; i++) {
        if (b->logit_idx[i] != i) {
            return 0;
        }
        for (j = 0; j < i; j++) {
            if (b->seq[j] == b->seq[i]) {
                return 0;
            }
        }
    }
    return 1;
}


static int
graph_get(llm_backend *be, int k, cudaGraphExec_t *out)
{
    cu_ctx           *c = (cu_ctx *) be->ctx;
    int               L = graph_buckets[k], rc;
    meta_view         dv = meta_at(c, c->meta_dev, L);
    cudaGraph_t       g = NULL;

    if (c->graph[k] != NULL) {
        *out = c->graph[k];
        return 0;
    }
    CK(cudaStreamBeginCapture(c->st, cudaStreamCaptureModeThreadLocal));
    rc = run_layers(be, L, L);
    if (rc == 0 && c->rank == 0) {
        rc = run_logits(be, dv.lidx, L, 1);
    }
    if (rc != 0) {
        cudaStreamEndCapture(c->st, &g);
        if (g != NULL) {
            cudaGraphDestroy(g);
        }
        return -1;
    }
    CK(cudaStreamEndCapture(c->st, &g));
    rc = (int) cudaGraphInstantiate(&c->graph[k], g, 0);
    cudaGraphDestroy(g);
    CK((cudaError_t) rc);
    *out = c->graph[k];
    return 0;
}


/* ---------------------------------------------------------------------------
 * sampling on the device with the engine's samplers
 */

extern "C" int
llm_cuda_sampler_edits_needed(const llm_sampler *s)
{
    return s->n_bias + (int) s->counts_used;
}


static int
bias_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *) a, y = ((const llm_logit_bias *) b)->token;

    return (x > y) - (x < y);
}


extern "C" int
llm_cuda_sampler_export(const llm_sampler *s, llm_cuda_sample_params *p,
    llm_cuda_token_edit *e, int max_edits)
{
    const llm_sampling_params  *q = &s->params;
    const llm_logit_bias       *hit;
    int                         n = 0;
    uint32_t                    i;

    memset(p, 0, sizeof(*p));
    p->temperature = q->temperature;
    /* what truncate() computes once per call, with the same libm */
    p->inv_t = q->temperature >= LLM_SAMPLER_GREEDY_EPS
               ? 1.0f / q->temperature : 0.0f;
    p->lo = q->min_p > 0.0f ? logf(q->min_p) : -INFINITY;
    p->top_p = q->top_p;
    p->min_p = q->min_p;
    p->top_k = q->top_k;
    p->presence_penalty = q->presence_penalty;
    p->frequency_penalty = q->frequency_penalty;
    p->repetition_penalty = q->repetition_penalty;
    if (llm_cuda_sampler_edits_needed(s) > max_edits) {
        return -1;
    }
    /* the bias list first, in its (token) order, so a seen token finds
     * its bias entry by binary search */
    for (n = 0; n < s->n_bias; n++) {
        memset(&e[n], 0, sizeof(e[n]));
        e[n].token = s->bias[n].token;
        e[n].has_bias = 1;
        e[n].bias = s->bias[n].bias;
    }
    for (i = 0; i < s->counts_cap; i++) {
        const llm_token_count  *c = &s->counts[i];
        llm_cuda_token_edit    *t;

        if (c->token < 0) {
            continue;
        }
        hit = (const llm_logit_bias *) bsearch(&c->token, s->bias, s->n_bias,
                                               sizeof(*s->bias), bias_cmp);
        if (hit != NULL) {
            t = &e[hit - s->bias];
        } else {
            t = &e[n++];
            memset(t, 0, sizeof(*t));
            t->token = c->token;
        }
        t->seen = 1;
        t->n_output = c->n_output;
    }
    p->n_edits = n;
    return n;
}


static int
sample_reserve(llm_backend *be, size_t n_edits)
{
    cu_ctx  *c = (cu_ctx *) be->ctx;
    size_t   cap = c->samp_edits_cap;

    if (n_edits <= cap && c->samp_edits != NULL) {
        return 0;
    }
    cap = cap * 2 > n_edits ? cap * 2 : n_edits + 1024;
    cudaFree(c->samp_edits);
    cudaFreeHost(c->samp_edits_host);
    c->samp_edits = NULL;
    c->samp_edits_host = NULL;
    c->samp_edits_cap = 0;
    CK(cudaMalloc((void **) &c->samp_edits, cap * sizeof(llm_cuda_token_edit)));
    CK(cudaMallocHost((void **) &c->samp_edits_host,
                      cap * sizeof(llm_cuda_token_edit)));
    c->samp_edits_cap = cap;
    return 0;
}


static int
check_samplers(llm_backend *be, llm_sampler *const *sm, int n)
{
    cu_ctx  *c = (cu_ctx *) be->ctx;
    int      i;

    for (i = 0; i < n; i++) {
        if (sm[i] == NULL || sm[i]->n_vocab != c->vocab) {
            return be_fail(be, "logit row %d: a sampler for a vocabulary of "
                           "%d is needed", i, c->vocab);
        }
        if (sm[i]->params.logprobs) {
            return be_fail(be, "logit row %d wants logprobs: those are "
                           "computed on the CPU (llm_backend_forward, then "
                           "llm_sample)", i);
        }
    }
    return 0;
}


/* rows 0..n-1 of c->logits drawn with sm[0..n-1] on the device; each
 * sampler's RNG and counts then stand as llm_sample would leave them */
static int
sample_rows(llm_backend *be, llm_sampler *const *sm, int n, int32_t *ids)
{
    cu_ctx  *c = (cu_ctx *) be->ctx;
    int      off, k, i, got;
    size_t   n_e, e;

    for (off = 0; off < n; off += SAMPLE_ROWS) {
        k = n - off < SAMPLE_ROWS ? n - off : SAMPLE_ROWS;
        n_e = 0;
        for (i = 0; i < k; i++) {
            n_e += llm_cuda_sampler_edits_needed(sm[off + i]);
        }
        if (sample_reserve(be, n_e) != 0) {
            return -1;
        }
        e = 0;
        for (i = 0; i < k; i++) {
            got = llm_cuda_sampler_export(sm[off + i], &c->samp_p_host[i],
                                          c->samp_edits_host + e,
                                          (int) (c->samp_edits_cap - e));
            if (got < 0) {
                return be_fail(be, "logit row %d: sampler edits do not fit",
                               off + i);
            }
            c->samp_p_host[i].edit_off = (int64_t) e;
            e += got;
            memcpy(c->samp_rng_host + 4 * i, sm[off + i]->rng,
                   4 * sizeof(uint64_t));
        }
        CK(cudaMemcpyAsync(c->samp_p, c->samp_p_host,
                           k * sizeof(llm_cuda_sample_params),
                           cudaMemcpyHostToDevice, c->st));
        CK(cudaMemcpyAsync(c->samp_rng, c->samp_rng_host,
                           4 * k * sizeof(uint64_t), cudaMemcpyHostToDevice,
                           c->st));
        if (e > 0) {
            CK(cudaMemcpyAsync(c->samp_edits, c->samp_edits_host,
                               e * sizeof(llm_cuda_token_edit),
                               cudaMemcpyHostToDevice, c->st));
        }
        CKK(llm_cuda_sample(c->st, c->ids, c->logits + (size_t) off * c->vocab,
                            k, c->vocab, c->samp_p, c->samp_edits,
                            c->samp_rng, c->samp_scratch));
        CK(cudaMemcpyAsync(c->samp_ids_host, c->ids, k * sizeof(int32_t),
                           cudaMemcpyDeviceToHost, c->st));
        CK(cudaMemcpyAsync(c->samp_rng_host, c->samp_rng,
                           4 * k * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                           c->st));
        CK(cudaStreamSynchronize(c->st));
        for (i = 0; i < k; i++) {
            llm_sampler *s = sm[off + i];

            if (c->samp_ids_host[i] < 0) {
                return be_fail(be, "logit row %d: no finite logit to sample "
                               "from", off + i);
            }
            memcpy(s->rng, c->samp_rng_host + 4 * i, 4 * sizeof(uint64_t));
            if (llm_sampler_accept(s, c->samp_ids_host[i]) != 0) {
                return be_fail(be, "logit row %d: %s", off + i, s->err);
            }
            ids[off + i] = c->samp_ids_host[i];
        }
    }
    return 0;
}


/* what a step returns to the host */
typedef enum { OUT_LOGITS, OUT_GREEDY, OUT_SAMPLE } out_kind;

/* tensor parallel backends (below) */
static int is_tp(const llm_backend *be);
static int tp_run(llm_backend *be, const llm_batch *b, out_kind kind,
    int32_t *ids, llm_sampler *const *sm);


/* logit rows [off, off + n) computed into c->logits: to the host as the
 * caller asked */
static int
deliver(llm_backend *be, const llm_batch *b, int off, int n, out_kind kind,
    int32_t *ids, llm_sampler *const *sm)
{
    cu_ctx  *c = (cu_ctx *) be->ctx;

    if (kind == OUT_SAMPLE) {
        return sample_rows(be, sm + off, n, ids + off);
    }
    if (kind == OUT_GREEDY) {
        CK(cudaMemcpyAsync(ids + off, c->ids, n * sizeof(int32_t),
                           cudaMemcpyDeviceToHost, c->st));
    } else {
        CK(cudaMemcpyAsync(b->logits + (size_t) off * c->vocab, c->logits,
                           (size_t) n * c->vocab * sizeof(float),
                           cudaMemcpyDeviceToHost, c->st));
    }
    /* the next chunk reuses the buffers: wait for this copy */
    CK(cudaStreamSynchronize(c->st));
    return 0;
}


static int
cuda_run(llm_backend *be, const llm_batch *b, out_kind kind, int32_t *ids,
    llm_sampler *const *sm)
{
    cu_ctx           *c = (cu_ctx *) be->ctx;
    meta_view         hv, dv;
    cudaGraphExec_t   g = NULL;
    int               k = -1, L, n_tiles, off, n, i, n_cs = 0;

    if (check_batch(be, b) != 0) {
        return -1;
    }
    if (b->n_hidden > 0) {
        /* embeddings run on the CPU backend only (issue 32) */
        return be_fail(be, "cuda backend: hidden states (embeddings) are "
                       "not supported");
    }
    if (kind == OUT_LOGITS && b->n_logits > 0 && b->logits == NULL) {
        return be_fail(be, "batch asks for %d logit rows and gives no "
                       "buffer", b->n_logits);
    }
    if (kind == OUT_SAMPLE && check_samplers(be, sm, b->n_logits) != 0) {
        return -1;
    }
    if (b->n_seqs > c->seq_map_len) {
        free(c->seq_map);
        c->seq_map = (int32_t *) malloc(b->n_seqs * sizeof(int32_t));
        if (c->seq_map == NULL) {
            c->seq_map_len = 0;
            return be_fail(be, "out of memory for %d sequences", b->n_seqs);
        }
        c->seq_map_len = b->n_seqs;
    }
    if (c->graphs_on && is_decode(b)) {
        k = bucket_of(b->n_tokens);
    }
    L = k >= 0 ? graph_buckets[k] : b->n_tokens;
    if (L > c->max_tokens) {
        k = -1;
        L = b->n_tokens;
    }
    n_tiles = stage_batch(c, b, L, &hv);
    for (i = 0; i < b->n_seqs; i++) {
        n_cs += c->seq_map[i] >= 0;
    }
    if (upload_batch(be, L, n_cs) != 0) {
        return -1;
    }
    dv = meta_at(c, c->meta_dev, L);

    if (k >= 0) {
        if (graph_get(be, k, &g) != 0) {
            return -1;
        }
        CK(cudaGraphLaunch(g, c->st));
        if (c->rank > 0) {
            CK(cudaStreamSynchronize(c->st));
            return 0;
        }
        return deliver(be, b, 0, b->n_logits, kind, ids, sm);
    }

    if (run_layers(be, L, n_tiles) != 0) {
        return -1;
    }
    if (c->rank > 0) {                      /* logits are rank 0's */
        CK(cudaStreamSynchronize(c->st));
        return 0;
    }
    for (off = 0; off < b->n_logits; off += LOGIT_ROWS) {
        n = b->n_logits - off < LOGIT_ROWS ? b->n_logits - off : LOGIT_ROWS;
        if (run_logits(be, dv.lidx + off, n, kind == OUT_GREEDY) != 0
            || deliver(be, b, off, n, kind, ids, sm) != 0)
        {
            return -1;
        }
    }
    CK(cudaStreamSynchronize(c->st));
    return 0;
}


static int
cuda_forward(llm_backend *be, const llm_batch *b)
{
    return cuda_run(be, b, OUT_LOGITS, NULL, NULL);
}


extern "C" int
llm_backend_cuda_forward_greedy(llm_backend *be, const llm_batch *b,
    int32_t *ids)
{
    if (strcmp(be->iface.name, "cuda") != 0) {
        return be_fail(be, "forward_greedy needs the cuda backend, not %s",
                       be->iface.name);
    }
    if (is_tp(be)) {
        return tp_run(be, b, OUT_GREEDY, ids, NULL);
    }
    return cuda_run(be, b, OUT_GREEDY, ids, NULL);
}


extern "C" int
llm_backend_cuda_forward_sample(llm_backend *be, const llm_batch *b,
    llm_sampler *const *samplers, int32_t *ids)
{
    if (strcmp(be->iface.name, "cuda") != 0) {
        return be_fail(be, "forward_sample needs the cuda backend, not %s",
                       be->iface.name);
    }
    if (is_tp(be)) {
        return tp_run(be, b, OUT_SAMPLE, ids, samplers);
    }
    return cuda_run(be, b, OUT_SAMPLE, ids, samplers);
}


static int
cuda_copy_block(llm_backend *be, int32_t dst, int32_t src)
{
    cu_ctx  *c = (cu_ctx *) be->ctx;
    size_t   bytes = (size_t) c->n_layers * 2 * c->bs * c->kv_dim
                     * sizeof(llm_bf16);

    if (dst < 0 || src < 0 || dst >= c->n_blocks || src >= c->n_blocks) {
        return be_fail(be, "copy of KV block %d to %d: ids outside the pool "
                       "of %d", src, dst, c->n_blocks);
    }
    CK(cudaMemcpyAsync((char *) c->pool + (size_t) dst * bytes,
                       (char *) c->pool + (size_t) src * bytes, bytes,
                       cudaMemcpyDeviceToDevice, c->st));
    CK(cudaStreamSynchronize(c->st));
    return 0;
}


/* ---------------------------------------------------------------------------
 * create / free
 */

static void
cuda_free(llm_backend *be)
{
    cu_ctx  *c;
    int      i;

    if (be == NULL) {
        return;
    }
    c = (cu_ctx *) be->ctx;
    if (c != NULL) {
        cudaSetDevice(c->device);
        if (c->st != NULL) {
            cudaStreamSynchronize(c->st);
        }
        for (i = 0; i < N_BUCKETS; i++) {
            if (c->graph[i] != NULL) {
                cudaGraphExecDestroy(c->graph[i]);
            }
        }
        for (i = 0; i < c->n_plans; i++) {
            plan_free(&c->plans[i]);
        }
        if (c->layers != NULL) {
            for (i = 0; i < c->n_layers; i++) {
                cu_layer *w = &c->layers[i];

                cudaFree(w->wqkv);
                cudaFree(w->wo);
                cudaFree(w->wgu);
                cudaFree(w->wdown);
                cudaFree(w->attn_norm);
                cudaFree(w->ffn_norm);
                cudaFree(w->bqkv);
                cudaFree(w->q_norm);
                cudaFree(w->k_norm);
            }
            free(c->layers);
        }
        if (c->output != c->tok_embd) {
            cudaFree(c->output);
        }
        cudaFree(c->tok_embd);
        cudaFree(c->out_norm);
        cudaFree(c->inv_freq);
        cudaFree(c->pool);
        cudaFree(c->x);
        cudaFree(c->y);
        cudaFree(c->xb);
        cudaFree(c->qkv);
        cudaFree(c->att);
        cudaFree(c->gu);
        cudaFree(c->hb);
        cudaFree(c->xl);
        cudaFree(c->logits);
        cudaFree(c->ids);
        cudaFree(c->peer_y);
        cudaFree(c->ysum);
        if (c->comm != NULL) {
            ncclCommDestroy(c->comm);
        }
        cudaFree(c->samp_scratch);
        cudaFree(c->samp_p);
        cudaFree(c->samp_rng);
        cudaFree(c->samp_edits);
        cudaFreeHost(c->samp_p_host);
        cudaFreeHost(c->samp_rng_host);
        cudaFreeHost(c->samp_edits_host);
        cudaFreeHost(c->samp_ids_host);
        cudaFree(c->meta_dev);
        cudaFree(c->workspace);
        cudaFreeHost(c->meta_host);
        free(c->seq_map);
        if (c->lt != NULL) {
            cublasLtDestroy(c->lt);
        }
        if (c->st != NULL) {
            cudaStreamDestroy(c->st);
        }
        free(c);
    }
    free(be);
}


/* device allocation counted into *total */
#define DALLOC(ptr, bytes, total) do {                                       \
        size_t b_ = (bytes);                                                 \
        CK(cudaMalloc((void **) &(ptr), b_));                                \
        *(total) += b_;                                                      \
    } while (0)


/* the dims every step uses, and the first checks */
static int
ctx_dims(llm_backend *be, const llm_config *cfg, int tp)
{
    cu_ctx  *c = (cu_ctx *) be->ctx;

    if (cfg->gpt_oss) {
        return be_fail(be, "cuda backend: gpt-oss (attention sinks, "
                       "MXFP4 experts with biases) is not written yet; it "
                       "runs on the CPU backend");
    }
    if (cfg->n_expert > 0) {
        return be_fail(be, "cuda backend: mixture-of-experts models (%s) "
                       "run on the CPU backend only", cfg->arch);
    }
    if (tp < 1 || cfg->n_heads % tp != 0 || cfg->n_kv_heads % tp != 0
        || cfg->hidden_dim % tp != 0)
    {
        return be_fail(be, "cuda backend: tensor parallel size %d does not "
                       "divide the heads (%d, kv %d) and hidden size %d", tp,
                       cfg->n_heads, cfg->n_kv_heads, cfg->hidden_dim);
    }
    if (cfg->head_dim > LLM_CUDA_MAX_HEAD_DIM || cfg->n_kv_heads <= 0
        || cfg->n_heads % cfg->n_kv_heads != 0
        || cfg->n_heads / cfg->n_kv_heads > LLM_CUDA_ATTN_MAX_ROWS
        || cfg->rope_dim > cfg->head_dim || cfg->rope_dim % 2 != 0)
    {
        return be_fail(be, "cuda backend: head_dim %d, %d heads, %d KV "
                       "heads, rope_dim %d not supported (head_dim <= %d, "
                       "group <= %d)", cfg->head_dim, cfg->n_heads,
                       cfg->n_kv_heads, cfg->rope_dim,
                       LLM_CUDA_MAX_HEAD_DIM, LLM_CUDA_ATTN_MAX_ROWS);
    }
    if (cfg->gemma) {
        return be_fail(be, "cuda backend: gemma3 (GeGLU, post norms, "
                       "local/global layers) is not written yet");
    }
    if (cfg->sliding_window > 0 && cfg->sliding_window < cfg->max_seq_len) {
        return be_fail(be, "cuda backend: sliding-window attention (%d of "
                       "%d positions) is not written yet",
                       cfg->sliding_window, cfg->max_seq_len);
    }
    c->dim = cfg->dim;
    c->n_layers = cfg->n_layers;
    /* this rank's share (all of it at tp 1): its heads, its features */
    c->n_heads = cfg->n_heads / tp;
    c->n_kv_heads = cfg->n_kv_heads / tp;
    c->head_dim = cfg->head_dim;
    c->q_dim = c->n_heads * cfg->head_dim;
    c->kv_dim = c->n_kv_heads * cfg->head_dim;
    c->qkv_dim = c->q_dim + 2 * c->kv_dim;
    c->hidden = cfg->hidden_dim / tp;
    c->vocab = cfg->vocab_size;
    c->bs = be->opt.kv_block_size;
    c->max_tokens = be->opt.max_batch_tokens;
    c->table_stride = (cfg->max_seq_len + c->bs - 1) / c->bs;
    c->graphs_on = 1;
    if (c->bs < 1 || c->max_tokens < 1) {
        return be_fail(be, "cuda backend: invalid options (block size %d, "
                       "max_batch_tokens %d)", c->bs, c->max_tokens);
    }
    return 0;
}


static int
ctx_runtime(llm_backend *be)
{
    cu_ctx  *c = (cu_ctx *) be->ctx;
    int      n = 0;

    CK(cudaGetDeviceCount(&n));
    if (n <= c->device) {
        return be_fail(be, "cuda backend: no CUDA device %d (%d present)",
                       c->device, n);
    }
    CK(cudaSetDevice(c->device));
    CK(cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking));
    CKLT(cublasLtCreate(&c->lt));
    CK(cudaMalloc(&c->workspace, WORKSPACE_BYTES));
    return 0;
}


/* weight matrices, norms: allocation only (filled by the callers) */
static int
alloc_weights(llm_backend *be, const llm_config *cfg, int tied, int bias,
    int qk_norm, size_t *total)
{
    cu_ctx  *c = (cu_ctx *) be->ctx;
    size_t   e = sizeof(llm_bf16), f = sizeof(float);
    int      i;

    c->layers = (cu_layer *) calloc(c->n_layers, sizeof(cu_layer));
    if (c->layers == NULL) {
        return be_fail(be, "cuda backend: out of memory");
    }
    DALLOC(c->tok_embd, (size_t) c->vocab * c->dim * e, total);
    if (tied) {
        c->output = c->tok_embd;
    } else if (c->rank > 0) {
        c->output = NULL;          /* lm_head: replicated, used by rank 0 */
    } else {
        DALLOC(c->output, (size_t) c->vocab * c->dim * e, total);
    }
    DALLOC(c->out_norm, c->dim * f, total);
    DALLOC(c->inv_freq, (cfg->rope_dim / 2 + 1) * f, total);
    for (i = 0; i < c->n_layers; i++) {
        cu_layer *w = &c->layers[i];

        DALLOC(w->wqkv, (size_t) c->qkv_dim * c->dim * e, total);
        DALLOC(w->wo, (size_t) c->dim * c->q_dim * e, total);
        DALLOC(w->wgu, (size_t) 2 * c->hidden * c->dim * e, total);
        DALLOC(w->wdown, (size_t) c->dim * c->hidden * e, total);
        DALLOC(w->attn_norm, c->dim * f, total);
        DALLOC(w->ffn_norm, c->dim * f, total);
        if (bias) {
            DALLOC(w->bqkv, c->qkv_dim * f, total);
        }
        if (qk_norm) {
            DALLOC(w->q_norm, c->head_dim * f, total);
            DALLOC(w->k_norm, c->head_dim * f, total);
        }
    }
    c->weight_bytes = (uint64_t) c->n_layers
                      * ((uint64_t) c->qkv_dim * c->dim
                         + (uint64_t) c->dim * c->q_dim
                         + 3ull * c->hidden * c->dim) * e
                      + (c->rank == 0 ? (uint64_t) c->vocab * c->dim * e
                                      : 0)                   /* lm_head */
                      + (uint64_t) c->dim * e;               /* one row */
    return 0;
}


/* activations, metadata, then the KV pool from what is left; prints the
 * plan */
static int
alloc_runtime(llm_backend *be, size_t weights)
{
    cu_ctx          *c = (cu_ctx *) be->ctx;
    const char      *env = getenv("LLM_KV_CACHE_RATIO");
    double           ratio = env != NULL ? atof(env) : 0.90;
    size_t           act = 0, n = c->max_tokens, e = sizeof(llm_bf16);
    size_t           f = sizeof(float), free_b = 0, total_b = 0, blk_b;
    size_t           meta_ints;
    cudaDeviceProp   prop;
    int              dev = 0, asked = be->opt.kv_n_blocks > 0;

    DALLOC(c->x, n * c->dim * f, &act);
    DALLOC(c->y, n * c->dim * f, &act);
    DALLOC(c->xb, n * c->dim * e, &act);
    DALLOC(c->qkv, n * c->qkv_dim * f, &act);
    DALLOC(c->att, n * c->q_dim * e, &act);
    DALLOC(c->gu, n * 2 * c->hidden * f, &act);
    DALLOC(c->hb, n * c->hidden * e, &act);
    if (c->n_ranks > 1 && c->comm == NULL) {
        DALLOC(c->ysum, n * c->dim * f, &act);
    }
    if (c->rank == 0) {                      /* logits and sampling */
        DALLOC(c->xl, (size_t) LOGIT_ROWS * c->dim * e, &act);
        DALLOC(c->logits, (size_t) LOGIT_ROWS * c->vocab * f, &act);
        DALLOC(c->ids, LOGIT_ROWS * sizeof(int32_t), &act);
        DALLOC(c->samp_scratch,
               llm_cuda_sample_scratch_bytes(SAMPLE_ROWS, c->vocab), &act);
        DALLOC(c->samp_p, SAMPLE_ROWS * sizeof(llm_cuda_sample_params),
               &act);
        DALLOC(c->samp_rng, SAMPLE_ROWS * 4 * sizeof(uint64_t), &act);
        CK(cudaMallocHost((void **) &c->samp_p_host,
                          SAMPLE_ROWS * sizeof(llm_cuda_sample_params)));
        CK(cudaMallocHost((void **) &c->samp_rng_host,
                          SAMPLE_ROWS * 4 * sizeof(uint64_t)));
        CK(cudaMallocHost((void **) &c->samp_ids_host,
                          SAMPLE_ROWS * sizeof(int32_t)));
    }
    /* the largest layout: max_tokens rows or the largest graph bucket */
    if (n < (size_t) graph_buckets[N_BUCKETS - 1]) {
        n = graph_buckets[N_BUCKETS - 1];
    }
    meta_ints = 8 * n + (n + 1) * c->table_stride;
    DALLOC(c->meta_dev, meta_ints * sizeof(int32_t), &act);
    CK(cudaMallocHost((void **) &c->meta_host, meta_ints * sizeof(int32_t)));
    act += WORKSPACE_BYTES;

    blk_b = (size_t) c->n_layers * 2 * c->bs * c->kv_dim * e;
    CK(cudaMemGetInfo(&free_b, &total_b));
    if (be->opt.kv_n_blocks <= 0) {
        if (ratio <= 0.0 || ratio > 0.99) {
            return be_fail(be, "cuda backend: LLM_KV_CACHE_RATIO %s outside "
                           "(0, 0.99]", env);
        }
        /* ranks sharing a device share its budget */
        be->opt.kv_n_blocks = (int) ((double) free_b * ratio
                                     / (c->kv_divisor > 1 ? c->kv_divisor
                                                          : 1)
                                     / blk_b) - 1;
    }
    c->n_blocks = be->opt.kv_n_blocks;
    if (c->n_blocks < 1 || (size_t) (c->n_blocks + 1) * blk_b > free_b) {
        return be_fail(be, "cuda backend: %d KV blocks of %zu bytes do not "
                       "fit in %zu free bytes", c->n_blocks, blk_b, free_b);
    }
    CK(cudaMalloc((void **) &c->pool, (size_t) (c->n_blocks + 1) * blk_b));

    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    if (c->n_ranks > 1) {
        fprintf(stderr, "cuda backend: tensor parallel rank %d of %d on "
                "device %d (%d heads, %d KV heads, %d hidden; %s)\n",
                c->rank, c->n_ranks, c->device, c->n_heads, c->n_kv_heads,
                c->hidden, c->comm != NULL ? "NCCL all-reduce"
                                           : "ranks share the device");
    }
    fprintf(stderr,
        "cuda backend: %s (sm_%d%d, %d SMs, %.1f GiB)\n"
        "cuda backend: weights %.3f GiB bf16; activations %.3f GiB for %d "
        "tokens\n"
        "cuda backend: KV %zu bytes/token bf16; %d blocks of %d = %lld "
        "tokens (%.1f sequences of %d), %.3f GiB of %.3f GiB free%s\n",
        prop.name, prop.major, prop.minor, prop.multiProcessorCount,
        total_b / 1073741824.0, weights / 1073741824.0, act / 1073741824.0,
        c->max_tokens, blk_b / c->bs, c->n_blocks, c->bs,
        (long long) c->n_blocks * c->bs,
        (double) c->n_blocks * c->bs / be->model->cfg.max_seq_len,
        be->model->cfg.max_seq_len,
        (double) (c->n_blocks + 1) * blk_b / 1073741824.0,
        free_b / 1073741824.0,
        asked ? " (blocks as asked)" : "");
    return 0;
}


/* the rotary frequencies: the model's (llama3 scaling included) when it
 * comes from a file, else as transformers computes them (float pow) */
static int
set_inv_freq(llm_backend *be, const llm_config *cfg, const llm_model *m)
{
    cu_ctx  *c = (cu_ctx *) be->ctx;
    float    h[LLM_CUDA_MAX_HEAD_DIM / 2 + 1];
    int      i;

    for (i = 0; i < cfg->rope_dim / 2; i++) {
        h[i] = 1.0f / powf(cfg->rope_theta,
                           (float) (2 * i) / (float) cfg->rope_dim);
    }
    h[i] = 0.0f;
    if (m != NULL) {
        llm_model_rope_inv_freq(m, h);
    }
    CK(cudaMemcpy(c->inv_freq, h, (cfg->rope_dim / 2 + 1) * sizeof(float),
                  cudaMemcpyHostToDevice));
    return 0;
}


static void cuda_usage(llm_backend *be, llm_backend_usage *u);


static llm_backend *
backend_new(const llm_model *m, const llm_backend_options *o, char *err,
    size_t err_len)
{
    llm_backend  *be = (llm_backend *) calloc(1, sizeof(*be));
    cu_ctx       *c = (cu_ctx *) calloc(1, sizeof(*c));

    if (be == NULL || c == NULL) {
        free(be);
        free(c);
        snprintf(err, err_len, "cuda backend: out of memory");
        return NULL;
    }
    be->iface.name = "cuda";
    be->iface.forward = cuda_forward;
    be->iface.forward_sample = llm_backend_cuda_forward_sample;
    be->iface.copy_block = cuda_copy_block;
    be->iface.free = cuda_free;
    be->iface.usage = cuda_usage;
    be->model = m;
    be->opt = *o;
    be->ctx = c;
    c->n_ranks = 1;
    return be;
}


static llm_backend *
backend_fail(llm_backend *be, char *err, size_t err_len)
{
    snprintf(err, err_len, "%s", be->err);
    cuda_free(be);
    return NULL;
}


/* ---------------------------------------------------------------------------
 * weights from a GGUF model: raw rows up, dequantized on the device
 */

static int
upload_floats(llm_backend *be, float *dst, const float *src, size_t n)
{
    CK(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyHostToDevice));
    return 0;
}


/* tensor t into dst (t->rows, t->cols) bf16 through the staging buffer */
static int
upload_tensor(llm_backend *be, llm_bf16 *dst, const llm_tensor *t,
    void **stage, size_t *stage_bytes)
{
    int     blk = llm_quant_block(t->type);
    size_t  row_b, bytes;

    if (blk == 0 || t->cols % blk != 0) {
        return be_fail(be, "cuda backend: tensor type %u (%s) with %d "
                       "columns is not supported", t->type,
                       ggml_type_name(t->type), t->cols);
    }
    row_b = (size_t) t->cols / blk * llm_quant_block_bytes(t->type);
    bytes = (size_t) (t->rows - 1) * t->row_stride + row_b;
    if (bytes > *stage_bytes) {
        cudaFree(*stage);
        *stage = NULL;
        *stage_bytes = 0;
        CK(cudaMalloc(stage, bytes));
        *stage_bytes = bytes;
    }
    CK(cudaMemcpy(*stage, t->data, bytes, cudaMemcpyHostToDevice));
    CKK(llm_cuda_dequant_bf16(NULL, dst, *stage, t->type, t->rows, t->cols,
                              t->row_stride));
    CK(cudaDeviceSynchronize());      /* the stage is reused next */
    return 0;
}


static int
load_weights(llm_backend *be, const llm_model *m)
{
    cu_ctx    *c = (cu_ctx *) be->ctx;
    void      *stage = NULL;
    size_t     stage_b = 0;
    int        i, rc = -1;

    if (upload_tensor(be, c->tok_embd, &m->tok_embd, &stage, &stage_b) != 0
        || (c->output != NULL && c->output != c->tok_embd
            && upload_tensor(be, c->output, &m->output, &stage,
                             &stage_b) != 0)
        || upload_floats(be, c->out_norm, m->out_norm, c->dim) != 0)
    {
        goto done;
    }
    for (i = 0; i < c->n_layers; i++) {
        const llm_layer  *l = &m->layers[i];
        cu_layer         *w = &c->layers[i];
        size_t            kv_off = (size_t) c->q_dim * c->dim;
        size_t            hid_off = (size_t) c->hidden * c->dim;

        if (upload_tensor(be, w->wqkv, &l->wq, &stage, &stage_b) != 0
            || upload_tensor(be, w->wqkv + kv_off, &l->wk, &stage,
                             &stage_b) != 0
            || upload_tensor(be, w->wqkv + kv_off
                             + (size_t) c->kv_dim * c->dim, &l->wv, &stage,
                             &stage_b) != 0
            || upload_tensor(be, w->wo, &l->wo, &stage, &stage_b) != 0
            || upload_tensor(be, w->wgu, &l->w_gate, &stage, &stage_b) != 0
            || upload_tensor(be, w->wgu + hid_off, &l->w_up, &stage,
                             &stage_b) != 0
            || upload_tensor(be, w->wdown, &l->w_down, &stage, &stage_b) != 0
            || upload_floats(be, w->attn_norm, l->attn_norm, c->dim) != 0
            || upload_floats(be, w->ffn_norm, l->ffn_norm, c->dim) != 0)
        {
            goto done;
        }
        if (w->bqkv != NULL
            && (upload_floats(be, w->bqkv, l->bq, c->q_dim) != 0
                || upload_floats(be, w->bqkv + c->q_dim, l->bk,
                                 c->kv_dim) != 0
                || upload_floats(be, w->bqkv + c->q_dim + c->kv_dim, l->bv,
                                 c->kv_dim) != 0))
        {
            goto done;
        }
        if (w->q_norm != NULL
            && (upload_floats(be, w->q_norm, l->q_norm, c->head_dim) != 0
                || upload_floats(be, w->k_norm, l->k_norm,
                                 c->head_dim) != 0))
        {
            goto done;
        }
    }
    rc = 0;
done:
    cudaFree(stage);
    return rc;
}


/* one rank's backend: the whole model on device 0 at tp 1 */
static llm_backend *
rank_create(const llm_model *m, const llm_backend_options *o, int device,
    ncclComm_t comm, llm_tp_group *group, int kv_divisor, char *err,
    size_t err_len)
{
    const llm_config  *cfg = &m->cfg;
    llm_backend       *be = backend_new(m, o, err, err_len);
    cu_ctx            *c;
    size_t             weights = 0;
    int                tied;

    if (be == NULL) {
        if (comm != NULL) {
            ncclCommDestroy(comm);
        }
        return NULL;
    }
    c = (cu_ctx *) be->ctx;
    c->device = device;
    c->rank = m->tp_rank;
    c->n_ranks = m->tp_size;
    c->comm = comm;                  /* owned from here on */
    c->group = group;
    c->kv_divisor = kv_divisor;
    tied = m->output.data == m->tok_embd.data;
    if (ctx_dims(be, cfg, m->tp_size) != 0 || ctx_runtime(be) != 0
        || alloc_weights(be, cfg, tied, m->layers[0].bq != NULL,
                         m->layers[0].q_norm != NULL, &weights) != 0
        || load_weights(be, m) != 0 || set_inv_freq(be, cfg, m) != 0
        || alloc_runtime(be, weights) != 0)
    {
        return backend_fail(be, err, err_len);
    }
    if (c->n_ranks > 1 && comm == NULL) {
        c->graphs_on = 0;            /* host barriers cannot be captured */
    }
    return be;
}


/* ---------------------------------------------------------------------------
 * tensor parallelism: one backend driving every rank (docs/cuda.md)
 *
 * Rank r runs on device r in its own thread of an llm_tp_group (engine/
 * tp.h), with its Megatron shard (the loader's rank views: column-split
 * wq|wk|wv and gate|up, row-split wo and down), its KV heads in its own
 * pool of the same block count (so block ids and tables are the
 * scheduler's, unchanged), and an NCCL communicator from ncclCommInitAll.
 * y is all-reduced after wo and after down; the lm_head is replicated and
 * only rank 0 computes logits, argmax and samples.
 */

typedef struct {
    int                   n_ranks;
    int                   shared;      /* every rank on device 0 */
    llm_tp_group         *group;
    llm_model            *models;      /* (n_ranks) 1.. loaded here */
    int                   n_loaded;
    llm_backend         **ranks;       /* (n_ranks) */
    ncclComm_t           *comms;       /* (n_ranks) not yet handed over */
    int                  *rc;          /* (n_ranks) the step's results */
    /* the step being run */
    const llm_batch      *batch;
    out_kind              kind;
    int32_t              *ids;
    llm_sampler *const   *sm;
} cu_tp;


static int tp_forward(llm_backend *be, const llm_batch *b);


static int
is_tp(const llm_backend *be)
{
    return be->iface.forward == tp_forward;
}


/* NVML's view of the devices the ranks run on, each device once (ranks
   may share one): the mean percent busy, the memory summed */
static void
cuda_usage(llm_backend *be, llm_backend_usage *u)
{
    char       pci[32];
    int        r, i, n, dev, seen[64], n_seen = 0, util, sum = 0;
    uint64_t   used, total;
    cu_tp     *t = is_tp(be) ? (cu_tp *) be->ctx : NULL;

    n = t ? t->n_ranks : 1;
    for (r = 0; r < n && n_seen < 64; r++) {
        if (t && t->ranks[r] == NULL) {
            continue;
        }
        dev = ((cu_ctx *) (t ? t->ranks[r]->ctx : be->ctx))->device;
        for (i = 0; i < n_seen && seen[i] != dev; i++) {
            /* already counted */
        }
        if (i < n_seen
            || cudaDeviceGetPCIBusId(pci, sizeof(pci), dev) != cudaSuccess
            || llm_nvml_read(pci, &util, &used, &total) != 0)
        {
            continue;
        }
        seen[n_seen++] = dev;
        sum += util;
        u->device_mem_used += used;
        u->device_mem_total += total;
    }
    if (n_seen > 0) {
        u->device_valid = 1;
        u->device_util = sum / n_seen;
    }
}


static void
tp_task(void *arg, int rank, int n_ranks)
{
    cu_tp        *t = (cu_tp *) arg;
    llm_backend  *r = t->ranks[rank];
    cudaError_t   e = cudaSetDevice(((cu_ctx *) r->ctx)->device);

    (void) n_ranks;
    if (e != cudaSuccess) {
        t->rc[rank] = llm_cuda_check_at((int) e, "cudaSetDevice", __FILE__,
                                        __LINE__, r->err, sizeof(r->err));
        return;
    }
    t->rc[rank] = cuda_run(r, t->batch, t->kind, t->ids, t->sm);
}


static int
tp_run(llm_backend *be, const llm_batch *b, out_kind kind, int32_t *ids,
    llm_sampler *const *sm)
{
    cu_tp        *t = (cu_tp *) be->ctx;
    llm_backend  *r0 = t->ranks[0];
    int           r;

    /* judge the step once, before any rank can wait for the others in a
     * collective */
    if (check_batch(r0, b) != 0
        || (kind == OUT_SAMPLE && check_samplers(r0, sm, b->n_logits) != 0))
    {
        return be_fail(be, "%s", r0->err);
    }
    if (kind == OUT_LOGITS && b->n_logits > 0 && b->logits == NULL) {
        return be_fail(be, "batch asks for %d logit rows and gives no "
                       "buffer", b->n_logits);
    }
    t->batch = b;
    t->kind = kind;
    t->ids = ids;
    t->sm = sm;
    llm_tp_group_run(t->group, tp_task, t);
    for (r = 0; r < t->n_ranks; r++) {
        if (t->rc[r] != 0) {
            return be_fail(be, "rank %d: %s", r, t->ranks[r]->err);
        }
    }
    return 0;
}


static int
tp_forward(llm_backend *be, const llm_batch *b)
{
    return tp_run(be, b, OUT_LOGITS, NULL, NULL);
}


static int
tp_copy_block(llm_backend *be, int32_t dst, int32_t src)
{
    cu_tp  *t = (cu_tp *) be->ctx;
    int     r;

    for (r = 0; r < t->n_ranks; r++) {
        CK(cudaSetDevice(((cu_ctx *) t->ranks[r]->ctx)->device));
        if (cuda_copy_block(t->ranks[r], dst, src) != 0) {
            return be_fail(be, "rank %d: %s", r, t->ranks[r]->err);
        }
    }
    return 0;
}


static void
tp_free(llm_backend *be)
{
    cu_tp  *t = (cu_tp *) be->ctx;
    int     r;

    if (t != NULL) {
        llm_tp_group_free(t->group);
        for (r = 0; t->ranks != NULL && r < t->n_ranks; r++) {
            if (t->ranks[r] != NULL) {
                cuda_free(t->ranks[r]);
            }
        }
        for (r = 0; t->comms != NULL && r < t->n_ranks; r++) {
            if (t->comms[r] != NULL) {
                ncclCommDestroy(t->comms[r]);
            }
        }
        for (r = 1; r < t->n_loaded; r++) {
            llm_model_free(&t->models[r]);
        }
        free(t->models);
        free(t->ranks);
        free(t->comms);
        free(t->rc);
        free(t);
    }
    free(be);
}


static llm_backend *
tp_fail(llm_backend *be, char *err, size_t err_len)
{
    snprintf(err, err_len, "%s", be->err);
    tp_free(be);
    return NULL;
}


/* shared device: every rank's y, for the ordered sum */
static int
tp_link_peers(llm_backend *be)
{
    cu_tp   *t = (cu_tp *) be->ctx;
    float   *ys[LLM_TP_MAX_SLICES];
    int      r;

    for (r = 0; r < t->n_ranks; r++) {
        ys[r] = ((cu_ctx *) t->ranks[r]->ctx)->y;
    }
    for (r = 0; r < t->n_ranks; r++) {
        cu_ctx *c = (cu_ctx *) t->ranks[r]->ctx;

        CK(cudaMalloc((void **) &c->peer_y, t->n_ranks * sizeof(float *)));
        CK(cudaMemcpy(c->peer_y, ys, t->n_ranks * sizeof(float *),
                      cudaMemcpyHostToDevice));
    }
    return 0;
}


static llm_backend *
tp_create(const llm_model *m, const llm_backend_options *o, char *err,
    size_t err_len)
{
    llm_backend          *be;
    cu_tp                *t;
    llm_backend_options   ro = *o;
    const char           *share = getenv("LLM_CUDA_TP_SHARE_DEVICE");
    char                  msg[400];
    int                   n = m->tp_size, n_dev = 0, r, devs[LLM_TP_MAX_SLICES];
    const llm_model      *rm;
    ncclResult_t          nr;

    if (m->tp_rank != 0) {
        snprintf(err, err_len, "cuda backend: a tensor parallel backend is "
                 "made from rank 0's model (got rank %d of %d)", m->tp_rank,
                 n);
        return NULL;
    }
    if (n > LLM_TP_MAX_SLICES) {
        snprintf(err, err_len, "cuda backend: tensor parallel size %d (at "
                 "most %d)", n, LLM_TP_MAX_SLICES);
        return NULL;
    }
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess) {
        n_dev = 0;
    }
    if (n_dev < 1 || (n_dev < n && (share == NULL || *share != '1'))) {
        snprintf(err, err_len, "cuda backend: tensor parallel size %d needs "
                 "%d GPUs, %d present (LLM_CUDA_TP_SHARE_DEVICE=1 runs every "
                 "rank on GPU 0: a test mode)", n, n, n_dev);
        return NULL;
    }
    be = backend_new(m, o, err, err_len);
    t = (cu_tp *) calloc(1, sizeof(*t));
    if (be == NULL || t == NULL) {
        if (be != NULL) {
            cuda_free(be);
        }
        free(t);
        snprintf(err, err_len, "cuda backend: out of memory");
        return NULL;
    }
    free(be->ctx);                   /* a cu_tp instead of a cu_ctx */
    be->iface.forward = tp_forward;
    be->iface.copy_block = tp_copy_block;
    be->iface.free = tp_free;
    be->ctx = t;
    t->n_ranks = n;
    t->shared = n_dev < n;
    t->models = (llm_model *) calloc(n, sizeof(llm_model));
    t->ranks = (llm_backend **) calloc(n, sizeof(llm_backend *));
    t->comms = (ncclComm_t *) calloc(n, sizeof(ncclComm_t));
    t->rc = (int *) calloc(n, sizeof(int));
    if (t->models == NULL || t->ranks == NULL || t->comms == NULL
        || t->rc == NULL)
    {
        be_fail(be, "cuda backend: out of memory for %d ranks", n);
        return tp_fail(be, err, err_len);
    }
    t->group = llm_tp_group_create(n, msg, sizeof(msg));
    if (t->group == NULL) {
        be_fail(be, "cuda backend: %s", msg);
        return tp_fail(be, err, err_len);
    }
    if (!t->shared) {
        for (r = 0; r < n; r++) {
            devs[r] = r;
        }
        nr = ncclCommInitAll(t->comms, n, devs);
        if (nr != ncclSuccess) {
            memset(t->comms, 0, n * sizeof(ncclComm_t));
            be_fail(be, "%s:%d: ncclCommInitAll(%d GPUs): %s", __FILE__,
                    __LINE__, n, ncclGetErrorString(nr));
            return tp_fail(be, err, err_len);
        }
    }
    for (r = 0; r < n; r++) {
        if (r == 0) {
            rm = m;
        } else {
            t->n_loaded = r + 1;
            if (llm_tp_load_rank(&t->models[r], m, r) != 0) {
                be_fail(be, "cuda backend: tensor parallel rank %d: %s", r,
                        t->models[r].err);
                return tp_fail(be, err, err_len);
            }
            rm = &t->models[r];
        }
        t->ranks[r] = rank_create(rm, &ro, t->shared ? 0 : r, t->comms[r],
                                  t->group, t->shared ? n : 1, msg,
                                  sizeof(msg));
        t->comms[r] = NULL;          /* the rank owns it now */
        if (t->ranks[r] == NULL) {
            be_fail(be, "cuda backend: rank %d: %s", r, msg);
            return tp_fail(be, err, err_len);
        }
        /* every pool has rank 0's block count */
        ro.kv_n_blocks = t->ranks[0]->opt.kv_n_blocks;
    }
    if (t->shared && tp_link_peers(be) != 0) {
        return tp_fail(be, err, err_len);
    }
    be->opt = t->ranks[0]->opt;
    return be;
}


extern "C" llm_backend *
llm_backend_cuda_create(const llm_model *m, const llm_backend_options *o,
    char *err, size_t err_len)
{
    if (m->tp_size > 1) {
        return tp_create(m, o, err, err_len);
    }
    return rank_create(m, o, 0, NULL, NULL, 1, err, err_len);
}


/* ---------------------------------------------------------------------------
 * synthetic models for benchmarks
 */

static int
fill(llm_backend *be, llm_bf16 *p, size_t n, uint64_t seed, int fan_in)
{
    CKK(llm_cuda_fill_uniform(NULL, p, n, seed, 1.0f / sqrtf((float) fan_in)));
    return 0;
}


static int
fill_synthetic(llm_backend *be, uint64_t seed)
{
    cu_ctx  *c = (cu_ctx *) be->ctx;
    int      i;

    if (fill(be, c->tok_embd, (size_t) c->vocab * c->dim, seed, 1) != 0
        || (c->output != NULL && c->output != c->tok_embd
            && fill(be, c->output, (size_t) c->vocab * c->dim, seed + 1,
                    c->dim) != 0))
    {
        return -1;
    }
    CKK(llm_cuda_fill_const(NULL, c->out_norm, c->dim, 1.0f));
    for (i = 0; i < c->n_layers; i++) {
        cu_layer  *w = &c->layers[i];
        uint64_t   s = seed + 16 * (uint64_t) (i + 1);

        if (fill(be, w->wqkv, (size_t) c->qkv_dim * c->dim, s, c->dim) != 0
            || fill(be, w->wo, (size_t) c->dim * c->q_dim, s + 1,
                    c->q_dim) != 0
            || fill(be, w->wgu, (size_t) 2 * c->hidden * c->dim, s + 2,
                    c->dim) != 0
            || fill(be, w->wdown, (size_t) c->dim * c->hidden, s + 3,
                    c->hidden) != 0)
        {
            return -1;
        }
        CKK(llm_cuda_fill_const(NULL, w->attn_norm, c->dim, 1.0f));
        CKK(llm_cuda_fill_const(NULL, w->ffn_norm, c->dim, 1.0f));
    }
    CK(cudaDeviceSynchronize());
    return 0;
}


extern "C" llm_backend *
llm_backend_cuda_create_synthetic(const llm_config *cfg,
    const llm_backend_options *o, uint64_t seed, char *err, size_t err_len)
{
    llm_backend  *be;
    cu_ctx       *c;
    size_t        weights = 0;

    be = backend_new(NULL, o, err, err_len);
    if (be == NULL) {
        return NULL;
    }
    c = (cu_ctx *) be->ctx;
    c->synth.cfg = *cfg;
    c->synth.tp_size = 1;
    be->model = &c->synth;
    if (ctx_dims(be, cfg, 1) != 0 || ctx_runtime(be) != 0
        || alloc_weights(be, cfg, cfg->tied_output, 0, 0, &weights) != 0
        || fill_synthetic(be, seed) != 0
        || set_inv_freq(be, cfg, NULL) != 0
        || alloc_runtime(be, weights) != 0)
    {
        return backend_fail(be, err, err_len);
    }
    return be;
}


extern "C" uint64_t
llm_backend_cuda_weight_bytes(const llm_backend *be)
{
    if (is_tp(be)) {                 /* rank 0 reads the most (lm_head) */
        be = ((const cu_tp *) be->ctx)->ranks[0];
    }
    return ((const cu_ctx *) be->ctx)->weight_bytes;
}


extern "C" void
llm_backend_cuda_set_graphs(llm_backend *be, int on)
{
    cu_tp  *t;
    int     r;

    if (!is_tp(be)) {
        ((cu_ctx *) be->ctx)->graphs_on = on;
        return;
    }
    t = (cu_tp *) be->ctx;
    for (r = 0; r < t->n_ranks; r++) {
        cu_ctx *c = (cu_ctx *) t->ranks[r]->ctx;

        /* ranks sharing a device meet at host barriers: never captured */
        c->graphs_on = on && c->comm != NULL;
    }
}
