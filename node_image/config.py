"""Node configuration, with Kafka's property names and defaults.

A node reads a Java-style properties file (``key=value`` lines). Every key
must be known; a bad value or an unknown key raises :class:`ConfigError`
naming the key. Defaults are Kafka's unless marked (chaoskraft).

| property | default | meaning |
|---|---|---|
| node.id | required | this node's id |
| process.roles | controller | ``controller``, ``broker`` or both |
| controller.quorum.voters | required | ``id@host:port,...``: the static voter set |
| listeners | CONTROLLER://0.0.0.0:9093 | where the internal listener binds |
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
| chaoskraft.bugs | (empty) | planted bugs to enable, comma separated (``chaoskraft bugs``) |
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

    def check_quorum_timeout_ms(self) -> int:
        return self.fetch_timeout_ms * 3 // 2


@dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: int
    voters: dict[int, tuple[str, int]]  # id -> (host, port)
    log_dir: str
    roles: tuple[str, ...] = ("controller",)
    listener: tuple[str, int] = ("0.0.0.0", 9093)
    raft: RaftConfig = field(default_factory=RaftConfig)
    segment_bytes: int = 1024 * 1024 * 1024
    snapshot_max_bytes: int = 20 * 1024 * 1024
    idle_interval_ms: int = 500
    bugs: frozenset[str] = frozenset()

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
}
_KNOWN = set(_INT_KEYS) | {"node.id", "process.roles", "controller.quorum.voters", "listeners",
                           "log.dirs", "chaoskraft.bugs"}


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
    listener = ("0.0.0.0", 9093)
    if "listeners" in props:
        spec = props["listeners"].split("://", 1)[-1]
        try:
            host, port = spec.rsplit(":", 1)
            listener = (host or "0.0.0.0", int(port))
        except ValueError:
            raise ConfigError(f"listeners: {props['listeners']!r} is not NAME://host:port") from None
    bugs = frozenset(b.strip() for b in props.get("chaoskraft.bugs", "").split(",") if b.strip())
    for b in bugs:
        if b not in BUGS:
            raise ConfigError(f"chaoskraft.bugs: unknown bug {b!r} (known: {', '.join(sorted(BUGS))})")
    raft_kw, node_kw = {}, {}
    for key, (group, name) in _INT_KEYS.items():
        if key in props:
            try:
                value = int(props[key])
            except ValueError:
                raise ConfigError(f"{key}: {props[key]!r} is not an integer") from None
            if value < 0 or (value == 0 and key != "metadata.max.idle.interval.ms"):
                raise ConfigError(f"{key}: must be positive, got {value}")
            (raft_kw if group == "raft" else node_kw)[name] = value
    return NodeConfig(node_id=node_id, voters=voters, log_dir=props["log.dirs"], roles=roles,
                      listener=listener, raft=dataclasses.replace(RaftConfig(), **raft_kw),
                      bugs=bugs, **node_kw)
