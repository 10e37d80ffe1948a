"""What a seed draws: the fault and load options of every seed (``SimOptions``), the queue
workload's own (``QueueOptions``), and the quiet options of a stored run's twin."""
from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SimOptions:
    drop_rate: float
    duplicate_rate: float
    max_delay_ms: int
    partition_mean_ms: int | None
    partition_length_ms: int
    crash_mean_ms: int | None
    down_ms: int
    torn_write_prob: float
    wipe_prob: float
    clock_drift_ppm: int
    observers: int
    clients: int
    keys: int
    op_interval_ms: int
    segment_bytes: int
    snapshot_bytes: int
    fetch_max_bytes: int
    election_crash_prob: float
    clock_step_mean_ms: int | None = None
    # Seeded timelines no seed draws (fault packages added after the seeds' draws were
    # fixed, so every seed keeps its schedule): timeline -> mean interval (ms), asked for
    # (``--option 'extra_faults={"clock-rate": 10000}'``, a planted bug's sim_options)
    extra_faults: dict = field(default_factory=dict)
    # Options of those packages' steps, as a campaign gives them (package -> options:
    # ``--option 'extra_options={"partition": {"targets": ["isolate-controller"]}}'``)
    extra_options: dict = field(default_factory=dict)

    @staticmethod
    def draw(seed: int) -> "SimOptions":
        r = random.Random(f"{seed}-options")
        partition = r.choice([None, 3000, 10000, 30000])
        crash = r.choice([None, 3000, 10000, 30000])
        if partition is None and crash is None:
            partition, crash = (10000, None) if r.random() < 0.5 else (None, 10000)
        return SimOptions(
            drop_rate=r.choice([0.0, 0.01, 0.05, 0.2]),
            duplicate_rate=r.choice([0.0, 0.01, 0.05]),
            max_delay_ms=r.choice([2, 20, 100, 400]),
            partition_mean_ms=partition,
            partition_length_ms=r.choice([1000, 5000, 20000]),
            crash_mean_ms=crash,
            down_ms=r.choice([200, 3000, 15000]),
            torn_write_prob=r.choice([0.0, 0.5]),
            wipe_prob=r.choice([0.0, 0.0, 0.1]),
            clock_drift_ppm=r.choice([0, 1000, 50000]),
            observers=r.choice([0, 0, 1, 2]),
            clients=r.choice([2, 3, 5]),
            keys=r.choice([1, 3, 5]),
            op_interval_ms=r.choice([20, 100, 500]),
            segment_bytes=r.choice([1024, 8192, 1 << 20]),
            snapshot_bytes=r.choice([1024, 8192, 1 << 20]),
            fetch_max_bytes=r.choice([256, 4096, 8 << 20]),
            election_crash_prob=r.choice([0.0, 0.0, 0.5]),
            # its own stream, so the options above are those the seed drew before steps existed
            clock_step_mean_ms=random.Random(f"{seed}-clock-steps").choice(
                [None, None, 5000, 15000]),
        )

    def describe(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.__dict__.items())


@dataclass(frozen=True)
class QueueOptions:
    """What the queue workload's seed draws, from a stream of its own (the register
    workload's options stay those its seeds always drew)."""
    partitions: int
    producers: int
    consumers: int
    power_loss_mean_ms: int | None  # every node loses power at once (the disks keep only
    # what was fsynced, tearing the rest as the crashes do), at this mean interval
    # True: every producer idempotent; None: the odd-numbered ones without retries (as a
    # default Docker campaign's), so duplicates are allowed
    idempotent: bool | None = True
    # The Docker scenarios aimed at one partition (depose-leader, strand-replica: their
    # packages' simulated forms), one after another at this mean interval, with the node
    # properties they need; None: none
    scenario_mean_ms: int | None = None
    # Transactional producers and read_committed consumers (simulator.kafka_txn), as
    # campaigns/queue-txn.yaml: every producer then is idempotent. Drawn from a stream of
    # its own (one seed in three), so the other options are those the seeds drew before.
    transactions: bool = False
    # The liveness check at the end (data_invariants.check_liveness): never drawn; off only
    # when asked (``--option liveness=false``), to show what the safety checks alone miss
    liveness: bool = True
    # Jepsen's crash-clients (simulator.kafka_crashes): each client crashed after a life
    # uniform in 0 .. twice this, a fresh one going on; None: never. Not drawn yet (it would
    # change the histories of the seeds the planted-bug tables were measured on).
    crash_client_ms: int | None = None
    # ... and crashed when its life ends, mid-operation if one is in flight (its completion
    # info), rather than at its next step as Docker's are
    crash_mid_op: bool = False
    # ... and a transactional client's successor starts while it still runs: the old one,
    # fenced by the new one's InitProducerId, goes on until a request of its is refused,
    # then closes (zombie fencing, as Kafka's transactional id takeover)
    zombie_producers: bool = False

    @staticmethod
    def draw(seed: int) -> "QueueOptions":
        r = random.Random(f"{seed}-queue-options")
        return QueueOptions(partitions=r.choice([1, 2, 3]), producers=r.choice([1, 2, 3]),
                            consumers=r.choice([1, 2]),
                            power_loss_mean_ms=r.choice([None, 60000, 120000]),
                            idempotent=r.choice([True, True, None]),
                            scenario_mean_ms=r.choice([None, 10000, 30000]),
                            transactions=random.Random(f"{seed}-queue-txn").random() < 1 / 3)

    def describe(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.__dict__.items())


def twin_options(cfg) -> SimOptions:
    """A stored run's twin: a quiet network (no loss, 1-2 ms a message), no fault but its
    plan's, no clock drift, the run's clients and rate."""
    return SimOptions(drop_rate=0.0, duplicate_rate=0.0, max_delay_ms=2, partition_mean_ms=None,
                      partition_length_ms=0, crash_mean_ms=None, down_ms=0, torn_write_prob=0.0,
                      wipe_prob=0.0, clock_drift_ppm=0, observers=0, clients=cfg.concurrency,
                      keys=0, op_interval_ms=max(1, int(1000 / cfg.rate)),
                      segment_bytes=0, snapshot_bytes=0, fetch_max_bytes=0,
                      election_crash_prob=0.0, clock_step_mean_ms=None)
