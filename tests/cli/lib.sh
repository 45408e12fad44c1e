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

finish() {
  echo "$pass passed, $failures failed"
  [[ $failures -eq 0 ]]
}
