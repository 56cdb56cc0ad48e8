/*
 * ngx_http_llm_module: the types every file of the module shares.
 *
 * The files in call order: each calls only files below it (checked on
 * the objects: every ngx_http_llm_* function a file's object leaves
 * undefined is defined by a file listed below it). Calls up go through
 * handler pointers (slot, waiter, timers, request handlers).
 *
 *   ngx_http_llm_module.c    directives, the llm_engine block, process hooks
 *   ngx_http_llm_prefix.c    $llm_prefix_hash: the body read before the
 *                            content handler, the prompt's first blocks
 *   ngx_http_llm_model.c     model and binary opened, tokenizer, template,
 *                            the engine's identity
 *   ngx_http_llm_sha256.c    the model file's digest
 *   ngx_http_llm_metrics.c   /metrics, $llm_* variables, shared counters
 *   ngx_http_llm_api.c       llm_api: the routes under the location
 *   ngx_http_llm_health.c    llm_health: a timed ping over the ring
 *   ngx_http_llm_models.c    GET /v1/models
 *   ngx_http_llm_generate.c  chat/completions: request -> ring slot
 *   ngx_http_llm_stream.c    ring slot -> client: read, finish, flush
 *   ngx_http_llm_format.c    tokens -> SSE chunks and JSON replies
 *   ngx_http_llm_responses.c /v1/responses: the request as a chat one,
 *                            the reply as output items
 *   ngx_http_llm_ready.c     waiting for the engine to be ready
 *   ngx_http_llm_quota.c     token quotas per key, priority, fair key
 *   ngx_http_llm_shm.c       a keyed LRU store in a shared-memory zone
 *                            (the quota zone's, the responses zone's)
 *   ngx_http_llm_reply.c     our JSON replies, OpenAI's error object, the
 *                            one place a refused request is answered
 *   ngx_http_llm_ctx.c       a request's context and its choices: created,
 *                            finished once
 *   ngx_http_llm_peer.c      the engine seen from a worker: find or start
 *                            it, its doorbell, ring, slots
 */
#ifndef NGX_HTTP_LLM_MODULE_H
#define NGX_HTTP_LLM_MODULE_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ring/ngx_llm_ring.h"
#include "common/defaults.h"
#include "common/task.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/fim.h"
#include "jinja/jinja.h"
#include "api/request.h"
#include "api/stop.h"
#include "params/sampling_ring.h"
#include "api/reply.h"
#include "api/tools.h"
#include "api/responses.h"

#include <cjson/cJSON.h>


typedef struct ngx_http_llm_peer_s  ngx_http_llm_peer_t;


#define NGX_HTTP_LLM_N_STATUS  12

#define NGX_HTTP_LLM_DEFAULT_MAX_N  8     /* llm_max_n */
#define NGX_HTTP_LLM_DEFAULT_MAX_TOOL_CALLS  8  /* llm_max_tool_calls */
/* llm_json_whitespace auto: compact for json_schema and grammars, flexible
   for json_object and tool calls (docs/api.md "JSON whitespace") */
#define NGX_HTTP_LLM_JSON_WS_AUTO  2

#define NGX_HTTP_LLM_SECRET_LEN  16     /* bytes; hex in the socket name */

/* per engine, in a shared zone: survives engine restarts and reloads */
typedef struct {
    ngx_atomic_t                engine_starts;
    ngx_atomic_t                status[NGX_HTTP_LLM_N_STATUS];
    ngx_atomic_t                watchdog_restarts;
    ngx_atomic_t                tool_parse_failures;
    ngx_atomic_t                tool_calls_dropped; /* cut, unfinished */
    ngx_atomic_t                schema_relaxed; /* replies whose schema
                                                   was relaxed */
    /* made by the master when the zone is made: part of the engine's
       socket name, so nobody can bind it before the engine does */
    u_char                      secret[NGX_HTTP_LLM_SECRET_LEN];
} ngx_http_llm_counters_t;
typedef struct ngx_http_llm_slot_s  ngx_http_llm_slot_t;
typedef struct ngx_http_llm_ctx_s  ngx_http_llm_ctx_t;
typedef struct ngx_http_llm_quota_req_s  ngx_http_llm_quota_req_t;


/* one llm_token_quota: a bucket per key of its zone */
typedef struct {
    ngx_shm_zone_t             *shm_zone;
    uint64_t                    tokens;     /* refilled per `per` */
    uint64_t                    per;        /* ms */
    uint64_t                    burst;      /* the bucket's size */
} ngx_http_llm_quota_t;


/* one llm_engine { } block */
typedef struct {
    ngx_str_t                   name;
    ngx_str_t                   model;              /* absolute path */
    ngx_str_t                   served_model_name;
    ngx_str_t                   backend;
    ngx_str_t                   kv_cache_dtype;     /* f16 or f32 */
    ngx_str_t                   binary;             /* ngx_llm_engine */
    ngx_str_t                   model_sha256;       /* expected: the
                                                       directive or
                                                       <model>.sha256 */
    ngx_str_t                   sha256;             /* checked, or empty */
    ngx_uint_t                  threads;
    ngx_uint_t                  tensor_parallel;
    ngx_uint_t                  max_num_seqs;
    ngx_uint_t                  max_model_len;
    ngx_uint_t                  max_batched_tokens;
    ngx_uint_t                  max_queued_requests;
    ngx_flag_t                  prefix_caching;
    ngx_flag_t                  speculative_ngram;
    ngx_uint_t                  speculative_draft_tokens;
    ngx_uint_t                  speculative_ngram_size;
    ngx_uint_t                  task;       /* enum llm_task */
    ngx_flag_t                  kv_cache_prealloc;
    off_t                       kv_cache_memory;
    ngx_msec_t                  ready_timeout;
    ngx_msec_t                  watchdog;           /* a time, or
                                                       NGX_HTTP_LLM_WATCHDOG_* */

    /*
     * Opened by the master at configuration time and passed to the engine:
     * workers run as an unprivileged user that may not be able to open
     * either path (a model cache under root's 0700 home, say).
     */
    ngx_fd_t                    model_fd;
    ngx_fd_t                    binary_fd;

    uint64_t                    hash;               /* identity of this
                                                       engine's config */
    ngx_shm_zone_t             *zone;               /* counters */

    /*
     * Loaded by the master at configuration time, shared read-only by the
     * workers: nginx renders templates and tokenizes (docs/architecture.md).
     * tokenizer is NULL when the model file is unusable; load_error says
     * why, and the engine reports the same fault through health.
     */
    llm_tokenizer              *tokenizer;
    jinja_tmpl                 *chat_template;
    ngx_uint_t                  tool_format;    /* LLM_TOOL_FMT_*, of the
                                                   template's text */
    llm_fim                     fim;            /* pre -1: no FIM tokens */
    ngx_str_t                   chat_template_file;
    ngx_str_t                   bos_text;
    ngx_str_t                   eos_text;
    ngx_uint_t                  context_length;     /* min(model, config) */
    ngx_uint_t                  model_is_dir;       /* Hugging Face */
    char                       *load_error;
    ngx_http_llm_peer_t        *peer;               /* per process */
    unsigned                    no_engine:1;        /* llm_tokenizer */
} ngx_http_llm_engine_conf_t;


typedef struct {
    ngx_array_t                 engines;    /* ngx_http_llm_engine_conf_t * */
    ngx_array_t                 tokenizers; /* the same, llm_tokenizer */
} ngx_http_llm_main_conf_t;


typedef struct {
    ngx_http_llm_engine_conf_t *engine;
    ngx_uint_t                  role;       /* NGX_HTTP_LLM_ROLE_* */
    ngx_uint_t                  max_tokens; /* clamp; 0: none */
    ngx_uint_t                  max_input_tokens;   /* of one embeddings
                                                       or rerank request */
    ngx_msec_t                  deadline;   /* 0: none */
    size_t                      max_body_size;
    size_t                      max_buffered; /* output held for a slow
                                                 client before the engine
                                                 is told to wait */
    ngx_flag_t                  special_in_content; /* a message may write
                                                       control tokens */
    ngx_flag_t                  reasoning;  /* <think> -> reasoning_content */
    ngx_flag_t                  responses_strict_tools; /* hosted tools:
                                                   400, not dropped */
    ngx_shm_zone_t             *responses_zone; /* stored responses; NULL:
                                                   none */
    llm_sampling_params         sampling;   /* location defaults */
    unsigned                    sampling_set;   /* LLM_API_GIVEN_* */
    ngx_array_t                *quotas;     /* ngx_http_llm_quota_t */
    ngx_http_complex_value_t   *priority;   /* llm_priority; NULL: 0 */
    ngx_http_complex_value_t   *fair_key;   /* llm_fair_key */
    ngx_http_llm_engine_conf_t *prefix;     /* llm_prefix_hash: renders and
                                               tokenizes in a front */
    ngx_uint_t                  prefix_tokens;  /* llm_prefix_hash_tokens */
    ngx_uint_t                  max_n;      /* llm_max_n: choices */
    ngx_uint_t                  max_tool_calls; /* llm_max_tool_calls */
    ngx_uint_t                  json_ws;    /* llm_json_whitespace:
                                               LLM_JSON_WS_*, or AUTO */
} ngx_http_llm_loc_conf_t;


/* llm_engine's watchdog: auto scales with the engine's slowest step */
#define NGX_HTTP_LLM_WATCHDOG_AUTO  0
#define NGX_HTTP_LLM_WATCHDOG_OFF   ((ngx_msec_t) -2)
#define NGX_HTTP_LLM_WATCHDOG_MIN   1000        /* ms, what may be set */


#define NGX_HTTP_LLM_ROLE_NONE     0
#define NGX_HTTP_LLM_ROLE_API      1
#define NGX_HTTP_LLM_ROLE_HEALTH   2
#define NGX_HTTP_LLM_ROLE_METRICS  3


/*
 * A request's use of one ring slot. The engine side calls handler when the
 * slot changed (WAKE) or the engine was lost (slot == NULL then).
 */
struct ngx_http_llm_slot_s {
    ngx_http_llm_peer_t        *peer;
    llm_slot                   *slot;       /* NULL: engine lost */
    uint32_t                    index;
    uint64_t                    generation; /* the ring it belongs to */
    void                      (*handler)(ngx_http_llm_slot_t *s);
    void                       *data;
    ngx_log_t                  *log;        /* the request's */
};


/* a request waiting for its engine to be ready */
typedef struct {
    ngx_queue_t                 queue;
    void                      (*handler)(void *data, ngx_int_t ready);
    void                       *data;
} ngx_http_llm_waiter_t;


/* a request refused by a step of its pipeline, described to be sent by
   the one place that answers (ngx_http_llm_refuse()) */
#define NGX_HTTP_LLM_ERROR_LEN  512

typedef struct {
    ngx_uint_t                  status;
    char                        code[48];   /* "": JSON null */
    char                        param[64];  /* "": JSON null */
    u_char                      message[NGX_HTTP_LLM_ERROR_LEN];
} ngx_http_llm_error_t;


/* one generated token kept for the reply's logprobs */
typedef struct {
    llm_out_token               o;
    size_t                      offset;     /* of its text in the reply */
} ngx_http_llm_lp_t;


/*
 * One choice of a generation (n in the request, docs/api.md): its own ring
 * slot, detokenizer, stop matcher and text; a request has n of them, a
 * ping one (its slot).
 */
typedef struct {
    ngx_http_llm_slot_t         slot;       /* data: the request's ctx */
    llm_detok                   detok;
    char                       *detok_buf;
    llm_stop                    stop;
    llm_reply                     out;        /* reasoning and tool calls */
    ngx_buf_t                  *text;       /* non-streaming: the reply */
    ngx_buf_t                  *reasoning;  /* non-streaming: thinking */
    ngx_array_t                *lps;        /* non-streaming: logprobs */
    size_t                      text_offset;
    uint32_t                    consumed;   /* stream entries read */
    uint32_t                    n_completion;
    ngx_uint_t                  finish;     /* enum llm_finish */
    ngx_uint_t                  index;      /* "index" in the reply */

    unsigned                    stopped:1;  /* stop string matched */
    unsigned                    stop_inited:1;
    unsigned                    out_active:1;   /* llm_reply splits the text */
    unsigned                    ended:1;    /* this choice's end is out */
} ngx_http_llm_choice_t;


/*
 * How one kind of request writes its output: a stream's pieces and the
 * reply of a request that did not stream. One table per API shape
 * (OpenAI's in ngx_http_llm_format.c, Anthropic's Messages in
 * ngx_http_llm_messages_sse.c, Responses in ngx_http_llm_responses.c);
 * ngx_http_llm_output() maps a request kind (NGX_HTTP_LLM_GEN_*) to one.
 * Every entry is required.
 */
typedef struct {
    /* a stream's text the reply's splitter let out: thinking, answer */
    ngx_int_t  (*delta)(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
                        ngx_chain_t ***last, const llm_reply_piece *piece,
                        const llm_out_token *o, ngx_uint_t role);
    /* a stream's tool calls, once the choice's reply is read */
    ngx_int_t  (*tool_calls)(ngx_http_llm_ctx_t *ctx,
                             ngx_http_llm_choice_t *c, ngx_chain_t ***last);
    /* a stream's choice ended */
    ngx_int_t  (*finish)(ngx_http_llm_ctx_t *ctx, ngx_http_llm_choice_t *c,
                         ngx_chain_t ***last);
    /* a stream's last events (the request ended) */
    ngx_int_t  (*done)(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last);
    /* the whole reply of a request that did not stream */
    ngx_int_t  (*reply)(ngx_http_llm_ctx_t *ctx, ngx_buf_t **bp);
    /* a stream's last event when it failed after its headers went out */
    ngx_int_t  (*error)(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
                        ngx_uint_t status, const char *code,
                        const char *msg);
} ngx_http_llm_output_t;


/* one request's state, also what the $llm_* variables read */
struct ngx_http_llm_ctx_s {
    ngx_http_request_t         *request;
    ngx_http_llm_peer_t        *peer;
    ngx_http_llm_engine_conf_t *ecf;
    ngx_http_llm_waiter_t       waiter;
    ngx_event_t                 deadline;
    ngx_int_t                 (*ready)(ngx_http_request_t *r);
    ngx_http_event_handler_pt   read_body;  /* nginx's, while it reads */
    ngx_http_llm_error_t       *error;      /* a step's refusal, to send */
    const ngx_http_llm_output_t *output;    /* the shape of its output */

    /* generation */
    llm_api_request             req;
    int32_t                    *prompt;
    uint32_t                    n_prompt;
    uint32_t                    max_tokens; /* of each choice */
    int64_t                     priority;   /* into the slot */
    uint64_t                    fair_key;
    ngx_http_llm_quota_req_t   *quota;      /* NULL: no llm_token_quota */
    uint32_t                    n_cached;   /* choice 0's slot's */
    ngx_str_t                   id;         /* chatcmpl-..., cmpl-... */
    time_t                      created;
    int                         out_format; /* llm_reply_init's, for each
                                               choice */
    ngx_chain_t                *free;
    ngx_chain_t                *busy;
    uint64_t                    t_submit_ns;
    uint64_t                    t_scheduled_ns;
    uint64_t                    t_first_ns; /* of any choice */
    uint64_t                    t_done_ns;  /* the last choice's end */
    ngx_str_t                   relaxed;    /* the schema keywords the
                                               engine relaxed: the
                                               x-llm-schema-relaxed header */
    ngx_str_t                   prefix_hash;    /* a front's, when read */
    ngx_int_t                   prefix_state;   /* NGX_DONE while reading */

    llm_responses_req          *responses;  /* POST /v1/responses; NULL:
                                               chat or completions */
    void                       *embed;      /* POST /v1/embeddings's state
                                               (ngx_http_llm_embeddings.c) */

    ngx_http_llm_choice_t      *choices;    /* (n_choices); NULL until the
                                               request is prepared */
    ngx_uint_t                  n_choices;

    unsigned                    chat:1;
    unsigned                    stream:1;
    unsigned                    sse_started:1;  /* the event stream's
                                                   headers are out: an
                                                   error is its last
                                                   event, not a reply */
    unsigned                    finished:1;
    unsigned                    req_parsed:1;
    unsigned                    split:1;    /* each choice's llm_reply */
    unsigned                    out_in_think:1; /* llm_reply_init's */
    unsigned                    failed:1;   /* the request's error event
                                               is out: nothing follows */
    unsigned                    relaxed_read:1; /* relaxed taken from
                                                   choice 0's slot */

    /* Anthropic's Messages API (ngx_http_llm_messages.c) */
    unsigned                    messages:1; /* its shapes in and out */
    unsigned                    count_only:1;   /* /count_tokens */
    unsigned                    msg_started:1;  /* message_start is out */
    unsigned                    msg_block:2;    /* the open content block:
                                                   0 none, 1 thinking,
                                                   2 text */
    ngx_uint_t                  msg_index;  /* of the next block */
    ngx_int_t                   thinking;   /* -1, 0, 1: enable_thinking */

    /* /tokenize, /detokenize (ngx_http_llm_tokenize.c) */
    unsigned                    tokenize:1;
    unsigned                    detokenize:1;
    unsigned                    no_gen_prompt:1;    /* the template's
                                                       add_generation_prompt
                                                       off */
    unsigned                    token_strs:1;
    ngx_int_t                   add_special;    /* -1: the endpoint's */
};


extern ngx_module_t  ngx_http_llm_module;


/* ngx_http_llm_peer.c */
ngx_int_t ngx_http_llm_peer_init_process(ngx_cycle_t *cycle);
void ngx_http_llm_peer_exit_process(ngx_cycle_t *cycle);
ngx_http_llm_peer_t *ngx_http_llm_peer_get(ngx_http_llm_engine_conf_t *ecf,
    ngx_log_t *log);
llm_ring_header *ngx_http_llm_peer_ring(ngx_http_llm_peer_t *peer);
ngx_int_t ngx_http_llm_peer_ready(ngx_http_llm_peer_t *peer);
const char *ngx_http_llm_peer_reason(ngx_http_llm_peer_t *peer);
ngx_msec_t ngx_http_llm_peer_stalled(ngx_http_llm_peer_t *peer);
void ngx_http_llm_peer_wait(ngx_http_llm_peer_t *peer,
    ngx_http_llm_waiter_t *w);
void ngx_http_llm_peer_unwait(ngx_http_llm_waiter_t *w);
ngx_int_t ngx_http_llm_peer_claim(ngx_http_llm_peer_t *peer,
    ngx_http_llm_slot_t *s, uint32_t kind);
ngx_int_t ngx_http_llm_peer_submit(ngx_http_llm_slot_t *s);
void ngx_http_llm_peer_kick(ngx_http_llm_slot_t *s);
void ngx_http_llm_peer_release(ngx_http_llm_slot_t *s);

/* ngx_http_llm_reply.c */
ngx_int_t ngx_http_llm_send_json(ngx_http_request_t *r, ngx_uint_t status,
    cJSON *json);
const char *ngx_http_llm_error_type(ngx_uint_t status, const char *code);
ngx_int_t ngx_http_llm_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *code, const char *fmt, ...);
ngx_int_t ngx_http_llm_refuse(ngx_http_llm_ctx_t *ctx, ngx_uint_t status,
    const char *code, const char *fmt, ...);
ngx_int_t ngx_http_llm_refuse_api(ngx_http_llm_ctx_t *ctx,
    llm_api_error *api);
ngx_int_t ngx_http_llm_answer(ngx_http_llm_ctx_t *ctx, ngx_int_t rc);
ngx_int_t ngx_http_llm_unavailable(ngx_http_request_t *r,
    ngx_http_llm_peer_t *peer);
ngx_int_t ngx_http_llm_refuse_unavailable(ngx_http_llm_ctx_t *ctx);
ngx_int_t ngx_http_llm_retry_after(ngx_http_request_t *r,
    ngx_uint_t seconds);
ngx_int_t ngx_http_llm_send_status(ngx_http_request_t *r, ngx_uint_t status);
ngx_int_t ngx_http_llm_reply_filter_init(ngx_conf_t *cf);

/* ngx_http_llm_ctx.c */
ngx_http_llm_ctx_t *ngx_http_llm_ctx_create(ngx_http_request_t *r,
    ngx_http_llm_peer_t *peer);
void ngx_http_llm_ctx_finish(ngx_http_llm_ctx_t *ctx, ngx_int_t rc);
ngx_int_t ngx_http_llm_choices_create(ngx_http_llm_ctx_t *ctx, ngx_uint_t n);
void ngx_http_llm_release_choices(ngx_http_llm_ctx_t *ctx);

/* ngx_http_llm_ready.c */
ngx_int_t ngx_http_llm_when_ready(ngx_http_request_t *r,
    ngx_http_llm_peer_t *peer, ngx_int_t (*ready)(ngx_http_request_t *r));

/* ngx_http_llm_api.c */
ngx_int_t ngx_http_llm_api_handler(ngx_http_request_t *r);

/* ngx_http_llm_models.c */
ngx_int_t ngx_http_llm_models_handler(ngx_http_request_t *r);

/* ngx_http_llm_health.c */
ngx_int_t ngx_http_llm_health_handler(ngx_http_request_t *r);

/* ngx_http_llm_model.c */
#define NGX_HTTP_LLM_SHA256_HEX  64
ngx_int_t ngx_http_llm_sha256_valid(u_char *s, size_t len);
char *ngx_http_llm_sha256_check(ngx_conf_t *cf,
    ngx_http_llm_engine_conf_t *ecf, struct stat *mst);
char *ngx_http_llm_model_init(ngx_conf_t *cf,
    ngx_http_llm_engine_conf_t *ecf);
char *ngx_http_llm_tokenizer_init(ngx_conf_t *cf,
    ngx_http_llm_engine_conf_t *ecf);

/* ngx_http_llm_metrics.c */
ngx_int_t ngx_http_llm_counters_zone(ngx_conf_t *cf,
    ngx_http_llm_engine_conf_t *ecf);
ngx_int_t ngx_http_llm_log_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_metrics_handler(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_add_variables(ngx_conf_t *cf);

/* ngx_http_llm_generate.c: what ngx_http_llm_generate() serves */
#define NGX_HTTP_LLM_GEN_COMPLETION  0      /* /v1/completions */
#define NGX_HTTP_LLM_GEN_CHAT        1      /* /v1/chat/completions */
#define NGX_HTTP_LLM_GEN_MESSAGES    2      /* /v1/messages */
#define NGX_HTTP_LLM_GEN_COUNT       3      /* /v1/messages/count_tokens */
#define NGX_HTTP_LLM_GEN_TOKENIZE    4      /* /tokenize */
#define NGX_HTTP_LLM_GEN_DETOKENIZE  5      /* /detokenize */
#define NGX_HTTP_LLM_GEN_RESPONSES   6      /* /v1/responses */

ngx_int_t ngx_http_llm_generate(ngx_http_request_t *r, ngx_uint_t kind);
ngx_int_t ngx_http_llm_render_template(ngx_pool_t *pool,
    ngx_http_llm_ctx_t *ctx, ngx_http_llm_engine_conf_t *ecf,
    ngx_flag_t special_in_content, char **text, size_t *len,
    llm_span **spans, size_t *n_spans, char *err, size_t err_len);

/* ngx_http_llm_responses.c */
ngx_int_t ngx_http_llm_responses_parse(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx, llm_api_limits *lim, u_char **body,
    size_t *len);
llm_responses_req *ngx_http_llm_responses_create(ngx_pool_t *pool);
ngx_int_t ngx_http_llm_responses_new_id(ngx_http_llm_ctx_t *ctx);
char *ngx_http_llm_responses_zone_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_http_llm_responses_handler(ngx_http_request_t *r);
extern const ngx_http_llm_output_t  ngx_http_llm_responses_output;

/* ngx_http_llm_prefix.c */
char *ngx_http_llm_prefix_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_http_llm_prefix_tokens_check(ngx_conf_t *cf, void *post,
    void *data);
ngx_int_t ngx_http_llm_prefix_init(ngx_conf_t *cf);
ngx_int_t ngx_http_llm_prefix_add_variables(ngx_conf_t *cf);

/* ngx_http_llm_messages.c */
ngx_uint_t ngx_http_llm_messages_uri(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_messages_body(ngx_http_llm_ctx_t *ctx, u_char **body,
    size_t *len, llm_api_error *err);
cJSON *ngx_http_llm_messages_count(ngx_http_llm_ctx_t *ctx);
cJSON *ngx_http_llm_messages_error(ngx_uint_t status, const char *msg);
ngx_buf_t *ngx_http_llm_messages_page(ngx_pool_t *pool, ngx_uint_t status,
    const char *msg);

/* ngx_http_llm_embeddings.c */
ngx_int_t ngx_http_llm_embeddings(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_rerank(ngx_http_request_t *r);

/* ngx_http_llm_generate.c: the body read, in one piece */
u_char *ngx_http_llm_body_bytes(ngx_http_request_t *r, size_t *len);

/* ngx_http_llm_tokenize.c */
ngx_int_t ngx_http_llm_tokenize_body(ngx_http_llm_ctx_t *ctx, u_char **body,
    size_t *len, llm_api_error *err);
ngx_int_t ngx_http_llm_tokenize_reply(ngx_http_llm_ctx_t *ctx, cJSON **json);
ngx_int_t ngx_http_llm_detokenize(ngx_http_llm_ctx_t *ctx, u_char *body,
    size_t len, cJSON **json);

/* ngx_http_llm_messages_sse.c */
extern const ngx_http_llm_output_t  ngx_http_llm_messages_output;

/* ngx_http_llm_stream.c */
void ngx_http_llm_stream_start(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);

/* ngx_http_llm_shm.c: a keyed LRU store in a shared-memory zone */
typedef struct {
    ngx_rbtree_t                rbtree;
    ngx_rbtree_node_t           sentinel;
    ngx_queue_t                 lru;        /* head: the most recent */
} ngx_http_llm_shm_sh_t;

typedef struct {
    ngx_http_llm_shm_sh_t      *sh;
    ngx_slab_pool_t            *shpool;
} ngx_http_llm_shm_t;

/* <0, 0, >0: key against node's key (nodes of equal hash) */
typedef ngx_int_t (*ngx_http_llm_shm_cmp_pt)(void *key,
    ngx_rbtree_node_t *node);

ngx_int_t ngx_http_llm_shm_init(ngx_shm_zone_t *shm_zone,
    ngx_http_llm_shm_t *shm, ngx_http_llm_shm_t *old,
    ngx_rbtree_insert_pt insert, const char *what);
ngx_rbtree_node_t *ngx_http_llm_shm_find(ngx_http_llm_shm_t *shm,
    uint32_t hash, ngx_http_llm_shm_cmp_pt cmp, void *key);
void ngx_http_llm_shm_free(ngx_http_llm_shm_t *shm, ngx_rbtree_node_t *node,
    ngx_queue_t *lru);

/* ngx_http_llm_quota.c */
char *ngx_http_llm_quota_zone_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_http_llm_quota_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_http_llm_priority_conf(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_http_llm_quota_merge(ngx_conf_t *cf, ngx_http_llm_loc_conf_t *prev,
    ngx_http_llm_loc_conf_t *conf);
ngx_int_t ngx_http_llm_quota_admit(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
ngx_int_t ngx_http_llm_quota_spend(ngx_http_llm_ctx_t *ctx);
void ngx_http_llm_quota_settle(ngx_http_llm_ctx_t *ctx);
ngx_int_t ngx_http_llm_quota_add_variables(ngx_conf_t *cf);
ngx_int_t ngx_http_llm_priority(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);

/* ngx_http_llm_buf.c */
u_char *ngx_http_llm_json_escape(u_char *dst, const u_char *src, size_t len);
ngx_buf_t *ngx_http_llm_get_buf(ngx_http_llm_ctx_t *ctx, size_t size);
ngx_int_t ngx_http_llm_append(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    ngx_buf_t *b);

/* ngx_http_llm_format.c */
ngx_int_t ngx_http_llm_format_chunk(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last, const u_char *text,
    size_t len, const llm_out_token *o, ngx_uint_t role);
ngx_int_t ngx_http_llm_format_delta(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last, const llm_reply_piece *piece,
    const llm_out_token *o, ngx_uint_t role);
ngx_int_t ngx_http_llm_format_tool_calls(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last);
ngx_int_t ngx_http_llm_format_finish(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_choice_t *c, ngx_chain_t ***last);
ngx_int_t ngx_http_llm_format_final(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t ***last);
ngx_int_t ngx_http_llm_format_last(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t ***last, ngx_buf_t *b);
const ngx_http_llm_output_t *ngx_http_llm_output(ngx_uint_t kind);
ngx_int_t ngx_http_llm_format_error(ngx_http_llm_ctx_t *ctx,
    ngx_chain_t ***last, ngx_uint_t status, const char *code,
    const char *msg);
const char *ngx_http_llm_finish_name(ngx_http_llm_choice_t *c);



/* the engine's counters, NULL before the zone is mapped; the peer counts
   its starts here, the metrics file owns the zone */
static ngx_inline ngx_http_llm_counters_t *
ngx_http_llm_counters(ngx_http_llm_engine_conf_t *ecf)
{
    return ecf->zone ? ecf->zone->data : NULL;
}


/* what every choice generated (OpenAI's usage counts n choices) */
static ngx_inline uint32_t
ngx_http_llm_completion_tokens(ngx_http_llm_ctx_t *ctx)
{
    uint32_t    n;
    ngx_uint_t  i;

    for (i = 0, n = 0; i < ctx->n_choices; i++) {
        n += ctx->choices[i].n_completion;
    }

    return n;
}


/* the clock of the ring's timestamps: the engine's, CLOCK_MONOTONIC */
static ngx_inline uint64_t
ngx_http_llm_now_ns(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

#endif
