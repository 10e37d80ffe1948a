"""A consumer group's own configs (KIP-848's ``GroupConfig``), set and described through
the config APIs with resource type GROUP (32), as Kafka 4 does: the session timeout and
heartbeat interval the coordinator gives the members of a ``group.protocol=consumer``
group, in place of the broker's ``group.consumer.session.timeout.ms`` and
``group.consumer.heartbeat.interval.ms``. Each is bounded as Kafka bounds it by default
(``group.consumer.min/max.session.timeout.ms`` 45000-60000,
``group.consumer.min/max.heartbeat.interval.ms`` 5000-15000). Kafka's share and streams
group configs are not here: the node has neither kind of group.
"""
from __future__ import annotations

from dataclasses import dataclass

GROUP_RESOURCE = 32  # Kafka's ConfigResource.Type.GROUP


@dataclass(frozen=True, slots=True)
class GroupConfig:
    low: int
    high: int
    broker_attr: str  # the BrokerConfig attribute whose value is the default


GROUP_CONFIGS: dict[str, GroupConfig] = {
    "consumer.session.timeout.ms": GroupConfig(45000, 60000,
                                               "group_consumer_session_timeout_ms"),
    "consumer.heartbeat.interval.ms": GroupConfig(5000, 15000,
                                                  "group_consumer_heartbeat_interval_ms"),
}


def check_group_config(key: str, value: str) -> str | None:
    """Why ``key=value`` cannot be a group's config, or None."""
    config = GROUP_CONFIGS.get(key)
    if config is None:
        return f"unknown group config {key!r} (known: {', '.join(sorted(GROUP_CONFIGS))})"
    if not value.lstrip("-").isdigit() or not config.low <= int(value) <= config.high:
        return f"config {key}: invalid value {value!r} (from {config.low} to {config.high})"
    return None


def timing(image, group_id: str, options) -> tuple[int, int]:
    """A consumer group's session timeout and heartbeat interval: its own configs, else the
    broker's."""
    own = image.configs.get((GROUP_RESOURCE, group_id), {})
    return tuple(int(own.get(key, getattr(options, c.broker_attr)))
                 for key, c in GROUP_CONFIGS.items())
