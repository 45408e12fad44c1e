#!/usr/bin/env bash
# Brian2 2.9 (cython target, .venv-brian) as a second oracle: the CUBA
# network (examples/cuba, 500 ms) built by tests/python/brian_populations.py
# from the same model file with 10 seeds; snnsim's mean rate, ISI CV and
# synchrony per population over 10 seeds of its own within Brian2's mean
# +- 3 sd.
#   brian_populations_test.sh SNNSIM FIXTURE_DIR PYTHON (.venv-brian's)
set -uo pipefail
snnsim="$1"
python="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ -x "$python" ]] || fail "no Brian2 environment at $python (scripts/setup.sh makes .venv-brian)"

sed -e 's/^duration = "1000 ms"/duration = "500 ms"/' "$here/../../examples/cuba/cuba.toml" >"$tmp/cuba.toml"
"$python" "$here/../python/brian_populations.py" "$tmp/cuba.toml" --seeds 10 --out "$tmp/brian.json" \
  >"$tmp/brian.log" 2>&1 || fail "Brian2 failed: $(tail -5 "$tmp/brian.log")"
seed_analyses "$tmp/cuba" "$tmp/cuba.toml" 10
"$python" "$here/../python/brian_populations.py" "$tmp/cuba.toml" --peer "$tmp/brian.json" --snnsim "${analyses[@]}" &&
  ok || fail "snnsim's statistics fall outside Brian2's spread"
finish
