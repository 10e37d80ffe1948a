"""Hosts chaoskraft did not create: the node installed and driven over SSH.

A campaign with ``hosts`` (or ``chaoskraft run --backend ssh --hosts ...``)
runs here. For each host, in parallel:

1. Check: SSH reaches it (strict host keys against ``known_hosts`` unless
   ``host_key_policy: accept-new``), the user is root or has passwordless
   sudo, python3 is 3.7 or newer (the host agent's). Every host's problems are
   reported together, each naming the host, what failed and what to do.
2. Install: the node bundle (the node image's file system, exported once per
   image into ~/.cache/chaoskraft/bundles) is unpacked into
   /opt/chaoskraft/root unless the same bundle is already there.
3. Prepare and start: the node's data, logs and configuration are wiped and
   written anew, and the supervisor starts in the bundle's chroot, detached
   from the SSH session (``host_agent``).

From then on the nemesis and the runner use the same protocol as with
Docker: a command (``ck-ctl``, ``iptables``, ``tc``...) runs in the chroot
as root, in the host's own network and process namespaces; files are
read and written under the chroot. ``down`` stops the node and removes the
fault rules but keeps the install for the next run; ``clean`` (``chaoskraft
hosts clean``) removes everything, leaving the host as it was.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import platform
import random
import shlex
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import paramiko

from node_image.storage import new_directory_id

from . import DATA_DIR, BackendError, NodeInfo, NoMachine, host_agent
from .docker_backend import KAFKA_PORT, PORT, node_properties
from .ssh_backend import SshCluster
from ..hosts import DEFAULT_KNOWN_HOSTS, Host

AGENT = Path(host_agent.__file__).read_text()
MIN_PYTHON = (3, 7)
CHUNK = 1 << 20


class HostError(BackendError):
    """A host cannot be used; the message names it, says what failed and what to do."""


def fingerprint(key: paramiko.PKey) -> str:
    return "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")


def _known_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


class _Strict(paramiko.MissingHostKeyPolicy):
    def __init__(self, known_hosts: Path) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key):
        address, _, port = hostname.lstrip("[").partition("]:")
        keyscan = f"ssh-keyscan {f'-p {port} ' if port else ''}{address}"
        raise HostError(
            f"its host key is not in {self.known_hosts} ({key.get_name()} {fingerprint(key)}). "
            f"Check that fingerprint out of band (on the host: ssh-keygen -lf "
            f"/etc/ssh/ssh_host_*_key.pub), then add the key ({keyscan} >> "
            f"{self.known_hosts}), or set host_key_policy: accept-new to trust a first key")


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """OpenSSH's StrictHostKeyChecking=accept-new: a host's first key is recorded (appended:
    the rest of the file is left as it is); a changed key is still refused."""

    def __init__(self, known_hosts: Path, log) -> None:
        self.known_hosts = known_hosts
        self.log = log
        self.lock = threading.Lock()

    def missing_host_key(self, client, hostname, key):
        with self.lock:
            self.known_hosts.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with open(self.known_hosts, "a") as f:
                f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        self.log(f"{hostname}: new host key {key.get_name()} {fingerprint(key)} recorded in "
                 f"{self.known_hosts} (host_key_policy: accept-new)")


class SshHosts(SshCluster):
    def __init__(self, hosts: list[Host], run_id: str, *, controllers: int = 3,
                 overrides: dict[str, str] | None = None, bugs: list[str] | None = None,
                 seed: int = 0, faketime: bool = False, faultfs: bool = False,
                 known_hosts: str | None = None, host_key_policy: str = "strict",
                 bundle: Path | None = None, log=print, connect_timeout_s: float = 10.0,
                 spares: list[Host] | None = None) -> None:
        """``spares``: hosts ``add_node`` may take, in order, as new broker-only nodes
        mid-run (checked and given the bundle by ``up`` with the others)."""
        known = Path(os.path.expanduser(known_hosts or DEFAULT_KNOWN_HOSTS))
        super().__init__([], None, known, strict_host_keys=host_key_policy == "strict",
                         connect_timeout_s=connect_timeout_s)
        if not 1 <= controllers <= len(hosts):
            raise ValueError(f"controllers must be between 1 and the {len(hosts)} hosts, "
                             f"got {controllers}")
        # every host under the node id it has or will have: a spare gets the next id after
        # the nodes' when it is added
        self.hosts = {i: h for i, h in enumerate([*hosts, *(spares or [])], start=1)}
        self.spares = list(range(len(hosts) + 1, len(self.hosts) + 1))  # not yet added
        self.run_id = run_id
        self.controllers = controllers
        self.overrides = overrides or {}
        self.bugs = bugs or []
        self.seed = seed
        self.faketime = faketime
        self.faultfs = faultfs
        self.bundle = bundle
        self.log = log
        self.policy = (_Strict(known) if self.strict else _AcceptNew(known, log))
        self.nodes = [NodeInfo(i, f"n{i}", h.address,
                               ("controller", "broker") if i <= controllers else ("broker",))
                      for i, h in self.hosts.items() if i not in self.spares]

    @classmethod
    def from_config(cls, cfg, run_id: str, image: str | None, log) -> "SshHosts":
        from ..config import needs_faketime, needs_faultfs, node_config
        from ..hosts import parse_all_hosts
        from ..images import node_bundle
        hosts, spares = parse_all_hosts({"hosts": cfg.hosts, "spare_hosts": cfg.spare_hosts})
        return cls(hosts, run_id, spares=spares, controllers=cfg.controllers,
                   overrides=node_config(cfg),
                   bugs=cfg.bugs, seed=cfg.seed, faketime=needs_faketime(cfg),
                   faultfs=needs_faultfs(cfg), known_hosts=cfg.known_hosts,
                   host_key_policy=cfg.host_key_policy,
                   bundle=node_bundle(image, log=log) if image else None, log=log)

    def name(self, node_id: int) -> str:
        h = self.hosts[node_id]
        return f"n{node_id} ({h})"

    # ------------------------------------------------------------- SSH

    def _open(self, node_id: int) -> paramiko.SSHClient:
        h = self.hosts[node_id]
        where = self.name(node_id)
        c = paramiko.SSHClient()
        if self.known_hosts.exists():
            try:
                c.load_host_keys(str(self.known_hosts))
            except (OSError, paramiko.SSHException) as exc:
                raise HostError(f"{where}: cannot read known_hosts {self.known_hosts}: {exc}") from None
        elif self.strict:
            raise HostError(f"{where}: known_hosts {self.known_hosts} does not exist, so no host "
                            f"key can be checked. Add the hosts' keys to it (ssh-keyscan "
                            f"{h.address} >> {self.known_hosts}, after checking the "
                            f"fingerprints), name another file with known_hosts, or set "
                            f"host_key_policy: accept-new")
        c.set_missing_host_key_policy(self.policy)
        pkey = None
        if h.key is not None:
            try:
                pkey = paramiko.PKey.from_path(h.key)
            except paramiko.PasswordRequiredException:
                raise HostError(f"{where}: the key {h.key} is encrypted: load it into ssh-agent "
                                f"and leave out key:, or give an unencrypted key") from None
            except (OSError, paramiko.SSHException, ValueError) as exc:
                raise HostError(f"{where}: cannot read the key {h.key}: {exc}") from None
        try:
            c.connect(h.address, port=h.port, username=h.user, pkey=pkey,
                      allow_agent=h.key is None, look_for_keys=h.key is None,
                      timeout=self.timeout, banner_timeout=self.timeout,
                      auth_timeout=self.timeout)
        except HostError as exc:
            raise HostError(f"{where}: {exc}") from None
        except paramiko.BadHostKeyException as exc:
            raise HostError(
                f"{where}: the host key CHANGED: {self.known_hosts} has {exc.expected_key.get_name()} "
                f"{fingerprint(exc.expected_key)}, the host offers {exc.key.get_name()} "
                f"{fingerprint(exc.key)}. Someone may be in the middle; if the host was "
                f"reinstalled, remove its old key (ssh-keygen -R "
                f"{_known_name(h.address, h.port)} -f {self.known_hosts}) and add the new one") from None
        except paramiko.AuthenticationException as exc:
            which = f"the key {h.key}" if h.key else "the SSH agent's keys and ~/.ssh/id_*"
            raise HostError(
                f"{where}: authentication failed ({exc}): {which} refused for user {h.user}. "
                f"Authorise the public key on the host (ssh-copy-id -i KEY.pub -p {h.port} "
                f"{h.user}@{h.address}) or give this host the right key (key: in the hosts "
                f"file)") from None
        except (socket.timeout, TimeoutError) as exc:
            raise HostError(f"{where}: unreachable: no answer on port {h.port} within "
                            f"{self.timeout:.0f} s ({exc or 'timed out'}). Check the address, that "
                            f"the host is up and that no firewall drops port {h.port}") from None
        except (paramiko.ssh_exception.NoValidConnectionsError, OSError) as exc:
            causes = getattr(exc, "errors", None) or {None: exc}
            why = "; ".join(sorted({(e.strerror or str(e)) if isinstance(e, OSError) else str(e)
                                    for e in causes.values()}))
            raise HostError(f"{where}: unreachable: {why} (port {h.port}). Check the address "
                            f"and port, that the host is up and that sshd runs there") from None
        except paramiko.SSHException as exc:
            raise HostError(f"{where}: SSH failed: {exc}") from None
        return c

    def _sudo(self, node_id: int) -> str:
        return "" if self.hosts[node_id].user == "root" else "sudo -n "

    def run_raw(self, node_id: int, command: str, stdin=None, timeout: float = 120.0) -> tuple[int, str, str]:
        """Run a shell command line on the host; ``stdin``: bytes, or a file to stream."""
        try:
            chan = self._client(node_id).get_transport().open_session(timeout=self.timeout)
            chan.settimeout(timeout)
            chan.exec_command(command)
            if stdin is not None:
                if isinstance(stdin, bytes):
                    chan.sendall(stdin)
                else:
                    while True:
                        chunk = stdin.read(CHUNK)
                        if not chunk:
                            break
                        chan.sendall(chunk)
                chan.shutdown_write()
            out, err = [], []
            deadline = time.monotonic() + timeout
            # Read until the host closed its output (EOF), not only until the exit status
            # came: sshd may send the status before the last of the output, and on a busy
            # machine a command's whole output then went missing.
            while True:
                if chan.recv_ready():
                    out.append(chan.recv(CHUNK))
                elif chan.recv_stderr_ready():
                    err.append(chan.recv_stderr(CHUNK))
                elif (chan.eof_received or chan.closed) and chan.exit_status_ready():
                    break
                elif time.monotonic() > deadline:
                    chan.close()
                    raise BackendError(f"{self.name(node_id)}: ssh {command[:200]}: no end "
                                       f"after {timeout:g} s")
                else:
                    chan.status_event.wait(0.05)
            while chan.recv_ready():
                out.append(chan.recv(CHUNK))
            while chan.recv_stderr_ready():
                err.append(chan.recv_stderr(CHUNK))
            rc = chan.recv_exit_status()
            chan.close()
        except HostError:
            raise
        except (paramiko.SSHException, OSError) as exc:
            raise BackendError(f"{self.name(node_id)}: ssh {command[:200]}: {exc}") from None
        return rc, b"".join(out).decode(errors="replace"), b"".join(err).decode(errors="replace")

    def agent(self, node_id: int, *args: str, stdin=None, timeout: float = 120.0) -> dict:
        """Run a host agent command as root; its JSON answer."""
        cmd = f"{self._sudo(node_id)}python3 -B -c {shlex.quote(AGENT)} {shlex.join(args)}"
        rc, out, err = self.run_raw(node_id, cmd, stdin=stdin, timeout=timeout)
        if rc != 0:
            raise BackendError(f"{self.name(node_id)}: host agent {' '.join(args)} exited {rc}: "
                               f"{(err or out).strip()[-1500:]}")
        try:
            return json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise BackendError(f"{self.name(node_id)}: host agent {' '.join(args)} answered "
                               f"{out.strip()[-500:]!r}") from None

    def exec(self, node_id: int, cmd: list[str], check: bool = True) -> tuple[int, str]:
        """A command in the node's chroot, as root (what ``docker exec`` is to a container)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in host_agent.NODE_ENV.items())
        line = (f"{self._sudo(node_id)}chroot {host_agent.ROOT} /usr/bin/env -i {env} "
                f"{shlex.join(cmd)}")
        rc, out, err = self.run_raw(node_id, line, timeout=60)
        if check and rc != 0:
            raise BackendError(f"{self.name(node_id)}: {shlex.join(cmd)} exited {rc}: "
                               f"{(err or out).strip()[:500]}")
        return rc, out + err

    def _in_root(self, path: str) -> str:
        return host_agent.ROOT + "/" + path.lstrip("/")

    def put_file(self, node_id: int, path: str, data: bytes) -> None:
        target = shlex.quote(self._in_root(path))
        rc, out, err = self.run_raw(node_id, f"{self._sudo(node_id)}sh -c 'cat > {target}'",
                                    stdin=data)
        if rc != 0:
            raise BackendError(f"{self.name(node_id)}: writing {path}: {(err or out).strip()}")

    def get_file(self, node_id: int, path: str) -> bytes:
        target = self._in_root(path)
        cmd = f"{self._sudo(node_id)}sh -c {shlex.quote(f'test -f {shlex.quote(target)} && base64 -w0 {shlex.quote(target)}')}"
        rc, out, err = self.run_raw(node_id, cmd)
        if rc != 0:
            raise FileNotFoundError(f"{self.name(node_id)}:{path}")
        return base64.b64decode(out)

    # ------------------------------------------------------------- set-up

    def _check(self, node_id: int) -> None:
        where = self.name(node_id)
        h = self.hosts[node_id]
        self._client(node_id)
        if h.user != "root":
            rc, out, err = self.run_raw(node_id, "sudo -n true")
            if rc != 0:
                why = (err or out).strip().splitlines()[-1] if (err or out).strip() else f"exit {rc}"
                raise HostError(f"{where}: user {h.user} is not root and has no passwordless "
                                f"sudo ({why}). chaoskraft needs root there (iptables, mounts, "
                                f"its directory): log in as root, or allow {h.user} "
                                f"`NOPASSWD: ALL` in /etc/sudoers.d/")
        rc, out, err = self.run_raw(node_id, "uname -m; PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin; "
                                             "for c in tar mount umount chroot; do "
                                             "command -v $c >/dev/null || echo missing:$c; done")
        if rc != 0 or not out.split():
            raise HostError(f"{where}: `uname -m` and the tools check answered nothing (exit "
                            f"{rc}): {(err or out).strip()[-300:] or 'no output'}")
        machine, *missing = out.split()
        if machine != platform.machine():
            raise HostError(f"{where}: the host is {machine}; the node bundle is built here for "
                            f"{platform.machine()}. Use hosts of this machine's architecture")
        if missing:
            raise HostError(f"{where}: the host lacks {', '.join(x.split(':')[1] for x in missing)}"
                            f" (Debian's tar, mount and coreutils packages provide them)")
        rc, out, err = self.run_raw(
            node_id, "command -v python3 && python3 -c "
                     "'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
        lines = out.split()
        if rc != 0 or len(lines) < 2:
            raise HostError(f"{where}: no working python3 on the host ({(err or out).strip() or 'not found'}). "
                            f"Install Debian's python3 package (apt-get install python3): "
                            f"chaoskraft's host agent runs on it")
        try:
            version = tuple(int(x) for x in lines[-1].split("."))
        except ValueError:
            raise HostError(f"{where}: {lines[0]} printed {lines[-1]!r} as its version") from None
        if version < MIN_PYTHON:
            raise HostError(f"{where}: {lines[0]} is Python {lines[-1]}; chaoskraft's host agent "
                            f"needs {'.'.join(map(str, MIN_PYTHON))} or newer. Install a newer "
                            f"python3 (Debian 10 or later has one)")

    def _parallel(self, fn, ids=None) -> dict[int, object]:
        """Run ``fn(node_id)`` on every host at once; every host's error is reported."""
        ids = list(ids or self.hosts)
        results, errors = {}, []
        with ThreadPoolExecutor(max_workers=len(ids)) as pool:
            futures = {i: pool.submit(fn, i) for i in ids}
            for i, f in futures.items():
                try:
                    results[i] = f.result()
                except BackendError as exc:
                    errors.append(str(exc))
        if errors:
            raise HostError("\n".join(errors))
        return results

    def check(self) -> None:
        """Every host reachable, root, with a usable python3; all problems at once."""
        self._parallel(self._check)

    def bundle_id(self) -> str:
        return self.bundle.stem

    def _install(self, node_id: int) -> None:
        have = self.agent(node_id, "status").get("bundle")
        if have == self.bundle_id():
            self.log(f"{self.name(node_id)}: node bundle {have} already installed")
            return
        size = self.bundle.stat().st_size
        self.log(f"{self.name(node_id)}: installing node bundle {self.bundle_id()} "
                 f"({size / 1e6:.0f} MB) into {host_agent.ROOT}")
        with open(self.bundle, "rb") as f:
            self.agent(node_id, "install", self.bundle_id(), stdin=f, timeout=600)

    def _configure(self, node_id: int) -> None:
        self.agent(node_id, "prepare")
        n = self.node(node_id)
        voters = {i: self.hosts[i].address for i in range(1, self.controllers + 1)}
        rng = random.Random(f"{self.seed}-directory-ids")
        dir_ids = {i: new_directory_id(rng) for i in sorted(self.hosts)}
        initial = ",".join(f"{i}@{voters[i]}:{PORT}:{dir_ids[i]}" for i in sorted(voters))
        files = {
            "server.properties": node_properties(
                node_id, voters, n.roles,
                {**self.overrides, "advertised.listeners": f"PLAINTEXT://{n.address}:{KAFKA_PORT}"},
                self.bugs).encode(),
            "format.json": json.dumps({"cluster_id": f"chaoskraft-{self.run_id}",
                                       "directory_id": dir_ids[node_id], "log_dir": DATA_DIR,
                                       "initial_controllers": initial}).encode(),
        }
        if self.faketime:
            files["faketime"] = b"+0.000"
        if self.faultfs:
            files["faultfs"] = b""
        for name, data in files.items():
            self.put_file(node_id, f"/etc/chaoskraft/{name}", data)
        self.agent(node_id, "start")

    def up(self) -> list[NodeInfo]:
        if self.bundle is None:
            raise BackendError("no node bundle to install")
        self.log("hosts: " + ", ".join(f"n{i}={h}" + (" (spare)" if i in self.spares else "")
                                       for i, h in self.hosts.items())
                 + f"; host keys checked against {self.known_hosts} "
                 + ("strictly" if self.strict else "(accept-new)"))
        self.check()
        self._parallel(self._install)
        self._parallel(self._configure, [n.node_id for n in self.nodes])
        self.log("nodes started: " + ", ".join(f"n{n.node_id}={n.address}({'/'.join(n.roles)})"
                                               for n in self.nodes)
                 + ("; spare hosts ready: " + ", ".join(f"{self.hosts[i]}" for i in self.spares)
                    if self.spares else ""))
        return self.nodes

    def add_node(self) -> NodeInfo:
        """A new machine mid-run: the next spare host (checked and given the bundle by
        ``up``) configured as a broker under its node id, formatted with a directory id of
        its own, and started; it registers with the controllers as a new broker.
        :class:`~harness.backends.NoMachine` when no spare host is left."""
        if not self.spares:
            raise NoMachine("no spare host left: name one under 'spare_hosts' in the hosts "
                            "file or the campaign")
        i = self.spares.pop(0)
        info = NodeInfo(i, f"n{i}", self.hosts[i].address, ("broker",))
        self.nodes.append(info)
        self._configure(i)
        self.log(f"spare host added: n{i}={self.hosts[i]} (broker)")
        return info

    def down(self) -> None:
        """Stop the nodes, remove the fault rules and mounts; the install stays for the next
        run."""
        try:
            self._parallel(lambda i: self.agent(i, "stop"))
        except BackendError as exc:  # teardown goes on; what is left is said
            self.log(f"teardown could not stop every host (`chaoskraft hosts clean` removes "
                     f"what is left):\n{exc}")
        finally:
            self.close()

    def clean(self) -> dict[int, dict]:
        """Remove everything chaoskraft put on the hosts."""
        try:
            return self._parallel(lambda i: self.agent(i, "clean"))
        finally:
            self.close()

    def status(self) -> dict[int, dict]:
        return self._parallel(lambda i: self.agent(i, "status"))

    def collect_logs(self, dest: Path) -> None:
        super().collect_logs(dest)
        for n in self.nodes:  # the data directory too: the partitions' logs, the metadata log
            d = dest / f"n{n.node_id}"
            d.mkdir(parents=True, exist_ok=True)
            src = shlex.quote(self._in_root("/var/lib/chaoskraft"))
            cmd = f"{self._sudo(n.node_id)}sh -c {shlex.quote(f'tar -C {src} -czf - data | base64 -w0')}"
            try:
                rc, out, err = self.run_raw(n.node_id, cmd, timeout=300)
                if rc == 0:
                    (d / "data.tar.gz").write_bytes(base64.b64decode(out))
            except BackendError:
                pass
