import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

IN_CI = os.environ.get("CI") == "true"


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


@pytest.fixture(scope="module")
def spark():
    """A Spark session (local[2]) for a test module, stopped after it."""
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

