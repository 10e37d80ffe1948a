"""The interactive page of a key that is not linearizable: the states the checker's diagram
carries, the time axis shared with the nemesis, and the page wired into report.html. The
page in a browser is tested in test_browser.py."""
import json
import re

from checkers.linearizability import check
from checkers.models import get_model
from harness.linpage import file_name, page, page_data
from harness.report import render
from workloads.register_workload import RegisterWorkload

START_WALL = 1_790_000_000.0


def register_run(tmp_path):
    """A register run whose key r0 has a stale read: write 1, write 2 (both acknowledged),
    then a read of 1, while a partition is on. Checked by the register workload's own
    checker, as a Docker run is."""
    rows = []

    def row(t_s, process, type_, f, key=None, value=None):
        rows.append({"index": len(rows), "time": int(t_s * 1e9), "process": process,
                     "type": type_, "f": f, "key": key, "value": value, "node": None})
    row(0.5, 0, "invoke", "write", "r0", 1)
    row(0.6, 0, "ok", "write", "r0", 1)
    row(1.0, "nemesis", "invoke", "start-partition", value={"shape": "halves", "grudge": {}})
    row(1.0, "nemesis", "info", "start-partition", value={"shape": "halves", "grudge": {}})
    row(1.2, 1, "invoke", "write", "r0", 2)
    row(1.3, 1, "ok", "write", "r0", 2)
    row(1.5, 2, "invoke", "read", "r0", None)
    row(1.6, 3, "invoke", "write", "r0", 3)
    row(1.7, 2, "ok", "read", "r0", 1)
    row(1.9, 3, "ok", "write", "r0", 3)
    row(2.0, 4, "invoke", "read", "r0", None)
    row(2.1, 4, "ok", "read", "r0", 3)
    row(2.5, "nemesis", "invoke", "stop-partition")
    row(2.5, "nemesis", "info", "stop-partition")
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "history-start.json").write_text(json.dumps({"wall_clock_s": START_WALL}))
    results, _ = RegisterWorkload().check(tmp_path, {}, engine="local", spark_master=None,
                                          budget_s=30, log=lambda line: None)
    (tmp_path / "results.json").write_text(json.dumps(results))
    return results


def test_the_diagram_carries_each_step_state_before_and_after():
    rows = [dict(index=0, process=0, type="invoke", f="write", key="r0", value=1),
            dict(index=1, process=0, type="ok", f="write", key="r0", value=1),
            dict(index=2, process=1, type="invoke", f="write", key="r0", value=2),
            dict(index=3, process=1, type="ok", f="write", key="r0", value=2),
            dict(index=4, process=2, type="invoke", f="read", key="r0", value=None),
            dict(index=5, process=3, type="invoke", f="cas", key="r0", value=[7, 8]),
            dict(index=6, process=2, type="ok", f="read", key="r0", value=1),
            dict(index=7, process=3, type="ok", f="cas", key="r0", value=[7, 8])]
    hm = get_model("cas-register")
    for engine in ("python", "native"):
        d = check(hm.model(), (), keyed=hm.operations(rows), engine=engine).keys[0].diagram
        by_op = {o["op"]: o for o in d["operations"]}
        assert d["prefix_length"] == 2 and d["state_after_prefix"] == "2"
        assert (by_op["write 1"]["before"], by_op["write 1"]["after"]) == ("nil", "1")
        assert (by_op["write 2"]["before"], by_op["write 2"]["after"]) == ("1", "2")
        stuck = by_op["read -> 1"]
        assert (stuck["role"], stuck["before"], stuck["after"]) == ("stuck", "2", None)
        # the cas overlapping the read cannot follow the prefix either (the register is 2)
        cas = by_op["cas 7->8"]
        assert (cas["role"], cas["before"], cas["after"]) == ("concurrent", "2", None)


def test_a_multi_register_state_reads_as_its_registers():
    rows = [{"index": 0, "process": 0, "type": "invoke", "f": "txn",
             "value": [["w", "x", 1], ["w", "y", 1]]},
            {"index": 1, "process": 0, "type": "ok", "f": "txn",
             "value": [["w", "x", 1], ["w", "y", 1]]},
            {"index": 2, "process": 1, "type": "invoke", "f": "txn",
             "value": [["r", "x", None], ["r", "y", None]]},
            {"index": 3, "process": 1, "type": "ok", "f": "txn",
             "value": [["r", "x", 1], ["r", "y", 0]]}]
    hm = get_model("multi-register", {"x": 0, "y": 0})
    d = check(hm.model(), (), keyed=hm.operations(rows)).keys[0].diagram
    first = next(o for o in d["operations"] if o["order"] == 0)
    assert (first["before"], first["after"]) == ("{'x' 0, 'y' 0}", "{'x' 1, 'y' 1}")


def test_the_page_puts_operations_and_faults_on_one_time_axis(tmp_path):
    results = register_run(tmp_path)
    d = results["checkers"]["linearizability"]["diagrams"]["r0"]
    times = {i: 0.1 * i for i in range(20)}
    data = page_data("r0", d, times, [("partition", 0.3, 0.9, "start-partition halves"),
                                      ("kill", 50.0, 60.0, "kill one [2]")])
    assert data["axis"] == "s"
    assert [f["label"] for f in data["faults"]] == ["start-partition halves"]  # in view only
    stuck = next(o for o in data["operations"] if o["role"] == "stuck")
    assert stuck["t0"] == 0.1 * stuck["call"] and stuck["t1"] == 0.1 * stuck["return"]
    # a time missing for one of its rows: the axis is the history position, without faults
    partial = page_data("r0", d, {0: 0.0}, [("partition", 0.0, 9.0, "x")])
    assert partial["axis"] == "position" and partial["faults"] == []
    html_ = page(data)
    blob = re.search(r"<script type='application/json' id='data'>(.*?)</script>", html_, re.S)
    assert json.loads(blob.group(1).replace("<\\/", "</")) == data
    assert "http" not in html_.replace("http://www.w3.org/2000/svg", "")  # nothing fetched


def test_the_report_links_a_page_per_invalid_key(tmp_path):
    results = register_run(tmp_path)
    assert results["valid"] is False
    render(tmp_path)
    report = (tmp_path / "report.html").read_text()
    assert f"href='{file_name('r0')}'" in report
    text = (tmp_path / file_name("r0")).read_text()
    data = json.loads(re.search(r"id='data'>(.*?)</script>", text, re.S).group(1)
                      .replace("<\\/", "</"))
    assert data["axis"] == "s"
    assert [f["kind"] for f in data["faults"]] == ["partition"]
    stuck = next(o for o in data["operations"] if o["role"] == "stuck")
    assert stuck["op"] == "read -> 1" and (stuck["t0"], stuck["t1"]) == (1.5, 1.7)
    assert file_name("a/b c") == "lin-a_b_c.html"
