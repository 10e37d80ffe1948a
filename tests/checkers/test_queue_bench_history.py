"""The benchmark's synthetic queue history (``bench/queue_checker.py``), generated in chunks
so that 100 million operations fit in memory: consumers carry their positions and keys
their offsets across chunks, so the checker finds every planted anomaly, each on its own
key, and nothing on the generated keys; the chunk size changes no fact of the history."""
import importlib.util
import json

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("queue_checker_bench",
                                                  ROOT / "bench" / "queue_checker.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def written(bench, path, ops, keys, chunk):
    import pyarrow.parquet as pq

    from checkers.queue import history as qh
    planted = {}
    writer = pq.ParquetWriter(str(path), qh.SCHEMA)
    for table in bench.synthetic(ops, keys, 7, planted, chunk=chunk):
        writer.write_table(table)
    writer.add_key_value_metadata({qh.KEYS: json.dumps([f"k{k}" for k in range(keys)])})
    writer.close()
    return planted


@pytest.mark.parametrize("chunk", [7_001, 1_000_000])
def test_every_planted_anomaly_is_found_and_nothing_else(bench, tmp_path, chunk):
    from checkers.queue import check_queue
    keys, ops = 24, 60_000
    planted = written(bench, tmp_path / "q.parquet", ops, keys, chunk)
    result = check_queue(None, str(tmp_path / "q.parquet"), engine="local")
    assert {a for a in bench.PLANTED if planted[a] not in bench._keys(result, a)} == set()
    generated = {f"k{k}" for k in range(keys - len(bench.PLANTED))}
    for anomaly in result["anomalies"]:
        assert not bench._keys(result, anomaly) & generated, (anomaly, result["anomalies"][anomaly])
    stats = result["stats"]
    assert stats["final_polls"] and stats["polls"] + sum(stats["sends"].values()) > ops
    assert stats["messages_read"] > ops, "polls read the generated keys"


def test_the_chunk_size_changes_nothing_but_the_draws(bench, tmp_path):
    """Within one chunk size the history is a function of the seed; across sizes the
    draws differ but each consumer still reads each key's log in order from offset 0."""
    import pyarrow.parquet as pq
    for chunk in (5_000, 20_000):
        written(bench, tmp_path / f"{chunk}.parquet", 20_000, 24, chunk)
        written(bench, tmp_path / f"{chunk}-again.parquet", 20_000, 24, chunk)
        a = pq.read_table(tmp_path / f"{chunk}.parquet")
        assert a.equals(pq.read_table(tmp_path / f"{chunk}-again.parquet"))
        generated = 24 - len(bench.PLANTED)  # keys 0.. are generated; the rest planted
        seen: dict = {}
        for r in a.to_pylist():
            if r["f"] == "poll" and r["type"] == "ok":
                for entry in (e for e in r["reads"] if e["key"] < generated):
                    offsets = entry["offsets"]
                    where = seen.get((r["process"], entry["key"]), 0)
                    assert offsets == list(range(where, where + len(offsets))), (r, where)
                    seen[(r["process"], entry["key"])] = where + len(offsets)
