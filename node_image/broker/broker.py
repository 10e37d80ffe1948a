"""Broker: a node's broker role, composed of its lifecycle, metadata publishing, replica
manager and Kafka APIs.

Theory of operation
-------------------
The broker is a Raft observer of the metadata log (or a voter, in combined
mode): the node's QuorumController replays committed records into images
and calls :meth:`publish` with each new image and what changed. The broker
publishes nothing to its partitions until its image has caught up with the
metadata high watermark it first learns (Kafka's MetadataLoader) *and* with
its own registration record: a restarted broker must never act on a
leadership its previous incarnation held (it may have lost data since, in a
power loss); the controller moves that leadership away when the new
incarnation registers, so an image past the registration no longer holds
it. From then on every committed batch is published. Until then
:attr:`ready` is False and the runtime keeps the Kafka listener closed.

Requests to the controller (registration, heartbeats, AlterPartition,
AllocateProducerIds, forwarded CreateTopics) go to the current Raft leader;
a NOT_CONTROLLER answer or a lost request is retried.
"""
from __future__ import annotations

import random
from typing import Callable

from .. import messages as m
from ..fs import FileSystem
from ..kafka_codec import KafkaRequest
from ..metadata_image import MetadataDelta, MetadataImage
from ..outbox import Outbox
from .kafka_apis import KafkaApis
from .lifecycle import SHUTTING_DOWN, BrokerLifecycleManager
from .replica_manager import ReplicaManager, touched_partitions

CONTROLLER_REQUEST_TIMEOUT_MS = 5000


class Broker:
    def __init__(self, node_id: int, options, fs: FileSystem, log_dir: str, cluster_id: str,
                 rng: random.Random, outbox: Outbox, raft, controller,
                 on_event: Callable[[str], None], bugs: frozenset[str] = frozenset(),
                 wall_clock: Callable[[], int] | None = None) -> None:
        self.node_id = node_id
        self.options = options  # node_image.config.BrokerConfig
        self.raft = raft
        self.controller = controller
        self.outbox = outbox
        self._on_event = on_event
        self._corr = rng.randrange(1 << 30)
        self.now = 0
        host, port = options.advertised
        self.advertised = (host, port)
        endpoints = (("PLAINTEXT", host, port), ("INTERNAL", host, options.internal_port))
        self.lifecycle = BrokerLifecycleManager(
            node_id, endpoints, None, heartbeat_interval_ms=options.heartbeat_interval_ms,
            request_timeout_ms=options.rpc_timeout_ms,
            retry_backoff_ms=options.retry_backoff_ms, rng=rng, outbox=outbox,
            next_correlation=self._next_correlation, on_event=on_event)
        self.rm = ReplicaManager(node_id, log_dir, fs, options, outbox, self._next_correlation,
                                 on_event, bugs, wall_clock)
        self.lifecycle.previous_broker_epoch = self.rm.take_clean_shutdown()
        self.apis = KafkaApis(self, self.rm, cluster_id, options, outbox, on_event, bugs,
                              wall_clock, rng)
        self.published = False
        self._unpublished: MetadataImage | None = None
        self._pid_next = 0
        self._pid_end = 0
        self._pid_request: tuple[int, int] | None = None  # (correlation id, deadline)
        self._local_markers: list[m.WriteTxnMarkersRequest] = []
        self._local_share: list = []  # share-state messages to this broker's own coordinator
        controller.register_publisher(self.publish)

    def _next_correlation(self) -> int:
        self._corr += 1
        return self._corr

    next_correlation = _next_correlation

    def send_txn_markers(self, leader: int, req: m.WriteTxnMarkersRequest) -> None:
        """The transaction coordinator's markers to ``leader``: over the wire, or, when this
        broker leads the partitions, queued for :meth:`_after_input` (not re-entering the
        coordinator that is sending)."""
        if leader == self.node_id:
            self._local_markers.append(req)
        else:
            self.outbox.send(leader, req)

    def send_share_state(self, node: int, msg) -> None:
        """A share partition leader's read or write of its share state, to the group's
        coordinator ``node``: over the wire, or queued for :meth:`_after_input` when that
        is this broker."""
        if node == self.node_id:
            self._local_share.append(msg)
        else:
            self.outbox.send(node, msg)

    def _share_state_message(self, msg, now: int, reply) -> None:
        if isinstance(msg, m.ShareStateReadRequest):
            reply(self.apis.groups.share_state_read(msg))
        elif isinstance(msg, m.ShareStateWriteRequest):
            self.apis.groups.share_state_write(msg, now, reply)
        else:
            self.apis.share_state_answered(msg, now)

    @property
    def ready(self) -> bool:
        return self.published

    def controller_id(self) -> int | None:
        return self.raft.leader_id()

    def controller_hint(self) -> int:
        """Metadata's controller id: KRaft brokers name a broker (clients cannot reach controllers)."""
        return self.node_id

    def send_to_controller(self, make) -> int | None:
        leader = self.controller_id()
        if leader is None:
            return None
        corr = self._next_correlation()
        self.outbox.send(leader, make(corr))
        return corr

    # ------------------------------------------------------------ metadata

    def publish(self, delta: MetadataDelta | None, image: MetadataImage) -> None:
        if not self.published:
            self._unpublished = image
            self.lifecycle.metadata_advanced(self.now, image.offset)
            self._maybe_first_publish()
            return
        self.rm.apply_image(image, touched_partitions(delta, image), self.now)
        self.lifecycle.metadata_advanced(self.now, image.offset)

    def _maybe_first_publish(self) -> None:
        image = self._unpublished
        hwm = self.raft.high_watermark
        epoch = self.lifecycle.broker_epoch
        if image is None or hwm is None or image.offset < hwm or epoch < 0 or image.offset <= epoch:
            return
        self.published = True
        self._unpublished = None
        self._on_event(f"metadata caught up at offset {image.offset}: publishing "
                       f"({len(image.topics)} topics, {len(image.brokers)} brokers)")
        self.rm.apply_image(image, None, self.now)
        self.lifecycle.metadata_advanced(self.now, image.offset)

    # ------------------------------------------------------------ producer ids

    def next_producer_id(self) -> int | None:
        if self._pid_next < self._pid_end:
            self._pid_next += 1
            return self._pid_next - 1
        self._request_pids()
        return None

    def _request_pids(self) -> None:
        if self._pid_request is not None and self.now < self._pid_request[1]:
            return
        if self.lifecycle.broker_epoch < 0:
            return
        corr = self.send_to_controller(lambda c: m.AllocateProducerIdsRequest(
            c, self.node_id, self.lifecycle.broker_epoch))
        if corr is not None:
            self._pid_request = (corr, self.now + CONTROLLER_REQUEST_TIMEOUT_MS)

    def _handle_pids(self, resp: m.AllocateProducerIdsResponse) -> None:
        if self._pid_request is None or self._pid_request[0] != resp.correlation_id:
            return
        self._pid_request = None
        if resp.error == m.NONE:
            self._pid_next, self._pid_end = resp.producer_id_start, resp.producer_id_start + resp.producer_id_len

    # ------------------------------------------------------------ inputs

    def handle(self, src, msg, now: int) -> bool:
        """Messages for the broker role; False if ``msg`` is not one."""
        self.now = now
        if isinstance(msg, m.ReplicaFetchRequest):
            self.rm.handle_replica_fetch(src, msg, now)
        elif isinstance(msg, m.ReplicaFetchResponse):
            self.rm.handle_replica_fetch_response(src, msg, now)
        elif isinstance(msg, m.BrokerRegistrationResponse):
            self.lifecycle.handle_registration_response(msg, now)
        elif isinstance(msg, m.BrokerHeartbeatResponse):
            self.lifecycle.handle_heartbeat_response(msg, now)
        elif isinstance(msg, m.AlterPartitionResponse):
            self.rm.handle_alter_partition_response(msg, now)
        elif isinstance(msg, m.AllocateProducerIdsResponse):
            self._handle_pids(msg)
        elif isinstance(msg, (m.CreateTopicsResponse, m.CreatePartitionsResponse,
                              m.AlterConfigsResponse, m.DeleteTopicsResponse,
                              m.QuorumStateResponse, m.ElectLeadersResponse,
                              m.AlterReassignmentsResponse, m.ListReassignmentsResponse,
                              m.UpdateFeaturesResponse, m.RaftVoterResponse,
                              m.CreateAclsResponse, m.DeleteAclsResponse,
                              m.UnregisterBrokerResponse, m.AlterScramResponse,
                              m.AlterQuotasResponse)):
            self.apis.handle_controller_response(msg)
        elif isinstance(msg, m.WriteTxnMarkersRequest):
            self.apis.write_txn_markers(msg, now, lambda resp: self.outbox.send(src, resp))
        elif isinstance(msg, m.WriteTxnMarkersResponse):
            self.apis.txns.handle_markers_response(msg, now)
        elif isinstance(msg, (m.ShareStateReadRequest, m.ShareStateWriteRequest,
                              m.ShareStateReadResponse, m.ShareStateWriteResponse)):
            self._share_state_message(msg, now, lambda resp: self.outbox.send(src, resp))
        else:
            return False
        self._after_input(now)
        return True

    def handle_kafka(self, src, req: KafkaRequest, now: int) -> None:
        self.now = now
        self.apis.handle(src, req, now)
        self._after_input(now)

    def poll(self, now: int) -> None:
        self.now = now
        if self._pid_request is not None and now >= self._pid_request[1]:
            # No answer: given up (the next InitProducerId asks again). Kept, its deadline
            # stayed the node's next one, in the past: the runtime polled every millisecond.
            self._pid_request = None
        if not self.published:
            self._maybe_first_publish()
        self.lifecycle.poll(now, self.controller_id(), self.controller.applied_offset)
        self._after_input(now)

    def _after_input(self, now: int) -> None:
        self.rm.broker_epoch = self.lifecycle.broker_epoch
        self.rm.controller_id = self.controller_id()
        self.rm.poll(now)
        self.apis.complete_delayed(now)
        if self._local_markers:
            while self._local_markers:
                req = self._local_markers.pop(0)
                self.apis.write_txn_markers(
                    req, now, lambda resp: self.apis.txns.handle_markers_response(resp, self.now))
            self.apis.complete_delayed(now)  # what the markers moved (HWs, parked fetches)
        for _ in range(3):  # what answers move (loaded state, parked share fetches) may write
            if not self._local_share:
                break
            while self._local_share:
                self._share_state_message(self._local_share.pop(0), now,
                                          self._local_share.append)
            self.apis.complete_delayed(now)
        # The coordinators (txns.poll, groups.poll) and the local markers append after
        # rm.poll served the parked follower fetches: a follower parked at the log end must
        # hear of those records now, not when its fetch times out (replica.fetch.wait.max.ms),
        # or every commit through this broker waits that long for its markers' high watermark.
        self.rm.complete_parked_fetches(now)
        self.rm.hw_changed.clear()
        self.rm.appended.clear()
        self.rm.topics_deleted.clear()
        self.rm.topic_ids_deleted.clear()
        self.rm.role_changed = False

    def next_deadline_ms(self) -> int:
        times = [self.rm.next_deadline_ms()]
        for t in (self.lifecycle.next_deadline_ms(), self.apis.next_deadline_ms()):
            if t is not None:
                times.append(t)
        if self._pid_request is not None:
            times.append(self._pid_request[1])
        if self._local_share:
            times.append(self.now)
        return min(times)

    # ------------------------------------------------------------ shutdown

    def begin_controlled_shutdown(self, now: int) -> None:
        self.lifecycle.begin_controlled_shutdown(now)
        self.poll(now)

    @property
    def shutdown_ready(self) -> bool:
        return self.lifecycle.state == SHUTTING_DOWN

    def shutdown(self) -> None:
        self.apis.fail_all()
        self.rm.shutdown(self.lifecycle.broker_epoch)
