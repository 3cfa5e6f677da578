#!/usr/bin/env python3
"""decode_ab.py - decode configurations side by side in one run (NVIDIA; a measurement, not a test).

A configuration is a library build plus environment knobs (the library reads R35A_DECODE_SPLITS and
R35A_DECODE_MIN_SPLIT_TILES once per process, so each configuration runs in its own process). The
configurations are run one after the other, every shape in each, and the whole sequence is repeated
--rounds times, so clock or temperature drift hits all of them alike; a shape's time is the median
over the rounds of lab/bench_gpu.py's decode_row (CUDA graphs over >= 512 MiB of disjoint copies,
cold L2, median of 15 replays / copies). Each row also times torch SDPA's cuDNN backend (a fixed
anchor across configurations) and, for M = 1, checks our output against it (max abs difference).

    python3 lab/decode_ab.py --shapes 128:4:1:1:32768,128:4:1:16:8192 \\
        --config old=/path/old/librdna35attn.so.0 \\
        --config new=/path/new/librdna35attn.so.0 \\
        --config new_t4=/path/new/librdna35attn.so.0,R35A_DECODE_MIN_SPLIT_TILES=4 [--rounds 2] [--out DIR]

Shapes are D:G:M:B:CTX (f16, 8 kv heads, page 16, shuffled pages: bench_gpu.py's sweep), or
D:G:M:B:CTX:fp8 / :int8 for an 8-bit KV cache (per-tensor scales, bench_gpu.py's feature rows; no cuDNN
anchor or check for those), :bf16 for bf16 queries and outputs (the K/V dtype too when 16-bit), :nhd
for vLLM's cache layout [pages][page][Hkv][D] instead of [pages][Hkv][page][D], and :pN for N tokens
per page instead of 16 (N a multiple of 16; in hnd a kv head's N key rows are contiguous). Prints one
table (us per call; the ratio of each configuration to the first) and writes decode_ab.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child(lib_path, shapes, peers):
    sys.path.insert(0, os.path.join(ROOT, "lab"))
    import bench_gpu as bg
    lib = bg.Lib(lib_path)
    for (D, G, M, B, ctx, kv8, dtype, layout, page) in shapes:
        try:
            r = bg.decode_row(lib, D, G, M, ctx, B, dtype=dtype, peers=() if kv8 else peers, kv8=kv8 or None,
                              layout=layout, page=int(page[1:]) if page else None)
            out = {k: r.get(k) for k in ("t_ours_us", "t_cudnn_us", "splits", "impl", "maxdiff", "nonfinite")}
        except Exception as e:  # noqa: BLE001
            out = {"error": str(e)[:200]}
        out["shape"] = [D, G, M, B, ctx, kv8, dtype, layout, page]
        print("ROW " + json.dumps(out), flush=True)


def parse_shape(text):
    """D:G:M:B:CTX[:fp8|:int8][:bf16][:nhd][:pN] -> (D, G, M, B, CTX, kv8 or "", "f16" or "bf16", layout,
    "pN" or "" for page 16)."""
    parts = text.split(":")
    flags = parts[5:]
    kv8 = next((f for f in flags if f in ("fp8", "int8")), "")
    dtype = "bf16" if "bf16" in flags else "f16"
    layout = "nhd" if "nhd" in flags else "hnd"
    is_page = lambda f: f[:1] == "p" and f[1:].isdigit() and int(f[1:]) > 0 and int(f[1:]) % 16 == 0  # noqa: E731
    page = next((f for f in flags if is_page(f)), "")
    if page == "p16":
        page = ""
    if len(parts) < 5 or any(f not in ("fp8", "int8", "bf16", "nhd") and not is_page(f) for f in flags) \
            or len(flags) != len(set(flags)) or sum(f in ("fp8", "int8") for f in flags) > 1 \
            or sum(is_page(f) for f in flags) > 1:
        raise SystemExit(f"shape {text!r}: D:G:M:B:CTX[:fp8|:int8][:bf16][:nhd][:pN] (N a multiple of 16)")
    return tuple(int(x) for x in parts[:5]) + (kv8, dtype, layout, page)


def parse_config(text):
    name, rest = text.split("=", 1)
    parts = rest.split(",")
    env = dict(p.split("=", 1) for p in parts[1:])
    return name, parts[0], env


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--config", action="append", default=[], help="NAME=LIB[,VAR=VALUE...]")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--peers", default="cudnn")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    shapes = [parse_shape(s) for s in args.shapes.split(",")]
    peers = () if args.peers == "none" else tuple(args.peers.split(","))
    if args.child:
        child(args.child, shapes, peers)
        return
    configs = [parse_config(c) for c in args.config]
    times = {name: {s: [] for s in shapes} for name, _, _ in configs}
    info = {name: {} for name, _, _ in configs}
    for rnd in range(args.rounds):
        for name, lib, env in configs:
            e = dict(os.environ, PYTHONUNBUFFERED="1", **env)
            p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", lib, "--shapes", args.shapes,
                                "--peers", args.peers], env=e, capture_output=True, text=True, timeout=900)
            rows = [json.loads(line[4:]) for line in p.stdout.splitlines() if line.startswith("ROW ")]
            if p.returncode != 0 or len(rows) != len(shapes):
                print(f"{name} round {rnd}: exit {p.returncode}\n{p.stderr[-2000:]}", flush=True)
            for r in rows:
                s = tuple(r["shape"])
                if "error" in r:
                    print(f"{name} {s}: {r['error']}", flush=True)
                    continue
                times[name][s].append(r["t_ours_us"])
                info[name].setdefault(s, []).append(r)
        print(f"round {rnd + 1}/{args.rounds} done", flush=True)
    base = configs[0][0]
    med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
    result = []
    head = f"{'D:G:M:B:ctx':>18} {'cudnn':>7}" + "".join(f" {n[:14]:>14} {'x':>5}" for n, _, _ in configs)
    print("\nus per call (median over rounds); x = first configuration's time / this one's; [splits]")
    print(head)
    for s in shapes:
        rows = {n: info[n].get(s, []) for n, _, _ in configs}
        cud = [r["t_cudnn_us"] for n in rows for r in rows[n] if r.get("t_cudnn_us")]
        line = f"{':'.join(str(x) for x in s if x not in ('', 'f16', 'hnd')):>18} {med(cud):7.1f}"
        entry = {"shape": s, "t_cudnn_us": med(cud), "configs": {}}
        for n, _, _ in configs:
            t = med(times[n][s])
            sp = rows[n][0]["splits"] if rows[n] else 0
            md = max((r.get("maxdiff") or 0) for r in rows[n]) if rows[n] else None
            entry["configs"][n] = dict(t_us=t, all_us=times[n][s], splits=sp, maxdiff=md,
                                       impl=rows[n][0]["impl"] if rows[n] else None)
            line += f" {t:9.1f} [{sp:>2}] {med(times[base][s]) / t:5.2f}"
        print(line, flush=True)
        result.append(entry)
    bad = [(n, e["shape"], e["configs"][n]["maxdiff"]) for e in result for n in e["configs"]
           if (e["configs"][n]["maxdiff"] or 0) > 1e-2]
    print("max |ours - cuDNN| over the M = 1 rows: " +
          ", ".join(f"{n} {max((e['configs'][n]['maxdiff'] or 0) for e in result):.1e}" for n, _, _ in configs)
          + (f"; ABOVE 1e-2: {bad}" if bad else ""))
    with open(os.path.join(args.out, "decode_ab.json"), "w") as f:
        json.dump(dict(configs=[dict(name=n, lib=l, env=e) for n, l, e in configs], rows=result), f, indent=1)


if __name__ == "__main__":
    main()
