"""Docker: images, the cluster backend, and whole campaigns (these run in CI)."""
import asyncio
import json
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import ROOT, labelled
from harness.backends import BackendError
from harness.backends.docker_backend import DATA_DIR, DockerCluster
from harness.images import build_images
from node_image.bugs import BUGS
from workloads.nodes import describe_all, wait_for_service
from workloads.register_client import RegisterClient

pytestmark = pytest.mark.docker


def chaoskraft(*args, timeout=900, cwd=None):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd or ROOT)


def run_labels(output: str) -> list[str]:
    """The chaoskraft.run labels of the clusters a run's output says it created."""
    ids = re.findall(r"network chaoskraft-([0-9a-f]+) created", output)
    assert ids, output[-3000:]
    return [f"chaoskraft.run={i}" for i in ids]


def nothing_left(client, output: str) -> bool:
    return all(labelled(client, label) == (0, 0, 0) for label in run_labels(output))


def test_images_are_cached(docker_client, node_image):
    logs = []
    again = build_images(docker_client, log=logs.append)
    assert again == node_image
    assert any("base image" in l and "up to date" in l for l in logs), logs
    assert any("node image" in l and "up to date" in l for l in logs), logs
    img = docker_client.images.get(node_image)
    assert img.labels.get("chaoskraft") == "1"


def test_cluster_lifecycle_labels_and_restart_on_same_data(docker_client, node_image):
    run_id = "t" + uuid.uuid4().hex[:7]
    c = DockerCluster(run_id, node_image, nodes=5, controllers=3, log=lambda m: None)
    try:
        c.up()
        assert labelled(docker_client, f"chaoskraft.run={run_id}") == (5, 1, 5)
        assert [n.is_controller for n in c.nodes] == [True, True, True, False, False]

        async def scenario():
            leader = await wait_for_service(c.nodes, 60, print)
            addr = c.node(leader).address
            client = RegisterClient(addr, 9093, 5)
            assert (await client.write("k", 42)).outcome == "ok"
            await client.close()
            # a broker forwards to the active controller once it knows which node that is
            deadline = time.monotonic() + 30
            while True:
                d = (await describe_all([c.node(5)])).get(5)
                if d is not None and d.leader_id >= 0:
                    break
                assert time.monotonic() < deadline, "broker n5 never learned the leader"
                await asyncio.sleep(0.1)
            broker = RegisterClient(c.node(5).address, 9093, 5)
            r = await broker.read("k")
            await broker.close()
            assert (r.outcome, r.value) == ("ok", 42)
            return leader
        asyncio.run(scenario())

        async def described(node_id):
            deadline = time.monotonic() + 30
            while True:  # one DescribeQuorum may time out on a busy machine
                d = (await describe_all([c.node(node_id)])).get(node_id)
                if d is not None or time.monotonic() > deadline:
                    return d
                await asyncio.sleep(0.2)
        before = asyncio.run(described(2)).log_end_offset

        p = chaoskraft("cluster", "status", run_id, "--json", timeout=120)
        assert p.returncode == 0 and p.stdout.strip(), (p.returncode, p.stderr[-3000:])
        [view] = json.loads(p.stdout)
        assert view["run_id"] == run_id
        status = view["nodes"]
        assert {r["node_id"] for r in status} == {1, 2, 3, 4, 5}
        down = [r for r in status if not (r["up"] and r["address"] and r["container"])]
        assert not down, f"cluster status calls these nodes down: {down}"
        assert [r["roles"] for r in status] == [["controller", "broker"]] * 3 + [["broker"]] * 2

        # Kafka data on every broker (replication factor 5), then docker kill + docker start.
        boot = f"{c.node(2).address}:9092"
        admin = AdminClient({"bootstrap.servers": boot})
        deadline = time.monotonic() + 60  # placement needs all five brokers registered
        while len(admin.list_topics(timeout=10).brokers) < 5:
            assert time.monotonic() < deadline, admin.list_topics(timeout=10).brokers
            time.sleep(0.5)
        admin.create_topics([NewTopic("same", 1, 5)])["same"].result(60)
        del admin  # an admin client is a librdkafka handle: it must not outlive the cluster
        producer = Producer({"bootstrap.servers": boot, "acks": "all"})
        for i in range(10):
            producer.produce("same", value=f"v{i}".encode())
        assert producer.flush(60) == 0
        producer.close()  # no client may outlive the cluster (its addresses go away with it)
        segment = f"{DATA_DIR}/same-0/{0:020d}.log"
        size_before = int(c.exec(2, ["stat", "-c", "%s", segment])[1])
        assert size_before > 0

        c.docker_kill(2)
        assert not c.is_running(2)
        c.docker_start(2)

        async def back():
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                d = (await describe_all([c.node(2)])).get(2)
                if d is not None and d.committed_offset >= before:
                    return d
                await asyncio.sleep(0.2)
            raise AssertionError("node 2 did not come back")
        d = asyncio.run(back())
        assert d.log_end_offset >= before
        assert int(c.exec(2, ["stat", "-c", "%s", segment])[1]) >= size_before
        consumer = Consumer({"bootstrap.servers": boot, "group.id": "same"})  # via node 2 only
        consumer.assign([TopicPartition("same", 0, OFFSET_BEGINNING)])
        values, deadline = [], time.monotonic() + 60
        while len(values) < 10 and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(10, 1.0) if not m.error()]
        consumer.close()
        assert values == [f"v{i}".encode() for i in range(10)]
        supervisor_log = c.get_file(2, "/var/log/chaoskraft/supervisor.log").decode()
        assert supervisor_log.count("format: rc=0") == 1, "a restarted container must not re-format"
        assert supervisor_log.count("node started") == 2

        c.kill_node(3)
        assert c.node_status(3)["running"] is False
        c.start_node(3)
        assert c.node_status(3)["running"] is True
        c.pause_node(3)
        assert c.node_status(3)["paused"] is True
        c.resume_node(3)
    finally:
        c.down()
    assert labelled(docker_client, f"chaoskraft.run={run_id}") == (0, 0, 0)


def test_ssh_backend_refuses_unknown_host_keys(docker_client, node_image, tmp_path):
    import paramiko

    from harness.backends.ssh_backend import SshCluster
    key = paramiko.ECDSAKey.generate(bits=256)
    run_id = "t" + uuid.uuid4().hex[:7]
    c = DockerCluster(run_id, node_image, nodes=1, controllers=1, log=lambda m: None,
                      authorized_key=f"{key.get_name()} {key.get_base64()}\n")
    try:
        c.up()
        (tmp_path / "known_hosts").write_text("")
        ssh = SshCluster(c.nodes, key, tmp_path / "known_hosts")
        with pytest.raises(BackendError, match="not found in known_hosts|Server"):
            deadline = time.monotonic() + 20
            while True:
                try:
                    ssh.connect()
                    break
                except BackendError as exc:
                    if "known_hosts" in str(exc) or "Server" in str(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.3)
        from harness.backends.ssh_backend import host_keys_from_docker
        (tmp_path / "known_hosts").write_text(host_keys_from_docker(c))
        ssh = SshCluster(c.nodes, key, tmp_path / "known_hosts")
        ssh.connect()
        assert ssh.exec(1, ["ck-ctl", "status"])[1].startswith("{")
        ssh.close()
    finally:
        c.down()


def test_default_campaign_is_valid_and_leaves_nothing(docker_client, node_image, tmp_path):
    p = chaoskraft("run", "--seed", "11", "--results-dir", str(tmp_path))
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert "verdict: valid" in out
    run = Path(re.search(r"run directory: (\S+)", out).group(1))
    for name in ("config.yaml", "history.jsonl", "history.parquet", "results.json", "harness.log"):
        assert (run / name).exists(), name
    assert (run / "nodes" / "n1" / "node.log").stat().st_size > 0
    import tarfile
    with tarfile.open(run / "nodes" / "n1" / "data.tar.gz") as tf:  # the data directory too
        names = tf.getnames()
    assert any("__cluster_metadata-0/" in n and n.endswith(".log") for n in names), names[:20]
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is True and results["stats"]["ok"] > 100
    assert any(f["f"] in ("start-partition", "kill") for f in results["stats"]["faults"])
    # the workload starts once every node serves: nothing is refused before the first fault
    rows = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    first_fault = next(r["index"] for r in rows if r["process"] == "nemesis")
    refused = [r for r in rows[:first_fault] if r.get("error") == "connection-refused"]
    assert rows[0]["process"] != "nemesis" and not refused, refused[:5]
    assert (tmp_path / "latest").resolve() == run.resolve()
    assert nothing_left(docker_client, out)
    # re-analysis of the stored run gives the same verdict
    again = chaoskraft("analyze", str(run), "--engine", "local", timeout=300)
    assert again.returncode == 0 and "verdict: valid" in again.stdout


def assert_register_report_shows_the_anomaly(browser, run: Path) -> None:
    """A register run caught by Linearizability, in its report in the browser: the nodes'
    messages around the anomaly from their journals, and the key's interactive page."""
    results = json.loads((run / "results.json").read_text())
    lin = results["checkers"]["linearizability"]
    assert results["verdict"] == "invalid", (results["verdict"], str(run))
    assert lin["counterexamples"] and all(
        any(c["role"] == "cannot linearize" for c in ce) for ce in lin["counterexamples"].values())
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    browser.get((run / "report.html").as_uri())
    diagrams = browser.find_elements(By.CSS_SELECTOR, "svg.sequence")
    assert diagrams, str(run)
    arrows = diagrams[0].find_elements(By.CSS_SELECTOR, "line.msg")
    nodes = {t.text for t in diagrams[0].find_elements(By.CSS_SELECTOR, "text[font-weight]")}
    # which nodes talk around the anomaly depends on the faults in force then (a partitioned
    # node may be silent): a lane for at least three of them
    lanes = {t for t in nodes if re.fullmatch(r"n\d+", t)}
    assert len(arrows) > 20 and len(lanes) >= 3, (len(arrows), nodes, str(run))
    browser.find_element(By.CSS_SELECTOR, "a.lin-page").click()
    WebDriverWait(browser, 20).until(lambda d: d.execute_script("return window.LIN_READY === true"))
    assert "cannot follow it" in browser.find_element(By.ID, "head").text
    ActionChains(browser).move_to_element(
        browser.find_element(By.CSS_SELECTOR, "g.op.stuck")).perform()
    info = browser.find_element(By.ID, "info").text
    assert "after the prefix the state is" in info and "illegal there" in info, info
    assert browser.execute_script(  # the run's own time axis, where the nemesis's faults lie
        "return JSON.parse(document.getElementById('data').textContent).axis") == "s"


# Nightly: in CI the nightly example matrix's planted cell (test_campaign_docker) is this
# campaign on seed 1 (the default register campaign's clients, faults and time) and its
# report is checked there the same way.
@pytest.mark.nightly
@pytest.mark.parametrize("seed", [1, 2])
def test_planted_register_bug_is_caught_in_every_seed(docker_client, node_image, tmp_path, seed,
                                                     browser):
    """The default register campaign catches reply-before-commit in every seed tried (the
    matrix in docs/campaigns.md: 20 of 20 seeds), and its report shows it."""
    p = chaoskraft("run", "--seed", str(seed), "--bug", "reply-before-commit",
                   "--results-dir", str(tmp_path))
    out = p.stdout + p.stderr
    assert p.returncode in (0, 1), out[-3000:]
    run = Path(re.search(r"run directory: (\S+)", out).group(1))
    assert nothing_left(docker_client, out)
    assert p.returncode == 1, str(run)
    assert_register_report_shows_the_anomaly(browser, run)


# the controls (without the clock package the bug stays unseen) are nightly, and so is the
# step-proof lease (CI's budget): a clock that steps cannot show it, one that runs slow can
@pytest.mark.parametrize("bug, without", [
    ("lease-read", ""), pytest.param("lease-read", "clock", marks=pytest.mark.nightly),
    pytest.param("lease-read-step-proof", "", marks=pytest.mark.nightly),
    pytest.param("lease-read-step-proof", "clock-rate", marks=pytest.mark.nightly)])
def test_a_lease_read_is_seen_with_its_clock_fault_and_only_with_it(docker_client, node_image,
                                                                    tmp_path, bug, without):
    """lease-read needs a clock that steps (needs_faults): its own campaign (partitions that
    cut off the active controller, whose clock is stepped back) catches it; the same campaign
    without the clock package cannot, since with clocks that agree no new leader is elected
    before the cut-off one's lease ends. lease-read-step-proof needs a clock that runs slow
    (the clock-rate package) in the same way. Through `chaoskraft matrix`, whose exit code
    says whether each cell came out as it must (docs/campaigns.md)."""
    fault = BUGS[bug].needs_faults[0]
    args = ["matrix", "--bugs", bug, "--seeds", "1-1", "--results-dir", str(tmp_path)]
    p = chaoskraft(*args, *(["--without", without] if without else []))
    out = p.stdout + p.stderr
    cell = re.search(rf"^\[1/1\] {bug} seed 1: (\w+).* (\S+)$", out, re.M)
    assert cell, out[-3000:]
    verdict, run = cell.group(1), Path(cell.group(2))
    assert nothing_left(docker_client, (run / "progress.log").read_text())
    packages = {step["kind"] for step in json.loads((run / "plan.json").read_text())}
    assert packages == ({"partition"} if without else {"partition", fault}), packages
    assert verdict == ("valid" if without else "invalid"), out[-3000:]
    assert p.returncode == 0, out[-3000:]


def test_ctrl_c_tears_down_and_keeps_the_history(docker_client, node_image, tmp_path):
    # Started as a non-interactive shell starts a background job (or as pytest-xdist's
    # workers start children): SIGINT ignored at exec. The run must honour it all the same.
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--seed", "5",
                             "--results-dir", str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if re.search(r"\d+/60 s: \d+ ok", line):
                break
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(lines) + rest
    assert proc.returncode == 130, out[-3000:]
    assert "interrupted" in out and "chaoskraft analyze" in out
    history = next(tmp_path.glob("register/*/history.jsonl"))
    rows = [json.loads(l) for l in history.read_text().splitlines()]
    assert sum(1 for r in rows if r["type"] == "ok") > 0
    assert nothing_left(docker_client, out)


def test_sigkill_leaves_a_history_analyze_reads_and_cleanup_removes_the_rest(
        docker_client, node_image, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--seed", "6",
                             "--time-limit", "30", "--results-dir", str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if re.search(r"\d+/30 s: [1-9]\d* ok", line):
                break
        proc.kill()  # no teardown, no analysis: as an out-of-memory kill
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(lines)
    labels = run_labels(out)
    try:
        run_id = re.search(r"run id ([0-9a-f]+):", out).group(1)
        assert labels == [f"chaoskraft.run={run_id}"]
        assert labelled(docker_client, labels[0])[0] > 0, "the killed harness left its nodes"
        run_dir = next(tmp_path.glob("register/*/history.jsonl")).parent
        assert not (run_dir / "results.json").exists()
        a = chaoskraft("analyze", str(run_dir), timeout=300)
        assert a.returncode in (0, 1, 2), a.stdout[-3000:] + a.stderr[-3000:]
        results = json.loads((run_dir / "results.json").read_text())
        assert results["stats"]["ok"] > 0 and (run_dir / "report.html").exists()
        c = chaoskraft("cleanup", "--run", run_id, timeout=120)
        assert c.returncode == 0 and re.search(r"removed [1-9]\d* containers", c.stdout), c.stdout
        assert nothing_left(docker_client, out)
    finally:
        from harness.backends.docker_backend import remove_labelled
        remove_labelled(docker_client, labels[0], log=lambda *a: None)


def test_ssh_backend_runs_the_smoke_campaign(docker_client, node_image, tmp_path):
    p = chaoskraft("run", "--backend", "ssh", "--time-limit", "20", "--seed", "3",
                   "--results-dir", str(tmp_path))
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert "strict host key checking" in out and "verdict: valid" in out
    assert re.search(r"nemesis: (partition|kill)", out)
    assert nothing_left(docker_client, out)
    assert not list(Path("/tmp").glob("chaoskraft-ssh-" + run_labels(out)[0].split("=")[1] + "-*")), \
        "the run's private key must be removed"
