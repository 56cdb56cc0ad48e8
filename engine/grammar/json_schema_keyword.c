/*
 * JSON Schema -> GBNF, reading the schema: JSON pointers (RFC 6901) that
 * say where a message is about, the keywords refused and the ones
 * enforced (docs/json_schema.md; any other keyword is an annotation), the
 * count keywords, "type" and "required". Calls json_schema_buf.c only.
 *
 * defines: js_child, js_index, js_at, js_in, js_refused, js_supported,
 *          js_check_keywords, js_constrains, js_count, js_types,
 *          js_value_type, js_required
 */
#include "grammar/json_schema_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


/* --- pointers and keywords -------------------------------------------- */

/* ptr/key with ~ and / escaped (RFC 6901), cut to fit */
void
js_child(char *dst, size_t len, const char *ptr, const char *key)
{
    size_t  n;

    n = (size_t) snprintf(dst, len, "%s/", ptr);
    for (; *key && n + 3 < len; key++) {
        if (*key == '~' || *key == '/') {
            dst[n++] = '~';
            dst[n++] = *key == '~' ? '0' : '1';
        } else {
            dst[n++] = *key;
        }
    }
    if (n >= len) {
        n = len - 1;
    }
    dst[n] = '\0';
}


void
js_index(char *dst, size_t len, const char *ptr, const char *key, int i)
{
    snprintf(dst, len, "%s/%s/%d", ptr, key, i);
}


const char *
js_at(const char *ptr)
{
    return ptr[0] ? ptr : "the root";
}


int
js_in(const char *const *list, const char *s)
{
    for (; *list; list++) {
        if (strcmp(*list, s) == 0) {
            return 1;
        }
    }
    return 0;
}


/* keywords other than these two lists (title, description, default,
   examples, $defs, ... and unknown ones) are annotations: ignored */

/* validation keywords we cannot enforce: refused */
const char *const js_refused[] = {
    "dependentSchemas", "dependentRequired",
    "dependencies", "if", "then", "else", "not", "contains", "minContains",
    "maxContains", "unevaluatedProperties",
    "unevaluatedItems", "$dynamicRef", "$dynamicAnchor",
    "$recursiveRef", "$recursiveAnchor", "extends", "disallow",
    "divisibleBy", NULL
};

/* the ones we enforce */
const char *const js_supported[] = {
    "type", "properties", "required", "additionalProperties", "items",
    "prefixItems", "additionalItems", "enum", "const", "anyOf", "oneOf",
    "allOf", "$ref", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minItems", "maxItems", "minProperties", "maxProperties",
    "patternProperties", "propertyNames", "multipleOf", "uniqueItems",
    NULL
};


/* a refused keyword whose value changes nothing (an empty
   patternProperties, then/else without if) */
static int
js_noop(const cJSON *s, const cJSON *k)
{
    const char  *n = k->string;

    if (strcmp(n, "if") == 0) {
        return !cJSON_HasObjectItem(s, "then")
               && !cJSON_HasObjectItem(s, "else");
    }
    if (strcmp(n, "then") == 0 || strcmp(n, "else") == 0) {
        return !cJSON_HasObjectItem(s, "if");
    }
    if (strcmp(n, "minContains") == 0 || strcmp(n, "maxContains") == 0) {
        return !cJSON_HasObjectItem(s, "contains");
    }
    /* these with {} constrain nothing (not, contains with {} do) */
    return cJSON_IsObject(k) && k->child == NULL
           && (strcmp(n, "patternProperties") == 0
               || strcmp(n, "dependentSchemas") == 0
               || strcmp(n, "dependentRequired") == 0
               || strcmp(n, "dependencies") == 0
               || strcmp(n, "propertyNames") == 0);
}


int
js_check_keywords(js_ctx *c, const cJSON *s, const char *ptr)
{
    const cJSON  *k;

    for (k = s->child; k; k = k->next) {
        /* an embedded resource: its "#/..." would be relative to it */
        if (strcmp(k->string, "$id") == 0 && ptr[0] && cJSON_IsString(k)
            && k->valuestring[0] != '#')
        {
            return js_fail(c, "json_schema: unsupported keyword '$id' at %s: "
                           "embedded resources are not supported",
                           js_at(ptr));
        }
        if (js_in(js_refused, k->string) && !js_noop(s, k)) {
            /* if/then/else go together, reported as "if" */
            int  cond = strcmp(k->string, "if") == 0
                        || strcmp(k->string, "then") == 0
                        || strcmp(k->string, "else") == 0;

            js_relaxable(c, cond ? "if/then/else" : k->string,
                         cond ? "if" : NULL);
            return js_fail(c, "json_schema: unsupported keyword '%s' at %s",
                           k->string, js_at(ptr));
        }
    }
    return JS_OK;
}


/* 1 when s has a keyword that constrains, other than skip */
int
js_constrains(const cJSON *s, const char *skip)
{
    const cJSON  *k;

    for (k = s->child; k; k = k->next) {
        if ((skip == NULL || strcmp(k->string, skip) != 0)
            && (js_in(js_supported, k->string)
                || js_in(js_refused, k->string)))
        {
            return 1;
        }
    }
    return 0;
}


/* a count keyword: absent -> dflt; else a non-negative integer up to
   JS_MAX_REPEAT */
int
js_count(js_ctx *c, const cJSON *s, const char *key, const char *ptr,
    long dflt, long *out)
{
    const cJSON  *k = cJSON_GetObjectItemCaseSensitive(s, key);

    *out = dflt;
    if (k == NULL) {
        return JS_OK;
    }
    if (!cJSON_IsNumber(k) || k->valuedouble < 0
        || k->valuedouble != floor(k->valuedouble))
    {
        return js_fail(c, "json_schema: '%s' at %s is not a non-negative "
                       "integer", key, js_at(ptr));
    }
    if (k->valuedouble > JS_MAX_REPEAT) {
        js_relaxable(c, key, NULL);
        return js_fail(c, "json_schema: '%s' %.0f at %s is over %d, the "
                       "most the grammar enforces", key, k->valuedouble,
                       js_at(ptr), JS_MAX_REPEAT);
    }
    *out = (long) k->valuedouble;
    return JS_OK;
}


static int
js_type_bit(const char *t)
{
    static const struct { const char *name; int bit; } types[] = {
        { "null", T_NULL }, { "boolean", T_BOOL }, { "object", T_OBJ },
        { "array", T_ARR }, { "string", T_STR }, { "integer", T_INT },
        { "number", T_INT | T_FRAC },
    };
    size_t  i;

    for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (strcmp(types[i].name, t) == 0) {
            return types[i].bit;
        }
    }
    return 0;
}


/* the types "type" allows (all when absent) */
int
js_types(js_ctx *c, const cJSON *s, const char *ptr, int *mask)
{
    const cJSON  *t = cJSON_GetObjectItemCaseSensitive(s, "type"), *i;
    int           bit;

    *mask = T_ALL;
    if (t == NULL) {
        return JS_OK;
    }
    if (cJSON_IsString(t)) {
        *mask = js_type_bit(t->valuestring);
        if (*mask == 0) {
            return js_fail(c, "json_schema: unknown type '%s' at %s",
                           t->valuestring, js_at(ptr));
        }
        return JS_OK;
    }
    if (!cJSON_IsArray(t)) {
        return js_fail(c, "json_schema: 'type' at %s is not a string or an "
                       "array", js_at(ptr));
    }
    *mask = 0;
    cJSON_ArrayForEach(i, t) {
        bit = cJSON_IsString(i) ? js_type_bit(i->valuestring) : 0;
        if (bit == 0) {
            return js_fail(c, "json_schema: 'type' at %s has an unknown "
                           "type", js_at(ptr));
        }
        *mask |= bit;
    }
    return JS_OK;
}


/* the types of one JSON value */
int
js_value_type(const cJSON *v)
{
    if (cJSON_IsNull(v)) {
        return T_NULL;
    }
    if (cJSON_IsBool(v)) {
        return T_BOOL;
    }
    if (cJSON_IsString(v)) {
        return T_STR;
    }
    if (cJSON_IsArray(v)) {
        return T_ARR;
    }
    if (cJSON_IsObject(v)) {
        return T_OBJ;
    }
    return v->valuedouble == floor(v->valuedouble) ? T_INT : T_FRAC;
}


int
js_required(const cJSON *req, const char *name)
{
    const cJSON  *r;

    cJSON_ArrayForEach(r, req) {
        if (cJSON_IsString(r) && strcmp(r->valuestring, name) == 0) {
            return 1;
        }
    }
    return 0;
}
