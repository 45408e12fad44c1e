#!/usr/bin/env bash
# The whole test suite from a fresh Debian 12 machine: installs what is
# missing, builds, and runs every test. This is what CI runs (.ci/run).
#
#   1. a build with CUDA off (users without the toolkit) and its library
#      tests;
#   2. the sanitizer build (ASan + UBSan) and its tests, unless
#      SNN_SKIP_SANITIZE=1;
#   3. the default build (CUDA AUTO) and its tests, including installing the
#      package and building a consumer project with find_package(snn), the
#      main job as the README runs it, and every code block of the README
#      and docs/ (label docs; only this build has them).
# The output ends with ctest's summary line of the default build.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs="${SNN_TEST_JOBS:-$(nproc)}"

# Each stage says how long it took: CI has a hard time limit, and a log that
# ends in a timeout should still tell which stage grew.
stage_start=$SECONDS
took() { echo "   ($1: $((SECONDS - stage_start)) s)"; stage_start=$SECONDS; }

bash scripts/setup.sh
took setup

echo "== CUDA off build (build-nocuda)"
bash scripts/build.sh build-nocuda -DSNN_WITH_CUDA=OFF -DSNN_BUILD_BENCH=OFF -DSNN_DOC_TESTS=OFF
took build
# Here the library suites, which hold what differs with CUDA off, and the
# installed program's main job. The tests that drive the snnsim program
# (label cli: the same code in every build) and the peers' statistics
# (they test the model, not the build) run in the default build below.
bash scripts/ctest-quiet.sh build-nocuda -LE 'consumer|statistics|cli'
took tests

if [[ "${SNN_SKIP_SANITIZE:-0}" != 1 ]]; then
  echo "== sanitizer build (build-asan: ASan + UBSan)"
  bash scripts/sanitize.sh
  took "build and tests"
fi

echo "== default build (build)"
bash scripts/build.sh build
took build
cd build
ctest -j"$jobs" --output-on-failure --timeout 600
