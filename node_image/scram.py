"""SCRAM credentials (KIP-554), kept as Kafka's ScramControlManager keeps them: the
controller turns AlterUserScramCredentials into UserScramCredentialRecord and
RemoveUserScramCredentialRecord, so every broker's image holds each user's credentials;
DescribeUserScramCredentials is answered from that image. The node has no SASL listener:
the credentials are stored and described, and authenticate nothing.

Rules (Kafka's): a client sends the salted password (``Hi(password, salt, iterations)``);
the controller keeps the salt, ``StoredKey = H(HMAC(salted, "Client Key"))`` and
``ServerKey = HMAC(salted, "Server Key")`` (RFC 5802), never the salted password. A
mechanism other than SCRAM-SHA-256 (1) and SCRAM-SHA-512 (2) is UNSUPPORTED_SASL_MECHANISM;
iterations outside 4096-16384, an empty user name or an empty salt or salted password
UNACCEPTABLE_CREDENTIAL; deleting a credential that is not there RESOURCE_NOT_FOUND; a
user named twice in one request DUPLICATE_RESOURCE for each of its alterations; below
``metadata.version`` 3.5-IV2 (level 11) every alteration UNSUPPORTED_VERSION.
"""
from __future__ import annotations

import hashlib
import hmac

from . import messages as m
from . import metadata_records as mr

UNSUPPORTED_SASL_MECHANISM, RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE = 33, 91, 92
UNACCEPTABLE_CREDENTIAL = 93
# Kafka's ScramMechanism: type -> (name, hash)
MECHANISMS = {1: ("SCRAM-SHA-256", hashlib.sha256), 2: ("SCRAM-SHA-512", hashlib.sha512)}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384
SCRAM_LEVEL = 11  # metadata.version 3.5-IV2: the first that keeps SCRAM credentials


def keys(mechanism: int, salted_password: bytes) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) of a salted password (RFC 5802)."""
    digest = MECHANISMS[mechanism][1]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    return digest(client_key).digest(), hmac.new(salted_password, b"Server Key", digest).digest()


def _why_not(name: str, mechanism: int, iterations: int | None = None,
             salt: bytes = b"-", salted: bytes = b"-") -> tuple[int, str] | None:
    if not name:
        return UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISMS:
        return UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {mechanism}"
    if iterations is not None and not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        return UNACCEPTABLE_CREDENTIAL, (
            f"{'Too few' if iterations < MIN_ITERATIONS else 'Too many'} iterations "
            f"({iterations}): {MECHANISMS[mechanism][0]} takes {MIN_ITERATIONS} to "
            f"{MAX_ITERATIONS}")
    if not salt or not salted:
        return UNACCEPTABLE_CREDENTIAL, "salt and salted password must not be empty"
    return None


def alter_plan(credentials: dict, deletions, upsertions, levels: dict | None = None):
    """(records, results rows (user, error, message), events) for AlterUserScramCredentials
    over ``credentials`` ((user, mechanism) -> (salt, stored, server, iterations)).
    ``deletions``: rows (user, mechanism); ``upsertions``: rows (user, mechanism,
    iterations, salt, salted password). ``levels``: the finalized feature levels; below
    ``metadata.version`` 3.5-IV2 every user is UNSUPPORTED_VERSION, as in Kafka."""
    named: dict[str, int] = {}
    for row in (*deletions, *upsertions):
        named[row[0]] = named.get(row[0], 0) + 1
    if (levels or {}).get("metadata.version", SCRAM_LEVEL) < SCRAM_LEVEL:
        return [], [(u, m.UNSUPPORTED_VERSION, "The current metadata version does not "
                                               "support SCRAM") for u in named], []
    errors: dict[str, tuple[int, str | None]] = {
        u: (DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same "
                                "request") for u, n in named.items() if n > 1}
    records: list = []
    for name, mechanism in deletions:
        if name in errors:
            continue
        why = _why_not(name, mechanism) or (
            None if (name, mechanism) in credentials else
            (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"))
        if why:
            errors[name] = why
        else:
            records.append(mr.RemoveUserScramCredentialRecord(name, mechanism))
    for name, mechanism, iterations, salt, salted in upsertions:
        if name in errors:
            continue
        why = _why_not(name, mechanism, iterations, salt, salted)
        if why:
            errors[name] = why
            continue
        stored, server = keys(mechanism, salted)
        records.append(mr.UserScramCredentialRecord(name, mechanism, salt, stored, server,
                                                    iterations))
    results = [(u, *errors.get(u, (m.NONE, None))) for u in named]
    events = [f"SCRAM credentials altered for {', '.join(sorted({r.name for r in records}))}"]
    return records, results, events if records else []


def describe(credentials: dict, users) -> list[tuple[str, int, str | None, list]]:
    """DescribeUserScramCredentials: rows (user, error, message, [(mechanism, iterations)]);
    ``users`` None or empty: every user with a credential."""
    by_user: dict[str, list] = {}
    for (name, mechanism), (_, _, _, iterations) in sorted(credentials.items()):
        by_user.setdefault(name, []).append((mechanism, iterations))
    if not users:
        return [(u, m.NONE, None, infos) for u, infos in sorted(by_user.items())]
    out = []
    for u in dict.fromkeys(users):
        if users.count(u) > 1:
            out.append((u, DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the "
                                               "same user twice in a single request", []))
        elif u not in by_user:
            out.append((u, RESOURCE_NOT_FOUND, "Attempt to describe a user credential that "
                                               "does not exist", []))
        else:
            out.append((u, m.NONE, None, by_user[u]))
    return out
