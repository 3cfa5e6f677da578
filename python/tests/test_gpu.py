"""The GPU path of the shim: device buffers through __cuda_array_interface__, torch tensors and int
pointers, against the numpy float64 oracle. Skipped (with the context's reason) where the AUTO
context is the reference. Device memory comes from the runtime the context names, through ctypes,
so no torch or CuPy is needed; torch is used in addition when it is installed."""
import ctypes
import os
import unittest
import zlib

import numpy as np

import _oracle
import rdna35attn
from test_paged import paged_problem

_RUNTIMES = {"hip": ("hip", ("R35A_HIP_LIBRARY",), ("libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6")),
             "cuda": ("cuda", (), ("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"))}


class DeviceArray:
    """A device copy of a numpy array, exposed through __cuda_array_interface__ (version 3)."""

    def __init__(self, runtime, host):
        self.runtime, self.shape, self.dtype = runtime, host.shape, host.dtype
        self.nbytes = max(host.nbytes, 1)
        self.ptr = runtime.malloc(self.nbytes)
        runtime.copy(self.ptr, host.ctypes.data, host.nbytes, 1)
        self.__cuda_array_interface__ = {"shape": host.shape, "typestr": host.dtype.str, "data": (self.ptr, False),
                                         "strides": None, "version": 3}

    def numpy(self):
        self.runtime.synchronize()
        host = np.empty(self.shape, self.dtype)
        self.runtime.copy(host.ctypes.data, self.ptr, host.nbytes, 2)
        return host

    def __del__(self):
        self.runtime.free(self.ptr)


class Runtime:
    def __init__(self, backend_name, device_index):
        prefix, env_names, names = _RUNTIMES[backend_name]
        candidates = [os.environ[e] for e in env_names if os.environ.get(e)] + list(names)
        self.lib = None
        for name in candidates:
            try:
                self.lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if self.lib is None:
            raise unittest.SkipTest("the %s runtime cannot be loaded" % backend_name)
        self.prefix = prefix
        self._call("SetDevice", ctypes.c_int(device_index))

    def _call(self, name, *args):
        status = getattr(self.lib, self.prefix + name)(*args)
        if status != 0:
            raise RuntimeError("%s%s failed: %d" % (self.prefix, name, status))

    def malloc(self, nbytes):
        ptr = ctypes.c_void_p()
        self._call("Malloc", ctypes.byref(ptr), ctypes.c_size_t(nbytes))
        return ptr.value

    def free(self, ptr):
        getattr(self.lib, self.prefix + "Free")(ctypes.c_void_p(ptr))

    def copy(self, dst, src, nbytes, kind):
        self._call("Memcpy", ctypes.c_void_p(dst), ctypes.c_void_p(src), ctypes.c_size_t(nbytes), ctypes.c_int(kind))

    def synchronize(self):
        self._call("DeviceSynchronize")


class GpuTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ctx = rdna35attn.Context("auto")
        info = cls.ctx.info
        if info.backend != rdna35attn.Backend.GPU:
            cls.ctx.close()
            raise unittest.SkipTest("no GPU backend: %s" % info.reason)
        if info.backend_name not in _RUNTIMES:
            raise unittest.SkipTest("no device allocator for backend %s" % info.backend_name)
        cls.runtime = Runtime(info.backend_name, info.device_index)

    @classmethod
    def tearDownClass(cls):
        cls.ctx.close()

    def setUp(self):
        self.rng = np.random.default_rng([int(_oracle.seed()), zlib.crc32(self.id().encode())])

    def device(self, host):
        return DeviceArray(self.runtime, np.ascontiguousarray(host))

    def test_paged_decode_device_buffers(self):
        p = paged_problem(self.rng, "float16", [1, 40, 300], [1, 1, 1], 8, 2, 128, 16)
        out = self.device(np.full(p["q"].shape, np.nan, np.float16))
        d = {name: self.device(p[name]) for name in ("q", "k", "v", "seq_lens", "query_start_loc", "block_table")}
        with self.ctx.plan_paged_attention(d["q"], d["k"], d["v"], out, d["block_table"], max_seq_len=300,
                                           max_query_len=1) as plan:
            workspace = self.device(np.zeros(plan.info.workspace_bytes, np.uint8)) if plan.info.workspace_bytes \
                else None
            plan.run(d["q"], d["k"], d["v"], out, d["seq_lens"], d["query_start_loc"], d["block_table"],
                     workspace=workspace)
            got = out.numpy()
        want = _oracle.paged_attention(p["q64"], p["k64"], p["v64"], p["seq_lens"], p["query_start_loc"],
                                       p["block_table"])
        _oracle.assert_close(self, got.astype(np.float64), want, "float16", "out")

    def test_bad_device_block_table(self):
        # a page index past num_pages in sequence 1's table: the kernel must not read it, its rows
        # come out NaN, sequence 0's rows stay right, and check_device() names the field and sequence
        p = paged_problem(self.rng, "float16", [40, 300], [1, 1], 8, 2, 128, 16)
        bad = p["block_table"].copy()
        bad[1, 5] = p["k"].shape[0] + 1000
        out = self.device(np.zeros(p["q"].shape, np.float16))
        d = {name: self.device(p[name]) for name in ("q", "k", "v", "seq_lens", "query_start_loc")}
        d["block_table"] = self.device(bad)
        self.ctx.check_device()
        with self.ctx.plan_paged_attention(d["q"], d["k"], d["v"], out, d["block_table"], max_seq_len=300,
                                           max_query_len=1) as plan:
            workspace = self.device(np.zeros(plan.info.workspace_bytes, np.uint8)) if plan.info.workspace_bytes \
                else None
            plan.run(d["q"], d["k"], d["v"], out, d["seq_lens"], d["query_start_loc"], d["block_table"],
                     workspace=workspace)
            got = out.numpy()
        with self.assertRaises(rdna35attn.InvalidDataError) as caught:
            self.ctx.check_device()
        self.assertEqual(caught.exception.field, "paged_attention_args.block_table")
        self.assertIn("sequence 1 ", caught.exception.detail)
        self.ctx.check_device()   # reported once, then clear
        self.assertTrue(np.isnan(got[1].astype(np.float32)).all())
        want = _oracle.paged_attention(p["q64"][:1], p["k64"], p["v64"], p["seq_lens"][:1],
                                       p["query_start_loc"][:2], p["block_table"][:1])
        _oracle.assert_close(self, got[:1].astype(np.float64), want, "float16", "out")

    def test_paged_int_pointers(self):
        p = paged_problem(self.rng, "float16", [7, 64], [2, 4], 4, 4, 64, 16)
        out = self.device(np.zeros(p["q"].shape, np.float16))
        d = {name: self.device(p[name]) for name in ("q", "k", "v", "seq_lens", "query_start_loc", "block_table")}
        desc = rdna35attn.PagedAttentionDesc.for_tensors(p["q"], p["k"], p["v"], p["q"], p["block_table"],
                                                         max_seq_len=64, max_query_len=4)
        with self.ctx.plan(desc) as plan:
            workspace = self.device(np.zeros(plan.info.workspace_bytes, np.uint8)) if plan.info.workspace_bytes \
                else None
            plan.run(d["q"].ptr, d["k"].ptr, d["v"].ptr, out.ptr, d["seq_lens"].ptr, d["query_start_loc"].ptr,
                     d["block_table"].ptr, workspace=workspace.ptr if workspace else None,
                     workspace_bytes=plan.info.workspace_bytes)
            got = out.numpy()
        want = _oracle.paged_attention(p["q64"], p["k64"], p["v64"], p["seq_lens"], p["query_start_loc"],
                                       p["block_table"])
        _oracle.assert_close(self, got.astype(np.float64), want, "float16", "out")

    def test_varlen_fused_qkv_device(self):
        cu = np.array([0, 17, 17, 80], np.int32)
        qkv, qkv64 = _oracle.make(self.rng, (80, 3, 4, 64), "float16")
        d_qkv, d_cu = self.device(qkv), self.device(cu)
        out = self.device(np.zeros((80, 4, 64), np.float16))

        class View:  # qkv[:, i] of the device buffer, described for the shim
            def __init__(self, i):
                item = 2
                self.__cuda_array_interface__ = {"shape": (80, 4, 64), "typestr": "<f2", "version": 3,
                                                 "data": (d_qkv.ptr + i * 4 * 64 * item, False),
                                                 "strides": (3 * 4 * 64 * item, 64 * item, item)}

        rdna35attn.varlen_attention(View(0), View(1), View(2), d_cu, out=out, max_seqlen=63, context=self.ctx)
        want = _oracle.varlen_attention(qkv64[:, 0], qkv64[:, 1], qkv64[:, 2], cu)
        _oracle.assert_close(self, out.numpy().astype(np.float64), want, "float16", "out")

    def test_sinks_and_int8_cache_device_buffers(self):
        """Sinks and an int8 cache with per-kv-head scales, all in device memory (the portable kernel
        serves them); the scales and sinks are device buffers too (graph-capture safe)."""
        p = paged_problem(self.rng, "float16", [1, 130, 40], [1, 4, 1], 8, 2, 64, 16, window=128)
        k8, k_stored = _oracle.make_kv8(self.rng, p["k"].shape, "int8")
        v8, v_stored = _oracle.make_kv8(self.rng, p["v"].shape, "int8")
        k_scale = np.array([0.01, 0.02], np.float32)
        v_scale = np.array([0.015, 0.005], np.float32)
        sinks = self.rng.uniform(-2.0, 3.0, 8).astype(np.float32)
        out = self.device(np.full(p["q"].shape, np.nan, np.float16))
        d = {name: self.device(p[name]) for name in ("q", "seq_lens", "query_start_loc", "block_table")}
        rdna35attn.paged_attention(d["q"], self.device(k8), self.device(v8), d["seq_lens"], d["query_start_loc"],
                                   d["block_table"], out=out, max_seq_len=130, max_query_len=4, window=128,
                                   context=self.ctx, sinks=self.device(sinks), k_scale=self.device(k_scale),
                                   v_scale=self.device(v_scale))
        want = _oracle.paged_attention(p["q64"], k_stored * k_scale.reshape(1, 2, 1, 1),
                                       v_stored * v_scale.reshape(1, 2, 1, 1), p["seq_lens"], p["query_start_loc"],
                                       p["block_table"], window=128, sinks=sinks)
        _oracle.assert_close(self, out.numpy().astype(np.float64), want, "float16", "out")

    def test_torch_float8_cache(self):
        """A torch.float8_e4m3fn cache is recognized as fp8 without naming kv_dtype."""
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed")
        if not torch.cuda.is_available() or not hasattr(torch, "float8_e4m3fn"):
            self.skipTest("torch sees no GPU or has no float8_e4m3fn")
        p = paged_problem(self.rng, "float16", [70, 9], [1, 2], 8, 2, 128, 16)
        codes_k, k_stored = _oracle.make_kv8(self.rng, p["k"].shape, "fp8_e4m3")
        codes_v, v_stored = _oracle.make_kv8(self.rng, p["v"].shape, "fp8_e4m3")
        dev = "cuda:%d" % self.ctx.info.device_index
        k = torch.from_numpy(codes_k).to(dev).view(torch.float8_e4m3fn)
        v = torch.from_numpy(codes_v).to(dev).view(torch.float8_e4m3fn)
        t = {name: torch.from_numpy(p[name]).to(dev) for name in ("q", "seq_lens", "query_start_loc", "block_table")}
        scales = torch.tensor([0.25], dtype=torch.float32, device=dev)
        out = torch.empty_like(t["q"])
        rdna35attn.paged_attention(t["q"], k, v, t["seq_lens"], t["query_start_loc"], t["block_table"], out=out,
                                   max_seq_len=70, max_query_len=2, context=self.ctx, k_scale=scales,
                                   v_scale=scales)
        torch.cuda.synchronize()
        want = _oracle.paged_attention(p["q64"], k_stored * 0.25, v_stored * 0.25, p["seq_lens"],
                                       p["query_start_loc"], p["block_table"])
        _oracle.assert_close(self, out.cpu().numpy().astype(np.float64), want, "float16", "out")

    def test_host_arrays_are_refused(self):
        q, out, cu = np.zeros((1, 1, 8), np.float16), np.zeros((1, 1, 8), np.float16), np.array([0, 1], np.int32)
        with self.ctx.plan_varlen_attention(q, q, q, out, cu, max_seqlen=1) as plan:  # shapes only
            with self.assertRaises(rdna35attn.InvalidArgumentError) as caught:
                plan.run(q, q, q, out, cu)
        self.assertIn("host memory", caught.exception.detail)

    def test_torch_tensors(self):
        try:
            import torch
        except ImportError:
            self.skipTest("torch is not installed")
        if not torch.cuda.is_available():
            self.skipTest("torch sees no GPU")
        p = paged_problem(self.rng, "bfloat16", [33, 5], [3, 1], 8, 1, 64, 16)
        dev = "cuda:%d" % self.ctx.info.device_index
        t = {name: torch.from_numpy(p[name].astype(np.int32) if p[name].dtype != np.uint16 else
                                    p[name].view(np.int16)).to(dev)
             for name in ("q", "k", "v", "seq_lens", "query_start_loc", "block_table")}
        for name in ("q", "k", "v"):
            t[name] = t[name].view(torch.bfloat16)
        out = torch.empty_like(t["q"])
        rdna35attn.paged_attention(t["q"], t["k"], t["v"], t["seq_lens"], t["query_start_loc"], t["block_table"],
                                   out=out, max_seq_len=33, max_query_len=3, context=self.ctx)
        torch.cuda.synchronize()
        got = out.view(torch.int16).cpu().numpy().view(np.uint16)
        want = _oracle.paged_attention(p["q64"], p["k64"], p["v64"], p["seq_lens"], p["query_start_loc"],
                                       p["block_table"])
        _oracle.assert_close(self, _oracle.bf16_values(got), want, "bfloat16", "out")


if __name__ == "__main__":
    unittest.main()
