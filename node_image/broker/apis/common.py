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


def leader_hint(image, topic: str | None, partition: int, endpoints: dict) -> tuple[int, int]:
    """KIP-951: the (leader id, leader epoch) the metadata image gives a partition, for a
    client a broker told NOT_LEADER_OR_FOLLOWER (or, in Fetch, FENCED_LEADER_EPOCH), so that
    it need not ask Metadata before retrying; the leader's endpoint is added to
    ``endpoints`` (id -> (host, port, rack)) where the leader is a live, unfenced broker.
    (-1, -1) for a partition the image does not hold, as Kafka's getCurrentLeader."""
    reg = None if topic is None else image.partition(topic, partition)
    if reg is None:
        return -1, -1
    b = image.brokers.get(reg.leader)
    ep = None if b is None or b.fenced else b.endpoint("PLAINTEXT")
    if ep is not None:
        endpoints[reg.leader] = (ep[0], ep[1], b.rack)
    return reg.leader, reg.leader_epoch


def node_endpoints(R, endpoints: dict) -> list:
    """A response's NodeEndpoints (KIP-951) from :func:`leader_hint`'s ``endpoints``."""
    return [R.NodeEndpoint(node_id=n, host=h, port=p, rack=r)
            for n, (h, p, r) in sorted(endpoints.items())]


def _zero_uuid(value) -> bool:
    return value is None or str(value) in (str(ZERO_UUID), "AAAAAAAAAAAAAAAAAAAAAA")


NOT_AUTHORIZED_OPERATIONS = None  # encodes as INT32_MIN: operations not requested
PID_WAIT_MS = 1000  # how long an InitProducerId waits for a producer-id block
# how often a broker asks the controller again for a topic it needs or a client named
CREATE_TOPIC_RETRY_MS = 1000


UNBOUNDED = (1 << 63) - 1  # Long.MAX_VALUE: no timestamp bound
READ_COMMITTED = 1  # Fetch and ListOffsets isolation level
