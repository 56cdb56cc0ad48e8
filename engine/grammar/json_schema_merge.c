/*
 * JSON Schema -> GBNF, the schemas one subschema is made of: the target
 * of a $ref ("#/..." pointers into the document, through refs to refs),
 * and allOf (with $ref beside other keywords) flattened and merged into
 * one schema, which json_schema.c then writes as any other. Merging keeps
 * the tightest bounds, meets the types, properties and items, and refuses
 * what it cannot meet (docs/json_schema.md).
 *
 * defines: js_ref_target, js_flatten, js_merge
 */
#include "grammar/json_schema_int.h"

#include <stdlib.h>
#include <string.h>


/* --- $ref ------------------------------------------------------------- */

/* the node a "#/a/b" pointer names (~0 ~1 and %XX decoded), or NULL */
static const cJSON *
js_resolve(const cJSON *doc, const char *ref)
{
    const cJSON  *node = doc;
    char          key[512];
    size_t        n;
    const char   *p = ref + 1;
    char         *end;

    while (*p == '/') {
        p++;
        n = 0;
        while (*p && *p != '/' && n + 1 < sizeof(key)) {
            if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
                key[n++] = p[1] == '0' ? '~' : '/';
                p += 2;
            } else if (p[0] == '%' && p[1] && p[2]) {
                char  hex[3] = { p[1], p[2], 0 };

                key[n++] = (char) strtol(hex, &end, 16);
                if (*end) {
                    return NULL;
                }
                p += 3;
            } else {
                key[n++] = *p++;
            }
        }
        key[n] = '\0';
        if (cJSON_IsArray(node)) {
            long  i = strtol(key, &end, 10);

            if (*end || n == 0) {
                return NULL;
            }
            node = cJSON_GetArrayItem(node, (int) i);
        } else if (cJSON_IsObject(node)) {
            node = cJSON_GetObjectItemCaseSensitive(node, key);
        } else {
            return NULL;
        }
        if (node == NULL) {
            return NULL;
        }
    }
    return *p ? NULL : node;
}


/* the target of s's $ref, through refs to refs */
int
js_ref_target(js_ctx *c, const cJSON *s, const char *ptr, const cJSON **t)
{
    const cJSON  *ref;
    int           hops;

    for (hops = 0; hops < JS_MAX_DEPTH; hops++) {
        ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
        if (!cJSON_IsString(ref)) {
            return js_fail(c, "json_schema: '$ref' at %s is not a string",
                           js_at(ptr));
        }
        if (ref->valuestring[0] != '#') {
            js_relaxable(c, "$ref", NULL);
            return js_fail(c, "json_schema: unsupported keyword '$ref' at %s: "
                           "only references inside the schema ('#/...') are "
                           "supported, not '%s'", js_at(ptr),
                           ref->valuestring);
        }
        if (ref->valuestring[1] != '\0' && ref->valuestring[1] != '/') {
            js_relaxable(c, "$ref", NULL);
            return js_fail(c, "json_schema: unsupported keyword '$ref' at %s: "
                           "anchors ('%s') are not supported", js_at(ptr),
                           ref->valuestring);
        }
        *t = js_resolve(c->doc, ref->valuestring);
        if (*t == NULL) {
            return js_fail(c, "json_schema: '$ref' '%s' at %s names nothing "
                           "in the schema", ref->valuestring, js_at(ptr));
        }
        if (!cJSON_IsObject(*t) || !cJSON_HasObjectItem(*t, "$ref")
            || js_constrains(*t, "$ref"))
        {
            return JS_OK;
        }
        s = *t;
    }
    return js_fail(c, "json_schema: '$ref' at %s: a circle of references",
                   js_at(ptr));
}

/* --- allOf: one schema from several ----------------------------------- */

/* s and what its $ref and allOf bring, flattened */
int
js_flatten(js_ctx *c, const cJSON *s, const char *ptr, js_branches *br,
    int depth)
{
    const cJSON  *t, *i;

    if (depth > JS_MAX_DEPTH) {
        return js_fail(c, "json_schema: allOf at %s nested too deep (or a "
                       "circle of references)", js_at(ptr));
    }
    if (cJSON_IsTrue(s)) {
        return JS_OK;
    }
    if (cJSON_IsFalse(s)) {
        br->empty = 1;
        return JS_OK;
    }
    if (!cJSON_IsObject(s)) {
        return js_fail(c, "json_schema: a schema in allOf at %s is not an "
                       "object or a boolean", js_at(ptr));
    }
    if (js_check_keywords(c, s, ptr) != JS_OK) {
        return JS_ERR;
    }
    if (br->n == JS_MAX_BRANCHES) {
        return js_fail(c, "json_schema: allOf at %s merges over %d schemas",
                       js_at(ptr), JS_MAX_BRANCHES);
    }
    br->b[br->n++] = s;
    if (cJSON_HasObjectItem(s, "$ref")) {
        if (js_ref_target(c, s, ptr, &t) != JS_OK
            || js_flatten(c, t, ptr, br, depth + 1) != JS_OK)
        {
            return JS_ERR;
        }
    }
    t = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    if (t) {
        if (!cJSON_IsArray(t)) {
            return js_fail(c, "json_schema: 'allOf' at %s is not an array",
                           js_at(ptr));
        }
        cJSON_ArrayForEach(i, t) {
            if (js_flatten(c, i, ptr, br, depth + 1) != JS_OK) {
                return JS_ERR;
            }
        }
    }
    return JS_OK;
}


static int
js_dup_into(js_ctx *c, cJSON *obj, const char *key, const cJSON *v)
{
    cJSON  *d = cJSON_Duplicate(v, 1);

    if (d == NULL || !(key ? cJSON_AddItemToObject(obj, key, d)
                           : cJSON_AddItemToArray(obj, d)))
    {
        cJSON_Delete(d);
        return js_fail(c, "json_schema: out of memory");
    }
    return JS_OK;
}


/* adds to an array a reference to v (no copy: a $ref inside stays where
   it is, so its target is the one the memo knows) */
static int
js_ref_into(js_ctx *c, cJSON *arr, const cJSON *v)
{
    if (arr == NULL || !cJSON_AddItemReferenceToArray(arr, (cJSON *) v)) {
        return js_fail(c, "json_schema: out of memory");
    }
    return JS_OK;
}


/* x, an {"allOf": [s]} a merge made, becomes a reference to s itself: a
   recursive schema merged with something stays one rule, not an endless
   copy */
static void
js_collapse(cJSON *parent, cJSON *x)
{
    cJSON  *all, *tmp, *r;

    all = x ? cJSON_GetObjectItem(x, "allOf") : NULL;
    if (all == NULL || x->child->next != NULL
        || cJSON_GetArraySize(all) != 1)
    {
        return;
    }
    tmp = cJSON_CreateArray();
    if (tmp == NULL || !cJSON_AddItemReferenceToArray(tmp, all->child)) {
        cJSON_Delete(tmp);
        return;
    }
    r = cJSON_DetachItemFromArray(tmp, 0);
    cJSON_Delete(tmp);
    if (cJSON_IsObject(parent)) {
        cJSON_ReplaceItemInObjectCaseSensitive(parent, x->string, r);
    } else {
        cJSON_ReplaceItemViaPointer(parent, x, r);
    }
}


/* adds a schema to name's list in the merged properties: a list of one is
   the schema, of more an allOf */
static int
js_prop_add(js_ctx *c, cJSON *props, const char *name, const cJSON *v)
{
    cJSON  *cur = cJSON_GetObjectItemCaseSensitive(props, name), *all, *d;

    if (cur == NULL) {
        all = cJSON_CreateObject();
        if (all == NULL || !cJSON_AddItemToObject(props, name, all)
            || cJSON_AddArrayToObject(all, "allOf") == NULL)
        {
            return js_fail(c, "json_schema: out of memory");
        }
        cur = all;
    }
    (void) d;
    return js_ref_into(c, cJSON_GetObjectItem(cur, "allOf"), v);
}


static int
js_has_prop(const cJSON *s, const char *name)
{
    const cJSON  *p = cJSON_GetObjectItemCaseSensitive(s, "properties");

    return cJSON_IsObject(p) && cJSON_HasObjectItem(p, name);
}


/* keywords merged by taking the largest (min*) or smallest (max*) */
static const char *const js_mins[] = {
    "minLength", "minItems", "minProperties", "minimum", NULL
};
static const char *const js_maxs[] = {
    "maxLength", "maxItems", "maxProperties", "maximum", NULL
};

/* keywords that cannot be in two of the schemas merged */
static const char *const js_once[] = {
    "pattern", "format", "anyOf", "oneOf", "propertyNames", "multipleOf",
    "uniqueItems", NULL
};


/*
 * Element i of the merged array meets each schema's element i: its
 * prefixItems[i] when it has one, its items (the tail) otherwise; the
 * merged tail meets every tail. (A tail with no prefix applies from 0.)
 */
static int
js_merge_items(js_ctx *c, js_branches *br, cJSON *m, const char *ptr)
{
    const cJSON  *pre[JS_MAX_BRANCHES], *tail[JS_MAX_BRANCHES], *items, *x;
    cJSON        *arr = NULL, *all, *t = NULL;
    int           i, j, kmax = 0, any_tail = 0;

    for (i = 0; i < br->n; i++) {
        items = cJSON_GetObjectItemCaseSensitive(br->b[i], "items");
        pre[i] = cJSON_GetObjectItemCaseSensitive(br->b[i], "prefixItems");
        tail[i] = items;
        if (cJSON_IsArray(items)) {
            if (pre[i]) {
                return js_fail(c, "json_schema: 'prefixItems' with an array "
                               "'items' at %s", js_at(ptr));
            }
            pre[i] = items;
            tail[i] = cJSON_GetObjectItemCaseSensitive(br->b[i],
                                                       "additionalItems");
        }
        if (pre[i] && !cJSON_IsArray(pre[i])) {
            return js_fail(c, "json_schema: 'prefixItems' at %s is not an "
                           "array", js_at(ptr));
        }
        if (cJSON_GetArraySize(pre[i]) > kmax) {
            kmax = cJSON_GetArraySize(pre[i]);
        }
        if (tail[i] && cJSON_IsTrue(tail[i])) {
            tail[i] = NULL;
        }
        any_tail |= tail[i] != NULL;
    }
    if (kmax > 0) {
        arr = cJSON_AddArrayToObject(m, "prefixItems");
    }
    if (any_tail) {
        t = cJSON_AddObjectToObject(m, "items");
        if (t == NULL || cJSON_AddArrayToObject(t, "allOf") == NULL) {
            return js_fail(c, "json_schema: out of memory");
        }
    }
    for (j = 0; j < kmax; j++) {
        all = cJSON_CreateObject();
        if (arr == NULL || all == NULL || !cJSON_AddItemToArray(arr, all)
            || cJSON_AddArrayToObject(all, "allOf") == NULL)
        {
            cJSON_Delete(all);
            return js_fail(c, "json_schema: out of memory");
        }
        for (i = 0; i < br->n; i++) {
            x = j < cJSON_GetArraySize(pre[i]) ? cJSON_GetArrayItem(pre[i], j)
                                                : tail[i];
            if (x && js_ref_into(c, cJSON_GetObjectItem(all, "allOf"), x)
                != JS_OK)
            {
                return JS_ERR;
            }
        }
    }
    for (i = 0; i < br->n && t; i++) {
        if (tail[i] && js_ref_into(c, cJSON_GetObjectItem(t, "allOf"),
                                   tail[i]) != JS_OK)
        {
            return JS_ERR;
        }
    }
    return JS_OK;
}


/* the schema being merged, keyword by keyword */
typedef struct {
    cJSON          *m;
    cJSON          *props;      /* m's properties */
    cJSON          *req;        /* m's required */
    int             mask;       /* the types all branches allow */
    int             seen_types;
} js_merged;


/* properties: each joins the same name's schemas so far */
static int
js_merge_props(js_ctx *c, js_merged *g, const cJSON *k, const char *ptr)
{
    const cJSON  *p;

    if (!cJSON_IsObject(k)) {
        return js_fail(c, "json_schema: 'properties' at %s is not an object",
                       js_at(ptr));
    }
    cJSON_ArrayForEach(p, k) {
        if (js_prop_add(c, g->props, p->string, p) != JS_OK) {
            return JS_ERR;
        }
    }
    return JS_OK;
}


/* required: the union */
static int
js_merge_required(js_ctx *c, js_merged *g, const cJSON *k, const char *ptr)
{
    const cJSON  *p;

    cJSON_ArrayForEach(p, k) {
        if (!cJSON_IsString(p)) {
            return js_fail(c, "json_schema: 'required' at %s has a "
                           "non-string", js_at(ptr));
        }
        if (!js_required(g->req, p->valuestring)
            && js_dup_into(c, g->req, NULL, p) != JS_OK)
        {
            return JS_ERR;
        }
    }
    return JS_OK;
}


/* additionalProperties: {"allOf": [each one]}, settled after the loop */
static int
js_merge_ap(js_ctx *c, js_merged *g, cJSON *cur, const cJSON *k,
    const char *ptr)
{
    if (cur == NULL) {
        cur = cJSON_CreateObject();
        if (cur == NULL
            || !cJSON_AddItemToObject(g->m, "additionalProperties", cur)
            || cJSON_AddArrayToObject(cur, "allOf") == NULL)
        {
            return js_fail(c, "json_schema: out of memory");
        }
    }
    if (cJSON_IsArray(cur)) {
        js_relaxable(c, "allOf", NULL);
        return js_fail(c, "json_schema: allOf at %s: cannot merge two array "
                       "'items'", js_at(ptr));
    }
    return js_ref_into(c, cJSON_GetObjectItem(cur, "allOf"), k);
}


/* a bound: the tightest */
static int
js_merge_bound(js_ctx *c, js_merged *g, cJSON *cur, const cJSON *k,
    const char *ptr)
{
    const char  *n = k->string;
    int          up = js_in(js_mins, n) || strcmp(n, "exclusiveMinimum") == 0;

    if (!cJSON_IsNumber(k)) {
        js_relaxable(c, "allOf", NULL);
        return js_fail(c, "json_schema: allOf at %s: cannot merge '%s' that "
                       "is not a number", js_at(ptr), n);
    }
    if (cur == NULL) {
        return js_dup_into(c, g->m, n, k);
    }
    if (up ? k->valuedouble > cur->valuedouble
           : k->valuedouble < cur->valuedouble)
    {
        cJSON_SetNumberValue(cur, k->valuedouble);
    }
    return JS_OK;
}


/* enum: the values in both; const: equal or nothing */
static int
js_merge_values(js_ctx *c, js_branches *br, js_merged *g, cJSON *cur,
    const cJSON *k)
{
    const cJSON  *p;
    cJSON        *x, *next;

    if (cur == NULL) {
        return js_dup_into(c, g->m, k->string, k);
    }
    if (strcmp(k->string, "const") == 0) {
        br->empty |= !cJSON_Compare(cur, k, 1);
        return JS_OK;
    }
    for (x = cur->child; x; x = next) {
        next = x->next;
        cJSON_ArrayForEach(p, k) {
            if (cJSON_Compare(x, p, 1)) {
                break;
            }
        }
        if (p == NULL) {
            cJSON_Delete(cJSON_DetachItemViaPointer(cur, x));
        }
    }
    return JS_OK;
}


/* patternProperties: exact only when no other schema says which keys are
   additional (its additionalProperties would change) */
static int
js_merge_patterns(js_ctx *c, js_branches *br, js_merged *g, int i,
    const cJSON *k, const char *ptr)
{
    static const char *const  objk[] = {
        "properties", "required", "additionalProperties",
        "patternProperties", "propertyNames", "minProperties",
        "maxProperties", NULL
    };
    const cJSON               *o;
    int                        j;

    if (k->child == NULL) {
        return JS_OK;
    }
    for (j = 0; j < br->n; j++) {
        for (o = j == i ? NULL : br->b[j]->child; o; o = o->next) {
            if (js_in(objk, o->string)) {
                js_relaxable(c, "allOf", NULL);
                return js_fail(c, "json_schema: allOf at %s: cannot merge "
                               "'patternProperties' with another schema's "
                               "'%s'", js_at(ptr), o->string);
            }
        }
    }
    return js_dup_into(c, g->m, k->string, k);
}


/* one keyword k of branch i into the merged schema */
static int
js_merge_key(js_ctx *c, js_branches *br, js_merged *g, int i,
    const cJSON *k, const char *ptr)
{
    const char  *n = k->string;
    cJSON       *cur = cJSON_GetObjectItemCaseSensitive(g->m, n);
    int          tm;

    if (strcmp(n, "$ref") == 0 || strcmp(n, "allOf") == 0
        || !js_in(js_supported, n) || strcmp(n, "items") == 0
        || strcmp(n, "prefixItems") == 0
        || strcmp(n, "additionalItems") == 0)
    {
        return JS_OK;           /* items: js_merge_items */
    }
    if (strcmp(n, "type") == 0) {
        if (js_types(c, br->b[i], ptr, &tm) != JS_OK) {
            return JS_ERR;
        }
        g->mask &= tm;
        g->seen_types = 1;
        return JS_OK;
    }
    if (strcmp(n, "properties") == 0) {
        return js_merge_props(c, g, k, ptr);
    }
    if (strcmp(n, "required") == 0) {
        return js_merge_required(c, g, k, ptr);
    }
    if (strcmp(n, "additionalProperties") == 0) {
        return js_merge_ap(c, g, cur, k, ptr);
    }
    if (js_in(js_mins, n) || js_in(js_maxs, n)
        || strcmp(n, "exclusiveMinimum") == 0
        || strcmp(n, "exclusiveMaximum") == 0)
    {
        return js_merge_bound(c, g, cur, k, ptr);
    }
    if (strcmp(n, "enum") == 0 || strcmp(n, "const") == 0) {
        return js_merge_values(c, br, g, cur, k);
    }
    if (strcmp(n, "patternProperties") == 0) {
        return js_merge_patterns(c, br, g, i, k, ptr);
    }
    if (js_in(js_once, n) && cur && !cJSON_Compare(cur, k, 1)) {
        js_relaxable(c, "allOf", NULL);
        return js_fail(c, "json_schema: allOf at %s: cannot merge two "
                       "different '%s'", js_at(ptr), n);
    }
    if (js_in(js_once, n) && cur == NULL) {
        return js_dup_into(c, g->m, n, k);
    }
    return JS_OK;
}


/* the names one schema s does not declare, with its additionalProperties
   ap (false or a schema): false leaves them out, a schema joins theirs */
static int
js_merge_extra_names(js_ctx *c, js_merged *g, const cJSON *s,
    const cJSON *ap)
{
    cJSON  *x, *next;
    int     j;

    for (j = 0; j < 2; j++) {
        for (x = j == 0 ? g->props->child : g->req->child; x; x = next) {
            const char  *name = j == 0 ? x->string : x->valuestring;

            next = x->next;
            if (js_has_prop(s, name)
                || (j == 1 && cJSON_HasObjectItem(g->props, name)))
            {
                continue;       /* its own, or done with the properties */
            }
            if (cJSON_IsFalse(ap)) {
                if (js_required(g->req, name)) {
                    return JS_EMPTY;
                }
                if (j == 0) {
                    cJSON_Delete(cJSON_DetachItemViaPointer(g->props, x));
                }
                continue;
            }
            if (js_prop_add(c, g->props, name, ap) != JS_OK) {
                return JS_ERR;
            }
        }
    }
    return JS_OK;
}


/* additionalProperties of each schema apply to the names the others
   declare; an additionalProperties false among them wins */
static int
js_merge_extras(js_ctx *c, js_branches *br, js_merged *g)
{
    const cJSON  *ap, *p;
    cJSON        *all;
    int           i, rc;

    all = cJSON_GetObjectItemCaseSensitive(g->m, "additionalProperties");
    for (i = 0; i < br->n; i++) {
        ap = cJSON_GetObjectItemCaseSensitive(br->b[i],
                                              "additionalProperties");
        if (ap == NULL || cJSON_IsTrue(ap)) {
            continue;
        }
        rc = js_merge_extra_names(c, g, br->b[i], ap);
        if (rc != JS_OK) {
            return rc;
        }
    }
    if (all) {
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(all, "allOf")) {
            if (cJSON_IsFalse(p)) {
                cJSON_ReplaceItemInObject(g->m, "additionalProperties",
                                          cJSON_CreateFalse());
                break;
            }
        }
    }
    return JS_OK;
}


/* the types all branches allow, as a "type" list */
static int
js_merge_types(js_ctx *c, js_merged *g, const char *ptr)
{
    static const struct { int bits; const char *name; }  names[] = {
        { T_NULL, "null" }, { T_BOOL, "boolean" }, { T_OBJ, "object" },
        { T_ARR, "array" }, { T_STR, "string" },
    };
    cJSON                                               *t;
    int                                                  j;

    if (!g->seen_types) {
        return JS_OK;
    }
    t = cJSON_AddArrayToObject(g->m, "type");
    if (t == NULL) {
        return js_fail(c, "json_schema: out of memory");
    }
    for (j = 0; j < 5; j++) {
        if (g->mask & names[j].bits) {
            cJSON_AddItemToArray(t, cJSON_CreateString(names[j].name));
        }
    }
    if ((g->mask & (T_INT | T_FRAC)) == (T_INT | T_FRAC)) {
        cJSON_AddItemToArray(t, cJSON_CreateString("number"));
    } else if (g->mask & T_INT) {
        cJSON_AddItemToArray(t, cJSON_CreateString("integer"));
    } else if (g->mask & T_FRAC) {
        return js_fail(c, "json_schema: allOf at %s: the types leave "
                       "non-integer numbers only", js_at(ptr));
    }
    return JS_OK;
}


/* one-branch allOfs left by the merge collapsed; empty lists dropped */
static void
js_merge_tidy(js_merged *g)
{
    cJSON  *v, *next_v, *pre;

    for (v = g->props->child; v; v = next_v) {
        next_v = v->next;
        js_collapse(g->props, v);
    }
    js_collapse(g->m, cJSON_GetObjectItem(g->m, "additionalProperties"));
    js_collapse(g->m, cJSON_GetObjectItem(g->m, "items"));
    pre = cJSON_GetObjectItem(g->m, "prefixItems");
    for (v = pre ? pre->child : NULL; v; v = next_v) {
        next_v = v->next;
        js_collapse(pre, v);
    }
    if (g->props->child == NULL) {
        cJSON_DeleteItemFromObject(g->m, "properties");
    }
    if (g->req->child == NULL) {
        cJSON_DeleteItemFromObject(g->m, "required");
    }
}


int
js_merge(js_ctx *c, js_branches *br, const char *ptr, cJSON **out)
{
    js_merged     g;
    const cJSON  *k;
    int           i, rc;

    *out = NULL;
    memset(&g, 0, sizeof(g));
    g.mask = T_ALL;
    g.m = cJSON_CreateObject();
    if (g.m == NULL || !cJSON_AddItemToArray(c->owned, g.m)) {
        cJSON_Delete(g.m);
        return js_fail(c, "json_schema: out of memory");
    }
    g.props = cJSON_AddObjectToObject(g.m, "properties");
    g.req = cJSON_AddArrayToObject(g.m, "required");
    if (g.props == NULL || g.req == NULL) {
        return js_fail(c, "json_schema: out of memory");
    }
    for (i = 0; i < br->n; i++) {
        for (k = br->b[i]->child; k; k = k->next) {
            if (js_merge_key(c, br, &g, i, k, ptr) != JS_OK) {
                return JS_ERR;
            }
        }
    }
    if (br->empty || g.mask == 0) {
        return JS_EMPTY;
    }
    if (js_merge_items(c, br, g.m, ptr) != JS_OK) {
        return JS_ERR;
    }
    rc = js_merge_extras(c, br, &g);
    if (rc == JS_OK) {
        rc = js_merge_types(c, &g, ptr);
    }
    if (rc != JS_OK) {
        return rc;
    }
    js_merge_tidy(&g);
    *out = g.m;
    return JS_OK;
}
