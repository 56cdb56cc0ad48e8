/*
 * JSON Schema -> GBNF. One pass over the schema (cJSON), writing an
 * expression for each subschema; a subschema a $ref points to becomes a
 * rule of its own, so recursive schemas give recursive rules. allOf is
 * merged into one schema before it is written; anyOf and oneOf become
 * alternatives. docs/json_schema.md lists what is enforced, what is
 * approximated (property order, oneOf as anyOf, whitespace and number caps)
 * and what is refused.
 *
 * The grammar matches the JSON text a schema accepts in one form: tokens
 * separated by at most max_ws blanks, properties in the schema's order,
 * strings with the JSON escapes, numbers of at most 16 integer and 16
 * fraction digits. Every text it accepts is valid for the schema (the
 * property test in t/unit/test_json_schema.c checks it against python
 * jsonschema); not every valid text is accepted.
 *
 * This file is the recursive part: a subschema by its types, objects,
 * arrays, enum and const, $ref rules, allOf and anyOf, the shared rules
 * and the entry point; the helpers it calls are in the files below it
 * (json_schema_int.h lists them).
 *
 * defines: llm_json_schema_compile, llm_json_schema_to_gbnf
 */
#include "grammar/json_schema.h"
#include "grammar/json_schema_int.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static int js_gen(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e);


/* --- alternatives ----------------------------------------------------- */

/* generates s, adding it to the alternatives when it accepts something */
static int
js_alt_gen(js_ctx *c, js_alts *a, const cJSON *s, const char *ptr)
{
    llm_strbuf  t;
    int         rc;

    js_buf(c, &t);
    rc = js_gen(c, s, ptr, &t);
    if (rc == JS_OK) {
        js_alt_add(c, a, t.data);
    }
    llm_strbuf_free(&t);
    return rc == JS_ERR ? JS_ERR : JS_OK;
}


/* --- objects ---------------------------------------------------------- */

/* kv ::= "\"name\"" ws ":" ws value */
static int
js_kv(js_ctx *c, js_prop *p, const cJSON *extra, int extra_any,
    const char *ptr, char *name, size_t name_len)
{
    llm_strbuf  body, v;
    char        sub[512];
    int         rc;

    js_buf(c, &body);
    js_buf(c, &v);
    if (p->schema) {
        char  props[512];

        js_child(props, sizeof(props), ptr, "properties");
        js_child(sub, sizeof(sub), props, p->name);
        rc = js_gen(c, p->schema, sub, &v);
    } else if (extra_any) {
        js_need(c, &v, N_VALUE, "value");
        rc = JS_OK;
    } else {
        js_child(sub, sizeof(sub), ptr, "additionalProperties");
        rc = js_gen(c, extra, sub, &v);
    }
    if (rc == JS_OK) {
        js_name(c, name, name_len, "kv");
        js_json_string(c, &body, p->name);
        if (!c->failed) {
            /* the key's JSON text as a literal */
            llm_strbuf  key;

            js_buf(c, &key);
            js_lit(c, &key, body.data, body.len);
            body.len = 0;
            body.data[0] = '\0';
            js_put(c, &body, key.data);
            llm_strbuf_free(&key);
        }
        js_put(c, &body, " ");
        js_need(c, &body, N_WS, "ws");
        js_put(c, &body, " \":\" ");
        js_need(c, &body, N_WS, "ws");
        js_put(c, &body, " ");
        js_put(c, &body, v.data);
        rc = js_rule(c, name, &body);
    }
    llm_strbuf_free(&body);
    llm_strbuf_free(&v);
    return rc;
}


/* ws "," ws */
static void
js_comma(js_ctx *c, llm_strbuf *b)
{
    js_need(c, b, N_WS, "ws");
    js_put(c, b, " \",\" ");
    js_need(c, b, N_WS, "ws");
    js_put(c, b, " ");
}


/* an object being written, step by step */
typedef struct {
    const cJSON    *ap;         /* additionalProperties */
    const cJSON    *ppat;       /* the patternProperties that key extras */
    const cJSON    *pn;         /* propertyNames, when it constrains */
    js_prop        *list;       /* declared, then required-only names */
    const char    **names;
    int             n;
    int             n_req;
    int             extras;     /* additional properties allowed */
    int             extra_any;  /* ... of any value */
    int             keyed;      /* patternProperties or propertyNames */
    long            minp, maxp;
    char            name[96];   /* the object's rule */
    char            xname[96];  /* an additional property's kv rule */
} js_obj;


/* the object keywords' shapes, counts and what they allow */
static int
js_obj_read(js_ctx *c, const cJSON *s, const char *ptr, js_obj *o)
{
    const cJSON  *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON  *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON  *r, *pp, *pnames;

    memset(o, 0, sizeof(*o));
    o->ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) {
        return js_fail(c, "json_schema: 'properties' at %s is not an object",
                       js_at(ptr));
    }
    if (req && !cJSON_IsArray(req)) {
        return js_fail(c, "json_schema: 'required' at %s is not an array",
                       js_at(ptr));
    }
    cJSON_ArrayForEach(r, req) {
        if (!cJSON_IsString(r)) {
            return js_fail(c, "json_schema: 'required' at %s has a "
                           "non-string", js_at(ptr));
        }
    }
    if (o->ap && !cJSON_IsBool(o->ap) && !cJSON_IsObject(o->ap)) {
        return js_fail(c, "json_schema: 'additionalProperties' at %s is not "
                       "a schema", js_at(ptr));
    }
    if (js_count(c, s, "minProperties", ptr, 0, &o->minp) != JS_OK
        || js_count(c, s, "maxProperties", ptr, -1, &o->maxp) != JS_OK)
    {
        return JS_ERR;
    }
    o->extras = o->ap == NULL || !cJSON_IsFalse(o->ap);
    o->extra_any = o->ap == NULL || cJSON_IsTrue(o->ap);
    pp = cJSON_GetObjectItemCaseSensitive(s, "patternProperties");
    pnames = cJSON_GetObjectItemCaseSensitive(s, "propertyNames");
    o->keyed = (pp && pp->child) || (pnames && !cJSON_IsTrue(pnames));
    return JS_OK;
}


/* {"type": "object"} and the like: any object */
static int
js_obj_any(const cJSON *s, const js_obj *o)
{
    return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(s,
                                                          "properties")) == 0
           && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(s,
                                                          "required")) == 0
           && o->extra_any && o->minp == 0 && o->maxp < 0 && !o->keyed;
}


/* the declared properties in order, then required names not among them
   (with the additionalProperties schema) */
static int
js_obj_list(js_ctx *c, const cJSON *s, const char *ptr, js_obj *o)
{
    const cJSON  *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON  *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON  *pp = cJSON_GetObjectItemCaseSensitive(s,
                                                        "patternProperties");
    const cJSON  *p, *r;
    int           cap, i;

    cap = cJSON_GetArraySize(props) + cJSON_GetArraySize(req) + 1;
    o->list = calloc(cap, sizeof(*o->list));
    o->names = calloc(cap, sizeof(*o->names));
    if (o->list == NULL || o->names == NULL) {
        return js_fail(c, "json_schema: out of memory");
    }
    cJSON_ArrayForEach(p, props) {
        o->list[o->n].name = p->string;
        o->list[o->n].schema = p;
        o->list[o->n].required = js_required(req, p->string);
        o->n++;
    }
    cJSON_ArrayForEach(r, req) {
        for (i = 0; i < o->n && strcmp(o->list[i].name, r->valuestring); i++) {
            /* declared? */
        }
        if (i < o->n) {
            continue;
        }
        if (!o->extras && pp && pp->child) {
            js_relaxable(c, "patternProperties", NULL);
            return js_fail(c, "json_schema: unsupported keyword "
                           "'patternProperties' at %s: with '%s' required "
                           "but not in properties", js_at(ptr),
                           r->valuestring);
        }
        if (!o->extras) {
            return JS_EMPTY;    /* required but not allowed */
        }
        o->list[o->n].name = r->valuestring;
        o->list[o->n].schema = NULL;
        o->list[o->n].required = 1;
        o->n++;
    }
    return JS_OK;
}


/* patternProperties, propertyNames: the keys of additional ones */
static int
js_obj_keys(js_ctx *c, const cJSON *s, const char *ptr, js_obj *o)
{
    int  rc, i;

    rc = js_key_rules(c, s, ptr, o->list, &o->n, &o->ppat, &o->pn);
    if (rc == JS_ERR || rc == JS_EMPTY) {
        return rc;
    }
    if (rc == JS_NOKEYS) {
        o->extras = 0;
    }
    if (o->ppat) {
        o->extras = 1;      /* keys that match no pattern are left out */
        o->extra_any = 0;
    }
    if (o->pn && o->extras && o->n > 0
        && !cJSON_HasObjectItem(o->pn, "enum")
        && !cJSON_HasObjectItem(o->pn, "const"))
    {
        js_relaxable(c, "propertyNames", NULL);
        return js_fail(c, "json_schema: unsupported keyword 'propertyNames' "
                       "at %s: a pattern or length for additional keys "
                       "beside properties (an additional key must not "
                       "repeat one)", js_at(ptr));
    }
    for (i = 0; i < o->n; i++) {
        o->names[i] = o->list[i].name;
    }
    return JS_OK;
}


/* each property's kv rule; one that accepts nothing is left out (or the
   object accepts nothing, when it is required) */
static int
js_obj_kvs(js_ctx *c, js_obj *o, const char *ptr)
{
    int  i, rc;

    for (i = 0; i < o->n; i++) {
        rc = js_kv(c, &o->list[i], o->ap, o->extra_any, ptr, o->list[i].kv,
                   sizeof(o->list[i].kv));
        if (rc == JS_ERR || (rc == JS_EMPTY && o->list[i].required)) {
            return rc;
        }
        if (rc == JS_EMPTY) {
            o->list[i].kv[0] = '\0';
        }
        o->n_req += o->list[i].required;
    }
    return JS_OK;
}


/* an additional property's value: the pattern's schema, any value or the
   additionalProperties schema */
static int
js_obj_extra_value(js_ctx *c, js_obj *o, const char *ptr, llm_strbuf *v)
{
    char  sub[512], pat[512];

    if (o->ppat) {
        js_child(pat, sizeof(pat), ptr, "patternProperties");
        js_child(sub, sizeof(sub), pat, o->ppat->child->string);
        return js_gen(c, o->ppat->child, sub, v);
    }
    if (o->extra_any) {
        js_need(c, v, N_VALUE, "value");
        return JS_OK;
    }
    js_child(sub, sizeof(sub), ptr, "additionalProperties");
    return js_gen(c, o->ap, sub, v);
}


/* additional properties: xname ::= key ws ":" ws value; none when no key
   or no value is allowed */
static int
js_obj_extra(js_ctx *c, js_obj *o, const char *ptr)
{
    llm_strbuf  xkey, xkv, kv;
    int         rc;

    o->xname[0] = '\0';
    if (!o->extras) {
        return JS_OK;
    }
    js_buf(c, &xkey);
    js_buf(c, &xkv);
    rc = o->ppat || o->pn
         ? js_rule_keys(c, &xkey, o->ppat, o->pn, o->names, o->n, ptr)
         : js_extra_key(c, &xkey, o->names, o->n);
    if (rc == JS_OK) {
        rc = js_obj_extra_value(c, o, ptr, &xkv);
    }
    if (rc == JS_OK) {
        js_buf(c, &kv);
        js_put(c, &kv, xkey.data);
        js_put(c, &kv, " ");
        js_need(c, &kv, N_WS, "ws");
        js_put(c, &kv, " \":\" ");
        js_need(c, &kv, N_WS, "ws");
        js_put(c, &kv, " ");
        js_put(c, &kv, xkv.data);
        js_name(c, o->xname, sizeof(o->xname), "kv");
        rc = js_rule(c, o->xname, &kv);
        llm_strbuf_free(&kv);
    }
    llm_strbuf_free(&xkey);
    llm_strbuf_free(&xkv);
    if (rc == JS_EMPTY) {
        o->xname[0] = '\0';
        o->extras = 0;
        rc = JS_OK;
    }
    return rc;
}


/* minProperties / maxProperties: duplicate additional keys would count
   once, so only what the declared properties decide is enforced */
static int
js_obj_counts(js_ctx *c, const js_obj *o, const char *ptr)
{
    int  n_decl = 0, i;

    if (o->n > 0 || !o->extras) {
        for (i = 0; i < o->n; i++) {
            n_decl += o->list[i].kv[0] != '\0';
        }
        if (!o->extras && o->minp > n_decl) {
            return JS_EMPTY;
        }
        /* at least one property is what the f-chain says, at most one a
           choice of one */
        if (o->minp > (o->n_req > 0 ? o->n_req : 1)
            || (o->maxp > 1 && (o->extras || o->maxp < n_decl)))
        {
            if (o->maxp >= 0 && o->maxp < o->n_req) {
                return JS_EMPTY;
            }
            js_relaxable(c, "minProperties/maxProperties", NULL);
            return js_fail(c, "json_schema: minProperties/maxProperties at "
                           "%s with properties is not supported (beyond "
                           "what required and additionalProperties say)",
                           js_at(ptr));
        }
    } else if (o->minp > 1) {
        js_relaxable(c, "minProperties", NULL);
        return js_fail(c, "json_schema: minProperties %ld at %s is not "
                       "supported (over 1, with only additional properties)",
                       o->minp, js_at(ptr));
    }
    return o->maxp >= 0 && o->maxp < o->minp ? JS_EMPTY : JS_OK;
}


/* "{" ws ( ( x ) ws )? "}", the group required when must */
static void
js_obj_braces(js_ctx *c, llm_strbuf *body, const char *x, int must)
{
    js_put(c, body, "\"{\" ");
    js_need(c, body, N_WS, "ws");
    if (x) {
        js_put(c, body, " ( ");
        js_put(c, body, x);
        js_put(c, body, " ");
        js_need(c, body, N_WS, "ws");
        js_put(c, body, must ? " )" : " )?");
    }
    js_put(c, body, " \"}\"");
}


/* one property at most: the required one, or any one of them */
static int
js_obj_one(js_ctx *c, const js_obj *o, llm_strbuf *body)
{
    llm_strbuf  alt;
    int         alts = 0, i, must = o->n_req || o->minp;

    js_buf(c, &alt);
    js_put(c, &alt, "( ");
    for (i = 0; i < o->n; i++) {
        if (o->list[i].kv[0] && (o->n_req == 0 || o->list[i].required)) {
            js_put(c, &alt, alts++ ? " | " : "");
            js_put(c, &alt, o->list[i].kv);
        }
    }
    if (o->extras && o->n_req == 0) {
        js_put(c, &alt, alts++ ? " | " : "");
        js_put(c, &alt, o->xname);
    }
    js_put(c, &alt, " )");
    js_obj_braces(c, body, alts ? alt.data : NULL, must);
    llm_strbuf_free(&alt);
    return alts || !must ? js_rule(c, o->name, body) : JS_EMPTY;
}


/* additional properties only: "{" ws ( x ( ws "," ws x ){0,max-1} ws )?
   "}" */
static int
js_obj_extras_only(js_ctx *c, const js_obj *o, llm_strbuf *body)
{
    llm_strbuf  x;

    if (!o->extras || o->maxp == 0) {
        js_obj_braces(c, body, NULL, 0);
        return js_rule(c, o->name, body);
    }
    js_buf(c, &x);
    js_put(c, &x, o->xname);
    js_put(c, &x, " ( ");
    js_comma(c, &x);
    js_put(c, &x, o->xname);
    js_put(c, &x, " )");
    js_rep(c, &x, 0, o->maxp < 0 ? -1 : o->maxp - 1);
    js_obj_braces(c, body, x.data, o->minp != 0);
    llm_strbuf_free(&x);
    return js_rule(c, o->name, body);
}


/* name-aI: the properties from I on, after one has been written (each
   with its comma); the additional ones after all: ( ws "," ws x )* */
static void
js_obj_a(js_ctx *c, const js_obj *o, int i, const char *rest, char *a,
    size_t a_len)
{
    llm_strbuf  t;
    int         j;

    snprintf(a, a_len, "%s-a%d", o->name, i);
    js_buf(c, &t);
    if (i == o->n) {
        js_put(c, &t, "( ");
        js_comma(c, &t);
        js_put(c, &t, o->xname);
        js_put(c, &t, " )*");
        js_rule(c, a, &t);
        llm_strbuf_free(&t);
        return;
    }
    for (j = 0; j < i && o->list[j].kv[0] == '\0'; j++) {
        /* a kept property before I? */
    }
    /* aI ::= (ws "," ws kvI)? a(I+1), for the kvs before it */
    js_put(c, &t, o->list[i].required ? "" : "( ");
    js_comma(c, &t);
    js_put(c, &t, o->list[i].kv);
    js_put(c, &t, o->list[i].required ? "" : " )?");
    if (rest[0]) {
        js_put(c, &t, " ");
        js_put(c, &t, rest);
    }
    if (j < i) {
        js_rule(c, a, &t);
    }
    llm_strbuf_free(&t);
}


/* name-fI: from I on, none written yet, at least one to write:
   fI ::= kvI a(I+1) | f(I+1) (optional); fN ::= x a(N) */
static void
js_obj_f(js_ctx *c, const js_obj *o, int i, const char *rest,
    const char *prev, char *f, size_t f_len)
{
    llm_strbuf  t;
    int         optional = i < o->n && !o->list[i].required;

    snprintf(f, f_len, "%s-f%d", o->name, i);
    js_buf(c, &t);
    js_put(c, &t, i == o->n ? o->xname : o->list[i].kv);
    if (rest[0]) {
        js_put(c, &t, " ");
        js_put(c, &t, rest);
    }
    if (optional && prev[0]) {
        js_put(c, &t, " | ");
        js_put(c, &t, prev);
    }
    js_rule(c, f, &t);
    llm_strbuf_free(&t);
}


/* declared properties: required ones must be there, optional ones may be
   left out; additional ones come last */
static int
js_obj_chain(js_ctx *c, const js_obj *o, llm_strbuf *body)
{
    char  rest[128], prev[128], a[128], f[128];
    int   i;

    rest[0] = '\0';     /* name-a(I+1), when there is one */
    prev[0] = '\0';     /* name-f(I+1), when there is one */
    if (o->extras) {
        js_obj_a(c, o, o->n, rest, rest, sizeof(rest));
        js_obj_f(c, o, o->n, rest, prev, prev, sizeof(prev));
    }
    for (i = o->n - 1; i >= 0; i--) {
        if (o->list[i].kv[0] == '\0') {
            continue;
        }
        js_obj_a(c, o, i, rest, a, sizeof(a));
        js_obj_f(c, o, i, rest, prev, f, sizeof(f));
        snprintf(rest, sizeof(rest), "%s", a);
        snprintf(prev, sizeof(prev), "%s", f);
    }
    js_obj_braces(c, body, prev[0] ? prev : NULL, o->n_req || o->minp);
    return js_rule(c, o->name, body);
}


/* the object's rule, in the form its counts allow */
static int
js_obj_write(js_ctx *c, js_obj *o, llm_strbuf *e)
{
    llm_strbuf  body;
    int         rc;

    js_buf(c, &body);
    js_name(c, o->name, sizeof(o->name), "object");
    if (o->n > 0 && o->maxp == 1) {
        rc = js_obj_one(c, o, &body);
    } else if (o->n == 0) {
        rc = js_obj_extras_only(c, o, &body);
    } else {
        rc = js_obj_chain(c, o, &body);
    }
    llm_strbuf_free(&body);
    if (rc == JS_OK) {
        js_put(c, e, o->name);
    }
    return rc;
}


static int
js_gen_object(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    js_obj  o;
    int     rc;

    if (js_obj_read(c, s, ptr, &o) != JS_OK) {
        return JS_ERR;
    }
    if (js_obj_any(s, &o)) {
        js_put(c, e, c->root);
        js_put(c, e, "-object");
        c->need |= N_VALUE;
        return JS_OK;
    }
    rc = js_obj_list(c, s, ptr, &o);
    if (rc == JS_OK) {
        rc = js_obj_keys(c, s, ptr, &o);
    }
    if (rc == JS_OK) {
        c->cdepth++;
        rc = js_obj_kvs(c, &o, ptr);
        if (rc == JS_OK) {
            rc = js_obj_extra(c, &o, ptr);
        }
        if (rc == JS_OK) {
            rc = js_obj_counts(c, &o, ptr);
        }
        if (rc == JS_OK) {
            rc = js_obj_write(c, &o, e);
        }
        c->cdepth--;
    }
    free(o.list);
    free(o.names);
    return c->failed ? JS_ERR : rc;
}


/* --- arrays ----------------------------------------------------------- */

static int js_json_value(js_ctx *c, llm_strbuf *b, const cJSON *v,
    const char *ptr);

#define JS_MAX_UNIQUE   8       /* values of uniqueItems: 2^8 rules */


/* the values an items schema of enum, const, boolean or null allows (at
   most JS_MAX_UNIQUE, all different); -1 when it is another schema */
static int
js_unique_values(js_ctx *c, const cJSON *items, const char *ptr,
    const cJSON **vals)
{
    static const cJSON  t = { .type = cJSON_True };
    static const cJSON  f = { .type = cJSON_False };
    static const cJSON  z = { .type = cJSON_NULL };
    const cJSON        *en, *v, *k;
    int                 mask, n = 0, i;

    if (!cJSON_IsObject(items) || js_types(c, items, ptr, &mask) != JS_OK) {
        return -1;
    }
    for (k = items->child; k; k = k->next) {
        if ((js_in(js_supported, k->string) || js_in(js_refused, k->string))
            && strcmp(k->string, "enum") && strcmp(k->string, "const")
            && strcmp(k->string, "type"))
        {
            return -1;
        }
    }
    en = cJSON_GetObjectItemCaseSensitive(items, "enum");
    v = en ? en->child : cJSON_GetObjectItemCaseSensitive(items, "const");
    if (!en && !v) {
        if (mask & ~(T_BOOL | T_NULL)) {
            return -1;
        }
        en = NULL;
        if (mask & T_BOOL) {
            vals[n++] = &t;
            vals[n++] = &f;
        }
        if (mask & T_NULL) {
            vals[n++] = &z;
        }
        return n;
    }
    for (; v; v = en ? v->next : NULL) {
        if (!(js_value_type(v) & mask)) {
            continue;
        }
        for (i = 0; i < n && !cJSON_Compare(vals[i], v, 1); i++) {
            /* a value twice? */
        }
        if (i < n || n == JS_MAX_UNIQUE) {
            return -1;
        }
        vals[n++] = v;
    }
    return n;
}


/* name-<used> ::= "" (when enough) | ws "," ws vI name-<used + I> ...: the
   values not yet used, while under max */
static void
js_unique_rule(js_ctx *c, const char *name, char (*lit)[256], int n,
    unsigned used, long min, long max)
{
    llm_strbuf  b;
    char        rule[128];
    int         i, pop = __builtin_popcount(used), alts = 0;

    js_buf(c, &b);
    if (pop >= min) {
        js_put(c, &b, "\"\"");
        alts++;
    }
    for (i = 0; i < n && (max < 0 || pop < max); i++) {
        if (used & (1u << i)) {
            continue;
        }
        js_put(c, &b, alts++ ? " | " : "");
        js_comma(c, &b);
        js_putf(c, &b, "%s %s-%u", lit[i], name, used | (1u << i));
    }
    snprintf(rule, sizeof(rule), "%s-%u", name, used);
    js_rule(c, rule, &b);
    llm_strbuf_free(&b);
}


/* 1 when s asks for unique items and has room for two */
static int
js_unique_wanted(const cJSON *s)
{
    const cJSON  *mx = cJSON_GetObjectItemCaseSensitive(s, "maxItems");

    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "uniqueItems"))
           && !(cJSON_IsNumber(mx) && mx->valuedouble <= 1);
}


/* uniqueItems over a few values: the state is the set of values used */
static int
js_gen_unique(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    const cJSON  *vals[JS_MAX_UNIQUE];
    char          lit[JS_MAX_UNIQUE][256], name[96], sub[512];
    llm_strbuf    j, l;
    unsigned      used;
    long          min, max;
    int           n, i;

    if (js_count(c, s, "minItems", ptr, 0, &min) != JS_OK
        || js_count(c, s, "maxItems", ptr, -1, &max) != JS_OK)
    {
        return JS_ERR;
    }
    js_child(sub, sizeof(sub), ptr, "items");
    n = cJSON_HasObjectItem(s, "prefixItems") ? -1
        : js_unique_values(c, cJSON_GetObjectItemCaseSensitive(s, "items"),
                           sub, vals);
    if (n < 0) {
        js_relaxable(c, "uniqueItems", NULL);
        return js_fail(c, "json_schema: unsupported keyword 'uniqueItems' at "
                       "%s: enforced on items of at most %d values (an enum, "
                       "a const, boolean, null)", js_at(ptr), JS_MAX_UNIQUE);
    }
    if (min > n || (max >= 0 && max < min)) {
        return JS_EMPTY;
    }
    for (i = 0; i < n; i++) {
        js_buf(c, &j);
        js_buf(c, &l);
        js_json_value(c, &j, vals[i], sub);
        js_lit(c, &l, j.data ? j.data : "", j.len);
        snprintf(lit[i], sizeof(lit[i]), "%s", l.data ? l.data : "");
        if (l.len >= sizeof(lit[i])) {
            js_relaxable(c, "uniqueItems", NULL);
            js_fail(c, "json_schema: unsupported keyword 'uniqueItems' at "
                    "%s: a value of its items over 255 bytes", js_at(ptr));
        }
        llm_strbuf_free(&j);
        llm_strbuf_free(&l);
    }
    js_name(c, name, sizeof(name), "uniq");
    for (used = 1; used < (1u << n) && !c->failed; used++) {
        if (max < 0 || __builtin_popcount(used) <= max) {
            js_unique_rule(c, name, lit, n, used, min, max);
        }
    }
    js_put(c, e, "\"[\" ");
    js_need(c, e, N_WS, "ws");
    if (n > 0 && max != 0) {
        js_put(c, e, " ( (");
        for (i = 0; i < n; i++) {
            js_putf(c, e, "%s %s %s-%u", i ? " |" : "", lit[i], name, 1u << i);
        }
        js_put(c, e, " ) ");
        js_need(c, e, N_WS, "ws");
        js_put(c, e, min > 0 ? " )" : " )?");
    }
    js_put(c, e, " \"]\"");
    return c->failed ? JS_ERR : JS_OK;
}

static int
js_gen_array(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    const cJSON  *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON  *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON  *tail, *it;
    const char   *tail_key = "items";
    char          name[96], sub[512], **elem = NULL;
    llm_strbuf    body, t, tv;
    long          min, max;
    int           k = 0, i, rc = JS_OK, tail_ok;

    if (js_count(c, s, "minItems", ptr, 0, &min) != JS_OK
        || js_count(c, s, "maxItems", ptr, -1, &max) != JS_OK)
    {
        return JS_ERR;
    }
    /* draft 2020-12: prefixItems + items; before it: items as an array +
       additionalItems */
    if (prefix && cJSON_IsArray(items)) {
        return js_fail(c, "json_schema: 'prefixItems' with an array 'items' "
                       "at %s", js_at(ptr));
    }
    if (cJSON_IsArray(items)) {
        prefix = items;
        tail = cJSON_GetObjectItemCaseSensitive(s, "additionalItems");
        tail_key = "additionalItems";
    } else {
        tail = items;
    }
    if (prefix && !cJSON_IsArray(prefix)) {
        return js_fail(c, "json_schema: 'prefixItems' at %s is not an array",
                       js_at(ptr));
    }
    if (tail && !cJSON_IsBool(tail) && !cJSON_IsObject(tail)) {
        return js_fail(c, "json_schema: '%s' at %s is not a schema",
                       tail_key, js_at(ptr));
    }

    c->cdepth++;
    k = cJSON_GetArraySize(prefix);
    elem = calloc(k + 1, sizeof(*elem));
    if (elem == NULL) {
        c->cdepth--;
        return js_fail(c, "json_schema: out of memory");
    }
    /* the prefix: one that accepts nothing ends the array before it */
    i = 0;
    cJSON_ArrayForEach(it, prefix) {
        js_buf(c, &t);
        js_index(sub, sizeof(sub), ptr, prefix == items ? "items"
                 : "prefixItems", i);
        rc = js_gen(c, it, sub, &t);
        if (rc == JS_ERR) {
            llm_strbuf_free(&t);
            goto done;
        }
        if (rc == JS_EMPTY) {
            llm_strbuf_free(&t);
            if (max < 0 || max > i) {
                max = i;
            }
            break;
        }
        elem[i++] = t.data;
    }
    k = i;
    if (max >= 0 && k > max) {
        k = (int) max;
    }
    js_buf(c, &tv);
    tail_ok = 0;
    if (tail == NULL || cJSON_IsTrue(tail)) {
        js_need(c, &tv, N_VALUE, "value");
        tail_ok = 1;
    } else {
        js_child(sub, sizeof(sub), ptr, tail_key);
        rc = js_gen(c, tail, sub, &tv);
        if (rc == JS_ERR) {
            llm_strbuf_free(&tv);
            goto done;
        }
        tail_ok = rc == JS_OK;
    }
    if (!tail_ok && (max < 0 || max > k)) {
        max = k;
    }
    if (max >= 0 && max < min) {
        llm_strbuf_free(&tv);
        rc = JS_EMPTY;
        goto done;
    }

    js_name(c, name, sizeof(name), "array");
    js_buf(c, &body);
    js_put(c, &body, "\"[\" ");
    js_need(c, &body, N_WS, "ws");
    if (max != 0) {
        /* element 0, then elements 1..k-1 of the prefix (each optional past
           minItems), then the tail's repetition */
        js_put(c, &body, " ( ");
        js_put(c, &body, k > 0 ? elem[0] : tv.data);
        for (i = 1; i < k; i++) {
            js_put(c, &body, " ");
            js_put(c, &body, i >= min ? "( " : "");
            js_comma(c, &body);
            js_put(c, &body, elem[i]);
        }
        if (tail_ok && (max < 0 || max > (k ? k : 1))) {
            long  done_n = k ? k : 1;
            long  lo = min > done_n ? min - done_n : 0;

            js_put(c, &body, " ( ");
            js_comma(c, &body);
            js_put(c, &body, tv.data);
            js_put(c, &body, " )");
            js_rep(c, &body, lo, max < 0 ? -1 : max - done_n);
        }
        for (i = k - 1; i >= 1; i--) {
            if (i >= min) {
                js_put(c, &body, " )?");
            }
        }
        js_put(c, &body, " ");
        js_need(c, &body, N_WS, "ws");
        js_put(c, &body, min > 0 ? " )" : " )?");
    }
    js_put(c, &body, " \"]\"");
    rc = js_rule(c, name, &body);
    llm_strbuf_free(&body);
    llm_strbuf_free(&tv);
    if (rc == JS_OK) {
        js_put(c, e, name);
    }

done:
    for (i = 0; elem && i <= cJSON_GetArraySize(prefix); i++) {
        free(elem[i]);
    }
    free(elem);
    c->cdepth--;
    return c->failed ? JS_ERR : rc;
}


/* --- enum and const --------------------------------------------------- */

/* v as compact JSON text; a number in the shortest form that reads back
   as the same double (a parser must see the value the schema has) */
static int
js_json_value(js_ctx *c, llm_strbuf *b, const cJSON *v, const char *ptr)
{
    const cJSON  *k;
    char          num[40];
    int           prec;

    if (cJSON_IsNull(v)) {
        js_put(c, b, "null");
    } else if (cJSON_IsTrue(v)) {
        js_put(c, b, "true");
    } else if (cJSON_IsFalse(v)) {
        js_put(c, b, "false");
    } else if (cJSON_IsString(v)) {
        js_json_string(c, b, v->valuestring);
    } else if (cJSON_IsNumber(v)) {
        if (!isfinite(v->valuedouble)
            || (v->valuedouble == floor(v->valuedouble)
                && fabs(v->valuedouble) > JS_MAX_SAFE))
        {
            return js_fail(c, "json_schema: a number in 'enum' or 'const' at "
                           "%s is beyond 2^53", js_at(ptr));
        }
        if (v->valuedouble == floor(v->valuedouble)) {
            snprintf(num, sizeof(num), "%.0f", v->valuedouble);
        } else {
            for (prec = 15; prec <= 17; prec++) {
                snprintf(num, sizeof(num), "%.*g", prec, v->valuedouble);
                if (strtod(num, NULL) == v->valuedouble) {
                    break;
                }
            }
        }
        js_put(c, b, num);
    } else if (cJSON_IsArray(v)) {
        js_put(c, b, "[");
        for (k = v->child; k; k = k->next) {
            if (js_json_value(c, b, k, ptr) != JS_OK) {
                return JS_ERR;
            }
            js_put(c, b, k->next ? "," : "");
        }
        js_put(c, b, "]");
    } else {
        js_put(c, b, "{");
        for (k = v->child; k; k = k->next) {
            js_json_string(c, b, k->string);
            js_put(c, b, ":");
            if (js_json_value(c, b, k, ptr) != JS_OK) {
                return JS_ERR;
            }
            js_put(c, b, k->next ? "," : "");
        }
        js_put(c, b, "}");
    }
    return c->failed ? JS_ERR : JS_OK;
}


/* the type a keyword constrains (0: none or several) */
static int
js_keyword_type(const char *k)
{
    static const char *const str[] = {
        "minLength", "maxLength", "pattern", "format", NULL
    };
    static const char *const num[] = {
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
        "multipleOf", NULL
    };
    static const char *const obj[] = {
        "properties", "required", "additionalProperties", "minProperties",
        "maxProperties", "patternProperties", "propertyNames", NULL
    };
    static const char *const arr[] = {
        "items", "prefixItems", "additionalItems", "minItems", "maxItems",
        "uniqueItems", NULL
    };

    return js_in(str, k) ? T_STR : js_in(num, k) ? T_INT | T_FRAC
           : js_in(obj, k) ? T_OBJ : js_in(arr, k) ? T_ARR : 0;
}


static int
js_gen_enum(js_ctx *c, const cJSON *s, const char *ptr, int mask,
    llm_strbuf *e)
{
    const cJSON  *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    const cJSON  *co = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON  *v, *k;
    js_alts       alts;
    int           t;

    if (en && !cJSON_IsArray(en)) {
        return js_fail(c, "json_schema: 'enum' at %s is not an array",
                       js_at(ptr));
    }
    for (k = s->child; k; k = k->next) {
        int  kt = js_keyword_type(k->string), vt = 0;

        for (v = en ? en->child : co; v && kt; v = en ? v->next : NULL) {
            vt |= js_value_type(v);
        }
        if (kt && !(kt & vt & mask)) {
            continue;   /* no value is of the type it constrains */
        }
        if (js_in(js_supported, k->string) && strcmp(k->string, "enum")
            && strcmp(k->string, "const") && strcmp(k->string, "type"))
        {
            js_relaxable(c, k->string, NULL);
            return js_fail(c, "json_schema: '%s' with '%s' at %s is not "
                           "supported", en ? "enum" : "const", k->string,
                           js_at(ptr));
        }
    }
    memset(&alts, 0, sizeof(alts));
    js_buf(c, &alts.b);
    for (v = en ? en->child : co; v; v = en ? v->next : NULL) {
        if (en && co && !cJSON_Compare(v, co, 1)) {
            continue;
        }
        t = js_value_type(v);
        if (!(t & mask)) {
            continue;
        }
        if (cJSON_IsNumber(v) && (!isfinite(v->valuedouble)
                                  || (t == T_INT
                                      && fabs(v->valuedouble) > JS_MAX_SAFE)))
        {
            llm_strbuf_free(&alts.b);
            return js_fail(c, "json_schema: a number in '%s' at %s is beyond "
                           "2^53", en ? "enum" : "const", js_at(ptr));
        }
        {
            llm_strbuf  j, l;

            js_buf(c, &j);
            js_buf(c, &l);
            if (js_json_value(c, &j, v, ptr) == JS_OK) {
                js_lit(c, &l, j.data, j.len);
                js_alt_add(c, &alts, l.data);
            }
            llm_strbuf_free(&j);
            llm_strbuf_free(&l);
            if (c->failed) {
                llm_strbuf_free(&alts.b);
                return JS_ERR;
            }
        }
    }
    return js_alt_end(c, &alts, e);
}


/* --- $ref ------------------------------------------------------------- */

static int
js_gen_ref(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    const cJSON  *t;
    js_ref       *r;
    llm_strbuf    body;
    char          name[96], tptr[512];
    int           i, rc;

    if (js_ref_target(c, s, ptr, &t) != JS_OK) {
        return JS_ERR;
    }
    for (i = 0; i < c->n_refs; i++) {
        r = &c->refs[i];
        if (r->target != t) {
            continue;
        }
        if (r->busy && r->cdepth == c->cdepth) {
            return js_fail(c, "json_schema: '$ref' at %s is left-recursive "
                           "(it reaches itself before any '{' or '[')",
                           js_at(ptr));
        }
        if (r->empty) {
            return JS_EMPTY;
        }
        if (r->busy) {
            r->recursed = 1;
        }
        js_putf(c, e, "%s-ref%d", c->root, r->id);
        return c->failed ? JS_ERR : JS_OK;
    }
    if (c->n_refs == JS_MAX_REFS) {
        return js_fail(c, "json_schema: over %d $ref targets", JS_MAX_REFS);
    }
    r = &c->refs[c->n_refs++];
    r->target = t;
    r->id = ++c->n_ids;
    r->busy = 1;
    r->cdepth = c->cdepth;
    r->empty = 0;
    r->recursed = 0;
    snprintf(name, sizeof(name), "%s-ref%d", c->root, r->id);
    snprintf(tptr, sizeof(tptr), "%s",
             cJSON_GetObjectItemCaseSensitive(s, "$ref")->valuestring + 1);
    js_buf(c, &body);
    rc = js_gen(c, t, tptr, &body);
    r = &c->refs[i];
    r->busy = 0;
    if (rc == JS_OK) {
        rc = js_rule(c, name, &body);
    } else if (rc == JS_EMPTY) {
        r->empty = 1;
        if (r->recursed) {
            rc = js_fail(c, "json_schema: the schema at %s accepts nothing",
                         tptr[0] ? tptr : "the root");
        }
    }
    llm_strbuf_free(&body);
    if (rc == JS_OK) {
        js_put(c, e, name);
    }
    return c->failed ? JS_ERR : rc;
}

/* --- allOf: one schema from several ----------------------------------- */

/* s with allOf or with $ref and other keywords: the schemas merged */
static int
js_gen_allof(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    js_branches  br;
    cJSON       *m;
    int          rc;

    br.n = 0;
    br.empty = 0;
    if (js_flatten(c, s, ptr, &br, 0) != JS_OK) {
        return JS_ERR;
    }
    if (br.empty) {
        return JS_EMPTY;
    }
    rc = js_merge(c, &br, ptr, &m);
    if (rc != JS_OK) {
        return rc;
    }
    return js_gen(c, m, ptr, e);
}


/* anyOf / oneOf (as anyOf): each branch, with the keywords beside it */
static int
js_gen_anyof(js_ctx *c, const cJSON *s, const cJSON *list, const char *ptr,
    llm_strbuf *e)
{
    const cJSON  *b;
    cJSON        *rest, *pair, *arr;
    js_alts       alts;
    char          sub[512];
    int           i = 0, with_rest;

    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0) {
        return js_fail(c, "json_schema: '%s' at %s is not a non-empty array",
                       list->string, js_at(ptr));
    }
    with_rest = js_constrains(s, list->string);
    rest = NULL;
    if (with_rest) {
        rest = cJSON_Duplicate(s, 1);
        if (rest == NULL || !cJSON_AddItemToArray(c->owned, rest)) {
            cJSON_Delete(rest);
            return js_fail(c, "json_schema: out of memory");
        }
        cJSON_DeleteItemFromObjectCaseSensitive(rest, list->string);
    }
    memset(&alts, 0, sizeof(alts));
    js_buf(c, &alts.b);
    cJSON_ArrayForEach(b, list) {
        js_index(sub, sizeof(sub), ptr, list->string, i++);
        if (!with_rest) {
            if (js_alt_gen(c, &alts, b, sub) != JS_OK) {
                llm_strbuf_free(&alts.b);
                return JS_ERR;
            }
            continue;
        }
        /* {"allOf": [rest, branch]} */
        pair = cJSON_CreateObject();
        arr = pair ? cJSON_AddArrayToObject(pair, "allOf") : NULL;
        if (arr == NULL || !cJSON_AddItemToArray(c->owned, pair)) {
            cJSON_Delete(pair);
            llm_strbuf_free(&alts.b);
            return js_fail(c, "json_schema: out of memory");
        }
        cJSON_AddItemReferenceToArray(arr, rest);
        cJSON_AddItemReferenceToArray(arr, (cJSON *) b);
        if (js_alt_gen(c, &alts, pair, sub) != JS_OK) {
            llm_strbuf_free(&alts.b);
            return JS_ERR;
        }
    }
    return js_alt_end(c, &alts, e);
}


/* --- one subschema ---------------------------------------------------- */

static int
js_gen_types(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    js_alts     alts;
    llm_strbuf  t;
    int         mask, rc = JS_OK;

    if (js_types(c, s, ptr, &mask) != JS_OK) {
        return JS_ERR;
    }
    if (cJSON_HasObjectItem(s, "enum") || cJSON_HasObjectItem(s, "const")) {
        return js_gen_enum(c, s, ptr, mask, e);
    }
    if (mask == T_ALL && !js_constrains(s, NULL)) {
        js_need(c, e, N_VALUE, "value");
        return JS_OK;
    }
    memset(&alts, 0, sizeof(alts));
    js_buf(c, &alts.b);
    if (mask & T_NULL) {
        js_alt_add(c, &alts, "\"null\"");
    }
    if (mask & T_BOOL) {
        js_alt_add(c, &alts, "\"true\"");
        js_alt_add(c, &alts, "\"false\"");
    }
#define JS_TYPE(bit, call)                                                   \
    if (rc != JS_ERR && (mask & (bit))) {                                    \
        js_buf(c, &t);                                                       \
        rc = call;                                                           \
        if (rc == JS_OK) {                                                   \
            js_alt_add(c, &alts, t.data);                                    \
        }                                                                    \
        llm_strbuf_free(&t);                                                 \
    }
    JS_TYPE(T_STR, js_gen_string(c, s, ptr, &t));
    JS_TYPE(T_INT | T_FRAC, js_gen_number(c, s, ptr, !(mask & T_FRAC), &t));
    JS_TYPE(T_OBJ, js_gen_object(c, s, ptr, &t));
    JS_TYPE(T_ARR, js_unique_wanted(s) ? js_gen_unique(c, s, ptr, &t)
                                       : js_gen_array(c, s, ptr, &t));
#undef JS_TYPE
    if (rc == JS_ERR) {
        llm_strbuf_free(&alts.b);
        return JS_ERR;
    }
    return js_alt_end(c, &alts, e);
}


static int
js_gen_schema(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    const cJSON  *any, *one;
    int           rc;

    if (cJSON_IsTrue(s)) {
        js_need(c, e, N_VALUE, "value");
        return c->failed ? JS_ERR : JS_OK;
    }
    if (cJSON_IsFalse(s)) {
        return JS_EMPTY;
    }
    if (!cJSON_IsObject(s)) {
        return js_fail(c, "json_schema: the schema at %s is not an object or "
                       "a boolean", js_at(ptr));
    }
    if (c->depth >= JS_MAX_DEPTH) {
        return js_fail(c, "json_schema: the schema at %s is nested deeper "
                       "than %d", js_at(ptr), JS_MAX_DEPTH);
    }
    if (js_check_keywords(c, s, ptr) != JS_OK) {
        return JS_ERR;
    }
    c->depth++;
    any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    if (cJSON_HasObjectItem(s, "$ref")) {
        rc = js_constrains(s, "$ref") ? js_gen_allof(c, s, ptr, e)
                                      : js_gen_ref(c, s, ptr, e);
    } else if (cJSON_HasObjectItem(s, "allOf")) {
        rc = js_gen_allof(c, s, ptr, e);
    } else if (any && one) {
        js_relaxable(c, "oneOf", NULL);
        rc = js_fail(c, "json_schema: 'anyOf' with 'oneOf' at %s is not "
                     "supported", js_at(ptr));
    } else if (any || one) {
        rc = js_gen_anyof(c, s, any ? any : one, ptr, e);
    } else {
        rc = js_gen_types(c, s, ptr, e);
    }
    c->depth--;
    return c->failed ? JS_ERR : rc;
}


/* --- relaxing (without strict) -------------------------------------- */

/* what a subschema's generation may leave behind, to undo it */
typedef struct {
    size_t  rules_len, e_len;
    int     n_refs, n_keys, depth, cdepth;
} js_mark;


static void
js_mark_set(const js_ctx *c, const llm_strbuf *e, js_mark *m)
{
    m->rules_len = c->rules.len;
    m->e_len = e->len;
    m->n_refs = c->n_refs;
    m->n_keys = c->n_keys;
    m->depth = c->depth;
    m->cdepth = c->cdepth;
}


/* back to the mark, the error cleared: the rules and $ref targets made
   since are forgotten (nothing made before refers to them) */
static void
js_mark_reset(js_ctx *c, llm_strbuf *e, const js_mark *m)
{
    while (c->n_keys > m->n_keys) {
        free(c->key_text[--c->n_keys]);
    }
    c->n_refs = m->n_refs;
    c->depth = m->depth;
    c->cdepth = m->cdepth;
    if (c->rules.data) {
        c->rules.data[c->rules.len = m->rules_len] = '\0';
    }
    if (e->data) {
        e->data[e->len = m->e_len] = '\0';
    }
    c->failed = 0;
    c->drop[0] = '\0';
    if (c->err_len) {
        c->err[0] = '\0';
    }
}


/* "report@ptr" into the list, once; the pointer %XX-escaped where a
   header would not carry it */
static void
js_report(js_ctx *c, const char *ptr)
{
    char           item[1024];
    size_t         n;
    const char    *p, *hit;
    unsigned char  ch;

    if (c->relaxed == NULL) {
        return;
    }
    n = (size_t) snprintf(item, sizeof(item) - 4, "%s@", c->report);
    for (p = ptr; *p && n < sizeof(item) - 4; p++) {
        ch = (unsigned char) *p;
        n += ch <= ' ' || ch >= 0x7f || ch == '%' || ch == ','
             ? (size_t) snprintf(item + n, 4, "%%%02X", ch)
             : (size_t) snprintf(item + n, 2, "%c", ch);
    }
    for (hit = c->relaxed->data; hit && (hit = strstr(hit, item)); hit++) {
        if ((hit == c->relaxed->data || hit[-1] == ' ')
            && (hit[n] == ',' || hit[n] == '\0'))
        {
            return;     /* listed already */
        }
    }
    if (c->relaxed->len) {
        llm_strbuf_append(c->relaxed, ", ", 2);
    }
    llm_strbuf_append(c->relaxed, item, n);
}


/* s without the keywords c->drop names ("a/b"), or, when s has none of
   them (the error came from a merge or a reference), s's types alone */
static const cJSON *
js_relaxed_schema(js_ctx *c, const cJSON *s)
{
    char          drop[68];
    const cJSON  *k, *type;
    cJSON        *r = cJSON_CreateObject();
    int           dropped = 0;

    if (r == NULL || !cJSON_AddItemToArray(c->owned, r)) {
        cJSON_Delete(r);
        return NULL;
    }
    snprintf(drop, sizeof(drop), "/%s/", c->drop);
    for (k = s->child; k; k = k->next) {
        if (strlen(k->string) < 60) {
            char  key[64];

            snprintf(key, sizeof(key), "/%s/", k->string);
            if (strstr(drop, key)) {
                dropped++;
                continue;
            }
        }
        if (!cJSON_AddItemReferenceToObject(r, k->string, (cJSON *) k)) {
            return NULL;
        }
    }
    if (dropped) {
        return r;
    }
    while (r->child) {
        cJSON_Delete(cJSON_DetachItemViaPointer(r, r->child));
    }
    type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (type && !cJSON_AddItemReferenceToObject(r, "type", (cJSON *) type)) {
        return NULL;
    }
    return r;
}


/*
 * A subschema. Without strict, an error that relaxing can lift (one
 * js_relaxable marked) is lifted here, where the keyword is: the keyword
 * is dropped, reported with this pointer, and the subschema written again
 * from the mark. Each try drops a keyword, the last one keeps the types
 * only, so the loop ends.
 */
static int
js_gen(js_ctx *c, const cJSON *s, const char *ptr, llm_strbuf *e)
{
    js_mark  m;
    int      rc;

    for ( ;; ) {
        js_mark_set(c, e, &m);
        rc = js_gen_schema(c, s, ptr, e);
        if (rc != JS_ERR || c->strict || c->drop[0] == '\0'
            || !cJSON_IsObject(s))
        {
            return rc;
        }
        js_report(c, ptr);
        s = js_relaxed_schema(c, s);
        js_mark_reset(c, e, &m);
        if (s == NULL) {
            return js_fail(c, "json_schema: out of memory");
        }
    }
}


/* a key twice in one object: parsers differ on which one counts (cJSON
   the first, python the last), so the schema is ambiguous */
static int
js_duplicates(js_ctx *c, const cJSON *v, char *ptr, size_t len)
{
    const cJSON  *k, *j;
    size_t        n = strlen(ptr);
    int           i = 0;

    for (k = v->child; k; k = k->next, i++) {
        if (cJSON_IsObject(v)) {
            for (j = v->child; j != k; j = j->next) {
                if (strcmp(j->string, k->string) == 0) {
                    return js_fail(c, "json_schema: the key '%s' is twice in "
                                   "the object at %s", k->string,
                                   js_at(ptr));
                }
            }
        }
        if (k->child == NULL) {
            continue;
        }
        if (cJSON_IsObject(v)) {
            char  tmp[512];

            js_child(tmp, sizeof(tmp), ptr, k->string);
            snprintf(ptr + n, len - n, "%s", tmp + n);
        } else {
            snprintf(ptr + n, len - n, "/%d", i);
        }
        if (js_duplicates(c, k, ptr, len) != JS_OK) {
            return JS_ERR;
        }
        ptr[n] = '\0';
    }
    return JS_OK;
}


/*
 * The schema text before cJSON reads it: UTF-8 (the grammar's literals are
 * its bytes), no control bytes (cJSON lets them into strings, JSON does
 * not), no \u0000 (a C string would cut the name there: "a\u0000b" would
 * become the property "a").
 */
static int
js_check_text(js_ctx *c, const char *schema, size_t len)
{
    const unsigned char  *p = (const unsigned char *) schema;
    size_t                i, n, k, bs = 0;
    uint32_t              cp;

    for (i = 0; i < len; i += n) {
        n = 1;
        if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r') {
            return js_fail(c, "json_schema: the schema has a control byte "
                           "(0x%02x at byte %zu)", p[i], i);
        }
        if (p[i] == '\\') {
            if (bs % 2 == 0 && len - i >= 6 && memcmp(p + i, "\\u0000", 6) == 0)
            {
                return js_fail(c, "json_schema: the schema has \\u0000 (at "
                               "byte %zu)", i);
            }
            bs++;
            continue;
        }
        bs = 0;
        if (p[i] < 0x80) {
            continue;
        }
        n = p[i] >= 0xf0 ? 4 : p[i] >= 0xe0 ? 3 : p[i] >= 0xc2 ? 2 : 0;
        if (n == 0 || p[i] > 0xf4 || i + n > len) {
            goto bad;
        }
        cp = p[i] & (0xff >> (n + 1));
        for (k = 1; k < n; k++) {
            if ((p[i + k] & 0xc0) != 0x80) {
                goto bad;
            }
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000
            || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
        {
            goto bad;
        }
    }
    return JS_OK;

bad:
    return js_fail(c, "json_schema: the schema is not valid UTF-8 (at byte "
                   "%zu)", i);
}


/* --- the shared rules ------------------------------------------------- */

static void
js_shared(js_ctx *c, llm_strbuf *out)
{
    const char  *r = c->root;

    if (c->need & N_VALUE) {
        c->need |= N_STRING | N_NUMBER | N_WS;
        js_putf(c, out, "%s-value ::= %s-object | %s-array | %s-string | "
                "%s-number | \"true\" | \"false\" | \"null\"\n", r, r, r, r,
                r);
        js_putf(c, out, "%s-object ::= \"{\" %s-ws ( %s-member ( %s-ws "
                "\",\" %s-ws %s-member )* %s-ws )? \"}\"\n", r, r, r, r, r,
                r, r);
        js_putf(c, out, "%s-member ::= %s-string %s-ws \":\" %s-ws "
                "%s-value\n", r, r, r, r, r);
        js_putf(c, out, "%s-array ::= \"[\" %s-ws ( %s-value ( %s-ws \",\" "
                "%s-ws %s-value )* %s-ws )? \"]\"\n", r, r, r, r, r, r, r);
    }
    if (c->need & N_STRING) {
        c->need |= N_CHAR;
        js_putf(c, out, "%s-string ::= \"\\\"\" %s-char* \"\\\"\"\n", r, r);
    }
    if (c->need & N_CHAR) {
        /* escapes of lone surrogates are left out: a parser would read
           \ud83d\ude00 as one character where the grammar counts two */
        js_putf(c, out, "%s-char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( "
                "[\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} "
                "| [dD] [0-7] [0-9a-fA-F]{2} ) )\n", r);
    }
    if (c->need & N_KCHAR) {
        js_putf(c, out, "%s-kchar ::= [^\"\\\\\\x00-\\x1f]\n", r);
    }
    if (c->need & N_NUMBER) {
        js_putf(c, out, "%s-number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,%d} ) "
                "( \".\" [0-9]{1,%d} )? ( [eE] [-+]? [0-9]{1,2} )?\n", r,
                JS_INT_DIGITS - 1, JS_FRAC_DIGITS);
    }
    if (c->need & N_INT) {
        js_putf(c, out, "%s-integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,%d} "
                ")\n", r, JS_INT_DIGITS - 1);
    }
    if (c->need & N_DATE) {
        /* a real date: the days of each month, 29 February of leap years;
           years 0001-9999 */
        js_putf(c, out, "%s-date ::= %s-year \"-\" ( ( \"01\" | \"03\" | "
                "\"05\" | \"07\" | \"08\" | \"10\" | \"12\" ) \"-\" ( "
                "%s-day28 | \"29\" | \"30\" | \"31\" ) | ( \"04\" | \"06\" | "
                "\"09\" | \"11\" ) \"-\" ( %s-day28 | \"29\" | \"30\" ) | "
                "\"02-\" %s-day28 ) | %s-leap \"-02-29\"\n", r, r, r, r, r,
                r);
        js_putf(c, out, "%s-year ::= [1-9] [0-9]{3} | \"0\" [1-9] [0-9]{2} | "
                "\"00\" [1-9] [0-9] | \"000\" [1-9]\n", r);
        js_putf(c, out, "%s-leap ::= [0-9]{2} ( \"0\" [48] | [2468] [048] | "
                "[13579] [26] ) | ( \"0\" [48] | [2468] [048] | [13579] [26] ) "
                "\"00\"\n", r);
        js_putf(c, out, "%s-day28 ::= \"0\" [1-9] | \"1\" [0-9] | \"2\" "
                "[0-8]\n", r);
    }
    if (c->need & N_TIME) {
        js_putf(c, out, "%s-time ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" "
                "[0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? ( \"Z\" "
                "| [-+] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n",
                r);
    }
    if (c->need & N_UUID) {
        js_putf(c, out, "%s-uuid ::= %s-hex{8} \"-\" %s-hex{4} \"-\" "
                "%s-hex{4} \"-\" %s-hex{4} \"-\" %s-hex{12}\n", r, r, r, r,
                r, r);
        js_putf(c, out, "%s-hex ::= [0-9a-fA-F]\n", r);
    }
    js_format_rules(c, out);
    if (c->need & N_EMAIL) {
        /* a dot-atom local part (RFC 5322) at a domain of labels */
        js_putf(c, out, "%s-email ::= %s-atext+ ( \".\" %s-atext+ )* \"@\" "
                "[a-zA-Z0-9] [a-zA-Z0-9\\x2d]* ( \".\" [a-zA-Z0-9] "
                "[a-zA-Z0-9\\x2d]* )*\n", r, r, r);
        js_putf(c, out, "%s-atext ::= [a-zA-Z0-9!#$%%&'*+/=?\\x5e_`{|}~\\x2d]\n",
                r);
    }
    if (c->need & N_WS) {
        if (c->max_ws > 0) {
            js_putf(c, out, "%s-ws ::= [ \\t\\n]{0,%d}\n", r, c->max_ws);
        } else {
            js_putf(c, out, "%s-ws ::= \"\"\n", r);
        }
    }
}


/* a rule name: letters, digits, "-", at most JS_MAX_ROOT */
static int
js_root_ok(const char *root)
{
    const char  *p;

    for (p = root; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
              || (*p >= '0' && *p <= '9') || *p == '-'))
        {
            return 0;
        }
    }
    return p > root && p - root <= JS_MAX_ROOT;
}


int
llm_json_schema_to_gbnf(const char *schema, size_t len, const char *root,
    int max_ws, llm_strbuf *out, char *err, size_t err_len)
{
    llm_json_schema_opts  o;

    memset(&o, 0, sizeof(o));
    o.root = root;
    o.max_ws = max_ws;
    o.strict = 1;
    return llm_json_schema_compile(schema, len, &o, out, err, err_len);
}


int
llm_json_schema_compile(const char *schema, size_t len,
    const llm_json_schema_opts *o, llm_strbuf *out, char *err,
    size_t err_len)
{
    js_ctx       c;
    llm_strbuf   e;
    const char  *end, *root = o->root;
    int          rc, i;

    memset(&c, 0, sizeof(c));
    c.err = err;
    c.err_len = err_len;
    c.root = root;
    c.max_ws = o->max_ws;
    c.strict = o->strict;
    c.relaxed = o->relaxed;
    c.max = out->max;
    if (err_len) {
        err[0] = '\0';
    }
    if (!js_root_ok(root)) {
        return js_fail(&c, "json_schema: bad rule name '%.64s'", root);
    }
    if (o->max_ws < 0) {
        return js_fail(&c, "json_schema: max_ws %d is negative", o->max_ws);
    }
    if (js_check_text(&c, schema, len) != JS_OK) {
        return -1;
    }
    end = NULL;
    c.doc = cJSON_ParseWithLengthOpts(schema, len, &end, 0);
    if (c.doc == NULL) {
        return js_fail(&c, "json_schema: the schema is not valid JSON (near "
                       "byte %zu)", (size_t) (end ? end - schema : 0));
    }
    c.owned = cJSON_CreateArray();
    c.refs = calloc(JS_MAX_REFS, sizeof(*c.refs));
    if (c.owned == NULL || c.refs == NULL) {
        rc = js_fail(&c, "json_schema: out of memory");
        goto done;
    }
    js_buf(&c, &c.rules);
    js_buf(&c, &e);
    {
        char  ptr[512] = "";

        rc = js_duplicates(&c, c.doc, ptr, sizeof(ptr));
    }
    if (rc == JS_OK) {
        rc = js_gen(&c, c.doc, "", &e);
    }
    if (rc == JS_EMPTY) {
        rc = js_fail(&c, "json_schema: the schema accepts no JSON value");
    }
    if (rc == JS_OK) {
        js_put(&c, out, root);
        js_put(&c, out, " ::= ");
        js_put(&c, out, e.data);
        js_put(&c, out, "\n");
        js_put(&c, out, c.rules.data ? c.rules.data : "");
        js_shared(&c, out);
        rc = c.failed ? JS_ERR : JS_OK;
    }
    llm_strbuf_free(&e);
    llm_strbuf_free(&c.rules);

done:
    for (i = 0; i < c.n_keys; i++) {
        free(c.key_text[i]);
    }
    free(c.refs);
    cJSON_Delete(c.owned);
    cJSON_Delete((cJSON *) c.doc);
    return rc == JS_OK ? 0 : -1;
}
