"""gpu_timing.py - the one CUDA-graph timing loop of the lab's GPU scripts (bench_gpu.py, peer_vllm_triton.py,
tune_variants.py, tune_encoder.py, and decode_ab.py through bench_gpu.py).

time_graph(fn, copies) captures fn(0) .. fn(copies - 1) in one CUDA graph (each c addresses its own copy of
the inputs, so a cold-cache working set rotates through the graph), replays it `warm` times, then times
`reps` replays with CUDA events and returns the median time of one call in seconds. A warm-up pass runs
outside the graph first, on a side stream, so lazy initialisation and autotuning (Triton compiles there)
are not captured. torch is imported on first use: the scripts that only build or tabulate never need it.
"""
import statistics


def time_graph(fn, copies, reps=15, warm=3):
    """Median seconds of one call: fn(c) for c in range(copies) captured in one graph, replays timed."""
    import torch
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for c in range(copies):        # warm-up outside the graph (lazy init, autotuning)
            fn(c)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode="relaxed"):
        for c in range(copies):
            fn(c)
    for _ in range(warm):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3 / copies)
    del g
    return statistics.median(times)
