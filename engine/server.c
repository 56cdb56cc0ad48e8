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
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "gguf.h"
#include "log.h"
#include "ngx_llm_ring.h"
#include "server.h"

#define LLM_MAX_CLIENTS       256
#define LLM_IDLE_EXIT_NS      (3ULL * 1000000000ULL)

typedef struct {
    int                 fd;
    uint32_t            id;
    int                 wake;           /* a WAKE is owed this turn */
} llm_client;

typedef struct {
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
    gguf_file           gguf;
    int                 quit;           /* SIGQUIT: drain, then exit */
    int                 terminate;
} llm_server;

/* epoll tags: small integers below LLM_TAG_CLIENT, clients above */
enum { LLM_TAG_LISTEN = 1, LLM_TAG_PIDFD, LLM_TAG_SIGNAL, LLM_TAG_CLIENT };


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


int
llm_server_parse_opts(llm_server_opts *o, int argc, char **argv)
{
    int         i;
    uint64_t    v;
    const char *k;

    memset(o, 0, sizeof(*o));
    o->model_fd = -1;
    o->listen_fd = -1;
    o->threads = 2;
    o->max_num_seqs = 64;
    o->max_model_len = 8192;
    o->max_batched_tokens = 2048;
    o->max_queued = 256;
    o->kv_cache_bytes = 256ULL << 20;
    o->tensor_parallel = 1;
    o->backend = "cpu";
    o->name = "default";

    for (i = 1; i < argc; i++) {
        k = argv[i];
        if (i + 1 >= argc) {
            llm_log(LLM_LOG_EMERG, "option \"%s\" needs a value", k);
            return -1;
        }

        if (strcmp(k, "--name") == 0) {
            o->name = argv[++i];
            continue;
        }
        if (strcmp(k, "--socket") == 0) {
            o->socket_name = argv[++i];
            continue;
        }
        if (strcmp(k, "--model") == 0) {
            o->model_path = argv[++i];
            continue;
        }
        if (strcmp(k, "--backend") == 0) {
            o->backend = argv[++i];
            continue;
        }

        if (llm_parse_u64(argv[i + 1], &v) != 0) {
            llm_log(LLM_LOG_EMERG, "option \"%s\": invalid number \"%s\"",
                    k, argv[i + 1]);
            return -1;
        }
        i++;

        if (strcmp(k, "--model-fd") == 0) {
            o->model_fd = (int) v;
        } else if (strcmp(k, "--listen-fd") == 0) {
            o->listen_fd = (int) v;
        } else if (strcmp(k, "--master-pid") == 0) {
            o->master_pid = (pid_t) v;
        } else if (strcmp(k, "--config-hash") == 0) {
            o->config_hash = v;
        } else if (strcmp(k, "--threads") == 0) {
            o->threads = (int) v;
        } else if (strcmp(k, "--max-num-seqs") == 0) {
            o->max_num_seqs = (int) v;
        } else if (strcmp(k, "--max-model-len") == 0) {
            o->max_model_len = (int) v;
        } else if (strcmp(k, "--max-batched-tokens") == 0) {
            o->max_batched_tokens = (int) v;
        } else if (strcmp(k, "--max-queued") == 0) {
            o->max_queued = (int) v;
        } else if (strcmp(k, "--kv-cache-memory") == 0) {
            o->kv_cache_bytes = v;
        } else if (strcmp(k, "--tensor-parallel") == 0) {
            o->tensor_parallel = (int) v;
        } else {
            llm_log(LLM_LOG_EMERG, "unknown option \"%s\"", k);
            return -1;
        }
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


/* ---------------------------------------------------------------------- */
/* the ring                                                               */

static int
llm_ring_create(llm_server *s)
{
    uint32_t          n_slots;
    llm_ring_header  *h;

    n_slots = s->opt.max_num_seqs + s->opt.max_queued + 16;
    if (n_slots > LLM_RING_MAX_SLOTS) {
        n_slots = LLM_RING_MAX_SLOTS;
    }
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

    h = mmap(NULL, s->ring_size, PROT_READ | PROT_WRITE, MAP_SHARED,
             s->ring_fd, 0);
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
    atomic_store(&h->state, LLM_ENGINE_STARTING);

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
llm_fill_facts(llm_model_facts *f, const gguf_file *g)
{
    char         key[96];
    uint32_t     elem;
    uint64_t     i, n, ne, bytes_by_type[GGML_TYPE_COUNT] = { 0 };
    uint32_t     t, best;
    const void  *data;

    llm_copy_str(f->arch, sizeof(f->arch), g, "general.architecture");
    llm_copy_str(f->name, sizeof(f->name), g, "general.name");

#define LLM_ARCH_U32(field, suffix)                                          \
    snprintf(key, sizeof(key), "%s." suffix, f->arch);                       \
    (void) gguf_get_u32(g, key, &f->field)

    LLM_ARCH_U32(context_length, "context_length");
    LLM_ARCH_U32(n_layers, "block_count");
    LLM_ARCH_U32(dim, "embedding_length");
    LLM_ARCH_U32(n_heads, "attention.head_count");
    LLM_ARCH_U32(n_kv_heads, "attention.head_count_kv");
#undef LLM_ARCH_U32

    if (gguf_get_arr(g, "tokenizer.ggml.tokens", &elem, &n, &data) == 0) {
        f->vocab_size = (uint32_t) n;
    }

    for (i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *tn = &g->tensors[i];

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


static void *
llm_loader_thread(void *arg)
{
    int          rc;
    llm_server  *s = arg;

    if (s->opt.model_fd >= 0) {
        rc = gguf_open_fd(&s->gguf, s->opt.model_fd, s->opt.model_path);
    } else {
        rc = gguf_open(&s->gguf, s->opt.model_path);
    }

    if (rc != 0) {
        llm_log(LLM_LOG_ERR, "cannot load model: %s", s->gguf.err);
        llm_ring_fail(s, s->gguf.err);
        return NULL;
    }

    llm_fill_facts(&s->ring->model, &s->gguf);
    atomic_store(&s->ring->state, LLM_ENGINE_WARMING);

    llm_log(LLM_LOG_NOTICE, "model \"%s\" loaded: %s, %" PRIu64
            " parameters, %" PRIu64 " bytes of weights (%s), %u layers, "
            "context %u, vocabulary %u",
            s->opt.model_path, s->ring->model.arch, s->ring->model.n_params,
            s->ring->model.weight_bytes, s->ring->model.file_type,
            s->ring->model.n_layers, s->ring->model.context_length,
            s->ring->model.vocab_size);

    atomic_store(&s->ring->state, LLM_ENGINE_READY);
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
    uint32_t   i;
    llm_slot  *sl;

    for (i = 0; i < s->ring->n_slots; i++) {
        sl = llm_ring_slot(s->ring, i);
        if (sl->owner == id && atomic_load(&sl->state) != LLM_SLOT_FREE) {
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
llm_slot_finish(llm_slot *sl, uint32_t finish, uint32_t error,
    const char *message)
{
    sl->finish = finish;
    sl->error = error;
    llm_strlcpy(sl->message, message, sizeof(sl->message));
    sl->t_done_ns = llm_now_ns();
    atomic_store_explicit(&sl->state, LLM_SLOT_DONE, memory_order_release);
}


static void
llm_slot_take(llm_server *s, llm_client *c, llm_slot *sl)
{
    uint32_t state;

    atomic_store(&sl->state, LLM_SLOT_RUNNING);

    switch (sl->kind) {

    case LLM_KIND_PING:
        atomic_fetch_add(&s->ring->stats.pings, 1);
        state = atomic_load(&s->ring->state);
        llm_slot_finish(sl, LLM_FINISH_STOP, LLM_ERR_NONE,
                        state == LLM_ENGINE_FAILED ? s->ring->reason
                                                   : llm_state_name(state));
        break;

    case LLM_KIND_GENERATE:
        llm_slot_finish(sl, LLM_FINISH_ERROR, LLM_ERR_NOT_READY,
                        "this engine does not generate yet");
        break;

    default:
        llm_log(LLM_LOG_ERR, "client %u: slot with invalid kind %u",
                c->id, sl->kind);
        llm_slot_finish(sl, LLM_FINISH_ERROR, LLM_ERR_BAD_REQUEST,
                        "invalid slot kind");
    }

    c->wake = 1;
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
            || sl->owner != c->id)
        {
            continue;
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

    /* nginx bound it for us: that worker won the right to start us */
    if (s->opt.listen_fd >= 0) {
        s->listen_fd = s->opt.listen_fd;
        if (fcntl(s->listen_fd, F_SETFD, FD_CLOEXEC) == -1
            || fcntl(s->listen_fd, F_SETFL, O_NONBLOCK) == -1)
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

    if (llm_watch(s, s->listen_fd, LLM_TAG_LISTEN) != 0
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
    }

    c = llm_client_by_id(s, (uint32_t) (tag - LLM_TAG_CLIENT));
    if (c != NULL) {
        llm_client_read(s, c);
    }
}


static void
llm_loop(llm_server *s)
{
    int                 i, n;
    uint32_t            state, last_state;
    uint64_t            now;
    struct epoll_event  evs[32];

    s->alone_since_ns = llm_now_ns();
    last_state = atomic_load(&s->ring->state);

    while (!s->terminate) {
        n = epoll_wait(s->epfd, evs, 32, 500);
        if (n == -1 && errno != EINTR) {
            llm_log(LLM_LOG_ALERT, "epoll_wait() failed: %s", strerror(errno));
            return;
        }

        for (i = 0; i < n; i++) {
            llm_dispatch(s, &evs[i]);
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

        if (s->quit && atomic_load(&s->ring->stats.running) == 0) {
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
    llm_server  *s;

    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        llm_log(LLM_LOG_EMERG, "out of memory");
        return 1;
    }
    s->listen_fd = s->epfd = s->pidfd = s->sigfd = s->ring_fd = -1;

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

    if (pthread_create(&s->loader, NULL, llm_loader_thread, s) != 0) {
        llm_log(LLM_LOG_EMERG, "pthread_create() failed");
        return 1;
    }
    pthread_detach(s->loader);

    llm_loop(s);

    /* the mapping and the socket have no names: closing is cleaning up */
    _exit(0);
}
