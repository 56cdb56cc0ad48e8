/*
 * OpenAI's /v1/embeddings body and reply (embeddings.h).
 *
 * defines: llm_embed_root, llm_embed_parse, llm_embed_request_free,
 *          llm_embed_reply
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api/embeddings.h"
#include "api/error.h"
#include "api/json_strict.h"


/* the body as a cJSON object, or NULL with err filled (the messages of
   llm_api_parse for JSON faults, so every endpoint says them alike) */
cJSON *
llm_embed_root(const char *body, size_t len, const llm_api_limits *lim,
    llm_api_error *err)
{
    cJSON            *root;
    llm_api_request   req;
    llm_json_result   res;

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


static int
is_token_array(const cJSON *a)
{
    return cJSON_IsArray(a) && a->child != NULL
           && cJSON_IsNumber(a->child);
}


/* one input of ids (a non-empty array of integers below the vocabulary) */
static int
embed_ids(llm_embed_request *req, int i, const cJSON *a,
    const llm_api_limits *lim, llm_api_error *err)
{
    const cJSON  *v;
    int           n = cJSON_GetArraySize(a), k = 0;
    double        d;

    if (n < 1 || n > lim->max_prompt_ids) {
        return llm_api_fail(err, 400, "invalid_value", "input", "input[%d] "
                            "has %d token ids; 1..%d are allowed", i, n,
                            lim->max_prompt_ids);
    }
    req->ids[i] = malloc((size_t) n * sizeof(int32_t));
    if (req->ids[i] == NULL) {
        return llm_api_fail_oom(err);
    }
    cJSON_ArrayForEach(v, a) {
        d = cJSON_IsNumber(v) ? v->valuedouble : -1.0;
        if (!cJSON_IsNumber(v) || d != floor(d) || d < 0
            || d >= (lim->vocab_size > 0 ? lim->vocab_size : INT32_MAX))
        {
            return llm_api_fail(err, 400, "invalid_value", "input",
                                "input[%d][%d] is not a token id of the "
                                "model", i, k);
        }
        req->ids[i][k++] = (int32_t) d;
    }
    req->n_ids[i] = n;
    return 0;
}


static int
embed_text(llm_embed_request *req, int i, const cJSON *s,
    llm_api_error *err)
{
    size_t  n = strlen(s->valuestring);

    if (n == 0) {
        return llm_api_fail(err, 400, "invalid_value", "input", "input[%d] "
                            "is an empty string", i);
    }
    req->text[i] = malloc(n + 1);
    if (req->text[i] == NULL) {
        return llm_api_fail_oom(err);
    }
    memcpy(req->text[i], s->valuestring, n + 1);
    req->text_len[i] = n;
    return 0;
}


static int
embed_inputs(llm_embed_request *req, const cJSON *in,
    const llm_api_limits *lim, llm_api_error *err)
{
    const cJSON  *v;
    int           n, i = 0;

    if (in == NULL) {
        return llm_api_fail_missing(err, "input");
    }
    /* a string, or ids: one input; an array of strings or of arrays */
    n = (cJSON_IsString(in) || is_token_array(in)) ? 1
        : cJSON_IsArray(in) ? cJSON_GetArraySize(in) : -1;
    if (n < 1 || n > LLM_EMBED_MAX_INPUTS) {
        return llm_api_fail(err, 400, "invalid_value", "input", "input must "
                            "be a non-empty string, an array of 1..%d "
                            "strings, an array of token ids or an array of "
                            "arrays of token ids", LLM_EMBED_MAX_INPUTS);
    }
    req->text = calloc(n, sizeof(*req->text));
    req->text_len = calloc(n, sizeof(*req->text_len));
    req->ids = calloc(n, sizeof(*req->ids));
    req->n_ids = calloc(n, sizeof(*req->n_ids));
    if (req->text == NULL || req->text_len == NULL || req->ids == NULL
        || req->n_ids == NULL)
    {
        return llm_api_fail_oom(err);
    }
    req->n_inputs = n;
    if (cJSON_IsString(in)) {
        return embed_text(req, 0, in, err);
    }
    if (is_token_array(in)) {
        return embed_ids(req, 0, in, lim, err);
    }
    cJSON_ArrayForEach(v, in) {
        if (cJSON_IsString(v)) {
            if (embed_text(req, i, v, err) != 0) {
                return -1;
            }
        } else if (cJSON_IsArray(v)) {
            if (embed_ids(req, i, v, lim, err) != 0) {
                return -1;
            }
        } else {
            return llm_api_fail(err, 400, "invalid_type", "input",
                                "input[%d] must be a string or an array "
                                "of token ids", i);
        }
        i++;
    }
    return 0;
}


int
llm_embed_parse(llm_embed_request *req, const char *body, size_t len,
    const llm_api_limits *lim, llm_api_error *err)
{
    int              rc = -1;
    cJSON           *root, *f;
    double           d;
    llm_api_limits   def;

    memset(req, 0, sizeof(*req));
    if (lim == NULL) {
        llm_api_limits_default(&def);
        lim = &def;
    }
    root = llm_embed_root(body, len, lim, err);
    if (root == NULL) {
        return -1;
    }

    f = llm_api_field(root, "model");
    if (f == NULL) {
        llm_api_fail_missing(err, "model");
        goto done;
    }
    if (!cJSON_IsString(f) || f->valuestring[0] == '\0') {
        llm_api_fail(err, 400, "invalid_type", "model", "Invalid type for "
                     "'model': expected a non-empty string.");
        goto done;
    }
    req->model = strdup(f->valuestring);
    if (req->model == NULL) {
        llm_api_fail_oom(err);
        goto done;
    }

    f = llm_api_field(root, "encoding_format");
    if (f != NULL && (!cJSON_IsString(f)
                      || (strcmp(f->valuestring, "float") != 0
                          && strcmp(f->valuestring, "base64") != 0)))
    {
        llm_api_fail(err, 400, "invalid_value", "encoding_format",
                     "encoding_format must be 'float' or 'base64'.");
        goto done;
    }
    req->base64 = f != NULL && strcmp(f->valuestring, "base64") == 0;

    f = llm_api_field(root, "dimensions");
    if (f != NULL) {
        d = cJSON_IsNumber(f) ? f->valuedouble : 0;
        if (!cJSON_IsNumber(f) || d != floor(d) || d < 1 || d > 1 << 20) {
            llm_api_fail(err, 400, "invalid_value", "dimensions",
                         "dimensions must be an integer of at least 1.");
            goto done;
        }
        req->dimensions = (int) d;
    }

    f = llm_api_field(root, "user");
    if (f != NULL && !cJSON_IsString(f)) {
        llm_api_fail(err, 400, "invalid_type", "user", "Invalid type for "
                     "'user': expected a string.");
        goto done;
    }

    rc = embed_inputs(req, llm_api_field(root, "input"), lim, err);

done:
    cJSON_Delete(root);
    return rc;
}


void
llm_embed_request_free(llm_embed_request *req)
{
    int  i;

    for (i = 0; i < req->n_inputs; i++) {
        free(req->text ? req->text[i] : NULL);
        free(req->ids ? req->ids[i] : NULL);
    }
    free(req->text);
    free(req->text_len);
    free(req->ids);
    free(req->n_ids);
    free(req->model);
    memset(req, 0, sizeof(*req));
}


/* n bytes as standard base64 (RFC 4648, padded) into out (4 * ceil(n/3)
   + 1 bytes) */
static void
base64_encode(const unsigned char *in, size_t n, char *out)
{
    static const char  tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "abcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t             i;
    uint32_t           v;

    for (i = 0; i + 2 < n; i += 3) {
        v = (uint32_t) in[i] << 16 | (uint32_t) in[i + 1] << 8 | in[i + 2];
        *out++ = tab[v >> 18];
        *out++ = tab[(v >> 12) & 63];
        *out++ = tab[(v >> 6) & 63];
        *out++ = tab[v & 63];
    }
    if (i < n) {
        v = (uint32_t) in[i] << 16
            | (i + 1 < n ? (uint32_t) in[i + 1] << 8 : 0);
        *out++ = tab[v >> 18];
        *out++ = tab[(v >> 12) & 63];
        *out++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        *out++ = '=';
    }
    *out = '\0';
}


/* one vector: an array of numbers (each float printed so it reads back as
   the same float), or base64 of its little-endian float32 bytes */
static cJSON *
embed_vector(const float *v, int dims, int base64)
{
    cJSON          *a;
    char           *b;
    unsigned char  *bytes;
    int             i;

    if (!base64) {
        a = cJSON_CreateArray();
        for (i = 0; a != NULL && i < dims; i++) {
            if (!cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]))) {
                cJSON_Delete(a);
                return NULL;
            }
        }
        return a;
    }
    bytes = malloc((size_t) dims * 4);
    b = malloc(((size_t) dims * 4 + 2) / 3 * 4 + 1);
    if (bytes == NULL || b == NULL) {
        free(bytes);
        free(b);
        return NULL;
    }
    for (i = 0; i < dims; i++) {
        uint32_t  u;

        memcpy(&u, &v[i], 4);
        bytes[4 * i] = (unsigned char) u;
        bytes[4 * i + 1] = (unsigned char) (u >> 8);
        bytes[4 * i + 2] = (unsigned char) (u >> 16);
        bytes[4 * i + 3] = (unsigned char) (u >> 24);
    }
    base64_encode(bytes, (size_t) dims * 4, b);
    a = cJSON_CreateString(b);
    free(bytes);
    free(b);
    return a;
}


cJSON *
llm_embed_reply(const char *model, const float *const *vec, int n, int dims,
    int base64, long prompt_tokens)
{
    cJSON  *root, *data, *item, *usage, *e;
    int     i;

    root = cJSON_CreateObject();
    if (root == NULL
        || cJSON_AddStringToObject(root, "object", "list") == NULL
        || (data = cJSON_AddArrayToObject(root, "data")) == NULL)
    {
        goto done;
    }
    for (i = 0; i < n; i++) {
        item = cJSON_CreateObject();
        if (item == NULL || !cJSON_AddItemToArray(data, item)
            || cJSON_AddStringToObject(item, "object", "embedding") == NULL
            || cJSON_AddNumberToObject(item, "index", i) == NULL
            || (e = embed_vector(vec[i], dims, base64)) == NULL
            || !cJSON_AddItemToObject(item, "embedding", e))
        {
            goto done;
        }
    }
    if (cJSON_AddStringToObject(root, "model", model) == NULL
        || (usage = cJSON_AddObjectToObject(root, "usage")) == NULL
        || cJSON_AddNumberToObject(usage, "prompt_tokens",
                                   (double) prompt_tokens) == NULL
        || cJSON_AddNumberToObject(usage, "total_tokens",
                                   (double) prompt_tokens) == NULL)
    {
        goto done;
    }
    return root;

done:
    cJSON_Delete(root);
    return NULL;
}
