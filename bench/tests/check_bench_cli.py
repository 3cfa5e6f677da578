#!/usr/bin/env python3
"""check_bench_cli.py - r35a_bench's command line and outputs on the reference backend (no GPU needed).

    check_bench_cli.py --bench build/bench/r35a_bench

Checks: the presets have the documented rows (h200-decode: lab/bench_gpu.py's 192 shapes in its loop
order; gfx1151-decode: 192 per context; encoder: docs/DESIGN.md's 21); a preset refuses the flags it sets
and a bad --preset lists the presets (exit 2); a small run's --json rows carry their shape, plan,
error and check, its --csv has one value per header column; --graph on the reference is refused.
Exits 0 when all hold, 1 with the failures listed.
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
    return cond


def run(bench, args):
    # no GPU runtime loads, whatever the machine has: the runs measure the reference
    env = dict(os.environ, R35A_LOG="0", R35A_HIP_LIBRARY="/nonexistent/libamdhip64.so",
               R35A_CUDA_LIBRARY="/nonexistent/libcuda.so.1")
    env.pop("R35A_FORCE", None)
    done = subprocess.run([bench] + args, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, done.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", required=True)
    bench = ap.parse_args().bench

    # presets
    rc, out, err = run(bench, ["--preset", "h200-decode", "--list"])
    rows = out.split("\n")[:-1]
    expected = [f"paged f16 D{d} Hq{8 * g} Hkv8 p16 B{b} M{m} W0 L{c}" for d in (64, 128, 256, 512) for g in (4, 8)
                for m in (1, 4) for b in (1, 16) for c in (1024, 2048, 4096, 8192, 16384, 32768)]
    check(rc == 0 and rows == expected, f"h200-decode rows differ from lab/bench_gpu.py's sweep: rc {rc}, "
                                        f"{len(rows)} rows, first {rows[:2]}")
    rc, out, err = run(bench, ["--preset", "gfx1151-decode", "--list", "--contexts", "4096,8192"])
    rows = out.split("\n")[:-1]
    check(rc == 0 and len(rows) == 2 * 4 * 6 * 8, f"gfx1151-decode with 2 contexts: {len(rows)} rows, expected 384")
    pages = {r.split()[5] for r in rows}
    check(pages == {"p16", "p32", "p528", "p544", "p784", "p1056"}, f"gfx1151-decode page sizes {sorted(pages)}")
    rc, out, err = run(bench, ["--preset", "encoder", "--list"])
    rows = out.split("\n")[:-1]
    shapes = [(r.split()[2], r.split()[3]) for r in rows]
    design = [(32, 4), (32, 8), (32, 16), (32, 32), (48, 32), (64, 4), (64, 6), (64, 8), (64, 12), (64, 14), (64, 16),
              (64, 20), (64, 24), (64, 64), (72, 16), (80, 16), (128, 4), (128, 8), (128, 12), (128, 16), (128, 24)]
    check(rc == 0 and shapes == [(f"D{d}", f"Hq{h}") for d, h in design], f"encoder preset shapes {shapes}")

    # refused combinations
    for args, needle in ((["--preset", "h200-decode", "--head-size", "64"], "--head-size: --preset h200-decode sets it"),
                         (["--preset", "encoder", "--contexts", "64"], "--contexts applies to --op paged only"),
                         (["--preset", "nope"], "presets: h200-decode, gfx1151-decode, encoder"),
                         (["--contexts", "4", "--m", "8"], "context 4 is shorter than M = 8")):
        rc, out, err = run(bench, args)
        check(rc == 2 and needle in err, f"{' '.join(args)}: exit {rc}, stderr {err.strip()!r}")
    rc, out, err = run(bench, ["--contexts", "64", "--graph", "--iters", "1"])
    check(rc == 2 and "--graph needs a GPU context" in err, f"--graph on the reference: exit {rc}: {err.strip()}")

    # a small run: JSON
    small = ["--head-size", "64", "--contexts", "64,200", "--m", "2", "--iters", "2", "--peak-gbs", "10", "--seed", "5"]
    rc, out, err = run(bench, small + ["--json"])
    if check(rc == 0, f"small JSON run: exit {rc}: {err.strip()}"):
        run_json = json.loads(out)
        check(run_json["problem"]["varying"] == ["context"], f"varying {run_json['problem']['varying']}")
        check(run_json["machine"]["backend"] == "reference", f"backend {run_json['machine']['backend']}")
        for row, ctx in zip(run_json["rows"], (64, 200)):
            check(row["context"] == ctx and row["head_size"] == 64 and row["query_len"] == 2 and row["page_size"] == 16,
                  f"row shape {row}")
            check(row["implementation"] == "reference" and row["splits"] == 1, f"row plan {row['implementation']}")
            check(row["check"] == "pass" and row["max_error"] == 0 and row["error_vs"] == "self",
                  f"row check {row['check']} {row['max_error']}")
            check(row["copies"] == 1 and row["graph_median_us"] is None, f"row copies {row['copies']}")
    # CSV: one value per column, the same rows
    rc, out, err = run(bench, small + ["--csv"])
    if check(rc == 0, f"small CSV run: exit {rc}: {err.strip()}"):
        table = list(csv.reader(io.StringIO(out)))
        check(len(table) == 3 and all(len(r) == len(table[0]) for r in table),
              f"CSV: {len(table)} lines, column counts {[len(r) for r in table]}")
        header = table[0]
        check(table[1][header.index("context")] == "64" and table[2][header.index("check")] == "pass",
              f"CSV values {table[1:]}")
    for f in FAILURES:
        print("FAIL", f)
    print(f"check_bench_cli: {'FAILED' if FAILURES else 'passed'} ({len(FAILURES)} failures)")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
