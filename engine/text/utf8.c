/*
 * UTF-8 validation, encoding and decoding (utf8.h): the byte ranges of
 * RFC 3629's table 3-7, checked byte by byte.
 */
#include <string.h>

#include "text/utf8.h"


int
llm_utf8_check(const unsigned char *s, size_t len, size_t *n)
{
    unsigned char  c = s[0], lo = 0x80, hi = 0xBF;
    size_t         need, i;

    if (c < 0x80) {
        *n = 1;
        return LLM_UTF8_VALID;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;       /* overlong */
        hi = c == 0xED ? 0x9F : 0xBF;       /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;       /* overlong */
        hi = c == 0xF4 ? 0x8F : 0xBF;       /* past U+10FFFF */
    } else {
        *n = 1;
        return LLM_UTF8_INVALID;
    }
    for (i = 1; i < need; i++) {
        if (i >= len) {
            *n = i;
            return LLM_UTF8_INCOMPLETE;
        }
        if (s[i] < lo || s[i] > hi) {
            *n = i;
            return LLM_UTF8_INVALID;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    *n = need;
    return LLM_UTF8_VALID;
}


size_t
llm_utf8_len(const unsigned char *p, size_t avail)
{
    size_t  n;

    return llm_utf8_check(p, avail, &n) == LLM_UTF8_VALID ? n : 0;
}


int
llm_utf8_valid(const char *s, size_t len)
{
    const unsigned char  *p = (const unsigned char *) s;
    size_t                i, n;

    for (i = 0; i < len; i += n) {
        n = llm_utf8_len(p + i, len - i);
        if (n == 0) {
            return 0;
        }
    }
    return 1;
}


size_t
llm_utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char) cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char) (0xC0 | (cp >> 6));
        out[1] = (char) (0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char) (0xE0 | (cp >> 12));
        out[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char) (0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char) (0xF0 | (cp >> 18));
    out[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char) (0x80 | (cp & 0x3F));
    return 4;
}


size_t
llm_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
    size_t    n = llm_utf8_len(s, len), i;
    uint32_t  c;

    if (n <= 1) {
        *cp = s[0];
        return n;
    }
    c = s[0] & (0x7F >> n);
    for (i = 1; i < n; i++) {
        c = (c << 6) | (s[i] & 0x3F);
    }
    *cp = c;
    return n;
}


size_t
llm_utf8_cut(const unsigned char *s, size_t len)
{
    size_t  p = len;

    /* back over the continuation bytes to the byte that leads them */
    while (p > 0 && len - p < 3 && (s[p - 1] & 0xC0) == 0x80) {
        p--;
    }
    if (p > 0 && s[p - 1] >= 0xC0 && llm_utf8_len(s + p - 1, len - p + 1) == 0)
    {
        return p - 1;
    }
    return len;
}
