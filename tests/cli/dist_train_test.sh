#!/usr/bin/env bash
# Data-parallel `snnsim train` over several processes (issue 22): the loss,
# accuracies and checkpoint of 2 and 3 ranks against one process's (a LIF
# chain: bit for bit; a PLIF chain, where more gradient terms meet: within
# the few ulps that the association of the ranks' double sums allows, and
# bit for bit across reruns); resuming with another world size; rank 0
# alone writes; BatchNorm refused.
#   dist_train_test.sh SNNSIM FIXTURE_DIR PYTHON
set -uo pipefail
snnsim="$(realpath "$1")"
fixture="$(realpath "$2")"
python="$(realpath -s "$3")"  # -s: a venv's python is a link that must stay one
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/dist_lib.sh"

# compare A B TOLERANCE: every float dataset of checkpoint B equals A's
# (TOLERANCE 0) or lies within TOLERANCE of it.
compare() {
  "$python" - "$@" <<'EOF'
import h5py, numpy as np, sys
a, b, tol = h5py.File(sys.argv[1]), h5py.File(sys.argv[2]), float(sys.argv[3])
names = []
a.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and o.dtype.kind == "f" else None)
assert any(n.startswith("parameters/") for n in names), names
worst = 0.0
for n in names:
    x, y = a[n][()], b[n][()]
    d = float(np.abs(x.astype(np.float64) - y.astype(np.float64)).max()) if x.size else 0.0
    worst = max(worst, d)
    if (tol == 0 and not np.array_equal(x, y)) or d > tol:
        sys.exit(f"{n}: differs by {d:.3g} (allowed {tol})")
print(f"{len(names)} datasets, largest difference {worst:.3g}")
EOF
}

# train_ranks NAME WORLD [train flags...]: a WORLD-rank training (rank r's
# stdout in NAME.r.out), the checkpoint NAME.h5 written by rank 0.
train_ranks() {
  local name="$1" world="$2" port r
  shift 2
  port="$(free_port)"
  for ((r = 0; r < world; r++)); do
    ( "$snnsim" train "$@" --checkpoint "$tmp/$name.h5" --world-size "$world" --rank "$r" --master "127.0.0.1:$port" \
        --dist-timeout 60 >"$tmp/$name.$r.out" 2>"$tmp/$name.$r.err"; echo $? >"$tmp/$name.$r.rc" ) &
  done
  wait
  for ((r = 0; r < world; r++)); do
    [[ $(cat "$tmp/$name.$r.rc") == 0 ]] || { fail "$name: rank $r exit $(cat "$tmp/$name.$r.rc"): $(cat "$tmp/$name.$r.err")"; return 1; }
  done
}

# epoch_lines FILE: the epoch lines without their timing.
epoch_lines() { grep "^epoch " "$1" | sed 's/, [0-9.]* s$//'; }

lif=(--data-dir "$fixture" --layers 784-48-10 --T 4 --epochs 2 --seed 3 --v-threshold 0.5 --threads 1 --batch-size 32)
"$snnsim" train "${lif[@]}" --checkpoint "$tmp/one.h5" >"$tmp/one.out" 2>&1 || fail "one process: $(cat "$tmp/one.out")"
for world in 2 3; do
  train_ranks "lif$world" "$world" "${lif[@]}" || continue
  compare "$tmp/one.h5" "$tmp/lif$world.h5" 0 >/dev/null && ok || fail "$world ranks: checkpoint differs from one process's"
  [[ "$(epoch_lines "$tmp/one.out")" == "$(epoch_lines "$tmp/lif$world.0.out")" ]] && ok ||
    fail "$world ranks: epochs differ: $(epoch_lines "$tmp/lif$world.0.out") vs $(epoch_lines "$tmp/one.out")"
  grep -q "1 thread per rank, $world ranks (batches of 32 split among them)" "$tmp/lif$world.0.out" && ok ||
    fail "$world ranks: no ranks in: $(head -1 "$tmp/lif$world.0.out")"
  [[ ! -s "$tmp/lif$world.1.out" ]] && ok || fail "$world ranks: rank 1 printed: $(cat "$tmp/lif$world.1.out")"
  # Both layers' gradients came from exchanged rows (spikes and gradient
  # columns cost fewer bytes than the sums here): one process's by construction.
  grep -q "^optimizer: .*; 2 of 2 Linear layers summed from exchanged rows (rank 0)$" "$tmp/lif$world.0.out" && ok ||
    fail "$world ranks: $(grep optimizer "$tmp/lif$world.0.out")"
done

# PLIF, cross-entropy, shifted images: more terms meet in each gradient.
plif=(--data-dir "$fixture" --layers 784-128-64-10 --model plif --v-threshold 0.3 --loss ce --T 6 --epochs 3 --seed 4
      --threads 1 --batch-size 50 --augment-shift 2)
"$snnsim" train "${plif[@]}" --checkpoint "$tmp/plif1.h5" >"$tmp/plif1.out" 2>&1 || fail "plif: $(cat "$tmp/plif1.out")"
if train_ranks plif2 2 "${plif[@]}" && train_ranks plif2b 2 "${plif[@]}"; then
  compare "$tmp/plif2.h5" "$tmp/plif2b.h5" 0 >/dev/null && ok || fail "plif: two 2-rank runs differ"
  compare "$tmp/plif1.h5" "$tmp/plif2.h5" 1e-6 >"$tmp/plif.cmp" && ok || fail "plif: 2 ranks far from one process: $(cat "$tmp/plif.cmp")"
  [[ "$(epoch_lines "$tmp/plif1.out")" == "$(epoch_lines "$tmp/plif2.0.out")" ]] && ok ||
    fail "plif: epochs differ: $(epoch_lines "$tmp/plif2.0.out") vs $(epoch_lines "$tmp/plif1.out")"
  echo "plif, 2 ranks against one process: $(cat "$tmp/plif.cmp")"
fi

# Resumed with another world size: 1 epoch on 2 ranks, then 1 process.
half=("${lif[@]}")
half[7]=1  # --epochs 1
if train_ranks half 2 "${half[@]}"; then
  "$snnsim" train --resume "$tmp/half.h5" --epochs 2 --threads 1 --data-dir "$fixture" >"$tmp/resume.out" 2>&1 ||
    fail "resume: $(cat "$tmp/resume.out")"
  compare "$tmp/one.h5" "$tmp/half.h5" 0 >/dev/null && ok || fail "resumed on one process: differs from one process's run"
fi

# examples/dist/train.slurm with stand-ins for Slurm's srun (its tasks as
# local processes) and scontrol (this machine as the first node).
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
mkdir -p "$tmp/slurm/bin" && ln -s "$src/examples" "$tmp/slurm/examples" && ln -s "$snnsim" "$tmp/slurm/bin/snnsim"
printf '#!/bin/bash\necho 127.0.0.1\n' >"$tmp/slurm/bin/scontrol"
cat >"$tmp/slurm/bin/srun" <<'EOF'
#!/bin/bash
pids=()
for ((r = 0; r < SLURM_NTASKS; r++)); do SLURM_PROCID=$r "$@" & pids+=($!); done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc
EOF
chmod +x "$tmp/slurm/bin/scontrol" "$tmp/slurm/bin/srun"
( cd "$tmp/slurm" && PATH="$tmp/slurm/bin:$PATH" SLURM_NTASKS=2 SLURM_CPUS_PER_TASK=1 SLURM_JOB_NODELIST=node01 \
    SNNSIM_MASTER_PORT="$(free_port)" SNNSIM_TRAIN_FLAGS="--layers 784-32-10 --T 4 --epochs 1 --limit 256" \
    bash "$src/examples/dist/train.slurm" >"$tmp/slurm.out" 2>&1 ) &&
  grep -q "1 thread per rank, 2 ranks" "$tmp/slurm.out" && [[ -s "$tmp/slurm/slurm-checkpoint.h5" ]] && ok ||
  fail "train.slurm: $(cat "$tmp/slurm.out")"

# BatchNorm's batch statistics cannot be split among ranks.
cat >"$tmp/bn.toml" <<'EOF'
[[nodes]]
name = "input"
kind = "Input"
shape = [784]
[[nodes]]
name = "fc"
kind = "Affine"
features = 32
[[nodes]]
name = "bn"
kind = "BatchNorm"
[[nodes]]
name = "lif"
kind = "LIF"
[[nodes]]
name = "out_fc"
kind = "Affine"
features = 10
[[nodes]]
name = "out_lif"
kind = "LIF"
[[nodes]]
name = "output"
kind = "Output"
EOF
port="$(free_port)"
for r in 0 1; do
  ( "$snnsim" train --data-dir "$fixture" --model "$tmp/bn.toml" --epochs 1 --checkpoint "$tmp/bn.h5" --world-size 2 \
      --rank $r --master "127.0.0.1:$port" --dist-timeout 30 >"$tmp/bn.$r.out" 2>"$tmp/bn.$r.err"; echo $? >"$tmp/bn.$r.rc" ) &
done
wait
for r in 0 1; do
  [[ $(cat "$tmp/bn.$r.rc") == 2 ]] && grep -q "BatchNorm node 'bn' normalises over the whole batch" "$tmp/bn.$r.err" &&
    [[ $(wc -l <"$tmp/bn.$r.err") == 1 ]] && ok || fail "batchnorm: rank $r: exit $(cat "$tmp/bn.$r.rc"): $(cat "$tmp/bn.$r.err")"
done
[[ ! -e "$tmp/bn.h5" ]] && ok || fail "batchnorm: a checkpoint was written"

# Settings that differ between ranks are named by their flags (T, not
# config.steps; the data, not labels_fingerprint).
port="$(free_port)"
for r in 0 1; do
  ( "$snnsim" train --data-dir "$fixture" --layers 784-16-10 --T $((2 + r)) --epochs 1 --limit $((64 + 64 * r)) \
      --threads 1 --checkpoint "$tmp/set.h5" --world-size 2 --rank $r --master "127.0.0.1:$port" --dist-timeout 30 \
      >"$tmp/set.$r.out" 2>"$tmp/set.$r.err"; echo $? >"$tmp/set.$r.rc" ) &
done
wait
for r in 0 1; do
  [[ $(cat "$tmp/set.$r.rc") == 2 ]] && [[ $(wc -l <"$tmp/set.$r.err") == 1 ]] &&
    grep -q "the ranks were started with different settings (T: 2 on rank 0, 3 on rank 1)" "$tmp/set.$r.err" && ok ||
    fail "settings: rank $r: exit $(cat "$tmp/set.$r.rc"): $(cat "$tmp/set.$r.err")"
done
finish
