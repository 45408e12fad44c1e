#!/usr/bin/env bash
# `snnsim train --loss ce` trains with cross-entropy on the output spike
# counts: the checkpoint's training options say so, the first step's loss is
# cross-entropy computed independently (numpy, from the counts the same
# network gives in `snnsim run`), a value MSE on rates could not take, and
# the network learns far above chance on the fixture.
#   train_loss_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The first step's loss: one batch of all 100 samples, so the epoch's loss
# is that of the untrained network; --lr 1e-30 leaves the weights as they
# were (an Adam step of ~1e-30 is below float32's resolution at the weights'
# size), so `run` on the checkpoint gives the counts the loss was taken on.
# A low threshold: the untrained output layer spikes (all-zero counts would
# give every loss its trivial value).
net=(--data-dir "$fixture" --layers 784-64-10 --T 8 --seed 2 --threads 1)
for loss in ce mse; do
  "$snnsim" train "${net[@]}" --v-threshold 0.1 --loss "$loss" --limit 100 --batch-size 100 --epochs 1 --lr 1e-30 \
    --checkpoint "$tmp/$loss.h5" >"$tmp/$loss.out" 2>&1 || fail "train --loss $loss failed: $(cat "$tmp/$loss.out")"
  "$snnsim" run --checkpoint "$tmp/$loss.h5" --data-dir "$fixture" --split train --limit 100 --threads 1 \
    --output "$tmp/$loss.rec.h5" >"$tmp/$loss.run" 2>&1 || fail "run on the $loss checkpoint failed: $(cat "$tmp/$loss.run")"
done
"$python" - "$tmp" <<'PY' && ok || fail "the first step's loss is not cross-entropy on counts (ce) or MSE on rates (mse)"
import json, re, sys, h5py, numpy as np
d = sys.argv[1]
for loss in ("ce", "mse"):
    with h5py.File(f"{d}/{loss}.h5", "r") as f:
        assert json.loads(f.attrs["training"])["loss"] == loss, f.attrs["training"]
    text = open(f"{d}/{loss}.out").read()
    m = re.search(r"^epoch 1/1: train loss ([0-9.]+), train accuracy ([0-9.]+),", text, re.M)
    assert m, text
    printed, printed_accuracy = float(m.group(1)), float(m.group(2))
    with h5py.File(f"{d}/{loss}.rec.h5", "r") as r:
        counts = r["samples/output_counts"][:].astype(np.float64)  # [100, 10]
        labels = r["samples/label"][:].astype(int)
    assert counts.shape == (100, 10) and counts.sum() > 0
    top = counts.max(1, keepdims=True)
    ce = float(np.mean(top[:, 0] + np.log(np.exp(counts - top).sum(1)) - counts[np.arange(100), labels]))
    mse = float(np.mean((counts / 8 - np.eye(10)[labels]) ** 2))
    assert abs(ce - mse) > 1e-2, (ce, mse)  # the two are told apart
    want = ce if loss == "ce" else mse
    assert abs(printed - want) <= 6e-5, f"--loss {loss}: printed {printed}, cross-entropy {ce}, mse {mse}"
    assert abs(printed_accuracy - np.mean(counts.argmax(1) == labels)) <= 6e-5
    if loss == "ce":
        assert printed > 1, printed  # MSE of rates in [0, 1] against one-hot labels never exceeds 1
    print(f"--loss {loss}: first loss {printed} (cross-entropy {ce:.6f}, mse {mse:.6f})")
PY

# It learns: held-out accuracy far above chance (10%) after a few epochs on the 300 training digits.
"$snnsim" train "${net[@]}" --v-threshold 0.5 --loss ce --epochs 6 --lr 2e-3 --batch-size 16 --checkpoint "$tmp/learn.h5" \
  >"$tmp/learn.out" 2>&1 || fail "train --loss ce failed: $(cat "$tmp/learn.out")"
"$snnsim" run --checkpoint "$tmp/learn.h5" --data-dir "$fixture" --threads 1 --summary "$tmp/learn.json" \
  >/dev/null 2>&1 || fail "run on the ce checkpoint failed"
"$python" - "$tmp/learn.json" "$tmp/learn.h5" <<'PY' && ok || fail "--loss ce did not learn: $(cat "$tmp/learn.out")"
import json, sys, h5py
s = json.load(open(sys.argv[1]))
with h5py.File(sys.argv[2], "r") as f:
    assert json.loads(f.attrs["training"])["loss"] == "ce"
assert s["samples"] == 100 and s["accuracy"] >= 0.6, s["accuracy"]
print(f"--loss ce: held-out accuracy {s['accuracy']}")
PY

finish
