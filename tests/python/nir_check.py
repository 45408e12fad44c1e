#!/usr/bin/env python3
"""NIR files against the `nir` package (neuromorphs/NIR) and NIR's own
equations, for tests/cli/nir_interop_test.sh.

    nir_check.py exported CHECKPOINT NIR_FILE DT
        nir.read (with its type check) reads snnsim's export; its nodes,
        edges and every array equal the checkpoint's network under the
        documented mapping (tau = tau_steps dt, r = 1, v_leak = v_reset).
    nir_check.py foreign OUT.nir
        writes, with nir.write, a 784-24-10 LIF network of random float32
        weights (tau = 3 dt, dt = 1e-4 s, threshold 0.8) for snnsim to run.
    nir_check.py oracle NIR_FILE RECORDING
        checks snnsim's recording of that network against NIR's LIF
        equations (forward Euler, tau dv/dt = v_leak - v + r I, fire when
        v > v_threshold, reset to v_reset) computed here in float64 from the
        recorded input spikes, step by step from snnsim's recorded potential:
        every spike and every potential, except where v lies within 1e-5 of
        the threshold (float32 rounding and NIR's strict > against snnsim's
        >= decide those).
    nir_check.py bad DIR
        writes NIR files that snnsim must refuse, one per problem.
Nothing here calls snnsim's code.
"""
import json
import sys

import h5py
import nir
import numpy as np


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def exported(checkpoint, path, dt):
    dt = float(dt)
    g = nir.read(path)  # raises on anything nir cannot read or type-check
    with h5py.File(checkpoint, "r") as ck:
        config = json.loads(text(ck.attrs["config"]))
        params = {k: ck["parameters"][k][...] for k in ck["parameters"]}
    layers, neuron = config["layers"], config["neuron"]
    n = len(layers) - 1
    want_nodes = {"input", "output"} | {f"fc{i}" for i in range(n)} | {f"lif{i}" for i in range(n)}
    assert set(g.nodes) == want_nodes, sorted(g.nodes)
    chain = ["input"] + [x for i in range(n) for x in (f"fc{i}", f"lif{i}")] + ["output"]
    assert sorted(g.edges) == sorted(zip(chain, chain[1:])), g.edges
    assert isinstance(g.nodes["input"], nir.Input) and list(g.nodes["input"].input_type["input"]) == [layers[0]]
    assert list(g.nodes["output"].output_type["output"]) == [layers[-1]]
    for i in range(n):
        fc, lif = g.nodes[f"fc{i}"], g.nodes[f"lif{i}"]
        assert isinstance(fc, nir.Affine) and isinstance(lif, nir.LIF), (type(fc), type(lif))
        assert np.array_equal(fc.weight, params[f"fc{i}.weight"]) and fc.weight.dtype == np.float32
        assert np.array_equal(fc.bias, params[f"fc{i}.bias"])
        size = layers[i + 1]
        for key, value in [("tau", neuron["tau"] * dt), ("r", 1.0 if neuron["decay_input"] else neuron["tau"]),
                           ("v_leak", neuron["v_reset"]), ("v_threshold", neuron["v_threshold"]),
                           ("v_reset", neuron["v_reset"])]:
            arr = getattr(lif, key)
            assert arr.shape == (size,), (key, arr.shape)
            assert np.allclose(arr, value, rtol=1e-12, atol=0), (key, arr[:3], value)
    print(f"{path}: nir {nir.version} read and type-checked it; {len(g.nodes)} nodes, {len(g.edges)} edges "
          "equal the checkpoint's network")


def foreign(path):
    rng = np.random.default_rng(5)
    dt, tau = 1e-4, 3e-4
    w0 = (rng.standard_normal((24, 784)) * 0.08).astype(np.float32)
    b0 = (rng.standard_normal(24) * 0.05).astype(np.float32)
    w1 = (rng.standard_normal((10, 24)) * 0.4).astype(np.float32)
    b1 = np.zeros(10, np.float32)

    def lif(n):
        return nir.LIF(tau=np.full(n, tau), r=np.ones(n), v_leak=np.zeros(n), v_threshold=np.full(n, 0.8),
                       v_reset=np.zeros(n))

    g = nir.NIRGraph(nodes={"in": nir.Input(input_type=np.array([784])), "a": nir.Affine(weight=w0, bias=b0),
                            "ha": lif(24), "b": nir.Affine(weight=w1, bias=b1), "hb": lif(10),
                            "out": nir.Output(output_type=np.array([10]))},
                     edges=[("in", "a"), ("a", "ha"), ("ha", "b"), ("b", "hb"), ("hb", "out")])
    nir.write(path, g)


def sample_steps(rec, pop, s, T, dt):
    ptr = rec["samples/spike_ptr"][pop]
    a, b = int(ptr[s]), int(ptr[s + 1])
    ids = rec["spikes"][pop]["node_ids"][a:b].astype(np.int64)
    steps = np.round((rec["spikes"][pop]["timestamps"][a:b] - rec["samples/t_start_ms"][s]) / dt).astype(np.int64)
    return steps, ids


def oracle(path, recording):
    g = nir.read(path)
    dt = 1e-4
    layers = [("a", "ha", "input"), ("b", "hb", None)]
    with h5py.File(recording, "r") as rec:
        meta = rec["meta"]
        T = int(meta.attrs["steps_per_sample"])
        dt_ms = float(meta.attrs["dt_ms"])
        S = int(meta["samples_committed"][()])
        pop_of_layer = {int(gr.attrs["layer"]): name for name, gr in meta["populations"].items()}
        reports = {p: (rec["report"][p]["data"][...], rec["report"][p]["mapping/node_ids"][:].astype(np.int64))
                   for p in rec["report"]}
        compared = spikes_seen = near = 0
        for s in range(S):
            steps, ids = sample_steps(rec, "input", s, T, dt_ms)
            x = np.zeros((T, 784), bool)
            x[steps, ids] = True
            for l, (syn, neu, _) in enumerate(layers, start=1):
                fc, lif = g.nodes[syn], g.nodes[neu]
                pop = pop_of_layer[l]
                n = fc.weight.shape[0]
                got = np.zeros((T, n), bool)
                st, si = sample_steps(rec, pop, s, T, dt_ms)
                got[st, si] = True
                data, node_ids = reports[pop]
                assert np.array_equal(node_ids, np.arange(n)), f"{pop}: record every potential"
                v_rec = data[s * T:(s + 1) * T].astype(np.float64)
                current = x.astype(np.float64) @ fc.weight.astype(np.float64).T + fc.bias
                v = lif.v_reset.astype(np.float64)
                for t in range(T):
                    h = v + dt / lif.tau * (lif.v_leak - v + lif.r * current[t])
                    fire = h > lif.v_threshold
                    clear = np.abs(h - lif.v_threshold) > 1e-5
                    near += int((~clear).sum())
                    bad = clear & (fire != got[t])
                    if bad.any():
                        k = int(np.flatnonzero(bad)[0])
                        raise AssertionError(f"{pop}: sample {s}, step {t}, neuron {k}: NIR's equations give "
                                             f"v = {h[k]!r} (threshold {lif.v_threshold[k]}) but snnsim "
                                             f"{'spiked' if got[t, k] else 'did not spike'}")
                    after = np.where(got[t], lif.v_reset, h)
                    off = clear & (np.abs(after - v_rec[t]) > 1e-5 * np.maximum(1, np.abs(after)))
                    if off.any():
                        k = int(np.flatnonzero(off)[0])
                        raise AssertionError(f"{pop}: sample {s}, step {t}, neuron {k}: v = {v_rec[t, k]!r} "
                                             f"but NIR's equations give {after[k]!r}")
                    compared += n
                    spikes_seen += int(got[t].sum())
                    v = v_rec[t]
                x = got
        assert spikes_seen > 0, "no spikes: the check compared nothing"
        assert near <= compared // 1000, f"{near} of {compared} potentials near the threshold: too many to skip"
    print(f"{recording}: {compared} neuron-steps ({spikes_seen} spikes) follow NIR's LIF equations; "
          f"{near} within 1e-5 of the threshold not compared")


def bad(folder):
    """One NIR file per problem; the shell test names the expected message."""
    def base():
        return {"in": nir.Input(input_type=np.array([784])),
                "a": nir.Affine(weight=np.zeros((4, 784), np.float32), bias=np.zeros(4, np.float32)),
                "h": nir.LIF(tau=np.full(4, 2e-4), r=np.ones(4), v_leak=np.zeros(4), v_threshold=np.ones(4),
                             v_reset=np.zeros(4)),
                "out": nir.Output(output_type=np.array([4]))}
    edges = [("in", "a"), ("a", "h"), ("h", "out")]
    nir.write(f"{folder}/good.nir", nir.NIRGraph(nodes=base(), edges=edges))
    # A node type snnsim does not read: NIR's integrator I.
    nodes = base()
    nodes["i"] = nir.I(r=np.ones(4))
    nir.write(f"{folder}/unsupported.nir", nir.NIRGraph(nodes=nodes, edges=edges[:2] + [("h", "i"), ("i", "out")],
                                                        type_check=False))
    # A nested graph.
    nodes = base()
    nodes["sub"] = nir.NIRGraph(nodes={"x": nir.Input(input_type=np.array([4])),
                                       "y": nir.Output(output_type=np.array([4]))}, edges=[("x", "y")])
    nir.write(f"{folder}/nested.nir", nir.NIRGraph(nodes=nodes, edges=edges[:2] + [("h", "sub"), ("sub", "out")],
                                                   type_check=False))
    # An edge to a node that does not exist (written by hand: nir checks it).
    with h5py.File(f"{folder}/good.nir", "r") as src, h5py.File(f"{folder}/dangling.nir", "w") as dst:
        src.copy("node", dst)
        dst.create_dataset("version", data=src["version"][()])
        del dst["node/edges"]
        dst["node"].create_dataset("edges", data=np.array([[b"in", b"a"], [b"a", b"h"], [b"h", b"ghost"]], object),
                                   dtype=h5py.string_dtype())
    # Another major version.
    with h5py.File(f"{folder}/good.nir", "r") as src, h5py.File(f"{folder}/version.nir", "w") as dst:
        src.copy("node", dst)
        dst.create_dataset("version", data="2.0.0", dtype=h5py.string_dtype())
    # Parameters of the wrong shape: a bias of 5 for 4 outputs.
    with h5py.File(f"{folder}/good.nir", "r") as src, h5py.File(f"{folder}/bias.nir", "w") as dst:
        src.copy("node", dst)
        dst.create_dataset("version", data=src["version"][()])
        del dst["node/nodes/a/bias"]
        dst["node/nodes/a"].create_dataset("bias", data=np.zeros(5, np.float32))
    # A shape mismatch along an edge: the LIF has 3 neurons for 4 currents.
    nodes = base()
    nodes["h"] = nir.LIF(tau=np.full(3, 2e-4), r=np.ones(3), v_leak=np.zeros(3), v_threshold=np.ones(3),
                         v_reset=np.zeros(3))
    nir.write(f"{folder}/mismatch.nir", nir.NIRGraph(nodes=nodes, edges=edges, type_check=False))
    # A LIF leaking toward another value than its reset.
    nodes = base()
    nodes["h"] = nir.LIF(tau=np.full(4, 2e-4), r=np.ones(4), v_leak=np.full(4, 0.5), v_threshold=np.ones(4),
                         v_reset=np.zeros(4))
    nir.write(f"{folder}/leak.nir", nir.NIRGraph(nodes=nodes, edges=edges))
    # A recurrent edge without a delay (h feeds a back).
    nodes = base()
    nodes["rec"] = nir.Linear(weight=np.zeros((4, 4), np.float32))
    nir.write(f"{folder}/cycle.nir", nir.NIRGraph(nodes=nodes, edges=edges + [("h", "rec"), ("rec", "h")],
                                                  type_check=False))


if __name__ == "__main__":
    commands = {"exported": exported, "foreign": foreign, "oracle": oracle, "bad": bad}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        raise SystemExit(__doc__)
    commands[sys.argv[1]](*sys.argv[2:])
