"""The admin APIs: topics created, deleted and given partitions or configs through the
active controller; ElectLeaders; DeleteRecords; DescribeConfigs, ListConfigResources,
DescribeCluster and DescribeQuorum.

With an authorizer each asks what Kafka's KafkaApis asks first (Authorization failed. for
each resource refused): CreateTopics CREATE on the cluster or on the topic, DeleteTopics
DELETE, CreatePartitions ALTER, DeleteRecords DELETE, DescribeConfigs DESCRIBE_CONFIGS and
AlterConfigs ALTER_CONFIGS on the topic (on the cluster for a broker's), ElectLeaders ALTER
and DescribeQuorum DESCRIBE on the cluster, ListConfigResources DESCRIBE_CONFIGS on the
cluster."""
from __future__ import annotations

from ... import acls, broker_configs
from ... import kafka_codec as kc
from ... import messages as m
from ...kafka_codec import KafkaRequest
from .. import describe_configs
from ...group_configs import GROUP_RESOURCE
from ...metadata_image import BROKER_RESOURCE, TOPIC_RESOURCE
from ..group_metadata import OFFSETS_TOPIC
from ..transaction_coordinator import TXN_TOPIC
from .acls import AUTHORIZATION_FAILED
from .common import (ZERO_UUID, METADATA_TOPIC, NOT_AUTHORIZED_OPERATIONS, _as_uuid, _by_name,
                     _missing, _zero_uuid)


BROKER_LOGGER_RESOURCE = 8  # Kafka's ConfigResource.Type.BROKER_LOGGER
CLIENT_METRICS_RESOURCE = 16  # Kafka's ConfigResource.Type.CLIENT_METRICS
# the config resource types ListConfigResources lists
LISTED_CONFIG_RESOURCES = (TOPIC_RESOURCE, BROKER_RESOURCE, CLIENT_METRICS_RESOURCE,
                           GROUP_RESOURCE)


class AdminApis:
    """Mixed into :class:`~node_image.broker.kafka_apis.KafkaApis`."""

    def _create_topics(self, src, req: KafkaRequest, now: int) -> None:
        """CreateTopics through the controller; from v5 each created topic's partitions,
        replication factor and configs in the answer, from v7 its id (as Kafka's)."""
        body, v = req.body, req.api_version
        rows = []
        early = {}
        on_cluster = self._allowed(src, acls.CREATE, acls.CLUSTER, acls.CLUSTER_NAME)
        for t in body.topics:
            if not on_cluster and not self._allowed(src, acls.CREATE, acls.TOPIC, t.name):
                early[t.name] = (m.TOPIC_AUTHORIZATION_FAILED, AUTHORIZATION_FAILED)
                continue
            configs = tuple((c.name, c.value) for c in (t.configs or ()))
            manual = tuple((a.partition_index, tuple(a.broker_ids)) for a in t.assignments or ())
            rows.append((t.name, t.num_partitions, t.replication_factor, configs, manual))
        R = self._cls(req)
        C = R.CreatableTopicResult

        def result(t, row) -> object:
            name, code, message, topic_id, partitions, rf = row
            extra = {}
            if v >= 5:
                settings = describe_configs.settings_of_topic(
                    {c.name: c.value for c in (t.configs or ())}, self.options,
                    broker_configs.dynamic(self.rm.image, self.broker.node_id)) \
                    if code == m.NONE else None
                extra = {"num_partitions": partitions, "replication_factor": rf,
                         "configs": None if settings is None else [
                             C.CreatableTopicConfigs(name=k, value=value, read_only=False,
                                                     config_source=source, is_sensitive=False)
                             for k, (value, source) in settings.items()]}
            if v >= 7:
                extra["topic_id"] = _as_uuid(topic_id or "") if code == m.NONE else ZERO_UUID
            return C(name=name, error_code=code, error_message=message, **extra)

        def reply(resp, error):
            rows_by_name = {} if resp is None else {r[0]: r for r in resp.results}
            out = []
            for t in body.topics:
                if t.name in early:
                    row = (t.name, *early[t.name], None, -1, -1)
                else:
                    row = rows_by_name.get(t.name, (t.name, _missing(error), None, None, -1, -1))
                out.append(result(t, row))
            throttle = 0 if resp is None else resp.throttle_ms
            self._reply(src, req, R(throttle_time_ms=throttle, topics=out), throttle)
        if not rows:
            reply(None, m.NONE)
            return
        self._via_controller(
            now, max(body.timeout_ms, 1000), reply,
            lambda c: m.CreateTopicsRequest(c, tuple(rows), bool(body.validate_only),
                                            req.client_id, v >= 6))

    def _describe_quorum(self, src, req: KafkaRequest, now: int) -> None:
        """DescribeQuorum of ``__cluster_metadata-0``, answered by the quorum leader."""
        if self._cluster_denied(src, req, acls.DESCRIBE):
            return

        def reply(resp, error):
            if resp is not None:
                error = resp.error
            elif error == m.NOT_CONTROLLER:
                error = m.NOT_LEADER_OR_FOLLOWER  # no quorum leader known
            self._quorum_reply(src, req, resp, error)
        self._via_controller(now, self.options.request_timeout_ms, reply,
                             lambda c: m.QuorumStateRequest(c))

    def _quorum_reply(self, src, req: KafkaRequest, resp: m.QuorumStateResponse | None,
                      error: int) -> None:
        R = self._cls(req)
        T = R.TopicData
        P = T.PartitionData
        v = req.api_version

        def replicas(rows):
            out = []
            for rid, directory, offset, fetched, caught_up in rows:
                kw = {}
                if v >= 1:
                    kw.update(last_fetch_timestamp=fetched, last_caught_up_timestamp=caught_up)
                if v >= 2:
                    kw["replica_directory_id"] = _as_uuid(directory)
                out.append(P.ReplicaState(replica_id=rid, log_end_offset=offset, **kw))
            return out
        msg = {"error_message": None} if v >= 2 else {}
        topics = []
        for t in req.body.topics:
            parts = []
            for p in t.partitions:
                if (t.topic_name, p.partition_index) != (METADATA_TOPIC, 0):
                    parts.append(P(partition_index=p.partition_index,
                                   error_code=m.UNKNOWN_TOPIC_OR_PARTITION, leader_id=-1,
                                   leader_epoch=-1, high_watermark=-1, current_voters=[],
                                   observers=[], **msg))
                elif resp is None or resp.error != m.NONE:
                    parts.append(P(partition_index=0, error_code=error if resp is None
                                   else resp.error, leader_id=-1 if resp is None
                                   else resp.leader_id, leader_epoch=-1, high_watermark=-1,
                                   current_voters=[], observers=[], **msg))
                else:
                    parts.append(P(partition_index=0, error_code=m.NONE,
                                   leader_id=resp.leader_id, leader_epoch=resp.leader_epoch,
                                   high_watermark=resp.high_watermark,
                                   current_voters=replicas(resp.voters),
                                   observers=replicas(resp.observers), **msg))
            topics.append(T(topic_name=t.topic_name, partitions=parts))
        extra = {}
        if v >= 2:
            nodes = [] if resp is None else resp.nodes
            extra["nodes"] = [R.Node(node_id=i, listeners=[R.Node.Listener(
                name="CONTROLLER", host=host, port=port)]) for i, host, port in nodes]
        self._reply(src, req, R(error_code=m.NONE, topics=topics, **msg, **extra))

    @staticmethod
    def _delete_rows(req: KafkaRequest) -> list[tuple[str, str]]:
        """(name, topic id) per topic a DeleteTopics request names, either "" if not given."""
        if req.api_version >= 6:
            return [(t.name or "", "" if _zero_uuid(t.topic_id) else str(t.topic_id))
                    for t in req.body.topics]
        return [(name, "") for name in req.body.topic_names]

    def _delete_topics(self, src, req: KafkaRequest, now: int) -> None:
        """DeleteTopics by name (v1-v5) or by name or topic id (v6), decided by the
        controller; every broker then removes the partitions' data it holds."""
        named = self._delete_rows(req)
        names = self.rm.image.topic_names
        # a topic id no topic has is the controller's UNKNOWN_TOPIC_ID, not a refusal
        refused = {row: (m.TOPIC_AUTHORIZATION_FAILED, AUTHORIZATION_FAILED) + row
                   for row in named if (row[0] or names.get(row[1]))
                   and self._denied(src, acls.DELETE, acls.TOPIC, row[0] or names[row[1]])}
        rows = tuple(row for row in named if row not in refused)
        R, v = self._cls(req), req.api_version

        def reply(resp, error):
            # by what the request named (name or id), with the name and id found
            results = dict(refused) if resp is None else {**refused, **{
                row: (e, msg, found, found_id)
                for row, (found, found_id, e, msg) in zip(rows, resp.results)}}
            out = []
            for row in named:
                code, message, name, tid = results.get(row, (_missing(error), None) + row)
                extra = {"topic_id": _as_uuid(tid)} if v >= 6 else {}
                if v >= 5:
                    extra["error_message"] = message
                out.append(R.DeletableTopicResult(name=name or None if v >= 6 else name,
                                                  error_code=code, **extra))
            throttle = 0 if resp is None else resp.throttle_ms
            self._reply(src, req, R(throttle_time_ms=throttle, responses=out), throttle)
        if not rows:
            reply(None, m.NONE)
            return
        self._via_controller(now, max(req.body.timeout_ms, 1000), reply,
                             lambda c: m.DeleteTopicsRequest(c, rows, req.client_id, v >= 5))

    def _alter_configs(self, src, req: KafkaRequest, now: int) -> None:
        """AlterConfigs and IncrementalAlterConfigs, decided by the controller."""
        body = req.body
        incremental = req.api_key == kc.INCREMENTAL_ALTER_CONFIGS
        refused = {(r.resource_type, r.resource_name): (code, AUTHORIZATION_FAILED)
                   for r in body.resources
                   if (code := self._config_denied(src, acls.ALTER_CONFIGS, r.resource_type,
                                                   r.resource_name))}
        rows = tuple((r.resource_type, r.resource_name, tuple(
            (c.name, c.config_operation if incremental else 0, c.value) for c in r.configs))
            for r in body.resources if (r.resource_type, r.resource_name) not in refused)
        R = self._cls(req)

        def reply(resp, error):
            results = dict(refused) if resp is None else {
                **refused, **{(t, n): (e, msg) for t, n, e, msg in resp.results}}
            out = []
            for r in body.resources:
                code, message = results.get((r.resource_type, r.resource_name),
                                            (_missing(error), None))
                out.append(R.AlterConfigsResourceResponse(
                    error_code=code, error_message=message, resource_type=r.resource_type,
                    resource_name=r.resource_name))
            self._reply(src, req, R(throttle_time_ms=0, responses=out))
        if not rows:
            reply(None, m.NONE)
            return
        self._via_controller(
            now, self.options.request_timeout_ms, reply,
            lambda c: m.AlterConfigsRequest(c, rows, incremental, bool(body.validate_only)))

    def _config_denied(self, src, operation: int, resource_type: int, name: str) -> int | None:
        """DESCRIBE_CONFIGS or ALTER_CONFIGS on a topic, or on the cluster for a broker's
        (or a broker logger's) configs, or on a group for its own; other resource types are
        left to the handler."""
        if resource_type == TOPIC_RESOURCE:
            return self._denied(src, operation, acls.TOPIC, name)
        if resource_type in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE):  # 8: a broker logger
            return self._denied(src, operation, acls.CLUSTER, acls.CLUSTER_NAME)
        if resource_type == GROUP_RESOURCE:
            return self._denied(src, operation, acls.GROUP, name)
        return None

    def _create_partitions(self, src, req: KafkaRequest, now: int) -> None:
        body = req.body
        rows = []
        refused = {t.name: (m.TOPIC_AUTHORIZATION_FAILED, AUTHORIZATION_FAILED)
                   for t in body.topics if self._denied(src, acls.ALTER, acls.TOPIC, t.name)}
        for t in body.topics:
            assignments = tuple(tuple(a.broker_ids) for a in (t.assignments or ()))
            if t.name not in refused:
                rows.append((t.name, t.count, assignments))
        R = self._cls(req)

        def reply(resp, error):
            results = {**_by_name(resp), **refused}
            out = []
            for t in body.topics:
                code, message = results.get(t.name, (_missing(error), None))
                out.append(R.CreatePartitionsTopicResult(name=t.name, error_code=code,
                                                         error_message=message))
            throttle = 0 if resp is None else resp.throttle_ms
            self._reply(src, req, R(throttle_time_ms=throttle, results=out), throttle)
        if not rows:
            reply(None, m.NONE)
            return
        self._via_controller(
            now, max(body.timeout_ms, 1000), reply,
            lambda c: m.CreatePartitionsRequest(c, tuple(rows), bool(body.validate_only),
                                                req.client_id, req.api_version >= 3))

    def _elect_leaders(self, src, req: KafkaRequest, now: int) -> None:
        """ElectLeaders through the controller: preferred (0) or unclean (1, from v1) for the
        partitions named, or every partition (null: then only those tried are answered)."""
        body, v = req.body, req.api_version
        R = self._cls(req)
        E = R.ReplicaElectionResult
        kind = body.election_type if v >= 1 else 0
        every = body.topic_partitions is None
        rows = () if every else tuple(dict.fromkeys(
            (t.topic, p) for t in body.topic_partitions for p in t.partitions))

        def answer(results, top: int) -> None:
            by_topic: dict[str, list] = {}
            for topic, pid, code, message in results:
                by_topic.setdefault(topic, []).append(E.PartitionResult(
                    partition_id=pid, error_code=code, error_message=message))
            self._reply(src, req, R(throttle_time_ms=0, error_code=top,
                                    replica_election_results=[
                                        E(topic=t, partition_result=ps)
                                        for t, ps in by_topic.items()]))
        if self._denied(src, acls.ALTER, acls.CLUSTER, acls.CLUSTER_NAME):
            answer([(t, p, m.CLUSTER_AUTHORIZATION_FAILED, AUTHORIZATION_FAILED)
                    for t, p in rows], m.CLUSTER_AUTHORIZATION_FAILED)
            return
        if kind not in (0, 1):
            answer([(t, p, m.INVALID_REQUEST, f"unknown election type {kind}")
                    for t, p in rows], m.INVALID_REQUEST if v >= 1 else m.NONE)
            return

        def reply(resp, error):
            if resp is not None:
                answer(resp.results, m.NONE)
            else:
                answer([(t, p, _missing(error), None) for t, p in rows],
                       _missing(error) if every and v >= 1 else m.NONE)
        self._via_controller(
            now, max(body.timeout_ms, 1000), reply,
            lambda c: m.ElectLeadersRequest(c, ("PREFERRED", "UNCLEAN")[kind], every, rows))

    def _delete_records(self, src, req: KafkaRequest, now: int) -> None:
        """Each partition's log start moves up to the offset asked for (-1: the high
        watermark; past it: OFFSET_OUT_OF_RANGE); the answer waits, as Kafka's purgatory
        does, until every live replica's log start got there (the low watermark), else
        REQUEST_TIMED_OUT when the request's timeout passes."""
        rows = []
        for t in req.body.topics:
            for p in t.partitions:
                if self._denied(src, acls.DELETE, acls.TOPIC, t.name):
                    error, offset = m.TOPIC_AUTHORIZATION_FAILED, -1
                elif t.name in (OFFSETS_TOPIC, TXN_TOPIC):  # Kafka: not an internal topic's
                    error, offset = m.INVALID_TOPIC_EXCEPTION, -1
                else:
                    error, offset = self.rm.delete_records(t.name, p.partition_index, p.offset)
                rows.append((t.name, p.partition_index, offset, error))
        self._delayed_deletes.append((src, req, now + max(req.body.timeout_ms, 0), rows))
        self._check_deletes(now)

    def _check_deletes(self, now: int) -> None:
        keep = []
        for src, req, deadline, rows in self._delayed_deletes:
            answers = []
            for topic, index, offset, error in rows:
                low = -1
                if error == m.NONE:
                    low = self.rm.low_watermark(topic, index)
                    if low is None:
                        error, low = m.NOT_LEADER_OR_FOLLOWER, -1
                    elif low < offset:
                        error = None  # not yet
                answers.append((topic, index, low, error))
            if any(e is None for *_, e in answers) and now < deadline:
                keep.append((src, req, deadline, rows))
                continue
            R = self._cls(req)
            T = R.DeleteRecordsTopicResult
            by_topic: dict[str, list] = {}
            for topic, index, low, error in answers:
                by_topic.setdefault(topic, []).append(T.DeleteRecordsPartitionResult(
                    partition_index=index, low_watermark=low if error is not None else -1,
                    error_code=m.REQUEST_TIMED_OUT if error is None else error))
            self._reply(src, req, R(throttle_time_ms=0, topics=[
                T(name=topic, partitions=parts) for topic, parts in by_topic.items()]))
        self._delayed_deletes = keep

    def _describe_configs(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        self._reply(src, req, R(throttle_time_ms=0, results=describe_configs.describe(
            self.rm.image, self.broker.node_id, self.options, req.body.resources,
            req.api_version, R, lambda rtype, name: self._config_denied(
                src, acls.DESCRIBE_CONFIGS, rtype, name))))

    def _list_config_resources(self, src, req: KafkaRequest, now: int) -> None:
        """ListConfigResources (KIP-1142; v0 was ListClientMetricsResources): the names a
        DescribeConfigs here answers for, by type (none asked: all of them). Topics (the
        internal ones too), the registered brokers' ids, and the groups with configs of their own;
        v0 asks for client metrics resources, of which there are none. A type not served
        here (a broker logger's, or any other) is UNSUPPORTED_VERSION, as Kafka answers for
        a type it does not list. Needs DESCRIBE_CONFIGS on the cluster."""
        R, v = self._cls(req), req.api_version
        Row = R.ConfigResource

        def answer(error: int, rows=()) -> None:
            self._reply(src, req, R(throttle_time_ms=0, error_code=error,
                                    config_resources=list(rows)))
        if not self._allowed(src, acls.DESCRIBE_CONFIGS, acls.CLUSTER, acls.CLUSTER_NAME):
            answer(m.CLUSTER_AUTHORIZATION_FAILED)
            return
        if v == 0:
            answer(m.NONE)  # client metrics resources: none are kept
            return
        asked = set(req.body.resource_types) or set(LISTED_CONFIG_RESOURCES)
        if not asked <= set(LISTED_CONFIG_RESOURCES):
            answer(m.UNSUPPORTED_VERSION)
            return
        image = self.rm.image
        names = {TOPIC_RESOURCE: sorted(image.topics),
                 BROKER_RESOURCE: [str(b) for b in sorted(image.brokers)],
                 GROUP_RESOURCE: sorted(name for (rtype, name), entries in image.configs.items()
                                        if rtype == GROUP_RESOURCE and entries),
                 CLIENT_METRICS_RESOURCE: []}
        answer(m.NONE, [Row(resource_name=name, resource_type=rtype)
                        for rtype in sorted(asked) for name in names[rtype]])

    def _describe_cluster(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        v = req.api_version
        if v >= 1 and req.body.endpoint_type != 1:  # 1: brokers; 2: controllers (KIP-919)
            self._reply(src, req, R(
                throttle_time_ms=0, error_code=(m.MISMATCHED_ENDPOINT_TYPE
                                                if req.body.endpoint_type == 2
                                                else m.UNSUPPORTED_ENDPOINT_TYPE),
                error_message=f"endpoint type {req.body.endpoint_type} is not served here "
                              "(1: brokers)", endpoint_type=req.body.endpoint_type,
                cluster_id=self.cluster_id, controller_id=-1, brokers=[],
                authorized_operations=NOT_AUTHORIZED_OPERATIONS))
            return
        with_fenced = v >= 2 and req.body.include_fenced_brokers
        brokers = []
        for b in sorted(self.rm.image.brokers.values(), key=lambda b: b.broker_id):
            ep = b.endpoint("PLAINTEXT")
            if ep is None or (b.fenced and not with_fenced):
                continue
            extra = {"is_fenced": b.fenced} if v >= 2 else {}
            brokers.append(R.DescribeClusterBroker(broker_id=b.broker_id, host=ep[0],
                                                   port=ep[1], rack=b.rack, **extra))
        extra = {"endpoint_type": 1} if v >= 1 else {}
        self._reply(src, req, R(throttle_time_ms=0, error_code=m.NONE, error_message=None,
                                cluster_id=self.cluster_id,
                                controller_id=self.broker.controller_hint(), brokers=brokers,
                                authorized_operations=self._operations(
                                    src, acls.CLUSTER, acls.CLUSTER_NAME,
                                    req.body.include_cluster_authorized_operations),
                                **extra))
