"""Invariants checked after every simulated event (after Kafka's RaftEventSimulationTest).

- SingleLeader: at most one leader per epoch, ever.
- MonotonicEpoch: a node's epoch never goes down, across restarts too (the
  epoch is persisted before it is used, so a restart must find it again).
- MonotonicHighWatermark: the high watermark of the cluster's leader (the
  leader with the highest epoch, never one of an epoch older than a leader
  seen before) never goes down, across leader changes.
- MajorityReachedHighWatermark: a majority of voters hold, durably, every
  offset below the leader's high watermark (for a crashed voter: what its
  disk kept at the crash). A voter whose disk was wiped comes back with a
  new directory id as an observer and never votes again; it counts as a
  voter that lost the data (the majority needed shrinks by one per wipe;
  the simulator wipes at most one voter per run). In a dynamic quorum (KIP-853) the
  voters are those of the leader's voter set in force below the high watermark, or of its
  newest (one change apart, the two majorities meet).
- AtMostOneUncommittedVoterSet (a dynamic quorum): the leader's log holds at most one
  VotersRecord at or past the cluster's high watermark.
- ConsistentCommittedData: every committed batch at an offset is the same
  batch (epoch, length, CRC) on every node, and the state machine's state
  after applying offset o is the same on every node whether it got there by
  replaying records or by loading a snapshot.
- LeaderNeverLoadsSnapshot: raised by the Raft core itself.
- Liveness (at the end): after the faults stop and every node is restarted,
  some register operation succeeds within the recovery window.

A violation raises SafetyViolation with the invariant's name.
"""
from __future__ import annotations

from node_image.raft.client import SafetyViolation
from node_image.raft.state import LeaderState


class Invariants:
    def __init__(self, sim) -> None:
        self.sim = sim
        self.leader_of_epoch: dict[int, int] = {}
        self.max_epoch: dict[int, int] = {}
        self.cluster_hwm = 0
        self.leader_epoch = 0  # the highest epoch a leader was seen in
        self.committed_batches: dict[int, tuple[int, int, int]] = {}
        self.checked_to: dict[int, int] = {}
        self.digest_at: dict[int, tuple[int, int]] = {}

    def on_start(self, sn) -> None:
        node = sn.node
        if sn.wiped:
            self.max_epoch.pop(sn.node_id, None)
            sn.wiped = False
        prev = self.max_epoch.get(sn.node_id, 0)
        if node.raft.epoch < prev:
            raise SafetyViolation("MonotonicEpoch",
                                  f"node {sn.node_id} restarted in epoch {node.raft.epoch} "
                                  f"after reaching epoch {prev}")
        self.checked_to[sn.node_id] = node.log.start_offset

    def on_crash(self, sn) -> None:
        self.checked_to.pop(sn.node_id, None)

    def on_applied(self, node_id: int, end_offset: int, digest: int) -> None:
        seen = self.digest_at.get(end_offset)
        if seen is None:
            self.digest_at[end_offset] = (digest, node_id)
        elif seen[0] != digest:
            raise SafetyViolation(
                "ConsistentCommittedData",
                f"node {node_id}'s state after offset {end_offset - 1} differs from node "
                f"{seen[1]}'s (digest {digest:#x} vs {seen[0]:#x})")

    def check(self, event_index: int, touched=None) -> None:
        """After an event. ``touched``: the one node the event ran (a message delivered to
        it, its timer): no other node's epoch, role or log changed, so only its own are
        checked; None (a start, crash, partition, client step): every node's."""
        sim = self.sim
        for sn in (sim.nodes.values() if touched is None else (touched,)):
            if sn.node is not None:
                self._check_node(sn)
        top = None
        for sn in sim.nodes.values():
            st = sn.node.raft.state if sn.node is not None else None
            if isinstance(st, LeaderState) and (top is None or st.epoch > top[1].epoch):
                top = (sn.node_id, st)
        # A leader of an epoch older than one already led is stale (cut off, its clock held
        # back): it can commit nothing more, and its high watermark is not the cluster's.
        if top is not None:
            self.leader_epoch = max(self.leader_epoch, top[1].epoch)
        if top is not None and top[1].epoch == self.leader_epoch \
                and top[1].high_watermark is not None:
            hwm = top[1].high_watermark
            if hwm < self.cluster_hwm:
                raise SafetyViolation("MonotonicHighWatermark",
                                      f"leader {top[0]} of epoch {top[1].epoch} has high watermark "
                                      f"{hwm}, below the earlier {self.cluster_hwm}")
            self.cluster_hwm = hwm
            self._check_majority(top[0], top[1].epoch, hwm)
        if top is not None and top[1].epoch == self.leader_epoch and sim.kraft_version:
            self._check_voter_changes(top[0])

    def _check_node(self, sn) -> None:
        raft = sn.node.raft
        epoch = raft.epoch
        if epoch < self.max_epoch.get(sn.node_id, 0):
            raise SafetyViolation("MonotonicEpoch",
                                  f"node {sn.node_id} went from epoch "
                                  f"{self.max_epoch[sn.node_id]} to {epoch}")
        self.max_epoch[sn.node_id] = epoch
        st = raft.state
        if isinstance(st, LeaderState):
            other = self.leader_of_epoch.setdefault(st.epoch, sn.node_id)
            if other != sn.node_id:
                raise SafetyViolation("SingleLeader",
                                      f"nodes {other} and {sn.node_id} both led epoch {st.epoch}")
        self._check_committed(sn)

    def _check_majority(self, leader: int, epoch: int, hwm: int) -> None:
        """A static quorum: its voters. A dynamic one (KIP-853): the voter set the leader's
        log has in force below the high watermark, or its newest one (a change in force
        from its append: one voter apart, their majorities meet)."""
        sim = self.sim
        if sim.kraft_version == 0:
            sets = [sim.voters]
        else:
            history = sim.nodes[leader].node.raft.history
            sets = [history.at(hwm - 1).keys, history.current.keys]
        results = [self._held(keys, hwm) for keys in sets]
        if not any(ok for ok, _ in results):
            raise SafetyViolation("MajorityReachedHighWatermark",
                                  f"leader {leader} of epoch {epoch} has high watermark {hwm} "
                                  f"but only voters {results[-1][1]} hold it (voter set "
                                  f"{sorted(k.node_id for k in sets[-1])})")

    def _held(self, keys, hwm: int) -> tuple[bool, list[int]]:
        """Do a majority of the voters ``keys`` hold every offset below ``hwm`` durably?"""
        sim = self.sim
        holders = []
        replaced = 0
        for key in keys:
            vid = key.node_id
            sn = sim.nodes[vid]
            if key.directory_id is not None and sim.dir_ids[vid] != key.directory_id:
                # A replaced disk is no longer that voter and can never vote again, so a
                # quorum of the others still meets every holder: it counts as lost.
                replaced += 1
                continue
            durable = sn.node.log.flushed_end_offset if sn.node is not None else sn.durable_end_at_crash
            if durable >= hwm:
                holders.append(vid)
        return len(holders) >= len(keys) // 2 + 1 - replaced, holders

    def _check_voter_changes(self, leader: int) -> None:
        """AtMostOneUncommittedVoterSet (Kafka's RaftEventSimulationTest): the leader's log
        holds at most one VotersRecord the quorum has not committed."""
        # committed: below the highest high watermark any replica has heard of (a deposed
        # leader of an older epoch may still have committed past the newest one's) or any
        # replica's snapshot covers (a restarted replica knows no high watermark, but its
        # snapshot holds only what was committed)
        committed = max([self.cluster_hwm] + [
            max(sn.node.raft.high_watermark or 0, sn.node.log.start_offset)
            for sn in self.sim.nodes.values() if sn.node is not None])
        history = self.sim.nodes[leader].node.raft.history
        pending = [offset for offset, _ in history.entries if offset >= committed]
        if len(pending) > 1:
            raise SafetyViolation("AtMostOneUncommittedVoterSet",
                                  f"leader {leader}'s log holds voter sets at offsets {pending}, "
                                  f"none committed (high watermark {committed})")

    def _check_committed(self, sn) -> None:
        node = sn.node
        start = max(self.checked_to.get(sn.node_id, 0), node.log.start_offset)
        end = node.controller.applied_offset
        if end <= start:
            return
        for e in node.log.batch_entries(start, end):
            if e.next_offset > end:
                break
            mine = (e.next_offset, e.epoch, e.crc)
            seen = self.committed_batches.setdefault(e.base_offset, mine)
            if seen != mine:
                raise SafetyViolation(
                    "ConsistentCommittedData",
                    f"node {sn.node_id} committed batch at offset {e.base_offset} as "
                    f"(next {mine[0]}, epoch {mine[1]}, crc {mine[2]:#x}); another node committed "
                    f"(next {seen[0]}, epoch {seen[1]}, crc {seen[2]:#x})")
            start = e.next_offset
        self.checked_to[sn.node_id] = start

    def check_final(self) -> None:
        """Liveness: once faults stop and every node is back, the cluster serves again."""
        sim = self.sim
        healed = [h for h in sim.history if h["type"] == "ok" and h["time"] > sim.duration_ms]
        if not healed:
            states = {i: (sn.node.raft.role, sn.node.raft.epoch) if sn.node else None
                      for i, sn in sorted(sim.nodes.items())}
            raise SafetyViolation(
                "Liveness", f"no client operation succeeded in the {sim.recovery_words()} after "
                            f"faults stopped; node states {states}")
