/*
 * JSON Schema -> GBNF in our dialect (grammar.h): the compiler of
 * LLM_CONSTRAINT_JSON_SCHEMA, LLM_CONSTRAINT_JSON_OBJECT ({"type":
 * "object"}) and of %json { ... } inside a grammar. docs/json_schema.md
 * lists the keywords enforced and the ones refused.
 *
 * defines: llm_json_schema_opts, llm_json_schema_compile,
 *          llm_json_schema_to_gbnf, llm_strbuf_append, llm_strbuf_free
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

/* how a schema is compiled */
typedef struct {
    const char  *root;      /* the rule's name: root, json0, ... */
    int          max_ws;    /* blanks in a row between tokens; 0: compact
                               JSON, no blank at all */
    int          strict;    /* 1: a keyword the grammar cannot enforce is
                               an error; 0: it is relaxed (dropped, the
                               grammar accepts more) and listed */
    llm_strbuf  *relaxed;   /* NULL, or gets the keywords relaxed, as
                               "uri-format@/properties/homepage, if@"
                               (keyword@JSON pointer, bytes outside
                               printable ASCII and "%, " as %XX) */
} llm_json_schema_opts;

/*
 * Appends to out the GBNF rules of the schema (len bytes of JSON text)
 * under o->root, as llm_json_schema_to_gbnf below, with o's choices.
 * Without strict, what cannot be enforced is relaxed where it is (the
 * keyword dropped from its subschema, or the subschema reduced to its
 * types when the keyword is not its own) and listed in o->relaxed; a
 * schema that is not JSON, a bad $ref, a cap passed, ... stay errors.
 */
int llm_json_schema_compile(const char *schema, size_t len,
    const llm_json_schema_opts *o, llm_strbuf *out, char *err,
    size_t err_len);

/*
 * Appends to out the GBNF rules for the schema (len bytes of JSON text):
 * the rule named root matches the JSON texts the schema accepts (with at
 * most max_ws blanks in a row between tokens); the helper rules it makes
 * are named root-<suffix>, so several schemas can share one grammar.
 * Returns 0, or -1 with a sentence in err naming the keyword and where it
 * is ("json_schema: unsupported keyword 'uniqueItems' at
 * /properties/a"). Strict: llm_json_schema_compile with strict 1.
 */
int llm_json_schema_to_gbnf(const char *schema, size_t len,
    const char *root, int max_ws, llm_strbuf *out, char *err,
    size_t err_len);

#endif /* NGX_LLM_JSON_SCHEMA_H */
