"""The messages of a Docker or SSH run around a moment, from the nodes' journals
(``node_image.rpc_journal``, collected as ``nodes/nN/rpc.jsonl``), drawn as the simulator
draws its own (``simulator.journal.sequence_svg``): a line per node and one for the clients,
an arrow per message from its sending to its receipt, rows in Lamport order.

A send matched to its receipt (the receiver names the sender's Lamport time) is an arrow; a
send to a node whose journal goes on past it without the receipt is lost; a receipt whose
send is outside the window still gets its arrow from the sender's row. Kafka and register
clients stamp nothing: their requests arrive from ``clients`` just above their receipt, and
the answers go back just below their sending.
"""
from __future__ import annotations

import time
from pathlib import Path

from node_image.rpc_journal import journal_lines

BEFORE = 90  # messages shown before the moment, and after it
AFTER = 30


def load(run_dir: Path) -> dict[str, list[dict]]:
    """Node name -> its journal entries (older file first)."""
    out = {}
    for d in sorted(Path(run_dir, "nodes").glob("n*")):
        entries = list(journal_lines([d / "rpc.jsonl.1", d / "rpc.jsonl"]))
        if entries:
            out[d.name] = entries
    return out


def _party(p: str) -> str:
    return "clients" if p.startswith("client ") else p


class Index:
    """The journals' events in wall-clock order, the receipts by (receiver, sender, sender's
    Lamport time) and each node's last time: built once for every moment a report draws."""

    def __init__(self, journals: dict[str, list[dict]]) -> None:
        self.events = sorted(((e["t"], node, e) for node, es in journals.items() for e in es),
                             key=lambda x: (x[0], x[2]["l"]))
        self.times = [t for t, _, _ in self.events]
        self.last_t = {node: es[-1]["t"] for node, es in journals.items()}
        self.received = {(node, e["p"], e["sl"]) for node, es in journals.items() for e in es
                         if e["e"] == "r" and "sl" in e}


def around(journals: dict[str, list[dict]] | Index, wall_ms: float, before: int = BEFORE,
           after: int = AFTER) -> tuple[list[dict], dict]:
    """The entries for ``sequence_svg`` of the messages nearest ``wall_ms`` (the nodes' wall
    clocks): up to ``before`` journal events before it and ``after`` from it, and the row
    labels by row key."""
    import bisect
    ix = journals if isinstance(journals, Index) else Index(journals)
    first = bisect.bisect_left(ix.times, wall_ms)
    window = ix.events[max(0, first - before):first + after]
    last_t, received = ix.last_t, ix.received
    labels: dict = {}

    def key(node: str, e: dict, shift: float = 0.0):
        k = (e["l"] + shift, node)
        if not shift:
            labels[k] = f"{time.strftime('%H:%M:%S', time.gmtime(e['t'] / 1000))}." \
                        f"{e['t'] % 1000:03d} {node} L{e['l']}"
        return k

    shown = []
    for t, node, e in window:
        peer = _party(e["p"])
        if e["e"] == "s":
            if peer == "clients":
                shown.append({"kind": "msg", "src": node, "dest": peer, "sent": key(node, e),
                              "at": (e["l"] + 0.5, node), "what": e["m"]})
            elif (peer, node, e["l"]) not in received and last_t.get(peer, 0) > t + 1000:
                shown.append({"kind": "lost", "src": node, "dest": peer, "at": key(node, e),
                              "what": e["m"]})
        elif "sl" in e:
            shown.append({"kind": "msg", "src": peer, "dest": node, "sent": (e["sl"], peer),
                          "at": key(node, e), "what": e["m"]})
            labels.setdefault((e["sl"], peer), f"{peer} L{e['sl']}")
        else:
            shown.append({"kind": "msg", "src": peer, "dest": node,
                          "sent": (e["l"] - 0.5, node), "at": key(node, e), "what": e["m"]})
    for e in shown:
        for k in (e.get("sent"), e["at"]):
            labels.setdefault(k, "")
    return shown, labels


def svg(journals: dict[str, list[dict]] | Index, wall_ms: float, footer: str) -> str:
    """The sequence diagram of the messages around ``wall_ms``; empty without journals."""
    from simulator.journal import sequence_svg
    shown, labels = around(journals, wall_ms)
    if not shown:
        return ""
    return sequence_svg(shown, lambda k: labels.get(k, ""), footer, label_width=230)
