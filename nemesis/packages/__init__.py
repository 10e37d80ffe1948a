"""Every fault package, found here: one module per fault, each naming its class ``PACKAGE``
(nemesis.package). Adding a fault is adding a module; nothing else lists them."""
from __future__ import annotations

import importlib
import pkgutil

from ..package import Package

# The order packages are listed in (help, errors, docs); a new one comes after these.
_ORDER = ("partition", "kill", "power-loss", "pause", "clock", "packet-loss", "corrupt",
          "strand-replica", "depose-leader")


def _discover() -> dict[str, type[Package]]:
    found: dict[str, type[Package]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        cls = getattr(module, "PACKAGE", None)
        if cls is None:
            raise ImportError(f"nemesis/packages/{info.name}.py names no PACKAGE")
        if cls.name in found:
            raise ImportError(f"two fault packages named {cls.name!r}")
        found[cls.name] = cls
    rank = {n: i for i, n in enumerate(_ORDER)}
    return dict(sorted(found.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


PACKAGES: dict[str, type[Package]] = _discover()


def report_series() -> dict[str, type]:
    """The packages whose faults set a per-node quantity the report plots (``series``)."""
    return {name: cls for name, cls in PACKAGES.items() if cls.series_title}


def report_kinds() -> tuple[dict[str, str], dict[str, tuple[str, ...]], dict[str, str]]:
    """For reports: history row -> the fault it opens; history row -> the faults it closes;
    fault -> colour."""
    opens: dict[str, str] = {}
    closes: dict[str, tuple[str, ...]] = {}
    colours: dict[str, str] = {}
    for name, cls in PACKAGES.items():
        if not cls.opens:
            continue  # a scenario's rows are its partitions' and kills'
        colours[name] = cls.colour
        for f in cls.opens:
            opens[f] = name
        for f in cls.closes:
            closes[f] = closes.get(f, ()) + (name,)
    return opens, closes, colours
