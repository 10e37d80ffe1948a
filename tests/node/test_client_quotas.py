"""Client quotas (KIP-546): the controller's rules and the image's description (Kafka's
ClientQuotaControlManager and ClientQuotasImage), and AlterClientQuotas and
DescribeClientQuotas on the wire at both versions on three real node processes, as
kafka-python's protocol classes encode them, read back from every broker and after a
restart and a snapshot; and byte-rate quotas enforced: a throttle named in the answer and
the connection muted that long, a librdkafka producer and consumer slowed and told, nothing
lost."""
import socket
import time

import pytest
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafka.protocol.metadata import ApiVersionsRequest

from conftest import local_brokers, wait_for
from node_clients import admin, create, wire
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
    # two samples of a second: a client's bytes are measured over one second from the start
    # (Kafka's eleven measure them over ten), so a throttle needs little data
    with local_brokers(tmp_path_factory.mktemp("quotas"),
                       extra_config={"min.insync.replicas": "1", "quota.window.num": "2"}) as c:
        yield c


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


def _quota_everywhere(cluster, client_id, key, value, user=None):
    """The quota of ``client_id`` (of ``user`` too, if named), seen by every broker."""
    entity = (("client-id", client_id),) + ((("user", user),) if user else ())
    resp = _alter(cluster, cluster.host(cluster.ids[0]), 1, [
        (entity, ((key, float(value), False),))])
    assert resp.entries[0].error_code == m.NONE
    want = [(entity, [(key, float(value))])]
    wait_for(f"{client_id}'s quota on every broker", lambda: all(
        _seen(_describe(cluster, cluster.host(i), 1, [("client-id", cq.EXACT, client_id)]))
        == want for i in cluster.ids) or None, timeout_s=30)


def _produce_frame(topic, version, client_id, size):
    from kafka.protocol.producer import ProduceRequest

    from node_image import records
    D = ProduceRequest.TopicProduceData
    batch = records.build_batch(0, 0, [(None, b"x" * size)], 1000)
    return kc.encode_request(kc.PRODUCE, version, ProduceRequest[version](
        transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[D(
            name=topic, partition_data=[D.PartitionProduceData(index=0, records=batch)])]),
        client_id=client_id)


@pytest.mark.parametrize("version", [5, 8])
def test_a_producer_over_its_quota_is_told_its_throttle_and_its_connection_muted(cluster,
                                                                                 version):
    """20,000 bytes/s; one Produce of about 60,000 bytes, the client's first, is measured over
    one second (two samples): (60,000 - 20,000) / 20,000 * 1 s, to the millisecond. From v6
    (KIP-219) the answer comes at once and the next request waits; before, the answer waits."""
    client, topic = f"wire-producer-v{version}", f"throttled-wire-v{version}"
    _quota_everywhere(cluster, client, "producer_byte_rate", 20_000)
    create(cluster, topic, {})
    leader = admin(cluster).list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    frame = _produce_frame(topic, version, client, 60_000)
    want = round((len(frame) - 4 - 20_000) / 20_000 * 1000)
    with socket.create_connection((cluster.host(leader), cluster.kafka_port), timeout=30) as s:
        sent = time.monotonic()
        s.sendall(frame)
        answer = kc.decode_response(kc.PRODUCE, version, kc.recv_frame(s))
        answered = time.monotonic()
        assert answer.responses[0].partition_responses[0].error_code == m.NONE
        assert answer.throttle_time_ms == want
        s.sendall(kc.encode_request(kc.API_VERSIONS, 0, ApiVersionsRequest[0](),
                                    client_id=client))
        kc.recv_frame(s)
        again = time.monotonic()
    if version >= 6:
        assert again - sent >= 0.9 * want / 1000, "the next request was read only after it"
    else:
        assert answered - sent >= 0.9 * want / 1000, "the answer itself was held"
    # another client id has no quota: not throttled
    frame = _produce_frame(topic, version, "free-producer", 60_000)
    with socket.create_connection((cluster.host(leader), cluster.kafka_port), timeout=30) as s:
        s.sendall(frame)
        assert kc.decode_response(kc.PRODUCE, version, kc.recv_frame(s)).throttle_time_ms == 0


def test_a_librdkafka_producer_and_consumer_over_their_quotas_are_slowed_and_lose_nothing(
        cluster):
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic = "throttled-clients"
    _quota_everywhere(cluster, "slow-writer", "producer_byte_rate", 25_000)
    _quota_everywhere(cluster, "slow-reader", "consumer_byte_rate", 25_000)
    create(cluster, topic, {})
    events = {"writer": [], "reader": []}
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "client.id": "slow-writer",
                         "acks": "all", "throttle_cb": events["writer"].append,
                         # batches well under what a Fetch may carry under the reader's quota
                         # (a batch larger than that is throttled again each time, in Kafka too)
                         "batch.size": 8000,
                         "error_cb": lambda e: None})
    failed = []
    values = [f"{i:05d}".encode() * 400 for i in range(50)]  # 2,000 bytes each
    for v in values:
        producer.produce(topic, v, partition=0,
                         on_delivery=lambda err, msg: err and failed.append(err))
    assert producer.flush(60) == 0 and failed == []
    assert max(e.throttle_time for e in events["writer"]) > 0, "the producer was told"
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "client.id": "slow-reader",
                         "group.id": "slow-readers", "enable.auto.commit": False,
                         "throttle_cb": events["reader"].append, "error_cb": lambda e: None})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
    finally:
        consumer.close()
    assert got == values, "every record read once, in order"
    assert max(e.throttle_time for e in events["reader"]) > 0, "the consumer was told"


def test_topic_mutations_over_a_controller_mutation_quota_are_refused_or_throttled(cluster):
    """KIP-599 at 5 partitions a second (a bucket of 10 with two one-second windows): a
    CreateTopics of a (8), b (100) and c leaves the bucket at -98: c refused, 19.6 s of
    throttle. While it is below zero the versions that know THROTTLING_QUOTA_EXCEEDED are
    refused with it and older ones go through, throttled; other clients are not counted."""
    from kafka.protocol.admin import (CreatePartitionsRequest, CreateTopicsRequest,
                                      DeleteTopicsRequest)
    client = "fast-creator"
    # for (ANONYMOUS, this client id), the most specific entity: the default user's quota of
    # 10 a second that test_quotas_outlive_a_restart sets comes before a client id's alone,
    # in Kafka's order of precedence
    _quota_everywhere(cluster, client, "controller_mutation_rate", 5, user="ANONYMOUS")
    T = CreateTopicsRequest.CreatableTopic

    def create(version, names, who=client):
        return wire(cluster, cluster.host(1), kc.CREATE_TOPICS, version,
                    CreateTopicsRequest[version](timeout_ms=30_000, validate_only=False, topics=[
                        T(name=n, num_partitions=p, replication_factor=1, assignments=[],
                          configs=[]) for n, p in names]), client_id=who)
    made = create(7, [("mut-a", 8), ("mut-b", 100), ("mut-c", 1)])
    assert [(t.name, t.error_code) for t in made.topics] == [
        ("mut-a", 0), ("mut-b", 0), ("mut-c", 89)], "THROTTLING_QUOTA_EXCEEDED"
    assert made.topics[2].error_message == "The throttling quota has been exceeded."
    assert made.throttle_time_ms == 19_600
    P = CreatePartitionsRequest.CreatePartitionsTopic

    def grow(version):
        return wire(cluster, cluster.host(2), kc.CREATE_PARTITIONS, version,
                    CreatePartitionsRequest[version](
                        topics=[P(name="mut-a", count=9 + (version < 3), assignments=None)],
                        timeout_ms=30_000, validate_only=False), client_id=client)
    strict, permissive = grow(3), grow(2)
    assert strict.results[0].error_code == 89 and strict.throttle_time_ms > 0
    assert permissive.results[0].error_code == 0 and permissive.throttle_time_ms > 0

    def delete(version, names):
        return wire(cluster, cluster.host(3), kc.DELETE_TOPICS, version, DeleteTopicsRequest[
            version](topic_names=names, timeout_ms=30_000), client_id=client)
    assert delete(5, ["mut-a"]).responses[0].error_code == 89
    gone = delete(4, ["mut-a", "mut-b"])
    assert [r.error_code for r in gone.responses] == [0, 0] and gone.throttle_time_ms > 0
    free = create(7, [("mut-c", 1)], who="slow-creator")
    assert free.topics[0].error_code == 0 and free.throttle_time_ms == 0
