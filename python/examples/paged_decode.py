"""A paged decode through the rdna35attn Python package, checked against float64 numpy.
(The README's Python example; CI runs it through the pip-installed package.)"""
import numpy as np
import rdna35attn

rng = np.random.default_rng(0)
q = rng.standard_normal((2, 8, 64)).astype(np.float16)            # [tokens, q_heads, head_size]
k_cache = rng.standard_normal((4, 2, 16, 64)).astype(np.float16)  # [pages, kv_heads, page_size, head_size]
v_cache = rng.standard_normal((4, 2, 16, 64)).astype(np.float16)
seq_lens = np.array([20, 9], np.int32)                            # context of each sequence
query_start_loc = np.array([0, 1, 2], np.int32)                   # one query token per sequence
block_table = np.array([[3, 0], [1, -1]], np.int32)               # the pages of each sequence

out = rdna35attn.paged_attention(q, k_cache, v_cache, seq_lens, query_start_loc, block_table)

for s, length in enumerate(seq_lens):                             # the same in float64
    pos = np.arange(length)
    pages, slots = block_table[s, pos // 16], pos % 16
    for h in range(8):                                            # GQA: q head h reads kv head h // 4
        k = k_cache[pages, h // 4, slots].astype(np.float64)
        v = v_cache[pages, h // 4, slots].astype(np.float64)
        w = np.exp(k @ q[s, h] / np.sqrt(64))
        assert np.allclose(out[s, h], (w / w.sum()) @ v, atol=3e-3)

try:
    rdna35attn.paged_attention(q, k_cache, v_cache, seq_lens, query_start_loc, block_table[:, :1])
except rdna35attn.InvalidArgumentError as e:                      # every status has its exception
    print(e.status_name, e.field)                                 # R35A_ERR_INVALID_ARGUMENT block_table.shape
print("paged decode ok on", rdna35attn.default_context("reference").info.backend_name)
