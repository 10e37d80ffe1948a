"""The message journal of a simulated run, and its sequence diagram.

With a journal (``chaoskraft sim --journal DIR``) the simulation records every message
sent (who to whom, when sent, when delivered or lost, what it was) and every fault and
node event, keeping the last ``KEEP`` of them. When the run fails, ``write`` puts them in
``seed-N.jsonl`` and draws the last ``WINDOW`` before the failure as an HTML page: one
line per node and client, time going down, an arrow per message from its sending to its
delivery (Maelstrom's Lamport view, with simulated milliseconds beside), faults and node
events on the lines, the violation at the bottom.
"""
from __future__ import annotations

import html
import json
from collections import deque
from pathlib import Path
from typing import Callable

from node_image.rpc_journal import label

KEEP = 20_000
WINDOW = 400


def party(x) -> str:
    if isinstance(x, str):
        return x
    if isinstance(x, tuple):
        return f"{x[0]}-{x[1]}" if x[0] != "kafka" or x[1] >= 0 else "kafka-admin"
    return f"n{x}"


class Journal:
    def __init__(self, keep: int = KEEP) -> None:
        self.entries: deque = deque(maxlen=keep)

    def message(self, sent_ms: int, src, dest, msg, arrives_ms: list[int], name=None) -> None:
        what = name or label(msg)
        if not arrives_ms:
            self.entries.append({"kind": "lost", "at": sent_ms, "src": party(src),
                                 "dest": party(dest), "what": what})
        for at in arrives_ms:
            self.entries.append({"kind": "msg", "sent": sent_ms, "at": at, "src": party(src),
                                 "dest": party(dest), "what": what})

    def event(self, at: int, who, what: str) -> None:
        self.entries.append({"kind": "event", "at": at, "who": party(who), "what": what})

    def write(self, directory: Path, seed: int, now_ms: int, failure: str) -> tuple[Path, Path]:
        """seed-N.jsonl and seed-N.html in ``directory``; the messages delivered after
        ``now_ms`` (still in flight at the failure) are left out of the diagram."""
        directory.mkdir(parents=True, exist_ok=True)
        jsonl = directory / f"seed-{seed}.jsonl"
        with jsonl.open("w") as f:
            for e in self.entries:
                f.write(json.dumps(e) + "\n")
        page = directory / f"seed-{seed}.html"
        page.write_text(self._html(seed, now_ms, failure))
        return jsonl, page

    def _html(self, seed: int, now_ms: int, failure: str) -> str:
        shown = [e for e in self.entries if e["at"] <= now_ms][-WINDOW:]
        return (f"<!doctype html><meta charset=utf-8><title>seed {seed}: "
                f"{html.escape(failure)}</title><body><h3>seed {seed}: {html.escape(failure)}"
                f"</h3><p>The last {len(shown)} messages and events before the failure, at "
                f"{now_ms} simulated ms (the whole journal: seed-{seed}.jsonl). Hover an "
                f"arrow for its times.</p>"
                + sequence_svg(shown, lambda t: f"{t} ms", failure))


def sequence_svg(shown: list[dict], row_label: Callable[[object], str], footer: str,
                 label_width: int = 140) -> str:
    """Maelstrom's Lamport view of ``shown``: a line per party, time going down, an arrow per
    message from its sending (``sent``) to its delivery (``at``), lost messages and events
    (``kind`` lost / event) on the sender's line. ``sent`` and ``at`` are row keys (simulated
    ms, or a Docker journal's Lamport order): one row per distinct key, sorted, labelled
    by ``row_label``."""
    names = sorted({p for e in shown for p in (e.get("src"), e.get("dest"), e.get("who"))
                    if p}, key=lambda p: (not p.startswith("n"), len(p), p))
    col = {p: label_width + 120 * i for i, p in enumerate(names)}
    times = sorted({t for e in shown for t in (e["at"], e.get("sent", e["at"]))})
    row = {t: 40 + 18 * i for i, t in enumerate(times)}
    height = 80 + 18 * len(times)
    width = label_width + 20 + 120 * len(names)
    svg = [f'<svg class="sequence" xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" font-family="monospace" font-size="11">',
           '<defs><marker id="a" markerWidth="8" markerHeight="8" refX="8" refY="4" '
           'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#333"/></marker></defs>']
    for p, x in col.items():
        svg.append(f'<text x="{x}" y="20" text-anchor="middle" font-weight="bold">'
                   f'{html.escape(p)}</text>')
        svg.append(f'<line x1="{x}" y1="28" x2="{x}" y2="{height - 30}" stroke="#bbb"/>')
    for t, y in row.items():
        svg.append(f'<text x="8" y="{y + 4}" fill="#888">{html.escape(row_label(t))}</text>')
    for e in shown:
        what = html.escape(e["what"])
        if e["kind"] == "msg":
            x1, x2 = col[e["src"]], col[e["dest"]]
            y1, y2 = row[e["sent"]], row[e["at"]]
            color = "#1f77b4" if e["src"].startswith("n") and e["dest"].startswith("n") \
                else "#2ca02c"
            svg.append(f'<line class="msg" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" '
                       f'stroke="{color}" marker-end="url(#a)"><title>{what} '
                       f'({html.escape(row_label(e["sent"]))} -&gt; '
                       f'{html.escape(row_label(e["at"]))})</title></line>')
            svg.append(f'<text x="{(x1 + x2) / 2}" y="{(y1 + y2) / 2 - 2}" '
                       f'text-anchor="middle" fill="{color}">{what}</text>')
        elif e["kind"] == "lost":
            x, y = col[e["src"]], row[e["at"]]
            svg.append(f'<text class="lost" x="{x + 4}" y="{y + 4}" fill="#d62728">x {what} '
                       f'to {html.escape(e["dest"])} lost</text>')
        else:
            y = row[e["at"]]
            x = col[e["who"]] if e["who"] else label_width
            svg.append(f'<circle cx="{x}" cy="{y}" r="4" fill="#ff7f0e"/>')
            svg.append(f'<text x="{x + 6}" y="{y + 4}" fill="#ff7f0e">{what}</text>')
    svg.append(f'<text x="8" y="{height - 10}" fill="#d62728" font-weight="bold">'
               f'{html.escape(footer)}</text>')
    svg.append("</svg>")
    return "".join(svg)
