/*
 * The engine process's insides, shared by engine/server/server*.c only.
 * The files, each calling only the ones below it (docs/architecture.md:
 * no two files call each other):
 *
 *   server.c         the process: the socket, the ring, clients, the slots
 *                    workers submit, start-up, the event loop
 *   server_load.c    model loading off the loop: the model's facts, the
 *                    memory plan, backend, scheduler, grammar compiler,
 *                    the warm-up generation
 *   server_stream.c  the scheduler's callbacks: a sequence's tokens, its
 *                    room and its end, into its slot; the engine's failure
 *   server_stats.c   the ring's counters and gauges: steps by phase, the
 *                    slowest step, histograms, memory and compute, the
 *                    alive ticker
 *   server_opts.c    the command line: server.h's options
 *   server_slot.c    the check of a GENERATE slot a worker wrote, into
 *                    the scheduler's request (pure: fuzz/fuzz_slot.c)
 *
 * defines: llm_server (one engine process), llm_client, llm_slot_user,
 *          and each file's functions that the files above it call
 */
#ifndef NGX_LLM_SERVER_INT_H
#define NGX_LLM_SERVER_INT_H

#include <pthread.h>
#include <stdint.h>

#include "backend/backend.h"
#include "grammar/grammar.h"
#include "model/model.h"
#include "ring/ngx_llm_ring.h"
#include "sample/sampler.h"
#include "sched/compile.h"
#include "sched/scheduler.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

#define LLM_MAX_CLIENTS       256

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

    /* the slowest step of this window and of the one before it, and the
       slowest time per token of their steps of several tokens */
    uint64_t            step_max_ns[2];
    uint64_t            token_max_ns[2];
    int                 steps_in_window;
    int                 step_tokens;    /* of the step under way */

    uint64_t            phase_mark_ns;  /* engine time counted up to here
                                           (ring stats phase_ns) */
};


/* --- the command line (server_opts.c) ---------------------------------- */

/* the ring's slots for these options */
uint32_t llm_server_ring_slots(const llm_server_opts *o);


/* --- counters and gauges (server_stats.c) ------------------------------ */

uint64_t llm_now_ns(void);
/* the time since the last mark to the idle phase */
void llm_phase_idle(llm_server *s, uint64_t now);
/* a step of the model, timed when it ran one */
int llm_step(llm_server *s, llm_sched *sched);
/* the scheduler's on_step, arg the server: the step's expected time */
void llm_on_step(void *arg, int n_tokens);
/* the thread of alive_ns, and that of the memory and compute gauges */
void *llm_alive_thread(void *arg);
void *llm_usage_thread(void *arg);
void llm_hist_add(llm_hist *h, uint64_t ns);
/* the scheduler's counts into the ring's stats */
void llm_publish_stats(llm_server *s, llm_sched *sched);


/* --- the scheduler's side of a slot (server_stream.c) ------------------ */

/* FAILED with its reason, for the workers to say */
void llm_ring_fail(llm_server *s, const char *reason);
llm_client *llm_client_by_id(llm_server *s, uint32_t id);
/* the slot's end: DONE with finish, error and message */
void llm_slot_finish(llm_server *s, llm_slot *sl, uint32_t finish,
    uint32_t error, const char *message);
/* the scheduler's callbacks (llm_sched_options), user an llm_slot_user */
void llm_on_token(void *user, int32_t token, const llm_sample_out *lp);
void llm_on_constraint(void *user, const char *relaxed);
int llm_emit_room(void *user);
int llm_can_emit(void *user);
void llm_on_embedding(void *user, const float *vec, int dims);
void llm_on_finish(void *user, const llm_seq_result *r);


/* --- a slot's request (server_slot.c) --------------------------------- */

/* the request a GENERATE slot asks for, every count checked against the
   ring's limits (max_prompt its own); req points into sl and bias
   (LLM_RING_MAX_BIAS); 0, or -1 with what is wrong in err */
int llm_slot_request(const llm_slot *sl, uint32_t max_prompt,
    llm_request *req, llm_logit_bias *bias, char *err, size_t errlen);


/* --- model loading (server_load.c) ------------------------------------- */

/* the loader thread: model, memory plan, backend, scheduler, warm-up,
   then READY (or FAILED with the reason) */
void *llm_loader_thread(void *arg);

#endif /* NGX_LLM_SERVER_INT_H */
