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


def register(initial=None) -> Model:
    def step(state, inp, out):
        if inp[0] == "cas":
            raise ValueError("the register model has no cas; use cas-register")
        return _register_step(state, inp, out)
    return Model("register", lambda: initial, step, describe=_describe)


def cas_register(initial=None) -> Model:
    return Model("cas-register", lambda: initial, _register_step, describe=_describe)


MODELS = {"register": register, "cas-register": cas_register}
