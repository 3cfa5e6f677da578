"""Paged attention through the shim, against the numpy float64 oracle, on the reference backend."""
import ctypes
import unittest
import zlib

import numpy as np

import _oracle
import rdna35attn


def paged_problem(rng, dtype, seq_lens, query_lens, num_q_heads, num_kv_heads, head_size, page_size,
                  kv_layout="HND", window=0, spare_pages=3):
    """Random inputs. Pages are handed out in a shuffled order; block-table entries a query can never
    reach (past the sequence, or before its window) hold -1."""
    seq_lens = np.asarray(seq_lens, np.int32)
    query_lens = np.asarray(query_lens, np.int32)
    pages_per_seq = [-(-int(n) // page_size) for n in seq_lens]
    width = max(max(pages_per_seq), 1)
    num_pages = sum(pages_per_seq) + spare_pages
    order = rng.permutation(num_pages).astype(np.int32)
    block_table = np.full((len(seq_lens), width), -1, np.int32)
    used = 0
    for s, count in enumerate(pages_per_seq):
        first_page = 0
        if window > 0 and query_lens[s] > 0:
            first_page = max(0, int(seq_lens[s]) - int(query_lens[s]) - window + 1) // page_size
        block_table[s, first_page:count] = order[used + first_page:used + count]
        used += count
    query_start_loc = np.concatenate([[0], np.cumsum(query_lens)]).astype(np.int32)
    num_tokens = int(query_start_loc[-1])
    cache_shape = (num_pages, num_kv_heads, page_size, head_size) if kv_layout == "HND" else \
        (num_pages, page_size, num_kv_heads, head_size)
    q, q64 = _oracle.make(rng, (num_tokens, num_q_heads, head_size), dtype)
    k, k64 = _oracle.make(rng, cache_shape, dtype)
    v, v64 = _oracle.make(rng, cache_shape, dtype)
    return dict(q=q, k=k, v=v, q64=q64, k64=k64, v64=v64, seq_lens=seq_lens, query_start_loc=query_start_loc,
                block_table=block_table)


class PagedAttentionTest(unittest.TestCase):
    def setUp(self):
        self.seed = int(_oracle.seed())
        self.rng = np.random.default_rng([self.seed, zlib.crc32(self.id().encode())])
        self.ctx = rdna35attn.Context("reference")

    def tearDown(self):
        self.ctx.close()

    def check(self, dtype, seq_lens, query_lens, num_q_heads, num_kv_heads, head_size, page_size,
              kv_layout="HND", window=0, softmax_scale=None, logit_softcap=0.0, alibi=False):
        p = paged_problem(self.rng, dtype, seq_lens, query_lens, num_q_heads, num_kv_heads, head_size, page_size,
                          kv_layout, window)
        slopes = (self.rng.uniform(0.01, 0.5, num_q_heads).astype(np.float32) if alibi else None)
        out = np.full(p["q"].shape, np.nan if dtype != "bfloat16" else 0x7FC0, p["q"].dtype)  # poisoned
        got = rdna35attn.paged_attention(
            p["q"], p["k"], p["v"], p["seq_lens"], p["query_start_loc"], p["block_table"], out=out,
            context=self.ctx, dtype=dtype, kv_layout=kv_layout, window=window, softmax_scale=softmax_scale,
            logit_softcap=logit_softcap, alibi_slopes=slopes)
        self.assertIs(got, out)
        want = _oracle.paged_attention(p["q64"], p["k64"], p["v64"], p["seq_lens"], p["query_start_loc"],
                                       p["block_table"], kv_layout=kv_layout, window=window,
                                       softmax_scale=softmax_scale, logit_softcap=logit_softcap,
                                       alibi_slopes=slopes)
        _oracle.assert_close(self, _oracle.as_float64(out, dtype), want, dtype, "out")
        return p

    def check_features(self, dtype, kv_dtype=None, per_head=False, sinks=False, window=0, kv_layout="HND",
                       per_token=False, decades=1.0):
        """Sinks and 8-bit KV caches (stored codes, scales per tensor, per kv head, or per token and
        kv head: [num_pages, page_size, num_kv_heads], K's a contiguous tensor, V's a strided view of
        a [num_pages, num_kv_heads, page_size + 1] one, each key's scales spread over 2 x decades
        decades) against the numpy oracle on the same dequantized values."""
        num_q_heads, num_kv_heads, head_size, page_size = 6, 2, 32, 8
        p = paged_problem(self.rng, dtype, [9, 30, 0, 17], [1, 4, 0, 12], num_q_heads, num_kv_heads, head_size,
                          page_size, kv_layout, window)
        kwargs = {}
        if kv_dtype is not None:
            k_codes, k_stored = _oracle.make_kv8(self.rng, p["k"].shape, kv_dtype)
            v_codes, v_stored = _oracle.make_kv8(self.rng, p["v"].shape, kv_dtype)
            unit = 8.0 if kv_dtype == "int8" else 1.0
            head_axis = 1 if kv_layout == "HND" else 2
            p["k"], p["v"] = k_codes, v_codes
            if per_token:
                num_pages = p["k"].shape[0]

                def spread(shape):
                    return (0.15 * 10.0 ** self.rng.uniform(-decades, decades, shape) / unit).astype(np.float32)

                k_scale = spread((num_pages, page_size, num_kv_heads))
                v_full = spread((num_pages, num_kv_heads, page_size + 1))
                v_scale = v_full[:, :, :page_size].transpose(0, 2, 1)   # [pages, slots, heads], strided

                def as_cache(t):
                    return t.transpose(0, 2, 1)[..., None] if kv_layout == "HND" else t[..., None]

                p["k64"] = k_stored * as_cache(k_scale.astype(np.float64))
                p["v64"] = v_stored * as_cache(v_scale.astype(np.float64))
            else:
                n = num_kv_heads if per_head else 1
                k_scale = self.rng.uniform(0.05, 0.3, n).astype(np.float32) / unit
                v_scale = self.rng.uniform(0.05, 0.3, n).astype(np.float32) / unit
                shape = [1, 1, 1, 1]
                shape[head_axis] = n
                p["k64"] = k_stored * k_scale.astype(np.float64).reshape(shape)
                p["v64"] = v_stored * v_scale.astype(np.float64).reshape(shape)
            kwargs.update(k_scale=k_scale, v_scale=v_scale)
            if kv_dtype == "fp8_e4m3":
                kwargs["kv_dtype"] = "fp8_e4m3"   # uint8 codes: numpy has no float8
        sink_values = self.rng.uniform(-2.0, 3.0, num_q_heads).astype(np.float32) if sinks else None
        out = np.full(p["q"].shape, np.nan if dtype != "bfloat16" else 0x7FC0, p["q"].dtype)
        got = rdna35attn.paged_attention(
            p["q"], p["k"], p["v"], p["seq_lens"], p["query_start_loc"], p["block_table"], out=out,
            context=self.ctx, dtype=dtype, kv_layout=kv_layout, window=window, sinks=sink_values, **kwargs)
        self.assertIs(got, out)
        want = _oracle.paged_attention(p["q64"], p["k64"], p["v64"], p["seq_lens"], p["query_start_loc"],
                                       p["block_table"], kv_layout=kv_layout, window=window, sinks=sink_values)
        _oracle.assert_close(self, _oracle.as_float64(out, dtype), want, dtype, "out")

    def test_sinks_f16_window(self):
        self.check_features("float16", sinks=True, window=5)

    def test_fp8_cache_per_tensor_bf16(self):
        self.check_features("bfloat16", kv_dtype="fp8_e4m3")

    def test_int8_cache_per_head_sinks_nhd_f32(self):
        self.check_features("float32", kv_dtype="int8", per_head=True, sinks=True, kv_layout="NHD")

    def test_fp8_cache_per_head_sinks_f16(self):
        self.check_features("float16", kv_dtype="fp8_e4m3", per_head=True, sinks=True, window=9)

    def test_int8_cache_per_token_head_f16(self):
        self.check_features("float16", kv_dtype="int8", per_token=True, sinks=True)

    def test_fp8_cache_per_token_head_nhd_bf16_wide_scales(self):
        # each key's K and V scale over 1e-3 .. 1e3 (x 0.15): a few keys carry most of the weight
        self.check_features("bfloat16", kv_dtype="fp8_e4m3", per_token=True, kv_layout="NHD", window=9, decades=3.0)

    def test_per_token_head_scale_arguments(self):
        """The descriptor takes the scale tensors' strides; run() holds them to the plan."""
        p = paged_problem(self.rng, "float16", [5], [1], 2, 1, 16, 4)
        codes = np.zeros(p["k"].shape, np.int8)
        num_pages = codes.shape[0]
        ks = np.ones((num_pages, 4, 1), np.float32)
        vs = np.ones((num_pages, 1, 8), np.float32)[:, :, :4].transpose(0, 2, 1)
        out = np.empty_like(p["q"])
        with self.ctx.plan_paged_attention(p["q"], codes, codes, out, p["block_table"], max_seq_len=5,
                                           max_query_len=1, kv_scale_per_head="token_head", k_scale=ks,
                                           v_scale=vs) as plan:
            self.assertEqual(plan.desc.kv_scale_per_head, rdna35attn.KV_SCALE_PER_TOKEN_HEAD)
            self.assertEqual((plan.desc.k_scale_page_stride, plan.desc.k_scale_slot_stride,
                              plan.desc.k_scale_head_stride), (4, 1, 1))
            self.assertEqual((plan.desc.v_scale_page_stride, plan.desc.v_scale_slot_stride,
                              plan.desc.v_scale_head_stride), (8, 1, 8))
            plan.run(p["q"], codes, codes, out, p["seq_lens"], p["query_start_loc"], p["block_table"],
                     k_scale=ks, v_scale=vs)
            with self.assertRaises(rdna35attn.InvalidArgumentError) as e:   # V's layout for K's strides
                plan.run(p["q"], codes, codes, out, p["seq_lens"], p["query_start_loc"], p["block_table"],
                         k_scale=vs, v_scale=vs)
            self.assertIn("k_scale", str(e.exception))
            with self.assertRaises(rdna35attn.InvalidArgumentError):        # a per-kv-head vector
                plan.run(p["q"], codes, codes, out, p["seq_lens"], p["query_start_loc"], p["block_table"],
                         k_scale=np.ones(1, np.float32), v_scale=vs)
        with self.assertRaises(rdna35attn.InvalidArgumentError) as e:
            self.ctx.plan_paged_attention(p["q"], codes, codes, out, p["block_table"], max_seq_len=5,
                                          max_query_len=1, kv_scale_per_head="token_head", k_scale=ks)
        self.assertIn("v_scale", str(e.exception))
        with self.assertRaises(rdna35attn.InvalidArgumentError):
            self.ctx.plan_paged_attention(p["q"], codes, codes, out, p["block_table"], max_seq_len=5,
                                          max_query_len=1, kv_scale_per_head="per_token")
        # the library's own check: a 16-bit cache has no scales
        with self.assertRaises(rdna35attn.InvalidArgumentError) as e:
            self.ctx.plan_paged_attention(p["q"], p["k"], p["v"], out, p["block_table"], max_seq_len=5,
                                          max_query_len=1, kv_scale_per_head=2, k_scale=ks, v_scale=ks)
        self.assertEqual(e.exception.field, "paged_attention_desc.kv_scale_per_head")

    def test_fp8_plan_fields(self):
        """The descriptor says what the caches are; the plan keeps it."""
        p = paged_problem(self.rng, "float16", [5], [1], 2, 1, 16, 4)
        codes = np.zeros(p["k"].shape, np.uint8)
        with self.ctx.plan_paged_attention(p["q"], codes, codes, np.empty_like(p["q"]), p["block_table"],
                                           max_seq_len=5, max_query_len=1, kv_dtype="fp8",
                                           kv_scale_per_head=True, use_sinks=True) as plan:
            self.assertEqual(plan.desc.kv_dtype, rdna35attn.DType.FP8_E4M3)
            self.assertEqual(plan.desc.kv_scale_per_head, 1)
            self.assertEqual(plan.desc.use_sinks, 1)
        desc = rdna35attn.PagedAttentionDesc("float16", 1, 1, 1, 5, 2, 1, 16, 4, 2)
        self.assertEqual((desc.kv_dtype, desc.use_sinks, desc.kv_scale_per_head), (0, 0, 0))

    def test_decode_gqa_f16(self):
        self.check("float16", seq_lens=[1, 17, 64, 100], query_lens=[1, 1, 1, 1], num_q_heads=8, num_kv_heads=2,
                   head_size=64, page_size=16)

    def test_speculative_and_mixed_batch_bf16(self):
        # M = 1, 4, 8 and a long causal span (chunked prefill), plus an empty padding sequence
        self.check("bfloat16", seq_lens=[5, 30, 40, 0, 50], query_lens=[1, 4, 8, 0, 20], num_q_heads=4,
                   num_kv_heads=1, head_size=32, page_size=8)

    def test_window_nhd_f32(self):
        self.check("float32", seq_lens=[3, 25, 61], query_lens=[2, 3, 3], num_q_heads=6, num_kv_heads=3,
                   head_size=24, page_size=4, kv_layout="NHD", window=7)

    def test_softcap_alibi_scale_f16(self):
        self.check("float16", seq_lens=[9, 33], query_lens=[1, 2], num_q_heads=4, num_kv_heads=2, head_size=16,
                   page_size=8, softmax_scale=0.3, logit_softcap=5.0, alibi=True)

    def test_odd_head_size_and_page_size(self):
        self.check("float16", seq_lens=[7, 11], query_lens=[1, 3], num_q_heads=3, num_kv_heads=1, head_size=5,
                   page_size=3)

    def test_plan_once_run_twice(self):
        p = paged_problem(self.rng, "float16", [12, 40], [1, 2], 8, 2, 32, 16)
        out = np.empty_like(p["q"])
        plan = self.ctx.plan_paged_attention(p["q"], p["k"], p["v"], out, p["block_table"], max_seq_len=48,
                                             max_query_len=2)
        self.assertEqual(plan.info.implementation, "reference")
        self.assertEqual(plan.info.workspace_bytes, 0)
        self.assertEqual(plan.desc.max_seq_len, 48)
        for _ in range(2):
            p["q"][...] = self.rng.standard_normal(p["q"].shape).astype(np.float16)
            p["k"][...] = self.rng.standard_normal(p["k"].shape).astype(np.float16)
            plan.run(p["q"], p["k"], p["v"], out, p["seq_lens"], p["query_start_loc"], p["block_table"])
            want = _oracle.paged_attention(p["q"].astype(np.float64), p["k"].astype(np.float64), p["v64"],
                                           p["seq_lens"], p["query_start_loc"], p["block_table"])
            _oracle.assert_close(self, out.astype(np.float64), want, "float16", "out")
        plan.close()

    def test_strided_views_and_desc_from_fields(self):
        # q and out are views into wider buffers; the desc is written field by field like in C.
        p = paged_problem(self.rng, "float32", [10, 20], [1, 1], 4, 2, 8, 4)
        q_wide = np.zeros((2, 6, 8), np.float32)
        q_wide[:, 1:5] = p["q"]
        out_wide = np.full((2, 4, 16), np.nan, np.float32)
        desc = rdna35attn.PagedAttentionDesc("float32", num_seqs=2, num_tokens=2, max_query_len=1, max_seq_len=20,
                                             num_q_heads=4, num_kv_heads=2, head_size=8, page_size=4,
                                             num_pages=p["k"].shape[0], q_token_stride=48, q_head_stride=8,
                                             o_token_stride=64, o_head_stride=16)
        self.assertEqual(desc.block_table_stride, 5)
        self.assertEqual(desc.k_page_stride, 2 * 4 * 8)
        desc.block_table_stride = p["block_table"].shape[1]
        with self.ctx.plan(desc) as plan:
            plan.run(q_wide[:, 1:5], p["k"], p["v"], out_wide[:, :, :8], p["seq_lens"], p["query_start_loc"],
                     p["block_table"])
        want = _oracle.paged_attention(p["q64"], p["k64"], p["v64"], p["seq_lens"], p["query_start_loc"],
                                       p["block_table"])
        _oracle.assert_close(self, out_wide[:, :, :8], want, "float32", "out")
        self.assertTrue(np.isnan(out_wide[:, :, 8:]).all(), "wrote outside the view")

    def test_int_pointers(self):
        p = paged_problem(self.rng, "float16", [9, 30], [2, 1], 2, 2, 16, 8)
        out = np.zeros_like(p["q"])
        desc = rdna35attn.PagedAttentionDesc.for_tensors(p["q"], p["k"], p["v"], out, p["block_table"],
                                                         max_seq_len=30, max_query_len=2)
        with self.ctx.plan(desc) as plan:
            ptr = lambda a: a.ctypes.data  # noqa: E731
            plan.run(ptr(p["q"]), ptr(p["k"]), ptr(p["v"]), ptr(out), ptr(p["seq_lens"]),
                     ptr(p["query_start_loc"]), ptr(p["block_table"]))
        want = _oracle.paged_attention(p["q64"], p["k64"], p["v64"], p["seq_lens"], p["query_start_loc"],
                                       p["block_table"])
        _oracle.assert_close(self, out.astype(np.float64), want, "float16", "out")

    def test_tensor_with_data_ptr(self):
        # A host (cpu) tensor seen only through data_ptr()/stride()/shape/dtype/device, as torch offers.
        class HostTensor:
            def __init__(self, array, dtype_name):
                self.array, self.shape = array, array.shape
                self.dtype = type("dtype", (), {"__str__": lambda s: "torch." + dtype_name})()
                self.device = type("device", (), {"type": "cpu"})()

            def data_ptr(self):
                return self.array.ctypes.data

            def stride(self):
                return tuple(s // self.array.itemsize for s in self.array.strides)

        p = paged_problem(self.rng, "bfloat16", [6, 21], [1, 3], 4, 2, 16, 8)
        out = np.zeros_like(p["q"])
        t = lambda a: HostTensor(a, "bfloat16")  # noqa: E731
        rdna35attn.paged_attention(t(p["q"]), t(p["k"]), t(p["v"]), HostTensor(p["seq_lens"], "int32"),
                                   HostTensor(p["query_start_loc"], "int32"), HostTensor(p["block_table"], "int32"),
                                   out=t(out), max_seq_len=21, max_query_len=3, context=self.ctx)
        want = _oracle.paged_attention(p["q64"], p["k64"], p["v64"], p["seq_lens"], p["query_start_loc"],
                                       p["block_table"])
        _oracle.assert_close(self, _oracle.bf16_values(out), want, "bfloat16", "out")

    def test_default_context_and_out_allocation(self):
        p = paged_problem(self.rng, "float16", [4], [1], 2, 1, 8, 4)
        out = rdna35attn.paged_attention(p["q"], p["k"], p["v"], p["seq_lens"], p["query_start_loc"],
                                         p["block_table"])
        self.assertEqual(out.shape, p["q"].shape)
        self.assertEqual(out.dtype, np.float16)
        self.assertEqual(rdna35attn.default_context("reference").info.backend, rdna35attn.Backend.REFERENCE)

    def test_context_info(self):
        info = self.ctx.info
        self.assertEqual(info.backend, rdna35attn.Backend.REFERENCE)
        self.assertEqual(info.backend_name, "reference")
        self.assertEqual(info.device_index, -1)
        self.assertTrue(info.reason)
        auto = rdna35attn.Context()
        self.assertIn(auto.info.backend, (rdna35attn.Backend.REFERENCE, rdna35attn.Backend.GPU))
        auto.close()
        auto.close()  # closing twice is harmless

    def test_plan_keeps_snapshot_of_desc(self):
        desc = rdna35attn.PagedAttentionDesc("f16", 1, 1, 1, 8, 2, 1, 8, 4, 2)
        plan = self.ctx.plan(desc)
        desc.num_q_heads = 4
        self.assertEqual(plan.desc.num_q_heads, 2)
        self.assertEqual(ctypes.sizeof(plan._c_desc), plan._c_desc.struct_size)


if __name__ == "__main__":
    unittest.main()
