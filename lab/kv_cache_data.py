"""kv_cache_data.py - random paged K/V cache contents for the GPU tools (lab/bench_gpu.py and
lab/tune_variants.py), one definition of what each K/V format's test data is."""


def random_kv(torch, shape, kv, dtype):
    """A (K, V) pair of CUDA tensors of `shape`: kv "16" (or None / "") normal values in `dtype`
    (torch.float16 / torch.bfloat16); "fp8" finite e4m3fn codes (no S.1111.111, magnitudes up to 240) as
    uint8; "int8" the whole int8 range."""
    if kv == "fp8":
        def codes():
            c = torch.randint(0, 0x77, shape, dtype=torch.uint8, device="cuda")
            return c | (torch.randint(0, 2, shape, dtype=torch.uint8, device="cuda") << 7)
        return codes(), codes()
    if kv == "int8":
        return tuple(torch.randint(-128, 128, shape, dtype=torch.int8, device="cuda") for _ in range(2))
    return tuple(torch.randn(shape, dtype=dtype, device="cuda") for _ in range(2))
