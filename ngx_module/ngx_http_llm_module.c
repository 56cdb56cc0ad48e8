/*
 * ngx_http_llm_module: directives, configuration and process hooks.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"
#include "hf_config.h"

#include <dirent.h>

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


static ngx_command_t  ngx_http_llm_commands[] = {

    { ngx_string("llm_engine"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_BLOCK|NGX_CONF_TAKE1,
      ngx_http_llm_engine_block,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

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

    { ngx_string("llm_sampling"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_llm_sampling,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
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

    return NGX_OK;
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
    llcf->deadline = NGX_CONF_UNSET_MSEC;
    llcf->max_body_size = NGX_CONF_UNSET_SIZE;
    llcf->max_buffered = NGX_CONF_UNSET_SIZE;

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
    /* every generation holds a non-cancelable timer: a graceful reload
     * waits for it instead of cutting the stream */
    ngx_conf_merge_msec_value(conf->deadline, prev->deadline, 3600000);
    ngx_conf_merge_size_value(conf->max_body_size, prev->max_body_size,
                              4 * 1024 * 1024);
    ngx_conf_merge_size_value(conf->max_buffered, prev->max_buffered,
                              64 * 1024);

    if (conf->sampling_set == 0) {
        conf->sampling = prev->sampling;
        conf->sampling_set = prev->sampling_set;
    }

    /*
     * core's client_max_body_size would answer 413 in HTML before we see
     * the request: our own limit answers in OpenAI's JSON instead.
     */
    if (conf->role == NGX_HTTP_LLM_ROLE_API) {
        clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
        clcf->client_max_body_size = 0;
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
    ngx_uint_t                    i;
    ngx_conf_t                    save;
    ngx_http_llm_engine_conf_t   *ecf, **ep;

    value = cf->args->elts;

    ep = lmcf->engines.elts;
    for (i = 0; i < lmcf->engines.nelts; i++) {
        if (ep[i]->name.len == value[1].len
            && ngx_strncmp(ep[i]->name.data, value[1].data, value[1].len)
               == 0)
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "duplicate llm_engine \"%V\"", &value[1]);
            return NGX_CONF_ERROR;
        }
    }

    ecf = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_engine_conf_t));
    if (ecf == NULL) {
        return NGX_CONF_ERROR;
    }

    ecf->name = value[1];
    ecf->threads = NGX_CONF_UNSET_UINT;
    ecf->tensor_parallel = NGX_CONF_UNSET_UINT;
    ecf->max_num_seqs = NGX_CONF_UNSET_UINT;
    ecf->max_model_len = NGX_CONF_UNSET_UINT;
    ecf->max_batched_tokens = NGX_CONF_UNSET_UINT;
    ecf->max_queued_requests = NGX_CONF_UNSET_UINT;
    ecf->prefix_caching = NGX_CONF_UNSET;
    ecf->kv_cache_memory = NGX_CONF_UNSET_SIZE;
    ecf->ready_timeout = NGX_CONF_UNSET_MSEC;
    ecf->model_fd = NGX_INVALID_FILE;
    ecf->binary_fd = NGX_INVALID_FILE;

    ep = ngx_array_push(&lmcf->engines);
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

    return ngx_http_llm_engine_done(cf, ecf);
}


static char *
ngx_http_llm_param_uint(ngx_conf_t *cf, ngx_str_t *v, ngx_uint_t *out,
    ngx_uint_t min, ngx_uint_t max)
{
    ngx_int_t  n;

    if (*out != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    n = ngx_atoi(v->data, v->len);
    if (n == NGX_ERROR || (ngx_uint_t) n < min || (ngx_uint_t) n > max) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid value \"%V\" (must be %ui..%ui)",
                           v, min, max);
        return NGX_CONF_ERROR;
    }

    *out = n;
    return NGX_CONF_OK;
}


static char *
ngx_http_llm_engine_param(ngx_conf_t *cf, ngx_command_t *dummy, void *conf)
{
    ngx_http_llm_engine_conf_t *ecf = (ngx_http_llm_engine_conf_t *) conf;

    char       *rv;
    off_t       size;
    ngx_str_t  *value, *name, *v;

    value = cf->args->elts;
    name = &value[0];
    v = &value[1];

    if (cf->args->nelts != 2) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid number of arguments in \"%V\" of "
                           "llm_engine", name);
        return NGX_CONF_ERROR;
    }

#define LLM_IS(s)  (name->len == sizeof(s) - 1                               \
                    && ngx_strncmp(name->data, s, sizeof(s) - 1) == 0)

    rv = NGX_CONF_OK;

    if (LLM_IS("model")) {
        ecf->model = *v;

    } else if (LLM_IS("served_model_name")) {
        ecf->served_model_name = *v;

    } else if (LLM_IS("chat_template")) {
        ecf->chat_template_file = *v;

    } else if (LLM_IS("binary")) {
        ecf->binary = *v;

    } else if (LLM_IS("backend")) {
        if (!(v->len == 3 && ngx_strncmp(v->data, "cpu", 3) == 0)
            && !(v->len == 4 && ngx_strncmp(v->data, "cuda", 4) == 0))
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid backend \"%V\" (cpu or cuda)", v);
            return NGX_CONF_ERROR;
        }
        ecf->backend = *v;

    } else if (LLM_IS("kv_cache_dtype")) {
        if (!(v->len == 3 && (ngx_strncmp(v->data, "f16", 3) == 0
                              || ngx_strncmp(v->data, "f32", 3) == 0)))
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid kv_cache_dtype \"%V\" (f16 or f32)",
                               v);
            return NGX_CONF_ERROR;
        }
        ecf->kv_cache_dtype = *v;

    } else if (LLM_IS("threads")) {
        rv = ngx_http_llm_param_uint(cf, v, &ecf->threads, 1, 1024);

    } else if (LLM_IS("tensor_parallel")) {
        rv = ngx_http_llm_param_uint(cf, v, &ecf->tensor_parallel, 1, 64);

    } else if (LLM_IS("max_num_seqs")) {
        rv = ngx_http_llm_param_uint(cf, v, &ecf->max_num_seqs, 1, 1024);

    } else if (LLM_IS("max_model_len")) {
        rv = ngx_http_llm_param_uint(cf, v, &ecf->max_model_len, 16,
                                     LLM_RING_MAX_PROMPT);

    } else if (LLM_IS("max_batched_tokens")) {
        rv = ngx_http_llm_param_uint(cf, v, &ecf->max_batched_tokens, 1,
                                     1 << 20);

    } else if (LLM_IS("max_queued_requests")) {
        rv = ngx_http_llm_param_uint(cf, v, &ecf->max_queued_requests, 0,
                                     LLM_RING_MAX_SLOTS / 2);

    } else if (LLM_IS("prefix_caching")) {
        if (v->len == 2 && ngx_strncmp(v->data, "on", 2) == 0) {
            ecf->prefix_caching = 1;
        } else if (v->len == 3 && ngx_strncmp(v->data, "off", 3) == 0) {
            ecf->prefix_caching = 0;
        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid prefix_caching \"%V\", "
                               "it must be \"on\" or \"off\"", v);
            return NGX_CONF_ERROR;
        }

    } else if (LLM_IS("kv_cache_memory")) {
        size = ngx_parse_offset(v);     /* g too: KV pools are large */
        if (size == NGX_ERROR || size < 1024 * 1024) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid kv_cache_memory \"%V\"", v);
            return NGX_CONF_ERROR;
        }
        ecf->kv_cache_memory = size;

    } else if (LLM_IS("ready_timeout")) {
        ecf->ready_timeout = ngx_parse_time(v, 0);
        if (ecf->ready_timeout == (ngx_msec_t) NGX_ERROR) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid ready_timeout \"%V\"", v);
            return NGX_CONF_ERROR;
        }

    } else {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "unknown llm_engine parameter \"%V\"", name);
        return NGX_CONF_ERROR;
    }

#undef LLM_IS

    if (rv != NGX_CONF_OK && rv != NGX_CONF_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\" %s", name, rv);
        return NGX_CONF_ERROR;
    }

    return rv;
}


static void
ngx_http_llm_close_fd(void *data)
{
    ngx_fd_t *fd = data;

    if (*fd != NGX_INVALID_FILE) {
        (void) close(*fd);
        *fd = NGX_INVALID_FILE;
    }
}


/* open a file the engine needs, as the master, for the life of the cycle */
static ngx_int_t
ngx_http_llm_open_conf_file(ngx_conf_t *cf, ngx_str_t *path, ngx_fd_t *fd,
    int flags, struct stat *st, const char *what, ngx_uint_t allow_dir)
{
    ngx_pool_cleanup_t  *cln;

    if (ngx_get_full_name(cf->pool, &cf->cycle->prefix, path) != NGX_OK) {
        return NGX_ERROR;
    }

    /* a Hugging Face model is a directory: the engine opens its files */
    if (allow_dir && stat((char *) path->data, st) == 0
        && S_ISDIR(st->st_mode))
    {
        flags = O_PATH | O_DIRECTORY;
    }

    *fd = open((char *) path->data, flags | O_CLOEXEC);
    if (*fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "cannot open %s \"%V\"", what, path);
        return NGX_ERROR;
    }

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }
    cln->handler = ngx_http_llm_close_fd;
    cln->data = fd;

    if (fstat(*fd, st) == -1) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "fstat() \"%V\" failed", path);
        return NGX_ERROR;
    }

    if (!S_ISREG(st->st_mode) && !(allow_dir && S_ISDIR(st->st_mode))) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%s \"%V\" is not a regular file%s", what, path,
                           allow_dir ? " or a directory" : "");
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* FNV-1a: the engine's identity, to find or replace it on reload */
static uint64_t
ngx_http_llm_hash(uint64_t h, const void *data, size_t len)
{
    size_t          i;
    const u_char   *p = data;

    for (i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }

    return h;
}


static void
ngx_http_llm_free_tokenizer(void *data)
{
    ngx_http_llm_engine_conf_t *ecf = data;

    llm_tokenizer_free(ecf->tokenizer);
    jinja_free(ecf->chat_template);
    ecf->tokenizer = NULL;
    ecf->chat_template = NULL;
}


static ngx_int_t
ngx_http_llm_dup_token_text(ngx_conf_t *cf, llm_tokenizer *t, int32_t id,
    ngx_str_t *out)
{
    size_t       len;
    const char  *text;

    if (id < 0 || (text = llm_token_text(t, id, &len)) == NULL) {
        return NGX_OK;
    }

    out->data = ngx_pnalloc(cf->pool, len + 1);
    if (out->data == NULL) {
        return NGX_ERROR;
    }
    ngx_memcpy(out->data, text, len);
    out->data[len] = '\0';
    out->len = len;

    return NGX_OK;
}


static char *
ngx_http_llm_parse_template(ngx_conf_t *cf, ngx_http_llm_engine_conf_t *ecf,
    const char *src, size_t len, const char *from)
{
    char  err[512];

    ecf->chat_template = jinja_parse(src, len, err, sizeof(err));
    if (ecf->chat_template == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "cannot parse the chat template of %s: %s",
                           from, err);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_llm_template_file(ngx_conf_t *cf, ngx_http_llm_engine_conf_t *ecf)
{
    char         *rv;
    ssize_t       n;
    ngx_fd_t      fd;
    ngx_str_t    *path = &ecf->chat_template_file;
    ngx_file_t    file;
    u_char       *buf;
    struct stat   st;

    if (ngx_conf_full_name(cf->cycle, path, 1) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    fd = ngx_open_file(path->data, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "cannot open chat template \"%V\"", path);
        return NGX_CONF_ERROR;
    }

    rv = NGX_CONF_ERROR;
    ngx_memzero(&file, sizeof(ngx_file_t));
    file.fd = fd;
    file.name = *path;
    file.log = cf->log;

    if (fstat(fd, &st) == -1 || st.st_size > 1024 * 1024) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "chat template \"%V\" is not a file of at most "
                           "1m", path);
        goto done;
    }

    buf = ngx_pnalloc(cf->pool, st.st_size + 1);
    if (buf == NULL) {
        goto done;
    }

    n = ngx_read_file(&file, buf, st.st_size, 0);
    if (n != st.st_size) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "cannot read chat template \"%V\"", path);
        goto done;
    }

    rv = ngx_http_llm_parse_template(cf, ecf, (char *) buf, n,
                                     (char *) path->data);

done:

    ngx_close_file(fd);
    return rv;
}


static char *
ngx_http_llm_tokenizer_texts(ngx_conf_t *cf, ngx_http_llm_engine_conf_t *ecf)
{
    if (ngx_http_llm_dup_token_text(cf, ecf->tokenizer,
                                    llm_tokenizer_bos(ecf->tokenizer),
                                    &ecf->bos_text)
        != NGX_OK
        || ngx_http_llm_dup_token_text(cf, ecf->tokenizer,
                                       llm_tokenizer_eos(ecf->tokenizer),
                                       &ecf->eos_text)
           != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/* the same from a Hugging Face directory's tokenizer and config files */
static char *
ngx_http_llm_load_hf_tokenizer(ngx_conf_t *cf,
    ngx_http_llm_engine_conf_t *ecf)
{
    int                  ctx;
    char                *rv, *tmpl, err[512];
    ngx_pool_cleanup_t  *cln;

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        return NGX_CONF_ERROR;
    }
    cln->handler = ngx_http_llm_free_tokenizer;
    cln->data = ecf;

    ecf->tokenizer = llm_tokenizer_load_hf((char *) ecf->model.data, err,
                                           sizeof(err));
    if (ecf->tokenizer == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "model \"%V\": %s",
                           &ecf->model, err);
        return NGX_CONF_ERROR;
    }

    if (ngx_http_llm_tokenizer_texts(cf, ecf) != NGX_CONF_OK) {
        return NGX_CONF_ERROR;
    }

    ctx = llm_hf_context_length(ecf->model_fd, (char *) ecf->model.data);
    ecf->context_length = (ctx > 0 && (ngx_uint_t) ctx < ecf->max_model_len)
                          ? (ngx_uint_t) ctx : ecf->max_model_len;

    if (ecf->chat_template_file.len) {
        return ngx_http_llm_template_file(cf, ecf);
    }

    err[0] = '\0';
    tmpl = llm_hf_chat_template(ecf->model_fd, (char *) ecf->model.data, err,
                                sizeof(err));
    if (tmpl == NULL) {
        if (err[0]) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "model \"%V\": %s",
                               &ecf->model, err);
            return NGX_CONF_ERROR;
        }
        return NGX_CONF_OK;     /* no template: /v1/completions only */
    }

    rv = ngx_http_llm_parse_template(cf, ecf, tmpl, ngx_strlen(tmpl),
                                     (char *) ecf->model.data);
    free(tmpl);
    return rv;
}


/*
 * The worker's half of the model: tokenizer and chat template from the
 * GGUF metadata. A model nginx cannot read does not stop nginx: its
 * requests fail with the reason, which the engine's health reports too.
 */
static char *
ngx_http_llm_load_tokenizer(ngx_conf_t *cf, ngx_http_llm_engine_conf_t *ecf)
{
    char                *rv;
    char                 err[512], key[96];
    uint32_t             ctx;
    uint64_t             len;
    gguf_file            g;
    const char          *arch, *tmpl;
    ngx_pool_cleanup_t  *cln;

    if (ecf->model_is_dir) {
        return ngx_http_llm_load_hf_tokenizer(cf, ecf);
    }

    ngx_memzero(&g, sizeof(gguf_file));

    if (gguf_open_fd(&g, ecf->model_fd, (char *) ecf->model.data) != 0) {
        ecf->load_error = ngx_pnalloc(cf->pool, sizeof(g.err));
        if (ecf->load_error == NULL) {
            gguf_close(&g);
            return NGX_CONF_ERROR;
        }
        ngx_cpystrn((u_char *) ecf->load_error, (u_char *) g.err,
                    sizeof(g.err));
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0, "unusable model: %s", g.err);
        gguf_close(&g);
        return NGX_CONF_OK;
    }

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        gguf_close(&g);
        return NGX_CONF_ERROR;
    }
    cln->handler = ngx_http_llm_free_tokenizer;
    cln->data = ecf;

    rv = NGX_CONF_OK;

    ecf->tokenizer = llm_tokenizer_load_gguf(&g, err, sizeof(err));
    if (ecf->tokenizer == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "model \"%V\": %s",
                           &ecf->model, err);
        rv = NGX_CONF_ERROR;
        goto done;
    }

    if (ngx_http_llm_tokenizer_texts(cf, ecf) != NGX_CONF_OK) {
        rv = NGX_CONF_ERROR;
        goto done;
    }

    ctx = 0;
    if (gguf_get_str(&g, "general.architecture", &arch, &len) == 0
        && len < 64)
    {
        ngx_snprintf((u_char *) key, sizeof(key), "%*s.context_length%Z",
                     (size_t) len, arch);
        (void) gguf_get_u32(&g, key, &ctx);
    }
    ecf->context_length = (ctx && ctx < ecf->max_model_len)
                          ? ctx : ecf->max_model_len;

    if (ecf->chat_template_file.len) {
        rv = ngx_http_llm_template_file(cf, ecf);

    } else if (gguf_get_str(&g, "tokenizer.chat_template", &tmpl, &len)
               == 0)
    {
        rv = ngx_http_llm_parse_template(cf, ecf, tmpl, len,
                                         (char *) ecf->model.data);
    }

done:

    gguf_close(&g);
    return rv;
}


static ngx_int_t
ngx_http_llm_cmp_names(const void *a, const void *b)
{
    return ngx_strcmp(a, b);
}


/* a model directory's identity: each file's name, size and mtime */
static uint64_t
ngx_http_llm_hash_dir(ngx_str_t *path, uint64_t h)
{
    DIR            *d;
    size_t          n, i;
    struct stat     st;
    struct dirent  *e;
    u_char          names[64][256];

    d = opendir((char *) path->data);
    if (d == NULL) {
        return h;
    }

    /* readdir's order is arbitrary: fold the files in name order */
    n = 0;
    while ((e = readdir(d)) != NULL && n < 64) {
        if (e->d_name[0] == '.' || ngx_strlen(e->d_name) >= sizeof(names[0]))
        {
            continue;
        }
        ngx_cpystrn(names[n++], (u_char *) e->d_name, sizeof(names[0]));
    }

    ngx_sort(names, n, sizeof(names[0]), ngx_http_llm_cmp_names);

    for (i = 0; i < n; i++) {
        if (fstatat(dirfd(d), (char *) names[i], &st, 0) != 0) {
            continue;
        }
        h = ngx_http_llm_hash(h, names[i], ngx_strlen(names[i]) + 1);
        h = ngx_http_llm_hash(h, &st.st_size, sizeof(st.st_size));
        h = ngx_http_llm_hash(h, &st.st_mtim, sizeof(st.st_mtim));
    }

    closedir(d);
    return h;
}


static char *
ngx_http_llm_engine_done(ngx_conf_t *cf, ngx_http_llm_engine_conf_t *ecf)
{
    uint64_t     h;
    struct stat  mst, bst;

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

    ngx_conf_init_uint_value(ecf->threads, 2);
    ngx_conf_init_uint_value(ecf->tensor_parallel, 1);
    ngx_conf_init_uint_value(ecf->max_num_seqs, 64);
    ngx_conf_init_uint_value(ecf->max_model_len, 8192);
    /* CPU: 256 (a 2048-token chunk is seconds of stall for every other
       stream, and measured no faster); a GPU step takes 2048 in ms */
    if (ecf->max_batched_tokens == NGX_CONF_UNSET_UINT) {
        ecf->max_batched_tokens = ecf->backend.len == 4 ? 2048 : 256;
    }
    ngx_conf_init_uint_value(ecf->max_queued_requests, 256);
    ngx_conf_init_value(ecf->prefix_caching, 1);
    ngx_conf_init_size_value(ecf->kv_cache_memory, 1024 * 1024 * 1024);
    ngx_conf_init_msec_value(ecf->ready_timeout, 30000);

    if (ngx_http_llm_open_conf_file(cf, &ecf->model, &ecf->model_fd,
                                    O_RDONLY, &mst, "model", 1)
        != NGX_OK
        || ngx_http_llm_open_conf_file(cf, &ecf->binary, &ecf->binary_fd,
                                       O_PATH, &bst, "engine binary", 0)
           != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    ecf->model_is_dir = S_ISDIR(mst.st_mode);

    if (ngx_http_llm_load_tokenizer(cf, ecf) != NGX_CONF_OK
        || ngx_http_llm_counters_zone(cf, ecf) != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    /*
     * Everything that makes an engine different, the files' identities
     * included: a new model file (or engine build) under the same path
     * rolls out a new engine on reload.
     */
    h = 0xcbf29ce484222325ULL;
    h = ngx_http_llm_hash(h, ecf->name.data, ecf->name.len);
    h = ngx_http_llm_hash(h, ecf->model.data, ecf->model.len + 1);
    h = ngx_http_llm_hash(h, &mst.st_dev, sizeof(mst.st_dev));
    h = ngx_http_llm_hash(h, &mst.st_ino, sizeof(mst.st_ino));
    h = ngx_http_llm_hash(h, &mst.st_size, sizeof(mst.st_size));
    h = ngx_http_llm_hash(h, &mst.st_mtim, sizeof(mst.st_mtim));
    if (ecf->model_is_dir) {
        h = ngx_http_llm_hash_dir(&ecf->model, h);
    }
    h = ngx_http_llm_hash(h, ecf->binary.data, ecf->binary.len + 1);
    h = ngx_http_llm_hash(h, &bst.st_ino, sizeof(bst.st_ino));
    h = ngx_http_llm_hash(h, &bst.st_mtim, sizeof(bst.st_mtim));
    h = ngx_http_llm_hash(h, ecf->backend.data, ecf->backend.len + 1);
    h = ngx_http_llm_hash(h, ecf->kv_cache_dtype.data,
                          ecf->kv_cache_dtype.len + 1);
    h = ngx_http_llm_hash(h, &ecf->threads, sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->tensor_parallel, sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->max_num_seqs, sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->max_model_len, sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->max_batched_tokens, sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->max_queued_requests, sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->kv_cache_memory, sizeof(size_t));
    h = ngx_http_llm_hash(h, &ecf->prefix_caching, sizeof(ngx_flag_t));
    ecf->hash = h;

    return NGX_CONF_OK;
}


/* llm_sampling temperature=0.7 top_p=0.9 ...: defaults for requests */

static char *
ngx_http_llm_sampling(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_loc_conf_t *llcf = conf;

    float       v;
    u_char     *eq, *end;
    unsigned    bit;
    ngx_str_t  *value, key, val;
    ngx_uint_t  i;

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

        if (LLM_KEY("temperature") && v >= 0 && v <= 2) {
            llcf->sampling.temperature = v;
            bit = LLM_API_GIVEN_TEMPERATURE;
        } else if (LLM_KEY("top_p") && v > 0 && v <= 1) {
            llcf->sampling.top_p = v;
            bit = LLM_API_GIVEN_TOP_P;
        } else if (LLM_KEY("top_k") && v >= -1 && v == (int) v) {
            llcf->sampling.top_k = (int) v;
            bit = LLM_API_GIVEN_TOP_K;
        } else if (LLM_KEY("min_p") && v >= 0 && v <= 1) {
            llcf->sampling.min_p = v;
            bit = LLM_API_GIVEN_MIN_P;
        } else if (LLM_KEY("presence_penalty") && v >= -2 && v <= 2) {
            llcf->sampling.presence_penalty = v;
            bit = LLM_API_GIVEN_PRESENCE_PENALTY;
        } else if (LLM_KEY("frequency_penalty") && v >= -2 && v <= 2) {
            llcf->sampling.frequency_penalty = v;
            bit = LLM_API_GIVEN_FREQUENCY_PENALTY;
        } else if (LLM_KEY("repetition_penalty") && v > 0 && v <= 2) {
            llcf->sampling.repetition_penalty = v;
            bit = LLM_API_GIVEN_REPETITION_PENALTY;
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
    return ngx_http_llm_engine_init_process(cycle);
}


static void
ngx_http_llm_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_llm_engine_exit_process(cycle);
}
