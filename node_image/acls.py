"""ACLs and the authorizer (Kafka's StandardAuthorizer), without I/O.

With ``authorizer.class.name`` set, ACL bindings live in the metadata log
(AccessControlEntryRecord, RemoveAccessControlEntryRecord), so every broker's image
has them: CreateAcls and DeleteAcls go through the controller (:func:`create`,
:func:`delete`, each answered once its records commit), DescribeAcls reads the broker's
image (:func:`matches`). A binding is a resource pattern (type, name, LITERAL or
PREFIXED) and an entry (principal, host, operation, ALLOW or DENY); the numbers are
Kafka's enum codes.

:func:`authorize` decides as StandardAuthorizer does: a super user may do anything; a DENY
binding that matches the principal, host, operation and resource wins; else an ALLOW that
matches (ALL covers every operation; READ, WRITE, DELETE and ALTER imply DESCRIBE;
ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows; a resource that no binding names at all is
allowed only with ``allow.everyone.if.no.acl.found``. A binding matches a resource when it
is LITERAL with the resource's name or ``*``, or PREFIXED with a prefix of the name.
"""
from __future__ import annotations

import uuid
from dataclasses import astuple, dataclass

from . import messages as m
from . import metadata_records as mr

# Kafka's enum codes
RESOURCE_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER",
                  5: "TRANSACTIONAL_ID", 6: "DELEGATION_TOKEN", 7: "USER"}
PATTERN_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
OPERATIONS = {0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE",
              6: "DELETE", 7: "ALTER", 8: "DESCRIBE", 9: "CLUSTER_ACTION",
              10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS", 12: "IDEMPOTENT_WRITE",
              13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS", 15: "TWO_PHASE_COMMIT"}
PERMISSIONS = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = 2, 3, 4, 5
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 10, 11, 12
DENY, ALLOW = 2, 3
WILDCARD = "*"
CLUSTER_NAME = "kafka-cluster"
# an operation -> those whose grant also grants it (Kafka's AclEntry implied operations)
_IMPLIED_BY = {DESCRIBE: (READ, WRITE, DELETE, ALTER), DESCRIBE_CONFIGS: (ALTER_CONFIGS,)}


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


@dataclass(frozen=True, slots=True)
class AclFilter:
    """None (or ANY) matches everything in that field; ``pattern_type`` MATCH matches what
    would apply to a resource of that name."""
    resource_type: int = ANY
    name: str | None = None
    pattern_type: int = ANY
    principal: str | None = None
    host: str | None = None
    operation: int = ANY
    permission: int = ANY


class AclError(ValueError):
    """A binding or filter Kafka refuses (INVALID_REQUEST); the message says which field."""


def validate(b: AclBinding) -> None:
    """Kafka's AclControlManager.validateNewAcl, and the principal's form."""
    if b.resource_type not in RESOURCE_TYPES or b.resource_type in (0, ANY):
        raise AclError(f"Invalid resourceType {RESOURCE_TYPES.get(b.resource_type, b.resource_type)}")
    if b.pattern_type not in (LITERAL, PREFIXED):
        raise AclError(f"Invalid patternType {PATTERN_TYPES.get(b.pattern_type, b.pattern_type)}")
    if b.operation not in OPERATIONS or b.operation in (0, ANY):
        raise AclError(f"Invalid operation {OPERATIONS.get(b.operation, b.operation)}")
    if b.permission not in (DENY, ALLOW):
        raise AclError(f"Invalid permissionType {PERMISSIONS.get(b.permission, b.permission)}")
    if not b.name:
        raise AclError("Resource name should not be empty")
    kind, _, name = (b.principal or "").partition(":")
    if not kind or not name:
        raise AclError(f"Invalid principal {b.principal!r}: expected Type:Name, e.g. User:alice")
    if not b.host:
        raise AclError("Host should not be empty (use * for any host)")


def validate_filter(f: AclFilter) -> None:
    if f.resource_type not in RESOURCE_TYPES or f.resource_type == 0 \
            or f.pattern_type not in PATTERN_TYPES or f.pattern_type == 0:
        raise AclError("Unknown patternFilter.")
    if f.operation not in OPERATIONS or f.operation == 0 \
            or f.permission not in PERMISSIONS or f.permission == 0:
        raise AclError("Unknown entryFilter.")


def _pattern_matches(f: AclFilter, b: AclBinding) -> bool:
    if f.resource_type != ANY and f.resource_type != b.resource_type:
        return False
    if f.pattern_type == MATCH:
        if f.name is None:
            return True
        if b.pattern_type == LITERAL:
            return b.name in (f.name, WILDCARD)
        return f.name.startswith(b.name)
    if f.pattern_type != ANY and f.pattern_type != b.pattern_type:
        return False
    return f.name is None or f.name == b.name


def matches(f: AclFilter, b: AclBinding) -> bool:
    """Kafka's AclBindingFilter.matches."""
    return (_pattern_matches(f, b)
            and (f.principal is None or f.principal == b.principal)
            and (f.host is None or f.host == b.host)
            and f.operation in (ANY, b.operation)
            and f.permission in (ANY, b.permission))


def create(existing: dict, bindings: list, salt: int = 0) -> tuple[list, list]:
    """(new bindings to record as (id, binding), per binding (error message or None)) for a
    CreateAcls; one already there is a success with nothing written, as Kafka's. Ids derive
    from ``salt`` (the log's end offset), so a replayed run makes the same ones."""
    have = set(existing.values())
    out, results = [], []
    for b in bindings:
        try:
            validate(b)
        except AclError as exc:
            results.append(str(exc))
            continue
        results.append(None)
        if b not in have:
            have.add(b)
            out.append((str(uuid.uuid5(uuid.NAMESPACE_OID, f"acl-{salt}-{len(out)}")), b))
    return out, results


def delete(existing: dict, filters: list) -> tuple[list, list]:
    """(ids to remove, per filter (error message or None, [bindings it matched])) for a
    DeleteAcls; a binding matched by two filters is removed once."""
    gone: list = []
    results = []
    for f in filters:
        try:
            validate_filter(f)
        except AclError as exc:
            results.append((str(exc), []))
            continue
        hit = [(i, b) for i, b in sorted(existing.items()) if matches(f, b)]
        gone += [i for i, _ in hit if i not in gone]
        results.append((None, [b for _, b in hit]))
    return gone, results


def _applies(b: AclBinding, resource_type: int, name: str) -> bool:
    if b.resource_type != resource_type:
        return False
    if b.pattern_type == LITERAL:
        return b.name in (name, WILDCARD)
    return name.startswith(b.name)


def authorize(bindings, principal: str, host: str, operation: int, resource_type: int,
              name: str, allow_if_none: bool, super_users: frozenset = frozenset()) -> bool:
    """Whether ``principal`` from ``host`` may do ``operation`` on the resource."""
    if principal in super_users:
        return True
    relevant = [b for b in bindings if _applies(b, resource_type, name)]
    if not relevant:
        return allow_if_none

    def entry(b: AclBinding, ops) -> bool:
        return (b.principal in (principal, "User:*") and b.host in (host, WILDCARD)
                and (b.operation == ALL or b.operation in ops))
    if any(b.permission == DENY and entry(b, (operation,)) for b in relevant):
        return False
    granting = (operation,) + _IMPLIED_BY.get(operation, ())
    return any(b.permission == ALLOW and entry(b, granting) for b in relevant)


def create_plan(existing: dict, rows, salt: int) -> tuple[list, list, list]:
    """The controller's CreateAcls: (records, per creation (error, message), events)."""
    new, errors = create(existing, [AclBinding(*row) for row in rows], salt)
    records = [mr.AccessControlEntryRecord(i, b.resource_type, b.name, b.pattern_type,
                                           b.principal, b.host, b.operation, b.permission)
               for i, b in new]
    return records, [(m.NONE, None) if e is None else (m.INVALID_REQUEST, e)
                     for e in errors], [f"ACL created: {describe(b)}" for _, b in new]


def delete_plan(existing: dict, rows) -> tuple[list, list, list]:
    """The controller's DeleteAcls: (records, per filter (error, message, bindings removed
    as rows), events)."""
    gone, results = delete(existing, [AclFilter(*row) for row in rows])
    out = [(m.NONE, None, tuple(astuple(b) for b in hit)) if e is None
           else (m.INVALID_REQUEST, e, ()) for e, hit in results]
    return ([mr.RemoveAccessControlEntryRecord(i) for i in gone], out,
            [f"ACL deleted: {describe(existing[i])}" for i in gone])


def describe(b: AclBinding) -> str:
    return (f"{PERMISSIONS[b.permission]} {b.principal} from {b.host} "
            f"{OPERATIONS.get(b.operation, b.operation)} on "
            f"{RESOURCE_TYPES.get(b.resource_type, b.resource_type)} "
            f"{PATTERN_TYPES.get(b.pattern_type, b.pattern_type)} {b.name!r}")
