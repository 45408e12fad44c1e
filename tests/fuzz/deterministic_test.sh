#!/usr/bin/env bash
# The same seed gives the same inputs and outcomes: two runs of a fixed
# number of iterations print the same digest (for every target).
#   deterministic_test.sh SNN_FUZZ CORPUS_ROOT WORK_DIR
set -uo pipefail
fuzz="$1" corpus="$2" work="$3"
status=0
for target in idx csv config recording; do
  digests=()
  for run in 1 2; do
    out="$("$fuzz" "$target" "$corpus/$target" 11 600 "$work/$target-$run" 60 2>&1)"
    digests+=("$(grep -o 'outcomes [0-9a-f]*' <<<"$out")")
    [[ -n "${digests[-1]}" ]] || { echo "$target run $run failed: $out"; status=1; }
  done
  if [[ -n "${digests[0]}" && "${digests[0]}" == "${digests[1]}" ]]; then
    echo "ok: $target repeats (${digests[0]})"
  else
    echo "FAILED: $target gave ${digests[0]} then ${digests[1]}"
    status=1
  fi
done
exit $status
