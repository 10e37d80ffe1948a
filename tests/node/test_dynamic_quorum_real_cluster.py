"""Kafka's quorum_reconfiguration_test on node processes, in isolated and combined mode: a
dynamic quorum (KIP-853) of three controllers, a fourth formatted to join it. While a
confluent-kafka idempotent acks=all producer writes, the fourth is added
(AddRaftVoter) once it has caught up as an observer, then the active controller is removed
(RemoveRaftVoter): it resigns once that is committed and the others elect a leader among
themselves. DescribeQuorum (kafka-python's ``describe_metadata_quorum``) shows each step,
and every record the producer was told is written is read back, once and in order. A
removal of a controller that is not a voter, an add of a voter already in, and an add of a
node that does not fetch are refused with Kafka's errors."""
import threading

import pytest

from conftest import create_topic_everywhere, read_back, wait_for

TOPIC = "reconfig"


def _cluster(tmp_path, mode):
    from local_cluster import LocalCluster
    common = {"broker.heartbeat.interval.ms": "500", "broker.session.timeout.ms": "4000"}
    if mode == "isolated":  # controllers 1-4 (4 joins), brokers 5 and 6
        return LocalCluster(tmp_path, nodes=6, brokers=True, controllers=4, joining=(4,),
                            extra_config=common)
    return LocalCluster(tmp_path, nodes=4, brokers=True, joining=(4,), extra_config=common)


class _Producer(threading.Thread):
    """Writes 0, 1, 2, ... until stopped; keeps what was acknowledged."""

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        from confluent_kafka import Producer
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                           "enable.idempotence": True, "message.timeout.ms": 60_000,
                           "linger.ms": 5})
        self.acked, self.failed = [], []
        self.halt = threading.Event()

    def run(self):
        i = 0

        def done(err, msg):
            (self.failed if err else self.acked).append(err or int(msg.value()))
        while not self.halt.is_set():
            self.p.produce(TOPIC, str(i).encode(), on_delivery=done)
            i += 1
            self.p.poll(0.01)
        self.p.flush(90)


def consume_all(cluster, count):
    return read_back(cluster, TOPIC, count, "reconfig-check", timeout_s=90)


@pytest.mark.parametrize("mode", ["isolated", "combined"])
def test_a_controller_added_and_the_active_one_removed_under_load(tmp_path, mode):
    from harness import quorum_admin as qa
    cluster = _cluster(tmp_path, mode)
    cluster.start_all()
    producer = None
    try:
        boot = cluster.bootstrap()
        first = wait_for("a quorum leader", lambda: (lambda q: q if q.leader_id in (1, 2, 3)
                                                     else None)(qa.describe(boot)), 90)
        assert sorted(first.voters) == [1, 2, 3]
        create_topic_everywhere(cluster, TOPIC, 1, replication_factor=2, timeout_s=90)
        producer = _Producer(boot)
        producer.start()

        # The joining controller fetches as an observer, with its own directory id.
        q = wait_for("controller 4 among the observers",
                     lambda: (lambda q: q if 4 in q.observers else None)(qa.describe(boot)))
        assert q.observers[4]["replica_directory_id"] == cluster.directory_ids[4]
        with pytest.raises(qa.QuorumChangeError) as refused:
            qa.add_controller(boot, 3, cluster.host(3), cluster.port,
                              directory_id=cluster.directory_ids[3])
        assert refused.value.code == 126  # DUPLICATE_VOTER
        with pytest.raises(qa.QuorumChangeError) as refused:
            qa.remove_controller(boot, 4, directory_id=cluster.directory_ids[4])
        assert refused.value.code == 127  # VOTER_NOT_FOUND

        qa.retrying(qa.add_controller, boot, 4, cluster.host(4), cluster.port,
                    done=(126,))
        q = qa.describe(boot)
        assert sorted(q.voters) == [1, 2, 3, 4], q
        assert q.voters[4]["replica_directory_id"] == cluster.directory_ids[4]
        assert 4 not in q.observers

        leader = q.leader_id
        qa.retrying(qa.remove_controller, boot, leader, done=(127,))
        after = wait_for("a leader among the remaining voters",
                         lambda: (lambda q: q if q.leader_id not in (-1, leader) else None)(
                             qa.describe(boot)), 60)
        assert sorted(after.voters) == sorted({1, 2, 3, 4} - {leader}), after
        assert after.leader_epoch > q.leader_epoch
        # the removed controller keeps running as an observer, fetching the log
        wait_for(f"controller {leader} among the observers",
                 lambda: leader in qa.describe(boot).observers)

        # the new quorum commits what is written after the change
        seen = len(producer.acked)
        wait_for("writes acknowledged after the change",
                 lambda: len(producer.acked) > seen + 50, 60)
        producer.halt.set()
        producer.join(120)
        assert not producer.failed, producer.failed[:3]
        read = consume_all(cluster, len(producer.acked))
        assert read == producer.acked, (len(read), len(producer.acked))
    finally:
        if producer is not None:
            producer.halt.set()
        cluster.close()


def test_a_controller_with_auto_join_adds_itself_once_caught_up(tmp_path):
    """``controller.quorum.auto.join.enable``: the fourth controller, formatted to join,
    asks the quorum leader to add it as soon as it fetches; no one sends AddRaftVoter for
    it. The first three, voters already, send nothing."""
    from harness import quorum_admin as qa
    from local_cluster import LocalCluster
    cluster = LocalCluster(tmp_path, nodes=4, brokers=True, joining=(4,),
                           extra_config={"controller.quorum.auto.join.enable": "true"})
    cluster.start_all()
    try:
        q = wait_for("the fourth controller a voter", lambda: (
            lambda q: sorted(q.voters) == [1, 2, 3, 4] and q)(qa.describe(cluster.bootstrap())),
            timeout_s=60)
        assert q.voters[4]["replica_directory_id"] == cluster.directory_ids[4]
        assert not q.observers
        logs = {i: cluster.log_path(i).read_text() for i in cluster.ids}
        assert "auto-join: node 4 was added to the voters" in logs[4]
        assert not any("auto-join" in logs[i] for i in (1, 2, 3))
        assert "Traceback" not in "".join(logs.values())
    finally:
        cluster.close()


def test_a_voter_back_at_a_new_address_has_the_voter_set_updated(tmp_path):
    """UpdateRaftVoter: the fourth controller joins (auto-join), stops, and comes back
    listening on another port (only its own config says so; the others' still name the
    old one). It asks the quorum leader to record its new endpoint, DescribeQuorum shows
    it, and the others reach it there: every voter's log end catches up with the leader's,
    and with a voter other than the fourth stopped, the three left (a majority of four
    needs the fourth) elect a leader and commit."""
    from harness import quorum_admin as qa
    from local_cluster import LocalCluster, free_port
    cluster = LocalCluster(tmp_path, nodes=4, brokers=True, joining=(4,),
                           extra_config={"controller.quorum.auto.join.enable": "true"})
    cluster.start_all()
    try:
        boot = cluster.bootstrap()
        q = wait_for("the fourth controller a voter", lambda: (
            lambda q: sorted(q.voters) == [1, 2, 3, 4] and q)(qa.describe(boot)), timeout_s=60)
        host = cluster.host(4)
        assert q.endpoints[4] == (host, cluster.port), q.endpoints
        cluster.stop(4)
        port = free_port(host)
        config = cluster.config_path(4).read_text()
        assert config.count(f"{host}:{cluster.port}") == 2  # its listener, its voters entry
        cluster.config_path(4).write_text(config.replace(f"{host}:{cluster.port}", f"{host}:{port}"))
        cluster.start(4)

        q = wait_for("the new endpoint in the voter set", lambda: (
            lambda q: q.endpoints.get(4) == (host, port) and q)(qa.describe(boot)), 60)
        assert sorted(q.voters) == [1, 2, 3, 4]
        log = cluster.log_path(4).read_text()
        assert f"not {host}:{port}: asking leader" in log, log[-2000:]
        wait_for("every voter past the high watermark of the update", lambda: all(
            v["log_end_offset"] >= q.high_watermark
            for v in qa.describe(boot).voters.values()), 60)

        stopped = q.leader_id if q.leader_id != 4 else 1
        cluster.stop(stopped)
        after = wait_for("a leader of the three left, committing", lambda: (
            lambda a: a.leader_id not in (-1, stopped) and a.high_watermark > q.high_watermark
            and a)(qa.describe(boot, wait_s=30)), 60)
        assert stopped != q.leader_id or after.leader_epoch > q.leader_epoch, (q, after)
        assert "Traceback" not in "".join(cluster.log_path(i).read_text() for i in cluster.ids)
    finally:
        cluster.close()
