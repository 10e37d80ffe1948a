"""Sequential models for the linearizability checker, and how history rows become operations.

| model | operations | a ``fail`` | an ``info`` / open op |
|---|---|---|---|
| register | read, write | did not happen (dropped) | may have happened |
| cas-register | read, write, cas | did not happen (dropped) | may have happened |
| etcd | read, write, cas | a failed cas observes "the register did not hold the expected value" | may have happened |
| kv | get, put, append on string values per key | did not happen | may have happened |

``register`` and ``cas-register`` follow Knossos; ``etcd`` and ``kv`` follow
the models Porcupine's test corpus was recorded against
(``shared/testdata/porcupine/VERDICTS.md``). Registers start at ``initial``
(default ``None``, Jepsen's nil); kv values start as the empty string.

Inputs are ``(f, value)`` (kv: ``(f, key, value)``); outputs are the value
read, ``"ok"``/``"fail"`` for an etcd cas, ``None`` otherwise, and
``UNKNOWN`` for an indeterminate operation. An indeterminate write takes
effect or not; an indeterminate cas whose expected value does not match is
a no-op.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from .history import HistoryError, pair
from .linearizability import INF, UNKNOWN, Model, Operation


def _register_step(state, inp, out):
    f, value = inp
    if f == "read":
        return (out is UNKNOWN or out == state), state
    if f == "write":
        return True, value
    if f == "cas":
        expected, new = value
        if state == expected:
            return (out is UNKNOWN or out != "fail"), new
        return (out is UNKNOWN or out == "fail"), state
    raise ValueError(f"unknown register operation {f!r}")


def _describe(op: Operation) -> str:
    f = op.input[0]
    value = op.input[-1]
    out = "?" if op.output is UNKNOWN else op.output
    key = f" {op.input[1]!r}" if len(op.input) == 3 else ""
    if f in ("read", "get"):
        return f"{f}{key} -> {out!r}"
    if f == "cas":
        tail = " (indeterminate)" if op.output is UNKNOWN else (" failed" if op.output == "fail" else "")
        return f"cas {value[0]!r}->{value[1]!r}{tail}"
    return f"{f}{key} {value!r}" + (" (indeterminate)" if op.output is UNKNOWN else "")


def drop_unobserved_indeterminate(ops: list[Operation]) -> list[Operation]:
    """Remove indeterminate writes and cas whose new value no operation observes.

    Sound for models where only a read or a successful cas observes a value:
    such an operation may be linearized "never" (it is indeterminate), and a
    linearization that applied it put a value in the register that nothing
    reads and no cas expects. Not used for ``etcd``, whose failed cas observes
    that a value was *absent*. Without it every unanswered write doubles the
    search space.
    """
    observed = set()
    for op in ops:
        f, value = op.input
        if f == "read" and op.output is not UNKNOWN:
            observed.add(repr(op.output))
        elif f == "cas":
            observed.add(repr(value[0]))
    out = []
    for op in ops:
        f, value = op.input
        if op.output is UNKNOWN and f in ("write", "cas"):
            if repr(value if f == "write" else value[1]) not in observed:
                continue
        out.append(op)
    return out


class HistoryModel:
    """A model plus the rules that turn paired history rows into its operations."""

    name = ""
    partitioned_by_key = True

    def model(self, partitioned: bool = True) -> Model:
        raise NotImplementedError

    def operation(self, inv: dict, done: dict | None) -> Operation | None:
        raise NotImplementedError

    def operations(self, rows: Iterable[dict], partition: bool = True) -> list[tuple[object, list[Operation]]]:
        by_key: dict = defaultdict(list)
        for inv, done in pair(rows):
            op = self.operation(inv, done)
            if op is not None:
                by_key[inv.get("key") if (partition and self.partitioned_by_key) else None].append(op)
        return sorted(by_key.items(), key=lambda kv: repr(kv[0]))


class RegisterModel(HistoryModel):
    """Knossos's register and cas-register."""

    def __init__(self, cas: bool, initial=None, fail_is_observation: bool = False) -> None:
        self.cas = cas
        self.initial = initial
        self.fail_is_observation = fail_is_observation
        self.name = "etcd" if fail_is_observation else ("cas-register" if cas else "register")

    def model(self, partitioned: bool = True) -> Model:
        initial = self.initial
        return Model(self.name, lambda: initial, _register_step, describe=_describe,
                     prepare=(lambda ops: ops) if self.fail_is_observation
                     else drop_unobserved_indeterminate)

    def operation(self, inv, done):
        f = inv["f"]
        typ = done["type"] if done is not None else "info"
        where = f"history row {inv.get('index')}"
        if f not in ("read", "write", "cas") or (f == "cas" and not self.cas):
            raise HistoryError(f"{where}: the {self.name} model has no operation {f!r}")
        ret = done["time"] if done is not None else INF
        if f == "read":
            if typ != "ok":
                return None  # a read without a value constrains nothing
            return Operation(inv["process"], ("read", None), done.get("value"), inv["time"], ret,
                             inv.get("index", -1))
        if f == "write":
            inp = ("write", inv.get("value"))
        else:
            value = inv.get("value")
            if not isinstance(value, (list, tuple)) or len(value) != 2:
                raise HistoryError(f"{where}: cas value must be [expected, new], got {value!r}")
            inp = ("cas", (value[0], value[1]))
        if typ == "fail":
            if f == "cas" and self.fail_is_observation:
                return Operation(inv["process"], inp, "fail", inv["time"], ret, inv.get("index", -1))
            return None
        if typ == "info":
            return Operation(inv["process"], inp, UNKNOWN, inv["time"], INF, inv.get("index", -1))
        return Operation(inv["process"], inp, "ok" if f == "cas" else None, inv["time"], ret,
                         inv.get("index", -1))


def _kv_step(state, inp, out):
    f, key, value = inp
    current = dict(state).get(key, "") if isinstance(state, tuple) else state
    if f == "get":
        return (out is UNKNOWN or out == current), state
    new = value if f == "put" else current + value
    if isinstance(state, tuple):
        d = dict(state)
        d[key] = new
        return True, tuple(sorted(d.items()))
    return True, new


class KvModel(HistoryModel):
    """Porcupine's key-value model: get, put, append on strings.

    Partitioned, the state of one key is its string; unpartitioned, the state
    is the whole map (a sorted tuple of items).
    """

    name = "kv"

    def model(self, partitioned: bool = True) -> Model:
        return Model("kv", (lambda: "") if partitioned else (lambda: ()), _kv_step, describe=_describe)

    def operation(self, inv, done):
        f = inv["f"]
        if f not in ("get", "put", "append"):
            raise HistoryError(f"history row {inv.get('index')}: the kv model has no operation {f!r}")
        key = inv.get("key")
        typ = done["type"] if done is not None else "info"
        if typ == "fail" or (f == "get" and typ != "ok"):
            return None
        inp = (f, key, inv.get("value") if f != "get" else None)
        if typ == "info":
            return Operation(inv["process"], inp, UNKNOWN, inv["time"], INF, inv.get("index", -1))
        out = done.get("value") if f == "get" else None
        if f == "get" and out is None:
            out = ""
        return Operation(inv["process"], inp, out, inv["time"], done["time"], inv.get("index", -1))


def get_model(name: str, initial=None) -> HistoryModel:
    if name == "register":
        return RegisterModel(cas=False, initial=initial)
    if name == "cas-register":
        return RegisterModel(cas=True, initial=initial)
    if name == "etcd":
        return RegisterModel(cas=True, initial=initial, fail_is_observation=True)
    if name == "kv":
        return KvModel()
    raise ValueError(f"unknown model {name!r}; known: register, cas-register, etcd, kv")


MODELS = ("register", "cas-register", "etcd", "kv")


# Convenience for simple callers (the simulator's register history).
def cas_register(initial=None) -> Model:
    return RegisterModel(cas=True, initial=initial).model()


def register(initial=None) -> Model:
    return RegisterModel(cas=False, initial=initial).model()
