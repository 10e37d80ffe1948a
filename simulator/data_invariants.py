"""Data-plane invariants of the queue workload, checked after every simulated event (beside
``invariants``, which checks the metadata log's).

- HighWatermarkWithinIsr: a partition leader's high watermark is never above the log end
  offset of any member of its ISR that is up (a follower that truncated below it, or a
  leader that counted a replica it should not have), unless the freshest committed
  metadata no longer has that member in the ISR and the leader has not heard yet: without
  fsync (the elr-crash package's runs), a replica that lost power comes back short while a
  leader cut off from the controller still counts it; it is not electable, and the leader
  acknowledges nothing more until that replica has fetched it.
- AckedHeldByIsr: when a leader acknowledges an ``acks=all`` batch, every member of its
  ISR that is up holds it.
- ConsumerReadsBelowHighWatermark: a consumer's Fetch is answered with records below the
  high watermark the answer gives, and ReadCommittedBelowLastStableOffset: a
  read_committed one's below its last stable offset (no record of an open transaction).
- AckedRecordsKept (at the end): every acknowledged record is, on every replica whose log
  reaches its offset, the record that was acknowledged there.
- FinalReadDone (at the end): after the faults stop and every node is back, the final
  reader read every partition to its high watermark.
- SendsServeAfterFaults (at the end): a send made after the faults stopped was
  acknowledged (a cluster that no longer takes writes would otherwise hold every other
  invariant).

Queue campaigns fsync every batch (``flush.messages=1``), so a replica that crashed keeps
what it held; one that is down is left out until it is back. The elr-crash package's runs
do not fsync (Kafka's default), which HighWatermarkWithinIsr allows for.

A violation raises SafetyViolation with the invariant's name.
"""
from __future__ import annotations

from node_image import kafka_codec as kc
from node_image import messages as m
from node_image import records
from node_image.raft.client import SafetyViolation

from .kafka_state import FINAL_READ_AFTER_MS, TOPIC, WRITES_BACK_WITHIN_MS


class DataInvariants:
    def __init__(self, sim) -> None:
        self.sim = sim
        self.acked: dict[tuple[int, int], tuple[int, int]] = {}  # (partition, offset) -> (value, at event)

    def _partitions(self, node_id: int):
        sn = self.sim.nodes[node_id]
        if sn.node is None or sn.node.broker is None:
            return {}
        return sn.node.broker.rm.partitions

    def _end(self, node_id: int, key) -> int | None:
        part = self._partitions(node_id).get(key)
        return None if part is None else part.log.end_offset

    def _committed_isr(self, key) -> tuple | None:
        """The partition's ISR in the freshest committed metadata of a live node."""
        best = None
        for sn in self.sim.nodes.values():
            if sn.node is not None:
                p = sn.node.controller.committed.partition(*key)
                if p is not None and (best is None or p.partition_epoch > best.partition_epoch):
                    best = p
        return None if best is None else best.isr

    def check(self) -> None:
        for sn in self.sim.nodes.values():
            for key, part in self._partitions(sn.node_id).items():
                if not part.is_leader:
                    continue
                for b in part.isr:
                    end = part.log.end_offset if b == sn.node_id else self._end(b, key)
                    if end is not None and end < part.high_watermark and \
                            b in (self._committed_isr(key) or part.isr):
                        raise SafetyViolation(
                            "HighWatermarkWithinIsr",
                            f"n{sn.node_id} leads {key[0]}-{key[1]} in epoch {part.leader_epoch} "
                            f"with high watermark {part.high_watermark}, but ISR member n{b} "
                            f"ends at {end} (ISR {list(part.isr)})")

    def on_response(self, sn, resp: kc.KafkaResponse) -> None:
        """A response the broker of ``sn`` sends: an acknowledged Produce, and what a Fetch
        gives a consumer, are checked."""
        if resp.request.api_key == kc.FETCH and resp.request.body.replica_id < 0:
            self._check_consumer_fetch(sn, resp)
        if resp.request.api_key != kc.PRODUCE or resp.request.body.acks != -1:
            return
        batches = {(td.name, pd.index): pd.records for td in resp.request.body.topic_data
                   for pd in td.partition_data}
        for t in resp.body.responses:
            for r in t.partition_responses:
                if r.error_code != m.NONE:
                    continue
                key = (t.name, r.index)
                part = self._partitions(sn.node_id).get(key)
                header, recs = records.decode_records(bytes(batches[key]))
                last = r.base_offset + header.last_offset_delta
                for b in part.isr if part is not None else ():
                    end = part.log.end_offset if b == sn.node_id else self._end(b, key)
                    if end is not None and end <= last:
                        raise SafetyViolation(
                            "AckedHeldByIsr",
                            f"n{sn.node_id} acknowledged offsets {r.base_offset}-{last} of "
                            f"{key[0]}-{key[1]} (acks=all) while ISR member n{b} ends at {end} "
                            f"(ISR {list(part.isr)})")
                if t.name == TOPIC:
                    for i, rec in enumerate(recs):
                        self.acked[(r.index, r.base_offset + i)] = (int(rec.value),
                                                                     self.sim.events)

    def _check_consumer_fetch(self, sn, resp: kc.KafkaResponse) -> None:
        committed = resp.request.body.isolation_level == 1
        for t in resp.body.responses:
            for pd in t.partitions:
                if pd.error_code != m.NONE or not pd.records:
                    continue
                last = max(h.last_offset for h, _ in records.iter_batches(bytes(pd.records)))
                if last >= pd.high_watermark:
                    raise SafetyViolation(
                        "ConsumerReadsBelowHighWatermark",
                        f"n{sn.node_id} gave a consumer {t.topic}-{pd.partition_index} up to "
                        f"offset {last}, at or above its high watermark {pd.high_watermark}")
                if committed and last >= pd.last_stable_offset:
                    raise SafetyViolation(
                        "ReadCommittedBelowLastStableOffset",
                        f"n{sn.node_id} gave a read_committed consumer {t.topic}-"
                        f"{pd.partition_index} up to offset {last}, at or above its last stable "
                        f"offset {pd.last_stable_offset} (a transaction open there may abort)")

    def check_final(self) -> None:
        clients = self.sim.workload
        if not any(h["f"] == "final-poll" and h["type"] == "ok" for h in clients.history):
            raise SafetyViolation(
                "FinalReadDone", f"the final reader did not read every partition in the "
                                 f"{self.sim.recovery_words()} after the faults stopped (it "
                                 f"starts {FINAL_READ_AFTER_MS} ms after, once no send is in "
                                 f"progress)")
        held: dict[tuple[int, int], dict[int, int]] = {}  # (partition, offset) -> node -> value
        for sn in self.sim.nodes.values():
            for (topic, partition), part in self._partitions(sn.node_id).items():
                if topic != TOPIC:
                    continue
                log = part.log
                for e in log.batch_entries(log.start_offset, log.end_offset):
                    header, recs = records.decode_records(log.read_entry(e))
                    for rec in () if header.is_control else recs:
                        held.setdefault((partition, rec.offset), {})[sn.node_id] = int(rec.value)
        for (topic, partition), hw in self._leader_high_watermarks().items():
            for offset in range(hw):
                values = held.get((partition, offset), {})
                if len(set(values.values())) > 1:
                    raise SafetyViolation(
                        "ReplicasAgreeBelowHighWatermark",
                        f"{topic}-{partition} offset {offset}, below the leader's high "
                        f"watermark {hw}, holds different records on different replicas "
                        f"({', '.join(f'n{n}: {v}' for n, v in sorted(values.items()))})")
        for (partition, offset), (value, event) in sorted(self.acked.items()):
            for node_id, there in sorted(held.get((partition, offset), {}).items()):
                if there != value:
                    raise SafetyViolation(
                        "AckedRecordsKept",
                        f"{TOPIC}-{partition} offset {offset} was acknowledged holding {value} "
                        f"(event {event}); n{node_id} holds {there} there at the end")

    def check_liveness(self) -> None:
        """Liveness, once every fault has ended and the recovery time has passed (the faults
        here all heal: DESIGN section 9): the KRaft quorum has a leader, and every partition
        of the topic, as the freshest live node's committed metadata has it, a leader and its
        full ISR again, and some send made after the faults ended was acknowledged. What is
        stuck is named."""
        live = [sn for sn in self.sim.nodes.values() if sn.node is not None]
        if not any(sn.node.raft.is_leader() for sn in live):
            raise SafetyViolation("Liveness", f"no node leads the KRaft quorum "
                                              f"{self.sim.recovery_words()} after the faults ended")
        best: dict[int, tuple] = {}
        for sn in live:
            topic = sn.node.controller.committed.topics.get(TOPIC)
            for pid, p in (topic.partitions.items() if topic is not None else ()):
                if pid not in best or p.partition_epoch > best[pid][0]:
                    best[pid] = (p.partition_epoch, p)
        stuck = [f"{TOPIC}-{pid}: " + ("no leader" if p.leader < 0 else
                                       f"ISR {sorted(p.isr)} lacks replicas "
                                       f"{sorted(set(p.replicas) - set(p.isr))}")
                 for pid, (_, p) in sorted(best.items())
                 if p.leader < 0 or set(p.isr) != set(p.replicas)]
        if stuck:
            raise SafetyViolation("Liveness", f"{self.sim.recovery_words()} after the faults "
                                              f"ended: {'; '.join(stuck)}")
        if not self.sim.workload.acked_after_faults:
            raise SafetyViolation(
                "SendsServeAfterFaults", f"no send made in the {WRITES_BACK_WITHIN_MS} ms "
                                         f"after the faults stopped was acknowledged")

    def _leader_high_watermarks(self) -> dict[tuple[str, int], int]:
        """Each partition's high watermark on its leader of the highest epoch."""
        best: dict[tuple[str, int], tuple[int, int]] = {}
        for sn in self.sim.nodes.values():
            for key, part in self._partitions(sn.node_id).items():
                if key[0] == TOPIC and part.is_leader and \
                        part.leader_epoch > best.get(key, (-1, 0))[0]:
                    best[key] = (part.leader_epoch, part.high_watermark)
        return {k: hw for k, (_, hw) in best.items()}
