"""The native search (``checkers/_wgl.c``) behind the same interface as the Python one.

``native_search(model, ops, key, ...)`` returns the ``KeyResult`` that
``linearizability._search`` would: same verdict, same deepest partial
linearization (recorded only when strictly deeper, in both), same
counterexample. The differential tests (tests/checkers/test_wgl_native.py) hold the
two to that.

Encoding: events are the entry list in order, an op id for a call and
``-(id) - 1`` for a return. Models with ``native == "register"`` (register,
cas-register, etcd) are stepped in C on interned value ids, and ``"kv"``
(Porcupine's get/put/append on strings, one key) on strings interned in C,
both without the GIL; any other model is stepped by a Python callback on
interned states, called once per (operation, state) and memoised in C.

Why C and not numba: the search is pointer chasing over a linked list and
a hash set of variable-length bitsets, which numba compiles poorly (no
typed hash set of arrays) and would add a 150 MB dependency with a JIT
pause per process; a setuptools extension is built once by ``make setup``.
"""
from __future__ import annotations

from array import array
from typing import Any

from .lin_model import INF, UNKNOWN, KeyResult, Model, Operation, invalid

try:
    from . import _wgl
except ImportError:  # not built: the Python search serves
    _wgl = None

AVAILABLE = _wgl is not None
REGISTER, CALLBACK, KV = 0, 1, 2
F_READ, F_WRITE, F_CAS = 0, 1, 2
KV_GET, KV_PUT, KV_APPEND = 0, 1, 2
OUT_OK, OUT_UNKNOWN, OUT_FAIL = 0, 1, 2


def events(ops: list[Operation]) -> array:
    """The entry list: calls and returns by time, a call before a return at the same instant.

    The reference for ``_wgl.events``, which the kernel's callers use (the differential
    tests hold the two equal)."""
    order = []
    for i, op in enumerate(ops):
        order.append((op.call, 0, i, i))
        order.append((op.ret, 1, i, -i - 1))
    order.sort(key=lambda e: (e[0], e[1], e[2]))
    return array("i", [e[3] for e in order])


class _Interner:
    __slots__ = ("ids", "values")

    def __init__(self) -> None:
        self.ids: dict = {}
        self.values: list = []

    def __call__(self, v) -> int:
        # A dict key is equal where Python's == is (1 == 1.0 == True), as the models compare.
        i = self.ids.get(v)
        if i is None:
            i = self.ids[v] = len(self.values)
            self.values.append(v)
        return i


def _register_arrays(ops: list[Operation], intern: _Interner):
    f, a, b, out = array("i"), array("i"), array("i"), array("i")
    for op in ops:
        kind, value = op.input
        o = OUT_UNKNOWN if op.output is UNKNOWN else (OUT_FAIL if op.output == "fail" else OUT_OK)
        if kind == "read":
            f.append(F_READ)
            a.append(intern(op.output) if op.output is not UNKNOWN else 0)
            b.append(0)
        elif kind == "write":
            f.append(F_WRITE)
            a.append(intern(value))
            b.append(0)
        elif kind == "cas":
            f.append(F_CAS)
            a.append(intern(value[0]))
            b.append(intern(value[1]))
        else:
            raise ValueError(f"the register kernel has no operation {kind!r}")
        out.append(o)
    return f, a, b, out


_KV_CODES = {"get": KV_GET, "put": KV_PUT, "append": KV_APPEND}


def _kv_arrays(ops: list[Operation], init) -> tuple | None:
    """The kv kernel's encoding, or None where a value is not a string (the callback serves)."""
    if not isinstance(init, str):
        return None
    ids = {init: 0}  # value -> id, in the order first seen
    f, a, out = [], [], []
    codes = _KV_CODES
    for op in ops:
        kind, _key, value = op.input
        o = op.output
        v = o if kind == "get" else value
        code = codes.get(kind)
        if code is None or (v is not UNKNOWN and not isinstance(v, str)):
            return None
        f.append(code)
        a.append(0 if v is UNKNOWN else ids.setdefault(v, len(ids)))
        out.append(OUT_UNKNOWN if o is UNKNOWN else OUT_OK)
    return array("i", f), array("i", a), array("i", out), [v.encode() for v in ids]


class KeySearch:
    """One key's search in C, run in slices (``step``) or to the end (``finish``)."""

    def __init__(self, model: Model, ops: list[Operation], key: Any = None) -> None:
        if _wgl is None:
            raise RuntimeError("the native checker (checkers/_wgl.c) is not built: run make setup")
        self.model, self.key, self.total = model, key, len(ops)
        self.ops = ops = model.prepare(ops)
        self.search = None
        if not ops:
            return
        ev = _wgl.events(array("d", [op.call for op in ops]), array("d", [op.ret for op in ops]))
        if model.native == "register":
            intern = _Interner()
            init = intern(model.init())
            f, a, b, out = _register_arrays(ops, intern)
            self.search = _wgl.Search(ev, len(ops), REGISTER, f, a, b, out, None, init)
        elif model.native == "kv" and (enc := _kv_arrays(ops, model.init())) is not None:
            f, a, out, strings = enc
            self.search = _wgl.Search(ev, len(ops), KV, f, a, b"", out, None, 0, strings)
        else:
            states = _Interner()
            init = states(model.init())
            values, step = states.values, model.step

            def callback(i: int, s: int) -> int:
                op = ops[i]
                ok, ns = step(values[s], op.input, op.output)
                return states(ns) if ok else -1
            self.search = _wgl.Search(ev, len(ops), CALLBACK, b"", b"", b"", b"", callback, init)

    def step(self, max_steps: int = 0, deadline: float = 0.0, max_configs: int = 0,
             cancel: bytearray | None = None, pause_at: float = 0.0) -> bool:
        """Run up to ``max_steps`` steps (0: no limit) or until ``pause_at``
        (``time.monotonic()`` seconds; 0: none); True once decided or stopped."""
        if self.search is None:
            return True
        kw = {"max_steps": max_steps, "deadline": deadline or 0.0, "max_configs": max_configs,
              "pause_at": pause_at}
        if cancel is not None:
            kw["cancel"] = cancel
        return self.search.run(**kw) != -1

    def result(self) -> KeyResult:
        if self.search is None:
            return KeyResult(self.key, True, self.total)
        code, explored, best, stuck = self.search.result()
        if code == 1:
            return KeyResult(self.key, True, self.total, explored=explored)
        if code == 0:
            ops = self.ops
            return invalid(self.model, self.key, self.total, ops, [ops[i] for i in best],
                           ops[stuck] if stuck >= 0 else None, explored)
        return KeyResult(self.key, "unknown", self.total, explored=explored)


def native_search(model: Model, ops: list[Operation], key: Any = None, *,
                  deadline: float = 0.0, max_configs: int = 0,
                  cancel: bytearray | None = None) -> KeyResult:
    """One key's search in C to the end; ``deadline`` is ``time.monotonic()`` seconds (0: none)."""
    s = KeySearch(model, ops, key)
    s.step(0, deadline, max_configs, cancel)
    return s.result()


__all__ = ["AVAILABLE", "KeySearch", "native_search", "events", "INF"]
