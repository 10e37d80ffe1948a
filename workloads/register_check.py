"""``chaoskraft check``: check a history file for linearizability.

Engines: ``local`` checks in this process (the native kernel, keys on a
small thread pool); ``spark`` groups the rows by key in Spark and runs the
same kernel per key through ``applyInPandas``; ``auto`` (the default) checks
in process below ``AUTO_SPARK_ROWS`` history rows and in Spark above, so a
history that checks in milliseconds never waits for a Spark session.

Gates (as Jepsen's stats checker): a history with no ``ok`` operation, or a
key whose operations none succeeded, tested nothing. A run's analysis
(``strict=True``) makes it ``unknown`` with the reason, never valid.
``chaoskraft check`` on a file keeps the linearizability verdict (Knossos
calls such a history linearizable, and so it is) and prints that it is
vacuous; ``--strict`` makes it ``unknown`` there too.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from checkers.history import read_history, split_independent
from checkers.lin_model import CheckResult, KeyResult
from checkers.linearizability import check, combine
from checkers.models import RegisterModel, get_model, keys_without_ok
from core.verdict import EXIT, WORD

AUTO_SPARK_ROWS = 4_000_000
NO_OK = "no operation on this key succeeded: it tested nothing"


def choose_engine(engine: str, rows: int) -> str:
    if engine == "auto":
        return "spark" if rows > AUTO_SPARK_ROWS else "local"
    if engine not in ("local", "spark"):
        raise ValueError(f"engine must be auto, local or spark, not {engine!r}")
    return engine


def run_check(rows: list[dict], model_name: str, *, initial=None, partition: bool = True,
              engine: str = "auto", master: str | None = None, budget_s: float = 300.0,
              nil_read: str = "unknown", independent: bool | None = None,
              strict: bool = True) -> CheckResult:
    hm = get_model(model_name, initial, nil_read)
    if isinstance(hm, RegisterModel):  # jepsen.independent [key value] tuples are split
        rows = split_independent(rows, independent)
    keyed = hm.operations(rows, partition)  # validates pairing and fields, naming the row
    total_ok, empty = keys_without_ok(rows, partition and hm.partitioned_by_key)
    engine = choose_engine(engine, len(rows))
    if engine == "local":
        result = check(hm.model(partition), (), timeout_s=budget_s, keyed=keyed)
    else:
        from checkers.parquet import write_parquet
        from checkers.spark import check_linearizability
        with tempfile.TemporaryDirectory(prefix="chaoskraft-check-") as d:
            path = Path(d) / "history.parquet"
            write_parquet(rows, path)
            result = check_linearizability(str(path), model_name, initial=initial,
                                           partition=partition, budget_s=budget_s, master=master,
                                           nil_read=nil_read)
    return gate(result, total_ok, empty, strict)


def gate(result: CheckResult, total_ok: int, empty_keys: set, strict: bool = True) -> CheckResult:
    """No ok operation anywhere, or on a key the verdict rests on: unknown, never valid.

    Not strict: the verdicts stand and the reason says they are vacuous."""
    if not strict:
        vacuous = [k for k in result.keys if k.key in empty_keys]
        for k in vacuous:
            k.reason = k.reason or "vacuous: " + NO_OK
        if total_ok == 0:
            return CheckResult(result.valid, result.keys, "vacuous: no operation in the history "
                               "succeeded, so it tested nothing (--strict makes this unknown)")
        return result
    keys = list(result.keys)
    for k in keys:
        if k.key in empty_keys and k.valid is True:
            k.valid, k.reason = "unknown", NO_OK
    known = {k.key for k in keys}
    for key in sorted(empty_keys - known, key=repr):
        keys.append(KeyResult(key, "unknown", 0, reason=NO_OK))
    valid = combine(k.valid for k in keys)
    if total_ok == 0 and valid is not False:
        valid = "unknown"
    return CheckResult(valid, keys, "no operation in the history succeeded: it tested nothing"
                       if total_ok == 0 else result.reason)


def print_result(result: CheckResult, model_name: str, out=None) -> None:
    out = out or sys.stdout  # the stdout of the call, not of the import
    keys = result.keys
    counts = {w: sum(1 for k in keys if k.valid is v or k.valid == v) for v, w in WORD.items()}
    print(f"model {model_name}: {len(keys)} key(s): {counts['valid']} valid, {counts['invalid']} "
          f"invalid, {counts['unknown']} unknown", file=out)
    for k in keys:
        if k.valid is False:
            print(f"key {k.key!r}: not linearizable ({k.operations} operations); counterexample:",
                  file=out)
            for c in k.counterexample:
                ret = "never returned" if c["return"] is None else c["return"]
                print(f"  {c['role']:>16}: process {c['process']} {c['op']} "
                      f"[{c['call']}, {ret}] (history index {c['index']})", file=out)
        elif k.valid == "unknown" or k.reason:
            print(f"key {k.key!r}: {WORD[k.valid]} ({k.operations} operations): "
                  f"{k.reason or 'unknown'}", file=out)
    if result.reason:
        print(result.reason, file=out)
    print(f"verdict: {WORD[result.valid]}", file=out)


def cmd_check(args) -> int:
    rows = read_history(args.file)
    result = run_check(rows, args.model, initial=args.initial, partition=not args.no_partition,
                       engine=args.engine, master=args.spark_master, budget_s=args.budget_s,
                       nil_read=args.nil_read, independent=args.independent,
                       strict=args.strict)
    print_result(result, args.model)
    return EXIT[result.valid]
