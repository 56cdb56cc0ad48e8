#!/usr/bin/env bash
# make fuzz and make fuzz-smoke: every harness from its seeds in
# fuzz/corpus/NAME and what earlier runs found (BUILD/fuzz/corpus-NAME);
# a crash, a leak, a sanitizer report or a failed check stops its lane
# with the log's tail (the input is kept as BUILD/fuzz/NAME-crash-*), and
# the run fails once the other lanes are done.
#   run.sh BUILD FAST_LIMIT SLOW_LIMIT "SLOW NAMES" HARNESS...
# FAST_LIMIT and SLOW_LIMIT are libFuzzer options (-runs=N,
# -max_total_time=S); the harnesses named in SLOW NAMES get the second.
# FUZZ_JOBS lanes (1 unless set) take the harnesses in turn, one at a time
# each: a harness has a core of its own, as it had when they ran one by
# one, and its limit is its own, so two lanes halve the time on 2 cores.
set -euo pipefail
build=$1 fast=$2 slow=$3 slow_names=" $4 "
shift 4
: "${FIXTURES:?FIXTURES is not set (make sets it)}"
export FIXTURES
lanes=${FUZZ_JOBS:-1}

run_one() {
    local f=$1 n limit t0
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
        return 1
    fi
    echo "fuzz $n: $(grep -h stat::number_of_executed_units "$build/fuzz/$n.log" \
        | awk '{print $2}') executions in $(( $(date +%s) - t0 )) s"
}

# lane l: harnesses l, l + lanes, l + 2 * lanes, ... until one fails
lane() {
    local l=$1 i
    shift
    for (( i = l; i < $#; i += lanes )); do
        run_one "${@:i+1:1}" || return 1
    done
}

pids=()
for (( l = 0; l < lanes; l++ )); do
    lane "$l" "$@" &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
    wait "$p" || rc=1
done
exit $rc
