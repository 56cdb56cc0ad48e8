/*
 * ngx_http_llm_module: directives, configuration and process hooks.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"

#ifndef NGX_LLM_ENGINE_BIN
#define NGX_LLM_ENGINE_BIN  "/usr/local/lib/ngx_llm/ngx_llm_engine"
#endif


static ngx_int_t ngx_http_llm_preconfiguration(ngx_conf_t *cf);
static ngx_int_t ngx_http_llm_postconfiguration(ngx_conf_t *cf);
static void *ngx_http_llm_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_llm_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_llm_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static char *ngx_http_llm_engine_block(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_engine_param(ngx_conf_t *cf, ngx_command_t *dummy,
    void *conf);
static ngx_uint_t ngx_http_llm_tokenizer_param(ngx_str_t *name);
static char *ngx_http_llm_check_word(ngx_conf_t *cf, void *post, void *data);
static char *ngx_http_llm_tokenizer_done(ngx_conf_t *cf,
    ngx_http_llm_engine_conf_t *ecf);
static char *ngx_http_llm_check_sha256(ngx_conf_t *cf, void *post,
    void *data);
static char *ngx_http_llm_check_kv_memory(ngx_conf_t *cf, void *post,
    void *data);
static char *ngx_http_llm_set_watchdog(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_engine_done(ngx_conf_t *cf,
    ngx_http_llm_engine_conf_t *ecf);
static char *ngx_http_llm_location(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_sampling(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_metrics(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_http_llm_init_process(ngx_cycle_t *cycle);
static void ngx_http_llm_exit_process(ngx_cycle_t *cycle);


static ngx_conf_post_t  ngx_http_llm_prefix_tokens_post = {
    ngx_http_llm_prefix_tokens_check
};


/* llm_max_n: the choices a request may ask for (the ring carries
   LLM_RING_MAX_CHOICES slots per request) */
static ngx_conf_num_bounds_t  ngx_http_llm_max_input_tokens_bounds = {
    ngx_conf_check_num_bounds, 1, 16 * 1024 * 1024
};


static ngx_conf_num_bounds_t  ngx_http_llm_max_n_bounds = {
    ngx_conf_check_num_bounds, 1, LLM_RING_MAX_CHOICES
};


/* llm_max_tool_calls: a reply's calls under tool_choice "required" */
static ngx_conf_num_bounds_t  ngx_http_llm_max_tool_calls_bounds = {
    ngx_conf_check_num_bounds, 1, 128
};


static ngx_conf_enum_t  ngx_http_llm_json_ws[] = {
    { ngx_string("compact"), LLM_JSON_WS_COMPACT },
    { ngx_string("flexible"), LLM_JSON_WS_FLEXIBLE },
    { ngx_string("auto"), NGX_HTTP_LLM_JSON_WS_AUTO },
    { ngx_null_string, 0 }
};


static ngx_conf_enum_t  ngx_http_llm_tasks[] = {
    { ngx_string("auto"), LLM_TASK_AUTO },
    { ngx_string("generate"), LLM_TASK_GENERATE },
    { ngx_string("embed"), LLM_TASK_EMBED },
    { ngx_string("score"), LLM_TASK_SCORE },
    { ngx_null_string, 0 }
};


static ngx_command_t  ngx_http_llm_commands[] = {

    { ngx_string("llm_engine"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_BLOCK|NGX_CONF_TAKE1,
      ngx_http_llm_engine_block,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_tokenizer"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_BLOCK|NGX_CONF_TAKE1,
      ngx_http_llm_engine_block,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      (void *) 1 },

    { ngx_string("llm_api"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_llm_location,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      (void *) NGX_HTTP_LLM_ROLE_API },

    { ngx_string("llm_health"),
      NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_llm_location,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      (void *) NGX_HTTP_LLM_ROLE_HEALTH },

    { ngx_string("llm_metrics"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_llm_metrics,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_max_tokens"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, max_tokens),
      NULL },

    { ngx_string("llm_max_input_tokens"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, max_input_tokens),
      &ngx_http_llm_max_input_tokens_bounds },

    { ngx_string("llm_max_n"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, max_n),
      &ngx_http_llm_max_n_bounds },

    { ngx_string("llm_max_tool_calls"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, max_tool_calls),
      &ngx_http_llm_max_tool_calls_bounds },

    { ngx_string("llm_json_whitespace"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, json_ws),
      &ngx_http_llm_json_ws },

    { ngx_string("llm_deadline"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, deadline),
      NULL },

    { ngx_string("llm_max_body_size"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, max_body_size),
      NULL },

    { ngx_string("llm_max_buffered"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, max_buffered),
      NULL },

    { ngx_string("llm_special_tokens_in_content"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, special_in_content),
      NULL },

    { ngx_string("llm_token_quota_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE2,
      ngx_http_llm_quota_zone_conf,
      0,
      0,
      NULL },

    { ngx_string("llm_token_quota"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_2MORE,
      ngx_http_llm_quota_conf,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_priority"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_llm_priority_conf,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, priority),
      NULL },

    { ngx_string("llm_fair_key"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_set_complex_value_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, fair_key),
      NULL },

    { ngx_string("llm_responses_strict_tools"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, responses_strict_tools),
      NULL },

    { ngx_string("llm_responses_zone"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE3,
      ngx_http_llm_responses_zone_conf,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_reasoning"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, reasoning),
      NULL },

    { ngx_string("llm_sampling"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_llm_sampling,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_prefix_hash"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_llm_prefix_conf,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_prefix_hash_tokens"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, prefix_tokens),
      &ngx_http_llm_prefix_tokens_post },

      ngx_null_command
};


/* the words a parameter takes, for ngx_http_llm_check_word() */
typedef struct {
    ngx_conf_post_handler_pt    post_handler;
    ngx_str_t                  *words;          /* ends with a null one */
} ngx_http_llm_conf_words_t;


static ngx_str_t  ngx_http_llm_backend_words[] = {
    ngx_string("cpu"),
    ngx_string("cuda"),
    ngx_null_string
};

static ngx_http_llm_conf_words_t  ngx_http_llm_backends = {
    ngx_http_llm_check_word, ngx_http_llm_backend_words
};


static ngx_str_t  ngx_http_llm_kv_dtype_words[] = {
    ngx_string("f16"),
    ngx_string("f32"),
    ngx_null_string
};

static ngx_http_llm_conf_words_t  ngx_http_llm_kv_dtypes = {
    ngx_http_llm_check_word, ngx_http_llm_kv_dtype_words
};


static ngx_conf_post_t  ngx_http_llm_kv_memory_post = {
    ngx_http_llm_check_kv_memory
};

static ngx_conf_post_t  ngx_http_llm_sha256_post = {
    ngx_http_llm_check_sha256
};


static ngx_conf_num_bounds_t  ngx_http_llm_threads_bounds = {
    ngx_conf_check_num_bounds, 1, 1024
};

static ngx_conf_num_bounds_t  ngx_http_llm_tensor_parallel_bounds = {
    ngx_conf_check_num_bounds, 1, 64
};

static ngx_conf_num_bounds_t  ngx_http_llm_spec_draft_bounds = {
    ngx_conf_check_num_bounds, 1, LLM_SPEC_MAX_DRAFT
};

static ngx_conf_num_bounds_t  ngx_http_llm_spec_ngram_bounds = {
    ngx_conf_check_num_bounds, 1, LLM_SPEC_MAX_NGRAM
};

static ngx_conf_num_bounds_t  ngx_http_llm_max_num_seqs_bounds = {
    ngx_conf_check_num_bounds, 1, 1024
};

static ngx_conf_num_bounds_t  ngx_http_llm_max_model_len_bounds = {
    ngx_conf_check_num_bounds, 16, LLM_RING_MAX_PROMPT
};

static ngx_conf_num_bounds_t  ngx_http_llm_max_batched_tokens_bounds = {
    ngx_conf_check_num_bounds, 1, 1 << 20
};

static ngx_conf_num_bounds_t  ngx_http_llm_max_queued_bounds = {
    ngx_conf_check_num_bounds, 0, LLM_RING_MAX_SLOTS / 2
};


/* inside llm_engine NAME { }: conf is its ngx_http_llm_engine_conf_t */
static ngx_command_t  ngx_http_llm_engine_commands[] = {

    { ngx_string("model"),
      NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, model),
      NULL },

    { ngx_string("served_model_name"),
      NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, served_model_name),
      NULL },

    { ngx_string("chat_template"),
      NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, chat_template_file),
      NULL },

    { ngx_string("binary"),
      NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, binary),
      NULL },

    { ngx_string("backend"),
      NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, backend),
      &ngx_http_llm_backends },

    { ngx_string("kv_cache_dtype"),
      NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, kv_cache_dtype),
      &ngx_http_llm_kv_dtypes },

    { ngx_string("threads"),
      NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, threads),
      &ngx_http_llm_threads_bounds },

    { ngx_string("tensor_parallel"),
      NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, tensor_parallel),
      &ngx_http_llm_tensor_parallel_bounds },

    { ngx_string("max_num_seqs"),
      NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, max_num_seqs),
      &ngx_http_llm_max_num_seqs_bounds },

    { ngx_string("max_model_len"),
      NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, max_model_len),
      &ngx_http_llm_max_model_len_bounds },

    { ngx_string("max_batched_tokens"),
      NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, max_batched_tokens),
      &ngx_http_llm_max_batched_tokens_bounds },

    { ngx_string("max_queued_requests"),
      NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, max_queued_requests),
      &ngx_http_llm_max_queued_bounds },

    { ngx_string("prefix_caching"),
      NGX_CONF_TAKE1,
      ngx_conf_set_flag_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, prefix_caching),
      NULL },

    { ngx_string("speculative_ngram"),
      NGX_CONF_TAKE1,
      ngx_conf_set_flag_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, speculative_ngram),
      NULL },

    { ngx_string("speculative_draft_tokens"),
      NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, speculative_draft_tokens),
      &ngx_http_llm_spec_draft_bounds },

    { ngx_string("task"),
      NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, task),
      &ngx_http_llm_tasks },

    { ngx_string("speculative_ngram_size"),
      NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, speculative_ngram_size),
      &ngx_http_llm_spec_ngram_bounds },

    { ngx_string("model_sha256"),
      NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, model_sha256),
      &ngx_http_llm_sha256_post },

    { ngx_string("kv_cache_prealloc"),
      NGX_CONF_TAKE1,
      ngx_conf_set_flag_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, kv_cache_prealloc),
      NULL },

    { ngx_string("kv_cache_memory"),
      NGX_CONF_TAKE1,
      ngx_conf_set_off_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, kv_cache_memory),
      &ngx_http_llm_kv_memory_post },

    { ngx_string("ready_timeout"),
      NGX_CONF_TAKE1,
      ngx_conf_set_msec_slot,
      0,
      offsetof(ngx_http_llm_engine_conf_t, ready_timeout),
      NULL },

    { ngx_string("watchdog"),
      NGX_CONF_TAKE1,
      ngx_http_llm_set_watchdog,
      0,
      offsetof(ngx_http_llm_engine_conf_t, watchdog),
      NULL },

      ngx_null_command
};


/* what an llm_tokenizer block takes of llm_engine's parameters: the
   model's files, nothing about an engine */
static ngx_str_t  ngx_http_llm_tokenizer_params[] = {
    ngx_string("model"),
    ngx_string("served_model_name"),
    ngx_string("chat_template"),
    ngx_string("model_sha256"),
    ngx_string("max_model_len"),
    ngx_null_string
};


static ngx_http_module_t  ngx_http_llm_module_ctx = {
    ngx_http_llm_preconfiguration,         /* preconfiguration */
    ngx_http_llm_postconfiguration,        /* postconfiguration */

    ngx_http_llm_create_main_conf,         /* create main configuration */
    NULL,                                  /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_http_llm_create_loc_conf,          /* create location configuration */
    ngx_http_llm_merge_loc_conf            /* merge location configuration */
};


ngx_module_t  ngx_http_llm_module = {
    NGX_MODULE_V1,
    &ngx_http_llm_module_ctx,              /* module context */
    ngx_http_llm_commands,                 /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_http_llm_init_process,             /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_llm_exit_process,             /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_int_t
ngx_http_llm_preconfiguration(ngx_conf_t *cf)
{
    if (ngx_http_llm_quota_add_variables(cf) != NGX_OK
        || ngx_http_llm_prefix_add_variables(cf) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return ngx_http_llm_add_variables(cf);
}


static ngx_int_t
ngx_http_llm_postconfiguration(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_llm_log_handler;

    if (ngx_http_llm_prefix_init(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    /* nginx's own error pages in llm_api locations, as JSON */
    return ngx_http_llm_reply_filter_init(cf);
}


static void *
ngx_http_llm_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_llm_main_conf_t  *lmcf;

    lmcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_main_conf_t));
    if (lmcf == NULL) {
        return NULL;
    }

    if (ngx_array_init(&lmcf->engines, cf->pool, 2,
                       sizeof(ngx_http_llm_engine_conf_t *))
        != NGX_OK
        || ngx_array_init(&lmcf->tokenizers, cf->pool, 1,
                          sizeof(ngx_http_llm_engine_conf_t *))
           != NGX_OK)
    {
        return NULL;
    }

    return lmcf;
}


static void *
ngx_http_llm_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_loc_conf_t));
    if (llcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     llcf->engine = NULL;
     *     llcf->role = NGX_HTTP_LLM_ROLE_NONE;
     *     llcf->sampling = { 0 };
     *     llcf->sampling_set = 0;
     */

    llcf->max_tokens = NGX_CONF_UNSET_UINT;
    llcf->max_n = NGX_CONF_UNSET_UINT;
    llcf->max_input_tokens = NGX_CONF_UNSET_UINT;
    llcf->max_tool_calls = NGX_CONF_UNSET_UINT;
    llcf->json_ws = NGX_CONF_UNSET_UINT;
    llcf->deadline = NGX_CONF_UNSET_MSEC;
    llcf->max_body_size = NGX_CONF_UNSET_SIZE;
    llcf->max_buffered = NGX_CONF_UNSET_SIZE;
    llcf->special_in_content = NGX_CONF_UNSET;
    llcf->reasoning = NGX_CONF_UNSET;
    llcf->responses_strict_tools = NGX_CONF_UNSET;
    llcf->responses_zone = NGX_CONF_UNSET_PTR;
    llcf->prefix = NGX_CONF_UNSET_PTR;
    llcf->prefix_tokens = NGX_CONF_UNSET_UINT;

    return llcf;
}


static char *
ngx_http_llm_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_llm_loc_conf_t *prev = parent;
    ngx_http_llm_loc_conf_t *conf = child;

    ngx_http_core_loc_conf_t  *clcf;

    /* the role and its handler belong to the location that names them */
    if (conf->engine == NULL) {
        conf->engine = prev->engine;
    }

    ngx_conf_merge_uint_value(conf->max_tokens, prev->max_tokens, 0);
    ngx_conf_merge_uint_value(conf->max_n, prev->max_n,
                              NGX_HTTP_LLM_DEFAULT_MAX_N);
    ngx_conf_merge_uint_value(conf->max_tool_calls, prev->max_tool_calls,
                              NGX_HTTP_LLM_DEFAULT_MAX_TOOL_CALLS);
    /* measured: docs/api.md "JSON whitespace" */
    ngx_conf_merge_uint_value(conf->json_ws, prev->json_ws,
                              NGX_HTTP_LLM_JSON_WS_AUTO);
    /* every generation holds a non-cancelable timer: a graceful reload
     * waits for it instead of cutting the stream */
    ngx_conf_merge_msec_value(conf->deadline, prev->deadline, 3600000);
    ngx_conf_merge_size_value(conf->max_body_size, prev->max_body_size,
                              LLM_DEFAULT_MAX_BODY);
    /* the tokens of one /v1/embeddings or /v1/rerank request, in all */
    ngx_conf_merge_uint_value(conf->max_input_tokens,
                              prev->max_input_tokens, 262144);
    ngx_conf_merge_size_value(conf->max_buffered, prev->max_buffered,
                              64 * 1024);
    /* off: a message cannot write a control token (docs/directives.md) */
    ngx_conf_merge_value(conf->special_in_content, prev->special_in_content,
                         0);
    ngx_conf_merge_value(conf->reasoning, prev->reasoning, 0);
    ngx_conf_merge_value(conf->responses_strict_tools,
                         prev->responses_strict_tools, 0);
    ngx_conf_merge_ptr_value(conf->responses_zone, prev->responses_zone,
                             NULL);
    ngx_conf_merge_ptr_value(conf->prefix, prev->prefix, NULL);
    /* 16 blocks of the engine's 16 tokens: a system prompt's start */
    ngx_conf_merge_uint_value(conf->prefix_tokens, prev->prefix_tokens, 256);

    if (conf->sampling_set == 0) {
        conf->sampling = prev->sampling;
        conf->sampling_set = prev->sampling_set;
    }

    if (ngx_http_llm_quota_merge(cf, prev, conf) != NGX_CONF_OK) {
        return NGX_CONF_ERROR;
    }

    /*
     * core enforces llm_max_body_size as it reads, chunked bodies too (a
     * limit checked only after reading lets a client fill the disk); its
     * 413 leaves as OpenAI JSON through the reply filter (reply.c)
     */
    if (conf->role == NGX_HTTP_LLM_ROLE_API) {
        clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
        clcf->client_max_body_size = conf->max_body_size;
        /* typical bodies in memory; rare big ones in a temp file */
        if ((size_t) clcf->client_body_buffer_size
            < ngx_min(conf->max_body_size, 1024 * 1024))
        {
            clcf->client_body_buffer_size = ngx_min(conf->max_body_size,
                                                    1024 * 1024);
        }
    }

    return NGX_CONF_OK;
}


/* llm_engine NAME { model PATH; ... } */

static char *
ngx_http_llm_engine_block(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_main_conf_t *lmcf = conf;

    char                         *rv;
    ngx_str_t                    *value;
    ngx_uint_t                    i, k;
    ngx_conf_t                    save;
    ngx_array_t                  *a[2];
    ngx_http_llm_engine_conf_t   *ecf, **ep;

    value = cf->args->elts;

    /* one namespace: llm_prefix_hash takes the name of either */
    a[0] = &lmcf->engines;
    a[1] = &lmcf->tokenizers;

    for (k = 0; k < 2; k++) {
        ep = a[k]->elts;
        for (i = 0; i < a[k]->nelts; i++) {
            if (ep[i]->name.len == value[1].len
                && ngx_strncmp(ep[i]->name.data, value[1].data,
                               value[1].len)
                   == 0)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "duplicate %V \"%V\"", &value[0],
                                   &value[1]);
                return NGX_CONF_ERROR;
            }
        }
    }

    ecf = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_engine_conf_t));
    if (ecf == NULL) {
        return NGX_CONF_ERROR;
    }

    /*
     * set by ngx_pcalloc(), unset for ngx_conf_set_str_slot():
     *
     *     ecf->model = { 0, NULL };
     *     ecf->served_model_name = { 0, NULL };
     *     ecf->chat_template_file = { 0, NULL };
     *     ecf->binary = { 0, NULL };
     *     ecf->backend = { 0, NULL };
     *     ecf->kv_cache_dtype = { 0, NULL };
     *     ecf->model_sha256 = { 0, NULL };
     *     ecf->sha256 = { 0, NULL };
     */

    ecf->name = value[1];
    ecf->threads = NGX_CONF_UNSET_UINT;
    ecf->tensor_parallel = NGX_CONF_UNSET_UINT;
    ecf->max_num_seqs = NGX_CONF_UNSET_UINT;
    ecf->max_model_len = NGX_CONF_UNSET_UINT;
    ecf->max_batched_tokens = NGX_CONF_UNSET_UINT;
    ecf->max_queued_requests = NGX_CONF_UNSET_UINT;
    ecf->prefix_caching = NGX_CONF_UNSET;
    ecf->speculative_ngram = NGX_CONF_UNSET;
    ecf->speculative_draft_tokens = NGX_CONF_UNSET_UINT;
    ecf->speculative_ngram_size = NGX_CONF_UNSET_UINT;
    ecf->task = NGX_CONF_UNSET_UINT;
    ecf->kv_cache_prealloc = NGX_CONF_UNSET;
    ecf->kv_cache_memory = NGX_CONF_UNSET;
    ecf->ready_timeout = NGX_CONF_UNSET_MSEC;
    ecf->watchdog = NGX_CONF_UNSET_MSEC;
    ecf->model_fd = NGX_INVALID_FILE;
    ecf->binary_fd = NGX_INVALID_FILE;
    ecf->no_engine = cmd->post != NULL;

    ep = ngx_array_push(ecf->no_engine ? &lmcf->tokenizers : &lmcf->engines);
    if (ep == NULL) {
        return NGX_CONF_ERROR;
    }
    *ep = ecf;

    save = *cf;
    cf->handler = ngx_http_llm_engine_param;
    cf->handler_conf = (char *) ecf;

    rv = ngx_conf_parse(cf, NULL);

    *cf = save;

    if (rv != NGX_CONF_OK) {
        return rv;
    }

    return ecf->no_engine ? ngx_http_llm_tokenizer_done(cf, ecf)
                          : ngx_http_llm_engine_done(cf, ecf);
}


/*
 * One line of an llm_engine block, as ngx_conf_handler() would run a
 * directive: found in ngx_http_llm_engine_commands, set by its slot
 * setter, checked by its post handler.
 */
static char *
ngx_http_llm_engine_param(ngx_conf_t *cf, ngx_command_t *dummy, void *conf)
{
    char           *rv;
    ngx_str_t      *name;
    ngx_command_t  *cmd;

    name = cf->args->elts;

    for (cmd = ngx_http_llm_engine_commands; cmd->name.len; cmd++) {
        if (cmd->name.len == name->len
            && ngx_strncmp(cmd->name.data, name->data, name->len) == 0)
        {
            break;
        }
    }

    if (cmd->name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "unknown llm_engine parameter \"%V\"", name);
        return NGX_CONF_ERROR;
    }

    if (((ngx_http_llm_engine_conf_t *) conf)->no_engine
        && !ngx_http_llm_tokenizer_param(name))
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" is an engine's parameter: llm_tokenizer "
                           "starts no engine", name);
        return NGX_CONF_ERROR;
    }

    /* each takes one value (NGX_CONF_TAKE1) */
    if (cf->args->nelts != 2) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid number of arguments in \"%V\" of "
                           "llm_engine", name);
        return NGX_CONF_ERROR;
    }

    rv = cmd->set(cf, cmd, conf);

    if (rv == NGX_CONF_OK || rv == NGX_CONF_ERROR) {
        return rv;
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\" directive %s", name, rv);

    return NGX_CONF_ERROR;
}


static ngx_uint_t
ngx_http_llm_tokenizer_param(ngx_str_t *name)
{
    ngx_str_t  *p;

    for (p = ngx_http_llm_tokenizer_params; p->len; p++) {
        if (p->len == name->len
            && ngx_strncmp(p->data, name->data, name->len) == 0)
        {
            return 1;
        }
    }

    return 0;
}


/* a value from a list of words: "invalid backend "x" (cpu or cuda)" */
static char *
ngx_http_llm_check_word(ngx_conf_t *cf, void *post, void *data)
{
    ngx_http_llm_conf_words_t *w = post;
    ngx_str_t                 *v = data;

    u_char      *p, list[128];
    ngx_str_t   *name;
    ngx_uint_t   i;

    for (i = 0; w->words[i].len; i++) {
        if (w->words[i].len == v->len
            && ngx_strncmp(w->words[i].data, v->data, v->len) == 0)
        {
            return NGX_CONF_OK;
        }
    }

    p = list;
    for (i = 0; w->words[i].len; i++) {
        p = ngx_slprintf(p, list + sizeof(list), "%s%V",
                         i == 0 ? "" : w->words[i + 1].len ? ", " : " or ",
                         &w->words[i]);
    }

    name = cf->args->elts;
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid %V \"%V\" (%*s)",
                       &name[0], v, (size_t) (p - list), list);

    return NGX_CONF_ERROR;
}


/* KV pools are large: a size in g too (ngx_parse_offset), at least 1m */
static char *
ngx_http_llm_check_kv_memory(ngx_conf_t *cf, void *post, void *data)
{
    off_t *size = data;

    ngx_str_t  *value;

    if (*size < 1024 * 1024) {
        value = cf->args->elts;
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid kv_cache_memory \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/* model_sha256: 64 hex digits, either case */
static char *
ngx_http_llm_check_sha256(ngx_conf_t *cf, void *post, void *data)
{
    ngx_str_t *hex = data;

    if (ngx_http_llm_sha256_valid(hex->data, hex->len) != NGX_OK) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid model_sha256 \"%V\": 64 hex digits "
                           "expected", hex);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/* watchdog auto | off | time: a time of at least 1s */
static char *
ngx_http_llm_set_watchdog(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_engine_conf_t *ecf = conf;

    ngx_str_t   *value;
    ngx_msec_t   ms;

    if (ecf->watchdog != NGX_CONF_UNSET_MSEC) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "auto") == 0) {
        ecf->watchdog = NGX_HTTP_LLM_WATCHDOG_AUTO;
        return NGX_CONF_OK;
    }

    if (ngx_strcmp(value[1].data, "off") == 0) {
        ecf->watchdog = NGX_HTTP_LLM_WATCHDOG_OFF;
        return NGX_CONF_OK;
    }

    ms = ngx_parse_time(&value[1], 0);
    if (ms == (ngx_msec_t) NGX_ERROR || ms < NGX_HTTP_LLM_WATCHDOG_MIN) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid watchdog \"%V\" (auto, off, or a time "
                           "of at least 1s)", &value[1]);
        return NGX_CONF_ERROR;
    }

    ecf->watchdog = ms;

    return NGX_CONF_OK;
}


static char *
ngx_http_llm_engine_done(ngx_conf_t *cf, ngx_http_llm_engine_conf_t *ecf)
{
    if (ecf->model.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "llm_engine \"%V\" has no \"model\"", &ecf->name);
        return NGX_CONF_ERROR;
    }

    if (ecf->served_model_name.len == 0) {
        ecf->served_model_name = ecf->name;
    }
    if (ecf->backend.len == 0) {
        ngx_str_set(&ecf->backend, "cpu");
    }
    if (ecf->kv_cache_dtype.len == 0) {
        ngx_str_set(&ecf->kv_cache_dtype, "f16");
    }
    if (ecf->binary.len == 0) {
        ngx_str_set(&ecf->binary, NGX_LLM_ENGINE_BIN);
    }

    /* common/defaults.h: the same values the engine takes */
    ngx_conf_init_uint_value(ecf->threads, LLM_DEFAULT_THREADS);
    ngx_conf_init_uint_value(ecf->tensor_parallel,
                             LLM_DEFAULT_TENSOR_PARALLEL);
    ngx_conf_init_uint_value(ecf->max_num_seqs, LLM_DEFAULT_MAX_NUM_SEQS);
    ngx_conf_init_uint_value(ecf->max_model_len, LLM_DEFAULT_MAX_MODEL_LEN);
    if (ecf->max_batched_tokens == NGX_CONF_UNSET_UINT) {
        ecf->max_batched_tokens = llm_default_max_batched_tokens(
            ecf->backend.len == 4 && ngx_strncmp(ecf->backend.data, "cuda", 4)
                                     == 0);
    }
    ngx_conf_init_uint_value(ecf->max_queued_requests,
                             LLM_DEFAULT_MAX_QUEUED);
    ngx_conf_init_value(ecf->prefix_caching, LLM_DEFAULT_PREFIX_CACHING);
    ngx_conf_init_value(ecf->speculative_ngram, LLM_DEFAULT_SPEC_NGRAM);
    ngx_conf_init_uint_value(ecf->speculative_draft_tokens,
                             LLM_DEFAULT_SPEC_DRAFT_TOKENS);
    ngx_conf_init_uint_value(ecf->speculative_ngram_size,
                             LLM_DEFAULT_SPEC_NGRAM_SIZE);
    ngx_conf_init_value(ecf->kv_cache_prealloc, LLM_DEFAULT_KV_PREALLOC);
    ngx_conf_init_uint_value(ecf->task, LLM_TASK_AUTO);
    ngx_conf_init_value(ecf->kv_cache_memory,
                        (off_t) LLM_DEFAULT_KV_CACHE_BYTES);
    ngx_conf_init_msec_value(ecf->ready_timeout,
                             LLM_DEFAULT_READY_TIMEOUT_MS);
    ngx_conf_init_msec_value(ecf->watchdog, NGX_HTTP_LLM_WATCHDOG_AUTO);

    if (ngx_http_llm_model_init(cf, ecf) != NGX_CONF_OK
        || ngx_http_llm_counters_zone(cf, ecf) != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/* llm_tokenizer NAME { model PATH; }: the tokenizer and template only */
static char *
ngx_http_llm_tokenizer_done(ngx_conf_t *cf, ngx_http_llm_engine_conf_t *ecf)
{
    if (ecf->model.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "llm_tokenizer \"%V\" has no \"model\"",
                           &ecf->name);
        return NGX_CONF_ERROR;
    }

    if (ecf->served_model_name.len == 0) {
        ecf->served_model_name = ecf->name;
    }

    ngx_conf_init_uint_value(ecf->max_model_len, LLM_DEFAULT_MAX_MODEL_LEN);

    return ngx_http_llm_tokenizer_init(cf, ecf);
}


/* llm_sampling temperature=0.7 top_p=0.9 ...: defaults for requests */

static char *
ngx_http_llm_sampling(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_loc_conf_t *llcf = conf;

    float                      v;
    u_char                    *eq, *end;
    unsigned                   bit;
    ngx_str_t                 *value, key, val;
    ngx_uint_t                 i;
    const llm_sampling_range  *range;

    if (llcf->sampling_set) {
        return "is duplicate";
    }

    llm_sampling_params_default(&llcf->sampling);
    value = cf->args->elts;

    for (i = 1; i < cf->args->nelts; i++) {
        eq = ngx_strlchr(value[i].data, value[i].data + value[i].len, '=');
        if (eq == NULL) {
            goto invalid;
        }

        key.data = value[i].data;
        key.len = eq - value[i].data;
        val.data = eq + 1;
        val.len = value[i].data + value[i].len - val.data;

        v = strtof((char *) val.data, (char **) &end);
        if (val.len == 0 || end != val.data + val.len) {
            goto invalid;
        }

#define LLM_KEY(s)  (key.len == sizeof(s) - 1                                \
                     && ngx_strncmp(key.data, s, sizeof(s) - 1) == 0)

        /* the ranges a request has (params/sampling.h) */
        range = llm_sampling_range_find((char *) key.data, key.len);

        if (range != NULL && llm_sampling_in_range(range, v)) {
            *(float *) ((char *) &llcf->sampling + range->offset) = v;
            bit = range->given;
        } else if (LLM_KEY("top_k") && v >= LLM_TOP_K_MIN && v == (int) v) {
            llcf->sampling.top_k = (int) v > 0 ? (int) v : 0;
            bit = LLM_API_GIVEN_TOP_K;
        } else {
            goto invalid;
        }

#undef LLM_KEY

        llcf->sampling_set |= bit;
    }

    return NGX_CONF_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid llm_sampling parameter \"%V\"", &value[i]);
    return NGX_CONF_ERROR;
}


static ngx_http_llm_engine_conf_t *
ngx_http_llm_find_engine(ngx_conf_t *cf, ngx_str_t *name)
{
    ngx_uint_t                    i;
    ngx_http_llm_main_conf_t     *lmcf;
    ngx_http_llm_engine_conf_t  **ep;

    lmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);

    ep = lmcf->engines.elts;
    for (i = 0; i < lmcf->engines.nelts; i++) {
        if (ep[i]->name.len == name->len
            && ngx_strncmp(ep[i]->name.data, name->data, name->len) == 0)
        {
            return ep[i];
        }
    }

    return NULL;
}


static ngx_uint_t
ngx_http_llm_is_tokenizer(ngx_conf_t *cf, ngx_str_t *name)
{
    ngx_uint_t                    i;
    ngx_http_llm_main_conf_t     *lmcf;
    ngx_http_llm_engine_conf_t  **ep;

    lmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);

    ep = lmcf->tokenizers.elts;
    for (i = 0; i < lmcf->tokenizers.nelts; i++) {
        if (ep[i]->name.len == name->len
            && ngx_strncmp(ep[i]->name.data, name->data, name->len) == 0)
        {
            return 1;
        }
    }

    return 0;
}


/* llm_api NAME; llm_health NAME; */

static char *
ngx_http_llm_location(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_loc_conf_t *llcf = conf;

    ngx_str_t                 *value;
    ngx_http_core_loc_conf_t  *clcf;

    if (llcf->role != NGX_HTTP_LLM_ROLE_NONE) {
        return "is duplicate";
    }

    value = cf->args->elts;

    llcf->engine = ngx_http_llm_find_engine(cf, &value[1]);
    if (llcf->engine == NULL && ngx_http_llm_is_tokenizer(cf, &value[1])) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" is an llm_tokenizer, which starts no "
                           "engine: %V needs an llm_engine", &value[1],
                           &cmd->name);
        return NGX_CONF_ERROR;
    }

    if (llcf->engine == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "unknown llm_engine \"%V\" (define it in http{} "
                           "before its locations)", &value[1]);
        return NGX_CONF_ERROR;
    }

    llcf->role = (ngx_uint_t) cmd->post;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);

    clcf->handler = llcf->role == NGX_HTTP_LLM_ROLE_HEALTH
                    ? ngx_http_llm_health_handler
                    : ngx_http_llm_api_handler;

    return NGX_CONF_OK;
}


/* llm_metrics; */

static char *
ngx_http_llm_metrics(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_loc_conf_t *llcf = conf;

    ngx_http_core_loc_conf_t  *clcf;

    if (llcf->role != NGX_HTTP_LLM_ROLE_NONE) {
        return "is duplicate";
    }

    llcf->role = NGX_HTTP_LLM_ROLE_METRICS;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_llm_metrics_handler;

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_llm_init_process(ngx_cycle_t *cycle)
{
    return ngx_http_llm_peer_init_process(cycle);
}


static void
ngx_http_llm_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_llm_peer_exit_process(cycle);
}
