"""Beyond one JVM: a standalone Spark cluster (master and worker from the pyspark package's
spark-class) and a Spark Connect server, all on 127.0.0.1, give the results local mode gives.

Each master is driven by one Python process that does what ``chaoskraft analyze RUN_DIR
--spark-master M``, ``chaoskraft check --engine spark --spark-master M`` and ``chaoskraft
analyze --across DIR --spark-master M`` do (the same functions, one Spark session).
"""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import PORCUPINE, ROOT
from test_queue_differential import generate

# a standalone master, a worker and a Connect server: five JVMs; nightly (CI checks Spark
# in local mode throughout)
pytestmark = [pytest.mark.spark, pytest.mark.nightly, pytest.mark.xdist_group("spark")]
CORPUS = PORCUPINE


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, ready, procs, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{what}: a process exited with {p.returncode}")
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{what} not ready in {timeout:.0f} s")


def _listening(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """(spark://..., sc://...): a master with one worker, and a Connect server."""
    import pyspark
    home = Path(pyspark.__file__).parent
    tmp = tmp_path_factory.mktemp("spark-cluster")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(tmp / "logs"), "SPARK_WORKER_DIR": str(tmp / "work"),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    port, ui, wui, connect = _port(), _port(), _port(), _port()
    procs = []
    logs = []

    def start(name, *args):
        log = open(tmp / f"{name}.log", "w")
        logs.append(log)
        procs.append(subprocess.Popen([*args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                      start_new_session=True))
    try:
        start("master", str(home / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
              "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui))
        _wait("the master", lambda: _listening(port), procs)
        start("worker", str(home / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
              f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores", "2",
              "--memory", "2g", "--webui-port", str(wui), "--work-dir", str(tmp / "work"))

        def worker_alive():
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                return json.load(r).get("aliveworkers", 0) >= 1
        _wait("the worker", worker_alive, procs)
        start("connect", str(home / "bin" / "spark-submit"), "--class",
              "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2]",
              "--conf", f"spark.connect.grpc.binding.port={connect}",
              "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
              "--conf", "spark.ui.enabled=false")
        _wait("the Connect server", lambda: _listening(connect), procs)
        yield f"spark://127.0.0.1:{port}", f"sc://127.0.0.1:{connect}"
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in logs:
            log.close()


DRIVE = textwrap.dedent("""
    import io, json, sys
    from harness.analyze import analyze
    from harness.across import across
    from checkers.history import read_history
    from workloads.register_check import run_check
    master, run_dir, root, etcd_bad, etcd_ok = sys.argv[1:]
    master = None if master == "local" else master
    out = {}
    r = analyze(run_dir, engine="spark", spark_master=master, log=lambda m: None)
    out["queue"] = r["checkers"]["queue"]
    out["etcd"] = [run_check(read_history(p), "etcd", partition=False, engine="spark",
                             master=master).valid for p in (etcd_bad, etcd_ok)]
    buf = io.StringIO()
    across(root, spark_master=master, out=buf)
    out["across"] = buf.getvalue()
    print("RESULT " + json.dumps(out, default=str))
""")


def _drive(master: str, run_dir: Path, root: Path, scratch: Path | None = None) -> dict:
    """``scratch``: the directory the queue check's key rows pass through
    (``CHAOSKRAFT_QUEUE_SCRATCH``) instead of Spark's shuffle."""
    env = {k: v for k, v in os.environ.items() if k != "CHAOSKRAFT_QUEUE_SCRATCH"}
    if scratch is not None:
        env["CHAOSKRAFT_QUEUE_SCRATCH"] = str(scratch)
    p = subprocess.run(
        [sys.executable, "-c", DRIVE, master, str(run_dir), str(root),
         str(CORPUS / "jepsen" / "etcd_000.log"), str(CORPUS / "jepsen" / "etcd_002.log")],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr[-4000:]
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    assert line, p.stdout[-2000:] + p.stderr[-2000:]
    return json.loads(line[-1][len("RESULT "):])


def test_a_cluster_and_connect_give_what_local_mode_gives(servers, tmp_path):
    root = tmp_path / "runs"
    run = root / "queue" / "20261124T000000Z-1"
    run.mkdir(parents=True)
    rows = []
    rng = random.Random(11)
    for h in range(8):
        rows.extend(generate(rng, h, len(rows)))
    with open(run / "history.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    (run / "config.yaml").write_text(yaml.safe_dump({"workload": "queue", "seed": 1}))
    local = _drive("local", run, root)
    assert local["queue"]["valid"] is False and len(local["queue"]["anomalies"]) >= 5
    assert local["etcd"] == [False, True]
    assert "1 runs" in local["across"], local["across"]
    for master in servers:
        assert _drive(master, run, root) == local, master
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    untouched = scratch.stat().st_mtime_ns
    assert _drive(servers[0], run, root, scratch) == local, "through the shared directory"
    assert scratch.stat().st_mtime_ns != untouched, "the key rows went through it"
    assert list(scratch.iterdir()) == [], "the check's files are removed"
