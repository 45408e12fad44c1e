#!/usr/bin/env bash
# tools/export_nwb.py converts a recording of `snnsim run --output` to NWB 2.x:
# pynwb's validator finds no errors, and pynwb reads back the recording's spikes
# per neuron, samples as trials and potentials (tests/python/check_nwb.py);
# bad inputs get one-line errors with exit code 2.
#   nwb_export_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
exporter="$root/tools/export_nwb.py"
checker="$root/tests/python/check_nwb.py"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

die() { echo "FAIL: $*"; exit 1; }

"$python" -c "import pynwb" 2>"$tmp/err" ||
  die "pynwb is not installed for $python (pip install -r requirements.txt): $(tail -1 "$tmp/err")"

# A tiny network; threshold 0.5 so that the hidden layer spikes.
"$snnsim" train --data-dir "$fixture" --layers 784-32-10 --T 4 --epochs 1 --v-threshold 0.5 --threads 1 \
  --checkpoint "$tmp/ck.h5" >"$tmp/train.out" 2>&1 || die "train failed: $(cat "$tmp/train.out")"
"$snnsim" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --limit 50 --output "$tmp/run.h5" \
  --record hidden,output --record-v hidden:0,5 --threads 1 >"$tmp/run.out" 2>&1 ||
  die "recording run failed: $(cat "$tmp/run.out")"
[[ -f "$tmp/run.h5" ]] || die "no recording written"

# export ARGS...: the exporter, stdout in $tmp/out, stderr in $tmp/err.
export_nwb() { "$python" "$exporter" "$@" >"$tmp/out" 2>"$tmp/err"; }

export_nwb "$tmp/run.h5" "$tmp/run.nwb" || die "export failed (exit $?): $(cat "$tmp/err")"
grep -q "^$tmp/run.nwb: 42 units (hidden, output), [1-9][0-9]* spikes, 50 trials, 1 membrane-potential series$" \
  "$tmp/out" || die "unexpected export output: $(cat "$tmp/out") $(cat "$tmp/err")"
[[ ! -s "$tmp/err" ]] || die "export wrote to stderr: $(cat "$tmp/err")"
ok

# pynwb's own validator (what the pynwb-validate command runs) on the file.
"$python" -c 'import sys; from pynwb.validation_cli import validation_cli; sys.argv[0] = "pynwb-validate"; validation_cli()' \
  "$tmp/run.nwb" >"$tmp/val.out" 2>"$tmp/val.err"
rc=$?
if [[ $rc -ne 0 ]] || ! grep -q "no errors found" "$tmp/val.out"; then
  fail "pynwb-validate (exit $rc): $(cat "$tmp/val.out" "$tmp/val.err")"
else ok; fi

# The contents, read back with pynwb, against the recording read with h5py.
if "$python" "$checker" "$tmp/run.h5" "$tmp/run.nwb" >"$tmp/check.out" 2>"$tmp/check.err"; then
  echo "$(cat "$tmp/check.out")"
  ok
else
  fail "check_nwb.py: $(grep -E '^[A-Za-z]*(Error|Exception)' "$tmp/check.err" | tail -1)"
fi

# An existing output is kept unless --overwrite.
cp "$tmp/run.nwb" "$tmp/before.nwb"
# expect_export_error NAME EXPECTED_SUBSTRING ARGS...: exit code 2, one stderr
# line "export_nwb: error: ..." naming the problem, nothing on stdout.
expect_export_error() {
  local name="$1" want="$2"
  shift 2
  export_nwb "$@"
  local rc=$?
  if [[ $rc -ne 2 ]]; then fail "$name: exit code $rc, expected 2 (stderr: $(cat "$tmp/err"))"; return; fi
  if [[ $(wc -l <"$tmp/err") -ne 1 ]]; then fail "$name: stderr is not one line: $(cat "$tmp/err")"; return; fi
  if ! grep -q "^export_nwb: error: .*$want" "$tmp/err"; then fail "$name: stderr lacks '$want': $(cat "$tmp/err")"; return; fi
  if [[ -s "$tmp/out" ]]; then fail "$name: wrote to stdout on error: $(cat "$tmp/out")"; return; fi
  ok
}
expect_export_error "existing output" "exists; pass --overwrite" "$tmp/run.h5" "$tmp/run.nwb"
cmp -s "$tmp/run.nwb" "$tmp/before.nwb" || fail "existing output: changed without --overwrite"
if export_nwb "$tmp/run.h5" "$tmp/run.nwb" --overwrite; then ok; else fail "--overwrite: $(cat "$tmp/err")"; fi

# Unfinished recordings: only X.h5.partial exists (a run in progress, killed
# or interrupted), or a file whose status is still running.
cp "$tmp/run.h5" "$tmp/X.h5.partial"
expect_export_error "unfinished (.partial)" "snnsim recover .*X.h5" "$tmp/X.h5" "$tmp/err1.nwb"
cp "$tmp/run.h5" "$tmp/running.h5"
"$python" -c 'import sys, h5py; f = h5py.File(sys.argv[1], "r+"); f["meta/status"][()] = b"running"; f.close()' \
  "$tmp/running.h5" || die "cannot edit a copy of the recording"
expect_export_error "unfinished (status running)" "snnsim recover" "$tmp/running.h5" "$tmp/err2.nwb"
expect_export_error "not a recording" "not an snnsim recording" "$tmp/ck.h5" "$tmp/err3.nwb"
expect_export_error "no such file" "no such file" "$tmp/none.h5" "$tmp/err4.nwb"
for i in 1 2 3 4; do [[ ! -e "$tmp/err$i.nwb" ]] || fail "error case $i wrote $tmp/err$i.nwb"; done
ls "$tmp" | grep -q "\.tmp-" && fail "a temporary output was left behind: $(ls "$tmp")"

finish
