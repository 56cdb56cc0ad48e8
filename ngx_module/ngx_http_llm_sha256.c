/*
 * The model's integrity: its SHA-256 checked once, in the master, at
 * configuration time, against model_sha256 or a "<model>.sha256" file
 * beside it (sha256sum's format). OpenSSL's libcrypto computes it (Debian's
 * nginx links it already). A table in the master's memory remembers each
 * file's hash by device, inode, size and mtime, so a reload (and an engine
 * restart, which never hashes) costs no second read of the weights; a
 * changed file has another identity and is hashed again.
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"

#include <openssl/evp.h>
#include <sys/mman.h>


#define NGX_HTTP_LLM_SHA256_CACHE  32


typedef struct {
    dev_t            dev;
    ino_t            ino;
    off_t            size;
    struct timespec  mtim;
    u_char           hex[NGX_HTTP_LLM_SHA256_HEX + 1];
} ngx_http_llm_sha256_entry_t;


/* static: the master keeps it across reloads (the module stays loaded) */
static ngx_http_llm_sha256_entry_t  ngx_http_llm_sha256_cache[
                                        NGX_HTTP_LLM_SHA256_CACHE];
static ngx_uint_t                   ngx_http_llm_sha256_next;


static ngx_http_llm_sha256_entry_t *
ngx_http_llm_sha256_find(struct stat *st)
{
    ngx_uint_t                    i;
    ngx_http_llm_sha256_entry_t  *e;

    for (i = 0; i < NGX_HTTP_LLM_SHA256_CACHE; i++) {
        e = &ngx_http_llm_sha256_cache[i];
        if (e->hex[0] != '\0' && e->dev == st->st_dev
            && e->ino == st->st_ino && e->size == st->st_size
            && e->mtim.tv_sec == st->st_mtim.tv_sec
            && e->mtim.tv_nsec == st->st_mtim.tv_nsec)
        {
            return e;
        }
    }

    return NULL;
}


/* the whole file through SHA-256, into hex (65 bytes) */
static ngx_int_t
ngx_http_llm_sha256_file(ngx_conf_t *cf, ngx_fd_t fd, off_t size,
    ngx_str_t *path, u_char *hex)
{
    u_char         md[EVP_MAX_MD_SIZE];
    void          *p;
    unsigned int   md_len;
    EVP_MD_CTX    *ctx;
    ngx_int_t      rc;

    p = size > 0 ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    if (p == MAP_FAILED) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "mmap() of model \"%V\" for its sha256 failed",
                           path);
        return NGX_ERROR;
    }
    (void) madvise(p, size, MADV_SEQUENTIAL);

    rc = NGX_ERROR;
    ctx = EVP_MD_CTX_new();
    if (ctx != NULL
        && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1
        && EVP_DigestUpdate(ctx, p, size) == 1
        && EVP_DigestFinal_ex(ctx, md, &md_len) == 1)
    {
        ngx_hex_dump(hex, md, md_len);
        hex[NGX_HTTP_LLM_SHA256_HEX] = '\0';
        rc = NGX_OK;

    } else {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "libcrypto could not compute the sha256 of "
                           "model \"%V\"", path);
    }

    EVP_MD_CTX_free(ctx);
    if (p != NULL) {
        munmap(p, size);
    }

    return rc;
}


/* 64 hex digits, lowercased in place; NGX_ERROR if not */
ngx_int_t
ngx_http_llm_sha256_valid(u_char *s, size_t len)
{
    size_t  i;

    if (len != NGX_HTTP_LLM_SHA256_HEX) {
        return NGX_ERROR;
    }

    for (i = 0; i < len; i++) {
        s[i] = ngx_tolower(s[i]);
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * "<model>.sha256" beside the model, as `sha256sum model > model.sha256`
 * writes it: the hash first, then anything. NGX_DECLINED when there is
 * no such file.
 */
static ngx_int_t
ngx_http_llm_sha256_side_file(ngx_conf_t *cf, ngx_http_llm_engine_conf_t *ecf)
{
    u_char     buf[NGX_HTTP_LLM_SHA256_HEX + 1], *name;
    ssize_t    n;
    ngx_fd_t   fd;

    name = ngx_pnalloc(cf->pool, ecf->model.len + sizeof(".sha256"));
    if (name == NULL) {
        return NGX_ERROR;
    }
    ngx_sprintf(name, "%V.sha256%Z", &ecf->model);

    fd = ngx_open_file(name, NGX_FILE_RDONLY, NGX_FILE_OPEN, 0);
    if (fd == NGX_INVALID_FILE) {
        if (ngx_errno == NGX_ENOENT) {
            return NGX_DECLINED;
        }
        ngx_conf_log_error(NGX_LOG_EMERG, cf, ngx_errno,
                           "cannot open \"%s\"", name);
        return NGX_ERROR;
    }

    n = read(fd, buf, sizeof(buf));
    (void) ngx_close_file(fd);

    if (n < NGX_HTTP_LLM_SHA256_HEX
        || (n > NGX_HTTP_LLM_SHA256_HEX
            && buf[NGX_HTTP_LLM_SHA256_HEX] != ' '
            && buf[NGX_HTTP_LLM_SHA256_HEX] != '\n')
        || ngx_http_llm_sha256_valid(buf, NGX_HTTP_LLM_SHA256_HEX) != NGX_OK)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%s\" does not start with a sha256 (64 hex "
                           "digits, as sha256sum writes it)", name);
        return NGX_ERROR;
    }

    ecf->model_sha256.data = ngx_pnalloc(cf->pool, NGX_HTTP_LLM_SHA256_HEX);
    if (ecf->model_sha256.data == NULL) {
        return NGX_ERROR;
    }
    ngx_memcpy(ecf->model_sha256.data, buf, NGX_HTTP_LLM_SHA256_HEX);
    ecf->model_sha256.len = NGX_HTTP_LLM_SHA256_HEX;

    return NGX_OK;
}


/*
 * Check the opened model (mst: its fstat) against the expected hash, when
 * there is one; ecf->sha256 is what the file hashes to, for /v1/models and
 * the metrics.
 */
char *
ngx_http_llm_sha256_check(ngx_conf_t *cf, ngx_http_llm_engine_conf_t *ecf,
    struct stat *mst)
{
    u_char                       *hex;
    ngx_int_t                     rc;
    ngx_msec_t                    t0;
    ngx_http_llm_sha256_entry_t  *e;

    if (ecf->model_sha256.len == 0) {
        rc = ngx_http_llm_sha256_side_file(cf, ecf);
        if (rc == NGX_DECLINED) {
            return NGX_CONF_OK;
        }
        if (rc != NGX_OK) {
            return NGX_CONF_ERROR;
        }
    }

    if (ecf->model_is_dir) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "model_sha256: model \"%V\" is a directory; "
                           "a sha256 is checked for a GGUF file only",
                           &ecf->model);
        return NGX_CONF_ERROR;
    }

    hex = ngx_pnalloc(cf->pool, NGX_HTTP_LLM_SHA256_HEX + 1);
    if (hex == NULL) {
        return NGX_CONF_ERROR;
    }

    e = ngx_http_llm_sha256_find(mst);
    if (e != NULL) {
        ngx_memcpy(hex, e->hex, NGX_HTTP_LLM_SHA256_HEX + 1);

    } else {
        ngx_time_update();
        t0 = ngx_current_msec;

        if (ngx_http_llm_sha256_file(cf, ecf->model_fd, mst->st_size,
                                     &ecf->model, hex)
            != NGX_OK)
        {
            return NGX_CONF_ERROR;
        }

        ngx_time_update();
        ngx_log_error(NGX_LOG_NOTICE, cf->log, 0,
                      "llm: sha256 of model \"%V\" (%O bytes) computed in "
                      "%M ms", &ecf->model, mst->st_size,
                      ngx_current_msec - t0);

        e = &ngx_http_llm_sha256_cache[ngx_http_llm_sha256_next++
                                       % NGX_HTTP_LLM_SHA256_CACHE];
        e->dev = mst->st_dev;
        e->ino = mst->st_ino;
        e->size = mst->st_size;
        e->mtim = mst->st_mtim;
        ngx_memcpy(e->hex, hex, NGX_HTTP_LLM_SHA256_HEX + 1);
    }

    if (ngx_strncmp(hex, ecf->model_sha256.data, NGX_HTTP_LLM_SHA256_HEX)
        != 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "model \"%V\" does not match its sha256: expected "
                           "%V, the file has %s", &ecf->model,
                           &ecf->model_sha256, hex);
        return NGX_CONF_ERROR;
    }

    ecf->sha256.data = hex;
    ecf->sha256.len = NGX_HTTP_LLM_SHA256_HEX;

    return NGX_CONF_OK;
}
