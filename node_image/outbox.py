"""What a node's cores send, in the order they send it, until the runtime takes it.

etcd-io/raft's Ready, for a node of several cores: the Raft client, the controller and
the broker's parts each get the node's one ``Outbox`` at construction and ``send`` to
it; the runtime (or the simulator) ``take``s everything after each input and delivers
it. Nothing edits what was sent. A destination that stands for another (a request
forwarded to the active controller, answered to the node that forwarded it) says where
the answer goes and in which form: its ``reply(msg)`` returns the real pair.
"""
from __future__ import annotations

from typing import Any, Iterator


class Outbox:
    def __init__(self) -> None:
        self._items: list[tuple[Any, Any]] = []

    def send(self, dest, msg) -> None:
        reply = getattr(dest, "reply", None)
        if reply is not None:
            dest, msg = reply(msg)
        self._items.append((dest, msg))

    def take(self) -> list[tuple[Any, Any]]:
        """Everything sent since the last take, in order; the outbox is empty after."""
        items, self._items = self._items, []
        return items

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)
