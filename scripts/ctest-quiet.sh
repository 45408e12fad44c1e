#!/usr/bin/env bash
# Runs ctest in BUILD_DIR and prints only its summary, or everything about
# the failures when a test fails.   scripts/ctest-quiet.sh BUILD_DIR [ctest args]
set -uo pipefail
build="$1"
shift
log="$build/ctest.log"
if (cd "$build" && ctest -j"${SNN_TEST_JOBS:-$(nproc)}" --output-on-failure --timeout 900 "$@") >"$log" 2>&1; then
  grep -E "tests passed|tests failed" "$log"
else
  cat "$log"
  echo "ctest failed in $build" >&2
  exit 1
fi
