"""``chaoskraft check --model queue FILE``: a queue history file checked on its own.

The file is ours (``history.jsonl`` or Parquet) or one of Jepsen's Kafka
workload (EDN: ``send``, ``poll`` and ``txn`` operations whose values are
micro-operations ``[[send k v] [poll {k [[offset value] ...]}] ...]``, assign
and subscribe, crashes and the nemesis). It is streamed into a typed file and
checked in process or in Spark with Jepsen's allowances (``--consume``,
``--ww-deps``, ``--allow``). Jepsen's final polls are ordinary polls, so a
history without a ``final-poll`` operation is judged without the durability
check (unseen is still checked) rather than called unknown.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from checkers.queue import history as queue_history, jepsen as queue_jepsen
from checkers.consistency_models import sentence as consistency_sentence
from checkers.history import _sniff, iter_history
from checkers.queue import (ANOMALIES, check_queue, cycle_proof, cycle_sentence,
                            default_allowed, sentence)
from core.verdict import EXIT, WORD


def _ours(path: Path) -> bool:
    """A history chaoskraft wrote (JSON lines or Parquet), not one of Jepsen's (EDN)."""
    if path.suffix == ".parquet" or path.is_dir():
        return True
    head = _sniff(path)  # as iter_history tells the formats apart
    return head.startswith("{") and not head.startswith("{:")


def check_file(args) -> int:
    """``check --model queue``: a queue history (ours, or Jepsen's Kafka workload's EDN:
    ``send``/``poll``/``txn`` operations of ``[[send k v] [poll {k [[o v] ...]}] ...]``)
    streamed into a typed file, then the queue checker with Jepsen's allowances."""
    unknown = sorted(set(args.allow or ()) - set(ANOMALIES))
    if unknown:
        print(f"chaoskraft: --allow {', '.join(unknown)}: not an anomaly class; the classes are "
              f"{', '.join(ANOMALIES)}", file=sys.stderr)
        return 3
    allowed = set(args.allow or ())
    with tempfile.TemporaryDirectory(prefix="chaoskraft-check-") as d:
        typed = Path(d) / "queue.parquet"
        subscribed = False

        def rows():
            nonlocal subscribed
            for r in iter_history(args.file):
                subscribed |= r.get("f") == "subscribe"
                yield r
        queue_history.write(rows(), typed)
        consume = args.consume or ("subscribe" if subscribed else "assign")
        allowed |= set(default_allowed(True, consume, args.ww_deps))
        if args.allow_duplicates:
            allowed.add("duplicate")
        semantics = getattr(args, "semantics", None) or (
            "chaoskraft" if _ours(Path(args.file)) else "jepsen")
        if semantics == "jepsen":
            result = queue_jepsen.check(typed, allowed=tuple(sorted(allowed)),
                                        ww_deps=args.ww_deps)
        else:
            result = check_queue(None, str(typed), allowed=tuple(sorted(allowed)),
                                 engine=args.engine, ww_deps=args.ww_deps, require_final=False)
    st = result["stats"]
    print(f"queue history: {st['sends']['ok']} sends ok, {st['sends']['fail']} failed, "
          f"{st['sends']['info']} indeterminate; {st['polls']} polls read "
          f"{st['messages_read']} messages; consumers: {consume}; ww edges: "
          f"{'inferred' if args.ww_deps else 'not inferred'}; semantics: {semantics}")
    if not st["final_polls"]:
        print("no final-poll operation: durability (acknowledged sends in the final reads) "
              "is not checked; unseen still is")
    for name, a in result["anomalies"].items():
        mark = "" if name in result["bad_anomalies"] else " (allowed)"
        ex = a["examples"][0] if a["examples"] else {}
        said = sentence(name, ex, lambda i: f" (op {i})", lambda k, v: "") \
            or cycle_sentence(ex, lambda i: "") or json.dumps(ex)
        print(f"  {name}{mark}: {a['count']}; e.g. {said}")
        proof = cycle_proof(ex)
        if proof:
            print(f"    proof: {proof}")
    ruled_out = consistency_sentence(result.get("consistency"))
    if ruled_out:
        print(f"consistency: {ruled_out}")
    if st["sends"]["ok"] == 0 and st["messages_read"] == 0 and result["valid"] is not False:
        verdict = getattr(args, "tested_nothing", "unknown")
        print(f"verdict: {verdict} (no send succeeded and no poll read anything: it tested "
              f"nothing{'; --tested-nothing invalid, as Jepsen' if verdict == 'invalid' else ''})")
        return EXIT[False if verdict == "invalid" else "unknown"]
    print(f"verdict: {WORD[result['valid']]}")
    return EXIT[result["valid"]]
