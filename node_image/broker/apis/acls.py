"""DescribeAcls, CreateAcls and DeleteAcls, and the authorizer's checks.

Without an authorizer (``authorizer.class.name`` unset) they are answered as a Kafka broker
with none answers them: SECURITY_DISABLED, "No Authorizer is configured on the broker", for
the request or for each creation and filter, and every client may do everything. With
StandardAuthorizer the bindings are kept in the metadata log (``node_image/acls.py``):
CreateAcls and DeleteAcls go through the controller and are answered once committed,
DescribeAcls reads this broker's image. Clients connect over PLAINTEXT, so every request
comes from ``User:ANONYMOUS`` at the client's address; :meth:`_allowed` is what handlers
ask before they act.
"""
from __future__ import annotations

from ... import acls
from ... import messages as m
from ...kafka_codec import KafkaRequest

NO_AUTHORIZER = "No Authorizer is configured on the broker"
ANONYMOUS = "User:ANONYMOUS"
AUTHORIZATION_FAILED = "Authorization failed."  # Kafka's message for every such refusal
DENIED = {acls.TOPIC: m.TOPIC_AUTHORIZATION_FAILED, acls.GROUP: m.GROUP_AUTHORIZATION_FAILED,
          acls.CLUSTER: m.CLUSTER_AUTHORIZATION_FAILED,
          acls.TRANSACTIONAL_ID: m.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}


# the operations each resource type has (Kafka's AclEntry.supportedOperations), which
# ``authorized_operations`` fields tell a client it may do
SUPPORTED = {
    acls.TOPIC: (acls.READ, acls.WRITE, acls.CREATE, acls.DESCRIBE, acls.DELETE, acls.ALTER,
                 acls.DESCRIBE_CONFIGS, acls.ALTER_CONFIGS),
    acls.GROUP: (acls.READ, acls.DESCRIBE, acls.DELETE),
    acls.CLUSTER: (acls.CREATE, 9, acls.DESCRIBE_CONFIGS, acls.ALTER_CONFIGS,  # 9: CLUSTER_ACTION
                   acls.IDEMPOTENT_WRITE, acls.ALTER, acls.DESCRIBE),
}
NOT_ASKED = -(1 << 31)  # INT32_MIN: authorized operations not asked for


def _missing(error: int) -> str:
    return f"the controller did not answer: {m.ERROR_NAMES.get(error, error)}"


class AclApis:
    """Mixed into :class:`~node_image.broker.kafka_apis.KafkaApis`."""

    def _allowed(self, src, operation: int, resource_type: int, name: str) -> bool:
        """Whether the client on ``src`` may do ``operation`` on the resource (always, with
        no authorizer)."""
        o = self.options
        if not o.authorizer:
            return True
        peer = getattr(src, "peer", None)
        host = peer[0] if isinstance(peer, tuple) and peer else ""
        return acls.authorize(self.rm.image.acls.values(), ANONYMOUS, host, operation,
                              resource_type, name, o.allow_everyone_if_no_acl_found,
                              o.super_users)

    def _operations(self, src, resource_type: int, name: str, asked: bool,
                    as_bits: bool = False):
        """An ``authorized_operations`` field: the operations of the resource type the client
        on ``src`` may do (all of them with no authorizer, as Kafka answers), as the set
        kafka-python's bitfield fields take (None: not asked), or with ``as_bits`` as the
        int32 itself (a bit per operation; INT32_MIN: not asked)."""
        if not asked:
            return NOT_ASKED if as_bits else None
        ops = {op for op in SUPPORTED[resource_type]
               if self._allowed(src, op, resource_type, name)}
        return sum(1 << op for op in ops) if as_bits else ops

    def _denied(self, src, operation: int, resource_type: int, name: str) -> int | None:
        """The error a refused operation is answered with (Kafka's per resource type), None
        if the client on ``src`` may do it."""
        if self._allowed(src, operation, resource_type, name):
            return None
        return DENIED[resource_type]

    def _cluster_denied(self, src, req: KafkaRequest, operation: int) -> bool:
        """For an API that acts on the cluster: answer CLUSTER_AUTHORIZATION_FAILED (the
        response's top-level error) and say True, if the client may not."""
        if self._allowed(src, operation, acls.CLUSTER, acls.CLUSTER_NAME):
            return False
        R = self._cls(req)
        message = {"error_message": AUTHORIZATION_FAILED} if "error_message" in R.fields else {}
        self._reply(src, req, R(error_code=m.CLUSTER_AUTHORIZATION_FAILED, **message))
        return True

    def _describe_acls(self, src, req: KafkaRequest, now: int) -> None:
        R, b, v = self._cls(req), req.body, req.api_version
        if not self.options.authorizer:
            self._reply(src, req, R(throttle_time_ms=0, error_code=m.SECURITY_DISABLED,
                                    error_message=NO_AUTHORIZER, resources=[]))
            return
        f = acls.AclFilter(b.resource_type_filter, b.resource_name_filter,
                           b.pattern_type_filter if v >= 1 else acls.LITERAL,
                           b.principal_filter, b.host_filter, b.operation, b.permission_type)
        try:
            acls.validate_filter(f)
        except acls.AclError as exc:
            self._reply(src, req, R(throttle_time_ms=0, error_code=m.INVALID_REQUEST,
                                    error_message=str(exc), resources=[]))
            return
        by_resource: dict = {}
        for x in sorted(self.rm.image.acls.values(), key=acls.describe):
            if acls.matches(f, x):
                by_resource.setdefault((x.resource_type, x.name, x.pattern_type), []).append(x)
        D = R.DescribeAclsResource
        self._reply(src, req, R(throttle_time_ms=0, error_code=m.NONE, error_message=None,
                                resources=[D(resource_type=t, resource_name=n, pattern_type=p,
                                             acls=[D.AclDescription(
                                                 principal=x.principal, host=x.host,
                                                 operation=x.operation,
                                                 permission_type=x.permission) for x in xs])
                                           for (t, n, p), xs in by_resource.items()]))

    def _create_acls(self, src, req: KafkaRequest, now: int) -> None:
        R, v = self._cls(req), req.api_version
        creations = req.body.creations
        if not self.options.authorizer:
            self._reply(src, req, R(throttle_time_ms=0, results=[
                R.AclCreationResult(error_code=m.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
                for _ in creations]))
            return
        rows = tuple((c.resource_type, c.resource_name,
                      c.resource_pattern_type if v >= 1 else acls.LITERAL, c.principal, c.host,
                      c.operation, c.permission_type) for c in creations)

        def reply(resp, error):
            results = resp.results if resp is not None else [(error, _missing(error))] * len(rows)
            self._reply(src, req, R(throttle_time_ms=0, results=[
                R.AclCreationResult(error_code=e, error_message=msg) for e, msg in results]))
        self._via_controller(now, self.options.request_timeout_ms, reply,
                             lambda c: m.CreateAclsRequest(c, rows))

    def _delete_acls(self, src, req: KafkaRequest, now: int) -> None:
        R, v = self._cls(req), req.api_version
        filters = req.body.filters
        if not self.options.authorizer:
            self._reply(src, req, R(throttle_time_ms=0, filter_results=[
                R.DeleteAclsFilterResult(error_code=m.SECURITY_DISABLED,
                                         error_message=NO_AUTHORIZER, matching_acls=[])
                for _ in filters]))
            return
        rows = tuple((f.resource_type_filter, f.resource_name_filter,
                      f.pattern_type_filter if v >= 1 else acls.LITERAL, f.principal_filter,
                      f.host_filter, f.operation, f.permission_type) for f in filters)
        F = R.DeleteAclsFilterResult

        def reply(resp, error):
            results = resp.results if resp is not None else [
                (error, _missing(error), ())] * len(rows)
            self._reply(src, req, R(throttle_time_ms=0, filter_results=[
                F(error_code=e, error_message=msg, matching_acls=[
                    F.DeleteAclsMatchingAcl(error_code=m.NONE, error_message=None,
                                            resource_type=t, resource_name=n, pattern_type=p,
                                            principal=pr, host=h, operation=o,
                                            permission_type=pe)
                    for t, n, p, pr, h, o, pe in hit]) for e, msg, hit in results]))
        self._via_controller(now, self.options.request_timeout_ms, reply,
                             lambda c: m.DeleteAclsRequest(c, rows))
