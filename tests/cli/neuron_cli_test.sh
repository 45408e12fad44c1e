#!/usr/bin/env bash
# End-to-end tests of `snnsim neuron` as a user runs it.
#   neuron_cli_test.sh SNNSIM EXAMPLE_CSV
set -uo pipefail
snnsim="$1"
example="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The shipped example: header, one row per step and neuron, SpikingJelly's values.
"$snnsim" neuron --input "$example" >"$tmp/trace.csv" 2>"$tmp/err" || fail "example run failed: $(cat "$tmp/err")"
[[ "$(head -1 "$tmp/trace.csv")" == "t,neuron,h,s,v" ]] && ok || fail "header is '$(head -1 "$tmp/trace.csv")'"
[[ $(wc -l <"$tmp/trace.csv") -eq 101 ]] && ok || fail "example: $(wc -l <"$tmp/trace.csv") lines, expected 101"
# Columns 0 and 1 of the example are SpikingJelly's golden inputs 2.0 and 0.9
# (float32: h at t=1 is 0.67499995, the shortest float that round-trips).
grep -qx "0,0,1,1,0" "$tmp/trace.csv" && ok || fail "t=0 neuron 0 row missing"
grep -qx "1,1,0.67499995,0,0.67499995" "$tmp/trace.csv" && ok || fail "float32 t=1 neuron 1 row missing"
"$snnsim" neuron --input "$example" --dtype float64 >"$tmp/trace64.csv" || fail "float64 run failed"
grep -qx "1,1,0.675,0,0.675" "$tmp/trace64.csv" && ok || fail "float64 t=1 neuron 1 row missing"

# --output writes the file atomically and nothing to stdout.
"$snnsim" neuron --input "$example" --output "$tmp/o.csv" >"$tmp/stdout" || fail "--output run failed"
cmp -s "$tmp/o.csv" "$tmp/trace.csv" && ok || fail "--output differs from stdout output"
[[ ! -s "$tmp/stdout" && ! -e "$tmp/o.csv.partial" ]] && ok || fail "--output left stdout text or a .partial file"

# Models and options end to end.
printf '1.0,0.5\n1.0,0.5\n1.0,0.5\n' >"$tmp/noheader.csv"
"$snnsim" neuron --model if --input "$tmp/noheader.csv" >"$tmp/if.csv" || fail "IF run failed"
grep -qx "0,0,1,1,0" "$tmp/if.csv" && grep -qx "1,1,1,1,0" "$tmp/if.csv" && ok || fail "IF integration wrong: $(cat "$tmp/if.csv")"
"$snnsim" neuron --model if --v-reset none --v-threshold 0.75 --input "$tmp/noheader.csv" >"$tmp/soft.csv" || fail "soft run failed"
grep -qx "0,0,1,1,0.25" "$tmp/soft.csv" && ok || fail "soft reset wrong: $(head -3 "$tmp/soft.csv")"
"$snnsim" neuron --model if --refractory 1 --input "$tmp/noheader.csv" >"$tmp/ref.csv" || fail "refractory run failed"
grep -qx "1,0,0,0,0" "$tmp/ref.csv" && grep -qx "2,0,1,1,0" "$tmp/ref.csv" && ok || fail "refractory wrong: $(cat "$tmp/ref.csv")"
"$snnsim" neuron --model plif --tau 3 --decay-input false --input "$tmp/noheader.csv" >"$tmp/plif.csv" || fail "plif run failed"
grep -qx "0,1,0.5,0,0.5" "$tmp/plif.csv" && ok || fail "plif wrong: $(head -3 "$tmp/plif.csv")"

# NEST's iaf_psc_delta: the CSV is a current in pA that acts from the step
# after its row (a NEST current generator's lag); I_e acts at once. With
# 500 pA (I R = 20 mV), the climb from V_reset to V_th takes ceil(10 ms *
# ln(20 / 5) / 0.1 ms) = 139 steps and t_ref 20 more: spikes every 159 steps.
awk 'BEGIN { for (i = 0; i < 1000; ++i) print "500,0" }' >"$tmp/pA.csv"
"$snnsim" neuron --model iaf_psc_delta --dtype float64 --input "$tmp/pA.csv" >"$tmp/iaf.csv" || fail "iaf_psc_delta run failed"
spikes="$(awk -F, '$2 == 0 && $4 == 1 { printf "%s ", $1 }' "$tmp/iaf.csv")"
[[ "$spikes" == "139 298 457 616 775 934 " ]] && ok || fail "iaf_psc_delta spike steps: '$spikes'"
grep -qx "0,1,-70,0,-70" "$tmp/iaf.csv" && ok || fail "iaf_psc_delta: neuron 1 does not rest at E_L"
"$snnsim" neuron --model iaf_psc_delta --dtype float64 --nest I_e=500 --nest t_ref=2 --input "$tmp/noheader.csv" \
  >/dev/null || fail "--nest run failed"
awk 'BEGIN { for (i = 0; i < 200; ++i) print "0" }' >"$tmp/zero.csv"
"$snnsim" neuron --model iaf_psc_delta --nest I_e=500 --input "$tmp/zero.csv" >"$tmp/ie.csv" || fail "I_e run failed"
[[ "$(awk -F, '$4 == 1 { print $1 }' "$tmp/ie.csv")" == "138" ]] && ok || fail "I_e: first spike not at step 138"
grep -q "^139,0,-70,0,-70$" "$tmp/ie.csv" && ok || fail "iaf_psc_delta: not clamped at V_reset after the spike"
"$snnsim" neuron --model iaf_psc_exp --nest tau_syn_ex=0.5 --nest V_reset=-65 --input "$tmp/pA.csv" >"$tmp/exp.csv" \
  || fail "iaf_psc_exp run failed"
[[ "$(awk -F, '$2 == 0 && $4 == 1' "$tmp/exp.csv" | wc -l)" -ge 6 ]] && ok || fail "iaf_psc_exp fires too little"
expect_error "nest: unknown parameter" "unknown parameter 'tau' of iaf_psc_delta; it has dt, C_m, tau_m" \
  neuron --model iaf_psc_delta --nest tau=3 --input "$tmp/pA.csv"
expect_error "nest: not a number" "--nest tau_m: 'fast': 'fast' is neither a parameter nor a unit" \
  neuron --model iaf_psc_exp --nest tau_m=fast --input "$tmp/pA.csv"
expect_error "nest: a unit of another kind" "--nest tau_m: '10 mV' is a potential (mV), not a time (ms)" \
  neuron --model iaf_psc_exp --nest "tau_m=10 mV" --input "$tmp/pA.csv"
# Units as in a model file's params: "0.01 s" is the 10 ms a bare 10 means.
"$snnsim" neuron --model iaf_psc_exp --nest tau_m=10 --input "$tmp/pA.csv" >"$tmp/bare.csv" || fail "bare tau_m failed"
"$snnsim" neuron --model iaf_psc_exp --nest "tau_m=0.01 s" --input "$tmp/pA.csv" >"$tmp/unit.csv" || fail "tau_m in s failed"
cmp -s "$tmp/bare.csv" "$tmp/unit.csv" && ok || fail "--nest tau_m=0.01 s differs from tau_m=10"
expect_error "nest: no value" "--nest: expected NAME=VALUE" neuron --model iaf_psc_exp --nest tau_m --input "$tmp/pA.csv"
expect_error "nest: t_ref off the grid" "t_ref must be a whole number (>= 0) of steps of dt = 0.1 ms, got 0.25 ms" \
  neuron --model iaf_psc_delta --nest t_ref=0.25 --input "$tmp/pA.csv"
expect_error "nest: V_reset above V_th" "V_reset (-50 mV) must be below V_th (-55 mV)" \
  neuron --model iaf_psc_delta --nest V_reset=-50 --input "$tmp/pA.csv"
expect_error "nest: exp parameter on delta" "unknown parameter 'tau_syn_ex' of iaf_psc_delta" \
  neuron --model iaf_psc_delta --nest tau_syn_ex=2 --input "$tmp/pA.csv"
expect_error "nest: SpikingJelly flag" "--tau is a parameter of lif, if and plif; iaf_psc_exp takes NEST's parameters" \
  neuron --model iaf_psc_exp --tau 3 --input "$tmp/pA.csv"
expect_error "nest: --nest with lif" "--nest sets parameters of iaf_psc_delta and iaf_psc_exp, not of --model lif" \
  neuron --nest tau_m=3 --input "$tmp/pA.csv"

# Bad input: one clear line, exit code 2.
printf 'a,b\n1,2\n3\n' >"$tmp/ragged.csv"
expect_error "ragged rows" "line 3: 1 fields, but the header has 2" neuron --input "$tmp/ragged.csv"
printf '1,2\n3,x4\n' >"$tmp/nan.csv"
expect_error "non-number" "line 2, column 2: 'x4' is not a number" neuron --input "$tmp/nan.csv"
printf '1,2\n3,inf\n' >"$tmp/inf.csv"
expect_error "infinite value" "is not a finite number" neuron --input "$tmp/inf.csv"
printf '1,,2\n' >"$tmp/emptyfield.csv"
expect_error "empty field" "empty field" neuron --input "$tmp/emptyfield.csv"
: >"$tmp/empty.csv"
expect_error "empty file" "holds no data rows" neuron --input "$tmp/empty.csv"
printf 'i0,i1\n' >"$tmp/headeronly.csv"
expect_error "header only" "holds no data rows" neuron --input "$tmp/headeronly.csv"
expect_error "missing file" "cannot open" neuron --input "$tmp/nope.csv"
mkdir -p "$tmp/adir"
expect_error "a folder" "'$tmp/adir': is a directory, not a file" neuron --input "$tmp/adir"
printf '\x89HDF\r\n\x1a\n\0\0' >"$tmp/fake.h5"
expect_error "an HDF5 file" "is an HDF5 file (a checkpoint, a recording or a NIR graph), not a CSV file of input currents" \
  neuron --input "$tmp/fake.h5"
expect_error "missing --input" "input is required" neuron
expect_error "bad model" "--model" neuron --model adex --input "$example"
expect_error "bad dtype" "--dtype" neuron --dtype float16 --input "$example"
expect_error "bad v-reset" "--v-reset: expected a number or 'none'" neuron --v-reset abc --input "$example"
expect_error "bad decay-input" "--decay-input" neuron --decay-input maybe --input "$example"
expect_error "tau below 1" "snnsim: error: --tau: tau must be a finite number >= 1" neuron --tau 0.5 --input "$example"
expect_error "plif tau 1" "snnsim: error: --tau: the parametric LIF's initial tau must be a finite number > 1" neuron --model plif --tau 1 --input "$example"
expect_error "negative refractory" "--refractory" neuron --refractory -1 --input "$example"
expect_error "non-numeric tau" "--tau" neuron --tau fast --input "$example"
expect_error "unknown flag" "--frobnicate" neuron --frobnicate --input "$example"
expect_error "no subcommand" "subcommand" 
expect_error "unwritable output" "cannot write '$tmp/no/such/dir/out.csv'" neuron --input "$example" --output "$tmp/no/such/dir/out.csv"

# A directory as --output: one line, exit 2, nothing left behind (it used to
# leave DIR.partial beside it).
mkdir "$tmp/outdir"
before="$(ls -A "$tmp")"
expect_error "directory as output" "is a directory" neuron --input "$example" --output "$tmp/outdir"
[[ "$(ls -A "$tmp")" == "$before" && -z "$(ls -A "$tmp/outdir")" ]] &&
  ok || fail "directory as output left files behind: $(ls -A "$tmp" "$tmp/outdir")"

# A full disk: one line, exit 2, the previous trace intact, no temporary.
if small_fs "$tmp/small" 256; then
  trap 'release_small_fs "$tmp/small"; rm -rf "$tmp"' EXIT
  "$snnsim" neuron --model if --input "$tmp/noheader.csv" --output "$tmp/small/trace.csv" || fail "run on the small fs failed"
  old_sha="$(sha "$tmp/small/trace.csv")"
  fill_fs "$tmp/small"
  expect_error "full disk" "cannot write '$tmp/small/trace.csv': No space left on device" \
    neuron --input "$example" --output "$tmp/small/trace.csv"
  [[ "$(sha "$tmp/small/trace.csv")" == "$old_sha" && -z "$(ls "$tmp/small" | grep -v '^trace.csv$')" ]] &&
    ok || fail "full disk: the previous trace changed or a temporary was left: $(ls -A "$tmp/small")"
  release_small_fs "$tmp/small"
else
  echo "note: not root, no tmpfs: the full-disk case is skipped"
fi

"$snnsim" --help >/dev/null && ok || fail "--help failed"
"$snnsim" neuron --help | grep -q -- "--v-reset" && ok || fail "neuron --help lacks --v-reset"

finish
