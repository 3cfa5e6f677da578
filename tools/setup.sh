#!/usr/bin/env bash
# Installs what building and testing librdna35attn needs on Debian/Ubuntu, if it is missing.
# As root it runs apt-get; otherwise it prints the apt-get command to run and fails.
# Usage: tools/setup.sh [--gpu-toolchain]   (the second installs clang-19/lld-19/llvm-19 for gfx1151 code objects
#                                           and libpython3-dev for the emulator tests)
set -euo pipefail

need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

have_cmd cmake || need+=(cmake)
have_cmd cc || need+=(gcc)
have_cmd make || need+=(make)
have_cmd pkg-config || need+=(pkg-config)
have_pkg libcmocka-dev || need+=(libcmocka-dev)
have_cmd c++ || need+=(g++)
have_cmd python3 || need+=(python3)
# the Python shim's tests (numpy) and `python3 -m pip install ./python` into a venv (its build
# backend is stdlib-only: no setuptools or wheel package needed)
have_pkg python3-numpy || need+=(python3-numpy)
have_pkg python3-venv || need+=(python3-venv)
if [ "${1:-}" = "--gpu-toolchain" ]; then
  have_cmd clang-19 || need+=(clang-19)
  have_cmd ld.lld-19 || need+=(lld-19)
  have_cmd llvm-readelf-19 || need+=(llvm-19)
  # the emulator tests (ctest label emulator) embed Python 3 (>= 3.11, for ../shared/tinygrad) to run
  # the code objects on ../shared/gfx11emu
  have_pkg libpython3-dev || need+=(libpython3-dev)
fi

[ ${#need[@]} -eq 0 ] && exit 0

if ! have_cmd apt-get; then
  echo "setup: missing ${need[*]}; install them with your package manager" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "setup: missing ${need[*]}; run: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "setup: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
