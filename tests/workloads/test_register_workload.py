"""The register workload's generator: pure, unique values, one written key per node per window."""
import itertools
import json

import pytest

from workloads.register import RegisterGenerator


def take(gen, process, n=240):
    return list(itertools.islice(gen.ops(process), n))


def test_generator_is_a_function_of_seed_and_process_with_unique_values():
    gen = RegisterGenerator(7, [3, 1, 2, 5, 4], ops_per_key=60)
    assert take(gen, 4) == take(RegisterGenerator(7, [1, 2, 3, 4, 5], ops_per_key=60), 4)
    assert take(gen, 4) != take(RegisterGenerator(8, [1, 2, 3, 4, 5], ops_per_key=60), 4)
    values = [op.value if op.f == "write" else op.value[1]
              for p in range(15) for op in take(gen, p) if op.f != "read"]
    assert len(values) == len(set(values)), "every written value is unique"
    assert {op.f for op in take(gen, 0)} == {"read", "write", "cas"}


@pytest.mark.parametrize("nodes", [[1, 2, 3, 4, 5], [2, 7, 9]])
def test_each_key_is_written_by_one_nodes_processes_and_read_by_all(nodes):
    gen = RegisterGenerator(3, nodes, ops_per_key=60)
    n = len(nodes)
    writers: dict[str, set[int]] = {}
    readers: dict[str, set[int]] = {}
    for p in range(15):
        for op in take(gen, p):
            assert op.node == sorted(nodes)[p % n], "process p talks to node p mod n"
            window = op.seq // 60
            index = int(op.key[1:])
            assert window * n <= index < (window + 1) * n, "keys of the process's window"
            (readers if op.f == "read" else writers).setdefault(op.key, set()).add(p)
    for key, ps in writers.items():
        assert {p % n for p in ps} == {int(key[1:]) % n}, (key, ps)
    assert all(len({p % n for p in ps}) > 1 for ps in readers.values()), "read through every node"


def test_cas_expects_what_the_process_last_wrote_to_that_key():
    last: dict[str, int] = {}
    for op in take(RegisterGenerator(5, [1, 2, 3], ops_per_key=30), 1, 600):
        if op.f == "cas":
            assert op.value[0] == last.get(op.key)
            last[op.key] = op.value[1]
        elif op.f == "write":
            last[op.key] = op.value


def test_a_run_draws_its_operations_from_the_generator_it_wrote_out(tmp_path):
    """One generator per run: the runner writes generated.jsonl from the generator it hands
    the campaign, and the workload draws from that one object (it once built a second, with
    the cluster's ids, so what a run recorded as generated could differ from what it ran); a
    generator aimed at other nodes than the cluster's is refused before any operation."""
    import asyncio
    from types import SimpleNamespace

    from harness.campaign import Campaign
    from harness.config import resolve
    from harness.history import HistoryWriter
    from harness.runner import generated_ops, write_plan
    cfg = resolve({"seed": 3, "workload": "register", "nodes": 3}, {})
    backend = SimpleNamespace(nodes=[SimpleNamespace(node_id=i, address=f"10.0.0.{i}")
                                     for i in (1, 2, 3)])
    mine = RegisterGenerator(3, [1, 2, 3], cfg.ops_per_key)
    camp = Campaign(cfg, backend, HistoryWriter(tmp_path / "history.jsonl"), lambda m: None,
                    steps=[], generator=mine)
    assert camp.generator is mine and camp.steps == []
    write_plan(cfg, tmp_path, camp.steps, camp.generator)
    written = [json.loads(line) for line in (tmp_path / "generated.jsonl").read_text().splitlines()]
    assert written == list(generated_ops(cfg, generator=mine))
    assert (tmp_path / "plan.json").read_text() == "[]\n"
    elsewhere = Campaign(cfg, backend, HistoryWriter(tmp_path / "h2.jsonl"), lambda m: None,
                         steps=[], generator=RegisterGenerator(3, [4, 5, 6]))
    with pytest.raises(ValueError, match=r"aims at nodes \[4, 5, 6\], the cluster has \[1, 2, 3\]"):
        asyncio.run(elsewhere.workload.workers(None))
