#!/usr/bin/env python3
"""Runs SpikingJelly (the peer implementation) on seeded random inputs across
the neuron option space and writes what it computes to JSON, for
tests/neurons/peer_test.cpp to compare against snnsim's fused kernels.

The cases are the full product of the options, each varied independently:
model (lif, if, plif) x decay_input (lif, plif) x v_threshold x v_reset
(hard values and soft) x detach_reset x surrogate (atan, sigmoid) x dtype,
so that no option's effect can hide behind another's.

For each case: the input x [T, B, N], an upstream gradient gs for the spikes,
SpikingJelly's spikes, h (the potential after charging, before fire/reset,
captured from neuronal_charge) and v after every step (multi-step mode,
torch backend, store_v_seq), and the gradients of sum(spikes * gs) w.r.t. x
and, for the parametric LIF, w.

Usage: spikingjelly_reference.py OUTPUT.json
"""
import json
import math
import sys

import torch
from spikingjelly.activation_based import neuron, surrogate

T, B, N = 16, 2, 10
SURROGATES = {"atan": 2.5, "sigmoid": 4.0}  # surrogate -> alpha


def cases():
    out = []
    for model in ("lif", "if", "plif"):
        for decay_input in ((True,) if model == "if" else (True, False)):  # IF has no decay
            for v_threshold in (0.8, 1.1):
                for v_reset in (0.0, -0.3, 0.25, None):
                    for detach_reset in (False, True):
                        for sg, alpha in SURROGATES.items():
                            out.append(dict(model=model, tau=3.7 if model == "lif" else 2.5, decay_input=decay_input,
                                            v_threshold=v_threshold, v_reset=v_reset, detach_reset=detach_reset,
                                            surrogate=sg, alpha=alpha))
    return out


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
            # h: the potential right after each step's charge (the node's
            # multi-step torch path calls neuronal_charge once per step).
            h_seq = []
            charge = node.neuronal_charge

            def charge_and_keep(x_t, charge=charge, node=node, h_seq=h_seq):
                charge(x_t)
                h_seq.append(node.v.detach().clone())

            node.neuronal_charge = charge_and_keep
            xr = x.clone().requires_grad_(True)
            s = node(xr)
            (s * gs).sum().backward()
            h = torch.stack(h_seq)
            assert h.shape == x.shape, (h.shape, x.shape)
            # h is what fire and reset saw: they turn it into the spikes and v.
            sd, vd = s.detach(), node.v_seq.detach()
            assert torch.equal(sd, (h >= c["v_threshold"]).to(dtype))
            reset = h - sd * c["v_threshold"] if c["v_reset"] is None else (1 - sd) * h + sd * c["v_reset"]
            assert torch.equal(vd, reset)
            entry = dict(c, dtype="float64" if dtype == torch.float64 else "float32", shape=[T, B, N],
                         x=flat(x), gs=flat(gs), spikes=flat(s), h_seq=flat(h), v_seq=flat(node.v_seq),
                         grad_x=flat(xr.grad))
            if c["model"] == "plif":
                entry["w"] = float(node.w.detach())
                entry["grad_w"] = float(node.w.grad)
            results.append(entry)
    with open(out_path, "w") as f:
        json.dump(dict(torch=torch.__version__, cases=results), f)
    print(f"wrote {len(results)} SpikingJelly cases to {out_path}")


if __name__ == "__main__":
    main()
