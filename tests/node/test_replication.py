"""The data plane's pure parts: metadata image and deltas, replication control (placement,
elections, AlterPartition), partitions (HW, ISR rules, truncation) and producer state."""
import dataclasses

import pytest

from node_image import messages as m
from node_image import metadata_records as mr
from node_image import records
from node_image import config_control as cc
from node_image import replication_control as rc
from node_image.broker.partition import Partition
from node_image.broker.producer_state import ProducerStateManager
from node_image.log import OffsetAndEpoch
from node_image.metadata_image import MetadataDelta, MetadataImage
from simulator.disk import SimDisk


def image_with(records_, base=None) -> MetadataImage:
    delta = MetadataDelta(base or MetadataImage())
    for r in records_:
        delta.replay(r)
    return delta.apply(len(records_))


def brokers(*ids, fenced=()):
    return [mr.RegisterBrokerRecord(b, f"inc{b}", 10 + b, (("PLAINTEXT", f"h{b}", 9092),), None,
                                    b in fenced, False) for b in ids]


def cluster_image(n=5, fenced=()):
    return image_with(brokers(*range(1, n + 1), fenced=fenced))


def with_topic(image, name="t", partitions=6, rf=3, configs=()):
    recs, results = rc.create_topics(image, [(name, partitions, rf, tuple(configs))], salt=1)
    assert [r.error for r in results] == [m.NONE], results
    return image_with(recs, image)


def test_delta_leaves_the_old_image_untouched_and_snapshots_rebuild_the_image():
    base = with_topic(cluster_image())
    reg = base.partition("t", 0)
    change = mr.PartitionChangeRecord(0, base.topics["t"].topic_id, reg.isr[:2], reg.isr[1])
    after = image_with([change], base)
    assert base.partition("t", 0) == reg, "the published image changed"
    p = after.partition("t", 0)
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (
        reg.isr[1], reg.leader_epoch + 1, reg.partition_epoch + 1, reg.isr[:2])
    rebuilt = image_with(after.records())
    assert rebuilt.records() == after.records()
    for r in after.records():
        assert mr.decode(mr.encode(r)) == r


def test_placement_is_striped_over_unfenced_brokers():
    image = with_topic(cluster_image(fenced=(5,)), partitions=8, rf=3)
    regs = [image.partition("t", p) for p in range(8)]
    assert all(5 not in r.replicas for r in regs)
    assert all(r.leader == r.replicas[0] and r.isr == r.replicas for r in regs)
    leaders = [r.leader for r in regs]
    assert sorted(set(leaders)) == [1, 2, 3, 4], "leadership spread over every usable broker"
    assert all(len(set(r.replicas)) == 3 for r in regs)


@pytest.mark.parametrize("row, code, words", [
    (("bad name!", 1, 1, ()), m.INVALID_TOPIC_EXCEPTION, "not legal"),
    (("t", 0, 1, ()), m.INVALID_PARTITIONS, "must be positive"),
    (("t", 1, 6, ()), m.INVALID_REPLICATION_FACTOR, "larger than the 5 available"),
    (("t", 1, 3, (("min.insync.replicas", "4"),)), m.INVALID_CONFIG, "larger than the replication"),
    (("t", 1, 3, (("retention.bytez", "1"),)), m.INVALID_CONFIG, "unknown topic config"),
    (("t", 1, 3, (("unclean.leader.election.enable", "yes"),)), m.INVALID_CONFIG, "invalid value"),
    (("t", 1, 3, (("retention.ms", "-2"),)), m.INVALID_CONFIG, "invalid value '-2'"),
    (("t", 1, 3, (("segment.bytes", "1024"),)), m.INVALID_CONFIG, "invalid value '1024'"),
    (("t", 1, 3, (("cleanup.policy", "delete,squash"),)), m.INVALID_CONFIG, "invalid value"),
    (("t", 1, 3, (("min.cleanable.dirty.ratio", "1.5"),)), m.INVALID_CONFIG, "invalid value"),
    (("t", 1, 3, (("remote.storage.enable", "true"),)), m.INVALID_CONFIG,
     "tiered storage is not in this broker"),
    (("t", 1, 3, (("message.timestamp.type", "WallTime"),)), m.INVALID_CONFIG, "invalid value"),
    (("t", -1, 2, (), ((0, (1, 2)),)), m.INVALID_REQUEST, "replication factor was not set to -1"),
    (("t", 1, -1, (), ((0, (1, 2)),)), m.INVALID_REQUEST, "numPartitions was not set to -1"),
    (("t", -1, -1, (), ((0, (1, 2)), (0, (2, 3)))), m.INVALID_REPLICA_ASSIGNMENT,
     "multiple manual partition assignments for partition 0"),
    (("t", -1, -1, (), ((0, ()),)), m.INVALID_REPLICA_ASSIGNMENT, "empty replica list"),
    (("t", -1, -1, (), ((0, (1, 2)), (2, (2, 3)))), m.INVALID_REPLICA_ASSIGNMENT,
     "consecutive 0-based"),
])
def test_create_topics_refuses_bad_requests_with_a_reason(row, code, words):
    recs, [result] = rc.create_topics(cluster_image(), [row], salt=1)
    assert recs == [] and result.error == code and words in result.message


def test_a_manual_assignment_places_each_partition_and_leads_from_its_first_unfenced_replica():
    recs, [result] = rc.create_topics(cluster_image(fenced=(5,)), [
        ("t", -1, -1, (), ((0, (5, 1, 2)), (1, (2, 3, 4))))], salt=1)
    assert (result.error, result.partitions, result.replication_factor) == (m.NONE, 2, 3)
    parts = [r for r in recs if isinstance(r, mr.PartitionRecord)]
    assert [(p.replicas, p.isr, p.leader) for p in parts] == [
        ((5, 1, 2), (1, 2), 1), ((2, 3, 4), (2, 3, 4), 2)], "fenced 5 is a replica outside the ISR"
    _, [all_fenced] = rc.create_topics(cluster_image(fenced=(5,)), [
        ("t", -1, -1, (), ((0, (5,)),))], salt=1)
    assert all_fenced.error == m.INVALID_REPLICA_ASSIGNMENT and "fenced" in all_fenced.message


def test_unclean_elections_follow_the_topic_else_the_clusters_dynamic_default():
    from node_image.metadata_image import CLUSTER
    image = with_topic(cluster_image())
    assert not rc.unclean_allowed(image, "t")
    image.configs[CLUSTER] = {"unclean.leader.election.enable": "true"}
    assert rc.unclean_allowed(image, "t"), "the cluster's dynamic default"
    image.configs[(2, "t")] = {"unclean.leader.election.enable": "false"}
    assert not rc.unclean_allowed(image, "t"), "the topic's own value first"


def test_create_topic_twice_is_topic_already_exists():
    image = with_topic(cluster_image())
    _, [result] = rc.create_topics(image, [("t", 1, 1, ())], salt=2)
    assert result.error == m.TOPIC_ALREADY_EXISTS


def test_create_partitions_adds_placed_or_assigned_partitions_and_refuses_with_kafkas_errors():
    image = with_topic(cluster_image(5, fenced=(5,)), partitions=2, rf=3)
    recs, [ok] = rc.create_partitions(image, [("t", 4, ())])
    assert ok.error == m.NONE and [r.partition_id for r in recs] == [2, 3]
    after = image_with(recs, image)
    assert sorted(after.topics["t"].partitions) == [0, 1, 2, 3]
    for p in (2, 3):
        reg = after.partition("t", p)
        assert len(set(reg.replicas)) == 3 and 5 not in reg.replicas, "placed on usable brokers"
        assert reg.isr == reg.replicas and reg.leader == reg.replicas[0]
    assert after.partition("t", 0) == image.partition("t", 0), "the old partitions untouched"
    recs, [ok] = rc.create_partitions(image, [("t", 3, ((5, 4, 1),))])
    assert ok.error == m.NONE and recs[0].replicas == (5, 4, 1)
    assert recs[0].isr == (4, 1) and recs[0].leader == 4, "a fenced broker is no leader"
    bad = [("t", 2, (), m.INVALID_PARTITIONS, "must be larger"),
           ("nope", 3, (), m.UNKNOWN_TOPIC_OR_PARTITION, "does not exist"),
           ("t", 4, ((1, 2, 3),), m.INVALID_REPLICA_ASSIGNMENT, "1 assignments for 2"),
           ("t", 3, ((1, 1, 2),), m.INVALID_REPLICA_ASSIGNMENT, "3 distinct known brokers"),
           ("t", 3, ((1, 2, 9),), m.INVALID_REPLICA_ASSIGNMENT, "3 distinct known brokers")]
    for name, count, assignments, code, words in bad:
        recs, [r] = rc.create_partitions(image, [(name, count, assignments)])
        assert recs == [] and r.error == code and words in r.message, (name, count, r)


def test_alter_configs_sets_deletes_appends_and_refuses_with_a_reason():
    image = with_topic(cluster_image(), configs=(("min.insync.replicas", "2"),))
    recs, [row] = cc.alter_configs(image, [(2, "t", (
        ("flush.messages", cc.SET, "1"), ("min.insync.replicas", cc.DELETE, None)))], True)
    assert row == (2, "t", m.NONE, None)
    after = image_with(recs, image)
    assert after.topic_config("t") == {"flush.messages": "1"}
    # AlterConfigs replaces the whole set: what it does not name goes back to the default
    recs, [row] = cc.alter_configs(after, [(2, "t", (("compression.type", 0, "lz4"),))], False)
    assert row[2] == m.NONE and image_with(recs, after).topic_config("t") == {
        "compression.type": "lz4"}
    recs, [row] = cc.alter_configs(after, [(2, "t", (("cleanup.policy", cc.APPEND, "delete"),))],
                                   True)
    assert row[2] == m.NONE and image_with(recs, after).topic_config("t")["cleanup.policy"] == \
        "delete"
    bad = [((2, "t", (("min.insync.replicas", cc.SET, "4"),)), m.INVALID_CONFIG,
            "larger than the replication factor 3"),
           ((2, "t", (("retention.ms", cc.SET, "soon"),)), m.INVALID_CONFIG,
            "invalid value 'soon'"),
           ((2, "t", (("no.such", cc.SET, "1"),)), m.INVALID_CONFIG, "unknown topic config"),
           ((2, "t", (("flush.messages", cc.APPEND, "2"),)), m.INVALID_CONFIG, "not a list"),
           ((2, "t", (("cleanup.policy", cc.APPEND, "squash"),)), m.INVALID_CONFIG,
            "invalid value 'delete,squash'"),
           ((2, "nope", ()), m.UNKNOWN_TOPIC_OR_PARTITION, "does not exist"),
           ((4, "1", (("num.partitions", cc.SET, "3"),)), m.INVALID_CONFIG,
            "Cannot update these configs dynamically: Set(num.partitions)"),
           ((4, "", (("sasl.kerberos.min.time.before.relogin", cc.SET, "1"),)),
            m.INVALID_CONFIG, "broker id must be specified"),
           ((4, "1", (("log.segment.bytes", cc.SET, "1"),)), m.INVALID_CONFIG,
            "Invalid value 1 for configuration log.segment.bytes"),
           ((4, "one", (("compression.type", cc.SET, "lz4"),)), m.INVALID_REQUEST,
            "is not a number"),
           ((4, "1", (("advertised.listeners", cc.SET, "PLAINTEXT://x:1"),)), m.INVALID_CONFIG,
            "listeners do not change while it runs"),
           ((8, "x", ()), m.INVALID_REQUEST, "no configs")]
    for resource, code, words in bad:
        recs, [row] = cc.alter_configs(after, [resource], True)
        assert recs == [] and row[2] == code and words in row[3], (resource, row)


def test_delete_topics_removes_the_topic_its_partitions_and_configs():
    image = with_topic(with_topic(cluster_image(), configs=(("flush.messages", "1"),)), "u")
    tid = image.topics["t"].topic_id
    recs, results = rc.delete_topics(image, [("t", ""), ("", image.topics["u"].topic_id),
                                             ("nope", ""), ("", "no-such-id"),
                                             ("__consumer_offsets", "")])
    assert [r[2] for r in results] == [m.NONE, m.NONE, m.UNKNOWN_TOPIC_OR_PARTITION,
                                       m.UNKNOWN_TOPIC_ID, m.UNKNOWN_TOPIC_OR_PARTITION]
    assert results[1][0] == "u", "a topic named by id is answered with its name"
    delta = MetadataDelta(image)
    for r in recs:
        delta.replay(r)
    after = delta.apply(99)
    assert after.topics == {} and after.topic_names == {}
    assert after.topic_config("t") == {}
    assert ("t", 0) in delta.changed_partitions and ("u", 5) in delta.changed_partitions
    assert image_with(after.records()) .topics == {}, "a snapshot of the image agrees"
    again, _ = rc.create_topics(after, [("t", 1, 3, ())], salt=7)
    assert again[0].topic_id != tid, "a topic created again under the name is a new topic"


def test_a_deleted_partitions_files_go_and_a_new_topic_of_the_name_starts_empty():
    from node_image.broker.partition import PARTITION_METADATA, Partition, claim_directory
    from node_image.broker.replica_manager import ReplicaManager
    from node_image.config import BrokerConfig
    from node_image.outbox import Outbox
    from simulator.disk import SimDisk
    disk = SimDisk()
    image = with_topic(image_with(brokers(1)), partitions=1, rf=1)
    corr = iter(range(1, 1000))
    rm = ReplicaManager(1, "/data", disk, BrokerConfig(), Outbox(), lambda: next(corr),
                        lambda e: None)
    rm.apply_image(image, None, 0)
    part = rm.partitions[("t", 0)]
    rm.append(part, batch())
    assert disk.listdir("/data/t-0"), "the partition has files"
    [rec] = rc.delete_topics(image, [("t", "")])[0]
    delta = MetadataDelta(image)
    delta.replay(rec)
    rm.apply_image(delta.apply(10), set(delta.changed_partitions), 1)
    assert ("t", 0) not in rm.partitions and disk.listdir("/data/t-0") == []
    # a deletion cut short: the metadata file (removed last) still names the old topic
    old = Partition(1, "t", 0, disk, "/data", 1 << 20, 0, lambda e: None, topic_id="old-id")
    old.log.append(batch())
    old.log.flush()
    claim_directory(disk, "/data/t-0", "new-id", lambda e: None)
    assert disk.listdir("/data/t-0") == [PARTITION_METADATA]
    fresh = Partition(1, "t", 0, disk, "/data", 1 << 20, 0, lambda e: None, topic_id="new-id")
    assert fresh.log.end_offset == 0, "nothing of the deleted topic is served"


def test_a_topic_deleted_with_a_config_change_or_while_away_is_deleted_on_the_broker():
    """A delta that also changes a config or a broker makes the broker follow every
    partition, and still the ones it deleted; a replica that missed the deletion (it follows
    the whole image after a restart) drops what the image no longer has. Either way the
    group coordinator hears of it (topics_deleted)."""
    from node_image.broker.replica_manager import ReplicaManager, touched_partitions
    from node_image.config import BrokerConfig
    from node_image.outbox import Outbox
    from simulator.disk import SimDisk
    for away in (False, True):
        disk = SimDisk()
        image = with_topic(with_topic(image_with(brokers(1)), partitions=1, rf=1), "u",
                           partitions=1, rf=1)
        corr = iter(range(1, 1000))
        rm = ReplicaManager(1, "/data", disk, BrokerConfig(), Outbox(), lambda: next(corr),
                            lambda e: None)
        rm.apply_image(image, None, 0)
        rm.append(rm.partitions[("t", 0)], batch())
        [rec] = rc.delete_topics(image, [("t", "")])[0]
        delta = MetadataDelta(image)
        delta.replay(rec)
        delta.replay(mr.ConfigRecord(2, "u", "min.insync.replicas", "1"))
        after = delta.apply(10)
        touched = None if away else touched_partitions(delta, after)
        assert away or touched == {("t", 0), ("u", 0)}, touched
        rm.apply_image(after, touched, 1)
        assert set(rm.partitions) == {("u", 0)} and disk.listdir("/data/t-0") == [], away
        assert rm.topics_deleted == {("t", 0)}, away
    assert touched_partitions(None, after) is None


def fence(image, broker):
    b = image.brokers[broker]
    change = mr.BrokerRegistrationChangeRecord(broker, b.broker_epoch, mr.FENCE, 0)
    fenced = image_with([change], image)
    return image_with(rc.broker_unavailable(fenced, broker), fenced)


def test_fencing_the_leader_elects_from_the_isr_and_shrinks_it():
    image = with_topic(cluster_image(), partitions=1)
    reg = image.partition("t", 0)
    after = fence(image, reg.leader)
    p = after.partition("t", 0)
    assert p.leader == reg.replicas[1] and p.isr == reg.replicas[1:]
    assert p.leader_epoch == reg.leader_epoch + 1


def test_fencing_the_last_isr_member_leaves_no_leader_but_keeps_it_in_the_isr():
    image = with_topic(cluster_image(), partitions=1)
    order = image.partition("t", 0).replicas
    for b in order:
        image = fence(image, b)
    p = image.partition("t", 0)
    assert p.leader == mr.NO_LEADER and p.isr == (order[-1],)
    # Unfencing a replica that is not in the ISR elects nobody (clean elections only)...
    first = order[0]
    b = image.brokers[first]
    image = image_with([mr.BrokerRegistrationChangeRecord(first, b.broker_epoch, mr.UNFENCE, 0)], image)
    assert rc.elect_leaderless(image) == []
    # ...unless the topic allows unclean elections.
    cfg = mr.ConfigRecord(2, "t", "unclean.leader.election.enable", "true")
    unclean = image_with([cfg], image)
    [change] = rc.elect_leaderless(unclean)
    assert (change.leader, change.isr) == (first, (first,))


def test_planted_unclean_election_takes_a_replica_outside_the_isr():
    image = with_topic(cluster_image(), partitions=1)
    leader, f1, f2 = image.partition("t", 0).replicas
    topic_id = image.topics["t"].topic_id
    image = image_with([mr.PartitionChangeRecord(0, topic_id, (leader, f2), mr.NO_LEADER_CHANGE)],
                       image)  # f1 fell out of the ISR
    b = image.brokers[leader]
    fenced = image_with([mr.BrokerRegistrationChangeRecord(leader, b.broker_epoch, mr.FENCE, 0)],
                        image)
    [clean] = rc.broker_unavailable(fenced, leader)
    [buggy] = rc.broker_unavailable(fenced, leader, unclean_bug=True)
    assert clean.leader == f2, "a correct controller elects the ISR member"
    assert buggy.leader == f1 and buggy.isr == (f1,), "the bug elects the lagging replica"


def test_preferred_election_moves_leadership_back():
    image = with_topic(cluster_image(), partitions=1)
    reg = image.partition("t", 0)
    topic_id = image.topics["t"].topic_id
    moved = image_with([mr.PartitionChangeRecord(0, topic_id, None, reg.replicas[1])], image)
    [change] = rc.elect_preferred(moved)
    assert change.leader == reg.replicas[0]


def alter(image, **kw):
    reg = image.partition("t", 0)
    b = image.brokers[reg.leader]
    req = m.AlterPartitionRequest(1, reg.leader, b.broker_epoch, "t", 0, reg.leader_epoch,
                                  reg.isr, reg.partition_epoch)
    return rc.alter_partition(image, dataclasses.replace(req, **kw))


def test_alter_partition_validation():
    image = with_topic(cluster_image(), partitions=1)
    reg = image.partition("t", 0)
    leader, f1, f2 = reg.replicas
    assert alter(image, new_isr=(leader, f1))[0] == m.NONE
    assert alter(image, broker_epoch=1)[0] == m.STALE_BROKER_EPOCH
    assert alter(image, partition_epoch=reg.partition_epoch + 1)[0] == m.INVALID_UPDATE_VERSION
    assert alter(image, leader_epoch=reg.leader_epoch + 1)[0] == m.NOT_LEADER_OR_FOLLOWER
    assert alter(image, new_isr=(f1, f2))[0] == m.INVALID_REQUEST, "ISR without the leader"
    outsider = next(b for b in image.brokers if b not in reg.replicas)
    assert alter(image, new_isr=(leader, outsider))[0] == m.INVALID_REQUEST
    shrunk = image_with(alter(image, new_isr=(leader,))[1], image)
    fenced = image_with([mr.BrokerRegistrationChangeRecord(
        f1, image.brokers[f1].broker_epoch, mr.FENCE, 0)], shrunk)
    assert alter(fenced, new_isr=(leader, f1),
                 partition_epoch=shrunk.partition("t", 0).partition_epoch)[0] == m.INELIGIBLE_REPLICA


# ------------------------------------------------------------------ partitions

def make_partition(disk, node=1, hw=0):
    return Partition(node, "t", 0, disk, "/data", 1 << 20, hw, lambda msg: None)


def lead(part, replicas=(1, 2, 3), isr=(1, 2, 3), epoch=0, pepoch=0, now=0):
    from node_image.metadata_image import PartitionRegistration
    return part.apply_registration(PartitionRegistration(replicas, isr, replicas[0], epoch, pepoch), now)


def batch(n=1):
    return records.build_batch(0, 0, [(None, b"v")] * n, 1)


def test_hw_is_the_minimum_leo_of_the_isr_and_waits_for_min_isr():
    part = make_partition(SimDisk())
    assert lead(part) == "leader"
    for _ in range(3):
        part.append_as_leader(batch(), 1 << 62)
    assert part.log.end_offset == 3
    assert not part.maybe_increment_hw(2), "followers have fetched nothing"
    part.remote[2].update_fetch_state(3, 3, 10)
    part.remote[3].update_fetch_state(1, 3, 10)
    assert part.maybe_increment_hw(2) and part.high_watermark == 1
    part.isr = (1,)  # the controller shrank the ISR below min.insync.replicas
    part.remote[3].update_fetch_state(3, 3, 11)
    assert not part.maybe_increment_hw(2) and part.high_watermark == 1
    part.isr = (1, 3)
    assert part.maybe_increment_hw(2) and part.high_watermark == 3


def test_isr_shrink_and_expand_rules():
    part = make_partition(SimDisk())
    lead(part, now=0)
    part.append_as_leader(batch(), 1 << 62)
    part.remote[2].update_fetch_state(1, 1, 100)  # caught up at 100
    assert part.out_of_sync_replicas(30_050, 30_000) == [3]
    part.isr = (1, 2)
    part.remote[3].update_fetch_state(1, 1, 200)
    assert part.caught_up_outside_isr(200, 30_000) == [3]
    assert part.caught_up_outside_isr(30_201, 30_000) == [], "no fetch since: not in sync"


def leading_replica_manager(image):
    """The replica manager of partition t-0's leader in ``image``, its outbox, the
    partition."""
    from node_image.broker.replica_manager import ReplicaManager
    from node_image.config import BrokerConfig
    from node_image.outbox import Outbox
    corr = iter(range(1, 1000))
    out = Outbox()
    rm = ReplicaManager(image.partition("t", 0).leader, "/data", SimDisk(), BrokerConfig(), out,
                        lambda: next(corr), lambda e: None)
    rm.controller_id, rm.broker_epoch = 9, 5
    rm.apply_image(image, None, 0)
    return rm, out, rm.partitions[("t", 0)]


def test_isr_shrinks_on_its_timer_only_and_expands_on_any_input():
    """Between two ISR checks (every half of replica.lag.time.max.ms, Kafka's isr-expiration
    task) an input may take a caught-up follower into the ISR but takes nobody out; the
    next check does. (The expansion path used to shrink too, so on a busy broker a follower
    that had just joined left again on the next input, several times a second.)"""
    image = with_topic(image_with(brokers(1, 2, 3)), partitions=1, rf=3)
    rm, out, part = leading_replica_manager(image)
    lead_id, a, b = part.node_id, *[r for r in part.replicas if r != part.node_id]
    part.isr = (lead_id, a)  # b left the ISR earlier

    def proposed(now):
        out.take()
        part.pending_isr = None
        rm.poll(now)
        return [msg.new_isr for _, msg in out.take() if isinstance(msg, m.AlterPartitionRequest)]
    assert proposed(0) == [] and proposed(15_000) == [] and proposed(30_000) == []
    # 40 s: a has not caught up for 40 s (past the 30 s lag), b fetches at the log end
    part.remote[b].update_fetch_state(0, 0, 40_000)
    assert proposed(40_000) == [], "fetched by no registration of b's (KIP-903)"
    part.remote[b].broker_epoch = image.brokers[b].broker_epoch
    assert proposed(40_000) == [(lead_id, a, b)], "between checks: b joins, a stays"
    part.isr = (lead_id, a, b)
    assert proposed(45_000) == [(lead_id, b)], "the next check takes a out"


def test_follower_truncates_where_the_logs_diverge():
    part = make_partition(SimDisk(), node=2)
    assert lead(part, replicas=(1, 2, 3)) == "follower"
    b0 = records.build_batch(0, 0, [(None, b"a")] * 2, 1)
    b1 = records.build_batch(2, 1, [(None, b"b")] * 2, 1)
    part.append_as_follower(b0 + b1, 2, 1 << 62)
    assert (part.log.end_offset, part.high_watermark) == (4, 2)
    # The new leader's epoch 1 ended at offset 3: cut our offset 3 away.
    assert part.truncate_to_diverging(OffsetAndEpoch(3, 1)) == 2  # whole batches only
    assert part.log.end_offset == 2 and part.high_watermark == 2


def test_a_follower_that_led_an_epoch_alone_cuts_it_where_the_leaders_epoch_0_ends():
    """Partition epochs start at 0, a real leader epoch: a replica that led epoch 1 alone
    (nobody fetched it) answers a leader whose log goes from epoch 0 straight to epoch 2 by
    cutting everything of its epoch 1, not at the leader's end of epoch 0."""
    part = make_partition(SimDisk(), node=2)
    assert lead(part, replicas=(1, 2, 3)) == "follower"
    b0 = records.build_batch(0, 0, [(None, b"a")] * 3, 1)
    b1 = records.build_batch(3, 1, [(None, b"alone")], 1)
    part.append_as_follower(b0 + b1, 3, 1 << 62)
    assert part.log.epoch_entries == [(0, 0), (1, 3)] and part.log.end_offset == 4
    # the leader: epoch 0 up to offset 6, then epoch 2; our epoch 1 is unknown to it
    assert part.truncate_to_diverging(OffsetAndEpoch(6, 0)) == 3
    assert part.log.end_offset == 3 and part.log.epoch_entries == [(0, 0)]


def test_producer_state_dedups_the_last_five_batches_and_refuses_gaps():
    ps = ProducerStateManager()

    def hdr(seq, n=1, epoch=0, pid=7, base=0):
        return records.parse_header(records.build_batch(
            base, 0, [(None, b"x")] * n, 1, producer_id=pid, producer_epoch=epoch, base_sequence=seq))
    offset = 0
    for seq in range(0, 12, 2):
        h = hdr(seq, n=2, base=offset)
        assert ps.check(h) == (m.NONE, None)
        ps.update(h)
        offset += 2
    error, dup = ps.check(hdr(8, n=2))
    assert error == m.NONE and (dup.first_offset, dup.last_offset) == (8, 9)
    assert ps.check(hdr(0, n=2)) == (m.OUT_OF_ORDER_SEQUENCE_NUMBER, None), "older than five batches"
    assert ps.check(hdr(13)) == (m.OUT_OF_ORDER_SEQUENCE_NUMBER, None), "a gap"
    assert ps.check(hdr(12)) == (m.NONE, None)
    assert ps.check(hdr(12, epoch=1)) == (m.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    assert ps.check(hdr(0, epoch=1)) == (m.NONE, None), "a new epoch starts at 0"
    ps.update(hdr(0, epoch=1, base=offset))
    assert ps.check(hdr(1, epoch=0)) == (m.INVALID_PRODUCER_EPOCH, None)


def test_replica_lag_is_measured_on_the_wall_clock_as_kafkas():
    """Kafka's Partition.getOutOfSyncReplicas reads Time.milliseconds(): a leader whose wall
    clock jumps forward past replica.lag.time.max.ms drops a follower that has not fetched
    since, though on the monotonic clock (``now``) it was away only a moment."""
    from node_image.broker.replica_manager import ReplicaManager
    from node_image.config import BrokerConfig
    image = with_topic(cluster_image(3), partitions=1, rf=3)
    reg = image.partition("t", 0)
    leader, fetching, silent = reg.leader, *[r for r in reg.replicas if r != reg.leader]
    from node_image.outbox import Outbox
    wall = [1_000_000]
    outbox = Outbox()
    corr = iter(range(1, 1000))
    rm = ReplicaManager(leader, "/data", SimDisk(), BrokerConfig(), outbox, lambda: next(corr),
                        lambda msg: None, wall_clock=lambda: wall[0])
    rm.controller_id, rm.broker_epoch = fetching, 10

    def fetch(follower, now):
        rm.handle_replica_fetch(f"n{follower}", m.ReplicaFetchRequest(
            next(corr), follower, 10, 0, (("t", 0, reg.leader_epoch, 0, -1, 0),)), now)

    def alters():
        return [x for _, x in outbox if isinstance(x, m.AlterPartitionRequest)]
    rm.apply_image(image, None, now=0)
    fetch(fetching, 10)
    fetch(silent, 10)
    rm.poll(20)
    assert not alters()
    wall[0] += 40_000  # 40 s on the wall clock; 20 ms on the monotonic one
    fetch(fetching, 40)
    rm.poll(40 + 15_000)  # the next ISR check
    [alter] = alters()
    assert set(alter.new_isr) == {leader, fetching}, alter
    # the same, with no wall clock given: lag on ``now``, and 15 s is no lag
    outbox.take()
    rm2 = ReplicaManager(leader, "/data2", SimDisk(), BrokerConfig(), outbox, lambda: next(corr),
                         lambda msg: None)
    rm2.controller_id, rm2.broker_epoch = fetching, 10
    rm, wall[0] = rm2, 0
    rm.apply_image(image, None, now=0)
    fetch(fetching, 10)
    fetch(silent, 10)
    rm.poll(20)
    fetch(fetching, 40)
    rm.poll(40 + 15_000)
    assert not alters()


def unfence(image, broker):
    b = image.brokers[broker]
    return image_with([mr.BrokerRegistrationChangeRecord(broker, b.broker_epoch, mr.UNFENCE, 0)],
                      image)


def test_elect_leaders_preferred_and_unclean_answer_with_kafkas_errors():
    """ElectLeaders as Kafka's ReplicationControlManager: a preferred election moves the
    leader back to the first replica once it is in the ISR (before, PREFERRED_LEADER_NOT_
    AVAILABLE), is ELECTION_NOT_NEEDED where it leads already; an unclean one takes an
    eligible replica outside the ISR only where there is no leader; all partitions (None)
    answers only those an election was tried for."""
    image = with_topic(cluster_image(), partitions=1)
    order = image.partition("t", 0).replicas
    topic_id = image.topics["t"].topic_id

    def elect(img, election, partitions):
        recs, results = rc.elect_leaders(img, election, partitions)
        return recs, [(t, p, e) for t, p, e, _ in results]
    assert elect(image, rc.PREFERRED, (("t", 0), ("t", 9), ("u", 0))) == ([], [
        ("t", 0, m.ELECTION_NOT_NEEDED), ("t", 9, m.UNKNOWN_TOPIC_OR_PARTITION),
        ("u", 0, m.UNKNOWN_TOPIC_OR_PARTITION)])
    assert elect(image, rc.PREFERRED, None) == ([], []), "nothing tried, nothing answered"
    moved = unfence(fence(image, order[0]), order[0])
    assert moved.partition("t", 0).leader == order[1]
    assert elect(moved, rc.PREFERRED, (("t", 0),)) == (
        [], [("t", 0, m.PREFERRED_LEADER_NOT_AVAILABLE)]), "the first replica left the ISR"
    back = image_with([mr.PartitionChangeRecord(0, topic_id, order, mr.NO_LEADER_CHANGE)], moved)
    recs, results = elect(back, rc.PREFERRED, None)
    assert results == [("t", 0, m.NONE)] and recs[0].leader == order[0]
    assert image_with(recs, back).partition("t", 0).leader == order[0]
    assert elect(back, rc.UNCLEAN, (("t", 0),)) == ([], [("t", 0, m.ELECTION_NOT_NEEDED)])
    leaderless = image
    for b in order:
        leaderless = fence(leaderless, b)
    assert leaderless.partition("t", 0).leader == mr.NO_LEADER
    assert elect(leaderless, rc.UNCLEAN, (("t", 0),)) == (
        [], [("t", 0, m.ELIGIBLE_LEADERS_NOT_AVAILABLE)]), "every replica fenced"
    outside = unfence(leaderless, order[0])  # eligible again, but not in the ISR
    assert elect(outside, rc.PREFERRED, (("t", 0),))[1] == [
        ("t", 0, m.PREFERRED_LEADER_NOT_AVAILABLE)]
    recs, results = elect(outside, rc.UNCLEAN, (("t", 0),))
    assert results == [("t", 0, m.NONE)]
    assert (recs[0].leader, recs[0].isr) == (order[0], (order[0],))


def test_the_preferred_election_bug_elects_a_replica_outside_the_isr():
    """preferred-election-ignores-isr: the first replica, registered and unfenced but not
    caught up (outside the ISR), is refused by a correct controller and elected with the
    bug, which puts it back in the ISR it never rejoined."""
    image = with_topic(cluster_image(), partitions=1)
    order = image.partition("t", 0).replicas
    back = unfence(fence(image, order[0]), order[0])  # restarted, still catching up
    assert order[0] not in back.partition("t", 0).isr
    recs, results = rc.elect_leaders(back, rc.PREFERRED, (("t", 0),))
    assert (recs, [r[2] for r in results]) == ([], [m.PREFERRED_LEADER_NOT_AVAILABLE])
    recs, results = rc.elect_leaders(back, rc.PREFERRED, (("t", 0),), preferred_bug=True)
    assert [r[2] for r in results] == [m.NONE]
    after = image_with(recs, back).partition("t", 0)
    assert after.leader == order[0] and after.isr[0] == order[0]
    fenced = fence(image, order[0])
    assert rc.elect_leaders(fenced, rc.PREFERRED, (("t", 0),), preferred_bug=True)[1][0][2] \
        == m.PREFERRED_LEADER_NOT_AVAILABLE, "a fenced replica is not eligible, bug or not"
