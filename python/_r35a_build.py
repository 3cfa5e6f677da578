"""The rdna35attn package's PEP 517 build backend: stdlib only, so `pip install ./python` needs no
download (pyproject.toml: requires = [], backend-path = ["."]) and no setuptools or wheel package.

A wheel carries the package and librdna35attn.so inside it (rdna35attn/librdna35attn.so, which the
package loads first: rdna35attn/_lib.py), so it is tagged for this platform (py3-none-linux_x86_64 on
an x86-64 Linux), not py3-none-any. The library comes from, in order:
  1. $R35A_BUILD_DIR: a CMake build directory of this repository (e.g. the README's build/); its
     target rdna35attn is brought up to date there (nothing to do when it is);
  2. python/build/cmake: a build of the repository configured here the first time (Release, no tests,
     no bench; GPU kernels as a default build has them) and rebuilt incrementally after.
The repository is the directory above this file ($R35A_SOURCE_DIR overrides: pip builds in the
source tree, so it is found unless the python/ folder was copied away alone).
An editable install (`pip install -e ./python`) puts the source folder on the path instead and
builds nothing: the package then finds the library as in a checkout (build/librdna35attn.so,
$R35A_LIBRARY).
"""

import base64
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = "rdna35attn"
LIBRARY = "librdna35attn.so"


# ---- metadata: from pyproject.toml's [project] table ------------------------------------------

def _project():
    """name, version, description, requires-python and license from [project] (a small reader:
    tomllib is Python >= 3.11 only, and these are plain one-line strings)."""
    text = (HERE / "pyproject.toml").read_text()
    table = re.search(r"^\[project\]\s*$(.*?)(?=^\[)", text, re.M | re.S).group(1)
    fields = {}
    for key in ("name", "version", "description", "requires-python"):
        match = re.search(r'^%s\s*=\s*"([^"]*)"' % re.escape(key), table, re.M)
        if match:
            fields[key] = match.group(1)
    license_match = re.search(r'^license\s*=\s*\{\s*text\s*=\s*"([^"]*)"', table, re.M)
    fields["license"] = license_match.group(1) if license_match else ""
    fields["classifiers"] = re.findall(r'^\s*"([^"]+ :: [^"]+)",?\s*$', table, re.M)
    return fields


def _metadata(project):
    lines = ["Metadata-Version: 2.1", "Name: %s" % project["name"], "Version: %s" % project["version"]]
    if project.get("description"):
        lines.append("Summary: %s" % project["description"])
    if project.get("license"):
        lines.append("License: %s" % project["license"])
    if project.get("requires-python"):
        lines.append("Requires-Python: %s" % project["requires-python"])
    lines += ["Classifier: %s" % c for c in project.get("classifiers", [])]
    lines += ["Provides-Extra: numpy", 'Requires-Dist: numpy; extra == "numpy"']
    return "\n".join(lines) + "\n"


def _platform_tag():
    return re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())


# ---- the library ------------------------------------------------------------------------------

def _log(message):
    print("rdna35attn build: %s" % message, file=sys.stderr, flush=True)


def _run(cmd):
    _log("+ " + " ".join(cmd))
    subprocess.run(cmd, check=True, stdout=sys.stderr)


def _source_dir():
    source = pathlib.Path(os.environ.get("R35A_SOURCE_DIR") or HERE.parent).resolve()
    if not (source / "CMakeLists.txt").is_file() or not (source / "include" / "rdna35attn.h").is_file():
        raise RuntimeError(
            "rdna35attn build: the library's sources are not at %s (the package is built from a checkout of "
            "the repository: pip install ./python from its root; or set R35A_SOURCE_DIR, or R35A_BUILD_DIR to "
            "a CMake build directory of it)" % source)
    return source


def _jobs():
    try:
        return str(max(1, len(os.sched_getaffinity(0))))
    except AttributeError:
        return str(os.cpu_count() or 2)


def _build_library():
    """Path of a built librdna35attn.so (the real file, not its SONAME links)."""
    if shutil.which("cmake") is None:
        raise RuntimeError("rdna35attn build: cmake is not installed (Debian: apt-get install cmake, or tools/setup.sh)")
    given = os.environ.get("R35A_BUILD_DIR")
    if given:
        build = pathlib.Path(given).resolve()
        if not (build / "CMakeCache.txt").is_file():
            raise RuntimeError("rdna35attn build: R35A_BUILD_DIR=%s is not a configured CMake build directory" % build)
    else:
        build = HERE / "build" / "cmake"
        if not (build / "CMakeCache.txt").is_file():
            _run(["cmake", "-S", str(_source_dir()), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                  "-DR35A_BUILD_TESTS=OFF", "-DR35A_BUILD_BENCH=OFF"])
    _run(["cmake", "--build", str(build), "--target", "rdna35attn", "-j", _jobs()])
    library = build / LIBRARY
    if not library.exists():
        raise RuntimeError("rdna35attn build: %s was not built" % library)
    return library.resolve()


# ---- the wheel --------------------------------------------------------------------------------

def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(wheel_directory, files, tag, project):
    """files: (archive name, bytes, unix mode). Writes {name}-{version}-{tag}.whl, returns its basename."""
    name = re.sub(r"[-_.]+", "_", project["name"])
    dist_info = "%s-%s.dist-info" % (name, project["version"])
    wheel_text = "Wheel-Version: 1.0\nGenerator: rdna35attn _r35a_build\nRoot-Is-Purelib: %s\nTag: %s\n" % (
        "true" if tag.endswith("-any") else "false", tag)
    files = list(files) + [
        (dist_info + "/METADATA", _metadata(project).encode(), 0o644),
        (dist_info + "/WHEEL", wheel_text.encode(), 0o644),
        (dist_info + "/top_level.txt", (PACKAGE + "\n").encode(), 0o644),
    ]
    record = "".join("%s,%s,%d\n" % (arcname, _record_hash(data), len(data)) for arcname, data, _ in files)
    record += dist_info + "/RECORD,,\n"
    files.append((dist_info + "/RECORD", record.encode(), 0o644))
    basename = "%s-%s-%s.whl" % (name, project["version"], tag)
    path = os.path.join(wheel_directory, basename)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for arcname, data, mode in files:
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return basename


def _package_files():
    for path in sorted((HERE / PACKAGE).rglob("*.py")):
        yield (path.relative_to(HERE).as_posix(), path.read_bytes(), 0o644)


# ---- PEP 517 / PEP 660 hooks --------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """The dist-info without building the library (pip asks for it before the wheel)."""
    project = _project()
    name = re.sub(r"[-_.]+", "_", project["name"])
    dist_info = os.path.join(metadata_directory, "%s-%s.dist-info" % (name, project["version"]))
    os.makedirs(dist_info, exist_ok=True)
    with open(os.path.join(dist_info, "METADATA"), "w") as f:
        f.write(_metadata(project))
    return os.path.basename(dist_info)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = _project()
    library = _build_library()
    files = list(_package_files())
    files.append(("%s/%s" % (PACKAGE, LIBRARY), library.read_bytes(), 0o755))
    basename = _write_wheel(wheel_directory, files, "py3-none-" + _platform_tag(), project)
    _log("wrote %s with %s (%d bytes)" % (basename, library, library.stat().st_size))
    return basename


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    project = _project()
    pth = ("%s\n" % HERE).encode()
    return _write_wheel(wheel_directory, [("__editable__.%s.pth" % PACKAGE, pth, 0o644)], "py3-none-any", project)


def build_sdist(sdist_directory, config_settings=None):
    raise RuntimeError("rdna35attn: no source distribution; the package builds from a checkout of the repository "
                       "(its C library is outside python/): pip install ./python")
