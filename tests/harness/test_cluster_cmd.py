"""`chaoskraft cluster up` returns a cluster that serves, and says how to reach it.

The readiness rule (``workloads.nodes.not_serving``) is checked here on node states as a
table; the Docker tests run the command itself as a user would: one that then uses the
cluster at once with their own Kafka client, one whose node cannot start."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from harness.backends import NodeInfo
from workloads.nodes import NodeState, NotServing, not_serving
from conftest import ROOT, labelled, wait_for

NODES = [NodeInfo(i, f"n{i}", f"10.0.0.{i}", ("controller", "broker") if i <= 3 else ("broker",))
         for i in range(1, 6)]
ALL = (1, 2, 3, 4, 5)


def state(i, role="Follower", leader=1, broker="RUNNING", brokers=ALL, answers=True):
    if not answers:
        return NodeState(i, False)
    return NodeState(i, True, role, 3, leader, broker if i in ALL else None, brokers)


def states(**changes):
    out = {i: state(i, role="Leader" if i == 1 else "Follower") for i in ALL}
    for name, kwargs in changes.items():
        i = int(name[1:])
        out[i] = state(i, **kwargs)
    return out


@pytest.mark.parametrize("changes, expected", [
    ({}, {}),
    ({"n5": {"answers": False}}, {5: "does not answer"}),
    ({"n4": {"broker": "STARTING", "brokers": (1, 2, 3, 5)}},
     {4: "broker not registered yet"}),
    ({"n4": {"broker": "RECOVERY"}}, {4: "broker registered but fenced"}),
    ({"n2": {"brokers": (1, 2, 3, 4)}}, {2: "its Metadata lists brokers [1, 2, 3, 4], not n5"}),
    ({"n2": {"brokers": None}}, {2: "does not answer Metadata"}),
    ({"n3": {"leader": -1, "role": "Candidate"}}, {3: "knows no quorum leader (Candidate, epoch 3)"}),
])
def test_a_cluster_serves_once_it_has_a_leader_and_every_broker_is_unfenced_and_listed(
        changes, expected):
    assert not_serving(NODES, states(**changes)) == expected


def test_the_nodes_that_do_not_come_up_are_named_before_those_that_wait_for_them():
    why = not_serving(NODES, states(n3={"answers": False},
                                    n1={"brokers": (1, 2, 4, 5)}, n2={"brokers": (1, 2, 4, 5)}))
    assert why[3] == "does not answer" and "not n3" in why[1]
    err = NotServing(40, why)
    assert err.culprits == [3]
    assert str(err) == ("not serving after 40 s: n1, n2: its Metadata lists brokers "
                        "[1, 2, 4, 5], not n3; n3: does not answer")
    assert NotServing(40, {2: "broker registered but fenced"}).culprits == [2]


def test_waiting_says_what_it_waits_for_and_returns_once_the_cluster_serves(monkeypatch):
    import asyncio

    import workloads.nodes as nodes
    answers = [states(n5={"answers": False}), states(n4={"broker": "RECOVERY"}), states()]

    async def fake(asked, timeout_s=3.0, within_s=0.0):
        return answers.pop(0)
    monkeypatch.setattr(nodes, "node_states", fake)
    lines = []
    assert asyncio.run(nodes.wait_until_serving(NODES, 600, lines.append, every_s=0)) == states()
    assert [line.split("] ")[1] for line in lines] == [
        "waiting: n5: does not answer", "waiting: n4: broker registered but fenced"]

    answers[:] = [states(n5={"answers": False})] * 2
    with pytest.raises(NotServing) as exc:
        asyncio.run(nodes.wait_until_serving(NODES, 0, lines.append))
    assert exc.value.why == {5: "does not answer"}


def test_a_node_that_stopped_on_its_own_error_ends_the_wait_at_once(monkeypatch):
    """A node that exits refusing its settings comes back the same way however long one
    waits: the wait ends at the first look that sees it, naming it."""
    import asyncio

    import workloads.nodes as nodes
    looks = []

    async def fake(asked, timeout_s=3.0, within_s=0.0):
        return states(n5={"answers": False})
    monkeypatch.setattr(nodes, "node_states", fake)

    def stopped():
        looks.append(1)
        return {} if len(looks) < 3 else {5: "the node exited with status 2"}
    with pytest.raises(NotServing) as exc:
        asyncio.run(nodes.wait_until_serving(NODES, 600, lambda m: None, stopped=stopped,
                                             stopped_every_s=0))
    assert len(looks) == 3 and exc.value.culprits == [5]
    assert exc.value.stopped == {5: "the node exited with status 2"}
    assert str(exc.value).startswith("n5: the node exited with status 2 (after ")


def chaoskraft(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def down(run_id: str) -> None:
    chaoskraft("cluster", "down", run_id, timeout=180)


@pytest.mark.docker
def test_cluster_up_serves_at_once_a_topic_of_five_replicas_and_down_leaves_nothing(
        docker_client, node_image):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    p = chaoskraft("cluster", "up", "--json", "--set", "group.initial.rebalance.delay.ms=100")
    run_id = None
    try:
        assert p.returncode == 0, p.stderr[-3000:]
        view = json.loads(p.stdout)
        run_id = view["run_id"]
        boot = view["bootstrap_servers"]
        assert boot == ",".join(f"{r['address']}:9092" for r in view["nodes"])
        assert [(r["registered"], r["fenced"], r["broker_state"]) for r in view["nodes"]] == \
            [(True, False, "RUNNING")] * 5
        assert any(r["raft_role"] == "Leader" for r in view["nodes"])

        # At once: no waiting for brokers here, that is what `cluster up` did.
        admin = AdminClient({"bootstrap.servers": boot})
        admin.create_topics([NewTopic("five", 1, 5, config={"min.insync.replicas": "3"})])[
            "five"].result(60)
        del admin  # a librdkafka handle must not outlive the cluster
        producer = Producer({"bootstrap.servers": boot, "acks": "all",
                             "enable.idempotence": True})
        for i in range(1000):
            producer.produce("five", value=str(i).encode())
        assert producer.flush(120) == 0
        producer.close()
        consumer = Consumer({"bootstrap.servers": boot, "group.id": "five",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition("five", 0, OFFSET_BEGINNING)])
        values, deadline = [], time.monotonic() + 120
        while len(values) < 1000 and time.monotonic() < deadline:
            values += [int(m.value()) for m in consumer.consume(500, 1.0) if not m.error()]
        consumer.close()
        assert values == list(range(1000))

        s = chaoskraft("cluster", "status", run_id, "--json", timeout=180)
        assert s.returncode == 0, s.stderr[-3000:]
        [status] = json.loads(s.stdout)
        assert status["run_id"] == run_id and status["bootstrap_servers"] == boot
        assert [(r["node_id"], r["up"], r["fenced"]) for r in status["nodes"]] == \
            [(i, True, False) for i in ALL]
        text = chaoskraft("cluster", "status", run_id, timeout=180).stdout
        assert f"{run_id} bootstrap.servers={boot}" in text
        assert text.count("broker registered/unfenced") == 5

        # a new machine: n6, another container of the image, with the cluster's settings;
        # every broker lists it, and a partition moves onto it
        a = chaoskraft("cluster", "add-node", run_id, "--json", timeout=180)
        assert a.returncode == 0, a.stderr[-3000:]
        added = json.loads(a.stdout)
        assert [(r["node_id"], r["roles"], r["registered"], r["fenced"])
                for r in added["nodes"] if r["node_id"] == 6] == [(6, ["broker"], True, False)]
        assert all(6 in r["metadata_brokers"] for r in added["nodes"]), added["nodes"]
        props = docker_client.containers.get(f"chaoskraft-{run_id}-n6").exec_run(
            ["cat", "/etc/chaoskraft/server.properties"]).output.decode()
        assert "node.id=6\n" in props and "group.initial.rebalance.delay.ms=100\n" in props, props
        assert "process.roles=broker\n" in props and "chaoskraft.run" not in props
        from kafka import KafkaAdminClient
        from kafka import TopicPartition as TP
        admin = KafkaAdminClient(bootstrap_servers=added["bootstrap_servers"])
        try:
            admin.alter_partition_reassignments({TP("five", 0): [6, 1, 2, 3, 4]})

            # done once the controller lists it no more and the broker answering Metadata
            # has the final state: a broker applies committed metadata a moment after the
            # controller (a CI run read the middle state, [6, 1, 2, 3, 4, 5], just after
            # the list came back empty)
            def moved():
                if admin.list_partition_reassignments():
                    return False
                [t] = admin.describe_topics(["five"])
                return [(p["replica_nodes"], sorted(p["isr_nodes"]))
                        for p in t["partitions"]] == [([6, 1, 2, 3, 4], [1, 2, 3, 4, 6])]
            wait_for("five-0 moved onto n6, n5 out", moved, timeout_s=60)
        finally:
            admin.close()
    finally:
        if run_id:
            d = chaoskraft("cluster", "down", run_id, timeout=180)
            assert d.returncode == 0, d.stderr[-2000:]
            assert labelled(docker_client, f"chaoskraft.run={run_id}") == (0, 0, 0)


@pytest.mark.docker
def test_cluster_up_names_the_node_that_cannot_start_and_leaves_nothing(docker_client,
                                                                        node_image, tmp_path):
    # the node refuses the setting, exits and is started again the same way: cluster up
    # names it as soon as it sees it, not once the timeout has run out
    p = chaoskraft("cluster", "up", "--set", "n3:log.segment.bytes=lots", "--timeout", "120",
                   "--results-dir", str(tmp_path))
    m = re.search(r"cluster ([0-9a-f]{8}) did not come up", p.stderr)
    try:
        assert p.returncode == 1 and m, p.stderr[-3000:]
        assert "not serving after" not in p.stderr, p.stderr[-3000:]
        assert re.search(r"did not come up: n3: the node exited with status 2: it refuses its "
                         r"settings or its data directory \(after \d+ s\)", p.stderr), \
            p.stderr[-3000:]
        # the node's own words, from the log the error points to
        assert "log.segment.bytes: 'lots' is not an integer" in p.stderr
        assert (tmp_path / "cluster" / m.group(1) / "n3" / "node.log").exists()
        assert "bootstrap.servers" not in p.stdout
    finally:
        if m:
            assert labelled(docker_client, f"chaoskraft.run={m.group(1)}") == (0, 0, 0)
        else:
            down_ids = re.findall(r"network chaoskraft-([0-9a-f]+) created", p.stdout + p.stderr)
            for run_id in down_ids:
                down(run_id)


def test_a_bad_set_item_is_refused_naming_it():
    p = chaoskraft("cluster", "up", "--set", "log.segment.bytes", timeout=60)
    assert p.returncode != 0 and "--set 'log.segment.bytes': expected [nID:]KEY=VALUE" in p.stderr
    p = chaoskraft("cluster", "up", "--set", "n9:a=b", timeout=60)
    assert p.returncode != 0 and "n9" in p.stderr and "n1..n5" in p.stderr


def test_a_cluster_that_never_serves_is_named_with_what_its_nodes_answered():
    """The campaign's bring-up wait ends with an error that says what the quorum looked like
    (here: nothing listens at the nodes' addresses)."""
    import asyncio

    from workloads.nodes import wait_for_service
    silent = [NodeInfo(i, f"n{i}", "127.0.0.1", ("controller", "broker")) for i in (1, 2)]
    with pytest.raises(TimeoutError, match=r"within 1 s \(quorum: no node answered; "
                                           r"controller none\)"):
        asyncio.run(wait_for_service(silent, 1, print))


@pytest.mark.docker
def test_a_campaign_whose_nodes_refuse_their_settings_is_unknown_naming_them(docker_client,
                                                                           node_image, tmp_path):
    """``chaoskraft run`` on a campaign whose node_config the nodes refuse: the run ends as
    soon as the nodes exit (not after the bring-up timeout), says which node refused what in
    its own words, reads unknown (exit 2: nothing was tested) and leaves nothing behind.
    (A value the node's parser refuses on any node is refused before any node starts,
    tests/harness/test_campaign_files.py; a node id given to every node is refused only by
    the nodes, each with its own roles.)"""
    campaign = tmp_path / "bad.yaml"
    campaign.write_text("workload: register\ntime_limit_s: 10\n"
                        "node_config: {node.id: '9'}\n")
    try:  # the bring-up timeout is 180 s: waiting it out fails here
        p = chaoskraft("run", "--campaign", str(campaign), "--seed", "1", "--results-dir",
                       str(tmp_path / "results"), timeout=170)
    finally:  # the run's own teardown, or (killed on the timeout) ours
        for log in (tmp_path / "results").rglob("harness.log"):
            for run_id in re.findall(r"chaoskraft\.run=([0-9a-f]{8})", log.read_text()):
                if labelled(docker_client, f"chaoskraft.run={run_id}") != (0, 0, 0):
                    down(run_id)
                    raise AssertionError(f"run {run_id} left Docker resources behind")
    assert p.returncode == 2, (p.stdout[-3000:], p.stderr[-3000:])
    assert re.search(r"run could not start: n\d(, n\d)*: the node exited with status 2", p.stdout)
    assert "error: controller.quorum.voters: node.id 9 has the controller role but is not a " \
           "voter" in p.stdout
    assert "verdict: unknown (nothing was tested)" in p.stdout and "Traceback" not in p.stderr


def test_a_campaigns_bring_up_ends_at_once_when_a_node_refuses_its_settings():
    """The campaign's bring-up wait asks the backend which nodes exited refusing their
    settings (``refusing_nodes``) and ends naming them, instead of waiting its whole
    timeout for a quorum that cannot come."""
    import asyncio

    from workloads.nodes import NotServing, wait_for_service
    silent = [NodeInfo(i, f"n{i}", "127.0.0.1", ("controller", "broker")) for i in (1, 2)]
    asked = []

    def refusing():
        asked.append(1)
        return {2: "the node exited with status 2: it refuses its settings"} if len(asked) > 1 \
            else {}
    with pytest.raises(NotServing, match=r"n2: the node exited with status 2") as err:
        asyncio.run(wait_for_service(silent, 30, print, stopped=refusing, stopped_every_s=0.1))
    assert err.value.stopped == {2: "the node exited with status 2: it refuses its settings"}
    assert len(asked) == 2, "asked again until a node refused"
