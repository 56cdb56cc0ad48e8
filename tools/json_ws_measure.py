#!/usr/bin/env python3
"""Compact against flexible JSON whitespace on the same prompts (issue 23).

Two locations of one server, one per llm_json_whitespace mode, asked the
same requests in turn (interleaved, so load affects both alike): json_object
and json_schema replies, and tool calls (tool_choice required / named).
Prints, per mode and group: replies, finish length, valid JSON (or replies
with >= 1 call), mean completion tokens.

  BASE=http://127.0.0.1:PORT python3 tools/json_ws_measure.py \
      /flexible/v1 /compact/v1
"""
import json
import os
import sys

import openai

BASE = os.environ.get("BASE", "http://127.0.0.1:8080")
OBJ_PROMPTS = [
    "Reply with a JSON object with one key \"name\" holding a cat's name.",
    "Describe a book as JSON with title and author.",
    "Give me a JSON object describing the weather in Paris.",
    "Return a JSON object with a list of three fruits.",
    "Make up a user profile in JSON.",
    "JSON with the keys city and population for Rome.",
]
SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["name", "age", "tags"], "additionalProperties": False}
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


def requests():
    for p in OBJ_PROMPTS:
        for t, seed in [(0, 0), (0.8, 1), (0.8, 2), (0.8, 3)]:
            yield "json_object", dict(
                messages=[{"role": "user", "content": p}], temperature=t,
                seed=seed, max_tokens=200,
                response_format={"type": "json_object"})
    for seed in range(8):
        yield "json_schema", dict(
            messages=[{"role": "user", "content": "Make up a person."}],
            temperature=0.8, seed=seed, max_tokens=200,
            response_format={"type": "json_schema", "json_schema": {
                "name": "person", "schema": SCHEMA}})
    for seed in range(8):
        yield "tools", dict(
            messages=[{"role": "user",
                       "content": "What's the weather in Paris?"}],
            tools=TOOLS, tool_choice="required", temperature=0.8,
            seed=seed, max_tokens=256)
        yield "tools", dict(
            messages=[{"role": "user",
                       "content": "Table for four at 19:30 please"}],
            tools=TOOLS, temperature=1.0, seed=seed, max_tokens=256,
            tool_choice={"type": "function",
                         "function": {"name": "book_table"}})


def main():
    modes = sys.argv[1:] or ["/v1"]
    clients = {m: openai.OpenAI(base_url=BASE + m, api_key="x")
               for m in modes}
    st = {}
    for group, kw in requests():
        for m in modes:
            r = clients[m].chat.completions.create(model="smollm2", **kw)
            ch = r.choices[0]
            s = st.setdefault((m, group), [0, 0, 0, 0])
            s[0] += 1
            s[1] += ch.finish_reason == "length"
            if group == "tools":
                s[2] += bool(ch.message.tool_calls)
            else:
                try:
                    s[2] += isinstance(json.loads(ch.message.content), dict)
                except ValueError:
                    pass
            s[3] += r.usage.completion_tokens
    for (m, group), s in sorted(st.items()):
        print("%-14s %-12s replies %3d  length %3d  valid %3d  "
              "tokens/reply %.1f" % (m, group, s[0], s[1], s[2], s[3] / s[0]))


if __name__ == "__main__":
    main()
