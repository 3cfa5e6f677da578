#!/usr/bin/env bash
# gpu_suite.sh - everything that needs the NVIDIA GPU, in one command: the GPU test suite with both
# fragment layers, the same (quick) under compute-sanitizer memcheck, racecheck and synccheck, then
# the benchmark against torch SDPA. Logs go to $OUT (default ./gpu-out); a short table is printed last.
#
#   lab/gpu_suite.sh [prebuilt-dir]        (default: build a fresh tree with -DR35A_NVIDIA_TARGETS=sm_90)
#   R35A_SUITE_STEPS=r35abench lab/gpu_suite.sh
#       the README's bench command as a new user runs it (tools/bench.sh: builds build/ here with
#       cmake, the host's gcc and nvcc, nothing prebuilt) on a few decode shapes with --graph, and
#       lab/bench_gpu.py on the same shapes with that build's library, side by side with the ratio
#       (they must agree within 5 %). Shapes: R35A_R35ABENCH_SHAPES="D:G:M:B:CTX ..." (8 kv heads, f16).
#   R35A_SUITE_STEPS="fuzz soak" lab/gpu_suite.sh
#       fuzz = tests/gpu/fuzz_gpu.c under compute-sanitizer memcheck (random valid and
#       invalid descriptors, device metadata and non-finite values; R35A_FUZZ_CASES cases, default
#       10000, within R35A_FUZZ_SECONDS of case time, default 150; R35A_FUZZ_FORCE=generic sets
#       R35A_FORCE for it: the portable kernel only); soak = tests/gpu/soak_gpu.c (R35A_SOAK_RUNS
#       back-to-back runs, default 1000000: memory curve, bit-identical results, host time per call).
#       Both run after the tests + sanitizers phase, one at a time (the soak times the host).
#   R35A_SUITE_STEPS=ab R35A_AB_CONFIGS="old=dir-a/librdna35attn.so.0 new=...,R35A_DECODE_MIN_SPLIT_TILES=4"
#       R35A_AB_SHAPES="D:G:M:B:CTX[:fp8|:int8][:bf16][:nhd][:pN],..." lab/gpu_suite.sh gpu-carry
#       lab/decode_ab.py: decode configurations (builds, env knobs) side by side in one run, alternated
#       R35A_AB_ROUNDS times (default 2), medians and ratios against the first configuration.
#   R35A_SUITE_STEPS=checkcost lab/gpu_suite.sh gpu-carry
#       what the kernels' device-metadata checks cost: r35a_bench --graph on a few decode
#       shapes (R35A_CHECKCOST_SHAPES="D:G:M:B:CTX ...") with the staged r35a_bench and with
#       r35a_bench_nochecks (built by lab/gpu_stage.sh with -DR35A_LAB_BUILD=ON -DR35A_LAB_DEFINES=R35A_LAB_DEVICE_CHECKS=0;
#       without a prebuilt dir both are built here), three alternated rounds; prints the medians'
#       ratio per shape (target: checks cost <= 1 % of decode time).
#   R35A_SUITE_STEPS="stream profile" lab/gpu_suite.sh gpu-carry
#       where decode's time goes (a measurement). stream = lab/kv_stream.cu (the prebuilt dir's kv_stream,
#       else built here with nvcc): the decode access pattern as a pure stream, R35A_STREAM_ARGS (default
#       "rows": by bytes per key row, and a warp per kv head) -> kv_stream.txt. profile = Nsight Compute on
#       the prebuilt r35a_bench, one decode launch per shape of R35A_PROFILE_SHAPES ("D:G:M:B:CTX[:fp8|:int8]
#       ...", 8 kv heads, f16 queries) -> ncu_<i>.txt, and profile.txt: time, DRAM bytes and throughput,
#       warp instructions per 16-key tile and kv head, issue slots, occupancy, eligible warps, top stalls.
#
# prebuilt-dir holds librdna35attn.so.0, test_gpu_cuda, fuzz_gpu, soak_gpu and read_bw_<arch>.cubin (lab/gpu_stage.sh
# makes it on a machine with nvcc and cmocka, so the GPU machine needs neither). Environment:
#   R35A_SUITE_STEPS   which steps (default "tests memcheck racecheck synccheck bench"; also fuzz, soak,
#                      tune, r35abench, ab, checkcost, stream, profile)
#   R35A_TUNE_DIRS     tune: the candidate directories to measure (default tune-sm_90; lab/tune_variants.py
#                      build --dir), R35A_TUNE_SECONDS the time limit of each (400)
#   R35A_BENCH_ARGS    extra arguments for lab/bench_gpu.py (e.g. --quick); R35A_BENCH_SECONDS its time limit (300)
#   R35A_SUITE_BUDGET  seconds for the test + sanitizer phase (default 280; they run concurrently)
#   (step r35abench is not in the default list: it builds its own tree)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
STEPS=${R35A_SUITE_STEPS:-"tests memcheck racecheck synccheck bench"}
BUDGET=${R35A_SUITE_BUDGET:-280}
has() { [[ " $STEPS " == *" $1 "* ]]; }

needs_build=false
for s in tests memcheck racecheck synccheck bench tune fuzz soak; do has $s && needs_build=true; done
if [ $# -ge 1 ]; then
    PRE=$(cd "$1" && pwd)
elif ! $needs_build; then
    PRE=$PWD/build-gpu   # unused: the chosen steps build what they need
else
    cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DR35A_NVIDIA_TARGETS=sm_90 -DR35A_BUILD_TESTS=OFF \
        -DR35A_NVIDIA_EMULATION_CUBINS=ON -DR35A_GPU_TARGETS= >"$OUT/build.log" 2>&1 && cmake --build build-gpu -j >>"$OUT/build.log" 2>&1 ||
        { echo "build failed, see build.log"; tail -20 "$OUT/build.log"; exit 1; }
    # the GPU test is plain C: built directly (the GPU machine has no cmocka for tests/CMakeLists.txt)
    cc -O2 -std=c11 -I tests -I include -I variants tests/gpu/test_gpu_cuda.c tests/gpu_cases.c tests/harness.c tests/oracle.c \
        tests/test_util.c -L build-gpu -l:librdna35attn_gputest.so -ldl -lm -o build-gpu/test_gpu_cuda >>"$OUT/build.log" 2>&1 ||
        { echo "test build failed, see build.log"; exit 1; }
    # the fuzzer and the soak likewise (plain C, tests/gpu/cuda_dl.h)
    for prog in fuzz_gpu soak_gpu; do
        extra=""
        [ $prog = fuzz_gpu ] && extra="tests/gpu/fuzz_core.c tests/reliability/rel_common.c"
        cc -O2 -std=c11 -I tests -I tests/gpu -I tests/reliability -I include tests/gpu/$prog.c $extra tests/harness.c \
            tests/oracle.c tests/test_util.c -L build-gpu -l:librdna35attn.so.0 -ldl -lm -o build-gpu/$prog \
            >>"$OUT/build.log" 2>&1 || { echo "$prog build failed, see build.log"; exit 1; }
    done
    PRE=$PWD/build-gpu
fi
export LD_LIBRARY_PATH="$PRE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
TEST="$PRE/test_gpu_cuda"
[ -x "$TEST" ] || TEST="$PRE/tests/test_gpu_cuda"
FUZZ="$PRE/fuzz_gpu"
[ -x "$FUZZ" ] || FUZZ="$PRE/tests/fuzz_gpu"
SOAK="$PRE/soak_gpu"
[ -x "$SOAK" ] || SOAK="$PRE/tests/soak_gpu"
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

if has fuzz; then   # the bad-data fuzzer under memcheck (every input its own exact allocation)
    R35A_FORCE=${R35A_FUZZ_FORCE:-${R35A_FORCE:-}} timeout -s INT $(( ${R35A_FUZZ_SECONDS:-150} + 120 )) \
        compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 30 "$FUZZ" --cases "${R35A_FUZZ_CASES:-10000}" \
        --max-seconds "${R35A_FUZZ_SECONDS:-150}" >"$OUT/fuzz.log" 2>&1
    RC[fuzz]=$?
fi
if has soak; then   # a million runs on one stream (alone on the GPU: it times the host)
    timeout -s INT 900 "$SOAK" --runs "${R35A_SOAK_RUNS:-1000000}" >"$OUT/soak.log" 2>&1
    RC[soak]=$?
fi
if has checkcost; then   # decode time with and without the device-metadata checks
    log=$OUT/checkcost.log
    : >"$log"
    RC[checkcost]=0
    # the two benches: prebuilt by lab/gpu_stage.sh (r35a_bench, r35a_bench_nochecks), else built here
    BENCH_CHECKS=$PRE/r35a_bench
    BENCH_NOCHECKS=$PRE/r35a_bench_nochecks
    if [ ! -x "$BENCH_CHECKS" ] || [ ! -x "$BENCH_NOCHECKS" ]; then
        for tree in build-gpu-checks build-gpu-nochecks; do
            defs=""
            [ $tree = build-gpu-nochecks ] && defs="-DR35A_LAB_BUILD=ON -DR35A_LAB_DEFINES=R35A_LAB_DEVICE_CHECKS=0"
            { cmake -S . -B $tree -DCMAKE_BUILD_TYPE=Release -DR35A_NVIDIA_TARGETS=sm_90 -DR35A_BUILD_TESTS=OFF \
                -DR35A_GPU_TARGETS= $defs && cmake --build $tree -j --target r35a_bench; } >>"$log" 2>&1 ||
                { echo "checkcost: $tree build failed" >>"$log"; RC[checkcost]=1; }
        done
        BENCH_CHECKS=build-gpu-checks/bench/r35a_bench
        BENCH_NOCHECKS=build-gpu-nochecks/bench/r35a_bench
    fi
    CC_SHAPES=${R35A_CHECKCOST_SHAPES:-"128:4:1:1:8192 128:4:1:16:8192 128:4:4:16:4096 64:8:1:16:32768 256:4:1:1:32768"}
    if [ "${RC[checkcost]}" = 0 ]; then
        for rep in 1 2 3; do   # alternated, so drift of clocks or temperature hits both alike
            for which in checks nochecks; do
                bench=$BENCH_CHECKS
                [ $which = nochecks ] && bench=$BENCH_NOCHECKS
                i=0
                for shape in $CC_SHAPES; do
                    IFS=: read -r D G M B C <<<"$shape"
                    i=$((i + 1))
                    timeout -s INT 300 "$bench" --head-size "$D" --q-heads $((8 * G)) --kv-heads 8 --m "$M" \
                        --batch "$B" --contexts "$C" --graph --peak-gbs 4800 --json >"$OUT/checkcost_${which}_${i}_$rep.json" 2>>"$log" ||
                        RC[checkcost]=1
                done
            done
        done
        python3 - "$OUT" $CC_SHAPES >"$OUT/checkcost.txt" 2>>"$log" <<'PY' || RC[checkcost]=1
import json, statistics, sys
out, shapes = sys.argv[1], sys.argv[2:]
def time_us(which, i):
    v = []
    for rep in (1, 2, 3):
        row = json.load(open(f"{out}/checkcost_{which}_{i}_{rep}.json"))["rows"][0]
        v.append(row["graph_median_us"] or row["median_us"])
        impl = row["implementation"]
    return statistics.median(v), impl
print(f"{'shape D:G:M:batch:ctx':24} {'checks us':>10} {'no checks us':>13} {'cost':>7}  implementation")
for i, shape in enumerate(shapes, 1):
    a, impl = time_us("checks", i)
    b, _ = time_us("nochecks", i)
    print(f"{shape:24} {a:10.2f} {b:13.2f} {100 * (a / b - 1):6.2f}%  {impl}")
PY
    fi
fi
if has tune; then   # the tuning sweep (candidates built by lab/tune_variants.py build into tune-<arch>/,
    # or the directories R35A_TUNE_DIRS names: each gives $OUT/<dir>.tsv, <dir>.log, tune_sm_90_<dir>.json)
    RC[tune]=0
    for dir in ${R35A_TUNE_DIRS:-tune-sm_90}; do
        PYTHONUNBUFFERED=1 timeout -s INT "${R35A_TUNE_SECONDS:-400}" python3 lab/tune_variants.py measure --arch sm_90 \
            --dir "$dir" --out "$OUT" --tag "_$dir" --write "$OUT/$dir.tsv" >"$OUT/$dir.log" 2>&1 || RC[tune]=$?
    done
fi
if has bench; then
    PYTHONUNBUFFERED=1 timeout -s INT "${R35A_BENCH_SECONDS:-300}" python3 lab/bench_gpu.py --lib "$LIB" --read-cubin "$CUBIN" \
        --out "$OUT" ${R35A_BENCH_ARGS:-} >"$OUT/bench.log" 2>&1
    RC[bench]=$?
fi
if has r35abench; then   # the README's bench command next to lab/bench_gpu.py, one build, one run
    R35ABENCH_SHAPES=${R35A_R35ABENCH_SHAPES:-"128:4:1:16:8192 128:4:1:1:32768 64:8:4:16:1024 256:4:4:1:16384 512:8:1:16:4096 128:8:4:1:2048"}
    log=$OUT/r35abench.log
    : >"$log"
    rm -f "$OUT"/r35abench_*.json "$OUT/r35abench_compare.txt"
    RC[r35abench]=0
    # the first bench.sh builds build/ (all sm_90 kernels: ~7 min on the H200 machine's 16 cores); that
    # build runs on its own so the per-shape time limits below time the bench only
    echo "== tools/bench.sh --help (builds build/)" >>"$log"
    timeout -s INT 540 tools/bench.sh --help >>"$log" 2>&1 || { rc=$?; echo "(exit $rc)" >>"$log"; RC[r35abench]=$rc; }
    i=0
    for shape in $R35ABENCH_SHAPES; do
        IFS=: read -r D G M B C <<<"$shape"
        i=$((i + 1))
        # each is the README's command with flags
        cmd=(tools/bench.sh --head-size "$D" --q-heads $((8 * G)) --kv-heads 8 --m "$M" --batch "$B" --contexts "$C" --graph --json)
        echo "== ${cmd[*]}" >>"$log"
        timeout -s INT 420 "${cmd[@]}" >"$OUT/r35abench_$i.json" 2>>"$log"
        rc=$?
        [ $rc -eq 0 ] || { echo "(exit $rc)" >>"$log"; RC[r35abench]=$rc; }
    done
    echo "== tools/bench.sh (no arguments: the default problem, as the README runs it)" >>"$log"
    timeout -s INT 300 tools/bench.sh >>"$log" 2>&1 || { rc=$?; echo "(exit $rc)" >>"$log"; RC[r35abench]=$rc; }
    cubin=$(ls build/bench/read_bw_sm_*.cubin 2>/dev/null | head -1)
    # tools/bench.sh builds the bench (static library inside); bench_gpu.py loads the shared one of that build
    cmake --build build -j --target rdna35attn >>"$log" 2>&1 || { rc=$?; echo "(shared library build: exit $rc)" >>"$log"; }
    echo "== lab/bench_gpu.py on the same shapes, build/librdna35attn.so.0" >>"$log"
    PYTHONUNBUFFERED=1 timeout -s INT 300 python3 lab/bench_gpu.py --lib build/librdna35attn.so.0 --read-cubin "$cubin" \
        --shapes "$(echo $R35ABENCH_SHAPES | tr ' ' ',')" --peers none --skip-encoder --out "$OUT" --tag r35abench_pybench \
        >>"$log" 2>&1 || { rc=$?; echo "(exit $rc)" >>"$log"; RC[r35abench]=$rc; }
    python3 lab/compare_bench_gpu.py --bench-gpu "$OUT/r35abench_pybench.json" "$OUT"/r35abench_[0-9]*.json \
        >"$OUT/r35abench_compare.txt" 2>&1 || RC[r35abench]=1
fi
if has stream; then   # the decode access pattern as a pure stream (lab/kv_stream.cu)
    RC[stream]=0
    bin=$PRE/kv_stream
    if [ ! -x "$bin" ]; then
        bin=$OUT/kv_stream
        nvcc -O3 -std=c++17 -arch=sm_90 -o "$bin" lab/kv_stream.cu >"$OUT/kv_stream_build.log" 2>&1 || RC[stream]=1
    fi
    [ "${RC[stream]}" = 0 ] && { timeout -s INT "${R35A_STREAM_SECONDS:-240}" "$bin" ${R35A_STREAM_ARGS:-rows} \
        >"$OUT/kv_stream.txt" 2>&1 || RC[stream]=$?; }
fi
if has profile; then   # Nsight Compute, one decode launch per shape, on the prebuilt r35a_bench
    RC[profile]=0
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    [ -n "$NCU" ] && [ -x "$PRE/r35a_bench" ] || { echo "profile: no ncu or no $PRE/r35a_bench" >"$OUT/profile.txt"; RC[profile]=1; }
    i=0
    for shape in ${R35A_PROFILE_SHAPES:-"64:8:1:16:8192:fp8 64:8:1:16:8192 128:4:1:16:8192:fp8 128:4:1:16:8192"}; do
        [ "${RC[profile]}" = 0 ] || break
        IFS=: read -r D G M B C KV <<<"$shape"
        i=$((i + 1))
        kv=()
        [ -n "$KV" ] && kv=(--kv-dtype "$KV")
        timeout -s INT 200 "$NCU" --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
            --section SchedulerStats --section WarpStateStats --section LaunchStats --section ComputeWorkloadAnalysis \
            --metrics 'dram__bytes_read.sum,smsp__inst_executed.sum,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.avg,regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$' \
            -k regex:'^decode_(f16|bf16)_' -c 1 "$PRE/r35a_bench" --head-size "$D" --q-heads $((8 * G)) --kv-heads 8 \
            --m "$M" --batch "$B" --contexts "$C" "${kv[@]}" --iters 3 --no-check >"$OUT/ncu_$i.txt" 2>&1 || RC[profile]=$?
        echo "$shape" >"$OUT/ncu_$i.shape"
    done
    python3 - "$OUT" >"$OUT/profile.txt" 2>&1 <<'PY' || RC[profile]=1
import glob, os, re, sys
out = sys.argv[1]
def metric(text, name):
    m = re.search(r"^\s*" + re.escape(name) + r"\s+(?:(\S+)\s+)?([\d,.]+)\s*$", text, re.M)
    if not m: return None, None
    return float(m.group(2).replace(",", "")), m.group(1)
print(f"{'shape D:G:M:B:CTX[:kv]':26} {'kernel':42} {'us':>7} {'DRAM %':>7} {'DRAM MB':>8} {'ideal MB':>8} "
      f"{'inst/tile':>9} {'issue %':>7} {'warps/sch':>9} {'elig/sch':>8} {'regs':>5}  top stalls (cycles per instr.)")
for path in sorted(glob.glob(os.path.join(out, "ncu_*.txt")), key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0])):
    shape = open(path[:-4] + ".shape").read().strip()
    text = open(path, errors="replace").read()
    parts = shape.split(":")
    D, G, M, B, C = (int(x) for x in parts[:5])
    esize = 1 if len(parts) > 5 else 2
    kern = re.search(r"^\s+(decode_\S+)\s+\(", text, re.M)
    us, unit = metric(text, "Duration")
    if us is not None and unit == "ms": us *= 1e3
    if us is not None and unit == "ns": us /= 1e3
    dram = metric(text, "DRAM Throughput")[0]
    dbytes, dunit = metric(text, "dram__bytes_read.sum")
    scale = {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1, "Gbyte": 1e3}.get(dunit, None)
    inst = metric(text, "smsp__inst_executed.sum")[0]
    tiles = B * 8 * (C // 16)
    stalls = sorted(((float(v.replace(",", "")), k) for k, v in re.findall(
        r"^\s*smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio\s+(?:\S+\s+)?([\d,.]+)\s*$", text, re.M)),
        reverse=True)[:4]
    row = [shape, kern.group(1) if kern else "?", us, dram, dbytes * scale if dbytes is not None and scale else None,
           2 * B * 8 * C * D * esize / 1e6, inst / tiles if inst else None, metric(text, "Issue Slots Busy")[0],
           metric(text, "Active Warps Per Scheduler")[0], metric(text, "Eligible Warps Per Scheduler")[0],
           metric(text, "Registers Per Thread")[0]]
    f = lambda x, w, p: f"{x:{w}.{p}f}" if isinstance(x, float) else f"{'-':>{w}}"
    print(f"{row[0]:26} {row[1][:42]:42} {f(row[2], 7, 1)} {f(row[3], 7, 1)} {f(row[4], 8, 1)} {f(row[5], 8, 1)} "
          f"{f(row[6], 9, 0)} {f(row[7], 7, 1)} {f(row[8], 9, 2)} {f(row[9], 8, 2)} {f(row[10], 5, 0)}  "
          + ", ".join(f"{k} {v:.2f}" for v, k in stalls))
PY
fi
if has ab; then   # decode configurations side by side (lab/decode_ab.py): libraries and env knobs
    # R35A_AB_CONFIGS="name=lib[,VAR=value...] ...", R35A_AB_SHAPES="D:G:M:B:CTX,...", R35A_AB_ROUNDS (2)
    args=()
    for c in ${R35A_AB_CONFIGS:-"lib=$LIB"}; do args+=(--config "$c"); done
    PYTHONUNBUFFERED=1 timeout -s INT "${R35A_AB_SECONDS:-420}" python3 lab/decode_ab.py \
        --shapes "${R35A_AB_SHAPES:-128:4:1:1:32768,128:4:1:16:8192}" --rounds "${R35A_AB_ROUNDS:-2}" "${args[@]}" \
        --out "$OUT" >"$OUT/ab.log" 2>&1
    RC[ab]=$?
fi
t2=$(date +%s)

echo "== GPU suite ($(head -2 "$OUT/env.log" | tail -1)) =="
echo "-- tests + sanitizers: $((t1 - t0)) s (concurrent), bench: $((t2 - t1)) s"
for s in tests memcheck racecheck synccheck fuzz soak checkcost tune bench r35abench ab stream profile; do
    has $s || continue
    rc=${RC[$s]:-"-"}
    case $rc in 0) v=PASS ;; 77) v=SKIP ;; 124|130) v="TIMEOUT" ;; 9) v="ERRORS" ;; *) v="FAIL($rc)" ;; esac
    extra=""
    case $s in
        tests) extra=$(grep -E "^\[test_gpu_cuda\] (PASSED|FAILED)|^SKIP" "$OUT/tests.log" | head -2 | tr '\n' ' ') ;;
        memcheck|racecheck|synccheck) extra=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/$s.log" | tail -3 | tr '\n' ' ') ;;
        fuzz) extra=$(grep -E "^\[fuzz_gpu\] fuzz:|ERROR SUMMARY" "$OUT/fuzz.log" | tail -2 | tr '\n' ' ') ;;
        soak) extra=$(grep -E "^\[soak_gpu\] soak:" "$OUT/soak.log" | tail -1) ;;
    esac
    printf "%-10s %-8s %s\n" "$s" "$v" "$extra"
done
if has tests; then
    echo "-- correctness (fragments/group: cases failed worst-err)"
    sed -n '/^fragments\/group/,/^\[test_gpu_cuda\]/p' "$OUT/tests.log" | head -30
    grep -E "^FAIL" "$OUT/tests.log" | head -10
fi
if has fuzz; then
    echo "-- fuzz (fuzz.log: seed, totals, failures)"
    grep -E "seed|^\[fuzz_gpu\] [0-9]+ cases|by fault|^FAIL" "$OUT/fuzz.log" | head -14 | cut -c1-400
fi
if has soak; then
    echo "-- soak (soak.log: the memory curve and host times)"
    grep -E "^\[soak_gpu\]" "$OUT/soak.log" | cut -c1-300
fi
if has checkcost; then
    echo "-- checkcost: decode time with / without the device-metadata checks (graph replays, median of 3)"
    cat "$OUT/checkcost.txt" 2>/dev/null || tail -20 "$OUT/checkcost.log"
fi
if has tune; then
    for dir in ${R35A_TUNE_DIRS:-tune-sm_90}; do
        echo "-- tune ($dir.log)"
        grep -E "best|blocks per SM|wrote|rows 32 shapes|WRONG" "$OUT/$dir.log" | cut -c1-260
    done
fi
if has r35abench; then
    echo "-- r35abench: tools/bench.sh --graph vs lab/bench_gpu.py (r35abench.log has both runs)"
    grep -E "^backend|^memory|^machine" "$OUT/r35abench.log" | head -3
    cat "$OUT/r35abench_compare.txt" 2>/dev/null || tail -30 "$OUT/r35abench.log"
fi
if has ab; then
    echo "-- ab: decode configurations side by side (ab.log, decode_ab.json)"
    sed -n '/^us per call/,$p' "$OUT/ab.log" | cut -c1-250
    grep -E "exit|Error|error" "$OUT/ab.log" | head -5
fi
if has bench; then
    echo "-- bench (bench.log has every row)"
    grep -E "^roofline|^device" "$OUT/bench.log" | head -3
    tail -1 "$OUT/bench.log"
fi
