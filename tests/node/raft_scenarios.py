"""A small interpreter for Raft scenario scripts (etcd-io/raft's data-driven tests).

A script (``tests/testdata/raft/*.txt``) is a sequence of commands, each followed by
``----`` and the output it must produce, then a blank line::

    add-nodes 3
    ----
    n1: Unattached e0 voters [1, 2, 3]
    ...

The nodes are ``KafkaRaftClient`` cores on simulated disks; nothing runs unless a
command says so. Messages a node sends wait in the network until ``deliver`` or
``stabilize`` hands them over; time moves only with ``tick``. After every command the
output lists, in order, what happened: messages delivered (``n1 -> n2 ...``) and sent
(``n1 => n2 ...``, queued), state changes (``n1: Unattached e0 -> Prospective e0``),
the node's own events (``n1 says: ...``) and records handed to the state machine
(``n1 commits ...``).

Commands:
  add-nodes N [observers=K] [bugs=a,b] [nodirs] [autojoin]   voters 1..N, observers
                          N+1..N+K (nodirs: voter keys without directory ids, as
                          controller.quorum.voters formats a static quorum; autojoin:
                          controller.quorum.auto.join.enable on every node)
  campaign N              node N's election (or fetch) timer expires now
  tick ms=T               time moves T ms; every live node polls
  deliver [from=A] [to=B] [type=T] [drop]   hand over (or lose) the matching
                          queued messages, in the order they were sent
  stabilize               deliver everything, answers included, until the
                          network is empty (time does not move)
  partition A B | C ...   cut the groups apart (messages between them are lost)
  heal                    undo every partition
  append N [count=K]      the state machine on node N appends K records
  resign N                node N, leader, hands over (EndQuorumEpoch)
  crash N                 node N stops; what it did not fsync is lost
  restart N               node N starts again from its disk
  snapshot N              node N snapshots at its committed offset
  status                  every node: role, epoch, leader, high watermark, log
  clock N ms=T            node N's wall clock steps T ms (negative: back); its Raft
                          timers run on it, never backward, as Kafka's do
  lease N                 does node N hold a leader lease now (``lease_holds``)
  add-voter N [to=L]      AddRaftVoter of node N to the leader (or L); its answer shows as
                          ``nL answers admin ...``
  remove-voter N [to=L]   RemoveRaftVoter of node N
  update-voter N [to=L] [host=H] [port=P] [epoch=E] [min=A] [max=B] [dir=D]
                          UpdateRaftVoter of node N as an admin would send it (by default
                          its own directory id, the leader's epoch, kraft.version [0, 1])
  restart N endpoint=H:P  ... with N's own CONTROLLER endpoint H:P (a voter whose endpoint
                          in the voter set differs asks the leader to update it)
  endpoints               every node's voter set endpoints
  upgrade-kraft N [level=L] [validate]   UpdateFeatures' kraft.version L (default 1) at
                          node N (``upgrade_kraft_version``); what it answers
  voters                  every node's voter set, and whether it is the bootstrap one

``add-nodes N observers=K kraft=1`` formats a dynamic quorum (KIP-853): the voters with the
bootstrap voter set 1..N, the observers as controllers that will join it (no initial
controllers).

Each node's Raft clock is its wall clock: ``WALL_MS`` plus the scenario's time plus
the steps ``clock`` gave it.
"""
from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import datadriven
from node_image import messages as m
from node_image import records
from node_image.config import RaftConfig
from node_image.log import UnifiedLog
from node_image.outbox import Outbox
from node_image.raft.client import KafkaRaftClient, SafetyViolation
from simulator.disk import SimDisk
from node_image.storage import (METADATA_DIR, QuorumStateStore, ReplicaKey, format_storage,
                                new_directory_id, read_meta_properties)

LOG_DIR = "/data"
WALL_MS = 1_800_000_000_000
CLUSTER = "raft-scenarios"
CONFIG = RaftConfig(election_timeout_ms=1000, election_backoff_max_ms=1000,
                    fetch_timeout_ms=2000, request_timeout_ms=2000, retry_backoff_ms=20,
                    fetch_max_wait_ms=500)
# Fields shown per message type (correlation ids, cluster ids and directory ids are noise).
SHOWN = {
    m.VoteRequest: ("pre_vote", "candidate_epoch", "last_offset_epoch", "last_offset"),
    m.VoteResponse: ("pre_vote", "leader_epoch", "leader_id", "vote_granted", "error"),
    m.BeginQuorumEpochRequest: ("leader_epoch",),
    m.BeginQuorumEpochResponse: ("leader_epoch", "error"),
    m.EndQuorumEpochRequest: ("leader_epoch", "preferred_successors"),
    m.EndQuorumEpochResponse: ("leader_epoch", "error"),
    m.FetchRequest: ("epoch", "fetch_offset", "last_fetched_epoch"),
    m.FetchResponse: ("leader_epoch", "leader_id", "high_watermark", "records", "error",
                      "diverging_epoch", "diverging_end_offset", "snapshot_offset",
                      "snapshot_epoch"),
    m.FetchSnapshotRequest: ("epoch", "snapshot_offset", "position"),
    m.FetchSnapshotResponse: ("leader_epoch", "snapshot_offset", "size", "position", "error"),
    m.RaftVoterResponse: ("error", "message"),
    m.UpdateRaftVoterRequest: ("current_leader_epoch", "voter_id", "host", "port"),
    m.AddRaftVoterRequest: ("voter_id", "host", "port"),
    m.UpdateRaftVoterResponse: ("error", "message", "leader_id", "leader_epoch"),
}
DEFAULTS = {"error": 0, "message": None, "diverging_epoch": -1, "diverging_end_offset": -1,
            "snapshot_offset": -1, "snapshot_epoch": -1}


def show(msg) -> str:
    parts = []
    for name in SHOWN[type(msg)]:
        v = getattr(msg, name)
        if name == "records":
            n = sum(h.last_offset_delta + 1 for h, _ in records.iter_batches(v)) if v else 0
            if n:
                parts.append(f"records={n}")
            continue
        if DEFAULTS.get(name) == v:
            continue
        if name == "error":
            v = ERRORS.get(v, v)
        datadriven.add_field(parts, name, v)
    return datadriven.shown(msg, parts)


ERRORS = m.ERROR_NAMES


class _Listener:
    def __init__(self, net: "Net", node_id: int) -> None:
        self.net, self.node_id = net, node_id

    def handle_commit(self, batch) -> None:
        self.net.out.append(f"n{self.node_id} commits {batch.base_offset}-{batch.last_offset} "
                            f"e{batch.epoch}")

    def handle_load_snapshot(self, snapshot_id, entries) -> None:
        self.net.out.append(f"n{self.node_id} loads snapshot {snapshot_id.offset}-"
                            f"{snapshot_id.epoch}")

    def handle_leader_change(self, leader) -> None:
        who = f"n{leader.leader_id}" if leader.leader_id is not None else "none"
        self.net.out.append(f"n{self.node_id} hears leader {who} e{leader.epoch}")


class Net:
    def __init__(self) -> None:
        self.now = 0
        self.nodes: dict[int, KafkaRaftClient | None] = {}
        self.disks: dict[int, SimDisk] = {}
        self.voters: tuple[ReplicaKey, ...] = ()
        self.queue: list[tuple[int, int, object]] = []  # (from, to, message)
        self.cut: set[tuple[int, int]] = set()
        self.out: list[str] = []
        self.bugs: frozenset[str] = frozenset()
        self.skew: dict[int, int] = {}  # clock steps per node, ms
        self.endpoints: dict[int, tuple[str, int]] = {}  # a node's own endpoint (restart)
        self.config = CONFIG
        self._appended = 0

    # ---------------------------------------------------------------- plumbing

    def _describe(self, c: KafkaRaftClient) -> tuple:
        return (c.state.name, c.epoch, c.leader_id())

    def _state(self, c) -> str:
        role, epoch, leader = self._describe(c)
        return f"{role} e{epoch}" + (f" leader n{leader}" if leader is not None and
                                     role == "Follower" else "")

    def _run(self, node_id: int, action) -> None:
        c = self.nodes[node_id]
        before = self._state(c)
        action(c)
        c.poll(self.now)  # as the node's runtime does after every input: send what is due
        after = self._state(c)
        if before != after:
            self.out.append(f"n{node_id}: {before} -> {after}")
        self._collect(node_id)

    def _collect(self, node_id: int) -> None:
        c = self.nodes[node_id]
        for dest, msg in c.outbox.take():
            if dest == "admin":
                self.out.append(f"n{node_id} answers admin {show(msg)}")
                continue
            self.queue.append((node_id, dest, msg))
            self.out.append(f"n{node_id} => n{dest} {show(msg)}")

    def _make(self, node_id: int) -> KafkaRaftClient:
        disk = self.disks[node_id]
        meta = read_meta_properties(disk, LOG_DIR, node_id)
        metadata_dir = f"{LOG_DIR}/{METADATA_DIR}"
        store = QuorumStateStore(disk, metadata_dir)
        log = UnifiedLog(disk, metadata_dir, 1 << 20,
                         lambda msg, i=node_id: self.out.append(f"n{i} says: {msg}"))
        election = store.read()
        c = KafkaRaftClient(node_id=node_id, directory_id=meta.directory_id, cluster_id=CLUSTER,
                            voters=election.voters, kraft_version=election.kraft_version,
                            bootstrap_servers=tuple(sorted(self.disks)) if election.kraft_version
                            else (), log=log, store=store, config=self.config,
                            rng=random.Random(f"raft-{node_id}"), outbox=Outbox(),
                            now_ms=self.now, bugs=self.bugs,
                            on_event=lambda msg, i=node_id: self.out.append(f"n{i} says: {msg}"),
                            clock=lambda i=node_id: self.wall(i),
                            local_endpoint=self.endpoints.get(node_id))
        c.register(_Listener(self, node_id))
        return c

    def wall(self, node_id: int) -> int:
        return WALL_MS + self.now + self.skew.get(node_id, 0)

    def _node(self, arg: str) -> int:
        n = int(arg.lstrip("n"))
        if self.nodes.get(n) is None:
            raise ValueError(f"node {n} is not running")
        return n

    # ---------------------------------------------------------------- commands

    def add_nodes(self, args, kw) -> None:
        n, observers = int(args[0]), int(kw.get("observers", 0))
        kraft = int(kw.get("kraft", 0))
        self.bugs = frozenset(b for b in kw.get("bugs", "").split(",") if b) | self.bugs
        rng = random.Random("raft-scenarios")
        dirs = {i: new_directory_id(rng) for i in range(1, n + observers + 1)}
        self.dirs = dirs
        if "autojoin" in args:  # controller.quorum.auto.join.enable on every node
            self.config = dataclasses.replace(CONFIG, auto_join=True)
        # "nodirs": the voter keys without directory ids, as controller.quorum.voters gives
        self.voters = tuple(ReplicaKey(i, None if "nodirs" in args else dirs[i])
                            for i in range(1, n + 1))
        for i in range(1, n + observers + 1):
            self.disks[i] = SimDisk()
        for i in range(1, n + observers + 1):
            # kraft=1: a dynamic quorum; its observers are controllers formatted to join it
            # (no initial controllers: they learn the voter set from the log)
            format_storage(self.disks[i], LOG_DIR, CLUSTER, i,
                           self.voters if i <= n or not kraft else (), dirs[i],
                           kraft_version=kraft)
            self.nodes[i] = self._make(i)
            self._collect(i)
            kind = "voter" if i <= n else "observer"
            self.out.append(f"n{i}: {self._state(self.nodes[i])} ({kind})")

    def campaign(self, args, kw) -> None:
        n = self._node(args[0])

        def expire(c):
            s = c.state
            for attr in ("election_deadline_ms", "fetch_deadline_ms"):
                if hasattr(s, attr):
                    setattr(s, attr, self.wall(n))
            c.poll(self.now)
        self._run(n, expire)

    def tick(self, args, kw) -> None:
        self.now += int(kw.get("ms", 0))
        self.out.append(f"time {self.now} ms")
        for i, c in self.nodes.items():
            if c is not None:
                self._run(i, lambda c: c.poll(self.now))

    def _blocked(self, src: int, dest: int) -> bool:
        return (src, dest) in self.cut or self.nodes.get(dest) is None

    def deliver(self, args, kw, everything: bool = False) -> int:
        want_from = int(kw["from"].lstrip("n")) if "from" in kw else None
        want_to = int(kw["to"].lstrip("n")) if "to" in kw else None
        want_type = kw.get("type")
        drop = "drop" in args
        batch, keep = [], []
        for item in self.queue:
            src, dest, msg = item
            if ((want_from is None or src == want_from) and (want_to is None or dest == want_to)
                    and (want_type is None or type(msg).__name__ == want_type)):
                batch.append(item)
            else:
                keep.append(item)
        self.queue = keep
        for src, dest, msg in batch:
            if drop or self._blocked(src, dest):
                self.out.append(f"n{src} -x n{dest} {show(msg)}")
                continue
            self.out.append(f"n{src} -> n{dest} {show(msg)}")

            self._run(dest, lambda c, src=src, msg=msg: c.handle(src, msg, self.now))
        return len(batch)

    def stabilize(self, args, kw) -> None:
        rounds = 0
        while self.queue:
            self.deliver([], {})
            rounds += 1
            if rounds > 100:
                raise AssertionError("the network never went quiet")

    def partition(self, args, kw) -> None:
        groups = [[int(x.lstrip("n")) for x in g.split()] for g in " ".join(args).split("|")]
        for a in groups:
            for b in groups:
                if a is not b:
                    self.cut |= {(x, y) for x in a for y in b}
        self.out.append("partitioned " + " | ".join(" ".join(f"n{x}" for x in g) for g in groups))

    def heal(self, args, kw) -> None:
        self.cut.clear()
        self.out.append("healed")

    def append(self, args, kw) -> None:
        n = self._node(args[0])
        count = int(kw.get("count", 1))
        entries = []
        for _ in range(count):
            self._appended += 1
            entries.append((None, f"v{self._appended}".encode()))

        def go(c):
            try:
                last = c.append(entries, self.now)
                self.out.append(f"n{n} appended {count} records, last offset {last}")
            except Exception as exc:  # noqa: BLE001 - the refusal is the output
                self.out.append(f"n{n} refuses: {type(exc).__name__}: {exc}")
        self._run(n, go)

    def resign(self, args, kw) -> None:
        n = self._node(args[0])
        self._run(n, lambda c: c.resign(self.now))

    def crash(self, args, kw) -> None:
        n = self._node(args[0])
        self.disks[n].crash(random.Random(f"crash-{n}-{self.now}"))
        self.nodes[n] = None
        self.out.append(f"n{n} crashed")

    def restart(self, args, kw) -> None:
        n = int(args[0].lstrip("n"))
        if "endpoint" in kw:
            host, port = kw["endpoint"].rsplit(":", 1)
            self.endpoints[n] = (host, int(port))
        self.nodes[n] = self._make(n)
        self.out.append(f"n{n} restarted: {self._state(self.nodes[n])}")
        self._collect(n)

    def snapshot(self, args, kw) -> None:
        n = self._node(args[0])
        c = self.nodes[n]
        snap = c.create_snapshot(c.committed_offset(), [], self.now)
        self.out.append(f"n{n} snapshot {snap.offset}-{snap.epoch}, log start {c.log.start_offset}")

    def status(self, args, kw) -> None:
        for i, c in self.nodes.items():
            if c is None:
                self.out.append(f"n{i}: down")
                continue
            hwm = c.high_watermark
            self.out.append(f"n{i}: {self._state(c)} hwm {hwm if hwm is not None else '-'} "
                            f"log {c.log.start_offset}-{c.log.end_offset} "
                            f"last epoch {c.log.last_fetched_epoch} "
                            f"voted {c.persisted.voted_key.node_id if c.persisted.voted_key else '-'}")

    def clock(self, args, kw) -> None:
        n = self._node(args[0])
        step = int(kw["ms"])
        self.skew[n] = self.skew.get(n, 0) + step
        self.out.append(f"n{n} clock {step:+d} ms")

    def lease(self, args, kw) -> None:
        n = self._node(args[0])
        holds = self.nodes[n].lease_holds(self.now)
        self.out.append(f"n{n} lease {'holds' if holds else 'does not hold'}")

    def _leader(self, kw) -> int:
        if "to" in kw:
            return self._node(kw["to"])
        leaders = [i for i, c in self.nodes.items() if c is not None and c.is_leader()]
        if not leaders:
            raise ValueError("no leader to send the request to")
        return leaders[0]

    def add_voter(self, args, kw) -> None:
        n = int(args[0].lstrip("n"))
        to = self._leader(kw)
        req = m.AddRaftVoterRequest(1, CLUSTER, n, self.dirs[n], f"10.0.0.{n}", 9093)
        self.out.append(f"admin -> n{to} add voter n{n}")
        self._run(to, lambda c: c.handle("admin", req, self.now))

    def remove_voter(self, args, kw) -> None:
        n = int(args[0].lstrip("n"))
        to = self._leader(kw)
        req = m.RemoveRaftVoterRequest(1, CLUSTER, n, self.dirs[n])
        self.out.append(f"admin -> n{to} remove voter n{n}")
        self._run(to, lambda c: c.handle("admin", req, self.now))

    def update_voter(self, args, kw) -> None:
        n = int(args[0].lstrip("n"))
        to = self._leader(kw)
        req = m.UpdateRaftVoterRequest(
            1, CLUSTER, int(kw.get("epoch", self.nodes[to].epoch)), n, kw.get("dir", self.dirs[n]),
            kw.get("host", f"10.0.1.{n}"), int(kw.get("port", 9093)), int(kw.get("min", 0)),
            int(kw.get("max", 1)))
        self.out.append(f"admin -> n{to} update voter n{n}")
        self._run(to, lambda c: c.handle("admin", req, self.now))

    def upgrade_kraft(self, args, kw) -> None:
        n = self._node(args[0])
        level = int(kw.get("level", 1))
        out = []
        self._run(n, lambda c: out.append(c.upgrade_kraft_version(level, "validate" in args,
                                                                  self.now)))
        error, message = out[0]
        self.out.append(f"n{n} kraft.version {level}: {ERRORS.get(error, error)}"
                        + (f" ({message})" if message else ""))

    def endpoints_(self, args, kw) -> None:
        for i, c in self.nodes.items():
            if c is None:
                self.out.append(f"n{i}: down")
                continue
            eps = c.history.current.endpoints
            self.out.append(f"n{i}: " + (", ".join(f"n{nid}={h}:{p}" for nid, h, p in eps)
                                         or "no endpoints"))

    def voters(self, args, kw) -> None:
        for i, c in self.nodes.items():
            if c is None:
                self.out.append(f"n{i}: down")
                continue
            latest = c.history.latest_offset
            self.out.append(f"n{i}: voters {sorted(c.voters)} "
                            f"({'voter' if c.is_voter else 'observer'}; "
                            f"{'bootstrap set' if latest < 0 else f'record at {latest}'})")

    COMMANDS = {"clock": clock, "add-voter": add_voter, "remove-voter": remove_voter,
                "update-voter": update_voter, "endpoints": endpoints_,
                "upgrade-kraft": upgrade_kraft,
                "voters": voters, "lease": lease, "add-nodes": add_nodes, "campaign": campaign, "tick": tick, "deliver": deliver,
                "stabilize": stabilize, "partition": partition, "heal": heal, "append": append,
                "resign": resign, "crash": crash, "restart": restart, "snapshot": snapshot,
                "status": status}

    def run(self, line: str) -> str:
        cmd, args, kw = datadriven.words(line)
        if cmd not in self.COMMANDS:
            raise ValueError(f"unknown command {cmd!r} (known: {', '.join(self.COMMANDS)})")
        self.out = []
        try:
            self.COMMANDS[cmd](self, args, kw)
        except SafetyViolation as v:
            self.out.append(f"SafetyViolation {v.invariant}: {v.detail}")
        return "\n".join(self.out)


def run_script(path: Path, bugs: frozenset[str] = frozenset()) -> list[tuple[int, str, str, str]]:
    """(line, command, expected, got) for every block."""
    def make() -> Net:
        net = Net()
        net.bugs = bugs
        return net
    return datadriven.run_script(path, make)


def rewrite(path: Path) -> None:
    """Write the outputs the code gives now into the script (after reading every one)."""
    datadriven.rewrite(path, Net)
