# Helpers of the tests of runs over several processes (source after lib.sh;
# they use $python, $tmp, ok and fail).

# A TCP port on 127.0.0.1 that nobody listens on now.
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# expect_all NAME WORLD CODE TEXT: every rank exited CODE with one stderr
# line holding TEXT, and nothing on stdout.
expect_all() {
  local name="$1" world="$2" code="$3" want="$4" r
  for ((r = 0; r < world; r++)); do
    local rc err
    rc="$(cat "$tmp/$name.$r.rc")"
    err="$(cat "$tmp/$name.$r.err")"
    if [[ $rc != "$code" ]]; then fail "$name: rank $r exit $rc, expected $code: $err"; continue; fi
    if [[ $(wc -l <"$tmp/$name.$r.err") -ne 1 ]]; then fail "$name: rank $r stderr is not one line: $err"; continue; fi
    if ! grep -q -- "$want" "$tmp/$name.$r.err"; then fail "$name: rank $r stderr lacks '$want': $err"; continue; fi
    [[ -s "$tmp/$name.$r.out" ]] && { fail "$name: rank $r wrote to stdout: $(cat "$tmp/$name.$r.out")"; continue; }
    ok
  done
}
