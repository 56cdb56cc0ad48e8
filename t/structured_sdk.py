#!/usr/bin/env python3
"""Structured outputs through the official `openai` SDK (issue 12): run by
t/041-structured-sdk.t against a private nginx serving SmolLM2 at /v1/.

  - client.chat.completions.parse(response_format=<pydantic model>) returns
    the parsed object (the SDK sends a strict json_schema built from the
    model, and parses the reply with it);
  - 100 sampled requests (temperature 1, seeds 0..99, 8 at a time) with a
    strict json_schema: every output validates with the `jsonschema`
    package and ends with finish_reason "stop";
  - a refused schema reaches the SDK as openai.BadRequestError.

Prints TAP. Environment: NGX_LLM_BASE=http://127.0.0.1:PORT (required).
"""
import concurrent.futures
import importlib.metadata
import json
import os
import sys
import traceback
from typing import Literal

import jsonschema
import openai
import pydantic

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


def client():
    return openai.OpenAI(base_url=BASE + "/v1", api_key="sk-test",
                         max_retries=0, timeout=300)


def section(name, fn):
    try:
        fn()
    except Exception:
        ok(False, f"{name}: no unexpected exception", traceback.format_exc())


class Pet(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=12)
    age: int
    color: Literal["red", "green", "blue"]


def parse_pydantic():
    c = client()
    # the SDK moved parse() out of beta; take whichever this version has
    parse = getattr(c.chat.completions, "parse", None) \
        or c.beta.chat.completions.parse
    r = parse(model="smollm2", temperature=0, max_tokens=100,
              messages=[{"role": "user", "content": "Make up a pet."}],
              response_format=Pet)
    m = r.choices[0].message
    ok(isinstance(m.parsed, Pet), f"parse(response_format=Pet): a Pet "
       f"({m.parsed!r})", m.content)
    ok(r.choices[0].finish_reason == "stop", "parse: finish_reason stop",
       r.choices[0].finish_reason)


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 16},
        "age": {"type": "integer", "minimum": 0, "maximum": 30},
        "color": {"enum": ["red", "green", "blue"]},
        "tags": {"type": "array", "items": {"type": "string",
                                            "maxLength": 10},
                 "maxItems": 3},
    },
    "required": ["name", "age", "color", "tags"],
    "additionalProperties": False,
}


def one_sampled(seed):
    r = client().chat.completions.create(
        model="smollm2", temperature=1, seed=seed, max_tokens=400,
        messages=[{"role": "user", "content": "Make up a pet."}],
        response_format={"type": "json_schema", "json_schema": {
            "name": "pet", "strict": True, "schema": SCHEMA}})
    text = r.choices[0].message.content
    try:
        jsonschema.validate(json.loads(text), SCHEMA)
        why = None
    except Exception as e:      # not JSON, or not valid: say which
        why = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    return seed, r.choices[0].finish_reason, text, why


def sampled_100():
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one_sampled, range(100)))
    bad = [(s, f, t, w) for s, f, t, w in results if w or f != "stop"]
    ok(not bad, f"100 sampled strict json_schema outputs (temperature 1, "
       f"seeds 0..99): {100 - len(bad)} validate with jsonschema "
       f"{importlib.metadata.version('jsonschema')} and end 'stop'",
       "\n".join(f"seed {s}: finish {f}, {w}: {t!r}" for s, f, t, w
                 in bad[:5]))
    print(f"# seed 0: {results[0][2]!r}")


def refused():
    try:
        client().chat.completions.create(
            model="smollm2", max_tokens=5,
            messages=[{"role": "user", "content": "Hi"}],
            response_format={"type": "json_schema", "json_schema": {
                "name": "x", "strict": True,
                "schema": {"type": "array",
                           "contains": {"type": "string"}}}})
        ok(False, "strict, an unsupported keyword: BadRequestError")
    except openai.BadRequestError as e:
        ok("'contains'" in str(e),
           "strict, an unsupported keyword: BadRequestError naming it",
           str(e))


section("parse", parse_pydantic)
section("sampled", sampled_100)
section("refused", refused)
print(f"1..{n_tests}")
