#!/usr/bin/env bash
# `snnsim sweep --jobs N` runs N points at once, each with cores / N threads
# (at least 1), unless [base] sets threads: every manifest row says the
# threads its run used (from the run's own summary) and when it started and
# ended, so the test sees the split and the overlap, not only the results.
#   sweep_jobs_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cores=$(getconf _NPROCESSORS_ONLN)
"$snnsim" train --data-dir "$fixture" --layers 784-32-10 --T 4 --epochs 1 --v-threshold 0.5 --threads 1 \
  --checkpoint "$tmp/ck.h5" >"$tmp/train.out" 2>&1 || fail "train failed: $(cat "$tmp/train.out")"

# sweep NAME JOBS [BASE_THREADS]: 6 points (seeds) of 100 samples, T = 16.
sweep() {
  local name="$1" jobs="$2" base_threads="${3:-}"
  {
    printf '[sweep]\nout = "%s"\n[base]\ncheckpoint = "%s"\ndata-dir = "%s"\nlimit = 100\nT = 16\n' \
      "$tmp/$name" "$tmp/ck.h5" "$fixture"
    [[ -n "$base_threads" ]] && printf 'threads = %s\n' "$base_threads"
    printf '[grid]\nseed = [1, 2, 3, 4, 5, 6]\n'
  } >"$tmp/$name.toml"
  "$snnsim" sweep "$tmp/$name.toml" --jobs "$jobs" >"$tmp/$name.out" 2>&1 || fail "sweep $name failed: $(cat "$tmp/$name.out")"
}

# check NAME JOBS THREADS: every point ran with THREADS threads, and at most
# and at some moment exactly JOBS runs were going at once.
check() {
  "$python" - "$tmp/$1/manifest.json" "$2" "$3" <<'PY' && ok || fail "sweep $1 (--jobs $2): threads or concurrency wrong"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
jobs, threads = int(sys.argv[2]), int(sys.argv[3])
assert len(rows) == 6 and all(r["status"] == "done" for r in rows), rows
for r in rows:
    assert r["threads"] == threads, (r["index"], r["threads"], threads)
    summary = json.load(open(r["summary"]))
    assert summary["threads"] == threads and summary["execution"]["threads"] == threads, (r["index"], summary["execution"])
    assert 0 <= r["started_s"] < r["ended_s"], r
# The most runs going at once: sweep over the start and end times.
events = sorted([(r["started_s"], 1) for r in rows] + [(r["ended_s"], -1) for r in rows], key=lambda e: (e[0], e[1]))
now = most = 0
for _, d in events:
    now += d
    most = max(most, now)
assert most == min(jobs, 6), f"at most {most} runs at once with --jobs {jobs}: {[(r['started_s'], r['ended_s']) for r in rows]}"
print(f"--jobs {jobs}: {threads} threads per run, {most} at once")
PY
}

sweep one 1
check one 1 "$cores"
sweep two 2
check two 2 $((cores / 2 > 1 ? cores / 2 : 1))
sweep three 3
check three 3 $((cores / 3 > 1 ? cores / 3 : 1))
# [base] threads wins over the split.
sweep based 2 3
check based 2 3
grep -q "to run with 2 job(s), 3 threads each" "$tmp/based.out" && ok || fail "sweep header: $(cat "$tmp/based.out")"
grep -q "to run with 2 job(s), $((cores / 2 > 1 ? cores / 2 : 1)) threads each" "$tmp/two.out" && ok ||
  fail "sweep header: $(cat "$tmp/two.out")"

finish
