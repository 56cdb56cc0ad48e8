# Prompt-lookup speculative decoding through nginx on the real SmolLM2
# (docs/scheduler.md): greedy replies equal an engine without it, byte for
# byte, a stop string inside an accepted run still cuts the text, the
# request's "speculative" field, and the spec_decode counters in /metrics.
use Test::Nginx::Socket 'no_plan';

add_block_preprocessor(sub {
    my $block = shift;

    if (!defined $block->http_config) {
        $block->set_value("http_config", <<'_EOC_');
    llm_engine spec {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
        max_model_len 1024;
        kv_cache_memory 64m;
        speculative_ngram on;
        speculative_draft_tokens 4;
        speculative_ngram_size 2;
    }
    llm_engine plain {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
        max_model_len 1024;
        kv_cache_memory 64m;
    }
_EOC_
    }

    if (!defined $block->config) {
        $block->set_value("config", <<'_EOC_');
    location /spec/v1/ { rewrite ^/spec(/v1/.*)$ $1 break; llm_api spec; }
    location /plain/v1/ { rewrite ^/plain(/v1/.*)$ $1 break; llm_api plain; }
    location = /metrics { llm_metrics; }
_EOC_
    }

    $block->set_value("timeout", 120) unless defined $block->timeout;
});

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a copying prompt, greedy, without speculation
--- request
POST /plain/v1/completions
{"model":"smollm2","prompt":"Copy the list.\nList: red apple, green pear, yellow banana, purple plum.\nCopy: red apple, green pear,","max_tokens":24,"temperature":0}
--- error_code: 200
--- response_body_like: "choices":\[\{"index":0,"text":" yellow banana, purple plum\.\\n\\nThe original list is:\\nred apple, green pear, yellow banana, purple","logprobs":null,"finish_reason":"length"\}\]
--- no_error_log
[error]



=== TEST 2: the same with speculation: the same text, byte for byte
--- request
POST /spec/v1/completions
{"model":"smollm2","prompt":"Copy the list.\nList: red apple, green pear, yellow banana, purple plum.\nCopy: red apple, green pear,","max_tokens":24,"temperature":0}
--- error_code: 200
--- response_body_like: "choices":\[\{"index":0,"text":" yellow banana, purple plum\.\\n\\nThe original list is:\\nred apple, green pear, yellow banana, purple","logprobs":null,"finish_reason":"length"\}\]
--- no_error_log
[error]



=== TEST 3: a stop string inside the copied (drafted) span cuts there
--- request
POST /spec/v1/completions
{"model":"smollm2","prompt":"Copy the list.\nList: red apple, green pear, yellow banana, purple plum.\nCopy: red apple, green pear,","max_tokens":24,"temperature":0,"stop":["pear, yellow"]}
--- error_code: 200
--- response_body_like: "text":" yellow banana, purple plum\.\\n\\nThe original list is:\\nred apple, green ","logprobs":null,"finish_reason":"stop"
--- no_error_log
[error]



=== TEST 4: and without speculation the same
--- request
POST /plain/v1/completions
{"model":"smollm2","prompt":"Copy the list.\nList: red apple, green pear, yellow banana, purple plum.\nCopy: red apple, green pear,","max_tokens":24,"temperature":0,"stop":["pear, yellow"]}
--- error_code: 200
--- response_body_like: "text":" yellow banana, purple plum\.\\n\\nThe original list is:\\nred apple, green ","logprobs":null,"finish_reason":"stop"
--- no_error_log
[error]



=== TEST 5: "speculative": false turns it off for the request
--- request
POST /spec/v1/completions
{"model":"smollm2","prompt":"Copy the list.\nList: red apple, green pear, yellow banana, purple plum.\nCopy: red apple, green pear,","max_tokens":24,"temperature":0,"speculative":false}
--- error_code: 200
--- response_body_like: "choices":\[\{"index":0,"text":" yellow banana, purple plum\.\\n\\nThe original list is:\\nred apple, green pear, yellow banana, purple","logprobs":null,"finish_reason":"length"\}\]
--- no_error_log
[error]



=== TEST 6: the spec_decode counters after a request: the speculating engine's, none for the other
--- request eval
["POST /spec/v1/completions\n{\"model\":\"smollm2\",\"prompt\":\"Copy the list.\\nList: red apple, green pear, yellow banana, purple plum.\\nCopy: red apple, green pear,\",\"max_tokens\":24,\"temperature\":0}", "POST /plain/v1/completions\n{\"model\":\"smollm2\",\"prompt\":\"Copy the list.\\nList: red apple, green pear, yellow banana, purple plum.\\nCopy: red apple, green pear,\",\"max_tokens\":24,\"temperature\":0}", "GET /metrics"]
--- error_code eval
[200, 200, 200]
--- response_body_like eval
['"completion_tokens":24', '"completion_tokens":24', '(?m)^vllm:spec_decode_num_drafts_total\{model_name="smollm2",engine="spec"\} [1-9]\d*\n.*^vllm:spec_decode_num_draft_tokens_total\{model_name="smollm2",engine="spec"\} [1-9]\d*\n.*^vllm:spec_decode_num_accepted_tokens_total\{model_name="smollm2",engine="spec"\} [1-9]\d*\n.*^vllm:spec_decode_num_accepted_tokens_total\{model_name="smollm2",engine="plain"\} 0\n']
--- no_error_log
[error]



=== TEST 7: "speculative": true where the engine has it off: a 400 naming it
--- request
POST /plain/v1/completions
{"model":"smollm2","prompt":"Copy the list.\nList: red apple, green pear, yellow banana, purple plum.\nCopy: red apple, green pear,","max_tokens":24,"temperature":0,"speculative":true}
--- error_code: 400
--- response_body_like: ^\{"error":\{"message":"speculative decoding is not enabled for this model \(speculative_ngram in its llm_engine block\)","type":"invalid_request_error"
--- error_log
speculative decoding is not enabled



=== TEST 8: "speculative" must be a boolean
--- request
POST /spec/v1/completions
{"model":"smollm2","prompt":"Copy the list.\nList: red apple, green pear, yellow banana, purple plum.\nCopy: red apple, green pear,","max_tokens":24,"temperature":0,"speculative":"yes"}
--- error_code: 400
--- response_body_like: ^\{"error":\{"message":"Invalid type for 'speculative': expected a boolean
--- no_error_log
[alert]



=== TEST 9: speculative_draft_tokens has bounds
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; speculative_draft_tokens 0; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
value must be between 1 and 16



=== TEST 10: speculative_ngram_size has bounds
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; speculative_ngram_size 9; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
value must be between 1 and 8



=== TEST 11: speculative_ngram is on or off
--- http_config
    llm_engine main { model $TEST_NGINX_MODEL; speculative_ngram maybe; }
--- config
    location /v1/ { llm_api main; }
--- must_die
--- error_log
invalid value "maybe" in "speculative_ngram" directive, it must be "on" or "off"
