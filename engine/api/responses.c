/*
 * The Responses API as the chat path's request, and the reply as its
 * output items (api/responses.h). The translation builds a chat body with
 * cJSON and prints it: api/request.c checks every chat field again, so
 * what is checked here is only what has no chat counterpart (the item and
 * tool types, namespaces, custom tools, hosted tools).
 *
 * defines: llm_responses_parse, llm_responses_free, llm_responses_param,
 *          llm_responses_text, llm_responses_print, llm_responses_item_id,
 *          llm_responses_message_item,
 *          llm_responses_reasoning_item, llm_responses_call_item,
 *          llm_responses_usage, llm_responses_object,
 *          llm_responses_stored
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/responses.h"
#include "api/error.h"
#include "api/json_strict.h"
#include "text/utf8.h"

#define NAME_MAX_LEN  64        /* a function name (OpenAI's) */

/* tools run by OpenAI's servers: never offered to a local model */
static const char *const  hosted_types[] = {
    "web_search", "web_search_preview", "web_search_preview_2025_03_11",
    "file_search", "code_interpreter", "image_generation",
    "computer_use_preview", "computer_use", "mcp", "local_shell",
    "tool_search", NULL
};


static const char *
kind(const cJSON *v)
{
    if (cJSON_IsString(v)) {
        return "a string";
    }
    if (cJSON_IsNumber(v)) {
        return "a number";
    }
    if (cJSON_IsBool(v)) {
        return "a boolean";
    }
    if (cJSON_IsArray(v)) {
        return "an array";
    }
    return cJSON_IsObject(v) ? "an object" : "null";
}


static int
fail_type(llm_api_error *err, const char *param, const char *expected,
    const cJSON *v)
{
    return llm_api_fail(err, 400, "invalid_type", param,
                        "Invalid type for '%s': expected %s, but got %s "
                        "instead.", param, expected, kind(v));
}


static int
fail_unsupported(llm_api_error *err, const char *param, const char *value,
    const char *why)
{
    return llm_api_fail(err, 400, "unsupported_value", param,
                        "Unsupported value for '%s': '%.60s' %s", param,
                        value, why);
}


/* obj.name: a string (*out), absent (NULL, unless required) */
static int
get_string(const cJSON *obj, const char *name, const char *param,
    int required, const char **out, llm_api_error *err)
{
    cJSON  *v = llm_api_field(obj, name);

    *out = NULL;
    if (v == NULL) {
        return required ? llm_api_fail_missing(err, param) : 0;
    }
    if (!cJSON_IsString(v)) {
        return fail_type(err, param, "a string", v);
    }
    *out = v->valuestring;
    return 0;
}


static int
is_hosted(const char *type)
{
    int  i;

    for (i = 0; hosted_types[i]; i++) {
        if (strcmp(type, hosted_types[i]) == 0) {
            return 1;
        }
    }
    return 0;
}


/* ---------------------------------------------------------------------------
 * tools
 */

static llm_responses_tool *
find_tool(const llm_responses_req *rq, const char *ns, const char *tool)
{
    int  i;

    for (i = 0; i < rq->n_tools; i++) {
        if (strcmp(rq->tools[i].tool, tool) == 0
            && ((ns == NULL && rq->tools[i].ns == NULL)
                || (ns && rq->tools[i].ns && strcmp(rq->tools[i].ns, ns) == 0)))
        {
            return &rq->tools[i];
        }
    }
    return NULL;
}


static int
flat_taken(const llm_responses_req *rq, const char *name)
{
    int  i;

    for (i = 0; i < rq->n_tools; i++) {
        if (strcmp(rq->tools[i].name, name) == 0) {
            return 1;
        }
    }
    return 0;
}


/*
 * The name the model sees: the tool's own, or "<ns>__<tool>" (one "__"
 * when the namespace already ends in it, as Codex's "mcp__server__"),
 * bytes outside [A-Za-z0-9_-] as '_', cut to 64, and made unique with a
 * number when two flatten alike.
 */
static char *
flat_name(const llm_responses_req *rq, const char *ns, const char *tool)
{
    char    name[NAME_MAX_LEN + 1], *p;
    size_t  n, nl;
    int     k;

    if (ns == NULL) {
        snprintf(name, sizeof(name), "%s", tool);
    } else {
        nl = strlen(ns);
        snprintf(name, sizeof(name), "%s%s%s", ns,
                 (nl >= 2 && strcmp(ns + nl - 2, "__") == 0) ? "" : "__",
                 tool);
    }
    for (p = name; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
              || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
        {
            *p = '_';
        }
    }
    n = strlen(name);
    for (k = 2; flat_taken(rq, name) && k < 1000; k++) {
        if (n > NAME_MAX_LEN - 4) {
            n = NAME_MAX_LEN - 4;
        }
        snprintf(name + n, sizeof(name) - n, "_%d", k);
    }
    return strdup(name);
}


static int
add_tool(llm_responses_req *rq, const char *ns, const char *tool,
    int custom, llm_api_error *err)
{
    llm_responses_tool  *t;

    t = realloc(rq->tools, (rq->n_tools + 1) * sizeof(*t));
    if (t == NULL) {
        return llm_api_fail_oom(err);
    }
    rq->tools = t;
    t = &rq->tools[rq->n_tools];
    memset(t, 0, sizeof(*t));
    t->name = flat_name(rq, ns, tool);
    t->tool = strdup(tool);
    t->ns = ns ? strdup(ns) : NULL;
    t->custom = custom;
    rq->n_tools++;
    if (t->name == NULL || t->tool == NULL || (ns && t->ns == NULL)) {
        return llm_api_fail_oom(err);
    }
    return 0;
}


/* a function tool (in a namespace or not) as a chat tool */
static int
function_tool(llm_responses_req *rq, const cJSON *t, const char *ns,
    const char *param, cJSON *out, llm_api_error *err)
{
    cJSON        *fn, *ct, *strict, *params;
    const char   *name, *desc;
    char          p[96];

    snprintf(p, sizeof(p), "%s.name", param);
    if (get_string(t, "name", p, 1, &name, err) != 0) {
        return -1;
    }
    snprintf(p, sizeof(p), "%s.description", param);
    if (get_string(t, "description", p, 0, &desc, err) != 0) {
        return -1;
    }
    snprintf(p, sizeof(p), "%s.strict", param);
    strict = llm_api_field(t, "strict");
    if (strict != NULL && !cJSON_IsBool(strict)) {
        return fail_type(err, p, "a boolean", strict);
    }
    if (find_tool(rq, ns, name) != NULL) {
        snprintf(p, sizeof(p), "%s.name", param);
        return llm_api_fail(err, 400, "invalid_value", p,
                            "Invalid '%s': the tool name '%.64s' is used "
                            "twice.", p, name);
    }
    if (add_tool(rq, ns, name, 0, err) != 0) {
        return -1;
    }
    params = llm_api_field(t, "parameters");

    ct = cJSON_CreateObject();
    fn = cJSON_AddObjectToObject(ct, "function");
    if (ct == NULL || fn == NULL || !cJSON_AddItemToArray(out, ct)
        || cJSON_AddStringToObject(fn, "name",
                                   rq->tools[rq->n_tools - 1].name) == NULL
        || cJSON_AddStringToObject(ct, "type", "function") == NULL
        || (desc && cJSON_AddStringToObject(fn, "description", desc) == NULL)
        || (params && !cJSON_AddItemToObject(fn, "parameters",
                                    cJSON_Duplicate(params, 1)))
        || cJSON_AddBoolToObject(fn, "strict",
                                 strict ? cJSON_IsTrue(strict) : 1) == NULL)
    {
        return llm_api_fail_oom(err);
    }
    return 0;
}


/*
 * A custom (freeform) tool: a function of one string argument, "input".
 * Its format (a Lark or regex grammar) is not enforced: its definition
 * goes into the description, where the model reads it.
 */
static int
custom_tool(llm_responses_req *rq, const cJSON *t, const char *param,
    cJSON *out, llm_api_error *err)
{
    cJSON        *ct, *fn, *fmt, *params, *props, *input, *req;
    const char   *name, *desc, *def, *syntax;
    char          p[96], *d;
    size_t        n;

    snprintf(p, sizeof(p), "%s.name", param);
    if (get_string(t, "name", p, 1, &name, err) != 0) {
        return -1;
    }
    snprintf(p, sizeof(p), "%s.description", param);
    if (get_string(t, "description", p, 0, &desc, err) != 0) {
        return -1;
    }
    if (find_tool(rq, NULL, name) != NULL) {
        snprintf(p, sizeof(p), "%s.name", param);
        return llm_api_fail(err, 400, "invalid_value", p,
                            "Invalid '%s': the tool name '%.64s' is used "
                            "twice.", p, name);
    }
    def = NULL;
    syntax = NULL;
    fmt = llm_api_field(t, "format");
    if (fmt != NULL && cJSON_IsObject(fmt)) {
        def = cJSON_GetStringValue(llm_api_field(fmt, "definition"));
        syntax = cJSON_GetStringValue(llm_api_field(fmt, "syntax"));
    }
    if (add_tool(rq, NULL, name, 1, err) != 0) {
        return -1;
    }

    n = (desc ? strlen(desc) : 0) + (def ? strlen(def) : 0) + 128;
    d = malloc(n);
    if (d == NULL) {
        return llm_api_fail_oom(err);
    }
    snprintf(d, n, "%s%s%s%s%s", desc ? desc : "",
             def ? "\n\nThe input follows this " : "",
             def ? (syntax ? syntax : "") : "",
             def ? " grammar:\n" : "", def ? def : "");

    ct = cJSON_CreateObject();
    fn = cJSON_AddObjectToObject(ct, "function");
    params = cJSON_AddObjectToObject(fn, "parameters");
    props = cJSON_AddObjectToObject(params, "properties");
    input = cJSON_AddObjectToObject(props, "input");
    req = cJSON_AddArrayToObject(params, "required");
    if (ct == NULL || fn == NULL || params == NULL || props == NULL
        || input == NULL || req == NULL || !cJSON_AddItemToArray(out, ct)
        || cJSON_AddStringToObject(ct, "type", "function") == NULL
        || cJSON_AddStringToObject(fn, "name",
                                   rq->tools[rq->n_tools - 1].name) == NULL
        || cJSON_AddStringToObject(fn, "description", d) == NULL
        || cJSON_AddStringToObject(params, "type", "object") == NULL
        || cJSON_AddStringToObject(input, "type", "string") == NULL
        || !cJSON_AddItemToArray(req, cJSON_CreateString("input"))
        || cJSON_AddFalseToObject(params, "additionalProperties") == NULL)
    {
        free(d);
        return llm_api_fail_oom(err);
    }
    free(d);
    return 0;
}


static int
namespace_tool(llm_responses_req *rq, const cJSON *t, const char *param,
    cJSON *out, llm_api_error *err)
{
    cJSON        *tools, *u, *type;
    const char   *ns;
    char          p[96];
    int           j = 0;

    snprintf(p, sizeof(p), "%s.name", param);
    if (get_string(t, "name", p, 1, &ns, err) != 0) {
        return -1;
    }
    snprintf(p, sizeof(p), "%s.tools", param);
    tools = llm_api_field(t, "tools");
    if (tools == NULL) {
        return llm_api_fail_missing(err, p);
    }
    if (!cJSON_IsArray(tools)) {
        return fail_type(err, p, "an array", tools);
    }
    cJSON_ArrayForEach(u, tools) {
        snprintf(p, sizeof(p), "%s.tools[%d]", param, j);
        if (!cJSON_IsObject(u)) {
            return fail_type(err, p, "an object", u);
        }
        type = llm_api_field(u, "type");
        if (type && !(cJSON_IsString(type)
                      && strcmp(type->valuestring, "function") == 0))
        {
            snprintf(p, sizeof(p), "%s.tools[%d].type", param, j);
            return fail_unsupported(err, p, cJSON_IsString(type)
                                            ? type->valuestring : "?",
                                    "is not supported in a namespace; "
                                    "only 'function' is.");
        }
        if (function_tool(rq, u, ns, p, out, err) != 0) {
            return -1;
        }
        j++;
    }
    return 0;
}


static void
note_hosted(llm_responses_req *rq, const char *type)
{
    size_t  n = strlen(rq->hosted);

    if (strstr(rq->hosted, type) != NULL) {
        return;
    }
    snprintf(rq->hosted + n, sizeof(rq->hosted) - n, "%s%s",
             n ? ", " : "", type);
}


/* tools into chat's, the echo's tools without the hosted ones */
static int
parse_tools(llm_responses_req *rq, const cJSON *root, int strict_tools,
    cJSON *chat, llm_api_error *err)
{
    cJSON        *tools, *t, *type, *out, *echo;
    char          p[64];
    int           i = 0, rc;
    const char   *ty;

    tools = llm_api_field(root, "tools");
    if (tools == NULL) {
        return 0;
    }
    if (!cJSON_IsArray(tools)) {
        return fail_type(err, "tools", "an array", tools);
    }
    out = cJSON_AddArrayToObject(chat, "tools");
    echo = cJSON_AddArrayToObject(rq->echo, "tools");
    if (out == NULL || echo == NULL) {
        return llm_api_fail_oom(err);
    }

    cJSON_ArrayForEach(t, tools) {
        snprintf(p, sizeof(p), "tools[%d]", i);
        if (!cJSON_IsObject(t)) {
            return fail_type(err, p, "an object", t);
        }
        snprintf(p, sizeof(p), "tools[%d].type", i);
        type = llm_api_field(t, "type");
        if (type == NULL) {
            return llm_api_fail_missing(err, p);
        }
        if (!cJSON_IsString(type)) {
            return fail_type(err, p, "a string", type);
        }
        ty = type->valuestring;
        snprintf(p, sizeof(p), "tools[%d]", i);

        if (strcmp(ty, "function") == 0) {
            rc = function_tool(rq, t, NULL, p, out, err);
        } else if (strcmp(ty, "custom") == 0) {
            rc = custom_tool(rq, t, p, out, err);
        } else if (strcmp(ty, "namespace") == 0) {
            rc = namespace_tool(rq, t, p, out, err);
        } else if (is_hosted(ty)) {
            if (strict_tools) {
                snprintf(p, sizeof(p), "tools[%d].type", i);
                return llm_api_fail(err, 400, "unsupported_value", p,
                                    "Unsupported value for '%s': '%s' is a "
                                    "hosted tool, which this server does "
                                    "not run (llm_responses_strict_tools "
                                    "is on).", p, ty);
            }
            note_hosted(rq, ty);
            i++;
            continue;
        } else {
            snprintf(p, sizeof(p), "tools[%d].type", i);
            return fail_unsupported(err, p, ty, "is not a tool type this "
                                    "server knows: 'function', 'custom', "
                                    "'namespace' or a hosted tool.");
        }
        if (rc != 0) {
            return -1;
        }
        if (!cJSON_AddItemToArray(echo, cJSON_Duplicate(t, 1))) {
            return llm_api_fail_oom(err);
        }
        i++;
    }

    if (cJSON_GetArraySize(out) == 0) {
        cJSON_DeleteItemFromObject(chat, "tools");
    }
    return 0;
}


/* "auto", "none", "required", {"type": "function"|"custom", "name"} */
static int
parse_tool_choice(llm_responses_req *rq, const cJSON *root, cJSON *chat,
    llm_api_error *err)
{
    cJSON               *tc, *o, *fn;
    const char          *type, *name, *ns;
    llm_responses_tool  *t;

    tc = llm_api_field(root, "tool_choice");
    if (tc == NULL) {
        return 0;
    }
    if (!cJSON_AddItemToObject(rq->echo, "tool_choice",
                               cJSON_Duplicate(tc, 1)))
    {
        return llm_api_fail_oom(err);
    }
    if (cJSON_IsString(tc)) {
        if (cJSON_GetObjectItemCaseSensitive(chat, "tools") == NULL) {
            return 0;   /* only hosted tools, all dropped: nothing to call */
        }
        return cJSON_AddItemToObject(chat, "tool_choice",
                                     cJSON_Duplicate(tc, 1))
               ? 0 : llm_api_fail_oom(err);
    }
    if (!cJSON_IsObject(tc)) {
        return fail_type(err, "tool_choice", "a string or an object", tc);
    }
    if (get_string(tc, "type", "tool_choice.type", 1, &type, err) != 0) {
        return -1;
    }
    if (strcmp(type, "function") != 0 && strcmp(type, "custom") != 0) {
        return fail_unsupported(err, "tool_choice.type", type,
                                "is not supported: use 'auto', 'none', "
                                "'required' or a function or custom tool.");
    }
    if (get_string(tc, "name", "tool_choice.name", 1, &name, err) != 0
        || get_string(tc, "namespace", "tool_choice.namespace", 0, &ns, err)
           != 0)
    {
        return -1;
    }
    t = find_tool(rq, ns, name);
    if (t == NULL) {
        return llm_api_fail(err, 400, "invalid_value", "tool_choice.name",
                            "Invalid 'tool_choice.name': no tool named "
                            "'%.64s' in tools.", name);
    }
    o = cJSON_AddObjectToObject(chat, "tool_choice");
    fn = cJSON_AddObjectToObject(o, "function");
    if (o == NULL || fn == NULL
        || cJSON_AddStringToObject(o, "type", "function") == NULL
        || cJSON_AddStringToObject(fn, "name", t->name) == NULL)
    {
        return llm_api_fail_oom(err);
    }
    return 0;
}


/* ---------------------------------------------------------------------------
 * input items
 */

/* a string, or text parts joined with "\n" (images and files refused) */
static int
item_text(const cJSON *c, const char *param, char **out, llm_api_error *err)
{
    cJSON        *part, *type, *text;
    char          p[96], *s;
    size_t        n = 0, l;
    int           j = 0;

    *out = NULL;
    if (cJSON_IsString(c)) {
        *out = strdup(c->valuestring);
        return *out ? 0 : llm_api_fail_oom(err);
    }
    if (!cJSON_IsArray(c)) {
        return fail_type(err, param, "a string or an array", c);
    }
    cJSON_ArrayForEach(part, c) {
        snprintf(p, sizeof(p), "%s[%d]", param, j);
        if (!cJSON_IsObject(part)) {
            return fail_type(err, p, "an object", part);
        }
        snprintf(p, sizeof(p), "%s[%d].type", param, j);
        type = llm_api_field(part, "type");
        if (!cJSON_IsString(type)) {
            return type ? fail_type(err, p, "a string", type)
                        : llm_api_fail_missing(err, p);
        }
        if (strcmp(type->valuestring, "input_text") == 0
            || strcmp(type->valuestring, "output_text") == 0
            || strcmp(type->valuestring, "text") == 0
            || strcmp(type->valuestring, "summary_text") == 0)
        {
            text = llm_api_field(part, "text");
        } else if (strcmp(type->valuestring, "refusal") == 0) {
            text = llm_api_field(part, "refusal");
        } else {
            return fail_unsupported(err, p, type->valuestring,
                                    "is not supported: this model reads "
                                    "text only.");
        }
        snprintf(p, sizeof(p), "%s[%d].text", param, j);
        if (!cJSON_IsString(text)) {
            return text ? fail_type(err, p, "a string", text)
                        : llm_api_fail_missing(err, p);
        }
        l = strlen(text->valuestring);
        s = realloc(*out, n + l + 2);
        if (s == NULL) {
            return llm_api_fail_oom(err);
        }
        if (n) {
            s[n++] = '\n';
        }
        memcpy(s + n, text->valuestring, l + 1);
        n += l;
        *out = s;
        j++;
    }
    if (*out == NULL) {
        *out = strdup("");
    }
    return *out ? 0 : llm_api_fail_oom(err);
}


static cJSON *
add_message(cJSON *msgs, const char *role, char *content)
{
    cJSON  *m;

    m = cJSON_CreateObject();
    if (m == NULL || !cJSON_AddItemToArray(msgs, m)
        || cJSON_AddStringToObject(m, "role", role) == NULL
        || cJSON_AddStringToObject(m, "content", content) == NULL)
    {
        return NULL;
    }
    return m;
}


static int
message_item(const cJSON *it, const char *param, cJSON *msgs,
    llm_api_error *err)
{
    const char  *role;
    char         p[96], *text;
    cJSON       *c, *m;

    snprintf(p, sizeof(p), "%s.role", param);
    if (get_string(it, "role", p, 1, &role, err) != 0) {
        return -1;
    }
    if (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0
        && strcmp(role, "system") != 0 && strcmp(role, "developer") != 0)
    {
        return fail_unsupported(err, p, role, "is not a role: 'user', "
                                "'assistant', 'system' or 'developer'.");
    }
    snprintf(p, sizeof(p), "%s.content", param);
    c = llm_api_field(it, "content");
    if (c == NULL) {
        return llm_api_fail_missing(err, p);
    }
    if (item_text(c, p, &text, err) != 0) {
        free(text);
        return -1;
    }
    m = add_message(msgs, strcmp(role, "developer") == 0 ? "system" : role,
                    text);
    free(text);
    return m ? 0 : llm_api_fail_oom(err);
}


/* the assistant turn a call joins: the last message when it is one */
static cJSON *
assistant_turn(cJSON *msgs)
{
    cJSON  *last = cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1);
    cJSON  *role = cJSON_GetObjectItemCaseSensitive(last, "role");

    if (last && cJSON_IsString(role)
        && strcmp(role->valuestring, "assistant") == 0)
    {
        return last;
    }
    return add_message(msgs, "assistant", "");
}


static int
call_item(llm_responses_req *rq, const cJSON *it, int custom,
    const char *param, cJSON *msgs, llm_api_error *err)
{
    const char          *call_id, *name, *ns, *args;
    char                 p[96], *wrapped = NULL;
    cJSON               *turn, *calls, *call, *fn, *o;
    llm_responses_tool  *t;

    snprintf(p, sizeof(p), "%s.call_id", param);
    if (get_string(it, "call_id", p, 1, &call_id, err) != 0) {
        return -1;
    }
    snprintf(p, sizeof(p), "%s.name", param);
    if (get_string(it, "name", p, 1, &name, err) != 0) {
        return -1;
    }
    snprintf(p, sizeof(p), "%s.namespace", param);
    if (get_string(it, "namespace", p, 0, &ns, err) != 0) {
        return -1;
    }
    snprintf(p, sizeof(p), "%s.%s", param, custom ? "input" : "arguments");
    if (get_string(it, custom ? "input" : "arguments", p, 1, &args, err)
        != 0)
    {
        return -1;
    }
    if (custom) {
        o = cJSON_CreateObject();
        if (o == NULL || cJSON_AddStringToObject(o, "input", args) == NULL
            || (wrapped = cJSON_PrintUnformatted(o)) == NULL)
        {
            cJSON_Delete(o);
            return llm_api_fail_oom(err);
        }
        cJSON_Delete(o);
        args = wrapped;
    }

    /* a call of a tool no longer offered keeps a name of the same rule */
    t = find_tool(rq, ns, name);

    turn = assistant_turn(msgs);
    calls = turn ? cJSON_GetObjectItemCaseSensitive(turn, "tool_calls")
                 : NULL;
    if (turn && calls == NULL) {
        calls = cJSON_AddArrayToObject(turn, "tool_calls");
    }
    call = cJSON_CreateObject();
    fn = cJSON_AddObjectToObject(call, "function");
    if (calls == NULL || call == NULL || fn == NULL
        || !cJSON_AddItemToArray(calls, call)
        || cJSON_AddStringToObject(call, "id", call_id) == NULL
        || cJSON_AddStringToObject(call, "type", "function") == NULL
        || cJSON_AddStringToObject(fn, "arguments", args) == NULL)
    {
        cJSON_free(wrapped);
        return llm_api_fail_oom(err);
    }
    cJSON_free(wrapped);

    if (t != NULL) {
        return cJSON_AddStringToObject(fn, "name", t->name)
               ? 0 : llm_api_fail_oom(err);
    }
    {
        char  *flat = flat_name(rq, ns, name);
        cJSON *v = flat ? cJSON_AddStringToObject(fn, "name", flat) : NULL;

        free(flat);
        return v ? 0 : llm_api_fail_oom(err);
    }
}


static int
output_item(const cJSON *it, const char *param, cJSON *msgs,
    llm_api_error *err)
{
    const char  *call_id;
    char         p[96], *text;
    cJSON       *out, *m;

    snprintf(p, sizeof(p), "%s.call_id", param);
    if (get_string(it, "call_id", p, 1, &call_id, err) != 0) {
        return -1;
    }
    snprintf(p, sizeof(p), "%s.output", param);
    out = llm_api_field(it, "output");
    if (out == NULL) {
        return llm_api_fail_missing(err, p);
    }
    if (item_text(out, p, &text, err) != 0) {
        free(text);
        return -1;
    }
    m = add_message(msgs, "tool", text);
    free(text);
    if (m == NULL || cJSON_AddStringToObject(m, "tool_call_id", call_id)
                     == NULL)
    {
        return llm_api_fail_oom(err);
    }
    return 0;
}


static int parse_items(llm_responses_req *rq, const cJSON *input,
    cJSON *msgs, llm_api_error *err);


/* instructions first, then the stored conversation (prev), then input: a
   string (one user turn) or items; rq->items keeps prev's and input's */
static int
parse_input(llm_responses_req *rq, const cJSON *root, const cJSON *prev,
    cJSON *chat, llm_api_error *err)
{
    cJSON        *input, *msgs, *m;
    const char   *instr;

    if (get_string(root, "instructions", "instructions", 0, &instr, err)
        != 0)
    {
        return -1;
    }
    msgs = cJSON_AddArrayToObject(chat, "messages");
    if (msgs == NULL
        || (instr && add_message(msgs, "system", (char *) instr) == NULL))
    {
        return llm_api_fail_oom(err);
    }

    rq->items = prev ? cJSON_Duplicate(prev, 1) : cJSON_CreateArray();
    if (rq->items == NULL) {
        return llm_api_fail_oom(err);
    }
    if (prev && parse_items(rq, prev, msgs, err) != 0) {
        /* the store's own text: a fault in it is ours */
        err->status = 500;
        return -1;
    }

    input = llm_api_field(root, "input");
    if (input == NULL) {
        return llm_api_fail_missing(err, "input");
    }
    if (cJSON_IsString(input)) {
        m = cJSON_CreateObject();
        if (m == NULL || !cJSON_AddItemToArray(rq->items, m)
            || cJSON_AddStringToObject(m, "role", "user") == NULL
            || cJSON_AddStringToObject(m, "content", input->valuestring)
               == NULL)
        {
            return llm_api_fail_oom(err);
        }
        return add_message(msgs, "user", input->valuestring)
               ? 0 : llm_api_fail_oom(err);
    }
    if (!cJSON_IsArray(input)) {
        return fail_type(err, "input", "a string or an array", input);
    }
    if (parse_items(rq, input, msgs, err) != 0) {
        return -1;
    }
    if (prev) {
        for (m = input->child; m; m = m->next) {
            if (!cJSON_AddItemToArray(rq->items, cJSON_Duplicate(m, 1))) {
                return llm_api_fail_oom(err);
            }
        }
    } else {
        cJSON_Delete(rq->items);
        rq->items = cJSON_Duplicate(input, 1);
        if (rq->items == NULL) {
            return llm_api_fail_oom(err);
        }
    }
    return 0;
}


static int
parse_items(llm_responses_req *rq, const cJSON *input, cJSON *msgs,
    llm_api_error *err)
{
    cJSON        *it, *type;
    const char   *ty;
    char          p[64];
    int           i = 0, rc;

    cJSON_ArrayForEach(it, input) {
        snprintf(p, sizeof(p), "input[%d]", i);
        if (!cJSON_IsObject(it)) {
            return fail_type(err, p, "an object", it);
        }
        type = llm_api_field(it, "type");
        if (type != NULL && !cJSON_IsString(type)) {
            snprintf(p, sizeof(p), "input[%d].type", i);
            return fail_type(err, p, "a string", type);
        }
        ty = type ? type->valuestring : "message";

        if (strcmp(ty, "message") == 0) {
            rc = message_item(it, p, msgs, err);
        } else if (strcmp(ty, "function_call") == 0) {
            rc = call_item(rq, it, 0, p, msgs, err);
        } else if (strcmp(ty, "custom_tool_call") == 0) {
            rc = call_item(rq, it, 1, p, msgs, err);
        } else if (strcmp(ty, "function_call_output") == 0
                   || strcmp(ty, "custom_tool_call_output") == 0)
        {
            rc = output_item(it, p, msgs, err);
        } else if (strcmp(ty, "reasoning") == 0) {
            rc = 0;     /* the model's own thinking: not rendered again,
                           encrypted_content with it */
        } else {
            snprintf(p, sizeof(p), "input[%d].type", i);
            return fail_unsupported(err, p, ty, "is not an input item this "
                                    "server takes: 'message', "
                                    "'function_call', "
                                    "'function_call_output', "
                                    "'custom_tool_call', "
                                    "'custom_tool_call_output' or "
                                    "'reasoning'.");
        }
        if (rc != 0) {
            return -1;
        }
        i++;
    }
    return 0;
}


/* ---------------------------------------------------------------------------
 * the other fields
 */

/* text.format: {type: text | json_object | json_schema, name, schema,
   strict} as chat's response_format */
static int
parse_text(llm_responses_req *rq, const cJSON *root, cJSON *chat,
    llm_api_error *err)
{
    cJSON        *text, *fmt, *rf, *js, *v;
    const char   *type;

    text = llm_api_field(root, "text");
    if (text == NULL) {
        return 0;
    }
    if (!cJSON_IsObject(text)) {
        return fail_type(err, "text", "an object", text);
    }
    if (!cJSON_AddItemToObject(rq->echo, "text", cJSON_Duplicate(text, 1))) {
        return llm_api_fail_oom(err);
    }
    fmt = llm_api_field(text, "format");
    if (fmt == NULL) {
        return 0;
    }
    if (!cJSON_IsObject(fmt)) {
        return fail_type(err, "text.format", "an object", fmt);
    }
    if (get_string(fmt, "type", "text.format.type", 1, &type, err) != 0) {
        return -1;
    }
    if (strcmp(type, "text") == 0) {
        return 0;
    }
    rf = cJSON_AddObjectToObject(chat, "response_format");
    if (rf == NULL || cJSON_AddStringToObject(rf, "type", type) == NULL) {
        return llm_api_fail_oom(err);
    }
    if (strcmp(type, "json_schema") != 0) {
        return 0;       /* json_object, or refused by the chat parser */
    }
    js = cJSON_AddObjectToObject(rf, "json_schema");
    if (js == NULL) {
        return llm_api_fail_oom(err);
    }
    for (v = fmt->child; v; v = v->next) {
        if (strcmp(v->string, "type") != 0
            && !cJSON_AddItemToObject(js, v->string, cJSON_Duplicate(v, 1)))
        {
            return llm_api_fail_oom(err);
        }
    }
    return 0;
}


/* fields the chat body takes as they are, or renamed */
static int
copy_fields(llm_responses_req *rq, const cJSON *root, cJSON *chat,
    llm_api_error *err)
{
    static const char *const  same[] = {
        "model", "temperature", "top_p", "user", "parallel_tool_calls",
        "top_k", "min_p", "seed", "stop", "stream", "ignore_eos", NULL
    };
    static const char *const  echoed[] = {
        "instructions", "max_output_tokens", "metadata",
        "parallel_tool_calls", "previous_response_id", "reasoning",
        "temperature", "top_p", "user", "prompt_cache_key",
        "safety_identifier", "service_tier", "truncation", NULL
    };
    cJSON  *v;
    int     i;

    for (i = 0; same[i]; i++) {
        v = llm_api_field(root, same[i]);
        if (v && !cJSON_AddItemToObject(chat, same[i],
                                        cJSON_Duplicate(v, 1)))
        {
            return llm_api_fail_oom(err);
        }
    }
    v = llm_api_field(root, "max_output_tokens");
    if (v && !cJSON_AddItemToObject(chat, "max_tokens",
                                    cJSON_Duplicate(v, 1)))
    {
        return llm_api_fail_oom(err);
    }
    for (i = 0; echoed[i]; i++) {
        v = llm_api_field(root, echoed[i]);
        if (v && !cJSON_AddItemToObject(rq->echo, echoed[i],
                                        cJSON_Duplicate(v, 1)))
        {
            return llm_api_fail_oom(err);
        }
    }
    return 0;
}


/*
 * reasoning.effort: most templates switch thinking on or off (Qwen3's
 * enable_thinking), not by degree, so "none" and "minimal" turn it off and
 * "low", "medium", "high" on; the effort itself goes to the chat request
 * as reasoning_effort, which a template that reads it (gpt-oss's) writes
 */
static int
parse_reasoning(llm_responses_req *rq, const cJSON *root, cJSON *chat,
    llm_api_error *err)
{
    static const char *const  off[] = { "none", "minimal", NULL };
    static const char *const  on[] = { "low", "medium", "high", NULL };
    const cJSON              *r, *e;
    int                       i;

    rq->thinking = -1;
    r = llm_api_field(root, "reasoning");
    if (r == NULL || cJSON_IsNull(r)) {
        return 0;
    }
    if (!cJSON_IsObject(r)) {
        return fail_type(err, "reasoning", "an object", r);
    }
    e = llm_api_field(r, "effort");
    if (e == NULL || cJSON_IsNull(e)) {
        return 0;
    }
    if (!cJSON_IsString(e)) {
        return fail_type(err, "reasoning.effort", "a string", e);
    }
    for (i = 0; off[i]; i++) {
        if (strcmp(e->valuestring, off[i]) == 0) {
            rq->thinking = 0;
        }
    }
    for (i = 0; on[i]; i++) {
        if (strcmp(e->valuestring, on[i]) == 0) {
            rq->thinking = 1;
        }
    }
    if (rq->thinking >= 0) {
        return cJSON_AddStringToObject(chat, "reasoning_effort",
                                       e->valuestring)
               ? 0 : llm_api_fail_oom(err);
    }
    return llm_api_fail(err, 400, "invalid_value", "reasoning.effort",
                        "Invalid value: '%.32s'. Supported values are: "
                        "'none', 'minimal', 'low', 'medium' and 'high'.",
                        e->valuestring);
}


/* what we do not do, refused rather than answered otherwise */
static int
parse_refused(llm_responses_req *rq, const cJSON *root, llm_api_error *err)
{
    cJSON        *v;
    const char   *s;

    v = llm_api_field(root, "background");
    if (v && !cJSON_IsBool(v)) {
        return fail_type(err, "background", "a boolean", v);
    }
    if (cJSON_IsTrue(v)) {
        return fail_unsupported(err, "background", "true",
                                "is not supported: responses run in the "
                                "request.");
    }
    if (llm_api_field(root, "conversation") != NULL) {
        return llm_api_fail(err, 400, "unsupported_parameter",
                            "conversation", "Unsupported parameter: "
                            "'conversation' is not supported; resend the "
                            "history or use previous_response_id.");
    }
    if (llm_api_field(root, "prompt") != NULL) {
        return llm_api_fail(err, 400, "unsupported_parameter", "prompt",
                            "Unsupported parameter: 'prompt' (stored "
                            "prompt templates) is not supported.");
    }
    if (get_string(root, "previous_response_id", "previous_response_id", 0,
                   &s, err) != 0)
    {
        return -1;
    }
    if (s != NULL && (rq->previous_id = strdup(s)) == NULL) {
        return llm_api_fail_oom(err);
    }
    v = llm_api_field(root, "stream");
    if (v && !cJSON_IsBool(v)) {
        return fail_type(err, "stream", "a boolean", v);
    }
    rq->stream = cJSON_IsTrue(v);
    v = llm_api_field(root, "store");
    if (v && !cJSON_IsBool(v)) {
        return fail_type(err, "store", "a boolean", v);
    }
    rq->store = v ? cJSON_IsTrue(v) : 1;
    v = llm_api_field(root, "include");
    if (v && !cJSON_IsArray(v)) {
        return fail_type(err, "include", "an array", v);
    }
    v = llm_api_field(root, "metadata");
    if (v && !cJSON_IsObject(v)) {
        return fail_type(err, "metadata", "an object", v);
    }
    return 0;
}


int
llm_responses_parse(llm_responses_req *rq, const char *body, size_t len,
    const llm_api_limits *lim, int strict_tools, const char *prev,
    size_t prev_len, llm_api_error *err)
{
    cJSON            *root, *chat, *stored = NULL;
    llm_json_result   res;
    int               rc;

    memset(rq, 0, sizeof(*rq));
    memset(err, 0, sizeof(*err));

    if (lim->max_body > 0 && len > lim->max_body) {
        return llm_api_fail(err, 413, "request_too_large", "",
                            "The request body is %zu bytes, more than the "
                            "limit of %zu bytes.", len, lim->max_body);
    }
    if (llm_json_check(body, len, lim->max_depth, lim->max_values,
                       LLM_JSON_NO_NUL, &res) != LLM_JSON_OK)
    {
        return llm_api_fail(err, 400, "invalid_json", "",
                            "We could not parse the JSON body of your "
                            "request: it is not valid JSON near byte %zu.",
                            res.offset);
    }
    root = cJSON_ParseWithLength(body, len);
    if (root == NULL) {
        return llm_api_fail_oom(err);
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return llm_api_fail(err, 400, "invalid_type", "",
                            "Invalid type for the request body: expected an "
                            "object, but got %s instead.", kind(root));
    }

    chat = cJSON_CreateObject();
    rq->echo = cJSON_CreateObject();
    rc = (chat && rq->echo) ? 0 : llm_api_fail_oom(err);

    if (rc == 0) {
        rc = parse_refused(rq, root, err);
    }
    if (rc == 0) {
        rc = copy_fields(rq, root, chat, err);
    }
    if (rc == 0) {
        rc = parse_reasoning(rq, root, chat, err);
    }
    if (rc == 0) {
        rc = parse_tools(rq, root, strict_tools, chat, err);
    }
    if (rc == 0) {
        rc = parse_tool_choice(rq, root, chat, err);
    }
    if (rc == 0 && prev != NULL) {
        stored = cJSON_ParseWithLength(prev, prev_len);
        if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(stored,
                                                            "conversation")))
        {
            rc = llm_api_fail(err, 500, "server_error", "",
                              "The stored response is unreadable.");
        }
    }
    if (rc == 0) {
        rc = parse_input(rq, root,
                         stored ? cJSON_GetObjectItemCaseSensitive(stored,
                                                          "conversation")
                                : NULL, chat, err);
    }
    if (rc == 0) {
        rc = parse_text(rq, root, chat, err);
    }
    if (rc == 0) {
        rq->chat = cJSON_PrintUnformatted(chat);
        if (rq->chat == NULL) {
            rc = llm_api_fail_oom(err);
        } else {
            rq->chat_len = strlen(rq->chat);
        }
    }

    cJSON_Delete(stored);
    cJSON_Delete(chat);
    cJSON_Delete(root);
    return rc;
}


void
llm_responses_free(llm_responses_req *rq)
{
    int  i;

    for (i = 0; i < rq->n_tools; i++) {
        free(rq->tools[i].name);
        free(rq->tools[i].tool);
        free(rq->tools[i].ns);
    }
    free(rq->tools);
    cJSON_free(rq->chat);
    cJSON_Delete(rq->echo);
    cJSON_Delete(rq->items);
    free(rq->previous_id);
    memset(rq, 0, sizeof(*rq));
}


void
llm_responses_param(char *param, size_t size)
{
    static const struct {
        const char  *chat;
        const char  *resp;
    } map[] = {
        { "max_tokens", "max_output_tokens" },
        { "response_format.json_schema", "text.format" },
        { "response_format", "text.format" },
        { "messages", "input" },
        { "tool_choice.function", "tool_choice" },
        { NULL, NULL }
    };
    char    buf[128];
    size_t  n;
    int     i;

    for (i = 0; map[i].chat; i++) {
        n = strlen(map[i].chat);
        if (strncmp(param, map[i].chat, n) == 0
            && (param[n] == '\0' || param[n] == '.' || param[n] == '['))
        {
            /* messages[i] do not count as input[i]: name the field */
            snprintf(buf, sizeof(buf), "%s%s", map[i].resp,
                     strcmp(map[i].chat, "messages") == 0 ? "" : param + n);
            snprintf(param, size, "%s", buf);
            return;
        }
    }
}


/* ---------------------------------------------------------------------------
 * output items and the response object
 */

/* text as a C string of valid UTF-8: a byte that starts no valid
   sequence (a token cut a character) becomes U+FFFD, NUL is dropped */
char *
llm_responses_text(const char *s, size_t len)
{
    char    *out, *p;
    size_t   n;

    out = malloc(3 * len + 1);
    if (out == NULL) {
        return NULL;
    }
    p = out;
    while (len) {
        n = llm_utf8_len((const unsigned char *) s, len);
        if (n == 0) {
            p += llm_utf8_encode(0xFFFD, p);
            n = 1;
        } else if (s[0] != '\0') {
            memcpy(p, s, n);
            p += n;
        }
        s += n;
        len -= n;
    }
    *p = '\0';
    return out;
}


/* cJSON writes a string's bytes as they are, and decodes a lone
   surrogate escape of a model's arguments into bytes no UTF-8 has */
char *
llm_responses_print(const cJSON *o)
{
    char  *json, *text;

    json = cJSON_PrintUnformatted(o);
    if (json == NULL) {
        return NULL;
    }
    text = llm_responses_text(json, strlen(json));
    cJSON_free(json);
    return text;
}


void
llm_responses_item_id(char *out, size_t size, const char *prefix,
    const char *resp_id, int n)
{
    const char  *tail = strchr(resp_id, '_');

    snprintf(out, size, "%s_%s%02d", prefix, tail ? tail + 1 : resp_id, n);
}


cJSON *
llm_responses_message_item(const char *id, const char *text, size_t len,
    const char *status)
{
    cJSON  *m, *content, *part;
    char   *t;

    t = llm_responses_text(text, len);
    m = cJSON_CreateObject();
    content = cJSON_CreateArray();
    part = cJSON_CreateObject();
    if (t == NULL || m == NULL || content == NULL || part == NULL) {
        goto oom;
    }
    if (cJSON_AddStringToObject(m, "id", id) == NULL
        || cJSON_AddStringToObject(m, "type", "message") == NULL
        || cJSON_AddStringToObject(m, "status", status) == NULL
        || cJSON_AddStringToObject(m, "role", "assistant") == NULL
        || cJSON_AddStringToObject(part, "type", "output_text") == NULL
        || cJSON_AddStringToObject(part, "text", t) == NULL
        || cJSON_AddArrayToObject(part, "annotations") == NULL
        || cJSON_AddArrayToObject(part, "logprobs") == NULL)
    {
        goto oom;
    }
    free(t);
    cJSON_AddItemToArray(content, part);
    cJSON_AddItemToObject(m, "content", content);
    return m;

oom:
    free(t);
    cJSON_Delete(m);
    cJSON_Delete(content);
    cJSON_Delete(part);
    return NULL;
}


cJSON *
llm_responses_reasoning_item(const char *id, const char *text, size_t len)
{
    cJSON  *m, *content, *part;
    char   *t;

    t = llm_responses_text(text, len);
    m = cJSON_CreateObject();
    part = cJSON_CreateObject();
    if (t == NULL || m == NULL || part == NULL) {
        goto oom;
    }
    if (cJSON_AddStringToObject(m, "id", id) == NULL
        || cJSON_AddStringToObject(m, "type", "reasoning") == NULL
        || cJSON_AddArrayToObject(m, "summary") == NULL
        || (content = cJSON_AddArrayToObject(m, "content")) == NULL
        || cJSON_AddStringToObject(part, "type", "reasoning_text") == NULL
        || cJSON_AddStringToObject(part, "text", t) == NULL
        || !cJSON_AddItemToArray(content, part))
    {
        goto oom;
    }
    free(t);
    return m;

oom:
    free(t);
    cJSON_Delete(m);
    cJSON_Delete(part);
    return NULL;
}


/* a call of the model's as the client's tool: a namespace's function, a
   custom tool's input, or a plain function call */
cJSON *
llm_responses_call_item(const llm_responses_req *rq, const char *id,
    const llm_tool_call *call, const char *status)
{
    int                  i;
    cJSON               *m, *args, *input;
    const char          *in;
    llm_responses_tool  *t = NULL;

    for (i = 0; i < rq->n_tools; i++) {
        if (strcmp(rq->tools[i].name, call->name) == 0) {
            t = &rq->tools[i];
            break;
        }
    }
    m = cJSON_CreateObject();
    if (m == NULL || cJSON_AddStringToObject(m, "id", id) == NULL) {
        cJSON_Delete(m);
        return NULL;
    }

    if (t && t->custom) {
        args = cJSON_Parse(call->arguments);
        input = cJSON_GetObjectItemCaseSensitive(args, "input");
        in = cJSON_IsString(input) ? input->valuestring : call->arguments;
        if (cJSON_AddStringToObject(m, "type", "custom_tool_call") == NULL
            || cJSON_AddStringToObject(m, "status", status) == NULL
            || cJSON_AddStringToObject(m, "call_id", call->id) == NULL
            || cJSON_AddStringToObject(m, "name", t->tool) == NULL
            || cJSON_AddStringToObject(m, "input", in) == NULL)
        {
            cJSON_Delete(args);
            cJSON_Delete(m);
            return NULL;
        }
        cJSON_Delete(args);
        return m;
    }

    if (cJSON_AddStringToObject(m, "type", "function_call") == NULL
        || cJSON_AddStringToObject(m, "status", status) == NULL
        || cJSON_AddStringToObject(m, "call_id", call->id) == NULL
        || cJSON_AddStringToObject(m, "name", t ? t->tool : call->name)
           == NULL
        || (t && t->ns
            && cJSON_AddStringToObject(m, "namespace", t->ns) == NULL)
        || cJSON_AddStringToObject(m, "arguments", call->arguments) == NULL)
    {
        cJSON_Delete(m);
        return NULL;
    }
    return m;
}


cJSON *
llm_responses_usage(const llm_responses_result *res)
{
    cJSON  *u, *in, *out;

    u = cJSON_CreateObject();
    if (u == NULL
        || cJSON_AddNumberToObject(u, "input_tokens", res->input_tokens)
           == NULL
        || (in = cJSON_AddObjectToObject(u, "input_tokens_details")) == NULL
        || cJSON_AddNumberToObject(in, "cached_tokens", res->cached_tokens)
           == NULL
        || cJSON_AddNumberToObject(u, "output_tokens", res->output_tokens)
           == NULL
        || (out = cJSON_AddObjectToObject(u, "output_tokens_details"))
           == NULL
        || cJSON_AddNumberToObject(out, "reasoning_tokens",
                                   res->reasoning_tokens) == NULL
        || cJSON_AddNumberToObject(u, "total_tokens",
                                   (double) res->input_tokens
                                   + res->output_tokens) == NULL)
    {
        cJSON_Delete(u);
        return NULL;
    }
    return u;
}


/* reasoning, then the message, then the calls: the order models write */
static int
add_output(const llm_responses_req *rq, const llm_responses_result *res,
    cJSON *output)
{
    char    id[96];
    int     i, n = 0;
    cJSON  *item;

    if (res->reasoning != NULL) {
        llm_responses_item_id(id, sizeof(id), "rs", res->id, n++);
        item = llm_responses_reasoning_item(id, res->reasoning,
                                            res->reasoning_len);
        if (!cJSON_AddItemToArray(output, item)) {
            return -1;
        }
    }
    if (res->text_len > 0 || res->n_calls == 0) {
        llm_responses_item_id(id, sizeof(id), "msg", res->id, n++);
        item = llm_responses_message_item(id, res->text, res->text_len,
                                          res->incomplete ? "incomplete"
                                                          : "completed");
        if (!cJSON_AddItemToArray(output, item)) {
            return -1;
        }
    }
    for (i = 0; i < res->n_calls; i++) {
        llm_responses_item_id(id, sizeof(id), "fc", res->id, n++);
        item = llm_responses_call_item(rq, id, &res->calls[i], "completed");
        if (!cJSON_AddItemToArray(output, item)) {
            return -1;
        }
    }
    return 0;
}


cJSON *
llm_responses_object(const llm_responses_req *rq,
    const llm_responses_result *res)
{
    cJSON        *o, *v, *output, *inc;
    const cJSON  *e;
    static const char *const  defaults[] = {
        "instructions", "max_output_tokens", "previous_response_id",
        "temperature", "top_p", "user", NULL
    };
    int           i;

    o = cJSON_CreateObject();
    if (o == NULL
        || cJSON_AddStringToObject(o, "id", res->id) == NULL
        || cJSON_AddStringToObject(o, "object", "response") == NULL
        || cJSON_AddNumberToObject(o, "created_at", (double) res->created_at)
           == NULL
        || cJSON_AddStringToObject(o, "status", res->status) == NULL
        || cJSON_AddNullToObject(o, "error") == NULL
        || cJSON_AddStringToObject(o, "model", res->model) == NULL)
    {
        goto oom;
    }
    if (res->incomplete) {
        inc = cJSON_AddObjectToObject(o, "incomplete_details");
        if (inc == NULL || cJSON_AddStringToObject(inc, "reason",
                                                   res->incomplete) == NULL)
        {
            goto oom;
        }
    } else if (cJSON_AddNullToObject(o, "incomplete_details") == NULL) {
        goto oom;
    }

    /* the request's fields as OpenAI echoes them, null when not given */
    for (e = rq->echo ? rq->echo->child : NULL; e; e = e->next) {
        if (!cJSON_AddItemToObject(o, e->string, cJSON_Duplicate(e, 1))) {
            goto oom;
        }
    }
    for (i = 0; defaults[i]; i++) {
        if (!cJSON_HasObjectItem(o, defaults[i])
            && cJSON_AddNullToObject(o, defaults[i]) == NULL)
        {
            goto oom;
        }
    }
    if ((!cJSON_HasObjectItem(o, "metadata")
         && cJSON_AddObjectToObject(o, "metadata") == NULL)
        || (!cJSON_HasObjectItem(o, "tools")
            && cJSON_AddArrayToObject(o, "tools") == NULL)
        || (!cJSON_HasObjectItem(o, "tool_choice")
            && cJSON_AddStringToObject(o, "tool_choice", "auto") == NULL)
        || (!cJSON_HasObjectItem(o, "parallel_tool_calls")
            && cJSON_AddTrueToObject(o, "parallel_tool_calls") == NULL)
        || (!cJSON_HasObjectItem(o, "truncation")
            && cJSON_AddStringToObject(o, "truncation", "disabled") == NULL)
        || cJSON_AddBoolToObject(o, "store", res->stored) == NULL)
    {
        goto oom;
    }
    if (!cJSON_HasObjectItem(o, "text")) {
        v = cJSON_AddObjectToObject(o, "text");
        v = v ? cJSON_AddObjectToObject(v, "format") : NULL;
        if (v == NULL || cJSON_AddStringToObject(v, "type", "text") == NULL) {
            goto oom;
        }
    }

    output = cJSON_AddArrayToObject(o, "output");
    if (output == NULL || (res->with_output && add_output(rq, res, output)
                                               != 0))
    {
        goto oom;
    }
    if (res->with_output) {
        if (!cJSON_AddItemToObject(o, "usage", llm_responses_usage(res))) {
            goto oom;
        }
    } else if (cJSON_AddNullToObject(o, "usage") == NULL) {
        goto oom;
    }
    return o;

oom:
    cJSON_Delete(o);
    return NULL;
}


char *
llm_responses_stored(const llm_responses_req *rq, const cJSON *response)
{
    char         *text;
    cJSON        *o, *conv, *it;
    const cJSON  *out;

    o = cJSON_CreateObject();
    conv = rq->items ? cJSON_Duplicate(rq->items, 1) : cJSON_CreateArray();
    if (o == NULL || conv == NULL
        || !cJSON_AddItemToObject(o, "conversation", conv))
    {
        cJSON_Delete(o);
        cJSON_Delete(conv);
        return NULL;
    }
    out = cJSON_GetObjectItemCaseSensitive(response, "output");
    for (it = out ? out->child : NULL; it; it = it->next) {
        if (!cJSON_AddItemToArray(conv, cJSON_Duplicate(it, 1))) {
            cJSON_Delete(o);
            return NULL;
        }
    }
    if (!cJSON_AddItemToObject(o, "response", cJSON_Duplicate(response, 1))) {
        cJSON_Delete(o);
        return NULL;
    }
    text = llm_responses_print(o);
    cJSON_Delete(o);
    return text;
}
