"""meta.properties, the ``format`` step, and the ``quorum-state`` file.

- ``format`` writes ``meta.properties`` (cluster.id, node.id, directory.id,
  version) in the log directory and the first ``quorum-state`` (epoch 0, no
  leader, no vote, the initial voter set with the voters' directory ids, as
  Kafka's ``--initial-controllers``). A node refuses to start on a directory
  that was never formatted, or formatted for another node id.
- ``quorum-state`` is JSON with Kafka's field names. It is replaced
  atomically (temp file, fsync, rename, fsync directory) and always *before*
  the in-memory transition it records takes effect.
"""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field

from .fs import FileSystem, write_durably

META_PROPERTIES = "meta.properties"
METADATA_DIR = "__cluster_metadata-0"
QUORUM_STATE = "quorum-state"


class StorageError(RuntimeError):
    """The log directory is missing, unformatted, or belongs to another node or cluster."""


@dataclass(frozen=True, slots=True)
class ReplicaKey:
    """A voter is its node id plus the directory id its disk was formatted with (KIP-853).

    ``directory_id`` None means "any directory" (a static voter set without ids).
    """
    node_id: int
    directory_id: str | None = None

    def matches(self, node_id: int, directory_id: str | None) -> bool:
        return node_id == self.node_id and (
            self.directory_id is None or directory_id is None or directory_id == self.directory_id)


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int
    leader_id: int | None = None
    voted_key: ReplicaKey | None = None
    voters: tuple[ReplicaKey, ...] = field(default=())
    # 1: a dynamic quorum (KIP-853); ``voters`` is then the bootstrap set format wrote, the
    # current one is in the log
    kraft_version: int = 0

    def to_json(self) -> bytes:
        extra = {"kraftVersion": self.kraft_version} if self.kraft_version else {}
        return json.dumps({**extra,
            "leaderId": -1 if self.leader_id is None else self.leader_id,
            "leaderEpoch": self.epoch,
            "votedId": -1 if self.voted_key is None else self.voted_key.node_id,
            "votedDirectoryId": None if self.voted_key is None else self.voted_key.directory_id,
            "currentVoters": [{"voterId": v.node_id, "directoryId": v.directory_id}
                              for v in self.voters],
            "data_version": 1,
        }, sort_keys=True).encode()

    @staticmethod
    def from_json(data: bytes, where: str) -> "ElectionState":
        try:
            d = json.loads(data)
            voted = None if d["votedId"] == -1 else ReplicaKey(d["votedId"], d.get("votedDirectoryId"))
            return ElectionState(
                epoch=int(d["leaderEpoch"]),
                leader_id=None if d["leaderId"] == -1 else int(d["leaderId"]),
                voted_key=voted,
                voters=tuple(ReplicaKey(int(v["voterId"]), v.get("directoryId"))
                             for v in d.get("currentVoters", [])),
                kraft_version=int(d.get("kraftVersion", 0)),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise StorageError(f"{where} is not a valid quorum-state file: {exc}") from exc


def new_directory_id(rng=None) -> str:
    if rng is None:
        return str(uuid.uuid4())
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def format_storage(fs: FileSystem, log_dir: str, cluster_id: str, node_id: int,
                   voters: tuple[ReplicaKey, ...], directory_id: str,
                   ignore_formatted: bool = False, kraft_version: int = 0) -> MetaProperties:
    """Kafka's ``kafka-storage format``: meta.properties and the first quorum-state.
    ``kraft_version`` 1 formats a dynamic quorum (KIP-853): ``voters`` is its bootstrap voter
    set, empty for a controller that will join one (``--no-initial-controllers``)."""
    fs.makedirs(log_dir)
    path = os.path.join(log_dir, META_PROPERTIES)
    if fs.exists(path) and not ignore_formatted:
        raise StorageError(f"{log_dir} is already formatted ({path} exists)")
    if not voters and kraft_version == 0:
        raise StorageError("format needs at least one voter (or kraft.version 1 to join a "
                           "dynamic quorum later)")
    props = (f"cluster.id={cluster_id}\ndirectory.id={directory_id}\n"
             f"node.id={node_id}\nversion=1\n").encode()
    meta_dir = os.path.join(log_dir, METADATA_DIR)
    fs.makedirs(meta_dir)
    write_durably(fs, os.path.join(meta_dir, QUORUM_STATE),
                  ElectionState(epoch=0, voters=voters,
                                kraft_version=kraft_version).to_json())
    write_durably(fs, path, props)
    return MetaProperties(cluster_id, node_id, directory_id)


def read_meta_properties(fs: FileSystem, log_dir: str, node_id: int) -> MetaProperties:
    path = os.path.join(log_dir, META_PROPERTIES)
    if not fs.exists(path):
        raise StorageError(
            f"{log_dir} is not formatted: no {META_PROPERTIES}; run the format step first")
    values = {}
    for line in fs.read(path).decode(errors="replace").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            values[k.strip()] = v.strip()
    for key in ("cluster.id", "node.id", "directory.id"):
        if key not in values:
            raise StorageError(f"{path} has no {key}")
    try:
        stored_id = int(values["node.id"])
    except ValueError:
        raise StorageError(f"{path}: node.id {values['node.id']!r} is not an integer") from None
    if stored_id != node_id:
        raise StorageError(
            f"{path} was formatted for node.id {stored_id}, but this node is node.id {node_id}")
    return MetaProperties(values["cluster.id"], stored_id, values["directory.id"])


class QuorumStateStore:
    """Reads and durably replaces ``quorum-state``."""

    def __init__(self, fs: FileSystem, metadata_dir: str, fsync: bool = True) -> None:
        self.fs = fs
        self.path = os.path.join(metadata_dir, QUORUM_STATE)
        self.fsync = fsync  # False only under the planted bug unsynced-quorum-state

    def read(self) -> ElectionState:
        if not self.fs.exists(self.path):
            raise StorageError(f"{self.path} is missing; the directory was not formatted")
        return ElectionState.from_json(self.fs.read(self.path), self.path)

    def write(self, state: ElectionState) -> None:
        if self.fsync:
            write_durably(self.fs, self.path, state.to_json())
        else:
            tmp = self.path + ".tmp"
            self.fs.write(tmp, state.to_json())
            self.fs.rename(tmp, self.path)
