/*
 * CPU backend: the llama forward pass over a batch of tokens of many
 * sequences (see backend.h for the batch contract and the numerics rule).
 *
 * One step, for n tokens (rows) at once:
 *
 *   x = embed(tokens)                                       (n, dim)
 *   per layer:
 *     xb = rmsnorm(x) * attn_norm
 *     q, k, v = xb @ wq^T, xb @ wk^T, xb @ wv^T  (+ bias: qwen2)
 *     (qk-norm: qwen3), rope(q, k, pos); k, v -> KV cache slots
 *     att = softmax(q k^T / sqrt(hd)) v over positions 0..pos, per head,
 *           K/V read through the sequence's block table (GQA: head h uses
 *           kv head h / (n_heads / n_kv_heads))
 *     x += att @ wo^T (+ bias: gpt-oss)       <- TP all-reduce point
 *     xb = rmsnorm(x) * ffn_norm
 *     x += (silu(xb @ gate^T) * (xb @ up^T)) @ down^T   <- all-reduce point
 *       (mixture of experts, qwen3moe: routed experts instead, moe_cpu.c)
 *   logits = rmsnorm(x[wanted rows]) * out_norm @ output^T
 *
 * gemma3 adds: x = embed * sqrt(dim); a sliding window on 5 of 6 layers,
 * with their own rope base; the attention scale query_pre_attn_scalar^-0.5;
 * x += rmsnorm(att @ wo^T) * attn_post_norm and the same after the FFN
 * (ffn_post_norm), whose activation is GeGLU (tanh GELU, not silu).
 *
 * Matmuls go through the kernels library (quantized SIMD dot products,
 * thread pool); attention is parallel over (token, head) pairs and the
 * per-row work over rows. Each row's arithmetic never depends on which
 * other rows are in the batch, nor on which thread runs it.
 *
 * defines: llm_backend_cpu_create, llm_backend_create,
 *          llm_backend_options_default
 */
#include "alloc.h"
#include "activation.h"
#include "attention.h"
#include "backend/backend.h"
#include "backend/moe_cpu.h"
#include "model/kv.h"
#include "norm.h"
#include "rope.h"
#include "isa.h"
#include "matmul.h"
#include "quant.h"
#include "threadpool.h"
#include "model/tp.h"
#include "backend/encoder.h"
#if NGX_LLM_CUDA
#include "backend/backend_cuda.h"
#endif

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    llm_kv_cache     kv;         /* pages of kv_layout's groups */
    llm_kv_layout    kv_layout;  /* the layer groups (model/kv.h) */
    int             *kv_group;   /* (n_layers) a layer's group */
    int             *kv_slot;    /* (n_layers) its slot in the pages */
    /* the weights the matmuls read: the model's layers and classifier,
       with the tensors the kernels run faster packed (tensor.h,
       llm_pack) swapped for packed copies in `packed`, and the float
       ones for plain copies there (on huge pages: pack_one) */
    llm_layer       *layers;     /* (n_layers) */
    llm_tensor       output;
    /* what token lookups read: the model's embedding, or, when it is
       also the classifier and was copied (a tied lm_head), the copy:
       packed, one row at a time through embd_row (the file's pages were
       let go: reading them would bring the matrix back, twice held) */
    llm_tensor       embd;
    uint8_t         *embd_row;   /* one row as stored in GGUF */
    llm_tensor      *experts;    /* MoE: the model's expert views, which
                                    c->layers point to, packed likewise */
    llm_moe_cpu      moe;        /* MoE: routing and grouping scratch */
    uint8_t         *packed;
    llm_threadpool  *tp;
    int              n_threads;
    int              q_dim;      /* this rank's n_heads/tp * head_dim */
    int              kv_dim;     /* this rank's n_kv_heads/tp * head_dim */
    int              n_heads;    /* this rank's heads */
    int              n_kv_heads;
    int              head_dim;
    int              window;     /* this layer's sliding window (mistral,
                                    gemma3's local layers), 0: none */
    int              hidden;     /* this rank's hidden_dim/tp */
    /* scratch, for max_batch_tokens rows */
    float           *x;          /* (n, dim) residual stream */
    float           *xb;         /* (n, dim) normed input of a block */
    float           *q;          /* (n, q_dim) */
    float           *k;          /* (n, kv_dim) */
    float           *v;          /* (n, kv_dim) */
    float           *att;        /* (n, q_dim) attention output */
    float           *hb;         /* (n, hidden) gate, then silu(gate)*up */
    float           *hb2;        /* (n, hidden) up */
    struct att_item *att_items;  /* (max_batch_tokens * n_heads) this
                                    step's attention work items */
    int              att_n_items;
    int              att_max_items;
    int              att_split;  /* this step's items are spans of one
                                    token's kv head (a short decode batch
                                    over a long context) */
    int              att_spans;  /* spans per token in att_part */
    float           *att_part;   /* (n, att_spans, n_heads,
                                    LLM_ATT_PART(head_dim)) their states:
                                    an item's heads side by side */
    size_t           att_part_size;
    float           *inv_freq;   /* (rope_dim/2) rope frequencies */
    float           *inv_freq_local;  /* (rope_dim/2) of sliding-window
                                    layers (gemma3: own base) */
    /* tensor parallelism (tp.h, docs/tp.md): a row-split matmul (wo,
       down) is n_slices column slices whose partials go to slot[set][s]
       and are added in slice order at any tp; this rank computes slices
       slice_lo .. slice_lo + my_slices - 1. wo uses set 0 and down set
       1, so one barrier per reduction suffices: a rank writes a set
       again only after a barrier every rank reaches after reading it. */
    llm_tp_group    *group;      /* NULL at tp 1 */
    int              rank;
    int              n_slices;
    int              slice_lo;
    int              my_slices;
    float           *slot[2][LLM_TP_MAX_SLICES];  /* (n, dim) each */
    float           *slot_mem;   /* tp 1: the slots, owned (both sets
                                    alias it); tp > 1: NULL, shared */
    float           *xs;         /* exact mode: (n, widest slice) the
                                    contiguous input of one slice */
    uint8_t         *act_buf;    /* fused jobs' prepared activations */
    size_t           act_buf_size;
    /* a matmul of this step had no memory for its activations (alloc.h):
       the step runs on to its end, so every rank reaches the same
       barriers, and then fails; its results are not used */
    int              oom;
} cpu_ctx;


static int
be_fail(llm_backend *be, const char *fmt, ...)
{
    va_list  ap;

    va_start(ap, fmt);
    vsnprintf(be->err, sizeof(be->err), fmt, ap);
    va_end(ap);
    return -1;
}


/* ---------------------------------------------------------------------------
 * row-parallel pieces
 */

/* below this many multiply-adds a job runs on the calling thread: waking
 * the pool costs more than the work (decode's norms, rope, SwiGLU), and on
 * a busy machine every wake-up risks waiting for a descheduled worker.
 * The split never changes a result: each row is computed the same way. */
#define CPU_PARALLEL_MIN  32768

/* work per element in multiply-add units, where an element costs more:
 * SwiGLU's expf and division, RoPE's sincosf (measured at batch 16: run
 * serially they left the second thread idle for ~6% of a decode step) */
#define CPU_COST_SWIGLU   16
#define CPU_COST_ROPE     8
#define CPU_COST_MERGE    2

static void
run_job(cpu_ctx *c, llm_task_fn fn, void *job, size_t work)
{
    if (work < CPU_PARALLEL_MIN) {
        fn(job, 0, 1);
    } else {
        llm_threadpool_run(c->tp, fn, job);
    }
}

typedef struct {
    float        *out;
    const float  *in;
    const float  *w;
    int           n_rows;
    int           dim;
    float         eps;
    const int32_t *rows;     /* NULL: rows 0..n_rows-1, else input rows */
} norm_job;


static void
norm_task(void *arg, int ith, int nth)
{
    norm_job  *j = arg;
    int        i, src;

    for (i = ith; i < j->n_rows; i += nth) {
        src = j->rows ? j->rows[i] : i;
        llm_rmsnorm(j->out + (size_t) i * j->dim,
                    j->in + (size_t) src * j->dim, j->w, j->dim, j->eps);
    }
}


static void
rmsnorm_rows(cpu_ctx *c, float *out, const float *in, const float *w,
    int n_rows, int dim, float eps, const int32_t *rows)
{
    norm_job  j = { out, in, w, n_rows, dim, eps, rows };

    run_job(c, norm_task, &j, (size_t) n_rows * dim);
}


/* a position's rope cos and sin (rope_dim/2 of each), once for all the
 * heads it rotates */
static void
rope_angles(float *cs, float *sn, int pos, const float *inv_freq,
    int rope_dim)
{
    int    i;
    float  angle;

    for (i = 0; i < rope_dim / 2; i++) {
        angle = (float) pos * inv_freq[i];
        cs[i] = cosf(angle);
        sn[i] = sinf(angle);
    }
}


typedef struct {
    llm_backend      *be;
    const llm_batch  *batch;
    int               layer;
} layer_job;


/* one token's V (kv_dim floats) into slot `slot` of a block's V rows
 * (block_size, kv_dim), or its K into column `slot` of the block's K
 * stored transposed (kv_dim, block_size: kernels/attention.h); rounded
 * to f16 (nearest even) or as is */
static void
kv_store(const llm_kv_cache *kv, void *base, int slot, const float *x,
    int transposed)
{
    size_t     at = transposed ? (size_t) slot : (size_t) slot * kv->kv_dim;
    size_t     step = transposed ? (size_t) kv->block_size : 1;
    uint16_t  *h = (uint16_t *) base + at;
    float     *f = (float *) base + at;
    int        e;

    for (e = 0; e < kv->kv_dim; e++) {
        if (kv->dtype == LLM_KV_F32) {
            f[e * step] = x[e];
        } else {
            h[e * step] = llm_fp32_to_fp16(x[e]);
        }
    }
}


/* the page of sequence s's logical block k for layer group g: a table of
 * logical blocks (n_groups 0: block b is pages b*G ..) or the scheduler's
 * row per group (backend.h) */
static int32_t
kv_page(const cpu_ctx *c, const llm_batch *b, int s, int g, int k)
{
    if (b->n_groups == 0) {
        return b->block_table[s][k] * c->kv_layout.n_groups + g;
    }
    return b->block_table[s][(g > 0 ? g * b->table_stride[s] : 0) + k];
}


/* per token: bias, qk-norm, rope, then K/V into the token's cache slot */
static void
qkv_finish_task(void *arg, int ith, int nth)
{
    layer_job          *j = arg;
    cpu_ctx            *c = j->be->ctx;
    const llm_config   *cfg = &j->be->model->cfg;
    const llm_layer    *l = &c->layers[j->layer];
    const llm_batch    *b = j->batch;
    int                 i, h, e, hd = cfg->head_dim, bs = c->kv.block_size;
    float               cs[LLM_ATT_MAX_HD / 2], sn[LLM_ATT_MAX_HD / 2];

    for (i = ith; i < b->n_tokens; i += nth) {
        float    *q = c->q + (size_t) i * c->q_dim;
        float    *k = c->k + (size_t) i * c->kv_dim;
        float    *v = c->v + (size_t) i * c->kv_dim;
        int       p = b->pos[i];
        int32_t   blk = kv_page(c, b, b->seq[i], c->kv_group[j->layer],
                                p / bs);
        int       slot = p % bs;

        rope_angles(cs, sn, p, c->window ? c->inv_freq_local : c->inv_freq,
                    cfg->rope_dim);
        if (l->bq != NULL) {
            for (e = 0; e < c->q_dim; e++) q[e] += l->bq[e];
            for (e = 0; e < c->kv_dim; e++) k[e] += l->bk[e];
            for (e = 0; e < c->kv_dim; e++) v[e] += l->bv[e];
        }
        for (h = 0; h < c->n_heads; h++) {
            if (l->q_norm != NULL) {
                llm_rmsnorm(q + h * hd, q + h * hd, l->q_norm, hd,
                            cfg->norm_eps);
            }
            llm_rope_head(q + h * hd, cs, sn, cfg->rope_dim, cfg->rope_neox);
        }
        for (h = 0; h < c->n_kv_heads; h++) {
            if (l->k_norm != NULL) {
                llm_rmsnorm(k + h * hd, k + h * hd, l->k_norm, hd,
                            cfg->norm_eps);
            }
            llm_rope_head(k + h * hd, cs, sn, cfg->rope_dim, cfg->rope_neox);
        }
        kv_store(&c->kv, llm_kv_k(&c->kv, blk, c->kv_slot[j->layer]), slot,
                 k, 1);
        kv_store(&c->kv, llm_kv_v(&c->kv, blk, c->kv_slot[j->layer]), slot,
                 v, 0);
    }
}


/*
 * Attention work items (kernels/attention.h): the queries of one item
 * share one kv head of one sequence and every K and V load. A prefill
 * run of consecutive tokens gives items of up to LLM_ATT_MAX_Q queries
 * (tokens times the heads of the kv head); a decode token gives one item
 * per kv head, or one per head when there are too few items to keep the
 * threads busy. A query's result does not depend on its item's other
 * queries (the kernels' canonical order), so this grouping is free.
 */
/* the first position a query at pos attends to: the last window
 * positions with a sliding window (mistral), else 0 */
static int
attention_t0(const cpu_ctx *c, int pos)
{
    return c->window > 0 && pos >= c->window ? pos - c->window + 1 : 0;
}


/* split items' state of token t, head h, span k */
static float *
attention_part(const cpu_ctx *c, int t, int h, int k)
{
    return c->att_part + (((size_t) t * c->att_spans + k) * c->n_heads + h)
                         * LLM_ATT_PART(c->head_dim);
}


typedef struct att_item {
    int32_t  first;     /* first token */
    int16_t  n_tok;     /* consecutive tokens of one sequence */
    int16_t  head;      /* first head */
    int16_t  n_head;    /* heads of one kv head */
    int16_t  span;      /* split: the one span (LLM_ATT_SPAN) of the item */
} att_item;


/* a decode batch too small to give every thread two items of a kv head,
 * over a context of two spans or more: one item per (token, kv head,
 * span), whose states attention_merge_task merges (attention.h: the same
 * bits as the whole call). 0 when the batch is not such a batch or
 * att_part cannot grow. */
static int
attention_split(cpu_ctx *c, const llm_batch *b, int head_dim)
{
    int     i, spans = 1, items = 0, g = c->n_heads / c->n_kv_heads, kh, k;
    int     h, hs = g <= LLM_ATT_MAX_Q ? g : LLM_ATT_MAX_Q;   /* heads an item */
    size_t  need;

    if ((size_t) b->n_tokens * c->n_kv_heads >= 2 * (size_t) c->n_threads) {
        return 0;
    }
    for (i = 0; i < b->n_tokens; i++) {
        if (i > 0 && b->seq[i] == b->seq[i - 1]) {
            return 0;                        /* a prefill run */
        }
        spans = b->pos[i] / LLM_ATT_SPAN + 1 > spans
                ? b->pos[i] / LLM_ATT_SPAN + 1 : spans;
    }
    if (spans < 2
        || (size_t) b->n_tokens * c->n_kv_heads * ((g + hs - 1) / hs) * spans
           > (size_t) c->att_max_items)
    {
        return 0;
    }
    need = sizeof(float) * (size_t) b->n_tokens * c->n_heads * spans
           * LLM_ATT_PART(head_dim);
    if (need > c->att_part_size) {
        float *p = realloc(c->att_part, need);
        if (p == NULL) {
            return 0;
        }
        c->att_part = p;
        c->att_part_size = need;
    }
    c->att_spans = spans;
    for (i = 0; i < b->n_tokens; i++) {
        int t0 = attention_t0(c, b->pos[i]);
        for (kh = 0; kh < c->n_kv_heads; kh++) {
            for (h = kh * g; h < (kh + 1) * g; h += hs) {
                int nh = (kh + 1) * g - h < hs ? (kh + 1) * g - h : hs;
                for (k = t0 / LLM_ATT_SPAN; k <= b->pos[i] / LLM_ATT_SPAN;
                     k++)
                {
                    c->att_items[items].first = i;
                    c->att_items[items].n_tok = 1;
                    c->att_items[items].head = (int16_t) h;
                    c->att_items[items].n_head = (int16_t) nh;
                    c->att_items[items].span = (int16_t) k;
                    items++;
                }
            }
        }
    }
    c->att_n_items = items;
    return 1;
}


/* the items of the batch into c->att_items; per kv head, tokens grouped
 * by runs (same sequence, consecutive positions) */
static void
attention_items(cpu_ctx *c, const llm_batch *b)
{
    int  i, run, t, h, kh, g = c->n_heads / c->n_kv_heads, per_item, tok, hs;
    int  n = 0, runs = 0;

    c->att_split = attention_split(c, b, c->head_dim);
    if (c->att_split) {
        return;
    }
    for (i = 0; i < b->n_tokens; i++) {
        runs += i == 0 || b->seq[i] != b->seq[i - 1]
                || b->pos[i] != b->pos[i - 1] + 1;
    }
    /* heads per item: the kv head's g, or 1 when the items would be
       fewer than two per thread (a decode of one or two sequences) */
    hs = g <= LLM_ATT_MAX_Q ? g : LLM_ATT_MAX_Q;
    if (runs == b->n_tokens && (size_t) runs * c->n_kv_heads
                               < 2 * (size_t) c->n_threads)
    {
        hs = 1;
    }
    per_item = LLM_ATT_MAX_Q / hs;

    for (i = 0; i < b->n_tokens; i = run) {
        for (run = i + 1; run < b->n_tokens && b->seq[run] == b->seq[i]
                          && b->pos[run] == b->pos[run - 1] + 1; run++)
        {
            /* void */
        }
        for (kh = 0; kh < c->n_kv_heads; kh++) {
            for (h = kh * g; h < (kh + 1) * g; h += hs) {
                int nh = (kh + 1) * g - h < hs ? (kh + 1) * g - h : hs;
                for (t = i; t < run; t += tok) {
                    tok = run - t < per_item ? run - t : per_item;
                    c->att_items[n].first = t;
                    c->att_items[n].n_tok = (int16_t) tok;
                    c->att_items[n].head = (int16_t) h;
                    c->att_items[n].n_head = (int16_t) nh;
                    c->att_items[n].span = -1;
                    n++;
                }
            }
        }
    }
    c->att_n_items = n;
}


static void
attention_item(llm_backend *be, const llm_batch *b, int layer,
    const att_item *it)
{
    cpu_ctx          *c = be->ctx;
    const llm_config *cfg = &be->model->cfg;
    const float      *sinks = be->model->layers[layer].attn_sinks;
    int               hd = cfg->head_dim;
    int               g = c->n_heads / c->n_kv_heads, t, h, nq = 0;
    llm_att_seq       s;
    llm_att_query     q[LLM_ATT_MAX_Q];
    int               kg = c->kv_group[layer], sq = b->seq[it->first];
    const uint8_t    *k0 = llm_kv_k(&c->kv, 0, c->kv_slot[layer]);
    size_t            page = c->kv.block_elts * c->kv.elt_size;

    /* the kernel reads table[t / block_size] * block_bytes + k_off: a
       group's row of pages, or logical blocks of G pages each (kv_page) */
    s.pool = c->kv.data;
    s.k_off = (size_t) (k0 - c->kv.data);
    s.v_off = (size_t) ((const uint8_t *) llm_kv_v(&c->kv, 0,
                                                   c->kv_slot[layer])
                        - c->kv.data);
    if (b->n_groups == 0) {
        s.table = b->block_table[sq];
        s.block_bytes = page * c->kv_layout.n_groups;
        s.k_off += page * kg;
        s.v_off += page * kg;
    } else {
        s.table = b->block_table[sq]
                  + (kg > 0 ? kg * b->table_stride[sq] : 0);
        s.block_bytes = page;
    }
    s.block_size = c->kv.block_size;
    s.kv_dim = c->kv_dim;
    s.f16 = c->kv.dtype == LLM_KV_F16;
    s.head_off = it->head / g * hd;
    s.hd = hd;

    for (t = it->first; t < it->first + it->n_tok; t++) {
        for (h = it->head; h < it->head + it->n_head; h++) {
            q[nq].q = c->q + (size_t) t * c->q_dim + (size_t) h * hd;
            q[nq].out = c->att + (size_t) t * c->q_dim + (size_t) h * hd;
            q[nq].p = b->pos[t];
            q[nq].t0 = attention_t0(c, b->pos[t]);
            q[nq].sink = sinks != NULL ? &sinks[h] : NULL;
            nq++;
        }
    }
    if (it->span >= 0) {
        llm_attention_span(&s, q, nq, cfg->att_scale, it->span,
                           attention_part(c, it->first, it->head, it->span));
        return;
    }
    llm_attention(&s, q, nq, cfg->att_scale);
}


/* split items: token t's head h over every span in turn, into c->att */
static void
attention_merge_task(void *arg, int ith, int nth)
{
    layer_job        *j = arg;
    cpu_ctx          *c = j->be->ctx;
    const llm_batch  *b = j->batch;
    const float      *sinks = j->be->model->layers[j->layer].attn_sinks;
    int               hd = c->head_dim, w, k;
    float             acc[LLM_ATT_PART(LLM_ATT_MAX_HD)];

    for (w = ith; w < b->n_tokens * c->n_heads; w += nth) {
        int t = w / c->n_heads, h = w % c->n_heads;
        int k0 = attention_t0(c, b->pos[t]) / LLM_ATT_SPAN;

        for (k = k0; k <= b->pos[t] / LLM_ATT_SPAN; k++) {
            llm_att_merge(acc, attention_part(c, t, h, k), hd, k == k0);
        }
        if (sinks != NULL) {            /* after every span, as att_spans */
            llm_att_sink(acc, sinks[h], hd);
        }
        llm_att_finish(acc, c->att + (size_t) t * c->q_dim
                            + (size_t) h * hd, hd);
    }
}


static void
attention_task(void *arg, int ith, int nth)
{
    layer_job  *j = arg;
    cpu_ctx    *c = j->be->ctx;
    int         w;

    /* strided, not in halves: later tokens of a prefill see more
       positions, so halves would give the last thread most of the work */
    for (w = ith; w < c->att_n_items; w += nth) {
        attention_item(j->be, j->batch, j->layer, &c->att_items[w]);
    }
}


typedef struct {
    float        *gate;   /* in: gate, out: silu(gate) * up */
    const float  *up;
    size_t        n;
} swiglu_job;


static void
swiglu_task(void *arg, int ith, int nth)
{
    swiglu_job  *j = arg;
    size_t       lo = j->n * ith / nth, hi = j->n * (ith + 1) / nth;

    llm_swiglu(j->gate + lo, j->up + lo, hi - lo);
}


/* gemma3: gate = gelu_tanh(gate) * up */
static void
geglu_task(void *arg, int ith, int nth)
{
    swiglu_job  *j = arg;
    size_t       lo = j->n * ith / nth, hi = j->n * (ith + 1) / nth;

    llm_geglu(j->gate + lo, j->up + lo, hi - lo);
}


typedef struct {
    float        *x;
    const float  *add;
    size_t        n;
} add_job;


static void
add_task(void *arg, int ith, int nth)
{
    add_job  *j = arg;
    size_t    i;

    for (i = j->n * ith / nth; i < j->n * (ith + 1) / nth; i++) {
        j->x[i] += j->add[i];
    }
}


typedef struct {
    float        *x;
    const float  *b;
    size_t        cols;
    int           rows;
} bias_job;


static void
bias_task(void *arg, int ith, int nth)
{
    bias_job  *j = arg;
    size_t     i;
    int        r;

    for (r = j->rows * ith / nth; r < j->rows * (ith + 1) / nth; r++) {
        for (i = 0; i < j->cols; i++) {
            j->x[r * j->cols + i] += j->b[i];
        }
    }
}


/* x(rows, cols) += b(cols) on every row */
static void
add_bias_rows(cpu_ctx *c, float *x, const float *b, int rows, size_t cols)
{
    bias_job  j = { x, b, cols, rows };

    run_job(c, bias_task, &j, (size_t) rows * cols);
}


/* ---------------------------------------------------------------------------
 * forward
 */

/* out(n, w->rows) = x(n, w->cols) @ W^T */
static void
matmul(llm_backend *be, float *out, const float *x, int n,
    const llm_tensor *w)
{
    cpu_ctx  *c = be->ctx;
    int       rc;

    if (be->opt.exact) {
        rc = llm_matmul_ref(out, x, n, w);
    } else {
        rc = llm_matmul(c->tp, out, x, n, w);
    }
    c->oom |= rc != 0;
}


/*
 * Decode-sized batches: the matmuls that share an input (q, k, v; gate,
 * up), or the slices of a row-split matmul, run as one pool job whose
 * threads take chunks of any of them, each chunk a single-threaded
 * llm_matmul_ld into its slice of the output. One wake-up instead of
 * three (two; n_slices), which matters most when a worker may be
 * descheduled. A weight is cut into one contiguous chunk per thread
 * (whole groups of 16 rows): decode streams its weights from DRAM, and
 * long runs keep the prefetchers ahead, where 64-row chunks taken in
 * turn by the threads left every thread jumping (SmolLM2 decode 1.22x,
 * docs/kernels.md). Every output row is computed exactly as by
 * llm_matmul (row results do not depend on tiling or threads), so
 * results are unchanged; test_model's prefill == decode test checks it.
 */
#define FUSED_MAX_TOKENS  8
#define FUSED_MAX_W       LLM_TP_MAX_SLICES

typedef struct {
    int                 n;
    int                 n_w;
    llm_tensor          w[FUSED_MAX_W];
    const float        *x[FUSED_MAX_W];   /* (n, ld_x[p]) input of w[p] */
    size_t              ld_x[FUSED_MAX_W];
    float              *out[FUSED_MAX_W]; /* (n, w[p].rows) */
    llm_act             act[FUSED_MAX_W];
    int                 act_of[FUSED_MAX_W];  /* w[p] reads act[act_of[p]] */
    int                 chunk_rows[FUSED_MAX_W];
    int                 first_chunk[FUSED_MAX_W + 1];  /* prefix sums of
                                                          chunks per w */
    /* gate and up (w[0], w[1]) taken as pairs: item k is chunk k of
       both, then glu on those rows of every token (out[0] := glu(out[0],
       out[1])); NULL: items are single chunks */
    void              (*glu)(float *gate, const float *up, size_t n);
    atomic_int          next;
} fused_job;


/* chunk k of w[p] into its rows of out[p] */
static void
fused_chunk_run(fused_job *j, int p, int k)
{
    int          rows = j->chunk_rows[p], lo = k * rows;
    llm_tensor   v;

    v = llm_tensor_rows(&j->w[p], lo,
                        j->w[p].rows - lo < rows ? j->w[p].rows - lo : rows);
    llm_matmul_act(j->out[p] + lo, j->w[p].rows, &j->act[j->act_of[p]], &v);
}


/* item k of a glu job: gate and up rows of chunk k, then their
 * activation, row by row of the batch (elementwise: the same bits as
 * one call over the whole batch, test_kernels' llm_swiglu == reference) */
static void
fused_glu_item(fused_job *j, int k)
{
    int  rows = j->w[0].rows, lo = k * j->chunk_rows[0], t;
    int  hi = lo + j->chunk_rows[0] < rows ? lo + j->chunk_rows[0] : rows;

    fused_chunk_run(j, 0, k);
    fused_chunk_run(j, 1, k);
    for (t = 0; t < j->n; t++) {
        j->glu(j->out[0] + (size_t) t * rows + lo,
               j->out[1] + (size_t) t * rows + lo, (size_t) (hi - lo));
    }
}


static void
fused_task(void *arg, int ith, int nth)
{
    fused_job   *j = arg;
    int          k, p, items;

    (void) ith;
    (void) nth;
    items = j->glu ? j->first_chunk[1] : j->first_chunk[j->n_w];
    while ((k = atomic_fetch_add(&j->next, 1)) < items) {
        if (j->glu) {
            fused_glu_item(j, k);
            continue;
        }
        for (p = 0; k >= j->first_chunk[p + 1]; p++) {
            /* find the weight this chunk belongs to */
        }
        fused_chunk_run(j, p, k - j->first_chunk[p]);
    }
}


/* quantizes each distinct input once (q, k and v share one; a chunk
 * quantizing its own copy cost a sixth of decode), then runs the job */
static void
fused_run(cpu_ctx *c, fused_job *j)
{
    int      p, q;
    size_t   size = 0, off[FUSED_MAX_W];
    void    *buf;

    for (p = 0; p < j->n_w; p++) {
        for (q = 0; q < p; q++) {
            if (j->act_of[q] == q && j->x[q] == j->x[p]
                && j->ld_x[q] == j->ld_x[p] && j->w[q].type == j->w[p].type
                && j->w[q].pack == j->w[p].pack
                && j->w[q].cols == j->w[p].cols)
            {
                break;
            }
        }
        j->act_of[p] = q;
        if (q == p) {
            off[p] = size;
            size += (llm_act_size(&j->w[p], j->n) + 63) & ~(size_t) 63;
        }
    }
    if (size > c->act_buf_size) {
        if ((buf = llm_alloc_aligned(size)) == NULL) {
            c->oom = 1;
            return;
        }
        free(c->act_buf);
        c->act_buf = buf;
        c->act_buf_size = size;
    }
    for (p = 0; p < j->n_w; p++) {
        if (j->act_of[p] == p) {
            llm_act_make(&j->act[p], c->act_buf + off[p], j->x[p],
                         j->ld_x[p], j->n, &j->w[p]);
        }
    }
    atomic_init(&j->next, 0);
    llm_threadpool_run(c->tp, fused_task, j);
}


/* adds out = x @ w^T (x: n rows of ld_x floats) to a fused job, in work
 * items of chunk_rows rows */
static void
fused_add(fused_job *j, const llm_tensor *w, const float *x, size_t ld_x,
    float *out, int chunk_rows)
{
    int  p = j->n_w++;

    j->w[p] = *w;
    j->x[p] = x;
    j->ld_x[p] = ld_x;
    j->out[p] = out;
    j->chunk_rows[p] = chunk_rows;
    j->first_chunk[p + 1] = j->first_chunk[p]
        + (w->rows + chunk_rows - 1) / chunk_rows;
}


static int
use_fused(llm_backend *be, int n)
{
    cpu_ctx  *c = be->ctx;

    return !be->opt.exact && n <= FUSED_MAX_TOKENS && c->n_threads > 1;
}


/* rows of a chunk when rows are cut into n contiguous chunks of whole
 * packed groups */
static int
fused_chunk(int rows, int n)
{
    int chunk = (rows + n - 1) / n;

    return (chunk + LLM_PACK_ROWS - 1) / LLM_PACK_ROWS * LLM_PACK_ROWS;
}


/* out[p] = x @ w[p]^T for n_w weights with the same input */
static void
matmul_multi(llm_backend *be, const float *x, int n, int n_w,
    const llm_tensor **w, float **out)
{
    cpu_ctx    *c = be->ctx;
    fused_job   j;
    int         p;

    if (!use_fused(be, n)) {
        for (p = 0; p < n_w; p++) {
            matmul(be, out[p], x, n, w[p]);
        }
        return;
    }
    memset(&j, 0, sizeof(j));
    j.n = n;
    for (p = 0; p < n_w; p++) {
        fused_add(&j, w[p], x, w[p]->cols, out[p],
                  fused_chunk(w[p]->rows, c->n_threads));
    }
    fused_run(c, &j);
}


/* gate = glu(xb @ w_gate^T, xb @ w_up^T): at decode sizes one pool job
 * whose items are row chunks of both weights and their activation (one
 * job fewer per layer than the matmuls, then the activation); 0, or -1
 * when the batch is not fused and the caller runs the two steps */
static int
matmul_glu(llm_backend *be, const float *x, int n, const llm_tensor *gate,
    const llm_tensor *up, float *out_gate, float *out_up,
    void (*glu)(float *, const float *, size_t))
{
    cpu_ctx    *c = be->ctx;
    fused_job   j;
    int         chunk;

    if (!use_fused(be, n) || gate->rows != up->rows) {
        return -1;
    }
    chunk = fused_chunk(gate->rows, c->n_threads);
    memset(&j, 0, sizeof(j));
    j.n = n;
    fused_add(&j, gate, x, gate->cols, out_gate, chunk);
    fused_add(&j, up, x, up->cols, out_up, chunk);
    j.glu = glu;
    fused_run(c, &j);
    return 0;
}


/* ---------------------------------------------------------------------------
 * row-split matmuls: the tensor-parallel reduction points
 */

/* slot[s] = in[:, slice s] @ w[:, slice s]^T for this rank's slices; w is
 * this rank's view (its my_slices slices side by side), in (n, w->cols) */
static void
matmul_slices(llm_backend *be, float *const *slot, const float *in, int n,
    const llm_tensor *w)
{
    cpu_ctx     *c = be->ctx;
    int          width = w->cols / c->my_slices, s, i, per_slice, chunk;
    llm_tensor   v;
    fused_job    j;

    /* one contiguous chunk per thread over all slices (fused_chunk) */
    per_slice = (c->n_threads + c->my_slices - 1) / c->my_slices;
    chunk = fused_chunk(w->rows, per_slice);
    memset(&j, 0, sizeof(j));
    j.n = n;
    for (s = 0; s < c->my_slices; s++) {
        v = llm_tensor_cols(w, s * width, width);
        if (use_fused(be, n)) {
            fused_add(&j, &v, in + s * width, w->cols, slot[s], chunk);
        } else if (be->opt.exact) {
            /* llm_matmul_ref reads contiguous rows */
            for (i = 0; i < n; i++) {
                memcpy(c->xs + (size_t) i * width,
                       in + (size_t) i * w->cols + s * width,
                       width * sizeof(float));
            }
            c->oom |= llm_matmul_ref(slot[s], c->xs, n, &v) != 0;
        } else {
            c->oom |= llm_matmul_ld(c->tp, slot[s], w->rows, in + s * width,
                                    w->cols, n, &v) != 0;
        }
    }
    if (j.n_w > 0) {
        fused_run(c, &j);
    }
}


typedef struct {
    float               *x;
    const float *const  *slot;
    int                  n_slices;
    size_t               n;
} slice_sum_job;


static void
slice_sum_task(void *arg, int ith, int nth)
{
    slice_sum_job  *j = arg;

    llm_tp_sum_slices(j->x, j->slot, j->n_slices, j->n * ith / nth,
                      j->n * (ith + 1) / nth);
}


/*
 * x += in @ w^T for a row-split weight (wo, down): this rank's slices into
 * their slots, the exchange (a barrier: the slots are shared), then every
 * rank adds all n_slices partials in slice order (tp.h). At tp 1 this is
 * the same arithmetic without the barrier, so TP=N == TP=1 bit for bit.
 */
static void
matmul_rowsplit_add(llm_backend *be, float *x, const float *in, int n,
    const llm_tensor *w, int set)
{
    cpu_ctx        *c = be->ctx;
    slice_sum_job   sj = { x, (const float *const *) c->slot[set],
                           c->n_slices, (size_t) n * w->rows };

    matmul_slices(be, c->slot[set] + c->slice_lo, in, n, w);
    llm_tp_barrier(c->group);
    run_job(c, slice_sum_task, &sj, sj.n * c->n_slices);
}


static int
check_batch(llm_backend *be, const llm_batch *b)
{
    cpu_ctx           *c = be->ctx;
    llm_batch_limits   l;

    l.max_tokens = be->opt.max_batch_tokens;
    l.vocab = be->model->cfg.vocab_size;
    l.max_seq_len = be->model->cfg.max_seq_len;
    l.block_size = c->kv.block_size;
    l.n_blocks = c->kv.n_blocks;
    l.n_groups = c->kv_layout.n_groups;
    l.need_logits = 1;

    return llm_batch_check(b, &l, be->err, sizeof(be->err));
}


/* multiply-adds of a layer's attention: every token reads pos + 1 keys */
static size_t
attention_work(const cpu_ctx *c, const llm_batch *b, int head_dim)
{
    size_t  w = 0;
    int     i;

    for (i = 0; i < b->n_tokens; i++) {
        w += (size_t) (b->pos[i] + 1);
    }
    return w * c->n_heads * head_dim * 2;
}


/* x += in @ w^T, or with a post norm (gemma3) x += rmsnorm(in @ w^T) *
 * post: the row-split sum lands in xb (from zero, so the same slices in
 * the same order), is normed there, then added */
static void
post_norm_add(llm_backend *be, int n, const float *in, const llm_tensor *w,
    const float *post, int set)
{
    cpu_ctx           *c = be->ctx;
    const llm_config  *cfg = &be->model->cfg;
    add_job            aj = { c->x, c->xb, (size_t) n * cfg->dim };

    if (post == NULL) {
        matmul_rowsplit_add(be, c->x, in, n, w, set);
        return;
    }
    memset(c->xb, 0, sizeof(float) * aj.n);
    matmul_rowsplit_add(be, c->xb, in, n, w, set);
    rmsnorm_rows(c, c->xb, c->xb, post, n, cfg->dim, cfg->norm_eps, NULL);
    run_job(c, add_task, &aj, aj.n);
}


static void
forward_layer(llm_backend *be, const llm_batch *b, int layer)
{
    cpu_ctx           *c = be->ctx;
    const llm_config  *cfg = &be->model->cfg;
    const llm_layer   *l = &c->layers[layer];
    int                n = b->n_tokens;
    layer_job          lj = { be, b, layer };
    swiglu_job         sj = { c->hb, c->hb2, (size_t) n * c->hidden };
    const llm_tensor  *qkv_w[3] = { &l->wq, &l->wk, &l->wv };
    float             *qkv_out[3] = { c->q, c->k, c->v };
    const llm_tensor  *ffn_w[2] = { &l->w_gate, &l->w_up };
    float             *ffn_out[2] = { c->hb, c->hb2 };

    c->window = llm_config_layer_window(cfg, layer);
    rmsnorm_rows(c, c->xb, c->x, l->attn_norm, n, cfg->dim, cfg->norm_eps,
                 NULL);
    matmul_multi(be, c->xb, n, 3, qkv_w, qkv_out);
    run_job(c, qkv_finish_task, &lj,
            (size_t) n * (c->q_dim + c->kv_dim) * CPU_COST_ROPE);
    attention_items(c, b);
    run_job(c, attention_task, &lj, attention_work(c, b, cfg->head_dim));
    if (c->att_split) {
        run_job(c, attention_merge_task, &lj, (size_t) n * c->n_heads
                * c->att_spans * cfg->head_dim * CPU_COST_MERGE);
    }
    post_norm_add(be, n, c->att, &l->wo, l->attn_post_norm, 0);
    if (l->bo != NULL) {
        add_bias_rows(c, c->x, l->bo, n, cfg->dim);     /* gpt-oss, tp 1 */
    }

    rmsnorm_rows(c, c->xb, c->x, l->ffn_norm, n, cfg->dim, cfg->norm_eps,
                 NULL);
    if (cfg->n_expert > 0) {
        /* mixture of experts (moe_cpu.c); tp 1 only, no all-reduce */
        c->oom |= llm_moe_cpu_forward(&c->moe, c->x, c->xb, n, l) != 0;
        return;
    }
    if (matmul_glu(be, c->xb, n, &l->w_gate, &l->w_up, c->hb, c->hb2,
                   cfg->gemma ? llm_geglu : llm_swiglu) != 0)
    {
        matmul_multi(be, c->xb, n, 2, ffn_w, ffn_out);
        run_job(c, cfg->gemma ? geglu_task : swiglu_task, &sj,
                sj.n * CPU_COST_SWIGLU);
    }
    post_norm_add(be, n, c->hb, &l->w_down, l->ffn_post_norm, 1);
}


/* the first vocabulary row of rank r's share (a packed classifier's
 * shares start at a multiple of its 16-row groups) */
static int
logits_row(const cpu_ctx *c, int vocab, int r, int n_ranks)
{
    int  row = (int) ((long long) vocab * r / n_ranks);

    if (r == n_ranks) {
        return vocab;
    }
    return c->output.pack ? row / c->output.pack * c->output.pack : row;
}


/* logits(n_logits, vocab) = xb @ output^T; with tp ranks each computes a
 * range of vocabulary rows (rows are independent dot products, so the
 * split changes no bit); exact mode leaves them all to rank 0 */
static void
logits_rows(llm_backend *be, const llm_batch *b)
{
    cpu_ctx          *c = be->ctx;
    const llm_model  *m = be->model;
    int               vocab = m->cfg.vocab_size, lo, hi;
    int               n_ranks = llm_tp_group_size(c->group);
    llm_tensor        v;

    if (be->opt.exact) {
        if (c->rank == 0) {
            matmul(be, b->logits, c->xb, b->n_logits, &c->output);
        }
        return;
    }
    lo = logits_row(c, vocab, c->rank, n_ranks);
    hi = logits_row(c, vocab, c->rank + 1, n_ranks);
    v = llm_tensor_rows(&c->output, lo, hi - lo);
    c->oom |= llm_matmul_ld(c->tp, b->logits + lo, vocab, c->xb, m->cfg.dim,
                            b->n_logits, &v) != 0;
}


/* one rank's whole step on a checked batch (the whole step at tp 1); 0,
 * or -1 with be->err set when a matmul had no memory */
static int
cpu_forward_rank(llm_backend *be, const llm_batch *b)
{
    cpu_ctx           *c = be->ctx;
    const llm_model   *m = be->model;
    const llm_config  *cfg = &m->cfg;
    int                i, layer;

    c->oom = 0;
    for (i = 0; i < b->n_tokens; i++) {
        float *x = c->x + (size_t) i * cfg->dim;
        int    e;

        const uint8_t *row = (const uint8_t *) c->embd.data
                             + (size_t) b->token[i] * c->embd.row_stride;

        if (c->embd.pack) {
            llm_pack_row(&c->embd, b->token[i], c->embd_row);
            row = c->embd_row;
        }
        llm_dequant_row(c->embd.type, row, x, cfg->dim);
        for (e = 0; cfg->embd_scale != 1.0f && e < cfg->dim; e++) {
            x[e] *= cfg->embd_scale;      /* gemma3: sqrt(dim) */
        }
    }
    for (layer = 0; layer < cfg->n_layers; layer++) {
        forward_layer(be, b, layer);
    }
    if (b->n_logits > 0) {
        rmsnorm_rows(c, c->xb, c->x, m->out_norm, b->n_logits, cfg->dim,
                     cfg->norm_eps, b->logit_idx);
        logits_rows(be, b);
    }
    if (b->n_hidden > 0 && c->rank == 0) {
        /* the same norm the logit rows get, into the caller's rows */
        rmsnorm_rows(c, b->hidden, c->x, m->out_norm, b->n_hidden, cfg->dim,
                     cfg->norm_eps, b->hidden_idx);
    }
    if (c->oom) {
        return be_fail(be, "cpu backend: out of memory for the activations "
                       "of a batch of %d tokens", b->n_tokens);
    }
    return 0;
}


static int
cpu_forward(llm_backend *be, const llm_batch *b)
{
    if (check_batch(be, b) != 0) {
        return -1;
    }
    return cpu_forward_rank(be, b);
}


static int
cpu_copy_block(llm_backend *be, int32_t dst, int32_t src)
{
    cpu_ctx  *c = be->ctx;

    if (dst < 0 || src < 0 || dst >= c->kv.n_blocks
        || src >= c->kv.n_blocks)
    {
        return be_fail(be, "copy of KV block %d to %d: ids outside the pool "
                       "of %d", src, dst, c->kv.n_blocks);
    }
    llm_kv_copy_block(&c->kv, dst, src);
    return 0;
}


/* ---------------------------------------------------------------------------
 * create / free
 */

static void
cpu_free(llm_backend *be)
{
    cpu_ctx  *c = be->ctx;

    if (c != NULL) {
        llm_threadpool_free(c->tp);
        llm_kv_free(&c->kv);
        free(c->kv_group);
        free(c->kv_slot);
        free(c->x);
        free(c->xb);
        free(c->slot_mem);
        free(c->xs);
        free(c->act_buf);
        free(c->q);
        free(c->k);
        free(c->v);
        free(c->att);
        free(c->hb);
        free(c->hb2);
        free(c->att_items);
        free(c->att_part);
        free(c->inv_freq);
        free(c->inv_freq_local);
        free(c->layers);
        free(c->experts);
        llm_moe_cpu_free(&c->moe);
        free(c->packed);
        free(c->embd_row);
        free(c);
    }
    free(be);
}


/* touched now: the engine's RSS is flat from its first request
 * (docs/operations.md, pre-allocation) */
static float *
alloc_rows(int rows, int cols)
{
    size_t   size = (size_t) rows * cols * sizeof(float);
    float   *p = malloc(size);

    if (p != NULL) {
        memset(p, 0, size);
    }
    return p;
}


void
llm_backend_options_default(llm_backend_options *o, const llm_model *m)
{
    o->n_threads = LLM_DEFAULT_THREADS;
    o->kv_block_size = LLM_KV_BLOCK_SIZE_DEFAULT;
    o->kv_n_blocks = (m->cfg.max_seq_len + o->kv_block_size - 1)
                     / o->kv_block_size;
    o->max_batch_tokens = 512;
    o->kv_dtype = LLM_KV_F16;
    o->exact = 0;
    o->tp_slices = 0;
    o->kv_prealloc = 0;
}


/* the slots of row-split partials: at tp 1 owned, one set that both
 * reductions reuse; at tp > 1 two sets in the group's shared memory
 * (2, n_slices, max_batch_tokens, dim) */
/* ranks use the model's plan; TP=1 one slice (one matmul, fastest) unless
 * asked to reproduce the plan */
static int
cpu_n_slices(const llm_model *m, const llm_backend_options *o)
{
    if (m->tp_size > 1) {
        return llm_tp_slices(m);
    }

    return o->tp_slices > 0 ? o->tp_slices : 1;
}


static int
cpu_slots_init(cpu_ctx *c, const llm_model *m, const llm_backend_options *o,
    int n, float *shared)
{
    size_t  per = (size_t) n * m->cfg.dim;
    int     set, s;

    c->n_slices = cpu_n_slices(m, o);
    c->my_slices = c->n_slices / m->tp_size;
    c->slice_lo = m->tp_rank * c->my_slices;
    if (shared == NULL) {
        c->slot_mem = alloc_rows(c->n_slices * n, m->cfg.dim);
        if (c->slot_mem == NULL) {
            return -1;
        }
    }
    for (set = 0; set < 2; set++) {
        for (s = 0; s < c->n_slices; s++) {
            c->slot[set][s] = shared != NULL
                ? shared + ((size_t) set * c->n_slices + s) * per
                : c->slot_mem + (size_t) s * per;
        }
    }
    return 0;
}


static void
cpu_usage(llm_backend *be, llm_backend_usage *u)
{
    cpu_ctx  *c = be->ctx;

    u->busy_ns += llm_threadpool_busy_ns(c->tp);
    u->n_threads += llm_threadpool_size(c->tp);
}


/* float weights (F16, BF16, F32) are not packed, yet a decode step
 * streams them as it streams the packed ones: a plain copy of their rows
 * on the same huge pages (the file's are 4 KB page cache, alloc.h) */
static int
float_weight(const llm_tensor *w)
{
    return w->pack == 0 && w->data != NULL
           && (w->type == GGML_TYPE_F16 || w->type == GGML_TYPE_BF16
               || w->type == GGML_TYPE_F32);
}


/* the whole 4 KB pages of [a, a + len) let go (the mapping is read-only:
 * a later read faults them in again) */
static void
release_pages(const void *a, size_t len)
{
    uintptr_t  page = 4096;
    uintptr_t  lo = ((uintptr_t) a + page - 1) & ~(page - 1);
    uintptr_t  hi = ((uintptr_t) a + len) & ~(page - 1);

    if (hi > lo) {
        (void) madvise((void *) lo, hi - lo, MADV_DONTNEED);
    }
}


/* the rows of a float view, one after another (a view's stride may be
 * wider than its row: a column slice); the bytes they take. The file's
 * pages go every 32 MB copied, not at the end: an 875 MB classifier
 * (gpt-oss's) would otherwise be held twice at the peak */
static size_t
copy_float(const llm_tensor *w, uint8_t *dst, llm_tensor *out)
{
    const uint8_t  *src = w->data;
    size_t          row = (size_t) w->cols
                          * (w->type == GGML_TYPE_F32 ? 4 : 2);
    int             r, done = 0;

    if (dst != NULL) {
        for (r = 0; r < w->rows; r++) {
            memcpy(dst + (size_t) r * row, src + (size_t) r * w->row_stride,
                   row);
            if ((size_t) (r + 1 - done) * w->row_stride >= (32u << 20)) {
                release_pages(src + (size_t) done * w->row_stride,
                              (size_t) (r + 1 - done) * w->row_stride);
                done = r + 1;
            }
        }
        *out = *w;
        out->data = dst;
        out->row_stride = row;
    }
    return row * (size_t) w->rows;
}


/* a packed copy of *w in c->packed at *off (a float one: a plain copy),
 * or just its size when c->packed is NULL; the pages it came from are
 * let go */
static void
pack_one(cpu_ctx *c, llm_tensor *w, size_t *off)
{
    llm_tensor  src = *w;
    size_t      size;

    if (!llm_pack_useful(w)) {
        if (!float_weight(w)) {
            return;
        }
        size = copy_float(&src, c->packed ? c->packed + *off : NULL, w);
    } else {
        size = llm_pack_size(&src);
        if (c->packed != NULL) {
            llm_pack(&src, c->packed + *off, w);
        }
    }
    if (c->packed != NULL) {
        release_pages(src.data, (size_t) src.rows * src.row_stride);
    }
    *off += (size + 63) & ~(size_t) 63;
}


/* every matmul weight of c->layers and c->output through pack_one: the
 * bytes they take packed (c->packed NULL) or their packing */
static size_t
pack_all(cpu_ctx *c, int n_layers)
{
    size_t  off = 0;
    int     l;

    for (l = 0; l < n_layers; l++) {
        llm_layer *y = &c->layers[l];
        pack_one(c, &y->wq, &off);
        pack_one(c, &y->wk, &off);
        pack_one(c, &y->wv, &off);
        pack_one(c, &y->wo, &off);
        pack_one(c, &y->w_gate, &off);
        pack_one(c, &y->w_up, &off);
        pack_one(c, &y->w_down, &off);
        /* MoE: the router, then every expert's gate, up, down (one
         * contiguous run of views per layer, from c->experts) */
        for (int e = 0; y->exp_gate != NULL && e < 3 * c->moe.n_expert;
             e++)
        {
            pack_one(c, e == 0 ? &y->router : &y->exp_gate[e - 1], &off);
        }
        if (y->exp_gate != NULL) {
            pack_one(c, &y->exp_gate[3 * c->moe.n_expert - 1], &off);
        }
    }
    pack_one(c, &c->output, &off);
    return off;
}


/* c->layers and c->output: the model's, with every tensor the CPU's
 * kernels read faster packed (not in exact mode: llm_matmul_ref reads
 * plain rows); 0, or -1 when out of memory */
static int
cpu_pack_weights(cpu_ctx *c, const llm_model *m, int exact)
{
    size_t  size;

    c->layers = malloc(sizeof(llm_layer) * m->cfg.n_layers);
    if (c->layers == NULL) {
        return -1;
    }
    memcpy(c->layers, m->layers, sizeof(llm_layer) * m->cfg.n_layers);
    if (m->cfg.n_expert > 0) {
        size_t  per = 3 * (size_t) m->cfg.n_expert;

        c->experts = malloc(sizeof(llm_tensor) * per * m->cfg.n_layers);
        if (c->experts == NULL) {
            return -1;
        }
        memcpy(c->experts, m->experts,
               sizeof(llm_tensor) * per * m->cfg.n_layers);
        for (int l = 0; l < m->cfg.n_layers; l++) {
            c->layers[l].exp_gate = c->experts + l * per;
            c->layers[l].exp_up = c->experts + l * per + m->cfg.n_expert;
            c->layers[l].exp_down = c->experts + l * per
                                    + 2 * m->cfg.n_expert;
        }
    }
    c->output = m->output;
    c->embd = m->tok_embd;
    if (exact || (size = pack_all(c, m->cfg.n_layers)) == 0) {
        return 0;
    }
    /* every decode step streams it all: on huge pages (alloc.h) */
    if ((c->packed = llm_alloc_huge(size)) == NULL) {
        return -1;
    }
    (void) pack_all(c, m->cfg.n_layers);
    /* tied: the lookups read the copy too (the file's pages were let go) */
    if (c->output.data != m->output.data
        && m->output.data == m->tok_embd.data
        && c->output.rows == m->tok_embd.rows)
    {
        c->embd = c->output;
        if (c->embd.pack) {
            c->embd_row = malloc(llm_quant_block_bytes(c->embd.type)
                                 * (size_t) (c->embd.cols / LLM_QK));
            if (c->embd_row == NULL) {
                return -1;
            }
        }
    }
    return 0;
}


/* one rank's CPU state: the whole backend at tp 1 (group NULL, shared
 * NULL), or rank m->tp_rank of a group sharing its slots */
static llm_backend *
cpu_rank_create(const llm_model *m, const llm_backend_options *o,
    llm_tp_group *group, float *shared, char *err, size_t err_len)
{
    const llm_config  *cfg = &m->cfg;
    llm_backend       *be;
    cpu_ctx           *c;
    int                n;

    be = calloc(1, sizeof(*be));
    c = calloc(1, sizeof(*c));
    if (be == NULL || c == NULL) {
        free(be);
        free(c);
        snprintf(err, err_len, "cpu backend: out of memory");
        return NULL;
    }
    be->iface.name = "cpu";
    be->iface.forward = cpu_forward;
    be->iface.copy_block = cpu_copy_block;
    be->iface.free = cpu_free;
    be->iface.usage = cpu_usage;
    be->model = m;
    be->opt = *o;
    be->ctx = c;

    c->n_threads = o->n_threads;
    c->n_heads = cfg->n_heads / m->tp_size;
    c->n_kv_heads = cfg->n_kv_heads / m->tp_size;
    c->head_dim = cfg->head_dim;
    c->window = cfg->sliding_window;
    c->q_dim = c->n_heads * cfg->head_dim;
    c->kv_dim = c->n_kv_heads * cfg->head_dim;
    c->hidden = cfg->hidden_dim / m->tp_size;
    if (o->kv_block_size % LLM_ATT_TILE != 0
        || cfg->head_dim > LLM_ATT_MAX_HD)
    {
        snprintf(err, err_len, "cpu backend: attention needs a KV block "
                 "size that is a multiple of %d (got %d) and a head_dim of "
                 "at most %d (got %d)", LLM_ATT_TILE, o->kv_block_size,
                 LLM_ATT_MAX_HD, cfg->head_dim);
        cpu_free(be);
        return NULL;
    }
    /* exact mode is the fp32 reference's twin: no rounding in the cache;
       kv_n_blocks logical blocks are G pages each, the same bytes */
    c->kv_group = malloc(cfg->n_layers * sizeof(int));
    c->kv_slot = malloc(cfg->n_layers * sizeof(int));
    if (c->kv_group == NULL || c->kv_slot == NULL
        || llm_config_kv_layout(cfg, &c->kv_layout, c->kv_group, c->kv_slot)
           != 0)
    {
        snprintf(err, err_len, "cpu backend: out of memory");
        cpu_free(be);
        return NULL;
    }
    if (llm_kv_init(&c->kv, c->kv_layout.per_group, c->kv_dim,
                    o->kv_block_size,
                    o->kv_n_blocks * c->kv_layout.n_groups,
                    o->exact ? LLM_KV_F32 : o->kv_dtype, err,
                    err_len) != 0
        || (o->kv_prealloc && llm_kv_prefault(&c->kv, err, err_len) != 0))
    {
        cpu_free(be);
        return NULL;
    }

    n = o->max_batch_tokens;
    c->x = alloc_rows(n, cfg->dim);
    c->xb = alloc_rows(n, cfg->dim);
    c->q = alloc_rows(n, c->q_dim);
    c->k = alloc_rows(n, c->kv_dim);
    c->v = alloc_rows(n, c->kv_dim);
    c->att = alloc_rows(n, c->q_dim);
    c->hb = alloc_rows(n, c->hidden);
    c->hb2 = alloc_rows(n, c->hidden);
    c->att_max_items = n * c->n_heads;
    c->att_items = malloc(sizeof(att_item) * (size_t) n * c->n_heads);
    c->inv_freq = alloc_rows(1, cfg->rope_dim / 2 + 1);
    c->inv_freq_local = alloc_rows(1, cfg->rope_dim / 2 + 1);
    c->tp = llm_threadpool_create(o->n_threads);
    c->group = group;
    c->rank = m->tp_rank;
    if (o->exact) {
        c->xs = alloc_rows(n, c->q_dim > c->hidden ? c->q_dim : c->hidden);
    }
    if (c->x == NULL || c->xb == NULL || c->q == NULL
        || c->k == NULL || c->v == NULL || c->att == NULL || c->hb == NULL
        || c->hb2 == NULL || c->att_items == NULL
        || c->inv_freq == NULL || c->inv_freq_local == NULL
        || c->tp == NULL || (o->exact && c->xs == NULL)
        || cpu_slots_init(c, m, o, n, shared) != 0
        || (cfg->n_expert > 0
            && llm_moe_cpu_init(&c->moe, cfg, n, c->tp, o->exact) != 0)
        || cpu_pack_weights(c, m, o->exact) != 0)
    {
        snprintf(err, err_len, "cpu backend: out of memory (or no threads) "
                 "for a batch of %d tokens", n);
        cpu_free(be);
        return NULL;
    }
    /* as transformers computes them (float32 pow, llama3 scaling), then
     * pos * inv_freq */
    llm_model_rope_inv_freq(m, c->inv_freq);
    llm_model_rope_inv_freq_local(m, c->inv_freq_local);
    return be;
}


/* ---------------------------------------------------------------------------
 * tensor parallelism: one backend that runs every rank (docs/tp.md)
 */

typedef struct {
    llm_tp_group     *group;
    int               n_ranks;
    llm_model        *models;     /* (n_ranks) ranks 1.. loaded here; rank
                                     0 is the caller's model */
    int               n_loaded;   /* models[1 .. n_loaded-1] to free */
    llm_backend     **ranks;      /* (n_ranks) each rank's CPU state */
    int              *rank_rc;    /* (n_ranks) each rank's forward result */
    float            *slot_mem;   /* (2, n_slices, max_batch_tokens, dim)
                                     row-split partials, shared */
    const llm_batch  *batch;      /* the step being run */
} cpu_tp;


static void
tp_rank_task(void *arg, int rank, int n_ranks)
{
    cpu_tp  *t = arg;

    (void) n_ranks;
    t->rank_rc[rank] = cpu_forward_rank(t->ranks[rank], t->batch);
}


static int
tp_forward(llm_backend *be, const llm_batch *b)
{
    cpu_tp  *t = be->ctx;
    int      r;

    /* every rank would judge the batch alike; check once, before any rank
     * can wait at a barrier */
    if (check_batch(t->ranks[0], b) != 0) {
        return be_fail(be, "%s", t->ranks[0]->err);
    }
    t->batch = b;
    llm_tp_group_run(t->group, tp_rank_task, t);
    /* a failed rank ran on to the end with the others (cpu_ctx.oom) */
    for (r = 0; r < t->n_ranks; r++) {
        if (t->rank_rc[r] != 0) {
            return be_fail(be, "tensor parallel rank %d: %s", r,
                           t->ranks[r]->err);
        }
    }
    return 0;
}


static int
tp_copy_block(llm_backend *be, int32_t dst, int32_t src)
{
    cpu_tp  *t = be->ctx;
    int      r;

    for (r = 0; r < t->n_ranks; r++) {
        if (cpu_copy_block(t->ranks[r], dst, src) != 0) {
            return be_fail(be, "%s", t->ranks[r]->err);
        }
    }
    return 0;
}


static void
tp_free(llm_backend *be)
{
    cpu_tp  *t = be->ctx;
    int      r;

    if (t != NULL) {
        llm_tp_group_free(t->group);
        for (r = 0; t->ranks != NULL && r < t->n_ranks; r++) {
            if (t->ranks[r] != NULL) {
                cpu_free(t->ranks[r]);
            }
        }
        for (r = 1; r < t->n_loaded; r++) {
            llm_model_free(&t->models[r]);
        }
        free(t->models);
        free(t->ranks);
        free(t->rank_rc);
        free(t->slot_mem);
        free(t);
    }
    free(be);
}


/* rank r's model: the caller's for rank 0, else loaded from its file */
static const llm_model *
tp_rank_model(cpu_tp *t, const llm_model *m, int r, char *err,
    size_t err_len)
{
    if (r == 0) {
        return m;
    }
    t->n_loaded = r + 1;
    if (llm_tp_load_rank(&t->models[r], m, r) != 0) {
        snprintf(err, err_len, "cpu backend: tensor parallel rank %d: %s", r,
                 t->models[r].err);
        return NULL;
    }
    return &t->models[r];
}


/*
 * m is rank 0 of m->tp_size (llm_model_load(m, path, 0, N)); the other
 * ranks' views are loaded here from the same file. o->n_threads is the
 * total: each rank thread gets n_threads / N (at least 1) for its matmuls.
 */
/* every rank's pool, summed */
static void
tp_usage(llm_backend *be, llm_backend_usage *u)
{
    cpu_tp  *t = be->ctx;
    int      r;

    for (r = 0; r < t->n_ranks; r++) {
        if (t->ranks[r] != NULL) {
            cpu_usage(t->ranks[r], u);
        }
    }
}


static llm_backend *
cpu_tp_create(const llm_model *m, const llm_backend_options *o, char *err,
    size_t err_len)
{
    llm_backend          *be;
    cpu_tp               *t;
    const llm_model      *rm;
    llm_backend_options   ro = *o;
    char                  msg[400];
    int                   r, n = m->tp_size;

    if (m->tp_rank != 0) {
        snprintf(err, err_len, "cpu backend: a tensor parallel backend is "
                 "made from rank 0's model (got rank %d of %d)", m->tp_rank,
                 n);
        return NULL;
    }
    if (llm_tp_check(m, n, msg, sizeof(msg)) != 0) {
        snprintf(err, err_len, "cpu backend: %s", msg);
        return NULL;
    }
    be = calloc(1, sizeof(*be));
    t = calloc(1, sizeof(*t));
    if (be == NULL || t == NULL) {
        free(be);
        free(t);
        snprintf(err, err_len, "cpu backend: out of memory");
        return NULL;
    }
    be->iface.name = "cpu";
    be->iface.forward = tp_forward;
    be->iface.copy_block = tp_copy_block;
    be->iface.free = tp_free;
    be->iface.usage = tp_usage;
    be->model = m;
    be->opt = *o;
    be->ctx = t;

    t->n_ranks = n;
    t->models = calloc(n, sizeof(llm_model));
    t->ranks = calloc(n, sizeof(llm_backend *));
    t->rank_rc = calloc(n, sizeof(int));
    t->slot_mem = alloc_rows(2 * cpu_n_slices(m, o) * o->max_batch_tokens,
                             m->cfg.dim);
    if (t->models == NULL || t->ranks == NULL || t->rank_rc == NULL
        || t->slot_mem == NULL)
    {
        snprintf(err, err_len, "cpu backend: out of memory for %d tensor "
                 "parallel ranks", n);
        tp_free(be);
        return NULL;
    }
    t->group = llm_tp_group_create(n, msg, sizeof(msg));
    if (t->group == NULL) {
        snprintf(err, err_len, "cpu backend: %s", msg);
        tp_free(be);
        return NULL;
    }
    ro.n_threads = o->n_threads / n > 1 ? o->n_threads / n : 1;
    (void) llm_kernels_isa();   /* chosen once here, not raced for by the
                                   ranks' first matmuls */
    for (r = 0; r < n; r++) {
        rm = tp_rank_model(t, m, r, err, err_len);
        if (rm == NULL) {
            tp_free(be);
            return NULL;
        }
        t->ranks[r] = cpu_rank_create(rm, &ro, t->group, t->slot_mem, err,
                                      err_len);
        if (t->ranks[r] == NULL) {
            tp_free(be);
            return NULL;
        }
    }
    return be;
}


llm_backend *
llm_backend_cpu_create(const llm_model *m, const llm_backend_options *o,
    char *err, size_t err_len)
{
    if (o->n_threads < 1 || o->n_threads > 1024 || o->max_batch_tokens < 1) {
        snprintf(err, err_len, "cpu backend: invalid options (%d threads, "
                 "max_batch_tokens %d)", o->n_threads, o->max_batch_tokens);
        return NULL;
    }
    if (m->cfg.encoder) {
        return llm_backend_encoder_create(m, o, err, err_len);
    }
    if (m->tp_size > 1) {
        return cpu_tp_create(m, o, err, err_len);
    }
    return cpu_rank_create(m, o, NULL, NULL, err, err_len);
}


llm_backend *
llm_backend_create(const char *name, const llm_model *m,
    const llm_backend_options *o, char *err, size_t err_len)
{
    if (strcmp(name, "cpu") == 0) {
        return llm_backend_cpu_create(m, o, err, err_len);
    }
#if NGX_LLM_CUDA
    if (strcmp(name, "cuda") == 0 && m->cfg.encoder) {
        snprintf(err, err_len, "backend \"cuda\" does not run encoders "
                 "(%s) yet: use the cpu backend", m->cfg.arch);
        return NULL;
    }
    if (strcmp(name, "cuda") == 0) {
        return llm_backend_cuda_create(m, o, err, err_len);
    }
    snprintf(err, err_len, "backend \"%s\" is not built (available: cpu, "
             "cuda)", name);
#else
    snprintf(err, err_len, "backend \"%s\" is not built (available: cpu)",
             name);
#endif
    return NULL;
}
