/*
 * vLLM's /tokenize and /detokenize bodies (api/tokenize.h). The fields
 * /tokenize adds to a chat or completion body (add_generation_prompt,
 * add_special_tokens, return_token_strs) are taken out and the rest is
 * the request the chat parser reads, so its checks and its errors hold.
 *
 * defines: llm_tokenize_to_request, llm_detokenize_parse
 */
#include "api/tokenize.h"
#include "api/error.h"
#include "api/json_strict.h"

#include <stdlib.h>
#include <string.h>


/* the body as JSON; what the chat parser refuses unread (size, strict
   JSON, depth, values) is refused in its words */
static cJSON *
tok_parse(const char *body, size_t len, const llm_api_limits *lim,
    llm_api_error *err)
{
    cJSON            *root;
    llm_api_limits    def;
    llm_api_request   req;
    llm_json_result   res;

    if (lim == NULL) {
        llm_api_limits_default(&def);
        lim = &def;
    }

    if ((lim->max_body && len > lim->max_body)
        || llm_json_check(body, len, lim->max_depth, lim->max_values,
                          LLM_JSON_NO_NUL, &res) != LLM_JSON_OK)
    {
        memset(&req, 0, sizeof(req));
        if (llm_api_parse(&req, body, len, LLM_API_CHAT, lim, err) == 0) {
            llm_api_fail(err, 400, "invalid_json", "", "The body is not "
                         "valid JSON.");
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
        llm_api_fail(err, 400, "invalid_type", "", "Invalid type for the "
                     "body: expected an object.");
        return NULL;
    }
    return root;
}


/* an optional boolean member, taken out of obj; -1 when absent */
static int
tok_flag(cJSON *obj, const char *name, llm_api_error *err)
{
    int     v;
    cJSON  *f = llm_api_field(obj, name);

    if (f == NULL) {
        cJSON_DeleteItemFromObjectCaseSensitive(obj, name);
        return -1;
    }
    if (!cJSON_IsBool(f)) {
        llm_api_fail(err, 400, "invalid_type", name, "Invalid type for "
                     "'%s': expected a boolean.", name);
        return -2;
    }
    v = cJSON_IsTrue(f);
    cJSON_DeleteItemFromObjectCaseSensitive(obj, name);
    return v;
}


char *
llm_tokenize_to_request(const char *body, size_t len, const char *model,
    const llm_api_limits *lim, llm_tokenize_opts *opts, size_t *out_len,
    llm_api_error *err)
{
    int     has_msgs, has_prompt, agp, ast, rts;
    char   *text;
    cJSON  *root;

    memset(err, 0, sizeof(*err));
    memset(opts, 0, sizeof(*opts));

    root = tok_parse(body, len, lim, err);
    if (root == NULL) {
        return NULL;
    }

    has_msgs = llm_api_field(root, "messages") != NULL;
    has_prompt = llm_api_field(root, "prompt") != NULL;
    if (has_msgs == has_prompt) {
        cJSON_Delete(root);
        llm_api_fail(err, 400, "invalid_value", has_msgs ? "prompt" : "",
                     "Give either 'prompt' or 'messages'.");
        return NULL;
    }

    agp = tok_flag(root, "add_generation_prompt", err);
    ast = (agp < -1) ? -2 : tok_flag(root, "add_special_tokens", err);
    rts = (ast < -1) ? -2 : tok_flag(root, "return_token_strs", err);
    if (rts < -1) {
        cJSON_Delete(root);
        return NULL;
    }

    opts->chat = has_msgs;
    opts->add_generation_prompt = agp != 0;
    opts->add_special_tokens = ast;
    opts->return_token_strs = rts == 1;

    if (llm_api_field(root, "model") == NULL) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "model");
        if (cJSON_AddStringToObject(root, "model", model) == NULL) {
            cJSON_Delete(root);
            llm_api_fail_oom(err);
            return NULL;
        }
    }

    text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (text == NULL) {
        llm_api_fail_oom(err);
        return NULL;
    }
    *out_len = strlen(text);
    return text;
}


int
llm_detokenize_parse(const char *body, size_t len, int32_t n_vocab,
    const llm_api_limits *lim, int32_t **ids, int *n, llm_api_error *err)
{
    int           i, count;
    cJSON        *root, *tokens;
    const cJSON  *t;

    memset(err, 0, sizeof(*err));
    *ids = NULL;
    *n = 0;

    root = tok_parse(body, len, lim, err);
    if (root == NULL) {
        return -1;
    }

    tokens = llm_api_field(root, "tokens");
    if (tokens == NULL) {
        cJSON_Delete(root);
        return llm_api_fail_missing(err, "tokens");
    }
    if (!cJSON_IsArray(tokens)) {
        cJSON_Delete(root);
        return llm_api_fail(err, 400, "invalid_type", "tokens", "Invalid "
                            "type for 'tokens': expected an array of "
                            "integers.");
    }

    count = cJSON_GetArraySize(tokens);
    *ids = malloc((count ? count : 1) * sizeof(int32_t));
    if (*ids == NULL) {
        cJSON_Delete(root);
        return llm_api_fail_oom(err);
    }

    i = 0;
    cJSON_ArrayForEach(t, tokens) {
        /* the range first: a cast of a double out of range is undefined */
        if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0)
            || t->valuedouble >= n_vocab
            || t->valuedouble != (double) (int32_t) t->valuedouble)
        {
            free(*ids);
            *ids = NULL;
            cJSON_Delete(root);
            return llm_api_fail(err, 400, "invalid_value", "tokens",
                                "Invalid 'tokens[%d]': expected a token id "
                                "in [0, %d).", i, (int) n_vocab);
        }
        (*ids)[i++] = (int32_t) t->valuedouble;
    }

    *n = count;
    cJSON_Delete(root);
    return 0;
}
