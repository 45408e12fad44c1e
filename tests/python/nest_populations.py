#!/usr/bin/env python3
"""NEST 3.10 as the oracle of snnsim's population networks (snnsim simulate).

    nest_populations.py MODEL.toml [--set NAME=VALUE...] --seeds N --out NEST.json
        builds the model file's network in NEST (iaf_psc_delta / iaf_psc_exp
        populations, NEST's own connection rules, poisson_generators) and
        simulates it with N seeds; writes each population's firing rate, mean
        ISI CV and synchrony per seed, computed as `snnsim analyze` does.
    nest_populations.py MODEL.toml [--set ...] --nest NEST.json --snnsim ANALYZE.json... [--sd-floor F]
    nest_populations.py MODEL.toml --exact RECORDING.h5
        a deterministic model (DC currents, constant weights and delays, no
        Poisson drive): NEST's spikes must be snnsim's, step for step, and
        its voltmeters' potentials within float32 rounding.
        checks snnsim's statistics (analyze --json of its recordings, one per
        seed; their mean) against NEST's spread: each within mean +- 3 sd of
        NEST's seeds (sd at least F times the mean, default 0.001, in case the
        seeds agree exactly by chance); prints one line per statistic, exits 1
        if any is outside.

The model file's [parameters] and expressions are evaluated here (resolve()),
independently of snnsim's evaluator; --set replaces parameters as `snnsim
simulate --set` does.

The statistics (snnsim's analysis/src/analysis.cpp): rate = spikes /
(neurons x duration); ISI CV = the mean over neurons with >= 2 intervals of
std / mean of their intervals (std divisor n); synchrony = Golomb's chi
over bins of one step: sqrt(var over bins of the population-mean spike
indicator / mean over neurons of q (1 - q)), q a neuron's spikes per bin.
"""
import argparse
import json
import re
import sys
import tomllib

import numpy as np

# Each unit's value in the base units (ms, mV, pA) and its dimension (the
# exponents of time, potential, current): pF = pA ms / mV, Hz = 1 / (1000 ms).
UNITS = {"ms": (1.0, (1, 0, 0)), "s": (1000.0, (1, 0, 0)), "us": (1e-3, (1, 0, 0)),
         "mV": (1.0, (0, 1, 0)), "V": (1000.0, (0, 1, 0)), "uV": (1e-3, (0, 1, 0)),
         "pA": (1.0, (0, 0, 1)), "nA": (1000.0, (0, 0, 1)), "uA": (1e6, (0, 0, 1)),
         "pF": (1.0, (1, -1, 1)), "nF": (1000.0, (1, -1, 1)), "Hz": (1e-3, (-1, 0, 0)), "kHz": (1.0, (-1, 0, 0))}


class Q:
    """A quantity in base units with its dimension (written independently of snnsim's C++ evaluator)."""

    def __init__(self, v, dim=(0, 0, 0)):
        self.v, self.dim = float(v), tuple(dim)

    @staticmethod
    def of(x):
        return x if isinstance(x, Q) else Q(x)

    def __add__(self, o):
        o = Q.of(o)
        assert self.dim == o.dim, f"adds {o.dim} to {self.dim}"
        return Q(self.v + o.v, self.dim)

    __radd__ = __add__

    def __sub__(self, o):
        return self + -Q.of(o)

    def __rsub__(self, o):
        return Q.of(o) - self

    def __neg__(self):
        return Q(-self.v, self.dim)

    def __pos__(self):
        return self

    def __mul__(self, o):
        o = Q.of(o)
        return Q(self.v * o.v, [a + b for a, b in zip(self.dim, o.dim)])

    __rmul__ = __mul__

    def __truediv__(self, o):
        o = Q.of(o)
        return Q(self.v / o.v, [a - b for a, b in zip(self.dim, o.dim)])

    def __rtruediv__(self, o):
        return Q.of(o) / self

    def documented(self):
        """The number in the documented unit of its dimension (Hz for a rate, else the base unit)."""
        return self.v * 1000.0 if self.dim == (-1, 0, 0) else self.v


def evaluate(text, params):
    """A model file expression ("1.5 ms", "-g * J") as a Q; params: name -> text or number."""
    units = "|".join(sorted(UNITS, key=len, reverse=True))
    # "1.5 ms" and "(x) mV": a unit right after a number or a parenthesis multiplies.
    py = re.sub(r"((?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|\))\s*(" + units + r")\b", r"\1*\2", text)
    cache = {}

    class Names(dict):
        def __missing__(self, name):
            if name in params:
                if name not in cache:
                    cache[name] = evaluate(str(params[name]), params)
                return cache[name]
            if name in UNITS:
                return Q(*UNITS[name])
            raise NameError(name)

    return Q.of(eval(py, {"__builtins__": {}}, Names()))


def resolve(model, sets=()):
    """The model with every expression replaced by its number in the documented unit
    (a quantity's dimension says its unit); `sets` are (name, value) overrides of [parameters]."""
    params = dict(model.get("parameters", {}))
    for name, value in sets:
        assert name in params, f"--set {name}: the model has no such parameter"
        params[name] = value
    words = {"name", "model", "source", "target", "rule", "distribution", "spikes", "v"}

    def walk(x, key=None):
        if isinstance(x, dict):
            return {k: walk(v, k) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v, key) for v in x]
        if isinstance(x, str) and key not in words:
            return evaluate(x, params).documented()
        return x

    out = walk({k: v for k, v in model.items() if k != "parameters"})
    for p in out.get("population", []):
        p["size"] = int(p["size"])
    for pr in out.get("projection", []):
        for k in ("indegree", "N"):
            if k in pr:
                pr[k] = int(pr[k])
    return out


def load_model(path, sets=()):
    with open(path, "rb") as f:
        return resolve(tomllib.load(f), sets)


def q(value):
    """A resolved model's quantity as a number."""
    return float(value)


def synapse_value(v):
    if isinstance(v, dict):
        import nest
        if v["distribution"] == "normal":
            return nest.random.normal(mean=q(v["mean"]), std=q(v["std"]))
        return nest.random.uniform(min=q(v["low"]), max=q(v["high"]))
    return q(v)


def build_nest(model, seed, threads=1):
    """Creates the model's populations, projections, Poisson drives and DC currents in a
    fresh NEST kernel; returns the populations (name -> NodeCollection) and dt."""
    import nest
    nest.ResetKernel()
    nest.set_verbosity("M_ERROR")
    dt = q(model.get("dt", 0.1))
    nest.resolution = dt
    nest.rng_seed = seed
    nest.local_num_threads = threads
    pops = {}
    for p in model["population"]:
        params = {k: synapse_value(v) for k, v in p.get("params", {}).items() if not isinstance(v, list)}
        params.setdefault("V_m", params.get("E_L", -70.0))  # snnsim starts every neuron at rest unless told
        pops[p["name"]] = nest.Create(p["model"], p["size"], params=params)
        own = p.get("params", {}).get("I_e")
        if isinstance(own, list):  # one current per neuron
            pops[p["name"]].set([{"I_e": float(x)} for x in own])
    for pr in model.get("projection", []):
        rule = pr.get("rule", "all_to_all")
        conn = {"rule": rule, "allow_autapses": pr.get("autapses", True), "allow_multapses": pr.get("multapses", True)}
        if rule == "fixed_indegree":
            conn["indegree"] = pr["indegree"]
        elif rule == "fixed_total_number":
            conn["N"] = pr["N"]
        elif rule == "pairwise_bernoulli":
            conn["p"] = pr["p"]
        syn = {"synapse_model": "static_synapse", "weight": synapse_value(pr.get("weight", 1.0)),
               "delay": synapse_value(pr.get("delay", 1.0))}
        nest.Connect(pops[pr["source"]], pops[pr["target"]], conn, syn)
    for d in model.get("poisson", []):
        gen = nest.Create("poisson_generator", params={"rate": q(d["rate"])})
        # snnsim's drive reaches a neuron from the first step: the shortest delay.
        nest.Connect(gen, pops[d["target"]], syn_spec={"weight": q(d["weight"]), "delay": dt})
    for c in model.get("dc", []):
        params = {"amplitude": q(c["amplitude"]), "start": q(c.get("start", 0.0))}
        if "stop" in c:
            params["stop"] = q(c["stop"])
        gen = nest.Create("dc_generator", params=params)
        nest.Connect(gen, pops[c["target"]], syn_spec={"delay": q(c.get("delay", dt))})
    return pops, dt


def run_nest(model, seed, threads=1, timing=None):
    """Builds and simulates the model in NEST; timing (a dict), when given, receives the
    wall seconds of building ('build') and of nest.Simulate ('simulate')."""
    import time
    import nest
    started = time.perf_counter()
    pops, dt = build_nest(model, seed, threads)
    recorders = {}
    for name, nodes in pops.items():
        recorders[name] = nest.Create("spike_recorder")
        nest.Connect(nodes, recorders[name])
    duration = q(model["duration"])
    built = time.perf_counter()
    nest.Simulate(duration + dt)  # NEST stamps a spike of step k at (k + 1) dt
    if timing is not None:
        timing["build"] = built - started
        timing["simulate"] = time.perf_counter() - built
        timing["connections"] = nest.num_connections
    steps = int(round(duration / dt))
    out = {}
    for name, nodes in pops.items():
        ev = recorders[name].events
        k = np.rint(ev["times"] / dt).astype(np.int64) - 1
        keep = k < steps
        out[name] = statistics(ev["senders"][keep] - nodes[0].global_id, k[keep], len(nodes), steps, dt)
    return out


def statistics(neuron, step, n, steps, dt):
    order = np.lexsort((step, neuron))
    neuron, step = neuron[order], step[order]
    counts = np.bincount(neuron, minlength=n)
    rate = len(step) / (n * steps * dt * 1e-3)
    cvs = []
    starts = np.concatenate(([0], np.cumsum(counts)))
    for i in range(n):
        isi = np.diff(step[starts[i]:starts[i + 1]]).astype(float)
        if len(isi) >= 2:
            cvs.append(isi.std() / isi.mean())
    per_bin = np.bincount(step, minlength=steps) / n
    qn = counts / steps
    mean_var = np.mean(qn * (1 - qn))
    chi = float(np.sqrt(per_bin.var() / mean_var)) if mean_var > 0 else float("nan")
    return {"rate_hz": rate, "isi_cv": float(np.mean(cvs)) if cvs else float("nan"), "synchrony": chi}


def read_json(paths):
    """The JSON documents at `paths`, in order."""
    out = []
    for path in paths:
        with open(path) as f:
            out.append(json.load(f))
    return out


def compare(nest_runs, analyses, sd_floor, peer="NEST"):
    ours = [{p["name"]: p for p in a["populations"]} for a in analyses]
    bad = 0
    for name in nest_runs[0]:
        for key, ours_key in (("rate_hz", "rate_hz"), ("isi_cv", "isi_cv"), ("synchrony", "synchrony_chi")):
            values = np.array([run[name][key] for run in nest_runs])
            mean, sd = values.mean(), values.std(ddof=1)
            tol = 3 * max(sd, sd_floor * abs(mean))
            mine = np.array([o[name][ours_key] for o in ours])
            value = mine.mean()
            inside = abs(value - mean) <= tol
            bad += not inside
            spread = f" +- {mine.std(ddof=1):.2g}" if len(mine) > 1 else ""
            print(f"{name} {key}: snnsim {value:.4g}{spread} over {len(mine)} seeds, {peer} {mean:.4g} +- {sd:.2g} "
                  f"over {len(values)} seeds (allowed +- {tol:.2g}): {'ok' if inside else 'OUTSIDE'}")
    return bad


def compare_exact(model, recording):
    """A deterministic model (no Poisson drive, no drawn values): NEST's spikes and
    voltmeter potentials against snnsim's recording (one trial), step for step. Returns
    the number of disagreements, printing each kind."""
    import h5py
    import nest
    pops, dt = build_nest(model, 1)
    steps = int(round(q(model["duration"]) / dt))
    record = model.get("record", {})
    v_pops = record.get("v", [])
    v_pops = [v_pops] if isinstance(v_pops, str) else v_pops
    width = int(record.get("v_neurons", 1))
    meters, recorders = {}, {}
    for name, nodes in pops.items():
        recorders[name] = nest.Create("spike_recorder")
        nest.Connect(nodes, recorders[name])
        if name in v_pops:
            meters[name] = nest.Create("voltmeter", params={"interval": dt})
            nest.Connect(meters[name], nodes[:width])
    nest.Simulate(steps * dt + 2 * dt)  # NEST stamps step k at (k + 1) dt; its voltmeter lags a step
    bad = 0
    with h5py.File(recording, "r") as f:
        for name, nodes in pops.items():
            ev = recorders[name].events
            k = np.rint(ev["times"] / dt).astype(np.int64) - 1
            keep = k < steps
            nest_spikes = sorted(zip(k[keep].tolist(), (ev["senders"][keep] - nodes[0].global_id).tolist()))
            ours = sorted(zip(np.rint(f[f"spikes/{name}/timestamps"][()] / dt).astype(np.int64).tolist(),
                              f[f"spikes/{name}/node_ids"][()].astype(np.int64).tolist()))
            same = nest_spikes == ours
            print(f"{name}: {len(nest_spikes)} spikes in NEST, {len(ours)} in snnsim: {'identical' if same else 'DIFFERENT'}")
            bad += not same
            if name in meters:
                ev = meters[name].events
                k = np.rint(ev["times"] / dt).astype(np.int64) - 1
                nest_v = np.zeros((steps, width))
                keep = k < steps
                nest_v[k[keep], ev["senders"][keep] - nodes[0].global_id] = ev["V_m"][keep]
                ours_v = f[f"report/{name}/data"][()].astype(np.float64)
                worst = np.max(np.abs(ours_v - nest_v) / np.maximum(1.0, np.abs(nest_v)))
                ok = ours_v.shape == nest_v.shape and worst < 1e-6  # float32 storage
                print(f"{name}: {nest_v.size} potentials, largest difference {worst:.2g} (relative, >= 1 mV scale): "
                      f"{'ok' if ok else 'TOO LARGE'}")
                bad += not ok
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--nest")
    ap.add_argument("--snnsim", nargs="+")
    ap.add_argument("--sd-floor", type=float, default=0.001)
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE: replace a value of [parameters]")
    ap.add_argument("--exact", help="a deterministic model's snnsim recording: spikes and potentials must be NEST's")
    a = ap.parse_args()
    model = load_model(a.model, [kv.split("=", 1) for kv in a.set])
    if a.exact:
        return 1 if compare_exact(model, a.exact) else 0
    if a.out:
        runs = [run_nest(model, seed) for seed in range(1, a.seeds + 1)]
        with open(a.out, "w") as f:
            json.dump(runs, f)
        for name in runs[0]:
            print(name, "rate", [round(r[name]["rate_hz"], 2) for r in runs])
        return 0
    runs, *analyses = read_json([a.nest, *a.snnsim])
    return 1 if compare(runs, analyses, a.sd_floor) else 0


if __name__ == "__main__":
    sys.exit(main())
