"""Raft scenarios as data (etcd-io/raft's data-driven tests): every script in
tests/testdata/raft/ is run by tests/node/raft_scenarios.py and must print exactly what it says.
After a deliberate change of behaviour, ``CHAOSKRAFT_REWRITE=1 pytest
tests/node/test_raft_scenarios.py`` writes the new outputs into the scripts, to be read in the
diff before committing."""
import os

import pytest

from conftest import TESTDATA

from raft_scenarios import rewrite, run_script

SCRIPTS = sorted((TESTDATA / "raft").glob("*.txt"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_raft_scenario(script):
    if os.environ.get("CHAOSKRAFT_REWRITE"):
        rewrite(script)
    for line, cmd, want, got in run_script(script):
        assert got == want, (f"{script.name}:{line}: {cmd}\n--- expected\n{want}\n"
                             f"--- got\n{got}")


def test_there_are_enough_scenarios():
    assert len(SCRIPTS) >= 12


# A planted bug breaks the rule a scenario is about: the scenario's output changes, at the
# place the rule shows.
BROKEN = [
    ("vote_survives_a_crash", "forget-vote",
     "n3 => n2 VoteResponse(leader_epoch=1, leader_id=-1, vote_granted)"),
    ("hwm_only_past_own_epoch", "hwm-ignores-epoch",
     "n2 => n3 FetchResponse(leader_epoch=2, leader_id=2, high_watermark=4, records=1)"),
    ("vote_needs_an_up_to_date_log", "vote-ignores-log",
     "n2 => n3 VoteResponse(pre_vote, leader_epoch=1, leader_id=-1, vote_granted)"),
    # a second voter change taken while the first is uncommitted
    ("dynamic_quorum", "concurrent-voter-changes",
     "n1 says: adding voter 5: voter set [1, 2, 3, 4, 5] at offset 4"),
    # a voter added before it has fetched anything
    ("dynamic_quorum", "voter-counted-before-catch-up",
     "n1 says: adding voter 4: voter set [1, 2, 3, 4] at offset 3"),
]


@pytest.mark.parametrize("name, bug, shows", BROKEN, ids=[b for _, b, _ in BROKEN])
def test_a_planted_bug_fails_the_scenario_of_its_rule(name, bug, shows):
    script = next(p for p in SCRIPTS if p.stem == name)
    clean = run_script(script)
    assert all(got == want for _, _, want, got in clean)
    broken = run_script(script, frozenset({bug}))
    differ = [(line, cmd) for line, cmd, want, got in broken if got != want]
    assert differ, f"{bug} leaves {name} as it is"
    assert any(shows in got for _, _, _, got in broken), [g for *_, g in broken]


def test_a_malformed_script_names_its_file_and_line(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("add-nodes 3\n----\n\nstatus\nnot a separator\n")
    with pytest.raises(ValueError, match=r"bad.txt:4: 'status' is not followed by ----"):
        run_script(bad)
    unknown = tmp_path / "unknown.txt"
    unknown.write_text("add-nodes 3\n----\n\nfly 1\n----\n")
    with pytest.raises(ValueError, match=r"unknown command 'fly'"):
        run_script(unknown)
