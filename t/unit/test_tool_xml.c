/*
 * Qwen3-Coder's XML tool calls: detected from a template, parsed on fixed
 * model outputs (values typed by the tool's schema, the format's newlines,
 * several calls, text around, a cut reply, a Hermes JSON body), malformed
 * ones sent back as content with the reason, and the same result however
 * the text is split (api/tool_xml.h, api/reply.h).
 */
#include "tap.h"
#include "api/reply.h"
#include "api/tool_xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOOLS_JSON                                                            \
    "[{\"type\":\"function\",\"function\":{\"name\":\"run\",\"parameters\":"  \
    "{\"type\":\"object\",\"properties\":{\"cmd\":{\"type\":\"string\"},"     \
    "\"timeout\":{\"type\":\"integer\"},\"ratio\":{\"type\":\"number\"},"     \
    "\"dry\":{\"type\":\"boolean\"},\"env\":{\"type\":\"object\"},"           \
    "\"args\":{\"type\":\"array\"}}}}},"                                      \
    "{\"type\":\"function\",\"function\":{\"name\":\"now\",\"parameters\":"   \
    "{\"type\":\"object\",\"properties\":{}}}}]"

static cJSON  *tools;


/* "name:args;" per call, the content, failed: the reply pushed in two
   pieces cut at `cut` (0: whole) */
static void
run(const char *text, size_t cut, char *calls, char *content, int *failed)
{
    int              i;
    size_t           len = strlen(text);
    llm_reply        o;
    llm_reply_piece  p;

    calls[0] = content[0] = '\0';
    llm_reply_init(&o, LLM_TOOL_FMT_QWEN3_XML, 0, 0, 1, tools);
    if (cut) {
        llm_reply_push(&o, text, cut, &p);
        strncat(content, p.content ? p.content : "", p.content_len);
    }
    llm_reply_push(&o, text + cut, len - cut, &p);
    strncat(content, p.content ? p.content : "", p.content_len);
    llm_reply_finish(&o, &p);
    strncat(content, p.content ? p.content : "", p.content_len);
    for (i = 0; i < o.n_calls; i++) {
        strcat(calls, o.calls[i].name);
        strcat(calls, ":");
        strcat(calls, o.calls[i].arguments);
        strcat(calls, ";");
    }
    *failed = o.failed;
    llm_reply_free(&o);
}


static void
is_reply(const char *text, const char *want_calls, const char *want_content,
    int want_failed, const char *what)
{
    int     failed, f2, split_ok = 1;
    char    calls[1024], content[1024], c2[1024], t2[1024];
    size_t  k, len = strlen(text);

    run(text, 0, calls, content, &failed);
    is_str(calls, want_calls, "%s: calls", what);
    is_str(content, want_content, "%s: content", what);
    is_int(failed, want_failed, "%s: failed", what);
    for (k = 1; k < len; k++) {
        run(text, k, c2, t2, &f2);
        if (strcmp(c2, calls) || strcmp(t2, content) || f2 != failed) {
            printf("# split at %zu: calls \"%s\" content \"%s\"\n", k, c2,
                   t2);
            split_ok = 0;
            break;
        }
    }
    ok(split_ok, "%s: split at every byte = whole", what);
}


#define CALL(body)  "<tool_call>\n<function=run>\n" body "</function>\n"   \
                    "</tool_call>"
#define P(k, v)     "<parameter=" k ">\n" v "\n</parameter>\n"

/* the published Qwen3-Coder template (make deps: llama-cpp-python
   0.3.36's sdist, tools/fixtures.sha256), as a GGUF or tokenizer_config
   would carry it */
static void
test_detect_published(void)
{
    char         path[4096], *text;
    const char  *fx = getenv("FIXTURES");
    FILE        *f;
    long         n;

    snprintf(path, sizeof(path), "%s/llama.cpp/templates/Qwen3-Coder.jinja",
             fx ? fx : "");
    f = fopen(path, "rb");
    ok(f != NULL, "the published template: %s", path);
    if (f == NULL) {
        return;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    text = malloc((size_t) n + 1);
    ok(text != NULL && fread(text, 1, (size_t) n, f) == (size_t) n,
       "read it");
    fclose(f);
    if (text == NULL) {
        return;
    }
    is_int(llm_tool_format_detect(text, (size_t) n), LLM_TOOL_FMT_QWEN3_XML,
           "the published Qwen3-Coder template: XML");
    free(text);
}


static void
test_detect(void)
{
    static const char  coder[] =
        "{%- for tool in tools %}...{%- endfor %}If you choose to call a "
        "function ONLY reply in the following format:\n<tool_call>\n"
        "<function=example_function_name>\n<parameter=example_parameter_1>"
        "\nvalue_1\n</parameter>\n</function>\n</tool_call>";
    static const char  hermes[] =
        "<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call>";

    is_int(llm_tool_format_detect(coder, sizeof(coder) - 1),
           LLM_TOOL_FMT_QWEN3_XML, "a template teaching <function=: XML");
    is_int(llm_tool_format_detect(hermes, sizeof(hermes) - 1),
           LLM_TOOL_FMT_HERMES, "<tool_call> with JSON: still Hermes");
    is_str(llm_tool_format_name(LLM_TOOL_FMT_QWEN3_XML), "qwen3_xml",
           "its name");
    test_detect_published();
}


static void
test_values(void)
{
    char    *name;
    char     why[128], *s;
    cJSON   *args;
    static const char  body[] =
        "\n<function=run>\n"
        "<parameter=cmd>\nls -la\n</parameter>\n"
        "<parameter=timeout>\n30\n</parameter>\n"
        "<parameter=ratio>\n0.5\n</parameter>\n"
        "<parameter=dry>\ntrue\n</parameter>\n"
        "<parameter=env>\n{\"A\": \"1\"}\n</parameter>\n"
        "<parameter=args>\n[1, \"x\"]\n</parameter>\n"
        "<parameter=extra>\n42\n</parameter>\n"
        "</function>\n";
    static const char  odd[] =
        "<function=run>\n<parameter=timeout>\nsoon\n</parameter>\n"
        "<parameter=ratio>\nnan\n</parameter>\n"
        "<parameter=env>\n[1]\n</parameter>\n"
        "<parameter=dry>\nyes\n</parameter>\n"
        "<parameter=cmd>\n\n  two\nlines \n\n</parameter>\n</function>";

    ok(llm_tool_xml_call(body, sizeof(body) - 1, tools, &name, &args, why,
                         sizeof(why)) == 0, "a call with every type");
    is_str(name, "run", "its name");
    s = cJSON_PrintUnformatted(args);
    is_str(s, "{\"cmd\":\"ls -la\",\"timeout\":30,\"ratio\":0.5,\"dry\":true,"
           "\"env\":{\"A\":\"1\"},\"args\":[1,\"x\"],\"extra\":\"42\"}",
           "values typed by the schema; an untyped parameter a string");
    free(s);
    free(name);
    cJSON_Delete(args);

    ok(llm_tool_xml_call(odd, sizeof(odd) - 1, tools, &name, &args, why,
                         sizeof(why)) == 0, "values not of their type");
    s = cJSON_PrintUnformatted(args);
    is_str(s, "{\"timeout\":\"soon\",\"ratio\":\"nan\",\"env\":\"[1]\","
           "\"dry\":\"yes\",\"cmd\":\"\\n  two\\n"
           "lines \\n\"}", "stay strings; only one newline each side is "
           "the format's");
    free(s);
    free(name);
    cJSON_Delete(args);
}


static void
test_replies(void)
{
    is_reply(CALL(P("cmd", "ls")), "run:{\"cmd\":\"ls\"};", "", 0,
             "one call");
    is_reply("I will list the files.\n\n" CALL(P("cmd", "ls")
             P("timeout", "5")), "run:{\"cmd\":\"ls\",\"timeout\":5};",
             "I will list the files.", 0, "text before a call");
    is_reply(CALL(P("cmd", "ls")) "\n<tool_call>\n<function=now>\n"
             "</function>\n</tool_call>", "run:{\"cmd\":\"ls\"};now:{};", "",
             0, "two calls, one without parameters");
    is_reply("<tool_call>\n<function=run>\n" P("cmd", "a < b && c > d"),
             "run:{\"cmd\":\"a < b && c > d\"};", "", 0,
             "a reply cut after a parameter: no </function></tool_call>");
    is_reply("<tool_call>\n{\"name\": \"run\", \"arguments\": {\"cmd\": "
             "\"ls\"}}\n</tool_call>", "run:{\"cmd\":\"ls\"};", "", 0,
             "a Hermes JSON body (the grammar's) is read too");
    is_reply("No call here.", "", "No call here.", 0, "plain text");
    is_reply(CALL(P("timeout", "1e300")), "run:{\"timeout\":\"1e300\"};",
             "", 0, "an integer past 2^53 stays a string");

    /* malformed: the text comes back as content, failed */
    is_reply("<tool_call>\n<function=rm>\n" P("x", "1") "</function>\n"
             "</tool_call>", "", "<tool_call>\n<function=rm>\n"
             P("x", "1") "</function>\n</tool_call>", 1,
             "malformed: an unknown function");
    is_reply("<tool_call>\n<function=run>\n<parameter=cmd>\nls\n"
             "</function>\n</tool_call>", "", "<tool_call>\n<function=run>"
             "\n<parameter=cmd>\nls\n</function>\n</tool_call>", 1,
             "malformed: a parameter never closed");
    is_reply("<tool_call>\n<function=run>\nls -la\n</function>\n"
             "</tool_call>", "", "<tool_call>\n<function=run>\nls -la\n"
             "</function>\n</tool_call>", 1,
             "malformed: text that is not a parameter");
    is_reply("<tool_call>\n<function=>\n</function>\n</tool_call>", "",
             "<tool_call>\n<function=>\n</function>\n</tool_call>", 1,
             "malformed: no function name");
    is_reply("<tool_call>\nrun ls\n</tool_call>", "",
             "<tool_call>\nrun ls\n</tool_call>", 1,
             "malformed: neither XML nor JSON");
}


int
main(void)
{
    tools = cJSON_Parse(TOOLS_JSON);
    test_detect();
    test_values();
    test_replies();
    cJSON_Delete(tools);
    return tap_done();
}
