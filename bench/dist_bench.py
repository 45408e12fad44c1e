#!/usr/bin/env python3
"""Data-parallel scaling of snnsim over processes on this machine, in one run.

For `snnsim train` (one epoch of the embedded 8k MNIST split) and `snnsim
run` (its 8,000 training digits for 4 T steps), the same command runs as 1 process and as
N ranks on 127.0.0.1 (--world-size/--rank/--master), every process with
--threads 1, so N ranks use N cores. Efficiency = t(1) / (N t(N)): 1.0 is
perfect scaling. The communication share is the ranks' own measure (time
inside exchanges, waiting for slower ranks included) over the epoch's time.
The ranks' training also runs with --cpu-bind none in every round, for the
gain of binding them to cores of their own (which snnsim does where they
fill the machine, as N = 2 ranks of 1 thread do on 2 cores).

Then, on paper, the efficiency a cluster would get. In each training step a
rank exchanges, for each Linear layer, its input rows (spikes: a bit each)
with every other rank and sends rank r the columns r of its output
gradient (the row exchange; every rank then sums the whole batch's
gradient for its own weight rows), the biases' sums ((N - 1) / N 8 bytes
each), steps Adam on its slice and receives the other slices' new weights
((N - 1) / N 4 P bytes, P parameters). With R = T B rows a step, a rank
receives (N - 1) / N (R (784 + H) / 8 + 4 R (H + 10) / N + 4 P) bytes; at
a link of --link-gbs GB/s that takes bytes / link seconds against the
step's compute, t_step(1) / N at a fixed global batch. Besides, each rank
does work per step that does not shrink with its share of the batch: the
ranks report their optimizer steps' time outside the exchanges (its slice
of the gradient rounded, its slice of Adam, the new weights into the
parameters), and the projection adds it to every step as measured here
(an upper bound for its slices, which shrink as 1 / N).

Usage: dist_bench.py SNNSIM [--ranks N] [--hidden H] [--T T] [--batch B] [--rounds R] [--link-gbs G]
"""
import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(cmd, ranks):
    """Runs cmd as `ranks` processes (1: alone); rank 0's stdout and the wall time."""
    t0 = time.perf_counter()
    if ranks == 1:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        return out, time.perf_counter() - t0
    port = free_port()
    procs = [subprocess.Popen(cmd + ["--world-size", str(ranks), "--rank", str(r), "--master", f"127.0.0.1:{port}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(ranks)]
    outs = [p.communicate() for p in procs]
    for r, (p, (_, err)) in enumerate(zip(procs, outs)):
        if p.returncode != 0:
            sys.exit(f"rank {r} failed: {err}")
    return outs[0][0], time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("snnsim")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--T", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--link-gbs", type=float, default=10.0)
    args = ap.parse_args()
    if args.ranks < 2:
        ap.error(f"--ranks: expected 2 or more (one process is the baseline every round runs), got {args.ranks}")
    tmp = f"/tmp/snnsim-dist-bench-{os.getpid()}"
    os.makedirs(tmp, exist_ok=True)
    ckpt = os.path.join(tmp, "net.h5")
    train = [args.snnsim, "train", "--layers", f"784-{args.hidden}-10", "--T", str(args.T), "--epochs", "1",
             "--batch-size", str(args.batch), "--threads", "1", "--checkpoint", ckpt, "--overwrite"]
    # The simulation: the 8,000 training digits for 4 T steps (seconds, not milliseconds).
    run = [args.snnsim, "run", "--checkpoint", ckpt, "--split", "train", "--T", str(4 * args.T), "--threads", "1",
           "--batch-size", str(args.batch)]
    subprocess.run(train, check=True, capture_output=True)
    rows = {"train": {1: [], args.ranks: []}, "run": {1: [], args.ranks: []}, "unbound": {1: [], args.ranks: []}}
    comm = {"train": [], "run": [], "unbound": []}
    fixed = []  # seconds per training step of a rank's optimizer work outside the exchanges
    for _ in range(args.rounds):
        for n in (1, args.ranks):
            out, _ = launch(train, n)
            secs = float(re.search(r"^epoch 1/1: .*, ([0-9.]+) s$", out, re.M).group(1))
            rows["train"][n].append(secs)
            if n > 1:
                comm["train"].append(float(re.search(r"^communication: ([0-9.]+) s", out, re.M).group(1)) / secs)
                m = re.search(r"^optimizer: \d+ steps, ([0-9.]+) ms each, ([0-9.]+) ms of it in exchanges", out, re.M)
                if m:
                    fixed.append((float(m.group(1)) - float(m.group(2))) / 1e3)
            if n > 1:
                # The same ranks left where the system puts them (bound above
                # where they fill the machine's cores).
                out, _ = launch(train + ["--cpu-bind", "none"], n)
                secs = float(re.search(r"^epoch 1/1: .*, ([0-9.]+) s$", out, re.M).group(1))
                rows["unbound"][n].append(secs)
                comm["unbound"].append(float(re.search(r"^communication: ([0-9.]+) s", out, re.M).group(1)) / secs)
            out, _ = launch(run, n)
            secs = float(re.search(r"^train split: .*\(([0-9.]+) s\)$", out, re.M).group(1))
            rows["run"][n].append(secs)
            if n > 1:
                comm["run"].append(float(re.search(r"communication ([0-9.]+) s$", out, re.M).group(1)) / secs)
    params = 785 * args.hidden + (args.hidden + 1) * 10
    print(f"snnsim data-parallel scaling: 784-{args.hidden}-10 LIF, T = {args.T}, batch {args.batch}, "
          f"1 thread per process, {os.cpu_count()} cores, best of {args.rounds}")
    print(f"| job | 1 process | {args.ranks} ranks | efficiency | communication share |")
    print("|---|---|---|---|---|")
    rows["unbound"][1] = rows["train"][1]
    for job, what in (("train", "train, 1 epoch (8,000 digits)"),
                      ("unbound", "train, the ranks not bound to cores (--cpu-bind none)"),
                      ("run", f"run, 8,000 digits, T = {4 * args.T}")):
        t1, tn = min(rows[job][1]), min(rows[job][args.ranks])
        print(f"| {what} | {t1:.2f} s | {tn:.2f} s | {t1 / (args.ranks * tn):.2f} | "
              f"{100 * statistics.median(comm[job]):.0f}% |")
    steps = -(-8000 // args.batch)
    step1 = min(rows["train"][1]) / steps
    step_fixed = statistics.median(fixed) if fixed else 0.0  # none where the optimizer is not sharded
    rows_per_step = args.T * args.batch

    def step_bytes(n):  # what a rank receives per step (see the file comment)
        return (n - 1) / n * (rows_per_step * (784 + args.hidden) / 8 + 4 * rows_per_step * (args.hidden + 10) / n
                              + 8 * (args.hidden + 10) + 4 * params)

    print(f"\nOn paper (train): P = {params:,} parameters, {step_bytes(2) / 1e6:.1f} MB into a rank per step on 2 "
          f"ranks, {step_bytes(64) / 1e6:.1f} MB on 64; one process's step {1e3 * step1:.1f} ms; a rank's optimizer work outside the exchanges "
          f"{1e3 * step_fixed:.2f} ms per step (measured on {args.ranks} ranks; it does not shrink with the rank's "
          f"share of the batch); a {args.link_gbs:g} GB/s link")
    print("| nodes | compute per step | fixed work per step | exchange per step | expected efficiency | "
          "without the fixed work |")
    print("|---|---|---|---|---|---|")
    for n in (2, 8, 64):
        compute = step1 / n
        gather = step_bytes(n) / (args.link_gbs * 1e9)
        print(f"| {n} | {1e3 * compute:.2f} ms | {1e3 * step_fixed:.2f} ms | {1e3 * gather:.2f} ms | "
              f"{compute / (compute + step_fixed + gather):.2f} | {compute / (compute + gather):.2f} |")


if __name__ == "__main__":
    main()
