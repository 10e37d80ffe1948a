"""``python -m node_image format|start``: the node's own command line.

    python -m node_image format --config server.properties --cluster-id ID \
        [--initial-controllers 1@host:port:DIRID,... | --standalone | --no-initial-controllers]
        [--feature kraft.version=1] [--directory-id DIRID]
    python -m node_image start --config server.properties

``format`` is Kafka's ``kafka-storage format``: it writes meta.properties and
the first quorum-state. Without ``--initial-controllers`` the voters come from
``controller.quorum.voters`` with no directory ids (a static quorum).

A dynamic quorum (KIP-853, ``kraft.version`` 1, voters added and removed while it runs):
``--standalone`` (this controller alone is the first voter), ``--no-initial-controllers``
(a controller that will join a quorum that exists: it observes until AddRaftVoter adds it),
or ``--initial-controllers ... --feature kraft.version=1`` (or the node property
``chaoskraft.bootstrap.kraft.version=1``, how Docker and SSH clusters ask for it).
``--initial-controllers`` alone stays at ``kraft.version`` 0 (a static voter set with
directory ids).
Exit codes: 0 ok, 2 bad configuration or storage, 1 crash.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from .config import ConfigError, load_config, parse_properties
from .fs import LogDirFailure, RealFileSystem
from .storage import ReplicaKey, StorageError, format_storage, new_directory_id


def _read_config(path: str):
    try:
        with open(path) as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    return load_config(parse_properties(text, path))


def _initial_controllers(text: str) -> tuple[ReplicaKey, ...]:
    keys = []
    for item in text.split(","):
        try:
            ident, rest = item.strip().split("@", 1)
            parts = rest.rsplit(":", 2)
            keys.append(ReplicaKey(int(ident), parts[2] if len(parts) == 3 else None))
        except (ValueError, IndexError):
            raise ConfigError(f"--initial-controllers: {item!r} is not id@host:port:directoryId") from None
    return tuple(keys)


def _kraft_version(args, config) -> int:
    level = 1 if args.standalone or args.no_initial_controllers else \
        config.bootstrap_kraft_version
    for item in args.feature:
        name, _, value = item.partition("=")
        if name != "kraft.version" or value not in ("0", "1"):
            raise ConfigError(f"--feature {item!r}: format knows kraft.version=0 or 1")
        level = int(value)
    picked = [f for f in ("standalone", "no_initial_controllers", "initial_controllers")
              if getattr(args, f)]
    if len(picked) > 1:
        raise ConfigError("--standalone, --no-initial-controllers and --initial-controllers "
                          "exclude each other")
    if level == 0 and (args.standalone or args.no_initial_controllers):
        raise ConfigError("--standalone and --no-initial-controllers format a dynamic quorum: "
                          "kraft.version 1")
    return level


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m node_image")
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("format")
    f.add_argument("--config", required=True)
    f.add_argument("--cluster-id", required=True)
    f.add_argument("--initial-controllers")
    f.add_argument("--standalone", action="store_true")
    f.add_argument("--no-initial-controllers", action="store_true")
    f.add_argument("--feature", action="append", default=[])
    f.add_argument("--directory-id")
    f.add_argument("--ignore-formatted", action="store_true")
    s = sub.add_parser("start")
    s.add_argument("--config", required=True)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = _read_config(args.config)
        if args.cmd == "format":
            kraft_version = _kraft_version(args, config)
            directory_id = args.directory_id or new_directory_id()
            if args.standalone:
                voters = (ReplicaKey(config.node_id, directory_id),)
            elif args.no_initial_controllers:
                voters = ()
            elif args.initial_controllers:
                voters = _initial_controllers(args.initial_controllers)
            else:
                voters = tuple(ReplicaKey(v) for v in sorted(config.voters))
            if kraft_version and any(v.directory_id is None for v in voters):
                raise ConfigError("kraft.version 1 needs each initial controller's directory "
                                  "id: --initial-controllers id@host:port:directoryId,...")
            meta = format_storage(RealFileSystem(), config.log_dir, args.cluster_id, config.node_id,
                                  voters, directory_id, args.ignore_formatted,
                                  kraft_version=kraft_version)
            print(f"formatted {config.log_dir}: cluster.id={meta.cluster_id} "
                  f"node.id={meta.node_id} directory.id={meta.directory_id}")
            return 0
        from .runtime import NodeRuntime, halt_on_log_dir_failure
        try:
            asyncio.run(NodeRuntime(config).run())
        except LogDirFailure as exc:  # while opening the logs, before the loop ran
            halt_on_log_dir_failure(config.log_dir, exc)
        return 0
    except (ConfigError, StorageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except LogDirFailure as exc:  # format on a failing disk
        print(f"error: the log directory failed: {exc}", file=sys.stderr)
        return 74


if __name__ == "__main__":
    sys.exit(main())
