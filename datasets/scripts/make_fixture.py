#!/usr/bin/env python3
"""Writes the small MNIST test fixture (plain IDX, uncompressed) from the
embedded 10k subset: the first 300 training and the first 100 test digits.

Usage: make_fixture.py SOURCE_DIR OUTPUT_DIR   (e.g. datasets/mnist tests/data/mnist-fixture)
"""
import gzip
import os
import struct
import sys


def read(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return shape, data[4 + 4 * dims:]


def write(path, magic, shape, payload):
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic))
        f.write(struct.pack(">" + "I" * len(shape), *shape))
        f.write(payload)


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for split, count in (("train", 300), ("t10k", 100)):
        shape, pixels = read(os.path.join(src, f"{split}-images-idx3-ubyte.gz"))
        _, labels = read(os.path.join(src, f"{split}-labels-idx1-ubyte.gz"))
        size = shape[1] * shape[2]
        write(os.path.join(out, f"{split}-images-idx3-ubyte"), 2051, (count, shape[1], shape[2]), pixels[:count * size])
        write(os.path.join(out, f"{split}-labels-idx1-ubyte"), 2049, (count,), labels[:count])


if __name__ == "__main__":
    main()
