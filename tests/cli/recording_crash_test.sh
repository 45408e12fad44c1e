#!/usr/bin/env bash
# Crash safety of recordings: a recording run killed with SIGKILL at random
# points leaves a file that opens (SWMR read) with every committed sample
# equal to an uninterrupted run's; SIGINT and SIGTERM commit, mark the file
# aborted and exit 128 + the signal; `snnsim recover` and `run --resume`
# turn either into the uninterrupted run's file.
#   recording_crash_test.sh SNNSIM FIXTURE_DIR PYTHON
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
# The embedded MNIST's 8,000 training digits (the default --data-dir), long
# enough to be killed at many points.
run=(run --checkpoint "$tmp/ck.h5" --split train --T 48 --batch-size 16 --threads 1 --record hidden,output
  --record-v hidden:0,7)
start=$(date +%s.%N)
"$snnsim" "${run[@]}" --output "$tmp/ref.h5" >"$tmp/ref.out" 2>&1 || fail "reference run failed: $(cat "$tmp/ref.out")"
seconds=$("$python" -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$(date +%s.%N)")

# SIGKILL at random points; odd rounds recover first, then every round resumes.
killed=0
for round in 1 2 3 4 5; do
  rm -f "$tmp/k.h5" "$tmp/k.h5.partial"
  delay=$("$python" -c "import random, sys; print(round(random.uniform(0.2, 0.95 * float(sys.argv[1])), 2))" "$seconds")
  "$snnsim" "${run[@]}" --output "$tmp/k.h5" >/dev/null 2>&1 &
  pid=$!
  sleep "$delay"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  [[ -f "$tmp/k.h5" || ! -f "$tmp/k.h5.partial" ]] && continue  # finished, or not started, before the kill
  killed=$((killed + 1))
  what="killed after ${delay}s of ${seconds}s"
  k=$("$python" "$compare" prefix "$tmp/ref.h5" "$tmp/k.h5.partial" 2>"$tmp/cmp.err") && ok ||
    { fail "$what: the file does not hold the reference's committed samples: $(tail -1 "$tmp/cmp.err")"; continue; }
  ((killed == 1)) && expect_error "analyze a killed run's file" "snnsim recover" analyze "$tmp/k.h5"
  if ((round % 2)); then
    "$snnsim" recover "$tmp/k.h5" >"$tmp/rec.out" 2>&1 && grep -q "recovered '.*': $k committed samples" "$tmp/rec.out" &&
      ok || fail "$what: recover: $(cat "$tmp/rec.out")"
    "$python" "$compare" prefix "$tmp/ref.h5" "$tmp/k.h5" >/dev/null 2>"$tmp/cmp.err" && ok ||
      fail "$what: the recovered file differs: $(tail -1 "$tmp/cmp.err")"
  fi
  # Another batch size and thread count: results do not depend on them.
  "$snnsim" run --resume "$tmp/k.h5" --batch-size 24 --threads 2 >"$tmp/res.out" 2>&1 || fail "$what: resume failed: $(cat "$tmp/res.out")"
  "$python" "$compare" equal "$tmp/ref.h5" "$tmp/k.h5" 2>"$tmp/cmp.err" && ok ||
    fail "$what: the resumed file differs from the uninterrupted one: $(tail -1 "$tmp/cmp.err")"
done
((killed > 0)) && ok || fail "no round was killed before the run finished (${seconds}s)"

# SIGINT and SIGTERM: finish the batch, commit, say aborted, exit 128 + signal.
for sig in INT:130 TERM:143; do
  rm -f "$tmp/s.h5" "$tmp/s.h5.partial"
  "$snnsim" "${run[@]}" --output "$tmp/s.h5" >/dev/null 2>"$tmp/s.err" &
  pid=$!
  # Once the recording has started (timing alone is fragile when other tests
  # share the machine), plus a moment so that a few batches are committed.
  for _ in $(seq 200); do [[ -e "$tmp/s.h5.partial" ]] && break; sleep 0.1; done
  sleep 0.3
  kill -"${sig%:*}" "$pid"
  wait "$pid"
  rc=$?
  [[ $rc -eq ${sig#*:} ]] && ok || fail "SIG${sig%:*}: exit code $rc, expected ${sig#*:}"
  [[ $(wc -l <"$tmp/s.err") -eq 1 ]] && grep -q "continue it with --resume" "$tmp/s.err" && ok ||
    fail "SIG${sig%:*}: stderr is not one line saying how to continue: $(cat "$tmp/s.err")"
  "$python" - "$tmp/s.h5.partial" <<'PY' && ok || fail "SIG${sig%:*}: the file is not marked aborted"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:  # closed cleanly: a plain open works
    assert f["meta/status"][()].rstrip(b"\0") == b"aborted"
    assert int(f["meta/samples_committed"][()]) > 0
PY
  "$python" "$compare" prefix "$tmp/ref.h5" "$tmp/s.h5.partial" >/dev/null 2>"$tmp/cmp.err" && ok ||
    fail "SIG${sig%:*}: committed samples differ: $(tail -1 "$tmp/cmp.err")"
  "$snnsim" run --resume "$tmp/s.h5" >/dev/null 2>"$tmp/res.err" && "$python" "$compare" equal "$tmp/ref.h5" "$tmp/s.h5" &&
    ok || fail "SIG${sig%:*}: resume: $(cat "$tmp/res.err")"
done

# Bad requests.
expect_error "resume a complete file" "nothing to resume" run --resume "$tmp/ref.h5"
expect_error "recover a complete file" "nothing to recover" recover "$tmp/ref.h5"
expect_error "recover nothing" "no recording" recover "$tmp/none.h5"
expect_error "resume with a changed setting" "cannot be given with --resume" run --resume "$tmp/ref.h5" --T 8
cp "$tmp/ck.h5" "$tmp/ck.h5.partial"
expect_error "resume a non-recording" "not an snnsim recording" run --resume "$tmp/ck.h5"
expect_error "recording budget" "more than --max-record-bytes" "${run[@]}" --output "$tmp/b.h5" --max-record-bytes 100K
[[ ! -e "$tmp/b.h5" && ! -e "$tmp/b.h5.partial" ]] && ok || fail "a refused recording left a file"
expect_error "bad budget" "expected a positive size" "${run[@]}" --output "$tmp/b.h5" --max-record-bytes 12X
finish
