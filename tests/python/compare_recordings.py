#!/usr/bin/env python3
"""Compares a recording with a reference recording of the same run.

  compare_recordings.py prefix REF FILE   FILE (opened for SWMR reading, as a
      killed run leaves it) holds exactly REF's first K samples, K being
      FILE's /meta/samples_committed; prints K.
  compare_recordings.py equal REF FILE    every dataset equal (timing and
      provenance attributes are not datasets).
Exit 0 when they agree; an AssertionError names the first difference."""
import sys

import h5py
import numpy as np


def datasets(f):
    out = {}
    f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def prefix(ref, f):
    k = int(f["meta/samples_committed"][()])
    steps = int(ref["meta"].attrs["steps_per_sample"])
    want, got = datasets(ref), datasets(f)
    assert want.keys() == got.keys(), set(want) ^ set(got)
    for name, r in want.items():
        g = got[name]
        if name in ("meta/samples_committed", "meta/status"):
            continue
        if name.startswith("samples/spike_ptr/"):
            r, g = r[: k + 1], g[: k + 1]
        elif name.startswith("samples/"):
            r, g = r[:k], g[:k]
        elif name.startswith("spikes/"):
            n = int(ref["samples/spike_ptr"][name.split("/")[1]][k])
            r, g = r[:n], g[:n]
        elif name.startswith("report/") and name.endswith("/data"):
            r, g = r[: k * steps], g[: k * steps]
        elif name.endswith("mapping/time"):
            # A killed writer may have written the next commit's stop (it
            # precedes the counter); the data rows are what counts.
            r = np.array([r[0], k * steps * r[2], r[2]])
            if g[1] > r[1] and f["meta/status"][()].rstrip(b"\0") == b"running":
                g = np.array([g[0], r[1], g[2]])
        assert len(g) == len(r) and np.array_equal(r, g), (name, k, len(r), len(g))
    print(k)


def equal(ref, f):
    want, got = datasets(ref), datasets(f)
    assert want.keys() == got.keys(), set(want) ^ set(got)
    for name in want:
        assert np.array_equal(want[name], got[name]), name


def main():
    mode, ref_path, path = sys.argv[1:4]
    with h5py.File(ref_path, "r") as ref, h5py.File(path, "r", swmr=(mode == "prefix")) as f:
        {"prefix": prefix, "equal": equal}[mode](ref, f)


if __name__ == "__main__":
    main()
