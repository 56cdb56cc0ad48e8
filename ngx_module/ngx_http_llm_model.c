/*
 * What the master prepares of an engine at configuration time: it opens
 * the model and the engine binary (the engine gets both descriptors, so
 * workers need no right to either path), loads the tokenizer and the chat
 * template that the workers share read-only (docs/architecture.md), and sums up the
 * engine's identity in one hash.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"
#include "format/hf_config.h"

#include <dirent.h>


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

    /* the format its tool calls take: docs/api.md, "Tool calling" */
    ecf->tool_format = llm_tool_format_detect(src, len);

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

    (void) llm_fim_find(ecf->tokenizer, NULL, &ecf->fim);

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

    (void) llm_fim_find(ecf->tokenizer, &g, &ecf->fim);

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


/*
 * Everything that makes an engine different, the files' identities
 * included: a new model file (or engine build) under the same path rolls
 * out a new engine on reload.
 */
static uint64_t
ngx_http_llm_identity(ngx_http_llm_engine_conf_t *ecf, struct stat *mst,
    struct stat *bst)
{
    uint64_t  h;

    h = 0xcbf29ce484222325ULL;
    h = ngx_http_llm_hash(h, ecf->name.data, ecf->name.len);
    h = ngx_http_llm_hash(h, ecf->model.data, ecf->model.len + 1);
    h = ngx_http_llm_hash(h, &mst->st_dev, sizeof(mst->st_dev));
    h = ngx_http_llm_hash(h, &mst->st_ino, sizeof(mst->st_ino));
    h = ngx_http_llm_hash(h, &mst->st_size, sizeof(mst->st_size));
    h = ngx_http_llm_hash(h, &mst->st_mtim, sizeof(mst->st_mtim));
    if (ecf->model_is_dir) {
        h = ngx_http_llm_hash_dir(&ecf->model, h);
    }
    h = ngx_http_llm_hash(h, ecf->binary.data, ecf->binary.len + 1);
    h = ngx_http_llm_hash(h, &bst->st_ino, sizeof(bst->st_ino));
    h = ngx_http_llm_hash(h, &bst->st_mtim, sizeof(bst->st_mtim));
    h = ngx_http_llm_hash(h, ecf->backend.data, ecf->backend.len + 1);
    h = ngx_http_llm_hash(h, ecf->kv_cache_dtype.data,
                          ecf->kv_cache_dtype.len + 1);
    h = ngx_http_llm_hash(h, &ecf->threads, sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->tensor_parallel, sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->max_num_seqs, sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->max_model_len, sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->max_batched_tokens, sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->max_queued_requests, sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->kv_cache_memory, sizeof(off_t));
    h = ngx_http_llm_hash(h, &ecf->prefix_caching, sizeof(ngx_flag_t));
    h = ngx_http_llm_hash(h, &ecf->speculative_ngram, sizeof(ngx_flag_t));
    h = ngx_http_llm_hash(h, &ecf->speculative_draft_tokens,
                          sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->speculative_ngram_size,
                          sizeof(ngx_uint_t));
    h = ngx_http_llm_hash(h, &ecf->kv_cache_prealloc, sizeof(ngx_flag_t));
    h = ngx_http_llm_hash(h, &ecf->task, sizeof(ngx_uint_t));

    return h;
}


/* the block's parameters are final: open, load, and name the engine */
char *
ngx_http_llm_model_init(ngx_conf_t *cf, ngx_http_llm_engine_conf_t *ecf)
{
    struct stat  mst, bst;

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

    if (ngx_http_llm_sha256_check(cf, ecf, &mst) != NGX_CONF_OK
        || ngx_http_llm_load_tokenizer(cf, ecf) != NGX_CONF_OK)
    {
        return NGX_CONF_ERROR;
    }

    ecf->hash = ngx_http_llm_identity(ecf, &mst, &bst);

    return NGX_CONF_OK;
}


/*
 * llm_tokenizer: the model's tokenizer and chat template for a front that
 * routes (ngx_http_llm_prefix.c), no engine. A model it cannot read is
 * fatal here: no engine's health would say why every hash is empty.
 */
char *
ngx_http_llm_tokenizer_init(ngx_conf_t *cf, ngx_http_llm_engine_conf_t *ecf)
{
    struct stat  mst;

    if (ngx_http_llm_open_conf_file(cf, &ecf->model, &ecf->model_fd,
                                    O_RDONLY, &mst, "model", 1)
        != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    ecf->model_is_dir = S_ISDIR(mst.st_mode);

    if (ngx_http_llm_sha256_check(cf, ecf, &mst) != NGX_CONF_OK
        || ngx_http_llm_load_tokenizer(cf, ecf) != NGX_CONF_OK)
    {
        return NGX_CONF_ERROR;
    }

    if (ecf->tokenizer == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "llm_tokenizer \"%V\": unusable model \"%V\"",
                           &ecf->name, &ecf->model);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}
