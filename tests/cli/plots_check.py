"""Checks the SVG plots of `snnsim analyze REC --plots DIR --plot-format svg`
against the recording itself (read with h5py), by parsing what PLplot's svg
driver drew: polylines (lines, ticks, filled polygons), <text> elements and
the colour bar's gradient. Nothing here trusts a number snnsim printed.

    plots_check.py RECORDING.h5 PLOTS_DIR FIRST COUNT [MANIFEST_PLOT.svg]

FIRST, COUNT: the samples of --raster. Exits 1 naming each failed check.

Coordinates: every element lies in one group whose transform flips y, so
points and text anchors are in PLplot's device coordinates, y upwards. A
plot's frame is the pair of long black horizontal edges that plbox draws;
its axes' scales come from the tick numbers (a <text> per major tick, its
anchor exactly at the tick).
"""
import re
import sys
import xml.etree.ElementTree as ET

import h5py
import numpy as np

NS = "{http://www.w3.org/2000/svg}"
PALETTE = ["#1F77B4", "#FF7F0E", "#2CA02C", "#D62728", "#9467BD", "#8C564B"]
BOUNDARY, BAND, WRONG, INK = "#787878", "#ECECEC", "#C81414", "#000000"
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)
    return ok


class Svg:
    def __init__(self, path):
        self.path = path
        root = ET.parse(path).getroot()
        self.lines, self.fills, self.texts = [], [], []
        self.gradients = root.iter(NS + "linearGradient")
        self.gradient_stops = [len(list(g.iter(NS + "stop"))) for g in self.gradients]
        for e in root.iter():
            if e.tag == NS + "polyline":
                pts = [tuple(map(float, p.split(","))) for p in e.get("points").split()]
                item = {"points": pts, "stroke": e.get("stroke"), "fill": e.get("fill")}
                (self.lines if e.get("fill") in (None, "none") else self.fills).append(item)
            elif e.tag == NS + "text":
                m = re.search(r"matrix\(([^)]*)\)", e.get("transform", ""))
                v = [float(x) for x in m.group(1).split()]
                self.texts.append({"text": "".join(e.itertext()).strip(), "x": v[4], "y": v[5],
                                   "anchor": e.get("text-anchor"), "fill": e.get("fill")})

    def frames(self):
        """Frames (left, right, bottom, top), top plot first."""
        edges = [l["points"] for l in self.lines if l["stroke"] == INK and len(l["points"]) == 2
                 and abs(l["points"][0][1] - l["points"][1][1]) < 1e-6
                 and abs(l["points"][0][0] - l["points"][1][0]) > 250]
        ys = sorted({round(p[0][1], 2) for p in edges}, reverse=True)
        out = []
        for top, bottom in zip(ys[0::2], ys[1::2]):
            xs = [x for p in edges if round(p[0][1], 2) in (top, bottom) for x in (p[0][0], p[1][0])]
            out.append((min(xs), max(xs), bottom, top))
        return out

    def scales(self, frame):
        """Linear maps device -> data for x and y, from the frame's tick numbers."""
        left, right, bottom, top = frame
        xt = [(float(t["text"]), t["x"]) for t in self.texts if t["anchor"] == "middle" and left - 1 <= t["x"] <= right + 1
              and bottom - 45 < t["y"] < bottom and number(t["text"])]
        yt = [(float(t["text"]), t["y"]) for t in self.texts if t["anchor"] == "end" and left - 60 < t["x"] < left
              and bottom - 1 <= t["y"] <= top + 1 and number(t["text"])]
        check(len(xt) >= 2 and len(yt) >= 2, f"{self.path}: tick numbers on both axes ({len(xt)} x, {len(yt)} y)")
        fx = np.polyfit([p for _, p in xt], [v for v, _ in xt], 1)
        fy = np.polyfit([p for _, p in yt], [v for v, _ in yt], 1)
        return (lambda x: np.polyval(fx, x)), (lambda y: np.polyval(fy, y)), xt, yt


def number(s):
    try:
        float(s)
        return True
    except ValueError:
        return False


def inside(frame, x, y, margin):
    left, right, bottom, top = frame
    return left + margin <= x <= right - margin and bottom + margin <= y <= top - margin


def recording(path):
    f = h5py.File(path, "r")
    r = {"labels": f["samples/label"][:].astype(int), "predicted": f["samples/predicted"][:].astype(int),
         "by_step": f["samples/prediction_by_step"][:].astype(int), "pops": {}}
    r["samples"], r["T"] = r["by_step"].shape
    r["t_start"] = f["samples/t_start_ms"][:]
    r["dt"] = float((f["samples/t_stop_ms"][0] - f["samples/t_start_ms"][0]) / r["T"])
    for name in sorted(f["meta/populations"].keys()):
        r["pops"][name] = {"ptr": f["samples/spike_ptr/" + name][:].astype(int),
                           "ids": f["spikes/" + name + "/node_ids"][:].astype(int),
                           "t": f["spikes/" + name + "/timestamps"][:],
                           "recorded": f["meta/populations/" + name + "/recorded_node_ids"][:].astype(int)}
    return r


def check_raster(svg, r, first, count):
    frames = svg.frames()
    check(len(frames) == len(r["pops"]), f"raster: one frame per population ({len(frames)} for {len(r['pops'])})")
    T, dt = r["T"], r["dt"]
    shown = min(count, r["samples"] - first)
    for i, (name, p) in enumerate(r["pops"].items()):
        frame = frames[i]
        fx, fy, _, _ = svg.scales(frame)
        left, right, bottom, top = frame
        lo, hi = p["ptr"][first], p["ptr"][first + shown]
        want = sorted(zip(np.rint(p["t"][lo:hi] / dt).astype(int), p["ids"][lo:hi]))
        ticks = [l["points"] for l in svg.lines if l["stroke"] == PALETTE[i] and len(l["points"]) == 2
                 and inside(frame, l["points"][0][0], l["points"][0][1], -1e9)]
        ticks = [t for t in ticks if bottom - 5 < t[0][1] < top + 5]
        check(len(ticks) == hi - lo, f"raster {name}: {len(ticks)} spike ticks drawn, the file has {hi - lo}")
        got = sorted((int(round(fx(t[0][0]) / dt)), int(round(fy(0.5 * (t[0][1] + t[1][1]))))) for t in ticks)
        check(got == [(int(a), int(b)) for a, b in want], f"raster {name}: the ticks are not at the file's (time, id)")
        check(all(inside(frame, x, y, 1.0) for t in ticks for x, y in t),
              f"raster {name}: a spike tick touches or crosses the frame")
        # The extreme places a spike can take: neuron 0 and the top neuron, the
        # first step of the first sample and the last of the last.
        top_id = int(p["recorded"].max())
        inv_x = np.polyfit([fx(left), fx(right)], [left, right], 1)
        inv_y = np.polyfit([fy(bottom), fy(top)], [bottom, top], 1)
        t0, t1 = r["t_start"][first], r["t_start"][first + shown - 1] + (T - 1) * dt
        corners = [(np.polyval(inv_x, t), np.polyval(inv_y, n)) for t in (t0, t1) for n in (0, top_id)]
        check(all(inside(frame, x, y, 3.0) for x, y in corners),
              f"raster {name}: neuron 0 / neuron {top_id} at the first / last step would touch the frame: {corners}")
        bounds = sorted(fx(l["points"][0][0]) for l in svg.lines if l["stroke"] == BOUNDARY and len(l["points"]) == 2
                        and left <= l["points"][0][0] <= right and bottom - 1 <= l["points"][0][1] <= top + 1)
        want_bounds = [r["t_start"][first] + k * T * dt - dt / 2 for k in range(shown + 1)]
        check(len(bounds) == shown + 1 and np.allclose(bounds, want_bounds, atol=dt / 20),
              f"raster {name}: sample boundaries at {bounds}, expected half a step before each sample: {want_bounds}")
        for s in range(shown):  # each spike between its own sample's boundaries, clear of them
            a, b = p["ptr"][first + s], p["ptr"][first + s + 1]
            ok = all(want_bounds[s] + dt / 4 < t < want_bounds[s + 1] - dt / 4 for t in p["t"][a:b])
            drawn = [fx(t[0][0]) for t in ticks]
            ok = ok and all(min(abs(x - bd) for bd in bounds) > dt / 4 for x in drawn)
            check(ok, f"raster {name}: a spike column of sample {first + s} lies on a boundary")
        bands = [f for f in svg.fills if f["fill"] == BAND and inside(frame, *f["points"][0], -2)]
        check(len(bands) == shown // 2, f"raster {name}: {len(bands)} shaded samples, expected every other ({shown // 2})")
        notes = sorted((t for t in svg.texts if re.fullmatch(r"\d+ ?\u2192 ?\d+", t["text"]) and top < t["y"] < top + 40), key=lambda t: t["x"])
        want_notes = [f"{r['labels'][first + s]} \u2192 {r['predicted'][first + s]}" for s in range(shown)]
        check([t["text"].replace("\u2192", " \u2192 ").replace("  ", " ") for t in notes] == want_notes,
              f"raster {name}: labels above the samples {[t['text'] for t in notes]}, expected {want_notes}")
        for s, t in enumerate(notes[:shown]):
            wrong = r["labels"][first + s] != r["predicted"][first + s]
            centre = 0.5 * (want_bounds[s] + want_bounds[s + 1])
            check(abs(fx(t["x"]) - centre) < dt and (t["fill"] == WRONG) == wrong,
                  f"raster {name}: the label of sample {first + s} is not centred on it or not red exactly when wrong")


def check_rates(svg, r):
    frames = svg.frames()
    check(len(frames) == len(r["pops"]), "rates: one frame per population")
    seconds = r["samples"] * r["T"] * r["dt"] / 1000.0
    for i, (name, p) in enumerate(r["pops"].items()):
        frame = frames[i]
        fx, fy, _, _ = svg.scales(frame)
        left, right, bottom, top = frame
        counts = np.array([np.sum(p["ids"] == n) for n in p["recorded"]])
        rates = counts / seconds
        width = max(rates.max(), 1e-9) / 30
        want = np.bincount(np.minimum(29, (rates / width).astype(int)), minlength=30)
        bars = [f["points"] for f in svg.fills if f["fill"] == PALETTE[i] and inside(frame, *f["points"][0], -1)]
        drawn = np.zeros(30, dtype=int)
        for b in bars:
            xs, ys = [q[0] for q in b], [q[1] for q in b]
            k = int(round(fx(min(xs)) / width))
            drawn[min(max(k, 0), 29)] += int(round(fy(max(ys)) - fy(min(ys))))
            check(min(xs) > left + 2 and max(xs) < right - 2 and max(ys) < top - 2,
                  f"rates {name}: a bar touches the frame ({min(xs)}..{max(xs)} in {left}..{right}, top {max(ys)} of {top})")
        check(len(bars) == int(np.count_nonzero(want)), f"rates {name}: {len(bars)} bars, {np.count_nonzero(want)} non-empty bins")
        check(list(drawn) == list(want), f"rates {name}: bar heights {list(drawn)}, histogram of the file {list(want)}")
        check(drawn.sum() == len(p["recorded"]), f"rates {name}: the bars count {drawn.sum()} of {len(p['recorded'])} neurons")


def curve(svg, colour, frame):
    return [l["points"] for l in svg.lines if l["stroke"] == colour and len(l["points"]) > 2
            and inside(frame, *l["points"][0], -1)]


def check_time_plots(psth, acc, r):
    T, dt = r["T"], r["dt"]
    (pf,), (af,) = psth.frames() or [None], acc.frames() or [None]
    check(np.allclose(pf, af, atol=0.05), f"psth and accuracy frames differ: {pf} vs {af}")
    px, py, pxt, _ = psth.scales(pf)
    ax, ay, axt, _ = acc.scales(af)
    check(sorted(pxt) == sorted(axt), f"psth and accuracy have different x ticks: {pxt} vs {axt}")
    lines = {}
    for i, (name, p) in enumerate(r["pops"].items()):
        c = curve(psth, PALETTE[i], pf)
        check(len(c) == 1 and len(c[0]) == T, f"psth {name}: {len(c)} curves of {[len(x) for x in c]} points, expected one of T = {T}")
        if len(c) != 1 or len(c[0]) != T:
            continue
        lines[name] = c[0]
        step = np.zeros(T)
        for s in range(r["samples"]):
            a, b = p["ptr"][s], p["ptr"][s + 1]
            k = np.rint((p["t"][a:b] - r["t_start"][s]) / dt).astype(int)
            step += np.bincount(k, minlength=T)
        want = step / (r["samples"] * len(p["recorded"])) * 1000.0 / dt
        got = [py(q[1]) for q in c[0]]
        check(np.allclose([px(q[0]) for q in c[0]], np.arange(1, T + 1), atol=0.02), f"psth {name}: points not at t = 1..T")
        check(np.allclose(got, want, atol=0.01 * max(want.max(), 1)), f"psth {name}: {got} vs the file's {list(want)}")
        check(all(inside(pf, x, y, 1.0) for x, y in c[0]), f"psth {name}: a point touches the frame")
    legend = [t for t in psth.texts if t["text"] in r["pops"]]
    check(len(legend) == len(r["pops"]) and all(t["x"] > pf[1] for t in legend),
          f"psth: the legend ({[(t['text'], t['x']) for t in legend]}) is not outside the frame (right edge {pf[1]})")
    c = curve(acc, PALETTE[0], af)
    check(len(c) == 1 and len(c[0]) == T, f"accuracy: {len(c)} curves, expected one of T = {T} points")
    if len(c) == 1 and len(c[0]) == T:
        want = (r["by_step"] == r["labels"][:, None]).mean(axis=0)
        check(np.allclose([ay(q[1]) for q in c[0]], want, atol=0.005), f"accuracy: drawn {[ay(q[1]) for q in c[0]]}, file {list(want)}")
        first = next(iter(lines.values()), None)
        check(first is not None and np.allclose([q[0] for q in c[0]], [q[0] for q in first], atol=0.05),
              "accuracy: its points are not at the PSTH's x positions (same time axis)")
        check(all(inside(af, x, y, 1.0) for x, y in c[0]), "accuracy: a point touches the frame")


def check_confusion(svg, r):
    (frame,) = svg.frames() or [None]
    left, right, bottom, top = frame
    cols = {int(t["text"]): t["x"] for t in svg.texts if t["anchor"] == "middle" and bottom - 45 < t["y"] < bottom
            and t["text"].isdigit()}
    rows = {int(t["text"]): t["y"] for t in svg.texts if t["anchor"] == "end" and left - 60 < t["x"] < left
            and t["text"].isdigit()}
    want = np.zeros((len(cols), len(cols)), dtype=int)  # the classes: one column each
    for y, p in zip(r["labels"], r["predicted"]):
        want[y, p] += 1
    check(sorted(cols) == list(range(len(want))) and sorted(rows) == list(range(len(want))),
          f"confusion: tick numbers {sorted(cols)} / {sorted(rows)}")
    check(all(cols[k] < cols[k + 1] for k in range(len(cols) - 1)), "confusion: predicted classes do not run left to right from 0")
    check(all(rows[k] > rows[k + 1] for k in range(len(rows) - 1)), "confusion: labels do not run top to bottom from 0")
    got = np.zeros_like(want)
    for t in svg.texts:
        if t["text"].isdigit() and inside(frame, t["x"], t["y"], 1):
            c = min(cols, key=lambda k: abs(cols[k] - t["x"]))
            y = min(rows, key=lambda k: abs(rows[k] - t["y"]))
            got[y, c] += int(t["text"])
    check((got == want).all(), f"confusion: cell numbers\n{got}\nthe file's table\n{want}")
    # Shade: darker with the share of the label; the top-left cell is label 0, predicted 0.
    share = want / np.maximum(want.sum(axis=1, keepdims=True), 1)
    cells = [f for f in svg.fills if inside(frame, *np.mean(f["points"], axis=0), 1)]
    check(len(cells) == want.size, f"confusion: {len(cells)} cells, expected {want.size}")
    shade = {}
    for f in cells:
        cx, cy = np.mean(f["points"][:4], axis=0)
        c = min(cols, key=lambda k: abs(cols[k] - cx))
        y = min(rows, key=lambda k: abs(rows[k] - cy))
        rgb = [int(f["fill"][i:i + 2], 16) for i in (1, 3, 5)]
        shade[(y, c)] = sum(rgb)
    order = sorted(shade, key=lambda k: share[k])
    check(all(shade[a] >= shade[b] for a, b in zip(order, order[1:]) if share[a] < share[b]),
          "confusion: a cell with a larger share of its label is not darker")
    check(svg.gradient_stops and max(svg.gradient_stops) > 10, "confusion: no colour bar gradient")
    label = [t for t in svg.texts if t["text"].startswith("share of the label's samples")]
    check(len(label) == 1 and label[0]["x"] > right, "confusion: the colour bar's label is missing or not right of the matrix")
    ends = {t["text"]: t["y"] for t in svg.texts if t["x"] > right and number(t["text"])}
    check("0.0" in ends and "1.0" in ends and ends["0.0"] < ends["1.0"], f"confusion: the colour bar's scale 0.0..1.0: {ends}")


def main():
    rec, folder, first, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    r = recording(rec)
    check_raster(Svg(folder + "/raster.svg"), r, first, count)
    check_rates(Svg(folder + "/rates.svg"), r)
    check_time_plots(Svg(folder + "/psth.svg"), Svg(folder + "/accuracy.svg"), r)
    check_confusion(Svg(folder + "/confusion.svg"), r)
    if len(sys.argv) > 5:  # a sweep's plot: the legend outside the frame, every point inside
        svg = Svg(sys.argv[5])
        (frame,) = svg.frames()
        named = [t for t in svg.texts if "=" in t["text"] and t["x"] > frame[1]]
        check(len(named) >= 1, "manifest plot: no legend right of the frame")
        pts = [q for l in svg.lines if l["stroke"] in PALETTE and l["points"][0][0] < frame[1] for q in l["points"]]
        check(pts and all(inside(frame, x, y, 1.0) for x, y in pts), "manifest plot: a point touches the frame")
    print(f"{len(failures)} plot checks failed" if failures else "all plot checks passed")
    sys.exit(1 if failures else 0)


main()
