"""Requests a broker forwards to the active controller (``node_image.broker.forwarding``):
followed across a controller that refuses them (NOT_CONTROLLER), one that never answers
(killed), and a time without any controller, answered once; and on three node processes, a
topic created through a broker just after the active controller was killed."""
import pytest

from node_image import messages as m
from node_image.broker.forwarding import (RETRY_BACKOFF_MS, ControllerForwarding,
                                          refused_as_not_controller)


class Controllers:
    """The broker's side: which controller it knows, what it sent where, what it answered."""

    def __init__(self, controller):
        self.controller = controller
        self.sent = []  # (node, request)
        self.answers = []  # (response, error)
        self.corr = 0
        self.f = ControllerForwarding(lambda: self.controller,
                                      lambda node, msg: self.sent.append((node, msg)),
                                      self.next_correlation)

    def next_correlation(self):
        self.corr += 1
        return self.corr

    def forward(self, now, timeout_ms=5000):
        self.f.forward(now, timeout_ms, lambda resp, error: self.answers.append((resp, error)),
                       lambda corr: m.CreateTopicsRequest(corr, (("t", 1, 3, (), ()),), False))

    def last_corr(self):
        return self.sent[-1][1].correlation_id


def created(corr, error=m.NONE):
    return m.CreateTopicsResponse(corr, (("t", error, None, None, -1, -1),))


def test_a_refusal_goes_to_the_next_controller_after_a_backoff_and_is_answered_once():
    c = Controllers(1)
    c.forward(now=0)
    assert [n for n, _ in c.sent] == [1]
    first = c.last_corr()
    assert c.f.handle_response(created(first, m.NOT_CONTROLLER), now=10)
    assert c.answers == [] and len(c.sent) == 1, "not answered, not sent again at once"
    c.controller = 2
    c.f.poll(now=10 + RETRY_BACKOFF_MS - 1)
    assert len(c.sent) == 1, "the backoff holds"
    assert c.f.next_deadline_ms() == 10 + RETRY_BACKOFF_MS
    c.f.poll(now=10 + RETRY_BACKOFF_MS)
    assert [n for n, _ in c.sent] == [1, 2]
    ok = created(c.last_corr())
    assert c.f.handle_response(ok, now=200)
    assert c.answers == [(ok, m.NONE)]
    assert not c.f.handle_response(created(first), now=210), "a late answer to the first sending"
    c.f.poll(now=10_000)
    assert c.answers == [(ok, m.NONE)] and c.f.next_deadline_ms() is None


def test_a_request_the_old_controller_never_answers_goes_to_the_new_one():
    c = Controllers(1)
    c.forward(now=0)
    c.f.poll(now=500)
    assert len(c.sent) == 1, "the same controller: it is waited for"
    c.controller = None  # an election
    c.f.poll(now=600)
    assert len(c.sent) == 1 and c.f.next_deadline_ms() == 5000
    c.controller = 3
    c.f.poll(now=700)
    assert [n for n, _ in c.sent] == [1, 3]
    c.f.handle_response(created(c.last_corr()), now=750)
    assert [e for _, e in c.answers] == [m.NONE]


def test_no_controller_until_the_deadline_is_a_timeout_answered_once():
    c = Controllers(None)
    c.forward(now=0, timeout_ms=1000)
    assert c.sent == []
    c.f.poll(now=999)
    assert c.answers == []
    c.f.poll(now=1000)
    assert c.answers == [(None, m.REQUEST_TIMED_OUT)]
    c.f.poll(now=2000)
    assert len(c.answers) == 1 and c.f.next_deadline_ms() is None


def test_a_refusal_at_the_deadline_is_the_clients_answer():
    c = Controllers(1)
    c.forward(now=0, timeout_ms=1000)
    refusal = created(c.last_corr(), m.NOT_CONTROLLER)
    c.f.handle_response(refusal, now=1000)
    assert c.answers == [(refusal, m.NONE)]


@pytest.mark.parametrize("resp, refused", [
    (created(1, m.NOT_CONTROLLER), True),
    (created(1, m.TOPIC_ALREADY_EXISTS), False),
    (m.CreateTopicsResponse(1, (("a", m.NOT_CONTROLLER, None, None, -1, -1),
                                ("b", m.NONE, None, None, 3, 3))), False),
    (m.CreateTopicsResponse(1, (("a", m.NONE, None, None, m.NOT_CONTROLLER, 3),)), False),
    (m.CreateTopicsResponse(1, ()), False),
    (m.DeleteTopicsResponse(1, (("a", "id", m.NOT_CONTROLLER, None),)), True),
    (m.CreateAclsResponse(1, ((m.NOT_CONTROLLER, None),)), True),
    (m.UpdateFeaturesResponse(1, m.NOT_CONTROLLER, None), True),
    (m.RaftVoterResponse(1, m.NOT_CONTROLLER, None), True),
    (m.RaftVoterResponse(1, m.NONE, None), False),
    (m.ListReassignmentsResponse(1, m.NOT_CONTROLLER, ()), True),
])
def test_what_counts_as_a_refusal_by_a_controller_that_does_not_lead(resp, refused):
    assert refused_as_not_controller(resp) is refused


def test_a_topic_created_through_a_broker_just_after_the_controller_was_killed(brokers3):
    """The broker still names the dead controller, or none: the request waits for the
    election and goes to the new controller; the client sees its topic created.
    CreateTopics goes to that broker on a connection of its own: an admin client sends it
    to whichever broker its metadata last named (under load librdkafka had refreshed it
    from the killed node, which names itself, and failed on its connection)."""
    import socket

    from confluent_kafka.admin import AdminClient

    from conftest import wait_for
    from harness import quorum_admin as qa
    from node_image import kafka_codec as kc

    boot = brokers3.bootstrap()
    controller = wait_for("a quorum leader", lambda: qa.describe(boot).leader_id)
    broker = next(i for i in brokers3.ids if i != controller)
    admin = AdminClient({"bootstrap.servers": f"{brokers3.host(broker)}:{brokers3.kafka_port}",
                         "error_cb": lambda e: None})
    assert admin.list_topics(timeout=30).brokers, "the broker answers"
    brokers3.kill(controller)
    topic = kc.CreateTopicsRequest.CreatableTopic(name="after-the-kill", num_partitions=1,
                                                  replication_factor=2, assignments=[],
                                                  configs=[])
    request = kc.CreateTopicsRequest(topics=[topic], timeout_ms=60_000, validate_only=False)
    with socket.create_connection((brokers3.host(broker), brokers3.kafka_port), 90) as sock:
        sock.settimeout(90)
        sock.sendall(kc.encode_request(kc.CREATE_TOPICS, 4, request))
        [result] = kc.decode_response(kc.CREATE_TOPICS, 4, kc.recv_frame(sock)).topics
    # NOT_CONTROLLER or REQUEST_TIMED_OUT if the broker did not follow the election
    assert (result.name, result.error_code) == ("after-the-kill", 0), result
    listed = wait_for("the topic in the broker's metadata", lambda: (lambda t: t.error is None and t)(
        admin.list_topics("after-the-kill", timeout=10).topics["after-the-kill"]))
    assert len(listed.partitions[0].replicas) == 2
