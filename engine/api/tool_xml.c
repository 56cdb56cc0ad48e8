/*
 * Qwen3-Coder's XML tool calls (api/tool_xml.h).
 *
 * defines: llm_tool_xml_call
 */
#define _GNU_SOURCE     /* memmem */
#include "api/tool_xml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FN_OPEN     "<function="
#define FN_CLOSE    "</function>"
#define P_OPEN      "<parameter="
#define P_CLOSE     "</parameter>"


static size_t
xml_blanks(const char *s, size_t i, size_t n)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n'
                     || s[i] == '\r'))
    {
        i++;
    }
    return i;
}


static int
xml_starts(const char *s, size_t i, size_t n, const char *tag)
{
    size_t  k = strlen(tag);

    return n - i >= k && memcmp(s + i, tag, k) == 0;
}


/* the first tag at or after s[i], its offset or -1 */
static long
xml_find(const char *s, size_t i, size_t n, const char *tag)
{
    const char  *p = memmem(s + i, n - i, tag, strlen(tag));

    return p ? (long) (p - s) : -1;
}


/* the "type" the named tool's schema gives parameter p, or NULL */
static const char *
xml_param_type(const cJSON *tools, const char *fn, const char *p)
{
    const cJSON  *t, *f, *name, *props, *prop, *type;

    cJSON_ArrayForEach(t, tools) {
        f = cJSON_GetObjectItemCaseSensitive(t, "function");
        name = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!cJSON_IsString(name) || strcmp(name->valuestring, fn) != 0) {
            continue;
        }
        props = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(f, "parameters"),
                    "properties");
        prop = cJSON_GetObjectItemCaseSensitive(props, p);
        type = cJSON_GetObjectItemCaseSensitive(prop, "type");
        return cJSON_IsString(type) ? type->valuestring : NULL;
    }
    return NULL;
}


/* value (NUL-terminated) as the JSON its type says, else a string */
static cJSON *
xml_value(const char *v, const char *type)
{
    char    *end;
    cJSON   *j;
    double   d;

    if (type == NULL || strcmp(type, "string") == 0) {
        return cJSON_CreateString(v);
    }
    if (strcmp(type, "integer") == 0 || strcmp(type, "number") == 0) {
        /* finite, and an integer exactly (2^53) when it must be one */
        d = strtod(v, &end);
        if (end != v && *end == '\0' && isfinite(d)
            && (type[0] == 'n' || (fabs(d) < 9007199254740992.0
                                   && d == floor(d))))
        {
            return cJSON_CreateNumber(d);
        }
        return cJSON_CreateString(v);
    }
    if (strcmp(type, "boolean") == 0) {
        if (strcmp(v, "true") == 0 || strcmp(v, "True") == 0) {
            return cJSON_CreateTrue();
        }
        if (strcmp(v, "false") == 0 || strcmp(v, "False") == 0) {
            return cJSON_CreateFalse();
        }
        return cJSON_CreateString(v);
    }
    if (strcmp(type, "object") == 0 || strcmp(type, "array") == 0) {
        j = cJSON_Parse(v);
        if (j != NULL && (type[0] == 'o' ? cJSON_IsObject(j)
                                         : cJSON_IsArray(j)))
        {
            return j;
        }
        cJSON_Delete(j);
    }
    return cJSON_CreateString(v);
}


/* one <parameter=P>value</parameter> at s[*i]; *i past it */
static int
xml_param(const char *s, size_t *i, size_t n, const cJSON *tools,
    const char *fn, cJSON *args, char *why, size_t why_len)
{
    char    *key, *val;
    long     gt, close;
    size_t   k0, v0, v1;
    cJSON   *v;

    k0 = *i + sizeof(P_OPEN) - 1;
    gt = xml_find(s, k0, n, ">");
    if (gt < 0 || (size_t) gt == k0) {
        snprintf(why, why_len, "a <parameter= without its name");
        return -1;
    }
    close = xml_find(s, gt + 1, n, P_CLOSE);
    if (close < 0) {
        snprintf(why, why_len, "a <parameter= without </parameter>");
        return -1;
    }

    v0 = gt + 1;
    v1 = close;
    if (v0 < v1 && s[v0] == '\n') {
        v0++;
    }
    if (v1 > v0 && s[v1 - 1] == '\n') {
        v1--;
    }

    key = strndup(s + k0, gt - k0);
    val = strndup(s + v0, v1 - v0);
    v = (key && val) ? xml_value(val, xml_param_type(tools, fn, key)) : NULL;
    if (v == NULL) {
        free(key);
        free(val);
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(args, key);     /* last wins */
    cJSON_AddItemToObject(args, key, v);
    free(key);
    free(val);

    *i = close + sizeof(P_CLOSE) - 1;
    return 0;
}


int
llm_tool_xml_call(const char *s, size_t n, const cJSON *tools,
    char **name, cJSON **args, char *why, size_t why_len)
{
    long    gt;
    size_t  i, k0;

    *name = NULL;
    *args = NULL;

    i = xml_blanks(s, 0, n);
    if (!xml_starts(s, i, n, FN_OPEN)) {
        snprintf(why, why_len, "a <tool_call> without <function=");
        return -1;
    }
    k0 = i + sizeof(FN_OPEN) - 1;
    gt = xml_find(s, k0, n, ">");
    if (gt < 0 || (size_t) gt == k0) {
        snprintf(why, why_len, "a <function= without its name");
        return -1;
    }

    *name = strndup(s + k0, gt - k0);
    *args = cJSON_CreateObject();
    if (*name == NULL || *args == NULL) {
        snprintf(why, why_len, "out of memory");
        goto failed;
    }

    i = xml_blanks(s, gt + 1, n);
    while (xml_starts(s, i, n, P_OPEN)) {
        if (xml_param(s, &i, n, tools, *name, *args, why, why_len) != 0) {
            goto failed;
        }
        i = xml_blanks(s, i, n);
    }

    /* a reply cut short may lack </function> (as </tool_call>) */
    if (xml_starts(s, i, n, FN_CLOSE)) {
        i = xml_blanks(s, i + sizeof(FN_CLOSE) - 1, n);
    }
    if (i != n) {
        snprintf(why, why_len, "text in a <function= that is not a "
                 "<parameter=");
        goto failed;
    }
    return 0;

failed:
    free(*name);
    cJSON_Delete(*args);
    *name = NULL;
    *args = NULL;
    return -1;
}
