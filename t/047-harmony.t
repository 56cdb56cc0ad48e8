# gpt-oss's Harmony format through nginx, on SmolLM2 served with the
# published gpt-oss template (make deps: the llama-cpp-python sdist's
# openai-gpt-oss-120b.jinja). SmolLM2 has no Harmony tokens, so a grammar
# makes it write the markers as text, which the module splits by channel
# as it would gpt-oss's tokens: analysis -> reasoning_content, final ->
# content, to=functions.NAME -> tool_calls (chat, streamed, Messages'
# blocks, Responses' items); the template takes reasoning_effort and
# chat_template_kwargs; required / named calls by Harmony's grammar. Then
# the tiny gpt-oss of branch oss (t/data/models/hf-gptoss.gguf: random
# weights, Harmony's special tokens) where a grammar makes it write the
# markers as their tokens: the detokenizer keeps them for the splitter,
# and <|return|> / <|call|> end the reply. The
# published template needs a description on every tool (it adds it to a
# string: jinja2, and so transformers, fails without one).
use Test::Nginx::Socket 'no_plan';

$ENV{TEST_NGINX_TOOLS} = '[{"type":"function","function":{"name":"get_weather","description":"The weather in a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]';
$ENV{TEST_NGINX_TOOLS_ENUM} = '[{"type":"function","function":{"name":"get_weather","description":"The weather in a city.","parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Oslo"]}},"required":["city"]}}}]';
$ENV{TEST_NGINX_TINY_TOOLS} = '[{"type":"function","function":{"name":"w","description":"W","parameters":{"type":"object","properties":{"c":{"type":"string","enum":["P","O"]}},"required":["c"]}}}]';
$ENV{TEST_NGINX_TOK_FINAL} = '{"type":"grammar","grammar":"root ::= <|channel|> \"analysis\" <|message|> \"Think first.\" <|end|> <|start|> \"assistant\" <|channel|> \"final\" <|message|> \"Hello.\" <|return|>"}';
$ENV{TEST_NGINX_TOK_CALL} = '{"type":"grammar","grammar":"root ::= <|channel|> \"analysis\" <|message|> \"Need w.\" <|end|> <|start|> \"assistant\" <|channel|> \"commentary to=functions.w \" <|constrain|> \"json\" <|message|> \"{\\\\\"c\\\\\":\\\\\"P\\\\\"}\" <|call|>"}';
$ENV{TEST_NGINX_THINK} = '{"type":"grammar","grammar":"root ::= \"<|channel|>analysis<|message|>The user greets me.<|end|><|start|>assistant<|channel|>final<|message|>Hello there!\""}';
$ENV{TEST_NGINX_CALL} = '{"type":"grammar","grammar":"root ::= \"<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\\\\\"city\\\\\":\\\\\"Paris\\\\\"}<|call|>\""}';

add_block_preprocessor(sub {
    my $block = shift;

    $block->set_value("http_config", <<'_EOC_');
    llm_engine main {
        model $TEST_NGINX_MODEL;
        served_model_name smollm2;
        max_model_len 2048;
        kv_cache_memory 256m;
        chat_template $TEST_NGINX_FIXTURES/llama.cpp/templates/openai-gpt-oss-120b.jinja;
    }
    llm_engine oss {
        model $TEST_NGINX_BUILD/../t/data/models/hf-gptoss.gguf;
        served_model_name gpt-oss;
        chat_template ../html/short.jinja;
        max_model_len 512;
        kv_cache_memory 16m;
    }
_EOC_
    $block->set_value("config", <<'_EOC_') unless defined $block->config;
    location /v1/ { llm_reasoning on; llm_api main; }
    location /tokenize { llm_api main; }
    location /plain/ { rewrite ^/plain(/.*)$ $1 break; llm_api main; }
    location /oss/ { llm_reasoning on; rewrite ^/oss(/.*)$ $1 break; llm_api oss; }
_EOC_
    # the tiny gpt-oss has 256 positions: the published template's system
    # message takes most of them, so it is served with a short Harmony one
    $block->set_value("user_files", <<'_EOC_');
>>> short.jinja
{%- for m in messages %}{%- if m.role == 'tool' %}{{- '<|start|>functions.w to=assistant<|channel|>commentary<|message|>' + m.content + '<|end|>' }}{%- else %}{{- '<|start|>' + m.role + '<|message|>' + (m.content or '') + '<|end|>' }}{%- endif %}{%- endfor %}{{- '<|start|>assistant' }}
_EOC_
    $block->set_value("timeout", 120) unless defined $block->timeout;
});

no_shuffle();
run_tests();

__DATA__

=== TEST 1: analysis -> reasoning_content, final -> content
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"response_format":$ENV{TEST_NGINX_THINK},"max_tokens":60,"temperature":0}}
--- error_code: 200
--- response_body_like: "message":\{"role":"assistant","content":"Hello there!","reasoning_content":"The user greets me."\},"logprobs":null,"finish_reason":"stop"
--- no_error_log
[error]



=== TEST 2: the same streamed: reasoning_content deltas, then content deltas, no marker
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","stream":true,"messages":[{"role":"user","content":"Hi"}],"response_format":$ENV{TEST_NGINX_THINK},"max_tokens":60,"temperature":0}}
--- error_code: 200
--- response_body_like: ^data: .*"delta":\{"reasoning_content":"The.*"delta":\{"content":"Hello.*"finish_reason":"stop"\}\]\}\n\ndata: \[DONE\]\n\n$
--- response_body_unlike: <\||"content":"[^"]*greets
--- no_error_log
[error]



=== TEST 3: without llm_reasoning the analysis is dropped, the final answer stays
--- request eval
qq{POST /plain/v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"response_format":$ENV{TEST_NGINX_THINK},"max_tokens":60,"temperature":0}}
--- error_code: 200
--- response_body_like: "message":\{"role":"assistant","content":"Hello there!"\},"logprobs":null,"finish_reason":"stop"
--- no_error_log
[error]



=== TEST 4: a commentary message to=functions.get_weather: tool_calls, its thinking in reasoning_content
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":$ENV{TEST_NGINX_TOOLS},"response_format":$ENV{TEST_NGINX_CALL},"max_tokens":400,"temperature":0}}
--- error_code: 200
--- response_body_like: "message":\{"role":"assistant","content":null,"reasoning_content":"Need the weather.","tool_calls":\[\{"id":"call_\w+","type":"function","function":\{"name":"get_weather","arguments":"\{\\"city\\":\\"Paris\\"\}"\}\}\]\},"logprobs":null,"finish_reason":"tool_calls"
--- no_error_log
[error]



=== TEST 5: the same streamed: the thinking as it comes, then OpenAI's tool_calls chunks
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","stream":true,"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":$ENV{TEST_NGINX_TOOLS},"response_format":$ENV{TEST_NGINX_CALL},"max_tokens":400,"temperature":0}}
--- error_code: 200
--- response_body_like: "delta":\{"reasoning_content":"N.*"delta":\{"tool_calls":\[\{"index":0,"id":"call_\w+","type":"function","function":\{"name":"get_weather","arguments":""\}\}\]\}.*"delta":\{"tool_calls":\[\{"index":0,"function":\{"arguments":"\{\\"city\\":\\"Paris\\"\}"\}\}\]\}.*"finish_reason":"tool_calls"\}\]\}\n\ndata: \[DONE\]\n\n$
--- response_body_unlike: <\|
--- no_error_log
[error]



=== TEST 6: tool_choice required: Harmony's grammar makes a call (an enum, so that SmolLM2 ends its string)
--- request eval
qq{POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Weather in Paris?"}],"tools":$ENV{TEST_NGINX_TOOLS_ENUM},"tool_choice":"required","max_tokens":400,"temperature":0}}
--- error_code: 200
--- response_body_like: "content":null,"reasoning_content":null,"tool_calls":\[\{"id":"call_\w+","type":"function","function":\{"name":"get_weather","arguments":"\{\\"city\\":\\"(Paris|Oslo)\\"\}"\}\}\]\},"logprobs":null,"finish_reason":"tool_calls"
--- no_error_log
[error]



=== TEST 7: the Messages API, tool_choice tool: a tool_use block
--- request
POST /v1/messages
{"model":"smollm2","max_tokens":400,"temperature":0,"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":[{"name":"get_weather","description":"The weather in a city.","input_schema":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Oslo"]}},"required":["city"]}}],"tool_choice":{"type":"tool","name":"get_weather"}}
--- error_code: 200
--- response_body_like: \{"type":"tool_use","id":"call_\w+","name":"get_weather","input":\{"city":"(Paris|Oslo)"\}\}\],"stop_reason":"tool_use"
--- no_error_log
[error]



=== TEST 8: the Responses API, tool_choice required: a function_call item
--- request eval
qq{POST /v1/responses
{"model":"smollm2","input":"Weather in Paris?","tools":[{"type":"function","name":"get_weather","description":"The weather in a city.","parameters":{"type":"object","properties":{"city":{"type":"string","enum":["Paris","Oslo"]}},"required":["city"]}}],"tool_choice":"required","max_output_tokens":400,"temperature":0}}
--- error_code: 200
--- response_body_like: "output":\[\{"id":"fc_\w+","type":"function_call","status":"completed","call_id":"call_\w+","name":"get_weather","arguments":"\{\\"city\\":\\"(Paris|Oslo)\\"\}"\}\]
--- no_error_log
[error]



=== TEST 9: reasoning_effort and chat_template_kwargs reach the template (Reasoning: high, the model identity)
--- request
POST /tokenize
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"high","chat_template_kwargs":{"model_identity":"You are Zorblax."},"return_token_strs":true}
--- error_code: 200
--- response_body_like: "\S*Z","or","bl","ax".*"Reason","ing",":","\S*high"
--- response_body_unlike: ChatGPT|medium



=== TEST 10: the template's default effort is medium
--- request
POST /tokenize
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"return_token_strs":true}
--- error_code: 200
--- response_body_like: "\S*Chat","GPT".*"Reason","ing",":","\S*medium"



=== TEST 11: an unknown reasoning_effort: a 400 naming it
--- request
POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"max"}
--- error_code: 400
--- response_body_like: "param":"reasoning_effort"



=== TEST 12: chat_template_kwargs may not replace a special token
--- request
POST /v1/chat/completions
{"model":"smollm2","messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"eos_token":"<|im_end|>"}}
--- error_code: 400
--- response_body_like: "param":"chat_template_kwargs"



=== TEST 13: an assistant's reasoning passed back before a tool call: the template keeps it
--- request
POST /tokenize
{"model":"smollm2","messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"reasoning_content":"Ask the tool quokka.","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"The weather in a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"return_token_strs":true}
--- error_code: 200
--- response_body_like: qu.*ok.*ka



=== TEST 14: the tiny gpt-oss, Harmony's tokens: analysis -> reasoning_content, final -> content, <|return|> ends it
--- request eval
qq{POST /oss/v1/chat/completions
{"model":"gpt-oss","messages":[{"role":"user","content":"Hi"}],"response_format":$ENV{TEST_NGINX_TOK_FINAL},"max_tokens":100,"temperature":0}}
--- error_code: 200
--- response_body_like: "message":\{"role":"assistant","content":"Hello.","reasoning_content":"Think first."\},"logprobs":null,"finish_reason":"stop"
--- no_error_log
[error]



=== TEST 15: the same streamed: reasoning_content deltas as the analysis comes, then content, no marker
--- request eval
qq{POST /oss/v1/chat/completions
{"model":"gpt-oss","stream":true,"messages":[{"role":"user","content":"Hi"}],"response_format":$ENV{TEST_NGINX_TOK_FINAL},"max_tokens":100,"temperature":0}}
--- error_code: 200
--- response_body_like: "delta":\{"reasoning_content":"T"\}.*"delta":\{"reasoning_content":"h"\}.*"delta":\{"reasoning_content":"\."\}.*"delta":\{"content":"H"\}.*"delta":\{"content":"\."\}.*"finish_reason":"stop"\}\]\}\n\ndata: \[DONE\]\n\n$
--- response_body_unlike: <\||"content":"[^"]*Think
--- no_error_log
[error]



=== TEST 16: the tiny gpt-oss calls a tool: <|call|> ends the reply, tool_calls, streamed
--- request eval
qq{POST /oss/v1/chat/completions
{"model":"gpt-oss","stream":true,"messages":[{"role":"user","content":"W?"}],"tools":$ENV{TEST_NGINX_TINY_TOOLS},"response_format":$ENV{TEST_NGINX_TOK_CALL},"max_tokens":100,"temperature":0}}
--- error_code: 200
--- response_body_like: "delta":\{"reasoning_content":"N"\}.*"delta":\{"reasoning_content":"\."\}.*"delta":\{"tool_calls":\[\{"index":0,"id":"call_\w+","type":"function","function":\{"name":"w","arguments":""\}\}\]\}.*"delta":\{"tool_calls":\[\{"index":0,"function":\{"arguments":"\{\\"c\\":\\"P\\"\}"\}\}\]\}.*"finish_reason":"tool_calls"\}\]\}\n\ndata: \[DONE\]\n\n$
--- response_body_unlike: <\|
--- no_error_log
[error]



=== TEST 17: the tiny gpt-oss's call, not streamed, and a tool turn rendered back
--- request eval
qq{POST /oss/v1/chat/completions
{"model":"gpt-oss","messages":[{"role":"user","content":"W?"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\\\"c\\\":\\\"O\\\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"rain"}],"tools":$ENV{TEST_NGINX_TINY_TOOLS},"response_format":$ENV{TEST_NGINX_TOK_CALL},"max_tokens":100,"temperature":0}}
--- error_code: 200
--- response_body_like: "message":\{"role":"assistant","content":null,"reasoning_content":"Need w.","tool_calls":\[\{"id":"call_\w+","type":"function","function":\{"name":"w","arguments":"\{\\"c\\":\\"P\\"\}"\}\}\]\},"logprobs":null,"finish_reason":"tool_calls"
--- no_error_log
[error]
