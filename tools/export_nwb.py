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

The recording is checked against the format's table, recording/schema.json
(the file the C++ writer and reader are generated from), before anything is
read by its extents: every dataset and attribute present with its type and
shape, spike pointers rising from 0 to the spike count, node ids within the
population, row counts equal to the committed samples, extents the file's
storage can hold. Errors (not a recording, a malformed one, an unfinished run:
use `snnsim recover FILE` first, OUT exists without --overwrite, ...) print one
line "export_nwb: error: ..." on stderr and exit with status 2.
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
ROWS = 1 << 16   # pointer rows read per block while checking


class ExportError(Exception):
    """A problem with the input or the output path, reported as one line."""


def load_schema():
    """recording/schema.json, the one table of the format: beside this tool in
    the source tree (tools/ and recording/ are siblings), or next to it."""
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "..", "recording", "schema.json"), os.path.join(here, "schema.json")):
        if os.path.isfile(candidate):
            try:
                with open(candidate, encoding="utf-8") as f:
                    return json.load(f)
            except (OSError, ValueError) as e:
                raise ExportError(f"cannot read the recording schema {candidate}: {e}") from None
    raise ExportError(f"the recording schema (recording/schema.json) is not beside {here}")


SCHEMA = None  # loaded by main()


def entry(kind, ident):
    for e in SCHEMA[kind]:
        if e["id"] == ident:
            return e
    raise ExportError(f"recording/schema.json has no {kind[:-1]} '{ident}'")


def at(e, pop=""):
    """A schema entry's path, {pop} replaced."""
    return e["path"].replace("{pop}", pop)


def ds_path(ident, pop=""):
    return at(entry("datasets", ident), pop)


def dtype_fits(dtype, want):
    if want in ("i16", "u32", "u64", "i64"):
        return dtype.kind in "iu" and dtype.itemsize <= 8 and h5py.check_enum_dtype(dtype) is None
    if want in ("f32", "f64"):
        return dtype.kind == "f" and dtype.itemsize <= 8
    if want == "str":
        return dtype.kind == "S" or h5py.check_string_dtype(dtype) is not None
    if want == "enum_u8":
        return h5py.check_enum_dtype(dtype) is not None
    return False


class Checker:
    """Checks a recording against the schema, as the C++ reader does
    (recording/src/schema_check.cpp), and collects what it holds."""

    def __init__(self, f, src):
        self.f, self.src = f, src
        self.known = {}

    def fail(self, what):
        raise ExportError(f"{self.src}: {what}")

    def get(self, path):
        try:
            return self.f.get(path)
        except (KeyError, OSError, RuntimeError, ValueError):
            return None

    def group(self, path):
        g = self.get(path)
        if not isinstance(g, h5py.Group):
            self.fail(f"no group /{path} (the recording format requires it)")
        return g

    def members(self, path):
        g = self.group(path)
        n = len(g)
        if n > SCHEMA["limits"]["populations"]:
            self.fail(f"/{path} has {n} members, more than the {SCHEMA['limits']['populations']} a recording can have")
        return sorted(g.keys())

    def expected(self, extent, known):
        """The value an extent must have, or (None, name) when it is learnt."""
        if isinstance(extent, int):
            return extent, None
        if extent in ("samples", "steps"):
            return known[extent], None
        if extent == "samples+1":
            return known["samples"] + 1, None
        if extent == "samples*steps":
            return known["samples"] * known["steps"], None
        if extent == "width+1":
            return (known["width"] + 1, None) if "width" in known else (None, None)
        return (known[extent], None) if extent in known else (None, extent)

    def dataset(self, ident, pop="", known=None, optional_ok=True):
        d = entry("datasets", ident)
        known = self.known if known is None else known
        path = at(d, pop)
        ds = self.get(path)
        if ds is None and d.get("optional") and optional_ok:
            return None
        if not isinstance(ds, h5py.Dataset):
            self.fail(f"no dataset /{path} (the recording format requires it)")
        if not dtype_fits(ds.dtype, d["type"]):
            self.fail(f"/{path} has type {ds.dtype}, the format says {d['type']}")
        if d["type"] == "str" and d.get("length") and ds.dtype.kind == "S" and ds.dtype.itemsize != d["length"]:
            self.fail(f"/{path} is not a string of {d['length']} bytes")
        shape = ds.shape
        if shape is None or len(shape) != len(d["shape"]):
            self.fail(f"/{path} has shape {shape}, the format gives it {len(d['shape'])} dimension(s)")
        used = list(shape)
        for i, (got, extent) in enumerate(zip(shape, d["shape"])):
            want, learn = self.expected(extent, known)
            if learn:
                known[learn] = got
                continue
            if want is None:
                continue
            if got != want:
                self.fail(f"/{path} has shape {tuple(shape)}: dimension {i} should be {want} ({extent})")
        # The storage must hold what the extent claims (a damaged extent would
        # make a reader allocate for, or loop over, fill values); scale-offset
        # packs constant ids into almost nothing: node_ids match the timestamps.
        if shape and d.get("filter") != "spike_ids":
            stored = ds.id.get_storage_size()
            ratio = SCHEMA["limits"]["compression_ratio"] if (ds.compression or ds.scaleoffset is not None) else 1
            claimed = float(np.prod([float(x) for x in used])) * ds.dtype.itemsize
            if claimed > stored * ratio + 65536:
                self.fail(f"/{path} claims shape {tuple(shape)} but stores only {stored} bytes: its extent is damaged")
        if d.get("units"):
            units = text(ds.attrs.get("units", b""))
            if units != d["units"]:
                self.fail(f"/{path} is in '{units}', the format says '{d['units']}'")
        return ds

    def attribute(self, ident, obj, what, lo=None, hi=None):
        a = entry("attributes", ident)
        if a["name"] not in obj.attrs:
            if a.get("optional"):
                return None
            self.fail(f"{what} has no attribute '{a['name']}' (the recording format requires it)")
        try:
            aid = obj.attrs.get_id(a["name"])
            dtype, shape = aid.dtype, aid.shape
        except (KeyError, OSError, RuntimeError, ValueError, TypeError) as e:
            self.fail(f"{what}: attribute '{a['name']}' cannot be read ({e})")
        if not dtype_fits(dtype, a["type"]) or tuple(shape or ()) != tuple(a["shape"]):
            self.fail(f"{what}: attribute '{a['name']}' is {dtype} {shape}, the format says {a['type']} {a['shape']}")
        value = obj.attrs[a["name"]]
        if a["type"] == "str":
            return text(value)
        if lo is not None and not lo <= value <= hi:
            self.fail(f"{what}: attribute '{a['name']}' is {value}, outside {lo}..{hi}")
        return value

    def ids(self, ds, n, path, limit=None):
        v = ds[:n].astype(np.uint64)
        if n and (int(v.max()) >= 1 << 62 or np.any(v[1:] <= v[:-1])):
            self.fail(f"/{path}: ids are not ascending and distinct")
        if limit is not None and n and int(v[-1]) >= limit:
            self.fail(f"/{path} has node id {int(v[-1])}, but the population has n_nodes = {limit}")
        return v.astype(np.int64)

    def check(self):
        f, lim = self.f, SCHEMA["limits"]
        fmt = self.attribute("format", f, "the root")
        if fmt != SCHEMA["format"]:
            self.fail(f"not an snnsim recording (format '{fmt}')")
        version = self.attribute("format_version", f, "the root")
        if int(version) != SCHEMA["format_version"]:
            self.fail(f"format_version {version}; this tool reads version {SCHEMA['format_version']}")
        self.attribute("magic", f, "the root")
        self.attribute("version", f, "the root")
        for g in SCHEMA["groups"]:
            if "{pop}" not in g["path"]:
                self.group(g["path"])
        meta = f[entry("groups", "meta")["path"]]
        out = {"steps": int(self.attribute("steps_per_sample", meta, "/meta", 1, lim["steps"]))}
        dt = self.attribute("dt_ms", meta, "/meta")
        if not (np.isfinite(dt) and dt > 0):
            self.fail(f"/meta: attribute 'dt_ms' is {dt}, not a positive number")
        out["dt_ms"] = float(dt)
        # A population model's trials (snnsim simulate) say so; a network's
        # recording has no kind (as snnsim's reader checks).
        kind = self.attribute("kind", meta, "/meta")
        if kind is not None and kind != "populations":
            self.fail(f"/meta: attribute 'kind' is '{kind}', not 'populations' (the only kind a recording states)")
        committed = int(self.dataset("samples_committed")[()])
        if committed > 1 << 48:
            self.fail(f"/{ds_path('samples_committed')} is {committed}, not a sample count")
        out["samples"] = committed
        self.known = {"samples": committed, "steps": out["steps"]}
        for ident in ("label", "predicted", "output_counts", "t_start_ms", "t_stop_ms", "layer_spikes",
                      "prediction_by_step"):
            self.dataset(ident)
        classes = self.known["classes"]
        if not 1 <= classes <= lim["classes"]:
            self.fail(f"/{ds_path('output_counts')} has {classes} classes, not 1..{lim['classes']}")
        out["classes"] = classes
        for ident in ("label", "predicted"):
            ds = f[ds_path(ident)]
            for s0 in range(0, committed, ROWS):
                v = ds[s0:min(s0 + ROWS, committed)].astype(np.int64)
                bad = (v < 0) | (v >= classes)
                if np.any(bad):
                    row = s0 + int(np.argmax(bad))
                    self.fail(f"/{ds_path(ident)}: sample {row} has {int(v[row - s0])}, outside the classes "
                              f"0..{classes - 1}")

        names = self.members(entry("groups", "spikes")["path"])
        for other in ("populations", "spike_ptrs"):
            path = entry("groups", other)["path"]
            there = self.members(path)
            if there != names:
                odd = sorted(set(there) ^ set(names))[0]
                self.fail(f"population '{odd}' is in only one of /spikes and /{path}")
        pops = {}
        for pop in names:
            g = f[at(entry("groups", "population"), pop)]
            what = "/" + at(entry("groups", "population"), pop)
            n_nodes = int(self.attribute("n_nodes", g, what, 1, lim["n_nodes"]))
            layer = int(self.attribute("layer", g, what, 0, lim["layers"]))
            self.attribute("sorting", f[at(entry("groups", "spike_population"), pop)], f"/spikes/{pop}")
            known = dict(self.known)
            ids_ds = self.dataset("recorded_node_ids", pop, known)
            recorded = known["recorded"]
            if not 1 <= recorded <= n_nodes:
                self.fail(f"/{ds_path('recorded_node_ids', pop)} lists {recorded} neurons of a population of {n_nodes}")
            rec = self.ids(ids_ds, recorded, ds_path("recorded_node_ids", pop), n_nodes)
            ptr = self.dataset("spike_ptr", pop, known)
            path = ds_path("spike_ptr", pop)
            most = recorded * out["steps"]
            previous = 0
            for s0 in range(0, committed + 1, ROWS):
                raw = ptr[s0:min(s0 + ROWS, committed + 1)].astype(np.uint64)
                if int(raw.max()) >= 1 << 60:
                    self.fail(f"/{path}: pointer {int(raw.max())} is not a spike count")
                v = raw.astype(np.int64)
                if s0 == 0 and v[0] != 0:
                    self.fail(f"/{path}: the first pointer is {int(v[0])}, not 0")
                steps = np.diff(np.concatenate(([previous], v)))
                if np.any(steps < 0):
                    row = s0 + int(np.argmax(steps < 0))
                    self.fail(f"/{path}: pointer {int(v[row - s0])} at row {row} is below the one before "
                              f"({int(v[row - s0 - 1]) if row > s0 else previous}): pointers must not decrease")
                if np.any(steps > most):
                    row = s0 + int(np.argmax(steps > most))
                    self.fail(f"/{path}: sample {row - 1} has {int(steps[row - s0])} spikes, more than its "
                              f"{recorded} neurons x {out['steps']} steps can fire")
                previous = int(v[-1])
            known["events"] = previous
            self.dataset("timestamps", pop, known)
            ids_known = dict(known)
            del ids_known["events"]
            self.dataset("node_ids", pop, ids_known)
            if ids_known["events"] != previous:
                self.fail(f"/{ds_path('node_ids', pop)} holds {ids_known['events']} ids but "
                          f"/{ds_path('timestamps', pop)} holds {previous} timestamps (the spike count)")
            pops[pop] = {"n_nodes": n_nodes, "layer": layer, "recorded": rec, "events": previous}
        out["populations"] = pops

        reports = {}
        for pop in self.members(entry("groups", "report")["path"]):
            known = dict(self.known)
            ids_ds = self.dataset("report_node_ids", pop, known)
            width = known["width"]
            if not 1 <= width <= lim["n_nodes"]:
                self.fail(f"/{ds_path('report_node_ids', pop)} maps {width} neurons")
            node_ids = self.ids(ids_ds, width, ds_path("report_node_ids", pop))
            self.dataset("report_index_pointers", pop, known)
            self.dataset("report_element_ids", pop, known)
            t = self.dataset("report_time", pop, known)[:3].astype(np.float64)
            if not (np.all(np.isfinite(t)) and t[2] > 0):
                self.fail(f"/{ds_path('report_time', pop)} is not {{start, stop, positive dt}}")
            self.dataset("report_data", pop, known)
            reports[pop] = {"node_ids": node_ids, "time": t}
        out["reports"] = reports
        return out


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
        if text(f.attrs.get("format", b"")) != SCHEMA["format"]:
            raise ExportError(f"{path} is not an snnsim recording (no format = {SCHEMA['format']})")
        status = text(Checker(f, path).dataset("status")[()]).rstrip("\0").strip()
        if status not in SCHEMA["finished_statuses"]:
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
    n_spikes = len(times)  # the extents, units and pointers were checked (Checker)
    ids_ds, t_ds = f[ds_path("node_ids", pop)], f[ds_path("timestamps", pop)]
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
        if not np.all(np.isfinite(t)):
            raise ExportError(f"/{ds_path('timestamps', pop)}: spike {start + int(np.argmin(np.isfinite(t)))} "
                              "has no finite time")
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


def build_units(f, pops, contents):
    from hdmf.common import VectorData, VectorIndex
    from pynwb.misc import Units

    times = np.empty(sum(contents["populations"][p]["events"] for p in pops), dtype=np.float64)  # seconds
    index, population, node_id, layer = [], [], [], []
    total = 0
    for pop in pops:
        info = contents["populations"][pop]
        rec, n_spikes = info["recorded"], info["events"]
        ends = group_spikes(f, pop, rec, info["n_nodes"], times[total:total + n_spikes])
        index.append(ends + total)
        total += n_spikes
        population += [pop] * len(rec)
        node_id.append(rec)
        layer += [info["layer"]] * len(rec)
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

    def rows(ident):  # extents checked: exactly the committed rows
        return f[ds_path(ident)][:committed]

    label = rows("label").astype(np.int16)
    predicted = rows("predicted").astype(np.int16)
    columns = [
        VectorData(name="start_time", description="start of the sample's presentation, in seconds",
                   data=rows("t_start_ms") / 1000.0),
        VectorData(name="stop_time", description="end of the sample's presentation (exclusive), in seconds",
                   data=rows("t_stop_ms") / 1000.0),
        VectorData(name="label", description="the sample's true class", data=label),
        VectorData(name="predicted", description="the class the network predicted (most output spikes)",
                   data=predicted),
        VectorData(name="correct", description="predicted == label", data=predicted == label),
    ]
    columns.append(VectorData(name="output_counts", description="spikes of each output neuron (class) "
                              "during the sample", data=rows("output_counts")))
    return TimeIntervals(name="trials", description="one trial per presented sample, in presentation order",
                         id=np.arange(committed), columns=columns)


def build_reports(f, committed, contents):
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

    t_stop_ms = float(f[ds_path("t_stop_ms")][committed - 1]) if committed else 0.0
    out = []
    for pop, info in sorted(contents["reports"].items()):
        data = f[ds_path("report_data", pop)]  # checked: [committed x T, len(node_ids)]
        start, _, dt = (float(x) for x in info["time"])
        node_ids = [int(x) for x in info["node_ids"]]
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
            meta = f[entry("groups", "meta")["path"]]
            meta_attrs = {k: plain(v) for k, v in meta.attrs.items()}
            config_text = text(meta.attrs.get("config", b"{}"))
            try:
                config = json.loads(config_text)
            except ValueError:
                raise ExportError(f"{src}: /meta config is not JSON") from None
            contents = Checker(f, src).check()
            committed = contents["samples"]
            pops = sorted(contents["populations"], key=lambda p: (contents["populations"][p]["layer"], p))
            start = session_start(meta, src)

            others = {k: v for k, v in meta_attrs.items() if k != "config"}
            for k in ("run_options",):
                try:
                    others[k] = json.loads(others[k])
                except (KeyError, TypeError, ValueError):
                    pass
            others["status"] = text(f[ds_path("status")][()]).rstrip("\0")
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
            nwb.units = build_units(f, pops, contents)
            nwb.trials = build_trials(f, committed)
            for ts in build_reports(f, committed, contents):
                nwb.add_acquisition(ts)

            tmp = f"{dst}.tmp-{os.getpid()}.nwb"  # pynwb warns about names not ending in .nwb
            try:
                with NWBHDF5IO(tmp, "w") as io:
                    io.write(nwb)
                os.replace(tmp, dst)
            finally:
                if os.path.exists(tmp):
                    os.remove(tmp)
        except ExportError as e:
            if not str(e).startswith(src):
                raise ExportError(f"{src}: {e}") from e
            raise
        except (KeyError, ValueError, TypeError, IndexError, OSError, RuntimeError, MemoryError) as e:
            raise ExportError(f"{src}: malformed recording or unwritable output: {type(e).__name__}: "
                              f"{' '.join(str(e).split())}") from e
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
    global SCHEMA
    try:
        SCHEMA = load_schema()
        print(export(args.recording, args.output, args.overwrite))
    except ExportError as e:
        print(f"{PROG}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except Exception as e:  # pylint: disable=broad-except
        # Whatever a damaged file provokes in h5py or pynwb: one line, never a traceback.
        print(f"{PROG}: error: {args.recording}: cannot export: {type(e).__name__}: {' '.join(str(e).split())}",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
