/*
 * The scheduler's side of a ring slot: its callbacks (llm_sched_options)
 * write a sequence's tokens and logprobs into the slot's stream, say how
 * much room the stream has, and end the slot with the scheduler's finish
 * and message; the slot's owner gets a WAKE at the end of the loop's turn.
 * And the ring's FAILED state with its reason.
 *
 * defines: llm_on_token, llm_on_constraint, llm_emit_room, llm_can_emit,
 *          llm_on_embedding, llm_on_finish,
 *          llm_slot_finish, llm_ring_fail, llm_client_by_id
 */
#include <stdint.h>
#include <string.h>

#include "ring/ngx_llm_ring.h"
#include "sample/sampler.h"
#include "sched/scheduler.h"
#include "server/log.h"
#include "server/server_int.h"


static void
llm_strlcpy(char *dst, const char *src, size_t size)
{
    size_t n = strnlen(src, size - 1);

    memcpy(dst, src, n);
    dst[n] = '\0';
}


void
llm_ring_fail(llm_server *s, const char *reason)
{
    llm_strlcpy(s->ring->reason, reason, sizeof(s->ring->reason));
    atomic_store(&s->ring->state, LLM_ENGINE_FAILED);
}


llm_client *
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


void
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


/* the owner of a slot gets a WAKE at the end of this loop turn */
static void
llm_wake_owner(llm_server *s, uint32_t owner)
{
    llm_client *c = llm_client_by_id(s, owner);

    if (c != NULL) {
        c->wake = 1;
    }
}


void
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


/* the keywords the constraint relaxed, before the first token: cut at
   the last ", " that fits the slot's relaxed[] */
void
llm_on_constraint(void *user, const char *relaxed)
{
    size_t          n;
    llm_slot       *sl;
    llm_slot_user  *u = user;

    if (u == NULL) {
        return;
    }
    sl = llm_ring_slot(u->server->ring, u->index);
    n = relaxed ? strlen(relaxed) : 0;
    if (n >= sizeof(sl->relaxed)) {
        /* relaxed is longer: relaxed[n + 1] exists for each n tried */
        for (n = sizeof(sl->relaxed) - 1;
             n > 0 && memcmp(relaxed + n, ", ", 2) != 0;
             n--)
        { /* void */ }
    }
    memcpy(sl->relaxed, relaxed ? relaxed : "", n);
    sl->relaxed[n] = '\0';
}


/* entries free in the slot's stream: what one step may send it (a
   speculating sequence up to 1 + drafts) */
int
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
int
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


/* an EMBED slot's vector, over its prompt ids (copied at admission);
   the DONE store in llm_on_finish publishes it */
void
llm_on_embedding(void *user, const float *vec, int dims)
{
    llm_slot_user  *u = user;
    llm_slot       *sl;

    if (u == NULL || dims < 1 || dims > LLM_RING_MAX_PROMPT) {
        return;
    }
    sl = llm_ring_slot(u->server->ring, u->index);
    memcpy(llm_slot_vector(sl), vec, (size_t) dims * sizeof(float));
    sl->n_vector = (uint32_t) dims;
}


void
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
