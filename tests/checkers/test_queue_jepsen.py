"""Jepsen's Kafka checker semantics (checkers/queue/jepsen.py), one rule of
jepsen.tests.kafka at a time, each where chaoskraft's own semantics judge the same
history otherwise (``--semantics chaoskraft``)."""
from harness.cli import main


def history(tmp_path, *ops) -> str:
    """EDN lines: each op ``(process, type, f, value)``, completing right after its invoke
    (the invoke carries the completion's value: only completions are judged)."""
    lines = []
    for process, type_, f, value in ops:
        for t in ("invoke", type_):
            lines.append(f"{{:index {len(lines)} :type :{t} :process {process} :f :{f} "
                         f":value {value}}}")
    path = tmp_path / "h.edn"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def classes(capsys, path, *flags) -> tuple[int, set]:
    code = main(["check", "--model", "queue", path, "--engine", "local", *flags])
    out = capsys.readouterr().out
    return code, {line.split(":")[0].strip().removesuffix(" (allowed)")
                  for line in out.splitlines() if line.startswith("  ")}


def test_an_info_send_proven_committed_counts_with_its_offsets(tmp_path, capsys):
    # The info transaction's send of :z was read, so it committed: its send of :b at
    # offset 1 of :x is in :x's order, below what a poll read (:c at 2), and nobody read it.
    path = history(
        tmp_path,
        (0, "ok", "send", "[[:send :x [0 :a]]]"),
        (1, "info", "txn", "[[:send :x [1 :b]] [:send :y [0 :z]]]"),
        (0, "ok", "send", "[[:send :x [2 :c]]]"),
        (2, "ok", "poll", "[[:poll {:x [[0 :a] [2 :c]] :y [[0 :z]]}]]"))
    # (the poll that read :a then :c skipped :b within itself, too)
    assert classes(capsys, path) == (1, {"lost-write", "int-poll-skip"})
    assert classes(capsys, path, "--semantics", "chaoskraft") == (0, set())


def test_an_info_send_never_read_has_no_offsets(tmp_path, capsys):
    # The same, but nothing proves the info transaction committed: its offsets count for
    # nothing, so nothing is lost.
    path = history(
        tmp_path,
        (0, "ok", "send", "[[:send :x [0 :a]]]"),
        (1, "info", "txn", "[[:send :x [1 :b]] [:send :y [0 :z]]]"),
        (0, "ok", "send", "[[:send :x [2 :c]]]"),
        (2, "ok", "poll", "[[:poll {:x [[0 :a] [2 :c]]}]]"))
    assert classes(capsys, path) == (0, set())


def test_an_info_send_proven_committed_shows_an_offset_it_disagrees_on(tmp_path, capsys):
    path = history(
        tmp_path,
        (1, "info", "txn", "[[:send :x [0 :b]] [:send :y [0 :z]]]"),
        (0, "ok", "send", "[[:send :x [0 :a]]]"),
        (2, "ok", "poll", "[[:poll {:x [[0 :a]] :y [[0 :z]]}]]"))
    code, found = classes(capsys, path)
    assert code == 1 and "inconsistent-offsets" in found
    assert "inconsistent-offsets" not in classes(capsys, path, "--semantics", "chaoskraft")[1]


def test_an_assign_keeps_the_position_of_a_key_it_still_names(tmp_path, capsys):
    path = history(
        tmp_path,
        (0, "ok", "send", "[[:send :x [0 :a]] [:send :x [1 :b]] [:send :x [2 :c]]]"),
        (1, "ok", "assign", "[:x :y]"),
        (1, "ok", "poll", "[[:poll {:x [[0 :a]]}]]"),
        (1, "ok", "assign", "[:x :y]"),
        (1, "ok", "poll", "[[:poll {:x [[2 :c]]}]]"),
        (2, "ok", "poll", "[[:poll {:x [[0 :a] [1 :b] [2 :c]]}]]"))
    assert classes(capsys, path) == (1, {"poll-skip"})
    # chaoskraft's consumers seek to the committed offset on every assign
    assert "poll-skip" not in classes(capsys, path, "--semantics", "chaoskraft")[1]


def test_an_assign_that_drops_a_key_forgets_it_and_a_failed_one_changes_nothing(
        tmp_path, capsys):
    sends = (0, "ok", "send", "[[:send :x [0 :a]] [:send :x [1 :b]]]")
    reread = history(
        tmp_path, sends,
        (1, "ok", "poll", "[[:poll {:x [[0 :a] [1 :b]]}]]"),
        (1, "info", "assign", "[:y]"),
        (1, "ok", "poll", "[[:poll {:x [[0 :a]]}]]"))
    assert classes(capsys, reread) == (0, set())
    failed = history(
        tmp_path, sends,
        (1, "ok", "poll", "[[:poll {:x [[0 :a] [1 :b]]}]]"),
        (1, "fail", "assign", "[:y]"),
        (1, "ok", "poll", "[[:poll {:x [[0 :a]]}]]"))
    assert classes(capsys, failed) == (1, {"nonmonotonic-poll"})


def test_an_assign_resets_the_tracking_of_sends(tmp_path, capsys):
    # Process 0 sends to :x at 1, assigns away from :x, then its next send lands at 0.
    path = history(
        tmp_path,
        (0, "ok", "send", "[[:send :x [1 :b]]]"),
        (0, "ok", "assign", "[:y]"),
        (0, "ok", "send", "[[:send :x [0 :a]]]"),
        (1, "ok", "poll", "[[:poll {:x [[0 :a] [1 :b]]}]]"))
    assert classes(capsys, path) == (0, set())
    without = history(
        tmp_path,
        (0, "ok", "send", "[[:send :x [1 :b]]]"),
        (0, "ok", "send", "[[:send :x [0 :a]]]"),
        (1, "ok", "poll", "[[:poll {:x [[0 :a] [1 :b]]}]]"))
    assert classes(capsys, without) == (1, {"nonmonotonic-send"})


def test_after_an_aborted_or_info_poll_the_consumer_rewinds(tmp_path, capsys):
    sends = (0, "ok", "send", "[[:send :x [0 :a]] [:send :x [1 :b]] [:send :x [2 :c]]]")
    # It rewound: after the failed transaction read :b, the next poll reads :b again.
    rewound = history(
        tmp_path, sends,
        (1, "ok", "poll", "[[:poll {:x [[0 :a]]}]]"),
        (1, "fail", "txn", "[[:poll {:x [[1 :b]]}]]"),
        (1, "ok", "poll", "[[:poll {:x [[1 :b]]}]]"),
        (2, "ok", "poll", "[[:poll {:x [[0 :a] [1 :b] [2 :c]]}]]"))
    assert classes(capsys, rewound) == (0, set())
    assert "nonmonotonic-poll" in classes(capsys, rewound, "--semantics", "chaoskraft")[1]
    # It did not: after the indeterminate transaction read :b, the next poll reads :c.
    went_on = history(
        tmp_path, sends,
        (1, "ok", "poll", "[[:poll {:x [[0 :a]]}]]"),
        (1, "info", "txn", "[[:poll {:x [[1 :b]]}]]"),
        (1, "ok", "poll", "[[:poll {:x [[2 :c]]}]]"),
        (2, "ok", "poll", "[[:poll {:x [[0 :a] [1 :b] [2 :c]]}]]"))
    assert classes(capsys, went_on) == (1, {"poll-skip"})


def test_a_rebalanced_key_is_not_judged_within_the_operation(tmp_path, capsys):
    sends = (0, "ok", "send", "[[:send :x [0 :a]] [:send :x [1 :b]] [:send :x [2 :c]]]")
    skip = history(tmp_path, sends,
                   (1, "ok", "txn", "[[:poll {:x [[0 :a]]}] [:poll {:x [[2 :c]]}]]"),
                   (2, "ok", "poll", "[[:poll {:x [[0 :a] [1 :b] [2 :c]]}]]"))
    assert classes(capsys, skip) == (1, {"int-poll-skip"})
    text = open(skip).read().replace(":type :ok :process 1 :f :txn",
                                     ":type :ok :process 1 :rebalance-log [{:keys [:x]}] :f :txn")
    open(skip, "w").write(text)
    assert classes(capsys, skip) == (0, set())
