#!/usr/bin/env python3
"""Wall-time cost of recording spikes in `snnsim run`, and the size of what it writes.

Acceptance target: recording all hidden and output spikes
(`--output FILE --record hidden,output`) adds at most 15% wall time to
`snnsim run` on the held-out MNIST split (--split test), and the file
size per million recorded spikes is reported.

What it does, in one invocation:

1. Reads the network's layer sizes from the checkpoint's JSON `config`
   attribute and derives the population names: "hidden" and "output" for
   one hidden layer, "hidden1", "hidden2", ..., "output" for deeper ones.
2. Runs `snnsim run` alternately without and with recording (A B A B ...),
   `--repeats` times each, after one untimed warm-up run of each mode
   (page cache, dynamic loader). Each run is timed from the outside with
   time.perf_counter() around subprocess.run, so the numbers include
   process start, checkpoint and data loading: the wall time a user sees.
   Alternating instead of running all A then all B spreads slow drifts in
   machine load (other builds, thermal state, cache pressure) evenly over
   both modes, so they do not show up as recording overhead.
3. Reports overhead = median(recording) / median(plain) - 1.
4. Opens the last recording with h5py: spikes per population
   (len of /spikes/<pop>/node_ids), file size, bytes per million spikes,
   and the compression ratio against the uncompressed payload of
   8 bytes (float64 timestamp) + 8 bytes (uint64 node id) per spike.

With --limit the fixed per-process cost (start-up, loading) is a larger
share of each run, which dilutes the overhead; the acceptance number is the
full split (no --limit).

Usage:
  .venv/bin/python bench/recording_bench.py SNNSIM [--checkpoint CK]
      [--data-dir DIR] [--repeats 3] [--threads 1] [--limit N] [--json OUT]
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

import h5py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CHECKPOINT = os.path.join(ROOT, "out", "mnist", "checkpoint.h5")
BYTES_PER_SPIKE = 8 + 8  # float64 timestamp + uint64 node id
MAX_OVERHEAD_PCT = 15.0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("snnsim", help="path to the snnsim binary (e.g. build/apps/snnsim/snnsim)")
    p.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT,
                   help="checkpoint written by snnsim train (default: %(default)s)")
    p.add_argument("--data-dir", help="MNIST IDX folder (default: the binary's default)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per mode (default: %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="snnsim --threads (default: %(default)s)")
    p.add_argument("--limit", type=int, help="simulate the first N test samples only (default: all)")
    p.add_argument("--compress", action="store_true",
                   help="record with snnsim's --compress (deflate the spike datasets too)")
    p.add_argument("--json", help="write all numbers to this JSON file")
    args = p.parse_args()
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    return args


def checkpoint_config(path):
    """The network config (parsed JSON) stored as a `config` string attribute in the checkpoint."""
    with h5py.File(path, "r") as f:
        found = []

        def look(_name, obj):
            if "config" in obj.attrs and not found:
                found.append(obj.attrs["config"])

        look("/", f)
        if not found:
            f.visititems(look)
    if not found:
        raise SystemExit(f"{path}: no 'config' attribute found")
    raw = found[0]
    return json.loads(raw.decode() if isinstance(raw, bytes) else str(raw))


def population_names(layers):
    """Recording population names for layer sizes [input, hidden..., output]."""
    n_hidden = len(layers) - 2
    if n_hidden == 1:
        return ["hidden", "output"]
    return [f"hidden{i}" for i in range(1, n_hidden + 1)] + ["output"]


def run_command(args, record_to=None, populations=()):
    cmd = [args.snnsim, "run", "--checkpoint", args.checkpoint, "--split", "test",
           "--threads", str(args.threads)]
    if args.data_dir:
        cmd += ["--data-dir", args.data_dir]
    if args.limit is not None:
        cmd += ["--limit", str(args.limit)]
    if record_to:
        cmd += ["--output", record_to, "--overwrite", "--record", ",".join(populations)]
        if args.compress:
            cmd.append("--compress")
    return cmd


def timed_run(cmd):
    """Seconds of wall clock for one snnsim run, measured from outside; fails loudly on error."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"command failed (exit {proc.returncode}): {' '.join(cmd)}")
    return seconds, proc.stdout


def alternate(plain_cmd, rec_cmd, repeats):
    """One untimed warm-up of each mode, then A B A B ... timed runs."""
    timed_run(plain_cmd)
    timed_run(rec_cmd)
    times = {"plain": [], "record": []}
    stdout = {}
    for i in range(repeats):
        for mode, cmd in (("plain", plain_cmd), ("record", rec_cmd)):
            seconds, stdout[mode] = timed_run(cmd)
            times[mode].append(seconds)
            print(f"  run {i + 1}/{repeats} {mode:6s} {seconds:8.3f} s", flush=True)
    return times, stdout


def recording_stats(path, populations):
    """Spike counts per population, file size, and sizes relative to the spike count."""
    spikes = {}
    spike_storage = 0
    with h5py.File(path, "r") as f:
        for pop in populations:
            node_ids = f[f"/spikes/{pop}/node_ids"]
            timestamps = f[f"/spikes/{pop}/timestamps"]
            if len(node_ids) != len(timestamps):
                raise SystemExit(f"{path}: /spikes/{pop} has {len(node_ids)} node ids "
                                 f"but {len(timestamps)} timestamps")
            spikes[pop] = len(node_ids)
            spike_storage += node_ids.id.get_storage_size() + timestamps.id.get_storage_size()
    total = sum(spikes.values())
    file_bytes = os.path.getsize(path)
    payload = total * BYTES_PER_SPIKE
    per_million = lambda b: b / total * 1e6 if total else None
    return {
        "spikes": spikes,
        "spikes_total": total,
        "file_bytes": file_bytes,
        "file_bytes_per_million_spikes": per_million(file_bytes),
        "spike_datasets_bytes": spike_storage,
        "spike_datasets_bytes_per_million_spikes": per_million(spike_storage),
        "uncompressed_payload_bytes": payload,
        "compression_ratio_file": payload / file_bytes if file_bytes else None,
        "compression_ratio_spike_datasets": payload / spike_storage if spike_storage else None,
    }


def system_info():
    """nproc, load average and the BLAS of the venv's LibTorch (the one snnsim links)."""
    config = subprocess.run([sys.executable, "-c", "import torch; print(torch.__config__.show())"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    mkl = re.search(r"Math Kernel Library Version ([\w.]+)", config)
    nproc = subprocess.run(["nproc"], stdout=subprocess.PIPE, text=True).stdout.strip()
    return {
        "nproc": int(nproc) if nproc.isdigit() else None,
        "loadavg_1m": os.getloadavg()[0],
        "blas": blas.group(1) if blas else None,
        "mkl": f"MKL {mkl.group(1)}" if mkl else None,
        "machine": platform.machine(),
    }


def summarize(times):
    med = {mode: statistics.median(ts) for mode, ts in times.items()}
    return med, (med["record"] / med["plain"] - 1.0) * 100.0


def print_report(args, populations, times, medians, overhead_pct, rec, info, accuracy_line):
    print()
    print(f"snnsim run, test split{'' if args.limit is None else f', --limit {args.limit}'}, "
          f"--threads {args.threads}, {args.repeats} timed run(s) per mode (ABAB)")
    if accuracy_line:
        print(f"  {accuracy_line}")
    print(f"{'mode':<10}{'median s':>10}{'min s':>10}{'max s':>10}")
    for mode in ("plain", "record"):
        ts = times[mode]
        print(f"{mode:<10}{medians[mode]:>10.3f}{min(ts):>10.3f}{max(ts):>10.3f}")
    verdict = "PASS" if overhead_pct <= MAX_OVERHEAD_PCT else "FAIL"
    scope = "" if args.limit is None else "  (--limit: not the acceptance configuration)"
    print(f"recording overhead: {overhead_pct:+.1f}%  [{verdict}, target <= {MAX_OVERHEAD_PCT:.0f}%]{scope}")
    print()
    print(f"{'population':<12}{'spikes':>14}")
    for pop in populations:
        print(f"{pop:<12}{rec['spikes'][pop]:>14,}")
    print(f"{'total':<12}{rec['spikes_total']:>14,}")
    print()
    mb = 1e6
    bpm = rec["file_bytes_per_million_spikes"]
    sbpm = rec["spike_datasets_bytes_per_million_spikes"]
    print(f"file size:            {rec['file_bytes'] / mb:10.3f} MB"
          + (f"  = {bpm / mb:.3f} MB per million spikes" if bpm else ""))
    print(f"spike datasets:       {rec['spike_datasets_bytes'] / mb:10.3f} MB"
          + (f"  = {sbpm / mb:.3f} MB per million spikes" if sbpm else ""))
    print(f"uncompressed payload: {rec['uncompressed_payload_bytes'] / mb:10.3f} MB"
          f"  ({BYTES_PER_SPIKE} B/spike: f64 timestamp + u64 node id)")
    if rec["compression_ratio_file"]:
        print(f"compression ratio:    {rec['compression_ratio_file']:10.2f}x whole file, "
              f"{rec['compression_ratio_spike_datasets']:.2f}x spike datasets")
    print()
    print(f"machine: nproc {info['nproc']}, load {info['loadavg_1m']:.2f} (1 min, at start), "
          f"BLAS {info['blas']}" + (f" ({info['mkl']})" if info["mkl"] else ""))


def main():
    args = parse_args()
    if not os.path.isfile(args.checkpoint):
        print(f"checkpoint not found: {args.checkpoint}\n"
              "train one first with: bash scripts/snnsim.sh  (writes out/mnist/checkpoint.h5)",
              file=sys.stderr)
        return 2
    if not os.access(args.snnsim, os.X_OK):
        print(f"not an executable: {args.snnsim}", file=sys.stderr)
        return 2

    config = checkpoint_config(args.checkpoint)
    populations = population_names(config["layers"])
    info = system_info()
    print(f"network {'-'.join(map(str, config['layers']))}, T = {config.get('steps')}, "
          f"recording {','.join(populations)}", flush=True)

    with tempfile.TemporaryDirectory(prefix="recording_bench_") as tmp:
        rec_path = os.path.join(tmp, "run.h5")
        plain_cmd = run_command(args)
        rec_cmd = run_command(args, rec_path, populations)
        times, stdout = alternate(plain_cmd, rec_cmd, args.repeats)
        rec = recording_stats(rec_path, populations)

    medians, overhead_pct = summarize(times)
    accuracy_line = next((l for l in stdout["plain"].splitlines() if "accuracy" in l), "")
    print_report(args, populations, times, medians, overhead_pct, rec, info, accuracy_line)

    if args.json:
        result = {
            "checkpoint": args.checkpoint,
            "layers": config["layers"],
            "steps": config.get("steps"),
            "populations": populations,
            "split": "test",
            "limit": args.limit,
            "threads": args.threads,
            "repeats": args.repeats,
            "commands": {"plain": plain_cmd, "record": rec_cmd},
            "times_s": times,
            "median_s": medians,
            "overhead_pct": overhead_pct,
            "max_overhead_pct": MAX_OVERHEAD_PCT,
            "pass": overhead_pct <= MAX_OVERHEAD_PCT,
            "recording": rec,
            "system": info,
        }
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
