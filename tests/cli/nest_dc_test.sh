#!/usr/bin/env bash
# NEST's dc_generator against snnsim's DC currents, exactly: a deterministic
# population model (tests/data/dc_currents.toml: DC windows with start,
# stop and delay, a generator from time 0, per-neuron I_e, constant
# all-to-all projections with delays onto iaf_psc_delta and iaf_psc_exp)
# built in NEST 3.10 by tests/python/nest_populations.py and run by
# `snnsim simulate`: the same spikes step for step, potentials within
# float32 rounding (the recording's); and DC entries with bad times fail.
#   nest_dc_test.sh SNNSIM FIXTURE_DIR PYTHON (the peers' Python, with NEST)
set -uo pipefail
snnsim="$1"
python="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model="$here/../data/dc_currents.toml"

"$snnsim" simulate "$model" --record "$tmp/dc.h5" >"$tmp/out" 2>&1 || fail "simulate failed: $(cat "$tmp/out")"
"$python" "$here/../python/nest_populations.py" "$model" --exact "$tmp/dc.h5" >"$tmp/nest.out" 2>"$tmp/nest.err" && ok ||
  fail "NEST and snnsim differ: $(cat "$tmp/nest.out") $(tail -3 "$tmp/nest.err")"
grep -E "spikes|potentials" "$tmp/nest.out"
# It tests something: both populations spike in and out of the DC windows.
grep -Eq "^E: ([1-9][0-9]+) spikes in NEST" "$tmp/nest.out" && grep -Eq "^X: ([1-9][0-9]+) spikes in NEST" "$tmp/nest.out" &&
  ok || fail "too few spikes to compare: $(cat "$tmp/nest.out")"

bad() {  # bad NAME EXPECTED SED_EXPRESSION
  sed -e "$3" "$model" >"$tmp/bad.toml"
  expect_error "$1" "$2" simulate "$tmp/bad.toml"
}
bad "start off the grid" "DC current 'step': start 10.05 ms is not a whole number of steps of dt = 0.1 ms" 's/^start = "10 ms"/start = "10.05 ms"/'
bad "stop before start" "DC current 'step': stop 5 ms is not after start 10 ms" 's/^stop = "60 ms"/stop = "5 ms"/'
bad "delay below dt" "DC current 'late': a delay of 0.05 ms is below one step" 's/^delay = "2 ms"/delay = "0.05 ms"/'
bad "amplitude's unit" "DC current 'step': 'amplitude': '0.3 nF' is a capacitance (pF), but 'amplitude' is a current (pA)" 's/^amplitude = "0.3 nA"/amplitude = "0.3 nF"/'
bad "unknown target" "DC current 'step': population 'Q' is not defined" '/^name = "step"/{n;s/^target = "E"/target = "Q"/}'
bad "unknown key" "dc 0: unknown key 'begin'" 's/^start = "10 ms"/begin = "10 ms"/'
finish
