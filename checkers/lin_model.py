"""The vocabulary of linearizability checking, shared by the Python search
(``linearizability``) and the native one (``wgl``): operations, sequential
models, per-key and whole results, and the counterexample and diagram a
failed search reports.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, NamedTuple

INF = math.inf


class Operation(NamedTuple):
    """One client operation (immutable; a tuple, as a history holds millions of them)."""
    process: Any
    input: Any
    output: Any  # UNKNOWN for indeterminate operations
    call: float
    ret: float  # INF for indeterminate operations
    index: int = -1  # position in the source history, for reports


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


@dataclass(frozen=True)
class Model:
    """A sequential specification. ``step`` returns (legal, next state)."""
    name: str
    init: Callable[[], Hashable]
    step: Callable[[Hashable, Any, Any], tuple[bool, Hashable]]
    partition: Callable[[list[Operation]], list[list[Operation]]] = lambda ops: [ops]
    describe: Callable[[Operation], str] = lambda op: f"{op.input!r} -> {op.output!r}"
    # Drops operations that cannot change the verdict, before the search.
    prepare: Callable[[list[Operation]], list[Operation]] = lambda ops: ops
    # "register": the native kernel steps it itself (read/write/cas on values);
    # None: the native kernel calls ``step`` back, memoised per (operation, state).
    native: str | None = None
    # How a state reads in a report (the interactive page shows it before and after each step).
    describe_state: Callable[[Hashable], str] = lambda s: "nil" if s is None else repr(s)


@dataclass
class KeyResult:
    key: Any
    valid: bool | str  # True, False or "unknown"
    operations: int
    counterexample: list[dict] = field(default_factory=list)
    explored: int = 0
    reason: str = ""  # why "unknown" (budget, another key failed, no ok operation)
    diagram: dict = field(default_factory=dict)  # for an invalid key: see ``diagram``


@dataclass
class CheckResult:
    valid: bool | str
    keys: list[KeyResult]
    reason: str = ""  # why the whole check is "unknown", where no key says

    def to_dict(self) -> dict:
        return {"valid": self.valid, "reason": self.reason, "keys": [k.__dict__ for k in self.keys]}


def invalid(model: Model, key, total: int, ops: list[Operation], best: list[Operation],
            stuck: Operation | None, explored: int) -> KeyResult:
    """The result for a key that is not linearizable, with its counterexample and diagram."""
    return KeyResult(key, False, total, counterexample(model, ops, best, stuck), explored,
                     diagram=diagram(model, ops, best, stuck))


def _time(t):
    return None if t == INF else t


def counterexample(model: Model, ops: list[Operation], best: list[Operation],
                   stuck: Operation | None) -> list[dict]:
    """The last operations of the deepest partial linearization and the one it could not pass."""
    out = []
    for op in best[-5:]:
        out.append({"role": "linearized", "index": op.index, "process": op.process,
                    "op": model.describe(op), "call": op.call, "return": _time(op.ret)})
    if stuck is not None:
        out.append({"role": "cannot linearize", "index": stuck.index, "process": stuck.process,
                    "op": model.describe(stuck), "call": stuck.call, "return": _time(stuck.ret)})
        concurrent = [o for o in ops if o.call <= stuck.ret and o.ret >= stuck.call
                      and o is not stuck]
        for o in concurrent[:5]:
            out.append({"role": "concurrent", "index": o.index, "process": o.process,
                        "op": model.describe(o), "call": o.call, "return": _time(o.ret)})
    return out


DIAGRAM_PREFIX = 40


def diagram(model: Model, ops: list[Operation], best: list[Operation],
            stuck: Operation | None) -> dict:
    """What report.html draws for an invalid key, as Porcupine's visualization does.

    Processes are rows; each operation a bar from its call to its return
    (history positions; ``return`` null for one that never returned). Roles:
    ``linearized`` with ``order`` (its place in the longest linearizable
    prefix; the last DIAGRAM_PREFIX of them), ``stuck`` (the operation that
    cannot be placed after that prefix) and ``concurrent`` (the other
    operations overlapping it, which the search tried to place first). Each row says the
    state before and after it: a prefix step's own, and for the others what they would do
    right after the prefix (``after`` null: illegal there).
    """
    if stuck is None:
        return {}
    placed = {id(op): n for n, op in enumerate(best)}
    states, last = _states(model, best)
    shown: list[tuple[Operation, str, int | None]] = []
    start = max(0, len(best) - DIAGRAM_PREFIX)
    for n in range(start, len(best)):
        shown.append((best[n], "linearized", n))
    for o in ops:
        if o is not stuck and id(o) not in placed and o.call <= stuck.ret and o.ret >= stuck.call:
            shown.append((o, "concurrent", None))
    shown.append((stuck, "stuck", None))
    rows = []
    for op, role, order in shown:
        row = {"index": op.index, "process": str(op.process), "call": op.call,
               "return": _time(op.ret), "op": model.describe(op), "role": role,
               "order": order}
        if order is not None:  # its step in the prefix: the state it met and the one it left
            row["before"], row["after"] = states[order], states[order + 1]
        else:  # what it would do right after the prefix
            legal, after = _step(model, last, op)
            row["before"] = model.describe_state(last)
            row["after"] = model.describe_state(after) if legal else None
        rows.append(row)
    return {"prefix_length": len(best), "shown_from": start, "operations": rows,
            "processes": sorted({r["process"] for r in rows}, key=_process_order),
            "state_after_prefix": states[-1]}


def _step(model: Model, state, op: Operation):
    """(legal, next state) of ``op`` from ``state``; (None, None) if the model refuses to say."""
    try:
        return model.step(state, op.input, op.output)
    except Exception:  # noqa: BLE001 - a report must not fail on a model's corner
        return None, None


def _states(model: Model, best: list[Operation]) -> tuple[list[str], Hashable]:
    """The state before the prefix and after each of its steps, as text. A step the model
    calls illegal (a search that knows more than ``step``, such as a memoised native one)
    keeps its state and says so. Also the state itself after the prefix."""
    state = model.init()
    out = [model.describe_state(state)]
    for op in best:
        legal, nxt = _step(model, state, op)
        if legal:
            state = nxt
            out.append(model.describe_state(state))
        else:
            out.append(model.describe_state(state) + " (not replayed)")
    return out, state


def _process_order(p: str):
    return (0, int(p), p) if p.lstrip("-").isdigit() else (1, 0, p)
