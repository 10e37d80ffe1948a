"""The simulated Kafka clients' timeouts and what each producer and consumer process keeps."""
from __future__ import annotations

from node_image import messages as m

TOPIC = "queue"
REQUEST_TIMEOUT_MS = 3_000  # a request without an answer by then is given up (and retried)
DELIVERY_TIMEOUT_MS = 10_000  # a send not acknowledged by then is indeterminate
PRODUCE_TIMEOUT_MS = 2_000  # the Produce request's own timeout_ms (acks=all wait)
FETCH_MAX_WAIT_MS = 100
BACKOFF_MS = 100
STABLE_END_MS = 1_000
FINAL_STUCK_MS = 20_000  # see _final_read
# After the faults end every node restarts; producers and consumers go on until a send made
# since then is acknowledged (at least FINAL_READ_AFTER_MS, at most WRITES_BACK_WITHIN_MS:
# after a restart of every node, registering brokers wait out their old sessions), and then
# the final reader reads, once no send is in progress (one acknowledged after the final
# read would look lost).
FINAL_READ_AFTER_MS = 15_000
WRITES_BACK_WITHIN_MS = 45_000
RETRIABLE = {m.NOT_LEADER_OR_FOLLOWER, m.UNKNOWN_TOPIC_OR_PARTITION, m.LEADER_NOT_AVAILABLE,
             m.NOT_ENOUGH_REPLICAS, m.NOT_ENOUGH_REPLICAS_AFTER_APPEND, m.REQUEST_TIMED_OUT,
             m.FENCED_LEADER_EPOCH, m.UNKNOWN_LEADER_EPOCH, m.KAFKA_STORAGE_ERROR}
# The broker no longer knows the producer's state in a way the producer can go on from:
# the send is indeterminate and the producer starts over with a new id.
PRODUCER_RESET = {m.OUT_OF_ORDER_SEQUENCE_NUMBER, m.UNKNOWN_PRODUCER_ID,
                  m.INVALID_PRODUCER_EPOCH}


class _Producer:
    def __init__(self, process: int, idempotent: bool = True, transactional: bool = False) -> None:
        self.process = process
        self.idempotent = idempotent or transactional
        self.transactional = transactional
        self.txn_id = f"sim-txn-{process}"
        self.coordinator: int | None = None  # of its transactional id, as last found
        self.resume = None  # what a transactional producer does at its next txn_resume
        self.producer_id: int | None = None
        self.epoch = -1
        self.sequence: dict[int, int] = {}
        self.count = 0
        self.op: dict | None = None  # the send in progress
        # a transactional producer whose transactional id a successor took over while it
        # ran (``kafka_crashes``): it goes on until fenced, then ends
        self.zombie = False


class _Consumer:
    def __init__(self, process: int) -> None:
        self.process = process
        self.position: dict[int, int] = {}
        self.poll: dict | None = None  # the poll in progress: fetches out, messages so far
        self.assigned = False  # a scripted process's first assign is done
