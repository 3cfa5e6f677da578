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

--paged does the same for the paged siblings (<variant>_paged, R35A_ENCODER_PAGED in variants.def: causal
prefill over a paged KV cache, kernels/encoder/prefill_args.h) of the workgroup-wide variants. Its model
problem is one sequence: a chunk of --paged-m query tokens (2048) over --paged-prefix keys (0), query i at
position L - M + i seeing keys 0 .. L - M + i, pages of --paged-page keys (16) handed out in shuffled order
from a cache with spare pages, --paged-kv-group query heads (4) per kv head packed into one item of M x G
rows. It counts one kv head (its G query heads; every workgroup of the grid, nothing sampled), scales to
--model-heads query heads, checks the output against the float64 oracle, and counts the varlen causal
kernel on the same chunk (one M-token segment, G query heads over one kv head) for the ratio by
instruction class. Its % of the WMMA peak is the causal FLOP floor (4 D per (query, key) pair seen) over
the modelled time. --paged --check adds small cases under bounds checks: chunks that are not multiples
of the tile, prefixes, pages of 16 and 48, G 1, 3 and 4, a V cache in [page][slot][head][D] order, padded
O strides, and a batch with a decode-sized sequence (M <= min_query_len: its rows must stay untouched);
spare pages, slots past a sequence's last key and table entries past its pages hold NaN / out-of-cache
values, so reading any of them fails the case.

The variant list comes from variants/gfx1151_encoder.tsv (rows: kind dtype head heads rows kb nw
waves maxlen); when variants/variants.def already carries R35A_ENCODER_VARIANT entries the two must
agree.

Usage:
    python3 lab/emu_check_encoder.py                    # static checks + the model of every variant
    python3 lab/emu_check_encoder.py --only d64
    python3 lab/emu_check_encoder.py --model-short      # the 4096 x 16 batch for every variant
    python3 lab/emu_check_encoder.py --static-only
    python3 lab/emu_check_encoder.py --paged --only f16_d128       # the paged sibling's 2048-token chunk
    python3 lab/emu_check_encoder.py --paged --check --no-model    # the paged siblings' small cases
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
ARGS_BYTES = 192                         # sizeof(r35a_encoder_args), kernels/encoder/encoder_args.h
PREFILL_ARGS_BYTES = 256                 # sizeof(r35a_prefill_args), kernels/encoder/prefill_args.h
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


def compile_kernels(kernels, workdir, clang, extra_lines=()):
    lst = os.path.join(workdir, "encoder_variants.def")
    with open(lst, "w") as f:
        f.write("\n".join([variant_line(k) for k in kernels.values()] + list(extra_lines)) + "\n")
    out = os.path.join(workdir, "encoder.gfx1151.co")
    cmd = [clang, "-x", "hip", "--offload-arch=gfx1151", "-nogpuinc", "-nogpulib", "--cuda-device-only",
           "--no-gpu-bundle-output", "-O3", "-std=c++17", "-I", os.path.join(ROOT, "kernels"),
           "-I", os.path.join(ROOT, "variants"),
           f'-DR35A_ENCODER_VARIANT_LIST="{lst}"', "-o", out, SOURCE]
    t0 = time.time()
    subprocess.run(cmd, check=True)
    print(f"compiled {len(kernels) + len(extra_lines)} encoder kernels in {time.time() - t0:.1f} s: {' '.join(cmd[:9])} ...")
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
        want = (PREFILL_ARGS_BYTES, "r35a_prefill_args") if k.get("paged_of") else (ARGS_BYTES, "r35a_encoder_args")
        if m["kernarg"] != want[0]:
            problems.append(f"kernarg {m['kernarg']} B != sizeof({want[1]}) {want[0]}")
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


def attend(q, k, v, scale, coff=None):
    """float64 attention of one sequence: q [M][Hq][D] over k, v [L][Hkv][D], query head h reading kv head
    h / (Hq / Hkv); coff not None: causal with offset, query i sees keys 0 .. coff + i (a query that sees
    no key gives zeros)."""
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = np.einsum("ihd,jhd->hij", q, k) * scale
    if coff is not None:
        s = np.where((np.arange(k.shape[0])[None, :] <= coff + np.arange(q.shape[0])[:, None])[None], s, -np.inf)
    m = s.max(axis=2, keepdims=True)
    p = np.exp(s - np.where(np.isfinite(m), m, 0))
    l = p.sum(axis=2)
    return np.einsum("hij,jhd->ihd", p, v) / np.where(l > 0, l, 1).T[:, :, None]


def oracle(q, k, v, segs, scale, causal=False):
    """float64 attention per segment (causal: row i sees keys 0..i); q: [tokens][Hq][D], k, v:
    [tokens][Hkv][D] float64, query head h reading kv head h / (Hq / Hkv)."""
    out = np.zeros_like(q)
    t0 = 0
    for n in segs:
        if n:
            out[t0:t0 + n] = attend(q[t0:t0 + n], k[t0:t0 + n], v[t0:t0 + n], scale, 0 if causal else None)
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
    b = struct.pack("<5Q8q3ifQiiii3fiQQqq", ptrs["q"], ptrs["k"], ptrs["v"], out_ptr, cu_ptr,
                    strides["q"][0], strides["q"][1], strides["k"][0], strides["k"][1],
                    strides["v"][0], strides["v"][1], ostr[0], ostr[1], nseg, heads, max_seqlen, scale_log2,
                    error_ptr, num_tokens, 0, causal, kv_group,
                    0.0, 0.0, 0.0, 0, 0, 0, 0, 0)   # softcap, sinks, LSE: off
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
    # the products a query row needs: every key of its segment, or with causal the keys up to its own
    flops = (causal_flops(n, 0, D, nmodel * heads_model) if causal else 4 * n * n * D * nmodel * heads_model)
    waves = grid[0] * scale * k["nw"]
    per_wave = cyc / (grid[0] * k["nw"])
    t_q = -(-waves // 80) * per_wave / 2.9e9             # whole waves per SIMD (tail)
    return dict(err=err, problems=problems, by_class=c, cycles=cyc * scale, t_compute=t_c, scale=scale,
                bytes=byt, t_mem_req=byt / 215e9, t_mem_unique=uniq / 215e9, t_flop=flops / 59e12,
                t_roof=max(flops / 59e12, uniq / 215e9), flops=flops, t_wave_quant=t_q, causal=causal,
                instr=st.instructions * scale, wmma_share=32 * c["WMMA"] / cyc)


def print_model(name, k, which, m):
    c, per = m["by_class"], MODELS[which][2] / MODELS[which][1]
    unit = "per head" if which == "long" else f"per head and {MODELS[which][2]} segments"
    f = lambda x: int(round(x * per))   # noqa: E731
    print(f"  {name} [{MODELS[which][3]}]: err {m['err']:.2e}{' FAIL ' + '; '.join(m['problems']) if m['problems'] else ''}\n"
          f"    {unit}: WMMA {f(c['WMMA'])}, VALU {f(c['VALU'])}, TRANS {f(c['VALU_TRANS'])}, LDS {f(c['LDS'])}, "
          f"VMEM {f(c['VMEM_LOAD'])}+{f(c['VMEM_STORE'])}, SALU {f(c['SALU'])}, BARRIER {f(c['BARRIER'])}; "
          f"WMMA share of SIMD cycles {100 * m['wmma_share']:.1f} %\n"
          f"    FLOP floor ({'2 N (N + 1)' if m['causal'] else '4 N^2'} D H per segment at 59 TFLOP/s) {1e6 * m['t_flop']:.1f} us ({m['flops'] / 1e9:.2f} GFLOP); "
          f"Q+K+V+O once at 215 GB/s {1e6 * m['t_mem_unique']:.1f} us\n"
          f"    cost model: compute {1e6 * m['t_compute']:.1f} us = {m['t_compute'] / m['t_flop']:.2f}x the FLOP floor "
          f"({100 * m['t_flop'] / m['t_compute']:.1f} % of the WMMA peak; whole waves per SIMD: "
          f"{1e6 * m['t_wave_quant']:.1f} us), requested bytes {m['bytes'] / 1e6:.1f} MB = {1e6 * m['t_mem_req']:.1f} us "
          f"at 215 GB/s")


# ---------------------------------------------------------------------------------------------- paged siblings


def paged_siblings(kernels):
    """{variant name: paged sibling name} from the R35A_ENCODER_PAGED entries of variants.def for the
    table's arch, for the selected workgroup-wide variants (maxlen 0)."""
    if not os.path.exists(VARIANTS_DEF):
        sys.exit("variants/variants.def is missing: the paged siblings are listed there")
    text = open(VARIANTS_DEF, encoding="utf-8").read()
    archs = {k["arch"] for k in kernels.values()}
    sib = {}
    for m in re.finditer(r"^R35A_ENCODER_PAGED\(([^)]*)\)$", text, re.M):
        cells = [c.strip() for c in m.group(1).split(",")]
        arch, name, variant = cells[:3]
        if arch in archs and variant in kernels:
            k = kernels[variant]
            if k["maxlen"] or cells[3:] != [k["dtype"], str(k["head"]), str(k["rows"]), str(k["kb"]), str(k["nw"]),
                                            str(k["waves"])]:
                sys.exit(f"variants.def: {m.group(0)} does not match its variant's table row")
            sib[variant] = name
    return sib


def paged_line(k, name):
    return (f"R35A_ENCODER_PAGED({k['arch']}, {name}, {k['name']}, {k['dtype']}, {k['head']}, {k['rows']}, "
            f"{k['kb']}, {k['nw']}, {k['waves']})")


def _prefill_struct():
    """r35a_prefill_args as ctypes lays it out (C's rules on LP64: the same offsets as the header's)."""
    import ctypes as ct
    P, I64, I32 = ct.c_uint64, ct.c_int64, ct.c_int32

    class PrefillArgs(ct.Structure):
        _fields_ = ([(n, P) for n in ("q", "k_cache", "v_cache", "out", "query_start_loc", "seq_lens", "block_table")]
                    + [(n, I64) for n in ("q_token_stride", "q_head_stride", "o_token_stride", "o_head_stride",
                                          "k_page_stride", "k_head_stride", "k_slot_stride",
                                          "v_page_stride", "v_head_stride", "v_slot_stride", "block_table_stride")]
                    + [(n, I32) for n in ("num_seqs", "num_heads", "kv_group", "page_size", "num_pages",
                                          "max_query_len", "max_seq_len", "num_tokens", "min_query_len")]
                    + [("scale_log2", ct.c_float), ("error", P)]
                    # the model features, all off here (zeros), and the LSE output (none)
                    + [("window", I32), ("softcap", ct.c_float), ("softcap_in", ct.c_float),
                       ("softcap_out", ct.c_float), ("inv_scale", ct.c_float), ("pad0", I32),
                       ("alibi_slopes", P), ("sinks", P), ("lse", P), ("lse_token_stride", I64),
                       ("lse_head_stride", I64)])
    assert ct.sizeof(PrefillArgs) == PREFILL_ARGS_BYTES, ct.sizeof(PrefillArgs)
    assert PrefillArgs.num_seqs.offset == 144 and PrefillArgs.scale_log2.offset == 180 and PrefillArgs.error.offset == 184
    return PrefillArgs


def prefill_grid(k, num_seqs, max_query_len, num_heads, kv_group):
    """r35a_prefill_grid(): { num_seqs * ceil(max_query_len G / R), num_heads / G, 1 }."""
    R = k["rows"] * k["nw"]
    nrb = -(-(max_query_len * kv_group) // R)
    return (nrb * num_seqs, num_heads // kv_group, 1)


def paged_case(G, co, k, name, case, rng, bounds, count=False):
    """Run a paged sibling on case: seqs [(M, prefix)], kv_group, kv_heads, page, spare pages, min_query_len,
    o_pad (padding of O's head and token strides: the gaps must stay poisoned), v_nhd (V cache as
    [pages][slot][kv head][D]). Pages are handed out in shuffled order from a cache with spare pages; spare pages,
    the slots past each sequence's last key and the table entries past its pages are poisoned (NaN values, entries
    outside the cache), so a read of any of them shows. Returns (out, ref, raw O bits, written mask, stats, grid,
    error record)."""
    import ctypes as ct
    D, dtype = k["head"], k["dtype"]
    grp, hkv, B = case["kv_group"], case["kv_heads"], case["page"]
    H = grp * hkv
    seqs = case["seqs"]
    Ms = [m for m, _ in seqs]
    Ls = [m + p for m, p in seqs]
    T = sum(Ms)
    npg = [-(-L // B) for L in Ls]
    num_pages = sum(npg) + case.get("spare", 3)
    bt_stride = max(npg) + 2
    perm = rng.permutation(num_pages)
    table = np.full((len(seqs), bt_stride), -7, dtype=np.int32)      # past a sequence's pages: outside the cache
    used, at = np.zeros(num_pages, dtype=bool), 0
    for s, n in enumerate(npg):
        table[s, :n] = perm[at:at + n]
        used[perm[at:at + n]] = True
        at += n
    q = rng.standard_normal((T, H, D)).astype(np.float32)
    kc = rng.standard_normal((num_pages, hkv, B, D)).astype(np.float32)
    vc = (rng.standard_normal((num_pages, hkv, B, D)) + 0.5).astype(np.float32)
    qb, kb, vb = to_bits(q, dtype), to_bits(kc, dtype), to_bits(vc, dtype)
    live = np.zeros((num_pages, B), dtype=bool)                        # slots that hold a key
    for s, L in enumerate(Ls):
        for j in range(npg[s]):
            live[table[s, j], :max(0, min(B, L - j * B))] = True
    dead = np.broadcast_to(~live[:, None, :, None], kb.shape)
    kb[dead] = POISON
    vb[dead] = POISON
    kf, vf = from_bits(kb, dtype), from_bits(vb, dtype)
    if case.get("v_nhd"):
        vb = np.ascontiguousarray(vb.transpose(0, 2, 1, 3))              # [pages][slot][kv head][D]
        vstr = (B * hkv * D, D, hkv * D)
    else:
        vstr = (hkv * B * D, B * D, D)
    kstr = (hkv * B * D, B * D, D)
    bufs = {}

    def put(nm, arr, fmt):
        b = G.alloc(max(arr.nbytes, 4), nm)
        if arr.size:
            b.write(fmt, arr.ravel().tolist())
        bufs[nm] = b
        return b.ptr
    pad = case.get("o_pad", 0)
    ohs, ots = D + pad, H * (D + pad) + pad
    o_elems = max(T * ots, 1)
    bufs["out"] = G.alloc(2 * o_elems, "out").fill(0xFF)
    qsl = np.concatenate([[0], np.cumsum(Ms)]).astype(np.int32)
    bufs["error"] = G.alloc(8, "device error record").write("I", [0, 0])
    A = _prefill_struct()(
        q=put("q", qb, "H"), k_cache=put("k_cache", kb, "H"), v_cache=put("v_cache", vb, "H"), out=bufs["out"].ptr,
        query_start_loc=put("query_start_loc", qsl, "i"), seq_lens=put("seq_lens", np.array(Ls, np.int32), "i"),
        block_table=put("block_table", table, "i"),
        q_token_stride=H * D, q_head_stride=D, o_token_stride=ots, o_head_stride=ohs,
        k_page_stride=kstr[0], k_head_stride=kstr[1], k_slot_stride=kstr[2],
        v_page_stride=vstr[0], v_head_stride=vstr[1], v_slot_stride=vstr[2], block_table_stride=bt_stride,
        num_seqs=len(seqs), num_heads=H, kv_group=grp, page_size=B, num_pages=num_pages,
        max_query_len=max(Ms) + case.get("extra_max", 0), max_seq_len=max(Ls), num_tokens=T,
        min_query_len=case.get("min_query_len", 0), error=bufs["error"].ptr)
    scale = case.get("scale_mul", 1.0) / np.sqrt(D)
    A.scale_log2 = float(np.float32(scale * 1.4426950408889634))
    grid = prefill_grid(k, len(seqs), A.max_query_len, H, grp)
    st = G.launch(co.kernels[name], grid=grid, block=(32 * k["nw"],), args=[bytes(A)], check_bounds=bounds, count=count)
    err_rec = bufs["error"].read("I", 2)
    ob = np.array(bufs["out"].read("H", o_elems), dtype=np.uint16)
    ref = np.zeros((T, H, D))
    rows = []                                                           # tokens the kernel must write
    for s, (M, P) in enumerate(seqs):
        t0 = int(qsl[s])
        if M <= A.min_query_len:
            continue
        pages = table[s, :npg[s]]
        keys = lambda c: c[pages].transpose(0, 2, 1, 3).reshape(npg[s] * B, hkv, D)[:Ls[s]]   # noqa: E731
        ref[t0:t0 + M] = attend(from_bits(qb[t0:t0 + M], dtype), keys(kf), keys(vf), float(scale), coff=P)
        rows += range(t0, t0 + M)
    rows = np.array(rows, dtype=np.int64)
    idx = rows[:, None, None] * ots + np.arange(H)[None, :, None] * ohs + np.arange(D)[None, None, :]
    written = np.zeros(o_elems, dtype=bool)
    written[idx.ravel()] = True
    out = from_bits(ob[idx], dtype)
    return out, ref[rows], ob, written, st, grid, err_rec


def causal_flops(M, P, D, heads):
    """4 D per (query, key) pair a causal chunk of M queries over a prefix of P keys computes, per head."""
    return 4 * D * heads * (M * P + M * (M + 1) // 2)


def cost_of(st, scale):
    c = st.by_class
    cyc = c["VALU"] + 4 * c["VALU_TRANS"] + 32 * c["WMMA"]
    return c, cyc, cyc * scale / 80 / 2.9e9


def paged_model(G, co, k, name, a, rng):
    """The paged model problem (one sequence: a chunk of --paged-m tokens over --paged-prefix keys, pages of
    --paged-page in shuffled order, --paged-kv-group query heads per kv head) counted on the emulator for one
    kv head (its G query heads, every workgroup), scaled to --model-heads query heads; and the varlen kernel on
    the same chunk (one M-token segment, causal, G query heads over one kv head) for the ratio."""
    M, P, grp = a.paged_m, a.paged_prefix, a.paged_kv_group
    case = dict(seqs=[(M, P)], kv_group=grp, kv_heads=1, page=a.paged_page, spare=8)
    out, ref, ob, written, st, grid, rec = paged_case(G, co, k, name, case, rng, bounds=False, count=True)
    err, problems = evaluate(k, out, ref, ob, written)
    if rec != [0, 0]:
        problems.append(f"device error record {rec}")
    scale = a.model_heads / grp                                         # kv heads
    c, cyc, t_c = cost_of(st, scale)
    flops = causal_flops(M, P, k["head"], a.model_heads)
    uniq = 2 * k["head"] * (2 * M * a.model_heads + 2 * (M + P) * a.model_heads // grp)   # Q, O; K, V of each kv head
    res = dict(err=err, problems=problems, by_class=c, cycles=cyc, t_compute=t_c, grid=grid, flops=flops,
               t_flop=flops / 59e12, bytes=(st.bytes_loaded + st.bytes_stored) * scale, seconds=st.seconds,
               t_mem_unique=uniq / 215e9, varlen=None)
    if P:
        return res                                                      # the varlen kernel has no prefix
    vcase = dict(name="model", segs=[M], heads=grp, layout="separate", scale_mul=1.0, extra_max=0, causal=1,
                 kv_group=grp)
    vk = dict(k, name=k["paged_of"])                                    # the varlen variant itself
    vout, vref, vob, vwritten, vst, vgrid = launch_case(G, co, vk, vcase, rng, bounds=False, count=True)
    verr, vproblems = evaluate(k, vout, vref, vob, vwritten)
    vc, vcyc, vt_c = cost_of(vst, scale)
    vflops = causal_flops(M, 0, k["head"], a.model_heads)
    res["varlen"] = dict(err=verr, problems=vproblems, by_class=vc, cycles=vcyc, t_compute=vt_c, grid=vgrid,
                         flops=vflops, t_flop=vflops / 59e12, seconds=vst.seconds,
                         bytes=(vst.bytes_loaded + vst.bytes_stored) * scale)
    return res


CLASS_ROW = (("WMMA", "WMMA"), ("VALU", "VALU"), ("TRANS", "VALU_TRANS"), ("LDS", "LDS"), ("VMEM load", "VMEM_LOAD"),
             ("VMEM store", "VMEM_STORE"), ("SALU", "SALU"), ("SMEM", "SMEM"), ("BRANCH", "BRANCH"),
             ("WAITCNT", "WAITCNT"), ("BARRIER", "BARRIER"), ("SCRATCH", "SCRATCH"))


def print_paged_model(name, k, a, m, scratch):
    M, P, grp = a.paged_m, a.paged_prefix, a.paged_kv_group
    v = m["varlen"]
    print(f"  {name} [a {M}-token chunk over {P} prefix keys, pages of {a.paged_page} shuffled, G {grp}; "
          f"grid {m['grid'][0]} x 1 per kv head, {m['seconds']:.0f} s]: err {m['err']:.2e}"
          f"{' FAIL ' + '; '.join(m['problems']) if m['problems'] else ''}")
    if v is None:
        print("    (no varlen comparison: the varlen kernel has no prefix)")
        v = dict(by_class={cl: 0 for _, cl in CLASS_ROW}, cycles=0)
    else:
        print(f"    varlen causal kernel on one {M}-token segment, {grp} query heads over 1 kv head (grid "
              f"{v['grid'][0]} x {v['grid'][1]}): err {v['err']:.2e}{' FAIL ' + '; '.join(v['problems']) if v['problems'] else ''}")
    both = m["varlen"] is not None
    print(f"    per kv head ({grp} query heads), every workgroup counted:   {'paged':>10s}"
          + (f" {'varlen':>10s}  ratio" if both else ""))
    for lbl, cl in CLASS_ROW + (("SIMD cycles", None),):
        x, y = (m["cycles"], v["cycles"]) if cl is None else (m["by_class"][cl], v["by_class"][cl])
        print(f"      {lbl:12s} {x:10d}" + (f" {y:10d}  " + (f"{x / y:.3f}" if y else "-") if both else "")
              + ("   (VALU + 4 TRANS + 32 WMMA)" if cl is None else ""))
    share = lambda x: f"{100 * 32 * x['by_class']['WMMA'] / x['cycles']:.1f} %" if x["cycles"] else "-"   # noqa: E731
    print(f"    WMMA share of SIMD cycles {share(m)}{f' (varlen {share(v)})' if both else ''}; scratch {scratch} B")
    print(f"    {a.model_heads} query heads: causal FLOP floor (4 D per (query, key) pair seen, at 59 TFLOP/s) "
          f"{1e6 * m['t_flop']:.1f} us ({m['flops'] / 1e9:.2f} GFLOP); Q+K+V+O once at 215 GB/s "
          f"{1e6 * m['t_mem_unique']:.1f} us")
    print(f"    cost model: compute {1e6 * m['t_compute']:.1f} us = {100 * m['t_flop'] / m['t_compute']:.1f} % of the "
          f"WMMA peak, requested bytes {m['bytes'] / 1e6:.1f} MB = {1e6 * m['bytes'] / 215e9:.1f} us at 215 GB/s")
    if m["varlen"]:
        v = m["varlen"]
        print(f"    varlen causal: compute {1e6 * v['t_compute']:.1f} us = {100 * v['t_flop'] / v['t_compute']:.1f} % of the "
              f"WMMA peak, requested bytes {v['bytes'] / 1e6:.1f} MB; paged / varlen SIMD cycles "
              f"{m['cycles'] / v['cycles']:.3f}")


PAGED_CHECKS = (
    # (seqs [(M, prefix)], kv_group, kv_heads, page, extras)
    ([(37, 0)], 1, 2, 16, {}),
    ([(45, 29)], 3, 1, 48, dict(v_nhd=1, o_pad=8)),
    ([(100, 70)], 4, 2, 16, {}),
    ([(61, 131)], 4, 1, 48, dict(spare=5)),
    ([(21, 5), (5, 40), (50, 0), (9, 100)], 3, 2, 16, dict(min_query_len=8, extra_max=7, o_pad=8)),
)


def paged_checks(G, co, k, name, rng):
    ok = True
    for seqs, grp, hkv, page, extra in PAGED_CHECKS:
        case = dict(seqs=seqs, kv_group=grp, kv_heads=hkv, page=page, **extra)
        out, ref, ob, written, _, grid, rec = paged_case(G, co, k, name, case, rng, bounds=True)
        err, problems = evaluate(k, out, ref, ob, written)
        if rec != [0, 0]:
            problems.append(f"device error record {rec}")
        ok &= not problems
        more = ", ".join(f"{x} {y}" for x, y in extra.items())
        print(f"  {name} (M, prefix) {seqs} G {grp} Hkv {hkv} page {page}{', ' + more if more else ''} "
              f"grid {grid[0]}x{grid[1]}: err {err:.2e}{' FAIL ' + '; '.join(problems) if problems else ' ok'}")
    return ok


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
    ap.add_argument("--paged", action="store_true",
                    help="the paged siblings (<variant>_paged) of the workgroup-wide variants: their model problem "
                         "(--paged-*) against the varlen causal kernel, and with --check their small cases")
    ap.add_argument("--paged-m", type=int, default=2048, help="query tokens of the paged model's chunk (2048)")
    ap.add_argument("--paged-prefix", type=int, default=0, help="keys before the chunk (0)")
    ap.add_argument("--paged-page", type=int, default=16, help="page size, a multiple of 16 (16)")
    ap.add_argument("--paged-kv-group", type=int, default=4, help="query heads per kv head, packed into one item (4)")
    ap.add_argument("--check", action="store_true",
                    help="with --paged: also run the small correctness cases (ragged chunks, prefixes, pages of 16 "
                         "and 48, G 1, 3, 4, a batch with a decode-sized sequence) with bounds checks")
    a = ap.parse_args()

    kernels, shapes = parse_table(a.table)
    if a.only:
        keys = a.only.split(",")
        kernels = {n: k for n, k in kernels.items() if any(n.startswith(s) or f"_{s}" in n for s in keys)}
    paged = {}
    if a.paged:
        if a.paged_page <= 0 or a.paged_page % 16 or a.paged_m <= 0 or a.paged_prefix < 0 or a.paged_kv_group <= 0:
            sys.exit("--paged-page must be a positive multiple of 16, --paged-m and --paged-kv-group positive, "
                     "--paged-prefix >= 0")
        if a.model_heads % a.paged_kv_group:
            sys.exit("--model-heads must be a multiple of --paged-kv-group (query heads per kv head)")
        sib = paged_siblings(kernels)
        kernels = {n: k for n, k in kernels.items() if n in sib}
        paged = {sib[n]: dict(k, name=sib[n], paged_of=n) for n, k in kernels.items()}
    if not kernels:
        sys.exit("no variant selected" + (" (with --paged: no workgroup-wide variant with a paged sibling)" if a.paged else ""))
    print(f"table {os.path.relpath(a.table, ROOT)}: {len(shapes)} shapes -> {len(kernels)} kernels; "
          f"{check_generated(parse_table(a.table)[0])}")
    clang, readelf, objdump = find_tool("clang", a.clang), find_tool("llvm-readelf"), find_tool("llvm-objdump")
    workdir = a.keep or tempfile.mkdtemp(prefix="emu_enc_")
    os.makedirs(workdir, exist_ok=True)
    co_path = compile_kernels(kernels, workdir, clang, [paged_line(kernels[k["paged_of"]], n) for n, k in paged.items()])
    st, static_ok = static_checks(co_path, dict(kernels, **paged), readelf, objdump)

    print("\nstatic checks (gfx1151; occupancy = waves/SIMD from VGPRs (blocks of 24 of 1536) and LDS (128 KiB/WGP)):")
    print(f"  {'kernel':44s} {'VGPR':>4s} {'SGPR':>4s} {'LDS B':>6s} {'scratch':>7s} {'occ':>3s} {'(vgpr,lds)':>10s} "
          f"{'contract':>8s} {'wmma':>4s} {'ld128':>5s} {'st128':>5s}  result")
    for name, m in st.items():
        if "vgpr" not in m:
            print(f"  {name:44s} FAIL: {'; '.join(m['problems'])}")
            continue
        print(f"  {name:44s} {m['vgpr']:4d} {m['sgpr']:4d} {m['lds']:6d} {m['scratch']:7d} {m['occ']:3d} "
              f"{'(%d,%d)' % (m['occ_vgpr'], m['occ_lds']):>10s} {dict(kernels, **paged)[name]['waves']:8d} {m['wmma']:4d} {m['b128']:5d} "
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
    if a.paged:
        print(f"\npaged siblings: cost model as below; counts of one kv head ({a.paged_kv_group} query heads, every "
              f"workgroup of the grid), scaled to {a.model_heads} query heads")
        for pname, pk in ([] if a.no_model else paged.items()):
            m = paged_model(G, co, pk, pname, a, rng)
            ok_all &= not m["problems"] and not (m["varlen"] or {}).get("problems")
            print_paged_model(pname, pk, a, m, st[pname].get("scratch", "?"))
        if a.check:
            print("\npaged siblings: small cases (bounds checks on; spare pages, slots past the keys and table entries "
                  "past the pages poisoned)")
            for pname, pk in paged.items():
                ok_all &= paged_checks(G, co, pk, pname, rng)
        print(f"\n{'ALL PASS' if ok_all else 'FAILURES'}")
        return 0 if ok_all else 1
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
