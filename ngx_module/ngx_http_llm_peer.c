/*
 * The engine process, seen from an nginx worker: find it or start it,
 * keep its doorbell connection in the event loop, map its ring, and hand
 * ring slots to requests.
 *
 * One peer per engine config per process, kept across cycles so a
 * single-process nginx (master_process off) survives a reload too. The
 * engine belongs to no worker: a worker that finds none starts it with a
 * double fork, and whichever engine binds the socket name first is the
 * one (see docs/architecture.md). Whoever answers at the name must be
 * that engine: this worker's uid, and the pid its ring says; a watchdog
 * replaces an engine that stops making progress.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_event.h>
#include <ngx_http.h>

#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "ngx_http_llm_module.h"


#define NGX_HTTP_LLM_PEER_IDLE        0
#define NGX_HTTP_LLM_PEER_CONNECTING  1     /* waiting for HELLO */
#define NGX_HTTP_LLM_PEER_CONNECTED   2

#define NGX_HTTP_LLM_SPAWN_INTERVAL   2000  /* ms between starts */
#define NGX_HTTP_LLM_RETRY_MIN        50
#define NGX_HTTP_LLM_RETRY_MAX        1000

/* watchdog auto: max(10 s, 20 x the slowest recent step, or the step
   under way) */
#define NGX_HTTP_LLM_WATCHDOG_FLOOR   10000
#define NGX_HTTP_LLM_WATCHDOG_STEPS   20
#define NGX_HTTP_LLM_STALLED          "engine stalled: replaced by the watchdog"


struct ngx_http_llm_peer_s {
    ngx_queue_t                   queue;
    uint64_t                      hash;
    ngx_http_llm_engine_conf_t   *ecf;       /* newest config using it */
    ngx_connection_t             *conn;
    ngx_uint_t                    state;

    llm_ring_header              *ring;
    size_t                        ring_size;
    uint32_t                      client_id;
    uint64_t                      generation;
    ngx_http_llm_slot_t         **slots;     /* by index, n_slots */
    uint32_t                      next_slot;
    uint64_t                      req_seq;

    ngx_queue_t                   waiters;
    ngx_event_t                   retry;
    ngx_event_t                   watch;     /* the watchdog's */
    ngx_msec_t                    retry_delay;
    ngx_msec_t                    last_spawn;
    ngx_uint_t                    spawned;
    ngx_pid_t                     engine_pid;    /* SO_PEERCRED's */
    ngx_pid_t                     refused_pid;   /* logged once */
    int                           pidfd;     /* the engine's, or -1 */
    char                          sockname[108];
    char                          reason[LLM_RING_REASON_LEN];
};


static void ngx_http_llm_peer_connect(ngx_http_llm_peer_t *peer);
static void ngx_http_llm_peer_lost(ngx_http_llm_peer_t *peer,
    const char *why);
static void ngx_http_llm_peer_read(ngx_event_t *rev);
static void ngx_http_llm_peer_scan(ngx_http_llm_peer_t *peer);
static void ngx_http_llm_peer_watch(ngx_event_t *ev);


static ngx_queue_t  ngx_http_llm_peers;
static ngx_uint_t   ngx_http_llm_peers_inited;


static void
ngx_http_llm_peer_dummy_handler(ngx_event_t *ev)
{
}


/* ---------------------------------------------------------------------- */
/* process hooks                                                          */

ngx_int_t
ngx_http_llm_peer_init_process(ngx_cycle_t *cycle)
{
    ngx_uint_t                    i;
    ngx_http_llm_main_conf_t     *lmcf;
    ngx_http_llm_engine_conf_t  **ep;

    /* workers (and a single-process nginx) talk to engines; helpers not */
    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    lmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_llm_module);
    if (lmcf == NULL) {
        return NGX_OK;
    }

    ep = lmcf->engines.elts;
    for (i = 0; i < lmcf->engines.nelts; i++) {
        if (ngx_http_llm_peer_get(ep[i], cycle->log) == NULL) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


void
ngx_http_llm_peer_exit_process(ngx_cycle_t *cycle)
{
    ngx_queue_t          *q;
    ngx_http_llm_peer_t  *peer;

    if (!ngx_http_llm_peers_inited) {
        return;
    }

    for (q = ngx_queue_head(&ngx_http_llm_peers);
         q != ngx_queue_sentinel(&ngx_http_llm_peers);
         q = ngx_queue_next(q))
    {
        peer = ngx_queue_data(q, ngx_http_llm_peer_t, queue);

        if (peer->retry.timer_set) {
            ngx_del_timer(&peer->retry);
        }

        if (peer->watch.timer_set) {
            ngx_del_timer(&peer->watch);
        }

        /* "open socket left" otherwise; the engine frees our slots */
        if (peer->conn) {
            ngx_close_connection(peer->conn);
            peer->conn = NULL;
        }
    }
}


/* ---------------------------------------------------------------------- */
/* peers                                                                  */

ngx_http_llm_peer_t *
ngx_http_llm_peer_get(ngx_http_llm_engine_conf_t *ecf, ngx_log_t *log)
{
    ngx_queue_t          *q;
    ngx_http_llm_peer_t  *peer;

    if (ecf->peer) {
        return ecf->peer;
    }

    if (!ngx_http_llm_peers_inited) {
        ngx_queue_init(&ngx_http_llm_peers);
        ngx_http_llm_peers_inited = 1;
    }

    for (q = ngx_queue_head(&ngx_http_llm_peers);
         q != ngx_queue_sentinel(&ngx_http_llm_peers);
         q = ngx_queue_next(q))
    {
        peer = ngx_queue_data(q, ngx_http_llm_peer_t, queue);
        if (peer->hash == ecf->hash) {
            peer->ecf = ecf;
            ecf->peer = peer;
            return peer;
        }
    }

    /* on the heap, not in a cycle's pool: it outlives cycles */
    peer = ngx_calloc(sizeof(ngx_http_llm_peer_t), log);
    if (peer == NULL) {
        return NULL;
    }

    peer->hash = ecf->hash;
    peer->ecf = ecf;
    ngx_queue_init(&peer->waiters);
    peer->retry.handler = ngx_http_llm_peer_dummy_handler;
    peer->retry.data = peer;
    peer->retry.log = ngx_cycle->log;
    peer->retry.cancelable = 1;   /* must not hold up a worker's exit */
    peer->watch.handler = ngx_http_llm_peer_watch;
    peer->watch.data = peer;
    peer->watch.log = ngx_cycle->log;
    peer->watch.cancelable = 1;
    peer->pidfd = -1;
    peer->retry_delay = NGX_HTTP_LLM_RETRY_MIN;
    ngx_cpystrn((u_char *) peer->reason, (u_char *) "engine starting",
                sizeof(peer->reason));

    ngx_queue_insert_tail(&ngx_http_llm_peers, &peer->queue);
    ecf->peer = peer;

    ngx_http_llm_peer_connect(peer);

    return peer;
}


llm_ring_header *
ngx_http_llm_peer_ring(ngx_http_llm_peer_t *peer)
{
    return peer->state == NGX_HTTP_LLM_PEER_CONNECTED ? peer->ring : NULL;
}


/* NGX_OK: ready; NGX_AGAIN: may become ready; NGX_DECLINED: failed */
ngx_int_t
ngx_http_llm_peer_ready(ngx_http_llm_peer_t *peer)
{
    uint32_t  st;

    if (peer->state != NGX_HTTP_LLM_PEER_CONNECTED) {
        return NGX_AGAIN;
    }

    st = atomic_load(&peer->ring->state);

    switch (st) {
    case LLM_ENGINE_READY:
        return NGX_OK;
    case LLM_ENGINE_FAILED:
        return NGX_DECLINED;
    default:
        return NGX_AGAIN;
    }
}


const char *
ngx_http_llm_peer_reason(ngx_http_llm_peer_t *peer)
{
    uint32_t  st;

    if (peer->state != NGX_HTTP_LLM_PEER_CONNECTED) {
        return peer->reason;
    }

    st = atomic_load(&peer->ring->state);

    switch (st) {
    case LLM_ENGINE_STARTING:
        return "engine loading the model";
    case LLM_ENGINE_WARMING:
        return "engine warming up";
    case LLM_ENGINE_READY:
        return "ready";
    case LLM_ENGINE_DRAINING:
        return "engine draining";
    case LLM_ENGINE_FAILED:
        /* the engine wrote it; make sure it is terminated */
        ngx_memcpy(peer->reason, peer->ring->reason, sizeof(peer->reason));
        peer->reason[sizeof(peer->reason) - 1] = '\0';
        return peer->reason;
    default:
        return "engine in an unknown state";
    }
}


void
ngx_http_llm_peer_wait(ngx_http_llm_peer_t *peer, ngx_http_llm_waiter_t *w)
{
    ngx_queue_insert_tail(&peer->waiters, &w->queue);
}


void
ngx_http_llm_peer_unwait(ngx_http_llm_waiter_t *w)
{
    if (w->queue.next) {
        ngx_queue_remove(&w->queue);
        w->queue.next = NULL;
    }
}


static void
ngx_http_llm_peer_notify_waiters(ngx_http_llm_peer_t *peer)
{
    ngx_int_t               rc;
    ngx_queue_t            *q;
    ngx_http_llm_waiter_t  *w;

    rc = ngx_http_llm_peer_ready(peer);
    if (rc == NGX_AGAIN) {
        return;
    }

    while (!ngx_queue_empty(&peer->waiters)) {
        q = ngx_queue_head(&peer->waiters);
        w = ngx_queue_data(q, ngx_http_llm_waiter_t, queue);
        ngx_queue_remove(q);
        w->queue.next = NULL;
        w->handler(w->data, rc == NGX_OK);
    }
}


/* ---------------------------------------------------------------------- */
/* starting the engine                                                    */

static pid_t
ngx_http_llm_peer_master_pid(void)
{
    /* the engine lives as long as this process's master */
    return ngx_process == NGX_PROCESS_WORKER ? getppid() : ngx_pid;
}


static void
ngx_http_llm_peer_close_from(int lowfd)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, lowfd, ~0U, 0) == 0) {
        return;
    }
#endif
    {
        int fd;

        for (fd = lowfd; fd < 65536; fd++) {
            (void) close(fd);
        }
    }
}


/*
 * In the grandchild: stdio, model on 3, the binary on 4, the listening
 * socket on 5, nothing else (nginx leaves its own sockets without CLOEXEC).
 */
static void
ngx_http_llm_peer_exec(ngx_http_llm_engine_conf_t *ecf, int listen_fd,
    char **argv)
{
    int        log_fd, model_fd, bin_fd, null_fd, lfd;
    sigset_t   set;
    char      *envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };

    sigemptyset(&set);
    sigprocmask(SIG_SETMASK, &set, NULL);

    log_fd = fcntl(ngx_cycle->log->file->fd, F_DUPFD, 10);
    model_fd = fcntl(ecf->model_fd, F_DUPFD, 10);
    bin_fd = fcntl(ecf->binary_fd, F_DUPFD, 10);
    lfd = fcntl(listen_fd, F_DUPFD, 10);
    null_fd = open("/dev/null", O_RDWR);

    if (log_fd == -1 || model_fd == -1 || bin_fd == -1 || lfd == -1
        || null_fd == -1
        || dup2(null_fd, 0) == -1 || dup2(null_fd, 1) == -1
        || dup2(log_fd, 2) == -1 || dup2(model_fd, 3) == -1
        || dup2(bin_fd, 4) == -1 || dup2(lfd, 5) == -1)
    {
        _exit(126);
    }

    ngx_http_llm_peer_close_from(6);

    syscall(SYS_execveat, 4, "", argv, envp, AT_EMPTY_PATH);

    ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, ngx_errno,
                  "llm: exec of engine \"%V\" failed", &ecf->binary);
    _exit(127);
}


static void
ngx_http_llm_peer_sockaddr(ngx_http_llm_peer_t *peer, struct sockaddr_un *sa,
    socklen_t *alen)
{
    size_t  len;

    len = ngx_strlen(peer->sockname);
    ngx_memzero(sa, sizeof(struct sockaddr_un));
    sa->sun_family = AF_UNIX;
    ngx_memcpy(sa->sun_path + 1, peer->sockname, len);     /* abstract */
    *alen = offsetof(struct sockaddr_un, sun_path) + 1 + len;
}


/*
 * The engine's socket name is the lock: the worker that binds it starts
 * the engine and hands it the socket; the others see EADDRINUSE and wait.
 * The engine listens on it, not we: the kernel gives a connecting worker
 * the listener's credentials, which must be the engine's.
 */
static int
ngx_http_llm_peer_bind(ngx_http_llm_peer_t *peer)
{
    int                  fd;
    socklen_t            alen;
    struct sockaddr_un   sa;

    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, ngx_socket_errno,
                      "llm: socket() failed");
        return -1;
    }

    ngx_http_llm_peer_sockaddr(peer, &sa, &alen);

    if (bind(fd, (struct sockaddr *) &sa, alen) == -1) {
        if (ngx_socket_errno != NGX_EADDRINUSE) {
            ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, ngx_socket_errno,
                          "llm: bind(@%s) failed", peer->sockname);
        }
        (void) close(fd);
        return -1;
    }

    return fd;
}


/* the engine's settings as its argv, in buf: "arg\0arg\0..." */
static void
ngx_http_llm_peer_argv(ngx_http_llm_peer_t *peer, char **argv, u_char *buf,
    size_t size)
{
    int                          i;
    u_char                      *p;
    ngx_str_t                   *log_name;
    ngx_http_llm_engine_conf_t  *ecf = peer->ecf;

    i = 0;
    p = buf;

#define LLM_ARG(...)                                                         \
    argv[i++] = (char *) p;                                                  \
    p = ngx_snprintf(p, buf + size - 1 - p, __VA_ARGS__);                    \
    *p++ = '\0'

    LLM_ARG("ngx_llm_engine");
    LLM_ARG("serve");
    LLM_ARG("--name");
    LLM_ARG("%V", &ecf->name);
    LLM_ARG("--socket");
    LLM_ARG("%s", peer->sockname);
    LLM_ARG("--master-pid");
    LLM_ARG("%P", ngx_http_llm_peer_master_pid());
    LLM_ARG("--model-fd");
    LLM_ARG("3");
    LLM_ARG("--listen-fd");
    LLM_ARG("5");
    LLM_ARG("--model");
    LLM_ARG("%V", &ecf->model);
    LLM_ARG("--config-hash");
    LLM_ARG("%uL", ecf->hash);
    LLM_ARG("--backend");
    LLM_ARG("%V", &ecf->backend);
    LLM_ARG("--kv-cache-dtype");
    LLM_ARG("%V", &ecf->kv_cache_dtype);
    LLM_ARG("--threads");
    LLM_ARG("%ui", ecf->threads);
    LLM_ARG("--tensor-parallel");
    LLM_ARG("%ui", ecf->tensor_parallel);
    LLM_ARG("--max-num-seqs");
    LLM_ARG("%ui", ecf->max_num_seqs);
    LLM_ARG("--max-model-len");
    LLM_ARG("%ui", ecf->max_model_len);
    LLM_ARG("--max-batched-tokens");
    LLM_ARG("%ui", ecf->max_batched_tokens);
    LLM_ARG("--max-queued");
    LLM_ARG("%ui", ecf->max_queued_requests);
    LLM_ARG("--kv-cache-memory");
    LLM_ARG("%O", ecf->kv_cache_memory);
    LLM_ARG("--prefix-caching");
    LLM_ARG("%i", ecf->prefix_caching);
    LLM_ARG("--speculative-ngram");
    LLM_ARG("%i", ecf->speculative_ngram);
    LLM_ARG("--speculative-draft-tokens");
    LLM_ARG("%ui", ecf->speculative_draft_tokens);
    LLM_ARG("--speculative-ngram-size");
    LLM_ARG("%ui", ecf->speculative_ngram_size);
    LLM_ARG("--kv-prealloc");
    LLM_ARG("%i", ecf->kv_cache_prealloc);
    LLM_ARG("--task");
    LLM_ARG("%s", llm_task_name((int) ecf->task));

    /* the engine follows the log file when `nginx -s reopen` renames it */
    log_name = &ngx_cycle->log->file->name;
    if (log_name->len > 0 && log_name->data[0] == '/'
        && log_name->len < 1024)
    {
        LLM_ARG("--error-log");
        LLM_ARG("%V", log_name);
    }
    argv[i] = NULL;

#undef LLM_ARG
}


static void
ngx_http_llm_peer_spawn(ngx_http_llm_peer_t *peer)
{
    int                          lfd;
    pid_t                        pid;
    char                        *argv[64];  /* peer_argv's 46 and NULL */
    u_char                       buf[2048];
    ngx_http_llm_counters_t     *cnt;
    ngx_http_llm_engine_conf_t  *ecf = peer->ecf;

    if (peer->spawned
        && ngx_current_msec - peer->last_spawn < NGX_HTTP_LLM_SPAWN_INTERVAL)
    {
        return;
    }

    lfd = ngx_http_llm_peer_bind(peer);
    if (lfd == -1) {
        return;
    }

    peer->spawned = 1;
    peer->last_spawn = ngx_current_msec;

    ngx_http_llm_peer_argv(peer, argv, buf, sizeof(buf));

    pid = fork();

    if (pid == -1) {
        ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, ngx_errno,
                      "llm: fork() to start engine \"%V\" failed",
                      &ecf->name);
        (void) close(lfd);
        return;
    }

    if (pid == 0) {
        /* a session of its own, and no parent among nginx's processes */
        setsid();
        pid = fork();
        if (pid != 0) {
            _exit(pid == -1 ? 1 : 0);
        }
        ngx_http_llm_peer_exec(ecf, lfd, argv);
    }

    /* the engine has it now; connecting is refused until it listens */
    (void) close(lfd);

    /* the middle process exits at once; nginx's SIGCHLD may reap it first */
    (void) waitpid(pid, NULL, 0);

    cnt = ngx_http_llm_counters(ecf);
    if (cnt) {
        (void) ngx_atomic_fetch_add(&cnt->engine_starts, 1);
    }

    ngx_log_error(NGX_LOG_NOTICE, ngx_cycle->log, 0,
                  "llm: started engine \"%V\" for model \"%V\"",
                  &ecf->name, &ecf->model);
}


/* ---------------------------------------------------------------------- */
/* the watchdog                                                           */

/*
 * How long the engine may go without a sign of life (alive_ns, which a
 * stopped or frozen process stops), and its loop without a turn
 * (heartbeat_ns, which a long step delays too). "auto" and "off" allow
 * the first max(10 s, 20 x the slowest recent step); a set time is the
 * first. A turn may take the longer of that and 20 x the step under way
 * (step_expect_ns, which the engine sizes by its tokens before it runs),
 * so a long prefill step is not a stall (docs/directives.md, watchdog).
 * The ring's numbers are capped at a day, as the other side's.
 */
static ngx_msec_t
ngx_http_llm_peer_scaled(uint64_t ns)
{
    uint64_t  ms;

    ms = ngx_min(ns / 1000000, 86400000) * NGX_HTTP_LLM_WATCHDOG_STEPS;

    return (ngx_msec_t) ngx_max(ms, NGX_HTTP_LLM_WATCHDOG_FLOOR);
}


static void
ngx_http_llm_peer_bounds(ngx_http_llm_peer_t *peer, uint64_t expect_ns,
    ngx_msec_t *alive, ngx_msec_t *turn)
{
    ngx_msec_t  ms, w;

    ms = ngx_http_llm_peer_scaled(atomic_load(&peer->ring->step_slowest_ns));

    w = peer->ecf->watchdog;

    *alive = (w == NGX_HTTP_LLM_WATCHDOG_AUTO || w == NGX_HTTP_LLM_WATCHDOG_OFF)
             ? ms : w;
    *turn = ngx_max(*alive, ms);
    *turn = ngx_max(*turn, ngx_http_llm_peer_scaled(expect_ns));
}


/* ms without progress when that is over the bound, else 0 */
ngx_msec_t
ngx_http_llm_peer_stalled(ngx_http_llm_peer_t *peer)
{
    uint64_t    now, alive, beat, expect;
    ngx_msec_t  alive_max, turn_max, a, b;

    if (peer->state != NGX_HTTP_LLM_PEER_CONNECTED) {
        return 0;
    }

    /*
     * The step's expected time before the heartbeat: the engine bumps
     * the heartbeat, then clears it, at a step's end, so reading 0 here
     * means the heartbeat read next is no older than that end.
     */
    expect = atomic_load(&peer->ring->step_expect_ns);
    ngx_http_llm_peer_bounds(peer, expect, &alive_max, &turn_max);

    now = ngx_http_llm_now_ns();
    alive = atomic_load(&peer->ring->alive_ns);
    beat = atomic_load(&peer->ring->heartbeat_ns);
    a = now > alive ? (ngx_msec_t) ((now - alive) / 1000000) : 0;
    b = now > beat ? (ngx_msec_t) ((now - beat) / 1000000) : 0;

    if (a > alive_max) {
        return a;
    }

    return b > turn_max ? b : 0;
}


static ngx_msec_t
ngx_http_llm_peer_watch_interval(ngx_http_llm_peer_t *peer)
{
    ngx_msec_t  alive, turn;

    ngx_http_llm_peer_bounds(peer, 0, &alive, &turn);

    return ngx_max(ngx_min(alive / 4, 1000), 100);
}


static ngx_int_t
ngx_http_llm_peer_kill(ngx_http_llm_peer_t *peer)
{
#ifdef SYS_pidfd_send_signal
    if (peer->pidfd != -1) {
        return syscall(SYS_pidfd_send_signal, peer->pidfd, SIGKILL, NULL, 0)
               == 0 ? NGX_OK : NGX_ERROR;
    }
#endif

    return kill(peer->engine_pid, SIGKILL) == 0 ? NGX_OK : NGX_ERROR;
}


/*
 * Do what a crash does, once for all workers: the first to set
 * watchdog_pid in the ring kills the engine (a claimant that died before
 * it could is replaced). Every worker then sees EOF and fails its
 * requests, and the bind lock starts the new engine.
 */
static ngx_int_t
ngx_http_llm_peer_replace(ngx_http_llm_peer_t *peer, ngx_msec_t stalled)
{
    uint32_t                  owner;
    ngx_err_t                 err;
    ngx_uint_t                level;
    ngx_http_llm_counters_t  *cnt;

    owner = 0;

    if (!atomic_compare_exchange_strong(&peer->ring->watchdog_pid, &owner,
                                        (uint32_t) ngx_pid))
    {
        if (owner == (uint32_t) ngx_pid
            || kill((ngx_pid_t) owner, 0) == 0 || ngx_errno != NGX_ESRCH
            || !atomic_compare_exchange_strong(&peer->ring->watchdog_pid,
                                               &owner, (uint32_t) ngx_pid))
        {
            return NGX_OK;      /* another worker does it */
        }
    }

    ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                  "llm: watchdog: engine \"%V\" (pid %P) made no progress "
                  "for %M ms: killing it to start a new one",
                  &peer->ecf->name, peer->engine_pid, stalled);

    if (ngx_http_llm_peer_kill(peer) != NGX_OK) {
        err = ngx_errno;
        /* ESRCH: it died on its own meanwhile (its EOF is on the way) */
        level = (err == NGX_ESRCH) ? NGX_LOG_INFO : NGX_LOG_ALERT;
        ngx_log_error(level, ngx_cycle->log, err,
                      "llm: watchdog: kill of engine \"%V\" (pid %P) failed",
                      &peer->ecf->name, peer->engine_pid);
    }

    cnt = ngx_http_llm_counters(peer->ecf);
    if (cnt) {
        (void) ngx_atomic_fetch_add(&cnt->watchdog_restarts, 1);
    }

    ngx_http_llm_peer_lost(peer, NGX_HTTP_LLM_STALLED);

    return NGX_DONE;
}


static void
ngx_http_llm_peer_watch(ngx_event_t *ev)
{
    ngx_msec_t            stalled;
    ngx_http_llm_peer_t  *peer = ev->data;

    if (peer->state != NGX_HTTP_LLM_PEER_CONNECTED) {
        return;     /* armed again when it connects */
    }

    stalled = ngx_http_llm_peer_stalled(peer);

    if (stalled && peer->ecf->watchdog != NGX_HTTP_LLM_WATCHDOG_OFF
        && ngx_http_llm_peer_replace(peer, stalled) == NGX_DONE)
    {
        return;
    }

    ngx_add_timer(ev, ngx_http_llm_peer_watch_interval(peer));
}


/* ---------------------------------------------------------------------- */
/* the doorbell connection                                                */

static void
ngx_http_llm_peer_retry_handler(ngx_event_t *ev)
{
    ngx_http_llm_peer_connect(ev->data);
}


static void
ngx_http_llm_peer_schedule(ngx_http_llm_peer_t *peer)
{
    peer->retry.handler = ngx_http_llm_peer_retry_handler;
    peer->retry.log = ngx_cycle->log;

    if (!peer->retry.timer_set) {
        ngx_add_timer(&peer->retry, peer->retry_delay);
    }

    peer->retry_delay = ngx_min(peer->retry_delay * 2,
                                NGX_HTTP_LLM_RETRY_MAX);
}


/*
 * "ngx_llm/<master pid>/<config hash>/<secret>": the secret, made by the
 * master with the engine's shared zone, keeps another user from binding
 * the name before the engine first does (docs/architecture.md).
 */
static ngx_int_t
ngx_http_llm_peer_name(ngx_http_llm_peer_t *peer)
{
    u_char                   *p;
    ngx_http_llm_counters_t  *cnt;

    cnt = ngx_http_llm_counters(peer->ecf);
    if (cnt == NULL) {
        ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, 0,
                      "llm: engine \"%V\" has no shared zone",
                      &peer->ecf->name);
        return NGX_ERROR;
    }

    p = ngx_snprintf((u_char *) peer->sockname,
                     sizeof(peer->sockname) - 1 - 2 * sizeof(cnt->secret),
                     "ngx_llm/%P/%016uxL/", ngx_http_llm_peer_master_pid(),
                     peer->hash);
    p = ngx_hex_dump(p, cnt->secret, sizeof(cnt->secret));
    *p = '\0';

    return NGX_OK;
}


/* one line for each impostor, not one a retry */
static void
ngx_http_llm_peer_refuse(ngx_http_llm_peer_t *peer, ngx_pid_t pid,
    const char *why)
{
    ngx_uint_t  level;

    level = (pid == peer->refused_pid) ? NGX_LOG_INFO : NGX_LOG_ERR;
    peer->refused_pid = pid;

    ngx_log_error(level, ngx_cycle->log, 0,
                  "llm: refused engine \"%V\": %s", &peer->ecf->name, why);

    ngx_cpystrn((u_char *) peer->reason,
                (u_char *) "refused the process at the engine's socket",
                sizeof(peer->reason));
}


/*
 * The abstract name has no permissions, and anybody may read it in
 * /proc/net/unix: a process of another user may have bound it while the
 * engine restarted. The engine listens itself, so SO_PEERCRED is the
 * engine's: it must run as this worker's user.
 */
static ngx_int_t
ngx_http_llm_peer_check_uid(ngx_http_llm_peer_t *peer, int fd)
{
    u_char        why[128], *p;
    socklen_t     len;
    struct ucred  cred;

    len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == -1) {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, ngx_socket_errno,
                      "llm: getsockopt(SO_PEERCRED) on engine \"%V\" failed",
                      &peer->ecf->name);
        return NGX_ERROR;
    }

    if (cred.uid != geteuid()) {
        p = ngx_snprintf(why, sizeof(why) - 1, "its socket is held by uid "
                         "%d (pid %P), not by this worker's uid %d",
                         (int) cred.uid, (ngx_pid_t) cred.pid,
                         (int) geteuid());
        *p = '\0';
        ngx_http_llm_peer_refuse(peer, cred.pid, (char *) why);
        return NGX_DECLINED;
    }

    peer->engine_pid = cred.pid;

    return NGX_OK;
}


static void
ngx_http_llm_peer_connect(ngx_http_llm_peer_t *peer)
{
    int                  fd;
    ngx_err_t            err;
    socklen_t            alen;
    ngx_connection_t    *c;
    struct sockaddr_un   sa;

    if (peer->state != NGX_HTTP_LLM_PEER_IDLE || ngx_exiting) {
        return;
    }

    if (ngx_http_llm_peer_name(peer) != NGX_OK) {
        ngx_http_llm_peer_schedule(peer);
        return;
    }

    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1) {
        ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, ngx_socket_errno,
                      "llm: socket() failed");
        ngx_http_llm_peer_schedule(peer);
        return;
    }

    ngx_http_llm_peer_sockaddr(peer, &sa, &alen);

    if (connect(fd, (struct sockaddr *) &sa, alen) == -1) {
        err = ngx_socket_errno;
        (void) close(fd);

        if (err == NGX_ECONNREFUSED || err == NGX_ENOENT) {
            ngx_http_llm_peer_spawn(peer);

        } else if (err != NGX_EAGAIN) {
            ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, err,
                          "llm: connect() to engine \"%V\" failed",
                          &peer->ecf->name);
        }

        ngx_http_llm_peer_schedule(peer);
        return;
    }

    if (ngx_http_llm_peer_check_uid(peer, fd) != NGX_OK) {
        (void) close(fd);
        ngx_http_llm_peer_schedule(peer);
        return;
    }

    c = ngx_get_connection(fd, ngx_cycle->log);
    if (c == NULL) {
        (void) close(fd);
        ngx_http_llm_peer_schedule(peer);
        return;
    }

    c->data = peer;
    c->read->handler = ngx_http_llm_peer_read;
    c->write->handler = ngx_http_llm_peer_dummy_handler;
    c->read->log = c->log;
    c->write->log = c->log;

    if (ngx_add_event(c->read, NGX_READ_EVENT, 0) != NGX_OK) {
        ngx_close_connection(c);
        ngx_http_llm_peer_schedule(peer);
        return;
    }

    peer->conn = c;
    peer->state = NGX_HTTP_LLM_PEER_CONNECTING;
}


static ngx_int_t
ngx_http_llm_peer_map(ngx_http_llm_peer_t *peer, llm_msg *m, int fd)
{
    int               seals;
    void             *p;
    u_char            why[128];
    struct stat       st;
    llm_ring_header  *h;

    if (m->version != LLM_RING_VERSION) {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                      "llm: engine speaks ring version %uD, we %d",
                      m->version, LLM_RING_VERSION);
        return NGX_ERROR;
    }

    /* a ring that could shrink under us would be a SIGBUS waiting */
    seals = fcntl(fd, F_GET_SEALS);
    if (fstat(fd, &st) == -1 || seals == -1 || !(seals & F_SEAL_SHRINK)
        || (uint64_t) st.st_size < m->ring_size
        || m->ring_size < sizeof(llm_ring_header))
    {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                      "llm: engine's ring is not a sealed mapping of "
                      "%uL bytes", m->ring_size);
        return NGX_ERROR;
    }

    p = mmap(NULL, m->ring_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, ngx_errno,
                      "llm: mmap() of the ring failed");
        return NGX_ERROR;
    }

    h = p;
    if (llm_ring_check(h, m->ring_size) != 0) {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                      "llm: engine's ring header is invalid");
        munmap(p, m->ring_size);
        return NGX_ERROR;
    }

    /* the listener must be the engine whose ring this is */
    if ((ngx_pid_t) h->engine_pid != peer->engine_pid) {
        *ngx_snprintf(why, sizeof(why) - 1, "its socket is held by pid %P, "
                      "its ring says pid %uD", peer->engine_pid,
                      h->engine_pid) = '\0';
        ngx_http_llm_peer_refuse(peer, peer->engine_pid, (char *) why);
        munmap(h, m->ring_size);
        return NGX_DECLINED;
    }

    peer->slots = ngx_calloc(h->n_slots * sizeof(ngx_http_llm_slot_t *),
                             ngx_cycle->log);
    if (peer->slots == NULL) {
        munmap(p, m->ring_size);
        return NGX_ERROR;
    }

    peer->ring = h;
    peer->ring_size = m->ring_size;
    peer->client_id = m->client_id;
    peer->generation = atomic_load(&h->generation);
    peer->state = NGX_HTTP_LLM_PEER_CONNECTED;
    peer->retry_delay = NGX_HTTP_LLM_RETRY_MIN;
    peer->spawned = 0;
    peer->refused_pid = 0;

    /* what the watchdog kills: this process, not a pid reused since */
    peer->pidfd = (int) syscall(SYS_pidfd_open, peer->engine_pid, 0);

    ngx_add_timer(&peer->watch, ngx_http_llm_peer_watch_interval(peer));

    ngx_log_error(NGX_LOG_INFO, ngx_cycle->log, 0,
                  "llm: connected to engine \"%V\" (pid %uD, %uD slots)",
                  &peer->ecf->name, h->engine_pid, h->n_slots);

    return NGX_OK;
}


static void
ngx_http_llm_peer_read(ngx_event_t *rev)
{
    int                   fd;
    ssize_t               n;
    llm_msg               m;
    ngx_int_t             rc;
    ngx_uint_t            wake;
    struct iovec          iov;
    struct msghdr         mh;
    struct cmsghdr       *cm;
    ngx_connection_t     *c = rev->data;
    ngx_http_llm_peer_t  *peer = c->data;
    char                  cbuf[CMSG_SPACE(sizeof(int))];

    wake = 0;

    for ( ;; ) {
        fd = -1;
        iov.iov_base = &m;
        iov.iov_len = sizeof(m);
        ngx_memzero(&mh, sizeof(mh));
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof(cbuf);

        n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);

        if (n == -1) {
            if (ngx_socket_errno == NGX_EAGAIN
                || ngx_socket_errno == NGX_EINTR)
            {
                break;
            }
            /* a reset: the engine died with our KICKs unread */
            ngx_http_llm_peer_lost(peer,
                                   ngx_socket_errno == NGX_ECONNRESET
                                   ? "engine exited"
                                   : "engine connection failed");
            return;
        }

        if (n == 0) {
            ngx_http_llm_peer_lost(peer, "engine exited");
            return;
        }

        for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS
                && cm->cmsg_len == CMSG_LEN(sizeof(int)))
            {
                ngx_memcpy(&fd, CMSG_DATA(cm), sizeof(int));
            }
        }

        if (n != (ssize_t) sizeof(m)) {
            ngx_log_error(NGX_LOG_ERR, c->log, 0,
                          "llm: short message from engine (%z bytes)", n);

        } else if (m.type == LLM_MSG_HELLO
                   && peer->state == NGX_HTTP_LLM_PEER_CONNECTING && fd != -1)
        {
            rc = ngx_http_llm_peer_map(peer, &m, fd);

            if (rc == NGX_DECLINED) {
                /* refused, and said so: no request was in it */
                (void) close(fd);
                ngx_close_connection(c);
                peer->conn = NULL;
                peer->state = NGX_HTTP_LLM_PEER_IDLE;
                ngx_http_llm_peer_schedule(peer);
                return;
            }

            if (rc != NGX_OK) {
                (void) close(fd);
                ngx_http_llm_peer_lost(peer, "engine's ring is invalid");
                return;
            }
            wake = 1;

        } else if (m.type == LLM_MSG_WAKE
                   && peer->state == NGX_HTTP_LLM_PEER_CONNECTED)
        {
            wake = 1;

        } else {
            ngx_log_error(NGX_LOG_ERR, c->log, 0,
                          "llm: unexpected message %uD from engine", m.type);
        }

        if (fd != -1) {
            (void) close(fd);
        }
    }

    if (wake) {
        ngx_http_llm_peer_scan(peer);
        ngx_http_llm_peer_notify_waiters(peer);
    }
}


/* the engine is gone: fail what was in flight at once, then reconnect */
static void
ngx_http_llm_peer_lost(ngx_http_llm_peer_t *peer, const char *why)
{
    uint32_t              i, n;
    ngx_http_llm_slot_t  *s;

    /* what the other workers see of a watchdog's kill is an EOF */
    if (peer->ring && atomic_load(&peer->ring->watchdog_pid) != 0) {
        why = NGX_HTTP_LLM_STALLED;
    }

    if (peer->watch.timer_set) {
        ngx_del_timer(&peer->watch);
    }

    if (peer->pidfd != -1) {
        (void) close(peer->pidfd);
        peer->pidfd = -1;
    }

    ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0,
                  "llm: %s: engine \"%V\" lost, in-flight requests fail",
                  why, &peer->ecf->name);

    ngx_cpystrn((u_char *) peer->reason, (u_char *) why,
                sizeof(peer->reason));

    /* handlers below must see the engine gone, not a ring to wait on */
    peer->state = NGX_HTTP_LLM_PEER_IDLE;

    if (peer->ring) {
        n = peer->ring->n_slots;

        for (i = 0; i < n; i++) {
            s = peer->slots[i];
            if (s == NULL) {
                continue;
            }
            peer->slots[i] = NULL;
            s->slot = NULL;
            s->handler(s);
        }

        munmap(peer->ring, peer->ring_size);
        peer->ring = NULL;
        ngx_free(peer->slots);
        peer->slots = NULL;
    }

    if (peer->conn) {
        ngx_close_connection(peer->conn);
        peer->conn = NULL;
    }

    peer->state = NGX_HTTP_LLM_PEER_IDLE;
    peer->retry_delay = NGX_HTTP_LLM_RETRY_MIN + ngx_random() % 50;
    ngx_http_llm_peer_schedule(peer);
}


static void
ngx_http_llm_peer_doorbell(ngx_http_llm_peer_t *peer)
{
    llm_msg  m;

    ngx_memzero(&m, sizeof(llm_msg));
    m.type = LLM_MSG_KICK;

    /* EAGAIN: KICKs are already queued, and they all mean "look" */
    (void) send(peer->conn->fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
}


/* ---------------------------------------------------------------------- */
/* slots                                                                  */

static void
ngx_http_llm_peer_scan(ngx_http_llm_peer_t *peer)
{
    uint32_t              i, st;
    llm_slot             *sl;
    ngx_http_llm_slot_t  *s;

    if (peer->state != NGX_HTTP_LLM_PEER_CONNECTED) {
        return;
    }

    for (i = 0; i < peer->ring->n_slots; i++) {
        sl = llm_ring_slot(peer->ring, i);
        s = peer->slots[i];

        if (s != NULL) {
            s->handler(s);

        } else if (sl->owner == peer->client_id) {
            /* a cancelled request's slot comes back DONE: free it now */
            st = atomic_load_explicit(&sl->state, memory_order_acquire);
            if (st == LLM_SLOT_DONE) {
                sl->owner = 0;
                atomic_store_explicit(&sl->state, LLM_SLOT_FREE,
                                      memory_order_release);

                ngx_log_debug1(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                               "llm: ring slot %uD freed after its cancel",
                               i);
            }
        }

        if (peer->state != NGX_HTTP_LLM_PEER_CONNECTED) {
            return;     /* a handler found the engine gone */
        }
    }
}


ngx_int_t
ngx_http_llm_peer_claim(ngx_http_llm_peer_t *peer, ngx_http_llm_slot_t *s,
    uint32_t kind)
{
    uint32_t   i, n, idx, expected;
    llm_slot  *sl;

    if (peer->state != NGX_HTTP_LLM_PEER_CONNECTED) {
        return NGX_DECLINED;
    }

    n = peer->ring->n_slots;

    for (i = 0; i < n; i++) {
        idx = (peer->next_slot + i) % n;
        sl = llm_ring_slot(peer->ring, idx);

        expected = LLM_SLOT_FREE;
        if (!atomic_compare_exchange_strong(&sl->state, &expected,
                                            LLM_SLOT_CLAIMED))
        {
            continue;
        }

        peer->next_slot = idx + 1;

        sl->owner = peer->client_id;
        sl->kind = kind;
        sl->req_seq = ++peer->req_seq;
        sl->priority = 0;
        sl->fair_key = 0;
        sl->n_prompt = 0;
        sl->finish = LLM_FINISH_NONE;
        sl->error = LLM_ERR_NONE;
        sl->n_cached = 0;
        sl->message[0] = '\0';
        sl->t_scheduled_ns = 0;
        sl->t_first_token_ns = 0;
        sl->t_done_ns = 0;
        atomic_store(&sl->cancel, 0);
        atomic_store(&sl->out_head, 0);
        atomic_store(&sl->out_tail, 0);

        s->peer = peer;
        s->slot = sl;
        s->index = idx;
        s->generation = peer->generation;
        peer->slots[idx] = s;

        ngx_log_debug3(NGX_LOG_DEBUG_HTTP, s->log, 0,
                       "llm: ring slot %uD taken, kind %uD, request %uL",
                       idx, kind, sl->req_seq);

        return NGX_OK;
    }

    return NGX_BUSY;
}


void
ngx_http_llm_peer_kick(ngx_http_llm_slot_t *s)
{
    if (s->slot != NULL && s->peer->conn != NULL) {
        ngx_http_llm_peer_doorbell(s->peer);
    }
}


ngx_int_t
ngx_http_llm_peer_submit(ngx_http_llm_slot_t *s)
{
    if (s->slot == NULL) {
        return NGX_ERROR;
    }

    s->slot->t_submit_ns = ngx_http_llm_now_ns();
    atomic_store_explicit(&s->slot->state, LLM_SLOT_SUBMITTED,
                          memory_order_release);
    ngx_http_llm_peer_doorbell(s->peer);

    return NGX_OK;
}


/*
 * The request is done with the slot. If the engine still has it, ask it to
 * stop; the slot comes back DONE and peer_scan frees it.
 */
void
ngx_http_llm_peer_release(ngx_http_llm_slot_t *s)
{
    uint32_t              st;
    llm_slot             *sl = s->slot;
    ngx_http_llm_peer_t  *peer = s->peer;

    if (sl == NULL) {
        return;
    }

    s->slot = NULL;

    if (peer->state != NGX_HTTP_LLM_PEER_CONNECTED
        || s->generation != peer->generation)
    {
        return;
    }

    peer->slots[s->index] = NULL;

    st = atomic_load_explicit(&sl->state, memory_order_acquire);

    if (st == LLM_SLOT_DONE || st == LLM_SLOT_CLAIMED) {
        sl->owner = 0;
        atomic_store_explicit(&sl->state, LLM_SLOT_FREE,
                              memory_order_release);

        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, s->log, 0,
                       "llm: ring slot %uD freed", s->index);
        return;
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, s->log, 0,
                   "llm: ring slot %uD cancelled, the engine frees it",
                   s->index);

    atomic_store(&sl->cancel, 1);
    ngx_http_llm_peer_doorbell(peer);
}
