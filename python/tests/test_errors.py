"""Bad inputs raise the exception of their status, naming the field; nothing is written."""
import ctypes
import unittest

import numpy as np

import rdna35attn
from rdna35attn import api, errors


class FakeDeviceArray:
    """Claims to be device memory through __cuda_array_interface__ (never dereferenced)."""

    def __init__(self, shape, typestr="<f2"):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (0x1000, False),
                                         "version": 3, "strides": None}


def small_paged(dtype=np.float16):
    q = np.ones((2, 4, 8), dtype)
    k = np.ones((3, 2, 4, 8), dtype)
    v = np.ones((3, 2, 4, 8), dtype)
    out = np.full((2, 4, 8), 7, dtype)
    seq_lens = np.array([3, 5], np.int32)
    qsl = np.array([0, 1, 2], np.int32)
    bt = np.array([[0, -1], [1, 2]], np.int32)
    return q, k, v, out, seq_lens, qsl, bt


class ErrorTest(unittest.TestCase):
    def setUp(self):
        self.ctx = rdna35attn.Context("reference")

    def tearDown(self):
        self.ctx.close()

    def assertRaisesStatus(self, cls, field, from_library, fn, *args, **kwargs):
        with self.assertRaises(cls) as caught:
            fn(*args, **kwargs)
        e = caught.exception
        self.assertIsInstance(e, rdna35attn.R35AError)
        self.assertEqual(e.status_name, cls.status_name)
        if field is not None:
            self.assertEqual(e.field, field, e.detail)
        self.assertEqual(e.from_library, from_library, e.detail)
        self.assertIn(e.status_name, str(e))
        self.assertIn(e.detail, str(e))
        return e

    def paged(self, *args, **kwargs):
        return rdna35attn.paged_attention(*args, context=self.ctx, **kwargs)

    # ---- checks made by the shim before calling ----

    def test_shape(self):
        q, k, v, out, sl, qsl, bt = small_paged()
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "q.shape", False, self.paged, q[0], k, v, sl, qsl,
                                bt)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "v_cache.shape", False, self.paged, q, k, v[:2],
                                sl, qsl, bt)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "out.shape", False, self.paged, q, k, v, sl, qsl,
                                bt, out=out[:1])
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "block_table.shape", False, self.paged, q, k, v,
                                sl, qsl, bt[:, :1])
        self.assertTrue((out == 7).all())

    def test_dtype(self):
        q, k, v, out, sl, qsl, bt = small_paged()
        e = self.assertRaisesStatus(rdna35attn.UnknownDtypeError, "q.dtype", False, self.paged, q.astype(np.float64),
                                    k, v, sl, qsl, bt)
        self.assertIsInstance(e, TypeError)
        self.assertRaisesStatus(rdna35attn.UnknownDtypeError, "q.dtype", False, self.paged, q.view(np.uint16),
                                k.view(np.uint16), v.view(np.uint16), sl, qsl, bt)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "k_cache.dtype", False, self.paged, q,
                                k.astype(np.float32), v, sl, qsl, bt)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "q.dtype", False, self.paged, q, k, v, sl, qsl, bt,
                                dtype="bfloat16")
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "seq_lens.dtype", False, self.paged, q, k, v,
                                sl.astype(np.int64), qsl, bt)
        self.assertRaisesStatus(rdna35attn.UnknownDtypeError, "dtype", False, self.paged, q, k, v, sl, qsl, bt,
                                dtype="int4")
        # the 8-bit dtypes are KV-cache dtypes: not for q and out
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "dtype", False, self.paged, q, k, v, sl, qsl, bt,
                                dtype="int8")
        # numpy has no fp8: uint8 caches need an explicit kv_dtype
        self.assertRaisesStatus(rdna35attn.UnknownDtypeError, "k_cache.dtype", False, self.paged, q,
                                np.zeros(k.shape, np.uint8), np.zeros(v.shape, np.uint8), sl, qsl, bt)
        # an 8-bit cache needs both scales, of the plan's length, float32
        k8, v8 = np.zeros(k.shape, np.int8), np.zeros(v.shape, np.int8)
        one = np.ones(1, np.float32)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "k_scale", False, self.paged, q, k8, v8, sl, qsl,
                                bt, v_scale=one)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "v_scale.shape", False, self.paged, q, k8, v8, sl,
                                qsl, bt, k_scale=one, v_scale=np.ones(1, np.float64))
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "k_scale", False, self.paged, q, k, v, sl, qsl,
                                bt, k_scale=one, v_scale=one)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "sinks.shape", False, self.paged, q, k, v, sl, qsl,
                                bt, sinks=np.zeros(3, np.float32))

    def test_strides(self):
        q, k, v, out, sl, qsl, bt = small_paged()
        wide = np.ones((2, 4, 16), np.float16)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "q.strides", False, self.paged, wide[:, :, ::2],
                                k, v, sl, qsl, bt)
        with self.ctx.plan_paged_attention(q, k, v, out, bt, max_seq_len=8, max_query_len=1) as plan:
            other = np.ones((4, 2, 8), np.float16).transpose(1, 0, 2)  # same shape, other strides
            self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "q.strides", False, plan.run, other, k, v, out,
                                    sl, qsl, bt)
            self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "q.shape", False, plan.run, q[:1], k, v, out,
                                    sl, qsl, bt)
            self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "k_cache.shape", False, plan.run, q,
                                    k.transpose(0, 2, 1, 3).copy(), v, out, sl, qsl, bt)
            self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "query_start_loc.shape", False, plan.run, q, k,
                                    v, out, sl, qsl[:2], bt)
        self.assertTrue((out == 7).all())

    def test_output_problems(self):
        q, k, v, out, sl, qsl, bt = small_paged()
        out.flags.writeable = False
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "out", False, self.paged, q, k, v, sl, qsl, bt,
                                out=out)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "out", False, self.paged, q, k, v, sl, qsl, bt,
                                out=q)

    def test_memory_location(self):
        q, k, v, out, sl, qsl, bt = small_paged()
        with self.ctx.plan_paged_attention(q, k, v, out, bt, max_seq_len=8, max_query_len=1) as plan:
            e = self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "q", False, plan.run,
                                        FakeDeviceArray((2, 4, 8)), k, v, out, sl, qsl, bt)
            self.assertIn("device memory", e.detail)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "out", False, self.paged, q, k, v, sl, qsl, bt,
                                out="not a buffer")

    def test_alibi_arguments(self):
        q, k, v, out, sl, qsl, bt = small_paged()
        with self.ctx.plan_paged_attention(q, k, v, out, bt, max_seq_len=8, max_query_len=1) as plan:
            self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "alibi_slopes", False, plan.run, q, k, v, out,
                                    sl, qsl, bt, alibi_slopes=np.ones(4, np.float32))
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "alibi_slopes.shape", False, self.paged, q, k, v,
                                sl, qsl, bt, alibi_slopes=np.ones(3, np.float32))

    def test_desc_fields(self):
        with self.assertRaises(AttributeError):
            rdna35attn.PagedAttentionDesc("f16", 1, 1, 1, 8, 2, 1, 8, 4, 2, no_such_field=1)
        desc = rdna35attn.PagedAttentionDesc("f16", 1, 1, 1, 8, 2, 1, 8, 4, 2)
        desc.num_pages = 2 ** 40
        self.assertRaisesStatus(rdna35attn.SizeOverflowError, "paged_attention_desc.num_pages", False,
                                self.ctx.plan, desc)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "paged_attention_desc.num_pages", False,
                                rdna35attn.PagedAttentionDesc, "f16", 1, 1, 1, 8, 2, 1, 8, 4, 2 ** 40)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "backend", False, rdna35attn.Context, "tpu")

    # ---- statuses from the library, with its detail ----

    def test_library_invalid_argument(self):
        for field, value in (("num_kv_heads", 4), ("head_size", 2000), ("softmax_scale", float("nan")),
                             ("window", -1)):
            desc = rdna35attn.PagedAttentionDesc("f16", 2, 2, 1, 8, 6, 2, 8, 4, 3)
            setattr(desc, field, value)
            e = self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "paged_attention_desc." + field, True,
                                        self.ctx.plan, desc)
            self.assertIsInstance(e, ValueError)
        desc = rdna35attn.VarlenAttentionDesc("f32", 1, 4, 2, 1, 1, 8)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "varlen_attention_desc.num_tokens", True,
                                self.ctx.plan, desc)

    def test_library_size_overflow(self):
        desc = rdna35attn.PagedAttentionDesc("f16", 2, 2, 1, 8, 2, 1, 8, 4, 3, q_token_stride=2 ** 62)
        self.assertRaisesStatus(rdna35attn.SizeOverflowError, "paged_attention_desc.q_token_stride", True,
                                self.ctx.plan, desc)

    def test_library_invalid_data(self):
        q, k, v, out, sl, qsl, bt = small_paged()
        with self.ctx.plan_paged_attention(q, k, v, out, bt, max_seq_len=8, max_query_len=1) as plan:
            self.assertRaisesStatus(rdna35attn.InvalidDataError, "paged_attention_args.seq_lens[1]", True, plan.run,
                                    q, k, v, out, np.array([3, 9], np.int32), qsl, bt)
            e = self.assertRaisesStatus(rdna35attn.InvalidDataError, None, True, plan.run, q, k, v, out, sl, qsl,
                                        np.array([[0, -1], [1, 7]], np.int32))
            self.assertTrue(e.field.startswith("paged_attention_args.block_table["), e.detail)
        self.assertTrue((out == 7).all())
        cu = np.array([0, 3, 2], np.int32)
        x = np.ones((2, 1, 4), np.float32)
        self.assertRaisesStatus(rdna35attn.InvalidDataError, "varlen_attention_args.cu_seqlens[2]", True,
                                rdna35attn.varlen_attention, x, x, x, cu, max_seqlen=4, context=self.ctx)

    def test_check_device(self):
        # a reference context checks its data before each run: there is never a device record
        self.ctx.check_device()
        q, k, v, out, sl, qsl, bt = small_paged()
        with self.ctx.plan_paged_attention(q, k, v, out, bt, max_seq_len=8, max_query_len=1) as plan:
            self.assertRaises(rdna35attn.InvalidDataError, plan.run, q, k, v, out, np.array([3, 9], np.int32), qsl,
                              bt)
        self.ctx.check_device()
        lib = rdna35attn.api.load()
        self.assertEqual(lib.r35a_context_check_device(None), 1)   # R35A_ERR_NULL_POINTER
        self.assertEqual(lib.r35a_last_error_detail().decode(), "context: NULL")

    def test_library_null_pointer(self):
        q, k, v, out, sl, qsl, bt = small_paged()
        with self.ctx.plan_paged_attention(q, k, v, out, bt, max_seq_len=8, max_query_len=1) as plan:
            self.assertRaisesStatus(rdna35attn.NullPointerError, "paged_attention_args.q", True, plan.run, 0, k, v,
                                    out, sl, qsl, bt)

    def test_backend_unavailable(self):
        if rdna35attn.Context().info.backend == rdna35attn.Backend.GPU:
            self.skipTest("a GPU backend is available here")
        e = self.assertRaisesStatus(rdna35attn.BackendUnavailableError, "context_options.backend", True,
                                    rdna35attn.Context, "gpu")
        self.assertIn("GPU", e.detail)

    def test_every_status_has_its_class(self):
        lib = rdna35attn._lib.load()
        for status in range(1, 14):
            name = lib.r35a_status_string(status).decode()
            cls = errors.ERROR_CLASSES[status]
            self.assertEqual(cls.status, status)
            self.assertEqual(cls.status_name, name)
            e = errors.error_for_status(status, "x.y: because")
            self.assertIsInstance(e, cls)
            self.assertEqual((e.field, e.detail), ("x.y", "x.y: because"))
        unknown = errors.error_for_status(99, "z")
        self.assertIs(type(unknown), rdna35attn.R35AError)
        self.assertEqual(unknown.status, 99)

    def test_statuses_straight_from_the_library(self):
        # Statuses the shim's own checks make unreachable, provoked through the raw C functions.
        lib = rdna35attn._lib.load()
        options = rdna35attn._lib.ContextOptions()
        options.struct_size = 3
        handle = ctypes.c_void_p()
        with self.assertRaises(rdna35attn.StructSizeError) as caught:
            api._check_status(lib, lib.r35a_context_create(ctypes.byref(options), ctypes.byref(handle)))
        self.assertEqual(caught.exception.field, "context_options.struct_size")
        q, k, v, out, sl, qsl, bt = small_paged()
        other = rdna35attn.Context("reference")
        with self.ctx.plan_paged_attention(q, k, v, out, bt, max_seq_len=8, max_query_len=1) as plan:
            args = rdna35attn._lib.PagedArgsC(ctypes.sizeof(rdna35attn._lib.PagedArgsC), q.ctypes.data,
                                              k.ctypes.data, v.ctypes.data, out.ctypes.data, sl.ctypes.data,
                                              qsl.ctypes.data, bt.ctypes.data, None)
            with self.assertRaises(rdna35attn.PlanMismatchError) as caught:
                api._check_status(lib, lib.r35a_paged_attention_run(other.handle, plan._handle, ctypes.byref(args),
                                                                    None, 0, None))
            self.assertEqual(caught.exception.field, "plan")
        other.close()

    def test_closed_objects(self):
        q, k, v, out, sl, qsl, bt = small_paged()
        ctx = rdna35attn.Context("reference")
        plan = ctx.plan_paged_attention(q, k, v, out, bt, max_seq_len=8, max_query_len=1)
        ctx.close()  # closes its plans first
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "plan", False, plan.run, q, k, v, out, sl, qsl, bt)
        self.assertRaisesStatus(rdna35attn.InvalidArgumentError, "context", False, ctx.plan,
                                rdna35attn.PagedAttentionDesc("f16", 1, 1, 1, 8, 2, 1, 8, 4, 2))


if __name__ == "__main__":
    unittest.main()
