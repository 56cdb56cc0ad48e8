/*
 * Python's operators on Jinja values: attribute and item access (with the
 * methods a str or dict has, bound here and run by jinja/methods.c), slices
 * by code point, <, `in`, and arithmetic with Python's int and float rules
 * (floor division and modulo round toward minus infinity, int overflow is
 * an error, str and list repeat and concatenate).
 *
 * defines: jget_attr, jget_item, jslice, jcompare, jcontains, jarith
 */
#define _GNU_SOURCE     /* memmem */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "jinja/internal.h"


/* the names a str and a dict answer to, as jget_attr() binds them */
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


/* --- attributes, items, slices ------------------------------------------ */

/* an Undefined that remembers "'dict object' has no attribute 'x'" */
static jval
undef_attr(jrender *r, jval obj, const char *what, const char *name, size_t n)
{
    jbuf  b = { 0 };
    char  c = '\x01';

    jbuf_add(r, &b, &c, 1);
    jbuf_str(r, &b, "'");
    jbuf_str(r, &b, obj.type == JV_DICT ? "dict" : jtype_name(obj));
    jbuf_str(r, &b, " object' has no ");
    jbuf_str(r, &b, what);
    jbuf_str(r, &b, " '");
    jbuf_add(r, &b, name, n);
    jbuf_str(r, &b, "'");
    return mk_undef(b.s, b.n);
}


static jval
method(jrender *r, jval self, int id)
{
    jval  m = { .type = JV_METHOD };

    m.u.method = jalloc(r, sizeof(jmethod));
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
jval
jget_attr(jrender *r, jval obj, const char *name, size_t n, int line)
{
    jval  *v;
    int    id;

    switch (obj.type) {
    case JV_UNDEF:
        jdie_undefined(r, line, obj);
    case JV_LOOP:
        return loop_attr(r, obj, name, n);
    case JV_NS:
        v = jdict_find_str(obj.u.dict, name, n);
        return v ? *v : undef_attr(r, obj, "attribute", name, n);
    case JV_DICT:
        if ((id = method_id(obj, name, n)) != 0) {
            return method(r, obj, id);
        }
        v = jdict_find_str(obj.u.dict, name, n);
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


jval
jget_item(jrender *r, jval obj, jval key, int line)
{
    jval       *v;
    long long   i, len;
    size_t      count, *off;

    switch (obj.type) {
    case JV_UNDEF:
        jdie_undefined(r, line, obj);
    case JV_DICT:
    case JV_NS:
        v = jdict_find(obj.u.dict, key);
        if (v != NULL) {
            return *v;
        }
        if (key.type == JV_STR) {
            return jget_attr(r, obj, key.u.str.s, key.u.str.n, line);
        }
        return undef_attr(r, obj, "element", "?", 1);
    case JV_LIST:
    case JV_STR:
        if (key.type == JV_STR) {
            return jget_attr(r, obj, key.u.str.s, key.u.str.n, line);
        }
        if (key.type != JV_INT && key.type != JV_BOOL) {
            jdie(r, line, "%s indices must be integers, not %s",
                 jtype_name(obj), jtype_name(key));
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
        off = ju8_offsets(r, obj, &count);
        len = (long long) count;
        if (i < 0) i += len;
        if (i < 0 || i >= len) {
            return mk_undef("\x01string index out of range", 27);
        }
        return mk_sub(obj, off[i], off[i + 1] - off[i]);
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
            jdie(r, line, "slice indices must be integers or None");
        }
    }
    st = sv[2].type == JV_INT || sv[2].type == JV_BOOL ? num_i(sv[2]) : 1;
    if (st == 0) {
        jdie(r, line, "slice step cannot be zero");
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


jval
jslice(jrender *r, jval obj, jval *sv, int line)
{
    long long  start, stop, st, i, len;
    size_t     count, *off = NULL, cap = 0;
    jval       out;
    jbuf       b = { 0 };

    if (obj.type == JV_UNDEF) {
        jdie_undefined(r, line, obj);
    }
    if (obj.type == JV_LIST) {
        len = (long long) obj.u.list->n;
    } else if (obj.type == JV_STR) {
        off = ju8_offsets(r, obj, &count);
        len = (long long) count;
    } else {
        jdie(r, line, "'%s' object is not subscriptable", jtype_name(obj));
    }
    slice_indices(len, sv, &start, &stop, &st, r, line);
    out = mk_list(r, 0);
    for (i = start; st > 0 ? i < stop : i > stop; i += st) {
        if (obj.type == JV_LIST) {
            jlist_push(r, &out, &cap, obj.u.list->items[i]);
        } else {
            jbuf_add_t(r, &b, obj.u.str.s + off[i], off[i + 1] - off[i],
                       jtaint_at(obj, off[i]));
        }
    }
    return obj.type == JV_LIST ? out : mk_buf(&b);
}

/* --- operators ---------------------------------------------------------- */

int
jcompare(jrender *r, jval a, jval b, int line)
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
            jdie(r, line, "value nested deeper than %d levels", JINJA_MAX_NEST);
        }
        for (i = 0; i < a.u.list->n && i < b.u.list->n; i++) {
            if (!jequal(a.u.list->items[i], b.u.list->items[i])) {
                c = jcompare(r, a.u.list->items[i], b.u.list->items[i],
                             line);
                r->nest--;
                return c;
            }
        }
        r->nest--;
        return a.u.list->n < b.u.list->n ? -1 : a.u.list->n > b.u.list->n;
    }
    if (a.type == JV_UNDEF) jdie_undefined(r, line, a);
    if (b.type == JV_UNDEF) jdie_undefined(r, line, b);
    jdie(r, line, "'<' not supported between instances of '%s' and '%s'",
         jtype_name(a), jtype_name(b));
}


int
jcontains(jrender *r, jval hay, jval needle, int line)
{
    switch (hay.type) {
    case JV_STR:
        if (needle.type != JV_STR) {
            jdie(r, line, "'in <string>' requires string as left operand, "
                 "not %s", jtype_name(needle));
        }
        if (needle.u.str.n == 0) {
            return 1;
        }
        return memmem(hay.u.str.s, hay.u.str.n, needle.u.str.s,
                      needle.u.str.n) != NULL;
    case JV_LIST:
        for (size_t i = 0; i < hay.u.list->n; i++) {
            if (jequal(hay.u.list->items[i], needle)) {
                return 1;
            }
        }
        return 0;
    case JV_DICT:
        if (needle.type == JV_LIST || needle.type == JV_DICT) {
            jdie(r, line, "unhashable type: '%s'", jtype_name(needle));
        }
        return jdict_find(hay.u.dict, needle) != NULL;
    case JV_UNDEF:
        return 0;
    default:
        jdie(r, line, "argument of type '%s' is not iterable", jtype_name(hay));
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
        jdie(r, 0, "template used more than %zu bytes of memory",
             r->lim.max_memory);
    }
    if (seq.type == JV_STR) {
        for (long long i = 0; i < times; i++) {
            jbuf_addv(r, &b, seq);
        }
        return mk_buf(&b);
    }
    out = mk_list(r, 0);
    for (long long i = 0; i < times; i++) {
        for (size_t k = 0; k < seq.u.list->n; k++) {
            jlist_push(r, &out, &cap, seq.u.list->items[k]);
        }
    }
    return out;
}


jval
jarith(jrender *r, int op, jval a, jval b, int line)
{
    long long  x, y, z;
    double     fx, fy;

    if (a.type == JV_UNDEF) jdie_undefined(r, line, a);
    if (b.type == JV_UNDEF) jdie_undefined(r, line, b);
    if (op == JOP_ADD && a.type == JV_STR && b.type == JV_STR) {
        jbuf  buf = { 0 };

        jbuf_addv(r, &buf, a);
        jbuf_addv(r, &buf, b);
        return mk_buf(&buf);
    }
    if (op == JOP_ADD && a.type == JV_LIST && b.type == JV_LIST) {
        jval  out = mk_list(r, a.u.list->n + b.u.list->n);

        jval_copy(out.u.list->items, a.u.list->items, a.u.list->n);
        if (b.u.list->n > 0) {
            jval_copy(out.u.list->items + a.u.list->n, b.u.list->items,
                      b.u.list->n);
        }
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
        static const char *names[] = {
            "", "+", "-", "*", "/", "//", "%", "**"
        };

        jdie(r, line, "unsupported operand type(s) for %s: '%s' and '%s'",
             names[op], jtype_name(a), jtype_name(b));
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
                jdie(r, line, "integer division or modulo by zero");
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
        if (fy == 0) jdie(r, line, "division by zero");
        return mk_float(fx / fy);
    case JOP_FLOORDIV:
        if (fy == 0) jdie(r, line, "float floor division by zero");
        return mk_float(floor(fx / fy));
    case JOP_MOD:
        if (fy == 0) jdie(r, line, "float modulo");
        {
            double  m = fmod(fx, fy);

            if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
            return mk_float(m);
        }
    case JOP_POW: return mk_float(pow(fx, fy));
    }
overflow:
    jdie(r, line, "integer overflow");
}
