#!/usr/bin/env python3
"""A model pipeline over processes against one process, in one run.

`snnsim run` simulates the embedded 8,000 training digits for T steps
through a three-layer network (784-1024-512-10 LIF, trained one epoch
first), once as one process and once as a pipeline over S ranks on
127.0.0.1 (--parallel pipeline, a stage per rank), every process with
--threads 1, so S ranks use S cores. Both give the same accuracy and
firing rates bit for bit (checked here too).

The ideal speedup of an S-stage pipeline of equal stages over J blocks is
S J / (J + S - 1) (the issue's S T / (T + S - 1) with T blocks of one
step); here J is the blocks of one pipeline call: T / K blocks for each of
the batches evaluate() hands the pipeline at once (4,096 samples' worth),
as the stages overlap across batches too. Efficiency = speedup / ideal.
The stages are never exactly equal: the bench also prints each layer's
cost as the auto-balancer measures it and the speedup that the slower
stage bounds (one process's time over the slower stage's).

Usage: pipeline_ranks_bench.py SNNSIM [--ranks S] [--layers L] [--T T] [--batch B] [--rounds R]
"""
import argparse
import json
import os
import re
import subprocess
import sys

from dist_bench import free_port  # bench/ beside this script

SAMPLES_PER_CALL = 4096  # simulator/include/snn/simulator/training.h, kSamplesPerPipelineCall


def launch(cmd, ranks, summary):
    """Runs cmd as one process, or as `ranks` ranks of a pipeline; the summary rank 0 wrote."""
    if ranks == 1:
        procs = [subprocess.Popen(cmd + ["--summary", summary], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)]
    else:
        port = free_port()
        procs = [subprocess.Popen(cmd + ["--parallel", "pipeline", "--world-size", str(ranks), "--rank", str(r),
                                         "--master", f"127.0.0.1:{port}"] + (["--summary", summary] if r == 0 else []),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(ranks)]
    outs = [p.communicate() for p in procs]
    for r, (p, (_, err)) in enumerate(zip(procs, outs)):
        if p.returncode != 0:
            sys.exit(f"rank {r} failed: {err}")
    return json.load(open(summary))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("snnsim")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--layers", default="784-1024-512-10")
    ap.add_argument("--T", type=int, default=32)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.ranks < 2:
        ap.error(f"--ranks: expected 2 or more stages (one process is the baseline every round runs), got {args.ranks}")
    tmp = f"/tmp/snnsim-pipeline-bench-{os.getpid()}"
    os.makedirs(tmp, exist_ok=True)
    ckpt = os.path.join(tmp, "net.h5")
    subprocess.run([args.snnsim, "train", "--layers", args.layers, "--epochs", "1", "--checkpoint", ckpt,
                    "--overwrite"], check=True, capture_output=True)
    run = [args.snnsim, "run", "--checkpoint", ckpt, "--split", "train", "--T", str(args.T), "--threads", "1",
           "--batch-size", str(args.batch)]
    # Each layer's cost, as --balance auto measures it, and the cut it picks.
    probe = subprocess.run(run + ["--limit", str(4 * args.batch), "--devices", ",".join(["cpu"] * args.ranks),
                                  "--balance", "auto"], check=True, capture_output=True, text=True).stdout
    m = re.search(r"^balance auto: ([0-9,]+) layers per stage \(measured ms per layer: ([0-9., ]+)\)", probe, re.M)
    balance, layer_ms = m.group(1), [float(x) for x in m.group(2).split(",")]
    batches_per_call = max(1, SAMPLES_PER_CALL // args.batch)
    print(f"snnsim pipeline over processes: {args.layers} LIF, 8,000 digits, T = {args.T}, batch {args.batch}, "
          f"1 thread per process, {os.cpu_count()} cores, best of {args.rounds}")
    print(f"layers per rank {balance} (--balance auto; measured ms per layer and batch: "
          f"{', '.join(f'{x:.2f}' for x in layer_ms)}; the encoder runs in stage 0 besides)")
    print(f"| K | blocks per call J | 1 process | {args.ranks} ranks | speedup | ideal S J / (J + S - 1) | "
          f"efficiency | communication (rank 0) |")
    print("|---|---|---|---|---|---|---|---|")
    for K in (args.T, max(1, args.T // 4)):
        best = {}
        for _ in range(args.rounds):
            for n in (1, args.ranks):
                cmd = run + ["--steps-per-tick", str(K), "--balance", balance] if n > 1 else run
                s = launch(cmd, n, os.path.join(tmp, f"summary{n}.json"))
                if n not in best or s["seconds"] < best[n]["seconds"]:
                    best[n] = s
        one, many = best[1], best[args.ranks]
        for key in ("accuracy", "accuracy_by_step", "firing_rate"):
            if one[key] != many[key]:
                sys.exit(f"{key} differs: {one[key]} in one process, {many[key]} over {args.ranks} ranks")
        J = batches_per_call * -(-args.T // K)
        ideal = args.ranks * J / (J + args.ranks - 1)
        speedup = one["seconds"] / many["seconds"]
        print(f"| {K} | {J} | {one['seconds']:.2f} s | {many['seconds']:.2f} s | {speedup:.2f} | {ideal:.2f} | "
              f"{speedup / ideal:.2f} | {many['communication_seconds']:.2f} s |")
    print("(communication: rank 0's time in its links' sends and receives, on their own threads, "
          "waiting included; the results are equal bit for bit)")


if __name__ == "__main__":
    main()
