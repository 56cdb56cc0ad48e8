# The real Gemma 3 270M (base model, Q4_K_M with Q5_0/Q8_0 rows; `make
# deps` fetches it, TEST_NGINX_GEMMA) through nginx: a completion that
# must be transformers' greedy answer (ids recorded from transformers 5.24
# on the same file, fp32: the first 11 tokens, all with reference margins
# >= 0.25; docs/models.md), chat, streaming, tools through the generic
# format, and a prompt of 836 tokens, past the 512-position window of its
# local layers (transformers' 12 greedy ids again). The file carries no
# chat template (a base model): chat renders with Gemma 3's published
# template, google-gemma-3-it.jinja from `make deps` (tools/deps.sh; its
# goldens against transformers are t/data/templates/gemma-3.*).
use Test::Nginx::Socket 'no_plan';

$ENV{TEST_NGINX_GEMMA}
    or die 'TEST_NGINX_GEMMA not set: run the suites with make t-nginx';
$ENV{TEST_NGINX_TOOLS} = '[{"type":"function","function":{"name":"get_weather","description":"Get the weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]';
$ENV{TEST_NGINX_LONG} = join ' ', map { "Line $_ of a long list of numbered lines." } 1 .. 70;

add_block_preprocessor(sub {
    my $block = shift;

    if (!defined $block->http_config) {
        $block->set_value("http_config", <<'_EOC_');
    llm_engine main {
        model $TEST_NGINX_GEMMA;
        served_model_name gemma3;
        chat_template $TEST_NGINX_FIXTURES/llama.cpp/templates/google-gemma-3-it.jinja;
        max_model_len 2048;
        kv_cache_memory 256m;
    }
_EOC_
    }
    if (!defined $block->config) {
        $block->set_value("config", "    location /v1/ { llm_api main; }\n");
    }
    $block->set_value("timeout", 120) unless defined $block->timeout;
});

no_shuffle();
run_tests();

__DATA__

=== TEST 1: greedy completion = transformers' greedy ids on the same file (11 tokens)
--- request
POST /v1/completions
{"model":"gemma3","prompt":"The capital of France is","max_tokens":11,"temperature":0}
--- error_code: 200
--- response_body_like: ^\{"id":"cmpl-[0-9a-f]+","object":"text_completion","created":\d+,"model":"gemma3","choices":\[\{"index":0,"text":" the capital of the country of France. It is the","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":6,"completion_tokens":11,
--- no_error_log
[error]



=== TEST 2: a second factual prompt, 16 tokens (all reference margins >= 0.16)
--- request
POST /v1/completions
{"model":"gemma3","prompt":"The largest planet in the solar system is","max_tokens":16,"temperature":0}
--- error_code: 200
--- response_body_like: "text":" the largest in the solar system. It is the largest planet in the solar system","logprobs":null,"finish_reason":"length"
--- no_error_log
[error]



=== TEST 3: chat: the turn format renders, an answer comes back
--- request
POST /v1/chat/completions
{"model":"gemma3","messages":[{"role":"system","content":"Answer briefly."},{"role":"user","content":"What is the capital of France?"}],"max_tokens":16,"temperature":0}
--- error_code: 200
--- response_body_like: ^\{"id":"chatcmpl-[0-9a-f]+","object":"chat.completion","created":\d+,"model":"gemma3","choices":\[\{"index":0,"message":\{"role":"assistant","content":"(?:[^"\\]|\\.)*"\},"logprobs":null,"finish_reason":"(stop|length)"\}\],"usage":\{"prompt_tokens":2[0-9],
--- no_error_log
[error]



=== TEST 4: streaming chat ends with [DONE]
--- request
POST /v1/chat/completions
{"model":"gemma3","stream":true,"messages":[{"role":"user","content":"Name a colour."}],"max_tokens":8,"temperature":0}
--- error_code: 200
--- response_body_like: ^data: \{"id":"chatcmpl-[0-9a-f]+","object":"chat.completion.chunk".*"finish_reason":"(stop|length)".*data: \[DONE\]\n\n$
--- no_error_log
[error]



=== TEST 5: tools through the generic format: a parsed call or content, never neither
--- request eval
qq{POST /v1/chat/completions
{"model":"gemma3","messages":[{"role":"user","content":"What is the weather in Paris?"}],"tools":$ENV{TEST_NGINX_TOOLS},"max_tokens":40,"temperature":0}}
--- error_code: 200
--- response_body_like: ^\{"id":"chatcmpl-[0-9a-f]+","object":"chat.completion","created":\d+,"model":"gemma3","choices":\[\{"index":0,"message":\{"role":"assistant",("content":null,"tool_calls":\[\{"id":"call_[A-Za-z0-9]{24}","type":"function","function":\{"name":"get_weather","arguments":"\{.*\}"\}\}\]\},"logprobs":null,"finish_reason":"tool_calls"|"content":"(?:[^"\\]|\\.)*"\},"logprobs":null,"finish_reason":"(stop|length)")\}\],"usage"
--- no_error_log
[error]



=== TEST 6: tools describe themselves in the prompt (the generic system message leads the first turn)
--- request eval
qq{POST /v1/chat/completions
{"model":"gemma3","messages":[{"role":"user","content":"Hi"}],"tools":$ENV{TEST_NGINX_TOOLS},"max_tokens":1,"temperature":0}}
--- error_code: 200
--- response_body_like: "prompt_tokens":([1-9][0-9][0-9]),
--- no_error_log
[error]



=== TEST 7: 836 prompt tokens, past the local layers' 512-position window: transformers' 12 greedy ids (margins >= 3.9)
--- request eval
qq{POST /v1/completions
{"model":"gemma3","prompt":"$ENV{TEST_NGINX_LONG} Line 71","max_tokens":12,"temperature":0}}
--- error_code: 200
--- response_body_like: "text":" of a long list of numbered lines. Line 72","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":836,"completion_tokens":12,
--- no_error_log
[error]



=== TEST 8: the third factual prompt, 16 tokens (transformers' greedy ids, no reference margin < 0.02; docs/models.md)
--- request
POST /v1/completions
{"model":"gemma3","prompt":"Water boils at a temperature of","max_tokens":16,"temperature":0}
--- error_code: 200
--- response_body_like: "text":" 100 degrees Celsius\.\\n\\nThe boiling point of water is 1","logprobs":null,"finish_reason":"length"
--- no_error_log
[error]
