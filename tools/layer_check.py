#!/usr/bin/env python3
"""
layer_check.py: the architecture of docs/architecture.md, checked.

  tools/layer_check.py [OBJ_DIR ...]

1. Includes: every `#include "..."` of a file in a layer names a header of
   the same layer or of a layer it may use (ALLOWED below), by its folder
   ("tokenizer/tokenizer.h", not "tokenizer/tokenizer.h" from elsewhere).
2. Symbols (with OBJ_DIRs: the build's object tree and nginx's build
   folder): no two compilation
   units call each other (A uses a symbol B defines and B one A defines),
   and no object uses a symbol defined in a layer it may not use.

Exit status 1 and one line per violation on failure; LAYER_GRAPH=1 also
prints the calls between layers. Standard library only (nm from binutils
for part 2).
"""

import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

# folder -> layer
LAYERS = {
    "kernels": "kernels",
    "engine/common": "common",
    "engine/ring": "ring",
    "engine/format": "format",
    "engine/text": "text",
    "engine/tokenizer": "tokenizer",
    "engine/jinja": "jinja",
    "engine/params": "params",
    "engine/api": "api",
    "engine/grammar": "grammar",
    "engine/model": "model",
    "engine/sample": "sample",
    "engine/backend": "backend",
    "engine/sched": "sched",
    "engine/server": "server",
    "ngx_module": "ngx_module",
}

# layer -> the layers below it that it may use (itself always; "common",
# constants only, by everyone)
ALLOWED = {
    "common": set(),
    "kernels": set(),
    "ring": set(),
    "format": {"kernels"},
    "text": set(),
    "tokenizer": {"text", "format", "kernels"},
    "jinja": {"text"},
    "params": {"ring"},
    "api": {"tokenizer", "params", "jinja", "text", "ring"},
    "model": {"tokenizer", "text", "format", "kernels"},
    "sample": {"params", "kernels"},
    "grammar": {"tokenizer", "text", "format", "kernels"},
    "backend": {"sample", "model", "params", "tokenizer", "text", "format",
                "kernels"},
    "sched": {"backend", "sample", "grammar", "model", "params", "tokenizer",
              "text", "format", "kernels"},
    "server": {"sched", "backend", "sample", "grammar", "model", "jinja",
               "tokenizer", "params", "text", "format", "ring", "kernels"},
    "ngx_module": {"api", "jinja", "tokenizer", "params", "text", "ring",
                   "format", "kernels"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(rel):
    best = None
    for folder, layer in LAYERS.items():
        if rel == folder or rel.startswith(folder + "/"):
            if best is None or len(folder) > len(best[0]):
                best = (folder, layer)
    return best[1] if best else None


def sources():
    for folder in LAYERS:
        top = os.path.join(ROOT, folder)
        for dirpath, _, files in os.walk(top):
            for name in sorted(files):
                if name.endswith((".c", ".h", ".cu")):
                    path = os.path.join(dirpath, name)
                    yield os.path.relpath(path, ROOT)


def resolve(src, inc):
    """The repository file an include names: beside the source, under
    engine/ (a folder-qualified name) or in kernels/; None for a system or
    nginx header."""
    for base in (os.path.dirname(src), "engine", "kernels"):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(ROOT, cand)):
            return cand
    return None


def check_includes():
    errors = []
    for src in sources():
        mine = layer_of(src)
        with open(os.path.join(ROOT, src), encoding="utf-8",
                  errors="replace") as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            target = resolve(src, inc)
            if target is None:
                continue
            theirs = layer_of(target)
            if theirs is None:
                errors.append("%s: includes %s, outside every layer"
                              % (src, inc))
            elif (theirs != mine and theirs != "common"
                  and theirs not in ALLOWED[mine]):
                errors.append("%s (%s) includes %s (%s): not allowed"
                              % (src, mine, inc, theirs))
            elif (theirs != mine and "/" not in inc
                  and not target.startswith("kernels/")):
                errors.append("%s includes \"%s\": name its folder (%s)"
                              % (src, inc, target))
    return errors


def nm_symbols(obj):
    """(global symbols defined, of them functions, symbols used)"""
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True,
                         check=True).stdout
    defined, funcs, used = set(), set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            used.add(name)
        elif kind in "TDBRCVWGSI":      # global: another object can use it
            defined.add(name)
            if kind in "TW":
                funcs.add(name)
    return defined, funcs, used


def check_objects(obj_dirs):
    """obj_dirs: the engine's object tree (build/obj*) and nginx's build
    folder, whose addon/ngx_module/ holds the module's objects (its copies
    of the engine's text and format files are the same code: skipped)."""
    objs = {}
    for obj_dir in obj_dirs:
        for dirpath, _, files in os.walk(obj_dir):
            for name in files:
                if not name.endswith(".o"):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, obj_dir)[:-2]
                rel = rel[:-3] if rel.endswith(".cu") else rel
                if rel.startswith("addon/"):
                    rel = rel[len("addon/"):]
                    if not rel.startswith("ngx_module/"):
                        continue
                # a stale object of a moved or deleted source says nothing
                if layer_of(rel) is not None and any(
                        os.path.isfile(os.path.join(ROOT, rel + ext))
                        for ext in (".c", ".cu")):
                    objs[rel] = nm_symbols(path)
    owner, funcs = {}, set()
    for rel, (defined, fn, _) in objs.items():
        for sym in defined:
            owner.setdefault(sym, rel)
        funcs |= fn
    errors, calls = [], {}
    for rel, (_, _, used) in objs.items():
        mine = layer_of(rel)
        for sym in used:
            other = owner.get(sym)
            if other is None or other == rel:
                continue
            # calls make circles; data (an nginx module's descriptor, read
            # by each of its files for ctx_index) does not
            if sym in funcs:
                calls.setdefault(rel, set()).add(other)
            errors += layer_errors(rel, sym, other)
    errors += loop_errors(calls)
    return errors, calls


def layer_errors(rel, sym, other):
    """a use of sym (defined in other) by rel the layers forbid, or []"""
    mine, theirs = layer_of(rel), layer_of(other)
    if theirs != mine and theirs not in ALLOWED[mine]:
        return ["%s (%s) uses %s from %s (%s): not allowed"
                % (rel, mine, sym, other, theirs)]
    return []


def loops(calls):
    """The strongly connected components of more than one node of the
    graph calls (node -> set of nodes), each sorted, by Tarjan's
    algorithm; iterative, so a long chain does not hit the recursion
    limit."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    nodes = sorted(set(calls) | {b for t in calls.values() for b in t})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(calls.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(calls.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return sorted(found)


def loop_errors(calls):
    return ["a loop of calls among %d files (each reaches every other): %s"
            % (len(c), ", ".join(c)) for c in loops(calls)]


def self_test():
    """The checks must fail what they must: planted inputs, not the
    tree. 0 when every case came out as expected."""
    cases = [
        # (what, calls: file -> files it calls, uses: (file, symbol, file),
        #  expected number of errors)
        ("a three-file loop",
         {"engine/sched/a.c": {"engine/sched/b.c"},
          "engine/sched/b.c": {"engine/sched/c.c"},
          "engine/sched/c.c": {"engine/sched/a.c"}}, [], 1),
        ("two loops, one of them long",
         {"kernels/a.c": {"kernels/b.c"}, "kernels/b.c": {"kernels/a.c"},
          "engine/model/p.c": {"engine/model/q.c"},
          "engine/model/q.c": {"engine/model/r.c"},
          "engine/model/r.c": {"engine/model/s.c"},
          "engine/model/s.c": {"engine/model/p.c", "kernels/a.c"}}, [], 2),
        ("a call from sched into api",
         {"engine/sched/scheduler.c": {"engine/api/request.c"}},
         [("engine/sched/scheduler.c", "llm_api_parse",
           "engine/api/request.c")], 1),
        ("a call from sample into api",
         {}, [("engine/sample/sampler.c", "llm_reply_push",
               "engine/api/reply.c")], 1),
        ("a clean chain down the layers",
         {"ngx_module/m.c": {"engine/api/request.c"},
          "engine/api/request.c": {"engine/tokenizer/tokenizer.c"},
          "engine/tokenizer/tokenizer.c": {"engine/text/utf8.c"}},
         [("ngx_module/m.c", "llm_api_parse", "engine/api/request.c"),
          ("engine/api/request.c", "llm_tokenize",
           "engine/tokenizer/tokenizer.c"),
          ("engine/tokenizer/tokenizer.c", "llm_utf8_len",
           "engine/text/utf8.c")], 0),
    ]
    bad = 0
    for what, calls, uses, want in cases:
        errors = loop_errors(calls)
        for rel, sym, other in uses:
            errors += layer_errors(rel, sym, other)
        ok = len(errors) == want
        bad += not ok
        print("layer-check self-test: %s: %s (%d error(s)%s)"
              % ("ok" if ok else "FAILED", what, len(errors),
                 "" if ok else ", %d expected" % want))
        for e in errors:
            print("    " + e)
    return 1 if bad else 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    errors = check_includes()
    n_calls, calls = 0, {}
    if argv:
        obj_errors, calls = check_objects(argv)
        errors += obj_errors
        n_calls = sum(len(v) for v in calls.values())
    for e in errors:
        print("layer-check: " + e)
    if errors:
        print("layer-check: %d violation(s); the layers are in "
              "docs/architecture.md" % len(errors))
        return 1
    if argv and os.environ.get("LAYER_GRAPH"):
        edges = {}
        for a, targets in calls.items():
            for b in targets:
                la, lb = layer_of(a), layer_of(b)
                if la != lb:
                    edges.setdefault(la, set()).add(lb)
        for la in sorted(edges):
            print("  %-10s -> %s" % (la, ", ".join(sorted(edges[la]))))
    rooms = sorted({layer_of(src) for src in sources()})
    print("layer-check: includes%s follow the layers of %d rooms (%s), "
          "no loop" % (" and %d calls between objects" % n_calls
                       if argv else "", len(rooms), " ".join(rooms)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
