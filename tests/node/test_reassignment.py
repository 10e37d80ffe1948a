"""Partition reassignment (KIP-455) at the cores: the records keep their old bytes when no
reassignment is in progress, the controller's rules (``reassignment.alter_reassignments``
and the PartitionChangeBuilder completing a move), and a broker's replica manager following
it: an added replica fetches from the leader, which takes it into the ISR; the move then
completes and the removed replica's log is deleted. The controller's answers step by step
are in ``tests/testdata/controller/reassignment.txt``."""
import msgpack

from node_image import messages as m
from node_image import metadata_records as mr
from node_image import reassignment
from node_image import replication_control as rc
from node_image.broker.replica_manager import ReplicaManager
from node_image.config import BrokerConfig
from node_image.metadata_image import MetadataDelta
from node_image.outbox import Outbox
from node_image.records import read_uvarint
from simulator.disk import SimDisk
from test_replication import batch, brokers, cluster_image, fence, image_with, with_topic


def fields(record) -> list:
    value = mr.encode(record)
    pos = 0
    for _ in range(3):  # frame version, api key, record version
        _, pos = read_uvarint(value, pos, len(value))
    return msgpack.unpackb(value[pos:])


def test_partition_records_keep_their_bytes_unless_a_reassignment_is_in_progress():
    """Old logs and snapshots read as before: the new fields are written only when set."""
    plain = mr.PartitionRecord(0, "id", (1, 2), (1, 2), 1, 0, 0)
    assert len(fields(plain)) == 7 and mr.decode(mr.encode(plain)) == plain
    moving = mr.PartitionRecord(0, "id", (3, 1, 2), (1, 2), 1, 0, 0, (2,), (3,))
    assert len(fields(moving)) == 9 and mr.decode(mr.encode(moving)) == moving
    change = mr.PartitionChangeRecord(0, "id", (1,), mr.NO_LEADER_CHANGE)
    assert len(fields(change)) == 4 and mr.decode(mr.encode(change)) == change
    done = mr.PartitionChangeRecord(0, "id", None, 1, (1, 3), (), ())
    assert len(fields(done)) == 7 and mr.decode(mr.encode(done)) == done


def reassign(image, *rows, allow_rf=True):
    records, results = reassignment.alter_reassignments(image, rows, allow_rf)
    return image_with(records, image), [(t, p, e) for t, p, e, _ in results]


def test_a_move_completes_only_once_the_whole_target_is_in_the_isr():
    image = with_topic(cluster_image(5), partitions=1, rf=3)
    reg = image.partition("t", 0)
    spare = next(b for b in range(1, 6) if b not in reg.replicas)
    gone = reg.replicas[-1]
    target = reg.replicas[:-1] + (spare,)
    moving, results = reassign(image, ("t", 0, target))
    assert results == [("t", 0, m.NONE)]
    p = moving.partition("t", 0)
    assert (p.replicas, p.adding, p.removing) == (target + (gone,), (spare,), (gone,))
    assert (p.leader, p.leader_epoch, p.isr) == (reg.leader, reg.leader_epoch, reg.isr)
    assert reassignment.list_reassignments(moving, None) == [
        ("t", 0, target + (gone,), (spare,), (gone,))]
    assert reassignment.list_reassignments(moving, [("t", 1), ("u", 0)]) == []

    def alter(img, isr):
        q = img.partition("t", 0)
        b = img.brokers[q.leader]
        return rc.alter_partition(img, m.AlterPartitionRequest(
            1, q.leader, b.broker_epoch, "t", 0, q.leader_epoch, isr, q.partition_epoch))
    assert alter(moving, reg.isr + (9,))[0] == m.INVALID_REQUEST, "9 is no replica"
    error, recs = alter(moving, reg.isr + (spare,))
    assert error == m.NONE, "the leader stays (it is not being removed)"
    done = image_with(recs, moving).partition("t", 0)
    assert (done.replicas, done.adding, done.removing) == (target, (), ())
    assert set(done.isr) == set(target) and done.leader == reg.leader
    assert done.leader_epoch == reg.leader_epoch + 1, "the removed replica is fenced"


def test_removing_the_leader_hands_over_and_a_stuck_move_can_be_cancelled():
    image = with_topic(cluster_image(5), partitions=1, rf=3)
    reg = image.partition("t", 0)
    spare = next(b for b in range(1, 6) if b not in reg.replicas)
    target = (spare,) + reg.replicas[1:]
    moving, _ = reassign(image, ("t", 0, target))
    stuck = fence(moving, spare)  # the new replica is down: the move cannot complete
    assert stuck.partition("t", 0).adding == (spare,)
    leader = stuck.brokers[reg.leader]
    error, recs = rc.alter_partition(stuck, m.AlterPartitionRequest(
        1, reg.leader, leader.broker_epoch, "t", 0, reg.leader_epoch, reg.isr + (spare,),
        stuck.partition("t", 0).partition_epoch))
    assert (error, recs) == (m.INELIGIBLE_REPLICA, []), "a fenced replica cannot join"
    back, results = reassign(stuck, ("t", 0, None))
    assert results == [("t", 0, m.NONE)]
    p = back.partition("t", 0)
    # Kafka's order: what stays of the target, then the replicas that were being removed
    assert (p.replicas, p.isr, p.adding, p.removing, p.leader) == (
        reg.replicas[1:] + reg.replicas[:1], reg.isr, (), (), reg.leader)
    assert reassign(back, ("t", 0, None))[1] == [("t", 0, m.NO_REASSIGNMENT_IN_PROGRESS)]
    # completed by the leader's own AlterPartition: leadership moves to the target's first
    error, recs = rc.alter_partition(moving, m.AlterPartitionRequest(
        1, reg.leader, leader.broker_epoch, "t", 0, reg.leader_epoch, reg.isr + (spare,),
        moving.partition("t", 0).partition_epoch))
    assert error == m.NEW_LEADER_ELECTED
    after = image_with(recs, moving).partition("t", 0)
    assert (after.replicas, after.leader) == (target, spare)


def test_bad_targets_are_refused_and_a_replication_factor_change_may_be_forbidden():
    image = with_topic(cluster_image(4), partitions=1, rf=2)
    reg = image.partition("t", 0)
    others = tuple(b for b in range(1, 5) if b not in reg.replicas)
    _, results = reassign(image, ("t", 0, ()), ("t", 0, (1, 1)), ("t", 0, (1, 9)),
                          ("t", 7, (1, 2)), ("u", 0, (1, 2)))
    assert results == [("t", 0, m.INVALID_REPLICA_ASSIGNMENT)] * 3 + [
        ("t", 7, m.UNKNOWN_TOPIC_OR_PARTITION), ("u", 0, m.UNKNOWN_TOPIC_OR_PARTITION)]
    wider = reg.replicas + others[:1]
    assert reassign(image, ("t", 0, wider), allow_rf=False)[1] == [
        ("t", 0, m.INVALID_REPLICATION_FACTOR)]
    grown, results = reassign(image, ("t", 0, wider))
    assert results == [("t", 0, m.NONE)] and grown.partition("t", 0).adding == others[:1]
    shrunk, _ = reassign(image, ("t", 0, reg.replicas[:1]))
    p = shrunk.partition("t", 0)
    assert (p.replicas, p.isr, p.reassigning) == (reg.replicas[:1], reg.replicas[:1], False), \
        "a smaller target inside the ISR is reached at once"


def test_the_leader_serves_an_added_replica_and_a_removed_one_drops_its_log():
    """Two brokers' replica managers on their own disks: 1 leads t-0 alone; the partition
    moves to (1, 2): 2 opens it and fetches, 1 takes it into the ISR (AlterPartition), which
    completes a later move to (2,) alone; 1 then deletes its copy."""
    image = with_topic(image_with(brokers(1, 2)), partitions=1, rf=1)
    if image.partition("t", 0).replicas != (1,):
        image, _ = reassign(image, ("t", 0, (1,)))
    disks = {b: SimDisk() for b in (1, 2)}
    outboxes = {b: Outbox() for b in (1, 2)}
    corr = iter(range(1, 10_000))
    rms = {b: ReplicaManager(b, "/data", disks[b], BrokerConfig(), outboxes[b],
                             lambda: next(corr), lambda e: None) for b in (1, 2)}
    for b, rm in rms.items():
        rm.broker_epoch, rm.controller_id = image.brokers[b].broker_epoch, 0
        rm.apply_image(image, None, 0)
    leader = rms[1]
    for _ in range(3):
        leader.append(leader.partitions[("t", 0)], batch())

    def publish(records):
        nonlocal image
        delta = MetadataDelta(image)
        for r in records:
            delta.replay(r)
        image = delta.apply(image.offset + len(records))
        for rm in rms.values():
            rm.apply_image(image, set(delta.changed_partitions), now)
    now = 1
    publish(reassignment.alter_reassignments(image, [("t", 0, (1, 2))])[0])
    assert ("t", 0) in rms[2].partitions and 2 in leader.partitions[("t", 0)].remote
    for now in range(2, 40):  # deliver fetches and the leader's AlterPartition
        for b, rm in rms.items():
            rm.poll(now)
        for b, box in outboxes.items():
            for dest, msg in box.take():
                if isinstance(msg, m.AlterPartitionRequest):
                    error, recs = rc.alter_partition(image, msg)
                    assert error == m.NONE, m.ERROR_NAMES.get(error)
                    publish(recs)
                elif isinstance(msg, m.ReplicaFetchRequest):
                    rms[dest].handle_replica_fetch(b, msg, now)
                elif isinstance(msg, m.ReplicaFetchResponse):
                    rms[dest].handle_replica_fetch_response(b, msg, now)
        if not image.partition("t", 0).reassigning:
            break
    p = image.partition("t", 0)
    assert (p.replicas, p.isr, p.reassigning) == ((1, 2), (1, 2), False), p
    assert rms[2].partitions[("t", 0)].log.end_offset == 3, "the new replica caught up"
    publish(reassignment.alter_reassignments(image, [("t", 0, (2,))])[0])
    p = image.partition("t", 0)
    assert (p.replicas, p.leader) == ((2,), 2)
    assert ("t", 0) not in leader.partitions and disks[1].listdir("/data/t-0") == []
    assert rms[2].partitions[("t", 0)].is_leader
    assert rms[2].topics_deleted == set(), "a move is no deletion (offsets are kept)"


def test_planted_reassign_skips_catch_up_puts_an_empty_replica_in_the_isr_and_lead():
    """reassign-skips-catch-up: the move completes in the request's own record, the new
    replica in the ISR before it fetched anything and, where the leader was replaced, its
    leader; without the bug the same request only starts the move."""
    image = with_topic(cluster_image(5), partitions=1, rf=3)
    reg = image.partition("t", 0)
    spare = next(b for b in range(1, 6) if b not in reg.replicas)
    target = (spare,) + reg.replicas[1:]
    records, _ = reassignment.alter_reassignments(image, [("t", 0, target)], True, True)
    p = image_with(records, image).partition("t", 0)
    assert (p.replicas, p.reassigning, p.leader) == (target, False, spare)
    assert spare in p.isr and reg.leader not in p.isr
    correct, _ = reassign(image, ("t", 0, target))
    assert correct.partition("t", 0).leader == reg.leader
    assert spare not in correct.partition("t", 0).isr
