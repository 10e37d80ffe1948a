"""DescribeAcls, CreateAcls and DeleteAcls answered as a Kafka broker with no authorizer
(``authorizer.class.name`` unset) answers them: SECURITY_DISABLED, "No Authorizer is
configured on the broker", for the request or for each creation and filter. The node has no
authorizer: every client may do everything, as on such a Kafka cluster, and tools that
manage ACLs get Kafka's own answer instead of refusing the API before sending it."""
from __future__ import annotations

from ... import messages as m
from ...kafka_codec import KafkaRequest

NO_AUTHORIZER = "No Authorizer is configured on the broker"


class AclApis:
    """Mixed into :class:`~node_image.broker.kafka_apis.KafkaApis`."""

    def _describe_acls(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        self._reply(src, req, R(throttle_time_ms=0, error_code=m.SECURITY_DISABLED,
                                error_message=NO_AUTHORIZER, resources=[]))

    def _create_acls(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        self._reply(src, req, R(throttle_time_ms=0, results=[
            R.AclCreationResult(error_code=m.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
            for _ in req.body.creations]))

    def _delete_acls(self, src, req: KafkaRequest, now: int) -> None:
        R = self._cls(req)
        self._reply(src, req, R(throttle_time_ms=0, filter_results=[
            R.DeleteAclsFilterResult(error_code=m.SECURITY_DISABLED,
                                     error_message=NO_AUTHORIZER, matching_acls=[])
            for _ in req.body.filters]))
