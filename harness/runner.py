"""The runner: one campaign, from images to verdict.

Phases, each logged: images -> cluster up -> wait for a leader -> workload
and nemesis for the time limit -> heal (every partition flushed, every node
started) -> recovery wait -> final reads -> collect node logs -> teardown ->
analysis. The seed (printed and stored) drives the workload generator and
the fault schedule. Ctrl-C (or SIGTERM) at any point heals, tears the
cluster down and keeps the history; the run can then be analysed with
``chaoskraft analyze RUN_DIR``. One that lands during teardown waits for it
(:class:`TeardownGuard`).
"""
from __future__ import annotations

import asyncio
import dataclasses
import itertools
import random
import signal
import sys
import time
import uuid
from pathlib import Path

from core.run_dir import RunDir
from core.verdict import exit_code, word
from workloads.nodes import NotServing
from workloads.registry import WORKLOADS

from .backends import log_ends
from .campaign import Campaign, fault_plan
from .config import RunConfig, needs_faketime, needs_faultfs, node_config
from .history import HistoryWriter
from .store import new_run_dir



class Logger:
    def __init__(self, path: Path, stream=sys.stdout) -> None:
        self._f = open(path, "a", buffering=1)
        self._stream = stream
        self._t0 = time.monotonic()

    def __call__(self, msg: str) -> None:
        line = f"[{time.monotonic() - self._t0:7.1f}s] {msg}"
        self._f.write(time.strftime("%Y-%m-%dT%H:%M:%SZ ", time.gmtime()) + line + "\n")
        print(line, file=self._stream, flush=True)

    def close(self) -> None:
        self._f.close()


def install_interrupt_handlers() -> None:
    """SIGTERM and SIGINT interrupt the run (teardown, history kept, exit 130), however the
    process was started: one that inherits SIGINT as ignored (a background job of a
    non-interactive shell, a pytest-xdist worker's child) gets Python's handler back."""
    def on_term(signum, frame):
        raise KeyboardInterrupt
    try:
        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:
        pass  # not the main thread


class TeardownGuard:
    """While teardown runs, SIGTERM and SIGINT wait for it: an interrupt that lands in the
    middle of removing the containers would leave the rest behind (a CI job's timeout sends
    one SIGTERM, and a matrix sends one to each running campaign). The first interrupt is
    noted and logged and the run ends as interrupted once teardown is done; a second one
    abandons the teardown (the user insists; ``chaoskraft cleanup`` removes what is left).
    Only in the main thread, where signal handlers live."""

    def __init__(self, log) -> None:
        self.log = log
        self.interrupted = False
        self._old: dict = {}

    def _defer(self, signum, frame) -> None:
        if self.interrupted:
            raise KeyboardInterrupt
        self.interrupted = True
        self.log(f"{signal.Signals(signum).name} during teardown: teardown goes on, then the "
                 f"run ends as interrupted (send it again to abandon the teardown)")

    def __enter__(self) -> "TeardownGuard":
        try:
            for s in (signal.SIGTERM, signal.SIGINT):
                self._old[s] = signal.signal(s, self._defer)
        except ValueError:
            pass  # not the main thread
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)
        self._old.clear()


def generated_ops(cfg: RunConfig, per_process: int | None = None, generator=None):
    """What the workload generator (``generator``, else the workload's for ``cfg``) hands
    each process, in order: the first ``per_process`` operations (default: half again what
    the rate allows in the time limit at its longest stretch, ``max_stretch``)."""
    n = per_process or int(cfg.rate * cfg.time_limit_s * cfg.max_stretch * 1.5) + 10
    gen = generator if generator is not None else WORKLOADS[cfg.workload].generator(cfg)
    for p in range(cfg.concurrency):
        for op in itertools.islice(gen.ops(p), n):
            yield {"process": p, "f": op.f, "key": op.key, "value": op.value}


def write_plan(cfg: RunConfig, run_dir: Path, steps=None, generator=None) -> None:
    """plan.json (the fault schedule ``steps``, else ``fault_plan(cfg)``) and generated.jsonl
    (what ``generator``, else the workload's for ``cfg``, hands out): ``chaoskraft
    reproduce`` compares them between a run and its re-run. A run writes the very plan and
    generator it then runs."""
    steps = fault_plan(cfg) if steps is None else steps
    rd = RunDir(run_dir)
    rd.write_plan([dataclasses.asdict(s) for s in steps])
    rd.write_generated(generated_ops(cfg, generator=generator))


def make_backend(cfg: RunConfig, run_id: str, image: str, log):
    from .backends.docker_backend import DockerCluster
    if cfg.backend == "docker":
        return DockerCluster(run_id, image, cfg.nodes, cfg.controllers, node_config(cfg), cfg.bugs,
                             seed=cfg.seed, log=log, faketime=needs_faketime(cfg),
                             faultfs=needs_faultfs(cfg)), None
    if cfg.hosts:  # hosts chaoskraft did not create
        from .backends.ssh_hosts import SshHosts
        return SshHosts.from_config(cfg, run_id, image, log), None
    from .backends.ssh_backend import ssh_over_docker
    return ssh_over_docker(cfg, run_id, image, log)


def run(cfg: RunConfig, root: Path | None = None, stream=None, run_dir: Path | None = None) -> int:
    """Run one campaign; returns Jepsen's exit code (0 valid, 1 invalid, 2 unknown).
    Progress goes to ``stream`` (stdout by default) and to the run's harness.log. ``run_dir``:
    a directory made by ``store.new_run_dir`` (the caller then knows where the run is)."""
    from .analyze import analyze
    from .images import build_images
    if cfg.seed is None:
        cfg.seed = random.SystemRandom().randrange(1 << 31)
    run_dir = run_dir or new_run_dir(Path(root or cfg.results_dir), cfg.test, cfg.seed)
    RunDir(run_dir).write_config(cfg.to_dict())
    steps = fault_plan(cfg)  # computed once: the run does what plan.json and
    generator = WORKLOADS[cfg.workload].generator(cfg)  # generated.jsonl say
    write_plan(cfg, run_dir, steps, generator)
    log = Logger(run_dir / "harness.log", stream or sys.stdout)
    log(f"run {run_dir} seed {cfg.seed} (reproduce with: chaoskraft run --seed {cfg.seed} ...; "
        f"the resolved config is in config.yaml)")
    history = HistoryWriter(run_dir / "history.jsonl")
    install_interrupt_handlers()
    run_id = f"{uuid.uuid4().hex[:8]}"
    log(f"run id {run_id}: its Docker resources carry the label chaoskraft.run={run_id} "
        f"(`chaoskraft cleanup --run {run_id}` removes them if the harness is killed)")
    backend = owner = None
    interrupted = False
    error = None
    try:
        log("images: building or reusing")
        image = build_images(log=log)
        backend, owner = make_backend(cfg, run_id, image, log)
        (owner or backend).up()
        if owner is not None:
            backend.connect()
        asyncio.run(Campaign(cfg, backend, history, log, steps=steps,
                             generator=generator).run())
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: healing and tearing down; the history is kept")
    except Exception as exc:  # noqa: BLE001 - reported, then teardown, then re-raised
        error = exc
        log(f"run failed: {type(exc).__name__}: {exc}")
    finally:
        with TeardownGuard(log) as guard:
            history.close()
            if backend is not None:
                try:
                    if backend.nodes:
                        log("collecting node logs")
                        backend.collect_logs(run_dir / "nodes")
                except Exception as exc:  # noqa: BLE001 - teardown must go on
                    log(f"could not collect node logs: {exc}")
                if hasattr(backend, "close"):
                    backend.close()
            if owner is not None or backend is not None:
                log("teardown: stopping the nodes on the hosts (the install stays; `chaoskraft "
                    "hosts clean` removes it)" if cfg.hosts else
                    "teardown: removing containers, volumes and network")
                (owner or backend).down()
    interrupted = interrupted or guard.interrupted
    if isinstance(error, NotServing) and error.stopped:
        # the nodes refuse their settings or data: the campaign's input, not a bug of ours
        for line in [f"run could not start: {error}", *log_ends(run_dir / "nodes",
                                                                 error.culprits)]:
            log(line)
        log("verdict: unknown (nothing was tested)")
        log(f"run directory: {run_dir}")
        log.close()
        return exit_code(None)
    if error is not None:
        raise error
    if interrupted:
        log(f"history kept in {run_dir}/history.jsonl; analyse it with: chaoskraft analyze {run_dir}")
        log.close()
        return 130
    results = analyze(run_dir, engine=cfg.engine, spark_master=cfg.spark_master,
                      budget_s=cfg.check_budget_s, log=log)
    log(f"verdict: {word(results['valid'])}")
    log(f"run directory: {run_dir}")
    log.close()
    return exit_code(results["valid"])
