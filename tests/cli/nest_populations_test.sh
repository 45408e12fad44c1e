#!/usr/bin/env bash
# NEST as the oracle of population networks: the scaled Brunel network
# (examples/brunel/brunel_small.toml, 500 ms; iaf_psc_delta, fixed
# in-degree, Poisson drive) in three regimes of Brunel's phase diagram, and
# the CUBA benchmark (examples/cuba/cuba.toml, 500 ms; iaf_psc_exp,
# pairwise Bernoulli, random initial potentials), each built from the same
# model file in NEST 3.10 and simulated with 10 seeds; the mean of snnsim's
# rate, ISI CV and synchrony of each population (snnsim analyze) over 10
# seeds of its own must lie within NEST's mean +- 3 sd. (Ten, not five:
# five seeds' sd can come out at half the true spread, and at g = 3 the
# synchrony of five of snnsim's seeds sat 2.5 of such sd above five of
# NEST's, while over 15 seeds each they agree within a quarter sd.)
#
# With `full`, the full-scale network instead (examples/brunel/brunel.toml:
# 12,500 neurons, 15.6 million synapses; the same three regimes, 500 ms, 10
# seeds each side; CUBA, already full scale, is left to the default run):
# about 20 minutes on 2 cores, so CTest runs it only where configured with
# SNN_FULL_SCALE_TESTS=ON.
#   nest_populations_test.sh SNNSIM FIXTURE_DIR PEERS_PYTHON [full]
set -uo pipefail
snnsim="$1"
python="$3"
scale="${4:-small}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
brunel="$here/../../examples/brunel/brunel_small.toml"
cases=("AI 5 2" "g3_eta2 3 2" "g6_eta0.9 6 0.9" "cuba")
if [[ $scale == full ]]; then
  brunel="$here/../../examples/brunel/brunel.toml"
  cases=("AI 5 2" "g3_eta2 3 2" "g6_eta0.9 6 0.9")
elif [[ $scale != small ]]; then
  echo "nest_populations_test.sh: the 4th argument is 'full' or nothing, got '$scale'" >&2
  exit 2
fi

sed -e 's/^duration = "1000 ms"/duration = "500 ms"/' "$here/../../examples/cuba/cuba.toml" >"$tmp/cuba.toml"
# regime, g and eta (replaced by --set on both sides: the model file's
# [parameters] evaluated by snnsim and, independently, by the Python builder).
for regime in "${cases[@]}"; do
  set -- $regime
  sets=()
  if [[ $1 != cuba ]]; then
    sed -e 's/^duration = "1000 ms"/duration = "500 ms"/' "$brunel" >"$tmp/$1.toml"
    sets=(--set "g=$2" --set "eta=$3")
  fi
  "$python" "$here/../python/nest_populations.py" "$tmp/$1.toml" "${sets[@]}" --seeds 10 --out "$tmp/$1.nest.json" \
    >"$tmp/nest.log" 2>&1 || { fail "$1: NEST failed: $(tail -5 "$tmp/nest.log")"; continue; }
  seed_analyses "$tmp/$1" "$tmp/$1.toml" 10 "${sets[@]}" || continue
  echo "== $1 ${2:+(g = $2, eta = $3)}"
  "$python" "$here/../python/nest_populations.py" "$tmp/$1.toml" "${sets[@]}" --nest "$tmp/$1.nest.json" --snnsim "${analyses[@]}" &&
    ok || fail "$1: snnsim's statistics fall outside NEST's spread"
done
finish
