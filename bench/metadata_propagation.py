"""How long after CreateTopics returns every broker lists the new topic, and how long a
transaction takes on each of several transactional ids (coordinators on different
``__transaction_state`` partitions), on three local node processes (127.0.0.1-3).

    python bench/metadata_propagation.py [--topics 20] [--txn-ids 6] [--txns 12]

Metadata: for each of ``--topics`` topics, the time from the CreateTopics answer until all
three brokers' Metadata name it with its partitions (one admin client per broker, asked in
turn). Transactions: a confluent-kafka transactional producer per id runs ``--txns``
transactions of one record each, committed; the median and maximum per id (the first
transaction, which finds its coordinator, is left out). Prints median and maximum.
"""
import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.local_cluster import LocalCluster  # noqa: E402


def quiet(_err) -> None:
    pass


def create(admin: AdminClient, name: str) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            admin.create_topics([NewTopic(name, 3, 3)])[name].result(30)
            return
        except Exception as exc:  # noqa: BLE001 - the cluster may still be electing
            if "already exists" in str(exc):
                return
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--txn-ids", type=int, default=6)
    ap.add_argument("--txns", type=int, default=12)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as root:
        c = LocalCluster(Path(root), nodes=3, brokers=True)
        c.start_all()
        try:
            admin = AdminClient({"bootstrap.servers": c.bootstrap(), "error_cb": quiet})
            each = [AdminClient({"bootstrap.servers": f"{c.host(i)}:{c.kafka_port}",
                                 "error_cb": quiet}) for i in c.ids]
            create(admin, "warm-up")
            lags = []
            for n in range(args.topics):
                name = f"t{n}"
                create(admin, name)
                start = time.monotonic()
                pending = list(each)
                while pending:
                    md = pending[0].list_topics(name, timeout=10).topics.get(name)
                    if md is not None and md.error is None and len(md.partitions) == 3:
                        pending.pop(0)
                lags.append(1000 * (time.monotonic() - start))
            print(f"metadata: a new topic on all 3 brokers {statistics.median(lags):.0f} ms "
                  f"after CreateTopics returned (median of {len(lags)}), max {max(lags):.0f} ms")
            for k in range(args.txn_ids):
                p = Producer({"bootstrap.servers": c.bootstrap(), "transactional.id": f"x{k}",
                              "error_cb": quiet})
                p.init_transactions(60)
                times = []
                for n in range(args.txns):
                    start = time.monotonic()
                    p.begin_transaction()
                    p.produce("t0", b"v", partition=n % 3)
                    p.commit_transaction(60)
                    times.append(1000 * (time.monotonic() - start))
                p.flush(10)
                rest = times[1:]
                print(f"transactional id x{k}: a committed transaction {statistics.median(rest):.0f}"
                      f" ms (median of {len(rest)}), max {max(rest):.0f} ms")
        finally:
            c.close()


if __name__ == "__main__":
    main()
