#!/usr/bin/env python3
"""Every metric the alert rules and the Grafana dashboard query must be one
that ngx_llm's /metrics writes (make test-ops, t/ops/prometheus.t).

    tools/ops_check.py METRICS_FILE RULES_YML DASHBOARD_JSON

METRICS_FILE is a /metrics scrape. A histogram family counts as its
_bucket, _sum and _count series; counters and gauges as their own name.
The dashboard must be valid JSON with at least one query per panel.
Prints what is missing and exits 1, or prints a summary and exits 0.
"""
import json
import re
import sys

import yaml

KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right",
    "and", "or", "unless", "bool", "offset", "inf", "nan",
    # aggregations may put their by (...) before the parenthesis
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk",
    "bottomk", "quantile", "count_values", "group",
}
IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def exposed(path):
    """the series names a scrape has, by its TYPE lines"""
    names = set()
    with open(path) as f:
        for line in f:
            m = re.match(r"# TYPE (\S+) (counter|gauge|histogram)$", line)
            if not m:
                continue
            if m.group(2) == "histogram":
                names.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
            else:
                names.add(m.group(1))
    return names


def metric_names(expr):
    """the metric names a PromQL expression reads"""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)        # strings
    e = re.sub(r"\{[^}]*\}", "", e)                     # matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                    # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)",
               r"\1", e)                                # label lists
    names = set()
    for m in IDENT.finditer(e):
        word, rest = m.group(0), e[m.end():].lstrip()
        if word.lower() in KEYWORDS or rest.startswith("("):
            continue
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] in ".$"):
            continue                                    # 1e9, 5m, $var
        names.add(word)
    return names


def rule_exprs(path):
    with open(path) as f:
        doc = yaml.safe_load(f)
    for group in doc["groups"]:
        for rule in group["rules"]:
            yield rule.get("alert") or rule.get("record"), rule["expr"]


def dashboard_exprs(path):
    with open(path) as f:
        dash = json.load(f)                             # fails if not JSON
    for var in dash.get("templating", {}).get("list", []):
        q = var.get("query")
        if isinstance(q, dict):
            q = q.get("query")
        m = re.match(r"label_values\((\w[\w:]*)", q or "")
        if m:
            yield "variable " + var["name"], m.group(1)
    for panel in dash["panels"]:
        targets = panel.get("targets") or []
        if not targets:
            raise SystemExit("dashboard panel %r has no query" % panel.get("title"))
        for t in targets:
            yield "panel " + panel["title"], t["expr"]


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    have = exposed(sys.argv[1])
    if not have:
        raise SystemExit("%s holds no # TYPE line: not a /metrics scrape" % sys.argv[1])
    missing, used = [], set()
    for where, exprs in (("rules", rule_exprs(sys.argv[2])),
                         ("dashboard", dashboard_exprs(sys.argv[3]))):
        for name, expr in exprs:
            for metric in sorted(metric_names(expr)):
                used.add(metric)
                if metric not in have:
                    missing.append("%s %s: %s is not in /metrics" % (where, name, metric))
    for line in missing:
        print(line)
    if missing:
        sys.exit(1)
    print("ops_check: %d metric names used by the rules and the dashboard, "
          "all in /metrics (%d series names)" % (len(used), len(have)))


if __name__ == "__main__":
    main()
