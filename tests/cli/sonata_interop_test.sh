#!/usr/bin/env bash
# libsonata, the Blue Brain SONATA reader, reads what `snnsim run --output`
# records: the same spikes and potentials as h5py (tests/python/check_sonata.py).
#   sonata_interop_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
checker="$(cd "$(dirname "${BASH_SOURCE[0]}")/../python" && pwd)/check_sonata.py"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

die() { echo "FAIL: $*"; exit 1; }

"$python" -c "import libsonata" 2>"$tmp/err" ||
  die "libsonata is not installed for $python (pip install -r requirements.txt): $(tail -1 "$tmp/err")"

# A tiny network; threshold 0.5 and 3 epochs so that both layers spike.
"$snnsim" train --data-dir "$fixture" --layers 784-32-10 --T 4 --epochs 3 --v-threshold 0.5 --threads 1 \
  --checkpoint "$tmp/ck.h5" >"$tmp/train.out" 2>&1 || die "train failed: $(cat "$tmp/train.out")"
"$snnsim" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --limit 50 --threads 1 --output "$tmp/run.h5" \
  --record hidden,output --record-input --record-v hidden:0,5,17 >"$tmp/run.out" 2>&1 || die "recording run failed: $(cat "$tmp/run.out")"
[[ -f "$tmp/run.h5" ]] || die "no recording written"

# check FILE WHAT: libsonata and h5py read FILE alike.
check() {
  "$python" "$checker" "$1" >"$tmp/check.out" 2>"$tmp/check.err" ||
    die "$2: $(grep -E '^[A-Za-z]*(Error|Exception)' "$tmp/check.err" | tail -1)"
  grep -q "^libsonata reads [1-9][0-9]* spikes in 3 populations and 1 reports$" "$tmp/check.out" ||
    die "$2: unexpected check output: $(cat "$tmp/check.out")"
}
# The file as written: libsonata's own HDF5 (its PyPI wheel has no zlib)
# must decode every dataset it reads.
check "$tmp/run.h5" "libsonata cannot read the recording as written"
echo "PASS: $(cat "$tmp/check.out")"
