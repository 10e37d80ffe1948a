"""A cluster of real node processes on loopback addresses (127.0.0.x), for tests and benches.

Each node is ``python -m node_image start`` in its own process with its own
data directory, listening on 127.0.0.<id>:<port>. ``kill`` is SIGKILL (the
process gets no chance to flush or resign), ``start`` brings a node back on
the same data. ``close`` kills every process it started.
"""
from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from workloads.register_client import Indeterminate, RegisterClient


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class LocalCluster:
    def __init__(self, root: Path, nodes: int = 3, port: int | None = None,
                 extra_config: dict[str, str] | None = None, cluster_id: str = "local",
                 brokers: bool = False, controllers: int | None = None,
                 joining: tuple[int, ...] = ()) -> None:
        """``brokers``: every node is also a broker with a Kafka listener on
        127.0.0.<id>:``kafka_port``. ``controllers``: only the first that many nodes are
        voters, with the controller role alone; the others are brokers alone (isolated
        mode; needs ``brokers``). ``joining``: a dynamic quorum (KIP-853, kraft.version 1)
        whose bootstrap voters are the other controllers; these controllers (brokers too in
        combined mode) are formatted to join it (``--no-initial-controllers``) and observe
        until AddRaftVoter adds them."""
        self.root = Path(root)
        self.ids = list(range(1, nodes + 1))
        voter_ids = self.ids[:controllers] if controllers else self.ids
        self.broker_ids = [i for i in self.ids if i not in voter_ids] if controllers \
            else self.ids
        self.port = port or free_port()
        self.kafka_port = None
        while brokers and self.kafka_port in (None, self.port):  # two listeners, two ports
            self.kafka_port = free_port()
        self.procs: dict[int, subprocess.Popen] = {}
        self.joining = tuple(joining)
        # every controller's address, joining ones included (where observers look for the
        # leader; under kraft.version 1 the voter set itself is in the log)
        voters = ",".join(f"{i}@{self.host(i)}:{self.port}" for i in voter_ids)
        self.directory_ids = {i: str(uuid.UUID(int=i, version=4)) for i in self.ids}
        initial = ",".join(f"{i}@{self.host(i)}:{self.port}:{self.directory_ids[i]}"
                           for i in voter_ids if i not in self.joining)
        for i in self.ids:
            lines = {
                "node.id": str(i), "process.roles": "controller",
                "controller.quorum.voters": voters,
                "listeners": f"CONTROLLER://{self.host(i)}:{self.port}",
                "log.dirs": str(self.root / f"data{i}"),
            }
            if brokers and i in self.broker_ids:
                lines["process.roles"] = "controller,broker" if i in voter_ids else "broker"
                lines["listeners"] += f",PLAINTEXT://{self.host(i)}:{self.kafka_port}"
                lines["advertised.listeners"] = f"PLAINTEXT://{self.host(i)}:{self.kafka_port}"
            lines.update(extra_config or {})
            self.config_path(i).write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
            fmt = ["format", "--config", str(self.config_path(i)), "--cluster-id", cluster_id]
            if self.joining:
                fmt += ["--directory-id", self.directory_ids[i]]
                fmt += (["--no-initial-controllers"] if i in self.joining else
                        ["--initial-controllers", initial, "--feature", "kraft.version=1"])
            self._run(fmt)

    @staticmethod
    def host(i: int) -> str:
        return f"127.0.0.{i}"

    def config_path(self, i: int) -> Path:
        return self.root / f"node{i}.properties"

    def log_path(self, i: int) -> Path:
        return self.root / f"node{i}.log"

    def _run(self, args: list[str]) -> None:
        subprocess.run([sys.executable, "-m", "node_image", *args], check=True,
                       capture_output=True, cwd=Path(__file__).resolve().parent.parent)

    def start(self, i: int) -> None:
        log = open(self.log_path(i), "ab")
        self.procs[i] = subprocess.Popen(
            [sys.executable, "-m", "node_image", "start", "--config", str(self.config_path(i))],
            stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parent.parent,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()

    def start_all(self) -> None:
        for i in self.ids:
            self.start(i)

    def wait_serving(self, timeout_s: float = 120.0) -> None:
        """Until every broker's Kafka listener takes connections: a broker opens it once it
        has caught up with the metadata and registered, as Kafka's does, seconds after its
        process starts (longer on a busy machine). A process that exits meanwhile fails at
        once, with the end of its log."""
        deadline = time.monotonic() + timeout_s
        waiting = set(self.broker_ids)
        while waiting:
            for i in sorted(waiting):
                proc = self.procs.get(i)
                if proc is not None and proc.poll() is not None:
                    tail = self.log_path(i).read_text(errors="replace")[-2000:]
                    raise AssertionError(f"node {i} exited with {proc.returncode} before its "
                                         f"Kafka listener opened; its log ends:\n{tail}")
                try:
                    socket.create_connection((self.host(i), self.kafka_port), 1.0).close()
                    waiting.discard(i)
                except OSError:
                    pass
            if waiting and time.monotonic() > deadline:
                raise AssertionError(f"no Kafka listener on node(s) {sorted(waiting)} "
                                     f"after {timeout_s:.0f} s (logs under {self.root})")
            if waiting:
                time.sleep(0.2)

    def kill(self, i: int) -> None:
        proc = self.procs.pop(i)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def bootstrap(self) -> str:
        return ",".join(f"{self.host(i)}:{self.kafka_port}" for i in self.broker_ids)

    def stop(self, i: int, timeout_s: float = 15.0) -> None:
        """SIGTERM: a controlled shutdown."""
        proc = self.procs.pop(i)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout_s)

    def close(self) -> None:
        for i in list(self.procs):
            self.kill(i)

    def client(self, i: int, timeout_s: float = 3.0) -> RegisterClient:
        return RegisterClient(self.host(i), self.port, timeout_s)

    async def describe_all(self) -> dict[int, object]:
        out = {}
        for i in self.procs:
            c = self.client(i, 1.0)
            try:
                out[i] = await c.describe()
            except (Indeterminate, ConnectionRefusedError):
                pass
            finally:
                await c.close()
        return out

    async def wait_for_leader(self, timeout_s: float = 30.0, exclude: set[int] = frozenset()) -> int:
        """The node that leads and accepts register writes, waiting up to ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for i, d in (await self.describe_all()).items():
                if d.role == "Leader" and i not in exclude:
                    c = self.client(i)
                    try:
                        r = await c.read("__probe__")
                    except (Indeterminate, ConnectionRefusedError):
                        continue
                    finally:
                        await c.close()
                    if r.outcome == "ok":
                        return i
            await asyncio.sleep(0.1)
        raise TimeoutError(f"no leader within {timeout_s} s; node logs in {self.root}")
