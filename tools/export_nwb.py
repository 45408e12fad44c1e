#!/usr/bin/env python3
"""Converts a finished snnsim recording (HDF5, docs/RECORDING.md) to an NWB 2.x
file with pynwb, for the neuroscience ecosystem (pynwb, NWB Widgets, DANDI):

    export_nwb.py RUN.h5 OUT.nwb [--overwrite]

What the NWB file holds:
  - units: one row per recorded neuron of every recorded population (layer),
    ordered by layer, then node id; columns population (the layer's name),
    node_id (0-based within the population), layer (0 = input) and
    spike_times in seconds (the recording's ms / 1000), ascending per neuron.
    No electrodes: the neurons are simulated.
  - trials: one row per presented sample, start_time / stop_time in seconds
    ([t_start, t_stop) of the sample on the run's global time axis), label,
    predicted, correct (predicted == label) and output_counts (the output
    layer's spike count per class).
  - acquisition/membrane_potential_<pop>: per /report/<pop> (--record-v), a
    TimeSeries [steps, neurons] stored as the simulator's mV (unit "volts",
    conversion 1e-3), rate 1000 / dt Hz, starting at the report's start;
    its description and comments list the node ids of the columns.
  - session_start_time: /meta start_time (UTC); notes: the network config JSON
    verbatim; data_collection: the other /meta attributes (run options, seed,
    versions, ...) as one JSON object; identifier: a UUID derived from them,
    so exporting the same recording twice gives the same identifier.

Only committed samples are exported (/meta/samples_committed, as the format
says readers must). Spikes are grouped by neuron with a counting sort over
blocks of the spike datasets and potentials are copied in chunks, so memory is
about 8 bytes per exported spike plus one block. The NWB file is written to
OUT.nwb.tmp-<pid>.nwb and renamed when complete.

Errors (not a recording, an unfinished run: use `snnsim recover FILE` first,
OUT exists without --overwrite, ...) print one line
"export_nwb: error: ..." on stderr and exit with status 2.
"""
import argparse
import json
import os
import sys
import uuid
from datetime import datetime, timezone

import h5py
import numpy as np

PROG = "export_nwb"
BLOCK = 1 << 22  # spikes read per block (64 MiB of node ids + timestamps)


class ExportError(Exception):
    """A problem with the input or the output path, reported as one line."""


def text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.shape == ():
        return text(value[()])
    return str(value)


def plain(value):
    """A /meta attribute as a JSON-friendly value."""
    if isinstance(value, (bytes, np.bytes_, str)):
        return text(value)
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value


def unfinished(path):
    base = path[: -len(".partial")] if path.endswith(".partial") else path
    return (f"{path} is an unfinished recording (the run is still going, or was killed or interrupted); "
            f"make it a finished file with `snnsim recover {base}` (or continue it with "
            f"`snnsim run --resume {base}`) and export that")


def open_recording(path):
    if not os.path.exists(path):
        if os.path.exists(path + ".partial"):
            raise ExportError(unfinished(path + ".partial"))
        raise ExportError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ExportError(f"{path} is a directory, not a recording")
    if not h5py.is_hdf5(path):
        raise ExportError(f"{path} is not an HDF5 file, so not an snnsim recording")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        if path.endswith(".partial") or "consistency flags" in str(e) or "already open" in str(e):
            raise ExportError(unfinished(path)) from e
        raise ExportError(f"cannot open {path}: {e}") from e
    try:
        if text(f.attrs.get("format", b"")) != "snnsim-recording" or "meta" not in f or "samples" not in f:
            raise ExportError(f"{path} is not an snnsim recording (no format = snnsim-recording, /meta, /samples)")
        status = text(f["meta/status"][()]).rstrip("\0").strip() if "status" in f["meta"] else "missing"
        if status not in ("complete", "recovered"):
            raise ExportError(unfinished(path) if status in ("running", "aborted") else
                              f"{path}: unknown /meta/status '{status}' (expected complete or recovered)")
    except BaseException:
        f.close()
        raise
    return f


def session_start(meta, path):
    raw = text(meta.attrs["start_time"]) if "start_time" in meta.attrs else ""
    try:
        t = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ExportError(f"{path}: /meta start_time '{raw}' is not an ISO 8601 time") from None
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def describe_session(meta_attrs, config):
    layers = config.get("layers")
    neuron = config.get("neuron", {}) if isinstance(config.get("neuron"), dict) else {}
    net = "-".join(str(n) for n in layers) if isinstance(layers, list) else "?"
    parts = [f"snnsim {meta_attrs.get('snnsim_version', '?')} simulation of a {net} spiking network"]
    if neuron:
        parts.append(f"{neuron.get('model', '?')} neurons (tau {neuron.get('tau', '?')}, "
                     f"v_threshold {neuron.get('v_threshold', '?')})")
    parts.append(f"{meta_attrs.get('steps_per_sample', '?')} steps of {meta_attrs.get('dt_ms', '?')} ms per sample")
    if "data_dir" in meta_attrs:
        parts.append(f"presented the {meta_attrs.get('split', '?')} split of {meta_attrs['data_dir']}")
    return "; ".join(parts) + "; one trial per sample"


def group_spikes(f, pop, rec_ids, n_nodes, times):
    """Writes the spike times (s) of population pop into times (one element
    per spike), grouped by recorded neuron: a counting sort over blocks of
    /spikes/<pop>. Returns ends: neuron i's times are times[ends[i-1]:ends[i]],
    ascending."""
    n_spikes = len(times)
    g = f["spikes"][pop]
    ids_ds, t_ds = g["node_ids"], g["timestamps"]
    if ids_ds.shape[0] < n_spikes or t_ds.shape[0] < n_spikes:
        raise ExportError(f"/spikes/{pop} holds fewer spikes than /samples/spike_ptr/{pop} says ({n_spikes})")
    units = text(t_ds.attrs.get("units", b"ms"))
    if units != "ms":
        raise ExportError(f"/spikes/{pop}/timestamps are in '{units}', expected ms")
    lookup = np.full(n_nodes, -1, dtype=np.int64)
    lookup[rec_ids] = np.arange(len(rec_ids))
    n = len(rec_ids)

    def row_of(ids, start):
        if ids.size and int(ids.max()) >= n_nodes:
            raise ExportError(f"/spikes/{pop}/node_ids: node id {int(ids.max())} >= n_nodes {n_nodes}")
        rows = lookup[ids.astype(np.int64)]
        if ids.size and rows.min() < 0:
            bad = int(ids[np.argmin(rows)])
            raise ExportError(f"/spikes/{pop}: a spike of node {bad}, which is not in recorded_node_ids "
                              f"(spike {start + int(np.argmin(rows))})")
        return rows

    counts = np.zeros(n, dtype=np.int64)
    for start in range(0, n_spikes, BLOCK):
        counts += np.bincount(row_of(ids_ds[start:start + BLOCK], start), minlength=n)
    ends = np.cumsum(counts)
    fill = ends - counts
    for start in range(0, n_spikes, BLOCK):
        rows = row_of(ids_ds[start:start + BLOCK], start)
        t = t_ds[start:start + BLOCK]
        order = np.argsort(rows, kind="stable")
        srows = rows[order]
        block_counts = np.bincount(rows, minlength=n)
        rank = np.arange(len(rows)) - (np.cumsum(block_counts) - block_counts)[srows]
        times[fill[srows] + rank] = t[order] / 1000.0
        fill += block_counts
    # The format keeps timestamps by time (sorting = by_time), so each neuron's
    # times are ascending already; sort the neurons where a file says otherwise.
    d = np.diff(times)
    between = ends[:-1][(ends[:-1] > 0) & (ends[:-1] < n_spikes)]
    d[between - 1] = 0  # ignore the steps from one neuron's times to the next's
    if d.size and d.min() < 0:
        starts = ends - counts
        for i in range(n):
            times[starts[i]:ends[i]].sort()
    return ends


def build_units(f, pops, committed):
    from hdmf.common import VectorData, VectorIndex
    from pynwb.misc import Units

    ends_of = {}
    for pop in pops:
        ptr = f["samples/spike_ptr"][pop]
        if ptr.shape[0] < committed + 1:
            raise ExportError(f"/samples/spike_ptr/{pop} has {ptr.shape[0]} entries, expected {committed + 1}")
        ends_of[pop] = int(ptr[committed])
    times = np.empty(sum(ends_of.values()), dtype=np.float64)  # every unit's spike times, in seconds
    index, population, node_id, layer = [], [], [], []
    total = 0
    for pop in pops:
        meta = f["meta/populations"][pop]
        n_nodes = int(meta.attrs["n_nodes"])
        rec = np.sort(meta["recorded_node_ids"][:].astype(np.int64)) if "recorded_node_ids" in meta \
            else np.arange(n_nodes)
        if rec.size and (rec[0] < 0 or rec[-1] >= n_nodes):
            raise ExportError(f"/meta/populations/{pop}/recorded_node_ids out of range [0, {n_nodes})")
        n_spikes = ends_of[pop]
        ends = group_spikes(f, pop, rec, n_nodes, times[total:total + n_spikes])
        index.append(ends + total)
        total += n_spikes
        population += [pop] * len(rec)
        node_id.append(rec)
        layer += [int(meta.attrs["layer"])] * len(rec)
    index = np.concatenate(index) if index else np.zeros(0, dtype=np.int64)
    node_id = np.concatenate(node_id) if node_id else np.zeros(0, dtype=np.int64)

    spike_times = VectorData(name="spike_times", description="the spike times for each unit in seconds",
                             data=times)
    columns = [
        spike_times,
        VectorIndex(name="spike_times_index", data=index.astype(np.uint64), target=spike_times),
        VectorData(name="population", description="the snnsim population (network layer) of the neuron",
                   data=population),
        VectorData(name="node_id", description="the neuron's id within its population, 0-based "
                   "(SONATA node id)", data=node_id.astype(np.uint64)),
        VectorData(name="layer", description="the network layer of the neuron (0 = input encoder)",
                   data=np.asarray(layer, dtype=np.int32)),
    ]
    return Units(name="units", description="every recorded neuron of every recorded population of the simulated "
                 "network; spike times in seconds from the start of the run", id=np.arange(len(node_id)),
                 columns=columns)


def build_trials(f, committed):
    from hdmf.common import VectorData
    from pynwb.epoch import TimeIntervals

    s = f["samples"]
    label = s["label"][:committed].astype(np.int16)
    predicted = s["predicted"][:committed].astype(np.int16)
    columns = [
        VectorData(name="start_time", description="start of the sample's presentation, in seconds",
                   data=s["t_start_ms"][:committed] / 1000.0),
        VectorData(name="stop_time", description="end of the sample's presentation (exclusive), in seconds",
                   data=s["t_stop_ms"][:committed] / 1000.0),
        VectorData(name="label", description="the sample's true class", data=label),
        VectorData(name="predicted", description="the class the network predicted (most output spikes)",
                   data=predicted),
        VectorData(name="correct", description="predicted == label", data=predicted == label),
    ]
    if "output_counts" in s:
        columns.append(VectorData(name="output_counts", description="spikes of each output neuron (class) "
                                  "during the sample", data=s["output_counts"][:committed]))
    return TimeIntervals(name="trials", description="one trial per presented sample, in presentation order",
                         id=np.arange(committed), columns=columns)


def build_reports(f, committed):
    from hdmf.data_utils import GenericDataChunkIterator
    from pynwb import TimeSeries

    class Rows(GenericDataChunkIterator):
        """The first n_rows rows of an h5py dataset, read a buffer at a time."""

        def __init__(self, ds, n_rows, **kwargs):
            self.ds, self.n_rows = ds, n_rows
            super().__init__(**kwargs)

        def _get_data(self, selection):
            return self.ds[selection]

        def _get_maxshape(self):
            return (self.n_rows,) + tuple(self.ds.shape[1:])

        def _get_dtype(self):
            return self.ds.dtype

    if "report" not in f:
        return []
    t_stop_ms = float(f["samples/t_stop_ms"][committed - 1]) if committed else 0.0
    out = []
    for pop in sorted(f["report"].keys()):
        g = f["report"][pop]
        data = g["data"]
        start, _, dt = (float(x) for x in g["mapping/time"][:3])
        node_ids = [int(x) for x in g["mapping/node_ids"][:]]
        if dt <= 0 or data.ndim != 2 or data.shape[1] != len(node_ids):
            raise ExportError(f"/report/{pop}: data {data.shape} does not match mapping (dt {dt}, "
                              f"{len(node_ids)} node ids)")
        n_rows = min(data.shape[0], max(0, int(round((t_stop_ms - start) / dt))))
        unit = text(data.attrs.get("units", b"mV"))
        conversion = {"mV": 1e-3, "V": 1.0, "volts": 1.0}.get(unit)
        if conversion is None:
            raise ExportError(f"/report/{pop}/data is in '{unit}', expected mV")
        ids = ", ".join(map(str, node_ids))
        if n_rows == 0:
            values = np.zeros((0, len(node_ids)), dtype=data.dtype)
        else:
            values = Rows(data, n_rows, buffer_gb=0.25, chunk_mb=4.0)
        out.append(TimeSeries(
            name=f"membrane_potential_{pop}", data=values, unit="volts", conversion=conversion,
            starting_time=start / 1000.0, rate=1000.0 / dt,
            description=f"membrane potential of population {pop}, one column per neuron, "
                        f"node ids {ids} (the units table's node_id), stored in {unit}",
            comments=json.dumps({"population": pop, "node_ids": node_ids, "stored_unit": unit})))
    return out


def export(src, dst, overwrite):
    from pynwb import NWBHDF5IO, NWBFile

    if os.path.exists(dst):
        if not overwrite:
            raise ExportError(f"{dst} exists; pass --overwrite to replace it")
        if os.path.isdir(dst):
            raise ExportError(f"{dst} is a directory")
        if os.path.exists(src) and os.path.samefile(src, dst):
            raise ExportError(f"{dst} is the recording itself")
    out_dir = os.path.dirname(os.path.abspath(dst))
    if not os.path.isdir(out_dir):
        raise ExportError(f"{out_dir}: no such directory")

    with open_recording(src) as f:
        try:
            meta = f["meta"]
            meta_attrs = {k: plain(v) for k, v in meta.attrs.items()}
            config_text = text(meta.attrs.get("config", b"{}"))
            try:
                config = json.loads(config_text)
            except ValueError:
                raise ExportError(f"{src}: /meta config is not JSON") from None
            committed = int(meta["samples_committed"][()])
            pops = [p for p in (f["spikes"].keys() if "spikes" in f else [])]
            missing = [p for p in pops if p not in f["meta/populations"]]
            if missing:
                raise ExportError(f"{src}: /spikes/{missing[0]} has no /meta/populations/{missing[0]}")
            pops.sort(key=lambda p: (int(f["meta/populations"][p].attrs["layer"]), p))
            start = session_start(meta, src)

            others = {k: v for k, v in meta_attrs.items() if k != "config"}
            for k in ("run_options",):
                try:
                    others[k] = json.loads(others[k])
                except (KeyError, TypeError, ValueError):
                    pass
            others["status"] = text(meta["status"][()]).rstrip("\0")
            others["samples_committed"] = committed
            identity = json.dumps({"config": config_text, **{k: str(v) for k, v in meta_attrs.items()}},
                                  sort_keys=True)
            nwb = NWBFile(
                session_description=describe_session(meta_attrs, config),
                identifier=str(uuid.uuid5(uuid.NAMESPACE_URL, "snnsim-recording:" + identity)),
                session_start_time=start,
                session_id=os.path.basename(src),
                experiment_description="simulated spiking neural network (snnsim); exported from "
                                       f"{os.path.basename(src)} by tools/export_nwb.py",
                notes=config_text,
                data_collection=json.dumps(others, sort_keys=True),
                source_script="tools/export_nwb.py (snnsim)",
                source_script_file_name="export_nwb.py",
                keywords=["spiking neural network", "simulation", "snnsim"],
            )
            nwb.units = build_units(f, pops, committed)
            nwb.trials = build_trials(f, committed)
            for ts in build_reports(f, committed):
                nwb.add_acquisition(ts)

            tmp = f"{dst}.tmp-{os.getpid()}.nwb"  # pynwb warns about names not ending in .nwb
            try:
                with NWBHDF5IO(tmp, "w") as io:
                    io.write(nwb)
                os.replace(tmp, dst)
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)
        except (KeyError, ValueError, TypeError, IndexError, OSError) as e:
            raise ExportError(f"{src}: malformed recording or unwritable output: {type(e).__name__}: {e}") from e
    n_spikes = len(nwb.units.get("spike_times").target.data)
    return (f"{dst}: {len(nwb.units)} units ({', '.join(pops) or 'no populations'}), {n_spikes} spikes, "
            f"{committed} trials, {len(nwb.acquisition)} membrane-potential series")


class Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f"{PROG}: error: {message} (usage: export_nwb.py RUN.h5 OUT.nwb [--overwrite])", file=sys.stderr)
        sys.exit(2)


def main(argv=None):
    p = Parser(prog=PROG, description="Convert a finished snnsim recording (HDF5) to an NWB 2.x file.")
    p.add_argument("recording", metavar="RUN.h5", help="a finished recording (status complete or recovered)")
    p.add_argument("output", metavar="OUT.nwb", help="the NWB file to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUT.nwb")
    args = p.parse_args(argv)
    try:
        print(export(args.recording, args.output, args.overwrite))
    except ExportError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
