"""Producer ids and transactions: InitProducerId, the transaction coordinator's requests,
the markers it asks partition leaders to write, and DescribeProducers,
DescribeTransactions and ListTransactions.

With an authorizer, as Kafka's KafkaApis: a transactional id needs WRITE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn; AddPartitionsToTxn needs WRITE on each topic (the refused
partitions TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED) and
AddOffsetsToTxn READ on the group."""
from __future__ import annotations

from ... import acls
from ... import messages as m
from ... import records
from ...kafka_codec import KafkaRequest
from ..group_metadata import OFFSETS_TOPIC
from ..transaction_coordinator import NAMES as TXN_STATE_NAMES
from .common import PID_WAIT_MS


class TxnApis:
    """Mixed into :class:`~node_image.broker.kafka_apis.KafkaApis`."""

    def _init_producer_id(self, src, req: KafkaRequest, now: int) -> None:
        tid = req.body.transactional_id
        if tid is not None and self._denied(src, acls.WRITE, acls.TRANSACTIONAL_ID, tid):
            self._reply(src, req, self._cls(req)(
                throttle_time_ms=0, error_code=m.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                producer_id=-1, producer_epoch=-1))
            return
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
            if "pid-given-twice" in self.bugs and self._pid_again is not None:  # planted bug
                pid, self._pid_again = self._pid_again, None
            else:
                pid = self.broker.next_producer_id()
                if "pid-given-twice" in self.bugs:
                    self._pid_again = pid
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
        if self._denied(src, acls.WRITE, acls.TRANSACTIONAL_ID, b.v3_and_below_transactional_id):
            respond({tp: m.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in wanted})
            return
        refused = {t for t, _ in wanted if self._denied(src, acls.WRITE, acls.TOPIC, t)}
        if refused:
            respond({(t, p): m.TOPIC_AUTHORIZATION_FAILED if t in refused
                     else m.OPERATION_NOT_ATTEMPTED for t, p in wanted})
            return
        self.txns.add_partitions(b.v3_and_below_transactional_id, b.v3_and_below_producer_id,
                                 b.v3_and_below_producer_epoch, wanted, now, respond)

    def _add_offsets_to_txn(self, src, req: KafkaRequest, now: int) -> None:
        b, R = req.body, self._cls(req)
        refused = (self._denied(src, acls.WRITE, acls.TRANSACTIONAL_ID, b.transactional_id)
                   or self._denied(src, acls.READ, acls.GROUP, b.group_id))
        if refused:
            self._reply(src, req, R(throttle_time_ms=0, error_code=refused))
            return
        key = (OFFSETS_TOPIC, self.groups.partition_of(b.group_id))
        if self.rm.image.partition(*key) is None:
            # A producer's first offsets to a group may come before any group was ever used:
            # __consumer_offsets is made now (as FindCoordinator makes it), and the producer
            # is told to retry (COORDINATOR_NOT_AVAILABLE, which every client retries)
            # instead of UNKNOWN_TOPIC_OR_PARTITION, which it would get until some consumer
            # group happened to make the topic
            self._create_internal_topic(OFFSETS_TOPIC, now)
            self._reply(src, req, R(throttle_time_ms=0, error_code=m.COORDINATOR_NOT_AVAILABLE))
            return
        self.txns.add_partitions(b.transactional_id, b.producer_id, b.producer_epoch, [key], now,
                                 lambda errors: self._reply(src, req, R(
                                     throttle_time_ms=0, error_code=errors[key])))

    def _end_txn(self, src, req: KafkaRequest, now: int) -> None:
        b, R = req.body, self._cls(req)
        refused = self._denied(src, acls.WRITE, acls.TRANSACTIONAL_ID, b.transactional_id)
        if refused:
            self._reply(src, req, R(throttle_time_ms=0, error_code=refused))
            return
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
