"""Which consistency models a history's anomalies rule out, as Elle reasons about it.

Three small graphs, facts from the literature Elle cites (Adya; Adya, Liskov
and O'Neil; Bailis et al.; Cerone et al.; Daudjee and Salem):

- ``IMPLIES_ANOMALY``: an anomaly that is also an instance of others (a G0
  cycle is a G1c cycle and a G0-process one; G1a, G1c are kinds of G1; a
  process anomaly is also a realtime one, processes being single-threaded);
- ``IMPLIES_MODEL``: a model whose histories all satisfy another (strict
  serializable implies serializable, which implies snapshot isolation and
  repeatable read, ...);
- ``PROSCRIBES``: the anomalies a model rules out directly, beyond those of
  the models it implies.

``boundary(anomalies)``: every model an anomaly makes impossible (a model that
proscribes it or one it implies, and every model that implies such a model),
split into the weakest of them (``not``) and the rest (``also_not``).
"""
from __future__ import annotations

IMPLIES_ANOMALY = {
    "G0": ("G1c", "G0-process"),
    "G0-process": ("G1c-process", "G0-realtime"),
    "G0-realtime": ("G1c-realtime",),
    "G1a": ("G1",),
    "G1b": ("G1",),
    "G1c": ("G1", "G1c-process"),
    "G1c-process": ("G1c-realtime", "G1-process"),
    "G1c-realtime": ("G1-realtime",),
    "G1": ("G1-process",),
    "G1-process": ("G1-realtime",),
}

IMPLIES_MODEL = {
    "strict-serializable": ("serializable", "linearizable", "snapshot-isolation",
                            "strong-snapshot-isolation", "strong-session-serializable",
                            "session-serializable"),
    "serializable": ("repeatable-read", "snapshot-isolation", "view-serializable",
                     "update-serializable"),
    "update-serializable": ("forward-consistent-view",),
    "forward-consistent-view": ("consistent-view",),
    "consistent-view": ("cursor-stability", "monotonic-view"),
    "cursor-stability": ("read-committed",),
    "monotonic-view": ("read-committed",),
    "monotonic-snapshot-read": ("read-committed",),
    "monotonic-atomic-view": ("read-committed",),
    "repeatable-read": ("cursor-stability", "monotonic-atomic-view"),
    "read-committed": ("read-uncommitted",),
    "snapshot-isolation": ("forward-consistent-view", "monotonic-atomic-view",
                           "monotonic-snapshot-read", "parallel-snapshot-isolation", "prefix"),
    "parallel-snapshot-isolation": ("causal-cerone", "ROLA"),
    "prefix": ("causal-cerone",),
    "causal-cerone": ("read-atomic",),
    "ROLA": ("read-atomic",),
    "read-atomic": ("monotonic-atomic-view",),
    "session-serializable": ("1SR",),
    "strong-session-read-uncommitted": ("read-uncommitted",),
    "strong-session-read-committed": ("read-committed", "strong-session-read-uncommitted"),
    "strong-read-uncommitted": ("strong-session-read-uncommitted",),
    "strong-read-committed": ("strong-session-read-committed", "strong-read-uncommitted"),
    "strong-session-serializable": ("serializable", "strong-session-snapshot-isolation"),
    "strong-session-snapshot-isolation": ("snapshot-isolation", "strong-session-read-committed"),
    "strong-snapshot-isolation": ("strong-session-snapshot-isolation", "strong-read-committed"),
    "linearizable": ("sequential",),
    "sequential": ("causal",),
    "causal": ("writes-follow-reads", "PRAM"),
    "PRAM": ("monotonic-reads", "monotonic-writes", "read-your-writes"),
}

PROSCRIBES = {
    "read-uncommitted": ("G0",),
    "read-committed": ("G1",),
    "cursor-stability": ("G1",),
    "monotonic-view": ("G1",),
    "monotonic-snapshot-read": ("G1",),
    "consistent-view": ("G1",),
    "forward-consistent-view": ("G1",),
    "update-serializable": ("G1",),
    "repeatable-read": ("G1",),
    "snapshot-isolation": ("G1",),
    "serializable": ("G1",),
    "strict-serializable": ("G1", "G1c-realtime"),
    "causal-cerone": ("G1a",),
    "parallel-snapshot-isolation": ("G1a",),
    "prefix": ("G1a",),
    "read-atomic": ("G1a",),
    "strong-session-read-uncommitted": ("G0-process",),
    "strong-session-read-committed": ("G1c-process",),
    "strong-read-uncommitted": ("G0-realtime",),
    "strong-read-committed": ("G1c-realtime",),
    "strong-session-snapshot-isolation": ("G1-process",),
    "strong-snapshot-isolation": ("G1-realtime",),
    "strong-session-serializable": ("G1-process",),
}


def _closure(start, edges: dict) -> set:
    seen, todo = set(), list(start)
    while todo:
        x = todo.pop()
        if x not in seen:
            seen.add(x)
            todo.extend(edges.get(x, ()))
    return seen


_IMPLIED_BY: dict = {}
for _m, _weaker in IMPLIES_MODEL.items():
    for _w in _weaker:
        _IMPLIED_BY.setdefault(_w, []).append(_m)


def boundary(anomalies) -> dict:
    """``{"not": weakest models ruled out, "also_not": the stronger ones}`` (sorted)."""
    present = _closure(anomalies, IMPLIES_ANOMALY)
    direct = {m for m, bad in PROSCRIBES.items() if present & set(bad)}
    impossible = _closure(direct, _IMPLIED_BY)
    weakest = {m for m in impossible
               if not (_closure(IMPLIES_MODEL.get(m, ()), IMPLIES_MODEL) & impossible)}
    return {"not": sorted(weakest), "also_not": sorted(impossible - weakest)}


def sentence(rules_out: dict | None) -> str | None:
    """``boundary``'s answer in words, or None when the anomalies rule out no model."""
    rules_out = rules_out or {}
    if not rules_out.get("not"):
        return None
    also = rules_out.get("also_not") or []
    return (f"not {', '.join(rules_out['not'])}"
            + (f" (nor the {len(also)} models stronger: {', '.join(also)})" if also else ""))
