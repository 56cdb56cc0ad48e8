# The walking skeleton through nginx: the engine starts with nginx, answers
# over the ring, reports its model; broken models and bad requests give
# clear errors. Runs unchanged under CPAN's Test::Nginx.
use Test::Nginx::Socket 'no_plan';

# a truncated copy of the model: the engine must say what is wrong with it
my $bad = "$ENV{TEST_NGINX_BUILD}/t/truncated.gguf";
if (!-f $bad) {
    system("mkdir -p $ENV{TEST_NGINX_BUILD}/t") == 0 or die;
    system("head -c 1000000 $ENV{TEST_NGINX_MODEL} > $bad") == 0 or die;
}
$ENV{TEST_NGINX_BAD_MODEL} = $bad;

# the lines error_log looks for (model loaded, memory plan) are written once,
# at startup; by default Test::Nginx's check after a block's last request
# reads only the lines written since the request before, so blocks with
# several requests check the block's whole log instead (nginx restarts for
# every block, so that is the block's own log)
check_accum_error_log();

no_shuffle();
run_tests();

__DATA__

=== TEST 1: /v1/models waits for the engine, then lists the model with its facts
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
    }
--- config
    location /v1/ { llm_api main; }
--- request
GET /v1/models
--- timeout: 60
--- error_code: 200
--- response_headers
Content-Type: application/json
--- response_body_like: ^\{"object":"list","data":\[\{"id":"smollm2","object":"model","created":\d+,"owned_by":"ngx_llm","max_model_len":8192,"meta":\{"architecture":"llama",.*"tensor_type":"Q4_1","parameters":134515008,.*"vocab_size":49152,"layers":30,"embedding_length":576,"heads":9,"kv_heads":3,"engine_pid":\d+\}\}\]\}$
--- no_error_log
[error]



=== TEST 2: /healthz is 200 once the engine answered a ping over the ring
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; }
--- config
    location /v1/ { llm_api main; }
    location = /healthz { llm_health main; }
--- request eval
["GET /v1/models", "GET /healthz"]
--- timeout: 60
--- error_code eval
[200, 200]
--- response_body_like eval
['"id":"main"', '^\{"status":"ready","engine_pid":\d+,"uptime_s":\d+,"heartbeat_age_ms":\d+\}$']
--- error_log eval
qr/ngx_llm engine "main": model ".*SmolLM2-135M-Instruct.Q4_1.gguf" loaded: llama, 134515008 parameters/
--- no_error_log
[error]



=== TEST 3: a truncated model: health says why, the API fails fast with 503
--- http_config
    llm_engine broken { model $TEST_NGINX_BAD_MODEL; }
--- config
    location /v1/ { llm_api broken; }
    location = /healthz { llm_health broken; }
--- request eval
["GET /v1/models", "GET /healthz"]
--- error_code eval
[503, 503]
--- response_body_like eval
['^\{"error":\{"message":"engine not ready: .*truncated.gguf: [^"]+","type":"server_error","param":null,"code":"engine_unavailable"\}\}$',
 '^\{"status":"unavailable","reason":".*truncated.gguf: [^"]+"\}$']
--- error_log eval
qr/\[error\] .*ngx_llm engine "broken": cannot load model: .*truncated\.gguf: /
--- timeout: 10



=== TEST 4: a failed engine's 503 carries Retry-After
--- http_config
    llm_engine broken { model $TEST_NGINX_BAD_MODEL; }
--- config
    location /v1/ { llm_api broken; }
--- request
GET /v1/models
--- error_code: 503
--- response_headers
Retry-After: 1
Content-Type: application/json



=== TEST 5: a missing model file is a configuration error
--- http_config
    llm_engine main { model /nonexistent/model.gguf; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
cannot open model "/nonexistent/model.gguf"



=== TEST 6: llm_api names an engine that does not exist
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; }
--- config
    location /v1/ { llm_api other; }
--- must_die
--- error_log
unknown llm_engine "other"



=== TEST 7: unknown llm_engine parameter
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; max_num_seqz 4; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
unknown llm_engine parameter "max_num_seqz"



=== TEST 7b: kv_cache_dtype takes f16 or f32 only
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; kv_cache_dtype f8; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
invalid kv_cache_dtype "f8" (f16 or f32)



=== TEST 7c: an f32 KV cache takes twice the bytes per token and gives the same tokens
tiny260K's greedy continuation of "Once upon a time" (seeded weights, so
not words; its ids equal transformers', t/unit/test_model.c), the same
with either cache.
--- http_config
    llm_engine f32 {
        model $TEST_NGINX_FIXTURES/models/tiny260K-f32.gguf;
        kv_cache_dtype f32;
        max_model_len 256;
        kv_cache_memory 16m;
    }
    llm_engine f16 {
        model $TEST_NGINX_FIXTURES/models/tiny260K-f32.gguf;
        max_model_len 256;
        kv_cache_memory 16m;
    }
--- config
    location /f32/v1/ { llm_api f32; }
    location /f16/v1/ { llm_api f16; }
--- request eval
["POST /f32/v1/completions\n{\"model\":\"f32\",\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"temperature\":0}",
 "POST /f16/v1/completions\n{\"model\":\"f16\",\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"temperature\":0}"]
--- timeout: 60
--- error_code eval
[200, 200]
--- response_body_like eval
['"text":" c<.{1,6}g.{1,6}d con\{ingichke c< toh<od< c\\\\u0017",', '"text":" c<.{1,6}g.{1,6}d con\{ingichke c< toh<od< c\\\\u0017",']
--- error_log eval
[qr/ngx_llm engine "f32": memory plan: .* KV 1280 bytes per token \(f32\)/,
 qr/ngx_llm engine "f16": memory plan: .* KV 640 bytes per token \(f16\)/,
 qr/ngx_llm engine "f16": ready: .* max_batched_tokens 256$/]
--- no_error_log
[error]



=== TEST 8: wrong method and unknown endpoint give OpenAI error JSON
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; }
--- config
    location /v1/ { llm_api main; }
    location = /healthz { llm_health main; }
--- request eval
["POST /v1/models\nx", "GET /v1/nothing", "POST /healthz\nx"]
--- error_code eval
[405, 404, 405]
--- response_body_like eval
['^\{"error":\{"message":"use GET for /v1/models","type":"invalid_request_error","param":null,"code":"method_not_allowed"\}\}$',
 '^\{"error":\{"message":"unknown endpoint /v1/nothing","type":"invalid_request_error","param":null,"code":"unknown_url"\}\}$',
 '"code":"method_not_allowed"']
--- no_error_log
[error]



=== TEST 9: tensor_parallel 2 on CPU ranks serves the same greedy tokens
The same text as TEST 7c: two CPU ranks give one rank's tokens.
--- http_config
    llm_engine tp {
        model $TEST_NGINX_FIXTURES/models/tiny260K-f32.gguf;
        tensor_parallel 2;
        threads 1;
        max_model_len 256;
        kv_cache_memory 16m;
    }
    llm_engine one {
        model $TEST_NGINX_FIXTURES/models/tiny260K-f32.gguf;
        threads 1;
        max_model_len 256;
        kv_cache_memory 16m;
    }
--- config
    location /tp/v1/ { llm_api tp; }
    location /one/v1/ { llm_api one; }
--- request eval
["POST /tp/v1/completions\n{\"model\":\"tp\",\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"temperature\":0}",
 "POST /one/v1/completions\n{\"model\":\"one\",\"prompt\":\"Once upon a time\",\"max_tokens\":20,\"temperature\":0}"]
--- timeout: 60
--- error_code eval
[200, 200]
--- response_body_like eval
['"text":" c<.{1,6}g.{1,6}d con\{ingichke c< toh<od< c\\\\u0017",', '"text":" c<.{1,6}g.{1,6}d con\{ingichke c< toh<od< c\\\\u0017",']
--- error_log eval
qr/ngx_llm engine "tp": .*memory plan/
--- no_error_log
[error]
