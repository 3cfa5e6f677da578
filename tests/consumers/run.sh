#!/usr/bin/env bash
# run.sh - builds librdna35attn, installs it into a temporary prefix, checks what was installed and
# builds and runs the consumer programs against that install, as a user of the library would:
#   1. configure + build + `cmake --install --prefix <tmp>/prefix` (a prefix other than the configured
#      one, so the CMake package and the pkg-config file must be relocatable);
#   2. the installed files, the soname, and the exported symbols (exactly the R35A_API functions of
#      the header, under version node R35A_0 (the paged descriptor init under R35A_0.4, 0.3.0's kept
#      at R35A_0.3; the varlen one under R35A_0.3; 0.2.0's inits kept at R35A_0.2 and 0.1.0's at
#      R35A_0; the merge op under R35A_0.3), matching src/rdna35attn.map);
#   3. consumer_c (C, find_package, shared library) and consumer_cxx (C++, find_package, static
#      library) from tests/consumers/cmake_project, and consumer_pkgconfig (consumer.c, built with
#      only `pkg-config --cflags --libs rdna35attn`); each runs a paged decode on the best available
#      backend and checks it against its own float64 attention.
# Everything lives in one temporary directory that is removed at exit (R35A_KEEP_TMP=1 keeps it).
#
# The GPU kernels are compiled only where a HIP runtime is installed (elsewhere AUTO picks the
# reference and they would only cost time); extra arguments such as -DR35A_GPU_TARGETS=gfx1151 override.
#
# Usage: tests/consumers/run.sh [extra cmake arguments for the library build]
# Exit status: 0 pass; 77 a part was skipped (no C++ compiler or no pkg-config; the rest ran); other: failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
work=$(mktemp -d "${TMPDIR:-/tmp}/r35a-consumers.XXXXXX")
# shellcheck disable=SC2317  # called through the trap
cleanup() {
  if [ "${R35A_KEEP_TMP:-0}" = 1 ]; then echo "consumers: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

step() { echo "== consumers: $* =="; }
fail() { echo "consumers: FAIL: $*" >&2; exit 1; }
# Runs a command quietly; shows its output only when it fails.
quiet() {
  local log="$work/last.log"
  if ! "$@" >"$log" 2>&1; then cat "$log" >&2; fail "command failed: $*"; fi
}

# True when the HIP runtime the library would dlopen is on the loader's path (or named by
# R35A_HIP_LIBRARY): only then can the GPU code objects be used by the consumers.
have_hip_runtime() {
  [ -n "${R35A_HIP_LIBRARY:-}" ] && return 0
  ldconfig -p 2>/dev/null | grep -q 'libamdhip64\.so' && return 0
  local dir
  IFS=: read -r -a dirs <<<"${LD_LIBRARY_PATH:-}"
  for dir in "${dirs[@]}"; do
    [ -n "$dir" ] && compgen -G "$dir/libamdhip64.so*" >/dev/null && return 0
  done
  return 1
}

step "build and install the library into a temporary prefix"
prefix="$work/prefix"
gpu_args=()
if have_hip_runtime; then
  echo "HIP runtime found: the GPU kernels are built, the consumers run on the GPU if AUTO picks it"
else
  # Without a runtime AUTO picks the reference, so compiling the kernels would only cost time.
  gpu_args=(-DR35A_GPU_TARGETS=)
  echo "no HIP runtime on this machine: building without GPU kernels (AUTO picks the reference)"
fi
quiet cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DR35A_BUILD_TESTS=OFF \
  -DR35A_BUILD_BENCH=OFF -DCMAKE_INSTALL_PREFIX="$work/configured-prefix" ${gpu_args[@]+"${gpu_args[@]}"} "$@"
quiet cmake --build "$work/build" -j"$jobs"
quiet cmake --install "$work/build" --prefix "$prefix"

step "installed files"
pc_file=$(find "$prefix" -name rdna35attn.pc -print -quit)
[ -n "$pc_file" ] || fail "no rdna35attn.pc under $prefix"
libdir=$(dirname "$(dirname "$pc_file")")
major=$(sed -n 's/^#define R35A_VERSION_MAJOR \([0-9]*\)$/\1/p' "$src/include/rdna35attn.h")
for f in "$prefix/include/rdna35attn.h" "$libdir/librdna35attn.so" "$libdir/librdna35attn.so.$major" \
         "$libdir/librdna35attn.a" "$libdir/cmake/rdna35attn/rdna35attnConfig.cmake" \
         "$libdir/cmake/rdna35attn/rdna35attnConfigVersion.cmake" \
         "$libdir/cmake/rdna35attn/rdna35attnTargets.cmake"; do
  [ -e "$f" ] || fail "missing installed file ${f#"$prefix"/}"
done
cmp -s "$src/include/rdna35attn.h" "$prefix/include/rdna35attn.h" || fail "installed header differs"
real_so=$(readlink -f "$libdir/librdna35attn.so")
echo "installed $(cd "$prefix" && find . -type f | sort | tr '\n' ' ')"

step "soname and exported symbols"
if command -v readelf >/dev/null 2>&1 && command -v nm >/dev/null 2>&1; then
  soname=$(readelf -d "$real_so" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
  [ "$soname" = "librdna35attn.so.$major" ] || fail "soname is '$soname', not librdna35attn.so.$major"
  # R35A_API declarations of the header, the version script's globals, and what the .so exports.
  sed -n 's/^R35A_API [^(]*[ *]\(r35a_[a-z0-9_]*\)(.*/\1/p' "$src/include/rdna35attn.h" | sort >"$work/header.txt"
  sed -n 's/^ *\(r35a_[a-z0-9_]*\);.*/\1/p' "$src/src/rdna35attn.map" | sort -u >"$work/map.txt"
  nm -D --defined-only --with-symbol-versions "$real_so" | awk '$2 ~ /^[TDBRWVi]$/ {print $3}' \
    | sort >"$work/exported.txt"
  sed 's/@.*//' "$work/exported.txt" | sort -u >"$work/exported-names.txt"
  diff -u "$work/header.txt" "$work/map.txt" >&2 || fail "src/rdna35attn.map does not list exactly the header's R35A_API functions"
  # The version nodes' own symbols (R35A_0, R35A_0.2, R35A_0.3, R35A_0.4) are absolute symbols named after them; drop them.
  grep -v '^R35A_' "$work/exported-names.txt" >"$work/exported-functions.txt" || true
  diff -u "$work/header.txt" "$work/exported-functions.txt" >&2 || fail "the library exports other symbols than the header's R35A_API functions"
  # Every function's default version is R35A_0, R35A_0.2 for what 0.2 added (r35a_context_check_device),
  # R35A_0.3 for what 0.3 added (the merge op) and the varlen descriptor init, or R35A_0.4 for the
  # paged descriptor init (its struct grew in 0.4); the inits also keep their earlier releases'
  # versions (paged: @R35A_0.3, both: @R35A_0.2, @R35A_0), not default, for binaries built against those.
  if grep -v '^R35A_0\(\.[234]\)\?@' "$work/exported.txt" | grep -v '@@R35A_0$' \
      | grep -v '^r35a_paged_attention_desc_init@\(@R35A_0\.4\|R35A_0\.3\|R35A_0\.2\|R35A_0\)$' \
      | grep -v '^r35a_varlen_attention_desc_init@\(@R35A_0\.3\|R35A_0\.2\|R35A_0\)$' \
      | grep -v '^r35a_merge_states_\(desc_init\|plan\|run\)@@R35A_0\.3$' \
      | grep -v '^r35a_context_check_device@@R35A_0\.2$' >&2; then
    fail "exported symbols outside the version nodes R35A_0, R35A_0.2, R35A_0.3 and R35A_0.4"
  fi
  for init in r35a_paged_attention_desc_init r35a_varlen_attention_desc_init; do
    grep -qx "$init@R35A_0" "$work/exported.txt" || fail "$init@R35A_0 (0.1.0's, for old binaries) is missing"
    grep -qx "$init@R35A_0.2" "$work/exported.txt" || fail "$init@R35A_0.2 (0.2.0's, for old binaries) is missing"
  done
  grep -qx "r35a_paged_attention_desc_init@R35A_0.3" "$work/exported.txt" \
    || fail "r35a_paged_attention_desc_init@R35A_0.3 (0.3.0's, for old binaries) is missing"
  grep -qx "r35a_paged_attention_desc_init@@R35A_0.4" "$work/exported.txt" || fail "r35a_paged_attention_desc_init@@R35A_0.4 is missing"
  grep -qx "r35a_varlen_attention_desc_init@@R35A_0.3" "$work/exported.txt" || fail "r35a_varlen_attention_desc_init@@R35A_0.3 is missing"
  grep -qx "r35a_context_check_device@@R35A_0.2" "$work/exported.txt" || fail "r35a_context_check_device@@R35A_0.2 is missing"
  for f in r35a_merge_states_desc_init r35a_merge_states_plan r35a_merge_states_run; do
    grep -qx "$f@@R35A_0.3" "$work/exported.txt" || fail "$f@@R35A_0.3 is missing"
  done
  echo "soname $soname; exports $(wc -l <"$work/header.txt") functions, all r35a_* @@R35A_0 (r35a_context_check_device @@R35A_0.2; the paged desc init @@R35A_0.4, 0.3.0's @R35A_0.3; the varlen init and the merge op @@R35A_0.3; 0.2.0's inits @R35A_0.2, 0.1.0's @R35A_0)"
else
  echo "consumers: readelf/nm (binutils) not found; soname and symbol checks skipped"
fi

status=0
step "C and C++ consumers through find_package(rdna35attn)"
quiet cmake -S "$here/cmake_project" -B "$work/consumers" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix"
quiet cmake --build "$work/consumers" -j"$jobs"
"$work/consumers/consumer_c" || fail "consumer_c"
if command -v readelf >/dev/null 2>&1; then
  readelf -d "$work/consumers/consumer_c" | grep -q "librdna35attn.so.$major" \
    || fail "consumer_c does not link librdna35attn.so.$major"
fi
if [ -x "$work/consumers/consumer_cxx" ]; then
  "$work/consumers/consumer_cxx" || fail "consumer_cxx"
  if command -v readelf >/dev/null 2>&1 && readelf -d "$work/consumers/consumer_cxx" | grep -q librdna35attn; then
    fail "consumer_cxx links the shared library instead of the static one"
  fi
else
  echo "consumers: SKIPPED consumer_cxx: no C++ compiler found (install g++)" >&2
  status=77
fi

step "C consumer through pkg-config"
if command -v pkg-config >/dev/null 2>&1; then
  export PKG_CONFIG_PATH="$libdir/pkgconfig"
  pc_libdir=$(pkg-config --variable=libdir rdna35attn)
  [ "$(readlink -f "$pc_libdir")" = "$(readlink -f "$libdir")" ] || fail "rdna35attn.pc libdir $pc_libdir is not $libdir"
  echo "pkg-config: $(pkg-config --modversion rdna35attn): $(pkg-config --cflags --libs rdna35attn)"
  # shellcheck disable=SC2046  # pkg-config output is meant to be split into words
  quiet "${CC:-cc}" -std=c11 -Wall -Wextra -Wpedantic -Werror -O2 -o "$work/consumer_pkgconfig" "$here/consumer.c" \
    $(pkg-config --cflags --libs rdna35attn) -Wl,-rpath,"$pc_libdir" -lm -ldl
  "$work/consumer_pkgconfig" | sed 's/^consumer_c:/consumer_pkgconfig:/' || fail "consumer_pkgconfig"
else
  echo "consumers: SKIPPED the pkg-config consumer: pkg-config not found" >&2
  status=77
fi

[ $status = 0 ] && echo "consumers: PASS"
exit $status
