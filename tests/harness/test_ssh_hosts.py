"""Campaigns on hosts chaoskraft did not create: three plain Debian containers (sshd,
python3 and sudo only, started here, not labelled chaoskraft) reached only over SSH.

The nodes are installed over SSH, campaigns run with their faults (CI: one queue campaign),
the node logs come back, and ``chaoskraft hosts clean`` leaves every host's file list as it
was. Then each usual mistake (unreachable, key refused, host key unknown or changed, no
sudo, wrong Python) gets its own clear error.
"""
from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from plain_hosts import PlainHosts

pytestmark = pytest.mark.docker  # one Docker stream (conftest): one module fixture


@pytest.fixture(scope="module")
def hosts(docker_client, node_image, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("plain-hosts")
    ph = PlainHosts(4, workdir, docker_client)  # the fourth: a spare host
    try:
        ph.start()
        ph.known = ph.known_hosts(workdir / "known_hosts")
        yield ph
    finally:
        ph.remove()
        assert not docker_client.containers.list(
            all=True, filters={"label": f"chaoskraft-test-hosts={ph.id}"})


def _history(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]


def _run(campaign: dict, hosts_file: Path, results: Path) -> tuple[int, Path]:
    from harness.config import resolve
    from harness.hosts import read_hosts_arg
    from harness.runner import run
    from harness.store import new_run_dir
    cfg = resolve(campaign, {**read_hosts_arg(str(hosts_file)), "results_dir": str(results)})
    assert cfg.backend == "ssh" and cfg.nodes == 3
    assert cfg.controllers == campaign.get("controllers", 3)
    run_dir = new_run_dir(results, cfg.test, cfg.seed)
    with open(run_dir.parent / f"{run_dir.name}.out", "w") as out:
        code = run(cfg, stream=out, run_dir=run_dir)
    return code, run_dir


def _valid_run_with_its_faults(campaign: dict, hosts_file: Path,
                               results: Path) -> tuple[str, Path, set[str]]:
    """Run a campaign on the hosts; it must be valid and every package of its fault plan must
    have opened a fault in the history (under its own operation names). (log, run, planned)"""
    from nemesis.schedule import REGISTRY
    code, run_dir = _run(campaign, hosts_file, results)
    log = (run_dir / "harness.log").read_text()
    assert code == 0, log[-3000:]
    assert json.loads((run_dir / "results.json").read_text())["valid"] is True
    planned = {step["kind"] for step in json.loads((run_dir / "plan.json").read_text())}
    seen = {r["f"] for r in _history(run_dir) if r["process"] == "nemesis"}
    assert planned
    for kind in planned:
        assert set(REGISTRY[kind].opens) & seen, (kind, REGISTRY[kind].opens, seen)
    return log, run_dir, planned


@contextlib.contextmanager
def _then_clean(hosts):
    """The block's campaigns on the hosts, then ``chaoskraft hosts clean``: every host's
    file list as before, the install kept between runs, and nothing of ours running (also
    when the block failed: the hosts are the module's)."""
    from harness.cli import main
    before = [hosts.file_list(i) for i in range(4)]
    hosts_file = hosts.hosts_file(hosts.workdir / "hosts.yaml", hosts.known, nodes=3)
    try:
        yield hosts_file
        for i in range(4):  # the install is still there between runs, and nothing runs
            rc, out = hosts.sh(i, "test -d /opt/chaoskraft/root && ! grep -q chaoskraft /proc/mounts")
            assert rc == 0, out
    finally:
        cleaned = main(["hosts", "clean", "--hosts", str(hosts_file)])
    assert cleaned == 0
    after = [hosts.file_list(i) for i in range(4)]
    for i in range(4):
        added = sorted(set(after[i]) - set(before[i]))
        removed = sorted(set(before[i]) - set(after[i]))
        assert not added and not removed, (i, added[:20], removed[:20])
        rc, out = hosts.sh(i, "ps -eo comm=")
        assert rc == 0 and set(out.split()) <= {"sshd", "sh", "ps"}, out  # nothing of ours runs


def test_a_queue_campaign_over_ssh_then_clean(hosts, tmp_path):
    """CI's campaign on the plain hosts: the bundle installed, then the queue workload under
    every fault a host takes the same way for either workload (iptables, processes, faultfs,
    NFQUEUE); the register campaign and the reuse of an install run at night, below."""
    results = tmp_path / "results"
    with _then_clean(hosts) as hosts_file:
        queue = {"workload": "queue", "seed": 3, "time_limit_s": 14, "recovery_s": 3,
                 "concurrency": 6, "nemesis": ["partition", "kill", "power-loss", "pause",
                                               "delay"],
                 "nemesis_interval_s": 2, "nemesis_combine": "concurrent"}
        log, run_dir, planned = _valid_run_with_its_faults(queue, hosts_file, results)
        assert "installing node bundle" in log and len(planned) >= 4
        assert "power-loss" in planned
        for n in (1, 2, 3):
            node_log = run_dir / "nodes" / f"n{n}" / "node.log"
            assert f"node {n} listening" in node_log.read_text()
            assert (run_dir / "nodes" / f"n{n}" / "data.tar.gz").stat().st_size > 0


@pytest.mark.nightly  # three more campaigns over SSH (CI's budget: DESIGN section 9)
def test_register_clock_rate_and_decommission_over_ssh_then_clean(hosts, tmp_path):
    results = tmp_path / "results"
    with _then_clean(hosts) as hosts_file:
        register = {"workload": "register", "seed": 7, "time_limit_s": 12, "recovery_s": 3,
                    "concurrency": 6, "nemesis": ["partition", "kill", "pause", "clock", "delay"],
                    "nemesis_interval_s": 2, "nemesis_combine": "concurrent"}
        log, run_dir, planned = _valid_run_with_its_faults(register, hosts_file, results)
        assert "installing node bundle" in log and len(planned) >= 4

        # a clock rate alone (a clock fault beside it would move the same clock): it takes on
        # the hosts, the node's age read from the host's /proc, and its measured rate is
        # recorded (long enough that a start slowed by a busy machine leaves a window to
        # measure over)
        rate = {"workload": "register", "seed": 5, "time_limit_s": 10, "recovery_s": 2,
                "concurrency": 3, "nemesis": ["clock-rate"], "nemesis_interval_s": 2,
                "nemesis_options": {"clock-rate": {"duration_s": [5, 6], "rate": [0.5, 0.5]}}}
        log, run_dir, planned = _valid_run_with_its_faults(rate, hosts_file, results)
        assert "already installed" in log and "installing node bundle" not in log  # reused
        rows = [r["value"] for r in _history(run_dir) if r["f"].startswith("clock-rate")
                and r["type"] == "info"]
        assert rows and not any("failed" in v for v in rows), rows
        seen = [x for v in rows for x in v.get("measured_rates", {}).values()]
        assert seen and all(0.3 < x < 0.7 for x in seen), rows

        # a broker decommissioned: the spare host (the hosts file's spare_hosts, checked and
        # given the bundle with the others) comes in under a new node id, n4; the old
        # broker stays down and out of the cluster
        decommission = {"workload": "queue", "seed": 2, "time_limit_s": 22, "recovery_s": 3,
                        "concurrency": 4, "controllers": 2, "replication_factor": 2,
                        "min_insync_replicas": 1, "nemesis": ["decommission"],
                        "nemesis_interval_s": 2,
                        "nemesis_options": {"decommission": {"duration_s": 14}}}
        log, run_dir, planned = _valid_run_with_its_faults(decommission, hosts_file, results)
        rows = [r["value"] for r in _history(run_dir) if r["f"] == "recommissioned"]
        assert rows and rows[0]["node"] == 4 and rows[0]["replaced"] == 3, rows
        assert 4 in rows[0]["replicas"] and "spare host added: n4" in log, rows
        assert "registered" in (run_dir / "nodes" / "n4" / "node.log").read_text()


def _check_error(hosts, tmp_path, entries, known=None, **extra) -> str:
    from harness.backends.ssh_hosts import HostError, SshHosts
    from harness.hosts import parse_hosts
    cluster = SshHosts(parse_hosts(entries), "t", controllers=1,
                       known_hosts=str(known or hosts.known), connect_timeout_s=5, **extra)
    try:
        with pytest.raises(HostError) as exc:
            cluster.check()
    finally:
        cluster.close()
    return str(exc.value)


def test_unreachable_host(hosts, tmp_path):
    a = hosts.addresses[0]
    msg = _check_error(hosts, tmp_path, [{"address": a, "port": 2222, "key": str(hosts.key_file)}])
    assert f"root@{a}:2222" in msg and "unreachable" in msg and "Connection refused" in msg


def test_refused_key(hosts, tmp_path):
    import paramiko
    other = tmp_path / "other"
    paramiko.ECDSAKey.generate(bits=256).write_private_key_file(str(other))
    a = hosts.addresses[0]
    msg = _check_error(hosts, tmp_path, [{"address": a, "key": str(other)}])
    assert f"root@{a}" in msg and "authentication failed" in msg and str(other) in msg
    assert "ssh-copy-id" in msg


def test_unknown_and_changed_host_keys(hosts, tmp_path):
    a, b = hosts.addresses[:2]
    entry = [{"address": a, "key": str(hosts.key_file)}]
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    msg = _check_error(hosts, tmp_path, entry, known=empty)
    assert "host key is not in" in msg and "SHA256:" in msg and f"ssh-keyscan {a}" in msg
    # a known_hosts that does not exist: said so, nothing created
    missing = tmp_path / "nowhere" / "known_hosts"
    msg = _check_error(hosts, tmp_path, entry, known=missing)
    assert "does not exist" in msg and not missing.exists()
    # another host's key under this address: refused as changed, both fingerprints named
    lines = hosts.known.read_text().splitlines()
    b_key = next(line for line in lines if line.startswith(b + " ")).split(" ", 1)[1]
    changed = tmp_path / "changed_known_hosts"
    changed.write_text(f"{a} {b_key}\n")
    msg = _check_error(hosts, tmp_path, entry, known=changed)
    assert "CHANGED" in msg and msg.count("SHA256:") == 2 and "ssh-keygen -R" in msg
    # accept-new records a first key (and only appends) but still refuses a changed one
    from harness.backends.ssh_hosts import SshHosts
    from harness.hosts import parse_hosts
    fresh = tmp_path / "fresh_known_hosts"
    fresh.write_text("# mine\n")
    c = SshHosts(parse_hosts(entry), "t", controllers=1, known_hosts=str(fresh),
                 host_key_policy="accept-new", log=lambda m: None)
    c.check()
    c.close()
    text = fresh.read_text()
    assert text.startswith("# mine\n") and text.count(a) == 1
    msg = _check_error(hosts, tmp_path, entry, known=changed, host_key_policy="accept-new")
    assert "CHANGED" in msg


@contextlib.contextmanager
def _broken(hosts, i: int, do: str, undo: str):
    """Host ``i`` with ``do`` run on it, and ``undo`` run after, also on failure."""
    rc, out = hosts.sh(i, do)
    assert rc == 0, out
    try:
        yield
    finally:
        hosts.sh(i, undo)


def test_user_without_sudo(hosts, tmp_path):
    with _broken(hosts, 0, "id plain >/dev/null 2>&1 || (useradd -m plain && mkdir -p "
                           "/home/plain/.ssh && cp /root/.ssh/authorized_keys /home/plain/.ssh/ "
                           "&& chown -R plain /home/plain/.ssh)", "userdel -r plain"):
        a = hosts.addresses[0]
        entry = [{"address": a, "user": "plain", "key": str(hosts.key_file)}]
        msg = _check_error(hosts, tmp_path, entry)  # sudo there, but not for this user
        assert f"plain@{a}" in msg and "no passwordless sudo" in msg
        with _broken(hosts, 0, "mv /usr/bin/sudo /usr/bin/sudo.away",
                     "mv /usr/bin/sudo.away /usr/bin/sudo"):
            msg = _check_error(hosts, tmp_path, entry)
            assert f"plain@{a}" in msg and "no passwordless sudo" in msg
            assert "sudo: not found" in msg


def test_wrong_or_missing_python(hosts, tmp_path):
    a = hosts.addresses[1]
    entry = [{"address": a, "key": str(hosts.key_file)}]
    with _broken(hosts, 1, "printf '#!/bin/sh\\necho 3.4\\n' > /usr/local/bin/python3 && "
                           "chmod +x /usr/local/bin/python3", "rm -f /usr/local/bin/python3"):
        msg = _check_error(hosts, tmp_path, entry)
        assert "/usr/local/bin/python3 is Python 3.4" in msg and "3.7 or newer" in msg
    with _broken(hosts, 1, "mv /usr/bin/python3 /usr/bin/python3.away",
                 "mv /usr/bin/python3.away /usr/bin/python3"):
        msg = _check_error(hosts, tmp_path, entry)
        assert "no working python3" in msg and "apt-get install python3" in msg


def test_every_bad_host_is_reported_at_once(hosts, tmp_path):
    a, b = hosts.addresses[:2]
    msg = _check_error(hosts, tmp_path, [{"address": a, "port": 2222, "key": str(hosts.key_file)},
                                         {"address": b, "user": "nobody-here",
                                          "key": str(hosts.key_file)}])
    assert msg.count("\n") == 1 and "unreachable" in msg and "authentication failed" in msg


def test_run_with_a_bad_host_fails_clearly_and_keeps_nothing_running(hosts, tmp_path):
    from harness.cli import main
    hosts_file = tmp_path / "hosts.yaml"
    hosts_file.write_text(yaml.safe_dump({
        "hosts": [{"address": a, "key": str(hosts.key_file)} for a in hosts.addresses[:2]]
        + [{"address": hosts.addresses[2], "port": 2222, "key": str(hosts.key_file)}],
        "known_hosts": str(hosts.known)}))
    code = main(["run", "--hosts", str(hosts_file), "--time-limit", "5",
                 "--results-dir", str(tmp_path / "results")])
    assert code == 4
    for i in range(3):
        rc, _ = hosts.sh(i, "test -e /opt/chaoskraft")
        assert rc != 0  # the check comes before any install
    shutil.rmtree(tmp_path / "results", ignore_errors=True)


def test_a_host_without_chroot(hosts, tmp_path):
    a = hosts.addresses[2]
    with _broken(hosts, 2, "mv /usr/sbin/chroot /usr/sbin/chroot.away",
                 "mv /usr/sbin/chroot.away /usr/sbin/chroot"):
        msg = _check_error(hosts, tmp_path, [{"address": a, "key": str(hosts.key_file)}])
        assert f"root@{a}" in msg and "the host lacks chroot" in msg


def test_a_sudo_user_is_as_good_as_root(hosts, tmp_path):
    """A host reached as a user with passwordless sudo (Jepsen's usual admin user): every
    command and file goes through ``sudo -n``."""
    from harness.backends.ssh_hosts import SshHosts
    from harness.hosts import parse_hosts
    from harness.images import build_images, node_bundle
    with _broken(hosts, 0, "useradd -m ops && mkdir -p /home/ops/.ssh && cp /root/.ssh/"
                           "authorized_keys /home/ops/.ssh/ && chown -R ops /home/ops/.ssh && "
                           "echo 'ops ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/ops",
                 "rm -f /etc/sudoers.d/ops; userdel -r ops"):
        before = hosts.file_list(0)
        bundle = node_bundle(build_images(hosts.client, log=lambda m: None), hosts.client)
        c = SshHosts(parse_hosts([{"address": hosts.addresses[0], "user": "ops",
                                   "key": str(hosts.key_file)}]), "sudo", controllers=1,
                     known_hosts=str(hosts.known), bundle=bundle, log=lambda m: None)
        try:
            c.check()
            c._install(1)
            c.agent(1, "prepare")
            c.put_file(1, "/etc/chaoskraft/probe", b"written through sudo")
            assert c.get_file(1, "/etc/chaoskraft/probe") == b"written through sudo"
            rc, out = c.exec(1, ["sh", "-c", "id -u; iptables -S INPUT"])
            assert out.split()[0] == "0" and "-P INPUT" in out, out
            rc, out = hosts.sh(0, "stat -c %U /opt/chaoskraft/root/etc/chaoskraft/probe")
            assert out.strip() == "root"
            assert c.status()[1]["bundle"] == bundle.stem
            assert c.clean()[1]["removed"] == "/opt/chaoskraft"
        finally:
            c.close()
        assert hosts.file_list(0) == before
