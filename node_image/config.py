"""Node configuration, with Kafka's property names and defaults.

A node reads a Java-style properties file (``key=value`` lines). Every key
must be known; a bad value or an unknown key raises :class:`ConfigError`
naming the key. Defaults are Kafka's unless marked (chaoskraft).

| property | default | meaning |
|---|---|---|
| node.id | required | this node's id |
| process.roles | controller | ``controller``, ``broker`` or both |
| controller.quorum.voters | required | ``id@host:port,...``: the static voter set; under ``kraft.version`` 1 (a dynamic quorum) where every controller that may become a voter listens, the voter set being in the log |
| listeners | CONTROLLER://0.0.0.0:9093 | where the listeners bind: ``CONTROLLER://`` (Raft, broker-to-controller and replication RPCs) and, with the broker role, ``PLAINTEXT://`` (the Kafka protocol, e.g. ``PLAINTEXT://0.0.0.0:9092``) |
| advertised.listeners | PLAINTEXT://:9092 | the Kafka address given to clients; an empty host means this host's address (``hostname`` resolved) |
| log.dirs | required | the data directory (one) |
| controller.quorum.election.timeout.ms | 1000 | randomised in [t, 2t) |
| controller.quorum.election.backoff.max.ms | 1000 | cap of the exponential back-off |
| controller.quorum.fetch.timeout.ms | 2000 | follower without a fetch answer -> election; leader resigns after 1.5 x this without a majority of fetches (check quorum) |
| controller.quorum.request.timeout.ms | 2000 | an unanswered request is retried |
| controller.quorum.retry.backoff.ms | 20 | back-off after a failed request |
| controller.quorum.fetch.max.wait.ms | 500 | (chaoskraft) how long the leader parks an empty fetch; Kafka's constant |
| controller.quorum.fetch.max.bytes | 8388608 | (chaoskraft) bytes per fetch answer; Kafka's constant |
| metadata.log.segment.bytes | 1073741824 | segment roll size |
| metadata.log.max.record.bytes.between.snapshots | 20971520 | committed bytes between snapshots |
| metadata.max.idle.interval.ms | 500 | the active controller appends a NoOpRecord this often when idle; 0 = never |
| broker.heartbeat.interval.ms | 2000 | a broker heartbeats the controller this often |
| broker.session.timeout.ms | 9000 | the controller fences a broker without a heartbeat for this long |
| replica.lag.time.max.ms | 30000 | a follower not caught up for this long leaves the ISR |
| replica.fetch.wait.max.ms | 500 | how long a leader parks a follower's empty fetch |
| replica.fetch.max.bytes | 1048576 | bytes per partition in a follower fetch answer |
| replica.high.watermark.checkpoint.interval.ms | 5000 | how often high watermarks are checkpointed |
| min.insync.replicas | 1 | acks=all needs an ISR this large; topics may override |
| log.flush.interval.messages | 9223372036854775807 | fsync a data partition after this many messages; the default (Kafka's) never fsyncs explicitly and relies on replication; topics override with ``flush.messages`` |
| log.segment.bytes | 1073741824 | data partition segment size |
| message.max.bytes | 1048588 | largest record batch a producer may send |
| log.message.timestamp.before.max.ms | 9223372036854775807 | a CreateTime record stamped more than this before the leader's wall clock is refused (INVALID_TIMESTAMP); topics override with ``message.timestamp.before.max.ms`` |
| log.message.timestamp.after.max.ms | 9223372036854775807 | and more than this after it; topics override with ``message.timestamp.after.max.ms`` |
| num.partitions | 1 | partitions of a topic created without a count |
| default.replication.factor | 1 | replication factor of a topic created without one |
| auto.create.topics.enable | true | a Metadata request that names a topic no one made, and allows it (every version before v4; from v4 its flag), makes the controller create it with ``num.partitions`` and ``default.replication.factor``; the answer says LEADER_NOT_AVAILABLE until it exists, as Kafka's. Campaigns set it false: their workloads make their topics with the replication they test |
| auto.leader.rebalance.enable | true | move leadership back to preferred replicas |
| leader.imbalance.check.interval.seconds | 300 | how often |
| offsets.topic.num.partitions | 50 | partitions of ``__consumer_offsets``, created at the first FindCoordinator for a group |
| offsets.topic.replication.factor | 3 | its replication factor (creation fails, and coordinators stay unavailable, while fewer brokers are registered) |
| offsets.commit.timeout.ms | 5000 | an offset commit or group write waits this long for the replicas |
| offset.metadata.max.bytes | 4096 | the longest metadata string of a committed offset |
| transaction.state.log.num.partitions | 50 | partitions of ``__transaction_state``, created at the first FindCoordinator for a transactional id |
| transaction.state.log.replication.factor | 3 | its replication factor |
| transaction.state.log.min.isr | 2 | its ``min.insync.replicas`` |
| group.initial.rebalance.delay.ms | 3000 | how long the first rebalance of an empty group waits for more members; 0 = not at all |
| group.min.session.timeout.ms | 6000 | the shortest session timeout a member may ask for |
| group.max.session.timeout.ms | 1800000 | the longest |
| group.consumer.session.timeout.ms | 45000 | a member of a KIP-848 group (``group.protocol=consumer``) silent this long is removed |
| group.consumer.heartbeat.interval.ms | 5000 | the interval KIP-848 members are told to heartbeat at |
| group.consumer.migration.policy | bidirectional | (case-insensitive) ``upgrade``: a classic group with members becomes a KIP-848 group when a ``group.protocol=consumer`` member joins it, its classic members staying in it; ``downgrade``: a KIP-848 group whose last such member leaves becomes classic again; ``bidirectional`` both, ``disabled`` neither (docs/broker.md "Consumer groups") |
| group.share.session.timeout.ms | 45000 | a member of a share group (KIP-932) silent this long is removed |
| group.share.heartbeat.interval.ms | 5000 | the interval share group members are told to heartbeat at |
| group.share.record.lock.duration.ms | 30000 | how long a share group member holds the records it acquired before they may go to another |
| group.share.min.record.lock.duration.ms | 15000 | the shortest ``share.record.lock.duration.ms`` a group may be given |
| group.share.max.record.lock.duration.ms | 60000 | the longest |
| group.share.partition.max.record.locks | 2000 | how many records of a partition may be in flight (acquired or released, not yet done with) for a share group at once |
| group.share.delivery.count.limit | 5 | deliveries of a record to a share group after which it is archived, undelivered |
| authorizer.class.name | (empty) | ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` keeps ACLs in the metadata log and checks them (docs/broker.md "ACLs"); empty: no authorizer, the ACL APIs answer SECURITY_DISABLED and every client may do everything |
| allow.everyone.if.no.acl.found | false | with the authorizer, a resource no ACL names is open to everyone |
| super.users | (empty) | with the authorizer, principals (``User:name``, ``;``-separated) allowed everything |
| quota.window.num | 11 | samples a client quota's byte rate is measured over (``node_image/quota_meter.py``) |
| quota.window.size.seconds | 1 | each sample's length |
| request.timeout.ms | 30000 | broker requests to the controller and followers' fetches are retried after this |
| compression.type | producer | the codec batches are stored with: ``producer`` keeps what the producer sent; ``uncompressed``, ``gzip``, ``snappy``, ``lz4`` or ``zstd`` makes the broker recompress; topics override it |
| chaoskraft.metadata.max.version | 8 | (chaoskraft) the newest Metadata version ApiVersions advertises, 8 to 13: from v9 librdkafka trusts leader epochs and validates its position with OffsetForLeaderEpoch, where its 2.16 can deadlock (librdkafka issue 5476: a failed OffsetForLeaderEpoch re-queries the leader holding the partition's lock, against a thread holding the handle's lock); 13 answers as a Kafka 4 broker. A request of a newer version than advertised is still answered |
| chaoskraft.bootstrap.metadata.version | 21 | (chaoskraft) the ``metadata.version`` the quorum's first leader finalizes, 7 (Kafka 3.3-IV3) to 21 (3.9-IV0), as Kafka's ``kafka-storage format --release-version``; UpdateFeatures raises it while the cluster runs. Only a new cluster's first leader reads it |
| controller.quorum.auto.join.enable | false | in a dynamic quorum (KIP-853), a controller that is not a voter asks the quorum leader to add it (AddRaftVoter with its own id, directory id and address) once it fetches as an observer, every fetch timeout until it is one, as Kafka's |
| chaoskraft.bootstrap.kraft.version | 0 | (chaoskraft) the ``kraft.version`` ``format`` gives the quorum when no flag names one: 1 formats a dynamic quorum (KIP-853) from the voters it is given, as ``--feature kraft.version=1`` (it needs ``chaoskraft.bootstrap.metadata.version`` 21, as Kafka's 3.9-IV0). Read only by ``format`` |
| chaoskraft.bootstrap.eligible.leader.replicas.version | 0 | (chaoskraft) 1: the quorum's first leader also finalizes ``eligible.leader.replicas.version`` 1 (eligible leader replicas, KIP-966) and writes ``min.insync.replicas`` as the cluster's, as Kafka's ``kafka-storage format --feature eligible.leader.replicas.version=1``; UpdateFeatures turns it on or off later. Only a new cluster's first leader reads it |
| chaoskraft.power.loss.enable | false | (chaoskraft) keep data that is not yet fsynced in the node's memory only, so killing the node loses it as a power loss would; the power-loss nemesis turns it on with `via: process` (by default it drops that data from outside the node, through faultfs) |
| chaoskraft.bugs | (empty) | planted bugs to enable, comma separated (``chaoskraft bugs``) |
| chaoskraft.journal.path | (empty) | (chaoskraft) journal every message sent and received here, with Lamport timestamps (``node_image.rpc_journal``); empty: no journal. Docker and SSH clusters set /var/log/chaoskraft/rpc.jsonl |
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .bugs import BUGS


class ConfigError(ValueError):
    """A configuration value is missing or wrong; the message names the key."""


@dataclass(frozen=True, slots=True)
class RaftConfig:
    election_timeout_ms: int = 1000
    election_backoff_max_ms: int = 1000
    fetch_timeout_ms: int = 2000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 8 * 1024 * 1024
    snapshot_chunk_bytes: int = 1024 * 1024
    auto_join: bool = False  # controller.quorum.auto.join.enable (KIP-853)

    def check_quorum_timeout_ms(self) -> int:
        return self.fetch_timeout_ms * 3 // 2


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    compression_type: str = "producer"  # compression.type: producer or the codec to store
    metadata_max_version: int = 8  # chaoskraft.metadata.max.version: advertised to clients
    # chaoskraft.bootstrap.metadata.version: the level the quorum's first leader finalizes
    bootstrap_metadata_version: int = 21
    bootstrap_elr_version: int = 0  # chaoskraft.bootstrap.eligible.leader.replicas.version
    advertised: tuple[str, int] = ("", 9092)
    internal_port: int = 9093
    heartbeat_interval_ms: int = 2000
    session_timeout_ms: int = 9000
    replica_lag_time_max_ms: int = 30000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_max_bytes: int = 1024 * 1024
    hw_checkpoint_interval_ms: int = 5000
    min_insync_replicas: int = 1
    flush_interval_messages: int = (1 << 63) - 1
    segment_bytes: int = 1024 * 1024 * 1024
    message_max_bytes: int = 1048588
    timestamp_before_max_ms: int = (1 << 63) - 1
    timestamp_after_max_ms: int = (1 << 63) - 1
    default_partitions: int = 1
    default_replication_factor: int = 1
    auto_leader_rebalance: bool = True
    auto_create_topics: bool = True
    leader_imbalance_check_interval_ms: int = 300_000
    request_timeout_ms: int = 30000
    quota_window_num: int = 11
    quota_window_size_ms: int = 1000
    offsets_topic_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_commit_timeout_ms: int = 5000
    offset_metadata_max_bytes: int = 4096
    group_initial_rebalance_delay_ms: int = 3000
    transaction_topic_partitions: int = 50
    transaction_topic_replication_factor: int = 3
    transaction_topic_min_isr: int = 2
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_consumer_session_timeout_ms: int = 45000  # KIP-848 groups
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_migration_policy: str = "bidirectional"
    group_share_session_timeout_ms: int = 45000  # KIP-932 share groups
    group_share_heartbeat_interval_ms: int = 5000
    group_share_record_lock_duration_ms: int = 30000
    group_share_delivery_count_limit: int = 5
    group_share_partition_max_record_locks: int = 2000
    group_share_min_record_lock_duration_ms: int = 15000
    group_share_max_record_lock_duration_ms: int = 60000
    authorizer: bool = False  # authorizer.class.name is StandardAuthorizer
    allow_everyone_if_no_acl_found: bool = False
    super_users: frozenset = frozenset()
    # the keys server.properties set (DescribeConfigs: STATIC_BROKER_CONFIG, else DEFAULT)
    static_keys: frozenset = frozenset()
    retry_backoff_ms: int = 100
    # (chaoskraft) an internal request (heartbeat, follower fetch, AlterPartition) without an
    # answer for this long is sent again: the transport does not report lost connections.
    rpc_timeout_ms: int = 2000


@dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: int
    voters: dict[int, tuple[str, int]]  # id -> (host, port)
    log_dir: str
    roles: tuple[str, ...] = ("controller",)
    listener: tuple[str, int] = ("0.0.0.0", 9093)
    kafka_listener: tuple[str, int] | None = None  # PLAINTEXT://, brokers only
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    raft: RaftConfig = field(default_factory=RaftConfig)
    segment_bytes: int = 1024 * 1024 * 1024
    snapshot_max_bytes: int = 20 * 1024 * 1024
    idle_interval_ms: int = 500
    bugs: frozenset[str] = frozenset()
    power_loss: bool = False
    journal_path: str = ""
    bootstrap_kraft_version: int = 0  # chaoskraft.bootstrap.kraft.version: format's default

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters


_INT_KEYS = {
    "controller.quorum.election.timeout.ms": ("raft", "election_timeout_ms"),
    "controller.quorum.election.backoff.max.ms": ("raft", "election_backoff_max_ms"),
    "controller.quorum.fetch.timeout.ms": ("raft", "fetch_timeout_ms"),
    "controller.quorum.request.timeout.ms": ("raft", "request_timeout_ms"),
    "controller.quorum.retry.backoff.ms": ("raft", "retry_backoff_ms"),
    "controller.quorum.fetch.max.wait.ms": ("raft", "fetch_max_wait_ms"),
    "controller.quorum.fetch.max.bytes": ("raft", "fetch_max_bytes"),
    "metadata.log.segment.bytes": (None, "segment_bytes"),
    "metadata.log.max.record.bytes.between.snapshots": (None, "snapshot_max_bytes"),
    "metadata.max.idle.interval.ms": (None, "idle_interval_ms"),
    "broker.heartbeat.interval.ms": ("broker", "heartbeat_interval_ms"),
    "broker.session.timeout.ms": ("broker", "session_timeout_ms"),
    "replica.lag.time.max.ms": ("broker", "replica_lag_time_max_ms"),
    "replica.fetch.wait.max.ms": ("broker", "replica_fetch_wait_max_ms"),
    "replica.fetch.max.bytes": ("broker", "replica_fetch_max_bytes"),
    "replica.high.watermark.checkpoint.interval.ms": ("broker", "hw_checkpoint_interval_ms"),
    "min.insync.replicas": ("broker", "min_insync_replicas"),
    "log.flush.interval.messages": ("broker", "flush_interval_messages"),
    "log.segment.bytes": ("broker", "segment_bytes"),
    "message.max.bytes": ("broker", "message_max_bytes"),
    "log.message.timestamp.before.max.ms": ("broker", "timestamp_before_max_ms"),
    "log.message.timestamp.after.max.ms": ("broker", "timestamp_after_max_ms"),
    "num.partitions": ("broker", "default_partitions"),
    "default.replication.factor": ("broker", "default_replication_factor"),
    "leader.imbalance.check.interval.seconds": ("broker", "leader_imbalance_check_interval_ms"),
    "request.timeout.ms": ("broker", "request_timeout_ms"),
    "quota.window.num": ("broker", "quota_window_num"),
    "quota.window.size.seconds": ("broker", "quota_window_size_ms"),
    "offsets.topic.num.partitions": ("broker", "offsets_topic_partitions"),
    "offsets.topic.replication.factor": ("broker", "offsets_topic_replication_factor"),
    "offsets.commit.timeout.ms": ("broker", "offsets_commit_timeout_ms"),
    "offset.metadata.max.bytes": ("broker", "offset_metadata_max_bytes"),
    "group.initial.rebalance.delay.ms": ("broker", "group_initial_rebalance_delay_ms"),
    "transaction.state.log.num.partitions": ("broker", "transaction_topic_partitions"),
    "transaction.state.log.replication.factor": ("broker", "transaction_topic_replication_factor"),
    "transaction.state.log.min.isr": ("broker", "transaction_topic_min_isr"),
    "group.min.session.timeout.ms": ("broker", "group_min_session_timeout_ms"),
    "group.max.session.timeout.ms": ("broker", "group_max_session_timeout_ms"),
    "group.consumer.session.timeout.ms": ("broker", "group_consumer_session_timeout_ms"),
    "group.consumer.heartbeat.interval.ms": ("broker", "group_consumer_heartbeat_interval_ms"),
    "group.share.session.timeout.ms": ("broker", "group_share_session_timeout_ms"),
    "group.share.heartbeat.interval.ms": ("broker", "group_share_heartbeat_interval_ms"),
    "group.share.record.lock.duration.ms": ("broker", "group_share_record_lock_duration_ms"),
    "group.share.delivery.count.limit": ("broker", "group_share_delivery_count_limit"),
    "group.share.partition.max.record.locks": ("broker",
                                               "group_share_partition_max_record_locks"),
    "group.share.min.record.lock.duration.ms": ("broker",
                                                "group_share_min_record_lock_duration_ms"),
    "group.share.max.record.lock.duration.ms": ("broker",
                                                "group_share_max_record_lock_duration_ms"),
    "chaoskraft.metadata.max.version": ("broker", "metadata_max_version"),
    "chaoskraft.bootstrap.metadata.version": ("broker", "bootstrap_metadata_version"),
    "chaoskraft.bootstrap.eligible.leader.replicas.version": ("broker", "bootstrap_elr_version"),
    "chaoskraft.bootstrap.kraft.version": (None, "bootstrap_kraft_version"),
}
_ZERO_ALLOWED = {"metadata.max.idle.interval.ms", "group.initial.rebalance.delay.ms",
                 "chaoskraft.bootstrap.eligible.leader.replicas.version",
                 "chaoskraft.bootstrap.kraft.version"}
_BOOL_KEYS = {"auto.leader.rebalance.enable": "auto_leader_rebalance",
              "auto.create.topics.enable": "auto_create_topics",
              "chaoskraft.power.loss.enable": "power_loss",
              "allow.everyone.if.no.acl.found": "allow_everyone_if_no_acl_found",
              "controller.quorum.auto.join.enable": "auto_join"}
_KNOWN = set(_INT_KEYS) | set(_BOOL_KEYS) | {
    "node.id", "process.roles", "controller.quorum.voters", "listeners", "advertised.listeners",
    "log.dirs", "chaoskraft.bugs", "chaoskraft.journal.path", "compression.type",
    "group.consumer.migration.policy",
    "authorizer.class.name", "super.users"}
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
METADATA_MAX = 13  # the newest Metadata version the node answers (Kafka 4's)
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


def _parse_listeners(key: str, text: str) -> dict[str, tuple[str, int]]:
    out: dict[str, tuple[str, int]] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        try:
            name, spec = item.split("://", 1)
            host, port = spec.rsplit(":", 1)
            out[name] = (host.strip("[]"), int(port))
        except ValueError:
            raise ConfigError(f"{key}: {item!r} is not NAME://host:port") from None
        if name not in ("CONTROLLER", "PLAINTEXT"):
            raise ConfigError(f"{key}: unknown listener name {name!r} (CONTROLLER or PLAINTEXT)")
    return out


def parse_voters(text: str, key: str = "controller.quorum.voters") -> dict[int, tuple[str, int]]:
    voters: dict[int, tuple[str, int]] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        try:
            ident, hostport = item.split("@", 1)
            host, port = hostport.rsplit(":", 1)
            voters[int(ident)] = (host.strip("[]"), int(port))
        except ValueError:
            raise ConfigError(f"{key}: {item!r} is not id@host:port") from None
    if not voters:
        raise ConfigError(f"{key}: no voters given")
    return voters


def parse_properties(text: str, where: str = "config") -> dict[str, str]:
    props: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        if "=" not in line:
            raise ConfigError(f"{where}:{lineno}: expected key=value, got {line!r}")
        k, v = line.split("=", 1)
        props[k.strip()] = v.strip()
    return props


def load_config(props: dict[str, str]) -> NodeConfig:
    unknown = sorted(set(props) - _KNOWN)
    if unknown:
        raise ConfigError(f"unknown configuration key {unknown[0]!r}")
    for required in ("node.id", "controller.quorum.voters", "log.dirs"):
        if required not in props:
            raise ConfigError(f"{required} is required")
    try:
        node_id = int(props["node.id"])
    except ValueError:
        raise ConfigError(f"node.id: {props['node.id']!r} is not an integer") from None
    roles = tuple(r.strip() for r in props.get("process.roles", "controller").split(",") if r.strip())
    for r in roles:
        if r not in ("controller", "broker"):
            raise ConfigError(f"process.roles: unknown role {r!r}")
    voters = parse_voters(props["controller.quorum.voters"])
    if "controller" in roles and node_id not in voters:
        raise ConfigError(
            f"controller.quorum.voters: node.id {node_id} has the controller role but is not a voter")
    listeners = _parse_listeners("listeners", props.get("listeners", "CONTROLLER://0.0.0.0:9093"))
    if "CONTROLLER" not in listeners:
        raise ConfigError("listeners: a CONTROLLER:// listener is required")
    listener = (listeners["CONTROLLER"][0] or "0.0.0.0", listeners["CONTROLLER"][1])
    kafka_listener = None
    if "broker" in roles:
        plain = listeners.get("PLAINTEXT", ("0.0.0.0", 9092))
        kafka_listener = (plain[0] or "0.0.0.0", plain[1])
    elif "PLAINTEXT" in listeners:
        raise ConfigError("listeners: PLAINTEXT:// needs the broker role in process.roles")
    advertised = _parse_listeners("advertised.listeners",
                                  props.get("advertised.listeners", "PLAINTEXT://:9092"))
    if "PLAINTEXT" not in advertised:
        raise ConfigError("advertised.listeners: a PLAINTEXT:// listener is required")
    bugs = frozenset(b.strip() for b in props.get("chaoskraft.bugs", "").split(",") if b.strip())
    for b in bugs:
        if b not in BUGS:
            raise ConfigError(f"chaoskraft.bugs: unknown bug {b!r} (known: {', '.join(sorted(BUGS))})")
    kw: dict[str | None, dict] = {"raft": {}, None: {}, "broker": {}}
    for key, (group, name) in _INT_KEYS.items():
        if key in props:
            try:
                value = int(props[key])
            except ValueError:
                raise ConfigError(f"{key}: {props[key]!r} is not an integer") from None
            if value < 0 or (value == 0 and key not in _ZERO_ALLOWED):
                raise ConfigError(f"{key}: must be positive, got {value}")
            if key in ("leader.imbalance.check.interval.seconds", "quota.window.size.seconds"):
                value *= 1000
            if key == "chaoskraft.metadata.max.version" and not 8 <= value <= METADATA_MAX:
                raise ConfigError(f"{key}: must be 8 to {METADATA_MAX}, got {value}")
            if key == "chaoskraft.bootstrap.metadata.version" and not 7 <= value <= 21:
                raise ConfigError(f"{key}: must be a metadata.version the node supports, 7 to "
                                  f"21, got {value}")
            if key in ("chaoskraft.bootstrap.eligible.leader.replicas.version",
                       "chaoskraft.bootstrap.kraft.version") and value > 1:
                raise ConfigError(f"{key}: must be 0 or 1, got {value}")
            kw[group][name] = value
    if kw[None].get("bootstrap_kraft_version") == 1 and \
            kw["broker"].get("bootstrap_metadata_version", 21) < 21:
        raise ConfigError("chaoskraft.bootstrap.kraft.version: 1 (a dynamic quorum) needs "
                          "chaoskraft.bootstrap.metadata.version 21 (3.9-IV0), got "
                          f"{kw['broker']['bootstrap_metadata_version']}")
    for key, name in _BOOL_KEYS.items():
        if key in props:
            if props[key] not in ("true", "false"):
                raise ConfigError(f"{key}: {props[key]!r} is not true or false")
            group = {"power_loss": None, "auto_join": "raft"}.get(name, "broker")
            kw[group][name] = props[key] == "true"
    if "compression.type" in props:
        if props["compression.type"] not in COMPRESSION_TYPES:
            raise ConfigError(f"compression.type: {props['compression.type']!r} is not one of "
                              f"{', '.join(COMPRESSION_TYPES)}")
        kw["broker"]["compression_type"] = props["compression.type"]
    if "group.consumer.migration.policy" in props:
        policy = props["group.consumer.migration.policy"].lower()
        if policy not in MIGRATION_POLICIES:
            raise ConfigError(f"group.consumer.migration.policy: "
                              f"{props['group.consumer.migration.policy']!r} is not one of "
                              f"{', '.join(MIGRATION_POLICIES)}")
        kw["broker"]["group_consumer_migration_policy"] = policy
    authorizer = props.get("authorizer.class.name", "")
    if authorizer not in ("", STANDARD_AUTHORIZER):
        raise ConfigError(f"authorizer.class.name: {authorizer!r} is not supported (only "
                          f"{STANDARD_AUTHORIZER}, or empty for none)")
    kw["broker"]["authorizer"] = bool(authorizer)
    kw["broker"]["super_users"] = frozenset(
        u.strip() for u in props.get("super.users", "").split(";") if u.strip())
    kw["broker"]["advertised"] = advertised["PLAINTEXT"]
    kw["broker"]["internal_port"] = listener[1]
    kw["broker"]["static_keys"] = frozenset(props)
    return NodeConfig(node_id=node_id, voters=voters, log_dir=props["log.dirs"], roles=roles,
                      listener=listener, kafka_listener=kafka_listener,
                      broker=BrokerConfig(**kw["broker"]),
                      raft=dataclasses.replace(RaftConfig(), **kw["raft"]), bugs=bugs,
                      journal_path=props.get("chaoskraft.journal.path", ""), **kw[None])
