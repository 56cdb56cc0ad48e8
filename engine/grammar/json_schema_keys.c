/*
 * JSON Schema -> GBNF, object keys: the key of an additional property
 * (any string but the declared names, so a property is never written
 * twice), patternProperties' keys (their patterns) and propertyNames
 * (a string schema, an enum or const of names); a declared name is
 * checked against their patterns at compile time with PCRE2, as
 * ECMA-262 reads them.
 *
 * defines: js_extra_key, js_rule_keys, js_key_rules
 */
#include "grammar/json_schema_int.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct {
    const char  *name;
    uint32_t    *cp;        /* the name's code points */
    int          len;
} js_key;


static int
js_key_cmp(const void *a, const void *b)
{
    const js_key  *x = a, *y = b;
    int            i;

    for (i = 0; i < x->len && i < y->len; i++) {
        if (x->cp[i] != y->cp[i]) {
            return x->cp[i] < y->cp[i] ? -1 : 1;
        }
    }
    return x->len - y->len;
}


/*
 * The rest of a key (its closing quote included) after the first d code
 * points, which keys[0..n) share, such that the key is none of them: the
 * names of the declared properties, so that an additional property never
 * repeats one (a parser keeps the last of two equal keys). Additional keys
 * have no escapes, so their text is their value.
 */
static void
js_not_keys(js_ctx *c, llm_strbuf *b, js_key *keys, int n, int d)
{
    re_class  diverge;
    int       i, j, alts = 0, ends_here = 0;

    diverge.n = 0;
    diverge.over = 0;
    js_put(c, b, "( ");
    for (i = 0; i < n; i = j) {
        if (keys[i].len == d) {
            ends_here = 1;
            j = i + 1;
            continue;
        }
        for (j = i + 1; j < n && keys[j].len > d
             && keys[j].cp[d] == keys[i].cp[d]; j++)
        {
            /* the group sharing keys[i].cp[d] */
        }
        js_put(c, b, alts++ ? " | " : "");
        re_char_lit(c, b, keys[i].cp[d]);
        js_put(c, b, " ");
        js_not_keys(c, b, keys + i, j - i, d + 1);
        re_add(&diverge, keys[i].cp[d], keys[i].cp[d]);
    }
    js_put(c, b, alts++ ? " | " : "");
    js_put(c, b, "[^");
    re_normalize(&diverge);
    if (diverge.over || diverge.n > RE_MAX_RANGES - 8) {
        js_fail(c, "json_schema: property names begin with too many "
                "different characters after a shared prefix");
    }
    for (i = 0; i < diverge.n; i++) {
        re_class_cp(c, b, diverge.lo[i]);
        if (diverge.hi[i] > diverge.lo[i]) {
            js_put(c, b, "-");
            re_class_cp(c, b, diverge.hi[i]);
        }
    }
    js_put(c, b, "\"\\\\\\x00-\\x1f] ");
    js_need(c, b, N_KCHAR, "kchar");
    js_put(c, b, "* \"\\\"\"");
    if (!ends_here) {
        js_put(c, b, " | \"\\\"\"");
    }
    js_put(c, b, " )");
}


static int
js_utf8_cps(const char *s, uint32_t *cp, int max)
{
    js_re  r;
    int    n = 0;

    r.p = s;
    r.end = s + strlen(s);
    while (r.p < r.end && n < max) {
        cp[n] = re_utf8(&r);
        if (cp[n] == 0 || cp[n] < 0x20 || cp[n] == '"' || cp[n] == '\\') {
            return -1;
        }
        n++;
    }
    return r.p == r.end ? n : -1;
}


static int js_extra_key_text(js_ctx *c, llm_strbuf *b, const char **names,
    int n);


/* an additional property's key: any string but the declared names; one
   rule for each set of names (objects often share theirs) */
int
js_extra_key(js_ctx *c, llm_strbuf *b, const char **names, int n)
{
    llm_strbuf  t;
    char        name[96];
    int         i, rc;

    if (n <= 0) {
        js_need(c, b, N_STRING, "string");
        return JS_OK;
    }
    js_buf(c, &t);
    rc = js_extra_key_text(c, &t, names, n);
    for (i = 0; rc == JS_OK && i < c->n_keys; i++) {
        if (strcmp(c->key_text[i], t.data) == 0) {
            js_putf(c, b, "%s-keys%d", c->root, c->key_id[i]);
            llm_strbuf_free(&t);
            return c->failed ? JS_ERR : JS_OK;
        }
    }
    if (rc == JS_OK) {
        i = ++c->n_ids;
        snprintf(name, sizeof(name), "%s-keys%d", c->root, i);
        rc = js_rule(c, name, &t);
        js_put(c, b, name);
        if (c->n_keys < JS_MAX_KEYS) {
            c->key_id[c->n_keys] = i;
            c->key_text[c->n_keys++] = t.data;     /* kept */
            t.data = NULL;
        }
    }
    llm_strbuf_free(&t);
    return c->failed ? JS_ERR : rc;
}


static int
js_extra_key_text(js_ctx *c, llm_strbuf *b, const char **names, int n)
{
    js_key    *keys;
    uint32_t  *cps;
    int        i, k = 0, len;
    size_t     total = 0;

    if (n == 0) {
        js_need(c, b, N_STRING, "string");
        return JS_OK;
    }
    for (i = 0; i < n; i++) {
        total += strlen(names[i]);
    }
    keys = calloc(n, sizeof(*keys));
    cps = calloc(total + 1, sizeof(*cps));
    if (keys == NULL || cps == NULL) {
        free(keys);
        free(cps);
        return js_fail(c, "json_schema: out of memory");
    }
    for (i = 0, total = 0; i < n; i++) {
        len = js_utf8_cps(names[i], cps + total, (int) strlen(names[i]));
        if (len < 0) {
            continue;   /* has an escape: no additional key can equal it */
        }
        keys[k].name = names[i];
        keys[k].cp = cps + total;
        keys[k].len = len;
        total += len;
        k++;
    }
    qsort(keys, k, sizeof(*keys), js_key_cmp);
    js_put(c, b, "\"\\\"\" ");
    js_not_keys(c, b, keys, k, 0);
    free(keys);
    free(cps);
    return c->failed ? JS_ERR : JS_OK;
}


/*
 * patternProperties and propertyNames need to know at compile time
 * whether a declared name is a key they allow. A pattern is run as
 * ECMA-262 reads it (JSON Schema's dialect), by PCRE2 with ECMAScript's
 * \uHHHH and \s: the grammar's translation matches a subset of that, so a
 * name the grammar could write as a pattern key is always found.
 */
static const char  js_ecma_space[] =
    "\\t\\n\\u000b\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f"
    "\\u205f\\u3000\\ufeff";


/* 1 when the pattern finds a match in name (patterns are not anchored),
   0 when not, JS_ERR */
static int
js_re_search(js_ctx *c, const char *re, const char *name, const char *what,
    const char *ptr)
{
    pcre2_code        *code;
    pcre2_match_data  *md;
    llm_strbuf         t;
    PCRE2_SIZE         off;
    const char        *p;
    int                in_class = 0, rc, e;

    js_buf(c, &t);
    for (p = re; *p; p++) {
        if (*p == '\\' && p[1] == 's') {
            js_put(c, &t, in_class ? "" : "[");
            js_put(c, &t, js_ecma_space);
            js_put(c, &t, in_class ? "" : "]");
            p++;
        } else if (*p == '\\' && p[1] == 'S' && !in_class) {
            js_put(c, &t, "[^");
            js_put(c, &t, js_ecma_space);
            js_put(c, &t, "]");
            p++;
        } else if (*p == '\\' && p[1]) {
            llm_strbuf_append(&t, p, 2);
            p++;
        } else {
            in_class = *p == '[' ? 1 : *p == ']' ? 0 : in_class;
            llm_strbuf_append(&t, p, 1);
        }
    }
    if (c->failed) {
        llm_strbuf_free(&t);
        return JS_ERR;
    }
    code = pcre2_compile((PCRE2_SPTR) t.data, t.len,
                         PCRE2_UTF | PCRE2_ALT_BSUX, &e, &off, NULL);
    llm_strbuf_free(&t);
    if (code == NULL) {
        js_relaxable(c, what, NULL);
        return js_fail(c, "json_schema: unsupported keyword '%s' at %s: its "
                       "pattern '%s' cannot be checked against the declared "
                       "names", what, js_at(ptr), re);
    }
    md = pcre2_match_data_create_from_pattern(code, NULL);
    rc = md ? pcre2_match(code, (PCRE2_SPTR) name, strlen(name), 0, 0, md,
                          NULL)
            : PCRE2_ERROR_NOMEMORY;
    pcre2_match_data_free(md);
    pcre2_code_free(code);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
        js_relaxable(c, what, NULL);
        return js_fail(c, "json_schema: unsupported keyword '%s' at %s: "
                       "pattern '%s' cannot be run on the name '%s'", what,
                       js_at(ptr), re, name);
    }
    return rc >= 0;
}


/* 1 when propertyNames' string schema pn accepts name, 0 when not,
   JS_ERR */
static int
js_name_allowed(js_ctx *c, const cJSON *pn, const char *name,
    const char *ptr)
{
    const cJSON  *vals = cJSON_GetObjectItemCaseSensitive(pn, "enum");
    const cJSON  *cn = cJSON_GetObjectItemCaseSensitive(pn, "const");
    const cJSON  *pat = cJSON_GetObjectItemCaseSensitive(pn, "pattern");
    const cJSON  *v;
    const char   *q;
    long          min, max, len = 0;
    int           found;

    if (cJSON_HasObjectItem(pn, "format")) {
        js_relaxable(c, "propertyNames", NULL);
        return js_fail(c, "json_schema: unsupported keyword 'propertyNames' "
                       "at %s: a 'format' for names beside declared "
                       "properties or an enum", js_at(ptr));
    }
    if (js_count(c, pn, "minLength", ptr, 0, &min) != JS_OK
        || js_count(c, pn, "maxLength", ptr, -1, &max) != JS_OK)
    {
        return JS_ERR;
    }
    for (q = name; *q; q++) {
        len += ((unsigned char) *q & 0xC0) != 0x80;     /* code points */
    }
    if (len < min || (max >= 0 && len > max)) {
        return 0;
    }
    if (cn && !(cJSON_IsString(cn) && strcmp(cn->valuestring, name) == 0)) {
        return 0;
    }
    if (vals) {
        found = 0;
        cJSON_ArrayForEach(v, vals) {
            found |= cJSON_IsString(v) && strcmp(v->valuestring, name) == 0;
        }
        if (!found) {
            return 0;
        }
    }
    if (pat) {
        if (!cJSON_IsString(pat)) {
            return js_fail(c, "json_schema: 'pattern' at %s/propertyNames is "
                           "not a string", ptr);
        }
        return js_re_search(c, pat->valuestring, name, "propertyNames", ptr);
    }
    return 1;
}


/* propertyNames: a schema of strings only (keys are strings) */
static int
js_check_names_schema(js_ctx *c, const cJSON *pn, const char *ptr)
{
    static const char *const ok[] = {
        "type", "enum", "const", "pattern", "format", "minLength",
        "maxLength", NULL
    };
    const cJSON  *k, *t;

    if (!cJSON_IsObject(pn)) {
        return js_fail(c, "json_schema: 'propertyNames' at %s is not a "
                       "schema", js_at(ptr));
    }
    for (k = pn->child; k; k = k->next) {
        if ((js_in(js_supported, k->string) || js_in(js_refused, k->string))
            && !js_in(ok, k->string))
        {
            js_relaxable(c, "propertyNames", NULL);
            return js_fail(c, "json_schema: unsupported keyword '%s' in "
                           "'propertyNames' at %s (a string schema of type, "
                           "enum, const, pattern, format, minLength, "
                           "maxLength is)", k->string, js_at(ptr));
        }
    }
    t = cJSON_GetObjectItemCaseSensitive(pn, "type");
    if (t == NULL || (cJSON_IsString(t)
                      && strcmp(t->valuestring, "string") == 0))
    {
        return JS_OK;
    }
    if (cJSON_IsArray(t)) {
        cJSON_ArrayForEach(k, t) {
            if (cJSON_IsString(k) && strcmp(k->valuestring, "string") == 0) {
                return JS_OK;
            }
        }
    }
    return JS_EMPTY;    /* no string is of its type: no key */
}


/* a key of an enum/const propertyNames, as a literal */
static void
js_key_literal(js_ctx *c, llm_strbuf *b, const char *name)
{
    llm_strbuf  t;

    js_buf(c, &t);
    js_json_string(c, &t, name);
    if (!c->failed) {
        js_lit(c, b, t.data, t.len);
    }
    llm_strbuf_free(&t);
}


/*
 * The keys of additional properties under patternProperties or
 * propertyNames (ppat: the patterns, one schema for all; pn: the names
 * schema), the declared names n of names[] not among them (checked by the
 * caller). JS_EMPTY when no key is allowed.
 */
int
js_rule_keys(js_ctx *c, llm_strbuf *b, const cJSON *ppat, const cJSON *pn,
    const char **names, int n, const char *ptr)
{
    const cJSON  *p, *vals, *cn;
    char          sub[512];
    int           alts = 0, i, rc = JS_OK;

    if (ppat) {
        js_put(c, b, "( ");
        cJSON_ArrayForEach(p, ppat) {
            js_put(c, b, alts++ ? " | " : "");
            js_child(sub, sizeof(sub), ptr, "patternProperties");
            if (js_pattern(c, p->string, sub, b) != JS_OK) {
                return JS_ERR;
            }
        }
        js_put(c, b, " )");
        return c->failed ? JS_ERR : JS_OK;
    }
    js_child(sub, sizeof(sub), ptr, "propertyNames");
    vals = cJSON_GetObjectItemCaseSensitive(pn, "enum");
    cn = cJSON_GetObjectItemCaseSensitive(pn, "const");
    if (vals == NULL && cn == NULL) {
        return js_gen_string(c, pn, sub, b);    /* n is 0 here */
    }
    /* a finite set: the names it allows, but the declared ones */
    js_put(c, b, "( ");
    for (p = vals ? vals->child : cn; p; p = vals ? p->next : NULL) {
        if (!cJSON_IsString(p)) {
            continue;
        }
        rc = js_name_allowed(c, pn, p->valuestring, ptr);
        if (rc == JS_ERR) {
            return JS_ERR;
        }
        if (rc == 0) {
            continue;
        }
        for (i = 0; i < n && strcmp(names[i], p->valuestring); i++) {
            /* declared? */
        }
        if (i < n) {
            continue;
        }
        js_put(c, b, alts++ ? " | " : "");
        js_key_literal(c, b, p->valuestring);
    }
    js_put(c, b, " )");
    return c->failed ? JS_ERR : alts ? JS_OK : JS_EMPTY;
}


/*
 * patternProperties and propertyNames against the declared names list[]:
 * a declared name that a pattern matches would need both schemas (and the
 * pattern's key rule would let it repeat), so it is refused; a declared
 * name that propertyNames rejects is left out (or, required, the object
 * accepts nothing). *ppat is the patterns (NULL: none), *pn the names
 * schema (NULL: none).
 */
int
js_key_rules(js_ctx *c, const cJSON *s, const char *ptr, js_prop *list,
    int *n, const cJSON **ppat, const cJSON **pn)
{
    const cJSON  *pp = cJSON_GetObjectItemCaseSensitive(s,
                                                         "patternProperties");
    const cJSON  *p, *first = NULL, *ap;
    llm_strbuf    scratch;
    char          sub[512];
    int           i, j, rc = 0;

    *ppat = NULL;
    *pn = cJSON_GetObjectItemCaseSensitive(s, "propertyNames");
    if (pp && !cJSON_IsObject(pp)) {
        return js_fail(c, "json_schema: 'patternProperties' at %s is not an "
                       "object", js_at(ptr));
    }
    if (*pn && (cJSON_IsTrue(*pn)
                || (cJSON_IsObject(*pn) && !js_constrains(*pn, NULL))))
    {
        *pn = NULL;     /* true, {}: any key */
    }
    if (pp && pp->child && *pn) {
        js_relaxable(c, "propertyNames", NULL);
        return js_fail(c, "json_schema: unsupported keyword 'propertyNames' "
                       "at %s: with patternProperties", js_at(ptr));
    }
    ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (ap == NULL || cJSON_IsTrue(ap)) {
        /* patterns of schemas that constrain nothing change nothing when
           every other key is allowed too */
        cJSON_ArrayForEach(p, pp) {
            if (!cJSON_IsTrue(p) && !(cJSON_IsObject(p)
                                      && !js_constrains(p, NULL)))
            {
                break;
            }
        }
        if (p == NULL) {
            pp = NULL;
        }
    }
    cJSON_ArrayForEach(p, pp) {
        if (first && !cJSON_Compare(first, p, 1)) {
            js_relaxable(c, "patternProperties", NULL);
            return js_fail(c, "json_schema: unsupported keyword "
                           "'patternProperties' at %s: patterns with "
                           "different schemas (a key that matches several "
                           "needs them all)", js_at(ptr));
        }
        first = p;
        /* our translation's error first (the key rule will need it) */
        js_buf(c, &scratch);
        js_child(sub, sizeof(sub), ptr, "patternProperties");
        rc = js_pattern(c, p->string, sub, &scratch);
        llm_strbuf_free(&scratch);
        if (rc != JS_OK) {
            js_relax_as(c, "patternProperties");
            return JS_ERR;
        }
        for (i = 0; i < *n; i++) {
            rc = js_re_search(c, p->string, list[i].name,
                              "patternProperties", ptr);
            if (rc != 0) {
                break;      /* a declared name the pattern matches */
            }
        }
        if (rc == JS_ERR) {
            return JS_ERR;
        }
        if (i < *n) {
            js_relaxable(c, "patternProperties", NULL);
            return js_fail(c, "json_schema: unsupported keyword "
                           "'patternProperties' at %s: property '%s' matches "
                           "pattern '%s' (it would need both schemas)",
                           js_at(ptr), list[i].name, p->string);
        }
        *ppat = pp;
    }
    if (*pn == NULL) {
        return c->failed ? JS_ERR : JS_OK;
    }
    if (!cJSON_IsFalse(*pn)) {
        rc = js_check_names_schema(c, *pn, ptr);
        if (rc == JS_ERR) {
            return rc;
        }
    } else {
        rc = JS_EMPTY;
    }
    /* the declared names it rejects are left out */
    for (i = 0, j = 0; i < *n; i++) {
        int  ok = rc == JS_OK ? js_name_allowed(c, *pn, list[i].name, ptr)
                              : 0;

        if (ok == JS_ERR) {
            return JS_ERR;
        }
        if (ok) {
            list[j++] = list[i];
        } else if (list[i].required) {
            return JS_EMPTY;
        }
    }
    *n = j;
    if (rc == JS_EMPTY) {
        *pn = NULL;     /* no key at all: additional ones are left out */
        return JS_NOKEYS;
    }
    return c->failed ? JS_ERR : JS_OK;
}
