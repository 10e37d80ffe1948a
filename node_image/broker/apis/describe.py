"""What a broker tells of its topics and its disk: DescribeTopicPartitions (KIP-966's
paged Metadata), DescribeLogDirs and AlterReplicaLogDirs, as a Kafka 4 broker answers them.

The node keeps every partition in its one log directory (``log.dirs``), so
DescribeLogDirs lists one directory, and AlterReplicaLogDirs can only be asked to
move a replica where it already is (NONE, as Kafka answers a move to the current
directory); any other directory is LOG_DIR_NOT_FOUND. The volume's total and usable
bytes (v4) are answered -1, the protocol's "unknown": the broker core does no I/O
beyond its log files.
"""
from __future__ import annotations

from ... import acls
from ... import messages as m
from ...kafka_codec import KafkaRequest
from ..group_metadata import OFFSETS_TOPIC
from ..transaction_coordinator import TXN_TOPIC
from .common import ZERO_UUID, _as_uuid

OPERATIONS_NOT_ASKED = -(1 << 31)  # INT32_MIN: authorized operations not asked for
# Kafka's max.request.partition.size.limit: the most partitions one answer carries
PARTITION_LIMIT = 2000


def offline_replicas(image, reg) -> list[int]:
    """Replicas on brokers that are not registered or are fenced."""
    return [r for r in reg.replicas if r not in image.brokers or image.brokers[r].fenced]


class DescribeApis:
    """Mixed into :class:`~node_image.broker.kafka_apis.KafkaApis`."""

    def _describe_topic_partitions(self, src, req: KafkaRequest, now: int) -> None:
        """Kafka's DescribeTopicPartitionsRequestHandler: the topics asked (every topic if
        none), in name order from the cursor's topic and partition, at most
        ``response_partition_limit`` partitions (and 2000); where the limit cuts a topic
        or falls between two, ``next_cursor`` says where to go on. A cursor whose topic is
        not among those asked is INVALID_REQUEST for each topic asked."""
        R, b = self._cls(req), req.body
        T = R.DescribeTopicPartitionsResponseTopic
        P = T.DescribeTopicPartitionsResponsePartition
        image = self.rm.image
        asked = sorted({t.name for t in b.topics})
        cursor = b.cursor
        bad = None
        if cursor is not None and asked and cursor.topic_name not in asked:
            bad = f"the topic list must contain the cursor's topic {cursor.topic_name!r}"
        elif cursor is not None and cursor.partition_index < 0:
            bad = f"the cursor's partition must not be negative, got {cursor.partition_index}"
        if bad is not None:
            self._reply(src, req, R(throttle_time_ms=0, next_cursor=None, topics=[
                T(error_code=m.INVALID_REQUEST, name=name, topic_id=ZERO_UUID,
                  is_internal=False, partitions=[],
                  topic_authorized_operations=OPERATIONS_NOT_ASKED) for name in asked]))
            return
        names = asked or sorted(image.topics)
        if cursor is not None:
            names = [n for n in names if n >= cursor.topic_name]
        remaining = max(0, min(b.response_partition_limit, PARTITION_LIMIT))
        out, next_cursor = [], None
        for name in names:
            if remaining == 0:  # the limit fell between two topics
                next_cursor = R.Cursor(topic_name=name, partition_index=0)
                break
            t = image.topics.get(name)
            if t is None:
                if asked:  # (all topics: only those that exist)
                    out.append(T(error_code=m.UNKNOWN_TOPIC_OR_PARTITION, name=name,
                                 topic_id=ZERO_UUID, is_internal=False, partitions=[],
                                 topic_authorized_operations=OPERATIONS_NOT_ASKED))
                continue
            start = cursor.partition_index if cursor is not None and \
                name == cursor.topic_name else 0
            pids = [p for p in sorted(t.partitions) if p >= start]
            shown, rest = pids[:remaining], pids[remaining:]
            parts = []
            for pid in shown:
                reg = t.partitions[pid]
                parts.append(P(error_code=m.LEADER_NOT_AVAILABLE if reg.leader < 0 else m.NONE,
                               partition_index=pid, leader_id=reg.leader,
                               leader_epoch=reg.leader_epoch, replica_nodes=list(reg.replicas),
                               isr_nodes=list(reg.isr), eligible_leader_replicas=list(reg.elr),
                               last_known_elr=list(reg.last_known_elr),
                               offline_replicas=offline_replicas(image, reg)))
            out.append(T(error_code=m.NONE, name=name, topic_id=_as_uuid(t.topic_id),
                         is_internal=name in (OFFSETS_TOPIC, TXN_TOPIC), partitions=parts,
                         topic_authorized_operations=self._operations(
                             src, acls.TOPIC, name, True, as_bits=True)))  # (always asked)
            remaining -= len(shown)
            if rest:
                next_cursor = R.Cursor(topic_name=name, partition_index=rest[0])
                break
        self._reply(src, req, R(throttle_time_ms=0, topics=out, next_cursor=next_cursor))

    def _describe_log_dirs(self, src, req: KafkaRequest, now: int) -> None:
        """The replicas this broker holds (those asked, or all: topics null), each with the
        bytes its log takes and its lag (Kafka's: how far its log end is behind its high
        watermark, 0 on a leader)."""
        R, v = self._cls(req), req.api_version
        D = R.DescribeLogDirsResult
        T = D.DescribeLogDirsTopic
        wanted = None if req.body.topics is None else {
            (t.topic, p) for t in req.body.topics for p in t.partitions}
        by_topic: dict[str, list] = {}
        for (topic, pid), part in sorted(self.rm.partitions.items()):
            if wanted is not None and (topic, pid) not in wanted:
                continue
            by_topic.setdefault(topic, []).append(T.DescribeLogDirsPartition(
                partition_index=pid, partition_size=part.log.size_bytes,
                offset_lag=max(0, part.high_watermark - part.log.end_offset),
                is_future_key=False))
        space = {"total_bytes": -1, "usable_bytes": -1} if v >= 4 else {}
        result = D(error_code=m.NONE, log_dir=self.rm.log_dir, **space, topics=[
            T(name=t, partitions=ps) for t, ps in by_topic.items()])
        self._reply(src, req, R(throttle_time_ms=0, error_code=m.NONE, results=[result]))

    def _alter_replica_log_dirs(self, src, req: KafkaRequest, now: int) -> None:
        """A replica asked to move to the directory it is in is NONE; to any other,
        LOG_DIR_NOT_FOUND; one this broker does not hold is NOT_LEADER_OR_FOLLOWER where
        the partition exists, else UNKNOWN_TOPIC_OR_PARTITION (Kafka's ReplicaManager)."""
        R = self._cls(req)
        T = R.AlterReplicaLogDirTopicResult
        out = []
        for d in req.body.dirs:
            here = d.path.rstrip("/") == self.rm.log_dir.rstrip("/")
            for t in d.topics:
                parts = []
                for pid in t.partitions:
                    if not here:
                        error = m.LOG_DIR_NOT_FOUND
                    elif (t.name, pid) in self.rm.partitions:
                        error = m.NONE
                    elif self.rm.image.partition(t.name, pid) is not None:
                        error = m.NOT_LEADER_OR_FOLLOWER
                    else:
                        error = m.UNKNOWN_TOPIC_OR_PARTITION
                    parts.append(T.AlterReplicaLogDirPartitionResult(partition_index=pid,
                                                                     error_code=error))
                out.append(T(topic_name=t.name, partitions=parts))
        self._reply(src, req, R(throttle_time_ms=0, results=out))
