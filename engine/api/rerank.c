/*
 * POST /v1/rerank's body, a pair's token ids, and the reply (rerank.h).
 *
 * defines: llm_rerank_parse, llm_rerank_request_free,
 *          llm_rerank_yes_no_ids, llm_rerank_pair_ids, llm_rerank_reply
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api/embeddings.h"
#include "api/error.h"
#include "api/rerank.h"


/* Qwen3-Reranker's prompt around "<Instruct>: ...<Document>: ..." */
static const char  rerank_prefix[] =
    "<|im_start|>system\nJudge whether the Document meets the requirements "
    "based on the Query and the Instruct provided. Note that the answer can "
    "only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n";
static const char  rerank_suffix[] =
    "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";


/* a copy of a non-empty string field; 0, or -1 with err filled */
static int
rerank_string(const cJSON *f, const char *name, char **out, size_t *len,
    llm_api_error *err)
{
    size_t  n;

    if (!cJSON_IsString(f) || f->valuestring[0] == '\0') {
        return llm_api_fail(err, 400, "invalid_type", name, "Invalid type "
                            "for '%s': expected a non-empty string.", name);
    }
    n = strlen(f->valuestring);
    *out = malloc(n + 1);
    if (*out == NULL) {
        return llm_api_fail_oom(err);
    }
    memcpy(*out, f->valuestring, n + 1);
    if (len != NULL) {
        *len = n;
    }
    return 0;
}


/* documents: strings, or {"text": string} as Cohere's and Jina's */
static int
rerank_documents(llm_rerank_request *req, const cJSON *docs,
    llm_api_error *err)
{
    int           n, i = 0;
    char          name[40];
    const cJSON  *v, *t;

    if (docs == NULL) {
        return llm_api_fail_missing(err, "documents");
    }
    n = cJSON_IsArray(docs) ? cJSON_GetArraySize(docs) : -1;
    if (n < 1 || n > LLM_RERANK_MAX_DOCUMENTS) {
        return llm_api_fail(err, 400, "invalid_value", "documents",
                            "documents must be an array of 1..%d strings "
                            "(%d given)", LLM_RERANK_MAX_DOCUMENTS, n);
    }
    req->doc = calloc(n, sizeof(*req->doc));
    req->doc_len = calloc(n, sizeof(*req->doc_len));
    if (req->doc == NULL || req->doc_len == NULL) {
        return llm_api_fail_oom(err);
    }
    req->n_docs = n;
    cJSON_ArrayForEach(v, docs) {
        t = cJSON_IsObject(v) ? llm_api_field(v, "text") : v;
        snprintf(name, sizeof(name), "documents[%d]", i);
        if (rerank_string(t, name, &req->doc[i], &req->doc_len[i], err)
            != 0)
        {
            return -1;
        }
        i++;
    }
    return 0;
}


static int
rerank_fields(llm_rerank_request *req, const cJSON *root,
    llm_api_error *err)
{
    double        d;
    const cJSON  *f;

    f = llm_api_field(root, "model");
    if (f != NULL && rerank_string(f, "model", &req->model, NULL, err) != 0)
    {
        return -1;
    }

    f = llm_api_field(root, "query");
    if (f == NULL) {
        return llm_api_fail_missing(err, "query");
    }
    if (rerank_string(f, "query", &req->query, &req->query_len, err) != 0) {
        return -1;
    }

    f = llm_api_field(root, "top_n");
    if (f != NULL) {
        d = cJSON_IsNumber(f) ? f->valuedouble : -1;
        if (!cJSON_IsNumber(f) || d != floor(d) || d < 0) {
            return llm_api_fail(err, 400, "invalid_value", "top_n",
                                "top_n must be an integer of at least 0.");
        }
        req->top_n = d > LLM_RERANK_MAX_DOCUMENTS ? LLM_RERANK_MAX_DOCUMENTS
                                                  : (int) d;
    }

    f = llm_api_field(root, "return_documents");
    if (f != NULL && !cJSON_IsBool(f)) {
        return llm_api_fail(err, 400, "invalid_type", "return_documents",
                            "Invalid type for 'return_documents': expected "
                            "a boolean.");
    }
    req->return_documents = cJSON_IsTrue(f);

    f = llm_api_field(root, "instruction");
    if (f != NULL
        && rerank_string(f, "instruction", &req->instruction, NULL, err)
           != 0)
    {
        return -1;
    }

    f = llm_api_field(root, "user");
    if (f != NULL && !cJSON_IsString(f)) {
        return llm_api_fail(err, 400, "invalid_type", "user", "Invalid "
                            "type for 'user': expected a string.");
    }

    return rerank_documents(req, llm_api_field(root, "documents"), err);
}


int
llm_rerank_parse(llm_rerank_request *req, const char *body, size_t len,
    const llm_api_limits *lim, llm_api_error *err)
{
    int              rc;
    cJSON           *root;
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
    rc = rerank_fields(req, root, err);
    cJSON_Delete(root);
    return rc;
}


void
llm_rerank_request_free(llm_rerank_request *req)
{
    int  i;

    for (i = 0; req->doc != NULL && i < req->n_docs; i++) {
        free(req->doc[i]);
    }
    free(req->doc);
    free(req->doc_len);
    free(req->model);
    free(req->query);
    free(req->instruction);
    memset(req, 0, sizeof(*req));
}


/* text's ids after the n already in ids[0..cap): the new count, or -1 */
static int
rerank_append(const llm_tokenizer *t, const char *text, size_t len,
    int add_special, int parse_special, int32_t *ids, int n, int cap)
{
    int  k;

    k = llm_tokenize(t, text, len, add_special, parse_special,
                     n < cap ? ids + n : NULL, n < cap ? cap - n : 0);
    return k < 0 ? -1 : n + k;
}


int
llm_rerank_yes_no_ids(const llm_tokenizer *t, const char *instruction,
    const char *query, size_t query_len, const char *doc, size_t doc_len,
    int32_t *ids, int cap)
{
    int      n;
    char    *body;
    size_t   ilen, len;

    if (instruction == NULL) {
        instruction = LLM_RERANK_INSTRUCTION;
    }
    ilen = strlen(instruction);
    len = ilen + query_len + doc_len + 64;
    body = malloc(len);
    if (body == NULL) {
        return -1;
    }
    len = (size_t) snprintf(body, len, "<Instruct>: %s\n<Query>: %.*s\n"
                            "<Document>: %.*s", instruction,
                            (int) query_len, query, (int) doc_len, doc);

    n = rerank_append(t, rerank_prefix, sizeof(rerank_prefix) - 1, 0, 1,
                      ids, 0, cap);
    if (n >= 0) {
        n = rerank_append(t, body, len, 0, 0, ids, n, cap);
    }
    if (n >= 0) {
        n = rerank_append(t, rerank_suffix, sizeof(rerank_suffix) - 1, 0, 1,
                          ids, n, cap);
    }
    free(body);
    return n;
}


int
llm_rerank_pair_ids(const llm_tokenizer *t, const char *query,
    size_t query_len, const char *doc, size_t doc_len, int32_t *ids,
    int cap, int *split)
{
    int  n, k, skip;

    n = rerank_append(t, query, query_len, 1, 0, ids, 0, cap);
    if (n < 0) {
        return -1;
    }
    *split = n;
    skip = llm_tokenizer_add_bos(t) ? 1 : 0;
    k = llm_tokenize(t, doc, doc_len, 1, 0, NULL, 0);
    if (k < 0) {
        return -1;
    }
    if (n + k - skip > cap) {
        return n + k - skip;
    }
    /* the document's own ids, then its leading BOS/[CLS] dropped */
    if (llm_tokenize(t, doc, doc_len, 1, 0, ids + n, cap - n) != k) {
        return -1;
    }
    if (skip) {
        memmove(ids + n, ids + n + 1, (size_t) (k - 1) * sizeof(*ids));
    }
    return n + k - skip;
}


typedef struct {
    int    index;
    float  score;
} llm_rerank_result;


/* results in score order, highest first; ties keep the input order */
static int
rerank_cmp(const void *a, const void *b)
{
    const llm_rerank_result  *x = a, *y = b;

    if (x->score != y->score) {
        return x->score > y->score ? -1 : 1;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}


cJSON *
llm_rerank_reply(const llm_rerank_request *req, const char *id,
    const char *model, const float *score, long prompt_tokens)
{
    int                 i, n;
    cJSON              *root, *results, *r, *doc, *usage;
    llm_rerank_result  *order;

    order = malloc((size_t) req->n_docs * sizeof(*order));
    root = cJSON_CreateObject();
    if (order == NULL || root == NULL) {
        free(order);
        cJSON_Delete(root);
        return NULL;
    }
    for (i = 0; i < req->n_docs; i++) {
        order[i].index = i;
        order[i].score = score[i];
    }
    qsort(order, (size_t) req->n_docs, sizeof(*order), rerank_cmp);

    n = req->top_n > 0 && req->top_n < req->n_docs ? req->top_n
                                                   : req->n_docs;
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "object", "rerank");
    cJSON_AddStringToObject(root, "model", model);
    results = cJSON_AddArrayToObject(root, "results");
    for (i = 0; results != NULL && i < n; i++) {
        r = cJSON_CreateObject();
        if (r == NULL || !cJSON_AddItemToArray(results, r)) {
            cJSON_Delete(r);
            results = NULL;
            break;
        }
        cJSON_AddNumberToObject(r, "index", order[i].index);
        cJSON_AddNumberToObject(r, "relevance_score", order[i].score);
        if (req->return_documents) {
            doc = cJSON_AddObjectToObject(r, "document");
            cJSON_AddStringToObject(doc, "text", req->doc[order[i].index]);
        }
    }
    usage = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(usage, "prompt_tokens", (double) prompt_tokens);
    cJSON_AddNumberToObject(usage, "total_tokens", (double) prompt_tokens);
    free(order);

    if (results == NULL || usage == NULL) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
