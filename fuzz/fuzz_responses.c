/*
 * libFuzzer harness for the Responses API's translation (api/responses.h):
 * a request body, alone and then as the continuation of a stored response
 * made from the same body.
 *
 *   make fuzz-smoke            (every harness, FUZZ_SECS each)
 *   build/fuzz/fuzz_responses -max_total_time=60 fuzz/corpus/responses
 *
 * Beyond "no crash": on success the chat body is JSON that cJSON reads
 * and that the chat parser answers (accepted or with a complete error),
 * every call of a tool offered comes back as an item naming a tool of the
 * request, and what a store keeps reads back as a conversation; on
 * failure the error is complete.
 */
#include "api/responses.h"
#include "text/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>


static void
check_error(const llm_api_error *e)
{
    if ((e->status != 400 && e->status != 413 && e->status != 500)
        || e->message[0] == '\0')
    {
        abort();
    }
}


static void
check_ok(llm_responses_req *rq, const llm_api_limits *lim)
{
    int                   i;
    char                 *kept;
    cJSON                *chat, *o, *item;
    llm_tool_call         call;
    llm_api_error         err;
    llm_api_request       req;
    llm_responses_req     next;
    llm_responses_result  res;

    chat = cJSON_Parse(rq->chat);
    if (chat == NULL || rq->chat_len != strlen(rq->chat)) {
        abort();
    }
    cJSON_Delete(chat);

    memset(&req, 0, sizeof(req));
    if (llm_api_parse(&req, rq->chat, rq->chat_len, LLM_API_CHAT, lim, &err)
        != 0)
    {
        check_error(&err);
    }
    llm_api_request_free(&req);

    /* each tool's call as the client's item */
    for (i = 0; i < rq->n_tools; i++) {
        memset(&call, 0, sizeof(call));
        strcpy(call.id, "call_1");
        call.name = rq->tools[i].name;
        call.arguments = "{\"input\":\"x\"}";
        item = llm_responses_call_item(rq, "fc_1", &call, "completed");
        if (item == NULL || strcmp(cJSON_GetStringValue(
                cJSON_GetObjectItem(item, "name")), rq->tools[i].tool) != 0)
        {
            abort();
        }
        cJSON_Delete(item);
    }

    memset(&res, 0, sizeof(res));
    res.id = "resp_0001";
    res.model = "m";
    res.status = "completed";
    res.text = "a\xff\xc3";
    res.text_len = 3;
    res.with_output = 1;
    o = llm_responses_object(rq, &res);
    if (o == NULL) {
        abort();
    }
    kept = llm_responses_stored(rq, o);
    cJSON_Delete(o);
    if (kept == NULL || !llm_utf8_valid(kept, strlen(kept))) {
        abort();
    }

    /* the body again, continuing what was kept */
    if (llm_responses_parse(&next, "{\"model\":\"m\",\"input\":\"go\"}", 27,
                            lim, 0, kept, strlen(kept), &err)
        != 0)
    {
        check_error(&err);
    }
    llm_responses_free(&next);
    free(kept);
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llm_api_error      err;
    llm_api_limits     lim;
    llm_responses_req  rq;

    llm_api_limits_default(&lim);

    if (llm_responses_parse(&rq, (const char *) data, size, &lim,
                            size & 1, NULL, 0, &err)
        == 0)
    {
        check_ok(&rq, &lim);
    } else {
        check_error(&err);
    }
    llm_responses_free(&rq);

    return 0;
}
