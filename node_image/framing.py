"""Length-prefixed frames on an asyncio stream: a 4-byte big-endian size, then the body.
The node's runtime reads its peers' and clients' requests with it, and the harness's
register client reads the node's answers."""
from __future__ import annotations

import asyncio

from . import messages as m


async def read_frame(reader: asyncio.StreamReader,
                     limit: int = m.MAX_FRAME_BYTES) -> bytes | None:
    """One frame body, or None at a clean end of stream. Raises MessageError on bad framing."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise m.MessageError("connection closed inside a frame length") from None
        return None
    size = int.from_bytes(head, "big")
    if size > limit:
        raise m.MessageError(f"frame of {size} bytes exceeds the {limit} byte limit")
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise m.MessageError(f"connection closed inside a {size} byte frame") from None
