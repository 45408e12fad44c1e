#!/usr/bin/env bash
# `snnsim sweep`: grid and random points, the manifest, resuming, a failing
# point, sharding and merging, validation; `snnsim analyze MANIFEST`.
#   sweep_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"$snnsim" train --data-dir "$fixture" --layers 784-32-10 --T 4 --epochs 1 --v-threshold 0.5 --threads 1 \
  --checkpoint "$tmp/ck.h5" >"$tmp/train.out" 2>&1 || fail "train failed: $(cat "$tmp/train.out")"
cat >"$tmp/grid.toml" <<TOML
[sweep]
out = "$tmp/grid"
[base]
checkpoint = "$tmp/ck.h5"
data-dir = "$fixture"
limit = 20
[grid]
tau = [1.5, 2.0]
v-threshold = [0.5, 1.0]
TOML
"$snnsim" sweep "$tmp/grid.toml" --jobs 2 >"$tmp/sweep.out" 2>&1 || fail "sweep failed: $(cat "$tmp/sweep.out")"
grep -q "^\[4/4\] point" "$tmp/sweep.out" && ok || fail "no progress lines: $(cat "$tmp/sweep.out")"
"$python" - "$tmp/grid/manifest.json" "$tmp/grid/manifest.csv" <<'PY' && ok || fail "manifest incomplete"
import csv, json, os, sys
m = json.load(open(sys.argv[1]))
assert m["total_points"] == 4 and m["parameters"] == ["tau", "v-threshold"]
rows = m["rows"]
assert [r["index"] for r in rows] == [0, 1, 2, 3] and all(r["status"] == "done" for r in rows)
assert [r["params"] for r in rows][:2] == [{"tau": "1.5", "v-threshold": "0.5"}, {"tau": "1.5", "v-threshold": "1.0"}]
for r in rows:
    assert 0 <= r["accuracy"] <= 1 and len(r["firing_rate"]) == 2 and os.path.exists(r["output"])
# A higher threshold never fires more (same weights, same input spikes).
assert rows[1]["firing_rate"][0] <= rows[0]["firing_rate"][0]
table = list(csv.DictReader(open(sys.argv[2])))
assert len(table) == 4 and table[3]["tau"] == "2.0" and table[3]["status"] == "done"
PY
# Each point equals the same `snnsim run` by hand.
"$snnsim" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --limit 20 --tau 2.0 --v-threshold 1.0 \
  --summary "$tmp/by_hand.json" >/dev/null 2>&1 || fail "run with overrides failed"
"$python" - "$tmp/by_hand.json" "$tmp/grid/manifest.json" <<'PY' && ok || fail "a sweep point differs from the same run by hand"
import json, sys
a, m = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a["accuracy"] == m["rows"][3]["accuracy"] and a["firing_rate"] == m["rows"][3]["firing_rate"]
PY

# A rerun skips what completed; a lost output is redone.
"$snnsim" sweep "$tmp/grid.toml" >"$tmp/again.out" 2>&1 && grep -q "4 done before, 0 to run" "$tmp/again.out" &&
  ok || fail "rerun did not skip completed points: $(cat "$tmp/again.out")"
rm "$tmp/grid/point-0002.h5"
"$snnsim" sweep "$tmp/grid.toml" >"$tmp/again.out" 2>&1 && grep -q "3 done before, 1 to run" "$tmp/again.out" &&
  ok || fail "rerun did not redo the lost point: $(cat "$tmp/again.out")"

# A failing point is recorded with its error; the others complete; exit 2.
# (A checkpoint that is not one is refused before any point runs, below; a T
# too large for the memory fails in its point.)
cat >"$tmp/fail.toml" <<TOML
[sweep]
out = "$tmp/fail"
[base]
data-dir = "$fixture"
limit = 10
checkpoint = "$tmp/ck.h5"
[grid]
T = [4, 1000000000]
TOML
"$snnsim" sweep "$tmp/fail.toml" >"$tmp/fail.out" 2>"$tmp/fail.err"
[[ $? -eq 2 ]] && grep -q "1 point(s) failed" "$tmp/fail.err" && ok || fail "a failing point: $(cat "$tmp/fail.out" "$tmp/fail.err")"
"$python" - "$tmp/fail/manifest.json" <<'PY' && ok || fail "the failure is not in the manifest"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
assert rows[0]["status"] == "done" and rows[1]["status"] == "failed" and "memory" in rows[1]["error"], rows
PY
cp "$fixture/t10k-labels-idx1-ubyte" "$tmp/not-a-checkpoint.h5"
sed "s|checkpoint = \"$tmp/ck.h5\"|checkpoint = \"$tmp/not-a-checkpoint.h5\"|; s|$tmp/fail\"|$tmp/never\"|" \
  "$tmp/fail.toml" >"$tmp/notck.toml"
expect_error "a checkpoint that is not one" "not-a-checkpoint.h5' is not an HDF5 file" \
  sweep "$tmp/notck.toml"
[[ ! -e "$tmp/never" ]] && ok || fail "a sweep refused before its points made its folder"

# Shards (as a job array would run them) and their merge equal the whole sweep.
sed "s|$tmp/grid\"|$tmp/sharded\"|" "$tmp/grid.toml" >"$tmp/sharded.toml"
for i in 0 1; do
  "$snnsim" sweep "$tmp/sharded.toml" --shard "$i/2" >/dev/null 2>&1 || fail "shard $i failed"
done
"$snnsim" sweep --merge "$tmp/sharded" >"$tmp/merge.out" 2>&1 && grep -q "merged 2 shards: 4 of 4 points" "$tmp/merge.out" &&
  ok || fail "merge: $(cat "$tmp/merge.out")"
"$python" - "$tmp/grid/manifest.json" "$tmp/sharded/manifest.json" <<'PY' && ok || fail "merged shards differ from the whole sweep"
import json, sys
a, b = (json.load(open(p))["rows"] for p in sys.argv[1:])
assert [(r["params"], r["accuracy"], r["firing_rate"]) for r in a] == [(r["params"], r["accuracy"], r["firing_rate"]) for r in b]
PY
rm "$tmp/sharded/manifest-shard-1-of-2.json"
expect_error "merge with a shard missing" "shard 1 of 2 is missing" sweep --merge "$tmp/sharded"

# Random samples: drawn from the sweep's seed, the same every time.
cat >"$tmp/random.toml" <<TOML
[sweep]
out = "$tmp/random"
[base]
checkpoint = "$tmp/ck.h5"
data-dir = "$fixture"
limit = 10
[random]
samples = 3
seed = 7
gain = [0.5, 1.5]
refractory = [0, 3]
TOML
"$snnsim" sweep "$tmp/random.toml" >/dev/null 2>&1 && cp "$tmp/random/manifest.json" "$tmp/r1.json" &&
  rm -r "$tmp/random" && "$snnsim" sweep "$tmp/random.toml" >/dev/null 2>&1 || fail "random sweep failed"
"$python" - "$tmp/r1.json" "$tmp/random/manifest.json" <<'PY' && ok || fail "random points are not reproducible"
import json, sys
a, b = (json.load(open(p))["rows"] for p in sys.argv[1:])
assert len(a) == 3 and [r["params"] for r in a] == [r["params"] for r in b]
for r in a:
    assert 0.5 <= float(r["params"]["gain"]) <= 1.5 and r["params"]["refractory"] in ("0", "1", "2", "3")
PY

# snnsim analyze MANIFEST: a table and a plot of a metric against a parameter.
"$snnsim" analyze "$tmp/grid/manifest.json" --x v-threshold --by tau --y firing_rate_layer1 --plot "$tmp/rate.png" \
  >"$tmp/table.out" 2>&1 && grep -q "firing_rate_layer1 against v-threshold" "$tmp/table.out" && [[ -s "$tmp/rate.png" ]] &&
  ok || fail "analyze manifest: $(cat "$tmp/table.out")"
expect_error "analyze manifest by an unswept parameter" "did not vary 'T'" analyze "$tmp/grid/manifest.json" --x T

# Everything wrong with a sweep file is found before anything runs.
bad() {  # bad NAME EXPECTED SECTION-TEXT
  printf '[base]\ncheckpoint = "%s"\n%s\n' "$tmp/ck.h5" "$3" >"$tmp/bad.toml"
  expect_error "$1" "$2" sweep "$tmp/bad.toml"
}
bad "unknown parameter" "'alpha' cannot be swept" $'[grid]\nalpha = [1, 2]'
bad "empty grid" "the grid of 'tau' is empty" $'[grid]\ntau = []'
bad "empty range" "range \\[2, 1\\] is empty" $'[random]\nsamples = 2\ngain = [2, 1]'
bad "tau out of range" "out of range" $'[grid]\ntau = [0.5]'
bad "nothing varied" "varies nothing" ''
bad "unknown run option" "has no run option 'bogus'" $'bogus = 1\n[grid]\ntau = [2]'
bad "missing checkpoint" "no checkpoint" $'[grid]\ncheckpoint = ["/nonexistent.h5"]'
expect_error "bad shard" "--shard: expected i/n" sweep "$tmp/grid.toml" --shard 2/2
expect_error "too many jobs" "--jobs 100000: expected 1 to" sweep "$tmp/grid.toml" --jobs 100000
finish
