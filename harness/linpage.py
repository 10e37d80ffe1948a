"""One self-contained page per key that is not linearizable, as Porcupine's visualization
draws it: every process a row, every operation a bar from its call to its return on the
run's time axis, the nemesis's faults as bands on the same axis, the longest linearizable
prefix numbered in its order and the operation that cannot follow it in red. Hovering an
operation shows the state it met and the one it left (for the prefix, its own step; for the
others, what they would do right after the prefix); the slider walks the prefix one step at
a time and shows the state after each.

The data is the checker's diagram (``checkers.lin_model.diagram``) plus the wall time of the
history rows it names; the page needs nothing but itself (no network, no other file).
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

ROLE_COLOURS = {"linearized": "#1f77b4", "concurrent": "#7f7f7f", "stuck": "#d62728"}


def file_name(key: str) -> str:
    """The page's file name for ``key`` (safe in a URL and on every file system)."""
    return "lin-" + (re.sub(r"[^A-Za-z0-9_.-]", "_", str(key))[:80] or "_") + ".html"


def page_data(key: str, d: dict, times: dict[int, float] | None,
              faults: list[tuple[str, float, float, str]]) -> dict:
    """What the page draws. ``times``: seconds since the history began of history rows by
    index (call and return positions of ``d``'s operations); without all of them the axis is
    the history position instead and the faults are left out (they have no position)."""
    ops = d.get("operations") or []
    wanted = {o["call"] for o in ops} | {o["return"] for o in ops if o["return"] is not None}
    timed = bool(times) and all(int(i) in times for i in wanted)
    rows = []
    for o in ops:
        call = times[int(o["call"])] if timed else o["call"]
        ret = None if o["return"] is None else (times[int(o["return"])] if timed else o["return"])
        rows.append({**o, "t0": call, "t1": ret})
    lo = min((r["t0"] for r in rows), default=0.0)
    hi = max([r["t1"] for r in rows if r["t1"] is not None] + [r["t0"] for r in rows] + [lo])
    pad = (hi - lo) * 0.05 or (0.5 if timed else 1)
    lo, hi = lo - pad, hi + pad
    bands = [{"kind": k, "start": s, "end": e, "label": label}
             for k, s, e, label in (faults if timed else []) if e >= lo and s <= hi]
    return {"key": str(key), "axis": "s" if timed else "position", "lo": lo, "hi": hi,
            "prefix_length": d.get("prefix_length", 0), "shown_from": d.get("shown_from", 0),
            "processes": d.get("processes") or sorted({r["process"] for r in rows}),
            "operations": rows, "faults": bands,
            "state_after_prefix": d.get("state_after_prefix")}


def page(data: dict, title: str = "") -> str:
    """The HTML of one key's page (see ``page_data``)."""
    esc = html.escape
    blob = json.dumps(data).replace("</", "<\\/")
    stuck = next((o for o in data["operations"] if o["role"] == "stuck"), None)
    head = (f"key {esc(data['key'])}: the longest linearizable prefix has "
            f"{data['prefix_length']} operations")
    if stuck is not None:
        head += (f"; <span class='stuck'>{esc(stuck['op'])}</span> (process "
                 f"{esc(stuck['process'])}, history index {stuck['index']}) cannot follow it")
    return PAGE.format(title=esc(title or f"key {data['key']}"), head=head, data=blob,
                       colours=json.dumps(ROLE_COLOURS), steps=len(
                           [o for o in data["operations"] if o["order"] is not None]))


def write_pages(run_dir: Path, diagrams: dict[str, dict], times: dict[int, float] | None,
                faults: list[tuple[str, float, float, str]]) -> dict[str, str]:
    """Write a page per invalid key into ``run_dir``; returns key -> file name."""
    out = {}
    for key, d in diagrams.items():
        name = file_name(key)
        (Path(run_dir) / name).write_text(page(page_data(key, d, times, faults),
                                               f"{Path(run_dir).name}: key {key}"))
        out[key] = name
    return out


def needed_indexes(diagrams: dict[str, dict]) -> set[int]:
    """The history rows whose times the pages need."""
    return {int(i) for d in diagrams.values() for o in d.get("operations") or []
            for i in (o["call"], o["return"]) if i is not None}


PAGE = """<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>
body{{font-family:system-ui,sans-serif;margin:20px;color:#222}}
h1{{font-size:18px}} .stuck{{color:#d62728}}
#info{{position:sticky;top:0;background:#fffbe6;border:1px solid #e5d9a6;padding:6px 10px;
min-height:3.2em;font-size:14px;white-space:pre-wrap}}
svg text{{font-size:11px}} g.op{{cursor:default}} g.op.faded{{opacity:.25}}
g.op.hover rect{{stroke:#000;stroke-width:2}} .legend span{{display:inline-block;padding:1px 6px;
margin-right:4px;color:#fff;font-size:12px}} #controls{{margin:8px 0;font-size:14px}}
</style></head><body>
<h1 id='head'>{head}</h1>
<p class='legend'><span style='background:#1f77b4'>linearized (numbered in order)</span><span
style='background:#7f7f7f'>concurrent with the red one</span><span style='background:#d62728'>cannot
follow the prefix</span><span style='background:#f2b8b8;color:#222'>fault</span> dashed: never
returned. Hover an operation for the state before and after it.</p>
<div id='controls'><label>prefix step <input id='step' type='range' min='0' max='{steps}'
value='{steps}'></label> <span id='step-state'></span></div>
<div id='info'>hover an operation</div>
<div style='overflow-x:auto'><svg id='chart' xmlns='http://www.w3.org/2000/svg'></svg></div>
<script type='application/json' id='data'>{data}</script>
<script>
(function(){{
const D = JSON.parse(document.getElementById('data').textContent);
const COL = {colours};
const NS = 'http://www.w3.org/2000/svg';
const svg = document.getElementById('chart'), info = document.getElementById('info');
const left = 100, right = 20, rowH = 28, top = 34;
const width = Math.max(1100, 60 * D.operations.length);
const height = top + rowH * D.processes.length + 40;
svg.setAttribute('width', width); svg.setAttribute('height', height + 10);
const scale = (width - left - right) / Math.max(1e-9, D.hi - D.lo);
const X = t => left + (t - D.lo) * scale;
const fmt = t => D.axis === 's' ? t.toFixed(3) + ' s' : 'position ' + t;
function el(tag, attrs, text) {{
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  svg.appendChild(e); return e;
}}
D.faults.forEach((f, i) => {{
  const x1 = X(Math.max(f.start, D.lo)), x2 = X(Math.min(f.end, D.hi));
  const g = el('g', {{'class': 'fault', 'data-kind': f.kind}});
  const r = document.createElementNS(NS, 'rect');
  Object.entries({{x: x1, y: 14, width: Math.max(2, x2 - x1), height: height - 40,
    fill: '#f2b8b8', 'fill-opacity': 0.45}}).forEach(([k, v]) => r.setAttribute(k, v));
  const t = document.createElementNS(NS, 'text');
  t.setAttribute('x', x1 + 2); t.setAttribute('y', 12 + 10 * (i % 2)); t.textContent = f.label;
  g.appendChild(r); g.appendChild(t); svg.appendChild(g);
  g.addEventListener('mouseenter', () => info.textContent =
    'fault: ' + f.label + '\\nfrom ' + fmt(f.start) + ' to ' + fmt(f.end));
}});
D.processes.forEach((p, i) => {{
  const y = top + i * rowH;
  el('text', {{x: 4, y: y + 17}}, 'process ' + p);
  el('line', {{x1: left, x2: width - right, y1: y + rowH - 2, y2: y + rowH - 2, stroke: '#eee'}});
}});
const bars = [];
D.operations.forEach(o => {{
  const y = top + D.processes.indexOf(o.process) * rowH + 3;
  const x1 = X(o.t0), open = o.t1 === null, x2 = open ? width - right : X(o.t1);
  const g = el('g', {{'class': 'op ' + o.role, 'data-index': o.index,
                     'data-order': o.order === null ? '' : o.order}});
  const r = document.createElementNS(NS, 'rect');
  Object.entries({{x: x1, y: y, width: Math.max(3, x2 - x1), height: rowH - 8, rx: 3,
    fill: COL[o.role] || '#999', 'fill-opacity': 0.9}}).forEach(([k, v]) => r.setAttribute(k, v));
  if (open) {{ r.setAttribute('stroke', '#000'); r.setAttribute('stroke-dasharray', '4 2'); }}
  const t = document.createElementNS(NS, 'text');
  t.setAttribute('x', x1 + 3); t.setAttribute('y', y + 14); t.setAttribute('fill', '#fff');
  t.textContent = (o.order === null ? '' : (o.order + 1) + '. ') + o.op;
  g.appendChild(r); g.appendChild(t);
  g.addEventListener('mouseenter', () => {{ g.classList.add('hover'); info.textContent = describe(o); }});
  g.addEventListener('mouseleave', () => g.classList.remove('hover'));
  bars.push([o, g]);
}});
const span = D.hi - D.lo, raw = span / 8, mag = Math.pow(10, Math.floor(Math.log10(raw || 1)));
const tick = [1, 2, 5, 10].map(m => m * mag).find(t => t >= raw) || raw;
for (let t = Math.ceil(D.lo / tick) * tick; t <= D.hi; t += tick) {{
  el('line', {{x1: X(t), x2: X(t), y1: height - 30, y2: height - 24, stroke: '#555'}});
  el('text', {{x: X(t) - 8, y: height - 14, fill: '#555', 'class': 'tick'}},
     D.axis === 's' ? t.toFixed(tick < 1 ? 1 : 0) : Math.round(t));
}}
el('text', {{x: 4, y: height - 14, fill: '#555'}}, D.axis === 's' ? 'seconds' : 'position');
el('text', {{x: left, y: height + 4, fill: '#555'}},
   (D.axis === 's' ? 'seconds since the history began: ' : 'history position: ')
   + D.lo.toFixed(D.axis === 's' ? 2 : 0) + ' to ' + D.hi.toFixed(D.axis === 's' ? 2 : 0));
function describe(o) {{
  const when = 'called ' + fmt(o.t0) + ', ' + (o.t1 === null ? 'never returned' : 'returned ' + fmt(o.t1));
  const head = o.op + ' (process ' + o.process + ', history index ' + o.index + '; ' + when + ')';
  if (o.role === 'linearized')
    return head + '\\nstep ' + (o.order + 1) + ' of the prefix: state before ' + o.before + ', after ' + o.after;
  const verdict = o.after === null ? 'illegal there' : 'legal there, state after ' + o.after;
  return head + '\\n' + (o.role === 'stuck' ? 'cannot follow the prefix' : 'concurrent with the red one')
    + ': after the prefix the state is ' + o.before + '; this operation is ' + verdict;
}}
const step = document.getElementById('step'), stepState = document.getElementById('step-state');
const steps = D.operations.filter(o => o.order !== null).sort((a, b) => a.order - b.order);
function show() {{
  const k = +step.value;  // the first k shown steps of the prefix
  const limit = k === 0 ? D.shown_from - 1 : steps[k - 1].order;
  bars.forEach(([o, g]) => g.classList.toggle('faded', o.order !== null && o.order > limit));
  const state = k === 0 ? (steps.length ? steps[0].before : D.state_after_prefix)
                        : steps[k - 1].after;
  stepState.textContent = 'after step ' + (limit + 1) + ' of ' + D.prefix_length + ': state ' + state;
}}
step.addEventListener('input', show); show();
window.LIN_READY = true;
}})();
</script></body></html>
"""
