"""Partition reassignment (KIP-455): AlterPartitionReassignments and
ListPartitionReassignments, as Kafka's ReplicationControlManager answers them.

A reassignment is kept in the partition's registration: ``replicas`` is the target
followed by the replicas being removed, ``adding`` the target's replicas that were not
replicas before, ``removing`` those not in the target. The leader treats every replica
as a follower, so the added ones fetch and join the ISR as any follower does; the
``PartitionChangeBuilder`` (``replication_control``) completes the reassignment, in
whichever change first finds every replica of the target in the ISR: the replicas become
the target, the removed ones leave the ISR, the leader epoch goes up (fencing them), and a
leader being removed hands over to a replica of the target.
"""
from __future__ import annotations

from . import messages as m
from .metadata_image import MetadataImage
from .replication_control import PartitionChangeBuilder, iter_partitions, unclean_allowed


def alter_reassignments(image: MetadataImage, partitions, allow_rf_change: bool = True,
                        skip_catch_up_bug: bool = False) -> tuple[list, list[tuple]]:
    """Records and result rows (topic, partition, error, message) for
    AlterPartitionReassignments (rows of topic, partition, target replicas or None to
    cancel), as Kafka's ReplicationControlManager: the replicas become the target followed
    by the ones being removed; the target is reached (by this record, or later by the
    AlterPartition that brings its last replica into the ISR) only once every replica of it
    is in the ISR. Cancelling takes out the replicas being added and keeps those being
    removed; with none in progress it is NO_REASSIGNMENT_IN_PROGRESS. The broker refuses a
    request naming a partition twice (INVALID_REQUEST), so each row reads the same image."""
    records: list = []
    results: list[tuple] = []
    for topic, pid, target in partitions:
        def fail(code: int, message: str) -> None:
            results.append((topic, pid, code, message))
        t = image.topics.get(topic)
        reg = None if t is None else t.partitions.get(pid)
        if reg is None:
            fail(m.UNKNOWN_TOPIC_OR_PARTITION, f"no such topic as {topic}" if t is None
                 else f"no such partition as {topic}-{pid}")
            continue
        b = PartitionChangeBuilder(image, topic, pid, reg)
        b.skip_catch_up_bug = skip_catch_up_bug
        if target is None:
            if not reg.reassigning:
                fail(m.NO_REASSIGNMENT_IN_PROGRESS, f"no reassignment of {topic}-{pid} is in "
                                                    "progress")
                continue
            b.target_replicas = tuple(r for r in reg.replicas if r not in reg.adding)
            b.target_isr = tuple(r for r in reg.isr if r not in reg.adding)
            if not b.target_isr:
                if not unclean_allowed(image, topic):
                    fail(m.INVALID_REPLICA_ASSIGNMENT, f"cancelling the reassignment of "
                         f"{topic}-{pid} would need an unclean leader election: every ISR "
                         "member is a replica being added")
                    continue
                b.target_isr = b.target_replicas[:1]
            b.target_removing = b.target_adding = ()
        else:
            target = tuple(target)
            bad = None
            if not target:
                bad = "the target replica list is empty"
            elif len(set(target)) != len(target):
                bad = f"the target {list(target)} names a broker more than once"
            else:
                bad = next((f"the target names broker {x}, but no such broker is registered"
                            for x in sorted(target) if x not in image.brokers), None)
            if bad:
                fail(m.INVALID_REPLICA_ASSIGNMENT, bad)
                continue
            if not allow_rf_change and len(target) != len(reg.target):
                fail(m.INVALID_REPLICATION_FACTOR, f"the replication factor of {topic}-{pid} "
                     f"would change from {len(reg.target)} to {len(target)}, and the request "
                     "does not allow it")
                continue
            removing = tuple(sorted(set(reg.replicas) - set(target)))
            b.target_replicas = target + removing
            b.target_removing = removing
            b.target_adding = tuple(sorted(set(target) - set(reg.replicas)))
        rec = b.build()
        results.append((topic, pid, m.NONE, None))
        if rec is not None:
            records.append(rec)
    return records, results


def list_reassignments(image: MetadataImage, partitions) -> list[tuple]:
    """Rows (topic, partition, replicas, adding, removing) of the reassignments in progress,
    for the (topic, partition) rows given or every partition (None); others are left out."""
    if partitions is None:
        partitions = [(name, pid) for name, pid, _ in iter_partitions(image)]
    out = []
    for topic, pid in partitions:
        reg = image.partition(topic, pid)
        if reg is not None and reg.reassigning:
            out.append((topic, pid, reg.replicas, reg.adding, reg.removing))
    return out
