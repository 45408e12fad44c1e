#!/usr/bin/env bash
# NIR with the real peers (issue 19): small networks trained for a few steps
# in SpikingJelly 2.0 and snnTorch 1.0 (an FC net and a conv net each),
# written by their own NIR exporters, run by snnsim on MNIST digits: every
# layer's spikes equal the framework's own on the same input spikes
# (tests/python/peer_nir.py compares, ties at the threshold aside). And a
# network trained by snnsim, exported, imported by snnTorch's
# import_from_nir: the same spikes again.
#   nir_peers_test.sh SNNSIM FIXTURE_DIR PEERS_PYTHON (.venv-peers, scripts/setup.sh)
set -uo pipefail
snnsim="$1"
fixture="$2"
peers="$3"
check="$(dirname "${BASH_SOURCE[0]}")/../python/peer_nir.py"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[[ -x "$peers" ]] || { echo "FAIL: no peers' Python at $peers: run scripts/setup.sh"; exit 1; }
common=(--data-dir "$fixture" --threads 2)

# The --record and --record-v lists of every neuron layer in DIR/layers.json.
lists() {
  "$peers" -c "import json,sys; l = json.load(open(sys.argv[1]))
print(','.join(x['node'] for x in l), ','.join(x['node'] + ':0-' + str(x['neurons'] - 1) for x in l))" "$1/layers.json"
}

for fw in spikingjelly snntorch; do
  for arch in fc conv; do
    dir="$tmp/$fw-$arch"
    if ! "$peers" "$check" make "$fw" "$arch" "$dir" >"$tmp/make.out" 2>&1; then
      fail "$fw $arch: the peer's training or export failed: $(tail -5 "$tmp/make.out")"
      continue
    fi
    read -r pops potentials < <(lists "$dir")
    if ! "$snnsim" run "${common[@]}" --T 8 --limit 20 --model "$dir/net.nir" --record-input --record "$pops" \
      --record-v "$potentials" --output "$dir/rec.h5" >"$tmp/run.out" 2>&1; then
      fail "$fw $arch: snnsim run of the peer's export: $(cat "$tmp/run.out")"
      continue
    fi
    "$peers" "$check" compare "$fw" "$arch" "$dir" "$dir/rec.h5" >"$tmp/cmp.out" 2>&1 && ok ||
      fail "$fw $arch: snnsim's spikes differ from the peer's: $(tail -3 "$tmp/cmp.out")"
    cat "$tmp/cmp.out"
  done
done

# snnsim's export imported by snnTorch. (Its import of a conv net fails in
# snnTorch 1.0 itself, and SpikingJelly 2.0 imports only uniform LIF/IF;
# docs/GRAPHS.md lists what each peer takes.)
"$snnsim" train "${common[@]}" --layers 784-32-10 --v-threshold 0.5 --epochs 2 --limit 300 --T 8 --seed 1 \
  --checkpoint "$tmp/ours.h5" >/dev/null 2>"$tmp/err" || fail "train: $(cat "$tmp/err")"
"$snnsim" export "$tmp/ours.h5" --nir "$tmp/ours.nir" >/dev/null 2>"$tmp/err" || fail "export: $(cat "$tmp/err")"
"$snnsim" run "${common[@]}" --limit 30 --checkpoint "$tmp/ours.h5" --record-input --record hidden,output \
  --record-v hidden:0-31,output:0-9 --output "$tmp/ours_rec.h5" >/dev/null 2>"$tmp/err" || fail "run: $(cat "$tmp/err")"
"$peers" "$check" import-snntorch "$tmp/ours.nir" "$tmp/ours_rec.h5" >"$tmp/imp.out" 2>&1 && ok ||
  fail "snnTorch's import of snnsim's export: $(tail -3 "$tmp/imp.out")"
grep "^snntorch.import_from_nir" "$tmp/imp.out"

finish
