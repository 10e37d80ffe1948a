"""The node's message journal: Lamport's rules, the stamp on the wire, rolling over, reading
it back, and three real node processes whose journals match send for receive."""
import asyncio
import json

import pytest

from node_image import messages as m
from node_image.rpc_journal import RpcJournal, journal_lines


def test_lamport_time_moves_past_every_stamp_received(tmp_path):
    j = RpcJournal(str(tmp_path / "rpc.jsonl"), node_id=2)
    assert j.sent("n1", "VoteRequest (epoch=1)") == [2, 1]
    j.received("n3", "FetchRequest (epoch=1)", [3, 40])  # a node far ahead: we jump past it
    j.received("client 10.0.0.9:5555", "Produce v9 #7")  # a client stamps nothing
    assert j.sent("n3", "FetchResponse (epoch=1)") == [2, 43]
    j.close()
    lines = list(journal_lines([tmp_path / "rpc.jsonl"]))
    assert [(e["e"], e["p"], e["l"], e.get("sl")) for e in lines] == [
        ("s", "n1", 1, None), ("r", "n3", 41, 40), ("r", "client 10.0.0.9:5555", 42, None),
        ("s", "n3", 43, None)]


def test_the_journal_rolls_over_and_keeps_the_latest(tmp_path):
    path = tmp_path / "rpc.jsonl"
    j = RpcJournal(str(path), node_id=1, max_bytes=2000)
    for i in range(100):
        j.sent("n2", f"message {i}")
    j.close()
    older, newer = list(journal_lines([str(path) + ".1"])), list(journal_lines([path]))
    assert older and newer and older[-1]["l"] + 1 == newer[0]["l"]
    assert newer[-1]["m"] == "message 99"
    assert (tmp_path / "rpc.jsonl.1").stat().st_size <= 2000


def test_a_torn_last_line_is_skipped_and_a_bad_one_is_named(tmp_path):
    path = tmp_path / "rpc.jsonl"
    good = json.dumps({"l": 1, "t": 5, "e": "s", "p": "n2", "m": "x"})
    path.write_text(good + "\n" + good[:20])  # killed while writing
    assert len(list(journal_lines([path]))) == 1
    path.write_text(good + "\n" + '{"l": 2}\n' + good + "\n")
    with pytest.raises(ValueError, match=r"rpc.jsonl:2: not a journal entry"):
        list(journal_lines([path]))


def test_a_stamp_rides_as_the_frame_last_element():
    msg = m.VoteRequest("c", 7, 3, 2, None, 1, None, 2, 40, False)
    frame = m.encode(msg, [3, 99])
    assert m.decode_stamped(frame[4:]) == (msg, [3, 99])
    assert m.decode(frame[4:]) == msg
    assert m.decode_stamped(m.encode(msg)[4:]) == (msg, None)
    with pytest.raises(m.MessageError, match="is not a stamp"):
        import msgpack
        body = msgpack.unpackb(frame[4:])
        m.decode(msgpack.packb(body[:-1] + ["later"]))


def test_three_node_processes_journal_every_message_send_for_receive(tmp_path):
    """Each receipt from a node names a send in that node's journal with the same Lamport
    time and this node as its party, and comes after it."""
    from local_cluster import LocalCluster
    c = LocalCluster(tmp_path, nodes=3, extra_config={
        "chaoskraft.journal.path": str(tmp_path / "rpc-NODE.jsonl")})
    for i in c.ids:  # one journal per node
        path = c.config_path(i)
        path.write_text(path.read_text().replace("NODE", str(i)))
    c.start_all()
    try:
        async def work():
            leader = await c.wait_for_leader()
            client = c.client(leader)
            try:
                for k in range(5):
                    assert (await client.write(f"k{k}", k)).outcome == "ok"
            finally:
                await client.close()
        asyncio.run(work())
        for i in list(c.procs):
            c.stop(i)  # SIGTERM: the journal is flushed and closed
    finally:
        c.close()
    journals = {f"n{i}": list(journal_lines([tmp_path / f"rpc-{i}.jsonl"])) for i in c.ids}
    sends = {(node, e["p"], e["l"]): e for node, es in journals.items() for e in es
             if e["e"] == "s"}
    matched = 0
    for node, entries in journals.items():
        assert entries, node
        assert all(a["l"] < b["l"] for a, b in zip(entries, entries[1:])), node
        for e in entries:
            if e["e"] == "r" and "sl" in e:
                sent = sends.get((e["p"], node, e["sl"]))
                assert sent is not None, (node, e)
                assert sent["m"] == e["m"] and e["l"] > e["sl"]
                matched += 1
    assert matched > 20
    assert any(e["p"].startswith("client 127.0.0.1:") and e["m"].startswith("RegisterRequest")
               for es in journals.values() for e in es if e["e"] == "r")


def _journals(tmp_path, t0_ms):
    """Two nodes' journals: n1 sends n2 a Fetch (received), a Vote n2 never receives while
    n2 goes on, and a client's Produce to n2 with its answer."""
    n1 = [{"l": 1, "t": t0_ms, "e": "s", "p": "n2", "m": "FetchRequest (epoch=3)"},
          {"l": 2, "t": t0_ms + 5, "e": "s", "p": "n2", "m": "VoteRequest (epoch=4)"}]
    n2 = [{"l": 2, "t": t0_ms + 1, "e": "r", "p": "n1", "sl": 1, "m": "FetchRequest (epoch=3)"},
          {"l": 3, "t": t0_ms + 10, "e": "r", "p": "client 10.0.0.1:4000", "m": "Produce v9 #1"},
          {"l": 4, "t": t0_ms + 12, "e": "s", "p": "client 10.0.0.1:4000",
           "m": "Produce v9 response #1"},
          {"l": 5, "t": t0_ms + 3000, "e": "r", "p": "client 10.0.0.1:4000", "m": "Fetch v12 #2"}]
    for name, entries in (("n1", n1), ("n2", n2)):
        d = tmp_path / "nodes" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "rpc.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))


def test_the_messages_around_a_moment_are_arrows_losses_and_client_requests(tmp_path):
    from harness import sequence
    _journals(tmp_path, 1_000_000)
    shown, labels = sequence.around(sequence.load(tmp_path), 1_000_008, before=10, after=1)
    kinds = [(e["kind"], e["src"], e["dest"], e["what"]) for e in shown]
    assert kinds == [("msg", "n1", "n2", "FetchRequest (epoch=3)"),
                     ("lost", "n1", "n2", "VoteRequest (epoch=4)"),
                     ("msg", "clients", "n2", "Produce v9 #1")]
    fetch = shown[0]
    assert fetch["sent"] < fetch["at"] and labels[fetch["at"]].endswith(" n2 L2")
    assert shown[2]["sent"] < shown[2]["at"]  # the client's request just above its receipt


def test_the_report_draws_the_messages_around_each_anomaly(tmp_path):
    from test_report import START_WALL, make_run
    make_run(tmp_path)  # a lost write whose first operation is at 5.0 s
    _journals(tmp_path, int((START_WALL + 5.0) * 1000) - 8)
    from harness.report import render
    text = render(tmp_path).read_text()
    assert "<h2 id='messages'>Messages around the anomalies</h2>" in text
    section = text[text.index("id='messages'"):]
    assert section.count("<svg class=\"sequence\"") == 1
    assert "lost-write: the first example" in section
    assert section.count("class=\"msg\"") == 4  # fetch, produce, its answer, the next fetch
    assert "VoteRequest (epoch=4) to n2 lost" in section


def test_a_message_after_the_journal_closed_is_not_an_error(tmp_path):
    """The node's last connections may still deliver while it stops, after the journal."""
    j = RpcJournal(str(tmp_path / "rpc.jsonl"), node_id=1)
    j.sent("n2", "a")
    j.close()
    j.received("n2", "b", [2, 5])
    j.maybe_flush(10**9)
    assert [e["m"] for e in journal_lines([tmp_path / "rpc.jsonl"])] == ["a"]
