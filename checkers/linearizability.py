"""Linearizability checking: the Wing-Gong search with Lowe's cache, as Porcupine does it.

Theory of operation
-------------------
A history is split per key (P-compositionality: a history is linearizable
iff each key's sub-history is). For one key the operations become call and
return entries in a doubly linked list ordered by time (a call before a
return at the same instant). The search walks the list: at a call whose
operation the model can apply in the current state, it linearizes it
(removes its call and return), remembers the choice on a stack and starts
again from the head; at a return it has to backtrack, because that
operation ended without being linearized. The cache holds every
(linearized set, model state) already explored, so no configuration is
searched twice. The history is linearizable when the list empties.

Indeterminate operations (Jepsen's ``info``: the client does not know
whether it took effect) have no return: they may be linearized at any point
after their call, or never, which the model expresses by letting them be a
no-op where their effect is impossible. ``fail`` operations did not happen
and are dropped before checking.

Results: ``True`` (linearizable), ``False`` (with a counterexample: the
operations the deepest partial linearization could not get past) or
``"unknown"`` when the time budget ran out: never a silent pass.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable

INF = math.inf


@dataclass(frozen=True, slots=True)
class Operation:
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


@dataclass
class KeyResult:
    key: Any
    valid: bool | str  # True, False or "unknown"
    operations: int
    counterexample: list[dict] = field(default_factory=list)
    explored: int = 0


@dataclass
class CheckResult:
    valid: bool | str
    keys: list[KeyResult]

    def to_dict(self) -> dict:
        return {"valid": self.valid, "keys": [k.__dict__ for k in self.keys]}


class _Entry:
    __slots__ = ("op", "id", "is_call", "match", "prev", "next")

    def __init__(self, op: Operation | None, ident: int, is_call: bool) -> None:
        self.op = op
        self.id = ident
        self.is_call = is_call
        self.match: _Entry | None = None
        self.prev: _Entry | None = None
        self.next: _Entry | None = None


def _build_list(ops: list[Operation]) -> _Entry:
    events = []
    for i, op in enumerate(ops):
        events.append((op.call, 0, i, True))
        events.append((op.ret, 1, i, False))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    head = _Entry(None, -1, False)
    calls: dict[int, _Entry] = {}
    prev = head
    for _, _, i, is_call in events:
        e = _Entry(ops[i], i, is_call)
        if is_call:
            calls[i] = e
        else:
            calls[i].match = e
        prev.next = e
        e.prev = prev
        prev = e
    return head


def _lift(e: _Entry) -> None:
    e.prev.next = e.next
    if e.next is not None:
        e.next.prev = e.prev
    r = e.match
    r.prev.next = r.next
    if r.next is not None:
        r.next.prev = r.prev


def _unlift(e: _Entry) -> None:
    r = e.match
    r.prev.next = r
    if r.next is not None:
        r.next.prev = r
    e.prev.next = e
    if e.next is not None:
        e.next.prev = e


SLICE_STEPS = 2048


def check_single(model: Model, ops: list[Operation], deadline: float | None = None,
                 key: Any = None) -> KeyResult:
    """Wing-Gong-Lowe search over one partition, until done or ``deadline`` (monotonic s)."""
    search = _search(model, ops, key)
    while True:
        try:
            next(search)
        except StopIteration as done:
            return done.value
        if deadline is not None and time.monotonic() > deadline:
            return KeyResult(key, "unknown", len(ops))


def _search(model: Model, ops: list[Operation], key: Any):
    """The search as a generator: yields every SLICE_STEPS steps, returns a KeyResult."""
    total = len(ops)
    ops = model.prepare(ops)
    if not ops:
        return KeyResult(key, True, total)
    head = _build_list(ops)
    state = model.init()
    linearized = 0
    cache: set[tuple[int, Hashable]] = set()
    calls: list[tuple[_Entry, Hashable]] = []
    best: list[_Entry] = []
    best_stuck: _Entry | None = None
    entry = head.next
    steps = 0
    while head.next is not None:
        steps += 1
        if steps % SLICE_STEPS == 0:
            yield
        if entry.is_call:
            ok, new_state = model.step(state, entry.op.input, entry.op.output)
            if ok:
                new_lin = linearized | (1 << entry.id)
                k = (new_lin, new_state)
                if k not in cache:
                    cache.add(k)
                    calls.append((entry, state))
                    state = new_state
                    linearized = new_lin
                    _lift(entry)
                    entry = head.next
                    continue
            entry = entry.next
        else:
            if len(calls) >= len(best):
                best = [c for c, _ in calls]
                best_stuck = entry
            if not calls:
                return KeyResult(key, False, total, _counterexample(model, ops, best, best_stuck),
                                 len(cache))
            top, state = calls.pop()
            linearized &= ~(1 << top.id)
            _unlift(top)
            entry = top.next
    return KeyResult(key, True, total, explored=len(cache))


def _counterexample(model: Model, ops: list[Operation], best: list[_Entry],
                    stuck: _Entry | None) -> list[dict]:
    """The last operations of the deepest partial linearization and the one it could not pass."""
    out = []
    for e in best[-5:]:
        out.append({"role": "linearized", "index": e.op.index, "process": e.op.process,
                    "op": model.describe(e.op), "call": e.op.call, "return": e.op.ret})
    if stuck is not None:
        op = stuck.op
        out.append({"role": "cannot linearize", "index": op.index, "process": op.process,
                    "op": model.describe(op), "call": op.call, "return": op.ret})
        concurrent = [o for o in ops if o.call <= op.ret and o.ret >= op.call and o is not op]
        for o in concurrent[:5]:
            out.append({"role": "concurrent", "index": o.index, "process": o.process,
                        "op": model.describe(o), "call": o.call, "return": o.ret})
    return out


def check(model: Model, ops: Iterable[Operation], timeout_s: float | None = None,
          keyed: list[tuple[Any, list[Operation]]] | None = None) -> CheckResult:
    """Check every partition, interleaved, and stop at the first that is not linearizable.

    As Porcupine runs partitions in parallel and stops the others when one fails,
    the searches here take turns of SLICE_STEPS steps, so one hard linearizable
    key cannot hide an easy violation on another. Keys left unfinished then are
    reported "unknown"; the verdict is False.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    parts = keyed if keyed is not None else list(enumerate(model.partition(list(ops))))
    results: dict[int, KeyResult] = {}
    active = {i: _search(model, p, key) for i, (key, p) in enumerate(parts)}
    failed = False
    while active and not failed:
        for i in list(active):
            try:
                next(active[i])
            except StopIteration as done:
                results[i] = done.value
                del active[i]
                if done.value.valid is False:
                    failed = True
                    break
        if deadline is not None and time.monotonic() > deadline:
            break
    for i in active:
        key, p = parts[i]
        results[i] = KeyResult(key, "unknown", len(p))
    ordered = [results[i] for i in range(len(parts))]
    return CheckResult(combine(r.valid for r in ordered), ordered)


def combine(verdicts: Iterable[bool | str]) -> bool | str:
    verdicts = list(verdicts)
    if any(v is False for v in verdicts):
        return False
    if any(v == "unknown" for v in verdicts):
        return "unknown"
    return True
