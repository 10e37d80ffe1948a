"""The queue workload's simulated consumers: assign and poll through Fetch (read_committed with\nthe aborted transactions hidden), and the final read of every partition to its end."""
from __future__ import annotations

from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest

from node_image import kafka_codec as kc
from node_image import messages as m
from workloads.queue import REASSIGN_EVERY, key_name

from .kafka_txn import read_records
from .kafka_state import (BACKOFF_MS, FETCH_MAX_WAIT_MS, FINAL_STUCK_MS, STABLE_END_MS, TOPIC,
                          WRITES_BACK_WITHIN_MS, _Consumer)


class SimConsumers:
    """Mixed into :class:`SimKafkaClients`."""

    def _consume(self, c: _Consumer, reassign: bool = True) -> None:
        if reassign and self.rng.random() < 1 / REASSIGN_EVERY:
            self._assign(c)
            return
        self._record(c.process, "invoke", "poll")
        by_leader: dict[int, list[int]] = {}
        for partition in range(self.partitions):
            leader = self.leaders.get(partition)
            if leader is None:
                self._refresh_metadata()
                continue
            by_leader.setdefault(leader[0], []).append(partition)
        c.poll = {"out": set(), "msgs": {}}
        for node, parts in sorted(by_leader.items()):
            self._fetch(c, node, parts, c.poll)
        if not c.poll["out"]:
            self._poll_done(c)

    def _assign(self, c: _Consumer) -> None:
        """Assigned every partition again: read each from offset 0 anew."""
        self._record(c.process, "invoke", "assign")
        c.position = {}
        self._record(c.process, "ok", "assign", value=list(map(key_name, range(self.partitions))))
        self._next(c.process)

    def _fetch_body(self, positions: dict[int, int], max_wait_ms: int, partition_max_bytes: int):
        """A consumer's Fetch v11 of ``positions`` (partition -> offset), each at the leader
        epoch known, read_committed in transactions mode."""
        FT = FetchRequest[11].FetchTopic
        return FetchRequest[11](
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
            isolation_level=self.isolation_level, session_id=0, session_epoch=-1,
            topics=[FT(topic=TOPIC, partitions=[FT.FetchPartition(
                partition=p, current_leader_epoch=self.leaders[p][1], fetch_offset=offset,
                log_start_offset=-1, partition_max_bytes=partition_max_bytes)
                for p, offset in positions.items()])],
            forgotten_topics_data=[], rack_id="")

    def _aborted(self, pd):
        """What ``read_records`` skips of a fetched partition: its aborted transactions
        when read_committed, else nothing."""
        return (pd.aborted_transactions or []) if self.transactional else None

    def _fetch(self, c: _Consumer, node: int, parts: list[int], poll: dict) -> None:
        body = self._fetch_body({p: c.position.get(p, 0) for p in parts}, FETCH_MAX_WAIT_MS,
                                1 << 16)
        poll["out"].add(node)

        def on_reply(resp) -> None:
            if c.poll is not poll:
                return
            for t in resp.responses:
                for pd in t.partitions:
                    if pd.error_code == m.OFFSET_OUT_OF_RANGE:
                        c.position[pd.partition_index] = max(pd.log_start_offset, 0)
                    elif pd.error_code != m.NONE:
                        self._refresh_metadata()
                    else:
                        self._take(c, pd.partition_index, pd.records, poll,
                                   self._aborted(pd))
            self._fetch_done(c, node, poll)

        self._request(c.process, node, kc.FETCH, 11, body, on_reply,
                      lambda: self._fetch_done(c, node, poll))

    def _take(self, c: _Consumer, partition: int, data, poll: dict, aborted) -> None:
        got = poll["msgs"].setdefault(key_name(partition), [])
        c.position[partition] = read_records(data, c.position.get(partition, 0), got, aborted)
        if not got:
            del poll["msgs"][key_name(partition)]

    def _fetch_done(self, c: _Consumer, node: int, poll: dict) -> None:
        if c.poll is not poll:
            return
        poll["out"].discard(node)
        if not poll["out"]:
            self._poll_done(c)

    def _poll_done(self, c: _Consumer) -> None:
        poll, c.poll = c.poll, None
        self._record(c.process, "ok", "poll", value=poll["msgs"])
        self._next(c.process)

    # the final reader

    def _final_read(self) -> None:
        """Read every partition from 0 to its high watermark, once the cluster is back.
        Read_committed (transactions mode), a partition whose last stable offset stays
        below its high watermark (an open transaction) for FINAL_STUCK_MS after the final
        read began, when every producer has stopped and the coordinators abort what is left
        open after TXN_TIMEOUT_MS, is read only that far: what lies beyond it no consumer
        can read (``final_stuck`` says where)."""
        if self._final is None:
            back = self.acked_after_faults or \
                self.sim.now >= self.sim.duration_ms + WRITES_BACK_WITHIN_MS
            if not back or any(p.op is not None for p in self.producers):
                self._later(BACKOFF_MS, "final_read")
                return
            self._record(self.final_process, "invoke", "final-poll")
            self._final = {"end": {}, "position": {}, "msgs": {}, "confirm": {}, "done": set(),
                           "started": self.sim.now}
            self._survey()
            return
        f = self._final
        # A partition is read once its end (the high watermark) was read to and a second
        # ListOffsets a moment later says the same: a new leader's high watermark can be
        # below its predecessor's until its followers fetch again, as in Kafka.
        missing = [p for p in range(self.partitions) if p not in f["done"]]
        for p in missing:
            if p in f["end"] and f["position"].get(p, 0) >= f["end"][p] and \
                    p not in f["confirm"]:
                f["confirm"][p] = f["end"].pop(p)
                self._later(STABLE_END_MS, "final_read")
                return
        if not missing:
            self._record(self.final_process, "ok", "final-poll",
                         value={key_name(p): f["msgs"].get(p, []) for p in range(self.partitions)})
            self._final = {"done": True}
            return
        p = missing[0]
        leader = self.leaders.get(p)
        if leader is None:
            self._refresh_metadata()
            self._later(BACKOFF_MS, "final_read")
            return
        if p not in f["end"]:
            self._list_end(p, leader)
            return
        body = self._fetch_body({p: f["position"].get(p, 0)}, 0, 1 << 20)

        def on_reply(resp) -> None:
            pd = resp.responses[0].partitions[0]
            before = f["position"].get(p, 0)
            if pd.error_code != m.NONE:
                self._refresh_metadata()
            else:
                f["position"][p] = read_records(pd.records, before, f["msgs"].setdefault(p, []),
                                                self._aborted(pd))
            if pd.error_code != m.NONE or f["position"][p] > before:
                self._later(1, "final_read")
            elif self.sim.now >= f["started"] + FINAL_STUCK_MS:
                self.final_stuck[p] = (before, f["end"][p])
                self.sim.stats["final_stuck_partitions"] = len(self.final_stuck)
                f["done"].add(p)
                self._later(1, "final_read")
            else:  # read_committed, below an open transaction: wait for its end
                self._later(BACKOFF_MS, "final_read")
        self._request(self.final_process, leader[0], kc.FETCH, 11, body, on_reply,
                      lambda: self._later(BACKOFF_MS, "final_read"))

    def _survey(self) -> None:
        """Metadata from every node, then the final read: the leader of each partition's
        highest epoch any node knows, not a deposed one that has not heard of its successor
        (it would answer with its own, older high watermark)."""
        out = set(self.sim.nodes)

        def done(node: int) -> None:
            out.discard(node)
            if not out:
                self._later(1, "final_read")
        for node in sorted(self.sim.nodes):
            self._refresh_metadata(node, lambda node=node: done(node))

    def _list_end(self, p: int, leader: tuple[int, int]) -> None:
        LT = ListOffsetsRequest[5].ListOffsetsTopic
        body = ListOffsetsRequest[5](replica_id=-1, isolation_level=0, topics=[LT(
            name=TOPIC, partitions=[LT.ListOffsetsPartition(
                partition_index=p, current_leader_epoch=leader[1], timestamp=-1)])])

        def on_reply(resp) -> None:
            pd = resp.topics[0].partitions[0]
            f = self._final
            if pd.error_code == m.NONE:
                if f["confirm"].get(p) == pd.offset:
                    f["done"].add(p)
                else:
                    f["confirm"].pop(p, None)
                    f["end"][p] = pd.offset
            else:
                self._refresh_metadata()
            self._later(1 if pd.error_code == m.NONE else BACKOFF_MS, "final_read")
        self._request(self.final_process, leader[0], kc.LIST_OFFSETS, 5, body, on_reply,
                      lambda: self._later(BACKOFF_MS, "final_read"))
