"""MetadataImage and MetadataDelta: the committed cluster metadata, folded from the metadata log.

Theory of operation
-------------------
A :class:`MetadataImage` is a value: once published nobody changes it. A
:class:`MetadataDelta` starts from an image, replays records (copying only
the maps a record touches, so unchanged parts are shared) and ``apply()``
returns the next image. It also remembers what changed (brokers, topics,
partitions), which is what a broker's replica manager and the controller's
managers act on, as Kafka's ``MetadataDelta``/``TopicsDelta`` are.

The controller keeps two images (committed and current, see
``controller.py``); brokers keep the committed one only.

Rules
-----
- A record about an unknown topic id or broker is a bug (the controller
  wrote it): replay raises AssertionError naming the record.
- Partition epochs only grow; a PartitionChangeRecord that sets the leader (a new one, or
  the same when a reassignment removes replicas) bumps the leader epoch, as Kafka's
  ``PartitionRegistration.merge``.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace

from . import metadata_records as mr
from .acls import AclBinding

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
CLUSTER = (BROKER_RESOURCE, "")  # a broker resource with no name: the cluster's defaults
ELR_FEATURE = "eligible.leader.replicas.version"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple  # ((listener name, host, port), ...)
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None

    @property
    def eligible(self) -> bool:
        """May lead or join an ISR: unfenced and not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple  # while reassigning: the target, then the replicas being removed
    isr: tuple
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing: tuple = ()  # a reassignment in progress (KIP-455)
    adding: tuple = ()
    elr: tuple = ()  # eligible leader replicas (KIP-966)
    last_known_elr: tuple = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.removing or self.adding)

    @property
    def target(self) -> tuple:
        """The replicas a reassignment in progress moves to (else the replicas)."""
        return tuple(b for b in self.replicas if b not in self.removing)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: dict  # partition id -> PartitionRegistration


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = 0  # end (exclusive) of the log folded into this image
    features: dict = field(default_factory=dict)
    registers: dict = field(default_factory=dict)
    brokers: dict = field(default_factory=dict)  # id -> BrokerRegistration
    topics: dict = field(default_factory=dict)  # name -> TopicImage
    topic_names: dict = field(default_factory=dict)  # topic id -> name
    configs: dict = field(default_factory=dict)  # (resource type, name) -> {key: value}
    next_producer_id: int = 0
    acls: dict = field(default_factory=dict)  # id -> acls.AclBinding
    # (user, mechanism) -> (salt, stored key, server key, iterations): scram.py
    scram: dict = field(default_factory=dict)
    quotas: dict = field(default_factory=dict)  # entity -> {key: value}: client_quotas.py

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(partition)

    def topic_config(self, topic: str) -> dict:
        return self.configs.get((TOPIC_RESOURCE, topic), {})

    @property
    def elr_enabled(self) -> bool:
        """Eligible leader replicas (KIP-966) are on: their feature level is 1."""
        return self.features.get(ELR_FEATURE, 0) >= 1

    def min_isr(self, topic: str) -> int | None:
        """min.insync.replicas of ``topic``: its own, else the cluster's (written when
        eligible leader replicas are enabled), else None."""
        value = self.topic_config(topic).get("min.insync.replicas") or \
            self.configs.get(CLUSTER, {}).get("min.insync.replicas")
        return None if value is None else int(value)

    def records(self) -> list:
        """Records that rebuild this image from nothing (a snapshot's contents)."""
        out: list = [mr.FeatureLevelRecord(k, v) for k, v in sorted(self.features.items())]
        for b in sorted(self.brokers.values(), key=lambda b: b.broker_id):
            out.append(mr.RegisterBrokerRecord(b.broker_id, b.incarnation_id, b.broker_epoch,
                                               b.endpoints, b.rack, b.fenced,
                                               b.in_controlled_shutdown))
        for name in sorted(self.topics):
            t = self.topics[name]
            out.append(mr.TopicRecord(name, t.topic_id))
            for pid in sorted(t.partitions):
                p = t.partitions[pid]
                out.append(mr.PartitionRecord(pid, t.topic_id, p.replicas, p.isr, p.leader,
                                              p.leader_epoch, p.partition_epoch, p.removing,
                                              p.adding, p.elr, p.last_known_elr))
        for (rtype, rname), entries in sorted(self.configs.items()):
            out += [mr.ConfigRecord(rtype, rname, k, v) for k, v in sorted(entries.items())]
        if self.next_producer_id:
            out.append(mr.ProducerIdsRecord(-1, -1, self.next_producer_id))
        out += [mr.RegisterValueRecord(k, v) for k, v in sorted(self.registers.items())]
        out += [mr.AccessControlEntryRecord(i, b.resource_type, b.name, b.pattern_type,
                                            b.principal, b.host, b.operation, b.permission)
                for i, b in sorted(self.acls.items())]
        out += [mr.UserScramCredentialRecord(name, mech, *value)
                for (name, mech), value in sorted(self.scram.items())]
        out += [mr.QuotaRecord(entity, k, v) for entity, values in
                sorted(self.quotas.items(), key=lambda kv: repr(kv[0]))
                for k, v in sorted(values.items())]
        return out

    def digest(self) -> int:
        return zlib.crc32(repr(self.records()).encode())


class MetadataDelta:
    """Records folded on top of ``image``; ``apply()`` gives the next image."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._maps: dict[str, dict] = {}
        self._topic_parts: dict[str, dict] = {}  # topic name -> copied partitions map
        self.next_producer_id = image.next_producer_id
        self.changed_brokers: set[int] = set()
        self.changed_partitions: set[tuple[str, int]] = set()
        self.created_topics: set[str] = set()
        self.changed_configs: set[tuple[int, str]] = set()

    def _map(self, name: str) -> dict:
        m = self._maps.get(name)
        if m is None:
            m = self._maps[name] = dict(getattr(self.image, name))
        return m

    def _get(self, name: str) -> dict:
        return self._maps.get(name) or getattr(self.image, name)

    @property
    def brokers(self) -> dict:
        return self._get("brokers")

    @property
    def topics(self) -> dict:
        return self._get("topics")

    def _parts(self, topic_id: str, record) -> tuple[str, dict]:
        name = self._get("topic_names").get(topic_id)
        if name is None:
            raise AssertionError(f"{record!r} names unknown topic id {topic_id}")
        parts = self._topic_parts.get(name)
        if parts is None:
            topics = self._map("topics")
            t = topics[name]
            parts = self._topic_parts[name] = dict(t.partitions)
            topics[name] = replace(t, partitions=parts)
        return name, parts

    def replay(self, record) -> None:
        t = type(record)
        if t is mr.NoOpRecord:
            return
        if t is mr.RegisterValueRecord:
            self._map("registers")[record.key] = record.value
        elif t is mr.FeatureLevelRecord:
            self._map("features")[record.name] = record.feature_level
        elif t is mr.RegisterBrokerRecord:
            self._map("brokers")[record.broker_id] = BrokerRegistration(
                record.broker_id, record.incarnation_id, record.broker_epoch,
                tuple(tuple(e) for e in record.endpoints), record.rack, record.fenced,
                record.in_controlled_shutdown)
            self.changed_brokers.add(record.broker_id)
        elif t is mr.UnregisterBrokerRecord:
            b = self._map("brokers").pop(record.broker_id, None)
            if b is None or b.broker_epoch != record.broker_epoch:
                raise AssertionError(f"{record!r} does not match registration {b!r}")
            self.changed_brokers.add(record.broker_id)
        elif t is mr.BrokerRegistrationChangeRecord:
            brokers = self._map("brokers")
            b = brokers.get(record.broker_id)
            if b is None or b.broker_epoch != record.broker_epoch:
                raise AssertionError(f"{record!r} does not match registration {b!r}")
            fenced = {mr.FENCE: True, mr.UNFENCE: False}.get(record.fenced, b.fenced)
            shutdown = b.in_controlled_shutdown or record.in_controlled_shutdown == 1
            if record.fenced == mr.UNFENCE:
                shutdown = False
            brokers[record.broker_id] = replace(b, fenced=fenced, in_controlled_shutdown=shutdown)
            self.changed_brokers.add(record.broker_id)
        elif t is mr.TopicRecord:
            if record.name in self._get("topics"):
                raise AssertionError(f"{record!r}: topic exists")
            self._map("topics")[record.name] = TopicImage(record.name, record.topic_id, {})
            self._map("topic_names")[record.topic_id] = record.name
            self._topic_parts[record.name] = self._map("topics")[record.name].partitions
            self.created_topics.add(record.name)
        elif t is mr.RemoveTopicRecord:
            names = self._map("topic_names")
            name = names.pop(record.topic_id, None)
            if name is None:
                raise AssertionError(f"{record!r} names unknown topic id {record.topic_id}")
            gone = self._map("topics").pop(name)
            self._topic_parts.pop(name, None)
            self.changed_partitions.update((name, p) for p in gone.partitions)
            self.created_topics.discard(name)
            key = (TOPIC_RESOURCE, name)
            if key in self._get("configs"):
                del self._map("configs")[key]
                self.changed_configs.add(key)
        elif t is mr.PartitionRecord:
            name, parts = self._parts(record.topic_id, record)
            parts[record.partition_id] = PartitionRegistration(
                tuple(record.replicas), tuple(record.isr), record.leader, record.leader_epoch,
                record.partition_epoch, tuple(record.removing_replicas),
                tuple(record.adding_replicas), tuple(record.elr), tuple(record.last_known_elr))
            self.changed_partitions.add((name, record.partition_id))
        elif t is mr.PartitionChangeRecord:
            name, parts = self._parts(record.topic_id, record)
            p = parts.get(record.partition_id)
            if p is None:
                raise AssertionError(f"{record!r} names an unknown partition")
            leader, leader_epoch = p.leader, p.leader_epoch
            if record.leader != mr.NO_LEADER_CHANGE:
                leader, leader_epoch = record.leader, p.leader_epoch + 1

            def given(value, old: tuple) -> tuple:
                return old if value is None else tuple(value)
            parts[record.partition_id] = PartitionRegistration(
                given(record.replicas, p.replicas), given(record.isr, p.isr), leader,
                leader_epoch, p.partition_epoch + 1, given(record.removing_replicas, p.removing),
                given(record.adding_replicas, p.adding), given(record.elr, p.elr),
                given(record.last_known_elr, p.last_known_elr))
            self.changed_partitions.add((name, record.partition_id))
        elif t is mr.ConfigRecord:
            configs = self._map("configs")
            key = (record.resource_type, record.resource_name)
            entries = dict(configs.get(key, {}))
            if record.value is None:
                entries.pop(record.name, None)
            else:
                entries[record.name] = record.value
            configs[key] = entries
            self.changed_configs.add(key)
        elif t is mr.AccessControlEntryRecord:
            self._map("acls")[record.id] = AclBinding(
                record.resource_type, record.resource_name, record.pattern_type,
                record.principal, record.host, record.operation, record.permission_type)
        elif t is mr.RemoveAccessControlEntryRecord:
            if self._map("acls").pop(record.id, None) is None:
                raise AssertionError(f"{record!r} names no ACL")
        elif t is mr.UserScramCredentialRecord:
            self._map("scram")[(record.name, record.mechanism)] = (
                record.salt, record.stored_key, record.server_key, record.iterations)
        elif t is mr.RemoveUserScramCredentialRecord:
            if self._map("scram").pop((record.name, record.mechanism), None) is None:
                raise AssertionError(f"{record!r} names no credential")
        elif t is mr.QuotaRecord:
            quotas = self._map("quotas")
            values = dict(quotas.get(record.entity, {}))
            if record.remove:
                values.pop(record.key, None)
            else:
                values[record.key] = record.value
            if values:
                quotas[record.entity] = values
            else:
                quotas.pop(record.entity, None)
        elif t is mr.ProducerIdsRecord:
            if record.next_producer_id <= self.next_producer_id:
                raise AssertionError(f"{record!r} does not advance next producer id "
                                     f"{self.next_producer_id}")
            self.next_producer_id = record.next_producer_id
        else:
            raise AssertionError(f"cannot replay {record!r}")

    def apply(self, offset: int) -> MetadataImage:
        kw = dict(self._maps)
        return replace(self.image, offset=offset, next_producer_id=self.next_producer_id, **kw)
