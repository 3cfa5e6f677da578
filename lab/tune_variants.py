#!/usr/bin/env python3
"""tune_variants.py - measures the decode kernel's tilings on the GPU at hand and writes that arch's
tuning table (variants/<arch>.tsv, the format tools/gen_variants.py reads).

Two steps, so the compiler and the GPU need not be on one machine:

    lab/tune_variants.py build   --arch sm_90 --dir tune-sm_90     # candidates -> code objects
    lab/tune_variants.py measure --arch sm_90 --dir tune-sm_90     # on the GPU: time, pick, write
    (--write variants/sm_90.tsv to replace the table; by default it goes to <dir>/<arch>.tsv)
    lab/tune_variants.py table --arch sm_90 --log tune_sm_90.json [--log ...] --write variants/sm_90.tsv
    (the table from measure's logs, one per K/V format, by the keep rule against the current table:
    KEEP_GAIN / KEEP_WORST below)

Arch-neutral: `build` compiles kernels/decode/decode.hip with nvcc (sm_*) or clang (gfx*) for every
candidate (kw, dw, waves) of each (head size, rows), one code object per (head, rows) group, through
decode.hip's R35A_DECODE_VARIANT_LIST hook, and drops candidates that do not compile (the LDS
contract) or spill. `measure` loads them through the CUDA driver (sm_*) or the HIP runtime (gfx*),
launches them directly with r35a_decode_args (the decode_args.h formulas are mirrored below), and
times each on representative decode shapes: cold cache (a CUDA/HIP graph of calls over disjoint
pages and Q buffers touching >= 256 MiB per replay), median of replays. A group's winner has the
lowest geometric-mean time; f16 decides, bf16 gets the same tiling unless tuned itself (`build --dtype bf16`:
bf16 queries and outputs, whose 8-bit conversions cost more). `build --kv fp8` (or int8) makes the
candidates of an 8-bit K/V cache instead (kernels named decode_f16_fp8_...; measured on caches of that
format with per-tensor scales, the table's rows then serve that format alone: the kv column lets each
format have its own tiling). The split planner's target
(workgroups per SM, decode_args.h's R35A_DECODE_WGS_PER_CU) is swept for the winners and reported.
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from gpu_timing import time_graph  # the lab's one CUDA-graph timing loop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADS = (64, 96, 128, 192, 256, 512)
ROWS = (8, 16, 32)   # rows 8: NVIDIA only (rows_of)


def rows_of(arch):
    """The row counts a table of arch has: rows 8 is NVIDIA's 8-row layer (kernels/decode/rows8_nv.h)."""
    return ROWS if arch.startswith("sm_") else tuple(r for r in ROWS if r != 8)


# ------------------------------------------------------------------------------------------ candidates
# K/V element formats (gen_variants.py DECODE_KV): the macro's kv token and the name's part
KV_FORMATS = {"16": ("kv16", ""), "fp8": ("fp8", "_fp8"), "int8": ("int8", "_int8")}


def candidates(arch, head, rows, kv="16", dtype="f16", waves=None):
    """Every (kw, dw, rw, waves) tiling of one (head, rows) group; waves: the occupancy contracts to try
    (default sm_*: 1-4, i.e. 255-128 registers; gfx11: 6, 7, 8, 10)."""
    waves = waves or ((1, 2, 3, 4) if arch.startswith("sm_") else (6, 7, 8, 10))
    out = []
    # row waves (rw > 1): the rows split over waves that share one shared-memory pipeline
    # (NVIDIA; on gfx11 each would stream the tile itself, so only rw 1 is a candidate there)
    rws = (1, rows // 16) if arch.startswith("sm_") and rows > 16 else (1,)
    for dw in (1, 2, 4, 8, 16):
        if head % (16 * dw):
            continue
        for kw in (1, 2, 4, 8):
            for rw in rws:
                if kw * dw * rw > 16 or (rw > 1 and kw * dw > 8):
                    continue
                for w in waves:
                    suffix = "" if arch == "gfx1151" else "_" + arch.replace("_", "")
                    rpart = f"_rw{rw}" if rw > 1 else ""
                    name = f"decode_{dtype}{KV_FORMATS[kv][1]}_d{head}_r{rows}_kw{kw}_dw{dw}{rpart}_w{w}{suffix}"
                    out.append(dict(name=name, head=head, rows=rows, kw=kw, dw=dw, rw=rw, waves=w, kv=kv, dtype=dtype))
    return out


def nv_smem_bytes(waves, nw):
    """decode_args.h r35a_nv_smem_bytes: the dynamic shared memory a NVIDIA decode kernel is launched with."""
    blocks = (4 * waves + nw - 1) // nw
    return min(233472 // max(blocks, 1) - 1024, 232448)


def nv_stage_bytes(ds, kv="16"):
    """fragment_nv_mma.h kv_pipe_lds::LDS_PER_STAGE: a K and a V tile of 16 rows, each row padded (16-bit: by
    16 bytes; 8-bit: to an odd number of 16-byte bank groups)."""
    rb = ds * (1 if kv != "16" else 2)
    row = rb + 16 if (rb // 16) % 2 == 0 else rb + 32
    return 2 * 16 * row


def decode_cfg(arch, head, rows, kw, dw, waves, reg_stages=2, lds_stages_max=None, rw=1, kv="16"):
    """kernels/decode/decode.hip's decode_cfg: LDS budget, KV pipeline (shared-memory stages or registers), LDS bytes.
    lds_stages_max: R35A_DECODE_LDS_STAGES_MAX (16-bit, 4) or _MAX_8BIT (8)."""
    if lds_stages_max is None:
        lds_stages_max = 4 if kv == "16" else 8
    # row tiles: 16 rows (8 on NVIDIA's rows-8 layer, decode/rows8_nv.h: 128 accumulator floats a tile)
    tr = 8 if arch.startswith("sm_") and rows == 8 else 16
    acc_floats = 128 if tr == 8 else 256
    T, ds, nw = -(-rows // tr), head // dw, kw * dw * rw
    rt = T * tr                                    # the row tiles' rows
    tw = T // rw                                   # row tiles per wave
    pipes = nw // rw if arch.startswith("sm_") else nw   # the row waves share a shared-memory pipeline
    nc = ds // 16
    pool = (4 * waves + nw - 1) // nw
    if arch.startswith("sm_"):
        budget = nv_smem_bytes(waves, nw)   # dynamic shared memory (decode_args.h)
    else:
        budget = min(131072 // pool, 65536)
    px = tw * acc_floats * 4 if dw > 1 else 0   # one wave's partial S^T
    sr = kw * T * acc_floats * 4 if dw > 1 else 0
    per_stage = nv_stage_bytes(ds, kv)
    q_bytes = dw * rt * (ds + 8) * 2   # Q^T in shared memory (R = 32) where the stages still fit
    if not (arch.startswith("sm_") and tw >= 2 and (budget - 16 - nw * px - sr - q_bytes) // pipes // per_stage >= 2):
        q_bytes = 0
    free = budget - 16 - nw * px - sr - q_bytes
    if arch.startswith("sm_"):
        fit = (free // pipes) // per_stage
        vt = 16 * (ds + 8) * 2
    else:
        per_stage, fit, vt = 0, 0, ds * 16 * 2
    use_lds = fit >= 2
    stages = min(fit, lds_stages_max) if use_lds else reg_stages
    if use_lds and pipes < nw:   # shared pipelines: the partial S^T of every wave after their regions
        region, exch = stages * per_stage, nw * px
    else:
        region, exch = (stages * per_stage + px if use_lds else max(vt, px)), 0
    loop = (pipes if use_lds else nw) * region + exch + sr + (q_bytes if use_lds else 0) + rt * 4   # + ALiBi slopes
    merge = (kw // 2) * (dw * T * nc * acc_floats + 2 * rt) * 4 if kw > 1 else 0
    split_merge = 65 * rows * 4   # the split merge's weights ((R35A_DECODE_MAX_SPLITS + 1) x R floats)
    sm = arch.startswith("sm_")
    layer = ("mma8" if tr == 8 else "mma16") if sm else ("dot4" if rows == 4 else "wmma16")
    pipe = ("lds_shared" if pipes < nw else "lds") if use_lds else "regs"
    # Q^T placement: this model knows the NVIDIA choice (in shared memory with two row tiles where the
    # stages still fit); gfx11 candidates take `regs` and the build's static_asserts drop what does not fit
    q = "lds" if q_bytes else "regs"
    return dict(pipe=pipe, stages=stages, layer=layer, q=q, lds=max(loop, merge, split_merge) + 16, budget=budget)


def lds_ok(arch, c):
    k = decode_cfg(arch, c["head"], c["rows"], c["kw"], c["dw"], c["waves"], rw=c.get("rw", 1), kv=c.get("kv", "16"))
    c.update(pipe=k["pipe"], stages=k["stages"], layer=k["layer"], q=k["q"], lds=k["lds"])
    if arch.startswith("sm_") and k["pipe"] == "lds_shared":
        # fragment_nv_mma.h kv_pipe_lds: a tile's 16-byte copies split evenly over the sharing row waves
        cpr = c["head"] // c["dw"] * (1 if c.get("kv", "16") != "16" else 2) // 16   # chunks per row
        cp_tile = -(-16 // (32 // cpr)) if cpr <= 32 else 16 * (cpr // 32)
        if cp_tile % c["rw"]:
            return False
    return k["lds"] <= k["budget"]


def worth_building(arch, c):
    """On NVIDIA the shared-memory pipeline is the fast path: register-pipeline tilings are only
    candidates where no shared-memory one fits (D = 512)."""
    if not arch.startswith("sm_"):
        return True
    if c["head"] >= 512:   # registers: one key group, the widest register budgets
        return c["kw"] == 1 and c["waves"] <= 2
    return c["pipe"] == "lds"


def compile_group(arch, d, head, rows, src_dir=None, rws=None, kv="16", dtype="f16", waves=None):
    token = KV_FORMATS[kv][0]
    cands = [c for c in candidates(arch, head, rows, kv, dtype, waves) if lds_ok(arch, c) and worth_building(arch, c)
             and (not rws or c["rw"] in rws)]
    d = os.path.abspath(d)
    lst = os.path.join(d, f"d{head}_r{rows}.def")
    obj = os.path.join(d, f"d{head}_r{rows}.co")
    kdir = os.path.abspath(src_dir or os.path.join(ROOT, "kernels"))
    src = os.path.join(kdir, "decode", "decode.hip")
    inc = ["-I", kdir, "-I", os.path.join(ROOT, "variants")]
    if arch.startswith("sm_"):
        cmd = ["nvcc", "-x", "cu", "-cubin", "-O3", "-std=c++17", f"-arch={arch}", "-Xptxas", "-v",
               f'-DR35A_DECODE_VARIANT_LIST="{lst}"'] + inc + ["-o", obj, src]
    else:
        cmd = ["clang-19", "-x", "hip", f"--offload-arch={arch}", "-nogpuinc", "-nogpulib", "--cuda-device-only",
               "--no-gpu-bundle-output", "-O3", "-std=c++17", "-Rpass-analysis=kernel-resource-usage",
               f'-DR35A_DECODE_VARIANT_LIST="{lst}"'] + inc + ["-o", obj, src]
    def write_list(cs):
        with open(lst, "w") as f:
            for c in cs:
                k = decode_cfg(arch, head, rows, c["kw"], c["dw"], c["waves"], rw=c.get("rw", 1), kv=kv)
                f.write(f"R35A_DECODE_VARIANT({arch}, {c['name']}, {dtype}, {token}, {head}, {rows}, {c['kw']}, "
                        f"{c['dw']}, {c.get('rw', 1)}, {c['waves']}, {k['layer']}, {k['pipe']}, {k['stages']}, {k['q']})\n")
    write_list(cands)
    r = subprocess.run(cmd, capture_output=True, text=True)
    for _ in range(8):   # candidates that break a contract (static_assert): drop the ones named, retry
        if r.returncode == 0:
            break
        bad = set(re.findall(r"decode_b?f16(?:_fp8|_int8)?_d\d+_r\d+_kw\d+_dw\d+(?:_rw\d+)?_w\d+\w*", r.stderr))
        # (nvcc names the failing instantiation by its template arguments: "KW=1, DW=4, RW=2, WAVES=1")
        for m in re.finditer(r"KW ?= ?(\d+), DW ?= ?(\d+), RW ?= ?(\d+), WAVES ?= ?(\d+)", r.stderr):
            kw, dw, rw, w = (int(x) for x in m.groups())
            bad |= {c["name"] for c in cands if (c["kw"], c["dw"], c.get("rw", 1), c["waves"]) == (kw, dw, rw, w)}
        if bad & {c["name"] for c in cands}:
            cands = [c for c in cands if c["name"] not in bad]
        else:   # unknown failure: compile one by one to find the culprits
            good = []
            for c in cands:
                write_list([c])
                if subprocess.run(cmd, capture_output=True).returncode == 0:
                    good.append(c)
            cands = good
        write_list(cands)
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-2000:])
        return []
    # resource usage: drop spilling candidates
    text = r.stderr
    spills = {}
    if arch.startswith("sm_"):
        for m in re.finditer(r"Compiling entry function '(\w+)'.*?(\d+) bytes stack frame, (\d+) bytes spill stores, "
                             r"(\d+) bytes spill loads.*?Used (\d+) registers", text, re.S):
            spills[m.group(1)] = (int(m.group(2)) + int(m.group(3)) + int(m.group(4)), int(m.group(5)))
    kept = []
    for c in cands:
        s, regs = spills.get(c["name"], (0, 0))
        c["regs"] = regs
        if s == 0:
            kept.append(c)
    return kept


def cmd_build(args):
    os.makedirs(args.dir, exist_ok=True)
    groups = [(h, r) for h in HEADS for r in rows_of(args.arch) if not args.groups or f"d{h}_r{r}" in args.groups.split(",")]
    with ThreadPoolExecutor(max_workers=args.jobs) as ex:
        rws = [int(x) for x in args.rw.split(",")] if args.rw else None
        waves = tuple(int(x) for x in args.waves.split(",")) if args.waves else None
        res = list(ex.map(lambda g: compile_group(args.arch, args.dir, g[0], g[1], args.src, rws, args.kv,
                                                         args.dtype, waves), groups))
    manifest = {f"d{h}_r{r}": c for (h, r), c in zip(groups, res)}
    path = os.path.join(args.dir, "manifest.json")
    if os.path.exists(path):   # a rebuild of some groups keeps the others' entries
        old = json.load(open(path))
        if old.get("arch") == args.arch and old.get("kv", "16") == args.kv and old.get("dtype", "f16") == args.dtype:
            manifest = dict(old["groups"], **manifest)
    with open(path, "w") as f:
        json.dump(dict(arch=args.arch, kv=args.kv, dtype=args.dtype, groups=manifest), f, indent=1)
    print(f"{sum(len(c) for c in res)} candidates in {len(groups)} code objects under {args.dir}")


# ------------------------------------------------------------------------------------------ decode_args.h mirror
class DecodeArgs(ctypes.Structure):   # r35a_decode_args (kernels/decode/decode_args.h)
    _fields_ = ([(n, ctypes.c_uint64) for n in ("q", "k_cache", "v_cache", "out", "seq_lens", "query_start_loc",
                                               "block_table", "workspace", "sinks", "alibi_slopes", "k_scale",
                                               "v_scale", "error")]
                + [(n, ctypes.c_int64) for n in ("q_token_stride", "q_head_stride", "o_token_stride", "o_head_stride",
                                                "k_page_stride", "k_head_stride", "k_slot_stride", "v_page_stride",
                                                "v_head_stride", "v_slot_stride", "block_table_stride")]
                + [(n, ctypes.c_int32) for n in ("num_seqs", "num_kv_heads", "group_size", "page_size", "window",
                                                "max_query_len", "num_row_groups", "num_splits", "num_tokens",
                                                "num_pages", "max_seq_len", "query_len_bound")]
                + [("scale_log2", ctypes.c_float), ("logit_softcap", ctypes.c_float), ("kv_scale_per_head", ctypes.c_int32),
                   ("rows_per_group", ctypes.c_int32), ("head_size", ctypes.c_int32), ("min_split_tiles", ctypes.c_int32),
                   ("reserved", ctypes.c_int32),
                   ("lse", ctypes.c_uint64), ("lse_token_stride", ctypes.c_int64), ("lse_head_stride", ctypes.c_int64)])


MIN_TILES_PER_SPLIT, MAX_SPLITS, WGS_PER_CU = 4, 64, 2   # decode_args.h
SIMDS_PER_CU = {"sm": 4, "gfx": 2}   # variants/archs.tsv simds_per_cu


def resident_per_cu(arch, waves, nw):
    return max(1, SIMDS_PER_CU[arch[:2] if arch.startswith("sm") else "gfx"] * waves // nw)


NV_SINGLE_SPLIT_KEYS = 1024   # src/plan_decode.c R35A_DECODE_NV_SINGLE_SPLIT_KEYS


def num_splits(seqs, hkv, groups, max_seq, max_q, cus, resident, wgs_per_cu=WGS_PER_CU, arch="sm_90"):
    """decode_args.h r35a_decode_num_splits (no window), with src/plan_decode.c's NVIDIA single-split rule."""
    wgs = seqs * hkv * groups
    if arch.startswith("sm_") and 2 * wgs >= cus and max_seq <= NV_SINGLE_SPLIT_KEYS:
        return 1
    target, cap = cus * wgs_per_cu, cus * max(resident, wgs_per_cu)
    want = -(-target // wgs)
    if want * wgs > cap:
        want = cap // wgs
    by_len = ((max_seq + 15) // 16 + 1) // MIN_TILES_PER_SPLIT
    return max(1, min(want, by_len, MAX_SPLITS))


MERGE_THREADS, MERGE_FEW_SPLITS = 128, 8   # decode_args.h R35A_DECODE_MERGE_THREADS, _FEW_SPLITS


def merge_grid(seqs, hkv, groups, rows, G, M, D, splits):
    """decode_args.h r35a_decode_merge_grid: the split merge launched after a decode kernel with splits."""
    lanes = 4 if splits > MERGE_FEW_SPLITS else 1
    return (-(-min(rows, G * M) * (D // 4) * lanes // MERGE_THREADS), hkv * groups, seqs)


# ------------------------------------------------------------------------------------------ runtime
class Runtime:
    """Module loading and launches through the CUDA driver or the HIP runtime."""

    def __init__(self, arch):
        self.cuda = arch.startswith("sm_")
        self.lib = ctypes.CDLL("libcuda.so.1" if self.cuda else "libamdhip64.so")
        p = "cu" if self.cuda else "hip"
        self.load = getattr(self.lib, f"{p}ModuleLoadData")
        self.get = getattr(self.lib, f"{p}ModuleGetFunction")
        self.launch_fn = getattr(self.lib, f"{p}LaunchKernel" if self.cuda else "hipModuleLaunchKernel")
        self.mods = {}

    def module(self, path):
        if path not in self.mods:
            m = ctypes.c_void_p()
            data = open(path, "rb").read()
            if self.load(ctypes.byref(m), ctypes.c_char_p(data)) != 0:
                raise RuntimeError(f"module load {path}")
            self.mods[path] = (m, data)
        return self.mods[path][0]

    def function(self, path, name, dynamic_shared=True):
        """(function, dynamic shared memory): NVIDIA decode kernels are launched with exactly the bytes their
        layout uses (kernels/decode/decode.hip's <name>_lds_bytes device global), their limit raised to it, as the
        library's loader (src/gpu_runtime.c) does; 0 elsewhere (static LDS, the split merge)."""
        f = ctypes.c_void_p()
        if self.get(ctypes.byref(f), self.module(path), name.encode()) != 0:
            raise RuntimeError(f"no {name} in {path}")
        shared = 0
        if self.cuda and dynamic_shared:
            dptr, size, value = ctypes.c_uint64(), ctypes.c_size_t(), ctypes.c_int()
            if (self.lib.cuModuleGetGlobal_v2(ctypes.byref(dptr), ctypes.byref(size), self.module(path),
                                              f"{name}_lds_bytes".encode()) != 0 or size.value != 4 or
                    self.lib.cuMemcpyDtoH_v2(ctypes.byref(value), dptr, ctypes.c_size_t(4)) != 0):
                raise RuntimeError(f"no {name}_lds_bytes in {path}")
            shared = value.value
            if self.lib.cuFuncSetAttribute(f, 8, ctypes.c_int(shared)) != 0:
                raise RuntimeError(f"cuFuncSetAttribute({name}, {shared} B of dynamic shared memory)")
        return f, shared

    def launch(self, f, grid, block, arg, stream, shared=0):
        params = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
        r = self.launch_fn(f, grid[0], grid[1], grid[2], block, 1, 1, shared, ctypes.c_void_p(stream), params, None)
        if r != 0:
            raise RuntimeError(f"launch failed: {r}")




class Shape:
    """One decode problem, its buffers allocated once and shared by every candidate of a head size."""

    def __init__(self, torch, D, G, M, ctx, B, hkv=8, page=16, kv="16", dtype="f16"):
        self.D, self.G, self.M, self.ctx, self.B, self.hkv, self.page, self.kv = D, G, M, ctx, B, hkv, page, kv
        tdt = torch.bfloat16 if dtype == "bf16" else torch.float16
        one = B * ctx * hkv * D * (4 if kv == "16" else 2)
        self.copies = max(1, min(32, -(-(256 << 20) // one)))
        pps = ctx // page
        npages = self.copies * B * pps
        from kv_cache_data import random_kv
        self.k, self.v = random_kv(torch, (npages, hkv, page, D), kv, tdt)
        self.k_scale = self.v_scale = None
        if kv != "16":   # 8-bit caches, per-tensor scales (value = stored x scale; bench_gpu.py's)
            scale = 0.01 if kv == "fp8" else 0.02
            self.k_scale = torch.full((1,), scale, dtype=torch.float32, device="cuda")
            self.v_scale = torch.full((1,), scale, dtype=torch.float32, device="cuda")
        self.bt = torch.randperm(npages, device="cuda").to(torch.int32).view(self.copies, B, pps).contiguous()
        self.q = torch.randn(self.copies, B * M, hkv * G, D, dtype=tdt, device="cuda")
        self.o = torch.empty_like(self.q)
        self.sl = torch.full((B,), ctx, dtype=torch.int32, device="cuda")
        self.qsl = torch.arange(0, B * M + 1, M, dtype=torch.int32, device="cuda")
        self.error = torch.zeros(2, dtype=torch.int32, device="cuda")   # device error record (valid data: untouched)
        self.npages = npages
        self.bytes = one

    def dequant(self, torch, x, scale):
        if self.kv == "16":
            return x.float()
        if self.kv == "fp8":
            x = x.view(torch.float8_e4m3fn)
        return x.float() * float(scale[0])

    def check(self, torch):
        """Largest |difference| of copy 0's output from torch's SDPA in float32 on the dequantized cache,
        query token i of M seeing the first ctx - M + 1 + i keys (decode's causal rule)."""
        if not hasattr(self, "ref"):
            idx = self.bt[0].long()
            k = self.dequant(torch, self.k[idx], self.k_scale).permute(0, 2, 1, 3, 4).reshape(self.B, self.hkv, self.ctx, self.D)
            v = self.dequant(torch, self.v[idx], self.v_scale).permute(0, 2, 1, 3, 4).reshape(self.B, self.hkv, self.ctx, self.D)
            k = k.repeat_interleave(self.G, dim=1)
            v = v.repeat_interleave(self.G, dim=1)
            q = self.q[0].view(self.B, self.M, self.hkv * self.G, self.D).transpose(1, 2).float()
            keys = torch.arange(self.ctx, device="cuda")
            mask = keys[None, :] <= (self.ctx - self.M + torch.arange(self.M, device="cuda"))[:, None]
            self.ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            self.ref = self.ref.transpose(1, 2).reshape(self.B * self.M, -1, self.D).float()
        torch.cuda.synchronize()
        return float((self.o[0].float() - self.ref).abs().max())

    def args(self, c, rows, splits, ws):
        D, hq, hkv, page = self.D, self.hkv * self.G, self.hkv, self.page
        a = DecodeArgs(self.q[c].data_ptr(), self.k.data_ptr(), self.v.data_ptr(), self.o[c].data_ptr(),
                       self.sl.data_ptr(), self.qsl.data_ptr(), self.bt[c].data_ptr(), ws.data_ptr() if splits > 1 else 0,
                       0, 0,   # no sinks or ALiBi
                       self.k_scale.data_ptr() if self.k_scale is not None else 0,
                       self.v_scale.data_ptr() if self.v_scale is not None else 0,
                       self.error.data_ptr(),
                       hq * D, D, hq * D, D, hkv * page * D, page * D, D, hkv * page * D, page * D, D,
                       self.ctx // page, self.B, hkv, self.G, page, 0, self.M,
                       -(-self.G * self.M // rows), splits,
                       self.B * self.M, self.npages, self.ctx, self.M,   # the bounds of the device checks
                       (1.0 / math.sqrt(D)) * 1.4426950408889634, 0.0, 0,
                       rows, D, MIN_TILES_PER_SPLIT, 0)
        return a


def unique_kernels(cands):
    """Candidates that differ only in `waves` but compile to the same kernel (same key groups, d slices,
    pipeline and depth, registers) run the same on NVIDIA, where each is launched with exactly the shared
    memory it uses: one is measured, the one with the most waves (its contract then gives the planner the
    most resident workgroups)."""
    best = {}
    for c in cands:
        k = (c["kw"], c["dw"], c.get("rw", 1), c.get("pipe"), c.get("stages"), c.get("regs"))
        if k not in best or c["waves"] > best[k]["waves"]:
            best[k] = c
    return [c for c in cands
            if best[(c["kw"], c["dw"], c.get("rw", 1), c.get("pipe"), c.get("stages"), c.get("regs"))] is c]


def measure_candidate(torch, rt, path, cand, shapes, cus, wgs_per_cu=WGS_PER_CU, arch="sm_90"):
    f, shared = rt.function(path, cand["name"])
    merge, _ = rt.function(path, "decode_merge_" + cand["name"].split("_")[1], dynamic_shared=False)   # decode_<dtype>_...
    times = []
    res = resident_per_cu(arch, cand["waves"], cand["kw"] * cand["dw"] * cand.get("rw", 1))
    for sh in shapes:
        groups = -(-sh.G * sh.M // cand["rows"])
        splits = num_splits(sh.B, sh.hkv, groups, sh.ctx, sh.M, cus, res, wgs_per_cu, arch)
        grid = (splits, sh.hkv * groups, sh.B)
        block = 32 * cand["kw"] * cand["dw"] * cand.get("rw", 1)
        ws_bytes = sh.B * sh.hkv * groups * splits * (2 * cand["rows"] + cand["rows"] * sh.D) * 4
        ws = torch.zeros(ws_bytes // 4 + 64, dtype=torch.int32, device="cuda")
        args = [sh.args(c, cand["rows"], splits, ws) for c in range(sh.copies)]
        mgrid = merge_grid(sh.B, sh.hkv, groups, cand["rows"], sh.G, sh.M, sh.D, splits)

        def call(c):
            stream = torch.cuda.current_stream().cuda_stream
            rt.launch(f, grid, block, args[c], stream, shared)
            if splits > 1:
                rt.launch(merge, mgrid, MERGE_THREADS, args[c], stream, 0)
        times.append(time_graph(call, sh.copies, reps=10, warm=1))
        if "maxdiff" not in cand:   # the candidate's output of copy 0 against torch (its first shape)
            cand["maxdiff"] = sh.check(torch)
        del ws
    return times


def cmd_measure(args):
    import torch
    man = json.load(open(os.path.join(args.dir, "manifest.json")))
    arch, kv, dtype = man["arch"], man.get("kv", "16"), man.get("dtype", "f16")
    rt = Runtime(arch)
    torch.cuda.init()
    dev = torch.cuda.get_device_properties(0)
    sms = dev.multi_processor_count
    cus = sms   # the planner's CU on NVIDIA is the SM (decode_args.h)
    log = dict(device=dev.name, arch=arch, kv=kv, dtype=dtype, wgs_per_cu=WGS_PER_CU, groups={})
    winners = {}
    for head in HEADS:
        shapes_by_rows = {
            8: [(4, 1, 8192, 1), (4, 1, 8192, 16), (8, 1, 32768, 1), (4, 1, 1024, 16), (8, 1, 8192, 16)],
            16: [(4, 1, 8192, 1), (4, 1, 8192, 16), (8, 2, 32768, 1), (4, 1, 1024, 16), (4, 1, 32768, 16)],
            32: [(8, 4, 8192, 1), (8, 4, 8192, 16), (8, 4, 1024, 16)],
        }
        allocated = {}
        for rows in ROWS:
            key = f"d{head}_r{rows}"
            if args.groups and key not in args.groups.split(","):
                continue
            cands = unique_kernels(man["groups"].get(key, []))
            if not cands:
                continue
            shapes = []
            for (G, M, ctx, B) in shapes_by_rows[rows]:
                k = (G, M, ctx, B)
                if k not in allocated:
                    allocated[k] = Shape(torch, head, G, M, ctx, B, kv=kv, dtype=dtype)
                shapes.append(allocated[k])
            path = os.path.join(args.dir, f"{key}.co")
            results = []
            for cand in cands:
                try:
                    ts = measure_candidate(torch, rt, path, cand, shapes, cus, arch=arch)
                except Exception as e:  # noqa: BLE001
                    print(f"  {cand['name']}: {e}", flush=True)
                    continue
                gm = math.exp(sum(math.log(t) for t in ts) / len(ts))
                gbs = [sh.bytes / t / 1e9 for sh, t in zip(shapes, ts)]
                results.append(dict(cand, t_us=[t * 1e6 for t in ts], gbs=gbs, geomean_us=gm * 1e6))
            results.sort(key=lambda r: r["geomean_us"])
            log["groups"][key] = results
            if results:
                w = results[0]
                winners[key] = w
                bad = [r["name"] for r in results if not r.get("maxdiff", 0) < 2e-2]
                if bad:
                    print(f"  WRONG RESULTS (dropped): {bad}", flush=True)
                    results = [r for r in results if r["name"] not in bad]
                    log["groups"][key] = results
                    if not results:
                        del winners[key]
                        continue
                    w = results[0]
                    winners[key] = w
                print(f"{key}: {len(results)} measured; best {w['name']} ({w.get('regs', '?')} regs, "
                      f"{w.get('pipe', '?')} x{w.get('stages', '?')}) "
                      f"{w['geomean_us']:.1f} us geomean, GB/s " + " ".join(f"{g:.0f}" for g in w["gbs"]) +
                      f"; runner-up {results[1]['name'] if len(results) > 1 else '-'}", flush=True)
        # rows 32 (G x M of 17-32 rows) as two row groups of the rows-16 winner: each group reads the
        # KV once more, but the two run side by side on the same pages (adjacent in the grid), so the
        # second read mostly hits L2. The table keeps a rows-32 kernel only where it beats that.
        w16, w32 = winners.get(f"d{head}_r16"), winners.get(f"d{head}_r32")
        if w16 and w32:
            shapes = [allocated[k] for k in shapes_by_rows[32] if k in allocated]
            try:
                ts = measure_candidate(torch, rt, os.path.join(args.dir, f"d{head}_r16.co"), w16, shapes, cus,
                                       arch=arch)
                gm = math.exp(sum(math.log(t) for t in ts) / len(ts)) * 1e6
                w32["r16_twice_us"] = [t * 1e6 for t in ts]
                w32["r16_twice_geomean_us"] = gm
                w32["beaten_by_r16"] = gm < w32["geomean_us"]
                print(f"d{head} rows 32 shapes: {w32['name']} {w32['geomean_us']:.1f} us geomean, {w16['name']} "
                      f"in two row groups {gm:.1f} us ({' '.join(f'{t * 1e6:.1f}' for t in ts)})", flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"  d{head} rows 32 as two rows-16 groups: {e}", flush=True)
        del allocated
        torch.cuda.empty_cache()
    # the split planner's aim (workgroups per SM), for the winners
    bps_scores = {}
    for bps in args.sweep_blocks_per_sm:
        tot = []
        for key, w in winners.items():
            head, rows = w["head"], w["rows"]
            G, M, ctx, B = (4, 1, 8192, 16) if rows == 16 else (8, 4, 8192, 16)
            sh = Shape(torch, head, G, M, ctx, B, kv=kv, dtype=dtype)
            tot += measure_candidate(torch, rt, os.path.join(args.dir, f"{key}.co"), w, [sh], cus, bps, arch)
            sh1 = Shape(torch, head, G, M, 4096, 1, kv=kv, dtype=dtype)
            tot += measure_candidate(torch, rt, os.path.join(args.dir, f"{key}.co"), w, [sh1], cus, bps, arch)
            del sh, sh1
            torch.cuda.empty_cache()
        bps_scores[bps] = math.exp(sum(math.log(t) for t in tot) / len(tot)) * 1e6
        print(f"planner aim {bps} workgroups per SM: geomean {bps_scores[bps]:.1f} us", flush=True)
    log["wgs_per_cu_geomean_us"] = bps_scores
    os.makedirs(args.out or args.dir, exist_ok=True)   # (a fresh --out: the table and the log go there)
    write_table(args, arch, dev.name, winners, bps_scores, kv, dtype)
    with open(os.path.join(args.out or args.dir, f"tune_{arch}{args.tag}.json"), "w") as f:
        json.dump(log, f, indent=1)


def write_table(args, arch, device, winners, bps, kv="16", dtype="f16"):
    path = args.write or os.path.join(args.out or args.dir, f"{arch}.tsv")
    old = os.path.join(ROOT, "variants", f"{arch}.tsv")
    keep = []
    if os.path.exists(old):   # keep the non-decode rows (generic kernels) of the current table
        keep = [l.rstrip("\n") for l in open(old) if l.strip() and not l.startswith("#") and not l.startswith("decode")]
    best_bps = min(bps, key=bps.get) if bps else None
    lines = [f"# {arch} tuning table, written by lab/tune_variants.py on {device} "
             f"({datetime.date.today().isoformat()}): one row per served kernel configuration, in gfx1151.tsv's",
             "# format (see there for the columns); the kernel names carry the suffix _" + arch.replace("_", "") + ".",
             "# Decode rows: the fastest (geomean over the tuning shapes, cold cache) of every kw x dw x waves",
             "# that compiles without spills, per head size and rows; bf16 takes f16's tiling.",
             "# waves: minimum warps per SM sub-partition the registers must allow (2 = 255, 3 = 168, 4 = 128).",
             f"# Split planner aim measured best at {best_bps} workgroups per SM (decode_args.h R35A_DECODE_WGS_PER_CU).",
             ("# kv: the K/V formats a row serves (one kernel each); the 8-bit ones keep the 16-bit tiling here."
              if kv == "16" else f"# kv: {kv} caches only (tuned with --kv {kv}); merge these rows into the table "
              "beside the 16-bit ones."),
             "#", "# kind\tdtype\thead\trows\tkw\tdw\trw\twaves\tkv\tlayer\tpipe\tq"]
    for dt in (("f16", "bf16") if dtype == "f16" else (dtype,)):   # bf16 takes f16's tiling unless tuned itself
        for head in HEADS:
            for rows in ROWS:
                w = winners.get(f"d{head}_r{rows}")
                if w and w.get("beaten_by_r16"):
                    lines.append(f"# d{head} rows 32: none (two rows-16 row groups measured faster, "
                                 f"{w['r16_twice_geomean_us']:.1f} us against {w['geomean_us']:.1f})")
                elif w:
                    kvs = ["16", "fp8", "int8"] if kv == "16" else [kv]
                    for k_ in kvs:   # a row per format: their pipelines may differ
                        k = decode_cfg(arch, head, rows, w["kw"], w["dw"], w["waves"], rw=w.get("rw", 1), kv=k_)
                        pipe = k["pipe"] + str(k["stages"])
                        lines.append(f"decode\t{dt}\t{head}\t{rows}\t{w['kw']}\t{w['dw']}\t{w.get('rw', 1)}\t"
                                     f"{w['waves']}\t{k_}\t{k['layer']}\t{pipe}\t{k['q']}")
    lines += keep
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {path}")


# ------------------------------------------------------------------------------------------ table from logs
# A measured tiling replaces the table's current one only when it is at least KEEP_GAIN faster in the
# geomean of the tuning shapes and no tuning shape runs more than KEEP_WORST slower than with the current
# one: run-to-run noise does not churn the table, and a geomean does not buy one regime with another.
KEEP_GAIN, KEEP_WORST = 1.03, 1.10


def current_tilings(arch):
    """{(dtype, head, rows, kv): (kw, dw, rw, waves)} of the decode rows of variants/<arch>.tsv."""
    cur = {}
    for line in open(os.path.join(ROOT, "variants", f"{arch}.tsv")):
        c = line.rstrip("\n").split("\t")
        if line.startswith("decode\t"):
            for kv in c[8].split(","):
                cur[(c[1], int(c[2]), int(c[3]), kv)] = tuple(int(x) for x in c[4:8])
    return cur


def choose(results, current):
    """A group's table entry from its measured results: (kw, dw, rw, waves), "r16_twice" (rows 32 as two
    row groups of the rows-16 kernel: no rows-32 row) and the option it was weighed against, by the
    KEEP rule against `current` (a tiling, "r16_twice" or None for a group the table lacks)."""
    opts = [dict(tiling=(r["kw"], r["dw"], r.get("rw", 1), r["waves"]), t=r["t_us"], gm=r["geomean_us"])
            for r in results]
    if results and "r16_twice_us" in results[0]:
        opts.append(dict(tiling="r16_twice", t=results[0]["r16_twice_us"], gm=results[0]["r16_twice_geomean_us"]))
    if not opts:
        return current, None
    cur = next((o for o in opts if o["tiling"] == current), None)
    if cur is None and isinstance(current, tuple):
        # measure times one of the candidates that compile to the same kernel, the one with the most waves
        # (unique_kernels): the current tiling's is the same kw, dw, rw with the fewest waves >= its own
        same = sorted((o for o in opts if o["tiling"] != "r16_twice" and o["tiling"][:3] == current[:3]
                       and o["tiling"][3] >= current[3]), key=lambda o: o["tiling"][3])
        cur = dict(same[0], tiling=current) if same else None
    if cur is None:   # the current tiling was not measured (or there is none): the fastest
        return min(opts, key=lambda o: o["gm"])["tiling"], None
    allowed = [o for o in opts if all(t <= KEEP_WORST * c for t, c in zip(o["t"], cur["t"]))]
    best = min(allowed, key=lambda o: o["gm"])   # (the current tiling's own kernel: equal, so kept)
    return (best["tiling"] if best["gm"] * KEEP_GAIN <= cur["gm"] else current), (best, cur)


def cmd_table(args):
    """Writes the table from tuning logs (one per K/V format and Q/O dtype; formats without a log keep their
    rows). An f16 log decides the bf16 rows too (bf16 takes f16's tiling) unless a bf16 log covers them."""
    cur = current_tilings(args.arch)
    chosen = dict(cur)
    notes = []
    logs = [json.load(open(path)) for path in args.log]
    for path, log in sorted(zip(args.log, logs), key=lambda pl: pl[1].get("dtype", "f16") != "f16"):
        kv, dtype = log.get("kv", "16"), log.get("dtype", "f16")
        for key, results in log["groups"].items():
            head, rows = (int(x) for x in key[1:].split("_r"))
            current = cur.get((dtype, head, rows, kv), "r16_twice" if rows > 16 else None)
            pick, why = choose(results, current)
            for dt in (("f16", "bf16") if dtype == "f16" else (dtype,)):
                chosen[(dt, head, rows, kv)] = pick
            if pick != current and why:
                best, was = why
                fmt = lambda t: "two rows-16 row groups" if t == "r16_twice" else "kw{} dw{} rw{} w{}".format(*t)  # noqa: E731
                who = f"{kv}" if dtype == "f16" else f"{dtype} {kv}"
                notes.append(f"# {who} d{head} rows {rows}: {fmt(pick)}, {best['gm']:.1f} us geomean against "
                             f"{was['gm']:.1f} for {fmt(current)} ({os.path.basename(path)})")
    text = open(os.path.join(ROOT, "variants", f"{args.arch}.tsv")).read().splitlines()
    header = [l for l in text if l.startswith("#") and not l.startswith("# kind")]
    column = next(l for l in text if l.startswith("# kind"))
    other = [l for l in text if l.strip() and not l.startswith("#") and not l.startswith("decode")]
    lines = header + notes + ["#", column] if notes else header + [column]
    for dt in ("f16", "bf16"):
        for head in HEADS:
            for rows in ROWS:
                by_tiling = {}
                for kv in ("16", "fp8", "int8"):
                    t = chosen.get((dt, head, rows, kv))
                    if t and t != "r16_twice":
                        by_tiling.setdefault(t, []).append(kv)
                for t, kvs in by_tiling.items():
                    lines.append("decode\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}".format(dt, head, rows, *t, ",".join(kvs)))
    lines += other
    with open(args.write, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.write}" + "".join("\n" + n for n in notes))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--arch", required=True)
    b.add_argument("--dir", required=True)
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    b.add_argument("--src", default=None, help="kernels directory to compile (default: kernels/; an experiment's copy)")
    b.add_argument("--groups", default="", help="only these groups, e.g. d128_r16,d64_r16")
    b.add_argument("--rw", default="", help="only candidates with these row-wave counts, e.g. 2")
    b.add_argument("--waves", default="", help="the occupancy contracts to try instead of the default (sm_*: 1,2,3,4; "
                   "e.g. 3,4,5,6: 5 = 102 and 6 = 85 registers, more warps per SM for the small-D 8-row kernels)")
    b.add_argument("--dtype", default="f16", choices=("f16", "bf16"),
                   help="Q/O dtype of the candidates (the table's bf16 rows take f16's tiling unless tuned so)")
    b.add_argument("--kv", default="16", choices=sorted(KV_FORMATS),
                   help="K/V element format of the candidates (16: the Q/O dtype; fp8, int8: 8-bit caches)")
    m = sub.add_parser("measure")
    m.add_argument("--arch", required=True)
    m.add_argument("--dir", required=True)
    m.add_argument("--out", default=os.environ.get("OUT"))
    m.add_argument("--write", default="", help="the table to write (default <out or dir>/<arch>.tsv)")
    m.add_argument("--sweep-blocks-per-sm", type=int, nargs="*", default=[1, 2, 3, 4],
                   help="planner aims (workgroups per SM) to time the winners with")
    m.add_argument("--tag", default="", help="suffix of the log file (tune_<arch><tag>.json)")
    m.add_argument("--groups", default="", help="only these groups, e.g. d128_r16,d128_r32 (the table then lists "
                   "those groups' winners only)")
    t = sub.add_parser("table", help="a table from measure's logs, by the KEEP rule against the current table")
    t.add_argument("--arch", required=True)
    t.add_argument("--log", action="append", required=True, help="tune_<arch><tag>.json of measure (repeatable)")
    t.add_argument("--write", required=True)
    args = ap.parse_args()
    {"build": cmd_build, "measure": cmd_measure, "table": cmd_table}[args.cmd](args)


if __name__ == "__main__":
    main()
