#!/usr/bin/env python3
"""Recomputes a recording's hidden and output spikes and its membrane
potentials with numpy, from the checkpoint's weights and the recorded input
spikes, and compares them with the file bit for bit.

    recompute_recording.py SNNSIM FIXTURE_DIR
        trains small networks on the fixture (one per neuron charge form),
        records a run of each and checks it (the CTest test);
    recompute_recording.py --check CHECKPOINT RECORDING
        checks one existing recording.

Exactness comes from doing snnsim's arithmetic in snnsim's order, in float32:
- snn::Linear (neurons/src/linear_loops.cpp): every output starts as its
  bias and adds the weights of the inputs that spiked, one at a time, in
  ascending input id (each product of a 0/1 spike is the weight itself; no
  fused multiply-add: the kernels are built without -mfma);
- the neuron step (neurons/include/snn/neurons/detail/neuron_step.h):
  charge in SpikingJelly's operation order for the layer's form, fire when
  h >= v_threshold, then v = v_reset (hard) or h - v_threshold (soft); the
  constants rounded to float32 once (LIF's 1 - 1/tau in double first), v
  starting at v_reset (hard) or 0 (soft); the refractory count as the kernel
  keeps it. Recorded potentials are v after the reset.
Nothing here calls snnsim's code: a wrong synapse order, a wrong constant or
a changed neuron formula shows up as a different bit.
"""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

f32 = np.float32


def text(attr):
    return attr.decode() if isinstance(attr, bytes) else str(attr)


class Layer:
    """One neuron layer's dynamics as snnsim's kernel computes them."""

    def __init__(self, neuron):
        model = neuron["model"]
        if model not in ("lif", "if"):
            raise SystemExit(f"recompute_recording.py: neuron model {model} is not reproduced here")
        self.model = model
        tau = float(neuron["tau"])
        self.tau = f32(tau)
        self.leak = f32(1.0 - 1.0 / tau)  # in double, rounded once, as SpikingJelly's Python float
        self.threshold = f32(neuron["v_threshold"])
        self.hard = neuron["v_reset"] is not None
        self.v_reset = f32(neuron["v_reset"] if self.hard else 0.0)
        self.zero_reset = not self.hard or float(neuron["v_reset"]) == 0.0
        self.decay_input = bool(neuron["decay_input"])
        self.refractory = int(neuron["refractory"])

    def charge(self, v, x):
        if self.model == "if":
            return v + x
        if self.decay_input:
            d = x - v if self.zero_reset else x - (v - self.v_reset)
            return v + d / self.tau
        if self.zero_reset:
            return v * self.leak + x
        return v - (v - self.v_reset) / self.tau + x

    def run(self, currents):
        """currents [T, n] float32 -> spikes [T, n] bool, v after each step [T, n]."""
        T, n = currents.shape
        v = np.full(n, self.v_reset if self.hard else f32(0), f32)
        ref = np.zeros(n, np.int64)
        spikes = np.zeros((T, n), bool)
        vs = np.zeros((T, n), f32)
        for t in range(T):
            active = ref <= 0
            h = np.where(active, self.charge(v, currents[t]), v).astype(f32)
            s = active & (h >= self.threshold)
            after = np.full(n, self.v_reset, f32) if self.hard else (h - self.threshold).astype(f32)
            v = np.where(s, after, h).astype(f32)
            if self.refractory > 0:
                ref = np.where(s, self.refractory, np.where(active, 0, ref - 1))
            spikes[t], vs[t] = s, v
        return spikes, vs


def linear(weight, bias, spikes):
    """spikes [T, in] bool -> currents [T, out] float32: bias, then each
    spiking input's weight column added in ascending input id."""
    T = spikes.shape[0]
    out = np.empty((T, weight.shape[0]), f32)
    columns = np.ascontiguousarray(weight.T)  # [in, out]: one input's weights
    for t in range(T):
        y = bias.copy()
        for i in np.flatnonzero(spikes[t]):  # ascending
            y = y + columns[i]  # float32 + float32, rounded per element
        out[t] = y
    return out


def sample_steps(rec, pop, s, T, dt):
    """(steps, node ids) of sample s's spikes of population pop."""
    ptr = rec["samples/spike_ptr"][pop]
    a, b = int(ptr[s]), int(ptr[s + 1])
    ids = rec["spikes"][pop]["node_ids"][a:b].astype(np.int64)
    ts = rec["spikes"][pop]["timestamps"][a:b]
    steps = (ts - rec["samples/t_start_ms"][s]) / dt
    assert np.array_equal(steps, np.round(steps)), f"{pop}: sample {s} has timestamps off the step grid"
    steps = steps.astype(np.int64)
    assert ((steps >= 0) & (steps < T)).all(), f"{pop}: sample {s} has spikes outside its T = {T} steps"
    return steps, ids


def check(checkpoint, recording):
    with h5py.File(checkpoint, "r") as ck:
        config = json.loads(text(ck.attrs["config"]))
        layers = config["layers"]
        params = [(ck[f"parameters/fc{i}.weight"][...], ck[f"parameters/fc{i}.bias"][...])
                  for i in range(len(layers) - 1)]
    for w, b in params:
        assert w.dtype == f32 and b.dtype == f32, (w.dtype, b.dtype)
    neuron = Layer(config["neuron"])
    with h5py.File(recording, "r") as rec:
        meta = rec["meta"]
        run_config = json.loads(text(meta.attrs["config"]))
        assert run_config["layers"] == layers and run_config["neuron"] == config["neuron"], \
            "the recording was made with another network than the checkpoint's"
        T = int(meta.attrs["steps_per_sample"])
        dt = float(meta.attrs["dt_ms"])
        S = int(meta["samples_committed"][()])
        pops = {name: int(g.attrs["layer"]) for name, g in meta["populations"].items()}
        recorded = {name: g["recorded_node_ids"][:].astype(np.int64) for name, g in meta["populations"].items()}
        by_layer = {layer: name for name, layer in pops.items()}
        assert by_layer.get(0) == "input", "the recording needs --record-input"
        reports = {}
        for pop in rec["report"].keys() if "report" in rec else []:
            g = rec["report"][pop]
            reports[pop] = (g["data"][...], g["mapping/node_ids"][:].astype(np.int64))
            assert reports[pop][0].dtype == f32 and reports[pop][0].shape[0] == S * T
        spike_pops = [p for p in rec["spikes"].keys() if pops[p] > 0]
        assert spike_pops and reports, "nothing to compare: record hidden spikes and potentials"
        counts = rec["samples/output_counts"][...]
        layer_spikes = rec["samples/layer_spikes"][...]

        compared_spikes = compared_v = 0
        for s in range(S):
            steps, ids = sample_steps(rec, "input", s, T, dt)
            x = np.zeros((T, layers[0]), bool)
            x[steps, ids] = True
            for l, (w, b) in enumerate(params, start=1):
                spikes, vs = neuron.run(linear(w, b, x))
                name = by_layer.get(l)
                if name in spike_pops:
                    got_steps, got_ids = sample_steps(rec, name, s, T, dt)
                    keep = np.zeros(layers[l], bool)
                    keep[recorded[name]] = True
                    want_steps, want_ids = np.nonzero(spikes & keep)  # step-major, ids ascending
                    if not (np.array_equal(got_steps, want_steps) and np.array_equal(got_ids, want_ids)):
                        raise AssertionError(
                            f"{name}: sample {s}: recorded spikes (step, id) "
                            f"{list(zip(got_steps.tolist(), got_ids.tolist()))[:20]} but recomputed "
                            f"{list(zip(want_steps.tolist(), want_ids.tolist()))[:20]}")
                    compared_spikes += len(want_ids)
                if name in reports:
                    data, node_ids = reports[name]
                    got = data[s * T:(s + 1) * T]
                    want = vs[:, node_ids]
                    if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                        t, k = np.argwhere(got.view(np.uint32) != want.view(np.uint32))[0]
                        raise AssertionError(f"{name}: sample {s}, step {t}, neuron {node_ids[k]}: recorded v "
                                             f"{got[t, k]!r} but recomputed {want[t, k]!r} (float32 bits differ)")
                    compared_v += got.size
                assert layer_spikes[s, l - 1] == spikes.sum(), (s, l, layer_spikes[s, l - 1], spikes.sum())
                x = spikes
            assert np.array_equal(counts[s], x.sum(0)), (s, counts[s], x.sum(0))
    print(f"{recording}: {S} samples, T = {T}: {compared_spikes} spikes and {compared_v} potentials "
          "recomputed bit for bit")
    return compared_spikes, compared_v


# Networks whose recordings are checked: one per charge form of the kernel
# (decay_input with v_reset 0, without decay_input and soft reset, decay_input
# with a non-zero hard reset and a refractory period), tau not a power of 2
# so that its divisions round.
NETWORKS = [
    ("decay-hard", ["--tau", "3"]),
    ("leak-soft", ["--tau", "2.5", "--decay-input", "false", "--v-reset", "none"]),
    ("decay-reset-refractory", ["--tau", "1.7", "--v-reset", "-0.125", "--refractory", "1"]),
]


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--check":
        check(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    snnsim, fixture = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in NETWORKS:
            ck, out = os.path.join(tmp, name + ".h5"), os.path.join(tmp, name + "-rec.h5")
            common = ["--data-dir", fixture, "--threads", "1"]
            subprocess.run([snnsim, "train", *common, "--layers", "784-40-24-10", "--T", "5", "--batch-size", "32",
                            "--epochs", "1", "--v-threshold", "0.5", "--lr", "5e-3", "--checkpoint", ck, *flags],
                           check=True, stdout=subprocess.DEVNULL)
            # Batches of 7 on two stages and K = 2: the recording does not
            # depend on them, so neither does the recomputation.
            subprocess.run([snnsim, "run", *common, "--checkpoint", ck, "--output", out, "--record-input",
                            "--record", "hidden1,hidden2:3-20,output", "--record-v",
                            "hidden1:0-39,hidden2:0,5,17-23,output:0-9", "--batch-size", "7",
                            "--devices", "cpu,cpu", "--steps-per-tick", "2"], check=True, stdout=subprocess.DEVNULL)
            spikes, potentials = check(ck, out)
            assert spikes > 1000 and potentials > 10000, f"{name}: too little activity to test ({spikes} spikes)"


if __name__ == "__main__":
    main()
