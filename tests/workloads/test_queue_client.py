"""The queue workload's transactional client against a scripted producer: it ends a
transaction as librdkafka documents (a retriable error: the same call again; an abortable one:
abort; only a fatal one: a new producer), so one producer per process lives through faults
that Kafka's own clients live through, and the history says what is known."""
import pytest
from confluent_kafka import KafkaError, KafkaException

from workloads import queue_client
from workloads.queue_client import ConfluentQueueClient

TIMED_OUT = KafkaError(KafkaError._TIMED_OUT, "commit timed out", retriable=True)
ABORTABLE = KafkaError(KafkaError.INVALID_PRODUCER_EPOCH, "bumped", txn_requires_abort=True)
FENCED = KafkaError(KafkaError._FENCED, "fenced", fatal=True)


class Msg:
    def __init__(self, offset):
        self._offset = offset

    def offset(self):
        return self._offset


class ScriptedProducer:
    """A transactional producer whose commit_transaction and abort_transaction raise the
    errors scripted for them, in turn, then succeed; every call is kept in ``calls``."""

    made = 0

    def __init__(self, conf=None, commits=(), aborts=()):
        ScriptedProducer.made += 1
        self.commits, self.aborts = list(commits), list(aborts)
        self.calls, self.offset, self.pending = [], 0, []

    def _scripted(self, name, script):
        self.calls.append(name)
        if script:
            raise KafkaException(script.pop(0))

    def init_transactions(self, timeout):
        self.calls.append("init")

    def begin_transaction(self):
        self.calls.append("begin")

    def produce(self, topic, value, partition, on_delivery):
        self.pending.append(on_delivery)

    def flush(self, timeout=None):
        return 0

    def poll(self, timeout=None):
        for cb in self.pending:
            cb(None, Msg(self.offset))
            self.offset += 1
        self.pending = []

    def commit_transaction(self, timeout):
        self._scripted("commit", self.commits)

    def abort_transaction(self, timeout):
        self._scripted("abort", self.aborts)

    def purge(self):
        pass

    def close(self):
        pass


@pytest.fixture
def client(monkeypatch):
    monkeypatch.setattr("confluent_kafka.Producer", lambda conf: ScriptedProducer(conf))
    monkeypatch.setattr(queue_client.time, "sleep", lambda s: None)
    c = ConfluentQueueClient("127.0.0.1:1", "queue", 2, 0.5, True, 3, transactions=True)
    ScriptedProducer.made = 0
    return c


def script(client, **kw):
    client.producer = ScriptedProducer(**kw)
    ScriptedProducer.made = 0
    return client.producer


def test_a_retriable_commit_error_is_answered_by_committing_again(client):
    p = script(client, commits=[TIMED_OUT, TIMED_OUT])
    results = client.txn([("send", "k0", 1), ("send", "k1", 2)])
    assert [r.type for r in results] == ["ok", "ok"], results
    assert p.calls == ["init", "begin", "commit", "commit", "commit"]
    assert ScriptedProducer.made == 0 and client.producer is p


def test_a_commit_still_unknown_is_info_and_ended_before_the_next_transaction(client, monkeypatch):
    p = script(client, commits=[TIMED_OUT] * 1000)
    clock = iter(range(0, 10_000))
    monkeypatch.setattr(queue_client.time, "monotonic", lambda: next(clock) / 10)
    results = client.txn([("send", "k0", 1)])
    assert [r.type for r in results] == ["info"] and "_TIMED_OUT" in results[0].error
    assert client.producer is p and ScriptedProducer.made == 0, "no new producer"
    p.commits = []  # the coordinator answers again: the same call ends the last transaction
    results = client.txn([("send", "k0", 2)])
    assert [r.type for r in results] == ["ok"], results
    assert p.calls.count("begin") == 2 and p.calls[-3:] == ["commit", "begin", "commit"], p.calls


def test_an_abortable_commit_error_aborts_and_the_sends_fail(client):
    p = script(client, commits=[ABORTABLE])
    results = client.txn([("send", "k0", 1)])
    assert [r.type for r in results] == ["fail"], results
    assert p.calls[-2:] == ["commit", "abort"] and ScriptedProducer.made == 0


def test_only_a_fatal_error_takes_a_new_producer_and_is_named_fatal(client, monkeypatch):
    p = script(client, commits=[FENCED])
    monkeypatch.setattr("confluent_kafka.Producer", lambda conf: ScriptedProducer(conf))
    results = client.txn([("send", "k0", 1)])
    assert [r.type for r in results] == ["info"], results
    assert results[0].error.startswith(queue_client.FATAL_PREFIX), results[0].error
    assert client.producer is not p and ScriptedProducer.made == 1
