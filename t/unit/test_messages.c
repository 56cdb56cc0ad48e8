/*
 * Anthropic's Messages request translated to the chat request
 * (api/messages.h): system, text / tool_use / tool_result / thinking
 * blocks, tools, tool_choice, the copied fields, every refusal; the chat
 * parser reads each translation; stop reasons, error types and the reply
 * object.
 */
#include "tap.h"
#include "api/messages.h"

#include <stdlib.h>
#include <string.h>


/* the chat body of a Messages body, NULL on a refusal (err filled) */
static char *
tr(const char *body, int count_only, llm_messages_opts *o, llm_api_error *e)
{
    size_t  len;

    return llm_messages_to_chat(body, strlen(body), count_only, NULL, o,
                                &len, e);
}


/* the translation equals want, and the chat parser takes it */
static void
is_chat(const char *body, const char *want, const char *name)
{
    char               *got;
    llm_api_error       e;
    llm_api_request     req;
    llm_messages_opts   o;

    got = tr(body, 0, &o, &e);
    is_str(got, want, "%s", name);
    if (got == NULL) {
        printf("#   refused: %s\n", e.message);
        return;
    }
    memset(&req, 0, sizeof(req));
    ok(llm_api_parse(&req, got, strlen(got), LLM_API_CHAT, NULL, &e) == 0,
       "%s: the chat parser reads it", name);
    llm_api_request_free(&req);
    free(got);
}


static void
is_refused(const char *body, int status, const char *message,
    const char *name)
{
    char               *got;
    llm_api_error       e;
    llm_messages_opts   o;

    got = tr(body, 0, &o, &e);
    ok(got == NULL, "%s: refused", name);
    free(got);
    is_int(e.status, status, "%s: status", name);
    is_str(e.message, message, "%s: message", name);
}


#define HI  "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]"

static void
test_translate(void)
{
    char               *got;
    llm_api_error       e;
    llm_messages_opts   o;

    is_chat("{\"model\":\"m\",\"max_tokens\":5," HI "}",
            "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":"
            "\"user\",\"content\":\"Hi\"}]}", "a plain request");

    is_chat("{\"model\":\"m\",\"max_tokens\":5,\"temperature\":0.5,"
            "\"top_p\":0.9,\"top_k\":40,\"stream\":true,"
            "\"stop_sequences\":[\"x\"],\"metadata\":{\"user_id\":\"u\"},"
            "\"service_tier\":\"auto\"," HI "}",
            "{\"model\":\"m\",\"temperature\":0.5,\"top_p\":0.9,"
            "\"top_k\":40,\"max_tokens\":5,\"stream\":true,\"stop\":[\"x\"],"
            "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
            "sampling fields copied, stop_sequences as stop, metadata and "
            "unknown fields dropped");

    is_chat("{\"model\":\"m\",\"max_tokens\":5,\"system\":[{\"type\":"
            "\"text\",\"text\":\"A\",\"cache_control\":{\"type\":"
            "\"ephemeral\"}},{\"type\":\"text\",\"text\":\"B\"}]," HI "}",
            "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":"
            "\"system\",\"content\":[{\"type\":\"text\",\"text\":\"A\"},"
            "{\"type\":\"text\",\"text\":\"B\"}]},{\"role\":\"user\","
            "\"content\":\"Hi\"}]}",
            "system blocks: a system message of text parts, cache_control "
            "dropped");

    is_chat("{\"model\":\"m\",\"max_tokens\":5,\"messages\":["
            "{\"role\":\"user\",\"content\":\"W?\"},"
            "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\","
            "\"thinking\":\"t\",\"signature\":\"s\"},{\"type\":"
            "\"redacted_thinking\",\"data\":\"d\"},{\"type\":\"text\","
            "\"text\":\"Let me see.\"},{\"type\":\"tool_use\",\"id\":\"tu1\","
            "\"name\":\"f\",\"input\":{\"a\":1}}]},"
            "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
            "\"tool_use_id\":\"tu1\",\"content\":\"r\"},{\"type\":"
            "\"tool_result\",\"tool_use_id\":\"tu2\",\"is_error\":true,"
            "\"content\":[{\"type\":\"text\",\"text\":\"e\"}]},{\"type\":"
            "\"text\",\"text\":\"ok?\"}]}],"
            "\"tools\":[{\"name\":\"f\",\"description\":\"F\","
            "\"input_schema\":{\"type\":\"object\"},\"cache_control\":{}}],"
            "\"tool_choice\":{\"type\":\"auto\"}}",
            "{\"model\":\"m\",\"max_tokens\":5,\"messages\":["
            "{\"role\":\"user\",\"content\":\"W?\"},"
            "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
            "\"text\":\"Let me see.\"}],\"tool_calls\":[{\"id\":\"tu1\","
            "\"type\":\"function\",\"function\":{\"name\":\"f\","
            "\"arguments\":\"{\\\"a\\\":1}\"}}]},"
            "{\"role\":\"tool\",\"content\":\"r\",\"tool_call_id\":\"tu1\"},"
            "{\"role\":\"tool\",\"content\":[{\"type\":\"text\",\"text\":"
            "\"e\"}],\"tool_call_id\":\"tu2\"},"
            "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
            "\"ok?\"}]}],"
            "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
            "\"description\":\"F\",\"parameters\":{\"type\":\"object\"}}}],"
            "\"tool_choice\":\"auto\"}",
            "a tool round trip: thinking dropped, tool_use as tool_calls, "
            "tool_result as tool messages in order, tools as functions");

    is_chat("{\"model\":\"m\",\"max_tokens\":5," HI ",\"tools\":[{\"name\":"
            "\"f\",\"input_schema\":{}}],\"tool_choice\":{\"type\":\"any\","
            "\"disable_parallel_tool_use\":true}}",
            "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":"
            "\"user\",\"content\":\"Hi\"}],\"tools\":[{\"type\":\"function\","
            "\"function\":{\"name\":\"f\",\"parameters\":{}}}],"
            "\"parallel_tool_calls\":false,\"tool_choice\":\"required\"}",
            "tool_choice any: required, one call");

    is_chat("{\"model\":\"m\",\"max_tokens\":5," HI ",\"tools\":[{\"name\":"
            "\"f\",\"input_schema\":{}}],\"tool_choice\":{\"type\":\"tool\","
            "\"name\":\"f\"}}",
            "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":"
            "\"user\",\"content\":\"Hi\"}],\"tools\":[{\"type\":\"function\","
            "\"function\":{\"name\":\"f\",\"parameters\":{}}}],"
            "\"tool_choice\":{\"function\":{\"name\":\"f\"},\"type\":"
            "\"function\"}}",
            "tool_choice tool: the named function");

    got = tr("{\"model\":\"m\",\"max_tokens\":5," HI ",\"thinking\":"
             "{\"type\":\"enabled\",\"budget_tokens\":1024}}", 0, &o, &e);
    is_int(o.thinking, 1, "thinking enabled: the template's switch on");
    free(got);
    got = tr("{\"model\":\"m\",\"max_tokens\":5," HI ",\"thinking\":"
             "{\"type\":\"disabled\"}}", 0, &o, &e);
    is_int(o.thinking, 0, "thinking disabled: off");
    free(got);
    got = tr("{\"model\":\"m\",\"max_tokens\":5," HI "}", 0, &o, &e);
    is_int(o.thinking, -1, "no thinking: the template's default");
    free(got);

    got = tr("{\"model\":\"m\",\"stream\":true,\"stop_sequences\":[\"x\"],"
             HI "}", 1, &o, &e);
    is_str(got, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
           "\"content\":\"Hi\"}]}",
           "count_tokens: no max_tokens needed, generation fields dropped");
    free(got);
}


static void
test_refusals(void)
{
    is_refused("{\"model\":\"m\"," HI "}", 400,
               "max_tokens: Field required", "max_tokens missing");
    is_refused("{\"max_tokens\":1," HI "}", 400, "model: Field required",
               "model missing");
    is_refused("{\"model\":\"m\",\"max_tokens\":1}", 400,
               "messages: Field required", "messages missing");
    is_refused("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[]}", 400,
               "messages: at least one message is required",
               "messages empty");
    is_refused("{\"model\":\"m\",\"max_tokens\":1,\"temperature\":2," HI "}",
               400, "temperature: Input should be less than or equal to 1 "
               "and greater than or equal to 0", "temperature 2");
    is_refused("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":"
               "\"user\",\"content\":[{\"type\":\"tool_use\",\"id\":\"a\","
               "\"name\":\"f\",\"input\":{}}]}]}", 400,
               "messages.0.content.0.type: blocks of type 'tool_use' are "
               "not supported in user messages (text, tool_use, "
               "tool_result, thinking and redacted_thinking are)",
               "tool_use in a user message");
    is_refused("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":"
               "\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":"
               "\"a\",\"name\":\"f\",\"input\":[]}]}]}", 400,
               "messages.0.content.0.input: Input should be a valid "
               "dictionary", "tool_use input not an object");
    is_refused("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":"
               "\"user\",\"content\":[{\"type\":\"tool_result\"}]}]}", 400,
               "messages.0.content.0.tool_use_id: Field required",
               "tool_result without tool_use_id");
    is_refused("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":"
               "\"user\",\"content\":[{\"type\":\"text\"}]}]}", 400,
               "messages.0.content.0.text: Field required",
               "text block without text");
    is_refused("{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":"
               "\"user\",\"content\":7}]}", 400,
               "messages.0.content: Input should be a valid string or a "
               "list of content blocks", "content a number");
    is_refused("{\"model\":\"m\",\"max_tokens\":1,\"system\":[{\"type\":"
               "\"image\"}]," HI "}", 400,
               "system[0]: only text blocks are supported here",
               "an image block in system");
    is_refused("{\"model\":\"m\",\"max_tokens\":1," HI ",\"tools\":[{\"name\":"
               "\"f\"}]}", 400, "tools.0.input_schema: Input should be a "
               "valid dictionary", "a tool without input_schema");
    is_refused("{\"model\":\"m\",\"max_tokens\":1," HI ",\"tool_choice\":"
               "{\"type\":\"some\"}}", 400, "tool_choice.type: Input should "
               "be 'auto', 'any', 'tool' or 'none'", "a bad tool_choice");
    is_refused("{\"model\":\"m\",\"max_tokens\":1," HI ",\"tool_choice\":"
               "{\"type\":\"tool\"}}", 400, "tool_choice.name: Field "
               "required", "tool_choice tool without a name");
    is_refused("{\"model\":\"m\",\"max_tokens\":1," HI ",\"thinking\":"
               "{\"type\":\"enabled\",\"budget_tokens\":-3}}", 400,
               "thinking.budget_tokens: Input should be a positive integer",
               "a negative thinking budget");
    is_refused("{\"model\":\"m\",\"max_tokens\":1," HI ",\"metadata\":3}",
               400, "metadata: Input should be a valid dictionary",
               "metadata not an object");
    is_refused("[1]", 400, "the body must be a JSON object", "an array");
    is_refused("{\"model\":", 400, "We could not parse the JSON body of "
               "your request: the body ends at byte 9, inside an unfinished "
               "value. The API expects a JSON object.",
               "truncated JSON: the chat parser's words");
    is_refused("{\"model\":\"m\",\"max_tokens\":1,\"x\":\"\\u0000\"," HI "}",
               400, "We could not parse the JSON body of your request: "
               "\\u0000 (NUL) in a string at byte 33 is not supported. The "
               "API expects a JSON object.",
               "a NUL escape, as the chat parser refuses it");
}


static void
test_reply(void)
{
    char              *s;
    cJSON             *j;
    llm_tool_call      call = { "call_1", "f", "{\"a\":1}" };
    llm_messages_out   o;

    is_str(llm_messages_stop_reason(LLM_FINISH_STOP, 0, 0), "end_turn",
           "eos: end_turn");
    is_str(llm_messages_stop_reason(LLM_FINISH_LENGTH, 0, 0), "max_tokens",
           "length: max_tokens");
    is_str(llm_messages_stop_reason(LLM_FINISH_STOP, 0, 1), "stop_sequence",
           "a stop string: stop_sequence");
    is_str(llm_messages_stop_reason(LLM_FINISH_STOP, 1, 0), "tool_use",
           "calls: tool_use");

    is_str(llm_messages_error_type(400), "invalid_request_error", "400");
    is_str(llm_messages_error_type(404), "not_found_error", "404");
    is_str(llm_messages_error_type(413), "request_too_large", "413");
    is_str(llm_messages_error_type(429), "rate_limit_error", "429");
    is_str(llm_messages_error_type(500), "api_error", "500");
    is_str(llm_messages_error_type(503), "overloaded_error", "503");

    memset(&o, 0, sizeof(o));
    o.id = "msg_1";
    o.model = "m";
    o.reasoning = "hm";
    o.reasoning_len = 2;
    o.text = "ok\xff";               /* cut inside a character */
    o.text_len = 3;
    o.calls = &call;
    o.n_calls = 1;
    o.stop_reason = "tool_use";
    o.input_tokens = 7;
    o.cache_read_tokens = 2;
    o.output_tokens = 3;

    j = llm_messages_reply(&o);
    s = j ? cJSON_PrintUnformatted(j) : NULL;
    is_str(s, "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\","
           "\"model\":\"m\",\"content\":[{\"type\":\"thinking\",\"thinking\":"
           "\"hm\",\"signature\":\"\"},{\"type\":\"text\",\"text\":"
           "\"ok\xef\xbf\xbd\"},{\"type\":\"tool_use\",\"id\":\"call_1\","
           "\"name\":\"f\",\"input\":{\"a\":1}}],\"stop_reason\":\"tool_use\","
           "\"stop_sequence\":null,\"usage\":{\"input_tokens\":7,"
           "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":2,"
           "\"output_tokens\":3}}",
           "the reply: thinking, text (bad UTF-8 as U+FFFD), tool_use");
    free(s);
    cJSON_Delete(j);

    memset(&o, 0, sizeof(o));
    o.id = "msg_2";
    o.model = "m";
    o.stop_reason = "end_turn";
    j = llm_messages_reply(&o);
    s = j ? cJSON_PrintUnformatted(j) : NULL;
    ok(s && strstr(s, "\"content\":[{\"type\":\"text\",\"text\":\"\"}]"),
       "an empty reply: one empty text block");
    free(s);
    cJSON_Delete(j);
}


int
main(void)
{
    test_translate();
    test_refusals();
    test_reply();
    return tap_done();
}
