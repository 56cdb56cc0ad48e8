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



=== TEST 2: Claude Code's ?beta=true is served, system blocks with cache_control, metadata
--- request
POST /v1/messages?beta=true
{"model":"smollm2","max_tokens":2,"temperature":0,"metadata":{"user_id":"u1"},"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":[{"type":"text","text":"Hi","cache_control":{"type":"ephemeral"}}]}]}
--- error_code: 200
--- response_body_like: ^\{"id":"msg_[0-9a-f]+","type":"message","role":"assistant","model":"smollm2","content":\[\{"type":"text","text":"[^"]+"\}\],"stop_reason":"max_tokens"
--- no_error_log
[error]



=== TEST 3: count_tokens equals the chat endpoint's prompt_tokens for the same conversation (31)
--- request
POST /v1/messages/count_tokens
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}]}
--- error_code: 200
--- response_body
{"input_tokens":31}



=== TEST 4: count_tokens of a system string is the chat's prompt with a system message (18 both)
--- request eval
["POST /v1/messages/count_tokens
{\"model\":\"smollm2\",\"system\":\"Be brief.\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
"POST /v1/chat/completions
{\"model\":\"smollm2\",\"max_tokens\":1,\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"}]}"]
--- error_code eval
[200, 200]
--- response_body_like eval
['^\{"input_tokens":18\}$', '"prompt_tokens":18,']



=== TEST 5: streaming: message_start, ping, one text block, message_delta, message_stop
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":2,"temperature":0,"stream":true,"messages":[{"role":"user","content":"Hi"}]}
--- error_code: 200
--- response_headers
Content-Type: text/event-stream
--- response_body_like: ^event: message_start\ndata: \{"type":"message_start","message":\{"id":"msg_[0-9a-f]+","type":"message","role":"assistant","model":"smollm2","content":\[\],"stop_reason":null,"stop_sequence":null,"usage":\{"input_tokens":31,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0\}\}\}\n\nevent: ping\ndata: \{"type": "ping"\}\n\nevent: content_block_start\ndata: \{"type":"content_block_start","index":0,"content_block":\{"type":"text","text":""\}\}\n\n(event: content_block_delta\ndata: \{"type":"content_block_delta","index":0,"delta":\{"type":"text_delta","text":"[^"]+"\}\}\n\n)+event: content_block_stop\ndata: \{"type":"content_block_stop","index":0\}\n\nevent: message_delta\ndata: \{"type":"message_delta","delta":\{"stop_reason":"max_tokens","stop_sequence":null\},"usage":\{"input_tokens":\d+,"cache_read_input_tokens":\d+,"output_tokens":2\}\}\n\nevent: message_stop\ndata: \{"type":"message_stop"\}\n\n$
--- no_error_log
[error]



=== TEST 6: stop_sequences: stop_reason stop_sequence and the string that matched
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":8,"temperature":0,"stop_sequences":["zzz","!"],"messages":[{"role":"user","content":"Hi"}]}
--- error_code: 200
--- response_body_like: "content":\[\{"type":"text","text":"Hello"\}\],"stop_reason":"stop_sequence","stop_sequence":"!"



=== TEST 7: the same streamed: message_delta names the stop sequence
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":8,"temperature":0,"stream":true,"stop_sequences":["!"],"messages":[{"role":"user","content":"Hi"}]}
--- error_code: 200
--- response_body_like: "delta":\{"stop_reason":"stop_sequence","stop_sequence":"!"\}



=== TEST 8: an ended turn: stop_reason end_turn
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":200,"temperature":0,"messages":[{"role":"user","content":"Say OK."}]}
--- error_code: 200
--- response_body_like: "stop_reason":"end_turn","stop_sequence":null



=== TEST 9: max_tokens is required: 400 in Anthropic's error shape
--- request
POST /v1/messages
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}]}
--- error_code: 400
--- response_body
{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}
--- error_log
llm: 400 max_tokens: Field required



=== TEST 10: an unknown model is a 404 not_found_error
--- request
POST /v1/messages
{"model":"claude-sonnet-4","max_tokens":4,"messages":[{"role":"user","content":"Hi"}]}
--- error_code: 404
--- response_body
{"type":"error","error":{"type":"not_found_error","message":"The model `claude-sonnet-4` does not exist"}}



=== TEST 11: a body that is not JSON is a 400 invalid_request_error
--- request
POST /v1/messages
{"model":
--- error_code: 400
--- response_body_like: ^\{"type":"error","error":\{"type":"invalid_request_error","message":"We could not parse the JSON body of your request: the body ends at byte 9, inside an unfinished value. The API expects a JSON object."\}\}$



=== TEST 12: an image block is refused, naming the block
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}
--- error_code: 400
--- response_body
{"type":"error","error":{"type":"invalid_request_error","message":"messages.0.content.0.type: blocks of type 'image' are not supported in user messages (text, tool_use, tool_result, thinking and redacted_thinking are)"}}



=== TEST 13: a role other than user or assistant is a 400
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":4,"messages":[{"role":"system","content":"Hi"}]}
--- error_code: 400
--- response_body
{"type":"error","error":{"type":"invalid_request_error","message":"messages.0.role: Input should be 'user' or 'assistant'"}}



=== TEST 14: temperature above 1 is a 400 (Anthropic's range)
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":4,"temperature":1.5,"messages":[{"role":"user","content":"Hi"}]}
--- error_code: 400
--- response_body_like: "type":"invalid_request_error","message":"temperature: 



=== TEST 15: a body over llm_max_body_size: 413 request_too_large in Anthropic's shape
--- request eval
"POST /v1/messages\n" . '{"model":"smollm2","max_tokens":4,"messages":[{"role":"user","content":"' . ('x' x 5000) . '"}]}'
--- error_code: 413
--- response_body_like: ^\{"type":"error","error":\{"type":"request_too_large","message":"[^"]+"\}\}$



=== TEST 16: GET is a 405 in Anthropic's shape
--- request
GET /v1/messages
--- error_code: 405
--- response_body_like: ^\{"type":"error","error":\{"type":"invalid_request_error","message":"use POST for /v1/messages"\}\}$



=== TEST 17: a tool_use / tool_result round trip and thinking blocks with signatures are accepted
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":4,"temperature":0,"tools":[{"name":"get_weather","description":"Get the weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":[{"type":"thinking","thinking":"I should call the tool.","signature":"c2ln"},{"type":"redacted_thinking","data":"eA=="},{"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"text","text":"18 C, sunny"}]},{"type":"text","text":"Thanks"}]}]}
--- error_code: 200
--- response_body_like: ^\{"id":"msg_[0-9a-f]+","type":"message","role":"assistant","model":"smollm2","content":\[
--- no_error_log
[error]



=== TEST 18: tool_choice any: the engine's grammar makes a tool_use block, stop_reason tool_use
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":80,"temperature":0,"tool_choice":{"type":"any","disable_parallel_tool_use":true},"tools":[{"name":"get_weather","description":"Get the weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"messages":[{"role":"user","content":"Weather in Paris?"}]}
--- error_code: 200
--- response_body_like: "content":\[\{"type":"tool_use","id":"call_\w+","name":"get_weather","input":\{"city":"[^"]*"\}\}\],"stop_reason":"tool_use"



=== TEST 19: the same streamed: a tool_use block, its input as input_json_delta
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":80,"temperature":0,"stream":true,"tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"messages":[{"role":"user","content":"Weather in Paris?"}]}
--- error_code: 200
--- response_body_like: event: content_block_start\ndata: \{"type":"content_block_start","index":0,"content_block":\{"type":"tool_use","id":"call_\w+","name":"get_weather","input":\{\}\}\}\n\nevent: content_block_delta\ndata: \{"type":"content_block_delta","index":0,"delta":\{"type":"input_json_delta","partial_json":"\{\\"city\\":[^\n]*"\}\}\n\nevent: content_block_stop\ndata: \{"type":"content_block_stop","index":0\}\n\nevent: message_delta\ndata: \{"type":"message_delta","delta":\{"stop_reason":"tool_use"



=== TEST 20: a server tool type is refused, naming it
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":4,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"Hi"}]}
--- error_code: 400
--- response_body
{"type":"error","error":{"type":"invalid_request_error","message":"tools.0.type: only custom tools (name, description, input_schema) are served here"}}



=== TEST 21: thinking enabled / disabled reach the template as enable_thinking
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
        max_model_len 2048;
        kv_cache_memory 256m;
        chat_template ../html/think.jinja;
    }
--- user_files
>>> think.jinja
{%- for m in messages %}{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{%- endfor %}{{- '<|im_start|>assistant\n' }}{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}
--- request eval
["POST /v1/messages/count_tokens
{\"model\":\"smollm2\",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2048},\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
"POST /v1/messages/count_tokens
{\"model\":\"smollm2\",\"thinking\":{\"type\":\"disabled\"},\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
"POST /v1/messages/count_tokens
{\"model\":\"smollm2\",\"thinking\":{\"type\":\"sometimes\"},\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}"]
--- error_code eval
[200, 200, 400]
--- response_body eval
["{\"input_tokens\":10}\n", "{\"input_tokens\":19}\n", "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"thinking.type: Input should be 'enabled' or 'disabled'\"}}\n"]



=== TEST 22: llm_reasoning on: thinking streams as a thinking block (thinking_delta, signature_delta) before the text
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
        max_model_len 2048;
        kv_cache_memory 256m;
        chat_template ../html/think.jinja;
    }
--- config
    location /v1/ { llm_api main; llm_reasoning on; }
--- user_files
>>> think.jinja
{%- for m in messages %}{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{%- endfor %}{{- '<|im_start|>assistant\n<think>\n' }}
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":3,"temperature":0,"stream":true,"messages":[{"role":"user","content":"Hi"}]}
--- error_code: 200
--- response_body_like: event: content_block_start\ndata: \{"type":"content_block_start","index":0,"content_block":\{"type":"thinking","thinking":"","signature":""\}\}\n\n(event: content_block_delta\ndata: \{"type":"content_block_delta","index":0,"delta":\{"type":"thinking_delta","thinking":"[^"]+"\}\}\n\n)+event: content_block_delta\ndata: \{"type":"content_block_delta","index":0,"delta":\{"type":"signature_delta","signature":""\}\}\n\nevent: content_block_stop\ndata: \{"type":"content_block_stop","index":0\}\n\nevent: message_delta



=== TEST 23: the same not streamed: a thinking block with its signature field
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
        max_model_len 2048;
        kv_cache_memory 256m;
        chat_template ../html/think.jinja;
    }
--- config
    location /v1/ { llm_api main; llm_reasoning on; }
--- user_files
>>> think.jinja
{%- for m in messages %}{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{%- endfor %}{{- '<|im_start|>assistant\n<think>\n' }}
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":3,"temperature":0,"messages":[{"role":"user","content":"Hi"}]}
--- error_code: 200
--- response_body_like: "content":\[\{"type":"thinking","thinking":"[^"]+","signature":""\}\],"stop_reason":"max_tokens"



=== TEST 24: authentication stays nginx's: a map on $http_x_api_key, a 401 in Anthropic's shape written by return (an if block is not an llm_api location)
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
        max_model_len 2048;
        kv_cache_memory 256m;
    }
    map $http_x_api_key $llm_key_ok {
        default       0;
        "sk-ant-good" 1;
    }
--- config
    location /v1/ {
        default_type application/json;
        if ($llm_key_ok = 0) {
            return 401 '{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}\n';
        }
        llm_api main;
    }
--- request eval
["POST /v1/messages
{\"model\":\"smollm2\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
"POST /v1/messages/count_tokens
{\"model\":\"smollm2\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}"]
--- more_headers eval
["x-api-key: sk-ant-bad", "x-api-key: sk-ant-good"]
--- error_code eval
[401, 200]
--- response_body eval
["{\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"invalid x-api-key\"}}\n", "{\"input_tokens\":31}\n"]



=== TEST 25: a stream cut by its deadline ends with Anthropic's error event
--- config
    location /v1/ {
        llm_api main;
        llm_deadline 1s;
    }
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":1900,"ignore_eos":true,"temperature":0,"stream":true,"messages":[{"role":"user","content":"Count from 1 to 1000, one number per line."}]}
--- timeout: 60
--- error_code: 200
--- response_body_like: ^event: message_start\n.*\nevent: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"the generation deadline passed"\}\}\n\n$
--- error_log
llm: 504 stream ended by an error: the generation deadline passed
