"""SVG drawings: a key's log as every operation saw it, and a counterexample as Porcupine
draws one."""
from __future__ import annotations

import html


ROLE_COLOURS = {"linearized": "#2ca02c", "concurrent": "#9e9e9e", "stuck": "#d62728"}


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
