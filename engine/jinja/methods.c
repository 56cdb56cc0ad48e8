/*
 * The methods of Jinja's str and dict values, with Python's semantics by
 * code point (utf8proc for case and categories): strip, split, replace,
 * join, find, count, upper/lower/title/capitalize, the is*() tests, and
 * dict items/keys/values/get. jget_attr() binds them; jcall_method() runs
 * them. Filters reuse the same helpers (trim, replace, join, upper, ...).
 *
 * defines: jcall_method, jstr_case, jstr_strip, jstr_split, jstr_replace,
 *          jstr_join, jstr_is_case
 */
#define _GNU_SOURCE     /* memmem */
#include <string.h>

#include "jinja/internal.h"


/* --- strings ------------------------------------------------------------ */

/* upper / lower / title (str.title) / capitalize, by code point */
jval
jstr_case(jrender *r, jval s, int mode)
{
    jbuf              b = { 0 };
    utf8proc_int32_t  c;
    utf8proc_uint8_t  enc[4];
    size_t            i, k;
    int               prev_cased = 0, first = 1;

    for (i = 0; i < s.u.str.n; i += k) {
        c = ju8_get(s.u.str.s + i, s.u.str.n - i, &k);
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
        jbuf_add_from(r, &b, (char *) enc, utf8proc_encode_char(c, enc), s,
                      i, k);
    }
    return mk_buf(&b);
}


static int
in_chars(jval chars, utf8proc_int32_t c)
{
    size_t            i, k;
    utf8proc_int32_t  d;

    for (i = 0; i < chars.u.str.n; i += k) {
        d = ju8_get(chars.u.str.s + i, chars.u.str.n - i, &k);
        if (d == c) {
            return 1;
        }
    }
    return 0;
}


/* str.strip([chars]): left and/or right; chars None means whitespace */
jval
jstr_strip(jval s, jval chars, int left, int right)
{
    const char        *p = s.u.str.s;
    size_t             start = 0, end = s.u.str.n, k;
    utf8proc_int32_t   c;
    int                ws = chars.type != JV_STR;

    while (left && start < end) {
        c = ju8_get(p + start, end - start, &k);
        if (ws ? !jpy_isspace(c) : !in_chars(chars, c)) break;
        start += k;
    }
    while (right && end > start) {
        size_t  b = end - 1;

        while (b > start && ((unsigned char) p[b] & 0xc0) == 0x80) b--;
        c = ju8_get(p + b, end - b, &k);
        if (ws ? !jpy_isspace(c) : !in_chars(chars, c)) break;
        end = b;
    }
    return mk_sub(s, start, end - start);
}


jval
jstr_split(jrender *r, jval s, jval sep, long long maxsplit, int line)
{
    jval         out = mk_list(r, 0);
    size_t       cap = 0, i = 0, k, n = s.u.str.n;
    const char  *p = s.u.str.s, *hit;
    utf8proc_int32_t c;

    if (sep.type == JV_STR) {
        if (sep.u.str.n == 0) {
            jdie(r, line, "empty separator");
        }
        while (maxsplit != 0
               && (hit = memmem(p + i, n - i, sep.u.str.s, sep.u.str.n))
                  != NULL)
        {
            jlist_push(r, &out, &cap, mk_sub(s, i, hit - (p + i)));
            i = hit - p + sep.u.str.n;
            maxsplit--;
            jstep(r, line);
        }
        jlist_push(r, &out, &cap, mk_sub(s, i, n - i));
        return out;
    }
    /* whitespace runs; no empty strings */
    for ( ;; ) {
        while (i < n && jpy_isspace(ju8_get(p + i, n - i, &k))) i += k;
        if (i >= n) break;
        size_t start = i;
        if (maxsplit == 0) {
            size_t end = n;

            while (end > start) {
                size_t b = end - 1;

                while (b > start && ((unsigned char) p[b] & 0xc0) == 0x80) b--;
                if (!jpy_isspace(ju8_get(p + b, end - b, &k))) break;
                end = b;
            }
            jlist_push(r, &out, &cap, mk_sub(s, start, end - start));
            break;
        }
        while (i < n && !jpy_isspace(c = ju8_get(p + i, n - i, &k))) i += k;
        jlist_push(r, &out, &cap, mk_sub(s, start, i - start));
        maxsplit--;
        jstep(r, line);
    }
    return out;
}


jval
jstr_replace(jrender *r, jval s, jval old, jval new, long long count, int line)
{
    jbuf         b = { 0 };
    size_t       i = 0, n = s.u.str.n, k;
    const char  *p = s.u.str.s, *hit;

    if (old.u.str.n == 0) {
        /* Python inserts new between every code point */
        for (i = 0; i <= n && count != 0; i += k, count--) {
            jbuf_addv(r, &b, new);
            if (i == n) {
                return mk_buf(&b);
            }
            k = ju8_step(p + i, n - i);
            jbuf_add_t(r, &b, p + i, k, jtaint_at(s, i));
            jstep(r, line);
        }
        if (i < n) {
            jbuf_add_t(r, &b, p + i, n - i, jtaint_at(s, i));
        }
        return mk_buf(&b);
    }
    while (count != 0
           && (hit = memmem(p + i, n - i, old.u.str.s, old.u.str.n)) != NULL) {
        jbuf_add_t(r, &b, p + i, hit - (p + i), jtaint_at(s, i));
        jbuf_addv(r, &b, new);
        i = hit - p + old.u.str.n;
        count--;
        jstep(r, line);
    }
    jbuf_add_t(r, &b, p + i, n - i, jtaint_at(s, i));
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


jval
jstr_join(jrender *r, jval sep, jval items, const char *attr, int line)
{
    jbuf    b = { 0 };
    jval    list = jiterate(r, items, line), item;

    for (size_t i = 0; i < list.u.list->n; i++) {
        if (i) {
            jbuf_addv(r, &b, sep);
        }
        item = list.u.list->items[i];
        if (attr != NULL) {
            item = jget_attr(r, item, attr, strlen(attr), line);
        }
        jto_str_buf(r, &b, item, 0);
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
        if (!pred(ju8_get(s.u.str.s + i, s.u.str.n - i, &k))) {
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
int
jstr_is_case(jval s, int upper)
{
    size_t            i, k;
    utf8proc_int32_t  c;
    int               cased = 0;

    for (i = 0; i < s.u.str.n; i += k) {
        c = ju8_get(s.u.str.s + i, s.u.str.n - i, &k);
        if (utf8proc_tolower(c) != c || utf8proc_toupper(c) != c) {
            if (upper ? utf8proc_toupper(c) != c : utf8proc_tolower(c) != c) {
                return 0;
            }
            cased = 1;
        }
    }
    return cased;
}


/* --- methods ------------------------------------------------------------ */

jval
jcall_method(jrender *r, jmethod *m, jargs *a)
{
    jval       s = m->self, v, out;
    long long  count;
    size_t     cap = 0;
    int        line = a->line;

    switch (m->id) {
    case JM_STRIP:
    case JM_LSTRIP:
    case JM_RSTRIP:
        v = jarg(a, 0, "chars", mk_none());
        if (v.type != JV_NONE && v.type != JV_STR) {
            jdie(r, line, "strip arg must be None or str");
        }
        return jstr_strip(s, v, m->id != JM_RSTRIP, m->id != JM_LSTRIP);
    case JM_STARTSWITH:
    case JM_ENDSWITH:
        v = jarg(a, 0, NULL, mk_undef(NULL, 0));
        if (v.type == JV_STR) {
            return mk_bool(affix_match(s, v, m->id == JM_ENDSWITH));
        }
        if (v.type == JV_LIST) {
            for (size_t i = 0; i < v.u.list->n; i++) {
                jval  x = v.u.list->items[i];

                if (x.type != JV_STR) {
                    jdie(r, line, "tuple for startswith must only contain str");
                }
                if (affix_match(s, x, m->id == JM_ENDSWITH)) {
                    return mk_bool(1);
                }
            }
            return mk_bool(0);
        }
        jdie(r, line, "startswith/endswith first arg must be str or a tuple "
             "of str, not %s", jtype_name(v));
    case JM_SPLIT:
    case JM_RSPLIT:
        v = jarg(a, 0, "sep", mk_none());
        if (v.type != JV_NONE && v.type != JV_STR) {
            jdie(r, line, "must be str or None, not %s", jtype_name(v));
        }
        count = jarg_int(r, a, 1, "maxsplit", -1);
        if (m->id == JM_RSPLIT && count >= 0) {
            jdie(r, line, "rsplit with maxsplit is not supported");
        }
        return jstr_split(r, s, v, count, line);
    case JM_REPLACE:
        return jstr_replace(r, s, jarg_str(r, a, 0, "old", NULL),
                            jarg_str(r, a, 1, "new", NULL),
                           jarg_int(r, a, 2, "count", -1), line);
    case JM_UPPER: return jstr_case(r, s, CASE_UPPER);
    case JM_LOWER: return jstr_case(r, s, CASE_LOWER);
    case JM_TITLE: return jstr_case(r, s, CASE_TITLE);
    case JM_CAPITALIZE: return jstr_case(r, s, CASE_CAPITALIZE);
    case JM_FIND:
    case JM_COUNT: {
        jval         sub = jarg_str(r, a, 0, "sub", NULL);
        const char  *hit;
        size_t       i = 0;

        count = 0;
        if (sub.u.str.n == 0) {
            return mk_int(m->id == JM_FIND ? 0
                          : (long long) ju8_len(s.u.str.s, s.u.str.n) + 1);
        }
        while ((hit = memmem(s.u.str.s + i, s.u.str.n - i, sub.u.str.s,
                             sub.u.str.n)) != NULL) {
            if (m->id == JM_FIND) {
                return mk_int((long long) ju8_len(s.u.str.s, hit - s.u.str.s));
            }
            count++;
            i = hit - s.u.str.s + sub.u.str.n;
        }
        return mk_int(m->id == JM_FIND ? -1 : count);
    }
    case JM_JOIN:
        return jstr_join(r, s, jarg(a, 0, "iterable", mk_undef(NULL, 0)), NULL,
                         line);
    case JM_SPLITLINES: {
        size_t  i = 0, start = 0, n = s.u.str.n;

        out = mk_list(r, 0);
        while (i < n) {
            if (s.u.str.s[i] == '\n' || s.u.str.s[i] == '\r') {
                jlist_push(r, &out, &cap, mk_sub(s, start, i - start));
                if (s.u.str.s[i] == '\r' && i + 1 < n
                    && s.u.str.s[i + 1] == '\n')
                {
                    i++;
                }
                start = ++i;
            } else {
                i++;
            }
        }
        if (start < n) {
            jlist_push(r, &out, &cap, mk_sub(s, start, n - start));
        }
        return out;
    }
    case JM_ISDIGIT: return mk_bool(str_all(s, pred_digit));
    case JM_ISSPACE: return mk_bool(str_all(s, jpy_isspace));
    case JM_ISALPHA: return mk_bool(str_all(s, pred_alpha));
    case JM_ISALNUM: return mk_bool(str_all(s, pred_alnum));
    case JM_ISUPPER: return mk_bool(jstr_is_case(s, 1));
    case JM_ISLOWER: return mk_bool(jstr_is_case(s, 0));
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
        jval  *found = jdict_find(s.u.dict, jarg(a, 0, "key", mk_none()));

        return found ? *found : jarg(a, 1, "default", mk_none());
    }
    case JM_CYCLE:
        if (a->npos == 0) {
            jdie(r, line, "no items for cycling given");
        }
        return a->pos[s.u.loop->i % a->npos];
    }
    jdie(r, line, "unknown method");
}
