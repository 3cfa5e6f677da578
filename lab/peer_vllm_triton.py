#!/usr/bin/env python3
"""peer_vllm_triton.py - vLLM's Triton unified attention kernel as a benchmark peer (outside the library).

vLLM's TRITON_ATTN backend runs vllm/v1/attention/ops/triton_unified_attention.py (public repository
vllm-project/vllm). vLLM itself is not installed here: this runner loads that file from a path given on
the command line (with the helpers it imports, triton_quant_kv/_helpers.py, from the same folder or
--helpers), stubs the few vllm modules it imports (envs, logger, platforms, triton_utils,
kv_cache_interface), and calls unified_attention() the way vLLM's TritonAttentionBackend does for a
decode batch: the cache laid out [blocks, 2, page, Hkv, D] (K and V are views of it), block table,
query_start_loc, seq_lens, and for max_query_len = 1 with num_seqs <= 128 // Hkv the "3D" split path
with 16 softmax segments (vLLM's MIN_LAUNCH_GRID_SIZE_2D = 128, NUM_PAR_SOFTMAX_SEGMENTS = 16).

Nothing of vLLM is committed to this project: keep the kernel file in a git-ignored folder and pass
its path.

    python3 lab/peer_vllm_triton.py --file .dev/peers/triton_unified_attention.py [--quick] [--out DIR]

Standalone it times a few decode shapes (CUDA graphs, cold cache: >= 512 MiB of disjoint pages per
replay, median of 15 replays, as lab/bench_gpu.py) and checks the output against torch SDPA.
lab/bench_gpu.py --vllm-triton PATH adds its column to the sweep through VllmDecode below.
"""
import argparse
import enum
import importlib.util
import json
import logging
import math
import os
import sys
import types

import torch
from gpu_timing import time_graph  # the lab's one CUDA-graph timing loop

MIN_LAUNCH_GRID_SIZE_2D = 128   # vLLM's TritonAttentionBackend constants
NUM_PAR_SOFTMAX_SEGMENTS = 16


class KVQuantMode(enum.IntEnum):   # vllm.v1.kv_cache_interface.KVQuantMode (the values the kernel tests)
    NONE = 0
    FP8_PER_TENSOR = 1
    INT8_PER_TOKEN_HEAD = 2
    FP8_PER_TOKEN_HEAD = 3
    INT4_PER_TOKEN_HEAD = 4
    INT2_PER_TOKEN_HEAD = 5


def _module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    m.__path__ = []   # a package, so submodules resolve
    sys.modules[name] = m
    return m


def load(path, helpers=None):
    """Imports vLLM's triton_unified_attention.py from `path` with its vllm imports stubbed; returns the module."""
    import triton
    import triton.language as tl
    helpers = helpers or os.path.join(os.path.dirname(os.path.abspath(path)), "_helpers.py")
    for f in (path, helpers):
        if not os.path.exists(f):
            raise FileNotFoundError(f"{f} not found (vLLM's kernel file and triton_quant_kv/_helpers.py)")
    _module("vllm")
    _module("vllm.envs", VLLM_BATCH_INVARIANT=False)
    _module("vllm.logger", init_logger=logging.getLogger)
    _module("vllm.platforms", current_platform=types.SimpleNamespace(fp8_dtype=lambda: torch.float8_e4m3fn))
    _module("vllm.triton_utils", tl=tl, triton=triton)
    _module("vllm.v1")
    _module("vllm.v1.kv_cache_interface", KVQuantMode=KVQuantMode)
    _module("vllm.v1.attention")
    _module("vllm.v1.attention.ops")
    _module("vllm.v1.attention.ops.triton_quant_kv")
    for name, f in (("vllm.v1.attention.ops.triton_quant_kv._helpers", helpers),
                    ("vllm.v1.attention.ops.triton_unified_attention", path)):
        spec = importlib.util.spec_from_file_location(name, f)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules["vllm.v1.attention.ops.triton_unified_attention"]


class VllmDecode:
    """One decode batch in vLLM's layout: B sequences of ctx keys, M query tokens each, `copies` disjoint
    sets of pages (one block table per copy) for cold-cache timing. k_pages/v_pages: optional
    [num_pages, Hkv, page, D] contents (the library's bench layout) to copy in, so outputs compare."""

    def __init__(self, mod, D, G, M, ctx, B, dtype=torch.float16, page=16, hkv=8, copies=1, k_pages=None,
                 v_pages=None, block_tables=None, q=None):
        self.mod, self.M, self.B, self.hkv, self.D = mod, M, B, hkv, D
        hq = hkv * G
        pps = ctx // page
        num_pages = copies * B * pps if k_pages is None else k_pages.shape[0]
        cache = torch.empty(num_pages, 2, page, hkv, D, dtype=dtype, device="cuda")
        if k_pages is None:
            cache.normal_()
        else:
            cache[:, 0].copy_(k_pages.permute(0, 2, 1, 3))
            cache[:, 1].copy_(v_pages.permute(0, 2, 1, 3))
        self.cache = cache
        self.k, self.v = cache[:, 0], cache[:, 1]   # [blocks, page, Hkv, D] views, as vLLM splits its cache
        if block_tables is None:
            block_tables = torch.randperm(num_pages, device="cuda").to(torch.int32).view(copies, B, pps)
        self.bt = block_tables.contiguous()
        self.q = (torch.randn(copies, B * M, hq, D, dtype=dtype, device="cuda") if q is None else q)
        self.out = torch.empty_like(self.q)
        self.cu = torch.arange(0, B * M + 1, M, dtype=torch.int32, device="cuda")
        self.seq_lens = torch.full((B,), ctx, dtype=torch.int32, device="cuda")
        self.ctx = ctx
        self.threshold = MIN_LAUNCH_GRID_SIZE_2D // hkv
        # vLLM sizes the segment buffers for its largest decode batch; per token here
        dpad = triton_next_pow2(D)
        T = B * M
        self.segm_out = torch.empty(T, hq, NUM_PAR_SOFTMAX_SEGMENTS, dpad, dtype=torch.float32, device="cuda")
        self.segm_max = torch.empty(T, hq, NUM_PAR_SOFTMAX_SEGMENTS, dtype=torch.float32, device="cuda")
        self.segm_sum = torch.empty(T, hq, NUM_PAR_SOFTMAX_SEGMENTS, dtype=torch.float32, device="cuda")
        self.uses_3d = M == 1 and B <= self.threshold

    def __call__(self, c):
        self.mod.unified_attention(
            q=self.q[c], k=self.k, v=self.v, out=self.out[c], cu_seqlens_q=self.cu, max_seqlen_q=self.M,
            seqused_k=self.seq_lens, max_seqlen_k=self.ctx, softmax_scale=self.D ** -0.5, causal=True,
            window_size=(-1, -1), block_table=self.bt[c], softcap=0, q_descale=None, k_descale=None,
            v_descale=None, seq_threshold_3D=self.threshold, num_par_softmax_segments=NUM_PAR_SOFTMAX_SEGMENTS,
            softmax_segm_output=self.segm_out, softmax_segm_max=self.segm_max, softmax_segm_expsum=self.segm_sum)


def triton_next_pow2(n):
    return 1 << (n - 1).bit_length()


def reference(q, k_pages, v_pages, bt, B, M, ctx, hkv, D):
    """torch SDPA on copy 0 (M = 1: the causal mask changes nothing)."""
    idx = bt.long()
    k = k_pages[idx].permute(0, 2, 1, 3, 4).reshape(B, hkv, ctx, D)
    v = v_pages[idx].permute(0, 2, 1, 3, 4).reshape(B, hkv, ctx, D)
    qq = q.view(B, M, -1, D).transpose(1, 2)
    o = torch.nn.functional.scaled_dot_product_attention(qq, k, v, enable_gqa=True)
    return o.transpose(1, 2).reshape(B * M, -1, D).float()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", required=True, help="vLLM's triton_unified_attention.py")
    ap.add_argument("--helpers", default=None, help="its triton_quant_kv/_helpers.py (default: beside --file)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    mod = load(args.file, args.helpers)
    shapes = [(D, G, M, c, B) for D in (64, 128, 256) for G in (4, 8) for M in (1, 4) for B in (1, 16)
              for c in ((1024, 8192, 32768) if not args.quick else (8192,))]
    rows = []
    print(f"{'D':>4} {'G':>2} {'M':>2} {'B':>3} {'ctx':>6} {'3D':>3} {'us':>9} {'GB/s':>7} {'maxdiff':>8}", flush=True)
    for (D, G, M, ctx, B) in shapes:
        hkv, page = 8, 16
        kv_one = B * ctx * hkv * D * 4
        copies = max(1, min(64, math.ceil((512 << 20) / kv_one)))
        pps = ctx // page
        npages = copies * B * pps
        kp = torch.randn(npages, hkv, page, D, dtype=torch.float16, device="cuda")
        vp = torch.randn_like(kp)
        bt = torch.randperm(npages, device="cuda").to(torch.int32).view(copies, B, pps)
        p = VllmDecode(mod, D, G, M, ctx, B, page=page, hkv=hkv, copies=copies, k_pages=kp, v_pages=vp,
                       block_tables=bt)
        t = time_graph(p, copies)
        moved = kv_one + 2 * B * M * hkv * G * D * 2 + B * pps * 4
        diff = float("nan")
        if M == 1:
            p(0)
            torch.cuda.synchronize()
            diff = float((p.out[0].float() - reference(p.q[0], kp, vp, bt[0], B, M, ctx, hkv, D)).abs().max())
        rows.append(dict(D=D, G=G, M=M, ctx=ctx, B=B, uses_3d=p.uses_3d, t_us=t * 1e6, gbs=moved / t / 1e9,
                         maxdiff=diff))
        print(f"{D:>4} {G:>2} {M:>2} {B:>3} {ctx:>6} {int(p.uses_3d):>3} {t * 1e6:9.1f} {moved / t / 1e9:7.0f} "
              f"{diff:8.1e}", flush=True)
        del p, kp, vp, bt
        torch.cuda.empty_cache()
    with open(os.path.join(args.out, "peer_vllm_triton.json"), "w") as f:
        json.dump(dict(device=torch.cuda.get_device_name(0), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
