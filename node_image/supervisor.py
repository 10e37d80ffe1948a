"""The container's init: keeps sshd and the node process running, and obeys ``ck-ctl``.
On a host reached over SSH (``harness.backends.host_agent``) it runs in the node bundle's
chroot with CHAOSKRAFT_NO_SSHD set: the host has its own sshd.

    python3 -m node_image.supervisor run          # PID 1 of a node container
    python3 -m node_image.supervisor ctl COMMAND  # what the harness runs (docker exec or ssh)

Commands: ``kill`` (SIGKILL the node and keep it down), ``start`` (let it
run again and wait until it does), ``stop`` (SIGTERM: controlled shutdown,
then keep it down), ``pause`` / ``resume`` (SIGSTOP / SIGCONT), ``status``
(JSON: running, pid, paused, held), ``disk JSON`` (a request to faultfs: see
``node_image.faultfs``).

State lives in /run/chaoskraft: ``node.pid`` and ``hold`` (present while the
node must stay down). On first start the data directory is formatted from
/etc/chaoskraft/format.json; the node runs with /etc/chaoskraft/server.properties
and logs to /var/log/chaoskraft/node.log. When /etc/chaoskraft/faketime
exists the node (and only the node) runs under libfaketime, reading its
offset from that file (see the clock nemesis).

When /etc/chaoskraft/faultfs exists, the data directory is a faultfs mount
(``node_image.faultfs``) of /var/lib/chaoskraft/backing, mounted before the
node first starts and mounted again should its process die; the node is not
started while the mount is missing.

The supervisor itself is not under libfaketime, so it may sleep.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

RUN = "/run/chaoskraft"
PID_FILE = f"{RUN}/node.pid"
HOLD = f"{RUN}/hold"
ETC = "/etc/chaoskraft"
CONFIG = f"{ETC}/server.properties"
FORMAT = f"{ETC}/format.json"
FAKETIME = f"{ETC}/faketime"
LOG_DIR = "/var/log/chaoskraft"
NODE_LOG = f"{LOG_DIR}/node.log"
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
RESTART_PAUSE_S = 0.5  # as a service manager's restart delay: a failing disk is no busy loop
FAULTFS = f"{ETC}/faultfs"
FAULTFS_BACKING = "/var/lib/chaoskraft/backing"
FAULTFS_SOCKET = f"{RUN}/faultfs.sock"
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"


def _log(msg: str) -> None:
    os.makedirs(LOG_DIR, exist_ok=True)
    with open(f"{LOG_DIR}/supervisor.log", "a") as f:
        f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {msg}\n")


def _pid() -> int | None:
    try:
        pid = int(open(PID_FILE).read().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    # A zombie is not running.
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(")")[-1].split()[0] == "Z":
                return None
    except OSError:
        return None
    return pid


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0]
    except OSError:
        return "?"


def _ended(status: int) -> str:
    """How a child ended, from its wait status: "exited with status N" (its exit code) or
    "killed by signal N"."""
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _format_if_needed() -> None:
    if not os.path.exists(FORMAT):
        return
    spec = json.load(open(FORMAT))
    if os.path.exists(os.path.join(spec["log_dir"], "meta.properties")):
        return
    args = [sys.executable, "-m", "node_image", "format", "--config", CONFIG,
            "--cluster-id", spec["cluster_id"], "--directory-id", spec["directory_id"]]
    if spec.get("initial_controllers"):
        args += ["--initial-controllers", spec["initial_controllers"]]
    out = subprocess.run(args, capture_output=True, text=True)
    _log(f"format: rc={out.returncode} {out.stdout.strip()} {out.stderr.strip()}")


def _data_dir() -> str:
    if os.path.exists(FORMAT):
        return json.load(open(FORMAT))["log_dir"]
    for line in open(CONFIG):
        if line.startswith("log.dirs="):
            return line.split("=", 1)[1].strip()
    raise SystemExit(f"no log.dirs in {CONFIG}")


def _mount_faultfs() -> subprocess.Popen | None:
    """Mount faultfs on the data directory; None if it did not come up in 10 s."""
    data = _data_dir()
    subprocess.run(["fusermount3", "-u", "-z", data], capture_output=True)  # a dead one's
    os.makedirs(LOG_DIR, exist_ok=True)
    log = open(f"{LOG_DIR}/faultfs.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "node_image.faultfs", "mount",
                             FAULTFS_BACKING, data, "--control", FAULTFS_SOCKET],
                            stdout=log, stderr=subprocess.STDOUT, cwd="/")
    log.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if os.path.ismount(data) and os.path.exists(FAULTFS_SOCKET):
            _log(f"faultfs mounted on {data}, pid {proc.pid}")
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    _log(f"faultfs did not mount on {data} (see {LOG_DIR}/faultfs.log)")
    proc.kill()
    return None


def _start_node() -> subprocess.Popen:
    _format_if_needed()
    env = dict(os.environ)
    if os.path.exists(FAKETIME):
        env.update(LD_PRELOAD=FAKETIME_LIB, FAKETIME_TIMESTAMP_FILE=FAKETIME,
                   FAKETIME_NO_CACHE="1", FAKETIME_DONT_FAKE_MONOTONIC="1")
    os.makedirs(LOG_DIR, exist_ok=True)
    log = open(NODE_LOG, "ab")
    proc = subprocess.Popen([sys.executable, "-m", "node_image", "start", "--config", CONFIG],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd="/")
    log.close()
    with open(PID_FILE + ".tmp", "w") as f:
        f.write(str(proc.pid))
    os.replace(PID_FILE + ".tmp", PID_FILE)
    _log(f"node started, pid {proc.pid}")
    return proc


def _start_sshd() -> subprocess.Popen:
    if not os.path.exists(HOST_KEY):
        # Only the ed25519 key: it takes milliseconds, where `ssh-keygen -A` (RSA 3072 among
        # them) took over 20 s on a machine busy with other containers.
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", HOST_KEY],
                       capture_output=True)
    os.makedirs("/run/sshd", exist_ok=True)
    return subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-o", f"HostKey={HOST_KEY}"],
                            stdout=subprocess.DEVNULL,
                            stderr=open(f"{LOG_DIR}/sshd.log", "ab") if os.path.isdir(LOG_DIR)
                            else subprocess.DEVNULL)


def run() -> int:
    os.makedirs(RUN, exist_ok=True)
    if os.path.exists(HOLD):
        os.remove(HOLD)  # a restarted container brings its node back
    stopping = False

    def on_term(signum, frame):
        nonlocal stopping
        stopping = True
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    sshd = None if os.environ.get("CHAOSKRAFT_NO_SSHD") else _start_sshd()
    proc: subprocess.Popen | None = None
    fs: subprocess.Popen | None = None
    not_before = 0.0  # a node that stopped on an error of its own starts again after a pause
    while not stopping:
        # Reap every exited child (we are PID 1 and adopt orphans).
        try:
            while True:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
                if proc is not None and pid == proc.pid:
                    _log(f"node {_ended(status)}")
                    proc = None
                    if status != 0 and not os.path.exists(HOLD):
                        not_before = time.monotonic() + RESTART_PAUSE_S
                if fs is not None and pid == fs.pid:
                    _log(f"faultfs {_ended(status)}")
                    fs = None
        except ChildProcessError:
            pass
        if proc is not None and _pid() is None:
            proc = None
        if fs is None and os.path.exists(FAULTFS):
            if proc is not None:  # its files are gone with the mount: as a failed disk
                _log("faultfs is gone: stopping the node until it is mounted again")
                proc.kill()
                proc.wait()
                proc = None
            fs = _mount_faultfs()
            if fs is None:
                time.sleep(1)
                continue
        if proc is None and not os.path.exists(HOLD) and time.monotonic() >= not_before:
            proc = _start_node()
        time.sleep(0.05)
    if proc is not None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    if fs is not None:
        fs.terminate()  # it writes what it holds to the disk, then unmounts
        try:
            fs.wait(timeout=10)
        except subprocess.TimeoutExpired:
            fs.kill()
        subprocess.run(["fusermount3", "-u", "-z", _data_dir()], capture_output=True)
    if sshd is not None:
        sshd.terminate()
    return 0


def _signal(pid: int, sig: int) -> None:
    """Signal the node; one that has just exited by itself needs no signal."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def disk(request: str) -> int:
    """Pass one JSON request to faultfs and print its answer."""
    from .faultfs import ctl as faultfs_ctl
    if not os.path.exists(FAULTFS_SOCKET):
        print(f"faultfs is not mounted here (no {FAULTFS_SOCKET}; the node runs on faultfs "
              f"only when {FAULTFS} exists)", file=sys.stderr)
        return 1
    try:
        req = json.loads(request)
    except ValueError as exc:
        print(f"disk: the request is not JSON: {exc}", file=sys.stderr)
        return 2
    out = faultfs_ctl(FAULTFS_SOCKET, req)
    print(json.dumps(out))
    if "error" in out:
        print(f"disk: {out['error']}", file=sys.stderr)
        return 2
    return 0


def ctl(command: str) -> int:
    os.makedirs(RUN, exist_ok=True)
    pid = _pid()
    if command == "status":
        print(json.dumps({"running": pid is not None, "pid": pid,
                          "paused": pid is not None and _state(pid) == "T",
                          "held": os.path.exists(HOLD)}))
        return 0
    if command in ("kill", "stop"):
        open(HOLD, "w").close()
        if pid is not None:
            if command == "stop":
                _signal(pid, signal.SIGCONT)
                _signal(pid, signal.SIGTERM)
            else:
                _signal(pid, signal.SIGKILL)
            deadline = time.monotonic() + 15
            while _pid() is not None and time.monotonic() < deadline:
                time.sleep(0.02)
            if _pid() is not None:
                print(f"node {pid} still running after 15 s; killing it", file=sys.stderr)
                _signal(pid, signal.SIGKILL)
        return 0
    if command == "start":
        if pid is not None and _state(pid) == "T":
            os.kill(pid, signal.SIGCONT)
        if os.path.exists(HOLD):
            os.remove(HOLD)
        deadline = time.monotonic() + 10
        while _pid() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        return 0 if _pid() is not None else 1
    if command in ("pause", "resume"):
        if pid is None:
            print("node is not running", file=sys.stderr)
            return 1
        os.kill(pid, signal.SIGSTOP if command == "pause" else signal.SIGCONT)
        return 0
    print(f"unknown command {command!r}: kill, start, stop, pause, resume, status, disk JSON",
          file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    if argv[:1] == ["run"]:
        return run()
    if argv[:1] == ["ctl"] and len(argv) == 2:
        return ctl(argv[1])
    if argv[:2] == ["ctl", "disk"] and len(argv) == 3:
        return disk(argv[2])
    print("usage: python3 -m node_image.supervisor run | ctl COMMAND", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
