#!/usr/bin/env python3
"""Population networks: snnsim simulate against NEST 3.10 (PyPI
nest-simulator, from .venv-peers) on the same model file, in one run.

Both build the network from the same file (NEST with its own connection
rules and generators: tests/python/nest_populations.py) and simulate the
same biological time at the same threads; the figure compared is the wall
time of the simulation loop (NEST's nest.Simulate, snnsim's "simulated ...
in S s"), not the building or the start-up. Then B trials in one snnsim run
against B separate runs.

With --brian PYTHON (.venv-brian/bin/python), Brian2 2.9's cython target
too (tests/python/brian_populations.py --time: net.run after a warm-up run
that compiles; iaf_psc_exp models only), against snnsim at 1 thread (Brian2
runs on one).

Usage: nest_bench.py SNNSIM MODEL.toml [--threads 1,2] [--trials 16] [--reps 1] [--brian PYTHON]
Run it with .venv-peers/bin/python (NEST is there).
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from nest_populations import load_model, run_nest  # noqa: E402


def snnsim(binary, model, threads, trials=1):
    out = subprocess.run([binary, "simulate", model, "--threads", str(threads), "--trials", str(trials)],
                         check=True, capture_output=True, text=True).stdout
    seconds = float(re.search(r"in ([0-9.]+) s \(", out).group(1))
    events = int(re.search(r"spikes, (\d+) synaptic events", out).group(1))
    size = re.search(r"(\d+) synapses \(([0-9.]+) bytes each\)", out)
    rates = re.findall(r"population (\w+): \d+ neurons, ([0-9.]+) Hz", out)
    return seconds, events, int(size.group(1)), float(size.group(2)), rates


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("snnsim")
    ap.add_argument("model")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--brian", help="Python of .venv-brian: time Brian2 on the model too")
    a = ap.parse_args()
    model = load_model(a.model)
    print(f"model {a.model}, {model['duration']} ms of biological time")
    print(f"{'threads':>7} {'NEST s':>8} {'snnsim s':>9} {'speed-up':>8} {'events/s (snnsim)':>18}  rates (Hz)")
    for threads in [int(t) for t in a.threads.split(",")]:
        nest_s, ours_s = [], []
        for _ in range(a.reps):
            timing = {}
            nest_stats = run_nest(model, 1, threads=threads, timing=timing)
            nest_s.append(timing["simulate"])
            seconds, events, synapses, bytes_each, rates = snnsim(a.snnsim, a.model, threads)
            ours_s.append(seconds)
        n, o = min(nest_s), min(ours_s)
        ours_rates = ", ".join(f"{name} {float(r):.1f}" for name, r in rates)
        nest_rates = ", ".join(f"{name} {s['rate_hz']:.1f}" for name, s in nest_stats.items())
        print(f"{threads:>7} {n:>8.2f} {o:>9.2f} {n / o:>7.1f}x {events / o:>18.3g}  snnsim {ours_rates}; NEST {nest_rates}")
    print(f"snnsim: {synapses} synapses, {bytes_each} bytes each (NEST: {timing['connections']} connections)")
    if a.brian:
        brian = float(subprocess.run([a.brian, os.path.join(ROOT, "tests", "python", "brian_populations.py"), a.model,
                                      "--time", "--reps", str(a.reps)],
                                     check=True, capture_output=True, text=True).stdout.split()[-1])
        ours = min(snnsim(a.snnsim, a.model, 1)[0] for _ in range(a.reps))
        print(f"Brian2 2.9 (cython, 1 thread, compilation excluded) {brian:.2f} s, snnsim 1 thread {ours:.2f} s: "
              f"{brian / ours:.1f}x")
    if a.trials > 1:
        one, _, _, _, _ = snnsim(a.snnsim, a.model, 1, 1)
        together, _, _, _, _ = snnsim(a.snnsim, a.model, 1, a.trials)
        print(f"{a.trials} trials, 1 thread: one run {together:.2f} s, {a.trials} separate runs "
              f"{a.trials * one:.2f} s ({a.trials} x {one:.2f}): {a.trials * one / together:.2f}x")


if __name__ == "__main__":
    main()
