/*
 * Mixture-of-experts FFN on the CPU (moe_cpu.h for the contract and why a
 * token's result does not depend on its batch). One step:
 *
 *   logits = xb @ router^T                              (n, n_expert)
 *   (gpt-oss: + router bias)
 *   per token: softmax, top-k -> sel (n, k), weight (n, k)
 *              (gpt-oss: top-k of the logits, softmax over those k)
 *   group: count tokens per expert, prefix offsets; row pos[t][j] of the
 *          grouped input xg holds xb[t] for expert sel[t][j] (tokens in
 *          order within a group)
 *   per expert e with rows:  g, u = xg_e @ gate_e^T, xg_e @ up_e^T
 *                            y_e  = (silu(g) * u) @ down_e^T
 *     (gpt-oss: + the expert's biases after each matmul, and the clamped
 *      SwiGLU (up + 1) * g * sigmoid(1.702 g) of llm_swiglu_oai)
 *   per token: x[t] += sum_j weight[t][j] * y[pos[t][j]]  (j in top-k order)
 *
 * Experts are ordinary views in their file's type (quantized ones in
 * their own blocks, packed at load like dense weights), so llm_matmul
 * runs them. Fused MoE kernels (one pool job over all experts) are left.
 *
 * defines: llm_moe_cpu_init, llm_moe_cpu_free, llm_moe_cpu_forward,
 *          llm_moe_route, llm_moe_route_topk_softmax
 */
#include "activation.h"
#include "alloc.h"
#include "backend/moe_cpu.h"
#include "matmul.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


int
llm_moe_cpu_init(llm_moe_cpu *mc, const llm_config *cfg, int max_tokens,
    llm_threadpool *tp, int exact)
{
    size_t  n = (size_t) max_tokens, nk = n * cfg->n_expert_used;

    memset(mc, 0, sizeof(*mc));
    mc->tp = tp;
    mc->exact = exact;
    mc->dim = cfg->dim;
    mc->n_expert = cfg->n_expert;
    mc->k = cfg->n_expert_used;
    mc->ff = cfg->expert_ff;
    mc->norm = cfg->expert_norm;
    mc->topk_softmax = cfg->router_topk_softmax;
    mc->swiglu_oai = cfg->swiglu_oai;
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
    mc->acc = malloc(sizeof(float) * cfg->dim);
    if (mc->logits == NULL || mc->sel == NULL || mc->weight == NULL
        || mc->pos == NULL || mc->count == NULL || mc->next == NULL
        || mc->xg == NULL
        || mc->g == NULL || mc->u == NULL || mc->y == NULL
        || mc->acc == NULL)
    {
        llm_moe_cpu_free(mc);
        return -1;
    }
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
    free(mc->acc);
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


static int
mm(llm_moe_cpu *mc, float *out, const float *x, int n, const llm_tensor *w)
{
    return mc->exact ? llm_matmul_ref(out, x, n, w)
                     : llm_matmul(mc->tp, out, x, n, w);
}


/* gpt-oss's biases: y(rows, n) += b(n) on every row (b NULL: none) */
static void
add_bias(float *y, const float *b, int rows, size_t n)
{
    size_t  i;
    int     r;

    for (r = 0; b != NULL && r < rows; r++) {
        for (i = 0; i < n; i++) {
            y[r * n + i] += b[i];
        }
    }
}


/* gate = act(gate, up) over n: SwiGLU, or gpt-oss's clamped one */
static void
activate(const llm_moe_cpu *mc, float *g, const float *u, size_t n)
{
    if (mc->swiglu_oai) {
        (mc->exact ? llm_swiglu_oai_ref : llm_swiglu_oai)(g, u, n);
    } else {
        (mc->exact ? llm_swiglu_ref : llm_swiglu)(g, u, n);
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


int
llm_moe_cpu_forward(llm_moe_cpu *mc, float *x, const float *xb, int n,
    const llm_layer *l)
{
    int     t, j, e, d, rc = 0, lo, rows, k = mc->k;
    size_t  ff = mc->ff, dim = mc->dim;

    rc |= mm(mc, mc->logits, xb, n, &l->router);
    add_bias(mc->logits, l->router_b, n, mc->n_expert);
    for (t = 0; t < n; t++) {
        const float *lt = mc->logits + (size_t) t * mc->n_expert;

        if (mc->topk_softmax) {
            llm_moe_route_topk_softmax(lt, mc->n_expert, k,
                                       mc->sel + t * k, mc->weight + t * k);
        } else {
            llm_moe_route(lt, mc->n_expert, k, mc->norm, mc->sel + t * k,
                          mc->weight + t * k);
        }
    }
    group_tokens(mc, xb, n);

    for (e = 0; e < mc->n_expert; e++) {
        lo = mc->count[e];
        rows = mc->count[e + 1] - lo;
        if (rows == 0) {
            continue;       /* only the experts some token was routed to */
        }
        rc |= mm(mc, mc->g + lo * ff, mc->xg + lo * dim, rows,
                 &l->exp_gate[e]);
        rc |= mm(mc, mc->u + lo * ff, mc->xg + lo * dim, rows,
                 &l->exp_up[e]);
        if (l->exp_gate_b != NULL) {
            add_bias(mc->g + lo * ff, l->exp_gate_b + e * ff, rows, ff);
            add_bias(mc->u + lo * ff, l->exp_up_b + e * ff, rows, ff);
        }
        activate(mc, mc->g + lo * ff, mc->u + lo * ff, rows * ff);
        rc |= mm(mc, mc->y + lo * dim, mc->g + lo * ff, rows,
                 &l->exp_down[e]);
        if (l->exp_down_b != NULL) {
            add_bias(mc->y + lo * dim, l->exp_down_b + e * dim, rows, dim);
        }
    }

    for (t = 0; t < n; t++) {
        float  *xt = x + (size_t) t * dim;

        memset(mc->acc, 0, sizeof(float) * dim);
        for (j = 0; j < k; j++) {
            const float  *yj = mc->y + (size_t) mc->pos[t * k + j] * dim;
            float         w = mc->weight[t * k + j];

            for (d = 0; d < (int) dim; d++) {
                mc->acc[d] += w * yj[d];
            }
        }
        for (d = 0; d < (int) dim; d++) {
            xt[d] += mc->acc[d];
        }
    }
    return rc != 0 ? -1 : 0;
}
