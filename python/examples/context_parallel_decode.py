"""Context-parallel decode: each rank holds a range of every sequence's pages, runs the library's
paged decode over its shard with the softmax LSE, the ranks exchange (O, LSE), and merge_states
joins them into the unsharded call's rows (rdna35attn.h, "Sharding a paged call").

    python3 context_parallel_decode.py                      one process plays every rank (CPU reference)
    python3 context_parallel_decode.py --device cuda        the same on one GPU, the shards as separate calls
    torchrun --nproc-per-node R context_parallel_decode.py --device cuda
                                                            R GPUs, one shard each, all-gather over NCCL

The exchange is torch.distributed's all_gather (NCCL on GPUs): the library has no transport of its
own. The merged rows are checked against the unsharded call and against float64 numpy."""
import argparse
import os

import numpy as np
import rdna35attn

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
p.add_argument("--shards", type=int, default=4, help="shards when one process plays every rank")
p.add_argument("--seed", type=int, default=0)
args = p.parse_args()

dist = None
if "RANK" in os.environ:                                       # launched by torchrun: one shard per rank
    import torch
    import torch.distributed as dist
    if args.device != "cuda":
        raise SystemExit("under torchrun, pass --device cuda (one GPU per rank, NCCL)")
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
rank, world = (dist.get_rank(), dist.get_world_size()) if dist else (0, args.shards)

# One batch of long decode rows, the same on every rank (seeded): 2 sequences, GQA 8 / 2, D 64, f16.
rng = np.random.default_rng(args.seed)
PAGE, HQ, HKV, D = 16, 8, 2, 64
seq_lens = np.array([1000, 777], np.int32)
pages_per_seq = -(-seq_lens // PAGE)
block_table = np.full((2, pages_per_seq.max()), -1, np.int32)
perm = rng.permutation(int(pages_per_seq.sum()))               # pages scattered through the cache
block_table[0, :pages_per_seq[0]] = perm[:pages_per_seq[0]]
block_table[1, :pages_per_seq[1]] = perm[pages_per_seq[0]:]
k_cache = rng.standard_normal((len(perm), HKV, PAGE, D)).astype(np.float16)
v_cache = rng.standard_normal((len(perm), HKV, PAGE, D)).astype(np.float16)
q = rng.standard_normal((2, HQ, D)).astype(np.float16)          # one query token per sequence
query_start_loc = np.array([0, 1, 2], np.int32)


def shard(r, shards):
    """Shard r of `shards`: pages [a, b) of each sequence's row -> its block_table rows and seq_lens.
    The last shard ends at L (the query stays at its position); a decode row sees every other
    shard whole."""
    table = np.full_like(block_table, -1)
    lens = np.zeros_like(seq_lens)
    for s, n in enumerate(pages_per_seq):
        a, b = n * r // shards, n * (r + 1) // shards
        table[s, :b - a] = block_table[s, a:b]
        lens[s] = max(0, min(int(seq_lens[s]), b * PAGE) - a * PAGE)
    return table, lens


if args.device == "cuda":
    import torch
    dev = lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda()
    host = lambda t: t.cpu().numpy()
    empty = lambda shape, dtype: torch.empty(shape, dtype=dtype, device="cuda")
    f16, f32 = torch.float16, torch.float32
else:
    dev = host = lambda a: a
    empty = lambda shape, dtype: np.empty(shape, dtype)
    f16, f32 = np.float16, np.float32
q_d, k_d, v_d, qsl_d = dev(q), dev(k_cache), dev(v_cache), dev(query_start_loc)


def attend(table, lens):
    """One paged decode call (the library's) with its LSE: (O, LSE) of every row."""
    out, lse = empty(q.shape, f16), empty(q.shape[:2], f32)
    rdna35attn.paged_attention(q_d, k_d, v_d, dev(lens), qsl_d, dev(table), out=out, lse=lse,
                               max_seq_len=int(seq_lens.max()), max_query_len=1)
    return out, lse


if dist:                                                       # this rank's shard, then all-gather over NCCL
    o, lse = attend(*shard(rank, world))
    parts_o, parts_lse = [torch.empty_like(o) for _ in range(world)], [torch.empty_like(lse) for _ in range(world)]
    dist.all_gather(parts_o, o)
    dist.all_gather(parts_lse, lse)
    parts_o, parts_lse = torch.stack(parts_o), torch.stack(parts_lse)
else:                                                          # one process runs every rank's shard
    states = [attend(*shard(r, world)) for r in range(world)]
    stack = torch.stack if args.device == "cuda" else np.stack
    parts_o, parts_lse = stack([s[0] for s in states]), stack([s[1] for s in states])

merged, merged_lse = rdna35attn.merge_states(parts_o, parts_lse, out=empty(q.shape, f16),
                                             out_lse=empty(q.shape[:2], f32))
whole, whole_lse = attend(block_table, seq_lens)               # the unsharded call

# float64 truth
want = np.zeros(q.shape)
want_lse = np.zeros(q.shape[:2])
for s, length in enumerate(seq_lens):
    pos = np.arange(length)
    pages, slots = block_table[s, pos // PAGE], pos % PAGE
    for h in range(HQ):
        k = k_cache[pages, h // (HQ // HKV), slots].astype(np.float64)
        v = v_cache[pages, h // (HQ // HKV), slots].astype(np.float64)
        logits = k @ q[s, h].astype(np.float64) / np.sqrt(D)
        m = logits.max()
        w = np.exp(logits - m)
        want[s, h], want_lse[s, h] = (w / w.sum()) @ v, m + np.log(w.sum())

merged, merged_lse, whole, whole_lse = (host(x).astype(np.float64) for x in (merged, merged_lse, whole, whole_lse))
err_merged = np.abs(merged - want).max()
err_whole = np.abs(whole - want).max()
err_lse = np.abs(merged_lse - want_lse).max()
assert err_merged <= 4e-3 and err_whole <= 4e-3 and err_lse <= 1e-4, (err_merged, err_whole, err_lse)
if rank == 0:
    print("context-parallel decode over %d shards on %s: max|merged - float64| %.2e, max|unsharded - float64| "
          "%.2e, max|merged LSE - float64| %.2e" % (world, rdna35attn.default_context(
              "gpu" if args.device == "cuda" else "reference").info.backend_name, err_merged, err_whole, err_lse))
if dist:
    dist.destroy_process_group()
