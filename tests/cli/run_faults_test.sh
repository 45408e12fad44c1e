#!/usr/bin/env bash
# Faults and bad input of `snnsim train` and `snnsim run` (issue 17): resuming
# recordings made with overrides, from another folder, with a replaced
# checkpoint, after recover; values that were silently accepted; unbounded
# requests; and a full disk (a real one: a tmpfs when the test runs as root).
#   run_faults_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
fixture="$(cd "$2" && pwd)"
python="$3"
tmp="$(mktemp -d)"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
compare="$(cd "$(dirname "${BASH_SOURCE[0]}")/../python" && pwd)/compare_recordings.py"
trap 'release_small_fs "$tmp/full"; rm -rf "$tmp"' EXIT

# expect_failure NAME EXPECTED ARGS...: as expect_error, for a failure that
# comes after the command printed progress or results on stdout.
expect_failure() {
  local name="$1" want="$2"
  shift 2
  "$snnsim" "$@" >/dev/null 2>"$tmp/err"
  local rc=$?
  [[ $rc -eq 2 && $(wc -l <"$tmp/err") -eq 1 ]] && grep -q -- "$want" "$tmp/err" && ok ||
    fail "$name: exit code $rc (expected 2), stderr: $(cat "$tmp/err")"
}

train=(train --data-dir "$fixture" --layers 784-48-10 --T 4 --epochs 1 --v-threshold 0.5 --threads 1)
"$snnsim" "${train[@]}" --checkpoint "$tmp/ck.h5" >"$tmp/t.out" 2>&1 || fail "train failed: $(cat "$tmp/t.out")"
# The same network (config) with other weights:
"$snnsim" "${train[@]}" --lr 5e-3 --checkpoint "$tmp/other.h5" >"$tmp/t.out" 2>&1 || fail "train failed: $(cat "$tmp/t.out")"
# Another network (tau):
"$snnsim" "${train[@]}" --tau 3 --checkpoint "$tmp/tau.h5" >"$tmp/t.out" 2>&1 || fail "train failed: $(cat "$tmp/t.out")"

# interrupted OUT ARGS...: starts `snnsim run ARGS... --output OUT`, sends
# SIGINT once the recording has committed a few batches, and checks that it
# stopped with the file unfinished (OUT.partial). The embedded MNIST's
# training digits make the run long enough to be interrupted.
interrupted() {
  local out="$1"
  shift
  rm -f "$out" "$out.partial"
  "$snnsim" run "$@" --output "$out" >/dev/null 2>"$tmp/int.err" &
  local pid=$!
  for _ in $(seq 300); do [[ -e "$out.partial" ]] && break; sleep 0.1; done
  sleep 0.3
  kill -INT "$pid"
  wait "$pid"
  [[ -e "$out.partial" && ! -e "$out" ]]
}
# Batches of one sample: thousands of commits, several seconds, whatever the CPU.
long=(--split train --T 32 --batch-size 1 --threads 1 --record hidden,output)

# 1. A run with overrides resumes (they used to be lost, so it never could)
#    and equals the uninterrupted run.
overrides=(--tau 3 --seed 5 --gain 2 --v-threshold 0.8)
"$snnsim" run --checkpoint "$tmp/ck.h5" "${long[@]}" "${overrides[@]}" --output "$tmp/ref.h5" >/dev/null 2>"$tmp/e" ||
  fail "reference run failed: $(cat "$tmp/e")"
if interrupted "$tmp/o.h5" --checkpoint "$tmp/ck.h5" "${long[@]}" "${overrides[@]}"; then
  "$snnsim" run --resume "$tmp/o.h5" --threads 2 --devices cpu,cpu >"$tmp/r.out" 2>&1 &&
    "$python" "$compare" equal "$tmp/ref.h5" "$tmp/o.h5" 2>"$tmp/cmp" && ok ||
    fail "a run with --tau/--seed/--gain/--v-threshold did not resume to the uninterrupted file: $(cat "$tmp/r.out" "$tmp/cmp")"
else
  fail "the run with overrides was not interrupted: $(cat "$tmp/int.err")"
fi

# 2. A relative checkpoint path, resumed from another folder; then a
#    replaced checkpoint (same layout, other weights; or another network)
#    is refused and the file keeps its bytes, also once recovered.
mkdir -p "$tmp/a" "$tmp/b"
cp "$tmp/ck.h5" "$tmp/a/ck.h5"
pushd "$tmp/a" >/dev/null
interrupted "$tmp/a/rel.h5" --checkpoint ck.h5 "${long[@]}"
started=$?
popd >/dev/null
if [[ $started -eq 0 ]]; then
  cp "$tmp/a/rel.h5.partial" "$tmp/rel-copy.h5.partial"
  cp "$tmp/other.h5" "$tmp/a/ck.h5"
  before=$(sha "$tmp/a/rel.h5.partial")
  pushd "$tmp/b" >/dev/null
  expect_error "resume with a replaced checkpoint" "other weights" run --resume "$tmp/a/rel.h5"
  popd >/dev/null
  [[ $(sha "$tmp/a/rel.h5.partial") == "$before" && ! -e "$tmp/a/rel.h5" ]] && ok ||
    fail "a refused resume changed the recording"
  "$snnsim" recover "$tmp/a/rel.h5" >/dev/null 2>&1 || fail "recover failed"
  before=$(sha "$tmp/a/rel.h5")
  expect_error "resume a recovered file with a replaced checkpoint" "other weights" run --resume "$tmp/a/rel.h5"
  [[ -e "$tmp/a/rel.h5" && ! -e "$tmp/a/rel.h5.partial" && $(sha "$tmp/a/rel.h5") == "$before" ]] && ok ||
    fail "a refused resume of a recovered file renamed or changed it"
  cp "$tmp/tau.h5" "$tmp/a/ck.h5"
  expect_error "resume with another network's checkpoint" \
    "was made with another network configuration (neuron.tau: 2.0 then, 3.0 now)" run --resume "$tmp/a/rel.h5"
  [[ -e "$tmp/a/rel.h5" && $(sha "$tmp/a/rel.h5") == "$before" ]] && ok || fail "a refused resume changed the recording"
  # With the original checkpoint back, from another folder: it resumes.
  cp "$tmp/ck.h5" "$tmp/a/ck.h5"
  (cd "$tmp/b" && "$snnsim" run --resume "$tmp/rel-copy.h5" >"$tmp/r.out" 2>&1) && [[ -f "$tmp/rel-copy.h5" ]] && ok ||
    fail "a recording started with a relative checkpoint path did not resume from another folder: $(cat "$tmp/r.out")"
  rm -f "$tmp/a/ck.h5"
  pushd "$tmp/b" >/dev/null
  expect_error "resume without its checkpoint" "cannot open checkpoint '$tmp/a/ck.h5'" run --resume "$tmp/a/rel.h5"
  popd >/dev/null
else
  fail "the relative-path run was not interrupted: $(cat "$tmp/int.err")"
fi
expect_error "resume with another setting" "--gain cannot be given with --resume" run --resume "$tmp/ref.h5" --gain 3

# 3. Values that were silently accepted.
run=(run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --threads 1)
expect_error "run --limit 0" "--limit: expected a whole number >= 1, or -1 (all), got '0'" "${run[@]}" --limit 0
expect_error "run --limit -5" "got '-5'" "${run[@]}" --limit -5
expect_error "train --limit 0" "--limit: expected" "${train[@]}" --limit 0 --checkpoint "$tmp/x.h5"
expect_error "--record without --output" "--record needs --output FILE" "${run[@]}" --record hidden
expect_error "a misspelt --record without --output" "--record needs --output" "${run[@]}" --record hiden
expect_error "--dt without --output" "--dt needs --output" "${run[@]}" --dt 0.5
before=$(sha "$tmp/ref.h5")
expect_error "train over an existing file" "exists; pass --overwrite" "${train[@]}" --checkpoint "$tmp/ref.h5"
[[ $(sha "$tmp/ref.h5") == "$before" ]] && ok || fail "train replaced an existing file without --overwrite"
cp "$tmp/ck.h5" "$tmp/ow.h5"
"$snnsim" "${train[@]}" --seed 2 --checkpoint "$tmp/ow.h5" --overwrite >/dev/null 2>&1 &&
  [[ $(sha "$tmp/ow.h5") != $(sha "$tmp/ck.h5") ]] && ok || fail "train --overwrite did not replace the file"
"$python" - "$tmp/ck.h5" "$tmp/nan.h5" "$tmp/neg.h5" <<'PY' || fail "could not make the bad checkpoints"
import shutil, sys, h5py, numpy as np
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r+") as f:
    w = f["parameters/fc0.weight"]
    a = w[...]
    a[3, 5] = np.nan
    a[7, 1] = np.inf
    w[...] = a
shutil.copy(sys.argv[1], sys.argv[3])
with h5py.File(sys.argv[3], "r+") as f:
    f.attrs.modify("epoch", np.int64(-3))
PY
expect_error "NaN weights" "fc0.weight holds 2 of 37632 values that are NaN or infinite" \
  run --checkpoint "$tmp/nan.h5" --data-dir "$fixture"
expect_error "resume NaN weights" "NaN or infinite" train --resume "$tmp/nan.h5" --epochs 3 --data-dir "$fixture"
expect_error "resume a negative epoch" "epoch is -3, not >= 0" train --resume "$tmp/neg.h5" --epochs 3 --data-dir "$fixture"

# 4. Unbounded requests: refused with the numbers, at once.
expect_error "--threads 100000" "snnsim: error: --threads: expected 1 to" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --threads 100000
expect_error "train --threads 100000" "snnsim: error: --threads: expected 1 to" train --data-dir "$fixture" --threads 100000 \
  --checkpoint "$tmp/x.h5"
expect_error "--T 1000000000" "T = 1000000000 steps with batch size 64 needs about" "${run[@]}" --T 1000000000
expect_error "train --T 1000000000" "needs about" train --data-dir "$fixture" --T 1000000000 --checkpoint "$tmp/x.h5"

# 5. Signals to commands that write no recording: one line, then death by
# the signal (they died without a word); train says where it can continue
# from. signalled SIG WAIT_FOR_FILE ARGS...: runs snnsim ARGS, sends SIG
# once snnsim catches it and WAIT_FOR_FILE exists (if given), prints
# "RETURNCODE<TAB>STDERR" (Popen's: -N for death by signal N).
signalled() {
  "$python" - "$@" <<'PY'
import os, signal, subprocess, sys, time
sig, wait_for, args = sys.argv[1], sys.argv[2], sys.argv[3:]
signum = getattr(signal, "SIG" + sig)
p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
def caught():  # /proc's mask of caught signals (before main() sets it, a signal kills without a word)
    try:
        with open(f"/proc/{p.pid}/status") as f:
            mask = next(int(l.split()[1], 16) for l in f if l.startswith("SigCgt:"))
        return mask >> (signum - 1) & 1
    except (OSError, StopIteration):
        return False
deadline = time.time() + 120
while (not caught() or (wait_for and not os.path.exists(wait_for))) and p.poll() is None and time.time() < deadline:
    time.sleep(0.01)
time.sleep(0.2)
p.send_signal(getattr(signal, "SIG" + sig))
err = p.communicate()[1]
print(f"{p.returncode}\t{err.strip()}")
PY
}
long_train=(train --data-dir "$fixture" --layers 784-48-10 --T 4 --epochs 100000 --threads 1)
out=$(signalled TERM "$tmp/long.h5" "$snnsim" "${long_train[@]}" --checkpoint "$tmp/long.h5")
k=$("$python" -c "import h5py, sys; print(int(h5py.File(sys.argv[1], 'r').attrs['epoch']))" "$tmp/long.h5")
[[ "$out" == "-15	snnsim: error: stopped by SIGTERM in epoch $((k + 1)) of 100000; '$tmp/long.h5' holds epoch $k: continue with snnsim train --resume $tmp/long.h5 --epochs 100000" ]] &&
  ok || fail "train stopped by SIGTERM: $out (the checkpoint holds epoch $k)"
# SIGTERM just as a checkpoint replaces the previous one (its inode
# changes): the line names the epoch the file then holds (it named the
# one before in 17 of 20 tries while the note lagged the rename).
out=$("$python" - "$snnsim" "$tmp/swap.h5" "${long_train[@]}" <<'PY'
import os, signal, subprocess, sys, time
import h5py
snnsim, ck, args = sys.argv[1], sys.argv[2], sys.argv[3:]
for _ in range(3):
    if os.path.exists(ck):
        os.remove(ck)
    p = subprocess.Popen([snnsim] + args + ["--checkpoint", ck], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.time() + 120
    while not os.path.exists(ck) and time.time() < deadline:
        pass
    first = os.stat(ck).st_ino
    while time.time() < deadline:
        try:
            if os.stat(ck).st_ino != first:
                break
        except FileNotFoundError:
            pass
    p.send_signal(signal.SIGTERM)
    err = p.communicate()[1].strip()
    k = int(h5py.File(ck, "r").attrs["epoch"])
    if p.returncode != -15 or f"'{ck}' holds epoch {k}:" not in err:
        print(f"exit {p.returncode}, the file holds epoch {k}: {err}")
PY
)
[[ -z "$out" ]] && ok || fail "SIGTERM as a checkpoint is replaced: $out"
out=$(signalled INT "" "$snnsim" "${run[@]}" --T 20000 --batch-size 8)
[[ "$out" == "-2	snnsim: error: interrupted by SIGINT" ]] && ok || fail "run stopped by SIGINT: $out"

# 6. A full disk: one line, exit 2, no crash, nothing existing damaged.
if small_fs "$tmp/full" 1024; then
  cp "$tmp/ck.h5" "$tmp/full/ck.h5"
  echo '{"old": true}' >"$tmp/full/summary.json"
  ck_sha=$(sha "$tmp/full/ck.h5")
  summary_sha=$(sha "$tmp/full/summary.json")
  fill_fs "$tmp/full" 40
  expect_failure "run --output on a full disk" "'$tmp/full/r.h5" run --checkpoint "$tmp/full/ck.h5" "${long[@]}" --output "$tmp/full/r.h5"
  [[ ! -e "$tmp/full/r.h5" ]] && ok || fail "a failed recording left a complete-looking file"
  expect_failure "train on a full disk" "cannot write checkpoint '$tmp/full/ck.h5'" \
    "${train[@]}" --checkpoint "$tmp/full/ck.h5" --overwrite
  [[ $(sha "$tmp/full/ck.h5") == "$ck_sha" ]] && ok || fail "a failed train damaged the existing checkpoint"
  rm -f "$tmp/full/.filler"
  # A summary needs more than the 40 KiB left.
  fill_fs "$tmp/full" 1
  # (The results are printed before the summary is written: they stay on stdout.)
  expect_failure "run --summary on a full disk" "cannot write '$tmp/full/summary.json': No space left" \
    "${run[@]}" --summary "$tmp/full/summary.json"
  [[ $(sha "$tmp/full/summary.json") == "$summary_sha" ]] && ok || fail "a failed summary damaged the existing one"
  # A recording elsewhere completes first: the message says how to get the summary.
  expect_failure "run --output, then --summary on a full disk" \
    "cannot write '$tmp/full/summary.json': No space left on device (the recording '$tmp/r2.h5' is complete; the same command without --output and its recording flags (--record, --record-v, ...) writes the summary again)" \
    "${run[@]}" --output "$tmp/r2.h5" --record output --summary "$tmp/full/summary.json"
  [[ -f "$tmp/r2.h5" ]] && ok || fail "the recording before a failed summary is not complete"
  leftovers=$(find "$tmp/full" -name '*.tmp-*' -o -name '*.partial' | grep -v 'r.h5.partial')
  [[ -z "$leftovers" ]] && ok || fail "temporary files left on the full disk: $leftovers"
  release_small_fs "$tmp/full"
else
  echo "note: not root, the full-disk cases ran under RLIMIT_FSIZE"
  (ulimit -f 64; trap '' XFSZ; "$snnsim" "${train[@]}" --checkpoint "$tmp/big.h5" >/dev/null 2>"$tmp/e"; echo $? >"$tmp/rc")
  [[ $(cat "$tmp/rc") == 2 ]] && ok || fail "train over RLIMIT_FSIZE: exit $(cat "$tmp/rc"): $(cat "$tmp/e")"
fi
finish
