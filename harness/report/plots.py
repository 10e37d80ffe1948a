"""The time plots (matplotlib PNGs as data URIs) with fault intervals shaded, and the
queue checker's plots."""
from __future__ import annotations

import base64
import io

import numpy as np
import pandas as pd

from .series import FAULT_COLOURS, Series, TYPE_COLOURS


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
