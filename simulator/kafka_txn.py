"""The simulated Kafka clients' transactions: transactional producers and what a
read_committed consumer keeps of a fetch (the queue workload with ``transactions``, as
Jepsen's ``--txn`` and ``campaigns/queue-txn.yaml``).

A transactional producer is the simulated idempotent producer (``kafka_clients``) with a
transactional id of its own (``sim-txn-<process>``), speaking Kafka's transaction protocol
to its coordinator as librdkafka's does:

- FindCoordinator (key type 1) for the id, then InitProducerId with the id and a
  transaction timeout of ``TXN_TIMEOUT_MS``: a producer id and an epoch, which fence any
  earlier producer of the id (its open transaction is aborted);
- a transaction is 1-4 sends to random partitions (``MAX_TXN_LENGTH``), one in eight aborted
  on purpose (``ABORT_RATIO``): AddPartitionsToTxn for its partitions, each send a
  transactional batch Produced and acknowledged (retried as the idempotent producer's, same
  sequence), then EndTxn, commit or abort;
- a coordinator error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost request) makes it
  find the coordinator again; COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS are
  retried after a back-off, all until the transaction's deadline (``TXN_DEADLINE_MS``);
- a send that fails (its delivery timeout, a fenced or reset producer) makes the
  transaction abort, and the producer starts over with InitProducerId (a new epoch), as
  librdkafka's does after an abortable error;
- a zombie (a producer whose transactional id a successor took over, ``kafka_crashes``)
  never starts over: once a transaction of its ends refused, or where it has no producer
  id, it closes. That transaction
  is **fail** when the zombie never asked to commit it, or when its first EndTxn(commit)
  (none lost before it) was refused as fenced: the successor's InitProducerId aborted it.

A transaction is one operation of the history, in the shape of the Docker workload's
(``workloads.queue_workload``) and Jepsen's: ``f: txn``, invoked with ``[["send", key,
value], ...]``, completed with ``[["send", key, [offset, value]], ...]``: **ok** once
EndTxn(commit) answered NONE (with each send's offset), **fail** once EndTxn(abort) answered
NONE (its sends must never be read), **info** otherwise (its end unknown; offsets null).
"""
from __future__ import annotations

from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (AddPartitionsToTxnRequest, EndTxnRequest,
                                     InitProducerIdRequest)

from node_image import kafka_codec as kc
from node_image import messages as m
from node_image import records
from workloads.queue import ABORT_RATIO, MAX_TXN_LENGTH, VALUE_STRIDE, key_name

TXN_TIMEOUT_MS = 10_000  # transaction.timeout.ms: the coordinator aborts one open longer
TXN_DEADLINE_MS = 30_000  # a transaction not ended by then is given up: info
# The coordinator's answers that a later attempt may not get: find it again, or wait.
FIND_AGAIN = {m.NOT_COORDINATOR, m.COORDINATOR_NOT_AVAILABLE}
WAIT = {m.COORDINATOR_LOAD_IN_PROGRESS, m.CONCURRENT_TRANSACTIONS}
FENCED = {m.PRODUCER_FENCED, m.INVALID_PRODUCER_EPOCH}  # a newer producer of the id runs


def read_records(data, position: int, into: list, aborted=None) -> int:
    """Append ``[offset, value]`` of each record in the fetched ``data`` at or after
    ``position`` to ``into`` (a fetch returns whole batches, which may start before it);
    returns the position after the last batch. Control batches (transaction markers) are
    never handed out. ``aborted``: a read_committed fetch's aborted transactions (objects
    with ``producer_id`` and ``first_offset``), whose batches are skipped as Kafka's
    consumer does (``Fetcher``): a producer is aborted from the first offset the list
    gives for it up to its ABORT marker."""
    pending = sorted((a.first_offset, a.producer_id) for a in aborted or ())
    now_aborted: set[int] = set()
    for header, batch in records.iter_batches(bytes(data or b"")):
        if header.next_offset <= position:
            continue
        if aborted is not None and header.producer_id >= 0:
            while pending and pending[0][0] <= header.last_offset:
                now_aborted.add(pending.pop(0)[1])
            if header.is_control:
                rec = records.decode_records(batch)[1][0]
                if records.control_type(rec.key) == records.ABORT_MARKER:
                    now_aborted.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in now_aborted:
                position = header.next_offset
                continue
        if not header.is_control:
            for rec in records.decode_records(batch)[1]:
                if rec.offset >= position:
                    into.append([rec.offset, int(rec.value)])
        position = header.next_offset
    return position


class TxnProducers:
    """The transactional producers of :class:`~simulator.kafka_clients.SimKafkaClients`
    (a mixin: it brings the requests, the history and the producers)."""

    def _txn_later(self, p, delay_ms: int, then) -> None:
        """Go on with ``then()`` after ``delay_ms`` (a producer waits for one thing at a time;
        the event carries only its process, so the trace is the same in every process)."""
        p.resume = then
        self._later(delay_ms, "txn_resume", p.process)

    def _txn_resume(self, process: int) -> None:
        p = self._producer.get(process)
        if p is None:  # crashed meanwhile (kafka_crashes)
            return
        then, p.resume = p.resume, None
        if then is not None:
            then()

    def _txn_call(self, p, op: dict, api: int, body, error_of, done) -> None:
        """``body`` to the coordinator of ``p``'s transactional id (found first), again after
        a coordinator error or a lost request, until ``op``'s deadline; ``done(error,
        response)`` with any other answer."""
        if p.op is not op:
            return
        again = lambda: self._txn_call(p, op, api, body, error_of, done)  # noqa: E731
        if self.sim.now >= op["txn_deadline"]:
            self._txn_over(p, op, "info", f"not ended in {TXN_DEADLINE_MS} ms")
            return
        if p.coordinator is None:
            self._txn_find(p, op, again)
            return

        def on_reply(resp) -> None:
            if p.op is not op:
                return
            error = error_of(resp)
            if error in FIND_AGAIN:
                p.coordinator = None
            if error in FIND_AGAIN or error in WAIT:
                self._txn_later(p, self.BACKOFF_MS, again)
            else:
                done(error, resp)

        def on_lost() -> None:
            if p.op is op:
                p.coordinator = None
                op.setdefault("lost", set()).add(api)  # it may have been taken
                self._txn_later(p, self.BACKOFF_MS, again)
        self._request(p.process, p.coordinator, api, 1, body, on_reply, on_lost)

    def _txn_find(self, p, op: dict, then) -> None:
        body = FindCoordinatorRequest[1](key=p.txn_id, key_type=1)

        def on_reply(resp) -> None:
            if p.op is not op:
                return
            if resp.error_code == m.NONE:
                p.coordinator = resp.node_id
                then()
            else:
                self._txn_later(p, self.BACKOFF_MS, then)
        self._request(p.process, self._any_node(), kc.FIND_COORDINATOR, 1, body, on_reply,
                      lambda: p.op is op and self._txn_later(p, self.BACKOFF_MS, then))

    # ------------------------------------------------------------ a transaction

    def _txn_init(self, p) -> None:
        """InitProducerId for the transactional id: its own step, as the idempotent
        producer's."""
        op = p.op = {"init": True, "txn_deadline": self.sim.now + TXN_DEADLINE_MS}
        body = InitProducerIdRequest[1](transactional_id=p.txn_id,
                                        transaction_timeout_ms=TXN_TIMEOUT_MS)

        def done(error: int, resp) -> None:
            p.op = None
            if error == m.NONE:
                p.producer_id, p.epoch, p.sequence = resp.producer_id, resp.producer_epoch, {}
            self._next(p.process)
        self._txn_call(p, op, kc.INIT_PRODUCER_ID, body, lambda r: r.error_code, done)

    def _txn_begin(self, p) -> None:
        if p.producer_id is None and p.zombie:  # it would fence its successor: closed
            self.crashes.end_zombie(p.process)
            return
        if p.producer_id is None:
            self._txn_init(p)
            return
        sends = []
        for _ in range(self.rng.randint(1, MAX_TXN_LENGTH)):
            p.count += 1
            sends.append((self.rng.randrange(self.partitions), p.process * VALUE_STRIDE + p.count))
        abort = self.rng.random() < ABORT_RATIO
        self._record(p.process, "invoke", "txn",
                     value=[["send", key_name(part), v] for part, v in sends])
        op = p.op = {"txn": sends, "abort": abort, "offsets": [None] * len(sends), "next": 0,
                     "error": None, "invoked_at": self.sim.now,
                     "txn_deadline": self.sim.now + TXN_DEADLINE_MS}
        T = AddPartitionsToTxnRequest[1].AddPartitionsToTxnTopic
        body = AddPartitionsToTxnRequest[1](
            v3_and_below_transactional_id=p.txn_id, v3_and_below_producer_id=p.producer_id,
            v3_and_below_producer_epoch=p.epoch,
            v3_and_below_topics=[T(name=self.TOPIC,
                                   partitions=sorted({part for part, _ in sends}))])

        def error_of(resp) -> int:
            errors = [r.partition_error_code for t in resp.results_by_topic_v3_and_below
                      for r in t.results_by_partition]
            return next((e for e in errors if e not in (m.NONE, m.OPERATION_NOT_ATTEMPTED)),
                        m.NONE)

        def done(error: int, resp) -> None:
            if error == m.NONE:
                self._txn_send(p, op)
            else:  # nothing of it was written: it was never open
                self._txn_over(p, op, "fail", m.ERROR_NAMES.get(error, str(error)), reset=True)
        self._txn_call(p, op, kc.ADD_PARTITIONS_TO_TXN, body, error_of, done)

    def _txn_send(self, p, op: dict) -> None:
        """The transaction's next send (as the idempotent producer's, ``_attempt``), or its
        end."""
        if op["next"] == len(op["txn"]):
            self._txn_end(p, op)
            return
        partition, value = op["txn"][op["next"]]
        op.update(partition=partition, value=value, key=key_name(partition),
                  deadline=self.sim.now + self.DELIVERY_TIMEOUT_MS,
                  sequence=p.sequence.get(partition, 0))
        self._attempt(p)

    def _txn_sent(self, p, op: dict, offset: int | None, error: str | None) -> None:
        """A send of the transaction ended: acknowledged at ``offset``, or failed."""
        if offset is None:
            op["error"] = error
            self._txn_end(p, op)
            return
        op["offsets"][op["next"]] = offset
        op["next"] += 1
        self._txn_send(p, op)

    def _txn_end(self, p, op: dict) -> None:
        commit = not op["abort"] and op["error"] is None
        body = EndTxnRequest[1](transactional_id=p.txn_id, producer_id=p.producer_id,
                                producer_epoch=p.epoch, committed=commit)

        def done(error: int, resp) -> None:
            name = m.ERROR_NAMES.get(error, str(error))
            if error != m.NONE and p.zombie and (not commit or (
                    error in FENCED and kc.END_TXN not in op.get("lost", ()))):
                # a zombie's transaction it never asked to commit, or whose first commit
                # was refused as fenced: its successor's InitProducerId aborted it
                self._txn_over(p, op, "fail", op["error"] or name, reset=True)
            elif error != m.NONE:  # fenced, or in a state it cannot end from: unknown
                self._txn_over(p, op, "info", op["error"] or name, reset=True)
            elif commit:
                self._txn_over(p, op, "ok")
            else:
                self._txn_over(p, op, "fail", op["error"] or "aborted on purpose",
                               reset=op["error"] is not None)
        self._txn_call(p, op, kc.END_TXN, body, lambda r: r.error_code, done)

    def _txn_over(self, p, op: dict, type_: str, error: str | None = None,
                  reset: bool = False) -> None:
        """The transaction (or InitProducerId) ends; with ``reset`` (or when its end is
        unknown) the producer starts over with InitProducerId, which fences what it left."""
        if p.op is not op:
            return
        if "init" in op:
            p.op = None
            self._next(p.process)
            return
        if type_ == "ok" and op["invoked_at"] >= self.sim.duration_ms:
            self.acked_after_faults += 1
        p.op = None
        self._record(p.process, type_, "txn", error=error, value=[
            ["send", key_name(part), [op["offsets"][i] if type_ == "ok" else None, v]]
            for i, (part, v) in enumerate(op["txn"])])
        if p.zombie and (reset or type_ == "info"):
            self.crashes.end_zombie(p.process)  # fenced: closed, as after a fatal error
            return
        if reset or type_ == "info":
            p.producer_id, p.coordinator = None, None
        self._next(p.process)
