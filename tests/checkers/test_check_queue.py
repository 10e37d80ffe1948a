"""``chaoskraft check --model queue`` on histories in Jepsen's Kafka workload format (EDN:
send, poll and txn operations of micro-operations, assign and subscribe, crashes and the
nemesis), with Jepsen's allowances."""

import pytest

from conftest import TESTDATA

from harness.cli import main

DATA = TESTDATA / "jepsen-kafka"


def test_a_valid_jepsen_kafka_history(capsys):
    assert main(["check", "--model", "queue", str(DATA / "valid.edn"), "--engine", "local"]) == 0
    out = capsys.readouterr().out
    assert "3 sends ok" in out and "1 indeterminate" in out and "read 8 messages" in out
    assert "consumers: subscribe" in out and "verdict: valid" in out
    assert "durability" in out  # said not to be checked: Jepsen has no final-poll operation


def test_an_invalid_one_names_each_anomaly_in_a_sentence(capsys):
    assert main(["check", "--model", "queue", str(DATA / "invalid.edn"),
                 "--engine", "local"]) == 1
    out = capsys.readouterr().out
    assert "G1a: 1; e.g. a poll (op 14) read 4 at offset 1 of key 1, from a send that failed " \
           "(op 12)" in out
    assert "precommitted-read: 1; e.g. a transaction by process 2 (op 8) read 3 at offset 2 " \
           "of key 0" in out
    assert "verdict: invalid" in out
    # An allowed class no longer fails it.
    assert main(["check", "--model", "queue", str(DATA / "invalid.edn"), "--engine", "local",
                 "--allow", "G1a", "--allow", "precommitted-read"]) == 0
    assert "G1a (allowed)" in capsys.readouterr().out


def test_write_write_edges_when_asked(tmp_path, capsys):
    # Two transactions sending to keys 0 and 1 in opposite log orders: G0 with --ww-deps,
    # which Jepsen allows (Kafka does not isolate writes).
    path = tmp_path / "g0.edn"
    path.write_text(
        "{:index 0 :type :invoke :process 0 :f :txn :value [[:send 0 1] [:send 1 3]]}\n"
        "{:index 1 :type :invoke :process 1 :f :txn :value [[:send 0 2] [:send 1 4]]}\n"
        "{:index 2 :type :ok :process 0 :f :txn :value [[:send 0 [0 1]] [:send 1 [1 3]]]}\n"
        "{:index 3 :type :ok :process 1 :f :txn :value [[:send 0 [1 2]] [:send 1 [0 4]]]}\n"
        "{:index 4 :type :invoke :process 2 :f :poll :value [[:poll]]}\n"
        "{:index 5 :type :ok :process 2 :f :poll :value [[:poll {0 [[0 1] [1 2]] "
        "1 [[0 4] [1 3]]}]]}\n")
    assert main(["check", "--model", "queue", str(path), "--engine", "local"]) == 0
    assert "G0" not in capsys.readouterr().out
    assert main(["check", "--model", "queue", str(path), "--engine", "local", "--ww-deps"]) == 0
    out = capsys.readouterr().out
    assert "G0 (allowed): 1; e.g. process 0's operation (op 2) sent to key 0 just before 2 " \
           "was sent by process 1's operation (op 3) sent to key 1 just before 3 was sent by " \
           "the first (op 2): a cycle" in out, out


@pytest.mark.parametrize("line, message", [
    ("{:index 0 :type :ok :process 0 :f :txn :value [[:send 0]]}",
     "micro-operation 0 must be \\[send key value\\]"),
    ("{:index 0 :type :ok :process 0 :f :poll :value [[:poll {0 [[1]]}]]}",
     "messages must be"),
    ("{:index 0 :type :ok :process 0 :f :send :value [[:send 0 [1 2 3]]]}",
     "must be \\[offset value\\]"),
])
def test_a_bad_operation_is_named_with_its_line(tmp_path, capsys, line, message):
    path = tmp_path / "bad.edn"
    path.write_text("{:index 9 :type :invoke :process 0 :f :poll :value [[:poll]]}\n" + line + "\n")
    assert main(["check", "--model", "queue", str(path), "--engine", "local"]) == 3
    err = capsys.readouterr().err
    import re
    assert re.search(f"bad.edn:2: .*{message}", err), err


def test_an_unknown_class_to_allow_is_refused(capsys):
    assert main(["check", "--model", "queue", str(DATA / "valid.edn"), "--allow", "G2"]) == 3
    assert "--allow G2: not an anomaly class" in capsys.readouterr().err


def test_values_of_any_type_jepsen_writes_are_read_and_shown_as_written(tmp_path, capsys):
    # Keywords, strings, integers and floats as values, in sends, polls, a transaction's
    # micro-operations and assign key lists; keys as keywords. The checkers compare them
    # as they compare integers; the report shows each as the history wrote it.
    path = tmp_path / "kw.edn"
    path.write_text(
        "{:index 0 :type :invoke :process 0 :f :assign :value [:x :y]}\n"
        "{:index 1 :type :ok :process 0 :f :assign :value [:x :y]}\n"
        "{:index 2 :type :invoke :process 0 :f :send :value [[:send :x :a]]}\n"
        "{:index 3 :type :ok :process 0 :f :send :value [[:send :x [0 :a]]]}\n"
        "{:index 4 :type :invoke :process 0 :f :txn :value [[:send :y \"b\"] [:send :x 7]]}\n"
        "{:index 5 :type :ok :process 0 :f :txn :value [[:send :y [0 \"b\"]] [:send :x [1 7]]]}\n"
        "{:index 6 :type :invoke :process 1 :f :send :value [[:send :x 2.5]]}\n"
        "{:index 7 :type :fail :process 1 :f :send :value [[:send :x 2.5]]}\n"
        "{:index 8 :type :invoke :process 0 :f :poll :value [[:poll]]}\n"
        "{:index 9 :type :ok :process 0 :f :poll :value "
        "[[:poll {:x [[0 :a] [1 7] [2 2.5]] :y [[0 \"b\"]]}]]}\n")
    assert main(["check", "--model", "queue", str(path), "--engine", "local"]) == 1
    out = capsys.readouterr().out
    assert "4 sends ok" not in out and "3 sends ok, 1 failed" in out, out
    # the failed send of 2.5 read back: G1a, naming the value as written
    assert "G1a: 1; e.g. a poll (op 9) read 2.5 at offset 2 of x, from a send that " \
           "failed (op 7)" in out, out
    named = [line.split(":")[0].strip() for line in out.splitlines() if line.startswith("  ")]
    assert named == ["G1a"], out


def test_a_keyword_and_a_string_of_the_same_name_are_two_values(tmp_path, capsys):
    path = tmp_path / "two.edn"
    path.write_text(
        "{:index 0 :type :invoke :process 0 :f :send :value [[:send 0 :a]]}\n"
        "{:index 1 :type :ok :process 0 :f :send :value [[:send 0 [0 :a]]]}\n"
        "{:index 2 :type :invoke :process 1 :f :poll :value [[:poll]]}\n"
        "{:index 3 :type :ok :process 1 :f :poll :value [[:poll {0 [[0 \"a\"]]}]]}\n")
    assert main(["check", "--model", "queue", str(path), "--engine", "local"]) == 1
    out = capsys.readouterr().out
    assert "inconsistent-offsets: 1; e.g. offset 0 of key 0 was read holding different " \
           "values: :a; a" in out or "values: a; :a" in out, out


def test_an_integer_value_in_the_range_of_value_ids_is_refused(tmp_path, capsys):
    path = tmp_path / "big.edn"
    path.write_text(
        "{:index 0 :type :invoke :process 0 :f :send :value [[:send 0 1]]}\n"
        "{:index 1 :type :ok :process 0 :f :send :value [[:send 0 [0 -4611686018427387904]]]}\n")
    assert main(["check", "--model", "queue", str(path), "--engine", "local"]) == 3
    err = capsys.readouterr().err
    assert "big.edn:2: " in err and "-4611686018427387904 is in the range" in err, err


def test_the_typed_file_gives_back_the_values_as_written(tmp_path):
    from checkers.queue import history as qh
    from checkers.history import iter_history
    from harness.frames import _from_typed
    import pyarrow as pa
    path = tmp_path / "h.edn"
    path.write_text(
        "{:index 0 :type :invoke :process 0 :f :txn :value [[:send :x :a] [:send :x \"b\"]]}\n"
        "{:index 1 :type :ok :process 0 :f :txn :value [[:send :x [0 :a]] [:send :x [1 \"b\"]]]}\n"
        "{:index 2 :type :invoke :process 1 :f :poll :value [[:poll]]}\n"
        "{:index 3 :type :ok :process 1 :f :poll :value [[:poll {:x [[0 :a] [1 \"b\"] [2 3]]}]]}\n"
        "{:index 4 :type :invoke :process 2 :f :send :key :x :value {:value :c}}\n"
        "{:index 5 :type :ok :process 2 :f :send :key :x :value {:value :c :offset 3}}\n")
    typed = tmp_path / "q.parquet"
    qh.write(iter_history(path), typed)
    names = qh.key_names(typed)
    assert names.values.names == [":a", "b", ":c"]
    rows = qh.read_table(typed).to_pylist()
    txn = qh.untyped_op([r for r in rows if r["index"] == 1], names)
    assert txn["value"] == [["send", "x", [0, ":a"]], ["send", "x", [1, "b"]]]
    poll = qh.untyped_op([r for r in rows if r["index"] == 3], names)
    assert poll["value"] == [["poll", {"x": [[0, ":a"], [1, "b"], [2, 3]]}]]
    # the timeline's rows (harness.frames: an invoke's value, the one a page shows) too
    df = _from_typed(qh.read_table(typed), pa.array(names.names, pa.string()), names.values)
    sends = [v for v, f, t in zip(df["value"], df["f"], df["type"])
             if f == "send" and t == "invoke"]
    assert sends == ['{"value": ":c"}'], sends


def test_a_history_that_tested_nothing_is_unknown_or_as_jepsen_invalid(tmp_path, capsys):
    path = tmp_path / "empty.edn"
    path.write_text("{:index 0 :type :invoke :process 0 :f :poll :value [[:poll]]}\n"
                    "{:index 1 :type :ok :process 0 :f :poll :value [[:poll {}]]}\n")
    assert main(["check", "--model", "queue", str(path), "--engine", "local"]) == 2
    assert "verdict: unknown (no send succeeded" in capsys.readouterr().out
    assert main(["check", "--model", "queue", str(path), "--engine", "local",
                 "--tested-nothing", "invalid"]) == 1
    assert "verdict: invalid (no send succeeded" in capsys.readouterr().out


def test_a_cycle_comes_with_its_proof_and_the_models_it_rules_out(tmp_path, capsys):
    path = tmp_path / "g1c.edn"
    path.write_text(
        "{:index 0 :type :invoke :process 0 :f :txn :value [[:send 0 1] [:poll]]}\n"
        "{:index 1 :type :invoke :process 1 :f :txn :value [[:send 1 2] [:poll]]}\n"
        "{:index 2 :type :ok :process 0 :f :txn :value [[:send 0 [0 1]] [:poll {1 [[0 2]]}]]}\n"
        "{:index 3 :type :ok :process 1 :f :txn :value [[:send 1 [0 2]] [:poll {0 [[0 1]]}]]}\n")
    assert main(["check", "--model", "queue", str(path), "--engine", "local"]) == 1
    out = capsys.readouterr().out
    assert ("proof: Let T1 = process 1's operation 3, T2 = process 0's operation 2. Then "
            "T1 < T2, because T1 sent 2 to key 1, which T2 read. However, T2 < T1, because T2 "
            "sent 1 to key 0, which T1 read: a contradiction.") in out, out
    line = next(x for x in out.splitlines() if x.startswith("consistency: "))
    assert line.startswith("consistency: not read-committed (nor the 21 models stronger: ")
    assert "serializable" in line and "strict-serializable" in line and "read-uncommitted" not in line


def test_the_weakest_model_each_cycle_class_rules_out():
    from checkers.consistency_models import boundary
    weakest = {a: boundary([a])["not"] for a in
               ("G0", "G1a", "G1c", "G0-process", "G1c-process", "G0-realtime", "G1c-realtime")}
    assert weakest == {"G0": ["read-uncommitted"], "G1a": ["read-committed"],
                       "G1c": ["read-committed"],
                       "G0-process": ["strong-session-read-uncommitted"],
                       "G1c-process": ["strong-session-read-committed"],
                       "G0-realtime": ["strong-read-uncommitted"],
                       "G1c-realtime": ["strong-read-committed"]}
    # a realtime anomaly rules out strict serializability, a process one does too, and
    # nothing is ruled out by a history without anomalies
    assert "strict-serializable" in boundary(["G1c-realtime"])["also_not"]
    assert "strict-serializable" in boundary(["G0-process"])["also_not"]
    assert boundary([]) == {"not": [], "also_not": []}


def test_a_fold_reads_each_polls_messages_in_place_and_refuses_a_send_holding_some():
    """The fold flattens the key's lists where they lie (a send's are empty) rather than
    copying the polls' rows first: the messages still map to their polls, in a table sliced
    out of a larger one too; a send row holding messages is refused, named."""
    import pyarrow as pa
    from checkers.queue.classes import FINAL, KEY_ROWS, POLL, SEND, T_OK
    from checkers.queue.fold import fold
    rows = [  # key 7: sends of 10 and 11, a poll reading 11 at 0 (lost: 10), a final read
        (SEND, 1, 0, T_OK, 10, 0, [], []), (SEND, 2, 1, T_OK, 11, 1, [], []),
        (POLL, 4, 2, None, None, None, [1], [11]), (FINAL, 9, 3, None, None, None, [1], [11])]
    cols = list(zip(*rows))
    t = pa.table({"key": [7] * 4, "kind": cols[0], "index": cols[1], "process": cols[2],
                  "type": cols[3], "value": cols[4], "offset": cols[5], "offsets": cols[6],
                  "values": cols[7], "mop": [None] * 4}, schema=KEY_ROWS)
    padded = pa.concat_tables([t.slice(0, 2), t, t.slice(2)]).combine_chunks().slice(2, 4)
    for table in (t, padded):
        out = fold(table, "k7", True, {}, 5)
        assert out["lost-write"][0] == 1 and out["lost-write"][1][0]["value"] == 10, out
        assert out["durability"][0] == 1 and set(out) == {"lost-write", "durability"}, out
    bad = t.set_column(7, "offsets", pa.array([[5], [], [1], [1]], pa.list_(pa.int64())))
    bad = bad.set_column(8, "values", pa.array([[3], [], [11], [11]], pa.list_(pa.int64())))
    with pytest.raises(ValueError, match="key k7: a send's row holds messages read"):
        fold(bad, "k7", True, {}, 5)
