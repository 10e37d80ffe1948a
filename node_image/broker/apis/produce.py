"""Produce: appends by the partition leader, idempotent and transactional batches checked
against the producer state, compressed batches validated and recompressed, acks=all
parked until the high watermark passes them, and (v10+, KIP-951) a partition's current
leader told to a producer that wrote to a broker that no longer leads it."""
from __future__ import annotations

from dataclasses import dataclass, field

from ... import messages as m
from ... import acls, compression, records
from ...kafka_codec import KafkaRequest
from ...quota_meter import PRODUCE
from ...topic_configs import compacted
from ..group_metadata import OFFSETS_TOPIC
from ..transaction_coordinator import TXN_TOPIC
from .common import UNBOUNDED, leader_hint, node_endpoints


@dataclass(slots=True)
class _ProduceResult:
    """One partition's answer to a Produce, until it is sent: a delayed produce (acks=all)
    turns a NONE into an error when the leader changes, the ISR shrinks or time runs out."""
    error: int
    base_offset: int = -1
    required_end: int = 0  # the high watermark that commits it (last offset + 1)
    leader_epoch: int = -1
    log_append_time_ms: int = -1  # the broker's wall clock, for a LogAppendTime topic
    error_message: str | None = None
    bad_records: tuple = ()  # INVALID_RECORD: the indexes of the records refused


@dataclass(slots=True)
class _DelayedProduce:
    src: object
    request: KafkaRequest
    deadline_ms: int
    results: dict[tuple[str, int], _ProduceResult]
    pending: set = field(default_factory=set)
    throttle_ms: int = 0  # the client's byte-rate quota's (``quota_meter``)


class ProduceApis:
    """Mixed into :class:`~node_image.broker.kafka_apis.KafkaApis`."""

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
                elif not self._allowed(src, acls.WRITE, acls.TOPIC, td.name):
                    results[key] = _ProduceResult(m.TOPIC_AUTHORIZATION_FAILED)
                else:
                    results[key] = self._append(td.name, pd.index, pd.records, acks,
                                                transactional=body.transactional_id is not None,
                                                version=req.api_version)
        throttle = self._client_throttle(req, PRODUCE, req.size, now)
        if acks == 0:
            self._reply(src, req, None, throttle)
            return
        d = _DelayedProduce(src, req, now + max(body.timeout_ms, 0), results, throttle_ms=throttle)
        if acks == -1 and "ack-before-replication" not in self.bugs:
            d.pending = {k for k, r in results.items() if r.error == m.NONE}
        if d.pending:
            self._check_produce(d, now)
        if d.pending:  # parked until the HW passes it; answered once, from complete_delayed
            self._delayed_produce.append(d)
        else:
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
                if header.size > self.rm.setting("message.max.bytes"):
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
            target = self.rm.image.topic_config(topic).get(
                "compression.type", self.rm.setting("compression.type"))
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
        if compacted(config):
            keyless = [i for i, rec in enumerate(
                r for _, b in batches for r in records.decode_records(b)[1]) if rec.key is None]
            if keyless:  # Kafka's LogValidator: the whole batch is refused, each record named
                why = f"Compacted topic cannot accept message without key in topic " \
                      f"partition {topic}-{partition}."
                shown = ", ".join(f"RecordError(batchIndex={i}, message='{why}')"
                                  for i in keyless[:3])
                self._on_event(f"produce to {topic}-{partition}: {len(keyless)} record(s) "
                               f"without a key (INVALID_RECORD)")
                return _ProduceResult(
                    m.INVALID_RECORD, leader_epoch=part.leader_epoch, bad_records=tuple(
                        (i, why) for i in keyless),
                    error_message=f"One or more records have been rejected due to "
                                  f"{len(keyless)} record errors in total, and only showing "
                                  f"the first three errors at most: [{shown}]")
        if config.get("message.timestamp.type") == "LogAppendTime":
            append_time = self.wall_clock()
            batches = [(h, records.set_log_append_time(b, append_time)) for h, b in batches]
        elif self._timestamp_out_of_range(topic, config, batches):
            return refuse(m.INVALID_TIMESTAMP)
        for header, batch in batches:
            error, dup = part.producers.check(header)
            if error == m.INVALID_PRODUCER_EPOCH and header.is_transactional \
                    and "fenced-epoch-appends" in self.bugs:  # planted bug
                error, dup = m.NONE, None
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
                                self.rm.setting("log.message.timestamp.before.max.ms")))
        after = int(config.get("message.timestamp.after.max.ms",
                               self.rm.setting("log.message.timestamp.after.max.ms")))
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
        hints = d.request.api_version >= 10  # KIP-951
        endpoints: dict = {}
        by_topic: dict[str, list] = {}
        for (topic, partition), r in d.results.items():
            part = self.rm.partitions.get((topic, partition))
            extra = {}
            if hints and r.error == m.NOT_LEADER_OR_FOLLOWER:
                leader, epoch = leader_hint(self.rm.image, topic, partition, endpoints)
                extra["current_leader"] = P.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
            by_topic.setdefault(topic, []).append(P(
                index=partition, error_code=r.error,
                base_offset=r.base_offset if r.error == m.NONE else -1,
                log_append_time_ms=r.log_append_time_ms if r.error == m.NONE else -1,
                log_start_offset=part.log.start_offset if part is not None else -1,
                record_errors=[P.BatchIndexAndErrorMessage(
                    batch_index=i, batch_index_error_message=why) for i, why in r.bad_records],
                error_message=r.error_message, **extra))
        extra = {"node_endpoints": node_endpoints(R, endpoints)} if endpoints else {}
        self._reply(d.src, d.request, R(
            responses=[T(name=t, partition_responses=ps) for t, ps in by_topic.items()],
            throttle_time_ms=d.throttle_ms, **extra), d.throttle_ms)


def _recompressed(batch: bytes, codec: int) -> tuple[records.BatchHeader, bytes]:
    out = records.recompress(batch, codec)
    return records.parse_header(out), out
