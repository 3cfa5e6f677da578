#!/usr/bin/env python3
"""check_bench_hip.py - r35a_bench's HIP path against the stand-in HIP runtime (bench/tests/
fake_hip_device.c + tests/hip/fake_hip.c), on a machine without a GPU.

    check_bench_hip.py --bench build/bench/r35a_bench --fake build/bench/libr35a_bench_fake_hip.so

The stand-in reports a gfx1151, so the library makes a HIP context and loads its real embedded code
objects; the bench opens device memory through the same runtime (R35A_HIP_LIBRARY). Nothing
executes, so the output stays as uploaded (poisoned). Checked, from the bench's JSON and the
stand-in's log (FAKE_HIP_LOG):
  1. the bench runs on the HIP backend with device memory, and every launch is a planned kernel on
     the bench's own stream (a decode variant, followed by its split merge when the plan has splits), with the timed calls' argument pointers inside one buffer copy each, at
     the same offsets in every copy, the copies rotating, the workspace in its own allocation;
  2. with the error check on, the never-written (poisoned) output fails the row: exit 3, max error NaN;
  3. --graph captures the calls into a graph and times its replays;
  4. --graph on a reference context is refused (exit 2).
Exits 0 when all hold, 1 with the failures listed.
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


def run(bench, fake, args, log=None, hip=True):
    env = dict(os.environ, R35A_LOG="0", FAKE_HIP_ARCH="gfx1151")
    env["R35A_HIP_LIBRARY"] = fake if hip else "/nonexistent/libamdhip64.so"
    env["R35A_CUDA_LIBRARY"] = "/nonexistent/libcuda.so.1"   # a CUDA machine's GPU must not serve these runs
    if log:
        env["FAKE_HIP_LOG"] = log
    env.pop("R35A_FORCE", None)
    done = subprocess.run([bench] + args, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


def launches_of(log):
    if not os.path.exists(log):
        return {"streams": [], "launches": [], "graph_replays": 0, "live_allocations": None}
    with open(log, encoding="utf-8") as f:
        return json.load(f)


def check_launches(name, data, graph, splits):
    """A call is its decode launch, followed by its split merge (decode_merge_<dtype>, the same argument
    struct) when the plan has splits > 1."""
    stream = data["streams"]
    check(data["launches"], f"{name}: the stand-in recorded no launch (log missing?)")
    check(data.get("live_allocations") == 0, f"{name}: {data.get('live_allocations')} device allocations never freed")
    check(len(stream) == 1, f"{name}: the bench created {len(stream)} streams, expected 1")
    launches = []
    for i, l in enumerate(data["launches"]):
        if l["kernel"].startswith("decode_merge_"):
            prev = launches[-1] if launches else None
            check(prev is not None and splits > 1 and l["pointers"] == prev["pointers"]
                  and l["captured"] == prev["captured"] and l["stream"] == prev["stream"],
                  f"{name}: launch {i} ({l['kernel']}) is not the split merge of the decode launch before it")
            continue
        launches.append(l)
    merges = len(data["launches"]) - len(launches)
    check(merges == (len(launches) if splits > 1 else 0),
          f"{name}: {merges} split merge launches for {len(launches)} decode launches with {splits} splits")
    timed = [l for l in launches if not l["captured"]]
    check(len(timed) == 4, f"{name}: {len(timed)} plain launches, expected 1 warm-up + 3 timed")
    slabs, layouts = [], set()
    for i, l in enumerate(launches):
        check(l["kernel"].startswith("decode_"), f"{name}: launch {i} runs {l['kernel']}, not a decode variant")
        check(stream and l["stream"] == stream[0], f"{name}: launch {i} is not on the bench's stream")
        ptrs = l["pointers"]
        check(len(ptrs) >= 7, f"{name}: launch {i} has {len(ptrs)} pointers into device memory, expected >= 7 "
                              "(q, k, v, out, seq_lens, query_start_loc, block_table)")
        by_alloc = {}
        for a, off in ptrs:
            by_alloc.setdefault(a, []).append(off)
        slab = max(by_alloc, key=lambda a: len(by_alloc[a]))
        check(len(by_alloc[slab]) >= 7, f"{name}: launch {i}'s buffers are not in one copy: {ptrs}")
        slabs.append(slab)
        layouts.add(tuple(sorted(by_alloc[slab])))
    check(len(layouts) == 1, f"{name}: the buffers sit at different offsets in different copies: {layouts}")
    if not graph:
        # warm-up on copy 0, timed calls on copies 1, 2, 3 (the working set asks for >= 4 copies)
        check(len(set(slabs[:4])) == 4, f"{name}: the timed calls do not rotate through copies: {slabs[:4]}")
    else:
        captured = [l for l in launches if l["captured"]]
        check(len(captured) >= 16, f"{name}: {len(captured)} launches captured, expected >= 16")
        check(data["graph_replays"] >= 1 + 3, f"{name}: {data['graph_replays']} graph replays, expected >= 4")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True)
    ap.add_argument("--fake", required=True)
    args = ap.parse_args()
    common = ["--contexts", "256", "--iters", "3", "--peak-gbs", "100", "--min-working-set-mb", "3.5",
              "--seed", "7", "--json"]
    with tempfile.TemporaryDirectory() as tmp:
        # 1. the HIP path, no check
        log = os.path.join(tmp, "plain.json")
        rc, out, err = run(args.bench, args.fake, common + ["--no-check"], log)
        if check(rc == 0, f"plain run: exit {rc}: {err.strip()}"):
            result = json.loads(out)
            machine, row = result["machine"], result["rows"][0]
            check(machine["backend"] == "hip" and machine["arch"] == "gfx1151",
                  f"plain run: backend {machine['backend']} {machine['arch']}, expected hip gfx1151")
            check("hip device memory" in machine["memory"], f"plain run: memory is '{machine['memory']}'")
            check(row["implementation"].startswith("decode_"), f"plain run: implementation {row['implementation']}")
            check(row["splits"] >= 1 and row["grid"][0] >= 1, f"plain run: splits {row['splits']} grid {row['grid']}")
            check(row["copies"] >= 4, f"plain run: {row['copies']} copies for a 3.5 MiB working set")
            check(row["graph_median_us"] is None, "plain run: a graph time without --graph")
            check_launches("plain run", launches_of(log), graph=False, splits=row["splits"])
        # 2. the check fails on the never-written output
        rc, out, err = run(args.bench, args.fake, common)
        check(rc == 3, f"checked run: exit {rc}, expected 3 (the poisoned output must fail): {err.strip()}")
        if rc == 3:
            row = json.loads(out)["rows"][0]
            check(row["max_error"] is None and row["check"] == "fail",
                  f"checked run: max_error {row['max_error']} check {row['check']}, expected NaN (null) and fail")
        # 3. --graph
        log = os.path.join(tmp, "graph.json")
        rc, out, err = run(args.bench, args.fake, common + ["--no-check", "--graph"], log)
        if check(rc == 0, f"graph run: exit {rc}: {err.strip()}"):
            row = json.loads(out)["rows"][0]
            check(row["graph_median_us"] is not None and row["graph_calls"] >= 16,
                  f"graph run: graph_median_us {row['graph_median_us']}, graph_calls {row.get('graph_calls')}")
            check_launches("graph run", launches_of(log), graph=True, splits=row["splits"])
        # 4. --graph on the reference
        rc, out, err = run(args.bench, args.fake, common + ["--graph"], hip=False)
        check(rc == 2 and "--graph needs a GPU context" in err, f"reference --graph: exit {rc}: {err.strip()}")
    for f in FAILURES:
        print("FAIL", f)
    print(f"check_bench_hip: {'FAILED' if FAILURES else 'passed'} ({len(FAILURES)} failures)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
