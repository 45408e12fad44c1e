#!/usr/bin/env bash
# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer
# (build directory build-asan, CUDA off: the sanitizers cover host code).
# -g1: line tables only, enough for the reports' file:line; a unity batch
# then compiles in about 0.7 of the time -g takes (43 s against 60 s for
# simulator_test's), the largest part of a cold CI run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
start=$SECONDS
bash scripts/build.sh build-asan -DSNN_SANITIZE=ON -DSNN_WITH_CUDA=OFF -DSNN_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" -DSNN_DOC_TESTS=OFF
echo "   (build: $((SECONDS - start)) s)"
# LibTorch itself is not instrumented: its allocations at exit are not ours
# to report, and its operator new/delete pairs cross the boundary.
export ASAN_OPTIONS="detect_leaks=0:alloc_dealloc_mismatch=0:abort_on_error=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
# Left out: the consumer project (it installs and rebuilds against the
# package) and the installed main job (label install: 12 epochs of training,
# far too slow under the sanitizers; the CUDA-off and default builds run it).
bash scripts/ctest-quiet.sh build-asan -LE 'consumer|install|slow'
