#!/usr/bin/env python3
"""emu_check_encoder.py - static checks and the cost model of every encoder variant on the gfx11
ISA emulator, for kernels/encoder/README.md. Not the correctness check: the kernels' results are
checked, through the library's own planner and launches, by the `emulator` ctests
(tests/hip/test_emulator.c; `ctest -L emulator`).

Compiles kernels/encoder/encoder.hip for gfx1151 (clang-19 -x hip --offload-arch=gfx1151 -nogpuinc -nogpulib
--cuda-device-only -O3 -std=c++17 -I kernels), checks each kernel statically (no scratch, VGPRs and
LDS within the occupancy its table row states, v_wmma and 128-bit global loads present), then counts
each variant's model problem on the emulator (one 1024-token segment for a workgroup-wide variant,
4096 segments of 16 tokens for a small-problem one; 1 head, scaled to --model-heads) and prints the
cost model. Each counted run is also compared with a float64 numpy oracle (a count of a wrong kernel
is worth nothing).

The variant list comes from variants/gfx1151_encoder.tsv (rows: kind dtype head heads rows kb nw
waves maxlen); when variants/variants.def already carries R35A_ENCODER_VARIANT entries the two must
agree.

Usage:
    python3 lab/emu_check_encoder.py                    # static checks + the model of every variant
    python3 lab/emu_check_encoder.py --only d64
    python3 lab/emu_check_encoder.py --model-short      # the 4096 x 16 batch for every variant
    python3 lab/emu_check_encoder.py --static-only
Needs Python >= 3.11 with numpy. gfx11emu is imported from --emu-dir, $GFX11EMU_DIR, or
../shared/gfx11emu next to the repository (it finds the tinygrad snapshot beside it, or $TINYGRAD_DIR).
Exit status: 0 all pass, 1 a check failed, 2 setup error.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "variants", "gfx1151_encoder.tsv")
VARIANTS_DEF = os.path.join(ROOT, "variants", "variants.def")
SOURCE = os.path.join(ROOT, "kernels", "encoder", "encoder.hip")
COLUMNS = ("kind", "dtype", "head", "heads", "rows", "kb", "nw", "waves", "maxlen")
HEADS = (32, 48, 64, 72, 80, 128)
ARGS_BYTES = 144                         # sizeof(r35a_encoder_args), kernels/encoder/encoder_args.h
TOL = {"f16": 2e-3, "bf16": 1.5e-2}      # max|out - ref| / max|ref| (observed <= 6e-4, <= 5.1e-3)
POISON = 0xFFFF                          # NaN in f16 and in bf16


# ---------------------------------------------------------------------------------------------- table
def parse_table(path):
    """(kernels: name -> params, shapes: [(name, dtype, head, heads)]) from the encoder tuning table."""
    arch = os.path.basename(path).split("_")[0].split(".")[0]
    kernels, shapes = {}, []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            where = f"{os.path.relpath(path, ROOT)}:{lineno}"
            cells = [c.strip() for c in line.rstrip("\n").split("\t")]
            if len(cells) != len(COLUMNS):
                sys.exit(f"{where}: {len(cells)} cells, expected {len(COLUMNS)} ({', '.join(COLUMNS)})")
            row = dict(zip(COLUMNS, cells))
            if row["kind"] != "encoder" or row["dtype"] not in ("f16", "bf16"):
                sys.exit(f"{where}: kind must be 'encoder' and dtype f16 or bf16")
            p = {k: int(row[k]) for k in ("head", "heads", "rows", "kb", "nw", "waves", "maxlen")}
            if p["head"] not in HEADS or p["rows"] not in (16, 32) or p["kb"] % 16 or p["nw"] * 32 > 1024:
                sys.exit(f"{where}: bad parameters {p}")
            name = (f"encoder_{row['dtype']}_d{p['head']}_r{p['rows']}_kb{p['kb']}_nw{p['nw']}_w{p['waves']}"
                    + (f"_l{p['maxlen']}" if p["maxlen"] else ""))
            k = dict(arch=arch, name=name, dtype=row["dtype"], head=p["head"], rows=p["rows"], kb=p["kb"],
                     nw=p["nw"], waves=p["waves"], maxlen=p["maxlen"])
            kernels.setdefault(name, k)
            kernels[name]["served_heads"] = min(kernels[name].get("served_heads", p["heads"]), p["heads"])
            shapes.append((name, row["dtype"], p["head"], p["heads"]))
    return kernels, shapes


def variant_line(k):
    return (f"R35A_ENCODER_VARIANT({k['arch']}, {k['name']}, {k['dtype']}, {k['head']}, {k['rows']}, "
            f"{k['kb']}, {k['nw']}, {k['waves']}, {k['maxlen']})")


def check_generated(kernels):
    """If variants.def already lists encoder variants, they must be the table's."""
    if not os.path.exists(VARIANTS_DEF):
        return None
    text = open(VARIANTS_DEF, encoding="utf-8").read()
    archs = {k["arch"] for k in kernels.values()}   # the table's arch; other archs' rows are theirs
    got = {line for line in re.findall(r"^R35A_ENCODER_VARIANT\(.*\)$", text, re.M)
           if line[len("R35A_ENCODER_VARIANT("):].split(",")[0].strip() in archs}
    if not got:
        return "variants.def has no encoder entries yet: variants taken from the table"
    want = {variant_line(k) for k in kernels.values()}
    if got != want:
        sys.exit("variants.def and variants/gfx1151_encoder.tsv disagree on the encoder variants:\n  only in def: "
                 + "\n  ".join(sorted(got - want)) + "\n  only in table: " + "\n  ".join(sorted(want - got)))
    return "variants.def encoder entries match the table"


# ---------------------------------------------------------------------------------------------- build
def find_tool(name, override=None):
    for c in ([override] if override else []) + [f"{name}-19", name]:
        if c and subprocess.run(["sh", "-c", f"command -v {c}"], capture_output=True).returncode == 0:
            return c
    sys.exit(f"{name} not found (clang-19 / llvm-19 tools are needed)")


def compile_kernels(kernels, workdir, clang):
    lst = os.path.join(workdir, "encoder_variants.def")
    with open(lst, "w") as f:
        f.write("\n".join(variant_line(k) for k in kernels.values()) + "\n")
    out = os.path.join(workdir, "encoder.gfx1151.co")
    cmd = [clang, "-x", "hip", "--offload-arch=gfx1151", "-nogpuinc", "-nogpulib", "--cuda-device-only",
           "--no-gpu-bundle-output", "-O3", "-std=c++17", "-I", os.path.join(ROOT, "kernels"),
           "-I", os.path.join(ROOT, "variants"),
           f'-DR35A_ENCODER_VARIANT_LIST="{lst}"', "-o", out, SOURCE]
    t0 = time.time()
    subprocess.run(cmd, check=True)
    print(f"compiled {len(kernels)} encoder kernels in {time.time() - t0:.1f} s: {' '.join(cmd[:9])} ...")
    return out


def occupancy(vgprs, lds, nw):
    """Waves per SIMD on gfx1151: 1536 VGPRs per lane in blocks of 24; 128 KiB LDS per WGP (4 SIMDs)."""
    by_vgpr = min(16, 1536 // (-(-max(vgprs, 1) // 24) * 24))
    by_lds = (131072 // lds) * nw // 4 if lds else 16
    return min(by_vgpr, by_lds), by_vgpr, by_lds


def static_checks(co_path, kernels, readelf, objdump):
    notes = subprocess.run([readelf, "--notes", co_path], capture_output=True, text=True, check=True).stdout
    meta = {}
    for blk in re.split(r"\n\s+- \.args:", notes)[1:]:
        name = re.search(r"\.name:\s+(\S+)", blk).group(1)
        get = lambda key: int(re.search(rf"\.{key}:\s+(\d+)", blk).group(1))
        meta[name] = dict(vgpr=get("vgpr_count"), sgpr=get("sgpr_count"), lds=get("group_segment_fixed_size"),
                          scratch=get("private_segment_fixed_size"), kernarg=get("kernarg_segment_size"),
                          wave=get("wavefront_size"), vspill=get("vgpr_spill_count"))
    target = re.search(r"amdhsa\.target:\s+(\S+)", notes)
    dis = subprocess.run([objdump, "-d", "--no-show-raw-insn", co_path], capture_output=True, text=True, check=True).stdout
    bodies = {m.group(1): m.group(2) for m in re.finditer(r"^[0-9a-f]+ <([^>]+)>:\n(.*?)(?=^[0-9a-f]+ <|\Z)", dis, re.M | re.S)}
    res, ok_all = {}, True
    for name, k in kernels.items():
        m, body = meta.get(name), bodies.get(name, "")
        problems = []
        if m is None:
            problems.append("kernel missing from the code object")
            res[name] = dict(ok=False, problems=problems)
            ok_all = False
            continue
        occ, by_v, by_l = occupancy(m["vgpr"], m["lds"], k["nw"])
        m.update(occ=occ, occ_vgpr=by_v, occ_lds=by_l, wmma=len(re.findall(r"\bv_wmma_f32_16x16x16_", body)),
                 b128=len(re.findall(r"\bglobal_load_b128\b", body)), st128=len(re.findall(r"\bglobal_store_b128\b", body)),
                 scratch_ops=len(re.findall(r"\bscratch_", body)))
        if target is None or "gfx1151" not in target.group(1):
            problems.append(f"target {target.group(1) if target else '?'}")
        if m["scratch"] or m["scratch_ops"] or m["vspill"]:
            problems.append(f"scratch {m['scratch']} B, {m['vspill']} VGPR spills")
        if m["wave"] != 32:
            problems.append("not wave32")
        if m["kernarg"] != ARGS_BYTES:
            problems.append(f"kernarg {m['kernarg']} B != sizeof(r35a_encoder_args) {ARGS_BYTES}")
        if occ < k["waves"]:
            problems.append(f"occupancy {occ} waves/SIMD < contract {k['waves']} (VGPR {by_v}, LDS {by_l})")
        if m["lds"] > 65536:
            problems.append("LDS over 64 KiB")
        if not m["wmma"]:
            problems.append("no v_wmma")
        if not m["b128"]:
            problems.append("no global_load_b128")
        m.update(ok=not problems, problems=problems)
        ok_all &= not problems
        res[name] = m
    return res, ok_all


# ---------------------------------------------------------------------------------------------- numerics
def to_bits(x, dtype):
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f16":
        return x.astype(np.float16).view(np.uint16)
    u = x.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bits(b, dtype):
    b = np.asarray(b, dtype=np.uint16)
    if dtype == "f16":
        return b.view(np.float16).astype(np.float64)
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def oracle(q, k, v, segs, scale, causal=False):
    """float64 attention per segment (causal: row i sees keys 0..i); q: [tokens][Hq][D], k, v:
    [tokens][Hkv][D] float64, query head h reading kv head h / (Hq / Hkv)."""
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    out = np.zeros_like(q)
    t0 = 0
    for n in segs:
        if n:
            s = np.einsum("ihd,jhd->hij", q[t0:t0 + n], k[t0:t0 + n]) * scale
            if causal:
                s = np.where(np.tril(np.ones((n, n), dtype=bool))[None], s, -np.inf)
            s -= s.max(axis=2, keepdims=True)
            p = np.exp(s)
            out[t0:t0 + n] = np.einsum("hij,jhd->ihd", p, v[t0:t0 + n]) / p.sum(axis=2).T[:, :, None]
        t0 += n
    return out


# ---------------------------------------------------------------------------------------------- cases
def group_shape(k):
    """(rows per group, groups per workgroup): encoder_args.h's r35a_encoder_rows_per_group and
    r35a_encoder_groups_per_workgroup."""
    gw = 1 if k["maxlen"] else k["nw"]
    return k["rows"] * gw, k["nw"] // gw


def grid_of(k, segs, max_seqlen, heads):
    """r35a_encoder_variant_grid()."""
    R, G = group_shape(k)
    items = -(-max_seqlen // R) * len(segs) if max_seqlen > 0 else 0
    return (-(-items // G), heads)




def make_inputs(G, case, D, dtype, rng):
    """Buffers, element offsets and strides for a case, and the float64 values the kernel sees."""
    segs, H = case["segs"], case["heads"]
    Hkv = H // case.get("kv_group", 1)
    T = sum(segs)
    q = rng.standard_normal((T, H, D)).astype(np.float32)
    k = rng.standard_normal((T, Hkv, D)).astype(np.float32)
    if case.get("ramp"):
        # keys grow along each segment: later key blocks raise the running max by far more than the
        # kernel's lazy-rescale threshold (2^8), so the O / l rescale path runs many times
        pos = np.concatenate([np.arange(n) / max(n - 1, 1) for n in segs]) if T else np.zeros(0)
        k *= (1.0 + case["ramp"] * pos)[:, None, None].astype(np.float32)
    v = (rng.standard_normal((T, Hkv, D)) + 0.5).astype(np.float32)
    bufs = {}
    if case["layout"] == "fused":
        qkv = np.stack([q, k, v], axis=1)                              # [T][3][H][D]
        bits = to_bits(qkv, dtype)
        qkv_buf = G.alloc(bits.nbytes, "qkv")
        qkv_buf.write("H", bits.ravel().tolist())
        bufs["qkv"] = qkv_buf
        ts, hs = 3 * H * D, D
        base = qkv_buf.ptr
        ptrs = dict(q=base, k=base + 2 * H * D, v=base + 4 * H * D)
        strides = dict(q=(ts, hs), k=(ts, hs), v=(ts, hs))
        vals = from_bits(bits, dtype)
        qf, kf, vf = vals[:, 0], vals[:, 1], vals[:, 2]
        ohs, ots = D + 8, H * (D + 8) + 8                               # padded output rows: gaps stay poisoned
    else:
        ptrs, strides, vals = {}, {}, {}
        for nm, x in (("q", q), ("k", k), ("v", v)):
            bits = to_bits(x, dtype)
            b = G.alloc(max(bits.nbytes, 2), nm)
            if bits.size:
                b.write("H", bits.ravel().tolist())
            bufs[nm] = b
            ptrs[nm] = b.ptr
            strides[nm] = (x.shape[1] * D, D)
            vals[nm] = from_bits(bits, dtype)
        qf, kf, vf = vals["q"], vals["k"], vals["v"]
        ohs, ots = D, H * D
    o_elems = max(T * ots, 1)
    o_buf = G.alloc(2 * o_elems, "out").fill(0xFF)                     # poison: 0xFFFF is NaN
    bufs["out"] = o_buf
    cu = np.concatenate([[0], np.cumsum(segs)]).astype(np.int32)
    cu_buf = G.alloc(4 * len(cu), "cu_seqlens").write("i", cu.tolist())
    bufs["cu"] = cu_buf
    return bufs, ptrs, strides, (ots, ohs), (qf, kf, vf), o_elems


def pack_args(ptrs, out_ptr, cu_ptr, strides, ostr, nseg, heads, max_seqlen, scale_log2, error_ptr, num_tokens,
              causal=0, kv_group=1):
    import struct
    b = struct.pack("<5Q8q3ifQiiii", ptrs["q"], ptrs["k"], ptrs["v"], out_ptr, cu_ptr,
                    strides["q"][0], strides["q"][1], strides["k"][0], strides["k"][1],
                    strides["v"][0], strides["v"][1], ostr[0], ostr[1], nseg, heads, max_seqlen, scale_log2,
                    error_ptr, num_tokens, 0, causal, kv_group)
    assert len(b) == ARGS_BYTES
    return b


def launch_case(G, co, k, case, rng, bounds, count=False):
    D, dtype = k["head"], k["dtype"]
    bufs, ptrs, strides, ostr, (qf, kf, vf), o_elems = make_inputs(G, case, D, dtype, rng)
    segs, H = case["segs"], case["heads"]
    scale = case["scale_mul"] / np.sqrt(D)
    scale_log2 = float(np.float32(scale * 1.4426950408889634))
    max_seqlen = max(segs) + case["extra_max"]
    grid = grid_of(k, segs, max_seqlen, H)
    bufs["error"] = G.alloc(8, "device error record").write("I", [0, 0])
    args = pack_args(ptrs, bufs["out"].ptr, bufs["cu"].ptr, strides, ostr, len(segs), H, max_seqlen, scale_log2,
                     bufs["error"].ptr, sum(segs), int(case.get("causal", 0)), case.get("kv_group", 1))
    st = G.launch(co.kernels[k["name"]], grid=grid, block=(32 * k["nw"],), args=[args], check_bounds=bounds, count=count)
    ob = np.array(bufs["out"].read("H", o_elems), dtype=np.uint16)
    T = sum(segs)
    idx = (np.arange(T)[:, None, None] * ostr[0] + np.arange(H)[None, :, None] * ostr[1] + np.arange(D)[None, None, :])
    written = np.zeros(o_elems, dtype=bool)
    written[idx.ravel()] = True
    out = from_bits(ob[idx], dtype)
    ref = oracle(qf, kf, vf, segs, float(scale), case.get("causal", 0))
    return out, ref, ob, written, st, grid


def evaluate(k, out, ref, ob, written):
    problems = []
    nan = np.isnan(out)
    if nan.any():
        t, h, d = np.argwhere(nan)[0]
        problems.append(f"{int(nan.sum())} NaN outputs (first at token {t} head {h} d {d})")
    denom = np.abs(ref).max() if ref.size else 1.0
    diff = np.where(nan, np.inf, np.abs(out - ref))
    err = float(diff.max() / denom) if ref.size else 0.0
    if err > TOL[k["dtype"]]:
        bad = np.argwhere(diff / denom > TOL[k["dtype"]])
        first = ", ".join(f"[t{a} h{b} d{c}] {out[a, b, c]:.4g} vs {ref[a, b, c]:.4g}" for a, b, c in bad[:3])
        problems.append(f"{len(bad)} outputs over tolerance: {first}")
    zeros = int((out == 0).sum())
    if out.size and zeros > max(2, out.size // 100):
        problems.append(f"{zeros} outputs exactly zero (untouched?)")
    touched = int((ob[~written] != POISON).sum())
    if touched:
        problems.append(f"{touched} elements outside the output rows were written")
    return err, problems


# ---------------------------------------------------------------------------------------------- model
MODELS = {
    # name: (segment length, segments run on the emulator, segments modelled, what it stands for)
    "long": (1024, 1, 1, "one 1024-token segment"),
    "short": (16, 256, 4096, "4096 segments of 16 tokens"),
}


def model_run(G, co, k, which, heads_model, rng, causal=0):
    """The problem MODELS[which] on 1 head, counted on the emulator, scaled to its modelled segments and
    heads_model heads (segments and heads run independently; the counts are linear in both). The cost
    model is gfx11emu.cost_model's: VALU + 4 TRANS + 32 WMMA SIMD cycles over 80 SIMDs at 2.9 GHz."""
    n, nrun, nmodel, _ = MODELS[which]
    case = dict(name="model", segs=[n] * nrun, heads=1, layout="separate", scale_mul=1.0, extra_max=0, causal=causal)
    out, ref, ob, written, st, grid = launch_case(G, co, k, case, rng, bounds=False, count=True)
    err, problems = evaluate(k, out, ref, ob, written)
    c = st.by_class
    D = k["head"]
    scale = heads_model * nmodel / nrun
    cyc = c["VALU"] + 4 * c["VALU_TRANS"] + 32 * c["WMMA"]
    t_c = cyc * scale / 80 / 2.9e9
    byt = (st.bytes_loaded + st.bytes_stored) * scale
    uniq = 4 * n * nmodel * heads_model * D * 2
    flops = 4 * n * n * D * nmodel * heads_model
    waves = grid[0] * scale * k["nw"]
    per_wave = cyc / (grid[0] * k["nw"])
    t_q = -(-waves // 80) * per_wave / 2.9e9             # whole waves per SIMD (tail)
    return dict(err=err, problems=problems, by_class=c, cycles=cyc * scale, t_compute=t_c, scale=scale,
                bytes=byt, t_mem_req=byt / 215e9, t_mem_unique=uniq / 215e9, t_flop=flops / 59e12,
                t_roof=max(flops / 59e12, uniq / 215e9), flops=flops, t_wave_quant=t_q,
                instr=st.instructions * scale, wmma_share=32 * c["WMMA"] / cyc)


def print_model(name, k, which, m):
    c, per = m["by_class"], MODELS[which][2] / MODELS[which][1]
    unit = "per head" if which == "long" else f"per head and {MODELS[which][2]} segments"
    f = lambda x: int(round(x * per))   # noqa: E731
    print(f"  {name} [{MODELS[which][3]}]: err {m['err']:.2e}{' FAIL ' + '; '.join(m['problems']) if m['problems'] else ''}\n"
          f"    {unit}: WMMA {f(c['WMMA'])}, VALU {f(c['VALU'])}, TRANS {f(c['VALU_TRANS'])}, LDS {f(c['LDS'])}, "
          f"VMEM {f(c['VMEM_LOAD'])}+{f(c['VMEM_STORE'])}, SALU {f(c['SALU'])}, BARRIER {f(c['BARRIER'])}; "
          f"WMMA share of SIMD cycles {100 * m['wmma_share']:.1f} %\n"
          f"    FLOP floor (4 N^2 D H per segment at 59 TFLOP/s) {1e6 * m['t_flop']:.1f} us ({m['flops'] / 1e9:.2f} GFLOP); "
          f"Q+K+V+O once at 215 GB/s {1e6 * m['t_mem_unique']:.1f} us\n"
          f"    cost model: compute {1e6 * m['t_compute']:.1f} us = {m['t_compute'] / m['t_flop']:.2f}x the FLOP floor "
          f"({100 * m['t_flop'] / m['t_compute']:.1f} % of the WMMA peak; whole waves per SIMD: "
          f"{1e6 * m['t_wave_quant']:.1f} us), requested bytes {m['bytes'] / 1e6:.1f} MB = {1e6 * m['t_mem_req']:.1f} us "
          f"at 215 GB/s")


# ---------------------------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", default=TABLE, help="encoder tuning table (default variants/gfx1151_encoder.tsv)")
    ap.add_argument("--emu-dir", default=os.environ.get("GFX11EMU_DIR", os.path.join(os.path.dirname(ROOT), "shared", "gfx11emu")))
    ap.add_argument("--only", default="", help="comma-separated substrings: run only variants whose name has one")
    ap.add_argument("--static-only", action="store_true")
    ap.add_argument("--model", action="store_true",
                    help="count each variant's model problem (1024-token segment, or 4096 x 16 tokens): the default")
    ap.add_argument("--model-short", action="store_true", help="count the 4096 x 16-token batch for every variant")
    ap.add_argument("--model-heads", type=int, default=16)
    ap.add_argument("--clang", default=os.environ.get("GFX11EMU_CLANG"))
    ap.add_argument("--keep", default=None, help="directory to keep the code object in")
    ap.add_argument("--causal", action="store_true", help="count the causal model problem (row i sees keys 0..i)")
    ap.add_argument("--no-model", action="store_true", help="skip the model runs (with --check-masks: only those)")
    ap.add_argument("--check-masks", action="store_true",
                    help="also run causal and GQA cases (Hq 4, Hkv 2 and 1; ragged segments) against the oracle")
    a = ap.parse_args()

    kernels, shapes = parse_table(a.table)
    if a.only:
        keys = a.only.split(",")
        kernels = {n: k for n, k in kernels.items() if any(n.startswith(s) or f"_{s}" in n for s in keys)}
    if not kernels:
        sys.exit("no variant selected")
    print(f"table {os.path.relpath(a.table, ROOT)}: {len(shapes)} shapes -> {len(kernels)} kernels; "
          f"{check_generated(parse_table(a.table)[0])}")
    clang, readelf, objdump = find_tool("clang", a.clang), find_tool("llvm-readelf"), find_tool("llvm-objdump")
    workdir = a.keep or tempfile.mkdtemp(prefix="emu_enc_")
    os.makedirs(workdir, exist_ok=True)
    co_path = compile_kernels(kernels, workdir, clang)
    st, static_ok = static_checks(co_path, kernels, readelf, objdump)

    print("\nstatic checks (gfx1151; occupancy = waves/SIMD from VGPRs (blocks of 24 of 1536) and LDS (128 KiB/WGP)):")
    print(f"  {'kernel':44s} {'VGPR':>4s} {'SGPR':>4s} {'LDS B':>6s} {'scratch':>7s} {'occ':>3s} {'(vgpr,lds)':>10s} "
          f"{'contract':>8s} {'wmma':>4s} {'ld128':>5s} {'st128':>5s}  result")
    for name, m in st.items():
        if "vgpr" not in m:
            print(f"  {name:44s} FAIL: {'; '.join(m['problems'])}")
            continue
        print(f"  {name:44s} {m['vgpr']:4d} {m['sgpr']:4d} {m['lds']:6d} {m['scratch']:7d} {m['occ']:3d} "
              f"{'(%d,%d)' % (m['occ_vgpr'], m['occ_lds']):>10s} {kernels[name]['waves']:8d} {m['wmma']:4d} {m['b128']:5d} "
              f"{m['st128']:5d}  {'ok' if m['ok'] else 'FAIL: ' + '; '.join(m['problems'])}")
    if a.static_only:
        return 0 if static_ok else 1

    sys.path.insert(0, a.emu_dir)
    try:
        import gfx11emu as G
    except ImportError as e:
        print(f"cannot import gfx11emu from {a.emu_dir}: {e}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(7)
    co = G.load(co_path)
    ok_all = static_ok
    served = {}
    for n, dt, d, h in shapes:
        served.setdefault(n, []).append(h)
    print("\nserved shapes (head counts per kernel, run-time values):")
    for n in kernels:
        print(f"  {n:44s} Hq {', '.join(map(str, served.get(n, [])))}")

    print(f"\nmodel: emulator counts on 1 head, scaled to {a.model_heads} heads; gfx1151 cost model (80 SIMDs x "
          f"2.9 GHz, WMMA 32 cycles, transcendental 4), 215 GB/s, 59 TFLOP/s")
    for name, k in kernels.items():
        runs = ["short"] if a.model_short else ["short" if k["maxlen"] else "long"]
        for which in runs if not a.no_model else []:
            m = model_run(G, co, k, which, a.model_heads, rng, int(a.causal))
            ok_all &= not m["problems"]
            print_model(name + (" causal" if a.causal else ""), k, which, m)
        if a.check_masks:
            lim = k["maxlen"] or 200
            segs = [s for s in (lim, 1, 37, 0, 2 * k["rows"] + 3) if s <= lim]
            for causal, g in ((1, 1), (0, 2), (1, 2), (1, 4)):
                case = dict(name="mask", segs=segs, heads=4, layout="separate", scale_mul=1.0, extra_max=0,
                            causal=causal, kv_group=g)
                out, ref, ob, written, _, _ = launch_case(G, co, k, case, rng, bounds=True)
                err, problems = evaluate(k, out, ref, ob, written)
                ok_all &= not problems
                print(f"  {name} causal {causal} Hq 4 Hkv {4 // g} segments {segs}: err {err:.2e}"
                      f"{' FAIL ' + '; '.join(problems) if problems else ' ok'}")
    print(f"\n{'ALL PASS' if ok_all else 'FAILURES'}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
