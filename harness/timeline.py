"""The operation timeline: ``timeline.html`` beside ``report.html``, usable at a million operations.

One lane per process, one bar per operation from invoke to completion
(green ok, red fail, orange info, grey never completed), faults shaded as
in the report. Neither the writer nor the page holds the whole history:
the history is streamed (``harness.frames``) and operations are appended,
a batch at a time, to chunks of ``chunk_s`` seconds (``timeline/c-N.js``:
lines ``TL.part(N, rows)`` closed by ``TL.chunk(N)``), and the page loads, by adding script tags, only the
chunks of the window on screen. An operation that runs past the end of its
own chunk is written again into every later chunk it overlaps, so a window
shows it however long before the window it began (an operation never
completed lasts to the end of the history: one per process at most).
Script tags rather than fetch, so the page works from disk as well as
through ``chaoskraft serve``. ``#t=SECONDS&op=INDEX`` in the URL
opens the window at that time and marks that operation; clicking a bar
shows its operation.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .report import FAULT_COLOURS, fault_intervals

TARGET_OPS_PER_CHUNK = 4000
TYPES = {"ok": 0, "fail": 1, "info": 2, "open": 3}


def timeline_ops(pairs: pd.DataFrame, end_ns: int) -> pd.DataFrame:
    """Operations of ``frames.pairs`` with start, duration, type and ``row``, their position
    in ``pairs`` (their ``labels``); one never completed lasts to ``end_ns``, the history's
    end."""
    end = pairs["end"].astype(float).fillna(end_ns)
    return pd.DataFrame({"start_ms": (pairs["start"] / 1e6).round(3),
                         "dur_ms": ((end - pairs["start"]) / 1e6).round(3),
                         "process": pairs["process"], "type": pairs["type"],
                         "index": pairs["index"], "row": np.arange(len(pairs))})


def labels(pairs: pd.DataFrame) -> pa.Array:
    """Each operation's label: its f, key and the first 40 characters of its value (Arrow
    strings, built column-wise: at a hundred million operations a Python loop is the cost)."""
    def text(col):
        a = pa.array(pairs[col], from_pandas=True)
        if pa.types.is_dictionary(a.type):
            a = a.dictionary_decode()
        return pc.fill_null(a if a.type == pa.string() else pc.cast(a, pa.string()), "")
    value = text("value")
    value = pc.utf8_slice_codeunits(pc.if_else(pc.equal(value, "null"), "", value), 0, 40)
    return pc.utf8_trim_whitespace(
        pc.binary_join_element_wise(text("f"), text("key"), value, " "))


def _numbers(values) -> pa.Array:
    """Numbers as JavaScript literals (Arrow's shortest round-trip text; NaN as ``NaN``)."""
    a = pa.array(np.asarray(values))
    text = pc.cast(a, pa.string())
    if pa.types.is_floating(a.type):
        text = pc.if_else(pc.is_nan(a), "NaN", text)
    return text


def _quoted(strings: pa.Array) -> pa.Array:
    """Strings as JSON string literals."""
    s = pc.replace_substring(pc.replace_substring(strings, "\\", "\\\\"), '"', '\\"')
    if pc.any(pc.match_substring_regex(s, "[\\x00-\\x1f]")).as_py():  # rare: let json do it
        return pa.array([json.dumps(x) for x in strings.to_pylist()], pa.string())
    return pc.binary_join_element_wise('"', s, '"', "")


def chunk_parts(ops: pd.DataFrame, label: pa.Array) -> Iterator[tuple[int, bytes]]:
    """(chunk, its rows as the JSON array text ``[[start,dur,lane,t,index,label],...]``) for
    each chunk ``ops`` touch, in chunk order (an operation's label: ``label[row]``). The rows
    are made as one Arrow string array, each ending with a comma, ordered by chunk: a chunk's
    rows are then one slice of its data."""
    if not len(ops):
        return
    rows = pc.binary_join_element_wise(
        "[", _numbers(ops["start_ms"]), ",", _numbers(ops["dur_ms"]), ",",
        _numbers(ops["lane"]), ",", _numbers(ops["t"]), ",", _numbers(ops["index"]), ",",
        _quoted(label.take(pa.array(ops["row"].to_numpy()))), "],", "")
    chunk = ops["chunk"].to_numpy()
    order = np.argsort(chunk, kind="stable")
    rows = pa.concat_arrays([rows.take(pa.array(order))])  # offset 0, data in chunk order
    chunk = chunk[order]
    offsets = np.frombuffer(rows.buffers()[1], np.int32)[:len(rows) + 1]
    data = memoryview(rows.buffers()[2])
    starts = np.flatnonzero(np.r_[True, chunk[1:] != chunk[:-1]])
    ends = np.r_[starts[1:], len(chunk)]
    for a, b in zip(starts, ends):
        yield int(chunk[a]), b"[" + bytes(data[offsets[a]:offsets[b] - 1]) + b"]"


def with_carried(ops: pd.DataFrame, chunk_s: float) -> pd.DataFrame:
    """``ops`` plus, for each operation running past its own chunk, a copy in every later chunk
    it overlaps (same index: the page draws an index once)."""
    last = ((ops["start_ms"] + ops["dur_ms"]) / 1000 // chunk_s).astype(int)
    span = (last - ops["chunk"]).clip(lower=0)
    long = ops[span > 0]
    if long.empty:
        return ops
    copies = long.loc[long.index.repeat(span[span > 0])].copy()
    copies["chunk"] += copies.groupby(level=0).cumcount() + 1
    return pd.concat([ops, copies], ignore_index=True)


def write_timeline(run_dir: Path, progress=None) -> Path:
    """Write ``timeline.html`` and its chunks, streaming the history: each batch of operations
    is appended to the chunk files it falls in (``TL.part``), and every chunk file ends with
    ``TL.chunk(N)`` once the history is through. ``progress(line)`` hears how far."""
    from . import frames
    return frames.one_pass(run_dir, [TimelinePass(run_dir)], progress, "timeline")[0]


class TimelinePass:
    """The timeline as one consumer of ``frames.one_pass``."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.out = self.run_dir / "timeline"
        self.written: set[int] = set()
        self.count = 0

    def start(self, span) -> None:
        if self.out.exists():
            shutil.rmtree(self.out)
        self.out.mkdir()
        self.span = span
        n = max(span.rows // 2, 1)
        self.chunk_s = max(0.25, round(span.end_s * TARGET_OPS_PER_CHUNK / n, 2)) \
            if span.end_s else 1.0
        self.lane = {p: i for i, p in enumerate(span.processes)}

    def add(self, p: pd.DataFrame) -> None:
        ops = timeline_ops(p, self.span.end_ns)
        self.count += len(ops)
        ops["lane"] = ops["process"].map(self.lane)
        ops["t"] = ops["type"].map(TYPES)
        ops["chunk"] = (ops["start_ms"] / 1000 // self.chunk_s).astype(int)
        for k, text in chunk_parts(with_carried(ops, self.chunk_s), labels(p)):
            with open(self.out / f"c-{k}.js", "ab") as f:
                f.write(b"TL.part(%d,%s);\n" % (k, text))
            self.written.add(k)

    def finish(self, nemesis: pd.DataFrame) -> Path:
        for k in self.written:
            with open(self.out / f"c-{k}.js", "a") as f:
                f.write(f"TL.chunk({k});\n")
        end_s = self.span.end_s
        meta = {"end_s": end_s, "chunk_s": self.chunk_s, "lanes": self.span.processes,
                "ops": self.count, "chunks": sorted(self.written),
                "faults": [[k, s, e, lbl] for k, s, e, lbl in fault_intervals(nemesis, end_s)],
                "colours": FAULT_COLOURS}
        (self.out / "index.js").write_text(f"TL.index({json.dumps(meta)});\n")
        page = self.run_dir / "timeline.html"
        page.write_text(PAGE)
        return page


PAGE = r"""<!doctype html><html><head><meta charset='utf-8'><title>chaoskraft timeline</title>
<style>body{font-family:system-ui,sans-serif;margin:16px} #controls{margin-bottom:8px}
canvas{border:1px solid #ccc} #detail{font:12px monospace;margin-top:6px;white-space:pre}</style>
</head><body>
<div id='controls'><button id='prev'>&#9664;</button> <button id='next'>&#9654;</button>
window <select id='win'><option>1</option><option>5</option><option selected>10</option>
<option>30</option><option>60</option><option>300</option></select> s from
<input id='t' size='8' value='0'> s <button id='go'>go</button> <span id='status'>loading</span></div>
<canvas id='tl' width='1200' height='200'></canvas><div id='detail'></div>
<script>
const TL = {meta: null, chunks: {}, t0: 0, w: 10, mark: null, started: performance.now(),
            drawnOnce: false};
TL.index = function (meta) { TL.meta = meta; };
TL.parts = {};
// a chunk file is TL.part(N, rows) lines, then TL.chunk(N) when all of them are in
TL.part = function (n, rows) { (TL.parts[n] = TL.parts[n] || []).push(...rows); };
TL.chunk = function (n, rows) {
  TL.chunks[n] = (TL.parts[n] || []).concat(rows || []); delete TL.parts[n];
  if (TL.ready()) draw();
};
TL.needed = function () {
  const cs = TL.meta.chunk_s, have = new Set(TL.meta.chunks), out = [];
  for (let k = Math.floor(TL.t0 / cs); k <= Math.floor((TL.t0 + TL.w) / cs); k++)
    if (have.has(k)) out.push(k);
  return out;
};
TL.ready = function () { return TL.needed().every(k => k in TL.chunks); };
function load() {
  for (const k of TL.needed()) {
    if (k in TL.chunks || document.getElementById('c' + k)) continue;
    const s = document.createElement('script');
    s.id = 'c' + k; s.src = 'timeline/c-' + k + '.js';
    document.body.appendChild(s);
  }
  if (TL.ready()) draw();
}
function show(t0, w) {
  TL.t0 = Math.max(0, t0); TL.w = w;
  document.getElementById('t').value = TL.t0.toFixed(2);
  // drop chunks far from the window: memory stays bounded however long the run
  for (const k of Object.keys(TL.chunks)) {
    const t = k * TL.meta.chunk_s;
    if (t < TL.t0 - 10 * w || t > TL.t0 + 11 * w) { delete TL.chunks[k];
      const s = document.getElementById('c' + k); if (s) s.remove(); }
  }
  load();
}
const colours = ['#2ca02c', '#d62728', '#ff7f0e', '#999999'];
let visible = [];
function draw() {
  const c = document.getElementById('tl'), lanes = TL.meta.lanes, lh = 14, left = 70;
  c.height = lanes.length * lh + 20;
  const g = c.getContext('2d'), W = c.width - left, t0 = TL.t0 * 1000, t1 = (TL.t0 + TL.w) * 1000;
  const x = t => left + (t - t0) / (t1 - t0) * W;
  g.clearRect(0, 0, c.width, c.height);
  for (const [kind, s, e] of TL.meta.faults) {
    if (e * 1000 < t0 || s * 1000 > t1) continue;
    g.fillStyle = TL.meta.colours[kind] || '#999'; g.globalAlpha = 0.18;
    g.fillRect(Math.max(left, x(s * 1000)), 0, Math.min(c.width, x(e * 1000)) - Math.max(left, x(s * 1000)), c.height - 20);
  }
  g.globalAlpha = 1; g.font = '10px sans-serif'; g.fillStyle = '#333';
  lanes.forEach((p, i) => g.fillText('p ' + p, 2, i * lh + 11));
  visible = [];
  const drawn = new Set();  // an operation spanning chunks is in each of them
  for (const k of TL.needed()) for (const op of TL.chunks[k]) {
    const [start, dur, lane, t, index] = op;
    if (start > t1 || start + dur < t0 || drawn.has(index)) continue;
    drawn.add(index);
    const a = Math.max(left, x(start)), b = Math.max(a + 1, Math.min(c.width, x(start + dur)));
    g.fillStyle = colours[t]; g.fillRect(a, lane * lh + 2, b - a, lh - 4);
    if (TL.mark === index) { g.strokeStyle = '#000'; g.lineWidth = 2; g.strokeRect(a - 1, lane * lh + 1, b - a + 2, lh - 2); }
    visible.push([a, b, lane, op]);
  }
  g.fillStyle = '#333';
  for (let i = 0; i <= 10; i++) g.fillText((TL.t0 + TL.w * i / 10).toFixed(2) + ' s', left + W * i / 10 - 10, c.height - 4);
  const ms = performance.now() - TL.started;
  document.getElementById('status').textContent = visible.length + ' of ' + TL.meta.ops +
    ' operations in view; first drawn ' + (TL.firstMs || (TL.firstMs = ms)).toFixed(0) + ' ms after opening';
  window.TL_READY = true;
}
document.getElementById('tl').addEventListener('click', ev => {
  const r = ev.target.getBoundingClientRect(), px = ev.clientX - r.left, lane = Math.floor((ev.clientY - r.top) / 14);
  const hit = visible.find(([a, b, l]) => l === lane && px >= a - 1 && px <= b + 1);
  if (hit) { const [start, dur, , t, index, label] = hit[3];
    document.getElementById('detail').textContent = 'op ' + index + ' (' + ['ok', 'fail', 'info', 'open'][t] +
      ') process ' + TL.meta.lanes[lane] + ' at ' + (start / 1000).toFixed(3) + ' s for ' + dur.toFixed(1) + ' ms: ' + label; }
});
document.getElementById('prev').onclick = () => show(TL.t0 - TL.w, TL.w);
document.getElementById('next').onclick = () => show(TL.t0 + TL.w, TL.w);
document.getElementById('go').onclick = () => show(parseFloat(document.getElementById('t').value) || 0, TL.w);
document.getElementById('win').onchange = ev => show(TL.t0, parseFloat(ev.target.value));
const s = document.createElement('script');
s.src = 'timeline/index.js';
s.onload = () => {
  const h = new URLSearchParams(location.hash.slice(1));
  if (h.has('op')) TL.mark = parseInt(h.get('op'));
  show(h.has('t') ? Math.max(0, parseFloat(h.get('t')) - TL.w / 2) : 0, TL.w);
};
document.body.appendChild(s);
</script></body></html>
"""
