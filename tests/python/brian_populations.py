#!/usr/bin/env python3
"""Brian2 2.9 (cython target) as a second oracle of snnsim's population networks,
and the Brian2 side of bench/nest_bench.py's CUBA comparison.

    brian_populations.py MODEL.toml [--set NAME=VALUE...] --seeds N --out BRIAN.json
        builds the model file's network in Brian2 and simulates it with N seeds;
        writes each population's rate, mean ISI CV and synchrony per seed
        (computed as `snnsim analyze` does, by nest_populations.statistics).
    brian_populations.py MODEL.toml [--set ...] --peer BRIAN.json --snnsim ANALYZE.json...
        checks snnsim's statistics against Brian2's spread (mean +- 3 sd), as
        nest_populations.py does against NEST's.
    brian_populations.py MODEL.toml --time [--reps R]
        the wall seconds of Brian2's net.run over the model's duration, after a
        10 ms warm-up run that generates and compiles the code (excluded).

The model: iaf_psc_exp populations (NEST's equations, integrated exactly by
Brian2's "exact" method: the same propagators), projections by all_to_all or
pairwise_bernoulli with constant weights and delays, constant or uniform
initial V_m, Poisson drives onto the synaptic currents. NEST's timing: a
spike of step k with delay d acts from step k + d + 1 (Brian's synapses run
after the state update); a neuron is clamped for t_ref / dt steps after the
step it spiked in, so Brian's refractory period is t_ref + dt (Brian counts
the spike's own step). Anything else is refused with one line.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nest_populations import compare, load_model, read_json, statistics  # noqa: E402

# NEST 3.10's iaf_psc_exp defaults.
DEFAULTS = {"C_m": 250.0, "tau_m": 10.0, "tau_syn_ex": 2.0, "tau_syn_in": 2.0, "t_ref": 2.0, "E_L": -70.0,
            "V_th": -55.0, "V_reset": -70.0, "I_e": 0.0}


def build(model, seed):
    """The model as a Brian2 Network; returns (network, {population: SpikeMonitor}, steps, dt)."""
    import brian2 as b2
    b2.start_scope()
    b2.prefs.codegen.target = "cython"
    dt = float(model.get("dt", 0.1))
    b2.defaultclock.dt = dt * b2.ms
    b2.seed(seed)
    rng = np.random.default_rng(seed)
    groups, monitors = {}, {}
    # The parameters are constants of each group's namespace (as in Brian2's
    # own CUBA example), so the exact propagators are computed once.
    eqs = """dv/dt = (E_L - v) / tau_m + (I_ex + I_in + I_e) / C_m : volt (unless refractory)
             dI_ex/dt = -I_ex / tau_syn_ex : amp
             dI_in/dt = -I_in / tau_syn_in : amp"""
    for p in model["population"]:
        assert p["model"] == "iaf_psc_exp", f"population {p['name']}: Brian2 side supports iaf_psc_exp only"
        params = dict(DEFAULTS)
        params.update({k: v for k, v in p.get("params", {}).items() if k != "V_m"})
        assert not isinstance(params["I_e"], list), "per-neuron I_e is not supported here"
        namespace = {"E_L": params["E_L"] * b2.mV, "V_th": params["V_th"] * b2.mV, "V_reset": params["V_reset"] * b2.mV,
                     "tau_m": params["tau_m"] * b2.ms, "C_m": params["C_m"] * b2.pF, "I_e": params["I_e"] * b2.pA,
                     "tau_syn_ex": params["tau_syn_ex"] * b2.ms, "tau_syn_in": params["tau_syn_in"] * b2.ms}
        g = b2.NeuronGroup(p["size"], eqs, threshold="v >= V_th", reset="v = V_reset",
                           refractory=(params["t_ref"] + dt) * b2.ms, method="exact", namespace=namespace,
                           name=f"pop_{p['name']}")
        v0 = p.get("params", {}).get("V_m", params["E_L"])
        if isinstance(v0, dict):
            assert v0["distribution"] == "uniform", "V_m: only uniform distributions are supported here"
            g.v = rng.uniform(v0["low"], v0["high"], p["size"]) * b2.mV
        else:
            g.v = float(v0) * b2.mV
        groups[p["name"]] = g
        monitors[p["name"]] = b2.SpikeMonitor(g)
    synapses = []
    for k, pr in enumerate(model.get("projection", [])):
        w, d = pr.get("weight", 1.0), pr.get("delay", 1.0)
        assert not isinstance(w, dict) and not isinstance(d, dict), "drawn weights and delays are not supported here"
        channel = "I_ex" if w >= 0 else "I_in"
        s = b2.Synapses(groups[pr["source"]], groups[pr["target"]], on_pre=f"{channel}_post += {w} * pA",
                        name=f"projection_{k}")
        same = pr["source"] == pr["target"]
        condition = "i != j" if same and not pr.get("autapses", True) else None
        rule = pr.get("rule", "all_to_all")
        if rule == "all_to_all":
            s.connect(condition=condition) if condition else s.connect()
        elif rule == "pairwise_bernoulli":
            s.connect(condition=condition, p=float(pr["p"])) if condition else s.connect(p=float(pr["p"]))
        else:
            raise SystemExit(f"projection {k}: rule {rule} is not supported on the Brian2 side")
        s.delay = float(d) * b2.ms
        synapses.append(s)
    inputs = []
    for d in model.get("poisson", []):
        w = float(d["weight"])
        inputs.append(b2.PoissonInput(groups[d["target"]], "I_ex" if w >= 0 else "I_in", 1, float(d["rate"]) * b2.Hz,
                                      weight=f"{w} * pA"))
    assert not model.get("dc"), "DC currents are not supported on the Brian2 side"
    net = b2.Network(*groups.values(), *monitors.values(), *synapses, *inputs)
    steps = int(round(float(model["duration"]) / dt))
    return net, groups, monitors, steps, dt


def run(model, seed):
    import brian2 as b2
    net, groups, monitors, steps, dt = build(model, seed)
    net.run(steps * dt * b2.ms)
    out = {}
    for name, mon in monitors.items():
        step = np.rint(np.asarray(mon.t / b2.ms) / dt).astype(np.int64)
        out[name] = statistics(np.asarray(mon.i, dtype=np.int64), step, len(groups[name]), steps, dt)
    return out


def timed(model, reps):
    import brian2 as b2
    seconds = []
    for r in range(reps):
        net, _, _, steps, dt = build(model, 1 + r)
        net.run(10 * b2.ms)  # code generation and compilation
        started = time.perf_counter()
        net.run(steps * dt * b2.ms)
        seconds.append(time.perf_counter() - started)
    return min(seconds)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE: replace a value of [parameters]")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--peer")
    ap.add_argument("--snnsim", nargs="+")
    ap.add_argument("--sd-floor", type=float, default=0.001)
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--reps", type=int, default=1)
    a = ap.parse_args()
    model = load_model(a.model, [kv.split("=", 1) for kv in a.set])
    if a.time:
        print(f"{timed(model, a.reps):.4f}")
        return 0
    if a.out:
        runs = [run(model, seed) for seed in range(1, a.seeds + 1)]
        with open(a.out, "w") as f:
            json.dump(runs, f)
        for name in runs[0]:
            print(name, "rate", [round(r[name]["rate_hz"], 2) for r in runs])
        return 0
    runs, *analyses = read_json([a.peer, *a.snnsim])
    return 1 if compare(runs, analyses, a.sd_floor, peer="Brian2") else 0


if __name__ == "__main__":
    sys.exit(main())
