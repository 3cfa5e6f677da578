#!/usr/bin/env bash
# The test command: installs what it needs, builds with -Werror, runs the whole ctest suite (with the
# emulator tests, the library's gfx1151 launch path executed on the gfx11 ISA emulator, wherever the
# emulator is found), then builds again with clang-19 as the host compiler (-Werror) and runs a
# quick subset, then runs the suite in an AddressSanitizer + UndefinedBehaviorSanitizer build, then
# the reliability jobs (a one-minute fuzz smoke run, the ThreadSanitizer concurrency test, valgrind
# memcheck). The emulator tests and the nvcc compile check run once: the other passes leave them out
# (-LE 'emulator|nvcc').
# -Werror is off by default for users (R35A_WERROR); every build here turns it on explicitly.
# Replay a randomized failure with R35A_TEST_SEED=<printed seed> tools/test.sh
#
# The emulator (gfx11emu.py, with the tinygrad it imports) is not part of this repository: it is looked
# for at R35A_GFX11EMU_DIR (default ../shared/gfx11emu beside the clone). Without it the emulator tests
# are skipped and the output says so at its start and its end; R35A_REQUIRE_EMULATOR=1 (.ci/run sets it
# where ../shared is present) makes a missing emulator a configure error instead.
# Emulator test length: R35A_EMULATOR_BUDGET_S (tests/hip/test_emulator.c).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh --gpu-toolchain
jobs=$(nproc 2>/dev/null || echo 2)

# ---- which checks run here, and which are skipped (said at the start and at the end) ----
emu_dir=${R35A_GFX11EMU_DIR:-$(cd .. && pwd)/shared/gfx11emu}
skipped=()
if [ "${R35A_REQUIRE_EMULATOR:-0}" = 1 ]; then
  emu_args=(-DR35A_EMULATOR_TESTS=ON -DR35A_GFX11EMU_DIR="$emu_dir")
elif [ -f "$emu_dir/gfx11emu.py" ]; then
  # registered if libpython3 >= 3.11 is found too (checked below)
  emu_args=(-DR35A_EMULATOR_TESTS=AUTO -DR35A_GFX11EMU_DIR="$emu_dir")
else
  emu_args=(-DR35A_EMULATOR_TESTS=OFF)
  skipped+=("the emulator tests (ctest label emulator: every gfx1151 kernel executed on the gfx11 ISA emulator): no emulator at $emu_dir/gfx11emu.py (set R35A_GFX11EMU_DIR, or R35A_REQUIRE_EMULATOR=1 to make this an error)")
fi
banner() { # title
  [ ${#skipped[@]} -eq 0 ] && return 0
  echo "################################################################################"
  echo "## $1: ${#skipped[@]} check(s) SKIPPED on this machine:"
  for s in "${skipped[@]}"; do echo "##   - SKIPPED: $s"; done
  echo "################################################################################"
}

echo "== build (Release, -Werror) =="
# (tests ON explicitly: tools/bench.sh leaves them out of build/ on a machine without cmocka)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DR35A_WERROR=ON -DR35A_BUILD_TESTS=ON -DR35A_REQUIRE_GPU_KERNELS=ON \
  "${emu_args[@]}" >/dev/null
if [ -f "$emu_dir/gfx11emu.py" ] && [ "${R35A_REQUIRE_EMULATOR:-0}" != 1 ] &&
   ! (cd build && ctest -N -L emulator | grep -q 'Total Tests: [1-9]'); then
  skipped+=("the emulator tests (ctest label emulator): the emulator is at $emu_dir but CMake did not register them (libpython3 >= 3.11 for embedding missing? see CMake's warning above)")
fi
banner "tools/test.sh (start)"
trap 'rc=$?; banner "tools/test.sh (end, exit $rc)"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cmake --build build -j"$jobs"
echo "== tests =="
(cd build && ctest --output-on-failure -j"$jobs") 2>&1 | tee build/ctest_release.log
while IFS= read -r name; do
  skipped+=("ctest $name: the program skipped itself (exit 77: no NVIDIA GPU or nvcc here, its output above says which)")
done < <(sed -nE 's/.*Test +#[0-9]+: ([^ ]+) .*(\*\*\*Skipped|Not Run).*/\1/p' build/ctest_release.log)

echo "== build (clang-19 as the host compiler, -Werror) =="
# A second compiler family sees other warnings; the quick subset (a quarter of the random cases;
# consumers and python_pip_install left out: they build and install again and test packaging, not
# the compiler) checks that what it built runs: about 75 s of CPU time in all (74 and 77 s measured).
command -v clang++-19 >/dev/null || { echo "test.sh: clang++-19 is missing (Debian package clang-19)" >&2; exit 1; }
CC=clang-19 CXX=clang++-19 cmake -S . -B build-clang -DCMAKE_BUILD_TYPE=Release -DR35A_WERROR=ON \
  -DR35A_REQUIRE_GPU_KERNELS=ON >/dev/null
cmake --build build-clang -j"$jobs"
(cd build-clang && R35A_TEST_SCALE=0.25 ctest --output-on-failure -j"$jobs" -E '^(consumers|python_pip_install)$' \
  -LE 'emulator|nvcc')

echo "== build (Debug, ASan + UBSan) =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DR35A_WERROR=ON -DR35A_SANITIZE=ON \
  -DR35A_REQUIRE_GPU_KERNELS=ON >/dev/null
cmake --build build-asan -j"$jobs"
echo "== tests under ASan + UBSan =="
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j"$jobs" -LE 'emulator|nvcc')

echo "== reliability: fuzz smoke, ThreadSanitizer, valgrind =="
tools/test_reliability.sh
