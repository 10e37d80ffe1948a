"""What AlterConfigs and IncrementalAlterConfigs change, checked as Kafka's controller checks
it: a topic's configs (``topic_configs``), a group's (KIP-848, ``group_configs``) and a
broker's dynamic ones (``broker_configs``), as the ConfigRecords to write."""
from __future__ import annotations

from . import broker_configs
from . import messages as m
from . import metadata_records as mr
from .group_configs import GROUP_CONFIGS, GROUP_RESOURCE, check_group_config
from .metadata_image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from .topic_configs import LIST_CONFIGS, TOPIC_CONFIGS


SET, DELETE, APPEND, SUBTRACT = range(4)  # Kafka's AlterConfigOp.OpType


def check_topic_config(key: str, value: str, rf: int) -> str | None:
    """Why ``key=value`` cannot be a topic's config, or None."""
    config = TOPIC_CONFIGS.get(key)
    if config is None:
        return f"unknown topic config {key!r} (known: {', '.join(sorted(TOPIC_CONFIGS))})"
    if not config.check(value):
        return f"config {key}: invalid value {value!r}" + (
            f" ({config.only})" if config.only else "")
    if key == "min.insync.replicas" and int(value) > rf:
        return f"min.insync.replicas {value} is larger than the replication factor {rf}"
    return None


def alter_configs(image: MetadataImage, resources, incremental: bool,
                  group_bounds: dict | None = None) -> tuple[list, list]:
    """ConfigRecords for AlterConfigs (``incremental`` False: the SETs given become the
    topic's whole set) or IncrementalAlterConfigs (SET, DELETE, and APPEND/SUBTRACT on list
    configs), and a (resource type, name, error, message) row per resource. Topics, groups
    (KIP-848's group configs), and brokers' dynamic configs (:mod:`.broker_configs`: a
    broker id, or "" for the cluster's default)."""
    records: list = []
    results: list = []
    for rtype, name, ops in resources:
        def fail(code: int, message: str) -> None:
            results.append((rtype, name, code, message))
        if rtype == BROKER_RESOURCE:  # Kafka's dynamic broker configs (broker_configs)
            table, check = broker_configs.DYNAMIC, lambda k, v, n=name: broker_configs.check(
                n, k, v)
            if name and not name.isdigit():
                fail(m.INVALID_REQUEST, broker_configs.check(name, "", None))
                continue
        elif rtype == GROUP_RESOURCE:  # a group need not exist yet, as in Kafka
            if not name:
                fail(m.INVALID_REQUEST, "a group config needs a group id")
                continue
            table, check = GROUP_CONFIGS, lambda k, v: check_group_config(k, v, group_bounds)
        elif rtype != TOPIC_RESOURCE:
            fail(m.INVALID_REQUEST, f"resource type {rtype} has no configs here "
                                    f"(topics {TOPIC_RESOURCE}, groups {GROUP_RESOURCE})")
            continue
        else:
            t = image.topics.get(name)
            if t is None:
                fail(m.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
                continue
            rf = len(next(iter(t.partitions.values())).replicas) if t.partitions else 1
            table, check = TOPIC_CONFIGS, lambda k, v, rf=rf: check_topic_config(k, v, rf)
        before = dict(image.configs.get((rtype, name), {}))
        after = dict(before) if incremental else {}
        bad = None
        for key, op, value in ops:
            if key not in table and rtype == BROKER_RESOURCE:
                bad = check(key, value)
            elif key not in table:
                kind = "topic" if table is TOPIC_CONFIGS else "group"
                bad = f"unknown {kind} config {key!r} (known: {', '.join(sorted(table))})"
            elif op == SET and value is not None:
                after[key] = value
            elif op == DELETE or (op == SET and value is None):
                after.pop(key, None)
            elif op in (APPEND, SUBTRACT) and key in LIST_CONFIGS:
                have = [v for v in after.get(key, TOPIC_CONFIGS[key].default).split(",") if v]
                given = [v for v in (value or "").split(",") if v]
                items = have + [v for v in given if v not in have] if op == APPEND else [
                    v for v in have if v not in given]
                after[key] = ",".join(items)
            elif op in (APPEND, SUBTRACT):
                bad = f"config {key} is not a list: {('APPEND', 'SUBTRACT')[op - APPEND]} " \
                      "applies to list configs only"
            else:
                bad = f"config {key}: unknown operation {op}"
            if bad:
                break
        if bad is None:
            bad = next((why for key, value in sorted(after.items())
                        if key not in before or before[key] != value
                        for why in [check(key, value)] if why), None)
        if bad is None and rtype == BROKER_RESOURCE:
            bad = next((why for key in sorted(set(before) - set(after))
                        for why in [check(key, None)] if why), None)
        if bad:
            fail(m.INVALID_CONFIG, bad)
            continue
        results.append((rtype, name, m.NONE, None))
        for key in sorted(set(before) | set(after)):
            if before.get(key) != after.get(key):
                records.append(mr.ConfigRecord(rtype, name, key, after.get(key)))
    return records, results
