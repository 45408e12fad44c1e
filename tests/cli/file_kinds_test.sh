#!/usr/bin/env bash
# A file given in the wrong place is told by its content: one line saying
# what it is (a checkpoint, a recording, a NIR graph without /version, a
# truncated HDF5 file, a population model, a network graph, a folder) and
# what takes it, instead of a parser's complaint about its first bytes
# ("invalid utf-8", "no attribute 'config'", "unknown key 'nodes'"). Also
# flags of the other kind of input (analyze --x on a recording) and values
# that name what is wrong (--record-v without ids, a device that is not
# there, a data folder that is a file).
#   file_kinds_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
examples="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../examples" && pwd)"

cd "$tmp" || exit 1
tiny_checkpoint_and_recording "$fixture"
"$snnsim" export ck.h5 --nir g.nir >export.out 2>&1 || fail "export failed: $(cat export.out)"
head -c 3000 g.nir >cut.nir
cp g.nir nover.nir
"$python" -c "import h5py, sys; f = h5py.File('nover.nir', 'r+'); del f['version']; f.close()" ||
  fail "h5py could not drop /version"

# A checkpoint where a text file belongs.
expect_error "checkpoint as a graph model" \
  "model 'ck.h5' is a checkpoint of snnsim train, not a network graph: simulate it with snnsim run --checkpoint" \
  train --data-dir "$fixture" --model ck.h5 --limit 4 --checkpoint never.h5
expect_error "checkpoint as a population model" "model 'ck.h5' is an HDF5 file (a checkpoint, a recording or a NIR graph)" \
  simulate ck.h5
expect_error "checkpoint as --config" "config 'ck.h5' is an HDF5 file" --config ck.h5 run
# A recording where a checkpoint belongs.
expect_error "recording as --checkpoint" "checkpoint 'rec.h5' is a recording of snnsim run or simulate, not a checkpoint" \
  export rec.h5 --nir x.nir
expect_error "recording to resume training" "'rec.h5' is a recording of snnsim run or simulate" \
  train --data-dir "$fixture" --resume rec.h5
# NIR files cut short or without /version.
expect_error "truncated NIR as a model" "model 'cut.nir' is an HDF5 file that HDF5 cannot open (cut short or damaged" \
  train --data-dir "$fixture" --model cut.nir --limit 4 --checkpoint never.h5
expect_error "truncated NIR to run" "'$tmp/cut.nir' is an HDF5 file that HDF5 cannot open" \
  run --model cut.nir --data-dir "$fixture" --limit 4
expect_error "NIR without version" "model 'nover.nir' is a NIR graph without /version (snnsim reads NIR 1.x" \
  train --data-dir "$fixture" --model nover.nir --limit 4 --checkpoint never.h5
[[ ! -e never.h5 ]] && ok || fail "a refused training wrote a checkpoint"

# Text files of the other kind.
expect_error "graph as a population model" "is a network graph (nodes and edges), not a population model" \
  simulate "$examples/graphs/mlp.toml"
expect_error "population model as a sweep file" \
  "line 32: \[\[population\]\] is an array of tables, which options and sweep files do not have: this is a population model" \
  sweep "$examples/brunel/brunel_small.toml"
expect_error "checkpoint as a sweep file" "sweep file 'ck.h5': the file is an HDF5 file" sweep ck.h5
expect_error "graph as --config" "\[\[nodes\]\] is an array of tables.*this is a network graph" \
  --config "$examples/graphs/mlp.toml" run
printf '[sweep]\nout = "sw"\n[base]\ncheckpoint = "rec.h5"\nlimit = 4\n[grid]\ntau = [1.5, 2.0]\n' >bad_sweep.toml
expect_error "sweep of a recording" "\[base\] checkpoint: checkpoint 'rec.h5' is a recording" sweep bad_sweep.toml
[[ ! -e sw ]] && ok || fail "a refused sweep made its folder"

# analyze: a checkpoint, a folder, flags of the other kind of input.
expect_error "analyze a checkpoint" "'ck.h5' is a checkpoint of snnsim train, not a recording: snnsim run --checkpoint ck.h5" \
  analyze ck.h5
mkdir -p sweep_out && echo '{}' >sweep_out/manifest.json
expect_error "analyze a folder" "'sweep_out' is a folder: analyze takes a recording (run --output) or a sweep's manifest.json (here: sweep_out/manifest.json)" \
  analyze sweep_out
expect_error "analyze a recording with --x" "--x is for sweep manifests" analyze rec.h5 --x tau
expect_error "analyze a recording with --by" "--by is for sweep manifests" analyze rec.h5 --by T
printf '[sweep]\nout = "sw2"\n[base]\ncheckpoint = "ck.h5"\nlimit = 4\ndata-dir = "%s"\n[grid]\ntau = [1.5, 2.0]\n' \
  "$fixture" >good_sweep.toml
"$snnsim" sweep good_sweep.toml >sweep.out 2>&1 || fail "sweep failed: $(cat sweep.out)"
expect_error "analyze --by equal to --x" "--by 'tau' is also --x" analyze sw2/manifest.json --x tau --by tau
expect_error "analyze a manifest with --raster" "--raster is for recordings" analyze sw2/manifest.json --raster 0-2

# Values that say what is wrong.
expect_error "record-v without ids" "--record-v: 'hidden' names no neurons: potentials are recorded for the neurons listed, e.g. hidden:0,5,17" \
  run --checkpoint ck.h5 --data-dir "$fixture" --limit 4 --output rv.h5 --record-v hidden
expect_error "a device that is not there" "device 'cuda:99' \\(is not available: this machine has\\|needs CUDA\\)" \
  run --checkpoint ck.h5 --data-dir "$fixture" --limit 4 --devices cuda:99
# A checkpoint trained on a GPU is still inspected and run elsewhere.
cp ck.h5 gpu.h5
"$python" - <<'PY' || fail "h5py could not set the checkpoint's devices"
import h5py, json, numpy
with h5py.File("gpu.h5", "r+") as f:
    c = json.loads(f.attrs["config"])
    c["devices"] = ["cuda:0"]
    f.attrs["config"] = numpy.bytes_(json.dumps(c))  # fixed-length, as snnsim writes it
PY
"$snnsim" inspect gpu.h5 >inspect_gpu.out 2>&1 && ok || fail "inspect of a GPU checkpoint: $(cat inspect_gpu.out)"
"$snnsim" run --checkpoint gpu.h5 --devices cpu --data-dir "$fixture" --limit 4 >run_gpu.out 2>&1 && ok ||
  fail "run --devices cpu of a GPU checkpoint: $(cat run_gpu.out)"
expect_error "data folder that is a file" "data directory '$tmp/ck.h5' is a file, not a folder of IDX files" \
  run --checkpoint ck.h5 --data-dir ck.h5 --limit 4
expect_error "fewer outputs than classes" \
  "the network's output layer has 7 neurons, one per class, but the train labels in '$fixture' go up to 9 (sample [0-9]* is labelled [7-9]): give it at least 10 output neurons, or check the labels file" \
  train --data-dir "$fixture" --layers 784-16-7 --epochs 1 --limit 8 --checkpoint never.h5
expect_error "balance for one device" "balance has 2 entries but there is 1 device" \
  run --checkpoint ck.h5 --data-dir "$fixture" --limit 4 --balance 1,1
finish
