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

With --conv, a spiking CNN instead: the graph network of a checkpoint of
`snnsim train --model` (a chain of Input, Conv2d, BatchNorm, LIF or IF,
MaxPool2d or AvgPool2d, Flatten, Dropout, Affine or Linear, Output nodes;
by default examples/graphs/mnist_cnn.toml trained for one epoch on 2,000
digits, so that it fires as a trained network does). snnsim's figure is
the evaluation time `snnsim run --summary` reports (the loop over the
batches, without start-up and loading); SpikingJelly runs the same layers
in multi-step mode (BatchNorm in eval mode), snnTorch steps its Leaky
neurons one step at a time (IF: beta 1; LIF: as above, the synapses
scaled by 1 / tau). The input is direct (the pixel values at every step),
as the CNN's Input node says, so snnsim and SpikingJelly see the same
input; their predictions are compared as a check that they run the same
network.

Run it with .venv/bin/python (SpikingJelly 0.0.0.0.14 and snnTorch) and with
.venv-peers/bin/python (SpikingJelly 2.0, no snnTorch).

Usage: peer_bench.py SNNSIM [--threads N] [--batches 64,1] [--T 100] [--reps 3] [--checkpoint F]
       peer_bench.py SNNSIM --conv [--checkpoint CNN.h5] [--threads N] [--batches 64,1] [--samples 1024] [--reps 3]
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


# ---- --conv: a spiking CNN from a graph checkpoint ----

def cnn_layers(ckpt):
    """The checkpoint's chain of graph nodes (config JSON) and its tensors."""
    with h5py.File(ckpt, "r") as f:
        config = json.loads(f.attrs["config"])
        tensors = {f"{group}/{k}": torch.from_numpy(f[group][k][()]) for group in ("parameters", "buffers")
                   if group in f for k in f[group]}
    nodes = config.get("graph", {}).get("nodes")
    if not nodes:
        sys.exit(f"peer_bench: {ckpt} holds no graph network (--conv needs a checkpoint of snnsim train --model)")
    previous = None
    for n in nodes:
        if n["kind"] != "Input" and n.get("from", [previous]) != [previous]:
            sys.exit(f"peer_bench: node '{n['name']}' of {ckpt} is not a chain's next node (--conv takes chains)")
        previous = n["name"]
    if nodes[0].get("encoding") != "direct":
        sys.exit(f"peer_bench: {ckpt}'s input is rate coded: --conv compares direct inputs (the same for all peers)")
    return nodes, tensors, config["steps"]


def cnn_modules(nodes, tensors, framework):
    """torch modules of the chain for SpikingJelly (multi-step) or snnTorch (per step)."""
    import inspect
    if framework == "spikingjelly":
        from spikingjelly.activation_based import layer, neuron
    else:
        import snntorch as snn
    mods, channels = [], nodes[0]["shape"][0]
    scale = 1.0  # snnTorch: the synapses before a LIF scaled by 1 / tau (its Leaky adds the input undecayed)
    for n in nodes:
        kind, name = n["kind"], n["name"]
        if kind in ("LIF", "IF"):
            tau = n.get("tau", 2.0) if kind == "LIF" else None
            if framework == "spikingjelly":
                args = dict(v_threshold=n.get("v_threshold", 1.0), v_reset=n.get("v_reset", 0.0), step_mode="m")
                if "backend" in inspect.signature(neuron.IFNode.__init__).parameters:
                    args["backend"] = "torch"
                mods.append(neuron.LIFNode(tau=tau, decay_input=n.get("decay_input", True), **args) if tau
                            else neuron.IFNode(**args))
            else:
                mods.append(snn.Leaky(beta=1.0 - 1.0 / tau if tau else 1.0, threshold=n.get("v_threshold", 1.0),
                                      reset_mechanism="zero"))
        elif kind == "Conv2d":
            w = tensors[f"parameters/{name}.weight"]
            out, k = n["features"], n["kernel_size"]
            conv = torch.nn.Conv2d(channels, out, k, n["stride"], n["padding"], n["dilation"], n["groups"],
                                   bias=f"parameters/{name}.bias" in tensors)
            conv.weight.data.copy_(w.reshape(conv.weight.shape))
            if conv.bias is not None:
                conv.bias.data.copy_(tensors[f"parameters/{name}.bias"])
            mods.append(conv)
            channels = out
        elif kind == "BatchNorm":
            bn = torch.nn.BatchNorm2d(channels, eps=n.get("eps", 1e-5))
            bn.weight.data.copy_(tensors[f"parameters/{name}.weight"])
            bn.bias.data.copy_(tensors[f"parameters/{name}.bias"])
            bn.running_mean.copy_(tensors[f"buffers/{name}.running_mean"])
            bn.running_var.copy_(tensors[f"buffers/{name}.running_var"])
            mods.append(bn.eval())
        elif kind in ("MaxPool2d", "AvgPool2d"):
            cls = torch.nn.MaxPool2d if kind == "MaxPool2d" else torch.nn.AvgPool2d
            mods.append(cls(n["kernel_size"], n["stride"], n["padding"]))
        elif kind == "Flatten":
            mods.append(torch.nn.Flatten())
        elif kind in ("Affine", "Linear"):
            w = tensors[f"parameters/{name}.weight"]
            fc = torch.nn.Linear(w.shape[1], w.shape[0], bias=f"parameters/{name}.bias" in tensors)
            fc.weight.data.copy_(w)
            if fc.bias is not None:
                fc.bias.data.copy_(tensors[f"parameters/{name}.bias"])
            mods.append(fc)
        elif kind in ("Input", "Output", "Dropout"):
            continue  # Dropout does nothing at inference
        else:
            sys.exit(f"peer_bench: --conv does not know node kind {kind} ('{name}')")
    if framework == "snntorch":
        # Each Leaky's input scaled by 1 / tau: the last affine module before it takes the factor.
        for i, m in enumerate(mods):
            if hasattr(m, "beta") and float(m.beta) < 1.0:
                tau = 1.0 / (1.0 - float(m.beta))
                j = max(k for k in range(i) if isinstance(mods[k], (torch.nn.Conv2d, torch.nn.Linear,
                                                                     torch.nn.BatchNorm2d)))
                lin = mods[j]
                with torch.no_grad():
                    lin.weight.div_(tau)
                    if lin.bias is not None:
                        lin.bias.div_(tau)
    return mods


def spikingjelly_cnn(nodes, tensors, x, T):
    from spikingjelly.activation_based import functional, layer
    wrapped = [m if hasattr(m, "step_mode") else layer.SeqToANNContainer(m)
               for m in cnn_modules(nodes, tensors, "spikingjelly")]
    net = torch.nn.Sequential(*wrapped).eval()
    out = {}

    def run():
        with torch.no_grad():
            functional.reset_net(net)
            counts = net(x.unsqueeze(0).repeat(T, 1, 1, 1, 1)).sum(0)
            out["predicted"] = counts.argmax(1)
    return run, out


def snntorch_cnn(nodes, tensors, x, T):
    mods = cnn_modules(nodes, tensors, "snntorch")
    out = {}

    def run():
        with torch.no_grad():
            mems = [m.init_leaky() if hasattr(m, "init_leaky") else None for m in mods]
            counts = 0
            for _ in range(T):
                s = x
                for i, m in enumerate(mods):
                    if mems[i] is not None:
                        s, mems[i] = m(s, mems[i])
                    else:
                        s = m(s)
                counts = counts + s
            out["predicted"] = counts.argmax(1)
    return run, out


def snnsim_cnn(args, ckpt, B, tmp):
    """Seconds per batch of B from `snnsim run`'s own timing, best of --reps."""
    summary = os.path.join(tmp, "run.json")
    best = float("inf")
    for _ in range(args.reps + 1):  # the first run warms the caches
        subprocess.run([args.snnsim, "run", "--checkpoint", ckpt, "--limit", str(args.samples), "--batch-size", str(B),
                        "--threads", str(args.threads), "--summary", summary], check=True, capture_output=True)
        with open(summary) as f:
            best = min(best, json.load(f)["seconds"])
    return best * B / args.samples


def conv_main(args, sj_version):
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = args.checkpoint
        if not ckpt:
            ckpt = os.path.join(tmp, "cnn.h5")
            print("peer_bench: training examples/graphs/mnist_cnn.toml for one epoch on 2,000 digits ...")
            subprocess.run([args.snnsim, "train", "--model", os.path.join(ROOT, "examples", "graphs", "mnist_cnn.toml"),
                            "--epochs", "1", "--limit", "2000", "--T", "4", "--lr", "0.002", "--threads",
                            str(args.threads), "--checkpoint", ckpt], check=True, capture_output=True)
        nodes, tensors, T = cnn_layers(ckpt)
        x_all = idx_images(os.path.join(ROOT, "datasets", "mnist", "t10k-images-idx3-ubyte.gz"), args.samples)
        x_all = x_all.reshape(args.samples, *nodes[0]["shape"])
        shape = "-".join(f"{n['kind']}" for n in nodes[1:-1])
        for B in [int(b) for b in args.batches.split(",")]:
            if args.samples % B:
                sys.exit(f"peer_bench: --samples {args.samples} is not a multiple of the batch {B}")
            ours = snnsim_cnn(args, ckpt, B, tmp)
            entries = [("snnsim (snnsim run)", ours, None)]
            for name, make in ((f"SpikingJelly {sj_version} (multi-step)", spikingjelly_cnn), ("snnTorch", snntorch_cnn)):
                try:
                    runs = [make(nodes, tensors, x_all[i:i + B], T) for i in range(0, args.samples, B)]
                except ImportError as e:
                    print(f"peer_bench: skipping {name}: {e}")
                    continue
                sec = best_of(args.reps, lambda: [run() for run, _ in runs]) * B / args.samples
                predicted = torch.cat([o["predicted"] for _, o in runs])
                entries.append((name, sec, predicted))
            print(f"\nB = {B}, {shape}, T = {T}, {args.samples} test digits, threads {args.threads}")
            print(f"{'':34} {'ms/batch':>10} {'samples/s':>10} {'snnsim is':>10}")
            for name, sec, _ in entries:
                print(f"{name:34} {1e3 * sec:10.2f} {B / sec:10.1f} {sec / ours:9.2f}x")
        # The check that the peers run the same network: snnsim's predictions.
        pred_file = os.path.join(tmp, "pred.h5")
        subprocess.run([args.snnsim, "run", "--checkpoint", ckpt, "--limit", str(args.samples), "--output", pred_file,
                        "--overwrite", "--threads", str(args.threads)], check=True, capture_output=True)
        with h5py.File(pred_file, "r") as f:
            ours_pred = torch.from_numpy(f["samples/predicted"][()].astype(np.int64))
        for name, _, predicted in entries[1:]:
            agree = (predicted == ours_pred).float().mean().item()
            print(f"{name}: the same prediction as snnsim for {100 * agree:.1f}% of the digits")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("snnsim")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batches", default="64,1")
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--checkpoint", default="")
    ap.add_argument("--conv", action="store_true", help="a spiking CNN from a graph checkpoint (see above)")
    # 1,024 by default: snnsim's figure is one process's `snnsim run`, whose
    # first batch pays page faults and the weights' packing; over 256 digits
    # (4 batches of 64) that understated it against the peers' warm best-of.
    ap.add_argument("--samples", type=int, default=1024, help="--conv: test digits per timing (a multiple of each batch)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    try:
        from importlib.metadata import version
        sj_version = version("spikingjelly")
    except Exception:
        sj_version = "(not installed)"
    print(f"peer_bench: threads {args.threads}, T {'of the checkpoint' if args.conv else args.T}; torch "
          f"{torch.__version__} ({'MKL' if torch.backends.mkl.is_available() else 'no MKL'}); {os.cpu_count()} CPUs")
    if args.conv:
        return conv_main(args, sj_version)
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
