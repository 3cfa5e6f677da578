#!/usr/bin/env bash
# The bench command: builds the bench for the GPU this machine has and runs it. With no arguments it
# runs the default decode problem; any arguments go to the bench (tools/bench.sh --help lists them).
#
#   AMD GPU (ROCm's /dev/kfd or libamdhip64): the gfx11 kernels are built with clang-19 + lld-19
#       (or ROCm's clang); the bench runs on the HIP backend when the device is one the build serves.
#   NVIDIA GPU (nvidia-smi) with nvcc: cubins are added for its compute capability
#       (R35A_NVIDIA_TARGETS=sm_XY); the bench runs on the CUDA backend.
#   Neither: the CPU reference. The bench's header says which backend runs and why.
#
# It needs cmake, a C compiler, make and python3 (and the GPU compilers above), nothing the tests
# need: without cmocka the test suite is left out of this build. Missing tools are installed with
# apt-get when run as root, otherwise the apt-get line is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
have_cmd() { command -v "$1" >/dev/null 2>&1; }
say() { echo "bench.sh: $*" >&2; }

amd_gpu=false
amd_why=""
if [ -e /dev/kfd ]; then
  amd_gpu=true; amd_why="/dev/kfd"
elif have_cmd ldconfig && ldconfig -p 2>/dev/null | grep -q libamdhip64; then
  amd_gpu=true; amd_why="libamdhip64 installed"
fi
nvidia_arch=""
if have_cmd nvidia-smi; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)
  if [ -z "$cap" ] && [ -x /usr/local/cuda/bin/__nvcc_device_query ]; then
    cap=$(/usr/local/cuda/bin/__nvcc_device_query 2>/dev/null | tr ',' '\n' | head -1 | tr -d ' ' || true)
  fi
  case $cap in [0-9][0-9]|[0-9][0-9][0-9]) nvidia_arch=sm_$cap ;; esac
fi

need=()
have_cmd cmake || need+=(cmake)
have_cmd cc || need+=(gcc)
have_cmd make || need+=(make)
have_cmd python3 || need+=(python3)
skip_gfx11=false
if $amd_gpu && ! have_cmd clang-19 && ! [ -x /opt/rocm/llvm/bin/clang ]; then
  if [ -n "$nvidia_arch" ]; then
    # an NVIDIA GPU is what this machine measures: the gfx11 kernels are left out rather than
    # installing a compiler for them (found on the H200 machine: libamdhip64 is on its linker path,
    # its package mirror unreachable)
    say "an AMD runtime is present ($amd_why) but clang-19 is not: building for $nvidia_arch only"
    skip_gfx11=true
  else
    need+=(clang-19 lld-19)
  fi
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && have_cmd apt-get; then
    say "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    say "missing ${need[*]}; run: sudo apt-get install -y ${need[*]}"
    exit 1
  fi
fi

args=(-DCMAKE_BUILD_TYPE=Release)
$skip_gfx11 && args+=(-DR35A_GPU_TARGETS=)
if [ -n "$nvidia_arch" ]; then
  nvcc=$(command -v nvcc || true)
  if [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
    nvcc=/usr/local/cuda/bin/nvcc
  fi
  if [ -n "$nvcc" ]; then
    args+=(-DR35A_NVIDIA_TARGETS="$nvidia_arch" -DR35A_NVCC="$nvcc")
  else
    say "an NVIDIA GPU ($nvidia_arch) is present but nvcc is not: the bench runs the CPU reference" \
        "(install the CUDA toolkit for its kernels)"
  fi
fi
# The test suite needs cmocka; the bench does not.
if ! { [ -e /usr/include/cmocka.h ] || { have_cmd pkg-config && pkg-config --exists cmocka; }; }; then
  args+=(-DR35A_BUILD_TESTS=OFF)
fi

mkdir -p build
log=build/bench-build.log
if ! { cmake -S . -B build "${args[@]}" && cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target r35a_bench; } \
    >"$log" 2>&1; then
  tail -30 "$log" >&2
  say "the build failed; the whole log is $log"
  exit 1
fi
exec build/bench/r35a_bench "$@"
