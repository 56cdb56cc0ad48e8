#!/usr/bin/env bash
# bench/peer_suite.sh: the peer rows of issues 28, 29 and 30, run by
# `make bench-peers` after the default model's comparison (docs/perf.md
# "Peer rows of issues 28-30").
#
# Models, each measured by bench/run.sh in peer mode (PEERS_ONLY=1), its
# kernels and serving interleaved with ik_llama.cpp (and llama.cpp when
# LLAMA_BIN is given), its own block in docs/perf.md (bench/peers.py
# --tag, rows marked met or missed):
#   1b-TYPE    `ngx_llm_engine synth --arch llama --shape 1b` (Llama-3.2-1B,
#              the llama3 vocabulary of `make deps`) in F16, quantized by
#              the peer's llama-quantize to each of SUITE_TYPES (Q4_K_M
#              Q5_K_M Q6_K Q8_0 IQ4_XS);
#   moe-Q4_K_M `synth --arch qwen3moe --shape 30b-a3b` (Qwen3-30B-A3B,
#              12 of 48 layers, qwen2 vocabulary), Q4_K_M; ik_llama.cpp
#              with -fmoe; kernels first, then serving (one model copy per
#              engine resident at a time);
#   gptoss     `synth --arch gpt-oss --shape 20b` (gpt-oss-20b, 8 of 24
#              layers, qwen2 vocabulary: o200k is in no fixture, the
#              published Harmony template), MXFP4 experts and F16 for the
#              rest as llama.cpp's converter writes them (no quantizer
#              run); ik_llama.cpp with -fmoe; kernels, then serving;
#   gemma      the real Gemma 3 270M Q4_K_M of `make deps` (GEMMA);
#   8b-TYPE    with PEER_8B=1 only: Llama-3-8B, 16 GB in F16, made, then
#              each type quantized, measured and deleted before the next
#              (about 30 GB of disk otherwise), the F16 deleted at the end;
#              the Q4_K_M's resident memory against `ngx_llm_engine plan`.
# Each model: prefill of 128 and 512 tokens, decode of 32 after each
# (PEER_SIZES, PEER_DECODE), ours with the roofline of the same run
# (PEER_BW=1), 16 streams through nginx against the peer's llama-server
# (PEER_STREAMS), as raw prompts to /v1/completions for the random-weight
# models (ik_llama.cpp's server aborts when its chat-output parser meets
# the invalid UTF-8 such a model emits), chat for the real Gemma.
#
# Environment: BUILD, IK_LLAMA_BIN (required), LLAMA_BIN, QUANTIZE (the
# peer's llama-quantize: LLAMA_BIN's, else IK_LLAMA_BIN's), SYNTH_DIR
# (where the model files go; build/bench/models), FIXTURES, GEMMA,
# SUITE ("1b moe gptoss gemma": which groups; set and empty: none, as
# for the 8B alone with PEER_8B=1), SUITE_TYPES, PEER_8B (0), KEEP (0:
# the synthetic files are deleted after their rows; 1: kept for a rerun),
# and run.sh's own (ROUNDS, THREADS, PEER_REPS, ...).

set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ngx_llm
FIXTURES=${FIXTURES:-$CACHE/fixtures}
GEMMA=${GEMMA:-$CACHE/gemma-3-270m-q4_k_m.gguf}
SYNTH_DIR=${SYNTH_DIR:-$BUILD/bench/models}
SUITE=${SUITE-1b moe gptoss gemma}
SUITE_TYPES=${SUITE_TYPES:-Q4_K_M Q5_K_M Q6_K Q8_0 IQ4_XS}
PEER_8B=${PEER_8B:-0}
KEEP=${KEEP:-0}
IK_LLAMA_BIN=${IK_LLAMA_BIN:-}
LLAMA_BIN=${LLAMA_BIN:-}
ENGINE=$BUILD/ngx_llm_engine
VOCABS=$FIXTURES/llama.cpp

die() { echo "peer_suite: $*" >&2; exit 1; }

[ -n "$IK_LLAMA_BIN" ] || die "IK_LLAMA_BIN is not set (docs/perf.md)"
if [ -z "${QUANTIZE:-}" ]; then
    for d in "$LLAMA_BIN" "$IK_LLAMA_BIN"; do
        [ -n "$d" ] && [ -x "$d/llama-quantize" ] \
            && { QUANTIZE=$d/llama-quantize; break; }
    done
fi
[ -x "${QUANTIZE:-}" ] || die "no llama-quantize (QUANTIZE=...)"
[ -x "$ENGINE" ] || die "$ENGINE is missing (make)"
mkdir -p "$SYNTH_DIR" || die "cannot create $SYNTH_DIR"

# synth ARCH SHAPE VOCAB TEMPLATE OUT: the F16 file, once
synth() {
    [ -s "$5" ] && return 0
    "$ENGINE" synth --arch "$1" --shape "$2" --vocab "$VOCABS/$3" \
        --template "$VOCABS/templates/$4" --type F16 "$5.tmp" \
        && mv "$5.tmp" "$5" || die "synth $1 $2 failed"
}

# quantize F16 OUT TYPE: by the peer's llama-quantize, once
quantize() {
    [ -s "$2" ] && return 0
    echo "peer_suite: $QUANTIZE ${1##*/} ${2##*/} $3"
    "$QUANTIZE" "$1" "$2.tmp" "$3" > "$2.log" 2>&1 \
        && mv "$2.tmp" "$2" || die "llama-quantize $3 failed (see $2.log)"
}

COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)
git -C "$ROOT" diff --quiet HEAD -- engine kernels 2>/dev/null \
    || COMMIT="$COMMIT+changes"

# run TAG MODEL [run.sh variables...]: one bench/run.sh in peer mode, its
# results kept as build/bench/results-TAG.txt
run() {
    local tag=$1 model=$2 serve_path=/v1/completions
    shift 2
    echo
    echo "=== $tag ($(date -u +%H:%M) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))"
    env PEER_SERVE_PATH="$serve_path" "$@" BUILD="$BUILD" MODEL="$model" \
        PEERS_ONLY=1 PEER_REPORT=0 \
        PEER_SIZES="${PEER_SIZES:-128 512}" PEER_DECODE="${PEER_DECODE:-32}" \
        PEER_STREAMS="${PEER_STREAMS:-16}" PEER_BW=1 \
        IK_LLAMA_BIN="$IK_LLAMA_BIN" LLAMA_BIN="$LLAMA_BIN" \
        "$ROOT/bench/run.sh" || echo "peer_suite: $tag failed" >&2
    cp "$BUILD/bench/results.txt" "$BUILD/bench/results-$tag.txt"
}

# report TAG TITLE MODEL RESULTS... [-- NOTES...]: the block of TAG in
# docs/perf.md from the joined results (REPORT_ARGS: more of peers.py's)
report() {
    local tag=$1 title=$2 model=$3 all=$BUILD/bench/results-$1-all.txt
    local notes=()
    shift 3
    : > "$all"
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        cat "$1" >> "$all"
        shift
    done
    [ "${1:-}" = -- ] && shift
    for n in "$@"; do notes+=(--note "$n"); done
    # run's default serving path for the random-weight models (gemma
    # passes chat), where a serving row ran: the serving paragraph's chat
    # requests are not what ran
    [ "$tag" = gemma3-270m ] || ! grep -q 'mode=stream' "$all" \
        || notes+=(--note "serving here: the same \
texts as one raw prompt each to /v1/completions on every server, no chat \
template (ik_llama.cpp's server aborts in its chat-output parser on a \
random-weight model's invalid UTF-8)")
    python3 "$ROOT/bench/peers.py" report --results "$all" \
        --md "${PERF_MD:-$ROOT/docs/perf.md}" --model "$model" \
        --tag "$tag" --title "$title" --targets --commit "$COMMIT" \
        ${REPORT_ARGS:-} "${notes[@]}"
}

# measure TAG TITLE MODEL [run.sh variables...]: run and report
measure() {
    local tag=$1 title=$2 model=$3
    shift 3
    run "$tag" "$model" "$@"
    report "$tag" "$title" "$model" "$BUILD/bench/results-$tag.txt"
}

# resident memory of the loaded engine against its plan (issue 28: within
# 5%): the peak resident set of `generate` (load, one token: the KV pool
# is allocated but untouched, so the weights and workspace are what is
# resident) against the plan's weights + workspace
memory_check() {
    local model=$1 rss plan w ws
    rss=$( { /usr/bin/time -f 'maxrss_kb %M' "$ENGINE" generate \
             --model "$model" --prompt hi --max-tokens 1 --threads 2 \
             >/dev/null; } 2>&1 | awk '/^maxrss_kb/ {print $2}')
    plan=$("$ENGINE" plan --model "$model" 2>&1)
    w=$(awk '/^weights/ {print $2}' <<<"$plan")
    ws=$(awk '/^workspace/ {print $2}' <<<"$plan")
    echo "peer_suite: ${model##*/}: resident ${rss:-?} kB (generate, peak)" \
         "against the plan's weights $w + workspace $ws bytes:" \
         "$(awk -v r="${rss:-0}" -v p=$((${w:-0} + ${ws:-0})) \
             'BEGIN { printf "%.3f", p ? r * 1024 / p : 0 }')x" \
        | tee "$BUILD/bench/memory-${model##*/}.txt"
    echo "$plan" | sed 's/^/    /' | tee -a "$BUILD/bench/memory-${model##*/}.txt"
}

for group in $SUITE; do
    case $group in
    1b)
        f16=$SYNTH_DIR/llama-1b-F16.gguf
        synth llama 1b ggml-vocab-llama-bpe.gguf \
            meta-llama-Llama-3.2-3B-Instruct.jinja "$f16"
        for t in $SUITE_TYPES; do
            q=$SYNTH_DIR/llama-1b-$t.gguf
            quantize "$f16" "$q" "$t"
            measure "1b-$t" "Llama-3.2-1B shape, $t (synthetic)" "$q"
            [ "$KEEP" = 1 ] || rm -f "$q"
        done
        [ "$KEEP" = 1 ] || rm -f "$f16"
        ;;
    moe)
        f16=$SYNTH_DIR/qwen3moe-30b-a3b-12l-F16.gguf
        q=$SYNTH_DIR/qwen3moe-30b-a3b-12l-Q4_K_M.gguf
        if [ ! -s "$q" ]; then
            synth qwen3moe 30b-a3b ggml-vocab-qwen2.gguf \
                Qwen-Qwen3-0.6B.jinja "$f16"
            quantize "$f16" "$q" Q4_K_M
            [ "$KEEP" = 1 ] || rm -f "$f16"
        fi
        # -fmoe: ik_llama.cpp's fused MoE (its llama-bench's switch takes
        # 0/1; its server has it on by default, -no-fmoe turns it off)
        run moe-kern "$q" PEER_SERVE=0 IK_BENCH_ARGS="-fmoe 1"
        run moe-serve "$q" PEER_KERNELS=0
        report moe-Q4_K_M \
            "Qwen3-30B-A3B shape, 12 of 48 layers, Q4_K_M (synthetic)" "$q" \
            "$BUILD/bench/results-moe-kern.txt" \
            "$BUILD/bench/results-moe-serve.txt" -- \
            "ik llama-bench: -fmoe 1"
        [ "$KEEP" = 1 ] || rm -f "$q"
        ;;
    gptoss)
        # the experts are MXFP4 in the synthetic file itself, as in the
        # converted checkpoint: no quantizer run
        f=$SYNTH_DIR/gpt-oss-20b-8l.gguf
        synth gpt-oss 20b ggml-vocab-qwen2.gguf openai-gpt-oss-120b.jinja \
            "$f"
        run gptoss-kern "$f" PEER_SERVE=0 IK_BENCH_ARGS="-fmoe 1"
        # the serving rows send raw prompts (run's /v1/completions), so no
        # chat template or reply parser takes part on either side. The
        # engine's watchdog is the default (auto: 20 x a step's expected
        # time from its tokens, ring 11; it was off while the bound came
        # from the warm-up's short steps and a loaded prefill outlasted it)
        run gptoss-serve "$f" PEER_KERNELS=0
        # issue 31's target: every kernel row >= 1.0x, decode included
        REPORT_ARGS="--decode-target 1.0" report gptoss-MXFP4 \
            "gpt-oss-20b shape, 8 of 24 layers, MXFP4 experts, F16 rest (synthetic)" \
            "$f" "$BUILD/bench/results-gptoss-kern.txt" \
            "$BUILD/bench/results-gptoss-serve.txt" -- \
            "ik llama-bench: -fmoe 1" \
            "serving: raw prompts to /v1/completions on both servers"
        [ "$KEEP" = 1 ] || rm -f "$f"
        ;;
    gemma)
        [ -s "$GEMMA" ] || die "$GEMMA is missing (make deps)"
        # the file has no chat template: Gemma 2's (Gemma 3's turn format;
        # the official Gemma 3 template is in no fixture) for every server
        tmpl=$VOCABS/templates/google-gemma-2-2b-it.jinja
        measure gemma3-270m "Gemma 3 270M, Q4_K_M (the real file)" "$GEMMA" \
            PEER_CHAT_TEMPLATE="$tmpl" PEER_SERVE_PATH=/v1/chat/completions \
            IK_SERVER_ARGS="--chat-template-file $tmpl" \
            LLAMA_SERVER_ARGS="--chat-template-file $tmpl"
        ;;
    *)
        die "unknown group '$group' in SUITE (1b moe gptoss gemma)"
        ;;
    esac
done

if [ "$PEER_8B" = 1 ]; then
    f16=$SYNTH_DIR/llama-8b-F16.gguf
    for t in $SUITE_TYPES; do
        q=$SYNTH_DIR/llama-8b-$t.gguf
        # the 16 GB F16 only when a type's file is not there (KEEP=1)
        if [ ! -s "$q" ]; then
            synth llama 8b ggml-vocab-llama-bpe.gguf \
                meta-llama-Llama-3.1-8B-Instruct.jinja "$f16"
            quantize "$f16" "$q" "$t"
        fi
        [ "$t" = Q4_K_M ] && memory_check "$q"
        measure "8b-$t" "Llama-3-8B shape, $t (synthetic)" "$q"
        [ "$KEEP" = 1 ] || rm -f "$q"
    done
    [ "$KEEP" = 1 ] || rm -f "$f16"
fi
