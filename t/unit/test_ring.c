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
#include "ring_fixture.h"

int
main(void)
{
    int               fd, fd2, status;
    char              model[512], sockname[64];
    pid_t             pid;
    double            t0;
    uint32_t          id, id2, i;
    llm_slot         *sl;
    llm_ring_header  *h, *h2;

    tap_fixture(model, sizeof(model), "models/tiny260K-f32.gguf");
    pid = engine_spawn(model, "test", sockname, sizeof(sockname));

    fd = llm_ring_connect(sockname, 500);
    ok(fd != -1, "connected to the engine");
    h = fd != -1 ? llm_ring_hello(fd, &id) : NULL;
    ok(h != NULL, "HELLO carries a valid, sealed ring");
    if (h == NULL) {
        kill(pid, SIGKILL);
        return tap_done();
    }

    ok(engine_ready(h, 60), "engine ready");
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
