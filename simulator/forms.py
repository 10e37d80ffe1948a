"""Each workload's simulated form: what the simulator needs to know of a workload (its
cluster's shape, its clients, its checker, its own options and invariants), so that
``simulator/cluster.py`` runs any of them without naming one. A new simulated workload is
a new form here, registered in ``FORMS`` (and its name in ``simulator.WORKLOAD_NAMES``).
"""
from __future__ import annotations

import dataclasses
import random

from node_image.config import BrokerConfig

from . import kafka_clients
from . import workload as register_workload
from .data_invariants import DataInvariants
from .kafka_clients import SimKafkaClients
from .kafka_state import FINAL_READ_AFTER_MS, WRITES_BACK_WITHIN_MS
from .options import QueueOptions
from .twin import PlanFaults
from .workload import TIMEOUT_MS, SimClients


class RegisterForm:
    """Every voter a controller serving the register; the register clients; a
    linearizability check of their history."""
    name = "register"
    min_nodes = 1
    recovery_ms = 20_000
    twin_start_ms = 3_000  # a twin's workload starts this long into the simulated run
    unused_options: tuple[str, ...] = ()  # options every seed draws that this form ignores

    def check_history(self, history: list[dict], **args):
        return register_workload.check_history(history, **args)

    def voter_ids(self, nodes: int) -> list[int]:
        return list(range(1, nodes + 1))

    def fit_options(self, options, twin):
        """The seed's options as this form can run them."""
        return options

    def own_options(self, seed: int, given, twin):
        """The options this form draws from a stream of its own (None: none)."""
        return None

    def roles(self, voter: bool) -> tuple[str, ...]:
        return ("controller",) if voter else ("broker",)

    def broker_config(self, sim) -> BrokerConfig:
        return BrokerConfig(**sim._scenario_broker)  # what the packages drawn need

    def stats(self) -> dict:
        return {}

    def clients(self, sim, seed: int, own):
        """(the seeded clients, their checker's arguments, a plan of scenarios or None)."""
        o = sim.options
        return (SimClients(sim, random.Random(f"{seed}-clients"), o.clients, o.keys,
                           o.op_interval_ms, sim.duration_ms + sim.RECOVERY_MS - TIMEOUT_MS),
                {}, None)

    def plan_faults(self, sim) -> PlanFaults:
        """The plan the seeded nemesis starts its fault packages' steps in."""
        return PlanFaults(sim, [], sim.seed, self.name, 1, sim.voter_ids,
                          sim.options.extra_options)

    def twin_clients(self, sim, twin, rng: random.Random):
        """A twin's clients: the run's processes, each doing what its generator made."""
        cfg = twin.cfg
        interval = max(1, int(1000 / cfg.rate))
        # as the seeded clients, they go on through the recovery (while their scripts last)
        stop = sim.duration_ms + sim.RECOVERY_MS - int(cfg.op_timeout_s * 1000)
        return SimClients(sim, rng, cfg.concurrency, 0, interval, stop, scripts=twin.ops,
                          start_at_ms=twin.start_ms, timeout_ms=int(cfg.op_timeout_s * 1000))

    def twin_check_args(self, cfg) -> dict:
        return {}

    def data_invariants(self, sim):
        return None


class QueueForm:
    """Nodes 1-3 controllers and brokers, the others brokers, as in a Docker cluster; the
    Kafka clients of ``kafka_clients``; the queue checker and the data plane's invariants."""
    name = "queue"
    min_nodes = 3  # replication factor 3
    # sends in flight when the faults stop run out their delivery timeout (10 s), then the
    # final reader reads every partition to a stable end
    recovery_ms = 75_000
    twin_start_ms = 10_000
    unused_options = ("clients", "keys")

    def check_history(self, history: list[dict], **args):
        return kafka_clients.check_history(history, **args)

    def voter_ids(self, nodes: int) -> list[int]:
        return [1, 2, 3]

    def fit_options(self, options, twin):
        if twin is not None:
            return options
        # A broker whose disk is wiped comes back empty under the same id; Kafka then loses
        # acknowledged records by design (KIP-966 is what addresses it). And a broker
        # publishes metadata only once it has caught up with the high watermark, as Kafka's
        # MetadataLoader; 256-byte metadata fetches (a stress option of the Raft layer)
        # never catch up with a quorum that writes faster.
        return dataclasses.replace(options, wipe_prob=0.0,
                                   fetch_max_bytes=max(options.fetch_max_bytes, 4096))

    def own_options(self, seed: int, given, twin):
        return None if twin is not None else (given or QueueOptions.draw(seed))

    def roles(self, voter: bool) -> tuple[str, ...]:
        return ("controller", "broker") if voter else ("broker",)

    def broker_config(self, sim) -> BrokerConfig:
        # queue campaigns fsync every batch (docs/queue.md: power loss) unless a package
        # drawn says otherwise; a coordinator per partition: three are enough to move
        return BrokerConfig(**{"flush_interval_messages": 1,
                               "segment_bytes": sim.options.segment_bytes,
                               "transaction_topic_partitions": 3,
                               "offsets_topic_partitions": 3, **sim._scenario_broker})

    def stats(self) -> dict:
        return {"power_losses": 0}

    def clients(self, sim, seed: int, q: QueueOptions):
        from checkers.queue import default_allowed
        o = sim.options
        clients = SimKafkaClients(
            sim, random.Random(f"{seed}-kafka-clients"), q.producers, q.consumers,
            q.partitions, 3, o.op_interval_ms, sim.duration_ms + WRITES_BACK_WITHIN_MS,
            sim.duration_ms + FINAL_READ_AFTER_MS,
            idempotent=lambda p, all_=q.idempotent: all_ is True or p % 2 == 0,
            transactional=q.transactions, crash_interval_ms=q.crash_client_ms, crash_seed=seed,
            crash_mid_op=q.crash_mid_op, zombie_producers=q.zombie_producers)
        args = {"allowed": tuple(default_allowed(True if q.transactions else q.idempotent))}
        return clients, args, self.plan_faults(sim) if q.scenario_mean_ms else None

    def plan_faults(self, sim) -> PlanFaults:
        return PlanFaults(sim, [], sim.seed, self.name, sim.queue_options.partitions,
                          sim.voter_ids, sim.options.extra_options)

    def twin_clients(self, sim, twin, rng: random.Random):
        cfg = twin.cfg
        interval = max(1, int(1000 / cfg.rate))
        configs = {"min.insync.replicas": str(cfg.min_insync_replicas)}
        if cfg.flush_messages is not None:
            configs["flush.messages"] = str(cfg.flush_messages)
        return SimKafkaClients(
            sim, rng, cfg.concurrency, cfg.concurrency, cfg.partitions, cfg.replication_factor,
            # as the seeded clients, they go on after the time limit (while their scripts
            # last) until a send is acknowledged: a cluster that no longer takes writes shows
            interval, sim.duration_ms + WRITES_BACK_WITHIN_MS,
            sim.duration_ms + FINAL_READ_AFTER_MS,
            idempotent=lambda p: cfg.idempotent if cfg.idempotent is not None else p % 2 == 0,
            scripts=twin.ops, start_at_ms=twin.start_ms, topic_configs=configs,
            crash_interval_ms=int(cfg.crash_client_interval_s * 1000) if cfg.crash_clients
            else None, crash_seed=cfg.seed, more_scripts=twin.more_ops,
            crash_mid_op=cfg.crash_mid_op)

    def twin_check_args(self, cfg) -> dict:
        from checkers.queue import default_allowed
        allowed = cfg.allowed_anomalies
        return {"allowed": tuple(default_allowed(cfg.idempotent) if allowed is None
                                 else allowed)}

    def data_invariants(self, sim):
        return DataInvariants(sim)


FORMS = {f.name: f for f in (RegisterForm(), QueueForm())}
