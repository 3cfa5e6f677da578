#!/usr/bin/env python3
"""check_bench_cuda.py - r35a_bench's CUDA path against the stand-in CUDA driver (bench/tests/
fake_cuda.c), on a machine without an NVIDIA GPU; registered when the build has NVIDIA cubins.

    check_bench_cuda.py --bench build/bench/r35a_bench --fake build/bench/libr35a_bench_fake_cuda.so

The stand-in reports an sm_90 with 132 SMs and a 50 MiB L2 and checks what a real driver refuses (a
current context, device pointers inside allocations, no copies or syncs while capturing). Checked:
the bench runs on the CUDA backend in device memory, the roofline comes from the embedded read kernel
(its 48 settings found in the cubin), --graph captures and replays, the encoder preset (both dtypes, long and short segments) runs on
the encoder kernels launched with their own dynamic shared memory, every allocation is freed and
every context push popped and retain released by exit, and the never-written output fails the check
(exit 3). Exits 0 when all hold, 1 with the failures listed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
    return cond


def run(bench, fake, args, log):
    env = dict(os.environ, R35A_LOG="0", R35A_CUDA_LIBRARY=fake, R35A_HIP_LIBRARY="/nonexistent/libamdhip64.so",
               FAKE_CUDA_LOG=log)
    env.pop("R35A_FORCE", None)
    done = subprocess.run([bench] + args, env=env, capture_output=True, text=True, timeout=300)
    summary = json.load(open(log, encoding="utf-8")) if os.path.exists(log) else {}
    return done.returncode, done.stdout, done.stderr, summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--fake", required=True)
    args = ap.parse_args()
    common = ["--contexts", "256,4096", "--iters", "3", "--min-working-set-mb", "4", "--seed", "11", "--json"]
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "cuda.json")
        rc, out, err, s = run(args.bench, args.fake, common + ["--no-check", "--graph"], log)
        if check(rc == 0, f"graph run: exit {rc}: {err.strip()}"):
            result = json.loads(out)
            m = result["machine"]
            check(m["backend"] == "cuda" and m["arch"] == "sm_90" and m["device"] == "Fake H200",
                  f"backend {m['backend']} {m['arch']} {m['device']}")
            check("cuda device memory" in m["memory"], f"memory '{m['memory']}'")
            check(result["peak"]["source"] == "measured" and "read stream read_u" in result["peak"]["method"]
                  and "best of 48 settings" in result["peak"]["method"], f"peak {result['peak']}")
            for row in result["rows"]:
                check(row["implementation"].startswith("decode_") and row["graph_median_us"] is not None
                      and row["graph_calls"] >= 16, f"row {row['context']}: {row['implementation']}, "
                                                    f"graph {row['graph_median_us']} x {row.get('graph_calls')}")
            check(s.get("functions_found", 0) >= 6, f"read kernels found in the cubin: {s.get('functions_found')}")
            check(s.get("captured_launches", 0) >= 32 and s.get("graph_replays", 0) >= 8,
                  f"graph: {s.get('captured_launches')} launches captured, {s.get('graph_replays')} replays")
            check(s.get("live_allocations") == 0 and s.get("primary_refs") == 0 and s.get("pushed") == 0,
                  f"at exit: {s.get('live_allocations')} allocations, {s.get('primary_refs')} primary context "
                  f"retains, {s.get('pushed')} pushes left")
        # the encoder family on dynamic shared memory: every row's kernel launched with exactly its
        # <name>_lds_bytes (the stand-in refuses other bytes once a limit was raised), long segments
        # (workgroup-wide tilings) and short ones (the small-problem tiling)
        for dtype in ("bf16", "f16"):
            for segs in ("577,1024", "16,64"):
                rc, out, err, s = run(args.bench, args.fake, ["--preset", "encoder", "--dtype", dtype, "--segments", segs,
                                                              "--iters", "2", "--min-working-set-mb", "4", "--no-check",
                                                              "--json"], log)
                if check(rc == 0, f"encoder {dtype} segments {segs}: exit {rc}: {err.strip()}"):
                    rows = json.loads(out)["rows"]
                    check(len(rows) == 21 and all(r["implementation"].startswith(f"encoder_{dtype}_") for r in rows),
                          f"encoder {dtype} segments {segs}: {[r['implementation'] for r in rows]}")
        rc, out, err, s = run(args.bench, args.fake, common + ["--peak-gbs", "4000"], log)
        check(rc == 3, f"checked run: exit {rc}, expected 3 (the never-written output must fail): {err.strip()}")
    for f in FAILURES:
        print("FAIL", f)
    print(f"check_bench_cuda: {'FAILED' if FAILURES else 'passed'} ({len(FAILURES)} failures)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
