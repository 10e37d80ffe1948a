"""Campaign matrices: one YAML file, many runs.

A campaign file holds run fields (those of ``RunConfig``, the base of every
cell) and may add:

- ``seeds``: a list of seeds, or ``"A-B"`` (default: ``[seed]`` when the file
  sets ``seed``, else ``[1]``);
- ``workloads``: a list of mappings of run fields, each with an optional
  ``name`` (default: its ``workload``);
- ``nemeses``: a list of mappings of run fields (``nemesis``,
  ``nemesis_options``, ``nemesis_combine``, ...), each with a ``name``;
- ``cells``: per-cell overrides: ``match`` (any of ``workload``,
  ``nemesis``, ``seed``: names and seed of the cells it applies to) and run
  fields, e.g. a planted bug in one cell.

Cells are workload x nemesis x seed, named ``<workload>-<nemesis>-seed<N>``.
Every cell's config is validated before anything runs; an error names the
file, the line and the field (``nemeses[1].nemesis[0].duration_s``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .config import CampaignError, RunConfig, located, read_campaign_file, resolve, validate

MATRIX_FIELDS = ("seeds", "workloads", "nemeses", "cells")


@dataclass
class Cell:
    id: str
    workload: str
    nemesis: str
    seed: int
    config: RunConfig


@dataclass
class Matrix:
    path: Path
    name: str
    cells: list[Cell]


def parse_seeds(value, where: str) -> list[int]:
    if isinstance(value, str):
        try:
            lo, _, hi = value.partition("-")
            seeds = list(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise CampaignError(f"{where}field 'seeds': {value!r} is not a list or A-B") from None
    elif isinstance(value, list) and all(isinstance(s, int) and not isinstance(s, bool)
                                         for s in value):
        seeds = list(value)
    else:
        raise CampaignError(f"{where}field 'seeds': {value!r} is not a list of seeds or A-B")
    if not seeds or any(s < 0 for s in seeds):
        raise CampaignError(f"{where}field 'seeds': {value!r} must name seeds >= 0")
    return seeds


def load_matrix(path: str | Path) -> Matrix:
    path = Path(path)
    values, lines = read_campaign_file(path)

    def where(prefix: str = ""):
        return located(path, lines, prefix)

    base = {k: v for k, v in values.items() if k not in MATRIX_FIELDS}
    validate(base, where(), cross=False)
    seeds = parse_seeds(values.get("seeds", [base.get("seed", 1)]), where()("seeds"))

    def entries(field: str, key: str) -> list[tuple[str, dict, callable]]:
        items = values.get(field)
        if items is None:
            return [("", {}, where())]
        if not isinstance(items, list) or not items:
            raise CampaignError(f"{where()(field)}field {field!r}: a non-empty list of mappings")
        out = []
        for i, item in enumerate(items):
            here = where(f"{field}[{i}].")
            if not isinstance(item, dict):
                raise CampaignError(f"{here('')}field '{field}[{i}]': {item!r} is not a mapping")
            fields = {k: v for k, v in item.items() if k != "name"}
            validate(fields, here, cross=False)
            name = item.get("name") or fields.get(key) or f"{field[:-1]}{i}"
            if not isinstance(name, str) or not name:
                raise CampaignError(f"{here('name')}field '{field}[{i}].name': {name!r}")
            if any(name == n for n, _, _ in out):
                raise CampaignError(f"{here('name')}field '{field}[{i}].name': {name!r} twice")
            out.append((name, fields, here))
        return out
    workloads = entries("workloads", "workload")
    nemeses = entries("nemeses", "nemesis")
    overrides = []
    for i, item in enumerate(values.get("cells") or []):
        here = where(f"cells[{i}].")
        if not isinstance(item, dict) or not isinstance(item.get("match"), dict):
            raise CampaignError(f"{here('')}field 'cells[{i}]': needs 'match' (workload, "
                                f"nemesis, seed) and run fields")
        match = item["match"]
        unknown = set(match) - {"workload", "nemesis", "seed"}
        if unknown:
            raise CampaignError(f"{here('match')}field 'cells[{i}].match': unknown key "
                                f"{sorted(unknown)[0]!r} (workload, nemesis, seed)")
        fields = {k: v for k, v in item.items() if k != "match"}
        validate(fields, here, cross=False)
        overrides.append((match, fields))
    cells = []
    for wname, wfields, _ in workloads:
        for nname, nfields, nwhere in nemeses:
            for seed in seeds:
                merged = {**base, **wfields, **nfields}
                names = {"workload": wname or merged.get("workload", RunConfig.workload),
                         "nemesis": nname or "default", "seed": seed}
                for match, fields in overrides:
                    if all(names[k] == v for k, v in match.items()):
                        merged.update(fields)
                cell_id = f"{names['workload']}-{names['nemesis']}-seed{seed}"
                merged.update(seed=seed, test=f"{path.stem}-{cell_id}")
                try:
                    cfg = resolve(merged, {})
                except CampaignError as exc:
                    raise CampaignError(f"{nwhere('')}cell {cell_id}: {exc}") from None
                cells.append(Cell(cell_id, names["workload"], names["nemesis"], seed, cfg))
    for match, _ in overrides:
        if not any(all({"workload": c.workload, "nemesis": c.nemesis, "seed": c.seed}[k] == v
                       for k, v in match.items()) for c in cells):
            raise CampaignError(f"{path}: 'cells' entry {match} matches no cell")
    return Matrix(path, path.stem, cells)
