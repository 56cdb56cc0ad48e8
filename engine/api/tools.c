/*
 * tools, tool_choice, parallel_tool_calls and the tool turns of a
 * conversation: checked like the rest of the request (OpenAI's errors,
 * "param" naming the field), then shaped for the chat template (api/tools.h).
 *
 * defines: llm_tools_parse, llm_tools_message, llm_tools_template_input,
 *          llm_tools_system_prompt
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/json_strict.h"
#include "api/error.h"
#include "api/tools.h"
#include "api/reply.h"


static int
fail_type(llm_api_error *err, const char *param, const char *expected)
{
    return llm_api_fail(err, 400, "invalid_type", param,
                        "Invalid type for '%s': expected %s.",
                        param, expected);
}


/* ^[a-zA-Z0-9_-]{1,64}$ */
static int
valid_name(const char *s)
{
    size_t  i;

    for (i = 0; s[i]; i++) {
        if (i == 64
            || !((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')
                 || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'
                 || s[i] == '-'))
        {
            return 0;
        }
    }
    return i > 0;
}


/* ---------------------------------------------------------------------------
 * the request's fields
 */

static int
parse_tool(const cJSON *t, int i, const cJSON *tools, llm_api_error *err)
{
    const cJSON  *type, *fn, *name, *desc, *params, *strict, *pt, *u;
    char          p[64];
    int           j = 0;

    snprintf(p, sizeof(p), "tools[%d]", i);
    if (!cJSON_IsObject(t)) {
        return fail_type(err, p, "an object");
    }
    snprintf(p, sizeof(p), "tools[%d].type", i);
    type = llm_api_field(t, "type");
    if (type == NULL) {
        return llm_api_fail_missing(err, p);
    }
    if (!cJSON_IsString(type)) {
        return fail_type(err, p, "a string");
    }
    if (strcmp(type->valuestring, "function") != 0) {
        return llm_api_fail(err, 400, "unsupported_value", p,
                            "Unsupported value for '%s': tools of type "
                            "'%.40s' are not supported; only 'function' is.",
                            p,
                            type->valuestring);
    }
    snprintf(p, sizeof(p), "tools[%d].function", i);
    fn = llm_api_field(t, "function");
    if (fn == NULL) {
        return llm_api_fail_missing(err, p);
    }
    if (!cJSON_IsObject(fn)) {
        return fail_type(err, p, "an object");
    }
    snprintf(p, sizeof(p), "tools[%d].function.name", i);
    name = llm_api_field(fn, "name");
    if (name == NULL) {
        return llm_api_fail_missing(err, p);
    }
    if (!cJSON_IsString(name)) {
        return fail_type(err, p, "a string");
    }
    if (!valid_name(name->valuestring)) {
        return llm_api_fail(err, 400, "invalid_value", p,
                            "Invalid '%s': '%.64s' does not match "
                            "'^[a-zA-Z0-9_-]{1,64}$'.", p, name->valuestring);
    }
    cJSON_ArrayForEach(u, tools) {
        if (j++ == i) {
            break;
        }
        if (strcmp(cJSON_GetObjectItemCaseSensitive(
                       cJSON_GetObjectItemCaseSensitive(u, "function"),
                       "name")->valuestring, name->valuestring) == 0)
        {
            return llm_api_fail(err, 400, "invalid_value", p,
                                "Invalid '%s': the function name '%s' is used "
                                "twice.", p, name->valuestring);
        }
    }
    snprintf(p, sizeof(p), "tools[%d].function.description", i);
    desc = llm_api_field(fn, "description");
    if (desc != NULL && !cJSON_IsString(desc)) {
        return fail_type(err, p, "a string");
    }
    snprintf(p, sizeof(p), "tools[%d].function.parameters", i);
    params = llm_api_field(fn, "parameters");
    if (params != NULL) {
        if (!cJSON_IsObject(params)) {
            return fail_type(err, p, "an object (a JSON Schema)");
        }
        pt = llm_api_field(params, "type");
        if (pt != NULL
            && !(cJSON_IsString(pt) && strcmp(pt->valuestring, "object") == 0))
        {
            return llm_api_fail(err, 400, "invalid_value", p,
                                "Invalid '%s': the schema of a function's "
                                "parameters must have \"type\": \"object\".",
                                p);
        }
    }
    snprintf(p, sizeof(p), "tools[%d].function.strict", i);
    strict = llm_api_field(fn, "strict");
    if (strict != NULL && !cJSON_IsBool(strict)) {
        return fail_type(err, p, "a boolean");
    }
    return 0;
}


/* 1 when a tool (the one named, or any) has function.strict true */
static int
tools_strict(const cJSON *tools, const char *name)
{
    const cJSON  *t, *fn, *nm;

    cJSON_ArrayForEach(t, tools) {
        fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if ((name == NULL
             || (cJSON_IsString(nm) && strcmp(nm->valuestring, name) == 0))
            && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fn, "strict")))
        {
            return 1;
        }
    }
    return 0;
}


static int
parse_tool_choice(llm_api_request *req, const cJSON *tc, llm_api_error *err)
{
    const cJSON  *type, *fn, *name, *t;
    const char   *s;

    if (cJSON_IsString(tc)) {
        s = tc->valuestring;
        req->tool_choice = strcmp(s, "none") == 0 ? LLM_TOOL_CHOICE_NONE
                           : strcmp(s, "auto") == 0 ? LLM_TOOL_CHOICE_AUTO
                           : strcmp(s, "required") == 0
                             ? LLM_TOOL_CHOICE_REQUIRED : -1;
        if (req->tool_choice < 0) {
            return llm_api_fail(err, 400, "invalid_value", "tool_choice",
                                "Invalid value: '%.40s'. Supported values "
                                "are: 'none', 'auto', and 'required'.", s);
        }
    } else if (cJSON_IsObject(tc)) {
        type = llm_api_field(tc, "type");
        if (type == NULL) {
            return llm_api_fail_missing(err, "tool_choice.type");
        }
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
        {
            return llm_api_fail(err, 400, "invalid_value", "tool_choice.type",
                                "Invalid value for 'tool_choice.type': only "
                                "'function' is supported.");
        }
        fn = llm_api_field(tc, "function");
        name = fn ? llm_api_field(fn, "name") : NULL;
        if (name == NULL) {
            return llm_api_fail_missing(err, "tool_choice.function.name");
        }
        if (!cJSON_IsString(name)) {
            return fail_type(err, "tool_choice.function.name", "a string");
        }
        cJSON_ArrayForEach(t, req->tools) {
            if (strcmp(cJSON_GetObjectItemCaseSensitive(
                           cJSON_GetObjectItemCaseSensitive(t, "function"),
                           "name")->valuestring, name->valuestring) == 0)
            {
                break;
            }
        }
        if (t == NULL) {
            return llm_api_fail(err, 400, "invalid_value",
                                "tool_choice.function.name",
                                "Invalid value for 'tool_choice': no function "
                                "named '%.64s' in tools.", name->valuestring);
        }
        req->tool_name = strdup(name->valuestring);
        if (req->tool_name == NULL) {
            return llm_api_fail_oom(err);
        }
        req->tool_choice = LLM_TOOL_CHOICE_NAMED;
    } else {
        return fail_type(err, "tool_choice", "a string or an object");
    }

    if (req->tools == NULL && req->tool_choice != LLM_TOOL_CHOICE_NONE
        && req->tool_choice != LLM_TOOL_CHOICE_AUTO)
    {
        return llm_api_fail(err, 400, "invalid_value", "tool_choice",
                            "Invalid value for 'tool_choice': 'tool_choice' "
                            "is only allowed when 'tools' are specified.");
    }
    return 0;
}


int
llm_tools_parse(llm_api_request *req, const cJSON *root, llm_api_error *err)
{
    const cJSON  *tools, *tc, *par, *t;
    int           i = 0;

    req->parallel_tool_calls = 1;
    req->tool_choice = LLM_TOOL_CHOICE_NONE;

    if (llm_api_field(root, "functions") != NULL) {
        return llm_api_fail(err, 400, "unsupported_parameter", "functions",
                            "Unsupported parameter: 'functions' is deprecated "
                            "and not supported: use 'tools'.");
    }
    if (llm_api_field(root, "function_call") != NULL) {
        return llm_api_fail(err, 400, "unsupported_parameter", "function_call",
                            "Unsupported parameter: 'function_call' is "
                            "deprecated and not supported: use "
                            "'tool_choice'.");
    }

    tools = llm_api_field(root, "tools");
    if (tools != NULL) {
        if (!cJSON_IsArray(tools)) {
            return fail_type(err, "tools", "an array");
        }
        if (cJSON_GetArraySize(tools) == 0) {
            return llm_api_fail(err, 400, "empty_array", "tools",
                                "Invalid 'tools': empty array. Expected an "
                                "array with minimum length 1, but got an "
                                "empty array instead.");
        }
        if (cJSON_GetArraySize(tools) > LLM_TOOLS_MAX) {
            return llm_api_fail(err, 400, "array_above_max_length", "tools",
                                "Invalid 'tools': array too long. Expected an "
                                "array with maximum length %d.",
                                LLM_TOOLS_MAX);
        }
        cJSON_ArrayForEach(t, tools) {
            if (parse_tool(t, i++, tools, err) != 0) {
                return -1;
            }
        }
        req->tools = cJSON_Duplicate(tools, 1);
        if (req->tools == NULL) {
            return llm_api_fail_oom(err);
        }
        req->tool_choice = LLM_TOOL_CHOICE_AUTO;
    }

    tc = llm_api_field(root, "tool_choice");
    if (tc != NULL && parse_tool_choice(req, tc, err) != 0) {
        return -1;
    }

    par = llm_api_field(root, "parallel_tool_calls");
    if (par != NULL) {
        if (!cJSON_IsBool(par)) {
            return fail_type(err, "parallel_tool_calls", "a boolean");
        }
        req->parallel_tool_calls = cJSON_IsTrue(par);
    }

    /* the tool grammar is strict when a function it may call asks */
    if (req->tool_choice == LLM_TOOL_CHOICE_REQUIRED
        || req->tool_choice == LLM_TOOL_CHOICE_NAMED)
    {
        req->constraint_strict = tools_strict(req->tools,
                                  req->tool_choice == LLM_TOOL_CHOICE_NAMED
                                  ? req->tool_name : NULL);
    }
    return 0;
}


/* ---------------------------------------------------------------------------
 * the tool turns of a conversation
 */

static int
parse_past_call(const cJSON *c, const char *p0, int j, cJSON *list,
    llm_api_error *err)
{
    const cJSON  *id, *type, *fn, *name, *args;
    cJSON        *out, *ofn, *a;
    char          p[96];

    snprintf(p, sizeof(p), "%s[%d]", p0, j);
    if (!cJSON_IsObject(c)) {
        return fail_type(err, p, "an object");
    }
    snprintf(p, sizeof(p), "%s[%d].id", p0, j);
    id = llm_api_field(c, "id");
    if (id == NULL) {
        return llm_api_fail_missing(err, p);
    }
    if (!cJSON_IsString(id)) {
        return fail_type(err, p, "a string");
    }
    snprintf(p, sizeof(p), "%s[%d].type", p0, j);
    type = llm_api_field(c, "type");
    if (type != NULL
        && !(cJSON_IsString(type) && strcmp(type->valuestring, "function")
             == 0))
    {
        return llm_api_fail(err, 400, "invalid_value", p,
                            "Invalid value for '%s': only 'function' is "
                            "supported.",
                            p);
    }
    snprintf(p, sizeof(p), "%s[%d].function", p0, j);
    fn = llm_api_field(c, "function");
    if (fn == NULL) {
        return llm_api_fail_missing(err, p);
    }
    if (!cJSON_IsObject(fn)) {
        return fail_type(err, p, "an object");
    }
    snprintf(p, sizeof(p), "%s[%d].function.name", p0, j);
    name = llm_api_field(fn, "name");
    if (name == NULL) {
        return llm_api_fail_missing(err, p);
    }
    if (!cJSON_IsString(name)) {
        return fail_type(err, p, "a string");
    }
    snprintf(p, sizeof(p), "%s[%d].function.arguments", p0, j);
    args = llm_api_field(fn, "arguments");
    if (args == NULL) {
        return llm_api_fail_missing(err, p);
    }
    if (!cJSON_IsString(args) && !cJSON_IsObject(args)) {
        return fail_type(err, p, "a string");
    }

    /* vLLM's rule: templates take the arguments as a mapping (Qwen2.5
       writes them with tojson), so a JSON object in the string becomes
       one; any other string stays as it was sent */
    a = cJSON_IsString(args) ? cJSON_Parse(args->valuestring)
                             : cJSON_Duplicate(args, 1);
    if (a != NULL && !cJSON_IsObject(a)) {
        cJSON_Delete(a);
        a = NULL;
    }
    if (a == NULL) {
        a = cJSON_Duplicate(args, 1);
    }
    out = cJSON_CreateObject();
    ofn = cJSON_CreateObject();
    if (a == NULL || out == NULL || ofn == NULL
        || !cJSON_AddStringToObject(out, "id", id->valuestring)
        || !cJSON_AddStringToObject(out, "type", "function")
        || !cJSON_AddStringToObject(ofn, "name", name->valuestring))
    {
        cJSON_Delete(a);
        cJSON_Delete(out);
        cJSON_Delete(ofn);
        return llm_api_fail_oom(err);
    }
    cJSON_AddItemToObject(ofn, "arguments", a);
    cJSON_AddItemToObject(out, "function", ofn);
    cJSON_AddItemToArray(list, out);
    return 0;
}


int
llm_tools_message(const cJSON *m, const char *role, int i, cJSON *out,
    llm_api_error *err)
{
    const cJSON  *calls, *id, *c;
    cJSON        *list;
    char          p[64];
    int           j = 0;

    if (strcmp(role, "tool") == 0) {
        snprintf(p, sizeof(p), "messages[%d].tool_call_id", i);
        id = llm_api_field(m, "tool_call_id");
        if (id == NULL) {
            return llm_api_fail_missing(err, p);
        }
        if (!cJSON_IsString(id)) {
            return fail_type(err, p, "a string");
        }
        return cJSON_AddStringToObject(out, "tool_call_id", id->valuestring)
               ? 0 : llm_api_fail_oom(err);
    }
    snprintf(p, sizeof(p), "messages[%d].tool_calls", i);
    calls = llm_api_field(m, "tool_calls");
    if (calls == NULL) {
        return 0;
    }
    if (strcmp(role, "assistant") != 0) {
        return llm_api_fail(err, 400, "invalid_value", p,
                            "Invalid '%s': only assistant messages have "
                            "tool_calls.",
                            p);
    }
    if (!cJSON_IsArray(calls)) {
        return fail_type(err, p, "an array");
    }
    if (cJSON_GetArraySize(calls) == 0) {
        return 0;               /* as absent (the SDKs send []) */
    }
    list = cJSON_AddArrayToObject(out, "tool_calls");
    if (list == NULL) {
        return llm_api_fail_oom(err);
    }
    cJSON_ArrayForEach(c, calls) {
        if (parse_past_call(c, p, j++, list, err) != 0) {
            return -1;
        }
    }
    return 0;
}


/* ---------------------------------------------------------------------------
 * the template's input
 */

static int
add_text(char **s, size_t *len, size_t *cap, const char *t)
{
    size_t  n = strlen(t);
    char   *p;

    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        p = realloc(*s, *cap);
        if (p == NULL) {
            return -1;
        }
        *s = p;
    }
    memcpy(*s + *len, t, n + 1);
    *len += n;
    return 0;
}


char *
llm_tools_system_prompt(const llm_api_request *req)
{
    const cJSON  *t, *fn, *v;
    cJSON        *one;
    char         *s = NULL, *j, line[160];
    size_t        len = 0, cap = 0;
    int           rc;

    rc = add_text(&s, &len, &cap, "You can call these tools (their "
                  "parameters are JSON Schemas):\n");
    cJSON_ArrayForEach(t, req->tools) {
        fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        one = cJSON_CreateObject();
        if (one == NULL) {
            rc = -1;
            break;
        }
        cJSON_ArrayForEach(v, fn) {
            if (strcmp(v->string, "strict") != 0) {
                cJSON_AddItemToObject(one, v->string, cJSON_Duplicate(v, 1));
            }
        }
        j = cJSON_PrintUnformatted(one);
        cJSON_Delete(one);
        rc |= j ? add_text(&s, &len, &cap, j) : -1;
        rc |= add_text(&s, &len, &cap, "\n");
        free(j);
    }
    rc |= add_text(&s, &len, &cap,
                   "\nTo call tools, reply with this JSON object only, "
                   "nothing before or after it:\n"
                   "{\"tool_calls\": [{\"name\": \"<tool name>\", "
                   "\"arguments\": {<the arguments>}}]}\n");
    if (req->tool_choice == LLM_TOOL_CHOICE_REQUIRED) {
        rc |= add_text(&s, &len, &cap, "You must call at least one tool.");
    } else if (req->tool_choice == LLM_TOOL_CHOICE_NAMED) {
        snprintf(line, sizeof(line), "You must call the tool \"%s\".",
                 req->tool_name);
        rc |= add_text(&s, &len, &cap, line);
    } else {
        rc |= add_text(&s, &len, &cap, "Otherwise, answer the user "
                       "normally.");
    }
    if (!req->parallel_tool_calls) {
        rc |= add_text(&s, &len, &cap, " Call one tool at a time.");
    }
    if (rc != 0) {
        free(s);
        return NULL;
    }
    return s;
}


/* a past call as the JSON the GENERIC format answers in */
static int
generic_past_calls(cJSON *m)
{
    const cJSON  *c, *fn;
    cJSON        *calls, *wrap, *one, *content;
    char         *j, *text;
    size_t        n;

    calls = cJSON_DetachItemFromObjectCaseSensitive(m, "tool_calls");
    if (calls == NULL) {
        return 0;
    }
    wrap = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(wrap, "tool_calls");
    cJSON_ArrayForEach(c, calls) {
        fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        one = cJSON_CreateObject();
        cJSON_AddItemToObject(one, "name", cJSON_Duplicate(
            cJSON_GetObjectItemCaseSensitive(fn, "name"), 1));
        cJSON_AddItemToObject(one, "arguments", cJSON_Duplicate(
            cJSON_GetObjectItemCaseSensitive(fn, "arguments"), 1));
        cJSON_AddItemToArray(arr, one);
    }
    cJSON_Delete(calls);
    j = cJSON_PrintUnformatted(wrap);
    cJSON_Delete(wrap);
    if (j == NULL) {
        return -1;
    }
    content = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (cJSON_IsString(content) && content->valuestring[0]) {
        n = strlen(content->valuestring) + strlen(j) + 3;
        text = malloc(n);
        if (text == NULL) {
            free(j);
            return -1;
        }
        snprintf(text, n, "%s\n\n%s", content->valuestring, j);
        free(j);
        j = text;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(m, "content");
    content = cJSON_AddStringToObject(m, "content", j);
    free(j);
    return content ? 0 : -1;
}


/* tool results, several in a row as one, as a user turn */
static int
generic_tool_result(cJSON *list, cJSON *prev_user, const cJSON *m)
{
    cJSON  *r, *inner, *u;
    char   *j, *text;
    size_t  n;

    r = cJSON_CreateObject();
    inner = cJSON_AddObjectToObject(r, "tool_response");
    cJSON_AddItemToObject(inner, "tool_call_id", cJSON_Duplicate(
        cJSON_GetObjectItemCaseSensitive(m, "tool_call_id"), 1));
    cJSON_AddItemToObject(inner, "content", cJSON_Duplicate(
        cJSON_GetObjectItemCaseSensitive(m, "content"), 1));
    j = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    if (j == NULL) {
        return -1;
    }
    if (prev_user != NULL) {
        u = cJSON_GetObjectItemCaseSensitive(prev_user, "content");
        n = strlen(u->valuestring) + strlen(j) + 2;
        text = malloc(n);
        if (text == NULL) {
            free(j);
            return -1;
        }
        snprintf(text, n, "%s\n%s", u->valuestring, j);
        free(j);
        cJSON_DeleteItemFromObjectCaseSensitive(prev_user, "content");
        u = cJSON_AddStringToObject(prev_user, "content", text);
        free(text);
        return u ? 0 : -1;
    }
    u = cJSON_CreateObject();
    if (u == NULL || !cJSON_AddStringToObject(u, "role", "user")
        || !cJSON_AddStringToObject(u, "content", j))
    {
        cJSON_Delete(u);
        free(j);
        return -1;
    }
    free(j);
    cJSON_AddItemToArray(list, u);
    return 0;
}


static int
generic_messages(const llm_api_request *req, cJSON *out, int inject)
{
    const cJSON  *m, *role;
    cJSON        *c, *last = NULL, *sys, *content;
    char         *prompt, *text;
    size_t        n;

    cJSON_ArrayForEach(m, req->messages) {
        role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (strcmp(role->valuestring, "tool") == 0) {
            if (generic_tool_result(out, last, m) != 0) {
                return -1;
            }
            last = cJSON_GetArrayItem(out, cJSON_GetArraySize(out) - 1);
            continue;
        }
        c = cJSON_Duplicate(m, 1);
        if (c == NULL || generic_past_calls(c) != 0) {
            cJSON_Delete(c);
            return -1;
        }
        cJSON_AddItemToArray(out, c);
        last = NULL;
    }
    if (!inject) {
        return 0;
    }

    prompt = llm_tools_system_prompt(req);
    if (prompt == NULL) {
        return -1;
    }
    sys = cJSON_GetArrayItem(out, 0);
    role = cJSON_GetObjectItemCaseSensitive(sys, "role");
    if (role && strcmp(role->valuestring, "system") == 0) {
        content = cJSON_GetObjectItemCaseSensitive(sys, "content");
        n = strlen(content->valuestring) + strlen(prompt) + 3;
        text = malloc(n);
        if (text == NULL) {
            free(prompt);
            return -1;
        }
        snprintf(text, n, "%s%s%s", content->valuestring,
                 content->valuestring[0] ? "\n\n" : "", prompt);
        cJSON_DeleteItemFromObjectCaseSensitive(sys, "content");
        content = cJSON_AddStringToObject(sys, "content", text);
        free(text);
    } else {
        sys = cJSON_CreateObject();
        content = sys ? cJSON_AddStringToObject(sys, "content", prompt)
                      : NULL;
        if (content && cJSON_AddStringToObject(sys, "role", "system")) {
            cJSON_InsertItemInArray(out, 0, sys);
        } else {
            cJSON_Delete(sys);
            content = NULL;
        }
    }
    free(prompt);
    return content ? 0 : -1;
}


int
llm_tools_template_input(const llm_api_request *req, int format,
    cJSON **messages, const cJSON **tools)
{
    int  active = req->tools != NULL
                  && req->tool_choice != LLM_TOOL_CHOICE_NONE;

    *tools = NULL;
    if (format != LLM_TOOL_FMT_GENERIC) {
        /* as vLLM: the tools even under "none" (templates such as
           Hermes 2 Pro's iterate them unconditionally); the reply is then
           not parsed */
        *messages = cJSON_Duplicate(req->messages, 1);
        *tools = req->tools;
        return *messages ? 0 : -1;
    }
    *messages = cJSON_CreateArray();
    if (*messages == NULL || generic_messages(req, *messages, active) != 0) {
        cJSON_Delete(*messages);
        *messages = NULL;
        return -1;
    }
    return 0;
}
