#!/usr/bin/env python3
"""emu_check.py - instruction counts and the static pipeline figures of the decode kernel on the gfx11
ISA emulator, for the cost model of kernels/decode/README.md. Not a correctness check: the kernels' results
are checked, through the library's own planner and launches, by the `emulator` ctests
(tests/hip/test_emulator.c; `ctest -L emulator`).

Compiles kernels/*.hip for gfx1151 with clang, runs the bench's default decode problem (D=128, G=4,
M=1 and 4, L=4096) once through gfx11emu (../shared/gfx11emu, imported from --emu / $GFX11EMU_DIR)
with counting on, compares that run with a float64 numpy oracle (a counted run must also be right),
and prints the wave instructions per KV byte by class, the cost model and the KV loads in flight.

    lab/emu_check.py            counts, cost model and pipeline figures (the default)
    lab/emu_check.py --static   VGPRs, LDS, scratch, WMMA / b128 presence per kernel
    lab/emu_check.py --count --count-ops 12   ... and the decode launch's top opcodes

Needs Python >= 3.11 with numpy (e.g. Debian's /usr/bin/python3), clang-19 and a host C compiler
(for the header probes). This script holds no emulator code: it calls gfx11emu's public functions,
and with --count-ops wraps two of its private ones (OpProfile: it stops with a message if they
are gone).
"""
import argparse
import ctypes
import hashlib
import math
import mmap
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOG2E = 1.4426950408889634

# --------------------------------------------------------------------------------------- build


def find_clang():
    if os.environ.get("R35A_CLANG"):
        return os.environ["R35A_CLANG"]
    for v in range(40, 15, -1):
        c = shutil.which(f"clang-{v}")
        if c:
            return c
    return shutil.which("clang") or "clang"


def compile_kernels(build_dir, arch="gfx1151", sources=("decode", "generic")):
    """Compiles kernels/<src>/<src>.hip to <build_dir>/<src>.<arch>.hsaco when the sources changed;
    returns {src: (path, seconds spent compiling or None if cached)}."""
    os.makedirs(build_dir, exist_ok=True)
    deps = [os.path.join(ROOT, "variants", "variants.def")]
    for d, _, files in os.walk(os.path.join(ROOT, "kernels")):
        deps += [os.path.join(d, f) for f in files if f.endswith(".h")]
    out = {}
    for src in sources:
        hip = os.path.join(ROOT, "kernels", src, f"{src}.hip")
        if not os.path.exists(hip):
            continue
        obj = os.path.join(build_dir, f"{src}.{arch}.hsaco")
        newest = max(os.path.getmtime(p) for p in deps + [hip])
        if os.path.exists(obj) and os.path.getmtime(obj) >= newest:
            out[src] = (obj, None)
            continue
        cmd = [find_clang(), "-x", "hip", f"--offload-arch={arch}", "-nogpuinc", "-nogpulib", "--cuda-device-only",
               "--no-gpu-bundle-output", "-O3", "-std=c++17", "-Wall", "-Wextra", "-I", os.path.join(ROOT, "kernels"),
               "-I", os.path.join(ROOT, "variants"), "-o", obj, hip]
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            sys.stderr.write(r.stderr)
            raise SystemExit(f"compile of {hip} failed")
        if r.stderr.strip():
            sys.stderr.write(r.stderr)
        out[src] = (obj, dt)
    return out


def read_variants():
    text = open(os.path.join(ROOT, "variants", "variants.def")).read()
    dec, gen = [], []
    for m in re.finditer(r"^R35A_DECODE_VARIANT\(([^)]*)\)", text, re.M):
        arch, name, dtype, kv, head, rows, kw, dw, rw, waves, layer, pipe, stages, q = \
            [x.strip() for x in m.group(1).split(",")]
        if not arch.startswith("gfx"):
            continue   # another target's kernels (e.g. sm_90): not in the gfx11 code objects
        dec.append(dict(arch=arch, name=name, dtype=dtype, kv8=None if kv == "kv16" else kv, D=int(head), R=int(rows),
                        KW=int(kw), DW=int(dw), RW=int(rw), waves=int(waves)))
    for m in re.finditer(r"^R35A_GENERIC_KERNEL\(([^)]*)\)", text, re.M):
        arch, name, op, dtype, dmax = [x.strip() for x in m.group(1).split(",")]
        if not arch.startswith("gfx"):
            continue
        gen.append(dict(arch=arch, name=name, op=op, dtype=dtype, dmax=int(dmax)))
    return dec, gen

# ------------------------------------------------------------------------------ kernel arguments


class DecodeArgs(ctypes.Structure):   # mirrors r35a_decode_args (checked against the C header below)
    _fields_ = [("q", ctypes.c_uint64), ("k_cache", ctypes.c_uint64), ("v_cache", ctypes.c_uint64),
                ("out", ctypes.c_uint64), ("seq_lens", ctypes.c_uint64), ("query_start_loc", ctypes.c_uint64),
                ("block_table", ctypes.c_uint64), ("workspace", ctypes.c_uint64),
                ("sinks", ctypes.c_uint64), ("alibi_slopes", ctypes.c_uint64),
                ("k_scale", ctypes.c_uint64), ("v_scale", ctypes.c_uint64), ("error", ctypes.c_uint64),
                ("q_token_stride", ctypes.c_int64), ("q_head_stride", ctypes.c_int64),
                ("o_token_stride", ctypes.c_int64), ("o_head_stride", ctypes.c_int64),
                ("k_page_stride", ctypes.c_int64), ("k_head_stride", ctypes.c_int64), ("k_slot_stride", ctypes.c_int64),
                ("v_page_stride", ctypes.c_int64), ("v_head_stride", ctypes.c_int64), ("v_slot_stride", ctypes.c_int64),
                ("block_table_stride", ctypes.c_int64),
                ("num_seqs", ctypes.c_int32), ("num_kv_heads", ctypes.c_int32), ("group_size", ctypes.c_int32),
                ("page_size", ctypes.c_int32), ("window", ctypes.c_int32), ("max_query_len", ctypes.c_int32),
                ("num_row_groups", ctypes.c_int32), ("num_splits", ctypes.c_int32),
                ("num_tokens", ctypes.c_int32), ("num_pages", ctypes.c_int32), ("max_seq_len", ctypes.c_int32),
                ("query_len_bound", ctypes.c_int32), ("scale_log2", ctypes.c_float),
                ("logit_softcap", ctypes.c_float), ("kv_scale_per_head", ctypes.c_int32),
                ("rows_per_group", ctypes.c_int32), ("head_size", ctypes.c_int32), ("min_split_tiles", ctypes.c_int32),
                ("reserved", ctypes.c_int32),
                ("lse", ctypes.c_uint64), ("lse_token_stride", ctypes.c_int64), ("lse_head_stride", ctypes.c_int64)]


class GenericPagedArgs(ctypes.Structure):   # mirrors r35a_generic_paged_args
    _fields_ = [("q", ctypes.c_uint64), ("k_cache", ctypes.c_uint64), ("v_cache", ctypes.c_uint64),
                ("out", ctypes.c_uint64), ("seq_lens", ctypes.c_uint64), ("query_start_loc", ctypes.c_uint64),
                ("block_table", ctypes.c_uint64), ("error", ctypes.c_uint64), ("alibi_slopes", ctypes.c_uint64),
                ("sinks", ctypes.c_uint64), ("k_scale", ctypes.c_uint64), ("v_scale", ctypes.c_uint64),
                ("q_token_stride", ctypes.c_int64), ("q_head_stride", ctypes.c_int64),
                ("o_token_stride", ctypes.c_int64), ("o_head_stride", ctypes.c_int64),
                ("k_page_stride", ctypes.c_int64), ("k_head_stride", ctypes.c_int64), ("k_slot_stride", ctypes.c_int64),
                ("v_page_stride", ctypes.c_int64), ("v_head_stride", ctypes.c_int64), ("v_slot_stride", ctypes.c_int64),
                ("block_table_stride", ctypes.c_int64),
                ("num_seqs", ctypes.c_int32), ("num_tokens", ctypes.c_int32), ("num_q_heads", ctypes.c_int32),
                ("num_kv_heads", ctypes.c_int32), ("head_size", ctypes.c_int32), ("page_size", ctypes.c_int32),
                ("num_pages", ctypes.c_int32), ("max_seq_len", ctypes.c_int32), ("max_query_len", ctypes.c_int32),
                ("window", ctypes.c_int32), ("min_query_len", ctypes.c_int32),
                ("softmax_scale", ctypes.c_float), ("logit_softcap", ctypes.c_float),
                ("kv_dtype", ctypes.c_int32), ("kv_scale_per_head", ctypes.c_int32),
                ("lse", ctypes.c_uint64), ("lse_token_stride", ctypes.c_int64), ("lse_head_stride", ctypes.c_int64),
                ("k_scale_page_stride", ctypes.c_int64), ("k_scale_slot_stride", ctypes.c_int64),
                ("k_scale_head_stride", ctypes.c_int64), ("v_scale_page_stride", ctypes.c_int64),
                ("v_scale_slot_stride", ctypes.c_int64), ("v_scale_head_stride", ctypes.c_int64)]


class GenericVarlenArgs(ctypes.Structure):   # mirrors r35a_generic_varlen_args
    _fields_ = [("q", ctypes.c_uint64), ("k", ctypes.c_uint64), ("v", ctypes.c_uint64), ("out", ctypes.c_uint64),
                ("cu_seqlens", ctypes.c_uint64), ("sinks", ctypes.c_uint64), ("error", ctypes.c_uint64),
                ("q_token_stride", ctypes.c_int64), ("q_head_stride", ctypes.c_int64),
                ("k_token_stride", ctypes.c_int64), ("k_head_stride", ctypes.c_int64),
                ("v_token_stride", ctypes.c_int64), ("v_head_stride", ctypes.c_int64),
                ("o_token_stride", ctypes.c_int64), ("o_head_stride", ctypes.c_int64),
                ("num_segments", ctypes.c_int32), ("num_tokens", ctypes.c_int32), ("num_q_heads", ctypes.c_int32),
                ("num_kv_heads", ctypes.c_int32), ("head_size", ctypes.c_int32), ("causal", ctypes.c_int32),
                ("max_seqlen", ctypes.c_int32), ("softmax_scale", ctypes.c_float), ("logit_softcap", ctypes.c_float),
                ("lse", ctypes.c_uint64), ("lse_token_stride", ctypes.c_int64), ("lse_head_stride", ctypes.c_int64)]


C_STRUCTS = {"r35a_decode_args": DecodeArgs, "r35a_generic_paged_args": GenericPagedArgs,
             "r35a_generic_varlen_args": GenericVarlenArgs}


def check_struct_layouts(build_dir):
    """The ctypes mirrors above must match kernels/decode/decode_args.h and generic_args.h: compile a C11 probe that
    prints sizeof/offsetof of every field and compare (also proves the header is valid C11)."""
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "decode/decode_args.h"\n#include "generic/generic_args.h"', 'int main(void) {']
    for cname, st in C_STRUCTS.items():
        lines.append(f'  printf("{cname} size %zu\\n", sizeof({cname}));')
        for f, _ in st._fields_:
            lines.append(f'  printf("{cname} {f} %zu\\n", offsetof({cname}, {f}));')
    lines += ["  return 0;", "}"]
    src = os.path.join(build_dir, "layout_probe.c")
    exe = os.path.join(build_dir, "layout_probe")
    open(src, "w").write("\n".join(lines) + "\n")
    cc = shutil.which("cc") or shutil.which("gcc") or find_clang()
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(ROOT, "kernels"),
                    "-o", exe, src], check=True)
    got = {}
    for line in subprocess.run([exe], capture_output=True, text=True, check=True).stdout.splitlines():
        a, b, c = line.split()
        got[(a, b)] = int(c)
    for cname, st in C_STRUCTS.items():
        if got[(cname, "size")] != ctypes.sizeof(st):
            raise SystemExit(f"{cname}: C size {got[(cname, 'size')]} != harness {ctypes.sizeof(st)}")
        for f, _ in st._fields_:
            if got[(cname, f)] != getattr(st, f).offset:
                raise SystemExit(f"{cname}.{f}: C offset {got[(cname, f)]} != harness {getattr(st, f).offset}")

class HostFormulas:
    """The host-side formulas of decode_args.h (split planner, row groups, grid, workspace size),
    compiled from the header into a small shared library and called through ctypes, so the runs
    below use exactly what the library's planner will."""

    def __init__(self, build_dir):
        fns = {  # name: (restype, argtypes)
            "r35a_decode_num_row_groups": (ctypes.c_int32, [ctypes.c_int32] * 3),
            "r35a_decode_num_splits": (ctypes.c_int32, [ctypes.c_int32] * 9),
            "r35a_decode_seq_splits": (ctypes.c_int32, [ctypes.c_int32, ctypes.c_int64, ctypes.c_int32]),
            "r35a_decode_resident_wgs_per_cu": (ctypes.c_int32, [ctypes.c_int32] * 3),
            "r35a_decode_workspace_bytes": (ctypes.c_int64, [ctypes.c_int32] * 6),
            "r35a_decode_block_threads": (ctypes.c_uint32, [ctypes.c_int32] * 3),
        }
        src = os.path.join(build_dir, "host_formulas.c")
        lib = os.path.join(build_dir, "libhost_formulas.so")
        lines = ['#include "decode/decode_args.h"\n#include "generic/generic_args.h"']
        for name, (res, args) in fns.items():
            ctype = {ctypes.c_int32: "int32_t", ctypes.c_int64: "int64_t", ctypes.c_uint32: "uint32_t"}
            params = ", ".join(f"{ctype[a]} a{i}" for i, a in enumerate(args))
            call = ", ".join(f"a{i}" for i in range(len(args)))
            lines.append(f"{ctype[res]} x_{name}({params}) {{ return {name}({call}); }}")
        lines.append("void x_r35a_decode_grid(int32_t a, int32_t b, int32_t c, int32_t d, uint32_t g[3]) "
                     "{ r35a_decode_grid(a, b, c, d, g); }")
        lines.append("void x_r35a_decode_merge_grid(int32_t a, int32_t b, int32_t c, int32_t d, int32_t e, int32_t f, "
                     "int32_t h, int32_t i, uint32_t g[3]) { r35a_decode_merge_grid(a, b, c, d, e, f, h, i, g); }")
        lines.append("uint32_t x_merge_threads(void) { return R35A_DECODE_MERGE_THREADS; }")
        lines.append("int32_t x_min_tiles(void) { return R35A_DECODE_MIN_TILES_PER_SPLIT; }")
        open(src, "w").write("\n".join(lines) + "\n")
        cc = shutil.which("cc") or shutil.which("gcc") or find_clang()
        subprocess.run([cc, "-std=c11", "-O2", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
                        "-I", os.path.join(ROOT, "kernels"), "-o", lib, src], check=True)
        self.lib = ctypes.CDLL(lib)
        for name, (res, args) in fns.items():
            f = getattr(self.lib, "x_" + name)
            f.restype, f.argtypes = res, args
            setattr(self, name.replace("r35a_decode_", ""), f)

    def grid(self, nseq, hkv, rg, splits):
        g = (ctypes.c_uint32 * 3)()
        self.lib.x_r35a_decode_grid(nseq, hkv, rg, splits, g)
        return tuple(g)

    def merge_grid(self, nseq, hkv, rg, R, G, M, D, splits):
        g = (ctypes.c_uint32 * 3)()
        self.lib.x_r35a_decode_merge_grid(nseq, hkv, rg, R, G, M, D, splits, g)
        return tuple(g)

    def merge_threads(self):
        self.lib.x_merge_threads.restype = ctypes.c_uint32
        return self.lib.x_merge_threads()

    def min_tiles(self):
        self.lib.x_min_tiles.restype = ctypes.c_int32
        return self.lib.x_min_tiles()


HOST = None   # HostFormulas, set in main()
SIMDS_PER_CU = 2   # gfx11 (variants/archs.tsv simds_per_cu)


def resident_per_cu(v):
    """Workgroups of variant v a gfx11 CU holds at once (what the planner passes for gfx1151)."""
    return HOST.resident_wgs_per_cu(SIMDS_PER_CU, v["waves"], v["KW"] * v["DW"] * v["RW"])

# ------------------------------------------------------------------------------- numeric helpers


def to_bits(x, dtype):
    """float array -> uint16 storage bits of dtype (round to nearest even)."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f16":
        return x.astype(np.float16).view(np.uint16)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    r[nan] = 0x7FC0
    return r


def from_bits(b, dtype):
    b = np.asarray(b, dtype=np.uint16)
    if dtype == "f16":
        return b.view(np.float16).astype(np.float64)
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


POISON = 0xFFFF   # NaN in f16 and bf16


def fp8_e4m3_values(codes):
    """OCP float8_e4m3fn bytes -> float64, from the format's definition (bias 7, 3 mantissa bits,
    subnormals, S.1111.111 NaN, no infinities); independent of the kernels' bit tricks."""
    c = np.asarray(codes, dtype=np.int64)
    e, m = (c >> 3) & 15, c & 7
    mag = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1.0 + m / 8.0) * 2.0 ** (e - 7.0))
    return np.where((c & 0x7F) == 0x7F, np.nan, np.where(c & 0x80, -mag, mag))


def kv8_values(codes, kv_dtype):
    """Stored 8-bit KV bytes -> their values before the scale."""
    if kv_dtype == "fp8":
        return fp8_e4m3_values(codes)
    return np.asarray(codes, dtype=np.uint8).view(np.int8).astype(np.float64)

# --------------------------------------------------------------------------------- host memory


class Mem:
    """Host memory the emulated kernel addresses directly: gfx11emu buffers, plus big sparse
    mappings (MAP_NORESERVE) for caches beyond 2^31 elements."""

    def __init__(self, G):
        self.G = G
        self.keep = []

    def buf(self, nbytes, label):
        b = self.G.alloc(max(int(nbytes), 16), label)
        self.keep.append(b)
        return b

    def from_array(self, arr, label):
        arr = np.ascontiguousarray(arr)
        b = self.buf(arr.nbytes, label)
        ctypes.memmove(b.ptr, arr.ctypes.data, arr.nbytes)
        return b

    def sparse(self, nbytes, label):
        mm = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0))
        ptr = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        key = self.G.register_memory(ptr, nbytes, label)
        self.keep.append((mm, key))
        return ptr

    def close(self):
        for k in self.keep:
            if isinstance(k, tuple):
                mm, key = k
                self.G.unregister_memory(key)
                try:
                    mm.close()
                except BufferError:
                    pass
        self.keep = []


def np_view(ptr, count, dtype):
    return np.ctypeslib.as_array((ctypes.c_uint8 * (count * np.dtype(dtype).itemsize)).from_address(ptr)).view(dtype)

# ------------------------------------------------------------------------------------ the oracle


def oracle_paged(q, kpos, vpos, seqs, G, window, scale, softcap=0.0, alibi=None, sinks=None):
    """float64 paged attention from the public header's semantics.
    q: [tokens][Hq][D] float64; kpos/vpos(s, g) -> [L][D] float64 keys/values of sequence s, kv head g
    (real values: 8-bit caches already decoded and scaled); sinks: [Hq] raw sink logits or None.
    seqs: list of (L, M, q_start). Returns out [tokens][Hq][D] (rows of M=0 sequences absent)."""
    T, Hq, D = q.shape
    out = np.zeros((T, Hq, D))
    for s, (L, M, q0) in enumerate(seqs):
        if M == 0:
            continue
        for g in range(Hq // G):
            K = kpos(s, g)
            V = vpos(s, g)
            for hl in range(G):
                h = g * G + hl
                for i in range(M):
                    p = L - M + i
                    lo = max(0, p - window + 1) if window > 0 else 0
                    if p < lo:
                        continue   # sees no key: zeros
                    j = np.arange(lo, p + 1)
                    sc = scale * (K[lo:p + 1] @ q[q0 + i, h])
                    if softcap > 0:
                        sc = softcap * np.tanh(sc / softcap)
                    if alibi is not None:
                        sc = sc + alibi[h] * (j - p)
                    out[q0 + i, h] = softmax_with_sink(sc, None if sinks is None else sinks[h]) @ V[lo:p + 1]
    return out


def softmax_with_sink(sc, sink):
    """Softmax over the logits and the sink, the sink's column dropped (gpt-oss)."""
    top = sc.max() if sink is None else max(sc.max(), sink)
    w = np.exp(sc - top)
    return w / (w.sum() + (0.0 if sink is None else np.exp(sink - top)))


# ------------------------------------------------------------------------------- paged problems


class PagedProblem:
    """A random paged-KV batch in emulator-visible memory.
    seqs: list of (L, M). Pages are shuffled; the block-table entries a window never reaches and
    the slots past each sequence's end hold garbage (out-of-range page numbers, NaN/Inf bits)."""

    def __init__(self, mem, rng, dtype, D, Hkv, G, B, seqs, window=0, pad_slot=0, pad_head=0, pad_page=0,
                 q_pad=0, o_pad=0, sparse_top=False, garbage_table=True, kv8=None, per_head=False, v_codes=None,
                 per_token=False):
        """kv8: None (K and V in dtype), "fp8" (e4m3fn bytes) or "int8", with scales k_scale / v_scale
        per tensor or per kv head (per_head), or per (page, slot, kv head) (per_token: contiguous
        [num_pages][B][Hkv] float32 tensors k_token_scale / v_token_scale, NaN where no key is);
        v_codes: every V row holds these bytes (8-bit only)."""
        self.dtype, self.D, self.Hkv, self.G, self.B, self.window = dtype, D, Hkv, G, B, window
        self.kv8, self.per_head = kv8, per_head
        esize = 1 if kv8 else 2
        if kv8:
            n = Hkv if per_head else 1
            self.k_scale = rng.uniform(0.05, 0.4, n).astype(np.float32) / (16.0 if kv8 == "int8" else 1.0)
            self.v_scale = rng.uniform(0.05, 0.4, n).astype(np.float32) / (16.0 if kv8 == "int8" else 1.0)
            if v_codes is not None:
                self.v_scale[:] = 1.0
            self.k_scale_buf = mem.from_array(self.k_scale, "k_scale")
            self.v_scale_buf = mem.from_array(self.v_scale, "v_scale")
        self.Hq = Hkv * G
        self.seqs_lm = seqs
        q_start, t = [], 0
        for L, M in seqs:
            q_start.append(t)
            t += M
        self.num_tokens = t
        self.seqs = [(L, M, q0) for (L, M), q0 in zip(seqs, q_start)]
        self.qsl = np.array(q_start + [t], dtype=np.int32)
        self.seq_lens = np.array([L for L, _ in seqs], dtype=np.int32)
        # cache layout: [page][kv head][slot][D] with optional padding in every stride
        self.k_slot_stride = D + pad_slot
        self.k_head_stride = B * self.k_slot_stride + pad_head
        self.k_page_stride = Hkv * self.k_head_stride + pad_page
        need = [-(-L // B) for L, _ in seqs]
        self.bt_stride = max(need + [1]) + 1
        used_pages = sum(need)
        self.num_pages = used_pages + 3
        # physical page numbers; sparse_top puts them near the top of a >2^31-element cache
        base_page = 0
        if sparse_top:
            # page offsets beyond 2^32 elements: the 64-bit offset paths are exercised
            base_page = (1 << 32) // self.k_page_stride + 7
            self.num_pages = base_page + used_pages + 3
        perm = rng.permutation(used_pages + 3)[:used_pages] + base_page
        self.bt = np.full((len(seqs), self.bt_stride), 0x7FFFFFF0 if garbage_table else 0, dtype=np.int32)
        kpos_rows, p = {}, 0
        self.first_page = []
        for s, (L, M) in enumerate(seqs):
            lo = max(0, L - M - window + 1) if window > 0 else 0
            first = lo // B
            self.first_page.append(first)
            for i in range(need[s]):
                page = int(perm[p])
                p += 1
                if i >= first or not garbage_table:
                    self.bt[s, i] = page
                kpos_rows[(s, i)] = page
        self.page_of = kpos_rows
        self.per_token = bool(kv8 and per_token)
        if self.per_token:
            self.k_token_scale = np.full((self.num_pages, B, Hkv), np.nan, dtype=np.float32)
            self.v_token_scale = np.full((self.num_pages, B, Hkv), np.nan, dtype=np.float32)
            unit = 16.0 if kv8 == "int8" else 1.0
            for (s, i), page in kpos_rows.items():
                for slot in range(B):
                    if i * B + slot < seqs[s][0]:
                        self.k_token_scale[page, slot] = rng.uniform(0.05, 0.4, Hkv) / unit
                        self.v_token_scale[page, slot] = rng.uniform(0.05, 0.4, Hkv) / unit
        elems = self.num_pages * self.k_page_stride
        nbytes = elems * esize
        if sparse_top:
            self.k_ptr = mem.sparse(nbytes, "k_cache (sparse)")
            self.v_ptr = mem.sparse(nbytes, "v_cache (sparse)")
        else:
            self.k_ptr = mem.buf(nbytes, "k_cache").ptr
            self.v_ptr = mem.buf(nbytes, "v_cache").ptr
        # fill only the used pages (a sparse cache stays untouched elsewhere)
        self.K = {}
        self.V = {}
        for s, (L, M) in enumerate(seqs):
            for g in range(Hkv):
                self.K[(s, g)] = np.zeros((L, D))
                self.V[(s, g)] = np.zeros((L, D))
        for (s, i), page in kpos_rows.items():
            L = seqs[s][0]
            for cache, store, ptr in (("k", self.K, self.k_ptr), ("v", self.V, self.v_ptr)):
                if kv8:
                    # garbage: NaN codes (fp8), the extreme -128 / 127 (int8: no NaN)
                    pv = np_view(ptr + page * self.k_page_stride, self.k_page_stride, np.uint8)
                    junk = [0x7F, 0xFF] if kv8 == "fp8" else [0x80, 0x7F]
                    pv[:] = rng.choice(np.array(junk, dtype=np.uint8), size=pv.shape)
                else:
                    pv = np_view(ptr + page * self.k_page_stride * 2, self.k_page_stride, np.uint16)
                    garbage = rng.choice(np.array([0x7C00, 0xFC00, 0x7E00, 0xFFFF, 0x7F80], dtype=np.uint16), size=pv.shape)
                    pv[:] = garbage
                for g in range(Hkv):
                    for slot in range(B):
                        j = i * B + slot
                        if j >= L:
                            continue
                        off = g * self.k_head_stride + slot * self.k_slot_stride
                        if kv8:
                            scale = (self.k_scale if cache == "k" else self.v_scale)[g if per_head else 0]
                            if self.per_token:
                                scale = (self.k_token_scale if cache == "k" else self.v_token_scale)[page, slot, g]
                            if cache == "v" and v_codes is not None:
                                codes = np.asarray(v_codes, dtype=np.uint8)
                            elif kv8 == "fp8":   # magnitudes 2^-3 .. 30, subnormals now and then
                                e = rng.integers(4, 12, D)
                                e[rng.random(D) < 0.05] = 0
                                codes = ((rng.integers(0, 2, D) << 7) | (e << 3) | rng.integers(0, 8, D)).astype(np.uint8)
                            else:
                                codes = rng.integers(-128, 128, D).astype(np.int8).view(np.uint8)
                            pv[off:off + D] = codes
                            store[(s, g)][j] = kv8_values(codes, kv8) * float(scale)
                            continue
                        x = rng.standard_normal(D).astype(np.float32)
                        if cache == "k":
                            x *= 1.5   # spread of the logits
                        bits = to_bits(x, dtype)
                        pv[off:off + D] = bits
                        store[(s, g)][j] = from_bits(bits, dtype)
        # Q / O with optional padding between heads
        self.q_head_stride = D + q_pad
        self.q_token_stride = self.Hq * self.q_head_stride + q_pad
        self.o_head_stride = D + o_pad
        self.o_token_stride = self.Hq * self.o_head_stride + o_pad
        qbits = to_bits(rng.standard_normal((max(t, 1), self.Hq, D)).astype(np.float32), dtype)
        qbuf = np.zeros(max(t, 1) * self.q_token_stride, dtype=np.uint16) + 0x7E00   # NaN in the padding
        for tok in range(t):
            for h in range(self.Hq):
                o = tok * self.q_token_stride + h * self.q_head_stride
                qbuf[o:o + D] = qbits[tok, h]
        self.qf = from_bits(qbits, dtype)[:t]
        self.q_buf = mem.from_array(qbuf, "q")
        self.o_elems = max(t, 1) * self.o_token_stride
        self.o_buf = mem.buf(self.o_elems * 2, "out")
        self.seq_lens_buf = mem.from_array(self.seq_lens, "seq_lens")
        self.qsl_buf = mem.from_array(self.qsl, "query_start_loc")
        self.bt_buf = mem.from_array(self.bt, "block_table")
        self.error_buf = mem.from_array(np.zeros(2, dtype=np.uint32), "device error record")
        if self.per_token:
            self.k_token_scale_buf = mem.from_array(self.k_token_scale, "k_scale (per token)")
            self.v_token_scale_buf = mem.from_array(self.v_token_scale, "v_scale (per token)")

    def error_record(self):
        """(code, sequence) of the device error record (device_error.h), (0, 0) when clear."""
        w = np_view(self.error_buf.ptr, 2, np.uint32)
        return int(w[0]), int(w[1])

    def poke_kv(self, cache, s, g, j, e, value):
        """Element e of key j (kv head g, sequence s) of K or V becomes value, for the kernel and
        the oracle alike (16-bit caches)."""
        page, slot = self.page_of[(s, j // self.B)], j % self.B
        off = page * self.k_page_stride + g * self.k_head_stride + slot * self.k_slot_stride + e
        ptr = self.k_ptr if cache == "k" else self.v_ptr
        bits = to_bits(np.array([value], np.float32), self.dtype)
        np_view(ptr, off + 1, np.uint16)[off] = bits[0]
        (self.K if cache == "k" else self.V)[(s, g)][j, e] = from_bits(bits, self.dtype)[0]

    def poke_q(self, tok, h, e, value):
        bits = to_bits(np.array([value], np.float32), self.dtype)
        off = tok * self.q_token_stride + h * self.q_head_stride + e
        np_view(self.q_buf.ptr, off + 1, np.uint16)[off] = bits[0]
        self.qf[tok, h, e] = from_bits(bits, self.dtype)[0]

    def poison_out(self):
        ctypes.memset(self.o_buf.ptr, 0xFF, self.o_elems * 2)

    def out_rows(self):
        o = np_view(self.o_buf.ptr, self.o_elems, np.uint16)
        rows = np.zeros((self.num_tokens, self.Hq, self.D), dtype=np.uint16)
        for tok in range(self.num_tokens):
            for h in range(self.Hq):
                a = tok * self.o_token_stride + h * self.o_head_stride
                rows[tok, h] = o[a:a + self.D]
        return rows

    def reference(self, scale, softcap=0.0, alibi=None, sinks=None):
        return oracle_paged(self.qf, lambda s, g: self.K[(s, g)], lambda s, g: self.V[(s, g)], self.seqs, self.G,
                            self.window, scale, softcap, alibi, sinks)


def compare(out_bits, ref, dtype, must_write, tol):
    """must_write: bool per token row (all heads). Returns (ok, err, message)."""
    msgs = []
    out = from_bits(out_bits, dtype)
    w = np.asarray(must_write, dtype=bool)
    untouched_bad = np.count_nonzero(out_bits[~w] != POISON)
    if untouched_bad:
        msgs.append(f"{untouched_bad} elements written in rows the kernel must not write")
    o, r = out[w], ref[w]
    if o.size == 0:
        return (not msgs), 0.0, "; ".join(msgs) or "nothing to compare"
    nan = ~np.isfinite(o)
    if nan.any():
        idx = np.argwhere(nan)[:3].tolist()
        msgs.append(f"{int(nan.sum())} non-finite outputs (first at {idx})")
    scale = max(np.abs(r).max(), 1e-30)
    diff = np.where(nan, np.inf, np.abs(o - r))
    err = float(diff.max() / scale)
    if err > tol:
        bad = np.argwhere(diff / scale > tol)
        msgs.append(f"{len(bad)} mismatches > {tol:g}, first " +
                    ", ".join(f"[{a},{b},{c}] got {o[a, b, c]:.5g} want {r[a, b, c]:.5g}" for a, b, c in bad[:3].tolist()))
    zero_rows = np.count_nonzero(np.all(o == 0, axis=-1) & ~np.all(r == 0, axis=-1))
    if zero_rows:
        msgs.append(f"{zero_rows} rows are all zero where the oracle's are not")
    return (not msgs), err, "; ".join(msgs)


TOL = {"f16": 4e-3, "bf16": 2.5e-2}

# ------------------------------------------------------------------------------ decode kernels


def decode_args(P, v, num_splits, fast_max_m, workspace_ptr, scale, feats=None):
    """feats: the model features' buffers and values (sinks, alibi: Mem buffers or None; softcap)."""
    feats = feats or {}
    G = P.G
    R = v["R"]
    rg = HOST.num_row_groups(G, fast_max_m, R)
    a = DecodeArgs()
    a.q, a.k_cache, a.v_cache, a.out = P.q_buf.ptr, P.k_ptr, P.v_ptr, P.o_buf.ptr
    a.seq_lens, a.query_start_loc, a.block_table = P.seq_lens_buf.ptr, P.qsl_buf.ptr, P.bt_buf.ptr
    a.workspace = workspace_ptr
    a.sinks = feats["sinks"].ptr if feats.get("sinks") else 0
    a.alibi_slopes = feats["alibi"].ptr if feats.get("alibi") else 0
    a.logit_softcap = feats.get("softcap", 0.0)
    if P.kv8:
        assert P.kv8 == v["kv8"], "an 8-bit problem runs on its format's kernel"
        a.k_scale, a.v_scale = P.k_scale_buf.ptr, P.v_scale_buf.ptr
        a.kv_scale_per_head = 1 if P.per_head else 0
    a.q_token_stride, a.q_head_stride = P.q_token_stride, P.q_head_stride
    a.o_token_stride, a.o_head_stride = P.o_token_stride, P.o_head_stride
    a.k_page_stride, a.k_head_stride, a.k_slot_stride = P.k_page_stride, P.k_head_stride, P.k_slot_stride
    a.v_page_stride, a.v_head_stride, a.v_slot_stride = P.k_page_stride, P.k_head_stride, P.k_slot_stride
    a.block_table_stride = P.bt_stride
    a.num_seqs, a.num_kv_heads, a.group_size, a.page_size = len(P.seqs), P.Hkv, G, P.B
    a.window, a.max_query_len, a.num_row_groups, a.num_splits = P.window, fast_max_m, rg, num_splits
    a.error = P.error_buf.ptr
    a.num_tokens, a.num_pages = P.num_tokens, P.num_pages
    a.max_seq_len = max([L for L, _, _ in P.seqs] + [0])
    a.query_len_bound = max([M for _, M, _ in P.seqs] + [0])
    a.scale_log2 = scale * LOG2E
    a.rows_per_group, a.head_size, a.min_split_tiles = R, v["D"], HOST.min_tiles()
    return a, rg


# ----------------------------------------------------------------------------- generic kernels


def generic_paged_args(P, scale):
    """r35a_generic_paged_args for P (8-bit: per-tensor, per-kv-head or per-token-head scales)."""
    a = GenericPagedArgs()
    a.q, a.k_cache, a.v_cache, a.out = P.q_buf.ptr, P.k_ptr, P.v_ptr, P.o_buf.ptr
    a.seq_lens, a.query_start_loc, a.block_table = P.seq_lens_buf.ptr, P.qsl_buf.ptr, P.bt_buf.ptr
    a.error = P.error_buf.ptr
    a.q_token_stride, a.q_head_stride = P.q_token_stride, P.q_head_stride
    a.o_token_stride, a.o_head_stride = P.o_token_stride, P.o_head_stride
    a.k_page_stride, a.k_head_stride, a.k_slot_stride = P.k_page_stride, P.k_head_stride, P.k_slot_stride
    a.v_page_stride, a.v_head_stride, a.v_slot_stride = P.k_page_stride, P.k_head_stride, P.k_slot_stride
    a.block_table_stride = P.bt_stride
    a.num_seqs, a.num_tokens, a.num_q_heads, a.num_kv_heads = len(P.seqs), P.num_tokens, P.Hq, P.Hkv
    a.head_size, a.page_size, a.num_pages = P.D, P.B, P.num_pages
    a.max_seq_len = max([L for L, _, _ in P.seqs] + [0])
    a.max_query_len = max([M for _, M, _ in P.seqs] + [0])
    a.window, a.min_query_len, a.softmax_scale = P.window, 0, scale
    if P.kv8:
        a.kv_dtype = 4 if P.kv8 == "fp8" else 5   # R35A_KV_FP8_E4M3 / R35A_KV_INT8
        if P.per_token:
            a.kv_scale_per_head = 2
            a.k_scale, a.v_scale = P.k_token_scale_buf.ptr, P.v_token_scale_buf.ptr
            a.k_scale_page_stride = a.v_scale_page_stride = P.B * P.Hkv
            a.k_scale_slot_stride = a.v_scale_slot_stride = P.Hkv
            a.k_scale_head_stride = a.v_scale_head_stride = 1
        else:
            a.kv_scale_per_head = 1 if P.per_head else 0
            a.k_scale, a.v_scale = P.k_scale_buf.ptr, P.v_scale_buf.ptr
    return a


def count_generic(G_, co, kv8="fp8", dt="f16", L=1024, group=4, head=128):
    """SIMD cycles per KV byte of the portable kernel (generic_paged_<dt>_dmax256) on one sequence of
    L keys, 8 kv heads x G, D 128, M 1, page 16, an 8-bit cache with per-kv-head and with
    per-token-head scales (the granularity the decode kernels decline). KV bytes are the cache's
    (the per-token scales' 8 bytes per key and kv head not counted), so the two rows compare the
    instructions per key."""
    rng = np.random.default_rng(11)
    rows = []
    for per_token in (False, True):
        mem = Mem(G_)
        try:
            P = PagedProblem(mem, rng, dt, head, Hkv=8, G=group, B=16, seqs=[(L, 1)], kv8=kv8, per_head=True,
                             per_token=per_token)
            a = generic_paged_args(P, 1 / math.sqrt(head))
            P.poison_out()
            st = G_.launch(co.kernels[f"generic_paged_{dt}_dmax256"], grid=(P.num_tokens, P.Hq, 1),
                           block=(128,), args=[bytes(a)], count=True)   # R35A_GENERIC_THREADS
            ok, err, msg = compare(P.out_rows(), P.reference(1 / math.sqrt(head)), dt, np.ones(1, dtype=bool), TOL[dt])
            c = st.by_class
            kv = L * 8 * head * 2
            simd = c["VALU"] + 4 * c["VALU_TRANS"] + 32 * c["WMMA"]
            rows.append((per_token, ok, err, msg, st, simd, kv))
        finally:
            mem.close()
    print(f"\nportable kernel generic_paged_{dt}_dmax256: 1 sequence, L={L}, Hkv=8, G={group}, D={head}, M=1, "
          f"page 16, {kv8} KV cache")
    for per_token, ok, err, msg, st, simd, kv in rows:
        print(f"  {'per token-head' if per_token else 'per kv head   '} scales: {'PASS' if ok else 'FAIL ' + msg} "
              f"err={err:.2e}; wave instructions {st.instructions / kv:.4f}, VMEM "
              f"{(st.by_class['VMEM_LOAD'] + st.by_class['VMEM_STORE']) / kv:.4f}, SIMD cycles {simd / kv:.4f} per KV byte")
    if len(rows) == 2:
        print(f"  per-token / per-head SIMD cycles: {rows[1][5] / rows[0][5]:.3f}")
    return all(r[1] for r in rows)


# ----------------------------------------------------------------------------- static summary


def static_summary(objs, dec, gen):
    rows = []
    names = {v["name"]: v for v in dec}
    names.update({v["name"]: v for v in gen})
    for src, (obj, _) in objs.items():
        notes = subprocess.run(["llvm-readelf-19", "--notes", obj], capture_output=True, text=True).stdout
        dis = subprocess.run(["llvm-objdump-19", "-d", obj], capture_output=True, text=True).stdout
        per_fn = {}
        cur = None
        for line in dis.splitlines():
            m = re.match(r"^[0-9a-f]+ <(\w+)>:", line)
            if m:
                cur = m.group(1)
                per_fn[cur] = [0, 0, 0]
            elif cur:
                if "v_wmma_" in line:
                    per_fn[cur][0] += 1
                if "global_load_b128" in line:
                    per_fn[cur][1] += 1
                if "scratch_" in line:
                    per_fn[cur][2] += 1
        for blk in re.split(r"\n  - \.", notes)[1:]:
            get = lambda k: (re.search(rf"\.{k}:\s+(\S+)", blk) or [None, "?"])[1]
            name = get("name")
            rows.append((name, int(get("vgpr_count")), int(get("sgpr_count")), int(get("group_segment_fixed_size")),
                         int(get("private_segment_fixed_size")), int(get("vgpr_spill_count")), per_fn.get(name, [0, 0, 0])))
    print(f"{'kernel':44s} {'VGPR':>5s} {'SGPR':>5s} {'LDS':>6s} {'scratch':>7s} {'spill':>5s} {'waves/SIMD':>10s} "
          f"{'wmma':>5s} {'b128':>5s}")
    for name, vg, sg, lds, priv, spill, (wm, b128, scr) in sorted(rows, key=lambda r: list(names).index(r[0]) if r[0] in names else 999):
        v = names.get(name, {})
        threads = 32 * v.get("KW", 1) * v.get("DW", 1) * v.get("RW", 1) if "KW" in v else 128
        # gfx1151 wave32: 1536 VGPRs per SIMD lane, allocated in granules of 24; a WGP's 4 SIMDs
        # share 128 KiB of LDS (workgroup processor mode)
        waves_vgpr = min(16, 1536 // (-(-max(vg, 1) // 24) * 24))
        nw = threads // 32
        wg_lds = (131072 // lds) if lds else 99
        waves_lds = min(16, wg_lds * nw // 4)
        print(f"{name:44s} {vg:5d} {sg:5d} {lds:6d} {priv:7d} {spill:5d} {min(waves_vgpr, waves_lds):10d} {wm:5d} {b128:5d}")
    return rows

# ------------------------------------------------------------------------------------- counting


def planner_variant(dec, dt, D, kv8, G, M, rows=None):
    """The decode variant the planner picks for G x M rows (src/plan_decode.c): the fewest row groups
    (each reads the KV once), the smaller R on a tie; rows: the variant with that R instead."""
    cands = [x for x in dec if x["arch"] == "gfx1151" and x["dtype"] == dt and x["D"] == D and x["kv8"] == kv8
             and (rows is None or x["R"] == rows)]
    if not cands:
        raise SystemExit(f"no gfx1151 decode variant for {dt}, D {D}, kv {kv8 or '16-bit'}" + (f", rows {rows}" if rows else ""))
    return min(cands, key=lambda x: (HOST.num_row_groups(G, M, x["R"]), x["R"]))


class OpProfile:
    """Executed wave instructions per program address, for --count-ops. gfx11emu counts by class
    only; this wraps two of its internals (the per-address decode hook and the class counter it
    installs) to count per address as well, so it depends on gfx11emu's private names and says so
    when they are gone. Install before the first launch: decoded instructions are cached."""

    WEIGHT = {"VALU": 1, "VALU_TRANS": 4, "WMMA": 32}   # the SIMD-cycle model of --count

    def __init__(self, G_):
        if not all(hasattr(G_, n) for n in ("_decode_at_fixed", "_counting", "_Runner", "emu_module")):
            raise SystemExit("--count-ops: this gfx11emu has no _decode_at_fixed / _counting / _Runner "
                             "(its internals changed); run --count without it")
        self.counts, self.info, cur = {}, {}, [0]
        decode, counting = G_._decode_at_fixed, G_._counting
        counts, info = self.counts, self.info

        def decode_at(pc, arch):
            cur[0] = pc
            res = decode(pc, arch)
            info.setdefault(pc, [None, repr(res[1])])[1] = repr(res[1])
            return res

        def counting_at(inner, st, cls, vmem=None):
            r, pc = counting(inner, st, cls, vmem), cur[0]
            info.setdefault(pc, [None, "?"])[0] = cls
            f = r.fxn

            def fxn(*b):
                counts[pc] = counts.get(pc, 0) + 1
                f(*b)
            return G_._Runner(r.globals, fxn)

        decode_at._gfx11emu = True
        G_._decode_at_fixed, G_._counting = decode_at, counting_at
        emu = G_.emu_module()
        if getattr(emu._decode_at, "_gfx11emu", False):   # fixes already installed: re-point them
            emu._decode_at = decode_at

    def take(self):
        """{address: (count, class, text)} since the last take, and reset."""
        out = {pc: (n,) + tuple(self.info.get(pc, (None, "?"))) for pc, n in self.counts.items()}
        self.counts.clear()
        return out

    @staticmethod
    def report(snap, top, kv_bytes):
        """The top opcodes by SIMD cycles in the main loop (addresses run at least half as often as
        the most run one) and outside it."""
        if not snap:
            return
        hot = max(n for n, _, _ in snap.values()) / 2
        for part, sel in (("main loop", lambda n: n >= hot), ("outside the loop", lambda n: n < hot)):
            by_op, total = {}, 0
            for n, cls, text in snap.values():
                w = OpProfile.WEIGHT.get(cls, 0)
                if not w or not sel(n):
                    continue
                t = text.strip()
                if t.startswith("VOPD"):   # dual issue: name both halves
                    op = "v_dual " + "+".join(x.lower() for x in re.findall(r"V_DUAL_([A-Z0-9_]+)", t)[:2])
                else:
                    op = (re.match(r"[A-Za-z_0-9]+", t) or [t[:24]])[0]
                by_op[op] = by_op.get(op, 0) + n * w
                total += n * w
            print(f"    {part}: {total:,} SIMD cycles = {total / kv_bytes:.4f} per KV byte; top opcodes:")
            for op, c in sorted(by_op.items(), key=lambda x: -x[1])[:top]:
                print(f"      {op:44s} {c:11,} {100 * c / max(total, 1):5.1f} %")


def count_default(G_, co, dec, co_path, kv8=None, dt="f16", rows=None, group=4, head=128, ops=0):
    """Instruction counts for the bench's default problem: 1 sequence, 8 kv heads x G = 4 (32 query
    heads), D = 128, f16, page 16, context 4096, M = 1 and M = 4, planner's split count; kv8: the
    same with an 8-bit cache ("fp8" or "int8") on its format's variant (per tensor scales); dt: the
    Q/O dtype (bf16: the same problem on the bf16 variant); group, head: another G, D; ops: print
    the decode launch's top `ops` opcodes by SIMD cycles (OpProfile)."""
    rng = np.random.default_rng(7)
    results = []
    prof = OpProfile(G_) if ops else None
    for M in (1, 4):
        v = planner_variant(dec, dt, head, kv8, group, M, rows)
        mem = Mem(G_)
        try:
            L, Hkv, G = 4096, 8, group
            P = PagedProblem(mem, rng, dt, head, Hkv=Hkv, G=G, B=16, seqs=[(L, M)], kv8=kv8)
            rg = HOST.num_row_groups(G, M, v["R"])
            splits = HOST.num_splits(1, Hkv, rg, L, M, 0, 40, resident_per_cu(v), HOST.min_tiles())   # the planner's, 40 CUs
            wsb = HOST.workspace_bytes(1, Hkv, rg, splits, v["R"], head)
            ws = mem.buf(wsb, "workspace") if wsb else None
            a, rg = decode_args(P, v, splits, M, ws.ptr if ws else 0, 1 / math.sqrt(head))
            P.poison_out()
            st = G_.launch(co.kernels[v["name"]], grid=HOST.grid(1, Hkv, rg, splits),
                           block=(HOST.block_threads(v["KW"], v["DW"], v["RW"]),), args=[bytes(a)], count=True)
            snap = prof.take() if prof else None   # the decode launch's alone
            if splits > 1:   # the split merge, launched after it (decode_args.h): counted with it
                sm = G_.launch(co.kernels[f"decode_merge_{dt}"], grid=HOST.merge_grid(1, Hkv, rg, v["R"], G, M, head, splits),
                               block=(HOST.merge_threads(),), args=[bytes(a)], count=True)
                st = type(st)(st.seconds + sm.seconds, st.instructions + sm.instructions,
                              {k: st.by_class[k] + sm.by_class[k] for k in st.by_class},
                              st.bytes_loaded + sm.bytes_loaded, st.bytes_stored + sm.bytes_stored)
            ref = P.reference(1 / math.sqrt(head))
            ok, err, msg = compare(P.out_rows(), ref, dt, np.ones(M, dtype=bool), TOL[dt])
            kv_bytes = L * Hkv * head * 2 * (1 if kv8 else 2)
            must_bytes = kv_bytes + 2 * M * Hkv * G * head * 2 + 4 * (-(-L // 16))
            est = G_.cost_model(st)
            results.append((M, v, splits, st, est, kv_bytes, must_bytes, ok, err, snap))
        finally:
            mem.close()
    print(f"\ndefault bench problem: 1 sequence, L=4096, Hkv=8, G={group}, D={head}, {dt}, page 16"
          + (f", {kv8} KV cache" if kv8 else "") + "; each M on the planner's variant")
    for M, v, splits, *_ in results:
        print(f"\n  M={M}: variant {v['name']}")
        b16_splits = HOST.num_splits(16, 8, HOST.num_row_groups(group, M, v["R"]), 8192, M, 0, 40, resident_per_cu(v),
                                     HOST.min_tiles())
        pipeline_summary(co_path, v, splits, 16 * 8 * b16_splits)
    print()
    for M, v, splits, st, est, kv, must, ok, err, snap in results:
        c = st.by_class
        simd = c["VALU"] + 4 * c["VALU_TRANS"] + 32 * c["WMMA"]
        print(f"  M={M}: {v['name']}, splits={splits}  {'PASS' if ok else 'FAIL'} err={err:.2e}  emulated in {st.seconds:.1f}s")
        print(f"    wave instructions {st.instructions:,}  = {st.instructions / kv:.4f} per KV byte")
        print("    by class: " + ", ".join(f"{k} {n:,}" for k, n in c.items() if n))
        print(f"    per KV byte: VALU {c['VALU'] / kv:.4f}, TRANS {c['VALU_TRANS'] / kv:.4f}, WMMA {c['WMMA'] / kv:.5f}, "
              f"VMEM {(c['VMEM_LOAD'] + c['VMEM_STORE']) / kv:.4f}, LDS {c['LDS'] / kv:.4f}, SALU {c['SALU'] / kv:.4f}")
        print(f"    SIMD cycles (VALU + 4 TRANS + 32 WMMA) {simd:,} = {simd / kv:.4f} per KV byte "
              f"(machine balance 80 x 2.9e9 / 215e9 = {80 * 2.9e9 / 215e9:.2f})")
        print(f"    bytes requested {st.bytes_loaded + st.bytes_stored:,} (loads {st.bytes_loaded:,}, stores {st.bytes_stored:,}); "
              f"must move {must:,}")
        print(f"    cost model: compute {est.compute_seconds * 1e6:.1f} us, memory {est.memory_seconds * 1e6:.1f} us "
              f"(requested bytes), bound {est.bound}; must-move bytes at 215 GB/s: {must / 215e9 * 1e6:.1f} us")
        if snap:
            print("    the decode launch by opcode (--count-ops; the split merge not included):")
            OpProfile.report(snap, ops, kv)

def pipeline_summary(obj, v, splits_b1, grid_b16_wgs):
    """KV loads in flight per wave, read from the code object (static, in program order): the
    s_waitcnt vmcnt(N) in front of each S^T product of the main loop lets N loads stay outstanding
    while it runs, and the one in front of the V^T stores (the P.V half) likewise. A tile is 3 NC
    global_load_b128 per lane (K: 2 per 16-wide chunk, both half-waves reading the same 256 unique
    bytes; V: 1 per chunk, 512 bytes) = 64 DS bytes of K and V; 8-bit: 2 NC loads (K: 1 b128 per
    chunk, V: 1 b64) = 32 DS bytes. Chip-wide bytes in flight = resident waves x bytes per wave
    during the products, for the 40-CU (20-WGP) Radeon 8060S."""
    dis = subprocess.run(["llvm-objdump-19", "-d", "--no-show-raw-insn", obj], capture_output=True, text=True).stdout
    insns, cur = [], None   # (address, text, branch target or None)
    for line in dis.splitlines():
        m = re.match(r"^[0-9a-f]+ <(\w+)>:", line)
        if m:
            cur = m.group(1)
            continue
        if cur != v["name"] or "//" not in line:
            continue
        text, comment = line.split("//", 1)
        a = re.match(r"\s*([0-9A-Fa-f]+):", comment)
        t = re.search(r"<\w+\+0x([0-9a-f]+)>", comment)
        if a:
            insns.append((int(a.group(1), 16), text.strip(), int(t.group(1), 16) if t else None))
    # the main loop: the backward branch whose span holds the most products (WMMA; v_dot2 on the
    # rows-4 layer, decode/rows4_gfx11.h, where VOPD pairs them as v_dual_dot2acc)
    def is_product(text):
        return text.startswith(("v_wmma", "v_dot2")) or (text.startswith("v_dual_") and "dot2" in text)
    base = insns[0][0] if insns else 0
    best, body = -1, []
    for i, (addr, text, tgt) in enumerate(insns):
        if text.startswith("s_") and "branch" in text and tgt is not None and base + tgt < addr:
            span = [x[1] for x in insns if base + tgt <= x[0] <= addr]
            n = sum(is_product(x) for x in span)
            if n > best:
                best, body = n, span
    DS = v["D"] // v["DW"]
    nc = DS // 16
    per_tile = (2 if v["kv8"] else 3) * nc
    # waits on the path that refills the block-table entries (a global_load_b32, once per 32 tiles;
    # the compiler drains vmcnt there) are counted apart from the steady state
    # Loads outstanding at an instruction: the last vmcnt(N) before it plus the loads issued since
    # (in-order counter), tracked from the first wait of the loop body; recorded at the first WMMA
    # after each wait (an S^T product) and at the first transposing V store (the P.V half).
    qk, pv, refill_waits, out, armed, refill = [], [], [], None, False, False
    for ins in body:
        m = re.match(r"s_waitcnt.*vmcnt\((\d+)\)", ins)
        if ins.startswith("global_load_b32"):
            refill = True
        if ins.startswith("global_load") and out is not None:
            out += 1
        elif m:
            out = int(m.group(1)) if out is None else min(out, int(m.group(1)))
            armed = True
        elif (is_product(ins) or ins.startswith("ds_store_b16")) and armed and out is not None:
            (refill_waits if refill else qk if is_product(ins) else pv).append(out)
            armed = False
            if is_product(ins):
                refill = False
    loop_qk, loop_pv = qk, pv
    tile_bytes = (32 if v["kv8"] else 64) * DS
    during = min(loop_qk + loop_pv) if (loop_qk or loop_pv) else 0
    peak = max(loop_qk + loop_pv) if (loop_qk or loop_pv) else 0
    wave_bytes = during / per_tile * tile_bytes
    nw = v["KW"] * v["DW"] * v["RW"]
    resident = 40 * 2 * v["waves"]
    waves_b1 = min(resident, splits_b1 * 8 * nw)
    waves_b16 = min(resident, grid_b16_wgs * nw)
    little = 215e9 * 2e-6
    print(f"\npipeline (static, {v['name']}, main loop): {per_tile} loads per tile and wave ({tile_bytes} B of K and V); "
          f"loads outstanding at the S^T products {sorted(set(loop_qk))}, at the V^T stores {sorted(set(loop_pv))}")
    print(f"  tiles in flight per wave: {during / per_tile:.2f} during the products (least), "
          f"{peak / per_tile:.2f} at the most, plus the tile being waited for; on the table-refill path "
          f"(1 step in 32): {sorted(set(refill_waits))} loads")
    for label, waves in (("batch 1, L=4096 (planner's grid)", waves_b1), ("batch 16, L=8192", waves_b16)):
        chip = waves * wave_bytes
        print(f"  chip-wide, {label}: {waves} resident waves x {wave_bytes / 1024:.1f} KiB = {chip / 1e6:.2f} MB in "
              f"flight = {chip / little:.1f}x Little's law (215 GB/s x 2 us = {little / 1e3:.0f} KB)")

# ------------------------------------------------------------------------------------------ main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--emu", default=os.environ.get("GFX11EMU_DIR", os.path.join(ROOT, "..", "shared", "gfx11emu")),
                    help="directory holding gfx11emu.py (default $GFX11EMU_DIR or ../shared/gfx11emu)")
    # one build directory per checkout: the cache below trusts modification times, so two worktrees must
    # never share one (another checkout's newer code object would pass as this one's)
    ap.add_argument("--build-dir", default=os.path.join(
        tempfile.gettempdir(), "r35a_emu_build_" + hashlib.sha1(ROOT.encode()).hexdigest()[:12]))
    ap.add_argument("--static", action="store_true", help="print the static summary and exit")
    ap.add_argument("--count", action="store_true", help="instruction counts for the default bench problem")
    ap.add_argument("--count-kv", choices=("fp8", "int8"), default=None,
                    help="with --count: the same problem with an 8-bit KV cache, on its format's variant")
    ap.add_argument("--count-group", type=int, default=4, help="with --count: G (query heads per kv head; default 4)")
    ap.add_argument("--count-head", type=int, default=128, help="with --count: the head size D (default 128)")
    ap.add_argument("--count-rows", type=int, default=None,
                    help="with --count: the variant with this many rows R for both M (default: the planner's)")
    ap.add_argument("--count-dtype", choices=("f16", "bf16"), default="f16",
                    help="with --count: the Q/O dtype (bf16: the bf16 variant)")
    ap.add_argument("--count-generic", action="store_true",
                    help="with --count: the portable kernel on an 8-bit cache (--count-kv, default fp8) with "
                         "per-kv-head and per-token-head scales instead of the decode kernels")
    ap.add_argument("--count-ops", type=int, default=0, metavar="N",
                    help="with --count: also the decode launch's top N opcodes by SIMD cycles, in the main "
                         "loop and outside it (counts per address through gfx11emu internals)")
    args = ap.parse_args()

    dec, gen = read_variants()
    objs = compile_kernels(args.build_dir)
    for src, (obj, dt) in objs.items():
        print(f"{src}.hip -> {obj}" + (f" (compiled in {dt:.1f}s)" if dt is not None else " (cached)"))
    check_struct_layouts(args.build_dir)
    global HOST
    HOST = HostFormulas(args.build_dir)
    if args.static:
        static_summary(objs, dec, gen)
        return 0

    sys.path.insert(0, os.path.abspath(args.emu))
    import gfx11emu as G_   # noqa: E402  (path given at run time)

    cos = {src: G_.load(obj) for src, (obj, _) in objs.items()}
    if args.count_generic:
        return 0 if count_generic(G_, cos["generic"], args.count_kv or "fp8", args.count_dtype) else 1
    count_default(G_, cos["decode"], dec, objs["decode"][0], args.count_kv, args.count_dtype, args.count_rows,
                  args.count_group, args.count_head, args.count_ops)
    return 0


if __name__ == "__main__":
    sys.exit(main())
