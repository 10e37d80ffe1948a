"""Controller scenarios as data (etcd-io/raft's data-driven style): every script in
tests/testdata/controller/ is run by tests/node/controller_scenarios.py and must print
exactly what it says. After a deliberate change of behaviour, ``CHAOSKRAFT_REWRITE=1 pytest
tests/node/test_controller_scenarios.py`` writes the new outputs into the scripts, to be
read in the diff before committing."""
import pytest

import datadriven
from conftest import TESTDATA
from controller_scenarios import ControllerScenario

SCRIPTS = sorted((TESTDATA / "controller").glob("*.txt"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_controller_scenario(script):
    datadriven.check(script, ControllerScenario)


def test_there_are_controller_scenarios():
    assert len(SCRIPTS) >= 3


def test_an_unclean_election_bug_fails_the_isr_scenario_where_the_last_isr_member_goes():
    """With the planted bug the controller elects broker 3, outside the ISR, when the last ISR
    member is fenced, where a correct one leaves the partition without a leader."""
    script = TESTDATA / "controller" / "isr_and_elections.txt"
    clean = datadriven.run_script(script, ControllerScenario)
    assert all(got == want for _, _, want, got in clean)
    broken = datadriven.run_script(script,
                                   lambda: ControllerScenario(frozenset({"unclean-election"})))
    differ = [cmd for _, cmd, want, got in broken if got != want]
    assert differ and differ[0] == "heartbeat 2 fence", differ
    assert any("PartitionChangeRecord(partition_id=0, topic=t, isr=(3,), leader=3)" in got
               for *_, got in broken)


def test_a_crashed_replica_kept_in_the_elr_is_elected_when_it_comes_back():
    """With the planted bug elr-keeps-crashed-replica a broker back from an unclean
    shutdown stays in the ELR and is elected from it (it may have lost acknowledged records),
    where a correct controller takes it out and waits for the replica that shut down cleanly."""
    script = TESTDATA / "controller" / "eligible_leader_replicas.txt"
    broken = datadriven.run_script(
        script, lambda: ControllerScenario(frozenset({"elr-keeps-crashed-replica"})))
    differ = [(cmd, got) for _, cmd, want, got in broken if got != want]
    assert differ and differ[0][0] == "register 2 inc=inc-2b", differ
    assert "elr=(4,)" not in differ[0][1]
    assert "t-0: leader n2 elected from the eligible leader replicas [4, 2]" in differ[1][1]


def test_a_bad_controller_command_names_the_script_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("start\n----\n\nalter-partition 2 nope-0 isr=2\n----\n")
    with pytest.raises(ValueError, match=r"bad.txt:4: no partition nope-0"):
        datadriven.run_script(bad, ControllerScenario)
