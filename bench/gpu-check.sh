#!/usr/bin/env bash
# The CUDA check in one command, for a machine with one GPU (H200 target),
# within 10 minutes. Writes its report under $OUT (7 files):
#
#   env.txt        nvidia-smi, nvcc, driver
#   build.log      the build on that machine (or why the prepared one ran)
#   test_cuda.tap  kernels vs CPU references (sampling: device tokens and
#                  RNG == llm_sample), goldens end to end on GPU, batched
#                  (graph) == unbatched, TP=2/4 == TP=1 (t/unit/test_cuda.c)
#   tp.txt         with >1 GPU: `generate --backend cuda --tensor-parallel
#                  N` greedy ids == TP=1's (NCCL); with 1 GPU: SKIP
#   sanitizer.log  compute-sanitizer memcheck over the kernel tests
#   bench.txt      synthetic 8B and 1B bf16: HBM copy bandwidth, batch-1
#                  roofline, TTFT / TPOT / tokens/s at batch 1, 8, 64, 256
#   summary.txt    one line per stage: PASS / FAIL / SKIP
#
# Every stage runs under a share of one deadline (BUDGET seconds, default
# 570, inside the device tool's 600), so the whole check ends in time even
# when the build there is slow; a stage with no time left is SKIP.
#
# Two steps, because the GPU machine may lack the engine's build
# dependencies (pcre2, cjson, utf8proc headers) and cannot download:
#
#   here:   bench/gpu-check.sh --prepare
#           builds build/t/test_cuda and build/gpu_bench and copies them,
#           their non-CUDA shared libraries and the tiny260K models of
#           `make deps` (tools/fixtures.py) into .gpucheck/ (git-ignored,
#           ~10 MB; the 98 MB default model stays here)
#   there:  run tool, carry [".gpucheck"], command:
#           bash bench/gpu-check.sh            (OUT is set by the tool)
#
# There it first tries a fresh build (make); if that fails it runs the
# prepared binaries. --dry-run checks the script's own logic with no GPU.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
PREP=$ROOT/.gpucheck
OUT=${OUT:-/tmp/gpu-check}
JOBS=$(nproc 2>/dev/null || echo 4)
export PATH="$PATH:/usr/local/cuda/bin"
NVCC=${NVCC:-nvcc}
BUDGET=${BUDGET:-570}
STORIES=models/tiny260K-f32.gguf

# seconds for a stage: its cap, or what is left after `reserve` seconds
# kept for the stages after it (0: no time)
slot() {            # cap reserve
    local left=$((BUDGET - SECONDS - $2))
    [ "$left" -lt "$1" ] && echo $((left > 0 ? left : 0)) || echo "$1"
}

engine_objs() {
    local f
    for f in build/obj-cuda/engine/*/*.o build/obj-cuda/kernels/*.o; do
        [ "$f" = build/obj-cuda/engine/server/main.o ] || [ ! -e "$f" ] || echo "$f"
    done
}

# CUDA's libraries on that machine: the toolkit's, else the pip wheels'
cuda_lib_path() {
    local d p=""
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib \
             $(find /usr/local /opt /usr/lib -xdev \( -name 'libcublasLt.so.13' \
                   -o -name 'libcudart.so.13' -o -name 'libnccl.so.2' \) \
                   -printf '%h\n' 2>/dev/null | sort -u); do
        [ -d "$d" ] && p="$p:$d"
    done
    echo "${p#:}"
}

build_all() {
    make -j"$JOBS" engine build/t/test_cuda || return 1
    # shellcheck disable=SC2046
    "$NVCC" -O2 -std=c++17 -Iengine -Ikernels \
        -gencode arch=compute_90,code=sm_90 \
        -o build/gpu_bench bench/gpu_bench.cu $(engine_objs) \
        -lpcre2-8 -lcjson -lutf8proc -lm -lpthread -lcublasLt -lnccl
}

prepare() {
    local fixtures=${FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/ngx_llm/fixtures}
    set -e
    make deps
    build_all
    rm -rf "$PREP"
    mkdir -p "$PREP/bin" "$PREP/lib" "$PREP/fixtures/models"
    cp build/t/test_cuda build/gpu_bench build/ngx_llm_engine "$PREP/bin/"
    # the engine's own dependencies and the CUDA runtime (small); cuBLASLt
    # and NCCL (218 MB here) come from that machine: its toolkit or the
    # nvidia-nccl-cu13 wheel of its Python (same major version, 13)
    for lib in libpcre2-8 libcjson libutf8proc libcudart; do
        ldd build/t/test_cuda | awk -v l="$lib" '$1 ~ "^"l {print $3}' \
            | xargs -r -I{} cp -L {} "$PREP/lib/"
    done
    cp "$fixtures"/models/tiny260K-*.gguf "$PREP/fixtures/models/"
    du -sh "$PREP"
    echo "prepared: run the device tool with carry [\".gpucheck\"] and"
    echo "          command: bash bench/gpu-check.sh"
}

stage() {          # name status detail
    printf '%-12s %-5s %s\n' "$1" "$2" "$3" | tee -a "$OUT/summary.txt"
}

main() {
    local dry=$1 bin tap rc fails t n_gpu n_tp
    mkdir -p "$OUT"
    : > "$OUT/summary.txt"
    {
        date -u
        nvidia-smi 2>&1 || echo "no nvidia-smi"
        "$NVCC" --version 2>&1 || echo "no nvcc"
        uname -a
    } > "$OUT/env.txt"

    # 1. build there, else the prepared binaries
    bin=build
    t=$(slot 200 360)
    if [ "$dry" = 1 ]; then
        echo "dry run: no build" > "$OUT/build.log"
        bin=$PREP/bin
    elif [ "$t" -gt 0 ] && timeout "$t" bash -c "$(declare -f engine_objs build_all); \
            JOBS=$JOBS NVCC=$NVCC build_all" > "$OUT/build.log" 2>&1; then
        stage build PASS "make engine build/t/test_cuda; gpu_bench (${SECONDS}s)"
        mkdir -p build/bin
        cp build/t/test_cuda build/gpu_bench build/ngx_llm_engine build/bin/
        bin=build/bin
    elif [ -x "$PREP/bin/test_cuda" ]; then
        stage build FAIL "no build here in ${t}s (see build.log): prepared binaries"
        bin=$PREP/bin
    else
        stage build FAIL "no build and nothing prepared (--prepare here)"
        return 1
    fi
    LD_LIBRARY_PATH="$PREP/lib:$(timeout 30 bash -c "$(declare -f cuda_lib_path); cuda_lib_path"):${LD_LIBRARY_PATH:-}"
    export LD_LIBRARY_PATH
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >> "$OUT/env.txt"
    ldd "$bin/test_cuda" "$bin/gpu_bench" >> "$OUT/env.txt" 2>&1
    if [ -d "$PREP/fixtures" ]; then
        export FIXTURES=${FIXTURES:-$PREP/fixtures}
    fi
    export FIXTURES=${FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/ngx_llm/fixtures}
    n_gpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    if [ "$dry" = 1 ]; then
        stage tests SKIP "dry run: $bin/test_cuda, FIXTURES=$FIXTURES"
        stage sampling SKIP "dry run: sampling lines of test_cuda.tap"
        stage tp SKIP "dry run: $n_gpu GPUs seen; $([ "$n_gpu" -gt 1 ] \
            && echo "would compare generate --tensor-parallel with TP=1" \
            || echo "1 GPU: NCCL TP skipped")"
        stage sanitizer SKIP "dry run"
        stage bench SKIP "dry run: $bin/gpu_bench"
        [ -x "$bin/gpu_bench" ] && "$bin/gpu_bench" --dry-run > "$OUT/bench.txt" 2>&1
        return 0
    fi

    # 2. kernels vs CPU (sampling included), goldens and TP on the GPU
    tap=$OUT/test_cuda.tap
    t=$(slot 150 220)
    timeout "$t" "$bin/test_cuda" > "$tap" 2>&1
    rc=$?
    fails=$(grep -c '^not ok' "$tap")
    stage tests "$([ $rc = 0 ] && [ "$fails" = 0 ] && echo PASS || echo FAIL)" \
        "rc $rc, $(grep -c '^ok' "$tap") ok, $fails not ok; $(grep -c '^# measured' "$tap") measured (${t}s cap)"
    fails=$(grep -E '^not ok.* - sample' "$tap" | wc -l)
    stage sampling "$([ "$(grep -cE '^ok.* - sample' "$tap")" -gt 0 ] \
        && [ "$fails" = 0 ] && echo PASS || echo FAIL)" \
        "$(grep -cE '^ok.* - sample' "$tap") ok, $fails not ok (device tokens and RNG == llm_sample)"

    # 3. tensor parallel over NCCL: needs more than one GPU (test_cuda has
    #    run TP with the ranks sharing GPU 0 either way)
    if [ "$n_gpu" -gt 1 ] && [ -x "$bin/ngx_llm_engine" ] \
        && [ -f "$FIXTURES/$STORIES" ]; then
        n_tp=$([ "$n_gpu" -ge 4 ] && echo 4 || echo 2)
        t=$(slot 40 200)
        {
            timeout "$t" "$bin/ngx_llm_engine" generate --backend cuda \
                --model "$FIXTURES/$STORIES" --prompt "Once upon" \
                --max-tokens 48 --greedy-ids > "$OUT/tp1.ids"
            timeout "$t" "$bin/ngx_llm_engine" generate --backend cuda \
                --tensor-parallel "$n_tp" --model "$FIXTURES/$STORIES" \
                --prompt "Once upon" --max-tokens 48 --greedy-ids > "$OUT/tpn.ids"
            echo "TP=1:  $(cat "$OUT/tp1.ids")"
            echo "TP=$n_tp: $(cat "$OUT/tpn.ids")"
        } > "$OUT/tp.txt" 2>&1
        if [ -s "$OUT/tp1.ids" ] && cmp -s "$OUT/tp1.ids" "$OUT/tpn.ids"; then
            stage tp PASS "$n_gpu GPUs: generate --tensor-parallel $n_tp == TP=1 (48 greedy ids); $(grep -c '^ok.* - tp ' "$tap") test_cuda tp checks ok"
        else
            stage tp FAIL "$n_gpu GPUs: TP=$n_tp ids differ from TP=1 or failed (tp.txt)"
        fi
        rm -f "$OUT/tp1.ids" "$OUT/tpn.ids"
    else
        echo "$n_gpu GPU(s): the NCCL comparison needs more than one" > "$OUT/tp.txt"
        grep -E ' - tp |measured tp' "$tap" >> "$OUT/tp.txt"
        stage tp SKIP "$n_gpu GPU: NCCL TP not run; test_cuda ran TP=2/4 sharing GPU 0 ($(grep -c '^ok.* - tp ' "$tap") ok, $(grep -c '^not ok.* - tp ' "$tap") not ok)"
    fi

    # 4. memory checker over the kernel tests (optional tool)
    t=$(slot 60 180)
    if ! command -v compute-sanitizer > /dev/null; then
        echo "compute-sanitizer not found" > "$OUT/sanitizer.log"
        stage sanitizer SKIP "not installed"
    elif [ "$t" -lt 20 ]; then
        stage sanitizer SKIP "no time left"
    else
        CUDA_KERNELS_ONLY=1 timeout "$t" compute-sanitizer --tool memcheck \
            "$bin/test_cuda" > "$OUT/sanitizer.log" 2>&1
        rc=$?
        stage sanitizer "$([ $rc = 0 ] && echo PASS || echo FAIL)" \
            "$(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1)"
    fi

    # 5. synthetic 8B and 1B
    t=$(slot 300 0)
    if [ "$t" -lt 60 ]; then
        stage bench SKIP "no time left (${t}s)"
        return 0
    fi
    timeout "$t" "$bin/gpu_bench" --model all --prompt 128 --gen 64 \
        --batches 1,8,64,256 > "$OUT/bench.txt" 2>&1
    rc=$?
    stage bench "$([ $rc = 0 ] && echo PASS || echo FAIL)" \
        "$(grep -E 'roofline$|<- batch-1' "$OUT/bench.txt" | tr -s ' ' | tr '\n' ';')"
    echo "total ${SECONDS}s of ${BUDGET}s" >> "$OUT/summary.txt"
}

case "${1:-}" in
--prepare) prepare ;;
--dry-run) main 1 ;;
"")        main 0 ;;
*)         echo "usage: bench/gpu-check.sh [--prepare | --dry-run]" >&2
           exit 2 ;;
esac
