#!/usr/bin/env bash
# make fuzz and make fuzz-smoke: every harness in turn, from its seeds in
# fuzz/corpus/NAME and what earlier runs found (BUILD/fuzz/corpus-NAME);
# a crash, a leak, a sanitizer report or a failed check stops here with
# the log's tail (the input is kept as BUILD/fuzz/NAME-crash-*).
#   run.sh BUILD FAST_LIMIT SLOW_LIMIT "SLOW NAMES" HARNESS...
# FAST_LIMIT and SLOW_LIMIT are libFuzzer options (-runs=N,
# -max_total_time=S); the harnesses named in SLOW NAMES get the second.
set -euo pipefail
build=$1 fast=$2 slow=$3 slow_names=" $4 "
shift 4
: "${FIXTURES:?FIXTURES is not set (make sets it)}"
export FIXTURES
for f in "$@"; do
    n=${f##*/fuzz_}
    limit=$fast
    [[ $slow_names == *" $n "* ]] && limit=$slow
    mkdir -p "$build/fuzz/corpus-$n"
    echo "fuzz $n: $limit"
    t0=$(date +%s)
    if ! "$f" "$limit" -print_final_stats=1 -artifact_prefix="$build/fuzz/$n-" \
        "$build/fuzz/corpus-$n" "fuzz/corpus/$n" > "$build/fuzz/$n.log" 2>&1; then
        tail -n 40 "$build/fuzz/$n.log"
        echo "fuzz $n FAILED: see $build/fuzz/$n.log"
        exit 1
    fi
    echo "fuzz $n: $(grep -h stat::number_of_executed_units "$build/fuzz/$n.log" \
        | awk '{print $2}') executions in $(( $(date +%s) - t0 )) s"
done
