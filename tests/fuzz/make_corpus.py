#!/usr/bin/env python3
"""Writes the fuzz corpus (tests/fuzz/corpus/<target>/): small valid inputs
that the fuzzer mutates. IDX, CSV and config seeds are made here; the
recording seeds come from snnsim itself when its path is given:

    python3 tests/fuzz/make_corpus.py [SNNSIM]

Deterministic except the recordings (they hold provenance: times, paths).
"""
import gzip
import os
import shutil
import struct
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
corpus = os.path.join(here, "corpus")
for t in ["idx", "csv", "config", "recording"]:
    os.makedirs(os.path.join(corpus, t), exist_ok=True)


def put(target, name, data):
    os.makedirs(os.path.join(corpus, target), exist_ok=True)
    with open(os.path.join(corpus, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def idx(shape, data):
    return bytes([0, 0, 8, len(shape)]) + b"".join(struct.pack(">I", s) for s in shape) + bytes(data)


# IDX: images, labels, other ranks, empty arrays, real digits, a gzip file.
put("idx", "images_3x4x4.idx", idx([3, 4, 4], [(i * 37) % 256 for i in range(48)]))
put("idx", "labels_5.idx", idx([5], [0, 1, 2, 3, 9]))
put("idx", "matrix_2x3.idx", idx([2, 3], range(6)))
put("idx", "rank4_1x2x2x2.idx", idx([1, 2, 2, 2], range(8)))
put("idx", "empty_labels.idx", idx([0], []))
put("idx", "no_images_0x28x28.idx", idx([0, 28, 28], []))
with open(os.path.join(root, "tests/data/mnist-fixture/t10k-images-idx3-ubyte"), "rb") as f:
    f.read(16)
    put("idx", "mnist_2_digits.idx", idx([2, 28, 28], f.read(2 * 28 * 28)))
put("idx", "labels_5.idx.gz", gzip.compress(idx([5], [7, 1, 0, 4, 2]), mtime=0))

# CSV: the example input, a header, CRLF and blank lines, edge values.
shutil.copy(os.path.join(root, "examples/neuron/input_currents.csv"), os.path.join(corpus, "csv", "input_currents.csv"))
put("csv", "plain.csv", "1,2,3\n0.5,-1.5,2e-3\n")
put("csv", "header_crlf.csv", "a, b\r\n\r\n 1.5 ,+2\r\n-3e-1,4\r\n")
put("csv", "one_column.csv", "i\n0\n1\n2\n3\n")
put("csv", "edges.csv", "3.4028235e38,-3.4028235e38,1e-45,4.9e-324\n0,-0,1.7976931348623157e308,16777217\n")

# Configs: the examples, TOML and JSON with every kind of value the
# fuzzer's app takes.
for name in ["examples/mnist/mnist.toml", "examples/sweep/tau_T.toml"]:
    shutil.copy(os.path.join(root, name), os.path.join(corpus, "config", os.path.basename(name)))
put("config", "train.toml", '''# every kind of option
[train]
layers = "784-100-10"
T = 8
epochs = 2
lr = 1e-3
v-threshold = 0.5
devices = ["cpu", "cpu"]
grid = [1.5, 2, 3e0]
shuffle = true
limit = -1

[neuron]
model = "plif"
tau = 2.5
v-reset = 'none'
dtype = "float64"
''')
put("config", "run.json", '{"run": {"layers": "784-10", "T": 4, "devices": ["cpu"], "overwrite": false, '
    '"grid": [1, 2.5]}, "neuron": {"tau": 3, "model": "if"}}\n')
put("config", "nested.toml", '''top = 1
[run]
T = 16
lr = 0.25
"devices" = "cpu,cpu"
[run.sub]
x = 1
''')

# Recordings: a tiny network trained for one epoch on 100 fixture digits,
# then 3 digits simulated. A low threshold makes it spike; --compress keeps
# the spike chunks small (64 Ki rows each otherwise); the silent run has no
# spike at all.
if len(sys.argv) > 1:
    snnsim = sys.argv[1]
    fixture = os.path.join(root, "tests/data/mnist-fixture")
    with tempfile.TemporaryDirectory() as tmp:
        ck = os.path.join(tmp, "ck.h5")
        common = ["--data-dir", fixture, "--threads", "1"]
        subprocess.run([snnsim, "train", *common, "--layers", "784-16-10", "--T", "4", "--limit", "100", "--epochs", "1",
                        "--checkpoint", ck], check=True, stdout=subprocess.DEVNULL)
        runs = {
            "input_hidden_output.h5": ["--record", "hidden,output", "--record-input", "--v-threshold", "0.1", "--compress"],
            "output_only.h5": ["--record", "output", "--T", "6", "--v-threshold", "0.2", "--compress"],
            "silent.h5": ["--record", "hidden,output"],
        }
        for name, flags in runs.items():
            out = os.path.join(tmp, name)
            subprocess.run([snnsim, "run", *common, "--checkpoint", ck, "--limit", "3", "--output", out, *flags],
                           check=True, stdout=subprocess.DEVNULL)
            shutil.copy(out, os.path.join(corpus, "recording", name))
