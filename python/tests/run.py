#!/usr/bin/env python3
"""Runs the Python shim's unittest suite (python/tests/test_*.py); ctest's python_shim test.

    R35A_LIBRARY=build/librdna35attn.so python3 python/tests/run.py [unittest args, e.g. -k window]

Prints the seed of the randomized inputs; R35A_TEST_SEED=<seed> replays a run. Exits 77 (ctest:
skipped) when numpy is missing, naming the package to install.
"""
import importlib.util
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package, straight from the source tree
sys.path.insert(0, HERE)


def main():
    if importlib.util.find_spec("numpy") is None:
        print("python shim tests SKIPPED: numpy is not installed for %s (Debian: apt-get install python3-numpy)"
              % sys.executable)
        return 77
    import _oracle
    seed = _oracle.seed()
    os.environ["R35A_TEST_SEED"] = str(seed)
    import rdna35attn
    print("rdna35attn %s from %s; seed %d (replay: R35A_TEST_SEED=%d)"
          % (rdna35attn.version(), rdna35attn.library_path(), seed, seed))
    program = unittest.main(module=None, argv=[sys.argv[0], "discover", "-s", HERE, "-t", HERE, "-p", "test_*.py"]
                            + sys.argv[1:], exit=False, verbosity=2)
    return 0 if program.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
