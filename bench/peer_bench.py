#!/usr/bin/env python3
"""Simulation throughput of snnsim against its peers, in one run: SpikingJelly
(PyPI, torch backend, multi-step mode, its fastest CPU path) and snnTorch
(per-step Leaky neurons), on the identical network and weights, T, batch
and intra-op threads, with snnsim's own naive per-step LibTorch loop
(`snnsim bench`) as the common reference.

The network is `snnsim bench`'s (784-1024-10 LIF, tau 2, hard reset to 0,
random weights x 8 unless --checkpoint), saved with --save-weights and read
back here with h5py; the input is the first B test digits, Poisson coded
(every peer draws its own spikes: same rates, different random numbers).
snnTorch's Leaky is v = beta v + I with beta = 1 - 1/tau; SpikingJelly's LIF
is v = v + (I - v) / tau, so snnTorch gets the weights divided by tau, and
a zero reset (its reset acts one step later: rates differ slightly).

Run it with .venv/bin/python (SpikingJelly 0.0.0.0.14 and snnTorch) and with
.venv-peers/bin/python (SpikingJelly 2.0, no snnTorch).

Usage: peer_bench.py SNNSIM [--threads N] [--batches 64,1] [--T 100] [--reps 3] [--checkpoint F]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def idx_images(path, n):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    images = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)
    return torch.from_numpy(images[:n].reshape(n, -1).astype(np.float32) / 255.0)


def best_of(reps, fn):
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def spikingjelly_run(weights, biases, x, T, tau):
    import inspect
    from spikingjelly.activation_based import encoding, functional, layer, neuron
    # 0.0.0.0.14 picks among backends; 2.0 has only the torch one and no
    # such argument.
    lif_args = dict(tau=tau, v_reset=0.0, step_mode="m")
    if "backend" in inspect.signature(neuron.LIFNode.__init__).parameters:
        lif_args["backend"] = "torch"
    mods = []
    for w, b in zip(weights, biases):
        fc = layer.Linear(w.shape[1], w.shape[0], step_mode="m")
        fc.weight.data.copy_(w)
        fc.bias.data.copy_(b)
        mods += [fc, neuron.LIFNode(**lif_args)]
    net = torch.nn.Sequential(*mods)
    enc = encoding.PoissonEncoder()
    rate = {}

    def run():
        with torch.no_grad():
            functional.reset_net(net)
            x_seq = torch.stack([enc(x) for _ in range(T)])
            rate["out"] = net(x_seq).mean().item()
    return run, rate


def snntorch_run(weights, biases, x, T, tau):
    import snntorch as snn
    fcs, lifs = [], []
    for w, b in zip(weights, biases):
        fc = torch.nn.Linear(w.shape[1], w.shape[0])
        fc.weight.data.copy_(w / tau)
        fc.bias.data.copy_(b / tau)
        fcs.append(fc)
        lifs.append(snn.Leaky(beta=1.0 - 1.0 / tau, threshold=1.0, reset_mechanism="zero"))
    rate = {}

    def run():
        with torch.no_grad():
            mems = [lif.init_leaky() for lif in lifs]
            total = 0.0
            for _ in range(T):
                s = (torch.rand_like(x) <= x).float()
                for i, (fc, lif) in enumerate(zip(fcs, lifs)):
                    s, mems[i] = lif(fc(s), mems[i])
                total = total + s.mean()
            rate["out"] = float(total) / T
    return run, rate


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("snnsim")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batches", default="64,1")
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--checkpoint", default="")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    try:
        from importlib.metadata import version
        sj_version = version("spikingjelly")
    except Exception:
        sj_version = "(not installed)"
    print(f"peer_bench: threads {args.threads}, T {args.T}; torch {torch.__version__} "
          f"({'MKL' if torch.backends.mkl.is_available() else 'no MKL'}); {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        for B in [int(b) for b in args.batches.split(",")]:
            weights_file = os.path.join(tmp, f"w{B}.h5")
            cmd = [args.snnsim, "bench", "--json", "--threads", str(args.threads), "--batch", str(B), "--T", str(args.T),
                   "--reps", str(args.reps), "--steps-per-tick", "1,10,0", "--save-weights", weights_file]
            if args.checkpoint:
                cmd += ["--checkpoint", args.checkpoint]
            res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            best = min((r for r in res["runs"] if "steps_per_tick" in r), key=lambda r: r["seconds_per_batch"])
            naive = next(r for r in res["runs"] if r["name"].startswith("naive"))
            with h5py.File(weights_file, "r") as f:
                n_layers = len(res["layers"]) - 1
                weights = [torch.from_numpy(f[f"parameters/fc{i}.weight"][()]) for i in range(n_layers)]
                biases = [torch.from_numpy(f[f"parameters/fc{i}.bias"][()]) for i in range(n_layers)]
            x = idx_images(os.path.join(ROOT, "datasets", "mnist", "t10k-images-idx3-ubyte.gz"), B)
            neuron_steps = res["neuron_steps_per_batch"]
            entries = [(f"snnsim ({best['name']})", best["seconds_per_batch"], res["layers_activity"][-1]["output_rate"]),
                       ("snnsim naive C++ loop", naive["seconds_per_batch"], res.get("naive_output_rate", float("nan")))]
            for name, make in ((f"SpikingJelly {sj_version} (multi-step)", spikingjelly_run), ("snnTorch", snntorch_run)):
                try:
                    run, rate = make(weights, biases, x, args.T, res["tau"])
                except ImportError as e:  # a peer this environment lacks (.venv-peers has no snnTorch)
                    print(f"peer_bench: skipping {name}: {e}")
                    continue
                entries.append((name, best_of(args.reps, run), rate["out"]))
            print(f"\nB = {B}, {'-'.join(map(str, res['layers']))} LIF, T = {args.T}, BLAS {res['blas']}, "
                  f"hidden firing {100 * res['layers_activity'][0]['output_rate']:.1f}%")
            print(f"{'':34} {'ms/batch':>10} {'samples/s':>10} {'neuron-steps/s':>15} {'out firing':>10} {'snnsim is':>10}")
            for name, sec, out_rate in entries:
                print(f"{name:34} {1e3 * sec:10.2f} {B / sec:10.1f} {neuron_steps / sec:15.3e} {100 * out_rate:9.1f}% "
                      f"{sec / best['seconds_per_batch']:9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
