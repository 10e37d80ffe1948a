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

MAX_FRAME_BYTES = 64 * 1024 * 1024

# Error codes, named and numbered as Kafka's Errors.
NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
NOT_CONTROLLER = 41
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
INCONSISTENT_VOTER_SET = 94
INCONSISTENT_CLUSTER_ID = 104
SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
INVALID_VOTER_KEY = 115

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


TYPES: tuple[type, ...] = (
    VoteRequest, VoteResponse, BeginQuorumEpochRequest, BeginQuorumEpochResponse,
    EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest, FetchResponse,
    FetchSnapshotRequest, FetchSnapshotResponse, RegisterRequest, RegisterResponse,
    DescribeQuorumRequest, DescribeQuorumResponse, ForwardRegisterRequest,
    ForwardRegisterResponse,
)
_TAG = {t: i for i, t in enumerate(TYPES)}
_FIELDS = {t: tuple(f.name for f in dataclasses.fields(t)) for t in TYPES}
_TUPLE_FIELDS = {EndQuorumEpochRequest: ("preferred_successors",)}


def encode(msg) -> bytes:
    t = type(msg)
    body = msgpack.packb([_TAG[t], *(getattr(msg, f) for f in _FIELDS[t])], use_bin_type=True)
    return len(body).to_bytes(4, "big") + body


def decode(body: bytes):
    """Decode one frame body (without the length prefix)."""
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
    if len(values) != len(names):
        raise MessageError(f"{t.__name__} needs {len(names)} fields, got {len(values)}")
    kwargs = dict(zip(names, values))
    for name in _TUPLE_FIELDS.get(t, ()):
        if not isinstance(kwargs[name], list):
            raise MessageError(f"{t.__name__}.{name} must be a list")
        kwargs[name] = tuple(kwargs[name])
    for f in dataclasses.fields(t):
        _check_type(t, f, kwargs[f.name])
    return t(**kwargs)


def _check_type(t, f, value) -> None:
    ann = str(f.type)
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
    elif ann.startswith("tuple"):
        ok = all(isinstance(x, int) for x in value)
    if not ok:
        raise MessageError(f"{t.__name__}.{f.name} has the wrong type: {value!r}")
