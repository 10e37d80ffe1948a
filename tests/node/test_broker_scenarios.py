"""The broker's request handling as data (etcd-io/raft's data-driven style): every script
in tests/testdata/broker/ is run by tests/node/broker_scenarios.py, a client's Kafka
requests to one node that is controller and broker, and must print exactly what it says.
After a deliberate change of behaviour, ``CHAOSKRAFT_REWRITE=1 pytest
tests/node/test_broker_scenarios.py`` writes the new outputs into the scripts, to be read
in the diff before committing."""
import pytest

import datadriven
from broker_scenarios import BrokerScenario
from conftest import TESTDATA

SCRIPTS = sorted((TESTDATA / "broker").glob("*.txt"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_broker_scenario(script):
    datadriven.check(script, BrokerScenario)


def test_there_are_broker_scenarios():
    assert len(SCRIPTS) >= 3


# A planted bug breaks the rule a scenario is about: the scenario's output changes first at
# the step that shows the rule, and shows the broken answer.
BROKEN = [
    ("transactions", "read-committed-past-lso", "fetch t-0 offset=0 committed",
     "<- Fetch(hw=3, lso=0, records=[0:a 1:b 2:plain])"),
    ("transactions", "no-aborted-list", "fetch t-0 offset=0 committed",
     "<- Fetch(hw=6, lso=6, records=[0:a 1:b 2:plain commit 4:c abort])"),
    ("transactions", "abort-as-commit", "fetch t-0 offset=0 committed",
     "4:c commit"),
]


@pytest.mark.parametrize("name, bug, first, shows", BROKEN, ids=[b for _, b, _, _ in BROKEN])
def test_a_planted_bug_fails_the_broker_scenario_of_its_rule(name, bug, first, shows):
    script = TESTDATA / "broker" / f"{name}.txt"
    broken = datadriven.run_script(script, lambda: BrokerScenario(frozenset({bug})))
    differ = [(cmd, got) for _, cmd, want, got in broken if got != want]
    assert differ, f"{bug} leaves {name} as it is"
    assert differ[0][0] == first and shows in differ[0][1], differ[0]


def test_a_bad_broker_command_names_the_script_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("start\n----\n\nproduce t0 values=a\n----\n")
    with pytest.raises(ValueError, match=r"bad.txt:4: 't0' is not TOPIC-PARTITION"):
        datadriven.run_script(bad, BrokerScenario)
