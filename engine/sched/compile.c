/*
 * The constraint compiler: threads, the job queues and the LRU (design
 * note in compile.h).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/compile.h"

#define LLM_COMPILE_ERR_LEN  256

struct llm_compiled {
    int              kind;
    int              json_ws;       /* LLM_JSON_WS_*: part of the key */
    int              strict;        /* 0/1: part of the key */
    uint64_t         hash;
    char            *src;           /* (len + 1) a copy */
    size_t           len;
    llm_grammar     *g;             /* NULL: refused, err says why */
    char             err[LLM_COMPILE_ERR_LEN];
    int              refs;          /* the cache's, its job's, each sequence's */
    int              in_cache;
    uint64_t         used;          /* LRU clock */
};

/* one text to compile and the sequences that wait for it */
typedef struct llm_job  llm_job;

struct llm_job {
    llm_compiled    *e;             /* g and err written by the thread */
    void           **waiters;       /* (cap) scheduler thread only */
    int              n_waiters;
    int              cap;
    llm_job         *next;          /* todo or done queue, under mu */
    llm_job         *next_active;   /* scheduler thread only */
};

struct llm_compiler {
    llm_compiler_options   opt;
    pthread_t             *threads;     /* (n_threads) */
    int                    n_threads;

    pthread_mutex_t        mu;
    pthread_cond_t         cv;
    llm_job               *todo_head, *todo_tail;  /* mu */
    llm_job               *done_head, *done_tail;  /* mu */
    int                    stop;                   /* mu */
    llm_compiler_stats     st;                     /* mu, but hits */

    /* the scheduler thread's */
    llm_job               *active;      /* every job not yet finalized */
    llm_job               *ready;       /* done, handing out its waiters */
    llm_compiled         **cache;       /* (opt.cache_size) */
    int                    n_cache;
    uint64_t               clock;
};


static uint64_t
now_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}


/* FNV-1a over the kind, the JSON whitespace, the strictness and the text */
static uint64_t
text_hash(int kind, int json_ws, int strict, const char *src, size_t len)
{
    uint64_t  h = 0xcbf29ce484222325ull ^ (uint64_t) kind
                  ^ ((uint64_t) json_ws << 8) ^ ((uint64_t) strict << 9);
    size_t    i;

    for (i = 0; i < len; i++) {
        h = (h ^ (unsigned char) src[i]) * 0x100000001b3ull;
    }
    return h;
}


static int
same_text(const llm_compiled *e, const llm_compiled *k, const char *src)
{
    return e->kind == k->kind && e->json_ws == k->json_ws
           && e->strict == k->strict && e->hash == k->hash
           && e->len == k->len && memcmp(e->src, src, k->len) == 0;
}


static void
compiled_free(llm_compiled *e)
{
    llm_grammar_free(e->g);
    free(e->src);
    free(e);
}


/* ---------------------------------------------------------------------------
 * the compile threads
 */

static void *
compile_thread(void *arg)
{
    llm_compiler  *c = arg;
    llm_compiled        *e;
    llm_job             *j;
    uint64_t             t0, ns;
    llm_grammar_limits   lim;

    for ( ;; ) {
        pthread_mutex_lock(&c->mu);
        while (!c->stop && c->todo_head == NULL) {
            pthread_cond_wait(&c->cv, &c->mu);
        }
        if (c->stop) {
            pthread_mutex_unlock(&c->mu);
            return NULL;
        }
        j = c->todo_head;
        c->todo_head = j->next;
        if (c->todo_head == NULL) {
            c->todo_tail = NULL;
        }
        pthread_mutex_unlock(&c->mu);

        e = j->e;
        lim = c->opt.limits;
        lim.json_ws = e->json_ws;
        lim.strict = e->strict;
        t0 = now_ns();
        e->g = c->opt.compile(c->opt.vocab, e->kind, e->src, e->len,
                              &lim, e->err, sizeof(e->err));
        ns = now_ns() - t0;
        if (e->g == NULL && e->err[0] == '\0') {
            snprintf(e->err, sizeof(e->err), "the constraint does not "
                     "compile");
        }

        pthread_mutex_lock(&c->mu);
        j->next = NULL;
        if (c->done_tail != NULL) {
            c->done_tail->next = j;
        } else {
            c->done_head = j;
        }
        c->done_tail = j;
        c->st.compiles++;
        c->st.failures += e->g == NULL;
        c->st.compile_ns += ns;
        if (ns > c->st.slowest_ns) {
            c->st.slowest_ns = ns;
        }
        pthread_mutex_unlock(&c->mu);

        if (c->opt.notify != NULL) {
            c->opt.notify(c->opt.notify_arg);
        }
    }
}


/* ---------------------------------------------------------------------------
 * the cache
 */

static void
cache_evict_lru(llm_compiler *c)
{
    int  i, lru = 0;

    for (i = 1; i < c->n_cache; i++) {
        if (c->cache[i]->used < c->cache[lru]->used) {
            lru = i;
        }
    }
    c->cache[lru]->in_cache = 0;
    llm_compiled_release(c, c->cache[lru]);
    c->cache[lru] = c->cache[--c->n_cache];
}


static void
cache_insert(llm_compiler *c, llm_compiled *e)
{
    if (c->opt.cache_size == 0) {
        return;
    }
    if (c->n_cache == c->opt.cache_size) {
        cache_evict_lru(c);
    }
    e->in_cache = 1;
    e->refs++;
    e->used = c->clock++;
    c->cache[c->n_cache++] = e;
}


static llm_compiled *
cache_find(llm_compiler *c, const llm_compiled *k, const char *src)
{
    int  i;

    for (i = 0; i < c->n_cache; i++) {
        if (same_text(c->cache[i], k, src)) {
            c->cache[i]->used = c->clock++;
            return c->cache[i];
        }
    }
    return NULL;
}


/* ---------------------------------------------------------------------------
 * jobs, as the scheduler sees them
 */

static int
job_add_waiter(llm_job *j, void *waiter)
{
    void  **w;

    if (j->n_waiters == j->cap) {
        w = realloc(j->waiters, (j->cap * 2 + 4) * sizeof(*w));
        if (w == NULL) {
            return -1;
        }
        j->waiters = w;
        j->cap = j->cap * 2 + 4;
    }
    j->waiters[j->n_waiters++] = waiter;
    return 0;
}


static llm_job *
job_new(const llm_compiled *k, const char *src)
{
    size_t    len = k->len;
    llm_job  *j = calloc(1, sizeof(*j));

    if (j == NULL) {
        return NULL;
    }
    j->e = calloc(1, sizeof(*j->e));
    if (j->e == NULL || (j->e->src = malloc(len + 1)) == NULL) {
        free(j->e);
        free(j);
        return NULL;
    }
    memcpy(j->e->src, src, len);
    j->e->src[len] = '\0';
    j->e->len = len;
    j->e->kind = k->kind;
    j->e->json_ws = k->json_ws;
    j->e->strict = k->strict;
    j->e->hash = k->hash;
    j->e->refs = 1;         /* the job's, until it is finalized */
    return j;
}


static void
job_free(llm_job *j)
{
    free(j->waiters);
    free(j);
}


static void
active_remove(llm_compiler *c, llm_job *j)
{
    llm_job  **p;

    for (p = &c->active; *p != NULL; p = &(*p)->next_active) {
        if (*p == j) {
            *p = j->next_active;
            return;
        }
    }
}


int
llm_compiler_get(llm_compiler *c, int kind, int json_ws, int strict,
    const char *src, size_t len, void *waiter, llm_compiled **out)
{
    llm_job       *j;
    llm_compiled   k;           /* the key */

    k.kind = kind;
    k.json_ws = json_ws;
    k.strict = strict;
    k.len = len;
    k.hash = text_hash(kind, json_ws, strict, src, len);

    *out = cache_find(c, &k, src);
    if (*out != NULL) {
        (*out)->refs++;
        c->st.hits++;
        return 1;
    }
    for (j = c->active; j != NULL; j = j->next_active) {
        if (same_text(j->e, &k, src)) {
            return job_add_waiter(j, waiter) == 0 ? 0 : -1;
        }
    }
    j = job_new(&k, src);
    if (j == NULL || job_add_waiter(j, waiter) != 0) {
        if (j != NULL) {
            compiled_free(j->e);
            job_free(j);
        }
        return -1;
    }
    j->next_active = c->active;
    c->active = j;

    pthread_mutex_lock(&c->mu);
    if (c->todo_tail != NULL) {
        c->todo_tail->next = j;
    } else {
        c->todo_head = j;
    }
    c->todo_tail = j;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return 0;
}


int
llm_compiler_take(llm_compiler *c, void **waiter, llm_compiled **out)
{
    llm_job  *j;

    for ( ;; ) {
        if (c->ready == NULL) {
            pthread_mutex_lock(&c->mu);
            c->ready = c->done_head;
            c->done_head = c->done_tail = NULL;
            pthread_mutex_unlock(&c->mu);
            if (c->ready == NULL) {
                return 0;
            }
        }
        j = c->ready;
        if (j->n_waiters > 0) {
            *waiter = j->waiters[--j->n_waiters];
            *out = j->e;
            j->e->refs++;
            return 1;
        }
        /* every waiter served (or gone): the result goes to the cache */
        c->ready = j->next;
        active_remove(c, j);
        cache_insert(c, j->e);
        llm_compiled_release(c, j->e);
        job_free(j);
    }
}


void
llm_compiler_forget(llm_compiler *c, void *waiter)
{
    llm_job  *j;
    int       i;

    for (j = c->active; j != NULL; j = j->next_active) {
        for (i = 0; i < j->n_waiters; i++) {
            if (j->waiters[i] == waiter) {
                j->waiters[i] = j->waiters[--j->n_waiters];
                return;
            }
        }
    }
}


const llm_grammar *
llm_compiled_grammar(const llm_compiled *e)
{
    return e->g;
}


const char *
llm_compiled_error(const llm_compiled *e)
{
    return e->err;
}


void
llm_compiled_ref(llm_compiled *e)
{
    e->refs++;
}


void
llm_compiled_release(llm_compiler *c, llm_compiled *e)
{
    (void) c;
    if (e != NULL && --e->refs == 0 && !e->in_cache) {
        compiled_free(e);
    }
}


void
llm_compiler_stats_get(llm_compiler *c, llm_compiler_stats *st)
{
    pthread_mutex_lock(&c->mu);
    *st = c->st;
    pthread_mutex_unlock(&c->mu);
    st->cached = c->n_cache;
}


/* ---------------------------------------------------------------------------
 * create / free
 */

void
llm_compiler_options_default(llm_compiler_options *o)
{
    memset(o, 0, sizeof(*o));
    o->n_threads = 1;
    o->cache_size = 64;
    llm_grammar_limits_default(&o->limits);
    o->compile = llm_grammar_compile;
}


llm_compiler *
llm_compiler_create(const llm_compiler_options *o, char *err,
    size_t err_len)
{
    llm_compiler  *c;
    int            i;

    if (o->vocab == NULL || o->compile == NULL || o->n_threads < 1
        || o->n_threads > 64 || o->cache_size < 0)
    {
        snprintf(err, err_len, "compiler: invalid options: vocabulary %s, "
                 "%d threads (1..64), cache of %d", o->vocab ? "set" : "none",
                 o->n_threads, o->cache_size);
        return NULL;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(err, err_len, "compiler: out of memory");
        return NULL;
    }
    c->opt = *o;
    c->threads = calloc(o->n_threads, sizeof(*c->threads));
    c->cache = calloc(o->cache_size + 1, sizeof(*c->cache));
    if (c->threads == NULL || c->cache == NULL) {
        free(c->threads);
        free(c->cache);
        free(c);
        snprintf(err, err_len, "compiler: out of memory");
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    for (i = 0; i < o->n_threads; i++) {
        if (pthread_create(&c->threads[i], NULL, compile_thread, c) != 0) {
            snprintf(err, err_len, "compiler: pthread_create failed");
            llm_compiler_free(c);
            return NULL;
        }
        c->n_threads++;
    }
    return c;
}


void
llm_compiler_free(llm_compiler *c)
{
    llm_job  *j, *next;
    int       i;

    if (c == NULL) {
        return;
    }
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    for (i = 0; i < c->n_threads; i++) {
        pthread_join(c->threads[i], NULL);
    }
    for (j = c->active; j != NULL; j = next) {
        next = j->next_active;
        llm_compiled_release(c, j->e);
        job_free(j);
    }
    while (c->n_cache > 0) {
        cache_evict_lru(c);
    }
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->threads);
    free(c->cache);
    free(c);
}
