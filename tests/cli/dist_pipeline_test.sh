#!/usr/bin/env bash
# `snnsim run --parallel pipeline` (issue 22): the network's stages on
# different processes, blocks of K steps passed from rank to rank over c10d
# (Gloo) and the results back to rank 0, give one process's results bit for
# bit for any cut (--balance), K and world size, by hand and under torchrun;
# bad placements, differing settings and a killed rank end every rank with
# one line, never a hang.
#   dist_pipeline_test.sh SNNSIM FIXTURE_DIR PYTHON
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

# Three neuron layers, so that up to three ranks hold a stage each.
"$snnsim" train --data-dir "$fixture" --layers 784-40-24-10 --T 5 --epochs 6 --seed 5 --v-threshold 0.2 --threads 1 \
  --checkpoint "$tmp/net.h5" >/dev/null 2>"$tmp/err" || { fail "train: $(cat "$tmp/err")"; finish; exit 1; }
run=(run --checkpoint "$tmp/net.h5" --data-dir "$fixture" --threads 1 --batch-size 8)
"$snnsim" "${run[@]}" --summary "$tmp/one.json" >"$tmp/one.out" 2>&1 || fail "one process: $(cat "$tmp/one.out")"

# ranks NAME WORLD [flags...]: every rank of a WORLD-rank pipeline in the
# background (rank r's output in NAME.r.out, exit code in NAME.r.rc), waited for.
ranks() {
  local name="$1" world="$2" port r
  shift 2
  port="$(free_port)"
  for ((r = 0; r < world; r++)); do
    ( "$snnsim" "${run[@]}" --parallel pipeline --world-size "$world" --rank "$r" --master "127.0.0.1:$port" \
        --dist-timeout 30 "$@" >"$tmp/$name.$r.out" 2>"$tmp/$name.$r.err"; echo $? >"$tmp/$name.$r.rc" ) &
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
        sys.exit(f"{key}: {one[key]} in one process, {many[key]} over a pipeline of ranks")
if not min(one["firing_rate"]) > 0:
    sys.exit(f"the test network must fire in every layer: {one['firing_rate']}")
if many["parallel"] != "pipeline":
    sys.exit(f"parallel: {many['parallel']}")
print(f"same: accuracy {one['accuracy']}, firing rates {many['firing_rate']}, {many['ranks']} ranks")
EOF
}

# all_ok NAME WORLD: every rank exited 0; rank 0 alone printed.
all_ok() {
  local r
  for ((r = 0; r < $2; r++)); do
    [[ $(cat "$tmp/$1.$r.rc") == 0 ]] || { fail "$1: rank $r exit $(cat "$tmp/$1.$r.rc"): $(cat "$tmp/$1.$r.err")"; return 1; }
  done
  for ((r = 1; r < $2; r++)); do
    [[ ! -s "$tmp/$1.$r.out" ]] || { fail "$1: rank $r printed: $(cat "$tmp/$1.$r.out")"; return 1; }
  done
}

# Two ranks with each cut and K (0: the pipeline's default, 1), three ranks.
for cut in 1,2 2,1; do
  for K in 0 1 2 5; do
    ranks "c$cut.k$K" 2 --balance "$cut" --steps-per-tick "$K" --summary "$tmp/c$cut.k$K.json"
    all_ok "c$cut.k$K" 2 && same_results "2 ranks, balance $cut, K $K" "$tmp/c$cut.k$K.json" >/dev/null && ok
  done
done
grep -q "^pipeline: 2 ranks, a stage each (layers 2,1 on cpu), K = 5, batch size 8; communication" "$tmp/c2,1.k5.0.out" &&
  ok || fail "no pipeline line: $(cat "$tmp/c2,1.k5.0.out")"
grep -q "K = 1, batch size 8" "$tmp/c2,1.k0.0.out" && ok || fail "K 0 in a pipeline over ranks is not 1: $(cat "$tmp/c2,1.k0.0.out")"
ranks w3 3 --summary "$tmp/w3.json" --devices cpu,cpu,cpu
all_ok w3 3 && same_results "3 ranks" "$tmp/w3.json" && ok

# Launched by torchrun.
if [[ -x "$torchrun" ]]; then
  port="$(free_port)"
  "$torchrun" --nproc_per_node=2 --master_addr 127.0.0.1 --master_port "$port" --no-python \
    "$snnsim" "${run[@]}" --parallel pipeline --summary "$tmp/torchrun.json" >"$tmp/torchrun.out" 2>&1 ||
    fail "torchrun: $(tail -5 "$tmp/torchrun.out")"
  same_results "torchrun" "$tmp/torchrun.json" >/dev/null && ok
else
  fail "no torchrun beside $python"
fi

# More ranks than layers, cuts and devices that do not fit the ranks.
ranks many 4
expect_all many 4 2 "a pipeline over 4 ranks, one stage each: 4 devices (stages) for 3 layers"
ranks cut 2 --balance 1,1,1
expect_all cut 2 2 "a pipeline over 2 ranks, one stage each: balance has 3 entries but there are 2 devices"
ranks dev 2 --devices cpu,cpu,cpu
expect_all dev 2 2 "devices: a pipeline over 2 ranks takes one device per rank, or one for all; got cpu,cpu,cpu"
# --balance auto: rank 0 times the layers, every rank takes its cut.
ranks auto 2 --balance auto --summary "$tmp/auto.json"
if all_ok auto 2 && same_results "balance auto" "$tmp/auto.json" >/dev/null; then
  cut="$(sed -n 's/^balance auto: \([0-9]*,[0-9]*\) layers per stage (measured ms per layer: .*)$/\1/p' "$tmp/auto.0.out")"
  [[ -n $cut ]] && grep -q "^pipeline: 2 ranks, a stage each (layers $cut on cpu)" "$tmp/auto.0.out" && ok ||
    fail "balance auto: rank 0 does not say the cut it chose and ran: $(cat "$tmp/auto.0.out")"
fi
ranks automany 4 --balance auto
expect_all automany 4 2 "a pipeline over 4 ranks, one stage each: cannot split 3 layers into 4 non-empty stages"
ranks rec 2 --output "$tmp/rec.h5"
expect_all rec 2 2 "recording a pipeline over ranks is not supported yet"
[[ ! -e "$tmp/rec.h5" ]] && ok || fail "a refused recording left $tmp/rec.h5"
expect_error "a pipeline needs ranks" "--parallel pipeline needs a run over several processes" \
  "${run[@]}" --parallel pipeline
expect_error "--parallel" "parallel: expected data or pipeline, got .pipe." \
  "${run[@]}" --parallel pipe
expect_error "train through a pipeline" "--parallel pipeline: training through a pipeline over ranks is not supported yet" \
  train --data-dir "$fixture" --layers 784-16-10 --T 2 --epochs 1 --checkpoint "$tmp/never.h5" --parallel pipeline
[[ ! -e "$tmp/never.h5" ]] && ok || fail "a refused training wrote $tmp/never.h5"

# Ranks whose cut or K differ: every rank names the first difference.
port="$(free_port)"
( "$snnsim" "${run[@]}" --parallel pipeline --world-size 2 --rank 0 --master "127.0.0.1:$port" --dist-timeout 30 \
    --steps-per-tick 2 >"$tmp/set.0.out" 2>"$tmp/set.0.err"; echo $? >"$tmp/set.0.rc" ) &
( "$snnsim" "${run[@]}" --parallel pipeline --world-size 2 --rank 1 --master "127.0.0.1:$port" --dist-timeout 30 \
    --steps-per-tick 3 >"$tmp/set.1.out" 2>"$tmp/set.1.err"; echo $? >"$tmp/set.1.rc" ) &
wait
expect_all set 2 2 "the ranks were started with different settings (steps-per-tick: 2 on rank 0, 3 on rank 1)"

# A killed rank, either one: the other ends with one line at once, long
# before --dist-timeout, wherever it was waiting in the pipeline.
long=(run --checkpoint "$tmp/net.h5" --data-dir "$fixture" --split train --threads 1 --batch-size 4 --T 20000
      --steps-per-tick 50 --parallel pipeline --world-size 2 --dist-timeout 120)
for victim in 1 0; do
  port="$(free_port)"
  "$snnsim" "${long[@]}" --rank 0 --master "127.0.0.1:$port" >/dev/null 2>"$tmp/kill.0.err" &
  zero=$!
  "$snnsim" "${long[@]}" --rank 1 --master "127.0.0.1:$port" >/dev/null 2>"$tmp/kill.1.err" &
  one=$!
  pids+=($zero $one)
  sleep 3  # both have joined and are passing blocks
  if [[ $victim == 1 ]]; then kill -9 "$one"; survivor=$zero; s=0; else kill -9 "$zero"; survivor=$one; s=1; fi
  start=$SECONDS
  wait "$survivor" && fail "killed rank $victim: rank $s ended well"
  [[ $(wc -l <"$tmp/kill.$s.err") -eq 1 ]] && grep -q "error: " "$tmp/kill.$s.err" && ok ||
    fail "killed rank $victim: rank $s said: $(cat "$tmp/kill.$s.err")"
  ((SECONDS - start < 60)) && ok || fail "killed rank $victim: rank $s took $((SECONDS - start)) s to end"
  wait 2>/dev/null
done
cat "$tmp/kill.0.err" "$tmp/kill.1.err" | sed "s/^/  killed-rank messages: /"
finish
