/*
 * JSON Schema -> GBNF in our dialect (grammar.h): the compiler of
 * LLM_CONSTRAINT_JSON_SCHEMA, LLM_CONSTRAINT_JSON_OBJECT ({"type":
 * "object"}) and of %json { ... } inside a grammar. docs/json_schema.md
 * lists the keywords enforced and the ones refused.
 *
 * defines: llm_json_schema_to_gbnf, llm_strbuf_append, llm_strbuf_free
 */
#ifndef NGX_LLM_JSON_SCHEMA_H
#define NGX_LLM_JSON_SCHEMA_H

#include <stddef.h>

/* a growing string with a hard cap: past max an append fails */
typedef struct {
    char       *data;       /* NUL-terminated */
    size_t      len;
    size_t      cap;
    size_t      max;        /* 0: no cap */
} llm_strbuf;

int llm_strbuf_append(llm_strbuf *b, const char *s, size_t len);
void llm_strbuf_free(llm_strbuf *b);

/*
 * Appends to out the GBNF rules for the schema (len bytes of JSON text):
 * the rule named root matches the JSON texts the schema accepts (with at
 * most max_ws blanks in a row between tokens); the helper rules it makes
 * are named root-<suffix>, so several schemas can share one grammar.
 * Returns 0, or -1 with a sentence in err naming the keyword and where it
 * is ("json_schema: unsupported keyword 'uniqueItems' at
 * /properties/a").
 */
int llm_json_schema_to_gbnf(const char *schema, size_t len,
    const char *root, int max_ws, llm_strbuf *out, char *err,
    size_t err_len);

#endif /* NGX_LLM_JSON_SCHEMA_H */
