/*
 * libFuzzer harness for OpenAI's /v1/embeddings body (api/embeddings.h).
 *
 *   build/fuzz/fuzz_embeddings -max_total_time=60 fuzz/corpus/embeddings
 *
 * Beyond "no crash": an accepted body has 1..LLM_EMBED_MAX_INPUTS inputs,
 * each a non-empty text or 1..max_prompt_ids ids below the vocabulary,
 * dimensions 0 or >= 1, a model; a refusal has a status and a message in
 * valid UTF-8; the reply of an accepted body's inputs is JSON with one
 * embedding each.
 */
#include "api/embeddings.h"
#include "text/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB  1000


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int                 i, j;
    char               *text;
    float               v[4] = { 0.5f, -1.0f, 3e-39f, 0.0f };
    const float        *vec[LLM_EMBED_MAX_INPUTS];
    cJSON              *reply, *back;
    llm_api_error       e;
    llm_api_limits      lim;
    llm_embed_request   req;

    llm_api_limits_default(&lim);
    lim.vocab_size = VOCAB;

    memset(&e, 0, sizeof(e));
    if (llm_embed_parse(&req, (const char *) data, size, &lim, &e) != 0) {
        if ((e.status != 400 && e.status != 413 && e.status != 500)
            || e.message[0] == '\0'
            || !llm_utf8_valid(e.message, strlen(e.message)))
        {
            abort();
        }
        llm_embed_request_free(&req);
        return 0;
    }

    if (req.n_inputs < 1 || req.n_inputs > LLM_EMBED_MAX_INPUTS
        || req.model == NULL || req.model[0] == '\0' || req.dimensions < 0)
    {
        abort();
    }
    for (i = 0; i < req.n_inputs; i++) {
        if ((req.text[i] == NULL) == (req.ids[i] == NULL)) {
            abort();
        }
        if (req.text[i] != NULL
            && (req.text_len[i] == 0
                || strlen(req.text[i]) != req.text_len[i]))
        {
            abort();
        }
        for (j = 0; req.ids[i] != NULL && j < req.n_ids[i]; j++) {
            if (req.ids[i][j] < 0 || req.ids[i][j] >= VOCAB) {
                abort();
            }
        }
        if (req.ids[i] != NULL
            && (req.n_ids[i] < 1 || req.n_ids[i] > lim.max_prompt_ids))
        {
            abort();
        }
        vec[i] = v;
    }

    reply = llm_embed_reply(req.model, vec, req.n_inputs, 4, req.base64,
                            req.n_inputs);
    text = reply ? cJSON_PrintUnformatted(reply) : NULL;
    back = text ? cJSON_Parse(text) : NULL;
    if (reply != NULL && (back == NULL
        || cJSON_GetArraySize(cJSON_GetObjectItem(back, "data"))
           != req.n_inputs))
    {
        abort();
    }
    cJSON_Delete(back);
    cJSON_Delete(reply);
    free(text);
    llm_embed_request_free(&req);
    return 0;
}
