#!/usr/bin/env bash
# The plots of `snnsim analyze` say what the recording holds (issue 18): a
# small net trained on the fixture is recorded, analyze writes SVG plots,
# and plots_check.py parses them (PLplot's svg driver: polylines and <text>)
# against the recording read with h5py: every spike of the raster's samples
# as one tick at its (time, id), inside the frame, sample boundaries between
# spike columns, label -> prediction above each sample; histogram bars that
# count each neuron once; one PSTH curve of T points per population, the
# accuracy on the same step axis; the confusion matrix in the text table's
# order with its colour bar; legends outside the data.
#   plots_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
tmp="$(mktemp -d)"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap 'rm -rf "$tmp"' EXIT
check="$(dirname "${BASH_SOURCE[0]}")/plots_check.py"

"$snnsim" train --data-dir "$fixture" --layers 784-24-10 --T 6 --epochs 2 --v-threshold 0.5 --threads 1 \
  --checkpoint "$tmp/ck.h5" >"$tmp/train.out" 2>&1 || fail "train failed: $(cat "$tmp/train.out")"
"$snnsim" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --limit 40 --threads 1 --output "$tmp/rec.h5" \
  --record hidden,output >"$tmp/run.out" 2>&1 || fail "recording run failed: $(cat "$tmp/run.out")"
cat >"$tmp/manifest.json" <<'JSON'
{"sweep": "by hand", "parameters": ["tau", "T"], "rows": [
  {"status": "done", "params": {"tau": "1.5", "T": "4"}, "accuracy": 0.0, "wall_s": 1.0, "firing_rate": [0.1, 0.2]},
  {"status": "done", "params": {"tau": "2.0", "T": "4"}, "accuracy": 1.0, "wall_s": 1.0, "firing_rate": [0.1, 0.3]},
  {"status": "done", "params": {"tau": "1.5", "T": "8"}, "accuracy": 0.5, "wall_s": 1.0, "firing_rate": [0.1, 0.2]},
  {"status": "done", "params": {"tau": "2.0", "T": "8"}, "accuracy": 0.7, "wall_s": 1.0, "firing_rate": [0.1, 0.3]}]}
JSON
"$snnsim" analyze "$tmp/manifest.json" --plot "$tmp/sweep.svg" >"$tmp/m.out" 2>&1 || fail "manifest plot failed: $(cat "$tmp/m.out")"

# The default raster (samples 0-4), then samples further in (its labels must
# follow the samples shown, not the first ones).
for range in 0-4 7-12; do
  out="$tmp/plots-$range"
  "$snnsim" analyze "$tmp/rec.h5" --plots "$out" --plot-format svg --raster "$range" >"$tmp/a.out" 2>&1 ||
    fail "analyze --plots failed: $(cat "$tmp/a.out")"
  extra=()
  [[ $range == 0-4 ]] && extra=("$tmp/sweep.svg")
  if "$python" "$check" "$tmp/rec.h5" "$out" "${range%-*}" $((${range#*-} - ${range%-*} + 1)) "${extra[@]}" >"$tmp/check.out" 2>&1; then
    ok
  else
    fail "plots of --raster $range: $(cat "$tmp/check.out")"
  fi
done
# PNG: the same drawing through cairo; each file a whole PNG.
"$snnsim" analyze "$tmp/rec.h5" --plots "$tmp/png" >"$tmp/a.out" 2>&1 || fail "analyze --plots (png) failed: $(cat "$tmp/a.out")"
for f in raster rates psth accuracy confusion; do
  head -c 8 "$tmp/png/$f.png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a" && ok || fail "$f.png is not a PNG"
done
finish
