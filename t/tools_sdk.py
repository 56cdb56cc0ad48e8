#!/usr/bin/env python3
"""Constrained decoding clients can rely on (issue 23), through the official
`openai` SDK: run by t/042-tools-sdk.t against a private nginx serving
SmolLM2 at /v1/ (flexible JSON, llm_max_tool_calls 8), /compact/v1/
(llm_json_whitespace compact) and /two/v1/ (llm_max_tool_calls 2).

  - a named tool_choice, temperature 0 and 1, 16 seeds each: exactly one
    call of that function, its arguments valid against its parameters
    (additionalProperties closed, docs/api.md);
  - tool_choice "required", temperature 0.8, 16 seeds: 1..8 valid calls,
    or finish "length" with the finished ones; never the envelope as
    content; llm_max_tool_calls 2 caps the calls at 2;
  - "required" cut at max_tokens 40: finish "length", the finished calls
    kept and valid, no content; streamed, the same (no half call);
    counted in ngx_llm_tool_calls_dropped_total;
  - compact JSON has no blank outside strings;
  - a schema keyword the grammar relaxes is named in x-llm-schema-relaxed
    (keyword@pointer) and counted; with strict it is a 400 naming both.

Prints TAP. Environment: NGX_LLM_BASE=http://127.0.0.1:PORT (required).
"""
import json
import os
import re
import sys
import traceback
import urllib.request

import jsonschema
import openai

BASE = os.environ["NGX_LLM_BASE"]

n_tests = 0


def ok(cond, name, diag=None):
    global n_tests
    n_tests += 1
    print(("ok" if cond else "not ok") + f" {n_tests} - {name}")
    if not cond and diag is not None:
        for line in str(diag).splitlines():
            print(f"#   {line}")
    sys.stdout.flush()
    return cond


def client(prefix="/v1"):
    return openai.OpenAI(base_url=BASE + prefix, api_key="sk-test",
                         max_retries=0, timeout=300)


def section(name, fn):
    try:
        fn()
    except Exception:
        ok(False, f"{name}: no unexpected exception", traceback.format_exc())


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city", "unit"]}}},
    {"type": "function", "function": {
        "name": "book_table", "description": "Book a restaurant table",
        "parameters": {"type": "object", "properties": {
            "people": {"type": "integer"}, "time": {"type": "string"}},
            "required": ["people", "time"]}}},
]
PARAMS = {t["function"]["name"]:
          dict(t["function"]["parameters"], additionalProperties=False)
          for t in TOOLS}
NAMED = {"type": "function", "function": {"name": "book_table"}}
SEEDS = range(16)


def call_errors(calls, only=None):
    """why the calls are not valid calls of TOOLS, or [] when they are"""
    why = []
    for c in calls or []:
        name = c.function.name
        if name not in PARAMS or (only and name != only):
            why.append(f"unexpected function {name}")
            continue
        try:
            jsonschema.validate(json.loads(c.function.arguments),
                                PARAMS[name])
        except Exception as e:      # noqa: BLE001 (any failure is one)
            why.append(f"{name} {c.function.arguments}: {e}")
    return why


def envelope(content):
    return content is not None and "tool_calls" in content


def metric(name):
    with urllib.request.urlopen(BASE + "/metrics", timeout=30) as r:
        text = r.read().decode()
    m = re.search(r"^" + name + r"\{[^}]*\} (\d+)$", text, re.M)
    return int(m.group(1)) if m else None


def named():
    c = client()
    for temp in (0, 1.0):
        bad = []
        for s in SEEDS:
            r = c.chat.completions.create(
                model="smollm2", temperature=temp, seed=s, max_tokens=256,
                messages=[{"role": "user",
                           "content": "Table for four at 19:30 please"}],
                tools=TOOLS, tool_choice=NAMED)
            ch = r.choices[0]
            calls = ch.message.tool_calls or []
            why = call_errors(calls, "book_table")
            if len(calls) != 1 or why or ch.finish_reason != "tool_calls" \
                    or ch.message.content:
                bad.append(f"seed {s}: {len(calls)} calls, finish "
                           f"{ch.finish_reason}, content "
                           f"{ch.message.content!r} {why}")
        ok(not bad, f"named book_table, temperature {temp}, 16 seeds: one "
           "valid call each, finish tool_calls", "\n".join(bad))


def required():
    c = client()
    bad, counts = [], []
    for s in SEEDS:
        r = c.chat.completions.create(
            model="smollm2", temperature=0.8, seed=s, max_tokens=256,
            messages=[{"role": "user",
                       "content": "What's the weather in Paris?"}],
            tools=TOOLS, tool_choice="required")
        ch = r.choices[0]
        calls = ch.message.tool_calls or []
        counts.append(len(calls))
        why = call_errors(calls)
        good = (not why and not envelope(ch.message.content)
                and ((1 <= len(calls) <= 8
                      and ch.finish_reason == "tool_calls")
                     or ch.finish_reason == "length"))
        if not good:
            bad.append(f"seed {s}: {len(calls)} calls, finish "
                       f"{ch.finish_reason}, content {ch.message.content!r} "
                       f"{why}")
    print(f"# required t=0.8 calls per reply: {counts}")
    ok(not bad, "required, temperature 0.8, 16 seeds: 1..8 valid calls, or "
       "length with the finished ones; no envelope as content",
       "\n".join(bad))

    c2 = client("/two/v1")
    most = 0
    for s in range(8):
        r = c2.chat.completions.create(
            model="smollm2", temperature=0.8, seed=s, max_tokens=256,
            messages=[{"role": "user",
                       "content": "What's the weather in Paris?"}],
            tools=TOOLS, tool_choice="required")
        most = max(most, len(r.choices[0].message.tool_calls or []))
    ok(1 <= most <= 2, f"llm_max_tool_calls 2: at most 2 calls ({most})")

    bad = []
    for s in range(8):
        r = c.chat.completions.create(
            model="smollm2", temperature=0.8, seed=s, max_tokens=256,
            messages=[{"role": "user",
                       "content": "What's the weather in Paris?"}],
            tools=TOOLS, tool_choice="required", parallel_tool_calls=False)
        ch = r.choices[0]
        if len(ch.message.tool_calls or []) != 1 \
                or ch.finish_reason != "tool_calls":
            bad.append(f"seed {s}: {ch.message.tool_calls} "
                       f"{ch.finish_reason}")
    ok(not bad, "required, parallel_tool_calls false, 8 seeds: one call",
       "\n".join(bad))


def cut():
    c = client()
    before = metric("ngx_llm_tool_calls_dropped_total")
    msg = [{"role": "user",
            "content": "What's the weather in Paris and in Rome?"}]
    bad, kept, lengths = [], 0, 0
    for s in SEEDS:
        r = c.chat.completions.create(
            model="smollm2", temperature=0.8, seed=s, max_tokens=40,
            messages=msg, tools=TOOLS, tool_choice="required")
        ch = r.choices[0]
        calls = ch.message.tool_calls or []
        why = call_errors(calls)
        lengths += ch.finish_reason == "length"
        kept += bool(calls) and ch.finish_reason == "length"
        if why or ch.message.content:
            bad.append(f"seed {s}: finish {ch.finish_reason}, content "
                       f"{ch.message.content!r} {why}")
    ok(not bad, "required cut at max_tokens 40, 16 seeds: the kept calls "
       "valid, no content", "\n".join(bad))
    ok(lengths >= 8 and kept >= 1, f"cut replies say length ({lengths}/16) "
       f"and some keep their finished calls ({kept})")
    after = metric("ngx_llm_tool_calls_dropped_total")
    ok(before is not None and after is not None
       and 1 <= after - before <= lengths,
       f"ngx_llm_tool_calls_dropped_total counted ({before} -> {after}, "
       f"{lengths} cut)")

    # streamed: the same request, the same calls, each call whole
    for s in (1, 4):
        r = c.chat.completions.create(
            model="smollm2", temperature=0.8, seed=s, max_tokens=40,
            messages=msg, tools=TOOLS, tool_choice="required")
        want = [(t.function.name, t.function.arguments)
                for t in r.choices[0].message.tool_calls or []]
        got, content, finish = {}, "", None
        for ev in c.chat.completions.create(
                model="smollm2", temperature=0.8, seed=s, max_tokens=40,
                messages=msg, tools=TOOLS, tool_choice="required",
                stream=True):
            if not ev.choices:
                continue
            d = ev.choices[0].delta
            content += d.content or ""
            finish = ev.choices[0].finish_reason or finish
            for t in d.tool_calls or []:
                g = got.setdefault(t.index, ["", ""])
                g[0] += (t.function.name or "") if t.function else ""
                g[1] += (t.function.arguments or "") if t.function else ""
        streamed = [tuple(got[i]) for i in sorted(got)]
        whole = all(json.loads(a) is not None for _, a in streamed)
        ok(streamed == want and not content and finish == r.choices[0]
           .finish_reason and whole,
           f"seed {s} streamed: the same {len(want)} whole call(s), "
           f"finish {finish}, no content",
           f"stream {streamed} {finish} {content!r}\nwhole {want}")


def compact():
    schema = {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["name", "age", "tags"], "additionalProperties": False}
    bad, stops = [], 0
    for s in range(4):
        r = client("/compact/v1").chat.completions.create(
            model="smollm2", temperature=0.8, seed=s, max_tokens=200,
            messages=[{"role": "user", "content": "Make up a person."}],
            response_format={"type": "json_schema", "json_schema": {
                "name": "person", "schema": schema}})
        text = r.choices[0].message.content
        stops += r.choices[0].finish_reason == "stop"
        # strings, and one max_tokens cut open, hold any character
        outside = re.sub(r'"(\\.|[^"\\])*("|\\?$)', '""', text)
        if re.search(r"\s", outside):
            bad.append(f"seed {s}: {text!r}")
    ok(not bad and stops >= 1, "llm_json_whitespace compact: no blank "
       f"outside strings ({stops} of 4 replies whole)", "\n".join(bad))


def relaxed():
    schema = {"type": "object", "properties": {
        "site": {"type": "string", "format": "iri-reference"},
        "n": {"type": "integer"}},
        "required": ["site", "n"], "additionalProperties": False}
    before = metric("ngx_llm_schema_relaxed_total")
    raw = client().chat.completions.with_raw_response.create(
        model="smollm2", temperature=0, max_tokens=60,
        messages=[{"role": "user", "content": "Give a web site."}],
        response_format={"type": "json_schema", "json_schema": {
            "name": "site", "schema": schema}})
    ok(raw.headers.get("x-llm-schema-relaxed")
       == "iri-reference-format@/properties/site",
       "a relaxed schema: x-llm-schema-relaxed names keyword@pointer",
       dict(raw.headers))
    r = raw.parse()
    ok(isinstance(json.loads(r.choices[0].message.content), dict),
       "and the reply is JSON")
    after = metric("ngx_llm_schema_relaxed_total")
    ok(before is not None and after == before + 1,
       f"ngx_llm_schema_relaxed_total counted ({before} -> {after})")

    try:
        client().chat.completions.create(
            model="smollm2", temperature=0, max_tokens=60,
            messages=[{"role": "user", "content": "Give a web site."}],
            response_format={"type": "json_schema", "json_schema": {
                "name": "site", "strict": True, "schema": schema}})
        ok(False, "strict: refused")
    except openai.BadRequestError as e:
        m = str(e)
        ok(e.status_code == 400 and "iri-reference" in m
           and "/properties/site" in m,
           "strict: a 400 naming the keyword and its pointer", m)

    tools = [{"type": "function", "function": {
        "name": "visit", "parameters": schema}}]
    raw = client().chat.completions.with_raw_response.create(
        model="smollm2", temperature=0, max_tokens=80,
        messages=[{"role": "user", "content": "Visit a web site."}],
        tools=tools, tool_choice="required")
    ok(raw.headers.get("x-llm-schema-relaxed", "").startswith(
        "iri-reference-format@"),
       "a tool's schema relaxed: named in the header", dict(raw.headers))
    tools[0]["function"]["strict"] = True
    try:
        client().chat.completions.create(
            model="smollm2", temperature=0, max_tokens=80,
            messages=[{"role": "user", "content": "Visit a web site."}],
            tools=tools, tool_choice="required")
        ok(False, "function.strict: refused")
    except openai.BadRequestError as e:
        ok("iri-reference" in str(e),
           "function.strict: a 400 naming the keyword", str(e))


section("named", named)
section("required", required)
section("cut", cut)
section("compact", compact)
section("relaxed", relaxed)
print(f"1..{n_tests}")
