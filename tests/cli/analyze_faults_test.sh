#!/usr/bin/env bash
# `snnsim analyze` outputs under faults (issue 17, classes 1 and 5): on a
# full disk (a real filled tmpfs when run as root, else a file-size limit)
# --json, --plots and --plot fail with one line and exit 2, and files that
# existed keep their bytes, with no temporary left behind; a plot name whose
# extension is not the format written (p.gif) is refused before any work.
#   analyze_faults_test.sh SNNSIM FIXTURE_DIR
set -uo pipefail
snnsim="$1"
fixture="$2"
tmp="$(mktemp -d)"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
out="$tmp/fs"  # not $tmp/out: expect_error writes there
cleanup() {
  release_small_fs "$out"
  rm -rf "$tmp"
}
trap cleanup EXIT

"$snnsim" train --data-dir "$fixture" --layers 784-16-10 --T 3 --epochs 1 --v-threshold 0.5 --threads 1 \
  --checkpoint "$tmp/ck.h5" >"$tmp/train.out" 2>&1 || fail "train failed: $(cat "$tmp/train.out")"
"$snnsim" run --checkpoint "$tmp/ck.h5" --data-dir "$fixture" --limit 20 --threads 1 --output "$tmp/rec.h5" \
  --record hidden,output >"$tmp/run.out" 2>&1 || fail "recording run failed: $(cat "$tmp/run.out")"
# A sweep manifest, as snnsim sweep writes it, for --plot.
cat >"$tmp/manifest.json" <<'JSON'
{"sweep": "by hand", "parameters": ["tau"], "rows": [
  {"status": "done", "params": {"tau": "1.5"}, "accuracy": 0.5, "wall_s": 1.0, "firing_rate": [0.1, 0.2]},
  {"status": "done", "params": {"tau": "2.0"}, "accuracy": 0.6, "wall_s": 1.0, "firing_rate": [0.1, 0.3]}]}
JSON

# A plot file must be named for the format written; --plots takes a folder.
expect_error "plot named .gif" "snnsim: error: --plot: expected a file name ending in .png or .svg, got '$tmp/p.gif' (extension '.gif')" \
  analyze "$tmp/manifest.json" --plot "$tmp/p.gif"
[[ ! -e "$tmp/p.gif" ]] && ok || fail "p.gif was written"
expect_error "plot without extension" "got '$tmp/p' (no extension)" analyze "$tmp/manifest.json" --plot "$tmp/p"
expect_error "plots named like a file" "--plots: expected a folder .*got '$tmp/p.gif' (extension '.gif')" \
  analyze "$tmp/rec.h5" --plots "$tmp/p.gif"
[[ ! -e "$tmp/p.gif" ]] && ok || fail "a p.gif folder was made"
: >"$tmp/afile"
expect_error "plots is a file" "--plots: expected a folder .*got the file '$tmp/afile'" analyze "$tmp/rec.h5" --plots "$tmp/afile"
"$snnsim" analyze "$tmp/manifest.json" --plot "$tmp/p.SVG" >/dev/null 2>&1 && grep -q "</svg>" "$tmp/p.SVG" &&
  ok || fail "--plot p.SVG did not write SVG"

# A small filesystem, filled: a tmpfs as root, else a file-size limit
# (EFBIG rather than ENOSPC: the same failed write(2)).
real_snnsim="$snnsim"
if small_fs "$out" 4096; then
  mode=tmpfs
else
  mode=ulimit
  echo "note: no tmpfs (not root): a file-size limit stands in for the full disk"
  # The limit cuts stdout and stderr too when they are files: pipes for them.
  cat >"$tmp/limited.sh" <<EOS
#!/usr/bin/env bash
set -o pipefail
trap "" XFSZ
{ ( ulimit -f "\${LEFT_KIB:-0}"; exec "$real_snnsim" "\$@" ) 2>&1 1>&3 3>&- | cat >&2 3>&-; } 3>&1 | cat
EOS
  chmod +x "$tmp/limited.sh"
fi
# begin_full [LEFT_KIB] ... end_full: the disk is full (but LEFT_KIB) in between.
begin_full() {
  if [[ $mode == tmpfs ]]; then fill_fs "$out" "${1:-0}"; else export LEFT_KIB="${1:-0}"; snnsim="$tmp/limited.sh"; fi
}
end_full() {
  if [[ $mode == tmpfs ]]; then rm -f "$out/.filler"; else snnsim="$real_snnsim"; fi
}
no_temporaries() {
  local left
  left=$(find "$out" -name '*.tmp-*' | head -3)
  [[ -z "$left" ]] && ok || fail "$1: temporaries left: $left"
}

# The outputs of a first analysis, with room to spare.
"$snnsim" analyze "$tmp/rec.h5" --json "$out/a.json" --plots "$out/plots" >"$tmp/first.out" 2>&1 ||
  fail "first analysis failed: $(cat "$tmp/first.out")"
"$snnsim" analyze "$tmp/manifest.json" --plot "$out/m.png" >>"$tmp/first.out" 2>&1 ||
  fail "manifest plot failed: $(cat "$tmp/first.out")"
names=(raster rates psth accuracy confusion)
json_bytes=$(stat -c %s "$out/a.json")
# Then the files of an older analysis, smaller than the new ones: rewriting
# one in place cannot fit in the space its truncation frees.
declare -A before
for f in a.json m.png "${names[@]/%/.png}"; do
  p="$out/$f"
  [[ -f "$out/plots/$f" ]] && p="$out/plots/$f"
  [[ -s "$p" ]] && ok || fail "first analysis wrote no $f"
  printf 'an older %s\n' "$f" >"$p"
  before[$f]=$(sha "$p")
done
unchanged() {
  local f p
  for f in a.json m.png "${names[@]/%/.png}"; do
    p="$out/$f"
    [[ -f "$out/plots/$f" ]] && p="$out/plots/$f"
    [[ $(sha "$p") == "${before[$f]}" ]] && ok || fail "$1: $f changed on a full disk"
  done
}

# The disk full: each output fails with one line, and the old files stay.
begin_full
expect_error "json on a full disk" "cannot write '$out/a.json'" analyze "$tmp/rec.h5" --json "$out/a.json"
expect_error "plots on a full disk" "cannot [a-z]* plot '$out/plots/raster.png'" analyze "$tmp/rec.h5" --plots "$out/plots"
expect_error "manifest plot on a full disk" "cannot [a-z]* plot '$out/m.png'" analyze "$tmp/manifest.json" --plot "$out/m.png"
expect_error "new plots on a full disk" "cannot [a-z]* plot '$out/fresh/raster.png'" analyze "$tmp/rec.h5" --plots "$out/fresh"
end_full
unchanged "full disk"
no_temporaries "full disk"
n=$(find "$out/fresh" -type f 2>/dev/null | wc -l)
[[ $n -eq 0 ]] && ok || fail "a failed --plots left $n files: $(ls -l "$out/fresh")"

# Nearly full: PLplot starts a file it cannot finish; the JSON's write(2)
# is cut short, the next one fails.
begin_full 8
expect_error "plots on a nearly full disk" "cannot write plot '$out/plots/raster.png': .* (8192 bytes written)" \
  analyze "$tmp/rec.h5" --plots "$out/plots"
end_full
begin_full $((json_bytes / 2048))
expect_error "json on a nearly full disk" "cannot write '$out/a.json'" analyze "$tmp/rec.h5" --json "$out/a.json"
end_full
unchanged "nearly full disk"
no_temporaries "nearly full disk"

# With room again, the same commands succeed and replace the files.
"$snnsim" analyze "$tmp/rec.h5" --json "$out/a.json" --plots "$out/plots" >"$tmp/again.out" 2>&1 &&
  grep -q "^plot: $out/plots/confusion.png" "$tmp/again.out" && ok || fail "analysis with room failed: $(cat "$tmp/again.out")"
no_temporaries "with room"

finish
