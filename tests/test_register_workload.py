"""The register workload's generator: pure, unique values, one written key per node per window."""
import itertools

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
