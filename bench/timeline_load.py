"""The timeline of a synthetic 1,000,000-operation run in headless Chromium.

    python bench/timeline_load.py [--ops 1000000] [--processes 50] [--seconds 3600]

Writes a history (Parquet) of ``--ops`` operations spread over ``--seconds``
on ``--processes`` processes, with faults, then the timeline
(``harness.timeline.write_timeline``), opens ``timeline.html`` from disk in
headless Chromium (Debian's chromium and chromium-driver, through selenium)
and prints: the time to write the timeline, the time until the first window
is drawn, the time to jump to the middle of the run and draw it, and how
many chunks the page holds. No test asserts these numbers.
"""
import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checkers.parquet import write_parquet  # noqa: E402
from harness.timeline import write_timeline  # noqa: E402


def rows(ops: int, processes: int, seconds: float, seed: int = 1):
    rng = random.Random(seed)
    step_ns = int(seconds * 1e9 / ops)
    index = 0
    for i in range(ops):
        if i % 50_000 == 0:
            yield {"index": index, "time": i * step_ns, "process": "nemesis", "type": "info",
                   "f": "start-partition" if i % 100_000 == 0 else "stop-partition",
                   "value": {"shape": "halves"}}
            index += 1
        p = i % processes
        t = i * step_ns
        yield {"index": index, "time": t, "process": p, "type": "invoke", "f": "send",
               "key": f"k{i % 8}", "value": {"value": i}}
        index += 1
        yield {"index": index, "time": t + int(rng.expovariate(1 / 5e6)), "process": p,
               "type": rng.choice(("ok", "ok", "ok", "fail", "info")), "f": "send",
               "key": f"k{i % 8}", "value": {"value": i, "offset": i}}
        index += 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--processes", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=3600.0)
    args = ap.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait
    with tempfile.TemporaryDirectory(prefix="chaoskraft-timeline-") as d:
        run = Path(d)
        t = time.monotonic()
        write_parquet(rows(args.ops, args.processes, args.seconds), run / "history.parquet")
        (run / "results.json").write_text(json.dumps({"valid": True, "checkers": {}}))
        print(f"history: {args.ops:,} operations on {args.processes} processes over "
              f"{args.seconds:g} s, written in {time.monotonic() - t:.1f} s", flush=True)
        t = time.monotonic()
        page = write_timeline(run)
        chunks = list((run / "timeline").glob("c-*.js"))
        size = sum(p.stat().st_size for p in chunks)
        print(f"timeline written in {time.monotonic() - t:.1f} s: {len(chunks)} chunks, "
              f"{size / 1e6:.0f} MB in all", flush=True)
        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,1200"):
            opts.add_argument(a)
        b = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        try:
            t = time.monotonic()
            b.get(page.as_uri())
            WebDriverWait(b, 120).until(lambda d: d.execute_script("return window.TL_READY === true"))
            opened = time.monotonic() - t
            first = b.execute_script("return TL.firstMs")
            held = b.execute_script("return Object.keys(TL.chunks).length")
            print(f"opened and first window drawn: {opened * 1000:.0f} ms wall "
                  f"({first:.0f} ms by the page's clock); chunks held: {held}", flush=True)
            b.execute_script("window.TL_READY = false")
            t = time.monotonic()
            b.execute_script(f"show({args.seconds / 2}, 10)")
            WebDriverWait(b, 120).until(lambda d: d.execute_script("return window.TL_READY === true"))
            print(f"jump to {args.seconds / 2:g} s and draw: {(time.monotonic() - t) * 1000:.0f} ms; "
                  f"status: {b.find_element('id', 'status').text}", flush=True)
            heap = b.execute_script("return performance.memory ? performance.memory.usedJSHeapSize : null")
            if heap:
                print(f"page JS heap: {heap / 1e6:.0f} MB")
        finally:
            b.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
