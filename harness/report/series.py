"""The history as the report's time series: operations, fault intervals from the nemesis
rows, and a run's latency, throughput and availability per window."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from nemesis.packages import report_kinds, report_series


MAX_POINTS = 100_000


MAX_WINDOWS = 2_000  # a plot is about 1,000 pixels wide


# The nemesis rows that open a fault (row -> package), that close faults (row -> packages),
# and each package's colour: each fault package names its own (nemesis.package). A
# workload's restart of every node is a moment, not a fault.
OPENS, CLOSES, FAULT_COLOURS = report_kinds()


SERIES = report_series()


FAULT_COLOURS["restart-all"] = "#bab0ac"


TYPE_COLOURS = {"ok": "#2ca02c", "fail": "#d62728", "info": "#ff7f0e"}


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
    from ..frames import COLUMNS, pairs
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
        kept = [s for s in self.sample if len(s)]  # an empty part would sway the dtypes
        s = pd.concat(kept) if kept else pd.DataFrame(columns=["start_s", "latency_ms", "type"])
        return s.sample(MAX_POINTS, random_state=1) if len(s) > MAX_POINTS else s


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
