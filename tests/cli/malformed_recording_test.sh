#!/usr/bin/env bash
# Malformed recordings: a real recording (snnsim run on the fixture) edited
# with h5py, one defect at a time (an interior spike pointer out of range, a
# decreasing pointer, a node id >= n_nodes, truncated timestamps, a
# mismatched /samples length, a huge extent, wrong types, bad T/dt/classes,
# a truncated or non-HDF5 file). `snnsim analyze` (statistics and raster
# plots) and tools/export_nwb.py give one error line naming the dataset and
# exit 2: no crash, no traceback, no giant allocation. `run --resume` and
# `recover` refuse damaged unfinished files and leave their bytes unchanged.
#   malformed_recording_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
exporter="$root/tools/export_nwb.py"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

die() { echo "FAIL: $*"; exit 1; }

"$snnsim" train --data-dir "$fixture" --layers 784-32-10 --T 4 --epochs 1 --v-threshold 0.5 --threads 1 \
  --checkpoint "$tmp/ck.h5" >"$tmp/train.out" 2>&1 || die "train failed: $(cat "$tmp/train.out")"
"$snnsim" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --limit 40 --output "$tmp/good.h5" \
  --record hidden,output --record-v hidden:0,5 --threads 1 >"$tmp/run.out" 2>&1 ||
  die "recording run failed: $(cat "$tmp/run.out")"
"$snnsim" analyze "$tmp/good.h5" >"$tmp/out" 2>"$tmp/err" || die "analyze of the good file failed: $(cat "$tmp/err")"

# edit NAME PYTHON_CODE: $tmp/NAME.h5, a copy of the good file with the code
# run on it (h5py file `f`, numpy `np`).
edit() {
  local name="$1" code="$2"
  cp "$tmp/good.h5" "$tmp/$name.h5"
  "$python" - "$tmp/$name.h5" "$code" <<'PY' || die "cannot make $name"
import sys
import h5py
import numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    exec(sys.argv[2])
PY
}

# expect_bad NAME WANT: analyze (with the raster plots, which read spikes on
# their own), and export_nwb.py fail with one line naming WANT, exit 2.
expect_bad() {
  local name="$1" want="$2" file="$tmp/$1.h5"
  expect_error "analyze $name" "$want" analyze "$file"
  expect_error "analyze --plots $name" "$want" analyze "$file" --plots "$tmp/plots-$name"
  "$python" "$exporter" "$file" "$tmp/$name.nwb" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [[ $rc -ne 2 ]]; then fail "export $name: exit code $rc, expected 2: $(tail -3 "$tmp/err")"
  elif [[ $(wc -l <"$tmp/err") -ne 1 ]]; then fail "export $name: stderr is not one line: $(head -5 "$tmp/err")"
  elif ! grep -q "^export_nwb: error: .*$want" "$tmp/err"; then fail "export $name: stderr lacks '$want': $(cat "$tmp/err")"
  elif [[ -e "$tmp/$name.nwb" ]]; then fail "export $name: wrote $tmp/$name.nwb"
  else ok; fi
}

P=samples/spike_ptr/hidden
edit ptr_interior "p = f['$P']; p[len(p) // 2] = 10**9"
expect_bad ptr_interior "spike_ptr/hidden"
edit ptr_decreasing "p = f['$P']; k = int(np.argmax(p[:] > 0)); p[k + 1] = p[k] - 1"
expect_bad ptr_decreasing "spike_ptr/hidden.*decrease"
edit ptr_first "p = f['$P']; p[0] = 1"
expect_bad ptr_first "spike_ptr/hidden.*first pointer"
edit ptr_last "p = f['$P']; p[-1] = p[-1] - 1"
expect_bad ptr_last "hidden"
edit ptr_short "p = f['$P']; p.resize((p.shape[0] - 1,))"
expect_bad ptr_short "spike_ptr/hidden"
edit node_id "n = f['spikes/hidden/node_ids']; n[0] = 32 + 5"
expect_bad node_id "37"
edit timestamps_truncated "t = f['spikes/hidden/timestamps']; t.resize((t.shape[0] - 3,))"
expect_bad timestamps_truncated "spikes/hidden/timestamps"
edit node_ids_truncated "t = f['spikes/output/node_ids']; t.resize((t.shape[0] - 1,))"
expect_bad node_ids_truncated "spikes/output/node_ids"
edit timestamp_nan "t = f['spikes/hidden/timestamps']; t[1] = np.nan"
expect_bad timestamp_nan "hidden"
edit label_rows "d = f['samples/label']; d.resize((d.shape[0] - 1,))"
expect_bad label_rows "samples/label"
edit counts_rows "d = f['samples/output_counts']; d.resize((d.shape[0] + 5, d.shape[1]))"
expect_bad counts_rows "samples/output_counts"
edit committed "f['meta/samples_committed'][()] = 39"
expect_bad committed "samples"
edit huge_extent "d = f['spikes/hidden/timestamps']; d.resize((1 << 40,)); f['spikes/hidden/node_ids'].resize((1 << 40,))"
expect_bad huge_extent "spikes/hidden"
edit huge_samples "f['meta/samples_committed'][()] = 1 << 40
for k in ('label', 'predicted', 't_start_ms', 't_stop_ms'): f['samples/' + k].resize((1 << 40,))
f['samples/output_counts'].resize((1 << 40, 10))"
expect_bad huge_samples "extent is damaged"
edit report_rows "d = f['report/hidden/data']; d.resize((d.shape[0] - 1, d.shape[1]))"
expect_bad report_rows "report/hidden/data"
edit report_width "del f['report/hidden/mapping/node_ids']; f['report/hidden/mapping/node_ids'] = np.array([0, 5, 7], np.uint64)"
expect_bad report_width "report/hidden"
edit label_range "f['samples/label'][0] = 99"
expect_bad label_range "outside the classes"
edit recorded_unsorted "del f['meta/populations/hidden/recorded_node_ids']; f['meta/populations/hidden/recorded_node_ids'] = np.array([3, 1, 2], np.uint64)"
expect_bad recorded_unsorted "recorded_node_ids"
edit n_nodes_small "f['meta/populations/hidden'].attrs['n_nodes'] = np.int64(4)"
expect_bad n_nodes_small "recorded_node_ids"
edit steps_zero "f['meta'].attrs['steps_per_sample'] = np.int64(0)"
expect_bad steps_zero "steps_per_sample"
edit steps_string "f['meta'].attrs['steps_per_sample'] = np.bytes_(b'four')"
expect_bad steps_string "steps_per_sample"
edit dt_nan "f['meta'].attrs['dt_ms'] = np.float64(np.nan)"
expect_bad dt_nan "dt_ms"
# /meta's kind tells a population model's trials from a network's samples.
edit kind_number "f['meta'].attrs['kind'] = np.int64(3)"
expect_bad kind_number "attribute 'kind'"
edit kind_other "f['meta'].attrs['kind'] = np.bytes_(b'layers')"
expect_bad kind_other "attribute 'kind' is 'layers', not 'populations'"
edit committed_string "del f['meta/samples_committed']; f['meta/samples_committed'] = np.bytes_(b'40')"
expect_bad committed_string "samples_committed"
edit ptr_float "d = f['$P'][:]; del f['$P']; f['$P'] = d.astype(np.float64)"
expect_bad ptr_float "spike_ptr/hidden"
edit no_timestamps "del f['spikes/output/timestamps']"
expect_bad no_timestamps "spikes/output/timestamps"
edit extra_population "f.create_group('spikes/ghost')"
expect_bad extra_population "ghost"

# Not a recording at all, or cut short.
head -c 3000 "$tmp/good.h5" >"$tmp/truncated.h5"
expect_error "analyze truncated" "truncated.h5" analyze "$tmp/truncated.h5"
"$python" "$exporter" "$tmp/truncated.h5" "$tmp/t.nwb" >"$tmp/out" 2>"$tmp/err"
[[ $? -eq 2 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "^export_nwb: error: .*truncated.h5" "$tmp/err" && ok ||
  fail "export truncated: $(head -3 "$tmp/err")"
echo "not hdf5" >"$tmp/text.h5"
expect_error "analyze text" "not an HDF5 file" analyze "$tmp/text.h5"

# Unfinished files with a defect: resume and recover refuse them and leave
# their bytes as they were.
edit unfinished "f['meta/status'][()] = b'aborted'; p = f['$P']; p[len(p) // 2] = 10**9"
mv "$tmp/unfinished.h5" "$tmp/u.h5.partial"
before=$(sha "$tmp/u.h5.partial")
expect_error "resume a damaged file" "spike_ptr/hidden" run --resume "$tmp/u.h5"
[[ $(sha "$tmp/u.h5.partial") == "$before" && ! -e "$tmp/u.h5" ]] && ok || fail "a refused resume changed the file"
expect_error "recover a damaged file" "spike_ptr/hidden" recover "$tmp/u.h5"
[[ $(sha "$tmp/u.h5.partial") == "$before" && ! -e "$tmp/u.h5" ]] && ok || fail "a refused recover changed the file"

# Flipped bytes in the metadata of unfinished and finished files: refused at
# once (a SWMR reader retries bad checksums, for minutes) with one line.
"$python" - "$tmp/good.h5" "$tmp/f.h5.partial" <<'PY' || die "cannot flip bytes"
import random, sys
data = bytearray(open(sys.argv[1], "rb").read())
random.seed(5)
for _ in range(40):
    data[random.randrange(100, 4000)] ^= 0xFF
open(sys.argv[2], "wb").write(data)
PY
cp "$tmp/f.h5.partial" "$tmp/flipped.h5"
before=$(sha "$tmp/f.h5.partial")
for cmd in "recover $tmp/f.h5" "run --resume $tmp/f.h5" "analyze $tmp/flipped.h5"; do
  timeout 60 "$snnsim" $cmd >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [[ $rc -eq 2 && $(wc -l <"$tmp/err") -eq 1 && ! -s "$tmp/out" ]] && grep -q "snnsim: error: .*f" "$tmp/err" && ok ||
    fail "flipped bytes, $cmd: exit code $rc (124: hung): $(head -3 "$tmp/err")"
done
[[ $(sha "$tmp/f.h5.partial") == "$before" && ! -e "$tmp/f.h5" ]] && ok || fail "a refused recover or resume changed a damaged file"
timeout 120 "$python" "$exporter" "$tmp/flipped.h5" "$tmp/flipped.nwb" >"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc -eq 2 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q "^export_nwb: error: " "$tmp/err" && ok ||
  fail "flipped bytes, export: exit code $rc: $(head -3 "$tmp/err")"

finish
