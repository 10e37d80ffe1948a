"""The Kafka wire protocol on the client listener: request decoding and response encoding.

The message classes are kafka-python's (a generated, two-way layer built
from Kafka's own JSON schemas, pinned in pyproject.toml and copied into the
node image); this module is the only place that imports them, so the rest of
the node sees one small interface:

- :func:`decode_request` turns a frame body (without its 4-byte length) into
  a :class:`KafkaRequest` (api key, version, correlation id, client id, and
  the decoded body), or raises :class:`RequestError` saying what was wrong
  and whether the client gets an error response or a closed connection.
- :func:`encode_response` frames a response body for a request.

Supported versions are the ones in :data:`SUPPORTED`. For the group, coordinator and
transaction APIs, ListOffsets, CreateTopics, Metadata, ApiVersions and the admin APIs: the
versions a Kafka 4 broker answers, flexible ones included, up to where a version brings a
feature the node does not have (KIP-890's second transaction protocol: EndTxn and
TxnOffsetCommit v5; AddPartitionsToTxn v4+, which only brokers send). FindCoordinator v6
is answered, its share-state keys (KIP-932) refused; ShareGroupHeartbeat, ShareFetch
and ShareAcknowledge v1, as librdkafka's share consumer speaks them, and
ShareGroupDescribe v1 and DescribeShareGroupOffsets v0. Produce up to v12 (v10+ tell a producer at a broker that no longer leads where
the leader is, KIP-951; v12 is v11 while no ``transaction.version`` 2 is finalized, and none
is) and Fetch up to v17 (topics by id from v13, the leader's hint from v16). A node may
advertise less than it answers (:func:`api_versions_body`'s ``caps``: Metadata v8 by
default, see the node's ``chaoskraft.metadata.max.version``). As Kafka brokers do, an
ApiVersions request of a version we do not know is answered with a v0 body carrying
UNSUPPORTED_VERSION and our version ranges; any other unknown api key or version closes the
connection.
"""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from kafka.protocol.admin import (AlterConfigsRequest, AlterConfigsResponse,
                                  AlterPartitionReassignmentsRequest,
                                  AlterPartitionReassignmentsResponse,
                                  ListPartitionReassignmentsRequest,
                                  ListPartitionReassignmentsResponse,
                                  UpdateFeaturesRequest, UpdateFeaturesResponse,
                                  AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse,
                                  DeleteAclsRequest, DeleteAclsResponse,
                                  DeleteGroupsRequest, DeleteGroupsResponse,
                                  DeleteRecordsRequest, DeleteRecordsResponse,
                                  DeleteTopicsRequest, DeleteTopicsResponse,
                                  CreateAclsRequest, CreateAclsResponse,
                                  CreatePartitionsRequest, CreatePartitionsResponse,
                                  CreateTopicsRequest, CreateTopicsResponse,
                                  DescribeAclsRequest, DescribeAclsResponse,
                                  DescribeClusterRequest, DescribeClusterResponse,
                                  DescribeConfigsRequest, DescribeConfigsResponse,
                                  DescribeGroupsRequest, DescribeGroupsResponse,
                                  DescribeLogDirsRequest, DescribeLogDirsResponse,
                                  DescribeProducersRequest, DescribeProducersResponse,
                                  DescribeQuorumRequest, DescribeQuorumResponse,
                                  DescribeTopicPartitionsRequest,
                                  DescribeTopicPartitionsResponse,
                                  IncrementalAlterConfigsRequest,
                                  IncrementalAlterConfigsResponse,
                                  DescribeTransactionsRequest, DescribeTransactionsResponse,
                                  ElectLeadersRequest, ElectLeadersResponse,
                                  ListGroupsRequest, ListGroupsResponse, ListTransactionsRequest,
                                  ListTransactionsResponse,
                                  DescribeUserScramCredentialsRequest,
                                  DescribeUserScramCredentialsResponse,
                                  AlterUserScramCredentialsRequest,
                                  AlterUserScramCredentialsResponse,
                                  ListConfigResourcesRequest, ListConfigResourcesResponse,
                                  DescribeClientQuotasRequest, DescribeClientQuotasResponse,
                                  AlterClientQuotasRequest, AlterClientQuotasResponse)
from kafka.protocol.api_data import ApiData
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import (FetchRequest, FetchResponse, HeartbeatRequest,
                                     HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
                                     LeaveGroupRequest, LeaveGroupResponse, ListOffsetsRequest,
                                     ListOffsetsResponse, OffsetCommitRequest,
                                     OffsetCommitResponse, OffsetDeleteRequest,
                                     OffsetDeleteResponse, OffsetFetchRequest,
                                     OffsetFetchResponse, OffsetForLeaderEpochRequest,
                                     OffsetForLeaderEpochResponse, SyncGroupRequest,
                                     SyncGroupResponse)
from kafka.protocol.metadata import (ApiVersionsRequest, ApiVersionsResponse,
                                     FindCoordinatorRequest, FindCoordinatorResponse,
                                     MetadataRequest, MetadataResponse)
from kafka.protocol.producer import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse,
                                     AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
                                     EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
                                     InitProducerIdResponse, ProduceRequest, ProduceResponse,
                                     TxnOffsetCommitRequest, TxnOffsetCommitResponse)

_SCHEMAS = "node_image.kafka_schemas"


class AddRaftVoterRequest(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class AddRaftVoterResponse(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class RemoveRaftVoterRequest(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class RemoveRaftVoterResponse(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class ConsumerGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class ConsumerGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class UnregisterBrokerRequest(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class UnregisterBrokerResponse(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class ShareGroupHeartbeatRequest(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class ShareGroupHeartbeatResponse(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class ShareGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class ShareGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class ShareFetchRequest(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class ShareFetchResponse(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class ShareAcknowledgeRequest(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701
class ShareAcknowledgeResponse(ApiMessage, load_json=_SCHEMAS): pass  # noqa: E701


# the values of a KIP-848 group's records in __consumer_offsets (Kafka's schemas; each
# value starts with its int16 version, as ApiData encodes it)
class ConsumerGroupMetadataValue(ApiData, load_json=_SCHEMAS): pass  # noqa: E701
class ConsumerGroupPartitionMetadataValue(ApiData, load_json=_SCHEMAS): pass  # noqa: E701
class ConsumerGroupMemberMetadataValue(ApiData, load_json=_SCHEMAS): pass  # noqa: E701
class ConsumerGroupTargetAssignmentMetadataValue(ApiData, load_json=_SCHEMAS): pass  # noqa: E701,E501
class ConsumerGroupTargetAssignmentMemberValue(ApiData, load_json=_SCHEMAS): pass  # noqa: E701
class ConsumerGroupCurrentMemberAssignmentValue(ApiData, load_json=_SCHEMAS): pass  # noqa: E701
# ... and of a KIP-932 share group's (record types 9-14)
class ShareGroupPartitionMetadataValue(ApiData, load_json=_SCHEMAS): pass  # noqa: E701
class ShareGroupMemberMetadataValue(ApiData, load_json=_SCHEMAS): pass  # noqa: E701
class ShareGroupMetadataValue(ApiData, load_json=_SCHEMAS): pass  # noqa: E701
class ShareGroupTargetAssignmentMetadataValue(ApiData, load_json=_SCHEMAS): pass  # noqa: E701
class ShareGroupTargetAssignmentMemberValue(ApiData, load_json=_SCHEMAS): pass  # noqa: E701
class ShareGroupCurrentMemberAssignmentValue(ApiData, load_json=_SCHEMAS): pass  # noqa: E701


PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 11, 12, 13, 14, 15, 16
API_VERSIONS, CREATE_TOPICS, INIT_PRODUCER_ID = 18, 19, 22
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DESCRIBE_CONFIGS, ALTER_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 37, 44
LIST_CONFIG_RESOURCES = 74
DESCRIBE_CLUSTER, DELETE_TOPICS, DESCRIBE_QUORUM = 60, 20, 55
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH, DELETE_GROUPS, OFFSET_DELETE = 21, 23, 42, 47
ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS, DESCRIBE_TOPIC_PARTITIONS = 34, 35, 75
ELECT_LEADERS = 43
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46
UPDATE_FEATURES = 57
ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 80, 81
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
UNREGISTER_BROKER = 64
SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 77, 78, 79
DESCRIBE_SHARE_GROUP_OFFSETS = 90
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49

# api key -> (min version, max version, request class, response class)
SUPPORTED: dict[int, tuple[int, int, type, type]] = {
    PRODUCE: (3, 12, ProduceRequest, ProduceResponse),
    FETCH: (4, 17, FetchRequest, FetchResponse),
    LIST_OFFSETS: (1, 10, ListOffsetsRequest, ListOffsetsResponse),
    METADATA: (0, 13, MetadataRequest, MetadataResponse),
    OFFSET_COMMIT: (2, 9, OffsetCommitRequest, OffsetCommitResponse),
    OFFSET_FETCH: (1, 9, OffsetFetchRequest, OffsetFetchResponse),
    FIND_COORDINATOR: (0, 6, FindCoordinatorRequest, FindCoordinatorResponse),
    JOIN_GROUP: (0, 9, JoinGroupRequest, JoinGroupResponse),
    HEARTBEAT: (0, 4, HeartbeatRequest, HeartbeatResponse),
    LEAVE_GROUP: (0, 5, LeaveGroupRequest, LeaveGroupResponse),
    SYNC_GROUP: (0, 5, SyncGroupRequest, SyncGroupResponse),
    DESCRIBE_GROUPS: (0, 6, DescribeGroupsRequest, DescribeGroupsResponse),
    LIST_GROUPS: (0, 5, ListGroupsRequest, ListGroupsResponse),
    API_VERSIONS: (0, 4, ApiVersionsRequest, ApiVersionsResponse),
    CREATE_TOPICS: (2, 7, CreateTopicsRequest, CreateTopicsResponse),
    INIT_PRODUCER_ID: (0, 5, InitProducerIdRequest, InitProducerIdResponse),
    ADD_PARTITIONS_TO_TXN: (0, 3, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
    ADD_OFFSETS_TO_TXN: (0, 4, AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
    END_TXN: (0, 4, EndTxnRequest, EndTxnResponse),
    TXN_OFFSET_COMMIT: (0, 4, TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    DESCRIBE_CONFIGS: (1, 4, DescribeConfigsRequest, DescribeConfigsResponse),
    CREATE_PARTITIONS: (0, 3, CreatePartitionsRequest, CreatePartitionsResponse),
    ALTER_CONFIGS: (0, 2, AlterConfigsRequest, AlterConfigsResponse),
    DELETE_TOPICS: (1, 6, DeleteTopicsRequest, DeleteTopicsResponse),
    DESCRIBE_QUORUM: (0, 2, DescribeQuorumRequest, DescribeQuorumResponse),
    INCREMENTAL_ALTER_CONFIGS: (0, 1, IncrementalAlterConfigsRequest,
                                IncrementalAlterConfigsResponse),
    DESCRIBE_CLUSTER: (0, 2, DescribeClusterRequest, DescribeClusterResponse),
    DESCRIBE_PRODUCERS: (0, 0, DescribeProducersRequest, DescribeProducersResponse),
    DESCRIBE_TRANSACTIONS: (0, 0, DescribeTransactionsRequest, DescribeTransactionsResponse),
    LIST_TRANSACTIONS: (0, 2, ListTransactionsRequest, ListTransactionsResponse),
    DELETE_RECORDS: (0, 2, DeleteRecordsRequest, DeleteRecordsResponse),
    OFFSET_FOR_LEADER_EPOCH: (2, 4, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    DELETE_GROUPS: (0, 2, DeleteGroupsRequest, DeleteGroupsResponse),
    OFFSET_DELETE: (0, 0, OffsetDeleteRequest, OffsetDeleteResponse),
    ALTER_REPLICA_LOG_DIRS: (1, 2, AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse),
    DESCRIBE_LOG_DIRS: (1, 4, DescribeLogDirsRequest, DescribeLogDirsResponse),
    DESCRIBE_TOPIC_PARTITIONS: (0, 0, DescribeTopicPartitionsRequest,
                                DescribeTopicPartitionsResponse),
    ELECT_LEADERS: (0, 2, ElectLeadersRequest, ElectLeadersResponse),
    DESCRIBE_ACLS: (1, 3, DescribeAclsRequest, DescribeAclsResponse),
    CREATE_ACLS: (1, 3, CreateAclsRequest, CreateAclsResponse),
    DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0, DescribeUserScramCredentialsRequest,
                                      DescribeUserScramCredentialsResponse),
    ALTER_USER_SCRAM_CREDENTIALS: (0, 0, AlterUserScramCredentialsRequest,
                                   AlterUserScramCredentialsResponse),
    DELETE_ACLS: (1, 3, DeleteAclsRequest, DeleteAclsResponse),
    DESCRIBE_CLIENT_QUOTAS: (0, 1, DescribeClientQuotasRequest, DescribeClientQuotasResponse),
    ALTER_CLIENT_QUOTAS: (0, 1, AlterClientQuotasRequest, AlterClientQuotasResponse),
    ALTER_PARTITION_REASSIGNMENTS: (0, 1, AlterPartitionReassignmentsRequest,
                                    AlterPartitionReassignmentsResponse),
    LIST_PARTITION_REASSIGNMENTS: (0, 0, ListPartitionReassignmentsRequest,
                                   ListPartitionReassignmentsResponse),
    UPDATE_FEATURES: (0, 2, UpdateFeaturesRequest, UpdateFeaturesResponse),
    ADD_RAFT_VOTER: (0, 1, AddRaftVoterRequest, AddRaftVoterResponse),
    REMOVE_RAFT_VOTER: (0, 0, RemoveRaftVoterRequest, RemoveRaftVoterResponse),
    CONSUMER_GROUP_HEARTBEAT: (0, 1, ConsumerGroupHeartbeatRequest,
                               ConsumerGroupHeartbeatResponse),
    CONSUMER_GROUP_DESCRIBE: (0, 0, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse),
    UNREGISTER_BROKER: (0, 0, UnregisterBrokerRequest, UnregisterBrokerResponse),
    SHARE_GROUP_HEARTBEAT: (1, 1, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse),
    SHARE_GROUP_DESCRIBE: (1, 1, ShareGroupDescribeRequest, ShareGroupDescribeResponse),
    DESCRIBE_SHARE_GROUP_OFFSETS: (0, 0, DescribeShareGroupOffsetsRequest,
                                   DescribeShareGroupOffsetsResponse),
    SHARE_FETCH: (1, 1, ShareFetchRequest, ShareFetchResponse),
    SHARE_ACKNOWLEDGE: (1, 1, ShareAcknowledgeRequest, ShareAcknowledgeResponse),
    LIST_CONFIG_RESOURCES: (0, 1, ListConfigResourcesRequest, ListConfigResourcesResponse),
}
# api key -> Kafka's name for it (its request class's name, as Kafka's schemas have it)
API_NAMES = {k: req.__name__.removesuffix("Request") for k, (_, _, req, _) in SUPPORTED.items()}
UNSUPPORTED_VERSION = 35


class RequestError(ValueError):
    """A request we cannot serve: the client's fault. ``response`` is what to answer, if anything
    (None: close the connection)."""

    def __init__(self, message: str, response: bytes | None = None) -> None:
        super().__init__(message)
        self.response = response


@dataclass(frozen=True, slots=True)
class KafkaRequest:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: object  # a kafka-python request instance
    size: int = 0  # the frame's bytes (what a producer's byte-rate quota counts)

    @property
    def name(self) -> str:
        return f"{API_NAMES.get(self.api_key, self.api_key)} v{self.api_version}"


@dataclass(frozen=True, slots=True)
class KafkaResponse:
    request: KafkaRequest
    body: object  # a kafka-python response instance, or None: no response (Produce acks=0)
    # a client quota's throttle (``quota_meter``): the runtime reads no more of the
    # connection for this long, and holds the answer too where the client's version predates
    # KIP-219 (:func:`client_throttles`)
    throttle_ms: int = 0


def response_class(api_key: int, version: int):
    return SUPPORTED[api_key][3][version]


# KIP-848's consumer group protocol names topics by id: a client can follow it only through
# Metadata v12 (a Kafka broker that answers it answers that too)
CONSUMER_PROTOCOL_METADATA = 12


def api_versions_body(version: int, error: int = 0, caps: dict[int, int] | None = None,
                      features: tuple[dict, dict, int] | None = None):
    """The ApiVersions answer: every supported range, the newest versions lowered to
    ``caps`` (api key -> newest version to advertise) where given; from v3 the feature
    levels (KIP-584) of ``features``: (supported name -> (min, max), finalized name ->
    level, the epoch of those finalized levels). With Metadata capped below v12 the
    consumer group protocol's APIs (and the share groups', KIP-932) are left out, so that a client asking for that protocol
    is told the broker lacks it rather than joining a group whose topic ids it cannot read
    (they are still answered when sent)."""
    caps = caps or {}
    hidden = set() if caps.get(METADATA, CONSUMER_PROTOCOL_METADATA) >= \
        CONSUMER_PROTOCOL_METADATA else {CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE,
                                         SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH,
                                         SHARE_ACKNOWLEDGE, DESCRIBE_SHARE_GROUP_OFFSETS}
    R = ApiVersionsResponse
    keys = [R.ApiVersion(api_key=k, min_version=lo, max_version=min(hi, caps.get(k, hi)))
            for k, (lo, hi, _, _) in sorted(SUPPORTED.items()) if k not in hidden]
    extra = {}
    if version >= 3 and features is not None:
        supported, finalized, epoch = features
        extra = {"supported_features": [R.SupportedFeatureKey(name=n, min_version=lo,
                                                              max_version=hi)
                                        for n, (lo, hi) in sorted(supported.items())],
                 "finalized_features_epoch": epoch,
                 "finalized_features": [R.FinalizedFeatureKey(name=n, max_version_level=level,
                                                              min_version_level=level)
                                        for n, level in sorted(finalized.items())]}
    return R[version](error_code=error, api_keys=keys, throttle_time_ms=0, **extra)


def decode_request(frame: bytes) -> KafkaRequest:
    if len(frame) < 8:
        raise RequestError(f"a request header needs 8 bytes, the frame has {len(frame)}")
    api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
    entry = SUPPORTED.get(api_key)
    if entry is None:
        raise RequestError(f"unknown api key {api_key} (correlation id {correlation_id})")
    lo, hi, req_cls, _ = entry
    if not lo <= version <= hi:
        if api_key == API_VERSIONS and version > hi:
            body = api_versions_body(0, UNSUPPORTED_VERSION)
            body.with_header(correlation_id=correlation_id)
            raise RequestError(f"ApiVersions v{version} is newer than v{hi}; answered with v0",
                               bytes(body.encode(header=True, framed=True)))
        raise RequestError(f"{API_NAMES[api_key]} v{version} is not supported (v{lo}-v{hi})")
    try:
        decoded = req_cls.decode(memoryview(frame), version=version, header=True)
    except Exception as exc:  # the parser raises many types on malformed input
        raise RequestError(f"malformed {API_NAMES[api_key]} v{version} request "
                           f"(correlation id {correlation_id}): {type(exc).__name__}: {exc}") from None
    problem = _null_field(decoded, version, API_NAMES[api_key])
    if problem:
        raise RequestError(f"malformed {API_NAMES[api_key]} v{version} request "
                           f"(correlation id {correlation_id}): {problem} is null")
    header = decoded.header
    return KafkaRequest(api_key, version, correlation_id, header.client_id, decoded, len(frame))


def client_throttles(req: KafkaRequest) -> bool:
    """Whether the client waits out a throttle the answer names itself (KIP-219: Produce v6+,
    Fetch v8+); an older client's answer is held by the broker instead."""
    return req.api_version >= {PRODUCE: 6, FETCH: 8}.get(req.api_key, 0)


def _null_field(obj, version: int, path: str) -> str | None:
    """The first field that is null where Kafka's schema does not allow it (kafka-python's
    parser accepts a -1 length anywhere; Kafka's rejects it)."""
    for f in obj._struct._fields:
        if not f.for_version_q(version) or f.tag is not None:
            continue
        value = getattr(obj, f.name)
        where = f"{path}.{f.name}"
        if value is None:
            # kafka-python reads the all-zero uuid (Kafka's "none given") as None; a uuid
            # has no null on the wire
            if not f.nullable_for_version_q(version) and f.type_str != "uuid":
                return where
        elif f.is_struct():
            problem = _null_field(value, version, where)
            if problem:
                return problem
        elif f.is_struct_array():
            for item in value:
                problem = _null_field(item, version, where)
                if problem:
                    return problem
    return None


def encode_response(request: KafkaRequest, body) -> bytes:
    body.API_VERSION = request.api_version
    body.with_header(correlation_id=request.correlation_id)
    return bytes(body.encode(header=True, framed=True))


def encode_request(api_key: int, version: int, body, correlation_id: int = 1,
                   client_id: str = "chaoskraft") -> bytes:
    """A framed request (for tests and tools)."""
    body.API_VERSION = version
    body.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(body.encode(header=True, framed=True))


def decode_response(api_key: int, version: int, frame: bytes):
    """A response body from a frame without its length (for tests and tools)."""
    return SUPPORTED[api_key][3].decode(io.BytesIO(frame) if api_key == API_VERSIONS else frame,
                                        version=version, header=True)


def recv_frame(sock) -> bytes:
    """One response frame from a blocking socket, without its length (for tests and tools);
    ConnectionError when the peer closes first."""
    return _recv_exactly(sock, struct.unpack(">i", _recv_exactly(sock, 4))[0])


def _recv_exactly(sock, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"the peer closed the connection {len(buf)} of {n} bytes in")
        buf += chunk
    return bytes(buf)


__all__ = ["KafkaRequest", "KafkaResponse", "RequestError", "RequestHeader", "SUPPORTED",
           "decode_request", "encode_response", "encode_request", "decode_response", "recv_frame"]
