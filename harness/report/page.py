"""The page itself: ``render`` writes ``report.html`` from a run directory."""
from __future__ import annotations

import html
import json
from pathlib import Path

from checkers.consistency_models import sentence as consistency_sentence
from checkers.queue import cycle_proof
from core.run_dir import HISTORY_START, RunDir
from node_image.coverage import EVENTS
from .series import FAULT_COLOURS, Series, _ops, fault_intervals, node_series
from .plots import checker_plots, plots
from .examples import _indexes, _named_sends, anomalies, plain
from .logs import lines_around, node_logs, timed_lines, tracebacks
from .svg import ROLE_COLOURS, counterexample_svg, key_log_svg


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


def render(run_dir: Path, window_s: float = 1.0, progress=None) -> Path:
    """Write ``run_dir/report.html``; returns its path. The history is streamed (twice: its
    span, then its operations), never held whole; ``progress(line)`` hears how far."""
    from .. import frames
    return frames.one_pass(run_dir, [ReportPass(run_dir, window_s)], progress, "report")[0]


class ReportPass:
    """The report as one consumer of ``frames.one_pass``: the series of every batch of
    operations, then the page."""

    def __init__(self, run_dir: Path, window_s: float = 1.0) -> None:
        self.run_dir, self.window_s = Path(run_dir), window_s

    def start(self, span) -> None:
        self.span, self.series = span, Series(span.end_s, self.window_s)

    def add(self, ops) -> None:
        self.series.add(_ops(ops))

    def finish(self, nemesis) -> Path:
        return _page(self.run_dir, self.span, self.series, nemesis)


def _page(run_dir: Path, span, series: Series, nemesis) -> Path:
    from .. import frames
    results = RunDir(run_dir).results()
    faults = fault_intervals(nemesis, span.end_s)
    per_node = node_series(nemesis, span.end_s)
    images = plots(series, faults, per_node) if series.ops else {}
    images.update(checker_plots(results, faults))
    logs = node_logs(run_dir)
    rd = RunDir(run_dir)
    start_wall = rd.history_start()["wall_clock_s"] if rd.has(HISTORY_START) else None
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
        from ..linpage import needed_indexes, write_pages
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
    from .. import sequence
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
