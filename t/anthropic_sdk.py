#!/usr/bin/env python3
"""The official `anthropic` Python SDK against ngx_llm's Messages API
(POST /v1/messages, /v1/messages/count_tokens). Run by t/043-anthropic-sdk.t
against a private nginx serving SmolLM2 at /v1/ (and /think/v1/, a template
that opens <think> under llm_reasoning on).

Prints TAP. Greedy expectations are the ones t/034-messages.t checks on
the wire, so a difference here is the SDK's view of the same bytes.

Environment: NGX_LLM_BASE=http://127.0.0.1:PORT (required).
"""
import os
import sys
import traceback

import anthropic

BASE = os.environ["NGX_LLM_BASE"]

n_tests = 0
n_failed = 0


def ok(cond, name, diag=None):
    global n_tests, n_failed
    n_tests += 1
    print(("ok" if cond else "not ok") + f" {n_tests} - {name}")
    if not cond:
        n_failed += 1
        if diag is not None:
            for line in str(diag).splitlines():
                print(f"#   {line}")
    sys.stdout.flush()
    return cond


def is_(got, want, name):
    return ok(got == want, name, f"got:      {got!r}\nexpected: {want!r}")


def client(path=""):
    # no retries: each status must reach the caller exactly as sent
    return anthropic.Anthropic(base_url=BASE + path, api_key="sk-ant-test",
                               max_retries=0, timeout=60)


def section(name, fn):
    try:
        fn()
    except Exception:
        ok(False, f"{name}: no unexpected exception", traceback.format_exc())


HI = [{"role": "user", "content": "Hi"}]

# greedy: the SDK (2.x) has no temperature argument any more; the server
# still takes the field, so it goes as an extra body field
T0 = {"temperature": 0}

WEATHER = {
    "name": "get_weather",
    "description": "Get the weather of a city",
    "input_schema": {"type": "object",
                     "properties": {"city": {"type": "string"}},
                     "required": ["city"]},
}


def create():
    m = client().messages.create(model="smollm2", max_tokens=2,
                                 extra_body=T0, messages=HI)
    is_(m.type, "message", "create: a message")
    is_(m.role, "assistant", "its role")
    ok(m.id.startswith("msg_"), "its id is msg_...", m.id)
    is_([b.type for b in m.content], ["text"], "one text block")
    is_(m.content[0].text, "Hello!", "the greedy text (t/034's)")
    is_(m.stop_reason, "max_tokens", "stop_reason max_tokens")
    is_(m.stop_sequence, None, "stop_sequence None")
    is_(m.usage.output_tokens, 2, "usage.output_tokens")
    is_(m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0), 31,
        "usage: input + cache read = the prompt's 31 tokens")


def stop_sequence():
    m = client().messages.create(model="smollm2", max_tokens=8,
                                 extra_body=T0, stop_sequences=["!"],
                                 messages=HI)
    is_(m.stop_reason, "stop_sequence", "stop_sequences: stop_reason")
    is_(m.stop_sequence, "!", "the sequence that matched")
    is_(m.content[0].text, "Hello", "the text before it")


def stream():
    kinds = []
    with client().messages.stream(model="smollm2", max_tokens=2,
                                  extra_body=T0, messages=HI) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    is_(text, "Hello!", "stream: text_stream")
    is_(final.content[0].text, "Hello!", "get_final_message() text")
    is_(final.stop_reason, "max_tokens", "its stop_reason")
    is_(final.usage.output_tokens, 2, "its output_tokens")

    raw = client().messages.create(model="smollm2", max_tokens=2,
                                   extra_body=T0, messages=HI, stream=True)
    for ev in raw:
        kinds.append(ev.type)
    is_(kinds[:3], ["message_start", "content_block_start",
                    "content_block_delta"],
        "stream=True: message_start, content_block_start, deltas "
        "(the SDK drops ping)")
    is_(kinds[-3:], ["content_block_stop", "message_delta", "message_stop"],
        "... content_block_stop, message_delta, message_stop")


def count_tokens():
    c = client().messages.count_tokens(model="smollm2", messages=HI)
    is_(c.input_tokens, 31, "count_tokens: the chat prompt's 31 tokens")
    c = client().messages.count_tokens(model="smollm2", messages=HI,
                                       tools=[WEATHER])
    ok(c.input_tokens > 31, "count_tokens with tools counts their "
       "description", c.input_tokens)


def tools_round_trip():
    c = client()
    m = c.messages.create(model="smollm2", max_tokens=80, extra_body=T0,
                          tools=[WEATHER],
                          tool_choice={"type": "any",
                                       "disable_parallel_tool_use": True},
                          messages=[{"role": "user",
                                     "content": "Weather in Paris?"}])
    is_(m.stop_reason, "tool_use", "tool_choice any: stop_reason tool_use")
    uses = [b for b in m.content if b.type == "tool_use"]
    is_(len(uses), 1, "one tool_use block")
    is_(uses[0].name, "get_weather", "its name")
    ok(isinstance(uses[0].input, dict) and "city" in uses[0].input,
       "its input: an object with the required field", uses[0].input)

    m2 = c.messages.create(
        model="smollm2", max_tokens=4, extra_body=T0, tools=[WEATHER],
        messages=[{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": m.content},
                  {"role": "user", "content": [
                      {"type": "tool_result", "tool_use_id": uses[0].id,
                       "content": "18 C, sunny"}]}])
    is_(m2.type, "message", "the tool_result sent back: a message")

    with c.messages.stream(model="smollm2", max_tokens=80, extra_body=T0,
                           tools=[WEATHER],
                           tool_choice={"type": "tool",
                                        "name": "get_weather",
                                        "disable_parallel_tool_use": True},
                           messages=[{"role": "user",
                                      "content": "Weather in Paris?"}]) as s:
        final = s.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    ok(len(uses) == 1 and uses[0].name == "get_weather"
       and "city" in uses[0].input,
       "stream, tool_choice tool: the SDK rebuilt the input from "
       "input_json_delta", final.content)
    is_(final.stop_reason, "tool_use", "its stop_reason")


def thinking():
    m = client("/think").messages.create(model="smollm2", max_tokens=3,
                                         extra_body=T0, messages=HI)
    is_(m.content[0].type, "thinking", "llm_reasoning: a thinking block")
    ok(len(m.content[0].thinking) > 0, "with the thinking text")
    with client("/think").messages.stream(model="smollm2", max_tokens=3,
                                          extra_body=T0,
                                          messages=HI) as s:
        final = s.get_final_message()
    is_(final.content[0].thinking, m.content[0].thinking,
        "streamed: the same thinking (thinking_delta)")


def claude_code():
    """Shaped as Claude Code sends (trimmed): the beta client (?beta=true,
    anthropic-beta), system blocks with cache_control, its tools,
    metadata.user_id, streaming."""
    tools = [
        {"name": "Bash", "description": "Executes a bash command.",
         "input_schema": {"type": "object", "properties": {
             "command": {"type": "string"},
             "timeout": {"type": "number"}},
             "required": ["command"], "additionalProperties": False,
             "$schema": "http://json-schema.org/draft-07/schema#"}},
        {"name": "Read", "description": "Reads a file.",
         "input_schema": {"type": "object", "properties": {
             "file_path": {"type": "string"}},
             "required": ["file_path"]},
         "cache_control": {"type": "ephemeral"}},
    ]
    system = [
        {"type": "text", "text": "You are Claude Code, Anthropic's "
         "official CLI for Claude."},
        {"type": "text", "text": "You are an interactive CLI tool.",
         "cache_control": {"type": "ephemeral"}},
    ]
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>trimmed"
         "</system-reminder>"},
        {"type": "text", "text": "Hi", "cache_control":
         {"type": "ephemeral"}}]}]
    with client().beta.messages.stream(
            model="smollm2", max_tokens=8, extra_body=T0, system=system,
            tools=tools, messages=messages,
            metadata={"user_id": "user_abc_account__session_1"},
            betas=["claude-code-20250219",
                   "interleaved-thinking-2025-05-14"]) as s:
        final = s.get_final_message()
    is_(final.type, "message", "Claude Code's request (beta, system "
        "blocks, tools, metadata): a message")
    ok(final.stop_reason in ("end_turn", "max_tokens", "tool_use"),
       "with a stop_reason", final.stop_reason)
    c = client().beta.messages.count_tokens(
        model="smollm2", system=system, tools=tools, messages=messages,
        betas=["claude-code-20250219"])
    ok(c.input_tokens > 31, "its count_tokens (beta)", c.input_tokens)


def errors():
    try:
        client().messages.create(model="claude-opus-4", max_tokens=4,
                                 messages=HI)
        ok(False, "unknown model: NotFoundError")
    except anthropic.NotFoundError as e:
        is_(e.status_code, 404, "unknown model: NotFoundError, 404")
        is_(e.body["type"], "error", "body type error")
        is_(e.body["error"]["type"], "not_found_error", "error type")
    try:
        client().messages.create(model="smollm2", max_tokens=4,
                                 extra_body={"temperature": 1.5}, messages=HI)
        ok(False, "temperature 1.5: BadRequestError")
    except anthropic.BadRequestError as e:
        is_(e.status_code, 400, "temperature 1.5: BadRequestError, 400")
        is_(e.body["error"]["type"], "invalid_request_error", "error type")
        ok("temperature" in e.message, "the message names the field",
           e.message)


def main():
    print(f"# anthropic SDK {anthropic.__version__}")
    for name, fn in [("create", create), ("stop_sequence", stop_sequence),
                     ("stream", stream), ("count_tokens", count_tokens),
                     ("tools", tools_round_trip), ("thinking", thinking),
                     ("claude code", claude_code), ("errors", errors)]:
        section(name, fn)
    print(f"1..{n_tests}")
    return 1 if n_failed else 0


if __name__ == "__main__":
    sys.exit(main())
