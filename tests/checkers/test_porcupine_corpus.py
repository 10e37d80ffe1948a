"""chaoskraft check agrees with all 112 known verdicts of the Porcupine corpus."""
import subprocess
import sys

import pytest

from checkers.history import read_history
from conftest import NIGHTLY, PORCUPINE
from checkers.linearizability import check
from checkers.models import get_model

CORPUS = PORCUPINE
LINEARIZABLE_ETCD = {2, 5, 7, 18, 25, 31, 38, 45, 48, 49, 51, 53, 56, 67, 75, 76, 80, 87, 92, 98,
                     100, 101, 102}
ETCD = [n for n in range(103) if n != 95]  # etcd_095.log is empty: the cluster never started
KV = [("c01-ok", True), ("c01-bad", False), ("c10-ok", True), ("c10-bad", False),
      ("c50-ok", True), ("c50-bad", False)]

pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason=f"corpus not at {CORPUS}")


def verdict(path, model_name, partition=True):
    m = get_model(model_name)
    return check(m.model(partition), (), keyed=m.operations(read_history(path), partition),
                 timeout_s=300).valid


@pytest.mark.parametrize("n", ETCD)
def test_etcd_log(n):
    assert verdict(CORPUS / "jepsen" / f"etcd_{n:03d}.log", "etcd") is (n in LINEARIZABLE_ETCD)


@pytest.mark.parametrize("name,expected", KV)
def test_kv_partitioned(name, expected):
    assert verdict(CORPUS / "kv" / f"{name}.txt", "kv") is expected


@pytest.mark.parametrize("name,expected", KV[:4])
def test_kv_unpartitioned(name, expected):
    assert verdict(CORPUS / "kv" / f"{name}.txt", "kv", partition=False) is expected


def test_corpus_size_is_112():
    assert len(ETCD) + len(KV) + len(KV[:4]) == 112
    assert read_history(CORPUS / "jepsen" / "etcd_095.log") == []


# Through Spark each case starts a JVM of its own: CI runs the failing one (test_spark checks
# valid histories through Spark in process), `make nightly` both
@pytest.mark.parametrize("path,model,code,engine", [
    ("jepsen/etcd_002.log", "etcd", 0, "local"), ("jepsen/etcd_057.log", "etcd", 1, "local"),
    ("kv/c50-bad.txt", "kv", 1, "spark")] + ([("kv/c10-ok.txt", "kv", 0, "spark")] if NIGHTLY else []))
def test_check_command_exit_codes(path, model, code, engine):
    p = subprocess.run([sys.executable, "-m", "harness.cli", "check", "--model", model,
                        "--engine", engine, str(CORPUS / path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == code, p.stdout + p.stderr
    assert f"verdict: {'valid' if code == 0 else 'invalid'}" in p.stdout
    if code == 1:
        assert "cannot linearize" in p.stdout
