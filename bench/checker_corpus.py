"""The linearizability checker against Porcupine's corpus timings.

    python bench/checker_corpus.py [--corpus ../shared/testdata/porcupine] [--no-spark]

Prints, per file and in total, the time to a verdict for the etcd set and for
kv c50 (ok and bad), in this process and through Spark (local[2]), next to
Porcupine's reference times from VERDICTS.md (Go, one core). The time to a
verdict ("local") counts building the operations from the rows and the
search (the native kernel unless ``--python``); "search" is the search alone,
from operations already built, as Porcupine's ``CheckEvents`` starts from
events already parsed and paired; reading the file is printed apart (parse).
The Spark time excludes starting the session, which is printed once. Run it
under ``taskset -c 0`` for the one-core comparison.
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checkers.history import read_history  # noqa: E402
from checkers.linearizability import check  # noqa: E402
from checkers.models import get_model  # noqa: E402
from checkers.parquet import write_parquet  # noqa: E402

PORCUPINE_MS = {"etcd (all)": 440, "etcd_002.log": 170, "etcd_007.log": 125, "c50-ok.txt": 180,
                "c50-bad.txt": 7}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--corpus", default=str(Path(__file__).resolve().parents[2] / "shared" /
                                           "testdata" / "porcupine"))
    p.add_argument("--no-spark", action="store_true")
    p.add_argument("--python", action="store_true", help="the Python reference search")
    a = p.parse_args()
    engine = "python" if a.python else "auto"
    root = Path(a.corpus)
    files = [(f, "etcd") for f in sorted((root / "jepsen").glob("etcd_*.log"))]
    files += [(root / "kv" / "c50-ok.txt", "kv"), (root / "kv" / "c50-bad.txt", "kv")]
    spark_check = None
    if not a.no_spark:
        from checkers.spark import check_linearizability, spark_session
        t = time.perf_counter()
        spark_session()
        print(f"spark session start: {time.perf_counter() - t:.1f} s")
        spark_check = check_linearizability
    totals = {"etcd": [0.0, 0.0], "kv": [0.0, 0.0]}
    parse = {"etcd": 0.0, "kv": 0.0}
    search = {"etcd": 0.0, "kv": 0.0}
    print(f"{'file':<16} {'verdict':<8} {'local ms':>10} {'search ms':>10} {'spark ms':>10} "
          f"{'porcupine ms':>13}")
    with tempfile.TemporaryDirectory() as d:
        for f, model in files:
            t = time.perf_counter()
            rows = read_history(f)
            parse[model] += time.perf_counter() - t
            if not rows:
                continue
            hm = get_model(model)
            partition = model == "kv"
            t = time.perf_counter()
            keyed = hm.operations(rows, partition)
            t1 = time.perf_counter()
            r = check(hm.model(partition), (), keyed=keyed, engine=engine)
            local = time.perf_counter() - t
            searched = time.perf_counter() - t1
            search[model] += searched
            spark = float("nan")
            if spark_check:
                path = Path(d) / (f.name + ".parquet")
                write_parquet(rows, path)
                t = time.perf_counter()
                rs = spark_check(str(path), model, partition=partition)
                spark = time.perf_counter() - t
                assert rs.valid == r.valid, f"{f.name}: spark {rs.valid} vs local {r.valid}"
            totals[model][0] += local
            totals[model][1] += spark
            ref = PORCUPINE_MS.get(f.name)
            print(f"{f.name:<16} {str(r.valid):<8} {local * 1000:>10.1f} "
                  f"{searched * 1000:>10.1f} "
                  f"{spark * 1000:>10.1f} {'' if ref is None else ref:>13}")
    print(f"total etcd (102 files): local {totals['etcd'][0] * 1000:.0f} ms (search "
          f"{search['etcd'] * 1000:.0f} ms), spark {totals['etcd'][1] * 1000:.0f} ms; porcupine "
          f"{PORCUPINE_MS['etcd (all)']} ms")
    print(f"total kv c50 (2 files): local {totals['kv'][0] * 1000:.0f} ms (search "
          f"{search['kv'] * 1000:.0f} ms), spark "
          f"{totals['kv'][1] * 1000:.0f} ms; porcupine {PORCUPINE_MS['c50-ok.txt'] + PORCUPINE_MS['c50-bad.txt']} ms")
    print(f"parse etcd (102 files): {parse['etcd'] * 1000:.0f} ms; parse kv c50 (2 files): "
          f"{parse['kv'] * 1000:.0f} ms")
    import os
    print(f"engine: {'python' if a.python else 'native kernel'}; cores available: "
          f"{len(os.sched_getaffinity(0))}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
