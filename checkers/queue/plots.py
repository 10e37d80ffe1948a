"""What Jepsen's Kafka checker draws, as data: unseen messages and realtime lag over time,
and the log of a key as every operation saw it.

- unseen: at each moment, per key, the acknowledged sends no poll had read yet
  (Jepsen's ``unseen``); a send read before its acknowledgement came back is
  never unseen.
- realtime lag: for each poll of a key, how long before the poll's invocation
  the consumer's position had stopped being the end of the log: the first
  moment some operation (an acknowledged send, any read) proved that an offset
  at or past that position existed (Jepsen's ``realtime-lag``, its lower
  bound). Positions start over at an assign or subscribe.
- the log of a key (``key_log``): offsets across, one row per operation that
  sent or read the key, each value marked as Jepsen's order picture marks it.

Series are downsampled to at most ``POINTS`` points; times are seconds on the
history's clock, as the report's other plots. The report draws them with the
faults shaded.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

POINTS = 300
# A key log's marks and their colours (Jepsen's order picture colours inconsistent cells).
MARKS = {"inconsistent": "#d62728", "duplicate": "#ff7f0e", "unread": "#9467bd",
         "aborted-read": "#e377c2"}


def _flat_reads(t: pa.Table):
    """Every message read: (row, key, offset, value) arrays, rows index ``t``."""
    reads = t["reads"].combine_chunks()
    parent = pc.list_parent_indices(reads).to_numpy(zero_copy_only=False)
    r = pc.list_flatten(reads)
    offs = pc.struct_field(r, "offsets")
    vals = pc.struct_field(r, "values")
    inner = pc.list_parent_indices(offs).to_numpy(zero_copy_only=False)
    row = parent[inner] if len(inner) else np.zeros(0, np.int64)
    key = pc.struct_field(r, "key").to_numpy(zero_copy_only=False)[inner] if len(inner) \
        else np.zeros(0, np.int64)
    return (row, key, pc.list_flatten(offs).to_numpy(zero_copy_only=False),
            pc.list_flatten(vals).to_numpy(zero_copy_only=False))


def _downsample(x: np.ndarray, y: np.ndarray) -> list[list[float]]:
    if len(x) > POINTS:
        pick = np.unique(np.linspace(0, len(x) - 1, POINTS).astype(np.int64))
        x, y = x[pick], y[pick]
    return [[round(float(a), 3), float(b)] for a, b in zip(x, y)]


def series(t: pa.Table, names: list) -> list[dict]:
    """The plots of a typed queue history (columns index, time, process, type, f, key,
    value, offset, reads, invoke): ``[{"name", "title", "ylabel", "series": {label:
    [[s, y], ...]}}]``."""
    t = t.filter(pc.is_valid(t["process"]))
    if not t.num_rows or pc.all(pc.is_null(t["time"])).as_py():
        return []
    sec = pc.fill_null(t["time"], 0).to_numpy(zero_copy_only=False).astype(np.int64) / 1e9
    f = t["f"].to_numpy(zero_copy_only=False)
    typ = t["type"].to_numpy(zero_copy_only=False)
    key = pc.fill_null(t["key"], -1).to_numpy(zero_copy_only=False)
    val = pc.fill_null(t["value"], -1).to_numpy(zero_copy_only=False)
    off = pc.fill_null(t["offset"], -1).to_numpy(zero_copy_only=False)
    m_row, m_key, m_off, m_val = _flat_reads(t)
    out = []
    # Unseen: +1 when a send is acknowledged, -1 when its value is first read after that.
    acked = np.nonzero((f == "send") & (typ == "ok") & (key >= 0))[0]
    if len(acked):
        first_read: dict = {}
        order = np.argsort(sec[m_row], kind="stable")
        for k, v, s in zip(m_key[order], m_val[order], sec[m_row][order]):
            first_read.setdefault((int(k), int(v)), float(s))
        by_key: dict[int, list] = {}
        for j in acked:
            a = float(sec[j])
            r = first_read.get((int(key[j]), int(val[j])))
            ev = by_key.setdefault(int(key[j]), [])
            if r is None or r > a:
                ev.append((a, 1))
                if r is not None:
                    ev.append((r, -1))
        lines = {}
        for k in sorted(by_key):
            ev = sorted(by_key[k])
            if not ev:
                continue
            x = np.array([e[0] for e in ev])
            y = np.cumsum([e[1] for e in ev])
            lines[str(names[k]) if k < len(names) else str(k)] = _downsample(x, y)
        if lines:
            out.append({"name": "unseen", "title": "Unseen: acknowledged sends no poll had read "
                        "yet", "ylabel": "messages", "series": lines})
    lag = _lag(t, f, typ, sec, key, off, m_row, m_key, m_off, names)
    if lag:
        out.append({"name": "realtime-lag", "title": "Realtime lag of polls, per key (the "
                    "largest of each moment)", "ylabel": "lag (s)", "series": lag})
    return out


def _lag(t, f, typ, sec, key, off, m_row, m_key, m_off, names) -> dict:
    """Per key, [[poll invocation s, lag s], ...]."""
    inv = t["invoke"].fill_null(-1).to_numpy(zero_copy_only=False)
    idx = t["index"].to_numpy(zero_copy_only=False)
    # When each offset was first known to exist: suffix minimum over offsets of the
    # completion times of acknowledged sends and of reads.
    known: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    s_ok = (f == "send") & (typ == "ok") & (off >= 0)
    ks = np.concatenate([key[s_ok], m_key])
    os_ = np.concatenate([off[s_ok], m_off])
    ts = np.concatenate([sec[s_ok], sec[m_row]])
    for k in np.unique(ks):
        sel = ks == k
        o, tt = os_[sel], ts[sel]
        order = np.argsort(-o, kind="stable")
        o, tt = o[order], np.minimum.accumulate(tt[order])
        known[int(k)] = (o[::-1], tt[::-1])  # ascending offsets, earliest proof of >= o
    # Invocation time of each completion, by its invoke index.
    at = dict(zip(idx.tolist(), sec.tolist()))
    poll_rows = np.nonzero(((f == "poll") | (f == "final-poll")) & (typ != "invoke"))[0]
    if not len(poll_rows):
        return {}
    proc = t["process"].to_numpy(zero_copy_only=False)
    repos = set(np.nonzero(np.isin(f, ["assign", "subscribe"]) & (typ == "ok"))[0].tolist())
    # Messages per row, highest offset per (row, key).
    hi: dict[tuple[int, int], int] = {}
    for r, k, o in zip(m_row.tolist(), m_key.tolist(), m_off.tolist()):
        if o > hi.get((r, k), -1):
            hi[(r, k)] = o
    keys_of: dict[int, set] = {}
    for r, k in hi:
        keys_of.setdefault(r, set()).add(k)
    pos: dict[tuple[int, int], int] = {}
    lags: dict[int, list] = {}
    for r in sorted(set(poll_rows.tolist()) | repos):
        p = int(proc[r])
        if r in repos:
            pos = {pk: v for pk, v in pos.items() if pk[0] != p}
            continue
        if f[r] == "final-poll":
            continue
        start = at.get(int(inv[r]), float(sec[r])) if inv[r] >= 0 else float(sec[r])
        for k in keys_of.get(r, set()) | {pk[1] for pk in pos if pk[0] == p}:
            q = pos.get((p, k), -1) + 1  # the position before this poll
            o, tt = known.get(k, (np.zeros(0), np.zeros(0)))
            j = np.searchsorted(o, q)
            if j < len(o):
                lags.setdefault(k, []).append((start, max(0.0, start - float(tt[j]))))
            if (r, k) in hi:
                pos[(p, k)] = max(pos.get((p, k), -1), hi[(r, k)])
    out = {}
    for k in sorted(lags):
        pts = sorted(lags[k])
        x = np.array([a for a, _ in pts])
        y = np.array([b for _, b in pts])
        out[str(names[k]) if k < len(names) else str(k)] = _downsample(x, y)
    return out


def key_log(t: pa.Table, key_id: int, limit_ops: int = 300, limit_offsets: int = 120) -> dict:
    """The log of one key as each operation saw it: ``{"offsets": [...], "rows": [{"index",
    "process", "type", "cells": [[offset, value, "w"|"r"|"wr", mark], ...]}]}`` for the operations
    that sent (with a known offset) or read the key, in history order, at most ``limit_ops``
    of them over at most ``limit_offsets`` offsets (from just before the first mark)."""
    t = t.filter(pc.is_valid(t["process"]))
    rows: dict[int, dict] = {}
    f = t["f"].to_numpy(zero_copy_only=False)
    key = pc.fill_null(t["key"], -1).to_numpy(zero_copy_only=False)
    off = pc.fill_null(t["offset"], -1).to_numpy(zero_copy_only=False)
    val = pc.fill_null(t["value"], -1).to_numpy(zero_copy_only=False)
    idx = t["index"].to_numpy(zero_copy_only=False)
    proc = t["process"].to_numpy(zero_copy_only=False)
    typ = t["type"].to_numpy(zero_copy_only=False)

    def row(j):
        return rows.setdefault(int(idx[j]), {"index": int(idx[j]), "process": int(proc[j]),
                                              "type": str(typ[j]), "cells": []})
    for j in np.nonzero((f == "send") & (key == key_id) & (off >= 0))[0]:
        row(j)["cells"].append([int(off[j]), int(val[j]), "w"])
    failed = set(val[(f == "send") & (key == key_id) & (typ == "fail")].tolist())
    m_row, m_key, m_off, m_val = _flat_reads(t)
    for r, o, v in zip(m_row[m_key == key_id], m_off[m_key == key_id], m_val[m_key == key_id]):
        cells = row(r)["cells"]
        same = [c for c in cells if c[0] == o and c[1] == v and c[2] == "w"]
        if same:  # a transaction that read what it sent
            same[0][2] = "wr"
        else:
            cells.append([int(o), int(v), "r"])
    ordered = [rows[i] for i in sorted(rows)]
    offsets = sorted({c[0] for r in ordered for c in r["cells"]})
    # Marks, as Jepsen's picture colours them: offsets holding more than one value, values
    # at more than one offset, acknowledged sends nobody read.
    at: dict[int, set] = {}
    where: dict[int, set] = {}
    read: set = set()
    for r in ordered:
        for o, v, wr in r["cells"]:
            at.setdefault(o, set()).add(v)
            where.setdefault(v, set()).add(o)
            if "r" in wr:
                read.add(v)
    for r in ordered:
        for c in r["cells"]:
            o, v, wr = c[0], c[1], c[2]
            c.append("inconsistent" if len(at[o]) > 1 else "duplicate" if len(where[v]) > 1
                     else "aborted-read" if "r" in wr and v in failed
                     else "unread" if wr == "w" and v not in read else "")
    # A window of at most ``limit_offsets`` offsets, from a little before the first mark.
    marked = [c[0] for r in ordered for c in r["cells"] if c[3]]
    lo = 0
    if len(offsets) > limit_offsets:
        first = offsets.index(min(marked)) if marked else 0
        lo = max(0, min(first - 10, len(offsets) - limit_offsets))
    window = offsets[lo:lo + limit_offsets]
    if window:
        inside = [dict(r, cells=[c for c in r["cells"] if window[0] <= c[0] <= window[-1]])
                  for r in ordered]
        ordered = [r for r in inside if r["cells"]]
    return {"offsets": window, "rows": ordered[:limit_ops], "marks": MARKS,
            "more_rows": max(0, len(ordered) - limit_ops),
            "offsets_total": len(offsets)}
