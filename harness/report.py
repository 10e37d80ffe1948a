"""The run report: ``report.html`` beside ``results.json``, one self-contained page.

What it shows, from the run directory alone (history, results, node logs):

- the verdict and each checker's result;
- every anomaly class with its examples; each history index in an example
  links to that operation in the operation table of the page;
- plots (matplotlib, PNG embedded as data URIs): latency over time (points
  coloured ok / fail / info), latency quantiles per window, throughput over
  time, availability per window, and per node what a fault package sets
  (its ``series``: the clock offsets the clock nemesis applied);
  fault intervals are shaded on every time plot, one colour per fault kind;
- for a key that is not linearizable, its counterexample drawn as
  Porcupine draws one: processes as rows, each operation a bar from its
  call to its return, the longest linearizable prefix numbered in
  linearization order, the operation that cannot be placed after it in
  red, and the operations concurrent with it in grey;
- every planned fault step, whether it happened (and on which nodes) or was
  skipped (and why), and the gates that kept a vacuous run from reading valid;
- each example of a queue anomaly in one plain sentence (what was sent,
  acknowledged, read, lost, with the times of the operations) above its JSON;
- node log lines around each anomaly's operations, each line shown once (the
  node logs carry wall clock times; ``history-start.json`` ties them to the
  history's time axis), and every traceback found in a node log.

The history is streamed, never held whole (``harness.frames``): the scatter
plot shows a uniform sample of at most ``MAX_POINTS`` operations; windows,
rates and quantiles use every operation, the quantiles read from a
per-window latency histogram (bins 2.3 % wide); a run longer than
``MAX_WINDOWS`` windows gets wider windows.
"""
from __future__ import annotations

import base64
import html
import io
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from checkers.consistency_models import sentence as consistency_sentence
from checkers.queue import cycle_proof
from nemesis.packages import report_kinds, report_series
from node_image.coverage import EVENTS

MAX_POINTS = 100_000
MAX_WINDOWS = 2_000  # a plot is about 1,000 pixels wide
# The nemesis rows that open a fault (row -> package), that close faults (row -> packages),
# and each package's colour: each fault package names its own (nemesis.package). A
# workload's restart of every node is a moment, not a fault.
OPENS, CLOSES, FAULT_COLOURS = report_kinds()
SERIES = report_series()
FAULT_COLOURS["restart-all"] = "#bab0ac"
TYPE_COLOURS = {"ok": "#2ca02c", "fail": "#d62728", "info": "#ff7f0e"}
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def _value(v):
    """A row's value: Parquet keeps it as JSON text, JSON lines as the value itself."""
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


# A fail with one of these errors is the service's definite answer (a cas whose expected value
# did not match the register), not the service being unavailable.
ANSWERED_FAILS = ("cas-mismatch",)


def _ops(pairs: pd.DataFrame) -> pd.DataFrame:
    """Completed operations of ``frames.pairs``: start and latency in seconds, type, f and
    ``answered`` (ok, or a fail in ``ANSWERED_FAILS``)."""
    p = pairs[pairs["type"] != "open"]
    ops = pd.DataFrame({"index": p["index"].astype(int), "start_s": p["start"] / 1e9,
                        "latency_ms": (p["end"] - p["start"]) / 1e6, "type": p["type"],
                        "f": p["f"], "process": p["process"]})
    ops["answered"] = (ops["type"] == "ok") | ((ops["type"] == "fail")
                                               & p["error"].isin(ANSWERED_FAILS))
    return ops


def operations(df: pd.DataFrame) -> pd.DataFrame:
    """One row per completed client operation of the history rows ``df`` (see ``_ops``)."""
    from .frames import COLUMNS, pairs
    df = df.assign(**{c: None for c in COLUMNS if c not in df})
    found = [o for o in (_ops(p) for p in pairs([df])) if len(o)]
    ops = pd.concat(found) if found else _ops(pd.DataFrame(columns=["index", "start", "end",
                                                                    "type", "f", "process",
                                                                    "error"]))
    return ops.sort_values("start_s").reset_index(drop=True)


def fault_intervals(df: pd.DataFrame, end_s: float | None = None
                    ) -> list[tuple[str, float, float, str]]:
    """(kind, start s, end s, label) for every fault, from the nemesis rows of ``df``; a fault
    never closed lasts to ``end_s`` (the history's end)."""
    nem = df[(df["process"] == "nemesis") & (df["type"] == "info")]
    if end_s is None:
        end_s = float(df["time"].max()) / 1e9 if len(df) else 0.0
    open_: dict[tuple, tuple[float, str]] = {}
    out = []
    for _, r in nem.iterrows():
        t = r["time"] / 1e9
        value = _value(r["value"]) or {}
        nodes = value.get("nodes") if isinstance(value, dict) else None
        f = r["f"]
        if f in OPENS:
            kind = OPENS[f]
            label = f"{f} {value.get('target') or value.get('shape') or ''} {nodes or ''}".strip()
            for n in (nodes or [None]):
                open_.setdefault((kind, n), (t, label))
        elif f in CLOSES or f == "heal":
            kinds = CLOSES.get(f, tuple(FAULT_COLOURS))
            for key in [k for k in open_ if k[0] in kinds and
                        (f == "heal" or nodes is None or k[1] is None or k[1] in nodes)]:
                start, label = open_.pop(key)
                out.append((key[0], start, t, label))
        elif f == "restart-all":
            out.append(("restart-all", t, t + 0.5, "restart-all"))
    for (kind, _), (start, label) in open_.items():
        out.append((kind, start, end_s, label))
    merged: dict[tuple, tuple] = {}
    for kind, start, end, label in out:  # one band per kind and interval, not per node
        key = (kind, round(start, 1))
        merged[key] = (kind, start, max(end, merged.get(key, (0, 0, end))[2]), label)
    return sorted(merged.values(), key=lambda x: x[1])


class Series:
    """Per time window, from operations added a batch at a time (``add``), in memory that does
    not grow with the history: completions by type, answered ones, and a latency histogram
    (log bins of 2.3 %; quantiles are read from it, the maximum is kept exactly); plus a
    uniform sample of at most ``MAX_POINTS`` operations for the scatter plot. A run longer
    than ``MAX_WINDOWS`` windows gets wider windows."""

    EDGES = np.logspace(-3, 7, 1001)  # ms

    def __init__(self, end_s: float, window_s: float, seed: int = 1) -> None:
        self.window_s = max(window_s, end_s / MAX_WINDOWS)
        n = int(end_s // self.window_s) + 2
        self.hist = np.zeros((n, len(self.EDGES) + 1), np.int32)
        self.max = np.full(n, np.nan)
        self.count = np.zeros((n, len(TYPE_COLOURS)), np.int64)
        self.answered = np.zeros(n, np.int64)
        self.rng = np.random.default_rng(seed)
        self.keep = 1.0
        self.sample: list[pd.DataFrame] = []
        self.sampled = 0
        self.ops = 0

    def add(self, ops: pd.DataFrame) -> None:
        if not len(ops):
            return
        self.ops += len(ops)
        w = np.clip((ops["start_s"].to_numpy() // self.window_s).astype(np.int64), 0,
                    len(self.max) - 1)
        lat = ops["latency_ms"].to_numpy(dtype=float)
        np.add.at(self.hist, (w, np.searchsorted(self.EDGES, lat)), 1)
        np.fmax.at(self.max, w, lat)
        for j, typ in enumerate(TYPE_COLOURS):
            self.count[:, j] += np.bincount(w[(ops["type"] == typ).to_numpy()],
                                            minlength=len(self.max))
        self.answered += np.bincount(w[ops["answered"].to_numpy(dtype=bool)],
                                     minlength=len(self.max))
        picked = ops[self.rng.random(len(ops)) < self.keep][["start_s", "latency_ms", "type"]]
        self.sample.append(picked)
        self.sampled += len(picked)
        while self.sampled > 2 * MAX_POINTS:  # halve the sample and the rate of keeping
            self.keep /= 2
            self.sample = [s[self.rng.random(len(s)) < 0.5] for s in self.sample]
            self.sampled = sum(len(s) for s in self.sample)

    def windows(self) -> np.ndarray:
        """The windows from the first to the last with a completion (a gap between is 0)."""
        seen = np.nonzero(self.count.sum(axis=1))[0]
        return np.arange(seen[0], seen[-1] + 1) if len(seen) else seen

    def quantiles(self, qs=(0.5, 0.95, 0.99)) -> pd.DataFrame:
        w = self.windows()
        n = self.hist[w].sum(axis=1)
        cum = self.hist[w].cumsum(axis=1)
        mid = np.concatenate([[self.EDGES[0]], np.sqrt(self.EDGES[1:] * self.EDGES[:-1]),
                              [self.EDGES[-1]]])
        out = {}
        for q in qs:
            target = np.maximum(1, np.ceil(q * n))
            out[f"p{q * 100:g}"] = mid[np.minimum((cum < target[:, None]).sum(axis=1),
                                                  len(mid) - 1)]
        out["max"] = self.max[w]
        df = pd.DataFrame(out, index=w * self.window_s)
        return df[n > 0]

    def scatter(self) -> pd.DataFrame:
        s = pd.concat(self.sample) if self.sample else pd.DataFrame(
            columns=["start_s", "latency_ms", "type"])
        return s.sample(MAX_POINTS, random_state=1) if len(s) > MAX_POINTS else s


def _shade(ax, faults) -> None:
    seen = set()
    for kind, start, end, _ in faults:
        ax.axvspan(start, end, color=FAULT_COLOURS.get(kind, "#999999"), alpha=0.18, lw=0,
                   label=None if kind in seen else kind)
        seen.add(kind)


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def plots(series: Series, faults, per_node: dict[str, tuple[type, dict]]) -> dict[str, str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out = {}
    window_s = series.window_s
    sample = series.scatter()
    fig, ax = plt.subplots(figsize=(11, 3.6))
    for typ, colour in TYPE_COLOURS.items():
        s = sample[sample["type"] == typ]
        ax.scatter(s["start_s"], s["latency_ms"].clip(lower=0.01), s=4, c=colour, label=typ,
                   alpha=0.6, lw=0)
    _shade(ax, faults)
    ax.set_yscale("log")
    title = "Latency over time" + (f" ({len(sample):,} of {series.ops:,} operations, sampled)"
                                   if len(sample) < series.ops else "")
    ax.set(xlabel="time (s)", ylabel="latency (ms)", title=title)
    ax.legend(loc="upper right", fontsize=7, ncol=3)
    out["latency"] = _png(fig)

    fig, ax = plt.subplots(figsize=(11, 3.2))
    q = series.quantiles()
    for col in q.columns:
        ax.plot(q.index, q[col].clip(lower=0.01), label=col, lw=1.2)
    _shade(ax, faults)
    ax.set_yscale("log")
    ax.set(xlabel="time (s)", ylabel="latency (ms)", title=f"Latency quantiles per {window_s:g} s")
    ax.legend(loc="upper right", fontsize=7, ncol=4)
    out["quantiles"] = _png(fig)

    # every window, also those where nothing completed (a gap is zero, not a straight line)
    w = series.windows()
    rate = pd.DataFrame(series.count[w] / window_s, index=w * window_s, columns=list(TYPE_COLOURS))
    fig, ax = plt.subplots(figsize=(11, 3.2))
    for typ, colour in TYPE_COLOURS.items():
        if rate[typ].any():
            ax.plot(rate.index, rate[typ], c=colour, label=typ, lw=1.2)
    _shade(ax, faults)
    ax.set(xlabel="time (s)", ylabel="operations / s", title="Throughput")
    ax.legend(loc="upper right", fontsize=7, ncol=3)
    out["throughput"] = _png(fig)

    fig, ax = plt.subplots(figsize=(11, 2.8))
    total = series.count[w].sum(axis=1)
    # a window where nothing completed (no client was running) is a gap, not 0
    avail = pd.Series(np.where(total > 0, series.answered[w] / np.maximum(total, 1), np.nan),
                      index=w * window_s)
    ax.step(avail.index, avail, where="post", c="#2ca02c")
    _shade(ax, faults)
    ax.set_ylim(-0.02, 1.02)
    ax.set(xlabel="time (s)", ylabel="answered / completed",
           title=f"Availability per {window_s:g} s")
    out["availability"] = _png(fig)

    for name, (cls, by_node) in per_node.items():
        fig, ax = plt.subplots(figsize=(11, 2.8))
        for node, points in sorted(by_node.items()):
            xs, ys = zip(*points)
            ax.step(xs, ys, where="post", label=f"n{node}")
        _shade(ax, faults)
        ax.set(xlabel="time (s)", ylabel=cls.series_unit, title=cls.series_title)
        if by_node:
            ax.legend(loc="upper right", fontsize=7, ncol=6)
        out[name] = _png(fig)
    return out


def node_series(df: pd.DataFrame, end_s: float | None = None) -> dict[str, tuple[type, dict]]:
    """Per package that plots one (nemesis.packages.report_series): the package and its
    per-node (time s, value) steps, from the history's nemesis info rows."""
    nem = df[(df["process"] == "nemesis") & (df["type"] == "info")]
    rows = [(r["f"], r["time"] / 1e9, _value(r["value"]) or {}) for _, r in nem.iterrows()]
    rows = [(f, t, v if isinstance(v, dict) else {}) for f, t, v in rows]
    if end_s is None:
        end_s = float(df["time"].max()) / 1e9 if len(df) else 0.0
    return {name: (cls, cls.series([r for r in rows if r[0] in cls.opens + cls.closes], end_s))
            for name, cls in SERIES.items()}


def _indexes(example, sends: dict | None = None) -> list[int]:
    """History indexes an example names; for one that names only values (duplicate,
    inconsistent-offsets), the sends of those values."""
    if not isinstance(example, dict):
        return []
    found = [v for k, v in example.items() if k.endswith("index") and isinstance(v, int)]
    found += [s["index"] for s in example.get("cycle") or () if isinstance(s, dict)
              and isinstance(s.get("index"), int)]  # a dependency cycle's operations
    if not found and sends is not None and "key" in example:
        found = [sends[p] for p in _named_sends(example) if p in sends]
    return found


def _named_sends(example) -> list[tuple[str, object]]:
    """(key as text, value) of the sends an example names by value only."""
    if not isinstance(example, dict) or "key" not in example or any(
            k.endswith("index") and isinstance(v, int) for k, v in example.items()):
        return []
    values = example.get("values") or ([example["value"]] if "value" in example else [])
    return [(str(example["key"]), v) for v in values]


def anomalies(results: dict) -> list[tuple[str, int, list]]:
    """(class, count, examples) of every failing checker."""
    out = []
    for name, r in results.get("checkers", {}).items():
        if "anomalies" in r:  # a checker that names anomaly classes (the queue's)
            for a, info in r.get("anomalies", {}).items():
                out.append((a, info.get("count", 0), info.get("examples", [])))
        elif r.get("valid") is False:
            for key, ce in (r.get("counterexamples") or {}).items():
                out.append((f"{name} ({key})", len(ce), ce))
    return out


def node_logs(run_dir: Path) -> dict[str, list[str]]:
    logs = {}
    for path in sorted((run_dir / "nodes").glob("*/node.log")):
        logs[path.parent.name] = path.read_text(errors="replace").splitlines()
    return logs


def tracebacks(logs: dict[str, list[str]]) -> list[tuple[list[str], int, str]]:
    """Every distinct traceback in the node logs: (nodes, how many times, text)."""
    seen: dict[str, tuple[set, int]] = {}
    for node, lines in logs.items():
        i = 0
        while i < len(lines):
            if lines[i].startswith("Traceback (most recent call last)"):
                j = i + 1
                while j < len(lines) and (lines[j].startswith((" ", "\t")) or not lines[j]):
                    j += 1
                text = "\n".join(lines[i:j + 1])
                nodes, n = seen.get(text, (set(), 0))
                nodes.add(node)
                seen[text] = (nodes, n + 1)
                i = j
            i += 1
    return [(sorted(nodes), n, text) for text, (nodes, n) in seen.items()]


def timed_lines(logs: dict[str, list[str]]) -> list[tuple[float, str, str]]:
    """(wall clock s, node, line) of every timestamped node log line, parsed once."""
    out = []
    for node, lines in logs.items():
        for line in lines:
            m = LOG_TIME.match(line)
            if m:
                t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(
                    tzinfo=timezone.utc).timestamp() + int(m.group(2)) / 1000
                out.append((t, node, line))
    return out


def lines_around(timed: list[tuple[float, str, str]], wall_s: float, span_s: float = 2.0,
                 limit: int = 12) -> list[tuple[str, str]]:
    return [(node, line) for t, node, line in timed if abs(t - wall_s) <= span_s][:limit]


def _at(by_index: dict, i) -> str:
    """' at 41.2 s (op 123)' for a history index, or ' (op 123)' when its row is not here."""
    row = by_index.get(i) if isinstance(i, int) else None
    if row is None:
        return f" (op {i})" if isinstance(i, int) else ""
    return f" at {row['time'] / 1e9:.1f} s (op {i})"


def plain(cls: str, ex, by_index: dict, sends: dict | None = None) -> str | None:
    """One sentence saying what an example of a queue anomaly class shows
    (``checkers.queue.sentence``), with the times of the operations it names; None for an
    example of another shape (a counterexample)."""
    from checkers.queue import sentence

    def sent(key, v) -> str:
        i = (sends or {}).get((str(key), v))
        row = by_index.get(i) if i is not None else None
        if row is None:
            return f" (sent by op {i})" if i is not None else ""
        return f" (sent at {row['time'] / 1e9:.1f} s, op {i})"
    return sentence(cls, ex, lambda i: _at(by_index, i), sent)


ROLE_COLOURS = {"linearized": "#2ca02c", "concurrent": "#9e9e9e", "stuck": "#d62728"}


def checker_plots(results: dict, faults) -> dict[str, str]:
    """The series a checker computed (``plots``: name, title, ylabel and {label: [[s, y],
    ...]}), drawn with the faults shaded."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out = {}
    for r in results.get("checkers", {}).values():
        for plot in r.get("plots") or ():
            fig, ax = plt.subplots(figsize=(11, 3.2))
            for label, pts in plot["series"].items():
                if pts:
                    ax.step([x for x, _ in pts], [y for _, y in pts], where="post", lw=1,
                            label=str(label))
            _shade(ax, faults)
            ax.set(xlabel="time (s)", ylabel=plot.get("ylabel", ""), title=plot["title"])
            ax.legend(loc="best", fontsize=7, ncol=4, framealpha=0.6)
            out[plot["name"]] = _png(fig)
    return out


def key_log_svg(key: str, pic: dict) -> str:
    """One key's log as every operation saw it (a checker's ``pictures``): offsets across,
    an operation a row; ``w`` what it sent, ``r`` what it read, marked cells coloured."""
    esc = html.escape
    offsets, rows = pic.get("offsets") or [], pic.get("rows") or []
    if not offsets or not rows:
        return ""
    col = {o: i for i, o in enumerate(offsets)}
    marks = pic.get("marks") or {}
    width_v = max(len(str(c[1])) + len(c[2]) for r in rows for c in r["cells"])
    cw, rh, left = 7 * width_v + 6, 15, 120
    width, height = left + cw * len(offsets) + 10, 30 + rh * len(rows)
    out = [f"<svg class='key-log' data-key='{esc(key)}' xmlns='http://www.w3.org/2000/svg' "
           f"width='{width}' height='{height}' font-size='10' font-family='monospace'>"]
    for o, i in col.items():
        if i % 5 == 0:
            out.append(f"<text x='{left + i * cw}' y='12' fill='#555'>{o}</text>")
    type_stroke = {"ok": "#ffffff", "info": "#ffaa26", "fail": "#feb5da"}
    for j, r in enumerate(rows):
        y = 28 + j * rh
        out.append(f"<g class='op' data-index='{r['index']}'><title>{esc(r['type'])} op "
                   f"{r['index']} by process {r['process']}</title><text x='2' y='{y}' "
                   f"fill='#555'>op {r['index']} p{r['process']}</text>"
                   f"<rect x='{left - 2}' y='{y - 11}' width='{width - left - 6}' height='{rh - 1}' "
                   f"fill='none' stroke='{type_stroke.get(r['type'], '#ccc')}'/>")
        for o, v, wr, mark in r["cells"]:
            x = left + col[o] * cw
            if mark:
                out.append(f"<rect class='{esc(mark)}' x='{x - 1}' y='{y - 10}' width='{cw - 2}' "
                           f"height='{rh - 3}' fill='{marks.get(mark, '#999')}' "
                           f"fill-opacity='0.35'/>")
            out.append(f"<text x='{x}' y='{y}' fill='{'#222' if wr == 'w' else '#1f77b4'}'>"
                       f"{wr}{v}</text>")
        out.append("</g>")
    out.append("</svg>")
    more = []
    if pic.get("more_rows"):
        more.append(f"{pic['more_rows']} more operations not shown")
    if pic.get("offsets_total", len(offsets)) > len(offsets):
        more.append(f"offsets {offsets[0]} to {offsets[-1]} of {pic['offsets_total']} observed")
    return "".join(out) + (f"<p class='plain'>{esc('; '.join(more))}</p>" if more else "")


def counterexample_svg(key: str, d: dict) -> str:
    """An SVG of one invalid key's diagram (see checkers.lin_model.diagram)."""
    esc = html.escape
    ops = d.get("operations") or []
    if not ops:
        return ""
    procs = d["processes"]
    lo = min(o["call"] for o in ops)
    finite = [o["return"] for o in ops if o["return"] is not None] + [o["call"] for o in ops]
    hi = max(finite) + 1
    width, left, row_h = 1100, 90, 26
    scale = (width - left - 20) / max(1, hi - lo)
    height = row_h * len(procs) + 40
    out = [f"<svg class='counterexample' data-key='{esc(key)}' xmlns='http://www.w3.org/2000/svg' "
           f"width='{width}' height='{height}' font-size='11' font-family='sans-serif'>"]
    for i, p in enumerate(procs):
        y = 20 + i * row_h
        out.append(f"<text x='4' y='{y + 15}'>process {esc(p)}</text>"
                   f"<line x1='{left}' x2='{width - 10}' y1='{y + row_h - 2}' y2='{y + row_h - 2}' "
                   f"stroke='#eee'/>")
    for o in ops:
        y = 20 + procs.index(o["process"]) * row_h + 3
        x1 = left + (o["call"] - lo) * scale
        open_end = o["return"] is None
        x2 = width - 10 if open_end else left + (o["return"] - lo) * scale
        w = max(3.0, x2 - x1)
        colour = ROLE_COLOURS.get(o["role"], "#999")
        label = o["op"] if o["order"] is None else f"{o['order'] + 1}. {o['op']}"
        tip = (f"{o['role']}: {o['op']} (history index {o['index']}, call {o['call']}, "
               f"return {'never' if open_end else o['return']})")
        out.append(f"<g class='op {esc(o['role'])}' data-index='{o['index']}'><title>{esc(tip)}"
                   f"</title><rect x='{x1:.1f}' y='{y}' width='{w:.1f}' height='{row_h - 8}' "
                   f"rx='3' fill='{colour}' fill-opacity='0.85'"
                   + (" stroke='#000' stroke-dasharray='4 2'" if open_end else "") + "/>"
                   f"<text x='{x1 + 3:.1f}' y='{y + 13}' fill='#fff'>{esc(label[:40])}</text></g>")
    out.append(f"<text x='{left}' y='{height - 6}' fill='#555'>history position {lo} to {hi - 1}; "
               f"dashed: never returned</text></svg>")
    return "".join(out)


CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px} h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}
.valid{color:#2ca02c} .invalid{color:#d62728} .unknown{color:#ff7f0e}
tr.not-reached td{color:#d62728}
table{border-collapse:collapse;font-size:13px} td,th{border:1px solid #ddd;padding:3px 6px;
vertical-align:top;text-align:left} pre{background:#f6f6f6;padding:8px;font-size:12px;
overflow-x:auto} img{max-width:100%} .legend span{display:inline-block;padding:1px 6px;
margin-right:4px;color:#fff;font-size:12px} tr:target{background:#ffef99}
.plain{margin:2px 0 4px;font-size:14px}
"""


def render(run_dir: Path, window_s: float = 1.0) -> Path:
    """Write ``run_dir/report.html``; returns its path. The history is streamed (twice: its
    span, then its operations), never held whole."""
    from . import frames
    run_dir = Path(run_dir)
    results = json.loads((run_dir / "results.json").read_text())
    span = frames.Span(run_dir)
    series = Series(span.end_s, window_s)
    stream = frames.Stream(run_dir)
    for p in stream:
        series.add(_ops(p))
    nemesis = stream.nemesis
    faults = fault_intervals(nemesis, span.end_s)
    per_node = node_series(nemesis, span.end_s)
    images = plots(series, faults, per_node) if series.ops else {}
    images.update(checker_plots(results, faults))
    logs = node_logs(run_dir)
    start = run_dir / "history-start.json"
    start_wall = json.loads(start.read_text())["wall_clock_s"] if start.exists() else None
    found = anomalies(results)
    sends = frames.send_indexes(run_dir, {p for _, _, examples in found for ex in examples[:10]
                                          for p in _named_sends(ex)})
    named = {i for _, _, examples in found for ex in examples[:10] for i in _indexes(ex, sends)}
    by_index = frames.rows_at(run_dir, named)
    esc = html.escape
    verdict = results.get("verdict", str(results.get("valid")))
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>chaoskraft report: "
           f"{esc(run_dir.name)}</title><style>{CSS}</style></head><body>",
           f"<h1>{esc(str(run_dir))}</h1>",
           f"<p id='verdict'>Verdict: <b class='{esc(verdict)}'>{esc(verdict)}</b></p>",
           *(f"<p class='gate'>Gate: {esc(g)}</p>" for g in results.get("gates", [])),
           "<h2>Checkers</h2><table id='checkers'><tr><th>checker</th><th>valid</th>"
           "<th>details</th></tr>"]
    for name, r in results.get("checkers", {}).items():
        detail = {k: v for k, v in r.items() if k not in (
            "anomalies", "counterexamples", "diagrams", "valid", "plots", "pictures")}
        out.append(f"<tr><td>{esc(name)}</td><td>{esc(str(r.get('valid')))}</td>"
                   f"<td><pre>{esc(json.dumps(detail, indent=1)[:3000])}</pre></td></tr>")
    out.append("</table>")
    linked: list[int] = []
    out.append("<h2>Anomalies</h2>")
    if not found:
        out.append("<p id='no-anomalies'>None.</p>")
    for name, r in results.get("checkers", {}).items():
        ruled_out = consistency_sentence(r.get("consistency"))
        if ruled_out:  # the weakest consistency models the anomalies rule out, as Elle says
            out.append(f"<p class='consistency'>{esc(name)}: the history is {esc(ruled_out)}"
                       f"</p>")
    timed = timed_lines(logs) if found and start_wall is not None else []
    shown: set[tuple[str, str]] = set()  # node log lines already shown under an example
    moments: list[tuple[str, int]] = []  # (what, history time ns) to draw the messages of
    for cls, count, examples in found:
        out.append(f"<h3 class='anomaly'>{esc(cls)}: {count}</h3><table class='examples'>")
        for ex in examples[:10]:
            idx = _indexes(ex, sends)
            linked += idx
            links = " ".join(f"<a href='#op-{i}'>op {i}</a>" for i in idx)
            said = plain(cls, ex, by_index, sends)
            proof = cycle_proof(ex)
            text = (f"<p class='plain'>{esc(said)}</p>" if said else "") + \
                (f"<p class='proof'>{esc(proof)}</p>" if proof else "") + \
                f"<pre>{esc(json.dumps(ex))}</pre>"
            out.append(f"<tr><td>{text}</td><td>{links}</td></tr>")
            if start_wall is not None and idx and timed:
                t = [by_index[i]["time"] for i in idx if i in by_index]
                if t and ex is examples[0]:
                    moments.append((f"{cls}: the first example's first operation (op "
                                    f"{idx[0]})", min(t)))
                if t:
                    near = lines_around(timed, start_wall + min(t) / 1e9)
                    new = [x for x in near if x not in shown]
                    shown.update(new)
                    if new:
                        again = len(near) - len(new)
                        out.append("<tr><td colspan=2 class='node-log'><pre>" + esc(
                            "\n".join(f"{n}: {line}" for n, line in new)
                            + (f"\n({again} more lines of this window shown above)"
                               if again else "")) + "</pre></td></tr>")
                    elif near:
                        out.append("<tr><td colspan=2 class='node-log'><pre>(the node log "
                                   "lines of this moment are shown above)</pre></td></tr>")
        out.append("</table>")
    diagrams = {k: d for r in results.get("checkers", {}).values()
                for k, d in (r.get("diagrams") or {}).items() if d}
    if diagrams:
        out.append("<h2>Counterexamples</h2><p class='legend'>" + "".join(
            f"<span style='background:{c}'>{esc(k)}</span>" for k, c in ROLE_COLOURS.items())
            + "</p>")
        from .linpage import needed_indexes, write_pages
        rows = frames.rows_at(run_dir, needed_indexes(diagrams))
        pages = write_pages(run_dir, diagrams, {i: r["time"] / 1e9 for i, r in rows.items()
                                                if r.get("time") is not None}, faults)
        for key, d in diagrams.items():
            stuck = next((o for o in d.get("operations") or [] if o["role"] == "stuck"), None)
            if stuck is not None and stuck["call"] in rows:
                moments.append((f"key {key}: {stuck['op']} (op {stuck['index']}) cannot follow "
                                f"the longest linearizable prefix", rows[stuck["call"]]["time"]))
            out.append(f"<h3>key {esc(key)}: the longest linearizable prefix has "
                       f"{d['prefix_length']} operations (the last "
                       f"{d['prefix_length'] - d['shown_from']} numbered); the red one cannot "
                       f"follow it</h3><p><a class='lin-page' href='{esc(pages[key])}'>"
                       f"interactive page: the states before and after each operation, the "
                       f"faults on the same time axis</a></p>" + counterexample_svg(key, d))
    out += messages_html(run_dir, moments, start_wall)
    pictures = {k: p for r in results.get("checkers", {}).values()
                for k, p in (r.get("pictures") or {}).items()}
    if pictures:
        marks = {k: c for p in pictures.values() for k, c in (p.get("marks") or {}).items()}
        out.append("<h2>Logs of the keys with anomalies</h2><p class='legend'>" + "".join(
            f"<span style='background:{c}'>{esc(k)}</span>" for k, c in marks.items())
            + " w: sent (acknowledged at that offset), r: read, wr: both (a transaction "
            "read what it sent); an operation a row</p>")
        for key, pic in pictures.items():
            out.append(f"<h3>{esc(key)}</h3><div style='overflow-x:auto'>"
                       + key_log_svg(key, pic) + "</div>")
    planned = results.get("faults")
    if planned:
        out.append(f"<h2>Planned faults: {planned['happened']} of {planned['planned']} happened"
                   f"</h2><table id='planned-faults'><tr><th>step</th><th>at (s)</th>"
                   f"<th>kind</th><th>target</th><th>status</th><th>nodes / why</th></tr>")
        for x in planned["steps"]:
            what = x["why"] if x["status"] != "happened" else ", ".join(
                f"n{n}" for n in (x.get("nodes") or []))
            out.append(f"<tr class='{esc(x['status'])}'><td>{x['step']}</td>"
                       f"<td>{x['at_s']}</td><td>{esc(str(x['kind']))}</td>"
                       f"<td>{esc(str(x['spec']))}</td><td>{esc(x['status'])}</td>"
                       f"<td>{esc(what)}</td></tr>")
        out.append("</table>")
    out += liveness_html(results.get("liveness"))
    out += coverage_html(results.get("coverage"))
    out.append("<h2>Faults</h2><p class='legend'>" + "".join(
        f"<span style='background:{c}'>{esc(k)}</span>" for k, c in FAULT_COLOURS.items())
        + "</p><table id='faults'><tr><th>kind</th><th>from (s)</th><th>to (s)</th>"
        "<th>what</th></tr>")
    for kind, s, e, label in faults:
        out.append(f"<tr><td>{esc(kind)}</td><td>{s:.1f}</td><td>{e:.1f}</td>"
                   f"<td>{esc(label)}</td></tr>")
    out.append("</table><h2>Plots</h2>")
    for name, uri in images.items():
        out.append(f"<p><img class='plot' id='plot-{name}' alt='{name}' src='{uri}'></p>")
    for name, (cls, by_node) in per_node.items():
        out.append(f"<h2>{esc(cls.series_title)}</h2><pre id='{esc(name)}'>"
                   + esc(json.dumps(by_node) if by_node else "none") + "</pre>")
    tbs = tracebacks(logs)
    out.append(f"<h2>Tracebacks in node logs: {sum(n for _, n, _ in tbs)} "
               f"({len(tbs)} distinct)</h2>")
    for nodes, n, tb in tbs:
        out.append(f"<pre class='traceback'>{n} times on {esc(', '.join(nodes))}:\n"
                   f"{esc(tb)}</pre>")
    out.append("<h2>Operations named by anomalies</h2><p><a id='timeline-link' "
               "href='timeline.html'>the whole timeline</a> (an index opens it at that "
               "operation)</p><table id='ops'><tr><th>index</th>"
               "<th>time (s)</th><th>process</th><th>type</th><th>f</th><th>key</th>"
               "<th>value</th><th>error</th></tr>")
    for i in sorted(set(linked)):
        if i not in by_index:
            continue
        r = by_index[i]
        err = r.get("error")
        out.append(f"<tr id='op-{i}'><td><a href='timeline.html#t={r['time'] / 1e9:.3f}&op={i}'>"
                   f"{i}</a></td><td>{r['time'] / 1e9:.3f}</td>"
                   f"<td>{esc(str(r.get('process')))}</td><td>{esc(str(r.get('type')))}</td>"
                   f"<td>{esc(str(r.get('f')))}</td><td>{esc(str(r.get('key')))}</td>"
                   f"<td>{esc(json.dumps(r.get('value'), default=str)[:300])}</td>"
                   f"<td>{esc(str(err) if isinstance(err, str) else '')}</td></tr>")
    out.append("</table></body></html>")
    path = run_dir / "report.html"
    path.write_text("\n".join(out))
    return path


def messages_html(run_dir: Path, moments: list[tuple[str, int]],
                  start_wall: float | None, limit: int = 3) -> list[str]:
    """The sequence diagram of the nodes' messages around each of the first ``limit``
    anomaly moments, from the journals the nodes kept (``harness.sequence``)."""
    from . import sequence
    if not moments or start_wall is None:
        return []
    journals = sequence.load(run_dir)
    if not journals:
        return []
    index = sequence.Index(journals)  # sorted once for every moment
    esc = html.escape
    out = ["<h2 id='messages'>Messages around the anomalies</h2><p class='plain'>From the "
           "nodes' journals: a line per node and one for the clients, time going down in "
           "Lamport order (each row: the node's wall clock, the node, its Lamport time), an "
           "arrow per message from its sending to its receipt, a red x for one sent and never "
           "received. Hover an arrow for its two ends.</p>"]
    for what, t_ns in moments[:limit]:
        wall_ms = start_wall * 1000 + t_ns / 1e6
        drawn = sequence.svg(index, wall_ms, f"{what} at {t_ns / 1e9:.3f} s")
        if drawn:
            out.append(f"<h3>{esc(what)}, at {t_ns / 1e9:.3f} s</h3>"
                       f"<div style='overflow-x:auto'>{drawn}</div>")
    return out


def coverage_html(cov: dict | None) -> list[str]:
    """The coverage section: each node event the run reached or its packages intended, how
    often, on which nodes, and which package intended it (``harness.coverage``)."""
    if not cov:
        return []
    esc = html.escape
    by_package: dict[str, list[str]] = {}
    for package, events in cov.get("intended", {}).items():
        for e in events:
            by_package.setdefault(e, []).append(package)
    events = [e for e in EVENTS if e in cov["reached"] or e in by_package]
    missing = cov.get("intended_not_reached", [])
    out = [f"<h2>Coverage: {len(cov['reached'])} kinds of node event reached"
           + (f", {len(missing)} intended and never reached" if missing else "") + "</h2>",
           "<table id='coverage'><tr><th>event</th><th>times</th><th>nodes</th>"
           "<th>intended by</th><th>what it is</th></tr>"]
    for e in events:
        n = cov["reached"].get(e, 0)
        nodes = ", ".join(f"n{k}" for k, c in cov.get("by_node", {}).items() if c.get(e))
        cls = "reached" if n else "not-reached"
        out.append(f"<tr class='{cls}'><td>{esc(e)}</td><td>{n}</td><td>{esc(nodes)}</td>"
                   f"<td>{esc(', '.join(by_package.get(e, [])))}</td>"
                   f"<td>{esc(EVENTS[e])}</td></tr>")
    out.append("</table>")
    return out


def liveness_html(live: dict | None) -> list[str]:
    """The liveness phase: whole again after how long, or what was still stuck."""
    if not live:
        return []
    esc = html.escape
    if not live.get("checked"):
        return ["<h2>Liveness: not checked</h2>"]
    stuck = live.get("stuck") or []
    if not stuck:
        return [f"<h2 id='liveness'>Liveness: whole again {live.get('took_s')} s after the "
                f"heal (bound {live.get('bound_s')} s)</h2>"]
    out = [f"<h2 id='liveness' class='invalid'>Liveness anomaly: {len(stuck)} thing(s) still "
           f"stuck {live.get('bound_s')} s after the final heal</h2>",
           "<table id='stuck'><tr><th>what</th><th>stuck for (s)</th><th>detail</th></tr>"]
    for s in stuck:
        out.append(f"<tr><td>{esc(str(s.get('what')))}</td><td>{s.get('since_s')}</td>"
                   f"<td>{esc(str(s.get('detail')))}</td></tr>")
    out.append("</table>")
    return out

