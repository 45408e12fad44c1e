#!/usr/bin/env bash
# End-to-end tests of `snnsim simulate` (population model files): the
# shipped Brunel example runs, records a SONATA file that `snnsim analyze`
# reads, trials and seeds behave, and every bad model gets one line naming
# the entry and the problem, exit 2, nothing simulated or written.
#   simulate_cli_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
python="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
examples="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../examples/brunel" && pwd)"
small="$examples/brunel_small.toml"

# The shipped example, shortened: rates of both populations, a recording analyze reads.
"$snnsim" simulate "$small" --duration 200 --record "$tmp/small.h5" >"$tmp/out" 2>"$tmp/err" ||
  fail "brunel_small failed: $(cat "$tmp/err")"
grep -q "2500 neurons, 625000 synapses" "$tmp/out" && ok || fail "summary lacks the network's size: $(cat "$tmp/out")"
grep -Eq "^population E: 2000 neurons, [0-9.]+ Hz" "$tmp/out" && ok || fail "no rate of E: $(cat "$tmp/out")"
"$snnsim" analyze "$tmp/small.h5" --json "$tmp/an.json" >"$tmp/an.txt" || fail "analyze failed"
grep -q "T = 2000, dt = 0.1 ms" "$tmp/an.txt" && ok || fail "analyze: $(head -2 "$tmp/an.txt")"
! grep -q "^accuracy\|confusion" "$tmp/an.txt" && ok || fail "analyze reports accuracy for a population run"
"$python" - "$tmp/an.json" "$tmp/out" <<'PY' && ok || fail "analyze's rates differ from simulate's"
import json, re, sys
an = {p["name"]: p for p in json.load(open(sys.argv[1]))["populations"]}
printed = dict(re.findall(r"^population (\w+): \d+ neurons, ([0-9.]+) Hz", open(sys.argv[2]).read(), re.M))
assert set(an) == {"E", "I"} and set(printed) == {"E", "I"}, (an.keys(), printed)
for name, p in an.items():
    assert abs(p["rate_hz"] - float(printed[name])) < 0.01, (name, p["rate_hz"], printed[name])
    assert p["rate_hz"] > 20 and p["isi_cv"] > 0, p
PY
# The voltmeter: V_m of the first 3 E neurons at every step, in mV.
"$python" - "$tmp/small.h5" <<'PY' && ok || fail "the voltmeter's report is wrong"
import h5py, sys
with h5py.File(sys.argv[1], "r") as f:
    data = f["/report/E/data"][()]
    assert data.shape == (2000, 3), data.shape
    assert data.min() >= 0 - 1e-6 and data.max() < 20 + 1e-6, (data.min(), data.max())
PY

# Same seeds, same spikes; another input seed, other spikes; trials as samples.
"$snnsim" simulate "$small" --duration 100 --record "$tmp/a.h5" >/dev/null || fail "run a failed"
"$snnsim" simulate "$small" --duration 100 --record "$tmp/b.h5" --threads 1 >/dev/null || fail "run b failed"
"$snnsim" simulate "$small" --duration 100 --record "$tmp/c.h5" --input-seed 7 >/dev/null || fail "run c failed"
"$snnsim" simulate "$small" --duration 100 --record "$tmp/t.h5" --trials 3 >"$tmp/t.out" || fail "trials failed"
grep -q "x 3 trials" "$tmp/t.out" && ok || fail "trials not reported: $(cat "$tmp/t.out")"
"$python" - "$tmp" <<'PY' && ok || fail "seeds or trials misbehave"
import h5py, numpy as np, sys
d = sys.argv[1]
def spikes(name):
    with h5py.File(f"{d}/{name}.h5", "r") as f:
        return f["/spikes/E/node_ids"][()], f["/spikes/E/timestamps"][()]
a, b, c = spikes("a"), spikes("b"), spikes("c")
assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]), "threads changed the spikes"
assert not (len(a[0]) == len(c[0]) and np.array_equal(a[0], c[0])), "another input seed gave the same spikes"
with h5py.File(f"{d}/t.h5", "r") as f:
    assert f["/samples/label"].shape[0] == 3
    ptr = f["/samples/spike_ptr/E"][()]
    assert len(ptr) == 4 and all(ptr[k] < ptr[k + 1] for k in range(3)), ptr
    ids, ts = f["/spikes/E/node_ids"][()], f["/spikes/E/timestamps"][()]
    # Trial 0 of three is the single run's spikes.
    assert np.array_equal(ids[: ptr[1]], a[0]) and np.array_equal(ts[: ptr[1]], a[1]), "trial 0 differs from a single run"
PY

# Bad models: one line naming the entry and the problem, exit 2, no recording.
bad() {  # bad NAME EXPECTED SED_EXPRESSION: the small model edited by sed
  sed -e "$3" "$small" >"$tmp/bad.toml"
  expect_error "$1" "$2" simulate "$tmp/bad.toml" --record "$tmp/bad.h5"
  [[ ! -e "$tmp/bad.h5" && ! -e "$tmp/bad.h5.partial" ]] && ok || fail "$1: a recording was written"
}
bad "unit mismatch" "population 'E'.*'tau_m': '20 mV' is a potential (mV), but 'tau_m' is a time (ms)" '0,/tau_m = "20 ms"/s//tau_m = "20 mV"/'
bad "unknown unit" "'V_th': '20 mv' has an unknown unit 'mv'" '0,/V_th = "20 mV"/s//V_th = "20 mv"/'
bad "weight unit" "projection 0 (E -> E): 'weight': '0.1 pA' is a current (pA), but 'weight' is a potential (mV)" '0,/weight = "0.1 mV"/s//weight = "0.1 pA"/'
bad "unknown model" "unknown NEST model 'iaf_cond_exp'" '0,/iaf_psc_delta/s//iaf_cond_exp/'
bad "unknown rule" "unknown connection rule 'fixed_in_degree'" '0,/"fixed_indegree"/s//"fixed_in_degree"/'
bad "unknown key" "unknown key 'indegre'" '0,/indegree = 200/s//indegre = 200/'
bad "delay off the grid" "a delay of 1.55 ms is not a whole number of steps of dt = 0.1 ms" '0,/delay = "1.5 ms"/s//delay = "1.55 ms"/'
bad "delay below dt" "a delay of 0.05 ms is below one step of dt = 0.1 ms" '0,/delay = "1.5 ms"/s//delay = "0.05 ms"/'
bad "probability" "projection 0 (E -> E): 'p' must be a probability in \[0, 1\], got 1.5" '0,/rule = "fixed_indegree"/s//rule = "pairwise_bernoulli"/; 0,/indegree = 200/s//p = 1.5/'
bad "in-degree above sources" "projection 0 (E -> E): fixed_indegree: indegree 2500 is more than the 2000 sources a target can have without multapses" 's/indegree = 200$/indegree = 2500\nmultapses = false/'
bad "negative rate" "Poisson drive 'noise_E': 'rate' must be >= 0 Hz" '0,/rate = "20 kHz"/s//rate = "-20 kHz"/'
bad "undefined population" "projection 0 (E -> X): population 'X' is not defined (the model defines E, I)" '0,/target = "E"/s//target = "X"/'
bad "dt off the 0.1 ms grid" "'dt' must be a multiple of 0.1 ms" 's/^dt = "0.1 ms"/dt = "0.15 ms"/'
bad "duration off the grid" "'duration' must be a positive whole number of steps" 's/^duration = "1000 ms"/duration = "10.05 ms"/'
bad "TOML syntax" "(TOML), line" 's/^size = 2000/size = = 2000/'
expect_error "missing model" "model '$tmp/nope.toml': cannot open it" simulate "$tmp/nope.toml"
expect_error "duration flag off the grid" "--duration: 1.05 ms is not a whole number of steps" simulate "$small" --duration 1.05
expect_error "existing recording" "small.h5" simulate "$small" --duration 10 --record "$tmp/small.h5"
expect_error "zero trials" "--trials" simulate "$small" --trials 0

finish
