"""ReplicationControlManager and PartitionChangeBuilder: topics, partitions, ISR and elections.

Theory of operation
-------------------
Everything here is a pure function of the controller's current
:class:`~node_image.metadata_image.MetadataImage`: it returns the records a
change needs (TopicRecord, PartitionRecord, PartitionChangeRecord,
ConfigRecord), which the controller replays and appends. Nothing here
writes or remembers anything.

Rules (Kafka's ReplicationControlManager and PartitionChangeBuilder)
-------------------------------------------------------------------
- New topics: replicas placed by striping over the unfenced brokers sorted
  by id, starting at a position derived from the topic name and shifting by
  one per partition; the first replica leads; the ISR is all replicas.
- A leader must be an eligible broker (registered, unfenced, not in
  controlled shutdown). ONLINE election keeps an eligible leader that is in
  the target ISR, else picks the first eligible replica (in replica order)
  of the target ISR. PREFERRED election moves leadership to the first
  replica when it is eligible and in the ISR. UNCLEAN election, only when
  the topic sets ``unclean.leader.election.enable=true``, may pick an
  eligible replica outside the ISR; the ISR is then just that leader.
- When no leader can be elected the leader is NO_LEADER (-1) and the ISR
  keeps its last member (never empty), so that the broker that holds
  every committed record is the one that can come back as leader.
- Eligible leader replicas (KIP-966, on at feature level
  ``eligible.leader.replicas.version`` 1): while the ISR is below the
  topic's min.insync.replicas the high watermark cannot advance, so a
  member leaving the ISR then still holds everything below it: it joins
  the ELR (the ISR may then empty). With an empty ISR the first eligible
  ELR member in replica order is elected cleanly and becomes the ISR. A
  broker that restarted after an unclean shutdown (it may have lost
  unflushed records) leaves the ELR. An ISR at min.insync.replicas, or an
  unclean election, clears the ELR. The leader a partition had when its
  ISR emptied (or, leaderless then, its last ISR member) is kept as its
  last known ELR (Kafka's balanced recovery):
  with the ISR and the ELR both empty it is elected, as an unclean
  election, once eligible (it may have lost records, but the partition is
  available again); a leader clears it.
- A change of leader bumps the leader epoch; every change bumps the
  partition epoch (done by replay in ``metadata_image``).
- AlterPartition is accepted only from the current leader with the current
  leader epoch and partition epoch and a valid broker epoch; the new ISR
  must be within the replicas, contain the leader, and every member added
  must be eligible.
"""
from __future__ import annotations

import hashlib
import re
import uuid
import zlib
from dataclasses import dataclass

from . import messages as m
from . import metadata_records as mr
from .metadata_image import CLUSTER, TOPIC_RESOURCE, MetadataImage, PartitionRegistration
from .config_control import check_topic_config

LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def legal_topic_name(name: str) -> bool:
    """Kafka's topic name rule: 1-249 of a-z A-Z 0-9 . _ -, and neither "." nor ".."."""
    return bool(LEGAL_TOPIC.match(name)) and name not in (".", "..")

ONLINE, PREFERRED, UNCLEAN = "ONLINE", "PREFERRED", "UNCLEAN"


def topic_id_for(name: str, salt: int) -> str:
    """A topic id (Kafka's are random UUIDs); derived so that the controller stays deterministic."""
    digest = hashlib.sha256(f"{name}/{salt}".encode()).digest()[:16]
    return str(uuid.UUID(bytes=digest))


def eligible(image: MetadataImage, broker_id: int) -> bool:
    b = image.brokers.get(broker_id)
    return b is not None and b.eligible


def unclean_allowed(image: MetadataImage, topic: str) -> bool:
    """The topic's ``unclean.leader.election.enable``, else the cluster's dynamic default
    (as Kafka's controller reads it)."""
    key = "unclean.leader.election.enable"
    value = image.topic_config(topic).get(key) or image.configs.get(CLUSTER, {}).get(key)
    return value == "true"


@dataclass(frozen=True, slots=True)
class TopicResult:
    name: str
    error: int
    message: str | None
    topic_id: str | None = None  # CreateTopics: the new topic's id, partitions and
    partitions: int = -1         # replication factor (defaults applied)
    replication_factor: int = -1


def create_topics(image: MetadataImage, topics, salt: int,
                  default_partitions: int = 1,
                  default_replication_factor: int = 1) -> tuple[list, list[TopicResult]]:
    """Records for the valid topics in ``topics`` (rows of name, partitions, replication factor,
    configs) and a result per topic. ``salt`` (the offset the records will have) makes ids unique."""
    records: list = []
    results: list[TopicResult] = []
    usable = sorted(b for b, reg in image.brokers.items() if reg.eligible)
    seen: set[str] = set()
    for name, num_partitions, replication_factor, configs, *manual in topics:
        def fail(code: int, message: str) -> None:
            results.append(TopicResult(name, code, message))
        assignments = tuple(manual[0]) if manual else ()
        if not legal_topic_name(name):
            fail(m.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is not legal "
                 "(1-249 of a-z A-Z 0-9 . _ -)")
            continue
        if name in image.topics or name in seen:
            fail(m.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
            continue
        placed = None
        if assignments:
            placed, why = _manual_assignment(image, num_partitions, replication_factor,
                                             assignments)
            if placed is None:
                fail(*why)
                continue
            num_partitions, replication_factor = len(placed), len(placed[0])
        partitions = default_partitions if num_partitions == -1 else num_partitions
        rf = default_replication_factor if replication_factor == -1 else replication_factor
        if partitions <= 0:
            fail(m.INVALID_PARTITIONS, f"number of partitions must be positive, got {partitions}")
            continue
        if rf <= 0:
            fail(m.INVALID_REPLICATION_FACTOR, f"replication factor must be positive, got {rf}")
            continue
        if rf > len(usable) and placed is None:
            fail(m.INVALID_REPLICATION_FACTOR,
                 f"replication factor {rf} is larger than the {len(usable)} available brokers")
            continue
        bad = None
        for item in configs:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
                    and isinstance(item[1], str)):
                bad = f"config entry {item!r} is not (name, value)"
                break
            bad = check_topic_config(*item, rf)
            if bad:
                break
        if bad:
            fail(m.INVALID_CONFIG, bad)
            continue
        seen.add(name)
        topic_id = topic_id_for(name, salt)
        results.append(TopicResult(name, m.NONE, None, topic_id, partitions, rf))
        records.append(mr.TopicRecord(name, topic_id))
        start = zlib.crc32(name.encode()) % len(usable) if usable else 0
        for p in range(partitions):
            if placed is not None:  # the ISR: the replicas that may lead, first one leading
                replicas = placed[p]
                isr = tuple(b for b in replicas if eligible(image, b))
            else:
                replicas = isr = tuple(usable[(start + p + i) % len(usable)] for i in range(rf))
            records.append(mr.PartitionRecord(p, topic_id, replicas, isr, isr[0], 0, 0))
        for key, value in configs:
            records.append(mr.ConfigRecord(TOPIC_RESOURCE, name, key, value))
    return records, results


def _manual_assignment(image: MetadataImage, num_partitions: int, replication_factor: int,
                       assignments) -> tuple[list | None, tuple]:
    """CreateTopics' replica assignments ((partition, brokers), ...) checked as Kafka's
    ReplicationControlManager checks them: the replicas of each partition in order, or None
    and (error, message)."""
    def bad(message: str) -> tuple[None, tuple]:
        return None, (m.INVALID_REPLICA_ASSIGNMENT, message)
    if replication_factor != -1:
        return None, (m.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                         "replication factor was not set to -1.")
    if num_partitions != -1:
        return None, (m.INVALID_REQUEST, "A manual partition assignment was specified, but "
                                         "numPartitions was not set to -1.")
    parts: dict = {}
    rf = None
    for index, brokers in assignments:
        brokers = tuple(brokers)
        if index in parts:
            return bad(f"Found multiple manual partition assignments for partition {index}")
        if not brokers:
            return bad("The manual partition assignment includes an empty replica list.")
        for b in sorted(brokers):
            if b not in image.brokers:
                return bad(f"The manual partition assignment includes broker {b}, but no "
                           f"such broker is registered.")
        if len(set(brokers)) != len(brokers):
            twice = next(b for b in sorted(brokers) if brokers.count(b) > 1)
            return bad(f"The manual partition assignment includes the broker {twice} more "
                       f"than once.")
        if rf is not None and len(brokers) != rf:
            return bad(f"The manual partition assignment includes a partition with "
                       f"{len(brokers)} replica(s), but this is not consistent with previous "
                       f"partitions, which have {rf} replica(s).")
        rf = len(brokers)
        if not any(eligible(image, b) for b in brokers):
            return bad(f"All brokers specified in the manual partition assignment for "
                       f"partition {index} are fenced or in controlled shutdown.")
        parts[index] = brokers
    if sorted(parts) != list(range(len(parts))):
        return bad("partitions should be a consecutive 0-based integer sequence")
    return [parts[i] for i in range(len(parts))], ()


def create_partitions(image: MetadataImage, topics) -> tuple[list, list[TopicResult]]:
    """Records adding partitions to existing topics (rows of name, new total count and the
    new partitions' replicas, or () to place them as CreateTopics does) and a result per
    topic, with Kafka's errors: a count that does not grow is INVALID_PARTITIONS, a manual
    assignment of the wrong shape or naming an unknown broker INVALID_REPLICA_ASSIGNMENT."""
    records: list = []
    results: list[TopicResult] = []
    usable = sorted(b for b, reg in image.brokers.items() if reg.eligible)
    seen: set[str] = set()
    for name, count, assignments in topics:
        def fail(code: int, message: str) -> None:
            results.append(TopicResult(name, code, message))
        t = image.topics.get(name)
        if name in seen:
            fail(m.INVALID_REQUEST, f"topic {name!r} is listed twice")
            continue
        seen.add(name)
        if t is None:
            fail(m.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            continue
        have = len(t.partitions)
        if count <= have:
            fail(m.INVALID_PARTITIONS, f"topic {name!r} has {have} partitions; the new count "
                                       f"must be larger, got {count}")
            continue
        rf = len(next(iter(t.partitions.values())).replicas)
        new = count - have
        if assignments:
            if len(assignments) != new:
                fail(m.INVALID_REPLICA_ASSIGNMENT, f"{len(assignments)} assignments for {new} "
                                                   "new partitions")
                continue
            bad = next((a for a in assignments if len(a) != rf or len(set(a)) != rf
                        or any(b not in image.brokers for b in a)), None)
            if bad is not None:
                fail(m.INVALID_REPLICA_ASSIGNMENT,
                     f"assignment {list(bad)}: needs {rf} distinct known brokers "
                     f"(known: {sorted(image.brokers)})")
                continue
            placed = [tuple(a) for a in assignments]
            if any(not any(eligible(image, b) for b in a) for a in placed):
                fail(m.INVALID_REPLICA_ASSIGNMENT, "every broker of an assignment is fenced "
                                                   "or shutting down: no leader to elect")
                continue
        else:
            if rf > len(usable):
                fail(m.INVALID_REPLICATION_FACTOR, f"replication factor {rf} is larger than "
                                                   f"the {len(usable)} available brokers")
                continue
            start = zlib.crc32(name.encode()) % len(usable)
            placed = [tuple(usable[(start + p + i) % len(usable)] for i in range(rf))
                      for p in range(have, count)]
        results.append(TopicResult(name, m.NONE, None))
        for p, replicas in zip(range(have, count), placed):
            isr = tuple(b for b in replicas if eligible(image, b))
            records.append(mr.PartitionRecord(p, t.topic_id, replicas, isr, isr[0], 0, 0))
    return records, results


INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def delete_topics(image: MetadataImage, topics) -> tuple[list, list]:
    """RemoveTopicRecords for ``topics`` (rows of name and topic id, either "" when the
    request names the other) and a (name, topic id, error, message) row each: an unknown
    name or id is UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID), an internal topic is
    refused (its coordinators' state lives there)."""
    records: list = []
    results: list = []
    done: set[str] = set()
    for name, topic_id in topics:
        if topic_id:
            found = image.topic_names.get(topic_id)
            if found is None:
                results.append((name, topic_id, m.UNKNOWN_TOPIC_ID,
                                f"no topic has id {topic_id}"))
                continue
            name = found
        t = image.topics.get(name)
        if t is None:
            results.append((name, topic_id, m.UNKNOWN_TOPIC_OR_PARTITION,
                            f"topic {name!r} does not exist"))
            continue
        if name in INTERNAL_TOPICS:
            results.append((name, t.topic_id, m.INVALID_REQUEST,
                            f"{name} is internal: the coordinators' state lives there"))
            continue
        results.append((name, t.topic_id, m.NONE, None))
        if name not in done:
            done.add(name)
            records.append(mr.RemoveTopicRecord(t.topic_id))
    return records, results


class PartitionChangeBuilder:
    """What one partition becomes given a target ISR, replica set and election type. As
    Kafka's, every change first completes a reassignment in progress when the target ISR
    allows it (every replica of the target in it, and one not being removed)."""

    def __init__(self, image: MetadataImage, topic: str, partition: int,
                 reg: PartitionRegistration, unclean_bug: bool = False) -> None:
        self.unclean_bug = unclean_bug  # planted bug: any live replica may lead
        self.skip_catch_up_bug = False  # planted bug: a move's target counts as in the ISR
        self.preferred_bug = False  # planted bug: a preferred election ignores the ISR
        self.unclean_shutdown: frozenset = frozenset()  # brokers that may have lost records
        self.image = image
        self.topic = topic
        self.partition = partition
        self.reg = reg
        self.target_isr = reg.isr
        self.target_replicas = reg.replicas
        self.target_removing = reg.removing
        self.target_adding = reg.adding
        self.election = ONLINE

    def _complete_reassignment(self, isr: tuple) -> tuple:
        """Kafka's maybeCompleteReassignment: the ISR once the reassignment completes (and
        the targets set to its end), else ``isr`` unchanged."""
        removing = self.target_removing
        if not removing and not self.target_adding:
            return isr
        if self.skip_catch_up_bug:
            isr = tuple(dict.fromkeys(isr + self.target_replicas))
        done_isr = tuple(b for b in isr if b not in removing)
        done_replicas = tuple(b for b in self.target_replicas if b not in removing)
        if not done_isr or not done_replicas or any(b not in done_isr for b in done_replicas):
            return isr
        self.target_replicas, self.target_removing, self.target_adding = done_replicas, (), ()
        return done_isr

    def _target_elr(self, isr: tuple) -> tuple:
        """Kafka's maybePopulateTargetElr: the ELR given the target ISR."""
        reg = self.reg
        if len(isr) >= (self.image.min_isr(self.topic) or 1):
            return ()
        was = set(reg.elr) | set(reg.isr)
        return tuple(b for b in self.target_replicas if b in was and b not in isr
                     and b not in self.unclean_shutdown)

    def build(self) -> mr.PartitionChangeRecord | None:
        reg, image = self.reg, self.image
        isr = self._complete_reassignment(
            tuple(b for b in self.target_isr if b in self.target_replicas))
        replicas = self.target_replicas
        with_elr = image.elr_enabled
        elr = self._target_elr(isr) if with_elr else ()
        leader = reg.leader
        preferred = replicas[0]
        if self.election == PREFERRED and (preferred in isr or self.preferred_bug) \
                and eligible(image, preferred):
            leader = preferred
            isr = isr if preferred in isr else (preferred,) + isr
        elif self.unclean_bug and not (leader in isr and eligible(image, leader)):
            leader = next((b for b in replicas if eligible(image, b)), mr.NO_LEADER)
            if leader != mr.NO_LEADER and leader not in isr:
                isr, elr = (leader,), ()
        elif not (leader in isr and eligible(image, leader)):
            leader = next((b for b in replicas if b in isr and eligible(image, b)), mr.NO_LEADER)
            if leader == mr.NO_LEADER and not isr:
                leader = next((b for b in replicas if b in elr and eligible(image, b)),
                              mr.NO_LEADER)
                if leader != mr.NO_LEADER:  # clean: it holds everything below the HW
                    isr, elr = (leader,), tuple(b for b in elr if b != leader)
            last = reg.last_known_elr
            if leader == mr.NO_LEADER and with_elr and not isr and not elr and len(last) == 1 \
                    and last[0] in replicas and eligible(image, last[0]):
                leader, isr = last[0], last  # balanced recovery: unclean, but available
            if leader == mr.NO_LEADER and (self.election == UNCLEAN
                                           or unclean_allowed(image, self.topic)):
                leader = next((b for b in replicas if eligible(image, b)), mr.NO_LEADER)
                if leader != mr.NO_LEADER:
                    isr, elr = (leader,), ()
        # Kafka's maybeUpdateLastKnownLeader: the leader the partition had when its ISR
        # emptied, kept while it has none; a partition already leaderless then (its last
        # ISR member down while ELR was off) keeps that member, where Kafka would keep the
        # leader -1 and never lead again without an unclean election
        known = reg.last_known_elr
        if with_elr and not isr and reg.isr:
            known = (reg.leader,) if reg.leader >= 0 else reg.isr[:1]
        elif leader >= 0 or not with_elr:
            known = ()
        if not isr and not with_elr:
            # Never empty the ISR: the last member holds every committed record.
            isr = tuple(b for b in reg.isr if b in replicas)[:1] or replicas[:1]
        leader_field = mr.NO_LEADER_CHANGE if leader == reg.leader else leader
        if leader_field == mr.NO_LEADER_CHANGE and not set(reg.replicas) <= set(replicas):
            leader_field = leader  # replicas removed: a new leader epoch fences them
        change = (isr != reg.isr, replicas != reg.replicas,
                  self.target_removing != reg.removing, self.target_adding != reg.adding,
                  elr != reg.elr, known != reg.last_known_elr)
        if leader_field == mr.NO_LEADER_CHANGE and not any(change):
            return None
        topic_id = image.topics[self.topic].topic_id
        return mr.PartitionChangeRecord(
            self.partition, topic_id, isr if change[0] else None, leader_field,
            replicas if change[1] else None, self.target_removing if change[2] else None,
            self.target_adding if change[3] else None, elr if change[4] else None,
            known if change[5] else None)


def iter_partitions(image: MetadataImage):
    for name, t in image.topics.items():
        for pid, reg in t.partitions.items():
            yield name, pid, reg


def broker_unavailable(image: MetadataImage, broker_id: int, unclean_bug: bool = False,
                       unclean_shutdown: bool = False) -> list:
    """Records moving leadership away from ``broker_id`` and taking it out of ISRs (it was
    fenced or is shutting down). ``image`` already has the broker's new state.
    ``unclean_shutdown``: it registered again after an unclean shutdown, so it also leaves
    every ELR (its log may have lost records it had acknowledged)."""
    out = []
    for name, pid, reg in iter_partitions(image):
        if broker_id not in reg.isr and reg.leader != broker_id and not (
                unclean_shutdown and broker_id in reg.elr):
            continue
        b = PartitionChangeBuilder(image, name, pid, reg, unclean_bug)
        b.target_isr = tuple(x for x in reg.isr if x != broker_id)
        if unclean_shutdown:
            b.unclean_shutdown = frozenset({broker_id})
        rec = b.build()
        if rec is not None:
            out.append(rec)
    return out


def elect_leaderless(image: MetadataImage, unclean_bug: bool = False) -> list:
    """Records electing a leader for every partition that has none and now can."""
    out = []
    for name, pid, reg in iter_partitions(image):
        if reg.leader == mr.NO_LEADER:
            rec = PartitionChangeBuilder(image, name, pid, reg, unclean_bug).build()
            if rec is not None:
                out.append(rec)
    return out


def clear_elr(image: MetadataImage) -> list:
    """Records emptying every partition's ELR and last known ELR (eligible leader replicas
    turned off): an empty ISR takes its first ELR member, else its first last known one, so
    that the ISR is never empty again."""
    out = []
    for name, pid, reg in iter_partitions(image):
        if not (reg.elr or reg.last_known_elr):
            continue
        isr = reg.isr or (reg.elr + reg.last_known_elr)[:1]
        leader = isr[0] if reg.leader == mr.NO_LEADER and eligible(image, isr[0]) \
            else mr.NO_LEADER_CHANGE
        out.append(mr.PartitionChangeRecord(pid, image.topics[name].topic_id,
                                            None if isr == reg.isr else isr,
                                            leader, elr=() if reg.elr else None,
                                            last_known_elr=() if reg.last_known_elr else None))
    return out


def elect_preferred(image: MetadataImage) -> list:
    """Kafka's auto leader rebalance: move leadership back to preferred replicas."""
    out = []
    for name, pid, reg in iter_partitions(image):
        if reg.leader != reg.replicas[0]:
            b = PartitionChangeBuilder(image, name, pid, reg)
            b.election = PREFERRED
            rec = b.build()
            if rec is not None:
                out.append(rec)
    return out


def elect_leaders(image: MetadataImage, election: str, partitions: tuple | None,
                  preferred_bug: bool = False) -> tuple[list, list[tuple]]:
    """Records and result rows (topic, partition, error, message) for ElectLeaders, as
    Kafka's ReplicationControlManager.electLeaders: a partition whose leader is already its
    preferred replica (PREFERRED) or that has a leader (UNCLEAN) is ELECTION_NOT_NEEDED; one
    whose election changes nothing is PREFERRED_LEADER_NOT_AVAILABLE (the preferred replica
    is not in the ISR or not eligible) or ELIGIBLE_LEADERS_NOT_AVAILABLE (no replica is).
    ``partitions`` None: every partition, answering only those an election was tried for."""
    every = partitions is None
    if every:
        partitions = tuple((name, pid) for name, pid, _ in iter_partitions(image))
    records: list = []
    results: list[tuple] = []
    for topic, pid in dict.fromkeys(partitions):
        t = image.topics.get(topic)
        reg = None if t is None else t.partitions.get(pid)
        if reg is None:
            results.append((topic, pid, m.UNKNOWN_TOPIC_OR_PARTITION,
                            f"no such topic as {topic}" if t is None
                            else f"no such partition as {topic}-{pid}"))
            continue
        if (reg.leader == reg.replicas[0]) if election == PREFERRED else reg.leader >= 0:
            if not every:
                results.append((topic, pid, m.ELECTION_NOT_NEEDED,
                                f"{topic}-{pid} already has its "
                                f"{'preferred ' if election == PREFERRED else ''}leader"))
            continue
        b = PartitionChangeBuilder(image, topic, pid, reg)
        b.election, b.preferred_bug = election, preferred_bug
        rec = b.build()
        if rec is None:
            error = m.PREFERRED_LEADER_NOT_AVAILABLE if election == PREFERRED \
                else m.ELIGIBLE_LEADERS_NOT_AVAILABLE
            results.append((topic, pid, error, f"no eligible replica of {topic}-{pid} can lead"
                            if election == UNCLEAN else f"the preferred replica "
                            f"{reg.replicas[0]} of {topic}-{pid} is not in the ISR or not "
                            "eligible"))
            continue
        records.append(rec)
        results.append((topic, pid, m.NONE, None))
    return records, results


def alter_partition(image: MetadataImage, req: m.AlterPartitionRequest) -> tuple[int, list]:
    """(error, records) for a leader's AlterPartition. An ISR change that completes a
    reassignment and so moves leadership away from the asking leader is written and
    answered NEW_LEADER_ELECTED, as Kafka's."""
    broker = image.brokers.get(req.broker_id)
    if broker is None or broker.broker_epoch != req.broker_epoch:
        return m.STALE_BROKER_EPOCH, []
    reg = image.partition(req.topic, req.partition)
    if reg is None:
        return m.UNKNOWN_TOPIC_OR_PARTITION, []
    if req.leader_epoch < reg.leader_epoch:
        return m.FENCED_LEADER_EPOCH, []
    if req.leader_epoch > reg.leader_epoch or reg.leader != req.broker_id:
        return m.NOT_LEADER_OR_FOLLOWER, []
    if req.partition_epoch != reg.partition_epoch:
        return m.INVALID_UPDATE_VERSION, []
    new_isr = tuple(req.new_isr)
    if len(set(new_isr)) != len(new_isr) or req.broker_id not in new_isr or \
            any(b not in reg.replicas for b in new_isr):
        return m.INVALID_REQUEST, []
    if any(b not in reg.isr and not eligible(image, b) for b in new_isr):
        return m.INELIGIBLE_REPLICA, []
    if reg.reassigning or image.elr_enabled:  # the builder keeps the ELR as the ISR moves
        b = PartitionChangeBuilder(image, req.topic, req.partition, reg)
        b.target_isr = new_isr
        rec = b.build()
        if rec is None:
            return m.NONE, []
        moved = rec.leader not in (mr.NO_LEADER_CHANGE, req.broker_id)
        return (m.NEW_LEADER_ELECTED if moved else m.NONE), [rec]
    if new_isr == reg.isr:
        return m.NONE, []
    topic_id = image.topics[req.topic].topic_id
    return m.NONE, [mr.PartitionChangeRecord(req.partition, topic_id, new_isr, mr.NO_LEADER_CHANGE)]


def leads_any(image: MetadataImage, broker_id: int) -> bool:
    return any(reg.leader == broker_id for _, _, reg in iter_partitions(image))
