#!/usr/bin/env python3
"""emu_check.py - run every kernel of variants/variants.def on the gfx11 ISA emulator against a
float64 oracle.

Compiles kernels/*.hip for gfx1151 with clang, launches each kernel on fresh random inputs through
gfx11emu (the CPU emulator of ../shared/gfx11emu, imported from --emu / $GFX11EMU_DIR; it needs
$TINYGRAD_DIR), and compares with an independent float64 numpy oracle written here from the
semantics in include/rdna35attn.h. Outputs are poisoned before every run (0xFFFF, a NaN in f16 and
bf16); rows a kernel must not write must still hold the poison afterwards, NaN never passes, and
the metric is max|out - ref| / max|ref| over the rows it must write.

    tools/emu_check.py                        every kernel, all its cases, pass table
    tools/emu_check.py --only decode_f16_d128 kernels whose name contains any of the given strings
    tools/emu_check.py --seed 1234            replay a run
    tools/emu_check.py --static               VGPRs, LDS, scratch, WMMA / b128 presence per kernel
    tools/emu_check.py --count                instruction counts per KV byte + cost model for the
                                              default bench problem (D=128, G=4, M=1 and 4, L=4096)

Needs Python >= 3.11 with numpy (e.g. Debian's /usr/bin/python3), $TINYGRAD_DIR, clang-19 and a
host C compiler (for the header probes). The whole sweep takes 2-4 minutes on one core.
This script holds no emulator code: it only calls gfx11emu's public functions.
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
    """Compiles kernels/<src>.hip to <build_dir>/<src>.<arch>.hsaco when the sources changed;
    returns {src: (path, seconds spent compiling or None if cached)}."""
    os.makedirs(build_dir, exist_ok=True)
    deps = [os.path.join(ROOT, "variants", "variants.def")]
    for d in ("kernels/common",):
        deps += [os.path.join(ROOT, d, f) for f in os.listdir(os.path.join(ROOT, d))]
    out = {}
    for src in sources:
        hip = os.path.join(ROOT, "kernels", f"{src}.hip")
        if not os.path.exists(hip):
            continue
        obj = os.path.join(build_dir, f"{src}.{arch}.hsaco")
        newest = max(os.path.getmtime(p) for p in deps + [hip])
        if os.path.exists(obj) and os.path.getmtime(obj) >= newest:
            out[src] = (obj, None)
            continue
        cmd = [find_clang(), "-x", "hip", f"--offload-arch={arch}", "-nogpuinc", "-nogpulib", "--cuda-device-only",
               "--no-gpu-bundle-output", "-O3", "-std=c++17", "-Wall", "-Wextra", "-o", obj, hip]
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
        arch, name, dtype, head, rows, kw, dw, waves = [x.strip() for x in m.group(1).split(",")]
        if not arch.startswith("gfx"):
            continue   # another target's kernels (e.g. sm_90): not in the gfx11 code objects
        dec.append(dict(arch=arch, name=name, dtype=dtype, D=int(head), R=int(rows), KW=int(kw), DW=int(dw),
                        waves=int(waves)))
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
                ("block_table", ctypes.c_uint64), ("workspace", ctypes.c_uint64), ("error", ctypes.c_uint64),
                ("q_token_stride", ctypes.c_int64), ("q_head_stride", ctypes.c_int64),
                ("o_token_stride", ctypes.c_int64), ("o_head_stride", ctypes.c_int64),
                ("k_page_stride", ctypes.c_int64), ("k_head_stride", ctypes.c_int64), ("k_slot_stride", ctypes.c_int64),
                ("v_page_stride", ctypes.c_int64), ("v_head_stride", ctypes.c_int64), ("v_slot_stride", ctypes.c_int64),
                ("block_table_stride", ctypes.c_int64),
                ("num_seqs", ctypes.c_int32), ("num_kv_heads", ctypes.c_int32), ("group_size", ctypes.c_int32),
                ("page_size", ctypes.c_int32), ("window", ctypes.c_int32), ("max_query_len", ctypes.c_int32),
                ("num_row_groups", ctypes.c_int32), ("num_splits", ctypes.c_int32),
                ("num_tokens", ctypes.c_int32), ("num_pages", ctypes.c_int32), ("max_seq_len", ctypes.c_int32),
                ("query_len_bound", ctypes.c_int32), ("scale_log2", ctypes.c_float), ("reserved", ctypes.c_int32)]


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
                ("kv_dtype", ctypes.c_int32), ("kv_scale_per_head", ctypes.c_int32)]


class GenericVarlenArgs(ctypes.Structure):   # mirrors r35a_generic_varlen_args
    _fields_ = [("q", ctypes.c_uint64), ("k", ctypes.c_uint64), ("v", ctypes.c_uint64), ("out", ctypes.c_uint64),
                ("cu_seqlens", ctypes.c_uint64), ("sinks", ctypes.c_uint64), ("error", ctypes.c_uint64),
                ("q_token_stride", ctypes.c_int64), ("q_head_stride", ctypes.c_int64),
                ("k_token_stride", ctypes.c_int64), ("k_head_stride", ctypes.c_int64),
                ("v_token_stride", ctypes.c_int64), ("v_head_stride", ctypes.c_int64),
                ("o_token_stride", ctypes.c_int64), ("o_head_stride", ctypes.c_int64),
                ("num_segments", ctypes.c_int32), ("num_tokens", ctypes.c_int32), ("num_q_heads", ctypes.c_int32),
                ("num_kv_heads", ctypes.c_int32), ("head_size", ctypes.c_int32), ("causal", ctypes.c_int32),
                ("max_seqlen", ctypes.c_int32), ("softmax_scale", ctypes.c_float), ("logit_softcap", ctypes.c_float)]


C_STRUCTS = {"r35a_decode_args": DecodeArgs, "r35a_generic_paged_args": GenericPagedArgs,
             "r35a_generic_varlen_args": GenericVarlenArgs}


def check_struct_layouts(build_dir):
    """The ctypes mirrors above must match kernels/common/decode_args.h and generic_args.h: compile a C11 probe that
    prints sizeof/offsetof of every field and compare (also proves the header is valid C11)."""
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "decode_args.h"\n#include "generic_args.h"', 'int main(void) {']
    for cname, st in C_STRUCTS.items():
        lines.append(f'  printf("{cname} size %zu\\n", sizeof({cname}));')
        for f, _ in st._fields_:
            lines.append(f'  printf("{cname} {f} %zu\\n", offsetof({cname}, {f}));')
    lines += ["  return 0;", "}"]
    src = os.path.join(build_dir, "layout_probe.c")
    exe = os.path.join(build_dir, "layout_probe")
    open(src, "w").write("\n".join(lines) + "\n")
    cc = shutil.which("cc") or shutil.which("gcc") or find_clang()
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(ROOT, "kernels", "common"),
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
            "r35a_decode_num_splits": (ctypes.c_int32, [ctypes.c_int32] * 8),
            "r35a_decode_seq_splits": (ctypes.c_int32, [ctypes.c_int32, ctypes.c_int64]),
            "r35a_decode_resident_wgs_per_cu": (ctypes.c_int32, [ctypes.c_int32] * 3),
            "r35a_decode_workspace_bytes": (ctypes.c_int64, [ctypes.c_int32] * 6),
            "r35a_decode_counters_bytes": (ctypes.c_int64, [ctypes.c_int32] * 3),
            "r35a_decode_block_threads": (ctypes.c_uint32, [ctypes.c_int32] * 2),
        }
        src = os.path.join(build_dir, "host_formulas.c")
        lib = os.path.join(build_dir, "libhost_formulas.so")
        lines = ['#include "decode_args.h"\n#include "generic_args.h"']
        for name, (res, args) in fns.items():
            ctype = {ctypes.c_int32: "int32_t", ctypes.c_int64: "int64_t", ctypes.c_uint32: "uint32_t"}
            params = ", ".join(f"{ctype[a]} a{i}" for i, a in enumerate(args))
            call = ", ".join(f"a{i}" for i in range(len(args)))
            lines.append(f"{ctype[res]} x_{name}({params}) {{ return {name}({call}); }}")
        lines.append("void x_r35a_decode_grid(int32_t a, int32_t b, int32_t c, int32_t d, uint32_t g[3]) "
                     "{ r35a_decode_grid(a, b, c, d, g); }")
        open(src, "w").write("\n".join(lines) + "\n")
        cc = shutil.which("cc") or shutil.which("gcc") or find_clang()
        subprocess.run([cc, "-std=c11", "-O2", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
                        "-I", os.path.join(ROOT, "kernels", "common"), "-o", lib, src], check=True)
        self.lib = ctypes.CDLL(lib)
        for name, (res, args) in fns.items():
            f = getattr(self.lib, "x_" + name)
            f.restype, f.argtypes = res, args
            setattr(self, name.replace("r35a_decode_", ""), f)

    def grid(self, nseq, hkv, rg, splits):
        g = (ctypes.c_uint32 * 3)()
        self.lib.x_r35a_decode_grid(nseq, hkv, rg, splits, g)
        return tuple(g)


HOST = None   # HostFormulas, set in main()
SIMDS_PER_CU = 2   # gfx11 (variants/archs.tsv simds_per_cu)


def resident_per_cu(v):
    """Workgroups of variant v a gfx11 CU holds at once (what the planner passes for gfx1151)."""
    return HOST.resident_wgs_per_cu(SIMDS_PER_CU, v["waves"], v["KW"] * v["DW"])

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


def oracle_varlen(q, k, v, cu, G, causal, scale, softcap=0.0, sinks=None):
    T, Hq, D = q.shape
    out = np.zeros((T, Hq, D))
    for s in range(len(cu) - 1):
        a, b = cu[s], cu[s + 1]
        for h in range(Hq):
            g = h // G
            K, V = k[a:b, g], v[a:b, g]
            for i in range(b - a):
                n = i + 1 if causal else b - a
                sc = scale * (K[:n] @ q[a + i, h])
                if softcap > 0:
                    sc = softcap * np.tanh(sc / softcap)
                out[a + i, h] = softmax_with_sink(sc, None if sinks is None else sinks[h]) @ V[:n]
    return out

# ------------------------------------------------------------------------------- paged problems


class PagedProblem:
    """A random paged-KV batch in emulator-visible memory.
    seqs: list of (L, M). Pages are shuffled; the block-table entries a window never reaches and
    the slots past each sequence's end hold garbage (out-of-range page numbers, NaN/Inf bits)."""

    def __init__(self, mem, rng, dtype, D, Hkv, G, B, seqs, window=0, pad_slot=0, pad_head=0, pad_page=0,
                 q_pad=0, o_pad=0, sparse_top=False, garbage_table=True, kv8=None, per_head=False, v_codes=None):
        """kv8: None (K and V in dtype), "fp8" (e4m3fn bytes) or "int8", with scales k_scale / v_scale
        per tensor or per kv head (per_head); v_codes: every V row holds these bytes (8-bit only)."""
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
        kview_pages = {}
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


def decode_args(P, v, num_splits, fast_max_m, workspace_ptr, scale):
    G = P.G
    R = v["R"]
    rg = HOST.num_row_groups(G, fast_max_m, R)
    a = DecodeArgs()
    a.q, a.k_cache, a.v_cache, a.out = P.q_buf.ptr, P.k_ptr, P.v_ptr, P.o_buf.ptr
    a.seq_lens, a.query_start_loc, a.block_table = P.seq_lens_buf.ptr, P.qsl_buf.ptr, P.bt_buf.ptr
    a.workspace = workspace_ptr
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
    return a, rg




def decode_cases(v):
    """(label, problem kwargs, run kwargs) for a decode variant; sized from its tile so every case
    has partial tiles, partial pages and the row packing the variant serves."""
    D, R = v["D"], v["R"]
    G = 4 if R == 16 else 8
    Mfull = R // G             # G x Mfull = R rows: the tile exactly full
    small = D >= 256           # keep emulator time down for the wide heads
    L1 = 150 if small else 300
    cases = [
        ("partial_page", dict(Hkv=2, G=G, B=32, seqs=[(L1 + 7, Mfull), (45, 1), (0, 0), (17, min(2, Mfull))]),
         dict(splits=1)),
        ("split_kv", dict(Hkv=1 if small else 2, G=G, B=16, seqs=[(L1 + 61, Mfull), (33, 1), (200, Mfull - 1 or 1)]),
         dict(splits=5, repeat=2)),
        ("window", dict(Hkv=1, G=G, B=(528 if v["dtype"] == "f16" else 1056) if D <= 128 else 32, seqs=[(1156 if D <= 128 else L1 + 290, Mfull), (90, 1)],
                        window=70,
                        pad_slot=8, pad_head=16, q_pad=8, o_pad=4),
         dict(splits=3, bounds=True)),
        ("row_groups_planned", dict(Hkv=1, G=G * 2, B=16, seqs=[(700 if D <= 128 else 520, Mfull), (40, Mfull)]),
         dict(splits="plan")),
        # 8 planned splits; each sequence uses what its own length allows (decode_args.h
        # r35a_decode_seq_splits: 5, 1 (direct write, no counter), none, 2): the device-side split
        # count, the merge of several records by the last workgroup, counters back at 0 (run twice)
        ("adaptive_splits", dict(Hkv=1 if small else 2, G=G, B=16,
                                 seqs=[(1317 if not small else 700, Mfull), (20, 1), (0, 0), (530, 1)]),
         dict(splits=8, repeat=2)),
        ("mixed_batch", dict(Hkv=1, G=2, B=32, seqs=[(120, 3), (64, 9), (30, 1)]), dict(splits=2, fast_max_m=8)),
        # M = 8 (the largest speculative step), L == M (the first query sees one key), page 784
        ("m8_l_eq_m", dict(Hkv=1, G=R // 8, B=784 if D <= 128 else 16, seqs=[(L1 + 33, 8), (8, 8), (70, 5)]),
         dict(splits=3)),
    ]
    if D == 128:
        cases.append(("big_offsets", dict(Hkv=2, G=G, B=544, seqs=[(130, Mfull), (70, 1)], sparse_top=True),
                      dict(splits=2, bounds=True)))
    # issue 16: bad device metadata (bounds checked; the bad sequence's rows NaN, the record set, the
    # other rows right) and non-finite values (the reference's rules, as the oracle computes them)
    bad = dict(Hkv=1, G=G, B=16, seqs=[(L1 + 7, Mfull), (45, 1), (0, 0)])
    cases += [
        ("bad_page_high", bad, dict(splits=1, bounds=True, fault=("page", 0, 1 << 30))),
        ("bad_page_neg_split", bad, dict(splits=4, bounds=True, fault=("page", 0, -7))),
        ("bad_seq_len", bad, dict(splits=2, bounds=True, fault=("seq_len", 1, 1 << 28))),
        ("bad_seq_len_no_rows", bad, dict(splits=1, bounds=True, fault=("seq_len", 2, -5))),
        ("bad_m_above_l", bad, dict(splits=1, bounds=True, fault=("seq_len", 0, Mfull - 1))),
        ("bad_query_len", bad, dict(splits=1, bounds=True, query_len_bound=Mfull - 1)),
        ("bad_qsl", bad, dict(splits=1, bounds=True, fault=("qsl", 1, -3))),
        ("nan_k", bad, dict(splits=2, bounds=True, nonfinite=("k", 0, 40, 3, float("nan")))),
        ("inf_logit", bad, dict(splits=1, bounds=True, nonfinite=("k", 0, 9, 1, float("inf"), 1.0))),
        ("neg_inf_logit", bad, dict(splits=1, bounds=True, nonfinite=("k", 0, 0, 2, float("-inf"), 1.0))),
        ("nan_v", bad, dict(splits=1, bounds=True, nonfinite=("v", 0, L1 + 7 - 1, 4, float("nan")))),
        # a NaN in V of a key before the window, in the window's first tile: no row reaches it
        ("nan_v_before_window", dict(Hkv=1, G=G, B=16, seqs=[(300, Mfull)], window=70),
         dict(splits=1, bounds=True, nonfinite=("v", 0, 300 - Mfull - 70 - 1, 5, float("nan")))),
    ]
    return cases


def run_decode_case(G_, co, v, label, pk, rk, rng):
    mem = Mem(G_)
    try:
        fast_max = rk.get("fast_max_m", max(M for _, M in pk["seqs"]))
        P = PagedProblem(mem, rng, v["dtype"], v["D"], **pk)
        scale = 1.0 / math.sqrt(v["D"])
        rg = HOST.num_row_groups(P.G, fast_max, v["R"])
        splits = rk["splits"]
        if splits == "plan":   # what the library's planner picks for a 40-CU gfx1151
            splits = HOST.num_splits(len(P.seqs), P.Hkv, rg, max(L for L, _, _ in P.seqs), fast_max, P.window, 40,
                                     resident_per_cu(v))
        wsb = HOST.workspace_bytes(len(P.seqs), P.Hkv, rg, splits, v["R"], v["D"])
        ws = mem.buf(wsb, "workspace") if wsb else None   # zeroed once (the documented contract)
        nonfinite = rk.get("nonfinite")
        relax = None
        if nonfinite:   # kv head 0 (every variant's problems have one)
            what, s_, j, e, value = nonfinite[:5]
            P.poke_kv(what, s_, 0, j, e, value)
            if len(nonfinite) > 5:
                L, M, q0 = P.seqs[s_]
                for tok in range(q0, q0 + M):
                    for h in range(P.G):
                        P.poke_q(tok, h, e, nonfinite[5])
            L, M, q0 = P.seqs[s_]
            if what == "v" and j >= (max(0, L - M - P.window + 1) if P.window else 0):
                # a key some row sees: the sequence's other rows of the kv head share its tile (decode.hip)
                relax = (q0, M, 0, P.G, e)
        ref = P.reference(scale)
        must = np.zeros(P.num_tokens, dtype=bool)
        for L, M, q0 in P.seqs:
            if 1 <= M <= fast_max:
                must[q0:q0 + M] = True
        k = co.kernels[v["name"]]
        worst, msgs, secs = 0.0, [], 0.0
        for rep in range(rk.get("repeat", 1)):
            P.poison_out()
            a, rg = decode_args(P, v, splits, fast_max, ws.ptr if ws else 0, scale)
            bad_rows, expect_codes, expect_seqs, qsl_fault = np.zeros(P.num_tokens, dtype=bool), set(), set(), False
            if "query_len_bound" in rk:
                a.query_len_bound = rk["query_len_bound"]
                for s_, (L, M, q0) in enumerate(P.seqs):
                    if M > a.query_len_bound:
                        bad_rows[q0:q0 + M] = True
                        expect_codes.add(DEVERR["query_len"])
                        expect_seqs.add(s_)
            fault = rk.get("fault")
            if fault:
                kind, s_, value = fault
                L, M, q0 = P.seqs[s_]
                if kind == "page":
                    np_view(P.bt_buf.ptr, P.bt.size, np.int32)[s_ * P.bt_stride + (L - 1) // P.B] = value
                    expect_codes.add(DEVERR["page"])
                elif kind == "seq_len":
                    np_view(P.seq_lens_buf.ptr, len(P.seqs), np.int32)[s_] = value
                    expect_codes.add(DEVERR["m_above_l"] if 0 <= value < M else DEVERR["seq_len"])
                else:   # query_start_loc: rows unspecified, the record and the bounds checked
                    np_view(P.qsl_buf.ptr, len(P.seqs) + 1, np.int32)[s_] = value
                    expect_codes |= {DEVERR["qsl"], DEVERR["query_len"], DEVERR["m_above_l"]}
                    expect_seqs.add(s_ - 1)
                    qsl_fault = True
                expect_seqs.add(s_)
                if not qsl_fault:
                    bad_rows[q0:q0 + M] = True
            np_view(P.error_buf.ptr, 2, np.uint32)[:] = 0
            grid = HOST.grid(len(P.seqs), P.Hkv, rg, splits)
            st = G_.launch(k, grid=grid, block=(HOST.block_threads(v["KW"], v["DW"]),), args=[bytes(a)],
                           check_bounds=True if rk.get("bounds") else None)
            secs += st.seconds
            out, record = P.out_rows(), P.error_record()
            if expect_codes:
                bmsgs = check_bad_rows(out, bad_rows, record, expect_codes, expect_seqs, v["dtype"])
                if qsl_fault:
                    out[:] = POISON
                    must = np.zeros_like(must)
                ok, err, msg = compare(out, ref, v["dtype"], must & ~bad_rows, TOL[v["dtype"]])
                msg = "; ".join(bmsgs + ([msg] if msg and not ok else [])) or f"record {record}, bad rows NaN"
                ok = not bmsgs and ok
            elif record != (0, 0):
                ok, err, msg = False, float("nan"), f"valid metadata, but the record holds {record}"
            elif nonfinite:
                if relax:   # those elements may be non-finite without the oracle's being so
                    q0r, Mr, g0, G_rows, er = relax
                    loose = ~np.isfinite(from_bits(out[q0r:q0r + Mr, g0 * G_rows:(g0 + 1) * G_rows, er], v["dtype"]))
                    ref = ref.copy()
                    ref[q0r:q0r + Mr, g0 * G_rows:(g0 + 1) * G_rows, er][loose] = np.nan
                ok, err, msg = compare_nonfinite(out, ref, v["dtype"], must, TOL[v["dtype"]],
                                                 allow_finite=nonfinite[4] == float("-inf") or len(nonfinite) == 5
                                                 and label.endswith("before_window"))
            else:
                ok, err, msg = compare(out, ref, v["dtype"], must, TOL[v["dtype"]])
            worst = max(worst, err)
            if ws is not None:
                cnt = np_view(ws.ptr, len(P.seqs) * P.Hkv * rg, np.uint32)
                if np.any(cnt != 0):
                    ok = False
                    msg = (msg + "; " if msg else "") + f"workspace counters not reset: {cnt[cnt != 0][:4]}"
            if not ok:
                msgs.append(f"run {rep}: {msg}")
        return not msgs, worst, "; ".join(msgs) or (f"planned splits {splits}" if rk["splits"] == "plan" else ""), secs
    finally:
        mem.close()

# ----------------------------------------------------------------------------- generic kernels


def generic_paged_cases(v):
    dmax = v["dmax"]
    # a small odd size, one between, and the kernel's dmax itself
    Ds = {256: (40, 96, 256), 1024: (264, 520, 1024)}.get(dmax, (dmax // 4 + 8, dmax // 2 + 8, dmax))
    cases = []
    for n, D in enumerate(Ds):
        cases.append((f"decode_softcap_d{D}", dict(D=D, Hkv=2, G=2, B=16, seqs=[(37, 1), (70, 2), (0, 0)]),
                      dict(softcap=20.0)))
        cases.append((f"prefill_alibi_d{D}", dict(D=D, Hkv=1, G=3, B=5 + n, seqs=[(40, 24), (19, 19), (9, 2)]),
                      dict(alibi=True)))
        cases.append((f"window_mixed_d{D}", dict(D=D, Hkv=2, G=1, B=13, seqs=[(90, 12), (50, 3), (21, 1)], window=17,
                                                 pad_slot=3, q_pad=5, o_pad=2),
                      dict(min_query_len=2, softcap=5.0, alibi=True, bounds=True)))
    # sinks and 8-bit KV caches (the kernel's run-time KV dtype), on the largest head size and one
    # below it: per tensor / per kv head, with windows, GQA, M 1-8 and longer, partial pages
    D, Dlo = Ds[-1], Ds[0]
    cases.append((f"sinks_window_d{Dlo}", dict(D=Dlo, Hkv=2, G=3, B=16, seqs=[(130, 1), (40, 8), (0, 0), (29, 17)],
                                                window=128),
                  dict(sinks=True, bounds=True)))
    cases.append((f"fp8_tensor_d{D}", dict(D=D, Hkv=2, G=2, B=16, seqs=[(37, 1), (70, 4), (0, 0)], kv8="fp8"),
                  dict(bounds=True)))
    cases.append((f"int8_head_sinks_d{Dlo}", dict(D=Dlo, Hkv=3, G=2, B=7, seqs=[(45, 2), (18, 18), (9, 1)], window=20,
                                                   kv8="int8", per_head=True, pad_slot=5),
                  dict(sinks=True, softcap=10.0, bounds=True)))
    cases.append((f"fp8_head_sinks_alibi_d{Dlo}", dict(D=Dlo, Hkv=2, G=4, B=32, seqs=[(100, 8), (33, 3)], kv8="fp8",
                                                        per_head=True),
                  dict(sinks=True, alibi=True, min_query_len=3)))
    return cases


# Device error codes (kernels/common/device_error.h).
DEVERR = {"page": 1, "seq_len": 2, "query_len": 3, "m_above_l": 4, "qsl": 5, "cu": 6, "seg_len": 7}


def generic_bad_data_cases(v):
    """Bad device metadata and non-finite values (issue 16): the kernel reads nothing outside the
    buffers (check_bounds on), writes the bad sequence's rows as NaN and the record (code, sequence),
    leaves every other row right; NaN / Inf inputs follow the reference's rules (the oracle's)."""
    D = {256: 40, 1024: 264}.get(v["dmax"], v["dmax"] // 4 + 8)
    seqs = [(37, 1), (70, 3), (21, 2), (0, 0)]
    base = dict(D=D, Hkv=2, G=2, B=16, seqs=seqs)
    if v["op"] != "paged":
        segs = dict(D=D, Hq=4, Hkv=2, segs=[19, 0, 11, 6])
        return [(f"bad_cu_order_d{D}", segs, dict(causal=0, bounds=True, fault=("cu_order", 2))),
                (f"bad_cu_end_d{D}", segs, dict(causal=1, bounds=True, fault=("cu_end", 4))),
                (f"bad_seg_len_d{D}", segs, dict(causal=0, bounds=True, max_seqlen=12)),
                (f"nan_k_d{D}", segs, dict(causal=0, bounds=True, nonfinite=("k", 0, 3, 1, float("nan")))),
                (f"inf_v_d{D}", segs, dict(causal=1, bounds=True, nonfinite=("v", 2, 4, 2, float("inf"))))]
    return [
        (f"bad_page_high_d{D}", base, dict(bounds=True, fault=("page", 1, 1 << 30))),
        (f"bad_page_neg_d{D}", base, dict(bounds=True, fault=("page", 0, -1))),
        (f"bad_page_minq_d{D}", base, dict(bounds=True, min_query_len=2, fault=("page", 1, 1 << 20))),
        (f"bad_seq_len_d{D}", base, dict(bounds=True, fault=("seq_len", 2, 1 << 28))),
        (f"bad_seq_len_neg_d{D}", base, dict(bounds=True, fault=("seq_len", 3, -5))),
        (f"bad_m_above_l_d{D}", base, dict(bounds=True, fault=("seq_len", 1, 2))),
        (f"bad_query_len_d{D}", base, dict(bounds=True, max_query_len=2)),
        (f"bad_qsl_d{D}", base, dict(bounds=True, fault=("qsl", 2, 0))),
        (f"nan_k_d{D}", base, dict(bounds=True, nonfinite=("k", 1, 50, 3, float("nan")))),
        # the only key of a row NaN (a hardware max would drop it and write zeros)
        (f"nan_k_only_key_d{D}", dict(base, seqs=[(1, 1), (70, 3)]), dict(bounds=True, nonfinite=("k", 0, 0, 2, float("nan")))),
        # q > 0 at that element: logits of +inf (row NaN) and -inf (no weight), the latter as the first
        # key of a wave (no -inf - -inf rescale)
        (f"inf_logit_d{D}", base, dict(bounds=True, nonfinite=("k", 1, 67, 0, float("inf"), 1.0))),
        (f"neg_inf_logit_d{D}", base, dict(bounds=True, nonfinite=("k", 1, 1, 2, float("-inf"), 1.0))),
        (f"inf_k_d{D}", base, dict(bounds=True, nonfinite=("k", 0, 36, 2, float("-inf")))),
        (f"nan_v_d{D}", base, dict(bounds=True, nonfinite=("v", 1, 68, 5, float("nan")))),
        (f"inf_v_d{D}", base, dict(bounds=True, nonfinite=("v", 2, 20, 1, float("inf")))),
        (f"nan_q_d{D}", base, dict(bounds=True, nonfinite=("q", 2, 1, 0, float("nan")))),
    ]


def compare_nonfinite(out_bits, ref, dtype, must_write, tol, allow_finite=False):
    """compare() for outputs that may hold NaN / Inf: the non-finite elements must be exactly the
    oracle's, the finite ones within tol."""
    out = from_bits(out_bits, dtype)
    w = np.asarray(must_write, dtype=bool)
    o, r = out[w], ref[w]
    msgs = []
    if np.count_nonzero(out_bits[~w] != POISON):
        msgs.append("elements written in rows the kernel must not write")
    nf_o, nf_r = ~np.isfinite(o), ~np.isfinite(r)
    if (nf_o != nf_r).any():
        idx = np.argwhere(nf_o != nf_r)[:3].tolist()
        msgs.append(f"{int((nf_o != nf_r).sum())} elements finite in one and not the other (first at {idx}: "
                    f"got {[o[tuple(i)] for i in idx]}, want {[r[tuple(i)] for i in idx]})")
    fin = ~nf_o & ~nf_r
    scale = max(np.abs(r[fin]).max() if fin.any() else 0.0, 1e-30)
    err = float(np.abs(o[fin] - r[fin]).max() / scale) if fin.any() else 0.0
    if err > tol:
        msgs.append(f"finite mismatch {err:.2e} > {tol:g}")
    if not nf_r.any() and not np.isinf(ref).any() and not allow_finite:
        msgs.append("the oracle has no non-finite element: the case tests nothing")
    return (not msgs), err, "; ".join(msgs) or f"{int(nf_r.sum())} non-finite elements, as the oracle"


def check_bad_rows(out_bits, bad_rows, record, expect_codes, expect_seqs, dtype):
    """The rows of the bad sequence: every element a NaN the kernel wrote (not the poison); the
    record names one of the expected codes and sequences. Marks the rows as unwritten for the
    comparison of the rest. Returns messages."""
    msgs = []
    rows = out_bits[bad_rows]
    unwritten = int(np.count_nonzero(rows == POISON))
    not_nan = int(np.count_nonzero(~np.isnan(from_bits(rows, dtype)))) if rows.size else 0
    if unwritten or not_nan:
        msgs.append(f"bad sequence's rows: {unwritten} elements unwritten, {not_nan} not NaN")
    code, seq = record
    if code not in expect_codes or seq not in expect_seqs:
        msgs.append(f"record ({code}, {seq}), expected a code of {sorted(expect_codes)} for sequence "
                    f"{sorted(expect_seqs)}")
    out_bits[bad_rows] = POISON
    return msgs


def run_fp8_codes_case(G_, co, v, rng):
    """Every e4m3fn byte through the kernel's dequantization: one key (its weight is exactly 1),
    V = the 256 codes, v_scale 1: out[e] must be the code's value exactly (all fit f16 and bf16 is
    not asked for: the f16 kernel only), NaN for S.1111.111."""
    mem = Mem(G_)
    try:
        P = PagedProblem(mem, rng, v["dtype"], 256, Hkv=1, G=1, B=16, seqs=[(1, 1)], kv8="fp8",
                         v_codes=np.arange(256, dtype=np.uint8))
        a = generic_paged_args(P, 256, 1.0 / 16, 0.0, None, None, 0)
        P.poison_out()
        st = G_.launch(co.kernels[v["name"]], grid=(1, 1), block=(128,), args=[bytes(a)], check_bounds=True)
        got = from_bits(P.out_rows()[0, 0], v["dtype"])
        want = fp8_e4m3_values(np.arange(256))
        bad = [c for c in range(256) if not (np.isnan(want[c]) and np.isnan(got[c])) and got[c] != want[c]]
        msg = "; ".join(f"code 0x{c:02x}: got {got[c]!r} want {want[c]!r}" for c in bad[:4])
        return not bad, float(len(bad)), msg or "all 256 codes exact", st.seconds
    finally:
        mem.close()


def generic_paged_args(P, D, scale, softcap, alibi_buf, sinks_buf, minq):
    a = GenericPagedArgs()
    a.q, a.k_cache, a.v_cache, a.out = P.q_buf.ptr, P.k_ptr, P.v_ptr, P.o_buf.ptr
    a.seq_lens, a.query_start_loc, a.block_table = P.seq_lens_buf.ptr, P.qsl_buf.ptr, P.bt_buf.ptr
    a.error = P.error_buf.ptr
    a.num_pages = P.num_pages
    a.max_seq_len = max([L for L, _, _ in P.seqs] + [0])
    a.max_query_len = max([M for _, M, _ in P.seqs] + [0])
    a.alibi_slopes = alibi_buf.ptr if alibi_buf else 0
    a.sinks = sinks_buf.ptr if sinks_buf else 0
    if P.kv8:
        a.kv_dtype = 4 if P.kv8 == "fp8" else 5   # R35A_GENERIC_KV_FP8_E4M3 / _INT8
        a.kv_scale_per_head = 1 if P.per_head else 0
        a.k_scale, a.v_scale = P.k_scale_buf.ptr, P.v_scale_buf.ptr
    a.q_token_stride, a.q_head_stride = P.q_token_stride, P.q_head_stride
    a.o_token_stride, a.o_head_stride = P.o_token_stride, P.o_head_stride
    a.k_page_stride, a.k_head_stride, a.k_slot_stride = P.k_page_stride, P.k_head_stride, P.k_slot_stride
    a.v_page_stride, a.v_head_stride, a.v_slot_stride = P.k_page_stride, P.k_head_stride, P.k_slot_stride
    a.block_table_stride = P.bt_stride
    a.num_seqs, a.num_tokens, a.num_q_heads, a.num_kv_heads = len(P.seqs), P.num_tokens, P.Hq, P.Hkv
    a.head_size, a.page_size, a.window, a.min_query_len = D, P.B, P.window, minq
    a.softmax_scale, a.logit_softcap = scale, softcap
    return a


def run_generic_paged_case(G_, co, v, label, pk, rk, rng):
    mem = Mem(G_)
    try:
        D = pk.pop("D")
        P = PagedProblem(mem, rng, v["dtype"], D, **pk)
        scale = 0.7 / math.sqrt(D)
        softcap = rk.get("softcap", 0.0)
        alibi = None
        alibi_buf = None
        if rk.get("alibi"):
            alibi = (2.0 ** (-8.0 * (np.arange(P.Hq) + 1) / P.Hq)).astype(np.float32)
            alibi_buf = mem.from_array(alibi, "alibi")
        sinks = sinks_buf = None
        if rk.get("sinks"):
            # around the logits (a few units): from nearly no weight to most of a row's; one -inf
            sinks = rng.uniform(-3.0, 4.0, P.Hq).astype(np.float32)
            sinks[0] = -np.inf
            sinks_buf = mem.from_array(sinks, "sinks")
        nonfinite = rk.get("nonfinite")
        if nonfinite:
            what, s_, j, e, value = nonfinite[:5]
            if what == "q":
                P.poke_q(P.seqs[s_][2] + j, 0, e, value)   # token j of sequence s, head 0
            else:
                P.poke_kv(what, s_, 1, j, e, value)       # kv head 1
            if len(nonfinite) > 5:   # element e of every query row of kv head 1 in sequence s gets this
                L, M, q0 = P.seqs[s_]
                for tok in range(q0, q0 + M):
                    for h in range(P.G, 2 * P.G):
                        P.poke_q(tok, h, e, nonfinite[5])
        ref = P.reference(scale, softcap, alibi.astype(np.float64) if alibi is not None else None,
                          sinks.astype(np.float64) if sinks is not None else None)
        minq = rk.get("min_query_len", 0)
        must = np.zeros(P.num_tokens, dtype=bool)
        for L, M, q0 in P.seqs:
            if M > minq:
                must[q0:q0 + M] = True
        a = generic_paged_args(P, D, scale, softcap, alibi_buf, sinks_buf, minq)
        # bad device metadata: one entry changed after the oracle ran
        fault, bad_rows, expect_codes, expect_seqs = rk.get("fault"), np.zeros(P.num_tokens, dtype=bool), set(), set()
        if "max_query_len" in rk:   # a sequence with more query tokens than the descriptor allows
            a.max_query_len = rk["max_query_len"]
            for s_, (L, M, q0) in enumerate(P.seqs):
                if M > a.max_query_len:
                    bad_rows[q0:q0 + M] = True
                    expect_codes.add(DEVERR["query_len"])
                    expect_seqs.add(s_)
        if fault:
            kind, s_, value = fault
            L, M, q0 = P.seqs[s_]
            if kind == "page":
                pv = np_view(P.bt_buf.ptr, P.bt.size, np.int32)
                pv[s_ * P.bt_stride + (L - 1) // P.B] = value   # the last page: every row reaches it
                expect_codes.add(DEVERR["page"])
            elif kind == "seq_len":
                np_view(P.seq_lens_buf.ptr, len(P.seqs), np.int32)[s_] = value
                expect_codes.add(DEVERR["m_above_l"] if 0 <= value < M else DEVERR["seq_len"])
            elif kind == "qsl":   # query_start_loc[s] moved below [s - 1]: rows unspecified, record set
                np_view(P.qsl_buf.ptr, len(P.seqs) + 1, np.int32)[s_] = value
                expect_codes |= {DEVERR["qsl"], DEVERR["query_len"], DEVERR["m_above_l"]}
                expect_seqs |= {s_ - 1, s_}
                must[:] = False   # which rows are NaN depends on how the owner search lands
            expect_seqs.add(s_)
            if kind != "qsl":
                bad_rows[q0:q0 + M] = True
        P.poison_out()
        st = G_.launch(co.kernels[v["name"]], grid=(P.num_tokens, P.Hq), block=(128,), args=[bytes(a)],
                       check_bounds=True if rk.get("bounds") else None)
        out = P.out_rows()
        record = P.error_record()
        if not expect_codes:
            if record != (0, 0):
                return False, float("nan"), f"valid metadata, but the record holds {record}", st.seconds
            if nonfinite:   # a -inf logit only takes its key's weight away: finite rows, as the oracle
                ok, err, msg = compare_nonfinite(out, ref, v["dtype"], must, TOL[v["dtype"]],
                                                 allow_finite=nonfinite[4] == float("-inf") and len(nonfinite) > 5)
                return ok, err, msg, st.seconds
            ok, err, msg = compare(out, ref, v["dtype"], must, TOL[v["dtype"]])
            return ok, err, msg, st.seconds
        msgs = check_bad_rows(out, bad_rows, record, expect_codes, expect_seqs, v["dtype"])
        if fault and fault[0] == "qsl":
            out[:] = POISON   # any row may be NaN or a value: only the record and the bounds are checked
        ok, err, msg = compare(out, ref, v["dtype"], must & ~bad_rows, TOL[v["dtype"]])
        msgs += [msg] if msg and not ok else []
        return not msgs, err, "; ".join(msgs) or f"record {record}, bad rows NaN", st.seconds
    finally:
        mem.close()


def generic_varlen_cases(v):
    dmax = v["dmax"]
    Ds = {256: (48, 72, 256), 1024: (384, 520, 1024)}.get(dmax, (dmax // 4 + 8, dmax // 2 + 8, dmax))
    cases = []
    for D in Ds:
        cases.append((f"encoder_d{D}", dict(D=D, Hq=3, Hkv=3, segs=[33, 0, 17, 5]), dict(causal=0)))
        cases.append((f"causal_gqa_d{D}", dict(D=D, Hq=4, Hkv=2, segs=[21, 40]), dict(causal=1, softcap=8.0)))
        cases.append((f"fused_qkv_d{D}", dict(D=D, Hq=2, Hkv=2, segs=[12, 30], fused=True), dict(causal=0, bounds=True)))
    D = Ds[0]
    cases.append((f"sinks_encoder_d{D}", dict(D=D, Hq=3, Hkv=3, segs=[19, 0, 6]), dict(causal=0, sinks=True)))
    cases.append((f"sinks_causal_gqa_d{D}", dict(D=D, Hq=4, Hkv=2, segs=[1, 27]), dict(causal=1, sinks=True,
                                                                                         bounds=True)))
    return cases


def run_generic_varlen_case(G_, co, v, label, pk, rk, rng):
    mem = Mem(G_)
    try:
        D, Hq, Hkv, segs = pk["D"], pk["Hq"], pk["Hkv"], pk["segs"]
        dtype = v["dtype"]
        T = sum(segs)
        cu = np.array([0] + list(np.cumsum(segs)), dtype=np.int32)
        qb = to_bits(rng.standard_normal((T, Hq, D)).astype(np.float32), dtype)
        kb = to_bits(1.5 * rng.standard_normal((T, Hkv, D)).astype(np.float32), dtype)
        vb = to_bits(rng.standard_normal((T, Hkv, D)).astype(np.float32), dtype)
        if pk.get("fused"):
            # one [T][Hq + 2 Hkv][D] buffer read in place
            H3 = Hq + 2 * Hkv
            buf = np.zeros((T, H3, D), dtype=np.uint16)
            buf[:, :Hq], buf[:, Hq:Hq + Hkv], buf[:, Hq + Hkv:] = qb, kb, vb
            b = mem.from_array(buf, "qkv")
            qp, kp, vp = b.ptr, b.ptr + Hq * D * 2, b.ptr + (Hq + Hkv) * D * 2
            qts = kts = vts = H3 * D
        else:
            qp, kp, vp = (mem.from_array(x, n).ptr for x, n in ((qb, "q"), (kb, "k"), (vb, "v")))
            qts, kts, vts = Hq * D, Hkv * D, Hkv * D
        o_head = D + 3
        o_tok = Hq * o_head
        ob = mem.buf(max(T, 1) * o_tok * 2, "out")
        ctypes.memset(ob.ptr, 0xFF, max(T, 1) * o_tok * 2)
        scale = 1.0 / math.sqrt(D)
        softcap = rk.get("softcap", 0.0)
        sinks = rng.uniform(-3.0, 4.0, Hq).astype(np.float32) if rk.get("sinks") else None
        nonfinite = rk.get("nonfinite")
        if nonfinite:   # (k or v, segment, token in it, element, value), kv head 0; separate buffers only
            what, s_, j, e, value = nonfinite
            (kb if what == "k" else vb)[cu[s_] + j, 0, e] = to_bits(np.array([value], np.float32), dtype)[0]
            np_view(kp if what == "k" else vp, T * Hkv * D, np.uint16)[(cu[s_] + j) * Hkv * D + e] = \
                (kb if what == "k" else vb)[cu[s_] + j, 0, e]
        ref = oracle_varlen(from_bits(qb, dtype), from_bits(kb, dtype), from_bits(vb, dtype), cu, Hq // Hkv,
                            rk["causal"], scale, softcap, sinks.astype(np.float64) if sinks is not None else None)
        a = GenericVarlenArgs()
        a.q, a.k, a.v, a.out = qp, kp, vp, ob.ptr
        a.sinks = mem.from_array(sinks, "sinks").ptr if sinks is not None else 0
        a.cu_seqlens = mem.from_array(cu, "cu_seqlens").ptr
        a.q_token_stride, a.q_head_stride = qts, D
        a.k_token_stride, a.k_head_stride = kts, D
        a.v_token_stride, a.v_head_stride = vts, D
        a.o_token_stride, a.o_head_stride = o_tok, o_head
        a.num_segments, a.num_tokens, a.num_q_heads, a.num_kv_heads = len(segs), T, Hq, Hkv
        a.head_size, a.causal, a.softmax_scale, a.logit_softcap = D, rk["causal"], scale, softcap
        a.max_seqlen = rk.get("max_seqlen", max(segs + [0]))
        err_buf = mem.from_array(np.zeros(2, dtype=np.uint32), "device error record")
        a.error = err_buf.ptr
        must, bad_rows, expect_codes, expect_seqs = np.ones(T, dtype=bool), np.zeros(T, dtype=bool), set(), set()
        for s_ in range(len(segs)):
            if segs[s_] > a.max_seqlen:
                bad_rows[cu[s_]:cu[s_ + 1]] = True
                expect_codes.add(DEVERR["seg_len"])
                expect_seqs.add(s_)
        fault = rk.get("fault")
        if fault:   # cu_seqlens broken after the oracle ran: rows unspecified, record set, bounds held
            kind, s_ = fault
            cv = np_view(a.cu_seqlens, len(segs) + 1, np.int32)
            cv[s_] = cv[s_ - 1] - 3 if kind == "cu_order" else T + 9
            expect_codes.add(DEVERR["cu"])
            expect_seqs |= {s_ - 1, s_}
            must[:] = False
        st = G_.launch(co.kernels[v["name"]], grid=(T, Hq), block=(128,), args=[bytes(a)],
                       check_bounds=True if rk.get("bounds") else None)
        o = np_view(ob.ptr, T * o_tok, np.uint16).reshape(T, Hq, o_head)[:, :, :D].copy()
        record = tuple(int(x) for x in np_view(err_buf.ptr, 2, np.uint32))
        if not expect_codes:
            if record != (0, 0):
                return False, float("nan"), f"valid metadata, but the record holds {record}", st.seconds
            cmp = compare_nonfinite if nonfinite else compare
            ok, err, msg = cmp(o, ref, dtype, must, TOL[dtype])
            return ok, err, msg, st.seconds
        msgs = check_bad_rows(o, bad_rows, record, expect_codes, expect_seqs, dtype)
        if fault:
            o[:] = POISON
        ok, err, msg = compare(o, ref, dtype, must & ~bad_rows, TOL[dtype])
        msgs += [msg] if msg and not ok else []
        return not msgs, err, "; ".join(msgs) or f"record {record}, bad rows NaN", st.seconds
    finally:
        mem.close()

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
        threads = 32 * v.get("KW", 1) * v.get("DW", 1) if "KW" in v else 128
        # gfx1151 wave32: 1536 VGPRs per SIMD lane, allocated in granules of 24; a WGP's 4 SIMDs
        # share 128 KiB of LDS (workgroup processor mode)
        waves_vgpr = min(16, 1536 // (-(-max(vg, 1) // 24) * 24))
        nw = threads // 32
        wg_lds = (131072 // lds) if lds else 99
        waves_lds = min(16, wg_lds * nw // 4)
        print(f"{name:44s} {vg:5d} {sg:5d} {lds:6d} {priv:7d} {spill:5d} {min(waves_vgpr, waves_lds):10d} {wm:5d} {b128:5d}")
    return rows

# ------------------------------------------------------------------------------------- counting


def count_default(G_, co, dec, co_path):
    """Instruction counts for the bench's default problem: 1 sequence, 8 kv heads x G = 4 (32 query
    heads), D = 128, f16, page 16, context 4096, M = 1 and M = 4, planner's split count."""
    v = next(x for x in dec if x["dtype"] == "f16" and x["D"] == 128 and x["R"] == 16)
    rng = np.random.default_rng(7)
    results = []
    for M in (1, 4):
        mem = Mem(G_)
        try:
            L, Hkv, G = 4096, 8, 4
            P = PagedProblem(mem, rng, "f16", 128, Hkv=Hkv, G=G, B=16, seqs=[(L, M)])
            rg = HOST.num_row_groups(G, M, v["R"])
            splits = HOST.num_splits(1, Hkv, rg, L, M, 0, 40, resident_per_cu(v))   # the planner's choice for 40 CUs
            wsb = HOST.workspace_bytes(1, Hkv, rg, splits, v["R"], 128)
            ws = mem.buf(wsb, "workspace") if wsb else None
            a, rg = decode_args(P, v, splits, M, ws.ptr if ws else 0, 1 / math.sqrt(128))
            P.poison_out()
            st = G_.launch(co.kernels[v["name"]], grid=HOST.grid(1, Hkv, rg, splits),
                           block=(HOST.block_threads(v["KW"], v["DW"]),), args=[bytes(a)], count=True)
            ref = P.reference(1 / math.sqrt(128))
            ok, err, msg = compare(P.out_rows(), ref, "f16", np.ones(M, dtype=bool), TOL["f16"])
            kv_bytes = L * Hkv * 128 * 2 * 2
            must_bytes = kv_bytes + 2 * M * Hkv * G * 128 * 2 + 4 * (-(-L // 16))
            est = G_.cost_model(st)
            results.append((M, splits, st, est, kv_bytes, must_bytes, ok, err))
        finally:
            mem.close()
    print(f"\ndefault bench problem: variant {v['name']}, 1 sequence, L=4096, Hkv=8, G=4, D=128, f16, page 16")
    b16_splits = HOST.num_splits(16, 8, 1, 8192, 1, 0, 40, resident_per_cu(v))
    pipeline_summary(co_path, v, results[0][1], 16 * 8 * b16_splits)
    for M, splits, st, est, kv, must, ok, err in results:
        c = st.by_class
        simd = c["VALU"] + 4 * c["VALU_TRANS"] + 32 * c["WMMA"]
        print(f"  M={M}: splits={splits}  {'PASS' if ok else 'FAIL'} err={err:.2e}  emulated in {st.seconds:.1f}s")
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

def pipeline_summary(obj, v, splits_b1, grid_b16_wgs):
    """KV loads in flight per wave, read from the code object (static, in program order): the
    s_waitcnt vmcnt(N) in front of each S^T product of the main loop lets N loads stay outstanding
    while it runs, and the one in front of the V^T stores (the P.V half) likewise. A tile is 3 NC
    global_load_b128 per lane (K: 2 per 16-wide chunk, both half-waves reading the same 256 unique
    bytes; V: 1 per chunk, 512 bytes) = 64 DS bytes of K and V. Chip-wide bytes in flight = resident
    waves x bytes per wave during the products, for the 40-CU (20-WGP) Radeon 8060S."""
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
    # the main loop: the backward branch whose span holds the most WMMAs
    base = insns[0][0] if insns else 0
    best, body = -1, []
    for i, (addr, text, tgt) in enumerate(insns):
        if text.startswith("s_") and "branch" in text and tgt is not None and base + tgt < addr:
            span = [x[1] for x in insns if base + tgt <= x[0] <= addr]
            n = sum(x.startswith("v_wmma") for x in span)
            if n > best:
                best, body = n, span
    DS = v["D"] // v["DW"]
    nc = DS // 16
    per_tile = 3 * nc
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
        elif ins.startswith(("v_wmma", "ds_store_b16")) and armed and out is not None:
            (refill_waits if refill else qk if ins.startswith("v_wmma") else pv).append(out)
            armed = False
            if ins.startswith("v_wmma"):
                refill = False
    loop_qk, loop_pv = qk, pv
    tile_bytes = 64 * DS
    during = min(loop_qk + loop_pv) if (loop_qk or loop_pv) else 0
    peak = max(loop_qk + loop_pv) if (loop_qk or loop_pv) else 0
    wave_bytes = during / per_tile * tile_bytes
    nw = v["KW"] * v["DW"]
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
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--only", nargs="*", default=None, help="kernels whose name contains any of these")
    ap.add_argument("--case", nargs="*", default=None, help="cases whose label contains any of these")
    ap.add_argument("--static", action="store_true", help="print the static summary and exit")
    ap.add_argument("--count", action="store_true", help="instruction counts for the default bench problem")
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

    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}  (replay with --seed {seed})")
    cos = {src: G_.load(obj) for src, (obj, _) in objs.items()}
    if args.count:
        count_default(G_, cos["decode"], dec, objs["decode"][0])
        return 0

    sel = lambda n: args.only is None or any(s in n for s in args.only)
    csel = lambda c: args.case is None or any(s in c for s in args.case)
    table, fails = [], 0
    t_all = time.perf_counter()
    jobs = []
    for v in dec:
        if sel(v["name"]):
            jobs += [(v, c, run_decode_case, "decode") for c in decode_cases(v)]
    for v in gen:
        if sel(v["name"]):
            cases = (generic_paged_cases(v) if v["op"] == "paged" else generic_varlen_cases(v)) + \
                generic_bad_data_cases(v)
            fn = run_generic_paged_case if v["op"] == "paged" else run_generic_varlen_case
            jobs += [(v, c, fn, "generic") for c in cases]
            if v["op"] == "paged" and v["dtype"] == "f16" and v["dmax"] >= 256:
                jobs.append((v, ("fp8_all_codes", {}, {}),
                             lambda G_, co, v, label, pk, rk, rng: run_fp8_codes_case(G_, co, v, rng), "generic"))
    for i, (v, (label, pk, rk), fn, src) in enumerate(jobs):
        if not csel(label):
            continue
        rng = np.random.default_rng([seed, i])
        try:
            ok, err, msg, secs = fn(G_, cos[src], v, label, dict(pk), dict(rk), rng)
        except Exception as e:   # an emulator check (WMMA replication, bounds) or a crash
            ok, err, msg, secs = False, float("nan"), f"{type(e).__name__}: {e}", 0.0
        fails += not ok
        table.append((v["name"], label, ok, err, secs, msg))
        print(f"{'PASS' if ok else 'FAIL'}  {v['name']:40s} {label:22s} err={err:.2e}  {secs:6.2f}s  {msg}", flush=True)
    print(f"\n{len(table) - fails}/{len(table)} passed, {fails} failed, {time.perf_counter() - t_all:.0f}s  (seed {seed})")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
