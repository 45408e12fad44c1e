#!/usr/bin/env bash
# Sets up, builds (once) and runs snnsim with the given arguments. Without
# arguments it runs the shipped example: one LIF layer driven by
# examples/neuron/input_currents.csv.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
bash scripts/build.sh build
if (($# == 0)); then
  set -- neuron --model lif --tau 2 --input examples/neuron/input_currents.csv
fi
exec build/apps/snnsim/snnsim "$@"
