# The OpenAI-compatible API through nginx on the real SmolLM2: shapes of
# replies and streams, fields, stop strings, logprobs, every error status,
# location directives, log variables and /metrics. Greedy expectations are
# tokens the model picks with a wide margin (logprob gap > 2).
use Test::Nginx::Socket 'no_plan';

my $bad = "$ENV{TEST_NGINX_BUILD}/t/truncated.gguf";
if (!-f $bad) {
    system("mkdir -p $ENV{TEST_NGINX_BUILD}/t") == 0 or die;
    system("head -c 1000000 $ENV{TEST_NGINX_MODEL} > $bad") == 0 or die;
}
$ENV{TEST_NGINX_BAD_MODEL} = $bad;
$ENV{TEST_NGINX_BIG_BODY} = '{"model":"smollm2","prompt":"' . ('x' x 3000) . '"}';

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
    log_format llm '$status $llm_model $llm_prompt_tokens '
                   '$llm_completion_tokens $llm_cached_tokens '
                   '$llm_finish_reason $llm_request_id ttft=$llm_ttft '
                   'tpot=$llm_tpot queue=$llm_queue_time';
_EOC_
    }

    if (!defined $block->config) {
        $block->set_value("config", <<'_EOC_');
    location /v1/ {
        llm_api main;
        access_log logs/access.log llm;
    }
    location = /metrics { llm_metrics; }
_EOC_
    }

    $block->set_value("timeout", 120) unless defined $block->timeout;
});

no_shuffle();
run_tests();

__DATA__

=== TEST 1: chat completion: OpenAI's shape, usage, greedy reply
--- request
POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"temperature":0}
--- error_code: 200
--- response_headers
Content-Type: application/json
--- response_headers_like
X-Request-Id: chatcmpl-[0-9a-f]+
--- response_body_like: ^\{"id":"chatcmpl-[0-9a-f]+","object":"chat.completion","created":\d+,"model":"smollm2","choices":\[\{"index":0,"message":\{"role":"assistant","content":"Hello!"\},"logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":31,"completion_tokens":2,"total_tokens":33,"prompt_tokens_details":\{"cached_tokens":\d+\}\}\}$
--- no_error_log
[error]



=== TEST 2: text completion, stop string never in the output, finish "stop"
--- request
POST /v1/completions
{"model":"smollm2","prompt":"1, 2, 3, 4,","max_tokens":12,"temperature":0,"stop":[" 7"]}
--- error_code: 200
--- response_body_like: ^\{"id":"cmpl-[0-9a-f]+","object":"text_completion","created":\d+,"model":"smollm2","choices":\[\{"index":0,"text":" 5, 6,","logprobs":null,"finish_reason":"stop"\}\],"usage":\{"prompt_tokens":11,
--- no_error_log
[error]



=== TEST 3: prompt as token ids; completion logprobs in the legacy form
--- request
POST /v1/completions
{"model":"smollm2","prompt":[33,28,216,34,28,216,35,28,216,36,28],"max_tokens":2,"temperature":0,"logprobs":2}
--- error_code: 200
--- response_body_like: "text":" 5","logprobs":\{"tokens":\[" ","5"\],"token_logprobs":\[-[0-9.]+,-[0-9.]+\],"top_logprobs":\[\{" ":-[0-9.]+,"[^"]+":-[0-9.]+\},\{"5":-[0-9.]+,"[^"]+":-[0-9.]+\}\],"text_offset":\[0,1\]\},"finish_reason":"length"
--- no_error_log
[error]



=== TEST 4: chat logprobs with top_logprobs
--- request
POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"max_tokens":1,"temperature":0,"logprobs":true,"top_logprobs":2}
--- error_code: 200
--- response_body_like: "logprobs":\{"content":\[\{"token":"Hello","logprob":-[0-9.]+,"bytes":\[72,101,108,108,111\],"top_logprobs":\[\{"token":"Hello","logprob":-[0-9.]+,"bytes":\[72,101,108,108,111\]\},\{"token":"[^"]+","logprob":-[0-9.]+,"bytes":\[[0-9,]+\]\}\]\}\]\}
--- no_error_log
[error]



=== TEST 5: streaming chat: role first, one chunk per token, finish, usage, [DONE]
--- request
POST /v1/chat/completions
{"model":"smollm2","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"temperature":0}
--- error_code: 200
--- response_headers
Content-Type: text/event-stream
Cache-Control: no-cache
--- response_body_like: ^data: \{"id":"(chatcmpl-[0-9a-f]+)","object":"chat.completion.chunk","created":\d+,"model":"smollm2","choices":\[\{"index":0,"delta":\{"role":"assistant","content":"Hello"\},"logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"\1",[^\n]*"delta":\{"content":"!"\},"logprobs":null,"finish_reason":null\}\]\}\n\ndata: \{"id":"\1",[^\n]*"delta":\{\},"logprobs":null,"finish_reason":"length"\}\]\}\n\ndata: \{"id":"\1",[^\n]*"choices":\[\],"usage":\{"prompt_tokens":31,"completion_tokens":2,"total_tokens":33,"prompt_tokens_details":\{"cached_tokens":\d+\}\}\}\n\ndata: \[DONE\]\n\n$
--- no_error_log
[error]



=== TEST 6: streaming completion without usage
--- request
POST /v1/completions
{"model":"smollm2","stream":true,"prompt":"1, 2, 3, 4,","max_tokens":2,"temperature":0}
--- error_code: 200
--- response_body_like: ^data: \{"id":"cmpl-[0-9a-f]+","object":"text_completion",[^\n]*"text":" ",[^\n]*\n\ndata: [^\n]*"text":"5","logprobs":null,"finish_reason":null\}\]\}\n\ndata: [^\n]*"text":"","logprobs":null,"finish_reason":"length"\}\]\}\n\ndata: \[DONE\]\n\n$



=== TEST 7: bad JSON, wrong types, out of range (n over llm_max_n's default 8 too), missing model: 400 naming the field
--- request eval
["POST /v1/chat/completions\n{\"model\":", "POST /v1/chat/completions\n{\"model\":\"smollm2\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":3}", "POST /v1/chat/completions\n{\"model\":\"smollm2\",\"messages\":\"hi\"}", "POST /v1/completions\n{\"prompt\":\"x\"}", "POST /v1/chat/completions\n{\"model\":\"smollm2\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":9}"]
--- error_code eval
[400, 400, 400, 400, 400]
--- response_body_like eval
['"code":"invalid_json"', '"param":"temperature","code":"decimal_above_max_value"', '"param":"messages","code":"invalid_type"', '"param":"model","code":"missing_required_parameter"', '"param":"n","code":"integer_above_max_value"']
--- no_error_log
[error]



=== TEST 8: unknown model is 404, wrong method 405
--- request eval
["POST /v1/chat/completions\n{\"model\":\"gpt-4\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "GET /v1/chat/completions"]
--- error_code eval
[404, 405]
--- response_body_like eval
['^\{"error":\{"message":"The model `gpt-4` does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"\}\}$', '"code":"method_not_allowed"']



=== TEST 9: prompt + max_tokens over max_model_len is a 400 up front
--- request
POST /v1/completions
{"model":"smollm2","prompt":"Hello","max_tokens":5000}
--- error_code: 400
--- response_body_like: "message":"This model's maximum context length is 2048 tokens. However, you requested 5001 tokens \(1 in the prompt, 5000 for the completion\)".*"code":"context_length_exceeded"



=== TEST 10: body over llm_max_body_size: 413 in JSON, not nginx's HTML
--- config
    location /v1/ {
        llm_api main;
        llm_max_body_size 1k;
    }
--- request eval
"POST /v1/completions\n$ENV{TEST_NGINX_BIG_BODY}"
--- error_code: 413
--- response_headers
Content-Type: application/json
--- response_body_like: ^\{"error":\{"message":"request body of \d+ bytes is over the limit of 1024 bytes","type":"invalid_request_error","param":null,"code":"request_too_large"\}\}$



=== TEST 11: llm_max_tokens clamps the client's max_tokens
--- config
    location /v1/ {
        llm_api main;
        llm_max_tokens 3;
    }
--- request
POST /v1/completions
{"model":"smollm2","prompt":"Once upon a time","max_tokens":50}
--- error_code: 200
--- response_body_like: "finish_reason":"length"\}\],"usage":\{"prompt_tokens":4,"completion_tokens":3,



=== TEST 12: llm_deadline: 504 and the sequence is aborted
--- config
    location /v1/ {
        llm_api main;
        llm_deadline 1ms;
    }
--- request
POST /v1/completions
{"model":"smollm2","prompt":"Once upon a time","max_tokens":500,"ignore_eos":true}
--- error_code: 504
--- response_body_like: ^\{"error":\{"message":"the generation deadline passed","type":"server_error","param":null,"code":"deadline_exceeded"\}\}$
--- error_log
llm: 504 deadline passed



=== TEST 13: an unusable model: the API says so with 503
--- http_config
    llm_engine broken { model $TEST_NGINX_BAD_MODEL; served_model_name smollm2; }
--- config
    location /v1/ { llm_api broken; }
--- request
POST /v1/completions
{"model":"smollm2","prompt":"x"}
--- error_code: 503
--- response_headers
Retry-After: 1
--- response_body_like: "message":"the model is unusable, see the server's error log","type":"server_error"
--- error_log eval
qr/\[error\] .*llm: model ".*truncated\.gguf" unusable: .*truncated\.gguf: /



=== TEST 14: the access log carries the token counts and timings
--- request
POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"temperature":0}
--- error_code: 200
--- access_log eval
qr/^200 smollm2 31 2 \d+ length chatcmpl-[0-9a-f]+ ttft=\d+\.\d{3} tpot=\d+\.\d{4} queue=\d+\.\d{3}$/



=== TEST 15: /metrics after a request: vLLM's names and ours
--- request eval
["POST /v1/completions\n{\"model\":\"smollm2\",\"prompt\":\"Hello\",\"max_tokens\":2,\"ignore_eos\":true}", "GET /metrics"]
--- error_code eval
[200, 200]
--- response_body_like eval
['"completion_tokens":2', '(?m)^vllm:num_requests_running\{model_name="smollm2",engine="main"\} 0\n.*^vllm:num_requests_waiting\{model_name="smollm2",engine="main"\} 0\n.*^vllm:kv_cache_usage_perc\{model_name="smollm2",engine="main"\} 0\.0+\n.*^vllm:generation_tokens_total\{model_name="smollm2",engine="main"\} [1-9]\d*\n.*^vllm:request_success_total\{model_name="smollm2",engine="main",finished_reason="length"\} 1\n.*^vllm:time_to_first_token_seconds_bucket\{model_name="smollm2",engine="main",le="\+Inf"\} 1\n.*^vllm:e2e_request_latency_seconds_count\{model_name="smollm2",engine="main"\} 1\n.*^ngx_llm_ring_slots_used\{model_name="smollm2",engine="main"\} 0\n']



=== TEST 16: location sampling defaults apply when the client sets none
--- config
    location /v1/ {
        llm_api main;
        llm_sampling temperature=0;
    }
--- request eval
["POST /v1/completions\n{\"model\":\"smollm2\",\"prompt\":\"1, 2, 3, 4,\",\"max_tokens\":5}", "POST /v1/completions\n{\"model\":\"smollm2\",\"prompt\":\"1, 2, 3, 4,\",\"max_tokens\":5}"]
--- response_body_like eval
['"text":" 5, 6"', '"text":" 5, 6"']



=== TEST 17: invalid llm_sampling parameter is a configuration error
--- config
    location /v1/ {
        llm_api main;
        llm_sampling temperature=9;
    }
--- must_die
--- error_log
invalid llm_sampling parameter "temperature=9"
