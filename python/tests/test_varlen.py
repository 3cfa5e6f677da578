"""Varlen (encoder / causal) attention through the shim, against the numpy float64 oracle."""
import unittest
import zlib

import numpy as np

import _oracle
import rdna35attn


class VarlenAttentionTest(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng([int(_oracle.seed()), zlib.crc32(self.id().encode())])
        self.ctx = rdna35attn.Context("reference")

    def tearDown(self):
        self.ctx.close()

    def fused(self, dtype, segment_lens, heads, head_size, causal=False, logit_softcap=0.0, sinks=False):
        """A fused qkv buffer [tokens, 3, heads, D] read in place through views."""
        cu = np.concatenate([[0], np.cumsum(segment_lens)]).astype(np.int32)
        qkv, qkv64 = _oracle.make(self.rng, (int(cu[-1]), 3, heads, head_size), dtype)
        out = np.zeros((int(cu[-1]), heads, head_size), qkv.dtype)
        sink_values = self.rng.uniform(-2.0, 3.0, heads).astype(np.float32) if sinks else None
        rdna35attn.varlen_attention(qkv[:, 0], qkv[:, 1], qkv[:, 2], cu, out=out, causal=causal, dtype=dtype,
                                    logit_softcap=logit_softcap, context=self.ctx, sinks=sink_values)
        want = _oracle.varlen_attention(qkv64[:, 0], qkv64[:, 1], qkv64[:, 2], cu, causal=causal,
                                        logit_softcap=logit_softcap, sinks=sink_values)
        _oracle.assert_close(self, _oracle.as_float64(out, dtype), want, dtype, "out")

    def test_fused_qkv_encoder_f16(self):
        self.fused("float16", [5, 0, 17, 1, 33], heads=4, head_size=32)

    def test_fused_qkv_causal_bf16(self):
        self.fused("bfloat16", [9, 24], heads=2, head_size=64, causal=True)

    def test_sinks_encoder_and_causal(self):
        self.fused("float16", [5, 0, 12], heads=3, head_size=32, sinks=True)
        self.fused("bfloat16", [1, 19], heads=2, head_size=64, causal=True, sinks=True)

    def test_fused_qkv_softcap_f32(self):
        self.fused("float32", [3, 14], heads=3, head_size=16, logit_softcap=2.0)

    def test_separate_buffers_gqa_plan_reuse(self):
        cu = np.array([0, 7, 7, 20], np.int32)
        q, q64 = _oracle.make(self.rng, (20, 8, 16), "float16")
        k, k64 = _oracle.make(self.rng, (20, 2, 16), "float16")
        v, v64 = _oracle.make(self.rng, (20, 2, 16), "float16")
        out = np.empty_like(q)
        with self.ctx.plan_varlen_attention(q, k, v, out, cu, max_seqlen=16, causal=True) as plan:
            self.assertEqual(plan.desc.num_segments, 3)
            self.assertEqual(plan.desc.num_kv_heads, 2)
            self.assertEqual(plan.info.implementation, "reference")
            for _ in range(2):
                q[...] = self.rng.standard_normal(q.shape).astype(np.float16)
                plan.run(q, k, v, out, cu)
                want = _oracle.varlen_attention(q.astype(np.float64), k64, v64, cu, causal=True)
                _oracle.assert_close(self, out.astype(np.float64), want, "float16", "out")

    def test_default_max_seqlen_and_out(self):
        cu = np.array([0, 4], np.int32)
        q, q64 = _oracle.make(self.rng, (4, 1, 8), "float32")
        out = rdna35attn.varlen_attention(q, q, q, cu)
        want = _oracle.varlen_attention(q64, q64, q64, cu)
        _oracle.assert_close(self, out, want, "float32", "out")


if __name__ == "__main__":
    unittest.main()
