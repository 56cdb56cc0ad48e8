/*
 * libFuzzer harness for the bodies read as another request: Anthropic's
 * Messages (api/messages.h), vLLM's /tokenize and /detokenize
 * (api/tokenize.h), and Qwen3-Coder's XML calls (api/tool_xml.h).
 *
 *   build/fuzz/fuzz_messages -max_total_time=60 fuzz/corpus/messages
 *
 * Beyond "no crash": a translation is JSON the chat parser reads to a
 * request or to a complete error; a refusal has a status and a message in
 * valid UTF-8; ids are in the vocabulary; an XML call has a name and an
 * object.
 */
#include "api/messages.h"
#include "api/tokenize.h"
#include "api/tool_xml.h"
#include "text/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>


static void
check_error(const llm_api_error *e)
{
    if ((e->status != 400 && e->status != 413 && e->status != 404
         && e->status != 500)
        || e->message[0] == '\0'
        || !llm_utf8_valid(e->message, strlen(e->message)))
    {
        abort();
    }
}


/* the chat parser reads what a translation made */
static void
check_chat(const char *text, size_t len, int endpoint)
{
    llm_api_error    e;
    llm_api_request  r;

    memset(&r, 0, sizeof(r));
    if (llm_api_parse(&r, text, len, endpoint, NULL, &e) != 0) {
        check_error(&e);
    }
    llm_api_request_free(&r);
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int                 n, i;
    char               *out, *name;
    size_t              len;
    cJSON              *args;
    int32_t            *ids;
    llm_api_error       e;
    llm_api_limits      lim;
    llm_messages_opts   mo;
    llm_tokenize_opts   to;
    char                why[128];
    const char         *s = (const char *) data;
    static cJSON       *tools;     /* typed parameters, for the values */

    llm_api_limits_default(&lim);
    lim.max_body = 1 << 16;

    for (i = 0; i < 2; i++) {
        out = llm_messages_to_chat(s, size, i, &lim, &mo, &len, &e);
        if (out == NULL) {
            check_error(&e);
        } else {
            if (mo.thinking < -1 || mo.thinking > 1) {
                abort();
            }
            check_chat(out, len, LLM_API_CHAT);
            free(out);
        }
    }

    out = llm_tokenize_to_request(s, size, "m", &lim, &to, &len, &e);
    if (out == NULL) {
        check_error(&e);
    } else {
        check_chat(out, len, to.chat ? LLM_API_CHAT : LLM_API_COMPLETION);
        free(out);
    }

    if (llm_detokenize_parse(s, size, 1000, &lim, &ids, &n, &e) == 0) {
        for (i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= 1000) {
                abort();
            }
        }
        free(ids);
    } else {
        check_error(&e);
    }

    if (tools == NULL) {
        tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{"
            "\"name\":\"f\",\"parameters\":{\"properties\":{"
            "\"s\":{\"type\":\"string\"},\"i\":{\"type\":\"integer\"},"
            "\"n\":{\"type\":\"number\"},\"b\":{\"type\":\"boolean\"},"
            "\"o\":{\"type\":\"object\"},\"a\":{\"type\":\"array\"}}}}}]");
    }
    if (llm_tool_xml_call(s, size, tools, &name, &args, why, sizeof(why))
        == 0)
    {
        if (name == NULL || !cJSON_IsObject(args)) {
            abort();
        }
        free(name);
        cJSON_Delete(args);
    }

    return 0;
}
