#!/usr/bin/env bash
# `snnsim inspect`: a checkpoint, a complete recording, a sweep manifest, a
# recording being written and one whose run was SIGKILLed: every value it
# states is compared with h5py's (or json's) reading of the same file; bad
# input (missing, a directory, neither HDF5 nor JSON, HDF5 or JSON of another
# kind, damaged files) gives one error line and exit 2. Also: `run`'s
# progress line on a terminal (and not otherwise), and the `train --resume`
# banner's layer sizes (issue 18).
#   inspect_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
tmp="$(mktemp -d)"
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# ---- train --resume names the checkpoint's layers, not the defaults ----
# (784-24-10 and T = 4: the defaults are 784-256-10 and T = 8.)
"$snnsim" train --data-dir "$fixture" --layers 784-24-10 --T 4 --epochs 1 --v-threshold 0.5 --lr 0.002 --seed 3 \
  --threads 1 --checkpoint "$tmp/half.h5" >"$tmp/train.out" 2>&1 || fail "train failed: $(cat "$tmp/train.out")"
"$snnsim" train --resume "$tmp/half.h5" --epochs 2 --threads 1 --data-dir "$fixture" --checkpoint "$tmp/ck.h5" \
  >"$tmp/resume.out" 2>&1 || fail "train --resume failed: $(cat "$tmp/resume.out")"
grep -q "^training 784-24-10 on .*, T = 4," "$tmp/resume.out" && ok ||
  fail "the resume banner does not name the checkpoint's network 784-24-10, T = 4: $(head -1 "$tmp/resume.out")"

# ---- a checkpoint ----
"$snnsim" inspect "$tmp/ck.h5" >"$tmp/ck.txt" 2>"$tmp/ck.err" || fail "inspect checkpoint: $(cat "$tmp/ck.err")"
"$snnsim" inspect --json "$tmp/ck.h5" >"$tmp/ck.json" 2>"$tmp/ck.err" || fail "inspect --json checkpoint: $(cat "$tmp/ck.err")"
[[ -s "$tmp/ck.err" ]] && fail "inspect wrote to stderr: $(cat "$tmp/ck.err")"
"$python" - "$tmp/ck.h5" "$tmp/ck.txt" "$tmp/ck.json" <<'PY' && ok || fail "inspect's checkpoint description differs from h5py's reading"
import json, sys, h5py, numpy as np
path, text, js = sys.argv[1], open(sys.argv[2]).read(), json.load(open(sys.argv[3]))
def s(v): return v.decode() if isinstance(v, bytes) else str(v)
with h5py.File(path, "r") as f:
    config = json.loads(s(f.attrs["config"]))
    training = json.loads(s(f.attrs["training"]))
    epoch = int(f.attrs["epoch"])
    count = sum(f["parameters"][k].size for k in f["parameters"])
    acc = float(f.attrs["test_accuracy"])
    version, saved, commit = s(f.attrs["snnsim_version"]), s(f.attrs["saved_at"]), s(f.attrs["git_commit"])
assert js["kind"] == "checkpoint" and js["path"] == path, js
assert js["network"] == config, (js["network"], config)
assert js["epochs_done"] == epoch == 2 and js["training"]["epochs"] == training["epochs"] == 2
for k in ("lr", "loss", "batch_size", "limit", "weight_decay", "lr_schedule", "augment_shift"):
    assert js["training"][k] == training[k], (k, js["training"][k], training[k])
assert js["training"]["seed"] == training["shuffle_seed"] == 3
assert js["parameters"]["count"] == count and js["test_accuracy"] == acc and js["resumable"] is True
assert js["snnsim_version"] == version and js["saved_at"] == saved and js["git_commit"] == commit
lines = text.splitlines()
assert lines[0] == f"checkpoint {path}", lines[0]
layers = "-".join(map(str, config["layers"]))
assert any(l.startswith(f"network: {layers}, T = {config['steps']}, {config['neuron']['model']} (") for l in lines), text
assert f"v_threshold {config['neuron']['v_threshold']:g}" in text, text
assert f"training: {epoch} of {training['epochs']} epochs done; lr {training['lr']:g}" in text, text
assert f"loss {training['loss']}, batch {training['batch_size']}, seed {training['shuffle_seed']}" in text, text
assert f"test accuracy: {acc:.4f} (after epoch {epoch})" in text, text
assert f"parameters: {count} values (float32), hash {js['parameters']['hash']}" in text, text
assert f"provenance: snnsim {version}, commit {commit}, saved {saved}" in text, text
PY

# ---- a complete recording ----
"$snnsim" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --limit 60 --batch-size 25 --threads 1 --dt 0.5 \
  --record hidden,output --record-v hidden:0,3-5 --output "$tmp/rec.h5" >"$tmp/run.out" 2>&1 ||
  fail "run failed: $(cat "$tmp/run.out")"
"$snnsim" inspect "$tmp/rec.h5" >"$tmp/rec.txt" 2>"$tmp/rec.err" || fail "inspect recording: $(cat "$tmp/rec.err")"
"$snnsim" inspect --json "$tmp/rec.h5" >"$tmp/rec.json" 2>>"$tmp/rec.err" || fail "inspect --json recording: $(cat "$tmp/rec.err")"
cat >"$tmp/check_recording.py" <<'PY'
# check_recording.py FILE TEXT JSON STATUS [CHECKPOINT_JSON]: inspect's text and
# JSON against h5py's reading of FILE (opened with SWMR when unfinished).
import json, os, sys, h5py, numpy as np
path, text, js, status = sys.argv[1], open(sys.argv[2]).read(), json.load(open(sys.argv[3])), sys.argv[4]
def s(v): return v.decode() if isinstance(v, bytes) else str(v)
with h5py.File(path, "r", swmr=path.endswith(".partial")) as f:
    meta = f["meta"]
    n = int(meta["samples_committed"][()])
    assert s(meta["status"][()]) == status, (s(meta["status"][()]), status)
    T, dt = int(meta.attrs["steps_per_sample"]), float(meta.attrs["dt_ms"])
    label, pred = f["samples/label"][:n], f["samples/predicted"][:n]
    pops = {p: (int(meta["populations"][p].attrs["n_nodes"]), int(meta["populations"][p].attrs["layer"]),
                meta["populations"][p]["recorded_node_ids"].size, int(f["samples/spike_ptr"][p][n]))
            for p in f["spikes"]}
    reports = {p: list(f["report"][p]["mapping/node_ids"][:]) for p in f.get("report", {})}
    attrs = {k: s(v) for k, v in meta.attrs.items() if isinstance(v, (bytes, str))}
    rows = f["samples/label"].shape[0]
assert js["kind"] == "recording" and js["path"] == path and js["status"] == status, js
assert js["samples_committed"] == n and js["steps"] == T and js["dt_ms"] == dt and js["rows_written"] == rows
if n > 0:
    assert abs(js["accuracy"] - float(np.mean(label == pred))) < 1e-12, js["accuracy"]
assert {p["name"]: (p["n_nodes"], p["layer"], p["recorded"], p["spikes"]) for p in js["populations"]} == pops, (js["populations"], pops)
assert {p["name"]: p["node_ids"] for p in js["potentials"]} == reports
assert set(js["meta"]) == set(attrs), (set(js["meta"]) ^ set(attrs))
assert json.dumps(js["meta"]["config"], sort_keys=True) == json.dumps(json.loads(attrs["config"]), sort_keys=True)
lines = text.splitlines()
assert lines[0] == f"recording {path}", lines[0]
word = {"running": "unfinished (running", "aborted": "unfinished (aborted"}.get(status, status)
assert lines[1].startswith(f"status: {word}"), lines[1]
assert f"{n} samples" in lines[1] and (n == 0 or f"accuracy {np.mean(label == pred):.4f}" in lines[1]), lines[1]
assert f"time: T = {T} steps of {dt:g} ms per sample" in text, text
for p, (nodes, layer, rec, spikes) in pops.items():
    assert f"{p} (layer {layer}): {rec} of {nodes} neurons, {spikes} spikes" in text, (p, text)
assert f"checkpoint: {attrs['checkpoint']} (parameters hash {attrs['parameters_hash']})" in text, text
assert f"started {attrs['start_time']}" in text and f"snnsim {attrs['snnsim_version']}" in text, text
assert f"host {attrs['host']}" in text, text
if len(sys.argv) > 5:  # the checkpoint it came from: the same parameters hash
    ck = json.load(open(sys.argv[5]))
    assert attrs["parameters_hash"] == ck["parameters"]["hash"], (attrs["parameters_hash"], ck["parameters"]["hash"])
    assert os.path.samefile(attrs["checkpoint"], ck["path"]), (attrs["checkpoint"], ck["path"])
PY
"$python" "$tmp/check_recording.py" "$tmp/rec.h5" "$tmp/rec.txt" "$tmp/rec.json" complete "$tmp/ck.json" && ok ||
  fail "inspect's recording description differs from h5py's reading: $(cat "$tmp/rec.txt")"
grep -q "^potentials: hidden neurons 0,3-5$" "$tmp/rec.txt" && ok || fail "potentials line: $(cat "$tmp/rec.txt")"
grep -q "^run options: .*--dt 0.5 .*--limit 60 .*--record hidden,output --record-v hidden:0,3-5" "$tmp/rec.txt" && ok ||
  fail "run options line: $(cat "$tmp/rec.txt")"

# ---- a sweep of 2 points ----
cat >"$tmp/sweep.toml" <<TOML
[sweep]
out = "$tmp/sweep"
[base]
checkpoint = "$tmp/ck.h5"
data-dir = "$fixture"
limit = 20
threads = 1
[grid]
tau = [1.5, 3.0]
TOML
"$snnsim" sweep "$tmp/sweep.toml" >"$tmp/sweep.out" 2>&1 || fail "sweep failed: $(cat "$tmp/sweep.out")"
"$snnsim" inspect "$tmp/sweep/manifest.json" >"$tmp/m.txt" 2>"$tmp/m.err" || fail "inspect manifest: $(cat "$tmp/m.err")"
"$snnsim" inspect --json "$tmp/sweep/manifest.json" >"$tmp/m.json" 2>>"$tmp/m.err" || fail "inspect --json manifest: $(cat "$tmp/m.err")"
"$snnsim" inspect "$tmp/sweep" >"$tmp/m2.txt" 2>>"$tmp/m.err" || fail "inspect sweep folder: $(cat "$tmp/m.err")"
"$python" - "$tmp/sweep/manifest.json" "$tmp/m.txt" "$tmp/m.json" "$tmp/m2.txt" <<'PY' && ok || fail "inspect's manifest description differs from the manifest: $(cat "$tmp/m.txt")"
import json, os, sys
path, text, js, text2 = sys.argv[1], open(sys.argv[2]).read(), json.load(open(sys.argv[3])), open(sys.argv[4]).read()
m = json.load(open(path))
done = [r for r in m["rows"] if r["status"] == "done"]
best = max(done, key=lambda r: r["accuracy"])
taus = sorted(float(r["params"]["tau"]) for r in m["rows"])
assert js["kind"] == "sweep manifest" and js["total_points"] == m["total_points"] == 2
assert js["points"] == {"done": len(done), "not run": 0} and len(done) == 2, js["points"]
assert js["parameters"]["tau"]["min"] == taus[0] == 1.5 and js["parameters"]["tau"]["max"] == taus[-1] == 3.0
assert js["best"]["accuracy"] == best["accuracy"] and js["best"]["index"] == best["index"]
assert os.path.samefile(js["output_folder"], os.path.dirname(path))
assert text.splitlines()[0] == f"sweep manifest {path}"
assert "points: 2 done, 0 not run" in text and "  tau: 1.5 .. 3 (2 values)" in text, text
assert f"best accuracy: {best['accuracy']:.4f} at point {best['index']} (tau {best['params']['tau']})" in text, text
assert text2.splitlines()[1:] == text.splitlines()[1:], text2  # the folder names its manifest.json
PY

# ---- a recording being written, then killed with SIGKILL ----
# The embedded MNIST's 8,000 training digits (the default --data-dir), long
# enough to be inspected while it runs and killed mid-way.
"$snnsim" run --checkpoint "$tmp/ck.h5" --split train --T 48 --batch-size 16 --threads 1 --record hidden,output \
  --output "$tmp/k.h5" >"$tmp/k.out" 2>&1 &
pid=$!
pids+=("$pid")
committed=0
live_ok=0
for _ in $(seq 600); do
  sleep 0.1
  [[ -e "$tmp/k.h5.partial" ]] || continue
  # Inspected while the run writes it: the name without .partial finds it.
  if "$snnsim" inspect --json "$tmp/k.h5" >"$tmp/live.json" 2>"$tmp/live.err"; then
    live_ok=1
    committed=$("$python" -c "import json, sys; print(json.load(open(sys.argv[1]))['samples_committed'])" "$tmp/live.json")
    ((committed > 0)) && break
  else
    fail "inspect of a running recording: $(cat "$tmp/live.err")"
    break
  fi
done
kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
((live_ok && committed > 0)) && ok || fail "no committed sample seen while the run wrote its file ($committed)"
if [[ -e "$tmp/k.h5" ]]; then
  fail "the run finished before it was killed"
else
  "$snnsim" inspect "$tmp/k.h5.partial" >"$tmp/k.txt" 2>"$tmp/k.err" || fail "inspect killed recording: $(cat "$tmp/k.err")"
  "$snnsim" inspect --json "$tmp/k.h5.partial" >"$tmp/k.json" 2>>"$tmp/k.err" || fail "inspect --json killed: $(cat "$tmp/k.err")"
  "$python" "$tmp/check_recording.py" "$tmp/k.h5.partial" "$tmp/k.txt" "$tmp/k.json" running "$tmp/ck.json" && ok ||
    fail "inspect's description of a killed run's file differs from h5py's reading: $(cat "$tmp/k.txt")"
  n=$("$python" -c "import json, sys; print(json.load(open(sys.argv[1]))['samples_committed'])" "$tmp/k.json")
  ((n >= committed && n > 0)) && ok || fail "the killed file holds $n committed samples, fewer than the $committed seen live"
  grep -q "snnsim recover $tmp/k.h5" "$tmp/k.txt" && ok || fail "no recover hint: $(cat "$tmp/k.txt")"
  # recover, then inspect says so, with the same samples.
  "$snnsim" recover "$tmp/k.h5" >/dev/null 2>&1 || fail "recover failed"
  "$snnsim" inspect "$tmp/k.h5" >"$tmp/kr.txt" 2>"$tmp/kr.err" || fail "inspect recovered: $(cat "$tmp/kr.err")"
  "$snnsim" inspect --json "$tmp/k.h5" >"$tmp/kr.json" 2>>"$tmp/kr.err" || fail "inspect --json recovered: $(cat "$tmp/kr.err")"
  "$python" "$tmp/check_recording.py" "$tmp/k.h5" "$tmp/kr.txt" "$tmp/kr.json" recovered && ok ||
    fail "inspect's description of a recovered file differs: $(cat "$tmp/kr.txt")"
  grep -q "^status: recovered (by snnsim recover from a run that was killed), $n samples" "$tmp/kr.txt" && ok ||
    fail "recovered status line: $(sed -n 2p "$tmp/kr.txt")"
fi

# ---- bad input: one line, exit 2, nothing on stdout ----
expect_error "missing file" "cannot inspect '$tmp/none.h5': No such file" inspect "$tmp/none.h5"
mkdir "$tmp/dir"
expect_error "a directory" "is a directory without a sweep manifest" inspect "$tmp/dir"
echo "hello" >"$tmp/text.txt"
expect_error "a text file" "is neither an HDF5 file nor JSON" inspect "$tmp/text.txt"
: >"$tmp/empty"
expect_error "an empty file" "is neither an HDF5 file nor JSON" inspect "$tmp/empty"
echo '{"a": 1}' >"$tmp/other.json"
expect_error "JSON of another kind" "is JSON but not a sweep manifest" inspect "$tmp/other.json"
echo '{"rows": [' >"$tmp/cut.json"
expect_error "JSON cut short" "is not valid JSON" inspect "$tmp/cut.json"
"$python" - "$tmp/sweep/manifest.json" "$tmp/badrow.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["rows"][0]["status"] = 7
json.dump(m, open(sys.argv[2], "w"))
PY
expect_error "manifest with a malformed row" "sweep manifest '$tmp/badrow.json' is malformed" inspect "$tmp/badrow.json"
"$python" -c "import h5py, sys; h5py.File(sys.argv[1], 'w').create_dataset('x', data=[1, 2])" "$tmp/other.h5"
expect_error "HDF5 of another kind" "is an HDF5 file of another program (neither an snnsim checkpoint" inspect "$tmp/other.h5"
head -c 3000 "$tmp/ck.h5" >"$tmp/cut_ck.h5"
expect_error "a truncated checkpoint" "cut_ck.h5'" inspect "$tmp/cut_ck.h5"
size=$(stat -c %s "$tmp/rec.h5")
head -c $((size / 2)) "$tmp/rec.h5" >"$tmp/cut_rec.h5"
expect_error "a truncated recording" "cut_rec.h5'" inspect "$tmp/cut_rec.h5"
cp "$tmp/ck.h5" "$tmp/nan.h5"
"$python" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); f['parameters/fc0.weight'][0, 0] = float('nan')" "$tmp/nan.h5"
expect_error "a checkpoint holding NaN" "NaN or infinite" inspect "$tmp/nan.h5"
cp "$tmp/rec.h5" "$tmp/nolabel.h5"
"$python" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); del f['samples/label']" "$tmp/nolabel.h5"
expect_error "a recording without labels" "samples/label" inspect "$tmp/nolabel.h5"
cp "$tmp/rec.h5" "$tmp/badptr.h5"
"$python" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); f['samples/spike_ptr/hidden'][-1] = 10**12" "$tmp/badptr.h5"
expect_error "a recording with a damaged spike pointer" "badptr.h5'" inspect "$tmp/badptr.h5"
expect_error "no FILE" "FILE is required" inspect

# ---- run's progress line: on a terminal only ----
run=(run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --batch-size 1 --threads 1)
"$snnsim" "${run[@]}" >"$tmp/p.out" 2>"$tmp/p.err" || fail "run failed: $(cat "$tmp/p.err")"
[[ ! -s "$tmp/p.err" ]] && ok || fail "run wrote to stderr without a terminal: $(cat "$tmp/p.err")"
command -v script >/dev/null || fail "util-linux's script is needed to give run a terminal"
script -qec "$(printf '%q ' "$snnsim" "${run[@]}")" /dev/null </dev/null >"$tmp/tty.out" 2>&1 || fail "run on a terminal failed: $(cat "$tmp/tty.out")"
"$python" - "$tmp/tty.out" "$tmp/p.out" <<'PY' && ok || fail "run's progress line on a terminal: $(cat -v "$tmp/tty.out")"
import re, sys
tty, plain = open(sys.argv[1], newline="").read(), open(sys.argv[2]).read()
draws = re.findall(r"\rtest split \[[#.]{30}\] (\d+)/(\d+) (\d+) samples/s ETA (\d+s|\?)\x1b\[K", tty)
assert draws, "no progress line"
assert all(int(total) == 100 for _, total, _, _ in draws), draws
assert int(draws[-1][0]) == 100, draws[-1]  # the last one shows the end
done = [int(d) for d, _, _, _ in draws]
assert done == sorted(done), done
# 100 batches of 1 sample: redrawn a few times per second, not per batch.
assert len(draws) <= 25, f"{len(draws)} redraws for 100 batches"
# Cleared ("\r", erase the line) after the last draw, then the results,
# the same as without a terminal.
clear = tty.rindex("\r\x1b[K")
assert clear > tty.rindex("samples/s"), "the line is not cleared at the end"
results = tty[clear + 4:].replace("\r\n", "\n")
strip = lambda t: re.sub(r"\([0-9.]+ s\)", "", t)
assert strip(results) == strip(plain), (results, plain)
PY

finish
