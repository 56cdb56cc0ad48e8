#!/usr/bin/env python3
"""The official `openai` Python SDK's Responses API against ngx_llm (issue
26): responses.create, responses.stream, responses.parse, a function-call
round trip with function_call_output, store:false with the history resent
(cached tokens on the next turn), a Codex-shaped conversation of three
turns (its items, a custom tool, a namespace, a hosted tool dropped,
streaming, store:false), errors as the SDK's exceptions, and a tiny
Qwen-template model; stored responses (llm_responses_zone): retrieve,
previous_response_id on new connections to two workers and after a
reload, delete, the oldest evicted from a small zone. Run by
t/044-responses-sdk.t against a private nginx with two workers: /v1/
SmolLM2 with a zone, /small/v1/ the same with a 32k zone, /strict/v1/ with
llm_responses_strict_tools on and no zone, /qwen/v1/ the tiny Qwen2.

Prints TAP. Greedy expectations are t/037-responses.t's.

Environment: NGX_LLM_BASE=http://127.0.0.1:PORT (required).
"""
import json
import os
import signal
import sys
import time
import traceback

import openai
from pydantic import BaseModel

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


def client(path="/v1"):
    return openai.OpenAI(base_url=BASE + path, api_key="sk-test",
                         max_retries=0, timeout=120)


def section(name, fn):
    try:
        fn()
    except Exception:
        ok(False, f"{name}: no unexpected exception", traceback.format_exc())


WEATHER = {"type": "function", "name": "get_weather",
           "description": "Weather of a city",
           "parameters": {"type": "object",
                          "properties": {"city": {"type": "string"}},
                          "required": ["city"],
                          "additionalProperties": False}}


def create():
    r = client().responses.create(model="smollm2", input="Hi",
                                  max_output_tokens=2, temperature=0)
    is_(r.object, "response", "create: object")
    ok(r.id.startswith("resp_"), f"create: id {r.id}")
    is_(r.output_text, "Hello!", "create: output_text (greedy)")
    is_(r.status, "incomplete", "create: cut by max_output_tokens")
    is_(r.incomplete_details.reason, "max_output_tokens",
        "create: incomplete_details.reason")
    is_(r.output[0].type, "message", "create: a message item")
    is_(r.output[0].content[0].type, "output_text", "create: its part")
    is_((r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens),
        (31, 2, 33), "create: usage")
    is_(r.usage.output_tokens_details.reasoning_tokens, 0,
        "create: reasoning_tokens")
    ok(r.usage.input_tokens_details.cached_tokens >= 0,
       "create: usage.input_tokens_details.cached_tokens")

    r = client().responses.create(
        model="smollm2", instructions="You are brief.",
        input=[{"role": "user",
                "content": [{"type": "input_text", "text": "Hi"}]}],
        max_output_tokens=40, temperature=0, metadata={"k": "v"},
        user="u1", prompt_cache_key="pk", store=False)
    is_(r.status, "completed", "create with items: completed")
    is_(r.instructions, "You are brief.", "create: instructions echoed")
    is_(r.metadata, {"k": "v"}, "create: metadata echoed")
    ok(len(r.output_text) > 0, "create with items: some text")


def stream():
    # cut short: response.incomplete ends it (the SDK's helper then has no
    # final response: get_final_response() wants response.completed)
    with client().responses.stream(model="smollm2", input="Hi",
                                   max_output_tokens=2,
                                   temperature=0) as s:
        events = list(s)
    types = [e.type for e in events]
    is_(types[:4], ["response.created", "response.in_progress",
                    "response.output_item.added",
                    "response.content_part.added"],
        "stream: the opening events")
    is_(types[-4:], ["response.output_text.done",
                     "response.content_part.done",
                     "response.output_item.done", "response.incomplete"],
        "stream: the closing events")
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    is_("".join(deltas), "Hello!", "stream: the deltas make the text")
    is_([e.sequence_number for e in events], list(range(len(events))),
        "stream: sequence_number counts from 0")
    is_(events[-1].response.usage.output_tokens, 2,
        "stream: response.incomplete's usage")

    with client().responses.stream(model="smollm2", input="Hi",
                                   max_output_tokens=60,
                                   temperature=0) as s:
        events = list(s)
        final = s.get_final_response()
    is_(events[-1].type, "response.completed", "stream: completed")
    is_(final.output_text,
        "".join(e.delta for e in events
                if e.type == "response.output_text.delta"),
        "stream: get_final_response() has the deltas' text")

    # the raw event objects of create(stream=True)
    evs = list(client().responses.create(model="smollm2", input="Hi",
                                         max_output_tokens=40, temperature=0,
                                         stream=True))
    is_(evs[-1].type, "response.completed", "create(stream=True): completed")
    is_(evs[-1].response.output[0].content[0].text,
        "".join(e.delta for e in evs
                if e.type == "response.output_text.delta"),
        "create(stream=True): final text = deltas")


class Answer(BaseModel):
    ok: bool


def parse():
    r = client().responses.parse(model="smollm2",
                                 input="Is the sky blue? Answer in JSON.",
                                 text_format=Answer, max_output_tokens=40,
                                 temperature=0)
    ok(isinstance(r.output_parsed, Answer),
       "parse: output_parsed is the pydantic model", r.output_text)


def function_round_trip():
    c = client()
    history = [{"role": "user", "content": "What is the weather in Paris?"}]
    r = c.responses.create(model="smollm2", input=history, tools=[WEATHER],
                           tool_choice="required", parallel_tool_calls=False,
                           max_output_tokens=60, temperature=0)
    calls = [o for o in r.output if o.type == "function_call"]
    is_(len(calls), 1, "round trip: one function_call item")
    call = calls[0]
    is_(call.name, "get_weather", "round trip: its name")
    ok(call.call_id.startswith("call_"), "round trip: its call_id")
    ok(isinstance(json.loads(call.arguments).get("city"), str),
       "round trip: arguments as the schema says", call.arguments)
    # the SDK's own output items sent back, then the call's output
    history += [o.model_dump(exclude_none=True) for o in r.output]
    history.append({"type": "function_call_output", "call_id": call.call_id,
                    "output": "22 C, sunny"})
    r2 = c.responses.create(model="smollm2", input=history, tools=[WEATHER],
                            max_output_tokens=30, temperature=0)
    ok(r2.status in ("completed", "incomplete") and len(r2.output) >= 1,
       "round trip: function_call_output answered")
    ok(r2.usage.input_tokens > r.usage.input_tokens,
       "round trip: the turn's prompt holds the call and its output")


def history_resent():
    c = client()
    history = [{"role": "user", "content": "Name three colours."}]
    r1 = c.responses.create(model="smollm2", input=history, store=False,
                            max_output_tokens=30, temperature=0)
    history += [o.model_dump(exclude_none=True) for o in r1.output]
    history.append({"role": "user", "content": "And three animals?"})
    r2 = c.responses.create(model="smollm2", input=history, store=False,
                            max_output_tokens=10, temperature=0)
    cached = r2.usage.input_tokens_details.cached_tokens
    ok(cached > 0, f"store:false history resent: turn 2 cached {cached} of "
       f"{r2.usage.input_tokens} tokens")


CODEX_INSTRUCTIONS = ("You are Codex, a coding agent. Use the tools to read "
                      "and change files. Keep answers short.")
CODEX_TOOLS = [
    {"type": "function", "name": "exec_command",
     "description": "Run a shell command.",
     "strict": False,
     "parameters": {"type": "object",
                    "properties": {"cmd": {"type": "string"}},
                    "required": ["cmd"], "additionalProperties": False}},
    {"type": "custom", "name": "apply_patch",
     "description": "Use the apply_patch tool to edit files.",
     "format": {"type": "grammar", "syntax": "lark",
                "definition": "start: begin_patch hunk+ end_patch\n"
                              "begin_patch: \"*** Begin Patch\" LF\n"
                              "end_patch: \"*** End Patch\" LF?"}},
    {"type": "namespace", "name": "mcp__fs__",
     "description": "Files of the workspace.",
     "tools": [{"type": "function", "name": "read_file",
                "description": "Read a file.", "strict": False,
                "parameters": {"type": "object",
                               "properties": {"path": {"type": "string"}},
                               "required": ["path"],
                               "additionalProperties": False}}]},
    {"type": "web_search", "external_web_access": False},
]


def codex_turn(c, items, tool_choice):
    """one turn as Codex sends it: streamed, store false, everything again"""
    raw = c.responses.with_raw_response.create(
        model="smollm2", instructions=CODEX_INSTRUCTIONS, input=items,
        tools=CODEX_TOOLS, tool_choice=tool_choice,
        parallel_tool_calls=False, reasoning={"effort": "medium"},
        store=False, stream=True, include=["reasoning.encrypted_content"],
        prompt_cache_key="codex-session-1", max_output_tokens=80,
        temperature=0)
    dropped = raw.headers.get("x-llm-dropped-tools")
    events = list(raw.parse())
    done = [e for e in events if e.type.startswith("response.")
            and e.type.endswith(("completed", "incomplete"))]
    return dropped, events, done[-1].response if done else None


def replayed(output, turn):
    """a turn's items as the next turn sends them back, their ids fixed:
    the ids are random and the template renders call ids, so ids of
    this run would make each run's prompt, and its greedy reply, differ"""
    items = [o.model_dump(exclude_none=True) for o in output]
    for item in items:
        if "call_id" in item:
            item["call_id"] = "call_" + turn
        if "id" in item:
            item["id"] = item["id"].split("_")[0] + "_" + turn
    return items


def codex():
    c = client()
    items = [{"type": "message", "role": "user",
              "content": [{"type": "input_text",
                           "text": "Add a line hello to a.txt"}]}]

    # turn 1: the custom tool (apply_patch)
    dropped, events, r = codex_turn(c, items,
                                    {"type": "custom", "name": "apply_patch"})
    is_(dropped, "web_search", "codex turn 1: web_search dropped, named")
    ok(r is not None, "codex turn 1: a final response event")
    call = r.output[-1]
    is_(call.type, "custom_tool_call", "codex turn 1: a custom_tool_call")
    is_(getattr(call, "name", None), "apply_patch", "codex turn 1: its name")
    ok(any(e.type == "response.custom_tool_call_input.done" for e in events),
       "codex turn 1: custom_tool_call_input.done streamed")
    items += replayed(r.output, "turn1")
    items.append({"type": "custom_tool_call_output", "call_id": "call_turn1",
                  "output": "Done!"})
    items.append({"type": "reasoning", "id": "rs_x", "summary": [],
                  "encrypted_content": "gAAAAABopaque"})

    # turn 2: the namespace's tool
    _, events, r = codex_turn(c, items, {"type": "function",
                                         "namespace": "mcp__fs__",
                                         "name": "read_file"})
    call = r.output[-1]
    is_((call.type, getattr(call, "name", None),
         getattr(call, "namespace", None)),
        ("function_call", "read_file", "mcp__fs__"),
        "codex turn 2: a namespace's call with its namespace")
    cached2 = r.usage.input_tokens_details.cached_tokens
    ok(cached2 > 0, f"codex turn 2: cached {cached2} of "
       f"{r.usage.input_tokens} tokens")
    items += replayed(r.output, "turn2")
    items.append({"type": "function_call_output", "call_id": "call_turn2",
                  "output": "hello\n"})
    items.append({"type": "message", "role": "user",
                  "content": [{"type": "input_text",
                               "text": "Thanks. Summarise."}]})

    # turn 3: auto
    _, events, r = codex_turn(c, items, "auto")
    ok(r is not None and r.status in ("completed", "incomplete"),
       "codex turn 3: answered")
    cached3 = r.usage.input_tokens_details.cached_tokens
    ok(cached3 > 0, f"codex turn 3: cached {cached3} of "
       f"{r.usage.input_tokens} tokens (turn 2: {cached2})")


def errors():
    c = client()
    try:
        client("/strict/v1").responses.create(
            model="smollm2", input="Hi", previous_response_id="resp_123")
        ok(False, "previous_response_id without a zone: BadRequestError")
    except openai.BadRequestError as e:
        ok("llm_responses_zone" in e.message,
           "previous_response_id without a zone: BadRequestError naming "
           "the directive", e.message)
    try:
        client("/strict/v1").responses.create(
            model="smollm2", input="Hi",
            tools=[{"type": "web_search"}])
        ok(False, "strict tools: BadRequestError")
    except openai.BadRequestError as e:
        is_(e.body.get("param"), "tools[0].type",
            "strict tools: BadRequestError naming the tool")
    try:
        c.responses.create(model="nope", input="Hi")
        ok(False, "another model: NotFoundError")
    except openai.NotFoundError:
        ok(True, "another model: NotFoundError")


def qwen():
    c = client("/qwen/v1")
    r = c.responses.create(model="qwen2", input="Hi", max_output_tokens=3,
                           temperature=0)
    is_((r.status, r.usage.output_tokens), ("incomplete", 3),
        "qwen template: a response")
    # its tools' system prompt alone is over its 256 tokens of context:
    # the template's tool path is t/027-tools.t's on chat, the same code
    evs = list(c.responses.create(model="qwen2", input="Hi",
                                  max_output_tokens=3, temperature=0,
                                  stream=True))
    is_(evs[-1].type, "response.incomplete", "qwen template: a stream")


def workers():
    master = int(os.environ["NGX_LLM_MASTER_PID"])
    with open(f"/proc/{master}/task/{master}/children") as f:
        return set(f.read().split())


def stored():
    r1 = client().responses.create(model="smollm2",
                                   input="Name three colours.",
                                   max_output_tokens=30, temperature=0)
    is_(r1.store, True, "store: the response says it is stored")
    got = client().responses.retrieve(r1.id)
    is_((got.id, got.output_text), (r1.id, r1.output_text),
        "store: retrieve() gives it back")

    # new connections: nginx's two workers take them as they come
    r2 = client().responses.create(model="smollm2",
                                   previous_response_id=r1.id,
                                   input="And three animals?",
                                   max_output_tokens=20, temperature=0)
    is_(r2.previous_response_id, r1.id, "continue: previous_response_id")
    ok(r2.usage.input_tokens > r1.usage.input_tokens
       + r1.usage.output_tokens,
       "continue: the stored conversation comes before the input")
    c2 = r2.usage.input_tokens_details.cached_tokens
    ok(c2 > 0, f"continue: cached {c2} of {r2.usage.input_tokens} tokens")
    ok(all(client().responses.retrieve(r2.id).id == r2.id
           for _ in range(6)), "store: six fresh connections retrieve it")

    # a reload: new workers, the zone stays
    before = workers()
    os.kill(int(os.environ["NGX_LLM_MASTER_PID"]), signal.SIGHUP)
    for _ in range(100):
        time.sleep(0.1)
        now = workers()
        if now and not (now & before):
            break
    ok(now and not (now & before), "reload: every worker is new")
    r3 = client().responses.create(model="smollm2",
                                   previous_response_id=r2.id,
                                   input="And three fruits?",
                                   max_output_tokens=10, temperature=0)
    c3 = r3.usage.input_tokens_details.cached_tokens
    ok(r3.usage.input_tokens > r2.usage.input_tokens and c3 > 0,
       f"after a reload: continued, cached {c3} of "
       f"{r3.usage.input_tokens} tokens")

    raw = client().responses.with_raw_response.delete(r1.id)
    is_((raw.status_code, json.loads(raw.text)),
        (200, {"object": "response", "deleted": True, "id": r1.id}),
        "delete: 200, deleted")
    try:
        client().responses.retrieve(r1.id)
        ok(False, "delete: retrieve() then fails")
    except openai.NotFoundError:
        ok(True, "delete: retrieve() then fails with NotFoundError")
    try:
        client().responses.create(model="smollm2", input="x",
                                  previous_response_id=r1.id)
        ok(False, "a deleted previous_response_id: NotFoundError")
    except openai.NotFoundError as e:
        is_(e.body.get("code"), "previous_response_not_found",
            "a deleted previous_response_id: previous_response_not_found")

    # bounded: a small zone drops its oldest
    ids = []
    for i in range(40):
        r = client("/small/v1").responses.create(
            model="smollm2", input=f"{i} " + "word " * 150,
            max_output_tokens=1, temperature=0)
        ids.append(r.id)
    kept = []
    for rid in ids:
        try:
            client("/small/v1").responses.retrieve(rid)
            kept.append(rid)
        except openai.NotFoundError:
            pass
    ok(0 < len(kept) < len(ids) and ids[-1] in kept and ids[0] not in kept,
       f"small zone: the newest {len(kept)} of {len(ids)} kept")


for name, fn in [("create", create), ("stream", stream), ("parse", parse),
                 ("function round trip", function_round_trip),
                 ("history resent", history_resent), ("codex", codex),
                 ("errors", errors), ("qwen", qwen), ("stored", stored)]:
    section(name, fn)

print(f"1..{n_tests}")
sys.exit(1 if n_failed else 0)
