"""core.run_dir.RunDir, the one reader and writer of a run directory: what it writes reads
back, and every malformed or missing file is named with its line and column."""
import pytest

from core.run_dir import RunDir, RunDirError


def test_what_it_writes_reads_back_and_no_temporary_file_is_left(tmp_path):
    rd = RunDir(tmp_path)
    rd.write_config({"seed": 3, "workload": "queue", "nemesis": ["kill"]})
    rd.write_results({"valid": True, "verdict": "valid"})
    rd.write_plan([{"index": 0, "kind": "kill"}])
    rd.write_faults([{"step": 0, "status": "happened"}])
    rd.write_generated([{"process": 0, "f": "send"}, {"process": 1, "f": "poll"}])
    rd.write_liveness({"checked": False})
    rd.write_history_start({"wall_clock_s": 1.5, "history_time_ns": 0})
    assert rd.config() == {"seed": 3, "workload": "queue", "nemesis": ["kill"]}
    assert rd.results()["verdict"] == "valid"
    assert rd.plan() == [{"index": 0, "kind": "kill"}]
    assert rd.faults() == [{"step": 0, "status": "happened"}]
    assert list(rd.generated()) == [(1, {"process": 0, "f": "send"}),
                                    (2, {"process": 1, "f": "poll"})]
    assert rd.liveness() == {"checked": False} and rd.history_start()["wall_clock_s"] == 1.5
    assert rd.is_analysed_run()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["config.yaml", "results.json", "plan.json", "faults.json", "generated.jsonl",
         "liveness.json", "history-start.json"])


@pytest.mark.parametrize("name, text, read, says", [
    ("config.yaml", "seed: 3\nworkload: [queue\n", "config", r"config.yaml:3:1: not YAML"),
    ("config.yaml", "- just\n- a list\n", "config", r"config.yaml: not a run's configuration"),
    ("results.json", '{"valid": true,\n "verdict": }\n', "results",
     r"results.json:2:13: not JSON: Expecting value"),
    ("plan.json", '{"index": 0}', "plan", r"plan.json: expected a JSON list, found dict"),
    ("faults.json", "", "faults", r"faults.json:1:1: not JSON"),
])
def test_a_malformed_file_is_named_with_its_line_and_column(tmp_path, name, text, read, says):
    (tmp_path / name).write_text(text)
    with pytest.raises(RunDirError, match=says):
        getattr(RunDir(tmp_path), read)()


def test_a_bad_line_of_generated_ops_is_named_and_a_missing_file_says_so(tmp_path):
    rd = RunDir(tmp_path)
    (tmp_path / "generated.jsonl").write_text('{"process": 0}\n\n{"process": 1\n')
    rows = rd.generated()
    assert next(rows) == (1, {"process": 0})
    with pytest.raises(RunDirError, match=r"generated.jsonl:3:\d+: not JSON"):
        next(rows)
    (tmp_path / "generated.jsonl").write_text('{"process": 0}\n[1, 2]\n')
    with pytest.raises(RunDirError, match=r"generated.jsonl:2: expected a JSON object"):
        list(rd.generated())
    with pytest.raises(RunDirError, match=r"results.json: missing"):
        rd.results()
    assert not rd.is_analysed_run()


def test_the_run_list_shows_an_unreadable_run_instead_of_failing(tmp_path):
    from harness.serve import list_page
    good, bad = tmp_path / "t" / "20261128T000000Z-1", tmp_path / "t" / "20261128T000001Z-2"
    for d in (good, bad):
        d.mkdir(parents=True)
        RunDir(d).write_config({"test": "t", "seed": 1, "workload": "register"})
    RunDir(good).write_results({"valid": True, "verdict": "valid", "checkers": {}})
    (bad / "results.json").write_text('{"valid": tru')
    page = list_page(tmp_path)
    assert "2 runs" in page
    assert "class='valid'>valid<" in page and "class='unreadable'>unreadable<" in page
    assert "results.json:1:11: not JSON" in page
