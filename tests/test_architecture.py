"""The project's shape: no import cycle between its modules, counting imports inside
functions too (a lazy import that closes a cycle is still a cycle, only hidden)."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "checkers", "harness", "nemesis", "workloads", "node_image", "simulator")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            parts = p.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = p
    return out


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = m.split(".")[: len(m.split(".")) - node.level + (1 if is_pkg else 0)]
                    base = ".".join(base + ([node.module] if node.module else []))
                else:
                    base = node.module
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            else:
                continue
            for t in targets:
                while t and t not in mods:  # a name imported from a module: the module
                    t = t.rpartition(".")[0]
                if t and t != m and not m.startswith(t + "."):  # a package's own __init__
                    graph[m].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_in_the_project():
    found = cycles(import_graph())
    assert not found, "modules that import each other, directly or around a loop: " + "; ".join(
        " <-> ".join(c) for c in found)


def test_the_lowest_layer_imports_nothing_of_the_project():
    """core is the bottom layer: every package may use it, it uses none of them."""
    graph = import_graph()
    up = sorted(f"{m} -> {t}" for m in graph if m.split(".")[0] == "core"
                for t in graph[m] if t.split(".")[0] != "core")
    assert not up, "core imports from above it: " + "; ".join(up)
    assert "core.verdict" in graph["harness.runner"], "the finder sees core"


# The layers, lowest first: a folder imports only from folders of a lower layer. The
# checkers, the node and the fault packages stand side by side on the bottom one; the
# workloads own their generators, clients and checks; the simulator runs the node cores
# with the workloads' pieces and the packages' forms; the harness (commands, runner,
# campaign, analysis, matrix, simulate, serve) alone looks workloads up by name.
LAYERS = {"core": 0, "checkers": 1, "node_image": 1, "nemesis": 1, "workloads": 2,
          "simulator": 3, "harness": 4}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {t}" for m in graph for t in graph[m]
                  if m.split(".")[0] != t.split(".")[0]
                  and LAYERS[m.split(".")[0]] <= LAYERS[t.split(".")[0]])


def test_every_import_between_folders_points_down_a_layer():
    assert set(LAYERS) == set(PACKAGES)
    up = upward_imports(import_graph())
    assert not up, "imports sideways or up the layers: " + "; ".join(up)


def test_the_layer_check_finds_an_import_up_or_sideways():
    graph = {"checkers.a": {"core.b"}, "core.b": set(), "nemesis.c": {"checkers.a"},
             "workloads.d": {"harness.e"}, "harness.e": {"workloads.d"}}
    assert upward_imports(graph) == ["nemesis.c -> checkers.a", "workloads.d -> harness.e"]


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert "harness.campaign" in import_graph()["harness.runner"]


def _named_strings(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """String constants of a module that are one of ``names``, except the commands a backend
    gives the node's supervisor (``ctl(node, "kill")``: its protocol, not a fault)."""
    tree = ast.parse(path.read_text(), str(path))
    supervisor = {id(a) for node in ast.walk(tree) if isinstance(node, ast.Call)
                  and isinstance(node.func, ast.Attribute) and node.func.attr == "ctl"
                  for a in node.args}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in supervisor]


def test_the_harness_names_no_workload_and_no_fault():
    """The harness runs workloads (workloads.registry) and fault packages (nemesis.packages)
    through their protocols; only configuration defaults (harness/config.py) name them."""
    from nemesis.packages import PACKAGES
    from workloads.registry import WORKLOADS
    names = set(PACKAGES) | set(WORKLOADS)
    found = [f"{p.relative_to(ROOT)}:{line}: {value!r}"
             for p in sorted((ROOT / "harness").rglob("*.py")) if p.name != "config.py"
             for line, value in _named_strings(p, names)]
    assert not found, "workload or fault names in harness/:\n" + "\n".join(found)


def test_the_name_finder_finds_a_name(tmp_path):
    p = tmp_path / "m.py"
    p.write_text('if cfg.workload == "queue":\n    backend.ctl(1, "kill")\nf("kill")\n')
    assert _named_strings(p, {"queue", "kill"}) == [(1, "queue"), (3, "kill")]


MAX_MODULE_LINES = 600  # a file over this does several jobs: split it by concern


def _long_modules(root: Path, limit: int) -> list[str]:
    """Python files under the project's packages, bench/ and tests/ longer than ``limit``
    lines, as 'path (n lines)'."""
    out = []
    for folder in (*PACKAGES, "bench", "tests"):
        for path in sorted((root / folder).rglob("*.py")):
            n = path.read_text().count("\n")
            if n > limit:
                out.append(f"{path.relative_to(root)} ({n} lines)")
    return out


def test_no_module_is_over_600_lines():
    assert _long_modules(ROOT, MAX_MODULE_LINES) == []


def test_the_length_check_finds_a_long_module(tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "short.py").write_text("x = 1\n" * 3)
    (tmp_path / "core" / "long.py").write_text("x = 1\n" * 4)
    assert _long_modules(tmp_path, 3) == ["core/long.py (4 lines)"]


def test_tests_sit_in_folders_by_layer_with_at_most_five_files_at_the_top():
    top = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    assert len(top) <= 5, top
    layers = {"node", "checkers", "nemesis", "workloads", "harness", "simulator", "docker"}
    assert layers <= {p.name for p in (ROOT / "tests").iterdir() if p.is_dir()}


RUN_FILES = {"results.json", "config.yaml", "plan.json", "generated.jsonl", "faults.json",
             "liveness.json", "history-start.json"}


def _run_file_names(root: Path, folders) -> list[str]:
    """Places outside core/run_dir.py that name a run directory's files as a string of their
    own (a docstring that mentions one is text, not a path, and does not count)."""
    out = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and node.value in RUN_FILES:
                    out.append(f"{path.relative_to(root)}:{node.lineno}: {node.value}")
    return out


def test_only_run_dir_reads_and_writes_a_run_directory():
    """core.run_dir.RunDir is the one reader and writer of a run directory's files, so
    each is read with the same checks and errors that name file and line."""
    assert _run_file_names(ROOT, ("harness", "workloads", "simulator", "nemesis", "checkers")) \
        == []


def test_the_run_file_finder_finds_a_name(tmp_path):
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "m.py").write_text('"""reads results.json"""\np = "results.json"\n')
    assert _run_file_names(tmp_path, ("harness",)) == ["harness/m.py:2: results.json"]


def test_only_the_application_layer_imports_the_harness():
    """The harness (commands, runner, campaign, analysis) is the top layer: it looks the
    workloads up by name and passes them on; no package below it imports it."""
    graph = import_graph()
    up = sorted(f"{m} -> {t}" for m in graph if m.split(".")[0] not in ("harness",)
                for t in graph[m] if t.split(".")[0] == "harness")
    assert not up, "imports of the harness from below it: " + "; ".join(up)


def test_the_simulator_names_no_workload_outside_its_forms():
    """The simulator runs each workload through its simulated form (simulator/forms.py, the
    one place that names them, with the names' list in simulator/__init__.py); the queue's
    topic happens to be called "queue" too (simulator/kafka_state.py)."""
    from workloads.registry import WORKLOADS
    allowed = {"forms.py", "__init__.py", "kafka_state.py"}
    found = [f"{p.relative_to(ROOT)}:{line}: {value!r}"
             for p in sorted((ROOT / "simulator").rglob("*.py")) if p.name not in allowed
             for line, value in _named_strings(p, set(WORKLOADS))]
    assert not found, "workload names in simulator/:\n" + "\n".join(found)


def test_the_simulator_names_no_fault():
    """The seeded simulator's faults come only through the fault packages (their seeded
    forms, ``nemesis.seeded``) and a twin's through their ``simulate``: no package is named
    in simulator/ (the Kafka clients' "partition" is a topic partition's field)."""
    from nemesis.packages import PACKAGES
    kafka = {"kafka_clients.py": {"partition"}}
    found = [f"{p.relative_to(ROOT)}:{line}: {value!r}"
             for p in sorted((ROOT / "simulator").rglob("*.py"))
             for line, value in _named_strings(p, set(PACKAGES) - kafka.get(p.name, set()))]
    assert not found, "fault names in simulator/:\n" + "\n".join(found)


def test_every_seeded_timeline_is_timed_once():
    """Each timeline of the seeded simulator is timed by exactly one package's form (a
    second would draw its own interval and the seed's schedule would depend on the order
    packages are found in); ``seeded_forms`` refuses anything else."""
    import pytest

    from nemesis.packages import PACKAGES
    from nemesis.seeded import TIMELINES, Seeded, ordered, seeded_forms
    forms = seeded_forms(PACKAGES)
    assert set(TIMELINES) <= set(forms), "a timeline no package draws"
    assert ordered(forms)[:len(TIMELINES)] == list(TIMELINES)

    class Twice:
        seeded = (Seeded("network", mean_ms=lambda o, q: 1),)
    with pytest.raises(ValueError, match="timed by 2 packages"):
        seeded_forms({**PACKAGES, "twice": Twice})

    class Untimed:
        seeded = (Seeded("elsewhere"),)
    with pytest.raises(ValueError, match="'elsewhere' is timed by 0 packages"):
        seeded_forms({**PACKAGES, "untimed": Untimed})
