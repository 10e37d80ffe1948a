"""The broker's lifecycle core: registration and heartbeats go to the active controller, and a
broker that knows of none waits retry.backoff.ms between looks instead of waking at once."""
import random

from node_image import messages as m
from node_image.broker.lifecycle import RECOVERY, BrokerLifecycleManager
from node_image.node import Node
from node_image.outbox import Outbox
from simulator.cluster import Simulation


def manager(outbox):
    ids = iter(range(1, 1000))
    return BrokerLifecycleManager(4, (), None, heartbeat_interval_ms=2000, request_timeout_ms=2000,
                                  retry_backoff_ms=100, rng=random.Random(1), outbox=outbox,
                                  next_correlation=lambda: next(ids), on_event=lambda e: None)


def test_without_a_controller_the_broker_looks_again_after_the_backoff():
    outbox = Outbox()
    lm = manager(outbox)
    lm.poll(0, None, 0)
    assert outbox.take() == [] and lm.next_deadline_ms() == 100
    lm.poll(60, 1, 0)  # a controller appeared: asked at the next look, not before
    assert outbox.take() == []
    lm.poll(100, 1, 0)
    [(dest, req)] = outbox.take()
    assert dest == 1 and isinstance(req, m.BrokerRegistrationRequest)
    assert lm.next_deadline_ms() == 100 + 2000  # the answer's deadline
    lm.handle_registration_response(m.BrokerRegistrationResponse(req.correlation_id, m.NONE, 7), 150)
    assert lm.state == RECOVERY and lm.broker_epoch == 7 and lm.next_deadline_ms() == 150


def test_observers_without_a_leader_do_not_spin():
    """In a simulated cluster whose observers (brokers) spend time with no quorum leader known,
    an observer wakes about as often as a voter does, not every millisecond."""
    sim = Simulation(1, 5, 120)
    polls = {n: 0 for n in sim.nodes}
    orig = Node.poll

    def counting(self, now_ms):
        polls[self.raft.node_id] += 1
        return orig(self, now_ms)
    Node.poll = counting
    try:
        r = sim.run()
    finally:
        Node.poll = orig
    assert sim.options.observers == 2 and r.ok, r.invariant
    seconds = r.sim_ms / 1000
    rates = {n: round(c / seconds) for n, c in polls.items()}
    print(f"wake-ups per simulated second: {rates}")
    assert max(rates.values()) < 100, rates
