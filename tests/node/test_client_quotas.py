"""Client quotas (KIP-546): the controller's rules and the image's description (Kafka's
ClientQuotaControlManager and ClientQuotasImage), and AlterClientQuotas and
DescribeClientQuotas on the wire at both versions on three real node processes, as
kafka-python's protocol classes encode them, read back from every broker and after a
restart and a snapshot."""
import pytest
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

from conftest import wait_for
from node_clients import three_brokers, wire
from node_image import client_quotas as cq
from node_image import kafka_codec as kc
from node_image import messages as m
from node_image import metadata_records as mr
from test_replication import image_with

ALICE = (("user", "alice"),)
ALICE_APP = (("client-id", "app"), ("user", "alice"))
DEFAULT_USER = (("user", None),)


def _set(quotas, *entries):
    records, results, _ = cq.alter_plan(quotas, entries)
    return records, results


def test_alterations_are_checked_as_kafka_checks_them():
    records, results = _set({}, (ALICE, (("producer_byte_rate", 1024.0, False),
                                         ("request_percentage", 12.5, False))),
                            ((("user", "alice"), ("client-id", "app")),
                             (("consumer_byte_rate", 2048.0, False),)))
    assert [r[1:] for r in results] == [(m.NONE, None), (m.NONE, None)]
    assert [r.entity for r in records] == [ALICE, ALICE, ALICE_APP], "pairs kept sorted"
    quotas = image_with(records).quotas
    assert quotas == {ALICE: {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
                      ALICE_APP: {"consumer_byte_rate": 2048.0}}
    # the same value again writes nothing; removing a key the entity lacks neither
    assert _set(quotas, (ALICE, (("producer_byte_rate", 1024.0, False),
                                 ("consumer_byte_rate", 0.0, True))))[0] == []
    refused = [
        ((), "Invalid empty client quota entity"),
        ((("user", "a"), ("user", "b")), "duplicate entity entry user"),
        ((("group", "g"),), "Unhandled client quota entity type: group"),
        ((("user", ""),), "Empty user not supported"),
        ((("ip", "10.0.0.1"), ("user", "a")), "Invalid empty client quota entity"),
        ((("ip", "not-an-ip"),), "not-an-ip is not a valid IP or resolvable host."),
    ]
    for pairs, words in refused:
        records, [(_, error, message)] = _set(quotas, (pairs, (("producer_byte_rate", 1.0,
                                                                False),)))
        assert records == [] and error == m.INVALID_REQUEST and words in message, pairs
    for ops, words in [((("connection_creation_rate", 5.0, False),), "Invalid configuration "
                                                                     "key connection_creation_rate"),
                       ((("producer_byte_rate", 1.5, False),), "must be a Long value"),
                       ((("request_percentage", 1.0, False), ("request_percentage", 2.0, False)),
                        "Duplicate quota key request_percentage")]:
        records, [(_, error, message)] = _set(quotas, (ALICE, ops))
        assert records == [] and error == m.INVALID_REQUEST and words in message, ops
    # one refused entity leaves the other's alteration in place; an entity named twice is
    # refused (neither alteration taken)
    records, results = _set(quotas, ((("ip", "10.0.0.1"),), (("connection_creation_rate", 5.0,
                                                               False),)),
                            (ALICE, (("bogus", 1.0, False),)))
    assert [r[1] for r in results] == [m.NONE, m.INVALID_REQUEST] and len(records) == 1
    records, results = _set(quotas, (DEFAULT_USER, (("producer_byte_rate", 1.0, False),)),
                            (DEFAULT_USER, (("producer_byte_rate", 2.0, False),)))
    assert records == [] and results == [(DEFAULT_USER, m.INVALID_REQUEST, "Ignoring duplicate "
                                          "entity ClientQuotaEntity(entries={user=None})")]
    # removals
    records, _ = _set(quotas, (ALICE, (("producer_byte_rate", 0.0, True),
                                       ("request_percentage", 0.0, True))))
    assert image_with(records, image_with(_set({}, *[(e, tuple((k, v, False) for k, v in
                                                             q.items()))
                                                     for e, q in quotas.items()])[0])
                      ).quotas == {ALICE_APP: {"consumer_byte_rate": 2048.0}}, "gone when empty"


def test_descriptions_filter_as_kafkas_image_does():
    records, _ = _set({}, (ALICE, (("producer_byte_rate", 1.0, False),)),
                      (ALICE_APP, (("producer_byte_rate", 2.0, False),)),
                      (DEFAULT_USER, (("producer_byte_rate", 3.0, False),)),
                      ((("client-id", "app"),), (("producer_byte_rate", 4.0, False),)),
                      ((("ip", "10.0.0.1"),), (("connection_creation_rate", 5.0, False),)))
    quotas = image_with(records).quotas

    def entities(components, strict=False):
        error, message, rows = cq.describe(quotas, components, strict)
        assert error == m.NONE, message
        return sorted(repr(e) for e, _ in rows)
    assert len(entities([])) == 5 and entities([], strict=True) == []
    assert entities([("user", cq.EXACT, "alice")]) == sorted([repr(ALICE), repr(ALICE_APP)])
    assert entities([("user", cq.EXACT, "alice")], strict=True) == [repr(ALICE)]
    assert entities([("user", cq.DEFAULT, None)]) == [repr(DEFAULT_USER)]
    assert len(entities([("user", cq.SPECIFIED, None)])) == 3, "the default user too"
    assert entities([("user", cq.SPECIFIED, None), ("client-id", cq.EXACT, "app")]) == \
        [repr(ALICE_APP)]
    assert entities([("ip", cq.SPECIFIED, None)]) == [repr((("ip", "10.0.0.1"),))]
    _, _, [(_, values)] = cq.describe(quotas, [("user", cq.EXACT, "alice")], True)
    assert values == [("producer_byte_rate", 1.0)]
    for components, error, words in [
            ([("user", cq.EXACT, None)], m.INVALID_REQUEST, "MATCH_TYPE_EXACT"),
            ([("user", cq.DEFAULT, "x")], m.INVALID_REQUEST, "MATCH_TYPE_DEFAULT"),
            ([("user", 7, None)], m.INVALID_REQUEST, "Unknown match type 7"),
            ([("user", cq.SPECIFIED, None), ("user", cq.EXACT, "a")], m.INVALID_REQUEST,
             "cannot appear more than once"),
            ([("ip", cq.SPECIFIED, None), ("user", cq.EXACT, "a")], m.INVALID_REQUEST,
             "IP filter component should not be used"),
            ([("", cq.SPECIFIED, None)], m.INVALID_REQUEST, "Invalid empty entity type"),
            ([("group", cq.SPECIFIED, None)], m.UNSUPPORTED_VERSION, "Unsupported entity type")]:
        got = cq.describe(quotas, components, False)
        assert got[0] == error and words in got[1] and got[2] is None, components


def test_a_snapshot_keeps_the_quotas():
    records, _ = _set({}, (ALICE, (("producer_byte_rate", 1.0, False),)),
                      (DEFAULT_USER, (("request_percentage", 50.0, False),)))
    image = image_with(records)
    again = image_with(image.records())
    assert again.quotas == image.quotas and again.digest() == image.digest()
    assert mr.decode(mr.encode(records[0])) == records[0], "the record's frame round trips"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from three_brokers(tmp_path_factory, "quotas")


def _alter(cluster, host, version, entries, validate_only=False):
    R = AlterClientQuotasRequest
    E = R.EntryData
    body = R(validate_only=validate_only, entries=[E(
        entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[E.OpData(key=k, value=v, remove=rm) for k, v, rm in ops]) for entity, ops in entries])
    return wire(cluster, host, kc.ALTER_CLIENT_QUOTAS, version, body)


def _describe(cluster, host, version, components, strict=False):
    R = DescribeClientQuotasRequest
    body = R(strict=strict, components=[R.ComponentData(entity_type=t, match_type=mt, match=x)
                                        for t, mt, x in components])
    return wire(cluster, host, kc.DESCRIBE_CLIENT_QUOTAS, version, body)


def _seen(resp):
    return sorted((tuple((e.entity_type, e.entity_name) for e in entry.entity),
                   sorted((v.key, v.value) for v in entry.values)) for entry in resp.entries)


@pytest.mark.parametrize("version", [0, 1])
def test_quotas_altered_on_one_broker_are_described_by_every_broker(cluster, version):
    user = f"user-v{version}"
    via = cluster.host(cluster.ids[0])
    resp = _alter(cluster, via, version, [
        (((("user", user),)), (("producer_byte_rate", 1048576.0, False),
                               ("consumer_byte_rate", 2097152.0, False))),
        ((("user", user), ("client-id", "app")), (("request_percentage", 25.0, False),)),
        ((("user", user), ("ip", "10.0.0.1")), (("request_percentage", 1.0, False),))])
    assert [(e.error_code, [(x.entity_type, x.entity_name) for x in e.entity])
            for e in resp.entries] == [
        (m.NONE, [("user", user)]), (m.NONE, [("client-id", "app"), ("user", user)]),
        (m.INVALID_REQUEST, [("ip", "10.0.0.1"), ("user", user)])]
    want = [((("client-id", "app"), ("user", user)), [("request_percentage", 25.0)]),
            ((("user", user),), [("consumer_byte_rate", 2097152.0),
                                 ("producer_byte_rate", 1048576.0)])]

    def everywhere():
        seen = [_seen(_describe(cluster, cluster.host(i), version,
                                [("user", cq.EXACT, user)])) for i in cluster.ids]
        return seen if all(s == want for s in seen) else None
    wait_for("the quotas on every broker", everywhere, timeout_s=30)
    # validate_only checks and keeps nothing; a bad filter names its field
    resp = _alter(cluster, via, version, [(((("user", user),)), (("producer_byte_rate", 0.0,
                                                                  True),))], True)
    assert resp.entries[0].error_code == m.NONE
    assert _seen(_describe(cluster, via, version, [("user", cq.EXACT, user)], True)) == want[1:]
    bad = _describe(cluster, via, version, [("user", cq.EXACT, None)])
    assert bad.error_code == m.INVALID_REQUEST and "MATCH_TYPE_EXACT" in bad.error_message
    assert bad.entries is None


def test_quotas_outlive_a_restart(cluster):
    via = cluster.host(cluster.ids[1])
    resp = _alter(cluster, via, 1, [(DEFAULT_USER, (("controller_mutation_rate", 10.0, False),))])
    assert resp.entries[0].error_code == m.NONE
    cluster.kill(cluster.ids[2])
    cluster.start(cluster.ids[2])
    cluster.wait_serving()
    wait_for("the default user's quota after a restart", lambda: _seen(_describe(
        cluster, cluster.host(cluster.ids[2]), 1, [("user", cq.DEFAULT, None)])) == [
        (DEFAULT_USER, [("controller_mutation_rate", 10.0)])] or None, timeout_s=60)
