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
    nir_check.py general OUT.nir
        writes, with nir.write, a chain of every NIR neuron kind snnsim
        simulates, with per-neuron parameters: 784-32 LIF (tau, threshold,
        r and v_leak per neuron, v_leak != v_reset), -24 CubaLIF, -20
        CubaLI, -16 LI, -12 Threshold, -10 IF (r dt = 0.5).
    nir_check.py structural OUT.nir
        writes, with nir.write, every structural node NIR defines in one
        chain of three LIF layers: Conv2d (stride, padding), SumPool2d,
        Scale, Delay (2 steps), AvgPool2d, Flatten, Linear.
    nir_check.py oracle NIR_FILE RECORDING
        checks snnsim's recording of a chain against NIR's equations (the
        structural nodes in float64 with torch's conv2d and avg_pool2d) (forward Euler with dt: tau dv/dt = v_leak -
        v + r I; CubaLIF/CubaLI: tau_syn dI/dt = -I + w_in x first; IF:
        dv/dt = r I; fire when v > v_threshold, reset to v_reset; Threshold:
        x > threshold; LI and CubaLI pass on v) computed here in float64
        from the recorded input spikes, step by step from snnsim's recorded
        potential: every spike and every potential, except where v lies
        within 1e-5 of the threshold (float32 rounding and NIR's strict >
        against snnsim's >= decide those).
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


def general(path):
    rng = np.random.default_rng(9)
    dt = 1e-4
    sizes = [784, 32, 24, 20, 16, 12, 10]
    nodes = {"in": nir.Input(input_type=np.array([784]))}
    scale = [0.08, 0.35, 0.5, 0.4, 0.5, 0.9]
    for l in range(6):
        n_in, n = sizes[l], sizes[l + 1]
        nodes[f"w{l}"] = nir.Affine(weight=(rng.standard_normal((n, n_in)) * scale[l]).astype(np.float32),
                                    bias=(rng.standard_normal(n) * 0.05 + 0.05).astype(np.float32))
    n = sizes[1]
    nodes["lif"] = nir.LIF(tau=dt * rng.uniform(1.5, 6.0, n), r=rng.uniform(0.7, 1.3, n),
                           v_leak=np.full(n, 0.1), v_threshold=rng.uniform(0.5, 1.0, n), v_reset=np.full(n, -0.1))
    n = sizes[2]
    nodes["cuba"] = nir.CubaLIF(tau_syn=np.full(n, 2 * dt), tau_mem=dt * rng.uniform(2.0, 5.0, n), r=np.full(n, 1.5),
                                v_leak=np.zeros(n), v_threshold=np.full(n, 0.3), v_reset=np.zeros(n),
                                w_in=rng.uniform(0.5, 1.5, n))
    n = sizes[3]
    nodes["culi"] = nir.CubaLI(tau_syn=np.full(n, 3 * dt), tau_mem=np.full(n, 2 * dt), r=np.ones(n),
                               v_leak=np.full(n, -0.05), w_in=np.full(n, 2.0))
    n = sizes[4]
    nodes["li"] = nir.LI(tau=np.full(n, 4 * dt), r=rng.uniform(0.5, 2.0, n), v_leak=np.zeros(n))
    n = sizes[5]
    nodes["thr"] = nir.Threshold(threshold=rng.uniform(0.0, 0.3, n))
    n = sizes[6]
    nodes["if"] = nir.IF(r=np.full(n, 0.5 / dt), v_threshold=np.full(n, 0.4), v_reset=np.zeros(n))
    nodes["out"] = nir.Output(output_type=np.array([10]))
    chain = ["in", "w0", "lif", "w1", "cuba", "w2", "culi", "w3", "li", "w4", "thr", "w5", "if", "out"]
    nir.write(path, nir.NIRGraph(nodes=nodes, edges=list(zip(chain, chain[1:]))))


def structural(path):
    """Every structural node NIR defines between two LIF layers, in a chain:
    Conv2d (stride, padding), SumPool2d, Scale, Delay, AvgPool2d, Flatten,
    Linear. (A grouped Conv2d: nir 1.0.8's own type inference refuses it.)"""
    rng = np.random.default_rng(11)
    dt = 1e-4

    def lif(shape, thr):
        return nir.LIF(tau=np.full(shape, 2 * dt), r=np.ones(shape), v_leak=np.zeros(shape),
                       v_threshold=np.full(shape, thr), v_reset=np.zeros(shape))
    nodes = {
        "in": nir.Input(input_type=np.array([1, 28, 28])),
        "conv": nir.Conv2d(input_shape=(28, 28), weight=(rng.standard_normal((4, 1, 5, 5)) * 0.6).astype(np.float32),
                           stride=2, padding=1, dilation=1, groups=1, bias=np.full(4, 0.1, np.float32)),
        "l1": lif((4, 13, 13), 0.5),
        "conv2": nir.Conv2d(input_shape=(13, 13), weight=(rng.standard_normal((6, 4, 3, 3)) * 0.6).astype(np.float32),
                            stride=1, padding=0, dilation=1, groups=1, bias=np.zeros(6, np.float32)),
        "sum": nir.SumPool2d(kernel_size=np.array([2, 2]), stride=np.array([2, 2]), padding=np.array([0, 0])),
        "scale": nir.Scale(scale=rng.uniform(0.5, 1.5, (6, 5, 5)).astype(np.float32)),
        "delay": nir.Delay(delay=np.full((6, 5, 5), 2 * dt)),
        "l2": lif((6, 5, 5), 0.6),
        "avg": nir.AvgPool2d(kernel_size=np.array([2, 2]), stride=np.array([1, 1]), padding=np.array([0, 0])),
        "flat": nir.Flatten(start_dim=0, end_dim=-1, input_type={"input": np.array([6, 4, 4])}),
        "lin": nir.Linear(weight=(rng.standard_normal((10, 96)) * 0.5).astype(np.float32)),
        "l3": lif((10,), 0.3),
        "out": nir.Output(output_type=np.array([10])),
    }
    chain = ["in", "conv", "l1", "conv2", "sum", "scale", "delay", "l2", "avg", "flat", "lin", "l3", "out"]
    nir.write(path, nir.NIRGraph(nodes=nodes, edges=list(zip(chain, chain[1:])), type_check=False))


def chain_of(g):
    """The node names from the Input to the Output (a chain)."""
    nxt = dict(g.edges)
    at = next(k for k, v in g.nodes.items() if isinstance(v, nir.Input))
    out = [at]
    while not isinstance(g.nodes[at], nir.Output):
        at = nxt[at]
        out.append(at)
    return out


NEURONS = (nir.LIF, nir.IF, nir.LI, nir.CubaLIF, nir.CubaLI, nir.Threshold)


def pair(v):
    v = np.atleast_1d(np.asarray(v)).astype(int).tolist()
    return tuple(v * 2 if len(v) == 1 else v)


def apply_node(node, x, dt):
    """A structural node on x [T, ...] (one sample's steps), in float64."""
    import torch
    t = torch.from_numpy(np.ascontiguousarray(x))
    if isinstance(node, nir.Affine):
        return x @ node.weight.astype(np.float64).T + node.bias
    if isinstance(node, nir.Linear):
        return x @ node.weight.astype(np.float64).T
    if isinstance(node, nir.Conv2d):
        b = None if node.bias is None else torch.from_numpy(np.asarray(node.bias, np.float64))
        return torch.nn.functional.conv2d(t, torch.from_numpy(node.weight.astype(np.float64)), b, pair(node.stride),
                                          pair(node.padding), pair(node.dilation), int(node.groups)).numpy()
    if isinstance(node, (nir.SumPool2d, nir.AvgPool2d)):
        k = pair(node.kernel_size)
        y = torch.nn.functional.avg_pool2d(t, k, pair(node.stride), pair(node.padding), count_include_pad=True)
        return (y * (k[0] * k[1]) if isinstance(node, nir.SumPool2d) else y).numpy()
    if isinstance(node, nir.Flatten):
        return x.reshape(x.shape[0], -1)
    if isinstance(node, nir.Scale):
        return x * node.scale.astype(np.float64)
    if isinstance(node, nir.Delay):
        d = int(round(float(np.unique(node.delay)[0]) / dt))
        out = np.zeros_like(x)
        out[d:] = x[:len(x) - d]
        return out
    raise AssertionError(f"no oracle for {type(node).__name__}")


def oracle(path, recording):
    g = nir.read(path)
    dt = 1e-4
    chain = chain_of(g)
    with h5py.File(recording, "r") as rec:
        meta = rec["meta"]
        T = int(meta.attrs["steps_per_sample"])
        dt_ms = float(meta.attrs["dt_ms"])
        S = int(meta["samples_committed"][()])
        reports = {p: (rec["report"][p]["data"][...], rec["report"][p]["mapping/node_ids"][:].astype(np.int64))
                   for p in rec["report"]}
        # Populations by layer (a chain read from NIR keeps snnsim's names
        # hidden/output; other graphs name them by node).
        pop_of_layer = {int(gr.attrs["layer"]): name for name, gr in meta["populations"].items()}
        in_shape = tuple(np.asarray(g.nodes[chain[0]].input_type["input"]).tolist())
        compared = spikes_seen = near = 0
        kinds = set()
        for s in range(S):
            steps, ids = sample_steps(rec, "input", s, T, dt_ms)
            x = np.zeros((T, int(np.prod(in_shape))))
            x[steps, ids] = 1.0
            x = x.reshape((T,) + in_shape)
            layer = 0
            for name in chain[1:-1]:
                nrn = g.nodes[name]
                if not isinstance(nrn, NEURONS):
                    x = apply_node(nrn, x, dt)
                    kinds.add(type(nrn).__name__)
                    continue
                layer += 1
                pop = pop_of_layer.get(layer, name)
                kind = type(nrn).__name__
                kinds.add(kind)
                spiking = kind not in ("LI", "CubaLI")
                shape = x.shape[1:]
                current = x.reshape(T, -1)
                n = current.shape[1]
                got = np.zeros((T, n), bool)
                if pop in rec["spikes"]:
                    st, si = sample_steps(rec, pop, s, T, dt_ms)
                    got[st, si] = True
                data, node_ids = reports[pop]
                assert np.array_equal(node_ids, np.arange(n)), f"{pop}: record every potential"
                v_rec = data[s * T:(s + 1) * T].astype(np.float64)
                p = {k: np.asarray(getattr(nrn, k), np.float64).reshape(-1) for k in
                     ("tau", "tau_mem", "tau_syn", "r", "v_leak", "v_threshold", "v_reset", "w_in", "threshold")
                     if hasattr(nrn, k) and getattr(nrn, k) is not None}
                tau = p.get("tau", p.get("tau_mem"))
                v = p["v_reset"] if "v_reset" in p else p.get("v_leak", np.zeros(n))
                i = np.zeros(n)
                for t in range(T):
                    u = current[t]
                    if kind in ("CubaLIF", "CubaLI"):
                        i = i + dt / p["tau_syn"] * (-i + p["w_in"] * u)
                        u = i
                    if kind == "Threshold":
                        h, th = u, p["threshold"]
                    elif kind == "IF":
                        h, th = v + dt * p["r"] * u, p["v_threshold"]
                    else:
                        h, th = v + dt / tau * (p["v_leak"] - v + p["r"] * u), p.get("v_threshold")
                    if spiking:
                        fire = h > th
                        clear = np.abs(h - th) > 1e-5
                        near += int((~clear).sum())
                        bad = clear & (fire != got[t])
                        if bad.any():
                            k = int(np.flatnonzero(bad)[0])
                            raise AssertionError(f"{pop} ({kind}): sample {s}, step {t}, neuron {k}: NIR's equations "
                                                 f"give {h[k]!r} (threshold {th[k]}) but snnsim "
                                                 f"{'spiked' if got[t, k] else 'did not spike'}")
                        after = np.where(got[t], p["v_reset"], h) if "v_reset" in p else h
                        check = clear
                    else:
                        assert not got.any(), f"{pop} ({kind}) emits no spikes, but the recording has some"
                        after, check = h, np.ones(n, bool)
                    off = check & (np.abs(after - v_rec[t]) > 1e-5 * np.maximum(1, np.abs(after)))
                    if off.any():
                        k = int(np.flatnonzero(off)[0])
                        raise AssertionError(f"{pop} ({kind}): sample {s}, step {t}, neuron {k}: v = {v_rec[t, k]!r} "
                                             f"but NIR's equations give {after[k]!r}")
                    compared += n
                    spikes_seen += int(got[t].sum())
                    v = v_rec[t]
                x = (got.astype(np.float64) if spiking else v_rec).reshape((T,) + shape)
        assert spikes_seen > 0, "no spikes: the check compared nothing"
        assert near <= compared // 1000, f"{near} of {compared} potentials near the threshold: too many to skip"
    print(f"{recording}: {compared} neuron-steps ({spikes_seen} spikes) through {', '.join(sorted(kinds))} follow "
          f"NIR's equations; {near} within 1e-5 of the threshold not compared")


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
    # A Delay of 10 steps (dt 1e-4 s) between the synapses and the neurons:
    # fine with T > 10, refused with T <= 10 (the output would never see the
    # input).
    nodes = {"in": nir.Input(input_type=np.array([784])),
             "a": nir.Affine(weight=np.full((10, 784), 0.01, np.float32), bias=np.zeros(10, np.float32)),
             "d": nir.Delay(delay=np.full(10, 10e-4)),
             "h": nir.LIF(tau=np.full(10, 2e-4), r=np.ones(10), v_leak=np.zeros(10), v_threshold=np.ones(10),
                          v_reset=np.zeros(10)),
             "out": nir.Output(output_type=np.array([10]))}
    nir.write(f"{folder}/delayed.nir", nir.NIRGraph(nodes=nodes, edges=[("in", "a"), ("a", "d"), ("d", "h"), ("h", "out")],
                                                    type_check=False))
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
    # A CubaLIF whose synaptic time constant is zero for one neuron.
    nodes = base()
    nodes["h"] = nir.CubaLIF(tau_syn=np.array([2e-4, 0, 2e-4, 2e-4]), tau_mem=np.full(4, 2e-4), r=np.ones(4),
                             v_leak=np.zeros(4), v_threshold=np.ones(4), v_reset=np.zeros(4))
    nir.write(f"{folder}/tau0.nir", nir.NIRGraph(nodes=nodes, edges=edges))
    # A recurrent edge without a delay (h feeds a back).
    nodes = base()
    nodes["rec"] = nir.Linear(weight=np.zeros((4, 4), np.float32))
    nir.write(f"{folder}/cycle.nir", nir.NIRGraph(nodes=nodes, edges=edges + [("h", "rec"), ("rec", "h")],
                                                  type_check=False))
    # A Conv2d whose stored weight takes 3 channels from a 1-channel image.
    conv = {"in": nir.Input(input_type=np.array([1, 28, 28])),
            "conv": nir.Conv2d(input_shape=(28, 28), weight=np.zeros((4, 3, 3, 3), np.float32), stride=1, padding=0,
                               dilation=1, groups=1, bias=np.zeros(4, np.float32)),
            "out": nir.Output(output_type=np.array([4, 26, 26]))}
    nir.write(f"{folder}/channels.nir", nir.NIRGraph(nodes=conv, edges=[("in", "conv"), ("conv", "out")],
                                                     type_check=False))
    # A Conv2d whose input_shape says 10 x 10 on a 28 x 28 image (it ran on
    # the image's shape without a word).
    conv["conv"] = nir.Conv2d(input_shape=(10, 10), weight=np.zeros((4, 1, 3, 3), np.float32), stride=1, padding=0,
                              dilation=1, groups=1, bias=np.zeros(4, np.float32))
    nir.write(f"{folder}/input_shape.nir", nir.NIRGraph(nodes=conv, edges=[("in", "conv"), ("conv", "out")],
                                                        type_check=False))


if __name__ == "__main__":
    commands = {"exported": exported, "foreign": foreign, "general": general, "structural": structural,
                "oracle": oracle, "bad": bad}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        raise SystemExit(__doc__)
    commands[sys.argv[1]](*sys.argv[2:])
