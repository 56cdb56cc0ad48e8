# A Hugging Face directory (config.json, safetensors, tokenizer.json,
# tokenizer_config.json's template) served through nginx like a GGUF.
use Test::Nginx::Socket 'no_plan';
use Cwd qw(abs_path);
use FindBin;

$ENV{TEST_NGINX_HF_MODEL} //= abs_path("$FindBin::Bin/data/models/hf-qwen2");
no_shuffle();
run_tests();
__DATA__

=== TEST 1: a Hugging Face directory served: chat and models
--- http_config
    llm_engine hf {
        model $TEST_NGINX_HF_MODEL;
        served_model_name qwen2;
        max_model_len 512;
        kv_cache_memory 16m;
    }
--- config
    location /v1/ { llm_api hf; }
--- request eval
["GET /v1/models", "POST /v1/chat/completions\n{\"model\":\"qwen2\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":3,\"temperature\":0}"]
--- timeout: 60
--- error_code eval
[200, 200]
--- response_body_like eval
['"id":"qwen2".*"architecture":"qwen2".*"parameters":[1-9]', '"completion_tokens":3']
--- no_error_log
[error]
