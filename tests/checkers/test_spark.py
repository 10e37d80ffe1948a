"""The linearizability check through Spark agrees with the in-process one."""
import os

import pytest

from checkers.linearizability import check
from checkers.models import get_model
from checkers.parquet import write_parquet
from simulator.cluster import Simulation

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]  # one JVM


def _first_seed(bugs, expected):
    """The first simulator seed whose register history has the expected verdict."""
    hm = get_model("cas-register")
    for seed in range(200):
        history = Simulation(seed, 5, 60, bugs=bugs).run().history
        if check(hm.model(), (), keyed=hm.operations(history)).valid is expected:
            return history
    raise AssertionError(f"no seed in 200 gives {expected} with bugs {sorted(bugs)}")


@pytest.mark.parametrize("bugs,expected", [
    (frozenset(), True), (frozenset({"read-without-barrier"}), False)])
def test_simulated_history_same_verdict_in_spark(spark, tmp_path, bugs, expected):
    from checkers.spark import check_linearizability
    history = _first_seed(bugs, expected)
    path = tmp_path / "history.parquet"
    write_parquet(history, path)
    hm = get_model("cas-register")
    local = check(hm.model(), (), keyed=hm.operations(history))
    remote = check_linearizability(str(path), "cas-register")
    assert local.valid is expected
    assert remote.valid is expected
    if expected:
        assert [(k.key, k.operations) for k in remote.keys] == [(k.key, k.operations) for k in local.keys]


def test_spark_requires_java_in_ci():
    if os.environ.get("CI") == "true":
        import shutil
        assert shutil.which("java"), "CI must run the Spark tests: java is missing"


@pytest.mark.parametrize("torn", [False, True])
def test_multi_register_in_spark_agrees_with_in_process(spark, tmp_path, capsys, torn):
    """Knossos's multi-register histories (one state over every register, no key to split
    by) checked in Spark: the verdict and the counterexample of the in-process check."""
    from harness.cli import main
    from test_multi_register import GOOD, history
    text = GOOD.replace("[[:read :x 1] [:read :y 1]] :process 2",
                        "[[:read :x 1] [:read :y 0]] :process 2") if torn else GOOD
    path = history(tmp_path, text)
    args = ["check", "--model", "multi-register", "--initial", '{"x": 0, "y": 0}', path]
    verdicts = {}
    for engine in ("local", "spark"):
        verdicts[engine] = main([*args[:-1], "--engine", engine, path]), capsys.readouterr().out
    assert verdicts["local"][0] == verdicts["spark"][0] == (1 if torn else 0), verdicts
    if torn:  # the same operation cannot be placed (Spark's copy names :x as 'x')
        for _, out in verdicts.values():
            assert "cannot linearize: process 2 txn [r" in out and "(history index 4)" in out, out


def test_a_long_spark_job_tells_how_many_tasks_are_done(spark):
    """TaskProgress: while a job runs past its period, lines counting the running stage's
    tasks; a job done within it, and the time after the job, say nothing."""
    import time

    from checkers.spark import TaskProgress
    heard: list[str] = []

    def slow(batches):
        for b in batches:
            time.sleep(1.0)
            yield b
    with TaskProgress(spark, heard.append, "running", every_s=0.2):
        spark.range(0, 6, numPartitions=6).mapInArrow(slow, "id long").collect()
    said = len(heard)
    time.sleep(0.5)
    assert len(heard) == said  # stopped with the block
    assert said >= 2, heard
    for line in heard:
        assert line.startswith("running: ") and "of 6 tasks of the running stage done" in line
    done = [int(line.split("; ")[1].split(" of ")[0]) for line in heard]
    assert done == sorted(done) and done[0] < 6
    quiet: list[str] = []
    with TaskProgress(spark, quiet.append, "running", every_s=30):
        spark.range(0, 2, numPartitions=2).collect()
    assert quiet == []
