/*
 * Tensor parallelism: the reduction plan and the rank group (see tp.h).
 *
 * The group's synchronisation is two counters, as in the kernels' thread
 * pool: `gen` publishes a step to the rank threads, `phase` ends a
 * barrier. Waiters use the pool's llm_wait_change (kernels/spinwait.h):
 * spin briefly, then yield (the machine may have fewer cores than ranks x
 * threads), then sleep on a futex after announcing it, so a wake-up is
 * never lost.
 *
 * defines: llm_tp_slices, llm_tp_check, llm_tp_sum_slices,
 *          llm_tp_load_rank, llm_tp_group_create, llm_tp_group_run,
 *          llm_tp_barrier, llm_tp_group_size, llm_tp_group_free
 */
#include "spinwait.h"
#include "model/tp.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---------------------------------------------------------------------------
 * the reduction plan
 */

/* can every layer's wo and ffn_down be cut into s slices of whole blocks? */
static int
slices_fit(const llm_model *m, int s)
{
    const llm_config  *c = &m->cfg;
    int                q_dim = c->n_heads * c->head_dim, i;
    uint32_t           bo, bd;

    if (c->n_kv_heads % s != 0 || q_dim % s != 0 || c->hidden_dim % s != 0) {
        return 0;
    }
    for (i = 0; i < c->n_layers; i++) {
        bo = ggml_type_block(m->layers[i].wo.type);
        bd = ggml_type_block(m->layers[i].w_down.type);
        if (bo == 0 || bd == 0 || (q_dim / s) % bo != 0
            || (c->hidden_dim / s) % bd != 0)
        {
            return 0;
        }
    }
    return 1;
}


int
llm_tp_slices(const llm_model *m)
{
    int  s;

    for (s = m->cfg.n_kv_heads; s > 1; s--) {
        if (s <= LLM_TP_MAX_SLICES && slices_fit(m, s)) {
            return s;
        }
    }
    return 1;
}


int
llm_tp_check(const llm_model *m, int tp_size, char *err, size_t err_len)
{
    int  s = llm_tp_slices(m);

    if (tp_size >= 1 && s % tp_size == 0) {
        return 0;
    }
    snprintf(err, err_len, "tensor parallel size %d: this model's row-split "
             "matmuls (attn_output %s, ffn_down %s) are summed from %d "
             "slices (%d KV heads), so only a divisor of %d can reproduce "
             "tensor parallel size 1", tp_size,
             ggml_type_name(m->layers[0].wo.type),
             ggml_type_name(m->layers[0].w_down.type), s, m->cfg.n_kv_heads,
             s);
    return -1;
}


#define SUM_CHUNK  256

void
llm_tp_sum_slices(float *x, const float *const *slot, int n_slices,
    size_t lo, size_t hi)
{
    float   acc[SUM_CHUNK];
    size_t  i, j, n;
    int     s;

    /* chunked so each pass is a plain elementwise loop the compiler can
     * vectorize; lanes never mix, so the order per element is fixed */
    for (i = lo; i < hi; i += n) {
        n = hi - i < SUM_CHUNK ? hi - i : SUM_CHUNK;
        memcpy(acc, slot[0] + i, n * sizeof(float));
        for (s = 1; s < n_slices; s++) {
            for (j = 0; j < n; j++) {
                acc[j] += slot[s][i + j];
            }
        }
        for (j = 0; j < n; j++) {
            x[i + j] += acc[j];
        }
    }
}


int
llm_tp_load_rank(llm_model *dst, const llm_model *rank0, int rank)
{
    const gguf_file  *g = &rank0->gguf;

    if (g->fd >= 0) {
        return llm_model_load_fd(dst, g->fd, rank0->path, rank,
                                 rank0->tp_size);
    }
    /* a GGUF opened by path, or a Hugging Face directory (whose
     * descriptor the loader does not keep) */
    return llm_model_load(dst, rank0->path, rank, rank0->tp_size);
}


/* ---------------------------------------------------------------------------
 * the rank group
 */

/* the waits spin about 50-100 us before sleeping (spinwait.h): a
 * barrier's wait is a few matmuls long, the wait for a step much longer */
struct llm_tp_group {
    int               n_ranks;        /* including the caller */
    int               n_started;      /* rank threads running */
    pthread_t        *threads;        /* (n_ranks - 1) */
    llm_tp_rank_fn    fn;
    void             *arg;
    atomic_uint       gen;            /* step generation */
    atomic_int        gen_sleepers;
    atomic_int        stop;
    atomic_int        arrived;        /* ranks inside the current barrier */
    atomic_uint       phase;          /* barriers completed */
    atomic_int        phase_sleepers;
};

typedef struct {
    llm_tp_group  *g;
    int            rank;
} rank_arg;


void
llm_tp_barrier(llm_tp_group *g)
{
    unsigned  ph;

    if (g == NULL || g->n_ranks == 1) {
        return;
    }
    ph = atomic_load(&g->phase);
    if (atomic_fetch_add(&g->arrived, 1) == g->n_ranks - 1) {
        /* the last to arrive: nobody re-enters before phase moves on */
        atomic_store(&g->arrived, 0);
        llm_wake_bump(&g->phase, &g->phase_sleepers);
        return;
    }
    llm_wait_change(&g->phase, ph, &g->phase_sleepers);
}


static void *
rank_main(void *p)
{
    rank_arg      *a = p;
    llm_tp_group  *g = a->g;
    int            rank = a->rank;
    unsigned       seen = 0;

    free(a);
    for ( ;; ) {
        seen = llm_wait_change(&g->gen, seen, &g->gen_sleepers);
        if (atomic_load(&g->stop)) {
            return NULL;
        }
        g->fn(g->arg, rank, g->n_ranks);
        llm_tp_barrier(g);
    }
}


void
llm_tp_group_run(llm_tp_group *g, llm_tp_rank_fn fn, void *arg)
{
    if (g == NULL || g->n_ranks == 1) {
        fn(arg, 0, 1);
        return;
    }
    g->fn = fn;
    g->arg = arg;
    llm_wake_bump(&g->gen, &g->gen_sleepers);
    fn(arg, 0, g->n_ranks);
    llm_tp_barrier(g);          /* every rank has returned */
}


int
llm_tp_group_size(const llm_tp_group *g)
{
    return g != NULL ? g->n_ranks : 1;
}


void
llm_tp_group_free(llm_tp_group *g)
{
    int  i;

    if (g == NULL) {
        return;
    }
    atomic_store(&g->stop, 1);
    llm_wake_bump(&g->gen, &g->gen_sleepers);
    for (i = 0; i < g->n_started; i++) {
        pthread_join(g->threads[i], NULL);
    }
    free(g->threads);
    free(g);
}


llm_tp_group *
llm_tp_group_create(int n_ranks, char *err, size_t err_len)
{
    llm_tp_group  *g;
    rank_arg      *a;
    int            i, rc;

    if (n_ranks < 1 || n_ranks > 1024) {
        snprintf(err, err_len, "tensor parallel group of %d ranks (1..1024 "
                 "allowed)", n_ranks);
        return NULL;
    }
    g = calloc(1, sizeof(*g));
    if (g == NULL || (g->threads = calloc(n_ranks, sizeof(pthread_t))) == NULL)
    {
        free(g);
        snprintf(err, err_len, "tensor parallel group: out of memory");
        return NULL;
    }
    g->n_ranks = n_ranks;
    for (i = 1; i < n_ranks; i++) {
        a = malloc(sizeof(*a));
        rc = ENOMEM;
        if (a != NULL) {
            a->g = g;
            a->rank = i;
            rc = pthread_create(&g->threads[i - 1], NULL, rank_main, a);
        }
        if (rc != 0) {
            free(a);
            snprintf(err, err_len, "tensor parallel group: cannot start rank "
                     "thread %d of %d: %s", i, n_ranks, strerror(rc));
            llm_tp_group_free(g);
            return NULL;
        }
        g->n_started++;
    }
    return g;
}
