"""QuorumController: the single-threaded metadata state machine, and the register service.

Theory of operation
-------------------
Every node with the controller role runs one QuorumController as the
listener of its KafkaRaftClient. It keeps two views of the metadata:

- ``committed``: every committed record replayed in log order. Standbys only
  have this one (``current`` *is* ``committed``).
- ``current`` (active controller only): ``committed`` plus the records this
  leader has appended but not yet seen committed.

A write on the active controller computes its records from ``current``, replays them into
``current``, appends them to the Raft log and parks its reply at the offset of the last
record. The reply is released when the committed offset passes it. An operation that writes
nothing (a failed cas) is parked at the last written offset, as Kafka's controller does, so
that it never exposes a state that might not commit.

When leadership is lost, every parked reply fails with NOT_CONTROLLER (a write whose records
were appended is reported "unknown": they may still commit under the next leader) and
``current`` reverts to ``committed``. The controller claims leadership only once Raft tells
it, which happens after it has replayed every record before the leader's epoch start. On an
empty log it first writes the bootstrap records (feature levels). While active and idle it
appends a NoOpRecord every ``metadata.max.idle.interval.ms``. Every
``metadata.log.max.record.bytes.between.snapshots`` committed bytes it writes a snapshot of
``committed``.

Managers
--------
- Cluster control (here): broker registrations (RegisterBrokerRecord; the
  broker epoch is the record's offset), heartbeats as soft state kept only
  by the active controller (every broker gets a fresh session when a
  controller becomes active), unfencing once a broker's metadata has caught
  up to its registration, fencing after ``broker.session.timeout.ms``
  without a heartbeat, controlled shutdown (leadership moved away first).
- Replication control (``replication_control.py``): topics, partitions,
  elections and AlterPartition.
- Producer ids (blocks of 1000, ProducerIdsRecord); ACLs, SCRAM and client quotas
  (``controller_security.py``).

Register service and its read barrier
-------------------------------------
``write(key, value)`` and ``cas(key, expected, new)`` are ordinary controller writes.
``read(key)`` appends a NoOpRecord marker in the leader's epoch and answers from
``committed`` when that marker commits. A marker can only commit in epoch e if a majority
still follows the leader of epoch e after the read arrived, so no later leader can have
committed a write the read misses; a deposed leader's markers never commit and its reads
fail. Reads arriving in the same event share one marker.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import messages as m
from . import metadata_records as mr
from . import features, partition_events, reassignment
from . import replication_control as rc
from .config_control import alter_configs
from .controller_security import SecurityWrites
from .controller_topics import TopicWrites
from .coverage import Reached
from .log import OffsetAndEpoch
from .metadata_image import MetadataDelta, MetadataImage
from .mutation_quota import MutationQuota
from .outbox import Outbox
from .raft.client import CommittedBatch, KafkaRaftClient, LeaderAndEpoch

PRODUCER_ID_BLOCK = 1000
LEASE_READS = frozenset({"lease-read", "lease-read-step-proof"})  # planted bugs: reads on a lease


@dataclass(frozen=True, slots=True)
class ControllerOptions:
    idle_interval_ms: int = 500
    snapshot_max_bytes: int = 20 * 1024 * 1024
    session_timeout_ms: int = 9000
    leader_imbalance_check_interval_ms: int = 300_000
    auto_leader_rebalance: bool = True
    default_partitions: int = 1
    default_replication_factor: int = 1
    bootstrap_metadata_version: int = mr.METADATA_VERSION_LEVEL
    bootstrap_elr_version: int = 0  # eligible.leader.replicas.version at bootstrap
    min_insync_replicas: int = 1  # the cluster's, written once eligible leader replicas are on
    group_config_bounds: dict | None = None  # group config -> (low, high): group_configs.bounds
    quota_window_num: int = 11  # a controller_mutation_rate quota's burst: this many windows
    quota_window_size_ms: int = 1000


@dataclass(slots=True)
class Deferred:
    offset: int
    src: object
    result: Callable[[], object]  # the reply once ``offset`` is committed
    on_resign: Callable[[int, int], object]  # the reply if leadership is lost first (leader, epoch)


class QuorumController(SecurityWrites, TopicWrites):
    def __init__(self, node_id: int, *, options: ControllerOptions, bugs: frozenset[str],
                 raft: KafkaRaftClient, outbox: Outbox, can_lead: bool = True,
                 on_event: Callable[[str], None] | None = None) -> None:
        self.node_id = node_id
        self.options = options
        # controller_mutation_rate quotas' token buckets (``controller_topics.py``)
        self._mutation_quota = MutationQuota(options.quota_window_num,
                                             options.quota_window_size_ms)
        self.idle_interval_ms = options.idle_interval_ms
        self.snapshot_max_bytes = options.snapshot_max_bytes
        self.bugs = bugs
        self._unclean = "unclean-election" in bugs
        self.outbox = outbox
        self.can_lead = can_lead
        self._on_event = on_event or (lambda msg: None)
        self.raft = raft
        self.committed = MetadataImage()
        self.current = self.committed
        self.active = False
        self.applied_offset = 0  # end (exclusive) of what ``committed`` holds
        self.last_written_offset = -1
        self._last_append_ms = 0
        self._deferred: list[Deferred] = []
        self._bytes_since_snapshot = 0
        self._read_marker: int | None = None
        self._last_contact_ms: dict[int, int] = {}  # broker id -> last heartbeat (active only)
        self._sessions_start = False
        self._next_rebalance_ms = 0
        # Kafka's MetadataPublishers: called with (delta or None for a snapshot, image) each
        # time ``committed`` changes (the broker; the simulator's invariants)
        self._publishers: list[Callable[[MetadataDelta | None, MetadataImage], None]] = []

    def register_publisher(self, publisher: Callable[[MetadataDelta | None, MetadataImage],
                                                     None]) -> None:
        self._publishers.append(publisher)

    # ------------------------------------------------------- Raft listener

    def handle_commit(self, batch: CommittedBatch) -> None:
        delta = MetadataDelta(self.committed)
        for rec in batch.records:
            delta.replay(mr.decode(rec.value))
        self.applied_offset = batch.last_offset + 1
        self.committed = delta.apply(self.applied_offset)
        if not self.active:
            self.current = self.committed
        for publish in self._publishers:
            publish(delta, self.committed)
        self._complete_deferred(batch.last_offset)
        self._bytes_since_snapshot += batch.size_bytes
        if self._bytes_since_snapshot >= self.snapshot_max_bytes:
            self.raft.create_snapshot(self.applied_offset,
                                      [(None, mr.encode(r)) for r in self.committed.records()],
                                      self._last_append_ms)
            self._bytes_since_snapshot = 0

    def handle_load_snapshot(self, snapshot_id: OffsetAndEpoch, entries) -> None:
        delta = MetadataDelta(MetadataImage())
        for rec in entries:
            delta.replay(mr.decode(rec.value))
        self.committed = delta.apply(snapshot_id.offset)
        self.current = self.committed
        self.applied_offset = snapshot_id.offset
        self._bytes_since_snapshot = 0
        self._on_event(Reached("snapshot-loaded", f"controller loaded snapshot "
                               f"{snapshot_id.offset}-{snapshot_id.epoch}"))
        for publish in self._publishers:
            publish(None, self.committed)

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        if leader.leader_id == self.node_id and self.can_lead:
            self._claim(leader.epoch)
        elif self.active:
            self._renounce(leader)

    # ------------------------------------------------------ leadership

    def _claim(self, epoch: int) -> None:
        self.active = True
        self.current = self.committed
        self.last_written_offset = self.raft.log.end_offset - 1
        # Every broker gets a fresh session with a new active controller, as in Kafka; the
        # sessions start at the next input, which brings the time.
        self._sessions_start = True
        self._next_rebalance_ms = 0
        self._on_event(f"active controller in epoch {epoch}")
        if "metadata.version" not in self.current.features:
            self._write(features.bootstrap_records(self.current, self.options),
                        self._last_append_ms)

    def _renounce(self, leader: LeaderAndEpoch) -> None:
        self.active = False
        self.current = self.committed
        self._read_marker = None
        self._last_contact_ms = {}
        deferred, self._deferred = self._deferred, []
        leader_id = -1 if leader.leader_id is None else leader.leader_id
        for d in deferred:
            self.outbox.send(d.src, d.on_resign(leader_id, leader.epoch))
        self._on_event(f"no longer the active controller (leader now {leader.leader_id} "
                       f"in epoch {leader.epoch}); {len(deferred)} parked replies failed")

    def _write(self, records: list, now: int) -> int:
        delta = MetadataDelta(self.current)
        for r in records:
            delta.replay(r)
        offset = self.raft.append([(None, mr.encode(r)) for r in records], now)
        for event, msg in partition_events.partition_changes(self.current, records):
            self._on_event(Reached(event, msg))
        self.current = delta.apply(offset + 1)
        self.last_written_offset = offset
        self._last_append_ms = now
        return offset

    def _replayed(self, records: list) -> MetadataImage:
        """``current`` with ``records`` replayed, without writing them."""
        delta = MetadataDelta(self.current)
        for r in records:
            delta.replay(r)
        return delta.apply(self.current.offset)

    def _complete_deferred(self, committed_last: int) -> None:
        while self._deferred and self._deferred[0].offset <= committed_last:
            d = self._deferred.pop(0)
            self.outbox.send(d.src, d.result())
        if self._read_marker is not None and self._read_marker <= committed_last:
            self._read_marker = None

    def _park(self, d: Deferred) -> None:
        self._deferred.append(d)  # offsets are non-decreasing: appended in log order

    def _park_at_last_write(self, src, result, on_resign) -> None:
        """Reply once everything written so far is committed (for requests that write nothing)."""
        self._park(Deferred(max(self.last_written_offset, 0), src, result, on_resign))
        if self.last_written_offset < 0 or self.last_written_offset < self.applied_offset:
            self._complete_deferred(self.applied_offset - 1)

    def _ready(self) -> bool:
        return self.active and self.raft.listener_caught_up_as_leader()

    def tick(self, now: int) -> None:
        if not self._ready():
            return
        self._fence_expired(now)
        if self.options.auto_leader_rebalance and now >= self._next_rebalance_ms:
            if self._next_rebalance_ms:
                records = rc.elect_preferred(self.current)
                if records:
                    self._on_event(f"preferred leader election moves {len(records)} partitions")
                    self._write(records, now)
            self._next_rebalance_ms = now + self.options.leader_imbalance_check_interval_ms
        if self.idle_interval_ms and now >= self._last_append_ms + self.idle_interval_ms:
            self._write([mr.NoOpRecord()], now)

    def next_deadline_ms(self) -> int | None:
        if not self.active:
            return None
        times = [self._next_rebalance_ms] if self.options.auto_leader_rebalance else []
        if self.idle_interval_ms:
            times.append(self._last_append_ms + self.idle_interval_ms)
        times += [t + self.options.session_timeout_ms for b, t in self._last_contact_ms.items()
                  if b in self.current.brokers and not self.current.brokers[b].fenced]
        return min(times) if times else None

    def leader_hint(self) -> tuple[int, int]:
        leader = self.raft.leader_id()
        return (-1 if leader is None else leader), self.raft.epoch

    # ------------------------------------------------------ cluster control

    def _start_sessions(self, now: int) -> None:
        if self._sessions_start:
            self._sessions_start = False
            self._last_contact_ms = {b: now for b in self.current.brokers}

    def _fence_expired(self, now: int) -> None:
        self._start_sessions(now)
        for broker_id, last in sorted(self._last_contact_ms.items()):
            reg = self.current.brokers.get(broker_id)
            if reg is None or reg.fenced or now < last + self.options.session_timeout_ms:
                continue
            self._on_event(Reached("broker-fenced", f"fencing broker {broker_id}: no heartbeat for "
                                   f"{now - last} ms (session timeout "
                                   f"{self.options.session_timeout_ms} ms)"))
            self._write(self._fence_records(broker_id, reg.broker_epoch), now)

    def _fence_records(self, broker_id: int, broker_epoch: int) -> list:
        change = mr.BrokerRegistrationChangeRecord(broker_id, broker_epoch, mr.FENCE, 0)
        return [change] + rc.broker_unavailable(self._replayed([change]), broker_id, self._unclean)

    def handle_unregister_broker(self, src, req: m.UnregisterBrokerRequest, now: int) -> None:
        """Kafka's ReplicationControlManager.unregisterBroker: the broker leaves every ISR
        and ELR (leadership moves, as when it is fenced) and its registration goes; a broker
        that is still running registers again, as a new one."""
        def plan():
            reg = self.current.brokers.get(req.broker_id)
            if reg is None:
                return [], (m.BROKER_ID_NOT_REGISTERED,
                            f"Broker ID {req.broker_id} is not currently registered"), []
            record = mr.UnregisterBrokerRecord(req.broker_id, reg.broker_epoch)
            changes = rc.broker_unavailable(self._replayed([record]), req.broker_id,
                                            self._unclean, unclean_shutdown=True)
            self._last_contact_ms.pop(req.broker_id, None)
            return changes + [record], (m.NONE, None), [Reached(
                "broker-unregistered", f"unregistering broker {req.broker_id}")]
        self._admin_write(src, now, lambda result: m.UnregisterBrokerResponse(
            req.correlation_id, *result), (m.NOT_CONTROLLER, None), plan)

    def handle_broker_registration(self, src, req: m.BrokerRegistrationRequest, now: int) -> None:
        def answer(error: int, epoch: int = -1):
            return m.BrokerRegistrationResponse(req.correlation_id, error, epoch)
        if not self._ready():
            self.outbox.send(src, answer(m.NOT_CONTROLLER))
            return
        self._start_sessions(now)
        existing = self.current.brokers.get(req.broker_id)
        if existing is not None and existing.incarnation_id == req.incarnation_id:
            epoch = existing.broker_epoch
            self._park_at_last_write(src, lambda: answer(m.NONE, epoch),
                                     lambda _l, _e: answer(m.NOT_CONTROLLER))
            return
        last = self._last_contact_ms.get(req.broker_id)
        if existing is not None and not existing.fenced and last is not None and \
                now < last + self.options.session_timeout_ms:
            self.outbox.send(src, answer(m.DUPLICATE_BROKER_REGISTRATION))
            return
        epoch = self.raft.log.end_offset  # the offset the record will have
        record = mr.RegisterBrokerRecord(req.broker_id, req.incarnation_id, epoch,
                                         tuple(req.endpoints), req.rack, True, False)
        records = [record]
        # a crashed broker may have lost records: it leaves every ELR (planted bug: stays)
        crashed = existing is not None and req.previous_broker_epoch != existing.broker_epoch \
            and self.current.elr_enabled and "elr-keeps-crashed-replica" not in self.bugs
        if existing is not None and (existing.eligible or crashed):
            records += rc.broker_unavailable(self._replayed(records), req.broker_id,
                                             self._unclean, crashed)
        self._last_contact_ms[req.broker_id] = now
        self._on_event(f"broker {req.broker_id} registered with epoch {epoch} "
                       f"(incarnation {req.incarnation_id})")
        offset = self._write(records, now)
        self._park(Deferred(offset, src, lambda: answer(m.NONE, epoch),
                            lambda _l, _e: answer(m.NOT_CONTROLLER)))

    def _registered(self, src, req, answer):
        """The registration a broker request names, or None after answering NOT_CONTROLLER
        (not the ready active controller) or STALE_BROKER_EPOCH (not its registration)."""
        if not self._ready():
            self.outbox.send(src, answer(m.NOT_CONTROLLER))
            return None
        reg = self.current.brokers.get(req.broker_id)
        if reg is None or reg.broker_epoch != req.broker_epoch:
            self.outbox.send(src, answer(m.STALE_BROKER_EPOCH))
            return None
        return reg

    def handle_broker_heartbeat(self, src, req: m.BrokerHeartbeatRequest, now: int) -> None:
        def answer(error: int, caught_up=False, fenced=True, shut_down=False):
            return m.BrokerHeartbeatResponse(req.correlation_id, error, caught_up, fenced, shut_down)
        reg = self._registered(src, req, answer)
        if reg is None:
            return
        self._start_sessions(now)
        self._last_contact_ms[req.broker_id] = now
        caught_up = req.current_metadata_offset >= reg.broker_epoch
        records: list = []
        if req.want_shutdown:
            if not reg.fenced:
                if not reg.in_controlled_shutdown:
                    change = mr.BrokerRegistrationChangeRecord(req.broker_id, reg.broker_epoch,
                                                               mr.NO_FENCING_CHANGE, 1)
                    records = [change] + rc.broker_unavailable(self._replayed([change]),
                                                               req.broker_id, self._unclean)
                    self._on_event(f"broker {req.broker_id} begins controlled shutdown")
                if not rc.leads_any(self._replayed(records), req.broker_id):
                    # Done: fence it and end its session, so its next incarnation registers at once.
                    records.append(mr.BrokerRegistrationChangeRecord(
                        req.broker_id, reg.broker_epoch, mr.FENCE, 0))
                    self._last_contact_ms.pop(req.broker_id, None)
                    self._on_event(f"broker {req.broker_id} finished controlled shutdown: fenced")
        elif reg.fenced and caught_up and not req.want_fence:
            change = mr.BrokerRegistrationChangeRecord(req.broker_id, reg.broker_epoch, mr.UNFENCE, 0)
            records = [change] + rc.elect_leaderless(self._replayed([change]), self._unclean)
            self._on_event(Reached("broker-unfenced", f"unfencing broker {req.broker_id}"))
        elif req.want_fence and not reg.fenced:
            records = self._fence_records(req.broker_id, reg.broker_epoch)
        broker_id = req.broker_id

        def result():
            r = self.committed.brokers.get(broker_id)
            if r is None or r.broker_epoch != req.broker_epoch:
                return answer(m.STALE_BROKER_EPOCH)
            done = r.fenced or (r.in_controlled_shutdown and not rc.leads_any(self.committed, broker_id))
            return answer(m.NONE, caught_up, r.fenced, req.want_shutdown and done)
        on_resign = lambda _l, _e: answer(m.NOT_CONTROLLER)  # noqa: E731
        if records:
            self._park(Deferred(self._write(records, now), src, result, on_resign))
        else:
            self._park_at_last_write(src, result, on_resign)

    # ------------------------------------------------------ replication control

    def _admin_write(self, src, now: int, answer, refused, plan, validate_only=False) -> None:
        """The shape every admin request to the controller shares: refused whole
        (``answer(refused)``, NOT_CONTROLLER) unless this controller leads and has caught
        up; else ``plan()`` gives (records, per-resource results, events to report), and
        ``answer(results)`` goes out once the records are committed, or, where there are
        none or only validation was asked, once everything written before them is."""
        if not self._ready():
            self.outbox.send(src, answer(refused))
            return
        records, results, events = plan()
        reply = lambda: answer(results)  # noqa: E731
        on_resign = lambda _l, _e: answer(refused)  # noqa: E731
        if validate_only or not records:
            self._park_at_last_write(src, reply, on_resign)
            return
        for event in events:
            self._on_event(event)
        self._park(Deferred(self._write(records, now), src, reply, on_resign))

    def handle_alter_configs(self, src, req: m.AlterConfigsRequest, now: int) -> None:
        def plan():
            records, results = alter_configs(self.current, req.resources, req.incremental,
                                             self.options.group_config_bounds)
            return records, results, ["altering configs of " + ", ".join(
                sorted({r.resource_name for r in records}))]
        self._admin_write(
            src, now, lambda rows: m.AlterConfigsResponse(req.correlation_id, tuple(rows)),
            [(r[0], r[1], m.NOT_CONTROLLER, None) for r in req.resources], plan, req.validate_only)

    def handle_elect_leaders(self, src, req: m.ElectLeadersRequest, now: int) -> None:
        def plan():
            records, results = rc.elect_leaders(self.current, req.election,
                                                None if req.every else req.partitions,
                                                "preferred-election-ignores-isr" in self.bugs)
            return records, results, [f"{req.election.lower()} leader election moves "
                                      f"{len(records)} partition(s)"]
        self._admin_write(
            src, now, lambda rows: m.ElectLeadersResponse(req.correlation_id, tuple(rows)),
            [(t, p, m.NOT_CONTROLLER, None) for t, p in req.partitions], plan)

    def handle_alter_reassignments(self, src, req: m.AlterReassignmentsRequest, now: int) -> None:
        def plan():
            records, results = reassignment.alter_reassignments(
                self.current, [(t, p, None if cancel else replicas)
                               for t, p, cancel, replicas in req.partitions],
                req.allow_rf_change, "reassign-skips-catch-up" in self.bugs)
            return records, results, [f"reassignment changes {len(records)} partition(s)"]
        self._admin_write(
            src, now, lambda rows: m.AlterReassignmentsResponse(req.correlation_id, tuple(rows)),
            [(t, p, m.NOT_CONTROLLER, None) for t, p, _, _ in req.partitions], plan)

    def handle_list_reassignments(self, src, req: m.ListReassignmentsRequest, now: int) -> None:
        """Answered from the committed image once everything written before is committed."""
        def answer(error: int):
            rows = () if error != m.NONE else tuple(reassignment.list_reassignments(
                self.committed, None if req.every else req.partitions))
            return m.ListReassignmentsResponse(req.correlation_id, error, rows)
        if not self._ready():
            self.outbox.send(src, answer(m.NOT_CONTROLLER))
            return
        self._park_at_last_write(src, lambda: answer(m.NONE),
                                 lambda _l, _e: answer(m.NOT_CONTROLLER))

    def handle_update_features(self, src, req: m.UpdateFeaturesRequest, now: int) -> None:
        def plan():
            records, error, message = features.update_features(
                self.current, req.updates, self.options.min_insync_replicas,
                self.raft.kraft_version, lambda level: self.raft.upgrade_kraft_version(
                    level, req.validate_only, now), self.bugs)
            return records, (error, message), [Reached("feature-level-changed", (
                "features finalized: " + ", ".join(f"{r.name}={r.feature_level}" for r in records
                                                   if isinstance(r, mr.FeatureLevelRecord))))]
        self._admin_write(
            src, now, lambda result: m.UpdateFeaturesResponse(req.correlation_id, *result),
            (m.NOT_CONTROLLER, None), plan, req.validate_only)

    def handle_alter_partition(self, src, req: m.AlterPartitionRequest, now: int) -> None:
        def answer(error: int):
            reg = self.committed.partition(req.topic, req.partition)
            if error != m.NONE or reg is None:
                return m.AlterPartitionResponse(req.correlation_id, error, req.topic, req.partition,
                                                -1, -1, (), -1)
            return m.AlterPartitionResponse(req.correlation_id, m.NONE, req.topic, req.partition,
                                            reg.leader, reg.leader_epoch, reg.isr,
                                            reg.partition_epoch)
        if not self._ready():
            self.outbox.send(src, answer(m.NOT_CONTROLLER))
            return
        error, records = rc.alter_partition(self.current, req)
        on_resign = lambda _l, _e: answer(m.NOT_CONTROLLER)  # noqa: E731
        if records:  # NEW_LEADER_ELECTED comes with records: it is answered once they commit
            self._park(Deferred(self._write(records, now), src, lambda: answer(error), on_resign))
        elif error != m.NONE:
            self.outbox.send(src, answer(error))
        else:
            self._park_at_last_write(src, lambda: answer(m.NONE), on_resign)

    def handle_allocate_producer_ids(self, src, req: m.AllocateProducerIdsRequest, now: int) -> None:
        def answer(error: int, start: int = -1, length: int = 0):
            return m.AllocateProducerIdsResponse(req.correlation_id, error, start, length)
        reg = self._registered(src, req, answer)
        if reg is None:
            return
        start = self.current.next_producer_id
        offset = self._write([mr.ProducerIdsRecord(req.broker_id, req.broker_epoch,
                                                   start + PRODUCER_ID_BLOCK)], now)
        self._park(Deferred(offset, src, lambda: answer(m.NONE, start, PRODUCER_ID_BLOCK),
                            lambda _l, _e: answer(m.NOT_CONTROLLER)))

    # ------------------------------------------------------ register service

    def handle_register(self, src, req: m.RegisterRequest, now: int) -> None:
        leader, epoch = self.leader_hint()

        def reply(outcome: str, error: int = m.NONE, value=None) -> m.RegisterResponse:
            return m.RegisterResponse(req.request_id, outcome, error, value, leader, epoch)

        def resign(outcome: str):
            return lambda leader_id, leader_epoch: m.RegisterResponse(
                req.request_id, outcome, m.NOT_CONTROLLER, None, leader_id, leader_epoch)
        bad = self._validate(req)
        if bad:
            self.outbox.send(src, reply("fail", m.INVALID_REQUEST))
            return
        if not self._ready():
            self.outbox.send(src, reply("fail", m.NOT_CONTROLLER))
            return
        key = req.key
        if req.op == "read":
            if "read-without-barrier" in self.bugs:
                self.outbox.send(src, reply("ok", value=self.current.registers.get(key)))
                return
            if LEASE_READS & self.bugs and self.raft.lease_holds(now):
                self.outbox.send(src, reply("ok", value=self.committed.registers.get(key)))
                return
            if self._read_marker is None or self._read_marker != self.last_written_offset:
                self._read_marker = self._write([mr.NoOpRecord()], now)
            self._park(Deferred(self._read_marker, src,
                                lambda: reply("ok", value=self.committed.registers.get(key)),
                                resign("fail")))
            return
        if req.op == "cas" and self.current.registers.get(key) != req.expected:
            self._park_at_last_write(src, lambda: reply("fail"), resign("fail"))
            return
        offset = self._write([mr.RegisterValueRecord(key, req.value)], now)
        if "reply-before-commit" in self.bugs:
            self.outbox.send(src, reply("ok"))
            return
        # A write whose record was appended may still commit under the next leader.
        self._park(Deferred(offset, src, lambda: reply("ok"), resign("unknown")))

    @staticmethod
    def _validate(req: m.RegisterRequest) -> str | None:
        if req.op not in ("read", "write", "cas"):
            return f"unknown op {req.op!r}"
        if req.op in ("write", "cas") and not isinstance(req.value, int):
            return "value must be an integer"
        return None

