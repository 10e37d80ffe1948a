"""Planted bugs: node options, off by default, each breaking one safety rule.

They exist to prove that chaoskraft's checkers catch what they claim to
catch: the simulator must report the Raft and controller ones, the Docker
queue campaigns the broker ones. ``expected`` lists the invariants or
anomaly classes that report the bug; the first is the one the rule directly
protects.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bug:
    name: str
    layer: str
    rule: str
    description: str
    expected: tuple[str, ...]
    workload: str = "register"  # what proves it: the simulator's register runs, or queue campaigns
    docker: bool = False  # the workload's default Docker campaign must catch it (else the simulator)
    # The fault packages without which it cannot show, and the campaign (a file under
    # campaigns/) that has them, which then replaces the workload's default campaign.
    needs_faults: tuple[str, ...] = ()
    campaign: str | None = None
    # The simulator's options (``chaoskraft sim --option``) without which it cannot show, or
    # shows in few seeds, as ``campaign`` is for Docker: the transaction bugs need
    # transactional clients; forget-vote a voter that restarts mid-election.
    sim_options: tuple[tuple[str, object], ...] = ()


BUGS: dict[str, Bug] = {b.name: b for b in (
    Bug("vote-ignores-log", "raft",
        "grant a vote only to a candidate whose log is at least as up to date",
        "Vote and PreVote are granted without comparing the candidate's last epoch and "
        "offset with our own, so a replica missing committed records can be elected and "
        "overwrite them.",
        ("ConsistentCommittedData", "TruncateBelowHighWatermark", "MonotonicHighWatermark",
         "Linearizability")),
    Bug("forget-vote", "raft",
        "a vote, once persisted, survives a restart",
        "On start the votedId of quorum-state is ignored, so a replica that voted and "
        "restarted can vote again in the same epoch and two leaders can be elected.",
        ("SingleLeader", "ConsistentCommittedData", "TruncateBelowHighWatermark",
         "MonotonicHighWatermark", "Linearizability"),
        # a voter loses power just after voting in every election (one seed in three draws
        # it), and slow links, so that two candidates share an epoch: 9 of 100 seeds at 60
        # simulated s, against 2 of 100 at 120 s with the seeds' own draws
        sim_options=(("election_crash_prob", 0.5), ("max_delay_ms", 400))),
    Bug("unsynced-quorum-state", "storage",
        "quorum-state is fsynced (file and directory) before the transition takes effect",
        "quorum-state is replaced without fsync, so a power loss brings back an older "
        "epoch and vote.",
        ("MonotonicEpoch", "SingleLeader", "ConsistentCommittedData")),
    Bug("hwm-ignores-epoch", "raft",
        "a new leader advances the high watermark only past a record of its own epoch",
        "The leader exposes a high watermark as soon as a majority holds some offset, "
        "before its LeaderChange record is committed, so the high watermark can go "
        "backwards across a leader change.",
        ("MonotonicHighWatermark", "ConsistentCommittedData")),
    Bug("hwm-without-majority", "raft",
        "the high watermark is an offset a majority of voters has",
        "The leader takes the second-highest replica end offset as the high watermark, "
        "which a minority can reach.",
        ("MajorityReachedHighWatermark", "ConsistentCommittedData")),
    Bug("concurrent-voter-changes", "raft",
        "one voter change at a time: AddRaftVoter and RemoveRaftVoter wait until the last "
        "VotersRecord is committed",
        "The quorum leader takes a voter change while the previous one is uncommitted, so two "
        "voter sets are in flight at once and their majorities need not meet (KIP-853).",
        ("AtMostOneUncommittedVoterSet", "MajorityReachedHighWatermark", "MonotonicHighWatermark",
         "ConsistentCommittedData", "Linearizability"),
        docker=True, needs_faults=("voter-split",), campaign="campaigns/voter-split.yaml",
        sim_options=(("extra_faults", {"voter-split": 20000}),)),
    Bug("voter-counted-before-catch-up", "raft",
        "a voter is added only once it has caught up, and counts only what it has fetched",
        "AddRaftVoter takes any node, and the leader counts the new voter as holding its whole "
        "log until that voter first fetches, so a high watermark can pass offsets only a "
        "minority holds (KIP-853).",
        ("MajorityReachedHighWatermark", "ConsistentCommittedData", "Linearizability",
         "Liveness"),
        docker=True, needs_faults=("voter-split",), campaign="campaigns/voter-split.yaml",
        sim_options=(("extra_faults", {"voter-split": 20000}),)),
    Bug("read-without-barrier", "controller",
        "a register read is answered only after a marker appended in the leader's epoch commits",
        "The active controller answers reads at once from its in-memory state, which may "
        "hold uncommitted writes or be stale after it was deposed.",
        ("Linearizability",)),
    Bug("lease-read", "controller",
        "a register read is answered only after a marker appended in the leader's epoch commits",
        "The active controller answers reads at once while a majority of voters fetched "
        "from it within controller.quorum.fetch.timeout.ms (a leader lease), measured on the "
        "Raft clock: the wall clock, as Kafka's Raft timers read it. With clocks that agree "
        "no other leader can be elected within the lease; a leader whose clock is stepped "
        "back keeps its lease, and its leadership, while the others elect a new leader.",
        ("Linearizability",), docker=True, needs_faults=("clock",),
        campaign="campaigns/clock-partition.yaml",
        # clock steps every second or so, with partitions beside them: a leader held back
        # while it is cut off (the seeds' own draws meet it in 2 of 100 seeds of 600 s)
        sim_options=(("clock_step_mean_ms", 1000), ("extra_faults", {"partition": 1000}))),
    Bug("lease-read-step-proof", "controller",
        "a register read is answered only after a marker appended in the leader's epoch commits",
        "The active controller answers reads at once under a leader lease, as lease-read "
        "does, but on a Raft clock made proof against clock steps: each advance of the wall "
        "clock counts only up to the advance of the node's monotonic clock, so a clock "
        "stepped back or forward moves nothing. Steps no longer break the lease; a wall clock "
        "that runs slow still stretches it, and a leader cut off meanwhile answers reads "
        "while the others elect a new leader and write.",
        ("Linearizability",), docker=True, needs_faults=("clock-rate",),
        campaign="campaigns/clock-rate-partition.yaml",
        # a slowed clock (a quarter of true time) on the active controller, and cuts that
        # isolate it for 6-10 s: the lease outlives the others' election (7 of 100 seeds of
        # 120 s with the packages' own targets and rates, 3 of 100 at 60 s)
        sim_options=(("extra_faults", {"clock-rate": 1000, "partition": 1000}),
                     ("extra_options", {"clock-rate": {"targets": ["active-controller"],
                                                       "rate": [0.25, 0.3]},
                                        "partition": {"targets": ["isolate-controller"],
                                                      "duration_s": [6, 10]}}))),
    Bug("reply-before-commit", "controller",
        "a write is acknowledged only once its records are committed",
        "The active controller acknowledges a register write as soon as it is appended to "
        "its own log.",
        ("Linearizability",), docker=True),
    Bug("ack-before-replication", "broker",
        "acks=all is answered only once the high watermark passes the batch",
        "The partition leader answers an acks=all produce as soon as the batch is in its "
        "own log, so a leader that dies before its followers fetched it loses an "
        "acknowledged write.",
        ("lost-write", "unseen", "inconsistent-offsets", "durability"), workload="queue", docker=True),
    Bug("hw-ignores-isr", "broker",
        "the high watermark is the smallest log end offset in the ISR",
        "The leader sets the high watermark to its own log end offset, so consumers read, "
        "and acks=all acknowledges, records no follower has.",
        ("lost-write", "inconsistent-offsets", "unseen", "durability"), workload="queue", docker=True),
    Bug("skip-epoch-truncation", "broker",
        "a follower truncates where its log diverges from the leader's (leader epochs)",
        "The leader serves a follower from its fetch offset without comparing leader "
        "epochs, so a follower keeps records a deposed leader never committed and the "
        "replicas' logs diverge at the same offsets.",
        ("inconsistent-offsets", "lost-write", "duplicate"), workload="queue", docker=True),
    Bug("unclean-election", "controller",
        "only an ISR member becomes leader unless the topic allows unclean elections",
        "When a partition needs a new leader the controller takes the first live replica, "
        "in the ISR or not, although unclean.leader.election.enable is false.",
        ("lost-write", "inconsistent-offsets", "durability"), workload="queue", docker=True),
    Bug("reassign-skips-catch-up", "controller",
        "a reassignment reaches its target only once every replica of it is in the ISR",
        "AlterPartitionReassignments completes a move at once: the new replicas join the "
        "ISR before they have fetched anything and the removed ones leave, so a new replica "
        "with an empty log can lead (a moved leader hands over to it) and the others "
        "truncate what was acknowledged to match it.",
        ("lost-write", "durability", "inconsistent-offsets"), workload="queue", docker=True,
        needs_faults=("reassign",), campaign="campaigns/reassign.yaml",
        sim_options=(("extra_faults", {"reassign": 8000}),)),
    Bug("preferred-election-ignores-isr", "controller",
        "a preferred leader election elects the preferred replica only from the ISR",
        "ElectLeaders (PREFERRED) makes the first replica leader as soon as it is registered "
        "and unfenced, in the ISR or not, so a replica back from a crash leads before it has "
        "caught up and the others truncate what was acknowledged to match it.",
        ("lost-write", "durability", "inconsistent-offsets"), workload="queue", docker=True,
        needs_faults=("elect",), campaign="campaigns/elect.yaml",
        sim_options=(("extra_faults", {"elect": 8000}),)),
    Bug("upgrade-elects-outside-isr", "controller",
        "a feature upgrade changes no partition's leadership",
        "When UpdateFeatures raises metadata.version, the controller also re-elects every "
        "partition's leader with its test inverted: a replica outside the ISR, fenced or not, "
        "leads (taken into the ISR), so a replica that is down or behind leads without what "
        "was acknowledged meanwhile and the others truncate to it.",
        ("lost-write", "durability", "inconsistent-offsets"), workload="queue", docker=True,
        needs_faults=("features",), campaign="campaigns/features.yaml",
        sim_options=(("extra_faults", {"features": 4000}),)),
    Bug("elr-keeps-crashed-replica", "controller",
        "a broker back from an unclean shutdown leaves every ELR (eligible leader replicas)",
        "The controller ignores a registration's previous broker epoch, so a broker that "
        "crashed, losing the records it had not flushed, stays in the ELR and is elected from "
        "it as if it held everything below the high watermark; the replicas that did "
        "truncate to it.",
        ("lost-write", "durability", "inconsistent-offsets"), workload="queue", docker=True,
        needs_faults=("elr-crash",), campaign="campaigns/elr.yaml",
        # as the campaign: the scenario alone (no other crash: without fsync, crashes of
        # every replica lose acknowledged records by design)
        sim_options=(("extra_faults", {"elr-crash": 8000}), ("crash_mean_ms", None),
                     ("power_loss_mean_ms", None), ("election_crash_prob", 0.0),
                     ("scenario_mean_ms", None))),
    Bug("isr-expands-only-to-min", "broker",
        "a follower that has caught up with the leader rejoins the ISR",
        "The leader takes a caught-up follower back into the ISR only while the ISR is below "
        "min.insync.replicas, so a replica that left it (a restarted or cut-off broker) "
        "stays out for good once the others make the minimum: nothing is lost and acks=all "
        "writes go on, but the partition never has all its copies again. Only the liveness "
        "phase sees it.",
        ("liveness", "Liveness"), workload="queue", docker=True),
    Bug("fetch-above-hw", "broker",
        "consumers only read records below the high watermark",
        "Consumer fetches are served up to the leader's log end offset, so a consumer can "
        "read a record that is later truncated away.",
        ("inconsistent-offsets", "G1a", "lost-write"), workload="queue", docker=True),
    Bug("skip-fsync", "storage",
        "flush.messages=N fsyncs a partition's log every N messages",
        "The partition counts its log as flushed when the flush policy says so but never "
        "fsyncs it, so with flush.messages=1 an acknowledged batch is still only in the "
        "page cache, and a power loss of every replica loses it.",
        ("lost-write", "unseen", "durability"), workload="queue", docker=True,
        needs_faults=("power-loss",), campaign="campaigns/power-loss-fuse.yaml"),
    Bug("read-committed-past-lso", "broker",
        "read_committed consumers only read below the last stable offset",
        "A read_committed Fetch is served up to the high watermark, past the first record "
        "of the oldest open transaction, so a consumer reads records of a transaction that "
        "may still abort.",
        ("G1a",), workload="queue", docker=True, campaign="campaigns/queue-txn.yaml",
        sim_options=(("transactions", True),)),
    Bug("no-aborted-list", "broker",
        "a read_committed Fetch lists the aborted transactions in the range it serves",
        "The aborted-transactions list of a read_committed Fetch is always empty, so the "
        "consumer cannot drop the records of aborted transactions below the last stable "
        "offset and reads them.",
        ("G1a",), workload="queue", docker=True, campaign="campaigns/queue-txn.yaml",
        sim_options=(("transactions", True),)),
    Bug("abort-as-commit", "broker",
        "an aborted transaction's markers are ABORT markers",
        "The transaction coordinator writes COMMIT markers for a transaction it aborts (on "
        "EndTxn(abort), a timeout or fencing), so the aborted records become readable.",
        ("G1a",), workload="queue", docker=True, campaign="campaigns/queue-txn.yaml",
        sim_options=(("transactions", True),)),
    Bug("partial-commit-markers", "broker",
        "a committed transaction's marker is written to every partition it touched",
        "The coordinator writes the COMMIT marker only to the first partition of a "
        "committing transaction and counts the others as done, so their records stay open: "
        "their last stable offset never moves again and read_committed consumers never "
        "read what follows.",
        ("unseen", "lost-write", "durability"), workload="queue", docker=True,
        campaign="campaigns/queue-txn.yaml",
        sim_options=(("transactions", True),)),
    Bug("pid-given-twice", "broker",
        "InitProducerId gives every idempotent producer a producer id of its own",
        "A broker answers each non-transactional InitProducerId with the id it gave the one "
        "before, every other time, so two producers share a producer id and epoch: the "
        "second's first batches are taken for retries of the first's (answered with the "
        "first's offsets, never written) or refused as out of order.",
        ("AckedRecordsKept", "inconsistent-offsets", "lost-write", "unseen", "durability"),
        workload="queue", docker=True),
    Bug("fenced-epoch-appends", "broker",
        "a transactional batch from a producer epoch older than the partition's is refused",
        "The partition leader appends a transactional batch whose producer epoch is older "
        "than the one a transaction marker fenced it with, so a zombie producer's batch "
        "sent after its transactional id was taken over (its transaction aborted) opens a "
        "transaction no coordinator knows there: it holds the last stable offset until the "
        "new producer's next marker on that partition ends it, a COMMIT making the zombie's "
        "records readable although its transaction failed.",
        ("G1a", "AckedRecordsKept", "lost-write", "unseen", "durability"), workload="queue",
        # transactional producers, each taken over after a life of 0-10 s while it runs
        sim_options=(("transactions", True), ("crash_client_ms", 5000),
                     ("zombie_producers", True))),
)}


def check_bugs(names) -> frozenset[str]:
    unknown = sorted(set(names) - set(BUGS))
    if unknown:
        raise ValueError(f"unknown bug {unknown[0]!r}; known: {', '.join(sorted(BUGS))}")
    return frozenset(names)
