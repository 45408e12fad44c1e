#!/usr/bin/env python3
"""Checks an NWB file written by tools/export_nwb.py against the recording it
came from, reading the NWB file with pynwb and the recording with h5py:
    check_nwb.py RUN.h5 OUT.nwb
Prints one line and exits 0 when they agree; raises AssertionError otherwise.

  - pynwb's validator (pynwb.validate) finds no errors;
  - units: one row per recorded neuron of every population (population,
    node_id, layer), spike times = the recording's timestamps of that neuron
    / 1000, ascending, exactly;
  - trials: one per committed sample, start/stop = t_start_ms/t_stop_ms / 1000,
    label, predicted, correct, output_counts; the spikes inside each trial are
    those /samples/spike_ptr assigns to the sample;
  - acquisition/membrane_potential_<pop> equals /report/<pop>/data (mV,
    conversion 1e-3 to volts), rate 1000 / dt, node ids in the comments;
  - session_start_time = /meta start_time (UTC), notes = the config JSON.
"""
import json
import sys
from datetime import datetime, timezone

import h5py
import numpy as np
import pynwb
from pynwb import NWBHDF5IO


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def main(run_path, nwb_path):
    errors = pynwb.validate(path=nwb_path)
    assert not errors, f"pynwb.validate: {len(errors)} errors: {[str(e) for e in errors[:5]]}"

    with h5py.File(run_path, "r") as f, NWBHDF5IO(nwb_path, "r") as io:
        nwb = io.read()
        meta = f["meta"]
        committed = int(meta["samples_committed"][()])

        start = datetime.strptime(text(meta.attrs["start_time"]), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        assert nwb.session_start_time == start, f"session_start_time {nwb.session_start_time}, recording {start}"
        assert json.loads(nwb.notes) == json.loads(text(meta.attrs["config"])), "notes are not the config JSON"
        assert nwb.session_description, "empty session_description"

        # Units: every recorded neuron of every population, spike times per neuron.
        units = nwb.units
        assert units is not None, "no units table"
        for col in ("spike_times", "population", "node_id", "layer"):
            assert col in units.colnames, f"units lacks column {col}: {units.colnames}"
        assert "electrodes" not in units.colnames, "units has an electrodes column"
        population = [text(p) for p in units["population"].data[:]]
        node_id = np.asarray(units["node_id"].data[:], dtype=np.int64)
        layer = np.asarray(units["layer"].data[:], dtype=np.int64)
        row = {(p, int(n)): i for i, (p, n) in enumerate(zip(population, node_id))}
        assert len(row) == len(units), "units has duplicate (population, node_id) rows"
        pops = sorted(f["spikes"].keys())
        want_rows, n_spikes = 0, 0
        all_times = []
        for pop in pops:
            pmeta = f["meta/populations"][pop]
            rec = np.sort(pmeta["recorded_node_ids"][:].astype(np.int64))
            want_rows += len(rec)
            end = int(f["samples/spike_ptr"][pop][committed])
            t = f["spikes"][pop]["timestamps"][:end]
            ids = f["spikes"][pop]["node_ids"][:end].astype(np.int64)
            n_spikes += end
            all_times.append(t / 1000.0)
            for n in rec:
                assert (pop, int(n)) in row, f"no unit for {pop} node {n}"
                i = row[(pop, int(n))]
                assert layer[i] == int(pmeta.attrs["layer"]), f"{pop} node {n}: layer {layer[i]}"
                got = np.asarray(units.get_unit_spike_times(i))
                want = np.sort(t[ids == n]) / 1000.0
                assert got.shape == want.shape and np.array_equal(got, want), \
                    f"{pop} node {n}: {len(got)} spike times in the NWB file, {len(want)} in the recording" \
                    f" (first differing: {next((a, b) for a, b in zip(list(got) + [None], list(want) + [None]) if a != b)})"
        assert len(units) == want_rows, f"{len(units)} units, expected {want_rows}"
        assert set(population) == set(pops), f"populations {set(population)}, expected {set(pops)}"

        # Trials: one per committed sample.
        s = f["samples"]
        trials = nwb.trials
        assert trials is not None and len(trials) == committed, f"{0 if trials is None else len(trials)} trials, " \
                                                                f"expected {committed}"
        t0, t1 = s["t_start_ms"][:committed] / 1000.0, s["t_stop_ms"][:committed] / 1000.0
        label, predicted = s["label"][:committed], s["predicted"][:committed]
        assert np.array_equal(trials["start_time"].data[:], t0), "trial start_time differs"
        assert np.array_equal(trials["stop_time"].data[:], t1), "trial stop_time differs"
        assert np.array_equal(trials["label"].data[:], label), "trial label differs"
        assert np.array_equal(trials["predicted"].data[:], predicted), "trial predicted differs"
        assert np.array_equal(np.asarray(trials["correct"].data[:], dtype=bool), predicted == label), \
            "trial correct differs"
        assert np.array_equal(trials["output_counts"].data[:], s["output_counts"][:committed]), \
            "trial output_counts differ"
        # The spikes inside each trial's [start, stop) are the ones spike_ptr gives the sample.
        times = np.sort(np.asarray(units["spike_times"].target.data[:]))
        assert np.array_equal(times, np.sort(np.concatenate(all_times))), "spike times differ as a set"
        per_trial = np.searchsorted(times, t1, "left") - np.searchsorted(times, t0, "left")
        want = sum(np.diff(s["spike_ptr"][p][:committed + 1].astype(np.int64)) for p in pops)
        assert np.array_equal(per_trial, want), "spikes per trial differ from /samples/spike_ptr"

        # Membrane potentials.
        reports = sorted(f["report"].keys()) if "report" in f else []
        names = sorted(k for k in nwb.acquisition if k.startswith("membrane_potential_"))
        assert names == [f"membrane_potential_{p}" for p in reports], f"acquisition {names}, reports {reports}"
        for pop in reports:
            ts = nwb.acquisition[f"membrane_potential_{pop}"]
            g = f["report"][pop]
            start_ms, _, dt = g["mapping/time"][:3]
            assert ts.unit == "volts" and ts.conversion == 1e-3, f"{pop}: unit {ts.unit}, conversion {ts.conversion}"
            assert ts.rate == 1000.0 / dt and ts.starting_time == start_ms / 1000.0, f"{pop}: rate/start differ"
            assert np.array_equal(ts.data[:], g["data"][:]), f"{pop}: potentials differ"
            assert json.loads(ts.comments)["node_ids"] == g["mapping/node_ids"][:].tolist(), f"{pop}: node ids differ"

    print(f"NWB file matches the recording: {len(units)} units in {len(pops)} populations, {n_spikes} spikes, "
          f"{committed} trials, {len(reports)} potential series")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: check_nwb.py RUN.h5 OUT.nwb")
    main(sys.argv[1], sys.argv[2])
