import contextlib
import os
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TESTDATA = ROOT / "tests" / "testdata"  # histories and scenario scripts of the project's own
PORCUPINE = ROOT.parent / "shared" / "testdata" / "porcupine"  # the corpus beside the project
# a folder's tests may use another folder's makers of runs and histories (test_report's
# make_run, test_queue_differential's generate): every folder is importable, so any one file
# runs alone as well as in the whole suite
for _folder in sorted(p for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name != "testdata"
                      and not p.name.startswith((".", "_"))):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))

IN_CI = os.environ.get("CI") == "true"
# `make nightly`: the long sweeps (200 simulator seeds, every planted bug from seed 0, every
# Docker seed of a cell); CI and `make test` run one strict representative of each
NIGHTLY = os.environ.get("CHAOSKRAFT_NIGHTLY") == "1"


def _docker_available() -> str | None:
    try:
        import docker
        docker.from_env().ping()
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means no engine
        return f"{type(exc).__name__}: {exc}"


@pytest.fixture(scope="session")
def docker_client():
    """A Docker client. Without an engine: a skip on a laptop, a failure under CI=true."""
    problem = _docker_available()
    if problem:
        if IN_CI:
            pytest.fail(f"CI=true and no Docker engine: {problem}")
        pytest.skip(f"no Docker engine: {problem}")
    import docker
    return docker.from_env()


@pytest.fixture(scope="session")
def node_image(docker_client):
    from harness.images import build_images
    return build_images(docker_client, log=lambda msg: None)


@pytest.fixture
def spark_if_nightly(request):
    """The Spark session in `make nightly`, None in CI: tests that check in process in CI
    and against Spark as well at night, without starting a JVM on CI's workers."""
    return request.getfixturevalue("spark") if NIGHTLY else None


@pytest.fixture(scope="session")
def spark():
    """One Spark session (local[2]) for the whole run of a worker, stopped at its end. The
    modules that use it in CI share one worker (``xdist_group("spark")``), so CI starts one
    JVM for them."""
    from checkers import spark as sp
    session = sp.spark_session()
    yield session
    sp.stop_session()


def labelled(client, label="chaoskraft=1"):
    return (len(client.containers.list(all=True, filters={"label": label})),
            len(client.networks.list(filters={"label": label})),
            len(client.volumes.list(filters={"label": label})))


CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium through selenium (Debian's chromium and chromium-driver). Without
    them: a skip on a laptop, a failure under CI=true."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if missing:
        if IN_CI:
            pytest.fail(f"CI=true and no {', '.join(missing)} (make setup installs them)")
        pytest.skip(f"no {', '.join(missing)}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,1000",
                "--allow-file-access-from-files", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    yield driver
    driver.quit()


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group markers
def pytest_collection_modifyitems(config, items):
    # `@pytest.mark.nightly`: a cell of a sweep, or a control, that `make nightly` runs and CI
    # leaves to it (deselected, not skipped: CI's budget, DESIGN section 9)
    if not NIGHTLY:
        later = [item for item in items if item.get_closest_marker("nightly")]
        if later:
            config.hook.pytest_deselected(items=later)
            items[:] = [item for item in items if not item.get_closest_marker("nightly")]
    _docker_streams(items)
    _module_clusters(items)


def _shares_module_fixture(item) -> bool:
    return any(defs[-1].scope == "module" for defs in item._fixtureinfo.name2fixturedefs.values())


def _module_clusters(items) -> None:
    """The tests of a module that share a module-scoped fixture (three node processes, as a
    rule) on one worker: under ``--dist loadgroup`` they were dealt to several, each starting
    the module's cluster again, and a test that follows an earlier one on the same cluster
    (kraft.version raised after metadata.version) then ran on a fresh one and failed."""
    for item in items:
        if item.get_closest_marker("docker") or item.get_closest_marker("xdist_group"):
            continue
        if _shares_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(f"module-{item.module.__name__}"))


def _docker_streams(items) -> None:
    """Every Docker test in one of DOCKER_SLOTS xdist groups (``docker-0``, ...), so that
    under ``--dist loadgroup`` at most that many workers run Docker tests and the others
    never sit waiting for a slot: a worker waiting for one holds the tests queued behind
    it (on a loaded 2-core CI run, 1,350 s of the workers' time went to waiting, and the
    last 370 s of the run were those tests). A module whose tests share a module-scoped
    fixture (a cluster, the SSH hosts) stays in one stream; the streams are dealt by what
    the tests cost (``docker_costs``: dealt by count, one stream ran 60 s past the other
    on a quiet run)."""
    import docker_costs
    units: dict = {}
    for item in items:
        if not item.get_closest_marker("docker"):
            continue
        units.setdefault(item.module.__name__ if _shares_module_fixture(item) else item.nodeid,
                         []).append(item)
    streams = docker_costs.split({name: [i.nodeid for i in unit] for name, unit in units.items()},
                                 docker_costs.load(), DOCKER_SLOTS)
    for name, unit in units.items():
        for item in unit:
            item.add_marker(pytest.mark.xdist_group(f"docker-{streams[name]}"))


# Docker tests at once across the pytest-xdist workers (CHAOSKRAFT_DOCKER_SLOTS): on a slow
# 2-core machine four campaigns side by side left each waiting on the CPU 97% of the time, and
# a planted bug whose finding needs clients to make progress (a cycle of open transactions,
# an unclean election losing acknowledged writes) then read valid
DOCKER_SLOTS = int(os.environ.get("CHAOSKRAFT_DOCKER_SLOTS", "2"))


@contextlib.contextmanager
def docker_slot(root: Path, slots: int = DOCKER_SLOTS, poll_s: float = 0.2):
    """One of ``slots`` lock files under ``root`` (shared by the workers), held while the
    block runs; waits for a free one."""
    import fcntl
    files = [open(root / f"docker-slot-{i}", "a+") for i in range(slots)]
    try:
        while True:
            for f in files:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                try:
                    yield
                finally:
                    fcntl.flock(f, fcntl.LOCK_UN)
                return
            time.sleep(poll_s)
    finally:
        for f in files:
            f.close()


@pytest.fixture(autouse=True)
def _one_of_the_docker_slots(request, tmp_path_factory):
    """Every test marked ``docker`` holds one of DOCKER_SLOTS slots while it runs."""
    if not request.node.get_closest_marker("docker"):
        yield
        return
    base = tmp_path_factory.getbasetemp()
    with docker_slot(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base):
        yield


def wait_for(what, predicate, timeout_s=60):
    """``predicate()``'s first truthy value, polled every 0.3 s; an exception counts as not yet
    (a cluster coming up refuses connections). Fails naming ``what`` after ``timeout_s``, and
    what the last try raised or gave."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = predicate()
            if value:
                return value
            last = f"gave {value!r}"
        except Exception as exc:  # noqa: BLE001 - not there yet
            last = f"raised {type(exc).__name__}: {exc}"
        assert time.monotonic() < deadline, f"timed out waiting for {what} (last try {last})"
        time.sleep(0.3)


@pytest.fixture
def brokers3(tmp_path):
    """Three combined controller/broker node processes on 127.0.0.1-3, stopped afterwards."""
    from local_cluster import LocalCluster
    c = LocalCluster(tmp_path, nodes=3, brokers=True)
    c.start_all()
    try:
        c.wait_serving()
        yield c
    finally:
        c.close()


@contextlib.contextmanager
def local_brokers(root, **kw):
    """Three combined controller/broker node processes on 127.0.0.1-3 under ``root`` (for
    a module-scoped fixture), each serving Kafka clients before the first test (a test may
    run first on its xdist worker), stopped afterwards."""
    from local_cluster import LocalCluster
    c = LocalCluster(root, nodes=3, brokers=True, **kw)
    c.start_all()
    try:
        c.wait_serving()
        yield c
    finally:
        c.close()


def create_topic_everywhere(cluster, name, partitions=1, config=None, timeout_s=90,
                            replication_factor=3):
    """Create ``name`` on a local cluster and wait until every broker
    lists it: each broker answers Metadata and DescribeConfigs from its own copy of the
    metadata, which follows the quorum a moment behind."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(), "error_cb": lambda e: None})

    def made():
        try:
            admin.create_topics([NewTopic(name, partitions, replication_factor,
                                          config=config or {})])[
                name].result(30)
        except Exception as exc:
            if "already exists" not in str(exc):  # an earlier attempt went through
                raise
        for i in getattr(cluster, "broker_ids", cluster.ids):
            one = AdminClient({"bootstrap.servers": f"{cluster.host(i)}:{cluster.kafka_port}"})
            t = one.list_topics(name, timeout=10).topics.get(name)
            if t is None or t.error is not None:
                return False
        return True
    wait_for(f"topic {name} on every broker", made, timeout_s=timeout_s)


def read_back(cluster, topic, count, group, timeout_s=60):
    """The integer values of partition 0 of ``topic`` from its start, read committed by a
    confluent-kafka consumer until at least ``count`` came (and whatever follows within 2 s),
    each record read once."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": group,
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    try:
        def more():
            for msg in c.consume(100, timeout=1):
                assert msg.error() is None, msg.error()
                out.append(int(msg.value()))
            return len(out) >= count
        wait_for(f"{count} records read back", more, timeout_s=timeout_s)
        out += [int(m.value()) for m in c.consume(100, timeout=2) if m.error() is None]
    finally:
        c.close()
    return out
