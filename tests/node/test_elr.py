"""Eligible leader replicas (KIP-966) at the core: the records' new fields, the builder's
rules beyond the data-driven script (tests/testdata/controller/eligible_leader_replicas.txt),
turning the feature on and off, and the broker's clean-shutdown file that tells the
controller a broker crashed."""
import random

import msgpack

from node_image import features
from node_image import messages as m
from node_image import metadata_records as mr
from node_image import replication_control as rc
from node_image.metadata_image import CLUSTER, ELR_FEATURE
from test_replication import cluster_image, fence, image_with, with_topic


def elr_cluster(min_isr="2", n=5, **kw):
    image = image_with([mr.FeatureLevelRecord(ELR_FEATURE, 1),
                        mr.ConfigRecord(*CLUSTER, "min.insync.replicas", min_isr)],
                       cluster_image(n))
    return with_topic(image, partitions=1, **kw)


def test_the_new_fields_are_written_only_when_set_so_old_records_keep_their_bytes():
    plain = mr.PartitionRecord(0, "id", (1, 2), (1, 2), 1, 0, 0)
    assert len(msgpack.unpackb(mr.encode(plain)[3:])) == 7, "no trailing fields"
    change = mr.PartitionChangeRecord(0, "id", (1,), mr.NO_LEADER_CHANGE)
    assert len(msgpack.unpackb(mr.encode(change)[3:])) == 4
    for r in (mr.PartitionRecord(0, "id", (1, 2, 3), (1,), 1, 4, 5, (), (), (2, 3), (4,)),
              mr.PartitionChangeRecord(0, "id", None, mr.NO_LEADER_CHANGE, elr=(2,)),
              mr.PartitionChangeRecord(0, "id", (), -1, last_known_elr=(3,))):
        assert mr.decode(mr.encode(r)) == r


def test_a_member_leaving_at_the_minimum_is_not_eligible_below_it_is_and_a_snapshot_keeps_it():
    image = elr_cluster()
    r1, r2, r3 = image.partition("t", 0).replicas
    image = fence(fence(image, r1), r2)
    p = image.partition("t", 0)
    assert (p.isr, p.elr) == ((r3,), (r2,)), "r1 left at the minimum: the HW went on without it"
    assert image_with(image.records()).partition("t", 0) == p


def test_the_topics_min_isr_overrides_the_clusters():
    image = elr_cluster(min_isr="3")
    image = image_with([mr.ConfigRecord(2, "t", "min.insync.replicas", "1")], image)
    leader = image.partition("t", 0).leader
    p = fence(image, leader).partition("t", 0)
    assert p.elr == () and len(p.isr) == 2, "two of min 1: no ELR"


def test_without_the_feature_the_last_isr_member_stays_and_nothing_joins_an_elr():
    image = with_topic(cluster_image(), partitions=1)
    for b in image.partition("t", 0).replicas:
        image = fence(image, b)
    p = image.partition("t", 0)
    assert len(p.isr) == 1 and p.elr == () and p.last_known_elr == ()


def test_the_last_known_leader_is_elected_uncleanly_once_the_isr_and_the_elr_are_empty():
    """Kafka's balanced recovery: every replica came back from a crash, so none is eligible;
    the leader the partition had when its ISR emptied leads again (it may have lost records,
    but the partition is available), and a leader clears the last known ELR."""
    image = elr_cluster()
    r1, r2, r3 = image.partition("t", 0).replicas

    def crashed_and_back(image, b, epoch):
        again = mr.RegisterBrokerRecord(b, f"again-{b}", epoch, (), None, True, False)
        image = image_with([again], image)
        return image_with(rc.broker_unavailable(image, b, unclean_shutdown=True), image)
    image = fence(image, r2)  # at the minimum: no ELR
    image = crashed_and_back(image, r3, 90)  # still eligible when it registers again
    p = image.partition("t", 0)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (r1, (r1,), (), ()), "r3 crashed"
    image = fence(image, r1)
    p = image.partition("t", 0)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (mr.NO_LEADER, (), (r1,), (r1,))
    image = crashed_and_back(image, r1, 91)
    p = image.partition("t", 0)
    assert (p.isr, p.elr, p.last_known_elr) == ((), (), (r1,)), "out of the ELR, still known"
    image = image_with([mr.BrokerRegistrationChangeRecord(r1, 91, mr.UNFENCE, 0)], image)
    [change] = rc.elect_leaderless(image)
    assert (change.leader, change.isr, change.elr, change.last_known_elr) == (
        r1, (r1,), None, ())


def test_a_partition_offline_when_elr_is_turned_on_keeps_its_last_isr_member_known():
    """ELR off: the last ISR member stays in the ISR of a leaderless partition. ELR turned on
    then, and that member back from a crash (it leaves the ISR, unclean): it is the last
    known ELR and leads again once unfenced (balanced recovery), where keeping the leader
    -1, as Kafka's maybeUpdateLastKnownLeader does, would leave the partition offline for
    good (found by the features package in the simulator)."""
    image = with_topic(cluster_image(), partitions=1)
    r1, r2, r3 = image.partition("t", 0).replicas
    for b in (r2, r3, r1):
        image = fence(image, b)
    p = image.partition("t", 0)
    assert (p.leader, p.isr) == (mr.NO_LEADER, (r1,)), "ELR off: the last member stays"
    records, error, _ = features.update_features(image, [(ELR_FEATURE, 1, 1)], min_isr=2)
    image = image_with(records, image)
    again = mr.RegisterBrokerRecord(r1, f"again-{r1}", 90, (), None, True, False)
    image = image_with([again], image)
    image = image_with(rc.broker_unavailable(image, r1, unclean_shutdown=True), image)
    p = image.partition("t", 0)
    assert (p.leader, p.isr, p.elr, p.last_known_elr) == (mr.NO_LEADER, (), (), (r1,))
    image = image_with([mr.BrokerRegistrationChangeRecord(r1, 90, mr.UNFENCE, 0)], image)
    [change] = rc.elect_leaderless(image)
    assert (change.leader, change.isr, change.last_known_elr) == (r1, (r1,), ())


def test_a_reassignment_drops_removed_replicas_from_the_elr():
    from node_image import reassignment
    image = elr_cluster()
    r1, r2, r3 = image.partition("t", 0).replicas
    image = fence(image, r3)  # ISR r1 r2: at the minimum
    image = image_with([rc.alter_partition(image, m.AlterPartitionRequest(
        1, r1, image.brokers[r1].broker_epoch, "t", 0, image.partition("t", 0).leader_epoch,
        (r1,), image.partition("t", 0).partition_epoch))[1][0]], image)
    assert image.partition("t", 0).elr == (r2,), "dropped below the minimum: r2 is eligible"
    spare = next(b for b in image.brokers if b not in (r1, r2, r3))
    records, results = reassignment.alter_reassignments(image, [("t", 0, (r1, r3, spare))])
    assert [r[2] for r in results] == [m.NONE]
    p = image_with(records, image).partition("t", 0)
    assert r2 in p.removing and p.elr == (r2,), "still a replica until the move completes"


def test_turning_the_feature_on_writes_the_clusters_min_isr_and_off_clears_every_elr():
    image = with_topic(cluster_image(), partitions=1)
    records, error, _ = features.update_features(image, [(ELR_FEATURE, 1, 1)], min_isr=2)
    assert error == m.NONE and records == [
        mr.FeatureLevelRecord(ELR_FEATURE, 1),
        mr.ConfigRecord(*CLUSTER, "min.insync.replicas", "2")]
    image = image_with(records, image)
    assert image.elr_enabled and image.min_isr("t") == 2
    for b in image.partition("t", 0).replicas:
        image = fence(image, b)
    p = image.partition("t", 0)
    assert p.isr == () and len(p.elr) == 2, "the first left at the minimum"
    first = p.elr[0]
    b = image.brokers[first]
    image = image_with([mr.BrokerRegistrationChangeRecord(first, b.broker_epoch, mr.UNFENCE, 0)],
                       image)
    records, error, _ = features.update_features(image, [(ELR_FEATURE, 0, 2)])
    assert error == m.NONE and records[0] == mr.FeatureLevelRecord(ELR_FEATURE, 0)
    p = image_with(records, image).partition("t", 0)
    assert (p.isr, p.leader, p.elr) == ((first,), first, ()), "the ISR is never empty again"
    assert features.update_features(image, [(ELR_FEATURE, 2, 1)])[1] == \
        m.INVALID_UPDATE_VERSION


def test_a_clean_shutdown_file_is_written_after_the_flush_and_read_once():
    from node_image.broker.replica_manager import CLEAN_SHUTDOWN, ReplicaManager
    from node_image.config import BrokerConfig
    from node_image.outbox import Outbox
    from simulator.disk import SimDisk
    disk = SimDisk()
    disk.makedirs("/data")
    said = []

    def manager():
        return ReplicaManager(1, "/data", disk, BrokerConfig(), Outbox(), lambda: 1, said.append)
    assert manager().take_clean_shutdown() == -1, "never shut down: a crash"
    manager().shutdown(broker_epoch=41)
    disk.crash(random.Random(1))  # written durably: a power loss right after keeps it
    rm = manager()
    assert rm.take_clean_shutdown() == 41
    assert manager().take_clean_shutdown() == -1, "read once: a crash of this incarnation counts"
    manager().shutdown(broker_epoch=-1)
    assert not disk.exists(f"/data/{CLEAN_SHUTDOWN}"), "never registered: nothing to say"
    disk.write(f"/data/{CLEAN_SHUTDOWN}", b"{not json")
    assert manager().take_clean_shutdown() == -1
    assert any("unreadable" in e for e in said), said


def test_a_restarted_broker_says_how_its_last_incarnation_ended():
    from node_image.broker.lifecycle import BrokerLifecycleManager
    from node_image.outbox import Outbox
    out = Outbox()
    lm = BrokerLifecycleManager(3, (), None, heartbeat_interval_ms=1000, request_timeout_ms=1000,
                                retry_backoff_ms=100, rng=random.Random(1), outbox=out,
                                next_correlation=lambda: 7, on_event=lambda e: None)
    lm.previous_broker_epoch = 12
    lm.poll(0, controller_id=1, metadata_offset=0)
    [(dest, msg)] = out.take()
    assert dest == 1 and isinstance(msg, m.BrokerRegistrationRequest)
    assert msg.previous_broker_epoch == 12
