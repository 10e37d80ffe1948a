"""A KRaft node's core: storage, the Raft client and the controller, without I/O.

The runtime (``node_image.runtime`` over TCP, or ``simulator``) creates a
:class:`Node` on a :class:`~node_image.fs.FileSystem`, feeds it messages and
timer ticks with the node's clock reading, and after each input sends what
``ready()`` returns: (destination, message) pairs where the destination is a
node id for our requests or the opaque ``src`` token a request came with
(``node_image.outbox``). The cores get their collaborators at construction,
as in Kafka: the Raft client its outbox, the controller the Raft client, then
``raft.register(controller)``; the broker subscribes to the controller's
published metadata images.

Register requests reaching a node that is not the active controller are
forwarded to the leader it knows (as Kafka brokers forward admin requests to
the controller); when no answer comes within the request timeout the client
gets outcome "unknown" for a write ("fail" for a read).

With the broker role the node also runs a :class:`~node_image.broker.broker.Broker`
(registration, heartbeats, partitions, replication, the Kafka APIs); Kafka
requests arrive through :meth:`Node.handle_kafka`. Broker-to-controller
requests reaching a node that is not the active controller are answered
NOT_CONTROLLER and the broker retries at the leader.

Start-up checks that the directory was formatted for this node
(``meta.properties``) and that the voter ids formatted into quorum-state are
the ones configured.
"""
from __future__ import annotations

import os
import random
import time
from typing import Callable

from . import group_configs
from . import messages as m
from .config import NodeConfig
from .controller import ControllerOptions, QuorumController
from .fs import FileSystem
from .log import UnifiedLog
from .outbox import Outbox
from .broker.broker import Broker
from .kafka_codec import KafkaRequest
from .raft.client import KafkaRaftClient
from .storage import METADATA_DIR, QuorumStateStore, StorageError, read_meta_properties


class _Forwarded:
    """Reply token for a request another node forwarded to this controller: the answer goes
    back to the forwarding node as a ForwardRegisterResponse (``Outbox.send``)."""
    __slots__ = ("src",)

    def __init__(self, src) -> None:
        self.src = src

    def reply(self, msg: m.RegisterResponse) -> tuple:
        return self.src, m.ForwardRegisterResponse(msg.request_id, msg.outcome, msg.error,
                                                   msg.value, msg.leader_id, msg.leader_epoch)


class Node:
    def __init__(self, config: NodeConfig, fs: FileSystem, rng: random.Random, now_ms: int,
                 on_event: Callable[[str], None] | None = None,
                 wall_clock: Callable[[], int] | None = None) -> None:
        """``now_ms``: the monotonic clock the cores' timers run on; ``wall_clock``: the wall
        clock in ms where Kafka reads one (``Time.milliseconds()``): the Raft timers (see
        ``KafkaRaftClient``) and LogAppendTime. The runtime gives the system's, the
        simulator each node's drifting one; without it the Raft timers run on ``now_ms``
        and the broker reads the system's wall clock."""
        self.config = config
        self.node_id = config.node_id
        self._on_event = on_event or (lambda msg: None)
        self._wall_clock = wall_clock or (lambda: int(time.time() * 1000))
        self.meta = read_meta_properties(fs, config.log_dir, config.node_id)
        metadata_dir = os.path.join(config.log_dir, METADATA_DIR)
        self.store = QuorumStateStore(fs, metadata_dir,
                                      fsync="unsynced-quorum-state" not in config.bugs)
        election = self.store.read()
        formatted = sorted(v.node_id for v in election.voters)
        if election.kraft_version >= 1:
            # A dynamic quorum: controller.quorum.voters is where every controller that may
            # become a voter listens; the voter set itself is in the log.
            if not set(formatted) <= set(config.voters):
                raise StorageError(
                    f"controller.quorum.voters names {sorted(config.voters)} but "
                    f"{self.store.path} was formatted with bootstrap voters {formatted}")
        elif formatted != sorted(config.voters):
            raise StorageError(
                f"controller.quorum.voters names {sorted(config.voters)} but {self.store.path} "
                f"was formatted with voters {formatted}")
        self.log = UnifiedLog(fs, metadata_dir, config.segment_bytes, self._on_event)
        self.outbox = Outbox()
        self.raft = KafkaRaftClient(
            node_id=config.node_id, directory_id=self.meta.directory_id,
            cluster_id=self.meta.cluster_id, voters=election.voters, log=self.log,
            store=self.store, config=config.raft, rng=rng, outbox=self.outbox,
            now_ms=now_ms, bugs=config.bugs, on_event=self._on_event, clock=wall_clock,
            kraft_version=election.kraft_version, bootstrap_servers=tuple(sorted(config.voters)),
            local_endpoint=config.voters.get(config.node_id) or config.listener,
            voter_endpoints=config.voters)
        b = config.broker
        options = ControllerOptions(
            idle_interval_ms=config.idle_interval_ms, snapshot_max_bytes=config.snapshot_max_bytes,
            session_timeout_ms=b.session_timeout_ms,
            leader_imbalance_check_interval_ms=b.leader_imbalance_check_interval_ms,
            auto_leader_rebalance=b.auto_leader_rebalance, default_partitions=b.default_partitions,
            default_replication_factor=b.default_replication_factor,
            bootstrap_metadata_version=b.bootstrap_metadata_version,
            bootstrap_elr_version=b.bootstrap_elr_version, min_insync_replicas=b.min_insync_replicas,
            group_config_bounds=group_configs.bounds(b), quota_window_num=b.quota_window_num,
            quota_window_size_ms=b.quota_window_size_ms)
        self.controller = QuorumController(
            config.node_id, options=options, bugs=config.bugs, raft=self.raft,
            outbox=self.outbox, can_lead="controller" in config.roles, on_event=self._on_event)
        self.raft.register(self.controller)  # loads the latest snapshot into it
        self.broker: Broker | None = None
        if "broker" in config.roles:
            self.broker = Broker(config.node_id, config.broker, fs, config.log_dir,
                                 self.meta.cluster_id, rng, self.outbox, self.raft,
                                 self.controller, self._on_event, config.bugs, wall_clock)
        self._forwards: dict[int, tuple] = {}
        self._forward_seq = rng.randrange(1 << 30)
        self.raft.poll(now_ms)

    def handle(self, src, msg, now_ms: int) -> None:
        handler = self._controller_handlers.get(type(msg))
        if isinstance(msg, m.RaftVoterResponse) and self.raft.owns_voter_response(msg):
            self.raft.handle(src, msg, now_ms)  # our auto-join's answer, not a client's
        elif handler is not None:
            handler(self.controller, src, msg, now_ms)
            self.raft.poll(now_ms)
        elif self.broker is not None and self.broker.handle(src, msg, now_ms):
            self.raft.poll(now_ms)
        elif isinstance(msg, (m.ReplicaFetchRequest, m.ReplicaFetchResponse)):
            pass  # not a broker: a misdirected replica fetch is dropped (the sender retries)
        elif isinstance(msg, m.RegisterRequest):
            self._register(src, msg, now_ms)
        elif isinstance(msg, m.ForwardRegisterRequest):
            req = m.RegisterRequest(msg.correlation_id, msg.op, msg.key, msg.value, msg.expected)
            self.controller.handle_register(_Forwarded(src), req, now_ms)
            self.raft.poll(now_ms)
        elif isinstance(msg, m.ForwardRegisterResponse):
            self._forward_done(msg)
        elif isinstance(msg, m.DescribeQuorumRequest):
            self.outbox.send(src, self.describe(msg.request_id))
        elif isinstance(msg, m.QuorumStateRequest):
            self.outbox.send(src, self.quorum_state(msg.correlation_id, now_ms))
        elif isinstance(msg, (m.RegisterResponse, m.DescribeQuorumResponse)):
            raise TypeError(f"{type(msg).__name__} is not a request a node accepts")
        else:
            self.raft.handle(src, msg, now_ms)

    _controller_handlers = {
        m.BrokerRegistrationRequest: QuorumController.handle_broker_registration,
        m.BrokerHeartbeatRequest: QuorumController.handle_broker_heartbeat,
        m.CreateTopicsRequest: QuorumController.handle_create_topics,
        m.CreatePartitionsRequest: QuorumController.handle_create_partitions,
        m.AlterConfigsRequest: QuorumController.handle_alter_configs,
        m.DeleteTopicsRequest: QuorumController.handle_delete_topics,
        m.ElectLeadersRequest: QuorumController.handle_elect_leaders,
        m.AlterReassignmentsRequest: QuorumController.handle_alter_reassignments,
        m.ListReassignmentsRequest: QuorumController.handle_list_reassignments,
        m.UpdateFeaturesRequest: QuorumController.handle_update_features,
        m.CreateAclsRequest: QuorumController.handle_create_acls,
        m.UnregisterBrokerRequest: QuorumController.handle_unregister_broker,
        m.DeleteAclsRequest: QuorumController.handle_delete_acls,
        m.AlterScramRequest: QuorumController.handle_alter_scram,
        m.AlterQuotasRequest: QuorumController.handle_alter_quotas,
        m.AlterPartitionRequest: QuorumController.handle_alter_partition,
        m.AllocateProducerIdsRequest: QuorumController.handle_allocate_producer_ids,
    }

    def handle_kafka(self, src, req: KafkaRequest, now_ms: int) -> None:
        if self.broker is None:
            raise TypeError("a Kafka request reached a node without the broker role")
        self.broker.handle_kafka(src, req, now_ms)
        self.raft.poll(now_ms)

    def peer_address(self, node_id: int) -> tuple[str, int] | None:
        """The internal address of a node: a voter's from the voter set in a dynamic quorum
        (KIP-853: where AddRaftVoter and UpdateRaftVoter put it), else a controller's from
        the config; a broker's from metadata."""
        endpoint = self.raft.voter_endpoint(node_id) if self.raft.kraft_version >= 1 else None
        if endpoint is not None:
            return endpoint
        if node_id in self.config.voters:
            return self.config.voters[node_id]
        endpoint = self.raft.voter_endpoint(node_id)
        if endpoint is not None:
            return endpoint
        reg = self.controller.committed.brokers.get(node_id)
        return None if reg is None else reg.endpoint("INTERNAL")

    # ------------------------------------------------------------ forwarding

    def _register(self, src, req: m.RegisterRequest, now_ms: int) -> None:
        """Serve as the active controller, or forward to it as Kafka brokers do."""
        leader = self.raft.leader_id()
        if self.controller.active or leader is None or leader == self.node_id:
            self.controller.handle_register(src, req, now_ms)
            self.raft.poll(now_ms)
            return
        self._forward_seq += 1
        corr = self._forward_seq
        self._forwards[corr] = (src, req, now_ms + self.config.raft.request_timeout_ms)
        self.outbox.send(leader, m.ForwardRegisterRequest(corr, req.op, req.key, req.value,
                                                             req.expected))

    def _forward_done(self, resp: m.ForwardRegisterResponse) -> None:
        entry = self._forwards.pop(resp.correlation_id, None)
        if entry is None:
            return  # timed out already
        src, req, _ = entry
        self.outbox.send(src, m.RegisterResponse(req.request_id, resp.outcome, resp.error,
                                                    resp.value, resp.leader_id, resp.leader_epoch))

    def _expire_forwards(self, now_ms: int) -> None:
        for corr, (src, req, deadline) in list(self._forwards.items()):
            if now_ms >= deadline:
                del self._forwards[corr]
                # No answer from the controller: a write may or may not have happened.
                outcome = "fail" if req.op == "read" else "unknown"
                leader = self.raft.leader_id()
                self.outbox.send(src, m.RegisterResponse(
                    req.request_id, outcome, m.REQUEST_TIMED_OUT, None,
                    -1 if leader is None else leader, self.raft.epoch))

    def poll(self, now_ms: int) -> None:
        self.raft.poll(now_ms)
        self.controller.tick(now_ms)
        self.raft.poll(now_ms)
        if self.broker is not None:
            self.broker.poll(now_ms)
            self.raft.poll(now_ms)
        self._expire_forwards(now_ms)

    def ready(self) -> list[tuple]:
        """Everything to send since the last call, in order (etcd-io/raft's Ready)."""
        return self.outbox.take()

    def next_deadline_ms(self) -> int:
        times = [self.raft.next_deadline_ms()]
        c = self.controller.next_deadline_ms()
        if c is not None:
            times.append(c)
        times += [d for _, _, d in self._forwards.values()]
        if self.broker is not None:
            times.append(self.broker.next_deadline_ms())
        return min(times)

    def begin_shutdown(self, now_ms: int) -> None:
        """SIGTERM: a broker first asks the controller to move its leadership away."""
        if self.broker is not None:
            self.broker.begin_controlled_shutdown(now_ms)

    @property
    def shutdown_ready(self) -> bool:
        return self.broker is None or self.broker.shutdown_ready

    def shutdown(self, now_ms: int) -> None:
        if self.broker is not None:
            self.broker.shutdown()
        self.raft.resign(now_ms)

    def quorum_state(self, correlation_id: int, now_ms: int) -> m.QuorumStateResponse:
        """Kafka's DescribeQuorum, as the quorum leader sees it (NOT_LEADER_OR_FOLLOWER
        elsewhere); fetch times on this node's wall clock."""
        nodes = tuple((v,) + tuple(self.peer_address(v)) for v in sorted(self.raft.voters)
                      if self.peer_address(v) is not None)
        state = self.raft.quorum_state(now_ms)
        if state is None:
            leader = self.raft.leader_id()
            return m.QuorumStateResponse(correlation_id, m.NOT_LEADER_OR_FOLLOWER,
                                         -1 if leader is None else leader, self.raft.epoch,
                                         -1, (), (), nodes)
        epoch, hwm, voters, observers = state
        wall = self._wall_clock()

        def rows(replicas):
            return tuple((rid, directory or "", offset,
                          -1 if since is None else wall - since,
                          wall - since if caught_up and since is not None else -1)
                         for rid, directory, offset, since, caught_up in replicas)
        return m.QuorumStateResponse(correlation_id, m.NONE, self.node_id, epoch, hwm,
                                     rows(voters), rows(observers), nodes)

    def describe(self, request_id: int = 0) -> m.DescribeQuorumResponse:
        raft = self.raft
        leader = raft.leader_id()
        hwm = raft.high_watermark
        return m.DescribeQuorumResponse(
            request_id, self.node_id, raft.role, raft.epoch, -1 if leader is None else leader,
            -1 if hwm is None else hwm, self.log.end_offset, self.log.start_offset,
            raft.committed_offset(),
            broker_state="" if self.broker is None else self.broker.lifecycle.state)
