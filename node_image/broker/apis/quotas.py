"""DescribeClientQuotas and AlterClientQuotas (KIP-546), as a KRaft broker answers them: a
description is read from this broker's metadata image, an alteration is decided by the
controller and answered once committed (``node_image/client_quotas.py`` holds the rules).
Describing asks DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS on the cluster.

And the byte-rate quotas enforced on Produce and Fetch (``node_image/quota_meter.py``): every
client is ``User:ANONYMOUS`` to them, the node having no SASL listener, so a quota applies
by client id, the default user's or ``ANONYMOUS``'s own."""
from __future__ import annotations

from ... import acls, client_quotas
from ... import messages as m
from ...kafka_codec import KafkaRequest
from ...quota_meter import FETCH, QUOTA_USER
from .acls import AUTHORIZATION_FAILED, _missing


class QuotaApis:
    """Mixed into :class:`~node_image.broker.kafka_apis.KafkaApis`."""

    def _client_throttle(self, req: KafkaRequest, key: str, value: float, now: int) -> int:
        """Record the client's bytes under its quota for ``key``; its throttle (ms)."""
        return self.quotas.record(self.rm.image.quotas, key, QUOTA_USER, req.client_id, value,
                                  now)

    def _fetch_budget(self, req: KafkaRequest) -> int | None:
        """The most a Fetch answer may carry under the client's quota (None: no quota)."""
        return self.quotas.max_bytes(self.rm.image.quotas, FETCH, QUOTA_USER, req.client_id)

    def _fetch_reply(self, src, req: KafkaRequest, response, size: int, now: int) -> None:
        """Send a Fetch answer of ``size`` bytes of records, or, where that puts the client
        over its quota, an empty one naming the throttle (its bytes taken back), as Kafka's."""
        throttle = self._client_throttle(req, FETCH, size, now)
        if throttle:
            self.quotas.unrecord(self.rm.image.quotas, FETCH, QUOTA_USER, req.client_id, size,
                                 now)
            response = self._cls(req)(throttle_time_ms=throttle, error_code=0, session_id=0,
                                      responses=[])
        self._reply(src, req, response, throttle)

    def _describe_client_quotas(self, src, req: KafkaRequest, now: int) -> None:
        if self._cluster_denied(src, req, acls.DESCRIBE_CONFIGS):
            return
        R = self._cls(req)
        E = R.EntryData
        error, message, rows = client_quotas.describe(
            self.rm.image.quotas, [(c.entity_type, c.match_type, c.match)
                                   for c in req.body.components], req.body.strict)
        self._reply(src, req, R(throttle_time_ms=0, error_code=error, error_message=message,
                                entries=None if rows is None else [E(
                                    entity=[E.EntityData(entity_type=t, entity_name=n)
                                            for t, n in entity],
                                    values=[E.ValueData(key=k, value=v) for k, v in values])
                                    for entity, values in rows]))

    def _alter_client_quotas(self, src, req: KafkaRequest, now: int) -> None:
        b, R = req.body, self._cls(req)
        E = R.EntryData
        entries = tuple((tuple((e.entity_type, e.entity_name) for e in entry.entity),
                         tuple((op.key, float(op.value), bool(op.remove)) for op in entry.ops))
                        for entry in b.entries)
        entities = list(dict.fromkeys(tuple(sorted(pairs)) for pairs, _ in entries))

        def answer(rows):
            self._reply(src, req, R(throttle_time_ms=0, entries=[E(
                error_code=code, error_message=msg,
                entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity])
                for entity, code, msg in rows]))

        def reply(resp, error):
            got = {} if resp is None else {tuple(e): (c, msg) for e, c, msg in resp.results}
            answer([(e, *got.get(e, (error, _missing(error)))) for e in entities])
        if not self._allowed(src, acls.ALTER_CONFIGS, acls.CLUSTER, acls.CLUSTER_NAME):
            answer([(e, m.CLUSTER_AUTHORIZATION_FAILED, AUTHORIZATION_FAILED)
                    for e in entities])
            return
        if not entries:
            answer([])
            return
        self._via_controller(now, self.options.request_timeout_ms, reply,
                             lambda c: m.AlterQuotasRequest(c, entries, bool(b.validate_only)))
