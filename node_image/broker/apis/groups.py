"""FindCoordinator and the classic group protocol: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, DescribeGroups, ListGroups, DeleteGroups, OffsetCommit, OffsetFetch and
OffsetDelete, answered by the group coordinator."""
from __future__ import annotations

from ... import acls
from ... import messages as m
from ...kafka_codec import KafkaRequest
from ..group_state import JoinResult
from ..group_metadata import OFFSETS_TOPIC
from ..transaction_coordinator import TXN_TOPIC
from .acls import AUTHORIZATION_FAILED
from .common import NOT_AUTHORIZED_OPERATIONS, CREATE_TOPIC_RETRY_MS


class GroupApis:
    """Mixed into :class:`~node_image.broker.kafka_apis.KafkaApis`."""

    def _find_coordinator(self, src, req: KafkaRequest, now: int) -> None:
        """One key before v4, a batch of keys (KIP-699) from v4; each answered alike."""
        R, v = self._cls(req), req.api_version
        key_type = req.body.key_type if v >= 1 else 0
        if v < 4:
            error, message, node, host, port = self._coordinator(key_type, req.body.key, now)
            self._reply(src, req, R(throttle_time_ms=0, error_code=error, error_message=message,
                                    node_id=node, host=host, port=port))
            return
        C = R.Coordinator
        out = []
        for key in req.body.coordinator_keys:
            error, message, node, host, port = self._coordinator(key_type, key, now)
            out.append(C(key=key, node_id=node, host=host, port=port, error_code=error,
                         error_message=message))
        self._reply(src, req, R(throttle_time_ms=0, coordinators=out))

    def _coordinator(self, key_type: int, key: str,
                     now: int) -> tuple[int, str | None, int, str, int]:
        """(error, message, node id, host, port) of the coordinator of a group (key type 0) or
        a transactional id (1)."""
        if key_type == 2:
            return (m.INVALID_REQUEST, "share groups (KIP-932) are not supported", -1, "", -1)
        if key_type not in (0, 1):
            return m.INVALID_REQUEST, f"unknown key type {key_type}", -1, "", -1
        if not key:
            return m.INVALID_REQUEST, "the key (group or transactional id) is empty", -1, "", -1
        txn = key_type == 1
        topic = TXN_TOPIC if txn else OFFSETS_TOPIC
        pid = (self.txns if txn else self.groups).partition_of(key)
        reg = self.rm.image.partition(topic, pid)
        if reg is None:
            self._create_internal_topic(topic, now)
            return m.COORDINATOR_NOT_AVAILABLE, f"{topic} is being created", -1, "", -1
        b = self.rm.image.brokers.get(reg.leader)
        ep = b.endpoint("PLAINTEXT") if b is not None and not b.fenced else None
        if ep is None:
            return m.COORDINATOR_NOT_AVAILABLE, f"{topic}-{pid} has no leader", -1, "", -1
        return m.NONE, None, reg.leader, ep[0], ep[1]

    def _create_internal_topic(self, topic: str, now: int) -> None:
        """Ask the controller for ``__consumer_offsets`` or ``__transaction_state`` (at most once
        a second each)."""
        o = self.options
        if topic == OFFSETS_TOPIC:
            row = (topic, o.offsets_topic_partitions, o.offsets_topic_replication_factor, ())
        else:
            row = (topic, o.transaction_topic_partitions, o.transaction_topic_replication_factor,
                   (("min.insync.replicas", str(o.transaction_topic_min_isr)),))
        self._ask_to_create(row, now)

    def _ask_to_create(self, row: tuple, now: int) -> None:
        """Ask the controller to create a topic the broker needs or a client named (row: name,
        partitions, replication factor, configs), at most once a second per topic; a failure
        is logged when the answer comes (:meth:`handle_controller_response`)."""
        topic = row[0]
        if now < self._create_asked_ms.get(topic, -CREATE_TOPIC_RETRY_MS) + CREATE_TOPIC_RETRY_MS:
            return
        self._create_asked_ms[topic] = now
        corr = self.broker.send_to_controller(
            lambda c: m.CreateTopicsRequest(c, ((*row, ()),), False))  # (no manual placement)
        if corr is not None:
            self._internal_creates.add(corr)

    def _join_group(self, src, req: KafkaRequest, now: int) -> None:
        b, v, R = req.body, req.api_version, self._cls(req)

        def respond(r) -> None:
            g = self.groups.describe(b.group_id)[1] if r.error == m.NONE else None
            static = {mb.member_id: mb.instance_id for mb in g.members.values()} if g else {}
            members = [R.JoinGroupResponseMember(member_id=mid, group_instance_id=static.get(mid),
                                                 metadata=meta) for mid, meta in r.members]
            extra = {}
            if v >= 7:  # the group's protocol type, from v7 (KIP-559)
                extra["protocol_type"] = g.protocol_type if g is not None else None
            if v >= 9:  # KIP-814: only a static leader rejoining may skip the assignment
                extra["skip_assignment"] = r.skip_assignment
            self._reply(src, req, R(throttle_time_ms=0, error_code=r.error,
                                    generation_id=r.generation, protocol_name=r.protocol or "",
                                    leader=r.leader, member_id=r.member_id, members=members,
                                    **extra))
        if v >= 8 and b.reason:
            self._on_event(f"JoinGroup of {b.group_id!r} by {b.member_id or 'a new member'}: "
                           f"{b.reason}")
        if not self._allowed(src, acls.READ, acls.GROUP, b.group_id):
            respond(JoinResult(m.GROUP_AUTHORIZATION_FAILED, b.member_id))
            return
        peer = getattr(src, "peer", None)
        host = f"/{peer[0]}" if isinstance(peer, tuple) and peer else ""
        instance = b.group_instance_id if v >= 5 else None
        self.groups.join(b.group_id, b.member_id, req.client_id or "", host, b.session_timeout_ms,
                         b.rebalance_timeout_ms if v >= 1 else b.session_timeout_ms,
                         b.protocol_type, tuple((p.name, bytes(p.metadata)) for p in b.protocols),
                         v >= 4 and instance is None, now, respond, instance, v >= 9)

    def _sync_group(self, src, req: KafkaRequest, now: int) -> None:
        b, R, v = req.body, self._cls(req), req.api_version

        def respond(error: int, assignment: bytes) -> None:
            extra = {}
            if v >= 5:  # the group's protocol type and name, from v5 (KIP-559)
                g = self.groups.describe(b.group_id)[1] if error == m.NONE else None
                extra = {"protocol_type": g.protocol_type if g is not None else None,
                         "protocol_name": None if g is None else g.protocol
                         if g.consumer is None else b.protocol_name}  # (a classic member)
            self._reply(src, req, R(throttle_time_ms=0, error_code=error, assignment=assignment,
                                    **extra))
        self.groups.sync(b.group_id, b.generation_id, b.member_id,
                         {a.member_id: bytes(a.assignment) for a in b.assignments}, now, respond,
                         b.protocol_type if v >= 5 else None, b.protocol_name if v >= 5 else None,
                         b.group_instance_id if v >= 3 else None)

    def _heartbeat(self, src, req: KafkaRequest, now: int) -> None:
        b = req.body
        error = self.groups.heartbeat(b.group_id, b.generation_id, b.member_id, now,
                                      b.group_instance_id if req.api_version >= 3 else None)
        self._reply(src, req, self._cls(req)(throttle_time_ms=0, error_code=error))

    def _leave_group(self, src, req: KafkaRequest, now: int) -> None:
        b, R = req.body, self._cls(req)
        if req.api_version < 3:
            error = self.groups.leave(b.group_id, b.member_id, now)
            self._reply(src, req, R(throttle_time_ms=0, error_code=error, members=[]))
            return
        if req.api_version >= 5 and b.members and b.members[0].reason:
            self._on_event(f"LeaveGroup of {b.group_id!r}: {b.members[0].reason}")
        out = [R.MemberResponse(member_id=x.member_id, group_instance_id=x.group_instance_id,
                                error_code=self.groups.leave(b.group_id, x.member_id, now,
                                                             x.group_instance_id))
               for x in b.members]
        self._reply(src, req, R(throttle_time_ms=0, error_code=m.NONE, members=out))

    def _describe_groups(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        D = R.DescribedGroup
        out = []
        for group_id in req.body.groups:
            if self._denied(src, acls.DESCRIBE, acls.GROUP, group_id):
                out.append(D(error_code=m.GROUP_AUTHORIZATION_FAILED,
                             error_message=AUTHORIZATION_FAILED, group_id=group_id,
                             group_state="", protocol_type="", protocol_data="", members=[],
                             authorized_operations=NOT_AUTHORIZED_OPERATIONS))
                continue
            error, g = self.groups.describe(group_id)
            message = f"Group {group_id} not found."
            if g is not None and g.consumer is not None:  # as Kafka's: classic groups only
                g, message = None, f"Group {group_id} is not a classic group."
            if g is None:
                if error == m.NONE and req.api_version >= 6:  # KIP-1043
                    error = m.GROUP_ID_NOT_FOUND
                else:
                    message = None
                out.append(D(error_code=error, error_message=message, group_id=group_id,
                             group_state="Dead" if error in (m.NONE, m.GROUP_ID_NOT_FOUND)
                             else "",
                             protocol_type="", protocol_data="", members=[],
                             authorized_operations=NOT_AUTHORIZED_OPERATIONS))
                continue
            stable = g.state == "Stable"  # Kafka's summary: metadata only when stable
            members = [D.DescribedGroupMember(
                member_id=mb.member_id, group_instance_id=mb.instance_id,
                client_id=mb.client_id,
                client_host=mb.client_host,
                member_metadata=mb.metadata(g.protocol) if stable else b"",
                member_assignment=mb.assignment if stable else b"")
                for mb in g.members.values()]
            out.append(D(error_code=m.NONE, group_id=group_id, group_state=g.state,
                         protocol_type=g.protocol_type or "",
                         protocol_data=(g.protocol or "") if stable else "", members=members,
                         authorized_operations=self._operations(
                             src, acls.GROUP, group_id, getattr(
                                 req.body, "include_authorized_operations", False))))
        self._reply(src, req, R(throttle_time_ms=0, groups=out))

    def _delete_groups(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)

        names = list(req.body.groups_names)
        refused = {g: m.GROUP_AUTHORIZATION_FAILED for g in names
                   if self._denied(src, acls.DELETE, acls.GROUP, g)}

        def respond(results: dict[str, int]) -> None:
            results = {**results, **refused}
            self._reply(src, req, R(throttle_time_ms=0, results=[
                R.DeletableGroupResult(group_id=g, error_code=results[g]) for g in names
                if g in results]))
        if len(refused) == len(names):
            respond({})
            return
        self.groups.delete_groups([g for g in names if g not in refused], now, respond)

    def _offset_delete(self, src, req: KafkaRequest, now: int) -> None:
        R, b = self._cls(req), req.body
        T = R.OffsetDeleteResponseTopic
        keys = [(t.name, p.partition_index) for t in b.topics for p in t.partitions]
        refused = {k: m.TOPIC_AUTHORIZATION_FAILED for k in keys
                   if self._denied(src, acls.READ, acls.TOPIC, k[0])}

        def respond(error: int, results: dict) -> None:
            results = {**results, **refused}
            by_topic: dict[str, list] = {}
            for (topic, idx), e in results.items():
                by_topic.setdefault(topic, []).append(
                    T.OffsetDeleteResponsePartition(partition_index=idx, error_code=e))
            self._reply(src, req, R(error_code=error, throttle_time_ms=0, topics=[
                T(name=t, partitions=ps) for t, ps in by_topic.items()]))
        if self._denied(src, acls.DELETE, acls.GROUP, b.group_id):
            respond(m.GROUP_AUTHORIZATION_FAILED, {})
            return
        self.groups.delete_offsets(b.group_id, [k for k in keys if k not in refused], now,
                                   respond)

    def _list_groups(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        v = req.api_version
        # v4: a filter on states (Kafka's names, case-insensitive); v5: on types (classic,
        # consumer for KIP-848's groups, share for KIP-932's)
        states = {s.lower() for s in req.body.states_filter or ()} if v >= 4 else set()
        types = {t.lower() for t in req.body.types_filter or ()} if v >= 5 else set()

        def state(g) -> str:
            return g.state if g.consumer is None else g.consumer.state()

        def kind(g) -> str:
            return "classic" if g.consumer is None else "consumer"
        rows = [(g.group_id, g.protocol_type or "", state(g), kind(g))
                for g in self.groups.list_groups()]
        rows += [(gid, "share", self.groups.share_groups[gid].state(), "share")  # KIP-932
                 for gid in self.groups.share_group_ids()]
        rows = [r for r in sorted(rows) if (not states or r[2].lower() in states)
                and (not types or r[3] in types)]
        extra = (lambda r: {"group_state": r[2], "group_type": r[3]}) if v >= 5 else (
            (lambda r: {"group_state": r[2]}) if v >= 4 else (lambda r: {}))
        self._reply(src, req, R(throttle_time_ms=0, error_code=m.NONE, groups=[
            R.ListedGroup(group_id=r[0], protocol_type=r[1], **extra(r)) for r in rows]))

    def _offset_commit(self, src, req: KafkaRequest, now: int) -> None:
        R, b = self._cls(req), req.body
        T = R.OffsetCommitResponseTopic
        self._commit_offsets(src, req, now, 6, T, T.OffsetCommitResponsePartition,
                             b.member_id, b.generation_id_or_member_epoch, None,
                             b.group_instance_id if req.api_version >= 7 else None,
                             version=req.api_version)

    def _commit_offsets(self, src, req: KafkaRequest, now: int, epoch_since: int, T, P,
                        member_id: str, generation: int, producer,
                        instance_id: str | None = None, version: int = 9) -> None:
        """OffsetCommit and TxnOffsetCommit (``producer``: its id and epoch); leader epochs
        are in requests from version ``epoch_since``."""
        b = req.body
        offsets = {}
        for t in b.topics:
            for p in t.partitions:
                epoch = p.committed_leader_epoch if req.api_version >= epoch_since else -1
                offsets[(t.name, p.partition_index)] = (p.committed_offset, epoch,
                                                        p.committed_metadata)

        def respond(errors: dict) -> None:
            self._reply(src, req, self._cls(req)(throttle_time_ms=0, topics=[
                T(name=t.name, partitions=[
                    P(partition_index=p.partition_index,
                      error_code=errors[(t.name, p.partition_index)]) for p in t.partitions])
                for t in b.topics]))
        if not self._allowed(src, acls.READ, acls.GROUP, b.group_id):
            respond({k: m.GROUP_AUTHORIZATION_FAILED for k in offsets})
            return
        self.groups.commit_offsets(b.group_id, member_id, generation, offsets, now, respond,
                                   producer=producer, instance_id=instance_id, version=version)

    def _offset_fetch(self, src, req: KafkaRequest, now: int) -> None:
        """One group before v8, a batch of groups from v8 (KIP-709); ``require_stable``
        from v7 (KIP-447). v9's member id and epoch are checked in a KIP-848 group (a read
        naming no member is allowed, as Kafka's); a classic group's offsets anyone may read."""
        R, v = self._cls(req), req.api_version
        stable = v >= 7 and req.body.require_stable
        if v < 8:
            T = R.OffsetFetchResponseTopic
            error, topics = self._group_offsets(req.body.group_id, req.body.topics, v, stable,
                                                T, T.OffsetFetchResponsePartition, src=src)
            if error != m.NONE and v >= 2:
                self._reply(src, req, R(throttle_time_ms=0, topics=[], error_code=error))
            else:
                self._reply(src, req, R(throttle_time_ms=0, error_code=m.NONE, topics=topics))
            return
        G = R.OffsetFetchResponseGroup
        out = []
        for group in req.body.groups:
            T = G.OffsetFetchResponseTopics
            member = (group.member_id, group.member_epoch) if v >= 9 else None
            error, topics = self._group_offsets(group.group_id, group.topics, v, stable,
                                                T, T.OffsetFetchResponsePartitions, member, src)
            out.append(G(group_id=group.group_id, topics=topics, error_code=error))
        self._reply(src, req, R(throttle_time_ms=0, groups=out))

    def _group_offsets(self, group_id: str, wanted, version: int, stable: bool, T, P,
                       member: tuple | None = None, src=None):
        """(group error, topics of the answer) for one group's OffsetFetch; T and P are the
        version's topic and partition classes (v8 renamed both when it batched groups)."""
        keys = None if wanted is None else [(t.name, i) for t in wanted
                                            for i in t.partition_indexes]
        error, found = (self.groups.fetch_offsets(group_id, keys, stable, member)
                        if self._allowed(src, acls.DESCRIBE, acls.GROUP, group_id)
                        else (m.GROUP_AUTHORIZATION_FAILED, []))
        if error != m.NONE:
            if version >= 2:
                return error, []
            found = [(k, None, error) for k in keys or []]  # v1: errors per partition only
        by_topic: dict[str, list] = {}
        for (topic, idx), value, part_error in found:
            by_topic.setdefault(topic, []).append(P(
                partition_index=idx, committed_offset=value.offset if value else -1,
                committed_leader_epoch=value.leader_epoch if value else -1,
                metadata=value.metadata if value else "", error_code=part_error))
        return m.NONE, [T(name=t, partitions=ps) for t, ps in by_topic.items()]
