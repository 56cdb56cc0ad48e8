/*
 * A recorder for tools/json_schema_dump.sh: linked into a test binary with
 * -Wl,--wrap= of the two entry points, it appends every schema the binary
 * compiles and the GBNF (or error) the converter gives to $JS_DUMP, so the
 * grammar text of every schema the tests use can be compared across two
 * commits. Without $JS_DUMP it only passes the call on.
 *
 * defines: __wrap_llm_json_schema_compile, __wrap_llm_json_schema_to_gbnf
 */
#include "grammar/json_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int __real_llm_json_schema_compile(const char *schema, size_t len,
    const llm_json_schema_opts *o, llm_strbuf *out, char *err,
    size_t err_len);
int __wrap_llm_json_schema_compile(const char *schema, size_t len,
    const llm_json_schema_opts *o, llm_strbuf *out, char *err,
    size_t err_len);
int __wrap_llm_json_schema_to_gbnf(const char *schema, size_t len,
    const char *root, int max_ws, llm_strbuf *out, char *err,
    size_t err_len);


/* strict conversions are written as before relaxing existed, so dumps of
   the two eras compare */
int
__wrap_llm_json_schema_compile(const char *schema, size_t len,
    const llm_json_schema_opts *o, llm_strbuf *out, char *err,
    size_t err_len)
{
    const char  *path = getenv("JS_DUMP");
    size_t       from = out->len, rfrom = o->relaxed ? o->relaxed->len : 0;
    FILE        *f;
    int          rc;

    rc = __real_llm_json_schema_compile(schema, len, o, out, err, err_len);
    if (path == NULL || (f = fopen(path, "a")) == NULL) {
        return rc;
    }
    fprintf(f, "=== schema (%zu bytes) root %s max_ws %d%s\n", len, o->root,
            o->max_ws, o->strict ? "" : " relaxing");
    fwrite(schema, 1, len, f);
    if (rc == 0) {
        fprintf(f, "\n=== gbnf (%zu bytes)\n", out->len - from);
        fwrite(out->data + from, 1, out->len - from, f);
        if (o->relaxed && o->relaxed->len > rfrom) {
            fprintf(f, "\n=== relaxed\n%s", o->relaxed->data + rfrom);
        }
    } else {
        fprintf(f, "\n=== error\n%s", err);
    }
    fputs("\n", f);
    fclose(f);
    return rc;
}


/* llm_json_schema_to_gbnf calls the compile inside its own file, which
   --wrap does not reach: its callers are recorded here */
int
__wrap_llm_json_schema_to_gbnf(const char *schema, size_t len,
    const char *root, int max_ws, llm_strbuf *out, char *err,
    size_t err_len)
{
    llm_json_schema_opts  o;

    memset(&o, 0, sizeof(o));
    o.root = root;
    o.max_ws = max_ws;
    o.strict = 1;
    return __wrap_llm_json_schema_compile(schema, len, &o, out, err,
                                          err_len);
}
