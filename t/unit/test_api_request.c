/*
 * OpenAI request parser: every field valid and invalid (type, range,
 * missing), the error shape (status, param, code, message), content parts,
 * prompt forms, body limits (size, depth, UTF-8), and the normalised
 * messages handed to the chat template; the stop ids a model and a
 * request give a ring slot.
 */
#include "tap.h"
#include "api/request.h"
#include "format/gguf.h"
#include "tokenizer/internal.h"     /* to give the model 6 stop ids */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHAT  LLM_API_CHAT
#define COMP  LLM_API_COMPLETION

#define USER_HI  "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"


/* body = {"model":"m", <base>, <extra>} with the commas put in */
static char *
body_of(int endpoint, const char *extra)
{
    static char  buf[16384];
    const char  *base = endpoint == CHAT ? USER_HI : "\"prompt\":\"hi\"";

    snprintf(buf, sizeof(buf), "{\"model\":\"m\",%s%s%s}", base,
             extra[0] ? "," : "", extra);
    return buf;
}


static int
parse(int endpoint, const char *body, llm_api_request *r, llm_api_error *e)
{
    return llm_api_parse(r, body, strlen(body), endpoint, NULL, e);
}


/* one rejected request: status, param and code asserted exactly */
typedef struct {
    int          endpoint;
    const char  *extra;     /* added to a valid body; NULL: body is whole */
    const char  *body;
    int          status;
    const char  *param;
    const char  *code;
    const char  *message;   /* exact when not NULL */
} bad_case;


static const bad_case bad_fields[] = {
    /* sampling ranges and types */
    { CHAT, "\"temperature\":\"1\"", NULL, 400, "temperature", "invalid_type",
      "Invalid type for 'temperature': expected a decimal, but got a string "
      "instead." },
    { CHAT, "\"temperature\":2.5", NULL, 400, "temperature",
      "decimal_above_max_value",
      "Invalid 'temperature': decimal above maximum value. Expected a value "
      "<= 2, but got 2.5 instead." },
    { CHAT, "\"temperature\":-0.1", NULL, 400, "temperature",
      "decimal_below_min_value",
      "Invalid 'temperature': decimal below minimum value. Expected a value "
      ">= 0, but got -0.1 instead." },
    { CHAT, "\"temperature\":true", NULL, 400, "temperature", "invalid_type",
      "Invalid type for 'temperature': expected a decimal, but got a boolean "
      "instead." },
    { CHAT, "\"temperature\":1e999", NULL, 400, "temperature",
      "invalid_value", NULL },
    { CHAT, "\"top_p\":0", NULL, 400, "top_p", "decimal_below_min_value",
      "Invalid 'top_p': decimal below minimum value. Expected a value > 0, "
      "but got 0 instead." },
    { CHAT, "\"top_p\":1.01", NULL, 400, "top_p", "decimal_above_max_value",
      NULL },
    { CHAT, "\"top_p\":[1]", NULL, 400, "top_p", "invalid_type",
      "Invalid type for 'top_p': expected a decimal, but got an array "
      "instead." },
    { CHAT, "\"min_p\":1.5", NULL, 400, "min_p", "decimal_above_max_value",
      NULL },
    { CHAT, "\"min_p\":-1", NULL, 400, "min_p", "decimal_below_min_value",
      NULL },
    { CHAT, "\"presence_penalty\":2.1", NULL, 400, "presence_penalty",
      "decimal_above_max_value", NULL },
    { CHAT, "\"frequency_penalty\":-2.5", NULL, 400, "frequency_penalty",
      "decimal_below_min_value", NULL },
    { CHAT, "\"repetition_penalty\":0", NULL, 400, "repetition_penalty",
      "decimal_below_min_value", NULL },
    { CHAT, "\"repetition_penalty\":{}", NULL, 400, "repetition_penalty",
      "invalid_type", NULL },
    /* in range as doubles, out of it as the floats they are kept in */
    { CHAT, "\"top_p\":1e-300", NULL, 400, "top_p", "decimal_below_min_value",
      "Invalid 'top_p': decimal below minimum value. Expected a value >= "
      "1.40129846432482e-45, but got 1e-300 instead." },
    { CHAT, "\"repetition_penalty\":1e-300", NULL, 400, "repetition_penalty",
      "decimal_below_min_value",
      "Invalid 'repetition_penalty': decimal below minimum value. Expected a "
      "value >= 1.40129846432482e-45, but got 1e-300 instead." },
    { CHAT, "\"repetition_penalty\":1e39", NULL, 400, "repetition_penalty",
      "decimal_above_max_value",
      "Invalid 'repetition_penalty': decimal above maximum value. Expected a "
      "value <= 3.40282346638529e+38, but got 1e+39 instead." },
    { CHAT, "\"top_k\":-2", NULL, 400, "top_k", "integer_below_min_value",
      "Invalid 'top_k': integer below minimum value. Expected a value >= -1, "
      "but got -2 instead." },
    { CHAT, "\"top_k\":1.5", NULL, 400, "top_k", "invalid_type",
      "Invalid type for 'top_k': expected an integer, but got a decimal "
      "instead." },
    { CHAT, "\"seed\":\"1\"", NULL, 400, "seed", "invalid_type", NULL },
    { CHAT, "\"seed\":0.5", NULL, 400, "seed", "invalid_type", NULL },
    { CHAT, "\"seed\":1e19", NULL, 400, "seed", "integer_above_max_value",
      NULL },
    { CHAT, "\"max_tokens\":0", NULL, 400, "max_tokens",
      "integer_below_min_value",
      "Invalid 'max_tokens': integer below minimum value. Expected a value "
      ">= 1, but got 0 instead." },
    { CHAT, "\"max_tokens\":\"5\"", NULL, 400, "max_tokens", "invalid_type",
      NULL },
    { CHAT, "\"max_tokens\":3e9", NULL, 400, "max_tokens",
      "integer_above_max_value", NULL },
    { CHAT, "\"max_completion_tokens\":-1", NULL, 400,
      "max_completion_tokens", "integer_below_min_value", NULL },
    { CHAT, "\"max_tokens\":0,\"max_completion_tokens\":5", NULL, 400,
      "max_tokens", "integer_below_min_value", NULL },

    /* stop */
    { CHAT, "\"stop\":5", NULL, 400, "stop", "invalid_type",
      "Invalid type for 'stop': expected a string or an array of strings, "
      "but got an integer instead." },
    { CHAT, "\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]", NULL, 400, "stop",
      "array_above_max_length",
      "Invalid 'stop': array too long. Expected an array with maximum length "
      "4, but got an array with length 5 instead." },
    { CHAT, "\"stop\":\"\"", NULL, 400, "stop", "empty_string", NULL },
    { CHAT, "\"stop\":[\"a\",\"\"]", NULL, 400, "stop[1]", "empty_string",
      NULL },
    { CHAT, "\"stop\":[\"a\",1]", NULL, 400, "stop[1]", "invalid_type",
      NULL },
    { CHAT, "\"stop\":{}", NULL, 400, "stop", "invalid_type", NULL },
    { CHAT, "\"stop_token_ids\":[1,-1]", NULL, 400, "stop_token_ids[1]",
      "integer_below_min_value", NULL },
    { CHAT, "\"stop_token_ids\":[1,\"2\"]", NULL, 400, "stop_token_ids[1]",
      "invalid_type", NULL },
    { CHAT, "\"stop_token_ids\":2", NULL, 400, "stop_token_ids",
      "invalid_type", NULL },
    { CHAT, "\"stop_token_ids\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]",
      NULL, 400, "stop_token_ids", "array_above_max_length", NULL },

    /* logit_bias */
    { CHAT, "\"logit_bias\":[]", NULL, 400, "logit_bias", "invalid_type",
      NULL },
    { CHAT, "\"logit_bias\":{\"AI\":1}", NULL, 400, "logit_bias",
      "invalid_value",
      "Invalid key in 'logit_bias': AI. Keys must be token ids: non-negative "
      "integers below 2147483648." },
    { CHAT, "\"logit_bias\":{\"-1\":1}", NULL, 400, "logit_bias",
      "invalid_value", NULL },
    { CHAT, "\"logit_bias\":{\"1.5\":1}", NULL, 400, "logit_bias",
      "invalid_value", NULL },
    { CHAT, "\"logit_bias\":{\"\":1}", NULL, 400, "logit_bias",
      "invalid_value", NULL },
    { CHAT, "\"logit_bias\":{\"99999999999\":1}", NULL, 400, "logit_bias",
      "invalid_value", NULL },
    { CHAT, "\"logit_bias\":{\"7\":101}", NULL, 400, "logit_bias",
      "invalid_value",
      "Invalid value in 'logit_bias' for key 7: expected a number in "
      "[-100, 100]." },
    { CHAT, "\"logit_bias\":{\"7\":\"1\"}", NULL, 400, "logit_bias",
      "invalid_value", NULL },

    /* logprobs, n, stream */
    { CHAT, "\"logprobs\":1", NULL, 400, "logprobs", "invalid_type",
      "Invalid type for 'logprobs': expected a boolean, but got an integer "
      "instead." },
    { CHAT, "\"top_logprobs\":5", NULL, 400, "top_logprobs", "invalid_value",
      "Invalid value for 'top_logprobs': 'logprobs' must be true when "
      "'top_logprobs' is set." },
    { CHAT, "\"logprobs\":false,\"top_logprobs\":0", NULL, 400,
      "top_logprobs", "invalid_value", NULL },
    { CHAT, "\"logprobs\":true,\"top_logprobs\":21", NULL, 400,
      "top_logprobs", "integer_above_max_value", NULL },
    { CHAT, "\"logprobs\":true,\"top_logprobs\":-1", NULL, 400,
      "top_logprobs", "integer_below_min_value", NULL },
    { CHAT, "\"n\":2", NULL, 400, "n", "unsupported_value",
      "Unsupported value for 'n': n > 1 is not supported by this server "
      "(got 2)." },
    { CHAT, "\"n\":0", NULL, 400, "n", "integer_below_min_value", NULL },
    { CHAT, "\"n\":\"1\"", NULL, 400, "n", "invalid_type", NULL },
    { CHAT, "\"stream\":\"yes\"", NULL, 400, "stream", "invalid_type",
      NULL },
    { CHAT, "\"stream_options\":{\"include_usage\":true}", NULL, 400,
      "stream_options", "invalid_value",
      "The 'stream_options' parameter is only allowed when 'stream' is "
      "true." },
    { CHAT, "\"stream\":false,\"stream_options\":{}", NULL, 400,
      "stream_options", "invalid_value", NULL },
    { CHAT, "\"stream\":true,\"stream_options\":5", NULL, 400,
      "stream_options", "invalid_type", NULL },
    { CHAT, "\"stream\":true,\"stream_options\":{\"include_usage\":1}", NULL,
      400, "stream_options.include_usage", "invalid_type",
      "Invalid type for 'stream_options.include_usage': expected a boolean, "
      "but got an integer instead." },

    /* a quoted value cut inside a character is mended: '?' for its bytes */
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xc3\xa9\","
      "\"content\":\"x\"}]}", 400, "messages[0].role", "invalid_value",
      "Invalid value: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa?'. Supported "
      "values are: 'system', 'developer', 'user', 'assistant', and "
      "'tool'." },

    /* misc */
    { CHAT, "\"user\":5", NULL, 400, "user", "invalid_type", NULL },
    { CHAT, "\"ignore_eos\":1", NULL, 400, "ignore_eos", "invalid_type",
      NULL },
    { CHAT, "\"speculative\":\"yes\"", NULL, 400, "speculative",
      "invalid_type", NULL },
    { CHAT, "\"priority\":1.5", NULL, 400, "priority", "invalid_type", NULL },
    { CHAT, "\"priority\":3e9", NULL, 400, "priority",
      "integer_above_max_value", NULL },
    { CHAT, "\"response_format\":{\"type\":\"xml\"}", NULL, 400,
      "response_format.type", "unsupported_value",
      "Unsupported value for 'response_format.type': 'xml' is not "
      "supported; expected 'text', 'json_object', 'json_schema', 'grammar' "
      "or 'regex'." },
    { CHAT, "\"response_format\":{\"type\":5}", NULL, 400,
      "response_format.type", "invalid_type", NULL },
    { CHAT, "\"response_format\":{\"type\":\"json_schema\"}", NULL, 400,
      "response_format.json_schema", "missing_required_parameter",
      "Missing required parameter: 'response_format.json_schema'." },
    { CHAT, "\"response_format\":{\"type\":\"json_schema\","
      "\"json_schema\":[]}", NULL, 400, "response_format.json_schema",
      "invalid_type", NULL },
    { CHAT, "\"response_format\":{\"type\":\"json_schema\","
      "\"json_schema\":{\"schema\":{}}}", NULL, 400,
      "response_format.json_schema.name", "missing_required_parameter",
      NULL },
    { CHAT, "\"response_format\":{\"type\":\"json_schema\","
      "\"json_schema\":{\"name\":\"a b\",\"schema\":{}}}", NULL, 400,
      "response_format.json_schema.name", "invalid_value",
      "Invalid 'response_format.json_schema.name': string does not match "
      "pattern. Expected a string that matches the pattern "
      "'^[a-zA-Z0-9_-]+$'." },
    { CHAT, "\"response_format\":{\"type\":\"json_schema\","
      "\"json_schema\":{\"name\":\"\",\"schema\":{}}}", NULL, 400,
      "response_format.json_schema.name", "invalid_value", NULL },
    { CHAT, "\"response_format\":{\"type\":\"json_schema\","
      "\"json_schema\":{\"name\":\"n1234567890123456789012345678901234567"
      "89012345678901234567890123456\",\"schema\":{}}}", NULL, 400,
      "response_format.json_schema.name", "string_above_max_length",
      "Invalid 'response_format.json_schema.name': string too long. Expected "
      "a string with maximum length 64, but got a string with length 67 "
      "instead." },
    { CHAT, "\"response_format\":{\"type\":\"json_schema\","
      "\"json_schema\":{\"name\":7,\"schema\":{}}}", NULL, 400,
      "response_format.json_schema.name", "invalid_type", NULL },
    { CHAT, "\"response_format\":{\"type\":\"json_schema\","
      "\"json_schema\":{\"name\":\"n\"}}", NULL, 400,
      "response_format.json_schema.schema", "missing_required_parameter",
      NULL },
    { CHAT, "\"response_format\":{\"type\":\"json_schema\","
      "\"json_schema\":{\"name\":\"n\",\"schema\":\"{}\"}}", NULL, 400,
      "response_format.json_schema.schema", "invalid_type", NULL },
    { CHAT, "\"response_format\":{\"type\":\"json_schema\","
      "\"json_schema\":{\"name\":\"n\",\"strict\":1,\"schema\":{}}}",
      NULL, 400, "response_format.json_schema.strict", "invalid_type", NULL },
    { CHAT, "\"response_format\":{\"type\":\"json_schema\","
      "\"json_schema\":{\"name\":\"n\",\"description\":[],"
      "\"schema\":{}}}", NULL, 400,
      "response_format.json_schema.description", "invalid_type", NULL },
    { CHAT, "\"response_format\":{\"type\":\"grammar\"}", NULL, 400,
      "response_format.grammar", "missing_required_parameter", NULL },
    { CHAT, "\"response_format\":{\"type\":\"grammar\",\"grammar\":1}",
      NULL, 400, "response_format.grammar", "invalid_type", NULL },
    { CHAT, "\"response_format\":{\"type\":\"regex\",\"regex\":\"\"}",
      NULL, 400, "response_format.regex", "invalid_value", NULL },
    { COMP, "\"response_format\":{\"type\":\"regex\"}", NULL, 400,
      "response_format.regex", "missing_required_parameter", NULL },
    { CHAT, "\"response_format\":\"text\"", NULL, 400, "response_format",
      "invalid_type", NULL },
    { CHAT, "\"response_format\":{}", NULL, 400, "response_format.type",
      "missing_required_parameter", NULL },

    /* model */
    { CHAT, NULL, "{" USER_HI "}", 400, "model",
      "missing_required_parameter", "Missing required parameter: 'model'." },
    { CHAT, NULL, "{\"model\":5," USER_HI "}", 400, "model", "invalid_type",
      "Invalid type for 'model': expected a string, but got an integer "
      "instead." },
    { CHAT, NULL, "{\"model\":null," USER_HI "}", 400, "model",
      "invalid_type", "Invalid type for 'model': expected a string, but got "
      "null instead." },
    { CHAT, NULL, "{\"model\":\"\"," USER_HI "}", 400, "model",
      "empty_string", NULL },

    /* messages */
    { CHAT, NULL, "{\"model\":\"m\"}", 400, "messages",
      "missing_required_parameter",
      "Missing required parameter: 'messages'." },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":{}}", 400, "messages",
      "invalid_type", NULL },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":null}", 400, "messages",
      "invalid_type", NULL },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[]}", 400, "messages",
      "empty_array",
      "Invalid 'messages': empty array. Expected an array with minimum "
      "length 1, but got an empty array instead." },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[1]}", 400, "messages[0]",
      "invalid_type", NULL },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}", 400,
      "messages[0].role", "missing_required_parameter", NULL },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":5,"
      "\"content\":\"x\"}]}", 400, "messages[0].role", "invalid_type", NULL },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\","
      "\"content\":\"x\"}]}", 400, "messages[0].tool_call_id",
      "missing_required_parameter",
      "Missing required parameter: 'messages[0].tool_call_id'." },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"User\","
      "\"content\":\"x\"}]}", 400, "messages[0].role", "invalid_value",
      NULL },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}]}", 400,
      "messages[0].content", "missing_required_parameter",
      "Missing required parameter: 'messages[0].content'." },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"system\","
      "\"content\":null}]}", 400, "messages[0].content", "invalid_type",
      NULL },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
      "\"content\":5}]}", 400, "messages[0].content", "invalid_type",
      "Invalid type for 'messages[0].content': expected a string or an array "
      "of content parts, but got an integer instead." },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
      "\"content\":[]}]}", 400, "messages[0].content", "empty_array", NULL },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
      "\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}",
      400, "messages[0].content[0].type", "unsupported_value",
      "Unsupported content part type 'image_url' in "
      "'messages[0].content[0].type': this server accepts only 'text' "
      "parts." },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
      "\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\"}]}]}",
      400, "messages[0].content[1].text", "missing_required_parameter",
      NULL },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
      "\"content\":[{\"type\":\"text\",\"text\":5}]}]}", 400,
      "messages[0].content[0].text", "invalid_type", NULL },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
      "\"content\":[{\"text\":\"a\"}]}]}", 400,
      "messages[0].content[0].type", "missing_required_parameter", NULL },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
      "\"content\":[\"a\"]}]}", 400, "messages[0].content[0]",
      "invalid_type", NULL },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
      "\"content\":\"x\",\"name\":5}]}", 400, "messages[0].name",
      "invalid_type", NULL },
    { CHAT, NULL, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
      "\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},"
      "{\"role\":\"user\",\"content\":7}]}", 400, "messages[2].content",
      "invalid_type", NULL },

    /* completions: prompt forms and fields we refuse */
    { COMP, NULL, "{\"model\":\"m\"}", 400, "prompt",
      "missing_required_parameter", "Missing required parameter: 'prompt'." },
    { COMP, NULL, "{\"model\":\"m\",\"prompt\":5}", 400, "prompt",
      "invalid_type", NULL },
    { COMP, NULL, "{\"model\":\"m\",\"prompt\":null}", 400, "prompt",
      "invalid_type", NULL },
    { COMP, NULL, "{\"model\":\"m\",\"prompt\":[]}", 400, "prompt",
      "empty_array", NULL },
    { COMP, NULL, "{\"model\":\"m\",\"prompt\":[\"a\",\"b\"]}", 400, "prompt",
      "unsupported_value",
      "Unsupported value for 'prompt': batched prompts are not supported "
      "(got 2 prompts); send one prompt per request." },
    { COMP, NULL, "{\"model\":\"m\",\"prompt\":[[1],[2]]}", 400, "prompt",
      "unsupported_value", NULL },
    { COMP, NULL, "{\"model\":\"m\",\"prompt\":[1,\"a\"]}", 400, "prompt[1]",
      "invalid_type", NULL },
    { COMP, NULL, "{\"model\":\"m\",\"prompt\":[1,2.5]}", 400, "prompt[1]",
      "invalid_type", NULL },
    { COMP, NULL, "{\"model\":\"m\",\"prompt\":[[1,-2]]}", 400,
      "prompt[0][1]", "integer_below_min_value", NULL },
    { COMP, NULL, "{\"model\":\"m\",\"prompt\":[[]]}", 400, "prompt[0]",
      "empty_array", NULL },
    { COMP, NULL, "{\"model\":\"m\",\"prompt\":[true]}", 400, "prompt[0]",
      "invalid_type", NULL },
    { COMP, NULL, "{\"model\":\"m\",\"prompt\":[{}]}", 400, "prompt[0]",
      "invalid_type", NULL },
    { COMP, "\"logprobs\":6", NULL, 400, "logprobs",
      "integer_above_max_value", NULL },
    { COMP, "\"logprobs\":true", NULL, 400, "logprobs", "invalid_type",
      NULL },
    { COMP, "\"echo\":true", NULL, 400, "echo", "unsupported_value",
      "Unsupported value for 'echo': echo is not supported." },
    { COMP, "\"best_of\":2", NULL, 400, "best_of", "unsupported_value",
      NULL },
    { COMP, "\"best_of\":0", NULL, 400, "best_of", "integer_below_min_value",
      NULL },
    { COMP, "\"suffix\":5", NULL, 400, "suffix", "invalid_type", NULL },
    { COMP, "\"temperature\":3", NULL, 400, "temperature",
      "decimal_above_max_value", NULL },

    /* the body itself */
    { CHAT, NULL, "", 400, "", "invalid_json",
      "We could not parse the JSON body of your request: the body is empty. "
      "The API expects a JSON object." },
    { CHAT, NULL, "   ", 400, "", "invalid_json", NULL },
    { CHAT, NULL, "{", 400, "", "invalid_json",
      "We could not parse the JSON body of your request: the body ends at "
      "byte 1, inside an unfinished value. The API expects a JSON object." },
    { CHAT, NULL, "{\"model\":\"m", 400, "", "invalid_json", NULL },
    { CHAT, NULL, "{\"model\":}", 400, "", "invalid_json",
      "We could not parse the JSON body of your request: syntax error near "
      "byte 9. The API expects a JSON object." },
    { CHAT, NULL, "{} {}", 400, "", "invalid_json",
      "We could not parse the JSON body of your request: unexpected data "
      "after the JSON value at byte 3. The API expects a JSON object." },
    { CHAT, NULL, "[]", 400, "", "invalid_type",
      "Invalid type for the request body: expected an object, but got an "
      "array instead." },
    { CHAT, NULL, "\"x\"", 400, "", "invalid_type", NULL },
    { CHAT, NULL, "{\"model\":\"\xff\"}", 400, "", "invalid_json",
      "We could not parse the JSON body of your request: invalid UTF-8 at "
      "byte 10. The API expects a JSON object." },
    { CHAT, NULL, "{\"model\":\"\xc0\xaf\"}", 400, "", "invalid_json",
      NULL },   /* overlong "/" */
    { CHAT, NULL, "{\"model\":\"\xed\xa0\x80\"}", 400, "", "invalid_json",
      NULL },   /* UTF-16 surrogate encoded as UTF-8 */
    { CHAT, NULL, "{\"model\":\"a\nb\"}", 400, "", "invalid_json",
      "We could not parse the JSON body of your request: control character "
      "in a string at byte 11 (escape it). The API expects a JSON object." },
    { CHAT, NULL, "{\"model\":\"a\\u0000b\"}", 400, "", "invalid_json",
      NULL },
    { CHAT, NULL, "{\"model\":\"\\ud800\"}", 400, "", "invalid_json",
      NULL },   /* lone surrogate escape */
    { CHAT, NULL, "{\"model\":\"m\",\"x\":NaN}", 400, "", "invalid_json",
      NULL },
};


static void
test_bad_fields(void)
{
    llm_api_request  r;
    llm_api_error    e;
    size_t           i;
    char             name[160];

    for (i = 0; i < sizeof(bad_fields) / sizeof(bad_fields[0]); i++) {
        const bad_case  *c = &bad_fields[i];
        const char      *body = c->body ? c->body : body_of(c->endpoint,
                                                            c->extra);
        int              rc = parse(c->endpoint, body, &r, &e);

        snprintf(name, sizeof(name), "%.120s", c->body ? c->body : c->extra);
        for (char *q = name; *q; q++) {
            *q = (*q == '\n') ? '?' : *q;      /* keep TAP one line */
        }
        if (!ok(rc == -1 && e.status == c->status
                && strcmp(e.param, c->param) == 0
                && strcmp(e.code, c->code) == 0, "rejected: %s", name))
        {
            printf("#   rc %d status %d param \"%s\" code \"%s\"\n#   %s\n",
                   rc, e.status, e.param, e.code, e.message);
        }
        if (c->message != NULL) {
            is_str(e.message, c->message, "message: %s", name);
        }
        ok(r.model == NULL && r.messages == NULL && r.stop == NULL,
           "nothing kept on error: %s", name);
        llm_api_request_free(&r);
    }
}


static void
test_full_chat(void)
{
    llm_api_request  r;
    llm_api_error    e;
    const char      *body =
        "{\"model\":\"smollm2\",\"messages\":["
        "{\"role\":\"developer\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"text\",\"text\":\"b\"}],\"name\":\"ann\"},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[]},"
        "{\"role\":\"user\",\"content\":\"\\u00e9\\ud83d\\ude00\"}],"
        "\"max_tokens\":7,\"max_completion_tokens\":9,\"temperature\":0.5,"
        "\"top_p\":0.9,\"top_k\":40,\"min_p\":0.05,\"seed\":-1,"
        "\"presence_penalty\":0.5,\"frequency_penalty\":-0.5,"
        "\"repetition_penalty\":1.1,\"stop\":[\"\\n\\n\",\"User:\"],"
        "\"stop_token_ids\":[2,7],\"logit_bias\":{\"42\":-100,\"7\":2.5},"
        "\"logprobs\":true,\"top_logprobs\":3,\"n\":1,\"stream\":true,"
        "\"stream_options\":{\"include_usage\":true},\"user\":\"u-1\","
        "\"ignore_eos\":true,\"priority\":-5,\"speculative\":false,"
        "\"response_format\":{\"type\":\"text\"},\"unknown\":{\"deep\":[1]}}";
    char            *msgs;

    ok(parse(CHAT, body, &r, &e) == 0, "full chat request parses");
    is_str(r.model, "smollm2", "model");
    msgs = cJSON_PrintUnformatted(r.messages);
    is_str(msgs,
           "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
           "{\"role\":\"user\",\"content\":\"a\\nb\",\"name\":\"ann\"},"
           "{\"role\":\"assistant\",\"content\":\"\"},"
           "{\"role\":\"user\",\"content\":\"\xc3\xa9\xf0\x9f\x98\x80\"}]",
           "messages normalised: developer->system, parts joined, null ''");
    free(msgs);
    is_int(r.max_tokens, 9, "max_completion_tokens wins over max_tokens");
    ok(r.sampling.temperature == 0.5f, "temperature");
    ok(r.sampling.top_p == 0.9f, "top_p");
    is_int(r.sampling.top_k, 40, "top_k");
    ok(r.sampling.min_p == 0.05f, "min_p");
    ok(r.sampling.has_seed && r.sampling.seed == UINT64_MAX, "seed -1");
    ok(r.sampling.presence_penalty == 0.5f, "presence_penalty");
    ok(r.sampling.frequency_penalty == -0.5f, "frequency_penalty");
    ok(r.sampling.repetition_penalty == 1.1f, "repetition_penalty");
    is_int(r.given, 0x3ff, "every given bit set, priority's too");
    is_int(r.n_stop, 2, "two stop strings");
    ok(r.n_stop == 2 && r.stop[0].len == 2 && memcmp(r.stop[0].ptr, "\n\n", 2)
       == 0 && r.stop[1].len == 5 && strcmp(r.stop[1].ptr, "User:") == 0,
       "stop strings copied");
    ok(r.n_stop_ids == 2 && r.stop_ids[0] == 2 && r.stop_ids[1] == 7,
       "stop_token_ids");
    ok(r.n_logit_bias == 2 && r.logit_bias[0].token == 42
       && r.logit_bias[0].bias == -100.0f && r.logit_bias[1].token == 7
       && r.logit_bias[1].bias == 2.5f, "logit_bias in body order");
    ok(r.sampling.logit_bias == r.logit_bias && r.sampling.n_logit_bias == 2,
       "sampling points at logit_bias");
    ok(r.sampling.logprobs == 1 && r.sampling.top_logprobs == 3, "logprobs");
    ok(r.stream == 1 && r.include_usage == 1, "stream, include_usage");
    is_str(r.user, "u-1", "user");
    ok(r.ignore_eos == 1 && r.priority == -5 && r.n == 1,
       "ignore_eos, priority, n");
    is_int(r.speculative, 0, "speculative false");
    ok(r.given & LLM_API_GIVEN_PRIORITY, "priority given (the location "
       "clamps it, llm_priority)");
    ok(r.prompt == NULL && r.prompt_ids == NULL, "no prompt for chat");
    llm_api_request_free(&r);
    ok(r.model == NULL && r.messages == NULL, "free clears");
    llm_api_request_free(&r);   /* twice is harmless */
}


static void
test_defaults(void)
{
    llm_api_request      r;
    llm_api_error        e;
    llm_sampling_params  d;

    llm_sampling_params_default(&d);
    ok(parse(CHAT, body_of(CHAT, ""), &r, &e) == 0, "minimal chat parses");
    ok(memcmp(&r.sampling, &d, sizeof(d)) == 0,
       "defaults equal llm_sampling_params_default()");
    ok(r.max_tokens == 0 && r.given == 0 && r.n == 1 && r.stream == 0
       && r.include_usage == 0 && r.n_stop == 0 && r.n_stop_ids == 0
       && r.n_logit_bias == 0 && r.user == NULL && r.ignore_eos == 0
       && r.priority == 0 && r.speculative == -1, "nothing else set");
    llm_api_request_free(&r);

    /* null is "not given" for every optional field */
    ok(parse(CHAT, body_of(CHAT, "\"temperature\":null,\"top_p\":null,"
             "\"top_k\":null,\"min_p\":null,\"seed\":null,\"stop\":null,"
             "\"max_tokens\":null,\"max_completion_tokens\":null,"
             "\"logit_bias\":null,\"logprobs\":null,\"top_logprobs\":null,"
             "\"n\":null,\"stream\":null,\"stream_options\":null,"
             "\"user\":null,\"presence_penalty\":null,"
             "\"frequency_penalty\":null,\"repetition_penalty\":null,"
             "\"stop_token_ids\":null,\"ignore_eos\":null,\"priority\":null,"
             "\"response_format\":null"), &r, &e) == 0,
       "nulls accepted");
    ok(memcmp(&r.sampling, &d, sizeof(d)) == 0 && r.given == 0,
       "nulls leave the defaults");
    llm_api_request_free(&r);

    ok(parse(CHAT, body_of(CHAT, "\"top_k\":-1,\"max_tokens\":5,"
             "\"stop\":\"END\",\"stop_token_ids\":[],\"logit_bias\":{},"
             "\"stop\":[]"), &r, &e) == 0, "top_k -1, single stop string");
    ok(r.sampling.top_k == 0 && (r.given & LLM_API_GIVEN_TOP_K),
       "top_k -1 is off (0) but given");
    ok(r.max_tokens == 5 && r.given == (LLM_API_GIVEN_TOP_K
                                        | LLM_API_GIVEN_MAX_TOKENS),
       "max_tokens alone");
    /* duplicate keys: cJSON keeps the first */
    ok(r.n_stop == 1 && strcmp(r.stop[0].ptr, "END") == 0, "stop string");
    llm_api_request_free(&r);

    ok(parse(CHAT, body_of(CHAT, "\"temperature\":0,\"top_p\":1,"
             "\"min_p\":0,\"presence_penalty\":-2,\"frequency_penalty\":2,"
             "\"top_k\":0,\"seed\":9007199254740992,"
             "\"stop\":[\"a\",\"b\",\"c\",\"d\"],\"logprobs\":true,"
             "\"top_logprobs\":20,\"logprobs\":true"), &r, &e) == 0,
       "range edges accepted");
    ok(r.sampling.seed == 9007199254740992ull && r.n_stop == 4
       && r.sampling.top_logprobs == 20, "edge values kept");
    llm_api_request_free(&r);

    ok(parse(CHAT, " \n{\"model\":\"m\"," USER_HI "}\r\n\t", &r, &e) == 0,
       "whitespace around the body");
    llm_api_request_free(&r);
}


static void
test_completions(void)
{
    llm_api_request  r;
    llm_api_error    e;

    ok(parse(COMP, "{\"model\":\"m\",\"prompt\":\"Once upon\",\"logprobs\":2,"
             "\"messages\":5,\"echo\":false,\"best_of\":1,\"suffix\":\"\"}",
             &r, &e) == 0, "string prompt; messages ignored");
    ok(r.prompt && strcmp(r.prompt, "Once upon") == 0 && r.prompt_len == 9
       && r.prompt_ids == NULL && r.messages == NULL, "prompt text");
    ok(r.sampling.logprobs == 1 && r.sampling.top_logprobs == 2,
       "completions logprobs 2: top 2");
    llm_api_request_free(&r);

    ok(parse(COMP, "{\"model\":\"m\",\"prompt\":[\"only\"],\"logprobs\":0}",
             &r, &e) == 0, "array of one string");
    ok(r.prompt && strcmp(r.prompt, "only") == 0, "its text");
    ok(r.sampling.logprobs == 1 && r.sampling.top_logprobs == 0,
       "logprobs 0: chosen token only");
    llm_api_request_free(&r);

    ok(parse(COMP, "{\"model\":\"m\",\"prompt\":[1,2,49151]}", &r, &e) == 0,
       "token ids");
    ok(r.n_prompt_ids == 3 && r.prompt_ids[2] == 49151 && r.prompt == NULL,
       "ids kept");
    llm_api_request_free(&r);

    ok(parse(COMP, "{\"model\":\"m\",\"prompt\":[[4,5]]}", &r, &e) == 0,
       "one nested id array");
    ok(r.n_prompt_ids == 2 && r.prompt_ids[0] == 4, "nested ids kept");
    llm_api_request_free(&r);

    ok(parse(COMP, "{\"model\":\"m\",\"prompt\":\"\"}", &r, &e) == 0,
       "empty string prompt accepted (the template/BOS decides)");
    ok(r.prompt && r.prompt_len == 0, "empty prompt");
    llm_api_request_free(&r);
}


static void
test_limits(void)
{
    static const char  nul_after[] = "{\"model\":\"m\",\"prompt\":\"x\"}\0";
    llm_api_limits     lim;
    llm_api_request    r;
    llm_api_error      e;
    char               body[4096], stop[1100];
    const char        *b;
    int                i, n;

    llm_api_limits_default(&lim);
    lim.vocab_size = 100;
    b = "{\"model\":\"m\",\"prompt\":[1,100]}";
    ok(llm_api_parse(&r, b, strlen(b), COMP, &lim, &e) == -1
       && strcmp(e.param, "prompt[1]") == 0
       && strcmp(e.code, "integer_above_max_value") == 0,
       "prompt id >= vocab_size");
    b = "{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":{\"100\":1}}";
    ok(llm_api_parse(&r, b, strlen(b), COMP, &lim, &e) == -1
       && strcmp(e.param, "logit_bias") == 0, "logit_bias id >= vocab_size");
    is_str(e.message, "Invalid key in 'logit_bias': 100. Keys must be token "
           "ids: non-negative integers below 100.", "logit_bias vocab msg");
    b = "{\"model\":\"m\",\"prompt\":\"x\",\"stop_token_ids\":[99,100]}";
    ok(llm_api_parse(&r, b, strlen(b), COMP, &lim, &e) == -1
       && strcmp(e.param, "stop_token_ids[1]") == 0,
       "stop_token_ids >= vocab_size");

    llm_api_limits_default(&lim);
    lim.max_body = 20;
    b = "{\"model\":\"m\",\"prompt\":\"xy\"}";
    ok(llm_api_parse(&r, b, strlen(b), COMP, &lim, &e) == -1
       && e.status == 413 && strcmp(e.code, "request_too_large") == 0,
       "body over max_body: 413");
    is_str(e.message, "The request body is 27 bytes, more than the limit of "
           "20 bytes.", "413 message");

    llm_api_limits_default(&lim);
    lim.max_prompt_ids = 2;
    b = "{\"model\":\"m\",\"prompt\":[1,2,3]}";
    ok(llm_api_parse(&r, b, strlen(b), COMP, &lim, &e) == -1
       && strcmp(e.code, "array_above_max_length") == 0
       && strcmp(e.param, "prompt") == 0, "max_prompt_ids");

    llm_api_limits_default(&lim);
    lim.max_messages = 2;
    b = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
        "{\"role\":\"user\",\"content\":\"a\"},"
        "{\"role\":\"user\",\"content\":\"a\"}]}";
    ok(llm_api_parse(&r, b, strlen(b), CHAT, &lim, &e) == -1
       && strcmp(e.code, "array_above_max_length") == 0
       && strcmp(e.param, "messages") == 0, "max_messages");

    llm_api_limits_default(&lim);
    lim.max_logit_bias = 1;
    b = "{\"model\":\"m\",\"prompt\":\"x\",\"logit_bias\":{\"1\":1,\"2\":1}}";
    ok(llm_api_parse(&r, b, strlen(b), COMP, &lim, &e) == -1
       && strcmp(e.code, "object_above_max_properties") == 0,
       "max_logit_bias");

    llm_api_limits_default(&lim);
    lim.max_n = 4;
    b = "{\"model\":\"m\",\"prompt\":\"x\",\"n\":4}";
    ok(llm_api_parse(&r, b, strlen(b), COMP, &lim, &e) == 0 && r.n == 4,
       "n up to max_n when raised");
    llm_api_request_free(&r);
    b = "{\"model\":\"m\",\"prompt\":\"x\",\"n\":5}";
    ok(llm_api_parse(&r, b, strlen(b), COMP, &lim, &e) == -1
       && strcmp(e.code, "integer_above_max_value") == 0, "n over max_n");

    /* stop string length: 1024 bytes pass, 1025 do not */
    memset(stop, 'x', sizeof(stop));
    for (n = 1024; n <= 1025; n++) {
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"prompt\":\"x\","
                 "\"stop\":[\"%.*s\"]}", n, stop);
        i = llm_api_parse(&r, body, strlen(body), COMP, NULL, &e);
        if (n == 1024) {
            ok(i == 0 && r.stop[0].len == 1024, "stop of 1024 bytes");
            llm_api_request_free(&r);
        } else {
            ok(i == -1 && strcmp(e.code, "string_above_max_length") == 0
               && strcmp(e.param, "stop[0]") == 0, "stop of 1025 bytes");
        }
    }

    /* depth: 64 levels pass, 65 do not (model first keeps the error on
       the depth when it is one) */
    for (n = 63; n <= 64; n++) {
        int  at = snprintf(body, sizeof(body), "{\"model\":\"m\","
                           USER_HI ",\"x\":");

        for (i = 0; i < n; i++) {
            body[at++] = '[';
        }
        for (i = 0; i < n; i++) {
            body[at++] = ']';
        }
        body[at++] = '}';
        body[at] = '\0';
        i = llm_api_parse(&r, body, strlen(body), CHAT, NULL, &e);
        if (n == 63) {
            ok(i == 0, "depth 64 accepted");
            llm_api_request_free(&r);
        } else {
            ok(i == -1 && strcmp(e.code, "invalid_json") == 0,
               "depth 65 rejected before cJSON");
            is_str(e.message, "The JSON body nests arrays and objects deeper "
                   "than 64 levels.", "depth message");
        }
    }
    /* brackets inside strings do not count */
    snprintf(body, sizeof(body), "{\"model\":\"m\"," USER_HI ",\"x\":\"%s\"}",
             "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
             "[[[[[[[[[[\\\"");
    ok(llm_api_parse(&r, body, strlen(body), CHAT, NULL, &e) == 0,
       "brackets and escaped quotes inside strings ignored by depth scan");
    llm_api_request_free(&r);

    /* value count: bounded before cJSON builds a node for each */
    llm_api_limits_default(&lim);
    lim.max_values = 7;     /* root, model, prompt, 1, 2, 3, x */
    b = "{\"model\":\"m\",\"prompt\":[1,2,3],\"x\":\",,,,[{\"}";
    ok(llm_api_parse(&r, b, strlen(b), COMP, &lim, &e) == 0,
       "7 values (commas inside strings do not count)");
    llm_api_request_free(&r);
    b = "{\"model\":\"m\",\"prompt\":[1,2,3,4],\"x\":1}";
    ok(llm_api_parse(&r, b, strlen(b), COMP, &lim, &e) == -1
       && strcmp(e.code, "invalid_json") == 0, "8 values refused");
    is_str(e.message, "The JSON body has more than 7 values.",
           "value count message");

    /* default logit_bias cap: what one ring slot carries (64) */
    for (n = 64; n <= 65; n++) {
        int  at = snprintf(body, sizeof(body), "{\"model\":\"m\","
                           "\"prompt\":\"x\",\"logit_bias\":{");

        for (i = 0; i < n; i++) {
            at += snprintf(body + at, sizeof(body) - (size_t) at,
                           "%s\"%d\":1", i ? "," : "", i);
        }
        snprintf(body + at, sizeof(body) - (size_t) at, "}}");
        i = llm_api_parse(&r, body, strlen(body), COMP, NULL, &e);
        if (n == 64) {
            ok(i == 0 && r.n_logit_bias == 64, "64 logit_bias entries");
            llm_api_request_free(&r);
        } else {
            ok(i == -1 && strcmp(e.code, "object_above_max_properties") == 0,
               "65 logit_bias entries refused by default");
            is_str(e.message, "Invalid 'logit_bias': too many entries. "
                   "Expected at most 64, but got 65 instead.",
                   "logit_bias cap message");
        }
    }

    /* a long conversation */
    {
        size_t  cap = 64 * 4096 + 64, at;
        char   *big = malloc(cap);

        at = (size_t) snprintf(big, cap, "{\"model\":\"m\",\"messages\":[");
        for (i = 0; i < 4096; i++) {
            at += (size_t) snprintf(big + at, cap - at, "%s{\"role\":\"%s\","
                                    "\"content\":\"m%d\"}", i ? "," : "",
                                    i % 2 ? "assistant" : "user", i);
        }
        at += (size_t) snprintf(big + at, cap - at, "]}");
        ok(llm_api_parse(&r, big, at, CHAT, NULL, &e) == 0
           && cJSON_GetArraySize(r.messages) == 4096,
           "4096 messages (the default cap)");
        llm_api_request_free(&r);
        free(big);
    }

    ok(llm_api_parse(&r, nul_after, sizeof(nul_after) - 1, COMP, NULL, &e)
       == -1 && strcmp(e.code, "invalid_json") == 0,
       "a NUL byte after the object is not whitespace");
    ok(llm_api_parse(&r, "{}", 2, 7, NULL, &e) == -1 && e.status == 500,
       "unknown endpoint is a server error");
}


/* RFC 8259, strictly: what cJSON alone let through with a 200 */
typedef struct {
    const char  *body;
    size_t       len;
    const char  *why;       /* the message after "...your request: " up to
                               ". The API", or NULL */
} strict_case;

#define S(lit)  lit, sizeof(lit) - 1

static const strict_case  strict_bad[] = {
    /* control bytes cJSON skips as whitespace */
    { S("\0{\"model\":\"m\",\"prompt\":\"hi\"}"),
      "control character 0x00 at byte 0 (JSON allows only space, tab, CR "
      "and LF between tokens)" },
    { S("{\"model\"\v:\"m\",\"prompt\":\"hi\"}"),
      "control character 0x0b at byte 8 (JSON allows only space, tab, CR "
      "and LF between tokens)" },
    { S("{\"model\":\"m\",\0\"prompt\":\"hi\"}"),
      "control character 0x00 at byte 13 (JSON allows only space, tab, CR "
      "and LF between tokens)" },
    { S("{\"model\":\"m\",\"prompt\":\"hi\"\f}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"hi\"}\0"),
      "unexpected data after the JSON value at byte 27" },
    { S("{\"model\":\"m\",\"prompt\":\"h\ti\"}"),
      "control character in a string at byte 24 (escape it)" },
    /* numbers */
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":02}"),
      "invalid number at byte 40 (no leading zeros, and a digit on both "
      "sides of a '.')" },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":-01}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":2.}"),
      "invalid number at byte 40 (no leading zeros, and a digit on both "
      "sides of a '.')" },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"max_tokens\":2.e1}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"top_p\":.5}"),
      "syntax error near byte 35" },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"top_p\":+1}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"top_p\":-}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"top_p\":1e}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"top_p\":1e+}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"top_p\":0x1}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"top_p\":Infinity}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"stop\":[1 0]}"),
      "syntax error near byte 37" },
    /* escapes */
    { S("{\"model\":\"m\",\"prompt\":\"H\\u12G4\"}"),
      "invalid escape sequence in a string at byte 24" },
    { S("{\"model\":\"m\",\"prompt\":\"\\x41\"}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"\\u12\"}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"\\'\"}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"\\udc00\"}"),
      "unpaired UTF-16 surrogate escape in a string at byte 23" },
    { S("{\"model\":\"m\",\"prompt\":\"\\ud800\\u0041\"}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"\\ud800x\"}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"\\ud83d\"}"), NULL },
    /* structure */
    { S("{\"model\":\"m\",\"prompt\":\"hi\",}"), "syntax error near byte 27" },
    { S("{\"model\":\"m\",\"prompt\":[1,]}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":[,1]}"), NULL },
    { S("{,\"model\":\"m\"}"), NULL },
    { S("{\"model\" \"m\"}"), NULL },
    { S("{\"model\":\"m\" \"prompt\":\"hi\"}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":[1}"), NULL },
    { S("{'model':'m'}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"echo\":tru}"), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"echo\":nul"),
      "the body ends at byte 37, inside an unfinished value" },
    { S("{\"model\":\"m\",\"prompt\":\"hi\\"),
      "the body ends at byte 26, inside an unfinished value" },
    { S("{\"model\":\"m\",\"prompt\":\"\\ud83d\\ude0"),
      "the body ends at byte 34, inside an unfinished value" },
    { S("{\"model\":\"m\",\"prompt\":\"hi\",\"top_p\":1."), NULL },
    { S("{\"model\":\"m\",\"prompt\":\"hi\" "), NULL },
};


static void
test_strict_json(void)
{
    llm_api_request  r;
    llm_api_error    e;
    size_t           i, n;
    char             want[320], name[160];

    for (i = 0; i < sizeof(strict_bad) / sizeof(strict_bad[0]); i++) {
        const strict_case  *c = &strict_bad[i];

        snprintf(name, sizeof(name), "%.*s", (int) c->len, c->body);
        for (n = 0; n < c->len && n < sizeof(name) - 1; n++) {
            name[n] = (c->body[n] < 0x20) ? '?' : c->body[n];
        }
        name[n] = '\0';
        ok(llm_api_parse(&r, c->body, c->len, COMP, NULL, &e) == -1
           && e.status == 400 && strcmp(e.code, "invalid_json") == 0
           && e.param[0] == '\0', "strict: refused: %s", name);
        if (c->why != NULL) {
            snprintf(want, sizeof(want), "We could not parse the JSON body "
                     "of your request: %s. The API expects a JSON object.",
                     c->why);
            is_str(e.message, want, "strict: message: %s", name);
        }
        llm_api_request_free(&r);
    }

    /* valid edge cases, and what they read as */
    static const char  edge[] =
        " \t\r\n{ \"model\" : \"m\" ,\n\"prompt\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t"
        "\\u00e9\\ud83d\\ude00\x7f\xf4\x8f\xbf\xbf\","
        "\"max_tokens\":2e1,\"temperature\":1E-1,\"top_p\":1e0,"
        "\"presence_penalty\":-0,\"frequency_penalty\":-0.0e+0,"
        "\"seed\":-0,\"min_p\":0.000,\"repetition_penalty\":10E-1,"
        "\"x\":[ ],\"y\":{ },\"z\":[true,false,null,{\"a\":[[]]}],"
        "\"stop\":[\"\\u0041\"]} \n";

    ok(llm_api_parse(&r, edge, sizeof(edge) - 1, COMP, NULL, &e) == 0,
       "strict: valid edge cases accepted");
    if (r.prompt != NULL) {
        is_str(r.prompt, "\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80\x7f"
               "\xf4\x8f\xbf\xbf", "strict: escapes and surrogate pair");
    }
    ok(r.max_tokens == 20 && r.sampling.temperature == 0.1f
       && r.sampling.top_p == 1.0f && r.sampling.presence_penalty == 0
       && r.sampling.frequency_penalty == 0 && r.sampling.seed == 0
       && r.sampling.min_p == 0 && r.sampling.repetition_penalty == 1.0f,
       "strict: exponents and negative zero read right");
    ok(r.n_stop == 1 && strcmp(r.stop[0].ptr, "A") == 0,
       "strict: \\u0041 in a stop string");
    llm_api_request_free(&r);

    /* floats that fit: a tiny temperature is 0, a tiny penalty -0 */
    ok(parse(CHAT, body_of(CHAT, "\"temperature\":1e-300,"
                           "\"presence_penalty\":-1e-300,\"min_p\":1e-300"),
             &r, &e) == 0 && r.sampling.temperature == 0
       && r.sampling.presence_penalty == 0 && r.sampling.min_p == 0,
       "underflow to zero is fine where zero is in the range");
    llm_api_request_free(&r);
    ok(parse(CHAT, body_of(CHAT, "\"top_p\":1e-40"), &r, &e) == 0
       && r.sampling.top_p > 0, "a subnormal top_p is above 0");
    llm_api_request_free(&r);
    /* 70 characters: read whole, not cut at cJSON's old 64-byte buffer */
    ok(parse(CHAT, body_of(CHAT, "\"top_p\":0.1000000000000000000000000000"
                           "000000000000000000000000000000000000000001"),
             &r, &e) == 0 && r.sampling.top_p == 0.1f, "a long number");
    llm_api_request_free(&r);
}


/* the parsed stop strings drive the stop matcher as they are */
static void
test_stop_handoff(void)
{
    llm_api_request  r;
    llm_api_error    e;
    llm_stop         m;
    llm_stop_out     o;
    char             err[128];

    ok(parse(CHAT, body_of(CHAT, "\"stop\":[\"\\u4e16\\u754c\"]"), &r, &e)
       == 0, "unicode-escaped stop string");
    ok(r.n_stop == 1 && r.stop[0].len == 6, "decoded to 6 UTF-8 bytes");
    ok(llm_stop_init(&m, r.stop, r.n_stop, err, sizeof(err)) == 0,
       "stop matcher from the request");
    llm_api_request_free(&r);   /* the matcher keeps its own copies */
    llm_stop_push(&m, "hi \xe4\xb8\x96", 6, &o);
    is_int(o.len, 3, "held the first character");
    llm_stop_push(&m, "\xe7\x95\x8c", 3, &o);
    ok(o.stopped && o.len == 0, "stopped at the stop string");
    llm_stop_free(&m);
}


/* each response_format type becomes a constraint kind and its text */
static void
test_response_format(void)
{
    llm_api_request   r;
    llm_api_error     e;
    char             *big;
    size_t            n;

    ok(parse(CHAT, body_of(CHAT, "\"response_format\":{\"type\":\"text\"}"),
             &r, &e) == 0 && r.constraint_kind == LLM_CONSTRAINT_NONE
       && r.constraint == NULL, "text: no constraint");
    llm_api_request_free(&r);
    ok(parse(CHAT, body_of(CHAT, "\"response_format\":{\"type\":"
                                 "\"json_object\"}"), &r, &e) == 0
       && r.constraint_kind == LLM_CONSTRAINT_JSON_OBJECT
       && r.constraint_len == 0, "json_object");
    llm_api_request_free(&r);
    ok(parse(CHAT, body_of(CHAT, "\"response_format\":{\"type\":"
                 "\"json_schema\",\"json_schema\":{\"name\":\"A-b_9\","
                 "\"strict\":true,\"description\":\"d\",\"schema\":"
                 "{ \"type\" : \"object\", \"required\": [ \"a\" ] }}}"),
             &r, &e) == 0
       && r.constraint_kind == LLM_CONSTRAINT_JSON_SCHEMA, "json_schema");
    is_str(r.constraint, "{\"type\":\"object\",\"required\":[\"a\"]}",
           "the schema compacted");
    is_int((int) r.constraint_len, (int) strlen(r.constraint), "its length");
    llm_api_request_free(&r);
    ok(r.constraint == NULL, "freed");
    ok(parse(COMP, body_of(COMP, "\"response_format\":{\"type\":"
                 "\"grammar\",\"grammar\":\"root ::= \\\"a\\\"\"}"),
             &r, &e) == 0 && r.constraint_kind == LLM_CONSTRAINT_GRAMMAR,
       "grammar, on completions too");
    is_str(r.constraint, "root ::= \"a\"", "the grammar's text");
    llm_api_request_free(&r);
    ok(parse(CHAT, body_of(CHAT, "\"response_format\":{\"type\":"
                 "\"regex\",\"regex\":\"[0-9]+\"}"), &r, &e) == 0
       && r.constraint_kind == LLM_CONSTRAINT_REGEX
       && strcmp(r.constraint, "[0-9]+") == 0, "regex");
    llm_api_request_free(&r);

    /* {"description":"x..."} is 18 bytes + the x's once compacted: at
       LLM_CONSTRAINT_MAX_BYTES it passes, one more is a 400 */
    n = LLM_CONSTRAINT_MAX_BYTES - 18;
    big = malloc(n + 512);
    for (int over = 0; over <= 1; over++) {
        int  k = snprintf(big, 512, "{\"model\":\"m\"," USER_HI
                          ",\"response_format\":{\"type\":\"json_schema\","
                          "\"json_schema\":{\"name\":\"b\",\"schema\": "
                          "{\"description\": \"");

        memset(big + k, 'x', n + over);
        strcpy(big + k + n + over, "\"}}}}");
        if (!over) {
            ok(parse(CHAT, big, &r, &e) == 0
               && r.constraint_len == LLM_CONSTRAINT_MAX_BYTES,
               "a schema of exactly %d bytes is taken",
               LLM_CONSTRAINT_MAX_BYTES);
        } else {
            ok(parse(CHAT, big, &r, &e) == -1 && e.status == 400,
               "one byte more: 400");
            is_str(e.param, "response_format", "naming response_format");
            is_str(e.code, "string_above_max_length", "code");
        }
        llm_api_request_free(&r);
    }
    free(big);
}


/*
 * The request's stop_token_ids parsed under lim, into a ring slot beside
 * the model's stop ids (t): 1 when every id of both reached the slot or
 * the request was a 400 naming stop_token_ids, 0 when an id was lost.
 */
static int
stop_ids_kept(const llm_api_limits *lim, const llm_tokenizer *t, int n_user,
    int ignore_eos, int *n_slot, int *status)
{
    llm_api_request   r;
    llm_api_error     e;
    llm_sampling      p;
    const int32_t    *eos;
    char              extra[512];
    size_t            at;
    int               i, j, k, found, kept = 1;

    at = (size_t) snprintf(extra, sizeof(extra), "\"ignore_eos\":%s,"
                           "\"stop_token_ids\":[",
                           ignore_eos ? "true" : "false");
    for (i = 0; i < n_user; i++) {
        at += (size_t) snprintf(extra + at, sizeof(extra) - at, "%s%d",
                                i ? "," : "", 200 + i);
    }
    snprintf(extra + at, sizeof(extra) - at, "]");

    const char *b = body_of(CHAT, extra);
    *status = 0;
    *n_slot = -1;
    if (llm_api_parse(&r, b, strlen(b), CHAT, lim, &e) != 0) {
        *status = e.status;
        return e.status == 400 && strcmp(e.param, "stop_token_ids") == 0;
    }
    memset(&p, 0, sizeof(p));
    llm_api_stop_ids_to_ring(&r, t, &p);
    *n_slot = (int) p.n_stop_ids;
    k = ignore_eos ? 0 : llm_tokenizer_stop_ids(t, &eos);
    for (i = 0; i < k + n_user; i++) {
        int32_t want = i < k ? eos[i] : 200 + (i - k);
        for (found = 0, j = 0; j < (int) p.n_stop_ids; j++) {
            found |= p.stop_ids[j] == want;
        }
        kept &= found;
    }
    llm_api_request_free(&r);
    return kept;
}


/* a model with 6 stop ids, a request with 12 stop_token_ids: a ring slot
   carries 16, so all 18 cannot fit; each id reaches the engine or the
   request is refused, never an id dropped without a word */
static void
test_stop_ids_room(void)
{
    gguf_file        g;
    llm_tokenizer   *t;
    llm_api_limits   lim;
    char             err[256];
    int              i, n_slot, status;

    if (gguf_open(&g, tap_model()) != 0) {
        ok(0, "the model's tokenizer");
        return;
    }
    t = llm_tokenizer_load_gguf(&g, err, sizeof(err));
    gguf_close(&g);
    if (t == NULL) {
        ok(0, "the model's tokenizer: %s", err);
        return;
    }
    t->n_stop = 6;
    for (i = 0; i < 6; i++) {
        t->stop[i] = 100 + i;
    }

    llm_api_limits_default(&lim);
    llm_api_limits_model(&lim, t);
    is_int(lim.max_stop_ids, LLM_RING_MAX_STOP_IDS - 6,
           "stop_token_ids: the slot's 16 less the model's 6");
    ok(stop_ids_kept(&lim, t, 12, 0, &n_slot, &status),
       "6 model stop ids + 12 stop_token_ids: all honoured or a 400 "
       "naming stop_token_ids");
    is_int(status, 400, "12 stop_token_ids beside 6 model stop ids: 400");
    ok(stop_ids_kept(&lim, t, 10, 0, &n_slot, &status) && n_slot == 16,
       "6 + 10: all 16 in the slot");
    ok(stop_ids_kept(&lim, t, 10, 1, &n_slot, &status) && n_slot == 10,
       "ignore_eos: the 10 requested only");
    llm_tokenizer_free(t);
}



/* suffix (fill in the middle) is kept for the worker, which knows whether
   the model has FIM tokens; "" is as absent */
static void
test_suffix(void)
{
    llm_api_request  r;
    llm_api_error    e;

    memset(&r, 0, sizeof(r));
    ok(parse(COMP, body_of(COMP, "\"suffix\":\"}\\n\""), &r, &e) == 0,
       "suffix: parsed");
    is_str(r.suffix, "}\n", "suffix: kept");
    is_int(r.suffix_len, 2, "suffix: its length");
    llm_api_request_free(&r);

    memset(&r, 0, sizeof(r));
    ok(parse(COMP, body_of(COMP, "\"suffix\":\"\""), &r, &e) == 0
       && r.suffix == NULL, "suffix \"\": as absent");
    llm_api_request_free(&r);
}

/* what the template reads besides the messages: reasoning_effort,
   chat_template_kwargs (not over the context's own keys), and an
   assistant turn's reasoning passed back */
static void
test_template_vars(void)
{
    llm_api_request  r;
    llm_api_error    e;
    const cJSON     *m;
    static const struct {
        const char  *extra;
        const char  *param;
    } bad[] = {
        { "\"reasoning_effort\":\"extreme\"", "reasoning_effort" },
        { "\"reasoning_effort\":3", "reasoning_effort" },
        { "\"chat_template_kwargs\":[1]", "chat_template_kwargs" },
        { "\"chat_template_kwargs\":{\"bos_token\":\"<|im_start|>\"}",
          "chat_template_kwargs" },
        { "\"chat_template_kwargs\":{\"messages\":[]}",
          "chat_template_kwargs" },
    };

    memset(&r, 0, sizeof(r));
    ok(parse(CHAT, body_of(CHAT, "\"reasoning_effort\":\"high\","
                                 "\"chat_template_kwargs\":{\"enable_thinking\""
                                 ":false,\"model_identity\":\"You are X.\"}"),
             &r, &e) == 0, "reasoning_effort and chat_template_kwargs: parsed");
    is_str(r.reasoning_effort, "high", "reasoning_effort kept");
    ok(cJSON_IsFalse(cJSON_GetObjectItem(r.template_kwargs,
                                         "enable_thinking"))
       && cJSON_IsString(cJSON_GetObjectItem(r.template_kwargs,
                                             "model_identity")),
       "chat_template_kwargs kept");
    llm_api_request_free(&r);

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&r, 0, sizeof(r));
        ok(parse(CHAT, body_of(CHAT, bad[i].extra), &r, &e) == -1
           && e.status == 400 && strcmp(e.param, bad[i].param) == 0,
           "refused: %s (%s)", bad[i].extra, e.message);
        llm_api_request_free(&r);
    }

    memset(&r, 0, sizeof(r));
    ok(parse(CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                   "\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":"
                   "\"yes\",\"reasoning_content\":\"Greeting.\"},{\"role\":"
                   "\"assistant\",\"content\":\"b\",\"reasoning\":\"R.\"}]}",
             &r, &e) == 0, "assistant reasoning: parsed");
    m = cJSON_GetArrayItem(r.messages, 1);
    is_str(cJSON_GetStringValue(cJSON_GetObjectItem(m, "reasoning_content")),
           "Greeting.", "reasoning_content passed back");
    m = cJSON_GetArrayItem(r.messages, 2);
    is_str(cJSON_GetStringValue(cJSON_GetObjectItem(m, "reasoning_content")),
           "R.", "reasoning passed back as reasoning_content");
    llm_api_request_free(&r);

    memset(&r, 0, sizeof(r));
    ok(parse(CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\","
                   "\"content\":\"a\",\"reasoning_content\":1}]}", &r, &e) == -1
       && strcmp(e.param, "messages[0].reasoning_content") == 0,
       "reasoning_content not a string: refused, named");
    llm_api_request_free(&r);
}

int
main(void)
{
    test_template_vars();
    test_suffix();
    test_bad_fields();
    test_full_chat();
    test_defaults();
    test_completions();
    test_limits();
    test_strict_json();
    test_stop_handoff();
    test_response_format();
    test_stop_ids_room();
    return tap_done();
}
