"""The cluster's shape: AlterPartitionReassignments (v0-1) and ListPartitionReassignments
(v0), answered by the active controller (``node_image/reassignment.py``), and UpdateFeatures
(v0-2, ``node_image/features.py``), forwarded there as Kafka's brokers forward them; and
AddRaftVoter (v0-1) / RemoveRaftVoter (v0), forwarded to the quorum leader (the active
controller), whose Raft client answers them (``node_image/raft/reconfig.py``); and
UnregisterBroker. With an authorizer each needs ALTER on the cluster (ListPartitionReassignments
DESCRIBE), else CLUSTER_AUTHORIZATION_FAILED, as Kafka's."""
from __future__ import annotations

from ... import acls
from ... import messages as m
from ...kafka_codec import KafkaRequest
from .acls import AUTHORIZATION_FAILED
from .common import _missing


class ClusterShapeApis:
    """Mixed into :class:`~node_image.broker.kafka_apis.KafkaApis`."""

    def _alter_partition_reassignments(self, src, req: KafkaRequest, now: int) -> None:
        """Each partition's target replicas, or null to cancel; from v1 the client may
        forbid a change of replication factor (INVALID_REPLICATION_FACTOR, KIP-860)."""
        if self._cluster_denied(src, req, acls.ALTER):
            return
        body, v = req.body, req.api_version
        R = self._cls(req)
        T = R.ReassignableTopicResponse
        allow_rf = True if v < 1 else bool(body.allow_replication_factor_change)
        rows = tuple((t.name, p.partition_index, p.replicas is None, tuple(p.replicas or ()))
                     for t in body.topics for p in t.partitions)

        def answer(results, top: int, message: str | None = None) -> None:
            by_topic: dict[str, list] = {}
            for topic, pid, code, text in results:
                by_topic.setdefault(topic, []).append(T.ReassignablePartitionResponse(
                    partition_index=pid, error_code=code, error_message=text))
            extra = {"allow_replication_factor_change": allow_rf} if v >= 1 else {}
            self._reply(src, req, R(throttle_time_ms=0, error_code=top, error_message=message,
                                    responses=[T(name=t, partitions=ps)
                                               for t, ps in by_topic.items()], **extra))
        if len(set((t, p) for t, p, _, _ in rows)) != len(rows):
            answer([], m.INVALID_REQUEST, "a partition is named more than once")
            return

        def reply(resp, error):
            if resp is not None:
                answer(resp.results, m.NONE)
            else:
                code = _missing(error)
                answer([], code, m.ERROR_NAMES.get(code, str(code)))
        self._via_controller(
            now, max(body.timeout_ms, 1000), reply,
            lambda c: m.AlterReassignmentsRequest(c, rows, allow_rf))

    def _list_partition_reassignments(self, src, req: KafkaRequest, now: int) -> None:
        """The reassignments in progress, of the partitions named or of every partition."""
        if self._cluster_denied(src, req, acls.DESCRIBE):
            return
        body = req.body
        R = self._cls(req)
        T = R.OngoingTopicReassignment
        every = body.topics is None
        rows = () if every else tuple(dict.fromkeys(
            (t.name, p) for t in body.topics for p in t.partition_indexes))

        def reply(resp, error):
            code = _missing(error) if resp is None else resp.error
            by_topic: dict[str, list] = {}
            for topic, pid, replicas, adding, removing in (() if resp is None
                                                          else resp.results):
                by_topic.setdefault(topic, []).append(T.OngoingPartitionReassignment(
                    partition_index=pid, replicas=list(replicas), adding_replicas=list(adding),
                    removing_replicas=list(removing)))
            self._reply(src, req, R(
                throttle_time_ms=0, error_code=code,
                error_message=None if code == m.NONE else m.ERROR_NAMES.get(code, str(code)),
                topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]))
        self._via_controller(
            now, max(body.timeout_ms, 1000), reply,
            lambda c: m.ListReassignmentsRequest(c, every, rows))

    def _update_features(self, src, req: KafkaRequest, now: int) -> None:
        """Feature levels finalized through the controller, all or nothing (KIP-584); v0's
        allow_downgrade is v1's safe downgrade; from v2 the answer has no per-feature rows."""
        body, v = req.body, req.api_version
        R = self._cls(req)
        rows = tuple((u.feature, u.max_version_level,
                      u.upgrade_type if v >= 1 else (2 if u.allow_downgrade else 1))
                     for u in body.feature_updates)
        validate_only = bool(body.validate_only) if v >= 1 else False

        def reply(resp, error):
            code, message = (resp.error, resp.message) if resp is not None else (
                _missing(error), None)
            extra = {"results": [R.UpdatableFeatureResult(
                feature=name, error_code=code, error_message=message)
                for name, _, _ in rows]} if v <= 1 else {}
            self._reply(src, req, R(throttle_time_ms=0, error_code=code, error_message=message,
                                    **extra))
        if self._denied(src, acls.ALTER, acls.CLUSTER, acls.CLUSTER_NAME):
            reply(m.UpdateFeaturesResponse(req.correlation_id, m.CLUSTER_AUTHORIZATION_FAILED,
                                           AUTHORIZATION_FAILED), None)
            return
        if len({name for name, _, _ in rows}) != len(rows):
            self._reply(src, req, R(throttle_time_ms=0, error_code=m.INVALID_REQUEST,
                                    error_message="a feature is named more than once",
                                    **({"results": []} if v <= 1 else {})))
            return
        self._via_controller(
            now, max(body.timeout_ms, 1000), reply,
            lambda c: m.UpdateFeaturesRequest(c, rows, validate_only))

    def _add_raft_voter(self, src, req: KafkaRequest, now: int) -> None:
        """AddRaftVoter (KIP-853) through the quorum leader, answered once the new voter set
        is committed (v1's AckWhenCommitted false is answered the same way)."""
        if self._cluster_denied(src, req, acls.ALTER):
            return
        body = req.body
        listeners = list(body.listeners or ())
        chosen = next((x for x in listeners if x.name == "CONTROLLER"),
                      listeners[0] if listeners else None)
        host, port = (chosen.host, chosen.port) if chosen is not None else ("", -1)
        self._via_controller(
            now, max(body.timeout_ms, 1000), self._voter_reply(src, req),
            lambda c: m.AddRaftVoterRequest(c, body.cluster_id or "", body.voter_id,
                                            str(body.voter_directory_id), host, port))

    def _remove_raft_voter(self, src, req: KafkaRequest, now: int) -> None:
        """RemoveRaftVoter (KIP-853) through the quorum leader."""
        if self._cluster_denied(src, req, acls.ALTER):
            return
        body = req.body
        self._via_controller(
            now, self.options.request_timeout_ms, self._voter_reply(src, req),
            lambda c: m.RemoveRaftVoterRequest(c, body.cluster_id or "", body.voter_id,
                                               str(body.voter_directory_id)))

    def _unregister_broker(self, src, req: KafkaRequest, now: int) -> None:
        """UnregisterBroker (decommission) through the active controller, answered once the
        registration's removal is committed; an unknown broker is BROKER_ID_NOT_REGISTERED."""
        if self._cluster_denied(src, req, acls.ALTER):
            return
        broker_id = req.body.broker_id
        self._via_controller(now, self.options.request_timeout_ms, self._voter_reply(src, req),
                             lambda c: m.UnregisterBrokerRequest(c, broker_id))

    def _voter_reply(self, src, req: KafkaRequest):
        """The answer of a request whose response is (throttle, error code, message)."""
        R = self._cls(req)

        def reply(resp, error):
            code, message = (resp.error, resp.message) if resp is not None else (
                _missing(error), None)
            self._reply(src, req, R(throttle_time_ms=0, error_code=code, error_message=message))
        return reply
