/*
 * The engine process: what nginx workers start (ngx_llm_engine serve).
 *
 * It owns one ring (a sealed memfd) and one abstract unix socket, and lives
 * as long as nginx's master: a pidfd on the master tells it when to go.
 * Workers connect, receive the ring's memfd, and use the connection as a
 * doorbell. See docs/architecture.md for the life cycle and
 * docs/protocol.md for the ring.
 *
 * Its helpers are the server_*.c files beside it, below it in layers
 * (server_int.h lists them).
 *
 * defines: llm_server_main
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#include "server/log.h"
#include "ring/ngx_llm_ring.h"
#include "params/sampling_ring.h"
#include "sched/scheduler.h"
#include "server/server.h"
#include "server/server_int.h"

#define LLM_IDLE_EXIT_NS      (3ULL * 1000000000ULL)

/* epoll tags: small integers below LLM_TAG_CLIENT, clients above */
enum { LLM_TAG_LISTEN = 1, LLM_TAG_PIDFD, LLM_TAG_SIGNAL, LLM_TAG_COMPILED,
       LLM_TAG_CLIENT };


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


/* ---------------------------------------------------------------------- */
/* clients                                                                */


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


static void llm_slot_generate(llm_server *s, llm_client *c, llm_slot *sl);
static void llm_slot_embed(llm_server *s, llm_client *c, llm_slot *sl);


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

    case LLM_KIND_EMBED:
        llm_slot_embed(s, c, sl);
        break;

    default:
        llm_log(LLM_LOG_ERR, "client %u: slot with invalid kind %u",
                c->id, sl->kind);
        llm_slot_finish(s, sl, LLM_FINISH_ERROR, LLM_ERR_BAD_REQUEST,
                        "invalid slot kind");
    }

    c->wake = 1;
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

    if (s->ring->model.pooling != 0) {
        llm_log(LLM_LOG_INFO, "client %u: a generation refused: the model "
                "is %s", c->id, s->ring->model.score ? "a reranker"
                                                     : "an embedding model");
        llm_slot_finish(s, sl, LLM_FINISH_ERROR, LLM_ERR_BAD_REQUEST,
                        s->ring->model.score
                        ? "the model is a reranker: it serves rerank only"
                        : "the model is an embedding model: it serves "
                          "embeddings only");
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


/*
 * An EMBED slot: n_prompt ids, embed_dims and type_split, read once and
 * checked (the model pools, dims within its dim and, below it, only on a
 * Matryoshka model; on a score model dims 0 and type_split inside the
 * input, elsewhere 0), then one embedding request; llm_on_embedding
 * writes the vector (a score model's: its one score).
 */
static void
llm_slot_embed(llm_server *s, llm_client *c, llm_slot *sl)
{
    int                     rc;
    char                    err[256];
    uint32_t                idx, n_prompt, dims, split;
    llm_seq                *seq;
    llm_sched              *sched;
    llm_request             req;
    const llm_model_facts  *f = &s->ring->model;

    sched = atomic_load_explicit(&s->sched, memory_order_acquire);
    if (sched == NULL || s->quit) {
        llm_slot_finish(s, sl, LLM_FINISH_ERROR, LLM_ERR_NOT_READY,
                        sched ? "engine draining" : "engine not ready");
        return;
    }
    n_prompt = sl->n_prompt;
    dims = sl->embed_dims;
    split = sl->type_split;
    if (n_prompt == 0 || n_prompt > s->ring->max_prompt
        || n_prompt > LLM_RING_MAX_PROMPT || dims > f->dim
        || split >= n_prompt || (f->score ? dims != 0 : split != 0))
    {
        llm_log(LLM_LOG_ERR, "client %u: invalid embedding slot (%u input "
                "tokens, %u dimensions, type split %u)", c->id, n_prompt,
                dims, split);
        llm_slot_finish(s, sl, LLM_FINISH_ERROR, LLM_ERR_BAD_REQUEST,
                        "invalid request in the ring");
        return;
    }
    if (f->pooling == 0) {
        llm_log(LLM_LOG_INFO, "client %u: an embedding refused: the model "
                "is not an embedding model", c->id);
        llm_slot_finish(s, sl, LLM_FINISH_ERROR, LLM_ERR_BAD_REQUEST,
                        "the model is not an embedding model");
        return;
    }
    if (dims != 0 && dims != f->dim && !f->matryoshka) {
        llm_log(LLM_LOG_INFO, "client %u: an embedding of %u dimensions "
                "refused: the model is not Matryoshka", c->id, dims);
        llm_slot_finish(s, sl, LLM_FINISH_ERROR, LLM_ERR_BAD_REQUEST,
                        "the model does not support matryoshka "
                        "representation, dimensions must be its own");
        return;
    }

    memset(&req, 0, sizeof(req));
    req.prompt = sl->prompt;
    req.n_prompt = (int) n_prompt;
    llm_sampling_params_default(&req.sampling);
    req.priority = sl->priority;
    req.fair_key = sl->fair_key;
    req.embed = 1;
    req.embed_dims = (int) dims;
    req.type_split = (int) split;

    idx = llm_slot_index(s, sl);
    s->users[idx].server = s;
    s->users[idx].index = idx;
    s->users[idx].owner = c->id;
    s->users[idx].seq = NULL;
    req.user = &s->users[idx];
    sl->n_vector = 0;

    rc = llm_sched_add(sched, &req, &seq, err, sizeof(err));
    if (rc != LLM_SCHED_OK) {
        llm_slot_finish(s, sl, LLM_FINISH_ERROR, ring_error(rc), err);
        return;
    }
    s->users[idx].seq = seq;
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
    pthread_t    ticker, usage;
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
        || pthread_create(&ticker, NULL, llm_alive_thread, s) != 0
        || pthread_create(&usage, NULL, llm_usage_thread, s) != 0)
    {
        llm_log(LLM_LOG_EMERG, "pthread_create() failed");
        return 1;
    }
    pthread_detach(s->loader);
    pthread_detach(ticker);
    pthread_detach(usage);

    llm_loop(s);

    /* the mapping and the socket have no names: closing is cleaning up */
    _exit(0);
}
