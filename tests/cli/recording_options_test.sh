#!/usr/bin/env bash
# Recording options as the README advertises them: --compress really
# deflates the spike and potential datasets, makes the file smaller and
# changes no value; the size estimate printed before a run is near the
# file's real size; --max-record-bytes refuses a run whose estimate exceeds
# it and lets one below it run.
#   recording_options_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
compare="$(cd "$(dirname "${BASH_SOURCE[0]}")/../python" && pwd)/compare_recordings.py"

"$snnsim" train --data-dir "$fixture" --layers 784-48-10 --T 4 --epochs 1 --v-threshold 0.5 --threads 1 \
  --checkpoint "$tmp/ck.h5" >"$tmp/train.out" 2>&1 || fail "train failed: $(cat "$tmp/train.out")"
# 1,000 of the embedded MNIST's training digits, every kind of dataset:
# input, hidden and output spikes and 8 potentials (a few MB).
run=(run --checkpoint "$tmp/ck.h5" --split train --limit 1000 --T 16 --threads 1 --batch-size 50
  --record hidden,output --record-v hidden:0-7 --record-input)
"$snnsim" "${run[@]}" --output "$tmp/plain.h5" >"$tmp/plain.out" 2>&1 || fail "run failed: $(cat "$tmp/plain.out")"
"$snnsim" "${run[@]}" --output "$tmp/z.h5" --compress >"$tmp/z.out" 2>&1 || fail "--compress run failed: $(cat "$tmp/z.out")"

# --compress: spikes and potentials deflated (without it: not, so that
# libsonata's zlib-less wheels read them), every value the same, and the
# file at most half the plain one (3.7 times smaller here: spike times
# deflate well).
"$python" - "$tmp/plain.h5" "$tmp/z.h5" <<'PY' && ok || fail "--compress did not deflate the spike and potential datasets"
import sys, h5py
with h5py.File(sys.argv[1], "r") as plain, h5py.File(sys.argv[2], "r") as z:
    names = [f"spikes/{p}/{d}" for p in ("input", "hidden", "output") for d in ("timestamps", "node_ids")]
    names.append("report/hidden/data")
    for name in names:
        assert z[name].size > 0 and z[name].compression == "gzip", (name, z[name].compression)
        assert plain[name].compression is None, (name, plain[name].compression)
PY
"$python" "$compare" equal "$tmp/plain.h5" "$tmp/z.h5" 2>"$tmp/cmp.err" && ok ||
  fail "--compress changed the content: $(tail -1 "$tmp/cmp.err")"
plain_bytes=$(stat -c %s "$tmp/plain.h5")
z_bytes=$(stat -c %s "$tmp/z.h5")
echo "--compress: $z_bytes bytes, plain: $plain_bytes bytes"
((2 * z_bytes <= plain_bytes)) && ok || fail "--compress: $z_bytes bytes, more than half the plain file's $plain_bytes"

# The estimate printed before the run: the plain file's real size lies
# between half the estimate and the estimate + 10%. It counts 16 bytes a
# spike (8 for its time, 8 for its id: "before compression", while a plain
# file packs ids with HDF5's scale-offset filter, 0.6 times the estimate
# here), 4 a potential and the per-sample rows, at the first batch's
# firing rates; HDF5's own overhead is the 10%.
est=$(sed -n 's/^recording estimate (before compression, firing rates of the first 50 samples): \([0-9.]* [KMGT]\{0,1\}i\{0,1\}B\) (.*/\1/p' "$tmp/plain.out")
[[ -n $est ]] && ok || fail "no recording estimate line for 50 probe samples: $(cat "$tmp/plain.out")"
est_bytes=$("$python" -c '
import sys
v, unit = sys.argv[1].split()
print(int(float(v) * 1024 ** ["B", "KiB", "MiB", "GiB", "TiB"].index(unit)))' "$est")
echo "estimate: $est ($est_bytes bytes), file: $plain_bytes bytes"
"$python" -c "import sys; r = int(sys.argv[2]) / int(sys.argv[1]); assert 0.5 <= r <= 1.1, r" "$est_bytes" "$plain_bytes" &&
  ok || fail "the file's $plain_bytes bytes are not between half the estimate $est and the estimate + 10%"
# --compress prints the same (uncompressed) estimate.
grep -q "^recording estimate (before compression, firing rates of the first 50 samples): $est (" "$tmp/z.out" && ok ||
  fail "--compress changed the estimate: $(grep estimate "$tmp/z.out")"

# --max-record-bytes: half the estimate refuses (naming both sizes) and
# leaves no file; twice the estimate runs.
expect_error "recording budget" "would take about $est (.*), more than --max-record-bytes" \
  "${run[@]}" --output "$tmp/b.h5" --max-record-bytes $((est_bytes / 2))
[[ ! -e "$tmp/b.h5" && ! -e "$tmp/b.h5.partial" ]] && ok || fail "a refused recording left a file"
"$snnsim" "${run[@]}" --output "$tmp/b.h5" --max-record-bytes $((2 * est_bytes)) >"$tmp/b.out" 2>&1 && [[ -f "$tmp/b.h5" ]] &&
  ok || fail "a recording within --max-record-bytes $((2 * est_bytes)) did not run: $(cat "$tmp/b.out")"
expect_error "budget with a suffix" "more than --max-record-bytes 100.0 KiB" "${run[@]}" --output "$tmp/c.h5" --max-record-bytes 100K
expect_error "bad budget" "expected a positive size" "${run[@]}" --output "$tmp/c.h5" --max-record-bytes 12X
finish
