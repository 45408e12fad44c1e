#!/usr/bin/env python3
"""NIR exchange with the real peers, for tests/cli/nir_peers_test.sh: small
networks trained for a few steps in SpikingJelly 2.0 and snnTorch 1.0,
exported by their own NIR exporters, run by snnsim; and snnsim's export
imported into snnTorch. Runs in .venv-peers (scripts/setup.sh).

    peer_nir.py make FRAMEWORK ARCH DIR
        FRAMEWORK spikingjelly or snntorch, ARCH fc or conv:
          fc:   Linear 784-32, LIF, Linear 32-10, LIF
          conv: Conv2d 1-4 k3 on [1, 28, 28], LIF, AvgPool2d 2, Flatten,
                Linear 676-10, LIF
        hard reset to 0, threshold 1 (SpikingJelly: LIFNode tau 2 with
        decay_input; snnTorch: Leaky with per-neuron beta, reset "zero").
        Trains 5 Adam steps on random spikes, writes DIR/net.nir with the
        framework's exporter, DIR/model.pt and DIR/layers.json (the NIR node
        name of each neuron layer, its threshold).
    peer_nir.py compare FRAMEWORK ARCH DIR RECORDING
        runs the trained network of DIR on the input spikes snnsim recorded
        and compares every neuron layer's spikes with snnsim's. Each layer
        gets snnsim's spikes of the layer before as its input, so that a
        difference does not spread. Spikes must agree except where the side
        that did not fire had its potential within 1e-4 of the threshold
        (the synapses' float32 sums round differently: snnsim's are
        fixed-order, the peers' are MKL's or oneDNN's); after such a tie the
        neuron is left out for the rest of the sample.
    peer_nir.py import-snntorch NIR_FILE RECORDING
        imports snnsim's export with snntorch.import_from_nir and runs each
        of its layers on the spikes snnsim recorded for the layer before, as
        compare does: its spikes must be snnsim's but at ties.
Nothing here calls snnsim; snnsim's recordings are read with h5py.
"""
import json
import os
import sys

import h5py
import nir
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nir_check import sample_steps  # noqa: E402  (a recording's spikes of one sample)

T_TRAIN = 6
TIE = 1e-4


class Recording:
    """snnsim's recorded spikes [S, T, n] and potentials [S, T, n] by population."""

    def __init__(self, path):
        self.f = h5py.File(path, "r")
        meta = self.f["meta"]
        self.T = int(meta.attrs["steps_per_sample"])
        self.dt = float(meta.attrs["dt_ms"])
        self.S = int(meta["samples_committed"][()])

    def spikes(self, pop, n):
        out = np.zeros((self.S, self.T, n), np.float32)
        for s in range(self.S):
            st, si = sample_steps(self.f, pop, s, self.T, self.dt)
            out[s, st, si] = 1
        return out

    def potentials(self, pop, n):
        r = self.f["report"][pop]
        assert np.array_equal(r["mapping/node_ids"][:], np.arange(n)), f"{pop}: record every potential"
        return r["data"][...].reshape(self.S, self.T, n).astype(np.float64)


def random_spikes(shape, seed):
    return torch.from_numpy((np.random.default_rng(seed).random(shape) < 0.3).astype(np.float32))


# ---- SpikingJelly 2.0 ----------------------------------------------------

def sj_build(arch):
    from spikingjelly.activation_based import layer, neuron

    def lif():
        return neuron.LIFNode(tau=2.0, decay_input=True, v_threshold=1.0, v_reset=0.0, step_mode="m",
                              store_v_seq=True)
    if arch == "fc":
        return torch.nn.Sequential(layer.Linear(784, 32, step_mode="m"), lif(), layer.Linear(32, 10, step_mode="m"),
                                   lif())
    return torch.nn.Sequential(layer.Conv2d(1, 4, 3, step_mode="m"), lif(), layer.AvgPool2d(2, step_mode="m"),
                               layer.Flatten(step_mode="m"), layer.Linear(4 * 13 * 13, 10, step_mode="m"), lif())


def sj_reset(net):
    from spikingjelly.activation_based import functional
    functional.reset_net(net)


def sj_forward(net, x):  # x [T, B, ...]
    sj_reset(net)
    return net(x)


def sj_export(net, in_shape):
    from spikingjelly.activation_based.nir_exchange import export_to_nir
    sj_reset(net)
    return export_to_nir(net, torch.zeros((T_TRAIN, 1) + in_shape), dt=1e-4)


def sj_is_neuron(m):
    from spikingjelly.activation_based import neuron
    return isinstance(m, neuron.BaseNode)


def sj_segment(mods, x):
    """Runs modules (the last a neuron layer) on x [T, B, ...]: spikes and the
    potential after each step (the charge where it did not fire)."""
    for m in mods:
        x = m(x)
    return x, mods[-1].v_seq


# ---- snnTorch 1.0 --------------------------------------------------------

def st_build(arch):
    import snntorch as snn

    def leaky(shape):
        g = torch.Generator().manual_seed(len(shape))
        beta = 0.8 + 0.15 * torch.rand(shape, generator=g)  # a time constant per neuron
        return snn.Leaky(beta=beta, threshold=torch.ones(shape), init_hidden=True, reset_mechanism="zero")
    if arch == "fc":
        return torch.nn.Sequential(torch.nn.Linear(784, 32), leaky((32,)), torch.nn.Linear(32, 10), leaky((10,)))
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), leaky((4, 26, 26)), torch.nn.AvgPool2d(2), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 13 * 13, 10), leaky((10,)))


def st_reset(net):
    import snntorch as snn
    for m in net.modules():
        if isinstance(m, snn.Leaky):
            m.mem = torch.zeros(0)


def st_is_neuron(m):
    import snntorch as snn
    return isinstance(m, snn.Leaky)


def st_forward(net, x):
    st_reset(net)
    return torch.stack([net(x[t]) for t in range(x.shape[0])])


def st_export(net, in_shape):
    from snntorch.export_nir import export_to_nir
    st_reset(net)
    g = export_to_nir(net, torch.zeros((1,) + in_shape), ignore_dims=[0])
    st_reset(net)
    return g


def st_segment(mods, x):
    """Step by step; snnTorch's Leaky keeps the potential before its reset
    (the reset lands on the next step), which is the charge either way."""
    st_reset(torch.nn.Sequential(*mods))
    spikes, mems = [], []
    for t in range(x.shape[0]):
        y = x[t]
        for m in mods:
            y = m(y)
        spikes.append(y)
        mems.append(mods[-1].mem.clone())
    return torch.stack(spikes), torch.stack(mems)


FRAMEWORKS = {
    "spikingjelly": (sj_build, sj_forward, sj_export, sj_is_neuron, sj_segment),
    "snntorch": (st_build, st_forward, st_export, st_is_neuron, st_segment),
}


def in_shape_of(arch):
    return (784,) if arch == "fc" else (1, 28, 28)


def make(framework, arch, folder):
    build, forward, export, is_neuron, _ = FRAMEWORKS[framework]
    torch.manual_seed(7)
    net = build(arch)
    shape = in_shape_of(arch)
    with torch.no_grad():  # larger weights than the default init, so that every layer spikes
        for m in net.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)):
                m.weight.mul_(4.0 if arch == "fc" else 3.0)
                m.bias.add_(0.05)
    opt = torch.optim.Adam(net.parameters(), lr=5e-3)
    x = random_spikes((T_TRAIN, 8) + shape, 1)
    y = torch.arange(8) % 10
    for _ in range(5):
        out = forward(net, x)
        target = torch.full((8, 10), 0.05)
        target[torch.arange(8), y] = 0.5
        loss = torch.nn.functional.mse_loss(out.mean(0), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    g = export(net, shape)
    os.makedirs(folder, exist_ok=True)
    nir.write(os.path.join(folder, "net.nir"), g)
    # The neuron layers' NIR names: the exporters name nodes by module index.
    written = nir.read(os.path.join(folder, "net.nir"))
    names = [n for n in written.nodes if isinstance(written.nodes[n], nir.LIF)]
    index = [i for i, m in enumerate(net) if is_neuron(m)]
    assert len(names) == len(index), (names, index)
    names = sorted(names, key=lambda n: int(n.lstrip("_")))
    layers = [{"node": n, "module": i, "shape": list(written.nodes[n].v_threshold.shape),
               "neurons": int(np.prod(written.nodes[n].v_threshold.shape))} for n, i in zip(names, index)]
    torch.save(net.state_dict(), os.path.join(folder, "model.pt"))
    with open(os.path.join(folder, "layers.json"), "w") as f:
        json.dump(layers, f)
    print(f"{framework} {arch}: trained 5 steps (loss {loss.item():.4f}), exported {len(written.nodes)} nodes: "
          + ", ".join(f"{k} {type(v).__name__}" for k, v in written.nodes.items()))


def compare_layer(name, ours, v_ours, theirs, v_theirs, thr_ours=1.0, thr_theirs=1.0):
    """ours/theirs [S, T, n] spikes; v_* the potentials after each step, each
    side's against its own threshold (an importer may rescale potentials).
    Returns (compared neuron-steps, ties)."""
    S, T, n = ours.shape
    alive = np.ones((S, n), bool)  # neurons not yet past a tie in this sample
    compared = ties = 0
    for t in range(T):
        differ = (ours[:, t] != theirs[:, t]) & alive
        if differ.any():
            # The side that did not fire kept its charge: it must lie at its threshold.
            margin = np.where(ours[:, t] > 0, (v_theirs[:, t] - thr_theirs) / thr_theirs,
                              (v_ours[:, t] - thr_ours) / thr_ours)
            bad = differ & ~(np.abs(margin) <= TIE)
            if bad.any():
                s, k = (int(i[0]) for i in np.nonzero(bad))
                raise AssertionError(f"{name}: sample {s}, step {t}, neuron {k}: snnsim "
                                     f"{'spiked' if ours[s, t, k] else 'did not spike'}, the peer "
                                     f"{'spiked' if theirs[s, t, k] else 'did not'}; the quiet side's potential "
                                     f"is {margin[s, k]:+.3g} of its threshold away from it")
            ties += int(differ.sum())
        compared += int(alive.sum())
        alive &= ~differ
    return compared, ties


def compare(framework, arch, folder, recording):
    build, _, _, is_neuron, segment = FRAMEWORKS[framework]
    net = build(arch)
    net.load_state_dict(torch.load(os.path.join(folder, "model.pt")))
    with open(os.path.join(folder, "layers.json")) as f:
        layers = json.load(f)
    rec = Recording(recording)
    shape = in_shape_of(arch)
    x = rec.spikes("input", 784).reshape((rec.S, rec.T) + shape)
    start = 0
    total = ties = spikes = 0
    with torch.no_grad():
        for layer in layers:
            mods = list(net)[start:layer["module"] + 1]
            start = layer["module"] + 1
            n = layer["neurons"]
            inp = torch.from_numpy(np.ascontiguousarray(np.swapaxes(x, 0, 1)))  # [T, S, ...]
            s, v = segment(mods, inp)
            theirs = np.swapaxes(s.reshape(rec.T, rec.S, n).numpy(), 0, 1)
            v_theirs = np.swapaxes(v.reshape(rec.T, rec.S, n).double().numpy(), 0, 1)
            ours = rec.spikes(layer["node"], n)
            c, k = compare_layer(f"{framework} {arch} layer {layer['node']}", ours, rec.potentials(layer["node"], n),
                                 theirs, v_theirs)
            total += c
            ties += k
            spikes += int(ours.sum())
            assert ours.sum() > 0, f"layer {layer['node']}: no spikes, nothing compared"
            x = ours.reshape([rec.S, rec.T] + layer["shape"])  # the next layer sees snnsim's spikes
    assert ties <= total // 1000, f"{ties} ties of {total}: too many to be rounding"
    print(f"{framework} {arch}: {total} neuron-steps ({spikes} spikes) equal to snnsim's; {ties} ties at the threshold")


def import_snntorch(path, recording):
    from snntorch.import_nir import import_from_nir
    g = nir.read(path)
    chain = dict(g.edges)
    at = next(k for k, v in g.nodes.items() if isinstance(v, nir.Input))
    layers = []  # (synapse, neuron) node names
    while not isinstance(g.nodes[chain[at]], nir.Output):
        layers.append((chain[at], chain[chain[at]]))
        at = chain[chain[at]]
    net = import_from_nir(g)
    rec = Recording(recording)
    names = {int(gr.attrs["layer"]): name for name, gr in rec.f["meta/populations"].items()}
    x = rec.spikes("input", 784)
    total = ties = spikes = 0
    with torch.no_grad():
        for i, (syn, neu) in enumerate(layers):
            mods = [net.get_submodule(syn), net.get_submodule(neu)]
            n = int(np.prod(g.nodes[neu].v_threshold.shape))
            s, v = st_segment(mods, torch.from_numpy(np.ascontiguousarray(np.swapaxes(x, 0, 1))))
            theirs = np.swapaxes(s.numpy(), 0, 1)
            v_theirs = np.swapaxes(v.double().numpy(), 0, 1)
            pop = names[i + 1]
            ours = rec.spikes(pop, n)
            thr = float(np.unique(g.nodes[neu].v_threshold)[0])
            c, k = compare_layer(f"snntorch import, layer {neu}", ours, rec.potentials(pop, n), theirs, v_theirs,
                                 thr, float(mods[1].threshold.reshape(-1)[0]))
            total += c
            ties += k
            spikes += int(ours.sum())
            assert ours.sum() > 0, f"layer {neu}: no spikes, nothing compared"
            x = ours
    assert ties <= total // 1000, f"{ties} ties of {total}: too many to be rounding"
    print(f"snntorch.import_from_nir of {os.path.basename(path)}: {total} neuron-steps ({spikes} spikes) equal to "
          f"snnsim's; {ties} ties at the threshold")


if __name__ == "__main__":
    commands = {"make": make, "compare": compare, "import-snntorch": import_snntorch}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        raise SystemExit(__doc__)
    commands[sys.argv[1]](*sys.argv[2:])
