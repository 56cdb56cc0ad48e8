# Qwen3-Coder's XML tool calls through nginx on SmolLM2 with a template
# that teaches the format (<tool_call> and <function=, as Qwen3-Coder's):
# a reply forced to a fixed XML call by a grammar is parsed into
# tool_calls (chat, streamed), and tool_choice required or named writes a
# JSON body by Hermes' grammar, which the same parser reads (chat, and the
# Messages API's tool_use).
use Test::Nginx::Socket 'no_plan';

$ENV{TEST_NGINX_TOOLS} = '[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}}]';
$ENV{TEST_NGINX_XML} = '{"type":"grammar","grammar":"root ::= \"<tool_call>\\\\n<function=get_weather>\\\\n<parameter=city>\\\\nParis\\\\n</parameter>\\\\n<parameter=days>\\\\n3\\\\n</parameter>\\\\n</function>\\\\n</tool_call>\""}';

add_block_preprocessor(sub {
    my $block = shift;

    $block->set_value("http_config", <<'_EOC_');
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
        max_model_len 2048;
        kv_cache_memory 256m;
        chat_template ../html/coder.jinja;
    }
_EOC_
    $block->set_value("config", <<'_EOC_');
    location /v1/ { llm_api main; }
_EOC_
    $block->set_value("user_files", <<'_EOC_');
>>> coder.jinja
{%- if tools %}{{- '<|im_start|>system\nTo call a function reply:\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n</function>\n</tool_call><|im_end|>\n' }}{%- endif %}{%- for m in messages %}{{- '<|im_start|>' + m.role + '\n' + (m.content or '') + '<|im_end|>\n' }}{%- endfor %}{{- '<|im_start|>assistant\n' }}
_EOC_
    $block->set_value("timeout", 120) unless defined $block->timeout;
});

no_shuffle();
run_tests();

__DATA__

=== TEST 1: an XML call (forced by a grammar): tool_calls, arguments typed by the schema
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":$ENV{TEST_NGINX_TOOLS},"response_format":$ENV{TEST_NGINX_XML},"max_tokens":80,"temperature":0}}
--- error_code: 200
--- response_body_like: "message":\{"role":"assistant","content":null,"tool_calls":\[\{"id":"call_\w+","type":"function","function":\{"name":"get_weather","arguments":"\{\\"city\\":\\"Paris\\",\\"days\\":3\}"\}\}\]\},"logprobs":null,"finish_reason":"tool_calls"
--- no_error_log
[error]



=== TEST 2: the same streamed: OpenAI's tool_calls chunks
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","stream":true,"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":$ENV{TEST_NGINX_TOOLS},"response_format":$ENV{TEST_NGINX_XML},"max_tokens":80,"temperature":0}}
--- error_code: 200
--- response_body_like: "delta":\{"tool_calls":\[\{"index":0,"id":"call_\w+","type":"function","function":\{"name":"get_weather","arguments":""\}\}\]\}.*"delta":\{"tool_calls":\[\{"index":0,"function":\{"arguments":"\{\\"city\\":\\"Paris\\",\\"days\\":3\}"\}\}\]\}.*"finish_reason":"tool_calls"\}\]\}\n\ndata: \[DONE\]\n\n$
--- no_error_log
[error]



=== TEST 3: the Messages API, tool_choice tool: a tool_use block (Hermes' grammar, read by the XML format's parser)
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":80,"temperature":0,"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true}}
--- error_code: 200
--- response_body_like: "content":\[\{"type":"tool_use","id":"call_\w+","name":"get_weather","input":\{"city":"[^"]*"\}\}\],"stop_reason":"tool_use"



=== TEST 4: tool_choice required: Hermes' grammar writes a JSON body, the XML format's parser reads it
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":$ENV{TEST_NGINX_TOOLS},"tool_choice":"required","parallel_tool_calls":false,"max_tokens":80,"temperature":0}}
--- error_code: 200
--- response_body_like: "content":null,"tool_calls":\[\{"id":"call_\w+","type":"function","function":\{"name":"get_weather","arguments":"\{\\"city\\":.*"finish_reason":"tool_calls"
--- no_error_log
[error]
