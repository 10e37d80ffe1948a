"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848's consumer protocol), answered
by the group coordinator (:mod:`..consumer_coordinator`), and ShareGroupDescribe and
DescribeShareGroupOffsets (KIP-932)."""
from __future__ import annotations

import uuid

from ... import acls
from ... import messages as m
from ...kafka_codec import KafkaRequest
from ..consumer_coordinator import Heartbeat, HeartbeatAnswer
from .common import ZERO_UUID
NO_OPERATIONS = -(1 << 31)  # INT32_MIN: authorized operations not asked for


class ConsumerGroupApis:
    """Mixed into :class:`~node_image.broker.kafka_apis.KafkaApis`."""

    def _consumer_group_heartbeat(self, src, req: KafkaRequest, now: int) -> None:
        b, v, R = req.body, req.api_version, self._cls(req)
        peer = getattr(src, "peer", None)
        owned = None if b.topic_partitions is None else {
            str(tp.topic_id): frozenset(tp.partitions) for tp in b.topic_partitions}
        hb = Heartbeat(
            group_id=b.group_id, member_id=b.member_id or "", member_epoch=b.member_epoch,
            version=v, instance_id=b.instance_id, rack_id=b.rack_id,
            rebalance_timeout_ms=b.rebalance_timeout_ms,
            subscribed=None if b.subscribed_topic_names is None
            else tuple(b.subscribed_topic_names),
            regex=b.subscribed_topic_regex if v >= 1 else None, assignor=b.server_assignor,
            owned=owned, client_id=req.client_id or "",
            client_host=f"/{peer[0]}" if isinstance(peer, tuple) and peer else "")

        def respond(a: HeartbeatAnswer) -> None:
            assignment = None
            if a.assignment is not None:
                A = R.Assignment
                assignment = A(topic_partitions=[
                    A.TopicPartitions(topic_id=uuid.UUID(t), partitions=sorted(ps))
                    for t, ps in sorted(a.assignment.items())])
            self._reply(src, req, R(throttle_time_ms=0, error_code=a.error,
                                    error_message=a.message, member_id=a.member_id,
                                    member_epoch=a.member_epoch,
                                    heartbeat_interval_ms=a.interval_ms, assignment=assignment))
        if not self._allowed(src, acls.READ, acls.GROUP, b.group_id):
            respond(HeartbeatAnswer(m.GROUP_AUTHORIZATION_FAILED,
                                    f"Not authorized to read group {b.group_id}"))
            return
        self.groups.consumer_heartbeat(hb, now, respond)

    def _consumer_group_describe(self, src, req: KafkaRequest, now: int) -> None:
        """ConsumerGroupDescribe: KIP-848 groups only (a classic group, a share group, or
        none, is GROUP_ID_NOT_FOUND, as Kafka answers it); each member's current and target
        assignment with topic names."""
        R = self._cls(req)
        D = R.DescribedGroup

        def described(group_id: str, g):
            cg = g.consumer
            return dict(group_state=cg.state(), group_epoch=cg.group_epoch,
                        assignment_epoch=cg.assignment_epoch, assignor_name=cg.assignor(),
                        members=[D.Member(
                            member_id=mb.member_id, instance_id=mb.instance_id,
                            rack_id=mb.rack_id, member_epoch=mb.current.epoch,
                            client_id=mb.client_id, client_host=mb.client_host,
                            subscribed_topic_names=list(mb.subscribed),
                            subscribed_topic_regex=mb.regex,
                            assignment=self._described_assignment(D, mb.current.assigned),
                            target_assignment=self._described_assignment(
                                D, cg.target.get(mb.member_id, {})))
                            for mb in cg.members.values()])

        def find(group_id: str):
            error, g = self.groups.describe(group_id)
            if g is not None and g.consumer is not None:
                return error, g, None
            other = g is not None or group_id in self.groups.share_groups
            return error, None, "consumer group" if other else None
        self._describe_kind(src, req, D, find, described)

    def _share_group_describe(self, src, req: KafkaRequest, now: int) -> None:
        """ShareGroupDescribe (KIP-932): share groups only (a classic or consumer group, or
        none, is GROUP_ID_NOT_FOUND, as Kafka answers it); each member with the assignment
        it was last given (a member not yet heard from since a rebalance shows the one
        before), the group's epoch as its assignment's epoch (the target is computed with
        each new group epoch) and Kafka's assignor name, ``simple``."""
        R = self._cls(req)
        D = R.DescribedGroup

        def described(group_id: str, g):
            return dict(group_state=g.state(), group_epoch=g.epoch, assignment_epoch=g.epoch,
                        assignor_name="simple",
                        members=[D.Member(member_id=mb.member_id, rack_id=mb.rack_id,
                                          member_epoch=mb.epoch, client_id=mb.client_id,
                                          client_host=mb.client_host,
                                          subscribed_topic_names=list(mb.subscribed),
                                          assignment=self._described_assignment(D, mb.current))
                                 for mb in g.members.values()])

        def find(group_id: str):
            error, classic = self.groups.describe(group_id)
            g = self.groups.share_groups.get(group_id) if error == m.NONE else None
            return error, g, ("share group" if g is None and classic is not None else None)
        self._describe_kind(src, req, D, find, described)

    def _describe_kind(self, src, req: KafkaRequest, D, find, described) -> None:
        """The answer of ConsumerGroupDescribe and ShareGroupDescribe: per group id, the
        coordinator's error (NOT_COORDINATOR, ...), GROUP_AUTHORIZATION_FAILED without
        DESCRIBE on the group, GROUP_ID_NOT_FOUND for no group of the kind asked (``find``:
        group id -> (error, the group or None, the kind the group is not when it is another
        kind)), else ``described(group_id, group)``."""
        out = []
        for group_id in req.body.group_ids:
            error, g, other = find(group_id)
            message = None
            if error == m.NONE and self._denied(src, acls.DESCRIBE, acls.GROUP, group_id):
                error, message = m.GROUP_AUTHORIZATION_FAILED, \
                    f"Not authorized to describe group {group_id}"
            elif error == m.NONE and g is None:
                error = m.GROUP_ID_NOT_FOUND
                message = (f"Group {group_id} not found." if other is None
                           else f"Group {group_id} is not a {other}.")
            if error != m.NONE:
                out.append(D(error_code=error, error_message=message, group_id=group_id,
                             group_state="Dead" if error == m.GROUP_ID_NOT_FOUND else "",
                             group_epoch=-1, assignment_epoch=-1, assignor_name="",
                             members=[], authorized_operations=NO_OPERATIONS))
                continue
            out.append(D(error_code=m.NONE, error_message=None, group_id=group_id,
                         authorized_operations=self._operations(
                             src, acls.GROUP, group_id, req.body.include_authorized_operations,
                             as_bits=True), **described(group_id, g)))
        self._reply(src, req, self._cls(req)(throttle_time_ms=0, groups=out))

    def _described_assignment(self, D, parts: dict):
        """An assignment (topic id -> partitions) as a described member's, with topic names."""
        names = self.rm.image.topic_names
        T = D.Member.Assignment.TopicPartitions
        return D.Member.Assignment(topic_partitions=[
            T(topic_id=uuid.UUID(t), topic_name=names.get(t, ""), partitions=sorted(ps))
            for t, ps in sorted(parts.items())])

    def _describe_share_group_offsets(self, src, req: KafkaRequest, now: int) -> None:
        """DescribeShareGroupOffsets (KIP-932): per share group, each partition's start
        offset (SPSO) and the leader epoch of the state as the coordinator last stored it
        (the partitions' leaders write it there from time to time, as Kafka's write to the
        share coordinator); null topics: every partition the group has a state of. A
        partition without a state has start offset and epoch -1; an unknown topic's
        partitions UNKNOWN_TOPIC_OR_PARTITION, a topic the client may not describe
        TOPIC_AUTHORIZATION_FAILED; a group that is not a share group (or none)
        GROUP_ID_NOT_FOUND, and the coordinator's errors, at the group's level."""
        R = self._cls(req)
        G = R.DescribeShareGroupOffsetsResponseGroup
        T = G.DescribeShareGroupOffsetsResponseTopic
        P = T.DescribeShareGroupOffsetsResponsePartition
        image = self.rm.image
        out = []
        for asked in req.body.groups:
            gid = asked.group_id
            (error, classic), message = self.groups.describe(gid), None
            if error == m.NONE and self._denied(src, acls.DESCRIBE, acls.GROUP, gid):
                error, message = m.GROUP_AUTHORIZATION_FAILED, \
                    f"Not authorized to describe group {gid}"
            elif error == m.NONE and gid not in self.groups.share_groups:
                error = m.GROUP_ID_NOT_FOUND
                message = (f"Group {gid} is not a share group." if classic is not None
                           else f"Group {gid} not found.")
            if error != m.NONE:
                out.append(G(group_id=gid, topics=[], error_code=error, error_message=message))
                continue
            states = {(t, p): v for (g, t, p), v in self.groups.share_states.items() if g == gid}
            if asked.topics is None:
                wanted = {}
                for t, p in sorted(states):
                    wanted.setdefault(image.topic_names.get(t, ""), []).append(p)
            else:
                wanted = {t.topic_name: list(t.partitions) for t in asked.topics}
            topics = []
            for name, parts in wanted.items():
                topic = image.topics.get(name)
                perr, pmsg = m.NONE, None
                if not self._allowed(src, acls.DESCRIBE, acls.TOPIC, name):
                    perr, pmsg = m.TOPIC_AUTHORIZATION_FAILED, \
                        f"Not authorized to describe topic {name}"
                elif topic is None:
                    perr, pmsg = m.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} is not known"
                tid = topic.topic_id if topic is not None and perr == m.NONE else None
                rows = []
                for p in parts:
                    v = states.get((tid, p)) if tid is not None else None
                    bad = perr == m.NONE and p not in topic.partitions
                    rows.append(P(partition_index=p,
                                  start_offset=-1 if v is None else v.start_offset,
                                  leader_epoch=-1 if v is None else v.leader_epoch,
                                  error_code=m.UNKNOWN_TOPIC_OR_PARTITION if bad else perr,
                                  error_message=(f"Topic {name} has no partition {p}" if bad
                                                 else pmsg)))
                topics.append(T(topic_name=name,
                                topic_id=ZERO_UUID if tid is None else uuid.UUID(tid),
                                partitions=rows))
            out.append(G(group_id=gid, topics=topics, error_code=m.NONE, error_message=None))
        self._reply(src, req, R(throttle_time_ms=0, groups=out))
