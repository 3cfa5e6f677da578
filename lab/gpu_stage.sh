#!/usr/bin/env bash
# gpu_stage.sh - builds, on a machine with nvcc (and cmocka for the CPU tests), everything the GPU
# machine needs for lab/gpu_suite.sh and copies it into one small folder (default gpu-carry/):
# librdna35attn.so.0 with the sm_90 cubins embedded, test_gpu_cuda, fuzz_gpu, soak_gpu, the read-bandwidth cubin,
# r35a_bench (static: library and read kernels inside), kv_stream (lab/kv_stream.cu) and r35a_bench_nochecks (the same with the kernels'
# device-metadata checks compiled out: gpu_suite.sh's checkcost step). The suite's r35abench step does not use
# these: it builds the bench there as a user would (tools/bench.sh).
#   lab/gpu_stage.sh [dest] ; then on the GPU machine: lab/gpu_suite.sh gpu-carry
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-gpu-carry}
ARCHS=${R35A_NVIDIA_TARGETS:-sm_90}
cmake -S . -B build-nv -DCMAKE_BUILD_TYPE=Release -DR35A_NVIDIA_TARGETS="$ARCHS" -DR35A_BUILD_TESTS=ON \
    -DR35A_BUILD_BENCH=ON >/dev/null
cmake --build build-nv -j"$(nproc 2>/dev/null || echo 2)" --target rdna35attn rdna35attn_gputest test_gpu_cuda fuzz_gpu soak_gpu r35a_read_bw \
    r35a_bench >/dev/null
# the bench once more with the kernels' device-metadata checks compiled out, for gpu_suite.sh's
# checkcost step (what the checks cost; a measurement build, never used otherwise)
cmake -S . -B build-nv-nochecks -DCMAKE_BUILD_TYPE=Release -DR35A_NVIDIA_TARGETS="$ARCHS" -DR35A_BUILD_TESTS=OFF \
    -DR35A_GPU_TARGETS= -DR35A_LAB_BUILD=ON -DR35A_LAB_DEFINES=R35A_LAB_DEVICE_CHECKS=0 >/dev/null 2>&1
cmake --build build-nv-nochecks -j"$(nproc 2>/dev/null || echo 2)" --target r35a_bench >/dev/null
rm -rf "$DEST" && mkdir -p "$DEST"
cp -L build-nv/librdna35attn.so.0 "$DEST/librdna35attn.so.0"
cp -L build-nv/librdna35attn_gputest.so "$DEST/"   # test_gpu_cuda's: the library plus the gfx11-emulation cubins
cp build-nv/tests/test_gpu_cuda build-nv/tests/fuzz_gpu build-nv/tests/soak_gpu build-nv/bench/read_bw_*.cubin \
    build-nv/bench/r35a_bench "$DEST/"
cp build-nv-nochecks/bench/r35a_bench "$DEST/r35a_bench_nochecks"
# the decode access pattern as a pure stream (gpu_suite.sh's stream step; a measurement, not the library's)
nvcc -O3 -std=c++17 -arch=sm_90 -o "$DEST/kv_stream" lab/kv_stream.cu
du -sh "$DEST"
