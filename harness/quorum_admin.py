"""Changes of the cluster's membership from the outside: DescribeQuorum, AddRaftVoter and
RemoveRaftVoter (KIP-853's dynamic quorum), UnregisterBroker (a broker decommissioned) and
UpdateFeatures (KIP-584's feature levels raised), over the Kafka protocol, through any
broker (it forwards them to the quorum leader, as Kafka's brokers do).

No Python Kafka client sends AddRaftVoter, RemoveRaftVoter or UnregisterBroker, so these go
through
kafka-python's connection manager with the node's own message classes
(``node_image.kafka_codec``, Kafka's schemas); DescribeQuorum is kafka-python's
``describe_metadata_quorum``. A joining controller's directory id, when not given, is read
from DescribeQuorum's observers (v2 carries it), as ``kafka-metadata-quorum add-controller``
reads it from the controller's own meta.properties.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass


class QuorumChangeError(RuntimeError):
    """The quorum leader refused a change, or it could not be asked; ``code`` is Kafka's
    error code (None: no answer)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Quorum:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: dict[int, dict]  # id -> {"log_end_offset", "replica_directory_id", ...}
    observers: dict[int, dict]
    endpoints: dict[int, tuple[str, int]]


def _admin(bootstrap: str, timeout_ms: int):
    from kafka import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms,
                            client_id="chaoskraft-quorum")


def describe(bootstrap: str, timeout_ms: int = 10_000, wait_s: float = 10.0) -> Quorum:
    """DescribeQuorum; while no quorum leader answers (an election), asked again for up to
    ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        admin = _admin(bootstrap, timeout_ms)
        try:
            answer = admin.describe_metadata_quorum()
        finally:
            admin.close()
        [topic] = answer["topics"]
        [p] = topic["partitions"]
        if not p.get("error"):
            break
        if time.monotonic() > deadline:
            raise QuorumChangeError(f"DescribeQuorum: {p['error']}")
        time.sleep(0.3)

    def rows(key):
        return {r["replica_id"]: {**r, "replica_directory_id": str(r["replica_directory_id"])}
                for r in p[key]}
    endpoints = {}
    for node in answer.get("nodes") or ():
        for listener in node["listeners"]:
            endpoints[node["node_id"]] = (listener["host"], listener["port"])
    return Quorum(p["leader_id"], p["leader_epoch"], p["high_watermark"], rows("current_voters"),
                  rows("observers"), endpoints)


def _send(bootstrap: str, request, timeout_ms: int):
    from kafka.errors import KafkaError, for_code
    what = type(request).__name__.removesuffix('Request')
    admin = None
    try:
        admin = _admin(bootstrap, timeout_ms)
        response = admin._manager.run(admin._manager.send, request)
    except KafkaError as exc:  # the client's own: no answer (no broker it was given is up,
        # or the request went to one that is down)
        raise QuorumChangeError(f"{what}: no answer: {exc!r}") from None
    finally:
        if admin is not None:
            admin.close()
    if response.error_code != 0:
        name = for_code(response.error_code).__name__
        raise QuorumChangeError(f"{what}: {name}: "
                                f"{response.error_message}", response.error_code)


def add_controller(bootstrap: str, voter_id: int, host: str, port: int,
                   directory_id: str | None = None, timeout_ms: int = 30_000) -> None:
    """AddRaftVoter: ``voter_id`` (fetching as an observer, caught up) joins the voters;
    returns once the new voter set is committed."""
    from node_image.kafka_codec import AddRaftVoterRequest
    if directory_id is None:
        q = describe(bootstrap)
        replica = q.observers.get(voter_id) or q.voters.get(voter_id)
        if replica is None:  # as the leader answers a node that does not fetch: ask again
            raise QuorumChangeError(f"{voter_id} does not fetch from the quorum leader "
                                    f"(not among DescribeQuorum's observers)", 7)
        directory_id = _known_directory(voter_id, replica)
    _send(bootstrap, AddRaftVoterRequest(
        cluster_id=None, timeout_ms=timeout_ms, voter_id=voter_id,
        voter_directory_id=uuid.UUID(directory_id),
        listeners=[AddRaftVoterRequest.Listener(name="CONTROLLER", host=host, port=port)],
        ack_when_committed=True), timeout_ms + 5_000)


def remove_controller(bootstrap: str, voter_id: int, directory_id: str | None = None,
                      timeout_ms: int = 30_000) -> None:
    """RemoveRaftVoter; returns once the new voter set is committed."""
    from node_image.kafka_codec import RemoveRaftVoterRequest
    if directory_id is None:
        q = describe(bootstrap)
        replica = q.voters.get(voter_id) or q.observers.get(voter_id)
        if replica is None:
            raise QuorumChangeError(f"{voter_id} is neither a voter nor an observer", 127)
        directory_id = _known_directory(voter_id, replica)
    _send(bootstrap, RemoveRaftVoterRequest(
        cluster_id=None, voter_id=voter_id, voter_directory_id=uuid.UUID(directory_id)),
        timeout_ms)


def unregister_broker(bootstrap: str, broker_id: int, timeout_ms: int = 10_000) -> None:
    """UnregisterBroker, as ``kafka-cluster unregister --id``: the broker leaves every ISR and
    the cluster's metadata; returns once that is committed. A broker still running
    registers again (as a new broker), so stop it first."""
    from node_image.kafka_codec import UnregisterBrokerRequest
    _send(bootstrap, UnregisterBrokerRequest(broker_id=broker_id), timeout_ms)


def update_features(bootstrap: str, updates: list[tuple[str, int, int]],
                    timeout_ms: int = 10_000) -> None:
    """UpdateFeatures, as ``kafka-features upgrade`` / ``downgrade`` sends it: rows (feature,
    level, upgrade type: 1 upgrade, 2 safe downgrade); all or nothing; returns once the new
    levels are committed (kafka-python's ``update_features``)."""
    from kafka.admin import UpdateFeatureType
    from kafka.errors import KafkaError
    kinds = {1: UpdateFeatureType.UPGRADE, 2: UpdateFeatureType.SAFE_DOWNGRADE,
             3: UpdateFeatureType.UNSAFE_DOWNGRADE}
    admin = None
    try:
        admin = _admin(bootstrap, timeout_ms)
        answers = admin.update_features({name: (kinds[kind], level)
                                         for name, level, kind in updates},
                                        timeout_ms=timeout_ms)
    except KafkaError as exc:
        code = getattr(exc, "errno", None)
        raise QuorumChangeError(f"UpdateFeatures: {type(exc).__name__}: {exc}",
                                code if code and code > 0 else None) from None
    finally:
        if admin is not None:
            admin.close()
    refused = {name: why for name, why in answers.items() if why != "OK"}
    if refused:  # a row refused (v0-1 answer per feature): Kafka's INVALID_UPDATE_VERSION
        raise QuorumChangeError(f"UpdateFeatures: {refused}", 95)


def _known_directory(voter_id: int, replica: dict) -> str:
    """A replica's directory id as DescribeQuorum gave it; one the quorum leader does not
    know yet (a new leader before the replica's first fetch from it) is asked again, as an
    answer that did not come (code None)."""
    directory_id = replica["replica_directory_id"]
    if directory_id in ("", "None"):
        raise QuorumChangeError(f"the quorum leader does not know {voter_id}'s directory id "
                                f"yet (it has not fetched from it)")
    return directory_id


def retrying(change, *args, deadline_s: float = 60.0, done: tuple[int, ...] = (),
             **kwargs) -> int:
    """Run ``change`` until the leader takes it: REQUEST_TIMED_OUT (a change pending, the
    epoch not committed, a voter not caught up), NOT_CONTROLLER / NOT_LEADER and no answer
    at all (the request went to a broker that is down) are asked again; an error in
    ``done`` after a first attempt whose outcome is unknown means that
    attempt took effect (DUPLICATE_VOTER 126 for an add, VOTER_NOT_FOUND 127 for a
    removal). Returns the number of attempts."""
    deadline = time.monotonic() + deadline_s
    attempts = 0
    while True:
        attempts += 1
        try:
            change(*args, **kwargs)
            return attempts
        except QuorumChangeError as exc:
            if attempts > 1 and exc.code in done:
                return attempts
            if exc.code not in (7, 41, 6, None) or time.monotonic() > deadline:
                raise
        time.sleep(0.5)
