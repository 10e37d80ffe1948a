"""Client quotas (KIP-546), kept as Kafka's ClientQuotaControlManager keeps them: the
controller turns AlterClientQuotas into QuotaRecords, so every broker's image holds each
entity's quotas (and a snapshot too); DescribeClientQuotas is answered from that image as
Kafka's ClientQuotasImage answers it. The quotas are stored and described; no broker
throttles a client by them (docs/broker.md).

An entity is a set of (type, name) pairs, kept sorted: ``user``, ``client-id`` or both, or
``ip`` alone; a name of None is the type's default entity. Rules (Kafka's):
- alteration: an empty entity, a type named twice, an unknown type, an empty name, ``ip``
  beside another type, an ``ip`` that is no IP address, a key the entity cannot have
  (``producer_byte_rate`` and ``consumer_byte_rate``, whole numbers, and
  ``request_percentage`` and ``controller_mutation_rate`` for users and client ids;
  ``connection_creation_rate``, a whole number, for ips), a whole-number key given a
  fraction, or a key named twice are INVALID_REQUEST for that entity, which is then left
  as it was; an entity named twice in one request is refused too. A removal of a key the
  entity lacks changes nothing; a value equal to the current one writes no record.
- description: components (type, match type, match) filter the entities: EXACT (0) a name,
  DEFAULT (1) the default entity, SPECIFIED (2) any entity of that type; ``strict`` leaves
  out entities with types the filter does not name; no component and not strict: every
  entity. A type named twice, an empty type, EXACT without a name, DEFAULT or SPECIFIED
  with one, an unknown match type, or ``ip`` beside ``user`` or ``client-id`` is
  INVALID_REQUEST; an unknown type UNSUPPORTED_VERSION.
"""
from __future__ import annotations

import ipaddress
from collections import Counter

from . import messages as m
from . import metadata_records as mr

USER, CLIENT_ID, IP = "user", "client-id", "ip"
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
# key -> whether it takes whole numbers only (Kafka's LONG and INT; else DOUBLE)
USER_KEYS = {"producer_byte_rate": True, "consumer_byte_rate": True,
             "request_percentage": False, "controller_mutation_rate": False}
IP_KEYS = {"connection_creation_rate": True}


def show(entity) -> str:
    """An entity as Kafka's ClientQuotaEntity prints it."""
    return "ClientQuotaEntity(entries={" + ", ".join(
        f"{t}={n}" for t, n in entity) + "})"


def _entity_error(pairs) -> tuple[int, str] | None:
    if not pairs:
        return m.INVALID_REQUEST, "Invalid empty client quota entity"
    seen = set()
    for kind, name in pairs:
        if kind in seen:
            return m.INVALID_REQUEST, ("Invalid empty client quota entity, duplicate entity "
                                       f"entry {kind}")
        seen.add(kind)
        if kind not in (USER, CLIENT_ID, IP):
            return m.INVALID_REQUEST, f"Unhandled client quota entity type: {kind}"
        if name == "":
            return m.INVALID_REQUEST, f"Empty {kind} not supported"
    if IP in seen and len(seen) > 1:
        return m.INVALID_REQUEST, "Invalid empty client quota entity"
    ip = dict(pairs).get(IP)
    if ip is not None:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            return m.INVALID_REQUEST, f"{ip} is not a valid IP or resolvable host."
    return None


def _value_error(keys: dict, key: str, value: float) -> tuple[int, str] | None:
    if key not in keys:
        return m.INVALID_REQUEST, f"Invalid configuration key {key}"
    if keys[key] and abs(round(value) - value) > 1e-6:
        return m.INVALID_REQUEST, f"Configuration {key} must be a Long value"
    return None


def _entity_records(quotas: dict, entity: tuple, pairs, ops):
    """(error or None, the entity's records) for one entity's alteration: none where any
    of it is refused."""
    why = _entity_error(pairs)
    if why:
        return why, []
    keys = IP_KEYS if IP in dict(pairs) else USER_KEYS
    current = quotas.get(entity, {})
    records, asked = [], set()
    for key, value, remove in ops:
        if key in asked:
            return (m.INVALID_REQUEST, f"Duplicate quota key {key} not updating quota for "
                                       f"this entity {show(entity)}"), []
        asked.add(key)
        if remove:
            if key in current:
                records.append(mr.QuotaRecord(entity, key, remove=True))
            continue
        if why := _value_error(keys, key, value):
            return why, []
        if current.get(key) != value:
            records.append(mr.QuotaRecord(entity, key, float(value)))
    return None, records


def alter_plan(quotas: dict, entries):
    """(records, results rows (entity, error, message), events) for AlterClientQuotas over
    ``quotas`` (entity -> {key: value}). ``entries``: rows (entity pairs, ops rows (key,
    value, remove)); results are one row per entity, in the order first named."""
    named = Counter(tuple(sorted(pairs)) for pairs, _ in entries)
    results: dict[tuple, tuple[int, str | None]] = {}
    records: list = []
    for pairs, ops in entries:
        entity = tuple(sorted(pairs))
        if entity in results:
            continue
        if named[entity] > 1:
            results[entity] = (m.INVALID_REQUEST, f"Ignoring duplicate entity {show(entity)}")
            continue
        why, mine = _entity_records(quotas, entity, pairs, ops)
        results[entity] = why or (m.NONE, None)
        records += mine
    events = [f"client quotas altered for {', '.join(sorted({show(r.entity) for r in records}))}"]
    return records, [(e, *r) for e, r in results.items()], events if records else []


def describe(quotas: dict, components, strict: bool):
    """DescribeClientQuotas: (error, message, rows (entity, [(key, value)]) or None).
    ``components``: rows (entity type, match type, match)."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for kind, match_type, match in components:
        if not kind:
            return m.INVALID_REQUEST, "Invalid empty entity type.", None
        if kind in exact or kind in specified:
            return m.INVALID_REQUEST, (f"Entity type {kind} cannot appear more than once in "
                                       "the filter."), None
        if kind not in (USER, CLIENT_ID, IP):
            return m.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}", None
        if match_type == EXACT and match is None:
            return m.INVALID_REQUEST, ("Request specified MATCH_TYPE_EXACT, but set match "
                                       "string to null."), None
        if match_type in (DEFAULT, SPECIFIED) and match is not None:
            name = "MATCH_TYPE_DEFAULT" if match_type == DEFAULT else "MATCH_TYPE_SPECIFIED"
            return m.INVALID_REQUEST, (f"Request specified {name}, but also specified a match "
                                       "string."), None
        if match_type not in (EXACT, DEFAULT, SPECIFIED):
            return m.INVALID_REQUEST, f"Unknown match type {match_type}", None
        if match_type == SPECIFIED:
            specified.add(kind)
        else:
            exact[kind] = match
    named = set(exact) | specified
    if IP in named and named & {USER, CLIENT_ID}:
        return m.INVALID_REQUEST, ("Invalid entity filter component combination. IP filter "
                                   "component should not be used with user or clientId "
                                   "filter component."), None
    rows = []
    for entity, values in sorted(quotas.items(), key=lambda kv: repr(kv[0])):
        types = dict(entity)
        if not named and strict:
            break
        if any(k not in types or types[k] != v for k, v in exact.items()):
            continue
        if any(k not in types for k in specified):
            continue
        if strict and len(types) != len(named):
            continue
        rows.append((entity, sorted(values.items())))
    return m.NONE, None, rows
