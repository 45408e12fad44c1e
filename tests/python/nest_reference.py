#!/usr/bin/env python3
"""NEST 3.10 as the oracle of snnsim's Iaf layers (neurons/include/snn/neurons/iaf.h).

    nest_reference.py OUT.json

Runs NEST's iaf_psc_delta and iaf_psc_exp (from .venv-peers, PyPI
nest-simulator) on seeded random input spike trains (excitatory and
inhibitory spike generators), a constant current I_e and a step current,
and writes, per case, the inputs in snnsim's per-step form and what NEST
recorded: V_m after every step (voltmeter, interval dt) and the spike times
as steps. NEST's timing, checked here on one neuron before the cases run:
a spike sent at t with delay d arrives at the end of step (t + d) / dt - 1;
a step current from t with delay d is given for that step and acts from the
next; a neuron's spike at the end of step k is stamped (k + 1) dt.
"""
import json
import sys

import numpy as np

import nest

DT = 0.1
DELAY = 0.1
STEPS = 1000  # 100 ms
NEURONS = 4


def arrival_step(t_ms):
    return int(round((t_ms + DELAY) / DT)) - 1


def check_timing():
    nest.ResetKernel()
    nest.resolution = DT
    n = nest.Create("iaf_psc_delta", params={"tau_m": 1e9})
    vm = nest.Create("voltmeter", params={"interval": DT})
    nest.Connect(vm, n)
    sg = nest.Create("spike_generator", params={"spike_times": [1.0]})
    nest.Connect(sg, n, syn_spec={"weight": 1.0, "delay": DELAY})
    nest.Simulate(2.0)
    v = vm.events["V_m"]
    assert vm.events["times"][0] == DT, "the voltmeter's first record is not at dt"
    assert np.flatnonzero(v > -69.5)[0] == arrival_step(1.0), "a spike arrives at another step than expected"


def case(name, model, params, weights_ex, weights_in, rates_hz, current_steps, seed):
    rng = np.random.default_rng(seed)
    nest.ResetKernel()
    nest.resolution = DT
    nodes = nest.Create(model, NEURONS, params=params)
    vm = nest.Create("voltmeter", params={"interval": DT})
    nest.Connect(vm, nodes)
    sr = nest.Create("spike_recorder")
    nest.Connect(nodes, sr)
    ex = np.zeros((STEPS, NEURONS))
    inh = np.zeros((STEPS, NEURONS))
    current = np.zeros((STEPS, NEURONS))
    for k, node in enumerate(nodes):
        for channel, weight, rate, target in (("ex", weights_ex[k], rates_hz[0], ex), ("in", weights_in[k], rates_hz[1], inh)):
            # Spike times on the grid, at most one per step, sent before the end of the run.
            steps = np.flatnonzero(rng.random(STEPS - 2) < rate * DT * 1e-3) + 1
            times = np.round(steps * DT, 10)
            if len(times) == 0:
                continue
            sg = nest.Create("spike_generator", params={"spike_times": times.tolist()})
            nest.Connect(sg, node, syn_spec={"weight": weight, "delay": DELAY})
            for t in times:
                target[arrival_step(t), k] += weight
        if current_steps:
            amp_times = [t for t, _ in current_steps]
            amp_values = [a * (1 + 0.25 * k) for _, a in current_steps]
            cg = nest.Create("step_current_generator", params={"amplitude_times": amp_times,
                                                                "amplitude_values": amp_values})
            nest.Connect(cg, node, syn_spec={"delay": DELAY})
            for (t, _), a in zip(current_steps, amp_values):
                current[arrival_step(t):, k] = a
    nest.Simulate((STEPS + 1) * DT)  # the voltmeter's record of the last step comes at the step after
    ev = vm.events
    v = np.full((STEPS, NEURONS), np.nan)
    ids = {node.global_id: k for k, node in enumerate(nodes)}
    for t, s, value in zip(ev["times"], ev["senders"], ev["V_m"]):
        k = int(round(t / DT)) - 1
        if k < STEPS:
            v[k, ids[s]] = value
    assert not np.isnan(v).any(), "the voltmeter missed steps"
    spikes = [[] for _ in range(NEURONS)]
    for t, s in zip(sr.events["times"], sr.events["senders"]):
        k = int(round(t / DT)) - 1
        if k < STEPS:
            spikes[ids[s]].append(k)
    spikes = [sorted(s) for s in spikes]
    n_spikes = sum(len(s) for s in spikes)
    assert n_spikes > 10, f"{name}: NEST's neurons hardly fired ({n_spikes} spikes): the case tests little"
    keys = ["C_m", "tau_m", "t_ref", "E_L", "V_th", "V_reset", "I_e"]
    keys += ["V_min"] if model == "iaf_psc_delta" else ["tau_syn_ex", "tau_syn_in"]
    used = {k: float(nodes[0].get(k)) for k in keys}  # every parameter as NEST has it, defaults included
    return {"name": name, "model": model, "dt": DT, "params": used, "steps": STEPS, "neurons": NEURONS,
            "ex": ex.tolist(), "in": inh.tolist(), "current": current.tolist(), "v": v.tolist(), "spikes": spikes,
            "nest_spike_count": n_spikes}


def main(out):
    nest.set_verbosity("M_ERROR")
    check_timing()
    cases = [
        case("delta defaults", "iaf_psc_delta", {"I_e": 360.0}, [1.5, 2.0, 0.8, 1.2], [-2.0, -1.0, -3.0, -1.5],
             (900.0, 300.0), [(20.0, 50.0), (60.0, -30.0)], 1),
        case("delta refractory and V_min", "iaf_psc_delta",
             {"I_e": 200.0, "t_ref": 3.5, "V_min": -72.0, "V_reset": -65.0, "C_m": 180.0, "tau_m": 15.0},
             [2.5, 1.8, 3.0, 2.2], [-4.0, -6.0, -2.5, -5.0], (700.0, 500.0), [(35.0, 80.0)], 2),
        case("exp equal synapses", "iaf_psc_exp", {"I_e": 300.0}, [120.0, 200.0, 80.0, 150.0],
             [-200.0, -100.0, -300.0, -150.0], (800.0, 300.0), [(25.0, 60.0), (70.0, -40.0)], 3),
        case("exp distinct synapses", "iaf_psc_exp",
             {"I_e": 250.0, "tau_syn_ex": 1.5, "tau_syn_in": 5.0, "tau_m": 20.0, "C_m": 200.0, "t_ref": 2.5,
              "V_reset": -68.0}, [90.0, 150.0, 60.0, 120.0], [-150.0, -80.0, -250.0, -120.0], (900.0, 400.0),
             [(40.0, 70.0)], 4),
        case("exp tau_syn = tau_m (singular propagator)", "iaf_psc_exp",
             {"I_e": 320.0, "tau_syn_ex": 10.0, "tau_syn_in": 10.0, "tau_m": 10.0}, [40.0, 70.0, 30.0, 55.0],
             [-60.0, -30.0, -90.0, -45.0], (900.0, 300.0), [], 5),
    ]
    with open(out, "w") as f:
        json.dump({"nest_version": nest.__version__, "cases": cases}, f)
    print(f"{out}: {len(cases)} cases of NEST {nest.__version__}, "
          f"{sum(c['nest_spike_count'] for c in cases)} spikes")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
