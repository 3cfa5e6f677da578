"""The ctypes structs match the C header: sizes and every field offset, as a C compiler sees them.

Needs a C compiler and the header: R35A_C_COMPILER / R35A_INCLUDE_DIR (ctest sets both), else cc
and ../../include from here; skipped when there is no compiler."""
import ctypes
import os
import shutil
import subprocess
import tempfile
import unittest

from rdna35attn import _lib

HERE = os.path.dirname(os.path.abspath(__file__))


class AbiTest(unittest.TestCase):
    def test_struct_layout_matches_header(self):
        compiler = os.environ.get("R35A_C_COMPILER") or shutil.which("cc") or shutil.which("gcc")
        include = os.environ.get("R35A_INCLUDE_DIR") or os.path.join(HERE, "..", "..", "include")
        if not compiler or not os.path.exists(os.path.join(include, "rdna35attn.h")):
            self.skipTest("no C compiler or no include/rdna35attn.h")
        lines = ["#include <rdna35attn.h>", "#include <stddef.h>", "#include <stdio.h>", "int main(void) {"]
        for c_name, struct in _lib.STRUCTS.items():
            lines.append('printf("%s sizeof %%zu\\n", sizeof(%s));' % (c_name, c_name))
            for field, _ in struct._fields_:
                lines.append('printf("%s %s %%zu\\n", offsetof(%s, %s));' % (c_name, field, c_name, field))
        lines += ["return 0;", "}"]
        with tempfile.TemporaryDirectory() as tmp:
            source, program = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
            with open(source, "w") as f:
                f.write("\n".join(lines) + "\n")
            # No sanitizer runtime for this helper, whatever the environment preloads.
            env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
            subprocess.run([compiler, "-std=c11", "-I", include, "-o", program, source], check=True, env=env,
                           timeout=60)
            output = subprocess.run([program], check=True, capture_output=True, text=True, env=env,
                                    timeout=60).stdout
        c_layout = {tuple(line.rsplit(" ", 1)[0].split(" ", 1)): int(line.rsplit(" ", 1)[1])
                    for line in output.splitlines()}
        for c_name, struct in _lib.STRUCTS.items():
            self.assertEqual(ctypes.sizeof(struct), c_layout[(c_name, "sizeof")], c_name)
            for field, _ in struct._fields_:
                self.assertEqual(getattr(struct, field).offset, c_layout[(c_name, field)], "%s.%s" % (c_name, field))


if __name__ == "__main__":
    unittest.main()
