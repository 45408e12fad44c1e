#!/usr/bin/env bash
# Network graphs from the command line (issue 19): a TOML graph trains the
# same network as --layers; `snnsim export --nir` writes what the `nir`
# package reads and type-checks, equal to the checkpoint; the export runs
# with the checkpoint's spikes; a file made by nir.write runs by NIR's
# equations (tests/python/nir_check.py); bad graphs (TOML and NIR) give one
# line naming the node, edge or dataset, exit 2, and nothing is simulated.
#   nir_interop_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
check="$(dirname "${BASH_SOURCE[0]}")/../python/nir_check.py"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
common=(--data-dir "$fixture" --threads 1)

# ---- a TOML graph is the network --layers describes ----
cat >"$tmp/net.toml" <<'EOF'
[[nodes]]
name = "input"
kind = "Input"
shape = [784]

[[nodes]]
name = "fc0"
kind = "Affine"
features = 24

[[nodes]]
name = "lif0"
kind = "LIF"
tau = 3.0
v_threshold = 0.75
surrogate = "sigmoid:4"

[[nodes]]
name = "fc1"
kind = "Affine"
features = 10

[[nodes]]
name = "lif1"
kind = "LIF"
tau = 3.0
v_threshold = 0.75
surrogate = "sigmoid:4"

[[nodes]]
name = "output"
kind = "Output"
EOF
train=(train "${common[@]}" --epochs 1 --T 4 --seed 3 --lr 0.002)
"$snnsim" "${train[@]}" --model "$tmp/net.toml" --checkpoint "$tmp/toml.h5" >"$tmp/t1.out" 2>&1 ||
  fail "train --model net.toml: $(cat "$tmp/t1.out")"
"$snnsim" "${train[@]}" --layers 784-24-10 --tau 3 --v-threshold 0.75 --surrogate sigmoid:4 \
  --checkpoint "$tmp/layers.h5" >"$tmp/t2.out" 2>&1 || fail "train --layers: $(cat "$tmp/t2.out")"
grep -q "^training 784-24-10 on" "$tmp/t1.out" && ok || fail "train --model does not name 784-24-10: $(head -1 "$tmp/t1.out")"
"$python" - "$tmp/toml.h5" "$tmp/layers.h5" <<'PY' && ok || fail "a TOML chain trains other weights than --layers"
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
assert sorted(a["parameters"]) == sorted(b["parameters"])
for k in a["parameters"]:
    assert np.array_equal(a["parameters"][k][...], b["parameters"][k][...]), k
PY

# ---- export: nir reads it, equal to the checkpoint ----
"$snnsim" export "$tmp/toml.h5" --nir "$tmp/net.nir" >"$tmp/e.out" 2>&1 || fail "export: $(cat "$tmp/e.out")"
grep -q "exported 784-24-10 (6 nodes, 5 edges, dt 0.0001 s)" "$tmp/e.out" && ok || fail "export said: $(cat "$tmp/e.out")"
"$python" "$check" exported "$tmp/toml.h5" "$tmp/net.nir" 0.0001 >"$tmp/c.out" 2>&1 && ok ||
  fail "nir's reading of the export: $(cat "$tmp/c.out")"
expect_error "export over an existing file" "exists; pass --overwrite" export "$tmp/toml.h5" --nir "$tmp/net.nir"
"$snnsim" export "$tmp/toml.h5" --nir "$tmp/net.nir" --overwrite --nir-dt 0.001 >/dev/null 2>&1 &&
  "$python" "$check" exported "$tmp/toml.h5" "$tmp/net.nir" 0.001 >"$tmp/c.out" 2>&1 && ok ||
  fail "export --nir-dt 0.001: $(cat "$tmp/c.out")"

# ---- the export runs as the checkpoint does, spike for spike ----
run=(run "${common[@]}" --T 4 --limit 40 --record hidden,output)
"$snnsim" "${run[@]}" --checkpoint "$tmp/toml.h5" --summary "$tmp/a.json" --output "$tmp/a.h5" >/dev/null 2>"$tmp/err" ||
  fail "run --checkpoint: $(cat "$tmp/err")"
# A NIR file holds the network, not the encoder: --seed (0) and --T (8) are the run's.
"$snnsim" "${run[@]}" --seed 3 --model "$tmp/net.nir" --summary "$tmp/b.json" --output "$tmp/b.h5" >/dev/null 2>"$tmp/err" ||
  fail "run --model net.nir: $(cat "$tmp/err")"
"$python" - "$tmp/a.json" "$tmp/b.json" "$tmp/a.h5" "$tmp/b.h5" <<'PY' && ok || fail "the export runs differently from its checkpoint"
import json, sys, h5py, numpy as np
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("samples", "steps", "accuracy", "accuracy_by_step", "firing_rate"):
    assert a[k] == b[k], (k, a[k], b[k])
assert a["config"]["layers"] == b["config"]["layers"] and a["config"]["neuron"] == b["config"]["neuron"]
ra, rb = (h5py.File(p, "r") for p in sys.argv[3:5])
assert sorted(ra["spikes"]) == sorted(rb["spikes"]) == ["hidden", "output"], sorted(rb["spikes"])
n = 0
for pop in ra["spikes"]:
    for d in ("node_ids", "timestamps"):
        assert np.array_equal(ra["spikes"][pop][d][...], rb["spikes"][pop][d][...]), (pop, d)
    n += ra["spikes"][pop]["node_ids"].size
assert n > 0
PY
"$snnsim" inspect "$tmp/net.nir" >"$tmp/i.out" 2>&1
grep -q "NIR" "$tmp/i.out" && ok || fail "inspect net.nir does not say it is NIR: $(cat "$tmp/i.out")"

# ---- a file nir.write made runs by NIR's equations ----
"$python" "$check" foreign "$tmp/foreign.nir" || fail "nir.write failed"
"$snnsim" run "${common[@]}" --T 6 --limit 30 --model "$tmp/foreign.nir" --output "$tmp/f.h5" --record-input \
  --record ha,hb --record-v ha:0-23,hb:0-9 >/dev/null 2>"$tmp/err" || fail "run --model foreign.nir: $(cat "$tmp/err")"
"$python" "$check" oracle "$tmp/foreign.nir" "$tmp/f.h5" >"$tmp/o.out" 2>&1 && ok ||
  fail "snnsim's run of nir.write's file against NIR's equations: $(cat "$tmp/o.out")"
# Every neuron kind with per-neuron parameters (LIF with v_leak != v_reset
# and r != 1, CubaLIF, CubaLI, LI, Threshold, IF with r dt != 1) by NIR's equations.
"$python" "$check" general "$tmp/general.nir" || fail "nir.write of the general network failed"
"$snnsim" run "${common[@]}" --T 8 --limit 30 --model "$tmp/general.nir" --output "$tmp/g.h5" --record-input \
  --record lif,cuba,thr,if --record-v lif:0-31,cuba:0-23,culi:0-19,li:0-15,thr:0-11,if:0-9 >/dev/null 2>"$tmp/err" ||
  fail "run --model general.nir: $(cat "$tmp/err")"
"$python" "$check" oracle "$tmp/general.nir" "$tmp/g.h5" >"$tmp/o.out" 2>&1 && ok ||
  fail "snnsim's run of every general neuron kind against NIR's equations: $(cat "$tmp/o.out")"
expect_error "spikes of a leaky integrator" "layer 'li' is a leaky integrator (LI or CubaLI): it emits no spikes" \
  run "${common[@]}" --T 2 --limit 5 --model "$tmp/general.nir" --output "$tmp/never.h5" --record li
[[ -e "$tmp/never.h5" ]] && fail "a refused recording left a file"
# A network that ends in an LI: trained and run on the summed potential; a recording (spike counts) refuses it.
printf '%s\n' '[[nodes]]' 'name = "input"' 'kind = "Input"' 'shape = [784]' '[[nodes]]' 'name = "fc0"' 'kind = "Affine"' \
  'features = 32' '[[nodes]]' 'name = "lif"' 'kind = "LIF"' '[[nodes]]' 'name = "fc1"' 'kind = "Affine"' 'features = 10' \
  '[[nodes]]' 'name = "readout"' 'kind = "LI"' 'tau = 4.0' '[[nodes]]' 'name = "output"' 'kind = "Output"' >"$tmp/li.toml"
"$snnsim" train "${common[@]}" --model "$tmp/li.toml" --epochs 2 --limit 128 --T 4 --lr 0.005 --loss ce \
  --checkpoint "$tmp/li.h5" >"$tmp/li.out" 2>&1 || fail "train an LI read-out: $(cat "$tmp/li.out")"
"$snnsim" run "${common[@]}" --checkpoint "$tmp/li.h5" --limit 50 >"$tmp/li_run.out" 2>&1 &&
  grep -q "^layer 2 (10 neurons): a leaky integrator, passes its potential on (no spikes)" "$tmp/li_run.out" && ok ||
  fail "run of an LI read-out: $(cat "$tmp/li_run.out")"
expect_error "a recording of an LI output" "the output layer 'readout' emits its potential (LI or CubaLI), not spikes" \
  run "${common[@]}" --checkpoint "$tmp/li.h5" --limit 5 --output "$tmp/never.h5"
# Every structural node NIR defines (Conv2d, SumPool2d, Scale, Delay, AvgPool2d, Flatten, Linear).
"$python" "$check" structural "$tmp/structural.nir" || fail "nir.write of the structural network failed"
"$snnsim" run "${common[@]}" --T 8 --limit 20 --model "$tmp/structural.nir" --output "$tmp/s.h5" --record-input \
  --record l1,l2,l3 --record-v l1:0-675,l2:0-149,l3:0-9 >/dev/null 2>"$tmp/err" || fail "run --model structural.nir: $(cat "$tmp/err")"
"$python" "$check" oracle "$tmp/structural.nir" "$tmp/s.h5" >"$tmp/o.out" 2>&1 && ok ||
  fail "snnsim's run of every structural node against NIR's equations: $(cat "$tmp/o.out")"
# Exported and read back, the same network: the same recording.
"$snnsim" export "$tmp/general.nir" --nir "$tmp/general2.nir" >/dev/null 2>"$tmp/err" || fail "export general: $(cat "$tmp/err")"
"$snnsim" run "${common[@]}" --T 8 --limit 30 --model "$tmp/general2.nir" --output "$tmp/g2.h5" --record-input \
  --record lif,cuba,thr,if --record-v lif:0-31,cuba:0-23,culi:0-19,li:0-15,thr:0-11,if:0-9 >/dev/null 2>"$tmp/err" ||
  fail "run --model general2.nir: $(cat "$tmp/err")"
"$python" - "$tmp/g.h5" "$tmp/g2.h5" <<'PY' && ok || fail "the re-exported general network records otherwise"
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
for pop in a["spikes"]:
    for d in ("node_ids", "timestamps"):
        assert np.array_equal(a["spikes"][pop][d][...], b["spikes"][pop][d][...]), (pop, d)
for pop in a["report"]:
    assert np.array_equal(a["report"][pop]["data"][...], b["report"][pop]["data"][...]), pop
PY
# Training starts from the file's weights.
"$snnsim" train "${common[@]}" --epochs 1 --T 4 --limit 64 --model "$tmp/foreign.nir" --checkpoint "$tmp/ft.h5" \
  >"$tmp/t3.out" 2>&1 && grep -q "^training 784-24-10" "$tmp/t3.out" && ok || fail "train --model foreign.nir: $(cat "$tmp/t3.out")"

# ---- a recurrent graph: resumed on another partition = uninterrupted ----
rec_model="$(dirname "${BASH_SOURCE[0]}")/../../examples/graphs/recurrent.toml"
rtrain=(train "${common[@]}" --model "$rec_model" --limit 128 --T 4)
"$snnsim" "${rtrain[@]}" --epochs 2 --checkpoint "$tmp/rfull.h5" >/dev/null 2>"$tmp/err" || fail "train recurrent: $(cat "$tmp/err")"
"$snnsim" "${rtrain[@]}" --epochs 1 --checkpoint "$tmp/rhalf.h5" >/dev/null 2>"$tmp/err" || fail "train recurrent: $(cat "$tmp/err")"
"$snnsim" train --resume "$tmp/rhalf.h5" --epochs 2 "${common[@]}" --devices cpu,cpu --steps-per-tick 3 \
  --checkpoint "$tmp/rres.h5" >/dev/null 2>"$tmp/err" || fail "train --resume recurrent: $(cat "$tmp/err")"
"$python" - "$tmp/rfull.h5" "$tmp/rres.h5" <<'PY' && ok || fail "a resumed recurrent graph differs from the uninterrupted one"
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
assert sorted(a["parameters"]) == ["fc0.bias", "fc0.weight", "fc1.bias", "fc1.weight", "rec.weight"], sorted(a["parameters"])
for k in a["parameters"]:
    assert np.array_equal(a["parameters"][k][...], b["parameters"][k][...]), k
PY
# Its recording names the populations by node name; "output" is the last layer.
"$snnsim" run "${common[@]}" --checkpoint "$tmp/rfull.h5" --limit 10 --output "$tmp/rrec.h5" --record lif0,output \
  >/dev/null 2>"$tmp/err" || fail "run recurrent: $(cat "$tmp/err")"
"$python" -c "import h5py,sys; assert sorted(h5py.File(sys.argv[1])['spikes']) == ['lif0', 'lif1']" "$tmp/rrec.h5" && ok ||
  fail "the recurrent recording's populations are not lif0, lif1"
# --balance auto measures a graph's layers and splits them; the results stay the one-stage ones.
"$snnsim" run "${common[@]}" --checkpoint "$tmp/rfull.h5" --limit 20 --summary "$tmp/s1.json" >/dev/null 2>&1
"$snnsim" run "${common[@]}" --checkpoint "$tmp/rfull.h5" --limit 20 --devices cpu,cpu --balance auto \
  --summary "$tmp/s2.json" >"$tmp/auto.out" 2>&1 || fail "run --balance auto on a graph: $(cat "$tmp/auto.out")"
grep -q "^balance auto: 1,1 layers per stage (measured ms per layer: " "$tmp/auto.out" && ok ||
  fail "balance auto on a graph said: $(head -2 "$tmp/auto.out")"
"$python" - "$tmp/s1.json" "$tmp/s2.json" <<'PY' && ok || fail "2 auto-balanced stages give other results than 1"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert [a[k] for k in ("accuracy", "accuracy_by_step", "firing_rate")] == [b[k] for k in ("accuracy", "accuracy_by_step", "firing_rate")]
assert b["execution"]["stage_layers"] == [1, 1], b["execution"]
PY
expect_error "neuron overrides on a graph network" "a graph network's neurons are set on its nodes" \
  run "${common[@]}" --checkpoint "$tmp/rfull.h5" --tau 3
expect_error "--nir-dt for a TOML model" "--nir-dt applies to .nir files" \
  train "${common[@]}" --model "$rec_model" --nir-dt 0.001 --epochs 1

# ---- BatchNorm and Dropout (examples/graphs/conv.toml) ----
conv_model="$(dirname "${BASH_SOURCE[0]}")/../../examples/graphs/conv.toml"
ctrain=(train "${common[@]}" --model "$conv_model" --limit 96 --T 3 --lr 0.01)
"$snnsim" "${ctrain[@]}" --epochs 2 --checkpoint "$tmp/cfull.h5" >/dev/null 2>"$tmp/err" || fail "train conv: $(cat "$tmp/err")"
"$snnsim" "${ctrain[@]}" --epochs 1 --checkpoint "$tmp/chalf.h5" >/dev/null 2>"$tmp/err" || fail "train conv: $(cat "$tmp/err")"
"$snnsim" train --resume "$tmp/chalf.h5" --epochs 2 "${common[@]}" --devices cpu,cpu --steps-per-tick 2 \
  --checkpoint "$tmp/cres.h5" >/dev/null 2>"$tmp/err" || fail "train --resume conv: $(cat "$tmp/err")"
"$python" - "$tmp/cfull.h5" "$tmp/cres.h5" <<'PY' && ok || fail "a resumed BatchNorm/Dropout network differs from the uninterrupted one"
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
assert sorted(a["buffers"]) == ["bn1.running_mean", "bn1.running_var", "bn2.running_mean", "bn2.running_var"], sorted(a["buffers"])
assert "bn1.weight" in a["parameters"] and "bn2.bias" in a["parameters"], sorted(a["parameters"])
assert np.abs(a["buffers"]["bn1.running_mean"][...]).sum() > 0, "the running statistics never moved"
for g in ("parameters", "buffers"):
    for k in a[g]:
        assert np.array_equal(a[g][k][...], b[g][k][...]), (g, k)
PY
# run folds the BatchNorms into their convolutions, as export does: the same spikes.
"$snnsim" run "${common[@]}" --checkpoint "$tmp/cfull.h5" --limit 40 --summary "$tmp/c1.json" >/dev/null 2>"$tmp/err" ||
  fail "run conv: $(cat "$tmp/err")"
"$snnsim" export "$tmp/cfull.h5" --nir "$tmp/conv.nir" >"$tmp/e.out" 2>&1 || fail "export conv: $(cat "$tmp/e.out")"
# (h5py: its MaxPool2d nodes are snnsim's extension, which the nir package does not read.)
"$python" -c "import h5py,sys; n = sorted(h5py.File(sys.argv[1])['node/nodes']); assert not [x for x in n if x.startswith(('bn', 'drop'))], n" \
  "$tmp/conv.nir" && ok || fail "the NIR export keeps BatchNorm or Dropout nodes"
"$snnsim" run "${common[@]}" --model "$tmp/conv.nir" --T 3 --limit 40 --summary "$tmp/c2.json" >/dev/null 2>"$tmp/err" ||
  fail "run conv.nir: $(cat "$tmp/err")"
"$python" - "$tmp/c1.json" "$tmp/c2.json" <<'PY' && ok || fail "the folded export runs otherwise than its checkpoint"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for k in ("accuracy", "accuracy_by_step", "firing_rate"):
    assert a[k] == b[k], (k, a[k], b[k])
assert a["firing_rate"][0] > 0
PY
printf '%s\n' '[[nodes]]' 'name = "input"' 'kind = "Input"' 'shape = [1, 28, 28]' '[[nodes]]' 'name = "pool"' \
  'kind = "AvgPool2d"' 'kernel_size = 4' '[[nodes]]' 'name = "bn"' 'kind = "BatchNorm"' '[[nodes]]' 'name = "flat"' \
  'kind = "Flatten"' '[[nodes]]' 'name = "fc"' 'kind = "Affine"' 'features = 10' '[[nodes]]' 'name = "lif"' 'kind = "LIF"' \
  '[[nodes]]' 'name = "output"' 'kind = "Output"' >"$tmp/poolbn.toml"
"$snnsim" train "${common[@]}" --model "$tmp/poolbn.toml" --epochs 1 --limit 16 --T 2 --checkpoint "$tmp/poolbn.h5" \
  >/dev/null 2>"$tmp/err" || fail "train pool-bn: $(cat "$tmp/err")"
expect_error "export of a BatchNorm it cannot fold" "node 'bn' (BatchNorm) follows 'pool' (AvgPool2d)" \
  export "$tmp/poolbn.h5" --nir "$tmp/poolbn.nir"

# ---- an Input node with encoding = "direct": the pixel values at every step ----
printf '%s\n' '[[nodes]]' 'name = "input"' 'kind = "Input"' 'shape = [784]' 'encoding = "direct"' '[[nodes]]' \
  'name = "fc"' 'kind = "Affine"' 'features = 10' '[[nodes]]' 'name = "lif"' 'kind = "LIF"' '[[nodes]]' \
  'name = "output"' 'kind = "Output"' >"$tmp/direct.toml"
"$snnsim" train "${common[@]}" --model "$tmp/direct.toml" --epochs 1 --limit 64 --T 3 --lr 0.05 --checkpoint "$tmp/direct.h5" \
  >/dev/null 2>"$tmp/err" || fail "train direct: $(cat "$tmp/err")"
# No encoder draws: the run's seed changes nothing.
for s in 1 2; do
  "$snnsim" run "${common[@]}" --checkpoint "$tmp/direct.h5" --limit 40 --seed $s --summary "$tmp/d$s.json" \
    >/dev/null 2>"$tmp/err" || fail "run direct: $(cat "$tmp/err")"
done
"$snnsim" export "$tmp/direct.h5" --nir "$tmp/direct.nir" >/dev/null 2>"$tmp/err" || fail "export direct: $(cat "$tmp/err")"
"$snnsim" run "${common[@]}" --model "$tmp/direct.nir" --T 3 --limit 40 --summary "$tmp/d3.json" >/dev/null 2>"$tmp/err" ||
  fail "run direct.nir: $(cat "$tmp/err")"
"$python" - "$tmp/d1.json" "$tmp/d2.json" "$tmp/d3.json" "$tmp/direct.nir" <<'PY' && ok ||
import json, sys, h5py
a, b, c = (json.load(open(p)) for p in sys.argv[1:4])
for k in ("accuracy", "accuracy_by_step", "firing_rate"):
    assert a[k] == b[k] == c[k], (k, a[k], b[k], c[k])
assert a["firing_rate"][0] > 0
assert h5py.File(sys.argv[4])["node/nodes/input/metadata/snnsim_encoding"][()] == b"direct"
PY
  fail "a direct-input network depends on the seed, or its NIR export runs otherwise"
expect_error "--record-input of a direct input" "takes the images directly (encoding = \"direct\"): it has no input spikes" \
  run "${common[@]}" --checkpoint "$tmp/direct.h5" --limit 5 --output "$tmp/never-rec.h5" --record-input
[[ -e "$tmp/never-rec.h5" ]] && fail "a recording was written for a refused --record-input"

# ---- bad NIR files ----
"$python" "$check" bad "$tmp" || fail "writing the bad files failed"
bad_run=(run "${common[@]}" --limit 5)
expect_error "unsupported node" "node/nodes/i has type 'I', which snnsim does not read" "${bad_run[@]}" --model "$tmp/unsupported.nir"
expect_error "nested graph" "nested graphs" "${bad_run[@]}" --model "$tmp/nested.nir"
expect_error "dangling edge" "edge 'h' -> 'ghost' names no node 'ghost'" "${bad_run[@]}" --model "$tmp/dangling.nir"
expect_error "other version" "/version is '2.0.0'; snnsim reads NIR 1.x" "${bad_run[@]}" --model "$tmp/version.nir"
expect_error "bias shape" "node 'a': bias has shape \[5\] but \[4\] is needed" "${bad_run[@]}" --model "$tmp/bias.nir"
expect_error "shape along an edge" "node 'h' (LIF) has shape \[3\] but its input is \[4\] (edge 'a' -> 'h')" \
  "${bad_run[@]}" --model "$tmp/mismatch.nir"
expect_error "a time constant of 0" "node 'h': tau_syn must be > 0 steps" "${bad_run[@]}" --model "$tmp/tau0.nir"
expect_error "cycle without delay" "has no Delay node" "${bad_run[@]}" --model "$tmp/cycle.nir"
expect_error "conv weight for other channels" \
  "node 'conv': weight \[4, 3, 3, 3\] with groups 1 takes 3 channels but its input is \[1, 28, 28\]" \
  "${bad_run[@]}" --model "$tmp/channels.nir"
"$snnsim" run "${common[@]}" --limit 5 --model "$tmp/delayed.nir" --T 12 >"$tmp/delayed.out" 2>&1 && ok ||
  fail "a NIR Delay of 10 steps with T = 12: $(cat "$tmp/delayed.out")"
expect_error "a NIR Delay as long as T" "the graph's Output is 10 steps behind its Input (its shortest path passes the Delay 'd' of 10), so T = 10 steps never reach it" \
  run "${common[@]}" --limit 5 --model "$tmp/delayed.nir" --T 10
expect_error "conv input_shape of another image" \
  "node 'conv' (Conv2d): the file states its input as \[10, 10\] (input_shape) but its input is \[1, 28, 28\]" \
  "${bad_run[@]}" --model "$tmp/input_shape.nir"
expect_error "export of a NIR file to itself" "is the file given as the input" export "$tmp/good.nir" --nir "$tmp/good.nir" --overwrite

# ---- bad TOML graphs ----
toml_error() {  # NAME EXPECTED TOML_TEXT
  printf '%s\n' "$3" >"$tmp/bad.toml"
  expect_error "$1" "$2" train "${common[@]}" --epochs 1 --limit 8 --model "$tmp/bad.toml" --checkpoint "$tmp/never.h5"
  [[ -e "$tmp/never.h5" ]] && fail "$1: a checkpoint was written from a bad graph"
}
head='[[nodes]]
name = "input"
kind = "Input"
shape = [784]'
toml_error "unknown kind" "node 'c': unknown kind 'Conv3d'" "$head
[[nodes]]
name = \"c\"
kind = \"Conv3d\""
toml_error "unknown key" "a LIF node has no key 'tua'" "$head
[[nodes]]
name = \"fc\"
kind = \"Affine\"
features = 10
[[nodes]]
name = \"l\"
kind = \"LIF\"
tua = 2.0
[[nodes]]
name = \"o\"
kind = \"Output\""
toml_error "TOML syntax" "(TOML), line 1: Error while parsing table header" '[[nodes]
name = 3'
toml_error "dangling source" "edge 'nope' -> 'fc' names no node 'nope'" "$head
[[nodes]]
name = \"fc\"
kind = \"Affine\"
features = 10
from = \"nope\"
[[nodes]]
name = \"o\"
kind = \"Output\""
toml_error "cycle" "the cycle fc -> l -> fc has no Delay node" "$head
[[nodes]]
name = \"fc\"
kind = \"Affine\"
features = 10
from = [\"input\", \"l\"]
[[nodes]]
name = \"l\"
kind = \"LIF\"
[[nodes]]
name = \"o\"
kind = \"Output\""
toml_error "groups that do not divide the channels" "node 'conv': groups 3 do not divide the 2 input channels" '[[nodes]]
name = "input"
kind = "Input"
shape = [2, 28, 28]
[[nodes]]
name = "conv"
kind = "Conv2d"
features = 6
kernel_size = 3
groups = 3
[[nodes]]
name = "l"
kind = "LIF"
[[nodes]]
name = "flat"
kind = "Flatten"
[[nodes]]
name = "fc"
kind = "Affine"
features = 10
[[nodes]]
name = "l2"
kind = "LIF"
[[nodes]]
name = "o"
kind = "Output"'
toml_error "an unknown encoding" "node 'input' (Input): encoding 'latency' is neither poisson nor direct" \
  "$(sed 's/"direct"/"latency"/' "$tmp/direct.toml")"
expect_error "--layers with --model" "--layers cannot be combined with --model" \
  train "${common[@]}" --model "$tmp/net.toml" --layers 784-10
expect_error "--model that is no file" "--model: expected lif, if, plif or a readable graph file" \
  train "${common[@]}" --model "$tmp/missing.toml"
expect_error "run a TOML graph (no weights)" "a TOML or JSON graph has no weights" run "${common[@]}" --model "$tmp/net.toml"

finish
