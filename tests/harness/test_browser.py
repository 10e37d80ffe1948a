"""The pages in headless Chromium: a report's elements, the timeline's windowed loading, and
`chaoskraft serve` from the run list through to a report."""
import http.client
import json
import threading

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from harness.report import render
from harness.serve import make_server
from harness.timeline import write_timeline
from synthetic_runs import make_runs
from test_linpage import register_run
from test_report import make_run

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]  # one Chromium


def wait_ready(browser, timeout_s=20):
    WebDriverWait(browser, timeout_s).until(lambda d: d.execute_script("return window.TL_READY === true"))


def test_report_renders_with_plots_anomalies_and_links(browser, tmp_path):
    lost = make_run(tmp_path)
    render(tmp_path)
    write_timeline(tmp_path)
    browser.get((tmp_path / "report.html").as_uri())
    assert browser.title.startswith("chaoskraft report")
    plots = browser.find_elements(By.CSS_SELECTOR, "img.plot")
    assert len(plots) == 5
    for img in plots:  # decoded and laid out, not broken images
        assert browser.execute_script("return arguments[0].naturalWidth", img) > 600
        assert img.size["width"] > 300
    assert browser.find_element(By.ID, "verdict").text == "Verdict: invalid"
    assert browser.find_element(By.CSS_SELECTOR, "h3.anomaly").text == "lost-write: 1"
    browser.find_element(By.CSS_SELECTOR, f"a[href='#op-{lost}']").click()
    assert browser.execute_script("return location.hash") == f"#op-{lost}"
    row = browser.find_element(By.ID, f"op-{lost}")
    assert row.is_displayed() and "send" in row.text
    browser.save_screenshot(str(tmp_path / "report.png"))
    # an operation's index opens the timeline at that operation
    row.find_element(By.TAG_NAME, "a").click()
    wait_ready(browser)
    assert f"op={lost}" in browser.current_url
    assert browser.execute_script("return TL.mark") == lost


def test_the_report_shows_what_the_run_reached_and_what_was_stuck(browser, tmp_path):
    """The coverage section, counted from the run's node logs by the same code analysis runs
    (harness.coverage), and the liveness anomaly, in the page as a person sees it."""
    import json
    from harness.coverage import coverage
    make_run(tmp_path)
    log = tmp_path / "nodes" / "n2" / "node.log"
    log.write_text(log.read_text() + "".join(
        f"2026-11-26 17:00:0{i},000 INFO chaoskraft.node: reached {e}: {what}\n"
        for i, (e, what) in enumerate([("isr-shrink", "queue-0: ISR [1, 2, 3] -> [1, 3]"),
                                       ("isr-shrink", "queue-1: ISR [2, 3, 4] -> [3, 4]"),
                                       ("partition-leader-elected", "queue-0: leader n3")])))
    results = json.loads((tmp_path / "results.json").read_text())
    results["coverage"] = coverage(tmp_path, ["kill", "strand-replica"], partitions=True)
    results["liveness"] = {"checked": True, "bound_s": 90, "took_s": 90.1, "stuck": [
        {"what": "partition 1", "partition": 1, "detail": "ISR [3, 4] lacks replicas [2]",
         "since_s": 88.5}]}
    (tmp_path / "results.json").write_text(json.dumps(results))
    render(tmp_path)
    browser.get((tmp_path / "report.html").as_uri())
    table = browser.find_element(By.ID, "coverage")
    rows = {r.find_elements(By.TAG_NAME, "td")[0].text: r
            for r in table.find_elements(By.CSS_SELECTOR, "tr")[1:]}
    shrink = [td.text for td in rows["isr-shrink"].find_elements(By.TAG_NAME, "td")]
    assert shrink[:4] == ["isr-shrink", "2", "n2", "kill, strand-replica"], shrink
    assert rows["partition-offline"].get_attribute("class") == "not-reached"
    assert "intended and never reached" in browser.find_element(
        By.XPATH, "//h2[starts-with(., 'Coverage')]").text
    stuck = browser.find_element(By.ID, "stuck")
    assert stuck.is_displayed() and "ISR [3, 4] lacks replicas [2]" in stuck.text
    assert "Liveness anomaly" in browser.find_element(By.ID, "liveness").text
    browser.execute_script("arguments[0].scrollIntoView()", stuck)
    browser.save_screenshot(str(tmp_path / "coverage.png"))


def test_a_key_that_is_not_linearizable_gets_a_page_to_follow_it(browser, tmp_path):
    """From the report to the key's page: hovering an operation shows the state it met and
    left, the slider walks the prefix, the partition is a band on the same axis."""
    from selenium.webdriver.common.action_chains import ActionChains
    register_run(tmp_path)
    render(tmp_path)
    browser.get((tmp_path / "report.html").as_uri())
    browser.find_element(By.CSS_SELECTOR, "a.lin-page").click()
    WebDriverWait(browser, 20).until(lambda d: d.execute_script("return window.LIN_READY === true"))
    assert "cannot follow it" in browser.find_element(By.ID, "head").text
    info = browser.find_element(By.ID, "info")
    first = browser.find_element(By.CSS_SELECTOR, "g.op.linearized[data-order='0']")
    ActionChains(browser).move_to_element(first).perform()
    assert "write 1" in info.text and "state before nil, after 1" in info.text, info.text
    stuck = browser.find_element(By.CSS_SELECTOR, "g.op.stuck")
    ActionChains(browser).move_to_element(stuck).perform()
    assert "read -> 1" in info.text and "cannot follow the prefix" in info.text, info.text
    assert "this operation is illegal there" in info.text
    band = browser.find_element(By.CSS_SELECTOR, "g.fault[data-kind='partition']")
    assert "start-partition" in band.text
    # the partition began at 1.0 s, between the first write (0.5-0.6 s) and the read (1.5 s)
    xs = [browser.execute_script("return arguments[0].getBBox().x", e)
          for e in (first, band, stuck)]
    assert xs[0] < xs[1] < xs[2], xs
    browser.execute_script("const s = document.getElementById('step'); s.value = 1;"
                           "s.dispatchEvent(new Event('input'))")
    assert browser.find_element(By.ID, "step-state").text.startswith("after step 1 of ")
    assert browser.find_element(By.ID, "step-state").text.endswith("state 1")
    later = browser.find_elements(By.CSS_SELECTOR, "g.op.linearized:not([data-order='0'])")
    assert later and all("faded" in e.get_attribute("class") for e in later)
    assert "faded" not in first.get_attribute("class")
    browser.save_screenshot(str(tmp_path / "lin.png"))


def test_timeline_loads_only_the_window_it_shows(browser, tmp_path):
    import json

    from checkers.parquet import write_parquet
    rows = []
    for i in range(200_000):  # 100,000 operations over 1,000 s on 20 processes
        t = i * 5_000_000
        p = (i // 2) % 20
        if i % 2 == 0:
            rows.append({"index": i, "time": t, "process": p, "type": "invoke", "f": "write",
                         "key": "k", "value": i})
        else:
            rows.append({"index": i, "time": t + 1_000_000, "process": p, "type": "ok",
                         "f": "write", "key": "k", "value": i - 1})
    write_parquet(rows, tmp_path / "history.parquet")
    (tmp_path / "results.json").write_text(json.dumps({"valid": True, "checkers": {}}))
    write_timeline(tmp_path)
    chunks = len(list((tmp_path / "timeline").glob("c-*.js")))
    assert chunks > 10
    browser.get((tmp_path / "timeline.html").as_uri())
    wait_ready(browser)
    loaded = browser.execute_script("return Object.keys(TL.chunks).length")
    assert 1 <= loaded < chunks / 3, (loaded, chunks)
    status = browser.find_element(By.ID, "status").text
    assert "of 100000 operations in view" in status, status
    before = browser.execute_script("return TL.t0")
    browser.find_element(By.ID, "next").click()
    WebDriverWait(browser, 10).until(lambda d: d.execute_script("return TL.t0") > before)
    wait_ready(browser)
    assert browser.execute_script("return TL.ready()")


def test_timeline_draws_an_operation_that_began_long_before_the_window(browser, tmp_path):
    import json

    from checkers.parquet import write_parquet
    # process 0 invokes at 0 s and never completes; process 1 reads every millisecond for 100 s
    rows = [{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "write", "key": "k", "value": 1}]
    for i in range(100_000):
        t = (i + 1) * 1_000_000
        rows.append({"index": 2 * i + 1, "time": t, "process": 1, "type": "invoke", "f": "read", "key": "k"})
        rows.append({"index": 2 * i + 2, "time": t + 500_000, "process": 1, "type": "ok", "f": "read",
                     "key": "k", "value": 1})
    write_parquet(rows, tmp_path / "history.parquet")
    (tmp_path / "results.json").write_text(json.dumps({"valid": True, "checkers": {}}))
    write_timeline(tmp_path)
    meta = json.loads((tmp_path / "timeline" / "index.js").read_text()[len("TL.index("):-len(");\n")])
    assert meta["chunk_s"] * 3 < 80, meta["chunk_s"]  # the window is many chunks after the start
    browser.get((tmp_path / "timeline.html").as_uri() + "#t=85")
    wait_ready(browser)
    assert browser.execute_script("return TL.t0") > 70
    drawn = browser.execute_script("return visible.map(v => v[3][4])")
    assert 0 in drawn, "the operation still open at the window is drawn"
    assert len(drawn) == len(set(drawn)), "each operation once, though it is in several chunks"
    assert browser.execute_script("return visible.find(v => v[3][4] === 0)[3][3]") == 3  # never completed


def test_serve_lists_runs_and_clicks_through_to_a_report(browser, tmp_path):
    dirs = make_runs(tmp_path, 22)
    for d in dirs:  # the invalid runs' reports, which the filter shows and one is opened
        if not json.loads((d / "results.json").read_text())["valid"]:
            render(d)
    server = make_server(tmp_path, "127.0.0.1", 0)
    assert server.server_address[0] == "127.0.0.1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        browser.get(base)
        rows = browser.find_elements(By.CSS_SELECTOR, "tr.run")
        assert len(rows) == 22, "each run once (the latest link does not count twice)"
        invalid = [r for r in rows if "invalid" in r.text]
        box = browser.find_element(By.ID, "filter")
        box.send_keys("invalid")  # the filter runs on each input event
        shown = [r for r in rows if r.is_displayed()]
        assert len(shown) == len(invalid) > 0
        assert browser.find_element(By.ID, "count").text == f"{len(invalid)} runs"
        shown[0].find_element(By.CSS_SELECTOR, "a.report").click()
        WebDriverWait(browser, 10).until(lambda d: d.title.startswith("chaoskraft report"))
        assert "Verdict: invalid" in browser.find_element(By.ID, "verdict").text
        assert len(browser.find_elements(By.CSS_SELECTOR, "img.plot")) == 5
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
        conn.request("GET", "/files/%2e%2e/%2e%2e/%2e%2e/etc/passwd")
        answer = conn.getresponse()
        assert answer.status == 403 and b"root:" not in answer.read()
    finally:
        server.shutdown()
        server.server_close()
