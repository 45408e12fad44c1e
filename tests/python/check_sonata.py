#!/usr/bin/env python3
"""Reads a recording with libsonata (the Blue Brain SONATA reader, a real client
of the layout) and with h5py, and checks that both see the same file:
    check_sonata.py FILE
Prints one line and exits 0 when they agree; raises AssertionError otherwise.

libsonata's semantics that this relies on (libsonata 0.2.2):
  - SpikePopulation.get(tstart=a, tstop=b) returns spikes with a <= t <= b
    (both ends inclusive, with a 1e-6 tolerance): one sample's spikes are
    get(tstart=t_start, tstop=t_stop - dt / 2).
  - An element report's frames are at start + k * dt for every k with
    start + k * dt < stop (mapping/time = [start, stop, dt], stop exclusive), so
    stop must be start + n_rows * dt for every row of /report/<pop>/data to be
    read; get(tstart=a, tstop=b) returns the frames with a <= t <= b.
"""
import sys

import h5py
import libsonata
import numpy as np

SORTING = {0: "none", 1: "by_id", 2: "by_time"}


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def filters(ds):
    """The HDF5 filters of a dataset, as h5py names them."""
    used = [ds.compression, "shuffle" if ds.shuffle else None, "fletcher32" if ds.fletcher32 else None,
            f"scaleoffset={ds.scaleoffset}" if ds.scaleoffset is not None else None]
    return [x for x in used if x]


def libsonata_read(what, datasets, read):
    """read() through libsonata; on failure, an AssertionError that names the
    HDF5 filters of the datasets involved (the usual cause: libsonata's PyPI
    wheels bundle an HDF5 built without zlib, so deflate is unreadable)."""
    try:
        return read()
    except Exception as e:  # libsonata raises RuntimeError and SonataError
        used = {ds.name: filters(ds) for ds in datasets}
        hint = ""
        if any("gzip" in v for v in used.values()):
            hint = ("; libsonata's PyPI wheels bundle an HDF5 built without zlib and cannot decode deflate "
                    "(gzip): write these datasets unfiltered, or convert with `h5repack -f NONE IN OUT`")
        raise AssertionError(f"libsonata could not read {what}: {type(e).__name__}: {e}; "
                             f"HDF5 filters of its datasets: {used}{hint}") from e


def dt_ms(f):
    return float(text(f["meta"].attrs["dt_ms"]))


def check_spikes(f, path):
    reader = libsonata.SpikeReader(path)
    names = sorted(reader.get_population_names())
    want_names = sorted(f["spikes"].keys()) if "spikes" in f else []
    assert names == want_names, f"spike populations: libsonata {names}, h5py {want_names}"
    samples = f["samples"]
    t_start, t_stop = samples["t_start_ms"][:], samples["t_stop_ms"][:]
    dt = dt_ms(f)
    total = 0
    for name in names:
        g = f["spikes"][name]
        ts, ids = g["timestamps"][:], g["node_ids"][:]
        pop = libsonata_read(f"/spikes/{name}", [g["timestamps"], g["node_ids"]], lambda: reader[name])
        want_sorting = SORTING[int(g.attrs["sorting"])]
        assert pop.sorting == want_sorting == "by_time", \
            f"{name}: sorting libsonata {pop.sorting!r}, h5py {want_sorting!r}, expected 'by_time'"
        assert pop.time_units == text(g["timestamps"].attrs["units"]) == "ms", \
            f"{name}: time units libsonata {pop.time_units!r}, h5py {g['timestamps'].attrs['units']!r}"

        got = libsonata_read(f"/spikes/{name}", [g["timestamps"], g["node_ids"]], pop.get_dict)
        got_ts, got_ids = np.asarray(got["timestamps"]), np.asarray(got["node_ids"])
        assert len(got_ts) == len(ts), f"{name}: libsonata reads {len(got_ts)} spikes, h5py {len(ts)}"
        a, b = np.lexsort((got_ids, got_ts)), np.lexsort((ids, ts))
        assert np.array_equal(got_ts[a], ts[b]) and np.array_equal(got_ids[a], ids[b]), \
            f"{name}: libsonata's (node_id, timestamp) spikes differ from h5py's"
        pairs = pop.get()
        assert len(pairs) == len(ts) and all(isinstance(p, tuple) and len(p) == 2 for p in pairs[:5]), \
            f"{name}: get() returned {len(pairs)} pairs, expected {len(ts)}"
        if len(ts):
            assert pop.times == (ts.min(), ts.max()), f"{name}: times {pop.times}, h5py {ts.min(), ts.max()}"

        # A sample's window through libsonata (tstop inclusive) gives the same
        # spikes as /samples/spike_ptr (every sample, or 200 spread over the run).
        ptr = samples["spike_ptr"][name][:]
        assert len(ptr) == len(t_start) + 1 and ptr[-1] == len(ts), f"{name}: spike_ptr does not cover the spikes"
        for s in np.unique(np.linspace(0, len(t_start) - 1, min(len(t_start), 200)).round().astype(int)):
            window = pop.get_dict(tstart=t_start[s], tstop=t_stop[s] - dt / 2)
            w_ts, w_ids = np.asarray(window["timestamps"]), np.asarray(window["node_ids"])
            lo, hi = int(ptr[s]), int(ptr[s + 1])
            assert len(w_ts) == hi - lo, f"{name}: sample {s}: libsonata window has {len(w_ts)} spikes, spike_ptr {hi - lo}"
            wa = np.lexsort((w_ids, w_ts))
            assert np.array_equal(w_ts[wa], ts[lo:hi]) and np.array_equal(w_ids[wa], ids[lo:hi]), \
                f"{name}: sample {s}: libsonata window differs from spike_ptr rows"
        total += len(ts)
    return total, len(names)


def check_reports(f, path):
    reader = libsonata.ElementReportReader(path)
    names = sorted(reader.get_population_names())
    want_names = sorted(f["report"].keys()) if "report" in f else []
    assert names == want_names, f"report populations: libsonata {names}, h5py {want_names}"
    samples = f["samples"]
    t_start, t_stop = samples["t_start_ms"][:], samples["t_stop_ms"][:]
    for name in names:
        r = f["report"][name]
        data, m = r["data"][:], r["mapping"]
        node_ids, element_ids = m["node_ids"][:], m["element_ids"][:]
        start, stop, dt = (float(x) for x in m["time"][:])
        pop = libsonata_read(f"/report/{name}", [m[k] for k in m] + [r["data"]], lambda: reader[name])
        assert pop.times == (start, stop, dt), f"{name}: times libsonata {pop.times}, h5py {(start, stop, dt)}"
        assert pop.time_units == text(m["time"].attrs["units"]) == "ms", f"{name}: time units {pop.time_units!r}"
        assert pop.data_units == text(r["data"].attrs["units"]), f"{name}: data units {pop.data_units!r}"
        assert list(pop.get_node_ids()) == node_ids.tolist(), \
            f"{name}: node ids libsonata {pop.get_node_ids()}, h5py {node_ids.tolist()}"

        df = libsonata_read(f"/report/{name}", [r["data"]], pop.get)
        got, got_ids, got_t = np.asarray(df.data), np.asarray(df.ids), np.asarray(df.times)
        # The time axis: one frame per row of data, at start + k * dt.
        assert len(got_t) == data.shape[0], \
            (f"{name}: libsonata sees {len(got_t)} frames (time = [{start}, {stop}, {dt}]), data has "
             f"{data.shape[0]} rows: time stop must be start + rows * dt = {start + data.shape[0] * dt}")
        np.testing.assert_allclose(got_t, start + dt * np.arange(data.shape[0]), rtol=0, atol=1e-6,
                                   err_msg=f"{name}: time axis")
        assert got.shape == data.shape and got.dtype == np.float32, \
            f"{name}: data libsonata {got.shape} {got.dtype}, h5py {data.shape} {data.dtype}"
        assert np.array_equal(got, data), f"{name}: libsonata's data differ from h5py's /report/{name}/data"
        want_ids = np.stack([node_ids, element_ids.astype(np.uint64)], axis=1)
        assert np.array_equal(got_ids, want_ids), f"{name}: ids libsonata {got_ids.tolist()}, h5py {want_ids.tolist()}"

        # One neuron, and one sample's window (tstop inclusive): the same columns and rows.
        if len(node_ids):
            last = libsonata_read(f"/report/{name}", [r["data"]],
                                  lambda: pop.get(node_ids=libsonata.Selection([int(node_ids[-1])])))
            assert np.array_equal(np.asarray(last.data)[:, 0], data[:, -1]), f"{name}: node {node_ids[-1]} column differs"
        if len(t_start) and data.shape[0]:
            s = len(t_start) - 1
            w = pop.get(tstart=t_start[s], tstop=t_stop[s] - dt)
            rows = (np.asarray(w.times) - start) / dt
            k0, k1 = int(round((t_start[s] - start) / dt)), int(round((t_stop[s] - start) / dt))
            assert np.array_equal(np.round(rows), np.arange(k0, k1)), f"{name}: sample {s} frames {rows}"
            assert np.array_equal(np.asarray(w.data), data[k0:k1]), f"{name}: sample {s} rows differ"
    return len(names)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_sonata.py FILE")
    path = sys.argv[1]
    with h5py.File(path, "r") as f:
        n_spikes, n_pops = check_spikes(f, path)
        n_reports = check_reports(f, path)
    print(f"libsonata reads {n_spikes} spikes in {n_pops} populations and {n_reports} reports")


if __name__ == "__main__":
    main()
