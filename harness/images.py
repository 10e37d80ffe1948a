"""Images without a registry: a Debian base made with mmdebstrap, then the node image.

``chaoskraft image build``:

1. The base image (``chaoskraft-base:<hash>``): ``mmdebstrap`` builds a
   Debian bookworm root file system from the mirror this machine's apt
   already uses (read at run time from /etc/apt/sources.list.d/*.sources or
   /etc/apt/sources.list; never written anywhere), with Debian's python3,
   python3-crc32c, python3-msgpack, openssh-server, iptables, iproute2,
   procps, faketime, fuse3 and python3-pyfuse3 (for faultfs); ``docker import``
   turns the tarball into an image.
2. The node image (``chaoskraft-node:<hash>``): the top-level Dockerfile,
   FROM the base, adds ``node_image/``, the supervisor, the pure-Python
   ``kafka`` package of the pinned kafka-python (the node's Kafka protocol
   layer) and the pinned cramjam and zstandard wheels (its record codecs),
   copied from this project's environment into ``vendor/``.

Each tag is a hash of its inputs (package list, suite and mirror; the
Dockerfile and every file of node_image/ plus the base tag), so an image
already present is reused and a second build with nothing changed takes
seconds. Both images carry the label ``chaoskraft=1``.
"""
from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parent.parent
SUITE = "bookworm"
PACKAGES = ("python3", "python3-crc32c", "python3-msgpack", "openssh-server", "iptables",
            "iproute2", "procps", "faketime", "netbase", "fuse3", "python3-pyfuse3")
LABELS = {"chaoskraft": "1"}


class ImageError(RuntimeError):
    """The images cannot be built; the message says what is missing."""


def debian_mirror() -> str:
    """The Debian mirror URI from this machine's apt configuration."""
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        for stanza in Path(path).read_text().split("\n\n"):
            fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
            suites = fields.get("Suites", "").split()
            if fields.get("URIs") and any(s in (SUITE, f"{SUITE}-updates") for s in suites) \
                    and "security" not in fields["URIs"]:
                return fields["URIs"].split()[0]
    for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and "security" not in parts[1]:
                uri = next(p for p in parts[1:] if "://" in p)
                return uri
    raise ImageError("no Debian mirror found in /etc/apt/sources.list.d/*.sources or "
                     "/etc/apt/sources.list")


def _hash(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()[:16]


def base_tag(mirror: str) -> str:
    return "chaoskraft-base:" + _hash(SUITE.encode(), " ".join(PACKAGES).encode(), mirror.encode())


# (distribution, package, file suffixes) copied from this project's environment into the
# node image's vendor/: the node's Kafka protocol layer (pure Python) and its record codecs
# (native wheels built for CPython 3.11 on manylinux, which Debian bookworm's python3 runs).
VENDORED = (("kafka-python", "kafka", (".py", ".json")),
            ("cramjam", "cramjam", (".py", ".so")),
            ("zstandard", "zstandard", (".py", ".so")))


def vendored(dist: str, package: str) -> Path:
    """The installed ``package``, checked to be the version pyproject.toml pins for ``dist``."""
    import importlib.metadata
    import importlib.util
    pinned = re.search(rf'"{re.escape(dist)}==([^"]+)"', (ROOT / "pyproject.toml").read_text())
    installed = importlib.metadata.version(dist)
    if pinned is None or installed != pinned.group(1):
        raise ImageError(f"{dist} {installed} is installed but pyproject.toml pins "
                         f"{pinned.group(1) if pinned else 'nothing'}; run make setup")
    spec = importlib.util.find_spec(package)
    return Path(list(spec.submodule_search_locations)[0])


def node_context_files() -> list[tuple[Path, str]]:
    """(file, path in the build context) of everything the node image is built from."""
    files = [(ROOT / "Dockerfile", "Dockerfile")]
    files += [(p, str(p.relative_to(ROOT))) for p in sorted((ROOT / "node_image").rglob("*"))
              if p.suffix in (".py", ".json") and "__pycache__" not in p.parts]
    for dist, package, suffixes in VENDORED:
        where = vendored(dist, package)
        files += [(p, f"vendor/{package}/" + str(p.relative_to(where)))
                  for p in sorted(where.rglob("*"))
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix in suffixes]
    return files


def node_tag(base: str) -> str:
    parts = [base.encode()]
    for f, name in node_context_files():
        parts += [name.encode(), f.read_bytes()]
    return "chaoskraft-node:" + _hash(*parts)


def _exists(client, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def build_base(client, log=print) -> str:
    return build_debian(client, base_tag(debian_mirror()), PACKAGES, log, what="base image")


def build_debian(client, tag: str, packages, log=print, what: str = "image") -> str:
    """A Debian bookworm image ``tag`` with ``packages``, made by mmdebstrap from the mirror
    this machine's apt uses (reused when present)."""
    mirror = debian_mirror()
    if _exists(client, tag):
        log(f"{what} {tag} is up to date")
        return tag
    with _one_builder(tag):
        if _exists(client, tag):  # built meanwhile by another process
            return tag
        _mmdebstrap(client, tag, packages, mirror, log, what)
    return tag


def _mmdebstrap(client, tag: str, packages, mirror: str, log, what: str) -> None:
    if shutil.which("mmdebstrap") is None:
        raise ImageError("mmdebstrap is not installed (make setup installs it: apt-get install mmdebstrap)")
    log(f"building {what} {tag} with mmdebstrap from the apt mirror (about a minute)")
    with tempfile.TemporaryDirectory(prefix="chaoskraft-base-") as d:
        tar = Path(d) / "rootfs.tar"
        cmd = ["mmdebstrap", "--variant=minbase", "--mode=root", "--quiet",
               "--include=" + ",".join(packages),
               '--aptopt=Acquire::Check-Valid-Until "false"',
               "--dpkgopt=path-exclude=/usr/share/doc/*",
               "--dpkgopt=path-exclude=/usr/share/man/*",
               "--dpkgopt=path-exclude=/usr/share/locale/*",
               SUITE, str(tar), f"deb {mirror} {SUITE} main"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise ImageError(f"mmdebstrap failed ({p.returncode}):\n{p.stderr[-3000:]}")
        repo, version = tag.split(":")
        client.api.import_image_from_file(str(tar), repository=repo, tag=version,
                                          changes=["LABEL chaoskraft=1"])


def build_node(client, base: str, log=print) -> str:
    tag = node_tag(base)
    if _exists(client, tag):
        log(f"node image {tag} is up to date")
        return tag
    with _one_builder(tag):
        if not _exists(client, tag):  # else built meanwhile by another process
            _docker_build(client, tag, base, log)
    return tag


def _docker_build(client, tag: str, base: str, log) -> None:
    log(f"building node image {tag}")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for f, name in node_context_files():
            tf.add(str(f), arcname=name)
    buf.seek(0)
    try:
        client.images.build(fileobj=buf, custom_context=True, tag=tag, buildargs={"BASE": base},
                            labels=LABELS, rm=True, forcerm=True, pull=False)
    except docker.errors.BuildError as exc:
        lines = "".join(x.get("stream", "") for x in exc.build_log if isinstance(x, dict))
        raise ImageError(f"node image build failed: {exc}\n{lines[-3000:]}") from None


@contextlib.contextmanager
def _one_builder(name: str):
    """One process at a time builds a given image or bundle; the others wait for it and then
    reuse what it made (test workers side by side once built the same image three times, and
    two exports of a bundle into one temporary file would interleave)."""
    lock = Path(tempfile.gettempdir()) / ("chaoskraft-build-" + re.sub(r"[^\w.-]", "-", name)
                                          + ".lock")
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build_images(client=None, log=print) -> str:
    """Build (or reuse) both images; returns the node image tag."""
    client = client or docker.from_env()
    return build_node(client, build_base(client, log), log)


def bundle_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "chaoskraft" / "bundles"


def node_bundle(tag: str, client=None, log=print) -> Path:
    """The node image's file system as a tar (what the SSH backend unpacks on a host and runs
    with chroot): exported once per image tag into ~/.cache/chaoskraft/bundles and reused."""
    client = client or docker.from_env()
    path = bundle_dir() / (tag.replace(":", "-") + ".tar")
    if path.exists():
        return path
    with _one_builder(path.name):
        if not path.exists():  # else exported meanwhile by another process
            _export_bundle(client, tag, path, log)
    return path


def _export_bundle(client, tag: str, path: Path, log) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    log(f"exporting the node image {tag} as a bundle for hosts: {path}")
    container = client.containers.create(tag, command=["true"], labels=LABELS)
    tmp = path.with_suffix(".tmp")
    try:
        with open(tmp, "wb") as f:
            for chunk in container.export():
                f.write(chunk)
        os.replace(tmp, path)
    finally:
        container.remove(force=True)
        tmp.unlink(missing_ok=True)
    # stale bundles of older images go
    for old in path.parent.glob("chaoskraft-node-*.tar"):
        if old != path:
            old.unlink(missing_ok=True)
