"""The queue workload as a campaign runs it, after Jepsen's ``jepsen.tests.kafka``: real
Kafka clients against the cluster's brokers, under faults, checked by ``checkers.queue``.

On top of the campaign's phases (``harness.campaign.Campaign``):

- set-up: the topic (``partitions`` partitions, ``replication_factor``,
  ``min.insync.replicas``, optional ``flush.messages``) is created and every
  partition must have a leader before the workload starts;
- workers: one thread per logical process, each with its own producer and
  consumer (``workloads.queue_client``), driven by the seeded
  ``QueueGenerator``; every send, poll and assign is recorded;
- faults may aim at the leader of a random partition of the topic, looked
  up when the fault fires, and scenarios at one partition
  (``partition_infos``: the freshest broker's metadata);
- final phase: every node is restarted (a clean stop, then start: the
  durability check asks that acknowledged sends survive it), then the final
  polls read every partition from offset 0 to its high watermark.
"""
from __future__ import annotations

import asyncio
import logging
import random
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .queue import (ABORT_RATIO, VALUE_STRIDE, QueueGenerator, client_lifetimes, key_name,
                    producer_codec)
from .queue_client import CLIENT_LOG, CRASHED_MID_OP, GROUP, make_client, read_to_end
from .workload import FINAL_PROCESS_BASE, Campaign, until_live
from .queue_verdict import _detect_time, check_run


LIVENESS_PROCESS = FINAL_PROCESS_BASE + 1  # the liveness phase's probe sends


WHOLE_BEFORE_FINAL_READ_S = 60.0  # the final read waits this long for ISRs at the minimum


TOPIC = "queue"


KAFKA_PORT = 9092


QUEUE_TIMEOUT_S = 5.0  # per send or poll: leader fail-over takes a broker session (9 s) or less


def broker_metadata(address: str, topic: str, timeout_s: float) -> list[tuple]:
    """One broker's own view of ``topic``: (partition, leader, leader epoch, replicas, ISR)
    per partition, from a Metadata v8 request on a connection of its own."""
    from .nodes import metadata
    resp = metadata(address, [topic], timeout_s, KAFKA_PORT)
    return [(p.partition_index, p.leader_id, p.leader_epoch, list(p.replica_nodes),
             list(p.isr_nodes))
            for t in resp.topics if t.name == topic and t.error_code == 0 for p in t.partitions]


def freshest_partitions(addresses: list[str], topic: str,
                        timeout_s: float) -> list[tuple[int, int, list[int], list[int]]]:
    """(partition, leader, replicas, ISR) from the answering brokers that know the highest
    leader epoch of each partition (as clients discard metadata older than what they saw);
    among those, the view most of them share. An ISR change keeps the leader epoch, and a
    broker cut off from the controller keeps its old ISR: taking the first broker's answer,
    a scenario once waited 98 s for a shrink every other broker had seen."""
    from collections import Counter
    views: dict[int, Counter] = {}
    for address in addresses:
        try:
            parts = broker_metadata(address, topic, timeout_s)
        except (OSError, ValueError, struct.error):
            continue  # down, cut off or refusing: the others answer
        for pid, leader, epoch, replicas, isr in parts:
            views.setdefault(pid, Counter())[(epoch, leader, tuple(replicas), tuple(isr))] += 1
    out = []
    for pid, seen in sorted(views.items()):
        top = max(v[0] for v in seen)
        (_, leader, replicas, isr), _ = max(((v, n) for v, n in seen.items() if v[0] == top),
                                            key=lambda x: x[1])
        out.append((pid, leader, list(replicas), list(isr)))
    return out


def txn_completion(mops: list, results: list) -> tuple[str, list, str | None]:
    """A transaction's micro-operations and their results -> its completion: type (info if
    any send's fate is unknown, else fail if any failed, else ok), the completed
    micro-operations (a poll that failed read nothing) and the first error."""
    types = {r.type for m, r in zip(mops, results) if m[0] == "send"}
    typ = "info" if "info" in types else "fail" if "fail" in types else "ok"
    done = []
    for m, r in zip(mops, results):
        if m[0] == "send":
            done.append(["send", m[1], [r.value if r.type == "ok" else None, m[2]]])
        else:
            done.append(["poll", r.value if r.type == "ok" else {}])
    error = next((r.error for r in results if r.error), None)
    return typ, done, error


class QueueRun:
    def __init__(self, campaign: Campaign) -> None:
        self.cfg, self.backend, self.history, self.log = (campaign.cfg, campaign.backend,
                                                          campaign.history, campaign.log)
        self.ids = campaign.ids
        self.generator = campaign.generator
        self.bootstrap = ",".join(f"{n.address}:{KAFKA_PORT}" for n in self.backend.nodes)
        self.client_port = KAFKA_PORT
        self.timeout_s = max(self.cfg.op_timeout_s, QUEUE_TIMEOUT_S)
        self.codec = producer_codec(self.cfg.compression, self.cfg.seed)  # the producers' compression.type
        self._admin_client = None
        self._handler: logging.Handler | None = None
        self.zombies = 0  # clients left running when their life ended (zombie_producers)
        self._zombie_threads: list[threading.Thread] = []
        self._zombie_errors: list[BaseException] = []

    async def close(self) -> None:
        self._admin_client = None
        if self._handler is not None:
            CLIENT_LOG.removeHandler(self._handler)
            self._handler.close()
            self._handler = None

    def _admin(self):
        """One admin client for the run, dropped when the run ends (its threads with it)."""
        from confluent_kafka.admin import AdminClient
        if self._admin_client is None:
            self._admin_client = AdminClient({"bootstrap.servers": self.bootstrap,
                                              "error_cb": lambda e: None, "logger": CLIENT_LOG})
        return self._admin_client

    def _leaders(self) -> dict[int, int]:
        return {pid: leader for pid, leader, _, _ in self.partition_infos()}

    def partition_infos(self, topic: str | None = None
                        ) -> list[tuple[int, int, list[int], list[int]]]:
        """Every partition of the topic (or of ``topic``: an internal one; none while it does
        not exist) as the freshest broker knows it: the answer with the highest leader
        epoch among every broker's. One client's metadata may come from a broker that has
        just been cut off (a deposed leader still names itself), and a scenario aimed by it
        strands the real leader (unclean-election seed 14 went unseen so)."""
        return freshest_partitions([n.address for n in self.backend.nodes], topic or TOPIC, 3.0)

    def reassign(self, moves: dict[int, list[int]],
                 topic: str | None = None) -> dict[int, str | None]:
        """One AlterPartitionReassignments of partitions of the topic (or of ``topic``) to
        their new replicas, as kafka-python's admin client sends it (confluent-kafka's has
        no such call): partition -> the error, or None; a partition the answer leaves out
        is not in it."""
        from kafka import KafkaAdminClient, TopicPartition
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=15_000)
        try:
            answers = admin.alter_partition_reassignments(
                {TopicPartition(topic or TOPIC, p): list(r) for p, r in moves.items()})
            return {tp.partition: None if e is None else e.__name__
                    for tp, e in answers.items()}
        finally:
            admin.close()

    def elect(self, partition: int) -> str | None:
        """ElectLeaders (PREFERRED) of one partition of the topic, as kafka-python's admin
        client sends it; the error's name (Kafka's, e.g. PREFERRED_LEADER_NOT_AVAILABLE), or
        None once elected."""
        from kafka import KafkaAdminClient
        from kafka.errors import for_code
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=15_000)
        try:
            r = admin.elect_leaders(0, {TOPIC: [partition]}, raise_errors=False)
            [(_, [(_, code, _)])] = r.replica_election_results
            return None if code == 0 else for_code(code).__name__
        finally:
            admin.close()

    async def partition_leader(self, rng: random.Random, partition: int | None = None) -> int | None:
        if partition is None:
            partition = rng.randrange(self.cfg.partitions)
        try:
            leaders = await asyncio.to_thread(self._leaders)
        except Exception:  # noqa: BLE001 - no metadata now: the fault picks a node at random
            return None
        leader = leaders.get(partition, -1)
        return leader if leader >= 0 else None

    async def setup(self) -> None:
        from confluent_kafka.admin import NewTopic
        self._handler = logging.FileHandler(self.history.path.parent / "kafka-clients.log")
        self._handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        CLIENT_LOG.addHandler(self._handler)
        CLIENT_LOG.setLevel(logging.DEBUG)
        cfg = self.cfg
        config = {"min.insync.replicas": str(cfg.min_insync_replicas)}
        if cfg.flush_messages is not None:
            config["flush.messages"] = str(cfg.flush_messages)
        self.log(f"topic {TOPIC}: {cfg.partitions} partitions, replication factor "
                 f"{cfg.replication_factor}, {config}; producers compress with {self.codec}"
                 + (" (drawn from the seed)" if cfg.compression is None else ""))

        def create():
            deadline = time.monotonic() + 90
            while True:
                try:
                    admin = self._admin()
                    # Placement uses the brokers registered when the topic is made: wait for
                    # all of them, or a 5-node cluster keeps its partitions on the first three.
                    live = set(admin.list_topics(timeout=5).brokers)
                    missing = sorted(set(self.ids) - live)
                    if missing:
                        raise RuntimeError(f"brokers {missing} not registered yet")
                    admin.create_topics([NewTopic(TOPIC, cfg.partitions, cfg.replication_factor,
                                                  config=config)])[TOPIC].result(30)
                    return
                except Exception as exc:  # noqa: BLE001 - brokers may still be registering
                    if "TOPIC_ALREADY_EXISTS" in str(exc):
                        return
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"cannot create topic {TOPIC}: {exc}") from None
                    time.sleep(1)
        await asyncio.to_thread(create)
        await self._wait_for_leaders(90)
        infos = await asyncio.to_thread(self.partition_infos)
        self.log("replicas: " + ", ".join(f"{p}={r} (leader n{lead})"
                                          for p, lead, r, _ in sorted(infos)))

    async def _wait_for_leaders(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        why = "no answer yet"
        while True:
            try:
                leaders = await asyncio.to_thread(self._leaders)
                why = f"leaders {leaders}" if leaders else f"no metadata for topic {TOPIC}"
            except Exception as exc:  # noqa: BLE001 - brokers restarting
                leaders, why = {}, f"{type(exc).__name__}: {exc}"
            if len(leaders) == self.cfg.partitions and all(v >= 0 for v in leaders.values()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"partitions of {TOPIC} without a leader after {timeout_s:.0f} s "
                                   f"(last answer: {why})")
            await asyncio.sleep(0.5)

    # ------------------------------------------------------------ workload

    def queue_worker(self, slot: int, deadline) -> None:
        """One client slot: its process, and with ``crash_clients`` (Jepsen's) the ones after
        it, each begun with a fresh client once the last was crashed, numbered on by the
        concurrency (slot, slot + c, slot + 2c, ... as Jepsen numbers a crashed process's
        successor; no crash once the next number would reach the final phase's)."""
        cfg = self.cfg
        lives = client_lifetimes(cfg.seed, slot, cfg.crash_client_interval_s) \
            if cfg.crash_clients else None
        process = slot
        while True:
            crash_at = None if lives is None or process + cfg.concurrency >= FINAL_PROCESS_BASE \
                else time.monotonic() + next(lives)
            if not self._client_life(process, slot, deadline, crash_at):
                return
            process += cfg.concurrency

    def _crashed(self, process: int, crash_at: float | None, now: bool = False) -> bool:
        """Whether this process's client is due to crash (``now``: it crashed mid-operation):
        if so it is recorded (Jepsen's ``crash`` operation, info), and the caller closes the
        client."""
        if not now and (crash_at is None or time.monotonic() < crash_at):
            return False
        self.history.record(process, "invoke", "crash")
        self.history.record(process, "info", "crash")
        return True

    def _client_life(self, process: int, slot: int, deadline, crash_at: float | None) -> bool:
        """One process with its own client, until the deadline (False) or its crash (True)."""
        cfg = self.cfg
        gen = self.generator.ops(process)
        idempotent = cfg.idempotent if cfg.idempotent is not None else slot % 2 == 0
        client = make_client(cfg.client, self.bootstrap, TOPIC, cfg.partitions, self.timeout_s,
                             idempotent, process, transactions=cfg.transactions,
                             compression=self.codec, group_protocol=cfg.group_protocol,
                             transactional_id=f"{GROUP}-slot-{slot}" if cfg.zombie_producers
                             else None)
        if cfg.transactions:
            return self._txn_worker(process, deadline, gen, client, crash_at)
        interval = 1.0 / cfg.rate
        try:
            self._reposition(process, client)
            for op in gen:
                if deadline.passed():
                    break
                if self._crashed(process, crash_at):
                    return True
                if op.f == "assign":
                    self._reposition(process, client)
                else:  # the invoke is recorded before the call, the completion after
                    self._invoke(process, op)
                    r = client.send(op.key, op.value, self._life_left(crash_at)) \
                        if op.f == "send" else client.poll()
                    self._complete(process, op, r)
                    if r.error == CRASHED_MID_OP:
                        return self._crashed(process, crash_at, now=True)
                time.sleep(interval)
        finally:
            client.close()
        return False

    def _life_left(self, crash_at: float | None) -> float | None:
        """With ``crash_mid_op``, how long a send may wait for its answer before its client
        crashes under it (its life's end); None: as long as the operation may take."""
        if not self.cfg.crash_mid_op or crash_at is None:
            return None
        return max(0.0, crash_at - time.monotonic())

    def _invoke(self, process: int, op) -> None:
        if op.f == "send":
            self.history.record(process, "invoke", "send", op.key, {"value": op.value})
        else:
            self.history.record(process, "invoke", "poll")

    def _complete(self, process: int, op, r) -> None:
        if op.f == "send":
            done = {"value": op.value}
            if r.type == "ok":
                done["offset"] = r.value
            self.history.record(process, r.type, "send", op.key, done, error=r.error)
        else:
            self.history.record(process, r.type, "poll", value=r.value, error=r.error)

    def _reposition(self, process: int, client) -> None:
        """The consumer starts over: ``assign`` or ``subscribe`` (``consume``), the client
        method of that name, recorded as an operation of that name."""
        consume = self.cfg.consume
        self.history.record(process, "invoke", consume)
        r = getattr(client, consume)()
        self.history.record(process, r.type, consume, value=r.value, error=r.error)

    def _txn_worker(self, process: int, deadline, gen, client, crash_at: float | None) -> bool:
        """Transactions mode: the generator's sends and polls, in its order, grouped into
        transactions of 1 to ``max_txn_length`` (sizes drawn from the seed), one in eight aborted on purpose
        (drawn from the seed too); an assign is one on its own. A transaction is one
        operation, as in Jepsen's histories: ``f: txn``, invoked with its micro-operations
        (``["send", key, value]``, ``["poll"]``) before it begins and completed with what
        each did (``["send", key, [offset, value]]``, ``["poll", {key: [[offset, value],
        ...]}]``): ok once committed, fail once aborted, info when its end is unknown."""
        rng = random.Random(f"{self.cfg.seed}-txn-{process}")
        self._reposition(process, client)
        return self._txns(process, deadline, gen, client, crash_at, rng)

    def _txns(self, process: int, deadline, gen, client, crash_at: float | None, rng,
              zombie: bool = False) -> bool:
        """The transactions of :meth:`_txn_worker` until the deadline (False) or the client's
        life ends (True: crashed, or with ``zombie_producers`` left running as a zombie in a
        thread of its own, where this goes on with ``zombie`` until a request of its is
        refused)."""
        cfg = self.cfg
        interval = 1.0 / cfg.rate
        handed_over = False
        try:
            pending: list = []
            size = rng.randint(1, cfg.max_txn_length)
            for op in gen:
                if deadline.passed() or getattr(client, "fenced", False):
                    break
                if not pending and not zombie and crash_at is not None and \
                        cfg.zombie_producers and time.monotonic() >= crash_at:
                    self._zombie(process, deadline, gen, client, rng)
                    handed_over = True
                    return True
                if not pending and self._crashed(process, crash_at):
                    return True  # between two transactions
                if op.f == "assign":
                    self._reposition(process, client)
                    continue
                pending.append(op)
                if len(pending) < size:
                    continue
                mops = [("send", o.key, o.value) if o.f == "send" else ("poll",) for o in pending]
                abort = rng.random() < ABORT_RATIO
                self.history.record(process, "invoke", "txn", value=[list(m) for m in mops])
                typ, done, error = txn_completion(mops, client.txn(mops, abort=abort))
                self.history.record(process, typ, "txn", value=done, error=error)
                pending = []
                size = rng.randint(1, cfg.max_txn_length)
                time.sleep(interval * len(mops))
        finally:
            if not handed_over:
                client.close()
        return False

    def _zombie(self, process: int, deadline, gen, client, rng) -> None:
        """Leave the client running in a thread of its own; an error there is raised once
        the workers are done, as theirs are."""
        def life() -> None:
            try:
                self._txns(process, deadline, gen, client, None, rng, zombie=True)
            except BaseException as exc:  # noqa: BLE001 - handed to workers() to raise
                self._zombie_errors.append(exc)
        self.zombies += 1
        client.renew_on_fatal = False  # its new producer would fence its successor
        thread = threading.Thread(target=life, name=f"queue-zombie-{process}")
        self._zombie_threads.append(thread)
        thread.start()

    async def workers(self, deadline) -> None:
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=self.cfg.concurrency,
                                thread_name_prefix="queue-worker") as pool:
            await asyncio.gather(*(loop.run_in_executor(pool, self.queue_worker, p, deadline)
                                   for p in range(self.cfg.concurrency)))
        for t in self._zombie_threads:  # zombies end at the deadline too
            await loop.run_in_executor(None, t.join)
        if self._zombie_errors:
            raise self._zombie_errors[0]
        if self.cfg.zombie_producers:
            self.log(f"{self.zombies} transactional clients went on as zombies beside their "
                     f"successors")

    async def _wait_for_min_isrs(self, timeout_s: float) -> None:
        """Before the final read: every partition's ISR back to min.insync.replicas after
        the restart, so that its high watermark can catch up with what the replicas hold (a
        leader whose ISR is still below the minimum holds the high watermark back, and a
        read then would miss acknowledged records that are there; the liveness phase, not
        this wait, judges whether the ISR comes back whole). Reads anyway after
        ``timeout_s``, saying which partitions were short."""
        deadline = time.monotonic() + timeout_s
        short: list = []
        while time.monotonic() < deadline:
            try:
                infos = await asyncio.to_thread(self.partition_infos)
            except Exception:  # noqa: BLE001 - brokers restarting: not yet
                infos = []
            short = [(p, isr, replicas) for p, _, replicas, isr in infos
                     if len(isr) < min(self.cfg.min_insync_replicas, len(replicas))]
            if infos and not short:
                return
            await asyncio.sleep(0.5)
        self.log(f"final phase: ISRs below min.insync.replicas {timeout_s:g} s after the restart "
                 f"({', '.join(f'partition {p}: ISR {sorted(i)} of {r}' for p, i, r in short)}); "
                 f"reading anyway")

    # ------------------------------------------------------------ liveness

    async def liveness(self, bound_s: float) -> list[dict]:
        """After the final heal, within ``bound_s``: the KRaft quorum has a leader, every
        broker is registered and unfenced, every partition has a leader and its full ISR
        again, and an acks=all send to each partition is acknowledged (a probe, recorded in
        the history as a send of process LIVENESS_PROCESS, read back by the final polls; not
        in transactions mode, whose history holds transactions only). What is still stuck
        then, each naming partition or node."""
        from .nodes import active_controller
        nodes = self.backend.nodes
        probed: set[int] = set()
        client = None
        seq = iter(range(VALUE_STRIDE))

        def probe(partition: int):
            nonlocal client
            if client is None:
                client = make_client(self.cfg.client, self.bootstrap, TOPIC, self.cfg.partitions,
                                     self.timeout_s, True, LIVENESS_PROCESS,
                                     compression=self.codec)
            key, value = key_name(partition), LIVENESS_PROCESS * VALUE_STRIDE + next(seq)
            self.history.record(LIVENESS_PROCESS, "invoke", "send", key, {"value": value})
            r = client.send(key, value)
            done = {"value": value, **({"offset": r.value} if r.type == "ok" else {})}
            self.history.record(LIVENESS_PROCESS, r.type, "send", key, done, error=r.error)
            return r

        async def stuck_now() -> list[dict]:
            out = []
            if await active_controller(nodes) is None:
                out.append({"what": "quorum", "detail": "no node leads the KRaft quorum"})
            try:
                brokers = set((await asyncio.to_thread(
                    lambda: self._admin().list_topics(timeout=5))).brokers)
                infos = await asyncio.to_thread(self.partition_infos)
            except Exception as exc:  # noqa: BLE001 - no metadata: stuck as a whole
                return out + [{"what": "metadata", "detail": f"{type(exc).__name__}: {exc}"}]
            for n in sorted(set(self.ids) - brokers):
                out.append({"what": f"broker n{n}", "node": n,
                            "detail": "not registered or fenced"})
            seen = {p for p, *_ in infos}
            for p in range(self.cfg.partitions):
                if p not in seen:
                    out.append({"what": f"partition {p}", "partition": p,
                                "detail": "in no broker's metadata"})
            for p, leader, replicas, isr in infos:
                if leader < 0:
                    out.append({"what": f"partition {p}", "partition": p,
                                "detail": f"no leader (replicas {replicas}, ISR {isr})"})
                elif set(isr) != set(replicas):
                    missing = sorted(set(replicas) - set(isr))
                    out.append({"what": f"partition {p}", "partition": p, "nodes": missing,
                                "detail": f"ISR {sorted(isr)} lacks replicas {missing} "
                                          f"(leader n{leader})"})
            if out or self.cfg.transactions:
                return out
            for p in range(self.cfg.partitions):
                if p in probed:
                    continue
                r = await asyncio.to_thread(probe, p)
                if r.type == "ok":
                    probed.add(p)
                else:
                    out.append({"what": f"produce to partition {p}", "partition": p,
                                "detail": f"an acks=all send was not acknowledged: {r.error}"})
            return out
        try:
            return await until_live(stuck_now, bound_s)
        finally:
            if client is not None:
                await asyncio.to_thread(client.close)

    # ------------------------------------------------------------ final phase

    async def final_phase(self) -> None:
        self.log("durability: restarting every node (clean stop, then start)")
        self.history.record("nemesis", "invoke", "restart-all", value={"nodes": self.ids})
        await asyncio.gather(*(asyncio.to_thread(self.backend.stop_node, n) for n in self.ids))
        await asyncio.gather(*(asyncio.to_thread(self.backend.start_node, n) for n in self.ids))
        self.history.record("nemesis", "info", "restart-all", value={"nodes": self.ids})
        await self._wait_for_leaders(120)
        await self._wait_for_min_isrs(WHOLE_BEFORE_FINAL_READ_S)
        process = FINAL_PROCESS_BASE
        for attempt in range(3):
            self.history.record(process, "invoke", "final-poll")
            try:
                msgs = await asyncio.to_thread(read_to_end, self.bootstrap, TOPIC,
                                               self.cfg.partitions, 60.0)
            except Exception as exc:  # noqa: BLE001 - recorded; the verdict becomes unknown
                self.history.record(process, "fail", "final-poll",
                                    error=f"{type(exc).__name__}: {exc}")
                self.log(f"final poll {attempt + 1} failed: {exc}")
                continue
            self.history.record(process, "ok", "final-poll", value=msgs)
            total = sum(len(v) for v in msgs.values())
            self.log(f"final polls: {total} messages in {len(msgs)} partitions "
                     f"({', '.join(f'{k}={len(msgs[k])}' for k in map(key_name, range(self.cfg.partitions)))})")
            return


class QueueWorkload:
    name = "queue"
    # its data lives in topic partitions: the data-plane coverage events can come
    partitions = True
    writes = ("send", "txn")  # the operations whose acknowledgement a fault can undo
    # Faults outlast the broker session (9 s) often enough for the controller to fence the
    # victim and elect new leaders, which is where acknowledged-but-unreplicated data is lost.
    fault_duration_s = (5.0, 15.0)
    # The default packages: the scenarios aimed at one partition come first
    # (nemesis.schedule.OPENING), then partitions, kills and power losses.
    NEMESIS = ("partition", "kill", "power-loss", "depose-leader", "strand-replica")

    def defaults(self, values: dict) -> None:
        if "nemesis" not in values:
            values["nemesis"] = list(self.NEMESIS)
        # A power loss takes every un-fsynced write with it, on every replica it hits; with
        # Kafka's default (no fsync) overlapping power losses lose acknowledged writes by
        # design. The queue campaign fsyncs every batch unless told otherwise (null: never).
        values.setdefault("flush_messages", 1)

    def generator(self, cfg) -> QueueGenerator:
        return QueueGenerator(cfg.seed, cfg.partitions)

    def open(self, campaign: Campaign) -> QueueRun:
        return QueueRun(campaign)

    def check(self, run_dir: Path, cfg: dict, *, engine: str, spark_master: str | None,
              budget_s: float, log) -> tuple[dict, dict]:
        return check_run(run_dir, cfg, spark_master=spark_master, engine=engine, log=log)

    @staticmethod
    def check_file(args) -> int:
        from .queue_check import check_file
        return check_file(args)

    def aims_at(self, cfg: dict) -> dict[str, str]:
        """In transactions mode one transaction in eight is aborted on purpose so that the
        read_committed consumers must drop its records: a run in which none of them ever
        fetched across an aborted transaction's records did not test that (on a starved
        machine few transactions complete and the aborted ones may have written nothing)."""
        if not cfg.get("transactions"):
            return {}
        return {"aborted-txn-fetched": "the workload aborts transactions on purpose and a "
                                       "read_committed consumer must fetch across one's records"}

    def detection(self, run_dir: Path, results: dict) -> tuple[list[str], float | None]:
        q = results["checkers"][self.name]
        bad = q["bad_anomalies"]
        return bad, (_detect_time(run_dir, q["anomalies"], bad) if bad else None)


WORKLOAD = QueueWorkload()
