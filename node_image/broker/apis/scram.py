"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554), as a KRaft broker
answers them: a description is read from this broker's metadata image, an alteration is
decided by the controller and answered once committed (``node_image/scram.py`` holds the
rules). Describing asks DESCRIBE on the cluster, altering ALTER on the cluster."""
from __future__ import annotations

from ... import acls
from ... import messages as m
from ... import scram
from ...kafka_codec import KafkaRequest
from .acls import AUTHORIZATION_FAILED, _missing


class ScramApis:
    """Mixed into :class:`~node_image.broker.kafka_apis.KafkaApis`."""

    def _describe_user_scram_credentials(self, src, req: KafkaRequest, now: int) -> None:
        if self._cluster_denied(src, req, acls.DESCRIBE):
            return
        R = self._cls(req)
        Result = R.DescribeUserScramCredentialsResult
        users = None if req.body.users is None else [u.name for u in req.body.users]
        self._reply(src, req, R(throttle_time_ms=0, error_code=m.NONE, error_message=None,
                                results=[Result(user=u, error_code=e, error_message=msg,
                                                credential_infos=[Result.CredentialInfo(
                                                    mechanism=mech, iterations=n)
                                                    for mech, n in infos])
                                         for u, e, msg, infos in scram.describe(
                                             self.rm.image.scram, users)]))

    def _alter_user_scram_credentials(self, src, req: KafkaRequest, now: int) -> None:
        b, R = req.body, self._cls(req)
        deletions = tuple((d.name, d.mechanism) for d in b.deletions)
        upsertions = tuple((u.name, u.mechanism, u.iterations, bytes(u.salt),
                            bytes(u.salted_password)) for u in b.upsertions)
        users = list(dict.fromkeys(r[0] for r in (*deletions, *upsertions)))

        def reply(resp, error):
            rows = {} if resp is None else {u: (e, msg) for u, e, msg in resp.results}
            missing = (error, _missing(error))
            self._reply(src, req, R(throttle_time_ms=0, results=[
                R.AlterUserScramCredentialsResult(user=u, error_code=code, error_message=msg)
                for u in users for code, msg in [rows.get(u, missing)]]))
        if not self._allowed(src, acls.ALTER, acls.CLUSTER, acls.CLUSTER_NAME):
            self._reply(src, req, R(throttle_time_ms=0, results=[
                R.AlterUserScramCredentialsResult(
                    user=u, error_code=m.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=AUTHORIZATION_FAILED) for u in users]))
            return
        if not users:
            reply(None, m.NONE)
            return
        self._via_controller(now, self.options.request_timeout_ms, reply,
                             lambda c: m.AlterScramRequest(c, deletions, upsertions))
