#!/usr/bin/env bash
# The unity batch files name their sources by relative path
# (cmake/SnnUnity.cmake), so that a clone at another path hits ccache: every
# batch file of the build is ours, none includes an absolute path, each
# included file exists, and CMake's own batch files (absolute paths) are
# not compiled.
#   unity_relative_test.sh BUILD_DIR
set -euo pipefail
build="$1"
fail() { echo "unity_relative_test: $*" >&2; exit 1; }
mapfile -t ours < <(find "$build" -path '*/snn_unity/*' -name 'unity_*.cxx' | sort)
[[ ${#ours[@]} -gt 0 ]] || fail "no batch files of cmake/SnnUnity.cmake under $build"
# (A build folder from before may still hold CMake's files: what counts is
# that the build does not compile them.)
if grep -q '/Unity/unity_[0-9]*_cxx\.cxx' "$build/build.ninja" 2>/dev/null; then
  fail "the build compiles CMake's own unity batch files (see $build/build.ninja)"
fi
for f in "${ours[@]}"; do
  while IFS= read -r line; do
    inc=${line#\#include \"}
    inc=${inc%\"}
    [[ "$inc" != /* ]] || fail "$f includes an absolute path: $inc"
    [[ -f "$(dirname "$f")/$inc" ]] || fail "$f includes $inc, which does not exist"
  done < <(grep '^#include "' "$f")
  grep -q '^#include "' "$f" || fail "$f includes nothing"
done
echo "unity_relative_test: ${#ours[@]} batch files, all relative"
