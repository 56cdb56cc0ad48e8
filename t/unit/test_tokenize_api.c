/*
 * vLLM's /tokenize and /detokenize bodies (api/tokenize.h): a prompt or
 * messages read as the request they stand for (the /tokenize fields taken
 * out, the model filled in), the flags, every refusal; /detokenize's ids.
 */
#include "tap.h"
#include "api/tokenize.h"

#include <stdlib.h>
#include <string.h>


static char *
tr(const char *body, llm_tokenize_opts *o, llm_api_error *e)
{
    size_t  len;

    return llm_tokenize_to_request(body, strlen(body), "m", NULL, o, &len,
                                   e);
}


static void
test_tokenize(void)
{
    char               *s;
    llm_api_error       e;
    llm_tokenize_opts   o;

    s = tr("{\"prompt\":\"hi\"}", &o, &e);
    is_str(s, "{\"prompt\":\"hi\",\"model\":\"m\"}",
           "a prompt: the model filled in");
    is_int(o.chat, 0, "a prompt: a completion");
    is_int(o.add_special_tokens, -1, "add_special_tokens: the endpoint's");
    is_int(o.return_token_strs, 0, "return_token_strs off");
    free(s);

    s = tr("{\"model\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":"
           "\"hi\"}],\"add_generation_prompt\":false,\"add_special_tokens\":"
           "true,\"return_token_strs\":true}", &o, &e);
    is_str(s, "{\"model\":\"x\",\"messages\":[{\"role\":\"user\","
           "\"content\":\"hi\"}]}", "messages: the flags taken out, the "
           "model kept");
    is_int(o.chat, 1, "messages: a chat");
    is_int(o.add_generation_prompt, 0, "add_generation_prompt false");
    is_int(o.add_special_tokens, 1, "add_special_tokens true");
    is_int(o.return_token_strs, 1, "return_token_strs true");
    free(s);

    s = tr("{\"messages\":[],\"add_generation_prompt\":null}", &o, &e);
    ok(s != NULL && o.add_generation_prompt == 1,
       "add_generation_prompt null: the default (on)");
    free(s);

    s = tr("{\"prompt\":\"a\",\"messages\":[]}", &o, &e);
    ok(s == NULL && e.status == 400 && strcmp(e.param, "prompt") == 0,
       "both prompt and messages: 400 naming prompt");
    free(s);
    s = tr("{}", &o, &e);
    is_str(s == NULL ? e.message : "", "Give either 'prompt' or "
           "'messages'.", "neither: 400");
    free(s);
    s = tr("{\"prompt\":\"a\",\"add_special_tokens\":\"yes\"}", &o, &e);
    is_str(s == NULL ? e.message : "", "Invalid type for "
           "'add_special_tokens': expected a boolean.", "a flag not a "
           "boolean: 400");
    free(s);
    s = tr("[1]", &o, &e);
    ok(s == NULL && e.status == 400, "an array: 400");
    free(s);
    s = tr("{\"prompt\":", &o, &e);
    ok(s == NULL && strstr(e.message, "unfinished value") != NULL,
       "bad JSON: the chat parser's words");
    free(s);
}


static void
test_detokenize(void)
{
    int             n;
    int32_t        *ids;
    llm_api_error   e;

    ok(llm_detokenize_parse("{\"tokens\":[0,5,9]}", 18, 10, NULL, &ids, &n,
                            &e) == 0 && n == 3 && ids[0] == 0 && ids[1] == 5
       && ids[2] == 9, "ids read");
    free(ids);
    ok(llm_detokenize_parse("{\"tokens\":[]}", 13, 10, NULL, &ids, &n, &e)
       == 0 && n == 0, "no ids: none");
    free(ids);
    ok(llm_detokenize_parse("{\"tokens\":[10]}", 15, 10, NULL, &ids, &n, &e)
       == -1 && ids == NULL, "an id past the vocabulary: refused");
    is_str(e.message, "Invalid 'tokens[0]': expected a token id in [0, 10).",
           "... naming it");
    ok(llm_detokenize_parse("{\"tokens\":[1,-1]}", 17, 10, NULL, &ids, &n,
                            &e) == -1, "a negative id: refused");
    ok(llm_detokenize_parse("{\"tokens\":[1.5]}", 16, 10, NULL, &ids, &n,
                            &e) == -1, "a fraction: refused");
    ok(llm_detokenize_parse("{\"tokens\":\"1\"}", 14, 10, NULL, &ids, &n, &e)
       == -1 && strcmp(e.param, "tokens") == 0, "tokens not an array");
    ok(llm_detokenize_parse("{}", 2, 10, NULL, &ids, &n, &e) == -1
       && strcmp(e.code, "missing_required_parameter") == 0,
       "tokens missing");
}


int
main(void)
{
    test_tokenize();
    test_detokenize();
    return tap_done();
}
