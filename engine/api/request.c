/*
 * OpenAI request parser and validator (design note in api/request.h; the
 * user-facing list of fields and errors is docs/api.md).
 *
 * Shape of the code: a strict check of the raw bytes (api/json_strict.c),
 * one cJSON parse, then one small reader per field. Readers return 0, or
 * -1 after filling err; a JSON null counts as "not given" for every
 * optional field, as in OpenAI's schema where they are nullable.
 */
#include "api/request.h"
#include "api/error.h"
#include "api/json_strict.h"
#include "api/tools.h"
#include "common/defaults.h"
#include "ring/ngx_llm_ring.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---------------------------------------------------------------------------
 * errors, worded like OpenAI's
 */

/* how OpenAI names a JSON value's type in "but got ... instead" */
static const char *
json_kind(const cJSON *v)
{
    if (cJSON_IsNull(v)) {
        return "null";
    }
    if (cJSON_IsBool(v)) {
        return "a boolean";
    }
    if (cJSON_IsString(v)) {
        return "a string";
    }
    if (cJSON_IsArray(v)) {
        return "an array";
    }
    if (cJSON_IsObject(v)) {
        return "an object";
    }
    if (cJSON_IsNumber(v) && isfinite(v->valuedouble)
        && v->valuedouble == floor(v->valuedouble))
    {
        return "an integer";
    }
    return "a decimal";
}


static int
fail_type(llm_api_error *err, const char *param, const char *expected,
    const cJSON *got)
{
    return llm_api_fail(err, 400, "invalid_type", param,
                        "Invalid type for '%s': expected %s, but got %s "
                        "instead.",
                        param, expected, json_kind(got));
}


static int
fail_below(llm_api_error *err, const char *param, int integer,
    const char *op, double min, double got)
{
    return llm_api_fail(err, 400,
                        integer ? "integer_below_min_value"
                                : "decimal_below_min_value",
                        param, "Invalid '%s': %s below minimum value. "
                        "Expected a value %s %.15g, but got %.15g instead.",
                        param, integer ? "integer" : "decimal", op, min, got);
}


static int
fail_above(llm_api_error *err, const char *param, int integer,
    const char *op, double max, double got)
{
    return llm_api_fail(err, 400,
                        integer ? "integer_above_max_value"
                                : "decimal_above_max_value",
                        param, "Invalid '%s': %s above maximum value. "
                        "Expected a value %s %.15g, but got %.15g instead.",
                        param, integer ? "integer" : "decimal", op, max, got);
}


static int
fail_too_long(llm_api_error *err, const char *param, int max, int got)
{
    return llm_api_fail(err, 400, "array_above_max_length", param,
                        "Invalid '%s': array too long. Expected an array with "
                        "maximum length %d, but got an array with length %d "
                        "instead.", param, max, got);
}


static int
fail_empty_array(llm_api_error *err, const char *param)
{
    return llm_api_fail(err, 400, "empty_array", param,
                        "Invalid '%s': empty array. Expected an array with "
                        "minimum length 1, but got an empty array instead.",
                        param);
}


static int
fail_unsupported(llm_api_error *err, const char *param, const char *why)
{
    return llm_api_fail(err, 400, "unsupported_value", param,
                        "Unsupported value for '%s': %s", param, why);
}


/* ---------------------------------------------------------------------------
 * the raw bytes, before cJSON: size, then RFC 8259 with our limits
 */

void
llm_api_limits_default(llm_api_limits *lim)
{
    lim->max_body = LLM_DEFAULT_MAX_BODY;
    lim->max_depth = 64;
    lim->max_values = 100000;
    lim->max_messages = 4096;
    lim->max_prompt_ids = LLM_RING_MAX_PROMPT;  /* what a slot can carry */
    lim->vocab_size = 0;
    lim->max_stop = 4;
    lim->max_stop_len = 1024;
    lim->max_stop_ids = LLM_RING_MAX_STOP_IDS;
    lim->max_logit_bias = LLM_RING_MAX_BIAS;
    lim->max_top_logprobs = LLM_MAX_TOP_LOGPROBS;
    lim->max_logprobs = 5;
    lim->max_n = 1;
}


void
llm_api_limits_model(llm_api_limits *lim, const llm_tokenizer *t)
{
    const int32_t  *ids;
    int             n;

    if (t == NULL) {
        return;
    }
    lim->vocab_size = llm_tokenizer_n_vocab(t);
    n = llm_tokenizer_stop_ids(t, &ids);
    lim->max_stop_ids = n < LLM_RING_MAX_STOP_IDS
                        ? LLM_RING_MAX_STOP_IDS - n : 0;
}


void
llm_api_stop_ids_to_ring(const llm_api_request *req, const llm_tokenizer *t,
    llm_sampling *p)
{
    const int32_t  *eos;
    int             i, k, n = 0;

    if (!req->ignore_eos && t != NULL) {
        k = llm_tokenizer_stop_ids(t, &eos);
        for (i = 0; i < k && n < LLM_RING_MAX_STOP_IDS; i++) {
            p->stop_ids[n++] = eos[i];
        }
    }
    for (i = 0; i < req->n_stop_ids && n < LLM_RING_MAX_STOP_IDS; i++) {
        p->stop_ids[n++] = req->stop_ids[i];
    }
    p->n_stop_ids = n;
}


static int
fail_json(llm_api_error *err, const char *fmt, ...)
{
    va_list  ap;
    char     why[160];

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    return llm_api_fail(err, 400, "invalid_json", "",
                        "We could not parse the JSON body of your request: "
                        "%s. The API expects a JSON object.", why);
}


/* what the strict check found, in the error's words */
static int
fail_strict(llm_api_error *err, const llm_json_result *res,
    const llm_api_limits *lim)
{
    size_t  at = res->offset;

    switch (res->status) {
    case LLM_JSON_EMPTY:
        return fail_json(err, "the body is empty");
    case LLM_JSON_UNFINISHED:
        return fail_json(err, "the body ends at byte %zu, inside an "
                         "unfinished value", at);
    case LLM_JSON_CONTROL:
        return fail_json(err, "control character 0x%02x at byte %zu (JSON "
                         "allows only space, tab, CR and LF between "
                         "tokens)", res->byte, at);
    case LLM_JSON_STRING_CONTROL:
        return fail_json(err, "control character in a string at byte %zu "
                         "(escape it)", at);
    case LLM_JSON_UTF8:
        return fail_json(err, "invalid UTF-8 at byte %zu", at);
    case LLM_JSON_ESCAPE:
        return fail_json(err, "invalid escape sequence in a string at byte "
                         "%zu", at);
    case LLM_JSON_SURROGATE:
        return fail_json(err, "unpaired UTF-16 surrogate escape in a string "
                         "at byte %zu", at);
    case LLM_JSON_NUL:
        return fail_json(err, "\\u0000 (NUL) in a string at byte %zu is not "
                         "supported", at);
    case LLM_JSON_NUMBER:
        return fail_json(err, "invalid number at byte %zu (no leading zeros, "
                         "and a digit on both sides of a '.')", at);
    case LLM_JSON_TRAILING:
        return fail_json(err, "unexpected data after the JSON value at byte "
                         "%zu", at);
    case LLM_JSON_DEPTH:
        return llm_api_fail(err, 400, "invalid_json", "",
                            "The JSON body nests arrays and objects deeper "
                            "than %d levels.", lim->max_depth);
    case LLM_JSON_VALUES:
        return llm_api_fail(err, 400, "invalid_json", "",
                            "The JSON body has more than %zu values.",
                            lim->max_values);
    default:
        return fail_json(err, "syntax error near byte %zu", at);
    }
}


/*
 * The body is checked against RFC 8259 before cJSON sees it (why in
 * api/json_strict.h), with the nesting and value limits that bound
 * cJSON's recursion and memory. cJSON failing after that is its own
 * limits (a number of over 63 characters, memory).
 */
static cJSON *
parse_body(const char *body, size_t len, const llm_api_limits *lim,
    llm_api_error *err)
{
    cJSON            *root;
    llm_json_result   res;

    if (lim->max_body > 0 && len > lim->max_body) {
        llm_api_fail(err, 413, "request_too_large", "",
                     "The request body is %zu bytes, more than the limit of "
                     "%zu bytes.", len, lim->max_body);
        return NULL;
    }
    if (llm_json_check(body, len, lim->max_depth, lim->max_values,
                       LLM_JSON_NO_NUL, &res) != LLM_JSON_OK)
    {
        fail_strict(err, &res, lim);
        return NULL;
    }
    /* the text is valid and within cJSON's nesting limit: it fails only
       when it runs out of memory */
    root = cJSON_ParseWithLength(body, len);
    if (root == NULL) {
        llm_api_fail_oom(err);
        return NULL;
    }
    if (!cJSON_IsObject(root)) {
        llm_api_fail(err, 400, "invalid_type", "",
                     "Invalid type for the request body: expected an object, "
                     "but got %s instead.", json_kind(root));
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}


/* ---------------------------------------------------------------------------
 * field readers: absent and null are "not given" (*given = 0)
 */

static int
is_integer(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble)
           && v->valuedouble == floor(v->valuedouble);
}


/* an integer in [min, max] from item v (not NULL) */
static int
int_value(const cJSON *v, const char *param, double min, double max,
    double *out, llm_api_error *err)
{
    if (!is_integer(v)) {
        return fail_type(err, param, "an integer", v);
    }
    if (v->valuedouble < min) {
        return fail_below(err, param, 1, ">=", min, v->valuedouble);
    }
    if (v->valuedouble > max) {
        return fail_above(err, param, 1, "<=", max, v->valuedouble);
    }
    *out = v->valuedouble;
    return 0;
}


static int
read_int(const cJSON *obj, const char *name, double min, double max,
    double *out, int *given, llm_api_error *err)
{
    cJSON  *v = llm_api_field(obj, name);

    *given = (v != NULL);
    return v ? int_value(v, name, min, max, out, err) : 0;
}


/* a number in [min, max], or (min, max] when min_open */
static int
read_decimal(const cJSON *obj, const char *name, double min, int min_open,
    double max, float *out, int *given, llm_api_error *err)
{
    cJSON   *v = llm_api_field(obj, name);
    float    f;
    double   d;

    *given = (v != NULL);
    if (v == NULL) {
        return 0;
    }
    if (!cJSON_IsNumber(v)) {
        return fail_type(err, name, "a decimal", v);
    }
    d = v->valuedouble;
    if (!isfinite(d)) {
        return llm_api_fail(err, 400, "invalid_value", name,
                            "Invalid '%s': expected a finite number, but got "
                            "%g instead.", name, d);
    }
    if (min_open ? d <= min : d < min) {
        return fail_below(err, name, 0, min_open ? ">" : ">=", min, d);
    }
    if (d > max) {
        return fail_above(err, name, 0, "<=", max, d);
    }
    /* in range as a double, but it is kept as a float: 1e-300 would be 0,
       which an open minimum refuses, and 1e39 infinity; the bound named is
       the float next to the limit */
    f = (float) d;
    if (min_open ? f <= min : f < min) {
        return fail_below(err, name, 0, ">=",
                          nextafterf((float) min, INFINITY), d);
    }
    if (isinf(f)) {
        return fail_above(err, name, 0, "<=", FLT_MAX, d);
    }
    *out = f;
    return 0;
}


static int
read_bool(const cJSON *obj, const char *name, int *out, llm_api_error *err)
{
    cJSON  *v = llm_api_field(obj, name);

    if (v == NULL) {
        return 0;
    }
    if (!cJSON_IsBool(v)) {
        return fail_type(err, name, "a boolean", v);
    }
    *out = cJSON_IsTrue(v);
    return 0;
}


/* a string field; *out stays NULL when not given */
static int
read_string(const cJSON *obj, const char *name, const char **out,
    llm_api_error *err)
{
    cJSON  *v = llm_api_field(obj, name);

    *out = NULL;
    if (v == NULL) {
        return 0;
    }
    if (!cJSON_IsString(v)) {
        return fail_type(err, name, "a string", v);
    }
    *out = v->valuestring;
    return 0;
}


static char *
dup_string(const char *s, size_t len)
{
    char  *d = malloc(len + 1);

    if (d != NULL) {
        memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}


/* ---------------------------------------------------------------------------
 * model, messages, prompt
 */

static int
parse_model(llm_api_request *req, const cJSON *root, llm_api_error *err)
{
    cJSON  *v = cJSON_GetObjectItemCaseSensitive(root, "model");

    if (v == NULL) {
        return llm_api_fail_missing(err, "model");
    }
    if (!cJSON_IsString(v)) {
        return fail_type(err, "model", "a string", v);
    }
    if (v->valuestring[0] == '\0') {
        return llm_api_fail(err, 400, "empty_string", "model",
                            "Invalid 'model': empty string. Expected a string "
                            "with minimum length 1, but got an empty string "
                            "instead.");
    }
    req->model = dup_string(v->valuestring, strlen(v->valuestring));
    return req->model ? 0 : llm_api_fail_oom(err);
}


/* the "text" parts of a content array, joined with "\n" as vLLM does */
static int
join_text_parts(const cJSON *parts, const char *param, char **out,
    llm_api_error *err)
{
    const cJSON  *part, *type, *text;
    char          p[96];
    size_t        total = 0, at = 0, n;
    int           j = 0;

    if (cJSON_GetArraySize(parts) == 0) {
        return fail_empty_array(err, param);
    }
    cJSON_ArrayForEach(part, parts) {
        snprintf(p, sizeof(p), "%s[%d]", param, j);
        if (!cJSON_IsObject(part)) {
            return fail_type(err, p, "an object", part);
        }
        snprintf(p, sizeof(p), "%s[%d].type", param, j);
        type = cJSON_GetObjectItemCaseSensitive(part, "type");
        if (type == NULL) {
            return llm_api_fail_missing(err, p);
        }
        if (!cJSON_IsString(type)) {
            return fail_type(err, p, "a string", type);
        }
        if (strcmp(type->valuestring, "text") != 0) {
            return llm_api_fail(err, 400, "unsupported_value", p,
                                "Unsupported content part type '%.40s' in "
                                "'%s': this server accepts only 'text' parts.",
                                type->valuestring, p);
        }
        snprintf(p, sizeof(p), "%s[%d].text", param, j);
        text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (text == NULL) {
            return llm_api_fail_missing(err, p);
        }
        if (!cJSON_IsString(text)) {
            return fail_type(err, p, "a string", text);
        }
        total += strlen(text->valuestring) + 1;
        j++;
    }
    *out = malloc(total);
    if (*out == NULL) {
        return llm_api_fail_oom(err);
    }
    cJSON_ArrayForEach(part, parts) {
        text = cJSON_GetObjectItemCaseSensitive(part, "text");
        n = strlen(text->valuestring);
        if (at > 0) {
            (*out)[at++] = '\n';
        }
        memcpy(*out + at, text->valuestring, n);
        at += n;
    }
    (*out)[at] = '\0';
    return 0;
}


/* system | developer (-> system) | user | assistant | tool */
static const char *
normal_role(const char *role)
{
    if (strcmp(role, "system") == 0 || strcmp(role, "developer") == 0) {
        return "system";
    }
    if (strcmp(role, "user") == 0) {
        return "user";
    }
    if (strcmp(role, "assistant") == 0) {
        return "assistant";
    }
    if (strcmp(role, "tool") == 0) {
        return "tool";
    }
    return NULL;
}


/* content as one string: *owned is set when it had to be built */
static int
message_content(const cJSON *m, const char *role, const char *param,
    const char **text, char **owned, llm_api_error *err)
{
    cJSON  *c = cJSON_GetObjectItemCaseSensitive(m, "content");

    *owned = NULL;
    if (c == NULL || cJSON_IsNull(c)) {
        /* an assistant turn that only made tool calls has no content */
        if (strcmp(role, "assistant") == 0) {
            *text = "";
            return 0;
        }
        return c ? fail_type(err, param, "a string or an array of content "
                             "parts", c)
                 : llm_api_fail_missing(err, param);
    }
    if (cJSON_IsString(c)) {
        *text = c->valuestring;
        return 0;
    }
    if (!cJSON_IsArray(c)) {
        return fail_type(err, param, "a string or an array of content parts",
                         c);
    }
    if (join_text_parts(c, param, owned, err) != 0) {
        return -1;
    }
    *text = *owned;
    return 0;
}


/*
 * An assistant turn's reasoning passed back (reasoning_content, vLLM's
 * and DeepSeek's name, or reasoning): the template decides what it does
 * with it (gpt-oss keeps the thinking of a turn that called a tool, Qwen3
 * that of the last turns); jinja_chat_context aliases it as transformers.
 */
static int
message_reasoning(const cJSON *m, int i, cJSON *out, llm_api_error *err)
{
    static const char *const  names[] = { "reasoning_content", "reasoning",
                                          NULL };
    const cJSON              *r;
    char                      p[64];

    for (int k = 0; names[k]; k++) {
        r = llm_api_field(m, names[k]);
        if (r == NULL || cJSON_IsNull(r)) {
            continue;
        }
        snprintf(p, sizeof(p), "messages[%d].%s", i, names[k]);
        if (!cJSON_IsString(r)) {
            return fail_type(err, p, "a string", r);
        }
        return cJSON_AddStringToObject(out, "reasoning_content",
                                       r->valuestring)
               ? 0 : llm_api_fail_oom(err);
    }
    return 0;
}


static int
parse_message(llm_api_request *req, const cJSON *m, int i,
    llm_api_error *err)
{
    const cJSON  *role, *name;
    const char   *nrole, *text = "";
    cJSON        *out;
    char          p[64], *owned;
    int           rc;

    snprintf(p, sizeof(p), "messages[%d]", i);
    if (!cJSON_IsObject(m)) {
        return fail_type(err, p, "an object", m);
    }
    snprintf(p, sizeof(p), "messages[%d].role", i);
    role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (role == NULL) {
        return llm_api_fail_missing(err, p);
    }
    if (!cJSON_IsString(role)) {
        return fail_type(err, p, "a string", role);
    }
    nrole = normal_role(role->valuestring);
    if (nrole == NULL) {
        return llm_api_fail(err, 400, "invalid_value", p,
                            "Invalid value: '%.40s'. Supported values are: "
                            "'system', 'developer', 'user', 'assistant', and "
                            "'tool'.",
                            role->valuestring);
    }
    snprintf(p, sizeof(p), "messages[%d].name", i);
    name = llm_api_field(m, "name");
    if (name != NULL && !cJSON_IsString(name)) {
        return fail_type(err, p, "a string", name);
    }
    snprintf(p, sizeof(p), "messages[%d].content", i);
    if (message_content(m, nrole, p, &text, &owned, err) != 0) {
        return -1;
    }

    /* fill first, attach last: a half-built object is deleted here */
    out = cJSON_CreateObject();
    rc = out != NULL
         && cJSON_AddStringToObject(out, "role", nrole) != NULL
         && cJSON_AddStringToObject(out, "content", text) != NULL
         && (name == NULL
             || cJSON_AddStringToObject(out, "name", name->valuestring));
    if (rc && strcmp(nrole, "assistant") == 0
        && message_reasoning(m, i, out, err) != 0)
    {
        free(owned);
        cJSON_Delete(out);
        return -1;
    }
    if (rc && llm_tools_message(m, nrole, i, out, err) != 0) {
        free(owned);
        cJSON_Delete(out);
        return -1;
    }
    free(owned);
    if (!rc || !cJSON_AddItemToArray(req->messages, out)) {
        cJSON_Delete(out);
        return llm_api_fail_oom(err);
    }
    return 0;
}


static int
parse_messages(llm_api_request *req, const cJSON *root,
    const llm_api_limits *lim, llm_api_error *err)
{
    const cJSON  *msgs, *m;
    int           n, i = 0;

    msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (msgs == NULL) {
        return llm_api_fail_missing(err, "messages");
    }
    if (!cJSON_IsArray(msgs)) {
        return fail_type(err, "messages", "an array", msgs);
    }
    n = cJSON_GetArraySize(msgs);
    if (n == 0) {
        return fail_empty_array(err, "messages");
    }
    if (n > lim->max_messages) {
        return fail_too_long(err, "messages", lim->max_messages, n);
    }
    req->messages = cJSON_CreateArray();
    if (req->messages == NULL) {
        return llm_api_fail_oom(err);
    }
    cJSON_ArrayForEach(m, msgs) {
        if (parse_message(req, m, i++, err) != 0) {
            return -1;
        }
    }
    return 0;
}


/* an array of token ids in [0, vocab) (param names the array) */
static int
parse_token_ids(const cJSON *arr, const char *param, int max_n, int vocab,
    int allow_empty, int32_t **out, int *n_out, llm_api_error *err)
{
    const cJSON  *v;
    double        id, max_id = vocab > 0 ? vocab - 1 : INT32_MAX;
    char          p[64];
    int           n, i = 0;

    if (!cJSON_IsArray(arr)) {
        return fail_type(err, param, "an array", arr);
    }
    n = cJSON_GetArraySize(arr);
    if (n == 0) {
        return allow_empty ? 0 : fail_empty_array(err, param);
    }
    if (n > max_n) {
        return fail_too_long(err, param, max_n, n);
    }
    *out = malloc((size_t) n * sizeof(**out));
    if (*out == NULL) {
        return llm_api_fail_oom(err);
    }
    cJSON_ArrayForEach(v, arr) {
        /* the fast path: a 32k-id prompt must not pay for error texts */
        id = cJSON_IsNumber(v) ? v->valuedouble : -1;
        if (!(id >= 0 && id <= max_id && id == floor(id))) {
            snprintf(p, sizeof(p), "%s[%d]", param, i);
            return int_value(v, p, 0, max_id, &id, err);
        }
        (*out)[i++] = (int32_t) id;
    }
    *n_out = n;
    return 0;
}


/* string | [string] | [int, ...] | [[int, ...]]; more than one prompt is
   a batch, which needs n > 1 style fan-out we do not do */
static int
parse_prompt(llm_api_request *req, const cJSON *root,
    const llm_api_limits *lim, llm_api_error *err)
{
    const cJSON  *p, *first;
    int           n;

    p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (p == NULL) {
        return llm_api_fail_missing(err, "prompt");
    }
    if (cJSON_IsString(p)) {
        first = p;
    } else if (!cJSON_IsArray(p)) {
        return fail_type(err, "prompt", "a string or an array", p);
    } else if ((n = cJSON_GetArraySize(p)) == 0) {
        return fail_empty_array(err, "prompt");
    } else if (cJSON_IsNumber(p->child)) {
        return parse_token_ids(p, "prompt", lim->max_prompt_ids,
                               lim->vocab_size, 0, &req->prompt_ids,
                               &req->n_prompt_ids, err);
    } else if (!cJSON_IsString(p->child) && !cJSON_IsArray(p->child)) {
        return fail_type(err, "prompt[0]", "a string, an integer or an array "
                         "of integers", p->child);
    } else if (n > 1) {
        return llm_api_fail(err, 400, "unsupported_value", "prompt",
                            "Unsupported value for 'prompt': batched prompts "
                            "are not supported (got %d prompts); send one "
                            "prompt per request.", n);
    } else if (cJSON_IsArray(p->child)) {
        return parse_token_ids(p->child, "prompt[0]", lim->max_prompt_ids,
                               lim->vocab_size, 0, &req->prompt_ids,
                               &req->n_prompt_ids, err);
    } else {
        first = p->child;
    }
    req->prompt_len = strlen(first->valuestring);
    req->prompt = dup_string(first->valuestring, req->prompt_len);
    return req->prompt ? 0 : llm_api_fail_oom(err);
}


/* ---------------------------------------------------------------------------
 * sampling and generation controls
 */

static int
parse_sampling(llm_api_request *req, const cJSON *root, llm_api_error *err)
{
    llm_sampling_params  *s = &req->sampling;
    double                v;
    size_t                i;
    float                *dst;
    int                   g;

    for (i = 0; i < LLM_SAMPLING_N_RANGES; i++) {
        const llm_sampling_range *r = &llm_sampling_ranges[i];

        dst = (float *) ((char *) s + r->offset);
        if (read_decimal(root, r->name, r->min, r->min_open, r->max, dst, &g,
                         err) != 0)
        {
            return -1;
        }
        req->given |= g ? r->given : 0;
    }

    /* top_k: -1 and 0 both mean off (vLLM uses -1, we store 0) */
    if (read_int(root, "top_k", LLM_TOP_K_MIN, INT32_MAX, &v, &g, err) != 0) {
        return -1;
    }
    if (g) {
        s->top_k = v > 0 ? (int) v : 0;
        req->given |= LLM_API_GIVEN_TOP_K;
    }
    /* int64; a double holds it exactly only up to 2^53 */
    if (read_int(root, "seed", -9223372036854775808.0, 9223372036854774784.0,
                 &v, &g, err) != 0)
    {
        return -1;
    }
    if (g) {
        s->seed = (uint64_t) (int64_t) v;
        s->has_seed = 1;
        req->given |= LLM_API_GIVEN_SEED;
    }
    return 0;
}


/* max_tokens (deprecated by OpenAI) and max_completion_tokens: the latter
   wins when both are set */
static int
parse_max_tokens(llm_api_request *req, const cJSON *root, llm_api_error *err)
{
    double  a, b;
    int     ga, gb;

    if (read_int(root, "max_tokens", 1, INT32_MAX, &a, &ga, err) != 0
        || read_int(root, "max_completion_tokens", 1, INT32_MAX, &b, &gb, err)
           != 0)
    {
        return -1;
    }
    if (ga || gb) {
        req->max_tokens = (int) (gb ? b : a);
        req->given |= LLM_API_GIVEN_MAX_TOKENS;
    }
    return 0;
}


static int
add_stop(llm_api_request *req, const cJSON *v, const char *param,
    const llm_api_limits *lim, llm_api_error *err)
{
    llm_stop_str  *s = &req->stop[req->n_stop];
    size_t         len;

    if (!cJSON_IsString(v)) {
        return fail_type(err, param, "a string", v);
    }
    len = strlen(v->valuestring);
    if (len == 0) {
        return llm_api_fail(err, 400, "empty_string", param,
                            "Invalid '%s': empty string. Expected a string "
                            "with minimum length 1, but got an empty string "
                            "instead.",
                            param);
    }
    if (len > lim->max_stop_len) {
        return llm_api_fail(err, 400, "string_above_max_length", param,
                            "Invalid '%s': string too long. Expected a string "
                            "with maximum length %zu, but got a string with "
                            "length %zu instead.",
                            param, lim->max_stop_len, len);
    }
    s->ptr = dup_string(v->valuestring, len);
    if (s->ptr == NULL) {
        return llm_api_fail_oom(err);
    }
    s->len = len;
    req->n_stop++;
    return 0;
}


static int
parse_stop(llm_api_request *req, const cJSON *root, const llm_api_limits *lim,
    llm_api_error *err)
{
    const cJSON  *stop, *v;
    char          p[64];
    int           n, i = 0;

    stop = llm_api_field(root, "stop");
    if (stop == NULL) {
        return 0;
    }
    if (!cJSON_IsString(stop) && !cJSON_IsArray(stop)) {
        return fail_type(err, "stop", "a string or an array of strings",
                         stop);
    }
    n = cJSON_IsString(stop) ? 1 : cJSON_GetArraySize(stop);
    if (n > lim->max_stop) {
        return fail_too_long(err, "stop", lim->max_stop, n);
    }
    if (n == 0) {
        return 0;
    }
    req->stop = calloc((size_t) n, sizeof(*req->stop));
    if (req->stop == NULL) {
        return llm_api_fail_oom(err);
    }
    if (cJSON_IsString(stop)) {
        return add_stop(req, stop, "stop", lim, err);
    }
    cJSON_ArrayForEach(v, stop) {
        snprintf(p, sizeof(p), "stop[%d]", i++);
        if (add_stop(req, v, p, lim, err) != 0) {
            return -1;
        }
    }
    return 0;
}


/* "123" -> 123 when it is a plain decimal token id in [0, max] */
static int
token_key(const char *key, double max, int32_t *id)
{
    double  v = 0;
    size_t  i;

    for (i = 0; key[i] != '\0'; i++) {
        if (key[i] < '0' || key[i] > '9' || i >= 10) {
            return -1;
        }
        v = v * 10 + (key[i] - '0');
    }
    if (i == 0 || v > max) {
        return -1;
    }
    *id = (int32_t) v;
    return 0;
}


static int
parse_logit_bias(llm_api_request *req, const cJSON *root,
    const llm_api_limits *lim, llm_api_error *err)
{
    const cJSON  *lb, *v;
    double        max_id;
    int           n, i = 0;

    lb = llm_api_field(root, "logit_bias");
    if (lb == NULL) {
        return 0;
    }
    if (!cJSON_IsObject(lb)) {
        return fail_type(err, "logit_bias", "an object", lb);
    }
    n = cJSON_GetArraySize(lb);
    if (n > lim->max_logit_bias) {
        return llm_api_fail(err, 400, "object_above_max_properties",
                            "logit_bias",
                            "Invalid 'logit_bias': too many entries. Expected "
                            "at most %d, but got %d instead.",
                            lim->max_logit_bias, n);
    }
    if (n == 0) {
        return 0;
    }
    req->logit_bias = malloc((size_t) n * sizeof(*req->logit_bias));
    if (req->logit_bias == NULL) {
        return llm_api_fail_oom(err);
    }
    max_id = lim->vocab_size > 0 ? lim->vocab_size - 1 : INT32_MAX;
    cJSON_ArrayForEach(v, lb) {
        llm_logit_bias  *b = &req->logit_bias[i++];

        if (token_key(v->string, max_id, &b->token) != 0) {
            return llm_api_fail(err, 400, "invalid_value", "logit_bias",
                                "Invalid key in 'logit_bias': %.40s. Keys "
                                "must be token ids: non-negative integers "
                                "below %.15g.",
                                v->string, max_id + 1);
        }
        if (!cJSON_IsNumber(v) || !(fabs(v->valuedouble) <= 100.0)) {
            return llm_api_fail(err, 400, "invalid_value", "logit_bias",
                                "Invalid value in 'logit_bias' for key %.40s: "
                                "expected a number in [-100, 100].",
                                v->string);
        }
        b->bias = (float) v->valuedouble;
    }
    req->n_logit_bias = n;
    req->sampling.logit_bias = req->logit_bias;
    req->sampling.n_logit_bias = n;
    return 0;
}


/* chat: logprobs bool + top_logprobs 0..20; completions: logprobs 0..5,
   which is the number of top alternatives */
static int
parse_logprobs(llm_api_request *req, const cJSON *root,
    const llm_api_limits *lim, llm_api_error *err)
{
    llm_sampling_params  *s = &req->sampling;
    double                v;
    int                   g;

    if (req->endpoint == LLM_API_COMPLETION) {
        if (read_int(root, "logprobs", 0, lim->max_logprobs, &v, &g, err)) {
            return -1;
        }
        s->logprobs = g;
        s->top_logprobs = g ? (int) v : 0;
        return 0;
    }
    if (read_bool(root, "logprobs", &s->logprobs, err) != 0
        || read_int(root, "top_logprobs", 0, lim->max_top_logprobs, &v, &g,
                    err) != 0)
    {
        return -1;
    }
    if (g && !s->logprobs) {
        return llm_api_fail(err, 400, "invalid_value", "top_logprobs",
                            "Invalid value for 'top_logprobs': 'logprobs' "
                            "must be true when 'top_logprobs' is set.");
    }
    s->top_logprobs = g ? (int) v : 0;
    return 0;
}


static int
parse_n(llm_api_request *req, const cJSON *root, const llm_api_limits *lim,
    llm_api_error *err)
{
    cJSON   *v = llm_api_field(root, "n");
    double   n;

    req->n = 1;
    if (v == NULL) {
        return 0;
    }
    if (int_value(v, "n", 1, INT32_MAX, &n, err) != 0) {
        return -1;
    }
    if (n > lim->max_n) {
        if (lim->max_n == 1) {
            return llm_api_fail(err, 400, "unsupported_value", "n",
                                "Unsupported value for 'n': n > 1 is not "
                                "supported by this server (got %.15g).", n);
        }
        return fail_above(err, "n", 1, "<=", lim->max_n, n);
    }
    req->n = (int) n;
    return 0;
}


static int
parse_stream(llm_api_request *req, const cJSON *root, llm_api_error *err)
{
    cJSON  *so;

    if (read_bool(root, "stream", &req->stream, err) != 0) {
        return -1;
    }
    so = llm_api_field(root, "stream_options");
    if (so == NULL) {
        return 0;
    }
    if (!cJSON_IsObject(so)) {
        return fail_type(err, "stream_options", "an object", so);
    }
    if (!req->stream) {
        return llm_api_fail(err, 400, "invalid_value", "stream_options",
                            "The 'stream_options' parameter is only allowed "
                            "when 'stream' is true.");
    }
    if (read_bool(so, "include_usage", &req->include_usage, err) != 0) {
        snprintf(err->param, sizeof(err->param),
                 "stream_options.include_usage");
        snprintf(err->message, sizeof(err->message), "Invalid type for "
                 "'stream_options.include_usage': expected a boolean, but "
                 "got %s instead.",
                 json_kind(cJSON_GetObjectItemCaseSensitive(so,
                                                            "include_usage")));
        return -1;
    }
    return 0;
}


static int
parse_misc(llm_api_request *req, const cJSON *root, llm_api_error *err)
{
    const char  *user;
    double       v;
    int          g;

    if (read_bool(root, "ignore_eos", &req->ignore_eos, err) != 0
        || read_bool(root, "speculative", &req->speculative, err) != 0
        || read_int(root, "priority", INT32_MIN, INT32_MAX, &v, &g, err) != 0
        || read_string(root, "user", &user, err) != 0)
    {
        return -1;
    }
    req->priority = g ? (int) v : 0;
    req->given |= g ? LLM_API_GIVEN_PRIORITY : 0;
    if (user != NULL) {
        req->user = dup_string(user, strlen(user));
        if (req->user == NULL) {
            return llm_api_fail_oom(err);
        }
    }
    return 0;
}


/*
 * What the chat template reads besides the conversation: reasoning_effort
 * (OpenAI's; gpt-oss's template writes it into its system message) and
 * chat_template_kwargs (vLLM's: any variable, e.g. enable_thinking), which
 * win. A kwarg may not replace what the context itself holds: the
 * special tokens are trusted text (docs/jinja.md, "Request text").
 */
static int
parse_template_vars(llm_api_request *req, const cJSON *root,
    llm_api_error *err)
{
    static const char *const  efforts[] = {
        "none", "minimal", "low", "medium", "high", "xhigh", NULL
    };
    static const char *const  reserved[] = {
        "messages", "tools", "documents", "add_generation_prompt",
        "bos_token", "eos_token", "unk_token", "pad_token", "sep_token",
        "cls_token", "mask_token", "additional_special_tokens", NULL
    };
    const char    *e;
    const cJSON   *kw, *k;
    int            i;

    if (read_string(root, "reasoning_effort", &e, err) != 0) {
        return -1;
    }
    if (e != NULL) {
        for (i = 0; efforts[i] && strcmp(e, efforts[i]) != 0; i++) {
            /* void */
        }
        if (efforts[i] == NULL) {
            return llm_api_fail(err, 400, "invalid_value", "reasoning_effort",
                                "Invalid value: '%.32s'. Supported values "
                                "are: 'none', 'minimal', 'low', 'medium', "
                                "'high' and 'xhigh'.", e);
        }
        req->reasoning_effort = dup_string(e, strlen(e));
        if (req->reasoning_effort == NULL) {
            return llm_api_fail_oom(err);
        }
    }

    kw = llm_api_field(root, "chat_template_kwargs");
    if (kw == NULL || cJSON_IsNull(kw)) {
        return 0;
    }
    if (!cJSON_IsObject(kw)) {
        return fail_type(err, "chat_template_kwargs", "an object", kw);
    }
    cJSON_ArrayForEach(k, kw) {
        for (i = 0; reserved[i]; i++) {
            if (strcmp(k->string, reserved[i]) == 0) {
                return llm_api_fail(err, 400, "invalid_value",
                                    "chat_template_kwargs",
                                    "chat_template_kwargs may not set "
                                    "'%s'.", reserved[i]);
            }
        }
    }
    req->template_kwargs = cJSON_Duplicate(kw, 1);
    return req->template_kwargs ? 0 : llm_api_fail_oom(err);
}


/*
 * Fields of OpenAI's API that change what the answer means and that we do
 * not implement: refusing them is better than answering something else.
 */
static int
parse_unsupported(llm_api_request *req, const cJSON *root,
    llm_api_error *err)
{
    const char   *suffix;
    double        v;
    int           echo = 0, g;

    if (req->endpoint == LLM_API_COMPLETION) {
        if (read_bool(root, "echo", &echo, err) != 0
            || read_int(root, "best_of", 1, INT32_MAX, &v, &g, err) != 0
            || read_string(root, "suffix", &suffix, err) != 0)
        {
            return -1;
        }
        if (echo) {
            return fail_unsupported(err, "echo", "echo is not supported.");
        }
        if (g && v > 1) {
            return fail_unsupported(err, "best_of",
                                    "best_of > 1 is not supported.");
        }
        /* fill in the middle: the model's FIM tokens decide whether it
           can be served (the worker knows them, ngx_http_llm_generate.c) */
        if (suffix != NULL && suffix[0] != '\0') {
            req->suffix_len = strlen(suffix);
            req->suffix = dup_string(suffix, req->suffix_len);
            if (req->suffix == NULL) {
                return llm_api_fail_oom(err);
            }
        }
    }
    return 0;
}


/* ---------------------------------------------------------------------------
 * response_format: the output constraint (structured outputs)
 */

/* obj.name as a string, param naming it; *out NULL when absent or null */
static int
nested_string(const cJSON *obj, const char *name, const char *param,
    const char **out, llm_api_error *err)
{
    cJSON  *v = llm_api_field(obj, name);

    *out = NULL;
    if (v == NULL) {
        return 0;
    }
    if (!cJSON_IsString(v)) {
        return fail_type(err, param, "a string", v);
    }
    *out = v->valuestring;
    return 0;
}


/* OpenAI's rule for json_schema.name: ^[a-zA-Z0-9_-]+$, at most 64 */
static int
check_schema_name(const cJSON *js, llm_api_error *err)
{
    const char  *param = "response_format.json_schema.name", *name;
    size_t       i, len;

    if (nested_string(js, "name", param, &name, err) != 0) {
        return -1;
    }
    if (name == NULL) {
        return llm_api_fail_missing(err, param);
    }
    len = strlen(name);
    if (len > 64) {
        return llm_api_fail(err, 400, "string_above_max_length", param,
                            "Invalid '%s': string too long. Expected a string "
                            "with maximum length 64, but got a string with "
                            "length %zu instead.", param, len);
    }
    for (i = 0; i < len; i++) {
        if (!(name[i] >= 'a' && name[i] <= 'z')
            && !(name[i] >= 'A' && name[i] <= 'Z')
            && !(name[i] >= '0' && name[i] <= '9')
            && name[i] != '_' && name[i] != '-')
        {
            break;
        }
    }
    if (len == 0 || i < len) {
        return llm_api_fail(err, 400, "invalid_value", param,
                            "Invalid '%s': string does not match pattern. "
                            "Expected a string that matches the pattern "
                            "'^[a-zA-Z0-9_-]+$'.",
                            param);
    }
    return 0;
}


/* the constraint's text, owned by req; past LLM_CONSTRAINT_MAX_BYTES a 400 */
static int
set_constraint(llm_api_request *req, int kind, const char *text, size_t len,
    const char *what, llm_api_error *err)
{
    if (len > LLM_CONSTRAINT_MAX_BYTES) {
        return llm_api_fail(err, 400, "string_above_max_length",
                            "response_format",
                            "Invalid 'response_format': the %s is %zu "
                            "bytes%s; at most %d are accepted.", what, len,
                            kind == LLM_CONSTRAINT_JSON_SCHEMA
                            ? " once compacted" : "",
                            LLM_CONSTRAINT_MAX_BYTES);
    }
    req->constraint = dup_string(text, len);
    if (req->constraint == NULL) {
        return llm_api_fail_oom(err);
    }
    req->constraint_kind = kind;
    req->constraint_len = len;
    return 0;
}


static int
parse_json_schema(llm_api_request *req, const cJSON *rf, llm_api_error *err)
{
    const cJSON  *js, *schema, *strict;
    const char   *desc;
    char         *text;
    int           rc;

    js = llm_api_field(rf, "json_schema");
    if (js == NULL) {
        return llm_api_fail_missing(err, "response_format.json_schema");
    }
    if (!cJSON_IsObject(js)) {
        return fail_type(err, "response_format.json_schema", "an object",
                         js);
    }
    if (check_schema_name(js, err) != 0
        || nested_string(js, "description",
                         "response_format.json_schema.description", &desc,
                         err) != 0)
    {
        return -1;
    }
    strict = llm_api_field(js, "strict");
    if (strict != NULL && !cJSON_IsBool(strict)) {
        return fail_type(err, "response_format.json_schema.strict",
                         "a boolean", strict);
    }
    /* strict: what the grammar cannot enforce is refused; else relaxed
       and named (docs/api.md, "Structured outputs") */
    req->constraint_strict = cJSON_IsTrue(strict);
    schema = llm_api_field(js, "schema");
    if (schema == NULL) {
        return llm_api_fail_missing(err, "response_format.json_schema.schema");
    }
    if (!cJSON_IsObject(schema)) {
        return fail_type(err, "response_format.json_schema.schema",
                         "an object", schema);
    }
    text = cJSON_PrintUnformatted(schema);
    if (text == NULL) {
        return llm_api_fail_oom(err);
    }
    rc = set_constraint(req, LLM_CONSTRAINT_JSON_SCHEMA, text, strlen(text),
                        "schema", err);
    cJSON_free(text);
    return rc;
}


/* {"type": "grammar", "grammar": "..."}, {"type": "regex", "regex": ...} */
static int
parse_source(llm_api_request *req, const cJSON *rf, const char *name,
    int kind, llm_api_error *err)
{
    char         param[48];
    const char  *src;

    snprintf(param, sizeof(param), "response_format.%s", name);
    if (nested_string(rf, name, param, &src, err) != 0) {
        return -1;
    }
    if (src == NULL) {
        return llm_api_fail_missing(err, param);
    }
    if (src[0] == '\0') {
        return llm_api_fail(err, 400, "invalid_value", param,
                            "Invalid '%s': expected a non-empty string.",
                            param);
    }
    return set_constraint(req, kind, src, strlen(src), name, err);
}


/*
 * response_format (docs/api.md, "Structured outputs"): text (none),
 * json_object, json_schema, and our grammar and regex. The engine
 * compiles the constraint; here only its shape and size are checked.
 */
static int
parse_response_format(llm_api_request *req, const cJSON *root,
    llm_api_error *err)
{
    const cJSON  *rf, *type;
    const char   *t;

    rf = llm_api_field(root, "response_format");
    if (rf == NULL) {
        return 0;
    }
    if (!cJSON_IsObject(rf)) {
        return fail_type(err, "response_format", "an object", rf);
    }
    type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (type == NULL) {
        return llm_api_fail_missing(err, "response_format.type");
    }
    if (!cJSON_IsString(type)) {
        return fail_type(err, "response_format.type", "a string", type);
    }
    t = type->valuestring;
    if (strcmp(t, "text") == 0) {
        return 0;
    }
    if (strcmp(t, "json_object") == 0) {
        req->constraint_kind = LLM_CONSTRAINT_JSON_OBJECT;
        return 0;
    }
    if (strcmp(t, "json_schema") == 0) {
        return parse_json_schema(req, rf, err);
    }
    if (strcmp(t, "grammar") == 0) {
        return parse_source(req, rf, "grammar", LLM_CONSTRAINT_GRAMMAR, err);
    }
    if (strcmp(t, "regex") == 0) {
        return parse_source(req, rf, "regex", LLM_CONSTRAINT_REGEX, err);
    }
    return llm_api_fail(err, 400, "unsupported_value", "response_format.type",
                        "Unsupported value for 'response_format.type': "
                        "'%.40s' is not supported; expected 'text', "
                        "'json_object', 'json_schema', 'grammar' or 'regex'.",
                        t);
}


/* ---------------------------------------------------------------------------
 * the entry point
 */

static int
parse_fields(llm_api_request *req, const cJSON *root,
    const llm_api_limits *lim, llm_api_error *err)
{
    if (parse_model(req, root, err) != 0) {
        return -1;
    }
    if (req->endpoint == LLM_API_CHAT
        ? parse_messages(req, root, lim, err)
        : parse_prompt(req, root, lim, err))
    {
        return -1;
    }
    if (parse_max_tokens(req, root, err) != 0
        || parse_sampling(req, root, err) != 0
        || parse_stop(req, root, lim, err) != 0
        || parse_logit_bias(req, root, lim, err) != 0
        || parse_logprobs(req, root, lim, err) != 0
        || parse_n(req, root, lim, err) != 0
        || parse_stream(req, root, err) != 0
        || parse_misc(req, root, err) != 0
        || parse_unsupported(req, root, err) != 0
        || parse_response_format(req, root, err) != 0
        || (req->endpoint == LLM_API_CHAT
            && (llm_tools_parse(req, root, err) != 0
                || parse_template_vars(req, root, err) != 0)))
    {
        return -1;
    }
    {
        const cJSON  *ids = llm_api_field(root, "stop_token_ids");

        if (ids != NULL
            && parse_token_ids(ids, "stop_token_ids", lim->max_stop_ids,
                               lim->vocab_size, 1, &req->stop_ids,
                               &req->n_stop_ids, err) != 0)
        {
            return -1;
        }
    }
    return 0;
}


int
llm_api_parse(llm_api_request *req, const char *body, size_t len,
    int endpoint, const llm_api_limits *lim, llm_api_error *err)
{
    llm_api_limits  defaults;
    cJSON          *root;
    int             rc;

    memset(req, 0, sizeof(*req));
    memset(err, 0, sizeof(*err));
    llm_sampling_params_default(&req->sampling);
    req->n = 1;
    req->speculative = -1;
    req->endpoint = endpoint;
    if (lim == NULL) {
        llm_api_limits_default(&defaults);
        lim = &defaults;
    }
    if (endpoint != LLM_API_CHAT && endpoint != LLM_API_COMPLETION) {
        return llm_api_fail(err, 500, "internal_error", "",
                            "Unknown API endpoint %d.", endpoint);
    }
    root = parse_body(body, len, lim, err);
    if (root == NULL) {
        return -1;
    }
    rc = parse_fields(req, root, lim, err);
    cJSON_Delete(root);
    if (rc != 0) {
        llm_api_request_free(req);
        req->endpoint = endpoint;
    }
    return rc;
}


void
llm_api_request_free(llm_api_request *req)
{
    int  i;

    free(req->model);
    cJSON_Delete(req->messages);
    free(req->prompt);
    free(req->suffix);
    free(req->prompt_ids);
    free(req->logit_bias);
    for (i = 0; i < req->n_stop; i++) {
        free(req->stop[i].ptr);
    }
    free(req->stop);
    free(req->stop_ids);
    free(req->user);
    free(req->constraint);
    cJSON_Delete(req->tools);
    free(req->tool_name);
    free(req->reasoning_effort);
    cJSON_Delete(req->template_kwargs);
    memset(req, 0, sizeof(*req));
}
