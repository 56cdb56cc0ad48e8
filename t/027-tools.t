# Tool calling and reasoning through nginx on the real SmolLM2, whose
# template knows no tools: the generic format (a system message describes
# the tools, the model answers {"tool_calls": [...]} or text). What a
# 135M model writes is not a test of ours: replies are checked for their
# shape (a parsed call or content, never both missing), the rest for what
# the server decides (errors, prompts, the reply's shape, the counter).
use Test::Nginx::Socket 'no_plan';

$ENV{TEST_NGINX_TOOLS} = '[{"type":"function","function":{"name":"get_weather","description":"Get the weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]';

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
    location /think/v1/ { llm_api main; llm_reasoning on; }
    location = /metrics { llm_metrics; }
_EOC_
    }

    $block->set_value("timeout", 120) unless defined $block->timeout;
});

no_shuffle();
run_tests();

__DATA__

=== TEST 1: tools + auto: 200, a parsed call or content
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"What is the weather in Paris?"}],"tools":$ENV{TEST_NGINX_TOOLS},"max_tokens":40,"temperature":0}}
--- error_code: 200
--- response_body_like: ^\{"id":"chatcmpl-[0-9a-f]+","object":"chat.completion","created":\d+,"model":"smollm2","choices":\[\{"index":0,"message":\{"role":"assistant",("content":null,"tool_calls":\[\{"id":"call_[A-Za-z0-9]{24}","type":"function","function":\{"name":"get_weather","arguments":"\{.*\}"\}\}\]\},"logprobs":null,"finish_reason":"tool_calls"|"content":"(?:[^"\\]|\\.)*"\},"logprobs":null,"finish_reason":"(stop|length)")\}\],"usage"
--- no_error_log
[error]



=== TEST 2: tools describe themselves in the prompt (generic system message): more prompt tokens than without
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"tools":$ENV{TEST_NGINX_TOOLS},"max_tokens":1,"temperature":0}}
--- error_code: 200
--- response_body_like: "prompt_tokens":(1[0-9][0-9]),
--- no_error_log
[error]



=== TEST 3: tool_choice none: no tools in the prompt (31 tokens, as without tools), never tool_calls
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"tools":$ENV{TEST_NGINX_TOOLS},"tool_choice":"none","max_tokens":2,"temperature":0}}
--- error_code: 200
--- response_body_like: ^\{"id":"chatcmpl-[0-9a-f]+","object":"chat.completion","created":\d+,"model":"smollm2","choices":\[\{"index":0,"message":\{"role":"assistant","content":"Hello!"\},"logprobs":null,"finish_reason":"length"\}\],"usage":\{"prompt_tokens":31,
--- no_error_log
[error]



=== TEST 4: tool_choice none with a reply forced to look like a call: content, not parsed
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"tools":$ENV{TEST_NGINX_TOOLS},"tool_choice":"none","max_tokens":3,"temperature":0,"logit_bias":{"107":100}}}
--- error_code: 200
--- response_body_like: "message":\{"role":"assistant","content":"\{\{\{"\},"logprobs":null,"finish_reason":"length"
--- no_error_log
[error]



=== TEST 5: auto, a reply that looks like a call and is not one: content, logged at info
--- log_level: info
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"tools":$ENV{TEST_NGINX_TOOLS},"max_tokens":3,"temperature":0,"logit_bias":{"107":100}}}
--- error_code: 200
--- response_body_like: "message":\{"role":"assistant","content":"\{\{\{"\},"logprobs":null,"finish_reason":"length"
--- error_log
generic format) but is not one: a reply that is not valid JSON; sent as content
--- no_error_log
[error]



=== TEST 6: such replies are counted in /metrics
--- request eval
[qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"tools":$ENV{TEST_NGINX_TOOLS},"max_tokens":3,"temperature":0,"logit_bias":{"107":100}}},
"GET /metrics"]
--- error_code eval
[200, 200]
--- response_body_like eval
['"content":"\{\{\{"',
'ngx_llm_tool_call_parse_failures_total\{model_name="smollm2"[^}]*\} [1-9]\d*\n']
--- no_error_log
[error]



=== TEST 7: a conversation with a past call and its result (role tool) is accepted
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":\\"Paris\\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"18C and sunny"}],"tools":$ENV{TEST_NGINX_TOOLS},"max_tokens":2,"temperature":0}}
--- error_code: 200
--- response_body_like: "finish_reason":"(stop|length|tool_calls)"
--- no_error_log
[error]



=== TEST 8: streaming with tools keeps OpenAI's chunk shape: role first, finish, [DONE]
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","stream":true,"messages":[{"role":"user","content":"What is the weather in Paris?"}],"tools":$ENV{TEST_NGINX_TOOLS},"max_tokens":30,"temperature":0}}
--- error_code: 200
--- response_body_like: ^data: \{"id":"chatcmpl-[0-9a-f]+","object":"chat.completion.chunk","created":\d+,"model":"smollm2","choices":\[\{"index":0,"delta":\{"role":"assistant","content":"[^\n]*\n\n(data: \{"id":"chatcmpl-[0-9a-f]+","object":"chat.completion.chunk"[^\n]*\n\n)*data: \{[^\n]*"delta":\{\},"logprobs":null,"finish_reason":"(stop|length|tool_calls)"\}\]\}\n\ndata: \[DONE\]\n\n$
--- no_error_log
[error]



=== TEST 9: streaming, a reply held back as a possible call comes out whole at the end as content
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","stream":true,"messages":[{"role":"user","content":"Hi"}],"tools":$ENV{TEST_NGINX_TOOLS},"max_tokens":3,"temperature":0,"logit_bias":{"107":100}}}
--- error_code: 200
--- response_body_like: ^data: [^\n]*"delta":\{"role":"assistant","content":""\}[^\n]*\n\n(data: [^\n]*"delta":\{"content":""\}[^\n]*\n\n)*data: [^\n]*"delta":\{"content":"\{\{\{"\}[^\n]*\n\ndata: [^\n]*"finish_reason":"length"\}\]\}\n\ndata: \[DONE\]\n\n$
--- no_error_log
[error]



=== TEST 10: an unsupported tool type is a 400 naming it
--- request
POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"code_interpreter"}]}
--- error_code: 400
--- response_body_like: ^\{"error":\{"message":"Unsupported value for 'tools\[0\].type': tools of type 'code_interpreter' are not supported; only 'function' is.","type":"invalid_request_error","param":"tools\[0\].type","code":"unsupported_value"\}\}
--- no_error_log
[error]



=== TEST 11: a bad function name is a 400
--- request
POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"get weather"}}]}
--- error_code: 400
--- response_body_like: "param":"tools\[0\].function.name","code":"invalid_value"
--- no_error_log
[error]



=== TEST 12: tool_choice naming a function that is not in tools is a 400
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"tools":$ENV{TEST_NGINX_TOOLS},"tool_choice":{"type":"function","function":{"name":"get_time"}}}}
--- error_code: 400
--- response_body_like: ^\{"error":\{"message":"Invalid value for 'tool_choice': no function named 'get_time' in tools.","type":"invalid_request_error","param":"tool_choice.function.name","code":"invalid_value"\}\}
--- no_error_log
[error]



=== TEST 13: a bad tool_choice is a 400
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"tools":$ENV{TEST_NGINX_TOOLS},"tool_choice":"always"}}
--- error_code: 400
--- response_body_like: "param":"tool_choice","code":"invalid_value"
--- no_error_log
[error]



=== TEST 14: tool_choice required is enforced by the engine's grammar: a call, never prose (one call: the greedy path may list several, past max_tokens)
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"tools":$ENV{TEST_NGINX_TOOLS},"tool_choice":"required","parallel_tool_calls":false,"max_tokens":80,"temperature":0}}
--- error_code: 200
--- response_body_like: "content":null,"tool_calls":\[\{"id":"call_\w+","type":"function","function":\{"name":"get_weather","arguments":"\{\\"city\\":.*"finish_reason":"tool_calls"
--- no_error_log
[error]



=== TEST 15: the deprecated functions field is refused, not ignored
--- request
POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"functions":[{"name":"f"}]}
--- error_code: 400
--- response_body_like: "param":"functions","code":"unsupported_parameter"
--- no_error_log
[error]



=== TEST 16: a tool message without tool_call_id is a 400
--- request
POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"},{"role":"tool","content":"x"}]}
--- error_code: 400
--- response_body_like: "param":"messages\[1\].tool_call_id","code":"missing_required_parameter"
--- no_error_log
[error]



=== TEST 17: llm_reasoning on: the message carries reasoning_content (null: SmolLM2 does not think)
--- request
POST /think/v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"temperature":0}
--- error_code: 200
--- response_body_like: "message":\{"role":"assistant","content":"Hello!","reasoning_content":null\},"logprobs":null,"finish_reason":"length"
--- no_error_log
[error]



=== TEST 18: llm_reasoning is off by default: no reasoning_content
--- request
POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"temperature":0}
--- error_code: 200
--- response_body_like: "message":\{"role":"assistant","content":"Hello!"\},"logprobs":null
--- no_error_log
[error]



=== TEST 19: llm_reasoning takes on or off
--- config
    location /v1/ { llm_api main; llm_reasoning maybe; }
--- request
GET /v1/models
--- must_die
--- error_log
invalid value "maybe" in "llm_reasoning" directive, it must be "on" or "off"



=== TEST 20: a generation prompt that opens <think> (as DeepSeek-R1's): the reply starts inside the thinking
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
POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"temperature":0}
--- error_code: 200
--- response_body_like: "message":\{"role":"assistant","content":"","reasoning_content":"[^"]+"\},"logprobs":null,"finish_reason":"length"
--- no_error_log
[error]



=== TEST 21: the same streamed: delta.reasoning_content, no content
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
POST /v1/chat/completions
{"model":"smollm2","stream":true,"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"temperature":0}
--- error_code: 200
--- response_body_like: ^data: [^\n]*"delta":\{"role":"assistant",("content":""|"reasoning_content":"[^"]+")\}[^\n]*\n\n(data: [^\n]*"delta":\{"reasoning_content":"[^"]+"\}[^\n]*\n\n)+data: [^\n]*"delta":\{\},"logprobs":null,"finish_reason":"length"\}\]\}\n\ndata: \[DONE\]\n\n$
--- no_error_log
[error]
