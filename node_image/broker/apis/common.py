"""Names the broker's API handlers share."""
from __future__ import annotations

import uuid

from ... import messages as m

ZERO_UUID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: no topic id given
METADATA_TOPIC = "__cluster_metadata"  # the quorum's log, as DescribeQuorum names it


def _as_uuid(text: str) -> uuid.UUID:
    """A directory or topic id as Kafka's Uuid; one not in that form is sent as zero."""
    try:
        return uuid.UUID(text) if text else ZERO_UUID
    except ValueError:
        return ZERO_UUID


def _by_name(resp) -> dict:
    """Topic name -> (error, message) of a controller's per-topic answer (None: no answer)."""
    return {} if resp is None else {n: (e, msg) for n, e, msg, *_ in resp.results}


def _missing(error: int) -> int:
    """The error of a resource the controller's answer leaves out: why there was no answer,
    or, where there was one, a timeout (as Kafka answers what it never decided)."""
    return error if error != m.NONE else m.REQUEST_TIMED_OUT


def _zero_uuid(value) -> bool:
    return value is None or str(value) in (str(ZERO_UUID), "AAAAAAAAAAAAAAAAAAAAAA")


NOT_AUTHORIZED_OPERATIONS = None  # encodes as INT32_MIN: operations not requested
PID_WAIT_MS = 1000  # how long an InitProducerId waits for a producer-id block
OFFSETS_TOPIC_RETRY_MS = 1000  # how often FindCoordinator asks for __consumer_offsets again


UNBOUNDED = (1 << 63) - 1  # Long.MAX_VALUE: no timestamp bound
READ_COMMITTED = 1  # Fetch and ListOffsets isolation level
