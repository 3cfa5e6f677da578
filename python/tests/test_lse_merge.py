"""The softmax LSE output and the merge of partial states through the shim, against numpy float64
(reference backend): LSE of paged and varlen calls (sinks, softcap, ALiBi, windows, strided LSE
buffers), merge_states on strided parts with -inf and NaN parts, a sharded decode merged back into
the unsharded call, and the argument checks."""
import unittest
import zlib

import numpy as np

import _oracle
import rdna35attn
from test_paged import paged_problem


class LseMergeTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng([int(_oracle.seed()), zlib.crc32(self.id().encode())])
        self.ctx = rdna35attn.Context("reference")

    def tearDown(self):
        self.ctx.close()

    def assert_lse(self, got, want, what="lse"):
        got = np.asarray(got, np.float64)
        self.assertEqual(got.shape, want.shape)
        both_neg_inf = np.isneginf(want) & np.isneginf(got)
        with np.errstate(invalid="ignore"):   # -inf - -inf where both are -inf (masked)
            err = np.where(both_neg_inf, 0.0, np.abs(got - want) / np.maximum(1.0, np.abs(want)))
        bad = ~(err <= 1e-5)
        if bad.any():
            where = tuple(np.argwhere(bad)[0])
            self.fail("%s: %d rows off, first %s got %r want %r" % (what, int(bad.sum()), where, got[where],
                                                                   want[where]))

    def test_paged_lse(self):
        for dtype, window, sinks, alibi, softcap in (("float32", 0, False, False, 0.0), ("float16", 5, True, False, 0.0),
                                                     ("bfloat16", 0, True, True, 3.0), ("float32", 9, False, True, 0.0)):
            p = paged_problem(self.rng, dtype, [37, 1, 20], [3, 1, 2], 4, 2, 32, 8, window=window)
            sink_values = self.rng.uniform(-2, 3, 4).astype(np.float32) if sinks else None
            slopes = self.rng.uniform(0.01, 0.3, 4).astype(np.float32) if alibi else None
            lse_store = np.full((6, 7), np.nan, np.float32)   # a strided view: the gaps stay NaN
            lse = lse_store[:, 1:5]
            out, got = rdna35attn.paged_attention(
                p["q"], p["k"], p["v"], p["seq_lens"], p["query_start_loc"], p["block_table"], context=self.ctx,
                dtype=dtype, window=window, sinks=sink_values, alibi_slopes=slopes, logit_softcap=softcap, lse=lse)
            self.assertIs(got, lse)
            want_o, want_lse = _oracle.paged_attention(
                p["q64"], p["k64"], p["v64"], p["seq_lens"], p["query_start_loc"], p["block_table"], window=window,
                sinks=sink_values, alibi_slopes=slopes, logit_softcap=softcap, return_lse=True)
            _oracle.assert_close(self, _oracle.as_float64(out, dtype), want_o, dtype, "out")
            self.assert_lse(lse, want_lse)
            self.assertTrue(np.isnan(lse_store[:, 0]).all() and np.isnan(lse_store[:, 5:]).all())

    def test_varlen_lse_return(self):
        cu = np.array([0, 5, 5, 17], np.int32)
        q, q64 = _oracle.make(self.rng, (17, 4, 16), "float16")
        k, k64 = _oracle.make(self.rng, (17, 2, 16), "float16")
        sinks = self.rng.uniform(-1, 2, 4).astype(np.float32)
        for causal in (False, True):
            out, lse = rdna35attn.varlen_attention(q, k, k, cu, causal=causal, context=self.ctx, sinks=sinks,
                                                   return_lse=True)
            self.assertEqual(lse.dtype, np.float32)
            want_o, want_lse = _oracle.varlen_attention(q64, k64, k64, cu, causal=causal, sinks=sinks,
                                                        return_lse=True)
            _oracle.assert_close(self, out.astype(np.float64), want_o, "float16", "out")
            self.assert_lse(lse, want_lse)

    def test_merge_states(self):
        for dtype in ("float32", "float16", "bfloat16"):
            n, t, h, d = 5, 7, 3, 24
            store, _ = _oracle.make(self.rng, (n, t, h, d + 4), dtype)    # strided parts: padded rows
            parts = store[..., :d]
            parts64 = _oracle.as_float64(parts, dtype)
            lse = self.rng.uniform(-6, 20, (n, t, h)).astype(np.float32)
            lse[1, 2, :] = -np.inf                 # a part that weighs nothing: its O is not read
            parts[1, 2] = np.nan if dtype != "bfloat16" else 0x7FC0
            lse[:, 4, 1] = -np.inf                 # a row whose parts are all -inf: O = 0, LSE = -inf
            out, out_lse = rdna35attn.merge_states(parts, lse, context=self.ctx, dtype=dtype)
            want_o, want_lse = _oracle.merge_states(np.where(np.isnan(parts64), 0.0, parts64), lse)
            _oracle.assert_close(self, _oracle.as_float64(out, dtype), want_o, dtype, "merged out")
            self.assert_lse(out_lse, want_lse, "merged lse")
            self.assertTrue(np.isneginf(out_lse[4, 1]))
            self.assertTrue((_oracle.as_float64(out, dtype)[4, 1] == 0).all())

    def test_merge_nan_propagates(self):
        parts = np.ones((2, 2, 1, 4), np.float32)
        lse = np.zeros((2, 2, 1), np.float32)
        lse[0, 0, 0] = np.nan
        parts[1, 1, 0, 2] = np.nan
        out, out_lse = rdna35attn.merge_states(parts, lse, context=self.ctx)
        self.assertTrue(np.isnan(out[0]).all() and np.isnan(out_lse[0, 0]))
        self.assertTrue(np.isnan(out[1, 0, 2]) and np.isfinite(out[1, 0, [0, 1, 3]]).all())
        self.assertAlmostEqual(float(out_lse[1, 0]), np.log(2.0), places=6)

    def test_sharded_decode_equals_unsharded(self):
        """One sequence of 90 keys (page size 8) split into 3 page-aligned shards, each a decode call
        with LSE (the sink on one shard), merged: the unsharded call (rdna35attn.h "Merging partial
        states")."""
        p = paged_problem(self.rng, "float32", [90], [1], 4, 2, 32, 8)
        table = p["block_table"][0]
        sinks = self.rng.uniform(-1, 2, 4).astype(np.float32)
        want, want_lse = rdna35attn.paged_attention(p["q"], p["k"], p["v"], p["seq_lens"], p["query_start_loc"],
                                                    p["block_table"], context=self.ctx, sinks=sinks, return_lse=True)
        cuts = [0, 3, 7, len(table)]   # pages
        parts = np.empty((3,) + want.shape, np.float32)
        parts_lse = np.empty((3,) + want_lse.shape, np.float32)
        for r in range(3):
            first, end = cuts[r] * 8, min(90, cuts[r + 1] * 8)
            rows = np.ascontiguousarray(table[cuts[r]:cuts[r + 1]][None, :])
            rdna35attn.paged_attention(p["q"], p["k"], p["v"], np.array([end - first], np.int32), p["query_start_loc"],
                                       rows, out=parts[r], lse=parts_lse[r], context=self.ctx,
                                       sinks=sinks if r == 0 else None)
        out, out_lse = rdna35attn.merge_states(parts, parts_lse, context=self.ctx)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out_lse, want_lse, rtol=1e-6)

    def test_argument_checks(self):
        p = paged_problem(self.rng, "float32", [10], [1], 2, 1, 8, 4)
        args = (p["q"], p["k"], p["v"], p["seq_lens"], p["query_start_loc"], p["block_table"])
        with self.ctx.plan_paged_attention(p["q"], p["k"], p["v"], np.empty_like(p["q"]), p["block_table"],
                                           max_seq_len=10, max_query_len=1) as plan:
            self.assertEqual(plan.desc.use_lse, 0)
            with self.assertRaisesRegex(rdna35attn.InvalidArgumentError, "lse: given, but the plan has use_lse=0"):
                plan.run(*args[:3], np.empty_like(p["q"]), *args[3:], lse=np.empty((1, 2), np.float32))
        lse = np.empty((1, 2), np.float32)
        with self.ctx.plan_paged_attention(p["q"], p["k"], p["v"], np.empty_like(p["q"]), p["block_table"],
                                           max_seq_len=10, max_query_len=1, lse=lse) as plan:
            self.assertEqual((plan.desc.use_lse, plan.desc.lse_token_stride, plan.desc.lse_head_stride), (1, 2, 1))
            self.assertIn("reference", plan.info.implementation)
            with self.assertRaisesRegex(rdna35attn.InvalidArgumentError, "lse: None, but the plan has use_lse=1"):
                plan.run(*args[:3], np.empty_like(p["q"]), *args[3:])
            with self.assertRaisesRegex(rdna35attn.InvalidArgumentError, "lse.dtype"):
                plan.run(*args[:3], np.empty_like(p["q"]), *args[3:], lse=np.empty((1, 2), np.float64))
        with self.assertRaisesRegex(rdna35attn.InvalidArgumentError, "parts_lse.shape"):
            rdna35attn.merge_states(np.zeros((2, 1, 1, 4), np.float32), np.zeros((3, 1, 1), np.float32),
                                    context=self.ctx)
        parts = np.zeros((2, 1, 1, 4), np.float32)
        with self.assertRaisesRegex(rdna35attn.InvalidArgumentError, "out: overlaps"):
            rdna35attn.merge_states(parts, np.zeros((2, 1, 1), np.float32), out=parts[0], context=self.ctx)
        desc = rdna35attn.MergeStatesDesc("float32", 0, 1, 1, 4)
        with self.assertRaises(rdna35attn.InvalidArgumentError) as caught:
            self.ctx.plan(desc)
        self.assertIn("merge_states_desc.num_parts", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
