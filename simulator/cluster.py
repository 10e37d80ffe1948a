"""The deterministic simulator: one seed, one trace.

Theory of operation
-------------------
A :class:`Simulation` runs N voters (and the observers the seed draws) as
:class:`~node_image.node.Node` cores on :class:`~simulator.disk.SimDisk`
disks, with register clients and a nemesis, in simulated milliseconds. A
single priority queue orders every event (message delivery, node timer,
client step, fault); ties break by insertion order. Every random choice
comes from a ``random.Random`` derived from the seed and a purpose name, so
the same seed and arguments always give the same trace, and the trace hash
proves it.

As in TigerBeetle's simulator the seed also draws the fault *options* (swarm
testing): how lossy, duplicating and slow the network is, how often
partitions (one-way too) and power-loss crashes come, whether crashes tear
unsynced writes, whether a disk is wiped, clock drift per node, segment and
snapshot sizes. They are printed so a failure can be read.

After every event the invariants of ``simulator.invariants`` are
checked; a node core raising :class:`SafetyViolation` counts too. The
register history (invoke/ok/fail/info per client op) is returned for the
linearizability checker.
"""
from __future__ import annotations

import hashlib
import heapq
import random
from dataclasses import dataclass, field

from node_image import messages as m
from node_image.config import NodeConfig, RaftConfig
from node_image.node import Node
from node_image.raft.client import SafetyViolation
from node_image.raft.state import CandidateState, LeaderState, UnattachedState
from node_image.storage import ReplicaKey, format_storage, new_directory_id
from nemesis.faults import grudge

from .disk import SimDisk
from .invariants import Invariants

CLUSTER_ID = "chaoskraft-sim"
SHAPES = {"isolate": "isolate-one", "halves": "halves", "ring": "majorities-ring",
          "bridge": "bridge"}
LOG_DIR = "/data"
# A simulated node's wall clock: this instant plus its own drifting clock's reading.
WALL_EPOCH_MS = 1_800_000_000_000


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
        )

    def describe(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.__dict__.items())


@dataclass
class SimResult:
    seed: int
    ok: bool
    invariant: str | None
    detail: str | None
    event_index: int | None
    trace_hash: str
    events: int
    sim_ms: int
    history: list[dict]
    options: SimOptions
    stats: dict = field(default_factory=dict)


class _SimNode:
    def __init__(self, node_id: int, voter: bool) -> None:
        self.node_id = node_id
        self.voter = voter
        self.disk = SimDisk()
        self.node: Node | None = None
        self.incarnation = 0
        self.timer_at: int | None = None
        self.clock_offset = 0
        self.clock_ppm = 0
        self.durable_end_at_crash = 0
        self.wiped = False
        self.log_lines: list[str] = []

    def local(self, t: int) -> int:
        return self.clock_offset + t * (1_000_000 + self.clock_ppm) // 1_000_000

    def to_sim(self, local: int) -> int:
        return -((-(local - self.clock_offset) * 1_000_000) // (1_000_000 + self.clock_ppm))


class _Client:
    def __init__(self, cid: int) -> None:
        self.cid = cid
        self.pending: dict | None = None
        self.leader_hint: int | None = None
        self.last_value: dict[str, int | None] = {}


class Simulation:
    RECOVERY_MS = 20_000
    CLIENT_TIMEOUT_MS = 5_000

    def __init__(self, seed: int, nodes: int = 5, duration_s: float = 600,
                 bugs: frozenset[str] = frozenset(), options: SimOptions | None = None) -> None:
        if nodes < 1:
            raise ValueError("--nodes must be at least 1")
        self.seed = seed
        self.options = options or SimOptions.draw(seed)
        self.duration_ms = int(duration_s * 1000)
        self.bugs = bugs
        self.now = 0
        self._queue: list = []
        self._seq = 0
        self._hash = hashlib.blake2b(digest_size=16)
        self.events = 0
        self.net_rng = random.Random(f"{seed}-net")
        self.fault_rng = random.Random(f"{seed}-faults")
        self.client_rng = random.Random(f"{seed}-clients")
        self.disk_rng = random.Random(f"{seed}-disk")
        clock_rng = random.Random(f"{seed}-clocks")
        n_obs = self.options.observers
        self.voter_ids = list(range(1, nodes + 1))
        self.nodes = {i: _SimNode(i, i <= nodes) for i in range(1, nodes + n_obs + 1)}
        for sn in self.nodes.values():
            if self.options.clock_drift_ppm:
                sn.clock_ppm = clock_rng.randint(-self.options.clock_drift_ppm,
                                                 self.options.clock_drift_ppm)
            sn.clock_offset = clock_rng.randrange(1_000_000_000)
        dir_rng = random.Random(f"{seed}-dirs")
        self.dir_ids = {i: new_directory_id(dir_rng) for i in self.nodes}
        self.voters = tuple(ReplicaKey(i, self.dir_ids[i]) for i in self.voter_ids)
        for i, sn in self.nodes.items():
            format_storage(sn.disk, LOG_DIR, CLUSTER_ID, i, self.voters, self.dir_ids[i])
        self.blocked: set[tuple[int, int]] = set()
        self.clients = [_Client(c) for c in range(self.options.clients)]
        self.history: list[dict] = []
        self.invariants = Invariants(self)
        self._next_value = 1
        self._request_id = 0
        self.voter_wipes = 0
        self.stats = {"crashes": 0, "partitions": 0, "wipes": 0, "delivered": 0, "dropped": 0}
        self.failure: tuple[str, str] | None = None
        self._elections_seen: set[tuple[int, int]] = set()
        self.healed = False

    # ----------------------------------------------------------------- queue

    def _push(self, t: int, kind: str, *data) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (t, self._seq, kind, data))

    def _trace(self, *parts) -> None:
        self._hash.update(("|".join(map(str, parts)) + "\n").encode())

    # ----------------------------------------------------------------- nodes

    def _config(self, node_id: int) -> NodeConfig:
        o = self.options
        return NodeConfig(
            node_id=node_id, voters={v: ("sim", 0) for v in self.voter_ids}, log_dir=LOG_DIR,
            roles=("controller",) if node_id in self.voter_ids else ("broker",),
            raft=RaftConfig(fetch_max_bytes=o.fetch_max_bytes, snapshot_chunk_bytes=4096),
            segment_bytes=o.segment_bytes, snapshot_max_bytes=o.snapshot_bytes,
            idle_interval_ms=500, bugs=self.bugs)

    def _start(self, sn: _SimNode) -> None:
        sn.incarnation += 1
        rng = random.Random(f"{self.seed}-node-{sn.node_id}-{sn.incarnation}")

        def on_event(msg: str, sn=sn) -> None:
            sn.log_lines.append(f"{self.now} {msg}")
            if len(sn.log_lines) > 200:
                del sn.log_lines[:100]
        sn.node = Node(self._config(sn.node_id), sn.disk, rng, sn.local(self.now), on_event,
                       wall_clock=lambda sn=sn: WALL_EPOCH_MS + sn.local(self.now))
        sn.node.controller.register_publisher(
            lambda delta, image, nid=sn.node_id: self.invariants.on_applied(
                nid, image.offset, image.digest()))
        self.invariants.on_start(sn)
        self._after_node(sn)

    def _crash(self, sn: _SimNode, wipe: bool) -> None:
        if sn.node is None:
            return
        sn.durable_end_at_crash = sn.node.log.flushed_end_offset
        sn.node = None
        sn.timer_at = None
        sn.disk.crash(self.disk_rng, self.options.torn_write_prob)
        self.stats["crashes"] += 1
        if wipe:
            sn.disk.wipe()
            self.dir_ids[sn.node_id] = new_directory_id(self.disk_rng)
            format_storage(sn.disk, LOG_DIR, CLUSTER_ID, sn.node_id, self.voters,
                           self.dir_ids[sn.node_id])
            sn.wiped = True
            sn.durable_end_at_crash = 0
            self.stats["wipes"] += 1
            if sn.voter:
                self.voter_wipes += 1
        self.invariants.on_crash(sn)

    def _after_node(self, sn: _SimNode) -> None:
        node = sn.node
        if node is None:
            return
        st = node.raft.state
        if (self.options.election_crash_prob and isinstance(st, (CandidateState, UnattachedState))
                and self.now < self.duration_ms):
            voted = isinstance(st, CandidateState) or (
                st.voted_key is not None and st.voted_key.node_id != sn.node_id)
            if voted and (sn.node_id, st.epoch) not in self._elections_seen:
                self._elections_seen.add((sn.node_id, st.epoch))
                if self.fault_rng.random() < self.options.election_crash_prob:
                    # A targeted fault: restart a voter right after it voted, while the
                    # election is still going on (what a persisted vote is for).
                    self._push(self.now + 1 + self.fault_rng.randrange(5), "quick_crash",
                               sn.node_id)
        for dest, msg in node.ready():
            self._send(sn.node_id, dest, msg)
        deadline = max(sn.to_sim(node.next_deadline_ms()), self.now + 1)
        if sn.timer_at is None or deadline != sn.timer_at:
            sn.timer_at = deadline
            self._push(deadline, "timer", sn.node_id, sn.incarnation)

    def _send(self, src, dest, msg) -> None:
        o = self.options
        client = isinstance(dest, tuple) or isinstance(src, tuple)
        copies = 1
        if not client and not self.healed:
            if self.net_rng.random() < o.drop_rate:
                self.stats["dropped"] += 1
                return
            # Raft RPCs must survive duplicates; a forwarded client request, like the
            # client's own, travels on a connection that does not duplicate (TCP).
            if self.net_rng.random() < o.duplicate_rate and not isinstance(
                    msg, (m.ForwardRegisterRequest, m.ForwardRegisterResponse)):
                copies = 2
        for _ in range(copies):
            delay = 1 + self.net_rng.randrange(o.max_delay_ms)
            self._push(self.now + delay, "deliver", src, dest, msg)

    # -------------------------------------------------------------- clients

    def _client_step(self, c: _Client) -> None:
        if self.now >= self.duration_ms + self.RECOVERY_MS - self.CLIENT_TIMEOUT_MS:
            return
        r = self.client_rng
        key = f"k{r.randrange(self.options.keys)}"
        f = r.choice(["read", "read", "write", "cas"])
        value = expected = None
        if f == "write":
            value = self._next_value
            self._next_value += 1
        elif f == "cas":
            expected = c.last_value.get(key)
            if expected is None:
                f, value = "write", self._next_value
            else:
                value = self._next_value
            self._next_value += 1
        nodes = sorted(self.nodes)
        target = c.leader_hint if (c.leader_hint is not None and r.random() < 0.8) \
            else nodes[r.randrange(len(nodes))]
        self._request_id += 1
        req = m.RegisterRequest(self._request_id, f, key, value, expected)
        hval = [expected, value] if f == "cas" else value
        c.pending = {"request_id": self._request_id, "f": f, "key": key, "value": hval,
                     "node": target}
        self.history.append({"index": len(self.history), "time": self.now, "process": c.cid,
                             "type": "invoke", "f": f, "key": key, "value": hval,
                             "node": target})
        self._send(("client", c.cid), target, req)
        self._push(self.now + self.CLIENT_TIMEOUT_MS, "client_timeout", c.cid, self._request_id)

    def _complete(self, c: _Client, typ: str, value, error: str | None = None) -> None:
        p = c.pending
        c.pending = None
        self.history.append({"index": len(self.history), "time": self.now, "process": c.cid,
                             "type": typ, "f": p["f"], "key": p["key"], "value": value,
                             "node": p["node"], "error": error})
        self._push(self.now + 1 + self.client_rng.randrange(self.options.op_interval_ms),
                   "client", c.cid)

    def _client_reply(self, cid: int, resp: m.RegisterResponse) -> None:
        c = self.clients[cid]
        if c.pending is None or c.pending["request_id"] != resp.request_id:
            return
        c.leader_hint = resp.leader_id if resp.leader_id >= 0 else None
        p = c.pending
        if resp.outcome == "ok":
            value = resp.value if p["f"] == "read" else p["value"]
            if p["f"] == "read":
                c.last_value[p["key"]] = resp.value
            elif p["f"] == "write":
                c.last_value[p["key"]] = p["value"]
            else:
                c.last_value[p["key"]] = p["value"][1]
            self._complete(c, "ok", value)
        elif resp.outcome == "fail":
            if p["f"] == "cas" and resp.error == m.NONE:
                c.last_value.pop(p["key"], None)
            self._complete(c, "fail", p["value"], m.ERROR_NAMES.get(resp.error, str(resp.error)))
        else:
            self._complete(c, "info", p["value"], m.ERROR_NAMES.get(resp.error, str(resp.error)))

    # --------------------------------------------------------------- nemesis

    def _schedule_faults(self) -> None:
        o = self.options
        if o.partition_mean_ms:
            self._push(int(self.fault_rng.expovariate(1 / o.partition_mean_ms)), "partition")
        if o.crash_mean_ms:
            self._push(int(self.fault_rng.expovariate(1 / o.crash_mean_ms)), "crash")

    def _partition(self) -> None:
        o = self.options
        r = self.fault_rng
        ids = sorted(self.nodes)
        shape = r.choice(["isolate", "halves", "one-way", "ring", "bridge"])
        if len(ids) < 3:
            shape = "isolate"
        if shape == "one-way":  # asymmetric: iptables grudges have no such shape
            victim = r.choice(ids)
            if r.random() < 0.5:
                blocked = {(victim, x) for x in ids if x != victim}  # it cannot send
            else:
                blocked = {(x, victim) for x in ids if x != victim}  # it cannot hear
        else:  # the Docker nemesis's shapes (nemesis.faults.grudge): x hears nothing from g[x]
            g = grudge(SHAPES[shape], ids, r)
            blocked = {(src, dst) for dst, srcs in g.items() for src in srcs}
        self.blocked = blocked
        self.stats["partitions"] += 1
        self._trace(self.now, "partition", shape, sorted(blocked))
        self._push(self.now + 1 + r.randrange(o.partition_length_ms), "heal")
        if self.now < self.duration_ms:
            self._push(self.now + o.partition_length_ms + int(r.expovariate(1 / o.partition_mean_ms)),
                       "partition")

    def _crash_fault(self) -> None:
        o = self.options
        r = self.fault_rng
        alive = [i for i in sorted(self.nodes) if self.nodes[i].node is not None]
        if alive:
            count = 1 if r.random() < 0.7 else max(1, len(self.voter_ids) // 2)
            for victim in r.sample(alive, min(count, len(alive))):
                sn = self.nodes[victim]
                wipe = r.random() < o.wipe_prob and (not sn.voter or self.voter_wipes == 0)
                self._trace(self.now, "crash", victim, wipe)
                self._crash(sn, wipe)
                self._push(self.now + 1 + r.randrange(o.down_ms), "restart", victim)
        if self.now < self.duration_ms:
            self._push(self.now + int(r.expovariate(1 / o.crash_mean_ms)) + 1, "crash")

    # ------------------------------------------------------------------- run

    def run(self) -> SimResult:
        try:
            self._run()
        except SafetyViolation as exc:
            self.failure = (exc.invariant, exc.detail)
        ok = self.failure is None
        return SimResult(self.seed, ok, None if ok else self.failure[0],
                         None if ok else self.failure[1], None if ok else self.events,
                         self._hash.hexdigest(), self.events, self.now, self.history,
                         self.options, dict(self.stats))

    def _run(self) -> None:
        for sn in self.nodes.values():
            self._start(sn)
        for c in self.clients:
            self._push(1 + self.client_rng.randrange(1000), "client", c.cid)
        self._schedule_faults()
        self._push(self.duration_ms, "end_faults")
        end = self.duration_ms + self.RECOVERY_MS
        while self._queue:
            t, _, kind, data = heapq.heappop(self._queue)
            if t > end:
                break
            self.now = t
            happened = self._dispatch(kind, data)
            if happened is False:
                continue
            self.events += 1
            # a node an event ran alone: only its own invariants can have changed
            self.invariants.check(self.events, None if happened is True else happened)
        self.invariants.check_final()

    def _dispatch(self, kind: str, data) -> "bool | _SimNode":
        """False: nothing happened; the node the event ran (a delivery, its timer); True:
        something that may touch every node (a start, crash, partition, client step)."""
        if kind == "deliver":
            src, dest, msg = data
            if isinstance(dest, tuple):
                self._trace(self.now, "reply", src, dest[1], type(msg).__name__, msg.outcome)
                self._client_reply(dest[1], msg)
                return True
            sn = self.nodes[dest]
            if sn.node is None or (not isinstance(src, tuple) and (src, dest) in self.blocked):
                self.stats["dropped"] += 1
                return False
            self.stats["delivered"] += 1
            self._trace(self.now, "deliver", src, dest, type(msg).__name__)
            sn.node.handle(src, msg, sn.local(self.now))
            self._after_node(sn)
            return sn
        if kind == "timer":
            node_id, incarnation = data
            sn = self.nodes[node_id]
            if sn.node is None or sn.incarnation != incarnation or sn.timer_at != self.now:
                return False
            sn.timer_at = None
            self._trace(self.now, "timer", node_id)
            sn.node.poll(sn.local(self.now))
            self._after_node(sn)
            return sn
        if kind == "client":
            self._client_step(self.clients[data[0]])
            return True
        if kind == "client_timeout":
            cid, request_id = data
            c = self.clients[cid]
            if c.pending is not None and c.pending["request_id"] == request_id:
                self._complete(c, "info", c.pending["value"], "timeout")
                return True
            return False
        if kind == "partition":
            if self.now < self.duration_ms:
                self._partition()
            return True
        if kind == "heal":
            self.blocked = set()
            self._trace(self.now, "heal")
            return True
        if kind == "crash":
            if self.now < self.duration_ms:
                self._crash_fault()
            return True
        if kind == "quick_crash":
            sn = self.nodes[data[0]]
            if sn.node is not None:
                self._trace(self.now, "quick_crash", sn.node_id)
                self._crash(sn, wipe=False)
                self._push(self.now + 1 + self.fault_rng.randrange(20), "restart", sn.node_id)
            return True
        if kind == "restart":
            sn = self.nodes[data[0]]
            if sn.node is None:
                self._trace(self.now, "restart", sn.node_id)
                self._start(sn)
            return True
        if kind == "end_faults":
            # Heal everything, the lossy network included, and see the cluster recover.
            self.healed = True
            self.blocked = set()
            self._trace(self.now, "end_faults")
            for sn in self.nodes.values():
                if sn.node is None:
                    self._start(sn)
            return True
        raise AssertionError(f"unknown event kind {kind}")

    # -------------------------------------------------------------- queries

    def leader(self) -> tuple[int, LeaderState] | None:
        best = None
        for sn in self.nodes.values():
            if sn.node is not None and isinstance(sn.node.raft.state, LeaderState):
                st = sn.node.raft.state
                if best is None or st.epoch > best[1].epoch:
                    best = (sn.node_id, st)
        return best
