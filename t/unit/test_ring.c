/*
 * The engine process seen from a worker, without nginx: start it, connect,
 * map the ring, and check that it answers pings and generations, refuses
 * corrupted slots with an error (and stays up), cancels on request, and
 * frees the slots of a client that goes away.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "tap.h"
#include "ring/ring_client.h"

static char         sockname[64];
static uint32_t     req_seq;


static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}


static llm_slot *
claim(llm_ring_header *h, uint32_t client_id, uint32_t kind)
{
    uint32_t   i, expected;
    llm_slot  *sl;

    for (i = 0; i < h->n_slots; i++) {
        sl = llm_ring_slot(h, i);
        expected = LLM_SLOT_FREE;
        if (atomic_compare_exchange_strong(&sl->state, &expected,
                                           LLM_SLOT_CLAIMED))
        {
            sl->owner = client_id;
            sl->kind = kind;
            sl->req_seq = ++req_seq;
            sl->n_prompt = 0;
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


int
main(void)
{
    int               fd, fd2, status;
    char              engine[512], model[512], pidbuf[32];
    pid_t             pid;
    double            t0;
    uint32_t          id, id2, i;
    llm_slot         *sl;
    const char       *build;
    llm_ring_header  *h, *h2;

    build = getenv("BUILD") ? getenv("BUILD") : "build";
    snprintf(engine, sizeof(engine), "%s/ngx_llm_engine", build);
    tap_fixture(model, sizeof(model), "models/tiny260K-f32.gguf");
    snprintf(sockname, sizeof(sockname), "ngx_llm_test/%d", (int) getpid());
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

    fd = llm_ring_connect(sockname, 500);
    ok(fd != -1, "connected to the engine");
    h = fd != -1 ? llm_ring_hello(fd, &id) : NULL;
    ok(h != NULL, "HELLO carries a valid, sealed ring");
    if (h == NULL) {
        kill(pid, SIGKILL);
        return tap_done();
    }

    t0 = now_s();
    while (atomic_load(&h->state) != LLM_ENGINE_READY && now_s() - t0 < 60) {
        usleep(10000);
    }
    is_int(atomic_load(&h->state), LLM_ENGINE_READY, "engine ready");
    is_int(h->model.vocab_size, 512, "model facts in the header");

    /* a ping */
    sl = claim(h, id, LLM_KIND_PING);
    submit(fd, sl);
    ok(wait_done(sl, 5), "ping answered");
    is_str(sl->message, "ready", "ping says ready");
    release(sl);

    /* a greedy generation */
    sl = claim(h, id, LLM_KIND_GENERATE);
    sl->prompt[0] = 1;
    sl->prompt[1] = 403;
    sl->prompt[2] = 407;
    sl->n_prompt = 3;
    sl->sampling.max_tokens = 5;
    submit(fd, sl);
    ok(wait_done(sl, 10), "generation done");
    is_int(atomic_load(&sl->out_head), 5, "5 tokens streamed");
    is_int(sl->finish, LLM_FINISH_LENGTH, "finish: length");
    for (i = 0; i < 5; i++) {
        ok(sl->out[i].token >= 0 && sl->out[i].token < 512,
           "token %u in the vocabulary", i);
    }
    ok(sl->t_first_token_ns >= sl->t_submit_ns, "first-token time recorded");
    release(sl);

    /* corrupted slots: each fails alone, the engine stays up */
    sl = claim(h, id, 99);
    submit(fd, sl);
    ok(wait_done(sl, 5), "invalid kind answered");
    is_int(sl->error, LLM_ERR_BAD_REQUEST, "invalid kind: bad request");
    release(sl);

    sl = claim(h, id, LLM_KIND_GENERATE);
    sl->n_prompt = LLM_RING_MAX_PROMPT + 7;
    submit(fd, sl);
    ok(wait_done(sl, 5), "oversized prompt count answered");
    is_int(sl->error, LLM_ERR_BAD_REQUEST, "prompt count out of bounds");
    release(sl);

    sl = claim(h, id, LLM_KIND_GENERATE);
    sl->prompt[0] = 100000;
    sl->n_prompt = 1;
    sl->sampling.max_tokens = 2;
    submit(fd, sl);
    ok(wait_done(sl, 5), "token outside the vocabulary answered");
    is_int(sl->error, LLM_ERR_BAD_REQUEST, "token id checked");
    ok(strlen(sl->message) > 0, "with a reason: %s", sl->message);
    release(sl);

    sl = claim(h, id, LLM_KIND_GENERATE);
    sl->prompt[0] = 1;
    sl->n_prompt = 1;
    sl->sampling.n_stop_ids = 1000;
    submit(fd, sl);
    ok(wait_done(sl, 5), "stop id count out of bounds answered");
    is_int(sl->error, LLM_ERR_BAD_REQUEST, "stop id count checked");
    release(sl);

    sl = claim(h, id, LLM_KIND_GENERATE);
    sl->prompt[0] = 1;
    sl->n_prompt = 1;
    sl->sampling.max_tokens = 5000;
    submit(fd, sl);
    ok(wait_done(sl, 5), "request that can never fit answered");
    is_int(sl->error, LLM_ERR_TOO_LONG, "too long for max_model_len");
    release(sl);

    /* another client's slot is not ours to submit */
    sl = claim(h, id + 1000, LLM_KIND_PING);
    submit(fd, sl);
    usleep(300000);
    is_int(atomic_load(&sl->state), LLM_SLOT_SUBMITTED,
           "a slot owned by another client is left alone");
    release(sl);

    /* cancel */
    sl = claim(h, id, LLM_KIND_GENERATE);
    sl->prompt[0] = 1;
    sl->n_prompt = 1;
    sl->sampling.max_tokens = 250;
    sl->sampling.ignore_eos = 1;
    submit(fd, sl);
    usleep(20000);
    atomic_store(&sl->cancel, 1);
    kick(fd);
    ok(wait_done(sl, 5), "cancelled sequence ends");
    ok(sl->finish == LLM_FINISH_CANCELLED || sl->finish == LLM_FINISH_LENGTH,
       "finish: cancelled (%u), %u tokens", sl->finish,
       atomic_load(&sl->out_head));
    release(sl);

    /* a client that dies: its slots are freed */
    fd2 = llm_ring_connect(sockname, 500);
    h2 = llm_ring_hello(fd2, &id2);
    ok(h2 != NULL && id2 != id, "a second client gets its own id");
    sl = claim(h2, id2, LLM_KIND_GENERATE);
    sl->prompt[0] = 1;
    sl->n_prompt = 1;
    sl->sampling.max_tokens = 250;
    submit(fd2, sl);
    usleep(20000);
    close(fd2);
    t0 = now_s();
    while (atomic_load(&sl->state) != LLM_SLOT_FREE && now_s() - t0 < 5) {
        usleep(5000);
    }
    is_int(atomic_load(&sl->state), LLM_SLOT_FREE,
           "the engine freed the slot of a client that went away");

    /* still alive */
    sl = claim(h, id, LLM_KIND_PING);
    submit(fd, sl);
    ok(wait_done(sl, 5), "engine still answers after all that");
    release(sl);
    t0 = now_s();
    while (atomic_load(&h->stats.running) != 0 && now_s() - t0 < 5) {
        usleep(5000);
    }
    is_int(atomic_load(&h->stats.running), 0, "nothing left running");
    is_int(atomic_load(&h->stats.kv_blocks_used), 0, "no KV block in use");

    /* the engine goes when its "master" (this process) says so */
    kill(pid, SIGTERM);
    ok(waitpid(pid, &status, 0) == pid && WIFEXITED(status)
       && WEXITSTATUS(status) == 0, "engine exits cleanly on SIGTERM");

    return tap_done();
}
