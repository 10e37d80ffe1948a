"""The register workload as a campaign runs it: read / write / cas through the controllers'
register service (``workloads.register`` generates, ``workloads.register_client`` talks),
final reads of every key on the active controller, and a linearizability check of every
key's history against a cas-register (``checkers``)."""
from __future__ import annotations

import asyncio
from pathlib import Path

from core.stats import history_stats, run_history
from core.verdict import WORD
from node_image.messages import ERROR_NAMES

from .nodes import BRING_UP_S, PORT, active_controller, serves, wait_for_service
from .register import RegisterGenerator
from .register_check import run_check
from .register_client import Indeterminate, RegisterClient
from .workload import FINAL_PROCESS_BASE, Campaign, NoPartitions, until_live

MODEL = "cas-register"


class RegisterRun(NoPartitions):
    def __init__(self, campaign: Campaign) -> None:
        self.c = campaign
        self.keys: set[str] = set()
        self.client_port = PORT

    async def setup(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def workers(self, deadline) -> None:
        if self.c.generator.nodes != self.c.ids:  # a bug of ours: operations aimed elsewhere
            raise ValueError(f"the register generator aims at nodes {self.c.generator.nodes}, "
                             f"the cluster has {self.c.ids}")
        await asyncio.gather(*(self.worker(p, deadline) for p in range(self.c.cfg.concurrency)))

    async def worker(self, process: int, deadline) -> None:
        cfg = self.c.cfg
        gen = self.c.generator.ops(process)
        clients: dict[int, RegisterClient] = {}
        interval = 1.0 / cfg.rate
        try:
            for op in gen:
                if deadline.passed():
                    break
                client = clients.get(op.node)
                if client is None:
                    client = clients[op.node] = RegisterClient(self.c.addr[op.node], PORT,
                                                               cfg.op_timeout_s)
                await self.invoke(client, process, op.f, op.key, op.value, op.node)
                await asyncio.sleep(interval)
        finally:
            for c in clients.values():
                await c.close()

    async def invoke(self, client: RegisterClient, process, f: str, key: str, value,
                     node: int) -> str:
        self.keys.add(key)
        h = self.c.history
        h.record(process, "invoke", f, key, value, node)
        try:
            if f == "read":
                r = await client.read(key)
            elif f == "write":
                r = await client.write(key, value)
            else:
                r = await client.cas(key, value[0], value[1])
        except ConnectionRefusedError:
            h.record(process, "fail", f, key, value, node, "connection-refused")
            return "fail"
        except Indeterminate as exc:
            h.record(process, "info", f, key, value, node, f"indeterminate: {exc}")
            return "info"
        err = ERROR_NAMES.get(r.error, str(r.error)) if r.error else None
        if r.outcome == "ok":
            h.record(process, "ok", f, key, r.value if f == "read" else value, node)
        elif r.outcome == "fail":
            h.record(process, "fail", f, key, value, node, err or "cas-mismatch")
        else:
            h.record(process, "info", f, key, value, node, err or "unknown")
        return r.outcome

    async def liveness(self, bound_s: float) -> list[dict]:
        """After the final heal: the quorum has a leader and every node serves a register
        read, within ``bound_s``; what is still stuck then."""
        nodes = self.c.backend.nodes

        async def stuck_now() -> list[dict]:
            out = []
            if await active_controller(nodes) is None:
                out.append({"what": "quorum", "detail": "no node leads the KRaft quorum"})
            for n in nodes:
                if not await serves(n.address):
                    out.append({"what": f"node n{n.node_id}", "node": n.node_id,
                                "detail": "does not serve register reads"})
            return out
        return await until_live(stuck_now, bound_s)

    async def final_phase(self) -> None:
        leader = await wait_for_service(self.c.backend.nodes, BRING_UP_S, self.c.log)
        self.c.log(f"final reads of {len(self.keys)} keys on n{leader}")
        client = RegisterClient(self.c.addr[leader], PORT, self.c.cfg.op_timeout_s)
        try:
            for key in sorted(self.keys):
                for _attempt in range(5):
                    outcome = await self.invoke(client, FINAL_PROCESS_BASE, "read", key, None,
                                                leader)
                    if outcome == "ok":
                        break
                    await asyncio.sleep(0.5)
        finally:
            await client.close()


class RegisterWorkload:
    name = "register"
    # its data lives in the metadata quorum, not in topic partitions: no data-plane event
    partitions = False
    writes = ("write", "cas")  # the operations whose acknowledgement a fault can undo
    fault_duration_s = (3.0, 6.0)

    def defaults(self, values: dict) -> None:
        pass  # the config's defaults are the register's

    def aims_at(self, cfg: dict) -> dict[str, str]:
        return {}  # its plan aims at no state of its own: the fault packages' scenarios do

    def generator(self, cfg) -> RegisterGenerator:
        return RegisterGenerator(cfg.seed, list(range(1, cfg.nodes + 1)), cfg.ops_per_key)

    def open(self, campaign: Campaign) -> RegisterRun:
        return RegisterRun(campaign)

    def check(self, run_dir: Path, cfg: dict, *, engine: str, spark_master: str | None,
              budget_s: float, log) -> tuple[dict, dict]:
        from checkers.history import read_history
        from checkers.parquet import write_parquet
        rows = read_history(run_dir / "history.jsonl")
        log(f"analysis: {len(rows)} history rows; writing history.parquet")
        write_parquet(rows, run_dir / "history.parquet")
        log(f"analysis: linearizability ({MODEL} per key) with {engine}"
            + (f" on {spark_master}" if spark_master
               else (" (local[2])" if engine == "spark" else "")))
        # A nil read in our own runs means "the key holds no value": checked as a value.
        result = run_check(rows, MODEL, engine=engine, master=spark_master, budget_s=budget_s,
                           nil_read="value", independent=False, strict=True)
        keys = result.keys
        lin = {
            "valid": result.valid,
            "model": MODEL,
            "keys": len(keys),
            "invalid_keys": [k.key for k in keys if k.valid is False],
            "unknown_keys": [k.key for k in keys if k.valid == "unknown"],
            "unknown_reasons": {str(k.key): k.reason for k in keys if k.valid == "unknown"},
            "counterexamples": {str(k.key): k.counterexample for k in keys if k.valid is False},
            "diagrams": {str(k.key): k.diagram for k in keys if k.valid is False and k.diagram},
        }
        if result.reason:
            lin["reason"] = result.reason
        for k in keys:
            if k.valid is False:
                log(f"analysis: key {k.key} is not linearizable; counterexample:")
                for c in k.counterexample:
                    log(f"    {c['role']:>16}: process {c['process']} {c['op']} "
                        f"(history index {c['index']})")
        stats = history_stats(rows)
        results = {"valid": result.valid, "verdict": WORD[result.valid],
                   "checkers": {"linearizability": lin}, "stats": stats}
        return results, stats

    def detection(self, run_dir: Path, results: dict) -> tuple[list[str], float | None]:
        """What caught a planted bug in a stored run, and the seconds from the workload's
        start to the earliest operation of a counterexample, on the earliest key that is not
        linearizable. The run's own check stops at the first invalid key it finishes, which
        need not be the earliest: here the keys are checked one at a time in the order they
        were first used."""
        if results["valid"] is not False:
            return [], None
        rows, start = run_history(run_dir)
        by_key: dict[str, list[dict]] = {}
        for r in rows:
            if r["process"] != "nemesis" and r.get("key") is not None:
                by_key.setdefault(r["key"], []).append(r)
        for key_rows in by_key.values():  # insertion order: first use
            result = run_check(key_rows, MODEL, engine="local", nil_read="value",
                               independent=False, strict=False)
            for k in result.keys:
                if k.valid is False and k.counterexample:
                    first = min(rows[c["index"]]["time"] for c in k.counterexample)
                    return ["Linearizability"], (first - start) / 1e9
        return ["Linearizability"], None


WORKLOAD = RegisterWorkload()
