"""A queue run's check: its history streamed into the typed Parquet files in chunks (any
length in bounded memory), checked in process or in Spark with the run's allowances, the
plots drawn, and the time to detection of an invalid run."""
from __future__ import annotations

import json
from pathlib import Path

from core.stats import Stats, run_history
from core.verdict import WORD


CHUNK = 100_000  # rows held at once while a queue history streams into its Parquet files


def _stream_queue(run_dir: Path, typed: Path) -> dict:
    """history.jsonl -> history.parquet and the typed queue.parquet, CHUNK rows at a time;
    returns the history's stats."""
    from checkers.queue import history as queue_history
    from checkers.history import iter_history
    from checkers.parquet import HistoryWriter
    st = Stats()
    hw, qw = HistoryWriter(run_dir / "history.parquet"), queue_history.Writer(typed)
    try:
        chunk: list[dict] = []
        for r in iter_history(run_dir / "history.jsonl"):
            st.add(r)
            chunk.append(r)
            if len(chunk) >= CHUNK:
                hw.write(chunk)
                qw.write(chunk)
                chunk = []
        hw.write(chunk)
        qw.write(chunk)
    except BaseException:
        qw.abort()
        raise
    finally:
        hw.close()
    qw.close()
    return st.result()


def typed_stats(path: Path) -> dict:
    """``Stats`` of a typed queue history, a row group at a time, without decoding its rows."""
    import pyarrow.parquet as pq
    st = Stats()
    for b in pq.ParquetFile(str(path)).iter_batches(batch_size=CHUNK,
                                                    columns=["process", "type", "f", "extra"]):
        d = b.to_pandas()
        st.rows += len(d)
        client = d["process"].notna()
        for t, n in d.loc[client, "type"].value_counts().items():
            if t in st.counts:
                st.counts[t] += int(n)
        for f, extra in d.loc[~client & (d["type"] == "invoke"), ["f", "extra"]].itertuples(
                index=False):
            st.faults.append({"f": f, "value": json.loads(extra).get("value") if extra else None})
    return st.result()


def check_run(run_dir: Path, cfg: dict, *, spark_master: str | None,
              engine: str = "auto", log=print) -> tuple[dict, dict]:
    """Streams history.jsonl once into history.parquet and the typed queue.parquet, in
    chunks of CHUNK rows (a history of any length in bounded memory), then checks. A run
    stored as a typed queue.parquet alone (written straight to Parquet) is checked as it is."""
    from checkers.queue import history as queue_history
    from checkers.history import HistoryError
    from checkers.queue import AUTO_SPARK_ROWS, check_queue, default_allowed
    allowed = cfg.get("allowed_anomalies")
    if allowed is None:
        allowed = default_allowed(True if cfg.get("transactions") else cfg.get("idempotent", True),
                                  cfg.get("consume", "assign"), bool(cfg.get("ww_deps")))
    typed = run_dir / "queue.parquet"
    if (run_dir / "history.jsonl").exists():
        stats = _stream_queue(run_dir, typed)
        log(f"analysis: {stats['rows']} history rows; wrote history.parquet and queue.parquet")
    elif typed.exists() and queue_history.is_typed(typed):
        stats = typed_stats(typed)
        log(f"analysis: {stats['rows']} history rows, stored as queue.parquet")
    else:
        raise HistoryError(f"{run_dir}: neither history.jsonl nor a typed queue.parquet")
    if engine == "auto":
        engine = "spark" if spark_master or stats["rows"] > AUTO_SPARK_ROWS else "local"
    where = f"in Spark ({spark_master or 'local[2]'})" if engine == "spark" else "in process"
    log(f"analysis: queue checkers {where}; allowed: {', '.join(allowed) or 'none'}")
    spark = None
    if engine == "spark":
        from checkers.spark import spark_session  # Spark only when it is asked for
        spark = spark_session(spark_master)
    result = check_queue(spark, str(typed), allowed=tuple(allowed), engine=engine,
                         ww_deps=bool(cfg.get("ww_deps")),
                         progress=lambda line: log(f"analysis: queue check: {line}"))
    if stats["rows"] <= AUTO_SPARK_ROWS:
        _pictures(typed, result)
    else:
        log(f"analysis: no unseen, lag or key log plots above {AUTO_SPARK_ROWS:,} rows")
    for name, a in result["anomalies"].items():
        mark = "" if name in result["bad_anomalies"] else " (allowed)"
        log(f"analysis: {name}{mark}: {a['count']}; e.g. {a['examples'][0]}")
    if not result["stats"]["final_polls"]:
        log("analysis: no final poll succeeded, so durability is unknown")
    results = {"valid": result["valid"], "verdict": WORD[result["valid"]],
               "checkers": {"queue": result}, "stats": stats}
    return results, stats


def _pictures(typed: Path, result: dict) -> None:
    """Jepsen's Kafka plots as data in the result (``checkers.queue.plots``): unseen and
    realtime lag over time, and the log of up to three keys named by bad anomalies."""
    from checkers.queue import history as queue_history, plots as queue_plots
    names = queue_history.key_names(typed)
    t = queue_history.read_table(typed, ["index", "time", "process", "type", "f", "key",
                                         "value", "offset", "reads", "invoke"])
    result["plots"] = queue_plots.series(t, names.names)
    keys: list = []
    for name in result["bad_anomalies"]:
        for ex in result["anomalies"][name]["examples"]:
            for k in [ex.get("key")] + [s.get("key") for s in ex.get("cycle", ())]:
                if k is not None and k not in keys and k in names.ids:
                    keys.append(k)
    result["pictures"] = {str(k): queue_plots.key_log(t, names.ids[k]) for k in keys[:3]}


def _detect_time(run_dir: Path, anomalies: dict, bad: list[str]) -> float | None:
    """Seconds from the workload's start to the earliest operation an example of a bad
    anomaly names (by index, or by the value its send wrote)."""
    rows, start = run_history(run_dir)
    sends = {(r["key"], (r.get("value") or {}).get("value")): r["index"] for r in rows
             if r["f"] == "send" and r["type"] == "invoke" and isinstance(r.get("value"), dict)}
    sends.update({(m[1], m[2]): r["index"] for r in rows if r["f"] == "txn"
                  and r["type"] == "invoke" for m in r.get("value") or () if m[0] == "send"})
    indexes = []
    for name in bad:
        for ex in anomalies[name]["examples"]:
            found = [v for k, v in ex.items() if k.endswith("index") and isinstance(v, int)]
            found += [st["index"] for st in ex.get("cycle", ())]
            if not found and "key" in ex:  # duplicate, inconsistent-offsets: name values only
                values = ex.get("values") or ([ex["value"]] if "value" in ex else [])
                found = [sends[(ex["key"], v)] for v in values if (ex["key"], v) in sends]
            indexes += found
    times = [rows[i]["time"] for i in indexes if 0 <= i < len(rows)]
    return (min(times) - start) / 1e9 if times else None
