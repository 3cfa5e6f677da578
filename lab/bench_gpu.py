#!/usr/bin/env python3
"""bench_gpu.py - the GPU benchmark of librdna35attn against torch SDPA, in one command.

    python3 lab/bench_gpu.py --lib build-nv/librdna35attn.so --read-cubin build-nv/bench/read_bw_sm_90.cubin \
        [--quick] [--shapes D:G:M:B:CTX,...] [--peers flash,cudnn,efficient|none] [--out DIR]

1. Roofline: the best read-stream bandwidth of our own 16-byte-load kernel (bench/gpu/read_bw.hip, the
   one r35a_bench embeds: unroll 4/8/16, plain or streaming loads, several grid sizes, 4 GiB buffer,
   median of 15), next to torch's copy.
2. Decode sweep (the default): D 64/128/256/512, GQA 4 and 8 (8 kv heads), M 1 and 4,
   contexts 1K..32K, batch 1 and 16, f16, page 16, shuffled pages. Our plan's call and torch SDPA
   (flash, cuDNN, efficient backends; contiguous [B, H, L, D] KV, enable_gqa) are each captured in a
   CUDA graph of `copies` calls over disjoint buffers (>= 512 MiB touched per replay: cold L2), and
   the graph replays are timed with CUDA events (median of 15 replays / copies). GB/s counts the bytes
   a call must move (K and V of every reached key, Q, O, tables). torch's M = 4 rows run non-causal
   (SDPA's is_causal is top-left aligned; the three masked keys change no bytes).
3. Encoder: non-causal varlen attention against torch SDPA flash (dense equal-length batches), bf16,
   TFLOP/s: the 21 served shapes (the sm_90 R35A_ENCODER_SHAPE rows of variants/variants.def, i.e.
   docs/DESIGN.md section 2's (D, Hq) list) at 4 segments of 1024 tokens (their geomean and minimum ratio
   are the README's figures), then extra rows (ViT/SigLIP lengths, one 4096-token segment) and
   short-segment batches (4096 x 16 tokens, 1024 x 64, 1024 x 49: the small-problem tiling).
4. Other tables instead of the sweep: --prefill (paged prefill rows and varlen causal GQA, TFLOP/s),
   --mixed (a mixed batch beside its parts alone, and vLLM's kernel on each), --lse-cost (decode with
   and without the LSE output, alternated), --merge (r35a_merge_states in GB/s against the roofline).
Every row also checks our output against torch's (max abs difference).
Prints a table per part (ratio = best torch time / ours) and the geomean; writes bench.json.
"""
import argparse
import ctypes
import itertools
import json
import math
import os
import random
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

READ_UNROLLS = (4, 8, 16)          # bench/gpu/read_args.h: BENCH_READ_UNROLLS
READ_MODES = ("plain", "stream")   # BENCH_READ_MODES

import torch  # noqa: E402
from kv_cache_data import random_kv  # noqa: E402
from gpu_timing import time_graph  # noqa: E402  (the lab's one CUDA-graph timing loop)
from rdna35attn._lib import (ContextInfoC, ContextOptions, PagedArgsC, PagedDescC, PlanInfoC,  # noqa: E402
                             VarlenArgsC, VarlenDescC)

DT = {"f16": (1, torch.float16), "bf16": (2, torch.bfloat16)}


# ------------------------------------------------------------------------------------------ library
class Lib:
    def __init__(self, path):
        self.l = ctypes.CDLL(path)
        L = self.l
        vp = ctypes.c_void_p
        L.r35a_context_create.argtypes = [ctypes.POINTER(ContextOptions), ctypes.POINTER(vp)]
        L.r35a_context_get_info.argtypes = [vp, ctypes.POINTER(ContextInfoC)]
        L.r35a_last_error_detail.restype = ctypes.c_char_p
        L.r35a_paged_attention_desc_init.argtypes = [ctypes.POINTER(PagedDescC), ctypes.c_int] + [ctypes.c_int32] * 9
        L.r35a_paged_attention_plan.argtypes = [vp, ctypes.POINTER(PagedDescC), ctypes.POINTER(vp)]
        L.r35a_paged_attention_run.argtypes = [vp, vp, ctypes.POINTER(PagedArgsC), vp, ctypes.c_size_t, vp]
        L.r35a_varlen_attention_desc_init.argtypes = [ctypes.POINTER(VarlenDescC), ctypes.c_int] + [ctypes.c_int32] * 6
        L.r35a_varlen_attention_plan.argtypes = [vp, ctypes.POINTER(VarlenDescC), ctypes.POINTER(vp)]
        L.r35a_varlen_attention_run.argtypes = [vp, vp, ctypes.POINTER(VarlenArgsC), vp, ctypes.c_size_t, vp]
        L.r35a_plan_get_info.argtypes = [vp, ctypes.POINTER(PlanInfoC)]
        L.r35a_plan_destroy.argtypes = [vp]
        o = ContextOptions(ctypes.sizeof(ContextOptions), 1, 0)
        self.ctx = vp()
        self.check(L.r35a_context_create(ctypes.byref(o), ctypes.byref(self.ctx)), "context_create")
        info = ContextInfoC()
        info.struct_size = ctypes.sizeof(info)
        L.r35a_context_get_info(self.ctx, ctypes.byref(info))
        self.info = f"{info.backend_name.decode()} {info.arch.decode()}: {info.reason.decode()}"

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: status {status}: {self.l.r35a_last_error_detail().decode()}")

    def plan_info(self, plan):
        pi = PlanInfoC()
        pi.struct_size = ctypes.sizeof(pi)
        self.l.r35a_plan_get_info(plan, ctypes.byref(pi))
        return pi


# ------------------------------------------------------------------------------------------ roofline
class ReadArgs(ctypes.Structure):
    """bench/gpu/read_args.h: bench_read_args."""
    _fields_ = [("src", ctypes.c_void_p), ("n16", ctypes.c_ulonglong), ("block_threads", ctypes.c_ulonglong),
                ("grid_threads", ctypes.c_ulonglong), ("out", ctypes.c_void_p)]


def roofline(cubin):
    res = {}
    n_bytes = 4 << 30
    buf = torch.empty(n_bytes // 4, dtype=torch.int32, device="cuda").random_()
    out = torch.zeros(1 << 16, dtype=torch.int32, device="cuda")
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    best = (0.0, "")
    if cubin and os.path.exists(cubin):
        cu = ctypes.CDLL("libcuda.so.1")
        mod = ctypes.c_void_p()
        data = open(cubin, "rb").read()
        torch.cuda.synchronize()
        if cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(data)) != 0:
            raise RuntimeError("cuModuleLoadData of the read kernel failed")
        for name in (f"read_u{u}_{m}" for u in READ_UNROLLS for m in READ_MODES):
            f = ctypes.c_void_p()
            if cu.cuModuleGetFunction(ctypes.byref(f), mod, name.encode()) != 0:
                raise RuntimeError(f"cuModuleGetFunction({name}) failed: is {cubin} bench/gpu/read_bw.hip's cubin?")
            for blocks_per_sm, threads in ((2, 1024), (4, 512), (8, 256), (16, 256), (32, 128)):
                grid = sm * blocks_per_sm
                # the kernel's one by-value argument, bench/gpu/read_args.h's bench_read_args
                arg = ReadArgs(buf.data_ptr(), n_bytes // 16, threads, grid * threads, out.data_ptr())
                params = (ctypes.c_void_p * 1)(ctypes.addressof(arg))

                def launch(_c, f=f, grid=grid, threads=threads, params=params, arg=arg):  # arg: kept alive
                    st = torch.cuda.current_stream().cuda_stream
                    r = cu.cuLaunchKernel(f, grid, 1, 1, threads, 1, 1, 0, ctypes.c_void_p(st), params, None)
                    if r != 0:
                        raise RuntimeError(f"cuLaunchKernel {r}")
                t = time_graph(launch, 1, reps=15)
                gbs = n_bytes / t / 1e9
                res[f"{name}/{blocks_per_sm}x{threads}"] = gbs
                if gbs > best[0]:
                    best = (gbs, f"{name}, {blocks_per_sm} blocks/SM x {threads} threads")
    dst = torch.empty_like(buf)
    tcopy = time_graph(lambda c: dst.copy_(buf), 1)
    res["torch_copy_rw"] = 2 * n_bytes / tcopy / 1e9
    del buf, dst
    torch.cuda.empty_cache()
    if best[0] == 0.0:
        best = (res["torch_copy_rw"], "torch copy (read + write)")
    return best, res


# ------------------------------------------------------------------------------------------ decode
MIN_TOUCH = 512 << 20


KV8 = {"fp8": 4, "int8": 5}   # r35a_dtype R35A_DTYPE_FP8_E4M3 / R35A_DTYPE_INT8


PAGE_ORDER = "shuffled"   # --page-order: the block tables' pages shuffled over the pool, or in order
KV_LAYOUT = "hnd"         # --kv-layout: the cache as [pages][Hkv][page][D] (hnd), [Hkv][pages][page][D] or [pages][page][Hkv][D] (nhd)
PAGE_SIZE = 16            # --page-size


def decode_row(lib, D, G, M, ctx_len, B, dtype="f16", page=None, hkv=8, peers=("flash", "cudnn", "efficient"),
               vllm=None, kv8=None, per_head=False, sinks=False, softcap=0.0, alibi=False, layout=None, causal=False,
               lse=False, token_scales=False):
    """One decode shape; lse: the call writes the softmax LSE too (ours alone); kv8 ("fp8" / "int8",
    scales per tensor, per kv head, or with token_scales per (token, kv head): [pages][page][Hkv]
    float32 tensors, their bytes counted as moved), sinks, softcap and alibi
    make it a model-feature row (ours alone: peers and vllm are not run for those). The pages of the
    block tables are a random permutation of the pool (PAGE_ORDER "shuffled", the default: what a
    long-running engine's allocator leaves) or consecutive ("sorted": each sequence's pages one
    contiguous run, as torch's dense layout is). KV_LAYOUT "head-major" stores the pool kv head by kv
    head ([Hkv][pages][page][D], read through the strides): with sorted pages each (sequence, kv head)
    is then one contiguous stream, as in torch's [B, H, L, D]. causal (prefill rows, M > 1): torch's
    peers run the same bottom-right causal mask (is_causal when M = L, else causal_lower_right), and
    the row's flops and TFLOP/s are counted (query i of M sees L - M + i + 1 keys)."""
    page = page or PAGE_SIZE
    layout = layout or KV_LAYOUT
    tdt = DT[dtype][1]
    hq = hkv * G
    esize = 1 if kv8 else 2
    kv_bytes_one = B * ctx_len * hkv * D * 2 * esize
    copies = max(1, min(64, math.ceil(MIN_TOUCH / kv_bytes_one)))
    pages_per_seq = ctx_len // page
    num_pages = copies * B * pages_per_seq
    # ours: one page pool, a shuffled block table per copy (disjoint pages)
    kc, vc = random_kv(torch, (num_pages, hkv, page, D), kv8, tdt)
    if layout == "head-major":   # the same contents, stored head by head; kc / vc stay [pages][Hkv][page][D] views
        kc = kc.permute(1, 0, 2, 3).contiguous().permute(1, 0, 2, 3)
        vc = vc.permute(1, 0, 2, 3).contiguous().permute(1, 0, 2, 3)
    elif layout == "nhd":   # vLLM's [pages][page][Hkv][D]: a page's kv heads interleaved slot by slot
        kc = kc.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)
        vc = vc.permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)
    if PAGE_ORDER == "sorted":
        perm = torch.arange(num_pages, device="cuda", dtype=torch.int32)
    else:
        perm = torch.randperm(num_pages, device="cuda", dtype=torch.int64).to(torch.int32)
    bt = perm.view(copies, B, pages_per_seq).contiguous()
    q = torch.randn(copies, B * M, hq, D, dtype=tdt, device="cuda")
    o = torch.empty_like(q)
    seq_lens = torch.full((B,), ctx_len, dtype=torch.int32, device="cuda")
    qsl = torch.arange(0, B * M + 1, M, dtype=torch.int32, device="cuda")
    desc = PagedDescC()
    lib.l.r35a_paged_attention_desc_init(ctypes.byref(desc), DT[dtype][0], B, B * M, M, ctx_len, hq, hkv, D, page,
                                         num_pages)
    if layout != "hnd":
        for which, t in (("k", kc), ("v", vc)):
            setattr(desc, f"{which}_page_stride", t.stride(0))
            setattr(desc, f"{which}_head_stride", t.stride(1))
            setattr(desc, f"{which}_slot_stride", t.stride(2))
    feat = {}
    if kv8:
        desc.kv_dtype = KV8[kv8]
        base_scale = 0.02 if kv8 == "int8" else 0.01
        if token_scales:   # desc_init's strides: contiguous [pages][page][Hkv]
            desc.kv_scale_per_head = 2
            for name in ("k_scale", "v_scale"):
                feat[name] = base_scale * (0.5 + torch.rand((num_pages, page, hkv), dtype=torch.float32, device="cuda"))
        else:
            desc.kv_scale_per_head = 1 if per_head else 0
            n = hkv if per_head else 1
            feat["k_scale"] = torch.full((n,), base_scale, dtype=torch.float32, device="cuda")
            feat["v_scale"] = torch.full((n,), base_scale, dtype=torch.float32, device="cuda")
    if sinks:
        desc.use_sinks = 1
        feat["sinks"] = torch.randn(hq, dtype=torch.float32, device="cuda")
    if alibi:
        desc.use_alibi = 1
        feat["alibi"] = torch.tensor([2.0 ** (-8.0 * (h + 1) / hq) for h in range(hq)], dtype=torch.float32,
                                     device="cuda")
    desc.logit_softcap = softcap
    if lse:
        desc.use_lse = 1
        feat["lse"] = torch.empty(copies, B * M, hq, dtype=torch.float32, device="cuda")
    plan = ctypes.c_void_p()
    lib.check(lib.l.r35a_paged_attention_plan(lib.ctx, ctypes.byref(desc), ctypes.byref(plan)), "paged plan")
    pi = lib.plan_info(plan)
    ws = torch.empty(max(pi.workspace_bytes, 16), dtype=torch.uint8, device="cuda")
    ptr = lambda name: feat[name].data_ptr() if name in feat else None  # noqa: E731
    args = []
    for c in range(copies):
        a = PagedArgsC(ctypes.sizeof(PagedArgsC), q[c].data_ptr(), kc.data_ptr(), vc.data_ptr(), o[c].data_ptr(),
                       seq_lens.data_ptr(), qsl.data_ptr(), bt[c].data_ptr(), ptr("alibi"), ptr("sinks"),
                       ptr("k_scale"), ptr("v_scale"), feat["lse"][c].data_ptr() if lse else None)
        args.append(a)
    if kv8 or sinks or softcap or alibi or lse:
        peers, vllm = (), None   # model-feature rows: ours alone

    def ours(c):
        st = torch.cuda.current_stream().cuda_stream
        lib.check(lib.l.r35a_paged_attention_run(lib.ctx, plan, ctypes.byref(args[c]), ctypes.c_void_p(ws.data_ptr()),
                                                 pi.workspace_bytes, ctypes.c_void_p(st)), "paged run")
    t_ours = time_graph(ours, copies)
    bytes_moved = kv_bytes_one + 2 * B * M * hq * D * 2 + B * pages_per_seq * 4 + B * 4 * 2
    if token_scales:
        bytes_moved += 2 * B * ctx_len * hkv * 4   # each key's K and V scale
    flops = 4.0 * D * hq * B * sum(ctx_len - M + i + 1 for i in range(M))
    row = dict(D=D, G=G, M=M, ctx=ctx_len, B=B, dtype=dtype, impl=pi.implementation.decode(), splits=pi.num_splits,
               flops=flops, tflops=flops / t_ours / 1e12,
               grid=list(pi.grid), block=pi.block[0], copies=copies, bytes=bytes_moved, t_ours_us=t_ours * 1e6,
               gbs=bytes_moved / t_ours / 1e9, kv8=kv8, per_head=per_head, token_scales=token_scales, sinks=sinks,
               softcap=softcap, alibi=alibi, layout=layout)
    if not peers and vllm is None:
        torch.cuda.synchronize()
        row["nonfinite"] = int((~torch.isfinite(o[0].float())).sum())   # a plain sanity check of ours
    if not peers:   # ours alone (the side-by-side with r35a_bench in lab/gpu_suite.sh)
        row.update({f"t_{n}_us": None for n in ("flash", "cudnn", "efficient")})
        row["t_torch_best_us"] = row["ratio"] = None
        lib.l.r35a_plan_destroy(plan)
        del kc, vc, q, o, ws
        torch.cuda.empty_cache()
        return row
    # torch: the same K/V contents as contiguous [B, Hkv, L, D] (copy 0 for the check; copies for timing)
    kt = torch.empty(copies, B, hkv, ctx_len, D, dtype=tdt, device="cuda")
    vt = torch.empty_like(kt)
    idx = bt.long()                                               # [copies, B, P]
    kt.copy_(kc[idx].permute(0, 1, 3, 2, 4, 5).reshape(copies, B, hkv, ctx_len, D))
    vt.copy_(vc[idx].permute(0, 1, 3, 2, 4, 5).reshape(copies, B, hkv, ctx_len, D))
    qt = q.view(copies, B, M, hq, D).transpose(2, 3).contiguous()   # [copies, B, Hq, M, D]
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION}
    torch.cuda.synchronize()
    ref = None
    sdpa_kw = {}
    if causal and M > 1:   # the library's rows: query i at position L - M + i (bottom-right)
        from torch.nn.attention.bias import causal_lower_right
        sdpa_kw = dict(is_causal=True) if M == ctx_len else dict(attn_mask=causal_lower_right(M, ctx_len))
    for name in peers:
        try:
            with sdpa_kernel([backends[name]]):
                outs = [None] * copies

                def peer(c):   # the output stays in the graph's pool: no extra copy kernel
                    outs[c] = torch.nn.functional.scaled_dot_product_attention(qt[c], kt[c], vt[c], enable_gqa=True,
                                                                               **sdpa_kw)
                t = time_graph(peer, copies)
                if ref is None:
                    ref = torch.nn.functional.scaled_dot_product_attention(qt[0], kt[0], vt[0], enable_gqa=True,
                                                                           **sdpa_kw)
                    ref = ref.transpose(1, 2).reshape(B * M, hq, D).float()
                del outs
            row[f"t_{name}_us"] = t * 1e6
        except Exception as e:  # noqa: BLE001 - a backend that does not serve the shape
            row[f"t_{name}_us"] = None
            row[f"err_{name}"] = str(e).splitlines()[0][:120]
    # vLLM's Triton unified attention (lab/peer_vllm_triton.py): the same K/V, Q and block tables in
    # vLLM's cache layout [blocks, 2, page, Hkv, D]
    if vllm is not None:
        import peer_vllm_triton
        try:
            del kt, vt   # torch's contiguous copies are not needed any more
            torch.cuda.empty_cache()
            pv = peer_vllm_triton.VllmDecode(vllm, D, G, M, ctx_len, B, dtype=tdt, page=page, hkv=hkv, copies=copies,
                                             k_pages=kc, v_pages=vc, block_tables=bt, q=q)
            row["t_vllm_us"] = time_graph(pv, copies) * 1e6
            row["vllm_3d"] = pv.uses_3d
            if ref is not None and (M == 1 or causal):
                torch.cuda.synchronize()
                row["maxdiff_vllm"] = float((pv.out[0].float() - ref).abs().max())
            del pv
        except Exception as e:  # noqa: BLE001
            row["t_vllm_us"] = None
            row["err_vllm"] = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
        row["ratio_vllm"] = row["t_vllm_us"] / row["t_ours_us"] if row.get("t_vllm_us") else None
    # check (M = 1 or causal rows: torch's other M > 1 rows are non-causal)
    torch.cuda.synchronize()
    if ref is not None and (M == 1 or causal):
        row["maxdiff"] = float((o[0].float() - ref).abs().max())
    ts = [row[f"t_{n}_us"] for n in peers if row.get(f"t_{n}_us")]
    row["t_torch_best_us"] = min(ts) if ts else None
    row["ratio"] = row["t_torch_best_us"] / row["t_ours_us"] if ts else None
    lib.l.r35a_plan_destroy(plan)
    del kc, vc, q, o, qt, ws, ref
    torch.cuda.empty_cache()
    return row


# ------------------------------------------------------------------------------------------ encoder
def encoder_row(lib, D, H, seg, nseg, dtype="bf16", hkv=None, causal=False):
    """One varlen call of nseg segments of seg tokens, H query heads on hkv kv heads (default H),
    non-causal or causal, against torch SDPA flash on the same Q, K, V (GQA through enable_gqa)."""
    hkv = hkv or H
    tdt = DT[dtype][1]
    T = seg * nseg
    one = 2 * T * (H + hkv) * D * 2
    copies = max(1, min(32, math.ceil((256 << 20) / one)))
    q = torch.randn(copies, T, H, D, dtype=tdt, device="cuda")
    k = torch.randn(copies, T, hkv, D, dtype=tdt, device="cuda")
    v = torch.randn_like(k)
    o = torch.empty_like(q)
    cu = torch.arange(0, T + 1, seg, dtype=torch.int32, device="cuda")
    desc = VarlenDescC()
    lib.l.r35a_varlen_attention_desc_init(ctypes.byref(desc), DT[dtype][0], nseg, T, seg, H, hkv, D)
    desc.causal = 1 if causal else 0
    plan = ctypes.c_void_p()
    lib.check(lib.l.r35a_varlen_attention_plan(lib.ctx, ctypes.byref(desc), ctypes.byref(plan)), "varlen plan")
    pi = lib.plan_info(plan)
    args = [VarlenArgsC(ctypes.sizeof(VarlenArgsC), q[c].data_ptr(), k[c].data_ptr(), v[c].data_ptr(), o[c].data_ptr(),
                        cu.data_ptr()) for c in range(copies)]

    def ours(c):
        st = torch.cuda.current_stream().cuda_stream
        lib.check(lib.l.r35a_varlen_attention_run(lib.ctx, plan, ctypes.byref(args[c]), None, 0, ctypes.c_void_p(st)),
                  "varlen run")
    t_ours = time_graph(ours, copies)
    flops = 4.0 * D * H * nseg * (seg * (seg + 1) / 2 if causal else seg * seg)
    row = dict(D=D, H=H, hkv=hkv, causal=causal, seg=seg, nseg=nseg, dtype=dtype, impl=pi.implementation.decode(),
               t_ours_us=t_ours * 1e6, tflops=flops / t_ours / 1e12)
    qt = q.view(copies, nseg, seg, H, D).transpose(2, 3)
    kt = k.view(copies, nseg, seg, hkv, D).transpose(2, 3)
    vt = v.view(copies, nseg, seg, hkv, D).transpose(2, 3)
    kw = dict(is_causal=causal, enable_gqa=hkv != H)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    try:
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            outs = [None] * copies

            def peer(c):
                outs[c] = torch.nn.functional.scaled_dot_product_attention(qt[c], kt[c], vt[c], **kw)
            t = time_graph(peer, copies)
            ot = torch.nn.functional.scaled_dot_product_attention(qt[0], kt[0], vt[0], **kw)
            del outs
        row["t_flash_us"] = t * 1e6
        row["ratio"] = t / t_ours
        torch.cuda.synchronize()
        row["maxdiff"] = float((o[0].float() - ot.transpose(1, 2).reshape(T, H, D).float()).abs().max())
    except Exception as e:  # noqa: BLE001
        row["t_flash_us"] = None
        row["ratio"] = None
        row["err_flash"] = str(e).splitlines()[0][:120]
    lib.l.r35a_plan_destroy(plan)
    del q, k, v, o, qt, kt, vt
    torch.cuda.empty_cache()
    return row


def encoder_shapes():
    """(D, H, segment length, segments, set): the 21 served shapes (sm_90 bf16 R35A_ENCODER_SHAPE rows of
    variants/variants.def) at 4 x 1024 tokens, extra rows, short-segment batches."""
    import re
    text = open(os.path.join(ROOT, "variants", "variants.def"), encoding="utf-8").read()
    served = [(int(d), int(h)) for d, h in re.findall(r"^R35A_ENCODER_SHAPE\(sm_90, bf16, (\d+), (\d+)\)$", text, re.M)]
    return ([(D, H, 1024, 4, "21") for D, H in served]
            + [(D, H, s, n, "extra") for D, H, s, n in ((64, 12, 577, 8), (72, 16, 729, 8), (128, 16, 4096, 1),
                                                         (32, 8, 256, 32))]
            + [(D, H, s, n, "short") for D, H, s, n in ((64, 16, 16, 4096), (64, 16, 64, 1024), (128, 16, 16, 4096),
                                                         (80, 16, 49, 1024))])


FEATURE_SHAPES = ((64, 8, 1, 16, 8192), (128, 4, 1, 16, 8192), (128, 4, 1, 16, 32768), (128, 8, 4, 16, 8192),
                  (256, 4, 1, 16, 8192), (128, 4, 1, 1, 32768))   # D, G, M, B, ctx (8 kv heads, f16 Q/O, page 16)
FEATURES = (("base", {}), ("sinks", dict(sinks=True)), ("softcap", dict(softcap=50.0)), ("alibi", dict(alibi=True)),
            ("all3", dict(sinks=True, softcap=50.0, alibi=True)), ("fp8", dict(kv8="fp8")),
            ("fp8_head_sinks", dict(kv8="fp8", per_head=True, sinks=True)), ("int8_head", dict(kv8="int8", per_head=True)))


def features_table(lib, peak):
    """The cost of sinks, softcap (50) and ALiBi against the same call without them, and the
    8-bit caches' speed against the f16 cache, on the same shapes (time ratios; GB/s counts the bytes
    each moves, half the KV for 8-bit)."""
    print(f"\n{'D':>4} {'G':>2} {'M':>2} {'B':>3} {'ctx':>6} {'feature':<15} {'variant':<38} {'us':>8} {'GB/s':>6} "
          f"{'%roof':>6} {'vs base':>8}", flush=True)
    rows = []
    for (D, G, M, B, c) in FEATURE_SHAPES:
        base = None
        for name, kw in FEATURES:
            try:
                r = decode_row(lib, D, G, M, c, B, peers=(), **kw)
            except Exception as e:  # noqa: BLE001
                print(f"{D:>4} {G:>2} {M:>2} {B:>3} {c:>6} {name:<15} ERROR {e}", flush=True)
                torch.cuda.empty_cache()
                continue
            r["feature"] = name
            r["roof_pct"] = 100 * r["gbs"] / peak
            if name == "base":
                base = r["t_ours_us"]
            r["time_vs_base"] = r["t_ours_us"] / base if base else None
            rows.append(r)
            print(f"{D:>4} {G:>2} {M:>2} {B:>3} {c:>6} {name:<15} {r['impl'][:38]:<38} {r['t_ours_us']:8.1f} "
                  f"{r['gbs']:6.0f} {r['roof_pct']:6.1f} {r['time_vs_base'] or 0:8.3f}"
                  + (f"  nonfinite {r['nonfinite']}" if r.get("nonfinite") else ""), flush=True)
    cost = [r["time_vs_base"] for r in rows if r["feature"] in ("sinks", "softcap", "alibi", "all3") and r["time_vs_base"]]
    speed = [1 / r["time_vs_base"] for r in rows if r["feature"] in ("fp8", "int8_head") and r["time_vs_base"]
             and r["B"] == 16 and r["ctx"] >= 8192]
    if cost:
        print(f"feature cost (time vs the plain call): max {max(cost):.3f}, geomean {geomean(cost):.3f}", flush=True)
    if speed:
        print(f"8-bit KV speedup over f16 (B16, >= 8K): min {min(speed):.2f}, geomean {geomean(speed):.2f}", flush=True)
    return rows


TOKEN_SCALE_SHAPES = "128:4:1:16:8192,128:8:4:16:8192,128:4:1:1:32768,64:8:1:16:8192,256:4:1:16:8192"


def token_scales_table(lib, peak, kv8, shapes):
    """8-bit caches with per-(token, kv head) scales beside per-kv-head scales on the same decode shapes
    (D:G:M:B:CTX, 8 kv heads, f16 Q/O): time ratio token / head (the target: <= 1.05 at batch 16, 8K).
    GB/s counts what each moves (the per-token scales' 8 bytes per key and kv head included)."""
    print(f"\n{kv8} KV, per-token-head vs per-kv-head scales", flush=True)
    print(f"{'D':>4} {'G':>2} {'M':>2} {'B':>3} {'ctx':>6} {'variant (token-head)':<38} {'head us':>8} {'token us':>9} "
          f"{'GB/s':>6} {'%roof':>6} {'token/head':>10}", flush=True)
    rows = []
    for item in shapes.split(","):
        D, G, M, B, c = (int(x) for x in item.split(":"))
        try:
            rh = decode_row(lib, D, G, M, c, B, peers=(), kv8=kv8, per_head=True)
            rt = decode_row(lib, D, G, M, c, B, peers=(), kv8=kv8, token_scales=True)
        except Exception as e:  # noqa: BLE001
            print(f"{D:>4} {G:>2} {M:>2} {B:>3} {c:>6} ERROR {e}", flush=True)
            torch.cuda.empty_cache()
            continue
        ratio = rt["t_ours_us"] / rh["t_ours_us"]
        rows.append(dict(D=D, G=G, M=M, B=B, ctx=c, kv8=kv8, head=rh, token=rt, token_over_head=ratio))
        print(f"{D:>4} {G:>2} {M:>2} {B:>3} {c:>6} {rt['impl'][:38]:<38} {rh['t_ours_us']:8.1f} {rt['t_ours_us']:9.1f} "
              f"{rt['gbs']:6.0f} {100 * rt['gbs'] / peak:6.1f} {ratio:10.3f}"
              + (f"  nonfinite {rt['nonfinite']}" if rt.get("nonfinite") else ""), flush=True)
    if rows:
        print(f"token/head time: max {max(r['token_over_head'] for r in rows):.3f}, "
              f"geomean {geomean([r['token_over_head'] for r in rows]):.3f}", flush=True)
    return rows


PREFILL_PRESET = [(D, m, prefix, b) for D in (64, 128) for (m, prefix, b) in (
    (512, 0, 1), (1024, 0, 1), (2048, 0, 1), (4096, 0, 1), (512, 4096, 1), (1024, 8192, 1), (2048, 16384, 1),
    (4096, 16384, 1), (512, 16384, 1), (2048, 4096, 1), (16, 8192 - 16, 16), (64, 8192 - 64, 16))]   # bench/presets.c


def peers_of(args):
    return () if args.peers == "none" else tuple(args.peers.split(","))


def prefill_table(lib, spec, peers, vllm, out, tag, result):
    """Paged prefill rows (bf16, 32 q heads on 8 kv heads, page 16, causal bottom-right), then varlen
    causal GQA rows, in TFLOP/s: ours, torch SDPA per backend on dense copies with the same mask, vLLM's
    Triton unified attention on the same paged cache; ratios = peer time / ours."""
    shapes = PREFILL_PRESET if spec == "preset" else [tuple(int(x) for x in it.split(":")) for it in spec.split(",")]
    print(f"\n{'D':>4} {'M':>5} {'prefix':>6} {'B':>3} {'implementation':<44} {'us':>9} {'TFLOP/s':>8} {'flash':>7} "
          f"{'cudnn':>7} {'effic':>7} {'vllm':>7} {'r_flash':>7} {'r_best':>7} {'r_vllm':>7} {'maxdiff':>8}", flush=True)
    rows = []
    for (D, M, prefix, B) in shapes:
        try:
            r = decode_row(lib, D, 4, M, prefix + M, B, dtype="bf16", peers=peers, vllm=vllm, causal=True)
        except Exception as e:  # noqa: BLE001
            print(f"{D:>4} {M:>5} {prefix:>6} {B:>3} ERROR {e}", flush=True)
            torch.cuda.empty_cache()
            continue
        tf = lambda key: r["flops"] / r[key] / 1e6 if r.get(key) else None  # noqa: E731
        r.update(prefix=prefix, tflops_flash=tf("t_flash_us"), tflops_cudnn=tf("t_cudnn_us"),
                 tflops_efficient=tf("t_efficient_us"), tflops_vllm=tf("t_vllm_us"),
                 ratio_flash=r["t_flash_us"] / r["t_ours_us"] if r.get("t_flash_us") else None)
        rows.append(r)
        result["prefill"] = rows
        with open(os.path.join(out, f"{tag}.json"), "w") as fjson:
            json.dump(result, fjson, indent=1)
        g = lambda x: f"{x:7.1f}" if x else f"{'-':>7}"  # noqa: E731
        h = lambda x: f"{x:7.2f}" if x else f"{'-':>7}"  # noqa: E731
        print(f"{D:>4} {M:>5} {prefix:>6} {B:>3} {r['impl'][:44]:<44} {r['t_ours_us']:9.1f} {r['tflops']:8.1f} "
              f"{g(r['tflops_flash'])} {g(r['tflops_cudnn'])} {g(r['tflops_efficient'])} {g(r['tflops_vllm'])} "
              f"{h(r['ratio_flash'])} {h(r['ratio'])} {h(r.get('ratio_vllm'))} {r.get('maxdiff', float('nan')):8.1e}",
              flush=True)
    print(f"\n{'D':>4} {'Hq':>3} {'Hkv':>3} {'seg':>5} {'nseg':>4} {'implementation':<44} {'us':>9} {'TFLOP/s':>8} "
          f"{'flash us':>9} {'r_flash':>7} {'maxdiff':>8}", flush=True)
    result["varlen_causal"] = []
    for (D, seg, nseg) in ((128, 4096, 1), (128, 256, 16), (64, 4096, 1), (64, 256, 16)):
        try:
            r = encoder_row(lib, D, 32, seg, nseg, hkv=8, causal=True)
        except Exception as e:  # noqa: BLE001
            print(f"{D:>4} causal {seg}x{nseg} ERROR {e}", flush=True)
            continue
        result["varlen_causal"].append(r)
        print(f"{D:>4} {32:>3} {8:>3} {seg:>5} {nseg:>4} {r['impl'][:44]:<44} {r['t_ours_us']:9.1f} {r['tflops']:8.1f} "
              f"{(r.get('t_flash_us') or 0):9.1f} {(r.get('ratio') or 0):7.2f} {r.get('maxdiff', float('nan')):8.1e}",
              flush=True)
    ok = [r for r in rows if r.get("ratio_flash")]
    if ok:
        print(f"prefill vs torch flash: geomean {geomean([r['ratio_flash'] for r in ok]):.2f}, "
              f"min {min(r['ratio_flash'] for r in ok):.2f}; vs best torch geomean "
              f"{geomean([r.get('ratio') for r in ok]):.2f}"
              + (f"; vs vLLM geomean {geomean([r.get('ratio_vllm') for r in ok]):.2f}" if vllm else ""), flush=True)
    return rows


def lse_cost_table(lib, spec):
    """What the LSE output costs: each decode shape (D:G:M:B:CTX, f16, 8 kv heads) without and with
    use_lse, alternated over three rounds in one run; the ratio of the medians."""
    shapes = [tuple(int(x) for x in it.split(":")) for it in spec.split(",")]
    print(f"\n{'D':>4} {'G':>2} {'M':>2} {'B':>3} {'ctx':>6} {'implementation (LSE)':<44} {'us':>8} {'us LSE':>8} "
          f"{'ratio':>6}", flush=True)
    rows = []
    for (D, G, M, B, c) in shapes:
        t = {False: [], True: []}
        impl = ""
        for _ in range(3):
            for lse in (False, True):
                r = decode_row(lib, D, G, M, c, B, peers=(), lse=lse)
                t[lse].append(r["t_ours_us"])
                if lse:
                    impl = r["impl"]
        a, b = statistics.median(t[False]), statistics.median(t[True])
        rows.append(dict(D=D, G=G, M=M, B=B, ctx=c, impl_lse=impl, t_us=a, t_lse_us=b, ratio=b / a))
        print(f"{D:>4} {G:>2} {M:>2} {B:>3} {c:>6} {impl[:44]:<44} {a:8.1f} {b:8.1f} {b / a:6.3f}", flush=True)
    if rows:
        print(f"LSE cost (time with / without): max {max(r['ratio'] for r in rows):.3f}, geomean "
              f"{geomean([r['ratio'] for r in rows]):.3f}", flush=True)
    return rows


def merge_table(lib, spec, peak):
    """r35a_merge_states: N parts of T tokens x H heads x D (f16, contiguous, with the output LSE), in
    GB/s of the bytes it must move (the parts' O and LSE read, O and LSE written) against the read
    roofline; checked against a float64 torch merge."""
    from rdna35attn._lib import MergeArgsC, MergeDescC
    L = lib.l
    vp = ctypes.c_void_p
    L.r35a_merge_states_desc_init.argtypes = [ctypes.POINTER(MergeDescC), ctypes.c_int] + [ctypes.c_int32] * 4
    L.r35a_merge_states_plan.argtypes = [vp, ctypes.POINTER(MergeDescC), ctypes.POINTER(vp)]
    L.r35a_merge_states_run.argtypes = [vp, vp, ctypes.POINTER(MergeArgsC), vp, ctypes.c_size_t, vp]
    shapes = [tuple(int(x) for x in it.split(":")) for it in spec.split(",")]
    print(f"\n{'N':>2} {'tokens':>6} {'H':>3} {'D':>4} {'implementation':<28} {'us':>8} {'GB/s':>7} {'%roof':>6} "
          f"{'maxdiff':>8}", flush=True)
    rows = []
    for (N, T, H, D) in shapes:
        one = N * T * H * (2 * D + 4) + T * H * (2 * D + 4)
        copies = max(1, min(64, math.ceil(MIN_TOUCH / one)))
        po = torch.randn(copies, N, T, H, D, dtype=torch.float16, device="cuda")
        pl = torch.randn(copies, N, T, H, dtype=torch.float32, device="cuda") * 4
        out = torch.empty(copies, T, H, D, dtype=torch.float16, device="cuda")
        olse = torch.empty(copies, T, H, dtype=torch.float32, device="cuda")
        desc = MergeDescC()
        L.r35a_merge_states_desc_init(ctypes.byref(desc), DT["f16"][0], N, T, H, D)
        desc.use_out_lse = 1
        plan = vp()
        lib.check(L.r35a_merge_states_plan(lib.ctx, ctypes.byref(desc), ctypes.byref(plan)), "merge plan")
        pi = lib.plan_info(plan)
        args = [MergeArgsC(ctypes.sizeof(MergeArgsC), po[c].data_ptr(), pl[c].data_ptr(), out[c].data_ptr(),
                           olse[c].data_ptr()) for c in range(copies)]

        def ours(c):
            st = torch.cuda.current_stream().cuda_stream
            lib.check(L.r35a_merge_states_run(lib.ctx, plan, ctypes.byref(args[c]), None, 0, vp(st)), "merge run")
        t = time_graph(ours, copies)
        torch.cuda.synchronize()
        w = torch.softmax(pl[0].double(), dim=0)                       # [N, T, H]
        ref = (w[..., None] * po[0].double()).sum(0)
        maxdiff = float((out[0].double() - ref).abs().max())
        gbs = one / t / 1e9
        rows.append(dict(N=N, T=T, H=H, D=D, impl=pi.implementation.decode(), t_us=t * 1e6, gbs=gbs,
                         roof_pct=100 * gbs / peak, maxdiff=maxdiff))
        print(f"{N:>2} {T:>6} {H:>3} {D:>4} {pi.implementation.decode()[:28]:<28} {t * 1e6:8.1f} {gbs:7.0f} "
              f"{100 * gbs / peak:6.1f} {maxdiff:8.1e}", flush=True)
        L.r35a_plan_destroy(plan)
        del po, pl, out, olse
        torch.cuda.empty_cache()
    return rows


def batch_row(lib, D, G, seqs, dtype="bf16", hkv=8, page=16, vllm=None):
    """One paged call over a batch of unequal sequences, seqs = [(M, L), ...] (M query tokens over L keys,
    causal bottom-right), ours and vLLM's Triton kernel on the same paged cache (torch has no ragged
    call); each copy its own pages (cold L2). Returns times, TFLOP/s and the max difference to vLLM."""
    tdt = DT[dtype][1]
    hq = hkv * G
    B, T = len(seqs), sum(m for m, _ in seqs)
    maxm, maxl = max(m for m, _ in seqs), max(l for _, l in seqs)
    pps = -(-maxl // page)
    kv_bytes_one = sum(l for _, l in seqs) * hkv * D * 2 * 2
    copies = max(1, min(64, math.ceil(MIN_TOUCH / kv_bytes_one)))
    num_pages = copies * B * pps
    kc, vc = random_kv(torch, (num_pages, hkv, page, D), None, tdt)
    bt = torch.randperm(num_pages, device="cuda", dtype=torch.int64).to(torch.int32).view(copies, B, pps).contiguous()
    q = torch.randn(copies, T, hq, D, dtype=tdt, device="cuda")
    o = torch.empty_like(q)
    seq_lens = torch.tensor([l for _, l in seqs], dtype=torch.int32, device="cuda")
    qsl = torch.tensor([0] + list(itertools.accumulate(m for m, _ in seqs)), dtype=torch.int32, device="cuda")
    desc = PagedDescC()
    lib.l.r35a_paged_attention_desc_init(ctypes.byref(desc), DT[dtype][0], B, T, maxm, maxl, hq, hkv, D, page, num_pages)
    plan = ctypes.c_void_p()
    lib.check(lib.l.r35a_paged_attention_plan(lib.ctx, ctypes.byref(desc), ctypes.byref(plan)), "paged plan")
    pi = lib.plan_info(plan)
    ws = torch.empty(max(pi.workspace_bytes, 16), dtype=torch.uint8, device="cuda")
    args = [PagedArgsC(ctypes.sizeof(PagedArgsC), q[c].data_ptr(), kc.data_ptr(), vc.data_ptr(), o[c].data_ptr(),
                       seq_lens.data_ptr(), qsl.data_ptr(), bt[c].data_ptr()) for c in range(copies)]

    def ours(c):
        st = torch.cuda.current_stream().cuda_stream
        lib.check(lib.l.r35a_paged_attention_run(lib.ctx, plan, ctypes.byref(args[c]), ctypes.c_void_p(ws.data_ptr()),
                                                 pi.workspace_bytes, ctypes.c_void_p(st)), "paged run")
    t = time_graph(ours, copies)
    flops = 4.0 * D * hq * sum(l - m + i + 1 for m, l in seqs for i in range(m))
    row = dict(D=D, G=G, seqs=seqs, impl=pi.implementation.decode(), t_ours_us=t * 1e6, flops=flops,
               tflops=flops / t / 1e12, t_vllm_us=None)
    if vllm is not None:
        import peer_vllm_triton
        try:
            pv = peer_vllm_triton.VllmDecode(vllm, D, G, maxm, maxl, B, dtype=tdt, page=page, hkv=hkv, copies=copies,
                                             k_pages=kc, v_pages=vc, block_tables=bt, q=q)
            pv.cu, pv.seq_lens = qsl, seq_lens   # the ragged batch: its own query starts and lengths
            row["t_vllm_us"] = time_graph(pv, copies) * 1e6
            torch.cuda.synchronize()
            row["maxdiff_vllm"] = float((pv.out[0].float() - o[0].float()).abs().max())
            del pv
        except Exception as e:  # noqa: BLE001
            row["err_vllm"] = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
    lib.l.r35a_plan_destroy(plan)
    del kc, vc, q, o, ws
    torch.cuda.empty_cache()
    return row


def mixed_table(lib, spec, vllm):
    """A mixed batch (spec: COUNTxM:L,... e.g. 15x1:8192,1x1024:8192; bf16, D 128, 32 q / 8 kv heads) in
    one call, beside its decode sequences (M <= 8) alone and its longer ones alone, and vLLM's kernel
    on each; the target: mixed <= decode alone + chunk alone."""
    seqs = []
    for it in spec.split(","):
        n, ml = it.split("x") if "x" in it else ("1", it)
        m, l = (int(x) for x in ml.split(":"))
        seqs += [(m, l)] * int(n)
    parts = [("mixed", seqs), ("decode alone", [s for s in seqs if s[0] <= 8]),
             ("longer alone", [s for s in seqs if s[0] > 8])]
    print(f"\n{'part':<13} {'seqs':>4} {'implementation':<70} {'us':>9} {'vllm us':>9} {'r_vllm':>6} {'maxdiff':>8}",
          flush=True)
    rows = []
    for name, ss in parts:
        if not ss:
            continue
        r = batch_row(lib, 128, 4, ss, vllm=vllm)
        r["part"] = name
        rows.append(r)
        tv = r.get("t_vllm_us")
        print(f"{name:<13} {len(ss):>4} {r['impl'][:70]:<70} {r['t_ours_us']:9.1f} {(tv or 0):9.1f} "
              f"{(tv / r['t_ours_us'] if tv else 0):6.2f} {r.get('maxdiff_vllm', float('nan')):8.1e}"
              + (f"  vllm: {r['err_vllm']}" if r.get("err_vllm") else ""), flush=True)
    if len(rows) == 3:
        print(f"mixed / (decode alone + longer alone) = {rows[0]['t_ours_us'] / (rows[1]['t_ours_us'] + rows[2]['t_ours_us']):.3f}",
              flush=True)
    return rows


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--read-cubin", default="")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true", help="a subset of the sweep (first look)")
    ap.add_argument("--skip-encoder", action="store_true")
    ap.add_argument("--skip-decode", action="store_true", help="the encoder part only")
    ap.add_argument("--heads", default="64,128,256,512")
    ap.add_argument("--shapes", default="",
                    help="decode shapes D:G:M:B:CTX,... instead of the sweep (f16, 8 kv heads, page 16: the "
                         "shapes r35a_bench --head-size D --q-heads 8G --m M --batch B --contexts CTX runs)")
    ap.add_argument("--peers", default="flash,cudnn,efficient",
                    help="torch SDPA backends to time next to ours, or 'none'")
    ap.add_argument("--tag", default="bench")
    ap.add_argument("--ctxs", default="1024,2048,4096,8192,16384,32768", help="decode contexts of the sweep")
    ap.add_argument("--features", action="store_true",
                    help="the features table: sinks, softcap, ALiBi and 8-bit KV caches against the plain f16 call on "
                         "the same shapes (ours alone), then the sweep unless --shapes none")
    ap.add_argument("--token-scales", choices=("fp8", "int8"), default="",
                    help="8-bit decode with per-(token, kv head) scales beside per-kv-head scales on the --shapes "
                         "decode shapes (default " + TOKEN_SCALE_SHAPES + "), time ratios; then stops")
    ap.add_argument("--page-order", choices=("shuffled", "sorted"), default="shuffled",
                    help="block-table pages shuffled over the pool (default) or consecutive per sequence")
    ap.add_argument("--kv-layout", choices=("hnd", "head-major", "nhd"), default="hnd",
                    help="the paged cache as [pages][Hkv][page][D] (hnd, default), [Hkv][pages][page][D] (head-major) "
                         "or [pages][page][Hkv][D] (nhd: vLLM's layout, a page's kv heads interleaved slot by slot)")
    ap.add_argument("--page-size", type=int, default=16, help="tokens per page (a multiple of 16 for the decode kernels)")
    ap.add_argument("--prefill", default="", metavar="SHAPES",
                    help="prefill rows instead of the decode sweep: D:M:PREFIX:B,... (bf16, 32 q / 8 kv heads, page "
                         "16, causal; context = PREFIX + M), or 'preset' (r35a_bench --preset prefill's rows), "
                         "then the varlen causal GQA rows; TFLOP/s against torch (same causal mask) and vLLM")
    ap.add_argument("--vllm-triton", default="", metavar="PATH",
                    help="vLLM's triton_unified_attention.py (with triton_quant_kv/_helpers.py beside it): adds its "
                         "column (lab/peer_vllm_triton.py)")
    ap.add_argument("--lse-cost", default="", metavar="SHAPES",
                    help="the LSE output's cost instead of the decode sweep: D:G:M:B:CTX,... without and with use_lse")
    ap.add_argument("--merge", default="", metavar="SHAPES",
                    help="r35a_merge_states instead of the decode sweep: N:TOKENS:HEADS:D,... in GB/s")
    ap.add_argument("--mixed", default="", metavar="BATCH",
                    help="a mixed batch instead of the decode sweep: COUNTxM:L,... (e.g. 15x1:8192,1x1024:8192), "
                         "beside its parts alone, with vLLM's kernel when --vllm-triton is given")
    args = ap.parse_args()
    global PAGE_ORDER, KV_LAYOUT, PAGE_SIZE
    PAGE_ORDER, KV_LAYOUT, PAGE_SIZE = args.page_order, args.kv_layout, args.page_size
    torch.manual_seed(0)
    random.seed(0)
    lib = Lib(args.lib)
    vllm = None
    if args.vllm_triton:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import peer_vllm_triton
        vllm = peer_vllm_triton.load(args.vllm_triton)
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs, torch {torch.__version__}; library: {lib.info}",
          flush=True)
    t0 = time.time()
    (peak, how), rl = roofline(args.read_cubin)
    print(f"roofline: {peak:.0f} GB/s ({how}); torch copy (read+write) {rl['torch_copy_rw']:.0f} GB/s", flush=True)
    result = dict(device=dev.name, library=lib.info, roofline_gbs=peak, roofline_how=how, roofline_all=rl,
                  decode=[], encoder=[])
    heads = [int(x) for x in args.heads.split(",")]
    ctxs = [int(x) for x in args.ctxs.split(",")]
    if args.features:
        result["features"] = features_table(lib, peak)
    if args.token_scales:
        result["token_scales"] = token_scales_table(lib, peak, args.token_scales,
                                                    args.shapes if args.shapes and args.shapes != "none"
                                                    else TOKEN_SCALE_SHAPES)
        args.shapes = "none"
        args.skip_encoder = True
    shapes = [(D, G, M, c, B) for D in heads for G in (4, 8) for M in (1, 4) for B in (1, 16) for c in ctxs]
    if args.quick:
        shapes = [s for s in shapes if s[3] in (1024, 8192, 32768) and not (s[1] == 8 and s[2] == 4)]
    if args.shapes == "none":
        shapes = []
    elif args.shapes:
        shapes = [tuple(int(x) for x in item.split(":")) for item in args.shapes.split(",")]
        shapes = [(D, G, M, c, B) for (D, G, M, B, c) in shapes]
    if args.skip_decode or args.prefill or args.lse_cost or args.merge or args.mixed:
        shapes = []
        args.skip_encoder = args.skip_encoder or not args.prefill and not args.skip_decode
    if args.lse_cost:
        result["lse_cost"] = lse_cost_table(lib, args.lse_cost)
    if args.merge:
        result["merge"] = merge_table(lib, args.merge, peak)
    if args.mixed:
        result["mixed"] = mixed_table(lib, args.mixed, vllm)
    if args.prefill:
        result["prefill"] = prefill_table(lib, args.prefill, peers_of(args), vllm, args.out, args.tag, result)
        args.skip_encoder = True
    peers = peers_of(args)
    if shapes:
        print(f"\n{'D':>4} {'G':>2} {'M':>2} {'B':>3} {'ctx':>6} {'variant':<36} {'spl':>3} {'us':>9} {'GB/s':>7} "
          f"{'%roof':>6} {'flash':>9} {'cudnn':>9} {'effic':>9} {'ratio':>6} {'maxdiff':>8}"
          + (f" {'vllm':>9} {'r_vllm':>6}" if vllm else ""), flush=True)
    for (D, G, M, c, B) in shapes:
        try:
            r = decode_row(lib, D, G, M, c, B, peers=peers, vllm=vllm)
        except Exception as e:  # noqa: BLE001
            print(f"{D:>4} {G:>2} {M:>2} {B:>3} {c:>6} ERROR {e}", flush=True)
            result["decode"].append(dict(D=D, G=G, M=M, ctx=c, B=B, error=str(e)))
            torch.cuda.empty_cache()
            continue
        r["roof_pct"] = 100 * r["gbs"] / peak
        result["decode"].append(r)
        with open(os.path.join(args.out, f"{args.tag}.json"), "w") as fjson:   # partial results survive a timeout
            json.dump(result, fjson, indent=1)
        f = lambda x: f"{x:9.1f}" if x else f"{'-':>9}"  # noqa: E731
        print(f"{D:>4} {G:>2} {M:>2} {B:>3} {c:>6} {r['impl'][:36]:<36} {r['splits']:>3} {r['t_ours_us']:9.1f} "
              f"{r['gbs']:7.0f} {r['roof_pct']:6.1f} {f(r.get('t_flash_us'))} {f(r.get('t_cudnn_us'))} "
              f"{f(r.get('t_efficient_us'))} {r['ratio'] or 0:6.2f} {r.get('maxdiff', float('nan')):8.1e}"
              + (f" {f(r.get('t_vllm_us'))} {r.get('ratio_vllm') or 0:6.2f}" if vllm else ""), flush=True)
    dec = [r for r in result["decode"] if "error" not in r]
    result["decode_geomean_ratio"] = geomean([r["ratio"] for r in dec])
    result["decode_min_ratio"] = min((r["ratio"] for r in dec if r["ratio"]), default=None)
    if vllm:
        result["decode_geomean_ratio_vllm"] = geomean([r.get("ratio_vllm") for r in dec])
        result["decode_min_ratio_vllm"] = min((r["ratio_vllm"] for r in dec if r.get("ratio_vllm")), default=None)
    for lo, hi, name in ((8192, 1 << 30, ">=8K"), (1024, 1024, "1K")):
        sel = [r["roof_pct"] for r in dec if lo <= r["ctx"] <= hi]
        if sel:
            result[f"roof_pct_min_{name}"] = min(sel)
            result[f"roof_pct_median_{name}"] = statistics.median(sel)
    if not args.skip_encoder:
        print(f"\n{'D':>4} {'H':>3} {'seg':>5} {'nseg':>4} {'set':>5} {'variant':<40} {'us':>9} {'TFLOP/s':>8} "
              f"{'flash us':>9} {'ratio':>6} {'maxdiff':>8}", flush=True)
        for (D, H, seg, nseg, kind) in encoder_shapes():
            try:
                r = encoder_row(lib, D, H, seg, nseg)
            except Exception as e:  # noqa: BLE001
                print(f"{D:>4} {H:>3} {seg:>5} {nseg:>4} ERROR {e}", flush=True)
                continue
            r["set"] = kind
            result["encoder"].append(r)
            print(f"{D:>4} {H:>3} {seg:>5} {nseg:>4} {kind:>5} {r['impl'][:40]:<40} {r['t_ours_us']:9.1f} "
                  f"{r['tflops']:8.1f} {(r.get('t_flash_us') or 0):9.1f} {(r.get('ratio') or 0):6.2f} "
                  f"{r.get('maxdiff', float('nan')):8.1e}", flush=True)
        main21 = [r.get("ratio") for r in result["encoder"] if r["set"] == "21"]
        result["encoder_geomean_ratio"] = geomean(main21)
        result["encoder_min_ratio"] = min((x for x in main21 if x), default=None)
    with open(os.path.join(args.out, f"{args.tag}.json"), "w") as fjson:
        json.dump(result, fjson, indent=1)
    print(f"\nroofline {peak:.0f} GB/s | decode: geomean ratio vs best torch {result['decode_geomean_ratio']:.2f}, "
          f"min {result['decode_min_ratio'] or 0:.2f} | %roof >=8K min {result.get('roof_pct_min_>=8K', 0):.1f} "
          f"median {result.get('roof_pct_median_>=8K', 0):.1f} | 1K min {result.get('roof_pct_min_1K', 0):.1f} | "
          f"encoder geomean vs flash over the 21 shapes {result.get('encoder_geomean_ratio', float('nan')):.2f} "
          f"(min {result.get('encoder_min_ratio') or 0:.2f}) | "
          + (f"vs vLLM Triton: geomean {result['decode_geomean_ratio_vllm']:.2f}, min "
             f"{result['decode_min_ratio_vllm'] or 0:.2f} | " if vllm else "") + f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
