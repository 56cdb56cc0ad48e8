# gpt-oss through nginx (issue 31): the tiny random GptOssForCausalLM of
# the oracle (t/data/models/hf-gptoss: sinks, a window of 12 on its first
# layer, MXFP4 experts with biases, YaRN; tools/oracle.py) served as the
# Hugging Face directory (its *_blocks/*_scales experts repacked at load)
# and as its GGUF. A greedy completion is transformers' greedy ids (the
# golden's "bytes" case: its first 3 steps have reference margins >= the
# 0.5 tolerance), streamed or not, from both formats; chat renders the
# published gpt-oss template (Harmony) and answers. A prompt past the
# window returns the sliding layer's KV pages to the pool (/metrics).
use Test::Nginx::Socket 'no_plan';
use Cwd qw(abs_path);
use FindBin;

$ENV{TEST_NGINX_GPTOSS} = abs_path("$FindBin::Bin/data/models/hf-gptoss");

add_block_preprocessor(sub {
    my $block = shift;

    if (!defined $block->http_config) {
        $block->set_value("http_config", <<'_EOC_');
    llm_engine hf {
        model $TEST_NGINX_GPTOSS;
        served_model_name gptoss;
        max_model_len 512;
        kv_cache_memory 16m;
    }
    llm_engine gg {
        model $TEST_NGINX_GPTOSS.gguf;
        served_model_name gptoss;
        max_model_len 512;
        kv_cache_memory 16m;
    }
_EOC_
    }
    if (!defined $block->config) {
        $block->set_value("config", "    location /v1/ { llm_api hf; }\n"
                          . "    location /gguf/v1/ { llm_api gg; }\n");
    }
    $block->set_value("timeout", 60) unless defined $block->timeout;
});

no_shuffle();
run_tests();

__DATA__

=== TEST 1: greedy completion from the HF directory = transformers' greedy ids (3 tokens)
--- request
POST /v1/completions
{"model":"gptoss","prompt":"Caf\u00e9 na\u00efve \u2014 \u65e5\u672c \ud83d\ude42 12345","max_tokens":3,"temperature":0}
--- error_code: 200
--- response_body_like: ^\{"id":"cmpl-[0-9a-f]+","object":"text_completion","created":\d+,"model":"gptoss","choices":\[\{"index":0,"text":"iceid%","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":31,"completion_tokens":3,
--- no_error_log
[error]



=== TEST 2: the same from the GGUF
--- request
POST /gguf/v1/completions
{"model":"gptoss","prompt":"Caf\u00e9 na\u00efve \u2014 \u65e5\u672c \ud83d\ude42 12345","max_tokens":3,"temperature":0}
--- error_code: 200
--- response_body_like: "text":"iceid%","logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":31,"completion_tokens":3,
--- no_error_log
[error]



=== TEST 3: streamed: the same text in chunks, then [DONE]
--- request
POST /v1/completions
{"model":"gptoss","prompt":"Caf\u00e9 na\u00efve \u2014 \u65e5\u672c \ud83d\ude42 12345","max_tokens":3,"temperature":0,"stream":true}
--- error_code: 200
--- response_headers_like
Content-Type: text/event-stream
--- response_body_like: ^data: \{"id":"cmpl-[0-9a-f]+","object":"text_completion".*"text":"ice.*"text":"id.*"text":"%".*"finish_reason":"length".*data: \[DONE\]\n\n$
--- no_error_log
[error]



=== TEST 4: chat renders the published gpt-oss template and answers
--- request
POST /v1/chat/completions
{"model":"gptoss","messages":[{"role":"user","content":"Hi! What is 2+2?"}],"max_tokens":8,"temperature":0}
--- error_code: 200
--- response_body_like: ^\{"id":"chatcmpl-[0-9a-f]+","object":"chat.completion","created":\d+,"model":"gptoss","choices":\[\{"index":0,"message":\{"role":"assistant","content":"(?:[^"\\]|\\.)*"\},"logprobs":null,"finish_reason":"(stop|length)"\}\],"usage":\{"prompt_tokens":\d+,
--- no_error_log
[error]



=== TEST 5: streamed chat ends with [DONE]
--- request
POST /v1/chat/completions
{"model":"gptoss","messages":[{"role":"user","content":"Hi! What is 2+2?"}],"max_tokens":8,"temperature":0,"stream":true}
--- error_code: 200
--- response_body_like: "object":"chat.completion.chunk".*data: \[DONE\]\n\n$
--- no_error_log
[error]



=== TEST 6: a prompt past the window of 12: the sliding layer's pages that left it go back to the pool, the full layer's stay
--- config
    location /gguf/v1/ { llm_api gg; }
    location = /metrics { llm_metrics; }
--- request eval
["POST /gguf/v1/completions\n{\"model\":\"gptoss\",\"prompt\":\"Line 1. Line 2. Line 3. Line 4. Line 5. Line 6. Line 7. Line 8. Line 9. Line 10. Line 11. Line 12. Line 13. Line 14. Line 15. Line 16. Line 17. Line 18. Line 19. Line 20.\",\"max_tokens\":20,\"temperature\":0}", "GET /metrics"]
--- error_code eval
[200, 200]
--- response_body_like eval
['"usage":\{"prompt_tokens":(?:[4-9]\d|1\d\d),"completion_tokens":20,', 'ngx_llm_kv_blocks_slid_total\{[^}]*engine="gg"\} [1-9]']
--- no_error_log
[error]
