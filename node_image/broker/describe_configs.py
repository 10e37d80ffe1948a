"""DescribeConfigs: what a topic's or this broker's configuration is, and where each value
comes from, as Kafka answers it (``ConfigHelper``).

A topic lists every topic config the node knows (``replication_control.TOPIC_CONFIGS``):
the value the topic was created with (source DYNAMIC_TOPIC_CONFIG), else the broker's
default for it (STATIC_BROKER_CONFIG when server.properties set it, else DEFAULT_CONFIG).
A broker lists its own settings (``config._INT_KEYS``' broker section, the boolean keys,
``compression.type``, ``advertised.listeners`` and ``node.id``), read-only: the node has no dynamic broker configs. Only this broker's
id may be asked (Kafka refuses another id with INVALID_REQUEST); an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION; other resource types are INVALID_REQUEST.
"""
from __future__ import annotations

from dataclasses import fields

from .. import messages as m
from ..config import _BOOL_KEYS, _INT_KEYS, BrokerConfig
from ..metadata_image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from ..replication_control import TOPIC_CONFIGS

# Kafka's DescribeConfigsResponse.ConfigSource
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# Kafka's ConfigType (DescribeConfigs v3+)
BOOLEAN, STRING, INT, LONG = 1, 2, 3, 5

# topic config -> (the broker setting that is its default, or None; the default without one)
TOPIC_DEFAULTS = {
    "min.insync.replicas": ("min_insync_replicas", None),
    "flush.messages": ("flush_interval_messages", None),
    "max.message.bytes": ("message_max_bytes", None),
    "message.timestamp.before.max.ms": ("timestamp_before_max_ms", None),
    "message.timestamp.after.max.ms": ("timestamp_after_max_ms", None),
    "compression.type": ("compression_type", None),
    "unclean.leader.election.enable": (None, "false"),
    "cleanup.policy": (None, "delete"),
    "retention.ms": (None, "-1"),  # kept forever: the only retention the node has
    "retention.bytes": (None, "-1"),
    "message.timestamp.type": (None, "CreateTime"),
}
assert set(TOPIC_DEFAULTS) == set(TOPIC_CONFIGS), "every topic config has a default"
LONG_CONFIGS = {"flush.messages", "retention.ms", "retention.bytes",
                "message.timestamp.before.max.ms", "message.timestamp.after.max.ms"}
_BROKER_FIELDS = {f.name: f.default for f in fields(BrokerConfig)}


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _type(name: str, value: str) -> int:
    if value in ("true", "false"):
        return BOOLEAN
    if value.lstrip("-").isdigit():
        return LONG if name in LONG_CONFIGS or abs(int(value)) >= 1 << 31 else INT
    return STRING


def broker_settings(options: BrokerConfig) -> dict[str, tuple[str, int]]:
    """This broker's settings: name -> (value, source)."""
    out = {}
    names = {name: attr for name, (section, attr) in _INT_KEYS.items() if section == "broker"}
    names.update(_BOOL_KEYS)
    names["compression.type"] = "compression_type"
    for name, attr in sorted(names.items()):
        if attr not in _BROKER_FIELDS:
            continue  # a boolean key of another section
        value = getattr(options, attr)
        source = DEFAULT_CONFIG if value == _BROKER_FIELDS[attr] else STATIC_BROKER_CONFIG
        out[name] = (_text(value), source)
    return out


def topic_settings(image: MetadataImage, topic: str,
                   options: BrokerConfig) -> dict[str, tuple[str, int]]:
    """A topic's configs: name -> (value, source)."""
    return settings_of_topic(image.topic_config(topic), options)


def settings_of_topic(set_here: dict[str, str],
                      options: BrokerConfig) -> dict[str, tuple[str, int]]:
    """The configs of a topic created with ``set_here``: name -> (value, source)."""
    out = {}
    for name, (attr, fixed) in sorted(TOPIC_DEFAULTS.items()):
        if name in set_here:
            out[name] = (set_here[name], DYNAMIC_TOPIC_CONFIG)
        elif attr is not None:
            value = getattr(options, attr)
            out[name] = (_text(value), DEFAULT_CONFIG if value == _BROKER_FIELDS[attr]
                         else STATIC_BROKER_CONFIG)
        else:
            out[name] = (fixed, DEFAULT_CONFIG)
    return out


def describe(image: MetadataImage, node_id: int, options: BrokerConfig, resources,
             version: int, R, denied=lambda rtype, name: None) -> list:
    """The results of a DescribeConfigs request, v1-v4 (``R``: its response class).
    ``denied(resource type, name)``: the authorizer's error for a resource, or None."""
    Result = R.DescribeConfigsResult
    Entry = Result.DescribeConfigsResourceResult
    out = []
    for res in resources:
        rtype, name, keys = res.resource_type, res.resource_name, res.configuration_keys

        def fail(code: int, message: str) -> None:
            out.append(Result(error_code=code, error_message=message, resource_type=rtype,
                              resource_name=name, configs=[]))
        refused = denied(rtype, name)
        if refused is not None:
            fail(refused, "Authorization failed.")
            continue
        if rtype == TOPIC_RESOURCE:
            if name not in image.topics:
                fail(m.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
                continue
            settings, read_only = topic_settings(image, name, options), False
        elif rtype == BROKER_RESOURCE:
            if name not in ("", str(node_id)):
                fail(m.INVALID_REQUEST, f"unexpected broker id {name!r}: this is broker "
                                        f"{node_id} (ask each broker for its own)")
                continue
            settings, read_only = broker_settings(options), True
            host, port = options.advertised  # set in the node's server.properties
            settings["advertised.listeners"] = (f"PLAINTEXT://{host}:{port}", STATIC_BROKER_CONFIG)
            settings["node.id"] = (str(node_id), STATIC_BROKER_CONFIG)
        else:
            fail(m.INVALID_REQUEST, f"resource type {rtype} is not described here "
                                    f"(topics {TOPIC_RESOURCE}, brokers {BROKER_RESOURCE})")
            continue
        wanted = settings if keys is None else {k: settings[k] for k in keys if k in settings}
        configs = []
        for key, (value, source) in wanted.items():
            extra = {}
            if version >= 3:
                extra = {"config_type": _type(key, value), "documentation": None}
            configs.append(Entry(name=key, value=value, read_only=read_only,
                                 config_source=source, is_sensitive=False, synonyms=[],
                                 **extra))
        out.append(Result(error_code=m.NONE, error_message=None, resource_type=rtype,
                          resource_name=name, configs=configs))
    return out
