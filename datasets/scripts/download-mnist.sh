#!/usr/bin/env bash
# Downloads the full MNIST (60,000 + 10,000 digits, IDX, .gz) into a folder
# for `--data-dir`, where the network allows; says clearly when it cannot.
#   download-mnist.sh [DIR] [BASE_URL]
# Default DIR: data/mnist-full. The embedded 10k subset (datasets/mnist)
# needs no download.
set -uo pipefail
dir="${1:-data/mnist-full}"
base="${2:-${SNN_MNIST_URL:-https://ossci-datasets.s3.amazonaws.com/mnist}}"
files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
mkdir -p "$dir"
for f in "${files[@]}"; do
  [[ -s "$dir/$f" ]] && continue
  if command -v curl >/dev/null; then
    curl -fsSL --connect-timeout 15 -o "$dir/$f.part" "$base/$f"
  else
    wget -q --timeout=15 -O "$dir/$f.part" "$base/$f"
  fi
  if [[ $? -ne 0 || ! -s "$dir/$f.part" ]]; then
    rm -f "$dir/$f.part"
    echo "download-mnist: cannot download $base/$f (no network access to it?)." >&2
    echo "download-mnist: copy the four MNIST files into $dir by hand, or use the embedded 10k subset in datasets/mnist." >&2
    exit 1
  fi
  mv "$dir/$f.part" "$dir/$f"
done
echo "download-mnist: MNIST is in $dir"
