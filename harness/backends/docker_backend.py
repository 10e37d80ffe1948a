"""The Docker backend: a private network, one container and one volume per node.

Every container, network and volume carries the labels ``chaoskraft=1`` and
``chaoskraft.run=<run id>``; ``cleanup()`` removes everything labelled
``chaoskraft=1``. Containers get NET_ADMIN (iptables partitions inside) and
run the node image's supervisor as PID 1. A node's data directory is its
volume, so ``docker kill`` then ``docker start`` brings the node back on the
same data.

Node ids 1..controllers have the controller and broker roles (combined
mode: Raft voters that also host partitions); the others are brokers only
(Raft observers). Voters address each other by container name on the
cluster network (Docker's DNS); the harness reaches every node at its
container IP: the internal listener on port 9093, the Kafka listener on
port 9092 (advertised to clients as the container IP).
"""
from __future__ import annotations

import io
import json
import random
import struct
import tarfile
import time
from pathlib import Path

import docker
from docker.errors import APIError, NotFound

from node_image.storage import new_directory_id

from . import DATA_DIR, JOURNAL, BackendError, NodeControl, NodeInfo

LABEL = "chaoskraft"
PORT = 9093
KAFKA_PORT = 9092


def exec_output(api: docker.APIClient, container: str, cmd: list[str],
                environment: dict[str, str]) -> tuple[int, bytes]:
    """A command's exit status and its output (stdout and stderr as written), as
    ``exec_run`` would give them. The exec is an HTTP upgrade: frames the command wrote
    while the answer's headers were read are already in the response's buffered reader.
    docker-py reads the stream from the socket beneath it, so those frames are lost and
    the output comes back empty or without its start (docker/docker-py#3332; seen here
    when a busy machine delayed the read: 26 of a file's 8,000 bytes). The frames are
    read through that buffered reader instead."""
    exec_id = api.exec_create(container, cmd, environment=environment)["Id"]
    response = api._post_json(api._url("/exec/{0}/start", exec_id), stream=True,
                              headers={"Connection": "Upgrade", "Upgrade": "tcp"},
                              data={"Tty": False, "Detach": False})
    out = bytearray()
    try:
        api._raise_for_status(response)
        reader = response.raw._fp.fp  # what http.client read the headers through
        while len(header := reader.read(8)) == 8:
            _, length = struct.unpack(">BxxxL", header)
            out += reader.read(length)
    finally:
        response.close()
    return api.exec_inspect(exec_id)["ExitCode"], bytes(out)


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o600 if "ssh" in name else 0o644
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def node_properties(node_id: int, voters: dict[int, str], roles: tuple[str, ...],
                    overrides: dict[str, str], bugs: list[str]) -> str:
    props = {
        "node.id": str(node_id),
        "process.roles": ",".join(roles),
        "controller.quorum.voters": ",".join(f"{v}@{host}:{PORT}" for v, host in sorted(voters.items())),
        "listeners": f"CONTROLLER://0.0.0.0:{PORT}",
        "log.dirs": DATA_DIR,
        "chaoskraft.journal.path": JOURNAL,  # overrides may turn it off with an empty path
    }
    if "broker" in roles:
        props["listeners"] += f",PLAINTEXT://0.0.0.0:{KAFKA_PORT}"
        props["advertised.listeners"] = f"PLAINTEXT://:{KAFKA_PORT}"  # the container's own IP
    props.update({k: str(v) for k, v in overrides.items()})
    if bugs:
        props["chaoskraft.bugs"] = ",".join(bugs)
    return "".join(f"{k}={v}\n" for k, v in props.items())


class DockerCluster(NodeControl):
    def __init__(self, run_id: str, image: str, nodes: int = 5, controllers: int = 3,
                 overrides: dict[str, str] | None = None, bugs: list[str] | None = None,
                 seed: int = 0, authorized_key: str | None = None, log=print,
                 client: docker.DockerClient | None = None, faketime: bool = False,
                 faultfs: bool = False,
                 node_overrides: dict[int, dict[str, str]] | None = None) -> None:
        """``overrides``: node properties for every node; ``node_overrides``: for one node id
        (over those)."""
        if not 1 <= controllers <= nodes:
            raise ValueError(f"controllers must be between 1 and nodes ({nodes}), got {controllers}")
        self.client = client or docker.from_env()
        self.run_id = run_id
        self.image = image
        self.n = nodes
        self.controllers = controllers
        self.overrides = overrides or {}
        self.node_overrides = node_overrides or {}
        self.bugs = bugs or []
        self.seed = seed
        self.authorized_key = authorized_key
        self.faketime = faketime  # the node runs under libfaketime (the clock nemesis)
        self.faultfs = faultfs  # the data directory is a faultfs mount (the disk nemeses)
        self.log = log
        self.labels = {LABEL: "1", f"{LABEL}.run": run_id}
        self.network_name = f"chaoskraft-{run_id}"
        self.nodes: list[NodeInfo] = []
        self._containers: dict[int, object] = {}
        self._voters: dict[int, str] = {}  # controller.quorum.voters, once ``up``
        self._initial = ""  # format's initial controllers, once ``up``

    def name(self, node_id: int) -> str:
        return f"chaoskraft-{self.run_id}-n{node_id}"

    # ------------------------------------------------------------- lifecycle

    def up(self) -> list[NodeInfo]:
        rng = random.Random(f"{self.seed}-directory-ids")
        dir_ids = {i: new_directory_id(rng) for i in range(1, self.n + 1)}
        self._voters = {i: self.name(i) for i in range(1, self.controllers + 1)}
        self._initial = ",".join(f"{i}@{self._voters[i]}:{PORT}:{dir_ids[i]}"
                                 for i in sorted(self._voters))
        network = self.client.networks.create(self.network_name, driver="bridge",
                                              labels=self.labels, check_duplicate=True)
        self.log(f"network {network.name} created")
        for i in range(1, self.n + 1):
            roles = ("controller", "broker") if i in self._voters else ("broker",)
            self._create(i, roles, dir_ids[i])
        for c in self._containers.values():
            c.start()
        for n in list(self.nodes):
            self._addressed(n)
        self.log("containers started: " + ", ".join(f"n{n.node_id}={n.address}"
                                                     f"({'/'.join(n.roles)})" for n in self.nodes))
        return self.nodes

    def add_node(self) -> NodeInfo:
        """A new machine mid-run: a broker under the next unused node id, in a container of
        the same image on the cluster's network (with its own volume, labelled as the
        others), formatted with a directory id of its own and started; it registers with
        the controllers as a new broker. Only for a cluster this object brought ``up``."""
        if not self._voters:
            raise BackendError(f"cluster {self.run_id}: no controller.quorum.voters found in "
                               f"its nodes' server.properties: cannot configure a new node")
        i = max(n.node_id for n in self.nodes) + 1
        self._create(i, ("broker",), new_directory_id(random.Random(f"{self.seed}-dir-{i}")))
        self._containers[i].start()
        info = self._addressed(self.nodes[-1])
        self.log(f"container added: n{i}={info.address} (broker)")
        return info

    def _create(self, i: int, roles: tuple[str, ...], dir_id: str) -> None:
        volume = self.client.volumes.create(name=f"{self.name(i)}-data", labels=self.labels)
        # faultfs mounts FUSE in the container: the device, and the capability to mount
        fuse = dict(devices=["/dev/fuse:/dev/fuse:rwm"], cap_add=["NET_ADMIN", "SYS_ADMIN"],
                    security_opt=["apparmor:unconfined"]) if self.faultfs else \
            dict(cap_add=["NET_ADMIN"])
        c = self.client.containers.create(
            self.image, name=self.name(i), hostname=f"n{i}", detach=True,
            labels={**self.labels, f"{LABEL}.node": str(i)}, **fuse,
            network=self.network_name, volumes={volume.name: {"bind": "/var/lib/chaoskraft",
                                                              "mode": "rw"}})
        files = {
            "server.properties": node_properties(
                i, self._voters, roles, {**self.overrides, **self.node_overrides.get(i, {})},
                self.bugs).encode(),
            "format.json": json.dumps({"cluster_id": f"chaoskraft-{self.run_id}",
                                       "directory_id": dir_id, "log_dir": DATA_DIR,
                                       "initial_controllers": self._initial}).encode(),
        }
        if self.faketime:
            files["faketime"] = b"+0.000"  # the supervisor preloads libfaketime when present
        if self.faultfs:
            files["faultfs"] = b""  # the supervisor mounts faultfs on the data directory
        c.put_archive("/etc/chaoskraft", _tar(files))
        if self.authorized_key:
            c.put_archive("/root/.ssh", _tar({"authorized_keys": self.authorized_key.encode()}))
        self._containers[i] = c
        self.nodes.append(NodeInfo(i, self.name(i), "", roles))

    def _addressed(self, n: NodeInfo) -> NodeInfo:
        """``n`` with its container's address on the cluster network, in ``nodes``."""
        c = self._containers[n.node_id]
        c.reload()
        ip = c.attrs["NetworkSettings"]["Networks"][self.network_name]["IPAddress"]
        info = NodeInfo(n.node_id, n.name, ip, n.roles, voter_host=n.name)
        self.nodes[[x.node_id for x in self.nodes].index(n.node_id)] = info
        return info

    @classmethod
    def attach(cls, run_id: str, client=None, log=print) -> "DockerCluster":
        """The cluster of an existing run (for ``cluster status`` and ``down``)."""
        client = client or docker.from_env()
        containers = client.containers.list(all=True, filters={"label": f"{LABEL}.run={run_id}"},
                                            ignore_removed=True)
        if not containers:
            raise BackendError(f"no containers for run {run_id}")
        self = cls(run_id, containers[0].image.tags[0] if containers[0].image.tags else "",
                   nodes=len(containers), controllers=1, client=client, log=log)
        for c in sorted(containers, key=lambda c: int(c.labels.get(f"{LABEL}.node", 0))):
            i = int(c.labels.get(f"{LABEL}.node", 0))
            self._containers[i] = c
            props = _read_props(c)
            roles = tuple(props.get("process.roles", "controller").split(","))
            nets = c.attrs["NetworkSettings"]["Networks"]
            ip = nets.get(self.network_name, {}).get("IPAddress", "")
            self.nodes.append(NodeInfo(i, c.name, ip, roles, voter_host=c.name))
        self.controllers = sum(1 for n in self.nodes if n.is_controller)
        self._learn_settings()
        return self

    def _learn_settings(self) -> None:
        """What ``add_node`` needs of an attached cluster, read from its containers: the
        voters, the initial controllers, the cluster's settings (a broker-only node's
        properties, else the first node's), its planted bugs and clock and disk modes."""
        brokers = [n.node_id for n in self.nodes if n.roles == ("broker",)]
        c = self._containers[(brokers or [n.node_id for n in self.nodes])[0]]
        props = _read_props(c)
        for voter in filter(None, props.get("controller.quorum.voters", "").split(",")):
            vid, _, endpoint = voter.partition("@")
            self._voters[int(vid)] = endpoint.rsplit(":", 1)[0]
        fmt = _read_file(c, "/etc/chaoskraft/format.json")
        self._initial = json.loads(fmt).get("initial_controllers", "") if fmt else ""
        self.overrides = {k: v for k, v in props.items() if k not in _PER_NODE}
        self.bugs = [b for b in props.get("chaoskraft.bugs", "").split(",") if b]
        self.faketime = _read_file(c, "/etc/chaoskraft/faketime") is not None
        self.faultfs = _read_file(c, "/etc/chaoskraft/faultfs") is not None
        self.seed = random.SystemRandom().randrange(1 << 31)  # the new node's directory id

    def down(self) -> None:
        """Remove this run's containers, volumes and network. Safe to call twice."""
        remove_labelled(self.client, f"{LABEL}.run={self.run_id}", self.log)

    def container(self, node_id: int):
        return self._containers[node_id]

    def is_running(self, node_id: int) -> bool:
        c = self._containers[node_id]
        try:
            c.reload()
        except NotFound:
            return False
        return c.status == "running"

    def docker_kill(self, node_id: int) -> None:
        self._containers[node_id].kill()

    def docker_start(self, node_id: int) -> None:
        c = self._containers[node_id]
        c.start()
        c.reload()

    # ---------------------------------------------------------- node access

    def exec(self, node_id: int, cmd: list[str], check: bool = True) -> tuple[int, str]:
        c = self._containers[node_id]
        try:
            rc, out = exec_output(self.client.api, c.id, cmd, {"PYTHONPATH": "/opt/chaoskraft"})
        except (APIError, NotFound) as exc:
            raise BackendError(f"n{node_id}: {' '.join(cmd)}: {exc}") from None
        text = out.decode(errors="replace") if out else ""
        if check and rc != 0:
            raise BackendError(f"n{node_id}: {' '.join(cmd)} exited {rc}: {text.strip()[:500]}")
        return rc, text

    def put_file(self, node_id: int, path: str, data: bytes) -> None:
        p = Path(path)
        self._containers[node_id].put_archive(str(p.parent), _tar({p.name: data}))

    def get_file(self, node_id: int, path: str) -> bytes:
        try:
            stream, _ = self._containers[node_id].get_archive(path)
        except NotFound:
            raise FileNotFoundError(f"n{node_id}:{path}") from None
        buf = io.BytesIO(b"".join(stream))
        with tarfile.open(fileobj=buf) as tf:
            member = tf.getmembers()[0]
            f = tf.extractfile(member)
            return f.read() if f else b""


    def collect_logs(self, dest: Path) -> None:
        """The node logs, and each node's data directory (partition logs, the metadata log) as
        ``data.tar.gz``: what a finding needs to be understood after the containers are gone."""
        import gzip
        super().collect_logs(dest)
        for n in self.nodes:
            d = dest / f"n{n.node_id}"
            d.mkdir(parents=True, exist_ok=True)
            try:
                stream, _ = self._containers[n.node_id].get_archive(DATA_DIR)
                with gzip.open(d / "data.tar.gz", "wb", compresslevel=1) as f:
                    for chunk in stream:
                        f.write(chunk)
            except NotFound:  # never formatted: the node refused to start
                (d / "data.tar.gz").unlink(missing_ok=True)
                self.log(f"n{n.node_id}: no data directory {DATA_DIR} to keep")
            except APIError as exc:
                (d / "data.tar.gz").unlink(missing_ok=True)
                self.log(f"n{n.node_id}: data directory not fetched: {exc}")


def _read_file(container, path: str) -> str | None:
    try:
        stream, _ = container.get_archive(path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tf:
            return tf.extractfile(tf.getmembers()[0]).read().decode()
    except (NotFound, APIError):
        return None


def _read_props(container) -> dict[str, str]:
    text = _read_file(container, "/etc/chaoskraft/server.properties") or ""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


# the properties ``node_properties`` writes for each node itself; the rest of a node's file
# is the cluster's own settings (``cluster up --set``), which a node added later takes too
_PER_NODE = {"node.id", "process.roles", "controller.quorum.voters", "listeners", "log.dirs",
             "advertised.listeners", "chaoskraft.journal.path", "chaoskraft.bugs"}


def remove_labelled(client, label: str, log=print) -> dict[str, int]:
    """Remove every container, volume and network with ``label`` (``k=v`` or ``k``)."""
    counts = {"containers": 0, "volumes": 0, "networks": 0}
    # ignore_removed: another run (or a cleanup beside this one) may remove a container
    # between the listing and its inspection
    for c in client.containers.list(all=True, filters={"label": label}, ignore_removed=True):
        try:
            c.remove(force=True, v=True)
            counts["containers"] += 1
        except NotFound:
            pass
    for attempt in range(20):
        try:
            for n in client.networks.list(filters={"label": label}):
                n.remove()
                counts["networks"] += 1
            break
        except APIError:
            time.sleep(0.2)  # a container's endpoint is still being released
        except NotFound:
            pass
    for v in client.volumes.list(filters={"label": label}):
        try:
            v.remove(force=True)
            counts["volumes"] += 1
        except (NotFound, APIError):
            pass
    if any(counts.values()):
        log(f"removed {counts['containers']} containers, {counts['networks']} networks, "
            f"{counts['volumes']} volumes labelled {label}")
    return counts


def running_runs(client=None) -> dict[str, list[str]]:
    client = client or docker.from_env()
    runs: dict[str, list[str]] = {}
    for c in client.containers.list(all=True, filters={"label": f"{LABEL}=1"},
                                    ignore_removed=True):
        runs.setdefault(c.labels.get(f"{LABEL}.run", "?"), []).append(c.name)
    return runs
