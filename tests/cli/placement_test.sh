#!/usr/bin/env bash
# Placement flags of `snnsim train` and `snnsim run` (--devices, --balance,
# --steps-per-tick, --batch-size, --threads) take effect and change no result.
# A comparison of runs alone would pass if the flags were ignored, so every
# run must also say (its "pipeline:" line, the summary's "execution") that it
# ran the stages, K, batch size and threads it was given. A 3-layer network,
# so that 3 stages are possible; 3 and 8 threads on any machine (results must
# be bit-identical however many cores there are).
#   placement_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# expect_line FILE WHAT LINE: FILE has LINE exactly.
expect_line() {
  grep -qxF -- "$3" "$1" && ok || fail "$2: no line '$3' in: $(cat "$1")"
}

# Training: the same parameters, bit for bit, for any partition, K and thread
# count; the training output names what ran.
common=(--data-dir "$fixture" --layers 784-64-32-10 --T 4 --v-threshold 0.5 --seed 5)
train() {
  local name="$1"
  shift
  "$snnsim" train "${common[@]}" --epochs 2 --checkpoint "$tmp/$name.h5" "$@" >"$tmp/$name.out" 2>&1 ||
    fail "train $name failed: $(cat "$tmp/$name.out")"
}
train t1 --batch-size 32 --threads 1
train t3 --batch-size 32 --devices cpu,cpu,cpu --steps-per-tick 1 --threads 3
train t8 --batch-size 32 --devices cpu,cpu --balance 1,2 --steps-per-tick 3 --threads 8
train b16 --threads 2 --batch-size 16
expect_line "$tmp/t1.out" "train, 1 stage" "pipeline: 1 stage (layers 3 on cpu), K = 4, batch size 32, 1 thread (1 per stage)"
expect_line "$tmp/t3.out" "train, 3 stages" \
  "pipeline: 3 stages (layers 1,1,1 on cpu,cpu,cpu), K = 1, batch size 32, 3 threads (1,1,1 per stage)"
expect_line "$tmp/t8.out" "train, 2 stages" \
  "pipeline: 2 stages (layers 1,2 on cpu,cpu), K = 3, batch size 32, 8 threads (4,4 per stage)"
expect_line "$tmp/b16.out" "train, batch 16" "pipeline: 1 stage (layers 3 on cpu), K = 4, batch size 16, 2 threads (2 per stage)"
grep -q "^training 784-64-32-10 on .*, 8 threads$" "$tmp/t8.out" && ok || fail "train banner: $(cat "$tmp/t8.out")"
"$python" - "$tmp" <<'PY' && ok || fail "training depends on the partition, K or threads (or ignores the batch size)"
import sys, h5py, numpy as np
d = sys.argv[1]
def params(name):
    with h5py.File(f"{d}/{name}.h5", "r") as f:
        return {k: f["parameters"][k][...] for k in f["parameters"]}
ref = params("t1")
assert sorted(ref) == ["fc0.bias", "fc0.weight", "fc1.bias", "fc1.weight", "fc2.bias", "fc2.weight"], sorted(ref)
for name in ("t3", "t8"):
    p = params(name)
    for k in ref:
        assert np.array_equal(ref[k], p[k]), (name, k)
# The batch size is a training hyperparameter: it took effect if the result differs.
assert not np.array_equal(ref["fc0.weight"], params("b16")["fc0.weight"])
PY

# Simulation: the same counts, rates and recorded spikes and potentials for
# any partition, K, batch size and thread count; the summary says what ran.
rec=(--record hidden1,hidden2,output --record-v hidden1:0-7,hidden2:3,output:0-9 --record-input)
run() {
  local name="$1"
  shift
  "$snnsim" run --checkpoint "$tmp/t1.h5" --data-dir "$fixture" --summary "$tmp/$name.json" --output "$tmp/$name.rec.h5" \
    "${rec[@]}" "$@" >"$tmp/$name.out" 2>&1 || fail "run $name failed: $(cat "$tmp/$name.out")"
}
run r1 --threads 1
run r3 --devices cpu,cpu,cpu --steps-per-tick 1 --batch-size 7 --threads 3
run r8 --devices cpu,cpu --balance 2,1 --steps-per-tick 3 --batch-size 33 --threads 8
run r2 --devices cpu,cpu --balance 1,2 --steps-per-tick 2 --batch-size 100 --threads 2
expect_line "$tmp/r3.out" "run, 3 stages" \
  "pipeline: 3 stages (layers 1,1,1 on cpu,cpu,cpu), K = 1, batch size 7, 3 threads (1,1,1 per stage)"
"$python" - "$tmp" <<'PY' && ok || fail "a run's summary does not show its placement, or results differ"
import json, sys, h5py, numpy as np
d = sys.argv[1]
want = {
    "r1": dict(stages=1, devices=["cpu"], stage_layers=[3], steps_per_tick=4, batch_size=64, threads=1, stage_threads=[1]),
    "r3": dict(stages=3, devices=["cpu"] * 3, stage_layers=[1, 1, 1], steps_per_tick=1, batch_size=7, threads=3,
               stage_threads=[1, 1, 1]),
    "r8": dict(stages=2, devices=["cpu"] * 2, stage_layers=[2, 1], steps_per_tick=3, batch_size=33, threads=8,
               stage_threads=[4, 4]),
    "r2": dict(stages=2, devices=["cpu"] * 2, stage_layers=[1, 2], steps_per_tick=2, batch_size=100, threads=2,
               stage_threads=[1, 1]),
}
summaries = {k: json.load(open(f"{d}/{k}.json")) for k in want}
for k, w in want.items():
    assert summaries[k]["execution"] == w, (k, summaries[k]["execution"], w)
    assert summaries[k]["threads"] == w["threads"], k
ref = summaries["r1"]
assert len(ref["firing_rate"]) == 3 and min(ref["firing_rate"]) > 0, ref["firing_rate"]  # every layer spikes
for k in want:
    assert summaries[k]["accuracy_by_step"] == ref["accuracy_by_step"] and summaries[k]["firing_rate"] == ref["firing_rate"], k
def datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out
a = datasets(f"{d}/r1.rec.h5")
assert a["samples/output_counts"].sum() > 0 and len(a["spikes/hidden2/node_ids"]) > 0
for k in ("r3", "r8", "r2"):
    b = datasets(f"{d}/{k}.rec.h5")
    assert a.keys() == b.keys(), k
    for name in a:
        assert np.array_equal(a[name], b[name]), (k, name)
PY

# Resuming a training with another placement: the placement given now is the
# one that runs, and the result is unchanged.
"$snnsim" train "${common[@]}" --epochs 1 --batch-size 32 --checkpoint "$tmp/half.h5" --threads 1 >/dev/null 2>&1 || fail "1-epoch train failed"
"$snnsim" train --resume "$tmp/half.h5" --epochs 2 --data-dir "$fixture" --devices cpu,cpu,cpu --steps-per-tick 2 \
  --threads 3 --checkpoint "$tmp/resumed.h5" >"$tmp/resume.out" 2>&1 || fail "resume failed: $(cat "$tmp/resume.out")"
expect_line "$tmp/resume.out" "resumed train" \
  "pipeline: 3 stages (layers 1,1,1 on cpu,cpu,cpu), K = 2, batch size 32, 3 threads (1,1,1 per stage)"
"$python" - "$tmp/t1.h5" "$tmp/resumed.h5" <<'PY' && ok || fail "a training resumed with another placement differs"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as a, h5py.File(sys.argv[2], "r") as b:
    for k in a["parameters"]:
        assert np.array_equal(a["parameters"][k][...], b["parameters"][k][...]), k
PY

finish
