# POST /v1/responses (OpenAI's Responses API) through nginx on SmolLM2:
# the response object's shape, items in and out, Codex's tool types,
# hosted tools dropped (a header and an info line) or refused under
# llm_responses_strict_tools, and the error paths in OpenAI's shape with
# the Responses request's field names. Greedy replies are the ones
# t/027-tools.t checks on chat ("Hello!" for "Hi").
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
    location /v1/ { llm_api main; }
    location /strict/v1/ { llm_api main; llm_responses_strict_tools on; }
    location /zone/v1/ { llm_api main; llm_responses_zone t042 1m 10m; }
    location /short/v1/ { llm_api main; llm_deadline 3s; }
_EOC_
    }

    $block->set_value("timeout", 120) unless defined $block->timeout;
});

no_shuffle();
run_tests();

__DATA__

=== TEST 1: a string input: the response object, cut by max_output_tokens: incomplete
--- request
POST /v1/responses
{"model":"smollm2","input":"Hi","max_output_tokens":2,"temperature":0}
--- error_code: 200
--- response_headers_like
X-Request-Id: resp_[0-9a-f]+
Content-Type: application/json
--- response_body_like: ^\{"id":"resp_[0-9a-f]+","object":"response","created_at":\d+,"status":"incomplete","error":null,"model":"smollm2","incomplete_details":\{"reason":"max_output_tokens"\},.*"output":\[\{"id":"msg_[0-9a-f]+00","type":"message","status":"incomplete","role":"assistant","content":\[\{"type":"output_text","text":"Hello!","annotations":\[\],"logprobs":\[\]\}\]\}\],"usage":\{"input_tokens":31,"input_tokens_details":\{"cached_tokens":\d+\},"output_tokens":2,"output_tokens_details":\{"reasoning_tokens":0\},"total_tokens":33\}\}$
--- no_error_log
[error]



=== TEST 2: the same as items, with instructions: a system turn first (more input tokens), echoed
--- request
POST /v1/responses
{"model":"smollm2","instructions":"Answer in French.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi"}]}],"max_output_tokens":2,"temperature":0,"metadata":{"run":"t042"},"store":false}
--- error_code: 200
--- response_body_like: "instructions":"Answer in French\.","max_output_tokens":2,"metadata":\{"run":"t042"\},.*"store":false,.*"status":"incomplete"
--- no_error_log
[error]



=== TEST 3: a reply that ends by itself: completed, incomplete_details null
--- request
POST /v1/responses
{"model":"smollm2","input":"Hi","max_output_tokens":60,"temperature":0}
--- error_code: 200
--- response_body_like: "status":"completed","error":null,"model":"smollm2","incomplete_details":null,.*"type":"message","status":"completed"
--- no_error_log
[error]



=== TEST 4: a function call round trip in the input: function_call and function_call_output as the tool turns
--- request
POST /v1/responses
{"model":"smollm2","input":[{"role":"user","content":"Weather in Paris?"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"call_1","output":"22 C, sunny"}],"tools":[{"type":"function","name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}],"max_output_tokens":30,"temperature":0}
--- error_code: 200
--- response_body_like: "object":"response",.*"tools":\[\{"type":"function","name":"get_weather",.*"output":\[\{"id":"(msg|fc)_
--- no_error_log
[error]



=== TEST 5: tool_choice required: a function_call item with call_id, name, arguments
--- request
POST /v1/responses
{"model":"smollm2","input":"Weather in Paris?","tools":[{"type":"function","name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}],"tool_choice":"required","parallel_tool_calls":false,"max_output_tokens":60,"temperature":0}
--- error_code: 200
--- response_body_like: "output":\[\{"id":"fc_[0-9a-f]+00","type":"function_call","status":"completed","call_id":"call_[A-Za-z0-9]{24}","name":"get_weather","arguments":"\{\\"city\\":\\"[^"\\]*\\"\}"\}\]
--- no_error_log
[error]



=== TEST 6: a namespace's tool forced: the call comes back with its namespace and own name
--- request
POST /v1/responses
{"model":"smollm2","input":"Read the file a.txt","tools":[{"type":"namespace","name":"mcp__fs__","description":"files","tools":[{"type":"function","name":"read","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}}]}],"tool_choice":{"type":"function","namespace":"mcp__fs__","name":"read"},"parallel_tool_calls":false,"max_output_tokens":60,"temperature":0}
--- error_code: 200
--- response_body_like: "type":"function_call","status":"completed","call_id":"call_[A-Za-z0-9]{24}","name":"read","namespace":"mcp__fs__","arguments":"\{\\"path\\":
--- no_error_log
[error]



=== TEST 7: a custom (freeform) tool forced: a custom_tool_call with its input
--- request
POST /v1/responses
{"model":"smollm2","input":"Write hello into a.txt","tools":[{"type":"custom","name":"apply_patch","description":"Edit files with a patch","format":{"type":"grammar","syntax":"lark","definition":"start: /.+/"}}],"tool_choice":{"type":"custom","name":"apply_patch"},"parallel_tool_calls":false,"max_output_tokens":60,"temperature":0}
--- error_code: 200
--- response_body_like: "output":\[\{"id":"fc_[0-9a-f]+00","type":"custom_tool_call","status":"completed","call_id":"call_[A-Za-z0-9]{24}","name":"apply_patch","input":"
--- no_error_log
[error]



=== TEST 8: hosted tools: dropped, named in X-LLM-Dropped-Tools and an info line, the rest offered
--- request
POST /v1/responses
{"model":"smollm2","input":"Hi","tools":[{"type":"web_search"},{"type":"function","name":"f","parameters":{"type":"object","properties":{}}},{"type":"code_interpreter","container":{"type":"auto"}}],"max_output_tokens":2,"temperature":0}
--- error_code: 200
--- response_headers
X-LLM-Dropped-Tools: web_search, code_interpreter
--- response_body_like: "tools":\[\{"type":"function","name":"f",
--- error_log
responses: hosted tools dropped: web_search, code_interpreter
--- no_error_log
[error]



=== TEST 9: only hosted tools: nothing offered, tool_choice auto kept harmless
--- request
POST /v1/responses
{"model":"smollm2","input":"Hi","tools":[{"type":"file_search","vector_store_ids":["vs_1"]}],"tool_choice":"auto","max_output_tokens":2,"temperature":0}
--- error_code: 200
--- response_headers
X-LLM-Dropped-Tools: file_search
--- response_body_like: "usage":\{"input_tokens":31,
--- no_error_log
[error]



=== TEST 10: llm_responses_strict_tools on: a hosted tool is a 400 naming it
--- request
POST /strict/v1/responses
{"model":"smollm2","input":"Hi","tools":[{"type":"function","name":"f"},{"type":"image_generation"}]}
--- error_code: 400
--- response_body_like: ^\{"error":\{"message":"Unsupported value for 'tools\[1\]\.type': 'image_generation' is a hosted tool, which this server does not run \(llm_responses_strict_tools is on\)\.","type":"invalid_request_error","param":"tools\[1\]\.type","code":"unsupported_value"\}\}
--- error_log
llm:



=== TEST 11: previous_response_id without llm_responses_zone: 400 naming the directive
--- request
POST /v1/responses
{"model":"smollm2","input":"Hi","previous_response_id":"resp_0123"}
--- error_code: 400
--- response_body_like: "message":"previous_response_id needs stored responses, and this location has no llm_responses_zone: resend the conversation in input","type":"invalid_request_error","param":null,"code":"previous_response_id_unsupported"
--- no_error_log
[error]



=== TEST 12: a chat field's error under its Responses name (max_output_tokens)
--- request
POST /v1/responses
{"model":"smollm2","input":"Hi","max_output_tokens":0}
--- error_code: 400
--- response_body_like: "param":"max_output_tokens","code":"integer_below_min_value"
--- no_error_log
[error]



=== TEST 13: an unknown input item type: 400 naming it
--- request
POST /v1/responses
{"model":"smollm2","input":[{"type":"item_reference","id":"msg_1"}]}
--- error_code: 400
--- response_body_like: "param":"input\[0\]\.type","code":"unsupported_value"
--- no_error_log
[error]



=== TEST 14: no input: 400 missing_required_parameter
--- request
POST /v1/responses
{"model":"smollm2"}
--- error_code: 400
--- response_body_like: "param":"input","code":"missing_required_parameter"
--- no_error_log
[error]



=== TEST 15: another model: 404 as on chat
--- request
POST /v1/responses
{"model":"gpt-5","input":"Hi"}
--- error_code: 404
--- response_body_like: "code":"model_not_found"
--- no_error_log
[error]



=== TEST 16: invalid JSON: 400 invalid_json
--- request
POST /v1/responses
{"model":"smollm2","input":
--- error_code: 400
--- response_body_like: "code":"invalid_json"
--- no_error_log
[error]



=== TEST 17: GET /v1/responses: 405
--- request
GET /v1/responses
--- error_code: 405
--- response_body_like: "code":"method_not_allowed"



=== TEST 18: text.format json_object: the output text is a JSON object
--- request
POST /v1/responses
{"model":"smollm2","input":"Give me a JSON object with a name.","text":{"format":{"type":"json_object"}},"max_output_tokens":40,"temperature":0}
--- error_code: 200
--- response_body_like: "text":\{"format":\{"type":"json_object"\}\},.*"type":"output_text","text":"\{
--- no_error_log
[error]



=== TEST 19: reasoning items given back are dropped, encrypted_content with them
--- request
POST /v1/responses
{"model":"smollm2","input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAAB"},{"role":"user","content":"Hi"}],"include":["reasoning.encrypted_content"],"max_output_tokens":2,"temperature":0}
--- error_code: 200
--- response_body_like: "output_text","text":"Hello!".*"input_tokens":31,
--- no_error_log
[error]



=== TEST 20: stream: the event sequence of a message, numbered from 0, cut by max_output_tokens
--- request
POST /v1/responses
{"model":"smollm2","input":"Hi","max_output_tokens":2,"temperature":0,"stream":true}
--- error_code: 200
--- response_headers
Content-Type: text/event-stream
--- response_body_like: ^event: response\.created\ndata: \{"type":"response\.created","response":\{"id":"(resp_[0-9a-f]+)","object":"response",[^\n]*"status":"in_progress",[^\n]*"output":\[\],"usage":null\},"sequence_number":0\}\n\nevent: response\.in_progress\ndata: [^\n]*"sequence_number":1\}\n\nevent: response\.output_item\.added\ndata: \{"type":"response\.output_item\.added","output_index":0,"item":\{"id":"(msg_[0-9a-f]+00)","type":"message","status":"in_progress","role":"assistant","content":\[\]\},"sequence_number":2\}\n\nevent: response\.content_part\.added\ndata: \{"type":"response\.content_part\.added","output_index":0,"item_id":"\2","content_index":0,"part":\{"type":"output_text","text":"","annotations":\[\]\},"sequence_number":3\}\n\n(event: response\.output_text\.delta\ndata: \{"type":"response\.output_text\.delta","output_index":0,"item_id":"\2","content_index":0,"delta":"[^"]+","logprobs":\[\],"sequence_number":\d+\}\n\n)+event: response\.output_text\.done\ndata: \{"type":"response\.output_text\.done","output_index":0,"item_id":"\2","content_index":0,"text":"Hello!","logprobs":\[\],"sequence_number":\d+\}\n\nevent: response\.content_part\.done\ndata: [^\n]*"part":\{"type":"output_text","text":"Hello!","annotations":\[\]\},[^\n]*\n\nevent: response\.output_item\.done\ndata: \{"type":"response\.output_item\.done","output_index":0,"item":\{"id":"\2","type":"message","status":"incomplete",[^\n]*\n\nevent: response\.incomplete\ndata: \{"type":"response\.incomplete","response":\{"id":"\1",[^\n]*"status":"incomplete",[^\n]*"incomplete_details":\{"reason":"max_output_tokens"\},[^\n]*"output":\[\{"id":"\2",[^\n]*"usage":\{"input_tokens":31,[^\n]*"output_tokens":2,[^\n]*\}\n\n$
--- no_error_log
[error]



=== TEST 21: stream: a function call as its item, arguments delta and done
--- request
POST /v1/responses
{"model":"smollm2","input":"Weather in Paris?","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}],"tool_choice":"required","parallel_tool_calls":false,"max_output_tokens":60,"temperature":0,"stream":true}
--- error_code: 200
--- response_body_like: event: response\.output_item\.added\ndata: \{"type":"response\.output_item\.added","output_index":0,"item":\{"id":"(fc_[0-9a-f]+00)","type":"function_call","status":"in_progress","call_id":"(call_[A-Za-z0-9]{24})","name":"get_weather","arguments":""\},"sequence_number":2\}\n\nevent: response\.function_call_arguments\.delta\ndata: \{"type":"response\.function_call_arguments\.delta","output_index":0,"item_id":"\1","delta":"\{[^\n]*\n\nevent: response\.function_call_arguments\.done\ndata: \{"type":"response\.function_call_arguments\.done","output_index":0,"item_id":"\1","arguments":"\{[^\n]*\n\nevent: response\.output_item\.done\ndata: [^\n]*"call_id":"\2"[^\n]*\n\nevent: response\.completed\ndata: [^\n]*"status":"completed"[^\n]*"output":\[\{"id":"\1","type":"function_call"
--- no_error_log
[error]



=== TEST 22: stream: a custom tool's call as custom_tool_call with its input events
--- request
POST /v1/responses
{"model":"smollm2","input":"Write hello into a.txt","tools":[{"type":"custom","name":"apply_patch","description":"Edit files with a patch"}],"tool_choice":"required","parallel_tool_calls":false,"max_output_tokens":60,"temperature":0,"stream":true}
--- error_code: 200
--- response_body_like: "item":\{"id":"(fc_[0-9a-f]+00)","type":"custom_tool_call","status":"in_progress","call_id":"call_[A-Za-z0-9]{24}","name":"apply_patch","input":""\}.*event: response\.custom_tool_call_input\.delta\ndata: \{"type":"response\.custom_tool_call_input\.delta","output_index":0,"item_id":"\1","delta":.*event: response\.custom_tool_call_input\.done\ndata: \{"type":"response\.custom_tool_call_input\.done","output_index":0,"item_id":"\1","input":.*event: response\.completed\n
--- no_error_log
[error]



=== TEST 23: a zone: an unknown previous_response_id is a 404 previous_response_not_found
--- request
POST /zone/v1/responses
{"model":"smollm2","input":"Hi","previous_response_id":"resp_0123"}
--- error_code: 404
--- response_body_like: ^\{"error":\{"message":"Previous response with id 'resp_0123' not found\.","type":"invalid_request_error","param":null,"code":"previous_response_not_found"\}\}
--- error_log
previous response "resp_0123" not found



=== TEST 24: a zone: a stored response comes back by GET, then DELETE removes it
--- request eval
["POST /zone/v1/responses\n{\"model\":\"smollm2\",\"input\":\"Hi\",\"max_output_tokens\":2,\"temperature\":0}",
 "GET /zone/v1/responses/resp_none",
 "DELETE /zone/v1/responses/resp_none"]
--- error_code eval
[200, 404, 404]
--- response_body_like eval
['"store":true',
 '"code":"not_found"',
 '"code":"not_found"']
--- no_error_log
[error]



=== TEST 25: no zone: GET /v1/responses/{id} is a 404 that says why
--- request
GET /v1/responses/resp_0123
--- error_code: 404
--- response_body_like: "message":"Response with id 'resp_0123' not found: this location stores none \(no llm_responses_zone\)\.",.*"code":"not_found"



=== TEST 26: POST /v1/responses/{id}: 405
--- request
POST /zone/v1/responses/resp_0123
{}
--- error_code: 405
--- response_body_like: "code":"method_not_allowed"



=== TEST 27: store false: not kept, "store":false
--- request
POST /zone/v1/responses
{"model":"smollm2","input":"Hi","max_output_tokens":2,"temperature":0,"store":false}
--- error_code: 200
--- response_body_like: "store":false
--- no_error_log
[error]



=== TEST 28: llm_responses_zone with a bad size: nginx refuses the configuration
--- config
    location /v1/ { llm_api main; llm_responses_zone z 1k 10m; }
--- must_die
--- error_log
invalid llm_responses_zone size "1k"



=== TEST 29: llm_responses_zone with a bad ttl: refused
--- config
    location /v1/ { llm_api main; llm_responses_zone z 1m never; }
--- must_die
--- error_log
invalid llm_responses_zone ttl "never"



=== TEST 30: a stream cut by its deadline: an error event, then response.failed, and the 504 in the log
--- request
POST /short/v1/responses
{"model":"smollm2","input":"Once upon a time","max_output_tokens":2000,"ignore_eos":true,"stream":true}
--- timeout: 60
--- error_code: 200
--- response_body_like: event: response\.output_text\.delta\n.*\n\nevent: error\ndata: \{"type":"error","code":"deadline_exceeded","message":"the generation deadline passed","param":null,"sequence_number":(\d+)\}\n\nevent: response\.failed\ndata: \{"type":"response\.failed","response":\{"id":"resp_[0-9a-f]+",[^\n]*"status":"failed","error":\{"code":"deadline_exceeded","message":"the generation deadline passed"\},[^\n]*\}\n\n$
--- error_log
llm: 504 stream ended by an error: the generation deadline passed



=== TEST 31: a template whose prompt opens <think>, llm_reasoning on: a reasoning item first, its tokens counted
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
        chat_template ../html/think.jinja;
        max_model_len 2048;
        kv_cache_memory 256m;
    }
--- config
    location /v1/ { llm_api main; llm_reasoning on; }
--- user_files
>>> think.jinja
{% for m in messages %}<|im_start|>{{ m['role'] }}
{{ m['content'] }}<|im_end|>
{% endfor %}<|im_start|>assistant
<think>
--- request
POST /v1/responses
{"model":"smollm2","input":"Hi","max_output_tokens":8,"temperature":0}
--- error_code: 200
--- response_body_like: "output":\[\{"id":"rs_[0-9a-f]+00","type":"reasoning","summary":\[\],"content":\[\{"type":"reasoning_text","text":"[^"]+.*"usage":\{"input_tokens":\d+,"input_tokens_details":\{"cached_tokens":\d+\},"output_tokens":8,"output_tokens_details":\{"reasoning_tokens":[1-8]\}
--- no_error_log
[error]



=== TEST 32: the same streamed: reasoning_text deltas and done in a reasoning item
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
        chat_template ../html/think.jinja;
        max_model_len 2048;
        kv_cache_memory 256m;
    }
--- config
    location /v1/ { llm_api main; llm_reasoning on; }
--- user_files
>>> think.jinja
{% for m in messages %}<|im_start|>{{ m['role'] }}
{{ m['content'] }}<|im_end|>
{% endfor %}<|im_start|>assistant
<think>
--- request
POST /v1/responses
{"model":"smollm2","input":"Hi","max_output_tokens":8,"temperature":0,"stream":true}
--- error_code: 200
--- response_body_like: event: response\.output_item\.added\ndata: \{"type":"response\.output_item\.added","output_index":0,"item":\{"id":"(rs_[0-9a-f]+00)","type":"reasoning","summary":\[\],"content":\[\]\},"sequence_number":2\}\n\nevent: response\.reasoning_text\.delta\ndata: \{"type":"response\.reasoning_text\.delta","output_index":0,"item_id":"\1","content_index":0,"delta":.*event: response\.reasoning_text\.done\ndata: \{"type":"response\.reasoning_text\.done","output_index":0,"item_id":"\1","content_index":0,"text":.*event: response\.output_item\.done\ndata: \{"type":"response\.output_item\.done","output_index":0,"item":\{"id":"\1","type":"reasoning",.*event: response\.incomplete\n
--- no_error_log
[error]



=== TEST 33: reasoning.effort minimal switches the template's thinking off (enable_thinking false: the empty think block adds input tokens)
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
        chat_template ../html/switch.jinja;
        max_model_len 2048;
        kv_cache_memory 256m;
    }
--- user_files
>>> switch.jinja
{% for m in messages %}<|im_start|>{{ m['role'] }}
{{ m['content'] }}<|im_end|>
{% endfor %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}
--- request
POST /v1/responses
{"model":"smollm2","input":"Hi","max_output_tokens":1,"temperature":0,"reasoning":{"effort":"minimal"}}
--- error_code: 200
--- response_body_like: "input_tokens":19,
--- no_error_log
[error]



=== TEST 34: reasoning.effort high leaves it on (the template's own default prompt)
--- http_config
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
        chat_template ../html/switch.jinja;
        max_model_len 2048;
        kv_cache_memory 256m;
    }
--- user_files
>>> switch.jinja
{% for m in messages %}<|im_start|>{{ m['role'] }}
{{ m['content'] }}<|im_end|>
{% endfor %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}
--- request
POST /v1/responses
{"model":"smollm2","input":"Hi","max_output_tokens":1,"temperature":0,"reasoning":{"effort":"high"}}
--- error_code: 200
--- response_body_like: "input_tokens":10,
--- no_error_log
[error]
