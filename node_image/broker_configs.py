"""A broker's dynamic configs, as Kafka's DynamicBrokerConfig takes them: the keys an admin
client may change while the cluster runs (AlterConfigs / IncrementalAlterConfigs on resource
type BROKER), for one broker (its id as the resource name) or as the cluster's default for
every broker (an empty name). They are kept in the metadata log as ConfigRecords, so every
broker and the controller see the same ones, also after a restart.

A broker's value of a setting is, as in Kafka: its own dynamic value, else the cluster's
dynamic default, else server.properties, else the default (:func:`setting`). The node acts
on the dynamic values of the settings it has (:data:`ACTED`: the topic defaults
``compression.type``, ``min.insync.replicas``, ``message.max.bytes``,
``log.flush.interval.messages`` and the timestamp bounds; and the controller on the
cluster's ``unclean.leader.election.enable``); a topic's configs not set for it are
described as the broker's dynamic values where there are some. The other dynamic keys (SSL
and SASL, thread pools, connection limits, log retention and the cleaner) are checked,
kept and described and change nothing, the node having none of those parts. A key Kafka
reads only from server.properties is refused naming it, as Kafka refuses it; so is a
per-broker key (an SSL or SASL setting) set as the cluster's default. Unlike Kafka's, a
broker's listeners are not dynamic: the node reads them from server.properties only.
"""
from __future__ import annotations

from .metadata_image import BROKER_RESOURCE, CLUSTER
from .topic_configs import TOPIC_CONFIGS

# Kafka's log configs a broker may change (DynamicLogConfig): broker key -> the topic config
# it is the default of, whose check applies
LOG_SYNONYMS = {
    "log.segment.bytes": "segment.bytes", "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms", "log.index.size.max.bytes": "segment.index.bytes",
    "log.flush.interval.messages": "flush.messages", "log.flush.interval.ms": "flush.ms",
    "log.retention.bytes": "retention.bytes", "log.retention.ms": "retention.ms",
    "message.max.bytes": "max.message.bytes", "log.index.interval.bytes": "index.interval.bytes",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleanup.policy": "cleanup.policy",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.insync.replicas": "min.insync.replicas", "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level", "log.preallocate": "preallocate",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.local.retention.ms": "local.retention.ms",
    "log.local.retention.bytes": "local.retention.bytes",
}
# per broker only (DynamicBrokerConfig.PerBrokerConfigs): security
PER_BROKER = frozenset({
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites",
    "ssl.enabled.protocols", "ssl.keystore.type", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.key.password", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.certificates", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm",
    "ssl.secure.random.implementation", "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
})
# cluster-wide or per broker: thread pools, connection limits, the log cleaner, producer state
OTHER = frozenset({
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads", "num.network.threads", "max.connections", "max.connections.per.ip",
    "max.connections.per.ip.overrides", "max.connection.creation.rate", "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms", "producer.id.expiration.ms",
    "transaction.partition.verification.enable",
})
DYNAMIC = frozenset(LOG_SYNONYMS) | PER_BROKER | OTHER
# dynamic in Kafka, refused here: a broker's listeners do not change while it runs
LISTENERS = frozenset({"advertised.listeners", "listeners", "listener.security.protocol.map"})
PASSWORDS = frozenset({"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password",
                       "ssl.keystore.key", "sasl.jaas.config"})  # described without a value
# a dynamic key the node acts on -> its BrokerConfig attribute (read through ``setting``)
ACTED = {"compression.type": "compression_type", "min.insync.replicas": "min_insync_replicas",
         "message.max.bytes": "message_max_bytes",
         "log.flush.interval.messages": "flush_interval_messages",
         "log.message.timestamp.before.max.ms": "timestamp_before_max_ms",
         "log.message.timestamp.after.max.ms": "timestamp_after_max_ms"}


def check(name: str, key: str, value: str | None) -> str | None:
    """Why ``key`` may not be set to ``value`` for broker resource ``name`` ("" the
    cluster's default, else a broker id), or None; Kafka's messages."""
    if name and not name.isdigit():
        return f"broker id {name!r} is not a number (or empty for the cluster's default)"
    if key in LISTENERS:
        return (f"{key} is read from server.properties only here: a broker's listeners do "
                f"not change while it runs")
    if key not in DYNAMIC:
        return f"Cannot update these configs dynamically: Set({key})"
    if not name and key in PER_BROKER:
        return (f"Cannot update these configs at default cluster level, broker id must be "
                f"specified: Set({key})")
    topic_key = LOG_SYNONYMS.get(key)
    if value is not None and topic_key is not None and not TOPIC_CONFIGS[topic_key].check(value):
        return f"Invalid value {value} for configuration {key}"
    return None


def dynamic(image, node_id: int) -> dict[str, tuple[str, bool]]:
    """This broker's dynamic settings: key -> (value, set for this broker alone)."""
    out = {k: (v, False) for k, v in image.configs.get(CLUSTER, {}).items() if k in DYNAMIC}
    out.update({k: (v, True) for k, v in image.configs.get((BROKER_RESOURCE, str(node_id)),
                                                           {}).items()})
    return out


def setting(image, node_id: int, options, key: str):
    """The value a broker uses for ``key`` (one of :data:`ACTED`): dynamic, else static, of
    the static setting's type."""
    static = getattr(options, ACTED[key])
    value = image.configs.get((BROKER_RESOURCE, str(node_id)), {}).get(key)
    if value is None:
        value = image.configs.get(CLUSTER, {}).get(key)
    if value is None:
        return static
    return type(static)(value)

