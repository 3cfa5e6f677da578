#!/usr/bin/env python3
"""compare_bench_gpu.py - r35a_bench next to lab/bench_gpu.py on the same decode shapes, one table.

    compare_bench_gpu.py --bench-gpu OUT/r35abench_pybench.json OUT/r35abench_*.json [--tolerance 0.05]

The r35a_bench inputs are `--json` outputs of paged runs made with --graph (each row's graph median is
the time per call with the launch cost amortized, as bench_gpu.py measures it: a CUDA graph of calls
over >= 512 MiB of disjoint buffers, replays timed with events). Rows are matched on (D, G = q heads /
kv heads, M, batch, context). Prints, per shape, both times, the ratio r35a_bench / bench_gpu.py, both
GB/s (each with its own bytes model), the plan and the max error, then the rooflines; exits 1 when a
ratio is outside 1 +- tolerance or a shape is missing from either side.
"""
import argparse
import json
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_bench_gpu(path):
    """bench_gpu.py's JSON, or an empty result (with a line saying so) when it wrote none."""
    try:
        return load(path)
    except (OSError, ValueError) as error:
        print(f"lab/bench_gpu.py's result {path} is missing or unreadable ({error}); its log says why")
        return {"decode": []}


def bench_rows(paths):
    """{(D, G, M, B, ctx): (row, run)} from r35a_bench --json outputs."""
    rows = {}
    for path in paths:
        try:
            run = load(path)
        except (OSError, ValueError) as error:   # a run that timed out or failed wrote nothing
            print(f"r35a_bench's result {path} is missing or unreadable ({error}); the log says why")
            continue
        for row in run["rows"]:
            key = (row["head_size"], row["num_q_heads"] // row["num_kv_heads"], row["query_len"], row["batch"],
                   row["context"])
            rows[key] = (row, run)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench-gpu", required=True, help="lab/bench_gpu.py's JSON (--shapes ... --tag ...)")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("bench", nargs="+", help="r35a_bench --json --graph outputs")
    args = ap.parse_args()
    ours = bench_rows(args.bench)
    py_all = load_bench_gpu(args.bench_gpu)
    theirs = {(r["D"], r["G"], r["M"], r["B"], r["ctx"]): r for r in py_all["decode"]}
    print(f"{'shape':<22} {'r35a_bench us':>13} {'bench_gpu us':>12} {'ratio':>6} {'plain us':>9} "
          f"{'GB/s':>7} {'GB/s(py)':>8} {'max err':>8}  plan (r35a_bench | bench_gpu.py)")
    bad = 0
    for key in sorted(set(ours) | set(theirs)):
        D, G, M, B, ctx = key
        name = f"D{D} G{G} M{M} B{B} L{ctx}"
        mine, py = ours.get(key), theirs.get(key)
        if mine is None or py is None or "error" in py:
            bad += 1
            if mine is None:
                why = "missing from r35a_bench"
            elif py is None:
                why = "missing from bench_gpu.py"
            else:
                why = "bench_gpu.py: " + py["error"]
            t_mine = mine[0].get("graph_median_us") if mine else None
            mine_text = f"{t_mine:13.1f}" if t_mine is not None else f"{'-':>13}"
            print(f"{name:<22} {mine_text} {'-':>12} {'-':>6}  MISSING ({why})")
            continue
        row = mine[0]
        t_mine = row.get("graph_median_us")
        if t_mine is None:
            bad += 1
            print(f"{name:<22} r35a_bench ran without --graph: no comparable time")
            continue
        ratio = t_mine / py["t_ours_us"]
        ok = abs(ratio - 1.0) <= args.tolerance
        bad += 0 if ok else 1
        err = row.get("max_error")
        err_text = "-" if err is None and row.get("check") == "none" else ("nan" if err is None else f"{err:.1e}")
        print(f"{name:<22} {t_mine:13.1f} {py['t_ours_us']:12.1f} {ratio:6.3f} {row['median_us']:9.1f} "
              f"{row['gbs']:7.0f} {py['gbs']:8.0f} {err_text:>8}  {row['implementation']} s{row['splits']} "
              f"| {py['impl']} s{py['splits']}{'' if ok else '  <-- outside ' + format(args.tolerance, '.0%')}")
    first = next(iter(ours.values()))[1] if ours else None
    if first is not None:
        peak = first["peak"]
        print(f"roofline: r35a_bench {peak['gbs']:.0f} GB/s ({peak['source']}: {peak['method']})")
    print(f"roofline: bench_gpu.py {py_all.get('roofline_gbs', 0):.0f} GB/s ({py_all.get('roofline_how', '?')})")
    total = len(set(ours) | set(theirs))
    print(f"r35abench: {total - bad}/{total} shapes within {args.tolerance:.0%} of lab/bench_gpu.py "
          f"({'PASS' if bad == 0 else 'FAIL'})")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
