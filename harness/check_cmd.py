"""``chaoskraft check``: check a history file for linearizability."""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from checkers.history import read_history
from checkers.linearizability import CheckResult, check
from checkers.models import get_model

EXIT = {True: 0, False: 1, "unknown": 2}
WORD = {True: "valid", False: "invalid", "unknown": "unknown"}


def run_check(rows: list[dict], model_name: str, *, initial=None, partition: bool = True,
              engine: str = "spark", master: str | None = None,
              budget_s: float = 300.0) -> CheckResult:
    hm = get_model(model_name, initial)
    if engine == "local":
        return check(hm.model(partition), (), timeout_s=budget_s, keyed=hm.operations(rows, partition))
    # Validate the rows (pairing, fields) here, where the error can name them.
    hm.operations(rows, partition)
    from checkers.parquet import write_parquet
    from checkers.spark import check_linearizability
    with tempfile.TemporaryDirectory(prefix="chaoskraft-check-") as d:
        path = Path(d) / "history.parquet"
        write_parquet(rows, path)
        return check_linearizability(str(path), model_name, initial=initial, partition=partition,
                                     budget_s=budget_s, master=master)


def print_result(result: CheckResult, model_name: str, out=sys.stdout) -> None:
    keys = result.keys
    counts = {w: sum(1 for k in keys if k.valid is v or k.valid == v) for v, w in WORD.items()}
    print(f"model {model_name}: {len(keys)} key(s): {counts['valid']} valid, {counts['invalid']} "
          f"invalid, {counts['unknown']} unknown", file=out)
    for k in keys:
        if k.valid is False:
            print(f"key {k.key!r}: not linearizable ({k.operations} operations); counterexample:",
                  file=out)
            for c in k.counterexample:
                print(f"  {c['role']:>16}: process {c['process']} {c['op']} "
                      f"[{c['call']}, {c['return']}] (history index {c['index']})", file=out)
        elif k.valid == "unknown":
            print(f"key {k.key!r}: unknown ({k.operations} operations; search budget ran out "
                  f"or another key failed first)", file=out)
    print(f"verdict: {WORD[result.valid]}", file=out)


def cmd_check(args) -> int:
    rows = read_history(args.file)
    result = run_check(rows, args.model, initial=args.initial, partition=not args.no_partition,
                       engine=args.engine, master=args.spark_master, budget_s=args.budget_s)
    print_result(result, args.model)
    return EXIT[result.valid]
