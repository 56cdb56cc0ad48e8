/*
 * Strict JSON validation (design note in api/json_strict.h).
 *
 * A state machine over the bytes, in the manner of nginx's request-line
 * parser: the state says what may come next (a value, a key, or what
 * follows a value), a bit per level says whether that level is an object.
 * Strings are the bulk of a request (the prompt), so their plain bytes go
 * through a table lookup and nothing else.
 */
#include "api/json_strict.h"
#include "text/utf8.h"

#include <stdint.h>
#include <string.h>


enum {
    sw_value = 0,       /* a value */
    sw_first_value,     /* after '[': a value or ']' */
    sw_key,             /* a key and its ':' */
    sw_first_key,       /* after '{': a key or '}' */
    sw_after            /* a value is complete: ',', the closer, or end */
};


/* 1 for the bytes a string holds as they are: not '"', '\\', a control
   byte or the start of a multibyte character */
static const unsigned char  plain[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  /* 00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  /* 10 */
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  /* 20 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  /* 30 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  /* 40 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,  /* 50 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  /* 60 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  /* 70 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  /* 80 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  /* 90 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  /* a0 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  /* b0 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  /* c0 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  /* d0 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  /* e0 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  /* f0 */
};


static int
hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c |= 0x20;
    return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}


/* the four hex digits at p[i..]: 0 and *cp, or the fault */
static llm_json_status
hex4(const unsigned char *p, size_t i, size_t len, unsigned *cp)
{
    size_t  k;
    int     h;

    *cp = 0;
    for (k = 0; k < 4; k++) {
        if (i + k == len) {
            return LLM_JSON_UNFINISHED;
        }
        h = hex_value(p[i + k]);
        if (h < 0) {
            return LLM_JSON_ESCAPE;
        }
        *cp = (*cp << 4) | (unsigned) h;
    }
    return LLM_JSON_OK;
}


/* the escape at p[*i] == '\\'; *i moves past it, or to the fault */
static llm_json_status
escape(const unsigned char *p, size_t *i, size_t len, unsigned flags)
{
    llm_json_status  st;
    unsigned         cp, lo;
    size_t           at = *i, k;

    if (at + 1 == len) {
        *i = len;
        return LLM_JSON_UNFINISHED;
    }
    if (memchr("\"\\/bfnrt", p[at + 1], 8) != NULL) {
        *i = at + 2;
        return LLM_JSON_OK;
    }
    if (p[at + 1] != 'u') {
        return LLM_JSON_ESCAPE;
    }
    st = hex4(p, at + 2, len, &cp);
    if (st != LLM_JSON_OK) {
        *i = (st == LLM_JSON_UNFINISHED) ? len : at;
        return st;
    }
    if (cp == 0 && (flags & LLM_JSON_NO_NUL)) {
        return LLM_JSON_NUL;
    }
    if (cp >= 0xdc00 && cp <= 0xdfff) {
        return LLM_JSON_SURROGATE;
    }
    if (cp >= 0xd800 && cp <= 0xdbff) {
        /* a high surrogate counts only with its low half right after */
        for (k = 6; k < 8; k++) {
            if (at + k == len) {
                *i = len;
                return LLM_JSON_UNFINISHED;
            }
            if (p[at + k] != (unsigned char) "\\u"[k - 6]) {
                return LLM_JSON_SURROGATE;
            }
        }
        st = hex4(p, at + 8, len, &lo);
        if (st == LLM_JSON_UNFINISHED) {
            *i = len;
            return st;
        }
        if (st != LLM_JSON_OK || lo < 0xdc00 || lo > 0xdfff) {
            return LLM_JSON_SURROGATE;
        }
        *i = at + 12;
        return LLM_JSON_OK;
    }
    *i = at + 6;
    return LLM_JSON_OK;
}


/* the string whose '"' is at p[*i]; *i moves past it, or to the fault */
static llm_json_status
string(const unsigned char *p, size_t *i, size_t len, unsigned flags)
{
    llm_json_status  st;
    size_t           j = *i + 1, n;

    for ( ;; ) {
        while (j < len && plain[p[j]]) {
            j++;
        }
        if (j == len) {
            *i = len;
            return LLM_JSON_UNFINISHED;
        }
        if (p[j] == '"') {
            *i = j + 1;
            return LLM_JSON_OK;
        }
        if (p[j] == '\\') {
            st = escape(p, &j, len, flags);
            if (st != LLM_JSON_OK) {
                *i = j;
                return st;
            }
            continue;
        }
        if (p[j] < 0x20) {
            *i = j;
            return LLM_JSON_STRING_CONTROL;
        }
        n = llm_utf8_len(p + j, len - j);
        if (n == 0) {
            *i = j;
            return LLM_JSON_UTF8;
        }
        j += n;
    }
}


static int
is_digit(const unsigned char *p, size_t j, size_t len)
{
    return j < len && p[j] >= '0' && p[j] <= '9';
}


/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at p[*i]; a fault is
   reported at the number's first byte */
static llm_json_status
number(const unsigned char *p, size_t *i, size_t len)
{
    size_t  j = *i;

    if (p[j] == '-') {
        j++;
    }
    if (j == len) {
        goto unfinished;
    }
    if (p[j] == '0') {
        if (is_digit(p, ++j, len)) {
            return LLM_JSON_NUMBER;         /* leading zero */
        }
    } else if (is_digit(p, j, len)) {
        while (is_digit(p, ++j, len)) { /* void */ }
    } else {
        return LLM_JSON_NUMBER;
    }
    if (j < len && p[j] == '.') {
        if (++j == len) {
            goto unfinished;
        }
        if (!is_digit(p, j, len)) {
            return LLM_JSON_NUMBER;         /* "2." */
        }
        while (is_digit(p, ++j, len)) { /* void */ }
    }
    if (j < len && (p[j] == 'e' || p[j] == 'E')) {
        if (++j < len && (p[j] == '+' || p[j] == '-')) {
            j++;
        }
        if (j == len) {
            goto unfinished;
        }
        if (!is_digit(p, j, len)) {
            return LLM_JSON_NUMBER;
        }
        while (is_digit(p, ++j, len)) { /* void */ }
    }
    *i = j;
    return LLM_JSON_OK;

unfinished:
    *i = len;
    return LLM_JSON_UNFINISHED;
}


static llm_json_status
literal(const unsigned char *p, size_t *i, size_t len, const char *word)
{
    size_t  k, n = strlen(word);

    for (k = 0; k < n; k++) {
        if (*i + k == len) {
            *i = len;
            return LLM_JSON_UNFINISHED;
        }
        if (p[*i + k] != (unsigned char) word[k]) {
            return LLM_JSON_SYNTAX;
        }
    }
    *i += n;
    return LLM_JSON_OK;
}


/* a byte where none of its kind may be: control bytes get their own
   status, as they are invisible in an error message */
static llm_json_status
unexpected(const unsigned char *p, size_t i)
{
    return p[i] < 0x20 ? LLM_JSON_CONTROL : LLM_JSON_SYNTAX;
}


static size_t
skip_space(const unsigned char *p, size_t i, size_t len)
{
    while (i < len && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r'
                       || p[i] == '\t'))
    {
        i++;
    }
    return i;
}


/* one value at p[*i]: a scalar is read whole, a container is opened */
static llm_json_status
value(const unsigned char *p, size_t *i, size_t len, unsigned flags,
    int *opened)
{
    *opened = 0;
    switch (p[*i]) {
    case '{':
    case '[':
        *opened = 1;
        (*i)++;
        return LLM_JSON_OK;
    case '"':
        return string(p, i, len, flags);
    case 't':
        return literal(p, i, len, "true");
    case 'f':
        return literal(p, i, len, "false");
    case 'n':
        return literal(p, i, len, "null");
    default:
        if (p[*i] == '-' || (p[*i] >= '0' && p[*i] <= '9')) {
            return number(p, i, len);
        }
        return unexpected(p, *i);
    }
}


static llm_json_status
done(llm_json_result *res, llm_json_status st, const unsigned char *p,
    size_t i, size_t len)
{
    res->status = st;
    res->offset = i;
    res->byte = i < len ? p[i] : 0;
    return st;
}


llm_json_status
llm_json_check(const char *text, size_t len, int max_depth,
    size_t max_values, unsigned flags, llm_json_result *res)
{
    const unsigned char  *p = (const unsigned char *) text;
    llm_json_status       st;
    uint64_t              object[(LLM_JSON_MAX_DEPTH + 63) / 64];
    size_t                i;
    int                   state, depth = 0, opened, obj;

    if (max_depth > LLM_JSON_MAX_DEPTH) {
        max_depth = LLM_JSON_MAX_DEPTH;
    }
    res->values = 0;
    i = skip_space(p, 0, len);
    if (i == len) {
        return done(res, LLM_JSON_EMPTY, p, i, len);
    }

    for (state = sw_value; ; ) {
        i = skip_space(p, i, len);
        if (i == len) {
            st = (state == sw_after && depth == 0) ? LLM_JSON_OK
                                                   : LLM_JSON_UNFINISHED;
            return done(res, st, p, i, len);
        }
        obj = depth > 0
              && ((object[(depth - 1) / 64] >> ((depth - 1) % 64)) & 1);

        switch (state) {

        case sw_first_key:
        case sw_first_value:
            if (p[i] == (state == sw_first_key ? '}' : ']')) {
                i++;
                depth--;
                state = sw_after;
                break;
            }
            state = (state == sw_first_key) ? sw_key : sw_value;
            break;

        case sw_key:
            if (p[i] != '"') {
                return done(res, unexpected(p, i), p, i, len);
            }
            st = string(p, &i, len, flags);
            if (st != LLM_JSON_OK) {
                return done(res, st, p, i, len);
            }
            i = skip_space(p, i, len);
            if (i == len) {
                return done(res, LLM_JSON_UNFINISHED, p, i, len);
            }
            if (p[i] != ':') {
                return done(res, unexpected(p, i), p, i, len);
            }
            i++;
            state = sw_value;
            break;

        case sw_value:
            if (max_values > 0 && res->values >= max_values) {
                return done(res, LLM_JSON_VALUES, p, i, len);
            }
            res->values++;
            st = value(p, &i, len, flags, &opened);
            if (st != LLM_JSON_OK) {
                return done(res, st, p, i, len);
            }
            state = sw_after;
            if (!opened) {
                break;
            }
            if (depth >= max_depth) {
                return done(res, LLM_JSON_DEPTH, p, i - 1, len);
            }
            if (p[i - 1] == '{') {
                object[depth / 64] |= (uint64_t) 1 << (depth % 64);
                state = sw_first_key;
            } else {
                object[depth / 64] &= ~((uint64_t) 1 << (depth % 64));
                state = sw_first_value;
            }
            depth++;
            break;

        default: /* sw_after */
            if (depth == 0) {
                return done(res, LLM_JSON_TRAILING, p, i, len);
            }
            if (p[i] == ',') {
                i++;
                state = obj ? sw_key : sw_value;
                break;
            }
            if (p[i] != (obj ? '}' : ']')) {
                return done(res, unexpected(p, i), p, i, len);
            }
            i++;
            depth--;
            break;
        }
    }
}
