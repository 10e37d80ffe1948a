"""The split of Docker tests between CI's two Docker streams (tests/docker_costs.py)."""
import json
import textwrap

import pytest

import docker_costs


def test_the_costliest_units_go_first_each_to_the_lighter_stream():
    units = {"a": ["t::a"], "b": ["t::b"], "c": ["t::c"], "mod": ["m::x", "m::y"]}
    costs = {"t::a": 100, "t::b": 60, "t::c": 50, "m::x": 70, "m::y": 40}
    streams = docker_costs.split(units, costs, 2)
    # 110 (mod) | 100 (a), then b to 100 -> 160, then c to 110 -> 160: 160 against 160
    assert streams == {"mod": 0, "a": 1, "b": 1, "c": 0}
    # by count it would have been {a, c} against {b, mod}: 150 against 170


def test_a_test_the_table_does_not_name_counts_as_its_median():
    units = {"new": ["t::new"], "a": ["t::a"], "b": ["t::b"], "c": ["t::c"]}
    costs = {"t::a": 10, "t::b": 30, "t::c": 300}
    streams = docker_costs.split(units, costs, 2)
    assert streams["c"] != streams["new"] == streams["b"] == streams["a"]


def test_junit_cases_become_node_ids(tmp_path):
    (tmp_path / "tests" / "docker").mkdir(parents=True)
    (tmp_path / "tests" / "docker" / "test_x.py").write_text("")
    report = tmp_path / "junit.xml"
    report.write_text(textwrap.dedent("""\
        <testsuites><testsuite>
        <testcase classname="tests.docker.test_x" name="test_a[1-2]@docker-1" time="12.34"/>
        <testcase classname="tests.docker.test_x.TestY" name="test_b" time="3"/>
        <testcase classname="tests.docker.test_x" name="test_other[a@b]" time="1"/>
        </testsuite></testsuites>"""))
    got = docker_costs.from_junit(report, tmp_path, {"tests/docker/test_x.py::test_a[1-2]",
                                                     "tests/docker/test_x.py::TestY::test_b"})
    assert got == {"tests/docker/test_x.py::test_a[1-2]": 12.3,
                   "tests/docker/test_x.py::TestY::test_b": 3.0}
    with pytest.raises(ValueError, match="tests.docker.gone"):
        docker_costs.node_id("tests.docker.gone", "test_a", tmp_path)


def test_a_malformed_table_is_named(tmp_path):
    bad = tmp_path / "costs.json"
    bad.write_text(json.dumps({"seconds": {"t::a": "slow"}}))
    with pytest.raises(ValueError, match=r"costs.json: 'seconds' of 't::a'"):
        docker_costs.load(bad)
    bad.write_text("[]")
    with pytest.raises(ValueError, match="costs.json: not a table"):
        docker_costs.load(bad)


def test_the_table_in_the_repository_is_readable():
    assert docker_costs.load(), "tests/docker_costs.json is missing or empty"
