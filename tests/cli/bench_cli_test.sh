#!/usr/bin/env bash
# `snnsim bench`: its figures are consistent with the network it simulates
# (neuron-steps, dense synaptic operations, events = input spikes x fan-out),
# every synapse kernel simulates the same spikes, a trained checkpoint can be
# benchmarked, bad flags get one-line errors, and bench/peer_bench.py runs
# against SpikingJelly and snnTorch from the virtual environment.
#   bench_cli_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

small=(--data-dir "$fixture" --layers 784-64-10 --batch 8 --T 10 --reps 1 --threads 1)

for path in auto dense event; do
  if "$snnsim" bench "${small[@]}" --steps-per-tick 1,5,0 --path "$path" --json >"$tmp/$path.json" 2>"$tmp/err"; then
    ok
  else
    fail "bench --path $path: $(cat "$tmp/err")"
  fi
done

"$python" - "$tmp" <<'PY' && ok || fail "bench JSON figures are inconsistent"
import json, sys
tmp = sys.argv[1]
runs = {p: json.load(open(f"{tmp}/{p}.json")) for p in ("auto", "dense", "event")}
r = runs["auto"]
B, T = r["batch"], r["T"]
assert (B, T, r["threads"]) == (8, 10, 1), r
assert r["neuron_steps_per_batch"] == B * T * (64 + 10)
assert r["dense_synaptic_ops_per_batch"] == B * T * (784 * 64 + 64 * 10)
acts = r["layers_activity"]
# Events: each layer's input spikes times its fan-out.
events = sum(a["input_rate"] * B * T * a["in"] * a["out"] for a in acts)
assert abs(events - r["synaptic_events_per_batch"]) < 1e-6 * max(1.0, events), (events, r["synaptic_events_per_batch"])
assert acts[1]["input_rate"] == acts[0]["output_rate"]
names = [x["name"] for x in r["runs"]]
assert names == ["pipeline K=1", "pipeline K=5", "pipeline K=10", "naive per-step loop"], names
for x in r["runs"]:
    assert x["seconds_per_batch"] > 0 and abs(x["samples_per_s"] * x["seconds_per_batch"] - B) < 1e-6 * B
    assert x["speedup_vs_naive"] > 0
assert 0 <= r["non_synapse_fraction"] <= 1
assert 0 < acts[0]["input_rate"] < 1
# The kernels differ in speed only: the same spikes, so the same rates.
for p in ("dense", "event"):
    assert [a["path"] for a in runs[p]["layers_activity"]] == [p, p], runs[p]["layers_activity"]
    for a, b in zip(runs[p]["layers_activity"], acts):
        assert (a["input_rate"], a["output_rate"]) == (b["input_rate"], b["output_rate"]), (p, a, b)
PY

# Text output: the table with the naive loop and the time split.
"$snnsim" bench "${small[@]}" >"$tmp/text.out" 2>&1 || fail "text bench: $(cat "$tmp/text.out")"
grep -q "naive per-step loop" "$tmp/text.out" && grep -q "everything but the synapses" "$tmp/text.out" &&
  grep -q "BLAS_INFO" "$tmp/text.out" && ok || fail "text output lacks the table: $(cat "$tmp/text.out")"

# A trained checkpoint, and the weights saved for the peers.
"$snnsim" train --data-dir "$fixture" --layers 784-32-10 --T 4 --epochs 1 --threads 1 --checkpoint "$tmp/ck.h5" \
  >"$tmp/train.out" 2>&1 || fail "train failed: $(cat "$tmp/train.out")"
if "$snnsim" bench --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --batch 4 --T 5 --reps 1 --no-naive --json \
  --save-weights "$tmp/w.h5" >"$tmp/ck.json" 2>"$tmp/err"; then
  "$python" - "$tmp" <<'PY' && ok || fail "checkpoint bench or saved weights wrong"
import json, sys, h5py, numpy as np
tmp = sys.argv[1]
r = json.load(open(f"{tmp}/ck.json"))
assert r["layers"] == [784, 32, 10] and r["weights"].endswith("ck.h5"), r
assert all(not x["name"].startswith("naive") for x in r["runs"])
with h5py.File(f"{tmp}/ck.h5") as a, h5py.File(f"{tmp}/w.h5") as b:
    for k in ("fc0.weight", "fc0.bias", "fc1.weight", "fc1.bias"):
        assert np.array_equal(a["parameters"][k][()], b["parameters"][k][()]), k
PY
else
  fail "bench --checkpoint: $(cat "$tmp/err")"
fi

expect_error "checkpoint with layers" "cannot be combined with --checkpoint" bench --checkpoint "$tmp/ck.h5" \
  --layers 784-10 --data-dir "$fixture"
expect_error "bad K" "--steps-per-tick" bench "${small[@]}" --steps-per-tick 1,x
expect_error "negative K" "--steps-per-tick" bench "${small[@]}" --steps-per-tick -3
expect_error "bad path" "--path" bench "${small[@]}" --path sparse
expect_error "batch too big" "test images" bench --data-dir "$fixture" --layers 784-16-10 --T 2 --batch 100000
expect_error "bad weight scale" "--weight-scale" bench "${small[@]}" --weight-scale -1
expect_error "plif" "naive reference" bench "${small[@]}" --model plif
expect_error "first layer" "input size" bench --data-dir "$fixture" --layers 700-10 --batch 2 --T 2
expect_error "missing data" "" bench --data-dir "$tmp/nothing" --batch 2 --T 2
expect_error "no gpu" "cuda:0" bench "${small[@]}" --devices cuda:0

# The peer comparison runs (tiny sizes: a smoke test, not a measurement).
if "$python" "$root/bench/peer_bench.py" "$snnsim" --batches 2 --T 3 --reps 1 >"$tmp/peer.out" 2>&1; then
  grep -q "SpikingJelly" "$tmp/peer.out" && grep -q "snnTorch" "$tmp/peer.out" && ok ||
    fail "peer_bench output lacks a peer: $(cat "$tmp/peer.out")"
else
  fail "peer_bench.py failed: $(tail -5 "$tmp/peer.out")"
fi

finish
