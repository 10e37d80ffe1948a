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

import os
import threading
import time
from collections import deque
from typing import Any, Hashable, Iterable

from .lin_model import CheckResult, KeyResult, Model, Operation, invalid
from .wgl import AVAILABLE, KeySearch

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
    best_len = -1
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
            if len(calls) > best_len:  # strictly deeper, as the native kernel records it
                best_len = len(calls)
                best = [c for c, _ in calls]
                best_stuck = entry
            if not calls:
                return invalid(model, key, total, ops, [e.op for e in best],
                               best_stuck.op if best_stuck else None, len(cache))
            top, state = calls.pop()
            linearized &= ~(1 << top.id)
            _unlift(top)
            entry = top.next
    return KeyResult(key, True, total, explored=len(cache))


def _python_check(model: Model, parts, deadline: float | None) -> tuple[dict, set]:
    """The reference: searches take turns of SLICE_STEPS steps, so a hard key cannot hide an
    easy violation on another (as Porcupine runs keys in parallel and stops at the first)."""
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
    return results, set(active)


# A key's turn in the C kernel. Turns are equal in time, not in steps: a step costs from
# tens of nanoseconds (small states) to microseconds (long kv strings, large bitsets), and a
# key that fails quickly must not wait for step-equal turns of keys whose steps are slow.
NATIVE_SLICE_S = 50e-6


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # taskset and cgroup cpusets, unlike cpu_count
    except (AttributeError, OSError):
        return os.cpu_count() or 2


def _native_check(model: Model, parts, deadline: float | None, threads: int | None,
                  max_configs: int) -> tuple[dict, set]:
    """Keys take turns of NATIVE_SLICE_S seconds in the C kernel on as many threads as
    this process may use cores (the kernel runs without the GIL), as Porcupine runs a
    goroutine per key: an easy violation is found while a hard valid key is still being
    searched, and the first key found not linearizable stops the others."""
    cancel = bytearray(1)
    results: dict[int, KeyResult] = {}
    if not parts:
        return results, set()
    pending = deque((i, KeySearch(model, p, key)) for i, (key, p) in enumerate(parts))
    lock = threading.Lock()
    sliced = len(pending) > 1
    errors: list[BaseException] = []

    def worker() -> None:
        while True:
            with lock:
                if not pending or cancel[0]:
                    return
                i, s = pending.popleft()
            try:
                done = s.step(0, deadline or 0.0, max_configs, cancel,
                              time.monotonic() + NATIVE_SLICE_S if sliced else 0.0)
            except BaseException as exc:  # a model's step raised: stop, and say so below
                errors.append(exc)
                cancel[0] = 1
                return
            if not done:
                with lock:
                    pending.append((i, s))
                continue
            r = s.result()
            results[i] = r
            if r.valid is False:
                cancel[0] = 1
    n = threads or min(len(pending), _cores())
    if n <= 1:
        worker()
    else:
        pool = [threading.Thread(target=worker, name=f"wgl-{k}") for k in range(n)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    if errors:
        raise errors[0]
    return results, set()


# Configurations one key may explore before "unknown": about 1 GB of cache. A violation is
# found in far fewer; a search this large is exponential and would only exhaust memory.
MAX_CONFIGS = 20_000_000


def check(model: Model, ops: Iterable[Operation], timeout_s: float | None = None,
          keyed: list[tuple[Any, list[Operation]]] | None = None, *, engine: str = "auto",
          threads: int | None = None, max_configs: int = MAX_CONFIGS) -> CheckResult:
    """Check every partition and stop at the first that is not linearizable.

    ``engine``: ``native`` (the C kernel, checkers/_wgl.c), ``python`` (the
    reference search), ``auto`` (native when built). Keys left unfinished
    are "unknown" with the reason; the verdict is then False if a key
    failed, else "unknown".
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    parts = keyed if keyed is not None else list(enumerate(model.partition(list(ops))))
    if engine not in ("auto", "native", "python"):
        raise ValueError(f"engine must be auto, native or python, not {engine!r}")
    if engine == "auto":
        engine = "native" if AVAILABLE else "python"
    if engine == "native":
        results, unfinished = _native_check(model, parts, deadline, threads, max_configs)
    else:
        results, unfinished = _python_check(model, parts, deadline)
    failed = any(r.valid is False for r in results.values())
    for i in range(len(parts)):
        key, p = parts[i]
        r = results.get(i)
        if r is None or i in unfinished:
            results[i] = KeyResult(key, "unknown", len(p))
            r = results[i]
        if r.valid == "unknown" and not r.reason:
            r.reason = ("stopped: another key is not linearizable" if failed
                        else f"the search budget ran out ({r.explored:,} configurations)")
    ordered = [results[i] for i in range(len(parts))]
    return CheckResult(combine(r.valid for r in ordered), ordered)


def combine(verdicts: Iterable[bool | str]) -> bool | str:
    verdicts = list(verdicts)
    if any(v is False for v in verdicts):
        return False
    if any(v == "unknown" for v in verdicts):
        return "unknown"
    return True
