# The parameters of an llm_engine block: each one once, each value checked
# where it is read, with nginx's own messages where nginx has one (a
# parameter given twice is "directive is duplicate", as any directive).
use Test::Nginx::Socket 'no_plan';

no_shuffle();
run_tests();

__DATA__

=== TEST 1: every parameter once: nginx starts, the engine gets them
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name smol;
        chat_template ../html/chat.jinja;
        binary $TEST_NGINX_ENGINE;
        backend cpu;
        kv_cache_dtype f16;
        threads 1;
        tensor_parallel 1;
        max_num_seqs 4;
        max_model_len 512;
        max_batched_tokens 64;
        max_queued_requests 8;
        prefix_caching off;
        kv_cache_memory 64m;
        ready_timeout 60s;
    }
--- config
    location /v1/ { llm_api main; }
--- user_files
>>> chat.jinja
{% for m in messages %}{{ m['content'] }}{% endfor %}
--- request
GET /v1/models
--- timeout: 60
--- error_code: 200
--- response_body_like: ^\{"object":"list","data":\[\{"id":"smol",.*"max_model_len":512,
--- error_log eval
qr/ngx_llm engine "main": ready: warm-up generation done, 1 threads, max_num_seqs 4, max_batched_tokens 64$/
--- no_error_log
[error]



=== TEST 2: model given twice
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; model $TEST_NGINX_MODEL; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
"model" directive is duplicate



=== TEST 3: served_model_name given twice
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name a;
        served_model_name b;
    }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
"served_model_name" directive is duplicate



=== TEST 4: backend given twice
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; backend cpu; backend cuda; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
"backend" directive is duplicate



=== TEST 5: prefix_caching given twice
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        prefix_caching on;
        prefix_caching off;
    }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
"prefix_caching" directive is duplicate



=== TEST 6: chat_template given twice
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        chat_template a.jinja;
        chat_template b.jinja;
    }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
"chat_template" directive is duplicate



=== TEST 7: binary given twice
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        binary $TEST_NGINX_ENGINE;
        binary $TEST_NGINX_ENGINE;
    }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
"binary" directive is duplicate



=== TEST 8: sizes given twice
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        kv_cache_memory 64m;
        kv_cache_memory 128m;
    }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
"kv_cache_memory" directive is duplicate



=== TEST 9: numbers given twice
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; threads 1; threads 2; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
"threads" directive is duplicate



=== TEST 10: a backend out of the list names the list
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; backend tpu; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
invalid backend "tpu" (cpu or cuda)



=== TEST 11: a number out of its bounds
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; max_model_len 8; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
value must be between 16 and



=== TEST 12: not a number
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; max_num_seqs many; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
"max_num_seqs" directive invalid number



=== TEST 13: prefix_caching is on or off
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; prefix_caching maybe; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
invalid value "maybe" in "prefix_caching" directive, it must be "on" or "off"



=== TEST 14: a KV cache of less than 1m
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; kv_cache_memory 512k; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
invalid kv_cache_memory "512k"



=== TEST 15: every parameter takes one value
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; threads 1 2; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
invalid number of arguments in "threads" of llm_engine



=== TEST 16: a block without a model
--- http_config
    llm_engine main { threads 1; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
llm_engine "main" has no "model"
