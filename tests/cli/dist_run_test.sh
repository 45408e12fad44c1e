#!/usr/bin/env bash
# `snnsim run` over several processes (issue 22): ranks on 127.0.0.1 started
# with --rank/--world-size/--master and by torchrun give one process's
# results bit for bit (accuracy, accuracy by step, firing rates: the summary
# compared field by field); a rank that fails, is killed, never arrives, or
# was started with other settings ends every rank with one line naming it,
# never a hang.
#   dist_run_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$(realpath "$1")"
fixture="$(realpath "$2")"
python="$(realpath -s "$3")"  # -s: a venv's python is a link that must stay one
tmp="$(mktemp -d)"
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/dist_lib.sh"
torchrun="$(dirname "$python")/torchrun"

"$snnsim" train --data-dir "$fixture" --layers 784-48-10 --T 4 --epochs 3 --seed 3 --v-threshold 0.5 --threads 1 \
  --checkpoint "$tmp/net.h5" >/dev/null 2>"$tmp/err" || { fail "train: $(cat "$tmp/err")"; finish; exit 1; }
run=(run --checkpoint "$tmp/net.h5" --data-dir "$fixture" --threads 1 --batch-size 16)
"$snnsim" "${run[@]}" --summary "$tmp/one.json" >"$tmp/one.out" 2>&1 || fail "one process: $(cat "$tmp/one.out")"

# ranks NAME WORLD [flags...]: every rank of a WORLD-rank run in the
# background (rank r's output in NAME.r.out, exit code in NAME.r.rc), waited for.
ranks() {
  local name="$1" world="$2" port r
  shift 2
  port="$(free_port)"
  for ((r = 0; r < world; r++)); do
    ( "$snnsim" "${run[@]}" --world-size "$world" --rank "$r" --master "127.0.0.1:$port" --dist-timeout 30 "$@" \
        >"$tmp/$name.$r.out" 2>"$tmp/$name.$r.err"; echo $? >"$tmp/$name.$r.rc" ) &
    pids+=($!)
  done
  wait
}

# same_results NAME SUMMARY: the summary's results equal one process's.
same_results() {
  "$python" - "$tmp/one.json" "$2" <<'EOF' || fail "$1: results differ from one process's"
import json, sys
one, many = (json.load(open(p)) for p in sys.argv[1:3])
for key in ("samples", "accuracy", "accuracy_by_step", "firing_rate", "steps"):
    if one[key] != many[key]:
        sys.exit(f"{key}: {one[key]} in one process, {many[key]} over ranks")
print(f"same: accuracy {one['accuracy']}, firing rates {many['firing_rate']}, {many['ranks']} ranks {many['samples_per_rank']}")
EOF
}

# Two and three ranks (the fixture's 100 test digits: 50 + 50, and 33 + 33 + 34).
for world in 2 3; do
  ranks "w$world" "$world" --summary "$tmp/w$world.json"
  for ((r = 0; r < world; r++)); do
    [[ $(cat "$tmp/w$world.$r.rc") == 0 ]] || fail "$world ranks: rank $r exit $(cat "$tmp/w$world.$r.rc"): $(cat "$tmp/w$world.$r.err")"
  done
  same_results "$world ranks" "$tmp/w$world.json" && ok
  # Rank 0 speaks for the run; the others print nothing.
  grep -q "^ranks: $world processes; samples 0\.\." "$tmp/w$world.0.out" && ok || fail "$world ranks: no ranks line: $(cat "$tmp/w$world.0.out")"
  [[ ! -s "$tmp/w$world.1.out" ]] && ok || fail "$world ranks: rank 1 printed: $(cat "$tmp/w$world.1.out")"
done
# Where the ranks sharing this machine run: on cores of their own where
# their threads fill the machine (1 thread each on 2 cores), else as they were.
if (( $(nproc) == 2 )); then
  grep -qx "cores: each rank on a core of its own (2 ranks on this machine)" "$tmp/w2.0.out" && ok ||
    fail "2 ranks of 1 thread on 2 cores: $(cat "$tmp/w2.0.out")"
else
  grep -q "^cores: not bound (" "$tmp/w2.0.out" && ok || fail "2 ranks of 1 thread on $(nproc) cores: $(cat "$tmp/w2.0.out")"
fi
ranks nobind 2 --cpu-bind none
grep -qx "cores: not bound (--cpu-bind none)" "$tmp/nobind.0.out" && ok || fail "--cpu-bind none: $(cat "$tmp/nobind.0.out")"
grep -q '"samples_per_rank": \[' "$tmp/w3.json" && "$python" -c "
import json, sys; j = json.load(open('$tmp/w3.json')); sys.exit(j['samples_per_rank'] != [33, 33, 34])" && ok ||
  fail "3 ranks: samples_per_rank: $(grep -A4 samples_per_rank "$tmp/w3.json")"

# Launched by torchrun (its agent hosts the store; each rank a client).
if [[ -x "$torchrun" ]]; then
  port="$(free_port)"
  "$torchrun" --nproc_per_node=2 --master_addr 127.0.0.1 --master_port "$port" --no-python \
    "$snnsim" "${run[@]}" --summary "$tmp/torchrun.json" >"$tmp/torchrun.out" 2>&1 ||
    fail "torchrun: $(tail -5 "$tmp/torchrun.out")"
  same_results "torchrun" "$tmp/torchrun.json" && ok
else
  fail "no torchrun beside $python"
fi

# Recording over ranks: each rank its part, rank 0 the file presenting them
# as one (virtual datasets), whose every dataset equals a one-process
# recording's; analyze and libsonata read it as one.
rec=(--record hidden,output --record-v hidden:0,5,7 --record-input)
"$snnsim" "${run[@]}" "${rec[@]}" --output "$tmp/rec1.h5" >/dev/null 2>"$tmp/err" || fail "record, one process: $(cat "$tmp/err")"
ranks rec 2 "${rec[@]}" --output "$tmp/rec2.h5"
for r in 0 1; do
  [[ $(cat "$tmp/rec.$r.rc") == 0 ]] || fail "record, 2 ranks: rank $r: $(cat "$tmp/rec.$r.err")"
done
[[ -s "$tmp/rec2.rank0-of-2.h5" && -s "$tmp/rec2.rank1-of-2.h5" ]] && ok || fail "record, 2 ranks: no parts: $(ls "$tmp")"
# same_recording ONE MERGED: every dataset equal; the growing ones virtual.
same_recording() {
  (cd / && "$python" - "$1" "$2" <<'EOF')
import h5py, numpy as np, sys
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
other = []
b.visititems(lambda n, o: other.append(n) if isinstance(o, h5py.Dataset) else None)
if sorted(names) != sorted(other):
    sys.exit(f"datasets differ: {sorted(set(names) ^ set(other))}")
for n in names:
    if not np.array_equal(a[n][()], b[n][()]):
        sys.exit(f"{n} differs")
virtual = [n for n in names if b[n].is_virtual]
if "samples/label" not in virtual or not any(n.endswith("/timestamps") for n in virtual):
    sys.exit(f"not virtual: {virtual}")
print(f"{len(names)} datasets equal, {len(virtual)} of them virtual")
EOF
}
same_recording "$tmp/rec1.h5" "$tmp/rec2.h5" >"$tmp/same" && ok || fail "record, 2 ranks: $(cat "$tmp/same")"
"$snnsim" analyze "$tmp/rec1.h5" | tail -n +2 >"$tmp/an1" && "$snnsim" analyze "$tmp/rec2.h5" | tail -n +2 >"$tmp/an2" &&
  cmp -s "$tmp/an1" "$tmp/an2" && ok || fail "analyze: the merged recording's differs: $(diff "$tmp/an1" "$tmp/an2" | head -5)"
"$python" -c "
import libsonata, sys
a = libsonata.SpikeReader('$tmp/rec1.h5')['hidden'].get()
b = libsonata.SpikeReader('$tmp/rec2.h5')['hidden'].get()
sys.exit(0 if a == b and len(a) > 0 else 1)" && ok || fail "libsonata reads other spikes from the merged recording"
ranks exists 2 "${rec[@]}" --output "$tmp/rec2.h5"
expect_all exists 2 2 "exists; pass --overwrite to replace it"  # the merged file on rank 0, its part on rank 1
mv "$tmp/rec2.rank1-of-2.h5" "$tmp/moved.h5"
expect_error "a part moved away" "is a view of '.*rec2.rank1-of-2.h5', which is missing" analyze "$tmp/rec2.h5"
mv "$tmp/moved.h5" "$tmp/rec2.rank1-of-2.h5"

# A rank killed while recording: --resume on the same world size finishes
# the parts and the merged file equals a one-process recording.
long=(--checkpoint "$tmp/net.h5" --data-dir "$fixture" --split train --threads 1 --batch-size 4 --T 3000
      --steps-per-tick 500 --record output)
"$snnsim" run "${long[@]}" --output "$tmp/long1.h5" >/dev/null 2>"$tmp/err" || fail "long, one process: $(cat "$tmp/err")"
# start_long NAME: the long run on 2 ranks recording $tmp/NAME.h5 (pids in
# zero and one, stderr in $tmp/NAME.R.err), once rank 1 records (both
# ranks have joined by then).
start_long() {
  local port
  port="$(free_port)"
  "$snnsim" run "${long[@]}" --output "$tmp/$1.h5" --world-size 2 --rank 0 --master "127.0.0.1:$port" \
    --dist-timeout 120 >/dev/null 2>"$tmp/$1.0.err" &
  zero=$!
  "$snnsim" run "${long[@]}" --output "$tmp/$1.h5" --world-size 2 --rank 1 --master "127.0.0.1:$port" \
    --dist-timeout 120 >/dev/null 2>"$tmp/$1.1.err" &
  one=$!
  pids+=($zero $one)
  store_port=$port
  for _ in $(seq 1 600); do [[ -e "$tmp/$1.rank1-of-2.h5.partial" ]] && break; sleep 0.1; done
  sleep 0.5
}
start_long long2
kill -9 "$one"
start=$SECONDS
wait "$zero" && fail "long: rank 0 ended well after rank 1 was killed"
# Rank 0 ends with one line at its next exchange, well before the timeout.
[[ $(wc -l <"$tmp/long2.0.err") -eq 1 ]] && grep -q "rank 0: lost a peer during" "$tmp/long2.0.err" && ok ||
  fail "killed rank: rank 0 said: $(cat "$tmp/long2.0.err")"
((SECONDS - start < 100)) && ok || fail "killed rank: rank 0 took $((SECONDS - start)) s to end"
[[ -e "$tmp/long2.rank1-of-2.h5.partial" ]] && ok || fail "long: rank 1 left no unfinished part: $(ls "$tmp")"
# The unfinished part names the run that continues it, not itself.
"$snnsim" inspect "$tmp/long2.rank1-of-2.h5.partial" 2>&1 |
  grep -qF "continue it with: snnsim run --resume $tmp/long2.h5 on each of its 2 ranks (this file is rank 1's part)" &&
  ok || fail "inspect of a killed rank's part: $("$snnsim" inspect "$tmp/long2.rank1-of-2.h5.partial" 2>&1)"
mkdir "$tmp/killed" && cp "$tmp"/long2.rank* "$tmp/killed/"
# resume_both: --resume on 2 ranks; the merged file must equal one process's.
resume_both() {
  local what="$1" port
  port="$(free_port)"
  for r in 0 1; do
    ( "$snnsim" run --resume "$tmp/long2.h5" --threads 1 --world-size 2 --rank $r --master "127.0.0.1:$port" \
        --dist-timeout 60 >/dev/null 2>"$tmp/resume.$r.err"; echo $? >"$tmp/resume.$r.rc" ) &
  done
  wait
  for r in 0 1; do
    [[ $(cat "$tmp/resume.$r.rc") == 0 ]] || fail "long, $what: resume rank $r: $(cat "$tmp/resume.$r.err")"
  done
  same_recording "$tmp/long1.h5" "$tmp/long2.h5" >"$tmp/same" && ok || fail "long, $what: $(cat "$tmp/same")"
}
resume_both "resumed"
# The same after `snnsim recover` made the killed part a normal file: it is
# resumed, not taken for a finished part (the merge used to refuse it).
rm -f "$tmp"/long2*
cp "$tmp"/killed/* "$tmp/"
"$snnsim" recover "$tmp/long2.rank1-of-2.h5" 2>&1 | grep -qF "continue the run with: snnsim run --resume $tmp/long2.h5 on each of its 2 ranks" &&
  ok || fail "recover of a killed rank's part names the wrong command"
resume_both "recovered, then resumed"
# Rank 0, the store's host, killed: the other rank ends at once with one
# line and exit 2 (it was 1).
start_long long3
kill -9 "$zero"
start=$SECONDS
wait "$one"
rc=$?
[[ $rc -eq 2 && $(wc -l <"$tmp/long3.1.err") -eq 1 ]] &&
  grep -q "lost the run's store at 127.0.0.1:$store_port (.*): rank 0 ended without a word (killed?)" "$tmp/long3.1.err" &&
  ((SECONDS - start < 30)) && ok || fail "rank 0 killed: rank 1 exit $rc after $((SECONDS - start)) s: $(cat "$tmp/long3.1.err")"
# Recorded without --record-v: the merged file has the format's (empty)
# /report group, and analyze reads it as the one-process file (it refused
# it). A later rank's part, whose time axis starts at its first sample,
# analyzes too (its spikes were taken to lie outside their samples).
"$snnsim" analyze "$tmp/long1.h5" | tail -n +2 >"$tmp/an1" && "$snnsim" analyze "$tmp/long2.h5" | tail -n +2 >"$tmp/an2" &&
  cmp -s "$tmp/an1" "$tmp/an2" && ok || fail "analyze of a merged recording without potentials: $(diff "$tmp/an1" "$tmp/an2" | head -5)"
"$snnsim" analyze "$tmp/long2.rank1-of-2.h5" >"$tmp/an.part" 2>&1 && grep -q "^population output (layer 2, 10 neurons recorded): [1-9]" "$tmp/an.part" &&
  ok || fail "analyze of rank 1's part: $(head -3 "$tmp/an.part")"

# Settings that differ: every rank names the first difference.
port="$(free_port)"
( "$snnsim" "${run[@]}" --world-size 2 --rank 0 --master "127.0.0.1:$port" --dist-timeout 30 >"$tmp/set.0.out" \
    2>"$tmp/set.0.err"; echo $? >"$tmp/set.0.rc" ) &
( "$snnsim" "${run[@]}" --world-size 2 --rank 1 --master "127.0.0.1:$port" --dist-timeout 30 --T 2 \
    >"$tmp/set.1.out" 2>"$tmp/set.1.err"; echo $? >"$tmp/set.1.rc" ) &
wait
expect_all set 2 2 "the ranks were started with different settings (T: not set on rank 0, 2 on rank 1)"

# More ranks than samples.
ranks few 3 --limit 2
expect_all few 3 2 "3 ranks for 2 samples: every rank needs at least one sample"

# A rank whose file is missing: it names it, the others name it as its failure.
port="$(free_port)"
( "$snnsim" "${run[@]}" --world-size 2 --rank 0 --master "127.0.0.1:$port" --dist-timeout 30 >"$tmp/miss.0.out" \
    2>"$tmp/miss.0.err"; echo $? >"$tmp/miss.0.rc" ) &
( "$snnsim" run --checkpoint "$tmp/absent.h5" --data-dir "$fixture" --world-size 2 --rank 1 \
    --master "127.0.0.1:$port" --dist-timeout 30 >"$tmp/miss.1.out" 2>"$tmp/miss.1.err"; echo $? >"$tmp/miss.1.rc" ) &
wait
expect_all miss 2 2 "absent.h5"
grep -q "^snnsim: error: rank 1 failed: rank 1: " "$tmp/miss.0.err" && ok || fail "missing file: rank 0 says: $(cat "$tmp/miss.0.err")"

# A rank that never arrives: the others name it after --dist-timeout.
port="$(free_port)"
start=$SECONDS
"$snnsim" "${run[@]}" --world-size 2 --rank 0 --master "127.0.0.1:$port" --dist-timeout 2 >"$tmp/late.0.out" 2>"$tmp/late.0.err"
echo $? >"$tmp/late.0.rc"
expect_all late 1 2 "1 of the 2 ranks did not arrive at 127.0.0.1:$port within 2 s (rank 1 missing)"
((SECONDS - start < 30)) && ok || fail "a missing rank took $((SECONDS - start)) s to be named"
# Rank 1 without rank 0: nothing listens at the store's port. It gives up
# after --dist-timeout, not two or three times it (c10d's own retries), and
# does not blame another program.
port="$(free_port)"
start=$SECONDS
expect_error "store never hosted" "rank 1 could not reach the run's store at 127.0.0.1:$port within 3 s: nothing listens there (rank 0 hosts it" \
  "${run[@]}" --world-size 2 --rank 1 --master "127.0.0.1:$port" --dist-timeout 3
((SECONDS - start < 6)) && ok || fail "rank 1 alone took $((SECONDS - start)) s for a 3 s timeout"
# A host that does not resolve; rank 0 on an address of another machine.
# (asked again until the timeout: a launcher's DNS records may come late)
expect_error "unresolvable host" "rank 1: the store's host 'no.such.host.invalid' (--master, or MASTER_ADDR) does not resolve" \
  "${run[@]}" --world-size 2 --rank 1 --master "no.such.host.invalid:$port" --dist-timeout 2
# (Rank 0 hosts the store on every address of its machine, and reaches it
# through the loopback: behind NAT or a forwarded port the address is
# another's. Alone, it says so when the others do not arrive.)
expect_error "rank 0 elsewhere" "did not arrive at 192.0.2.1:$port within 3 s (rank 1 missing): start every rank with the same --master and world size (192.0.2.1 is not an address of this machine" \
  "${run[@]}" --world-size 2 --rank 0 --master "192.0.2.1:$port" --dist-timeout 3
# --world-size alone would make every process rank 0 of its own run.
expect_error "world size without rank" "--world-size 2 needs --rank (this process's rank, 0 .. 1)" "${run[@]}" --world-size 2
WORLD_SIZE=2 RANK=1 expect_error "flags under a launcher" "--world-size, --rank or --master disagree with the launcher's WORLD_SIZE=2, RANK=1" \
  "${run[@]}" --world-size 3 --rank 1

# The flags' own checks.
expect_error "rank without world size" "--rank needs --world-size" "${run[@]}" --rank 1
expect_error "bad --cpu-bind" "--cpu-bind: expected cores or none, got 'bogus'" "${run[@]}" --world-size 2 --rank 0 --cpu-bind bogus
expect_error "rank outside" "rank 2 is outside the run's 2 ranks (0..1)" "${run[@]}" --world-size 2 --rank 2
expect_error "bad master" "--master: expected HOST:PORT" "${run[@]}" --world-size 2 --rank 0 --master nohost
expect_error "two ports" "--master: expected HOST:PORT" "${run[@]}" --world-size 2 --rank 0 --master 127.0.0.1:29500:1
expect_error "empty master" "--master: expected HOST:PORT" "${run[@]}" --world-size 2 --rank 0 --master ""
expect_error "huge world" "world size: expected 1..65536 processes, got 99999999999" "${run[@]}" --world-size 99999999999
expect_error "huge timeout" "timeout: expected more than 0 and at most 604800 seconds" "${run[@]}" --world-size 2 --rank 0 \
  --dist-timeout 1e300
# Another program on the store's port that accepts the connection and never
# answers: c10d's client would wait for ever; the rank ends with one line
# after the timeout and a margin of 2 s.
port="$(free_port)"
"$python" -c "import socket, sys, time
s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(5); time.sleep(60)" "$port" &
listener=$!
sleep 1
start=$SECONDS
expect_error "silent store" "no answer from the run's store at 127.0.0.1:$port within 4 s" "${run[@]}" --world-size 2 \
  --rank 1 --master "127.0.0.1:$port" --dist-timeout 2
((SECONDS - start < 8)) && ok || fail "the silent store took $((SECONDS - start)) s to be named"
kill "$listener" 2>/dev/null
finish
