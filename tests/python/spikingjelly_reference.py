#!/usr/bin/env python3
"""Runs SpikingJelly (the peer implementation) on seeded random inputs across
the neuron option space and writes what it computes to JSON, for
tests/neurons/peer_test.cpp to compare against snnsim's fused kernels.

For each case: the input x [T, B, N], an upstream gradient gs for the spikes,
SpikingJelly's spikes and v after every step (multi-step mode, torch backend,
store_v_seq), and the gradients of sum(spikes * gs) w.r.t. x and, for the
parametric LIF, w.

Usage: spikingjelly_reference.py OUTPUT.json
"""
import json
import math
import sys

import torch
from spikingjelly.activation_based import neuron, surrogate

T, B, N = 16, 3, 20


def cases():
    out = []
    for model in ("lif", "if", "plif"):
        for decay_input in (True, False):
            for v_reset in (0.0, -0.3, 0.25, None):
                for detach_reset in (False, True):
                    out.append(dict(
                        model=model,
                        tau=3.7 if model == "lif" else 2.5,
                        decay_input=decay_input,
                        v_threshold=0.8 if decay_input else 1.1,
                        v_reset=v_reset,
                        detach_reset=detach_reset,
                        surrogate="atan" if detach_reset else "sigmoid",
                        alpha=2.5 if detach_reset else 4.0,
                    ))
    return [c for c in out if not (c["model"] == "if" and not c["decay_input"])]


def make_node(c):
    sg = surrogate.ATan(alpha=c["alpha"]) if c["surrogate"] == "atan" else surrogate.Sigmoid(alpha=c["alpha"])
    common = dict(v_threshold=c["v_threshold"], v_reset=c["v_reset"], surrogate_function=sg,
                  detach_reset=c["detach_reset"], step_mode="m", backend="torch", store_v_seq=True)
    if c["model"] == "if":
        return neuron.IFNode(**common)
    if c["model"] == "lif":
        return neuron.LIFNode(tau=c["tau"], decay_input=c["decay_input"], **common)
    return neuron.ParametricLIFNode(init_tau=c["tau"], decay_input=c["decay_input"], **common)


def flat(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def main():
    out_path = sys.argv[1]
    gen = torch.Generator().manual_seed(20261130)
    results = []
    for i, c in enumerate(cases()):
        for dtype in (torch.float32, torch.float64):
            x = (torch.randn(T, B, N, generator=gen, dtype=torch.float64) * 0.9 + 0.45).to(dtype)
            gs = torch.randn(T, B, N, generator=gen, dtype=torch.float64).to(dtype)
            node = make_node(c)
            if dtype == torch.float64:
                node = node.to(torch.float64)
            xr = x.clone().requires_grad_(True)
            s = node(xr)
            (s * gs).sum().backward()
            entry = dict(c, dtype="float64" if dtype == torch.float64 else "float32", shape=[T, B, N],
                         x=flat(x), gs=flat(gs), spikes=flat(s), v_seq=flat(node.v_seq), grad_x=flat(xr.grad))
            if c["model"] == "plif":
                entry["w"] = float(node.w.detach())
                entry["grad_w"] = float(node.w.grad)
            results.append(entry)
    with open(out_path, "w") as f:
        json.dump(dict(torch=torch.__version__, cases=results), f)
    print(f"wrote {len(results)} SpikingJelly cases to {out_path}")


if __name__ == "__main__":
    main()
