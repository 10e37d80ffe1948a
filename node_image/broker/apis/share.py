"""Share groups (KIP-932): ShareGroupHeartbeat (the group coordinator,
:mod:`..share_coordinator`), ShareFetch and ShareAcknowledge (each partition's leader,
:mod:`..share_partition`).

A member fetches through a *share session* with each leader it reads from, keyed by group
and member id: epoch 0 opens it with the partitions named, a positive epoch must be the
one the session expects next (INVALID_SHARE_SESSION_EPOCH; SHARE_SESSION_NOT_FOUND when
there is none) and may add partitions or forget some, -1 closes it, the member's records
released at once. A ShareFetch first applies the acknowledgements it carries, then
acquires records for the member on each partition of its session: released records again,
then new ones up to the high watermark (``share.isolation.level`` read_committed: the
last stable offset, aborted transactions' records archived undelivered), at most
``MaxRecords`` (whole batches) in all.
Where nothing is acquired and nothing was acknowledged, it waits up to ``MaxWaitMs`` for
records (new ones, or ones released by another member).

The leader keeps each group's share partition in memory and its *state* with the group's
coordinator (Kafka's share coordinator, here the group coordinator,
:mod:`..share_coordinator`): when it starts leading a partition for a group it reads the
state (SPSO, each in-flight record available or archived, with its delivery count; until
then the partition gives that group nothing, and acknowledgements for it are
INVALID_RECORD_STATE, since it holds no acquired records); a group with no state starts
where ``share.auto.offset.reset`` says, and that start is written at once. Each change
(acknowledgements, releases, deliveries) is written behind, one write in flight per
partition, a leader epoch with each (the coordinator fences older ones). An answer that
carries acknowledgements waits until they are written, as Kafka's does, so a new leader
never gives an accepted record again; records acquired and not yet acknowledged are
available again under a new leader, with the deliveries they had at the last write.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ... import acls
from ... import group_configs
from ... import messages as m
from ... import records as rec
from ...kafka_codec import KafkaRequest
from ..group_metadata import OFFSETS_TOPIC, SHARE_ARCHIVED, SHARE_AVAILABLE
from ..share_partition import SharePartition
from ..share_coordinator import ShareHeartbeat
from .common import leader_hint, node_endpoints

DEFAULT_MAX_RECORDS = 500  # a ShareFetch that names no MaxRecords
STATE_TIMEOUT_MS = 5000  # a share state read or write unanswered this long is sent again
STATE_RETRY_MS = 200  # after a refused one, or with no coordinator to ask


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= (1 << 31) - 1 else epoch + 1


@dataclass(slots=True)
class _Session:
    epoch: int  # the epoch the next request must carry
    partitions: set = field(default_factory=set)  # (topic id, partition)


@dataclass(slots=True)
class _Parked:
    src: object
    request: KafkaRequest
    deadline_ms: int


@dataclass(slots=True)
class _Unsaved:
    """An answer to acknowledgements, held until they are written."""
    src: object
    request: KafkaRequest
    response: object
    deadline_ms: int
    needs: dict  # key of ShareState.parts -> the change that must be saved


@dataclass(slots=True)
class ShareState:
    sessions: dict = field(default_factory=dict)  # (group, member) -> _Session
    parts: dict = field(default_factory=dict)  # (group, topic id, p) -> (topic, SP)
    parked: list = field(default_factory=list)
    released: bool = False  # records were released since parked fetches last looked
    loading: dict = field(default_factory=dict)  # key of parts -> when its read is given up
    # key -> (when the write in flight is given up, the change it carries, its correlation)
    writing: dict = field(default_factory=dict)
    dirty: set = field(default_factory=set)  # keys whose state changed since last written
    changes: dict = field(default_factory=dict)  # key -> how many changes its state has had
    saved: dict = field(default_factory=dict)  # key -> the change last written
    waiting: list = field(default_factory=list)  # _Unsaved answers
    retry_at: dict = field(default_factory=dict)  # key -> no write before (after a failure)


class ShareApis:
    """Mixed into :class:`~node_image.broker.kafka_apis.KafkaApis`."""

    share: ShareState

    # ------------------------------------------------------------ the coordinator

    def _share_group_heartbeat(self, src, req: KafkaRequest, now: int) -> None:
        b, R = req.body, self._cls(req)
        if not self._allowed(src, acls.READ, acls.GROUP, b.group_id):
            self._reply(src, req, R(throttle_time_ms=0, error_code=m.GROUP_AUTHORIZATION_FAILED,
                                    error_message=f"Not authorized to read group {b.group_id}",
                                    member_id=None, member_epoch=0, heartbeat_interval_ms=0,
                                    assignment=None))
            return
        peer = getattr(src, "peer", None)
        hb = ShareHeartbeat(
            b.group_id, b.member_id or "", b.member_epoch, b.rack_id,
            None if b.subscribed_topic_names is None else tuple(b.subscribed_topic_names),
            req.client_id or "", f"/{peer[0]}" if isinstance(peer, tuple) and peer else "")

        def respond(a) -> None:
            assignment = None
            if a.assignment is not None:
                A = R.Assignment
                assignment = A(topic_partitions=[
                    A.TopicPartitions(topic_id=uuid.UUID(t), partitions=ps)
                    for t, ps in sorted(a.assignment.items())])
            self._reply(src, req, R(
                throttle_time_ms=0, error_code=a.error, error_message=a.message,
                member_id=a.member_id if a.error == m.NONE else None,
                member_epoch=a.member_epoch, heartbeat_interval_ms=a.interval_ms,
                assignment=assignment))
        self.groups.share_heartbeat(hb, now, respond)

    # ------------------------------------------------------------ sessions and acks

    def _share_refusal(self, src, group: str, member: str) -> tuple[int, str] | None:
        """Why a ShareFetch or ShareAcknowledge is refused whole, or None."""
        if not group or not member:
            return m.INVALID_REQUEST, "GroupId and MemberId must be set"
        if not self._allowed(src, acls.READ, acls.GROUP, group):
            return m.GROUP_AUTHORIZATION_FAILED, f"Not authorized to read group {group}"
        return None

    def _share_session(self, group: str, member: str, epoch: int, topics, forgotten,
                       carries_acks: bool) -> tuple[int, str | None, _Session | None]:
        """(error, message, session) for a request's ShareSessionEpoch; the session's
        partitions updated with ``topics`` and ``forgotten``."""
        key = (group, member)
        named = {(str(t.topic_id), p.partition_index) for t in topics for p in t.partitions}
        gone = {(str(t.topic_id), p) for t in forgotten for p in t.partitions}
        if epoch == 0:
            if carries_acks:
                return m.INVALID_REQUEST, "Acknowledge data present on initial fetch", None
            s = self.share.sessions[key] = _Session(1, named - gone)
            return m.NONE, None, s
        s = self.share.sessions.get(key)
        if s is None:
            return (m.SHARE_SESSION_NOT_FOUND,
                    f"no share session of member {member} in group {group}", None)
        if epoch == -1:
            return m.NONE, None, s
        if epoch != s.epoch:
            return (m.INVALID_SHARE_SESSION_EPOCH,
                    f"share session epoch {epoch}, expected {s.epoch}", None)
        s.epoch = _next_epoch(epoch)
        s.partitions = (s.partitions | named) - gone
        return m.NONE, None, s

    def _share_leader(self, group: str, tid: str, p: int, src, now: int):
        """(error, message, the partition or None, its share state or None: not yet read
        from the group's coordinator)."""
        name = self.rm.image.topic_names.get(tid)
        if name is None:
            return m.UNKNOWN_TOPIC_ID, f"no topic with id {tid}", None, None
        if not self._allowed(src, acls.READ, acls.TOPIC, name):
            return m.TOPIC_AUTHORIZATION_FAILED, None, None, None
        part = self.rm.leader_partition(name, p)
        if part is None:
            known = self.rm.image.partition(name, p) is not None
            return (m.NOT_LEADER_OR_FOLLOWER if known else m.UNKNOWN_TOPIC_OR_PARTITION,
                    None, None, None)
        key = (group, tid, p)
        held = self.share.parts.get(key)
        image, o = self.rm.image, self.options
        if held is None:
            self._share_load(key, now)
            return m.NONE, None, part, None
        # the group's lock duration and in-flight limit as they are now, for the records
        # acquired from here on
        held[1].lock_ms = int(group_configs.setting(image, group, o,
                                                    "share.record.lock.duration.ms"))
        held[1].max_in_flight = int(group_configs.setting(
            image, group, o, "share.partition.max.record.locks"))
        return m.NONE, None, part, held[1]

    def _share_ack(self, group: str, member: str, tid: str, p, src, now: int):
        """Apply one partition's acknowledgement batches: (error, message)."""
        error, message, _, sp = self._share_leader(group, tid, p.partition_index, src, now)
        if error != m.NONE:
            return error, message
        if sp is None:
            return m.INVALID_RECORD_STATE, "the share partition's state is being read"
        for batch in p.acknowledgement_batches:
            why = sp.acknowledge(member, batch.first_offset, batch.last_offset,
                                 list(batch.acknowledge_types), now)
            if why is not None:
                return m.INVALID_RECORD_STATE, why
            self.share.released = True
            self._share_changed((group, tid, p.partition_index))
        return m.NONE, None

    def _share_close(self, group: str, member: str, s: _Session) -> None:
        for tid, p in s.partitions:
            held = self.share.parts.get((group, tid, p))
            if held is not None and held[1].release_member(member):
                self.share.released = True
                self._share_changed((group, tid, p))
        self.share.sessions.pop((group, member), None)

    # ------------------------------------------------------------ share state

    def _share_coordinator(self, group: str) -> int | None:
        """The broker leading the group's ``__consumer_offsets`` partition, if any."""
        info = self.rm.image.partition(OFFSETS_TOPIC, self.groups.partition_of(group))
        return None if info is None or info.leader < 0 else info.leader

    def _share_load(self, key: tuple, now: int) -> None:
        """Ask the group's coordinator for its state of the partition (once at a time)."""
        if self.share.loading.get(key, -1) > now:
            return
        node = self._share_coordinator(key[0])
        self.share.loading[key] = now + (STATE_TIMEOUT_MS if node is not None
                                         else STATE_RETRY_MS)
        if node is not None:
            self.broker.send_share_state(node, m.ShareStateReadRequest(
                self.broker.next_correlation(), *key))

    def _share_flush(self, now: int) -> None:
        """Write the state of each partition changed since its last write (one write in
        flight per partition; a change while it is, written after it). A read or write
        left unanswered is given up: the write sent again, the read asked again by the
        next fetch that needs it."""
        s = self.share
        for key in [k for k, t in s.loading.items() if t <= now]:
            del s.loading[key]
            s.released = True  # parked fetches ask again
        for key in [k for k, (t, _, _) in s.writing.items() if t <= now]:
            del s.writing[key]
            s.dirty.add(key)
        for key in sorted(s.dirty):
            if key in s.writing or s.retry_at.get(key, -1) > now:
                continue
            held = s.parts.get(key)
            part = None if held is None else self.rm.leader_partition(held[0], key[2])
            node = self._share_coordinator(key[0])
            if part is None:
                s.dirty.discard(key)
                continue
            if node is None:
                s.retry_at[key] = now + STATE_RETRY_MS
                continue
            s.dirty.discard(key)
            s.retry_at.pop(key, None)
            corr = self.broker.next_correlation()
            s.writing[key] = (now + STATE_TIMEOUT_MS, s.changes.get(key, 0), corr)
            spso, runs = held[1].snapshot()
            self.broker.send_share_state(node, m.ShareStateWriteRequest(
                corr, *key, part.leader_epoch, spso,
                tuple((f, la, SHARE_ARCHIVED if archived else SHARE_AVAILABLE, c)
                      for f, la, archived, c in runs)))

    def share_state_answered(self, msg, now: int) -> None:
        """The group coordinator's answer to a read or write of a share partition's state."""
        key = (msg.group, msg.topic_id, msg.partition)
        if isinstance(msg, m.ShareStateWriteResponse):
            sent = self.share.writing.get(key)
            if sent is None or sent[2] != msg.correlation_id:
                return  # an answer to a write given up
            del self.share.writing[key]
            if msg.error == m.NONE:
                self.share.saved[key] = max(self.share.saved.get(key, 0), sent[1])
            elif key in self.share.parts:
                self.share.dirty.add(key)  # written again, after a pause
                self.share.retry_at[key] = now + STATE_RETRY_MS
            return
        if self.share.loading.pop(key, None) is None or key in self.share.parts:
            return  # not asked (any more), or already read
        name = self.rm.image.topic_names.get(msg.topic_id)
        part = None if name is None else self.rm.leader_partition(name, msg.partition)
        if part is None or msg.error != m.NONE:
            if part is not None:
                self.share.loading[key] = now + STATE_RETRY_MS  # asked again after a pause
            return
        o, group = self.options, msg.group
        limit = o.group_share_delivery_count_limit
        if msg.start_offset >= 0:
            sp = SharePartition.restore(msg.start_offset, [
                (f, la, state == SHARE_ARCHIVED, c) for f, la, state, c in msg.batches],
                max_deliveries=limit)
            how = f"read back at {sp.spso} ({sp.speo - sp.spso} in flight)"
        else:
            start = (part.log.start_offset
                     if group_configs.setting(self.rm.image, group, o, "share.auto.offset.reset")
                     == "earliest" else part.high_watermark)
            sp = SharePartition(start, max_deliveries=limit)
            self._share_changed(key)  # where it starts, kept for the next leader
            how = f"starts at {start}"
        self.share.parts[key] = (name, sp)
        self.share.released = True  # parked fetches look again
        self._on_event(f"share group {group}: {name}-{msg.partition} {how}")

    def share_deadlines(self) -> list[int]:
        s = self.share
        return (list(s.loading.values()) + [t for t, _, _ in s.writing.values()]
                + [s.retry_at.get(k, 0) for k in s.dirty if k not in s.writing]
                + [w.deadline_ms for w in s.waiting])

    def _share_changed(self, key: tuple) -> None:
        self.share.dirty.add(key)
        self.share.changes[key] = self.share.changes.get(key, 0) + 1

    def _share_reply_saved(self, src, req: KafkaRequest, response, keys, now: int) -> None:
        """Answer once the state of each of ``keys`` (partitions acknowledged in) is written
        as it is now, as Kafka answers acknowledgements once its share coordinator has
        them; a write not done within STATE_TIMEOUT_MS is answered anyway."""
        needs = {k: self.share.changes.get(k, 0) for k in keys}
        self.share.waiting.append(_Unsaved(src, req, response, now + STATE_TIMEOUT_MS, needs))
        self._share_answer_saved(now)

    def _share_answer_saved(self, now: int) -> None:
        s, keep = self.share, []
        for w in s.waiting:
            if now >= w.deadline_ms or all(s.saved.get(k, 0) >= n or k not in s.parts
                                           for k, n in w.needs.items()):
                self._reply(w.src, w.request, w.response)
            else:
                keep.append(w)
        self.share.waiting = keep

    # ------------------------------------------------------------ ShareFetch

    def _share_fetch(self, src, req: KafkaRequest, now: int) -> None:
        b, R = req.body, self._cls(req)
        group, member = b.group_id or "", b.member_id or ""

        def refuse(error: int, message: str | None) -> None:
            self._reply(src, req, R(throttle_time_ms=0, error_code=error,
                                    error_message=message, acquisition_lock_timeout_ms=0,
                                    responses=[], node_endpoints=[]))
        if (bad := self._share_refusal(src, group, member)) is not None:
            refuse(*bad)
            return
        acks = [(str(t.topic_id), p) for t in b.topics for p in t.partitions
                if p.acknowledgement_batches]
        error, message, s = self._share_session(group, member, b.share_session_epoch, b.topics,
                                                b.forgotten_topics_data, bool(acks))
        if error != m.NONE:
            refuse(error, message)
            return
        ack_errors = {(tid, p.partition_index): self._share_ack(group, member, tid, p, src, now)
                      for tid, p in acks}
        acked = [(group, *key) for key, (error, _) in ack_errors.items() if error == m.NONE]
        if b.share_session_epoch == -1:
            self._share_close(group, member, s)
            self._share_reply_saved(src, req, self._share_fetch_response(req, ack_errors, {}),
                                    acked, now)
            return
        got = self._share_acquire(req, src, s, now)
        if ack_errors or any(v[0] != m.NONE or v[2] for v in got.values()) \
                or b.max_wait_ms <= 0:
            self._share_reply_saved(src, req, self._share_fetch_response(req, ack_errors, got),
                                    acked, now)
            return
        self.share.parked.append(_Parked(src, req, now + b.max_wait_ms))

    def _share_acquire(self, req: KafkaRequest, src, s: _Session, now: int) -> dict:
        """(topic id, p) -> (error, message, acquired ranges, records) for the session's
        partitions."""
        b = req.body
        group, member = b.group_id, b.member_id
        budget = b.max_records if b.max_records > 0 else DEFAULT_MAX_RECORDS
        max_bytes = max(b.max_bytes, 0)  # 0: nothing is acquired, as Kafka answers it
        room = max_bytes  # what MaxBytes leaves for the records of the answer
        out = {}
        for tid, p in sorted(s.partitions):
            error, message, part, sp = self._share_leader(group, tid, p, src, now)
            if error != m.NONE:
                out[(tid, p)] = (error, message, [], b"")
                continue
            if sp is None or budget <= 0 or room <= 0:
                continue
            sp.truncate_below(part.log.start_offset)
            committed = group_configs.setting(self.rm.image, group, self.options,
                                              "share.isolation.level") == "read_committed"
            upper = part.last_stable_offset if committed else part.high_watermark
            aborted = part.producers.aborted_between(sp.speo, upper) if committed else []
            taken: set[int] = set()
            batches: dict[int, bytes] = {}
            again = sp.available(now)[:budget]
            sp.acquire_offsets(again, member, now)
            taken.update(again)
            for o in again:
                if not any(base <= o <= last for base, last in self._spans(batches)):
                    for h, data in self._batches_at(part, o, 1, upper):
                        batches[h.base_offset] = data
            room -= sum(map(len, batches.values()))
            full = False  # the in-flight limit ends this partition's share of the answer
            while sp.may_take_new() and sp.speo < upper and len(taken) < budget and room > 0 \
                    and not full:
                found, before = self._batches_at(part, sp.speo, room, upper), sp.speo
                for h, data in found:
                    if h.last_offset < sp.speo:
                        continue
                    # at least one batch in a response, then as many as MaxBytes holds
                    if len(taken) >= budget or (len(data) > room and room < max_bytes):
                        room = 0
                        break
                    first = max(h.base_offset, sp.speo)
                    skip = h.is_control or (h.is_transactional and any(
                        a.producer_id == h.producer_id
                        and a.first_offset <= h.base_offset < a.last_offset for a in aborted))
                    # MaxRecords is passed by a whole batch (as Kafka, which the clients'
                    # suites check), but a batch is acquired only in part where the
                    # in-flight limit ends inside it (sent whole, the client told which
                    # offsets are its)
                    last = h.last_offset if skip else min(h.last_offset,
                                                          sp.spso + sp.max_in_flight - 1)
                    if last < first:
                        full = True
                        break
                    sp.acquire_new(h.base_offset, last, member, now, skip)
                    if not skip:
                        taken.update(range(first, last + 1))
                        batches[h.base_offset] = data
                        room -= len(data)
                    if last < h.last_offset:
                        full = True
                        break
                if sp.speo == before:
                    break
            if taken:  # delivery counts rose
                self._share_changed((group, tid, p))
            ranges = sp.acquired_ranges(member, taken)
            data = b"".join(d for _, d in sorted(batches.items())) if ranges else b""
            out[(tid, p)] = (m.NONE, None, ranges, data)
            budget -= len(taken)
        return out

    @staticmethod
    def _spans(batches: dict[int, bytes]):
        for data in batches.values():
            h = rec.parse_header(data)
            yield h.base_offset, h.last_offset

    @staticmethod
    def _batches_at(part, offset: int, max_bytes: int, upper: int) -> list:
        if offset >= upper:
            return []
        data = part.log.read_range(offset, max(max_bytes, 1), upper)
        out, pos = [], 0
        while pos < len(data):
            h = rec.parse_header(data, pos)
            out.append((h, bytes(data[pos:pos + h.size])))
            pos += h.size
        return out

    def _share_fetch_response(self, req: KafkaRequest, ack_errors: dict, got: dict):
        R = self._cls(req)
        T = R.ShareFetchableTopicResponse
        P = T.PartitionData
        endpoints: dict = {}
        by_topic: dict[str, list] = {}
        names = self.rm.image.topic_names
        for key in sorted(set(ack_errors) | set(got)):
            tid, p = key
            error, message, ranges, data = got.get(key, (m.NONE, None, [], b""))
            ack_error, ack_message = ack_errors.get(key, (m.NONE, None))
            leader = (-1, -1)
            if m.NOT_LEADER_OR_FOLLOWER in (error, ack_error):
                leader = leader_hint(self.rm.image, names.get(tid), p, endpoints)
            by_topic.setdefault(tid, []).append(P(
                partition_index=p, error_code=error, error_message=message,
                acknowledge_error_code=ack_error, acknowledge_error_message=ack_message,
                current_leader=P.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1]),
                records=data, acquired_records=[
                    P.AcquiredRecords(first_offset=f, last_offset=la, delivery_count=c)
                    for f, la, c in ranges]))
        lock_ms = int(group_configs.setting(self.rm.image, req.body.group_id or "",
                                            self.options, "share.record.lock.duration.ms"))
        return R(throttle_time_ms=0, error_code=m.NONE, error_message=None,
                 acquisition_lock_timeout_ms=lock_ms,
                 responses=[T(topic_id=uuid.UUID(t), partitions=ps)
                            for t, ps in sorted(by_topic.items())],
                 node_endpoints=node_endpoints(R, endpoints))

    def _complete_share_fetches(self, now: int) -> None:
        """Answer parked ShareFetches that now acquire something, or whose wait is over.
        A partition this broker no longer leads loses its share state (kept while it led
        without a break)."""
        if self.rm.role_changed and self.share.parts:
            self.share.parts = {k: v for k, v in self.share.parts.items()
                                if self.rm.leader_partition(v[0], k[2]) is not None}
            self.share.dirty &= set(self.share.parts)
        self._share_flush(now)
        self._share_answer_saved(now)
        if not self.share.parked:
            return
        touched = bool(self.rm.hw_changed) or self.rm.role_changed or self.share.released
        self.share.released = False
        keep = []
        for d in self.share.parked:
            if now < d.deadline_ms and not touched:
                keep.append(d)
                continue
            b = d.request.body
            s = self.share.sessions.get((b.group_id, b.member_id))
            got = {} if s is None else self._share_acquire(d.request, d.src, s, now)
            if s is None or now >= d.deadline_ms or any(
                    v[0] != m.NONE or v[2] for v in got.values()):
                self._reply(d.src, d.request, self._share_fetch_response(d.request, {}, got))
            else:
                keep.append(d)
        self.share.parked = keep

    # ------------------------------------------------------------ ShareAcknowledge

    def _share_acknowledge(self, src, req: KafkaRequest, now: int) -> None:
        b, R = req.body, self._cls(req)
        group, member = b.group_id or "", b.member_id or ""
        T = R.ShareAcknowledgeTopicResponse

        def refuse(error: int, message: str | None) -> None:
            self._reply(src, req, R(throttle_time_ms=0, error_code=error,
                                    error_message=message, responses=[], node_endpoints=[]))
        if (bad := self._share_refusal(src, group, member)) is not None:
            refuse(*bad)
            return
        if b.share_session_epoch == 0:
            refuse(m.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a share session")
            return
        error, message, s = self._share_session(group, member, b.share_session_epoch, [], [],
                                                True)
        if error != m.NONE:
            refuse(error, message)
            return
        endpoints: dict = {}
        names = self.rm.image.topic_names
        topics = []
        acked = []
        for t in b.topics:
            tid = str(t.topic_id)
            parts = []
            for p in t.partitions:
                error, message = self._share_ack(group, member, tid, p, src, now)
                if error == m.NONE:
                    acked.append((group, tid, p.partition_index))
                leader = (leader_hint(self.rm.image, names.get(tid), p.partition_index,
                                      endpoints)
                          if error == m.NOT_LEADER_OR_FOLLOWER else (-1, -1))
                parts.append(T.PartitionData(
                    partition_index=p.partition_index, error_code=error, error_message=message,
                    current_leader=T.PartitionData.LeaderIdAndEpoch(leader_id=leader[0],
                                                                    leader_epoch=leader[1])))
            topics.append(T(topic_id=t.topic_id, partitions=parts))
        if b.share_session_epoch == -1:
            self._share_close(group, member, s)
        self._share_reply_saved(src, req, R(
            throttle_time_ms=0, error_code=m.NONE, error_message=None, responses=topics,
            node_endpoints=node_endpoints(R, endpoints)), acked, now)
