/*
 * Jinja values: what every other part of a render stands on. Errors (jdie
 * unwinds the render with longjmp), arena memory, growable buffers and lists,
 * Python's == and dicts keyed by any value, UTF-8 by code point, and str() /
 * repr() of every value as Python prints it (None, True, 1.5, lists and dicts
 * as reprs). Uses only the arena.
 *
 * defines: jdie, jdie_undefined, jalloc, jbuf_add, jbuf_add_t, jtaint_all,
 *          jlist_push, jtype_name,
 *          jequal, jdict_find, jdict_find_str, jdict_set, ju8_step, ju8_len,
 *          ju8_get, jpy_isspace, ju8_offsets, jstr_copy, jfloat_repr,
 *          jto_str_buf, jto_str, jiterate, jarg, jarg_str, jarg_int
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/internal.h"
#include "text/utf8.h"


/* --- errors and memory -------------------------------------------------- */

void
jdie(jrender *r, int line, const char *fmt, ...)
{
    va_list  ap;
    int      n;

    if (r->errlen > 0) {
        n = snprintf(r->err, r->errlen, "line %d: ", line ? line : r->line);
        if (n >= 0 && (size_t) n < r->errlen) {
            va_start(ap, fmt);
            vsnprintf(r->err + n, r->errlen - n, fmt, ap);
            va_end(ap);
        }
    }
    longjmp(r->jmp, 1);
}


void *
jalloc(jrender *r, size_t n)
{
    void  *p;

    if (n > r->lim.max_memory || (p = jarena_alloc(&r->arena, n)) == NULL) {
        jdie(r, 0, "template used more than %zu bytes of memory",
             r->lim.max_memory);
    }
    return p;
}


void
jdie_undefined(jrender *r, int line, jval v)
{
    if (v.u.str.n > 0 && v.u.str.s[0] == '\x01') {
        /* a missing attribute or item: the message was made when it was read */
        jdie(r, line, "%.*s", (int) v.u.str.n - 1, v.u.str.s + 1);
    }
    jdie(r, line, "'%.*s' is undefined", (int) v.u.str.n, v.u.str.s);
}


/* --- buffers ------------------------------------------------------------ */

const uint8_t  jtaint_all[1] = { 1 };


/* room for n more bytes, and for their marks when b is marked: the marks
   of a buffer live right after its cap bytes of text, so that a string
   made from it finds its byte i's mark at s[i + cap] */
static void
jbuf_grow(jrender *r, jbuf *b, size_t n, int marked)
{
    char    *d;
    size_t   cap;

    if (b->n + n > r->lim.max_output) {
        jdie(r, 0, "rendered text longer than %zu bytes", r->lim.max_output);
    }
    if (b->n + n <= b->cap && marked <= b->marked) {
        return;
    }
    cap = b->cap ? b->cap : 256;
    while (cap < b->n + n) {
        cap *= 2;
    }
    if (cap > UINT32_MAX) {
        jdie(r, 0, "rendered text longer than %u bytes", UINT32_MAX);
    }
    marked |= b->marked;
    d = jalloc(r, marked ? 2 * cap : cap);
    if (b->n) {
        memcpy(d, b->s, b->n);
    }
    if (b->marked) {
        memcpy(d + cap, b->s + b->cap, b->n);
    } else if (marked) {
        /* the first marked byte: the ones before it were all unmarked */
        memset(d + cap, 0, b->n);
    }
    b->s = d;
    b->cap = cap;
    b->marked = marked;
}


void
jbuf_add(jrender *r, jbuf *b, const char *s, size_t n)
{
    if (n == 0) {
        return;
    }
    jbuf_grow(r, b, n, 0);
    memcpy(b->s + b->n, s, n);
    if (b->marked) {
        memset(b->s + b->cap + b->n, 0, n);
    }
    b->n += n;
}


void
jbuf_add_t(jrender *r, jbuf *b, const char *s, size_t n, const uint8_t *t)
{
    if (t == NULL || n == 0) {
        jbuf_add(r, b, s, n);
        return;
    }
    jbuf_grow(r, b, n, 1);
    memcpy(b->s + b->n, s, n);
    if (t == JTAINT_ALL) {
        memset(b->s + b->cap + b->n, 1, n);
    } else {
        memmove(b->s + b->cap + b->n, t, n);
    }
    b->n += n;
}


/* --- lists -------------------------------------------------------------- */

/* a growable list: append then read .u.list */
void
jlist_push(jrender *r, jval *list, size_t *cap, jval item)
{
    jlist  *l = list->u.list;
    jval   *items;

    if (l->n == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        items = jalloc(r, *cap * sizeof(jval));
        if (l->n) {
            memcpy(items, l->items, l->n * sizeof(jval));
        }
        l->items = items;
    }
    l->items[l->n++] = item;
}


const char *
jtype_name(jval v)
{
    switch (v.type) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_LOOP: return "LoopContext";
    default: return "function";
    }
}


/* --- equality and dicts ------------------------------------------------- */

static int values_equal_at(jval a, jval b, int depth);


int
jequal(jval a, jval b)
{
    return values_equal_at(a, b, 0);
}


jval *
jdict_find(jdict *d, jval key)
{
    for (size_t i = 0; i < d->n; i++) {
        if (jequal(d->keys[i], key)) {
            return &d->vals[i];
        }
    }
    return NULL;
}


jval *
jdict_find_str(jdict *d, const char *s, size_t n)
{
    return jdict_find(d, mk_str(s, n));
}


void
jdict_set(jrender *r, jdict *d, jval key, jval val)
{
    jval    *slot, *keys, *vals;

    slot = jdict_find(d, key);
    if (slot != NULL) {
        *slot = val;
        return;
    }
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 8;
        keys = jalloc(r, d->cap * sizeof(jval));
        vals = jalloc(r, d->cap * sizeof(jval));
        if (d->n) {
            memcpy(keys, d->keys, d->n * sizeof(jval));
            memcpy(vals, d->vals, d->n * sizeof(jval));
        }
        d->keys = keys;
        d->vals = vals;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = val;
    d->n++;
}


static int
values_equal_at(jval a, jval b, int depth)
{
    if (depth > JINJA_MAX_NEST) {
        return 0;
    }
    if (is_number(a) && is_number(b)) {
        if (a.type != JV_FLOAT && b.type != JV_FLOAT) {
            return num_i(a) == num_i(b);
        }
        return num_f(a) == num_f(b);
    }
    if (a.type != b.type) {
        return 0;
    }
    switch (a.type) {
    case JV_UNDEF:
    case JV_NONE:
        return 1;
    case JV_STR:
        return a.u.str.n == b.u.str.n
               && memcmp(a.u.str.s, b.u.str.s, a.u.str.n) == 0;
    case JV_LIST:
        if (a.u.list->n != b.u.list->n) {
            return 0;
        }
        for (size_t i = 0; i < a.u.list->n; i++) {
            if (!values_equal_at(a.u.list->items[i], b.u.list->items[i],
                                 depth + 1)) {
                return 0;
            }
        }
        return 1;
    case JV_DICT:
        if (a.u.dict->n != b.u.dict->n) {
            return 0;
        }
        for (size_t i = 0; i < a.u.dict->n; i++) {
            jval  *o = jdict_find(b.u.dict, a.u.dict->keys[i]);

            if (o == NULL
                || !values_equal_at(a.u.dict->vals[i], *o, depth + 1))
            {
                return 0;
            }
        }
        return 1;
    case JV_NS:
        return a.u.dict == b.u.dict;
    case JV_MACRO:
        return a.u.macro == b.u.macro;
    case JV_FUNC:
        return a.u.func == b.u.func;
    default:
        return 0;
    }
}


/* --- UTF-8 -------------------------------------------------------------- */

/* the byte length of the code point at s (1 for a broken sequence) */
size_t
ju8_step(const char *s, size_t n)
{
    size_t  k = llm_utf8_len((const unsigned char *) s, n);

    return k > 0 ? k : 1;
}


size_t
ju8_len(const char *s, size_t n)
{
    size_t  i, count;

    for (i = 0, count = 0; i < n; i += ju8_step(s + i, n - i)) {
        count++;
    }
    return count;
}


utf8proc_int32_t
ju8_get(const char *s, size_t n, size_t *len)
{
    uint32_t  cp;
    size_t    k = llm_utf8_decode((const unsigned char *) s, n, &cp);

    *len = k > 0 ? k : 1;       /* a broken sequence: its first byte */
    return (utf8proc_int32_t) cp;
}


/* Python's str.isspace() */
int
jpy_isspace(utf8proc_int32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85
           || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a)
           || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f
           || c == 0x3000;
}


/* byte offsets of every code point, plus one past the end: (count + 1) */
size_t *
ju8_offsets(jrender *r, jval s, size_t *count)
{
    size_t  *off, i, k;

    *count = ju8_len(s.u.str.s, s.u.str.n);
    off = jalloc(r, (*count + 1) * sizeof(size_t));
    for (i = 0, k = 0; i < s.u.str.n;
         i += ju8_step(s.u.str.s + i, s.u.str.n - i))
    {
        off[k++] = i;
    }
    off[k] = s.u.str.n;
    return off;
}


jval
jstr_copy(jrender *r, const char *s, size_t n)
{
    char  *d = jalloc(r, n + 1);

    memcpy(d, s, n);
    d[n] = '\0';
    return mk_str(d, n);
}


/* --- str() and repr() --------------------------------------------------- */

/* Python's repr(float): the shortest text that reads back exactly */
void
jfloat_repr(double f, char *out, size_t outlen)
{
    char    tmp[40], digits[40];
    int     prec, exp, nd, i, k;
    char   *e, *p;

    if (isnan(f)) {
        snprintf(out, outlen, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(out, outlen, f < 0 ? "-inf" : "inf");
        return;
    }
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) {
            break;
        }
    }
    /* tmp is [-]d.ddde[+-]xx: take the digits and the exponent */
    p = tmp;
    k = 0;
    if (*p == '-') {
        p++;
    }
    nd = 0;
    for (; *p && *p != 'e'; p++) {
        if (*p != '.') {
            digits[nd++] = *p;
        }
    }
    while (nd > 1 && digits[nd - 1] == '0') {
        nd--;
    }
    digits[nd] = '\0';
    e = strchr(tmp, 'e');
    exp = e ? atoi(e + 1) : 0;
    char  *o = out;
    size_t left = outlen;
#define PUT(c) do { if (left > 1) { *o++ = (c); left--; } } while (0)
    if (f < 0 || (f == 0 && signbit(f))) {
        PUT('-');
    }
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            PUT('0');
            PUT('.');
            for (i = 0; i < -exp - 1; i++) PUT('0');
            for (i = 0; i < nd; i++) PUT(digits[i]);
        } else {
            for (i = 0; i <= exp; i++) PUT(i < nd ? digits[i] : '0');
            PUT('.');
            if (nd > exp + 1) {
                for (i = exp + 1; i < nd; i++) PUT(digits[i]);
            } else {
                PUT('0');
            }
        }
    } else {
        PUT(digits[0]);
        if (nd > 1) {
            PUT('.');
            for (i = 1; i < nd; i++) PUT(digits[i]);
        }
        PUT('e');
        PUT(exp < 0 ? '-' : '+');
        snprintf(tmp, sizeof(tmp), "%02d", exp < 0 ? -exp : exp);
        for (i = 0; tmp[i]; i++) PUT(tmp[i]);
    }
#undef PUT
    *o = '\0';
    (void) k;
}


static void
str_repr(jrender *r, jbuf *b, jval s)
{
    const char  *p = s.u.str.s;
    size_t       n = s.u.str.n, i, k;
    char         q, esc[8];
    int          has_single = memchr(p, '\'', n) != NULL;
    int          has_double = memchr(p, '"', n) != NULL;
    utf8proc_int32_t c;

    q = has_single && !has_double ? '"' : '\'';
    jbuf_add(r, b, &q, 1);
    for (i = 0; i < n; i += k) {
        c = ju8_get(p + i, n - i, &k);
        if (c == q || c == '\\') {
            esc[0] = '\\';
            esc[1] = p[i];
            jbuf_add_from(r, b, esc, 2, s, i, k);
        } else if (c == '\n') {
            jbuf_add_from(r, b, "\\n", 2, s, i, k);
        } else if (c == '\r') {
            jbuf_add_from(r, b, "\\r", 2, s, i, k);
        } else if (c == '\t') {
            jbuf_add_from(r, b, "\\t", 2, s, i, k);
        } else if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) {
            snprintf(esc, sizeof(esc), "\\x%02x", (unsigned) c);
            jbuf_add_from(r, b, esc, strlen(esc), s, i, k);
        } else {
            jbuf_add_t(r, b, p + i, k, jtaint_at(s, i));
        }
    }
    jbuf_add(r, b, &q, 1);
}


void
jto_str_buf(jrender *r, jbuf *b, jval v, int repr)
{
    char  num[48];

    switch (v.type) {
    case JV_UNDEF:
        if (repr) {
            jbuf_str(r, b, "Undefined");
        }
        return;
    case JV_NONE:
        jbuf_str(r, b, "None");
        return;
    case JV_BOOL:
        jbuf_str(r, b, v.u.b ? "True" : "False");
        return;
    case JV_INT:
        snprintf(num, sizeof(num), "%lld", v.u.i);
        jbuf_str(r, b, num);
        return;
    case JV_FLOAT:
        jfloat_repr(v.u.f, num, sizeof(num));
        jbuf_str(r, b, num);
        return;
    case JV_STR:
        if (repr) {
            str_repr(r, b, v);
        } else {
            jbuf_addv(r, b, v);
        }
        return;
    case JV_LIST:
        if (++r->nest > JINJA_MAX_NEST) {
            jdie(r, 0, "value nested deeper than %d levels", JINJA_MAX_NEST);
        }
        if (v.u.list->is_tuple >= JLIST_DICT_ITEMS) {
            static const char *const views[] = {
                "dict_items([", "dict_keys([", "dict_values(["
            };

            jbuf_str(r, b, views[v.u.list->is_tuple - JLIST_DICT_ITEMS]);
        } else {
            jbuf_add(r, b, v.u.list->is_tuple ? "(" : "[", 1);
        }
        for (size_t i = 0; i < v.u.list->n; i++) {
            if (i) {
                jbuf_add(r, b, ", ", 2);
            }
            jto_str_buf(r, b, v.u.list->items[i], 1);
        }
        if (v.u.list->is_tuple == JLIST_TUPLE && v.u.list->n == 1) {
            jbuf_add(r, b, ",", 1);
        }
        jbuf_str(r, b, v.u.list->is_tuple >= JLIST_DICT_ITEMS ? "])"
                      : v.u.list->is_tuple ? ")" : "]");
        r->nest--;
        return;
    case JV_DICT:
    case JV_NS:
        if (++r->nest > JINJA_MAX_NEST) {
            jdie(r, 0, "value nested deeper than %d levels", JINJA_MAX_NEST);
        }
        if (v.type == JV_NS) {
            jbuf_str(r, b, "<Namespace ");
        }
        jbuf_add(r, b, "{", 1);
        for (size_t i = 0; i < v.u.dict->n; i++) {
            if (i) {
                jbuf_add(r, b, ", ", 2);
            }
            jto_str_buf(r, b, v.u.dict->keys[i], 1);
            jbuf_add(r, b, ": ", 2);
            jto_str_buf(r, b, v.u.dict->vals[i], 1);
        }
        jbuf_add(r, b, "}", 1);
        if (v.type == JV_NS) {
            jbuf_add(r, b, ">", 1);
        }
        r->nest--;
        return;
    case JV_LOOP:
        jbuf_str(r, b, "<LoopContext>");
        return;
    default:
        jbuf_str(r, b, "<function>");
        return;
    }
}


jval
jto_str(jrender *r, jval v)
{
    jbuf  b = { 0 };

    if (v.type == JV_STR) {
        return v;
    }
    jto_str_buf(r, &b, v, 0);
    return mk_buf(&b);
}


/* --- iteration and arguments -------------------------------------------- */

jval
jiterate(jrender *r, jval v, int line)
{
    jval    out;
    size_t  n, *off;

    switch (v.type) {
    case JV_LIST:
        return v;
    case JV_UNDEF:
        return mk_list(r, 0);
    case JV_DICT:
        out = mk_list(r, v.u.dict->n);
        jval_copy(out.u.list->items, v.u.dict->keys, v.u.dict->n);
        return out;
    case JV_STR:
        off = ju8_offsets(r, v, &n);
        out = mk_list(r, n);
        for (size_t i = 0; i < n; i++) {
            out.u.list->items[i] = mk_sub(v, off[i], off[i + 1] - off[i]);
        }
        return out;
    default:
        jdie(r, line, "'%s' object is not iterable", jtype_name(v));
    }
}


jval
jarg(jargs *a, int i, const char *name, jval def)
{
    if (i >= 0 && i < a->npos) {
        return a->pos[i];
    }
    for (int k = 0; name && k < a->nkw; k++) {
        if (strcmp(a->kwname[k], name) == 0) {
            return a->kw[k];
        }
    }
    return def;
}


jval
jarg_str(jrender *r, jargs *a, int i, const char *name, const char *def)
{
    jval  v = jarg(a, i, name, mk_undef(NULL, 0));

    if (v.type == JV_UNDEF) {
        if (def == NULL) {
            jdie(r, a->line, "%s: missing argument '%s'", a->callee, name);
        }
        return mk_cstr(def);
    }
    if (v.type != JV_STR) {
        jdie(r, a->line, "%s: argument '%s' must be a string, not %s",
             a->callee, name, jtype_name(v));
    }
    return v;
}


long long
jarg_int(jrender *r, jargs *a, int i, const char *name, long long def)
{
    jval  v = jarg(a, i, name, mk_int(def));

    if (v.type != JV_INT && v.type != JV_BOOL) {
        if (v.type == JV_NONE) {
            return def;
        }
        jdie(r, a->line, "%s: argument '%s' must be an integer, not %s",
             a->callee, name, jtype_name(v));
    }
    return num_i(v);
}
