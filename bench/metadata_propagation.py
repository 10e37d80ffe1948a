"""How long after CreateTopics returns every broker lists the new topic, and how long a
transaction takes on each ``__transaction_state`` partition (each a coordinator of its
own), on three local node processes (127.0.0.1-3).

    python bench/metadata_propagation.py [--topics 20] [--coordinators 50] [--txns 7]

Metadata: for each of ``--topics`` topics, the time from the CreateTopics answer until all
three brokers' Metadata name it with its partitions (one admin client per broker, asked in
turn). Transactions: one transactional id per ``__transaction_state`` partition (the
first ``--coordinators`` of its 50), each a confluent-kafka transactional producer running
``--txns`` transactions of 8 records over 3 partitions, every third aborted; per
coordinator partition the median of its transactions (the first, which finds the
coordinator, left out). Prints the medians' spread (fastest, median, slowest partition)
and the slowest partitions, so that a coordinator partition slower than the others shows.
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

from node_image.broker.group_metadata import partition_for  # noqa: E402
from tests.local_cluster import LocalCluster  # noqa: E402

TXN_PARTITIONS = 50  # transaction.state.log.num.partitions, the node's default


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
    ap.add_argument("--coordinators", type=int, default=50)
    ap.add_argument("--txns", type=int, default=7)
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
            ids: dict[int, str] = {}  # __transaction_state partition -> a transactional id
            k = 0
            while len(ids) < min(args.coordinators, TXN_PARTITIONS):
                pid = partition_for(f"x{k}", TXN_PARTITIONS)
                if pid < args.coordinators:
                    ids.setdefault(pid, f"x{k}")
                k += 1
            medians = {}
            for pid, txn_id in sorted(ids.items()):
                p = Producer({"bootstrap.servers": c.bootstrap(), "transactional.id": txn_id,
                              "error_cb": quiet})
                p.init_transactions(60)
                times = []
                for n in range(args.txns):
                    start = time.monotonic()
                    p.begin_transaction()
                    for r in range(8):
                        p.produce("t0", b"v", partition=r % 3)
                    if n % 3 == 2:
                        p.abort_transaction(60)
                    else:
                        p.commit_transaction(60)
                    times.append(1000 * (time.monotonic() - start))
                p.flush(10)
                medians[pid] = statistics.median(times[1:])
            ranked = sorted(medians.items(), key=lambda kv: kv[1])
            print(f"transactions on {len(medians)} coordinator partitions, median per "
                  f"partition: fastest {ranked[0][1]:.0f} ms, median "
                  f"{statistics.median(medians.values()):.0f} ms, slowest {ranked[-1][1]:.0f} ms")
            print("slowest: " + ", ".join(f"__transaction_state-{pid} {ms:.0f} ms"
                                          for pid, ms in ranked[::-1][:5]))
        finally:
            c.close()


if __name__ == "__main__":
    main()
