/*
 * The engine process: what nginx workers start (ngx_llm_engine serve).
 *
 * It owns one ring (a sealed memfd) and one abstract unix socket, and lives
 * as long as nginx's master: a pidfd on the master tells it when to go.
 * Workers connect, receive the ring's memfd, and use the connection as a
 * doorbell. See docs/architecture.md for the life cycle and
 * docs/protocol.md for the ring.
 *
 * defines: llm_server_main
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "backend/backend.h"
#include "format/gguf.h"
#include "grammar/grammar.h"
#include "model/kv.h"
#include "server/log.h"
#include "model/model.h"
#include "ring/ngx_llm_ring.h"
#include "text/sampling_ring.h"
#include "common/defaults.h"
#include "sample/sampler.h"
#include "sched/compile.h"
#include "sched/scheduler.h"
#include "server/server.h"
#include "text/tokenizer.h"

#define LLM_MAX_CLIENTS       256
#define LLM_IDLE_EXIT_NS      (3ULL * 1000000000ULL)
#define LLM_ALIVE_TICK_NS     (100ULL * 1000000ULL)
#define LLM_STEP_WINDOW       64      /* steps a "recent" slowest spans */

typedef struct {
    int                 fd;
    uint32_t            id;
    int                 wake;           /* a WAKE is owed this turn */
} llm_client;

typedef struct llm_server_s  llm_server;

/* what the scheduler's callbacks get: the slot a sequence serves */
typedef struct {
    llm_server         *server;
    uint32_t            index;
    uint32_t            owner;
    llm_seq            *seq;
    uint64_t            last_token_ns;
} llm_slot_user;

struct llm_server_s {
    llm_server_opts     opt;

    int                 listen_fd;
    int                 epfd;
    int                 pidfd;
    int                 sigfd;
    int                 ring_fd;
    llm_ring_header    *ring;
    uint64_t            ring_size;

    llm_client          clients[LLM_MAX_CLIENTS];
    int                 n_clients;
    uint32_t            next_client_id;
    uint64_t            alone_since_ns; /* no client connected since */

    pthread_t           loader;
    llm_model           model;
    llm_backend        *backend;
    _Atomic(llm_sched *) sched;         /* published by the loader */
    llm_tokenizer      *tokenizer;      /* for the grammar vocabulary */
    llm_grammar_vocab  *grammar_vocab;  /* NULL: constraints refused */
    llm_compiler       *compiler;
    int                 compiled_fd;    /* eventfd: a compile finished */
    llm_slot_user      *users;          /* (n_slots) */
    int                 quit;           /* SIGQUIT: drain, then exit */
    int                 terminate;

    /* the slowest step of this window and of the one before it */
    uint64_t            step_max_ns[2];
    int                 steps_in_window;

    uint64_t            phase_mark_ns;  /* engine time counted up to here
                                           (ring stats phase_ns) */
};

/* epoll tags: small integers below LLM_TAG_CLIENT, clients above */
enum { LLM_TAG_LISTEN = 1, LLM_TAG_PIDFD, LLM_TAG_SIGNAL, LLM_TAG_COMPILED,
       LLM_TAG_CLIENT };


static uint64_t
llm_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}


/* ---------------------------------------------------------------------- */
/* options                                                                */

static int
llm_parse_u64(const char *s, uint64_t *out)
{
    char               *end;
    unsigned long long  v;

    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno || end == s || *end) {
        return -1;
    }
    *out = v;
    return 0;
}


/* the engine's command line: one row per option, as nginx's commands */
typedef enum { OPT_STR, OPT_INT, OPT_PID, OPT_U64, OPT_BOOL, OPT_KV_DTYPE }
    llm_opt_kind;

typedef struct {
    const char    *name;
    llm_opt_kind   kind;
    size_t         offset;          /* in llm_server_opts */
} llm_opt;

#define OPT(name, kind, field)  { name, kind, offsetof(llm_server_opts, field) }

static const llm_opt  llm_opts[] = {
    OPT("--name", OPT_STR, name),
    OPT("--socket", OPT_STR, socket_name),
    OPT("--model", OPT_STR, model_path),
    OPT("--backend", OPT_STR, backend),
    OPT("--error-log", OPT_STR, error_log),
    OPT("--kv-cache-dtype", OPT_KV_DTYPE, kv_dtype),
    OPT("--model-fd", OPT_INT, model_fd),
    OPT("--listen-fd", OPT_INT, listen_fd),
    OPT("--master-pid", OPT_PID, master_pid),
    OPT("--config-hash", OPT_U64, config_hash),
    OPT("--threads", OPT_INT, threads),
    OPT("--max-num-seqs", OPT_INT, max_num_seqs),
    OPT("--max-model-len", OPT_INT, max_model_len),
    OPT("--max-batched-tokens", OPT_INT, max_batched_tokens),
    OPT("--max-queued", OPT_INT, max_queued),
    OPT("--max-prefill-tokens", OPT_INT, max_prefill_tokens),
    OPT("--batch-share", OPT_INT, batch_share),
    OPT("--kv-cache-memory", OPT_U64, kv_cache_bytes),
    OPT("--prefix-caching", OPT_BOOL, prefix_caching),
    OPT("--kv-prealloc", OPT_BOOL, kv_prealloc),
    OPT("--tensor-parallel", OPT_INT, tensor_parallel),
    OPT("--speculative-ngram", OPT_BOOL, speculative_ngram),
    OPT("--speculative-draft-tokens", OPT_INT, speculative_draft_tokens),
    OPT("--speculative-ngram-size", OPT_INT, speculative_ngram_size),
};


void
llm_server_opts_default(llm_server_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->model_fd = -1;
    o->listen_fd = -1;
    o->threads = LLM_DEFAULT_THREADS;
    o->max_num_seqs = LLM_DEFAULT_MAX_NUM_SEQS;
    o->max_model_len = LLM_DEFAULT_MAX_MODEL_LEN;
    o->max_batched_tokens = 0;        /* by backend, after parsing */
    o->max_queued = LLM_DEFAULT_MAX_QUEUED;
    o->batch_share = LLM_DEFAULT_BATCH_SHARE;
    o->kv_cache_bytes = LLM_DEFAULT_KV_CACHE_BYTES;
    o->prefix_caching = LLM_DEFAULT_PREFIX_CACHING;
    o->kv_dtype = LLM_KV_F16;
    o->kv_prealloc = LLM_DEFAULT_KV_PREALLOC;
    o->tensor_parallel = LLM_DEFAULT_TENSOR_PARALLEL;
    o->speculative_ngram = LLM_DEFAULT_SPEC_NGRAM;
    o->speculative_draft_tokens = LLM_DEFAULT_SPEC_DRAFT_TOKENS;
    o->speculative_ngram_size = LLM_DEFAULT_SPEC_NGRAM_SIZE;
    o->backend = "cpu";
    o->name = "default";
}


/* one option's value into its field; -1 (logged) when it is not one */
static int
llm_opt_set(llm_server_opts *o, const llm_opt *opt, const char *arg)
{
    uint64_t   v;
    void      *field = (char *) o + opt->offset;

    switch (opt->kind) {
    case OPT_STR:
        *(const char **) field = arg;
        return 0;
    case OPT_KV_DTYPE:
        *(int *) field = llm_kv_dtype_parse(arg);
        if (*(int *) field < 0) {
            llm_log(LLM_LOG_EMERG, "option \"%s\": \"%s\" is not f16 "
                    "or f32", opt->name, arg);
            return -1;
        }
        return 0;
    default:
        break;
    }

    if (llm_parse_u64(arg, &v) != 0
        || (opt->kind != OPT_U64 && v > INT32_MAX))
    {
        llm_log(LLM_LOG_EMERG, "option \"%s\": invalid number \"%s\"",
                opt->name, arg);
        return -1;
    }
    switch (opt->kind) {
    case OPT_PID:
        *(pid_t *) field = (pid_t) v;
        break;
    case OPT_U64:
        *(uint64_t *) field = v;
        break;
    case OPT_BOOL:
        *(int *) field = v != 0;
        break;
    default:
        *(int *) field = (int) v;
        break;
    }
    return 0;
}


int
llm_server_parse_opts(llm_server_opts *o, int argc, char **argv)
{
    int     i;
    size_t  n;

    llm_server_opts_default(o);

    for (i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) {
            llm_log(LLM_LOG_EMERG, "option \"%s\" needs a value", argv[i]);
            return -1;
        }
        for (n = 0; n < sizeof(llm_opts) / sizeof(llm_opts[0]); n++) {
            if (strcmp(argv[i], llm_opts[n].name) == 0) {
                break;
            }
        }
        if (n == sizeof(llm_opts) / sizeof(llm_opts[0])) {
            llm_log(LLM_LOG_EMERG, "unknown option \"%s\"", argv[i]);
            return -1;
        }
        if (llm_opt_set(o, &llm_opts[n], argv[i + 1]) != 0) {
            return -1;
        }
    }

    if (o->max_batched_tokens == 0) {
        o->max_batched_tokens =
            llm_default_max_batched_tokens(strcmp(o->backend, "cuda") == 0);
    }

    if (o->socket_name == NULL || o->master_pid <= 0
        || (o->model_fd < 0 && o->model_path == NULL))
    {
        llm_log(LLM_LOG_EMERG, "serve needs --socket, --master-pid and "
                "--model or --model-fd");
        return -1;
    }

    if (o->model_path == NULL) {
        o->model_path = "(model fd)";
    }

    return 0;
}


/* a batch place and a queue place per request, and 16 spare */
static uint32_t
llm_server_ring_slots(const llm_server_opts *o)
{
    uint32_t  n = (uint32_t) o->max_num_seqs + o->max_queued + 16;

    return n > LLM_RING_MAX_SLOTS ? LLM_RING_MAX_SLOTS : n;
}


void
llm_server_plan_options(llm_plan_options *po, const llm_server_opts *o)
{
    memset(po, 0, sizeof(*po));
    po->backend = strcmp(o->backend, "cuda") == 0 ? LLM_PLAN_CUDA
                                                  : LLM_PLAN_CPU;
    po->tp = o->tensor_parallel;
    po->kv_dtype = o->kv_dtype;
    po->max_model_len = o->max_model_len;
    po->max_num_seqs = o->max_num_seqs;
    po->max_batched_tokens = o->max_batched_tokens;
    po->threads = o->threads;
    po->kv_block_size = LLM_KV_BLOCK_SIZE_DEFAULT;
    po->kv_cache_bytes = o->kv_cache_bytes;
    po->ring_bytes = llm_ring_size(llm_server_ring_slots(o));
}


/* ---------------------------------------------------------------------- */
/* the ring                                                               */

static int
llm_ring_create(llm_server *s)
{
    uint32_t          n_slots;
    llm_ring_header  *h;

    n_slots = llm_server_ring_slots(&s->opt);
    s->ring_size = llm_ring_size(n_slots);

    s->ring_fd = memfd_create("ngx_llm_ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (s->ring_fd == -1) {
        llm_log(LLM_LOG_EMERG, "memfd_create() failed: %s", strerror(errno));
        return -1;
    }

    /* only the worker user may map it, and nobody may resize it under us */
    if (fchmod(s->ring_fd, 0600) == -1
        || ftruncate(s->ring_fd, s->ring_size) == -1
        || fcntl(s->ring_fd, F_ADD_SEALS,
                 F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == -1)
    {
        llm_log(LLM_LOG_EMERG, "ring setup failed: %s", strerror(errno));
        return -1;
    }

    /* MAP_POPULATE: every slot's pages now, in the engine's RSS from the
     * start rather than as the first requests of each slot arrive */
    h = mmap(NULL, s->ring_size, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_POPULATE, s->ring_fd, 0);
    if (h == MAP_FAILED) {
        llm_log(LLM_LOG_EMERG, "mmap(ring) failed: %s", strerror(errno));
        return -1;
    }

    h->magic = LLM_RING_MAGIC;
    h->version = LLM_RING_VERSION;
    h->header_size = sizeof(llm_ring_header);
    h->slot_size = llm_ring_slot_size();
    h->n_slots = n_slots;
    h->max_prompt = LLM_RING_MAX_PROMPT;
    h->slots_offset = llm_ring_slots_offset();
    h->total_size = s->ring_size;
    h->config_hash = s->opt.config_hash;
    h->engine_pid = getpid();
    h->started_ns = llm_now_ns();
    atomic_store(&h->generation, h->started_ns);
    atomic_store(&h->heartbeat_ns, h->started_ns);
    atomic_store(&h->alive_ns, h->started_ns);
    atomic_store(&h->state, LLM_ENGINE_STARTING);

    s->users = calloc(n_slots, sizeof(llm_slot_user));
    if (s->users == NULL) {
        llm_log(LLM_LOG_EMERG, "out of memory");
        return -1;
    }

    s->ring = h;
    return 0;
}


static void
llm_strlcpy(char *dst, const char *src, size_t size)
{
    size_t n = strnlen(src, size - 1);

    memcpy(dst, src, n);
    dst[n] = '\0';
}


static void
llm_ring_fail(llm_server *s, const char *reason)
{
    llm_strlcpy(s->ring->reason, reason, sizeof(s->ring->reason));
    atomic_store(&s->ring->state, LLM_ENGINE_FAILED);
}


/* ---------------------------------------------------------------------- */
/* model loading, off the event loop so pings are answered meanwhile      */

static void
llm_copy_str(char *dst, size_t size, const gguf_file *g, const char *key)
{
    uint64_t     len;
    const char  *s;

    if (gguf_get_str(g, key, &s, &len) != 0) {
        return;
    }
    if (len >= size) {
        len = size - 1;
    }
    memcpy(dst, s, len);
    dst[len] = '\0';
}


static void
llm_fill_facts(llm_model_facts *f, const llm_model *m)
{
    uint32_t            t, best;
    uint64_t            i, n, ne, bytes_by_type[GGML_TYPE_COUNT] = { 0 };
    const char         *base;
    const gguf_tensor  *tensors;

    snprintf(f->arch, sizeof(f->arch), "%s", m->cfg.arch);
    if (m->hf) {
        /* a Hugging Face directory: its name, its safetensors */
        base = strrchr(m->path, '/');
        snprintf(f->name, sizeof(f->name), "%s", base ? base + 1 : m->path);
        tensors = m->hf_tensors;
        n = (uint64_t) m->n_hf_tensors;
    } else {
        llm_copy_str(f->name, sizeof(f->name), &m->gguf, "general.name");
        tensors = m->gguf.tensors;
        n = m->gguf.n_tensors;
    }
    f->context_length = m->cfg.max_seq_len;
    f->n_layers = m->cfg.n_layers;
    f->dim = m->cfg.dim;
    f->n_heads = m->cfg.n_heads;
    f->n_kv_heads = m->cfg.n_kv_heads;
    f->vocab_size = m->cfg.vocab_size;

    for (i = 0; i < n; i++) {
        const gguf_tensor *tn = &tensors[i];

        ne = 1;
        for (t = 0; t < tn->n_dims; t++) {
            ne *= tn->ne[t];
        }
        f->n_params += ne;
        f->weight_bytes += tn->nbytes;
        if (tn->type < GGML_TYPE_COUNT) {
            bytes_by_type[tn->type] += tn->nbytes;
        }
    }

    best = 0;
    for (t = 0; t < GGML_TYPE_COUNT; t++) {
        if (bytes_by_type[t] > bytes_by_type[best]) {
            best = t;
        }
    }
    snprintf(f->file_type, sizeof(f->file_type), "%s", ggml_type_name(best));
}


static void llm_on_token(void *user, int32_t token, const llm_sample_out *lp);
static void llm_on_finish(void *user, const llm_seq_result *r);
static int llm_can_emit(void *user);
static int llm_emit_room(void *user);


/*
 * The memory plan (engine/model/plan.h, docs/operations.md): weights, KV
 * bytes per token, how many blocks and tokens the pool holds, how many
 * full-length sequences fit; the same rule `ngx_llm_engine plan` prints.
 * On the CPU the pool and workspaces must fit what this machine still has
 * (the weights are a file mapping the kernel can page); the CUDA backend
 * checks its device itself.
 */
static int
llm_memory_plan(llm_server *s, llm_backend_options *bo, int *max_model_len)
{
    char               msg[256];
    llm_plan           p;
    const char        *what;
    llm_plan_shape     sh;
    llm_plan_options   po;

    llm_plan_shape_of(&sh, &s->model);
    llm_server_plan_options(&po, &s->opt);

    /* the CUDA backend checks its device itself (backend_cuda.cu) */
    what = "MemAvailable";
    if (po.backend == LLM_PLAN_CPU) {
        po.device_bytes = llm_plan_host_available(&what);
    }

    if (llm_plan_compute(&p, &sh, &po) != 0) {
        llm_log(LLM_LOG_ERR, "%s", p.err);
        llm_ring_fail(s, p.err);
        return -1;
    }
    *max_model_len = p.max_model_len;

    llm_backend_options_default(bo, &s->model);
    bo->n_threads = s->opt.threads;
    bo->kv_block_size = po.kv_block_size;
    bo->kv_n_blocks = p.kv_blocks;
    bo->max_batch_tokens = s->opt.max_batched_tokens;
    bo->kv_dtype = s->opt.kv_dtype;
    bo->kv_prealloc = s->opt.kv_prealloc;

    llm_log(LLM_LOG_NOTICE, "memory plan: weights %llu bytes, KV %zu bytes "
            "per token (%s), %d blocks of %d tokens (%d tokens, %llu bytes), "
            "%d sequences of max_model_len %d fit; workspace %llu bytes, "
            "%llu bytes in all per rank",
            (unsigned long long) s->ring->model.weight_bytes,
            p.kv_token_bytes, po.backend == LLM_PLAN_CUDA ? "bf16"
                              : llm_kv_dtype_name(s->opt.kv_dtype),
            p.kv_blocks, po.kv_block_size, p.kv_tokens,
            (unsigned long long) p.kv_pool_bytes * po.tp, p.seqs_fit,
            p.max_model_len, (unsigned long long) p.workspace_bytes,
            (unsigned long long) p.total_bytes);

    if (p.device_fit == 0) {
        snprintf(msg, sizeof(msg), "memory plan does not fit: KV pool and "
                 "workspace need %llu bytes, %s is %llu bytes (lower "
                 "kv_cache_memory)", (unsigned long long) p.need_bytes, what,
                 (unsigned long long) po.device_bytes);
        llm_log(LLM_LOG_ERR, "%s", msg);
        llm_ring_fail(s, msg);
        return -1;
    }

    if (po.device_bytes > 0
        && p.need_bytes + p.weight_bytes * po.tp > po.device_bytes)
    {
        llm_log(LLM_LOG_WARN, "memory plan: weights, KV pool and workspace "
                "(%llu bytes) exceed %s (%llu bytes): the weights will be "
                "paged from disk",
                (unsigned long long) (p.need_bytes + p.weight_bytes * po.tp),
                what, (unsigned long long) po.device_bytes);
    }

    return 0;
}


/*
 * The watchdog's measure of a slow step (docs/architecture.md): the
 * slowest of the last 64 to 128 steps that ran the model, so a worker
 * allows an 8B model on a CPU, or a sanitizer build, steps of its own size.
 */
static void
llm_step_timed(llm_server *s, uint64_t ns)
{
    if (ns > s->step_max_ns[0]) {
        s->step_max_ns[0] = ns;
    }

    if (++s->steps_in_window == LLM_STEP_WINDOW) {
        s->step_max_ns[1] = s->step_max_ns[0];
        s->step_max_ns[0] = 0;
        s->steps_in_window = 0;
    }

    atomic_store(&s->ring->step_slowest_ns,
                 s->step_max_ns[0] > s->step_max_ns[1] ? s->step_max_ns[0]
                                                       : s->step_max_ns[1]);
}


/* the time since the last mark to the idle phase */
static void
llm_phase_idle(llm_server *s, uint64_t now)
{
    if (s->phase_mark_ns != 0 && now > s->phase_mark_ns) {
        atomic_fetch_add_explicit(&s->ring->stats.phase_ns[LLM_PHASE_IDLE],
                                  now - s->phase_mark_ns,
                                  memory_order_relaxed);
    }
    s->phase_mark_ns = now;
}


/* a step that ran the model: its time by phase, its tokens */
static void
llm_step_account(llm_server *s, llm_sched *sched, uint64_t ns)
{
    int               b, phase;
    llm_ring_stats   *rs = &s->ring->stats;
    llm_sched_stats   st;

    llm_sched_stats_get(sched, &st);

    phase = st.last_step_decodes == 0 ? LLM_PHASE_PREFILL
            : st.last_step_prefills == 0 ? LLM_PHASE_DECODE
            : LLM_PHASE_MIXED;
    atomic_fetch_add_explicit(&rs->phase_ns[phase], ns,
                              memory_order_relaxed);

    for (b = 0; b < LLM_STEP_HIST_BUCKETS
                && st.last_step_tokens > llm_step_hist_bounds[b]; b++)
    {
        /* find the bucket */
    }
    atomic_fetch_add_explicit(&rs->step_tokens.count[b], 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&rs->step_tokens.sum,
                              (uint64_t) st.last_step_tokens,
                              memory_order_relaxed);
}


/* a step of the model, timed when it ran one */
static int
llm_step(llm_server *s, llm_sched *sched)
{
    int       rc;
    uint64_t  t0, t1;

    t0 = llm_now_ns();
    llm_phase_idle(s, t0);
    rc = llm_sched_step(sched);

    if (rc != 0) {
        t1 = llm_now_ns();
        llm_step_timed(s, t1 - t0);
        llm_step_account(s, sched, t1 - t0);
        s->phase_mark_ns = t1;
    }

    return rc;
}


/* the engine's resident bytes, from /proc/self/statm */
static uint64_t
llm_rss_bytes(void)
{
    FILE                *f;
    unsigned long long   size, resident;

    f = fopen("/proc/self/statm", "r");
    if (f == NULL) {
        return 0;
    }
    if (fscanf(f, "%llu %llu", &size, &resident) != 2) {
        resident = 0;
    }
    fclose(f);

    return resident * (uint64_t) sysconf(_SC_PAGESIZE);
}


/*
 * Memory and compute gauges, each tick of the ticker thread (NVML may
 * take a while; the loop must not wait for it). last[] holds the busy and
 * wall time when the utilisation was last computed: over a second or more,
 * so one 100 ms tick of a step does not swing it.
 */
static void
llm_sample_usage(llm_server *s, uint64_t last[2])
{
    uint64_t            now, wall;
    llm_ring_stats     *rs = &s->ring->stats;
    llm_backend_usage   u;

    atomic_store(&rs->rss_bytes, llm_rss_bytes());

    if (atomic_load_explicit(&s->sched, memory_order_acquire) == NULL) {
        return;             /* the backend is not made yet */
    }

    llm_backend_usage_get(s->backend, &u);
    now = llm_now_ns();
    atomic_store(&rs->compute_busy_ns, u.busy_ns);
    atomic_store(&rs->compute_threads, (uint32_t) u.n_threads);

    if (u.device_valid) {
        atomic_store(&rs->compute_util_ppm, (uint32_t) u.device_util * 10000);
        atomic_store(&rs->device_mem_used, u.device_mem_used);
        atomic_store(&rs->device_mem_total, u.device_mem_total);
        atomic_store(&rs->device_valid, 1);

        return;
    }

    if (last[1] == 0 || u.n_threads == 0) {
        last[0] = u.busy_ns;
        last[1] = now;
        return;
    }

    if (now - last[1] >= 1000000000ULL) {
        wall = (now - last[1]) * (uint64_t) u.n_threads;
        atomic_store(&rs->compute_util_ppm,
                     (uint32_t) ((u.busy_ns - last[0]) * 1000000 / wall));
        last[0] = u.busy_ns;
        last[1] = now;
    }
}


/*
 * alive_ns: a sign of life that a long step does not stop, as the loop's
 * heartbeat does; only a stopped or frozen process stops it. Its signals
 * are blocked as the loop's are (created after llm_setup_events).
 */
static void *
llm_alive_thread(void *arg)
{
    uint64_t          last[2] = { 0, 0 };
    llm_server       *s = arg;
    struct timespec   ts = { 0, LLM_ALIVE_TICK_NS };

    for ( ;; ) {
        atomic_store(&s->ring->alive_ns, llm_now_ns());
        llm_sample_usage(s, last);
        nanosleep(&ts, NULL);
    }

    return NULL;
}


static void llm_publish_stats(llm_server *s, llm_sched *sched);


/*
 * A short greedy generation must work before health says ready: a 4-token
 * prefill step, then decode steps, so both step shapes have run. The
 * workspaces were touched when allocated (docs/operations.md,
 * pre-allocation); a longer prefill touches nothing more and costs every
 * engine restart (32 tokens: +0.5 s measured in t/010 on a busy CPU).
 */
static int
llm_warm_up(llm_server *s, llm_sched *sched)
{
    int            i, rc;
    char           err[256];
    int32_t        prompt[4];
    llm_seq       *seq;
    llm_request    req;
    llm_sched_stats st;

    for (i = 0; i < 4; i++) {
        prompt[i] = (i * 7 + 1) % s->model.cfg.vocab_size;
    }

    memset(&req, 0, sizeof(req));
    req.prompt = prompt;
    req.n_prompt = 4;
    llm_sampling_params_default(&req.sampling);
    req.sampling.temperature = 0;
    req.max_tokens = 4;
    req.ignore_eos = 1;

    if (llm_sched_add(sched, &req, &seq, err, sizeof(err)) != 0) {
        llm_log(LLM_LOG_ERR, "warm-up refused: %s", err);
        llm_ring_fail(s, "warm-up request refused");
        return -1;
    }

    for (i = 0; i < 64 && llm_sched_has_work(sched); i++) {
        rc = llm_step(s, sched);
        if (rc < 0) {
            break;
        }
    }

    llm_sched_stats_get(sched, &st);
    if (st.generation_tokens != 4 || llm_sched_has_work(sched)) {
        llm_log(LLM_LOG_ERR, "warm-up generation failed (%llu tokens)",
                (unsigned long long) st.generation_tokens);
        llm_ring_fail(s, "warm-up generation failed");
        return -1;
    }

    return 0;
}


/* from a compile thread: wake the loop, which takes the result */
static void
llm_compiled_notify(void *arg)
{
    uint64_t     one = 1;
    llm_server  *s = arg;

    (void) write(s->compiled_fd, &one, sizeof(one));
}


/*
 * Structured outputs: the tokenizer's bytes as the grammar compiler's
 * vocabulary (built once: its cost is logged) and the compile thread.
 * Without them the engine serves on and refuses constrained requests.
 */
static void
llm_grammar_setup(llm_server *s, llm_sched_options *so)
{
    char                   err[256];
    uint64_t               t0;
    llm_compiler_options   co;

    t0 = llm_now_ns();
    s->tokenizer = llm_model_tokenizer(&s->model, err, sizeof(err));
    if (s->tokenizer == NULL) {
        llm_log(LLM_LOG_WARN, "no tokenizer, structured outputs refused: %s",
                err);
        return;
    }
    s->grammar_vocab = llm_grammar_vocab_new(s->tokenizer, err, sizeof(err));
    if (s->grammar_vocab == NULL) {
        llm_log(LLM_LOG_WARN, "no grammar vocabulary, structured outputs "
                "refused: %s", err);
        return;
    }
    llm_compiler_options_default(&co);
    co.vocab = s->grammar_vocab;
    co.notify = llm_compiled_notify;
    co.notify_arg = s;
    s->compiler = llm_compiler_create(&co, err, sizeof(err));
    if (s->compiler == NULL) {
        llm_log(LLM_LOG_WARN, "structured outputs refused: %s", err);
        return;
    }
    so->compiler = s->compiler;
    so->n_grammar_vocab = llm_tokenizer_n_vocab(s->tokenizer);
    llm_log(LLM_LOG_NOTICE, "grammar vocabulary of %d tokens built in "
            "%.1f ms", (int) so->n_grammar_vocab,
            (double) (llm_now_ns() - t0) / 1e6);
}


static void *
llm_loader_thread(void *arg)
{
    int                  rc, max_model_len;
    char                 err[512];
    llm_sched           *sched;
    llm_server          *s = arg;
    llm_sched_options    so;
    llm_backend_options  bo;

    /* rank 0 of tensor_parallel; the backend loads the other ranks' views */
    if (s->opt.model_fd >= 0) {
        rc = llm_model_load_fd(&s->model, s->opt.model_fd, s->opt.model_path,
                               0, s->opt.tensor_parallel);
    } else {
        rc = llm_model_load(&s->model, s->opt.model_path, 0,
                            s->opt.tensor_parallel);
    }

    if (rc != 0) {
        llm_log(LLM_LOG_ERR, "cannot load model: %s", s->model.err);
        llm_ring_fail(s, s->model.err);
        return NULL;
    }

    llm_fill_facts(&s->ring->model, &s->model);
    atomic_store(&s->ring->state, LLM_ENGINE_WARMING);

    llm_log(LLM_LOG_NOTICE, "model \"%s\" loaded: %s, %" PRIu64
            " parameters, %" PRIu64 " bytes of weights (%s), %u layers, "
            "context %u, vocabulary %u",
            s->opt.model_path, s->ring->model.arch, s->ring->model.n_params,
            s->ring->model.weight_bytes, s->ring->model.file_type,
            s->ring->model.n_layers, s->ring->model.context_length,
            s->ring->model.vocab_size);

    if (llm_memory_plan(s, &bo, &max_model_len) != 0) {
        return NULL;
    }

    s->backend = llm_backend_create(s->opt.backend, &s->model, &bo, err,
                                    sizeof(err));
    if (s->backend == NULL) {
        llm_log(LLM_LOG_ERR, "%s", err);
        llm_ring_fail(s, err);
        return NULL;
    }

    atomic_store(&s->ring->stats.kv_block_size, (uint32_t) bo.kv_block_size);
    atomic_store(&s->ring->stats.kv_block_bytes,
                 llm_kv_bytes_per_token(s->model.cfg.n_layers,
                                        s->model.cfg.n_kv_heads
                                        * s->model.cfg.head_dim,
                                        bo.kv_dtype)
                 * (uint64_t) bo.kv_block_size);

    llm_sched_options_default(&so);
    so.max_num_seqs = s->opt.max_num_seqs;
    so.max_batched_tokens = s->opt.max_batched_tokens;
    so.max_model_len = max_model_len;
    so.max_queued = s->opt.max_queued;
    so.max_prefill_tokens = s->opt.max_prefill_tokens;
    so.batch_share = s->opt.batch_share;
    so.prefix_caching = s->opt.prefix_caching;
    so.on_token = llm_on_token;
    so.on_finish = llm_on_finish;
    so.can_emit = llm_can_emit;
    so.emit_room = llm_emit_room;
    so.spec_draft_tokens = s->opt.speculative_ngram
                           ? s->opt.speculative_draft_tokens : 0;
    so.spec_ngram = s->opt.speculative_ngram_size;
    llm_grammar_setup(s, &so);

    sched = llm_sched_create(s->backend, &so, err, sizeof(err));
    if (sched == NULL) {
        llm_log(LLM_LOG_ERR, "%s", err);
        llm_ring_fail(s, err);
        return NULL;
    }

    if (llm_warm_up(s, sched) != 0) {
        return NULL;
    }

    llm_publish_stats(s, sched);        /* the pool's size before READY */
    atomic_store_explicit(&s->sched, sched, memory_order_release);
    atomic_store(&s->ring->state, LLM_ENGINE_READY);
    llm_log(LLM_LOG_NOTICE, "ready: warm-up generation done, %d threads, "
            "max_num_seqs %d, max_batched_tokens %d", s->opt.threads,
            s->opt.max_num_seqs, s->opt.max_batched_tokens);

    return NULL;
}


/* ---------------------------------------------------------------------- */
/* clients                                                                */

static llm_client *
llm_client_by_id(llm_server *s, uint32_t id)
{
    int i;

    for (i = 0; i < s->n_clients; i++) {
        if (s->clients[i].id == id) {
            return &s->clients[i];
        }
    }
    return NULL;
}


static int
llm_send_hello(llm_server *s, llm_client *c)
{
    char            cbuf[CMSG_SPACE(sizeof(int))];
    llm_msg         m;
    struct iovec    iov;
    struct msghdr   mh;
    struct cmsghdr *cm;

    memset(&m, 0, sizeof(m));
    m.type = LLM_MSG_HELLO;
    m.version = LLM_RING_VERSION;
    m.client_id = c->id;
    m.ring_size = s->ring_size;

    iov.iov_base = &m;
    iov.iov_len = sizeof(m);
    memset(&mh, 0, sizeof(mh));
    memset(cbuf, 0, sizeof(cbuf));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof(cbuf);
    cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &s->ring_fd, sizeof(int));

    if (sendmsg(c->fd, &mh, MSG_NOSIGNAL) != (ssize_t) sizeof(m)) {
        llm_log(LLM_LOG_ERR, "sendmsg(HELLO) to client %u failed: %s",
                c->id, strerror(errno));
        return -1;
    }
    return 0;
}


static void
llm_accept(llm_server *s)
{
    int                 fd;
    socklen_t           len;
    llm_client         *c;
    struct ucred        cred;
    struct epoll_event  ev;

    for (;;) {
        fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd == -1) {
            if (errno != EAGAIN && errno != EINTR) {
                llm_log(LLM_LOG_ERR, "accept4() failed: %s", strerror(errno));
            }
            return;
        }

        /* the abstract namespace has no permissions: check who it is */
        len = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1
            || cred.uid != getuid())
        {
            llm_log(LLM_LOG_ERR, "refused a client with uid %d (engine "
                    "runs as uid %d)", (int) cred.uid, (int) getuid());
            close(fd);
            continue;
        }

        if (s->n_clients == LLM_MAX_CLIENTS) {
            llm_log(LLM_LOG_ERR, "refused a client: %d clients connected",
                    LLM_MAX_CLIENTS);
            close(fd);
            continue;
        }

        c = &s->clients[s->n_clients];
        c->fd = fd;
        c->id = ++s->next_client_id;
        c->wake = 0;

        if (llm_send_hello(s, c) != 0) {
            close(fd);
            continue;
        }

        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.u64 = LLM_TAG_CLIENT + c->id;
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) == -1) {
            llm_log(LLM_LOG_ERR, "epoll_ctl() failed: %s", strerror(errno));
            close(fd);
            continue;
        }

        s->n_clients++;
        llm_log(LLM_LOG_INFO, "client %u (pid %d) connected", c->id,
                (int) cred.pid);
    }
}


/* everything the client owned goes back to FREE */
static void
llm_client_release_slots(llm_server *s, uint32_t id)
{
    uint32_t    i;
    llm_slot   *sl;

    llm_sched  *sched = atomic_load(&s->sched);

    for (i = 0; i < s->ring->n_slots; i++) {
        sl = llm_ring_slot(s->ring, i);
        if (sl->owner != id) {
            continue;
        }
        if (s->users[i].seq != NULL && sched != NULL) {
            llm_sched_cancel(sched, s->users[i].seq);   /* frees its KV */
        }
        if (atomic_load(&sl->state) != LLM_SLOT_FREE) {
            sl->owner = 0;
            atomic_store(&sl->state, LLM_SLOT_FREE);
        }
    }
}


static void
llm_client_close(llm_server *s, llm_client *c)
{
    uint32_t id = c->id;

    epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    llm_client_release_slots(s, id);

    *c = s->clients[--s->n_clients];
    if (s->n_clients == 0) {
        s->alone_since_ns = llm_now_ns();
    }
    llm_log(LLM_LOG_INFO, "client %u disconnected", id);
}


/* ---------------------------------------------------------------------- */
/* slots                                                                  */

static const char *
llm_state_name(uint32_t st)
{
    static const char *names[] = {
        "starting", "warming up", "ready", "failed", "draining"
    };

    return st < sizeof(names) / sizeof(names[0]) ? names[st] : "unknown";
}


static void
llm_slot_finish(llm_server *s, llm_slot *sl, uint32_t finish,
    uint32_t error, const char *message)
{
    if (error != LLM_ERR_NONE && error <= LLM_ERR_INTERNAL) {
        atomic_fetch_add_explicit(&s->ring->stats.errors[error], 1,
                                  memory_order_relaxed);
    }

    sl->finish = finish;
    sl->error = error;
    llm_strlcpy(sl->message, message, sizeof(sl->message));
    sl->t_done_ns = llm_now_ns();
    atomic_store_explicit(&sl->state, LLM_SLOT_DONE, memory_order_release);
}


static void llm_slot_generate(llm_server *s, llm_client *c, llm_slot *sl);


static void
llm_slot_take(llm_server *s, llm_client *c, llm_slot *sl)
{
    uint32_t state;

    atomic_store(&sl->state, LLM_SLOT_RUNNING);

    switch (sl->kind) {

    case LLM_KIND_PING:
        atomic_fetch_add(&s->ring->stats.pings, 1);
        state = atomic_load(&s->ring->state);
        llm_slot_finish(s, sl, LLM_FINISH_STOP, LLM_ERR_NONE,
                        state == LLM_ENGINE_FAILED ? s->ring->reason
                                                   : llm_state_name(state));
        break;

    case LLM_KIND_GENERATE:
        llm_slot_generate(s, c, sl);
        break;

    default:
        llm_log(LLM_LOG_ERR, "client %u: slot with invalid kind %u",
                c->id, sl->kind);
        llm_slot_finish(s, sl, LLM_FINISH_ERROR, LLM_ERR_BAD_REQUEST,
                        "invalid slot kind");
    }

    c->wake = 1;
}


/* the owner of a slot gets a WAKE at the end of this loop turn */
static void
llm_wake_owner(llm_server *s, uint32_t owner)
{
    llm_client *c = llm_client_by_id(s, owner);

    if (c != NULL) {
        c->wake = 1;
    }
}


static void
llm_hist_add(llm_hist *h, uint64_t ns)
{
    int     b;
    double  secs = ns / 1e9;

    for (b = 0; b < LLM_HIST_BUCKETS && secs > llm_hist_bounds[b]; b++) {
        /* find the bucket */
    }
    atomic_fetch_add_explicit(&h->count[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, ns / 1000, memory_order_relaxed);
}


static void
llm_on_token(void *user, int32_t token, const llm_sample_out *lp)
{
    int             i;
    uint32_t        head;
    uint64_t        now;
    llm_slot       *sl;
    llm_out_token  *o;
    llm_slot_user  *u = user;

    if (u == NULL) {
        return;         /* warm-up */
    }

    sl = llm_ring_slot(u->server->ring, u->index);
    head = atomic_load_explicit(&sl->out_head, memory_order_relaxed);
    o = &sl->out[head % LLM_RING_OUT_CAP];

    o->token = token;
    o->logprob = lp ? lp->logprob : 0;
    o->n_top = lp ? (uint32_t) lp->n_top : 0;
    for (i = 0; lp && i < lp->n_top && i < LLM_RING_MAX_TOP_LP; i++) {
        o->top_ids[i] = lp->top[i].token;
        o->top_lp[i] = lp->top[i].logprob;
    }

    now = llm_now_ns();
    if (head == 0) {
        sl->t_first_token_ns = now;
    } else {
        llm_hist_add(&u->server->ring->stats.hist[LLM_HIST_ITL],
                     now - u->last_token_ns);
    }
    u->last_token_ns = now;

    atomic_store_explicit(&sl->out_head, head + 1, memory_order_release);
    llm_wake_owner(u->server, u->owner);
}


/* entries free in the slot's stream: what one step may send it (a
   speculating sequence up to 1 + drafts) */
static int
llm_emit_room(void *user)
{
    uint32_t        head, tail, used;
    llm_slot       *sl;
    llm_slot_user  *u = user;

    if (u == NULL) {
        return LLM_RING_OUT_CAP;
    }
    sl = llm_ring_slot(u->server->ring, u->index);
    head = atomic_load_explicit(&sl->out_head, memory_order_relaxed);
    tail = atomic_load_explicit(&sl->out_tail, memory_order_acquire);
    used = head - tail;
    return used < LLM_RING_OUT_CAP ? (int) (LLM_RING_OUT_CAP - used) : 0;
}


/* the worker has not read the stream: hold the sequence, do not block */
static int
llm_can_emit(void *user)
{
    uint32_t        head, tail;
    llm_slot       *sl;
    llm_slot_user  *u = user;

    if (u == NULL) {
        return 1;
    }

    sl = llm_ring_slot(u->server->ring, u->index);
    head = atomic_load_explicit(&sl->out_head, memory_order_relaxed);
    tail = atomic_load_explicit(&sl->out_tail, memory_order_acquire);

    /* the worker wrote tail: anything but 0..CAP behind head is corrupt,
       and holding the sequence is the safe answer until it is cancelled */
    return (uint32_t) (head - tail) < LLM_RING_OUT_CAP;
}


/* the scheduler's refusal as the ring says it (ngx_llm_ring.h) */
static uint32_t
ring_error(int rc)
{
    switch (rc) {
    case LLM_SCHED_BAD_REQUEST:
        return LLM_ERR_BAD_REQUEST;
    case LLM_SCHED_TOO_LONG:
        return LLM_ERR_TOO_LONG;
    case LLM_SCHED_QUEUE_FULL:
        return LLM_ERR_QUEUE_FULL;
    default:
        return LLM_ERR_INTERNAL;
    }
}


/* the scheduler's reason as the ring says it (ngx_llm_ring.h) */
static enum llm_finish
ring_finish(llm_seq_finish f)
{
    switch (f) {
    case LLM_SEQ_STOP:
        return LLM_FINISH_STOP;
    case LLM_SEQ_LENGTH:
        return LLM_FINISH_LENGTH;
    case LLM_SEQ_CANCELLED:
        return LLM_FINISH_CANCELLED;
    case LLM_SEQ_REFUSED:
    default:
        return LLM_FINISH_ERROR;
    }
}


static void
llm_on_finish(void *user, const llm_seq_result *r)
{
    enum llm_finish   finish;
    uint32_t          error;
    llm_slot         *sl;
    llm_slot_user    *u = user;
    llm_ring_stats   *st;

    if (u == NULL) {
        return;
    }

    st = &u->server->ring->stats;
    sl = llm_ring_slot(u->server->ring, u->index);

    sl->n_cached = r->n_cached;
    sl->t_scheduled_ns = r->t_scheduled_ns;
    sl->t_first_token_ns = r->t_first_token_ns;

    if (r->t_scheduled_ns) {
        llm_hist_add(&st->hist[LLM_HIST_QUEUE],
                     r->t_scheduled_ns - sl->t_submit_ns);
    }
    if (r->t_first_token_ns) {
        llm_hist_add(&st->hist[LLM_HIST_TTFT],
                     r->t_first_token_ns - sl->t_submit_ns);
    }
    llm_hist_add(&st->hist[LLM_HIST_E2E], r->t_done_ns - sl->t_submit_ns);
    finish = ring_finish(r->finish);
    atomic_fetch_add(&st->finished[finish], 1);

    error = finish == LLM_FINISH_ERROR ? LLM_ERR_INTERNAL : LLM_ERR_NONE;
    if (r->finish == LLM_SEQ_REFUSED) {
        /* a 400 before any header: the message is the compiler's */
        error = LLM_ERR_BAD_REQUEST;
        llm_log(LLM_LOG_INFO, "slot %u: constraint refused: %s", u->index,
                r->message);
    }
    u->seq = NULL;
    llm_slot_finish(u->server, sl, finish, error,
                    r->message ? r->message : "");
    llm_wake_owner(u->server, u->owner);
}


/*
 * The request a GENERATE slot asks for. The slot is the worker's memory:
 * every count is read once and checked against the ring's limits before
 * it indexes anything; req points into the slot (prompt, stop ids) and
 * into bias (LLM_RING_MAX_BIAS). Pure, so fuzz/fuzz_slot.c feeds it
 * arbitrary slot images. 0, or -1 with what is wrong in err.
 */
static int
llm_slot_request(const llm_slot *sl, uint32_t max_prompt, llm_request *req,
    llm_logit_bias *bias, char *err, size_t errlen)
{
    uint32_t             i, n_prompt, n_stop, n_bias, top_lp, max_tokens;
    uint32_t             ckind, clen;
    const llm_sampling  *p = &sl->sampling;

    n_prompt = sl->n_prompt;
    n_stop = p->n_stop_ids;
    n_bias = p->n_bias;
    top_lp = p->top_logprobs;
    max_tokens = p->max_tokens;
    ckind = sl->constraint_kind;
    clen = sl->constraint_len;

    if (n_prompt == 0 || n_prompt > max_prompt
        || n_prompt > LLM_RING_MAX_PROMPT
        || n_stop > LLM_RING_MAX_STOP_IDS || n_bias > LLM_RING_MAX_BIAS
        || top_lp > LLM_RING_MAX_TOP_LP || max_tokens > INT32_MAX)
    {
        snprintf(err, errlen, "%u prompt tokens, %u stop ids, %u biases, "
                 "%u top logprobs, max_tokens %u", n_prompt, n_stop, n_bias,
                 top_lp, max_tokens);
        return -1;
    }

    /* the constraint's text shares prompt[] with the ids */
    if (ckind > LLM_CONSTRAINT_REGEX || clen > LLM_CONSTRAINT_MAX_BYTES
        || (uint64_t) n_prompt * sizeof(int32_t) + clen > sizeof(sl->prompt)
        || (ckind == LLM_CONSTRAINT_NONE && clen != 0))
    {
        snprintf(err, errlen, "constraint kind %u of %u bytes after %u "
                 "prompt tokens", ckind, clen, n_prompt);
        return -1;
    }

    memset(req, 0, sizeof(*req));
    req->prompt = sl->prompt;
    req->n_prompt = (int) n_prompt;
    llm_sampling_from_ring(p, &req->sampling);
    req->sampling.top_logprobs = (int) top_lp;
    for (i = 0; i < n_bias; i++) {
        bias[i].token = p->bias_ids[i];
        bias[i].bias = p->bias[i];
    }
    req->sampling.logit_bias = bias;
    req->sampling.n_logit_bias = (int) n_bias;
    req->max_tokens = (int) max_tokens;
    req->stop_ids = p->stop_ids;
    req->n_stop_ids = (int) n_stop;
    req->ignore_eos = 1;    /* the worker sends the stop ids it wants */
    req->priority = sl->priority;
    req->constraint_kind = (int) ckind;
    req->constraint = (const char *) (sl->prompt + n_prompt);
    req->constraint_len = clen;
    req->fair_key = sl->fair_key;
    req->speculative = sl->speculative != 0 ? -1 : 0;

    return 0;
}


static uint32_t
llm_slot_index(llm_server *s, llm_slot *sl)
{
    return (uint32_t) (((char *) sl - ((char *) s->ring
                                       + s->ring->slots_offset))
                       / s->ring->slot_size);
}


/*
 * The CHOICE slots a GENERATE slot of n choices lists: each in range, the
 * client's, SUBMITTED, of kind CHOICE, listed once and not the parent.
 * 0 and idx[] (the n - 1 indexes, read once), or -1 with why in err.
 */
static int
llm_slot_choices(llm_server *s, llm_client *c, llm_slot *sl, uint32_t n,
    uint32_t *idx, char *err, size_t errlen)
{
    uint32_t   i, k, self = llm_slot_index(s, sl);
    llm_slot  *cs;

    if (n > LLM_RING_MAX_CHOICES) {
        snprintf(err, errlen, "%u choices (at most %d)", n,
                 LLM_RING_MAX_CHOICES);
        return -1;
    }
    for (i = 0; i + 1 < n; i++) {
        idx[i] = sl->choice_slots[i];
        if (idx[i] >= s->ring->n_slots || idx[i] == self) {
            snprintf(err, errlen, "choice %u: slot %u", i + 1, idx[i]);
            return -1;
        }
        for (k = 0; k < i; k++) {
            if (idx[k] == idx[i]) {
                snprintf(err, errlen, "choice %u: slot %u listed twice",
                         i + 1, idx[i]);
                return -1;
            }
        }
        cs = llm_ring_slot(s->ring, idx[i]);
        if (cs->owner != c->id || cs->kind != LLM_KIND_CHOICE
            || atomic_load_explicit(&cs->state, memory_order_acquire)
               != LLM_SLOT_SUBMITTED)
        {
            snprintf(err, errlen, "choice %u: slot %u is not a submitted "
                     "choice slot of this client", i + 1, idx[i]);
            return -1;
        }
    }
    return 0;
}


/* a GENERATE slot: validate what the worker wrote, hand it over */
static void
llm_slot_generate(llm_server *s, llm_client *c, llm_slot *sl)
{
    int              rc;
    char             err[256];
    uint32_t         idx, i, n, cidx[LLM_RING_MAX_CHOICES];
    llm_seq         *seq, *cseq[LLM_RING_MAX_CHOICES];
    void            *cusers[LLM_RING_MAX_CHOICES];
    llm_slot        *cs;
    llm_sched       *sched;
    llm_request      req;
    llm_logit_bias   bias[LLM_RING_MAX_BIAS];

    sched = atomic_load_explicit(&s->sched, memory_order_acquire);
    if (sched == NULL || s->quit) {
        llm_slot_finish(s, sl, LLM_FINISH_ERROR, LLM_ERR_NOT_READY,
                        sched ? "engine draining" : "engine not ready");
        return;
    }

    if (llm_slot_request(sl, s->ring->max_prompt, &req, bias, err,
                         sizeof(err)) != 0)
    {
        llm_log(LLM_LOG_ERR, "client %u: invalid generation slot (%s)",
                c->id, err);
        llm_slot_finish(s, sl, LLM_FINISH_ERROR, LLM_ERR_BAD_REQUEST,
                        "invalid request in the ring");
        return;
    }

    n = sl->n_choices;
    if (n > 1 && llm_slot_choices(s, c, sl, n, cidx, err, sizeof(err)) != 0)
    {
        llm_log(LLM_LOG_ERR, "client %u: invalid generation slot (%s)",
                c->id, err);
        llm_slot_finish(s, sl, LLM_FINISH_ERROR, LLM_ERR_BAD_REQUEST,
                        "invalid choice slots in the ring");
        return;
    }
    n = n > 1 ? n : 1;

    idx = llm_slot_index(s, sl);
    s->users[idx].server = s;
    s->users[idx].index = idx;
    s->users[idx].owner = c->id;
    s->users[idx].seq = NULL;
    req.user = &s->users[idx];
    for (i = 0; i + 1 < n; i++) {
        cs = llm_ring_slot(s->ring, cidx[i]);
        atomic_store(&cs->state, LLM_SLOT_RUNNING);
        cs->t_submit_ns = sl->t_submit_ns;
        s->users[cidx[i]].server = s;
        s->users[cidx[i]].index = cidx[i];
        s->users[cidx[i]].owner = c->id;
        s->users[cidx[i]].seq = NULL;
        cusers[i] = &s->users[cidx[i]];
    }
    req.n_choices = (int) n;
    req.choice_users = cusers;
    req.choice_out = cseq;

    rc = llm_sched_add(sched, &req, &seq, err, sizeof(err));
    if (rc != LLM_SCHED_OK) {
        if (req.constraint_kind != LLM_CONSTRAINT_NONE) {
            /* a cached refusal: the line its first compile logged, again */
            llm_log(LLM_LOG_INFO, "slot %u: constraint refused: %s", idx,
                    err);
        }
        llm_slot_finish(s, sl, LLM_FINISH_ERROR, ring_error(rc), err);
        for (i = 0; i + 1 < n; i++) {
            llm_slot_finish(s, llm_ring_slot(s->ring, cidx[i]),
                            LLM_FINISH_ERROR, ring_error(rc), err);
        }
        return;
    }

    s->users[idx].seq = seq;
    for (i = 0; i + 1 < n; i++) {
        s->users[cidx[i]].seq = cseq[i];
    }
}


/* the worker gave up on these: stop computing them now */
static void
llm_scan_cancels(llm_server *s, llm_client *c)
{
    uint32_t    i;
    llm_slot   *sl;
    llm_sched  *sched = atomic_load(&s->sched);

    if (sched == NULL) {
        return;
    }

    for (i = 0; i < s->ring->n_slots; i++) {
        sl = llm_ring_slot(s->ring, i);
        if (s->users[i].seq != NULL && s->users[i].owner == c->id
            && atomic_load(&sl->cancel))
        {
            llm_sched_cancel(sched, s->users[i].seq);
        }
    }
}


static void
llm_publish_stats(llm_server *s, llm_sched *sched)
{
    llm_sched_stats   st;
    llm_ring_stats   *rs = &s->ring->stats;

    llm_sched_stats_get(sched, &st);
    atomic_store(&rs->running, (uint32_t) st.running);
    atomic_store(&rs->waiting, (uint32_t) (st.waiting + st.compiling));
    atomic_store(&rs->kv_blocks_total, (uint32_t) st.kv_blocks_total);
    atomic_store(&rs->kv_blocks_used, (uint32_t) st.kv_blocks_used);
    atomic_store(&rs->kv_blocks_cached, (uint32_t) st.kv_blocks_cached);
    atomic_store(&rs->requests, st.requests);
    atomic_store(&rs->prompt_tokens, st.prompt_tokens);
    atomic_store(&rs->generation_tokens, st.generation_tokens);
    atomic_store(&rs->cached_tokens, st.prefix_hit_tokens);
    atomic_store(&rs->prefix_queries, st.prompt_tokens);
    atomic_store(&rs->preemptions, st.preemptions);
    atomic_store(&rs->cancelled, st.cancelled);
    atomic_store(&rs->steps, st.steps);
    atomic_store(&rs->spec_drafts, st.spec_drafts);
    atomic_store(&rs->spec_draft_tokens, st.spec_draft_tokens);
    atomic_store(&rs->spec_accepted_tokens, st.spec_accepted_tokens);
}


/* a KICK: take what this client submitted */
static void
llm_scan_slots(llm_server *s, llm_client *c)
{
    uint32_t   i;
    llm_slot  *sl;

    for (i = 0; i < s->ring->n_slots; i++) {
        sl = llm_ring_slot(s->ring, i);
        if (atomic_load_explicit(&sl->state, memory_order_acquire)
                != LLM_SLOT_SUBMITTED
            || sl->owner != c->id || sl->kind == LLM_KIND_CHOICE)
        {
            continue;       /* a CHOICE slot goes with its GENERATE one */
        }
        llm_slot_take(s, c, sl);
    }
}


static void
llm_client_read(llm_server *s, llm_client *c)
{
    ssize_t  n;
    llm_msg  m;
    int      kicked = 0;

    for (;;) {
        n = recv(c->fd, &m, sizeof(m), 0);
        if (n == (ssize_t) sizeof(m)) {
            if (m.type == LLM_MSG_KICK) {
                kicked = 1;
            } else {
                llm_log(LLM_LOG_WARN, "client %u: unexpected message %u",
                        c->id, m.type);
            }
            continue;
        }
        if (n == -1 && (errno == EAGAIN || errno == EINTR)) {
            break;
        }
        if (n > 0) {
            llm_log(LLM_LOG_WARN, "client %u: short message (%zd bytes)",
                    c->id, n);
            continue;
        }
        llm_client_close(s, c);
        return;
    }

    if (kicked) {
        llm_scan_cancels(s, c);
        llm_scan_slots(s, c);
    }
}


static void
llm_send_wakes(llm_server *s)
{
    int      i;
    llm_msg  m;

    memset(&m, 0, sizeof(m));
    m.type = LLM_MSG_WAKE;

    for (i = 0; i < s->n_clients; i++) {
        if (!s->clients[i].wake) {
            continue;
        }
        s->clients[i].wake = 0;
        /* EAGAIN: WAKEs are already queued there, and one is enough */
        (void) send(s->clients[i].fd, &m, sizeof(m),
                    MSG_DONTWAIT | MSG_NOSIGNAL);
    }
}


/* ---------------------------------------------------------------------- */
/* start-up                                                               */

static int
llm_listen(llm_server *s)
{
    size_t              len;
    socklen_t           alen;
    struct sockaddr_un  sa;

    /*
     * nginx bound it for us: that worker won the right to start us. We
     * listen, not the worker, so that SO_PEERCRED tells a connecting
     * worker our pid (the kernel records the listener's credentials).
     */
    if (s->opt.listen_fd >= 0) {
        s->listen_fd = s->opt.listen_fd;
        if (fcntl(s->listen_fd, F_SETFD, FD_CLOEXEC) == -1
            || fcntl(s->listen_fd, F_SETFL, O_NONBLOCK) == -1
            || listen(s->listen_fd, 128) == -1)
        {
            llm_log(LLM_LOG_EMERG, "listen fd %d: %s", s->listen_fd,
                    strerror(errno));
            return -1;
        }
        return 0;
    }

    len = strlen(s->opt.socket_name);
    if (len + 1 > sizeof(sa.sun_path)) {
        llm_log(LLM_LOG_EMERG, "socket name too long");
        return -1;
    }

    s->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK
                                   | SOCK_CLOEXEC, 0);
    if (s->listen_fd == -1) {
        llm_log(LLM_LOG_EMERG, "socket() failed: %s", strerror(errno));
        return -1;
    }

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path + 1, s->opt.socket_name, len);   /* abstract */
    alen = offsetof(struct sockaddr_un, sun_path) + 1 + len;

    if (bind(s->listen_fd, (struct sockaddr *) &sa, alen) == -1) {
        if (errno == EADDRINUSE) {
            return 1;   /* another engine for this config won the race */
        }
        llm_log(LLM_LOG_EMERG, "bind(@%s) failed: %s", s->opt.socket_name,
                strerror(errno));
        return -1;
    }

    if (listen(s->listen_fd, 128) == -1) {
        llm_log(LLM_LOG_EMERG, "listen() failed: %s", strerror(errno));
        return -1;
    }

    return 0;
}


static int
llm_watch(llm_server *s, int fd, uint64_t tag)
{
    struct epoll_event ev;

    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) == -1) {
        llm_log(LLM_LOG_EMERG, "epoll_ctl() failed: %s", strerror(errno));
        return -1;
    }
    return 0;
}


static int
llm_setup_events(llm_server *s)
{
    sigset_t set;

    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->epfd == -1) {
        llm_log(LLM_LOG_EMERG, "epoll_create1() failed: %s", strerror(errno));
        return -1;
    }

    /* nginx's master is our reason to live: go when it goes */
    s->pidfd = (int) syscall(SYS_pidfd_open, s->opt.master_pid, 0);
    if (s->pidfd == -1) {
        llm_log(LLM_LOG_EMERG, "pidfd_open(%d) failed: %s",
                (int) s->opt.master_pid, strerror(errno));
        return -1;
    }

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    s->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (s->sigfd == -1) {
        llm_log(LLM_LOG_EMERG, "signalfd() failed: %s", strerror(errno));
        return -1;
    }

    s->compiled_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->compiled_fd == -1) {
        llm_log(LLM_LOG_EMERG, "eventfd() failed: %s", strerror(errno));
        return -1;
    }

    if (llm_watch(s, s->compiled_fd, LLM_TAG_COMPILED) != 0
        || llm_watch(s, s->listen_fd, LLM_TAG_LISTEN) != 0
        || llm_watch(s, s->pidfd, LLM_TAG_PIDFD) != 0
        || llm_watch(s, s->sigfd, LLM_TAG_SIGNAL) != 0)
    {
        return -1;
    }

    return 0;
}


static void
llm_on_signal(llm_server *s)
{
    struct signalfd_siginfo si;

    while (read(s->sigfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
        switch (si.ssi_signo) {
        case SIGQUIT:
            llm_log(LLM_LOG_NOTICE, "SIGQUIT: draining");
            s->quit = 1;
            atomic_store(&s->ring->state, LLM_ENGINE_DRAINING);
            break;
        case SIGHUP:
            break;
        default:
            llm_log(LLM_LOG_NOTICE, "signal %u: exiting", si.ssi_signo);
            s->terminate = 1;
        }
    }
}


/* ---------------------------------------------------------------------- */
/* the loop                                                               */

/*
 * stderr is nginx's error log as it was when we started. `nginx -s reopen`
 * (log rotation) gives nginx a new file under the same name: follow it
 * once the name points to another file, as the workers do.
 */
static void
llm_follow_log(llm_server *s)
{
    int          fd;
    struct stat  cur, named;

    if (s->opt.error_log == NULL
        || stat(s->opt.error_log, &named) != 0
        || fstat(STDERR_FILENO, &cur) != 0
        || (named.st_dev == cur.st_dev && named.st_ino == cur.st_ino))
    {
        return;
    }

    fd = open(s->opt.error_log, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd == -1) {
        return;     /* keep the old file; nothing better to report to */
    }

    if (dup2(fd, STDERR_FILENO) != -1) {
        llm_log(LLM_LOG_NOTICE, "reopened the error log %s",
                s->opt.error_log);
    }
    close(fd);
}



static void
llm_dispatch(llm_server *s, struct epoll_event *ev)
{
    uint64_t     tag = ev->data.u64;
    llm_client  *c;

    switch (tag) {
    case LLM_TAG_LISTEN:
        llm_accept(s);
        return;
    case LLM_TAG_PIDFD:
        llm_log(LLM_LOG_NOTICE, "nginx master %d exited: engine exiting",
                (int) s->opt.master_pid);
        s->terminate = 1;
        return;
    case LLM_TAG_SIGNAL:
        llm_on_signal(s);
        return;
    case LLM_TAG_COMPILED:
        {
            uint64_t  n;

            /* the step that follows takes what was compiled */
            (void) read(s->compiled_fd, &n, sizeof(n));
        }
        return;
    }

    c = llm_client_by_id(s, (uint32_t) (tag - LLM_TAG_CLIENT));
    if (c != NULL) {
        llm_client_read(s, c);
    }
}


static void
llm_loop(llm_server *s)
{
    int                 i, n, rc, busy;
    uint32_t            state, last_state;
    uint64_t            now, last_log_check_ns = 0;
    llm_sched          *sched;
    struct epoll_event  evs[32];

    busy = 0;

    s->alone_since_ns = llm_now_ns();
    last_state = atomic_load(&s->ring->state);

    while (!s->terminate) {
        sched = atomic_load_explicit(&s->sched, memory_order_acquire);

        /* busy: just look at the sockets between steps */
        n = epoll_wait(s->epfd, evs, 32, busy ? 0 : 500);
        if (n == -1 && errno != EINTR) {
            llm_log(LLM_LOG_ALERT, "epoll_wait() failed: %s", strerror(errno));
            return;
        }

        for (i = 0; i < n; i++) {
            llm_dispatch(s, &evs[i]);
        }

        busy = 0;
        if (sched != NULL) {
            if (llm_sched_has_work(sched)) {
                /* 0: everything runnable is held back by full streams */
                rc = llm_step(s, sched);
                if (rc < 0) {
                    /* the batch's requests ended with this error (their
                       workers reply with it); the engine serves on */
                    llm_log(LLM_LOG_ERR, "engine step failed: %s",
                            s->backend->err);
                }
                busy = rc != 0;
            }
            llm_phase_idle(s, llm_now_ns());
            llm_publish_stats(s, sched);     /* cancels change them too */
        }

        /* requests wait in the workers for READY (or FAILED): tell them */
        state = atomic_load(&s->ring->state);
        if (state != last_state) {
            last_state = state;
            for (i = 0; i < s->n_clients; i++) {
                s->clients[i].wake = 1;
            }
        }

        llm_send_wakes(s);

        now = llm_now_ns();
        atomic_store(&s->ring->heartbeat_ns, now);

        if (now - last_log_check_ns > 1000000000ULL) {
            last_log_check_ns = now;
            llm_follow_log(s);
        }

        /*
         * Workers keep a connection open for as long as they may need us;
         * when the last one has been gone a while (a reload that changed
         * our config, or a quit), nobody will come back to this engine.
         */
        if (s->n_clients == 0 && now - s->alone_since_ns > LLM_IDLE_EXIT_NS) {
            llm_log(LLM_LOG_NOTICE, "no nginx worker connected for %llu s: "
                    "engine exiting",
                    (unsigned long long) (LLM_IDLE_EXIT_NS / 1000000000ULL));
            return;
        }

        if (s->quit && (sched == NULL || !llm_sched_has_work(sched))) {
            llm_log(LLM_LOG_NOTICE, "drained: engine exiting");
            return;
        }
    }
}


int
llm_server_main(int argc, char **argv)
{
    int          rc;
    char         ident[160];
    pthread_t    ticker;
    llm_server  *s;

    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        llm_log(LLM_LOG_EMERG, "out of memory");
        return 1;
    }
    s->listen_fd = s->epfd = s->pidfd = s->sigfd = s->ring_fd = -1;
    s->compiled_fd = -1;

    if (llm_server_parse_opts(&s->opt, argc, argv) != 0) {
        return 2;
    }

    snprintf(ident, sizeof(ident), "ngx_llm engine \"%s\"", s->opt.name);
    llm_log_set_ident(ident);

    rc = llm_listen(s);
    if (rc == 1) {
        return 0;
    }
    if (rc != 0
        || llm_ring_create(s) != 0
        || llm_setup_events(s) != 0)
    {
        return 1;
    }

    llm_log(LLM_LOG_NOTICE, "started for nginx master %d: model \"%s\", "
            "%u ring slots (%llu bytes)", (int) s->opt.master_pid,
            s->opt.model_path, s->ring->n_slots,
            (unsigned long long) s->ring_size);

    if (pthread_create(&s->loader, NULL, llm_loader_thread, s) != 0
        || pthread_create(&ticker, NULL, llm_alive_thread, s) != 0)
    {
        llm_log(LLM_LOG_EMERG, "pthread_create() failed");
        return 1;
    }
    pthread_detach(s->loader);
    pthread_detach(ticker);

    llm_loop(s);

    /* the mapping and the socket have no names: closing is cleaning up */
    _exit(0);
}
