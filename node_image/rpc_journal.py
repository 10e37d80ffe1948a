"""A node's journal of the messages it sends and receives, with Lamport timestamps.

Every message between nodes carries its sender's stamp ``[node id, Lamport time]`` as a last
element of its frame (``messages.encode(msg, stamp)``); the receiver moves its clock past it
and writes both, so a reader can draw each message as an arrow from the sender's line to the
receiver's in an order every node agrees on (Lamport's happened-before), and with each
side's wall clock beside it. Kafka clients and the harness's register clients stamp nothing:
their requests are journalled as received from ``client HOST:PORT`` and the answers as sent
to it.

One JSON object a line (``journal_lines`` reads them back):

    {"l": 41, "t": 1790000000123, "e": "s", "p": "n2", "m": "FetchRequest (epoch=3)"}
    {"l": 57, "t": 1790000000125, "e": "r", "p": "n1", "sl": 39, "m": "VoteRequest (epoch=4)"}

``l`` this node's Lamport time after the event, ``t`` its wall clock (ms), ``e`` s(ent) or
r(eceived), ``p`` the other party, ``sl`` the sender's Lamport time (received from a node),
``m`` the message. Lines are buffered and written at most ``FLUSH_MS`` apart, so a killed
node loses its last fraction of a second of journal; the file rolls over to ``PATH.1`` at
``max_bytes``, so a node keeps between one and two files' worth of its latest messages.
"""
from __future__ import annotations

import dataclasses
import json
import os
import struct
import time
from typing import Iterator

from . import kafka_codec as kc

FLUSH_MS = 200
MAX_BYTES = 8 * 1024 * 1024


def label(msg) -> str:
    """A short name for a message: its type and what identifies it."""
    if isinstance(msg, (bytes, bytearray)):
        if len(msg) >= 8:  # a request frame: api key, version, correlation id
            api, version, corr = struct.unpack_from(">hhi", msg, 0)
            if api in kc.API_NAMES and 0 <= version <= 20:
                return f"{kc.API_NAMES[api]} v{version} #{corr}"
        return f"response #{struct.unpack_from('>i', msg, 0)[0]}" if len(msg) >= 4 else "frame"
    name = type(msg).__name__
    if dataclasses.is_dataclass(msg):
        parts = []
        for f in ("epoch", "leader_epoch", "f", "key", "outcome", "error"):
            v = getattr(msg, f, None)
            if v not in (None, "", 0) or f == "epoch" and v == 0:
                parts.append(f"{f}={v}")
        return name + (f" ({', '.join(parts)})" if parts else "")
    return name


class RpcJournal:
    def __init__(self, path: str, node_id: int, max_bytes: int = MAX_BYTES) -> None:
        self.path = path
        self.node_id = node_id
        self.max_bytes = max_bytes
        self.lamport = 0
        self._file = open(path, "a", buffering=1 << 16)
        self._size = self._file.tell()
        self._flushed_ms = 0

    def sent(self, peer: str, what: str) -> list[int]:
        """Journal a message going to ``peer``; returns the stamp it carries."""
        self.lamport += 1
        self._write({"l": self.lamport, "t": int(time.time() * 1000), "e": "s", "p": peer,
                     "m": what})
        return [self.node_id, self.lamport]

    def received(self, peer: str, what: str, stamp: list[int] | None = None) -> None:
        """Journal a message from ``peer``, stamped by a node or (a client) not."""
        entry = {"e": "r", "p": peer, "m": what}
        if stamp is not None:
            self.lamport = max(self.lamport, stamp[1])
            entry["sl"] = stamp[1]
        self.lamport += 1
        entry["l"] = self.lamport
        entry["t"] = int(time.time() * 1000)
        self._write(entry)

    def _write(self, entry: dict) -> None:
        if self._file.closed:  # a message handled while the node stops, after the journal
            return
        line = json.dumps(entry, separators=(",", ":")) + "\n"
        if self._size and self._size + len(line) > self.max_bytes:
            self._file.close()
            os.replace(self.path, self.path + ".1")
            self._file = open(self.path, "a", buffering=1 << 16)
            self._size = 0
        self._file.write(line)
        self._size += len(line)

    def maybe_flush(self, now_ms: int) -> None:
        if now_ms - self._flushed_ms >= FLUSH_MS and not self._file.closed:
            self._flushed_ms = now_ms
            self._file.flush()

    def close(self) -> None:
        self._file.close()


def journal_lines(paths) -> Iterator[dict]:
    """The entries of one node's journal files, oldest file first. A last line without its
    newline (the node was killed while writing it) is skipped; any other line that is not
    an entry raises ValueError naming the file and line."""
    for path in paths:
        try:
            f = open(path)
        except FileNotFoundError:
            continue
        with f:
            for n, line in enumerate(f, 1):
                try:
                    entry = json.loads(line)
                    if not isinstance(entry, dict) or not {"l", "t", "e", "p", "m"} <= set(entry):
                        raise ValueError("not a journal entry")
                except ValueError as exc:
                    if not line.endswith("\n"):
                        continue  # torn by a kill
                    raise ValueError(f"{path}:{n}: {exc}") from None
                yield entry
