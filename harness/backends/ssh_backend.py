"""The SSH backend: the same node control over SSH (paramiko), for real hosts and VMs.

Key authentication only; host keys are checked strictly by default (an
unknown or changed host key refuses the connection, paramiko's RejectPolicy)
against a known_hosts file. Commands run through the remote shell
(``ck-ctl``, ``iptables``); files move over SFTP.

``ssh_over_docker`` is how the tests (and ``chaoskraft run --backend ssh``)
exercise it: Docker starts the containers with a freshly generated public
key authorised, the containers' own sshd host keys are read through the
Docker API into a known_hosts file, and from then on every command goes over
SSH.
"""
from __future__ import annotations

import io
import shlex
import threading
import time
from pathlib import Path

import paramiko

from . import BackendError, NodeControl, NodeInfo


class SshCluster(NodeControl):
    def __init__(self, nodes: list[NodeInfo], pkey: paramiko.PKey, known_hosts: Path,
                 user: str = "root", port: int = 22, strict_host_keys: bool = True,
                 connect_timeout_s: float = 10.0) -> None:
        self.nodes = list(nodes)
        self.pkey = pkey
        self.known_hosts = Path(known_hosts)
        self.user = user
        self.port = port
        self.strict = strict_host_keys
        self.timeout = connect_timeout_s
        self._clients: dict[int, paramiko.SSHClient] = {}
        self._lock = threading.Lock()

    def _client(self, node_id: int) -> paramiko.SSHClient:
        with self._lock:
            c = self._clients.get(node_id)
            if c is not None and c.get_transport() is not None and c.get_transport().is_active():
                return c
            c = self._open(node_id)
            self._clients[node_id] = c
            return c

    def _open(self, node_id: int) -> paramiko.SSHClient:
        n = self.node(node_id)
        c = paramiko.SSHClient()
        c.load_host_keys(str(self.known_hosts))
        c.set_missing_host_key_policy(paramiko.RejectPolicy() if self.strict
                                      else paramiko.WarningPolicy())
        try:
            c.connect(n.address, port=self.port, username=self.user, pkey=self.pkey,
                      allow_agent=False, look_for_keys=False, timeout=self.timeout,
                      banner_timeout=self.timeout, auth_timeout=self.timeout)
        except (paramiko.SSHException, OSError) as exc:
            raise BackendError(f"n{node_id}: ssh {self.user}@{n.address}:{self.port}: {exc}") from None
        return c

    def connect(self) -> None:
        for n in self.nodes:
            self._client(n.node_id)

    def close(self) -> None:
        with self._lock:
            for c in self._clients.values():
                c.close()
            self._clients.clear()

    def exec(self, node_id: int, cmd: list[str], check: bool = True) -> tuple[int, str]:
        command = shlex.join(cmd)
        try:
            _, stdout, stderr = self._client(node_id).exec_command(command, timeout=60)
            out = stdout.read().decode(errors="replace")
            err = stderr.read().decode(errors="replace")
            rc = stdout.channel.recv_exit_status()
        except (paramiko.SSHException, OSError) as exc:
            raise BackendError(f"n{node_id}: ssh {command}: {exc}") from None
        if check and rc != 0:
            raise BackendError(f"n{node_id}: {command} exited {rc}: {(err or out).strip()[:500]}")
        return rc, out + err

    def put_file(self, node_id: int, path: str, data: bytes) -> None:
        with self._client(node_id).open_sftp() as sftp:
            with sftp.open(path, "wb") as f:
                f.write(data)

    def get_file(self, node_id: int, path: str) -> bytes:
        try:
            with self._client(node_id).open_sftp() as sftp:
                with sftp.open(path, "rb") as f:
                    return f.read()
        except FileNotFoundError:
            raise
        except (paramiko.SSHException, OSError) as exc:
            if getattr(exc, "errno", None) == 2:
                raise FileNotFoundError(f"n{node_id}:{path}") from None
            raise BackendError(f"n{node_id}: sftp get {path}: {exc}") from None


def host_keys(hosts: list[tuple[str, str]], read_key, timeout_s: float = 60.0,
              ready=lambda address: True) -> str:
    """known_hosts lines for ``hosts`` ((name, address) each): ``read_key(name)`` gives (exit
    code, output) of reading the host's ed25519 public key through a trusted channel (the
    Docker API, a VM's console), asked again until the key is there and ``ready(address)``.

    Hosts make their keys as they boot; on a busy machine that is seconds, so all of them
    share one generous deadline."""
    lines = []
    deadline = time.monotonic() + timeout_s
    for name, address in hosts:
        while True:
            rc, out = read_key(name)
            if rc == 0 and out.strip() and ready(address):
                break
            if time.monotonic() > deadline:
                raise BackendError(f"{name}: no sshd host key after {timeout_s:.0f} s: "
                                   f"{out.strip()[-200:]}")
            time.sleep(0.2)
        keytype, key = out.split()[:2]
        lines.append(f"{address} {keytype} {key}")
    return "\n".join(lines) + "\n"


def host_keys_from_docker(docker_cluster, timeout_s: float = 60.0) -> str:
    """known_hosts lines for every container, read through the Docker API."""
    return host_keys([(f"n{n.node_id}", n.address) for n in docker_cluster.nodes],
                     lambda name: docker_cluster.exec(
                         int(name[1:]), ["cat", "/etc/ssh/ssh_host_ed25519_key.pub"],
                         check=False), timeout_s)


class _SshOverDocker(SshCluster):
    """An SshCluster whose hosts are the containers of a DockerCluster, known after ``up``."""

    def __init__(self, docker_cluster, pkey: paramiko.PKey, workdir: Path) -> None:
        super().__init__([], pkey, workdir / "known_hosts")
        self.docker = docker_cluster
        self.workdir = workdir

    def close(self) -> None:
        super().close()
        import shutil
        shutil.rmtree(self.workdir, ignore_errors=True)  # the private key goes with the run

    def connect(self) -> None:
        self.nodes = list(self.docker.nodes)
        self.known_hosts.write_text(host_keys_from_docker(self.docker))
        deadline = time.monotonic() + 60  # sshd starts once its key is made
        while True:
            try:
                super().connect()
                return
            except BackendError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)


def ssh_over_docker(cfg, run_id: str, image: str, log, workdir: Path | None = None):
    """(ssh backend, docker cluster that owns the containers) for ``--backend ssh``."""
    import tempfile

    from .docker_backend import DockerCluster
    workdir = Path(workdir or tempfile.mkdtemp(prefix=f"chaoskraft-ssh-{run_id}-"))
    pkey = paramiko.ECDSAKey.generate(bits=256)
    public = f"{pkey.get_name()} {pkey.get_base64()} chaoskraft-{run_id}\n"
    buf = io.StringIO()
    pkey.write_private_key(buf)
    (workdir / "id_ecdsa").write_text(buf.getvalue())
    (workdir / "id_ecdsa").chmod(0o600)
    from ..config import needs_faketime, needs_faultfs, node_config
    owner = DockerCluster(run_id, image, cfg.nodes, cfg.controllers, node_config(cfg), cfg.bugs,
                          seed=cfg.seed, authorized_key=public, log=log,
                          faketime=needs_faketime(cfg), faultfs=needs_faultfs(cfg))
    log(f"ssh backend: key and known_hosts in {workdir}; strict host key checking")
    return _SshOverDocker(owner, pkey, workdir), owner
