/*
 * The output's bytes: buffers a long stream reuses once the client took
 * them, the chain they go out on, and JSON string escaping into valid
 * UTF-8. Shared by every reply shape (ngx_http_llm_format.c: OpenAI's,
 * ngx_http_llm_messages_sse.c: Anthropic's).
 */
#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_llm_module.h"
#include "text/utf8.h"


/*
 * A JSON string body (no quotes). Token pieces of byte-level vocabularies
 * can be parts of a character: invalid bytes become U+FFFD, so the JSON is
 * always valid UTF-8. Needs 6 bytes of room per input byte.
 */
u_char *
ngx_http_llm_json_escape(u_char *dst, const u_char *src, size_t len)
{
    u_char          c;
    size_t          n;
    static u_char   hex[] = "0123456789abcdef";

    while (len) {
        c = *src;

        if (c >= 0x80) {
            n = llm_utf8_len(src, len);
            if (n == 0) {
                dst = ngx_cpymem(dst, "\\ufffd", 6);
                src++;
                len--;
                continue;
            }
            dst = ngx_cpymem(dst, src, n);
            src += n;
            len -= n;
            continue;
        }

        src++;
        len--;

        switch (c) {
        case '"':
        case '\\':
            *dst++ = '\\';
            *dst++ = c;
            break;
        case '\n':
            *dst++ = '\\';
            *dst++ = 'n';
            break;
        case '\r':
            *dst++ = '\\';
            *dst++ = 'r';
            break;
        case '\t':
            *dst++ = '\\';
            *dst++ = 't';
            break;
        default:
            if (c < 0x20) {
                *dst++ = '\\';
                *dst++ = 'u';
                *dst++ = '0';
                *dst++ = '0';
                *dst++ = hex[c >> 4];
                *dst++ = hex[c & 0xf];
            } else {
                *dst++ = c;
            }
        }
    }

    return dst;
}


ngx_buf_t *
ngx_http_llm_get_buf(ngx_http_llm_ctx_t *ctx, size_t size)
{
    u_char       *start, *end;
    ngx_buf_t    *b;
    ngx_chain_t  *cl, **ll;

    /* a long stream reuses the buffers the client has taken (the
       request's: every choice's output goes out on one connection) */
    for (ll = &ctx->free; *ll; ll = &(*ll)->next) {
        cl = *ll;
        b = cl->buf;
        if ((size_t) (b->end - b->start) >= size) {
            *ll = cl->next;
            ngx_free_chain(ctx->request->pool, cl);
            start = b->start;
            end = b->end;
            ngx_memzero(b, sizeof(ngx_buf_t));     /* flags too */
            b->start = start;
            b->end = end;
            b->pos = start;
            b->last = start;
            b->temporary = 1;
            b->tag = (ngx_buf_tag_t) &ngx_http_llm_module;
            return b;
        }
    }

    b = ngx_create_temp_buf(ctx->request->pool, ngx_max(size, 1024));
    if (b == NULL) {
        return NULL;
    }
    b->tag = (ngx_buf_tag_t) &ngx_http_llm_module;
    return b;
}


/* b at the end of the output being built */
ngx_int_t
ngx_http_llm_append(ngx_http_llm_ctx_t *ctx, ngx_chain_t ***last,
    ngx_buf_t *b)
{
    ngx_chain_t  *cl;

    cl = ngx_alloc_chain_link(ctx->request->pool);
    if (cl == NULL) {
        return NGX_ERROR;
    }

    cl->buf = b;
    cl->next = NULL;
    **last = cl;
    *last = &cl->next;

    return NGX_OK;
}
