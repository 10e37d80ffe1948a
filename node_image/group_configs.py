"""A consumer group's own configs (KIP-848's ``GroupConfig``), set and described through
the config APIs with resource type GROUP (32), as Kafka 4 does: the session timeout and
heartbeat interval the coordinator gives the members of a ``group.protocol=consumer``
group, in place of the broker's ``group.consumer.session.timeout.ms`` and
``group.consumer.heartbeat.interval.ms``. Each is bounded as Kafka bounds it by default
(``group.consumer.min/max.session.timeout.ms`` 45000-60000,
``group.consumer.min/max.heartbeat.interval.ms`` 5000-15000). A share group's (KIP-932):
its session timeout, heartbeat interval, record lock duration and how many records of a
partition may be in flight at once (each in place of the broker's ``group.share.*``),
where a new share group starts reading a partition (``share.auto.offset.reset``:
``latest``, Kafka's default, or ``earliest``) and which records it is given
(``share.isolation.level``: ``read_uncommitted``, Kafka's default, up to the high
watermark; ``read_committed`` up to the last stable offset, aborted transactions' records
never). Kafka's streams group configs are not here: the node has no
streams groups.
"""
from __future__ import annotations

from dataclasses import dataclass

GROUP_RESOURCE = 32  # Kafka's ConfigResource.Type.GROUP


@dataclass(frozen=True, slots=True)
class GroupConfig:
    low: int
    high: int
    broker_attr: str | None  # the BrokerConfig attribute whose value is the default
    choices: tuple = ()  # a config with choices takes one of them, not a number
    default: str = ""  # the default of one no broker config gives
    bounds_attrs: tuple = ()  # the BrokerConfig attributes that move ``low`` and ``high``


GROUP_CONFIGS: dict[str, GroupConfig] = {
    "consumer.session.timeout.ms": GroupConfig(45000, 60000,
                                               "group_consumer_session_timeout_ms"),
    "consumer.heartbeat.interval.ms": GroupConfig(5000, 15000,
                                                  "group_consumer_heartbeat_interval_ms"),
    "share.session.timeout.ms": GroupConfig(45000, 60000, "group_share_session_timeout_ms"),
    "share.heartbeat.interval.ms": GroupConfig(5000, 15000,
                                               "group_share_heartbeat_interval_ms"),
    "share.record.lock.duration.ms": GroupConfig(
        15000, 60000, "group_share_record_lock_duration_ms",
        bounds_attrs=("group_share_min_record_lock_duration_ms",
                      "group_share_max_record_lock_duration_ms")),
    "share.partition.max.record.locks": GroupConfig(100, 10000,
                                                    "group_share_partition_max_record_locks"),
    "share.auto.offset.reset": GroupConfig(0, 0, None, ("latest", "earliest"), "latest"),
    "share.isolation.level": GroupConfig(0, 0, None, ("read_uncommitted", "read_committed"),
                                         "read_uncommitted"),
}


def bounds(options) -> dict[str, tuple[int, int]]:
    """The bounds a node's broker settings give group configs (Kafka's
    ``group.share.min/max.record.lock.duration.ms``)."""
    return {key: (getattr(options, c.bounds_attrs[0]), getattr(options, c.bounds_attrs[1]))
            for key, c in GROUP_CONFIGS.items() if c.bounds_attrs}


def check_group_config(key: str, value: str, limits: dict | None = None) -> str | None:
    """Why ``key=value`` cannot be a group's config, or None; ``limits``: :func:`bounds`."""
    config = GROUP_CONFIGS.get(key)
    if config is None:
        return f"unknown group config {key!r} (known: {', '.join(sorted(GROUP_CONFIGS))})"
    if config.choices:
        if value.lower() not in config.choices:
            return f"config {key}: invalid value {value!r} (one of {', '.join(config.choices)})"
        return None
    low, high = (limits or {}).get(key, (config.low, config.high))
    if not value.lstrip("-").isdigit() or not low <= int(value) <= high:
        return f"config {key}: invalid value {value!r} (from {low} to {high})"
    return None


def setting(image, group_id: str, options, key: str) -> str:
    """A group's config ``key``: its own, else the broker's, else Kafka's default."""
    own = image.configs.get((GROUP_RESOURCE, group_id), {})
    if key in own:
        return own[key].lower() if GROUP_CONFIGS[key].choices else own[key]
    c = GROUP_CONFIGS[key]
    return c.default if c.broker_attr is None else str(getattr(options, c.broker_attr))


def timing(image, group_id: str, options, kind: str = "consumer") -> tuple[int, int]:
    """A consumer (or share) group's session timeout and heartbeat interval: its own
    configs, else the broker's."""
    return (int(setting(image, group_id, options, f"{kind}.session.timeout.ms")),
            int(setting(image, group_id, options, f"{kind}.heartbeat.interval.ms")))
