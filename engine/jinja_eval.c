/*
 * Jinja subset, part 2: values and the evaluator.
 *
 * Semantics follow jinja2 3.1 under transformers' ImmutableSandboxedEnvironment
 * with Python's rules underneath: str() of values (None, True, 1.5, lists and
 * dicts printed as Python reprs), truthiness, ==, slicing by code point,
 * str methods, and jinja2's Undefined (renders empty, is falsy, iterates as
 * empty, but any arithmetic or attribute access on it is an error). The
 * tojson filter is transformers' json.dumps(ensure_ascii=False, indent=None).
 *
 * Everything a render creates lives in its arena; faults unwind with
 * longjmp to jinja_render_ex(), which frees the arena.
 *
 * defines: jinja_render, jinja_render_ex, jinja_limits_default
 */
#define _GNU_SOURCE     /* memmem */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "jinja_impl.h"


typedef struct frame frame;

struct frame {
    frame  *parent;
    jdict   vars;
};

typedef struct {
    char    *s;
    size_t   n;
    size_t   cap;
} jbuf;

struct jloop {
    jlist   *items;
    size_t   i;
};

typedef struct {
    jarena        arena;
    jinja_limits  lim;
    jmp_buf       jmp;
    char         *err;
    size_t        errlen;
    jbuf         *out;
    long          steps;
    int           depth;
    frame        *root;
    int           loop_ctl;    /* LOOP_BREAK / LOOP_CONTINUE pending */
    int           line;        /* of the statement being run, for messages */
    int           nest;        /* containers being printed or compared */
    int           eval_depth;  /* nested eval() and exec_body() calls */
} jrender;

/* bounds the C stack across macro calls too (about 1.2 KB a level, so
   under 0.5 MB): 64 macros x 200 nested expressions would need megabytes */
#define JINJA_MAX_EVAL_DEPTH  400

/* templates can build nested lists at run time ({% set ns.x = [ns.x] %});
   printing and comparing them recurses, so the nesting is bounded */
#define JINJA_MAX_NEST  256

enum { LOOP_NONE, LOOP_BREAK, LOOP_CONTINUE };

enum {
    JF_RAISE_EXCEPTION = 1, JF_STRFTIME_NOW, JF_NAMESPACE, JF_DICT, JF_RANGE,
};

enum {
    JM_STRIP = 1, JM_LSTRIP, JM_RSTRIP, JM_STARTSWITH, JM_ENDSWITH, JM_SPLIT,
    JM_RSPLIT, JM_REPLACE, JM_UPPER, JM_LOWER, JM_TITLE, JM_CAPITALIZE,
    JM_FIND, JM_COUNT, JM_JOIN, JM_SPLITLINES, JM_ISDIGIT, JM_ISSPACE,
    JM_ISALPHA, JM_ISALNUM, JM_ISUPPER, JM_ISLOWER,
    JM_ITEMS, JM_KEYS, JM_VALUES, JM_GET,
    JM_CYCLE,
};

static const struct { const char *name; int id; } str_methods[] = {
    { "strip", JM_STRIP }, { "lstrip", JM_LSTRIP }, { "rstrip", JM_RSTRIP },
    { "startswith", JM_STARTSWITH }, { "endswith", JM_ENDSWITH },
    { "split", JM_SPLIT }, { "rsplit", JM_RSPLIT }, { "replace", JM_REPLACE },
    { "upper", JM_UPPER }, { "lower", JM_LOWER }, { "title", JM_TITLE },
    { "capitalize", JM_CAPITALIZE }, { "find", JM_FIND }, { "count", JM_COUNT },
    { "join", JM_JOIN }, { "splitlines", JM_SPLITLINES },
    { "isdigit", JM_ISDIGIT }, { "isspace", JM_ISSPACE },
    { "isalpha", JM_ISALPHA }, { "isalnum", JM_ISALNUM },
    { "isupper", JM_ISUPPER }, { "islower", JM_ISLOWER },
    { NULL, 0 }
};

static const struct { const char *name; int id; } dict_methods[] = {
    { "items", JM_ITEMS }, { "keys", JM_KEYS }, { "values", JM_VALUES },
    { "get", JM_GET }, { NULL, 0 }
};

static void exec_body(jrender *r, const jnode *n, frame *f);
static jval eval(jrender *r, const jnode *n, frame *f);
static void to_str_buf(jrender *r, jbuf *b, jval v, int repr);


/* --- errors and memory --------------------------------------------------- */

static void __attribute__((noreturn, format(printf, 3, 4)))
die(jrender *r, int line, const char *fmt, ...)
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


static void *
ralloc(jrender *r, size_t n)
{
    void  *p;

    if (n > r->lim.max_memory || (p = jarena_alloc(&r->arena, n)) == NULL) {
        die(r, 0, "template used more than %zu bytes of memory",
            r->lim.max_memory);
    }
    return p;
}


static void
step(jrender *r, int line)
{
    if (++r->steps > r->lim.max_steps) {
        die(r, line, "template ran more than %ld steps", r->lim.max_steps);
    }
}


/* --- buffers ------------------------------------------------------------ */

static void
buf_add(jrender *r, jbuf *b, const char *s, size_t n)
{
    char    *d;
    size_t   cap;

    if (n == 0) {
        return;
    }
    if (b->n + n > r->lim.max_output) {
        die(r, 0, "rendered text longer than %zu bytes", r->lim.max_output);
    }
    if (b->n + n > b->cap) {
        cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n) {
            cap *= 2;
        }
        d = ralloc(r, cap);
        if (b->n) {
            memcpy(d, b->s, b->n);
        }
        b->s = d;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
}


static void
buf_str(jrender *r, jbuf *b, const char *s)
{
    buf_add(r, b, s, strlen(s));
}


/* --- value constructors -------------------------------------------------- */

static jval
mk_undef(const char *name, size_t n)
{
    jval  v = { .type = JV_UNDEF };

    v.u.str.s = name;
    v.u.str.n = n;
    return v;
}


static jval
mk_none(void)
{
    jval  v = { .type = JV_NONE };
    return v;
}


static jval
mk_bool(int b)
{
    jval  v = { .type = JV_BOOL };
    v.u.b = !!b;
    return v;
}


static jval
mk_int(long long i)
{
    jval  v = { .type = JV_INT };
    v.u.i = i;
    return v;
}


static jval
mk_float(double f)
{
    jval  v = { .type = JV_FLOAT };
    v.u.f = f;
    return v;
}


static jval
mk_str(const char *s, size_t n)
{
    jval  v = { .type = JV_STR };
    v.u.str.s = s;
    v.u.str.n = n;
    return v;
}


static jval
mk_cstr(const char *s)
{
    return mk_str(s, strlen(s));
}


static jval
mk_buf(jbuf *b)
{
    return mk_str(b->s ? b->s : "", b->n);
}


static jval
mk_list(jrender *r, size_t n)
{
    jval  v = { .type = JV_LIST };

    v.u.list = ralloc(r, sizeof(jlist));
    v.u.list->n = n;
    v.u.list->is_tuple = 0;
    v.u.list->items = n ? ralloc(r, n * sizeof(jval)) : NULL;
    return v;
}


static jval
mk_dict(jrender *r, int type)
{
    jval  v = { .type = (uint8_t) type };

    v.u.dict = ralloc(r, sizeof(jdict));
    memset(v.u.dict, 0, sizeof(jdict));
    return v;
}


/* a growable list: append then read .u.list */
static void
list_push(jrender *r, jval *list, size_t *cap, jval item)
{
    jlist  *l = list->u.list;
    jval   *items;

    if (l->n == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        items = ralloc(r, *cap * sizeof(jval));
        if (l->n) {
            memcpy(items, l->items, l->n * sizeof(jval));
        }
        l->items = items;
    }
    l->items[l->n++] = item;
}


static const char *
type_name(jval v)
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


/* --- equality, truth, dicts ----------------------------------------------- */

static int
is_number(jval v)
{
    return v.type == JV_INT || v.type == JV_FLOAT || v.type == JV_BOOL;
}


static double
num_f(jval v)
{
    return v.type == JV_FLOAT ? v.u.f : v.type == JV_INT ? (double) v.u.i
                                                         : (double) v.u.b;
}


static long long
num_i(jval v)
{
    return v.type == JV_INT ? v.u.i : v.u.b;
}


static int values_equal_at(jval a, jval b, int depth);


static int
str_eq(jval a, const char *s)
{
    size_t  n = strlen(s);

    return a.type == JV_STR && a.u.str.n == n && memcmp(a.u.str.s, s, n) == 0;
}

static int
values_equal(jval a, jval b)
{
    return values_equal_at(a, b, 0);
}


static jval *
dict_find(jdict *d, jval key)
{
    for (size_t i = 0; i < d->n; i++) {
        if (values_equal(d->keys[i], key)) {
            return &d->vals[i];
        }
    }
    return NULL;
}


static jval *
dict_find_str(jdict *d, const char *s, size_t n)
{
    return dict_find(d, mk_str(s, n));
}


static void
dict_set(jrender *r, jdict *d, jval key, jval val)
{
    jval    *slot, *keys, *vals;

    slot = dict_find(d, key);
    if (slot != NULL) {
        *slot = val;
        return;
    }
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 8;
        keys = ralloc(r, d->cap * sizeof(jval));
        vals = ralloc(r, d->cap * sizeof(jval));
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
            jval  *o = dict_find(b.u.dict, a.u.dict->keys[i]);

            if (o == NULL || !values_equal_at(a.u.dict->vals[i], *o, depth + 1)) {
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


static int
truthy(jval v)
{
    switch (v.type) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.str.n != 0;
    case JV_LIST: return v.u.list->n != 0;
    case JV_DICT: return v.u.dict->n != 0;
    default: return 1;
    }
}


/* --- UTF-8 --------------------------------------------------------------- */

/* the byte length of the code point at s (1 for a broken sequence) */
static size_t
u8_step(const char *s, size_t n)
{
    utf8proc_int32_t  cp;
    utf8proc_ssize_t  k;

    k = utf8proc_iterate((const utf8proc_uint8_t *) s, (utf8proc_ssize_t) n,
                         &cp);
    return k > 0 ? (size_t) k : 1;
}


static size_t
u8_len(const char *s, size_t n)
{
    size_t  i, count;

    for (i = 0, count = 0; i < n; i += u8_step(s + i, n - i)) {
        count++;
    }
    return count;
}


static utf8proc_int32_t
u8_get(const char *s, size_t n, size_t *len)
{
    utf8proc_int32_t  cp;
    utf8proc_ssize_t  k;

    k = utf8proc_iterate((const utf8proc_uint8_t *) s, (utf8proc_ssize_t) n,
                         &cp);
    if (k <= 0) {
        *len = 1;
        return (unsigned char) s[0];
    }
    *len = (size_t) k;
    return cp;
}


/* Python's str.isspace() */
static int
py_isspace(utf8proc_int32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85
           || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a)
           || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f
           || c == 0x3000;
}


/* byte offsets of every code point, plus one past the end: (count + 1) */
static size_t *
u8_offsets(jrender *r, jval s, size_t *count)
{
    size_t  *off, i, k;

    *count = u8_len(s.u.str.s, s.u.str.n);
    off = ralloc(r, (*count + 1) * sizeof(size_t));
    for (i = 0, k = 0; i < s.u.str.n; i += u8_step(s.u.str.s + i, s.u.str.n - i)) {
        off[k++] = i;
    }
    off[k] = s.u.str.n;
    return off;
}


static jval
str_copy(jrender *r, const char *s, size_t n)
{
    char  *d = ralloc(r, n + 1);

    memcpy(d, s, n);
    d[n] = '\0';
    return mk_str(d, n);
}


/* upper / lower / title / capitalize, by code point */
enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE };

static jval
str_case(jrender *r, jval s, int mode)
{
    jbuf              b = { 0 };
    utf8proc_int32_t  c;
    utf8proc_uint8_t  enc[4];
    size_t            i, k;
    int               prev_cased = 0, first = 1;

    for (i = 0; i < s.u.str.n; i += k) {
        c = u8_get(s.u.str.s + i, s.u.str.n - i, &k);
        switch (mode) {
        case CASE_UPPER: c = utf8proc_toupper(c); break;
        case CASE_LOWER: c = utf8proc_tolower(c); break;
        case CASE_CAPITALIZE:
            c = first ? utf8proc_totitle(c) : utf8proc_tolower(c);
            break;
        default: {
            int  cased = utf8proc_toupper(c) != c || utf8proc_tolower(c) != c;

            c = prev_cased ? utf8proc_tolower(c) : utf8proc_totitle(c);
            prev_cased = cased;
        }
        }
        first = 0;
        buf_add(r, &b, (char *) enc, utf8proc_encode_char(c, enc));
    }
    return mk_buf(&b);
}


/* --- str() and repr() ---------------------------------------------------- */

/* Python's repr(float): the shortest text that reads back exactly */
static void
float_repr(double f, char *out, size_t outlen)
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
    buf_add(r, b, &q, 1);
    for (i = 0; i < n; i += k) {
        c = u8_get(p + i, n - i, &k);
        if (c == q || c == '\\') {
            buf_add(r, b, "\\", 1);
            buf_add(r, b, p + i, 1);
        } else if (c == '\n') {
            buf_str(r, b, "\\n");
        } else if (c == '\r') {
            buf_str(r, b, "\\r");
        } else if (c == '\t') {
            buf_str(r, b, "\\t");
        } else if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) {
            snprintf(esc, sizeof(esc), "\\x%02x", (unsigned) c);
            buf_str(r, b, esc);
        } else {
            buf_add(r, b, p + i, k);
        }
    }
    buf_add(r, b, &q, 1);
}


static void
to_str_buf(jrender *r, jbuf *b, jval v, int repr)
{
    char  num[48];

    switch (v.type) {
    case JV_UNDEF:
        if (repr) {
            buf_str(r, b, "Undefined");
        }
        return;
    case JV_NONE:
        buf_str(r, b, "None");
        return;
    case JV_BOOL:
        buf_str(r, b, v.u.b ? "True" : "False");
        return;
    case JV_INT:
        snprintf(num, sizeof(num), "%lld", v.u.i);
        buf_str(r, b, num);
        return;
    case JV_FLOAT:
        float_repr(v.u.f, num, sizeof(num));
        buf_str(r, b, num);
        return;
    case JV_STR:
        if (repr) {
            str_repr(r, b, v);
        } else {
            buf_add(r, b, v.u.str.s, v.u.str.n);
        }
        return;
    case JV_LIST:
        if (++r->nest > JINJA_MAX_NEST) {
            die(r, 0, "value nested deeper than %d levels", JINJA_MAX_NEST);
        }
        if (v.u.list->is_tuple >= JLIST_DICT_ITEMS) {
            static const char *const views[] = {
                "dict_items([", "dict_keys([", "dict_values(["
            };

            buf_str(r, b, views[v.u.list->is_tuple - JLIST_DICT_ITEMS]);
        } else {
            buf_add(r, b, v.u.list->is_tuple ? "(" : "[", 1);
        }
        for (size_t i = 0; i < v.u.list->n; i++) {
            if (i) {
                buf_add(r, b, ", ", 2);
            }
            to_str_buf(r, b, v.u.list->items[i], 1);
        }
        if (v.u.list->is_tuple == JLIST_TUPLE && v.u.list->n == 1) {
            buf_add(r, b, ",", 1);
        }
        buf_str(r, b, v.u.list->is_tuple >= JLIST_DICT_ITEMS ? "])"
                      : v.u.list->is_tuple ? ")" : "]");
        r->nest--;
        return;
    case JV_DICT:
    case JV_NS:
        if (++r->nest > JINJA_MAX_NEST) {
            die(r, 0, "value nested deeper than %d levels", JINJA_MAX_NEST);
        }
        if (v.type == JV_NS) {
            buf_str(r, b, "<Namespace ");
        }
        buf_add(r, b, "{", 1);
        for (size_t i = 0; i < v.u.dict->n; i++) {
            if (i) {
                buf_add(r, b, ", ", 2);
            }
            to_str_buf(r, b, v.u.dict->keys[i], 1);
            buf_add(r, b, ": ", 2);
            to_str_buf(r, b, v.u.dict->vals[i], 1);
        }
        buf_add(r, b, "}", 1);
        if (v.type == JV_NS) {
            buf_add(r, b, ">", 1);
        }
        r->nest--;
        return;
    case JV_LOOP:
        buf_str(r, b, "<LoopContext>");
        return;
    default:
        buf_str(r, b, "<function>");
        return;
    }
}


static jval
to_str(jrender *r, jval v)
{
    jbuf  b = { 0 };

    if (v.type == JV_STR) {
        return v;
    }
    to_str_buf(r, &b, v, 0);
    return mk_buf(&b);
}


/* --- JSON (Python's json.dumps) ----------------------------------------- */

typedef struct {
    int          indent;       /* < 0: none */
    int          ensure_ascii;
    int          sort_keys;
    jval         item_sep, key_sep;
} json_opts;


static void
json_str(jrender *r, jbuf *b, jval s, int ensure_ascii)
{
    const char  *p = s.u.str.s;
    size_t       i, k, n = s.u.str.n;
    char         esc[16];
    utf8proc_int32_t c;

    buf_add(r, b, "\"", 1);
    for (i = 0; i < n; i += k) {
        c = u8_get(p + i, n - i, &k);
        switch (c) {
        case '"': buf_str(r, b, "\\\""); continue;
        case '\\': buf_str(r, b, "\\\\"); continue;
        case '\n': buf_str(r, b, "\\n"); continue;
        case '\r': buf_str(r, b, "\\r"); continue;
        case '\t': buf_str(r, b, "\\t"); continue;
        case '\b': buf_str(r, b, "\\b"); continue;
        case '\f': buf_str(r, b, "\\f"); continue;
        }
        if (c < 0x20 || (ensure_ascii && c > 0x7e)) {
            if (c >= 0x10000) {
                snprintf(esc, sizeof(esc), "\\u%04x\\u%04x",
                         0xd800 + ((c - 0x10000) >> 10),
                         0xdc00 + ((c - 0x10000) & 0x3ff));
            } else {
                snprintf(esc, sizeof(esc), "\\u%04x", (unsigned) c);
            }
            buf_str(r, b, esc);
            continue;
        }
        buf_add(r, b, p + i, k);
    }
    buf_add(r, b, "\"", 1);
}


static void
json_newline(jrender *r, jbuf *b, const json_opts *o, int level)
{
    buf_add(r, b, "\n", 1);
    for (int i = 0; i < o->indent * level; i++) {
        buf_add(r, b, " ", 1);
    }
}


static int compare_values(jrender *r, jval a, jval b, int line);

static void
json_dump(jrender *r, jbuf *b, jval v, const json_opts *o, int level)
{
    char    num[48];
    size_t  i, n, *order;

    if (level > r->lim.max_depth * 4) {
        die(r, 0, "tojson: value nested too deeply");
    }
    switch (v.type) {
    case JV_NONE: buf_str(r, b, "null"); return;
    case JV_BOOL: buf_str(r, b, v.u.b ? "true" : "false"); return;
    case JV_INT: to_str_buf(r, b, v, 0); return;
    case JV_FLOAT:
        if (isnan(v.u.f)) buf_str(r, b, "NaN");
        else if (isinf(v.u.f)) buf_str(r, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else {
            float_repr(v.u.f, num, sizeof(num));
            buf_str(r, b, num);
        }
        return;
    case JV_STR: json_str(r, b, v, o->ensure_ascii); return;
    case JV_LIST:
        if (v.u.list->is_tuple >= JLIST_DICT_ITEMS) {
            die(r, 0, "Object of type %s is not JSON serializable",
                v.u.list->is_tuple == JLIST_DICT_ITEMS ? "dict_items"
                : v.u.list->is_tuple == JLIST_DICT_KEYS ? "dict_keys"
                : "dict_values");
        }
        if (v.u.list->n == 0) {
            buf_str(r, b, "[]");
            return;
        }
        buf_add(r, b, "[", 1);
        for (i = 0; i < v.u.list->n; i++) {
            if (i) to_str_buf(r, b, o->item_sep, 0);
            if (o->indent >= 0) json_newline(r, b, o, level + 1);
            json_dump(r, b, v.u.list->items[i], o, level + 1);
        }
        if (o->indent >= 0) json_newline(r, b, o, level);
        buf_add(r, b, "]", 1);
        return;
    case JV_DICT:
        n = v.u.dict->n;
        if (n == 0) {
            buf_str(r, b, "{}");
            return;
        }
        order = ralloc(r, n * sizeof(size_t));
        for (i = 0; i < n; i++) {
            order[i] = i;
        }
        if (o->sort_keys) {
            /* insertion sort: dicts in templates are small */
            for (i = 1; i < n; i++) {
                size_t  k = order[i], j = i;

                while (j > 0 && compare_values(r, v.u.dict->keys[order[j - 1]],
                                               v.u.dict->keys[k], 0) > 0) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = k;
            }
        }
        buf_add(r, b, "{", 1);
        for (i = 0; i < n; i++) {
            jval  key = v.u.dict->keys[order[i]];

            if (i) to_str_buf(r, b, o->item_sep, 0);
            if (o->indent >= 0) json_newline(r, b, o, level + 1);
            if (key.type == JV_STR) {
                json_str(r, b, key, o->ensure_ascii);
            } else if (key.type == JV_NONE || key.type == JV_BOOL
                       || is_number(key)) {
                buf_add(r, b, "\"", 1);
                json_dump(r, b, key, o, level + 1);
                buf_add(r, b, "\"", 1);
            } else {
                die(r, 0, "tojson: keys must be str, int, float, bool or None");
            }
            to_str_buf(r, b, o->key_sep, 0);
            json_dump(r, b, v.u.dict->vals[order[i]], o, level + 1);
        }
        if (o->indent >= 0) json_newline(r, b, o, level);
        buf_add(r, b, "}", 1);
        return;
    default:
        die(r, 0, "Object of type %s is not JSON serializable", type_name(v));
    }
}


/* --- cJSON to values ---------------------------------------------------- */

static jval
from_cjson(jrender *r, const cJSON *j, int depth)
{
    jval          v, key;
    const cJSON  *c;
    size_t        n, i;

    if (depth > 200) {
        die(r, 1, "context nested too deeply");
    }
    if (cJSON_IsNull(j)) {
        return mk_none();
    }
    if (cJSON_IsBool(j)) {
        return mk_bool(cJSON_IsTrue(j));
    }
    if (cJSON_IsNumber(j)) {
        /* JSON has one number type; Python's json reads integers as int */
        double  d = j->valuedouble;

        if (d == floor(d) && fabs(d) < 9007199254740992.0) {
            return mk_int((long long) d);
        }
        return mk_float(d);
    }
    if (cJSON_IsString(j)) {
        return mk_str(j->valuestring, strlen(j->valuestring));
    }
    if (cJSON_IsArray(j)) {
        n = (size_t) cJSON_GetArraySize(j);
        v = mk_list(r, n);
        i = 0;
        cJSON_ArrayForEach(c, j) {
            v.u.list->items[i++] = from_cjson(r, c, depth + 1);
        }
        return v;
    }
    if (cJSON_IsObject(j)) {
        v = mk_dict(r, JV_DICT);
        cJSON_ArrayForEach(c, j) {
            key = mk_cstr(c->string ? c->string : "");
            dict_set(r, v.u.dict, key, from_cjson(r, c, depth + 1));
        }
        return v;
    }
    return mk_undef("", 0);
}


/* --- variables ------------------------------------------------------------ */

static jval
lookup(jrender *r, frame *f, const char *name, size_t n)
{
    static const struct { const char *name; int id; } globals[] = {
        { "raise_exception", JF_RAISE_EXCEPTION },
        { "strftime_now", JF_STRFTIME_NOW },
        { "namespace", JF_NAMESPACE },
        { "dict", JF_DICT },
        { "range", JF_RANGE },
    };
    jval  *v;

    (void) r;
    for (; f != NULL; f = f->parent) {
        v = dict_find_str(&f->vars, name, n);
        if (v != NULL) {
            return *v;
        }
    }
    for (size_t i = 0; i < sizeof(globals) / sizeof(globals[0]); i++) {
        if (strlen(globals[i].name) == n && memcmp(globals[i].name, name, n) == 0) {
            jval  g = { .type = JV_FUNC };

            g.u.func = globals[i].id;
            return g;
        }
    }
    return mk_undef(name, n);
}


static void
assign(jrender *r, frame *f, const jnode *target, jval v)
{
    jval  *ns;

    if (target->kind == JN_NAME) {
        dict_set(r, &f->vars, mk_str(target->str, target->len), v);
        return;
    }
    if (target->kind == JN_GETATTR) {
        jval  obj = lookup(r, f, target->a->str, target->a->len);

        ns = &obj;
        if (ns->type != JV_NS) {
            die(r, target->line, "can only assign attributes of a namespace, "
                "'%s' is %s", target->a->str, type_name(obj));
        }
        dict_set(r, ns->u.dict, mk_str(target->str, target->len), v);
        return;
    }
    /* a, b = pair */
    if (v.type != JV_LIST || (int) v.u.list->n != target->nkids) {
        die(r, target->line, "cannot unpack %s into %d names", type_name(v),
            target->nkids);
    }
    for (int i = 0; i < target->nkids; i++) {
        assign(r, f, target->kids[i], v.u.list->items[i]);
    }
}


/* --- iteration, attributes, items --------------------------------------- */

static jval
iterate(jrender *r, jval v, int line)
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
        memcpy(out.u.list->items, v.u.dict->keys, v.u.dict->n * sizeof(jval));
        return out;
    case JV_STR:
        off = u8_offsets(r, v, &n);
        out = mk_list(r, n);
        for (size_t i = 0; i < n; i++) {
            out.u.list->items[i] = mk_str(v.u.str.s + off[i], off[i + 1] - off[i]);
        }
        return out;
    default:
        die(r, line, "'%s' object is not iterable", type_name(v));
    }
}


static void __attribute__((noreturn))
die_undefined(jrender *r, int line, jval v)
{
    if (v.u.str.n > 0 && v.u.str.s[0] == '\x01') {
        /* a missing attribute or item: the message was made when it was read */
        die(r, line, "%.*s", (int) v.u.str.n - 1, v.u.str.s + 1);
    }
    die(r, line, "'%.*s' is undefined", (int) v.u.str.n, v.u.str.s);
}


/* an Undefined that remembers "'dict object' has no attribute 'x'" */
static jval
undef_attr(jrender *r, jval obj, const char *what, const char *name, size_t n)
{
    jbuf  b = { 0 };
    char  c = '\x01';

    buf_add(r, &b, &c, 1);
    buf_str(r, &b, "'");
    buf_str(r, &b, obj.type == JV_DICT ? "dict" : type_name(obj));
    buf_str(r, &b, " object' has no ");
    buf_str(r, &b, what);
    buf_str(r, &b, " '");
    buf_add(r, &b, name, n);
    buf_str(r, &b, "'");
    return mk_undef(b.s, b.n);
}


static jval
method(jrender *r, jval self, int id)
{
    jval  m = { .type = JV_METHOD };

    m.u.method = ralloc(r, sizeof(jmethod));
    m.u.method->self = self;
    m.u.method->id = id;
    return m;
}


static int
method_id(jval obj, const char *name, size_t n)
{
    if (obj.type == JV_STR) {
        for (int i = 0; str_methods[i].name; i++) {
            if (strlen(str_methods[i].name) == n
                && memcmp(str_methods[i].name, name, n) == 0) {
                return str_methods[i].id;
            }
        }
    }
    if (obj.type == JV_DICT) {
        for (int i = 0; dict_methods[i].name; i++) {
            if (strlen(dict_methods[i].name) == n
                && memcmp(dict_methods[i].name, name, n) == 0) {
                return dict_methods[i].id;
            }
        }
    }
    return 0;
}


static jval
loop_attr(jrender *r, jval obj, const char *name, size_t n)
{
    jloop  *l = obj.u.loop;
    size_t  len = l->items->n;

#define IS(s) (n == strlen(s) && memcmp(name, s, n) == 0)
    if (IS("index")) return mk_int((long long) l->i + 1);
    if (IS("index0")) return mk_int((long long) l->i);
    if (IS("revindex")) return mk_int((long long) (len - l->i));
    if (IS("revindex0")) return mk_int((long long) (len - l->i - 1));
    if (IS("first")) return mk_bool(l->i == 0);
    if (IS("last")) return mk_bool(l->i + 1 == len);
    if (IS("length")) return mk_int((long long) len);
    if (IS("depth")) return mk_int(1);
    if (IS("depth0")) return mk_int(0);
    if (IS("previtem")) {
        return l->i > 0 ? l->items->items[l->i - 1]
                        : mk_undef("there is no previous item", 25);
    }
    if (IS("nextitem")) {
        return l->i + 1 < len ? l->items->items[l->i + 1]
                              : mk_undef("there is no next item", 21);
    }
    if (IS("cycle")) return method(r, obj, JM_CYCLE);
#undef IS
    return undef_attr(r, obj, "attribute", name, n);
}


/* obj.name: attributes (methods) first, then items, as jinja2's getattr */
static jval
get_attr(jrender *r, jval obj, const char *name, size_t n, int line)
{
    jval  *v;
    int    id;

    switch (obj.type) {
    case JV_UNDEF:
        die_undefined(r, line, obj);
    case JV_LOOP:
        return loop_attr(r, obj, name, n);
    case JV_NS:
        v = dict_find_str(obj.u.dict, name, n);
        return v ? *v : undef_attr(r, obj, "attribute", name, n);
    case JV_DICT:
        if ((id = method_id(obj, name, n)) != 0) {
            return method(r, obj, id);
        }
        v = dict_find_str(obj.u.dict, name, n);
        return v ? *v : undef_attr(r, obj, "attribute", name, n);
    case JV_STR:
        if ((id = method_id(obj, name, n)) != 0) {
            return method(r, obj, id);
        }
        /* fall through */
    default:
        return undef_attr(r, obj, "attribute", name, n);
    }
}


static jval
get_item(jrender *r, jval obj, jval key, int line)
{
    jval       *v;
    long long   i, len;
    size_t      count, *off;

    switch (obj.type) {
    case JV_UNDEF:
        die_undefined(r, line, obj);
    case JV_DICT:
    case JV_NS:
        v = dict_find(obj.u.dict, key);
        if (v != NULL) {
            return *v;
        }
        if (key.type == JV_STR) {
            return get_attr(r, obj, key.u.str.s, key.u.str.n, line);
        }
        return undef_attr(r, obj, "element", "?", 1);
    case JV_LIST:
    case JV_STR:
        if (key.type == JV_STR) {
            return get_attr(r, obj, key.u.str.s, key.u.str.n, line);
        }
        if (key.type != JV_INT && key.type != JV_BOOL) {
            die(r, line, "%s indices must be integers, not %s",
                type_name(obj), type_name(key));
        }
        i = num_i(key);
        if (obj.type == JV_LIST) {
            len = (long long) obj.u.list->n;
            if (i < 0) i += len;
            if (i < 0 || i >= len) {
                return mk_undef("\x01list index out of range", 25);
            }
            return obj.u.list->items[i];
        }
        off = u8_offsets(r, obj, &count);
        len = (long long) count;
        if (i < 0) i += len;
        if (i < 0 || i >= len) {
            return mk_undef("\x01string index out of range", 27);
        }
        return mk_str(obj.u.str.s + off[i], off[i + 1] - off[i]);
    case JV_LOOP:
        if (key.type == JV_STR) {
            return loop_attr(r, obj, key.u.str.s, key.u.str.n);
        }
        /* fall through */
    default:
        return undef_attr(r, obj, "element", "?", 1);
    }
}


/* Python's slice.indices() */
static void
slice_indices(long long len, jval *sv, long long *start, long long *stop,
    long long *stepv, jrender *r, int line)
{
    long long  st;

    for (int i = 0; i < 3; i++) {
        if (sv[i].type != JV_NONE && sv[i].type != JV_UNDEF
            && sv[i].type != JV_INT && sv[i].type != JV_BOOL) {
            die(r, line, "slice indices must be integers or None");
        }
    }
    st = sv[2].type == JV_INT || sv[2].type == JV_BOOL ? num_i(sv[2]) : 1;
    if (st == 0) {
        die(r, line, "slice step cannot be zero");
    }
    *stepv = st;
    if (sv[0].type == JV_INT || sv[0].type == JV_BOOL) {
        *start = num_i(sv[0]);
        if (*start < 0) {
            *start += len;
            if (*start < 0) *start = st < 0 ? -1 : 0;
        } else if (*start >= len) {
            *start = st < 0 ? len - 1 : len;
        }
    } else {
        *start = st < 0 ? len - 1 : 0;
    }
    if (sv[1].type == JV_INT || sv[1].type == JV_BOOL) {
        *stop = num_i(sv[1]);
        if (*stop < 0) {
            *stop += len;
            if (*stop < 0) *stop = st < 0 ? -1 : 0;
        } else if (*stop >= len) {
            *stop = st < 0 ? len - 1 : len;
        }
    } else {
        *stop = st < 0 ? -1 : len;
    }
}


static jval
slice(jrender *r, jval obj, jval *sv, int line)
{
    long long  start, stop, st, i, len;
    size_t     count, *off = NULL, cap = 0;
    jval       out;
    jbuf       b = { 0 };

    if (obj.type == JV_UNDEF) {
        die_undefined(r, line, obj);
    }
    if (obj.type == JV_LIST) {
        len = (long long) obj.u.list->n;
    } else if (obj.type == JV_STR) {
        off = u8_offsets(r, obj, &count);
        len = (long long) count;
    } else {
        die(r, line, "'%s' object is not subscriptable", type_name(obj));
    }
    slice_indices(len, sv, &start, &stop, &st, r, line);
    out = mk_list(r, 0);
    for (i = start; st > 0 ? i < stop : i > stop; i += st) {
        if (obj.type == JV_LIST) {
            list_push(r, &out, &cap, obj.u.list->items[i]);
        } else {
            buf_add(r, &b, obj.u.str.s + off[i], off[i + 1] - off[i]);
        }
    }
    return obj.type == JV_LIST ? out : mk_buf(&b);
}


/* --- operators ---------------------------------------------------------- */

static int
compare_values(jrender *r, jval a, jval b, int line)
{
    if (is_number(a) && is_number(b)) {
        if (a.type != JV_FLOAT && b.type != JV_FLOAT) {
            return num_i(a) < num_i(b) ? -1 : num_i(a) > num_i(b);
        }
        return num_f(a) < num_f(b) ? -1 : num_f(a) > num_f(b);
    }
    if (a.type == JV_STR && b.type == JV_STR) {
        size_t  n = a.u.str.n < b.u.str.n ? a.u.str.n : b.u.str.n;
        int     c = memcmp(a.u.str.s, b.u.str.s, n);

        /* UTF-8 byte order is code point order, as Python compares */
        if (c != 0) return c < 0 ? -1 : 1;
        return a.u.str.n < b.u.str.n ? -1 : a.u.str.n > b.u.str.n;
    }
    if (a.type == JV_LIST && b.type == JV_LIST) {
        size_t  i;
        int     c;

        if (++r->nest > JINJA_MAX_NEST) {
            die(r, line, "value nested deeper than %d levels", JINJA_MAX_NEST);
        }
        for (i = 0; i < a.u.list->n && i < b.u.list->n; i++) {
            if (!values_equal(a.u.list->items[i], b.u.list->items[i])) {
                c = compare_values(r, a.u.list->items[i], b.u.list->items[i],
                                   line);
                r->nest--;
                return c;
            }
        }
        r->nest--;
        return a.u.list->n < b.u.list->n ? -1 : a.u.list->n > b.u.list->n;
    }
    if (a.type == JV_UNDEF) die_undefined(r, line, a);
    if (b.type == JV_UNDEF) die_undefined(r, line, b);
    die(r, line, "'<' not supported between instances of '%s' and '%s'",
        type_name(a), type_name(b));
}


static int
contains(jrender *r, jval hay, jval needle, int line)
{
    switch (hay.type) {
    case JV_STR:
        if (needle.type != JV_STR) {
            die(r, line, "'in <string>' requires string as left operand, "
                "not %s", type_name(needle));
        }
        if (needle.u.str.n == 0) {
            return 1;
        }
        return memmem(hay.u.str.s, hay.u.str.n, needle.u.str.s,
                      needle.u.str.n) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < hay.u.list->n; i++) {
            if (values_equal(hay.u.list->items[i], needle)) {
                return 1;
            }
        }
        return 0;
    case JV_DICT:
        if (needle.type == JV_LIST || needle.type == JV_DICT) {
            die(r, line, "unhashable type: '%s'", type_name(needle));
        }
        return dict_find(hay.u.dict, needle) != NULL;
    case JV_UNDEF:
        return 0;
    default:
        die(r, line, "argument of type '%s' is not iterable", type_name(hay));
    }
}


static jval
repeat(jrender *r, jval seq, long long times)
{
    jbuf    b = { 0 };
    jval    out;
    size_t  cap = 0, unit;

    if (times < 0) times = 0;
    unit = seq.type == JV_STR ? seq.u.str.n : seq.u.list->n * sizeof(jval);
    if (unit && (unsigned long long) times > r->lim.max_memory / unit) {
        die(r, 0, "template used more than %zu bytes of memory",
            r->lim.max_memory);
    }
    if (seq.type == JV_STR) {
        for (long long i = 0; i < times; i++) {
            buf_add(r, &b, seq.u.str.s, seq.u.str.n);
        }
        return mk_buf(&b);
    }
    out = mk_list(r, 0);
    for (long long i = 0; i < times; i++) {
        for (size_t k = 0; k < seq.u.list->n; k++) {
            list_push(r, &out, &cap, seq.u.list->items[k]);
        }
    }
    return out;
}


static jval
arith(jrender *r, int op, jval a, jval b, int line)
{
    long long  x, y, z;
    double     fx, fy;

    if (a.type == JV_UNDEF) die_undefined(r, line, a);
    if (b.type == JV_UNDEF) die_undefined(r, line, b);
    if (op == JOP_ADD && a.type == JV_STR && b.type == JV_STR) {
        jbuf  buf = { 0 };

        buf_add(r, &buf, a.u.str.s, a.u.str.n);
        buf_add(r, &buf, b.u.str.s, b.u.str.n);
        return mk_buf(&buf);
    }
    if (op == JOP_ADD && a.type == JV_LIST && b.type == JV_LIST) {
        jval  out = mk_list(r, a.u.list->n + b.u.list->n);

        memcpy(out.u.list->items, a.u.list->items, a.u.list->n * sizeof(jval));
        memcpy(out.u.list->items + a.u.list->n, b.u.list->items,
               b.u.list->n * sizeof(jval));
        return out;
    }
    if (op == JOP_MUL && (a.type == JV_STR || a.type == JV_LIST)
        && (b.type == JV_INT || b.type == JV_BOOL)) {
        return repeat(r, a, num_i(b));
    }
    if (op == JOP_MUL && (b.type == JV_STR || b.type == JV_LIST)
        && (a.type == JV_INT || a.type == JV_BOOL)) {
        return repeat(r, b, num_i(a));
    }
    if (!is_number(a) || !is_number(b)) {
        static const char *names[] = { "", "+", "-", "*", "/", "//", "%", "**" };

        die(r, line, "unsupported operand type(s) for %s: '%s' and '%s'",
            names[op], type_name(a), type_name(b));
    }
    if (a.type != JV_FLOAT && b.type != JV_FLOAT && op != JOP_DIV) {
        x = num_i(a);
        y = num_i(b);
        switch (op) {
        case JOP_ADD:
            if (__builtin_add_overflow(x, y, &z)) goto overflow;
            return mk_int(z);
        case JOP_SUB:
            if (__builtin_sub_overflow(x, y, &z)) goto overflow;
            return mk_int(z);
        case JOP_MUL:
            if (__builtin_mul_overflow(x, y, &z)) goto overflow;
            return mk_int(z);
        case JOP_FLOORDIV:
        case JOP_MOD:
            if (y == 0) {
                die(r, line, "integer division or modulo by zero");
            }
            if (x == LLONG_MIN && y == -1) goto overflow;
            z = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) z--;
            return op == JOP_FLOORDIV ? mk_int(z) : mk_int(x - z * y);
        case JOP_POW:
            if (y < 0) {
                return mk_float(pow((double) x, (double) y));
            }
            z = 1;
            for (long long i = 0; i < y; i++) {
                if (__builtin_mul_overflow(z, x, &z)) goto overflow;
                if (z == 0 || z == 1) break;
            }
            if (z == 1 && x == -1 && (y & 1)) z = -1;
            return mk_int(z);
        }
    }
    fx = num_f(a);
    fy = num_f(b);
    switch (op) {
    case JOP_ADD: return mk_float(fx + fy);
    case JOP_SUB: return mk_float(fx - fy);
    case JOP_MUL: return mk_float(fx * fy);
    case JOP_DIV:
        if (fy == 0) die(r, line, "division by zero");
        return mk_float(fx / fy);
    case JOP_FLOORDIV:
        if (fy == 0) die(r, line, "float floor division by zero");
        return mk_float(floor(fx / fy));
    case JOP_MOD:
        if (fy == 0) die(r, line, "float modulo");
        {
            double  m = fmod(fx, fy);

            if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
            return mk_float(m);
        }
    case JOP_POW: return mk_float(pow(fx, fy));
    }
overflow:
    die(r, line, "integer overflow");
}


/* --- arguments ------------------------------------------------------------ */

#define MAX_ARGS  16

typedef struct {
    jval         pos[MAX_ARGS];
    int          npos;
    const char  *kwname[MAX_ARGS];
    jval         kw[MAX_ARGS];
    int          nkw;
    const char  *callee;
    int          line;
} jargs;


static void
eval_args(jrender *r, const jnode *n, frame *f, jargs *a, const char *callee)
{
    memset(a, 0, sizeof(*a));
    a->callee = callee;
    a->line = n->line;
    for (int i = 0; i < n->nkids; i++) {
        const jnode  *k = n->kids[i];

        if (a->npos + a->nkw >= MAX_ARGS) {
            die(r, n->line, "%s: too many arguments", callee);
        }
        if (k->kind == JN_KWARG) {
            a->kwname[a->nkw] = k->str;
            a->kw[a->nkw++] = eval(r, k->a, f);
        } else {
            a->pos[a->npos++] = eval(r, k, f);
        }
    }
}


/* argument i (positional) or name (keyword); def when absent */
static jval
arg(jargs *a, int i, const char *name, jval def)
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


static jval
arg_str(jrender *r, jargs *a, int i, const char *name, const char *def)
{
    jval  v = arg(a, i, name, mk_undef(NULL, 0));

    if (v.type == JV_UNDEF) {
        if (def == NULL) {
            die(r, a->line, "%s: missing argument '%s'", a->callee, name);
        }
        return mk_cstr(def);
    }
    if (v.type != JV_STR) {
        die(r, a->line, "%s: argument '%s' must be a string, not %s",
            a->callee, name, type_name(v));
    }
    return v;
}


static long long
arg_int(jrender *r, jargs *a, int i, const char *name, long long def)
{
    jval  v = arg(a, i, name, mk_int(def));

    if (v.type != JV_INT && v.type != JV_BOOL) {
        if (v.type == JV_NONE) {
            return def;
        }
        die(r, a->line, "%s: argument '%s' must be an integer, not %s",
            a->callee, name, type_name(v));
    }
    return num_i(v);
}


/* --- strings ------------------------------------------------------------ */

static int
in_chars(jval chars, utf8proc_int32_t c)
{
    size_t            i, k;
    utf8proc_int32_t  d;

    for (i = 0; i < chars.u.str.n; i += k) {
        d = u8_get(chars.u.str.s + i, chars.u.str.n - i, &k);
        if (d == c) {
            return 1;
        }
    }
    return 0;
}


/* str.strip([chars]): left and/or right; chars None means whitespace */
static jval
str_strip(jval s, jval chars, int left, int right)
{
    const char        *p = s.u.str.s;
    size_t             start = 0, end = s.u.str.n, k;
    utf8proc_int32_t   c;
    int                ws = chars.type != JV_STR;

    while (left && start < end) {
        c = u8_get(p + start, end - start, &k);
        if (ws ? !py_isspace(c) : !in_chars(chars, c)) break;
        start += k;
    }
    while (right && end > start) {
        size_t  b = end - 1;

        while (b > start && ((unsigned char) p[b] & 0xc0) == 0x80) b--;
        c = u8_get(p + b, end - b, &k);
        if (ws ? !py_isspace(c) : !in_chars(chars, c)) break;
        end = b;
    }
    return mk_str(p + start, end - start);
}


static jval
str_split(jrender *r, jval s, jval sep, long long maxsplit, int line)
{
    jval         out = mk_list(r, 0);
    size_t       cap = 0, i = 0, k, n = s.u.str.n;
    const char  *p = s.u.str.s, *hit;
    utf8proc_int32_t c;

    if (sep.type == JV_STR) {
        if (sep.u.str.n == 0) {
            die(r, line, "empty separator");
        }
        while (maxsplit != 0
               && (hit = memmem(p + i, n - i, sep.u.str.s, sep.u.str.n)) != NULL)
        {
            list_push(r, &out, &cap, mk_str(p + i, hit - (p + i)));
            i = hit - p + sep.u.str.n;
            maxsplit--;
            step(r, line);
        }
        list_push(r, &out, &cap, mk_str(p + i, n - i));
        return out;
    }
    /* whitespace runs; no empty strings */
    for ( ;; ) {
        while (i < n && py_isspace(u8_get(p + i, n - i, &k))) i += k;
        if (i >= n) break;
        size_t start = i;
        if (maxsplit == 0) {
            size_t end = n;

            while (end > start) {
                size_t b = end - 1;

                while (b > start && ((unsigned char) p[b] & 0xc0) == 0x80) b--;
                if (!py_isspace(u8_get(p + b, end - b, &k))) break;
                end = b;
            }
            list_push(r, &out, &cap, mk_str(p + start, end - start));
            break;
        }
        while (i < n && !py_isspace(c = u8_get(p + i, n - i, &k))) i += k;
        list_push(r, &out, &cap, mk_str(p + start, i - start));
        maxsplit--;
        step(r, line);
    }
    return out;
}


static jval
str_replace(jrender *r, jval s, jval old, jval new, long long count, int line)
{
    jbuf         b = { 0 };
    size_t       i = 0, n = s.u.str.n, k;
    const char  *p = s.u.str.s, *hit;

    if (old.u.str.n == 0) {
        /* Python inserts new between every code point */
        for (i = 0; i <= n && count != 0; i += k, count--) {
            buf_add(r, &b, new.u.str.s, new.u.str.n);
            if (i == n) {
                return mk_buf(&b);
            }
            k = u8_step(p + i, n - i);
            buf_add(r, &b, p + i, k);
            step(r, line);
        }
        buf_add(r, &b, p + i, i < n ? n - i : 0);
        return mk_buf(&b);
    }
    while (count != 0
           && (hit = memmem(p + i, n - i, old.u.str.s, old.u.str.n)) != NULL) {
        buf_add(r, &b, p + i, hit - (p + i));
        buf_add(r, &b, new.u.str.s, new.u.str.n);
        i = hit - p + old.u.str.n;
        count--;
        step(r, line);
    }
    buf_add(r, &b, p + i, n - i);
    return mk_buf(&b);
}


static int
affix_match(jval s, jval affix, int at_end)
{
    if (affix.u.str.n > s.u.str.n) {
        return 0;
    }
    return memcmp(s.u.str.s + (at_end ? s.u.str.n - affix.u.str.n : 0),
                  affix.u.str.s, affix.u.str.n) == 0;
}


static jval
str_join(jrender *r, jval sep, jval items, const char *attr, int line)
{
    jbuf    b = { 0 };
    jval    list = iterate(r, items, line), item;

    for (size_t i = 0; i < list.u.list->n; i++) {
        if (i) {
            buf_add(r, &b, sep.u.str.s, sep.u.str.n);
        }
        item = list.u.list->items[i];
        if (attr != NULL) {
            item = get_attr(r, item, attr, strlen(attr), line);
        }
        to_str_buf(r, &b, item, 0);
    }
    return mk_buf(&b);
}


static int
str_all(jval s, int (*pred)(utf8proc_int32_t))
{
    size_t  i, k;

    if (s.u.str.n == 0) {
        return 0;
    }
    for (i = 0; i < s.u.str.n; i += k) {
        if (!pred(u8_get(s.u.str.s + i, s.u.str.n - i, &k))) {
            return 0;
        }
    }
    return 1;
}


static int pred_digit(utf8proc_int32_t c) {
    return utf8proc_category(c) == UTF8PROC_CATEGORY_ND;
}
static int pred_alpha(utf8proc_int32_t c) {
    int  k = utf8proc_category(c);
    return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}
static int pred_alnum(utf8proc_int32_t c) {
    return pred_alpha(c) || pred_digit(c);
}


/* islower/isupper: some cased character and none of the other case */
static int
str_is_case(jval s, int upper)
{
    size_t            i, k;
    utf8proc_int32_t  c;
    int               cased = 0;

    for (i = 0; i < s.u.str.n; i += k) {
        c = u8_get(s.u.str.s + i, s.u.str.n - i, &k);
        if (utf8proc_tolower(c) != c || utf8proc_toupper(c) != c) {
            if (upper ? utf8proc_toupper(c) != c : utf8proc_tolower(c) != c) {
                return 0;
            }
            cased = 1;
        }
    }
    return cased;
}


/* --- methods -------------------------------------------------------------- */

static jval
call_method(jrender *r, jmethod *m, jargs *a)
{
    jval       s = m->self, v, out;
    long long  count;
    size_t     cap = 0;
    int        line = a->line;

    switch (m->id) {
    case JM_STRIP:
    case JM_LSTRIP:
    case JM_RSTRIP:
        v = arg(a, 0, "chars", mk_none());
        if (v.type != JV_NONE && v.type != JV_STR) {
            die(r, line, "strip arg must be None or str");
        }
        return str_strip(s, v, m->id != JM_RSTRIP, m->id != JM_LSTRIP);
    case JM_STARTSWITH:
    case JM_ENDSWITH:
        v = arg(a, 0, NULL, mk_undef(NULL, 0));
        if (v.type == JV_STR) {
            return mk_bool(affix_match(s, v, m->id == JM_ENDSWITH));
        }
        if (v.type == JV_LIST) {
            for (size_t i = 0; i < v.u.list->n; i++) {
                jval  x = v.u.list->items[i];

                if (x.type != JV_STR) {
                    die(r, line, "tuple for startswith must only contain str");
                }
                if (affix_match(s, x, m->id == JM_ENDSWITH)) {
                    return mk_bool(1);
                }
            }
            return mk_bool(0);
        }
        die(r, line, "startswith/endswith first arg must be str or a tuple "
            "of str, not %s", type_name(v));
    case JM_SPLIT:
    case JM_RSPLIT:
        v = arg(a, 0, "sep", mk_none());
        if (v.type != JV_NONE && v.type != JV_STR) {
            die(r, line, "must be str or None, not %s", type_name(v));
        }
        count = arg_int(r, a, 1, "maxsplit", -1);
        if (m->id == JM_RSPLIT && count >= 0) {
            die(r, line, "rsplit with maxsplit is not supported");
        }
        return str_split(r, s, v, count, line);
    case JM_REPLACE:
        return str_replace(r, s, arg_str(r, a, 0, "old", NULL),
                           arg_str(r, a, 1, "new", NULL),
                           arg_int(r, a, 2, "count", -1), line);
    case JM_UPPER: return str_case(r, s, CASE_UPPER);
    case JM_LOWER: return str_case(r, s, CASE_LOWER);
    case JM_TITLE: return str_case(r, s, CASE_TITLE);
    case JM_CAPITALIZE: return str_case(r, s, CASE_CAPITALIZE);
    case JM_FIND:
    case JM_COUNT: {
        jval         sub = arg_str(r, a, 0, "sub", NULL);
        const char  *hit;
        size_t       i = 0;

        count = 0;
        if (sub.u.str.n == 0) {
            return mk_int(m->id == JM_FIND ? 0
                          : (long long) u8_len(s.u.str.s, s.u.str.n) + 1);
        }
        while ((hit = memmem(s.u.str.s + i, s.u.str.n - i, sub.u.str.s,
                             sub.u.str.n)) != NULL) {
            if (m->id == JM_FIND) {
                return mk_int((long long) u8_len(s.u.str.s, hit - s.u.str.s));
            }
            count++;
            i = hit - s.u.str.s + sub.u.str.n;
        }
        return mk_int(m->id == JM_FIND ? -1 : count);
    }
    case JM_JOIN:
        return str_join(r, s, arg(a, 0, "iterable", mk_undef(NULL, 0)), NULL,
                        line);
    case JM_SPLITLINES: {
        size_t  i = 0, start = 0, n = s.u.str.n;

        out = mk_list(r, 0);
        while (i < n) {
            if (s.u.str.s[i] == '\n' || s.u.str.s[i] == '\r') {
                list_push(r, &out, &cap, mk_str(s.u.str.s + start, i - start));
                if (s.u.str.s[i] == '\r' && i + 1 < n && s.u.str.s[i + 1] == '\n') {
                    i++;
                }
                start = ++i;
            } else {
                i++;
            }
        }
        if (start < n) {
            list_push(r, &out, &cap, mk_str(s.u.str.s + start, n - start));
        }
        return out;
    }
    case JM_ISDIGIT: return mk_bool(str_all(s, pred_digit));
    case JM_ISSPACE: return mk_bool(str_all(s, py_isspace));
    case JM_ISALPHA: return mk_bool(str_all(s, pred_alpha));
    case JM_ISALNUM: return mk_bool(str_all(s, pred_alnum));
    case JM_ISUPPER: return mk_bool(str_is_case(s, 1));
    case JM_ISLOWER: return mk_bool(str_is_case(s, 0));
    case JM_ITEMS:
    case JM_KEYS:
    case JM_VALUES:
        out = mk_list(r, s.u.dict->n);
        out.u.list->is_tuple = m->id == JM_ITEMS ? JLIST_DICT_ITEMS
                               : m->id == JM_KEYS ? JLIST_DICT_KEYS
                               : JLIST_DICT_VALUES;
        for (size_t i = 0; i < s.u.dict->n; i++) {
            if (m->id == JM_ITEMS) {
                jval  pair = mk_list(r, 2);

                pair.u.list->is_tuple = JLIST_TUPLE;
                pair.u.list->items[0] = s.u.dict->keys[i];
                pair.u.list->items[1] = s.u.dict->vals[i];
                out.u.list->items[i] = pair;
            } else {
                out.u.list->items[i] = m->id == JM_KEYS ? s.u.dict->keys[i]
                                                        : s.u.dict->vals[i];
            }
        }
        return out;
    case JM_GET: {
        jval  *found = dict_find(s.u.dict, arg(a, 0, "key", mk_none()));

        return found ? *found : arg(a, 1, "default", mk_none());
    }
    case JM_CYCLE:
        if (a->npos == 0) {
            die(r, line, "no items for cycling given");
        }
        return a->pos[s.u.loop->i % a->npos];
    }
    die(r, line, "unknown method");
}


/* --- tests ------------------------------------------------------------- */

static int
run_test(jrender *r, const char *name, jval v, jargs *a)
{
    jval  x;
    int   line = a->line;

#define IS(s) (strcmp(name, s) == 0)
    if (IS("defined")) return v.type != JV_UNDEF;
    if (IS("undefined")) return v.type == JV_UNDEF;
    if (IS("none")) return v.type == JV_NONE;
    if (IS("boolean")) return v.type == JV_BOOL;
    if (IS("true")) return v.type == JV_BOOL && v.u.b;
    if (IS("false")) return v.type == JV_BOOL && !v.u.b;
    if (IS("integer")) return v.type == JV_INT;
    if (IS("float")) return v.type == JV_FLOAT;
    if (IS("number")) return is_number(v);
    if (IS("string")) return v.type == JV_STR;
    if (IS("mapping")) return v.type == JV_DICT;
    if (IS("iterable")) {
        return v.type == JV_STR || v.type == JV_LIST || v.type == JV_DICT
               || v.type == JV_UNDEF;
    }
    if (IS("sequence")) {
        return v.type == JV_STR || v.type == JV_LIST || v.type == JV_DICT
               || v.type == JV_UNDEF;
    }
    if (IS("callable")) {
        return v.type == JV_MACRO || v.type == JV_FUNC || v.type == JV_METHOD;
    }
    if (IS("lower") || IS("upper")) {
        /* jinja2: str(value).islower() */
        return str_is_case(to_str(r, v), name[0] == 'u');
    }
    if (IS("escaped")) return 0;
    if (IS("odd") || IS("even") || IS("divisibleby")) {
        /* value % 2 / value % num, with Python's modulo on ints and floats */
        jval  d = IS("divisibleby") ? arg(a, 0, "num", mk_int(1)) : mk_int(2);
        jval  m = arith(r, JOP_MOD, v, d, line);

        return IS("odd") ? values_equal(m, mk_int(1)) : values_equal(m, mk_int(0));
    }
    x = arg(a, 0, NULL, mk_undef(NULL, 0));
    if (IS("equalto") || IS("eq") || IS("==")) return values_equal(v, x);
    if (IS("ne") || IS("!=")) return !values_equal(v, x);
    if (IS("sameas")) {
        return v.type == x.type && (v.type == JV_NONE || v.type == JV_UNDEF
                                    || (v.type == JV_BOOL && v.u.b == x.u.b));
    }
    if (IS("lt") || IS("lessthan") || IS("<")) return compare_values(r, v, x, line) < 0;
    if (IS("le") || IS("<=")) return compare_values(r, v, x, line) <= 0;
    if (IS("gt") || IS("greaterthan") || IS(">")) return compare_values(r, v, x, line) > 0;
    if (IS("ge") || IS(">=")) return compare_values(r, v, x, line) >= 0;
    if (IS("in")) return contains(r, x, v, line);
#undef IS
    die(r, line, "no test named '%s'", name);
}


/* --- filters ------------------------------------------------------------ */

/* "a.b.c" on item, as jinja2's make_attrgetter */
static jval
attr_path(jrender *r, jval item, jval path, int line)
{
    const char  *p, *end, *dot;
    char        *numend;
    long long    idx;

    if (path.type == JV_INT) {
        return get_item(r, item, path, line);
    }
    if (path.type != JV_STR) {
        die(r, line, "attribute must be a string, not %s", type_name(path));
    }
    p = path.u.str.s;
    end = p + path.u.str.n;
    for ( ;; ) {
        dot = memchr(p, '.', end - p);
        if (dot == NULL) dot = end;
        idx = strtoll(p, &numend, 10);
        if (numend == dot && dot > p) {
            item = get_item(r, item, mk_int(idx), line);
        } else {
            item = get_item(r, item, mk_str(p, dot - p), line);
        }
        if (dot == end) {
            return item;
        }
        if (item.type == JV_UNDEF) {
            return item;
        }
        p = dot + 1;
    }
}


/* select/reject/selectattr/rejectattr */
static jval
filter_select(jrender *r, jval v, jargs *a, int by_attr, int keep)
{
    jval    list = iterate(r, v, a->line), out = mk_list(r, 0), item, x;
    size_t  cap = 0;
    int     first_test = by_attr ? 1 : 0;
    jargs   targs;

    if (by_attr && a->npos < 1) {
        die(r, a->line, "%s: missing attribute name", a->callee);
    }
    memset(&targs, 0, sizeof(targs));
    targs.line = a->line;
    targs.callee = "test";
    for (int i = first_test + 1; i < a->npos; i++) {
        targs.pos[targs.npos++] = a->pos[i];
    }
    for (size_t i = 0; i < list.u.list->n; i++) {
        step(r, a->line);
        item = list.u.list->items[i];
        x = by_attr ? attr_path(r, item, a->pos[0], a->line) : item;
        int pass;

        if (a->npos > first_test) {
            jval  tn = a->pos[first_test];

            if (tn.type != JV_STR) {
                die(r, a->line, "%s: test name must be a string", a->callee);
            }
            char *name = ralloc(r, tn.u.str.n + 1);

            memcpy(name, tn.u.str.s, tn.u.str.n);
            name[tn.u.str.n] = '\0';
            pass = run_test(r, name, x, &targs);
        } else {
            pass = truthy(x);
        }
        if (pass == keep) {
            list_push(r, &out, &cap, item);
        }
    }
    return out;
}


static jval apply_filter(jrender *r, const char *name, jval v, jargs *a);


/* jinja2's title filter (not str.title()): words start after runs of
   whitespace, '-', '(', '{', '[' or '<'; each word is its first character
   upper-cased and the rest lower-cased */
static jval
filter_title(jrender *r, jval s)
{
    jbuf              b = { 0 };
    utf8proc_int32_t  c;
    utf8proc_uint8_t  enc[4];
    size_t            i, k;
    int               word_start = 1, sep;

    for (i = 0; i < s.u.str.n; i += k) {
        c = u8_get(s.u.str.s + i, s.u.str.n - i, &k);
        sep = py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '['
              || c == '<';
        if (sep) {
            word_start = 1;
        } else {
            c = word_start ? utf8proc_toupper(c) : utf8proc_tolower(c);
            word_start = 0;
        }
        buf_add(r, &b, (char *) enc, utf8proc_encode_char(c, enc));
    }
    return mk_buf(&b);
}

static jval
filter_map(jrender *r, jval v, jargs *a)
{
    jval    list = iterate(r, v, a->line), out, attr, def;
    jargs   fargs;

    out = mk_list(r, list.u.list->n);
    attr = arg(a, -1, "attribute", mk_undef(NULL, 0));
    def = arg(a, -1, "default", mk_undef(NULL, 0));
    if (attr.type == JV_UNDEF && a->npos < 1) {
        die(r, a->line, "map: needs a filter name or attribute=");
    }
    memset(&fargs, 0, sizeof(fargs));
    fargs.line = a->line;
    for (int i = 1; i < a->npos; i++) {
        fargs.pos[fargs.npos++] = a->pos[i];
    }
    for (size_t i = 0; i < list.u.list->n; i++) {
        jval  item = list.u.list->items[i];

        step(r, a->line);
        if (attr.type != JV_UNDEF) {
            item = attr_path(r, item, attr, a->line);
            if (item.type == JV_UNDEF && def.type != JV_UNDEF) {
                item = def;
            }
        } else {
            jval  fn = a->pos[0];

            if (fn.type != JV_STR) {
                die(r, a->line, "map: filter name must be a string");
            }
            char *name = ralloc(r, fn.u.str.n + 1);

            memcpy(name, fn.u.str.s, fn.u.str.n);
            name[fn.u.str.n] = '\0';
            fargs.callee = name;
            item = apply_filter(r, name, item, &fargs);
        }
        out.u.list->items[i] = item;
    }
    return out;
}


static jval
filter_tojson(jrender *r, jval v, jargs *a)
{
    json_opts  o;
    jbuf       b = { 0 };
    jval       ind, seps;

    ind = arg(a, 1, "indent", mk_none());
    o.indent = -1;
    if (ind.type == JV_INT) {
        o.indent = ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : (int) ind.u.i;
    } else if (ind.type != JV_NONE) {
        die(r, a->line, "tojson: indent must be an integer");
    }
    o.ensure_ascii = truthy(arg(a, 0, "ensure_ascii", mk_bool(0)));
    o.sort_keys = truthy(arg(a, 3, "sort_keys", mk_bool(0)));
    seps = arg(a, 2, "separators", mk_none());
    if (seps.type == JV_LIST && seps.u.list->n == 2
        && seps.u.list->items[0].type == JV_STR
        && seps.u.list->items[1].type == JV_STR) {
        o.item_sep = seps.u.list->items[0];
        o.key_sep = seps.u.list->items[1];
    } else if (seps.type == JV_NONE) {
        o.item_sep = mk_cstr(o.indent >= 0 ? "," : ", ");
        o.key_sep = mk_cstr(": ");
    } else {
        die(r, a->line, "tojson: separators must be a pair of strings");
    }
    json_dump(r, &b, v, &o, 0);
    return mk_buf(&b);
}


static jval
filter_int(jrender *r, jval v, jargs *a)
{
    long long  def = arg_int(r, a, 0, "default", 0);
    char       tmp[64], *end;
    jval       s;

    switch (v.type) {
    case JV_UNDEF: die_undefined(r, a->line, v);
    case JV_INT: return v;
    case JV_BOOL: return mk_int(v.u.b);
    case JV_FLOAT:
        if (!isfinite(v.u.f) || fabs(v.u.f) > 9.2e18) return mk_int(def);
        return mk_int((long long) v.u.f);
    case JV_STR:
        s = str_strip(v, mk_none(), 1, 1);
        if (s.u.str.n == 0 || s.u.str.n >= sizeof(tmp)) return mk_int(def);
        memcpy(tmp, s.u.str.s, s.u.str.n);
        tmp[s.u.str.n] = '\0';
        {
            long long  i = strtoll(tmp, &end, 10);

            if (*end == '\0') return mk_int(i);
            double d = strtod(tmp, &end);
            if (*end == '\0' && isfinite(d) && fabs(d) < 9.2e18) {
                return mk_int((long long) d);
            }
        }
        return mk_int(def);
    default:
        return mk_int(def);
    }
}


static jval
filter_indent(jrender *r, jval v, jargs *a)
{
    jval       s = to_str(r, v), w = arg(a, 0, "width", mk_int(4));
    int        first = truthy(arg(a, 1, "first", mk_bool(0)));
    int        blank = truthy(arg(a, 2, "blank", mk_bool(0)));
    jbuf       pad = { 0 }, b = { 0 };
    size_t     i, start;
    int        line_no = 0;

    if (w.type == JV_STR) {
        buf_add(r, &pad, w.u.str.s, w.u.str.n);
    } else {
        long long  n = w.type == JV_INT ? w.u.i : 4;

        for (long long k = 0; k < n && k < 256; k++) buf_add(r, &pad, " ", 1);
    }
    for (start = 0, i = 0; i <= s.u.str.n; i++) {
        if (i < s.u.str.n && s.u.str.s[i] != '\n') continue;
        size_t  len = i - start;

        if ((line_no > 0 || first) && (blank || len > 0)) {
            buf_add(r, &b, pad.s, pad.n);
        }
        buf_add(r, &b, s.u.str.s + start, len);
        if (i < s.u.str.n) buf_add(r, &b, "\n", 1);
        start = i + 1;
        line_no++;
    }
    return mk_buf(&b);
}


/* jinja2 sorts and dedups strings case-insensitively unless told not to */
static jval
sort_key(jrender *r, jval item, jval attr, int case_sensitive, int line)
{
    jval  k = attr.type != JV_UNDEF ? attr_path(r, item, attr, line) : item;

    return k.type == JV_STR && !case_sensitive ? str_case(r, k, CASE_LOWER) : k;
}


/* sort(reverse, case_sensitive, attribute); unique(case_sensitive, attribute) */
static jval
filter_sort(jrender *r, jval v, jargs *a, int unique_only)
{
    jval    list = iterate(r, v, a->line), out, attr, *keys, seen;
    int     rev = unique_only ? 0 : truthy(arg(a, 0, "reverse", mk_bool(0)));
    int     cs = truthy(arg(a, unique_only ? 0 : 1, "case_sensitive", mk_bool(0)));
    size_t  n = list.u.list->n, i, j, cap = 0, seen_cap = 0;

    attr = arg(a, unique_only ? 1 : 2, "attribute", mk_undef(NULL, 0));
    keys = n ? ralloc(r, n * sizeof(jval)) : NULL;
    for (i = 0; i < n; i++) {
        keys[i] = sort_key(r, list.u.list->items[i], attr, cs, a->line);
        step(r, a->line);
    }
    if (unique_only) {
        out = mk_list(r, 0);
        seen = mk_list(r, 0);
        for (i = 0; i < n; i++) {
            if (!contains(r, seen, keys[i], a->line)) {
                list_push(r, &seen, &seen_cap, keys[i]);
                list_push(r, &out, &cap, list.u.list->items[i]);
            }
            step(r, a->line);
        }
        return out;
    }
    /* stable insertion sort on the keys, items moved alongside */
    out = mk_list(r, n);
    memcpy(out.u.list->items, list.u.list->items, n * sizeof(jval));
    for (i = 1; i < n; i++) {
        jval  x = out.u.list->items[i], kx = keys[i];

        for (j = i; j > 0; j--) {
            int  c = compare_values(r, keys[j - 1], kx, a->line);

            step(r, a->line);
            if (rev ? c >= 0 : c <= 0) break;
            out.u.list->items[j] = out.u.list->items[j - 1];
            keys[j] = keys[j - 1];
        }
        out.u.list->items[j] = x;
        keys[j] = kx;
    }
    return out;
}


static jval
apply_filter(jrender *r, const char *name, jval v, jargs *a)
{
    jval    list;
    size_t  n;
    int     line = a->line;

#define IS(s) (strcmp(name, s) == 0)
    if (IS("default") || IS("d")) {
        int  boolean = truthy(arg(a, 1, "boolean", mk_bool(0)));

        if (v.type == JV_UNDEF || (boolean && !truthy(v))) {
            return arg(a, 0, "default_value", mk_cstr(""));
        }
        return v;
    }
    if (IS("safe") || IS("e") || IS("escape") || IS("forceescape")) {
        if (IS("safe")) return v;
        jval  s = to_str(r, v);
        jbuf  b = { 0 };

        for (size_t i = 0; i < s.u.str.n; i++) {
            switch (s.u.str.s[i]) {
            case '&': buf_str(r, &b, "&amp;"); break;
            case '<': buf_str(r, &b, "&lt;"); break;
            case '>': buf_str(r, &b, "&gt;"); break;
            case '"': buf_str(r, &b, "&#34;"); break;
            case '\'': buf_str(r, &b, "&#39;"); break;
            default: buf_add(r, &b, s.u.str.s + i, 1);
            }
        }
        return mk_buf(&b);
    }
    if (IS("tojson")) return filter_tojson(r, v, a);
    if (IS("string")) return to_str(r, v);
    if (IS("trim")) {
        jval  chars = arg(a, 0, "chars", mk_none());

        return str_strip(to_str(r, v), chars, 1, 1);
    }
    if (IS("upper")) return str_case(r, to_str(r, v), CASE_UPPER);
    if (IS("lower")) return str_case(r, to_str(r, v), CASE_LOWER);
    if (IS("title")) return filter_title(r, to_str(r, v));
    if (IS("capitalize")) return str_case(r, to_str(r, v), CASE_CAPITALIZE);
    if (IS("replace")) {
        return str_replace(r, to_str(r, v), arg_str(r, a, 0, "old", NULL),
                           arg_str(r, a, 1, "new", NULL),
                           arg_int(r, a, 2, "count", -1), line);
    }
    if (IS("length") || IS("count")) {
        switch (v.type) {
        case JV_UNDEF: return mk_int(0);
        case JV_STR: return mk_int((long long) u8_len(v.u.str.s, v.u.str.n));
        case JV_LIST: return mk_int((long long) v.u.list->n);
        case JV_DICT: return mk_int((long long) v.u.dict->n);
        default: die(r, line, "object of type '%s' has no len()", type_name(v));
        }
    }
    if (IS("list")) {
        list = iterate(r, v, line);
        if (list.type == JV_LIST && v.type == JV_LIST) {
            jval  copy = mk_list(r, list.u.list->n);

            memcpy(copy.u.list->items, list.u.list->items,
                   list.u.list->n * sizeof(jval));
            return copy;
        }
        return list;
    }
    if (IS("first") || IS("last")) {
        list = iterate(r, v, line);
        n = list.u.list->n;
        if (n == 0) return mk_undef("\x01" "no first item, sequence was empty", 33);
        return list.u.list->items[IS("first") ? 0 : n - 1];
    }
    if (IS("join")) {
        jval  attr = arg(a, 1, "attribute", mk_undef(NULL, 0));
        char *aname = NULL;

        if (attr.type == JV_STR) {
            aname = ralloc(r, attr.u.str.n + 1);
            memcpy(aname, attr.u.str.s, attr.u.str.n);
            aname[attr.u.str.n] = '\0';
        }
        return str_join(r, arg_str(r, a, 0, "d", ""), v, aname, line);
    }
    if (IS("items")) {
        jmethod  m = { v, JM_ITEMS };
        jargs    none;

        if (v.type == JV_UNDEF) return mk_list(r, 0);
        if (v.type != JV_DICT) {
            die(r, line, "can only get item pairs from a mapping");
        }
        memset(&none, 0, sizeof(none));
        none.line = line;
        return call_method(r, &m, &none);
    }
    if (IS("dictsort")) {
        jmethod  m = { v, JM_ITEMS };
        jargs    none;

        if (v.type != JV_DICT) die(r, line, "dictsort: needs a mapping");
        memset(&none, 0, sizeof(none));
        none.line = line;
        list = call_method(r, &m, &none);
        return filter_sort(r, list, &none, 0);
    }
    if (IS("selectattr")) return filter_select(r, v, a, 1, 1);
    if (IS("rejectattr")) return filter_select(r, v, a, 1, 0);
    if (IS("select")) return filter_select(r, v, a, 0, 1);
    if (IS("reject")) return filter_select(r, v, a, 0, 0);
    if (IS("map")) return filter_map(r, v, a);
    if (IS("int")) return filter_int(r, v, a);
    if (IS("float")) {
        if (v.type == JV_UNDEF) die_undefined(r, line, v);
        if (is_number(v)) return mk_float(num_f(v));
        if (v.type == JV_STR) {
            char  tmp[64], *end;
            jval  s = str_strip(v, mk_none(), 1, 1);

            if (s.u.str.n > 0 && s.u.str.n < sizeof(tmp)) {
                memcpy(tmp, s.u.str.s, s.u.str.n);
                tmp[s.u.str.n] = '\0';
                double d = strtod(tmp, &end);
                if (*end == '\0') return mk_float(d);
            }
        }
        return arg(a, 0, "default", mk_float(0.0));
    }
    if (IS("abs")) {
        if (v.type == JV_INT) {
            if (v.u.i == LLONG_MIN) die(r, line, "integer overflow");
            return mk_int(v.u.i < 0 ? -v.u.i : v.u.i);
        }
        if (v.type == JV_FLOAT) return mk_float(fabs(v.u.f));
        if (v.type == JV_BOOL) return mk_int(v.u.b);
        die(r, line, "bad operand type for abs(): '%s'", type_name(v));
    }
    if (IS("round")) {
        long long  prec = arg_int(r, a, 0, "precision", 0);
        double     m = pow(10.0, (double) prec), x = num_f(v);

        if (!is_number(v)) die(r, line, "round: needs a number");
        if (v.type != JV_FLOAT) return mk_int(num_i(v));   /* round(int) */
        jval       how = arg(a, 1, "method", mk_cstr("common"));

        /* "common" is Python's round(): half to even */
        if (str_eq(how, "floor")) return mk_float(floor(x * m) / m);
        if (str_eq(how, "ceil")) return mk_float(ceil(x * m) / m);
        return mk_float(nearbyint(x * m) / m);
    }
    if (IS("reverse")) {
        if (v.type == JV_STR) {
            jval  sv[3] = { mk_none(), mk_none(), mk_int(-1) };

            return slice(r, v, sv, line);
        }
        list = iterate(r, v, line);
        n = list.u.list->n;
        jval  out = mk_list(r, n);

        for (size_t i = 0; i < n; i++) {
            out.u.list->items[i] = list.u.list->items[n - 1 - i];
        }
        return out;
    }
    if (IS("sort")) return filter_sort(r, v, a, 0);
    if (IS("unique")) return filter_sort(r, v, a, 1);
    if (IS("min") || IS("max")) {
        list = iterate(r, v, line);
        if (list.u.list->n == 0) {
            return mk_undef("\x01" "no items in an empty sequence", 29);
        }
        jval  best = list.u.list->items[0];

        for (size_t i = 1; i < list.u.list->n; i++) {
            int  c = compare_values(r, list.u.list->items[i], best, line);

            if (IS("min") ? c < 0 : c > 0) best = list.u.list->items[i];
        }
        return best;
    }
    if (IS("sum")) {
        jval  total = arg(a, 1, "start", mk_int(0));

        list = iterate(r, v, line);
        for (size_t i = 0; i < list.u.list->n; i++) {
            total = arith(r, JOP_ADD, total, list.u.list->items[i], line);
        }
        return total;
    }
    if (IS("indent")) return filter_indent(r, v, a);
    if (IS("wordcount")) {
        jval  words = str_split(r, to_str(r, v), mk_none(), -1, line);

        return mk_int((long long) words.u.list->n);
    }
#undef IS
    die(r, line, "no filter named '%s'", name);
}


/* --- calls ---------------------------------------------------------------- */

static jval call_value(jrender *r, jval callee, jargs *a, const jnode *n);

static jval
call_macro(jrender *r, const jnode *m, jargs *a)
{
    frame  f;
    jbuf   capture = { 0 }, *saved_out;
    int    saved_ctl;

    if (++r->depth > r->lim.max_depth) {
        die(r, a->line, "macros nested deeper than %d calls", r->lim.max_depth);
    }
    step(r, a->line);
    memset(&f, 0, sizeof(f));
    f.parent = r->root;
    if (a->npos > m->nkids) {
        die(r, a->line, "macro '%s' takes not more than %d argument(s)",
            m->str, m->nkids);
    }
    for (int i = 0; i < m->nkids; i++) {
        const jnode  *p = m->kids[i];
        jval          v = arg(a, i, p->str, mk_undef(p->str, p->len));

        if (v.type == JV_UNDEF && p->a != NULL) {
            v = eval(r, p->a, &f);
        }
        dict_set(r, &f.vars, mk_str(p->str, p->len), v);
    }
    saved_out = r->out;
    saved_ctl = r->loop_ctl;
    r->out = &capture;
    exec_body(r, m->b, &f);
    r->out = saved_out;
    r->loop_ctl = saved_ctl;
    r->depth--;
    return mk_buf(&capture);
}


static jval
call_global(jrender *r, int id, jargs *a)
{
    jval       v, out;
    long long  start, stop, st, count;
    size_t     cap = 0;

    switch (id) {
    case JF_RAISE_EXCEPTION:
        v = to_str(r, arg(a, 0, "message", mk_cstr("")));
        if (r->errlen > 0) {
            snprintf(r->err, r->errlen, "%.*s", (int) v.u.str.n, v.u.str.s);
        }
        longjmp(r->jmp, 1);
    case JF_STRFTIME_NOW: {
        jval       fmt = arg_str(r, a, 0, "format", NULL);
        char      *cfmt, buf[512];
        time_t     now = time(NULL);
        struct tm  tm;
        size_t     k;

        cfmt = ralloc(r, fmt.u.str.n + 1);
        memcpy(cfmt, fmt.u.str.s, fmt.u.str.n);
        cfmt[fmt.u.str.n] = '\0';
        localtime_r(&now, &tm);
        k = strftime(buf, sizeof(buf), cfmt, &tm);
        return str_copy(r, buf, k);
    }
    case JF_NAMESPACE:
    case JF_DICT:
        out = mk_dict(r, id == JF_NAMESPACE ? JV_NS : JV_DICT);
        for (int i = 0; i < a->npos; i++) {
            if (a->pos[i].type != JV_DICT) {
                die(r, a->line, "%s: positional arguments must be mappings",
                    a->callee);
            }
            for (size_t k = 0; k < a->pos[i].u.dict->n; k++) {
                dict_set(r, out.u.dict, a->pos[i].u.dict->keys[k],
                         a->pos[i].u.dict->vals[k]);
            }
        }
        for (int i = 0; i < a->nkw; i++) {
            dict_set(r, out.u.dict, mk_cstr(a->kwname[i]), a->kw[i]);
        }
        return out;
    case JF_RANGE:
        if (a->npos == 1) {
            start = 0;
            stop = arg_int(r, a, 0, "stop", 0);
            st = 1;
        } else {
            start = arg_int(r, a, 0, "start", 0);
            stop = arg_int(r, a, 1, "stop", 0);
            st = arg_int(r, a, 2, "step", 1);
        }
        if (st == 0) {
            die(r, a->line, "range() arg 3 must not be zero");
        }
        out = mk_list(r, 0);
        count = 0;
        for (long long i = start; st > 0 ? i < stop : i > stop; i += st) {
            step(r, a->line);
            list_push(r, &out, &cap, mk_int(i));
            if (++count > r->lim.max_steps) break;
        }
        return out;
    }
    die(r, a->line, "unknown function");
}


static jval
call_value(jrender *r, jval callee, jargs *a, const jnode *n)
{
    switch (callee.type) {
    case JV_MACRO: return call_macro(r, callee.u.macro, a);
    case JV_FUNC: return call_global(r, callee.u.func, a);
    case JV_METHOD: return call_method(r, callee.u.method, a);
    case JV_UNDEF: die_undefined(r, n->line, callee);
    default:
        die(r, n->line, "'%s' object is not callable", type_name(callee));
    }
}


/* --- expressions ------------------------------------------------------- */

static jval eval_node(jrender *r, const jnode *n, frame *f);

static jval
eval(jrender *r, const jnode *n, frame *f)
{
    jval  v;

    if (++r->eval_depth > JINJA_MAX_EVAL_DEPTH) {
        die(r, n->line, "template nested deeper than %d levels",
            JINJA_MAX_EVAL_DEPTH);
    }
    v = eval_node(r, n, f);
    r->eval_depth--;
    return v;
}


static jval
eval_node(jrender *r, const jnode *n, frame *f)
{
    jval   a, b, v, sv[3];
    jargs *args;

    switch (n->kind) {
    case JN_LITERAL:
        return n->lit;
    case JN_NAME:
        return lookup(r, f, n->str, n->len);
    case JN_GETATTR:
        return get_attr(r, eval(r, n->a, f), n->str, n->len, n->line);
    case JN_GETITEM:
        a = eval(r, n->a, f);
        return get_item(r, a, eval(r, n->b, f), n->line);
    case JN_SLICE:
        a = eval(r, n->a, f);
        for (int i = 0; i < 3; i++) {
            sv[i] = n->kids[i] ? eval(r, n->kids[i], f) : mk_none();
        }
        return slice(r, a, sv, n->line);
    case JN_CALL:
        a = eval(r, n->a, f);
        args = ralloc(r, sizeof(jargs));
        eval_args(r, n, f, args, n->a->kind == JN_NAME ? n->a->str
                                 : n->a->kind == JN_GETATTR ? n->a->str : "call");
        return call_value(r, a, args, n);
    case JN_FILTER:
        a = eval(r, n->a, f);
        args = ralloc(r, sizeof(jargs));
        eval_args(r, n, f, args, n->str);
        return apply_filter(r, n->str, a, args);
    case JN_TEST:
        a = eval(r, n->a, f);
        args = ralloc(r, sizeof(jargs));
        eval_args(r, n, f, args, n->str);
        return mk_bool(run_test(r, n->str, a, args) != n->op);
    case JN_BINOP:
        a = eval(r, n->a, f);
        b = eval(r, n->b, f);
        if (n->op == JOP_CONCAT) {
            jbuf  buf = { 0 };

            to_str_buf(r, &buf, a, 0);
            to_str_buf(r, &buf, b, 0);
            return mk_buf(&buf);
        }
        return arith(r, n->op, a, b, n->line);
    case JN_COMPARE:
        a = eval(r, n->kids[0], f);
        for (int i = 1; i < n->nkids; i++) {
            int  ok;

            b = eval(r, n->kids[i], f);
            switch (n->ops[i - 1]) {
            case JOP_EQ: ok = values_equal(a, b); break;
            case JOP_NE: ok = !values_equal(a, b); break;
            case JOP_LT: ok = compare_values(r, a, b, n->line) < 0; break;
            case JOP_LE: ok = compare_values(r, a, b, n->line) <= 0; break;
            case JOP_GT: ok = compare_values(r, a, b, n->line) > 0; break;
            case JOP_GE: ok = compare_values(r, a, b, n->line) >= 0; break;
            case JOP_IN: ok = contains(r, b, a, n->line); break;
            default: ok = !contains(r, b, a, n->line); break;
            }
            if (!ok) {
                return mk_bool(0);
            }
            a = b;
        }
        return mk_bool(1);
    case JN_AND:
        a = eval(r, n->a, f);
        return truthy(a) ? eval(r, n->b, f) : a;
    case JN_OR:
        a = eval(r, n->a, f);
        return truthy(a) ? a : eval(r, n->b, f);
    case JN_NOT:
        return mk_bool(!truthy(eval(r, n->a, f)));
    case JN_NEG:
    case JN_POS:
        a = eval(r, n->a, f);
        if (a.type == JV_UNDEF) die_undefined(r, n->line, a);
        if (!is_number(a)) {
            die(r, n->line, "bad operand type for unary %c: '%s'",
                n->kind == JN_NEG ? '-' : '+', type_name(a));
        }
        if (n->kind == JN_POS) return a.type == JV_BOOL ? mk_int(a.u.b) : a;
        if (a.type == JV_FLOAT) return mk_float(-a.u.f);
        if (num_i(a) == LLONG_MIN) die(r, n->line, "integer overflow");
        return mk_int(-num_i(a));
    case JN_COND:
        if (truthy(eval(r, n->b, f))) {
            return eval(r, n->a, f);
        }
        return n->c ? eval(r, n->c, f) : mk_undef("", 0);
    case JN_LIST:
    case JN_TUPLE:
        v = mk_list(r, (size_t) n->nkids);
        v.u.list->is_tuple = n->kind == JN_TUPLE ? JLIST_TUPLE : JLIST_LIST;
        for (int i = 0; i < n->nkids; i++) {
            v.u.list->items[i] = eval(r, n->kids[i], f);
        }
        return v;
    case JN_DICT:
        v = mk_dict(r, JV_DICT);
        for (int i = 0; i + 1 < n->nkids; i += 2) {
            a = eval(r, n->kids[i], f);
            dict_set(r, v.u.dict, a, eval(r, n->kids[i + 1], f));
        }
        return v;
    default:
        die(r, n->line, "not an expression");
    }
}


/* --- statements ---------------------------------------------------------- */

static void
exec_for(jrender *r, const jnode *n, frame *f)
{
    jval     list, filtered, item;
    jloop    loop;
    frame    it;
    size_t   cap = 0;
    jval     loopv = { .type = JV_LOOP };

    list = iterate(r, eval(r, n->a, f), n->line);
    if (n->d != NULL) {
        /* "for x in xs if cond": the condition sees x, and loop.* counts
           only the items that pass */
        filtered = mk_list(r, 0);
        for (size_t i = 0; i < list.u.list->n; i++) {
            memset(&it, 0, sizeof(it));
            it.parent = f;
            assign(r, &it, n->t, list.u.list->items[i]);
            step(r, n->line);
            if (truthy(eval(r, n->d, &it))) {
                list_push(r, &filtered, &cap, list.u.list->items[i]);
            }
        }
        list = filtered;
    }
    if (list.u.list->n == 0) {
        if (n->c != NULL) {
            exec_body(r, n->c, f);
        }
        return;
    }
    loop.items = list.u.list;
    loopv.u.loop = &loop;
    for (loop.i = 0; loop.i < list.u.list->n; loop.i++) {
        step(r, n->line);
        item = list.u.list->items[loop.i];
        /* each iteration is a fresh scope, as in jinja2 */
        memset(&it, 0, sizeof(it));
        it.parent = f;
        dict_set(r, &it.vars, mk_cstr("loop"), loopv);
        assign(r, &it, n->t, item);
        exec_body(r, n->b, &it);
        if (r->loop_ctl == LOOP_BREAK) {
            r->loop_ctl = LOOP_NONE;
            break;
        }
        r->loop_ctl = LOOP_NONE;
    }
}


static void
exec_body(jrender *r, const jnode *n, frame *f)
{
    jval    v;
    jbuf    capture, *saved;

    if (++r->eval_depth > JINJA_MAX_EVAL_DEPTH) {
        die(r, n ? n->line : 0, "template nested deeper than %d levels",
            JINJA_MAX_EVAL_DEPTH);
    }
    for (; n != NULL && r->loop_ctl == LOOP_NONE; n = n->next) {
        r->line = n->line;
        switch (n->kind) {
        case JN_TEXT:
            buf_add(r, r->out, n->str, n->len);
            break;
        case JN_OUTPUT:
            v = eval(r, n->a, f);
            to_str_buf(r, r->out, v, 0);
            break;
        case JN_IF:
            if (truthy(eval(r, n->a, f))) {
                exec_body(r, n->b, f);
            } else if (n->c != NULL) {
                exec_body(r, n->c, f);
            }
            break;
        case JN_FOR:
            exec_for(r, n, f);
            break;
        case JN_SET:
            assign(r, f, n->t, eval(r, n->a, f));
            break;
        case JN_SET_BLOCK:
            memset(&capture, 0, sizeof(capture));
            saved = r->out;
            r->out = &capture;
            exec_body(r, n->b, f);
            r->out = saved;
            assign(r, f, n->t, mk_buf(&capture));
            break;
        case JN_MACRO: {
            jval  m = { .type = JV_MACRO };

            m.u.macro = n;
            dict_set(r, &f->vars, mk_str(n->str, n->len), m);
            break;
        }
        case JN_BREAK:
            r->loop_ctl = LOOP_BREAK;
            break;
        case JN_CONTINUE:
            r->loop_ctl = LOOP_CONTINUE;
            break;
        case JN_BLOCK:
            exec_body(r, n->b, f);
            break;
        default:
            die(r, n->line, "not a statement");
        }
    }
    r->eval_depth--;
}


/* --- entry points ------------------------------------------------------ */

jinja_limits
jinja_limits_default(void)
{
    jinja_limits  l;

    l.max_output = 4u << 20;
    l.max_memory = 64u << 20;
    l.max_steps = 1000000;
    l.max_depth = 64;
    return l;
}


int
jinja_render(const jinja_tmpl *t, const cJSON *ctx, char **out,
    size_t *out_len, char *err, size_t errlen)
{
    jinja_limits  l = jinja_limits_default();

    return jinja_render_ex(t, ctx, &l, out, out_len, err, errlen);
}


int
jinja_render_ex(const jinja_tmpl *t, const cJSON *ctx,
    const jinja_limits *limits, char **out, size_t *out_len, char *err,
    size_t errlen)
{
    jrender          *r;
    frame             root;
    jbuf              main_out = { 0 };
    const cJSON      *c;
    volatile int      rc;

    *out = NULL;
    *out_len = 0;
    if (errlen > 0) {
        err[0] = '\0';
    }
    if (ctx != NULL && !cJSON_IsObject(ctx)) {
        snprintf(err, errlen, "line 1: the context must be a JSON object");
        return -1;
    }
    /* volatile state across longjmp lives in this heap block */
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        snprintf(err, errlen, "line 1: out of memory");
        return -1;
    }
    r->lim = *limits;
    r->arena.limit = limits->max_memory;
    r->err = err;
    r->errlen = errlen;
    r->out = &main_out;
    r->line = 1;
    memset(&root, 0, sizeof(root));
    r->root = &root;
    rc = -1;
    if (setjmp(r->jmp) == 0) {
        if (ctx != NULL) {
            cJSON_ArrayForEach(c, ctx) {
                if (c->string != NULL) {
                    dict_set(r, &root.vars, mk_cstr(c->string),
                             from_cjson(r, c, 0));
                }
            }
        }
        exec_body(r, t->body, &root);
        *out = malloc(r->out->n + 1);
        if (*out == NULL) {
            snprintf(err, errlen, "line 1: out of memory");
        } else {
            if (r->out->n) {
                memcpy(*out, r->out->s, r->out->n);
            }
            (*out)[r->out->n] = '\0';
            *out_len = r->out->n;
            rc = 0;
        }
    }
    jarena_free(&r->arena);
    free(r);
    return rc;
}
