"""The controller's topic writes: CreateTopics, CreatePartitions and DeleteTopics, each
under the client's ``controller_mutation_rate`` quota (KIP-599, ``mutation_quota.py``). A
mixin of :class:`~node_image.controller.QuorumController`, which gives ``_admin_write``.

As Kafka's ReplicationControlManager, a topic counts against the quota only where it would
otherwise go through (a topic that already exists, say, costs nothing): each request is
planned once to find those, their partitions are offered to the quota in the request's
order, and it is planned again without the topics the quota refused, which are answered
THROTTLING_QUOTA_EXCEEDED. ``validate_only`` costs nothing."""
from __future__ import annotations

from . import messages as m
from . import replication_control as rc
from .mutation_quota import EXCEEDED_MESSAGE, THROTTLING_QUOTA_EXCEEDED
from .quota_meter import QUOTA_USER


class TopicWrites:
    def _mutations_admitted(self, req, costs, box: list, now: int) -> set:
        """The names the client's quota refuses of ``costs`` ((name, partitions) of the
        mutations that would go through); ``box[0]`` gets the answer's throttle."""
        if getattr(req, "validate_only", False) or not costs:  # DeleteTopics has none
            return set()
        refused, box[0] = self._mutation_quota.admit(
            self.current.quotas, QUOTA_USER, req.client_id, costs, req.strict, now)
        return refused

    def handle_create_topics(self, src, req: m.CreateTopicsRequest, now: int) -> None:
        box = [0]

        def run(topics):
            return rc.create_topics(self.current, topics, self.raft.log.end_offset,
                                    self.options.default_partitions,
                                    self.options.default_replication_factor)

        def plan():
            _, first = run(req.topics)
            refused = self._mutations_admitted(req, [(r.name, r.partitions) for r in first
                                                     if r.error == m.NONE], box, now)
            records, results = run(tuple(t for t in req.topics if t[0] not in refused))
            rows = [(r.name, r.error, r.message, r.topic_id, r.partitions, r.replication_factor)
                    for r in results]
            rows += [(t[0], THROTTLING_QUOTA_EXCEEDED, EXCEEDED_MESSAGE, None, -1, -1)
                     for t in req.topics if t[0] in refused]
            return (records, rows,
                    [f"creating topic {r.name}" for r in results if r.error == m.NONE])
        self._admin_write(
            src, now, lambda rows: m.CreateTopicsResponse(req.correlation_id, tuple(rows),
                                                          box[0]),
            [(t[0], m.NOT_CONTROLLER, None, None, -1, -1) for t in req.topics], plan,
            req.validate_only)

    def handle_create_partitions(self, src, req: m.CreatePartitionsRequest, now: int) -> None:
        box = [0]

        def plan():
            _, first = rc.create_partitions(self.current, req.topics)
            ok = {r.name for r in first if r.error == m.NONE}
            refused = self._mutations_admitted(req, [
                (name, count - len(self.current.topics[name].partitions))
                for name, count, _ in req.topics if name in ok], box, now)
            records, results = rc.create_partitions(
                self.current, tuple(t for t in req.topics if t[0] not in refused))
            rows = [(r.name, r.error, r.message) for r in results]
            rows += [(t[0], THROTTLING_QUOTA_EXCEEDED, EXCEEDED_MESSAGE) for t in req.topics
                     if t[0] in refused]
            return (records, rows, [f"adding partitions to topic {r.name}" for r in results
                                    if r.error == m.NONE])
        self._admin_write(
            src, now, lambda rows: m.CreatePartitionsResponse(req.correlation_id, tuple(rows),
                                                              box[0]),
            [(t[0], m.NOT_CONTROLLER, None) for t in req.topics], plan, req.validate_only)

    def handle_delete_topics(self, src, req: m.DeleteTopicsRequest, now: int) -> None:
        box = [0]

        def plan():
            # rows answer the request's rows in order (the broker pairs them so)
            _, first = rc.delete_topics(self.current, req.topics)
            refused = self._mutations_admitted(req, [
                (i, len(self.current.topics[r[0]].partitions))
                for i, r in enumerate(first) if r[2] == m.NONE], box, now)
            records, kept = rc.delete_topics(self.current, tuple(
                t for i, t in enumerate(req.topics) if i not in refused))
            kept = iter(kept)
            results = [(first[i][0], first[i][1], THROTTLING_QUOTA_EXCEEDED, EXCEEDED_MESSAGE)
                       if i in refused else next(kept) for i in range(len(req.topics))]
            return records, results, ["deleting topic(s) " + ", ".join(
                r[0] for r in results if r[2] == m.NONE)]
        self._admin_write(
            src, now, lambda rows: m.DeleteTopicsResponse(req.correlation_id, tuple(rows),
                                                          box[0]),
            [(n, i, m.NOT_CONTROLLER, None) for n, i in req.topics], plan)
