"""KafkaApis: the broker's answers to Kafka clients, from decoded requests.

Theory of operation
-------------------
The runtime decodes a frame (``kafka_codec``) and hands the request here
with an opaque connection token; every request gets exactly one
:class:`~node_image.kafka_codec.KafkaResponse` in the outbox (its body is
None for Produce with acks=0, which Kafka never answers), so the runtime can
keep Kafka's rule of one request in flight per connection, answered in
order.

- Produce: only the partition leader appends; acks=all is refused with
  NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min.insync.replicas``,
  and is otherwise parked until the HW passes the last appended offset
  (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrinks below the minimum
  first, NOT_LEADER_OR_FOLLOWER if leadership moves, REQUEST_TIMED_OUT at the
  request's timeout). Idempotent batches are checked against the
  partition's producer state; a duplicate is answered with the offsets it
  got the first time and not appended again.
- Fetch: consumers read whole batches from the leader, below the HW only;
  an empty answer is parked up to ``max_wait_ms`` until ``min_bytes`` are
  available. Sessions (KIP-227) are not kept: every fetch is a full fetch
  (session id 0), which the protocol allows.
- Metadata lists unfenced brokers and every partition's leader, leader
  epoch, replicas, ISR and offline replicas. Topics are not created
  automatically; CreateTopics is forwarded to the active controller.
- InitProducerId hands out ids from blocks the controller allocates
  (AllocateProducerIds); with a transactional id it is the transaction
  coordinator's (:mod:`.transaction_coordinator`), as are AddPartitionsToTxn,
  AddOffsetsToTxn and EndTxn. Transactional batches are appended like
  others; a partition's open transactions bound its last stable offset, the
  limit of a read_committed Fetch, which also lists the aborted
  transactions in the range it returns. TxnOffsetCommit is the group
  coordinator's; the markers a transaction coordinator asks for
  (WriteTxnMarkers) are appended here as leader.
- FindCoordinator names the leader of the group's ``__consumer_offsets``
  partition (asking the controller to create the topic the first time);
  JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
  DescribeGroups and ListGroups are the group coordinator's
  (:mod:`.group_coordinator`), which keeps groups and offsets in that topic.
"""
from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

from .. import kafka_codec as kc
from .. import messages as m
from .. import compression, records
from ..kafka_codec import KafkaRequest, KafkaResponse
from ..coverage import Reached
from ..outbox import Outbox
from . import describe_configs
from .group_coordinator import GroupCoordinator, JoinResult
from .group_metadata import OFFSETS_TOPIC
from .transaction_coordinator import NAMES as TXN_STATE_NAMES
from .transaction_coordinator import TXN_TOPIC, TransactionCoordinator
from .replica_manager import ReplicaManager

ZERO_UUID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: no topic id given
METADATA_TOPIC = "__cluster_metadata"  # the quorum's log, as DescribeQuorum names it


def _as_uuid(text: str) -> uuid.UUID:
    """A directory or topic id as Kafka's Uuid; one not in that form is sent as zero."""
    try:
        return uuid.UUID(text) if text else ZERO_UUID
    except ValueError:
        return ZERO_UUID


def _by_name(resp) -> dict:
    """Topic name -> (error, message) of a controller's per-topic answer (None: no answer)."""
    return {} if resp is None else {n: (e, msg) for n, e, msg, *_ in resp.results}


def _missing(error: int) -> int:
    """The error of a resource the controller's answer leaves out: why there was no answer,
    or, where there was one, a timeout (as Kafka answers what it never decided)."""
    return error if error != m.NONE else m.REQUEST_TIMED_OUT


def _zero_uuid(value) -> bool:
    return value is None or str(value) in (str(ZERO_UUID), "AAAAAAAAAAAAAAAAAAAAAA")


NOT_AUTHORIZED_OPERATIONS = None  # encodes as INT32_MIN: operations not requested
PID_WAIT_MS = 1000  # how long an InitProducerId waits for a producer-id block
OFFSETS_TOPIC_RETRY_MS = 1000  # how often FindCoordinator asks for __consumer_offsets again


UNBOUNDED = (1 << 63) - 1  # Long.MAX_VALUE: no timestamp bound
READ_COMMITTED = 1  # Fetch and ListOffsets isolation level


@dataclass(slots=True)
class _ProduceResult:
    """One partition's answer to a Produce, until it is sent: a delayed produce (acks=all)
    turns a NONE into an error when the leader changes, the ISR shrinks or time runs out."""
    error: int
    base_offset: int = -1
    required_end: int = 0  # the high watermark that commits it (last offset + 1)
    leader_epoch: int = -1
    log_append_time_ms: int = -1  # the broker's wall clock, for a LogAppendTime topic


@dataclass(slots=True)
class _DelayedProduce:
    src: object
    request: KafkaRequest
    deadline_ms: int
    results: dict[tuple[str, int], _ProduceResult]
    pending: set = field(default_factory=set)


@dataclass(slots=True)
class _DelayedFetch:
    src: object
    request: KafkaRequest
    deadline_ms: int
    keys: set


class KafkaApis:
    def __init__(self, broker, replica_manager: ReplicaManager, cluster_id: str, options,
                 outbox: Outbox, on_event, bugs: frozenset[str] = frozenset(),
                 wall_clock: Callable[[], int] | None = None, rng=None) -> None:
        self.bugs = bugs
        # Kafka's Time.milliseconds(): the wall clock, which a clock fault moves
        self.wall_clock = wall_clock or (lambda: int(time.time() * 1000))
        self.broker = broker  # node_image.broker.broker.Broker
        self.rm = replica_manager
        self.cluster_id = cluster_id
        self.options = options
        self.outbox = outbox
        self._on_event = on_event
        self._aborted_seen: set[tuple[str, int, int]] = set()  # (topic, partition, leader epoch)
        self._delayed_produce: list[_DelayedProduce] = []
        # DeleteRecords waiting for the low watermark: (src, request, deadline, rows of
        # (topic, partition, offset asked for, error))
        self._delayed_deletes: list[tuple] = []
        self._delayed_fetch: list[_DelayedFetch] = []
        self._pending_pids: list[tuple[object, KafkaRequest, int]] = []
        # correlation id -> (deadline, reply(controller's response or None, error))
        self._pending_controller: dict[int, tuple[int, Callable]] = {}
        self.groups = GroupCoordinator(replica_manager, options, on_event, self.wall_clock,
                                       rng or random.Random(0))
        self.txns = TransactionCoordinator(
            replica_manager, options, on_event, self.wall_clock,
            lambda: self.broker.next_producer_id(),
            lambda leader, msg: self.broker.send_txn_markers(leader, msg),
            lambda: self.broker.next_correlation(), bugs)
        self._internal_asked_ms: dict[str, int] = {}
        self._internal_creates: set[int] = set()
        self._delayed_markers: list = []

    # ------------------------------------------------------------ dispatch

    def handle(self, src, req: KafkaRequest, now: int) -> None:
        handler = {
            kc.API_VERSIONS: self._api_versions, kc.METADATA: self._metadata,
            kc.PRODUCE: self._produce, kc.FETCH: self._fetch, kc.LIST_OFFSETS: self._list_offsets,
            kc.CREATE_TOPICS: self._create_topics, kc.INIT_PRODUCER_ID: self._init_producer_id,
            kc.FIND_COORDINATOR: self._find_coordinator, kc.OFFSET_COMMIT: self._offset_commit,
            kc.OFFSET_FETCH: self._offset_fetch, kc.JOIN_GROUP: self._join_group,
            kc.SYNC_GROUP: self._sync_group, kc.HEARTBEAT: self._heartbeat,
            kc.LEAVE_GROUP: self._leave_group, kc.DESCRIBE_GROUPS: self._describe_groups,
            kc.LIST_GROUPS: self._list_groups, kc.ADD_PARTITIONS_TO_TXN: self._add_partitions_to_txn,
            kc.ADD_OFFSETS_TO_TXN: self._add_offsets_to_txn, kc.END_TXN: self._end_txn,
            kc.TXN_OFFSET_COMMIT: self._txn_offset_commit,
            kc.DESCRIBE_CONFIGS: self._describe_configs, kc.DESCRIBE_CLUSTER: self._describe_cluster,
            kc.CREATE_PARTITIONS: self._create_partitions,
            kc.ALTER_CONFIGS: self._alter_configs,
            kc.DELETE_TOPICS: self._delete_topics,
            kc.DESCRIBE_QUORUM: self._describe_quorum,
            kc.INCREMENTAL_ALTER_CONFIGS: self._alter_configs,
            kc.DESCRIBE_PRODUCERS: self._describe_producers,
            kc.DESCRIBE_TRANSACTIONS: self._describe_transactions,
            kc.LIST_TRANSACTIONS: self._list_transactions,
            kc.DELETE_RECORDS: self._delete_records,
            kc.OFFSET_FOR_LEADER_EPOCH: self._offset_for_leader_epoch,
        }[req.api_key]
        handler(src, req, now)

    def _reply(self, src, req: KafkaRequest, body) -> None:
        self.outbox.send(src, KafkaResponse(req, body))

    def _cls(self, req: KafkaRequest):
        return kc.response_class(req.api_key, req.api_version)

    # ------------------------------------------------------------ ApiVersions, Metadata

    def _api_versions(self, src, req: KafkaRequest, now: int) -> None:
        self._reply(src, req, kc.api_versions_body(
            req.api_version, caps={kc.METADATA: self.options.metadata_max_version}))

    def _metadata(self, src, req: KafkaRequest, now: int) -> None:
        image = self.rm.image
        R = self._cls(req)
        brokers = []
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            ep = b.endpoint("PLAINTEXT")
            if ep is not None and not b.fenced:
                brokers.append(R.MetadataResponseBroker(node_id=b.broker_id, host=ep[0], port=ep[1],
                                                        rack=b.rack))
        wanted = req.body.topics
        if wanted is None or (req.api_version == 0 and not wanted):
            asked = [(name, None) for name in sorted(image.topics)]
        else:  # by name, or from v10 by topic id with no name
            asked = [(t.name, getattr(t, "topic_id", None)) for t in wanted]
        topics = []

        def unknown(error: int, name: str | None, topic_id) -> None:
            topics.append(R.MetadataResponseTopic(
                error_code=error, name=name, topic_id=topic_id, is_internal=False,
                partitions=[], authorized_operations=NOT_AUTHORIZED_OPERATIONS))
        for name, topic_id in asked:
            if name is None and not _zero_uuid(topic_id):
                name = image.topic_names.get(str(topic_id))
                if name is None:
                    unknown(m.UNKNOWN_TOPIC_ID, None, topic_id)
                    continue
            t = image.topics.get(name)
            if t is None:
                unknown(m.UNKNOWN_TOPIC_OR_PARTITION, name, ZERO_UUID)
                continue
            parts = []
            for pid in sorted(t.partitions):
                reg = t.partitions[pid]
                offline = [r for r in reg.replicas if r not in image.brokers or image.brokers[r].fenced]
                parts.append(R.MetadataResponseTopic.MetadataResponsePartition(
                    error_code=m.LEADER_NOT_AVAILABLE if reg.leader < 0 else m.NONE,
                    partition_index=pid, leader_id=reg.leader, leader_epoch=reg.leader_epoch,
                    replica_nodes=list(reg.replicas), isr_nodes=list(reg.isr),
                    offline_replicas=offline))
            topics.append(R.MetadataResponseTopic(error_code=m.NONE, name=name,
                                                  topic_id=_as_uuid(t.topic_id),
                                                  is_internal=name in (OFFSETS_TOPIC, TXN_TOPIC),
                                                  partitions=parts,
                                                  authorized_operations=NOT_AUTHORIZED_OPERATIONS))
        controller = self.broker.controller_hint()
        self._reply(src, req, R(throttle_time_ms=0, brokers=brokers, cluster_id=self.cluster_id,
                                controller_id=controller, topics=topics,
                                authorized_operations=NOT_AUTHORIZED_OPERATIONS, error_code=m.NONE))

    # ------------------------------------------------------------ Produce

    def _produce(self, src, req: KafkaRequest, now: int) -> None:
        body = req.body
        acks = body.acks
        results: dict = {}
        for td in body.topic_data:
            for pd in td.partition_data:
                key = (td.name, pd.index)
                if acks not in (0, 1, -1):
                    results[key] = _ProduceResult(m.INVALID_REQUIRED_ACKS)
                elif td.name in (OFFSETS_TOPIC, TXN_TOPIC):  # Kafka: clients may not append
                    results[key] = _ProduceResult(m.INVALID_TOPIC_EXCEPTION)
                else:
                    results[key] = self._append(td.name, pd.index, pd.records, acks,
                                                transactional=body.transactional_id is not None,
                                                version=req.api_version)
        if acks == 0:
            self._reply(src, req, None)
            return
        d = _DelayedProduce(src, req, now + max(body.timeout_ms, 0), results)
        if acks == -1 and "ack-before-replication" not in self.bugs:
            d.pending = {k for k, r in results.items() if r.error == m.NONE}
        if d.pending:
            self._delayed_produce.append(d)
            self._check_produce(d, now)
        if not d.pending:
            self._produce_reply(d)

    def _append(self, topic: str, partition: int, data, acks: int,
                transactional: bool = False, version: int = 8) -> _ProduceResult:
        part = self.rm.leader_partition(topic, partition)
        if part is None:
            known = self.rm.image.partition(topic, partition) is not None
            return _ProduceResult(m.NOT_LEADER_OR_FOLLOWER if known else m.UNKNOWN_TOPIC_OR_PARTITION)

        def refuse(error: int) -> _ProduceResult:
            return _ProduceResult(error, leader_epoch=part.leader_epoch)
        if acks == -1 and len(part.isr) < self.rm.min_isr(topic):
            return refuse(m.NOT_ENOUGH_REPLICAS)
        if not data:
            return refuse(m.CORRUPT_MESSAGE)
        data = bytes(data)
        batches = []
        pos = 0
        try:
            while pos < len(data):
                attributes = records.peek_attributes(data, pos)
                codec = None if attributes is None else attributes & records.COMPRESSION_MASK
                if codec is not None and (not compression.supported(codec) or (
                        codec == compression.ZSTD and version < 7)):
                    return refuse(m.UNSUPPORTED_COMPRESSION_TYPE)  # zstd: Produce v7+ (KIP-110)
                if attributes is not None and bool(
                        attributes & records.ATTR_TRANSACTIONAL) != transactional:
                    return refuse(m.INVALID_REQUEST)  # a transactional batch needs its id
                header = records.check_batch(data, pos)
                if header.is_control:
                    return refuse(m.INVALID_REQUEST)
                if header.size > self.options.message_max_bytes:
                    return refuse(m.MESSAGE_TOO_LARGE)
                batch = data[pos:pos + header.size]
                if header.codec:  # validated as Kafka does: every record read
                    recs = records.decode_records(batch)[1]
                    if [r.offset - header.base_offset for r in recs] != list(
                            range(header.records_count)):
                        raise records.CorruptBatchError(
                            "the records' offset deltas are not 0 to count - 1")
                batches.append((header, batch))
                pos += header.size
            target = self.rm.image.topic_config(topic).get("compression.type",
                                                           self.options.compression_type)
            if target != "producer":  # the broker recompresses to the codec the config names
                codec = compression.BY_NAME.get(target, compression.NONE)
                batches = [(h, b) if h.codec == codec else _recompressed(b, codec)
                           for h, b in batches]
        except records.CorruptBatchError as exc:
            self._on_event(f"produce to {topic}-{partition}: corrupt records: {exc}")
            return refuse(m.CORRUPT_MESSAGE)
        base = None
        required = 0
        append_time = -1
        config = self.rm.image.topic_config(topic)
        if config.get("message.timestamp.type") == "LogAppendTime":
            append_time = self.wall_clock()
            batches = [(h, records.set_log_append_time(b, append_time)) for h, b in batches]
        elif self._timestamp_out_of_range(topic, config, batches):
            return refuse(m.INVALID_TIMESTAMP)
        for header, batch in batches:
            error, dup = part.producers.check(header)
            if error != m.NONE:
                return refuse(error)
            if dup is not None:
                first, last = dup.first_offset, dup.last_offset
            else:
                appended = self.rm.append(part, batch)
                first, last = appended.base_offset, appended.last_offset
            base = first if base is None else base
            required = max(required, last + 1)
        return _ProduceResult(m.NONE, base, required, part.leader_epoch, append_time)

    def _timestamp_out_of_range(self, topic: str, config: dict, batches) -> bool:
        """Kafka's CreateTime bounds (KIP-937): a record stamped more than
        ``message.timestamp.before.max.ms`` before the leader's wall clock, or more than
        ``message.timestamp.after.max.ms`` after it, is refused with its whole batch."""
        before = int(config.get("message.timestamp.before.max.ms",
                                self.options.timestamp_before_max_ms))
        after = int(config.get("message.timestamp.after.max.ms",
                               self.options.timestamp_after_max_ms))
        if before >= UNBOUNDED and after >= UNBOUNDED:
            return False
        now = self.wall_clock()
        for header, batch in batches:
            for rec in records.decode_records(batch)[1]:
                if rec.timestamp < now - before or rec.timestamp > now + after:
                    self._on_event(f"produce to {topic}: timestamp {rec.timestamp} is out of "
                                   f"range [{now - before}, {now + after}] of this broker's "
                                   f"wall clock; refused (INVALID_TIMESTAMP)")
                    return True
        return False

    def _check_produce(self, d: _DelayedProduce, now: int) -> None:
        for key in list(d.pending):
            result = d.results[key]
            outcome = self.rm.append_outcome(key, result.leader_epoch, result.required_end, now,
                                             d.deadline_ms)
            if outcome is None:
                continue
            if outcome != m.NONE:
                result.error = outcome
            d.pending.discard(key)

    def _produce_reply(self, d: _DelayedProduce) -> None:
        R = self._cls(d.request)
        T = R.TopicProduceResponse
        P = T.PartitionProduceResponse
        by_topic: dict[str, list] = {}
        for (topic, partition), r in d.results.items():
            part = self.rm.partitions.get((topic, partition))
            by_topic.setdefault(topic, []).append(P(
                index=partition, error_code=r.error,
                base_offset=r.base_offset if r.error == m.NONE else -1,
                log_append_time_ms=r.log_append_time_ms if r.error == m.NONE else -1,
                log_start_offset=part.log.start_offset if part is not None else -1,
                record_errors=[], error_message=None))
        self._reply(d.src, d.request, R(
            responses=[T(name=t, partition_responses=ps) for t, ps in by_topic.items()],
            throttle_time_ms=0))

    # ------------------------------------------------------------ Fetch

    def _fetch(self, src, req: KafkaRequest, now: int) -> None:
        body = req.body
        keys = {(t.topic, p.partition) for t in body.topics for p in t.partitions}
        response, size, errors = self._fetch_response(req)
        if size >= max(body.min_bytes, 1) or errors or body.max_wait_ms <= 0 or not keys:
            self._reply(src, req, response)
            return
        self._delayed_fetch.append(_DelayedFetch(src, req, now + body.max_wait_ms, keys))

    def _fetch_response(self, req: KafkaRequest):
        body = req.body
        R = self._cls(req)
        T = R.FetchableTopicResponse
        P = T.PartitionData
        budget = body.max_bytes if req.api_version >= 3 else 1 << 30
        total = 0
        errors = False
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                error, hw, lso, start, data, aborted, diverging = self._read(
                    t.topic, p, req.api_version, min(p.partition_max_bytes, max(budget - total, 0)),
                    first=total == 0, committed=body.isolation_level == READ_COMMITTED)
                errors = errors or error != m.NONE or diverging is not None
                total += len(data)
                extra = {}
                if diverging is not None:
                    extra["diverging_epoch"] = P.EpochEndOffset(epoch=diverging[0],
                                                                end_offset=diverging[1])
                parts.append(P(partition_index=p.partition, error_code=error, high_watermark=hw,
                               last_stable_offset=lso, log_start_offset=start,
                               aborted_transactions=None if aborted is None else [
                                   P.AbortedTransaction(producer_id=a.producer_id,
                                                        first_offset=a.first_offset)
                                   for a in aborted],
                               preferred_read_replica=-1, records=data, **extra))
            topics.append(T(topic=t.topic, partitions=parts))
        return (R(throttle_time_ms=0, error_code=m.NONE, session_id=0, responses=topics),
                total, errors)

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

    # ------------------------------------------------------------ ListOffsets

    def _list_offsets(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        T = R.ListOffsetsTopicResponse
        P = T.ListOffsetsPartitionResponse
        topics = []
        for t in req.body.topics:
            parts = []
            for p in t.partitions:
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

    # ------------------------------------------------------------ CreateTopics

    def _create_topics(self, src, req: KafkaRequest, now: int) -> None:
        """CreateTopics through the controller; from v5 each created topic's partitions,
        replication factor and configs in the answer, from v7 its id (as Kafka's)."""
        body, v = req.body, req.api_version
        rows = []
        early = {}
        for t in body.topics:
            if t.assignments:
                early[t.name] = (m.INVALID_REQUEST, "manual replica assignments are not supported")
                continue
            configs = tuple((c.name, c.value) for c in (t.configs or ()))
            rows.append((t.name, t.num_partitions, t.replication_factor, configs))
        R = self._cls(req)
        C = R.CreatableTopicResult

        def result(t, row) -> object:
            name, code, message, topic_id, partitions, rf = row
            extra = {}
            if v >= 5:
                settings = describe_configs.settings_of_topic(
                    {c.name: c.value for c in (t.configs or ())}, self.options) \
                    if code == m.NONE else None
                extra = {"num_partitions": partitions, "replication_factor": rf,
                         "configs": None if settings is None else [
                             C.CreatableTopicConfigs(name=k, value=value, read_only=False,
                                                     config_source=source, is_sensitive=False)
                             for k, (value, source) in settings.items()]}
            if v >= 7:
                extra["topic_id"] = _as_uuid(topic_id or "") if code == m.NONE else ZERO_UUID
            return C(name=name, error_code=code, error_message=message, **extra)

        def reply(resp, error):
            rows_by_name = {} if resp is None else {r[0]: r for r in resp.results}
            out = []
            for t in body.topics:
                if t.name in early:
                    row = (t.name, *early[t.name], None, -1, -1)
                else:
                    row = rows_by_name.get(t.name, (t.name, _missing(error), None, None, -1, -1))
                out.append(result(t, row))
            self._reply(src, req, R(throttle_time_ms=0, topics=out))
        if not rows:
            reply(None, m.NONE)
            return
        self._via_controller(
            now, max(body.timeout_ms, 1000), reply,
            lambda c: m.CreateTopicsRequest(c, tuple(rows), bool(body.validate_only)))

    def _via_controller(self, now: int, timeout_ms: int, reply, build) -> None:
        """Send ``build(correlation id)`` to the controller; ``reply(response, error)``
        answers the client once: with the controller's response (error NONE), or with None
        and NOT_CONTROLLER where no controller is known, REQUEST_TIMED_OUT where it did not
        answer within ``timeout_ms``."""
        corr = self.broker.send_to_controller(build)
        if corr is None:
            reply(None, m.NOT_CONTROLLER)
            return
        self._pending_controller[corr] = (now + timeout_ms, reply)

    def _describe_quorum(self, src, req: KafkaRequest, now: int) -> None:
        """DescribeQuorum of ``__cluster_metadata-0``, answered by the quorum leader."""
        def reply(resp, error):
            if resp is not None:
                error = resp.error
            elif error == m.NOT_CONTROLLER:
                error = m.NOT_LEADER_OR_FOLLOWER  # no quorum leader known
            self._quorum_reply(src, req, resp, error)
        self._via_controller(now, self.options.request_timeout_ms, reply,
                             lambda c: m.QuorumStateRequest(c))

    def _quorum_reply(self, src, req: KafkaRequest, resp: m.QuorumStateResponse | None,
                      error: int) -> None:
        R = self._cls(req)
        T = R.TopicData
        P = T.PartitionData
        v = req.api_version

        def replicas(rows):
            out = []
            for rid, directory, offset, fetched, caught_up in rows:
                kw = {}
                if v >= 1:
                    kw.update(last_fetch_timestamp=fetched, last_caught_up_timestamp=caught_up)
                if v >= 2:
                    kw["replica_directory_id"] = _as_uuid(directory)
                out.append(P.ReplicaState(replica_id=rid, log_end_offset=offset, **kw))
            return out
        msg = {"error_message": None} if v >= 2 else {}
        topics = []
        for t in req.body.topics:
            parts = []
            for p in t.partitions:
                if (t.topic_name, p.partition_index) != (METADATA_TOPIC, 0):
                    parts.append(P(partition_index=p.partition_index,
                                   error_code=m.UNKNOWN_TOPIC_OR_PARTITION, leader_id=-1,
                                   leader_epoch=-1, high_watermark=-1, current_voters=[],
                                   observers=[], **msg))
                elif resp is None or resp.error != m.NONE:
                    parts.append(P(partition_index=0, error_code=error if resp is None
                                   else resp.error, leader_id=-1 if resp is None
                                   else resp.leader_id, leader_epoch=-1, high_watermark=-1,
                                   current_voters=[], observers=[], **msg))
                else:
                    parts.append(P(partition_index=0, error_code=m.NONE,
                                   leader_id=resp.leader_id, leader_epoch=resp.leader_epoch,
                                   high_watermark=resp.high_watermark,
                                   current_voters=replicas(resp.voters),
                                   observers=replicas(resp.observers), **msg))
            topics.append(T(topic_name=t.topic_name, partitions=parts))
        extra = {}
        if v >= 2:
            nodes = [] if resp is None else resp.nodes
            extra["nodes"] = [R.Node(node_id=i, listeners=[R.Node.Listener(
                name="CONTROLLER", host=host, port=port)]) for i, host, port in nodes]
        self._reply(src, req, R(error_code=m.NONE, topics=topics, **msg, **extra))

    @staticmethod
    def _delete_rows(req: KafkaRequest) -> list[tuple[str, str]]:
        """(name, topic id) per topic a DeleteTopics request names, either "" if not given."""
        if req.api_version >= 6:
            return [(t.name or "", "" if _zero_uuid(t.topic_id) else str(t.topic_id))
                    for t in req.body.topics]
        return [(name, "") for name in req.body.topic_names]

    def _delete_topics(self, src, req: KafkaRequest, now: int) -> None:
        """DeleteTopics by name (v1-v5) or by name or topic id (v6), decided by the
        controller; every broker then removes the partitions' data it holds."""
        rows = tuple(self._delete_rows(req))
        R, v = self._cls(req), req.api_version

        def reply(resp, error):
            # by what the request named (name or id), with the name and id found
            results = {} if resp is None else {
                row: (e, msg, found, found_id)
                for row, (found, found_id, e, msg) in zip(rows, resp.results)}
            out = []
            for row in rows:
                code, message, name, tid = results.get(row, (_missing(error), None) + row)
                extra = {"topic_id": _as_uuid(tid)} if v >= 6 else {}
                if v >= 5:
                    extra["error_message"] = message
                out.append(R.DeletableTopicResult(name=name or None if v >= 6 else name,
                                                  error_code=code, **extra))
            self._reply(src, req, R(throttle_time_ms=0, responses=out))
        self._via_controller(now, max(req.body.timeout_ms, 1000), reply,
                             lambda c: m.DeleteTopicsRequest(c, rows))

    def _alter_configs(self, src, req: KafkaRequest, now: int) -> None:
        """AlterConfigs and IncrementalAlterConfigs, decided by the controller."""
        body = req.body
        incremental = req.api_key == kc.INCREMENTAL_ALTER_CONFIGS
        rows = tuple((r.resource_type, r.resource_name, tuple(
            (c.name, c.config_operation if incremental else 0, c.value) for c in r.configs))
            for r in body.resources)
        R = self._cls(req)

        def reply(resp, error):
            results = {} if resp is None else {(t, n): (e, msg) for t, n, e, msg in resp.results}
            out = []
            for r in body.resources:
                code, message = results.get((r.resource_type, r.resource_name),
                                            (_missing(error), None))
                out.append(R.AlterConfigsResourceResponse(
                    error_code=code, error_message=message, resource_type=r.resource_type,
                    resource_name=r.resource_name))
            self._reply(src, req, R(throttle_time_ms=0, responses=out))
        self._via_controller(
            now, self.options.request_timeout_ms, reply,
            lambda c: m.AlterConfigsRequest(c, rows, incremental, bool(body.validate_only)))

    def handle_controller_response(self, resp) -> None:
        if resp.correlation_id in self._internal_creates:
            self._internal_creates.discard(resp.correlation_id)
            for name, error, message, *_ in resp.results:
                if error not in (m.NONE, m.TOPIC_ALREADY_EXISTS):
                    self._on_event(f"creating {name} failed: {m.ERROR_NAMES.get(error, error)}: "
                                   f"{message}")
            return
        entry = self._pending_controller.pop(resp.correlation_id, None)
        if entry is not None:
            entry[1](resp, m.NONE)

    def _create_partitions(self, src, req: KafkaRequest, now: int) -> None:
        body = req.body
        rows = []
        for t in body.topics:
            assignments = tuple(tuple(a.broker_ids) for a in (t.assignments or ()))
            rows.append((t.name, t.count, assignments))
        R = self._cls(req)

        def reply(resp, error):
            results = _by_name(resp)
            out = []
            for t in body.topics:
                code, message = results.get(t.name, (_missing(error), None))
                out.append(R.CreatePartitionsTopicResult(name=t.name, error_code=code,
                                                         error_message=message))
            self._reply(src, req, R(throttle_time_ms=0, results=out))
        self._via_controller(
            now, max(body.timeout_ms, 1000), reply,
            lambda c: m.CreatePartitionsRequest(c, tuple(rows), bool(body.validate_only)))

    # ------------------------------------------------------------ DeleteRecords

    def _delete_records(self, src, req: KafkaRequest, now: int) -> None:
        """Each partition's log start moves up to the offset asked for (-1: the high
        watermark; past it: OFFSET_OUT_OF_RANGE); the answer waits, as Kafka's purgatory
        does, until every live replica's log start got there (the low watermark), else
        REQUEST_TIMED_OUT when the request's timeout passes."""
        rows = []
        for t in req.body.topics:
            for p in t.partitions:
                if t.name in (OFFSETS_TOPIC, TXN_TOPIC):  # Kafka: not an internal topic's
                    error, offset = m.INVALID_TOPIC_EXCEPTION, -1
                else:
                    error, offset = self.rm.delete_records(t.name, p.partition_index, p.offset)
                rows.append((t.name, p.partition_index, offset, error))
        self._delayed_deletes.append((src, req, now + max(req.body.timeout_ms, 0), rows))
        self._check_deletes(now)

    def _check_deletes(self, now: int) -> None:
        keep = []
        for src, req, deadline, rows in self._delayed_deletes:
            answers = []
            for topic, index, offset, error in rows:
                low = -1
                if error == m.NONE:
                    low = self.rm.low_watermark(topic, index)
                    if low is None:
                        error, low = m.NOT_LEADER_OR_FOLLOWER, -1
                    elif low < offset:
                        error = None  # not yet
                answers.append((topic, index, low, error))
            if any(e is None for *_, e in answers) and now < deadline:
                keep.append((src, req, deadline, rows))
                continue
            R = self._cls(req)
            T = R.DeleteRecordsTopicResult
            by_topic: dict[str, list] = {}
            for topic, index, low, error in answers:
                by_topic.setdefault(topic, []).append(T.DeleteRecordsPartitionResult(
                    partition_index=index, low_watermark=low if error is not None else -1,
                    error_code=m.REQUEST_TIMED_OUT if error is None else error))
            self._reply(src, req, R(throttle_time_ms=0, topics=[
                T(name=topic, partitions=parts) for topic, parts in by_topic.items()]))
        self._delayed_deletes = keep

    # ------------------------------------------------------------ OffsetForLeaderEpoch

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

    # ------------------------------------------------------------ InitProducerId

    def _init_producer_id(self, src, req: KafkaRequest, now: int) -> None:
        if req.body.transactional_id is not None:
            expected = None
            if req.api_version >= 3 and req.body.producer_id >= 0:  # KIP-360: a bump
                expected = (req.body.producer_id, req.body.producer_epoch)

            def respond(error: int, pid: int, epoch: int) -> None:
                if error == m.PRODUCER_FENCED and req.api_version < 4:
                    error = m.INVALID_PRODUCER_EPOCH  # as Kafka answers the older versions
                self._reply(src, req, self._cls(req)(
                    throttle_time_ms=0, error_code=error, producer_id=pid, producer_epoch=epoch))
            self.txns.init_producer_id(req.body.transactional_id,
                                       req.body.transaction_timeout_ms, now, respond, expected)
            return
        # As Kafka's non-blocking ProducerIdManager: without a block of ids soon (a broker just
        # restarted, a controller election), answer a retriable error rather than outwait the
        # client's request timeout, which producers treat as fatal for InitProducerId.
        self._pending_pids.append((src, req, now + min(PID_WAIT_MS, self.options.request_timeout_ms)))
        self._serve_pids(now)

    def _serve_pids(self, now: int) -> None:
        keep = []
        for src, req, deadline in self._pending_pids:
            pid = self.broker.next_producer_id()
            if pid is not None:
                self._reply(src, req, self._cls(req)(throttle_time_ms=0, error_code=m.NONE,
                                                     producer_id=pid, producer_epoch=0))
            elif now >= deadline:
                self._reply(src, req, self._cls(req)(throttle_time_ms=0,
                                                     error_code=m.COORDINATOR_LOAD_IN_PROGRESS,
                                                     producer_id=-1, producer_epoch=-1))
            else:
                keep.append((src, req, deadline))
        self._pending_pids = keep

    # ------------------------------------------------------------ FindCoordinator

    def _find_coordinator(self, src, req: KafkaRequest, now: int) -> None:
        """One key before v4, a batch of keys (KIP-699) from v4; each answered alike."""
        R, v = self._cls(req), req.api_version
        key_type = req.body.key_type if v >= 1 else 0
        if v < 4:
            error, message, node, host, port = self._coordinator(key_type, req.body.key, now)
            self._reply(src, req, R(throttle_time_ms=0, error_code=error, error_message=message,
                                    node_id=node, host=host, port=port))
            return
        C = R.Coordinator
        out = []
        for key in req.body.coordinator_keys:
            error, message, node, host, port = self._coordinator(key_type, key, now)
            out.append(C(key=key, node_id=node, host=host, port=port, error_code=error,
                         error_message=message))
        self._reply(src, req, R(throttle_time_ms=0, coordinators=out))

    def _coordinator(self, key_type: int, key: str,
                     now: int) -> tuple[int, str | None, int, str, int]:
        """(error, message, node id, host, port) of the coordinator of a group (key type 0) or
        a transactional id (1)."""
        if key_type not in (0, 1):
            return m.INVALID_REQUEST, f"unknown key type {key_type}", -1, "", -1
        if not key:
            return m.INVALID_REQUEST, "the key (group or transactional id) is empty", -1, "", -1
        txn = key_type == 1
        topic = TXN_TOPIC if txn else OFFSETS_TOPIC
        pid = (self.txns if txn else self.groups).partition_of(key)
        reg = self.rm.image.partition(topic, pid)
        if reg is None:
            self._create_internal_topic(topic, now)
            return m.COORDINATOR_NOT_AVAILABLE, f"{topic} is being created", -1, "", -1
        b = self.rm.image.brokers.get(reg.leader)
        ep = b.endpoint("PLAINTEXT") if b is not None and not b.fenced else None
        if ep is None:
            return m.COORDINATOR_NOT_AVAILABLE, f"{topic}-{pid} has no leader", -1, "", -1
        return m.NONE, None, reg.leader, ep[0], ep[1]

    def _create_internal_topic(self, topic: str, now: int) -> None:
        """Ask the controller for ``__consumer_offsets`` or ``__transaction_state`` (at most once
        a second each)."""
        if now < self._internal_asked_ms.get(topic, -OFFSETS_TOPIC_RETRY_MS) + OFFSETS_TOPIC_RETRY_MS:
            return
        self._internal_asked_ms[topic] = now
        o = self.options
        if topic == OFFSETS_TOPIC:
            row = (topic, o.offsets_topic_partitions, o.offsets_topic_replication_factor, ())
        else:
            row = (topic, o.transaction_topic_partitions, o.transaction_topic_replication_factor,
                   (("min.insync.replicas", str(o.transaction_topic_min_isr)),))
        corr = self.broker.send_to_controller(lambda c: m.CreateTopicsRequest(c, (row,), False))
        if corr is not None:
            self._internal_creates.add(corr)

    # ------------------------------------------------------------ transactions

    def _add_partitions_to_txn(self, src, req: KafkaRequest, now: int) -> None:
        b, R = req.body, self._cls(req)
        T = R.AddPartitionsToTxnTopicResult
        P = T.AddPartitionsToTxnPartitionResult
        wanted = [(t.name, p) for t in b.v3_and_below_topics for p in t.partitions]

        def respond(errors: dict) -> None:
            by_topic: dict[str, list] = {}
            for (topic, p), error in errors.items():
                by_topic.setdefault(topic, []).append(P(partition_index=p,
                                                        partition_error_code=error))
            self._reply(src, req, R(throttle_time_ms=0, results_by_topic_v3_and_below=[
                T(name=t, results_by_partition=ps) for t, ps in by_topic.items()]))
        self.txns.add_partitions(b.v3_and_below_transactional_id, b.v3_and_below_producer_id,
                                 b.v3_and_below_producer_epoch, wanted, now, respond)

    def _add_offsets_to_txn(self, src, req: KafkaRequest, now: int) -> None:
        b, R = req.body, self._cls(req)
        key = (OFFSETS_TOPIC, self.groups.partition_of(b.group_id))
        self.txns.add_partitions(b.transactional_id, b.producer_id, b.producer_epoch, [key], now,
                                 lambda errors: self._reply(src, req, R(
                                     throttle_time_ms=0, error_code=errors[key])))

    def _end_txn(self, src, req: KafkaRequest, now: int) -> None:
        b, R = req.body, self._cls(req)
        self.txns.end_txn(b.transactional_id, b.producer_id, b.producer_epoch, b.committed, now,
                          lambda error: self._reply(src, req, R(throttle_time_ms=0,
                                                                error_code=error)))

    def _txn_offset_commit(self, src, req: KafkaRequest, now: int) -> None:
        R, b = self._cls(req), req.body
        T = R.TxnOffsetCommitResponseTopic
        v3 = req.api_version >= 3  # KIP-447: the member and generation, checked as OffsetCommit's
        self._commit_offsets(src, req, now, 2, T, T.TxnOffsetCommitResponsePartition,
                             b.member_id if v3 else "", b.generation_id if v3 else -1,
                             (b.producer_id, b.producer_epoch),
                             b.group_instance_id if v3 else None)

    def write_txn_markers(self, req: m.WriteTxnMarkersRequest, now: int, reply) -> None:
        """A transaction coordinator's markers: appended here as leader, answered (``reply``
        with a WriteTxnMarkersResponse) once replicated."""
        results = {}
        pending = {}
        for topic, p in req.partitions:
            part = self.rm.leader_partition(topic, p)
            if part is None:
                known = self.rm.image.partition(topic, p) is not None
                results[(topic, p)] = (m.NOT_LEADER_OR_FOLLOWER if known
                                       else m.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            error = part.producers.check_marker(req.producer_id, req.producer_epoch,
                                                req.coordinator_epoch)
            if error != m.NONE:
                results[(topic, p)] = error
                self._on_event(f"{topic}-{p}: marker of producer {req.producer_id} epoch "
                               f"{req.producer_epoch} from coordinator epoch "
                               f"{req.coordinator_epoch} refused: {m.ERROR_NAMES[error]}")
                continue
            header = self.rm.append(part, records.end_txn_marker(
                req.producer_id, req.producer_epoch, req.commit, req.coordinator_epoch,
                self.wall_clock()))
            pending[(topic, p)] = (part.leader_epoch, header.last_offset + 1)
        self._delayed_markers.append((req, reply, now + self.options.request_timeout_ms,
                                      results, pending))
        self._check_markers(now)

    def _check_markers(self, now: int) -> None:
        keep = []
        for entry in self._delayed_markers:
            req, reply, deadline, results, pending = entry
            for key, (epoch, end) in list(pending.items()):
                outcome = self.rm.append_outcome(key, epoch, end, now, deadline)
                if outcome is None:
                    continue
                del pending[key]
                results[key] = outcome
                if outcome == m.NONE and key[0] == OFFSETS_TOPIC:
                    self.groups.complete_txn(key[1], req.producer_id, req.commit)
            if pending:
                keep.append(entry)
            else:
                reply(m.WriteTxnMarkersResponse(req.correlation_id, tuple(
                    (t, p, e) for (t, p), e in sorted(results.items()))))
        self._delayed_markers = keep

    # ------------------------------------------------------------ groups

    def _join_group(self, src, req: KafkaRequest, now: int) -> None:
        b, v, R = req.body, req.api_version, self._cls(req)

        def respond(r) -> None:
            members = [R.JoinGroupResponseMember(member_id=mid, group_instance_id=None,
                                                 metadata=meta) for mid, meta in r.members]
            extra = {}
            if v >= 7:  # the group's protocol type, from v7 (KIP-559)
                g = self.groups.describe(b.group_id)[1] if r.error == m.NONE else None
                extra["protocol_type"] = g.protocol_type if g is not None else None
            if v >= 9:  # KIP-814: only a static leader rejoining may skip the assignment
                extra["skip_assignment"] = False
            self._reply(src, req, R(throttle_time_ms=0, error_code=r.error,
                                    generation_id=r.generation, protocol_name=r.protocol or "",
                                    leader=r.leader, member_id=r.member_id, members=members,
                                    **extra))
        if v >= 8 and b.reason:
            self._on_event(f"JoinGroup of {b.group_id!r} by {b.member_id or 'a new member'}: "
                           f"{b.reason}")
        if v >= 5 and b.group_instance_id is not None:
            self._on_event(f"JoinGroup of {b.group_id!r}: static membership (group.instance.id "
                           f"{b.group_instance_id!r}) is not supported; refused (INVALID_REQUEST)")
            respond(JoinResult(m.INVALID_REQUEST, b.member_id))
            return
        peer = getattr(src, "peer", None)
        host = f"/{peer[0]}" if isinstance(peer, tuple) and peer else ""
        self.groups.join(b.group_id, b.member_id, req.client_id or "", host, b.session_timeout_ms,
                         b.rebalance_timeout_ms if v >= 1 else b.session_timeout_ms,
                         b.protocol_type, tuple((p.name, bytes(p.metadata)) for p in b.protocols),
                         v >= 4, now, respond)

    def _sync_group(self, src, req: KafkaRequest, now: int) -> None:
        b, R, v = req.body, self._cls(req), req.api_version

        def respond(error: int, assignment: bytes) -> None:
            extra = {}
            if v >= 5:  # the group's protocol type and name, from v5 (KIP-559)
                g = self.groups.describe(b.group_id)[1] if error == m.NONE else None
                extra = {"protocol_type": g.protocol_type if g is not None else None,
                         "protocol_name": g.protocol if g is not None else None}
            self._reply(src, req, R(throttle_time_ms=0, error_code=error, assignment=assignment,
                                    **extra))
        self.groups.sync(b.group_id, b.generation_id, b.member_id,
                         {a.member_id: bytes(a.assignment) for a in b.assignments}, now, respond,
                         b.protocol_type if v >= 5 else None, b.protocol_name if v >= 5 else None)

    def _heartbeat(self, src, req: KafkaRequest, now: int) -> None:
        b = req.body
        error = self.groups.heartbeat(b.group_id, b.generation_id, b.member_id, now)
        self._reply(src, req, self._cls(req)(throttle_time_ms=0, error_code=error))

    def _leave_group(self, src, req: KafkaRequest, now: int) -> None:
        b, R = req.body, self._cls(req)
        if req.api_version < 3:
            error = self.groups.leave(b.group_id, b.member_id, now)
            self._reply(src, req, R(throttle_time_ms=0, error_code=error, members=[]))
            return
        if req.api_version >= 5 and b.members and b.members[0].reason:
            self._on_event(f"LeaveGroup of {b.group_id!r}: {b.members[0].reason}")
        out = [R.MemberResponse(member_id=x.member_id, group_instance_id=x.group_instance_id,
                                error_code=self.groups.leave(b.group_id, x.member_id, now))
               for x in b.members]
        self._reply(src, req, R(throttle_time_ms=0, error_code=m.NONE, members=out))

    def _describe_groups(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        D = R.DescribedGroup
        out = []
        for group_id in req.body.groups:
            error, g = self.groups.describe(group_id)
            if g is None:
                out.append(D(error_code=error, group_id=group_id,
                             group_state="Dead" if error == m.NONE else "",
                             protocol_type="", protocol_data="", members=[],
                             authorized_operations=NOT_AUTHORIZED_OPERATIONS))
                continue
            stable = g.state == "Stable"  # Kafka's summary: metadata only when stable
            members = [D.DescribedGroupMember(
                member_id=mb.member_id, group_instance_id=None, client_id=mb.client_id,
                client_host=mb.client_host,
                member_metadata=mb.metadata(g.protocol) if stable else b"",
                member_assignment=mb.assignment if stable else b"")
                for mb in g.members.values()]
            out.append(D(error_code=m.NONE, group_id=group_id, group_state=g.state,
                         protocol_type=g.protocol_type or "",
                         protocol_data=(g.protocol or "") if stable else "", members=members,
                         authorized_operations=NOT_AUTHORIZED_OPERATIONS))
        self._reply(src, req, R(throttle_time_ms=0, groups=out))

    def _list_groups(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        v = req.api_version
        # v4: a filter on states (Kafka's names, case-insensitive); v5: on types (every
        # group here is a classic one)
        states = {s.lower() for s in req.body.states_filter or ()} if v >= 4 else set()
        types = {t.lower() for t in req.body.types_filter or ()} if v >= 5 else set()
        if types and "classic" not in types:
            groups = []
        else:
            groups = [g for g in self.groups.list_groups()
                      if not states or g.state.lower() in states]
        extra = (lambda g: {"group_state": g.state, "group_type": "classic"}) if v >= 5 else (
            (lambda g: {"group_state": g.state}) if v >= 4 else (lambda g: {}))
        self._reply(src, req, R(throttle_time_ms=0, error_code=m.NONE, groups=[
            R.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type or "", **extra(g))
            for g in groups]))

    def _describe_producers(self, src, req: KafkaRequest, now: int) -> None:
        """The active producers of partitions this broker leads (Kafka's producer state:
        epoch, last sequence and timestamp, coordinator epoch, open transaction's start)."""
        R = self._cls(req)
        T = R.TopicResponse
        P = T.PartitionResponse
        topics = []
        for t in req.body.topics:
            parts = []
            for index in t.partition_indexes:
                part = self.rm.partitions.get((t.name, index))
                if self.rm.image.partition(t.name, index) is None:
                    parts.append(P(partition_index=index, error_code=m.UNKNOWN_TOPIC_OR_PARTITION,
                                   error_message=None, active_producers=[]))
                    continue
                if part is None or not part.is_leader:
                    parts.append(P(partition_index=index, error_code=m.NOT_LEADER_OR_FOLLOWER,
                                   error_message=None, active_producers=[]))
                    continue
                ps = part.producers
                active = [P.ProducerState(
                    producer_id=pid, producer_epoch=e.epoch, last_sequence=e.last_seq,
                    last_timestamp=e.last_timestamp,
                    coordinator_epoch=ps.coordinator_epochs.get(pid, -1),
                    current_txn_start_offset=ps.ongoing.get(pid, -1))
                    for pid, e in sorted(ps.producers.items())]
                parts.append(P(partition_index=index, error_code=m.NONE, error_message=None,
                               active_producers=active))
            topics.append(T(name=t.name, partitions=parts))
        self._reply(src, req, R(throttle_time_ms=0, topics=topics))

    def _describe_transactions(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        S = R.TransactionState
        out = []
        for txn_id in req.body.transactional_ids:
            error, t = self.txns.describe(txn_id)
            if t is None:
                out.append(S(error_code=error, transactional_id=txn_id, transaction_state="",
                             transaction_timeout_ms=0, transaction_start_time_ms=-1,
                             producer_id=-1, producer_epoch=-1, topics=[]))
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, p in sorted(t.partitions):
                by_topic.setdefault(topic, []).append(p)
            out.append(S(error_code=m.NONE, transactional_id=txn_id,
                         transaction_state=TXN_STATE_NAMES[t.state],
                         transaction_timeout_ms=t.timeout_ms, transaction_start_time_ms=t.start_ms,
                         producer_id=t.producer_id, producer_epoch=t.producer_epoch,
                         topics=[S.TopicData(topic=k, partitions=v)
                                 for k, v in by_topic.items()]))
        self._reply(src, req, R(throttle_time_ms=0, transaction_states=out))

    def _list_transactions(self, src, req: KafkaRequest, now: int) -> None:
        import re
        R = self._cls(req)
        b = req.body
        asked = set(b.state_filters or ())
        known = asked & set(TXN_STATE_NAMES)
        duration = b.duration_filter if req.api_version >= 1 else -1
        pattern = None
        if req.api_version >= 2 and b.transactional_id_pattern:
            try:
                pattern = re.compile(b.transactional_id_pattern)
            except re.error as exc:
                self._reply(src, req, R(throttle_time_ms=0, error_code=m.INVALID_REGULAR_EXPRESSION,
                                        unknown_state_filters=[], transaction_states=[]))
                self._on_event(f"ListTransactions: bad pattern "
                               f"{b.transactional_id_pattern!r}: {exc}")
                return
        if asked and not known:
            listed = []  # only states Kafka does not have: nothing matches
        else:
            listed = self.txns.listed(known, set(b.producer_id_filters or ()), duration, pattern)
        self._reply(src, req, R(
            throttle_time_ms=0, error_code=m.NONE, unknown_state_filters=sorted(asked - known),
            transaction_states=[R.TransactionState(transactional_id=t.txn_id,
                                                   producer_id=t.producer_id,
                                                   transaction_state=TXN_STATE_NAMES[t.state])
                                for t in listed]))

    def _describe_configs(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        self._reply(src, req, R(throttle_time_ms=0, results=describe_configs.describe(
            self.rm.image, self.broker.node_id, self.options, req.body.resources,
            req.api_version, R)))

    def _describe_cluster(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        v = req.api_version
        if v >= 1 and req.body.endpoint_type != 1:  # 1: brokers; 2: controllers (KIP-919)
            self._reply(src, req, R(
                throttle_time_ms=0, error_code=(m.MISMATCHED_ENDPOINT_TYPE
                                                if req.body.endpoint_type == 2
                                                else m.UNSUPPORTED_ENDPOINT_TYPE),
                error_message=f"endpoint type {req.body.endpoint_type} is not served here "
                              "(1: brokers)", endpoint_type=req.body.endpoint_type,
                cluster_id=self.cluster_id, controller_id=-1, brokers=[],
                authorized_operations=NOT_AUTHORIZED_OPERATIONS))
            return
        with_fenced = v >= 2 and req.body.include_fenced_brokers
        brokers = []
        for b in sorted(self.rm.image.brokers.values(), key=lambda b: b.broker_id):
            ep = b.endpoint("PLAINTEXT")
            if ep is None or (b.fenced and not with_fenced):
                continue
            extra = {"is_fenced": b.fenced} if v >= 2 else {}
            brokers.append(R.DescribeClusterBroker(broker_id=b.broker_id, host=ep[0],
                                                   port=ep[1], rack=b.rack, **extra))
        extra = {"endpoint_type": 1} if v >= 1 else {}
        self._reply(src, req, R(throttle_time_ms=0, error_code=m.NONE, error_message=None,
                                cluster_id=self.cluster_id,
                                controller_id=self.broker.controller_hint(), brokers=brokers,
                                authorized_operations=NOT_AUTHORIZED_OPERATIONS,
                                **extra))

    def _offset_commit(self, src, req: KafkaRequest, now: int) -> None:
        R, b = self._cls(req), req.body
        T = R.OffsetCommitResponseTopic
        self._commit_offsets(src, req, now, 6, T, T.OffsetCommitResponsePartition,
                             b.member_id, b.generation_id_or_member_epoch, None,
                             b.group_instance_id if req.api_version >= 7 else None)

    def _commit_offsets(self, src, req: KafkaRequest, now: int, epoch_since: int, T, P,
                        member_id: str, generation: int, producer,
                        instance_id: str | None = None) -> None:
        """OffsetCommit and TxnOffsetCommit (``producer``: its id and epoch); leader epochs
        are in requests from version ``epoch_since``."""
        b = req.body
        offsets = {}
        for t in b.topics:
            for p in t.partitions:
                epoch = p.committed_leader_epoch if req.api_version >= epoch_since else -1
                offsets[(t.name, p.partition_index)] = (p.committed_offset, epoch,
                                                        p.committed_metadata)

        def respond(errors: dict) -> None:
            self._reply(src, req, self._cls(req)(throttle_time_ms=0, topics=[
                T(name=t.name, partitions=[
                    P(partition_index=p.partition_index,
                      error_code=errors[(t.name, p.partition_index)]) for p in t.partitions])
                for t in b.topics]))
        self.groups.commit_offsets(b.group_id, member_id, generation, offsets, now, respond,
                                   producer=producer, instance_id=instance_id)

    def _offset_fetch(self, src, req: KafkaRequest, now: int) -> None:
        """One group before v8, a batch of groups from v8 (KIP-709); ``require_stable``
        from v7 (KIP-447). v9's member id and epoch are for KIP-848's groups; every group
        here is a classic one, whose offsets anyone may read (as Kafka's)."""
        R, v = self._cls(req), req.api_version
        stable = v >= 7 and req.body.require_stable
        if v < 8:
            T = R.OffsetFetchResponseTopic
            error, topics = self._group_offsets(req.body.group_id, req.body.topics, v, stable,
                                                T, T.OffsetFetchResponsePartition)
            if error != m.NONE and v >= 2:
                self._reply(src, req, R(throttle_time_ms=0, topics=[], error_code=error))
            else:
                self._reply(src, req, R(throttle_time_ms=0, error_code=m.NONE, topics=topics))
            return
        G = R.OffsetFetchResponseGroup
        out = []
        for group in req.body.groups:
            T = G.OffsetFetchResponseTopics
            error, topics = self._group_offsets(group.group_id, group.topics, v, stable,
                                                T, T.OffsetFetchResponsePartitions)
            out.append(G(group_id=group.group_id, topics=topics, error_code=error))
        self._reply(src, req, R(throttle_time_ms=0, groups=out))

    def _group_offsets(self, group_id: str, wanted, version: int, stable: bool, T, P):
        """(group error, topics of the answer) for one group's OffsetFetch; T and P are the
        version's topic and partition classes (v8 renamed both when it batched groups)."""
        keys = None if wanted is None else [(t.name, i) for t in wanted
                                            for i in t.partition_indexes]
        error, found = self.groups.fetch_offsets(group_id, keys, stable)
        if error != m.NONE:
            if version >= 2:
                return error, []
            found = [(k, None, error) for k in keys or []]  # v1: errors per partition only
        by_topic: dict[str, list] = {}
        for (topic, idx), value, part_error in found:
            by_topic.setdefault(topic, []).append(P(
                partition_index=idx, committed_offset=value.offset if value else -1,
                committed_leader_epoch=value.leader_epoch if value else -1,
                metadata=value.metadata if value else "", error_code=part_error))
        return m.NONE, [T(name=t, partitions=ps) for t, ps in by_topic.items()]

    # ------------------------------------------------------------ timers

    def complete_delayed(self, now: int) -> None:
        """Answer parked requests that can be answered (after every input)."""
        if self._delayed_produce:
            keep = []
            for d in self._delayed_produce:
                self._check_produce(d, now)
                if d.pending:
                    keep.append(d)
                else:
                    self._produce_reply(d)
            self._delayed_produce = keep
        if self._delayed_fetch:
            keep = []
            touched = self.rm.hw_changed | ({None} if self.rm.role_changed else set())
            for d in self._delayed_fetch:
                if now < d.deadline_ms and not (touched and (None in touched or d.keys & touched)):
                    keep.append(d)
                    continue
                response, size, errors = self._fetch_response(d.request)
                if size >= max(d.request.body.min_bytes, 1) or errors or now >= d.deadline_ms:
                    self._reply(d.src, d.request, response)
                else:
                    keep.append(d)
            self._delayed_fetch = keep
        if self._pending_pids:
            self._serve_pids(now)
        if self._delayed_deletes:
            self._check_deletes(now)
        if self.rm.topics_deleted:
            self.groups.partitions_deleted(self.rm.topics_deleted, now)
        self.groups.poll(now, self.rm.role_changed)
        self.txns.poll(now, self.rm.role_changed)
        if self._delayed_markers:
            self._check_markers(now)
        for corr, (deadline, reply) in list(self._pending_controller.items()):
            if now >= deadline:
                del self._pending_controller[corr]
                reply(None, m.REQUEST_TIMED_OUT)

    def next_deadline_ms(self) -> int | None:
        times = [d.deadline_ms for d in self._delayed_produce]
        times += [d.deadline_ms for d in self._delayed_fetch]
        times += [d for _, _, d in self._pending_pids]
        times += [e[0] for e in self._pending_controller.values()]
        times += [e[2] for e in self._delayed_markers]
        times += [e[2] for e in self._delayed_deletes]
        for t in (self.groups.next_deadline_ms(), self.txns.next_deadline_ms()):
            if t is not None:
                times.append(t)
        return min(times) if times else None

    def fail_all(self) -> None:
        """On shutdown: answer everything parked so no client waits on a closed socket."""
        self.groups.shutdown()
        self.txns.shutdown()
        now = 1 << 62
        self.complete_delayed(now)


def _recompressed(batch: bytes, codec: int) -> tuple[records.BatchHeader, bytes]:
    out = records.recompress(batch, codec)
    return records.parse_header(out), out
