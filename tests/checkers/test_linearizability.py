"""The WGL checker on small hand-made histories with known answers."""
from checkers.models import get_model
from checkers.lin_model import INF, UNKNOWN, Operation
from checkers.linearizability import check
from checkers.models import cas_register, register


def op(p, f, v, out, call, ret):
    return Operation(p, (f, v), out, call, ret)


def test_sequential_history_is_linearizable():
    ops = [op(0, "write", 1, None, 0, 1), op(0, "read", None, 1, 2, 3),
           op(1, "write", 2, None, 4, 5), op(1, "read", None, 2, 6, 7)]
    assert check(register(), ops).valid is True


def test_stale_read_is_not_linearizable():
    ops = [op(0, "write", 1, None, 0, 1), op(1, "write", 2, None, 2, 3),
           op(0, "read", None, 1, 4, 5)]
    r = check(register(), ops)
    assert r.valid is False
    roles = [c["role"] for c in r.keys[0].counterexample]
    assert "cannot linearize" in roles


def test_concurrent_read_may_see_either_value():
    ops = [op(0, "write", 1, None, 0, 1), op(1, "write", 2, None, 2, 10),
           op(0, "read", None, 1, 3, 4), op(2, "read", None, 2, 5, 6)]
    assert check(register(), ops).valid is True


def test_read_cannot_go_back_after_a_newer_read():
    ops = [op(0, "write", 1, None, 0, 1), op(1, "write", 2, None, 2, 10),
           op(2, "read", None, 2, 3, 4), op(0, "read", None, 1, 5, 6)]
    assert check(register(), ops).valid is False


def test_indeterminate_write_may_or_may_not_happen():
    took = [op(0, "write", 1, UNKNOWN, 0, INF), op(1, "read", None, 1, 5, 6)]
    never = [op(0, "write", 1, UNKNOWN, 0, INF), op(1, "read", None, None, 5, 6)]
    assert check(register(), took).valid is True
    assert check(register(), never).valid is True


def test_indeterminate_cas_can_be_a_noop():
    ops = [op(0, "write", 1, None, 0, 1), op(1, "cas", (5, 6), UNKNOWN, 2, INF),
           op(2, "read", None, 1, 3, 4)]
    assert check(cas_register(), ops).valid is True


def test_cas_semantics():
    good = [op(0, "write", 1, None, 0, 1), op(0, "cas", (1, 2), None, 2, 3), op(0, "read", None, 2, 4, 5)]
    bad = [op(0, "write", 1, None, 0, 1), op(0, "cas", (3, 2), None, 2, 3), op(0, "read", None, 2, 4, 5)]
    assert check(cas_register(), good).valid is True
    assert check(cas_register(), bad).valid is False


def test_time_budget_gives_unknown_not_a_pass():
    # Many concurrent indeterminate writes and a read nobody wrote: exhaustive and false,
    # but with no budget left the answer must be "unknown".
    ops = [op(i, "write", i, UNKNOWN, 0, INF) for i in range(16)]
    ops += [op(100 + i, "read", None, i, 1, 100) for i in range(16)]
    ops.append(op(99, "read", None, 1000, 1, 100))
    assert check(register(), ops, timeout_s=0.0).valid == "unknown"


def test_history_rows_pair_like_knossos():
    rows = [
        {"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "write", "key": "a", "value": 1},
        {"index": 1, "time": 1, "process": 1, "type": "invoke", "f": "write", "key": "a", "value": 2},
        {"index": 2, "time": 2, "process": 0, "type": "ok", "f": "write", "key": "a", "value": 1},
        {"index": 3, "time": 3, "process": 1, "type": "fail", "f": "write", "key": "a", "value": 2},
        {"index": 4, "time": 4, "process": "nemesis", "type": "info", "f": "partition", "value": None},
        {"index": 5, "time": 5, "process": 0, "type": "invoke", "f": "read", "key": "a", "value": None},
        {"index": 6, "time": 6, "process": 0, "type": "ok", "f": "read", "key": "a", "value": 1},
        {"index": 7, "time": 7, "process": 2, "type": "invoke", "f": "cas", "key": "a", "value": [1, 3]},
    ]
    ops = dict(get_model("cas-register").operations(rows))["a"]
    assert [(o.input, o.output) for o in ops] == [
        (("write", 1), None), (("read", None), 1), (("cas", (1, 3)), UNKNOWN)]
    # the etcd model keeps a failed cas as an observation
    rows[3] = {**rows[1], "index": 3, "time": 3, "type": "fail", "f": "cas", "value": [7, 8]}
    rows[1] = {**rows[1], "f": "cas", "value": [7, 8]}
    etcd = dict(get_model("etcd").operations(rows))["a"]
    assert (("cas", (7, 8)), "fail") in [(o.input, o.output) for o in etcd]
    assert ops[-1].ret == INF


def test_unobserved_indeterminate_writes_are_pruned_soundly():
    # 60 unanswered writes nobody read: without pruning the search space is 2^60.
    ops = [op(0, "write", 0, None, 0, 1)]
    ops += [op(i, "write", 100 + i, UNKNOWN, 2, INF) for i in range(1, 61)]
    ops += [op(99, "read", None, 0, 3, 4)]
    assert check(cas_register(), ops, timeout_s=5).valid is True
    # ...but an observed one still counts: a read of 105 needs write 105 linearized first,
    # and a later read of 0 after it is then impossible.
    bad = ops[:-1] + [op(98, "read", None, 105, 3, 4), op(98, "read", None, 0, 5, 6)]
    assert check(cas_register(), bad, timeout_s=5).valid is False
