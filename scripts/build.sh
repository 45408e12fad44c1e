#!/usr/bin/env bash
# Configures (once) and builds one build directory.
#   scripts/build.sh [BUILD_DIR] [extra cmake -D options...]
# Default BUILD_DIR: build (Release, CUDA AUTO). Quiet unless something fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build}"
shift || true
[[ "$build" = /* ]] || build="$root/$build"
# ccache's settings (paths relative to the tree, so that build trees of any
# name and fresh clones share one cache) live in cmake/SnnCompilerLauncher.cmake.
mkdir -p "$build"
log="$build/build.log"
: >"$log"  # this build's messages only
if [[ ! -f "$build/build.ninja" || $# -gt 0 ]]; then
  if ! cmake -S "$root" -B "$build" -G Ninja "$@" >>"$log" 2>&1; then
    cat "$log" >&2
    echo "build: cmake configure failed in $build (log above)" >&2
    exit 1
  fi
fi
# One compile per core (ninja's default is two more): a unity batch under
# ASan takes several GiB, and four at once could exhaust a 24 GiB machine.
if ! ninja -C "$build" -j"${SNN_BUILD_JOBS:-$(nproc)}" >>"$log" 2>&1; then
  grep -E -A12 "FAILED|error" "$log" | head -80 >&2
  echo "build: build failed in $build (full log: $log)" >&2
  exit 1
fi
