#!/usr/bin/env python3
"""The official `openai` Python SDK's embeddings.create against ngx_llm:
run by t/038-embeddings.t (its /v1/ serves t/data/models/hf-qwen3-embed
as qwen3-embed). Prints TAP.

Environment: NGX_LLM_BASE=http://127.0.0.1:PORT, EXPECT=a JSON list of
the float vectors nginx gave each golden text (t/038 read them first).
"""
import json
import os
import struct
import sys

import openai

n = 0
failed = 0


def ok(cond, name):
    global n, failed
    n += 1
    print(("ok" if cond else "not ok") + f" {n} - {name}")
    failed += 0 if cond else 1


def f32(v):
    """a vector's float32 bytes: what both encodings must carry"""
    return struct.pack(f"<{len(v)}f", *v)


texts = json.loads(os.environ["TEXTS"])
expect = json.loads(os.environ["EXPECT"])
client = openai.OpenAI(base_url=os.environ["NGX_LLM_BASE"] + "/v1",
                       api_key="none", max_retries=0)

# the SDK asks for base64 unless told, and decodes it
r = client.embeddings.create(model="qwen3-embed", input=texts[0])
ok(len(r.data) == 1 and len(r.data[0].embedding) == 64,
   "embeddings.create (the SDK's default: base64): 64 floats")
ok(f32(r.data[0].embedding) == f32(expect[0]),
   "the SDK's decoded vector == the float reply's, bit for bit")
ok(r.model == "qwen3-embed" and r.usage.prompt_tokens > 0
   and r.usage.total_tokens == r.usage.prompt_tokens, "model and usage")

r = client.embeddings.create(model="qwen3-embed", input=texts,
                             encoding_format="float")
ok([d.index for d in r.data] == list(range(len(texts))),
   "a list: indexes in order")
ok(all(f32(d.embedding) == f32(e) for d, e in zip(r.data, expect)),
   "a list, float: each input's vector")

try:
    client.embeddings.create(model="qwen3-embed", input="a", dimensions=16)
    ok(False, "dimensions 16 refused")
except openai.BadRequestError as e:
    ok(e.status_code == 400 and "matryoshka" in str(e),
       "dimensions 16 on a model not trained for them: BadRequestError")

try:
    client.embeddings.create(model="nope", input="a")
    ok(False, "an unknown model refused")
except openai.NotFoundError as e:
    ok(e.status_code == 404, "an unknown model: NotFoundError")

print(f"1..{n}")
sys.exit(1 if failed else 0)
