/*
 * JSON Schema -> GBNF (engine/grammar/json_schema.c): the rules each
 * keyword gives, the error each refused keyword gets (keyword and JSON
 * pointer), the caps; then through the grammar engine, byte by byte: texts
 * accepted and rejected, every integer of -1100..1100 against random
 * bounds, the JSON-Schema-Test-Suite's instances (draft 2020-12) for the
 * keywords we support, the corpus of SchemaStore schemas compiled or
 * refused (a count, as a diag), and random byte walks through the
 * grammars of every schema that compiles, each walk's text checked by
 * python jsonschema (tools/json_schema_check.py): the grammar never
 * accepts a text the schema rejects.
 */
#include "tap.h"
#include "format/gguf.h"
#include "grammar/grammar.h"
#include "grammar/grammar_impl.h"
#include "grammar/json_schema.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static llm_tokenizer      *tok;
static llm_grammar_vocab  *vocab;

/* every schema that compiled, for the random walks */
static char   *walk_schemas[4096];
static int     n_walk_schemas;
/* the schemas refused under strict that compile relaxed, for the walks */
static char   *relaxed_schemas[1024];
static int     n_relaxed_schemas;

/* coverage of a group of schemas: exact (strict compiles), relaxed (only
   without strict), refused (either way) */
typedef struct {
    const char  *group;
    int          n, exact, relaxed, refused;
} coverage;


/* a schema refused under strict, without it: 1 when it compiles relaxed
   (kept for the walks), 0 when refused still */
static int
try_relaxed(const char *text, size_t len, const char *name)
{
    llm_grammar         *g;
    llm_grammar_limits   lim;
    char                 err[512];
    uint64_t             t0 = llm_grammar_now_ns();

    llm_grammar_limits_default(&lim);
    lim.max_compile_ns = 0;
    lim.max_source = 1 << 20;   /* past it: seconds (azure-pipelines) */
    lim.strict = 0;
    g = llm_grammar_compile(vocab, LLM_CONSTRAINT_JSON_SCHEMA, text, len,
                            &lim, err, sizeof(err));
    if (name) {
        printf("#   %-28s relaxed: %s (%.1f ms, %zu bytes)\n", name,
               g ? "compiles" : err, (llm_grammar_now_ns() - t0) / 1e6, len);
    }
    if (g == NULL) {
        return 0;
    }
    if (n_relaxed_schemas < 1024) {
        relaxed_schemas[n_relaxed_schemas++] = strndup(text, len);
    }
    llm_grammar_free(g);
    return 1;
}


static void
coverage_add(coverage *cv, int exact, const char *text, size_t len,
    const char *name)
{
    cv->n++;
    if (exact) {
        cv->exact++;
    } else if (try_relaxed(text, len, name)) {
        cv->relaxed++;
    } else {
        cv->refused++;
    }
}


static void
coverage_print(const coverage *cv)
{
    printf("# coverage | %-44s | %5d | %5d | %5d | %5d |\n", cv->group, cv->n,
           cv->exact, cv->relaxed, cv->refused);
}


/* the GBNF of a schema (max_ws 1), or "ERR: <error>"; static */
static const char *
gbnf(const char *schema)
{
    static char  text[65536];
    llm_strbuf   out;
    char         err[512];

    memset(&out, 0, sizeof(out));
    if (llm_json_schema_to_gbnf(schema, strlen(schema), "root", 1, &out,
                                err, sizeof(err)) != 0)
    {
        snprintf(text, sizeof(text), "ERR: %s", err);
    } else {
        snprintf(text, sizeof(text), "%s", out.data);
    }
    llm_strbuf_free(&out);
    return text;
}


/* 1 when the GBNF of schema has the line */
static int
has_line(const char *schema, const char *line)
{
    const char  *g = gbnf(schema), *p;
    size_t       n = strlen(line);

    for (p = g; (p = strstr(p, line)) != NULL; p++) {
        if ((p == g || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0')) {
            return 1;
        }
    }
    printf("# no line: %s\n# in:\n", line);
    for (p = g; *p; ) {
        const char *e = strchr(p, '\n');
        int         len = e ? (int) (e - p) : (int) strlen(p);

        printf("#   %.*s\n", len, p);
        p += len + (e != NULL);
    }
    return 0;
}


static llm_grammar *
compile(const char *schema, size_t len, char *err, size_t err_len)
{
    llm_grammar_limits  lim;

    llm_grammar_limits_default(&lim);

    lim.json_ws = LLM_JSON_WS_FLEXIBLE;     /* the texts have blanks */
    lim.max_compile_ns = 0;     /* timing is not what these tests check */
    return llm_grammar_compile(vocab, LLM_CONSTRAINT_JSON_SCHEMA, schema,
                               len, &lim, err, err_len);
}


/* the corpus' schemas are up to 2.3 MB: the converter and the engine on
   them, past the request limit */
static llm_grammar *
compile_big(const char *schema, size_t len, char *err, size_t err_len)
{
    llm_grammar_limits  lim;

    llm_grammar_limits_default(&lim);

    lim.json_ws = LLM_JSON_WS_FLEXIBLE;     /* the texts have blanks */
    lim.max_compile_ns = 0;
    lim.max_source = 4 << 20;
    return llm_grammar_compile(vocab, LLM_CONSTRAINT_JSON_SCHEMA, schema,
                               len, &lim, err, err_len);
}


/* compiled with the request defaults but for strict and json_ws */
static llm_grammar *
compile_opts(int kind, const char *schema, int strict, int json_ws,
    char *err, size_t err_len)
{
    llm_grammar_limits  lim;

    llm_grammar_limits_default(&lim);
    lim.max_compile_ns = 0;
    lim.max_source = 4 << 20;
    lim.strict = strict;
    lim.json_ws = json_ws;
    return llm_grammar_compile(vocab, kind, schema, strlen(schema), &lim, err,
                               err_len);
}


/* 1 when the grammar matches the text whole */
static int
accepts(llm_grammar *g, const char *s, size_t len)
{
    llm_matcher  *m = llm_matcher_new(g);
    int           r;

    r = m && llm_matcher_accept_bytes(m, s, len) == 0
        && llm_matcher_can_end(m);
    llm_matcher_free(m);
    return r;
}


/* schema vs texts: each "+text" must be accepted, each "-text" rejected */
static void
check(const char *schema, const char *const *texts)
{
    llm_grammar  *g;
    char          err[512];
    int           bad = 0, n = 0;

    g = compile(schema, strlen(schema), err, sizeof(err));
    if (g == NULL) {
        ok(0, "compiles: %s", schema);
        printf("#   %s\n", err);
        return;
    }
    for (; *texts; texts++, n++) {
        int  want = (*texts)[0] == '+';
        int  got = accepts(g, *texts + 1, strlen(*texts + 1));

        if (got != want) {
            printf("#   %s: %s wrongly %s\n", schema, *texts + 1,
                   got ? "accepted" : "rejected");
            bad++;
        }
    }
    ok(bad == 0, "%d texts for %s", n, schema);
    llm_grammar_free(g);
}


static void
test_emit(void)
{
    ok(has_line("{\"type\":\"string\"}", "root ::= root-string"), "string");
    ok(has_line("{\"type\":\"string\"}",
                "root-char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( "
                "[\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | "
                "[dD] [0-7] [0-9a-fA-F]{2} ) )"),
       "a string's characters: escapes, no controls, no lone surrogates");
    ok(has_line("{\"type\":\"integer\"}",
                "root-integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )"),
       "integer: at most 16 digits");
    ok(has_line("{\"type\":\"number\"}",
                "root-number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" "
                "[0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?"),
       "number: 16 + 16 digits, 2 of exponent");
    ok(has_line("{\"type\":\"boolean\"}", "root ::= ( \"true\" | \"false\" )"),
       "boolean");
    ok(has_line("{\"type\":\"null\"}", "root ::= \"null\""), "null");
    ok(has_line("{\"type\":[\"string\",\"null\"]}",
                "root ::= ( \"null\" | root-string )"), "type union");
    ok(has_line("{\"enum\":[\"a\",1,null,[true]]}",
                "root ::= ( \"\\\"a\\\"\" | \"1\" | \"null\" | \"[true]\" )"),
       "enum");
    ok(has_line("{\"type\":\"string\",\"enum\":[\"a\",1]}",
                "root ::= \"\\\"a\\\"\""), "enum values of the wrong type left out");
    ok(has_line("{\"const\":{\"a\":[1,2]}}",
                "root ::= \"{\\\"a\\\":[1,2]}\""), "const: compact");
    ok(has_line("{\"type\":\"string\",\"minLength\":2,\"maxLength\":5}",
                "root ::= \"\\\"\" root-char{2,5} \"\\\"\""), "min/maxLength");
    ok(has_line("{\"type\":\"string\",\"minLength\":1}",
                "root ::= \"\\\"\" root-char+ \"\\\"\""), "minLength alone");
    ok(has_line("{\"type\":\"string\",\"pattern\":\"^ab+$\"}",
                "root ::= \"\\\"\" ( \"a\" ( \"b\" )+ ) \"\\\"\""),
       "pattern, anchored");
    ok(has_line("{\"type\":\"string\",\"pattern\":\"b\"}",
                "root ::= \"\\\"\" ( root-char* \"b\" root-char* ) \"\\\"\""),
       "pattern, unanchored: anything around");
    ok(has_line("{\"type\":\"string\",\"pattern\":\"^[a\\\"]\\\\.$\"}",
                "root ::= \"\\\"\" ( ( [a] | \"\\\\\\\"\" ) \".\" ) \"\\\"\""),
       "pattern: a quote in a class becomes its escape");
    ok(has_line("{\"type\":\"string\",\"pattern\":\"^\\\\d{3}[^x]$\"}",
                "root ::= \"\\\"\" ( ( [0-9] ){3} ( [^x\"\\\\\\x00-\\x1f] | "
                "\"\\\\\\\"\" | \"\\\\\\\\\" ) ) \"\\\"\""),
       "pattern: \\d, a negated class");
    ok(has_line("{\"type\":\"string\",\"format\":\"date\"}",
                "root ::= \"\\\"\" root-date \"\\\"\""), "format date");
    ok(has_line("{\"type\":\"string\",\"format\":\"date-time\"}",
                "root ::= \"\\\"\" root-date \"T\" root-time \"\\\"\""),
       "format date-time");
    ok(has_line("{\"type\":\"string\",\"format\":\"uuid\"}",
                "root-uuid ::= root-hex{8} \"-\" root-hex{4} \"-\" root-hex{4} "
                "\"-\" root-hex{4} \"-\" root-hex{12}"), "format uuid");
    ok(has_line("{\"type\":\"integer\",\"minimum\":18,\"maximum\":130}",
                "root ::= ( ( \"1\" [8-9] | [2-9] [0-9] ) | \"1\" ( [0-2] "
                "[0-9] | \"3\" \"0\" ) )"), "integer range 18..130");
    ok(has_line("{\"type\":\"integer\",\"exclusiveMinimum\":-3,"
                "\"exclusiveMaximum\":3}",
                "root ::= ( [0-2] | \"-\" [1-2] )"), "exclusive bounds");
    ok(has_line("{\"type\":\"integer\",\"minimum\":0}",
                "root ::= ( [0-9] | [1-9] [0-9]{1,15} )"), "minimum 0");
    ok(has_line("{\"type\":\"number\",\"minimum\":0,\"maximum\":1}",
                "root ::= ( \"0\" ( \".\" [0-9]{1,16} )? | \"1\" )"),
       "number in [0, 1]");
    ok(has_line("{\"type\":\"number\",\"exclusiveMinimum\":0}",
                "root ::= ( ( [1-9] | [1-9] [0-9]{1,15} ) ( \".\" [0-9]{1,16} "
                ")? | \"0.\" [0-9]{0,14} [1-9] )"), "number > 0");

    /* objects: properties in order, required ones there, optional ones
       may be left out, additional ones after */
    ok(has_line("{\"type\":\"object\"}", "root ::= root-object"),
       "json_object: any object");
    ok(has_line("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                "\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"],"
                "\"additionalProperties\":false}",
                "root-kv1 ::= \"\\\"a\\\"\" root-ws \":\" root-ws root-integer"),
       "a property's key and value");
    ok(has_line("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                "\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"],"
                "\"additionalProperties\":false}",
                "root-object3-f0 ::= root-kv1 root-object3-a1"),
       "required a first");
    ok(has_line("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                "\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"],"
                "\"additionalProperties\":false}",
                "root-object3-a1 ::= ( root-ws \",\" root-ws root-kv2 )?"),
       "optional b after");
    ok(has_line("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":"
                "\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"],"
                "\"additionalProperties\":false}",
                "root-object3 ::= \"{\" root-ws ( root-object3-f0 root-ws ) "
                "\"}\""), "the object");
    ok(has_line("{\"type\":\"object\",\"properties\":{\"ab\":{}},"
                "\"additionalProperties\":{\"type\":\"null\"}}",
                "root-keys2 ::= \"\\\"\" ( \"a\" ( \"b\" ( [^\"\\\\\\x00-\\x1f] "
                "root-kchar* \"\\\"\" ) | [^b\"\\\\\\x00-\\x1f] root-kchar* "
                "\"\\\"\" | \"\\\"\" ) | [^a\"\\\\\\x00-\\x1f] root-kchar* "
                "\"\\\"\" | \"\\\"\" )"),
       "additional keys: any but the declared names");
    ok(has_line("{\"type\":\"object\",\"properties\":{\"ab\":{}},"
                "\"additionalProperties\":{\"type\":\"null\"}}",
                "root-kv3 ::= root-keys2 root-ws \":\" root-ws \"null\""),
       "an additional property");
    ok(has_line("{\"properties\":{\"x\":{\"type\":\"object\",\"properties\":"
                "{\"ab\":{}}},\"y\":{\"type\":\"object\",\"properties\":"
                "{\"ab\":{}}}},\"type\":\"object\"}",
                "root-kv7 ::= root-keys2 root-ws \":\" root-ws root-value"),
       "objects with the same names share their additional-key rule");
    ok(has_line("{\"type\":\"object\",\"additionalProperties\":{\"type\":"
                "\"integer\"},\"maxProperties\":2}",
                "root-object2 ::= \"{\" root-ws ( root-kv1 ( root-ws \",\" "
                "root-ws root-kv1 )? root-ws )? \"}\""),
       "a map with maxProperties");

    /* arrays */
    ok(has_line("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},"
                "\"minItems\":1,\"maxItems\":3}",
                "root-array1 ::= \"[\" root-ws ( root-integer ( root-ws \",\" "
                "root-ws root-integer ){0,2} root-ws ) \"]\""),
       "items, minItems, maxItems");
    ok(has_line("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},"
                "{\"type\":\"string\"}],\"items\":false}",
                "root-array1 ::= \"[\" root-ws ( root-integer ( root-ws \",\" "
                "root-ws root-string )? root-ws )? \"]\""),
       "prefixItems, items false");
    ok(has_line("{\"type\":\"array\",\"maxItems\":0}",
                "root-array1 ::= \"[\" root-ws \"]\""), "maxItems 0");

    /* combinations and references */
    ok(has_line("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}",
                "root ::= ( root-integer | root-string )"), "anyOf");
    ok(has_line("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}",
                "root ::= ( root-integer | root-string )"), "oneOf as anyOf");
    ok(has_line("{\"allOf\":[{\"type\":\"string\"},{\"maxLength\":3}]}",
                "root ::= \"\\\"\" root-char{0,3} \"\\\"\""), "allOf merged");
    ok(has_line("{\"allOf\":[{\"type\":[\"string\",\"integer\"]},"
                "{\"type\":[\"integer\",\"null\"]}]}",
                "root ::= root-integer"), "allOf: the types in both");
    ok(has_line("{\"$defs\":{\"t\":{\"type\":\"array\",\"items\":{\"$ref\":"
                "\"#/$defs/t\"}}},\"$ref\":\"#/$defs/t\"}",
                "root-array2 ::= \"[\" root-ws ( root-ref1 ( root-ws \",\" "
                "root-ws root-ref1 )* root-ws )? \"]\""),
       "recursive $ref: a recursive rule");
    ok(has_line("{\"$defs\":{\"t\":{\"type\":\"array\",\"items\":{\"$ref\":"
                "\"#/$defs/t\"}}},\"$ref\":\"#/$defs/t\"}",
                "root-ref1 ::= root-array2"), "the $ref's rule");
    ok(has_line("{\"title\":\"x\",\"description\":\"y\",\"default\":1,"
                "\"examples\":[],\"$comment\":\"\",\"deprecated\":true,"
                "\"readOnly\":true,\"x-vendor\":1,\"type\":\"null\"}",
                "root ::= \"null\""), "annotations ignored");
    ok(has_line("{}", "root ::= root-value"), "{}: any value");
    ok(has_line("true", "root ::= root-value"), "true: any value");

    /* whitespace cap */
    {
        llm_strbuf  out;
        char        err[256];

        memset(&out, 0, sizeof(out));
        is_int(llm_json_schema_to_gbnf("{\"type\":\"object\"}", 17, "root", 0,
                                       &out, err, sizeof(err)), 0, "max_ws 0");
        ok(out.data && strstr(out.data, "\nroot-ws ::= \"\"\n"),
           "max_ws 0: no blanks");
        llm_strbuf_free(&out);
        is_int(llm_json_schema_to_gbnf("{\"type\":\"object\"}", 17, "json3",
                                       7, &out, err, sizeof(err)), 0, "root name");
        ok(out.data && strstr(out.data, "\njson3-ws ::= [ \\t\\n]{0,7}\n")
           && strncmp(out.data, "json3 ::= json3-object\n", 23) == 0,
           "helper rules are named <root>-...");
        llm_strbuf_free(&out);
    }
}


static void
test_refused(void)
{
    static const char *const kw[][2] = {
        { "dependentSchemas", "{\"a\":{}}" },
        { "dependentRequired", "{\"a\":[\"b\"]}" },
        { "dependencies", "{\"a\":[\"b\"]}" },
        { "if", "{}" },
        { "not", "{}" },
        { "contains", "{}" },
        { "unevaluatedProperties", "false" },
        { "unevaluatedItems", "false" },
        { "$dynamicRef", "\"#x\"" },
        { "$recursiveRef", "\"#\"" },
    };
    char    schema[256], want[256];
    size_t  i;

    for (i = 0; i < sizeof(kw) / sizeof(kw[0]); i++) {
        snprintf(schema, sizeof(schema), "{\"properties\":{\"a/b\":{\"%s\":%s"
                 "%s}}}", kw[i][0], kw[i][1],
                 strcmp(kw[i][0], "if") ? "" : ",\"then\":{}");
        snprintf(want, sizeof(want), "ERR: json_schema: unsupported keyword "
                 "'%s' at /properties/a~1b", kw[i][0]);
        is_str(gbnf(schema), want, "refused: %s", kw[i][0]);
    }
    is_str(gbnf("{\"uniqueItems\":false,\"then\":{},\"patternProperties\":{},"
                "\"type\":\"null\"}"), "root ::= \"null\"\n",
           "no-op values of refused keywords are accepted");
    ok(strncmp(gbnf("{\"type\":\"array\",\"uniqueItems\":true,\"maxItems\":1}"),
               "root ::= ", 9) == 0, "uniqueItems with maxItems 1: a no-op");
    is_str(gbnf("{\"items\":[{\"$ref\":\"other.json#/a\"}]}"),
           "ERR: json_schema: unsupported keyword '$ref' at /items/0: only "
           "references inside the schema ('#/...') are supported, not "
           "'other.json#/a'", "remote $ref");
    is_str(gbnf("{\"properties\":{\"a\":{\"$id\":\"http://x/a.json\","
                "\"$ref\":\"#/$defs/b\",\"$defs\":{\"b\":{}}}}}"),
           "ERR: json_schema: unsupported keyword '$id' at /properties/a: "
           "embedded resources are not supported", "embedded $id");
    is_str(gbnf("{\"$ref\":\"#foo\"}"),
           "ERR: json_schema: unsupported keyword '$ref' at the root: anchors "
           "('#foo') are not supported", "anchor $ref");
    is_str(gbnf("{\"$ref\":\"#/$defs/none\"}"),
           "ERR: json_schema: '$ref' '#/$defs/none' at the root names nothing "
           "in the schema", "dangling $ref");
    is_str(gbnf("{\"anyOf\":[{\"$ref\":\"#\"},{\"type\":\"null\"}]}"),
           "ERR: json_schema: '$ref' at /anyOf/0 is left-recursive (it reaches "
           "itself before any '{' or '[')", "left recursion");
    is_str(gbnf("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":"
                "\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}"),
           "ERR: json_schema: '$ref' at the root: a circle of references",
           "a circle of $refs");
    is_str(gbnf("{\"type\":\"string\",\"format\":\"idn-hostname\"}"),
           "ERR: json_schema: unsupported format 'idn-hostname' at the root",
           "unsupported format");
    is_str(gbnf("{\"type\":\"number\",\"minimum\":0.5}"),
           "ERR: json_schema: 'minimum' 0.5 at the root: only integer bounds "
           "are enforced on numbers", "fractional bound on a number");
    ok(strncmp(gbnf("{\"type\":\"integer\",\"minimum\":0.5}"), "root ::=", 8)
       == 0, "a fractional bound on an integer is fine");
    is_str(gbnf("{\"type\":\"integer\",\"maximum\":1e17}"),
           "ERR: json_schema: 'maximum' 1e+17 at the root is beyond 2^53",
           "a bound past 2^53");
    is_str(gbnf("{\"type\":\"string\",\"pattern\":\"a(?=b)\"}"),
           "ERR: json_schema: pattern at the root: lookaround and (?...) "
           "groups are not supported (at offset 2)", "pattern: lookahead");
    is_str(gbnf("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}"),
           "ERR: json_schema: pattern at the root: \\1 is not supported (at "
           "offset 5)", "pattern: backreference");
    is_str(gbnf("{\"type\":\"string\",\"pattern\":\"a^b\"}"),
           "ERR: json_schema: pattern at the root: ^ and $ are supported only "
           "at the ends of the pattern's top-level alternatives (at offset 1)",
           "pattern: ^ inside");
    is_str(gbnf("{\"type\":\"string\",\"pattern\":\"^a{8,5/$\"}"),
           "root ::= \"\\\"\" ( \"a\" \"{\" \"8\" \",\" \"5\" \"/\" ) \"\\\"\"\n",
           "pattern: a '{' that is no quantifier is a literal (found by "
           "fuzzing)");
    is_str(gbnf("{\"type\":\"string\",\"pattern\":\"x\",\"maxLength\":3}"),
           "ERR: json_schema: 'pattern' with minLength/maxLength at the root "
           "is not supported", "pattern with maxLength");
    is_str(gbnf("{\"type\":\"object\",\"properties\":{\"a\":{}},"
                "\"minProperties\":2}"),
           "ERR: json_schema: minProperties/maxProperties at the root with "
           "properties is not supported (beyond what required and "
           "additionalProperties say)", "minProperties beyond required");
    is_str(gbnf("{\"allOf\":[{\"pattern\":\"a\"},{\"pattern\":\"b\"}]}"),
           "ERR: json_schema: allOf at the root: cannot merge two different "
           "'pattern'", "allOf of two patterns");
    is_str(gbnf("{\"enum\":[1],\"minimum\":0}"),
           "ERR: json_schema: 'enum' with 'minimum' at the root is not "
           "supported", "enum with another keyword");
    is_str(gbnf("false"),
           "ERR: json_schema: the schema accepts no JSON value", "false");
    is_str(gbnf("{\"type\":\"object\",\"required\":[\"a\"],"
                "\"additionalProperties\":false}"),
           "ERR: json_schema: the schema accepts no JSON value",
           "required but not allowed");
    is_str(gbnf("{\"type\":\"strin\"}"),
           "ERR: json_schema: unknown type 'strin' at the root", "bad type");
    is_str(gbnf("{\"type\":"), "ERR: json_schema: the schema is not valid "
           "JSON (near byte 7)", "not JSON");
    is_str(gbnf("[1]"), "ERR: json_schema: the schema at the root is not an "
           "object or a boolean", "not a schema");
    is_str(gbnf("{\"enum\":[\"\xc3\"]}"), "ERR: json_schema: the schema is "
           "not valid UTF-8 (at byte 10)", "not UTF-8");
    is_str(gbnf("{\"enum\":[\"\xed\xa0\x80\"]}"), "ERR: json_schema: the "
           "schema is not valid UTF-8 (at byte 10)", "a surrogate in UTF-8");
    is_str(gbnf("{\"enum\":[\"\x01\"]}"), "ERR: json_schema: the schema has "
           "a control byte (0x01 at byte 10)", "a control byte in a string");
    is_str(gbnf("{\"properties\":{\"a\\u0000b\":{}}}"), "ERR: json_schema: "
           "the schema has \\u0000 (at byte 17)", "\\u0000");
    ok(strncmp(gbnf("{\"enum\":[\"a\\\\u0000\"]}"), "root ::= ", 9) == 0,
       "an escaped backslash before u0000 is fine");
    is_str(gbnf("{\"properties\":{\"a\":{},\"b\":{\"type\":\"null\",\"type\":1}}}"),
           "ERR: json_schema: the key 'type' is twice in the object at "
           "/properties/b", "a key twice");
}


static void
test_caps(void)
{
    llm_strbuf  out;
    char        err[256], *deep;
    int         i, n;

    /* out->max */
    memset(&out, 0, sizeof(out));
    out.max = 200;
    is_int(llm_json_schema_to_gbnf("{\"type\":\"object\",\"properties\":{\"a\":"
                                   "{\"type\":\"string\"}}}", 54, "root", 1, &out,
                                   err, sizeof(err)), -1, "over out->max");
    is_str(err, "json_schema: the grammar would be over 200 bytes",
           "its error");
    llm_strbuf_free(&out);

    /* nesting */
    deep = malloc(20000);
    n = 0;
    for (i = 0; i < 100; i++) {
        n += sprintf(deep + n, "{\"items\":");
    }
    n += sprintf(deep + n, "{}");
    for (i = 0; i < 100; i++) {
        deep[n++] = '}';
    }
    deep[n] = '\0';
    ok(strstr(gbnf(deep), "ERR: json_schema: the schema at /items/items/")
       && strstr(gbnf(deep), "is nested deeper than 64"),
       "100 nested schemas: an error");
    free(deep);

    /* 130 names with different first characters: over the engine's
       ranges in a class, an error (not a name left out of the class) */
    deep = malloc(20000);
    n = sprintf(deep, "{\"type\":\"object\",\"properties\":{");
    for (i = 0; i < 130; i++) {
        n += sprintf(deep + n, "%s\"\\u%04x\":{}", i ? "," : "", 0x100 + 2 * i);
    }
    sprintf(deep + n, "}}");
    is_str(gbnf(deep), "ERR: json_schema: property names begin with too many "
           "different characters after a shared prefix",
           "130 names beginning differently: refused");
    free(deep);

    is_str(gbnf("{\"type\":\"string\",\"maxLength\":1073741825}"),
           "ERR: json_schema: 'maxLength' 1073741825 at the root is over "
           "1073741824, the most the grammar enforces", "maxLength cap");
    ok(strncmp(gbnf("{\"type\":\"string\",\"maxLength\":1073741824}"),
               "root ::=", 8) == 0, "maxLength 2^30 is fine");
    is_str(gbnf("{\"type\":\"array\",\"minItems\":-1}"),
           "ERR: json_schema: 'minItems' at the root is not a non-negative "
           "integer", "negative minItems");
    memset(&out, 0, sizeof(out));
    is_int(llm_json_schema_to_gbnf("{}", 2, "bad name", 1, &out, err,
                                   sizeof(err)), -1, "bad root name");
    is_int(llm_json_schema_to_gbnf("{}", 2, "root", -1, &out, err,
                                   sizeof(err)), -1, "negative max_ws");
    llm_strbuf_free(&out);
}


static void
test_match(void)
{
    static const char *const obj[] = {
        "+{\"a\":1}", "+{\"a\":1,\"b\":\"x\"}", "+{ \"a\" : 1 , \"b\" : \"\" }",
        "-{\"b\":\"x\",\"a\":1}", "-{\"b\":\"x\"}", "-{}", "-{\"a\":1,\"c\":2}",
        "-{\"a\":\"1\"}", "-{\"a\":1,}", "-{\"a\":1}x",
        "+{                    \"a\":1}", "-{                     \"a\":1}",
        NULL
    };
    static const char *const opt[] = {
        "+{}", "+{\"a\":1}", "+{\"b\":2}", "+{\"a\":1,\"b\":2}",
        "+{\"a\":1,\"x\":true}", "+{\"x\":[],\"y\":{}}", "+{\"ab\":1}",
        "-{\"a\":1,\"a\":1}", "-{\"x\":1,\"a\":1}", "-{,}", "-{\"a\":1,}",
        "-{\"a\\u0041\":1}", NULL
    };
    static const char *const arr[] = {
        "-[]", "+[1]", "+[1,2,3]", "-[1,2,3,4]", "-[1.5]", "+[ 1 , -2 ]",
        "-[1,]", NULL
    };
    static const char *const tuple[] = {
        "+[]", "+[1]", "+[1,\"a\"]", "+[1,\"a\",null,null]", "-[1,\"a\",2]",
        "-[\"a\"]", NULL
    };
    static const char *const str[] = {
        "+\"\"", "+\"abc\"", "+\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\"",
        "+\"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\"", "-\"\t\"", "-\"\\x\"",
        "-\"\\ud800\"", "-abc", "-\"abc", NULL
    };
    static const char *const len[] = {
        "-\"a\"", "+\"ab\"", "+\"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\"",
        "+\"\\n\\u0041\"", "-\"abcd\"", NULL
    };
    static const char *const pat[] = {
        "+\"ab-12\"", "+\"zz-9999\"", "-\"ab-1\"", "-\"Ab-12\"", "-\"ab12\"",
        "-\"ab-12x\"", NULL
    };
    static const char *const unanch[] = {
        "+\"foo\"", "+\"xx foo yy\"", "+\"\\\"foo\\\"\"", "-\"fo\"", NULL
    };
    static const char *const esc[] = {
        "+\"a\\\"b\"", "+\"a\\\\b\"", "+\"a\\nb\"", "-\"a\\u000ab\"",
        "-\"ab\"", NULL
    };
    static const char *const date[] = {
        "+\"2024-02-29\"", "+\"2000-02-29\"", "-\"1900-02-29\"",
        "-\"2023-02-29\"", "+\"2023-12-31\"", "-\"2023-04-31\"",
        "-\"2023-13-01\"", "-\"0000-01-01\"", "-\"2023-1-01\"", NULL
    };
    static const char *const dt[] = {
        "+\"2023-06-01T12:30:59Z\"", "+\"2023-06-01T00:00:00.123+05:30\"",
        "-\"2023-06-01T24:00:00Z\"", "-\"2023-06-01 12:30:59Z\"",
        "-\"2023-06-01T12:30:59\"", NULL
    };
    static const char *const uuid[] = {
        "+\"123e4567-e89b-12d3-a456-426614174000\"",
        "-\"123e4567e89b12d3a456426614174000\"",
        "-\"123e4567-e89b-12d3-a456-42661417400g\"", NULL
    };
    static const char *const email[] = {
        "+\"joe.bloggs@example.com\"", "-\"joe\"", "-\"@example.com\"", NULL
    };
    static const char *const host[] = {
        "+\"example.com\"", "+\"a-b.c1.org\"", "+\"localhost\"",
        "-\"-a.com\"", "-\"a-.com\"", "-\"a..com\"", "-\"a.com.\"",
        "-\"1.2.3.4\"", "-\"a_b.com\"", "-\"\"",
        "-\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com\"", NULL
    };
    static const char *const ipv4[] = {
        "+\"192.168.0.1\"", "+\"0.0.0.0\"", "+\"255.255.255.255\"",
        "-\"256.1.1.1\"", "-\"01.1.1.1\"", "-\"1.1.1\"",
        "-\"1.1.1.1.1\"", "-\"1.1.1.\"", NULL
    };
    static const char *const ipv6[] = {
        "+\"::\"", "+\"::1\"", "+\"fe80::\"", "+\"1:2:3:4:5:6:7:8\"",
        "+\"2001:db8::\"", "+\"::ffff:1:2\"", "-\"1:2:3:4:5:6:7\"",
        "-\"1:2:3:4:5:6:7:8:9\"", "-\":::\"", "-\"12345::\"",
        "-\"g::\"", NULL
    };
    static const char *const uri[] = {
        "+\"https://example.com/a?b=c#d\"", "+\"urn:isbn:0451450523\"",
        "+\"mailto:joe@example.com\"", "+\"http://x/%20y\"",
        "-\"example.com\"", "-\"//example.com\"", "-\"1http://a\"",
        "-\"http://a b\"", "-\"http://a#b#c\"", "-\"http://a/%2\"",
        "-\"http://a/<b>\"", NULL
    };
    static const char *const mult3[] = {
        "+0", "+3", "+-9", "+123", "+999999999999999", "+1000000000000002",
        "-1", "-10", "-1.5", "-3.0", "-10000000000000002", NULL
    };
    static const char *const mult5[] = {
        "+5", "+10", "+15", "+20", "-0", "-25", "-7", "--5", NULL
    };
    static const char *const mult5x[] = {
        "+5", "-0", "-10", "-4", NULL
    };
    static const char *const mult16[] = {
        "+128", "+-640", "+0", "+1000000000000000", "-100", "-24", NULL
    };
    static const char *const mult1000[] = {
        "+0", "+-3000", "+1000000000000000", "-10000000000000000", "-100",
        "-1001", "-0000", NULL
    };
    static const char *const uniq[] = {
        "+[]", "+[\"a\"]", "+[\"c\",\"a\",\"b\"]", "+[\"b\",\"c\"]",
        "-[\"a\",\"a\"]", "-[\"a\",\"b\",\"a\"]", "-[\"d\"]",
        "-[\"a\",\"b\",\"c\",\"a\"]", NULL
    };
    static const char *const uniq2[] = {
        "+[\"b\",\"a\"]", "+[\"a\",\"c\"]", "-[\"a\"]", "-[]",
        "-[\"a\",\"b\",\"c\"]", "-[\"a\",\"a\"]", NULL
    };
    static const char *const uniqb[] = {
        "+[true,false]", "+[null]", "+[false,null,true]", "-[true,true]",
        "-[null,false,null]", NULL
    };
    static const char *const num[] = {
        "+0", "+-0", "+12.5", "+1e10", "+-1.5E-3", "-01", "-1.", "-.5",
        "-+1", "-1e100", "+1234567890123456", "-12345678901234567", NULL
    };
    static const char *const nul[] = {
        "+null", "+\"x\"", "-1", "-nul", NULL
    };
    static const char *const rec[] = {
        "+{\"v\":1}", "+{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3}}}",
        "-{\"v\":1,\"next\":{\"next\":{}}}", "-{\"v\":1,\"next\":null}", NULL
    };
    static const char *const any[] = {
        "+1", "+\"a\"", "-\"ab\"", "+true", "-2", NULL
    };
    static const char *const all[] = {
        "+{\"a\":1,\"b\":\"x\"}", "-{\"a\":1}", "-{\"b\":\"x\"}",
        "-{\"a\":1,\"b\":\"x\",\"c\":1}", NULL
    };
    static const char *const rec_allof[] = {
        "+null", "+[null]", "+[[null,[]],[[[]]]]", "-[]", "-[1]",
        "-[null,null,null,null]", "+[[],[],[]]", "-[[[null,null,null,null]]]",
        NULL
    };
    static const char *const json_obj[] = {
        "+{}", "+{\"a\":[1,{\"b\":null}],\"c\":\"d\"}", "-[]", "-1", NULL
    };

    check("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
          "\"b\":{\"type\":\"string\"}},\"required\":[\"a\"],"
          "\"additionalProperties\":false}", obj);
    check("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
          "\"b\":{\"type\":\"integer\"}}}", opt);
    check("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},"
          "\"minItems\":1,\"maxItems\":3}", arr);
    check("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},"
          "{\"type\":\"string\"}],\"items\":{\"type\":\"null\"}}", tuple);
    check("{\"type\":\"string\"}", str);
    check("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", len);
    check("{\"type\":\"string\",\"pattern\":\"^[a-z]{2}-\\\\d{2,4}$\"}", pat);
    check("{\"type\":\"string\",\"pattern\":\"foo\"}", unanch);
    check("{\"type\":\"string\",\"pattern\":\"^a[\\\"\\\\\\\\\\\\n]b$\"}", esc);
    check("{\"type\":\"string\",\"format\":\"date\"}", date);
    check("{\"type\":\"string\",\"format\":\"date-time\"}", dt);
    check("{\"type\":\"string\",\"format\":\"uuid\"}", uuid);
    check("{\"type\":\"string\",\"format\":\"email\"}", email);
    check("{\"type\":\"string\",\"format\":\"hostname\"}", host);
    check("{\"type\":\"string\",\"format\":\"ipv4\"}", ipv4);
    check("{\"type\":\"string\",\"format\":\"ipv6\"}", ipv6);
    check("{\"type\":\"string\",\"format\":\"uri\"}", uri);
    check("{\"type\":\"number\"}", num);
    check("{\"type\":\"integer\",\"multipleOf\":3}", mult3);
    check("{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",\"c\"]},"
          "\"uniqueItems\":true}", uniq);
    check("{\"type\":\"array\",\"items\":{\"type\":\"string\",\"enum\":[\"a\","
          "\"b\",\"c\",1]},\"uniqueItems\":true,\"minItems\":2,"
          "\"maxItems\":2}", uniq2);
    check("{\"type\":\"array\",\"items\":{\"type\":[\"boolean\",\"null\"]},"
          "\"uniqueItems\":true}", uniqb);
    is_str(gbnf("{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
                "\"uniqueItems\":true}"),
           "ERR: json_schema: unsupported keyword 'uniqueItems' at the root: "
           "enforced on items of at most 8 values (an enum, a const, boolean, "
           "null)", "uniqueItems on strings: refused");
    check("{\"type\":\"number\",\"multipleOf\":3}", mult3);
    check("{\"type\":\"integer\",\"minimum\":1,\"maximum\":20,"
          "\"multipleOf\":5}", mult5);
    check("{\"type\":\"integer\",\"exclusiveMinimum\":0,"
          "\"exclusiveMaximum\":10,\"multipleOf\":5}", mult5x);
    check("{\"type\":\"integer\",\"multipleOf\":16}", mult16);
    check("{\"type\":\"integer\",\"multipleOf\":1000}", mult1000);
    ok(strstr(gbnf("{\"type\":\"array\",\"items\":{\"type\":\"integer\","
                   "\"multipleOf\":7},\"prefixItems\":[{\"type\":\"integer\","
                   "\"multipleOf\":7}]}"), "root-mod7-0-1 ::=") != NULL,
       "one automaton per divisor");
    is_str(gbnf("{\"type\":\"integer\",\"minimum\":0,\"multipleOf\":3}"),
           "ERR: json_schema: 'multipleOf' 3 at the root: enforced for integer "
           "divisors up to 16 or powers of ten, or with at most 256 "
           "multiples between two bounds", "multipleOf with one bound: "
           "refused");
    check("{\"type\":[\"null\",\"string\"]}", nul);
    check("{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":"
          "{\"type\":\"integer\"},\"next\":{\"$ref\":\"#/$defs/n\"}},"
          "\"required\":[\"v\"],\"additionalProperties\":false}},"
          "\"$ref\":\"#/$defs/n\"}", rec);
    check("{\"anyOf\":[{\"type\":\"integer\",\"maximum\":1},{\"type\":"
          "\"string\",\"maxLength\":1},{\"const\":true}]}", any);
    check("{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":"
          "{\"type\":\"integer\"}},\"required\":[\"a\"]},{\"properties\":"
          "{\"a\":true,\"b\":{\"type\":\"string\"}},\"required\":[\"b\"],"
          "\"additionalProperties\":false}]}", all);
    /* additionalProperties false in one schema of an allOf leaves out the
       names only the others declare: here a required one */
    is_str(gbnf("{\"allOf\":[{\"properties\":{\"a\":{}},\"required\":"
                "[\"a\"]},{\"properties\":{\"b\":{}},"
                "\"additionalProperties\":false}]}"),
           "ERR: json_schema: the schema accepts no JSON value",
           "allOf: additionalProperties false of one schema applies to the "
           "other's properties");
    check("{\"type\":\"object\"}", json_obj);
    check("{\"$defs\":{\"t\":{\"type\":[\"array\",\"null\"],\"items\":{\"$ref\":"
          "\"#/$defs/t\"},\"maxItems\":3}},\"allOf\":[{\"$ref\":\"#/$defs/t\"},"
          "{\"minItems\":1}]}", rec_allof);
}


/* patternProperties, propertyNames, minProperties 1: through the grammar */
static void
test_keys(void)
{
    static const char *const pat[] = {
        "+{}", "+{\"A\":\"x\"}", "+{\"PATH\":\"/bin\",\"HOME_2\":\"/root\"}",
        "-{\"a\":\"x\"}", "-{\"A\":1}", "-{\"2A\":\"x\"}", "-{\"A-B\":\"x\"}",
        NULL
    };
    static const char *const pat_props[] = {
        "+{\"v\":1}", "+{\"v\":1,\"ff_x\":true}", "+{\"v\":2,\"ff_a\":false,"
        "\"ff_b_2\":true}", "-{}", "-{\"ff_x\":true}", "-{\"v\":1,\"ff_x\":1}",
        "-{\"v\":1,\"w\":true}", "-{\"v\":1,\"ff_\":true}", NULL
    };
    static const char *const pat_open[] = {
        /* additionalProperties absent: keys that match no pattern are left
           out (valid, not written); matching ones take the schema */
        "+{\"x-a\":1}", "-{\"x-a\":\"s\"}", "-{\"b\":1}", "+{\"a\":\"s\"}",
        "+{\"a\":\"s\",\"x-b\":2}", "-{\"a\":1}", NULL
    };
    static const char *const names_pat[] = {
        "+{}", "+{\"ab\":1}", "+{\"a-b\":null,\"cd\":[]}", "-{\"Ab\":1}",
        "-{\"abcde\":1}", "-{\"a b\":1}", "-{\"\":1}", NULL
    };
    static const char *const names_enum[] = {
        "+{\"en\":\"Hello\"}", "+{\"en\":\"Hi\",\"fr\":\"Salut\"}",
        "-{}", "-{\"it\":\"Ciao\"}", "-{\"en\":\"\"}", "-{\"en\":1}", NULL
    };
    static const char *const names_props[] = {
        /* declared b is no allowed name: left out; a is */
        "+{\"a\":1}", "+{\"a\":1,\"c\":2}", "-{\"b\":1}", "-{\"a\":1,\"a\":2}",
        "-{\"a\":1,\"d\":2}", NULL
    };
    static const char *const names_declared[] = {
        /* declared A is no name the pattern allows: left out */
        "+{}", "+{\"ab\":1}", "-{\"A\":1}", "-{\"ab\":1,\"A\":2}", NULL
    };
    static const char *const min1[] = {
        "+{\"a\":1}", "+{\"b\":\"x\"}", "+{\"a\":1,\"b\":\"x\"}", "-{}",
        "-{\"c\":1}", NULL
    };
    static const char *const min1_extra[] = {
        "+{\"a\":1}", "+{\"z\":null}", "-{}", NULL
    };
    static const char *const one_of[] = {
        /* exactly one property: a declared one or another */
        "+{\"a\":1}", "+{\"b\":\"x\"}", "+{\"z\":[]}", "-{}",
        "-{\"a\":1,\"b\":\"x\"}", "-{\"a\":1,\"z\":2}", "-{\"a\":\"x\"}",
        NULL
    };
    static const char *const at_most_one[] = {
        "+{}", "+{\"a\":1}", "+{\"b\":\"x\"}", "-{\"z\":1}",
        "-{\"a\":1,\"b\":\"x\"}", NULL
    };
    static const char *const just_req[] = {
        "+{\"a\":1}", "-{}", "-{\"b\":1}", "-{\"a\":1,\"b\":1}", NULL
    };

    check("{\"type\":\"object\",\"patternProperties\":{\"^[A-Z_][A-Z0-9_]*$\":"
          "{\"type\":\"string\"}},\"additionalProperties\":false}", pat);
    check("{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"}},"
          "\"patternProperties\":{\"^ff_[a-z0-9_]+$\":{\"type\":\"boolean\"}},"
          "\"required\":[\"v\"],\"additionalProperties\":false}", pat_props);
    check("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},"
          "\"patternProperties\":{\"^x-\":{\"type\":\"integer\"}}}", pat_open);
    check("{\"type\":\"object\",\"propertyNames\":{\"pattern\":"
          "\"^[a-z-]{1,4}$\"}}", names_pat);
    check("{\"type\":\"object\",\"propertyNames\":{\"enum\":[\"en\",\"fr\","
          "\"de\"]},\"additionalProperties\":{\"type\":\"string\","
          "\"minLength\":1},\"minProperties\":1}", names_enum);
    check("{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}},"
          "\"propertyNames\":{\"enum\":[\"a\",\"c\"]}}", names_props);
    check("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
          "\"b\":{\"type\":\"string\"}},\"additionalProperties\":false,"
          "\"minProperties\":1}", min1);
    check("{\"type\":\"object\",\"properties\":{\"a\":{}},\"minProperties\":1}",
          min1_extra);
    check("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
          "\"b\":{\"type\":\"string\"}},\"minProperties\":1,\"maxProperties\":1}",
          one_of);
    check("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
          "\"b\":{\"type\":\"string\"}},\"additionalProperties\":false,"
          "\"maxProperties\":1}", at_most_one);
    check("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
          "\"b\":{}},\"required\":[\"a\"],\"maxProperties\":1}", just_req);
    check("{\"type\":\"object\",\"properties\":{\"ab\":{},\"A\":{}},"
          "\"propertyNames\":{\"pattern\":\"^[a-z]+$\"},"
          "\"additionalProperties\":false}", names_declared);
    is_str(gbnf("{\"properties\":{\"a\\u00a0b\":{}},\"patternProperties\":"
                "{\"\\\\s\":{\"type\":\"integer\"}}}"),
           "ERR: json_schema: unsupported keyword 'patternProperties' at the "
           "root: property 'a\u00a0b' matches pattern '\\s' (it would need "
           "both schemas)", "patternProperties: ECMA's \\s matches a "
           "no-break space");
    ok(strncmp(gbnf("{\"properties\":{\"ab\":{}},\"patternProperties\":"
                    "{\"\\\\s\":{\"type\":\"integer\"}}}"), "root ::=", 8)
       == 0, "patternProperties: no declared name matches: compiles");
    ok(strncmp(gbnf("{\"patternProperties\":{\"^a\":{}},\"type\":\"object\"}"),
               "root ::= root-object", 20) == 0,
       "patternProperties of {} beside any other key: a no-op");

    is_str(gbnf("{\"properties\":{\"ab\":{}},\"patternProperties\":{\"^a\":"
                "{\"type\":\"integer\"}}}"),
           "ERR: json_schema: unsupported keyword 'patternProperties' at the "
           "root: property 'ab' matches pattern '^a' (it would need both "
           "schemas)", "patternProperties overlapping a property: refused");
    is_str(gbnf("{\"patternProperties\":{\"^a\":{\"type\":\"integer\"},"
                "\"b\":{\"type\":\"string\"}}}"),
           "ERR: json_schema: unsupported keyword 'patternProperties' at the "
           "root: patterns with different schemas (a key that matches "
           "several needs them all)", "patterns of different schemas: "
           "refused");
    is_str(gbnf("{\"patternProperties\":{\"^a\":{\"type\":\"integer\"}},"
                "\"required\":[\"ab\"],\"additionalProperties\":false}"),
           "ERR: json_schema: unsupported keyword 'patternProperties' at the "
           "root: with 'ab' required but not in properties",
           "patternProperties with a required name not declared: refused");
    is_str(gbnf("{\"patternProperties\":{\"^(?=a)\":{\"type\":\"integer\"}}}"),
           "ERR: json_schema: pattern at /patternProperties: lookaround and "
           "(?...) groups are not supported (at offset 2)",
           "patternProperties: its pattern's error");
    is_str(gbnf("{\"properties\":{\"a\":{}},\"propertyNames\":{\"maxLength\":"
                "3}}"),
           "ERR: json_schema: unsupported keyword 'propertyNames' at the root: "
           "a pattern or length for additional keys beside properties (an "
           "additional key must not repeat one)",
           "propertyNames pattern beside properties and additional ones: "
           "refused");
    is_str(gbnf("{\"propertyNames\":{\"not\":{\"const\":\"a\"}}}"),
           "ERR: json_schema: unsupported keyword 'not' in 'propertyNames' at "
           "the root (a string schema of type, enum, const, pattern, format, "
           "minLength, maxLength is)", "propertyNames: not a string schema");
    is_str(gbnf("{\"propertyNames\":{\"maxLength\":3},\"patternProperties\":"
                "{\"^a\":{\"type\":\"integer\"}}}"),
           "ERR: json_schema: unsupported keyword 'propertyNames' at the root: "
           "with patternProperties", "propertyNames with patternProperties: "
           "refused");
    is_str(gbnf("{\"allOf\":[{\"patternProperties\":{\"^a\":{\"type\":"
                "\"integer\"}}},{\"properties\":{\"b\":{}}}]}"),
           "ERR: json_schema: allOf at the root: cannot merge "
           "'patternProperties' with another schema's 'properties'",
           "allOf: patternProperties beside another's properties: refused");
    is_str(gbnf("{\"type\":\"object\",\"required\":[\"a\"],"
                "\"propertyNames\":{\"enum\":[\"b\"]}}"),
           "ERR: json_schema: the schema accepts no JSON value",
           "propertyNames rejecting a required name: nothing");
}


/* every integer of -1100..1100 against random bounds (some open, some
   exclusive): accepted exactly when inside; and numbers in quarters */
static void
test_ranges(void)
{
    unsigned  seed = 12345;
    char      schema[256], text[32];
    int       r, v, bad = 0, checked = 0;

    for (r = 0; r < 24; r++) {
        int           lo, hi, has_lo, has_hi, lo_x, hi_x, integer = r < 14;
        llm_grammar  *g;
        llm_matcher  *m;
        char          err[256];
        int           n = 0;

        seed = seed * 1103515245 + 12345;
        lo = (int) ((seed >> 8) % 2001) - 1000;
        seed = seed * 1103515245 + 12345;
        hi = (int) ((seed >> 8) % 2001) - 1000;
        if (lo > hi) {
            v = lo, lo = hi, hi = v;
        }
        has_lo = r % 5 != 1;
        has_hi = r % 5 != 2;
        lo_x = r % 3 == 1;
        hi_x = r % 4 == 2;
        if (r == 0) {
            lo = 0, hi = 999, has_lo = has_hi = 1, lo_x = hi_x = 0;
        }
        n = snprintf(schema, sizeof(schema), "{\"type\":\"%s\"",
                     integer ? "integer" : "number");
        if (has_lo) {
            n += snprintf(schema + n, sizeof(schema) - n, ",\"%s\":%d",
                          lo_x ? "exclusiveMinimum" : "minimum", lo);
        }
        if (has_hi) {
            n += snprintf(schema + n, sizeof(schema) - n, ",\"%s\":%d",
                          hi_x ? "exclusiveMaximum" : "maximum", hi);
        }
        snprintf(schema + n, sizeof(schema) - n, "}");
        g = compile(schema, strlen(schema), err, sizeof(err));
        if (g == NULL) {
            ok(0, "compiles: %s: %s", schema, err);
            continue;
        }
        m = llm_matcher_new(g);
        for (v = -4400; v <= 4400; v++) {
            double  x = integer ? v / 4 : v / 4.0;
            int     want, got;

            if (integer && v % 4) {
                continue;
            }
            want = (!has_lo || (lo_x ? x > lo : x >= lo))
                   && (!has_hi || (hi_x ? x < hi : x <= hi));
            if (integer) {
                snprintf(text, sizeof(text), "%d", v / 4);
            } else {
                snprintf(text, sizeof(text), "%.15g", x);
            }
            got = 0;
            if (llm_matcher_accept_bytes(m, text, strlen(text)) == 0) {
                got = llm_matcher_can_end(m);
                llm_matcher_rollback(m, 1);
            }
            checked++;
            if (got != want) {
                if (bad++ < 10) {
                    printf("#   %s: %s wrongly %s\n", schema, text,
                           got ? "accepted" : "rejected");
                }
            }
        }
        llm_matcher_free(m);
        llm_grammar_free(g);
    }
    is_int(bad, 0, "%d numbers against 24 random ranges", checked);

    /* bounds of 11 and 16 digits: a range's rule is longer than any fixed
       format buffer (js_putf cut it at 255 bytes, leaving parentheses
       open: found by fuzz_json_schema) */
    {
        static const char *const eleven[] = {
            "+30222222219", "+30222222219.5", "+-4.5", "+-5", "+0",
            "+29999999999.25", "+30222222218", "-30222222220",
            "-30222222221", "--5.5", "-40000000000", NULL };
        static const char *const sixteen[] = {
            "+1234567890123455", "+1234567890123456", "+999999999999999",
            "+0", "-1234567890123457", "-9999999999999999", NULL };

        check("{\"type\":\"number\",\"minimum\":-5,"
              "\"exclusiveMaximum\":30222222220}", eleven);
        check("{\"type\":\"integer\",\"minimum\":0,"
              "\"maximum\":1234567890123456}", sixteen);
    }
}


/* --- the JSON-Schema-Test-Suite ---------------------------------------- */

/* the property names of a schema in document order: an instance's keys
   are put in this order, the order the grammar writes them in */
static void
add_names(const cJSON *v, cJSON *names)
{
    const cJSON  *k;

    for (k = v ? v->child : NULL; k; k = k->next) {
        if (cJSON_IsObject(v) && !cJSON_HasObjectItem(names, k->string)) {
            cJSON_AddNumberToObject(names, k->string,
                                    cJSON_GetArraySize(names));
        }
        add_names(k, names);
    }
}


static void
collect_names(const cJSON *s, cJSON *names)
{
    const cJSON  *k;

    if (!cJSON_IsObject(s) && !cJSON_IsArray(s)) {
        return;
    }
    for (k = s->child; k; k = k->next) {
        if (k->string && (strcmp(k->string, "const") == 0
                          || strcmp(k->string, "enum") == 0))
        {
            add_names(k, names);
            continue;
        }
        if (k->string && strcmp(k->string, "properties") == 0
            && cJSON_IsObject(k))
        {
            const cJSON  *p;

            cJSON_ArrayForEach(p, k) {
                if (!cJSON_HasObjectItem(names, p->string)) {
                    cJSON_AddNumberToObject(names, p->string,
                                            cJSON_GetArraySize(names));
                }
            }
        }
        collect_names(k, names);
    }
}


static int
rank(const cJSON *names, const cJSON *item)
{
    const cJSON  *r = cJSON_GetObjectItemCaseSensitive(names, item->string);

    return r ? r->valueint : 1 << 30;
}


/* sorts each object's keys by rank (stable), in place */
static void
reorder(cJSON *v, const cJSON *names)
{
    cJSON  *k, *sorted[256];
    int     n = 0, i, j;

    for (k = v ? v->child : NULL; k; k = k->next) {
        reorder(k, names);
    }
    if (!cJSON_IsObject(v)) {
        return;
    }
    while (v->child && n < 256) {
        sorted[n++] = cJSON_DetachItemViaPointer(v, v->child);
    }
    for (i = 1; i < n; i++) {
        cJSON  *x = sorted[i];

        for (j = i; j > 0 && rank(names, sorted[j - 1]) > rank(names, x); j--) {
            sorted[j] = sorted[j - 1];
        }
        sorted[j] = x;
    }
    for (i = 0; i < n; i++) {
        cJSON_AddItemToObject(v, sorted[i]->string, sorted[i]);
    }
}


/* v as compact JSON, numbers in their shortest exact form (as the
   converter writes enum values) */
static void
print_json(const cJSON *v, char **buf, size_t *len, size_t *cap)
{
    char          num[48], *s;
    const cJSON  *k;
    size_t        n;
    int           prec;

#define PUT(str, l) do {                                                    \
        n = (l);                                                            \
        while (*len + n + 1 > *cap) {                                       \
            *cap = *cap ? *cap * 2 : 256;                                   \
            *buf = realloc(*buf, *cap);                                     \
        }                                                                   \
        memcpy(*buf + *len, (str), n);                                      \
        *len += n;                                                          \
        (*buf)[*len] = '\0';                                                \
    } while (0)

    if (cJSON_IsNumber(v)) {
        if (v->valuedouble == floor(v->valuedouble)
            && fabs(v->valuedouble) < 1e17)
        {
            snprintf(num, sizeof(num), "%.0f", v->valuedouble);
        } else {
            for (prec = 15; prec <= 17; prec++) {
                snprintf(num, sizeof(num), "%.*g", prec, v->valuedouble);
                if (strtod(num, NULL) == v->valuedouble) {
                    break;
                }
            }
        }
        PUT(num, strlen(num));
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        PUT(cJSON_IsArray(v) ? "[" : "{", 1);
        for (k = v->child; k; k = k->next) {
            if (cJSON_IsObject(v)) {
                cJSON  *key = cJSON_CreateString(k->string);

                s = cJSON_PrintUnformatted(key);
                PUT(s, strlen(s));
                PUT(":", 1);
                free(s);
                cJSON_Delete(key);
            }
            print_json(k, buf, len, cap);
            if (k->next) {
                PUT(",", 1);
            }
        }
        PUT(cJSON_IsArray(v) ? "]" : "}", 1);
    } else {
        s = cJSON_PrintUnformatted(v);
        PUT(s, strlen(s));
        free(s);
    }
#undef PUT
}


static char *
json_text(const cJSON *v)
{
    char    *buf = NULL;
    size_t   len = 0, cap = 0;

    print_json(v, &buf, &len, &cap);
    return buf;
}


/* a valid instance the grammar may reject by design (docs/json_schema.md):
   numbers it writes otherwise (1.0, 1e308, -0), keys with escapes */
static int
narrowing(const cJSON *v)
{
    const cJSON  *k;

    if (cJSON_IsNumber(v)) {
        return fabs(v->valuedouble) >= 1e16 || (v->valuedouble != 0
               && fabs(v->valuedouble) < 1e-16);
    }
    for (k = v->child; k; k = k->next) {
        if (narrowing(k)) {
            return 1;
        }
    }
    return 0;
}


/* valid texts a format's grammar leaves out (docs/json_schema.md): leap
   seconds, lower-case t and z, quoted local parts and address literals */
static int
by_design(const char *description)
{
    return strstr(description, "leap second")
           || strstr(description, "case-insensitive")
           || strstr(description, "quoted string")
           || strstr(description, "address-literal");
}


typedef struct {
    int  cases, compiled, refused;
    int  valid_ok, valid_narrow, valid_bad;
    int  invalid_ok, invalid_oneof, invalid_bad;
} suite_count;


static void
suite_file(const char *path, const char *file, suite_count *sc)
{
    const cJSON  *c, *t;
    cJSON        *doc;
    char         *text, err[512];
    size_t        len;

    text = tap_slurp(path, &len);
    doc = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (doc == NULL) {
        ok(0, "read %s", path);
        return;
    }
    cJSON_ArrayForEach(c, doc) {
        const cJSON  *schema = cJSON_GetObjectItem(c, "schema");
        char         *s = json_text(schema);
        cJSON        *names = cJSON_CreateObject();
        llm_grammar  *g;
        int           oneof = strstr(s, "\"oneOf\"") != NULL;

        sc->cases++;
        collect_names(schema, names);
        g = compile(s, strlen(s), err, sizeof(err));
        if (g == NULL) {
            sc->refused++;
            free(s);
            cJSON_Delete(names);
            continue;
        }
        sc->compiled++;
        if (n_walk_schemas < 4096) {
            walk_schemas[n_walk_schemas++] = strdup(s);
        }
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(c, "tests")) {
            cJSON  *data = cJSON_Duplicate(cJSON_GetObjectItem(t, "data"), 1);
            int     valid = cJSON_IsTrue(cJSON_GetObjectItem(t, "valid"));
            char   *inst;
            int     got;

            reorder(data, names);
            inst = json_text(data);
            got = accepts(g, inst, strlen(inst));
            if (valid && got) {
                sc->valid_ok++;
            } else if (valid && (narrowing(data)
                                 || by_design(cJSON_GetObjectItem(t,
                                              "description")->valuestring)))
            {
                sc->valid_narrow++;
                printf("#   %s: valid %s rejected by design (%s)\n", file,
                       inst, cJSON_GetObjectItem(t, "description")->valuestring);
            } else if (valid) {
                sc->valid_bad++;
                printf("#   %s: %s: valid %s rejected (%s)\n", file,
                       cJSON_GetObjectItem(c, "description")->valuestring,
                       inst, cJSON_GetObjectItem(t, "description")->valuestring);
            } else if (!got) {
                sc->invalid_ok++;
            } else if (oneof) {
                sc->invalid_oneof++;
            } else {
                sc->invalid_bad++;
                printf("#   %s: %s: invalid %s accepted (%s)\n", file,
                       cJSON_GetObjectItem(c, "description")->valuestring,
                       inst, cJSON_GetObjectItem(t, "description")->valuestring);
            }
            free(inst);
            cJSON_Delete(data);
        }
        llm_grammar_free(g);
        free(s);
        cJSON_Delete(names);
    }
    cJSON_Delete(doc);
}


static void
test_suite(void)
{
    /* the files of the keywords we enforce (format: the formats we do) */
    static const char *const files[] = {
        "additionalProperties", "allOf", "anyOf", "boolean_schema", "const",
        "default", "enum", "exclusiveMaximum", "exclusiveMinimum", "items",
        "maxItems", "maxLength", "maxProperties", "maximum", "minItems",
        "minLength", "minProperties", "minimum", "oneOf", "pattern",
        "patternProperties", "prefixItems", "properties", "propertyNames",
        "ref", "required", "type",
        "optional/format/date", "optional/format/date-time",
        "optional/format/time", "optional/format/uuid",
        "optional/format/email",
    };
    suite_count  sc;
    char         path[1024], rel[256];
    size_t       i;

    memset(&sc, 0, sizeof(sc));
    for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(rel, sizeof(rel), "jsonschema/suite/tests/draft2020-12/%s.json",
                 files[i]);
        suite_file(tap_fixture(path, sizeof(path), rel), files[i], &sc);
    }
    printf("# JSON-Schema-Test-Suite draft2020-12, %d files: %d schemas, %d "
           "compile, %d refused\n", (int) i, sc.cases, sc.compiled,
           sc.refused);
    printf("#   valid instances: %d accepted, %d rejected by design (number "
           "caps, format details), %d rejected otherwise\n", sc.valid_ok, sc.valid_narrow,
           sc.valid_bad);
    printf("#   invalid instances: %d rejected, %d accepted under oneOf "
           "(read as anyOf), %d accepted otherwise\n", sc.invalid_ok,
           sc.invalid_oneof, sc.invalid_bad);
    ok(sc.compiled >= 100, "%d of the suite's schemas compile", sc.compiled);
    is_int(sc.valid_bad, 0, "every valid instance (in the grammar's form) "
           "accepted");
    is_int(sc.invalid_bad, 0, "every invalid instance rejected (but oneOf's)");
}


/* --- compile options: compact JSON, strict and relaxed ------------------ */

static void
test_compact(void)
{
    static const char  *obj = "{\"type\":\"object\",\"properties\":{\"a\":"
                              "{\"type\":\"array\",\"items\":{\"type\":"
                              "\"integer\"}}},\"required\":[\"a\"]}";
    llm_grammar         *g, *f;
    llm_grammar_limits   lim;
    char                 err[512];

    llm_grammar_limits_default(&lim);
    is_int(lim.json_ws, LLM_JSON_WS_FLEXIBLE, "flexible JSON is the API's "
           "default (the request path chooses)");
    is_int(lim.strict, 1, "strict is the default");

    g = compile_opts(LLM_CONSTRAINT_JSON_SCHEMA, obj, 1, LLM_JSON_WS_COMPACT,
                     err, sizeof(err));
    f = compile_opts(LLM_CONSTRAINT_JSON_SCHEMA, obj, 1, LLM_JSON_WS_FLEXIBLE,
                     err, sizeof(err));
    ok(g && f && g != f, "compact and flexible are two grammars (the cache "
       "keys on the whitespace)");
    ok(g && accepts(g, "{\"a\":[1,2]}", 11), "compact: {\"a\":[1,2]}");
    ok(g && !accepts(g, "{\"a\": [1,2]}", 12)
       && !accepts(g, "{ \"a\":[1,2]}", 12) && !accepts(g, "{\"a\":[1, 2]}", 12)
       && !accepts(g, "{\"a\":[1,2]\n}", 12),
       "compact: no blank between tokens");
    ok(g && accepts(g, "{\"a\":[1,2],\"x y\":\" s \"}", 23),
       "compact: blanks inside strings stay");
    ok(f && accepts(f, "{ \"a\" : [ 1 , 2 ] }", 19),
       "flexible: blanks between tokens");
    llm_grammar_free(g);
    llm_grammar_free(f);

    g = compile_opts(LLM_CONSTRAINT_JSON_OBJECT, "", 1, LLM_JSON_WS_COMPACT,
                     err, sizeof(err));
    ok(g && accepts(g, "{\"k\":[1,{\"z\":null}]}", 20)
       && !accepts(g, "{\"k\": 1}", 8), "json_object: compact");
    llm_grammar_free(g);
    g = compile_opts(LLM_CONSTRAINT_GRAMMAR, "root ::= \"<\" %json {\"type\":"
                     "\"object\"} \">\"", 1, LLM_JSON_WS_COMPACT, err,
                     sizeof(err));
    ok(g && accepts(g, "<{\"k\":1}>", 9) && !accepts(g, "<{\"k\": 1}>", 10),
       "%%json (tool arguments): compact");
    llm_grammar_free(g);
}


/* a schema compiled without strict: its relaxed list, or "ERR: ..." */
static const char *
relaxed_of(const char *schema, llm_grammar **out)
{
    static char   text[1024];
    llm_grammar  *g;
    char          err[512];

    g = compile_opts(LLM_CONSTRAINT_JSON_SCHEMA, schema, 0,
                     LLM_JSON_WS_COMPACT, err, sizeof(err));
    if (g == NULL) {
        snprintf(text, sizeof(text), "ERR: %s", err);
    } else {
        snprintf(text, sizeof(text), "%s", llm_grammar_relaxed(g));
    }
    if (out) {
        *out = g;
    } else {
        llm_grammar_free(g);
    }
    return text;
}


/* string chars and array items past the unrolling cap: counters, exact
   at n-1, n, n+1, in small memory, strict */
static void
test_counted(void)
{
    llm_grammar  *g;
    char          err[512], *t;
    int           n;

    static const char  *str = "{\"type\":\"string\",\"minLength\":1200,"
                              "\"maxLength\":5000}";
    static const char  *arr = "{\"type\":\"array\",\"items\":{\"const\":1},"
                              "\"minItems\":1500,\"maxItems\":2000}";
    static const int    len[] = { 1199, 1200, 1201, 4999, 5000, 5001 };
    size_t              i;

    t = malloc(8000);
    g = compile(str, strlen(str), err, sizeof(err));
    ok(g != NULL && g->n_el < 2000, "minLength 1200 maxLength 5000: "
       "compiles strict, %d elements", g ? g->n_el : -1);
    if (g != NULL) {
        for (i = 0; i < sizeof(len) / sizeof(len[0]); i++) {
            t[0] = '"';
            memset(t + 1, 'x', (size_t) len[i]);
            t[len[i] + 1] = '"';
            ok(accepts(g, t, (size_t) len[i] + 2)
               == (len[i] >= 1200 && len[i] <= 5000), "%d chars: %s",
               len[i], len[i] >= 1200 && len[i] <= 5000 ? "accepted"
                                                        : "refused");
        }
        /* "\xc3\xa9" and "\\n": 2 chars in 4 bytes, then n - 2 more */
        for (n = 5000; n <= 5001; n++) {
            t[0] = '"';
            memcpy(t + 1, "\xc3\xa9\\n", 4);
            memset(t + 5, 'y', (size_t) n - 2);
            t[n + 3] = '"';
            ok(accepts(g, t, (size_t) n + 4) == (n == 5000), "%d chars with "
               "UTF-8 and an escape: %s", n, n == 5000 ? "accepted"
                                                       : "refused");
        }
        llm_grammar_free(g);
    }
    g = compile(arr, strlen(arr), err, sizeof(err));
    ok(g != NULL, "minItems 1500 maxItems 2000: compiles strict (%s)",
       g ? "" : err);
    if (g != NULL) {
        int  k;

        for (k = 1499; k <= 1501; k++) {
            t[0] = '[';
            for (n = 0; n < k; n++) {
                t[1 + 2 * n] = '1', t[2 + 2 * n] = ',';
            }
            t[2 * k] = ']';
            ok(accepts(g, t, (size_t) 2 * k + 1) == (k >= 1500),
               "%d items: %s", k, k >= 1500 ? "accepted" : "refused");
        }
        for (k = 1999; k <= 2001; k++) {
            t[0] = '[';
            for (n = 0; n < k; n++) {
                t[1 + 2 * n] = '1', t[2 + 2 * n] = ',';
            }
            t[2 * k] = ']';
            ok(accepts(g, t, (size_t) 2 * k + 1) == (k <= 2000),
               "%d items: %s", k, k <= 2000 ? "accepted" : "refused");
        }
        llm_grammar_free(g);
    }
    free(t);
}


static void
test_relaxed(void)
{
    static const char  *home = "{\"type\":\"object\",\"properties\":{"
                               "\"homepage\":{\"type\":\"string\",\"format\":"
                               "\"uri-template\"},\"n\":{\"type\":\"integer\","
                               "\"not\":{\"const\":3}}},\"required\":[\"n\"],"
                               "\"additionalProperties\":false}";
    llm_grammar         *g;
    char                 err[512];
    const char          *r;

    /* strict: refused, naming the keyword and where */
    g = compile_opts(LLM_CONSTRAINT_JSON_SCHEMA, home, 1, LLM_JSON_WS_COMPACT,
                     err, sizeof(err));
    ok(g == NULL && strstr(err, "'uri-template'")
       && strstr(err, "/properties/homepage"), "strict: %s", err);
    llm_grammar_free(g);

    /* not strict: both relaxed, listed in order, the rest enforced */
    r = relaxed_of(home, &g);
    is_str(r, "uri-template-format@/properties/homepage, not@/properties/n",
           "relaxed: the keywords with their pointers");
    ok(g && accepts(g, "{\"homepage\":\"x\",\"n\":3}", 22),
       "relaxed: what the dropped keywords forbade is accepted");
    ok(g && !accepts(g, "{\"n\":\"3\"}", 9) && !accepts(g, "{\"m\":3}", 7)
       && !accepts(g, "{\"homepage\":1,\"n\":3}", 20),
       "relaxed: the other keywords still hold");
    llm_grammar_free(g);
    /* the cache keys on strict: strict again is refused again */
    g = compile_opts(LLM_CONSTRAINT_JSON_SCHEMA, home, 1, LLM_JSON_WS_COMPACT,
                     err, sizeof(err));
    ok(g == NULL, "strict after relaxed: still refused (not the cached one)");
    llm_grammar_free(g);

    is_str(relaxed_of("{\"type\":\"string\"}", NULL), "",
           "nothing relaxed: an empty list");
    is_str(relaxed_of("{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
                      "\"uniqueItems\":true,\"if\":{\"minItems\":1},\"then\":"
                      "{\"maxItems\":2}}", NULL),
           "if@, uniqueItems@", "at the root: an empty pointer");
    is_str(relaxed_of("{\"properties\":{\"a b,c%\":{\"multipleOf\":0.5}}}",
                      NULL),
           "multipleOf@/properties/a%20b%2Cc%25",
           "a pointer is escaped for a header");
    is_str(relaxed_of("{\"$defs\":{\"t\":{\"type\":\"integer\",\"multipleOf\":"
                      "17}},\"type\":\"array\",\"prefixItems\":[{\"$ref\":"
                      "\"#/$defs/t\"},{\"$ref\":\"#/$defs/t\"}]}", NULL),
           "multipleOf@/$defs/t", "a $ref target relaxed once, listed once");
    is_str(relaxed_of("{\"type\":\"number\",\"minimum\":0.5,\"maximum\":2}",
                      NULL),
           "minimum@", "a fractional bound on a number");
    is_str(relaxed_of("{\"type\":\"string\",\"maxLength\":5000}", NULL),
           "", "maxLength 5000: exact (a counter)");
    is_str(relaxed_of("{\"type\":\"array\",\"maxItems\":2000,\"minItems\":"
                      "1500}", NULL), "", "maxItems 2000: exact");
    is_str(relaxed_of("{\"type\":\"string\",\"maxLength\":4294967295}",
                      NULL), "maxLength@", "a count over the cap (2^30)");
    is_str(relaxed_of("{\"type\":\"string\",\"pattern\":\"\\\\bx\",\"minLength\":"
                      "2}", NULL),
           "minLength/maxLength@, pattern@", "keywords dropped in turn");

    /* an allOf that cannot be merged: the schema's types alone */
    r = relaxed_of("{\"type\":\"string\",\"allOf\":[{\"pattern\":\"^a\"},"
                   "{\"pattern\":\"b$\"}]}", &g);
    is_str(r, "allOf@", "allOf relaxed");
    ok(g && accepts(g, "\"zz\"", 4) && !accepts(g, "1", 1),
       "allOf relaxed: its types still hold");
    llm_grammar_free(g);

    /* what relaxing cannot lift stays an error */
    ok(strncmp(relaxed_of("{\"type\":", NULL), "ERR: json_schema: the schema "
               "is not valid JSON", 38) == 0, "not JSON: still an error");
    ok(strstr(relaxed_of("{\"$ref\":\"#/$defs/none\"}", NULL), "names nothing")
       != NULL, "a $ref to nothing: still an error");
    ok(strstr(relaxed_of("{\"properties\":{\"a\":{\"$id\":\"x\"}}}", NULL),
              "embedded") != NULL, "an embedded resource: still an error");

    /* %json in a grammar: relaxed too, listed on the grammar */
    g = compile_opts(LLM_CONSTRAINT_GRAMMAR, "root ::= %json {\"type\":"
                     "\"string\",\"format\":\"iri\"}", 0, LLM_JSON_WS_COMPACT,
                     err, sizeof(err));
    is_str(g ? llm_grammar_relaxed(g) : err, "iri-format@",
           "%%json: the relaxed list");
    llm_grammar_free(g);
}


/* --- the corpus ---------------------------------------------------------- */

static int
name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}


/* why schemas were refused: the error up to " at ", counted */
typedef struct {
    char  why[96];
    int   n;
} reason;

static reason  reasons[256];
static int     n_reasons;


static void
count_reason(const char *err)
{
    const char  *at = strstr(err, " at ");
    char         why[96];
    int          i;

    snprintf(why, sizeof(why), "%.*s", at ? (int) (at - err) : 95, err);
    for (i = 0; i < n_reasons; i++) {
        if (strcmp(reasons[i].why, why) == 0) {
            reasons[i].n++;
            return;
        }
    }
    if (n_reasons < 256) {
        snprintf(reasons[n_reasons].why, sizeof(reasons[0].why), "%s", why);
        reasons[n_reasons++].n = 1;
    }
}


static int
reason_cmp(const void *a, const void *b)
{
    return ((const reason *) b)->n - ((const reason *) a)->n;
}


/* every schema of the suite's draft2020-12 files, supported keywords or
   not: compiled or refused */
static void
corpus_suite(int *schemas, int *compiled, coverage *cv)
{
    char           dir[1024], path[1300], err[512], *text, *s;
    DIR           *d;
    struct dirent *e;
    cJSON         *doc;
    const cJSON   *c;
    size_t         len;

    d = opendir(tap_fixture(dir, sizeof(dir),
                            "jsonschema/suite/tests/draft2020-12"));
    if (d == NULL) {
        tap_bail_out("no jsonschema/suite in FIXTURES: run make deps");
    }
    while ((e = readdir(d)) != NULL) {
        size_t  l = strlen(e->d_name);

        if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        text = tap_slurp(path, &len);
        doc = text ? cJSON_Parse(text) : NULL;
        free(text);
        cJSON_ArrayForEach(c, doc) {
            llm_grammar  *g;

            s = json_text(cJSON_GetObjectItem(c, "schema"));
            (*schemas)++;
            g = compile(s, strlen(s), err, sizeof(err));
            if (g != NULL) {
                (*compiled)++;
                llm_grammar_free(g);
            } else {
                count_reason(err);
            }
            coverage_add(cv, g != NULL, s, strlen(s), NULL);
            free(s);
        }
        cJSON_Delete(doc);
    }
    closedir(d);
}


static void
test_corpus(void)
{
    char          dir[1024], path[1200], err[512], *names[256], *text;
    DIR          *d;
    struct dirent *e;
    int           n = 0, i, compiled = 0, refused = 0, big = 0;
    size_t        len;
    uint64_t      t0;
    coverage      cv_store = { "SchemaStore (check-jsonschema's vendored)",
                               0, 0, 0, 0 };
    coverage      cv_suite = { "JSON-Schema-Test-Suite draft2020-12",
                               0, 0, 0, 0 };

    d = opendir(tap_fixture(dir, sizeof(dir), "jsonschema/schemastore"));
    if (d == NULL) {
        tap_bail_out("no jsonschema/schemastore in FIXTURES: run make deps");
    }
    while ((e = readdir(d)) != NULL && n < 256) {
        size_t  l = strlen(e->d_name);

        if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0) {
            names[n++] = strdup(e->d_name);
        }
    }
    closedir(d);
    qsort(names, n, sizeof(names[0]), name_cmp);
    for (i = 0; i < n; i++) {
        llm_grammar  *g;

        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        text = tap_slurp(path, &len);
        if (text == NULL) {
            ok(0, "read %s", path);
            continue;
        }
        t0 = llm_grammar_now_ns();
        g = compile_big(text, len, err, sizeof(err));
        coverage_add(&cv_store, g != NULL, text, len, names[i]);
        if (g != NULL) {
            compiled++;
            printf("#   %-28s compiles (%.1f ms, %zu bytes%s)\n", names[i],
                   (llm_grammar_now_ns() - t0) / 1e6, len,
                   len > LLM_CONSTRAINT_MAX_BYTES ? ", over the request limit"
                   : "");
            big += len > LLM_CONSTRAINT_MAX_BYTES;
            if (n_walk_schemas < 4096) {
                walk_schemas[n_walk_schemas++] = strdup(text);
            }
            llm_grammar_free(g);
        } else {
            refused++;
            count_reason(err);
            printf("#   %-28s refused: %s\n", names[i], err);
            ok(strncmp(err, "json_schema: ", 13) == 0,
               "%s: refused by the converter, with a reason", names[i]);
        }
        free(text);
        free(names[i]);
    }
    printf("# SchemaStore corpus (check-jsonschema's vendored schemas): %d "
           "schemas, %d compile (%d of them over the %d-byte request limit), "
           "%d refused\n", n, compiled, big, LLM_CONSTRAINT_MAX_BYTES,
           refused);
    ok(n >= 26, "%d SchemaStore schemas read", n);
    {
        int  suite = 0, suite_ok = 0;

        corpus_suite(&suite, &suite_ok, &cv_suite);
        printf("# JSON-Schema-Test-Suite draft2020-12, all files: %d schemas, "
               "%d compile, %d refused\n", suite, suite_ok, suite - suite_ok);
        printf("# the corpus: %d schemas, %d compile, %d refused; why:\n",
               n + suite, compiled + suite_ok, refused + suite - suite_ok);
        qsort(reasons, n_reasons, sizeof(reasons[0]), reason_cmp);
        for (i = 0; i < n_reasons; i++) {
            printf("#   %4d  %s\n", reasons[i].n, reasons[i].why);
        }
        ok(suite >= 300, "%d schemas in the suite", suite);
    }
    printf("# coverage | group | schemas | exact | relaxed | refused |\n");
    coverage_print(&cv_store);
    coverage_print(&cv_suite);
    ok(cv_store.exact + cv_store.relaxed + cv_store.refused == cv_store.n
       && cv_suite.exact + cv_suite.relaxed + cv_suite.refused == cv_suite.n,
       "coverage: every schema counted once");
    ok(cv_store.relaxed > 0 && cv_suite.relaxed > 0,
       "some refused schemas compile relaxed (%d, %d)", cv_store.relaxed,
       cv_suite.relaxed);
}


/* --- random schemas ------------------------------------------------------ */

static unsigned  gen_seed = 99;

static int
rnd(int n)
{
    gen_seed = gen_seed * 1103515245 + 12345;
    return (int) ((gen_seed >> 8) % (unsigned) n);
}


static void gen_schema(llm_strbuf *b, int depth);


static void
gen_put(llm_strbuf *b, const char *s)
{
    llm_strbuf_append(b, s, strlen(s));
}


static void
gen_value(llm_strbuf *b)
{
    static const char *const v[] = {
        "null", "true", "false", "0", "-3", "2.5", "\"a\"", "\"\"",
        "\"x\\\"y\"", "\"\\u00e9\"", "[1,\"b\"]", "{\"k\":1}", "1e3",
    };

    gen_put(b, v[rnd(13)]);
}


/* one random schema of the keywords the converter enforces */
static void
gen_schema(llm_strbuf *b, int depth)
{
    static const char *const names[] = { "a", "ab", "b", "c\\\"", "d e" };
    static const char *const pats[] = {
        "^[a-c]+$", "x", "^\\\\d{2,3}-[^-]?$", "(ab|c)*$", "^.\\\\s\\\\w$",
        "^\\\\\\\\[\\\"\\\\n]", "^[^a]{0,3}$", "^\\\\D\\\\W\\\\S$",
    };
    static const char *const fmts[] = {
        "date", "time", "date-time", "uuid", "email", "hostname", "ipv4",
        "ipv6", "uri"
    };
    char  tmp[160];
    int   k = depth > 2 ? rnd(6) : rnd(13), i, n;

    switch (k) {
    case 0:
        gen_put(b, "{\"type\":\"string\"");
        if (rnd(3) == 0) {
            snprintf(tmp, sizeof(tmp), ",\"pattern\":\"%s\"", pats[rnd(8)]);
        } else if (rnd(2)) {
            snprintf(tmp, sizeof(tmp), ",\"format\":\"%s\"", fmts[rnd(9)]);
        } else {
            n = rnd(4);
            snprintf(tmp, sizeof(tmp), ",\"minLength\":%d,\"maxLength\":%d",
                     n, n + rnd(4));
        }
        gen_put(b, tmp);
        gen_put(b, "}");
        break;
    case 1: case 2:
        n = rnd(41) - 20;
        snprintf(tmp, sizeof(tmp), "{\"type\":\"%s\",\"%s\":%d,\"%s\":%d}",
                 rnd(2) ? "integer" : "number",
                 rnd(2) ? "minimum" : "exclusiveMinimum", n,
                 rnd(2) ? "maximum" : "exclusiveMaximum", n + rnd(30));
        gen_put(b, tmp);
        break;
    case 3:
        gen_put(b, rnd(2) ? "{\"type\":[\"boolean\",\"null\"]}"
                          : "{\"type\":\"number\"}");
        break;
    case 4:
        gen_put(b, "{\"enum\":[");
        for (i = 0, n = 1 + rnd(4); i < n; i++) {
            gen_put(b, i ? "," : "");
            gen_value(b);
        }
        gen_put(b, "]}");
        break;
    case 5:
        gen_put(b, "{\"const\":");
        gen_value(b);
        gen_put(b, "}");
        break;
    case 6: case 7: case 8:
        gen_put(b, "{\"type\":\"object\",\"properties\":{");
        n = rnd(4);
        for (i = 0; i < n; i++) {
            snprintf(tmp, sizeof(tmp), "%s\"%s\":", i ? "," : "", names[i + rnd(2)]);
            gen_put(b, tmp);
            gen_schema(b, depth + 1);
        }
        gen_put(b, "}");
        if (n && rnd(2)) {
            snprintf(tmp, sizeof(tmp), ",\"required\":[\"%s\"]", names[rnd(2)]);
            gen_put(b, tmp);
        }
        i = rnd(4);
        if (i == 1) {
            gen_put(b, ",\"additionalProperties\":false");
        } else if (i == 2) {
            gen_put(b, ",\"additionalProperties\":");
            gen_schema(b, depth + 1);
        } else if (i == 3 && n == 0) {
            snprintf(tmp, sizeof(tmp), ",\"additionalProperties\":{\"type\":"
                     "\"integer\"},\"maxProperties\":%d,\"minProperties\":%d",
                     1 + rnd(3), rnd(2));
            gen_put(b, tmp);
        }
        gen_put(b, "}");
        break;
    case 9:
        gen_put(b, "{\"type\":\"array\"");
        if (rnd(2)) {
            gen_put(b, ",\"prefixItems\":[");
            gen_schema(b, depth + 1);
            if (rnd(2)) {
                gen_put(b, ",");
                gen_schema(b, depth + 1);
            }
            gen_put(b, "]");
        }
        if (rnd(3)) {
            gen_put(b, ",\"items\":");
            if (rnd(4) == 0) {
                gen_put(b, "false");
            } else {
                gen_schema(b, depth + 1);
            }
        }
        n = rnd(3);
        snprintf(tmp, sizeof(tmp), ",\"minItems\":%d,\"maxItems\":%d}", n,
                 n + rnd(4));
        gen_put(b, tmp);
        break;
    case 10:
        gen_put(b, rnd(2) ? "{\"anyOf\":[" : "{\"oneOf\":[");
        gen_schema(b, depth + 1);
        gen_put(b, ",");
        gen_schema(b, depth + 1);
        gen_put(b, "]}");
        break;
    case 11:
        gen_put(b, "{\"allOf\":[");
        gen_schema(b, depth + 1);
        gen_put(b, ",");
        gen_schema(b, depth + 1);
        gen_put(b, "]}");
        break;
    default:
        gen_put(b, "{\"$ref\":\"#/$defs/t\"}");
        break;
    }
}


/* random schemas (with a recursive $defs/t), for the walks */
static int
gen_schemas(int n)
{
    llm_strbuf  b;
    char        err[512];
    int         i, compiled = 0;

    for (i = 0; i < n && n_walk_schemas < 4096; i++) {
        llm_grammar  *g;

        memset(&b, 0, sizeof(b));
        gen_put(&b, "{\"$defs\":{\"t\":{\"type\":[\"array\",\"null\"],"
                "\"items\":{\"$ref\":\"#/$defs/t\"},\"maxItems\":2}},\"allOf\":[");
        gen_schema(&b, 0);
        gen_put(&b, "]}");
        g = compile(b.data, b.len, err, sizeof(err));
        if (g != NULL) {
            compiled++;
            walk_schemas[n_walk_schemas++] = strdup(b.data);
            llm_grammar_free(g);
        } else if (strncmp(err, "json_schema: ", 13) != 0) {
            printf("#   random schema refused by the engine: %s: %s\n",
                   b.data, err);
        }
        llm_strbuf_free(&b);
    }
    return compiled;
}


/* --- random walks, checked by python jsonschema ------------------------- */

/* one random text the grammar accepts, byte by byte; its length, or -1
   when no end was reached within cap */
static int
walk(llm_grammar *g, unsigned *seed, char *out, int cap)
{
    llm_matcher  *m = llm_matcher_new(g);
    int           n = 0, na, i, b, budget;
    unsigned char allowed[256], ch;

    *seed = *seed * 1103515245 + 12345;
    budget = 16 + (int) ((*seed >> 8) % 200);
    while (n < cap - 1) {
        *seed = *seed * 1103515245 + 12345;
        if (llm_matcher_can_end(m)
            && (n >= budget || (*seed >> 8) % 6 == 0 || llm_matcher_is_done(m)))
        {
            break;
        }
        na = 0;
        for (b = 0; b < 256; b++) {
            ch = (unsigned char) b;
            if (llm_matcher_accept_bytes(m, (char *) &ch, 1) == 0) {
                allowed[na++] = ch;
                llm_matcher_rollback(m, 1);
            }
        }
        if (na == 0) {
            break;
        }
        b = -1;
        if (n >= budget) {
            /* close what is open */
            for (i = 0; i < na && b < 0; i++) {
                if (strchr("\"}]", allowed[i]) && allowed[i]) {
                    b = allowed[i];
                }
            }
            for (i = 0; i < na && b < 0; i++) {
                /* not blanks: a long array (minItems past 1000) would
                   spend the 8 KB on them */
                if (allowed[i] < 0x80 && allowed[i] > ' '
                    && !strchr("[{,", allowed[i]))
                {
                    b = allowed[i];
                }
            }
        }
        if (b < 0) {
            int  ascii = 0;

            for (i = 0; i < na; i++) {
                ascii += allowed[i] < 0x80;
            }
            *seed = *seed * 1103515245 + 12345;
            if (ascii && (*seed >> 8) % 10 != 0) {
                int  k = (int) ((*seed >> 12) % ascii);

                for (i = 0; i < na; i++) {
                    if (allowed[i] < 0x80 && k-- == 0) {
                        b = allowed[i];
                        break;
                    }
                }
            } else {
                b = allowed[(*seed >> 12) % na];
            }
        }
        ch = (unsigned char) b;
        llm_matcher_accept_bytes(m, (char *) &ch, 1);
        out[n++] = (char) ch;
    }
    out[n] = '\0';
    i = llm_matcher_can_end(m);
    llm_matcher_free(m);
    return i ? n : -1;
}


/* walks through the grammars of the schemas only relaxing compiles: each
   text is JSON; the invalid ones are counted per relaxed keyword (by
   tools/json_schema_check.py --relaxed) */
static void
test_relaxed_walks(void)
{
    char          out_path[1024], cmd[2400], *text, err[512], line[512];
    const char   *build = getenv("BUILD");
    FILE         *f, *p;
    unsigned      seed = 11;
    int           s, k, n_walks = 0, n_ok = -1, n_bad = -1, n_json = -1;
    llm_grammar_limits  lim;

    llm_grammar_limits_default(&lim);
    lim.max_compile_ns = 0;
    lim.max_source = 4 << 20;
    lim.strict = 0;
    snprintf(out_path, sizeof(out_path), "%s/json_schema_walks_relaxed.jsonl",
             build && build[0] ? build : "build");
    f = fopen(out_path, "w");
    if (f == NULL) {
        ok(0, "write %s", out_path);
        return;
    }
    text = malloc(8192);
    for (s = 0; s < n_relaxed_schemas; s++) {
        const char    *src = relaxed_schemas[s];
        llm_grammar   *g = llm_grammar_compile(vocab,
                                   LLM_CONSTRAINT_JSON_SCHEMA, src,
                                   strlen(src), &lim, err, sizeof(err));
        cJSON         *schema = cJSON_Parse(src);

        for (k = 0; g && schema && k < 6; k++) {
            cJSON  *rec;
            char   *js;

            if (walk(g, &seed, text, 8192) < 0) {
                continue;
            }
            rec = cJSON_CreateObject();
            cJSON_AddItemReferenceToObject(rec, "schema", schema);
            cJSON_AddStringToObject(rec, "text", text);
            cJSON_AddStringToObject(rec, "relaxed", llm_grammar_relaxed(g));
            js = json_text(rec);
            fprintf(f, "%s\n", js);
            free(js);
            cJSON_Delete(rec);
            n_walks++;
        }
        cJSON_Delete(schema);
        llm_grammar_free(g);
    }
    fclose(f);
    free(text);
    snprintf(cmd, sizeof(cmd), "python3 tools/json_schema_check.py "
             "--relaxed %s 2>&1", out_path);
    p = popen(cmd, "r");
    if (p == NULL) {
        ok(0, "run %s", cmd);
        return;
    }
    while (fgets(line, sizeof(line), p)) {
        if (sscanf(line, "relaxed: checked %d valid, %d invalid, %d not JSON",
                   &n_ok, &n_bad, &n_json) != 3)
        {
            printf("#   %s", line);
        }
    }
    pclose(p);
    printf("# relaxed grammars: %d walks over %d schemas: %d valid, %d "
           "invalid (counted per relaxed keyword above)\n", n_walks,
           n_relaxed_schemas, n_ok, n_bad);
    ok(n_walks > 0, "walks through %d relaxed grammars", n_relaxed_schemas);
    is_int(n_ok + n_bad, n_walks, "python jsonschema checked every relaxed "
           "walk");
    is_int(n_json, 0, "every relaxed walk is JSON");
}


static void
test_walks(void)
{
    static const char *const extra[] = {
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\","
        "\"minLength\":1,\"maxLength\":20},\"age\":{\"type\":\"integer\","
        "\"minimum\":0,\"maximum\":150},\"email\":{\"type\":\"string\","
        "\"format\":\"email\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":"
        "[\"a\",\"b\",\"c\"]},\"maxItems\":3},\"born\":{\"type\":\"string\","
        "\"format\":\"date\"},\"id\":{\"type\":\"string\",\"format\":\"uuid\"}},"
        "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
        "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\","
        "\"exclusiveMinimum\":-2,\"maximum\":3}},\"additionalProperties\":"
        "{\"type\":\"string\",\"pattern\":\"^[A-Z][a-z]*\\\\s?\\\\d+$\"}}",
        "{\"$defs\":{\"tree\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":"
        "[\"integer\",\"null\"]},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":"
        "\"#/$defs/tree\"}}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/tree\"}",
        "{\"type\":\"array\",\"prefixItems\":[{\"const\":\"x\"},{\"type\":"
        "\"boolean\"}],\"items\":{\"type\":\"string\",\"pattern\":\"\\\\.json$\"},"
        "\"minItems\":2}",
        "{\"allOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"type\":"
        "\"string\",\"pattern\":\"^[^a-c\\\\\\\\\\\"]+$\"}},\"required\":[\"k\"]},"
        "{\"properties\":{\"k\":true,\"n\":{\"type\":\"integer\","
        "\"exclusiveMaximum\":0}},"
        "\"additionalProperties\":{\"type\":\"null\"}}]}",
        "{\"type\":\"object\"}",
        "{\"type\":\"string\",\"format\":\"date-time\"}",
        "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"multipleOf\":"
        "7}}",
        "{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"y\",1,1.5,null,"
        "{\"a\":[1]},[2]]},\"uniqueItems\":true,\"minItems\":1}",
        "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":-20,"
        "\"maximum\":40,\"multipleOf\":6}}",
        "{\"type\":\"array\",\"items\":{\"type\":\"number\",\"multipleOf\":"
        "100}}",
        "{\"type\":\"string\",\"pattern\":\"(\\\\d\\\\w\\\\s\\\\D\\\\W\\\\S.|x)\"}",
        /* counters (past the unrolling cap) */
        "{\"type\":\"string\",\"minLength\":1995,\"maxLength\":2000}",
        "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\","
        "\"minLength\":1001,\"maxLength\":1003},\"t\":{\"type\":\"string\","
        "\"maxLength\":5000}},\"required\":[\"s\",\"t\"]}",
        "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":0,"
        "\"maximum\":9},\"minItems\":1200,\"maxItems\":1202}",
        "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":"
        "2},\"minItems\":1001,\"maxItems\":3000}",
        "{\"type\":\"string\",\"pattern\":\"^a[b-d]{1500,1502}$\"}",
    };
    char         out_path[1024], cmd[2400], *text, err[512], line[512];
    const char  *build = getenv("BUILD");
    FILE        *f, *p;
    unsigned     seed = 7;
    size_t       i;
    int          s, k, n_walks = 0, n_noend = 0, n_bad = -1, n_ok = -1;
    int          n_oneof = -1;

    for (i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
        walk_schemas[n_walk_schemas++] = strdup(extra[i]);
    }
    /* JSON_SCHEMA_SEED=n: other random schemas (to look for more) */
    if (getenv("JSON_SCHEMA_SEED")) {
        gen_seed = (unsigned) atoi(getenv("JSON_SCHEMA_SEED"));
    }
    k = gen_schemas(400);
    printf("# 400 random schemas: %d compile\n", k);
    ok(k >= 200, "%d random schemas compile", k);
    snprintf(out_path, sizeof(out_path), "%s/json_schema_walks.jsonl",
             build && build[0] ? build : "build");
    f = fopen(out_path, "w");
    if (f == NULL) {
        ok(0, "write %s", out_path);
        return;
    }
    text = malloc(8192);
    for (s = 0; s < n_walk_schemas; s++) {
        llm_grammar  *g = compile_big(walk_schemas[s],
                                      strlen(walk_schemas[s]), err,
                                      sizeof(err));
        cJSON        *schema = cJSON_Parse(walk_schemas[s]);

        if (g == NULL || schema == NULL) {
            ok(0, "compiles for the walks: %.80s: %s", walk_schemas[s], err);
            cJSON_Delete(schema);
            continue;
        }
        for (k = 0; k < 6; k++) {
            int  n = walk(g, &seed, text, 8192);

            if (n < 0) {
                n_noend++;
                continue;
            }
            {
                cJSON  *rec = cJSON_CreateObject();
                char   *js;

                cJSON_AddItemReferenceToObject(rec, "schema", schema);
                cJSON_AddStringToObject(rec, "text", text);
                js = json_text(rec);
                fprintf(f, "%s\n", js);
                free(js);
                cJSON_Delete(rec);
            }
            n_walks++;
        }
        cJSON_Delete(schema);
        llm_grammar_free(g);
    }
    fclose(f);
    free(text);
    printf("# %d random walks over %d grammars (%d found no end within 8 KB)"
           "\n", n_walks, n_walk_schemas, n_noend);

    snprintf(cmd, sizeof(cmd), "python3 tools/json_schema_check.py %s 2>&1",
             out_path);
    p = popen(cmd, "r");
    if (p == NULL) {
        ok(0, "run %s", cmd);
        return;
    }
    while (fgets(line, sizeof(line), p)) {
        if (sscanf(line, "checked %d valid, %d valid under several oneOf "
                   "branches, %d invalid", &n_ok, &n_oneof, &n_bad) == 3)
        {
            continue;
        }
        printf("#   %s", line);
    }
    if (pclose(p) != 0 && n_ok < 0) {
        ok(0, "tools/json_schema_check.py ran (python3 with jsonschema: "
           "make deps installs python3-jsonschema)");
        return;
    }
    printf("# python jsonschema: %d valid, %d valid but for oneOf (read as "
           "anyOf: the text matches several branches), %d invalid\n", n_ok,
           n_oneof, n_bad);
    is_int(n_ok + n_oneof, n_walks, "python jsonschema checked every walk");
    is_int(n_bad, 0, "no walk's text invalid (but for oneOf read as anyOf)");
    ok(n_ok > n_walks * 9 / 10, "over 90%% of the walks valid outright");
    test_relaxed_walks();
}


int
main(void)
{
    gguf_file  gf;
    char       err[512];
    int        i;

    if (gguf_open(&gf, tap_model()) != 0) {
        tap_bail_out(gf.err);
    }
    tok = llm_tokenizer_load_gguf(&gf, err, sizeof(err));
    gguf_close(&gf);
    if (tok == NULL) {
        tap_bail_out(err);
    }
    vocab = llm_grammar_vocab_new(tok, err, sizeof(err));
    if (vocab == NULL) {
        tap_bail_out(err);
    }

    test_emit();
    test_refused();
    test_caps();
    test_match();
    test_keys();
    test_ranges();
    test_suite();
    test_compact();
    test_relaxed();
    test_counted();
    test_corpus();
    test_walks();

    for (i = 0; i < n_walk_schemas; i++) {
        free(walk_schemas[i]);
    }
    for (i = 0; i < n_relaxed_schemas; i++) {
        free(relaxed_schemas[i]);
    }
    llm_grammar_vocab_free(vocab);
    llm_tokenizer_free(tok);
    return tap_done();
}
