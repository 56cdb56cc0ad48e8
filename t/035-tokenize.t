# vLLM's /tokenize and /detokenize through nginx on the real SmolLM2
# (docs/api.md): a prompt or a chat to the ids the completion and chat
# endpoints send, the vocabulary's strings, ids back to text, errors.
use Test::Nginx::Socket 'no_plan';
use Cwd qw(abs_path);
use FindBin;
use JSON::PP;

# t/data/models/hf-qwen2 with Qwen2.5-Coder's three FIM tokens added to
# its tokenizer (ids 603-605, past the tiny model's 603 embeddings: only
# the worker's side, /tokenize, is served from it)
my $hf = abs_path("$FindBin::Bin/data/models/hf-qwen2");
my $fim = "$ENV{TEST_NGINX_BUILD}/t/hf-qwen2-fim";
system("rm -rf $fim && mkdir -p $fim && cp $hf/* $fim/") == 0 or die;
{
    open my $in, '<', "$fim/tokenizer.json" or die;
    my $tok = decode_json(do { local $/; <$in> });
    my $id = 603;
    for my $name (qw(<|fim_prefix|> <|fim_suffix|> <|fim_middle|>)) {
        push @{ $tok->{added_tokens} }, { id => $id++, content => $name,
            single_word => JSON::PP::false, lstrip => JSON::PP::false,
            rstrip => JSON::PP::false, normalized => JSON::PP::false,
            special => JSON::PP::true };
    }
    open my $out, '>', "$fim/tokenizer.json" or die;
    print $out encode_json($tok);
}
$ENV{TEST_NGINX_FIM_MODEL} = $fim;

add_block_preprocessor(sub {
    my $block = shift;

    if (!defined $block->http_config) {
        $block->set_value("http_config", <<'_EOC_');
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
        max_model_len 2048;
        kv_cache_memory 256m;
    }
_EOC_
    }

    if (!defined $block->config) {
        $block->set_value("config", <<'_EOC_');
    location ~ ^/(de)?tokenize$ { llm_api main; }
    location /v1/ { llm_api main; }
_EOC_
    }

    $block->set_value("timeout", 120) unless defined $block->timeout;
});

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a prompt: count, max_model_len, tokens, token_strs null (model optional)
--- request
POST /tokenize
{"prompt":"Hello world"}
--- error_code: 200
--- response_body
{"count":2,"max_model_len":2048,"tokens":[19556,905],"token_strs":null}



=== TEST 2: return_token_strs: the vocabulary's text of each token
--- request
POST /tokenize
{"model":"smollm2","prompt":"Hello world","return_token_strs":true}
--- error_code: 200
--- response_body
{"count":2,"max_model_len":2048,"tokens":[19556,905],"token_strs":["Hello","Ġworld"]}



=== TEST 3: messages: the chat prompt's ids: 31 as the chat's prompt_tokens, and the same greedy reply as a completion of those ids; add_generation_prompt false drops the assistant's header
--- request eval
["POST /tokenize
{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
"POST /tokenize
{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"add_generation_prompt\":false}",
"POST /v1/chat/completions
{\"model\":\"smollm2\",\"max_tokens\":2,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
"POST /v1/completions
{\"model\":\"smollm2\",\"max_tokens\":2,\"temperature\":0,\"prompt\":[1,9690,198,2683,359,253,5356,5646,11173,3365,3511,308,34519,28,7018,411,407,19712,8182,2,198,1,4093,198,26843,2,198,1,520,9531,198]}"]
--- error_code eval
[200, 200, 200, 200]
--- response_body_like eval
['^\{"count":31,"max_model_len":2048,"tokens":\[1,9690,198,2683,359,253,5356,5646,11173,3365,3511,308,34519,28,7018,411,407,19712,8182,2,198,1,4093,198,26843,2,198,1,520,9531,198\],"token_strs":null\}$',
 '^\{"count":27,"max_model_len":2048,"tokens":\[1,9690,198,2683,359,253,5356,5646,11173,3365,3511,308,34519,28,7018,411,407,19712,8182,2,198,1,4093,198,26843,2,198\],',
 '"content":"Hello!".*"prompt_tokens":31,',
 '"text":"Hello!".*"prompt_tokens":31,']



=== TEST 4: add_special_tokens: a prompt gets the model's BOS unless false (stories260K adds one; SmolLM2 none)
--- http_config
    llm_engine tiny {
        model $TEST_NGINX_FIXTURES/models/tiny260K-q8_0.gguf;
        max_model_len 512;
        kv_cache_memory 16m;
    }
--- config
    location ~ ^/(de)?tokenize$ { llm_api tiny; }
--- request eval
["POST /tokenize
{\"prompt\":\"Hi\"}",
"POST /tokenize
{\"prompt\":\"Hi\",\"add_special_tokens\":false}"]
--- error_code eval
[200, 200]
--- response_body_like eval
['^\{"count":(\d+),"max_model_len":512,"tokens":\[1,', '^\{"count":\d+,"max_model_len":512,"tokens":\[(?!1,)']



=== TEST 5: /detokenize: ids to text, special tokens written (vLLM's decode); a round trip
--- request eval
["POST /detokenize
{\"tokens\":[19556,905]}",
"POST /detokenize
{\"model\":\"smollm2\",\"tokens\":[1,4093,198,26843,2]}",
"POST /detokenize
{\"tokens\":[]}"]
--- error_code eval
[200, 200, 200]
--- response_body eval
["{\"prompt\":\"Hello world\"}\n", "{\"prompt\":\"<|im_start|>user\\nHi<|im_end|>\"}\n", "{\"prompt\":\"\"}\n"]



=== TEST 6: errors: both prompt and messages, neither, a bad flag, ids out of range, tokens missing, an unknown model, GET
--- request eval
["POST /tokenize
{\"prompt\":\"a\",\"messages\":[]}",
"POST /tokenize
{}",
"POST /tokenize
{\"prompt\":\"a\",\"return_token_strs\":1}",
"POST /detokenize
{\"tokens\":[49152]}",
"POST /detokenize
{\"tokens\":[1.5]}",
"POST /detokenize
{}",
"POST /tokenize
{\"model\":\"gpt-4\",\"prompt\":\"a\"}",
"GET /tokenize"]
--- error_code eval
[400, 400, 400, 400, 400, 400, 404, 405]
--- response_body_like eval
['"message":"Give either .prompt. or .messages.\.","type":"invalid_request_error","param":"prompt"',
 '"message":"Give either .prompt. or .messages.\.","type":"invalid_request_error","param":null',
 '"message":"Invalid type for .return_token_strs.: expected a boolean\.",',
 '"message":"Invalid .tokens\[0\].: expected a token id in \[0, 49152\)\.",',
 '"message":"Invalid .tokens\[0\].: expected a token id in \[0, 49152\)\.",',
 '"message":"Missing required parameter: .tokens.\.",',
 '"code":"model_not_found"',
 '"code":"method_not_allowed"']



=== TEST 7: fill in the middle: a vocabulary with Qwen2.5-Coder's FIM tokens: /tokenize shows the PSM prompt (prefix, suffix as plain text)
--- http_config
    llm_engine hf {
        model $TEST_NGINX_FIM_MODEL;
        served_model_name coder;
        max_model_len 256;
        kv_cache_memory 16m;
    }
--- config
    location ~ ^/(de)?tokenize$ { llm_api hf; }
--- request eval
["POST /tokenize
{\"prompt\":\"def f(\",\"suffix\":\"):\",\"return_token_strs\":true}",
"POST /tokenize
{\"prompt\":\"def f(\",\"return_token_strs\":true}",
"POST /tokenize
{\"prompt\":\"<|fim_middle|>\",\"suffix\":\"x\"}",
"POST /tokenize
{\"prompt\":[1,2],\"suffix\":\"x\"}"]
--- error_code eval
[200, 200, 200, 400]
--- response_body_like eval
['^\{"count":\d+,"max_model_len":256,"tokens":\[603,[\d,]+\],"token_strs":\["<\|fim_prefix\|>",("[^"]*",)+"<\|fim_suffix\|>",("[^"]*",)+"<\|fim_middle\|>"\]\}$',
 '^\{"count":\d+,"max_model_len":256,"tokens":\[(?!603)',
 '^\{"count":\d+,"max_model_len":256,"tokens":\[603,(?!605)\d+,',
 '"message":"suffix: the prompt must be text for fill in the middle"']



=== TEST 8: fill in the middle on a model without FIM tokens: a 400 naming the model (SmolLM2's vocabulary has none)
--- request
POST /v1/completions
{"model":"smollm2","prompt":"def f(","suffix":"):","max_tokens":4}
--- error_code: 400
--- response_body
{"error":{"message":"suffix: the model `smollm2` has no fill-in-the-middle tokens","type":"invalid_request_error","param":null,"code":"unsupported_value"}}
--- error_log
llm: 400 suffix: the model `smollm2` has no fill-in-the-middle tokens
