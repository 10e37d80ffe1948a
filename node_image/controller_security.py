"""The controller's admin writes that keep records and nothing else: ACLs (``acls.py``),
SCRAM credentials (``scram.py``) and client quotas (``client_quotas.py``). A mixin of
:class:`~node_image.controller.QuorumController`, which gives ``_admin_write``."""
from __future__ import annotations

from . import acls, client_quotas, scram
from . import messages as m


class SecurityWrites:
    def handle_create_acls(self, src, req: m.CreateAclsRequest, now: int) -> None:
        self._admin_write(
            src, now, lambda rows: m.CreateAclsResponse(req.correlation_id, tuple(rows)),
            [(m.NOT_CONTROLLER, None)] * len(req.creations),
            lambda: acls.create_plan(self.current.acls, req.creations, self.raft.log.end_offset))

    def handle_delete_acls(self, src, req: m.DeleteAclsRequest, now: int) -> None:
        self._admin_write(
            src, now, lambda rows: m.DeleteAclsResponse(req.correlation_id, tuple(rows)),
            [(m.NOT_CONTROLLER, None, ())] * len(req.filters),
            lambda: acls.delete_plan(self.current.acls, req.filters))

    def handle_alter_scram(self, src, req: m.AlterScramRequest, now: int) -> None:
        self._admin_write(
            src, now, lambda rows: m.AlterScramResponse(req.correlation_id, tuple(rows)),
            [(r[0], m.NOT_CONTROLLER, None) for r in (*req.deletions, *req.upsertions)],
            lambda: scram.alter_plan(self.current.scram, req.deletions, req.upsertions,
                                     self.current.features))

    def handle_alter_quotas(self, src, req: m.AlterQuotasRequest, now: int) -> None:
        self._admin_write(
            src, now, lambda rows: m.AlterQuotasResponse(req.correlation_id, tuple(rows)),
            [(tuple(sorted(e[0])), m.NOT_CONTROLLER, None) for e in req.entries],
            lambda: client_quotas.alter_plan(self.current.quotas, req.entries),
            req.validate_only)
