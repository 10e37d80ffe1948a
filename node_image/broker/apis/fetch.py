"""Fetch, ListOffsets and OffsetForLeaderEpoch: reads below the high watermark (or the last
stable offset for read_committed), parked fetches, topics by id (Fetch v13+), the current
leader's hint (Fetch v16+, KIP-951), timestamp searches, and where an epoch ends."""
from __future__ import annotations

from dataclasses import dataclass

from ... import acls
from ... import messages as m
from ...kafka_codec import KafkaRequest
from ...coverage import Reached
from .common import READ_COMMITTED, _zero_uuid, leader_hint, node_endpoints


@dataclass(slots=True)
class _DelayedFetch:
    src: object
    request: KafkaRequest
    deadline_ms: int
    keys: set


class FetchApis:
    """Mixed into :class:`~node_image.broker.kafka_apis.KafkaApis`."""

    def _fetch(self, src, req: KafkaRequest, now: int) -> None:
        body = req.body
        keys = {(name, p.partition) for t, name in self._fetch_topics(req) if name is not None
                for p in t.partitions}
        denied = frozenset(name for name, _ in keys
                           if not self._allowed(src, acls.READ, acls.TOPIC, name))
        response, size, errors = self._fetch_response(req, denied)
        if size >= max(body.min_bytes, 1) or errors or body.max_wait_ms <= 0 or not keys:
            self._fetch_reply(src, req, response, size, now)
            return
        self._delayed_fetch.append(_DelayedFetch(src, req, now + body.max_wait_ms, keys))

    def _fetch_topics(self, req: KafkaRequest) -> list:
        """(topic asked, its name) for each topic of a Fetch: from v13 the topics are named by
        id (KIP-516), and an id this broker's metadata does not hold has no name (None)."""
        if req.api_version < 13:
            return [(t, t.topic) for t in req.body.topics]
        names = self.rm.image.topic_names
        return [(t, None if _zero_uuid(t.topic_id) else names.get(str(t.topic_id)))
                for t in req.body.topics]

    def _fetch_response(self, req: KafkaRequest, denied: frozenset = frozenset()):
        """(response, bytes of records, whether a partition had an error); the topics in
        ``denied`` the client may not read (TOPIC_AUTHORIZATION_FAILED)."""
        body = req.body
        v = req.api_version
        R = self._cls(req)
        T = R.FetchableTopicResponse
        P = T.PartitionData
        budget = body.max_bytes if v >= 3 else 1 << 30
        if (quota := self._fetch_budget(req)) is not None:
            budget = min(budget, quota)
        total = 0
        errors = False
        topics = []
        endpoints: dict = {}
        for t, name in self._fetch_topics(req):
            parts = []
            for p in t.partitions:
                if name is None or name in denied:  # v13+: an id no topic of ours has
                    error, hw, lso, start, data, aborted, diverging = (
                        m.UNKNOWN_TOPIC_ID if name is None else m.TOPIC_AUTHORIZATION_FAILED,
                        -1, -1, -1, b"", None, None)
                else:
                    error, hw, lso, start, data, aborted, diverging = self._read(
                        name, p, v, min(p.partition_max_bytes, max(budget - total, 0)),
                        first=total == 0, committed=body.isolation_level == READ_COMMITTED)
                errors = errors or error != m.NONE or diverging is not None
                total += len(data)
                extra = {}
                if diverging is not None:
                    extra["diverging_epoch"] = P.EpochEndOffset(epoch=diverging[0],
                                                                end_offset=diverging[1])
                if v >= 16 and error in (m.NOT_LEADER_OR_FOLLOWER, m.FENCED_LEADER_EPOCH):
                    leader, epoch = leader_hint(self.rm.image, name, p.partition, endpoints)
                    extra["current_leader"] = P.LeaderIdAndEpoch(leader_id=leader,
                                                                 leader_epoch=epoch)
                parts.append(P(partition_index=p.partition, error_code=error, high_watermark=hw,
                               last_stable_offset=lso, log_start_offset=start,
                               aborted_transactions=None if aborted is None else [
                                   P.AbortedTransaction(producer_id=a.producer_id,
                                                        first_offset=a.first_offset)
                                   for a in aborted],
                               preferred_read_replica=-1, records=data, **extra))
            named = {"topic_id": t.topic_id} if v >= 13 else {"topic": t.topic}
            topics.append(T(partitions=parts, **named))
        extra = {"node_endpoints": node_endpoints(R, endpoints)} if endpoints else {}
        return (R(throttle_time_ms=0, error_code=m.NONE, session_id=0, responses=topics,
                  **extra), total, errors)

    def _read(self, topic: str, p, version: int, max_bytes: int, first: bool, committed: bool):
        """(error, HW, LSO, log start, records, aborted transactions or None, diverging epoch
        (epoch, end offset) or None)."""
        error, part = self._leader_at(topic, p.partition,
                                      p.current_leader_epoch if version >= 9 else -1)
        if part is None:
            return error, -1, -1, -1, b"", None, None
        hw, lso, start = part.high_watermark, part.last_stable_offset, part.log.start_offset
        last_epoch = p.last_fetched_epoch if version >= 12 else -1
        if last_epoch >= 0:
            # Fetch v12+ (KIP-320, as Kafka's Partition.fetchRecords): the epoch of the last
            # record the client fetched; where this log ends that epoch before the position,
            # the client's log diverged from ours, and it is told where ours ends the epoch
            found = part.log.end_offset_for_epoch(last_epoch) \
                if part.log.epoch_entries and last_epoch <= part.log.last_fetched_epoch else None
            if found is None or found.epoch < 0 or found.offset < 0 or p.fetch_offset < start:
                return m.OFFSET_OUT_OF_RANGE, hw, lso, start, b"", None, None
            if found.epoch < last_epoch or found.offset < p.fetch_offset:
                return m.NONE, hw, lso, start, b"", None, (found.epoch, found.offset)
        if p.fetch_offset < start or p.fetch_offset > part.log.end_offset:
            return m.OFFSET_OUT_OF_RANGE, hw, lso, start, b"", None, None
        upper = part.log.end_offset if "fetch-above-hw" in self.bugs else (
            lso if committed and "read-committed-past-lso" not in self.bugs else hw)
        if p.fetch_offset >= upper or (max_bytes <= 0 and not first):
            return m.NONE, hw, lso, start, b"", [] if committed else None, None
        data = part.log.read_range(p.fetch_offset, max(max_bytes, 1), upper)
        aborted = part.producers.aborted_between(p.fetch_offset, upper) if committed else None
        if aborted:
            self._aborted_fetched(part, aborted)
        if committed and "no-aborted-list" in self.bugs:
            aborted = []
        return m.NONE, hw, lso, start, data, aborted, None

    def _leader_at(self, topic: str, index: int, epoch: int):
        """(error, the partition or None) for a client request this broker must serve as the
        partition's leader; ``epoch``: the client's current leader epoch (-1: not checked),
        older than ours FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH (KIP-320)."""
        part = self.rm.leader_partition(topic, index)
        if part is None:
            known = self.rm.image.partition(topic, index) is not None
            return (m.NOT_LEADER_OR_FOLLOWER if known else m.UNKNOWN_TOPIC_OR_PARTITION), None
        if epoch >= 0 and epoch != part.leader_epoch:
            return (m.FENCED_LEADER_EPOCH if epoch < part.leader_epoch
                    else m.UNKNOWN_LEADER_EPOCH), None
        return m.NONE, part

    def _aborted_fetched(self, part, aborted) -> None:
        """Coverage: a read_committed fetch reached an aborted transaction's records, said once
        per partition and leader epoch (consumers fetch across the same ones many times)."""
        key = (part.topic, part.partition, part.leader_epoch)
        if key in self._aborted_seen:
            return
        self._aborted_seen.add(key)
        self._on_event(Reached("aborted-txn-fetched", (
            f"{part.topic}-{part.partition}: a read_committed fetch crossed {len(aborted)} "
            f"aborted transaction(s) in leader epoch {part.leader_epoch}, the first of "
            f"producer {aborted[0].producer_id} at offset {aborted[0].first_offset}")))

    def _list_offsets(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        T = R.ListOffsetsTopicResponse
        P = T.ListOffsetsPartitionResponse
        topics = []
        # a partition named twice is INVALID_REQUEST at each mention, as Kafka answers
        asked = [(t.name, p.partition_index) for t in req.body.topics for p in t.partitions]
        twice = {k for k in asked if asked.count(k) > 1}
        for t in req.body.topics:
            parts = []
            for p in t.partitions:
                refused = self._denied(src, acls.DESCRIBE, acls.TOPIC, t.name)
                if (t.name, p.partition_index) in twice or refused:
                    parts.append(P(partition_index=p.partition_index,
                                   error_code=refused or m.INVALID_REQUEST,
                                   timestamp=-1, offset=-1, leader_epoch=-1))
                    continue
                error, ts, offset, epoch = self._offset_for(
                    t.name, p, req.api_version,
                    req.body.isolation_level if req.api_version >= 2 else 0)
                parts.append(P(partition_index=p.partition_index, error_code=error, timestamp=ts,
                               offset=offset, leader_epoch=epoch))
            topics.append(T(name=t.name, partitions=parts))
        self._reply(src, req, R(throttle_time_ms=0, topics=topics))

    def _offset_for(self, topic: str, p, version: int, isolation: int = 0):
        error, part = self._leader_at(topic, p.partition_index,
                                      p.current_leader_epoch if version >= 4 else -1)
        if part is None:
            return error, -1, -1, -1
        if p.timestamp in (-2, -4):  # earliest; earliest local (no tiered storage here)
            return m.NONE, -1, part.log.start_offset, part.leader_epoch
        # A new leader whose high watermark has not yet reached the start of its epoch does
        # not know where the committed log ends: as Kafka's, it answers OFFSET_NOT_AVAILABLE
        # (retriable) to the latest offset, and to a timestamp found at or past its HW.
        # Answering its lagging HW once ended a final read short of a committed record.
        lagging = part.high_watermark < part.leader_epoch_start_offset
        if p.timestamp == -1:  # latest: the LSO for read_committed, else the HW
            if lagging:
                return m.OFFSET_NOT_AVAILABLE, -1, -1, -1
            committed = version >= 2 and isolation == READ_COMMITTED
            return (m.NONE, -1, part.last_stable_offset if committed else part.high_watermark,
                    part.leader_epoch)
        # Kafka reads the special timestamps the same in every version (the clients ask -3
        # from v7, -4 from v8, -5 from v9)
        if p.timestamp == -5:  # latest tiered: nothing is tiered
            return m.NONE, -1, -1, -1
        fetchable = part.last_stable_offset if (version >= 2 and isolation == READ_COMMITTED) \
            else part.high_watermark
        if p.timestamp == -3:  # the greatest timestamp (KIP-734)
            found = part.log.offset_of_max_timestamp()
        else:  # the first record stamped at or after the time asked
            found = part.log.offset_for_timestamp(p.timestamp, fetchable)
        if found is not None and found[1] < fetchable:
            return m.NONE, found[0], found[1], found[2]
        if lagging:
            return m.OFFSET_NOT_AVAILABLE, -1, -1, -1
        return m.NONE, -1, -1, part.leader_epoch

    def _offset_for_leader_epoch(self, src, req: KafkaRequest, now: int) -> None:
        """Where a leader epoch ends in the leader's log, as Kafka's leader epoch cache says
        it (KIP-320: after a leader change a consumer asks where the epoch of its position
        ends, and a position past that end was truncated away): the latest epoch ends at the
        log end offset; an older one at the start of the next epoch the log holds, answered
        with the largest epoch not above it; one newer than every epoch held, or a log that
        holds none: -1, -1."""
        R = self._cls(req)
        T = R.OffsetForLeaderTopicResult
        topics = []
        for t in req.body.topics:
            parts = []
            for p in t.partitions:
                error, part = self._leader_at(t.topic, p.partition, p.current_leader_epoch)
                epoch = end = -1
                if part is not None and part.log.epoch_entries \
                        and 0 <= p.leader_epoch <= part.log.last_fetched_epoch:
                    found = part.log.end_offset_for_epoch(p.leader_epoch)
                    end, epoch = found.offset, found.epoch
                parts.append(T.EpochEndOffset(error_code=error, partition=p.partition,
                                              leader_epoch=epoch, end_offset=end))
            topics.append(T(topic=t.topic, partitions=parts))
        self._reply(src, req, R(throttle_time_ms=0, topics=topics))
