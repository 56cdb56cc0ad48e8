#!/usr/bin/env bash
# bench/run.sh: what `make bench` runs (docs/perf.md; issues 3, 4, 5).
#
# One run on this machine, in this order:
#   1. a private nginx (prefix build/bench/nginx, conf written below, the
#      module and engine copied to build/bench/bin first so that a rebuild
#      by someone else cannot pull the code from under the running nginx),
#      then ROUNDS rounds, each running every variant once, interleaved:
#        - bench/decode: DRAM read bandwidth (all threads, 1 GiB),
#          single-stream prefill and decode tokens/s, decode / roofline;
#        - bench/ring_ping: worker <-> engine round trip over the ring;
#        - the batching workload (docs/perf.md): 1, 4, 16, 64 concurrent
#          streaming chats,
#          64 tokens each, ignore_eos, greedy (bench/serve_bench.c), each
#          run's messages tagged so that no run finds an earlier one's
#          blocks in the prefix cache; and
#          16 again on an engine with max_batched_tokens 2048 (the GPU
#          default; the CPU's is 256);
#        - structured outputs: the 16 streams again, each under a
#          response_format that keeps it 64 tokens long, masked at each
#          (issue 12): a regex of a JSON string that never closes (one
#          state again and again: the mask cache's case) and a
#          json_schema whose string has minLength 400 (a new state each
#          character: masks computed afresh); tokens/s against the plain
#          16 of the same round, and per engine CPU second (steadier on a
#          shared machine), the ratios printed after the rounds (target
#          >= 0.8);
#        - shared prefix: one long system prompt, 16 different questions,
#          with prefix caching and without;
#        - HTTP overhead: GET /plain (`return 200`) against GET /v1/models
#          (the module, no engine) and GET /healthz (one ring round trip);
#   2. bench/plot.py: table to stdout, docs/perf.md, docs/perf.svg.
#
# Peer mode (docs/perf.md, "Against llama.cpp and ik_llama.cpp"): with
# LLAMA_BIN and/or IK_LLAMA_BIN set to folders holding llama-bench and
# llama-server, built by the user from llama.cpp's / ik_llama.cpp's public
# sources outside this repository, every round also runs, interleaved with
# ngx_llm on the same model and THREADS, the engines' order rotating each
# round:
#   - kernels: for each N of PEER_SIZES, prefill of one N-token prompt and
#     batch-1 decode after N tokens (128 tokens after 128, 64 after more):
#     bench/decode --bw 0 against llama-bench -o json (ik_llama.cpp: -gp
#     for the decode, -rtr 0 and -rtr 1);
#   - serving: PEER_STREAMS concurrent streaming clients (bench/serve_bench,
#     the workload above) against our nginx and each peer's llama-server
#     (-np 16 -c 8192, started once before the rounds);
# then bench/peers.py writes its two tables between its own markers in
# docs/perf.md. Without LLAMA_BIN and IK_LLAMA_BIN none of this runs.
# PEERS_ONLY=1 runs only the peer sections (and leaves plot.py's block).
#
# Every result line records the load average and the CPU cores the engine
# actually got, because other jobs on a 2-core machine stretch wall time.
#
# Environment: BUILD, MODEL, ROUNDS (3), THREADS (2), PORT, NGINX,
# PERF_MD, PERF_SVG; peer mode: LLAMA_BIN, IK_LLAMA_BIN, PEERS_ONLY (0),
# PEER_SIZES ("128 1024 4096"), PEER_STREAMS ("1 16 64"), PEER_SERVE_PATH
# (/v1/chat/completions; /v1/completions sends the same texts as a raw
# prompt, for random-weight models: see serve_bench.c), PEER_REPS (3,
# llama-bench -r), PEER_KERNELS (1), PEER_SERVE (1), PEER_DECODE (decode
# steps after N; default 128 after 128, 64 after more), PEER_BW (0; 1:
# ours' decode also measures the read bandwidth, so each decode row gets
# the roofline of the same run), PEER_TAG (bench/peers.py's block; empty:
# the block of the default model), PEER_TITLE, PEER_TARGETS (0; 1: rows
# marked met/missed against issues 28-30's targets), PEER_REPORT (1; 0:
# no report, the results file left for the caller), PEER_CHAT_TEMPLATE
# (a Jinja file for our engine's chat_template, for a model file without
# one; give the peers the same with --chat-template-file), ENGINE_EXTRA
# (more llm_engine directives, e.g. "watchdog off;"), and arguments added
# to a peer's llama-bench or llama-server (empty: its defaults):
# LLAMA_BENCH_ARGS, LLAMA_SERVER_ARGS, IK_BENCH_ARGS, IK_SERVER_ARGS;
# EMBED_GGUF: the embedding row's model (run_embed_peers below).

set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
MODEL=${MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/ngx_llm/SmolLM2-135M-Instruct.Q4_1.gguf}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
PORT=${PORT:-$((20000 + $$ % 20000))}
NGINX=${NGINX:-/usr/sbin/nginx}
PERF_MD=${PERF_MD:-$ROOT/docs/perf.md}
PERF_SVG=${PERF_SVG:-$ROOT/docs/perf.svg}
LLAMA_BIN=${LLAMA_BIN:-}
IK_LLAMA_BIN=${IK_LLAMA_BIN:-}
PEERS_ONLY=${PEERS_ONLY:-0}
PEER_SIZES=${PEER_SIZES:-128 1024 4096}
PEER_STREAMS=${PEER_STREAMS:-1 16 64}
PEER_REPS=${PEER_REPS:-3}
PEER_SERVE_PATH=${PEER_SERVE_PATH:-/v1/chat/completions}
PEER_KERNELS=${PEER_KERNELS:-1}
PEER_SERVE=${PEER_SERVE:-1}
declare -A PEER_BENCH_ARGS=([llama]=${LLAMA_BENCH_ARGS:-} \
                            [ik]=${IK_BENCH_ARGS:-})
declare -A PEER_SERVER_ARGS=([llama]=${LLAMA_SERVER_ARGS:-} \
                             [ik]=${IK_SERVER_ARGS:-})

B=$BUILD/bench
P=$B/nginx
RES=$B/results.txt
SB=$B/serve_bench
TICK=$(getconf CLK_TCK)

die() { echo "bench: $*" >&2; exit 1; }

for f in "$MODEL" "$BUILD/modules/ngx_http_llm_module.so" \
         "$BUILD/ngx_llm_engine" "$SB" "$B/decode" "$B/ring_ping"; do
    [ -e "$f" ] || die "\"$f\" is missing (run make bench, MODEL=...)"
done
command -v "$NGINX" >/dev/null || die "no nginx at \"$NGINX\""

# peers: name -> folder of llama-bench and llama-server (peer mode)
declare -A PEER_DIR=()
[ -n "$LLAMA_BIN" ] && PEER_DIR[llama]=$LLAMA_BIN
[ -n "$IK_LLAMA_BIN" ] && PEER_DIR[ik]=$IK_LLAMA_BIN
PEERS=()
for e in llama ik; do
    [ -n "${PEER_DIR[$e]:-}" ] || continue
    for f in llama-bench llama-server; do
        [ -x "${PEER_DIR[$e]}/$f" ] \
            || die "${PEER_DIR[$e]}/$f is missing (LLAMA_BIN / IK_LLAMA_BIN:" \
                   "folders of llama-bench and llama-server, docs/perf.md)"
    done
    PEER_DIR[$e]=$(realpath "${PEER_DIR[$e]}")
    PEERS+=("$e")
done
# the peers run in build/bench/peers: absolute paths
[ ${#PEERS[@]} -gt 0 ] && MODEL=$(realpath "$MODEL")
[ "$PEERS_ONLY" = 1 ] && [ ${#PEERS[@]} = 0 ] \
    && die "PEERS_ONLY=1 without LLAMA_BIN or IK_LLAMA_BIN"

# copy, then rename: a running process keeps the inode it mapped
mkdir -p "$B/bin"
for f in "$BUILD/modules/ngx_http_llm_module.so" "$BUILD/ngx_llm_engine"; do
    cp "$f" "$B/bin/.tmp" && mv -f "$B/bin/.tmp" "$B/bin/${f##*/}" \
        || die "cannot copy $f"
done
# peer mode's kernels run bench/decode for the whole run: a copy too (a
# rebuild by someone else between rounds changed it under a peer run), and
# the commit of the tree at the start
if [ ${#PEERS[@]} -gt 0 ]; then
    cp "$B/decode" "$B/bin/.tmp" && mv -f "$B/bin/.tmp" "$B/bin/decode" \
        || die "cannot copy $B/decode"
    PEER_COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)
    git -C "$ROOT" diff --quiet HEAD -- engine kernels 2>/dev/null \
        || PEER_COMMIT="$PEER_COMMIT+changes"
fi

# the run's start, for the report's "Measured" (bench/peers.py); not a
# RESULT line, so the parsers pass it over
echo "RUN start_utc=$(date -u +%Y-%m-%dT%H:%MZ)" > "$RES"
loadavg() { cut -d' ' -f1-3 /proc/loadavg | tr ' ' /; }
record() {  # record LINE: the RESULT line plus facts about the moment
    echo "$1 $2" >> "$RES"
}
echo "bench: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
echo "bench: load average $(loadavg) at start; results in $RES"


# --- 1. bandwidth, single-stream decode and prefill -----------------------
# run once per round (in the loop below): the best round is the machine's

run_decode() {  # run_decode ROUND
    local out bw wb roof pre dec decmean frac la
    la=$(loadavg)
    out=$("$B/decode" --model "$MODEL" --threads "$THREADS") \
        || { echo "bench: bench/decode failed" >&2; return; }
    bw=$(awk '/^read bandwidth/ {print $3}' <<<"$out")
    wb=$(awk '/^weights\/token/ {print $2}' <<<"$out")
    roof=$(awk '/^roofline/ {print $2}' <<<"$out")
    pre=$(awk '/^prefill/ {print $2}' <<<"$out")
    dec=$(awk '/^decode / {print $2}' <<<"$out")
    decmean=$(sed -n 's/^decode .*mean \([0-9.]*\).*/\1/p' <<<"$out")
    frac=$(awk '/^decode\/roofline/ {sub("%", "", $2); print $2}' <<<"$out")
    printf '  %-12s read %s GB/s, roofline %s tok/s, prefill %s tok/s, ' \
        decode "$bw" "$roof" "$pre"
    printf 'decode %s tok/s (mean %s): %s%% of roofline  [load %s]\n' \
        "$dec" "$decmean" "$frac" "$la"
    record "RESULT mode=decode threads=$THREADS bw_gbs=$bw weight_mb=$wb roof_tok_s=$roof prefill_tok_s=$pre decode_tok_s=$dec decode_mean_tok_s=$decmean roof_pct=$frac" \
           "round=$1 variant=decode load=$la"

    # a long prompt: attention dominates both its prefill and the decode
    # after it (the grouped prefill attention, the f16 cache)
    la=$(loadavg)
    out=$("$B/decode" --model "$MODEL" --threads "$THREADS" --prompt 1024 \
          --decode 32) \
        || { echo "bench: bench/decode --prompt 1024 failed" >&2; return; }
    pre=$(awk '/^prefill/ {print $2}' <<<"$out")
    dec=$(awk '/^decode / {print $2}' <<<"$out")
    printf '  %-12s prefill %s tok/s, then decode %s tok/s  [load %s]\n' \
        long-prompt "$pre" "$dec" "$la"
    record "RESULT mode=long_prompt prompt=1024 prefill_tok_s=$pre decode_tok_s=$dec" \
           "round=$1 variant=long-prompt load=$la"
}


# --- 2. ring round trip (once per round) -------------------------------------

run_ring() {  # run_ring ROUND
    local out p50 p99 la
    la=$(loadavg)
    out=$("$B/ring_ping" "$B/bin/ngx_llm_engine" "$MODEL" 20000 2>/dev/null) \
        || { echo "bench: bench/ring_ping failed" >&2; return; }
    p50=$(sed -n 's/.*p50 \([0-9.]*\) us.*/\1/p' <<<"$out")
    p99=$(sed -n 's/.*p99 \([0-9.]*\) us.*/\1/p' <<<"$out")
    printf '  %-12s 20000 PING round trips: p50 %s us, p99 %s us  [load %s]\n' \
        ring "$p50" "$p99" "$la"
    record "RESULT mode=ring trips=20000 p50_us=$p50 p99_us=$p99" \
           "round=$1 variant=ring load=$la"
}


# --- 3. through nginx --------------------------------------------------------

SYSTEM=$B/system_prompt.txt
cat > "$SYSTEM" <<'EOF'
You are the help desk assistant of Northwind Outdoor Supply, a shop that sells camping, hiking and climbing gear. Answer in at most three short sentences, in plain English, without lists. Be friendly and precise. Our opening hours are Monday to Friday from nine to six and Saturday from ten to four; we are closed on Sundays and public holidays. Orders over fifty euros ship free within the country; smaller orders cost four euros ninety to ship. Returns are accepted within thirty days if the item is unused and in its original packaging; the customer pays return shipping unless the item is faulty. Tents, sleeping bags and stoves carry a two-year warranty; climbing ropes and harnesses must be inspected by our staff before any warranty claim. We rent tents and backpacks by the week. We never give medical advice and never recommend routes in avalanche terrain. If you do not know the answer, say so and suggest calling the shop.
EOF

mkdir -p "$P/logs" "$P/conf"
# prefix caching off needs a switch in the module and the engine; without
# it, the "off" variant defeats the cache with a unique first block
engine_params() {
    cat <<EOF
        model              $MODEL;
        binary             $B/bin/ngx_llm_engine;
        threads            $THREADS;
        max_num_seqs       64;
EOF
    # a model file without a template (Gemma 3 270M): PEER_CHAT_TEMPLATE
    [ -z "${PEER_CHAT_TEMPLATE:-}" ] \
        || echo "        chat_template      $PEER_CHAT_TEMPLATE;"
    # more llm_engine directives (the gpt-oss shape under load: watchdog)
    [ -z "${ENGINE_EXTRA:-}" ] || echo "        $ENGINE_EXTRA"
}
write_conf() {  # write_conf FILE WITH_NOCACHE_ENGINE
    {
        echo "load_module $B/bin/ngx_http_llm_module.so;"
        echo "worker_processes 1;"
        echo "error_log logs/error.log notice;"
        echo "pid logs/nginx.pid;"
        echo "events { worker_connections 4096; }"
        echo "http {"
        echo "    access_log off;"
        echo "    keepalive_requests 1000000;"
        echo "    llm_engine main {"
        echo "        served_model_name  smollm2;"
        engine_params
        echo "    }"
        # peer mode alone needs the main engine only (one copy of a large
        # model resident, not three)
        if [ "$PEERS_ONLY" != 1 ] && [ "$2" = 1 ]; then
            echo "    llm_engine nocache {"
            echo "        served_model_name  smollm2;"
            echo "        prefix_caching     off;"
            echo "        kv_cache_memory    512m;"
            engine_params
            echo "    }"
            echo "    server {"
            echo "        listen 127.0.0.1:$((PORT + 1));"
            echo "        location /v1/ { llm_api nocache; }"
            echo "        location = /healthz { llm_health nocache; }"
            echo "    }"
        fi
        # the same 16 streams under the GPU's larger step budget
        if [ "$PEERS_ONLY" != 1 ]; then
        echo "    llm_engine budget2048 {"
        echo "        served_model_name  smollm2;"
        echo "        max_batched_tokens 2048;"
        echo "        kv_cache_memory    512m;"
        engine_params
        echo "    }"
        echo "    server {"
        echo "        listen 127.0.0.1:$((PORT + 2));"
        echo "        location /v1/ { llm_api budget2048; }"
        echo "        location = /healthz { llm_health budget2048; }"
        echo "    }"
        fi
        echo "    server {"
        echo "        listen 127.0.0.1:$PORT;"
        echo "        location /v1/ { llm_api main; }"
        echo "        location = /healthz { llm_health main; }"
        echo "        location = /plain { return 200 \"ok\\n\"; }"
        echo "    }"
        echo "}"
    } > "$1"
}

NOCACHE=0
write_conf "$P/conf/probe.conf" 1
if "$NGINX" -t -q -p "$P/" -c conf/probe.conf 2>/dev/null; then
    NOCACHE=1
fi
write_conf "$P/conf/nginx.conf" "$NOCACHE"

declare -A PEER_PID=() PEER_PORT=()
stop_peers() {  # the llama-servers this script started, by their pids
    local e
    for e in "${!PEER_PID[@]}"; do
        kill "${PEER_PID[$e]}" 2>/dev/null
        wait "${PEER_PID[$e]}" 2>/dev/null
        unset "PEER_PID[$e]"
    done
}
stop_nginx() {
    [ -s "$P/logs/nginx.pid" ] || return 0
    "$NGINX" -p "$P/" -c conf/nginx.conf -s stop 2>/dev/null
    for _ in $(seq 50); do
        [ -e "$P/logs/nginx.pid" ] || break
        sleep 0.1
    done
}
trap 'stop_nginx; stop_peers' EXIT
stop_nginx
# peer kernels alone: no nginx (its engine would hold a second copy of the
# model while bench/decode and the peers run)
NEED_NGINX=1
[ "$PEERS_ONLY" = 1 ] && [ "$PEER_SERVE" != 1 ] && NEED_NGINX=0
if [ "$NEED_NGINX" = 1 ]; then
"$NGINX" -p "$P/" -c conf/nginx.conf || die "nginx did not start (see $P/logs/error.log)"
fi

engine_pid() {  # engine_pid PORT: from the health answer
    curl -s -m 2 "http://127.0.0.1:$1/healthz" \
        | sed -n 's/.*"engine_pid":\([0-9]*\).*/\1/p'
}
wait_ready() {
    for _ in $(seq 240); do
        [ -n "$(engine_pid "$1")" ] && return 0
        sleep 0.5
    done
    die "engine behind port $1 not ready after 120 s (see $P/logs/error.log)"
}
if [ "$NEED_NGINX" = 1 ]; then
    wait_ready "$PORT"
    [ "$PEERS_ONLY" = 1 ] || wait_ready $((PORT + 2))
    [ "$PEERS_ONLY" = 1 ] || [ "$NOCACHE" != 1 ] || wait_ready $((PORT + 1))
fi

cpu_ticks() {  # cpu_ticks PID: user + system ticks of the whole process
    awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}

workers_ticks() {  # nginx's worker processes: the master's children
    local master sum=0 w
    master=$(cat "$P/logs/nginx.pid" 2>/dev/null) || { echo 0; return; }
    for w in $(pgrep -P "$master"); do
        sum=$((sum + $(cpu_ticks "$w")))
    done
    echo "$sum"
}

# a schema whose answer cannot end before 64 tokens: constrained streams as
# long as the plain ones
OPEN_STRING='{"type":"regex","regex":"\\{\"answer\": \"[a-zA-Z0-9 ,.]+"}'
LONG_ANSWER='{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object","properties":{"answer":{"type":"string","minLength":400}},"required":["answer"]}}}'

# run_variant ROUND NAME PORT serve_bench-args...
run_variant() {
    local round=$1 name=$2 port=$3 pid t0 t1 w0 w1 out line wall cores la
    local wcores
    shift 3
    pid=${SERVER_PID:-$(engine_pid "$port")}
    la=$(loadavg)
    t0=$(cpu_ticks "$pid")
    w0=$(workers_ticks)
    out=$("$SB" "$@" --port "$port" 2>&1)
    t1=$(cpu_ticks "$pid")
    w1=$(workers_ticks)
    line=$(grep '^RESULT' <<<"$out")
    if [ -z "$line" ]; then
        echo "bench: $name failed: $out" >&2
        return
    fi
    wall=$(sed -n 's/.* \(wall_s\|seconds\)=\([0-9.]*\).*/\2/p' <<<"$line")
    cores=$(awk -v d=$((t1 - t0)) -v t="$TICK" -v w="$wall" \
                'BEGIN { printf "%.2f", (w > 0 ? d / t / w : 0) }')
    wcores=$(awk -v d=$((w1 - w0)) -v t="$TICK" -v w="$wall" \
                 'BEGIN { printf "%.2f", (w > 0 ? d / t / w : 0) }')
    printf '  %-12s %s  [load %s, engine %s cores, nginx %s]\n' "$name" \
        "$(grep -v '^RESULT' <<<"$out" | tail -n 1)" "$la" "$cores" "$wcores"
    record "$line" "round=$round variant=$name load=$la engine_cores=$cores nginx_cores=$wcores"
}

# the same workload inside the engine (engine/server/cli_bench.c: no nginx, no
# ring, same step budget as the nginx engine): what the serving path costs
run_engine_bench() {
    local out la
    la=$(loadavg)
    out=$("$B/bin/ngx_llm_engine" bench --model "$MODEL" --streams 1,16 \
              --tokens 64 --threads "$THREADS" --max-batched-tokens 256 2>&1)
    awk -v r="$1" -v la="$la" '
        $1 ~ /^[0-9]+$/ && NF >= 14 {
            printf "RESULT mode=engine streams=%d tokens=%d wall_s=%s " \
                   "tok_s=%s ttft_p50_ms=%s tpot_p50_ms=%s round=%s " \
                   "variant=engine-%d load=%s engine_cores=%s\n",
                   $1, $2, $3, $5, $6, $9, r, $1, la, $4
        }' <<<"$out" >> "$RES"
    awk '$1 ~ /^[0-9]+$/ && NF >= 14 {
            printf "  engine-%-5s %s streams in the engine alone: %.1f " \
                   "tokens/s; TTFT p50 %s ms; TPOT p50 %s ms  [%s cores]\n",
                   $1, $1, $5, $6, $9, $4 }' <<<"$out"
}

# --- peer mode: llama.cpp and ik_llama.cpp, interleaved with ours -----------

PEER_OUT=$B/peers
[ ${#PEERS[@]} -gt 0 ] && mkdir -p "$PEER_OUT"

start_peers() {  # each peer's llama-server on a port of its own
    local e i=10 code jinja cmd
    for e in "${PEERS[@]}"; do
        PEER_PORT[$e]=$((PORT + i)); i=$((i + 1))
        # --jinja: the model's own chat template, as ours applies it (without
        # it ik_llama.cpp's server uses a built-in chatml with no default
        # system block: half the prompt tokens)
        # (the help read whole first: grep -q stops reading, and pipefail
        # would take the server's SIGPIPE for a missing flag)
        jinja=$("${PEER_DIR[$e]}/llama-server" --help 2>&1)
        grep -q -- '--jinja' <<<"$jinja" && jinja=--jinja || jinja=
        cmd=("${PEER_DIR[$e]}/llama-server" -m "$MODEL" -t "$THREADS" \
             -np 16 -c 8192 $jinja ${PEER_SERVER_ARGS[$e]} \
             --host 127.0.0.1 --port "${PEER_PORT[$e]}")
        echo "${cmd[*]}" > "$PEER_OUT/$e-server.log"
        # in build/bench/peers: ik_llama.cpp's server writes llama.log in
        # its working directory
        (cd "$PEER_OUT" && exec "${cmd[@]}" >> "$e-server.log" 2>&1) &
        PEER_PID[$e]=$!
    done
    for e in "${PEERS[@]}"; do
        for _ in $(seq 240); do
            code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' \
                   "http://127.0.0.1:${PEER_PORT[$e]}/health")
            [ "$code" = 200 ] && break
            kill -0 "${PEER_PID[$e]}" 2>/dev/null \
                || die "$e's llama-server exited (see $PEER_OUT/$e-server.log)"
            sleep 0.5
        done
        [ "$code" = 200 ] \
            || die "$e's llama-server not ready after 120 s ($PEER_OUT/$e-server.log)"
        echo "   $e: llama-server on 127.0.0.1:${PEER_PORT[$e]} (pid ${PEER_PID[$e]})"
    done
}

rotate() {  # rotate ROUND WORDS...: the words, starting at (ROUND-1) mod n
    local r=$1 n k
    shift
    n=$#
    for k in $(seq 0 $((n - 1))); do
        local j=$(( (k + r - 1) % n + 1 ))
        printf '%s ' "${!j}"
    done
}

peer_bench() {  # peer_bench ENGINE KIND CTX ROUND [RTR] -- llama-bench args
    local e=$1 kind=$2 ctx=$3 r=$4 rtr=$5 la out line v
    shift 6
    la=$(loadavg)
    out=$PEER_OUT/$e-bench.json
    v=kern-$e${rtr:+-rtr$rtr}-$kind-$ctx
    if ! (cd "$PEER_OUT" && exec "${PEER_DIR[$e]}/llama-bench" \
            -m "$MODEL" -t "$THREADS" -r "$PEER_REPS" "$@" \
            ${rtr:+-rtr "$rtr"} ${PEER_BENCH_ARGS[$e]} -o json) \
            > "$out" 2> "$PEER_OUT/$e-bench.log"
    then
        echo "bench: $e llama-bench $* failed (see $PEER_OUT/$e-bench.log)" >&2
        return
    fi
    line=$(python3 "$ROOT/bench/peers.py" bench-result --json "$out" \
           --engine "$e" --kind "$kind" --ctx "$ctx" ${rtr:+--rtr "$rtr"} \
           --tail "threads=$THREADS round=$r variant=$v load=$la") \
        || { echo "bench: $e: no result in $out" >&2; return; }
    echo "$line" >> "$RES"
    printf '  %-24s %s tok/s (mean %s)  [load %s]\n' "$v" \
        "$(sed -n 's/.* tok_s=\([0-9.]*\).*/\1/p' <<<"$line")" \
        "$(sed -n 's/.* mean_tok_s=\([0-9.]*\).*/\1/p' <<<"$line")" "$la"
}

run_peer_kernels() {  # run_peer_kernels ROUND
    local r=$1 n d e la out pre dec mean roof
    for n in $PEER_SIZES; do
        d=64; [ "$n" -le 128 ] && d=128
        d=${PEER_DECODE:-$d}
        for e in $(rotate "$r" ours "${PEERS[@]}"); do
            case $e in
            ours)
                la=$(loadavg)
                out=$("$B/bin/decode" --model "$MODEL" --threads "$THREADS" \
                      --prompt "$n" --decode "$d" \
                      $([ "${PEER_BW:-0}" = 1 ] || echo --bw 0)) \
                    || { echo "bench: bench/decode --prompt $n failed" >&2
                         continue; }
                pre=$(awk '/^prefill/ {print $2}' <<<"$out")
                dec=$(awk '/^decode / {print $2}' <<<"$out")
                mean=$(sed -n 's/^decode .*mean \([0-9.]*\).*/\1/p' <<<"$out")
                # the roofline of this run: read bandwidth / weight bytes
                # a token reads (bench/decode)
                roof=
                [ "${PEER_BW:-0}" = 1 ] && roof=" bw_gbs=$(awk '/^read bandwidth/ {print $3}' <<<"$out") roof_tok_s=$(awk '/^roofline/ {print $2}' <<<"$out")"
                record "RESULT mode=kern engine=ours kind=prefill ctx=$n n_prompt=$n n_gen=0 tok_s=$pre threads=$THREADS" \
                       "round=$r variant=kern-ours-prefill-$n load=$la"
                record "RESULT mode=kern engine=ours kind=decode ctx=$n n_prompt=$n n_gen=$d tok_s=$dec mean_tok_s=$mean threads=$THREADS$roof" \
                       "round=$r variant=kern-ours-decode-$n load=$la"
                printf '  %-24s prefill %s tok/s, decode %s tok/s after %s (mean %s)  [load %s]\n' \
                    "kern-ours-$n" "$pre" "$dec" "$n" "$mean" "$la"
                ;;
            llama)
                peer_bench llama prefill "$n" "$r" "" -- -p "$n" -n 0
                peer_bench llama decode "$n" "$r" "" -- -p 0 -n "$d" -d "$n"
                ;;
            ik)
                # run-time repacking of the weights on and off: the better
                # one is the table's
                for rtr in 0 1; do
                    peer_bench ik prefill "$n" "$r" "$rtr" -- -p "$n" -n 0
                    peer_bench ik decode "$n" "$r" "$rtr" -- -p 0 -n 0 \
                        -gp "$n,$d"
                done
                ;;
            esac
        done
    done
}

run_peer_serve() {  # run_peer_serve ROUND
    local r=$1 n e
    for n in $PEER_STREAMS; do
        for e in $(rotate "$r" ours "${PEERS[@]}"); do
            if [ "$e" = ours ]; then
                run_variant "$r" "peer-serve-ours-$n" "$PORT" stream \
                    --streams "$n" --tokens 64 --tag "r$r-$n-p" \
                    --path "$PEER_SERVE_PATH"
            else
                SERVER_PID=${PEER_PID[$e]} run_variant "$r" \
                    "peer-serve-$e-$n" "${PEER_PORT[$e]}" stream \
                    --streams "$n" --tokens 64 --tag "r$r-$n-p" \
                    --path "$PEER_SERVE_PATH"
            fi
        done
    done
}

echo
echo "== 1. bench/decode, bench/ring_ping and through nginx on 127.0.0.1:$PORT, $ROUNDS rounds, interleaved"
[ ${#PEERS[@]} -gt 0 ] && echo "   peer mode: ngx_llm against ${PEERS[*]} in every round"
if [ "$PEERS_ONLY" = 1 ]; then
    :   # one engine: no prefix-caching variants
elif [ "$NOCACHE" = 1 ]; then
    echo "   prefix caching off: a second engine with prefix_caching off"
    OFF_PORT=$((PORT + 1)); OFF_ARGS=()
else
    echo "   prefix caching off: no prefix_caching switch in this build;" \
         "a unique first block per request defeats the cache instead"
    OFF_PORT=$PORT
fi
if [ ${#PEERS[@]} -gt 0 ] && [ "$PEER_SERVE" = 1 ]; then
    start_peers
fi
for r in $(seq "$ROUNDS"); do
    echo " round $r"
    if [ ${#PEERS[@]} -gt 0 ]; then
        [ "$PEER_KERNELS" = 1 ] && run_peer_kernels "$r"
        [ "$PEER_SERVE" = 1 ] && run_peer_serve "$r"
    fi
    [ "$PEERS_ONLY" = 1 ] && continue
    run_decode "$r"
    run_ring "$r"
    for n in 1 4 16 64; do
        run_variant "$r" "streams-$n" "$PORT" stream --streams "$n" \
            --tokens 64 --tag "r$r-$n"
    done
    run_variant "$r" streams-16-mbt2048 $((PORT + 2)) stream --streams 16 \
        --tokens 64 --tag "r$r-16b"
    run_variant "$r" constrained-16 "$PORT" stream --streams 16 \
        --tokens 64 --tag "r$r-16c" --response-format "$OPEN_STRING"
    run_variant "$r" constrained-16-count "$PORT" stream --streams 16 \
        --tokens 64 --tag "r$r-16d" --response-format "$LONG_ANSWER"
    run_engine_bench "$r"
    run_variant "$r" prefix-on "$PORT" stream --streams 16 --tokens 32 \
        --system-file "$SYSTEM"
    [ "$NOCACHE" = 1 ] || OFF_ARGS=(--bust "r$r")
    run_variant "$r" prefix-off "$OFF_PORT" stream --streams 16 --tokens 32 \
        --system-file "$SYSTEM" "${OFF_ARGS[@]}"
    for path in /plain /v1/models /healthz; do
        run_variant "$r" "http$path" "$PORT" http --path "$path" \
            --conns 8 --seconds 3
    done
done
stop_nginx
stop_peers
trap - EXIT

# --- peer mode: the embedding row (issue 32), its own run -------------------
# EMBED_GGUF: a bge-small-shaped encoder (tools/bert_oracle.py --bench
# OUT.gguf [f16|f32]); bench/embed_peers.py starts its own nginx and each
# peer's llama-server --embedding, ROUNDS rounds interleaved, and writes
# its block in docs/perf.md. Without EMBED_GGUF the row is skipped.
run_embed_peers() {
    local args=()
    if [ -z "${EMBED_GGUF:-}" ]; then
        echo "   embeddings: skipped (EMBED_GGUF unset: tools/bert_oracle.py" \
             "--bench OUT.gguf makes the model)"
        return
    fi
    [ -n "${PEER_DIR[llama]:-}" ] && args+=(--llama "${PEER_DIR[llama]}")
    [ -n "${PEER_DIR[ik]:-}" ] && args+=(--ik "${PEER_DIR[ik]}")
    echo
    echo "== embeddings: ngx_llm against ${PEERS[*]} (bench/embed_peers.py)"
    python3 "$ROOT/bench/embed_peers.py" --gguf "$EMBED_GGUF" \
        --build "$BUILD" --rounds "$ROUNDS" --threads "$THREADS" \
        --port $((PORT + 20)) --nginx "$NGINX" --md "$PERF_MD" "${args[@]}" \
        || echo "bench: the embedding row failed" >&2
}
[ ${#PEERS[@]} -gt 0 ] && run_embed_peers

# PEER_REPORT=0: the caller reports (bench/peer_suite.sh joins two runs)
if [ ${#PEERS[@]} -gt 0 ] && [ "${PEER_REPORT:-1}" = 1 ]; then
    echo
    echo "== peers: ngx_llm against ${PEERS[*]} (bench/peers.py)"
    notes=()
    for e in "${PEERS[@]}"; do
        [ -n "${PEER_BENCH_ARGS[$e]}" ] \
            && notes+=(--note "$e llama-bench: ${PEER_BENCH_ARGS[$e]}")
        [ -n "${PEER_SERVER_ARGS[$e]}" ] \
            && notes+=(--note "$e llama-server: ${PEER_SERVER_ARGS[$e]}")
    done
    extra=()
    [ -n "${PEER_TAG:-}" ] && extra+=(--tag "$PEER_TAG")
    [ -n "${PEER_TITLE:-}" ] && extra+=(--title "$PEER_TITLE")
    [ "${PEER_TARGETS:-0}" = 1 ] && extra+=(--targets)
    python3 "$ROOT/bench/peers.py" report --results "$RES" --md "$PERF_MD" \
        --model "$MODEL" "${notes[@]}" "${extra[@]}" --commit "$PEER_COMMIT"
fi
[ "$PEERS_ONLY" = 1 ] && exit 0

# constrained / unconstrained tokens/s, per round (the two ran back to back),
# of the wall clock and per engine CPU second
constrained_ratio() {  # constrained_ratio VARIANT
    awk -v name="$1" '
        /variant=streams-16 / || $0 ~ "variant=" name " " {
            for (i = 1; i <= NF; i++) {
                split($i, kv, "=")
                f[kv[1]] = kv[2]
            }
            t[f["round"], f["variant"]] = f["tok_s"]
            c[f["round"], f["variant"]] = f["engine_cores"]
        }
        END {
            for (r = 1; (r, "streams-16") in t; r++) {
                u = t[r, "streams-16"]; k = t[r, name]
                uc = c[r, "streams-16"]; kc = c[r, name]
                if (u > 0 && k > 0 && uc > 0 && kc > 0) {
                    w = k / u; p = (k / kc) / (u / uc)
                    printf "  round %d: %s %.1f / unconstrained %.1f " \
                           "tokens/s = %.2f; per engine CPU second %.2f\n",
                           r, name, k, u, w, p
                    if (w > bw) bw = w
                    if (p > bp) bp = p
                }
            }
            printf "  %s: 16 constrained streams at %.2f of the plain 16 " \
                   "streams'"'"' tokens/s, %.2f per engine CPU second (best " \
                   "round; target >= 0.8)\n", name, bw, bp
        }' "$RES"
}
echo
echo "== structured outputs (16 streams under a response_format)"
constrained_ratio constrained-16
constrained_ratio constrained-16-count


# --- 4. report ---------------------------------------------------------------

echo
echo "== 2. summary (best round of $ROUNDS per variant)"
python3 "$ROOT/bench/plot.py" --results "$RES" --md "$PERF_MD" \
    --svg "$PERF_SVG" --nocache-switch "$NOCACHE" \
    --commit "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
