#!/usr/bin/env python3
"""ctest's python_pip_install: the README's install command works offline.

Copies python/ to a temporary directory (pip builds in the source tree and would leave build/ and
*.egg-info behind), creates a venv with --system-site-packages (numpy, setuptools and wheel from
the distribution, e.g. Debian's python3-numpy/python3-setuptools/python3-wheel), runs
`pip install --no-build-isolation <copy>` with the package index switched off, and runs the README's
example python/examples/paged_decode.py (a paged decode checked against float64 numpy) through the
installed package, with the library from $R35A_LIBRARY.
Exits 77 (ctest: skipped) when venv/ensurepip, numpy or wheel is missing, saying which.
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_SOURCE = os.path.dirname(HERE)

EXAMPLE = os.path.join(PACKAGE_SOURCE, "examples", "paged_decode.py")
WHERE = "import rdna35attn; assert 'site-packages' in rdna35attn.__file__, rdna35attn.__file__; " \
        "print('installed rdna35attn', rdna35attn.version(), 'at', rdna35attn.__file__)"


def run(cmd, **kwargs):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, timeout=150, **kwargs)


def main():
    if importlib.util.find_spec("numpy") is None:
        print("pip install check SKIPPED: numpy is not installed for %s (apt-get install python3-numpy)"
              % sys.executable)
        return 77
    # setuptools < 70 builds wheels with the wheel package; the venv sees the system's.
    if importlib.util.find_spec("wheel") is None:
        print("pip install check SKIPPED: the wheel package is not installed for %s (Debian: apt-get install "
              "python3-wheel)" % sys.executable)
        return 77
    with tempfile.TemporaryDirectory(prefix="r35a-pip-") as tmp:
        source = os.path.join(tmp, "python")
        shutil.copytree(PACKAGE_SOURCE, source, ignore=shutil.ignore_patterns(
            "tests", "build", "*.egg-info", "__pycache__", "CMakeLists.txt"))
        venv = os.path.join(tmp, "venv")
        made = run([sys.executable, "-m", "venv", "--system-site-packages", venv], capture_output=True, text=True)
        if made.returncode != 0:
            print("pip install check SKIPPED: cannot create a venv with pip (Debian: apt-get install python3-venv):\n"
                  + made.stderr)
            return 77
        python = os.path.join(venv, "bin", "python")
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        env.pop("PYTHONPATH", None)  # the package must come from the venv, not the source tree
        installed = run([python, "-m", "pip", "install", "--no-build-isolation", source], env=env, cwd=tmp)
        if installed.returncode != 0:
            print("pip install check FAILED: pip install --no-build-isolation exited %d" % installed.returncode)
            return 1
        where = run([python, "-c", WHERE], env=env, cwd=tmp)
        example = run([python, EXAMPLE], env=env, cwd=tmp)
        return 0 if where.returncode == 0 and example.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
