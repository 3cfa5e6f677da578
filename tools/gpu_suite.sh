#!/usr/bin/env bash
# gpu_suite.sh - everything that needs the NVIDIA GPU, in one command: the GPU test suite with both
# fragment layers, the same (quick) under compute-sanitizer memcheck, racecheck and synccheck, then
# the benchmark against torch SDPA. Logs go to $OUT (default ./gpu-out); a short table is printed last.
#
#   tools/gpu_suite.sh [prebuilt-dir]        (default: build a fresh tree with -DR35A_NVIDIA_TARGETS=sm_90)
#
# prebuilt-dir holds librdna35attn.so.0, test_gpu_cuda and read_bw_<arch>.cubin (tools/gpu_stage.sh
# makes it on a machine with nvcc and cmocka, so the GPU machine needs neither). Environment:
#   R35A_SUITE_STEPS   which steps (default "tests memcheck racecheck synccheck bench")
#   R35A_BENCH_ARGS    extra arguments for tools/bench_gpu.py (e.g. --quick)
#   R35A_SUITE_BUDGET  seconds for the test + sanitizer phase (default 280; they run concurrently)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
STEPS=${R35A_SUITE_STEPS:-"tests memcheck racecheck synccheck bench"}
BUDGET=${R35A_SUITE_BUDGET:-280}
has() { [[ " $STEPS " == *" $1 "* ]]; }

if [ $# -ge 1 ]; then
    PRE=$(cd "$1" && pwd)
else
    cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DR35A_NVIDIA_TARGETS=sm_90 -DR35A_BUILD_TESTS=OFF \
        -DR35A_GPU_TARGETS= >"$OUT/build.log" 2>&1 && cmake --build build-gpu -j >>"$OUT/build.log" 2>&1 ||
        { echo "build failed, see build.log"; tail -20 "$OUT/build.log"; exit 1; }
    # the GPU test is plain C: built directly (the GPU machine has no cmocka for tests/CMakeLists.txt)
    cc -O2 -std=c11 -I tests -I include -I variants tests/gpu/test_gpu_cuda.c tests/harness.c tests/oracle.c \
        tests/test_util.c -L build-gpu -l:librdna35attn.so.0 -ldl -lm -o build-gpu/test_gpu_cuda >>"$OUT/build.log" 2>&1 ||
        { echo "test build failed, see build.log"; exit 1; }
    PRE=$PWD/build-gpu
fi
export LD_LIBRARY_PATH="$PRE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
TEST="$PRE/test_gpu_cuda"
[ -x "$TEST" ] || TEST="$PRE/tests/test_gpu_cuda"
LIB="$PRE/librdna35attn.so.0"
CUBIN=$(ls "$PRE"/read_bw_sm_*.cubin "$PRE"/bench/read_bw_sm_*.cubin 2>/dev/null | head -1)

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv
    uname -r
    command -v compute-sanitizer nvcc python3
} >"$OUT/env.log" 2>&1

san() {   # san <tool> <log> : the quick suite under compute-sanitizer
    local tool=$1 log=$2
    timeout -s INT "$BUDGET" compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 30 \
        $([ "$tool" = racecheck ] && echo --racecheck-report all) "$TEST" --quick \
        $([ "$tool" = racecheck ] && echo --fragments native) >"$log" 2>&1
    echo $?
}

declare -A RC
pids=()
t0=$(date +%s)
if has tests; then (timeout -s INT "$BUDGET" "$TEST" >"$OUT/tests.log" 2>&1; echo $? >"$OUT/.rc_tests") & pids+=($!); fi
for tool in memcheck racecheck synccheck; do
    if has $tool; then (san $tool "$OUT/$tool.log" >"$OUT/.rc_$tool") & pids+=($!); fi
done
for p in "${pids[@]}"; do wait "$p"; done
t1=$(date +%s)
for s in tests memcheck racecheck synccheck; do RC[$s]=$(cat "$OUT/.rc_$s" 2>/dev/null || echo "-"); rm -f "$OUT/.rc_$s"; done

if has tune; then   # the tuning sweep (candidates built by tools/tune_variants.py build into tune-<arch>/)
    PYTHONUNBUFFERED=1 timeout -s INT 400 python3 tools/tune_variants.py measure --arch sm_90 --dir tune-sm_90 \
        --out "$OUT" >"$OUT/tune.log" 2>&1
    RC[tune]=$?
fi
if has bench; then
    PYTHONUNBUFFERED=1 timeout -s INT 300 python3 tools/bench_gpu.py --lib "$LIB" --read-cubin "$CUBIN" \
        --out "$OUT" ${R35A_BENCH_ARGS:-} >"$OUT/bench.log" 2>&1
    RC[bench]=$?
fi
t2=$(date +%s)

echo "== GPU suite ($(head -2 "$OUT/env.log" | tail -1)) =="
echo "-- tests + sanitizers: $((t1 - t0)) s (concurrent), bench: $((t2 - t1)) s"
for s in tests memcheck racecheck synccheck tune bench; do
    has $s || continue
    rc=${RC[$s]:-"-"}
    case $rc in 0) v=PASS ;; 77) v=SKIP ;; 124|130) v="TIMEOUT" ;; 9) v="ERRORS" ;; *) v="FAIL($rc)" ;; esac
    extra=""
    case $s in
        tests) extra=$(grep -E "^\[test_gpu_cuda\] (PASSED|FAILED)|^SKIP" "$OUT/tests.log" | head -2 | tr '\n' ' ') ;;
        memcheck|racecheck|synccheck) extra=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$s.log" | tail -3 | tr '\n' ' ') ;;
    esac
    printf "%-10s %-8s %s\n" "$s" "$v" "$extra"
done
if has tests; then
    echo "-- correctness (fragments/group: cases failed worst-err)"
    sed -n '/^fragments\/group/,/^\[test_gpu_cuda\]/p' "$OUT/tests.log" | head -30
    grep -E "^FAIL" "$OUT/tests.log" | head -10
fi
if has tune; then
    echo "-- tune (tune.log)"
    grep -E "best|blocks per SM|wrote" "$OUT/tune.log" | cut -c1-220
fi
if has bench; then
    echo "-- bench (bench.log has every row)"
    grep -E "^roofline|^device" "$OUT/bench.log" | head -3
    tail -1 "$OUT/bench.log"
fi
