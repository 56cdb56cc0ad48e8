/*
 * JSON Schema -> GBNF, writing the grammar: the capped buffers every
 * expression is built in (llm_strbuf), the first error of a compile, GBNF
 * literals and repetition suffixes, helper rules and their names, and the
 * alternatives of one expression. The lowest of the compiler's files
 * (json_schema_int.h): it calls none of the others.
 *
 * defines: llm_strbuf_append, llm_strbuf_free, js_fail, js_relaxable,
 *          js_relax_as, js_put, js_putf,
 *          js_buf, js_name, js_need, js_rule, js_lit, js_json_string,
 *          js_rep, js_alt_add, js_alt_end
 */
#include "grammar/json_schema_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* --- buffers ---------------------------------------------------------- */

int
llm_strbuf_append(llm_strbuf *b, const char *s, size_t len)
{
    size_t  cap;
    char   *p;

    if (b->max && b->len + len > b->max) {
        return -1;
    }
    if (b->data == NULL || b->len + len + 1 > b->cap) {
        cap = b->cap ? b->cap : 256;
        while (cap < b->len + len + 1) {
            cap *= 2;
        }
        p = realloc(b->data, cap);
        if (p == NULL) {
            return -1;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}


void
llm_strbuf_free(llm_strbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}


int
js_fail(js_ctx *c, const char *fmt, ...)
{
    va_list  ap;

    if (!c->failed) {
        va_start(ap, fmt);
        vsnprintf(c->err, c->err_len, fmt, ap);
        va_end(ap);
        c->failed = 1;
    }
    return JS_ERR;
}


void
js_relaxable(js_ctx *c, const char *drop, const char *report)
{
    if (!c->failed) {
        snprintf(c->drop, sizeof(c->drop), "%s", drop);
        snprintf(c->report, sizeof(c->report), "%s", report ? report : drop);
    }
}


void
js_relax_as(js_ctx *c, const char *drop)
{
    if (c->failed) {
        snprintf(c->drop, sizeof(c->drop), "%s", drop);
        snprintf(c->report, sizeof(c->report), "%s", drop);
    }
}


/* appends; the first failure (over out->max) sets the error, and the
   callers check c->failed where a rule ends */
void
js_put(js_ctx *c, llm_strbuf *b, const char *s)
{
    if (c->failed) {
        return;
    }
    if (llm_strbuf_append(b, s, strlen(s)) != 0) {
        js_fail(c, "json_schema: the grammar would be over %zu bytes",
                c->max);
    }
}


/* formatted text of any length: a %s argument can be a whole generated
   rule (an integer range of 16 digits is longer than any fixed buffer) */
void
js_putf(js_ctx *c, llm_strbuf *b, const char *fmt, ...)
{
    char     tmp[256], *p = tmp;
    int      n;
    va_list  ap;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0) {
        js_fail(c, "json_schema: cannot format the grammar");
        return;
    }
    if ((size_t) n >= sizeof(tmp)) {
        p = malloc((size_t) n + 1);
        if (p == NULL) {
            js_fail(c, "json_schema: out of memory");
            return;
        }
        va_start(ap, fmt);
        vsnprintf(p, (size_t) n + 1, fmt, ap);
        va_end(ap);
    }
    js_put(c, b, p);
    if (p != tmp) {
        free(p);
    }
}


void
js_buf(js_ctx *c, llm_strbuf *b)
{
    memset(b, 0, sizeof(*b));
    b->max = c->max;
}


void
js_name(js_ctx *c, char *name, size_t len, const char *kind)
{
    snprintf(name, len, "%s-%s%d", c->root, kind, ++c->n_ids);
}


void
js_need(js_ctx *c, llm_strbuf *e, unsigned what, const char *suffix)
{
    c->need |= what;
    js_putf(c, e, "%s-%s", c->root, suffix);
}


/* name ::= body, into the helper rules */
int
js_rule(js_ctx *c, const char *name, llm_strbuf *body)
{
    js_put(c, &c->rules, name);
    js_put(c, &c->rules, " ::= ");
    js_put(c, &c->rules, body->data ? body->data : "\"\"");
    js_put(c, &c->rules, "\n");
    return c->failed ? JS_ERR : JS_OK;
}


/* a GBNF literal of n bytes */
void
js_lit(js_ctx *c, llm_strbuf *b, const char *s, size_t n)
{
    char    esc[8];
    size_t  i;

    js_put(c, b, "\"");
    for (i = 0; i < n; i++) {
        unsigned char ch = (unsigned char) s[i];

        if (ch == '"' || ch == '\\') {
            esc[0] = '\\';
            esc[1] = (char) ch;
            esc[2] = '\0';
        } else if (ch == '\n') {
            strcpy(esc, "\\n");
        } else if (ch == '\r') {
            strcpy(esc, "\\r");
        } else if (ch == '\t') {
            strcpy(esc, "\\t");
        } else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof(esc), "\\x%02x", ch);
        } else {
            esc[0] = (char) ch;
            esc[1] = '\0';
        }
        js_put(c, b, esc);
    }
    js_put(c, b, "\"");
}


/* the JSON string text of s (with its quotes), in the one form the
   grammar accepts: short escapes, \u00XX for other controls, UTF-8 raw */
void
js_json_string(js_ctx *c, llm_strbuf *b, const char *s)
{
    char  esc[8];

    js_put(c, b, "\"");
    for (; *s; s++) {
        unsigned char ch = (unsigned char) *s;

        switch (ch) {
        case '"':  strcpy(esc, "\\\""); break;
        case '\\': strcpy(esc, "\\\\"); break;
        case '\b': strcpy(esc, "\\b"); break;
        case '\f': strcpy(esc, "\\f"); break;
        case '\n': strcpy(esc, "\\n"); break;
        case '\r': strcpy(esc, "\\r"); break;
        case '\t': strcpy(esc, "\\t"); break;
        default:
            if (ch < 0x20) {
                snprintf(esc, sizeof(esc), "\\u%04x", ch);
            } else {
                esc[0] = (char) ch;
                esc[1] = '\0';
            }
        }
        js_put(c, b, esc);
    }
    js_put(c, b, "\"");
}


/* a repetition suffix: "", "?", "*", "+", "{n}", "{n,}", "{n,m}";
   max < 0: no upper bound */
void
js_rep(js_ctx *c, llm_strbuf *b, long min, long max)
{
    if (min == 1 && max == 1) {
        return;
    }
    if (min == 0 && max == 1) {
        js_put(c, b, "?");
    } else if (min == 0 && max < 0) {
        js_put(c, b, "*");
    } else if (min == 1 && max < 0) {
        js_put(c, b, "+");
    } else if (max < 0) {
        js_putf(c, b, "{%ld,}", min);
    } else if (min == max) {
        js_putf(c, b, "{%ld}", min);
    } else {
        js_putf(c, b, "{%ld,%ld}", min, max);
    }
}

/* --- alternatives ----------------------------------------------------- */

void
js_alt_add(js_ctx *c, js_alts *a, const char *x)
{
    if (a->n++) {
        js_put(c, &a->b, " | ");
    }
    js_put(c, &a->b, x);
}


/* writes the alternatives to e: JS_EMPTY when there are none */
int
js_alt_end(js_ctx *c, js_alts *a, llm_strbuf *e)
{
    int  rc = JS_OK;

    if (c->failed) {
        rc = JS_ERR;
    } else if (a->n == 0) {
        rc = JS_EMPTY;
    } else if (a->n == 1) {
        js_put(c, e, a->b.data);
    } else {
        js_put(c, e, "( ");
        js_put(c, e, a->b.data);
        js_put(c, e, " )");
    }
    llm_strbuf_free(&a->b);
    return c->failed ? JS_ERR : rc;
}
