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
# Trials, not samples; populations, not layers; no Fano factor from one trial.
grep -q "^recording $tmp/small.h5: 1 trial, T = 2000" "$tmp/an.txt" && grep -q "^population E (2000 neurons recorded): " "$tmp/an.txt" &&
  grep -q "; Fano n/a (one trial); " "$tmp/an.txt" && ! grep -q "layer" "$tmp/an.txt" && ok ||
  fail "analyze words a population recording as a network's: $(head -3 "$tmp/an.txt")"
# inspect: no accuracy or classes for trials that classify nothing; the
# provenance says which build ran it, where and when.
"$snnsim" inspect "$tmp/small.h5" >"$tmp/inspect.txt" 2>&1 || fail "inspect failed: $(cat "$tmp/inspect.txt")"
grep -q "^status: complete, 1 trial$" "$tmp/inspect.txt" && grep -q "^time: T = 2000 steps of 0.1 ms per trial$" "$tmp/inspect.txt" &&
  grep -q "^spikes: E: 2000 of 2000 neurons, [0-9]* spikes; I: 500 of 500 neurons" "$tmp/inspect.txt" &&
  grep -qF "model: $small, seed 1, input seed 1, connectivity shared" "$tmp/inspect.txt" &&
  grep -Eq "^provenance: snnsim .*, commit .*, host .*, started 20[0-9-]+T" "$tmp/inspect.txt" && ok ||
  fail "inspect of a population recording: $(cat "$tmp/inspect.txt")"
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

# One network per trial: trial b runs on the network of seed + b with trial
# b's own input streams, so a shared-network run with --seed 1 + b holds
# the same trial b; trial 0 is the shared run's.
"$snnsim" simulate "$small" --duration 100 --record "$tmp/own.h5" --trials 3 --connectivity per_trial \
  --summary "$tmp/own.json" >"$tmp/own.out" 2>&1 || fail "per_trial failed: $(cat "$tmp/own.out")"
grep -q "in trial 0's network of 3, one per trial" "$tmp/own.out" && ok || fail "per_trial not reported: $(cat "$tmp/own.out")"
"$snnsim" simulate "$small" --duration 100 --record "$tmp/seed3.h5" --trials 3 --seed 3 >/dev/null || fail "seed 3 failed"
"$python" - "$tmp" <<'PY' && ok || fail "per-trial connectivity misbehaves"
import h5py, json, numpy as np, sys
d = sys.argv[1]
def trial(name, b):
    with h5py.File(f"{d}/{name}.h5", "r") as f:
        ptr = f["/samples/spike_ptr/E"][()]
        assert f["meta"].attrs["connectivity"] == (b"per_trial" if name == "own" else b"shared")
        return f["/spikes/E/node_ids"][ptr[b]:ptr[b + 1]], f["/spikes/E/timestamps"][ptr[b]:ptr[b + 1]] - f["/samples/t_start_ms"][b]
def same(x, y):
    return len(x[0]) == len(y[0]) and np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
assert same(trial("own", 0), trial("t", 0)), "trial 0 is not the shared network's"
assert same(trial("own", 2), trial("seed3", 2)), "trial 2 is not the network of seed 3"
assert not same(trial("own", 1), trial("t", 1)), "trial 1 ran on the shared network"
assert json.load(open(f"{d}/own.json"))["connectivity"] == "per_trial"
PY

# Crash safety: trials are committed as they finish (a group per thread).
# SIGTERM stops after the current group (exit 143, status aborted), SIGKILL
# leaves the file as it was at the last commit; --resume goes on from the
# next trial and gives the file of an uninterrupted run, dataset for
# dataset; `snnsim recover` keeps the committed trials instead.
pydir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../python" && pwd)"
long=("$small" --duration 500 --trials 10 --threads 1)
"$snnsim" simulate "${long[@]}" --record "$tmp/ref8.h5" --summary "$tmp/ref8.json" >"$tmp/ref8.out" 2>&1 ||
  fail "10 trials failed: $(cat "$tmp/ref8.out")"
for sig in TERM KILL; do
  rm -f "$tmp/k8.h5" "$tmp/k8.h5.partial"
  res=$("$python" "$pydir/signal_run.py" "$tmp/k8.h5.partial" 2 "$sig" 0 0 "$tmp/k8" -- \
    "$snnsim" simulate "${long[@]}" --record "$tmp/k8.h5") || { fail "SIG$sig: $res $(cat "$tmp/k8.err")"; continue; }
  read -r seen rc _ <<<"$res"
  if ((seen < 0)); then fail "SIG$sig: the run ended before the signal: $(cat "$tmp/k8.err")"; continue; fi
  if [[ $sig == TERM ]]; then
    [[ $rc -eq 143 && $(wc -l <"$tmp/k8.err") -eq 1 ]] &&
      grep -q "interrupted: stopped after [2-9] of 10 trials; the recording '$tmp/k8.h5.partial' holds them (status aborted): continue it with --resume" "$tmp/k8.err" &&
      ok || fail "SIGTERM: exit $rc, $(cat "$tmp/k8.err")"
  else
    [[ $rc -eq -9 ]] && ok || fail "SIGKILL: exit $rc"
  fi
  [[ -f "$tmp/k8.h5.partial" && ! -e "$tmp/k8.h5" ]] && ok || fail "SIG$sig: no unfinished file"
  k=$("$python" "$pydir/compare_recordings.py" prefix "$tmp/ref8.h5" "$tmp/k8.h5.partial" 2>"$tmp/cmp.err") && ((k >= 2)) && ok ||
    fail "SIG$sig: the unfinished file is not the run's first trials: $(cat "$tmp/cmp.err")"
  attrs() {  # the unfinished file's status and /meta attributes
    "$python" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r', swmr=True); print(f['meta/status'][()], sorted((k, str(v)) for k, v in f['meta'].attrs.items()))" "$1"
  }
  before=$(attrs "$tmp/k8.h5.partial")
  # inspect says how to continue it: simulate (not run) with its model.
  "$snnsim" inspect "$tmp/k8.h5.partial" 2>&1 | grep -qF "$k trials committed; continue it with: snnsim simulate $small --record $tmp/k8.h5 --resume (with the flags it was started with), or keep what it holds with: snnsim recover $tmp/k8.h5" &&
    ok || fail "SIG$sig: inspect of the unfinished file: $("$snnsim" inspect "$tmp/k8.h5.partial" 2>&1)"
  expect_error "SIG$sig: a new run over the unfinished file" "'$tmp/k8.h5.partial' holds an unfinished run: continue it with --resume" \
    simulate "${long[@]}" --record "$tmp/k8.h5"
  expect_error "SIG$sig: resume with fewer trials" "the recording '$tmp/k8.h5.partial' already holds $k trials, more than the run's 1" \
    simulate "$small" --duration 500 --trials 1 --threads 1 --record "$tmp/k8.h5" --resume
  expect_error "SIG$sig: resume of another model" "k8.h5.partial' was made with another config (/meta attribute 'config')" simulate "${long[@]}" --set g=4 --record "$tmp/k8.h5" --resume
  "$python" "$pydir/compare_recordings.py" prefix "$tmp/ref8.h5" "$tmp/k8.h5.partial" >/dev/null 2>&1 &&
    [[ $(attrs "$tmp/k8.h5.partial") == "$before" ]] && ok || fail "SIG$sig: a refused resume changed the file"
  if [[ $sig == KILL ]]; then
    # A resume that finds every trial committed (here: of a k-trial run)
    # simulates nothing, finishes the file and still describes the network.
    cp "$tmp/k8.h5.partial" "$tmp/nl.h5.partial"
    "$snnsim" simulate "$small" --duration 500 --trials "$k" --threads 1 --record "$tmp/nl.h5" --resume \
      --summary "$tmp/nl.json" >"$tmp/nl.out" 2>&1 &&
      grep -q "nothing left to simulate: the recording held all $k trials" "$tmp/nl.out" && [[ -f "$tmp/nl.h5" ]] &&
      "$python" - "$tmp/ref8.json" "$tmp/nl.json" <<'PY' && ok || fail "resume with nothing left: $(cat "$tmp/nl.out")"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert (b["neurons"], b["synapses"]) == (a["neurons"], a["synapses"]) and b["neurons"] > 0, (a, b)
assert b["resumed_trials"] == b["trials"], b
PY
  fi
  "$snnsim" simulate "${long[@]}" --record "$tmp/k8.h5" --resume --summary "$tmp/k8.json" >"$tmp/k8.out" 2>&1 &&
    grep -q "^resumed: trials 0-$((k - 1)) were in the recording already" "$tmp/k8.out" &&
    grep -q "^simulated 500 ms x $((10 - k)) trials" "$tmp/k8.out" && ok || fail "SIG$sig: --resume: $(cat "$tmp/k8.out")"
  "$python" "$pydir/compare_recordings.py" equal "$tmp/ref8.h5" "$tmp/k8.h5" 2>"$tmp/cmp.err" && ok ||
    fail "SIG$sig: the resumed file differs from an uninterrupted run: $(cat "$tmp/cmp.err")"
  # The rates (every trial) and the statistics match the uninterrupted run's.
  "$python" - "$tmp/ref8.json" "$tmp/k8.json" "$tmp/ref8.out" "$tmp/k8.out" <<'PY' && ok || fail "SIG$sig: the resumed run's summary differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["trials"] == 10 and b["resumed_trials"] > 0 and a["resumed_trials"] == 0, (a["trials"], b)
for x, y in zip(a["populations"], b["populations"]):
    for k in ("spikes", "rate_hz", "isi_cv", "fano", "synchrony"):
        assert x[k] == y[k], (k, x, y)
rates = [[l for l in open(p) if l.startswith("population ")] for p in sys.argv[3:5]]
assert rates[0] == rates[1], rates
PY
  # /meta: the first invocation's start, the resuming one's beside it, and
  # the wall time under snnsim run's name.
  "$python" - "$tmp/ref8.h5" "$tmp/k8.h5" <<'PY' && ok || fail "SIG$sig: the resumed file's /meta"
import h5py, sys
a, b = (h5py.File(p, "r")["meta"].attrs for p in sys.argv[1:3])
assert float(a["wall_time_s"]) > 0 and "resume_start_time" not in a, dict(a)
for k in ("resume_start_time", "resume_threads", "resume_host"):
    assert k in b, (k, sorted(b))
assert int(b["resumed_at_sample"]) >= 2 and float(b["wall_time_s"]) > 0, dict(b)
PY
done
# Killed before its first trial was committed: recover keeps 0 trials and
# says how simulate (not run) continues it; analyze words it as no trials.
rm -f "$tmp/z.h5" "$tmp/z.h5.partial"
res=$("$python" "$pydir/signal_run.py" "$tmp/z.h5.partial" 0 KILL 0 0 "$tmp/z" -- \
  "$snnsim" simulate "$small" --duration 3000 --trials 1 --threads 1 --record "$tmp/z.h5") || fail "SIGKILL at 0: $res"
"$snnsim" recover "$tmp/z.h5" >"$tmp/z.out" 2>&1 &&
  grep -qF "recovered '$tmp/z.h5': 0 committed trials (the file's status was 'running'); continue the run with: snnsim simulate $small --record $tmp/z.h5 --resume (with the flags it was started with)" "$tmp/z.out" &&
  ok || fail "recover of a population run killed before its first trial: $(cat "$tmp/z.out")"
"$snnsim" analyze "$tmp/z.h5" >"$tmp/z.an" 2>&1 && grep -q "^recording $tmp/z.h5: 0 trials, " "$tmp/z.an" &&
  grep -q "; Fano n/a (no trials); " "$tmp/z.an" && grep -q "^  PSTH n/a (no trials)$" "$tmp/z.an" && ok ||
  fail "analyze of a recording of no trials: $(head -4 "$tmp/z.an")"
expect_error "--resume without --record" "--resume continues a recording: name it with --record" simulate "$small" --resume
expect_error "--duration nan" "--duration: expected a number > 0, got 'nan'" simulate "$small" --duration nan
# 10^9 neurons of 20 inputs each: refused before anything is drawn.
sed -e 's/^N_E = .*/N_E = 1000000000/' "$small" >"$tmp/huge.toml"
expect_error "too large for the memory" "synapses need about .* GiB of memory, more than 80% of this machine" \
  simulate "$tmp/huge.toml"
expect_error "model is a folder" "model '$tmp': is a directory, not a file" simulate "$tmp"
mkfifo "$tmp/summary.fifo"
expect_error "--summary a FIFO" "'$tmp/summary.fifo' is a FIFO, not a regular file" simulate "$small" --summary "$tmp/summary.fifo"
expect_error "--resume with --overwrite" "--resume continues the recording; --overwrite would replace it" \
  simulate "$small" --resume --overwrite --record "$tmp/k8.h5"
expect_error "--resume of a complete file" "recording '$tmp/k8.h5' is finished (status complete): nothing to resume" \
  simulate "${long[@]}" --record "$tmp/k8.h5" --resume
# One group (one trial): a signal stops it within 128 steps, nothing committed.
rm -f "$tmp/one.h5" "$tmp/one.h5.partial"
res=$("$python" "$pydir/signal_run.py" "$tmp/one.h5.partial" 0 TERM 0 0 "$tmp/one" -- \
  "$snnsim" simulate "$small" --duration 2000 --record "$tmp/one.h5") || fail "one group: $res"
read -r seen rc _ <<<"$res"
[[ $seen -eq 0 && $rc -eq 143 && -f "$tmp/one.h5.partial" ]] &&
  grep -q "interrupted: stopped after 0 of 1 trials; the recording '$tmp/one.h5.partial' holds them (status aborted)" "$tmp/one.err" &&
  ok || fail "one group: SIGTERM did not stop it (seen $seen, exit $rc): $(cat "$tmp/one.err")"
"$snnsim" simulate "$small" --duration 2000 --record "$tmp/one.h5" --resume >"$tmp/one.out" 2>&1 &&
  [[ -f "$tmp/one.h5" && ! -e "$tmp/one.h5.partial" ]] && ok || fail "one group: --resume: $(cat "$tmp/one.out")"

# Bad models: one line naming the entry and the problem, exit 2, no recording.
bad() {  # bad NAME EXPECTED SED_EXPRESSION: the small model edited by sed
  sed -e "$3" "$small" >"$tmp/bad.toml"
  expect_error "$1" "$2" simulate "$tmp/bad.toml" --record "$tmp/bad.h5"
  [[ ! -e "$tmp/bad.h5" && ! -e "$tmp/bad.h5.partial" ]] && ok || fail "$1: a recording was written"
}
bad "unit mismatch" "population 'E'.*'tau_m': '20 mV' is a potential (mV), but 'tau_m' is a time (ms)" '0,/tau_m = "tau_m"/s//tau_m = "20 mV"/'
bad "unknown unit" "'V_th': '20 mv' has an unknown unit 'mv'" '0,/V_th = "theta"/s//V_th = "20 mv"/'
bad "weight unit" "projection 0 (E -> E): 'weight': '0.1 pA' is a current (pA), but 'weight' is a potential (mV)" '0,/weight = "J"/s//weight = "0.1 pA"/'
bad "undefined name" "projection 2 (I -> E): 'weight': '-gg \* J': 'gg' is neither a parameter nor a unit" '0,/weight = "-g \* J"/s//weight = "-gg * J"/'
bad "parameter's dimension" "projection 2 (I -> E): 'weight': '-g \* J' is a quantity in mV^2, but 'weight' is a potential (mV)" 's/^g = 5 /g = "5 mV" /'
bad "parameter's syntax" "parameters, 'C_E': 'epsilon \* \* N_E': unexpected '\*' at character 11" 's/^C_E = "epsilon \* N_E"/C_E = "epsilon * * N_E"/'
bad "unknown model" "unknown NEST model 'iaf_cond_exp'" '0,/iaf_psc_delta/s//iaf_cond_exp/'
bad "unknown rule" "unknown connection rule 'fixed_in_degree'" '0,/"fixed_indegree"/s//"fixed_in_degree"/'
bad "unknown key" "unknown key 'indegre'" '0,/indegree = "C_E"/s//indegre = "C_E"/'
bad "delay off the grid" "a delay of 1.55 ms is not a whole number of steps of dt = 0.1 ms" 's/^delay = "1.5 ms"/delay = "1.55 ms"/'
bad "delay below dt" "a delay of 0.05 ms is below one step of dt = 0.1 ms" 's/^delay = "1.5 ms"/delay = "0.05 ms"/'
bad "probability" "projection 0 (E -> E): 'p' must be a probability in \[0, 1\], got 1.5" '0,/rule = "fixed_indegree"/s//rule = "pairwise_bernoulli"/; 0,/indegree = "C_E"/s//p = 1.5/'
bad "in-degree above sources" "projection 0 (E -> E): fixed_indegree: indegree 2500 is more than the 2000 sources a target can have without multapses" 's/indegree = "C_E"$/indegree = 2500\nmultapses = false/'
bad "negative rate" "Poisson drive 'noise_E': 'rate' must be >= 0 Hz" 's/^eta = 2 /eta = -2 /'
bad "undefined population" "projection 0 (E -> X): population 'X' is not defined (the model defines E, I)" '0,/target = "E"/s//target = "X"/'
bad "dt off the 0.1 ms grid" "'dt' must be a multiple of 0.1 ms" 's/^dt = "0.1 ms"/dt = "0.15 ms"/'
bad "duration off the grid" "'duration' must be a positive whole number of steps" 's/^duration = "1000 ms"/duration = "10.05 ms"/'
bad "TOML syntax" "(TOML), line" 's/^size = "N_E"/size = = 2000/'
expect_error "missing model" "model '$tmp/nope.toml': cannot open it" simulate "$tmp/nope.toml"
expect_error "duration flag off the grid" "--duration: 1.05 ms is not a whole number of steps" simulate "$small" --duration 1.05
expect_error "duration beyond counting" "--duration: 1e+15 ms is 1e+16 steps of dt = 0.1 ms, more than a run can count" \
  simulate "$small" --duration 1e15
expect_error "existing recording" "small.h5" simulate "$small" --duration 10 --record "$tmp/small.h5"
expect_error "zero trials" "--trials" simulate "$small" --trials 0
expect_error "unknown connectivity" "--connectivity" simulate "$small" --connectivity own
bad "connectivity in the file" "'connectivity' must be \"shared\"" 's/^seed = 1 /connectivity = "each"\nseed = 1 /'
expect_error "--set of no parameter" "parameters has no 'gamma' to set (it defines C_E, C_I, J, N_E, N_I, delay, epsilon, eta, g, nu_th, tau_m, theta)" \
  simulate "$small" --set gamma=3
expect_error "--set without a value" "--set: expected NAME=VALUE" simulate "$small" --set g
expect_error "--set of the wrong kind" "'-g \* J' is a quantity in mV^2" simulate "$small" --set "g=5 mV"

# --set replaces a parameter (every use of it); --summary has each
# population's rate, and for recorded ones ISI CV, Fano factor and synchrony
# (analyze's numbers).
"$snnsim" simulate "$small" --duration 100 --set g=3 --set "J=0.1 mV" --record "$tmp/g3.h5" --trials 2 \
  --summary "$tmp/g3.json" >"$tmp/g3.out" 2>&1 || fail "--set g=3 failed: $(cat "$tmp/g3.out")"
"$snnsim" analyze "$tmp/g3.h5" --json "$tmp/g3.an.json" >/dev/null || fail "analyze g3 failed"
"$python" - "$tmp/g3.json" "$tmp/g3.an.json" "$tmp/an.json" <<'PY' && ok || fail "--set or --summary is wrong: $(cat "$tmp/g3.json")"
import json, sys
s, an, base = (json.load(open(p)) for p in sys.argv[1:4])
assert s["parameters"]["g"] == "3" and s["parameters"]["eta"] == 2, s["parameters"]
assert s["trials"] == 2 and s["duration_ms"] == 100 and s["neurons"] == 2500 and s["synapses"] == 625000, s
pops = {p["name"]: p for p in s["populations"]}
stats = {p["name"]: p for p in an["populations"]}
for name in ("E", "I"):
    p, a = pops[name], stats[name]
    assert abs(p["rate_hz"] - a["rate_hz"]) < 1e-9 * a["rate_hz"], (p, a)
    for k, ka in (("isi_cv", "isi_cv"), ("fano", "fano"), ("synchrony", "synchrony_chi")):
        assert p[k] == a[ka], (name, k, p[k], a[ka])
# Weaker inhibition (g = 3 against the file's 5) fires faster.
rate5 = {p["name"]: p["rate_hz"] for p in base["populations"]}
assert pops["E"]["rate_hz"] > 1.5 * rate5["E"], (pops["E"]["rate_hz"], rate5["E"])
PY

# --synchrony-bin: --summary's synchrony over bins of several steps, as
# analyze --synchrony-bin computes it from the recording; a bad bin is
# refused before anything is simulated.
"$snnsim" simulate "$small" --duration 100 --set g=3 --record "$tmp/g3b.h5" --trials 2 --synchrony-bin 2 \
  --summary "$tmp/g3b.json" >"$tmp/g3b.out" 2>&1 || fail "--synchrony-bin 2 failed: $(cat "$tmp/g3b.out")"
"$snnsim" analyze "$tmp/g3b.h5" --synchrony-bin 2 --json "$tmp/g3b.an.json" >"$tmp/g3b.an.out" || fail "analyze --synchrony-bin failed"
grep -q "synchrony chi .* (bins of 2 ms)" "$tmp/g3b.an.out" && ok || fail "analyze does not say the bin: $(cat "$tmp/g3b.an.out")"
"$python" - "$tmp/g3b.json" "$tmp/g3b.an.json" "$tmp/g3.json" <<'PY' && ok || fail "--synchrony-bin's summary is wrong: $(cat "$tmp/g3b.json")"
import json, sys
s, an, step = (json.load(open(p)) for p in sys.argv[1:4])
assert s["synchrony_bin_ms"] == 2 and an["synchrony_bin_ms"] == 2 and step["synchrony_bin_ms"] == 0.1, s
wide = {p["name"]: p["synchrony"] for p in s["populations"]}
narrow = {p["name"]: p["synchrony"] for p in step["populations"]}
for p in an["populations"]:
    assert wide[p["name"]] == p["synchrony_chi"], (p["name"], wide, p["synchrony_chi"])
    assert wide[p["name"]] != narrow[p["name"]], (wide, narrow)  # the bins are not the steps
PY
[[ ! -e "$tmp/bad_bin.h5" ]] || fail "bad_bin.h5 exists before the test"
expect_error "a bin of no whole number of steps" "the synchrony bin of 0.15 ms is not a whole number of steps of dt = 0.1 ms (model '$small')" \
  simulate "$small" --duration 100 --record "$tmp/bad_bin.h5" --summary "$tmp/bad_bin.json" --synchrony-bin 0.15
expect_error "a bin longer than the run" "the synchrony bin of 200 ms is longer than a sample of model '$small' (1000 steps of 0.1 ms)" \
  simulate "$small" --duration 100 --record "$tmp/bad_bin.h5" --summary "$tmp/bad_bin.json" --synchrony-bin 200
expect_error "a bin without a summary" "--synchrony-bin sets the bins of --summary's synchrony, which needs --summary and --record" \
  simulate "$small" --duration 100 --record "$tmp/bad_bin.h5" --synchrony-bin 1
[[ ! -e "$tmp/bad_bin.h5" && ! -e "$tmp/bad_bin.json" ]] && ok || fail "a refused --synchrony-bin left files"
expect_error "analyze: a bad bin" "the synchrony bin of 0.05 ms is not a whole number of steps of dt = 0.1 ms (recording '$tmp/g3b.h5')" \
  analyze "$tmp/g3b.h5" --synchrony-bin 0.05

# A sweep over the model's parameters: each point is `simulate --set`, its
# statistics land in the manifest (JSON and CSV), analyze tables and plots
# them, and a rerun keeps what is done.
cat >"$tmp/sweep.toml" <<EOF
[sweep]
out = "$tmp/sweep/out"
[base]
model = "$small"
duration = 50
synchrony_bin = 1  # ms
[grid]
g = [4, 6]
input_seed = [1, 2]
EOF
"$snnsim" sweep "$tmp/sweep.toml" >"$tmp/sweep.out" 2>&1 && ok || fail "model sweep failed: $(cat "$tmp/sweep.out")"
grep -q "4 points in all" "$tmp/sweep.out" && grep -q "point 3 (g=6, input-seed=2): E .* Hz, CV .*, synchrony" "$tmp/sweep.out" &&
  ok || fail "the sweep's progress lines: $(cat "$tmp/sweep.out")"
"$snnsim" simulate "$small" --duration 50 --set g=6 --input-seed 2 --record "$tmp/p3.h5" >/dev/null || fail "point 3 by hand"
"$python" - "$tmp/sweep/out" "$tmp/p3.h5" <<'PY' && ok || fail "the model sweep's manifest is wrong"
import csv, json, sys, h5py, numpy as np
d = sys.argv[1]
m = json.load(open(f"{d}/manifest.json"))
assert m["command"] == "simulate" and m["parameters"] == ["g", "input-seed"], m
rows = m["rows"]
assert [r["status"] for r in rows] == ["done"] * 4, rows
assert [r["params"] for r in rows][3] == {"g": "6", "input-seed": "2"}, rows[3]
for r in rows:
    assert set(r["metrics"]) == {f"{p}.{k}" for p in "EI" for k in ("rate_hz", "isi_cv", "fano", "synchrony")}, r
    assert r["metrics"]["E.rate_hz"] > 0 and r["metrics"]["E.fano"] is None, r["metrics"]  # one trial: no Fano
# Stronger inhibition, lower rates.
assert rows[2]["metrics"]["E.rate_hz"] < rows[0]["metrics"]["E.rate_hz"], rows
# Point 3 is simulate --set g=6 --input-seed 2, spike for spike.
with h5py.File(f"{d}/point-0003.h5", "r") as a, h5py.File(sys.argv[2], "r") as b:
    for k in ("node_ids", "timestamps"):
        assert np.array_equal(a[f"spikes/E/{k}"][()], b[f"spikes/E/{k}"][()]), k
table = list(csv.DictReader(open(f"{d}/manifest.csv")))
assert len(table) == 4 and "accuracy" not in table[0], table[0].keys()
assert abs(float(table[1]["I.synchrony"]) / rows[1]["metrics"]["I.synchrony"] - 1) < 1e-5 and table[1]["E.fano"] == "", table[1]
PY
# The points' synchrony is over [base]'s 1 ms bins.
"$snnsim" analyze "$tmp/sweep/out/point-0003.h5" --synchrony-bin 1 --json "$tmp/p3.an.json" >/dev/null || fail "analyze point 3"
"$python" - "$tmp/sweep/out/manifest.json" "$tmp/p3.an.json" <<'PY' && ok || fail "the sweep did not pass synchrony_bin on"
import json, sys
m, an = (json.load(open(p)) for p in sys.argv[1:3])
for p in an["populations"]:
    assert m["rows"][3]["metrics"][p["name"] + ".synchrony"] == p["synchrony_chi"], (m["rows"][3], p)
PY
expect_error "analyze --synchrony-bin of a manifest" "--synchrony-bin is for recordings: a sweep's points measure synchrony as they run" \
  analyze "$tmp/sweep/out/manifest.json" --synchrony-bin 1
"$snnsim" analyze "$tmp/sweep/out/manifest.json" --by input-seed >"$tmp/an.out" 2>&1 &&
  grep -q "^E.rate_hz against g (4 completed points, one column per input-seed)" "$tmp/an.out" && ok ||
  fail "analyze of a model sweep: $(cat "$tmp/an.out")"
"$snnsim" analyze "$tmp/sweep/out/manifest.json" --y I.synchrony --plot "$tmp/sync.png" >"$tmp/an.out" 2>&1 &&
  [[ -s "$tmp/sync.png" ]] && grep -q "^I.synchrony against g" "$tmp/an.out" && ok ||
  fail "analyze --y I.synchrony --plot: $(cat "$tmp/an.out")"
expect_error "analyze --y of no metric" "--y: expected one of E.rate_hz, E.isi_cv, E.fano, E.synchrony, I.rate_hz, I.isi_cv, I.fano, I.synchrony or wall_s, got 'accuracy_'" \
  analyze "$tmp/sweep/out/manifest.json" --y accuracy_
"$snnsim" sweep "$tmp/sweep.toml" >"$tmp/sweep.out" 2>&1 && grep -q "4 done before, 0 to run" "$tmp/sweep.out" && ok ||
  fail "a rerun did not keep the done points: $(cat "$tmp/sweep.out")"
bad_sweep() {  # bad_sweep NAME EXPECTED SED_EXPRESSION: the sweep file edited
  sed -e "$3" -e "s|^out = .*|out = \"$tmp/sweep/bad\"|" "$tmp/sweep.toml" >"$tmp/bad_sweep.toml"
  rm -rf "$tmp/sweep/bad"
  expect_error "$1" "$2" sweep "$tmp/bad_sweep.toml"
  [[ ! -e "$tmp/sweep/bad/point-0000.h5" ]] && ok || fail "$1: a point ran"
}
bad_sweep "sweep of no parameter" "'gamma' cannot be swept: it is neither in .*'s \[parameters\] nor a simulate setting (these can: C_E, C_I, J" 's/^g = /gamma = /'
bad_sweep "a value of the wrong kind" "\[grid\] g = 5 mV: .*projection 2 (I -> E): 'weight': '-g \* J' is a quantity in mV^2" 's/^g = .*/g = [4, "5 mV"]/'
bad_sweep "a run option in a model sweep" "\[base\] has no simulate option 'T' (it takes: model, duration, trials" 's/^duration = 50/T = 8/'
bad_sweep "a missing model" "\[base\] model: model '$tmp/none.toml': cannot open it" "s|^model = .*|model = \"$tmp/none.toml\"|"
bad_sweep "trials out of range" "\[grid\] trials: 0 is out of range" 's/^input_seed = .*/trials = [1, 0]/'

finish
