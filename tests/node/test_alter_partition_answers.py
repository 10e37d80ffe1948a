"""AlterPartition answers on the leader (the replica manager's side, without I/O): what a
successful answer may change of the partition's ISR, and what it must leave to the
metadata."""
from node_image import messages as m
from node_image.broker.partition import RemoteReplica
from test_replication import batch, brokers, image_with, leading_replica_manager, with_topic


def test_an_expansion_answered_in_another_leader_epoch_keeps_the_pending_isr_until_the_image():
    """The leader asks to add a replica a reassignment brought (b) to the ISR; the change
    completes the reassignment, which removes a replica and so bumps the leader epoch, and
    the controller answers with the new epoch. As Kafka's Partition, that answer is not
    applied: the pending ISR stays, so the high watermark still waits for b, until the
    metadata brings the new epoch (its ISR holds b). Dropping the pending ISR let the high
    watermark pass b's log end (the simulator's seed 165 with add-broker and decommission:
    HighWatermarkWithinIsr)."""
    image = with_topic(image_with(brokers(1, 2, 3, 4)), partitions=1, rf=3)
    rm, _, part = leading_replica_manager(image)
    lead_id = part.node_id
    a, gone = [r for r in part.replicas if r != lead_id]
    b = next(x for x in (1, 2, 3, 4) if x not in part.replicas)
    part.replicas = (lead_id, a, gone, b)  # reassigning: b added, ``gone`` to be removed
    part.remote[b] = RemoteReplica(b, last_caught_up_ms=0)
    part.append_as_leader(batch(), 1 << 62)
    for r in (a, gone):
        part.remote[r].update_fetch_state(1, 1, 10)
    part.remote[b].update_fetch_state(1, 1, 10)
    assert part.maybe_increment_hw(1) or part.high_watermark == 1
    part.pending_isr = part.isr + (b,)  # the expansion in flight
    rm._alter_in_flight[77] = (part.key, 10_000)
    part.append_as_leader(batch(), 1 << 62)  # offset 1: a and gone fetch it, b does not
    for r in (a, gone):
        part.remote[r].update_fetch_state(2, 2, 20)
    assert not part.maybe_increment_hw(1) and part.high_watermark == 1, "b holds it back"
    rm.handle_alter_partition_response(m.AlterPartitionResponse(
        77, m.NONE, "t", 0, lead_id, part.leader_epoch + 1, (lead_id, a, b),
        part.partition_epoch + 1), 30)
    assert part.pending_isr == part.isr + (b,), "kept until the image"
    assert part.high_watermark == 1, "the high watermark did not pass b's log end"
