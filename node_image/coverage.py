"""Named events that matter for safety, so that a run can say what it exercised.

A verdict of ``valid`` is worth what the run reached: a campaign whose partitions never
shrank an ISR says nothing about ISR shrinks. The cores report such events through the
``on_event`` sink they already have, as a :class:`Reached`: a message (a ``str``, so every
sink that logs messages keeps working) carrying the event's name. The asyncio runtime logs
it as ``reached <event>: <message>`` (the harness counts those lines in the collected node
logs, Docker and SSH alike); the simulator counts them as they happen.

Each fault package declares which of these it intends to cause (``intends``); a run's
coverage section lists intended and reached events and how often each came.
"""
from __future__ import annotations

import re

# event -> what it means (reports and docs list them in this order)
EVENTS: dict[str, str] = {
    "raft-leader-elected": "a controller became the KRaft quorum's leader in a new epoch",
    "raft-leader-resigned": "a KRaft leader resigned (check-quorum, shutdown, higher epoch)",
    "raft-truncation": "a KRaft follower truncated its log at a diverging epoch",
    "raft-voters-changed": "a KRaft leader appended a new voter set (KIP-853: a voter added "
                           "or removed, or a dynamic quorum's bootstrap set)",
    "snapshot-written": "a node wrote a metadata snapshot",
    "snapshot-loaded": "a node loaded a metadata snapshot (at start or fetched from the leader)",
    "broker-fenced": "the controller fenced a broker (missed heartbeats or shutdown)",
    "broker-unfenced": "the controller unfenced a broker that caught up",
    "broker-unregistered": "the controller took a broker's registration away (UnregisterBroker: "
                           "a broker decommissioned)",
    "feature-level-changed": "the controller wrote a new finalized feature level "
                             "(UpdateFeatures, KIP-584: metadata.version raised, ELR on or off)",
    "partition-leader-elected": "the controller gave a partition a new leader",
    "unclean-election": "a partition leader elected from outside its ISR (and its ELR)",
    "elr-election": "a partition leader elected cleanly from its eligible leader replicas "
                    "(the ISR had emptied)",
    "partition-offline": "a partition left without a leader (no ISR member alive)",
    "isr-shrink": "the controller shrank a partition's ISR",
    "isr-expand": "the controller expanded a partition's ISR",
    "reassignment-started": "a partition reassignment began: replicas added or being removed",
    "reassignment-completed": "a partition's replicas reached a reassignment's target (or "
                              "its cancellation)",
    "hwm-held-back": "a leader held its high watermark back: ISR below min.insync.replicas",
    "epoch-truncation": "a data replica truncated its log at a diverging leader epoch",
    "coordinator-loaded": "a broker became a group or transaction coordinator (a coordinator moved)",
    "group-rebalanced": "a consumer group began a rebalance",
    "txn-aborted-by-timeout": "the coordinator aborted a transaction open past its timeout",
    "aborted-txn-fetched": "a read_committed fetch crossed an aborted transaction's records "
                           "(the leader listed them for the consumer to drop)",
    "log-dir-failed": "a node halted on a failed log directory (a disk fault)",
}

# The events of the data plane (topic partitions, groups, transactions): a workload whose
# data lives elsewhere never causes them.
DATA_PLANE = frozenset({"partition-leader-elected", "unclean-election", "elr-election",
                        "partition-offline",
                        "isr-shrink", "isr-expand", "reassignment-started",
                        "reassignment-completed", "hwm-held-back", "epoch-truncation",
                        "coordinator-loaded", "group-rebalanced", "txn-aborted-by-timeout",
                        "aborted-txn-fetched"})

LINE = re.compile(r"\breached ([a-z][a-z-]*): ")


class Reached(str):
    """An event message that names its event (``event``, one of ``EVENTS``)."""

    def __new__(cls, event: str, msg: str) -> "Reached":
        assert event in EVENTS, f"unknown coverage event {event!r}"
        self = super().__new__(cls, msg)
        self.event = event
        return self


def event_of(line: str) -> str | None:
    """The event a node log line says was reached, or None."""
    found = LINE.search(line)
    return found.group(1) if found and found.group(1) in EVENTS else None


def count_lines(lines) -> dict[str, int]:
    """Event -> how many of ``lines`` (a node log) reached it."""
    out: dict[str, int] = {}
    for line in lines:
        event = event_of(line)
        if event is not None:
            out[event] = out.get(event, 0) + 1
    return out
