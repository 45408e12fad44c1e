#!/usr/bin/env bash
# `snnsim sweep` under faults: its runs die with it (SIGKILL, SIGTERM) and a
# rerun redoes what they left; a full disk leaves the manifest as it was and
# the rerun resumes; a sweep too large to hold is refused before anything is
# materialised.
#   sweep_faults_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
tmp="$(mktemp -d)"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# The runs of a sweep under test, found by its output folder (unique to the
# test) in their command lines.
runs_of() { pgrep -f -- "--output $1/point-"; }
cleanup() {
  local pid
  for pid in $(pgrep -f -- "--output $tmp/"); do kill -KILL "$pid" 2>/dev/null; done  # orphans of a failed case
  release_small_fs "$tmp/small"
  rm -rf "$tmp"
}
trap cleanup EXIT

# --- Sizes: counted before anything is materialised, refused with the numbers.
# Without the check these grow to tens of GB; the limits make such a failure
# quick and harmless.
# An ASan build reserves terabytes of address space for its shadow memory
# and cannot start under the cap: there the timeout alone bounds the run
# (and ASan refuses allocations above its own limit).
limit="ulimit -v 4000000"
if ! (eval "$limit"; "$snnsim" --version >/dev/null 2>&1; rc=$?; exit $rc) 2>/dev/null; then limit=":"; fi
cat >"$tmp/bounded" <<SH
#!/usr/bin/env bash
$limit
exec timeout 60 "$snnsim" "\$@"
SH
chmod +x "$tmp/bounded"
real_snnsim="$snnsim"
snnsim="$tmp/bounded"
list() { "$python" -c "import sys; a, b = map(int, sys.argv[1:]); print('[' + ', '.join(map(str, range(a, b))) + ']')" "$@"; }
printf '[grid]\nseed = %s\nlimit = %s\n' "$(list 0 10000)" "$(list 1 10001)" >"$tmp/grid.toml"
expect_error "10^8 grid points" \
  "sweep file '$tmp/grid.toml': 100000000 points (grid 10000 x 10000), more than the 1000000 a sweep may hold" \
  sweep "$tmp/grid.toml"
printf '[random]\nsamples = 1e11\ngain = [0.5, 1.5]\n' >"$tmp/samples.toml"
expect_error "1e11 random samples" "\[random\] samples = 1e11 (100000000000), more than the 1000000 points" \
  sweep "$tmp/samples.toml"
printf '[random]\nsamples = 1e300\ngain = [0.5, 1.5]\n' >"$tmp/samples300.toml"
expect_error "1e300 random samples" "more than the 1000000 points" sweep "$tmp/samples300.toml"
printf '[grid]\nseed = %s\nlimit = %s\n[random]\nsamples = 2\ngain = [0.5, 1.5]\n' "$(list 0 1000)" "$(list 1 1001)" \
  >"$tmp/both.toml"
expect_error "grid times samples" "2000000 points (grid 1000 x 1000, each with 2 random samples)" sweep "$tmp/both.toml"
printf '[grid]\nseed = %s\nlimit = %s\nT = %s\nrefractory = %s\ntau = %s\n' "$(list 0 10000)" "$(list 1 10001)" \
  "$(list 1 10001)" "$(list 0 10000)" "$(list 1 10001)" >"$tmp/overflow.toml"
expect_error "2^64 points" "over 2^64 points (grid 10000 x 10000 x 10000 x 10000 x 10000)" sweep "$tmp/overflow.toml"
printf '[random]\nsamples = 3\nseed = 1e30\ngain = [0.5, 1.5]\n' >"$tmp/seed.toml"
expect_error "huge random seed" "\[random\] seed = 1e30 is not a whole number" sweep "$tmp/seed.toml"
snnsim="$real_snnsim"

"$snnsim" train --data-dir "$fixture" --layers 784-32-10 --T 4 --epochs 1 --v-threshold 0.5 --threads 1 \
  --checkpoint "$tmp/ck.h5" >"$tmp/train.out" 2>&1 || fail "train failed: $(cat "$tmp/train.out")"

# --- Processes: slow points (about 6 s each), killed mid-run. A run that
# outlived its sweep would still be running 2 s after the sweep died. Under
# ASan a step takes about 8 times as long: a quarter of the steps keep the
# points a few seconds long there too (T = 8000 made this test 4 minutes of
# CI's sanitizer stage, most of it rerunning points to completion).
slow_T=8000
if sanitized "$snnsim"; then slow_T=2000; fi
sweep_file() {  # sweep_file NAME: a sweep of two slow points into $tmp/NAME
  cat >"$tmp/$1.toml" <<TOML
[sweep]
out = "$tmp/$1"
[base]
checkpoint = "$tmp/ck.h5"
data-dir = "$fixture"
split = "train"
T = $slow_T
batch-size = 10
threads = 1
[grid]
seed = [1, 2]
TOML
}
same_manifest() {  # same_manifest A B: the same points with the same results
  "$python" - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
key = lambda m: (m["total_points"], m["parameters"],
                 [(r["index"], r["params"], r["status"], r.get("accuracy"), r.get("firing_rate")) for r in m["rows"]])
assert key(a) == key(b), (key(a), key(b))
assert len(a["rows"]) == 2 and all(r["status"] == "done" for r in a["rows"])
PY
}
sweep_file reference
"$snnsim" sweep "$tmp/reference.toml" >"$tmp/reference.out" 2>&1 || fail "uninterrupted sweep: $(cat "$tmp/reference.out")"

killed_sweep() {  # killed_sweep SIGNAL: the sweep's runs die with it; a rerun completes it
  local sig="$1" name="killed-$1"
  local out="$tmp/$name"
  sweep_file "$name"
  "$snnsim" sweep "$tmp/$name.toml" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  local sweep_pid=$!
  local i
  for i in $(seq 300); do runs_of "$out" >/dev/null && break; sleep 0.1; done
  if ! runs_of "$out" >/dev/null; then fail "$sig: no run started: $(cat "$tmp/$name.err")"; return; fi
  sleep 1
  kill -"$sig" "$sweep_pid"
  local t0=$SECONDS
  wait "$sweep_pid" 2>/dev/null
  local rc=$?
  for i in $(seq 20); do runs_of "$out" >/dev/null || break; sleep 0.1; done
  local left
  left="$(runs_of "$out")"
  if [[ -n "$left" ]]; then
    fail "$sig: the sweep's runs outlived it (pids $(echo $left))"
    for i in $left; do kill -KILL "$i"; done
    sleep 1
  else
    ok
  fi
  if [[ $sig == TERM ]]; then
    # Stopped in order: the runs were stopped and waited for, one line, exit 2.
    [[ $rc -eq 2 && $((SECONDS - t0)) -le 15 && $(wc -l <"$tmp/$name.err") -eq 1 ]] &&
      grep -q "^snnsim: error: sweep stopped by SIGTERM: 0 of 2 point(s) are recorded" "$tmp/$name.err" &&
      ok || fail "SIGTERM: exit $rc after $((SECONDS - t0)) s: $(cat "$tmp/$name.err")"
  fi
  # Nothing the killed run left counts: the rerun redoes its point from scratch.
  "$snnsim" sweep "$tmp/$name.toml" >"$tmp/$name.rerun" 2>&1 && grep -q "0 done before, 2 to run" "$tmp/$name.rerun" &&
    ok || fail "$sig: rerun: $(cat "$tmp/$name.rerun")"
  same_manifest "$out/manifest.json" "$tmp/reference/manifest.json" && ok ||
    fail "$sig: the rerun's manifest differs from an uninterrupted sweep's"
  [[ -z "$(ls "$out" | grep -v '^point-000[01]\.\(h5\|json\|log\)$\|^manifest\.\(json\|csv\)$')" ]] && ok ||
    fail "$sig: stray files after the rerun: $(ls "$out")"
}
killed_sweep KILL
killed_sweep TERM

# An error while runs are going (here the manifest cannot be replaced) stops
# them and waits for them before the one line and exit 2.
cat >"$tmp/broken.toml" <<TOML
[sweep]
out = "$tmp/broken"
[base]
checkpoint = "$tmp/ck.h5"
data-dir = "$fixture"
split = "train"
T = $slow_T
batch-size = 10
threads = 1
[grid]
limit = [300, 10]
TOML
"$snnsim" sweep "$tmp/broken.toml" --jobs 2 >"$tmp/broken.out" 2>"$tmp/broken.err" &
sweep_pid=$!
for i in $(seq 300); do runs_of "$tmp/broken" >/dev/null && break; sleep 0.1; done
rm -f "$tmp/broken/manifest.json" && mkdir "$tmp/broken/manifest.json"  # point 1 ends first and cannot be recorded
wait "$sweep_pid"
rc=$?
left="$(runs_of "$tmp/broken")"
[[ $rc -eq 2 && -z "$left" && $(wc -l <"$tmp/broken.err") -eq 1 ]] &&
  grep -q "'$tmp/broken/manifest.json' is a directory, not a regular file" "$tmp/broken.err" && ok ||
  fail "an error with runs going: exit $rc, runs left: '$left': $(cat "$tmp/broken.err")"

# --- Full disk: the manifest (with finished points) is left exactly as it was,
# one line, exit 2; once there is space again the rerun resumes.
if small_fs "$tmp/small" 4096; then
  cat >"$tmp/disk.toml" <<TOML
[sweep]
out = "$tmp/small/sweep"
[base]
checkpoint = "$tmp/ck.h5"
data-dir = "$fixture"
limit = 10
[grid]
tau = [1.5, 2.0]
TOML
  "$snnsim" sweep "$tmp/disk.toml" >"$tmp/disk.out" 2>&1 || fail "sweep on the small filesystem: $(cat "$tmp/disk.out")"
  json_sha="$(sha "$tmp/small/sweep/manifest.json")"
  csv_sha="$(sha "$tmp/small/sweep/manifest.csv")"
  sed 's/^tau = .*/tau = [1.5, 2.0, 3.0]/' "$tmp/disk.toml" >"$tmp/disk3.toml"
  fill_fs "$tmp/small"
  expect_error "full disk" "cannot write '$tmp/small/sweep/manifest.json': No space left on device" sweep "$tmp/disk3.toml"
  [[ "$(sha "$tmp/small/sweep/manifest.json")" == "$json_sha" && "$(sha "$tmp/small/sweep/manifest.csv")" == "$csv_sha" ]] &&
    ok || fail "full disk: the manifest changed: $(ls -l "$tmp/small/sweep"; head -c 300 "$tmp/small/sweep/manifest.json")"
  [[ -z "$(ls "$tmp/small/sweep" | grep -v '^point-000[01]\.\(h5\|json\|log\)$\|^manifest\.\(json\|csv\)$')" ]] && ok ||
    fail "full disk: stray files: $(ls "$tmp/small/sweep")"
  rm -f "$tmp/small/.filler"
  "$snnsim" sweep "$tmp/disk3.toml" >"$tmp/disk3.out" 2>&1 && grep -q "2 done before, 1 to run" "$tmp/disk3.out" &&
    ok || fail "full disk: the rerun did not resume: $(cat "$tmp/disk3.out")"
  "$python" - "$tmp/small/sweep/manifest.json" <<'PY' && ok || fail "full disk: the resumed manifest is incomplete"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
assert [r["index"] for r in rows] == [0, 1, 2] and all(r["status"] == "done" for r in rows), rows
PY
else
  echo "note: not root or no tmpfs: the full-disk case is skipped"
fi
finish
