#!/usr/bin/env bash
# Installs what snnsim needs to build and test on Debian 12, idempotently and
# quietly when everything is already there:
#   - Debian packages (compiler tools, HDF5, fmt, GoogleTest, CLI11, ...)
#   - the project virtual environment .venv with torch (LibTorch) and the
#     reference packages pinned in requirements*.txt
# Run as root or with sudo available.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

apt_packages=(
  build-essential cmake ninja-build ccache pkg-config git
  python3 python3-venv python3-pip
  libhdf5-dev hdf5-tools libfmt-dev libgtest-dev libcli11-dev nlohmann-json3-dev libtomlplusplus-dev libgloo-dev zlib1g-dev dataset-fashion-mnist
  libplplot-dev plplot-driver-cairo strace
)

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi

missing=()
for p in "${apt_packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The virtual environment: rebuilt only when the requirement files change.
python="${SNN_SETUP_PYTHON:-python3}"
venv="$root/.venv"
stamp="$venv/.snn-requirements"
want="$(cat requirements.txt requirements-nodeps.txt | sha256sum | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup: creating the virtual environment $venv"
  "$python" -m venv "$venv"
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "setup: installing Python packages into $venv (torch is large: a few minutes the first time)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r requirements.txt
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r requirements-nodeps.txt
  "$venv/bin/python" -c "import torch, spikingjelly.activation_based.neuron" >/dev/null
  echo "$want" > "$stamp"
fi

# The peers' environment (.venv-peers): SpikingJelly 2.0, nirtorch and NEST for the
# NIR exchange tests, on top of .venv's packages (a .pth file), without a
# second copy of torch. Rebuilt only when requirements-peers.txt changes.
peers="$root/.venv-peers"
peers_stamp="$peers/.snn-requirements"
peers_want="$(cat requirements-peers.txt | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$peers_stamp" || "$(cat "$peers_stamp")" != "$peers_want" ]]; then
  echo "setup: creating $peers (SpikingJelly 2.0, nirtorch and NEST beside .venv's torch)"
  rm -rf "$peers"
  "$python" -m venv "$peers"
  main_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  peers_site="$("$peers/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$main_site" >"$peers_site/snn_main_venv.pth"
  # --ignore-installed: pip would otherwise see .venv's SpikingJelly through the
  # .pth file and try to uninstall it.
  "$peers/bin/python" -m pip install -q --disable-pip-version-check --no-deps --ignore-installed -r requirements-peers.txt
  "$peers/bin/python" -c "
import importlib.metadata as md
from spikingjelly.activation_based.nir_exchange import export_to_nir
from snntorch.export_nir import export_to_nir
import nest
assert md.version('spikingjelly') == '2.0.0', md.version('spikingjelly')" >/dev/null
  echo "$peers_want" >"$peers_stamp"
fi

# Brian2's environment (.venv-brian): standalone, with the numpy Brian2 2.9
# supports. Rebuilt only when requirements-brian.txt changes.
brian="$root/.venv-brian"
brian_stamp="$brian/.snn-requirements"
brian_want="$(cat requirements-brian.txt | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$brian_stamp" || "$(cat "$brian_stamp")" != "$brian_want" ]]; then
  echo "setup: creating $brian (Brian2 2.9 with numpy 1.26)"
  rm -rf "$brian"
  "$python" -m venv "$brian"
  "$brian/bin/python" -m pip install -q --disable-pip-version-check -r requirements-brian.txt
  "$brian/bin/python" -c "import brian2, Cython; assert brian2.__version__ == '2.9.0', brian2.__version__" >/dev/null
  echo "$brian_want" >"$brian_stamp"
fi
