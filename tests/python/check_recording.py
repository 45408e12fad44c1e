#!/usr/bin/env python3
"""Reads a recording with h5py (a real client) and compares it with what the
writer was given: check_recording.py FILE EXPECTED.json. Exit 0 when equal."""
import json
import sys

import h5py
import numpy as np


def main():
    path, expected_path = sys.argv[1:3]
    want = json.load(open(expected_path))
    with h5py.File(path, "r") as f:
        assert int(f.attrs["magic"]) == 0x0A7A and list(f.attrs["version"]) == [0, 1]
        meta = f["meta"]
        assert int(meta["samples_committed"][()]) == want["samples"], meta["samples_committed"][()]
        assert meta["status"][()].rstrip(b"\0").decode() == want["status"]
        for k, v in want["meta"].items():
            got = meta.attrs[k]
            assert (got.decode() if isinstance(got, bytes) else got) == v, (k, got, v)
        for pop, exp in want["spikes"].items():
            g = f["spikes"][pop]
            # SONATA: sorting is a uint8 enum, timestamps carry units.
            assert h5py.check_enum_dtype(g.attrs.get_id("sorting").dtype) == {"none": 0, "by_id": 1, "by_time": 2}
            assert int(g.attrs["sorting"]) == 2
            assert g["timestamps"].attrs["units"] in (b"ms", "ms")
            assert g["timestamps"].dtype == np.float64 and g["node_ids"].dtype == np.uint64
            np.testing.assert_array_equal(g["timestamps"][:], np.array(exp["timestamps"], np.float64))
            np.testing.assert_array_equal(g["node_ids"][:], np.array(exp["node_ids"], np.uint64))
            np.testing.assert_array_equal(f["samples/spike_ptr"][pop][:], np.array(exp["ptr"], np.uint64))
        s = f["samples"]
        assert s["label"].dtype == np.int16 and s["output_counts"].dtype == np.uint32
        np.testing.assert_array_equal(s["label"][:], want["labels"])
        np.testing.assert_array_equal(s["predicted"][:], want["predicted"])
        np.testing.assert_array_equal(s["output_counts"][:], np.array(want["counts"]))
        np.testing.assert_array_equal(s["t_start_ms"][:], want["t_start"])
        np.testing.assert_array_equal(s["t_stop_ms"][:], want["t_stop"])
        for pop, exp in want["traces"].items():
            r = f["report"][pop]
            np.testing.assert_array_equal(r["data"][:], np.array(exp["data"], np.float32))
            np.testing.assert_array_equal(r["mapping/node_ids"][:], exp["node_ids"])
            assert len(r["mapping/index_pointers"]) == len(exp["node_ids"]) + 1
            np.testing.assert_array_equal(r["mapping/time"][:], exp["time"])
    print("recording matches")


if __name__ == "__main__":
    main()
