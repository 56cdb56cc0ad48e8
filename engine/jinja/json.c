/*
 * JSON both ways: the tojson filter's text is transformers' json.dumps
 * (ensure_ascii=False by default, no HTML escaping, Python's float repr,
 * indent / separators / sort_keys as json.dumps), and the render context
 * arrives as cJSON, read as Python's json.loads would (integral numbers are
 * int).
 *
 * defines: jjson_dump, jfrom_cjson
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "jinja/internal.h"


/* --- values to JSON (Python's json.dumps) ------------------------------- */

static void
json_str(jrender *r, jbuf *b, jval s, int ensure_ascii)
{
    const char  *p = s.u.str.s;
    size_t       i, k, n = s.u.str.n;
    char         esc[16];
    utf8proc_int32_t c;

    jbuf_add(r, b, "\"", 1);
    for (i = 0; i < n; i += k) {
        c = ju8_get(p + i, n - i, &k);
        switch (c) {
        case '"': jbuf_add_from(r, b, "\\\"", 2, s, i, k); continue;
        case '\\': jbuf_add_from(r, b, "\\\\", 2, s, i, k); continue;
        case '\n': jbuf_add_from(r, b, "\\n", 2, s, i, k); continue;
        case '\r': jbuf_add_from(r, b, "\\r", 2, s, i, k); continue;
        case '\t': jbuf_add_from(r, b, "\\t", 2, s, i, k); continue;
        case '\b': jbuf_add_from(r, b, "\\b", 2, s, i, k); continue;
        case '\f': jbuf_add_from(r, b, "\\f", 2, s, i, k); continue;
        }
        if (c < 0x20 || (ensure_ascii && c > 0x7e)) {
            if (c >= 0x10000) {
                snprintf(esc, sizeof(esc), "\\u%04x\\u%04x",
                         0xd800 + ((c - 0x10000) >> 10),
                         0xdc00 + ((c - 0x10000) & 0x3ff));
            } else {
                snprintf(esc, sizeof(esc), "\\u%04x", (unsigned) c);
            }
            jbuf_add_from(r, b, esc, strlen(esc), s, i, k);
            continue;
        }
        jbuf_add_t(r, b, p + i, k, jtaint_at(s, i));
    }
    jbuf_add(r, b, "\"", 1);
}


static void
json_newline(jrender *r, jbuf *b, const jjson_opts *o, int level)
{
    jbuf_add(r, b, "\n", 1);
    for (int i = 0; i < o->indent * level; i++) {
        jbuf_add(r, b, " ", 1);
    }
}


void
jjson_dump(jrender *r, jbuf *b, jval v, const jjson_opts *o, int level)
{
    char    num[48];
    size_t  i, n, *order;

    if (level > r->lim.max_depth * 4) {
        jdie(r, 0, "tojson: value nested too deeply");
    }
    switch (v.type) {
    case JV_NONE: jbuf_str(r, b, "null"); return;
    case JV_BOOL: jbuf_str(r, b, v.u.b ? "true" : "false"); return;
    case JV_INT: jto_str_buf(r, b, v, 0); return;
    case JV_FLOAT:
        if (isnan(v.u.f)) jbuf_str(r, b, "NaN");
        else if (isinf(v.u.f)) {
            jbuf_str(r, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        }
        else {
            jfloat_repr(v.u.f, num, sizeof(num));
            jbuf_str(r, b, num);
        }
        return;
    case JV_STR: json_str(r, b, v, o->ensure_ascii); return;
    case JV_LIST:
        if (v.u.list->is_tuple >= JLIST_DICT_ITEMS) {
            jdie(r, 0, "Object of type %s is not JSON serializable",
                 v.u.list->is_tuple == JLIST_DICT_ITEMS ? "dict_items"
                : v.u.list->is_tuple == JLIST_DICT_KEYS ? "dict_keys"
                : "dict_values");
        }
        if (v.u.list->n == 0) {
            jbuf_str(r, b, "[]");
            return;
        }
        jbuf_add(r, b, "[", 1);
        for (i = 0; i < v.u.list->n; i++) {
            if (i) jto_str_buf(r, b, o->item_sep, 0);
            if (o->indent >= 0) json_newline(r, b, o, level + 1);
            jjson_dump(r, b, v.u.list->items[i], o, level + 1);
        }
        if (o->indent >= 0) json_newline(r, b, o, level);
        jbuf_add(r, b, "]", 1);
        return;
    case JV_DICT:
        n = v.u.dict->n;
        if (n == 0) {
            jbuf_str(r, b, "{}");
            return;
        }
        order = jalloc(r, n * sizeof(size_t));
        for (i = 0; i < n; i++) {
            order[i] = i;
        }
        if (o->sort_keys) {
            /* insertion sort: dicts in templates are small */
            for (i = 1; i < n; i++) {
                size_t  k = order[i], j = i;

                while (j > 0 && jcompare(r, v.u.dict->keys[order[j - 1]],
                                         v.u.dict->keys[k], 0) > 0) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = k;
            }
        }
        jbuf_add(r, b, "{", 1);
        for (i = 0; i < n; i++) {
            jval  key = v.u.dict->keys[order[i]];

            if (i) jto_str_buf(r, b, o->item_sep, 0);
            if (o->indent >= 0) json_newline(r, b, o, level + 1);
            if (key.type == JV_STR) {
                json_str(r, b, key, o->ensure_ascii);
            } else if (key.type == JV_NONE || key.type == JV_BOOL
                       || is_number(key)) {
                jbuf_add(r, b, "\"", 1);
                jjson_dump(r, b, key, o, level + 1);
                jbuf_add(r, b, "\"", 1);
            } else {
                jdie(r, 0, "tojson: keys must be str, int, float, bool or "
                     "None");
            }
            jto_str_buf(r, b, o->key_sep, 0);
            jjson_dump(r, b, v.u.dict->vals[order[i]], o, level + 1);
        }
        if (o->indent >= 0) json_newline(r, b, o, level);
        jbuf_add(r, b, "}", 1);
        return;
    default:
        jdie(r, 0, "Object of type %s is not JSON serializable", jtype_name(v));
    }
}


/* --- cJSON to values ---------------------------------------------------- */

jval
jfrom_cjson(jrender *r, const cJSON *j, int depth, int taint)
{
    jval          v, key;
    const cJSON  *c;
    size_t        n, i;

    if (depth > 200) {
        jdie(r, 1, "context nested too deeply");
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
        v = mk_str(j->valuestring, strlen(j->valuestring));
        v.taint = taint ? JT_ALL : JT_NONE;
        return v;
    }
    if (cJSON_IsArray(j)) {
        n = (size_t) cJSON_GetArraySize(j);
        v = mk_list(r, n);
        i = 0;
        cJSON_ArrayForEach(c, j) {
            v.u.list->items[i++] = jfrom_cjson(r, c, depth + 1, taint);
        }
        return v;
    }
    if (cJSON_IsObject(j)) {
        v = mk_dict(r, JV_DICT);
        cJSON_ArrayForEach(c, j) {
            /* keys too: a template may print a request's keys */
            key = mk_cstr(c->string ? c->string : "");
            key.taint = taint ? JT_ALL : JT_NONE;
            jdict_set(r, v.u.dict, key, jfrom_cjson(r, c, depth + 1, taint));
        }
        return v;
    }
    return mk_undef("", 0);
}
