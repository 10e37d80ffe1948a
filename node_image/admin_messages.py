"""The admin requests a broker forwards to the active controller, and its answers:
CreateTopics, CreatePartitions, AlterConfigs, DeleteTopics, ElectLeaders, the partition
reassignments (altered and listed), UpdateFeatures, the Raft voter changes, ACLs, SCRAM
credentials and client quotas. They travel as every other node message
(``messages.TYPES``); nested fields are tuples of rows whose field types ``ADMIN_ROWS``
gives."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CreateTopicsRequest:
    correlation_id: int
    # rows (name, num partitions, replication factor, configs as ((k, v), ...), and
    # optionally manual replica assignments as ((partition, (broker, ...)), ...))
    topics: tuple
    validate_only: bool
    # the client's id, and whether its version takes THROTTLING_QUOTA_EXCEEDED (KIP-599's
    # strict quota), for its controller_mutation_rate quota (``mutation_quota.py``)
    client_id: str | None = None
    strict: bool = True


@dataclass(frozen=True, slots=True)
class CreateTopicsResponse:
    correlation_id: int
    # rows (name, error, message or None, topic id or None, partitions, replication factor)
    results: tuple
    throttle_ms: int = 0  # the client's controller_mutation_rate quota's


@dataclass(frozen=True, slots=True)
class CreatePartitionsRequest:
    correlation_id: int
    # rows (topic, new total count, assignments: one tuple of broker ids per new partition,
    # or () to let the controller place them)
    topics: tuple
    validate_only: bool
    # the client's id, and whether its version takes THROTTLING_QUOTA_EXCEEDED (KIP-599's
    # strict quota), for its controller_mutation_rate quota (``mutation_quota.py``)
    client_id: str | None = None
    strict: bool = True


@dataclass(frozen=True, slots=True)
class ElectLeadersRequest:
    correlation_id: int
    election: str  # "PREFERRED" or "UNCLEAN"
    every: bool  # every partition (the client named none); else those in ``partitions``
    partitions: tuple  # rows (topic, partition)


@dataclass(frozen=True, slots=True)
class ElectLeadersResponse:
    correlation_id: int
    results: tuple  # rows (topic, partition, error, message or None)


@dataclass(frozen=True, slots=True)
class CreatePartitionsResponse:
    correlation_id: int
    results: tuple  # rows (name, error, message or None)
    throttle_ms: int = 0  # the client's controller_mutation_rate quota's


@dataclass(frozen=True, slots=True)
class AlterConfigsRequest:
    correlation_id: int
    # rows (resource type, resource name, ops: rows (name, operation, value or None)) with
    # Kafka's operations SET 0, DELETE 1, APPEND 2, SUBTRACT 3; ``incremental`` False:
    # AlterConfigs, whose SETs replace the resource's whole set
    resources: tuple
    incremental: bool
    validate_only: bool


@dataclass(frozen=True, slots=True)
class AlterConfigsResponse:
    correlation_id: int
    results: tuple  # rows (resource type, resource name, error, message or None)


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    correlation_id: int
    topics: tuple  # rows (name, topic id): either "" when the request names the other
    # the client's id, and whether its version takes THROTTLING_QUOTA_EXCEEDED (KIP-599's
    # strict quota), for its controller_mutation_rate quota (``mutation_quota.py``)
    client_id: str | None = None
    strict: bool = True


@dataclass(frozen=True, slots=True)
class DeleteTopicsResponse:
    correlation_id: int
    results: tuple  # rows (name, topic id, error, message or None)
    throttle_ms: int = 0  # the client's controller_mutation_rate quota's


@dataclass(frozen=True, slots=True)
class AlterReassignmentsRequest:
    correlation_id: int
    # rows (topic, partition, cancel, target replicas): ``cancel`` True (the client sent
    # null replicas) reverts a reassignment in progress; the replicas are then ()
    partitions: tuple
    allow_rf_change: bool  # False: a target of another replication factor is refused


@dataclass(frozen=True, slots=True)
class AlterReassignmentsResponse:
    correlation_id: int
    results: tuple  # rows (topic, partition, error, message or None)


@dataclass(frozen=True, slots=True)
class ListReassignmentsRequest:
    correlation_id: int
    every: bool  # every partition (the client named no topics); else ``partitions``
    partitions: tuple  # rows (topic, partition)


@dataclass(frozen=True, slots=True)
class ListReassignmentsResponse:
    correlation_id: int
    error: int
    results: tuple  # rows (topic, partition, replicas, adding, removing), in progress only


@dataclass(frozen=True, slots=True)
class UpdateFeaturesRequest:
    correlation_id: int
    updates: tuple  # rows (feature, level, upgrade type: 1 upgrade, 2 safe, 3 unsafe downgrade)
    validate_only: bool


@dataclass(frozen=True, slots=True)
class UpdateFeaturesResponse:
    correlation_id: int
    error: int  # all or nothing, as Kafka's
    message: str | None


@dataclass(frozen=True, slots=True)
class AddRaftVoterRequest:
    """Kafka's AddRaftVoter (KIP-853) to the quorum leader: an observer that has caught up
    joins the voter set."""
    correlation_id: int
    cluster_id: str
    voter_id: int
    voter_directory_id: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class RemoveRaftVoterRequest:
    """Kafka's RemoveRaftVoter (KIP-853) to the quorum leader."""
    correlation_id: int
    cluster_id: str
    voter_id: int
    voter_directory_id: str


@dataclass(frozen=True, slots=True)
class UpdateRaftVoterRequest:
    """Kafka's UpdateRaftVoter (KIP-853): a voter tells the quorum leader its CONTROLLER
    endpoint and the kraft.version levels it supports, when the voter set records others."""
    correlation_id: int
    cluster_id: str
    current_leader_epoch: int
    voter_id: int
    voter_directory_id: str
    host: str
    port: int
    min_kraft_version: int
    max_kraft_version: int


@dataclass(frozen=True, slots=True)
class UpdateRaftVoterResponse:
    """Answered as soon as the new VotersRecord is appended (not once committed), as Kafka's;
    the leader and epoch as the answering node knows them."""
    correlation_id: int
    error: int
    message: str | None
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class RaftVoterResponse:
    """The answer to AddRaftVoter and RemoveRaftVoter: NONE once the new voter set is
    committed."""
    correlation_id: int
    error: int
    message: str | None


@dataclass(frozen=True, slots=True)
class CreateAclsRequest:
    correlation_id: int
    # rows (resource type, name, pattern type, principal, host, operation, permission)
    creations: tuple


@dataclass(frozen=True, slots=True)
class CreateAclsResponse:
    correlation_id: int
    results: tuple  # rows (error, message or None), one per creation


@dataclass(frozen=True, slots=True)
class DeleteAclsRequest:
    correlation_id: int
    filters: tuple  # rows as CreateAcls', None for any name, principal or host


@dataclass(frozen=True, slots=True)
class DeleteAclsResponse:
    correlation_id: int
    results: tuple  # rows (error, message or None, bindings removed as creation rows)


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRequest:
    """Kafka's UnregisterBroker: a broker leaves the cluster's metadata (decommission)."""
    correlation_id: int
    broker_id: int


@dataclass(frozen=True, slots=True)
class UnregisterBrokerResponse:
    correlation_id: int
    error: int
    message: str | None


@dataclass(frozen=True, slots=True)
class AlterScramRequest:
    correlation_id: int
    deletions: tuple  # rows (user, mechanism)
    # rows (user, mechanism, iterations, salt, salted password): scram.py
    upsertions: tuple


@dataclass(frozen=True, slots=True)
class AlterScramResponse:
    correlation_id: int
    results: tuple  # rows (user, error, message or None)


@dataclass(frozen=True, slots=True)
class AlterQuotasRequest:
    correlation_id: int
    entries: tuple  # rows (entity: sorted (type, name) pairs, ops: rows (key, value, remove))
    validate_only: bool


@dataclass(frozen=True, slots=True)
class AlterQuotasResponse:
    correlation_id: int
    results: tuple  # rows (entity, error, message or None)


# The field types of the rows of these messages' nested fields (``messages._ROWS``)
ADMIN_ROWS: dict[tuple[type, str], tuple] = {
    (CreateTopicsRequest, "topics"): ("str", "int", "int", "tuple", "tuple"),
    (CreateTopicsResponse, "results"): ("str", "int", "str | None", "str | None", "int", "int"),
    (CreatePartitionsRequest, "topics"): ("str", "int", "tuple"),
    (CreatePartitionsResponse, "results"): ("str", "int", "str | None"),
    (ElectLeadersRequest, "partitions"): ("str", "int"),
    (ElectLeadersResponse, "results"): ("str", "int", "int", "str | None"),
    (AlterReassignmentsRequest, "partitions"): ("str", "int", "bool", "tuple[int]"),
    (AlterReassignmentsResponse, "results"): ("str", "int", "int", "str | None"),
    (ListReassignmentsRequest, "partitions"): ("str", "int"),
    (UpdateFeaturesRequest, "updates"): ("str", "int", "int"),
    (CreateAclsRequest, "creations"): ("int", "str", "int", "str", "str", "int", "int"),
    (CreateAclsResponse, "results"): ("int", "str | None"),
    (DeleteAclsRequest, "filters"): ("int", "str | None", "int", "str | None", "str | None",
                                     "int", "int"),
    (DeleteAclsResponse, "results"): ("int", "str | None", "tuple"),
    (ListReassignmentsResponse, "results"): ("str", "int", "tuple[int]", "tuple[int]",
                                             "tuple[int]"),
    (AlterConfigsRequest, "resources"): ("int", "str", "tuple"),
    (AlterConfigsResponse, "results"): ("int", "str", "int", "str | None"),
    (DeleteTopicsRequest, "topics"): ("str", "str"),
    (AlterScramRequest, "deletions"): ("str", "int"),
    (AlterScramRequest, "upsertions"): ("str", "int", "int", "bytes", "bytes"),
    (AlterScramResponse, "results"): ("str", "int", "str | None"),
    (DeleteTopicsResponse, "results"): ("str", "str", "int", "str | None"),
    (AlterQuotasRequest, "entries"): ("tuple", "tuple"),
    (AlterQuotasResponse, "results"): ("tuple", "int", "str | None"),
}
