#!/usr/bin/env python3
"""tune_encoder.py - measures encoder tilings (kernels/encoder/encoder.hip) on an NVIDIA GPU against torch SDPA
flash and picks each head size's winner for variants/<arch>_encoder.tsv.

Two steps, so the compiler and the GPU need not be on one machine, and a third for the table:

    lab/tune_encoder.py build   --arch sm_90 --dir tune-enc            # candidates -> one cubin
    lab/tune_encoder.py measure --dir tune-enc [--out DIR] [--quick]   # on the GPU: check, time, pick
    lab/tune_encoder.py table   LOG [LOG ...] [--sms N]                # measure's logs -> table rows

`build` compiles every candidate (bf16; f16 gets the same tiling) of every head size into its own cubin
with nvcc through encoder.hip's R35A_ENCODER_VARIANT_LIST hook and drops those that spill (ptxas -v) or
do not compile (the LDS contract). A candidate marked "qs" is built with -DR35A_LAB_ENC_Q_REGS_MAX=0 (its Q
tile in shared memory, whatever encoder_cfg's rule would pick: the rule's threshold is a measured
choice); its label ends in _qs, its kernel symbol is the plain name. `measure` loads the cubins through
the CUDA driver and launches the kernels directly with r35a_encoder_args (the encoder_args.h grid
formulas are mirrored below) and, as the library does (src/gpu_runtime.c), with exactly the dynamic
shared memory the kernel's layout uses (its <name>_lds_bytes device global), the function's limit
raised to it, and, for a workgroup-wide candidate, with the library's tail split (its <name>_tail kernel
over the items of a part-empty last round of workgroup slots, src/plan_encoder.c; launched after the
variant here, programmatically in the library):

  1. correctness of every candidate: a varlen problem with segment lengths [1, 37, 100, 577, 16, 0,
     129, 1100] (partial blocks, an empty segment, a length-1 segment, several row blocks, growing
     keys over the long segment so the lazy rescale runs) against a float32 torch reference per
     segment, outputs pre-filled with NaN; metric max|out - ref| / max|ref| <= 1.5e-2 (bf16), NaN fails;
  2. timing on the 21 encoder shapes (the sm_90 R35A_ENCODER_SHAPE rows of variants/variants.def, bf16,
     4 segments of 1024 tokens each) and on extra rows (the previous bench rows and short-segment
     batches), ours and torch SDPA flash (dense [B, H, L, D], equal lengths) each captured in a CUDA
     graph of `copies` calls over disjoint buffers (>= 256 MiB per replay: cold L2), median of 15
     replays; ratio = flash time / ours (> 1: we are faster).

A head size's long-segment winner has the lowest geometric-mean time over its rows among the
candidates that passed; the short-segment (maxlen > 0) winner likewise over the short rows. Prints
one table per part, the winners, and the geomean / min ratio of the winners over the 21 shapes;
writes tune_encoder.json to --out (with the device's SM count).

`table` reads one or more of those logs (times: the median over them) and says per head size which
workgroup-wide rows variants/sm_90_encoder.tsv should have: the first (the current row unless another
is >= 3 % faster in the geomean of the 21 + extra rows) and a second for grids the first leaves with a
part-empty last round, by the planner's own rule (src/plan_encoder.c: taken where it fills the SMs'
workgroup slots >= 0.15 better): a candidate with fewer rows per workgroup, faster than the first on
every measured shape that rule gives it and >= 3 % in their geomean.
"""
import argparse
import ctypes
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from gpu_timing import time_graph  # the lab's one CUDA-graph timing loop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADS = (32, 48, 64, 72, 80, 128)
ARGS_BYTES = 192

# (rows, kb, nw, waves, maxlen[, "qs"]) per head size; the table's current row is among them. With the
# encoder's dynamic shared memory: larger key blocks at D >= 64 with 32 rows per warp, where
# encoder_cfg keeps the Q tile in shared memory (Q^T + O^T + scores above its register threshold:
# D = 64 kb 128, D = 72/80 kb 128, D = 80 kb 96, D = 128 kb 32/48/64), 128 keys at D = 128 with 16 rows
# per warp, and "qs" twins (Q in shared memory below the threshold too). (Groups of 256 rows, 32 rows x
# 8 warps, are not built: encoder_cfg's 32-bit row offsets allow 128.) 64-row workgroups at
# D = 64 and 128 (16 rows x 4 warps, 32 rows x 2 warps), for grids that 128-row workgroups leave with a
# part-empty last wave (D = 128, 12 heads, 4 x 1024 tokens: 384 workgroups on 264 slots, 1.45 waves).
CANDIDATES = {
    32: [(32, 64, 4, 2, 0), (32, 128, 4, 2, 0), (32, 32, 4, 3, 0), (16, 64, 8, 2, 0), (16, 16, 4, 4, 64), (16, 32, 4, 4, 64)],
    48: [(32, 64, 4, 2, 0), (32, 32, 4, 2, 0), (16, 64, 8, 2, 0), (16, 16, 4, 4, 64),
         (32, 128, 4, 2, 0), (32, 64, 4, 2, 0, "qs")],
    64: [(32, 64, 4, 2, 0), (32, 32, 4, 2, 0), (32, 32, 4, 3, 0), (16, 64, 8, 2, 0), (16, 32, 8, 3, 0),
         (16, 16, 4, 4, 64), (16, 32, 4, 4, 64), (16, 16, 8, 4, 64),
         (32, 128, 4, 2, 0), (32, 64, 4, 2, 0, "qs"), (16, 64, 4, 2, 0), (16, 64, 4, 3, 0), (32, 64, 2, 2, 0)],
    72: [(32, 32, 4, 2, 0), (32, 64, 4, 2, 0), (16, 32, 8, 2, 0), (16, 16, 4, 3, 64),
         (32, 128, 4, 2, 0), (32, 64, 4, 2, 0, "qs")],
    80: [(32, 32, 4, 2, 0), (32, 64, 4, 2, 0), (16, 32, 8, 2, 0), (16, 64, 8, 2, 0), (16, 16, 4, 3, 64),
         (32, 128, 4, 2, 0), (32, 96, 4, 2, 0), (32, 64, 4, 2, 0, "qs")],
    128: [(32, 16, 4, 2, 0), (16, 32, 8, 2, 0), (16, 64, 8, 2, 0), (32, 32, 4, 2, 0), (16, 16, 4, 3, 64),
          (16, 16, 4, 2, 64),
          (32, 64, 4, 2, 0), (32, 48, 4, 2, 0), (16, 128, 8, 2, 0), (32, 16, 4, 2, 0, "qs"),
          (16, 64, 4, 2, 0), (32, 32, 2, 2, 0)],
}


def name_of(dtype, head, c):
    rows, kb, nw, waves, maxlen = c[:5]
    return f"encoder_{dtype}_d{head}_r{rows}_kb{kb}_nw{nw}_w{waves}" + (f"_l{maxlen}" if maxlen else "")


def label_of(dtype, head, c):
    """The candidate's unique label: its kernel name, plus _qs for a Q-in-shared-memory twin."""
    return name_of(dtype, head, c) + ("_qs" if "qs" in c[5:] else "")


def elf_int_symbol(path, symbol):
    """The int32 initial value of a global OBJECT symbol of an ELF64 image (a cubin's <name>_lds_bytes), or None."""
    import struct
    data = open(path, "rb").read()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    for (_, typ, _, _, off, size, link, _, _, entsize) in secs:
        if typ != 2:   # SHT_SYMTAB
            continue
        stroff = secs[link][4]
        for k in range(size // entsize):
            name, info, _, shndx, value, ssize = struct.unpack_from("<IBBHQQ", data, off + k * entsize)
            end = data.index(b"\0", stroff + name)
            if data[stroff + name:end].decode() == symbol and (info & 0xF) == 1 and 0 < shndx < shnum and ssize == 4:
                return struct.unpack_from("<i", data, secs[shndx][4] + value)[0]
    return None


# ------------------------------------------------------------------------------------------ build
def cmd_build(a):
    os.makedirs(a.dir, exist_ok=True)
    nvcc = a.nvcc or "nvcc"
    cands = [dict(name=name_of("bf16", h, c), label=label_of("bf16", h, c), head=h, rows=c[0], kb=c[1], nw=c[2],
                  waves=c[3], maxlen=c[4], q_smem_forced="qs" in c[5:], tail=c[4] == 0 and c[1] % 32 == 0)
             for h in HEADS for c in CANDIDATES[h]]
    kept = []
    # compile one candidate at a time: a candidate whose LDS breaks the contract fails static_assert
    for i in range(0, len(cands)):
        c = cands[i]
        lst = os.path.join(os.path.abspath(a.dir), f"{c['label']}.def")
        with open(lst, "w") as f:
            f.write(f"R35A_ENCODER_VARIANT({a.arch}, {c['name']}, bf16, {c['head']}, {c['rows']}, {c['kb']}, "
                    f"{c['nw']}, {c['waves']}, {c['maxlen']})\n")
            if c["tail"]:
                f.write(f"R35A_ENCODER_TAIL({a.arch}, {c['name']}_tail, {c['name']}, bf16, {c['head']}, {c['rows']}, "
                        f"{c['kb']}, {c['nw']}, {c['waves']})\n")
        out = os.path.join(a.dir, f"{c['label']}.cubin")
        cmd = [nvcc, "-x", "cu", "-cubin", "-O3", "-std=c++17", "-Xptxas", "-v", f"-arch={a.arch}",
               "-DR35A_FRAGMENT_EMULATE_GFX11=0", "-I", os.path.join(ROOT, "kernels"), "-I", os.path.join(ROOT, "variants"),
               f'-DR35A_ENCODER_VARIANT_LIST="{lst}"', "-o", out, os.path.join(ROOT, "kernels", "encoder", "encoder.hip")]
        if c["q_smem_forced"]:
            cmd[-1:-1] = ["-DR35A_LAB=1", "-DR35A_LAB_ENC_Q_REGS_MAX=0"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"  {c['label']}: does not compile ({p.stderr.strip().splitlines()[-1][:120] if p.stderr else '?'})")
            continue
        spill = max([int(x) for x in re.findall(r"(\d+) bytes spill stores", p.stderr)] or [0])   # every kernel's
        regs = [int(x) for x in re.findall(r"Used (\d+) registers", p.stderr)]
        c["regs"] = max(regs) if regs else None
        c["lds_bytes"] = elf_int_symbol(out, f"{c['name']}_lds_bytes")
        if spill:
            print(f"  {c['label']}: {spill} bytes of spill stores, dropped")
            continue
        c["cubin"] = os.path.basename(out)
        kept.append(c)
        print(f"  {c['label']}: {c['regs']} registers, {c['lds_bytes']} B of shared memory", flush=True)
    json.dump(dict(arch=a.arch, candidates=kept), open(os.path.join(a.dir, "manifest.json"), "w"), indent=1)
    print(f"{len(kept)} of {len(cands)} candidates built into {a.dir}")


# ------------------------------------------------------------------------------------------ measure
class EncoderArgs(ctypes.Structure):
    _fields_ = ([(n, ctypes.c_void_p) for n in ("q", "k", "v", "out", "cu_seqlens")]
                + [(n, ctypes.c_int64) for n in ("qts", "qhs", "kts", "khs", "vts", "vhs", "ots", "ohs")]
                + [("num_segments", ctypes.c_int32), ("num_heads", ctypes.c_int32), ("max_seqlen", ctypes.c_int32),
                   ("scale_log2", ctypes.c_float), ("error", ctypes.c_void_p), ("num_tokens", ctypes.c_int32),
                   ("tail_items", ctypes.c_int32), ("causal", ctypes.c_int32), ("kv_group", ctypes.c_int32),
                   # softcap, sinks, LSE: off (zeros)
                   ("softcap", ctypes.c_float), ("softcap_in", ctypes.c_float), ("softcap_out", ctypes.c_float),
                   ("pad0", ctypes.c_int32), ("sinks", ctypes.c_void_p), ("lse", ctypes.c_void_p),
                   ("lse_token_stride", ctypes.c_int64), ("lse_head_stride", ctypes.c_int64)])


assert ctypes.sizeof(EncoderArgs) == ARGS_BYTES


def tail_item_count(items, slots):
    """kernels/encoder/encoder_args.h r35a_encoder_tail_items: the items of a part-empty last round of
    workgroup slots when their halves fit in one round, else 0."""
    last = items % slots if items > 0 and slots > 0 else 0
    return last if last and 2 * last <= slots else 0


def tail_launches(c, nseg, max_seqlen, heads, sms, tail=None):
    """[(kernel name, grid, tail_items)] as the library launches a candidate (src/plan_encoder.c): a
    workgroup-wide one with the tail split (its <name>_tail kernel over two half workgroups per tail
    item, after the variant over the others, or alone), else one launch. `tail` forces the tail's item
    count (the correctness check). The tail kernel is launched the ordinary way here, after the first
    (the library launches it programmatically: it may start on slots the first frees)."""
    grid = grid_of(c, nseg, max_seqlen, heads)
    if not c.get("tail") or c["maxlen"]:
        return [(c["name"], grid, 0)]
    total = grid[0] * heads
    if tail is None:
        tail = tail_item_count(total, sms * max(1, 4 * c["waves"] // c["nw"]))
    if tail == 0:
        return [(c["name"], grid, 0)]
    out = [(c["name"], (total - tail, 1, 1), tail)] if total > tail else []
    return out + [(c["name"] + "_tail", (2 * tail, 1, 1), tail)]


def grid_of(c, nseg, max_seqlen, heads):
    """encoder_args.h: r35a_encoder_variant_grid."""
    gw = 1 if c["maxlen"] else c["nw"]
    R, G = c["rows"] * gw, c["nw"] // gw
    items = -(-max_seqlen // R) * nseg if max_seqlen > 0 else 0
    return (-(-items // G), heads, 1)


class Cuda:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.mods = {}

    def function(self, path, name):
        """(function, dynamic shared memory bytes): the kernel's <name>_lds_bytes, its limit raised to it."""
        if path not in self.mods:
            m = ctypes.c_void_p()
            data = open(path, "rb").read()
            if self.lib.cuModuleLoadData(ctypes.byref(m), ctypes.c_char_p(data)) != 0:
                raise RuntimeError(f"cuModuleLoadData {path}")
            self.mods[path] = (m, data)
        f = ctypes.c_void_p()
        if self.lib.cuModuleGetFunction(ctypes.byref(f), self.mods[path][0], name.encode()) != 0:
            raise RuntimeError(f"no {name} in {path}")
        dptr, size, value = ctypes.c_uint64(), ctypes.c_size_t(), ctypes.c_int()
        if (self.lib.cuModuleGetGlobal_v2(ctypes.byref(dptr), ctypes.byref(size), self.mods[path][0],
                                          f"{name}_lds_bytes".encode()) != 0 or size.value != 4 or
                self.lib.cuMemcpyDtoH_v2(ctypes.byref(value), dptr, ctypes.c_size_t(4)) != 0):
            raise RuntimeError(f"no {name}_lds_bytes in {path}")
        if self.lib.cuFuncSetAttribute(f, 8, ctypes.c_int(value.value)) != 0:   # MAX_DYNAMIC_SHARED_SIZE_BYTES
            raise RuntimeError(f"cuFuncSetAttribute({name}, {value.value} B of dynamic shared memory)")
        return f, value.value

    def launch(self, fs, grid, block, arg, stream):
        f, shared = fs
        params = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
        r = self.lib.cuLaunchKernel(f, grid[0], grid[1], grid[2], block, 1, 1, shared, ctypes.c_void_p(stream), params,
                                    None)
        if r != 0:
            raise RuntimeError(f"cuLaunchKernel: {r}")




_ERROR_RECORDS = []   # the kernels' device error record (kernels/common/device_error.h), kept alive


def args_for(q, k, v, o, cu, nseg, H, D, max_seqlen, tail_items=0):
    ts = H * D
    if not _ERROR_RECORDS:
        _ERROR_RECORDS.append(q.new_zeros((2,), dtype=cu.dtype))
    return EncoderArgs(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), cu.data_ptr(), ts, D, ts, D, ts, D, ts, D,
                       nseg, H, max_seqlen, float((1.0 / math.sqrt(D)) * 1.4426950408889634),
                       _ERROR_RECORDS[0].data_ptr(), q.shape[0], tail_items, 0, 1)


def check_candidate(torch, cu_rt, path, c, seed):
    """Mixed varlen problem against a float32 reference per segment; returns (err, problem or None)."""
    D, H = c["head"], 3
    segs = [1, 37, 100, 577, 16, 0, 129, 1100]
    g = torch.Generator(device="cuda").manual_seed(seed)
    T = sum(segs)
    q = torch.randn(T, H, D, device="cuda", generator=g).to(torch.bfloat16)
    kk = torch.randn(T, H, D, device="cuda", generator=g)
    # growing keys over the long segment: its running max rises by far more than the rescale limit
    t0 = sum(segs[:-1])
    kk[t0:] *= (1.0 + 6.0 * torch.arange(segs[-1], device="cuda") / segs[-1])[:, None, None]
    k = kk.to(torch.bfloat16)
    v = (torch.randn(T, H, D, device="cuda", generator=g) + 0.5).to(torch.bfloat16)
    o = torch.full((T, H, D), float("nan"), device="cuda", dtype=torch.bfloat16)
    cu = torch.tensor([0] + list(__import__("itertools").accumulate(segs)), dtype=torch.int32, device="cuda")
    items = grid_of(c, len(segs), max(segs), H)[0] * H
    for name, grid, tail in tail_launches(c, len(segs), max(segs), H, 1, tail=items // 2 + 1):
        arg = args_for(q, k, v, o, cu, len(segs), H, D, max(segs), tail)
        cu_rt.launch(cu_rt.function(path, name), grid, 32 * c["nw"], arg, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    err, s0 = 0.0, 0
    refmax = 0.0
    for n in segs:
        if n:
            qs, ks, vs = (x[s0:s0 + n].float().transpose(0, 1) for x in (q, k, v))
            ref = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs).transpose(0, 1)
            out = o[s0:s0 + n].float()
            if torch.isnan(out).any():
                return float("nan"), f"NaN in segment of {n} tokens at offset {s0}"
            err = max(err, float((out - ref).abs().max()))
            refmax = max(refmax, float(ref.abs().max()))
        s0 += n
    rel = err / refmax
    return rel, (None if rel <= 1.5e-2 else f"max|out-ref|/max|ref| {rel:.3e} > 1.5e-2")


class Problem:
    """Equal-length segments, bf16 [copies][tokens][H][D], for ours and flash."""

    def __init__(self, torch, D, H, seg, nseg):
        self.D, self.H, self.seg, self.nseg = D, H, seg, nseg
        T = seg * nseg
        one = 4 * T * H * D * 2
        self.copies = max(1, min(32, -(-(256 << 20) // one)))
        self.q = torch.randn(self.copies, T, H, D, dtype=torch.bfloat16, device="cuda")
        self.k = torch.randn_like(self.q)
        self.v = torch.randn_like(self.q)
        self.o = torch.empty_like(self.q)
        self.cu = torch.arange(0, T + 1, seg, dtype=torch.int32, device="cuda")
        self.flops = 4.0 * D * H * nseg * seg * seg
        self.t_flash = None
        self.flash_out = None

    def flash(self, torch):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        qt, kt, vt = (x.view(self.copies, self.nseg, self.seg, self.H, self.D).transpose(2, 3)
                      for x in (self.q, self.k, self.v))
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            outs = [None] * self.copies

            def peer(c):
                outs[c] = torch.nn.functional.scaled_dot_product_attention(qt[c], kt[c], vt[c])
            self.t_flash = time_graph(peer, self.copies)
            ref = torch.nn.functional.scaled_dot_product_attention(qt[0], kt[0], vt[0])
        self.flash_out = ref.transpose(1, 2).reshape(self.seg * self.nseg, self.H, self.D).float()
        del outs

    def ours(self, torch, cu_rt, path, c, sms=132):
        ls = [(cu_rt.function(path, name), grid, tail)
              for name, grid, tail in tail_launches(c, self.nseg, self.seg, self.H, sms)]
        args = [[args_for(self.q[i], self.k[i], self.v[i], self.o[i], self.cu, self.nseg, self.H, self.D, self.seg, tail)
                 for _, _, tail in ls] for i in range(self.copies)]

        def call(i):
            for (f, grid, _), arg in zip(ls, args[i]):
                cu_rt.launch(f, grid, 32 * c["nw"], arg, torch.cuda.current_stream().cuda_stream)
        t = time_graph(call, self.copies)
        torch.cuda.synchronize()
        diff = float((self.o[0].float() - self.flash_out).abs().max()) if self.flash_out is not None else None
        return t, diff


def shapes_21():
    """The sm_90 R35A_ENCODER_SHAPE rows of variants.def (bf16): (D, H)."""
    text = open(os.path.join(ROOT, "variants", "variants.def")).read()
    rows = re.findall(r"^R35A_ENCODER_SHAPE\(sm_90, bf16, (\d+), (\d+)\)$", text, re.M)
    return [(int(d), int(h)) for d, h in rows]


EXTRA = [(64, 12, 577, 8), (72, 16, 729, 8), (128, 16, 4096, 1), (32, 8, 256, 32)]
SHORT = [(64, 16, 16, 4096), (64, 16, 64, 1024), (128, 16, 16, 4096), (80, 16, 49, 1024)]


def gmean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def label(c):
    return c.get("label", c["name"])   # manifests before the _qs twins have no label


def cmd_measure(a):
    import torch
    man = json.load(open(os.path.join(a.dir, "manifest.json")))
    cu_rt = Cuda()
    torch.cuda.init()
    dev = torch.cuda.get_device_properties(0)
    t_start = time.time()
    seed = int.from_bytes(os.urandom(4), "little") if a.seed is None else a.seed
    print(f"device {dev.name}, {dev.multi_processor_count} SMs, torch {torch.__version__}; seed {seed}", flush=True)
    cands = man["candidates"]
    by_head = {h: [c for c in cands if c["head"] == h] for h in HEADS}

    # 1. correctness
    print(f"\ncorrectness (segments [1, 37, 100, 577, 16, 0, 129, 1100], 3 heads, bf16, vs float32 torch):", flush=True)
    ok = {}
    for c in cands:
        try:
            err, prob = check_candidate(torch, cu_rt, os.path.join(a.dir, c["cubin"]), c, seed)
        except Exception as e:  # noqa: BLE001
            err, prob = float("nan"), f"{type(e).__name__}: {e}"
        c["check_err"], c["check_problem"] = err, prob
        ok[label(c)] = prob is None
        print(f"  {label(c):42s} err {err:.2e}  {'PASS' if prob is None else 'FAIL ' + prob}", flush=True)

    # 2. timing
    rows = [(D, H, 1024, 4, "21") for (D, H) in shapes_21()] + [(D, H, s, n, "extra") for (D, H, s, n) in EXTRA] + \
           [(D, H, s, n, "short") for (D, H, s, n) in SHORT]
    if a.quick:
        rows = [r for r in rows if r[1] in (16, 12, 8) or r[4] != "21"]
    results = []
    print(f"\n{'D':>4} {'H':>3} {'seg':>5} {'nseg':>5} {'set':>5} {'flash us':>9}  candidates: us (ratio = flash / ours)", flush=True)
    for (D, H, seg, nseg, kind) in rows:
        if time.time() - t_start > a.budget:
            print(f"  time budget {a.budget} s reached: stopping", flush=True)
            break
        p = Problem(torch, D, H, seg, nseg)
        try:
            p.flash(torch)
        except Exception as e:  # noqa: BLE001
            print(f"  flash failed for D={D}: {str(e).splitlines()[0][:100]}")
        row = dict(D=D, H=H, seg=seg, nseg=nseg, set=kind, t_flash_us=p.t_flash * 1e6 if p.t_flash else None,
                   flops=p.flops, ours={})
        cells = []
        for c in by_head[D]:
            if not ok.get(label(c)) or (kind != "short" and c["maxlen"] and seg > c["maxlen"]):
                continue
            try:
                t, diff = p.ours(torch, cu_rt, os.path.join(a.dir, c["cubin"]), c, dev.multi_processor_count)
            except Exception as e:  # noqa: BLE001
                print(f"  {label(c)}: {e}")
                continue
            row["ours"][label(c)] = dict(t_us=t * 1e6, maxdiff=diff, ratio=(p.t_flash / t) if p.t_flash else None)
            cells.append(f"{label(c)[len('encoder_bf16_'):]} {t * 1e6:.1f} ({(p.t_flash or 0) / t:.2f})")
        results.append(row)
        print(f"{D:>4} {H:>3} {seg:>5} {nseg:>5} {kind:>5} {(row['t_flash_us'] or 0):9.1f}  " + "; ".join(cells), flush=True)
        del p
        torch.cuda.empty_cache()

    # 3. winners
    winners = {}
    for D in HEADS:
        for short in (False, True):
            sel = [r for r in results if r["D"] == D and (r["set"] == "short") == short]
            best = None
            for c in by_head[D]:
                if bool(c["maxlen"]) != short or not ok.get(label(c)):
                    continue
                ts = [r["ours"].get(label(c), {}).get("t_us") for r in sel]
                if not sel or any(t is None for t in ts):
                    continue
                g = gmean(ts)
                if best is None or g < best[1]:
                    best = (label(c), g)
            if best:
                winners[f"d{D}{'_short' if short else ''}"] = best[0]
    print("\nwinners: " + ", ".join(f"{k} {v}" for k, v in winners.items()))
    def ratio_of(r):
        w = winners.get(f"d{r['D']}{'_short' if r['set'] == 'short' else ''}")
        return r["ours"].get(w, {}).get("ratio") if w else None
    main = [ratio_of(r) for r in results if r["set"] == "21"]
    out = dict(device=dev.name, sms=dev.multi_processor_count, seed=seed, candidates=cands, results=results, winners=winners,
               geomean_21=gmean(main), min_21=min([x for x in main if x] or [float("nan")]))
    os.makedirs(a.out, exist_ok=True)
    json.dump(out, open(os.path.join(a.out, "tune_encoder.json"), "w"), indent=1)
    print(f"\n{'D':>4} {'H':>3} {'seg':>5} {'nseg':>5} {'set':>5} {'winner':<40} {'us':>9} {'flash':>9} {'ratio':>6} {'TFLOP/s':>8} {'maxdiff':>8}")
    for r in results:
        w = winners.get(f"d{r['D']}{'_short' if r['set'] == 'short' else ''}")
        o = r["ours"].get(w, {})
        if o:
            print(f"{r['D']:>4} {r['H']:>3} {r['seg']:>5} {r['nseg']:>5} {r['set']:>5} {w[len('encoder_'):]:<40} "
                  f"{o['t_us']:9.1f} {(r['t_flash_us'] or 0):9.1f} {(o['ratio'] or 0):6.2f} "
                  f"{r['flops'] / o['t_us'] / 1e6:8.1f} {(o['maxdiff'] or 0):8.1e}")
    print(f"\n21 shapes: geomean ratio vs flash {out['geomean_21']:.3f}, min {out['min_21']:.3f}; "
          f"correctness {sum(ok.values())}/{len(ok)} candidates pass; {time.time() - t_start:.0f} s")


# ------------------------------------------------------------------------------------------ table
FILL_MARGIN = 0.15   # src/plan_encoder.c R35A_ENCODER_FILL_MARGIN
KEEP_GAIN = 0.03     # a row changes only for a >= 3 % faster geomean (tune_variants.py's keep rule)


def grid_fill(c, shape, sms):
    """src/plan_encoder.c encoder_grid_fill: workgroups / (rounds x slots), slots = SMs x the contract's
    resident workgroups per SM (4 sub-partitions x waves / nw)."""
    _, H, seg, nseg = shape   # (D, heads, segment length, segments)
    wgs = grid_of(c, nseg, seg, H)[0] * H
    slots = sms * max(1, 4 * c["waves"] // c["nw"])
    rounds = -(-wgs // slots)
    return wgs / (rounds * slots) if wgs else 0.0


def current_rows(arch="sm_90"):
    """The workgroup-wide bf16 tilings of variants/<arch>_encoder.tsv per head size, in table order."""
    rows = {}
    for line in open(os.path.join(ROOT, "variants", f"{arch}_encoder.tsv")):
        cells = line.split()
        if not cells or cells[0] != "encoder" or cells[1] != "bf16" or cells[8] != "0":
            continue
        head, r, kb, nw, waves = (int(x) for x in (cells[2], cells[4], cells[5], cells[6], cells[7]))
        name = f"encoder_bf16_d{head}_r{r}_kb{kb}_nw{nw}_w{waves}"
        if name not in rows.setdefault(head, []):
            rows[head].append(name)
    return rows


def cmd_table(a):
    """From measure's logs: per head size, the first workgroup-wide tiling (the current row unless
    another is >= 3 % faster in the geomean of the head size's 21 + extra rows) and a second one for
    grids the first leaves with a part-empty last round: a candidate with fewer rows per workgroup that
    the planner's fill rule (src/plan_encoder.c) would pick on some measured shapes, faster there than the
    first on every such shape and >= 3 % in their geomean (the best such geomean if several).
    Times: the median over the logs."""
    logs = [json.load(open(p)) for p in a.logs]
    sms = a.sms or logs[0].get("sms") or 132
    cands = {label(c): c for log in logs for c in log["candidates"] if not c.get("q_smem_forced")}
    times = {}
    for log in logs:
        for r in log["results"]:
            if r["set"] == "short":
                continue
            key = (r["D"], r["H"], r["seg"], r["nseg"])
            for lab, o in r["ours"].items():
                if o.get("t_us") and lab in cands:
                    times.setdefault(key, {}).setdefault(lab, []).append(o["t_us"])
    med = {k: {lab: statistics.median(v) for lab, v in d.items() if len(v) == len(logs)} for k, d in times.items()}
    table = current_rows()
    print(f"{len(logs)} log(s), {sms} SMs; times: median over the logs")
    for D in HEADS:
        shapes = sorted(k for k in med if k[0] == D)
        wide = [lab for lab, c in cands.items() if c["head"] == D and not c["maxlen"]
                and all(lab in med[k] for k in shapes)]
        if not shapes or not wide:
            continue
        g = {lab: gmean([med[k][lab] for k in shapes]) for lab in wide}
        best = min(wide, key=lambda lab: g[lab])
        cur = (table.get(D) or [None])[0]
        first = cur if cur in g and g[best] > (1 - KEEP_GAIN) * g[cur] else best
        why = ("kept: the best is within 3 %" if first == cur and best != cur else
               "the current row" if first == cur else f"changes from {cur}")
        print(f"d{D}: first {first} ({why}; geomean {g[first]:.1f} us, best {best} {g[best]:.1f})")
        fc = cands[first]
        second, second_gain, second_shapes = None, 0.0, []
        for lab in wide:
            c = cands[lab]
            if c["rows"] * c["nw"] >= fc["rows"] * fc["nw"]:
                continue
            routed = [k for k in shapes if grid_fill(c, k, sms) >= grid_fill(fc, k, sms) + FILL_MARGIN]
            if not routed or any(med[k][lab] >= med[k][first] for k in routed):
                continue
            gain = 1 - gmean([med[k][lab] for k in routed]) / gmean([med[k][first] for k in routed])
            if gain >= KEEP_GAIN and gain > second_gain:
                second, second_gain, second_shapes = lab, gain, routed
        if second:
            print(f"     second {second}: {100 * second_gain:.1f} % faster on the shapes the fill rule gives it: " +
                  ", ".join(f"H{k[1]} {k[3]}x{k[2]} {med[k][first]:.1f} -> {med[k][second]:.1f} us" for k in second_shapes))
        rows = table.get(D, [])
        print(f"     table's second row: {rows[1] if len(rows) > 1 else 'none'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--arch", default="sm_90")
    b.add_argument("--dir", default="tune-enc")
    b.add_argument("--nvcc", default=None)
    m = sub.add_parser("measure")
    m.add_argument("--dir", default="tune-enc")
    m.add_argument("--out", default=os.environ.get("OUT", "."))
    m.add_argument("--seed", type=int, default=None)
    m.add_argument("--quick", action="store_true")
    m.add_argument("--budget", type=float, default=150.0, help="seconds for the timing part")
    t = sub.add_parser("table")
    t.add_argument("logs", nargs="+", help="tune_encoder.json files of measure")
    t.add_argument("--sms", type=int, default=0, help="SM count for the fill rule (default: the log's, else 132)")
    a = ap.parse_args()
    return {"build": cmd_build, "measure": cmd_measure, "table": cmd_table}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
