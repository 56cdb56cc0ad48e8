/*
 * The ring: the one protocol between nginx workers and the engine process.
 * Included by both sides; plain C11, no nginx or CUDA types, offsets not
 * pointers. docs/protocol.md describes the state machine.
 *
 * Transport
 *   The engine listens on an abstract unix socket (SOCK_SEQPACKET) named
 *   "\0ngx_llm/<nginx master pid>/<config hash>/<secret>", the secret made
 *   by nginx's master (128 random bits). Binding that name is the
 *   lock that makes one engine per config: a second engine started by a
 *   racing worker fails to bind and exits. Nothing has a file name, so
 *   nothing is left behind. The worker binds it, the engine listens on it,
 *   so a worker's SO_PEERCRED names the engine: it refuses one of another
 *   uid, or whose pid is not the ring's engine_pid.
 *   On accept the engine checks the peer's uid (SO_PEERCRED) and sends a
 *   llm_msg HELLO carrying the ring's memfd (SCM_RIGHTS). The connection
 *   then is the doorbell in both directions: KICK (worker -> engine: look at
 *   the slots) and WAKE (engine -> worker: look at your slots). EOF on it
 *   means the peer died.
 *
 * Shared memory
 *   [llm_ring_header][llm_slot x n_slots]. Every field the other side wrote
 *   is validated before use: indexes against n_slots, counts against their
 *   capacity, states against the enum, owners against the connection.
 */
#ifndef NGX_LLM_RING_H
#define NGX_LLM_RING_H

#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>

#include "common/constraint.h"
#include "common/priority.h"

#define LLM_RING_MAGIC          0x676e6c6cu     /* "llng" */
#define LLM_RING_VERSION        11      /* 2: the watchdog's fields,
                                           3: output constraints,
                                           4: the slot's fair_key,
                                           5: speculative decoding: the
                                           slot's speculative, its stats,
                                           6: n choices (choice_slots),
                                           7: the constraint's json_ws and
                                           strict, the relaxed list,
                                           8: EMBED slots (embed_dims,
                                           n_vector, the vector over
                                           prompt[]), the model's pooling
                                           facts,
                                           9: scores (the facts' score,
                                           the slot's type_split),
                                           10: stats.kv_blocks_slid,
                                           11: step_expect_ns */

#define LLM_RING_MAX_SLOTS      4096
#define LLM_RING_MAX_PROMPT     32768           /* tokens per slot */
#define LLM_RING_OUT_CAP        256             /* stream entries per slot */
#define LLM_RING_MAX_STOP_IDS   16
#define LLM_RING_MAX_BIAS       64
#define LLM_RING_MAX_TOP_LP     20
#define LLM_RING_REASON_LEN     256
#define LLM_RING_MAX_CHOICES    16              /* n of one request */
#define LLM_RING_RELAXED_LEN    1024            /* the relaxed list, NUL
                                                   included */

/* engine state, llm_ring_header.state */
enum llm_engine_state {
    LLM_ENGINE_STARTING = 0,    /* loading weights */
    LLM_ENGINE_WARMING = 1,     /* loaded, warm-up generation running */
    LLM_ENGINE_READY = 2,
    LLM_ENGINE_FAILED = 3,      /* reason[] says why; answers pings only */
    LLM_ENGINE_DRAINING = 4,    /* finishing what it has, takes no more */
};

/*
 * Slot states. The worker owns a slot in CLAIMED and from DONE until it
 * frees it; the engine owns it in SUBMITTED and RUNNING. Transitions:
 *
 *   FREE --worker CAS--> CLAIMED --worker--> SUBMITTED --engine--> RUNNING
 *   RUNNING --engine--> DONE --worker--> FREE
 *   SUBMITTED/RUNNING: worker sets cancel=1 and KICKs; the engine ends the
 *   sequence within one step (DONE with finish CANCELLED).
 *   Connection lost: the engine frees every slot the worker owned; the
 *   worker fails every request it had in the ring.
 */
enum llm_slot_state {
    LLM_SLOT_FREE = 0,
    LLM_SLOT_CLAIMED = 1,
    LLM_SLOT_SUBMITTED = 2,
    LLM_SLOT_RUNNING = 3,
    LLM_SLOT_DONE = 4,
};

enum llm_slot_kind {
    LLM_KIND_PING = 1,          /* health: the engine's loop answers */
    LLM_KIND_GENERATE = 2,
    LLM_KIND_CHOICE = 3,        /* the stream of choice i > 0 of the
                                   GENERATE slot that lists it; taken with
                                   that slot, never on its own */
    LLM_KIND_EMBED = 4,         /* version 8: one input's pooled vector,
                                   written over prompt[] (llm_slot_vector)
                                   before DONE; version 9: on a score
                                   model, one pair's score */
};

enum llm_finish {
    LLM_FINISH_NONE = 0,
    LLM_FINISH_STOP = 1,        /* eos / stop token */
    LLM_FINISH_LENGTH = 2,      /* max_tokens or max_model_len */
    LLM_FINISH_CANCELLED = 3,   /* the worker asked */
    LLM_FINISH_ERROR = 4,       /* error[] says why */
};

enum llm_slot_error {
    LLM_ERR_NONE = 0,
    LLM_ERR_BAD_REQUEST = 1,    /* invalid slot contents */
    LLM_ERR_TOO_LONG = 2,       /* can never fit (docs/scheduler.md) */
    LLM_ERR_QUEUE_FULL = 3,     /* waiting queue at max_queued_requests */
    LLM_ERR_NOT_READY = 4,
    LLM_ERR_INTERNAL = 5,
};

/* doorbell messages over the unix socket */
enum llm_msg_type {
    LLM_MSG_HELLO = 1,          /* engine -> worker, with the memfd */
    LLM_MSG_KICK = 2,           /* worker -> engine */
    LLM_MSG_WAKE = 3,           /* engine -> worker */
};

typedef struct {
    uint32_t        type;
    uint32_t        version;    /* HELLO: LLM_RING_VERSION */
    uint32_t        client_id;  /* HELLO: owner id for this connection */
    uint32_t        reserved;
    uint64_t        ring_size;  /* HELLO: bytes of the mapping */
} llm_msg;

typedef struct {
    float           temperature;        /* 0: greedy */
    float           top_p;
    float           min_p;
    float           presence_penalty;
    float           frequency_penalty;
    float           repetition_penalty; /* 1: off */
    int32_t         top_k;              /* 0: off */
    uint32_t        top_logprobs;       /* 0..LLM_RING_MAX_TOP_LP */
    uint64_t        seed;
    uint32_t        has_seed;
    uint32_t        logprobs;           /* 0/1 */
    uint32_t        max_tokens;
    uint32_t        ignore_eos;
    uint32_t        n_stop_ids;
    uint32_t        n_bias;
    int32_t         stop_ids[LLM_RING_MAX_STOP_IDS];
    int32_t         bias_ids[LLM_RING_MAX_BIAS];
    float           bias[LLM_RING_MAX_BIAS];
} llm_sampling;

/* one generated token as the worker reads it */
typedef struct {
    int32_t         token;
    float           logprob;
    uint32_t        n_top;
    uint32_t        reserved;
    int32_t         top_ids[LLM_RING_MAX_TOP_LP];
    float           top_lp[LLM_RING_MAX_TOP_LP];
} llm_out_token;

typedef struct {
    _Atomic uint32_t state;             /* enum llm_slot_state */
    _Atomic uint32_t cancel;            /* worker -> engine */
    uint32_t        owner;              /* client_id of the worker */
    uint32_t        kind;               /* enum llm_slot_kind */
    uint64_t        req_seq;            /* worker's number, guards reuse */
    int64_t         priority;           /* lower runs first; 0 default;
                                           classes: common/priority.h */
    uint64_t        fair_key;           /* hash of llm_fair_key's value:
                                           round robin among keys within a
                                           class; 0 = no key */

    /* request: written by the worker in CLAIMED */
    llm_sampling    sampling;
    uint32_t        n_prompt;
    uint32_t        constraint_kind;    /* LLM_CONSTRAINT_* */
    uint32_t        constraint_len;     /* bytes, after the prompt ids */
    uint32_t        speculative;        /* 0: the engine's speculative
                                           decoding setting; 1: off for
                                           this request */
    uint32_t        n_choices;          /* GENERATE: 0, 1: one; n > 1:
                                           choice_slots[0..n-2] are the
                                           CHOICE slots of choices 1..n-1,
                                           SUBMITTED before this one */
    uint32_t        choice_slots[LLM_RING_MAX_CHOICES - 1];
    uint32_t        json_ws;            /* LLM_JSON_WS_* of the constraint */
    uint32_t        strict;             /* 1: what the constraint's grammar
                                           cannot enforce is refused;
                                           0: relaxed, listed in relaxed[] */
    uint32_t        embed_dims;         /* EMBED: 0 the model's dim, else
                                           1..dim (Matryoshka; the engine
                                           refuses it unless the model's
                                           facts say matryoshka) */
    uint32_t        n_vector;           /* EMBED, engine: floats of the
                                           vector in prompt[], valid in
                                           DONE with finish STOP; the
                                           reader checks it against the
                                           dims it asked for (1 on a score
                                           model: the score) */
    uint32_t        type_split;         /* version 9, EMBED on a score
                                           model: prompt[type_split..] are
                                           token type 1 (a cross-encoder's
                                           second segment); 0: all type 0 */
    uint32_t        reserved2;

    /* progress: written by the engine, read by the worker */
    _Atomic uint32_t out_head;          /* tokens published (monotonic) */
    _Atomic uint32_t out_tail;          /* tokens consumed by the worker */
    uint32_t        finish;             /* enum llm_finish, valid in DONE */
    uint32_t        error;              /* enum llm_slot_error */
    uint32_t        n_cached;           /* prompt tokens from prefix cache */
    uint32_t        reserved1;
    uint64_t        t_submit_ns;        /* worker, CLOCK_MONOTONIC */
    uint64_t        t_scheduled_ns;     /* engine: left the waiting queue */
    uint64_t        t_first_token_ns;   /* engine */
    uint64_t        t_done_ns;          /* engine */
    char            message[LLM_RING_REASON_LEN];   /* error text */
    char            relaxed[LLM_RING_RELAXED_LEN];  /* the keywords the
                                           constraint relaxed, "kw@/ptr, ...",
                                           cut at a ", "; written before
                                           the first token, NUL-terminated
                                           (checked by the reader) */

    llm_out_token   out[LLM_RING_OUT_CAP];          /* out[i % CAP] */
    int32_t         prompt[LLM_RING_MAX_PROMPT];    /* then the constraint's
                                                       text */
} llm_slot;

_Static_assert(offsetof(llm_slot, out_head) % 8 == 0,
               "llm_slot: the engine's progress fields aligned");

/* an EMBED slot's vector: n_vector floats over prompt[] (the scheduler
   copied the ids at admission, so the engine reuses the space; at most
   LLM_RING_MAX_PROMPT floats, 128 KiB) */
static inline float *
llm_slot_vector(llm_slot *sl)
{
    return (float *) (void *) sl->prompt;
}

/* the constraint's text: constraint_len bytes right after the prompt ids;
   n_prompt * 4 + constraint_len <= sizeof prompt, checked by the reader */
static inline char *
llm_slot_constraint(llm_slot *sl)
{
    return (char *) (sl->prompt + sl->n_prompt);
}

/*
 * Latency histograms, written by the engine as sequences finish: counts
 * per bucket (cumulative form is computed by the reader), the last bucket
 * is +Inf; sum in microseconds.
 */
#define LLM_HIST_BUCKETS        18

static const double llm_hist_bounds[LLM_HIST_BUCKETS] = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
    0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0
};

typedef struct {
    _Atomic uint64_t count[LLM_HIST_BUCKETS + 1];
    _Atomic uint64_t sum_us;
} llm_hist;

enum llm_hist_kind {
    LLM_HIST_TTFT = 0,                  /* submit to first token */
    LLM_HIST_ITL,                       /* between tokens, per token */
    LLM_HIST_E2E,                       /* submit to done */
    LLM_HIST_QUEUE,                     /* submit to first scheduled */
    LLM_HIST_COUNT
};

/* engine time by what its steps ran: prompt chunks only, decodes only,
   both in one batch, or no step at all */
enum llm_phase {
    LLM_PHASE_PREFILL = 0,
    LLM_PHASE_DECODE,
    LLM_PHASE_MIXED,
    LLM_PHASE_IDLE,
    LLM_PHASE_COUNT
};

/* tokens per step, vLLM's vllm:iteration_tokens_total buckets */
#define LLM_STEP_HIST_BUCKETS   13

static const double llm_step_hist_bounds[LLM_STEP_HIST_BUCKETS] = {
    1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384
};

typedef struct {
    _Atomic uint64_t count[LLM_STEP_HIST_BUCKETS + 1];
    _Atomic uint64_t sum;
} llm_step_hist;

typedef struct {
    _Atomic uint64_t requests;          /* generations admitted */
    _Atomic uint64_t prompt_tokens;
    _Atomic uint64_t generation_tokens;
    _Atomic uint64_t cached_tokens;
    _Atomic uint64_t preemptions;
    _Atomic uint64_t cancelled;
    _Atomic uint64_t steps;
    _Atomic uint64_t pings;
    _Atomic uint32_t running;           /* sequences in the batch */
    _Atomic uint32_t waiting;           /* sequences queued */
    _Atomic uint32_t kv_blocks_total;
    _Atomic uint32_t kv_blocks_used;
    _Atomic uint32_t kv_blocks_cached;
    _Atomic uint32_t reserved;
    _Atomic uint64_t prefix_queries;    /* prompt tokens looked up */
    _Atomic uint64_t finished[LLM_FINISH_ERROR + 1];   /* by llm_finish */
    llm_hist         hist[LLM_HIST_COUNT];

    /* where the engine's time and memory go (docs/operations.md) */
    _Atomic uint64_t phase_ns[LLM_PHASE_COUNT];         /* by llm_phase */
    llm_step_hist    step_tokens;       /* tokens fed per step */
    _Atomic uint64_t compute_busy_ns;   /* cpu: thread-ns inside kernels */
    _Atomic uint32_t compute_threads;   /* cpu: the pool's threads */
    _Atomic uint32_t kv_block_size;     /* tokens per KV block */
    _Atomic uint64_t kv_block_bytes;    /* bytes per KV page: all layers,
                                           or one layer group's
                                           (model/kv.h) */
    _Atomic uint64_t rss_bytes;         /* the engine's resident memory */
    _Atomic uint64_t errors[LLM_ERR_INTERNAL + 1];     /* by llm_slot_error */
    _Atomic uint32_t compute_util_ppm;  /* busy, parts per million, over
                                           the last second: cpu pool time
                                           over wall time, cuda NVML's */
    _Atomic uint32_t device_valid;      /* 1: device_mem_* were read */
    _Atomic uint64_t device_mem_used;   /* cuda: NVML bytes */
    _Atomic uint64_t device_mem_total;
    /* speculative decoding (prompt lookup): verifications, drafts fed,
       drafts accepted */
    _Atomic uint64_t spec_drafts;
    _Atomic uint64_t spec_draft_tokens;
    _Atomic uint64_t spec_accepted_tokens;
    _Atomic uint64_t kv_blocks_slid;    /* dropped out of the sliding
                                           window (sched/block_manager.h) */
} llm_ring_stats;

typedef struct {
    char            arch[32];           /* general.architecture */
    char            name[128];          /* general.name */
    char            file_type[16];      /* dominant tensor type */
    uint64_t        n_params;
    uint64_t        weight_bytes;
    uint32_t        context_length;
    uint32_t        vocab_size;
    uint32_t        n_layers;
    uint32_t        dim;
    uint32_t        n_heads;
    uint32_t        n_kv_heads;
    uint32_t        pooling;            /* version 8: enum llm_pool_type
                                           (model/pool.h), 0: a generation
                                           model; else an embedder: EMBED
                                           slots only */
    uint32_t        matryoshka;         /* 1: embed_dims below dim allowed */
    uint32_t        score;              /* version 9: enum llm_score_type
                                           (model/score.h), 0: none; else
                                           a score model (a reranker):
                                           EMBED slots of one pair each,
                                           answered with one float */
    uint32_t        reserved;
} llm_model_facts;

typedef struct {
    uint32_t        magic;
    uint32_t        version;
    uint32_t        header_size;
    uint32_t        slot_size;
    uint32_t        n_slots;
    uint32_t        max_prompt;         /* tokens a slot's prompt holds */
    uint64_t        slots_offset;
    uint64_t        total_size;
    uint64_t        config_hash;

    _Atomic uint32_t state;             /* enum llm_engine_state */
    uint32_t        engine_pid;
    _Atomic uint64_t generation;        /* bumped by each engine start */
    _Atomic uint64_t heartbeat_ns;      /* CLOCK_MONOTONIC, each loop turn */
    uint64_t        started_ns;
    char            reason[LLM_RING_REASON_LEN];    /* FAILED: why */

    llm_model_facts model;              /* valid from WARMING on */
    llm_ring_stats  stats;

    /*
     * Version 2: what a worker's watchdog reads (docs/architecture.md). A
     * long step stops heartbeat_ns but not alive_ns; a stopped or frozen
     * process stops both.
     */
    _Atomic uint64_t alive_ns;          /* a ticker thread, every 100 ms */
    _Atomic uint64_t step_slowest_ns;   /* slowest step of the last 64-128 */
    _Atomic uint32_t watchdog_pid;      /* the worker replacing the engine:
                                           0, then set once by CAS */
    uint32_t        reserved2;

    /*
     * Version 11: the time the step under way should take (its tokens at
     * the slowest recent time per token), 0 between steps; a worker lets
     * heartbeat_ns age 20 times that (docs/architecture.md, Watchdog).
     * At a step's end the engine bumps heartbeat_ns, then clears this;
     * a worker reads this first.
     */
    _Atomic uint64_t step_expect_ns;
} llm_ring_header;

_Static_assert(sizeof(llm_msg) == 24, "llm_msg is part of the ABI");
_Static_assert(sizeof(llm_out_token) == 176, "llm_out_token layout");
_Static_assert(sizeof(llm_sampling) % 8 == 0, "llm_sampling alignment");
_Static_assert(sizeof(_Atomic uint64_t) == 8, "lock-free 64-bit atomics");
_Static_assert(offsetof(llm_ring_header, alive_ns) % 8 == 0,
               "llm_ring_header: version 2 fields aligned");
_Static_assert(offsetof(llm_ring_header, step_expect_ns) % 8 == 0,
               "llm_ring_header: version 11 field aligned");


/* header followed by the slots, each slot 64-byte aligned */
static inline uint64_t
llm_ring_slot_size(void)
{
    return (sizeof(llm_slot) + 63) & ~(uint64_t) 63;
}


static inline uint64_t
llm_ring_slots_offset(void)
{
    return (sizeof(llm_ring_header) + 63) & ~(uint64_t) 63;
}


static inline uint64_t
llm_ring_size(uint32_t n_slots)
{
    return llm_ring_slots_offset() + (uint64_t) n_slots * llm_ring_slot_size();
}


static inline llm_slot *
llm_ring_slot(llm_ring_header *h, uint32_t i)
{
    return (llm_slot *) ((char *) h + h->slots_offset
                         + (uint64_t) i * h->slot_size);
}


/*
 * Check a mapping before trusting it: the sizes must be the ones this
 * build computes, so every later offset is in bounds. 0 = valid.
 */
static inline int
llm_ring_check(const llm_ring_header *h, uint64_t mapped)
{
    if (mapped < sizeof(llm_ring_header)
        || h->magic != LLM_RING_MAGIC
        || h->version != LLM_RING_VERSION
        || h->header_size != sizeof(llm_ring_header)
        || h->slot_size != llm_ring_slot_size()
        || h->slots_offset != llm_ring_slots_offset()
        || h->n_slots == 0 || h->n_slots > LLM_RING_MAX_SLOTS
        || h->max_prompt != LLM_RING_MAX_PROMPT
        || h->total_size != llm_ring_size(h->n_slots)
        || h->total_size > mapped)
    {
        return -1;
    }

    return 0;
}

#endif
