#!/usr/bin/env bash
# End-to-end tests of `snnsim train` and `snnsim run` on the MNIST fixture.
#   network_cli_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

common=(--data-dir "$fixture" --layers 784-48-10 --T 4 --batch-size 32 --threads 1 --v-threshold 0.5
  --augment-shift 1 --weight-decay 1e-4)
"$snnsim" train "${common[@]}" --epochs 2 --checkpoint "$tmp/ck.h5" >"$tmp/train.out" 2>"$tmp/train.err" ||
  fail "train failed: $(cat "$tmp/train.err")"
grep -q "^epoch 2/2: train loss" "$tmp/train.out" && ok || fail "train printed no epoch line: $(cat "$tmp/train.out")"
[[ -f "$tmp/ck.h5" && ! -e "$tmp/ck.h5.partial" ]] && ok || fail "no checkpoint, or a .partial left"

# The checkpoint reads from Python with h5py: names as named_parameters(), config as JSON.
"$python" - "$tmp/ck.h5" <<'PY' && ok || fail "h5py could not read the checkpoint"
import json, sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    assert sorted(f["parameters"].keys()) == ["fc0.bias", "fc0.weight", "fc1.bias", "fc1.weight"], list(f["parameters"])
    assert f["parameters/fc0.weight"].shape == (48, 784)
    assert int(f.attrs["epoch"]) == 2
    assert json.loads(f.attrs["config"])["layers"] == [784, 48, 10]
PY

"$snnsim" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --summary "$tmp/run.json" >"$tmp/run.out" 2>"$tmp/run.err" ||
  fail "run failed: $(cat "$tmp/run.err")"
grep -q "^test split: 100 samples, T = 4, accuracy" "$tmp/run.out" && ok || fail "run summary line missing: $(cat "$tmp/run.out")"
"$python" - "$tmp/run.json" <<'PY' && ok || fail "run summary JSON incomplete"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["samples"] == 100 and len(s["accuracy_by_step"]) == 4 and len(s["firing_rate"]) == 2
assert s["accuracy_by_step"][-1] == s["accuracy"]
PY
# The same results with two pipeline stages, another batch size and K = 1.
"$snnsim" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --devices cpu,cpu --batch-size 7 --steps-per-tick 1 \
  --summary "$tmp/run2.json" >/dev/null 2>&1 || fail "two-stage run failed"
"$python" - "$tmp/run.json" "$tmp/run2.json" <<'PY' && ok || fail "two-stage run differs, or did not run as asked"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["accuracy_by_step"] == b["accuracy_by_step"] and a["firing_rate"] == b["firing_rate"]
# The flags took effect (else the comparison would pass with them ignored);
# tests/cli/placement_test.sh covers 3 stages and 3 and 8 threads.
assert (a["execution"]["stages"], a["execution"]["steps_per_tick"], a["execution"]["batch_size"]) == (1, 4, 64), a["execution"]
e = b["execution"]
assert (e["stages"], e["stage_layers"], e["steps_per_tick"], e["batch_size"]) == (2, [1, 1], 1, 7), e
PY

# Recording: spikes and potentials stream to HDF5; they agree with the run's
# own counts and firing rates, and do not depend on partition, batch, K or threads.
"$snnsim" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --output "$tmp/rec.h5" --record hidden,output \
  --record-v hidden:0,5,40-42 --record-input >"$tmp/rec.out" 2>&1 || fail "recording run failed: $(cat "$tmp/rec.out")"
grep -q "^recording estimate (before compression" "$tmp/rec.out" && ok || fail "no recording estimate: $(cat "$tmp/rec.out")"
[[ -f "$tmp/rec.h5" && ! -e "$tmp/rec.h5.partial" ]] && ok || fail "no recording, or a .partial left"
"$snnsim" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --output "$tmp/rec2.h5" --record hidden,output \
  --record-v hidden:0,5,40-42 --record-input --devices cpu,cpu --batch-size 7 --steps-per-tick 1 --threads 2 \
  >"$tmp/rec2.out" 2>&1 || fail "second recording run failed"
grep -qxF "pipeline: 2 stages (layers 1,1 on cpu,cpu), K = 1, batch size 7, 2 threads (1,1 per stage)" "$tmp/rec2.out" &&
  ok || fail "the second recording run did not run as asked: $(cat "$tmp/rec2.out")"
"$python" - "$tmp/rec.h5" "$tmp/rec2.h5" "$tmp/run.json" "$fixture/t10k-images-idx3-ubyte" <<'PY' && ok || fail "recording inconsistent"
import json, sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
run = json.load(open(sys.argv[3]))
images = np.fromfile(sys.argv[4], np.uint8)[16:].reshape(-1, 784)[:100] / 255.0
# Input spikes: the encoder's Poisson trains, p = intensity per step.
ptr, ids = a["samples/spike_ptr/input"][:], a["spikes/input/node_ids"][:].astype(int)
for s in range(100):
    assert (images[s][ids[ptr[s]:ptr[s + 1]]] > 0).all(), s  # a black pixel never spikes
expected = images.sum() * 4
assert abs(len(ids) - expected) < 5 * np.sqrt(expected), (len(ids), expected)
# Per-sample rows that every recording has: spikes per layer, prediction after each step.
ls = a["samples/layer_spikes"][:]
for i, pop in enumerate(["hidden", "output"]):
    assert (np.diff(a["samples/spike_ptr"][pop][:]) == ls[:, i]).all(), pop
pbs = a["samples/prediction_by_step"][:]
assert (pbs[:, -1] == a["samples/predicted"][:]).all()
assert list((pbs == a["samples/label"][:][:, None]).mean(0)) == run["accuracy_by_step"]
assert a["meta/status"][()].rstrip(b"\0") == b"complete" and int(a["meta/samples_committed"][()]) == 100
ptr, ids, counts = a["samples/spike_ptr/output"][:], a["spikes/output/node_ids"][:], a["samples/output_counts"][:]
for s in range(100):
    assert (np.bincount(ids[ptr[s]:ptr[s + 1]].astype(int), minlength=10) == counts[s]).all(), s
assert (a["samples/predicted"][:] == a["samples/label"][:]).mean() == run["accuracy"]
assert len(a["spikes/hidden/node_ids"]) / (100 * 4 * 48) == run["firing_rate"][0]
t = a["spikes/hidden/timestamps"][:]
assert (np.diff(t) >= 0).all() and int(a["spikes/hidden"].attrs["sorting"]) == 2
assert a["report/hidden/data"].shape == (400, 5) and list(a["report/hidden/mapping/node_ids"][:]) == [0, 5, 40, 41, 42]
def datasets(f):
    out = {}
    f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out
da, db = datasets(a), datasets(b)
assert da.keys() == db.keys()
for k in da:
    assert np.array_equal(da[k], db[k]), k
PY
# snnsim analyze reads the recording chunk by chunk (a tiny budget here) and
# agrees with the run's own figures.
"$snnsim" analyze "$tmp/rec.h5" --json "$tmp/analysis.json" --chunk-bytes 1K >"$tmp/analyze.out" 2>&1 ||
  fail "analyze failed: $(cat "$tmp/analyze.out")"
"$python" - "$tmp/analysis.json" "$tmp/run.json" <<'PY' && ok || fail "analyze disagrees with the run"
import json, sys
a, run = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a["samples"] == 100 and a["accuracy"] == run["accuracy"] and a["accuracy_by_step"] == run["accuracy_by_step"]
pops = {p["name"]: p for p in a["populations"]}
assert sorted(pops) == ["hidden", "input", "output"], sorted(pops)
assert abs(pops["hidden"]["spikes_per_step"] - run["firing_rate"][0]) < 1e-12
assert abs(pops["output"]["spikes_per_step"] - run["firing_rate"][1]) < 1e-12
assert sum(map(sum, a["confusion"])) == 100 and len(pops["hidden"]["psth_hz"]) == 4
assert sum(pops["hidden"]["neuron_spikes"]) == pops["hidden"]["spikes"]
PY
# Plots (PLplot): five PNG files, and SVG on request.
"$snnsim" analyze "$tmp/rec.h5" --plots "$tmp/plots" --raster 2-4 >"$tmp/plots.out" 2>&1 || fail "plots failed: $(cat "$tmp/plots.out")"
for name in raster rates psth accuracy confusion; do
  [[ $(head -c 4 "$tmp/plots/$name.png" 2>/dev/null | od -An -c | tr -d ' ') == '211PNG' && $(stat -c %s "$tmp/plots/$name.png") -gt 5000 ]] &&
    ok || fail "no $name.png plot: $(cat "$tmp/plots.out")"
done
"$snnsim" analyze "$tmp/rec.h5" --plots "$tmp/svg" --plot-format svg >/dev/null 2>&1 && grep -q "<svg" "$tmp/svg/psth.svg" &&
  ok || fail "no SVG plot"
expect_error "bad raster range" "--raster: expected samples" analyze "$tmp/rec.h5" --plots "$tmp/plots" --raster 4-2
expect_error "raster past the end" "has samples 0..99, not 100" analyze "$tmp/rec.h5" --plots "$tmp/plots" --raster 100-101
expect_error "analyze a checkpoint" "is a checkpoint of snnsim train, not a recording" analyze "$tmp/ck.h5"
expect_error "analyze nothing" "no recording" analyze "$tmp/none.h5"
expect_error "recording exists" "exists; pass --overwrite" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --output "$tmp/rec.h5"
"$snnsim" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --output "$tmp/rec.h5" --overwrite --limit 10 >/dev/null 2>&1 &&
  ok || fail "--overwrite did not replace the recording"
expect_error "unknown recorded layer" "no layer named 'hidden9'" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --output "$tmp/r3.h5" --record hidden9
expect_error "recorded ids not ascending" "recorded ids must be ascending" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --output "$tmp/r3.h5" --record-v hidden:5,3
expect_error "huge id range" "within layer 'hidden' (0..47)" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --output "$tmp/r3.h5" --record hidden:0-999999999999
expect_error "layer recorded twice" "appears twice" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --output "$tmp/r3.h5" --record hidden,hidden
expect_error "bad id" "is not a neuron id" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --output "$tmp/r3.h5" --record hidden:x
expect_error "record-v without output" "--record-v needs --output" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --record-v hidden:1

# Outputs are written beside their target and renamed over it: a device, a
# FIFO or a link there would be replaced by a file, so each is refused, before
# the work, and left as it was.
mknod "$tmp/dev" c 1 3 2>/dev/null || mkfifo "$tmp/dev"
mkfifo "$tmp/fifo"
ln -s "$tmp/ck.h5" "$tmp/link.h5"
for out in dev fifo link.h5; do
  expect_error "--summary $out" "'$tmp/$out' is a .*, not a regular file" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" \
    --limit 10 --summary "$tmp/$out"
  expect_error "--output $out" "'$tmp/$out' is a .*, not a regular file" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" \
    --limit 10 --output "$tmp/$out" --overwrite
  expect_error "--checkpoint $out" "'$tmp/$out' is a .*, not a regular file" train --data-dir "$fixture" --layers 784-8-10 \
    --T 2 --epochs 1 --limit 10 --checkpoint "$tmp/$out" --overwrite
done
[[ -p "$tmp/fifo" && -L "$tmp/link.h5" && ( -c "$tmp/dev" || -p "$tmp/dev" ) ]] && ok || fail "an output replaced a device, FIFO or link"
expect_error "empty --checkpoint" "--checkpoint: expected a file name, got ''" train --data-dir "$fixture" --layers 784-8-10 \
  --T 2 --epochs 1 --limit 10 --checkpoint ""
# A graph model: a folder, whole numbers given as fractions, a pool padded by
# more than half its kernel.
expect_error "model is a folder" "model '$tmp': is a directory, not a file" train --data-dir "$fixture" --model "$tmp"
cnn="$(dirname "${BASH_SOURCE[0]}")/../../examples/graphs/mnist_cnn.toml"
sed -e 's/^features = 32/features = 2.5/' "$cnn" >"$tmp/frac.toml"
expect_error "fractional features" "node 'conv1': 'features' must be an integer, got 2.5" train --data-dir "$fixture" \
  --model "$tmp/frac.toml" --limit 10
sed -e 's/^shape = \[1, 28, 28\]/shape = [1.5, 28, 28]/' "$cnn" >"$tmp/frac_shape.toml"
expect_error "fractional shape" "'shape' must be an integer or a list of integers" train --data-dir "$fixture" \
  --model "$tmp/frac_shape.toml" --limit 10
# 2*10^9 channels: a convolution's output of more values per sample than
# the kernels index, refused naming the node before anything is allocated.
sed -e 's/^features = 32/features = 2000000000/' "$cnn" >"$tmp/huge.toml"
expect_error "huge convolution" "node 'conv1' (Conv2d): its output \[2000000000, 28, 28\] holds more than 2147483647 values per sample" \
  train --data-dir "$fixture" --model "$tmp/huge.toml" --limit 10
# 10^7 outputs of 3136 inputs (117 GiB of weights, more than this machine
# has): refused naming the node before anything is allocated.
sed -e 's/^features = 10/features = 10000000/' "$cnn" >"$tmp/hugefc.toml"
expect_error "huge layer" "node 'fc' (Affine): its 10000000 x 3136 weights need 117 GiB as float32, more than 80% of" \
  train --data-dir "$fixture" --model "$tmp/hugefc.toml" --limit 10
# The same layer in a --layers network, which no such check sees: the
# allocator's failure is one line that says what ran out, not LibTorch's
# text. (Under AddressSanitizer, whose allocator aborts on such a request
# unless told to fail it as the system's does; above its 1 TiB limit it also
# prints a warning of its own, hence not more.)
asan_options="${ASAN_OPTIONS-}"
export ASAN_OPTIONS="${asan_options:+$asan_options:}allocator_may_return_null=1"
expect_error "huge layer" "not enough memory: an allocation of 117 GiB failed" bench --data-dir "$fixture" \
  --layers 784-40000000-10 --batch 1 --T 1 --no-naive --reps 1
export ASAN_OPTIONS="$asan_options"
# A Delay far longer than the run keeps only the run's steps (it kept all of
# them, copied at every step: 10^5 steps filled the memory).
sed -e 's/^delay = 1 /delay = 100000 /' "$(dirname "${BASH_SOURCE[0]}")/../../examples/graphs/recurrent.toml" >"$tmp/long.toml"
grep -q "^delay = 100000" "$tmp/long.toml" &&
  "$snnsim" train --data-dir "$fixture" --model "$tmp/long.toml" --T 4 --epochs 1 --limit 64 --checkpoint "$tmp/long.h5" \
    >"$tmp/long.out" 2>&1 && ok || fail "a Delay of 10^5 steps: $(tail -3 "$tmp/long.out")"
sed -e 's/^kernel_size = 2          # \[32, 14, 14\]/kernel_size = 2\npadding = 2/' "$cnn" >"$tmp/pad.toml"
expect_error "pool padding" "node 'pool1' (MaxPool2d): padding \[2, 2\] must be at most half the kernel" train \
  --data-dir "$fixture" --model "$tmp/pad.toml" --limit 10

# --balance auto measures the layers, says what it chose, and changes nothing else.
"$snnsim" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --devices cpu,cpu --balance auto \
  --summary "$tmp/run3.json" >"$tmp/run3.out" 2>&1 || fail "auto-balanced run failed: $(cat "$tmp/run3.out")"
grep -q "^balance auto: 1,1 layers per stage" "$tmp/run3.out" && ok || fail "no balance line: $(cat "$tmp/run3.out")"
"$python" - "$tmp/run.json" "$tmp/run3.json" <<'PY' && ok || fail "auto-balanced run differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["accuracy_by_step"] == b["accuracy_by_step"] and a["firing_rate"] == b["firing_rate"]
assert b["execution"]["stages"] == 2 and b["execution"]["stage_layers"] == [1, 1], b["execution"]
PY

# --resume continues exactly: 1 epoch + resume to 2 equals 2 epochs straight.
"$snnsim" train "${common[@]}" --epochs 1 --checkpoint "$tmp/half.h5" >/dev/null 2>&1 || fail "1-epoch train failed"
"$snnsim" train --resume "$tmp/half.h5" --epochs 2 --threads 1 --data-dir "$fixture" --checkpoint "$tmp/resumed.h5" \
  >"$tmp/resume.out" 2>&1 || fail "resume failed: $(cat "$tmp/resume.out")"
grep -q "^epoch 2/2" "$tmp/resume.out" && ! grep -q "^epoch 1/2" "$tmp/resume.out" && ok || fail "resume redid epochs"
"$python" - "$tmp/ck.h5" "$tmp/resumed.h5" <<'PY' && ok || fail "resumed training differs from uninterrupted training"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as a, h5py.File(sys.argv[2], "r") as b:
    for k in a["parameters"]:
        assert np.array_equal(a["parameters"][k][...], b["parameters"][k][...]), k
    assert int(b.attrs["epoch"]) == 2 and "optimizer" in b
PY
expect_error "resume changes lr" "--lr cannot change when resuming" train --resume "$tmp/half.h5" --epochs 2 --lr 0.1 --data-dir "$fixture"
expect_error "resume past the end" "already has 2 epochs" train --resume "$tmp/ck.h5" --epochs 2 --data-dir "$fixture"
"$python" - "$tmp/ck.h5" <<'PY' && ok || fail "training options missing from the checkpoint"
import json, sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    t = json.loads(f.attrs["training"])
    assert t["augment_shift"] == 1 and t["weight_decay"] == 1e-4 and t["lr_schedule"] == "constant", t
PY
"$snnsim" train "${common[@]}" --epochs 1 --lr-schedule cosine --checkpoint "$tmp/cos.h5" >/dev/null 2>&1 ||
  fail "cosine train failed"
expect_error "resume stretches a cosine schedule" "cosine schedule spans 1 epochs" \
  train --resume "$tmp/cos.h5" --epochs 3 --data-dir "$fixture"
expect_error "bad schedule" "lr-schedule" train --lr-schedule linear --data-dir "$fixture"

# A TOML config holds the flags; the command line overrides it; typos are errors.
printf '[train]\nlayers = "784-24-10"\nT = 3\nepochs = 1\nthreads = 1\ndata-dir = "%s"\ncheckpoint = "%s"\n' \
  "$fixture" "$tmp/cfg.h5" >"$tmp/cfg.toml"
"$snnsim" --config "$tmp/cfg.toml" train --T 2 >"$tmp/cfg.out" 2>&1 || fail "train from config failed: $(cat "$tmp/cfg.out")"
grep -q "^training 784-24-10 on .*T = 2," "$tmp/cfg.out" && [[ -f "$tmp/cfg.h5" ]] && ok ||
  fail "config not applied or not overridden: $(cat "$tmp/cfg.out")"
# The same as JSON; lists become the flags' comma-separated values.
printf '{"train": {"layers": "784-24-10", "T": 3, "epochs": 1, "threads": 1, "devices": ["cpu", "cpu"], "data-dir": "%s", "checkpoint": "%s"}}' \
  "$fixture" "$tmp/json.h5" >"$tmp/cfg.json"
"$snnsim" --config "$tmp/cfg.json" train >"$tmp/json.out" 2>&1 || fail "train from JSON config failed: $(cat "$tmp/json.out")"
grep -q "^training 784-24-10 on .*T = 3," "$tmp/json.out" && [[ -f "$tmp/json.h5" ]] && ok ||
  fail "JSON config not applied: $(cat "$tmp/json.out")"
printf '{"train": {"layerz": 3}}' >"$tmp/typo.json"
expect_error "JSON config typo" "\"train\" has no key \"layerz\" (did you mean \"layers\"?)" --config "$tmp/typo.json" train --data-dir "$fixture"
printf '{"train": {"layers": ' >"$tmp/broken.json"
expect_error "broken JSON config" "config '$tmp/broken.json' (JSON): parse error at line 1, column 22" --config "$tmp/broken.json" train --data-dir "$fixture"
printf '[train]\nlayerz = "784-24-10"\n' >"$tmp/typo.toml"
expect_error "config typo" "line 2: \[train\] has no key 'layerz' (did you mean 'layers'?)" --config "$tmp/typo.toml" train --data-dir "$fixture"
expect_error "missing config" "not readable" --config "$tmp/none.toml" train

# A checkpoint that does not match its network: a parameter missing or of the wrong shape.
"$python" - "$tmp/ck.h5" "$tmp/lacks.h5" "$tmp/shape.h5" <<'PY' || fail "could not make broken checkpoints"
import shutil, sys, h5py, numpy as np
shutil.copy(sys.argv[1], sys.argv[2]); shutil.copy(sys.argv[1], sys.argv[3])
with h5py.File(sys.argv[2], "r+") as f:
    del f["parameters/fc1.weight"]
with h5py.File(sys.argv[3], "r+") as f:
    del f["parameters/fc0.weight"]
    f["parameters/fc0.weight"] = np.zeros((48, 700), np.float32)
PY
expect_error "checkpoint lacks a parameter" "lacks parameters/fc1.weight" run --checkpoint "$tmp/lacks.h5" --data-dir "$fixture"
expect_error "checkpoint shape mismatch" "parameters/fc0.weight has the wrong shape" run --checkpoint "$tmp/shape.h5" --data-dir "$fixture"
# Images that do not fit the checkpoint's input layer (10x10 = 100 values vs 784).
mkdir -p "$tmp/small"
"$python" - "$tmp/small" <<'PY' || fail "could not write small images"
import struct, sys
d = sys.argv[1]
for split, n in (("train", 20), ("t10k", 10)):
    open(f"{d}/{split}-images-idx3-ubyte", "wb").write(struct.pack(">IIII", 0x803, n, 10, 10) + bytes(100 * n))
    open(f"{d}/{split}-labels-idx1-ubyte", "wb").write(struct.pack(">II", 0x801, n) + bytes(n))
PY
expect_error "images do not fit the checkpoint" "input size is 784 but the images have 100" run --checkpoint "$tmp/ck.h5" --data-dir "$tmp/small"
expect_error "missing checkpoint" "cannot open checkpoint" run --checkpoint "$tmp/none.h5" --data-dir "$fixture"
expect_error "not a checkpoint" "is not an HDF5 file" run --checkpoint "$fixture/t10k-labels-idx1-ubyte" --data-dir "$fixture"
expect_error "bad data dir" "does not exist" train --data-dir "$tmp/nodata" --epochs 1
expect_error "bad layers" "layer sizes must look like" train --layers 784-a-10 --data-dir "$fixture"
expect_error "wrong input size" "input size is 100" train --layers 100-10 --data-dir "$fixture" --epochs 1
expect_error "bad device" "snnsim: error: --devices: device 'tpu' is not cpu or cuda:N" run --checkpoint "$tmp/ck.h5" --devices tpu --data-dir "$fixture"
expect_error "bad balance" "snnsim: error: --balance: balance assigns 3 layers" run --checkpoint "$tmp/ck.h5" --devices cpu,cpu --balance 2,1 --data-dir "$fixture"
expect_error "too many stages" "at most one stage per layer" run --checkpoint "$tmp/ck.h5" --devices cpu,cpu,cpu --data-dir "$fixture"
expect_error "bad surrogate" "unknown surrogate" train --surrogate relu --data-dir "$fixture"

finish
