"""The simulated register clients: each reads, writes or cas-es (in the register workload's
mix, ``workloads.register.OPS``) a key drawn from the seed,
sends it to the leader it last heard of (80%) or to any node, and records invoke and
ok / fail / info in the history the linearizability checker reads. A cas expects the
value the client last saw of the key; every written value is unique.

A stored Docker run's twin (``simulator.twin``) runs them scripted instead: each process
does the operations its generator made in the Docker run (with the node each was sent
to), one every 1/rate seconds after the last one ended, with the run's timeout."""
from __future__ import annotations

import random

from node_image import messages as m
from workloads.register import OPS  # the register workload's mix of operations

TIMEOUT_MS = 5_000
LINEARIZABILITY_BUDGET_S = 60.0


class _Client:
    def __init__(self, cid: int) -> None:
        self.cid = cid
        self.pending: dict | None = None
        self.leader_hint: int | None = None
        self.last_value: dict[str, int | None] = {}


class SimClients:
    def __init__(self, sim, rng: random.Random, count: int, keys: int,
                 op_interval_ms: int, stop_at_ms: int,
                 scripts: dict[int, list[dict]] | None = None, start_at_ms: int = 0,
                 timeout_ms: int = TIMEOUT_MS) -> None:
        """``sim``: the simulation (its time, event queue, nodes and network). ``scripts``:
        process -> its operations ({f, key, value, node}), each process stepping every
        ``op_interval_ms`` exactly from ``start_at_ms``."""
        self.sim = sim
        self.rng = rng
        self.keys = keys
        self.op_interval_ms = op_interval_ms
        self.stop_at_ms = stop_at_ms  # no new operation from then on
        self.clients = [_Client(c) for c in range(count)]
        self.history: list[dict] = []
        self._next_value = 1
        self._request_id = 0
        self.scripts = {p: iter(ops) for p, ops in scripts.items()} if scripts is not None \
            else None
        self.start_at_ms = start_at_ms
        self.timeout_ms = timeout_ms

    def start(self) -> None:
        for c in self.clients:
            self.sim.push(self.start_at_ms if self.scripts is not None
                          else 1 + self.rng.randrange(1000), "client", c.cid)

    def step(self, cid: int) -> None:
        sim, r, c = self.sim, self.rng, self.clients[cid]
        if sim.now >= self.stop_at_ms:
            return
        if self.scripts is not None:
            op = next(self.scripts[cid], None)
            if op is not None:
                self._invoke(c, op["f"], op["key"], op["value"], op["node"])
            return
        key = f"k{r.randrange(self.keys)}"
        f = r.choice(OPS)
        value = expected = None
        if f == "write":
            value = self._next_value
            self._next_value += 1
        elif f == "cas":
            expected = c.last_value.get(key)
            if expected is None:
                f, value = "write", self._next_value
            else:
                value = self._next_value
            self._next_value += 1
        nodes = sorted(sim.nodes)
        target = c.leader_hint if (c.leader_hint is not None and r.random() < 0.8) \
            else nodes[r.randrange(len(nodes))]
        self._invoke(c, f, key, [expected, value] if f == "cas" else value, target)

    def _invoke(self, c: _Client, f: str, key: str, hval, target: int) -> None:
        """Send one operation (``hval``: its value as the history holds it, [expected, new]
        for a cas) to node ``target``."""
        sim = self.sim
        self._request_id += 1
        value, expected = (hval[1], hval[0]) if f == "cas" else (hval, None)
        req = m.RegisterRequest(self._request_id, f, key, value, expected)
        c.pending = {"request_id": self._request_id, "f": f, "key": key, "value": hval,
                     "node": target}
        self.history.append({"index": len(self.history), "time": sim.now, "process": c.cid,
                             "type": "invoke", "f": f, "key": key, "value": hval,
                             "node": target})
        sim.send(("client", c.cid), target, req)
        sim.push(sim.now + self.timeout_ms, "client_timeout", c.cid, self._request_id)

    def timeout(self, cid: int, request_id: int) -> bool:
        c = self.clients[cid]
        if c.pending is not None and c.pending["request_id"] == request_id:
            self._complete(c, "info", c.pending["value"], "timeout")
            return True
        return False

    def _complete(self, c: _Client, typ: str, value, error: str | None = None) -> None:
        p = c.pending
        c.pending = None
        self.history.append({"index": len(self.history), "time": self.sim.now,
                             "process": c.cid, "type": typ, "f": p["f"], "key": p["key"],
                             "value": value, "node": p["node"], "error": error})
        self.sim.push(self.sim.now + (self.op_interval_ms if self.scripts is not None else
                                      1 + self.rng.randrange(self.op_interval_ms)), "client",
                      c.cid)

    def reply(self, cid: int, resp: m.RegisterResponse) -> None:
        c = self.clients[cid]
        if c.pending is None or c.pending["request_id"] != resp.request_id:
            return
        c.leader_hint = resp.leader_id if resp.leader_id >= 0 else None
        p = c.pending
        if resp.outcome == "ok":
            value = resp.value if p["f"] == "read" else p["value"]
            if p["f"] == "read":
                c.last_value[p["key"]] = resp.value
            elif p["f"] == "write":
                c.last_value[p["key"]] = p["value"]
            else:
                c.last_value[p["key"]] = p["value"][1]
            self._complete(c, "ok", value)
        elif resp.outcome == "fail":
            if p["f"] == "cas" and resp.error == m.NONE:
                c.last_value.pop(p["key"], None)
            self._complete(c, "fail", p["value"], m.ERROR_NAMES.get(resp.error, str(resp.error)))
        else:
            self._complete(c, "info", p["value"], m.ERROR_NAMES.get(resp.error, str(resp.error)))


def check_history(history: list[dict]) -> tuple[str, str, list | None] | None:
    """The register history's verdict: None when every key is linearizable (cas-register
    model, nil reads: the key holds nothing), else (invariant, detail, counterexample)."""
    from checkers.linearizability import check
    from checkers.models import get_model
    model = get_model("cas-register", nil_read="value")
    lin = check(model.model(), (), timeout_s=LINEARIZABILITY_BUDGET_S,
                keyed=model.operations(history))
    if lin.valid is True:
        return None
    bad = next(k for k in lin.keys if k.valid is not True)
    return ("Linearizability" if lin.valid is False else "LinearizabilityUnknown",
            f"register history of key {bad.key} ({bad.operations} ops) is "
            + ("not linearizable" if lin.valid is False else
               f"not decided within {LINEARIZABILITY_BUDGET_S:.0f} s"),
            bad.counterexample)
