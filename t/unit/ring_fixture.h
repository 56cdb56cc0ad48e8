/*
 * What the ring's unit tests share (test_ring.c, test_embed_ring.c): an
 * engine started as the master would start it, and the worker's side of
 * a slot: claim, submit with its doorbell, wait for DONE reading the
 * stream as a worker would, release. Static, as in tap.h: each test file
 * is a program of its own.
 *
 * defines: now_s, claim, kick, submit, wait_done, release, engine_spawn,
 *          engine_ready
 */
#ifndef NGX_LLM_RING_FIXTURE_H
#define NGX_LLM_RING_FIXTURE_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include "ring/ring_client.h"

static uint64_t  fixture_req_seq;


static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}


/* a free slot of h claimed for client id, as a worker fills one */
static llm_slot *
claim(llm_ring_header *h, uint32_t id, uint32_t kind)
{
    uint32_t   i, expected;
    llm_slot  *sl;

    for (i = 0; i < h->n_slots; i++) {
        sl = llm_ring_slot(h, i);
        expected = LLM_SLOT_FREE;
        if (atomic_compare_exchange_strong(&sl->state, &expected,
                                           LLM_SLOT_CLAIMED))
        {
            sl->owner = id;
            sl->kind = kind;
            sl->req_seq = ++fixture_req_seq;
            sl->n_prompt = 0;
            sl->embed_dims = 0;
            memset(&sl->sampling, 0, sizeof(sl->sampling));
            sl->sampling.top_p = 1;
            sl->sampling.repetition_penalty = 1;
            atomic_store(&sl->cancel, 0);
            atomic_store(&sl->out_head, 0);
            atomic_store(&sl->out_tail, 0);
            return sl;
        }
    }
    return NULL;
}


static void
kick(int fd)
{
    llm_msg m;

    memset(&m, 0, sizeof(m));
    m.type = LLM_MSG_KICK;
    (void) send(fd, &m, sizeof(m), MSG_NOSIGNAL);
}


static void
submit(int fd, llm_slot *sl)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    sl->t_submit_ns = (uint64_t) ts.tv_sec * 1000000000ULL + ts.tv_nsec;
    atomic_store(&sl->state, LLM_SLOT_SUBMITTED);
    kick(fd);
}


/* wait for DONE, reading the stream as a worker would */
static int
wait_done(llm_slot *sl, double secs)
{
    double t0 = now_s();

    while (now_s() - t0 < secs) {
        atomic_store(&sl->out_tail, atomic_load(&sl->out_head));
        if (atomic_load(&sl->state) == LLM_SLOT_DONE) {
            return 1;
        }
        usleep(2000);
    }
    return 0;
}


static void
release(llm_slot *sl)
{
    sl->owner = 0;
    atomic_store(&sl->state, LLM_SLOT_FREE);
}


/*
 * $BUILD/ngx_llm_engine serving model on the abstract socket
 * "ngx_llm_<tag>/<our pid>" (written to sockname), with this process as
 * its master: 256 tokens a sequence, 8 MiB of KV, 4 running, 8 queued.
 */
static pid_t
engine_spawn(const char *model, const char *tag, char *sockname,
    size_t len)
{
    char         engine[512], pidbuf[32];
    pid_t        pid;
    const char  *build;

    build = getenv("BUILD") ? getenv("BUILD") : "build";
    snprintf(engine, sizeof(engine), "%s/ngx_llm_engine", build);
    snprintf(sockname, len, "ngx_llm_%s/%d", tag, (int) getpid());
    snprintf(pidbuf, sizeof(pidbuf), "%d", (int) getpid());
    signal(SIGPIPE, SIG_IGN);

    pid = fork();
    if (pid == 0) {
        execl(engine, "ngx_llm_engine", "serve", "--name", "test",
              "--socket", sockname, "--master-pid", pidbuf, "--model", model,
              "--max-model-len", "256", "--kv-cache-memory", "8388608",
              "--max-num-seqs", "4", "--max-queued", "8", (char *) NULL);
        _exit(127);
    }
    return pid;
}


/* the engine says READY within secs */
static int
engine_ready(llm_ring_header *h, double secs)
{
    double t0 = now_s();

    while (atomic_load(&h->state) != LLM_ENGINE_READY && now_s() - t0 < secs) {
        usleep(10000);
    }
    return atomic_load(&h->state) == LLM_ENGINE_READY;
}

#endif /* NGX_LLM_RING_FIXTURE_H */
