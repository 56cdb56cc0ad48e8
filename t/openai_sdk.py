#!/usr/bin/env python3
"""The official `openai` Python SDK against ngx_llm: proof that real clients
work. Run by t/040-openai-sdk.t against a private nginx that serves three
engines (see there): /v1/ SmolLM2 (and /short/v1/, the same with
llm_deadline 2s; /quota/v1/, the same with a token quota of 40 a day per
API key), /tiny/v1/ stories260K with one batch place and no queue
(for 429), /bad/v1/ an unusable model (for 503).

Prints TAP. Greedy expectations are the ones t/020-api.t checks on the wire
(tokens the model picks with a wide margin), so a difference here is the
SDK's view of the same bytes, not the model's.

Environment: NGX_LLM_BASE=http://127.0.0.1:PORT (required).
"""
import json
import math
import os
import socket
import sys
import time
import traceback

import openai

BASE = os.environ["NGX_LLM_BASE"]
HOST, PORT = BASE.split("//", 1)[1].split(":")

n_tests = 0
n_failed = 0


def ok(cond, name, diag=None, todo=None):
    """todo: a known gap, reported (TAP's TODO) without failing the suite"""
    global n_tests, n_failed
    n_tests += 1
    print(("ok" if cond else "not ok") + f" {n_tests} - {name}"
          + (f" # TODO {todo}" if todo else ""))
    if not cond:
        n_failed += 0 if todo else 1
        if diag is not None:
            for line in str(diag).splitlines():
                print(f"#   {line}")
    sys.stdout.flush()
    return cond


def is_(got, want, name, todo=None):
    return ok(got == want, name, f"got:      {got!r}\nexpected: {want!r}",
              todo)


def client(path="/v1"):
    # no retries: each status must reach the caller exactly as sent
    return openai.OpenAI(base_url=BASE + path, api_key="sk-test",
                         max_retries=0, timeout=60)


def section(name, fn):
    """One topic; an unexpected exception fails it instead of the script."""
    try:
        fn()
    except Exception:
        ok(False, f"{name}: no unexpected exception", traceback.format_exc())


# --- models -------------------------------------------------------------------

def models():
    page = client().models.list()
    ids = [m.id for m in page.data]
    is_(ids, ["smollm2"], "models.list(): the served model")
    is_(page.data[0].object, "model", "its object type")


# --- chat ---------------------------------------------------------------------

HI = [{"role": "user", "content": "Hi"}]


def chat():
    r = client().chat.completions.create(model="smollm2", messages=HI,
                                         max_tokens=2, temperature=0)
    is_(r.object, "chat.completion", "chat: object")
    ok(r.id.startswith("chatcmpl-"), f"chat: id {r.id}")
    is_(r.model, "smollm2", "chat: model")
    is_(len(r.choices), 1, "chat: one choice")
    c = r.choices[0]
    is_(c.message.role, "assistant", "chat: role")
    is_(c.message.content, "Hello!", "chat: greedy reply")
    is_(c.finish_reason, "length", "chat: finish_reason")
    is_((r.usage.prompt_tokens, r.usage.completion_tokens,
         r.usage.total_tokens), (31, 2, 33), "chat: usage")
    ok(r.usage.prompt_tokens_details is not None
       and r.usage.prompt_tokens_details.cached_tokens >= 0,
       "chat: usage.prompt_tokens_details.cached_tokens")

    # max_completion_tokens, OpenAI's current name, through the SDK's typed
    # argument; stop as a list; a system message
    r = client().chat.completions.create(
        model="smollm2", max_completion_tokens=2, temperature=0,
        messages=[{"role": "system", "content": "You are brief."}] + HI)
    is_(r.usage.completion_tokens, 2, "chat: max_completion_tokens")


def chat_stream():
    t0 = time.monotonic()
    stream = client().chat.completions.create(
        model="smollm2", messages=HI, max_tokens=2, temperature=0,
        stream=True, stream_options={"include_usage": True})
    chunks = []
    for chunk in stream:
        chunks.append((time.monotonic() - t0, chunk))
    got = [(c.choices[0].delta.role if c.choices else None,
            c.choices[0].delta.content if c.choices else None,
            c.choices[0].finish_reason if c.choices else None)
           for _, c in chunks]
    is_(got, [("assistant", "Hello", None), (None, "!", None),
              (None, None, "length"), (None, None, None)],
        "chat stream: role first, one chunk per token, finish, usage")
    is_({c.object for _, c in chunks}, {"chat.completion.chunk"},
        "chat stream: every chunk is a chat.completion.chunk")
    is_(len({c.id for _, c in chunks}), 1, "chat stream: one id")
    u = chunks[-1][1].usage
    is_((u.prompt_tokens, u.completion_tokens, u.total_tokens), (31, 2, 33),
        "chat stream: include_usage chunk")
    ok(all(c.usage is None for _, c in chunks[:-1]),
       "chat stream: usage only in the last chunk")

    # without stream_options: no usage chunk
    stream = client().chat.completions.create(
        model="smollm2", messages=HI, max_tokens=2, temperature=0,
        stream=True)
    chunks = list(stream)
    is_("".join(c.choices[0].delta.content or "" for c in chunks), "Hello!",
        "chat stream without usage: the text")
    ok(all(c.choices and c.usage is None for c in chunks),
       "chat stream without usage: no usage chunk")


def n_choices():
    """n=3: choices[0..2] through the SDK's types, streamed and not; the
    seeded choices stream the same texts they have unstreamed"""
    kw = dict(model="smollm2", messages=HI, max_tokens=6, temperature=1,
              seed=5, n=3)
    r = client().chat.completions.create(**kw)
    is_([c.index for c in r.choices], [0, 1, 2], "n=3: choices 0, 1, 2")
    ok(all(c.finish_reason in ("stop", "length") for c in r.choices),
       "n=3: each choice has its finish_reason",
       [c.finish_reason for c in r.choices])
    texts, finishes, usage = {}, {}, None
    for chunk in client().chat.completions.create(
            stream=True, stream_options={"include_usage": True}, **kw):
        usage = chunk.usage or usage
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
            if c.finish_reason:
                finishes[c.index] = c.finish_reason
    is_(sorted(finishes), [0, 1, 2], "n=3 stream: every index finishes")
    is_([texts.get(i) for i in range(3)],
        [c.message.content for c in r.choices],
        "n=3 stream: each index streams its unstreamed text (same seed)")
    is_((usage.prompt_tokens, usage.completion_tokens) if usage else None,
        (r.usage.prompt_tokens, r.usage.completion_tokens),
        "n=3 stream: usage counts every choice, the prompt once")
    g = client().chat.completions.create(model="smollm2", messages=HI,
                                         max_tokens=2, temperature=0, n=2)
    is_([c.message.content for c in g.choices], ["Hello!", "Hello!"],
        "n=2 greedy: identical choices")


def chat_stream_timing():
    """Tokens reach the SDK as they are produced, not in one burst."""
    question = [{"role": "user", "content": "What is the capital of "
                 "France? Explain in detail."}]
    stream = client().chat.completions.create(
        model="smollm2", max_tokens=24, temperature=0, stream=True,
        messages=question)
    arrivals = [(time.monotonic(), c.choices[0].delta.content)
                for c in stream
                if c.choices and c.choices[0].delta.content is not None]
    whole = client().chat.completions.create(
        model="smollm2", max_tokens=24, temperature=0, messages=question)
    text = "".join(t for _, t in arrivals)
    # the greedy answer itself moves with the kernels' roundings after its
    # first sentence (Q4_1 margins are small there): the stream must equal
    # the same request unstreamed, and begin with the answer
    ok(text == whole.choices[0].message.content
       and text.startswith("The capital of France is Paris."),
       f"chat stream: 24 greedy tokens == unstreamed ({text!r})")
    is_(len(arrivals), 24, "chat stream: one content chunk per token")
    spread = arrivals[-1][0] - arrivals[0][0] if arrivals else 0
    ok(spread > 0.05, f"chat stream: first to last chunk {spread:.3f} s, "
       "spread over time")


# --- completions ---------------------------------------------------------------

COUNT = "1, 2, 3, 4,"


def completion():
    r = client().completions.create(model="smollm2", prompt=COUNT,
                                    max_tokens=12, temperature=0,
                                    stop=[" 7"])
    is_(r.object, "text_completion", "completion: object")
    ok(r.id.startswith("cmpl-"), f"completion: id {r.id}")
    is_(r.choices[0].text, " 5, 6,", "completion: text, stop not included")
    is_(r.choices[0].finish_reason, "stop", "completion: finish_reason")
    is_(r.usage.prompt_tokens, 11, "completion: prompt tokens")
    is_(r.usage.total_tokens,
        r.usage.prompt_tokens + r.usage.completion_tokens,
        "completion: total = prompt + completion")

    # a prompt given as token ids (the same text, SmolLM2's ids)
    r = client().completions.create(
        model="smollm2", prompt=[33, 28, 216, 34, 28, 216, 35, 28, 216, 36,
                                 28],
        max_tokens=2, temperature=0)
    is_(r.choices[0].text, " 5", "completion: prompt as token ids")

    # the vLLM extensions the SDK passes through extra_body
    r = client().completions.create(
        model="smollm2", prompt=COUNT, max_tokens=5, temperature=0,
        extra_body={"ignore_eos": True, "top_k": 1, "min_p": 0.0})
    is_(r.usage.completion_tokens, 5, "completion: extra_body ignore_eos")


def completion_stream():
    stream = client().completions.create(
        model="smollm2", prompt=COUNT, max_tokens=12, temperature=0,
        stop=[" 7"], stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    texts = [c.choices[0].text for c in chunks if c.choices]
    is_("".join(texts), " 5, 6,", "completion stream: the text")
    ok(len(texts) >= 3, f"completion stream: {len(texts)} text chunks")
    finals = [c.choices[0].finish_reason for c in chunks if c.choices]
    is_(finals[-1], "stop", "completion stream: finish_reason last")
    ok(all(f is None for f in finals[:-1]),
       "completion stream: no finish_reason before the end")
    is_({c.object for c in chunks}, {"text_completion"},
        "completion stream: every chunk is a text_completion")
    last = chunks[-1]
    is_(last.choices, [], "completion stream: usage chunk has no choices")
    ok(last.usage is not None and last.usage.prompt_tokens == 11
       and last.usage.total_tokens
       == last.usage.prompt_tokens + last.usage.completion_tokens,
       "completion stream: include_usage chunk")


# --- logprobs -----------------------------------------------------------------

def logprobs():
    r = client().chat.completions.create(model="smollm2", messages=HI,
                                         max_tokens=1, temperature=0,
                                         logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    is_(len(content), 1, "chat logprobs: one entry per token")
    lp = content[0]
    is_(lp.token, "Hello", "chat logprobs: the token")
    ok(lp.logprob <= 0 and math.isfinite(lp.logprob),
       f"chat logprobs: logprob {lp.logprob}")
    is_(lp.bytes, list(b"Hello"), "chat logprobs: bytes")
    is_(len(lp.top_logprobs), 2, "chat logprobs: top_logprobs=2")
    is_(lp.top_logprobs[0].token, "Hello", "chat logprobs: best is chosen")
    ok(abs(lp.top_logprobs[0].logprob - lp.logprob) < 1e-6,
       "chat logprobs: the chosen token's logprob is the best one")
    ok(lp.top_logprobs[1].logprob <= lp.top_logprobs[0].logprob,
       "chat logprobs: alternatives in order")

    r = client().completions.create(model="smollm2", prompt=COUNT,
                                    max_tokens=2, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    is_(lp.tokens, [" ", "5"], "completion logprobs: tokens")
    is_(len(lp.token_logprobs), 2, "completion logprobs: token_logprobs")
    is_([len(t) for t in lp.top_logprobs], [2, 2],
        "completion logprobs: two alternatives per token")
    is_([list(t)[0] for t in lp.top_logprobs], [" ", "5"],
        "completion logprobs: the chosen tokens are the best")
    is_(lp.text_offset, [0, 1], "completion logprobs: text_offset")

    # streamed chat logprobs ride on each content chunk
    stream = client().chat.completions.create(
        model="smollm2", messages=HI, max_tokens=2, temperature=0,
        logprobs=True, top_logprobs=1, stream=True)
    toks = [c.choices[0].logprobs.content[0].token for c in stream
            if c.choices and c.choices[0].logprobs is not None
            and c.choices[0].logprobs.content]
    is_(toks, ["Hello", "!"], "chat stream logprobs: one per token")


# --- errors: the SDK's exception types --------------------------------------------

def expect_error(name, cls, fn, status, code, param=None, etype=None):
    try:
        fn()
    except cls as e:
        is_(type(e), cls, f"{name}: raises {cls.__name__}")
        is_(e.status_code, status, f"{name}: status {status}")
        is_(e.code, code, f"{name}: code")
        if param is not None:
            is_(e.param, param, f"{name}: param")
        if etype is not None:
            is_(e.type, etype, f"{name}: type")
        ok(isinstance(e.body, dict) and e.body.get("message"),
           f"{name}: a message ({e.body.get('message') if isinstance(e.body, dict) else e.body})")
        return e
    except Exception as e:
        ok(False, f"{name}: raises {cls.__name__}",
           f"raised {type(e).__name__}: {e}")
        return None
    ok(False, f"{name}: raises {cls.__name__}", "nothing raised")
    return None


def errors():
    c = client()
    expect_error("400 temperature out of range", openai.BadRequestError,
                 lambda: c.chat.completions.create(
                     model="smollm2", messages=HI, temperature=3),
                 400, "decimal_above_max_value", "temperature",
                 "invalid_request_error")
    expect_error("400 wrong type", openai.BadRequestError,
                 lambda: c.completions.create(
                     model="smollm2", prompt=COUNT,
                     extra_body={"max_tokens": "ten"}),
                 400, "invalid_type", "max_tokens", "invalid_request_error")
    expect_error("400 prompt + max_tokens over max_model_len",
                 openai.BadRequestError,
                 lambda: c.completions.create(model="smollm2", prompt=COUNT,
                                              max_tokens=100000),
                 400, "context_length_exceeded", None,
                 "invalid_request_error")
    expect_error("400 the same in a stream, before any chunk",
                 openai.BadRequestError,
                 lambda: c.completions.create(model="smollm2", prompt=COUNT,
                                              max_tokens=100000,
                                              stream=True),
                 400, "context_length_exceeded")
    expect_error("404 unknown model", openai.NotFoundError,
                 lambda: c.chat.completions.create(model="gpt-4o",
                                                   messages=HI),
                 404, "model_not_found", None, "invalid_request_error")
    expect_error("404 unknown endpoint", openai.NotFoundError,
                 lambda: c.images.generate(model="smollm2", prompt="x"),
                 404, "unknown_url")
    # /v1/embeddings on a generation engine (t/038 serves an embedder)
    expect_error("400 embeddings of a generation model",
                 openai.BadRequestError,
                 lambda: c.embeddings.create(model="smollm2", input="x"),
                 400, "invalid_value")
    e = expect_error("503 unusable model", openai.InternalServerError,
                     lambda: client("/bad/v1").chat.completions.create(
                         model="bad", messages=HI),
                     503, "engine_unavailable", None, "server_error")
    if e is not None:
        ok(isinstance(e, openai.APIStatusError),
           "503: an APIStatusError too")
        is_(e.response.headers.get("retry-after"), "1", "503: Retry-After")


def deadline():
    """llm_deadline 2s in /short/v1/: a 504 before the stream, an error
    event (the SDK's APIError) once it has begun."""
    long_run = dict(model="smollm2", prompt="Once upon a time",
                    max_tokens=1500, temperature=0,
                    extra_body={"ignore_eos": True})
    expect_error("504 deadline", openai.InternalServerError,
                 lambda: client("/short/v1").completions.create(**long_run),
                 504, "deadline_exceeded", None, "server_error")

    texts = []
    try:
        for c in client("/short/v1").completions.create(stream=True,
                                                          **long_run):
            texts.append(c.choices[0].text)
        ok(False, "deadline in a stream: raises APIError", "nothing raised")
    except openai.APIStatusError as e:
        ok(False, "deadline in a stream: raises APIError",
           f"raised {type(e).__name__} before the stream: {e}")
    except openai.APIError as e:
        ok(True, "deadline in a stream: raises APIError")
        is_(e.code, "deadline_exceeded", "deadline in a stream: code")
        is_(e.type, "server_error", "deadline in a stream: type")
        ok(len(texts) > 2, f"deadline in a stream: after {len(texts)} "
           "chunks")


def concurrent():
    """Four streams at once through the async client: each one gets the
    reply it would get alone (batched == unbatched, greedy)."""
    import asyncio

    async def one(c):
        stream = await c.chat.completions.create(
            model="smollm2", messages=HI, max_tokens=2, temperature=0,
            stream=True)
        return "".join([ch.choices[0].delta.content or ""
                        async for ch in stream if ch.choices])

    async def four():
        c = openai.AsyncOpenAI(base_url=BASE + "/v1", api_key="sk-test",
                               max_retries=0, timeout=60)
        try:
            return await asyncio.gather(*[one(c) for _ in range(4)])
        finally:
            await c.close()

    is_(asyncio.run(four()), ["Hello!"] * 4,
        "AsyncOpenAI: four concurrent streams, each the greedy reply")


def hold_the_place():
    """A streaming client that reads nothing, with a tiny receive window:
    its sequence keeps the tiny engine's only batch place."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    s.connect((HOST, int(PORT)))
    body = (b'{"model":"tiny","stream":true,"prompt":"Once upon a time",'
            b'"max_tokens":500,"ignore_eos":true}')
    s.sendall(b"POST /tiny/v1/completions HTTP/1.1\r\nHost: localhost\r\n"
              b"Content-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    # the response has begun: the sequence runs
    s.settimeout(60)
    first = s.recv(512)
    return s, first


def rate_limit():
    s, first = hold_the_place()
    try:
        ok(first.startswith(b"HTTP/1.1 200 "), "429: the holder streams",
           first[:200])
        e = expect_error("429 queue full", openai.RateLimitError,
                         lambda: client("/tiny/v1").completions.create(
                             model="tiny", prompt="Once", max_tokens=2),
                         429, "queue_full", None, "rate_limit_error")
        if e is not None:
            is_(e.response.headers.get("retry-after"), "1",
                "429: Retry-After")
        expect_error("429 for a stream too", openai.RateLimitError,
                     lambda: client("/tiny/v1").completions.create(
                         model="tiny", prompt="Once", max_tokens=2,
                         stream=True),
                     429, "queue_full")
    finally:
        s.close()

    # the holder left: the place is free again (the engine drops the
    # sequence within a step; give it a moment)
    deadline = time.monotonic() + 10
    while True:
        try:
            r = client("/tiny/v1").completions.create(
                model="tiny", prompt="Once", max_tokens=2)
            is_(r.usage.completion_tokens, 2,
                "429: served again once the holder left")
            break
        except openai.RateLimitError:
            if time.monotonic() > deadline:
                ok(False, "429: served again once the holder left",
                   "still 429 after 10 s")
                break
            time.sleep(0.1)


def token_quota():
    # the key is the Authorization header: this API key's own bucket
    c = openai.OpenAI(base_url=BASE + "/quota/v1", api_key="sk-quota",
                      max_retries=0, timeout=60)
    # ignore_eos: exactly max_tokens, whatever the draw
    raw = c.completions.with_raw_response.create(
        model="smollm2", prompt=[1, 2, 3, 4, 5], max_tokens=10,
        extra_body={"ignore_eos": True})
    r = raw.parse()
    is_(r.usage.total_tokens, 15, "quota: 5 + 10 tokens served")
    is_(raw.headers.get("x-ratelimit-limit-tokens"), "40",
        "quota: x-ratelimit-limit-tokens")
    is_(raw.headers.get("x-ratelimit-remaining-tokens"), "25",
        "quota: x-ratelimit-remaining-tokens")
    e = expect_error("429 token quota", openai.RateLimitError,
                     lambda: c.completions.create(
                         model="smollm2", prompt=[1, 2, 3, 4, 5],
                         max_tokens=30),
                     429, "rate_limit_exceeded", None, "tokens")
    if e is not None:
        ok(int(e.response.headers.get("retry-after", "0")) > 0,
           f"quota 429: Retry-After {e.response.headers.get('retry-after')}")


# --- tools ----------------------------------------------------------------------

WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather of a city",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string"}},
                   "required": ["city"], "additionalProperties": False}}}]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]

# tool_choice "required" / a named function are enforced by constrained
# decoding (NGX_HTTP_LLM_CONSTRAINED 1); a build without it refuses them
# with a 400 and these checks are TODO, reported without failing. One call
# (parallel_tool_calls false): under the grammar SmolLM2 repeats calls
# until max_tokens cuts one
NEEDS_GRAMMAR = "tool_choice required needs the grammar engine (constrain)"


def check_calls(r, label):
    c = r.choices[0]
    calls = c.message.tool_calls or []
    ok(len(calls) >= 1 and calls[0].function.name == "get_weather",
       f"{label}: a call of get_weather", c.message)
    if not calls:
        return
    ok(calls[0].id.startswith("call_") and len(calls[0].id) == 29,
       f"{label}: id call_ + 24", calls[0].id)
    try:
        args = json.loads(calls[0].function.arguments)
    except ValueError:
        args = None
    ok(isinstance(args, dict) and isinstance(args.get("city"), str),
       f"{label}: arguments a JSON object with a city",
       calls[0].function.arguments)
    is_(c.finish_reason, "tool_calls", f"{label}: finish_reason")


def tools_auto():
    r = client().chat.completions.create(model="smollm2", messages=ASK,
                                         tools=WEATHER, max_tokens=40,
                                         temperature=0)
    m = r.choices[0].message
    ok(bool(m.tool_calls) or m.content is not None,
       "tools auto: a parsed call or content", m)
    if m.tool_calls:
        check_calls(r, "tools auto")

    r = client().chat.completions.create(model="smollm2", messages=HI,
                                         tools=WEATHER, tool_choice="none",
                                         max_tokens=2, temperature=0)
    is_(r.choices[0].message.tool_calls, None, "tools none: no tool_calls")
    is_(r.choices[0].message.content, "Hello!", "tools none: the reply")

    # a past call and its result, as the SDK's own types write them back
    past = [ASK[0],
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {
                    "name": "get_weather",
                    "arguments": json.dumps({"city": "Paris"})}}]},
            {"role": "tool", "tool_call_id": "call_1",
             "content": "18C and sunny"}]
    r = client().chat.completions.create(model="smollm2", messages=past,
                                         tools=WEATHER, max_tokens=8,
                                         temperature=0)
    ok(r.choices[0].finish_reason in ("stop", "length", "tool_calls"),
       "tools: a conversation with a tool result is served")

    try:
        client().chat.completions.create(
            model="smollm2", messages=HI, tools=WEATHER,
            tool_choice={"type": "function", "function": {"name": "nope"}})
        ok(False, "tools: an unknown named function is a 400")
    except openai.BadRequestError as e:
        is_(e.body.get("param") if isinstance(e.body, dict) else None,
            "tool_choice.function.name",
            "tools: an unknown named function is a 400 naming it")


def rebuilt(**kw):
    """A stream through the SDK's own accumulator (ChatCompletionStreamState,
    what chat.completions.stream() uses); its snapshot, since the final
    parse refuses a reply that max_tokens cut (LengthFinishReasonError)"""
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state = ChatCompletionStreamState()
    for chunk in client().chat.completions.create(stream=True, **kw):
        state.handle_chunk(chunk)
    return state.current_completion_snapshot


def tools_stream():
    # the same request streamed and rebuilt by the SDK's accumulator gives
    # what the plain request gives
    r = client().chat.completions.create(model="smollm2", messages=ASK,
                                         tools=WEATHER, max_tokens=40,
                                         temperature=0)
    final = rebuilt(model="smollm2", messages=ASK, tools=WEATHER,
                    max_tokens=40, temperature=0)
    a, b = r.choices[0], final.choices[0]
    is_(b.message.content, a.message.content,
        "tools stream: the rebuilt content is the plain reply's")
    is_([(t.function.name, t.function.arguments)
         for t in (b.message.tool_calls or [])],
        [(t.function.name, t.function.arguments)
         for t in (a.message.tool_calls or [])],
        "tools stream: the rebuilt calls are the plain reply's")
    is_(b.finish_reason, a.finish_reason, "tools stream: finish_reason")


def tools_required():
    for choice, label in [("required", "tools required"),
                          ({"type": "function",
                            "function": {"name": "get_weather"}},
                           "tools named")]:
        try:
            r = client().chat.completions.create(
                model="smollm2", messages=ASK, tools=WEATHER,
                tool_choice=choice, max_tokens=60, temperature=0,
                parallel_tool_calls=False)
        except openai.BadRequestError as e:
            ok(False, f"{label}: a call", e, todo=NEEDS_GRAMMAR)
            continue
        check_calls(r, label)

    tools_required_sampled()

    try:
        final = rebuilt(model="smollm2", messages=ASK, tools=WEATHER,
                        tool_choice="required", max_tokens=60,
                        temperature=0, parallel_tool_calls=False)
    except openai.BadRequestError as e:
        ok(False, "tools required stream: a call rebuilt by the SDK", e,
           todo=NEEDS_GRAMMAR)
        return
    check_calls(final, "tools required stream")


def tools_required_sampled(n=16):
    """required under sampling, 16 seeds at once: every reply is one call of
    get_weather whose arguments validate against its parameters schema
    (an object of exactly a string city), whatever the model samples"""
    from concurrent.futures import ThreadPoolExecutor

    def one(seed):
        return client().chat.completions.create(
            model="smollm2", messages=ASK, tools=WEATHER,
            tool_choice="required", max_tokens=200, temperature=1.0,
            seed=seed, parallel_tool_calls=False)

    with ThreadPoolExecutor(n) as pool:
        replies = list(pool.map(one, range(1, n + 1)))
    bad = []
    for seed, r in zip(range(1, n + 1), replies):
        c = r.choices[0]
        calls = c.message.tool_calls or []
        try:
            args = json.loads(calls[0].function.arguments) if calls else None
        except ValueError:
            args = None
        if not (len(calls) == 1 and calls[0].function.name == "get_weather"
                and isinstance(args, dict) and list(args) == ["city"]
                and isinstance(args["city"], str)
                and c.finish_reason == "tool_calls"):
            bad.append((seed, c.finish_reason, c.message))
    ok(not bad, f"tools required, sampled (temperature 1, {n} seeds): "
       "every reply one valid call", bad)


def main():
    is_(openai.__version__, os.environ.get("OPENAI_SDK_VERSION",
                                           openai.__version__),
        f"openai SDK {openai.__version__}")
    for name, fn in [("models", models), ("chat", chat),
                     ("chat stream", chat_stream),
                     ("chat stream timing", chat_stream_timing),
                     ("n", n_choices),
                     ("completion", completion),
                     ("completion stream", completion_stream),
                     ("logprobs", logprobs), ("errors", errors),
                     ("tools", tools_auto), ("tools stream", tools_stream),
                     ("tools required", tools_required),
                     ("deadline", deadline), ("concurrent", concurrent),
                     ("429", rate_limit), ("token quota", token_quota)]:
        section(name, fn)
    print(f"1..{n_tests}")
    return 1 if n_failed else 0


if __name__ == "__main__":
    sys.exit(main())
