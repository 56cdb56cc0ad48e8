/*
 * The Responses API's request as a chat one and its reply as output items
 * (api/responses.h): every input item and tool type, Codex's namespaces
 * and custom tools, hosted tools dropped or refused, the errors and their
 * params; each translated body parsed again by the chat parser.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "api/request.h"
#include "api/responses.h"
#include "text/utf8.h"

static llm_api_limits  lim;


/* translates body; 0 and the chat body parsed back, or -1 and err */
static int
tr(const char *body, int strict, llm_responses_req *rq, cJSON **chat,
    llm_api_error *err)
{
    llm_api_request  req;
    int              rc;

    *chat = NULL;
    rc = llm_responses_parse(rq, body, strlen(body), &lim, strict, NULL, 0,
                             err);
    if (rc != 0) {
        return rc;
    }
    *chat = cJSON_Parse(rq->chat);
    memset(&req, 0, sizeof(req));
    rc = llm_api_parse(&req, rq->chat, rq->chat_len, LLM_API_CHAT, &lim, err);
    llm_api_request_free(&req);
    if (rc != 0) {
        llm_responses_param(err->param, sizeof(err->param));
    }
    return rc;
}


static const char *
path_str(const cJSON *root, const char *path)
{
    char          key[64];
    const char   *p = path, *e;
    const cJSON  *v = root;
    size_t        n;

    while (v && *p) {
        e = strchr(p, '.');
        n = e ? (size_t) (e - p) : strlen(p);
        snprintf(key, sizeof(key), "%.*s", (int) n, p);
        if (key[0] >= '0' && key[0] <= '9') {
            v = cJSON_GetArrayItem(v, atoi(key));
        } else {
            v = cJSON_GetObjectItemCaseSensitive(v, key);
        }
        p = e ? e + 1 : p + n;
    }
    if (cJSON_IsString(v)) {
        return v->valuestring;
    }
    if (cJSON_IsTrue(v)) {
        return "true";
    }
    if (cJSON_IsFalse(v)) {
        return "false";
    }
    return v ? "(other)" : "(absent)";
}


static void
refused(const char *body, int strict, int status, const char *param,
    const char *code, const char *what)
{
    llm_responses_req  rq;
    llm_api_error      err;
    cJSON             *chat;

    is_int(tr(body, strict, &rq, &chat, &err), -1, "%s: refused", what);
    is_int(err.status, status, "%s: status", what);
    is_str(err.param, param, "%s: param", what);
    is_str(err.code, code, "%s: code", what);
    cJSON_Delete(chat);
    llm_responses_free(&rq);
}


static void
test_input(void)
{
    llm_responses_req  rq;
    llm_api_error      err;
    cJSON             *c;

    is_int(tr("{\"model\":\"m\",\"input\":\"Hi\",\"instructions\":\"Be "
              "brief\",\"max_output_tokens\":20,\"temperature\":0}", 0,
              &rq, &c, &err), 0, "string input");
    is_str(path_str(c, "messages.0.role"), "system", "instructions first");
    is_str(path_str(c, "messages.0.content"), "Be brief", "their text");
    is_str(path_str(c, "messages.1.role"), "user", "input as a user turn");
    is_int(cJSON_GetObjectItem(c, "max_tokens")->valueint, 20,
           "max_output_tokens as max_tokens");
    ok(rq.store == 1 && rq.stream == 0, "store defaults to true");
    cJSON_Delete(c);
    llm_responses_free(&rq);

    is_int(tr("{\"model\":\"m\",\"store\":false,\"input\":["
              "{\"role\":\"developer\",\"content\":\"rules\"},"
              "{\"type\":\"message\",\"role\":\"user\",\"content\":["
              "{\"type\":\"input_text\",\"text\":\"a\"},"
              "{\"type\":\"input_text\",\"text\":\"b\"}]},"
              "{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],"
              "\"encrypted_content\":\"gAAAA\"},"
              "{\"type\":\"message\",\"role\":\"assistant\",\"content\":["
              "{\"type\":\"output_text\",\"text\":\"let me look\"}]},"
              "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":"
              "\"ls\",\"arguments\":\"{\\\"d\\\":1}\"},"
              "{\"type\":\"custom_tool_call\",\"call_id\":\"c2\",\"name\":"
              "\"apply_patch\",\"input\":\"*** Begin\"},"
              "{\"type\":\"function_call_output\",\"call_id\":\"c1\","
              "\"output\":\"x.c\"},"
              "{\"type\":\"custom_tool_call_output\",\"call_id\":\"c2\","
              "\"output\":[{\"type\":\"input_text\",\"text\":\"done\"}]}]}",
              0, &rq, &c, &err), 0, "items");
    is_str(path_str(c, "messages.0.role"), "system", "developer as system");
    is_str(path_str(c, "messages.1.content"), "a\nb", "parts joined");
    is_str(path_str(c, "messages.2.role"), "assistant",
           "reasoning dropped, assistant next");
    is_str(path_str(c, "messages.2.content"), "let me look", "its text");
    is_str(path_str(c, "messages.2.tool_calls.0.id"), "c1",
           "a call joins the assistant turn");
    is_str(path_str(c, "messages.2.tool_calls.1.function.arguments"),
           "{\"input\":\"*** Begin\"}", "custom input as one argument");
    is_str(path_str(c, "messages.3.role"), "tool", "call output");
    is_str(path_str(c, "messages.3.tool_call_id"), "c1", "its call id");
    is_str(path_str(c, "messages.4.content"), "done", "custom output text");
    ok(rq.store == 0, "store false");
    cJSON_Delete(c);
    llm_responses_free(&rq);

    refused("{\"model\":\"m\"}", 0, 400, "input",
            "missing_required_parameter", "no input");
    refused("{\"model\":\"m\",\"input\":3}", 0, 400, "input", "invalid_type",
            "input a number");
    refused("{\"model\":\"m\",\"input\":[{\"type\":\"item_reference\","
            "\"id\":\"x\"}]}", 0, 400, "input[0].type", "unsupported_value",
            "item_reference");
    refused("{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":["
            "{\"type\":\"input_image\",\"image_url\":\"x\"}]}]}", 0, 400,
            "input[0].content[0].type", "unsupported_value", "an image");
    refused("{\"model\":\"m\",\"input\":[{\"type\":\"function_call\","
            "\"name\":\"f\",\"arguments\":\"{}\"}]}", 0, 400,
            "input[0].call_id", "missing_required_parameter", "no call_id");
    refused("{\"model\":\"m\",\"input\":[{\"role\":\"robot\",\"content\":"
            "\"x\"}]}", 0, 400, "input[0].role", "unsupported_value",
            "a bad role");
    refused("{\"model\":\"m\",\"input\":\"x\",\"background\":true}", 0, 400,
            "background", "unsupported_value", "background");
    refused("{\"model\":\"m\",\"input\":\"x\",\"max_output_tokens\":0}", 0,
            400, "max_output_tokens", "integer_below_min_value",
            "max_output_tokens 0, named as the client wrote it");
    refused("{\"model\":\"m\",\"input\":\"x\",\"temperature\":\"hot\"}", 0,
            400, "temperature", "invalid_type", "temperature a string");
    refused("{\"model\":\"m\",\"input\":\"x\",", 0, 400, "", "invalid_json",
            "broken JSON");
}


#define CODEX_TOOLS                                                           \
    "\"tools\":["                                                             \
    "{\"type\":\"function\",\"name\":\"exec_command\",\"description\":"       \
    "\"Run\",\"parameters\":{\"type\":\"object\",\"properties\":{\"cmd\":"    \
    "{\"type\":\"string\"}},\"required\":[\"cmd\"]}},"                        \
    "{\"type\":\"custom\",\"name\":\"apply_patch\",\"description\":"          \
    "\"Patch files\",\"format\":{\"type\":\"grammar\",\"syntax\":\"lark\","   \
    "\"definition\":\"start: begin_patch\"}},"                                \
    "{\"type\":\"namespace\",\"name\":\"mcp__fs__\",\"description\":\"fs\","  \
    "\"tools\":[{\"type\":\"function\",\"name\":\"read\",\"strict\":false,"   \
    "\"parameters\":{\"type\":\"object\",\"properties\":{}}}]},"              \
    "{\"type\":\"namespace\",\"name\":\"git\",\"tools\":["                    \
    "{\"type\":\"function\",\"name\":\"read\",\"parameters\":{\"type\":"      \
    "\"object\",\"properties\":{}}}]},"                                       \
    "{\"type\":\"web_search\"},{\"type\":\"image_generation\"}]"


static void
test_tools(void)
{
    llm_responses_req  rq;
    llm_api_error      err;
    llm_tool_call      call;
    cJSON             *c, *item;

    is_int(tr("{\"model\":\"m\",\"input\":\"x\"," CODEX_TOOLS
              ",\"tool_choice\":{\"type\":\"function\",\"name\":\"read\","
              "\"namespace\":\"git\"}}", 0, &rq, &c, &err), 0,
           "Codex's tools");
    is_int(cJSON_GetArraySize(cJSON_GetObjectItem(c, "tools")), 4,
           "hosted tools not offered");
    is_str(rq.hosted, "web_search, image_generation", "named as dropped");
    is_str(path_str(c, "tools.0.function.name"), "exec_command",
           "a function by its name");
    is_str(path_str(c, "tools.0.function.strict"), "true",
           "strict unless said otherwise");
    is_str(path_str(c, "tools.1.function.parameters.properties.input.type"),
           "string", "custom: one string argument");
    ok(strstr(path_str(c, "tools.1.function.description"),
              "start: begin_patch") != NULL, "its grammar described");
    is_str(path_str(c, "tools.2.function.name"), "mcp__fs__read",
           "namespace flattened, one __");
    is_str(path_str(c, "tools.2.function.strict"), "false", "strict false");
    is_str(path_str(c, "tools.3.function.name"), "git__read",
           "another namespace's same name");
    is_str(path_str(c, "tool_choice.function.name"), "git__read",
           "tool_choice names the flat name");

    memset(&call, 0, sizeof(call));
    strcpy(call.id, "call_1");
    call.name = "git__read";
    call.arguments = "{}";
    item = llm_responses_call_item(&rq, "fc_1", &call, "completed");
    is_str(path_str(item, "type"), "function_call", "a namespace's call");
    is_str(path_str(item, "name"), "read", "its own name");
    is_str(path_str(item, "namespace"), "git", "and its namespace");
    is_str(path_str(item, "call_id"), "call_1", "call_id");
    cJSON_Delete(item);

    call.name = "apply_patch";
    call.arguments = "{\"input\":\"*** Begin Patch\\n\"}";
    item = llm_responses_call_item(&rq, "fc_2", &call, "completed");
    is_str(path_str(item, "type"), "custom_tool_call", "a custom call");
    is_str(path_str(item, "input"), "*** Begin Patch\n", "its input");
    ok(cJSON_GetObjectItem(item, "namespace") == NULL, "no namespace");
    cJSON_Delete(item);

    call.name = "exec_command";
    call.arguments = "{\"cmd\":\"ls\"}";
    item = llm_responses_call_item(&rq, "fc_3", &call, "completed");
    is_str(path_str(item, "type"), "function_call", "a plain call");
    is_str(path_str(item, "arguments"), "{\"cmd\":\"ls\"}", "arguments");
    cJSON_Delete(item);
    cJSON_Delete(c);
    llm_responses_free(&rq);

    /* a past call of a namespace's tool renders under the flat name */
    is_int(tr("{\"model\":\"m\",\"input\":[{\"type\":\"function_call\","
              "\"call_id\":\"c\",\"name\":\"read\",\"namespace\":\"git\","
              "\"arguments\":\"{}\"},{\"type\":\"function_call_output\","
              "\"call_id\":\"c\",\"output\":\"ok\"}]," CODEX_TOOLS "}", 0,
              &rq, &c, &err), 0, "a namespace's past call");
    is_str(path_str(c, "messages.0.tool_calls.0.function.name"), "git__read",
           "as the flat name");
    cJSON_Delete(c);
    llm_responses_free(&rq);

    refused("{\"model\":\"m\",\"input\":\"x\"," CODEX_TOOLS "}", 1, 400,
            "tools[4].type", "unsupported_value",
            "hosted tools under llm_responses_strict_tools");
    refused("{\"model\":\"m\",\"input\":\"x\",\"tools\":[{\"type\":"
            "\"teleport\"}]}", 0, 400, "tools[0].type", "unsupported_value",
            "an unknown tool type");
    refused("{\"model\":\"m\",\"input\":\"x\",\"tools\":[{\"type\":"
            "\"function\",\"name\":\"f\"},{\"type\":\"function\",\"name\":"
            "\"f\"}]}", 0, 400, "tools[1].name", "invalid_value",
            "a name twice");
    refused("{\"model\":\"m\",\"input\":\"x\",\"tools\":[{\"type\":"
            "\"function\",\"name\":\"f\"}],\"tool_choice\":{\"type\":"
            "\"function\",\"name\":\"g\"}}", 0, 400, "tool_choice.name",
            "invalid_value", "tool_choice of no tool");
}


static void
test_text_format(void)
{
    llm_responses_req  rq;
    llm_api_error      err;
    cJSON             *c;

    is_int(tr("{\"model\":\"m\",\"input\":\"x\",\"text\":{\"format\":{"
              "\"type\":\"json_schema\",\"name\":\"p\",\"strict\":true,"
              "\"schema\":{\"type\":\"object\",\"properties\":{\"a\":"
              "{\"type\":\"integer\"}},\"required\":[\"a\"],"
              "\"additionalProperties\":false}}}}", 0, &rq, &c, &err), 0,
           "json_schema");
    is_str(path_str(c, "response_format.type"), "json_schema", "as chat's");
    is_str(path_str(c, "response_format.json_schema.name"), "p", "its name");
    is_str(path_str(c, "response_format.json_schema.schema.type"), "object",
           "its schema");
    cJSON_Delete(c);
    llm_responses_free(&rq);

    is_int(tr("{\"model\":\"m\",\"input\":\"x\",\"text\":{\"format\":{"
              "\"type\":\"json_object\"}}}", 0, &rq, &c, &err), 0,
           "json_object");
    is_str(path_str(c, "response_format.type"), "json_object", "as chat's");
    cJSON_Delete(c);
    llm_responses_free(&rq);

    is_int(tr("{\"model\":\"m\",\"input\":\"x\",\"text\":{\"format\":{"
              "\"type\":\"text\"}}}", 0, &rq, &c, &err), 0, "text");
    ok(cJSON_GetObjectItem(c, "response_format") == NULL, "no constraint");
    cJSON_Delete(c);
    llm_responses_free(&rq);

    refused("{\"model\":\"m\",\"input\":\"x\",\"text\":{\"format\":{"
            "\"type\":\"json_schema\",\"name\":\"p\"}}}", 0, 400,
            "text.format.schema", "missing_required_parameter",
            "json_schema without a schema");
}


static void
test_output(void)
{
    llm_responses_req     rq;
    llm_responses_result  res;
    llm_api_error         err;
    llm_tool_call         call;
    cJSON                *c, *o;

    is_int(tr("{\"model\":\"m\",\"input\":\"x\",\"metadata\":{\"k\":\"v\"},"
              "\"tools\":[{\"type\":\"function\",\"name\":\"f\"}]}", 0, &rq,
              &c, &err), 0, "a request");
    cJSON_Delete(c);

    memset(&res, 0, sizeof(res));
    memset(&call, 0, sizeof(call));
    strcpy(call.id, "call_9");
    call.name = "f";
    call.arguments = "{}";
    res.id = "resp_00ab";
    res.created_at = 1700000000;
    res.model = "m";
    res.status = "incomplete";
    res.incomplete = "max_output_tokens";
    res.text = "Hello";
    res.text_len = 5;
    res.reasoning = "hmm";
    res.reasoning_len = 3;
    res.calls = &call;
    res.n_calls = 1;
    res.input_tokens = 10;
    res.cached_tokens = 4;
    res.output_tokens = 7;
    res.reasoning_tokens = 2;
    res.with_output = 1;

    o = llm_responses_object(&rq, &res);
    is_str(path_str(o, "object"), "response", "object");
    is_str(path_str(o, "status"), "incomplete", "status");
    is_str(path_str(o, "incomplete_details.reason"), "max_output_tokens",
           "incomplete_details");
    is_str(path_str(o, "output.0.type"), "reasoning", "reasoning first");
    is_str(path_str(o, "output.0.content.0.text"), "hmm", "its text");
    is_str(path_str(o, "output.0.id"), "rs_00ab00", "its id");
    is_str(path_str(o, "output.1.type"), "message", "then the message");
    is_str(path_str(o, "output.1.content.0.type"), "output_text", "part");
    is_str(path_str(o, "output.1.content.0.text"), "Hello", "its text");
    is_str(path_str(o, "output.1.status"), "incomplete", "cut short");
    is_str(path_str(o, "output.2.type"), "function_call", "then the call");
    is_str(path_str(o, "metadata.k"), "v", "metadata echoed");
    is_str(path_str(o, "tools.0.name"), "f", "tools echoed");
    is_int(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "usage"),
                               "total_tokens")->valueint, 17, "total");
    is_int(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(o,
                               "usage"), "input_tokens_details"),
                               "cached_tokens")->valueint, 4, "cached");
    is_int(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(o,
                               "usage"), "output_tokens_details"),
                               "reasoning_tokens")->valueint, 2,
           "reasoning tokens");
    cJSON_Delete(o);

    /* a call and no text: no empty message */
    res.text_len = 0;
    res.reasoning = NULL;
    o = llm_responses_object(&rq, &res);
    is_int(cJSON_GetArraySize(cJSON_GetObjectItem(o, "output")), 1,
           "only the call");
    cJSON_Delete(o);
    llm_responses_free(&rq);
}


/* a model's lone surrogate escape and a cut character: valid UTF-8 out */
static void
test_utf8(void)
{
    llm_responses_req     rq;
    llm_api_error         err;
    llm_tool_call         call;
    cJSON                *c, *item;
    char                 *text;

    is_int(tr("{\"model\":\"m\",\"input\":\"x\",\"tools\":[{\"type\":"
              "\"custom\",\"name\":\"p\"}]}", 0, &rq, &c, &err), 0,
           "a custom tool");
    cJSON_Delete(c);
    memset(&call, 0, sizeof(call));
    strcpy(call.id, "call_1");
    call.name = "p";
    call.arguments = "{\"input\":\"a\\ud800b\xff\"}";
    item = llm_responses_call_item(&rq, "fc_1", &call, "completed");
    text = llm_responses_print(item);
    ok(text && llm_utf8_valid(text, strlen(text)),
       "a lone surrogate and a bad byte: valid UTF-8 printed");
    ok(text && strstr(text, "b\xef\xbf\xbd") != NULL, "0xff as U+FFFD");
    free(text);
    cJSON_Delete(item);

    text = llm_responses_text("ok\xe2\x82", 5);
    is_str(text, "ok\xef\xbf\xbd\xef\xbf\xbd", "a cut character");
    free(text);
    llm_responses_free(&rq);
}


/* reasoning.effort switches the template's thinking: off, on, not given */
static void
test_reasoning(void)
{
    static const struct { const char *effort; int thinking; } cases[] = {
        { "\"none\"", 0 }, { "\"minimal\"", 0 }, { "\"low\"", 1 },
        { "\"medium\"", 1 }, { "\"high\"", 1 }, { "null", -1 },
    };
    llm_responses_req  rq;
    llm_api_error      err;
    cJSON             *chat;
    char               body[256];
    size_t             i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"input\":\"hi\","
                 "\"reasoning\":{\"effort\":%s}}", cases[i].effort);
        is_int(tr(body, 0, &rq, &chat, &err), 0, "effort %s: accepted",
               cases[i].effort);
        is_int(rq.thinking, cases[i].thinking, "effort %s: thinking",
               cases[i].effort);
        cJSON_Delete(chat);
        llm_responses_free(&rq);
    }
    is_int(tr("{\"model\":\"m\",\"input\":\"hi\"}", 0, &rq, &chat, &err),
           0, "no reasoning: accepted");
    is_int(rq.thinking, -1, "no reasoning: the template's default");
    cJSON_Delete(chat);
    llm_responses_free(&rq);

    refused("{\"model\":\"m\",\"input\":\"hi\","
            "\"reasoning\":{\"effort\":\"max\"}}", 0, 400,
            "reasoning.effort", "invalid_value", "effort 'max'");
    refused("{\"model\":\"m\",\"input\":\"hi\",\"reasoning\":{\"effort\":3}}",
            0, 400, "reasoning.effort", "invalid_type", "effort 3");
    refused("{\"model\":\"m\",\"input\":\"hi\",\"reasoning\":\"high\"}", 0,
            400, "reasoning", "invalid_type", "reasoning a string");
}


int
main(void)
{
    llm_api_limits_default(&lim);

    test_input();
    test_tools();
    test_text_format();
    test_output();
    test_utf8();
    test_reasoning();

    return tap_done();
}
