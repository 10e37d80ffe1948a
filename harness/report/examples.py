"""Anomaly examples: the history indexes they name and one plain sentence each."""
from __future__ import annotations


def _indexes(example, sends: dict | None = None) -> list[int]:
    """History indexes an example names; for one that names only values (duplicate,
    inconsistent-offsets), the sends of those values."""
    if not isinstance(example, dict):
        return []
    found = [v for k, v in example.items() if k.endswith("index") and isinstance(v, int)]
    found += [s["index"] for s in example.get("cycle") or () if isinstance(s, dict)
              and isinstance(s.get("index"), int)]  # a dependency cycle's operations
    if not found and sends is not None and "key" in example:
        found = [sends[p] for p in _named_sends(example) if p in sends]
    return found


def _named_sends(example) -> list[tuple[str, object]]:
    """(key as text, value) of the sends an example names by value only."""
    if not isinstance(example, dict) or "key" not in example or any(
            k.endswith("index") and isinstance(v, int) for k, v in example.items()):
        return []
    values = example.get("values") or ([example["value"]] if "value" in example else [])
    return [(str(example["key"]), v) for v in values]


def anomalies(results: dict) -> list[tuple[str, int, list]]:
    """(class, count, examples) of every failing checker."""
    out = []
    for name, r in results.get("checkers", {}).items():
        if "anomalies" in r:  # a checker that names anomaly classes (the queue's)
            for a, info in r.get("anomalies", {}).items():
                out.append((a, info.get("count", 0), info.get("examples", [])))
        elif r.get("valid") is False:
            for key, ce in (r.get("counterexamples") or {}).items():
                out.append((f"{name} ({key})", len(ce), ce))
    return out


def _at(by_index: dict, i) -> str:
    """' at 41.2 s (op 123)' for a history index, or ' (op 123)' when its row is not here."""
    row = by_index.get(i) if isinstance(i, int) else None
    if row is None:
        return f" (op {i})" if isinstance(i, int) else ""
    return f" at {row['time'] / 1e9:.1f} s (op {i})"


def plain(cls: str, ex, by_index: dict, sends: dict | None = None) -> str | None:
    """One sentence saying what an example of a queue anomaly class shows
    (``checkers.queue.sentence``), with the times of the operations it names; None for an
    example of another shape (a counterexample)."""
    from checkers.queue import sentence

    def sent(key, v) -> str:
        i = (sends or {}).get((str(key), v))
        row = by_index.get(i) if i is not None else None
        if row is None:
            return f" (sent by op {i})" if i is not None else ""
        return f" (sent at {row['time'] / 1e9:.1f} s, op {i})"
    return sentence(cls, ex, lambda i: _at(by_index, i), sent)
