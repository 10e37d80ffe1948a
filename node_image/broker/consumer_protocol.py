"""The consumer's embedded protocol in a classic group (Kafka's ConsumerProtocol): the
subscription a member sends in JoinGroup and the assignment it gets in SyncGroup.

Only the coordinator reads them, and only to move a group between the classic protocol and
KIP-848's (:mod:`.group_migration`): a classic member's subscription gives its topics, the
partitions it still owns (version 1 and later) and its rack (version 3); its assignment gives
the partitions it holds. Like Kafka's reader, a newer version than known is read as the
newest known one (fields are only ever appended).

Wire format (big-endian, non-flexible)::

    ConsumerProtocolSubscription: version int16, topics [string], user_data nullable bytes,
        v1+: owned_partitions [topic string, partitions [int32]], v2+: generation_id int32,
        v3+: rack_id nullable string
    ConsumerProtocolAssignment:   version int16, assigned [topic string, partitions [int32]],
        user_data nullable bytes
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field


class ConsumerProtocolError(ValueError):
    """Bytes that are not the consumer protocol's; the message says where."""


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple = ()
    owned: dict = field(default_factory=dict)  # topic name -> frozenset(partition)
    rack_id: str | None = None


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.at, self.what = bytes(data), 0, what

    def take(self, fmt: str):
        try:
            values = struct.unpack_from(fmt, self.data, self.at)
        except struct.error:
            raise ConsumerProtocolError(f"{self.what}: truncated at byte {self.at} of "
                                        f"{len(self.data)}") from None
        self.at += struct.calcsize(fmt)
        return values[0]

    def string(self, nullable: bool = False) -> str | None:
        n = self.take(">h")
        if n < 0:
            if nullable:
                return None
            raise ConsumerProtocolError(f"{self.what}: null string at byte {self.at - 2}")
        raw = self.data[self.at:self.at + n]
        if len(raw) != n:
            raise ConsumerProtocolError(f"{self.what}: truncated at byte {self.at} of "
                                        f"{len(self.data)}")
        self.at += n
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise ConsumerProtocolError(f"{self.what}: string at byte {self.at - n} is not "
                                        f"UTF-8") from None

    def skip_bytes(self) -> None:
        n = self.take(">i")
        if n > 0:
            if self.at + n > len(self.data):
                raise ConsumerProtocolError(f"{self.what}: truncated at byte {self.at} of "
                                            f"{len(self.data)}")
            self.at += n

    def count(self) -> int:
        n = self.take(">i")
        if n < 0:
            raise ConsumerProtocolError(f"{self.what}: null array at byte {self.at - 4}")
        return n

    def topic_partitions(self) -> dict:
        out: dict = {}
        for _ in range(self.count()):
            topic = self.string()
            out[topic] = frozenset(self.take(">i") for _ in range(self.count()))
        return out


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data, "ConsumerProtocolSubscription")
    version = r.take(">h")
    if version < 0:
        raise ConsumerProtocolError(f"ConsumerProtocolSubscription: version {version}")
    topics = tuple(r.string() for _ in range(r.count()))
    r.skip_bytes()  # user data: the client assignor's, not the coordinator's
    owned, rack = {}, None
    if version >= 1:
        owned = r.topic_partitions()
    if version >= 2:
        r.take(">i")  # generation id
    if version >= 3:
        rack = r.string(nullable=True)
    return Subscription(version, topics, owned, rack)


def subscription_version(data: bytes) -> int:
    """The version of a subscription, as the version its assignment is written in (0 if
    unreadable, as every reader takes version 0)."""
    try:
        return max(struct.unpack_from(">h", data, 0)[0], 0)
    except struct.error:
        return 0


def decode_assignment(data: bytes) -> dict:
    """Topic name -> frozenset(partition); empty bytes (no assignment yet) is nothing."""
    if not data:
        return {}
    r = _Reader(data, "ConsumerProtocolAssignment")
    version = r.take(">h")
    if version < 0:
        raise ConsumerProtocolError(f"ConsumerProtocolAssignment: version {version}")
    return {t: ps for t, ps in r.topic_partitions().items() if ps}


def encode_assignment(parts: dict, version: int = 0) -> bytes:
    """``parts``: topic name -> partitions; the version is the member's subscription's,
    capped at 3 (Kafka's newest)."""
    out = [struct.pack(">hi", min(version, 3), len(parts))]
    for topic in sorted(parts):
        name = topic.encode()
        ps = sorted(parts[topic])
        out.append(struct.pack(f">h{len(name)}si{len(ps)}i", len(name), name, len(ps), *ps))
    out.append(struct.pack(">i", -1))  # no user data
    return b"".join(out)
