/*
 * A recorder for tools/json_schema_dump.sh: linked into a test binary with
 * -Wl,--wrap=llm_json_schema_to_gbnf, it appends every schema the binary
 * compiles and the GBNF (or error) the converter gives to $JS_DUMP, so the
 * grammar text of every schema the tests use can be compared across two
 * commits. Without $JS_DUMP it only passes the call on.
 *
 * defines: __wrap_llm_json_schema_to_gbnf
 */
#include "grammar/json_schema.h"

#include <stdio.h>
#include <stdlib.h>

int __real_llm_json_schema_to_gbnf(const char *schema, size_t len,
    const char *root, int max_ws, llm_strbuf *out, char *err,
    size_t err_len);
int __wrap_llm_json_schema_to_gbnf(const char *schema, size_t len,
    const char *root, int max_ws, llm_strbuf *out, char *err,
    size_t err_len);


int
__wrap_llm_json_schema_to_gbnf(const char *schema, size_t len,
    const char *root, int max_ws, llm_strbuf *out, char *err,
    size_t err_len)
{
    const char  *path = getenv("JS_DUMP");
    size_t       from = out->len;
    FILE        *f;
    int          rc;

    rc = __real_llm_json_schema_to_gbnf(schema, len, root, max_ws, out, err,
                                        err_len);
    if (path == NULL || (f = fopen(path, "a")) == NULL) {
        return rc;
    }
    fprintf(f, "=== schema (%zu bytes) root %s max_ws %d\n", len, root,
            max_ws);
    fwrite(schema, 1, len, f);
    if (rc == 0) {
        fprintf(f, "\n=== gbnf (%zu bytes)\n", out->len - from);
        fwrite(out->data + from, 1, out->len - from, f);
    } else {
        fprintf(f, "\n=== error\n%s", err);
    }
    fputs("\n", f);
    fclose(f);
    return rc;
}
