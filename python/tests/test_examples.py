"""python/examples/*.py run from the source tree (the pip-installed run is check_pip_install.py)."""
import glob
import os
import subprocess
import sys
import unittest

import rdna35attn

EXAMPLES = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "*.py")))


class ExamplesTest(unittest.TestCase):
    def test_examples_run(self):
        self.assertTrue(EXAMPLES)
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(rdna35attn.__file__)))
        env = dict(os.environ, PYTHONPATH=package_parent, R35A_LIBRARY=rdna35attn.library_path())
        for example in EXAMPLES:
            with self.subTest(example=os.path.basename(example)):
                done = subprocess.run([sys.executable, example], env=env, capture_output=True, text=True,
                                      timeout=60)
                self.assertEqual(done.returncode, 0, done.stdout + done.stderr)


if __name__ == "__main__":
    unittest.main()
