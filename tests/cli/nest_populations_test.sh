#!/usr/bin/env bash
# NEST as the oracle of population networks: the scaled Brunel network
# (examples/brunel/brunel_small.toml, 500 ms) in three regimes of Brunel's
# phase diagram, built from the same model file in NEST 3.10 and simulated
# with 5 seeds; snnsim's rate, ISI CV and synchrony of each population
# (snnsim analyze) must lie within NEST's mean +- 3 sd.
#   nest_populations_test.sh SNNSIM FIXTURE_DIR PEERS_PYTHON
set -uo pipefail
snnsim="$1"
python="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
small="$here/../../examples/brunel/brunel_small.toml"

# regime, g (inhibitory weight -g J), and the Poisson rate (eta x 10 kHz).
for regime in "AI -0.5 20" "g3_eta2 -0.3 20" "g6_eta0.9 -0.6 9"; do
  set -- $regime
  sed -e 's/^duration = "1000 ms"/duration = "500 ms"/' -e "s/weight = \"-0.5 mV\"/weight = \"$2 mV\"/" \
      -e "s/rate = \"20 kHz\"/rate = \"$3 kHz\"/" "$small" >"$tmp/$1.toml"
  "$python" "$here/../python/nest_populations.py" "$tmp/$1.toml" --seeds 5 --out "$tmp/$1.nest.json" \
    >"$tmp/nest.log" 2>&1 || { fail "$1: NEST failed: $(tail -5 "$tmp/nest.log")"; continue; }
  "$snnsim" simulate "$tmp/$1.toml" --record "$tmp/$1.h5" >/dev/null 2>"$tmp/err" || { fail "$1: $(cat "$tmp/err")"; continue; }
  "$snnsim" analyze "$tmp/$1.h5" --json "$tmp/$1.an.json" >/dev/null || { fail "$1: analyze failed"; continue; }
  echo "== $1 (inhibitory weight $2 mV, Poisson $3 kHz)"
  "$python" "$here/../python/nest_populations.py" "$tmp/$1.toml" --nest "$tmp/$1.nest.json" --snnsim "$tmp/$1.an.json" &&
    ok || fail "$1: snnsim's statistics fall outside NEST's spread"
done
finish
