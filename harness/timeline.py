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

import pandas as pd

from .report import FAULT_COLOURS, fault_intervals

TARGET_OPS_PER_CHUNK = 4000
TYPES = {"ok": 0, "fail": 1, "info": 2, "open": 3}


def timeline_ops(pairs: pd.DataFrame, end_ns: int) -> pd.DataFrame:
    """Operations of ``frames.pairs`` with start, duration, type and a short label; one never
    completed lasts to ``end_ns``, the history's end."""
    end = pairs["end"].astype(float).fillna(end_ns)
    value = pairs["value"].where(pairs["value"].notna() & (pairs["value"] != "null"), "")
    label = (pairs["f"].astype(str) + " " + pairs["key"].fillna("").astype(str) + " "
             + value.astype(str).str.slice(0, 40)).str.strip()
    return pd.DataFrame({"start_ms": (pairs["start"] / 1e6).round(3),
                         "dur_ms": ((end - pairs["start"]) / 1e6).round(3),
                         "process": pairs["process"], "type": pairs["type"],
                         "index": pairs["index"], "label": label})


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
    run_dir = Path(run_dir)
    span = frames.Span(run_dir)
    out = run_dir / "timeline"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    end_s = span.end_s
    n = max(span.rows // 2, 1)
    chunk_s = max(0.25, round(end_s * TARGET_OPS_PER_CHUNK / n, 2)) if end_s else 1.0
    lane = {p: i for i, p in enumerate(span.processes)}
    stream = frames.Stream(run_dir, progress, span.rows, "timeline")
    written: set[int] = set()
    count = 0
    for p in stream:
        ops = timeline_ops(p, span.end_ns)
        count += len(ops)
        ops["lane"] = ops["process"].map(lane)
        ops["t"] = ops["type"].map(TYPES)
        ops["chunk"] = (ops["start_ms"] / 1000 // chunk_s).astype(int)
        ops = with_carried(ops, chunk_s)
        for k, group in ops.groupby("chunk"):
            rows = group[["start_ms", "dur_ms", "lane", "t", "index", "label"]].values.tolist()
            with open(out / f"c-{k}.js", "a") as f:
                f.write(f"TL.part({k},{json.dumps(rows, separators=(',', ':'))});\n")
            written.add(int(k))
    for k in written:
        with open(out / f"c-{k}.js", "a") as f:
            f.write(f"TL.chunk({k});\n")
    nemesis = stream.nemesis
    meta = {"end_s": end_s, "chunk_s": chunk_s, "lanes": span.processes, "ops": count,
            "chunks": sorted(written),
            "faults": [[k, s, e, lbl] for k, s, e, lbl in fault_intervals(nemesis, end_s)],
            "colours": FAULT_COLOURS}
    (out / "index.js").write_text(f"TL.index({json.dumps(meta)});\n")
    page = run_dir / "timeline.html"
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
