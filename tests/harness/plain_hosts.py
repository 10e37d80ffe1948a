"""Plain Debian hosts for the SSH-hosts tests: containers with only sshd and python3.

They stand for machines chaoskraft did not make, so they are started here with the
Docker SDK, not by chaoskraft's Docker backend, and carry no chaoskraft label (only
``chaoskraft-test-hosts=<id>``); ``PlainHosts.remove`` takes them and their network
away. Each gets the powers root has on a VM: iptables, mounts, FUSE. Each makes its
own sshd host key when it starts; the tests read it through the Docker API (the
trusted channel a VM's console would be) into a known_hosts file.
"""
from __future__ import annotations

import hashlib
import io
import tarfile
import time
import uuid
from pathlib import Path

import docker
import paramiko

from harness.backends.docker_backend import exec_output
from harness.backends.ssh_backend import host_keys
from harness.images import SUITE, _hash, build_debian, debian_mirror

# sudo for the test of a user reaching a host through it; the test of a host without sudo
# moves the binary away (one image for every test host: each build is about 90 s)
PACKAGES = ("openssh-server", "python3", "sudo")
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"
BOOT = (f"rm -f /etc/ssh/ssh_host_*; ssh-keygen -q -t ed25519 -N '' -f {HOST_KEY}"
        " && mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e -o PermitRootLogin=prohibit-password"
        f" -o PasswordAuthentication=no -o HostKey={HOST_KEY}")
# What a host holds: every path on its root file system but the kernel's and the
# run-time ones (and the login records sshd keeps).
FILE_LIST = ("find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp "
             "-o -path /var/log \\) -prune -o -print | sort")


def testhost_image(client, packages=PACKAGES) -> str:
    tag = "chaoskraft-testhost:" + _hash(SUITE.encode(), " ".join(packages).encode(),
                                         debian_mirror().encode())
    return build_debian(client, tag, packages, what="test host image")


def _tar(name: str, data: bytes, mode: int = 0o600) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), mode
        tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _listening(address: str, port: int = 22) -> bool:
    import socket
    try:
        socket.create_connection((address, port), timeout=1).close()
        return True
    except OSError:
        return False


# What root may do on a VM that a container's root may not by default (this engine refuses
# privileged containers): iptables, mounts, FUSE.
ROOT_POWERS = dict(cap_add=["NET_ADMIN", "SYS_ADMIN"], devices=["/dev/fuse:/dev/fuse:rwm"],
                   security_opt=["apparmor:unconfined"])


class PlainHosts:
    def __init__(self, n: int, workdir: Path, client=None, packages=PACKAGES) -> None:
        self.packages = packages
        self.client = client or docker.from_env()
        self.id = uuid.uuid4().hex[:8]
        self.workdir = workdir
        self.label = {"chaoskraft-test-hosts": self.id}
        self.containers = []
        self.network = None
        self.n = n
        self.key = paramiko.Ed25519Key.generate() if hasattr(paramiko.Ed25519Key, "generate") \
            else None
        if self.key is None:
            self.key = paramiko.ECDSAKey.generate(bits=256)
        self.key_file = workdir / "id_test"
        self.key.write_private_key_file(str(self.key_file))
        self.public = f"{self.key.get_name()} {self.key.get_base64()} test\n".encode()

    def start(self) -> "PlainHosts":
        image = testhost_image(self.client, self.packages)
        self.network = self.client.networks.create(f"plainhosts-{self.id}", driver="bridge",
                                                   labels=self.label)
        for i in range(1, self.n + 1):
            c = self.client.containers.create(
                image, ["sh", "-c", BOOT], name=f"plainhost-{self.id}-{i}", hostname=f"host{i}",
                detach=True, labels=self.label, **ROOT_POWERS, network=self.network.name)
            c.put_archive("/root", _tar(".ssh/authorized_keys", self.public))
            self.containers.append(c)
        for c in self.containers:
            c.start()
        for c in self.containers:
            c.reload()
        return self

    @property
    def addresses(self) -> list[str]:
        return [c.attrs["NetworkSettings"]["Networks"][self.network.name]["IPAddress"]
                for c in self.containers]

    def sh(self, i: int, cmd: str) -> tuple[int, str]:
        c = self.containers[i]
        rc, out = exec_output(c.client.api, c.id, ["sh", "-c", cmd], {})
        return rc, out.decode(errors="replace")

    def known_hosts(self, path: Path, timeout_s: float = 60) -> Path:
        """Each host's key, read through the Docker API, once its sshd listens."""
        hosts = [(f"host{i + 1}", addr) for i, addr in enumerate(self.addresses)]
        read = lambda name: self.sh(int(name[4:]) - 1, f"cat {HOST_KEY}.pub")  # noqa: E731
        path.write_text(host_keys(hosts, read, timeout_s, _listening))
        return path

    def file_list(self, i: int) -> list[str]:
        rc, out = self.sh(i, FILE_LIST)
        assert rc == 0, out
        return out.splitlines()

    def hosts_file(self, path: Path, known_hosts: Path, nodes: int | None = None,
                   **extra) -> Path:
        """A hosts file of the first ``nodes`` hosts (all by default); with fewer, the others
        are its ``spare_hosts``."""
        import yaml
        entries = [{"address": a, "key": str(self.key_file)} for a in self.addresses]
        nodes = len(entries) if nodes is None else nodes
        spares = {"spare_hosts": entries[nodes:]} if entries[nodes:] else {}
        path.write_text(yaml.safe_dump({
            "hosts": entries[:nodes], **spares, "known_hosts": str(known_hosts), **extra}))
        return path

    def remove(self) -> None:
        for c in self.client.containers.list(all=True, filters={"label": f"chaoskraft-test-hosts={self.id}"}):
            c.remove(force=True, v=True)
        for net in self.client.networks.list(filters={"label": f"chaoskraft-test-hosts={self.id}"}):
            for _ in range(20):
                try:
                    net.remove()
                    break
                except docker.errors.APIError:
                    time.sleep(0.2)


def digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()
