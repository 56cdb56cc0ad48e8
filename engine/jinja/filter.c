/*
 * Jinja's filters and tests, as jinja2 3.1 defines them. The parser turns a
 * filter's name into an id (jfilter_id) so a render dispatches on an index,
 * not on strings; tests are still looked up by name when they run. Filters
 * never call back into the evaluator: map takes a filter name and select a
 * test name, both resolved here.
 *
 * defines: jfilter_id, jfilter_apply, jrun_test
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jinja/internal.h"


/* --- tests -------------------------------------------------------------- */

int
jrun_test(jrender *r, const char *name, jval v, jargs *a)
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
        return jstr_is_case(jto_str(r, v), name[0] == 'u');
    }
    if (IS("escaped")) return 0;
    if (IS("odd") || IS("even") || IS("divisibleby")) {
        /* value % 2 / value % num, with Python's modulo on ints and floats */
        jval  d = IS("divisibleby") ? jarg(a, 0, "num", mk_int(1)) : mk_int(2);
        jval  m = jarith(r, JOP_MOD, v, d, line);

        return IS("odd") ? jequal(m, mk_int(1)) : jequal(m, mk_int(0));
    }
    x = jarg(a, 0, NULL, mk_undef(NULL, 0));
    if (IS("equalto") || IS("eq") || IS("==")) return jequal(v, x);
    if (IS("ne") || IS("!=")) return !jequal(v, x);
    if (IS("sameas")) {
        return v.type == x.type && (v.type == JV_NONE || v.type == JV_UNDEF
                                    || (v.type == JV_BOOL && v.u.b == x.u.b));
    }
    if (IS("lt") || IS("lessthan") || IS("<")) {
        return jcompare(r, v, x, line) < 0;
    }
    if (IS("le") || IS("<=")) return jcompare(r, v, x, line) <= 0;
    if (IS("gt") || IS("greaterthan") || IS(">")) {
        return jcompare(r, v, x, line) > 0;
    }
    if (IS("ge") || IS(">=")) return jcompare(r, v, x, line) >= 0;
    if (IS("in")) return jcontains(r, x, v, line);
#undef IS
    jdie(r, line, "no test named '%s'", name);
}


/* --- filters with more to them ------------------------------------------ */

/* "a.b.c" on item, as jinja2's make_attrgetter */
static jval
attr_path(jrender *r, jval item, jval path, int line)
{
    const char  *p, *end, *dot;
    char        *numend;
    long long    idx;

    if (path.type == JV_INT) {
        return jget_item(r, item, path, line);
    }
    if (path.type != JV_STR) {
        jdie(r, line, "attribute must be a string, not %s", jtype_name(path));
    }
    p = path.u.str.s;
    end = p + path.u.str.n;
    for ( ;; ) {
        dot = memchr(p, '.', end - p);
        if (dot == NULL) dot = end;
        idx = strtoll(p, &numend, 10);
        if (numend == dot && dot > p) {
            item = jget_item(r, item, mk_int(idx), line);
        } else {
            item = jget_item(r, item, mk_str(p, dot - p), line);
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
select_items(jrender *r, jval v, jargs *a, int by_attr, int keep)
{
    jval    list = jiterate(r, v, a->line), out = mk_list(r, 0), item, x;
    size_t  cap = 0;
    int     first_test = by_attr ? 1 : 0;
    jargs   targs;

    if (by_attr && a->npos < 1) {
        jdie(r, a->line, "%s: missing attribute name", a->callee);
    }
    memset(&targs, 0, sizeof(targs));
    targs.line = a->line;
    targs.callee = "test";
    for (int i = first_test + 1; i < a->npos; i++) {
        targs.pos[targs.npos++] = a->pos[i];
    }
    for (size_t i = 0; i < list.u.list->n; i++) {
        jstep(r, a->line);
        item = list.u.list->items[i];
        x = by_attr ? attr_path(r, item, a->pos[0], a->line) : item;
        int pass;

        if (a->npos > first_test) {
            jval  tn = a->pos[first_test];

            if (tn.type != JV_STR) {
                jdie(r, a->line, "%s: test name must be a string", a->callee);
            }
            char *name = jalloc(r, tn.u.str.n + 1);

            memcpy(name, tn.u.str.s, tn.u.str.n);
            name[tn.u.str.n] = '\0';
            pass = jrun_test(r, name, x, &targs);
        } else {
            pass = truthy(x);
        }
        if (pass == keep) {
            jlist_push(r, &out, &cap, item);
        }
    }
    return out;
}


/* jinja2's title filter (not str.title()): words start after runs of
   whitespace, '-', '(', '{', '[' or '<'; each word is its first character
   upper-cased and the rest lower-cased */
static jval
filter_title(jrender *r, jval v, jargs *a)
{
    jval              s = jto_str(r, v);
    jbuf              b = { 0 };
    utf8proc_int32_t  c;
    utf8proc_uint8_t  enc[4];
    size_t            i, k;
    int               word_start = 1, sep;

    (void) a;
    for (i = 0; i < s.u.str.n; i += k) {
        c = ju8_get(s.u.str.s + i, s.u.str.n - i, &k);
        sep = jpy_isspace(c) || c == '-' || c == '(' || c == '{' || c == '['
              || c == '<';
        if (sep) {
            word_start = 1;
        } else {
            c = word_start ? utf8proc_toupper(c) : utf8proc_tolower(c);
            word_start = 0;
        }
        jbuf_add_from(r, &b, (char *) enc, utf8proc_encode_char(c, enc), s,
                      i, k);
    }
    return mk_buf(&b);
}


static jval
filter_map(jrender *r, jval v, jargs *a)
{
    jval    list = jiterate(r, v, a->line), out, attr, def;
    jargs   fargs;
    int     id;

    out = mk_list(r, list.u.list->n);
    attr = jarg(a, -1, "attribute", mk_undef(NULL, 0));
    def = jarg(a, -1, "default", mk_undef(NULL, 0));
    if (attr.type == JV_UNDEF && a->npos < 1) {
        jdie(r, a->line, "map: needs a filter name or attribute=");
    }
    memset(&fargs, 0, sizeof(fargs));
    fargs.line = a->line;
    for (int i = 1; i < a->npos; i++) {
        fargs.pos[fargs.npos++] = a->pos[i];
    }
    for (size_t i = 0; i < list.u.list->n; i++) {
        jval  item = list.u.list->items[i];

        jstep(r, a->line);
        if (attr.type != JV_UNDEF) {
            item = attr_path(r, item, attr, a->line);
            if (item.type == JV_UNDEF && def.type != JV_UNDEF) {
                item = def;
            }
        } else {
            jval  fn = a->pos[0];

            if (fn.type != JV_STR) {
                jdie(r, a->line, "map: filter name must be a string");
            }
            char *name = jalloc(r, fn.u.str.n + 1);

            memcpy(name, fn.u.str.s, fn.u.str.n);
            name[fn.u.str.n] = '\0';
            fargs.callee = name;
            id = jfilter_id(name, strlen(name));
            if (id == 0) {
                jdie(r, a->line, "no filter named '%s'", name);
            }
            item = jfilter_apply(r, id, item, &fargs);
        }
        out.u.list->items[i] = item;
    }
    return out;
}


static jval
filter_tojson(jrender *r, jval v, jargs *a)
{
    jjson_opts  o;
    jbuf       b = { 0 };
    jval       ind, seps;

    ind = jarg(a, 1, "indent", mk_none());
    o.indent = -1;
    if (ind.type == JV_INT) {
        o.indent = ind.u.i < 0 ? 0 : ind.u.i > 64 ? 64 : (int) ind.u.i;
    } else if (ind.type != JV_NONE) {
        jdie(r, a->line, "tojson: indent must be an integer");
    }
    o.ensure_ascii = truthy(jarg(a, 0, "ensure_ascii", mk_bool(0)));
    o.sort_keys = truthy(jarg(a, 3, "sort_keys", mk_bool(0)));
    seps = jarg(a, 2, "separators", mk_none());
    if (seps.type == JV_LIST && seps.u.list->n == 2
        && seps.u.list->items[0].type == JV_STR
        && seps.u.list->items[1].type == JV_STR) {
        o.item_sep = seps.u.list->items[0];
        o.key_sep = seps.u.list->items[1];
    } else if (seps.type == JV_NONE) {
        o.item_sep = mk_cstr(o.indent >= 0 ? "," : ", ");
        o.key_sep = mk_cstr(": ");
    } else {
        jdie(r, a->line, "tojson: separators must be a pair of strings");
    }
    jjson_dump(r, &b, v, &o, 0);
    return mk_buf(&b);
}


static jval
filter_int(jrender *r, jval v, jargs *a)
{
    long long  def = jarg_int(r, a, 0, "default", 0);
    char       tmp[64], *end;
    jval       s;

    switch (v.type) {
    case JV_UNDEF: jdie_undefined(r, a->line, v);
    case JV_INT: return v;
    case JV_BOOL: return mk_int(v.u.b);
    case JV_FLOAT:
        if (!isfinite(v.u.f) || fabs(v.u.f) > 9.2e18) return mk_int(def);
        return mk_int((long long) v.u.f);
    case JV_STR:
        s = jstr_strip(v, mk_none(), 1, 1);
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
    jval       s = jto_str(r, v), w = jarg(a, 0, "width", mk_int(4));
    int        first = truthy(jarg(a, 1, "first", mk_bool(0)));
    int        blank = truthy(jarg(a, 2, "blank", mk_bool(0)));
    jbuf       pad = { 0 }, b = { 0 };
    size_t     i, start;
    int        line_no = 0;

    if (w.type == JV_STR) {
        jbuf_addv(r, &pad, w);
    } else {
        long long  n = w.type == JV_INT ? w.u.i : 4;

        for (long long k = 0; k < n && k < 256; k++) jbuf_add(r, &pad, " ", 1);
    }
    for (start = 0, i = 0; i <= s.u.str.n; i++) {
        if (i < s.u.str.n && s.u.str.s[i] != '\n') continue;
        size_t  len = i - start;

        if ((line_no > 0 || first) && (blank || len > 0)) {
            jbuf_addv(r, &b, mk_buf(&pad));
        }
        jbuf_add_t(r, &b, s.u.str.s + start, len,
                   jtaint_at(s, start));
        if (i < s.u.str.n) {
            jbuf_add_t(r, &b, "\n", 1, jtaint_at(s, i));
        }
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

    return k.type == JV_STR && !case_sensitive ? jstr_case(r, k, CASE_LOWER)
                                               : k;
}


/* sort(reverse, case_sensitive, attribute);
   unique(case_sensitive, attribute) */
static jval
sort_items(jrender *r, jval v, jargs *a, int unique_only)
{
    jval    list = jiterate(r, v, a->line), out, attr, *keys, seen;
    int     rev = unique_only ? 0 : truthy(jarg(a, 0, "reverse", mk_bool(0)));
    int     cs = truthy(jarg(a, unique_only ? 0 : 1, "case_sensitive",
                             mk_bool(0)));
    size_t  n = list.u.list->n, i, j, cap = 0, seen_cap = 0;

    attr = jarg(a, unique_only ? 1 : 2, "attribute", mk_undef(NULL, 0));
    keys = n ? jalloc(r, n * sizeof(jval)) : NULL;
    for (i = 0; i < n; i++) {
        keys[i] = sort_key(r, list.u.list->items[i], attr, cs, a->line);
        jstep(r, a->line);
    }
    if (unique_only) {
        out = mk_list(r, 0);
        seen = mk_list(r, 0);
        for (i = 0; i < n; i++) {
            if (!jcontains(r, seen, keys[i], a->line)) {
                jlist_push(r, &seen, &seen_cap, keys[i]);
                jlist_push(r, &out, &cap, list.u.list->items[i]);
            }
            jstep(r, a->line);
        }
        return out;
    }
    /* stable insertion sort on the keys, items moved alongside */
    out = mk_list(r, n);
    jval_copy(out.u.list->items, list.u.list->items, n);
    for (i = 1; i < n; i++) {
        jval  x = out.u.list->items[i], kx = keys[i];

        for (j = i; j > 0; j--) {
            int  c = jcompare(r, keys[j - 1], kx, a->line);

            jstep(r, a->line);
            if (rev ? c >= 0 : c <= 0) break;
            out.u.list->items[j] = out.u.list->items[j - 1];
            keys[j] = keys[j - 1];
        }
        out.u.list->items[j] = x;
        keys[j] = kx;
    }
    return out;
}


/* --- the filters, one function each ------------------------------------- */

static jval
filter_default(jrender *r, jval v, jargs *a)
{
    int  boolean = truthy(jarg(a, 1, "boolean", mk_bool(0)));

    (void) r;
    if (v.type == JV_UNDEF || (boolean && !truthy(v))) {
        return jarg(a, 0, "default_value", mk_cstr(""));
    }
    return v;
}


static jval
filter_safe(jrender *r, jval v, jargs *a)
{
    (void) r;
    (void) a;
    return v;
}


static jval
filter_escape(jrender *r, jval v, jargs *a)
{
    jval  s = jto_str(r, v);
    jbuf  b = { 0 };

    (void) a;
    for (size_t i = 0; i < s.u.str.n; i++) {
        const char  *esc;

        switch (s.u.str.s[i]) {
        case '&': esc = "&amp;"; break;
        case '<': esc = "&lt;"; break;
        case '>': esc = "&gt;"; break;
        case '"': esc = "&#34;"; break;
        case '\'': esc = "&#39;"; break;
        default:
            jbuf_add_t(r, &b, s.u.str.s + i, 1, jtaint_at(s, i));
            continue;
        }
        jbuf_add_from(r, &b, esc, strlen(esc), s, i, 1);
    }
    return mk_buf(&b);
}


static jval
filter_string(jrender *r, jval v, jargs *a)
{
    (void) a;
    return jto_str(r, v);
}


static jval
filter_trim(jrender *r, jval v, jargs *a)
{
    jval  chars = jarg(a, 0, "chars", mk_none());

    return jstr_strip(jto_str(r, v), chars, 1, 1);
}


static jval
filter_upper(jrender *r, jval v, jargs *a)
{
    (void) a;
    return jstr_case(r, jto_str(r, v), CASE_UPPER);
}


static jval
filter_lower(jrender *r, jval v, jargs *a)
{
    (void) a;
    return jstr_case(r, jto_str(r, v), CASE_LOWER);
}


static jval
filter_capitalize(jrender *r, jval v, jargs *a)
{
    (void) a;
    return jstr_case(r, jto_str(r, v), CASE_CAPITALIZE);
}


static jval
filter_replace(jrender *r, jval v, jargs *a)
{
    return jstr_replace(r, jto_str(r, v), jarg_str(r, a, 0, "old", NULL),
                        jarg_str(r, a, 1, "new", NULL),
                        jarg_int(r, a, 2, "count", -1), a->line);
}


static jval
filter_length(jrender *r, jval v, jargs *a)
{
    switch (v.type) {
    case JV_UNDEF: return mk_int(0);
    case JV_STR: return mk_int((long long) ju8_len(v.u.str.s, v.u.str.n));
    case JV_LIST: return mk_int((long long) v.u.list->n);
    case JV_DICT: return mk_int((long long) v.u.dict->n);
    default:
        jdie(r, a->line, "object of type '%s' has no len()", jtype_name(v));
    }
}


static jval
filter_list(jrender *r, jval v, jargs *a)
{
    jval  list = jiterate(r, v, a->line), copy;

    if (list.type == JV_LIST && v.type == JV_LIST) {
        copy = mk_list(r, list.u.list->n);
        jval_copy(copy.u.list->items, list.u.list->items, list.u.list->n);
        return copy;
    }
    return list;
}


static jval
first_or_last(jrender *r, jval v, jargs *a, int last)
{
    jval    list = jiterate(r, v, a->line);
    size_t  n = list.u.list->n;

    if (n == 0) {
        return mk_undef("\x01" "no first item, sequence was empty", 33);
    }
    return list.u.list->items[last ? n - 1 : 0];
}


static jval
filter_first(jrender *r, jval v, jargs *a)
{
    return first_or_last(r, v, a, 0);
}


static jval
filter_last(jrender *r, jval v, jargs *a)
{
    return first_or_last(r, v, a, 1);
}


static jval
filter_join(jrender *r, jval v, jargs *a)
{
    jval   attr = jarg(a, 1, "attribute", mk_undef(NULL, 0));
    char  *aname = NULL;

    if (attr.type == JV_STR) {
        aname = jalloc(r, attr.u.str.n + 1);
        memcpy(aname, attr.u.str.s, attr.u.str.n);
        aname[attr.u.str.n] = '\0';
    }
    return jstr_join(r, jarg_str(r, a, 0, "d", ""), v, aname, a->line);
}


/* dict.items() of a mapping */
static jval
dict_items(jrender *r, jval v, int line)
{
    jmethod  m = { v, JM_ITEMS };
    jargs    none;

    memset(&none, 0, sizeof(none));
    none.line = line;
    return jcall_method(r, &m, &none);
}


static jval
filter_items(jrender *r, jval v, jargs *a)
{
    if (v.type == JV_UNDEF) {
        return mk_list(r, 0);
    }
    if (v.type != JV_DICT) {
        jdie(r, a->line, "can only get item pairs from a mapping");
    }
    return dict_items(r, v, a->line);
}


static jval
filter_dictsort(jrender *r, jval v, jargs *a)
{
    jargs  none;

    if (v.type != JV_DICT) {
        jdie(r, a->line, "dictsort: needs a mapping");
    }
    /* its own arguments (case_sensitive, by, reverse) are not read */
    memset(&none, 0, sizeof(none));
    none.line = a->line;
    return sort_items(r, dict_items(r, v, a->line), &none, 0);
}


static jval
filter_selectattr(jrender *r, jval v, jargs *a)
{
    return select_items(r, v, a, 1, 1);
}


static jval
filter_rejectattr(jrender *r, jval v, jargs *a)
{
    return select_items(r, v, a, 1, 0);
}


static jval
filter_select(jrender *r, jval v, jargs *a)
{
    return select_items(r, v, a, 0, 1);
}


static jval
filter_reject(jrender *r, jval v, jargs *a)
{
    return select_items(r, v, a, 0, 0);
}


static jval
filter_float(jrender *r, jval v, jargs *a)
{
    char    tmp[64], *end;
    double  d;
    jval    s;

    if (v.type == JV_UNDEF) {
        jdie_undefined(r, a->line, v);
    }
    if (is_number(v)) {
        return mk_float(num_f(v));
    }
    if (v.type == JV_STR) {
        s = jstr_strip(v, mk_none(), 1, 1);
        if (s.u.str.n > 0 && s.u.str.n < sizeof(tmp)) {
            memcpy(tmp, s.u.str.s, s.u.str.n);
            tmp[s.u.str.n] = '\0';
            d = strtod(tmp, &end);
            if (*end == '\0') {
                return mk_float(d);
            }
        }
    }
    return jarg(a, 0, "default", mk_float(0.0));
}


static jval
filter_abs(jrender *r, jval v, jargs *a)
{
    if (v.type == JV_INT) {
        if (v.u.i == LLONG_MIN) {
            jdie(r, a->line, "integer overflow");
        }
        return mk_int(v.u.i < 0 ? -v.u.i : v.u.i);
    }
    if (v.type == JV_FLOAT) {
        return mk_float(fabs(v.u.f));
    }
    if (v.type == JV_BOOL) {
        return mk_int(v.u.b);
    }
    jdie(r, a->line, "bad operand type for abs(): '%s'", jtype_name(v));
}


static jval
filter_round(jrender *r, jval v, jargs *a)
{
    long long  prec = jarg_int(r, a, 0, "precision", 0);
    double     m = pow(10.0, (double) prec), x = num_f(v);
    jval       how;

    if (!is_number(v)) {
        jdie(r, a->line, "round: needs a number");
    }
    if (v.type != JV_FLOAT) {
        return mk_int(num_i(v));   /* round(int) */
    }
    how = jarg(a, 1, "method", mk_cstr("common"));
    /* "common" is Python's round(): half to even */
    if (str_eq(how, "floor")) {
        return mk_float(floor(x * m) / m);
    }
    if (str_eq(how, "ceil")) {
        return mk_float(ceil(x * m) / m);
    }
    return mk_float(nearbyint(x * m) / m);
}


static jval
filter_reverse(jrender *r, jval v, jargs *a)
{
    jval    list, out, sv[3];
    size_t  n;

    if (v.type == JV_STR) {
        sv[0] = mk_none();
        sv[1] = mk_none();
        sv[2] = mk_int(-1);
        return jslice(r, v, sv, a->line);
    }
    list = jiterate(r, v, a->line);
    n = list.u.list->n;
    out = mk_list(r, n);
    for (size_t i = 0; i < n; i++) {
        out.u.list->items[i] = list.u.list->items[n - 1 - i];
    }
    return out;
}


static jval
filter_sort(jrender *r, jval v, jargs *a)
{
    return sort_items(r, v, a, 0);
}


static jval
filter_unique(jrender *r, jval v, jargs *a)
{
    return sort_items(r, v, a, 1);
}


static jval
min_or_max(jrender *r, jval v, jargs *a, int max)
{
    jval  list = jiterate(r, v, a->line), best;
    int   c;

    if (list.u.list->n == 0) {
        return mk_undef("\x01" "no items in an empty sequence", 29);
    }
    best = list.u.list->items[0];
    for (size_t i = 1; i < list.u.list->n; i++) {
        c = jcompare(r, list.u.list->items[i], best, a->line);
        if (max ? c > 0 : c < 0) {
            best = list.u.list->items[i];
        }
    }
    return best;
}


static jval
filter_min(jrender *r, jval v, jargs *a)
{
    return min_or_max(r, v, a, 0);
}


static jval
filter_max(jrender *r, jval v, jargs *a)
{
    return min_or_max(r, v, a, 1);
}


static jval
filter_sum(jrender *r, jval v, jargs *a)
{
    jval  total = jarg(a, 1, "start", mk_int(0)), list;

    list = jiterate(r, v, a->line);
    for (size_t i = 0; i < list.u.list->n; i++) {
        total = jarith(r, JOP_ADD, total, list.u.list->items[i], a->line);
    }
    return total;
}


static jval
filter_wordcount(jrender *r, jval v, jargs *a)
{
    jval  words = jstr_split(r, jto_str(r, v), mk_none(), -1, a->line);

    return mk_int((long long) words.u.list->n);
}


/* --- dispatch ----------------------------------------------------------- */

typedef jval (*jfilter_fn)(jrender *r, jval v, jargs *a);

/* a filter's id is its index here plus one; aliases are entries of their own */
static const struct {
    const char  *name;
    jfilter_fn   fn;
} filters[] = {
    { "default", filter_default },
    { "d", filter_default },
    { "safe", filter_safe },
    { "e", filter_escape },
    { "escape", filter_escape },
    { "forceescape", filter_escape },
    { "tojson", filter_tojson },
    { "string", filter_string },
    { "trim", filter_trim },
    { "upper", filter_upper },
    { "lower", filter_lower },
    { "title", filter_title },
    { "capitalize", filter_capitalize },
    { "replace", filter_replace },
    { "length", filter_length },
    { "count", filter_length },
    { "list", filter_list },
    { "first", filter_first },
    { "last", filter_last },
    { "join", filter_join },
    { "items", filter_items },
    { "dictsort", filter_dictsort },
    { "selectattr", filter_selectattr },
    { "rejectattr", filter_rejectattr },
    { "select", filter_select },
    { "reject", filter_reject },
    { "map", filter_map },
    { "int", filter_int },
    { "float", filter_float },
    { "abs", filter_abs },
    { "round", filter_round },
    { "reverse", filter_reverse },
    { "sort", filter_sort },
    { "unique", filter_unique },
    { "min", filter_min },
    { "max", filter_max },
    { "sum", filter_sum },
    { "indent", filter_indent },
    { "wordcount", filter_wordcount },
};

#define NFILTERS  (int) (sizeof(filters) / sizeof(filters[0]))


int
jfilter_id(const char *name, size_t n)
{
    for (int i = 0; i < NFILTERS; i++) {
        if (strlen(filters[i].name) == n
            && memcmp(filters[i].name, name, n) == 0)
        {
            return i + 1;
        }
    }
    return 0;
}


jval
jfilter_apply(jrender *r, int id, jval v, jargs *a)
{
    if (id < 1 || id > NFILTERS) {
        jdie(r, a->line, "unknown filter");
    }
    return filters[id - 1].fn(r, v, a);
}
