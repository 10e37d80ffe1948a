"""``chaoskraft serve``: a local web page over the stored runs.

``/`` lists every run under the results directory (test, start time, seed,
workload, verdict, anomaly counts), newest first, with a filter box (any
text: a test, a verdict, an anomaly class) and the same filter as ``?q=``
for links; each row links to the run's ``report.html``, its timeline and
its files. Everything under the results directory is served as static
files; nothing outside it. Binds 127.0.0.1 unless told otherwise.
"""
from __future__ import annotations

import html
import mimetypes
import sys
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from core.run_dir import RunDir, RunDirError

from .across import find_runs

PAGE = """<!doctype html><html><head><meta charset='utf-8'><title>chaoskraft runs</title>
<style>body{{font-family:system-ui,sans-serif;margin:24px}} table{{border-collapse:collapse;
font-size:13px}} td,th{{border:1px solid #ddd;padding:3px 8px;text-align:left}}
.valid{{color:#2ca02c}} .invalid{{color:#d62728;font-weight:bold}} .unknown{{color:#ff7f0e}}
input{{font-size:14px;padding:4px;width:24em}}</style></head><body>
<h1>chaoskraft runs in {root}</h1>
<form method='get'><input id='filter' name='q' value='{q}' placeholder='filter: test, verdict,
anomaly, seed ...' oninput='filterRows(this.value)'> <span id='count'>{n} runs</span></form>
<table id='runs'><tr><th>test</th><th>started</th><th>seed</th><th>workload</th><th>verdict</th>
<th>anomalies</th><th>links</th></tr>
{rows}
</table>
<script>
function filterRows(q) {{
  q = q.toLowerCase(); let n = 0;
  for (const tr of document.querySelectorAll('tr.run')) {{
    const show = tr.textContent.toLowerCase().includes(q);
    tr.style.display = show ? '' : 'none'; if (show) n++;
  }}
  document.getElementById('count').textContent = n + ' runs';
}}
</script></body></html>"""


def run_summary(root: Path, d: Path) -> dict:
    """One row of the run list; a run whose results.json or config.yaml cannot be read is
    still listed, its verdict "unreadable" and the reason in its anomalies column."""
    rd = RunDir(d)
    counts: dict = {}
    try:
        results = rd.results()
    except RunDirError as exc:
        results = {"verdict": "unreadable"}
        counts[str(exc)] = 1
    try:
        cfg = rd.config()
    except RunDirError as exc:
        cfg = {}
        counts[str(exc)] = 1
    for name, r in results.get("checkers", {}).items():
        if "anomalies" in r:  # a checker that names anomaly classes (the queue's)
            counts.update({k: v.get("count", 0) for k, v in r.get("anomalies", {}).items()})
        elif r.get("valid") is False:
            counts[name] = len(r.get("invalid_keys") or [1])
    return {"path": d.relative_to(root).as_posix(), "test": cfg.get("test", d.parent.name),
            "started": d.name.split("-")[0], "seed": cfg.get("seed", ""),
            "workload": cfg.get("workload", ""), "verdict": results.get("verdict", "?"),
            "anomalies": counts, "report": (d / "report.html").exists(),
            "timeline": (d / "timeline.html").exists()}


def list_page(root: Path, q: str = "") -> str:
    runs = [run_summary(root, d) for d in find_runs(root)]
    runs.sort(key=lambda r: r["started"], reverse=True)
    esc = html.escape
    rows = []
    for r in runs:
        anomalies = ", ".join(f"{k} {v}" for k, v in sorted(r["anomalies"].items())) or "-"
        text = " ".join(str(x) for x in (r["test"], r["started"], r["seed"], r["workload"],
                                         r["verdict"], anomalies)).lower()
        if q and q.lower() not in text:
            continue
        base = "/files/" + urllib.parse.quote(r["path"])
        links = [f"<a class='report' href='{base}/report.html'>report</a>"] if r["report"] else []
        if r["timeline"]:
            links.append(f"<a href='{base}/timeline.html'>timeline</a>")
        links.append(f"<a href='{base}/'>files</a>")
        rows.append(f"<tr class='run'><td>{esc(str(r['test']))}</td><td>{esc(r['started'])}</td>"
                    f"<td>{esc(str(r['seed']))}</td><td>{esc(str(r['workload']))}</td>"
                    f"<td class='{esc(r['verdict'])}'>{esc(r['verdict'])}</td>"
                    f"<td>{esc(anomalies)}</td><td>{' '.join(links)}</td></tr>")
    return PAGE.format(root=esc(str(root)), q=esc(q), n=len(rows), rows="\n".join(rows))


def make_handler(root: Path):
    root = root.resolve()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args) -> None:  # quiet: one line per request to stderr
            sys.stderr.write(f"serve: {self.address_string()} {fmt % args}\n")

        def send(self, status: int, body: bytes, ctype: str = "text/html; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            if url.path in ("/", "/index.html"):
                q = urllib.parse.parse_qs(url.query).get("q", [""])[0]
                self.send(200, list_page(root, q).encode())
                return
            if not url.path.startswith("/files/"):
                self.send(404, b"not found")
                return
            rel = urllib.parse.unquote(url.path[len("/files/"):])
            target = (root / rel).resolve()
            if target != root and root not in target.parents:
                self.send(HTTPStatus.FORBIDDEN, b"outside the results directory")
                return
            if target.is_dir():
                items = sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())
                body = "<!doctype html><ul>" + "".join(
                    f"<li><a href='{urllib.parse.quote(i)}'>{html.escape(i)}</a></li>"
                    for i in items) + "</ul>"
                self.send(200, body.encode())
                return
            if not target.is_file():
                self.send(404, b"not found")
                return
            ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
            if target.suffix in (".jsonl", ".log", ".yaml", ".txt"):
                ctype = "text/plain; charset=utf-8"
            self.send(200, target.read_bytes(), ctype)
    return Handler


def make_server(root: str | Path, host: str = "127.0.0.1", port: int = 8088) -> ThreadingHTTPServer:
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no results directory {root}")
    return ThreadingHTTPServer((host, port), make_handler(root))


def serve(root: str | Path, host: str = "127.0.0.1", port: int = 8088) -> int:
    server = make_server(root, host, port)
    print(f"serving {Path(root).resolve()} on http://{host}:{server.server_address[1]}/ "
          f"(Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
