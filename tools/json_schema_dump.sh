#!/bin/sh
# The GBNF of every schema the tests and fixtures use, in one file, to show
# that a change to engine/grammar/json_schema*.c leaves the grammars
# byte-identical: run it at the base commit and after, then cmp the two.
#
#   tools/json_schema_dump.sh OUT   (FIXTURES, MODEL as for `make unit`)
#
# OUT gets, for each conversion, the schema, its root and max_ws, and the
# grammar or the error: what test_json_schema and test_grammar convert
# (recorded by t/unit/js_dump.c, random schemas and walks included), the
# SchemaStore schemas and every JSON-Schema-Test-Suite schema in FIXTURES,
# fuzz/corpus/json_schema, and the schemas the Test::Nginx files send.
set -eu
out=${1:?usage: json_schema_dump.sh OUT}
: "${FIXTURES:=$HOME/.cache/ngx_llm/fixtures}"
: "${MODEL:=$HOME/.cache/ngx_llm/SmolLM2-135M-Instruct.Q4_1.gguf}"
BUILD=$PWD/build
export FIXTURES MODEL BUILD
env -u BUILD make -s CUDA=0 build/dump/test_json_schema build/dump/test_grammar \
    build/dump/json_schema_dump >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
perl tools/json_schema_dump.pl t/*.t > "$tmp/nginx.jsonl"
: > "$out"
JS_DUMP=$out "$BUILD/dump/json_schema_dump" \
    $(ls "$FIXTURES"/jsonschema/schemastore/*.json | LC_ALL=C sort) \
    $(find "$FIXTURES/jsonschema/suite/tests" -name '*.json' | LC_ALL=C sort) \
    $(ls fuzz/corpus/json_schema/* | LC_ALL=C sort) "$tmp/nginx.jsonl"
JS_DUMP=$out "$BUILD/dump/test_json_schema" > "$tmp/tjs.log" 2>&1 \
    || { tail "$tmp/tjs.log" >&2; echo "test_json_schema failed" >&2; }
JS_DUMP=$out "$BUILD/dump/test_grammar" > "$tmp/tg.log" 2>&1 \
    || { tail "$tmp/tg.log" >&2; echo "test_grammar failed" >&2; }
n=$(grep -c '^=== schema' "$out" || true)
echo "$out: $n conversions, sha256 $(sha256sum < "$out" | cut -c1-16)" >&2
