#!/usr/bin/env bash
# Outputs never replace inputs: every command refuses an output (--summary,
# --output, --checkpoint, --record, --json, --nir) that names one of its
# input files (checkpoint, model, recording, CSV, --config) or another of its
# outputs, by any spelling (./x, an absolute path, a linked folder), with one
# line and exit 2, before any work and leaving the file as it was. An output
# in a folder that does not exist is refused before the work too (it used to
# fail after a whole epoch or split). A continued training's checkpoint may
# replace its --resume file: that is how it continues.
#   outputs_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
examples="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../examples" && pwd)"

cd "$tmp" || exit 1
tiny_checkpoint_and_recording "$fixture"
ck_sha="$(sha ck.h5)"
rec_sha="$(sha rec.h5)"

# run: the summary or the recording onto the checkpoint, in three spellings.
expect_error "run summary is the checkpoint" "--summary 'ck.h5' is the file given as --checkpoint" \
  run --checkpoint ck.h5 --data-dir "$fixture" --limit 4 --summary ck.h5
expect_error "run summary is ./checkpoint" "--summary '$tmp/ck.h5' is the file given as --checkpoint" \
  run --checkpoint ./ck.h5 --data-dir "$fixture" --limit 4 --summary "$tmp/ck.h5"
ln -s . here
expect_error "run output through a linked folder" "--output 'here/ck.h5' is the file given as --checkpoint" \
  run --checkpoint ck.h5 --data-dir "$fixture" --limit 4 --output here/ck.h5 --overwrite
expect_error "run outputs apart through a linked folder" "--summary 'here/s.json' is the file given as --output" \
  run --checkpoint ck.h5 --data-dir "$fixture" --limit 4 --output s.json --summary here/s.json
expect_error "run summary is the recording" "--summary 'r2.h5' is the file given as --output" \
  run --checkpoint ck.h5 --data-dir "$fixture" --limit 4 --output r2.h5 --summary r2.h5
[[ ! -e r2.h5 ]] && ok || fail "a refused run left r2.h5"
printf '[run]\nlimit = 4\n' >c.toml
expect_error "run summary is the config" "--summary 'c.toml' is the file given as --config" \
  --config c.toml run --checkpoint ck.h5 --data-dir "$fixture" --summary c.toml
grep -q "limit = 4" c.toml && ok || fail "the config file was changed"

# A folder that is not there, or not a folder: refused before the run prints
# anything (expect_error also checks that stdout is empty).
expect_error "run summary in a missing folder" "cannot write 'nodir/x.json': its folder 'nodir' does not exist" \
  run --checkpoint ck.h5 --data-dir "$fixture" --limit 4 --summary nodir/x.json
expect_error "run summary under a file" "cannot write 'ck.h5/x.json': 'ck.h5' is not a folder" \
  run --checkpoint ck.h5 --data-dir "$fixture" --limit 4 --summary ck.h5/x.json
expect_error "train checkpoint in a missing folder" "cannot write 'nodir/c.h5': its folder 'nodir' does not exist" \
  train --data-dir "$fixture" --layers 784-16-10 --T 2 --epochs 1 --limit 64 --checkpoint nodir/c.h5

# train: the checkpoint onto the graph model file; resuming into its own file is fine.
cp "$examples/graphs/mlp.toml" mlp.toml
mlp_sha="$(sha mlp.toml)"
expect_error "train checkpoint is the model" "--checkpoint 'mlp.toml' is the file given as --model" \
  train --data-dir "$fixture" --model mlp.toml --epochs 1 --limit 64 --checkpoint mlp.toml --overwrite
[[ "$(sha mlp.toml)" == "$mlp_sha" ]] && ok || fail "the model file was changed"
cp ck.h5 more.h5
"$snnsim" train --resume more.h5 --data-dir "$fixture" --epochs 2 --threads 1 >resume.out 2>&1 &&
  grep -q "^epoch 2/2" resume.out && ok || fail "resuming into the --resume file failed: $(cat resume.out)"

# simulate, neuron, export, analyze.
cp "$examples/brunel/brunel_small.toml" bs.toml
bs_sha="$(sha bs.toml)"
expect_error "simulate summary is the model" "--summary 'bs.toml' is the file given as the model" \
  simulate bs.toml --duration 10 --summary bs.toml
expect_error "simulate record is the summary" "--summary 's.h5' is the file given as --record" \
  simulate bs.toml --duration 10 --record s.h5 --summary s.h5
[[ "$(sha bs.toml)" == "$bs_sha" ]] && ok || fail "the model file was changed"
cp "$examples/neuron/input_currents.csv" in.csv
in_sha="$(sha in.csv)"
expect_error "neuron output is the input" "--output 'in.csv' is the file given as --input" \
  neuron --input in.csv --output in.csv
[[ "$(sha in.csv)" == "$in_sha" ]] && ok || fail "the input CSV was changed"
expect_error "export onto its checkpoint" "--nir 'ck.h5' is the file given as the input" \
  export ck.h5 --nir ck.h5 --overwrite
expect_error "analyze json onto the recording" "--json 'rec.h5' is the file given as the input" \
  analyze rec.h5 --json rec.h5
expect_error "analyze plots in a missing folder" "cannot write 'nodir/sub': its folder 'nodir' does not exist" \
  analyze rec.h5 --plots nodir/sub/
expect_error "analyze json in a missing folder" "cannot write 'nodir/a.json': its folder 'nodir' does not exist" \
  analyze rec.h5 --json nodir/a.json

[[ "$(sha ck.h5)" == "$ck_sha" ]] && ok || fail "the checkpoint was changed"
[[ "$(sha rec.h5)" == "$rec_sha" ]] && ok || fail "the recording was changed"
finish
