"""What the Docker fault tests share: a module's cluster, and fault steps started as a
campaign starts them, with the nemesis rows they wrote."""
import asyncio
import json
import uuid

from harness.backends.docker_backend import DockerCluster
from harness.campaign import Campaign
from harness.config import resolve
from harness.history import HistoryWriter
from workloads.nodes import wait_for_service


def module_cluster(node_image, prefix: str, **options):
    """A 3-node cluster (all controllers) for a test module: yields it, then removes it."""
    c = DockerCluster(prefix + uuid.uuid4().hex[:7], node_image, nodes=3, controllers=3,
                      log=lambda m: None, **options)
    try:
        c.up()
        asyncio.run(wait_for_service(c.nodes, 60, print))
        yield c
    finally:
        c.down()


def campaign(cluster, tmp_path, **options):
    """A campaign on ``cluster`` whose packages run with ``options``, and its history."""
    cfg = resolve({"seed": 7, "nemesis_options": options}, {})
    history = HistoryWriter(tmp_path / "history.jsonl")
    return Campaign(cfg, cluster, history, lambda m: None), history


def rows(history, f):
    """The info rows ``f`` of the history so far."""
    lines = history.path.read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["f"] == f and r["type"] == "info"]
