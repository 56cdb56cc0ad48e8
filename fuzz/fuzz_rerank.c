/*
 * libFuzzer harness for the /v1/rerank body (api/rerank.h).
 *
 *   build/fuzz/fuzz_rerank -max_total_time=60 fuzz/corpus/rerank
 *
 * Beyond "no crash": an accepted body has a non-empty query and
 * 1..LLM_RERANK_MAX_DOCUMENTS non-empty documents, top_n 0..the bound; a
 * refusal has a status and a message in valid UTF-8; the reply of an
 * accepted body is JSON with min(top_n or all, documents) results sorted
 * by score, each index in range and given once.
 */
#include "api/rerank.h"
#include "text/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int                  i, n, idx;
    char                *text, seen[LLM_RERANK_MAX_DOCUMENTS];
    float                score[LLM_RERANK_MAX_DOCUMENTS];
    double               prev = 2.0, s;
    cJSON               *reply, *back, *res, *r;
    llm_api_error        e;
    llm_api_limits       lim;
    llm_rerank_request   req;

    llm_api_limits_default(&lim);

    memset(&e, 0, sizeof(e));
    if (llm_rerank_parse(&req, (const char *) data, size, &lim, &e) != 0) {
        if ((e.status != 400 && e.status != 413 && e.status != 500)
            || e.message[0] == '\0'
            || !llm_utf8_valid(e.message, strlen(e.message)))
        {
            abort();
        }
        llm_rerank_request_free(&req);
        return 0;
    }

    if (req.query == NULL || req.query_len == 0 || req.n_docs < 1
        || req.n_docs > LLM_RERANK_MAX_DOCUMENTS || req.top_n < 0
        || req.top_n > LLM_RERANK_MAX_DOCUMENTS)
    {
        abort();
    }
    for (i = 0; i < req.n_docs; i++) {
        if (req.doc[i] == NULL || req.doc_len[i] == 0
            || strlen(req.doc[i]) != req.doc_len[i])
        {
            abort();
        }
        score[i] = (float) ((i * 7919) % 101) / 100.0f;
        seen[i] = 0;
    }

    reply = llm_rerank_reply(&req, "rerank-0", "m", score, 1);
    text = reply ? cJSON_PrintUnformatted(reply) : NULL;
    back = text ? cJSON_Parse(text) : NULL;
    res = cJSON_GetObjectItem(back, "results");
    n = req.top_n > 0 && req.top_n < req.n_docs ? req.top_n : req.n_docs;
    if (reply != NULL && (back == NULL || cJSON_GetArraySize(res) != n)) {
        abort();
    }
    cJSON_ArrayForEach(r, res) {
        idx = cJSON_GetObjectItem(r, "index")->valueint;
        s = cJSON_GetObjectItem(r, "relevance_score")->valuedouble;
        if (idx < 0 || idx >= req.n_docs || seen[idx]++ || s > prev) {
            abort();
        }
        prev = s;
    }
    cJSON_Delete(back);
    cJSON_Delete(reply);
    free(text);
    llm_rerank_request_free(&req);
    return 0;
}
