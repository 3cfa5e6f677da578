#!/usr/bin/env python3
"""decode_timeline.py - where one decode launch's time goes, workgroup by workgroup (NVIDIA; a measurement,
not part of the library or its tests).

Needs a measurement build of the library whose decode kernels record globaltimer stamps
(kernels/decode/timing.h, R35A_LAB_DECODE_TIMING): entry, loop end, exit and SM of every workgroup of the decode
launch, and entry and exit of every workgroup of its split merge launch (decode_merge_<dtype>):

    cmake -S . -B build-tm -DCMAKE_BUILD_TYPE=Release -DR35A_NVIDIA_TARGETS=sm_90 -DR35A_GPU_TARGETS= \
        -DR35A_NVIDIA_EMULATION_CUBINS=OFF -DR35A_BUILD_TESTS=OFF -DR35A_LAB_BUILD=ON -DR35A_LAB_DEFINES=R35A_LAB_DECODE_TIMING=1
    cmake --build build-tm --target rdna35attn
    python3 lab/decode_timeline.py build-tm/librdna35attn.so.0 [D:G:M:B:CTX,...]

f16, 8 kv heads, page 16, shuffled pages, >= 1 GiB of disjoint copies rotated (cold L2); each launch is
timed alone with events (both launches included, so 'event' is above a graph's time) and the call with
the median span (first entry to last exit) is printed: min / p10 / median / max over the
workgroups, in us. R35A_DECODE_SPLITS=n (read once per process) overrides the planner's splits. A
single-split plan has no workspace, so its launch writes no stamps (the tool says so and goes on).
"""
import ctypes, math, os, statistics, sys
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "lab"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import torch
import bench_gpu as bg
from rdna35attn._lib import PagedArgsC, PagedDescC

def run(lib, D, G, M, ctx, B, hkv=8, page=16, reps=7):
    hq = hkv * G
    kvb = B * ctx * hkv * D * 4
    copies = max(1, min(16, math.ceil((1 << 30) / kvb)))
    pps = ctx // page
    npages = copies * B * pps
    kc = torch.randn(npages, hkv, page, D, dtype=torch.float16, device="cuda")
    vc = torch.randn_like(kc)
    bt = torch.randperm(npages, device="cuda").to(torch.int32).view(copies, B, pps).contiguous()
    q = torch.randn(B * M, hq, D, dtype=torch.float16, device="cuda")
    o = torch.empty_like(q)
    sl = torch.full((B,), ctx, dtype=torch.int32, device="cuda")
    qsl = torch.arange(0, B * M + 1, M, dtype=torch.int32, device="cuda")
    desc = PagedDescC()
    lib.l.r35a_paged_attention_desc_init(ctypes.byref(desc), 1, B, B * M, M, ctx, hq, hkv, D, page, npages)
    plan = ctypes.c_void_p()
    lib.check(lib.l.r35a_paged_attention_plan(lib.ctx, ctypes.byref(desc), ctypes.byref(plan)), "plan")
    pi = lib.plan_info(plan)
    if pi.num_splits <= 1:   # the kernel gets no workspace pointer, so it writes no stamps
        print(f"D{D} G{G} M{M} B{B} ctx{ctx}: one split, no workspace, no stamps (R35A_DECODE_SPLITS=2 shows a split run)")
        lib.l.r35a_plan_destroy(plan)
        return
    grid = list(pi.grid)
    nblk = grid[0] * grid[1] * grid[2]
    # the split merge's workgroups follow the decode grid's: at most 32 rows x 512 d / 4 x 4 lanes / 128
    # threads = 128 per (kv head x row group, sequence)
    nblk += 128 * grid[1] * grid[2]
    extra = 128 * nblk
    ws = torch.zeros(pi.workspace_bytes + extra + 256, dtype=torch.uint8, device="cuda")
    wsbytes = pi.workspace_bytes + extra + 256
    rows = []
    evt = []
    for r in range(reps + 2):
        c = r % copies
        a = PagedArgsC(ctypes.sizeof(PagedArgsC), q.data_ptr(), kc.data_ptr(), vc.data_ptr(), o.data_ptr(),
                       sl.data_ptr(), qsl.data_ptr(), bt[c].data_ptr(), None, None, None, None)
        ws[pi.workspace_bytes:].zero_()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        lib.check(lib.l.r35a_paged_attention_run(lib.ctx, plan, ctypes.byref(a), ctypes.c_void_p(ws.data_ptr()),
                                                 wsbytes, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)), "run")
        e1.record(); e1.synchronize()
        t = ws[pi.workspace_bytes:pi.workspace_bytes + extra].view(torch.int64).view(nblk, 16).cpu()
        if r >= 2:
            rows.append(t); evt.append(e0.elapsed_time(e1) * 1e3)
    lib.l.r35a_plan_destroy(plan)
    # the median launch by span
    spans = []
    for t in rows:
        v = t[t[:, 0] != 0]
        if len(v) == 0:
            sys.exit("decode_timeline: no stamps: the library was not a lab build with R35A_LAB_DECODE_TIMING=1 "
                     "(see this file's header)")
        spans.append(((v[:, 2].max() - v[:, 0].min()).item() / 1e3, v))
    spans.sort(key=lambda x: x[0])
    span, v = spans[len(spans) // 2]
    t0 = v[:, 0].min().item()
    st = (v[:, 0] - t0).double() / 1e3; lp = (v[:, 1] - v[:, 0]).double() / 1e3; en = (v[:, 2] - t0).double() / 1e3
    tail = (v[:, 2] - v[:, 1]).double() / 1e3
    sm = (v[:, 3] & 0xffffffff); merged = (v[:, 3] >> 32) != 0   # merged: a workgroup of the split merge
    q = lambda x: "%6.1f %6.1f %6.1f %6.1f" % (x.min().item(), x.quantile(0.1).item(), x.median().item(), x.max().item())
    print(f"D{D} G{G} M{M} B{B} ctx{ctx}: impl {pi.implementation.decode()} splits {pi.num_splits} grid {grid} "
          f"blocks-with-work {len(v)}; event {statistics.median(evt):.1f} us (min {min(evt):.1f}); span {span:.1f} us")
    print("   (us; min p10 median max)   start " + q(st) + " | loop " + q(lp) + " | after-loop " + q(tail) + " | end " + q(en))
    if merged.any():
        dec = ~merged
        print(f"   decode blocks {int(dec.sum())}: end " + q(en[dec]) + f"; split merge blocks {int(merged.sum())}: start "
              + q(st[merged]) + " | duration " + q(en[merged] - st[merged]) + " | end " + q(en[merged]))
        print(f"   gap from the last decode exit to the first merge entry {st[merged].min().item() - en[dec].max().item():.1f} us")
    # per SM: first start, last end, busy (sum of block durations / 2 slots)
    smend = {}; smstart = {}; smn = {}
    for i in range(len(v)):
        s = int(sm[i]); smend[s] = max(smend.get(s, 0), en[i].item()); smstart[s] = min(smstart.get(s, 1e9), st[i].item()); smn[s] = smn.get(s, 0) + 1
    ends = torch.tensor(sorted(smend.values()))
    print(f"   SMs used {len(smend)}; blocks per SM {sorted(set(smn.values()))}; SM last end: " + q(ends))
    # block duration vs order of start
    dur = (en - st)
    print("   block duration " + q(dur))

def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lib = bg.Lib(sys.argv[1])
    shapes = sys.argv[2] if len(sys.argv) > 2 else "128:4:1:1:32768,128:4:1:16:8192,128:4:1:1:1024,64:4:1:1:32768"
    for sh in shapes.split(","):
        D, G, M, B, ctx = map(int, sh.split(":"))
        run(lib, D, G, M, ctx, B)


if __name__ == "__main__":
    main()
