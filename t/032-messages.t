# Anthropic's Messages API through nginx on the real SmolLM2
# (docs/api.md): the message object, the stream's events, count_tokens,
# the request translated to the chat path (the same prompt ids), and
# errors in Anthropic's shape and statuses.
use Test::Nginx::Socket 'no_plan';

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
    location /v1/ {
        llm_api main;
        llm_max_body_size 4k;
    }
_EOC_
    }

    $block->set_value("timeout", 120) unless defined $block->timeout;
});

no_shuffle();
run_tests();

__DATA__

=== TEST 1: messages: the message object, greedy, max_tokens
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":2,"temperature":0,"messages":[{"role":"user","content":"Hi"}]}
--- more_headers
x-api-key: sk-anything
anthropic-version: 2023-06-01
--- error_code: 200
--- response_headers
Content-Type: application/json
--- response_body_like: ^\{"id":"msg_[0-9a-f]+","type":"message","role":"assistant","model":"smollm2","content":\[\{"type":"text","text":"Hello!"\}\],"stop_reason":"max_tokens","stop_sequence":null,"usage":\{"input_tokens":\d+,"cache_creation_input_tokens":0,"cache_read_input_tokens":\d+,"output_tokens":2\}\}$
