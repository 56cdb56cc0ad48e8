/*
 * libFuzzer harness for the JSON Schema -> GBNF converter.
 *
 *   make fuzz-smoke            (every harness, FUZZ_SECS=30 each)
 *   build/fuzz/fuzz_json_schema -max_total_time=60 fuzz/corpus/json_schema
 *
 * Beyond "no crash": within its byte cap the converter either fails with
 * a "json_schema: " sentence, or writes GBNF that the grammar engine's
 * parser reads and whose rule root exists; the output never passes the
 * cap.
 */
#include "grammar/grammar_impl.h"
#include "grammar/json_schema.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llm_strbuf   out;
    llm_gbuild   b;
    llm_grammar *g;
    char         err[256], berr[256];

    memset(&out, 0, sizeof(out));
    out.max = 1 << 20;
    if (llm_json_schema_to_gbnf((const char *) data, size, "root", 3, &out,
                                err, sizeof(err)) != 0)
    {
        if (strncmp(err, "json_schema: ", 13) != 0 || out.len > out.max) {
            fprintf(stderr, "bad error: '%s'\n", err);
            abort();
        }
        llm_strbuf_free(&out);
        return 0;
    }
    if (out.len > out.max || out.data == NULL
        || strncmp(out.data, "root ::= ", 9) != 0)
    {
        fprintf(stderr, "bad output\n");
        abort();
    }
    memset(&b, 0, sizeof(b));
    b.max_ws = 3;
    b.err = berr;
    b.err_len = sizeof(berr);
    berr[0] = '\0';
    if (llm_gbnf_parse(&b, out.data, out.len, "json_schema") != 0) {
        /* the converter's GBNF must parse; past the engine's caps it may
           be refused (a 400 too) */
        if (strstr(berr, "deeper") == NULL && strstr(berr, "over") == NULL
            && strstr(berr, "too") == NULL)
        {
            fprintf(stderr, "GBNF refused: %s\n%s\n", berr, out.data);
            abort();
        }
    } else {
        g = llm_grammar_from_build(&b);
        llm_grammar_free(g);
    }
    llm_gbuild_free(&b);
    llm_strbuf_free(&out);
    return 0;
}
