"""KIP-932's share-partition state machine and the share group assignor, without I/O."""
import random

import pytest

from node_image.broker.share_coordinator import share_assign
from node_image.broker.share_partition import (ACCEPT, ACQUIRED, ARCHIVED, AVAILABLE, GAP,
                                               REJECT, RELEASE, TRANSITIONS,
                                               InvalidTransition, SharePartition)


def test_the_transition_table_is_the_only_way_a_record_changes_state():
    sp = SharePartition(0, lock_ms=100)
    sp.acquire_new(0, 0, "a", now=0)
    rec = sp.records[0]
    with pytest.raises(InvalidTransition):
        from node_image.broker.share_partition import _step
        _step(rec, "acquire")  # ACQUIRED cannot be acquired again
    assert (ARCHIVED, "acquire") not in TRANSITIONS  # done records stay done


def test_accept_release_reject_and_the_start_offset():
    sp = SharePartition(10, lock_ms=1000, max_deliveries=2)
    sp.acquire_new(10, 14, "a", now=0)
    assert sp.acquired_ranges("a", range(10, 15)) == [(10, 14, 1)]
    # offsets outside the in-flight window are refused at once, however far they reach
    assert "not all in flight" in sp.acknowledge("a", 10, (1 << 62), [ACCEPT], now=1)
    assert "not all in flight" in sp.acknowledge("a", 9, 10, [ACCEPT], now=1)
    # only the holder acknowledges; a refused batch changes nothing
    assert "not acquired by member b" in sp.acknowledge("b", 10, 10, [ACCEPT], now=1)
    assert sp.acknowledge("a", 10, 12, [ACCEPT, RELEASE, REJECT], now=1) is None
    sp.check()
    assert sp.spso == 11 and sp.records[11].state == AVAILABLE
    assert sp.records[12].state == ARCHIVED
    # a record released as often as the limit is archived, undelivered
    sp.acquire_offsets(sp.available(2), "b", now=2)
    assert sp.acquired_ranges("b", [11]) == [(11, 11, 2)]
    assert sp.acknowledge("b", 11, 11, [RELEASE], now=3) is None
    assert 11 not in sp.records and sp.spso == 13
    # a lock that runs out releases; the old holder may no longer acknowledge
    assert sp.acknowledge("a", 13, 13, [ACCEPT], now=5000) is not None
    assert sp.available(5000) == [13, 14]
    sp.acquire_offsets([13, 14], "c", now=5000)
    assert sp.acknowledge("c", 13, 14, [GAP], now=5001) is None
    assert sp.spso == sp.speo == 15 and not sp.records
    sp.check()


def test_a_member_leaving_releases_what_it_holds():
    sp = SharePartition(0)
    sp.acquire_new(0, 3, "a", now=0)
    sp.acquire_new(4, 5, "b", now=0)
    assert sp.release_member("a") == 4
    assert sp.available(1) == [0, 1, 2, 3]
    assert sp.acquired_ranges("b", range(6)) == [(4, 5, 1)]


def test_control_batches_and_gaps_are_never_delivered():
    sp = SharePartition(0)
    sp.acquire_new(0, 1, "a", now=0)
    sp.acquire_new(2, 2, "a", now=0, undeliverable=True)
    sp.acquire_new(5, 6, "a", now=0)  # 3 and 4 are not in the log
    assert sp.acquired_ranges("a", range(7)) == [(0, 1, 1), (5, 6, 1)]
    assert sp.acknowledge("a", 0, 1, [ACCEPT], now=1) is None
    assert sp.spso == 5
    sp.check()


def test_the_in_flight_window_is_bounded_and_truncation_moves_the_start():
    sp = SharePartition(0, max_in_flight=4)
    sp.acquire_new(0, 3, "a", now=0)
    assert not sp.may_take_new()
    sp.truncate_below(2)
    assert sp.spso == 2 and sp.may_take_new()
    sp.check()


def test_the_state_a_new_leader_reads_back_is_the_old_ones_with_nothing_held():
    """snapshot (what the leader writes) and restore (what the next leader reads): the
    start offset, archived runs and delivery counts kept; acquired records available again
    with the deliveries they had, and taken by the next member once more."""
    sp = SharePartition(10, lock_ms=100, max_deliveries=3)
    sp.acquire_new(10, 19, "a", 0)
    assert sp.acknowledge("a", 10, 12, [ACCEPT], 0) is None  # SPSO moves to 13
    assert sp.acknowledge("a", 14, 15, [REJECT], 0) is None
    assert sp.acknowledge("a", 16, 16, [RELEASE], 0) is None
    spso, runs = sp.snapshot()
    assert (spso, runs) == (13, ((13, 13, False, 1), (14, 15, True, 1), (16, 19, False, 1)))
    again = SharePartition.restore(spso, runs, max_deliveries=3)
    again.check()
    assert (again.spso, again.speo) == (13, 20)
    assert again.available(0) == [13, 16, 17, 18, 19]
    assert again.snapshot() == (spso, runs)
    again.acquire_offsets([13, 16], "b", 0)
    assert again.acquired_ranges("b", [13, 16]) == [(13, 13, 2), (16, 16, 2)]
    # a record held at its delivery limit when the leader went is done with, as its
    # release would have left it
    worn = SharePartition.restore(0, ((0, 0, False, 3), (1, 1, False, 2)), max_deliveries=3)
    assert (worn.spso, worn.available(0)) == (1, [1])
    assert SharePartition.restore(7, ()).snapshot() == (7, ())


@pytest.mark.parametrize("seed", range(40))
def test_random_schedules_deliver_every_record_and_never_to_two_members(seed):
    """Three members acquire, acknowledge with every type, leave and let locks run out, and
    the partition moves to a new leader that reads the state back, in a random order: after
    every step the invariants hold and no offset is held by two;
    in the end each record is accepted at most once, and every record is either accepted
    or was rejected, a gap, or delivered the limit times."""
    rng = random.Random(seed)
    sp = SharePartition(0, lock_ms=50, max_deliveries=3, max_in_flight=30)
    log_end, now = 0, 0
    accepted: dict[int, int] = {}
    dropped: set[int] = set()
    deliveries: dict[int, int] = {}
    held: dict[str, set] = {"a": set(), "b": set(), "c": set()}
    for _ in range(400):
        now += rng.randint(0, 20)
        member = rng.choice("abc")
        action = rng.random()
        if action < 0.15:
            log_end += rng.randint(1, 5)
        elif action < 0.55:
            again = sp.available(now)[:rng.randint(0, 4)]
            sp.acquire_offsets(again, member, now)
            new = []
            if sp.may_take_new() and sp.speo < log_end:
                first, last = sp.speo, min(log_end - 1, sp.speo + rng.randint(0, 3))
                sp.acquire_new(first, last, member, now)
                new = list(range(first, last + 1))
            for o in again + new:
                assert all(o not in h for k, h in held.items() if k != member
                           and sp.records.get(o) is not None
                           and sp.records[o].owner == k)
                deliveries[o] = deliveries.get(o, 0) + 1
                held[member].add(o)
        elif action < 0.9:
            sp.expire(now)
            mine = sorted(o for o in held[member] if o in sp.records
                          and sp.records[o].state == ACQUIRED and sp.records[o].owner == member)
            if mine:
                o = rng.choice(mine)
                kind = rng.choice([ACCEPT, ACCEPT, RELEASE, REJECT, GAP])
                assert sp.acknowledge(member, o, o, [kind], now) is None
                held[member].discard(o)
                if kind == ACCEPT:
                    accepted[o] = accepted.get(o, 0) + 1
                elif kind in (REJECT, GAP):
                    dropped.add(o)
            stale = sorted(o for o in held[member] if o not in sp.records
                           or sp.records[o].owner != member)
            if stale:  # its lock ran out: acknowledging it is refused
                assert sp.acknowledge(member, stale[0], stale[0], [ACCEPT], now) is not None
        elif action < 0.95:
            sp.release_member(member)
            held[member].clear()
        else:  # a new leader, from the state the old one wrote: every lock is gone
            sp = SharePartition.restore(*sp.snapshot(), lock_ms=50, max_deliveries=3,
                                        max_in_flight=30)
            assert not any(r.state == ACQUIRED for r in sp.records.values())
            for h in held.values():
                h.clear()
        sp.check()
        assert sum(r.state == ACQUIRED for r in sp.records.values()) == len(
            {o for o, r in sp.records.items() if r.state == ACQUIRED})
    while sp.speo < log_end or sp.records:  # drain: one member accepts everything
        now += 100
        again = sp.available(now)
        sp.acquire_offsets(again, "a", now)
        if sp.speo < log_end and sp.may_take_new():
            sp.acquire_new(sp.speo, log_end - 1, "a", now)
        for first, last, _ in sp.acquired_ranges("a", list(sp.records)):
            assert sp.acknowledge("a", first, last, [ACCEPT], now) is None
            for o in range(first, last + 1):
                accepted[o] = accepted.get(o, 0) + 1
        sp.check()
    assert all(n == 1 for n in accepted.values())
    for o in range(log_end):
        assert o in accepted or o in dropped or deliveries.get(o, 0) >= 3, o
    assert not set(accepted) & dropped


def test_the_assignor_gives_every_member_and_every_partition_a_share():
    parts = [("t", p) for p in range(5)]
    a = share_assign(["m1", "m2"], parts)
    assert sorted(p for m in a.values() for p in m["t"]) == list(range(5))
    assert all(a[m]["t"] for m in a)
    more = share_assign([f"m{i}" for i in range(7)], parts[:2])
    assert all(more[m]["t"] for m in more)
    assert {p for m in more.values() for p in m["t"]} == {0, 1}
    assert share_assign([], parts) == {} and share_assign(["m"], []) == {"m": {}}
