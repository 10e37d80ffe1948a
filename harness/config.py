"""Run configuration: defaults, YAML campaign files, command-line overrides.

A campaign file is a YAML mapping whose keys are the fields of
:class:`RunConfig`. It is validated before anything starts: an unknown key,
a value of the wrong type or out of range is a :class:`CampaignError` that
names the file, the line and the field.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from node_image.bugs import BUGS
from nemesis.schedule import (COMBINE, PACKAGES, REGISTRY, check_options, check_package_options,
                              package_refusal)
from workloads.queue import CODECS, MAX_TXN_LENGTH
from workloads.registry import WORKLOADS

from .yaml_lines import key_lines as _key_lines, located  # noqa: F401 - used by campaign_matrix


# The planted-bug matrix's control cell ("none"): the correct node in this workload's
# default campaign, which must read valid.
CONTROL_WORKLOAD = "queue"


class CampaignError(ValueError):
    """A campaign file or option is wrong; the message says where and which field."""


@dataclass
class RunConfig:
    test: str = "register"
    workload: str = "register"
    seed: int | None = None
    time_limit_s: float = 60.0
    # How far the time limit may stretch while the nemesis runs late (a scenario waiting for
    # the state it aims at on a slow machine): at most this many times time_limit_s
    max_stretch: float = 3.0
    nodes: int = 5
    controllers: int = 3
    concurrency: int = 15
    rate: float = 5.0  # operations per second per client
    op_timeout_s: float = 1.0
    ops_per_key: int = 60
    # queue workload
    partitions: int = 4
    replication_factor: int = 3
    min_insync_replicas: int = 2
    client: str = "confluent-kafka"
    # how consumers get partitions (Jepsen's sub-via): assign() every partition, or
    # subscribe() in one consumer group whose coordinator shares them out
    consume: str = "assign"
    # the group protocol of subscribe(): Kafka's classic one (JoinGroup, SyncGroup, the
    # client's assignor) or KIP-848's consumer protocol (ConsumerGroupHeartbeat, the
    # coordinator assigns); confluent-kafka only
    group_protocol: str = "classic"
    # Jepsen's --crash-clients: each queue client is crashed (closed between two operations,
    # what its producer still holds dropped) after a run of 0 .. 2 x crash_client_interval_s
    # drawn from the seed, and a fresh client opened as a new process (Jepsen's numbering:
    # process + concurrency); Jepsen's --crash-client-interval
    crash_clients: bool = False
    crash_client_interval_s: float = 30.0
    # ... and a client whose life ends while a send waits for its answer crashes then, under
    # it (the send info: its fate unknown), as the simulator's crash_mid_op; otherwise
    # clients crash between two operations
    crash_mid_op: bool = False
    # ... and, with transactions, a client whose life ends is not crashed: its successor
    # starts beside it under the slot's transactional id (an application started again
    # while its old instance still runs), fences it with its InitProducerId, and the old
    # one goes on, a zombie, until a request of its is refused; then it closes, as an
    # application closes a producer after a fatal error (the simulator's zombie_producers)
    zombie_producers: bool = False
    # Jepsen's --txn: sends and polls in transactions of 1-4 (a transactional producer, a
    # read_committed consumer); confluent-kafka only
    transactions: bool = False
    # Jepsen's --max-txn-length: each transaction's size is drawn from 1..max_txn_length.
    # Longer ones stay open longer, so a consumer lagging behind the log on a busy machine
    # still reads records of transactions that are open
    max_txn_length: int = MAX_TXN_LENGTH
    # Jepsen's --ww-deps: the queue checker infers write-write edges from each key's log (G0
    # cycles then show, and G1c ones are allowed)
    ww_deps: bool = False
    # None: half the producers (even processes; with crash_clients, those of even slots)
    # idempotent, the others without retries, whose records a deposed leader keeps are its
    # own (nobody re-sends them to the next leader)
    idempotent: bool | None = None
    # The producers' compression.type (none, gzip, snappy, lz4, zstd). None: drawn from the
    # seed, one codec for the run, so a seed sweep covers every codec
    compression: str | None = None
    flush_messages: int | None = None  # the topic's flush.messages; None: the broker's (never
    # fsync); the queue workload defaults to 1
    allowed_anomalies: list[str] | None = None  # None: the workload's defaults (Jepsen's)
    power_loss_targets: list[str] = field(default_factory=lambda: ["one", "minority"])
    nemesis: list[str] = field(default_factory=lambda: ["partition", "kill"])
    nemesis_interval_s: float = 5.0
    # per package: targets, duration_s, interval_s, weight, modes, ... (nemesis.schedule)
    nemesis_options: dict[str, dict] = field(default_factory=dict)
    nemesis_combine: str = "sequential"  # or concurrent: each package on its own timeline
    # A fixed wait after the heal, before the liveness phase and the final reads. None: none
    # when the liveness phase runs (it waits for the cluster's state, not for a time), 10 s
    # without it
    recovery_s: float | None = None
    # After the heal and the recovery wait: the cluster must be whole again (a quorum
    # leader, every partition led with its full ISR, every node serving, acks=all sends
    # acknowledged) within liveness_s, else the run is invalid with a liveness anomaly
    liveness: bool = True
    liveness_s: float = 90.0
    bugs: list[str] = field(default_factory=list)
    node_config: dict[str, str] = field(default_factory=dict)
    backend: str = "docker"
    # hosts chaoskraft did not create, reached over SSH (harness.hosts): one node per host
    hosts: list | None = None
    spare_hosts: list | None = None  # machines a run may add as nodes (add-broker, decommission)
    known_hosts: str | None = None  # None: ~/.ssh/known_hosts
    host_key_policy: str = "strict"  # or accept-new: a host's first key is trusted and recorded
    engine: str = "auto"
    spark_master: str | None = None
    check_budget_s: float = 300.0
    results_dir: str = "results"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


_POSITIVE = {"time_limit_s", "nodes", "controllers", "concurrency", "rate", "op_timeout_s",
             "ops_per_key", "nemesis_interval_s", "check_budget_s", "partitions",
             "replication_factor", "min_insync_replicas", "flush_messages", "liveness_s",
             "max_txn_length", "crash_client_interval_s"}
_NON_NEGATIVE = {"seed", "recovery_s"}
_CHOICES = {"workload": tuple(WORKLOADS), "backend": ("docker", "ssh"),
            "engine": ("auto", "spark", "local"), "client": ("confluent-kafka", "kafka-python"),
            "consume": ("assign", "subscribe"), "group_protocol": ("classic", "consumer"),
            "host_key_policy": ("strict", "accept-new"),
            "nemesis_combine": COMBINE}
_LIST_CHOICES = {"power_loss_targets": ("one", "minority", "all")}


def _type_ok(name: str, value) -> bool:
    t = {f.name: f.type for f in dataclasses.fields(RunConfig)}[name]
    if name in ("hosts", "spare_hosts"):  # checked entry by entry in validate
        return value is None or isinstance(value, list)
    if name == "nemesis":  # package names, or mappings {package: NAME, option: value, ...}
        return isinstance(value, list) and all(isinstance(x, (str, dict)) for x in value)
    if value is None:
        return "None" in t
    if t.startswith("bool"):
        return isinstance(value, bool)
    if t.startswith("int"):
        return isinstance(value, int) and not isinstance(value, bool)
    if t.startswith("float"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t.startswith("str"):
        return isinstance(value, str)
    if t.startswith("list"):
        return isinstance(value, list) and all(isinstance(x, str) for x in value)
    if t.startswith("dict"):
        return isinstance(value, dict)
    return True


def validate(values: dict, where=lambda key: "", cross: bool = True) -> None:
    """Check each field; with ``cross``, also how fields fit together (a part of a
    campaign matrix is checked alone without it, and again once merged into a cell)."""
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    for key, value in values.items():
        loc = where(key)
        if key not in fields:
            close = [f for f in fields if f.replace("_", "") == str(key).replace("_", "").replace("-", "")]
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise CampaignError(f"{loc}unknown field {key!r}{hint}")
        if not _type_ok(key, value):
            raise CampaignError(f"{loc}field {key!r}: {value!r} has the wrong type")
        if key in _POSITIVE and value is not None and value <= 0:
            raise CampaignError(f"{loc}field {key!r}: must be positive, got {value}")
        if key == "max_stretch" and value < 1:
            raise CampaignError(f"{loc}field 'max_stretch': a factor of the time limit, at "
                                f"least 1, got {value}")
        if key in _NON_NEGATIVE and value is not None and value < 0:
            raise CampaignError(f"{loc}field {key!r}: must not be negative, got {value}")
        if key == "compression" and value is not None and value not in CODECS:
            raise CampaignError(f"{loc}field 'compression': {value!r} is not one of "
                                f"{', '.join(CODECS)} (or null: drawn from the seed)")
        if key in _CHOICES and value not in _CHOICES[key]:
            raise CampaignError(f"{loc}field {key!r}: {value!r} is not one of {', '.join(_CHOICES[key])}")
        if key in _LIST_CHOICES:
            for v in value:
                if v not in _LIST_CHOICES[key]:
                    raise CampaignError(f"{loc}field {key!r}: {v!r} is not one of "
                                        f"{', '.join(_LIST_CHOICES[key])}")
        if key == "allowed_anomalies" and value is not None:
            from checkers.queue import ANOMALIES
            for v in value:
                if v not in ANOMALIES:
                    raise CampaignError(f"{loc}field 'allowed_anomalies': unknown anomaly {v!r} "
                                        f"(known: {', '.join(ANOMALIES)})")
        if key == "nemesis":
            _validate_nemesis(value, where)
        if key in ("hosts", "spare_hosts") and value is not None:
            from .hosts import HostsError, parse_all_hosts, parse_hosts
            if cross and key == "spare_hosts" and not values.get("hosts"):
                raise CampaignError(f"{loc}field 'spare_hosts': spare hosts are added to a "
                                    f"cluster on 'hosts'; name those too")
            try:
                if key == "spare_hosts" and values.get("hosts"):
                    parse_all_hosts(values, where)  # also: no host in both lists
                else:
                    parse_hosts(value, where, key)
            except HostsError as exc:
                raise CampaignError(str(exc)) from None
        if key == "nemesis_options" and (bad := check_package_options(value)) is not None:
            p, option, why = bad
            if option is not None:
                raise CampaignError(f"{loc}field 'nemesis_options.{p}.{option}': {why}")
            raise CampaignError(f"{loc}field 'nemesis_options': "
                                f"{'' if p not in PACKAGES else p + ': '}{why}")
        if key == "bugs":
            for b in value:
                if b not in BUGS:
                    raise CampaignError(f"{loc}field 'bugs': unknown bug {b!r} "
                                        f"(known: {', '.join(sorted(BUGS))})")
    if not cross:
        return
    workload = values.get("workload", RunConfig.workload)
    for p in sorted(set(_package_names(values.get("nemesis") or ())) & set(PACKAGES)):
        if (why := package_refusal(p, workload)) is not None:
            raise CampaignError(f"{where('nemesis')}field 'nemesis': {why}")
    clocks = sorted(p for p in set(_package_names(values.get("nemesis") or ())) & set(PACKAGES)
                    if REGISTRY[p].faketime)
    if len(clocks) > 1 and values.get("nemesis_combine", RunConfig.nemesis_combine) == "concurrent":
        raise CampaignError(f"{where('nemesis_combine')}field 'nemesis_combine': concurrent "
                            f"faults of {' and '.join(clocks)} would overlap, and each sets the "
                            f"one libfaketime file a node's clock reads (one would undo the "
                            f"other); use sequential, or one of them")
    hosts = values.get("hosts")
    nodes = values.get("nodes", len(hosts) if isinstance(hosts, list) and hosts
                       else RunConfig.nodes)
    for name, target in _node_targets(values) if isinstance(nodes, int) else ():
        if int(target[5:]) not in range(1, nodes + 1):
            raise CampaignError(f"{where(name.split('.')[0])}field {name!r}: "
                                f"{target!r} names no node of the cluster (nodes 1-{nodes})")
    if hosts:
        if values.get("backend", "ssh") != "ssh":
            raise CampaignError(f"{where('backend')}field 'backend': hosts are reached over SSH; "
                                f"backend {values['backend']!r} cannot use them")
        if "nodes" in values and values["nodes"] != len(hosts):
            raise CampaignError(f"{where('nodes')}field 'nodes': {values['nodes']} nodes but "
                                f"{len(hosts)} hosts (one node per host)")
    rf = values.get("replication_factor", RunConfig.replication_factor)
    misr = values.get("min_insync_replicas", RunConfig.min_insync_replicas)
    if isinstance(rf, int) and isinstance(misr, int) and misr > rf:
        raise CampaignError(f"{where('min_insync_replicas')}field 'min_insync_replicas': {misr} is "
                            f"more than the replication factor {rf}")
    if isinstance(rf, int) and isinstance(nodes, int) and rf > nodes:
        raise CampaignError(f"{where('replication_factor')}field 'replication_factor': {rf} is "
                            f"more than the {nodes} nodes")
    if values.get("transactions") is True and \
            values.get("client", RunConfig.client) != "confluent-kafka":
        raise CampaignError(f"{where('transactions')}field 'transactions': transactions run "
                            f"with client confluent-kafka only, not {values.get('client')}")
    workload = values.get("workload", RunConfig.workload)
    if values.get("crash_clients") is True and workload != "queue":
        raise CampaignError(f"{where('crash_clients')}field 'crash_clients': clients crash in "
                            f"the queue workload only, not {workload}")
    if values.get("crash_mid_op") is True and values.get("crash_clients") is not True:
        raise CampaignError(f"{where('crash_mid_op')}field 'crash_mid_op': clients crash "
                            f"mid-operation only where they crash: set crash_clients: true")
    if values.get("crash_mid_op") is True and values.get("transactions") is True:
        raise CampaignError(f"{where('crash_mid_op')}field 'crash_mid_op': transactional "
                            f"clients crash between transactions only, not mid-operation")
    if values.get("zombie_producers") is True and (values.get("crash_clients") is not True
                                                   or values.get("transactions") is not True):
        raise CampaignError(f"{where('zombie_producers')}field 'zombie_producers': zombies are "
                            f"transactional clients whose life ended: set crash_clients: true "
                            f"and transactions: true")
    if values.get("group_protocol", RunConfig.group_protocol) == "consumer":
        if values.get("consume", RunConfig.consume) != "subscribe":
            raise CampaignError(f"{where('group_protocol')}field 'group_protocol': consumer is "
                                f"the protocol of subscribe(), and 'consume' is "
                                f"{values.get('consume', RunConfig.consume)}")
        if values.get("client", RunConfig.client) != "confluent-kafka":
            raise CampaignError(f"{where('group_protocol')}field 'group_protocol': consumer runs "
                                f"with client confluent-kafka only, not {values.get('client')}")
    controllers = values.get("controllers", min(RunConfig.controllers, nodes)
                             if isinstance(nodes, int) else RunConfig.controllers)
    if isinstance(nodes, int) and isinstance(controllers, int) and controllers > nodes:
        raise CampaignError(f"{where('controllers')}field 'controllers': {controllers} controllers "
                            f"but only {nodes} nodes")


def _node_targets(values: dict) -> list[tuple[str, str]]:
    """(field, target) of every ``node:N`` target the campaign's nemesis entries and
    ``nemesis_options`` give."""
    found = []
    for i, e in enumerate(values.get("nemesis") or ()):
        if isinstance(e, dict):
            found += [(f"nemesis[{i}].targets", t) for t in e.get("targets") or ()]
    for p, opts in (values.get("nemesis_options") or {}).items():
        if isinstance(opts, dict):
            found += [(f"nemesis_options.{p}.targets", t) for t in opts.get("targets") or ()]
    return [(f, t) for f, t in found if isinstance(t, str) and t.startswith("node:")
            and t[5:].isdigit()]


def _package_names(entries) -> list[str]:
    return [e if isinstance(e, str) else e.get("package") for e in entries]


def _validate_nemesis(entries: list, where) -> None:
    """Each entry: a package name, or a mapping with ``package`` and that package's options."""
    seen = set()
    for i, entry in enumerate(entries):
        here = f"nemesis[{i}]"
        if isinstance(entry, dict):
            name = entry.get("package")
            if name is None:
                raise CampaignError(f"{where(here)}field {here!r}: an entry needs 'package' "
                                    f"(one of {', '.join(PACKAGES)})")
            options = {k: v for k, v in entry.items() if k != "package"}
        else:
            name, options = entry, {}
        if name not in PACKAGES:
            raise CampaignError(f"{where(here + '.package')}field {here!r}: unknown package "
                                f"{name!r} (known: {', '.join(PACKAGES)})")
        if name in seen:
            raise CampaignError(f"{where(here)}field {here!r}: package {name!r} listed twice")
        seen.add(name)
        bad = check_options(name, options)
        if bad is not None:
            field_name = f"{here}.{bad[0]}"
            raise CampaignError(f"{where(field_name)}field {field_name!r} ({name}): {bad[1]}")


def _normalise_nemesis(values: dict) -> None:
    """Mapping entries become a package name plus ``nemesis_options[name]``."""
    entries = values.get("nemesis")
    if not entries or all(isinstance(e, str) for e in entries):
        return
    options = dict(values.get("nemesis_options") or {})
    names = []
    for e in entries:
        if isinstance(e, dict):
            opts = {k: v for k, v in e.items() if k != "package"}
            names.append(e["package"])
            if opts:
                options[e["package"]] = {**options.get(e["package"], {}), **opts}
        else:
            names.append(e)
    values["nemesis"] = names
    values["nemesis_options"] = options


def read_campaign_file(path: Path) -> tuple[dict, dict[str, int]]:
    """A campaign file's mapping and the line of every key in it (see ``_key_lines``)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise CampaignError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        node = yaml.compose(text)
        values = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise CampaignError(f"{path}{line}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if values is None:
        return {}, {}
    if not isinstance(values, dict) or node is None or not isinstance(node, yaml.MappingNode):
        raise CampaignError(f"{path}:1: a campaign file is a mapping of field: value")
    return values, _key_lines(node)


def load_campaign(path: str | Path) -> dict:
    """The validated mapping of a campaign file."""
    path = Path(path)
    values, lines = read_campaign_file(path)
    if not values:
        return {}
    matrix = [k for k in ("seeds", "workloads", "nemeses", "cells") if k in values]
    if matrix:
        raise CampaignError(f"{path}:{lines[matrix[0]]}: field {matrix[0]!r}: this file is a "
                            f"campaign matrix; run it with `chaoskraft campaign {path}`")

    where = located(path, lines)
    validate(values, where)
    return values


def resolve(campaign: dict, overrides: dict) -> RunConfig:
    values = {**campaign, **{k: v for k, v in overrides.items() if v is not None}}
    validate(values, lambda key: "")
    _normalise_nemesis(values)
    if "test" not in values and "workload" in values:
        values["test"] = values["workload"]
    if values.get("hosts"):  # one node per host, on the SSH backend
        values["backend"] = "ssh"
        values.setdefault("nodes", len(values["hosts"]))
        values.setdefault("controllers", min(RunConfig.controllers, values["nodes"]))
    # The workload's defaults (its fault packages, its settings) where the campaign is silent.
    WORKLOADS[values.get("workload", RunConfig.workload)].defaults(values)
    if values.get("recovery_s") is None:
        values["recovery_s"] = 0.0 if values.get("liveness", RunConfig.liveness) else 10.0
    cfg = RunConfig(**values)
    _check_node_properties(cfg)
    return cfg


def _check_node_properties(cfg: RunConfig) -> None:
    """The properties every node will be given (the campaign's ``node_config`` and what its
    fault packages need), read now by the node's own parser rather than by each node as it
    starts: two packages whose needs conflict, or a bad value, are a campaign error."""
    from node_image.config import ConfigError, load_config
    try:
        load_config({**node_config(cfg), "node.id": "1", "controller.quorum.voters": "1@h:9093",
                     "log.dirs": "/d"})
    except ConfigError as exc:
        needs = sorted(name for name in cfg.nemesis if REGISTRY[name].node_properties(
            REGISTRY[name].run_options(cfg.workload, cfg.nemesis_options.get(name))))
        raise CampaignError(f"field 'node_config' (with the node properties of the fault "
                            f"packages {', '.join(needs) or 'none'}): {exc}") from None


def _package_options(cfg: RunConfig):
    for name in cfg.nemesis:
        package = REGISTRY[name]
        yield package, package.run_options(cfg.workload, cfg.nemesis_options.get(name))


def needs_faketime(cfg: RunConfig) -> bool:
    """Do the nodes run under libfaketime (a package of the campaign moves their clocks)?"""
    return any(package.faketime for package, _ in _package_options(cfg))


def needs_faultfs(cfg: RunConfig) -> bool:
    """Is each node's data directory a faultfs mount (a package of the campaign fails or
    forgets from outside the node)?"""
    return any(package.needs_faultfs(opts) for package, opts in _package_options(cfg))


def node_config(cfg: RunConfig) -> dict[str, str]:
    """Node properties for the run: the campaign's, plus what its nemesis needs."""
    props = dict(cfg.node_config)
    # Kafka's default (3) leaves a smaller cluster without group coordinators
    props.setdefault("offsets.topic.replication.factor", str(min(3, cfg.nodes)))
    props.setdefault("transaction.state.log.replication.factor", str(min(3, cfg.nodes)))
    props.setdefault("transaction.state.log.min.isr", str(min(2, cfg.nodes)))
    # The workloads make their topics with the replication they test; a client naming a topic
    # before it is made (or after it is deleted) must not get one of a single replica
    props.setdefault("auto.create.topics.enable", "false")
    if cfg.group_protocol == "consumer":
        # the brokers offer ConsumerGroupHeartbeat beside Metadata v12, as Kafka's do; the
        # group's session and heartbeat interval are the broker's, as short as the classic
        # members' (a member cut off leaves quickly)
        props.setdefault("chaoskraft.metadata.max.version", "12")
        props.setdefault("group.consumer.session.timeout.ms", "6000")
        props.setdefault("group.consumer.heartbeat.interval.ms", "1000")
    for package, opts in _package_options(cfg):
        for key, value in package.node_properties(opts).items():
            props.setdefault(key, value)
    return props
