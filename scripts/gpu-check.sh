#!/usr/bin/env bash
# The CUDA checks in one command, for a machine with an NVIDIA GPU, nvcc,
# CMake, ninja and Python's torch built with CUDA, but no network and none of
# HDF5, fmt, GoogleTest, CLI11, nlohmann-json or toml++ (the device machine).
#
#   bash scripts/gpu-check.sh --fetch
#       Here (Debian 12, with the network): downloads those libraries' Debian
#       packages into .gpu-deps/ (git-ignored, about 5 MB), which travels with
#       the working tree to the GPU machine.
#   bash scripts/gpu-check.sh [--no-gpu-ok] [OUT_DIR]
#       There: unpacks the packages (no root, nothing installed), configures
#       build-gpu/ with CUDA on against torch's own LibTorch (HDF5 linked
#       statically, so nothing of it is needed at run time; no PLplot), builds
#       what the checks need, and runs:
#         1. the GoogleTest suites of the neurons, encoders, pipeline,
#            recording, simulator and graph components, CUDA tests included:
#            CPU vs GPU bit for bit (encoder, LIF, GeneralNeuron, Linear,
#            whole network, graphs with recurrence and the general neuron
#            kinds), the pipeline on cuda:0,cuda:0 (two streams) and on
#            cpu,cuda:0;
#         2. neuron_bench --device cuda: fused LIF against the device triad
#            and the naive tensor-op LIF, N = 4M and 16M;
#         3. snnsim bench on cuda:0, cuda:0,cuda:0 and cpu,cuda:0 against the
#            naive per-step loop on the same device.
#       Logs and JSON go to OUT_DIR (default build-gpu/out); the last lines
#       are a summary; the exit status is non-zero if any check failed.
#       --no-gpu-ok runs without a GPU (CUDA tests skip): a rehearsal of the
#       build and of everything but the GPU checks. SNN_GPU_PYTHON picks the
#       Python whose torch is used (default python3; here .venv/bin/python).
#
# With the device tool:
#   run(command="bash scripts/gpu-check.sh $OUT", carry=[".gpu-deps"], timeout_s=600)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
deps_dir="$root/.gpu-deps"
# The libraries' packages. libfmt9 only because fmt's CMake config checks
# that the shared library it names exists (we use fmt header-only);
# libgmock-dev because GTest's config names gmock's archives.
packages=(libhdf5-dev libaec-dev zlib1g-dev libfmt-dev libfmt9 libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev
          libtomlplusplus-dev libgloo-dev)

if [[ "${1:-}" == "--fetch" ]]; then
  mkdir -p "$deps_dir"
  fetch() { (cd "$deps_dir" && apt-get download "${packages[@]}" >/dev/null 2>"$deps_dir/fetch.log"); }
  # A machine whose package lists were never fetched knows no versions yet.
  sudo_cmd=(); [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  fetch || { "${sudo_cmd[@]}" apt-get update -qq >/dev/null 2>&1; fetch; } || {
    cat "$deps_dir/fetch.log" >&2
    echo "gpu-check: apt-get download failed (log above)" >&2
    exit 1
  }
  # One version of each package: an older download left beside a newer one
  # would be unpacked over it.
  for p in "${packages[@]}"; do
    mapfile -t got < <(ls -t "$deps_dir/${p}_"*.deb)
    ((${#got[@]} > 1)) && rm -f "${got[@]:1}"
  done
  echo "gpu-check: $(ls "$deps_dir"/*.deb | wc -l) packages in $deps_dir ($(du -sh "$deps_dir" | cut -f1)); run 'bash scripts/gpu-check.sh' on the GPU machine with .gpu-deps carried"
  exit 0
fi

no_gpu_ok=0
if [[ "${1:-}" == "--no-gpu-ok" ]]; then no_gpu_ok=1; shift; fi
out="${1:-$root/build-gpu/out}"
mkdir -p "$out"
log="$out/gpu-check.log"
: >"$log"
say() { echo "$*" | tee -a "$log"; }
fail() { say "gpu-check: $*"; exit 1; }
start=$(date +%s)
elapsed() { echo "$(($(date +%s) - start)) s"; }

# --- the machine
python="${SNN_GPU_PYTHON:-$(command -v python3 || true)}"  # the Python whose torch provides LibTorch
[[ -n "$python" ]] || fail "python3 not found: the build takes LibTorch from Python's torch package"
say "== machine ($(date -u +%FT%TZ))"
{ if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; else echo "nvidia-smi: not available"; fi
  (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version 2>&1) | tail -2
  cmake --version | head -1; ninja --version; echo "cores: $(nproc)"
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())'
} 2>&1 | tee -a "$log"
has_gpu=$("$python" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
if [[ "$has_gpu" != 1 && "$no_gpu_ok" != 1 ]]; then
  fail "no CUDA device is visible to torch: this script checks the GPU path (pass --no-gpu-ok for a rehearsal without one)"
fi
torch_prefix=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)') ||
  fail "python3 cannot import torch"

# --- the libraries: unpacked, not installed
shopt -s nullglob
debs=("$deps_dir"/*.deb)
((${#debs[@]} > 0)) || fail "no packages in $deps_dir: run 'bash scripts/gpu-check.sh --fetch' on a Debian machine first and carry .gpu-deps"
sysroot="$root/build-gpu/deps"
# Unpacked again only when the packages change: fresh header times would
# make a rerun on a warm machine rebuild everything.
stamp="$sysroot/.packages"
want=$(cd "$deps_dir" && sha256sum -- *.deb | sha256sum)
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  rm -rf "$sysroot" && mkdir -p "$sysroot"
  for deb in "${debs[@]}"; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$sysroot" || fail "cannot unpack $deb"
    else
      # Without dpkg: a .deb is an ar archive holding data.tar.*.
      member=$(ar t "$deb" | grep '^data\.tar') || fail "no data.tar in $deb"
      ar p "$deb" "$member" | tar -x -a -f - -C "$sysroot" 2>/dev/null ||
        ar p "$deb" "$member" | tar -x --zstd -f - -C "$sysroot" || fail "cannot unpack $deb"
    fi
  done
  echo "$want" >"$stamp"
fi
usr="$sysroot/usr"
lib="$usr/lib/x86_64-linux-gnu"
say "== unpacked ${#debs[@]} packages into $sysroot ($(elapsed))"

# --- configure and build
build="$root/build-gpu/build"
arch="${SNN_GPU_ARCH:-90}"  # H100/H200; SNN_GPU_ARCH=native elsewhere
cmake_args=(
  -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  -DSNN_WITH_CUDA=ON -DSNN_WITH_PLOTS=OFF -DSNN_BUILD_TESTS=ON -DSNN_BUILD_BENCH=ON
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DTORCH_CUDA_ARCH_LIST="$([[ $arch == native ]] && echo 9.0 || echo "${arch%?}.${arch: -1}")"
  -DCMAKE_PREFIX_PATH="$torch_prefix" -DSNN_PYTHON="$python"
  -Dfmt_DIR="$lib/cmake/fmt" -DGTest_DIR="$lib/cmake/GTest"
  -DCLI11_DIR="$usr/share/cmake/CLI11" -Dnlohmann_json_DIR="$usr/share/cmake/nlohmann_json"
  -DSNN_TOMLPP_INCLUDE_DIR="$usr/include" -DSNN_GLOO_INCLUDE_DIR="$usr/include"
  -DZLIB_INCLUDE_DIR="$usr/include" -DZLIB_LIBRARY="$lib/libz.a"
  -DHDF5_USE_STATIC_LIBRARIES=ON -DHDF5_NO_FIND_PACKAGE_CONFIG_FILE=ON
  -DHDF5_C_COMPILER_EXECUTABLE=/bin/false  # never a system h5cc: it would name the system's HDF5
  -DHDF5_C_INCLUDE_DIR="$usr/include/hdf5/serial" -DHDF5_hdf5_LIBRARY_RELEASE="$lib/hdf5/serial/libhdf5.a"
  -DSNN_SZIP_LIBRARY="$lib/libsz.a" -DSNN_AEC_LIBRARY="$lib/libaec.a"
)
if [[ -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null; then
  cmake_args+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
cmake "${cmake_args[@]}" >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log" | tee -a "$log"; fail "configure failed (log: $out/configure.log)"; }
grep -E "snn [0-9.]+: CUDA kernels" "$out/configure.log" | tee -a "$log"
targets=(neurons_test encoders_test pipeline_test recording_test simulator_test graph_test snnsim neuron_bench)
say "== building ${targets[*]} ($(elapsed))"
ninja -C "$build" -j"$(nproc)" "${targets[@]}" >"$out/build.log" 2>&1 ||
  { grep -E -A12 "FAILED|error" "$out/build.log" | head -60 | tee -a "$log"; fail "build failed (log: $out/build.log)"; }
say "== built ($(elapsed))"

# --- checks
results=()
check() {  # check NAME COMMAND...: runs it, keeps its output, records PASS/FAIL
  local name="$1"; shift
  say "== $name ($(elapsed))"
  if "$@" >"$out/$name.txt" 2>&1; then
    results+=("PASS $name")
  else
    results+=("FAIL $name (exit $?)")
  fi
  tail -25 "$out/$name.txt" | tee -a "$log" >/dev/null
}
gtest() {  # all of a suite; on a GPU machine a skipped CUDA test is a failure
  local bin="$build/tests/$1"
  "$bin" --gtest_brief=1 || return 1
  if [[ "$has_gpu" == 1 ]]; then
    local cuda_out
    cuda_out=$("$bin" --gtest_filter='*_CUDA.*' 2>&1) || { echo "$cuda_out"; return 1; }
    if grep -q "SKIPPED" <<<"$cuda_out"; then
      echo "$cuda_out"
      echo "a CUDA test skipped on a machine with a GPU"
      return 1
    fi
  fi
}
for suite in neurons_test encoders_test pipeline_test recording_test simulator_test graph_test; do
  check "$suite" gtest "$suite"
done

if [[ "$has_gpu" == 1 ]]; then
  check neuron_bench_4M "$build/bench/neuron_bench" --device cuda --neurons 4194304 --steps 32 --reps 10
  check neuron_bench_16M "$build/bench/neuron_bench" --device cuda --neurons 16777216 --steps 32 --reps 10
  snnsim="$build/apps/snnsim/snnsim"
  check bench_cuda "$snnsim" bench --devices cuda:0 --steps-per-tick 1,10,0 --reps 5 --json "$out/bench_cuda.json"
  check bench_cuda_b1 "$snnsim" bench --devices cuda:0 --batch 1 --steps-per-tick 1,0 --reps 5
  check bench_two_streams "$snnsim" bench --devices cuda:0,cuda:0 --steps-per-tick 1,10 --reps 5 --no-naive
  check bench_cpu_to_cuda "$snnsim" bench --devices cpu,cuda:0 --steps-per-tick 10 --reps 3 --no-naive
fi

say "== summary ($(elapsed))"
status=0
for r in "${results[@]}"; do
  say "$r"
  [[ "$r" == PASS* ]] || status=1
done
if [[ "$has_gpu" == 1 ]]; then
  for f in neuron_bench_4M neuron_bench_16M; do grep -E "triad|fused LIF" "$out/$f.txt" | sed "s/^/$f: /" | tee -a "$log"; done
  for f in bench_cuda bench_cuda_b1 bench_two_streams bench_cpu_to_cuda; do
    grep -E "^(devices|layer|pipeline|naive per-step|One sequential)|ms/batch" "$out/$f.txt" | sed "s/^/$f: /" | tee -a "$log"
  done
else
  say "no GPU: the CUDA tests skipped and the GPU benchmarks did not run (rehearsal)"
fi
exit $status
