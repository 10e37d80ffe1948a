"""DescribeConfigs: what a topic's or this broker's configuration is, and where each value
comes from, as Kafka answers it (``ConfigHelper``).

A topic lists every topic config (``topic_configs.TOPIC_CONFIGS``, Kafka's):
the value the topic was created with (source DYNAMIC_TOPIC_CONFIG), else the broker's
default for it (STATIC_BROKER_CONFIG when server.properties set it, else DEFAULT_CONFIG).
A broker lists its own settings (``config._INT_KEYS``' broker section, the boolean keys,
``compression.type``, ``group.consumer.migration.policy``, ``advertised.listeners`` and
``node.id``), read-only but for Kafka's dynamic configs (``broker_configs``), whose values
set while the cluster runs come first (source DYNAMIC_BROKER_CONFIG for this broker's own,
DYNAMIC_DEFAULT_BROKER_CONFIG for the cluster's default; passwords not shown), and a
topic's defaults are the broker's values after them. Only this broker's id may be asked (Kafka refuses another id with INVALID_REQUEST); an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION. A group (KIP-848) lists its session timeout and heartbeat
interval (``group_configs``), its own (GROUP_CONFIG) or the broker's; other resource types
are INVALID_REQUEST.
"""
from __future__ import annotations

from dataclasses import fields

from .. import broker_configs
from .. import messages as m
from ..config import _BOOL_KEYS, _INT_KEYS, BrokerConfig
from ..metadata_image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from ..group_configs import GROUP_CONFIGS, GROUP_RESOURCE
from ..topic_configs import BOOLEAN, INT, LONG, STRING, TOPIC_CONFIGS

# Kafka's DescribeConfigsResponse.ConfigSource
(DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
 DEFAULT_CONFIG, GROUP_CONFIG) = 1, 2, 3, 4, 5, 8
_BROKER_FIELDS = {f.name: f.default for f in fields(BrokerConfig)}
# a broker setting's attribute -> its key in server.properties
_KEY_OF = {attr: key for key, (_, attr) in _INT_KEYS.items()} | {
    attr: key for key, attr in _BOOL_KEYS.items()} | {
    "compression_type": "compression.type",
    "group_consumer_migration_policy": "group.consumer.migration.policy"}


def _source(options: BrokerConfig, attr: str) -> int:
    """Where a broker setting's value comes from, as Kafka says: STATIC_BROKER_CONFIG when
    server.properties sets it (to any value, its default too), else DEFAULT_CONFIG."""
    key = _KEY_OF.get(attr)
    if key is not None and options.static_keys:
        return STATIC_BROKER_CONFIG if key in options.static_keys else DEFAULT_CONFIG
    return DEFAULT_CONFIG if getattr(options, attr) == _BROKER_FIELDS[attr] \
        else STATIC_BROKER_CONFIG


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _type(name: str, value: str) -> int:
    """A topic config's type from the table; a broker setting's from its value."""
    if name in TOPIC_CONFIGS:
        return TOPIC_CONFIGS[name].kind
    if value in ("true", "false"):
        return BOOLEAN
    if value.lstrip("-").isdigit():
        return LONG if abs(int(value)) >= 1 << 31 else INT
    return STRING


def broker_settings(options: BrokerConfig) -> dict[str, tuple[str, int]]:
    """This broker's settings: name -> (value, source)."""
    out = {}
    names = {name: attr for name, (section, attr) in _INT_KEYS.items() if section == "broker"}
    names.update(_BOOL_KEYS)
    names["compression.type"] = "compression_type"
    names["group.consumer.migration.policy"] = "group_consumer_migration_policy"
    for name, attr in sorted(names.items()):
        if attr not in _BROKER_FIELDS:
            continue  # a boolean key of another section
        value = getattr(options, attr)
        if name.endswith(".seconds"):  # kept in milliseconds, named in seconds
            value //= 1000
        out[name] = (_text(value), _source(options, attr))
    return out


def topic_settings(image: MetadataImage, topic: str, options: BrokerConfig,
                   node_id: int) -> dict[str, tuple[str, int]]:
    """A topic's configs: name -> (value, source)."""
    return settings_of_topic(image.topic_config(topic), options,
                             broker_configs.dynamic(image, node_id))


_BROKER_KEY = {topic_key: key for key, topic_key in broker_configs.LOG_SYNONYMS.items()}


def settings_of_topic(set_here: dict[str, str], options: BrokerConfig,
                      dynamic: dict | None = None) -> dict[str, tuple[str, int]]:
    """The configs of a topic created with ``set_here``: name -> (value, source), a value
    not set for it being the broker's: dynamic (``dynamic``: broker key -> (value, set for
    this broker alone), :func:`~node_image.broker_configs.dynamic`), else static."""
    out = {}
    dynamic = dynamic or {}
    for name, config in sorted(TOPIC_CONFIGS.items()):
        attr, fixed = config.broker_attr, config.default
        broker_key = _BROKER_KEY.get(name)
        if name in set_here:
            out[name] = (set_here[name], DYNAMIC_TOPIC_CONFIG)
        elif broker_key in dynamic:
            value, own = dynamic[broker_key]
            out[name] = (value, DYNAMIC_BROKER_CONFIG if own else DYNAMIC_DEFAULT_BROKER_CONFIG)
        elif attr is not None:
            out[name] = (_text(getattr(options, attr)), _source(options, attr))
        else:
            out[name] = (fixed, DEFAULT_CONFIG)
    return out


def group_settings(image: MetadataImage, group_id: str,
                   options: BrokerConfig) -> dict[str, tuple[str, int]]:
    """A group's configs (KIP-848): its own (source GROUP_CONFIG), else the broker's."""
    own = image.configs.get((GROUP_RESOURCE, group_id), {})
    out = {}
    for name, config in sorted(GROUP_CONFIGS.items()):
        attr = config.broker_attr
        out[name] = (own[name], GROUP_CONFIG) if name in own else (
            (config.default, DEFAULT_CONFIG) if attr is None
            else (str(getattr(options, attr)), _source(options, attr)))
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
            settings, read_only = topic_settings(image, name, options, node_id), False
        elif rtype == BROKER_RESOURCE:
            if name not in ("", str(node_id)):
                fail(m.INVALID_REQUEST, f"unexpected broker id {name!r}: this is broker "
                                        f"{node_id} (ask each broker for its own)")
                continue
            settings, read_only = broker_settings(options), True
            host, port = options.advertised  # set in the node's server.properties
            settings["advertised.listeners"] = (f"PLAINTEXT://{host}:{port}", STATIC_BROKER_CONFIG)
            settings["node.id"] = (str(node_id), STATIC_BROKER_CONFIG)
            for key, (value, own) in broker_configs.dynamic(image, node_id).items():
                settings[key] = (value, DYNAMIC_BROKER_CONFIG if own
                                 else DYNAMIC_DEFAULT_BROKER_CONFIG)
            settings = dict(sorted(settings.items()))
        elif rtype == GROUP_RESOURCE:
            settings, read_only = group_settings(image, name, options), False
        else:
            fail(m.INVALID_REQUEST, f"resource type {rtype} is not described here "
                                    f"(topics {TOPIC_RESOURCE}, brokers {BROKER_RESOURCE}, "
                                    f"groups {GROUP_RESOURCE})")
            continue
        wanted = settings if keys is None else {k: settings[k] for k in keys if k in settings}
        configs = []
        for key, (value, source) in wanted.items():
            extra = {}
            if version >= 3:
                extra = {"config_type": _type(key, value), "documentation": None}
            sensitive = rtype == BROKER_RESOURCE and key in broker_configs.PASSWORDS
            configs.append(Entry(name=key, value=None if sensitive else value,
                                 read_only=read_only and key not in broker_configs.DYNAMIC,
                                 config_source=source, is_sensitive=sensitive, synonyms=[],
                                 **extra))
        out.append(Result(error_code=m.NONE, error_message=None, resource_type=rtype,
                          resource_name=name, configs=configs))
    return out
