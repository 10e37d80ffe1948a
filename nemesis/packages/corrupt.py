"""corrupt: damage a stopped node's files, then start it again: three bit flips in the last
64 KiB of the newest segment of each chosen log directory (``bitflip``), or up to 4 KiB cut
off its tail (``truncate``). ``files``: the topic's partitions (the queue's default), the
metadata log (the register's) or all. The node is killed first; what was damaged is
recorded per node, and the node must recover (truncate at the damage) when it starts.
"""
from __future__ import annotations

import asyncio
import json
import random

from ..package import NodeFault, choices

CORRUPT_MODES = ("bitflip", "truncate")
CORRUPT_FILES = ("partitions", "metadata", "all")
_CORRUPT_PY = r"""
import json, os, random, sys
data_dir, mode, which, seed = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rng = random.Random(seed)
done = []
for d in sorted(os.listdir(data_dir)):
    path = os.path.join(data_dir, d)
    if not os.path.isdir(path) or "-" not in d:
        continue
    meta = d.startswith("__cluster_metadata")
    if (which == "partitions" and meta) or (which == "metadata" and not meta):
        continue
    segs = sorted((f for f in os.listdir(path) if f.endswith(".log")), reverse=True)
    segs = [f for f in segs if os.path.getsize(os.path.join(path, f)) > 0]
    if not segs:
        continue
    f = os.path.join(path, segs[0])
    size = os.path.getsize(f)
    if mode == "truncate":
        cut = rng.randint(1, min(size, 4096))
        os.truncate(f, size - cut)
        done.append({"file": f, "size": size, "truncated_bytes": cut})
    else:
        window = min(size, 65536)
        flips = []
        with open(f, "r+b") as fh:
            for _ in range(3):
                pos = size - window + rng.randrange(window)
                fh.seek(pos)
                b = fh.read(1)[0]
                bit = rng.randrange(8)
                fh.seek(pos)
                fh.write(bytes([b ^ (1 << bit)]))
                flips.append([pos, bit])
        done.append({"file": f, "size": size, "flipped": flips})
print(json.dumps(done))
"""


def corrupt_script(data_dir: str, mode: str, which: str, seed: str) -> list[str]:
    """Corrupt the newest segment of each chosen log directory of a stopped node: three bit
    flips in its last 64 KiB, or up to 4 KiB cut off its tail. Prints what it did (JSON)."""
    return ["python3", "-c", _CORRUPT_PY, data_dir, mode, which, seed]


class Corrupt(NodeFault):
    name = "corrupt"
    modes = CORRUPT_MODES
    options = {"files": choices(CORRUPT_FILES)}
    opens = ("corrupt",)
    closes = ("start",)
    colour = "#333333"
    target_weights = {"*": {"one": 1}}

    @classmethod
    def run_options(cls, workload, options):
        out = {"modes": list(CORRUPT_MODES),
               "files": ["partitions" if workload == "queue" else "metadata"]}
        out.update(options or {})
        return out

    async def act(self, ctx, step, opts, rng, targets):
        value = {"target": step.spec, "nodes": targets}
        await ctx.kill("kill", targets, {**value, "for": "corrupt"})
        value.update(mode=step.mode, files=opts["files"][0])
        ctx.history.record("nemesis", "invoke", "corrupt", value=value)
        damage = {}
        for n in targets:
            _, out = await asyncio.to_thread(
                ctx.backend.exec, n, corrupt_script(ctx.data_dir, step.mode, opts["files"][0],
                                                    f"{ctx.cfg.seed}-{step.index}-{n}"))
            damage[str(n)] = json.loads(out.strip().splitlines()[-1] or "[]")
        value["damage"] = damage
        ctx.history.record("nemesis", "info", "corrupt", value=value)
        files = sum(len(d) for d in damage.values())
        return (f"corrupt {step.mode} {step.spec} {targets} ({files} segments)",
                lambda: ctx.restart(targets))

    def sim_act(self, sim, step, opts, rng, targets):
        sim.kill(targets)
        files = 0
        for n in targets:
            files += len(damage_disk(sim.disk(n), "/data", step.mode, opts["files"][0],
                                     f"{sim.seed}-{step.index}-{n}"))
        return (f"corrupt {step.mode} {step.spec} {targets} ({files} segments)",
                lambda: sim.restart(targets))


def damage_disk(disk, data_dir: str, mode: str, which: str, seed: str) -> list[dict]:
    """What ``corrupt_script`` does to a node's files, on a simulated disk
    (``simulator.disk.SimDisk``), with the same choices for the same seed."""
    rng = random.Random(seed)
    done = []
    for d in disk.subdirs(data_dir):
        if "-" not in d:
            continue
        meta = d.startswith("__cluster_metadata")
        if (which == "partitions" and meta) or (which == "metadata" and not meta):
            continue
        path = f"{data_dir}/{d}"
        segs = [f for f in sorted((f for f in disk.listdir(path) if f.endswith(".log")),
                                  reverse=True) if disk.size(f"{path}/{f}") > 0]
        if not segs:
            continue
        f = f"{path}/{segs[0]}"
        size = disk.size(f)
        if mode == "truncate":
            cut = rng.randint(1, min(size, 4096))
            disk.truncate(f, size - cut)
            disk.fsync(f)
            done.append({"file": f, "size": size, "truncated_bytes": cut})
        else:
            window = min(size, 65536)
            flips = []
            for _ in range(3):
                pos = size - window + rng.randrange(window)
                bit = rng.randrange(8)
                disk.corrupt(f, pos, 1 << bit)
                flips.append([pos, bit])
            done.append({"file": f, "size": size, "flipped": flips})
    return done


PACKAGE = Corrupt
