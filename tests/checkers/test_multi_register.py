"""Knossos's multi-register model: txn operations of reads and writes over many registers
(``chaoskraft check --model multi-register``)."""
from harness.cli import main


def history(tmp_path, text: str) -> str:
    path = tmp_path / "mr.edn"
    path.write_text(text)
    return str(path)


# Two registers starting at 0. A writes x and y in one transaction; B, concurrent with it,
# reads both; C, after it, reads both.
GOOD = """[{:type :invoke :f :txn :value [[:write :x 1] [:write :y 1]] :process 0}
{:type :invoke :f :txn :value [[:read :x nil] [:read :y nil]] :process 1}
{:type :ok :f :txn :value [[:read :x 0] [:read :y 0]] :process 1}
{:type :ok :f :txn :value [[:write :x 1] [:write :y 1]] :process 0}
{:type :invoke :f :txn :value [[:read :x nil] [:read :y nil]] :process 2}
{:type :ok :f :txn :value [[:read :x 1] [:read :y 1]] :process 2}
{:type :invoke :f :txn :value [[:read :x nil] [:write :y 2]] :process 1}
{:type :info :f :txn :value [[:read :x nil] [:write :y 2]] :process 1}
{:type :invoke :f :txn :value [[:r :y nil]] :process 2}
{:type :ok :f :txn :value [[:r :y 2]] :process 2}]
"""


def test_a_good_history_is_linearizable(tmp_path, capsys):
    path = history(tmp_path, GOOD)
    assert main(["check", "--model", "multi-register", "--initial", '{"x": 0, "y": 0}',
                 "--engine", "local", path]) == 0
    assert "verdict: valid" in capsys.readouterr().out


def test_a_torn_transaction_is_not(tmp_path, capsys):
    # B sees A's write of x but not of y, after A completed: no order explains it.
    bad = GOOD.replace("[[:read :x 1] [:read :y 1]] :process 2",
                       "[[:read :x 1] [:read :y 0]] :process 2")
    assert main(["check", "--model", "multi-register", "--initial", '{"x": 0, "y": 0}',
                 "--engine", "local", history(tmp_path, bad)]) == 1
    out = capsys.readouterr().out
    assert "verdict: invalid" in out and "txn [r :x 1] [r :y 0]" in out, out


def test_the_registers_start_at_nil_unless_given(tmp_path, capsys):
    # A read of 0 before any write needs the initial values.
    assert main(["check", "--model", "multi-register", "--engine", "local",
                 history(tmp_path, GOOD)]) == 1
    capsys.readouterr()


def test_an_operation_of_another_shape_is_named(tmp_path, capsys):
    path = history(tmp_path, "[{:type :invoke :f :txn :value [[:cas :x 1]] :process 0}\n"
                             "{:type :ok :f :txn :value [[:cas :x 1]] :process 0}]\n")
    assert main(["check", "--model", "multi-register", "--engine", "local", path]) == 3
    assert "micro-operation 0 must be [read k v] or [write k v]" in capsys.readouterr().err
