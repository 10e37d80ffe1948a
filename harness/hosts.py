"""Hosts a campaign runs on over SSH: the ``hosts`` field and ``--hosts FILE|h1,h2,...``.

A host is a string, ``[user@]address[:port]`` or an alias of the user's SSH
config (~/.ssh/config: its HostName, User, Port and IdentityFile are used),
or a mapping::

    hosts:
      - {address: 192.168.56.11, user: admin, key: ~/.ssh/lab_ed25519}
      - {address: 192.168.56.12, port: 2222}
      - lab-3                      # an alias of ~/.ssh/config
    spare_hosts:                      # machines a run may add as new nodes mid-run
      - {address: 192.168.56.14}      # (add-broker, decommission: a new broker)
    known_hosts: ~/.ssh/known_hosts   # the default; host keys checked strictly
    host_key_policy: strict           # or accept-new: trust and record a host's first key

A hosts file given to ``--hosts`` holds the same fields (or only the list). Spare hosts
are checked and given the node bundle with the others, and started only when a run adds a
node (``SshHosts.add_node``).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from .yaml_lines import key_lines, located

HOST_FIELDS = ("address", "port", "user", "key", "alias")
POLICIES = ("strict", "accept-new")
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


class HostsError(ValueError):
    """A host entry or hosts file is wrong; the message names where and which field."""


@dataclass(frozen=True)
class Host:
    address: str
    port: int = 22
    user: str = "root"
    key: str | None = None  # a private key file; None: the SSH agent and ~/.ssh/id_*
    label: str = ""  # how the user named it (alias or address)

    def __str__(self) -> str:
        port = f":{self.port}" if self.port != 22 else ""
        return f"{self.user}@{self.address}{port}"


_SPEC = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?P<address>\[[^\]]+\]|[^:@\s]+)(?::(?P<port>\d+))?$")


def _ssh_config() -> dict | None:
    import paramiko
    path = Path(os.path.expanduser("~/.ssh/config"))
    if not path.exists():
        return None
    return paramiko.SSHConfig.from_path(str(path))


def _from_alias(alias: str, where: str, config) -> Host | None:
    """The host an alias of ~/.ssh/config names, or None when it names none."""
    if config is None or alias not in config.get_hostnames():
        return None
    found = config.lookup(alias)
    keys = found.get("identityfile") or [None]
    try:
        port = int(found.get("port", 22))
    except ValueError:
        raise HostsError(f"{where}: ~/.ssh/config gives host {alias!r} the port "
                         f"{found.get('port')!r}, not a number") from None
    return Host(found.get("hostname", alias), port, found.get("user", "root"),
                os.path.expanduser(keys[0]) if keys[0] else None, alias)


def parse_host(entry, where: str, config=None) -> Host:
    """One entry of ``hosts``; ``where`` names it in errors (``FILE:LINE: hosts[2]``)."""
    if isinstance(entry, str):
        alias = _from_alias(entry, where, config)
        if alias is not None:
            return alias
        m = _SPEC.match(entry.strip())
        if not m:
            raise HostsError(f"{where}: {entry!r} is not [user@]address[:port] nor an alias "
                             f"of ~/.ssh/config")
        port = int(m["port"] or 22)
        if not 0 < port < 65536:
            raise HostsError(f"{where}: port {port} is out of range")
        return Host(m["address"].strip("[]"), port, m["user"] or "root", None, entry)
    if not isinstance(entry, dict):
        raise HostsError(f"{where}: a host is a string or a mapping of "
                         f"{', '.join(HOST_FIELDS)}, not {type(entry).__name__}")
    for k in entry:
        if k not in HOST_FIELDS:
            raise HostsError(f"{where}.{k}: unknown field (known: {', '.join(HOST_FIELDS)})")
    base = None
    if "alias" in entry:
        base = _from_alias(str(entry["alias"]), f"{where}.alias", config)
        if base is None:
            raise HostsError(f"{where}.alias: {entry['alias']!r} is not a Host of ~/.ssh/config")
    elif "address" not in entry:
        raise HostsError(f"{where}: a host needs 'address' (or 'alias')")
    address = entry.get("address", base.address if base else None)
    if not isinstance(address, str) or not address:
        raise HostsError(f"{where}.address: {address!r} is not a host name or address")
    port = entry.get("port", base.port if base else 22)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise HostsError(f"{where}.port: {port!r} is not a port number")
    user = entry.get("user", base.user if base else "root")
    if not isinstance(user, str) or not user:
        raise HostsError(f"{where}.user: {user!r} is not a user name")
    key = entry.get("key", base.key if base else None)
    if key is not None:
        if not isinstance(key, str):
            raise HostsError(f"{where}.key: {key!r} is not a file name")
        key = os.path.expanduser(key)
        if not os.path.exists(key):
            raise HostsError(f"{where}.key: no such file {key}")
    return Host(address, port, user, key, str(entry.get("alias", address)))


def parse_hosts(entries, where=lambda key: "", field: str = "hosts",
                seen: dict | None = None) -> list[Host]:
    """The hosts of ``field`` (``hosts``, or ``spare_hosts``: machines a run may add as new
    nodes mid-run); ``seen``: (address, port) -> where, of hosts parsed before, so that a
    host named in both lists is an error naming both places."""
    if not isinstance(entries, list) or not entries:
        raise HostsError(f"{where(field)}field {field!r}: a non-empty list of hosts")
    config = _ssh_config()
    hosts = [parse_host(e, f"{where(f'{field}[{i}]')}{field}[{i}]", config)
             for i, e in enumerate(entries)]
    seen = {} if seen is None else seen
    for i, h in enumerate(hosts):
        if (h.address, h.port) in seen:
            raise HostsError(f"{where(f'{field}[{i}]')}{field}[{i}]: {h} is listed twice "
                             f"(also {seen[(h.address, h.port)]})")
        seen[(h.address, h.port)] = f"{field}[{i}]"
    return hosts


def parse_all_hosts(values: dict, where=lambda key: "") -> tuple[list[Host], list[Host]]:
    """(hosts, spare hosts) of campaign fields or a hosts file's."""
    seen: dict = {}
    hosts = parse_hosts(values.get("hosts"), where, "hosts", seen)
    spares = values.get("spare_hosts")
    return hosts, [] if spares is None else parse_hosts(spares, where, "spare_hosts", seen)


def read_hosts_arg(arg: str) -> dict:
    """``--hosts``: a hosts file (YAML: a list, or a mapping with hosts, known_hosts,
    host_key_policy) or a comma-separated list of hosts. Returns campaign fields."""
    path = Path(arg)
    if path.is_file():
        text = path.read_text()
        try:
            values = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise HostsError(f"{path}{f':{mark.line + 1}' if mark else ''}: not valid YAML: "
                             f"{getattr(exc, 'problem', exc)}") from None
        if isinstance(values, list):
            values = {"hosts": values}
        if not isinstance(values, dict):
            raise HostsError(f"{path}: a hosts file is a list of hosts or a mapping with "
                             f"'hosts' (and 'known_hosts', 'host_key_policy')")
        extra = set(values) - {"hosts", "spare_hosts", "known_hosts", "host_key_policy"}
        if extra:
            raise HostsError(f"{path}: unknown field {sorted(extra)[0]!r} (known: hosts, "
                             f"spare_hosts, known_hosts, host_key_policy)")
        if "known_hosts" in values and values["known_hosts"] is not None:
            kh = os.path.expanduser(str(values["known_hosts"]))
            # relative to the hosts file
            values["known_hosts"] = str((path.parent / kh).resolve()) if not os.path.isabs(kh) else kh
        root = yaml.compose(text)
        lines = key_lines(root, "" if isinstance(root, yaml.MappingNode) else "hosts")
        for h in (values.get("hosts") or []) + (values.get("spare_hosts") or []):
            if isinstance(h, dict) and isinstance(h.get("key"), str) and \
                    not os.path.isabs(os.path.expanduser(h["key"])):
                h["key"] = str((path.parent / h["key"]).resolve())
        parse_all_hosts(values, located(path, lines))  # errors name file and line
        return values
    if "/" in arg or arg.endswith((".yaml", ".yml")):
        raise HostsError(f"--hosts: no such file {arg}")
    return {"hosts": [h for h in arg.split(",") if h.strip()]}
