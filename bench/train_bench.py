#!/usr/bin/env python3
"""Seconds per training epoch, snnsim against SpikingJelly and a naive
per-step LibTorch loop in C++ (bench/train_naive.cpp), in one run.

Same network (784-H-10 LIF, tau 2, hard reset 0), T, batch size, surrogate
(ATan, alpha 2), loss (MSE of firing rates to one-hot), optimiser (Adam,
lr 1e-3), Poisson encoding, data (the embedded 8k/2k MNIST split) and
intra-op thread count. SpikingJelly 0.0.0.0.14 runs in multi-step mode with
its torch backend (the CuPy backend needs a GPU).

With --conv the network is examples/graphs/mnist_cnn.toml's spiking CNN
instead (c32k3-BN-LIF-maxpool2-c64k3-BN-LIF-maxpool2-dropout 0.2-fc10-LIF,
its input direct: the pixel values at every step; the same tau, surrogate,
loss and optimiser; run with --T 4), built in
SpikingJelly from its own layers; the naive loop has no CNN and is skipped.
Run it with .venv/bin/python for SpikingJelly 0.0.0.0.14 and with
.venv-peers/bin/python for SpikingJelly 2.0.

Usage: train_bench.py SNNSIM [--naive TRAIN_NAIVE] [--threads N] [--epochs E] [--rounds R] [--hidden H] [--T T] [--batch B] [--conv]
(TRAIN_NAIVE defaults to build/bench/train_naive.)

With --rounds R the three trainings run R times, one after the other in
each round, and the speed-ups are given per round and as their median: the
VM's speed drifts by tens of percent over a minute, which a single round
would charge to whichever ran in the slow stretch.
"""
import argparse
import gzip
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from spikingjelly.activation_based import encoding, functional, layer, neuron, surrogate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


CNN = os.path.join(ROOT, "examples", "graphs", "mnist_cnn.toml")


def spikingjelly_net(args):
    def lif():
        return neuron.LIFNode(tau=2.0, surrogate_function=surrogate.ATan(), step_mode="m")
    if not args.conv:
        return torch.nn.Sequential(layer.Flatten(), layer.Linear(784, args.hidden), lif(), layer.Linear(args.hidden, 10),
                                   lif())
    # mnist_cnn.toml's network, layer for layer (its Conv2d has a bias).
    return torch.nn.Sequential(
        layer.Conv2d(1, 32, 3, padding=1), layer.BatchNorm2d(32), lif(), layer.MaxPool2d(2),
        layer.Conv2d(32, 64, 3, padding=1), layer.BatchNorm2d(64), lif(), layer.MaxPool2d(2),
        layer.Flatten(), layer.Dropout(0.2), layer.Linear(64 * 7 * 7, 10), lif())


def spikingjelly_epochs(args, x_train, y_train, x_test, y_test):
    torch.manual_seed(0)
    net = spikingjelly_net(args)
    functional.set_step_mode(net, "m")
    if args.conv:
        x_train, x_test = x_train.unsqueeze(1), x_test.unsqueeze(1)  # [N, 1, 28, 28]
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    poisson = encoding.PoissonEncoder()
    # mnist_cnn.toml's input is direct (the pixels at every step); the MLP's Poisson coded.
    def enc(img):
        return img if args.conv else poisson(img)
    times, accs = [], []
    for epoch in range(args.epochs):
        t0 = time.perf_counter()
        perm = torch.randperm(len(x_train))
        for b in range(0, len(x_train), args.batch):
            idx_b = perm[b:b + args.batch]
            img, label = x_train[idx_b], y_train[idx_b]
            x_seq = torch.stack([enc(img) for _ in range(args.T)])
            rate = net(x_seq).mean(0)
            loss = F.mse_loss(rate, F.one_hot(label, 10).float())
            opt.zero_grad()
            loss.backward()
            opt.step()
            functional.reset_net(net)
        times.append(time.perf_counter() - t0)
        correct = 0
        net.eval()
        with torch.no_grad():
            for b in range(0, len(x_test), 256):
                img = x_test[b:b + 256]
                x_seq = torch.stack([enc(img) for _ in range(args.T)])
                correct += (net(x_seq).sum(0).argmax(1) == y_test[b:b + 256]).sum().item()
                functional.reset_net(net)
        net.train()
        accs.append(correct / len(x_test))
    return times, accs


def snnsim_epochs(args):
    net = ["--model", CNN] if args.conv else ["--layers", f"784-{args.hidden}-10", "--surrogate", "atan"]
    cmd = [args.snnsim, "train", *net, "--T", str(args.T), "--epochs", str(args.epochs),
           "--batch-size", str(args.batch), "--threads", str(args.threads), "--loss", "mse",
           "--lr", "1e-3", "--checkpoint", "/tmp/snnsim-train-bench.h5", "--overwrite"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = re.findall(r"epoch \d+/\d+: .* test accuracy ([0-9.]+), ([0-9.]+) s", out)
    return [float(t) for _, t in rows], [float(a) for a, _ in rows]


def naive_epochs(args):
    cmd = [args.naive, os.path.join(ROOT, "datasets", "mnist"), "--hidden", str(args.hidden), "--T", str(args.T),
           "--batch", str(args.batch), "--epochs", str(args.epochs), "--threads", str(args.threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = re.findall(r"epoch \d+/\d+: test accuracy ([0-9.]+), ([0-9.]+) s", out)
    return [float(t) for _, t in rows], [float(a) for a, _ in rows]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("snnsim")
    p.add_argument("--naive", default=os.path.join(ROOT, "build", "bench", "train_naive"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--T", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--conv", action="store_true", help="the spiking CNN of examples/graphs/mnist_cnn.toml")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    d = os.path.join(ROOT, "datasets", "mnist")
    x_train = torch.from_numpy(idx(os.path.join(d, "train-images-idx3-ubyte.gz")).astype(np.float32) / 255.0)
    y_train = torch.from_numpy(idx(os.path.join(d, "train-labels-idx1-ubyte.gz")).astype(np.int64))
    x_test = torch.from_numpy(idx(os.path.join(d, "t10k-images-idx3-ubyte.gz")).astype(np.float32) / 255.0)
    y_test = torch.from_numpy(idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
    from importlib.metadata import version
    name = "c32k3-pool-c64k3-pool-fc10 (mnist_cnn.toml)" if args.conv else f"784-{args.hidden}-10"
    print(f"{name} LIF, T = {args.T}, batch {args.batch}, {args.threads} threads, "
          f"{len(x_train)} train samples; SpikingJelly {version('spikingjelly')}, torch {torch.__version__}, "
          f"{torch.backends.mkldnn.is_available() and 'MKL-DNN' or ''}")
    ratios_sj, ratios_naive = [], []
    for r in range(args.rounds):
        sj_t, sj_a = spikingjelly_epochs(args, x_train, y_train, x_test, y_test)
        nv_t, nv_a = naive_epochs(args) if not args.conv else (None, None)  # the naive loop has no CNN
        sn_t, sn_a = snnsim_epochs(args)
        if args.rounds > 1:
            print(f"round {r + 1}/{args.rounds}")
        for e in range(args.epochs):
            naive = f"naive C++ {nv_t[e]:6.2f} s (test acc {nv_a[e]:.4f})   " if nv_t else ""
            print(f"epoch {e + 1}: SpikingJelly {sj_t[e]:6.2f} s (test acc {sj_a[e]:.4f})   {naive}"
                  f"snnsim {sn_t[e]:6.2f} s (test acc {sn_a[e]:.4f})")
        ratios_sj.append(np.mean(sj_t) / np.mean(sn_t))
        naive = ""
        if nv_t:
            ratios_naive.append(np.mean(nv_t) / np.mean(sn_t))
            naive = f", naive C++ {np.mean(nv_t):.2f}"
        print(f"mean seconds per epoch: SpikingJelly {np.mean(sj_t):.2f}{naive}, snnsim {np.mean(sn_t):.2f}; "
              f"snnsim speed-up {ratios_sj[-1]:.2f}x over SpikingJelly"
              + (f", {ratios_naive[-1]:.2f}x over the naive loop" if nv_t else ""), flush=True)
    if args.rounds > 1:
        print(f"speed-up over SpikingJelly by round: {', '.join(f'{x:.2f}x' for x in ratios_sj)}; "
              f"median {np.median(ratios_sj):.2f}x, lowest {min(ratios_sj):.2f}x")
        if ratios_naive:
            print(f"speed-up over the naive loop by round: {', '.join(f'{x:.2f}x' for x in ratios_naive)}; "
                  f"median {np.median(ratios_naive):.2f}x")


if __name__ == "__main__":
    sys.exit(main())
