"""Examples in words: the sentence the report shows for an example of each anomaly, and a
cycle's proof."""
from __future__ import annotations

from .classes import CYCLES


def sentence(anomaly: str, ex, at, sent) -> str | None:
    """One plain sentence saying what an example of ``anomaly`` shows; None for an example of
    another shape. ``at(index)``: how to name an operation (" at 41.2 s (op 123)");
    ``sent(key, value)``: how to name the send of a value named by its value alone (the
    duplicate and inconsistent-offsets examples)."""
    if isinstance(ex, dict) and anomaly in CYCLES:
        return cycle_sentence(ex, at)
    if not isinstance(ex, dict) or "key" not in ex:
        return None
    g = ex.get
    key = g("key")
    key = f"key {key}" if isinstance(key, int) else key  # Jepsen's keys are integers
    if anomaly in ("lost-write", "unseen", "durability"):
        where = f"offset {g('offset')} of {key}" if g("offset") is not None else key
        head = f"send of {g('value')} acknowledged at {where}{at(g('send_index'))}"
        if anomaly == "lost-write":
            return f"{head} was never read; polls read {key} up to offset {g('max_read_offset')}"
        if anomaly == "unseen":
            return f"{head} was never read by any poll, the final ones included"
        return f"{head} is missing from the final reads, made after every node restarted"
    if anomaly == "duplicate":
        return (f"value {g('value')} of {key}{sent(key, g('value'))} was read at offsets "
                f"{', '.join(map(str, g('offsets') or []))}")
    if anomaly == "inconsistent-offsets":
        return (f"offset {g('offset')} of {key} was read holding different values: "
                + "; ".join(f"{v}{sent(key, v)}" for v in g("values") or []))
    if anomaly == "G1a":
        return (f"a poll{at(g('poll_index'))} read {g('value')} at offset {g('offset')} of "
                f"{key}, from a send that failed{at(g('send_index'))}")
    if anomaly == "nonmonotonic-send":
        return (f"process {g('process')}'s acknowledged sends to {key} went from offset "
                f"{g('prev_offset')}{at(g('prev_index'))} back to {g('offset')}"
                f"{at(g('index'))}")
    skip = f"skipping {(g('delta') or 2) - 1} offsets others read"
    if anomaly in ("int-poll-skip", "int-nonmonotonic-poll"):
        how = skip if anomaly == "int-poll-skip" else "going back"
        return (f"one poll by process {g('process')}{at(g('index'))} read {key} at offset "
                f"{g('prev_offset')} and next at {g('offset')}, {how}")
    if anomaly in ("poll-skip", "nonmonotonic-poll"):
        how = skip if anomaly == "poll-skip" else "going back"
        return (f"process {g('process')}'s poll of {key}{at(g('index'))} began at offset "
                f"{g('first_offset')} where its previous one{at(g('prev_index'))} ended at "
                f"{g('prev_last_offset')}, {how}")
    if anomaly in ("int-send-skip", "int-nonmonotonic-send"):
        how = skip if anomaly == "int-send-skip" else "going back"
        return (f"one transaction by process {g('process')}{at(g('index'))} sent {g('prev_value')} "
                f"to {key} at offset {g('prev_offset')} and next {g('value')} at offset "
                f"{g('offset')}, {how}")
    if anomaly == "precommitted-read":
        return (f"a transaction by process {g('process')}{at(g('index'))} read {g('value')} at "
                f"offset {g('offset')} of {key}, which it sent itself before it committed")
    return None


def _step_key(s) -> str:
    """A cycle step's key as the sentences name it (Jepsen's keys are integers)."""
    return f"key {s['key']}" if isinstance(s["key"], int) else s["key"]


def cycle_proof(ex) -> str | None:
    """A dependency cycle as Elle proves one: each operation named, each step's reason,
    and the contradiction that closes it."""
    steps = ex.get("cycle") if isinstance(ex, dict) else None
    if not steps:
        return None
    n = len(steps)
    k = _step_key

    def why(j: int) -> str:
        s, a, b = steps[j], f"T{j + 1}", f"T{(j + 1) % n + 1}"
        return {"wr": lambda: f"{a} sent {s['value']} to {k(s)}, which {b} read",
                "ww": lambda: f"{a} sent to {k(s)} just before {b} sent {s['value']}",
                "process": lambda: f"{a} came before {b} in process {s['process']}",
                "realtime": lambda: f"{a} completed before {b} was invoked"}[s["rel"]]()
    let = ", ".join(f"T{j + 1} = process {s['process']}'s operation {s['index']}"
                    for j, s in enumerate(steps))
    then = "; ".join(f"T{j + 1} < T{j + 2}, because {why(j)}" for j in range(n - 1))
    return (f"Let {let}. Then {then}. However, T{n} < T1, because {why(n - 1)}: "
            f"a contradiction.")


def cycle_sentence(ex, at) -> str | None:
    """A dependency cycle in words: each operation and why it precedes the next."""
    steps = ex.get("cycle") if isinstance(ex, dict) else None
    if not steps:
        return None
    k = _step_key
    why = {"wr": lambda s: f"sent {s['value']} to {k(s)}, which was read by",
           "ww": lambda s: f"sent to {k(s)} just before {s['value']} was sent by",
           "process": lambda s: "came before, in the same process,",
           "realtime": lambda s: "completed before the invocation of"}
    def op(st) -> str:
        return f"process {st['process']}'s operation{at(st['index'])}"
    parts = [op(steps[0])]
    for j, st in enumerate(steps):
        nxt = steps[(j + 1) % len(steps)]
        parts.append(f"{why[st['rel']](st)} " + (op(nxt) if j + 1 < len(steps)
                                                   else f"the first (op {nxt['index']})"))
    return " ".join(parts) + ": a cycle"
