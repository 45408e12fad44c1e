#!/usr/bin/env bash
# The messages of bad command lines and config files (issue 17, class 6):
# one line, exit 2, naming the flag or key, the value, the rule and, where one
# is close, the nearest valid name; config files named with their format;
# a table or key given twice is an error. No data is read: all fail at parsing.
#   messages_test.sh SNNSIM
set -uo pipefail
snnsim="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# expect_clean NAME ARGS...: the last error names no CLI11 internals (no
# 300-digit bounds, no "INI", no "A subcommand").
expect_clean() {
  local name="$1"
  if grep -q -e '179769313486' -e 'INI was not able' -e 'not in range' -e 'Could not convert' "$tmp/err"; then
    fail "$name: CLI11's raw message: $(cat "$tmp/err")"
  else
    ok
  fi
}

# Ranges: the rule as a person writes it, and the value.
expect_error "T zero" "snnsim: error: --T: expected a whole number >= 1, got '0'" train --T 0
expect_clean "T zero"
expect_error "T not a number" "--T: expected a whole number >= 1, got 'abc'" train --T abc
expect_error "T fraction" "--T: expected a whole number >= 1, got '1.5'" train --T 1.5
expect_error "lr zero" "--lr: expected a number > 0, got '0'" train --lr 0
expect_clean "lr zero"
expect_error "negative threads" "--threads: expected a whole number >= 0, got '-1'" train --threads -1
expect_error "augment shift too big" "--augment-shift: expected a whole number from 0 to 64, got '65'" train --augment-shift 65
expect_error "negative refractory" "--refractory: expected a whole number from 0 to 1073741824, got '-1'" neuron --refractory -1 --input x.csv
expect_error "tau not a number" "--tau: expected a finite number, got 'fast'" neuron --tau fast --input x.csv
expect_error "tau nan" "--tau: expected a finite number, got 'nan'" neuron --tau nan --input x.csv
expect_error "dt zero" "--dt: expected a number > 0, got '0'" run --dt 0 --checkpoint x.h5
expect_error "T missing its value" "--T: expected a whole number >= 1 after it, got nothing" train --T

# A flag before a bad value does not take the next argument as its own
# (the message named '5' as an unexpected argument).
expect_error "flag then bad value" "--epochs: expected a whole number >= 1, got '0'" train --overwrite --limit 5 --epochs 0
expect_error "flag then bad dt" "--dt: expected a number > 0, got '0'" run --compress --checkpoint x.h5 --dt 0
expect_error "extra argument after a flag" "unexpected argument 'extra' for 'snnsim inspect' (it takes FILE)" inspect --json x.h5 extra

# Choices: the allowed values, and the nearest.
expect_error "bad model" "--model: expected lif, if, plif, iaf_psc_delta or iaf_psc_exp, got 'lfi' (did you mean 'lif'?)" neuron --model lfi --input x.csv
expect_error "bad loss" "--loss: expected mse or ce, got 'mes' (did you mean 'mse'?)" train --loss mes
expect_error "bad plot format" "--plot-format: expected png or svg, got 'gif'" analyze x.h5 --plot-format gif
expect_clean "bad plot format"

# Unknown flags and commands: named first, with the nearest valid name.
expect_error "misspelt flag" "unknown option '--tua' for 'snnsim neuron' (did you mean '--tau'?)" neuron --tua 3 --input x.csv
expect_error "misspelt flag with =" "unknown option '--epoch' for 'snnsim train' (did you mean '--epochs'?)" train --epoch=3
expect_error "flag far from any" "unknown option '--frobnicate' for 'snnsim neuron' (see 'snnsim neuron --help')" neuron --frobnicate --input x.csv
expect_error "flag before the command" "unknown option '--tau' for 'snnsim' (it is an option of neuron, train, run or bench: put it after the command)" --tau 3 neuron
expect_error "misspelt command" "unknown command 'trian' (did you mean 'train'?; commands: neuron, train, run, recover, analyze, sweep, bench, inspect, export, simulate)" trian --T 4
expect_error "unknown command" "unknown command 'fly' (commands: neuron, train" fly
expect_error "no command" "a subcommand is required: neuron, train, run, recover, analyze, sweep, bench, inspect, export or simulate"
expect_clean "no command"
expect_error "extra argument" "unexpected argument 'b.h5' for 'snnsim analyze' (it takes FILE)" analyze a.h5 b.h5

# Config files: the file, its format, the line, the table and key, the nearest.
printf '[train]\nT = 2\nlayer = "784-10"\n' >"$tmp/typo.toml"
expect_error "TOML typo" "config '$tmp/typo.toml' (TOML), line 3: \[train\] has no key 'layer' (did you mean 'layers'?)" --config "$tmp/typo.toml" train
expect_clean "TOML typo"
# --config after the command is the same --config (CLI11 alone: "not expected").
expect_error "config after the command" "config '$tmp/typo.toml' (TOML), line 3: \[train\] has no key 'layer'" train --config "$tmp/typo.toml"
printf '{"train": {"T": 2, "layer": "784-10"}}' >"$tmp/typo.json"
expect_error "JSON typo" "config '$tmp/typo.json' (JSON): \"train\" has no key \"layer\" (did you mean \"layers\"?)" --config "$tmp/typo.json" train
expect_clean "JSON typo"
printf '[trian]\nT = 2\n' >"$tmp/table.toml"
expect_error "misspelt table" "line 2: there is no table \[trian\] (did you mean \[train\]?; tables: \[neuron\], \[train\]" --config "$tmp/table.toml" train
printf 'layers = "784-10"\n[train]\nT = 2\n' >"$tmp/top.toml"
expect_error "key outside a table" "line 1: the key 'layers' is outside any table (it belongs in \[train\] or \[bench\])" --config "$tmp/top.toml" train
printf '[train]\nT = 0\n' >"$tmp/range.toml"
expect_error "config value out of range" "config '$tmp/range.toml': \[train\] T: expected a whole number >= 1, got '0'" --config "$tmp/range.toml" train
expect_error "flag overrides config" "snnsim: error: --T: expected a whole number >= 1, got '0'" --config "$tmp/range.toml" train --T 0
# A good flag over the file's bad value: the file is still checked (CLI11
# skipped it, so the mistake waited for the day the flag was left out).
expect_error "bad config value under a flag" "config '$tmp/range.toml' (TOML), line 2: \[train\] T: expected a whole number >= 1, got '0' (the command line sets --T too" \
  --config "$tmp/range.toml" train --T 4
expect_error "missing config" "--config: '$tmp/none.toml' is not readable (No such file or directory)" --config "$tmp/none.toml" train

# A table or key given twice is an error naming both lines (CLI11 alone takes
# the last silently).
printf '[train]\nT = 2\n[run]\nT = 3\n\n[train]\nepochs = 1\n' >"$tmp/table2.toml"
expect_error "table twice" "config '$tmp/table2.toml' (TOML), line 6: table \[train\] appears twice (first at line 1)" --config "$tmp/table2.toml" train
printf '[train]\nT = 2\nepochs = 1\nT = 3\n' >"$tmp/key2.toml"
expect_error "key twice" "line 4: key 'T' appears twice in \[train\] (first at line 2)" --config "$tmp/key2.toml" train
printf '[train]\nT = 2\nT = 3\n' >"$tmp/key2b.toml"
expect_error "key twice in a row" "line 3: key 'T' appears twice in \[train\] (first at line 2)" --config "$tmp/key2b.toml" train
printf 'train.T = 2\n[train]\nT = 3\n' >"$tmp/dotted.toml"
expect_error "dotted key and table" "line 3: key 'T' appears twice in \[train\] (first at line 1)" --config "$tmp/dotted.toml" train
printf '{"train": {"T": 2, "epochs": 1, "T": 3}}' >"$tmp/key2.json"
expect_error "JSON member twice" "config '$tmp/key2.json' (JSON): \"train\" has the member \"T\" twice" --config "$tmp/key2.json" train
printf '{"train": {"T": 2}, "train": {"T": 3}}' >"$tmp/table2.json"
expect_error "JSON table twice" "the member \"train\" appears twice" --config "$tmp/table2.json" train
# A list over several lines is one key (its lines are no keys), and the
# lines after it count on.
printf '[bench]\nsteps-per-tick = [1,\n  2,\n  10]\nT = 0\n' >"$tmp/list.toml"
expect_error "multi-line list" "\[bench\] T: expected a whole number >= 1, got '0'" --config "$tmp/list.toml" bench
printf '[bench]\nsteps-per-tick = [1,\n  2,\n  10]\nT = 4\nT = 5\n' >"$tmp/list2.toml"
expect_error "lines after a list" "line 6: key 'T' appears twice in \[bench\] (first at line 5)" --config "$tmp/list2.toml" bench
# A TOML list is the flag's comma-separated list, as a JSON array is (the
# network is checked before any data is read: 2 devices for 1 layer).
printf '[train]\ndevices = ["cpu", "cpu"]\nlayers = "784-10"\n' >"$tmp/devices.toml"
expect_error "TOML list" "2 devices (stages) for 1 layers" --config "$tmp/devices.toml" train --data-dir "$tmp/none"
# Lines that are neither a table nor key = value (CLI11 took them for keys).
printf '[train\nT = 2\n' >"$tmp/header.toml"
expect_error "broken table header" "line 1: expected a table header like \[train\], got '\[train'" --config "$tmp/header.toml" train
printf '[train]\nlayers 784-10\n' >"$tmp/noequals.toml"
expect_error "line without =" "line 2: expected key = value, got 'layers 784-10'" --config "$tmp/noequals.toml" train

finish
