# Helpers shared by the CLI tests (sourced). Needs $snnsim and $tmp set.
failures=0
pass=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { pass=$((pass + 1)); }

# expect_error NAME EXPECTED_SUBSTRING ARGS...: exit code 2, one stderr line
# naming the problem, nothing on stdout.
expect_error() {
  local name="$1" want="$2"
  shift 2
  "$snnsim" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [[ $rc -ne 2 ]]; then fail "$name: exit code $rc, expected 2 (stderr: $(cat "$tmp/err"))"; return; fi
  if [[ $(wc -l <"$tmp/err") -ne 1 ]]; then fail "$name: stderr is not one line: $(cat "$tmp/err")"; return; fi
  if ! grep -q -- "$want" "$tmp/err"; then fail "$name: stderr lacks '$want': $(cat "$tmp/err")"; return; fi
  if [[ -s "$tmp/out" ]]; then fail "$name: wrote to stdout on error: $(cat "$tmp/out")"; return; fi
  ok
}

# tiny_checkpoint_and_recording FIXTURE: in the current folder, ck.h5 (a
# 784-16-10 network trained on 64 fixture digits, T = 2) and rec.h5 (4
# digits recorded with it): inputs for the tests of what commands do with
# files. Calls fail when either command fails.
tiny_checkpoint_and_recording() {
  local fixture="$1"
  "$snnsim" train --data-dir "$fixture" --layers 784-16-10 --T 2 --epochs 1 --limit 64 --threads 1 \
    --checkpoint ck.h5 >train.out 2>&1 || fail "train failed: $(cat train.out)"
  "$snnsim" run --checkpoint ck.h5 --data-dir "$fixture" --limit 4 --threads 1 --output rec.h5 >run.out 2>&1 ||
    fail "run failed: $(cat run.out)"
}

finish() {
  echo "$pass passed, $failures failed"
  [[ $failures -eq 0 ]]
}

# small_fs DIR KIB: DIR becomes a filesystem of KIB KiB that the test can
# fill to provoke "No space left on device" for real: a tmpfs when the test
# runs as root (CI does), unmounted by the caller's trap with
# `release_small_fs DIR`. Returns 1 when no filesystem can be mounted; the
# caller then limits file sizes with `ulimit -f` in a subshell (EFBIG
# instead of ENOSPC, the same failed write(2)).
small_fs() {
  local dir="$1" kib="$2"
  mkdir -p "$dir"
  [[ $(id -u) -eq 0 ]] || return 1
  mount -t tmpfs -o size="${kib}k" snnsim-test "$dir" 2>/dev/null || return 1
}
release_small_fs() { umount "$1" 2>/dev/null || true; }

# fill_fs DIR: fills the filesystem of DIR, leaving LEFT_KIB (default 0)
# KiB free (a filler file named .filler).
fill_fs() {
  local dir="$1" left="${2:-0}"
  dd if=/dev/zero of="$dir/.filler" bs=1k 2>/dev/null || true
  if [[ $left -gt 0 ]]; then truncate -s "-${left}k" "$dir/.filler"; fi
}

# sanitized PROGRAM: true if PROGRAM is an AddressSanitizer build (it loads
# libasan), where the same work takes 5-10 times as long: tests that need a
# run to last a few seconds (to kill it mid-run) size it down there.
sanitized() { ldd "$1" 2>/dev/null | grep -q 'libasan'; }

# sha FILE: its sha256 (to prove a file was left exactly as it was).
sha() { sha256sum "$1" | cut -d' ' -f1; }

# seed_analyses PREFIX MODEL SEEDS [simulate flags...]: `snnsim simulate
# MODEL --seed s --input-seed s --record PREFIX.s.h5` and `snnsim analyze
# --json PREFIX.s.json` for s = 1..SEEDS (the peer comparisons' snnsim
# side); sets the array `analyses` to the JSON paths, or calls fail.
seed_analyses() {
  local prefix="$1" model="$2" seeds="$3" seed
  shift 3
  analyses=()
  for seed in $(seq 1 "$seeds"); do
    "$snnsim" simulate "$model" "$@" --seed "$seed" --input-seed "$seed" --record "$prefix.$seed.h5" >/dev/null \
      2>"$tmp/err" || { fail "simulate $model (seed $seed): $(cat "$tmp/err")"; return 1; }
    "$snnsim" analyze "$prefix.$seed.h5" --json "$prefix.$seed.json" >/dev/null 2>"$tmp/err" ||
      { fail "analyze $prefix.$seed.h5: $(cat "$tmp/err")"; return 1; }
    analyses+=("$prefix.$seed.json")
  done
}
