"""A consumer group of KIP-848's protocol (``group.protocol=consumer``): its members, the
target assignment the server-side assignor computes, and each member's way towards it.

Theory of operation
-------------------
The coordinator, not a member, assigns partitions. Three epochs order everything:

- the **group epoch** rises whenever what the group must be assigned changes (a member joins
  or leaves, a subscription changes, a subscribed topic appears or gains partitions);
- the **assignment epoch** is the group epoch the target assignment was computed at; a
  heartbeat that finds the group epoch ahead of it recomputes the target (:func:`assign`);
- each member's **member epoch** says which target it has reached. A member moves to a new
  target in steps (:func:`reconcile`, Kafka's CurrentAssignmentBuilder): partitions it must
  give up are taken away first while its epoch stays (``unrevoked``, until a heartbeat no
  longer lists them as owned), then it takes the target's epoch and the partitions no other
  member still holds (``unreleased`` while some are held elsewhere), and is ``stable`` once
  it has the whole target.

So no partition is ever handed to a member while another still owns it:
:meth:`ConsumerGroup.owner_epochs` gives -1 only for a partition no member holds, assigned or
pending revocation. A member's epoch in its heartbeat must be the one the coordinator
knows (or the previous one, if it owns nothing beyond what it is assigned: the answer that
raised it may have been lost); anything else is FENCED_MEMBER_EPOCH and the member must give
up everything and join again with epoch 0.

Assignors (``ServerAssignor``): ``uniform`` (the default, as Kafka's) keeps each partition
where the previous target put it while that stays balanced, then gives the rest to the
least loaded subscribed member; ``range`` splits each topic's partitions into contiguous
ranges over its subscribers in member-id order. Both are deterministic.

Partitions are ``{topic id: frozenset(partition)}`` maps throughout (topic ids as the node
keeps them, strings).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

STABLE, UNREVOKED, UNRELEASED = "stable", "unrevoked_partitions", "unreleased_partitions"
ASSIGNORS = ("uniform", "range")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

Parts = dict  # topic id -> frozenset of partition ids


def _clean(parts: dict) -> Parts:
    return {t: frozenset(ps) for t, ps in parts.items() if ps}


def owns_any(owned: Parts | None, of: Parts) -> bool:
    """Whether a heartbeat's owned partitions (``None``: not sent, so assume the worst) still
    include any of ``of``."""
    if owned is None:
        return True
    return any(p in of.get(t, ()) for t, ps in owned.items() for p in ps)


def is_subset(owned: Parts | None, of: Parts) -> bool:
    if owned is None:
        return False
    return all(p in of.get(t, ()) for t, ps in owned.items() for p in ps)


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    """Where one member stands on its way to the target (Kafka's current member
    assignment record)."""
    epoch: int = 0
    previous_epoch: int = -1
    state: str = STABLE
    assigned: Parts = field(default_factory=dict)
    revoking: Parts = field(default_factory=dict)


def reconcile(current: MemberAssignment, target_epoch: int, target: Parts,
              owner_epoch, owned: Parts | None) -> MemberAssignment:
    """The member's next step towards ``target`` (computed at ``target_epoch``).
    ``owner_epoch(topic, partition)`` is the epoch of the member holding a partition, -1 if
    none; ``owned`` is what the member's heartbeat says it owns (None if not sent)."""
    if current.state == STABLE:
        if current.epoch == target_epoch:
            return current
        return _next(current, current.epoch, target_epoch, target, owner_epoch, owned)
    if current.state == UNREVOKED:
        if owns_any(owned, current.revoking):
            return current
        return _next(current, current.epoch + 1, target_epoch, target, owner_epoch, owned)
    if current.state == UNRELEASED:
        return _next(current, current.epoch, target_epoch, target, owner_epoch, owned)
    raise AssertionError(f"member assignment in unknown state {current.state!r}")


def _next(current: MemberAssignment, epoch: int, target_epoch: int, target: Parts,
          owner_epoch, owned: Parts | None) -> MemberAssignment:
    keep, revoke, gain = {}, {}, {}
    unreleased = False
    for topic in set(target) | set(current.assigned):
        want = target.get(topic, frozenset())
        have = current.assigned.get(topic, frozenset())
        keep[topic] = have & want
        revoke[topic] = have - want
        free = {p for p in want - have if owner_epoch(topic, p) == -1}
        unreleased = unreleased or len(free) < len(want - have)
        gain[topic] = free
    keep, revoke, gain = _clean(keep), _clean(revoke), _clean(gain)

    def moved(e: int, state: str, assigned: Parts, revoking: Parts) -> MemberAssignment:
        previous = current.previous_epoch if e == current.epoch else current.epoch
        return MemberAssignment(e, previous, state, assigned, revoking)
    if revoke and owns_any(owned, revoke):
        return moved(epoch, UNREVOKED, keep, revoke)
    if gain:
        merged = {t: keep.get(t, frozenset()) | gain.get(t, frozenset())
                  for t in set(keep) | set(gain)}
        return moved(target_epoch, UNRELEASED if unreleased else STABLE, _clean(merged), {})
    return moved(target_epoch, UNRELEASED if unreleased else STABLE, keep, {})


# ------------------------------------------------------------------ members and the group

@dataclass(frozen=True, slots=True)
class ClassicMeta:
    """A member of a consumer group that speaks the classic protocol (JoinGroup, SyncGroup,
    Heartbeat: Kafka's online migration, :mod:`.group_migration`)."""
    session_timeout_ms: int
    protocols: tuple  # ((name, metadata), ...), in the member's order of preference

    @property
    def protocol(self) -> str:
        """The protocol name it is answered with: its first (as Kafka's)."""
        return self.protocols[0][0]


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    rebalance_timeout_ms: int = 300_000
    subscribed: tuple = ()  # topic names, sorted
    regex: str | None = None  # SubscribedTopicRegex, matched against whole topic names
    instance_id: str | None = None  # a static member's group.instance.id
    assignor: str | None = None
    current: MemberAssignment = field(default_factory=MemberAssignment)
    expires_ms: int = 0
    # set while unrevoked: the rebalance timeout; for a classic member, while it must
    # rejoin or sync
    revoke_deadline_ms: int | None = None
    classic: ClassicMeta | None = None


@dataclass(slots=True)
class ConsumerGroup:
    """The KIP-848 part of a group (kept beside the classic one in ``Group.consumer``)."""
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict = field(default_factory=dict)  # member id -> ConsumerMember
    target: dict = field(default_factory=dict)  # member id -> Parts
    # topic name -> (topic id, partition count) of every subscribed topic that exists
    subscription: dict = field(default_factory=dict)

    def owner_epochs(self):
        """``owner_epoch(topic, partition)`` for :func:`reconcile`: the epoch of the member
        holding the partition (assigned or pending revocation), -1 if none; one pass over
        the members."""
        held: dict = {}
        for mb in self.members.values():
            c = mb.current
            for parts in (c.assigned, c.revoking):
                for topic, ps in parts.items():
                    for p in ps:
                        held[(topic, p)] = c.epoch
        return lambda topic, partition: held.get((topic, partition), -1)

    def state(self) -> str:
        """Kafka's ConsumerGroupState names, as ListGroups and DescribeGroups give them."""
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        if any(mb.current.epoch != self.assignment_epoch or mb.current.state != STABLE
               for mb in self.members.values()):
            return "Reconciling"
        return "Stable"

    def topics_of(self, existing) -> dict:
        """Member id -> the topic names it subscribes to: by name, and each of ``existing``
        (the topics in the metadata image) its regular expression matches whole, internal
        topics left out (Kafka's ``matches()`` on every topic name)."""
        regexes = {mb.regex for mb in self.members.values() if mb.regex}
        matched = {rx: {t for t in existing if t not in INTERNAL_TOPICS
                        and re.fullmatch(rx, t)} for rx in regexes}
        return {mid: set(mb.subscribed) | matched.get(mb.regex, set())
                for mid, mb in self.members.items()}

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        for mb in self.members.values():
            if mb.instance_id == instance_id:
                return mb
        return None

    def assignor(self) -> str:
        """The assignor most members asked for (ties: the first in :data:`ASSIGNORS`), else
        ``uniform``."""
        votes = {name: 0 for name in ASSIGNORS}
        for mb in self.members.values():
            if mb.assignor in votes:
                votes[mb.assignor] += 1
        return max(ASSIGNORS, key=lambda name: votes[name]) if any(votes.values()) \
            else "uniform"


# ------------------------------------------------------------------ subscription patterns

_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def regex_problem(rx: str) -> str | None:
    """Why a SubscribedTopicRegex is refused, or None. Kafka matches with RE2/J, which
    refuses backreferences and lookarounds and matches in linear time; Python's ``re``
    backtracks, so a pattern that repeats something that itself repeats or branches (such
    as ``(a+)+`` or ``(ab|a)*``) is refused too: on a long topic name it could hold the
    broker for minutes."""
    try:
        tree = re._parser.parse(rx)
    except re.error as exc:
        return str(exc)

    def walk(items, repeated: bool) -> str | None:
        for op, av in items:
            name, inner = str(op), ()
            if name.startswith("GROUPREF"):
                return "backreferences are not supported (RE2)"
            if name in ("ASSERT", "ASSERT_NOT"):
                return "lookarounds are not supported (RE2)"
            if name in _REPEATS:
                if repeated:
                    return "a repetition inside a repetition is not supported (it could " \
                           "backtrack exponentially)"
                inner = ((av[2], True),)
            elif name == "BRANCH":
                if repeated:
                    return "alternatives inside a repetition are not supported (they could " \
                           "backtrack exponentially)"
                inner = tuple((b, repeated) for b in av[1])
            elif name == "SUBPATTERN":
                inner = ((av[3], repeated),)
            elif name == "ATOMIC_GROUP":
                inner = ((av, repeated),)
            for sub, rep in inner:
                problem = walk(sub, rep)
                if problem:
                    return problem
        return None
    return walk(tree, False)


# ------------------------------------------------------------------ assignors

def assign(name: str, members: dict, subscription: dict, previous: dict) -> dict:
    """The target assignment: member id -> Parts. ``members``: member id -> subscribed topic
    names; ``subscription``: topic name -> (topic id, partition count); ``previous``: the
    last target (member id -> Parts), which ``uniform`` keeps where it can."""
    if name == "range":
        return _range(members, subscription)
    if name == "uniform":
        return _uniform(members, subscription, previous)
    raise ValueError(f"unknown assignor {name!r} (known: {', '.join(ASSIGNORS)})")


def _range(members: dict, subscription: dict) -> dict:
    out: dict = {mid: {} for mid in members}
    for topic in sorted(subscription):
        tid, count = subscription[topic]
        subs = sorted(mid for mid, topics in members.items() if topic in topics)
        if not subs:
            continue
        per, extra = divmod(count, len(subs))
        start = 0
        for i, mid in enumerate(subs):
            n = per + (1 if i < extra else 0)
            if n:
                out[mid][tid] = frozenset(range(start, start + n))
            start += n
    return {mid: _clean(parts) for mid, parts in out.items()}


def _uniform(members: dict, subscription: dict, previous: dict) -> dict:
    eligible: dict = {}  # (topic id, partition) -> sorted member ids subscribed to its topic
    for topic in sorted(subscription):
        tid, count = subscription[topic]
        subs = sorted(mid for mid, topics in members.items() if topic in topics)
        if subs:
            for p in range(count):
                eligible[(tid, p)] = subs
    owner: dict = {}
    load = {mid: 0 for mid in members}
    for mid, parts in sorted(previous.items()):
        if mid not in members:
            continue
        for tid, ps in parts.items():
            for p in sorted(ps):
                if mid in eligible.get((tid, p), ()) and (tid, p) not in owner:
                    owner[(tid, p)] = mid
                    load[mid] += 1
    for key in sorted(eligible):
        if key not in owner:
            mid = min(eligible[key], key=lambda x: (load[x], x))
            owner[key] = mid
            load[mid] += 1
    moved = True
    while moved:  # move a partition from a member to one holding two or more fewer
        moved = False
        for key in sorted(owner, key=lambda k: (load[owner[k]], k), reverse=True):
            src = owner[key]
            dst = min(eligible[key], key=lambda x: (load[x], x))
            if load[dst] + 1 < load[src]:
                owner[key] = dst
                load[src] -= 1
                load[dst] += 1
                moved = True
                break
    out: dict = {mid: {} for mid in members}
    for (tid, p), mid in owner.items():
        out[mid].setdefault(tid, set()).add(p)
    return {mid: _clean(parts) for mid, parts in out.items()}
