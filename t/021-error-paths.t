# The module's paths when things go wrong, and its trace: a stream cut by
# an error logs the status it stands for, a chat template's refusal is the
# whole answer, and a debug log shows a ring slot's life.
use Test::Nginx::Socket 'no_plan';

$ENV{TEST_NGINX_DEBUG} = (`$ENV{TEST_NGINX_BINARY} -V 2>&1` =~ /--with-debug/)
                         ? 1 : 0;

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a stream cut by its deadline logs the 504 it stands for
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; served_model_name smollm2; }
--- config
    location /v1/ {
        llm_api main;
        llm_deadline 3s;
    }
--- request
POST /v1/completions
{"model":"smollm2","prompt":"Once upon a time","max_tokens":4000,"ignore_eos":true,"stream":true}
--- timeout: 60
--- error_code: 200
--- response_body_like: \ndata: \{"error":\{"message":"the generation deadline passed","type":"server_error","param":null,"code":"deadline_exceeded"\}\}\n\ndata: \[DONE\]\n\n$
--- error_log
llm: 504 stream ended by an error: the generation deadline passed



=== TEST 2: a debug log shows a ring slot's life
--- skip_eval: 8: !$ENV{TEST_NGINX_DEBUG}
--- log_level: debug
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; served_model_name smollm2; }
--- config
    location /v1/ { llm_api main; }
--- request
POST /v1/completions
{"model":"smollm2","prompt":"Once upon a time","max_tokens":3,"ignore_eos":true}
--- timeout: 60
--- error_code: 200
--- error_log eval
[qr/llm: admitted: 4 prompt tokens, up to 3 more, stream:0/,
 qr/llm: ring slot \d+ taken, kind 2, request \d+/,
 qr/llm: ring slot \d+ submitted as cmpl-[0-9a-f]+/,
 qr/llm: ring slot \d+: first token after \d+ us/,
 qr/llm: ring slot \d+ finished: length, 3 tokens, 0 cached/,
 qr/llm: ring slot \d+ freed/]
--- no_error_log
[error]



=== TEST 3: a stop string ends the generation here: the engine is told to cancel
--- skip_eval: 4: !$ENV{TEST_NGINX_DEBUG}
--- log_level: debug
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; served_model_name smollm2; }
--- config
    location /v1/ { llm_api main; }
--- request
POST /v1/completions
{"model":"smollm2","prompt":"Once upon a time","max_tokens":200,"ignore_eos":true,"stop":[" "]}
--- timeout: 60
--- error_code: 200
--- error_log eval
[qr/llm: ring slot \d+ finished: stop, \d+ tokens/,
 qr/llm: ring slot \d+ cancelled, the engine frees it/]
--- no_error_log
[error]



=== TEST 4: a chat request to a model without a chat template is a 400, and only that
--- http_config
    llm_engine tiny {
        model $TEST_NGINX_FIXTURES/models/tiny260K-f32.gguf;
        max_model_len 256;
        kv_cache_memory 16m;
    }
--- config
    location /v1/ { llm_api tiny; }
--- request eval
["POST /v1/chat/completions\n{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
 "POST /v1/chat/completions\n{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}"]
--- error_code eval
[400, 400]
--- response_body_like eval
['^\{"error":\{"message":"the model has no chat template: use /v1/completions or set chat_template in llm_engine","type":"invalid_request_error","param":null,"code":"no_chat_template"\}\}$',
 '"code":"no_chat_template"']
--- no_error_log
[error]
[alert]
