"""The queue checkers (after Jepsen's ``jepsen.tests.kafka``): one vectorised fold per key.

Input: the typed queue history (``checkers.queue_history``; an older
``history.parquet`` is converted first). Keys are partitions; values are
unique per send.

Definitions (the log of a key is what was observed at each offset, by polls
and by acknowledged sends; an index is a position in that log with the
offsets nobody observed left out):

- inconsistent-offsets: two different values observed at one offset of a key;
- duplicate: one value observed at two offsets of a key;
- G1a (aborted read): a poll read a value whose send definitely failed;
- lost-write: an acknowledged send never read by any poll although some
  poll read the key past its offset;
- unseen: an acknowledged send never read by any poll, final polls included;
- nonmonotonic-send: a process's acknowledged sends to a key got offsets
  that do not increase;
- int-poll-skip / int-nonmonotonic-poll: inside one poll, two successive
  values of a key skip over observed log positions / go backwards;
- poll-skip / nonmonotonic-poll: a process's successive polls of a key
  (until it re-assigns) skip over / go back to observed log positions;
- durability: an acknowledged send missing from the final polls, which read
  every partition after every node was restarted;
- int-send-skip / int-nonmonotonic-send: one operation's (a transaction's)
  successive sends to a key land at log positions that skip over others' /
  go back;
- precommitted-read: an operation read a value it sent itself;
- G0, G1c and their -process and -realtime forms: dependency cycles
  (``checkers/queue_cycles.py``), from edges the per-key folds emit.

An operation may hold several micro-operations (a transaction): its rows
share its index and are ordered by ``mop``; reads and sends are compared
per operation.

Each anomaly comes with its count and a few examples (key, offsets, values,
history indexes of the operations). Which anomalies fail a run is
configurable; Jepsen's defaults for consumers that use assign() fail on all
of them, and duplicates are allowed when producers are not idempotent.

How: every anomaly is a property of one key, given two facts about the whole
history (whether a final poll succeeded, and where each process re-assigned).
So the history becomes one row per send and one row per (poll, key) with the
poll's offsets and values of that key as lists, never one row per message;
each key's rows reach ``fold`` as one Arrow table, which finds every anomaly
of the key in numpy in one pass per concern and returns counts and the first
examples. In process (``engine="local"``) the keys are folded one after the
other; through Spark the same fold runs in ``mapInArrow`` on a task per
bucket of keys (``buckets``: tasks read the history's row groups with
pyarrow and write each key's rows to a directory the executors share, in
local mode or where ``chaoskraft.queue.scratch`` names one) or, elsewhere,
on rows Spark repartitioned by key; the folds give the anomalies and the
spans of backward dependency edges in one pass, then the cycle search runs
over the intervals those spans make. ``checkers/queue/reference.py`` (the
earlier checker, in Spark SQL) is the reference the differential tests hold
this one to.
"""
from .classes import (ANOMALIES, AUTO_SPARK_ROWS, CYCLES, MESSAGES, ORDER, REPOSITIONS,
                      default_allowed)
from .fold import fold
from .local import check_local, key_rows
from .spark import check_queue, check_spark, history_rows
from .words import cycle_proof, cycle_sentence, sentence

__all__ = ["ANOMALIES", "AUTO_SPARK_ROWS", "CYCLES", "MESSAGES", "ORDER", "REPOSITIONS",
           "check_local", "check_queue", "check_spark", "cycle_proof", "cycle_sentence",
           "default_allowed", "fold", "history_rows", "key_rows", "sentence"]
