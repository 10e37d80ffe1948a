"""Messages between nodes (KRaft RPCs) and from register clients.

Each is a frozen, slotted dataclass whose fields follow Kafka's request and
response schemas (VoteRequest v2 with PreVote, BeginQuorumEpoch,
EndQuorumEpoch, Fetch, FetchSnapshot), flattened to the single
``__cluster_metadata-0`` partition.

Wire codec (internal listener only): a frame is a 4-byte big-endian length,
then a msgpack array ``[type tag, field, field, ...]``. It is ours rather than
Kafka's framing because these RPCs are only spoken between chaoskraft nodes
and by the harness's register client; msgpack keeps it compact and lets the
simulator and the TCP runtime share one definition. The client-facing Kafka
listener uses the real Kafka protocol.

A decode error is the sender's fault: :class:`MessageError` names the field.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import msgpack

from .admin_messages import (AlterConfigsRequest, AlterConfigsResponse,
                             AlterReassignmentsRequest, AlterReassignmentsResponse,
                             ListReassignmentsRequest, ListReassignmentsResponse,
                             UpdateFeaturesRequest, UpdateFeaturesResponse,
                             AddRaftVoterRequest, RemoveRaftVoterRequest, RaftVoterResponse,
                             UpdateRaftVoterRequest, UpdateRaftVoterResponse,
                             CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest,
                             DeleteAclsResponse, UnregisterBrokerRequest,
                             UnregisterBrokerResponse, AlterScramRequest, AlterScramResponse,
                             CreatePartitionsRequest, CreatePartitionsResponse,
                             CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
                             DeleteTopicsResponse, ElectLeadersRequest, ElectLeadersResponse,
                             AlterQuotasRequest, AlterQuotasResponse, ADMIN_ROWS)
from .share_messages import (ShareStateReadRequest, ShareStateReadResponse,
                             ShareStateWriteRequest, ShareStateWriteResponse)

MAX_FRAME_BYTES = 64 * 1024 * 1024

# Error codes, named and numbered as Kafka's Errors.
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
OFFSET_METADATA_TOO_LARGE = 12
INVALID_TIMESTAMP = 32
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_TOPIC_EXCEPTION = 17
RECORD_LIST_TOO_LARGE = 18
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
INVALID_REQUIRED_ACKS = 21
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_COMMIT_OFFSET_SIZE = 28
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
INVALID_RECORD = 87
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
TRANSACTION_COORDINATOR_FENCED = 52
OPERATION_NOT_ATTEMPTED = 55
UNKNOWN_PRODUCER_ID = 59
PRODUCER_FENCED = 90
MISMATCHED_ENDPOINT_TYPE = 114
UNSUPPORTED_ENDPOINT_TYPE = 115
TRANSACTIONAL_ID_NOT_FOUND = 105
UNKNOWN_TOPIC_ID = 100
INVALID_REGULAR_EXPRESSION = 128
KAFKA_STORAGE_ERROR = 56
SECURITY_DISABLED = 54
LOG_DIR_NOT_FOUND = 57
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNSUPPORTED_COMPRESSION_TYPE = 76
OFFSET_NOT_AVAILABLE = 78  # a new leader whose high watermark is behind its epoch start
MEMBER_ID_REQUIRED = 79
UNSTABLE_OFFSET_COMMIT = 88  # OffsetFetch v7+ with require_stable, a transaction still open
STALE_BROKER_EPOCH = 77
INCONSISTENT_VOTER_SET = 94
INVALID_UPDATE_VERSION = 95
SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
DUPLICATE_BROKER_REGISTRATION = 101
INCONSISTENT_CLUSTER_ID = 104
INELIGIBLE_REPLICA = 107
INVALID_VOTER_KEY = 125
DUPLICATE_VOTER = 126
VOTER_NOT_FOUND = 127
PREFERRED_LEADER_NOT_AVAILABLE = 80
ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85
NEW_LEADER_ELECTED = 108
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
BROKER_ID_NOT_REGISTERED = 102
GROUP_SUBSCRIBED_TO_TOPIC = 86
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
FENCED_INSTANCE_ID = 82
UNSUPPORTED_ASSIGNOR = 112
STALE_MEMBER_EPOCH = 113
INVALID_RECORD_STATE, SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH = 121, 122, 123

ERROR_NAMES = {v: k for k, v in dict(globals()).items() if isinstance(v, int) and k.isupper()
               and k not in ("MAX_FRAME_BYTES",)}


class MessageError(ValueError):
    """A frame that does not decode to a known message: the peer's fault."""


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str
    correlation_id: int
    candidate_epoch: int
    candidate_id: int
    candidate_directory_id: str | None
    voter_id: int
    voter_directory_id: str | None
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    correlation_id: int
    error: int
    leader_epoch: int
    leader_id: int  # -1 unknown
    vote_granted: bool
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str
    correlation_id: int
    leader_epoch: int
    leader_id: int
    voter_id: int
    voter_directory_id: str | None


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    correlation_id: int
    error: int
    leader_epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str
    correlation_id: int
    leader_epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    correlation_id: int
    error: int
    leader_epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str
    correlation_id: int
    replica_id: int
    replica_directory_id: str | None
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    correlation_id: int
    error: int
    leader_epoch: int
    leader_id: int
    high_watermark: int  # -1 unknown
    log_start_offset: int
    records: bytes
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    snapshot_offset: int = -1
    snapshot_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    cluster_id: str
    correlation_id: int
    replica_id: int
    epoch: int
    snapshot_offset: int
    snapshot_epoch: int
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    correlation_id: int
    error: int
    leader_epoch: int
    leader_id: int
    snapshot_offset: int
    snapshot_epoch: int
    size: int
    position: int
    data: bytes


@dataclass(frozen=True, slots=True)
class RegisterRequest:
    """A register operation from a client: op is "read", "write" or "cas"."""
    request_id: int
    op: str
    key: str
    value: int | None = None
    expected: int | None = None


@dataclass(frozen=True, slots=True)
class RegisterResponse:
    """``outcome`` is "ok", "fail" (definitely not applied) or "unknown" (may have been)."""
    request_id: int
    outcome: str
    error: int
    value: int | None = None
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ForwardRegisterRequest:
    """A node that is not the active controller passes a client's register request on."""
    correlation_id: int
    op: str
    key: str
    value: int | None
    expected: int | None


@dataclass(frozen=True, slots=True)
class ForwardRegisterResponse:
    correlation_id: int
    outcome: str
    error: int
    value: int | None
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class DescribeQuorumRequest:
    request_id: int


@dataclass(frozen=True, slots=True)
class DescribeQuorumResponse:
    request_id: int
    node_id: int
    role: str
    epoch: int
    leader_id: int
    high_watermark: int
    log_end_offset: int
    log_start_offset: int
    committed_offset: int
    wall_clock_ms: int = 0  # the node's wall clock when it answered (runtime only; the clock
    # nemesis skews it, and the harness reads the skew from here)
    broker_state: str = ""  # the broker role's lifecycle state, Kafka's BrokerState: STARTING
    # (not registered yet), RECOVERY (registered, fenced), RUNNING (unfenced); "" without it


# ---------------------------------------------------------------- broker <-> controller
# Kafka's BrokerRegistration, BrokerHeartbeat, AlterPartition and AllocateProducerIds,
# flattened to one partition per AlterPartition, and (in ``admin_messages``) the admin
# requests a broker forwards to the controller. Nested fields are tuples of rows; _ROWS
# gives each row's field types.

@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    correlation_id: int
    broker_id: int
    incarnation_id: str
    endpoints: tuple  # rows (listener name, host, port)
    rack: str | None
    previous_broker_epoch: int = -1  # of a clean shutdown just before; -1: it crashed


@dataclass(frozen=True, slots=True)
class BrokerRegistrationResponse:
    correlation_id: int
    error: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    correlation_id: int
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shutdown: bool


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponse:
    correlation_id: int
    error: int
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


@dataclass(frozen=True, slots=True)
class QuorumStateRequest:
    """A broker asks the quorum leader for Kafka's DescribeQuorum answer."""
    correlation_id: int


@dataclass(frozen=True, slots=True)
class QuorumStateResponse:
    correlation_id: int
    error: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    # rows (id, directory id or "", log end offset, last fetch wall ms or -1, last caught-up
    # wall ms or -1)
    voters: tuple
    observers: tuple
    nodes: tuple  # rows (voter id, host, port): the voters' CONTROLLER listeners


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    correlation_id: int
    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    new_isr: tuple
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    correlation_id: int
    error: int
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsRequest:
    correlation_id: int
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsResponse:
    correlation_id: int
    error: int
    producer_id_start: int
    producer_id_len: int


# ---------------------------------------------------------------- broker <-> broker

@dataclass(frozen=True, slots=True)
class ReplicaFetchRequest:
    """A follower's Fetch (Kafka's Fetch with replica_id set), for every partition it
    follows on the destination leader."""
    correlation_id: int
    replica_id: int
    broker_epoch: int
    max_wait_ms: int
    # rows (topic, partition, current leader epoch, fetch offset, last fetched epoch,
    #       the follower's log start offset)
    partitions: tuple


@dataclass(frozen=True, slots=True)
class ReplicaFetchResponse:
    correlation_id: int
    error: int
    # rows (topic, partition, error, high watermark, log start offset,
    #       diverging epoch (-1 none), diverging end offset, records)
    partitions: tuple


@dataclass(frozen=True, slots=True)
class WriteTxnMarkersRequest:
    """A transaction coordinator to a partition leader: append a COMMIT or ABORT marker of
    this producer to each partition (Kafka's WriteTxnMarkers, one marker per request)."""
    correlation_id: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple  # rows (topic, partition)


@dataclass(frozen=True, slots=True)
class WriteTxnMarkersResponse:
    correlation_id: int
    partitions: tuple  # rows (topic, partition, error)


TYPES: tuple[type, ...] = (
    VoteRequest, VoteResponse, BeginQuorumEpochRequest, BeginQuorumEpochResponse,
    EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest, FetchResponse,
    FetchSnapshotRequest, FetchSnapshotResponse, RegisterRequest, RegisterResponse,
    DescribeQuorumRequest, DescribeQuorumResponse, ForwardRegisterRequest,
    ForwardRegisterResponse, BrokerRegistrationRequest, BrokerRegistrationResponse,
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, CreateTopicsRequest, CreateTopicsResponse,
    AlterPartitionRequest, AlterPartitionResponse, AllocateProducerIdsRequest,
    AllocateProducerIdsResponse, ReplicaFetchRequest, ReplicaFetchResponse,
    WriteTxnMarkersRequest, WriteTxnMarkersResponse, CreatePartitionsRequest,
    CreatePartitionsResponse, AlterConfigsRequest, AlterConfigsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, QuorumStateRequest, QuorumStateResponse, ElectLeadersRequest,
    ElectLeadersResponse, AlterReassignmentsRequest, AlterReassignmentsResponse,
    ListReassignmentsRequest, ListReassignmentsResponse, UpdateFeaturesRequest,
    UpdateFeaturesResponse, AddRaftVoterRequest, RemoveRaftVoterRequest, RaftVoterResponse,
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    UnregisterBrokerRequest, UnregisterBrokerResponse, UpdateRaftVoterRequest,
    UpdateRaftVoterResponse, AlterScramRequest, AlterScramResponse, ShareStateReadRequest,
    ShareStateReadResponse, ShareStateWriteRequest, ShareStateWriteResponse,
    AlterQuotasRequest, AlterQuotasResponse,
)
_ROWS: dict[tuple[type, str], tuple] = {
    **ADMIN_ROWS,
    (BrokerRegistrationRequest, "endpoints"): ("str", "str", "int"),
    (QuorumStateResponse, "voters"): ("int", "str", "int", "int", "int"),
    (QuorumStateResponse, "observers"): ("int", "str", "int", "int", "int"),
    (QuorumStateResponse, "nodes"): ("int", "str", "int"),
    (ReplicaFetchRequest, "partitions"): ("str", "int", "int", "int", "int", "int"),
    (WriteTxnMarkersRequest, "partitions"): ("str", "int"),
    (ShareStateReadResponse, "batches"): ("int", "int", "int", "int"),
    (ShareStateWriteRequest, "batches"): ("int", "int", "int", "int"),
    (WriteTxnMarkersResponse, "partitions"): ("str", "int", "int"),
    (ReplicaFetchResponse, "partitions"): ("str", "int", "int", "int", "int", "int", "int", "bytes"),
}
_TAG = {t: i for i, t in enumerate(TYPES)}
_FIELDS = {t: tuple(f.name for f in dataclasses.fields(t)) for t in TYPES}


def encode(msg, stamp: list[int] | None = None) -> bytes:
    """One frame: the length, then ``[type tag, fields..., stamp?]``. ``stamp``: the sender's
    ``[node id, Lamport time]`` (``rpc_journal``), carried as a last element."""
    t = type(msg)
    parts = [_TAG[t], *(getattr(msg, f) for f in _FIELDS[t])]
    if stamp is not None:
        parts.append(stamp)
    body = msgpack.packb(parts, use_bin_type=True)
    return len(body).to_bytes(4, "big") + body


def decode(body: bytes):
    """Decode one frame body (without the length prefix); a stamp is dropped."""
    return decode_stamped(body)[0]


def decode_stamped(body: bytes):
    """(message, the sender's stamp ``[node id, Lamport time]`` or None)."""
    try:
        parts = msgpack.unpackb(body, raw=False, use_list=True)
    except Exception as exc:  # msgpack raises several types for garbage
        raise MessageError(f"frame is not msgpack: {exc}") from None
    if not isinstance(parts, list) or not parts or not isinstance(parts[0], int):
        raise MessageError("frame is not a [type tag, fields...] array")
    tag = parts[0]
    if not 0 <= tag < len(TYPES):
        raise MessageError(f"unknown message type tag {tag}")
    t = TYPES[tag]
    names = _FIELDS[t]
    values = parts[1:]
    stamp = None
    if len(values) == len(names) + 1:
        stamp = values.pop()
        if not (isinstance(stamp, list) and len(stamp) == 2
                and all(type(x) is int for x in stamp)):
            raise MessageError(f"{t.__name__}: its last element {stamp!r} is not a stamp "
                               f"[node id, Lamport time]")
    if len(values) != len(names):
        raise MessageError(f"{t.__name__} needs {len(names)} fields, got {len(values)}")
    kwargs = dict(zip(names, values))
    for f in dataclasses.fields(t):
        kwargs[f.name] = _check_type(t, f.name, str(f.type), kwargs[f.name])
        rows = _ROWS.get((t, f.name))
        if rows is not None:
            for row in kwargs[f.name]:
                if not isinstance(row, tuple) or len(row) != len(rows):
                    raise MessageError(f"{t.__name__}.{f.name}: row {row!r} needs {len(rows)} fields")
                for i, (ann, v) in enumerate(zip(rows, row)):
                    _check_type(t, f"{f.name}[{i}]", ann, v)
    return t(**kwargs), stamp


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def _check_type(t, name: str, ann: str, value):
    """``value`` if it has the annotated type (lists become tuples); MessageError if not."""
    ok = True
    if ann == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif ann == "bool":
        ok = isinstance(value, bool)
    elif ann == "str":
        ok = isinstance(value, str)
    elif ann == "bytes":
        ok = isinstance(value, bytes)
    elif ann in ("str | None",):
        ok = value is None or isinstance(value, str)
    elif ann in ("int | None",):
        ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
    elif ann == "tuple":
        ok = isinstance(value, (list, tuple))
        value = _tuples(value) if ok else value
    elif ann.startswith("tuple"):
        ok = isinstance(value, (list, tuple)) and all(
            isinstance(x, int) and not isinstance(x, bool) for x in value)
        value = tuple(value) if ok else value
    if not ok:
        raise MessageError(f"{t.__name__}.{name} has the wrong type: {value!r}")
    return value
