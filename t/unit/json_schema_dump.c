/*
 * Compiles schema files with the JSON Schema converter, for
 * tools/json_schema_dump.sh (linked with js_dump.c, which records each
 * call). An argument is a schema file, a JSON-Schema-Test-Suite file (an
 * array of {"schema": ...}: each schema), or a file of JSON lines (one
 * schema a line, for the schemas the Test::Nginx files use). Each schema is
 * converted with max_ws 1 and 20 as "root".
 *
 * defines: main
 */
#include "format/file.h"
#include "grammar/json_schema.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void
convert(const char *s, size_t len)
{
    static const int  ws[] = { 1, 20 };
    llm_strbuf        out;
    char              err[512];
    size_t            i;

    for (i = 0; i < sizeof(ws) / sizeof(ws[0]); i++) {
        memset(&out, 0, sizeof(out));
        out.max = 64u << 20;
        (void) llm_json_schema_to_gbnf(s, len, "root", ws[i], &out, err,
                                       sizeof(err));
        llm_strbuf_free(&out);
    }
}


static void
convert_value(const cJSON *v)
{
    char  *s = cJSON_PrintUnformatted(v);

    if (s) {
        convert(s, strlen(s));
        free(s);
    }
}


static void
convert_file(const char *path)
{
    char    *text, *line, *save;
    size_t   n;
    cJSON   *doc = NULL;
    const cJSON  *c;

    text = llm_read_file(path, 0, NULL);
    if (text == NULL) {
        fprintf(stderr, "json_schema_dump: cannot read %s\n", path);
        exit(1);
    }
    n = strlen(text);
    if (n > 6 && strcmp(path + strlen(path) - 6, ".jsonl") == 0) {
        for (line = strtok_r(text, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save))
        {
            convert(line, strlen(line));
        }
    } else if ((doc = cJSON_Parse(text)) != NULL && cJSON_IsArray(doc)) {
        cJSON_ArrayForEach(c, doc) {
            convert_value(cJSON_GetObjectItemCaseSensitive(c, "schema"));
        }
    } else {
        convert(text, n);       /* the file as it is, bytes and all */
    }
    cJSON_Delete(doc);
    free(text);
}


int
main(int argc, char **argv)
{
    int  i;

    for (i = 1; i < argc; i++) {
        convert_file(argv[i]);
    }
    return 0;
}
