"""Jepsen's crash-clients for the simulated queue clients: a client slot's client is crashed
between two of its operations and a fresh one goes on under the next process number, as the
Docker queue workload's ``queue_worker`` does (``workloads.queue.client_lifetimes``: each
life uniform in 0 .. twice the interval, drawn from the seed and the slot alone).

A crash is recorded as Jepsen records one (``crash``, invoke then info); the successor is
``process + slots`` and starts as a new client does: a producer without a producer id (it
asks for a new one; a transactional one under the slot's transactional id, so that
its InitProducerId fences the crashed one and aborts a transaction it left open, as a
restarted application's does), a consumer assigned anew (it reads every partition from offset 0), a
scripted one (a Docker run's twin) with the generator's operations of its own process. Events
still queued for the crashed process (a step, a retry) find it gone and do nothing; a
process crashes only at a step, when none of its requests is out. No crash once the
successor's number would reach the final phase's (``FINAL_PROCESS_BASE``), which is then the
final reader's process.

With ``zombies`` a transactional producer is not crashed when its life ends: its successor
starts beside it under the same transactional id (an application started again while the
old instance still runs), and the old one goes on as a zombie, with no crash recorded,
until a request of its is refused as fenced; then it closes (``end_zombie``), as an
application closes a producer after a fatal error (``kafka_txn``)."""
from __future__ import annotations

from workloads.queue import client_lifetimes
from workloads.workload import FINAL_PROCESS_BASE

from .kafka_state import _Consumer, _Producer


class ClientCrashes:
    def __init__(self, clients, interval_ms: int | None, seed, slots: int,
                 more_scripts=None, mid_op: bool = False, zombies: bool = False) -> None:
        if zombies and (mid_op or interval_ms is None or not clients.transactional):
            raise ValueError("option zombie_producers needs crash_client_ms and transactions, "
                             "and not crash_mid_op")
        self.clients = clients
        self.mid_op = mid_op
        self.zombies = zombies
        self.interval_ms = interval_ms
        self.slots = slots
        self.more_scripts = more_scripts
        self._slot: dict[int, int] = {}
        self._at: dict[int, int | None] = {}
        self._lives: dict[int, object] = {}
        self._gone: set[int] = set()
        if interval_ms is None:
            return
        clients.final_process = FINAL_PROCESS_BASE
        for process in sorted(set(clients._producer) | set(clients._consumer)):
            self._slot[process] = process
            self._lives[process] = client_lifetimes(seed, process, interval_ms / 1000)

    def gone(self, process: int) -> bool:
        return process in self._gone

    def script(self, process: int):
        scripts = self.clients.scripts
        if process not in scripts and self.more_scripts is not None:
            scripts[process] = iter(self.more_scripts(process))
        return scripts[process]

    def crashed(self, process: int) -> bool:
        """Whether ``process`` is due to crash at this step: if so it is crashed, its
        successor made and stepped, and True. Crashing mid-operation (``mid_op``), its
        life's end is an event of its own instead (``crash_now``), scheduled here at its
        first step."""
        if self.interval_ms is None:
            return False
        now = self.clients.sim.now
        if process not in self._at:  # its life begins at its first step
            self._at[process] = self._crash_at(process, now)
            if self.mid_op and self._at[process] is not None:
                self.clients._later(self._at[process] - now, "crash_client", process)
        at = self._at[process]
        if self.mid_op or at is None or now < at:
            return False
        if self.zombies and process in self.clients._producer:
            # a takeover is a fault: none once the faults end, so that the liveness check
            # after them asks only what a cluster without them must do (takeovers faster
            # than a transaction takes abort every one of them: seed 116 of 101-200)
            if now < self.clients.sim.duration_ms:
                self._take_over(process)
            else:
                self._at[process] = None
            return False  # it goes on (a zombie, if taken over)
        self._successor(process)
        return True

    def _take_over(self, process: int) -> None:
        """``zombies``: a new producer of the slot's transactional id starts beside the
        running one (an application restarted while the old instance still runs); its
        InitProducerId fences the old one, which goes on until a request of its is refused
        as fenced, and then ends (``end_zombie``)."""
        c = self.clients
        old, new = c._producer[process], process + self.slots
        self._slot[new] = self._slot[process]
        self._at[process] = None  # a zombie's life does not end again
        old.zombie = True
        fresh = _Producer(new, c._idempotent(self._slot[process]), c.transactional)
        fresh.txn_id = old.txn_id
        c._producer[new] = fresh
        c.producers[c.producers.index(old)] = fresh
        c.sim.stats["zombie_producers"] = c.sim.stats.get("zombie_producers", 0) + 1
        c._later(1, "step", new)

    def end_zombie(self, process: int) -> None:
        """The zombie was fenced (or can no longer go on): it is closed, as an application
        closes a producer after a fatal error."""
        self._gone.add(process)
        self.clients._producer.pop(process, None)
        stats = self.clients.sim.stats
        stats["zombies_fenced"] = stats.get("zombies_fenced", 0) + 1

    def crash_now(self, process: int) -> None:
        """``mid_op``: the client is crashed wherever it stands. An operation in flight
        ends ``info`` (error ``crash``: whether it took effect is unknown); replies still
        on their way find it over."""
        c = self.clients
        if process in self._gone or c._final is not None or c.sim.now >= c.stop_at_ms:
            return
        p, con = c._producer.get(process), c._consumer.get(process)
        if p is not None and p.op is not None:
            if p.transactional:  # a transaction, or its InitProducerId
                c._txn_over(p, p.op, "info", "crash")
            else:
                c._send_done(p, "info", {"value": p.op["value"]}, "crash")
        if con is not None and con.poll is not None:
            con.poll = None
            c._record(process, "info", "poll", error="crash")
        self._successor(process)

    def _successor(self, process: int) -> None:
        c = self.clients
        slot, new = self._slot[process], process + self.slots
        c._record(process, "invoke", "crash")
        c._record(process, "info", "crash")
        c.sim.stats["client_crashes"] = c.sim.stats.get("client_crashes", 0) + 1
        self._gone.add(process)
        self._slot[new] = slot
        if process in c._producer:
            old = c._producer.pop(process)
            fresh = _Producer(new, c._idempotent(slot), c.transactional)
            fresh.txn_id = old.txn_id  # a restarted client fences its predecessor
            c._producer[new] = fresh
            c.producers[c.producers.index(old)] = fresh
        if process in c._consumer:
            old = c._consumer.pop(process)
            fresh_c = _Consumer(new)
            c._consumer[new] = fresh_c
            c.consumers[c.consumers.index(old)] = fresh_c
            if c.scripts is None:  # a new consumer is assigned before it polls
                c._assign(fresh_c)
                return
        c._later(1, "step", new)

    def _crash_at(self, process: int, now: int) -> int | None:
        if process + self.slots >= FINAL_PROCESS_BASE:
            return None
        return now + int(next(self._lives[self._slot[process]]) * 1000)
