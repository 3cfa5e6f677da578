#!/usr/bin/env python3
"""ctest's python_pip_install: the README's install command, as a new user runs it, offline.

For each Python found (Debian's /usr/bin/python3, the python3 on PATH, this interpreter and those
in $R35A_PIP_CHECK_PYTHONS, separated by ':'; the same interpreter once), it creates a fresh venv,
runs `python -m pip install ./python` from the repository's root (the build backend,
python/_r35a_build.py, needs nothing from a package index; the package index is switched off), and
then, with no R35A_LIBRARY set and not from the source tree:
  - checks the wheel is tagged for the platform (it carries librdna35attn.so) and that the package
    loads the library installed inside it;
  - makes a call: with numpy (Debian's venv sees the distribution's python3-numpy through
    --system-site-packages) the README's example python/examples/paged_decode.py (a paged decode
    checked against float64 numpy); without numpy, a reference context and its info.
The library: R35A_BUILD_DIR, when set (ctest sets it to this build), is the CMake build directory
the backend takes it from; without it the backend configures and builds its own (minutes). This
program builds the library once per run at most: the second install reuses the first's build.
Exits 77 (ctest: skipped) when no Python can create a venv with pip, saying why.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_SOURCE = os.path.dirname(HERE)
REPO = os.path.dirname(PACKAGE_SOURCE)
EXAMPLE = os.path.join(PACKAGE_SOURCE, "examples", "paged_decode.py")

CALL_WITHOUT_NUMPY = (
    "import rdna35attn\n"
    "with rdna35attn.Context('reference') as ctx:\n"
    "    print('rdna35attn', rdna35attn.version(), 'context', ctx.info.backend_name, ctx.info.reason)\n")
WHERE = (
    "import os, sys, sysconfig, rdna35attn\n"
    "site = os.path.realpath(sysconfig.get_paths()['purelib'])\n"
    "package = os.path.realpath(os.path.dirname(rdna35attn.__file__))\n"
    "library = os.path.realpath(rdna35attn.library_path())\n"
    "assert package.startswith(site + os.sep), 'the package is not the installed one: ' + package\n"
    "assert library == os.path.join(package, 'librdna35attn.so'), 'the library is not the bundled one: ' + library\n"
    "print('installed rdna35attn', rdna35attn.version(), 'at', package, 'with', library)\n")


def run(cmd, timeout, **kwargs):
    print("+", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    result = subprocess.run(cmd, timeout=timeout, **kwargs)
    print("  (%.1f s, exit %d)" % (time.monotonic() - t0, result.returncode), flush=True)
    return result


def real_executable(python):
    """The interpreter a command runs (through pyenv's shims too), or None."""
    try:
        out = subprocess.run([python, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return os.path.realpath(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None


def pythons():
    wanted = ["/usr/bin/python3", shutil.which("python3") or "", sys.executable]
    wanted += [p for p in os.environ.get("R35A_PIP_CHECK_PYTHONS", "").split(":") if p]
    found, seen = [], set()
    for python in wanted:
        if not python:
            continue
        real = real_executable(python)
        if real and real not in seen:
            seen.add(real)
            found.append(real)
    return found


def has_module(python, module):
    return subprocess.run([python, "-c", "import " + module], capture_output=True, timeout=60).returncode == 0


def check(python, tmp, env):
    """0 passed, 1 failed, 77 this Python cannot make a venv with pip."""
    print("\n== %s ==" % python, flush=True)
    venv = os.path.join(tmp, "venv-%d" % abs(hash(python)))
    # Debian's interpreter: its numpy is the distribution's (python3-numpy), seen through
    # --system-site-packages; another interpreter's venv is as plain as a new user's.
    system_numpy = python.startswith("/usr/bin/") and has_module(python, "numpy")
    made = run([python, "-m", "venv"] + (["--system-site-packages"] if system_numpy else []) + [venv], 300,
               capture_output=True, text=True)
    if made.returncode != 0:
        print("SKIPPED for %s: cannot create a venv with pip (Debian: apt-get install python3-venv):\n%s"
              % (python, made.stderr))
        return 77
    vpython = os.path.join(venv, "bin", "python")
    installed = run([vpython, "-m", "pip", "install", "./python"], 900, env=env, cwd=REPO)
    if installed.returncode != 0:
        print("FAILED for %s: python -m pip install ./python exited %d" % (python, installed.returncode))
        return 1
    wheel_files = glob.glob(os.path.join(venv, "lib", "python*", "site-packages", "rdna35attn-*.dist-info", "WHEEL"))
    tags = [line.split(":", 1)[1].strip() for path in wheel_files for line in open(path) if line.startswith("Tag:")]
    print("wheel tags:", tags)
    ok = len(tags) == 1 and not tags[0].endswith("-any")
    if not ok:
        print("FAILED for %s: the wheel carries a library, its tag must name the platform: %s" % (python, tags))
    ok = run([vpython, "-c", WHERE], 120, env=env, cwd=tmp).returncode == 0 and ok
    if has_module(vpython, "numpy"):
        ok = run([vpython, EXAMPLE], 300, env=env, cwd=tmp).returncode == 0 and ok
    else:
        print("(no numpy in this venv: a reference context instead of the numpy example)")
        ok = run([vpython, "-c", CALL_WITHOUT_NUMPY], 120, env=env, cwd=tmp).returncode == 0 and ok
    print("%s for %s" % ("passed" if ok else "FAILED", python))
    return 0 if ok else 1


def main():
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
    for name in ("R35A_LIBRARY", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(name, None)  # what the package finds must be what pip installed
    found = pythons()
    print("pythons:", ", ".join(found), "| library from", env.get("R35A_BUILD_DIR") or "a build by the backend",
          flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="r35a-pip-") as tmp:
        for python in found:
            results.append(check(python, tmp, env))
    if 1 in results:
        return 1
    if 0 not in results:
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
