"""Records of the metadata log, framed as Kafka's MetadataRecordSerde frames them.

A record value is ``uvarint frame version (1) | uvarint api key | uvarint
record version | body``. Api keys, names and fields are Kafka's
(RegisterBrokerRecord 0, UnregisterBrokerRecord 1, TopicRecord 2, PartitionRecord 3, ConfigRecord 4,
PartitionChangeRecord 5, RemoveTopicRecord 9, FeatureLevelRecord 12, ProducerIdsRecord 15,
BrokerRegistrationChangeRecord 17, NoOpRecord 20, AccessControlEntryRecord 23,
RemoveAccessControlEntryRecord 24, UserScramCredentialRecord 11,
RemoveUserScramCredentialRecord 22, QuotaRecord 14); chaoskraft's own register
service uses key 10000, outside Kafka's range. Bodies are msgpack maps of the record's fields instead
of Kafka's generated schema bytes: the metadata log is only read by
chaoskraft nodes, and the frame still tells a reader which record and
version it holds.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import msgpack

from .records import CorruptBatchError, read_uvarint, write_uvarint

FRAME_VERSION = 1
METADATA_VERSION_LEVEL = 21  # Kafka 3.9's metadata.version IBP_3_9_IV0


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    name: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class NoOpRecord:
    pass


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    """A broker registered; ``broker_epoch`` is the offset of this record."""
    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple  # ((listener name, host, port), ...)
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool


# BrokerRegistrationChangeRecord.fenced values, as Kafka's BrokerRegistrationFencingChange.
FENCE, UNFENCE, NO_FENCING_CHANGE = 1, -1, 0


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    broker_id: int
    broker_epoch: int
    fenced: int  # FENCE, UNFENCE or NO_FENCING_CHANGE
    in_controlled_shutdown: int  # 1: the broker asked to shut down; 0: no change


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: str


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    partition_id: int
    topic_id: str
    replicas: tuple
    isr: tuple
    leader: int
    leader_epoch: int
    partition_epoch: int
    # a reassignment in progress (KIP-455): ``replicas`` is the target followed by the
    # replicas being removed; ``adding_replicas`` are in the target and were not replicas
    removing_replicas: tuple = ()
    adding_replicas: tuple = ()
    # eligible leader replicas (KIP-966): out of the ISR, yet holding everything below the
    # high watermark; the last known ones are former ISR members no longer trusted so
    elr: tuple = ()
    last_known_elr: tuple = ()


NO_LEADER = -1
NO_LEADER_CHANGE = -2


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """A change to a partition; ``None``/NO_LEADER_CHANGE mean unchanged. Bumps the partition epoch,
    and the leader epoch whenever ``leader`` is set (also to the same leader: a reassignment
    removing replicas fences them so)."""
    partition_id: int
    topic_id: str
    isr: tuple | None
    leader: int
    replicas: tuple | None = None
    removing_replicas: tuple | None = None
    adding_replicas: tuple | None = None
    elr: tuple | None = None
    last_known_elr: tuple | None = None


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    resource_type: int  # 2 topic, 4 broker (Kafka's ConfigResource.Type)
    resource_name: str
    name: str
    value: str | None  # None deletes


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    """The topic is deleted: its partitions and configs go with it."""
    topic_id: str


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """The block of producer ids below ``next_producer_id`` is taken (by ``broker_id``)."""
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    """The broker's registration is gone (UnregisterBroker): it is no longer in the cluster."""
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """An ACL binding (codes as Kafka's enums, see ``node_image/acls.py``) under ``id``."""
    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    id: str


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism (KIP-554, ``node_image/scram.py``)."""
    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class QuotaRecord:
    """One quota of a client quota entity set or removed (``node_image/client_quotas.py``):
    the entity as sorted (type, name or None for the default) pairs."""
    entity: tuple
    key: str
    value: float = 0.0
    remove: bool = False


@dataclass(frozen=True, slots=True)
class RegisterValueRecord:
    """chaoskraft: the register ``key`` now holds ``value``."""
    key: str
    value: int


API_KEYS: dict[type, int] = {
    RegisterBrokerRecord: 0, UnregisterBrokerRecord: 1, TopicRecord: 2, PartitionRecord: 3, ConfigRecord: 4,
    PartitionChangeRecord: 5, RemoveTopicRecord: 9, FeatureLevelRecord: 12, ProducerIdsRecord: 15,
    BrokerRegistrationChangeRecord: 17, NoOpRecord: 20, AccessControlEntryRecord: 23,
    RemoveAccessControlEntryRecord: 24, UserScramCredentialRecord: 11,
    RemoveUserScramCredentialRecord: 22, QuotaRecord: 14, RegisterValueRecord: 10000}
_BY_KEY = {v: k for k, v in API_KEYS.items()}
_FIELDS = {t: tuple(f.name for f in dataclasses.fields(t)) for t in API_KEYS}
# Fields added later have defaults and are written only when set, so a record that does
# not use them keeps the bytes it always had (and old logs read as before).
_DEFAULTS = {t: tuple(f.default for f in dataclasses.fields(t)) for t in API_KEYS}


def encode(record) -> bytes:
    t = type(record)
    out = bytearray()
    write_uvarint(out, FRAME_VERSION)
    write_uvarint(out, API_KEYS[t])
    write_uvarint(out, 0)
    values = [getattr(record, f) for f in _FIELDS[t]]
    defaults = _DEFAULTS[t]
    while values and defaults[len(values) - 1] is not dataclasses.MISSING \
            and values[-1] == defaults[len(values) - 1]:
        values.pop()
    out += msgpack.packb(values, use_bin_type=True)
    return bytes(out)


def decode(value: bytes):
    end = len(value)
    frame, pos = read_uvarint(value, 0, end)
    if frame != FRAME_VERSION:
        raise CorruptBatchError(f"metadata record frame version {frame}, expected {FRAME_VERSION}")
    api_key, pos = read_uvarint(value, pos, end)
    _version, pos = read_uvarint(value, pos, end)
    t = _BY_KEY.get(api_key)
    if t is None:
        raise CorruptBatchError(f"unknown metadata record api key {api_key}")
    try:
        fields = msgpack.unpackb(value[pos:], raw=False, use_list=False)
        return t(*fields)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise CorruptBatchError(f"{t.__name__} does not decode: {exc}") from None
