/*
 * Anthropic's Messages API translated to and from the chat path
 * (api/messages.h). The request becomes an OpenAI chat body:
 *
 *   system (string | text blocks)      -> a system message
 *   user text blocks                   -> a user message
 *   user tool_result blocks            -> tool messages, in order
 *   assistant text / tool_use blocks   -> content / tool_calls
 *   thinking, redacted_thinking        -> dropped (templates drop past
 *                                         reasoning; signatures accepted)
 *   tools[].input_schema               -> tools[].function.parameters
 *   tool_choice auto|any|tool|none     -> auto|required|named|none
 *   stop_sequences                     -> stop
 *   max_tokens, temperature, top_p, top_k, stream: the same names
 *   ignore_eos (ours, as on chat and /v1/responses): the same name
 *
 * defines: llm_messages_to_chat, llm_messages_stop_reason,
 *          llm_messages_error_type, llm_messages_reply
 */
#include "api/messages.h"
#include "api/error.h"
#include "api/json_strict.h"
#include "text/utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD  "invalid_request_error"


/* p (64 bytes) = param + suffix, cut to fit: a field's path for errors */
static void
msg_path(char *p, const char *param, const char *suffix)
{
    size_t  n = strlen(param), m = strlen(suffix);

    n = n > 63 ? 63 : n;
    memcpy(p, param, n);
    m = m > 63 - n ? 63 - n : m;
    memcpy(p + n, suffix, m);
    p[n + m] = '\0';
}


static int
msg_fail(llm_api_error *err, const char *param, const char *what)
{
    return llm_api_fail(err, 400, BAD, param, "%s: %s", param, what);
}


/* a required string member */
static const char *
msg_string(const cJSON *obj, const char *name, const char *param,
    llm_api_error *err)
{
    cJSON  *v = llm_api_field(obj, name);

    if (v == NULL) {
        msg_fail(err, param, "Field required");
        return NULL;
    }
    if (!cJSON_IsString(v)) {
        msg_fail(err, param, "Input should be a valid string");
        return NULL;
    }
    return v->valuestring;
}


/* a text block's text, or NULL with err filled */
static const char *
msg_text_block(const cJSON *b, const char *param, llm_api_error *err)
{
    char  p[64];

    msg_path(p, param, ".text");
    return msg_string(b, "text", p, err);
}


/* {"type":"text","text":s} appended to parts */
static int
msg_add_part(cJSON *parts, const char *text)
{
    cJSON  *part = cJSON_CreateObject();

    if (part == NULL || !cJSON_AddItemToArray(parts, part)) {
        cJSON_Delete(part);
        return -1;
    }
    return cJSON_AddStringToObject(part, "type", "text") == NULL
           || cJSON_AddStringToObject(part, "text", text) == NULL ? -1 : 0;
}


/* string or text blocks -> a chat content (text parts); system and
   tool_result contents */
static cJSON *
msg_text_content(const cJSON *c, const char *param, llm_api_error *err)
{
    char          p[64];
    cJSON        *parts, *type;
    const char   *text;
    const cJSON  *b;
    int           i = 0;

    if (cJSON_IsString(c)) {
        return cJSON_CreateString(c->valuestring);
    }
    if (!cJSON_IsArray(c)) {
        msg_fail(err, param, "Input should be a valid string or a list of "
                 "text blocks");
        return NULL;
    }

    parts = cJSON_CreateArray();
    if (parts == NULL) {
        llm_api_fail_oom(err);
        return NULL;
    }

    cJSON_ArrayForEach(b, c) {
        snprintf(p, sizeof(p), "%s[%d]", param, i++);
        type = llm_api_field(b, "type");
        if (!cJSON_IsObject(b) || !cJSON_IsString(type)
            || strcmp(type->valuestring, "text") != 0)
        {
            msg_fail(err, p, "only text blocks are supported here");
            cJSON_Delete(parts);
            return NULL;
        }
        text = msg_text_block(b, p, err);
        if (text == NULL) {
            cJSON_Delete(parts);
            return NULL;
        }
        if (msg_add_part(parts, text) != 0) {
            cJSON_Delete(parts);
            llm_api_fail_oom(err);
            return NULL;
        }
    }

    return parts;
}


/* a chat message {"role": role, "content": content} appended to msgs */
static cJSON *
msg_push(cJSON *msgs, const char *role, cJSON *content)
{
    cJSON  *m = cJSON_CreateObject();

    if (m == NULL || !cJSON_AddItemToArray(msgs, m)) {
        cJSON_Delete(m);
        cJSON_Delete(content);
        return NULL;
    }
    if (cJSON_AddStringToObject(m, "role", role) == NULL) {
        cJSON_Delete(content);
        return NULL;
    }
    if (content == NULL) {
        content = cJSON_CreateString("");
    }
    if (content == NULL || !cJSON_AddItemToObject(m, "content", content)) {
        cJSON_Delete(content);
        return NULL;
    }
    return m;
}


/* a tool_use block -> an OpenAI tool call */
static int
msg_tool_use(const cJSON *b, const char *param, cJSON *calls,
    llm_api_error *err)
{
    char         p[64], *args;
    cJSON       *call, *fn, *input;
    const char  *id, *name;

    msg_path(p, param, ".id");
    id = msg_string(b, "id", p, err);
    if (id == NULL) {
        return -1;
    }
    msg_path(p, param, ".name");
    name = msg_string(b, "name", p, err);
    if (name == NULL) {
        return -1;
    }
    input = llm_api_field(b, "input");
    if (!cJSON_IsObject(input)) {
        msg_path(p, param, ".input");
        return msg_fail(err, p, "Input should be a valid dictionary");
    }

    args = cJSON_PrintUnformatted(input);
    call = cJSON_CreateObject();
    if (args == NULL || call == NULL || !cJSON_AddItemToArray(calls, call)) {
        free(args);
        cJSON_Delete(call);
        return llm_api_fail_oom(err);
    }
    fn = cJSON_CreateObject();
    if (cJSON_AddStringToObject(call, "id", id) == NULL
        || cJSON_AddStringToObject(call, "type", "function") == NULL
        || fn == NULL || !cJSON_AddItemToObject(call, "function", fn)
        || cJSON_AddStringToObject(fn, "name", name) == NULL
        || cJSON_AddStringToObject(fn, "arguments", args) == NULL)
    {
        free(args);
        return llm_api_fail_oom(err);
    }
    free(args);
    return 0;
}


/* a tool_result block -> a tool message */
static int
msg_tool_result(const cJSON *b, const char *param, cJSON *msgs,
    llm_api_error *err)
{
    char         p[64];
    cJSON       *m, *content, *c;
    const char  *id;

    msg_path(p, param, ".tool_use_id");
    id = msg_string(b, "tool_use_id", p, err);
    if (id == NULL) {
        return -1;
    }

    c = llm_api_field(b, "content");
    if (c == NULL) {
        content = cJSON_CreateString("");
    } else {
        msg_path(p, param, ".content");
        content = msg_text_content(c, p, err);
        if (content == NULL) {
            return -1;
        }
    }

    m = msg_push(msgs, "tool", content);
    if (m == NULL || cJSON_AddStringToObject(m, "tool_call_id", id) == NULL) {
        return llm_api_fail_oom(err);
    }
    return 0;
}


/* pending user text parts become a user message */
static int
msg_flush_user(cJSON *msgs, cJSON **parts, llm_api_error *err)
{
    if (*parts == NULL) {
        return 0;
    }
    if (msg_push(msgs, "user", *parts) == NULL) {
        *parts = NULL;
        return llm_api_fail_oom(err);
    }
    *parts = NULL;
    return 0;
}


/* one block of messages[i]: into parts (text), calls or msgs */
static int
msg_block(const cJSON *b, const char *param, int user, cJSON *msgs,
    cJSON **parts, cJSON *calls, llm_api_error *err)
{
    char         p[64];
    cJSON       *type;
    const char  *t, *text;

    type = llm_api_field(b, "type");
    if (!cJSON_IsObject(b) || !cJSON_IsString(type)) {
        msg_path(p, param, ".type");
        return msg_fail(err, p, "Field required");
    }
    t = type->valuestring;

    if (strcmp(t, "text") == 0) {
        text = msg_text_block(b, param, err);
        if (text == NULL) {
            return -1;
        }
        if (*parts == NULL && (*parts = cJSON_CreateArray()) == NULL) {
            return llm_api_fail_oom(err);
        }
        return msg_add_part(*parts, text) == 0 ? 0 : llm_api_fail_oom(err);
    }

    if (strcmp(t, "thinking") == 0 || strcmp(t, "redacted_thinking") == 0) {
        if (user) {
            return msg_fail(err, param, "thinking blocks belong to "
                            "assistant messages");
        }
        return 0;
    }

    if (strcmp(t, "tool_use") == 0 && !user) {
        return msg_tool_use(b, param, calls, err);
    }

    if (strcmp(t, "tool_result") == 0 && user) {
        if (msg_flush_user(msgs, parts, err) != 0) {
            return -1;
        }
        return msg_tool_result(b, param, msgs, err);
    }

    msg_path(p, param, ".type");
    return llm_api_fail(err, 400, BAD, p, "%s: blocks of type '%.40s' are "
                        "not supported in %s messages (text, tool_use, "
                        "tool_result, thinking and redacted_thinking are)",
                        p, t, user ? "user" : "assistant");
}


static int
msg_message(const cJSON *m, int i, cJSON *msgs, llm_api_error *err)
{
    int           user, j;
    char          p[64];
    cJSON        *role, *content, *parts, *calls, *am;
    const cJSON  *b;

    snprintf(p, sizeof(p), "messages.%d", i);
    role = llm_api_field(m, "role");
    if (!cJSON_IsObject(m) || !cJSON_IsString(role)
        || (strcmp(role->valuestring, "user") != 0
            && strcmp(role->valuestring, "assistant") != 0))
    {
        snprintf(p, sizeof(p), "messages.%d.role", i);
        return msg_fail(err, p, "Input should be 'user' or 'assistant'");
    }
    user = role->valuestring[0] == 'u';

    content = llm_api_field(m, "content");
    if (cJSON_IsString(content)) {
        return msg_push(msgs, role->valuestring,
                        cJSON_CreateString(content->valuestring))
               ? 0 : llm_api_fail_oom(err);
    }
    if (!cJSON_IsArray(content)) {
        snprintf(p, sizeof(p), "messages.%d.content", i);
        return msg_fail(err, p, "Input should be a valid string or a list "
                        "of content blocks");
    }

    parts = NULL;
    calls = cJSON_CreateArray();
    if (calls == NULL) {
        return llm_api_fail_oom(err);
    }

    j = 0;
    cJSON_ArrayForEach(b, content) {
        snprintf(p, sizeof(p), "messages.%d.content.%d", i, j++);
        if (msg_block(b, p, user, msgs, &parts, calls, err) != 0) {
            cJSON_Delete(parts);
            cJSON_Delete(calls);
            return -1;
        }
    }

    if (user) {
        cJSON_Delete(calls);
        return msg_flush_user(msgs, &parts, err);
    }

    am = msg_push(msgs, "assistant", parts);
    if (am == NULL) {
        cJSON_Delete(calls);
        return llm_api_fail_oom(err);
    }
    if (cJSON_GetArraySize(calls) == 0) {
        cJSON_Delete(calls);
        return 0;
    }
    return cJSON_AddItemToObject(am, "tool_calls", calls)
           ? 0 : (cJSON_Delete(calls), llm_api_fail_oom(err));
}


/* tools[] -> OpenAI function tools */
static cJSON *
msg_tools(const cJSON *tools, llm_api_error *err)
{
    int           i = 0;
    char          p[64];
    cJSON        *out, *t, *fn, *type, *desc, *schema;
    const char   *name;
    const cJSON  *in;

    if (!cJSON_IsArray(tools)) {
        msg_fail(err, "tools", "Input should be a valid list");
        return NULL;
    }
    out = cJSON_CreateArray();
    if (out == NULL) {
        llm_api_fail_oom(err);
        return NULL;
    }

    cJSON_ArrayForEach(in, tools) {
        type = llm_api_field(in, "type");
        if (!cJSON_IsObject(in)
            || (type != NULL && (!cJSON_IsString(type)
                                 || strcmp(type->valuestring, "custom"))))
        {
            snprintf(p, sizeof(p), "tools.%d.type", i);
            llm_api_fail(err, 400, BAD, p, "%s: only custom tools (name, "
                         "description, input_schema) are served here", p);
            goto failed;
        }
        snprintf(p, sizeof(p), "tools.%d.name", i);
        name = msg_string(in, "name", p, err);
        if (name == NULL) {
            goto failed;
        }
        schema = llm_api_field(in, "input_schema");
        if (!cJSON_IsObject(schema)) {
            snprintf(p, sizeof(p), "tools.%d.input_schema", i);
            msg_fail(err, p, "Input should be a valid dictionary");
            goto failed;
        }
        desc = llm_api_field(in, "description");

        t = cJSON_CreateObject();
        fn = cJSON_CreateObject();
        if (t == NULL || fn == NULL || !cJSON_AddItemToArray(out, t)
            || cJSON_AddStringToObject(t, "type", "function") == NULL
            || !cJSON_AddItemToObject(t, "function", fn)
            || cJSON_AddStringToObject(fn, "name", name) == NULL
            || (cJSON_IsString(desc)
                && cJSON_AddStringToObject(fn, "description",
                                           desc->valuestring) == NULL)
            || !cJSON_AddItemToObject(fn, "parameters",
                                      cJSON_Duplicate(schema, 1)))
        {
            llm_api_fail_oom(err);
            goto failed;
        }
        i++;
    }
    return out;

failed:
    cJSON_Delete(out);
    return NULL;
}


/* tool_choice -> OpenAI's, and disable_parallel_tool_use */
static int
msg_tool_choice(const cJSON *tc, cJSON *out, llm_api_error *err)
{
    cJSON       *type, *name, *dp, *v, *fn;
    const char  *t;

    type = llm_api_field(tc, "type");
    if (!cJSON_IsObject(tc) || !cJSON_IsString(type)) {
        return msg_fail(err, "tool_choice.type", "Field required");
    }
    t = type->valuestring;

    dp = llm_api_field(tc, "disable_parallel_tool_use");
    if (cJSON_IsTrue(dp)
        && !cJSON_AddFalseToObject(out, "parallel_tool_calls"))
    {
        return llm_api_fail_oom(err);
    }

    if (strcmp(t, "auto") == 0 || strcmp(t, "none") == 0) {
        v = cJSON_CreateString(t);
    } else if (strcmp(t, "any") == 0) {
        v = cJSON_CreateString("required");
    } else if (strcmp(t, "tool") == 0) {
        name = llm_api_field(tc, "name");
        if (!cJSON_IsString(name)) {
            return msg_fail(err, "tool_choice.name", "Field required");
        }
        v = cJSON_CreateObject();
        fn = cJSON_AddObjectToObject(v, "function");
        if (fn == NULL
            || cJSON_AddStringToObject(v, "type", "function") == NULL
            || cJSON_AddStringToObject(fn, "name", name->valuestring)
               == NULL)
        {
            cJSON_Delete(v);
            return llm_api_fail_oom(err);
        }
    } else {
        return msg_fail(err, "tool_choice.type", "Input should be 'auto', "
                        "'any', 'tool' or 'none'");
    }

    if (v == NULL || !cJSON_AddItemToObject(out, "tool_choice", v)) {
        cJSON_Delete(v);
        return llm_api_fail_oom(err);
    }
    return 0;
}


/* thinking {type: enabled, budget_tokens} | {type: disabled} */
static int
msg_thinking(const cJSON *th, llm_messages_opts *opts, llm_api_error *err)
{
    cJSON  *type, *budget;

    type = llm_api_field(th, "type");
    if (!cJSON_IsObject(th) || !cJSON_IsString(type)) {
        return msg_fail(err, "thinking.type", "Field required");
    }
    if (strcmp(type->valuestring, "disabled") == 0) {
        opts->thinking = 0;
        return 0;
    }
    if (strcmp(type->valuestring, "enabled") != 0) {
        return msg_fail(err, "thinking.type", "Input should be 'enabled' "
                        "or 'disabled'");
    }
    budget = llm_api_field(th, "budget_tokens");
    /* the range first: a cast of a double past INT_MAX is undefined */
    if (budget != NULL && (!cJSON_IsNumber(budget) || budget->valuedouble < 1
                           || budget->valuedouble > 2147483647.0
                           || budget->valuedouble
                              != (double) (int) budget->valuedouble))
    {
        return msg_fail(err, "thinking.budget_tokens", "Input should be a "
                        "positive integer");
    }
    opts->thinking = 1;
    return 0;
}


/* the fields whose value goes over unchanged (the chat parser checks
   them); Anthropic's temperature is 0..1 */
static int
msg_copy_fields(const cJSON *root, cJSON *out, int count_only,
    llm_api_error *err)
{
    int           i;
    cJSON        *v;
    static const char  *same[] = { "temperature", "top_p", "top_k",
                                   "max_tokens", "stream", "ignore_eos",
                                   NULL };

    for (i = 0; same[i]; i++) {
        v = llm_api_field(root, same[i]);
        if (v == NULL || (count_only && i >= 3)) {
            continue;
        }
        if (i == 0 && cJSON_IsNumber(v)
            && (v->valuedouble < 0 || v->valuedouble > 1))
        {
            return msg_fail(err, "temperature", "Input should be less than "
                            "or equal to 1 and greater than or equal to 0");
        }
        if (!cJSON_AddItemToObject(out, same[i], cJSON_Duplicate(v, 1))) {
            return llm_api_fail_oom(err);
        }
    }

    if (!count_only && llm_api_field(root, "max_tokens") == NULL) {
        return msg_fail(err, "max_tokens", "Field required");
    }

    v = llm_api_field(root, "stop_sequences");
    if (v != NULL && !count_only
        && !cJSON_AddItemToObject(out, "stop", cJSON_Duplicate(v, 1)))
    {
        return llm_api_fail_oom(err);
    }

    v = llm_api_field(root, "metadata");
    if (v != NULL && !cJSON_IsObject(v)) {
        return msg_fail(err, "metadata", "Input should be a valid "
                        "dictionary");
    }

    return 0;
}


static int
msg_translate(const cJSON *root, int count_only, cJSON *out,
    llm_messages_opts *opts, llm_api_error *err)
{
    int           i;
    cJSON        *msgs, *v, *sys, *tools;
    const char   *model;
    const cJSON  *m;

    model = msg_string(root, "model", "model", err);
    if (model == NULL) {
        return -1;
    }
    if (cJSON_AddStringToObject(out, "model", model) == NULL) {
        return llm_api_fail_oom(err);
    }

    if (msg_copy_fields(root, out, count_only, err) != 0) {
        return -1;
    }

    msgs = cJSON_AddArrayToObject(out, "messages");
    if (msgs == NULL) {
        return llm_api_fail_oom(err);
    }

    v = llm_api_field(root, "system");
    if (v != NULL) {
        sys = msg_text_content(v, "system", err);
        if (sys == NULL) {
            return -1;
        }
        if (msg_push(msgs, "system", sys) == NULL) {
            return llm_api_fail_oom(err);
        }
    }

    v = llm_api_field(root, "messages");
    if (v == NULL) {
        return msg_fail(err, "messages", "Field required");
    }
    if (!cJSON_IsArray(v)) {
        return msg_fail(err, "messages", "Input should be a valid list");
    }
    if (cJSON_GetArraySize(v) == 0) {
        return msg_fail(err, "messages", "at least one message is required");
    }
    i = 0;
    cJSON_ArrayForEach(m, v) {
        if (msg_message(m, i++, msgs, err) != 0) {
            return -1;
        }
    }

    v = llm_api_field(root, "tools");
    if (v != NULL) {
        tools = msg_tools(v, err);
        if (tools == NULL) {
            return -1;
        }
        if (!cJSON_AddItemToObject(out, "tools", tools)) {
            cJSON_Delete(tools);
            return llm_api_fail_oom(err);
        }
    }

    v = llm_api_field(root, "tool_choice");
    if (v != NULL && msg_tool_choice(v, out, err) != 0) {
        return -1;
    }

    v = llm_api_field(root, "thinking");
    if (v != NULL && msg_thinking(v, opts, err) != 0) {
        return -1;
    }

    return 0;
}


char *
llm_messages_to_chat(const char *body, size_t len, int count_only,
    const llm_api_limits *lim, llm_messages_opts *opts, size_t *out_len,
    llm_api_error *err)
{
    char             *text;
    cJSON            *root, *out;
    llm_api_limits    def;
    llm_api_request   req;
    llm_json_result   res;

    memset(err, 0, sizeof(*err));
    opts->thinking = -1;
    if (lim == NULL) {
        llm_api_limits_default(&def);
        lim = &def;
    }

    /* a body the chat parser would refuse before reading it (size, strict
       JSON, depth, values): its refusal, in its words */
    if ((lim->max_body && len > lim->max_body)
        || llm_json_check(body, len, lim->max_depth, lim->max_values,
                          LLM_JSON_NO_NUL, &res) != LLM_JSON_OK)
    {
        memset(&req, 0, sizeof(req));
        if (llm_api_parse(&req, body, len, LLM_API_CHAT, lim, err) == 0) {
            llm_api_fail(err, 400, BAD, "", "the body is not valid JSON");
        }
        llm_api_request_free(&req);
        return NULL;
    }

    root = cJSON_ParseWithLength(body, len);
    if (root == NULL) {
        llm_api_fail_oom(err);
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        llm_api_fail(err, 400, BAD, "", "the body must be a JSON object");
        return NULL;
    }

    out = cJSON_CreateObject();
    if (out == NULL) {
        cJSON_Delete(root);
        llm_api_fail_oom(err);
        return NULL;
    }

    text = NULL;
    if (msg_translate(root, count_only, out, opts, err) == 0) {
        text = cJSON_PrintUnformatted(out);
        if (text == NULL) {
            llm_api_fail_oom(err);
        } else {
            *out_len = strlen(text);
        }
    }

    cJSON_Delete(out);
    cJSON_Delete(root);
    return text;
}


const char *
llm_messages_stop_reason(int finish, int n_calls, int stopped)
{
    if (n_calls > 0) {
        return "tool_use";
    }
    if (stopped) {
        return "stop_sequence";
    }
    return finish == LLM_FINISH_LENGTH ? "max_tokens" : "end_turn";
}


const char *
llm_messages_error_type(int status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    case 529: return "overloaded_error";
    default:  return status >= 500 ? "api_error" : "invalid_request_error";
    }
}


/* len bytes as a JSON string item, invalid UTF-8 as U+FFFD (a reply cut
   by max_tokens may end inside a character) */
static cJSON *
msg_string_item(const char *s, size_t len)
{
    char    *copy, *p;
    size_t   n;
    cJSON   *item;

    copy = malloc(3 * len + 1);
    if (copy == NULL) {
        return NULL;
    }
    p = copy;
    while (len) {
        n = llm_utf8_len((const unsigned char *) s, len);
        if (n == 0) {
            p += llm_utf8_encode(0xFFFD, p);
            s++;
            len--;
            continue;
        }
        memcpy(p, s, n);
        p += n;
        s += n;
        len -= n;
    }
    *p = '\0';

    item = cJSON_CreateString(copy);
    free(copy);
    return item;
}


static int
msg_add_block(cJSON *content, const char *type, const char *key,
    const char *s, size_t len)
{
    cJSON  *b = cJSON_CreateObject(), *v;

    if (b == NULL || !cJSON_AddItemToArray(content, b)
        || cJSON_AddStringToObject(b, "type", type) == NULL)
    {
        cJSON_Delete(b);
        return -1;
    }
    v = msg_string_item(s, len);
    if (v == NULL || !cJSON_AddItemToObject(b, key, v)) {
        cJSON_Delete(v);
        return -1;
    }
    /* no signature is made here; the field is there for clients that
       send the block back */
    if (strcmp(type, "thinking") == 0
        && cJSON_AddStringToObject(b, "signature", "") == NULL)
    {
        return -1;
    }
    return 0;
}


cJSON *
llm_messages_reply(const llm_messages_out *o)
{
    int     i;
    cJSON  *root, *content, *b, *input, *usage;

    root = cJSON_CreateObject();
    if (root == NULL
        || cJSON_AddStringToObject(root, "id", o->id) == NULL
        || cJSON_AddStringToObject(root, "type", "message") == NULL
        || cJSON_AddStringToObject(root, "role", "assistant") == NULL
        || cJSON_AddStringToObject(root, "model", o->model) == NULL
        || (content = cJSON_AddArrayToObject(root, "content")) == NULL)
    {
        goto failed;
    }

    if (o->reasoning_len
        && msg_add_block(content, "thinking", "thinking", o->reasoning,
                         o->reasoning_len) != 0)
    {
        goto failed;
    }
    if ((o->text_len || (o->n_calls == 0 && o->reasoning_len == 0))
        && msg_add_block(content, "text", "text", o->text ? o->text : "",
                         o->text_len) != 0)
    {
        goto failed;
    }

    for (i = 0; i < o->n_calls; i++) {
        b = cJSON_CreateObject();
        if (b == NULL || !cJSON_AddItemToArray(content, b)) {
            cJSON_Delete(b);
            goto failed;
        }
        input = cJSON_Parse(o->calls[i].arguments);
        if (input == NULL) {
            input = cJSON_CreateObject();
        }
        if (cJSON_AddStringToObject(b, "type", "tool_use") == NULL
            || cJSON_AddStringToObject(b, "id", o->calls[i].id) == NULL
            || cJSON_AddStringToObject(b, "name", o->calls[i].name) == NULL
            || input == NULL || !cJSON_AddItemToObject(b, "input", input))
        {
            cJSON_Delete(input);
            goto failed;
        }
    }

    usage = NULL;
    if (cJSON_AddStringToObject(root, "stop_reason", o->stop_reason) == NULL
        || (o->stop_sequence
            ? cJSON_AddStringToObject(root, "stop_sequence", o->stop_sequence)
            : cJSON_AddNullToObject(root, "stop_sequence")) == NULL
        || (usage = cJSON_AddObjectToObject(root, "usage")) == NULL
        || cJSON_AddNumberToObject(usage, "input_tokens", o->input_tokens)
           == NULL
        || cJSON_AddNumberToObject(usage, "cache_creation_input_tokens", 0)
           == NULL
        || cJSON_AddNumberToObject(usage, "cache_read_input_tokens",
                                   o->cache_read_tokens) == NULL
        || cJSON_AddNumberToObject(usage, "output_tokens", o->output_tokens)
           == NULL)
    {
        goto failed;
    }

    return root;

failed:
    cJSON_Delete(root);
    return NULL;
}
