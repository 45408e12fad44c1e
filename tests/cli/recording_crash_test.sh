#!/usr/bin/env bash
# Crash safety of recordings: a recording run killed with SIGKILL at seeded
# random points, each after it committed samples, leaves a file that opens
# (SWMR read, or plainly after `h5clear -s --increment=0`) with every committed sample
# equal to an uninterrupted run's; SIGINT and SIGTERM commit, mark the file
# aborted and exit 128 + the signal; a second SIGINT kills at once;
# `snnsim recover` and `run --resume` (with other stages, steps per tick,
# batch size and threads) turn either into the uninterrupted run's file.
# Timing matters (signals land during batches): CTest runs it serially.
#   recording_crash_test.sh SNNSIM FIXTURE_DIR PYTHON
# SNN_CRASH_SEED=N picks other kill points (the seed is printed).
set -uo pipefail
snnsim="$1"
fixture="$2"
python="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pydir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../python" && pwd)"
compare="$pydir/compare_recordings.py"
signal_run="$pydir/signal_run.py"
command -v h5clear >/dev/null || fail "h5clear (Debian's hdf5-tools, installed by scripts/setup.sh) is missing"

"$snnsim" train --data-dir "$fixture" --layers 784-48-10 --T 4 --epochs 1 --v-threshold 0.5 --threads 1 \
  --checkpoint "$tmp/ck.h5" >"$tmp/train.out" 2>&1 || fail "train failed: $(cat "$tmp/train.out")"
# The embedded MNIST's 8,000 training digits (the default --data-dir), long
# enough to be killed at many points.
samples=8000
settings=(run --checkpoint "$tmp/ck.h5" --split train --T 48 --threads 1 --record hidden,output --record-v hidden:0,7)
run=("${settings[@]}" --batch-size 16)
start=$(date +%s.%N)
"$snnsim" "${run[@]}" --output "$tmp/ref.h5" >"$tmp/ref.out" 2>&1 || fail "reference run failed: $(cat "$tmp/ref.out")"
seconds=$("$python" -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$start" "$(date +%s.%N)")

# What vouches for samples reaches the file after them, write by write: the
# report's time axis covers a commit before the counter claims it (a kill
# between the two writes must not leave a counter ahead of its time axis).
# The seeded kills below land there by chance only; strace shows every
# commit's writes in their order.
command -v strace >/dev/null || fail "strace (installed by scripts/setup.sh) is missing"
strace -f -xx -e trace=pwrite64,pwritev -o "$tmp/writes.txt" "$snnsim" "${settings[@]}" --batch-size 500 \
  --output "$tmp/order.h5" >"$tmp/order.out" 2>&1 || fail "traced run failed: $(cat "$tmp/order.out")"
"$python" - "$tmp/order.h5" "$tmp/writes.txt" <<'PY' && ok || fail "a commit wrote its counter before its time axis"
import re, struct, sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    counter = f["meta/samples_committed"].id.get_offset()
    time = f["report/hidden/mapping/time"].id.get_offset()
    steps, dt = int(f["meta"].attrs["steps_per_sample"]), f["report/hidden/mapping/time"][2]
covered, commits = 0.0, 0
for line in open(sys.argv[2]):
    m = re.search(r'pwrite64\(\d+, "((?:\\x[0-9a-f]{2})*)", (\d+), (\d+)\)', line)
    if not m or int(m[3]) not in (counter, time):
        continue
    data = bytes.fromhex(m[1].replace("\\x", ""))
    if int(m[3]) == time:
        covered = struct.unpack("<3d", data)[1]
    else:
        n = struct.unpack("<Q", data)[0]
        assert n * steps * dt <= covered, f"counter {n} written while the time axis ends at {covered} ms"
        commits += n > 0
assert commits >= 16, commits  # 8,000 samples in batches of 500
PY

# SIGKILL at seeded random points, each once the recording has committed at
# least a drawn number of samples (signal_run.py reads the counter as any
# SWMR reader may) and a drawn fraction of a batch later: the file holds at
# least what the reader saw, equal to the reference. Odd rounds recover
# first; every round then resumes with other placement flags.
seed="${SNN_CRASH_SEED:-18}"
mapfile -t plan < <("$python" -c '
import random, sys
rng = random.Random(int(sys.argv[1]))
for _ in range(5):  # committed samples to wait for, then seconds to wait
    print(rng.randint(1, int(0.8 * int(sys.argv[2]))), round(rng.uniform(0, 0.05), 3))
' "$seed" "$samples")
echo "SIGKILL rounds: seed $seed (set SNN_CRASH_SEED to change), reference run ${seconds}s"
# The file was started with one stage, the default K, batch 16 and 1 thread.
resume_flags=("--devices cpu,cpu --batch-size 24 --threads 2"
  "--steps-per-tick 5 --batch-size 11"
  "--devices cpu,cpu --balance 1,1 --steps-per-tick 3 --batch-size 100"
  "--steps-per-tick 48 --batch-size 9 --threads 2"
  "--devices cpu,cpu --steps-per-tick 2 --batch-size 16")
killed=0
for round in 1 2 3 4 5; do
  read -r at jitter <<<"${plan[round - 1]}"
  read -r -a flags <<<"${resume_flags[round - 1]}"
  rm -f "$tmp/k.h5" "$tmp/k.h5.partial"
  res=$("$python" "$signal_run" "$tmp/k.h5.partial" "$at" KILL 0 "$jitter" "$tmp/k" -- \
    "$snnsim" "${run[@]}" --output "$tmp/k.h5") || { fail "round $round: $res $(tail -3 "$tmp/k.err")"; continue; }
  read -r seen rc _ <<<"$res"
  echo "round $round: SIGKILL once >= $at samples are committed, + ${jitter}s: killed at $seen (exit $rc);" \
    "resume with ${resume_flags[round - 1]}"
  if ((seen < 0)); then
    echo "round $round: the run ended before it was killed: $(tail -3 "$tmp/k.err")"
    continue
  fi
  what="round $round (killed at $seen committed samples)"
  [[ $rc -eq -9 && -f "$tmp/k.h5.partial" && ! -e "$tmp/k.h5" ]] && ok ||
    { fail "$what: not killed by SIGKILL with the file unfinished (exit $rc)"; continue; }
  k=$("$python" "$compare" prefix "$tmp/ref.h5" "$tmp/k.h5.partial" 2>"$tmp/cmp.err") && ok ||
    { fail "$what: the file does not hold the reference's committed samples: $(tail -1 "$tmp/cmp.err")"; continue; }
  # Nothing a reader saw committed is lost.
  ((k >= seen && k > 0)) && killed=$((killed + 1)) && ok || fail "$what: the file holds $k committed samples"
  if ((killed == 1)); then
    expect_error "analyze a killed run's file" "snnsim recover" analyze "$tmp/k.h5"
    # docs/RECORDING.md's other way in: `h5clear -s --increment=0` (HDF5's tools),
    # then a plain open. Without it a plain open fails: the file says a
    # writer has it. `-s` alone is not enough: a SWMR writer leaves the
    # superblock's end of allocation behind the chunks and index blocks it
    # wrote since (CI saw "addr overflow" on one kill in many).
    cp "$tmp/k.h5.partial" "$tmp/clear.h5"
    "$python" -c "import h5py, sys; h5py.File(sys.argv[1], 'r')" "$tmp/clear.h5" 2>/dev/null &&
      fail "$what: a killed file opened plainly before h5clear" || ok
    h5clear -s --increment=0 "$tmp/clear.h5" >"$tmp/clear.out" 2>&1 && ok ||
      fail "h5clear -s --increment=0 failed: $(cat "$tmp/clear.out")"
    "$python" - "$tmp/ref.h5" "$tmp/clear.h5" "$k" "$pydir" <<'PY' >/dev/null && ok ||
import sys, h5py
sys.path.insert(0, sys.argv[4])
from compare_recordings import prefix
with h5py.File(sys.argv[1], "r") as ref, h5py.File(sys.argv[2], "r") as f:  # no swmr
    assert f["meta/status"][()].rstrip(b"\0") == b"running"
    assert int(f["meta/samples_committed"][()]) == int(sys.argv[3])
    prefix(ref, f)
PY
      fail "$what: after h5clear -s --increment=0, a plain open does not hold the $k committed samples"
  fi
  if ((round % 2)); then
    "$snnsim" recover "$tmp/k.h5" >"$tmp/rec.out" 2>&1 && grep -Eq "recovered '.*': $k committed samples? " "$tmp/rec.out" &&
      ok || fail "$what: recover: $(cat "$tmp/rec.out")"
    "$python" "$compare" prefix "$tmp/ref.h5" "$tmp/k.h5" >/dev/null 2>"$tmp/cmp.err" && ok ||
      fail "$what: the recovered file differs: $(tail -1 "$tmp/cmp.err")"
  fi
  # Other stages, steps per tick, batch size and threads: the run says it
  # used them and continued from sample k, and the file equals the
  # reference dataset for dataset.
  "$snnsim" run --resume "$tmp/k.h5" "${flags[@]}" --summary "$tmp/res.json" >"$tmp/res.out" 2>&1 ||
    fail "$what: resume failed: $(cat "$tmp/res.out")"
  grep -q "^resumed: samples 0..$((k - 1)) came from the recording, $((samples - k)) were simulated now" \
    "$tmp/res.out" && ok || fail "$what: resume did not continue from sample $k: $(cat "$tmp/res.out")"
  "$python" - "$tmp/res.json" "${flags[@]}" <<'PY' && ok ||
import json, sys
s, flags = json.load(open(sys.argv[1])), sys.argv[2:]
given = dict(zip(flags[::2], flags[1::2]))
c = s["config"]
assert c["devices"] == given.get("--devices", "cpu").split(","), c["devices"]
if "--steps-per-tick" in given:
    assert c["steps_per_tick"] == int(given["--steps-per-tick"]), c["steps_per_tick"]
if "--threads" in given:
    assert s["threads"] == int(given["--threads"]), s["threads"]
PY
    fail "$what: the resumed run does not say it used ${resume_flags[round - 1]}: $(cat "$tmp/res.json")"
  "$python" "$compare" equal "$tmp/ref.h5" "$tmp/k.h5" 2>"$tmp/cmp.err" && ok ||
    fail "$what: the resumed file differs from the uninterrupted one: $(tail -1 "$tmp/cmp.err")"
done
((killed >= 3)) && ok || fail "only $killed of 5 rounds were killed with committed samples (3 must be; seed $seed)"

# SIGINT and SIGTERM once samples are committed: finish the batch, commit,
# say aborted, exit 128 + signal.
for sig in INT:130 TERM:143; do
  rm -f "$tmp/s.h5" "$tmp/s.h5.partial"
  res=$("$python" "$signal_run" "$tmp/s.h5.partial" 64 "${sig%:*}" 0 0 "$tmp/s" -- \
    "$snnsim" "${run[@]}" --output "$tmp/s.h5") || { fail "SIG${sig%:*}: $res $(tail -3 "$tmp/s.err")"; continue; }
  read -r seen rc _ <<<"$res"
  [[ $rc -eq ${sig#*:} ]] && ok || fail "SIG${sig%:*}: exit code $rc, expected ${sig#*:} (committed $seen)"
  [[ $(wc -l <"$tmp/s.err") -eq 1 ]] && grep -q "continue it with --resume" "$tmp/s.err" && ok ||
    fail "SIG${sig%:*}: stderr is not one line saying how to continue: $(cat "$tmp/s.err")"
  "$python" - "$tmp/s.h5.partial" "$seen" <<'PY' && ok || fail "SIG${sig%:*}: the file is not marked aborted"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:  # closed cleanly: a plain open works
    assert f["meta/status"][()].rstrip(b"\0") == b"aborted"
    assert int(f["meta/samples_committed"][()]) >= int(sys.argv[2]) > 0
PY
  "$python" "$compare" prefix "$tmp/ref.h5" "$tmp/s.h5.partial" >/dev/null 2>"$tmp/cmp.err" && ok ||
    fail "SIG${sig%:*}: committed samples differ: $(tail -1 "$tmp/cmp.err")"
  "$snnsim" run --resume "$tmp/s.h5" >/dev/null 2>"$tmp/res.err" && "$python" "$compare" equal "$tmp/ref.h5" "$tmp/s.h5" &&
    ok || fail "SIG${sig%:*}: resume: $(cat "$tmp/res.err")"
done

# A second SIGINT kills at once (the README's "second Ctrl-C"). It goes as
# soon as the first one has been taken (signal_run.py), within a batch of
# 2,000 samples that takes far longer: a run that ignored it would finish
# the batch and exit 130 itself (saying how to continue); killed, Popen sees
# -2 (SIGINT) and the file is as SIGKILL leaves it.
rm -f "$tmp/s.h5" "$tmp/s.h5.partial"
res=$("$python" "$signal_run" "$tmp/s.h5.partial" 1 INT,INT 1 0 "$tmp/s" -- \
  "$snnsim" "${settings[@]}" --batch-size 2000 --output "$tmp/s.h5") || fail "second SIGINT: $res $(tail -3 "$tmp/s.err")"
read -r seen rc secs <<<"$res"
echo "second SIGINT: at $seen committed samples, exit $rc ${secs}s after it"
[[ $rc -eq -2 ]] && ok || fail "second SIGINT: exit code $rc, expected death by SIGINT (-2) ${secs}s after it"
"$python" -c "import sys; assert float(sys.argv[1]) < 1.0" "$secs" && ok || fail "second SIGINT: it took ${secs}s to end"
[[ ! -s "$tmp/s.err" ]] && ok || fail "second SIGINT: killed at once, yet it said: $(cat "$tmp/s.err")"
k=$("$python" "$compare" prefix "$tmp/ref.h5" "$tmp/s.h5.partial" 2>"$tmp/cmp.err") && ((k >= seen && k > 0)) && ok ||
  fail "second SIGINT: the file does not hold the reference's $seen committed samples: $k $(tail -1 "$tmp/cmp.err")"
"$snnsim" run --resume "$tmp/s.h5" >/dev/null 2>"$tmp/res.err" && "$python" "$compare" equal "$tmp/ref.h5" "$tmp/s.h5" &&
  ok || fail "second SIGINT: resume: $(cat "$tmp/res.err")"

# Bad requests.
expect_error "resume a complete file" "nothing to resume" run --resume "$tmp/ref.h5"
expect_error "recover a complete file" "nothing to recover" recover "$tmp/ref.h5"
expect_error "recover nothing" "no recording" recover "$tmp/none.h5"
expect_error "resume with a changed setting" "cannot be given with --resume" run --resume "$tmp/ref.h5" --T 8
cp "$tmp/ck.h5" "$tmp/ck.h5.partial"
expect_error "resume a non-recording" "not an snnsim recording" run --resume "$tmp/ck.h5"
finish
