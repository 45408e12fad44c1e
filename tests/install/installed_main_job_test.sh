#!/usr/bin/env bash
# The installed snnsim runs the main job on its own (issue 18): installs the
# build into a scratch prefix, moves the prefix elsewhere (so that nothing
# may point back to where it was installed), and from an unrelated working
# folder trains and simulates with the installed examples/mnist/mnist.toml,
# exactly the main job's settings. Checks that the binary finds every
# shared library (no LD_LIBRARY_PATH), that it read the installed MNIST copy
# and not the source tree's, and that it learned (held-out accuracy >= 0.9;
# the main job reaches about 0.95).
#   installed_main_job_test.sh BUILD_DIR CMAKE PYTHON
set -uo pipefail
build="$1"
cmake="$2"
python="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d /tmp/snn_install_test_XXXXXX)"
tmp="$(cd "$tmp" && pwd -P)"
trap 'rm -rf "$tmp"' EXIT
source "$here/../cli/lib.sh"
unset LD_LIBRARY_PATH

if ! "$cmake" --install "$build" --prefix "$tmp/installed" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log"
  echo "FAIL: cmake --install $build failed"
  exit 1
fi
mkdir -p "$tmp/elsewhere"
mv "$tmp/installed" "$tmp/elsewhere/prefix"
prefix="$tmp/elsewhere/prefix"
snnsim="$prefix/bin/snnsim"
config="$prefix/share/snnsim/examples/mnist/mnist.toml"

# What was installed.
for f in bin/snnsim share/snnsim/mnist/train-images-idx3-ubyte.gz share/snnsim/mnist/t10k-labels-idx1-ubyte.gz \
         share/snnsim/examples/mnist/mnist.toml lib/cmake/snn/snnConfig.cmake; do
  if [[ -f "$prefix/$f" ]]; then ok; else fail "not installed: $f"; fi
done
# Nothing in the binary names the prefix it was installed to.
if grep -q -a -F "$tmp/installed" "$snnsim"; then fail "bin/snnsim names the install prefix $tmp/installed"; else ok; fi
# Every shared library found, LibTorch through the install RPATH.
ldd "$snnsim" >"$tmp/ldd" 2>&1
if grep -q "not found" "$tmp/ldd"; then fail "ldd: $(grep 'not found' "$tmp/ldd" | tr '\n' ';')"; else ok; fi
if grep -q "libtorch.so => /" "$tmp/ldd"; then ok; else fail "ldd does not resolve libtorch.so: $(cat "$tmp/ldd")"; fi
# The RPATH (docs/BUILDING.md, "Relocating"): $ORIGIN/../lib and LibTorch's
# folder by its absolute path.
runpath="$(readelf -d "$snnsim" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')"
torch_lib="${runpath#*:}"
if [[ "$runpath" == '$ORIGIN/../lib:/'* && -f "$torch_lib/libtorch.so" ]]; then ok
else fail "RUNPATH '$runpath': expected \$ORIGIN/../lib then LibTorch's folder"; fi
# When that LibTorch is gone, snnsim says so, and LD_LIBRARY_PATH is a
# remedy: a copy of the program whose RPATH names a folder that is not there.
mkdir -p "$tmp/lost/bin"
cp "$snnsim" "$tmp/lost/bin/snnsim"
echo 'file(RPATH_SET FILE "${F}" NEW_RPATH "/nonexistent/torch/lib")' >"$tmp/rpath_set.cmake"
"$cmake" -DF="$tmp/lost/bin/snnsim" -P "$tmp/rpath_set.cmake" || fail "cannot rewrite the copy's RPATH"
if "$tmp/lost/bin/snnsim" --version >"$tmp/lost.out" 2>&1; then fail "snnsim started without LibTorch"
elif grep -q "libtorch" "$tmp/lost.out"; then ok
else fail "without LibTorch: $(cat "$tmp/lost.out")"; fi
if LD_LIBRARY_PATH="$torch_lib" "$tmp/lost/bin/snnsim" --version >"$tmp/lost.out" 2>&1; then ok
else fail "LD_LIBRARY_PATH=$torch_lib does not bring LibTorch back: $(cat "$tmp/lost.out")"; fi
# The main job's configuration names no folder of the source tree.
if grep -q -F -e data-dir -e "$src" "$config"; then fail "mnist.toml names a data folder or the source tree"; else ok; fi

# The main job, from an unrelated working folder.
work="$tmp/work"
mkdir -p "$work"
cd "$work" || exit 1
if ! "$snnsim" --version >"$tmp/version" 2>&1; then fail "installed snnsim does not start: $(cat "$tmp/version")"; finish; exit 1; fi
ok
# Its default data folder is the installed copy, not the source tree's.
want_data="$prefix/share/snnsim/mnist"
if "$snnsim" train --help | grep -q -F -- "--data-dir TEXT=$want_data"; then ok
else fail "default --data-dir: $("$snnsim" train --help | grep -- --data-dir), expected $want_data"; fi
# The main job takes minutes: not when the installation is already wrong.
if [[ $failures -gt 0 ]]; then finish; exit 1; fi
mkdir -p out/mnist
if ! "$snnsim" --config "$config" train >"$tmp/train" 2>&1; then
  cat "$tmp/train"
  fail "train with the installed mnist.toml failed"
  finish
  exit 1
fi
tail -n 3 "$tmp/train"
# train names the data it read: the installed copy.
if grep -q -F "training 784-1024-10 on $want_data (8000 train / 2000 test samples)" "$tmp/train"; then ok
else fail "train did not read the installed $want_data: $(head -n 1 "$tmp/train")"; fi
if ! "$snnsim" --config "$config" run >"$tmp/run" 2>&1; then
  cat "$tmp/run"
  fail "run with the installed mnist.toml failed"
  finish
  exit 1
fi
cat "$tmp/run"
if [[ -f out/mnist/checkpoint.h5 && -f out/mnist/summary.json ]]; then ok; else fail "no out/mnist/{checkpoint.h5,summary.json} in the working folder"; fi
# The run read the installed data, printed the held-out accuracy, and learned.
"$python" - "$work/out/mnist/summary.json" "$want_data" "$tmp/run" <<'PY'
import json, re, sys
summary, want_dir, run_log = sys.argv[1:4]
s = json.load(open(summary))
errors = []
if s["data_dir"] != want_dir:
    errors.append(f"data_dir {s['data_dir']!r}, expected the installed copy {want_dir!r}")
if s["split"] != "test" or s["samples"] != 2000:
    errors.append(f"split {s['split']!r} with {s['samples']} samples, expected the 2000 held-out digits")
printed = re.search(r"^test split: 2000 samples, T = 8, accuracy ([0-9.]+)", open(run_log).read(), re.M)
if not printed:
    errors.append("run printed no 'test split: 2000 samples, T = 8, accuracy ...' line")
elif abs(float(printed.group(1)) - s["accuracy"]) > 1e-4:
    errors.append(f"printed accuracy {printed.group(1)} differs from the summary's {s['accuracy']}")
if not s["accuracy"] >= 0.9:
    errors.append(f"held-out accuracy {s['accuracy']}, expected >= 0.9 (the main job reaches about 0.95)")
print("\n".join(errors) if errors else f"installed main job: held-out accuracy {s['accuracy']:.4f}, data {s['data_dir']}")
sys.exit(1 if errors else 0)
PY
if [[ $? -eq 0 ]]; then ok; else fail "summary check (above)"; fi
finish
