#!/usr/bin/env python3
"""NEST 3.10 as the oracle of snnsim's population networks (snnsim simulate).

    nest_populations.py MODEL.toml --seeds N --out NEST.json
        builds the model file's network in NEST (iaf_psc_delta / iaf_psc_exp
        populations, NEST's own connection rules, poisson_generators) and
        simulates it with N seeds; writes each population's firing rate, mean
        ISI CV and synchrony per seed, computed as `snnsim analyze` does.
    nest_populations.py MODEL.toml --nest NEST.json --snnsim ANALYZE.json... [--sd-floor F]
        checks snnsim's statistics (analyze --json of its recordings, one per
        seed; their mean) against NEST's spread: each within mean +- 3 sd of
        NEST's seeds (sd at least F times the mean, default 0.001, in case the
        seeds agree exactly by chance); prints one line per statistic, exits 1
        if any is outside.

The statistics (snnsim's analysis/src/analysis.cpp): rate = spikes /
(neurons x duration); ISI CV = the mean over neurons with >= 2 intervals of
std / mean of their intervals (std divisor n); synchrony = Golomb's chi
over bins of one step: sqrt(var over bins of the population-mean spike
indicator / mean over neurons of q (1 - q)), q a neuron's spikes per bin.
"""
import argparse
import json
import sys
import tomllib

import numpy as np

UNITS = {"ms": 1.0, "s": 1000.0, "us": 1e-3, "mV": 1.0, "V": 1000.0, "uV": 1e-3, "pA": 1.0, "nA": 1000.0,
         "uA": 1e6, "pF": 1.0, "nF": 1000.0, "Hz": 1.0, "kHz": 1000.0}


def q(value):
    """A model file quantity (a number in the documented unit, or "1.5 ms") as a number."""
    if isinstance(value, str):
        number, unit = value.split()
        return float(number) * UNITS[unit]
    return float(value)


def synapse_value(v):
    if isinstance(v, dict):
        import nest
        if v["distribution"] == "normal":
            return nest.random.normal(mean=q(v["mean"]), std=q(v["std"]))
        return nest.random.uniform(min=q(v["low"]), max=q(v["high"]))
    return q(v)


def run_nest(model, seed, threads=1, timing=None):
    """Builds and simulates the model in NEST; timing (a dict), when given, receives the
    wall seconds of building ('build') and of nest.Simulate ('simulate')."""
    import time
    import nest
    started = time.perf_counter()
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


def compare(nest_runs, analyses, sd_floor):
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
            print(f"{name} {key}: snnsim {value:.4g}{spread} over {len(mine)} seeds, NEST {mean:.4g} +- {sd:.2g} "
                  f"over {len(values)} seeds (allowed +- {tol:.2g}): {'ok' if inside else 'OUTSIDE'}")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--nest")
    ap.add_argument("--snnsim", nargs="+")
    ap.add_argument("--sd-floor", type=float, default=0.001)
    a = ap.parse_args()
    with open(a.model, "rb") as f:
        model = tomllib.load(f)
    if a.out:
        runs = [run_nest(model, seed) for seed in range(1, a.seeds + 1)]
        with open(a.out, "w") as f:
            json.dump(runs, f)
        for name in runs[0]:
            print(name, "rate", [round(r[name]["rate_hz"], 2) for r in runs])
        return 0
    with open(a.nest) as f:
        runs = json.load(f)
    analyses = []
    for path in a.snnsim:
        with open(path) as f:
            analyses.append(json.load(f))
    return 1 if compare(runs, analyses, a.sd_floor) else 0


if __name__ == "__main__":
    sys.exit(main())
