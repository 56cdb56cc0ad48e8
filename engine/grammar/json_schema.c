/*
 * PLACEHOLDER until branch `schema` lands (the lead replaces this file
 * with that branch's): JSON Schema -> GBNF for {"type":"object"} (any
 * JSON object) and {} (any JSON value) only; every other schema is an
 * error. The JSON grammar itself is complete: strings with escapes,
 * numbers, nesting, at most max_ws blanks in a row between tokens.
 *
 * defines: llm_json_schema_to_gbnf, llm_strbuf_append, llm_strbuf_free
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "grammar/json_schema.h"


int
llm_strbuf_append(llm_strbuf *b, const char *s, size_t len)
{
    size_t  n;
    char   *p;

    if (b->max && b->len + len > b->max) {
        return -1;
    }
    if (b->len + len + 1 > b->cap) {
        n = b->cap ? b->cap * 2 : 256;
        while (n < b->len + len + 1) {
            n *= 2;
        }
        if ((p = realloc(b->data, n)) == NULL) {
            return -1;
        }
        b->data = p;
        b->cap = n;
    }
    memcpy(b->data + b->len, s, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}


void
llm_strbuf_free(llm_strbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}


int
llm_json_schema_to_gbnf(const char *schema, size_t len, const char *root,
    int max_ws, llm_strbuf *out, char *err, size_t err_len)
{
    const cJSON  *type;
    cJSON        *j;
    char          buf[2048];
    int           n, value;

    j = cJSON_ParseWithLength(schema, len);
    if (j == NULL || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        snprintf(err, err_len, "json_schema: the schema is not a JSON "
                 "object");
        return -1;
    }
    type = cJSON_GetObjectItemCaseSensitive(j, "type");
    value = j->child == NULL;
    if (!value && (j->child->next != NULL || !cJSON_IsString(type)
                   || strcmp(type->valuestring, "object") != 0))
    {
        cJSON_Delete(j);
        snprintf(err, err_len, "json_schema: only {\"type\":\"object\"} "
                 "and {} are supported for now");
        return -1;
    }
    cJSON_Delete(j);
    n = snprintf(buf, sizeof(buf),
        "%1$s ::= %1$s-%2$s\n"
        "%1$s-value ::= %1$s-object | %1$s-array | %1$s-string"
        " | %1$s-number | \"true\" | \"false\" | \"null\"\n"
        "%1$s-object ::= \"{\" %1$s-ws ( %1$s-member ( \",\" %1$s-ws"
        " %1$s-member )* )? \"}\"\n"
        "%1$s-member ::= %1$s-string %1$s-ws \":\" %1$s-ws %1$s-value"
        " %1$s-ws\n"
        "%1$s-array ::= \"[\" %1$s-ws ( %1$s-value %1$s-ws ( \",\" %1$s-ws"
        " %1$s-value %1$s-ws )* )? \"]\"\n"
        "%1$s-string ::= \"\\\"\" %1$s-char* \"\\\"\"\n"
        "%1$s-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt]"
        " | \"u\" [0-9a-fA-F]{4} )\n"
        "%1$s-number ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )?"
        " ( [eE] [-+]? [0-9]+ )?\n"
        "%1$s-ws ::= [ \\t\\n\\r]{0,%3$d}\n",
        root, value ? "value" : "object", max_ws > 0 ? max_ws : 0);
    if (n <= 0 || (size_t) n >= sizeof(buf)
        || llm_strbuf_append(out, buf, (size_t) n) != 0)
    {
        snprintf(err, err_len, "json_schema: the grammar is too long");
        return -1;
    }
    return 0;
}
