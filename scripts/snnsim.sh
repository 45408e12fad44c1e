#!/usr/bin/env bash
# The main job: sets up, builds (once), trains a spiking network on the
# embedded MNIST subset (a few minutes on 2 cores), simulates the held-out
# digits through the trained network, and says where the results are.
# Settings: examples/mnist/mnist.toml. With arguments it runs
# `snnsim ARGS...` after the same set-up instead.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
bash scripts/build.sh build
snnsim=build/apps/snnsim/snnsim
if (($# > 0)); then
  exec "$snnsim" "$@"
fi
config=examples/mnist/mnist.toml
mkdir -p out/mnist
"$snnsim" --config "$config" train
"$snnsim" --config "$config" run
echo "results: $root/out/mnist/checkpoint.h5 (trained network, HDF5), $root/out/mnist/summary.json (held-out accuracy, accuracy by step, firing rates)"
