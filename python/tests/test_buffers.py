"""How the shim reads buffer objects, and how it finds the library."""
import os
import subprocess
import sys
import unittest

import numpy as np

import rdna35attn
from rdna35attn import _buffers, _lib


class CaiObject:
    def __init__(self, **cai):
        self.__cuda_array_interface__ = cai


class BufferTest(unittest.TestCase):
    def test_numpy(self):
        a = np.zeros((4, 3, 2, 6), np.float16)[:, 1]
        b = _buffers.describe("q", a)
        self.assertEqual((b.shape, b.strides, b.dtype, b.location), ((4, 2, 6), (36, 6, 1), "float16", "host"))
        self.assertEqual(b.ptr, a.ctypes.data)

    def test_cuda_array_interface(self):
        b = _buffers.describe("k", CaiObject(shape=(5, 2, 8), typestr="<u2", data=(4096, False), version=3))
        self.assertEqual((b.shape, b.strides, b.dtype, b.location, b.ptr), ((5, 2, 8), (16, 8, 1), "uint16",
                                                                            "device", 4096))
        b = _buffers.describe("k", CaiObject(shape=(5, 8), typestr="<f4", data=(64, True), strides=(64, 4)))
        self.assertEqual((b.strides, b.writeable), ((16, 1), False))
        with self.assertRaises(rdna35attn.UnknownDtypeError):
            _buffers.describe("k", CaiObject(shape=(2,), typestr="<c8", data=(64, False)))
        with self.assertRaises(rdna35attn.InvalidArgumentError) as caught:
            _buffers.describe("k", CaiObject(shape=(2, 2), typestr="<f2", data=(64, False), strides=(3, 2)))
        self.assertEqual(caught.exception.field, "k.strides")

    def test_ints_and_junk(self):
        b = _buffers.describe("out", 1234)
        self.assertEqual((b.ptr, b.checked), (1234, False))
        for junk in (True, -5, "x", 1.5, [1, 2]):
            with self.assertRaises(rdna35attn.InvalidArgumentError):
                _buffers.describe("out", junk)

    def test_dtype_names(self):
        D = rdna35attn.DType
        for name, want in (("float16", D.F16), ("bf16", D.BF16), ("FP32", D.F32), (np.float16, D.F16),
                           (np.dtype("float32"), D.F32), (2, D.BF16), (D.F16, D.F16)):
            self.assertEqual(rdna35attn.resolve_dtype(name), want, name)
        for bad in ("float64", np.int32, 7):
            with self.assertRaises(rdna35attn.UnknownDtypeError):
                rdna35attn.resolve_dtype(bad)


class LibraryTest(unittest.TestCase):
    def test_found_and_versioned(self):
        self.assertTrue(os.path.exists(rdna35attn.library_path()) or "/" not in rdna35attn.library_path())
        self.assertEqual(rdna35attn.version().split(".")[0], str(_lib.ABI_MAJOR))
        self.assertEqual(rdna35attn.version(), rdna35attn.__version__)

    def test_search_order(self):
        saved = os.environ.pop("R35A_LIBRARY", None)
        try:
            origins = [origin for origin, _ in _lib.candidate_paths()]
            paths = [path for _, path in _lib.candidate_paths()]
        finally:
            if saved is not None:
                os.environ["R35A_LIBRARY"] = saved
        self.assertEqual(origins[0], "next to the package")
        self.assertIn("build tree", origins)
        self.assertTrue(any(p.endswith(os.path.join("build", "librdna35attn.so")) for p in paths))
        self.assertEqual(origins[-1], "loader search path")

    def test_missing_library_is_a_clear_error(self):
        code = ("import rdna35attn\n"
                "try:\n    rdna35attn.Context()\n"
                "except rdna35attn.LibraryNotFoundError as e:\n    print('not found:', e)\n")
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(rdna35attn.__file__)))
        env = dict(os.environ, R35A_LIBRARY="/nonexistent/librdna35attn.so", PYTHONPATH=package_parent)
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("not found:", done.stdout)
        self.assertIn("R35A_LIBRARY", done.stdout)


if __name__ == "__main__":
    unittest.main()
