"""Sequential models for the linearizability checker, and how history rows become operations.

| model | operations | a ``fail`` | an ``info`` / open op |
|---|---|---|---|
| register | read, write | did not happen (dropped) | may have happened |
| cas-register | read, write, cas | did not happen (dropped) | may have happened |
| etcd | read, write, cas | a failed cas observes "the register did not hold the expected value" | may have happened |
| kv | get, put, append on string values per key | did not happen | may have happened |
| mutex | acquire, release | did not happen | may have happened |
| multi-register | txn of reads and writes of many registers | did not happen | may have happened |

``register``, ``cas-register``, ``mutex`` and ``multi-register`` follow Knossos; ``etcd`` and
``kv`` follow the models Porcupine's test corpus was recorded against
(``shared/testdata/porcupine/VERDICTS.md``). Registers start at ``initial``
(default ``None``, Jepsen's nil); kv values start as the empty string.

A read that returns nil: Knossos's register and cas-register take it as a
read whose value is not known (``nil_read="unknown"``, the default for
histories from outside); chaoskraft's own runs record a nil read only when
the key holds no value, so their analysis checks it as a value
(``nil_read="value"``). ``etcd`` always checks it as a value.

Operations are ordered by their position in the history (``index``), as
Knossos orders them: a history is the order in which a single recorder saw
invocations and completions; ``time`` is for people.

Inputs are ``(f, value)`` (kv: ``(f, key, value)``); outputs are the value
read, ``"ok"``/``"fail"`` for an etcd cas, ``None`` otherwise, and
``UNKNOWN`` for an indeterminate operation. An indeterminate write takes
effect or not; an indeterminate cas whose expected value does not match is
a no-op.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from .edn import hashable
from .history import HistoryError, pair
from .lin_model import INF, UNKNOWN, Model, Operation


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
        keyed = partition and self.partitioned_by_key
        operation = self.operation
        for inv, done in pair(_indexed(rows)):
            op = operation(inv, done)
            if op is not None:
                by_key[hashable(inv.get("key")) if keyed else None].append(op)
        return sorted(by_key.items(), key=lambda kv: repr(kv[0]))


def _indexed(rows: Iterable[dict]) -> Iterable[dict]:
    """Rows with their position as ``index`` where they carry none."""
    for i, row in enumerate(rows):
        if "index" not in row:
            row = {**row, "index": i}
        yield row


def _where(row: dict) -> str:
    return row.get("_src") or f"history row {row.get('index')}"


def _span(inv: dict, done: dict | None) -> tuple[int, float]:
    return inv["index"], (done["index"] if done is not None and done["type"] != "info" else INF)


class RegisterModel(HistoryModel):
    """Knossos's register and cas-register; Porcupine's etcd register."""

    def __init__(self, cas: bool, initial=None, fail_is_observation: bool = False,
                 nil_read: str = "unknown") -> None:
        if nil_read not in ("unknown", "value"):
            raise ValueError(f"nil_read must be 'unknown' or 'value', not {nil_read!r}")
        self.cas = cas
        self.initial = hashable(initial)
        self.fail_is_observation = fail_is_observation
        self.nil_read = "value" if fail_is_observation else nil_read
        self.name = "etcd" if fail_is_observation else ("cas-register" if cas else "register")

    def model(self, partitioned: bool = True) -> Model:
        initial = self.initial
        return Model(self.name, lambda: initial, _register_step, describe=_describe,
                     prepare=(lambda ops: ops) if self.fail_is_observation
                     else drop_unobserved_indeterminate, native="register")

    def operation(self, inv, done):
        f = inv["f"]
        typ = done["type"] if done is not None else "info"
        if f not in ("read", "write", "cas") or (f == "cas" and not self.cas):
            raise HistoryError(f"{_where(inv)}: the {self.name} model has no operation {f!r}"
                               + (" (try --model cas-register)" if f == "cas" else ""))
        call, ret = _span(inv, done)
        if f == "read":
            if typ != "ok":
                return None  # a read without a value constrains nothing
            value = hashable(done.get("value"))
            if value is None and self.nil_read == "unknown":
                return None  # Knossos: a nil read is a read whose value is not known
            return Operation(inv["process"], ("read", None), value, call, ret, inv["index"])
        if f == "write":
            inp = ("write", hashable(inv.get("value")))
        else:
            value = inv.get("value")
            if not isinstance(value, (list, tuple)) or len(value) != 2:
                raise HistoryError(f"{_where(inv)}: cas value must be [expected new], "
                                   f"got {value!r}")
            inp = ("cas", (hashable(value[0]), hashable(value[1])))
        if typ == "fail":
            if f == "cas" and self.fail_is_observation:
                return Operation(inv["process"], inp, "fail", call, ret, inv["index"])
            return None
        if typ == "info":
            return Operation(inv["process"], inp, UNKNOWN, call, INF, inv["index"])
        return Operation(inv["process"], inp, "ok" if f == "cas" else None, call, ret,
                         inv["index"])


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
        return Model("kv", (lambda: "") if partitioned else (lambda: ()), _kv_step, describe=_describe,
                     native="kv" if partitioned else None)

    def operation(self, inv, done):
        f = inv["f"]
        if f not in _KV_OPS:
            raise HistoryError(f"{_where(inv)}: the kv model has no operation {f!r}")
        typ = done["type"] if done is not None else "info"
        if typ == "fail" or (f == "get" and typ != "ok"):
            return None
        key = hashable(inv.get("key"))
        if typ == "info":
            return Operation(inv["process"], (f, key, hashable(inv.get("value"))), UNKNOWN,
                             inv["index"], INF, inv["index"])
        if f == "get":
            inp = (f, key, None)
            out = hashable(done.get("value"))
            if out is None:
                out = ""
        else:
            inp = (f, key, hashable(inv.get("value")))
            out = None
        return Operation(inv["process"], inp, out, inv["index"], done["index"], inv["index"])


_KV_OPS = frozenset(("get", "put", "append"))


def _mutex_step(state, inp, out):
    f = inp[0]
    if f == "acquire":
        return (not state), True
    if f == "release":
        return state, False
    raise ValueError(f"unknown mutex operation {f!r}")


class MutexModel(HistoryModel):
    """Knossos's mutex: acquire when free, release when held; one lock for the history."""

    name = "mutex"
    partitioned_by_key = False

    def model(self, partitioned: bool = True) -> Model:
        return Model("mutex", lambda: False, _mutex_step,
                     describe=lambda op: op.input[0] + (" (indeterminate)"
                                                        if op.output is UNKNOWN else ""))

    def operation(self, inv, done):
        f = inv["f"]
        if f not in ("acquire", "release"):
            raise HistoryError(f"{_where(inv)}: the mutex model has no operation {f!r}")
        typ = done["type"] if done is not None else "info"
        if typ == "fail":
            return None
        call, ret = _span(inv, done)
        return Operation(inv["process"], (f, None), UNKNOWN if typ == "info" else None, call,
                         ret, inv["index"])


_READ, _WRITE = ("r", "read"), ("w", "write")


def _multi_step(state, inp, out):
    """A transaction over many registers, micro-operation by micro-operation: a read of
    nil says nothing (Knossos), any other read must see the register's value."""
    regs, default = dict(state[0]), state[1]
    for f, k, v in inp[1]:
        if f == "r":
            if v is not None and regs.get(k, default) != v:
                return False, state
        else:
            regs[k] = v
    return True, (tuple(sorted(regs.items(), key=repr)), default)


def _describe_registers(state) -> str:
    regs, default = state
    shown = ", ".join(f"{k!r} {v!r}" for k, v in regs)
    return "{" + shown + "}" + (f" (others {default!r})" if default is not None else "")


def _describe_txn(op: Operation) -> str:
    mops = " ".join(f"[{f} {k!r} {v!r}]" for f, k, v in op.input[1])
    return f"txn {mops}" + (" (indeterminate)" if op.output is UNKNOWN else "")


class MultiRegisterModel(HistoryModel):
    """Knossos's multi-register: ``txn`` operations of ``[:read k v]`` / ``[:write k v]``
    (or ``:r`` / ``:w``) over many registers, one state for the whole history.

    ``initial``: a map of the registers' first values (``{"x": 0, "y": 0}``), or one value
    for every register (default nil)."""

    name = "multi-register"
    partitioned_by_key = False

    def __init__(self, initial=None) -> None:
        if isinstance(initial, dict):
            self.initial = (tuple(sorted(((hashable(k), hashable(v)) for k, v in initial.items()),
                                         key=repr)), None)
        else:
            self.initial = ((), hashable(initial))

    def model(self, partitioned: bool = True) -> Model:
        initial = self.initial
        return Model(self.name, lambda: initial, _multi_step, describe=_describe_txn,
                     describe_state=_describe_registers)

    def operation(self, inv, done):
        if inv["f"] != "txn":
            raise HistoryError(f"{_where(inv)}: the multi-register model has no operation "
                               f"{inv['f']!r}; it takes txn operations of reads and writes")
        typ = done["type"] if done is not None else "info"
        if typ == "fail":
            return None
        row = done if typ == "ok" else inv
        value = row.get("value")
        if not isinstance(value, list):
            raise HistoryError(f"{_where(row)}: a txn's value must be a list of [read k v] or "
                               f"[write k v], got {value!r:.80}")
        mops = []
        for j, m in enumerate(value):
            if not (isinstance(m, (list, tuple)) and len(m) == 3 and m[0] in _READ + _WRITE):
                raise HistoryError(f"{_where(row)}: micro-operation {j} must be [read k v] or "
                                   f"[write k v], got {m!r:.80}")
            mops.append(("r" if m[0] in _READ else "w", hashable(m[1]), hashable(m[2])))
        call, ret = _span(inv, done)
        return Operation(inv["process"], ("txn", tuple(mops)),
                         UNKNOWN if typ == "info" else None, call, ret, inv["index"])


def get_model(name: str, initial=None, nil_read: str = "unknown") -> HistoryModel:
    if name == "register":
        return RegisterModel(cas=False, initial=initial, nil_read=nil_read)
    if name == "cas-register":
        return RegisterModel(cas=True, initial=initial, nil_read=nil_read)
    if name == "etcd":
        return RegisterModel(cas=True, initial=initial, fail_is_observation=True)
    if name == "kv":
        return KvModel()
    if name == "mutex":
        return MutexModel()
    if name == "multi-register":
        return MultiRegisterModel(initial)
    raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")


MODELS = ("register", "cas-register", "etcd", "kv", "mutex", "multi-register")


def keys_without_ok(rows: Iterable[dict], partition: bool = True) -> tuple[int, set]:
    """(ok operations in all, keys that have client operations but no ok one).

    The gate of Jepsen's stats checker: a check over operations none of which
    succeeded tested nothing, so it must not read valid.
    """
    seen: set = set()
    ok: set = set()
    total = 0
    for row in rows:
        if row.get("process") == "nemesis" or row.get("type") == "invoke":
            continue
        key = hashable(row.get("key")) if partition else None
        seen.add(key)
        if row.get("type") == "ok":
            ok.add(key)
            total += 1
    return total, seen - ok


# Convenience for simple callers (the simulator's register history).
def cas_register(initial=None) -> Model:
    return RegisterModel(cas=True, initial=initial).model()


def register(initial=None) -> Model:
    return RegisterModel(cas=False, initial=initial).model()
