"""KafkaApis: the broker's answers to Kafka clients, from decoded requests.

Theory of operation
-------------------
The runtime decodes a frame (``kafka_codec``) and hands the request here
with an opaque connection token; every request gets exactly one
:class:`~node_image.kafka_codec.KafkaResponse` in the outbox (its body is
None for Produce with acks=0, which Kafka never answers), so the runtime can
keep Kafka's rule of one request in flight per connection, answered in
order.

- Produce: only the partition leader appends; acks=all is refused with
  NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min.insync.replicas``,
  and is otherwise parked until the HW passes the last appended offset
  (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrinks below the minimum
  first, NOT_LEADER_OR_FOLLOWER if leadership moves, REQUEST_TIMED_OUT at the
  request's timeout). Idempotent batches are checked against the
  partition's producer state; a duplicate is answered with the offsets it
  got the first time and not appended again.
- Fetch: consumers read whole batches from the leader, below the HW only;
  an empty answer is parked up to ``max_wait_ms`` until ``min_bytes`` are
  available. Sessions (KIP-227) are not kept: every fetch is a full fetch
  (session id 0), which the protocol allows.
- Metadata lists unfenced brokers and every partition's leader, leader
  epoch, replicas, ISR and offline replicas. A topic a Metadata request
  names and allows to be created is created (``auto.create.topics.enable``,
  as Kafka's); CreateTopics is forwarded to the active controller.
- InitProducerId hands out ids from blocks the controller allocates
  (AllocateProducerIds); with a transactional id it is the transaction
  coordinator's (:mod:`.transaction_coordinator`), as are AddPartitionsToTxn,
  AddOffsetsToTxn and EndTxn. Transactional batches are appended like
  others; a partition's open transactions bound its last stable offset, the
  limit of a read_committed Fetch, which also lists the aborted
  transactions in the range it returns. TxnOffsetCommit is the group
  coordinator's; the markers a transaction coordinator asks for
  (WriteTxnMarkers) are appended here as leader.
- FindCoordinator names the leader of the group's ``__consumer_offsets``
  partition (asking the controller to create the topic the first time);
  JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
  DescribeGroups and ListGroups are the group coordinator's
  (:mod:`.group_coordinator`), which keeps groups and offsets in that topic.
"""
from __future__ import annotations

import random
import time
from typing import Callable

from .. import acls, features
from ..quota_meter import QuotaMeter
from .. import kafka_codec as kc
from .. import messages as m
from ..kafka_codec import KafkaRequest, KafkaResponse
from ..outbox import Outbox
from ..replication_control import legal_topic_name
from .forwarding import ControllerForwarding
from .group_coordinator import GroupCoordinator
from .group_metadata import OFFSETS_TOPIC
from .transaction_coordinator import TXN_TOPIC, TransactionCoordinator
from .replica_manager import ReplicaManager
from .apis.acls import AclApis
from .apis.admin import AdminApis
from .apis.cluster_shape import ClusterShapeApis
from .apis.consumer_groups import ConsumerGroupApis
from .apis.common import ZERO_UUID, NOT_AUTHORIZED_OPERATIONS, _as_uuid, _zero_uuid
from .apis.describe import DescribeApis, offline_replicas
from .apis.fetch import FetchApis, _DelayedFetch
from .apis.groups import GroupApis
from .apis.produce import ProduceApis, _DelayedProduce
from .apis.quotas import QuotaApis
from .apis.scram import ScramApis
from .apis.share import ShareApis, ShareState
from .apis.txn import TxnApis


class KafkaApis(ProduceApis, FetchApis, AdminApis, DescribeApis, AclApis, TxnApis,
                ConsumerGroupApis, GroupApis, ClusterShapeApis, ScramApis, QuotaApis, ShareApis):
    """One broker's answers to clients: the dispatch table, ApiVersions and Metadata, the
    controller's answers, and the parked requests' timers; each API's handler is in its
    concern's module under ``apis/``."""

    def __init__(self, broker, replica_manager: ReplicaManager, cluster_id: str, options,
                 outbox: Outbox, on_event, bugs: frozenset[str] = frozenset(),
                 wall_clock: Callable[[], int] | None = None, rng=None) -> None:
        self.bugs = bugs
        # Kafka's Time.milliseconds(): the wall clock, which a clock fault moves
        self.wall_clock = wall_clock or (lambda: int(time.time() * 1000))
        self.broker = broker  # node_image.broker.broker.Broker
        self.rm = replica_manager
        self.cluster_id = cluster_id
        self.options = options
        self.outbox = outbox
        self._on_event = on_event
        self._aborted_seen: set[tuple[str, int, int]] = set()  # (topic, partition, leader epoch)
        self._delayed_produce: list[_DelayedProduce] = []
        # DeleteRecords waiting for the low watermark: (src, request, deadline, rows of
        # (topic, partition, offset asked for, error))
        self._delayed_deletes: list[tuple] = []
        self._delayed_fetch: list[_DelayedFetch] = []
        self.share = ShareState()  # share sessions, share partitions, parked ShareFetches
        self._pending_pids: list[tuple[object, KafkaRequest, int]] = []
        self._pid_again: int | None = None  # the planted bug pid-given-twice's next answer
        self._forwarding = ControllerForwarding(
            lambda: self.broker.controller_id(), lambda node, msg: self.broker.outbox.send(
                node, msg), lambda: self.broker.next_correlation())
        self.groups = GroupCoordinator(replica_manager, options, on_event, self.wall_clock,
                                       rng or random.Random(0))
        self.txns = TransactionCoordinator(
            replica_manager, options, on_event, self.wall_clock,
            lambda: self.broker.next_producer_id(),
            lambda leader, msg: self.broker.send_txn_markers(leader, msg),
            lambda: self.broker.next_correlation(), bugs)
        self._create_asked_ms: dict[str, int] = {}
        self._internal_creates: set[int] = set()
        self._delayed_markers: list = []
        self.quotas = QuotaMeter(options.quota_window_num, options.quota_window_size_ms)

    def handle(self, src, req: KafkaRequest, now: int) -> None:
        handler = {
            kc.API_VERSIONS: self._api_versions, kc.METADATA: self._metadata,
            kc.PRODUCE: self._produce, kc.FETCH: self._fetch, kc.LIST_OFFSETS: self._list_offsets,
            kc.CREATE_TOPICS: self._create_topics, kc.INIT_PRODUCER_ID: self._init_producer_id,
            kc.FIND_COORDINATOR: self._find_coordinator, kc.OFFSET_COMMIT: self._offset_commit,
            kc.OFFSET_FETCH: self._offset_fetch, kc.JOIN_GROUP: self._join_group,
            kc.SYNC_GROUP: self._sync_group, kc.HEARTBEAT: self._heartbeat,
            kc.LEAVE_GROUP: self._leave_group, kc.DESCRIBE_GROUPS: self._describe_groups,
            kc.LIST_GROUPS: self._list_groups, kc.ADD_PARTITIONS_TO_TXN: self._add_partitions_to_txn,
            kc.ADD_OFFSETS_TO_TXN: self._add_offsets_to_txn, kc.END_TXN: self._end_txn,
            kc.TXN_OFFSET_COMMIT: self._txn_offset_commit,
            kc.DESCRIBE_CONFIGS: self._describe_configs, kc.DESCRIBE_CLUSTER: self._describe_cluster,
            kc.LIST_CONFIG_RESOURCES: self._list_config_resources,
            kc.CREATE_PARTITIONS: self._create_partitions,
            kc.ALTER_CONFIGS: self._alter_configs,
            kc.DELETE_TOPICS: self._delete_topics,
            kc.DESCRIBE_QUORUM: self._describe_quorum,
            kc.INCREMENTAL_ALTER_CONFIGS: self._alter_configs,
            kc.DESCRIBE_PRODUCERS: self._describe_producers,
            kc.DESCRIBE_TRANSACTIONS: self._describe_transactions,
            kc.LIST_TRANSACTIONS: self._list_transactions,
            kc.DELETE_RECORDS: self._delete_records,
            kc.OFFSET_FOR_LEADER_EPOCH: self._offset_for_leader_epoch,
            kc.DELETE_GROUPS: self._delete_groups, kc.OFFSET_DELETE: self._offset_delete,
            kc.DESCRIBE_TOPIC_PARTITIONS: self._describe_topic_partitions,
            kc.DESCRIBE_LOG_DIRS: self._describe_log_dirs,
            kc.ALTER_REPLICA_LOG_DIRS: self._alter_replica_log_dirs,
            kc.ELECT_LEADERS: self._elect_leaders,
            kc.DESCRIBE_ACLS: self._describe_acls, kc.CREATE_ACLS: self._create_acls,
            kc.DELETE_ACLS: self._delete_acls,
            kc.DESCRIBE_USER_SCRAM_CREDENTIALS: self._describe_user_scram_credentials,
            kc.ALTER_USER_SCRAM_CREDENTIALS: self._alter_user_scram_credentials,
            kc.DESCRIBE_CLIENT_QUOTAS: self._describe_client_quotas,
            kc.ALTER_CLIENT_QUOTAS: self._alter_client_quotas,
            kc.ALTER_PARTITION_REASSIGNMENTS: self._alter_partition_reassignments,
            kc.LIST_PARTITION_REASSIGNMENTS: self._list_partition_reassignments,
            kc.UPDATE_FEATURES: self._update_features,
            kc.ADD_RAFT_VOTER: self._add_raft_voter,
            kc.REMOVE_RAFT_VOTER: self._remove_raft_voter,
            kc.CONSUMER_GROUP_HEARTBEAT: self._consumer_group_heartbeat,
            kc.CONSUMER_GROUP_DESCRIBE: self._consumer_group_describe,
            kc.UNREGISTER_BROKER: self._unregister_broker,
            kc.SHARE_GROUP_HEARTBEAT: self._share_group_heartbeat,
            kc.SHARE_GROUP_DESCRIBE: self._share_group_describe,
            kc.DESCRIBE_SHARE_GROUP_OFFSETS: self._describe_share_group_offsets,
            kc.SHARE_FETCH: self._share_fetch, kc.SHARE_ACKNOWLEDGE: self._share_acknowledge,
        }[req.api_key]
        handler(src, req, now)

    def _reply(self, src, req: KafkaRequest, body, throttle_ms: int = 0) -> None:
        self.outbox.send(src, KafkaResponse(req, body, throttle_ms))

    def _cls(self, req: KafkaRequest):
        return kc.response_class(req.api_key, req.api_version)

    def _api_versions(self, src, req: KafkaRequest, now: int) -> None:
        image = self.rm.image
        self._reply(src, req, kc.api_versions_body(
            req.api_version, caps={kc.METADATA: self.options.metadata_max_version},
            features=(features.SUPPORTED, features.finalized(image, self.broker.raft.kraft_version),
                      image.offset)))

    def _metadata(self, src, req: KafkaRequest, now: int) -> None:
        image = self.rm.image
        R = self._cls(req)
        brokers = []
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            ep = b.endpoint("PLAINTEXT")
            if ep is not None and not b.fenced:
                brokers.append(R.MetadataResponseBroker(node_id=b.broker_id, host=ep[0], port=ep[1],
                                                        rack=b.rack))
        wanted = req.body.topics
        if wanted is None or (req.api_version == 0 and not wanted):
            asked = [(name, None) for name in sorted(image.topics)]
        else:  # by name, or from v10 by topic id with no name
            asked = [(t.name, getattr(t, "topic_id", None)) for t in wanted]
        # before v4 every request allows topics to be created; from v4 it says
        create_allowed = self.options.auto_create_topics and (
            req.api_version < 4 or req.body.allow_auto_topic_creation)
        topics = []
        topic_ops = getattr(req.body, "include_topic_authorized_operations", False)

        def unknown(error: int, name: str | None, topic_id) -> None:
            topics.append(R.MetadataResponseTopic(
                error_code=error, name=name, topic_id=topic_id, is_internal=False,
                partitions=[], authorized_operations=NOT_AUTHORIZED_OPERATIONS))
        for name, topic_id in asked:
            if name is None and not _zero_uuid(topic_id):
                name = image.topic_names.get(str(topic_id))
                if name is None:
                    unknown(m.UNKNOWN_TOPIC_ID, None, topic_id)
                    continue
            if not self._allowed(src, acls.DESCRIBE, acls.TOPIC, name):
                if wanted is not None:  # (listing all: a topic not described is left out)
                    unknown(m.TOPIC_AUTHORIZATION_FAILED, name, ZERO_UUID)
                continue
            t = image.topics.get(name)
            if t is None:
                unknown(self._auto_create(name, now) if wanted is not None and create_allowed
                        else m.UNKNOWN_TOPIC_OR_PARTITION, name, ZERO_UUID)
                continue
            parts = []
            for pid in sorted(t.partitions):
                reg = t.partitions[pid]
                offline = offline_replicas(image, reg)
                parts.append(R.MetadataResponseTopic.MetadataResponsePartition(
                    error_code=m.LEADER_NOT_AVAILABLE if reg.leader < 0 else m.NONE,
                    partition_index=pid, leader_id=reg.leader, leader_epoch=reg.leader_epoch,
                    replica_nodes=list(reg.replicas), isr_nodes=list(reg.isr),
                    offline_replicas=offline))
            topics.append(R.MetadataResponseTopic(error_code=m.NONE, name=name,
                                                  topic_id=_as_uuid(t.topic_id),
                                                  is_internal=name in (OFFSETS_TOPIC, TXN_TOPIC),
                                                  partitions=parts,
                                                  authorized_operations=self._operations(
                                                      src, acls.TOPIC, name, topic_ops)))
        controller = self.broker.controller_hint()
        self._reply(src, req, R(throttle_time_ms=0, brokers=brokers, cluster_id=self.cluster_id,
                                controller_id=controller, topics=topics,
                                authorized_operations=self._operations(
                                    src, acls.CLUSTER, acls.CLUSTER_NAME, getattr(
                                        req.body, "include_cluster_authorized_operations",
                                        False)), error_code=m.NONE))

    def _auto_create(self, name: str, now: int) -> int:
        """A topic a Metadata request named and may create (``auto.create.topics.enable``), as
        Kafka's AutoTopicCreationManager: an illegal name is INVALID_TOPIC_EXCEPTION; else the
        controller is asked to create it (an internal topic with its own settings, any other
        with ``num.partitions`` and ``default.replication.factor``) and the answer until it
        exists is LEADER_NOT_AVAILABLE."""
        if not legal_topic_name(name):
            return m.INVALID_TOPIC_EXCEPTION
        if name in (OFFSETS_TOPIC, TXN_TOPIC):
            self._create_internal_topic(name, now)
        else:
            o = self.options
            self._ask_to_create((name, o.default_partitions, o.default_replication_factor, ()),
                                now)
        return m.LEADER_NOT_AVAILABLE

    def _via_controller(self, now: int, timeout_ms: int, reply, build) -> None:
        """Send ``build(correlation id)`` to the active controller; ``reply(response, error)``
        answers the client once: with the controller's response (error NONE), or with None
        and REQUEST_TIMED_OUT where no controller answered within ``timeout_ms``. A moving
        controller is followed (:mod:`.forwarding`)."""
        self._forwarding.forward(now, timeout_ms, reply, build)

    def handle_controller_response(self, resp) -> None:
        if resp.correlation_id in self._internal_creates:
            self._internal_creates.discard(resp.correlation_id)
            for name, error, message, *_ in resp.results:
                if error not in (m.NONE, m.TOPIC_ALREADY_EXISTS):
                    self._on_event(f"creating {name} failed: {m.ERROR_NAMES.get(error, error)}: "
                                   f"{message}")
            return
        self._forwarding.handle_response(resp, self.broker.now)

    def complete_delayed(self, now: int) -> None:
        """Answer parked requests that can be answered (after every input)."""
        if self._delayed_produce:
            keep = []
            for d in self._delayed_produce:
                self._check_produce(d, now)
                if d.pending:
                    keep.append(d)
                else:
                    self._produce_reply(d)
            self._delayed_produce = keep
        if self._delayed_fetch:
            keep = []
            touched = self.rm.hw_changed | ({None} if self.rm.role_changed else set())
            for d in self._delayed_fetch:
                if now < d.deadline_ms and not (touched and (None in touched or d.keys & touched)):
                    keep.append(d)
                    continue
                response, size, errors = self._fetch_response(d.request)
                if size >= max(d.request.body.min_bytes, 1) or errors or now >= d.deadline_ms:
                    self._fetch_reply(d.src, d.request, response, size, now)
                else:
                    keep.append(d)
            self._delayed_fetch = keep
        self._complete_share_fetches(now)
        if self._pending_pids:
            self._serve_pids(now)
        if self._delayed_deletes:
            self._check_deletes(now)
        if self.rm.topics_deleted:
            self.groups.partitions_deleted(self.rm.topics_deleted, now)
        if self.rm.topic_ids_deleted:
            self.groups.share_topics_deleted(self.rm.topic_ids_deleted, now)
        self.groups.poll(now, self.rm.role_changed)
        self.txns.poll(now, self.rm.role_changed)
        if self._delayed_markers:
            self._check_markers(now)
        self._forwarding.poll(now)

    def next_deadline_ms(self) -> int | None:
        times = [d.deadline_ms for d in self._delayed_produce]
        times += [d.deadline_ms for d in self._delayed_fetch]
        times += [d.deadline_ms for d in self.share.parked]
        times += self.share_deadlines()
        times += [d for _, _, d in self._pending_pids]
        if (t := self._forwarding.next_deadline_ms()) is not None:
            times.append(t)
        times += [e[2] for e in self._delayed_markers]
        times += [e[2] for e in self._delayed_deletes]
        for t in (self.groups.next_deadline_ms(), self.txns.next_deadline_ms()):
            if t is not None:
                times.append(t)
        return min(times) if times else None

    def fail_all(self) -> None:
        """On shutdown: answer everything parked so no client waits on a closed socket."""
        self.groups.shutdown()
        self.txns.shutdown()
        now = 1 << 62
        self.complete_delayed(now)
