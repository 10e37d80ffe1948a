"""The queue anomaly classes, their order of examples, and what a run allows."""
from __future__ import annotations

import pyarrow as pa



ANOMALIES = ("lost-write", "unseen", "duplicate", "inconsistent-offsets", "nonmonotonic-poll",
             "poll-skip", "int-poll-skip", "int-nonmonotonic-poll", "nonmonotonic-send", "G1a",
             "durability", "int-send-skip", "int-nonmonotonic-send", "precommitted-read",
             "G0", "G1c", "G0-process", "G1c-process", "G0-realtime", "G1c-realtime")
SEND, POLL, FINAL = 0, 1, 2
T_OK, T_FAIL, T_INFO = 0, 1, 2  # a send's type
# The rows ``fold`` takes: sends (kind 0; type T_*) and (poll, key) rows (kind 1 poll, 2
# final-poll). A send's offsets and values are empty lists: Spark hands null list columns
# to Python several times slower than empty ones.
KEY_ROWS = pa.schema([("key", pa.int32()), ("kind", pa.int8()), ("index", pa.int64()),
                      ("process", pa.int32()), ("type", pa.int8()), ("value", pa.int64()),
                      ("offset", pa.int64()), ("offsets", pa.list_(pa.int64())),
                      ("values", pa.list_(pa.int64())), ("mop", pa.int16())])
RESULT_SCHEMA = "anomaly string, count long, examples string"
# The folds' output in Spark: anomaly rows (edge columns null) and dependency edges (anomaly
# null), from one pass over the key rows.
FOLD_SCHEMA = (RESULT_SCHEMA + ", src long, dst long, rel byte, key int, value long")
MESSAGES = "messages read"  # a result row of the fold that is a total, not an anomaly
AUTO_SPARK_ROWS = 4_000_000  # history rows above which engine="auto" uses Spark


REPOSITIONS = ("assign", "subscribe")  # operations after which a consumer may start over


def default_allowed(idempotent: bool | None, consume: str = "assign",
                    ww_deps: bool = False) -> tuple[str, ...]:
    """Jepsen's allowances (``allowed-error-types``): always int-send-skip and the G0 cycles
    (Kafka does not isolate writes: transactions' sends interleave in the log); poll-skip
    and nonmonotonic-poll for subscribe() consumers (a rebalance moves a partition to
    another consumer and back between two polls); the G1c cycles when ww edges are inferred
    (``ww_deps``: t0 <ww t1 <wr t0 is then normal). Plus duplicates unless every producer is
    idempotent (``idempotent: true``): in a default campaign (None: half the producers
    without retries) a producer without retries has duplicated a record on a correct node."""
    allowed = ("int-send-skip", "G0", "G0-process", "G0-realtime")
    if idempotent is not True:
        allowed += ("duplicate",)
    if consume == "subscribe":
        allowed += ("poll-skip", "nonmonotonic-poll")
    if ww_deps:
        allowed += ("G1c", "G1c-process", "G1c-realtime")
    return allowed


def _null_first(v):
    return (0, 0) if v is None else (1, v)


# Examples are listed in this order (the order of the reference checker's reports).
ORDER = {
    "inconsistent-offsets": lambda e: (e["key"], e["offset"]),
    "duplicate": lambda e: (e["key"], e["value"]),
    "G1a": lambda e: (e["poll_index"], e["offset"], e["send_index"]),
    "lost-write": lambda e: (e["key"], _null_first(e["offset"]), e["send_index"]),
    "unseen": lambda e: (e["key"], _null_first(e["offset"]), e["send_index"]),
    "durability": lambda e: (e["key"], _null_first(e["offset"]), e["send_index"]),
    "nonmonotonic-send": lambda e: (e["index"], e["prev_index"]),
    "int-poll-skip": lambda e: (e["index"], e["offset"], e["prev_offset"]),
    "int-nonmonotonic-poll": lambda e: (e["index"], e["offset"], e["prev_offset"]),
    "poll-skip": lambda e: (e["index"], e["prev_index"]),
    "nonmonotonic-poll": lambda e: (e["index"], e["prev_index"]),
    "int-send-skip": lambda e: (e["index"], e["offset"], e["prev_offset"]),
    "int-nonmonotonic-send": lambda e: (e["index"], e["offset"], e["prev_offset"]),
    "precommitted-read": lambda e: (e["index"], e["value"]),
}
CYCLES = ("G0", "G1c", "G0-process", "G1c-process", "G0-realtime", "G1c-realtime")
for _name in CYCLES:  # shortest cycles first, then by their first operation
    ORDER[_name] = lambda e: (len(e["cycle"]), [s["index"] for s in e["cycle"]])
