"""Sequential models for the linearizability checker.

- ``register``: read / write on a single value.
- ``cas-register``: read / write / cas (compare-and-set).
Operation inputs are ``(f, value)``: ``("read", None)``, ``("write", v)``,
``("cas", (expected, new))``. Outputs: the value read; ``None`` for write and
cas; ``UNKNOWN`` for an indeterminate operation, which may take effect or be
a no-op (an indeterminate cas whose expected value does not match is a
no-op, exactly as if it never happened).
"""
from __future__ import annotations

from .linearizability import UNKNOWN, Model, Operation


def _register_step(state, inp, out):
    f, value = inp
    if f == "read":
        return (out is UNKNOWN or out == state), state
    if f == "write":
        return True, value
    if f == "cas":
        expected, new = value
        if state == expected:
            return True, new
        return out is UNKNOWN, state
    raise ValueError(f"register model: unknown operation {f!r}")


def _describe(op: Operation) -> str:
    f, value = op.input
    out = "?" if op.output is UNKNOWN else op.output
    if f == "read":
        return f"read -> {out!r}"
    if f == "write":
        return f"write {value!r}" + (" (indeterminate)" if op.output is UNKNOWN else "")
    return f"cas {value[0]!r}->{value[1]!r}" + (" (indeterminate)" if op.output is UNKNOWN else "")


def drop_unobserved_indeterminate(ops: list[Operation]) -> list[Operation]:
    """Remove indeterminate writes and cas whose new value no operation ever observed.

    Sound: such an operation may be linearized "never" (it is indeterminate), and a
    linearization that did apply it puts a value in the register that no read returns
    and no cas expects, so the ops between it and the next write are unaffected by
    leaving it out. Without this, every unanswered write doubles the search space.
    """
    observed = set()
    for op in ops:
        f, value = op.input
        if f == "read" and op.output is not UNKNOWN:
            observed.add(_key(op.output))
        elif f == "cas":
            observed.add(_key(value[0]))
    out = []
    for op in ops:
        f, value = op.input
        if op.output is UNKNOWN and f in ("write", "cas"):
            new = value if f == "write" else value[1]
            if _key(new) not in observed:
                continue
        out.append(op)
    return out


def _key(v):
    return repr(v)


def register(initial=None) -> Model:
    def step(state, inp, out):
        if inp[0] == "cas":
            raise ValueError("the register model has no cas; use cas-register")
        return _register_step(state, inp, out)
    return Model("register", lambda: initial, step, describe=_describe,
                 prepare=drop_unobserved_indeterminate)


def cas_register(initial=None) -> Model:
    return Model("cas-register", lambda: initial, _register_step, describe=_describe,
                 prepare=drop_unobserved_indeterminate)


MODELS = {"register": register, "cas-register": cas_register}
