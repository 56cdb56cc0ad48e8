#!/usr/bin/env python3
"""Checks the texts of random walks through JSON Schema grammars.

    tools/json_schema_check.py WALKS.jsonl

Each line of WALKS.jsonl (t/unit/test_json_schema.c writes it) is
{"schema": <a JSON Schema>, "text": <a text the schema's grammar accepted>}.
Each text must parse as JSON and be valid for its schema, by python
jsonschema with format checks (the validator the schema's $schema names,
draft 2020-12 when none). Prints one line per invalid text, then
"checked N valid, O valid under several oneOf branches, M invalid";
exits 1 when any is invalid.

    tools/json_schema_check.py --relaxed WALKS.jsonl

checks walks through relaxed grammars: each line also has "relaxed" (the
list llm_grammar_relaxed gives, "kw@pointer, ..."); an invalid text is
expected there and counted against each keyword its schema relaxed.
Prints "relaxed-keyword KW: I invalid of W walks" per keyword, then
"relaxed: checked N valid, M invalid, J not JSON"; exits 1 when a text
is not JSON. A text valid under several branches of a
oneOf (the grammar reads oneOf as anyOf, docs/json_schema.md) is counted
apart, as O.
"""
import json
import sys

import jsonschema
from jsonschema.validators import validator_for


def as_anyof(schema):
    """the schema with every oneOf read as anyOf, as the grammar reads it"""
    if isinstance(schema, dict):
        return {("anyOf" if k == "oneOf" else k): as_anyof(v)
                for k, v in schema.items()}
    if isinstance(schema, list):
        return [as_anyof(v) for v in schema]
    return schema


def valid_as_anyof(cls, schema, instance):
    """invalid only because a oneOf matched more than one branch"""
    if "oneOf" not in json.dumps(schema):
        return False
    loose = as_anyof(schema)
    return not list(cls(loose, format_checker=cls.FORMAT_CHECKER)
                    .iter_errors(instance))


def relaxed_main(path):
    good = bad = notjson = 0
    per = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            schema, text = rec["schema"], rec["text"]
            kws = sorted({item.split("@")[0]
                          for item in rec["relaxed"].split(", ") if item})
            cls = validator_for(schema, default=jsonschema.Draft202012Validator)
            try:
                instance = json.loads(text)
            except ValueError:
                notjson += 1
                print(f"not JSON: {text[:200]!r}")
                continue
            try:
                invalid = bool(list(cls(schema,
                                        format_checker=cls.FORMAT_CHECKER)
                                    .iter_errors(instance)))
            except Exception:       # a schema python cannot read either
                invalid = False
            bad += invalid
            good += not invalid
            for kw in kws:
                n = per.setdefault(kw, [0, 0])
                n[0] += invalid
                n[1] += 1
    for kw, (i, w) in sorted(per.items(), key=lambda x: -x[1][0]):
        print(f"relaxed-keyword {kw}: {i} invalid of {w} walks")
    print(f"relaxed: checked {good} valid, {bad} invalid, {notjson} not JSON")
    return 1 if notjson else 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--relaxed":
        return relaxed_main(sys.argv[2])
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    good = bad = oneof = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            rec = json.loads(line)
            schema, text = rec["schema"], rec["text"]
            cls = validator_for(schema, default=jsonschema.Draft202012Validator)
            try:
                instance = json.loads(text)
                errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER)
                              .iter_errors(instance))
            except ValueError as e:
                errors = [f"not JSON: {e}"]
            if errors and valid_as_anyof(cls, schema, instance):
                oneof += 1
            elif errors:
                bad += 1
                first = errors[0]
                why = getattr(first, "message", str(first))
                where = "/".join(str(p) for p in getattr(first, "path", []))
                print(f"line {n}: {text[:200]!r} is invalid at /{where}: "
                      f"{why[:200]}")
            else:
                good += 1
    print(f"checked {good} valid, {oneof} valid under several oneOf "
          f"branches, {bad} invalid")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
