#!/usr/bin/env python3
"""Compares two dumps of tools/json_schema_dump.sh by schema, not by
position: the strict conversions found in both (same root, max_ws and
schema text), how many give the same GBNF or error, and the others by
(before, after) outcome, the error up to " at ".

usage: json_schema_dump_cmp.py BEFORE AFTER
"""
import collections
import re
import sys


def records(path):
    out = {}
    text = open(path, encoding="utf-8", errors="replace").read()
    for rec in text.split("=== schema (")[1:]:
        head, _, rest = rec.partition("\n")
        if "relaxing" in head:
            continue
        if "\n=== gbnf" in rest:
            schema, _, result = rest.partition("\n=== gbnf")
        else:
            schema, _, result = rest.partition("\n=== error")
            result = "ERR" + result
        out.setdefault(head + schema, result)
    return out


def outcome(result):
    if not result.startswith("ERR"):
        return "compiled"
    return re.sub(r" at .*", "", result.split("\n")[1])[:70]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = records(sys.argv[1]), records(sys.argv[2])
    common = set(a) & set(b)
    same = sum(a[k] == b[k] for k in common)
    print(f"strict conversions: {len(a)} before, {len(b)} after, "
          f"{len(common)} in both: {same} identical, "
          f"{len(common) - same} different")
    kinds = collections.Counter((outcome(a[k]), outcome(b[k]))
                                for k in common if a[k] != b[k])
    for (x, y), n in kinds.most_common():
        print(f"{n:6d}  {x}  ->  {y}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
