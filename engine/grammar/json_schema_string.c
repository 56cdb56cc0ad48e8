/*
 * JSON Schema -> GBNF, strings: "pattern" (an ECMA-262 regular expression,
 * the subset a grammar can say, translated into GBNF over the string's
 * JSON text), "format" (date, time, date-time, uuid, email: the shared
 * rules of json_schema.c) and minLength / maxLength. Json_schema_keys.c
 * reuses the character classes and literals for object keys.
 *
 * defines: js_gen_string, js_format_rules, js_pattern, re_utf8, re_add, re_normalize,
 *          re_class_cp, re_char_lit
 */
#include "grammar/json_schema_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* --- patterns --------------------------------------------------------- */

/* ECMA-262 regular expressions, the subset a grammar can say: literals,
   ., classes, \d \w \s (\D \W \S as ASCII only), groups, |, quantifiers,
   ^ and $ at the ends of the top-level alternatives. A pattern is not
   anchored (it may match anywhere in the string) unless ^ / $ say so. */

static int
re_fail(js_re *r, const char *what)
{
    js_relaxable(r->c, "pattern", NULL);
    return js_fail(r->c, "json_schema: pattern at %s: %s (at offset %d)",
                   js_at(r->ptr), what, (int) (r->p - r->start));
}


/* one UTF-8 code point from r->p; 0 at the end or on a bad sequence */
uint32_t
re_utf8(js_re *r)
{
    const unsigned char  *p = (const unsigned char *) r->p;
    uint32_t              cp;
    int                   n, i;

    if (p >= (const unsigned char *) r->end) {
        return 0;
    }
    if (p[0] < 0x80) {
        r->p++;
        return p[0];
    }
    n = p[0] >= 0xf0 ? 3 : p[0] >= 0xe0 ? 2 : 1;
    cp = p[0] & (0x3f >> n);
    for (i = 1; i <= n; i++) {
        if (p + i >= (const unsigned char *) r->end || (p[i] & 0xc0) != 0x80)
        {
            return 0;
        }
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    r->p += n + 1;
    return cp;
}


void
re_add(re_class *k, uint32_t lo, uint32_t hi)
{
    if (k->n < RE_MAX_RANGES) {
        k->lo[k->n] = lo;
        k->hi[k->n] = hi;
        k->n++;
    } else {
        k->over = 1;
    }
}


/* sorted, overlapping and adjacent ranges merged */
void
re_normalize(re_class *k)
{
    uint32_t  lo, hi;
    int       i, j, n = 0;

    for (i = 1; i < k->n; i++) {
        lo = k->lo[i];
        hi = k->hi[i];
        for (j = i; j > 0 && k->lo[j - 1] > lo; j--) {
            k->lo[j] = k->lo[j - 1];
            k->hi[j] = k->hi[j - 1];
        }
        k->lo[j] = lo;
        k->hi[j] = hi;
    }
    for (i = 0; i < k->n; i++) {
        if (n > 0 && k->lo[i] <= k->hi[n - 1] + 1) {
            if (k->hi[i] > k->hi[n - 1]) {
                k->hi[n - 1] = k->hi[i];
            }
            continue;
        }
        k->lo[n] = k->lo[i];
        k->hi[n] = k->hi[i];
        n++;
    }
    k->n = n;
}


static void
re_digit(re_class *k)
{
    re_add(k, '0', '9');
}


static void
re_word(re_class *k)
{
    re_add(k, '0', '9');
    re_add(k, 'A', 'Z');
    re_add(k, '_', '_');
    re_add(k, 'a', 'z');
}


/* \s as ECMA and Python both read it (\ufeff is not a space to Python) */
static void
re_space(re_class *k)
{
    re_add(k, '\t', '\r');
    re_add(k, ' ', ' ');
    re_add(k, 0xa0, 0xa0);
    re_add(k, 0x1680, 0x1680);
    re_add(k, 0x2000, 0x200a);
    re_add(k, 0x2028, 0x2029);
    re_add(k, 0x202f, 0x202f);
    re_add(k, 0x205f, 0x205f);
    re_add(k, 0x3000, 0x3000);
}


/* printable ASCII but the class of what (\D \W \S) */
static void
re_ascii_but(re_class *k, void (*what)(re_class *))
{
    re_class  x;
    uint32_t  ch, start = 0;
    int       i, in, open = 0;

    x.n = 0;
    x.over = 0;
    what(&x);
    for (ch = 0x20; ch <= 0x7f; ch++) {
        in = ch == 0x7f;
        for (i = 0; i < x.n && !in; i++) {
            in = ch >= x.lo[i] && ch <= x.hi[i];
        }
        if (!in && !open) {
            start = ch;
            open = 1;
        } else if (in && open) {
            re_add(k, start, ch - 1);
            open = 0;
        }
    }
}


static uint32_t
re_hex(js_re *r, int n)
{
    uint32_t  v = 0;
    int       i, d;

    for (i = 0; i < n; i++) {
        if (r->p >= r->end) {
            return UINT32_MAX;
        }
        d = r->p[0];
        if (d >= '0' && d <= '9') {
            d -= '0';
        } else if (d >= 'a' && d <= 'f') {
            d -= 'a' - 10;
        } else if (d >= 'A' && d <= 'F') {
            d -= 'A' - 10;
        } else {
            return UINT32_MAX;
        }
        v = v * 16 + (uint32_t) d;
        r->p++;
    }
    return v;
}


/*
 * After a backslash: a character (returned), or a class (*k filled, 0
 * returned, *shorthand set to 'd', 'w', 's', 'D', 'W' or 'S'), or
 * UINT32_MAX with the error set.
 */
static uint32_t
re_escape(js_re *r, int in_class, re_class *k, int *shorthand)
{
    uint32_t  ch, lo;
    char      e;

    *shorthand = 0;
    if (r->p >= r->end) {
        re_fail(r, "a trailing backslash");
        return UINT32_MAX;
    }
    e = *r->p++;
    switch (e) {
    case 'd': case 'w': case 's': case 'D': case 'W': case 'S':
        *shorthand = e;
        if (e == 'd') {
            re_digit(k);
        } else if (e == 'w') {
            re_word(k);
        } else if (e == 's') {
            re_space(k);
        } else {
            re_ascii_but(k, e == 'D' ? re_digit
                            : e == 'W' ? re_word : re_space);
        }
        return 0;
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'b':
        if (in_class) {
            return '\b';
        }
        re_fail(r, "\\b (word boundary) is not supported");
        return UINT32_MAX;
    case 'x':
        ch = re_hex(r, 2);
        break;
    case 'u':
        ch = re_hex(r, 4);
        if (ch >= 0xd800 && ch <= 0xdbff && r->end - r->p >= 6
            && r->p[0] == '\\' && r->p[1] == 'u')
        {
            r->p += 2;
            lo = re_hex(r, 4);
            if (lo < 0xdc00 || lo > 0xdfff) {
                ch = UINT32_MAX;
            } else {
                ch = 0x10000 + ((ch - 0xd800) << 10) + (lo - 0xdc00);
            }
        }
        break;
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')
            || (e >= '1' && e <= '9'))
        {
            char  what[64];

            snprintf(what, sizeof(what), "\\%c is not supported", e);
            re_fail(r, what);
            return UINT32_MAX;
        }
        r->p--;
        return re_utf8(r);
    }
    if (ch == UINT32_MAX || (ch >= 0xd800 && ch <= 0xdfff)) {
        re_fail(r, "a bad \\x or \\u escape");
        return UINT32_MAX;
    }
    return ch;
}


/* one code point inside a GBNF class */
void
re_class_cp(js_ctx *c, llm_strbuf *b, uint32_t cp)
{
    if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z')
        || (cp >= 'A' && cp <= 'Z') || (cp >= 0x20 && cp < 0x7f
            && strchr("\\]-^[", (int) cp) == NULL))
    {
        js_putf(c, b, "%c", (int) cp);
    } else if (cp < 0x80) {
        js_putf(c, b, "\\x%02x", (unsigned) cp);
    } else if (cp <= 0xffff) {
        js_putf(c, b, "\\u%04x", (unsigned) cp);
    } else {
        js_putf(c, b, "\\U%08x", (unsigned) cp);
    }
}


/* the JSON text of one character of a string (its escape when JSON needs
   one), as a GBNF literal */
void
re_char_lit(js_ctx *c, llm_strbuf *b, uint32_t cp)
{
    char  u[8];
    int   n = 0;

    if (cp < 0x80) {
        u[n++] = (char) cp;
    } else if (cp < 0x800) {
        u[n++] = (char) (0xc0 | (cp >> 6));
        u[n++] = (char) (0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        u[n++] = (char) (0xe0 | (cp >> 12));
        u[n++] = (char) (0x80 | ((cp >> 6) & 0x3f));
        u[n++] = (char) (0x80 | (cp & 0x3f));
    } else {
        u[n++] = (char) (0xf0 | (cp >> 18));
        u[n++] = (char) (0x80 | ((cp >> 12) & 0x3f));
        u[n++] = (char) (0x80 | ((cp >> 6) & 0x3f));
        u[n++] = (char) (0x80 | (cp & 0x3f));
    }
    u[n] = '\0';
    if (cp == 0) {
        js_lit(c, b, "\\u0000", 6);
        return;
    }
    {
        llm_strbuf  j;

        js_buf(c, &j);
        js_json_string(c, &j, u);
        if (!c->failed) {
            js_lit(c, b, j.data + 1, j.len - 2);   /* without the quotes */
        }
        llm_strbuf_free(&j);
    }
}


/* a character class as GBNF: chars that JSON escapes become their escapes
   (a positive class); a negated one never matches a control character */
static int
re_emit_class(js_re *r, llm_strbuf *b, re_class *k, int negated)
{
    js_ctx     *c = r->c;
    llm_strbuf  cls, esc;
    uint32_t    lo, hi, ch;
    int         i, n_esc = 0, n_cls = 0, has_q = 0, has_bs = 0;

    re_normalize(k);
    if (k->over || k->n > RE_MAX_RANGES - 8) {
        /* the engine's cap on a class's ranges, with ours added */
        return re_fail(r, "a class with too many ranges");
    }
    js_buf(c, &cls);
    js_buf(c, &esc);
    js_put(c, &cls, negated ? "[^" : "[");
    for (i = 0; i < k->n; i++) {
        lo = k->lo[i];
        hi = k->hi[i];
        /* the characters JSON must escape: 0x00-0x1f, '"', '\\' */
        for (ch = lo; ch <= hi && ch < 0x20; ch++) {
            if (!negated) {
                js_put(c, &esc, n_esc++ ? " | " : "");
                re_char_lit(c, &esc, ch);
            }
        }
        if (lo <= '"' && hi >= '"') {
            has_q = 1;
        }
        if (lo <= '\\' && hi >= '\\') {
            has_bs = 1;
        }
        if (lo < 0x20) {
            lo = 0x20;
        }
        if (lo > hi) {
            continue;
        }
        /* the class part: [lo, hi] minus '"' and '\\' (added below for a
           negated class, as escapes for a positive one) */
        while (lo <= hi) {
            uint32_t  end = hi;

            if (lo <= '"' && end >= '"') {
                end = lo == '"' ? '"' : '"' - 1;
            } else if (lo <= '\\' && end >= '\\') {
                end = lo == '\\' ? '\\' : '\\' - 1;
            }
            if (!(lo == end && (lo == '"' || lo == '\\'))) {
                re_class_cp(c, &cls, lo);
                if (end > lo) {
                    js_put(c, &cls, "-");
                    re_class_cp(c, &cls, end);
                }
                n_cls++;
            }
            lo = end + 1;
        }
    }
    if (negated) {
        js_put(c, &cls, "\"\\\\\\x00-\\x1f]");
        n_cls++;
        if (!has_q) {
            js_put(c, &esc, n_esc++ ? " | " : "");
            js_put(c, &esc, "\"\\\\\\\"\"");
        }
        if (!has_bs) {
            js_put(c, &esc, n_esc++ ? " | " : "");
            js_put(c, &esc, "\"\\\\\\\\\"");
        }
    } else {
        js_put(c, &cls, "]");
        if (has_q) {
            js_put(c, &esc, n_esc++ ? " | " : "");
            js_put(c, &esc, "\"\\\\\\\"\"");
        }
        if (has_bs) {
            js_put(c, &esc, n_esc++ ? " | " : "");
            js_put(c, &esc, "\"\\\\\\\\\"");
        }
    }
    if (n_cls == 0 && n_esc == 0) {
        llm_strbuf_free(&cls);
        llm_strbuf_free(&esc);
        return re_fail(r, "a class that matches nothing");
    }
    if (n_esc == 0) {
        js_put(c, b, cls.data);
    } else if (n_cls == 0) {
        js_putf(c, b, "( %s )", esc.data);
    } else {
        js_putf(c, b, "( ");
        js_put(c, b, cls.data);
        js_put(c, b, " | ");
        js_put(c, b, esc.data);
        js_put(c, b, " )");
    }
    llm_strbuf_free(&cls);
    llm_strbuf_free(&esc);
    return c->failed ? JS_ERR : JS_OK;
}


static int
re_class_parse(js_re *r, llm_strbuf *b)
{
    re_class  k;
    uint32_t  lo, hi;
    int       negated = 0, sh, first = 1;

    k.n = 0;
    k.over = 0;
    if (r->p < r->end && *r->p == '^') {
        negated = 1;
        r->p++;
    }
    for ( ;; ) {
        if (r->p >= r->end) {
            return re_fail(r, "an unclosed [");
        }
        if (*r->p == ']' && !first) {
            r->p++;
            break;
        }
        if (*r->p == ']') {
            return re_fail(r, "an empty class []");
        }
        first = 0;
        if (*r->p == '\\') {
            r->p++;
            lo = re_escape(r, 1, &k, &sh);
            if (lo == UINT32_MAX) {
                return JS_ERR;
            }
            if (sh) {
                if (negated || (sh >= 'A' && sh <= 'Z')) {
                    /* Python's \d \w \s are Unicode-wide: [^\d] and
                       [\D] would not agree with ECMA's */
                    return re_fail(r, "\\D, \\W, \\S inside a class, or "
                                   "\\d, \\w, \\s in a negated one, are "
                                   "not supported");
                }
                continue;
            }
        } else if (*r->p == '[' && r->end - r->p > 1 && r->p[1] == ':') {
            return re_fail(r, "POSIX classes are not supported");
        } else {
            lo = re_utf8(r);
            if (lo == 0) {
                return re_fail(r, "bad UTF-8");
            }
        }
        hi = lo;
        if (r->end - r->p >= 2 && r->p[0] == '-' && r->p[1] != ']') {
            r->p++;
            if (*r->p == '\\') {
                r->p++;
                hi = re_escape(r, 1, &k, &sh);
                if (hi == UINT32_MAX) {
                    return JS_ERR;
                }
                if (sh) {
                    return re_fail(r, "a range ending in a class");
                }
            } else {
                hi = re_utf8(r);
            }
            if (hi < lo) {
                return re_fail(r, "a range out of order");
            }
        }
        if (k.n == RE_MAX_RANGES) {
            return re_fail(r, "a class with too many ranges");
        }
        re_add(&k, lo, hi);
    }
    return re_emit_class(r, b, &k, negated);
}


/* {n}, {n,}, {n,m} after an atom; 0 when r->p is no quantifier */
static int
re_braces(js_re *r, long *min, long *max)
{
    const char  *p = r->p + 1;
    char        *q;

    long         lo, hi;

    if (p >= r->end || *p < '0' || *p > '9') {
        return 0;
    }
    lo = strtol(p, &q, 10);
    hi = lo;
    if (*q == ',') {
        q++;
        if (*q == '}') {
            hi = -1;
        } else if (*q >= '0' && *q <= '9') {
            hi = strtol(q, &q, 10);
        } else {
            return 0;
        }
    }
    if (*q != '}') {
        return 0;       /* a literal '{' (as ECMA's Annex B reads it) */
    }
    *min = lo;
    *max = hi;
    r->p = q + 1;
    return 1;
}


static int re_alt(js_re *r, llm_strbuf *b, int top);


static int
re_atom(js_re *r, llm_strbuf *b)
{
    js_ctx    *c = r->c;
    re_class   k;
    uint32_t   ch;
    int        sh;

    k.n = 0;
    k.over = 0;
    switch (*r->p) {
    case '(':
        r->p++;
        if (r->p < r->end && *r->p == '?') {
            if (r->end - r->p >= 2 && r->p[1] == ':') {
                r->p += 2;
            } else if (r->end - r->p >= 2 && r->p[1] == '<'
                       && r->p[2] != '=' && r->p[2] != '!')
            {
                /* a named group is a group */
                const char  *gt = memchr(r->p, '>', r->end - r->p);

                if (gt == NULL) {
                    return re_fail(r, "a bad group name");
                }
                r->p = gt + 1;
            } else {
                return re_fail(r, "lookaround and (?...) groups are not "
                               "supported");
            }
        }
        if (++r->depth > JS_MAX_DEPTH) {
            return re_fail(r, "groups nested too deep");
        }
        js_put(c, b, "( ");
        if (re_alt(r, b, 0) != JS_OK) {
            return JS_ERR;
        }
        r->depth--;
        if (r->p >= r->end || *r->p != ')') {
            return re_fail(r, "an unclosed (");
        }
        r->p++;
        js_put(c, b, " )");
        return JS_OK;
    case '[':
        r->p++;
        return re_class_parse(r, b);
    case '.':
        r->p++;
        re_add(&k, '\n', '\n');
        re_add(&k, '\r', '\r');
        re_add(&k, 0x2028, 0x2029);
        return re_emit_class(r, b, &k, 1);
    case '\\':
        r->p++;
        ch = re_escape(r, 0, &k, &sh);
        if (ch == UINT32_MAX) {
            return JS_ERR;
        }
        if (sh) {
            return re_emit_class(r, b, &k, 0);
        }
        re_char_lit(c, b, ch);
        return c->failed ? JS_ERR : JS_OK;
    case '*': case '+': case '?':
        return re_fail(r, "a quantifier with nothing before it");
    case ')':
        return re_fail(r, "an unmatched )");
    case '^': case '$':
        return re_fail(r, "^ and $ are supported only at the ends of the "
                       "pattern's top-level alternatives");
    default:
        ch = re_utf8(r);
        if (ch == 0) {
            return re_fail(r, "bad UTF-8");
        }
        re_char_lit(c, b, ch);
        return c->failed ? JS_ERR : JS_OK;
    }
}


/* a sequence up to | or ) or the end; *end_anchor when it ends in $ */
static int
re_seq(js_re *r, llm_strbuf *b, int top, int *end_anchor, int *empty)
{
    js_ctx      *c = r->c;
    llm_strbuf   a;
    long         min, max;
    int          n = 0;

    *end_anchor = 0;
    *empty = 1;
    while (r->p < r->end && *r->p != '|' && *r->p != ')') {
        if (*r->p == '$' && top
            && (r->p + 1 == r->end || r->p[1] == '|'))
        {
            r->p++;
            *end_anchor = 1;
            break;
        }
        js_buf(c, &a);
        if (re_atom(r, &a) != JS_OK) {
            llm_strbuf_free(&a);
            return JS_ERR;
        }
        min = max = 1;
        if (r->p < r->end) {
            if (*r->p == '*') {
                min = 0, max = -1, r->p++;
            } else if (*r->p == '+') {
                min = 1, max = -1, r->p++;
            } else if (*r->p == '?') {
                min = 0, max = 1, r->p++;
            } else if (*r->p == '{' && re_braces(r, &min, &max)) {
                if (min > JS_MAX_REPEAT || max > JS_MAX_REPEAT
                    || (max >= 0 && max < min))
                {
                    llm_strbuf_free(&a);
                    return re_fail(r, "a bad or too large {n,m}");
                }
            }
            if (r->p < r->end && *r->p == '?' && !(min == 1 && max == 1)) {
                r->p++;     /* lazy: the same strings */
            }
            if (r->p < r->end && strchr("*+?", *r->p) && !(min == 1 && max == 1)) {
                llm_strbuf_free(&a);
                return re_fail(r, "a quantifier after a quantifier");
            }
        }
        js_put(c, b, n++ ? " " : "");
        if (min == 1 && max == 1) {
            js_put(c, b, a.data);
        } else if (max == 0) {
            js_put(c, b, "\"\"");
        } else {
            js_put(c, b, "( ");
            js_put(c, b, a.data);
            js_put(c, b, " )");
            js_rep(c, b, min, max);
        }
        llm_strbuf_free(&a);
    }
    *empty = n == 0;
    return c->failed ? JS_ERR : JS_OK;
}


static int
re_alt(js_re *r, llm_strbuf *b, int top)
{
    js_ctx      *c = r->c;
    llm_strbuf   s;
    int          n = 0, start, end, empty;

    for ( ;; ) {
        start = 0;
        if (top && r->p < r->end && *r->p == '^') {
            r->p++;
            start = 1;
        }
        js_buf(c, &s);
        if (re_seq(r, &s, top, &end, &empty) != JS_OK) {
            llm_strbuf_free(&s);
            return JS_ERR;
        }
        js_put(c, b, n++ ? " | " : "");
        if (top && empty && !(start && end)) {
            /* anything */
            js_need(c, b, N_CHAR, "char");
            js_put(c, b, "*");
        } else {
            if (top && !start) {
                js_need(c, b, N_CHAR, "char");
                js_put(c, b, "* ");
            }
            js_put(c, b, empty ? "\"\"" : s.data);
            if (top && !end) {
                js_put(c, b, " ");
                js_need(c, b, N_CHAR, "char");
                js_put(c, b, "*");
            }
        }
        llm_strbuf_free(&s);
        if (r->p < r->end && *r->p == '|') {
            r->p++;
            continue;
        }
        break;
    }
    if (top && r->p < r->end) {
        return re_fail(r, "an unmatched )");
    }
    return c->failed ? JS_ERR : JS_OK;
}


int
js_pattern(js_ctx *c, const char *re, const char *ptr, llm_strbuf *e)
{
    js_re       r;
    llm_strbuf  b;
    int         rc;

    r.c = c;
    r.p = re;
    r.start = re;
    r.end = re + strlen(re);
    r.ptr = ptr;
    r.depth = 0;
    js_buf(c, &b);
    rc = re_alt(&r, &b, 1);
    if (rc == JS_OK) {
        js_put(c, e, "\"\\\"\" ( ");
        js_put(c, e, b.data);
        js_put(c, e, " ) \"\\\"\"");
    }
    llm_strbuf_free(&b);
    return c->failed ? JS_ERR : rc;
}


/* --- strings ---------------------------------------------------------- */

/*
 * hostname, ipv4, ipv6, uri: each a subset of what its RFC allows, so that
 * everything written is valid:
 *   hostname  RFC 1123 labels (letters, digits, inner hyphens) of at most
 *             49 characters, at most 5 of them (so at most 249 bytes, under
 *             the 253 of a name), the last one starting with a letter
 *   ipv4      four decimal octets 0-255, no leading zero
 *   ipv6      eight groups of 1-4 hex digits, or "::" with at most seven
 *             groups before or after it (not both sides, no embedded ipv4)
 *   uri       RFC 3986: scheme ":" then unreserved, sub-delims, ":@/?" and
 *             %XX, one optional "#" fragment of the same (no "#")
 */
void
js_format_rules(js_ctx *c, llm_strbuf *out)
{
    const char  *r = c->root;

    if (c->need & N_HOSTNAME) {
        js_putf(c, out, "%s-hostname ::= ( %s-label \".\" ){0,4} [a-zA-Z] ( "
                "[a-zA-Z0-9\\x2d]{0,47} [a-zA-Z0-9] )?\n", r, r);
        js_putf(c, out, "%s-label ::= [a-zA-Z0-9] ( [a-zA-Z0-9\\x2d]{0,47} "
                "[a-zA-Z0-9] )?\n", r);
    }
    if (c->need & N_IPV4) {
        js_putf(c, out, "%s-ipv4 ::= %s-octet \".\" %s-octet \".\" %s-octet "
                "\".\" %s-octet\n", r, r, r, r, r);
        js_putf(c, out, "%s-octet ::= \"25\" [0-5] | \"2\" [0-4] [0-9] | "
                "\"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9]\n", r);
    }
    if (c->need & N_IPV6) {
        js_putf(c, out, "%s-ipv6 ::= %s-h16 ( \":\" %s-h16 ){7} | \"::\" ( "
                "%s-h16 ( \":\" %s-h16 ){0,6} )? | %s-h16 ( \":\" %s-h16 "
                "){0,6} \"::\"\n", r, r, r, r, r, r, r);
        js_putf(c, out, "%s-h16 ::= [0-9a-fA-F]{1,4}\n", r);
    }
    if (c->need & N_URI) {
        js_putf(c, out, "%s-uri ::= [a-zA-Z] [a-zA-Z0-9+.\\x2d]* \":\" "
                "%s-uchar* ( \"#\" %s-uchar* )?\n", r, r, r);
        js_putf(c, out, "%s-uchar ::= [a-zA-Z0-9._~!$&'()*+,;=:@/?\\x2d] | "
                "\"%%\" [0-9a-fA-F] [0-9a-fA-F]\n", r);
    }
}


/* the formats enforced: a quoted string of the node's grammar, a
   date-time being a date, "T" and a time */
static int
js_format(js_ctx *c, const char *f, const char *ptr, llm_strbuf *e)
{
    static const struct {
        const char  *name;
        unsigned     node;
    } formats[] = {
        { "date", N_DATE }, { "time", N_TIME }, { "uuid", N_UUID },
        { "email", N_EMAIL }, { "date-time", 0 },
        { "hostname", N_HOSTNAME }, { "ipv4", N_IPV4 }, { "ipv6", N_IPV6 },
        { "uri", N_URI },
    };
    size_t  i, n = sizeof(formats) / sizeof(formats[0]);

    for (i = 0; i < n && strcmp(f, formats[i].name) != 0; i++) {
        /* void */
    }
    if (i == n) {
        char  report[96];

        snprintf(report, sizeof(report), "%s-format", f);
        js_relaxable(c, "format", report);
        return js_fail(c, "json_schema: unsupported format '%s' at %s", f,
                       js_at(ptr));
    }

    js_put(c, e, "\"\\\"\" ");
    if (formats[i].node == 0) {
        js_need(c, e, N_DATE, "date");
        js_put(c, e, " \"T\" ");
        js_need(c, e, N_TIME, "time");
    } else {
        js_need(c, e, formats[i].node, formats[i].name);
    }
    js_put(c, e, " \"\\\"\"");
    return c->failed ? JS_ERR : JS_OK;
}

int
js_gen_string(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    const cJSON  *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    const cJSON  *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    long          min, max;

    if (js_count(c, s, "minLength", ptr, 0, &min) != JS_OK
        || js_count(c, s, "maxLength", ptr, -1, &max) != JS_OK)
    {
        return JS_ERR;
    }
    if (max >= 0 && max < min) {
        return JS_EMPTY;
    }
    if ((pat || fmt) && (min > 0 || max >= 0)) {
        js_relaxable(c, "minLength/maxLength", NULL);
        return js_fail(c, "json_schema: '%s' with minLength/maxLength at %s "
                       "is not supported", pat ? "pattern" : "format",
                       js_at(ptr));
    }
    if (pat && fmt) {
        js_relaxable(c, "format", NULL);
        return js_fail(c, "json_schema: 'pattern' with 'format' at %s is "
                       "not supported", js_at(ptr));
    }
    if (pat) {
        if (!cJSON_IsString(pat)) {
            return js_fail(c, "json_schema: 'pattern' at %s is not a string",
                           js_at(ptr));
        }
        return js_pattern(c, pat->valuestring, ptr, e);
    }
    if (fmt) {
        return js_format(c, cJSON_IsString(fmt) ? fmt->valuestring : "",
                         ptr, e);
    }
    if (min == 0 && max < 0) {
        js_need(c, e, N_STRING, "string");
        return JS_OK;
    }
    js_put(c, e, "\"\\\"\" ");
    js_need(c, e, N_CHAR, "char");
    js_rep(c, e, min, max);
    js_put(c, e, " \"\\\"\"");
    return c->failed ? JS_ERR : JS_OK;
}
