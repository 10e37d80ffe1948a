"""campaigns/features.yaml on Docker: a cluster formatted at the oldest metadata.version
has its feature levels raised (and eligible leader replicas turned on and off) through a
real admin client's UpdateFeatures while queue clients write and partition leaders are
killed. A correct node is valid, every change asked is committed and reported by every
broker that answers, and the run's twin in the simulator (formatted at the same level, from
the run's node properties) is valid. Nightly: CI's budget; CI's cells of the package are
the simulator's (tests/simulator/test_sim_features.py)."""
import json

import pytest

from conftest import ROOT
from harness.config import load_campaign
from test_queue_docker import campaign, valid_twin


@pytest.mark.nightly
def test_feature_levels_raised_under_kills_keep_a_correct_node_valid(docker_client, node_image,
                                                                    tmp_path):
    fields = load_campaign(ROOT / "campaigns" / "features.yaml")
    code, results, run_dir = campaign(tmp_path, **{**fields, "seed": 1})
    assert (code, results["valid"]) == (0, True), run_dir
    rows = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    asked = [r["value"] for r in rows if r["process"] == "nemesis" and r["f"] == "features"
             and r["type"] == "info"]
    seen = [r["value"] for r in rows if r["process"] == "nemesis" and r["f"] == "features-seen"]
    assert asked and all(a["error"] is None for a in asked), asked
    assert len(seen) == len(asked) and all(s["brokers"] for s in seen), seen
    raised = [u["level"] for s in seen for u in s["updates"] if u["feature"] == "metadata.version"]
    assert raised and all(7 < level <= 21 for level in raised), seen
    assert results["coverage"]["reached"].get("feature-level-changed", 0) >= len(seen), \
        results["coverage"]
    valid_twin(run_dir, "features", **{"chaoskraft.bootstrap.metadata.version": "7"})
