"""The linearizability checker against Porcupine's corpus timings, side by side.

    taskset -c 0 python bench/checker_corpus.py [--corpus ../shared/testdata/porcupine]
        [--repeat 10] [--no-spark] [--python] [--porcupine DIR]

Prints, per file and in total, the time to a verdict for the etcd set and for
kv c50 (ok and bad), in this process and through Spark (local[2]). The time
to a verdict ("local") counts building the operations from the rows and the
search (the native kernel unless ``--python``), as the mean of ``--repeat``
runs, the way ``go test -bench`` reports Porcupine (its ns/op is a mean over
b.N runs); "search" is the search alone, from operations already built.
Reading the file is printed apart (parse). The Spark time excludes starting
the session, which is printed once.

``--porcupine DIR``: a checkout of Porcupine with Go installed; its own
benchmarks (``BenchmarkEtcdJepsen*``, ``BenchmarkKv50Clients*``) are run
there in this same run and their means printed beside ours. Without it the
reference figures from VERDICTS.md are printed. Run the whole script under
``taskset -c 0`` for the one-core comparison: Go then also sees one core.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checkers.history import read_history  # noqa: E402
from checkers.linearizability import check  # noqa: E402
from checkers.models import get_model  # noqa: E402
from checkers.parquet import write_parquet  # noqa: E402

# shared/testdata/porcupine/VERDICTS.md, used when no checkout is given.
VERDICTS_MS = {"etcd (all)": 440, "etcd_002.log": 170, "etcd_007.log": 125, "c50-ok.txt": 180,
               "c50-bad.txt": 7}
_BENCH = re.compile(r"^Benchmark(EtcdJepsen(\d{3})|Kv50Clients(Ok|Bad))\S*\s+\d+\s+(\d+) ns/op")


def porcupine_ms(checkout: str, runs: int) -> dict[str, float]:
    """Porcupine's own benchmarks, mean ms per file, keyed like our file names."""
    print(f"running Porcupine's benchmarks in {checkout} ({runs} runs each) ...", flush=True)
    out = subprocess.run(
        ["go", "test", "-run", "XXX", "-bench", "BenchmarkEtcdJepsen|BenchmarkKv50Clients",
         "-benchtime", f"{runs}x", "."], cwd=checkout, capture_output=True, text=True,
        check=True).stdout
    ms: dict[str, float] = {}
    for line in out.splitlines():
        m = _BENCH.match(line)
        if m:
            name = f"etcd_{m.group(2)}.log" if m.group(2) else f"c50-{m.group(3).lower()}.txt"
            ms[name] = int(m.group(4)) / 1e6
    if not ms:
        raise SystemExit(f"no benchmark lines in Porcupine's output:\n{out[-2000:]}")
    ms["etcd (all)"] = sum(v for k, v in ms.items() if k.startswith("etcd_"))
    return ms


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--corpus", default=str(Path(__file__).resolve().parents[2] / "shared" /
                                           "testdata" / "porcupine"))
    p.add_argument("--repeat", type=int, default=10, help="runs per file; the mean is printed")
    p.add_argument("--no-spark", action="store_true")
    p.add_argument("--python", action="store_true", help="the Python reference search")
    p.add_argument("--porcupine", metavar="DIR", help="a Porcupine checkout to run beside")
    a = p.parse_args()
    if a.repeat < 1:
        p.error("--repeat must be at least 1")
    engine = "python" if a.python else "auto"
    root = Path(a.corpus)
    files = [(f, "etcd") for f in sorted((root / "jepsen").glob("etcd_*.log"))]
    files += [(root / "kv" / "c50-ok.txt", "kv"), (root / "kv" / "c50-bad.txt", "kv")]
    peer = porcupine_ms(a.porcupine, a.repeat) if a.porcupine else VERDICTS_MS
    peer_label = "porcupine (same run)" if a.porcupine else "porcupine (VERDICTS.md)"
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
          f"{peer_label:>24}")
    with tempfile.TemporaryDirectory() as d:
        for f, model in files:
            t = time.perf_counter()
            rows = read_history(f)
            parse[model] += time.perf_counter() - t
            if not rows:
                continue
            hm = get_model(model)
            partition = model == "kv"
            local = searched = 0.0
            for _ in range(a.repeat):
                t = time.perf_counter()
                keyed = hm.operations(rows, partition)
                t1 = time.perf_counter()
                r = check(hm.model(partition), (), keyed=keyed, engine=engine)
                local += time.perf_counter() - t
                searched += time.perf_counter() - t1
            local /= a.repeat
            searched /= a.repeat
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
            ref = peer.get(f.name)
            print(f"{f.name:<16} {str(r.valid):<8} {local * 1000:>10.1f} "
                  f"{searched * 1000:>10.1f} "
                  f"{spark * 1000:>10.1f} {'' if ref is None else f'{ref:.1f}':>24}")
    print(f"total etcd (102 files): local {totals['etcd'][0] * 1000:.0f} ms (search "
          f"{search['etcd'] * 1000:.0f} ms), spark {totals['etcd'][1] * 1000:.0f} ms; "
          f"{peer_label} {peer['etcd (all)']:.0f} ms")
    print(f"total kv c50 (2 files): local {totals['kv'][0] * 1000:.0f} ms (search "
          f"{search['kv'] * 1000:.0f} ms), spark {totals['kv'][1] * 1000:.0f} ms; "
          f"{peer_label} {peer['c50-ok.txt'] + peer['c50-bad.txt']:.0f} ms")
    print(f"parse etcd (102 files): {parse['etcd'] * 1000:.0f} ms; parse kv c50 (2 files): "
          f"{parse['kv'] * 1000:.0f} ms")
    print(f"engine: {'python' if a.python else 'native kernel'}; runs per file: {a.repeat} "
          f"(mean); cores available: {len(os.sched_getaffinity(0))}; load average "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
