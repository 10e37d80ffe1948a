"""Questions the harness asks the nodes themselves (DescribeQuorum and a register read on
the node's admin port, Metadata on its Kafka port): who leads, which nodes answer, which
brokers are registered and unfenced, how far each node's clock is off."""
from __future__ import annotations

import asyncio
import socket
import struct
import time
from dataclasses import dataclass

from node_image import messages as m

from .register_client import Indeterminate, RegisterClient

PORT = 9093
KAFKA_PORT = 9092


async def _ask_all(nodes, ask, within_s: float) -> dict:
    """``ask(node)`` of every node, asking those that did not answer (``None``) again until
    ``within_s`` has passed: on a loaded 2-core machine a node has left a 1 s and a 3 s query
    unanswered while it served."""
    seen: dict = {}
    deadline = time.monotonic() + within_s
    while True:
        asked = [n for n in nodes if n.node_id not in seen]
        seen.update((n.node_id, a) for n, a in zip(asked, await asyncio.gather(*map(ask, asked)))
                    if a is not None)
        if len(seen) == len(nodes) or time.monotonic() >= deadline:
            return seen
        await asyncio.sleep(0.2)


async def describe_all(nodes, timeout_s: float = 1.0, within_s: float = 0.0) -> dict:
    """Each answering node's DescribeQuorum, by node id."""
    async def one(n):
        c = RegisterClient(n.address, PORT, timeout_s)
        try:
            return await c.describe()
        except (Indeterminate, ConnectionRefusedError, OSError):
            return None
        finally:
            await c.close()
    return await _ask_all(nodes, one, within_s)


async def clock_offsets(nodes, timeout_s: float = 3.0, within_s: float = 0.0) -> dict[int, float]:
    """Each answering node's wall clock minus ours, in seconds (from its DescribeQuorum); the
    error is at most half the round trip, however long the node took to answer (on a loaded
    machine 1 s was too short for a node to answer at all). With ``within_s``, the nodes that
    did not answer are asked again until that much time has passed."""
    async def one(n):
        c = RegisterClient(n.address, PORT, timeout_s)
        try:
            before = time.time()
            d = await c.describe()
            after = time.time()
            return round(d.wall_clock_ms / 1000 - (before + after) / 2, 3)
        except (Indeterminate, ConnectionRefusedError, OSError):
            return None
        finally:
            await c.close()
    return await _ask_all(nodes, one, within_s)


async def active_controller(nodes) -> int | None:
    described = await describe_all(nodes)
    leaders = [(d.epoch, i) for i, d in described.items() if d.role == "Leader"]
    if leaders:
        return max(leaders)[1]
    hints = [(d.epoch, d.leader_id) for d in described.values() if d.leader_id >= 0]
    return max(hints)[1] if hints else None


async def serves(addr: str, port: int = PORT) -> bool:
    """Does the node at ``addr`` answer a register read?"""
    c = RegisterClient(addr, port, 2.0)
    try:
        return (await c.read("__probe__")).outcome == "ok"
    except (Indeterminate, ConnectionRefusedError, OSError):
        return False
    finally:
        await c.close()


# How long a new cluster may take to elect a controller and serve: on a quiet machine a few
# seconds, with a CI runner's cores busy over 60 s (five node processes start at once).
BRING_UP_S = 180.0


async def wait_for_service(nodes, timeout_s: float, log, stopped=None,
                           stopped_every_s: float = 2.0) -> int:
    """Wait until some node accepts a register read; returns the active controller. On a
    timeout the error says what the nodes last answered. ``stopped()`` (blocking, asked every
    ``stopped_every_s``): the nodes whose process ended on an error of its own, such as a
    setting it refuses; any, and the wait ends at once with :class:`NotServing` naming them."""
    start = time.monotonic()
    deadline = start + timeout_s
    leader = None
    asked = start
    while time.monotonic() < deadline:
        leader = await active_controller(nodes)
        if leader is not None and await serves(next(n.address for n in nodes
                                                    if n.node_id == leader)):
            return leader
        if stopped is not None and time.monotonic() - asked >= stopped_every_s:
            asked = time.monotonic()
            if refused := await asyncio.to_thread(stopped):
                raise NotServing(asked - start, {}, refused)
        await asyncio.sleep(0.2)
    described = await describe_all(nodes)
    seen = ", ".join(f"n{i} {d.role} in epoch {d.epoch}" for i, d in sorted(described.items()))
    raise TimeoutError(f"the cluster did not serve register reads within {timeout_s:.0f} s "
                       f"(quorum: {seen or 'no node answered'}; controller "
                       f"{'none' if leader is None else f'n{leader}, not serving'})")


async def wait_for_every_node(nodes, timeout_s: float, port: int = PORT) -> None:
    """Wait until every node answers a register read (a broker by forwarding it), so that the
    workload starts on a cluster whose nodes all serve: refusals at the start would be set-up,
    not the faults under test."""
    deadline = time.monotonic() + timeout_s

    async def one(node) -> bool:
        while time.monotonic() < deadline:
            if await serves(node.address, port):
                return True
            await asyncio.sleep(0.2)
        return False
    served = await asyncio.gather(*(one(n) for n in nodes))
    missing = [n.node_id for n, ok in zip(nodes, served) if not ok]
    if missing:
        raise TimeoutError(f"nodes {missing} did not serve register reads within {timeout_s:.0f} s")


def metadata(address: str, topics: list[str] | None, timeout_s: float, port: int = KAFKA_PORT):
    """A Metadata v8 response from the broker at ``address`` itself, on a connection of its own
    (a client library would ask whichever broker it likes). ``topics=[]`` asks for none: the
    broker list alone."""
    from kafka.protocol.metadata import MetadataRequest

    from node_image import kafka_codec as kc
    req = MetadataRequest[8](
        topics=None if topics is None else
        [MetadataRequest[8].MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False)
    return _one_request(address, port, kc.METADATA, 8, req, timeout_s)


def _one_request(address: str, port: int, api_key: int, version: int, req, timeout_s: float):
    """One Kafka request to the broker at ``address`` itself, on a connection of its own:
    its response body."""
    from node_image import kafka_codec as kc
    with socket.create_connection((address, port), timeout=timeout_s) as s:
        s.settimeout(timeout_s)
        s.sendall(kc.encode_request(api_key, version, req))
        return kc.decode_response(api_key, version, kc.recv_frame(s))


def feature_levels(address: str, timeout_s: float,
                   port: int = KAFKA_PORT) -> tuple[int, dict[str, int], int]:
    """The finalized feature levels (KIP-584) the broker at ``address`` itself reports in
    its ApiVersions v3 answer, with their epoch (the metadata offset they were finalized at;
    -1 when it reports none) and the newest metadata.version it supports: (epoch, feature ->
    level, newest)."""
    from node_image import kafka_codec as kc
    from kafka.protocol.metadata import ApiVersionsRequest
    req = ApiVersionsRequest[3](client_software_name="chaoskraft",
                                client_software_version="1")
    resp = _one_request(address, port, kc.API_VERSIONS, 3, req, timeout_s)
    if resp.error_code != 0:
        raise ValueError(f"ApiVersions error {resp.error_code}")
    newest = {f.name: f.max_version for f in resp.supported_features or ()}
    return (resp.finalized_features_epoch,
            {f.name: f.max_version_level for f in resp.finalized_features or ()},
            newest.get("metadata.version", 0))


@dataclass(frozen=True)
class NodeState:
    """What one node says of itself (DescribeQuorum) and, a broker, of the cluster (Metadata)."""
    node_id: int
    answers: bool  # DescribeQuorum answered
    raft_role: str | None = None
    epoch: int | None = None
    leader_id: int | None = None
    broker_state: str | None = None  # Kafka's BrokerState; None for a controller only
    brokers: tuple[int, ...] | None = None  # the brokers its Metadata lists; None: no answer

    @property
    def registered(self) -> bool | None:
        return None if not self.broker_state else self.broker_state != "STARTING"

    @property
    def fenced(self) -> bool | None:
        return None if not self.broker_state else self.broker_state != "RUNNING"


async def node_states(nodes, timeout_s: float = 3.0, within_s: float = 0.0) -> dict[int, NodeState]:
    """Every node's :class:`NodeState`, asked of all of them at once (DescribeQuorum again of
    those that did not answer, until ``within_s``)."""
    described = await describe_all(nodes, timeout_s, within_s)

    def listed(n):
        try:
            return tuple(sorted(b.node_id for b in metadata(n.address, [], timeout_s).brokers))
        except (OSError, ValueError, struct.error):
            return None
    brokers = [n for n in nodes if "broker" in n.roles]
    lists = dict(zip((n.node_id for n in brokers),
                     await asyncio.gather(*(asyncio.to_thread(listed, n) for n in brokers))))
    out = {}
    for n in nodes:
        d = described.get(n.node_id)
        out[n.node_id] = NodeState(
            n.node_id, d is not None, d.role if d else None, d.epoch if d else None,
            d.leader_id if d else None, (d.broker_state or None) if d else None,
            lists.get(n.node_id))
    return out


def not_serving(nodes, states: dict[int, NodeState]) -> dict[int, str]:
    """Why each node that does not serve yet does not, by node id; empty once the quorum has
    a leader and every broker is registered, unfenced and lists every broker in Metadata."""
    want = tuple(sorted(n.node_id for n in nodes if "broker" in n.roles))
    leaders = {s.leader_id for s in states.values() if s.answers and s.leader_id is not None
               and s.leader_id >= 0}
    why = {}
    for n in nodes:
        s = states[n.node_id]
        if not s.answers:
            why[n.node_id] = "does not answer"
        elif s.leader_id is None or s.leader_id < 0:
            why[n.node_id] = f"knows no quorum leader ({s.raft_role}, epoch {s.epoch})"
        elif "broker" in n.roles and s.broker_state != "RUNNING":
            why[n.node_id] = {"STARTING": "broker not registered yet",
                              "RECOVERY": "broker registered but fenced"}.get(
                s.broker_state, f"broker is {s.broker_state}")
        elif "broker" in n.roles and s.brokers != want:
            missing = sorted(set(want) - set(s.brokers or ()))
            why[n.node_id] = ("does not answer Metadata" if s.brokers is None else
                              f"its Metadata lists brokers {list(s.brokers)}"
                              + (f", not {', '.join(f'n{b}' for b in missing)}" if missing else ""))
    if not leaders and not why:
        why = {n.node_id: "knows no quorum leader" for n in nodes}
    return why


def said(why: dict[int, str]) -> str:
    """``why`` in a line, nodes with the same reason together: "n3: does not answer; n1, n2,
    n4, n5: its Metadata lists brokers [1, 2, 4, 5], not n3"."""
    by: dict[str, list[int]] = {}
    for i, w in sorted(why.items()):
        by.setdefault(w, []).append(i)
    return "; ".join(f"{', '.join(f'n{i}' for i in ids)}: {w}"
                     for w, ids in sorted(by.items(), key=lambda kv: kv[1]))


class NotServing(TimeoutError):
    """The cluster did not serve in time; ``why``: the reason of each node that did not."""

    def __init__(self, timeout_s: float, why: dict[int, str],
                 stopped: dict[int, str] | None = None) -> None:
        """``stopped``: the nodes whose process ended on an error of its own (what it
        said), which waiting longer would not bring up; given, the wait ended early."""
        self.why = {**why, **(stopped or {})}
        self.stopped = stopped or {}
        super().__init__(f"{said(self.stopped)} (after {timeout_s:.0f} s)" if stopped else
                         f"not serving after {timeout_s:.0f} s: {said(why)}")

    @property
    def culprits(self) -> list[int]:
        """The nodes that stopped, else those down or unregistered (the others wait for
        them); all of them when there is none such."""
        if self.stopped:
            return sorted(self.stopped)
        own = [i for i, w in sorted(self.why.items())
               if w == "does not answer" or "not registered" in w]
        return own or sorted(self.why)


async def wait_until_serving(nodes, timeout_s: float, log=print, every_s: float = 5.0,
                             stopped=None, stopped_every_s: float = 2.0) -> dict[int, NodeState]:
    """Wait until the cluster serves as a whole (:func:`not_serving` is empty), saying every
    ``every_s`` what it still waits for; :class:`NotServing` naming each node that does not
    and why, after ``timeout_s``. ``stopped()`` (blocking, asked every ``stopped_every_s``
    of a wait): the nodes whose process ended on an error of its own, such as a setting it
    refuses, and what; any, and the wait ends at once naming them."""
    start = time.monotonic()
    last_said = last_asked = start
    while True:
        states = await node_states(nodes)
        why = not_serving(nodes, states)
        if not why:
            return states
        now = time.monotonic()
        if stopped is not None and now - last_asked >= stopped_every_s:
            last_asked = now
            gone = await asyncio.to_thread(stopped)
            if gone:
                raise NotServing(now - start, why, gone)
        if now - start > timeout_s:
            raise NotServing(timeout_s, why)
        if now - last_said >= every_s:
            last_said = now
            log(f"[{now - start:5.1f}s] waiting: {said(why)}")
        await asyncio.sleep(0.3)


async def quorum_state(nodes, timeout_s: float = 3.0):
    """The quorum leader's view, as DescribeQuorum's (a QuorumStateResponse: epoch, voters
    and observers with their directory ids), asked of the active controller; None when no
    leader answers."""
    leader = await active_controller(nodes)
    node = next((n for n in nodes if n.node_id == leader), None)
    if node is None:
        return None
    c = RegisterClient(node.address, PORT, timeout_s)
    try:
        resp = await c.request(m.QuorumStateRequest(next(RegisterClient._ids)))
    except (Indeterminate, ConnectionRefusedError, OSError):
        return None
    finally:
        await c.close()
    return resp if resp.error == m.NONE else None


async def change_voter(nodes, leader: int, kind: str, node_id: int, directory_id: str,
                       timeout_s: float = 10.0) -> tuple[int, str | None]:
    """RemoveRaftVoter or AddRaftVoter (``kind`` "remove" / "add", KIP-853) of ``node_id``
    with ``directory_id``, sent to the quorum leader ``leader`` on its internal listener;
    (error code, message) of its answer, REQUEST_TIMED_OUT when none came (the change may
    or may not have been made)."""
    target = next(n for n in nodes if n.node_id == leader)
    corr = next(RegisterClient._ids)
    if kind == "add":
        msg = m.AddRaftVoterRequest(corr, "", node_id, directory_id, _host_of(nodes, node_id),
                                    PORT)
    else:
        msg = m.RemoveRaftVoterRequest(corr, "", node_id, directory_id)
    c = RegisterClient(target.address, PORT, timeout_s)
    try:
        resp = await c.request(msg)
    except Indeterminate as exc:
        return m.REQUEST_TIMED_OUT, f"no answer: {exc}"
    except (ConnectionRefusedError, OSError) as exc:
        return m.NOT_LEADER_OR_FOLLOWER, f"leader {leader} unreachable: {exc}"
    finally:
        await c.close()
    return resp.error, resp.message


def _host_of(nodes, node_id: int) -> str:
    """The host of a node's own CONTROLLER endpoint, as its controller.quorum.voters entry
    names it (a voter recorded elsewhere would ask for its own with UpdateRaftVoter)."""
    n = next(n for n in nodes if n.node_id == node_id)
    return getattr(n, "voter_host", "") or n.address
