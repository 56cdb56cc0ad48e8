/*
 * Mixture-of-experts FFN on the CPU (moe_cpu.h for the contract and why a
 * token's result does not depend on its batch). One step:
 *
 *   logits = xb @ router^T                              (n, n_expert)
 *   per token: softmax, top-k -> sel (n, k), weight (n, k)
 *   group: count tokens per expert, prefix offsets; row pos[t][j] of the
 *          grouped input xg holds xb[t] for expert sel[t][j] (tokens in
 *          order within a group)
 *   per expert e with rows:  g, u = xg_e @ gate_e^T, xg_e @ up_e^T
 *                                   (+ biases, if any)
 *                            g    = glu(g, u)
 *                            y_e  = g_e @ down_e^T (+ bias)
 *   per token: x[t] += sum_j weight[t][j] * y[pos[t][j]]  (j in top-k order)
 *
 * The whole step is one pool job (step_task): its threads first take
 * the router's rows 16 at a time; the thread that finishes the last
 * chunk routes and groups the tokens and plans the rest, while the others
 * wait (a few microseconds at decode); then (fused_task) they take row
 * chunks of any
 * routed expert's gate and up (both from one quantization of the
 * expert's inputs), then of its down, then tokens to sum back. Experts
 * are ordinary views in their file's type (quantized ones in their own
 * blocks, packed at load like dense weights), run by llm_matmul_act.
 * Exact mode (and tests) run the unfused reference: three llm_matmul (or
 * llm_matmul_ref) calls per routed expert.
 *
 * defines: llm_moe_cpu_init, llm_moe_cpu_free, llm_moe_cpu_forward,
 *          llm_moe_cpu_experts, llm_moe_route, llm_moe_route_topk_softmax
 */
#include "activation.h"
#include "alloc.h"
#include "backend/moe_cpu.h"
#include "matmul.h"
#include "spinwait.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


/* a work item of the fused job (fused_task) */
enum { MOE_ACT, MOE_GU, MOE_DOWN, MOE_SUM };

struct llm_moe_item {
    int  kind;
    int  e;                  /* expert */
    int  r0, r1;             /* weight rows, or tokens (SUM) */
};


int
llm_moe_cpu_init(llm_moe_cpu *mc, const llm_config *cfg, int max_tokens,
    llm_threadpool *tp, int exact)
{
    size_t  n = (size_t) max_tokens, nk = n * cfg->n_expert_used;
    size_t  n_items = (size_t) cfg->n_expert
                      * (1 + (cfg->expert_ff + 15) / 16 + (cfg->dim + 15) / 16)
                      + 4 * (size_t) llm_threadpool_size(tp);

    memset(mc, 0, sizeof(*mc));
    mc->tp = tp;
    mc->exact = exact;
    mc->dim = cfg->dim;
    mc->n_expert = cfg->n_expert;
    mc->k = cfg->n_expert_used;
    mc->ff = cfg->expert_ff;
    mc->norm = cfg->expert_norm;
    mc->fused = 1;
    mc->topk_softmax = cfg->router_topk_softmax;
    mc->glu = cfg->swiglu_oai ? llm_swiglu_oai : llm_swiglu;
    mc->glu_ref = cfg->swiglu_oai ? llm_swiglu_oai_ref : llm_swiglu_ref;
    mc->logits = malloc(sizeof(float) * n * cfg->n_expert);
    mc->sel = malloc(sizeof(int32_t) * nk);
    mc->weight = malloc(sizeof(float) * nk);
    mc->pos = malloc(sizeof(int32_t) * nk);
    mc->count = malloc(sizeof(int32_t) * (cfg->n_expert + 1));
    mc->next = malloc(sizeof(int32_t) * cfg->n_expert);
    mc->xg = malloc(sizeof(float) * nk * cfg->dim);
    mc->g = malloc(sizeof(float) * nk * cfg->expert_ff);
    mc->u = malloc(sizeof(float) * nk * cfg->expert_ff);
    mc->y = malloc(sizeof(float) * nk * cfg->dim);
    mc->items = malloc(sizeof(struct llm_moe_item) * n_items);
    mc->act_g = malloc(sizeof(llm_act) * cfg->n_expert * 3);
    mc->off_g = malloc(sizeof(size_t) * cfg->n_expert * 3);
    mc->ready = malloc(sizeof(atomic_int) * cfg->n_expert * 2);
    if (mc->logits == NULL || mc->sel == NULL || mc->weight == NULL
        || mc->pos == NULL || mc->count == NULL || mc->next == NULL
        || mc->xg == NULL
        || mc->g == NULL || mc->u == NULL || mc->y == NULL
        || mc->items == NULL || mc->act_g == NULL || mc->off_g == NULL
        || mc->ready == NULL)
    {
        llm_moe_cpu_free(mc);
        return -1;
    }
    mc->act_u = mc->act_g + cfg->n_expert;
    mc->act_d = mc->act_u + cfg->n_expert;
    mc->off_u = mc->off_g + cfg->n_expert;
    mc->off_d = mc->off_u + cfg->n_expert;
    mc->pending = mc->ready + cfg->n_expert;
    return 0;
}


void
llm_moe_cpu_free(llm_moe_cpu *mc)
{
    free(mc->logits);
    free(mc->sel);
    free(mc->weight);
    free(mc->pos);
    free(mc->count);
    free(mc->next);
    free(mc->xg);
    free(mc->g);
    free(mc->u);
    free(mc->y);
    free(mc->items);
    free(mc->act_g);
    free(mc->off_g);
    free((void *) mc->ready);
    free(mc->abuf);
    free(mc->rbuf);
    memset(mc, 0, sizeof(*mc));
}


void
llm_moe_route(const float *logits, int n_expert, int k, int norm,
    int32_t *sel, float *weight)
{
    float  max = logits[0], sum = 0.0f, p, topsum = 0.0f;
    int    e, j, best;

    for (e = 1; e < n_expert; e++) {
        max = logits[e] > max ? logits[e] : max;
    }
    for (e = 0; e < n_expert; e++) {
        sum += expf(logits[e] - max);
    }
    /* selection by probability = by logit (softmax is monotone); the
     * weights are the probabilities themselves */
    for (j = 0; j < k; j++) {
        best = -1;
        for (e = 0; e < n_expert; e++) {
            int  taken = 0;

            for (int q = 0; q < j; q++) {
                taken |= sel[q] == e;
            }
            if (!taken && (best < 0 || logits[e] > logits[best])) {
                best = e;
            }
        }
        p = expf(logits[best] - max) / sum;
        sel[j] = best;
        weight[j] = p;
        topsum += p;
    }
    if (norm) {
        for (j = 0; j < k; j++) {
            weight[j] /= topsum;
        }
    }
}


void
llm_moe_route_topk_softmax(const float *logits, int n_expert, int k,
    int32_t *sel, float *weight)
{
    float  sum = 0.0f;
    int    e, j, best;

    for (j = 0; j < k; j++) {
        best = -1;
        for (e = 0; e < n_expert; e++) {
            int  taken = 0;

            for (int q = 0; q < j; q++) {
                taken |= sel[q] == e;
            }
            if (!taken && (best < 0 || logits[e] > logits[best])) {
                best = e;
            }
        }
        sel[j] = best;
    }
    /* sel[0] holds the largest logit: the softmax's max */
    for (j = 0; j < k; j++) {
        weight[j] = expf(logits[sel[j]] - logits[sel[0]]);
        sum += weight[j];
    }
    for (j = 0; j < k; j++) {
        weight[j] /= sum;
    }
}


/* pos[], count[] and xg from sel: tokens grouped by expert, in token order
 * within a group */
static void
group_tokens(llm_moe_cpu *mc, const float *xb, int n)
{
    int  t, j, e, k = mc->k;

    memset(mc->count, 0, sizeof(int32_t) * (mc->n_expert + 1));
    for (t = 0; t < n * k; t++) {
        mc->count[mc->sel[t] + 1]++;
    }
    for (e = 0; e < mc->n_expert; e++) {
        mc->count[e + 1] += mc->count[e];
    }
    /* count[e] is now expert e's first row; next[e] its next free one */
    memcpy(mc->next, mc->count, sizeof(int32_t) * mc->n_expert);
    for (t = 0; t < n; t++) {
        for (j = 0; j < k; j++) {
            int  row = mc->next[mc->sel[t * k + j]]++;

            mc->pos[t * k + j] = row;
            memcpy(mc->xg + (size_t) row * mc->dim,
                   xb + (size_t) t * mc->dim, sizeof(float) * mc->dim);
        }
    }
}


/* x[t] += sum_j weight[t][j] * y[pos[t][j]] for tokens t0..t1-1, each
 * element summed from zero in the token's top-k order */
static void
sum_tokens(llm_moe_cpu *mc, float *x, int t0, int t1)
{
    int     t, j, d, k = mc->k;
    size_t  dim = mc->dim;

    for (t = t0; t < t1; t++) {
        float  *xt = x + (size_t) t * dim;

        for (d = 0; d < (int) dim; d++) {
            float  s = 0.0f;

            for (j = 0; j < k; j++) {
                s += mc->weight[t * k + j]
                     * mc->y[(size_t) mc->pos[t * k + j] * dim + d];
            }
            xt[d] += s;
        }
    }
}


/* y(rows, ld) columns c0..c1 += b[c0..c1] (b NULL: none) */
static void
add_bias(float *y, size_t ld, int rows, const float *b, int c0, int c1)
{
    for (int r = 0; b != NULL && r < rows; r++) {
        for (int c = c0; c < c1; c++) {
            y[r * ld + c] += b[c];
        }
    }
}


/* --- unfused: three matmuls per routed expert (exact mode, tests) ------- */

static int
mm(llm_moe_cpu *mc, float *out, const float *x, int n, const llm_tensor *w)
{
    return mc->exact ? llm_matmul_ref(out, x, n, w)
                     : llm_matmul(mc->tp, out, x, n, w);
}


static int
experts_unfused(llm_moe_cpu *mc, const llm_moe_weights *ew)
{
    int     e, lo, rows, rc = 0;
    size_t  ff = mc->ff, dim = mc->dim;

    for (e = 0; e < mc->n_expert; e++) {
        lo = mc->count[e];
        rows = mc->count[e + 1] - lo;
        if (rows == 0) {
            continue;       /* only the experts some token was routed to */
        }
        rc |= mm(mc, mc->g + lo * ff, mc->xg + lo * dim, rows,
                 &ew->gate[e]);
        rc |= mm(mc, mc->u + lo * ff, mc->xg + lo * dim, rows,
                 &ew->up[e]);
        add_bias(mc->g + lo * ff, ff, rows,
                 ew->gate_b ? ew->gate_b + e * ff : NULL, 0, (int) ff);
        add_bias(mc->u + lo * ff, ff, rows,
                 ew->up_b ? ew->up_b + e * ff : NULL, 0, (int) ff);
        if (mc->exact) {
            mc->glu_ref(mc->g + lo * ff, mc->u + lo * ff, rows * ff);
        } else {
            mc->glu(mc->g + lo * ff, mc->u + lo * ff, rows * ff);
        }
        rc |= mm(mc, mc->y + lo * dim, mc->g + lo * ff, rows,
                 &ew->down[e]);
        add_bias(mc->y + lo * dim, dim, rows,
                 ew->down_b ? ew->down_b + e * dim : NULL, 0, (int) dim);
    }
    return rc;
}


/* --- fused: one pool job for every routed expert of the step ------------ */

/*
 * The job's work items, taken in this order from one counter:
 *   ACT e      quantize expert e's grouped inputs for its gate and up
 *   GU e r0 r1 gate and up rows r0..r1 of expert e over all its tokens,
 *              then the GLU on those columns; the item that finishes e's
 *              last GU quantizes e's hidden rows for its down projection
 *   DOWN e r0 r1  down rows (output features) r0..r1 of expert e
 *   SUM t0 t1  tokens t0..t1 summed back (sum_tokens), once every DOWN
 *              has finished
 * An item waits only for items before it in the order, which are already
 * taken by running threads, so the job cannot deadlock; the waits are
 * short (spin, then yield: llm_spin_relax). ready[e] is 1 once ACT e
 * is done, 2 once e's down activations are.
 */
static void
wait_at_least(atomic_int *a, int v)
{
    for (int i = 0; atomic_load_explicit(a, memory_order_acquire) < v; i++) {
        llm_spin_relax(i);
    }
}


static void
wait_zero(atomic_int *a)
{
    for (int i = 0; atomic_load_explicit(a, memory_order_acquire) != 0; i++)
    {
        llm_spin_relax(i);
    }
}


static void
item_gu(llm_moe_cpu *mc, const struct llm_moe_item *it)
{
    const llm_moe_weights  *ew = mc->ew;
    int                     e = it->e, lo = mc->count[e], t;
    int                     rows = mc->count[e + 1] - lo, nr = it->r1 - it->r0;
    size_t                  ff = mc->ff;
    float                  *g = mc->g + lo * ff + it->r0;
    float                  *u = mc->u + lo * ff + it->r0;
    llm_tensor              v;

    v = llm_tensor_rows(&ew->gate[e], it->r0, nr);
    llm_matmul_act(g, ff, &mc->act_g[e], &v);
    v = llm_tensor_rows(&ew->up[e], it->r0, nr);
    llm_matmul_act(u, ff, mc->off_u[e] == SIZE_MAX ? &mc->act_g[e]
                                                   : &mc->act_u[e], &v);
    if (ew->gate_b != NULL) {
        add_bias(g - it->r0, ff, rows, ew->gate_b + e * ff, it->r0, it->r1);
    }
    if (ew->up_b != NULL) {
        add_bias(u - it->r0, ff, rows, ew->up_b + e * ff, it->r0, it->r1);
    }
    for (t = 0; t < rows; t++) {
        mc->glu(g + t * ff, u + t * ff, nr);
    }
}


static void
fused_task(void *arg, int ith, int nth)
{
    llm_moe_cpu               *mc = arg;
    const llm_moe_weights     *ew = mc->ew;
    const struct llm_moe_item *it;
    int                        i, e, lo, rows;
    llm_tensor                 v;

    (void) ith;
    (void) nth;
    while ((i = atomic_fetch_add(&mc->next_item, 1)) < mc->n_items) {
        it = &mc->items[i];
        e = it->e;
        lo = mc->count[e];
        rows = mc->count[e + 1] - lo;
        switch (it->kind) {
        case MOE_ACT:
            llm_act_make(&mc->act_g[e], mc->abuf + mc->off_g[e],
                         mc->xg + lo * mc->dim, mc->dim, rows, &ew->gate[e]);
            if (mc->off_u[e] != SIZE_MAX) {
                llm_act_make(&mc->act_u[e], mc->abuf + mc->off_u[e],
                             mc->xg + lo * mc->dim, mc->dim, rows,
                             &ew->up[e]);
            }
            atomic_store_explicit(&mc->ready[e], 1, memory_order_release);
            break;
        case MOE_GU:
            wait_at_least(&mc->ready[e], 1);
            item_gu(mc, it);
            if (atomic_fetch_sub(&mc->pending[e], 1) == 1) {
                llm_act_make(&mc->act_d[e], mc->abuf + mc->off_d[e],
                             mc->g + lo * mc->ff, mc->ff, rows,
                             &ew->down[e]);
                atomic_store_explicit(&mc->ready[e], 2,
                                      memory_order_release);
            }
            break;
        case MOE_DOWN:
            wait_at_least(&mc->ready[e], 2);
            v = llm_tensor_rows(&ew->down[e], it->r0, it->r1 - it->r0);
            llm_matmul_act(mc->y + lo * mc->dim + it->r0, mc->dim,
                           &mc->act_d[e], &v);
            if (ew->down_b != NULL) {
                add_bias(mc->y + lo * mc->dim, mc->dim, rows,
                         ew->down_b + e * mc->dim, it->r0, it->r1);
            }
            atomic_fetch_sub(&mc->down_left, 1);
            break;
        default:
            wait_zero(&mc->down_left);
            sum_tokens(mc, mc->x_out, it->r0, it->r1);
        }
    }
}


/* rows per work item of a weight of `rows` rows: about four items per
 * thread over the step's n_used experts, in whole groups of 16 rows (the
 * packed layout's), at most the whole weight: decode's 8 experts on 2
 * threads take one item per expert (long runs for the prefetchers, as
 * backend_cpu.c's fused jobs) */
static int
item_rows(int rows, int n_used, int nth)
{
    long  c = ((long) rows * n_used + 4L * nth - 1) / (4L * nth);

    c = (c + LLM_PACK_ROWS - 1) / LLM_PACK_ROWS * LLM_PACK_ROWS;
    return c < rows ? (int) c : rows;
}


static size_t
align64(size_t n)
{
    return (n + 63) & ~(size_t) 63;
}


/* *buf holds at least size bytes (64-byte aligned; the old contents are
 * not kept); 0, or -1 when it cannot grow (*buf unchanged) */
static int
grow(uint8_t **buf, size_t *have, size_t size)
{
    uint8_t  *p;

    if (size <= *have) {
        return 0;
    }
    if ((p = llm_alloc_aligned(size)) == NULL) {
        return -1;
    }
    free(*buf);
    *buf = p;
    *have = size;
    return 0;
}


/* the job's items and activation offsets for the grouped step; 0, or -1
 * when the activation buffer cannot grow */
static int
fused_plan(llm_moe_cpu *mc, int n)
{
    const llm_moe_weights  *ew = mc->ew;
    int                     e, rows, r, n_used = 0, cg, cd, nth, per;
    size_t                  size = 0;
    struct llm_moe_item    *it = mc->items;

    nth = llm_threadpool_size(mc->tp);
    for (e = 0; e < mc->n_expert; e++) {
        n_used += mc->count[e + 1] > mc->count[e];
    }
    cg = item_rows(mc->ff, n_used, nth);
    cd = item_rows(mc->dim, n_used, nth);
    for (e = 0; e < mc->n_expert; e++) {
        rows = mc->count[e + 1] - mc->count[e];
        atomic_init(&mc->ready[e], 0);
        atomic_init(&mc->pending[e], 0);
        if (rows == 0) {
            continue;       /* only the experts some token was routed to */
        }
        mc->off_g[e] = size;
        size += align64(llm_act_size(&ew->gate[e], rows));
        mc->off_u[e] = SIZE_MAX;        /* up reads gate's activations */
        if (ew->up[e].type != ew->gate[e].type
            || ew->up[e].pack != ew->gate[e].pack)
        {
            mc->off_u[e] = size;
            size += align64(llm_act_size(&ew->up[e], rows));
        }
        mc->off_d[e] = size;
        size += align64(llm_act_size(&ew->down[e], rows));
        *it++ = (struct llm_moe_item) { MOE_ACT, e, 0, 0 };
    }
    for (e = 0; e < mc->n_expert; e++) {
        if (mc->count[e + 1] == mc->count[e]) {
            continue;
        }
        for (r = 0; r < mc->ff; r += cg) {
            *it++ = (struct llm_moe_item) { MOE_GU, e, r,
                                            r + cg < mc->ff ? r + cg : mc->ff };
            atomic_fetch_add(&mc->pending[e], 1);
        }
    }
    atomic_init(&mc->down_left, 0);
    for (e = 0; e < mc->n_expert; e++) {
        if (mc->count[e + 1] == mc->count[e]) {
            continue;
        }
        for (r = 0; r < mc->dim; r += cd) {
            *it++ = (struct llm_moe_item) { MOE_DOWN, e, r,
                                          r + cd < mc->dim ? r + cd : mc->dim };
            atomic_fetch_add(&mc->down_left, 1);
        }
    }
    per = (n + 4 * nth - 1) / (4 * nth);
    for (r = 0; r < n; r += per) {
        *it++ = (struct llm_moe_item) { MOE_SUM, 0, r,
                                        r + per < n ? r + per : n };
    }
    mc->n_items = (int) (it - mc->items);
    atomic_init(&mc->next_item, 0);
    return grow(&mc->abuf, &mc->abuf_size, size);
}


int
llm_moe_cpu_experts(llm_moe_cpu *mc, float *x, const float *xb, int n,
    const llm_moe_weights *ew)
{
    int  rc = 0;

    group_tokens(mc, xb, n);
    mc->ew = ew;
    mc->x_out = x;
    if (mc->exact || !mc->fused) {
        rc = experts_unfused(mc, ew);
        sum_tokens(mc, x, 0, n);
    } else if (fused_plan(mc, n) != 0) {
        rc = -1;                /* x untouched */
    } else {
        llm_threadpool_run(mc->tp, fused_task, mc);
    }
    return rc != 0 ? -1 : 0;
}


/* mc->sel, mc->weight from the router logits of tokens 0..n-1: the
 * router's bias (gpt-oss) added, then each token routed */
static void
route_tokens(llm_moe_cpu *mc, int n, const float *router_b)
{
    int  t, k = mc->k;

    add_bias(mc->logits, mc->n_expert, n, router_b, 0, mc->n_expert);
    for (t = 0; t < n; t++) {
        const float  *lt = mc->logits + (size_t) t * mc->n_expert;

        if (mc->topk_softmax) {
            llm_moe_route_topk_softmax(lt, mc->n_expert, k, mc->sel + t * k,
                                       mc->weight + t * k);
        } else {
            llm_moe_route(lt, mc->n_expert, k, mc->norm, mc->sel + t * k,
                          mc->weight + t * k);
        }
    }
}


/*
 * The fused step with its router: logits rows r0..r0+15 (expert
 * features) for all n tokens per item, the same bits as one llm_matmul
 * (output rows depend only on their inputs, row views change no bit).
 * The thread that finishes the last chunk routes, groups and plans (the
 * items then exist), and publishes `routed`; every thread then runs the
 * expert items. A failed plan publishes no items: x is untouched.
 */
static void
step_task(void *arg, int ith, int nth)
{
    llm_moe_cpu  *mc = arg;
    int           r0, nr;
    llm_tensor    v;

    while ((r0 = atomic_fetch_add(&mc->next_rrow, LLM_PACK_ROWS))
           < mc->n_expert)
    {
        nr = mc->n_expert - r0 < LLM_PACK_ROWS ? mc->n_expert - r0
                                               : LLM_PACK_ROWS;
        v = llm_tensor_rows(mc->router, r0, nr);
        llm_matmul_act(mc->logits + r0, mc->n_expert, &mc->act_r, &v);
        if (atomic_fetch_sub(&mc->router_left, 1) == 1) {
            route_tokens(mc, mc->n, mc->router_b);
            group_tokens(mc, mc->xb, mc->n);
            mc->plan_rc = fused_plan(mc, mc->n);
            if (mc->plan_rc != 0) {
                mc->n_items = 0;
            }
            atomic_store_explicit(&mc->routed, 1, memory_order_release);
        }
    }
    wait_at_least(&mc->routed, 1);
    fused_task(arg, ith, nth);
}


static int
forward_fused(llm_moe_cpu *mc, float *x, const float *xb, int n,
    const llm_layer *l, const llm_moe_weights *ew)
{
    if (grow(&mc->rbuf, &mc->rbuf_size, llm_act_size(&l->router, n)) != 0) {
        return -1;
    }
    llm_act_make(&mc->act_r, mc->rbuf, xb, mc->dim, n, &l->router);
    mc->router = &l->router;
    mc->router_b = l->router_b;
    mc->xb = xb;
    mc->n = n;
    mc->ew = ew;
    mc->x_out = x;
    mc->plan_rc = 0;
    atomic_init(&mc->next_rrow, 0);
    atomic_init(&mc->router_left,
                (mc->n_expert + LLM_PACK_ROWS - 1) / LLM_PACK_ROWS);
    atomic_init(&mc->routed, 0);
    llm_threadpool_run(mc->tp, step_task, mc);
    return mc->plan_rc;
}


int
llm_moe_cpu_forward(llm_moe_cpu *mc, float *x, const float *xb, int n,
    const llm_layer *l)
{
    llm_moe_weights  ew = { l->exp_gate, l->exp_up, l->exp_down,
                            l->exp_gate_b, l->exp_up_b, l->exp_down_b };

    if (!mc->exact && mc->fused) {
        return forward_fused(mc, x, xb, n, l, &ew);
    }
    if (mm(mc, mc->logits, xb, n, &l->router) != 0) {
        return -1;
    }
    route_tokens(mc, n, l->router_b);
    return llm_moe_cpu_experts(mc, x, xb, n, &ew);
}
