"""The queue workload's operation generator, after Jepsen's ``jepsen.tests.kafka``: pure and seeded.

Keys are partitions of one topic (key ``k3`` is partition 3). Each logical
process alternates, by its own seeded random choice, between

- ``send``: one unique value to one key (value = process x 1,000,000 +
  sequence number, so a value read names the send that wrote it), and
- ``poll``: one poll of its consumer, which is assigned every key and reads
  each partition in offset order from the beginning, and
- ``assign`` (one operation in ``REASSIGN_EVERY``, about every 10 s of a
  process): the consumer is assigned every key again and reads everything
  from offset 0 anew. Read once, an offset is seen only through the leader of
  that moment; read again, through the later ones too: a leader that came
  back with records its successor never had (a deposed leader that did not
  truncate) shows them to the readers who start over, beside what they read
  there before (inconsistent offsets), as Jepsen's clients that re-assign do.

The generator only decides what to do; the client records what happened
(offsets of acknowledged sends, the messages each poll returned). After the
faults are healed the runner adds final polls that read every partition to
its end.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator

VALUE_STRIDE = 1_000_000
MAX_TXN_LENGTH = 4  # Jepsen's max-txn-length with --txn
ABORT_RATIO = 0.125  # transactions aborted on purpose: their sends must never be read
REASSIGN_EVERY = 50  # one operation in this many (on average) is a re-assign


def key_name(partition: int) -> str:
    return f"k{partition}"


def key_partition(key: str) -> int:
    return int(key[1:])


CODECS = ("none", "gzip", "snappy", "lz4", "zstd")  # Kafka's compression.type values


def producer_codec(compression: str | None, seed: int | None) -> str:
    """The codec the producers use: ``compression`` if set, else one drawn from the seed
    (a stream of its own, so nothing else the seed draws moves)."""
    if compression is not None:
        return compression
    return random.Random(f"{seed}-compression").choice(CODECS)


def client_lifetimes(seed: int | None, slot: int, interval_s: float) -> Iterator[float]:
    """Jepsen's --crash-clients: how long each client of one slot runs before it is crashed,
    uniform in 0 .. 2 x ``interval_s`` (Jepsen staggers its crash operations so), drawn from
    the seed (a stream of the slot's own, so nothing else the seed draws moves)."""
    rng = random.Random(f"{seed}-crash-{slot}")
    while True:
        yield rng.uniform(0.0, 2.0 * interval_s)


@dataclass(frozen=True, slots=True)
class QueueOp:
    f: str  # "send" | "poll" | "assign"
    key: str | None  # sends only
    value: int | None  # sends only


class QueueGenerator:
    def __init__(self, seed: int, partitions: int, send_ratio: float = 0.5) -> None:
        if partitions < 1:
            raise ValueError(f"the queue workload needs at least one partition, got {partitions}")
        self.seed = seed
        self.keys = [key_name(p) for p in range(partitions)]
        self.send_ratio = send_ratio

    def ops(self, process: int) -> Iterator[QueueOp]:
        rng = random.Random(f"{self.seed}-queue-{process}")
        seq = 0
        while True:
            if rng.random() < 1 / REASSIGN_EVERY:
                yield QueueOp("assign", None, None)
            elif rng.random() < self.send_ratio:
                seq += 1
                yield QueueOp("send", rng.choice(self.keys), process * VALUE_STRIDE + seq)
            else:
                yield QueueOp("poll", None, None)
