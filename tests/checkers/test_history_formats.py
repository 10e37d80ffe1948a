"""Every history shape Jepsen, Knossos, Maelstrom, Elle and Porcupine write is read, and a bad
one is refused with the file, line and column of the first bad form."""
import pytest

from checkers.edn import IndependentTuple, loads
from checkers.history import HistoryError, read_history
from workloads.register_check import run_check


def verdict(tmp_path, text, model="cas-register", name="h.edn", **kw):
    f = tmp_path / name
    f.write_text(text)
    return run_check(read_history(f), model, engine="local", **kw).valid


STALE_READ = """{:process 0, :type :invoke, :f :write, :value 1}
{:process 0, :type :ok, :f :write, :value 1}
{:process 1, :type :invoke, :f :write, :value 2}
{:process 1, :type :ok, :f :write, :value 2}
{:process 0, :type :invoke, :f :read, :value nil}
{:process 0, :type :ok, :f :read, :value 1}
"""


def test_one_map_per_line(tmp_path):
    assert verdict(tmp_path, STALE_READ) is False
    assert verdict(tmp_path, STALE_READ.replace(":value 1}\n{:process 1", ":value 1}\n{:process 1")
                   .replace(":ok, :f :read, :value 1", ":ok, :f :read, :value 2")) is True


def test_knossos_vector_with_comments_and_edn_vectors_as_cas_values(tmp_path):
    text = """; a comment line first, as Knossos's data/ files have
[{:process 0, :type :invoke, :f :write, :value 0}
 {:process 0, :type :ok, :f :write, :value 0}
 ; the cas value is an EDN vector
 {:process 1, :type :invoke, :f :cas, :value [0 3]}
 {:process 1, :type :ok, :f :cas, :value [0 3]}
 {:process 2, :type :invoke, :f :read, :value nil}
 {:process 2, :type :ok, :f :read, :value 3}]
"""
    assert verdict(tmp_path, text, initial=0) is True
    assert verdict(tmp_path, text.replace(":value 3}]", ":value 0}]"), initial=0) is False


def test_a_list_at_top_level_and_maps_over_many_lines(tmp_path):
    text = """({:type :invoke,
  :f :write,
  :value 4, :process 0}
 {:type :ok, :f :write, :value 4, :process 0} ; inline comment
 {:type :invoke, :f :read, :value nil, :process 1}
 {:type :ok,
  :f :read,
  :value 4,
  :process 1})"""
    assert verdict(tmp_path, text) is True
    assert len(read_history(tmp_path / "h.edn")) == 4


def test_jepsen_0_3_tagged_records_with_index_time_and_error(tmp_path):
    text = """#jepsen.history.Op{:index 0, :time 11000, :type :invoke, :process 0, :f :write, :value 1}
#jepsen.history.Op{:index 1, :time 52000, :type :ok, :process 0, :f :write, :value 1}
#jepsen.history.Op{:index 2, :time 60000, :type :invoke, :process :nemesis, :f :start-partition, :value :majority}
#jepsen.history.Op{:index 3, :time 61000, :type :info, :process :nemesis, :f :start-partition, :value [:isolated {"n1" #{"n2" "n3"}}]}
#jepsen.history.Op{:index 4, :time 70000, :type :invoke, :process 1, :f :cas, :value [1 2]}
#jepsen.history.Op{:index 5, :time 90000, :type :fail, :process 1, :f :cas, :value [1 2], :error [:timeout "deadline"]}
#jepsen.history.Op{:index 6, :time 95000, :type :invoke, :process 2, :f :read, :value nil}
#jepsen.history.Op{:index 7, :time 99000, :type :ok, :process 2, :f :read, :value 1}
"""
    rows = read_history(_write(tmp_path, text))
    assert [r["index"] for r in rows] == list(range(8))
    assert rows[1]["time"] == 52000 and rows[2]["process"] == "nemesis"
    assert rows[5]["error"] == ["timeout", "deadline"]
    assert verdict(tmp_path, text) is True


def test_knossos_tuples(tmp_path):
    text = """[[0 :invoke :write 1]
 [0 :ok :write 1]
 [1 :invoke :read nil]
 [1 :ok :read 2]]"""
    assert verdict(tmp_path, text) is False


def test_maelstrom_lin_kv_independent_tuples_are_split_by_key(tmp_path):
    text = """{:type :invoke, :f :write, :value [0 1], :time 1, :process 0, :index 0}
{:type :ok, :f :write, :value [0 1], :time 2, :process 0, :index 1}
{:type :invoke, :f :write, :value [1 5], :time 3, :process 1, :index 2}
{:type :ok, :f :write, :value [1 5], :time 4, :process 1, :index 3}
{:type :invoke, :f :cas, :value [0 [1 2]], :time 5, :process 2, :index 4}
{:type :ok, :f :cas, :value [0 [1 2]], :time 6, :process 2, :index 5}
{:type :invoke, :f :read, :value [0 nil], :time 7, :process 3, :index 6}
{:type :ok, :f :read, :value [0 2], :time 8, :process 3, :index 7}
{:type :invoke, :f :read, :value [1 nil], :time 9, :process 3, :index 8}
{:type :ok, :f :read, :value [1 5], :time 10, :process 3, :index 9}
"""
    f = _write(tmp_path, text)
    r = run_check(read_history(f), "cas-register", engine="local")
    assert r.valid is True and sorted(k.key for k in r.keys) == [0, 1]
    bad = text.replace(":value [1 5], :time 10", ":value [1 1], :time 10")
    assert verdict(tmp_path, bad) is False


def test_jepsen_independent_tuple_records():
    assert loads("#jepsen.independent.Tuple{:key 3, :value [1 2]}") == IndependentTuple(3, [1, 2])


def test_jepsen_text_logs_with_and_without_the_log_prefix(tmp_path):
    body = ["0\t:invoke\t:write\t3", "0\t:ok\t:write\t3", "1\t:invoke\t:cas\t[3 4]",
            "1\t:ok\t:cas\t[3 4]", "2\t:invoke\t:read\tnil", "2\t:fail\t:read\t:timed-out",
            "3\t:invoke\t:read\tnil", "3\t:ok\t:read\t4"]
    plain = "\n".join(body) + "\n"
    logged = "\n".join(f"INFO  jepsen.util - {line}" for line in body) + "\n"
    for text in (plain, logged):
        rows = read_history(_write(tmp_path, text, "h.log"))
        assert rows[2]["value"] == [3, 4] and rows[5]["error"] == "timed-out"
        assert verdict(tmp_path, text, "etcd", "h.log") is True


def test_porcupine_kv_lines(tmp_path):
    text = """{:process 0, :type :invoke, :f :append, :key "0", :value "x 0 0 y"}
{:process 0, :type :ok, :f :append, :key "0", :value "x 0 0 y"}
{:process 1, :type :invoke, :f :get, :key "0", :value nil}
{:process 1, :type :ok, :f :get, :key "0", :value "x 0 0 y"}
"""
    assert verdict(tmp_path, text, "kv") is True


def test_elle_transactions_are_read_and_the_model_says_what_it_wants(tmp_path):
    text = """{:type :invoke, :f :txn, :value [[:append 5 1] [:r 5 nil]], :process 0, :index 0, :time 1}
{:type :ok, :f :txn, :value [[:append 5 1] [:r 5 [1]]], :process 0, :index 1, :time 2}
"""
    rows = read_history(_write(tmp_path, text))
    assert rows[1]["value"] == [["append", 5, 1], ["r", 5, [1]]]
    with pytest.raises(HistoryError, match=r"h.edn:1: the cas-register model has no operation :txn"):
        run_check(rows, "cas-register", engine="local")


def test_a_lone_info_is_skipped_as_knossos_does_and_a_lone_ok_is_an_error(tmp_path):
    text = STALE_READ.replace("{:process 0, :type :invoke, :f :read",
                              "{:process 7, :type :info, :f :read, :value nil}\n"
                              "{:process 0, :type :invoke, :f :read")
    assert verdict(tmp_path, text) is False
    with pytest.raises(HistoryError, match=r"h.edn:1: ok without an invoke for process 0"):
        verdict(tmp_path, "{:process 0, :type :ok, :f :write, :value 1}\n")


@pytest.mark.parametrize("text,where", [
    ("[{:process 0, :type :invoke, :f :write, :value 1}\n {:process 0 :type :ok", r"h.edn:2:2: '\{' is never closed"),
    ("{:process 0, :type :invoke, :f :write, :value 1]\n", r"h.edn:1:48: unexpected '\]' \(the '\{' opened at 1:1"),
    ("{:process 0, :type :invoke, :f :write, :value 1}\n{:process 0, :type :done, :f :write}\n",
     r"h.edn:2: :type :done is not one of :invoke, :ok, :fail, :info"),
    ("{:process 0, :type :invoke, :f :write, :value 1}\n{:type :ok, :f :write}\n",
     r"h.edn:2: operation has no :process"),
    ('{:process 0, :type :invoke, :f :write, :value "open}\n', r"h.edn:1: a string is never closed"),
    ("{:process 0, :type :invoke, :f :write, :value 1 :x}\n", r"h.edn:1:1: a map with an odd number"),
    ("{:process 0, :type :invoke, :f :write, :value 12abc}\n", r"h.edn:1:47: not a number: '12abc'"),
])
def test_bad_edn_names_file_line_and_column(tmp_path, text, where):
    with pytest.raises(HistoryError, match=where):
        read_history(_write(tmp_path, text))


def test_an_unknown_format_says_what_it_begins_with(tmp_path):
    with pytest.raises(HistoryError, match=r"h.txt:1: not a chaoskraft .*it begins 'hello world'"):
        read_history(_write(tmp_path, "hello world\n", "h.txt"))


def test_edn_values():
    assert loads('{:a "x\\ny" :b #{1 2} :c \\newline :d -4.5 :e 7N :f nil :g true '
                 ':h #inst "2020-01-01" :i #_ 99 100}') == {
        "a": "x\ny", "b": [1, 2], "c": "\n", "d": -4.5, "e": 7, "f": None, "g": True,
        "h": "2020-01-01", "i": 100}


def _write(tmp_path, text, name="h.edn"):
    f = tmp_path / name
    f.write_text(text)
    return f


def test_a_json_line_cut_short_at_the_end_is_left_out_and_anywhere_else_is_an_error(
        tmp_path, capsys):
    import json
    rows = [{"index": i, "time": i, "process": 0, "type": t, "f": "read", "value": None}
            for i, t in enumerate(["invoke", "ok", "invoke"])]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    path = tmp_path / "history.jsonl"
    path.write_text(text + '{"index": 3, "time": 3, "proc')  # the write a crash cut short
    assert read_history(path) == rows
    assert "history.jsonl:4: the last line is cut short" in capsys.readouterr().err
    path.write_text('{"index": 0, "ti\n' + text)
    with pytest.raises(HistoryError, match=r"history.jsonl:1: not JSON"):
        read_history(path)


def test_the_recorder_writes_each_row_whole_in_one_write(tmp_path):
    import io

    from harness.history import HistoryWriter
    w = HistoryWriter(tmp_path / "history.jsonl")
    # unbuffered: FileIO.write is one write(2) of the whole row, which a SIGKILL of the
    # harness cannot split (a buffered text file writes a long row in pieces)
    assert isinstance(w._f, io.FileIO)
    big = {"k1": [[i, i] for i in range(5000)]}  # a poll far larger than a stdio buffer
    w.record(0, "invoke", "poll")
    w.record(0, "ok", "poll", value=big)
    assert read_history(tmp_path / "history.jsonl")[1]["value"] == big  # on disk before close
    w.close()


def test_runs_started_in_the_same_second_with_the_same_seed_get_their_own_directories(tmp_path):
    """Two `chaoskraft run` started together (a matrix, a shell loop) once collided on
    results/<test>/<time>-<seed> and the second failed with FileExistsError."""
    from concurrent.futures import ThreadPoolExecutor

    from harness.store import new_run_dir
    with ThreadPoolExecutor(8) as pool:
        dirs = list(pool.map(lambda _: new_run_dir(tmp_path, "t", 1), range(8)))
    assert len(set(dirs)) == 8 and all(d.is_dir() for d in dirs)
