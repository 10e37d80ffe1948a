"""Transactions without I/O: a partition's open and aborted transactions and last stable offset,
and the transaction coordinator's states, markers, fencing, timeouts and failover."""
import dataclasses
import random

import pytest

from node_image import messages as m
from node_image import records
from node_image.broker import transaction_coordinator as tc
from node_image.broker.partition import Partition
from node_image.broker.replica_manager import ReplicaManager
from node_image.config import BrokerConfig
from node_image.metadata_image import PartitionRegistration
from node_image.outbox import Outbox
from simulator.disk import SimDisk
from test_group_coordinator import image

PID, OTHER = 7000, 7001


def txn_batch(pid, epoch, seq, n=2):
    return records.build_batch(0, 0, [(None, b"v")] * n, 1, transactional=True, producer_id=pid,
                               producer_epoch=epoch, base_sequence=seq)


def leader(disk):
    part = Partition(1, "t", 0, disk, "/data", 1 << 20, 0, lambda msg: None)
    part.apply_registration(PartitionRegistration((1,), (1,), 1, 0, 0), 0)
    return part


def test_open_transactions_bound_the_lso_and_aborts_are_listed_for_read_committed():
    disk = SimDisk()
    part = leader(disk)
    part.append_as_leader(records.build_batch(0, 0, [(None, b"plain")], 1), 1)  # offset 0
    part.append_as_leader(txn_batch(PID, 0, 0), 1)  # 1-2, open
    part.append_as_leader(txn_batch(OTHER, 0, 0), 1)  # 3-4, open
    part.high_watermark = part.log.end_offset
    assert part.last_stable_offset == 1, "the oldest open transaction starts at 1"
    part.append_as_leader(records.end_txn_marker(PID, 0, False, 0, 1), 1)  # 5: ABORT
    assert part.last_stable_offset == 3
    part.append_as_leader(records.end_txn_marker(OTHER, 0, True, 0, 1), 1)  # 6: COMMIT
    part.high_watermark = part.log.end_offset
    assert part.last_stable_offset == part.high_watermark == 7
    [aborted] = part.producers.aborted_between(0, 7)
    assert (aborted.producer_id, aborted.first_offset, aborted.last_offset) == (PID, 1, 5)
    assert part.producers.aborted_between(6, 7) == [], "a fetch past the abort gets none"
    # the state comes back from the log alone (a restart, or a follower becoming leader)
    again = leader(disk)
    assert again.producers.aborted == part.producers.aborted
    assert again.producers.ongoing == {} and again.last_stable_offset == min(7, again.high_watermark)


def test_a_fencing_marker_makes_the_old_epoch_invalid():
    part = leader(SimDisk())
    part.append_as_leader(txn_batch(PID, 0, 0), 1)
    # the coordinator aborted the transaction with a bumped epoch (a new producer, a timeout)
    part.append_as_leader(records.end_txn_marker(PID, 1, False, 0, 1), 1)
    header = records.check_batch(txn_batch(PID, 0, 2))
    assert part.producers.check(header) == (m.INVALID_PRODUCER_EPOCH, None)
    assert part.producers.check(records.check_batch(txn_batch(PID, 1, 0)))[0] == m.NONE


def test_a_batch_repeating_one_of_an_ended_transaction_is_no_duplicate():
    """librdkafka aborts a transaction by purging its in-flight batch and, without bumping its
    epoch, sends the next transaction's first batch with the purged one's sequence. Were it
    taken for a duplicate, the client would be told its new record is at the aborted one's
    offset, and commit a transaction whose record is not in the log."""
    for disk in (SimDisk(), SimDisk()):
        part = leader(disk)
        part.append_as_leader(txn_batch(PID, 0, 0), 1)  # 0-1: committed
        part.append_as_leader(records.end_txn_marker(PID, 0, True, 0, 1), 1)  # 2
        part.append_as_leader(txn_batch(PID, 0, 2), 1)  # 3-4: aborted
        within = records.check_batch(txn_batch(PID, 0, 2))
        error, dup = part.producers.check(within)
        assert error == m.NONE and dup.first_offset == 3, "a retry within its transaction"
        part.append_as_leader(records.end_txn_marker(PID, 0, False, 0, 1), 1)  # 5: ABORT
        # the same sequence again, now in the next transaction: refused, not acknowledged at 3
        assert part.producers.check(within) == (m.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
        assert part.producers.check(records.check_batch(txn_batch(PID, 0, 4)))[0] == m.NONE
        # a follower or a restarted leader rebuilds the same state from the log
        again = leader(disk)
        assert again.producers.check(within) == (m.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    # an idempotent producer without transactions keeps its duplicates
    part = leader(SimDisk())
    plain = records.build_batch(0, 0, [(None, b"v")], 1, producer_id=OTHER, producer_epoch=0,
                                base_sequence=0)
    part.append_as_leader(plain, 1)
    assert part.producers.check(records.check_batch(plain))[1].first_offset == 0


def test_a_late_marker_of_a_deposed_coordinator_cannot_end_the_next_transaction():
    """A WriteTxnMarkers request held up by a network partition may arrive after the next
    coordinator finished that transaction and the producer began another: appended, it
    would end (and, ABORT, hide) the new one. Kafka refuses markers from an older
    coordinator epoch than the producer's last marker here, and for an older producer epoch."""
    disk = SimDisk()
    part = leader(disk)
    part.append_as_leader(txn_batch(PID, 0, 0), 1)
    part.append_as_leader(records.end_txn_marker(PID, 0, False, 1, 1), 1)  # coordinator epoch 1
    part.append_as_leader(txn_batch(PID, 0, 2), 1)  # the next transaction
    assert part.producers.check_marker(PID, 0, 0) == m.TRANSACTION_COORDINATOR_FENCED
    assert part.producers.check_marker(PID, 0, 1) == m.NONE
    part.append_as_leader(records.end_txn_marker(PID, 1, False, 2, 1), 1)  # fenced: epoch 1
    assert part.producers.check_marker(PID, 0, 2) == m.INVALID_PRODUCER_EPOCH
    again = leader(disk)
    assert again.producers.coordinator_epochs == {PID: 2}, "rebuilt from the markers"


class Txns:
    """A transaction coordinator on node 1 whose ``__transaction_state`` and topic ``t`` it leads
    (replication factor 1: writes commit at once) and the markers it asked for."""

    def __init__(self, disk=None, bugs=frozenset()):
        self.disk = disk or SimDisk()
        self.events = []
        self.sent = []
        self.wall = [1_000_000]
        corr = iter(range(1, 10**6))
        options = BrokerConfig(transaction_topic_partitions=1)
        self.rm = ReplicaManager(1, "/data", self.disk, options, Outbox(), lambda: next(corr),
                                 self.events.append)
        self.rm.apply_image(image(topics=((tc.TXN_TOPIC, 1), ("t", 2))), None, 0)
        pids = iter(range(PID, PID + 100))
        self.c = tc.TransactionCoordinator(self.rm, options, self.events.append,
                                           lambda: self.wall[0], lambda: next(pids),
                                           lambda leader, req: self.sent.append((leader, req)),
                                           lambda: next(corr), bugs)
        self.c.poll(0, True)

    def init(self, now=0, txn="tx", expected=None):
        out = []
        self.c.init_producer_id(txn, 60_000, now, lambda *a: out.append(a), expected)
        return out[0]

    def add(self, pid, epoch, parts=(("t", 0), ("t", 1)), now=0):
        out = []
        self.c.add_partitions("tx", pid, epoch, list(parts), now, out.append)
        return out[0]

    def end(self, pid, epoch, commit, now=0):
        out = []
        self.c.end_txn("tx", pid, epoch, commit, now, out.append)
        return out[0]

    def ack_markers(self, now=0, error=m.NONE):
        sent, self.sent = self.sent, []
        for _, req in sent:
            self.c.handle_markers_response(m.WriteTxnMarkersResponse(
                req.correlation_id, tuple((t, p, error) for t, p in req.partitions)), now)
        return sent

    def state(self):
        return tc.NAMES[self.c.txns["tx"].state]


def test_commit_writes_markers_to_every_partition_then_completes():
    t = Txns()
    assert t.init() == (m.NONE, PID, 0)
    assert t.add(PID, 0) == {("t", 0): m.NONE, ("t", 1): m.NONE}
    assert t.state() == "Ongoing"
    assert t.add(PID, 1) == {("t", 0): m.INVALID_PRODUCER_EPOCH, ("t", 1): m.INVALID_PRODUCER_EPOCH}
    assert t.add(PID + 5, 0)[("t", 0)] == m.INVALID_PRODUCER_ID_MAPPING
    assert t.end(PID, 0, True) == m.NONE
    assert t.state() == "PrepareCommit"
    [(lead, req)] = t.sent
    assert (lead, req.commit, req.producer_epoch, set(req.partitions)) == (
        1, True, 0, {("t", 0), ("t", 1)})
    assert t.end(PID, 0, True) == m.CONCURRENT_TRANSACTIONS, "a retry while markers are written"
    assert t.end(PID, 0, False) == m.INVALID_TXN_STATE
    t.ack_markers()
    assert t.state() == "CompleteCommit"
    assert t.end(PID, 0, True) == m.NONE, "a retry after completion"
    assert t.init() == (m.NONE, PID, 1), "the next producer of the id gets the next epoch"


def test_a_failed_write_leaves_the_state_as_the_log_has_it():
    """Kafka's pending transitions: a producer told its AddPartitionsToTxn failed retries it,
    and the retry must be written (not answered from a state the log never got)."""
    t = Txns()
    t.init()
    write = t.c.log.write
    t.c.log.write = lambda pid, entries, now, done, **kw: done(m.COORDINATOR_NOT_AVAILABLE)
    assert t.add(PID, 0) == {("t", 0): m.COORDINATOR_NOT_AVAILABLE,
                             ("t", 1): m.COORDINATOR_NOT_AVAILABLE}
    assert t.state() == "Empty" and t.c.txns["tx"].partitions == set()
    assert t.init() == (m.COORDINATOR_NOT_AVAILABLE, -1, -1)
    assert t.c.txns["tx"].producer_epoch == 0, "the epoch moves only once written"
    t.c.log.write = write
    assert t.add(PID, 0) == {("t", 0): m.NONE, ("t", 1): m.NONE}
    again = Txns(disk=t.disk)  # and the next coordinator reads what was answered
    assert again.state() == "Ongoing" and again.c.txns["tx"].partitions == {("t", 0), ("t", 1)}


def test_failed_markers_are_sent_again():
    t = Txns()
    t.init()
    t.add(PID, 0)
    t.end(PID, 0, False)
    t.ack_markers(now=1, error=m.NOT_LEADER_OR_FOLLOWER)
    assert t.state() == "PrepareAbort"
    t.c.poll(tc.MARKER_RETRY_MS, False)
    assert t.c.next_deadline_ms() is not None
    t.c.poll(1 + tc.MARKER_RETRY_MS, False)
    [(_, again)] = t.sent
    assert not again.commit
    t.ack_markers(now=200)
    assert t.state() == "CompleteAbort"


def test_a_new_producer_fences_an_open_transaction_and_waits_for_its_abort():
    t = Txns()
    t.init()
    t.add(PID, 0)
    assert t.init() == (m.CONCURRENT_TRANSACTIONS, -1, -1)
    [(_, req)] = t.sent
    assert (req.commit, req.producer_epoch) == (False, 1), "aborted with a bumped epoch"
    assert t.add(PID, 0)[("t", 0)] in (m.INVALID_PRODUCER_EPOCH, m.CONCURRENT_TRANSACTIONS)
    t.ack_markers()
    assert t.init() == (m.NONE, PID, 2)
    assert any("aborted: a new producer" in e for e in t.events)


def test_kip360_the_holder_of_the_epoch_bumps_it_and_keeps_its_producer():
    """After an abortable error a producer aborts and asks InitProducerId with the id and
    epoch it holds (KIP-360): it gets the next epoch of the same id, and a retry of that
    request whose answer was lost gets the same answer, while anyone holding an older epoch
    is fenced."""
    t = Txns()
    assert t.init() == (m.NONE, PID, 0)
    t.add(PID, 0)
    assert t.end(PID, 0, False) == m.NONE
    t.ack_markers()
    assert t.init(expected=(PID, 0)) == (m.NONE, PID, 1), "bumped, same producer id"
    assert t.init(expected=(PID, 0)) == (m.NONE, PID, 1), "a retry: the same epoch again"
    assert t.init(expected=(PID, 1)) == (m.NONE, PID, 2)
    assert t.init(expected=(PID, 0)) == (m.PRODUCER_FENCED, -1, -1), "two epochs behind"
    assert t.init(expected=(PID + 9, 2)) == (m.PRODUCER_FENCED, -1, -1), "another producer id"
    assert t.add(PID, 2) == {("t", 0): m.NONE, ("t", 1): m.NONE}, "the bumped epoch is usable"
    # a bump asked for while the transaction is open fences it (Kafka's order: abort first)
    assert t.init(expected=(PID, 2)) == (m.CONCURRENT_TRANSACTIONS, -1, -1)
    t.ack_markers()
    assert t.state() == "CompleteAbort"
    assert t.init(expected=(PID, 2)) == (m.PRODUCER_FENCED, -1, -1), \
        "the abort's fencing epoch is no bump its holder asked for"
    assert t.init() == (m.NONE, PID, 4), "a new producer always gets the next epoch"


def test_kip360_an_exhausted_epoch_moves_to_a_new_producer_id():
    t = Txns()
    t.init()
    t.c.txns["tx"].producer_epoch = 32766  # as after 32766 bumps
    assert t.init(expected=(PID, 32766)) == (m.NONE, PID + 1, 0)
    assert t.init(expected=(PID, 32766)) == (m.NONE, PID + 1, 0), \
        "a retry under the old id and its exhausted epoch gets the new id again"
    assert t.init(expected=(PID + 1, 0)) == (m.NONE, PID + 1, 1)


def test_a_transaction_open_past_its_timeout_is_aborted():
    t = Txns()
    t.init()
    t.add(PID, 0)
    t.c.poll(2_000, False)
    assert t.state() == "Ongoing"
    t.wall[0] += 60_001
    t.c.poll(4_000, False)
    assert t.state() == "PrepareAbort" and t.c.txns["tx"].producer_epoch == 1
    t.ack_markers(now=4_001)
    assert t.end(PID, 0, True) == m.INVALID_PRODUCER_EPOCH, "the old producer learns it is fenced"


def test_a_new_coordinator_finishes_a_prepared_commit_from_the_log():
    t = Txns()
    t.init()
    t.add(PID, 0)
    t.end(PID, 0, True)
    t.rm.checkpoint_hws()
    again = Txns(disk=t.disk)  # the coordinator died before the markers were acknowledged
    assert again.state() == "PrepareCommit"
    again.c.poll(1, False)
    [(_, req)] = again.sent
    assert req.commit and set(req.partitions) == {("t", 0), ("t", 1)}
    again.ack_markers(now=2)
    assert again.state() == "CompleteCommit"


def test_requests_for_ids_elsewhere_and_bad_timeouts_are_refused():
    t = Txns()
    out = []
    t.c.init_producer_id("tx", 0, 0, lambda *a: out.append(a))
    t.c.init_producer_id("tx", tc.MAX_TIMEOUT_MS + 1, 0, lambda *a: out.append(a))
    t.c.init_producer_id("", 1000, 0, lambda *a: out.append(a))
    assert [o[0] for o in out] == [m.INVALID_TRANSACTION_TIMEOUT] * 2 + [m.INVALID_REQUEST]
    t.rm.apply_image(image(leader=2, epoch=1, topics=((tc.TXN_TOPIC, 1), ("t", 2))), None, 5)
    t.c.poll(5, True)
    assert t.init(now=6) == (m.NOT_COORDINATOR, -1, -1)


def test_the_state_table_and_the_record_format():
    meta = tc.TxnMetadata("tx", 0, PID, 3, 60_000, tc.ONGOING, {("t", 1), ("u", 0)}, 77)
    with pytest.raises(tc.TxnStateError, match="Ongoing -> CompleteCommit"):
        meta.transition(tc.COMPLETE_COMMIT)
    txn_id, back = tc.read_txn(tc.txn_key("tx"), tc.txn_value(meta, 99), 0)
    assert txn_id == "tx" and (back.producer_id, back.producer_epoch, back.timeout_ms, back.state,
                               back.partitions, back.start_ms) == (
        PID, 3, 60_000, tc.ONGOING, {("t", 1), ("u", 0)}, 77)
    assert tc.read_txn(tc.txn_key("tx"), None, 0) == ("tx", None)
    with pytest.raises(Exception, match="truncated"):
        tc.read_txn(tc.txn_key("tx"), tc.txn_value(meta, 99)[:10], 0)
    rng = random.Random(3)
    for _ in range(50):  # any truncation is an error naming the record, never a crash
        cut = rng.randrange(2, len(tc.txn_value(meta, 99)))
        with pytest.raises(Exception, match="truncated|unknown"):
            tc.read_txn(tc.txn_key("tx"), tc.txn_value(meta, 99)[:cut], 0)


# ------------------------------------------------------------ the planted transaction bugs

def _fetch(part, bugs, committed=True, events=None, fetch_offset=0, seen=None):
    """KafkaApis._read on one partition: (records' end offset, aborted list); the events it
    reports go to ``events``; ``seen``: the broker's memory of what it reported."""
    from types import MethodType, SimpleNamespace

    from node_image.broker.kafka_apis import KafkaApis
    apis = SimpleNamespace(rm=SimpleNamespace(leader_partition=lambda t, p: part),
                           bugs=frozenset(bugs), _aborted_seen=set() if seen is None else seen,
                           _on_event=(events if events is not None else []).append)
    apis._aborted_fetched = MethodType(KafkaApis._aborted_fetched, apis)
    apis._leader_at = MethodType(KafkaApis._leader_at, apis)
    p = SimpleNamespace(partition=0, current_leader_epoch=-1, fetch_offset=fetch_offset)
    error, hw, lso, _, data, aborted, diverging = KafkaApis._read(apis, "t", p, 11, 1 << 20,
                                                                  True, committed)
    assert diverging is None
    assert error == m.NONE
    ends = [h.next_offset for h, _ in records.iter_batches(data)]
    return max(ends, default=0), aborted


def test_fetch_bugs_serve_past_the_lso_or_hide_the_aborted():
    part = leader(SimDisk())
    part.append_as_leader(txn_batch(PID, 0, 0), 1)  # 0-1
    part.append_as_leader(records.end_txn_marker(PID, 0, False, 0, 1), 1)  # 2: ABORT
    part.append_as_leader(txn_batch(OTHER, 0, 0), 1)  # 3-4, still open
    part.high_watermark = part.log.end_offset
    assert part.last_stable_offset == 3
    end, aborted = _fetch(part, ())
    assert end == 3 and [(a.producer_id, a.first_offset) for a in aborted] == [(PID, 0)]
    end, aborted = _fetch(part, ("read-committed-past-lso",))
    assert end == 5, "the open transaction's records are served"
    end, aborted = _fetch(part, ("no-aborted-list",))
    assert end == 3 and aborted == [], "the consumer cannot drop the aborted records"
    assert _fetch(part, (), committed=False)[0] == 5  # read_uncommitted: to the HW


def test_a_read_committed_fetch_across_aborted_records_is_reported_even_with_the_list_dropped():
    """Coverage: ``aborted-txn-fetched`` comes when a read_committed fetch's range holds an
    aborted transaction's records, whether or not a bug then hides the list from the
    consumer (the run must know it had something to show); never for read_uncommitted or a
    range past the abort. Reported once per partition and leader epoch."""
    from node_image.coverage import Reached, event_of
    part = leader(SimDisk())
    part.append_as_leader(txn_batch(PID, 0, 0), 1)  # 0-1
    part.append_as_leader(records.end_txn_marker(PID, 0, False, 0, 1), 1)  # 2: ABORT
    part.append_as_leader(txn_batch(OTHER, 0, 0), 1)  # 3-4
    part.append_as_leader(records.end_txn_marker(OTHER, 0, True, 0, 1), 1)  # 5: COMMIT
    part.high_watermark = part.log.end_offset
    for bugs in ((), ("no-aborted-list",)):
        events = []
        _fetch(part, bugs, events=events)
        [e] = events
        assert isinstance(e, Reached) and e.event == "aborted-txn-fetched", e
        assert event_of(f"reached {e.event}: {e}") == "aborted-txn-fetched"
        assert f"producer {PID} at offset 0" in e, e
    quiet = []
    _fetch(part, (), committed=False, events=quiet)
    _fetch(part, (), events=quiet, fetch_offset=3)
    assert quiet == [], quiet
    seen, events = set(), []
    for _ in range(3):
        _fetch(part, (), events=events, seen=seen)
    part.leader_epoch += 1
    _fetch(part, (), events=events, seen=seen)
    assert [e.split(" in leader epoch ")[1].split(",")[0] for e in events] == [
        str(part.leader_epoch - 1), str(part.leader_epoch)]


def test_abort_as_commit_writes_commit_markers_for_an_abort():
    for bugs, commit in (((), False), (("abort-as-commit",), True)):
        t = Txns(bugs=frozenset(bugs))
        t.init()
        t.add(PID, 0)
        assert t.end(PID, 0, False) == m.NONE
        [(_, req)] = t.sent
        assert req.commit is commit, bugs


def test_partial_commit_markers_mark_only_the_first_partition():
    for bugs, marked in (((), {("t", 0), ("t", 1)}), (("partial-commit-markers",), {("t", 0)})):
        t = Txns(bugs=frozenset(bugs))
        t.init()
        t.add(PID, 0)
        assert t.end(PID, 0, True) == m.NONE
        [(_, req)] = t.sent
        assert set(req.partitions) == marked, bugs
        t.ack_markers()
        assert t.state() == "CompleteCommit", "the coordinator believes it is done"


def test_a_marker_for_a_partition_without_a_leader_waits_instead_of_spinning():
    """Found by the simulator's transactional clients (queue seed 7): a partition of a
    committing transaction had no leader, so its marker was not sent, and the coordinator
    named the present as its next deadline, again after every poll: the runtime would have
    polled the node every millisecond until a leader came."""
    t = Txns()
    t.init()
    t.add(PID, 0)
    image = t.rm.image
    real = image.partition

    class Leaderless:
        def __getattr__(self, name):
            return getattr(image, name)

        def partition(self, topic, p):
            reg = real(topic, p)
            return dataclasses.replace(reg, leader=-1) if (topic, p) == ("t", 1) else reg
    t.rm.image = Leaderless()
    assert t.end(PID, 0, True, now=10) == m.NONE
    [(_, req)] = t.sent
    assert req.partitions == (("t", 0),), "only the partition with a leader is written to"
    t.ack_markers(now=11)
    t.c.poll(12, False)
    assert t.c.next_deadline_ms() > 12, "no deadline in the past while no leader is known"
    t.rm.image = image
    t.c.poll(t.c.next_deadline_ms(), False)
    [(_, again)] = t.sent
    assert again.partitions == (("t", 1),)
    t.ack_markers(now=200)
    assert t.state() == "CompleteCommit"


def test_a_state_write_not_replicated_in_time_sends_the_client_to_look_again():
    """Kafka's TransactionStateManager answers a transaction-log append that timed out with
    COORDINATOR_NOT_AVAILABLE (the client finds the coordinator again and retries, inside
    its own API call); the group coordinator keeps REQUEST_TIMED_OUT. Under a leader kill on
    a loaded machine an EndTxn(abort) once came back REQUEST_TIMED_OUT to the application."""
    from types import SimpleNamespace

    from node_image.broker.coordinator_log import CoordinatorLog
    part = SimpleNamespace(leader_epoch=3, isr=(1, 2, 3))
    outcome = [None]
    rm = SimpleNamespace(leader_partition=lambda t, p: part, min_isr=lambda t: 2,
                         append=lambda part, batch: SimpleNamespace(last_offset=9),
                         append_outcome=lambda *a: outcome[0])
    for timed_out, want in ((m.REQUEST_TIMED_OUT, m.REQUEST_TIMED_OUT),
                            (m.COORDINATOR_NOT_AVAILABLE, m.COORDINATOR_NOT_AVAILABLE)):
        log = CoordinatorLog(rm, "t", 5000, lambda: 0, lambda *a: None, lambda p: None,
                             timed_out=timed_out)
        log.owned[0] = 3
        answers = []
        outcome[0] = None
        log.write(0, [(b"k", b"v")], 0, answers.append)
        assert answers == []
        outcome[0] = m.REQUEST_TIMED_OUT
        log.complete(6000)
        assert answers == [want]
    assert Txns().c.log.timed_out == m.COORDINATOR_NOT_AVAILABLE


def test_a_new_leader_behind_its_epoch_start_says_offsets_are_not_available():
    """ListOffsets on a leader whose high watermark has not reached the start of its epoch
    (just elected, its followers not yet heard from): OFFSET_NOT_AVAILABLE for the latest
    offset and for a timestamp not found below the HW, as Kafka answers, not the lagging HW
    (a final read that took it as the end once stopped short of a committed record); once
    the HW reaches the epoch start, the HW."""
    from types import MethodType, SimpleNamespace

    from node_image.broker.kafka_apis import KafkaApis
    part = leader(SimDisk())
    for i in range(3):
        part.append_as_leader(records.build_batch(i, 0, [(None, b"x")], 1000 + i), 1)
    assert part.maybe_increment_hw(1) and part.high_watermark == 3
    part.append_as_leader(records.build_batch(3, 0, [(None, b"y")], 2000), 1)  # HW still 3
    part.apply_registration(PartitionRegistration((1,), (1,), 1, 1, 1), 0)  # epoch 1 from 4
    assert (part.high_watermark, part.leader_epoch_start_offset) == (3, 4)
    apis = SimpleNamespace(rm=SimpleNamespace(leader_partition=lambda t, p: part))
    apis._leader_at = MethodType(KafkaApis._leader_at, apis)

    def ask(timestamp):
        p = SimpleNamespace(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)
        return KafkaApis._offset_for(apis, "t", p, 5)
    assert ask(-1)[0] == m.OFFSET_NOT_AVAILABLE
    assert ask(1500)[0] == m.OFFSET_NOT_AVAILABLE  # only at offset 3, past the HW
    assert ask(1001)[:3] == (m.NONE, 1001, 1)  # found below the HW: answered
    assert ask(-2)[:3] == (m.NONE, -1, 0)  # the earliest: always
    assert part.maybe_increment_hw(1) and part.high_watermark == 4
    assert ask(-1)[:3] == (m.NONE, -1, 4)


def test_a_fetch_v12_from_a_diverged_log_is_told_where_the_epoch_ends():
    """Fetch v12+ carries the epoch of the last record the client fetched (KIP-320); as
    Kafka's Partition.fetchRecords, a position past where this log ends that epoch is
    answered with the diverging epoch and its end offset, no records (the client truncates
    or resets there); an epoch newer than any this log has is OFFSET_OUT_OF_RANGE; older
    versions are not checked."""
    from types import MethodType, SimpleNamespace

    from node_image.broker.kafka_apis import KafkaApis
    part = leader(SimDisk())
    for i in range(3):  # offsets 0-2 in epoch 0
        part.append_as_leader(records.build_batch(i, 0, [(None, b"x")], 1000), 1)
    part.apply_registration(PartitionRegistration((1,), (1,), 1, 1, 1), 0)
    for i in range(2):  # offsets 3-4 in epoch 1
        part.append_as_leader(records.build_batch(0, 0, [(None, b"y")], 1000), 1)
    part.maybe_increment_hw(1)
    assert (part.high_watermark, part.log.epoch_entries) == (5, [(0, 0), (1, 3)])
    apis = SimpleNamespace(rm=SimpleNamespace(leader_partition=lambda t, p: part),
                           bugs=frozenset(), _aborted_seen=set(), _on_event=lambda e: None)
    apis._leader_at = MethodType(KafkaApis._leader_at, apis)

    def read(fetch_offset, last_epoch, version=12):
        p = SimpleNamespace(partition=0, current_leader_epoch=-1, fetch_offset=fetch_offset,
                            last_fetched_epoch=last_epoch)
        error, _, _, _, data, _, diverging = KafkaApis._read(apis, "t", p, version, 1 << 20,
                                                             True, False)
        return error, [h.base_offset for h, _ in records.iter_batches(data)], diverging
    assert read(4, 0) == (m.NONE, [], (0, 3)), "epoch 0 ends at 3 here: the client diverged"
    assert read(3, 0) == (m.NONE, [3, 4], None), "at the end of its epoch: no divergence"
    assert read(5, 1) == (m.NONE, [], None)
    assert read(2, 2)[0] == m.OFFSET_OUT_OF_RANGE, "an epoch this log never had"
    assert read(4, 0, version=11) == (m.NONE, [4], None), "before v12: not asked"
    assert read(4, -1) == (m.NONE, [4], None), "no epoch given (librdkafka): not checked"
