#!/usr/bin/env bash
# The bench command: installs what it needs, builds the bench and runs it. With no arguments it runs
# the default decode problem; any arguments go to the bench (see tools/bench.sh --help).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target r35a_bench >/dev/null
exec build/bench/r35a_bench "$@"
