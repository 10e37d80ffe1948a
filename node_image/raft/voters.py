"""The voter set of a dynamic quorum (KIP-853, ``kraft.version`` 1).

Under ``kraft.version`` 0 the voter set is the one ``format`` wrote and never changes. Under
1 it lives in the log: every change is a VotersRecord control record, and a replica's voter
set is the one in the latest VotersRecord it holds, committed or not (Kafka's
``KRaftControlRecordStateMachine`` and ``VoterSetHistory``). A truncation drops the records
past the new end, so the voter set goes back with the log; a snapshot carries the voter set
at its end offset. Before any VotersRecord the set is the bootstrap one ``format`` wrote
(Kafka's bootstrap checkpoint); the first leader of a dynamic quorum writes it to the log.

A VotersRecord's body is msgpack: ``{"version": 0, "voters": [{"voterId", "directoryId",
"host", "port"}, ...]}``; the KRaftVersionRecord beside it ``{"version": 0,
"kraftVersion": 1}``. Control record types as Kafka's: KRAFT_VERSION 5, KRAFT_VOTERS 6.
"""
from __future__ import annotations

from dataclasses import dataclass

import msgpack

from .. import records
from ..storage import ReplicaKey

CONTROL_KRAFT_VERSION = 5
CONTROL_VOTERS = 6


@dataclass(frozen=True, slots=True)
class VoterSet:
    """Voters by node id, each with its directory id and, where known, its endpoint."""
    keys: tuple[ReplicaKey, ...]
    endpoints: tuple[tuple[int, str, int], ...] = ()  # (node id, host, port)

    def as_dict(self) -> dict[int, ReplicaKey]:
        return {k.node_id: k for k in self.keys}

    def endpoint(self, node_id: int) -> tuple[str, int] | None:
        for nid, host, port in self.endpoints:
            if nid == node_id:
                return host, port
        return None

    def with_voter(self, key: ReplicaKey, endpoint: tuple[str, int] | None) -> "VoterSet":
        keys = tuple(sorted(self.keys + (key,), key=lambda k: k.node_id))
        eps = self.endpoints + (((key.node_id,) + tuple(endpoint),) if endpoint else ())
        return VoterSet(keys, tuple(sorted(eps)))

    def with_endpoint(self, node_id: int, endpoint: tuple[str, int]) -> "VoterSet":
        """The same voters, ``node_id``'s endpoint replaced."""
        eps = tuple(e for e in self.endpoints if e[0] != node_id) + ((node_id,) + tuple(endpoint),)
        return VoterSet(self.keys, tuple(sorted(eps)))

    def without(self, node_id: int) -> "VoterSet":
        return VoterSet(tuple(k for k in self.keys if k.node_id != node_id),
                        tuple(e for e in self.endpoints if e[0] != node_id))

    def encode(self) -> bytes:
        eps = {nid: (host, port) for nid, host, port in self.endpoints}
        return msgpack.packb({"version": 0, "voters": [
            {"voterId": k.node_id, "directoryId": k.directory_id,
             "host": eps.get(k.node_id, ("", -1))[0], "port": eps.get(k.node_id, ("", -1))[1]}
            for k in self.keys]})

    @staticmethod
    def decode(body: bytes) -> "VoterSet":
        try:
            d = msgpack.unpackb(body)
            keys, eps = [], []
            for v in d["voters"]:
                keys.append(ReplicaKey(int(v["voterId"]), v.get("directoryId")))
                if v.get("host") and int(v.get("port", -1)) >= 0:
                    eps.append((int(v["voterId"]), str(v["host"]), int(v["port"])))
            return VoterSet(tuple(sorted(keys, key=lambda k: k.node_id)), tuple(sorted(eps)))
        except (ValueError, KeyError, TypeError, msgpack.UnpackException) as exc:
            raise records.CorruptBatchError(f"VotersRecord does not decode: {exc}") from None


def kraft_version_body(level: int) -> bytes:
    return msgpack.packb({"version": 0, "kraftVersion": level})


def control_entries(voters: VoterSet) -> list[tuple[bytes, bytes]]:
    """The KRaftVersionRecord and VotersRecord of a control batch (or a snapshot's)."""
    return [(records.control_key(CONTROL_KRAFT_VERSION), kraft_version_body(1)),
            (records.control_key(CONTROL_VOTERS), voters.encode())]


def voters_in(header: records.BatchHeader, batch: bytes) -> list[tuple[int, VoterSet]]:
    """(offset, voter set) of each VotersRecord in a control batch."""
    if not header.is_control:
        return []
    out = []
    key = records.control_key(CONTROL_VOTERS)
    for i, rec in enumerate(records.decode_records(batch)[1]):
        if rec.key == key:
            out.append((header.base_offset + i, VoterSet.decode(rec.value)))
    return out


class VoterSetHistory:
    """The voter sets a replica's log and snapshot hold, by offset; the bootstrap set at -1.

    ``current`` is the latest (committed or not); ``pending_offset`` the offset of the latest
    record if the high watermark has not passed it.
    """

    def __init__(self, bootstrap: VoterSet) -> None:
        self.entries: list[tuple[int, VoterSet]] = [(-1, bootstrap)]

    @property
    def current(self) -> VoterSet:
        return self.entries[-1][1]

    @property
    def latest_offset(self) -> int:
        return self.entries[-1][0]

    def add(self, offset: int, voters: VoterSet) -> None:
        if offset <= self.latest_offset:
            raise AssertionError(f"VotersRecord at {offset} not after {self.latest_offset}")
        self.entries.append((offset, voters))

    def at(self, offset: int) -> VoterSet:
        """The voter set in force at ``offset`` (the latest record at or before it)."""
        for off, voters in reversed(self.entries):
            if off <= offset:
                return voters
        return self.entries[0][1]

    def truncate(self, end_offset: int) -> bool:
        """Drop the records at ``end_offset`` and past it; True if the voter set changed."""
        before = len(self.entries)
        while len(self.entries) > 1 and self.entries[-1][0] >= end_offset:
            self.entries.pop()
        return len(self.entries) != before

    def reset(self, offset: int, voters: VoterSet) -> None:
        """A snapshot: the history restarts with its voter set at ``offset``."""
        self.entries = [(-1, self.entries[0][1]), (offset, voters)] if offset >= 0 else [
            (-1, voters)]
