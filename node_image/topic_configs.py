"""Kafka's topic configs (``LogConfig``), in one table: the check a value must pass, the
type DescribeConfigs names, and the default (a broker setting's value, or a fixed one).

The node acts on ``min.insync.replicas``, ``unclean.leader.election.enable``,
``flush.messages``, ``compression.type``, ``max.message.bytes`` and the
``message.timestamp.*`` configs, and on ``cleanup.policy`` as far as a producer sees it (a
compacted topic refuses a record without a key). The others are checked, stored and
described as Kafka does, and change nothing here: the node's log is one segment that
never rolls, so retention and compaction, which Kafka applies only to rolled segments,
never remove a record (DeleteRecords moves a log's start), and the segment, index, flush
interval and throttle settings tune storage the node does not have. Tiered storage is not
in the node: ``remote.storage.enable`` may only be false. A name that is not here is
refused, as Kafka refuses it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

# Kafka's ConfigType (DescribeConfigs v3+)
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = 1, 2, 3, 4, 5, 6, 7
LONG_MAX = (1 << 63) - 1


def _integer(lo: int, hi: int) -> Callable[[str], bool]:
    def check(v: str) -> bool:
        return re.fullmatch(r"-?\d+", v) is not None and lo <= int(v) <= hi
    return check


def _long(lo: int = -(1 << 63), hi: int = LONG_MAX) -> Callable[[str], bool]:
    return _integer(lo, hi)


def _int(lo: int = -(1 << 31), hi: int = (1 << 31) - 1) -> Callable[[str], bool]:
    return _integer(lo, hi)


def _ratio(v: str) -> bool:
    try:
        return 0.0 <= float(v) <= 1.0
    except ValueError:
        return False


def _boolean(v: str) -> bool:
    return v in ("true", "false")


def _policy(v: str) -> bool:
    """delete, compact, both, or neither (an empty list, which Kafka takes too)."""
    return v.strip() == "" or all(i.strip() in ("delete", "compact") for i in v.split(","))


def _throttled(v: str) -> bool:
    """"", "*", or partition:broker pairs (Kafka's ThrottledReplicaListValidator)."""
    return v.strip() in ("", "*") or all(
        re.fullmatch(r"\d+:\d+", i.strip()) for i in v.split(","))


def _gzip_level(v: str) -> bool:
    return _int(-1, 9)(v) and v != "0"


@dataclass(frozen=True, slots=True)
class TopicConfig:
    check: Callable[[str], bool]
    kind: int
    default: str | None = None     # the default when no broker setting gives it
    broker_attr: str | None = None  # the BrokerConfig attribute whose value is the default
    only: str | None = None         # why only some of Kafka's values are taken


CODECS = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")

TOPIC_CONFIGS: dict[str, TopicConfig] = {
    "cleanup.policy": TopicConfig(_policy, LIST, "delete"),
    # producer: batches kept as the producer compressed them; else recompressed to this
    "compression.type": TopicConfig(lambda v: v in CODECS, STRING,
                                    broker_attr="compression_type"),
    "compression.gzip.level": TopicConfig(_gzip_level, INT, "-1"),
    "compression.lz4.level": TopicConfig(_int(1, 17), INT, "9"),
    "compression.zstd.level": TopicConfig(_int(-131072, 22), INT, "3"),
    "delete.retention.ms": TopicConfig(_long(0), LONG, "86400000"),
    "file.delete.delay.ms": TopicConfig(_long(0), LONG, "60000"),
    "flush.messages": TopicConfig(_long(1), LONG, broker_attr="flush_interval_messages"),
    "flush.ms": TopicConfig(_long(0), LONG, str(LONG_MAX)),
    "follower.replication.throttled.replicas": TopicConfig(_throttled, LIST, ""),
    "index.interval.bytes": TopicConfig(_int(0), INT, "4096"),
    "leader.replication.throttled.replicas": TopicConfig(_throttled, LIST, ""),
    "local.retention.bytes": TopicConfig(_long(-2), LONG, "-2"),
    "local.retention.ms": TopicConfig(_long(-2), LONG, "-2"),
    "max.compaction.lag.ms": TopicConfig(_long(1), LONG, str(LONG_MAX)),
    "max.message.bytes": TopicConfig(_int(1), INT, broker_attr="message_max_bytes"),
    "message.timestamp.after.max.ms": TopicConfig(_long(0), LONG,
                                                  broker_attr="timestamp_after_max_ms"),
    "message.timestamp.before.max.ms": TopicConfig(_long(0), LONG,
                                                   broker_attr="timestamp_before_max_ms"),
    "message.timestamp.type": TopicConfig(lambda v: v in ("CreateTime", "LogAppendTime"),
                                          STRING, "CreateTime"),
    "min.cleanable.dirty.ratio": TopicConfig(_ratio, DOUBLE, "0.5"),
    "min.compaction.lag.ms": TopicConfig(_long(0), LONG, "0"),
    "min.insync.replicas": TopicConfig(_int(1), INT, broker_attr="min_insync_replicas"),
    "preallocate": TopicConfig(_boolean, BOOLEAN, "false"),
    "remote.log.copy.disable": TopicConfig(_boolean, BOOLEAN, "false"),
    "remote.log.delete.on.disable": TopicConfig(_boolean, BOOLEAN, "false"),
    "remote.storage.enable": TopicConfig(lambda v: v == "false", BOOLEAN, "false",
                                         only="tiered storage is not in this broker"),
    # records are never deleted (the log never rolls a segment): -1 is what it does
    "retention.bytes": TopicConfig(_long(), LONG, "-1"),
    "retention.ms": TopicConfig(_long(-1), LONG, "-1"),
    "segment.bytes": TopicConfig(_int(1 << 20), INT, "1073741824"),
    "segment.index.bytes": TopicConfig(_int(4), INT, "10485760"),
    "segment.jitter.ms": TopicConfig(_long(0), LONG, "0"),
    "segment.ms": TopicConfig(_long(1), LONG, "604800000"),
    "unclean.leader.election.enable": TopicConfig(_boolean, BOOLEAN, "false"),
}
assert all((c.default is None) != (c.broker_attr is None) for c in TOPIC_CONFIGS.values()), \
    "each topic config has one default: fixed or a broker setting's"

LIST_CONFIGS = {k for k, c in TOPIC_CONFIGS.items() if c.kind == LIST}


def compacted(config: dict) -> bool:
    """Whether a topic with these configs is compacted (``cleanup.policy`` names compact)."""
    return "compact" in [i.strip() for i in config.get("cleanup.policy", "delete").split(",")]
