# A Hugging Face directory (config.json, safetensors, tokenizer.json,
# tokenizer_config.json's template) served through nginx like a GGUF; a
# model windowed on every layer (hf-mistral, window 12) drops the KV blocks
# that left the window, counted in /metrics.
use Test::Nginx::Socket 'no_plan';
use Cwd qw(abs_path);
use FindBin;

$ENV{TEST_NGINX_HF_MODEL} //= abs_path("$FindBin::Bin/data/models/hf-qwen2");
$ENV{TEST_NGINX_HF_MISTRAL} //=
    abs_path("$FindBin::Bin/data/models/hf-mistral");
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



=== TEST 2: a prompt past the window (hf-mistral, window 12 on every layer): its blocks outside the window go back to the pool
--- http_config
    llm_engine mis {
        model $TEST_NGINX_HF_MISTRAL;
        served_model_name mistral;
        max_model_len 256;
    }
--- config
    location /v1/ { llm_api mis; }
    location = /metrics { llm_metrics; }
--- request eval
["POST /v1/completions\n{\"model\":\"mistral\",\"prompt\":\"Line 1. Line 2. Line 3. Line 4. Line 5. Line 6. Line 7. Line 8. Line 9. Line 10. Line 11. Line 12. Line 13. Line 14. Line 15. Line 16. Line 17. Line 18. Line 19. Line 20.\",\"max_tokens\":20,\"temperature\":0}", "GET /metrics"]
--- timeout: 60
--- error_code eval
[200, 200]
--- response_body_like eval
['"usage":\{"prompt_tokens":(?:[4-9]\d|1\d\d),"completion_tokens":20,', 'ngx_llm_kv_blocks_slid_total\{[^}]*\} [1-9]']
--- no_error_log
[error]
