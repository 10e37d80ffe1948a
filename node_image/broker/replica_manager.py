"""ReplicaManager: this broker's partitions, replication between brokers, ISR changes.

Theory of operation
-------------------
The broker hands every published metadata image (and what changed) to
:meth:`apply_image`; partitions whose replica set names this broker are
opened (``Partition``) and moved to the role the image gives them.

Followers fetch from each leader broker with one ``ReplicaFetchRequest``
covering every partition they follow there, one in flight per leader. The
leader answers each partition with records (up to its LEO), its HW, or the
epoch and end offset where the follower's log diverges; with nothing to send
it parks the request up to ``replica.fetch.wait.max.ms`` and answers early
when one of the partitions gets an append.

The leader sends AlterPartition to the active controller to shrink the ISR
(followers not caught up for ``replica.lag.time.max.ms``) or expand it
(followers caught up to the HW and to the start of the leader's epoch).

``hw_changed`` collects partitions whose HW moved since the caller last
looked; ``KafkaApis`` completes parked produce and fetch requests from it.

The HW of every partition is checkpointed to ``replication-offset-checkpoint``
(Kafka's file and format) every ``replica.high.watermark.checkpoint.interval.ms``
and on shutdown; a restarted replica starts from min(checkpoint, LEO).
"""
from __future__ import annotations

import json
import os
from typing import Callable

from .. import broker_configs
from .. import messages as m
from ..fs import FileSystem, write_durably
from ..log import OffsetAndEpoch
from ..metadata_image import MetadataDelta, MetadataImage
from ..records import CorruptBatchError
from .partition import Partition

HW_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"  # as Kafka's CleanShutdownFileHandler
ALTER_PARTITION_TIMEOUT_MS = 5000


# AlterPartition errors after which the controller surely did not apply the change: the
# committed ISR is the truth again (Kafka resets its pending state on these alone).
NOT_APPLIED = frozenset({m.INELIGIBLE_REPLICA})


def touched_partitions(delta: MetadataDelta | None, image: MetadataImage) -> set | None:
    """The partitions a broker follows again after ``delta`` made ``image`` (None: all).
    A delta that changes configs or brokers touches every partition (min ISR or a broker's
    state may matter to any), and always the ones it changed itself, so that a topic it
    deletes is deleted here too although the image no longer names it."""
    if delta is None:
        return None
    changed = set(delta.changed_partitions)
    if delta.changed_configs or delta.changed_brokers:
        changed |= {(t, p) for t, ti in image.topics.items() for p in ti.partitions}
    return changed


class ReplicaManager:
    def __init__(self, node_id: int, log_dir: str, fs: FileSystem, options, outbox: list,
                 next_correlation: Callable[[], int], on_event: Callable[[str], None],
                 bugs: frozenset[str] = frozenset(),
                 wall_clock: Callable[[], int] | None = None) -> None:
        self.node_id = node_id
        self.bugs = bugs
        # Replica lag is measured on the wall clock, as Kafka's (Time.milliseconds() in
        # Partition.updateFollowerFetchState and getOutOfSyncReplicas): a leader whose clock
        # jumps forward finds every follower lagging. Without one, on ``now``.
        self._wall_clock = wall_clock
        self.log_dir = log_dir
        self.fs = fs
        self.options = options  # node_image.config.BrokerConfig
        self.outbox = outbox
        self._next_correlation = next_correlation
        self._on_event = on_event
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.image = MetadataImage()
        self.broker_epoch = -1
        self.controller_id: int | None = None
        self.hw_changed: set[tuple[str, int]] = set()
        self.appended: set[tuple[str, int]] = set()
        self.role_changed = False
        # partitions whose topic the metadata deleted since the caller last looked (held here
        # or not): the group coordinator drops their committed offsets
        self.topics_deleted: set[tuple[str, int]] = set()
        # and the ids of those topics (known from the image before): their share state goes
        self.topic_ids_deleted: set[str] = set()
        self._checkpoint = self._read_hw_checkpoint()
        self._next_checkpoint_ms = 0
        self._fetch_in_flight: dict[int, tuple[int, int]] = {}  # leader -> (correlation id, deadline)
        self._fetch_backoff: dict[int, int] = {}  # leader -> do not fetch before
        self._parked_fetches: list[tuple[object, m.ReplicaFetchRequest, int]] = []
        self._alter_in_flight: dict[int, tuple[tuple[str, int], int]] = {}  # corr -> (partition, deadline)
        self._next_isr_check_ms = 0

    # ------------------------------------------------------------ HW checkpoint

    def _checkpoint_path(self) -> str:
        return os.path.join(self.log_dir, HW_CHECKPOINT)

    def _read_hw_checkpoint(self) -> dict[tuple[str, int], int]:
        path = self._checkpoint_path()
        if not self.fs.exists(path):
            return {}
        try:
            lines = self.fs.read(path).decode().splitlines()
            if lines[0] != "0" or int(lines[1]) != len(lines) - 2:
                raise ValueError("bad version or count")
            out = {}
            for line in lines[2:]:
                topic, part, hw = line.rsplit(" ", 2)
                out[(topic, int(part))] = int(hw)
            return out
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            # HWs are a lower bound only; starting from 0 is safe, it only delays reads.
            self._on_event(f"ignoring unreadable {path} ({exc}); high watermarks restart at 0")
            return {}

    def take_clean_shutdown(self) -> int:
        """The broker epoch the last incarnation wrote after flushing every log on a clean
        shutdown, or -1 (it crashed: unflushed records may be gone); the file is removed, so
        a crash of this incarnation reads as one."""
        path = os.path.join(self.log_dir, CLEAN_SHUTDOWN)
        if not self.fs.exists(path):
            return -1
        try:
            epoch = json.loads(self.fs.read(path))["BrokerEpoch"]
            epoch = epoch if type(epoch) is int else -1
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            self._on_event(f"ignoring unreadable {path} ({exc}): an unclean shutdown")
            epoch = -1
        self.fs.remove(path)
        self.fs.fsync_dir(self.log_dir)
        return epoch

    def checkpoint_hws(self) -> None:
        # Partitions not opened yet (before the first published image) keep their entries.
        hws = {**self._checkpoint, **{p.key: p.high_watermark for p in self.partitions.values()}}
        if hws == self._checkpoint:
            return
        text = f"0\n{len(hws)}\n" + "".join(f"{t} {p} {hw}\n" for (t, p), hw in sorted(hws.items()))
        write_durably(self.fs, self._checkpoint_path(), text.encode())
        self._checkpoint = hws

    # ------------------------------------------------------------ metadata

    def setting(self, key: str):
        """A broker setting the node acts on: its dynamic value (this broker's, else the
        cluster's default), else server.properties' (:mod:`..broker_configs`)."""
        return broker_configs.setting(self.image, self.node_id, self.options, key)

    def min_isr(self, topic: str) -> int:
        value = self.image.topic_config(topic).get("min.insync.replicas")
        return int(value) if value is not None else self.setting("min.insync.replicas")

    def flush_messages(self, topic: str) -> int:
        value = self.image.topic_config(topic).get("flush.messages")
        return int(value) if value is not None else self.setting("log.flush.interval.messages")

    def apply_image(self, image: MetadataImage, changed: set | None, now: int) -> None:
        """Follow the image. ``changed``: the partitions that changed (None: all, and the
        ones this replica holds that the image no longer has, deleted while it was away)."""
        old, self.image = self.image, image
        if old is not None:  # a topic deleted, or deleted and made again under its name
            self.topic_ids_deleted |= ({t.topic_id for t in old.topics.values()}
                                       - {t.topic_id for t in image.topics.values()})
        keys = changed if changed is not None else {
            (t, p) for t, ti in image.topics.items() for p in ti.partitions} | set(self.partitions)
        for key in sorted(keys):
            reg = image.partition(*key)
            if reg is None:
                self.topics_deleted.add(key)
                self._delete(key, "deleted with its topic")
                continue
            if self.node_id not in reg.replicas:
                # reassigned away (KIP-455): the replica's data goes, as Kafka's stray logs do
                self._delete(key, "no longer a replica (reassigned), its log deleted")
                continue
            part = self.partitions.get(key)
            if part is None:
                part = self.partitions[key] = Partition(
                    self.node_id, key[0], key[1], self.fs, self.log_dir,
                    self.options.segment_bytes, self._checkpoint.get(key, 0), self._on_event,
                    hw_ignores_isr="hw-ignores-isr" in self.bugs,
                    skip_fsync="skip-fsync" in self.bugs,
                    topic_id=image.topics[key[0]].topic_id)
            if part.apply_registration(reg, self._lag_clock(now)) is not None:
                self.role_changed = True
                self.hw_changed.add(key)
            if part.is_leader and part.maybe_increment_hw(self.min_isr(key[0])):
                self.hw_changed.add(key)

    def _delete(self, key: tuple[str, int], why: str) -> None:
        """The partition's topic was deleted or this broker is no longer one of its replicas:
        its data goes, and requests parked on it are answered now (here it is gone)."""
        part = self.partitions.pop(key, None)
        if part is None:
            return
        part.delete()
        self._checkpoint.pop(key, None)
        self.role_changed = True
        self.hw_changed.add(key)
        self._on_event(f"{key[0]}-{key[1]}: {why}")

    def leader_partition(self, topic: str, partition: int) -> Partition | None:
        p = self.partitions.get((topic, partition))
        return p if p is not None and p.is_leader else None

    # ------------------------------------------------------------ leader side

    def append(self, part: Partition, batch: bytes) -> object:
        header = part.append_as_leader(batch, self.flush_messages(part.topic))
        self.appended.add(part.key)
        if part.maybe_increment_hw(self.min_isr(part.topic)):
            self.hw_changed.add(part.key)
        return header

    def append_outcome(self, key: tuple[str, int], leader_epoch: int, required_end: int,
                       now: int, deadline_ms: int) -> int | None:
        """Where an acks=all append made as leader in ``leader_epoch`` stands: None while it
        waits for the HW to reach ``required_end``, NONE once committed, else the error a
        producer gets (leadership moved, the ISR shrank below the minimum, time ran out)."""
        part = self.leader_partition(*key)
        if part is None or part.leader_epoch != leader_epoch:
            return m.NOT_LEADER_OR_FOLLOWER
        if part.high_watermark >= required_end:
            return m.NONE
        if len(part.isr) < self.min_isr(key[0]):
            return m.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        if now >= deadline_ms:
            return m.REQUEST_TIMED_OUT
        return None

    def handle_replica_fetch(self, src, req: m.ReplicaFetchRequest, now: int) -> None:
        rows, has_data, all_valid = self._serve_fetch(req, now)
        if has_data or not all_valid or req.max_wait_ms <= 0:
            self.outbox.send(src, m.ReplicaFetchResponse(req.correlation_id, m.NONE, tuple(rows)))
        else:
            wait = min(req.max_wait_ms, self.options.replica_fetch_wait_max_ms)
            self._parked_fetches.append((src, req, now + wait))

    def _serve_fetch(self, req: m.ReplicaFetchRequest, now: int):
        rows = []
        has_data = False
        all_valid = True
        for topic, partition, leader_epoch, fetch_offset, last_fetched_epoch, log_start \
                in req.partitions:
            part = self.partitions.get((topic, partition))
            error = m.NONE
            if part is None or not part.is_leader:
                error = m.NOT_LEADER_OR_FOLLOWER
            elif leader_epoch < part.leader_epoch:
                error = m.FENCED_LEADER_EPOCH
            elif leader_epoch > part.leader_epoch:
                error = m.UNKNOWN_LEADER_EPOCH
            elif req.replica_id not in part.remote:
                error = m.NOT_LEADER_OR_FOLLOWER
            elif fetch_offset < part.log.start_offset:
                error = m.OFFSET_OUT_OF_RANGE
            if error == m.OFFSET_OUT_OF_RANGE:  # the follower restarts at the leader's start
                all_valid = False
                rows.append((topic, partition, error, part.high_watermark, part.log.start_offset,
                             -1, -1, b""))
                continue
            if error != m.NONE:
                all_valid = False
                rows.append((topic, partition, error, -1, -1, -1, -1, b""))
                continue
            status, oe = part.log.validate_offset_and_epoch(fetch_offset, last_fetched_epoch)
            if status == "diverging" and "skip-epoch-truncation" not in self.bugs:
                all_valid = False
                rows.append((topic, partition, m.NONE, part.high_watermark, part.log.start_offset,
                             oe.epoch, oe.offset, b""))
                continue
            part.remote[req.replica_id].update_fetch_state(fetch_offset, part.log.end_offset,
                                                           self._lag_clock(now))
            part.remote[req.replica_id].log_start_offset = log_start
            part.remote[req.replica_id].broker_epoch = req.broker_epoch
            if part.maybe_increment_hw(self.min_isr(topic)):
                self.hw_changed.add(part.key)
            data = b""
            if fetch_offset < part.log.end_offset:
                data = part.log.read_range(fetch_offset, self.options.replica_fetch_max_bytes,
                                           part.log.end_offset)
                has_data = has_data or bool(data)
            rows.append((topic, partition, m.NONE, part.high_watermark, part.log.start_offset,
                         -1, -1, data))
        return rows, has_data, all_valid

    def complete_parked_fetches(self, now: int) -> None:
        if not self._parked_fetches:
            return
        keep = []
        for src, req, deadline in self._parked_fetches:
            touched = any((t, p) in self.appended or (t, p) in self.hw_changed
                          for t, p, *_ in req.partitions)
            if touched or now >= deadline or self.role_changed:
                rows, _, _ = self._serve_fetch(req, now)
                self.outbox.send(src, m.ReplicaFetchResponse(req.correlation_id, m.NONE,
                                                                tuple(rows)))
            else:
                keep.append((src, req, deadline))
        self._parked_fetches = keep

    def delete_records(self, topic: str, partition: int, offset: int) -> tuple[int, int]:
        """DeleteRecords of one partition this broker leads: (error, the offset asked for,
        -1 meaning the high watermark); the answer waits for ``low_watermark``."""
        part = self.leader_partition(topic, partition)
        if part is None:
            known = self.image.partition(topic, partition) is not None
            return (m.NOT_LEADER_OR_FOLLOWER if known else m.UNKNOWN_TOPIC_OR_PARTITION), -1
        return part.delete_records(offset)

    def low_watermark(self, topic: str, partition: int) -> int | None:
        """The lowest log start of the partition's live replicas (Kafka's low watermark), or
        None where this broker no longer leads it."""
        part = self.leader_partition(topic, partition)
        if part is None:
            return None
        live = {b for b, reg in self.image.brokers.items() if not reg.fenced}
        return part.low_watermark(live)

    def _lag_clock(self, now: int) -> int:
        return self._wall_clock() if self._wall_clock is not None else now

    def _maybe_alter_isr(self, now: int, shrink: bool = True) -> None:
        """Propose ISR changes: followers that did not catch up for replica.lag.time.max.ms
        out (``shrink``: on the timer only, every half of it, as Kafka's isr-expiration
        task), else caught-up followers outside the ISR in."""
        if self.controller_id is None or self.broker_epoch < 0:
            return
        for part in self.partitions.values():
            if not part.is_leader:
                continue
            if part.pending_isr is not None:
                if now >= part.pending_deadline_ms:
                    # No answer, or one that leaves the outcome unknown: the same proposal
                    # again, as Kafka's AlterPartitionManager retries until it hears. The ISR
                    # stays at most the proposal until then (the image, when it moves, decides).
                    self._propose_isr(part, part.pending_isr, now)
                continue
            new_isr = None
            out = part.out_of_sync_replicas(self._lag_clock(now),
                                            self.options.replica_lag_time_max_ms) if shrink else []
            if out:
                new_isr = tuple(b for b in part.isr if b not in out)
                self._on_event(f"{part.topic}-{part.partition}: shrinking ISR {list(part.isr)} "
                               f"-> {list(new_isr)} (no catch-up for "
                               f"{self.options.replica_lag_time_max_ms} ms)")
            else:
                # KIP-903: only a follower whose fetches come from its current registration
                joining = [b for b in part.caught_up_outside_isr(
                               self._lag_clock(now), self.options.replica_lag_time_max_ms)
                           if (reg := self.image.brokers.get(b)) is not None and reg.eligible
                           and part.remote[b].broker_epoch == reg.broker_epoch]
                if "isr-expands-only-to-min" in self.bugs:  # planted bug
                    joining = sorted(joining)[:max(0, self.min_isr(part.topic) - len(part.isr))]
                if joining:
                    new_isr = part.isr + tuple(sorted(joining))
                    self._on_event(f"{part.topic}-{part.partition}: expanding ISR "
                                   f"{list(part.isr)} -> {list(new_isr)}")
            if new_isr is not None:
                self._propose_isr(part, new_isr, now)

    def _propose_isr(self, part, new_isr: tuple, now: int) -> None:
        corr = self._next_correlation()
        part.pending_isr = new_isr
        part.pending_deadline_ms = now + ALTER_PARTITION_TIMEOUT_MS
        self._alter_in_flight[corr] = (part.key, part.pending_deadline_ms)
        self.outbox.send(self.controller_id, m.AlterPartitionRequest(
            corr, self.node_id, self.broker_epoch, part.topic, part.partition,
            part.leader_epoch, new_isr, part.partition_epoch))

    def handle_alter_partition_response(self, resp: m.AlterPartitionResponse, now: int) -> None:
        entry = self._alter_in_flight.pop(resp.correlation_id, None)
        if entry is None:
            return
        part = self.partitions.get(entry[0])
        if part is None or part.pending_isr is None:
            return
        if resp.error != m.NONE:
            name = m.ERROR_NAMES.get(resp.error, resp.error)
            if resp.error == m.NEW_LEADER_ELECTED:
                self._on_event(f"{part.topic}-{part.partition}: the ISR change completed a "
                               "reassignment that moved leadership away (NEW_LEADER_ELECTED); "
                               "the metadata will say to whom")
                return
            if resp.error in NOT_APPLIED:
                self._on_event(f"{part.topic}-{part.partition}: AlterPartition failed: {name}")
                part.pending_isr = None
                return
            # The controller may yet have applied it (NOT_CONTROLLER: it wrote the change and
            # resigned before the commit, which its successor may make): as Kafka's
            # Partition, the pending ISR stays, and with it the maximal ISR the high
            # watermark waits for, until the controller answers again or the image moves.
            self._on_event(f"{part.topic}-{part.partition}: AlterPartition failed: {name} "
                           f"(outcome unknown: ISR at most {list(part.maximal_isr)} until "
                           "the controller says)")
            return
        if resp.leader_epoch != part.leader_epoch or resp.partition_epoch < part.partition_epoch:
            # As Kafka's Partition: an answer of another leader epoch (the change bumped it:
            # the expansion completed a reassignment that removed a replica) or of an older
            # partition epoch is not applied. The pending ISR, and with it the maximal ISR
            # the high watermark waits for, stays until the metadata brings the partition's
            # state: dropping it here let the high watermark pass the replica being added,
            # which the next epoch's ISR then held below it.
            return
        if resp.partition_epoch > part.partition_epoch:
            part.isr = tuple(resp.isr)
            part.partition_epoch = resp.partition_epoch
        part.pending_isr = None
        if part.maybe_increment_hw(self.min_isr(part.topic)):
            self.hw_changed.add(part.key)

    # ------------------------------------------------------------ follower side

    def _send_fetches(self, now: int) -> None:
        for leader, (_, deadline) in list(self._fetch_in_flight.items()):
            if now >= deadline:
                del self._fetch_in_flight[leader]  # no answer: fetch again
        for leader, until in list(self._fetch_backoff.items()):
            if now >= until:
                del self._fetch_backoff[leader]
        by_leader: dict[int, list] = {}
        for part in self.partitions.values():
            if not part.is_leader and part.leader >= 0 and part.leader != self.node_id:
                by_leader.setdefault(part.leader, []).append(part)
        for leader, parts in by_leader.items():
            if leader in self._fetch_in_flight or leader in self._fetch_backoff:
                continue
            corr = self._next_correlation()
            rows = tuple((p.topic, p.partition, p.leader_epoch, p.log.end_offset,
                          p.log.last_fetched_epoch, p.log.start_offset) for p in parts)
            wait = self.options.replica_fetch_wait_max_ms
            self._fetch_in_flight[leader] = (corr, now + wait + self.options.rpc_timeout_ms)
            self.outbox.send(leader, m.ReplicaFetchRequest(corr, self.node_id, self.broker_epoch,
                                                              wait, rows))

    def handle_replica_fetch_response(self, src: int, resp: m.ReplicaFetchResponse, now: int) -> None:
        flight = self._fetch_in_flight.get(src)
        if flight is None or flight[0] != resp.correlation_id:
            return
        del self._fetch_in_flight[src]
        backoff = False
        for topic, partition, error, hw, start, div_epoch, div_offset, data in resp.partitions:
            part = self.partitions.get((topic, partition))
            if part is None or part.is_leader or part.leader != src:
                continue
            if error == m.OFFSET_OUT_OF_RANGE and start > part.log.end_offset:
                part.start_at(start)  # records deleted past all this follower has
                continue
            if error != m.NONE:
                backoff = True  # metadata will move us on
                continue
            if div_epoch >= 0:
                part.truncate_to_diverging(OffsetAndEpoch(div_offset, div_epoch))
                continue
            try:
                part.append_as_follower(data, hw, self.flush_messages(topic))
                part.follow_log_start(start)
            except CorruptBatchError as exc:
                self._on_event(f"{topic}-{partition}: leader {src} sent a corrupt batch: {exc}")
                backoff = True
        if backoff:
            self._fetch_backoff[src] = now + self.options.retry_backoff_ms * 5

    # ------------------------------------------------------------ timers

    def poll(self, now: int) -> None:
        for corr, (_key, deadline) in list(self._alter_in_flight.items()):
            if now >= deadline:
                del self._alter_in_flight[corr]
        if now >= self._next_isr_check_ms:
            self._maybe_alter_isr(now)
            self._next_isr_check_ms = now + max(self.options.replica_lag_time_max_ms // 2, 10)
        else:
            # Expansion is checked on every input: a follower that caught up joins at once.
            self._maybe_expand_only(now)
        self._send_fetches(now)
        self.complete_parked_fetches(now)
        if now >= self._next_checkpoint_ms:
            self.checkpoint_hws()
            self._next_checkpoint_ms = now + self.options.hw_checkpoint_interval_ms

    def _maybe_expand_only(self, now: int) -> None:
        lag_now, lag_max = self._lag_clock(now), self.options.replica_lag_time_max_ms
        if any(p.is_leader and p.pending_isr is None and p.caught_up_outside_isr(lag_now, lag_max)
               for p in self.partitions.values()):
            # expansion only: shrinking here too, on every input, took a follower that had
            # just joined (in sync by the high watermark, not yet caught up with the log end)
            # out again at once, and in again on the next input, several times a second
            self._maybe_alter_isr(now, shrink=False)

    def next_deadline_ms(self) -> int:
        times = [self._next_isr_check_ms, self._next_checkpoint_ms]
        times += [d for _, _, d in self._parked_fetches]
        times += [d for _, d in self._fetch_in_flight.values()]
        times += list(self._fetch_backoff.values())
        return min(times)

    def shutdown(self, broker_epoch: int = -1) -> None:
        for part in self.partitions.values():
            part.log.flush()
        self.checkpoint_hws()
        if broker_epoch >= 0:  # every log is on disk: the next incarnation starts clean
            write_durably(self.fs, os.path.join(self.log_dir, CLEAN_SHUTDOWN),
                          b'{"version":0,"BrokerEpoch":%d}' % broker_epoch)
