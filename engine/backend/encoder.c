/*
 * The encoder forward and its batcher backend (encoder.h).
 *
 * defines: llm_encoder_forward, llm_encoder_score, llm_encoder_pair,
 *          llm_backend_encoder_create
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activation.h"
#include "backend/encoder.h"
#include "matmul.h"
#include "model/bert.h"
#include "model/pool.h"
#include "model/score.h"
#include "norm.h"
#include "quant.h"
#include "rope.h"


/* scratch of one forward of n tokens */
typedef struct {
    float  *q, *k, *v;     /* (n, dim) */
    float  *att;           /* (n, dim) */
    float  *t;             /* (n, dim) */
    float  *up, *gate;     /* (n, hidden_dim) */
    float  *score;         /* (threads, max_len) one row of scores a
                              thread */
    float  *cs, *sn;       /* (max_len, head_dim/2) nomic-bert's angles */
} enc_scratch;


static void
scratch_free(enc_scratch *s)
{
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->att);
    free(s->t);
    free(s->up);
    free(s->gate);
    free(s->score);
    free(s->cs);
    free(s->sn);
}


static int
scratch_alloc(enc_scratch *s, const llm_config *c, int n, int max_len,
    int threads)
{
    size_t  nd = (size_t) n * c->dim, nh = (size_t) n * c->hidden_dim;
    size_t  na = (size_t) max_len * c->head_dim / 2 + 1;

    memset(s, 0, sizeof(*s));
    s->q = malloc(nd * sizeof(float));
    s->k = malloc(nd * sizeof(float));
    s->v = malloc(nd * sizeof(float));
    s->att = malloc(nd * sizeof(float));
    s->t = malloc(nd * sizeof(float));
    s->up = malloc(nh * sizeof(float));
    s->gate = malloc(nh * sizeof(float));
    s->score = malloc((size_t) threads * max_len * sizeof(float));
    s->cs = malloc(na * sizeof(float));
    s->sn = malloc(na * sizeof(float));
    if (!s->q || !s->k || !s->v || !s->att || !s->t || !s->up || !s->gate
        || !s->score || !s->cs || !s->sn)
    {
        scratch_free(s);
        return -1;
    }
    return 0;
}


/* out(n, rows) = x(n, cols) W^T + b (b may be NULL) */
static int
linear(llm_threadpool *tp, float *out, const float *x, int n,
    const llm_tensor *w, const float *b)
{
    int  i, r;

    if (llm_matmul(tp, out, x, n, w) != 0) {
        return -1;
    }
    for (i = 0; b != NULL && i < n; i++) {
        for (r = 0; r < w->rows; r++) {
            out[(size_t) i * w->rows + r] += b[r];
        }
    }
    return 0;
}


/* a row of a (rows, dim) table, any weight type, added into x */
static void
add_row(float *x, const llm_tensor *t, int row, float *tmp, int dim)
{
    int  i;

    llm_dequant_row(t->type, (const uint8_t *) t->data
                             + (size_t) row * t->row_stride, tmp, dim);
    for (i = 0; i < dim; i++) {
        x[i] += tmp[i];
    }
}


/* x (n, dim): the embeddings of the sequences' tokens, positions from 0
   at each sequence's start (start: (n_seqs + 1) token offsets) */
static void
embed(const llm_model *m, const int32_t *ids, const int32_t *types,
    const int *start, int n_seqs, float *x, float *tmp)
{
    const llm_config  *c = &m->cfg;
    const llm_bert    *b = m->bert;
    int                s, i, d = c->dim;
    float             *row;

    for (s = 0; s < n_seqs; s++) {
        for (i = start[s]; i < start[s + 1]; i++) {
            row = x + (size_t) i * d;
            memset(row, 0, d * sizeof(float));
            add_row(row, &m->tok_embd, ids[i], tmp, d);
            if (b->n_types > 0) {
                add_row(row, &b->type_embd, types ? types[i] : 0, tmp, d);
            }
            if (b->pos_embd.data != NULL) {
                add_row(row, &b->pos_embd, i - start[s], tmp, d);
            }
            llm_layernorm(row, row, b->embd_norm_w, b->embd_norm_b, d,
                          c->norm_eps);
        }
    }
}


/* nomic-bert: cos and sin of each position's angles, as transformers
   (float position times float inv_freq) */
static void
rope_angles(const llm_model *m, int n, float *cs, float *sn)
{
    int    half = m->cfg.head_dim / 2, p, i;
    float  inv[512], a;

    llm_model_rope_inv_freq(m, inv);
    for (p = 0; p < n; p++) {
        for (i = 0; i < half; i++) {
            a = (float) p * inv[i];
            cs[(size_t) p * half + i] = cosf(a);
            sn[(size_t) p * half + i] = sinf(a);
        }
    }
}


/* one query row of one head: att[i, h] = softmax(q_i k^T * scale) v over
   the keys lo..hi-1 of its own sequence, the scores in score, summed in
   index order */
static void
attention_row(const llm_config *c, const enc_scratch *s, int lo, int hi,
    int i, int h, float *score)
{
    int           j, e, hd = c->head_dim, d = c->dim;
    float         mx = -INFINITY, sum, p, *o;
    const float  *qi = s->q + (size_t) i * d + h * hd, *kj, *vj;

    for (j = lo; j < hi; j++) {
        kj = s->k + (size_t) j * d + h * hd;
        sum = 0.0f;
        for (e = 0; e < hd; e++) {
            sum += qi[e] * kj[e];
        }
        score[j - lo] = sum * c->att_scale;
        mx = score[j - lo] > mx ? score[j - lo] : mx;
    }
    sum = 0.0f;
    for (j = 0; j < hi - lo; j++) {
        score[j] = expf(score[j] - mx);
        sum += score[j];
    }
    o = s->att + (size_t) i * d + h * hd;
    memset(o, 0, hd * sizeof(float));
    for (j = lo; j < hi; j++) {
        vj = s->v + (size_t) j * d + h * hd;
        p = score[j - lo] / sum;
        for (e = 0; e < hd; e++) {
            o[e] += p * vj[e];
        }
    }
}


typedef struct {
    const llm_config   *c;
    const enc_scratch  *s;
    const int          *seq;       /* (n) each token's sequence */
    const int          *start;     /* (n_seqs + 1) */
    int                 n;
    int                 max_len;
} att_job;


/* thread ith of nth takes rows ith, ith + nth, ...: a row's sums do not
   depend on which thread runs it nor on the other sequences */
static void
attention_task(void *arg, int ith, int nth)
{
    att_job  *j = arg;
    float    *score = j->s->score + (size_t) ith * j->max_len;
    int       r, i, rows = j->n * j->c->n_heads;

    for (r = ith; r < rows; r += nth) {
        i = r / j->c->n_heads;
        attention_row(j->c, j->s, j->start[j->seq[i]],
                      j->start[j->seq[i] + 1], i, r % j->c->n_heads, score);
    }
}


/* att(n, dim) = softmax(q k^T * scale) v, every head, each token over
   its own sequence */
static void
attention(llm_threadpool *tp, const llm_config *c, const enc_scratch *s,
    const int *seq, const int *start, int n, int max_len)
{
    att_job  j = { c, s, seq, start, n, max_len };

    if (tp == NULL) {
        attention_task(&j, 0, 1);
        return;
    }
    llm_threadpool_run(tp, attention_task, &j);
}


/* x = LN(x + y) row by row */
static void
add_norm(float *x, const float *y, int n, int d, const float *w,
    const float *b, float eps)
{
    size_t  i, k;

    for (i = 0; i < (size_t) n; i++) {
        for (k = 0; k < (size_t) d; k++) {
            x[i * d + k] += y[i * d + k];
        }
        llm_layernorm(x + i * d, x + i * d, w, b, d, eps);
    }
}


/* one layer over every token of the step's sequences (pos: (n) each
   token's position, seq: its sequence) */
static int
layer(const llm_model *m, llm_threadpool *tp, const llm_bert_layer *l,
    float *x, int n, const int *pos, const int *seq, const int *start,
    int max_len, enc_scratch *s)
{
    const llm_config  *c = &m->cfg;
    int                i, h, hd = c->head_dim, d = c->dim;
    size_t             nh = (size_t) n * c->hidden_dim, a;

    if (linear(tp, s->q, x, n, &l->wq, l->bq) || linear(tp, s->k, x, n,
                                                         &l->wk, l->bk)
        || linear(tp, s->v, x, n, &l->wv, l->bv))
    {
        return -1;
    }
    if (c->nomic) {
        for (i = 0; i < n; i++) {
            a = (size_t) pos[i] * (hd / 2);
            for (h = 0; h < c->n_heads; h++) {
                llm_rope_head(s->q + (size_t) i * d + h * hd, s->cs + a,
                              s->sn + a, hd, 1);
                llm_rope_head(s->k + (size_t) i * d + h * hd, s->cs + a,
                              s->sn + a, hd, 1);
            }
        }
    }
    attention(tp, c, s, seq, start, n, max_len);
    if (linear(tp, s->t, s->att, n, &l->wo, l->bo) != 0) {
        return -1;
    }
    add_norm(x, s->t, n, d, l->attn_norm_w, l->attn_norm_b, c->norm_eps);
    if (linear(tp, s->up, x, n, &l->up, l->up_b) != 0) {
        return -1;
    }
    if (c->nomic) {
        if (linear(tp, s->gate, x, n, &l->gate, NULL) != 0) {
            return -1;
        }
        llm_swiglu(s->gate, s->up, nh);
    } else {
        llm_gelu_erf(s->up, nh);
        memcpy(s->gate, s->up, nh * sizeof(float));
    }
    if (linear(tp, s->t, s->gate, n, &l->down, l->down_b) != 0) {
        return -1;
    }
    add_norm(x, s->t, n, d, l->out_norm_w, l->out_norm_b, c->norm_eps);
    return 0;
}


static int
check_input(const llm_model *m, const int32_t *ids, const int32_t *types,
    int n, char *err, size_t err_len)
{
    const llm_config  *c = &m->cfg;
    int                i;

    if (!c->encoder || m->bert == NULL) {
        snprintf(err, err_len, "the model is not an encoder");
        return -1;
    }
    if (n < 1 || n > c->max_seq_len) {
        snprintf(err, err_len, "an encoder input of %d tokens (1..%d)", n,
                 c->max_seq_len);
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= c->vocab_size) {
            snprintf(err, err_len, "token %d: id %d outside the vocabulary "
                     "of %d", i, ids[i], c->vocab_size);
            return -1;
        }
        if (types != NULL && (types[i] < 0
                              || types[i] >= (m->bert->n_types
                                              ? m->bert->n_types : 1)))
        {
            snprintf(err, err_len, "token %d: type %d outside 0..%d", i,
                     types[i], m->bert->n_types - 1);
            return -1;
        }
    }
    return 0;
}


/*
 * The forward of n_seqs sequences in one pass: their tokens back to back
 * (start: (n_seqs + 1) offsets), hidden (start[n_seqs], dim). The
 * matmuls take every token at once (a row's sums do not depend on the
 * other rows: kernels/matmul.h), attention and positions stay within a
 * sequence, so each sequence's states equal its forward alone.
 */
static int
encoder_forward_seqs(const llm_model *m, llm_threadpool *tp,
    const int32_t *ids, const int32_t *types, const int *start, int n_seqs,
    float *hidden, char *err, size_t err_len)
{
    enc_scratch  s;
    int          i, k, rc = 0, n = start[n_seqs], max_len = 1;
    int         *pos, *seq;

    for (k = 0; k < n_seqs; k++) {
        if (check_input(m, ids + start[k], types ? types + start[k] : NULL,
                        start[k + 1] - start[k], err, err_len) != 0)
        {
            return -1;
        }
        if (start[k + 1] - start[k] > max_len) {
            max_len = start[k + 1] - start[k];
        }
    }
    pos = malloc((size_t) n * sizeof(int));
    seq = malloc((size_t) n * sizeof(int));
    if (pos == NULL || seq == NULL
        || scratch_alloc(&s, &m->cfg, n, max_len,
                         llm_threadpool_size(tp)) != 0)
    {
        free(pos);
        free(seq);
        snprintf(err, err_len, "out of memory for an encoder input of %d "
                 "tokens", n);
        return -1;
    }
    for (k = 0; k < n_seqs; k++) {
        for (i = start[k]; i < start[k + 1]; i++) {
            pos[i] = i - start[k];
            seq[i] = k;
        }
    }
    embed(m, ids, types, start, n_seqs, hidden, s.t);
    if (m->cfg.nomic) {
        rope_angles(m, max_len, s.cs, s.sn);
    }
    for (i = 0; i < m->cfg.n_layers && rc == 0; i++) {
        rc = layer(m, tp, &m->bert->layers[i], hidden, n, pos, seq, start,
                   max_len, &s);
    }
    scratch_free(&s);
    free(pos);
    free(seq);
    if (rc != 0) {
        snprintf(err, err_len, "out of memory for the activations");
    }
    return rc;
}


int
llm_encoder_forward(const llm_model *m, llm_threadpool *tp,
    const int32_t *ids, const int32_t *types, int n, float *hidden,
    char *err, size_t err_len)
{
    int  start[2] = { 0, n };

    if (check_input(m, ids, types, n, err, err_len) != 0) {
        return -1;
    }
    return encoder_forward_seqs(m, tp, ids, types, start, 1, hidden, err,
                                err_len);
}


int
llm_encoder_score(const llm_model *m, llm_threadpool *tp,
    const int32_t *ids, const int32_t *types, int n, float *logit,
    char *err, size_t err_len)
{
    float  *h;
    int     rc = -1;

    if (m->cfg.score != LLM_SCORE_CLASSIFIER || m->score_head == NULL) {
        snprintf(err, err_len, "the model is not a cross-encoder (no "
                 "classifier head)");
        return -1;
    }
    if (n < 1 || n > m->cfg.max_seq_len) {
        return check_input(m, ids, types, n, err, err_len);
    }
    h = malloc((size_t) n * m->cfg.dim * sizeof(float));
    if (h == NULL) {
        snprintf(err, err_len, "out of memory");
    } else if (llm_encoder_forward(m, tp, ids, types, n, h, err, err_len)
               == 0)
    {
        /* the head the batcher's score runs (model/score.h) on [CLS] */
        rc = m->score_head(m, h, logit);
        if (rc != 0) {
            snprintf(err, err_len, "the score head failed");
        }
    }
    free(h);
    return rc;
}


int
llm_encoder_pair(int32_t cls, int32_t sep, const int32_t *q, int nq,
    const int32_t *d, int nd, int32_t *ids, int32_t *types, int max)
{
    int  n = 0, i;

#define PUT(id, type) do {                                                   \
        if (n < max) { ids[n] = (id); types[n] = (type); }                   \
        n++;                                                                 \
    } while (0)
    PUT(cls, 0);
    for (i = 0; i < nq; i++) {
        PUT(q[i], 0);
    }
    PUT(sep, 0);
    for (i = 0; i < nd; i++) {
        PUT(d[i], 1);
    }
    PUT(sep, 1);
#undef PUT
    return n;
}


/* ---------------------------------------------------------------------------
 * the batcher's backend
 */

typedef struct {
    llm_threadpool  *tp;
    int32_t         *ids;      /* (max_batch_tokens) the sequences' ids
                                  back to back */
    int32_t         *types;    /* (max_batch_tokens) and token types */
    int32_t         *where;    /* (max_batch_tokens) their batch indices */
    int             *start;    /* (max_batch_tokens + 1) each sequence's
                                  first token in ids */
    int32_t         *row;      /* (max_batch_tokens) batch index -> its
                                  hidden row, or -1 */
    float           *hidden;   /* (max_batch_tokens, dim) */
} enc_ctx;


static int
enc_fail(llm_backend *be, const char *fmt, const char *what, int a, int b)
{
    snprintf(be->err, sizeof(be->err), fmt, what, a, b);
    return -1;
}


/* sequence s's tokens into ids from *k on: positions 0..n-1 in batch
   order */
static int
enc_gather(llm_backend *be, const llm_batch *b, int s, int *k)
{
    enc_ctx  *c = be->ctx;
    int       i, p = 0;

    for (i = 0; i < b->n_tokens; i++) {
        if (b->seq[i] != s) {
            continue;
        }
        if (b->pos[i] != p) {
            return enc_fail(be, "%s: sequence %d has position %d where the "
                            "input's next is expected (an encoder's input "
                            "is one forward)", "encoder", s, b->pos[i]);
        }
        c->ids[*k] = b->token[i];
        c->types[*k] = b->type != NULL ? b->type[i] : 0;
        c->where[(*k)++] = i;
        p++;
    }
    return 0;
}


/* every sequence of the batch in one forward (encoder_forward_seqs) */
static int
enc_forward(llm_backend *be, const llm_batch *b)
{
    enc_ctx   *c = be->ctx;
    int        s, i, k = 0, n_seqs = 0, d = be->model->cfg.dim;
    char       err[256];

    if (b->n_tokens < 0 || b->n_tokens > be->opt.max_batch_tokens
        || b->n_logits != 0 || b->n_hidden < 0
        || b->n_hidden > b->n_tokens || (b->n_hidden > 0 && !b->hidden))
    {
        return enc_fail(be, "%s: a batch of %d tokens with %d logit rows "
                        "(an encoder gives hidden states only)", "encoder",
                        b->n_tokens, b->n_logits);
    }
    for (i = 0; i < b->n_tokens; i++) {
        c->row[i] = -1;
        if (b->seq[i] < 0 || b->seq[i] >= b->n_seqs) {
            return enc_fail(be, "%s: token %d of sequence %d", "encoder", i,
                            b->seq[i]);
        }
    }
    for (i = 0; i < b->n_hidden; i++) {
        if (b->hidden_idx[i] < 0 || b->hidden_idx[i] >= b->n_tokens) {
            return enc_fail(be, "%s: hidden row %d at token %d", "encoder",
                            i, b->hidden_idx[i]);
        }
        c->row[b->hidden_idx[i]] = i;
    }
    c->start[0] = 0;
    for (s = 0; s < b->n_seqs; s++) {
        if (enc_gather(be, b, s, &k) != 0) {
            return -1;
        }
        if (k > c->start[n_seqs]) {
            c->start[++n_seqs] = k;
        }
    }
    if (k == 0) {
        return 0;
    }
    if (encoder_forward_seqs(be->model, c->tp, c->ids, c->types, c->start,
                             n_seqs, c->hidden, err, sizeof(err)) != 0)
    {
        snprintf(be->err, sizeof(be->err), "encoder: %s", err);
        return -1;
    }
    for (s = 0; s < k; s++) {
        i = c->row[c->where[s]];
        if (i >= 0) {
            memcpy(b->hidden + (size_t) i * d, c->hidden + (size_t) s * d,
                   d * sizeof(float));
        }
    }
    return 0;
}


static void
enc_free(llm_backend *be)
{
    enc_ctx  *c = be->ctx;

    if (c != NULL) {
        llm_threadpool_free(c->tp);
        free(c->ids);
        free(c->types);
        free(c->where);
        free(c->start);
        free(c->row);
        free(c->hidden);
        free(c);
    }
    free(be);
}


static void
enc_usage(llm_backend *be, llm_backend_usage *u)
{
    enc_ctx  *c = be->ctx;

    u->busy_ns = llm_threadpool_busy_ns(c->tp);
    u->n_threads = llm_threadpool_size(c->tp);
}


llm_backend *
llm_backend_encoder_create(const llm_model *m, const llm_backend_options *o,
    char *err, size_t err_len)
{
    llm_backend  *be;
    enc_ctx      *c;
    size_t        n = (size_t) o->max_batch_tokens;

    if (m->bert == NULL || !m->cfg.encoder) {
        snprintf(err, err_len, "encoder backend: the model is not an "
                 "encoder");
        return NULL;
    }
    be = calloc(1, sizeof(*be));
    c = calloc(1, sizeof(*c));
    if (be == NULL || c == NULL) {
        free(be);
        free(c);
        snprintf(err, err_len, "encoder backend: out of memory");
        return NULL;
    }
    be->iface.name = "cpu";
    be->iface.forward = enc_forward;
    be->iface.free = enc_free;
    be->iface.usage = enc_usage;
    be->model = m;
    be->opt = *o;
    be->ctx = c;
    c->tp = o->n_threads > 1 ? llm_threadpool_create(o->n_threads) : NULL;
    c->ids = malloc(n * sizeof(int32_t));
    c->types = malloc(n * sizeof(int32_t));
    c->where = malloc(n * sizeof(int32_t));
    c->start = malloc((n + 1) * sizeof(int));
    c->row = malloc(n * sizeof(int32_t));
    c->hidden = malloc(n * m->cfg.dim * sizeof(float));
    if ((o->n_threads > 1 && c->tp == NULL) || !c->ids || !c->types
        || !c->where || !c->start || !c->row || !c->hidden)
    {
        enc_free(be);
        snprintf(err, err_len, "encoder backend: out of memory for %zu "
                 "tokens", n);
        return NULL;
    }
    return be;
}
