"""The pieces of a dynamic quorum (KIP-853) below the Raft scenarios
(tests/testdata/raft/dynamic_quorum.txt, voter_change_truncated.txt): the VotersRecord and
its history, quorum-state's kraft.version, the format flags, and AddRaftVoter /
RemoveRaftVoter on the wire against bytes written out from Kafka's schemas."""
import struct
import uuid

import pytest

from test_kafka_codec import TAGS, carray, cstr, request_v2, response_v1

from node_image import kafka_codec as kc
from node_image import records
from node_image.__main__ import main
from node_image.raft.voters import CONTROL_VOTERS, VoterSet, VoterSetHistory, voters_in
from node_image.storage import ElectionState, ReplicaKey

A, B, C = (ReplicaKey(i, str(uuid.UUID(int=i, version=4))) for i in (1, 2, 3))


def test_voters_record_round_trips_and_a_corrupt_one_is_named():
    vs = VoterSet((A, B)).with_voter(C, ("10.0.0.3", 9093))
    assert VoterSet.decode(vs.encode()) == vs
    assert vs.endpoint(3) == ("10.0.0.3", 9093) and vs.endpoint(1) is None
    assert sorted(vs.without(1).as_dict()) == [2, 3]
    batch = records.build_batch(7, 2, [(records.control_key(CONTROL_VOTERS), vs.encode())],
                                0, control=True)
    [(offset, got)] = voters_in(records.parse_header(batch), batch)
    assert (offset, got) == (7, vs)
    with pytest.raises(records.CorruptBatchError, match="VotersRecord"):
        VoterSet.decode(b"\x92\x01")


def test_history_follows_appends_truncations_and_snapshots():
    h = VoterSetHistory(VoterSet((A, B)))
    h.add(3, VoterSet((A, B, C)))
    h.add(9, VoterSet((B, C)))
    assert sorted(h.current.as_dict()) == [2, 3] and h.latest_offset == 9
    assert sorted(h.at(5).as_dict()) == [1, 2, 3] and sorted(h.at(0).as_dict()) == [1, 2]
    assert h.truncate(9) and sorted(h.current.as_dict()) == [1, 2, 3]
    assert not h.truncate(9)
    assert h.truncate(0) and sorted(h.current.as_dict()) == [1, 2]  # the bootstrap set stays
    with pytest.raises(AssertionError):
        h.add(-1, VoterSet((A,)))
    h.reset(19, VoterSet((C,)))
    assert sorted(h.current.as_dict()) == [3] and h.latest_offset == 19


def test_quorum_state_keeps_kraft_version_and_old_files_read_as_static():
    e = ElectionState(4, None, A, (A, B), kraft_version=1)
    assert ElectionState.from_json(e.to_json(), "qs") == e
    static = ElectionState(4, None, A, (A, B))
    assert b"kraftVersion" not in static.to_json()  # a static quorum's file is unchanged
    assert ElectionState.from_json(static.to_json(), "qs").kraft_version == 0


def _props(tmp_path, node_id=1):
    p = tmp_path / f"n{node_id}.properties"
    p.write_text(f"node.id={node_id}\nprocess.roles=controller\n"
                 f"controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.2:9093\n"
                 f"listeners=CONTROLLER://127.0.0.{node_id}:9093\n"
                 f"log.dirs={tmp_path}/d{node_id}\n")
    return str(p)


def _quorum_state(tmp_path, node_id):
    path = tmp_path / f"d{node_id}" / "__cluster_metadata-0" / "quorum-state"
    return ElectionState.from_json(path.read_bytes(), str(path))


def test_format_flags_of_a_dynamic_quorum(tmp_path, capsys):
    assert main(["format", "--config", _props(tmp_path), "--cluster-id", "c",
                 "--standalone", "--directory-id", A.directory_id]) == 0
    assert _quorum_state(tmp_path, 1) == ElectionState(0, voters=(A,), kraft_version=1)
    assert main(["format", "--config", _props(tmp_path, 2), "--cluster-id", "c",
                 "--no-initial-controllers"]) == 0
    assert _quorum_state(tmp_path, 2) == ElectionState(0, voters=(), kraft_version=1)


@pytest.mark.parametrize("flags,says", [
    (["--standalone", "--no-initial-controllers"], "exclude each other"),
    (["--standalone", "--feature", "kraft.version=0"], "kraft.version 1"),
    (["--feature", "metadata.version=21"], "--feature 'metadata.version=21'"),
    (["--initial-controllers", "1@h:1,2@h:2", "--feature", "kraft.version=1"],
     "directory id"),
])
def test_format_refuses_flags_that_do_not_fit(tmp_path, capsys, flags, says):
    assert main(["format", "--config", _props(tmp_path), "--cluster-id", "c", *flags]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "d1" / "meta.properties").exists()


def test_add_raft_voter_v1_and_remove_raft_voter_v0_bytes():
    d = uuid.UUID(int=4, version=4)
    body = (cstr("c") + struct.pack(">ii", 5000, 4) + d.bytes
            + carray([cstr("CONTROLLER") + cstr("h") + struct.pack(">H", 9093) + TAGS])
            + b"\x01" + TAGS)
    req = kc.decode_request(request_v2(kc.ADD_RAFT_VOTER, 1, 3) + body)
    b = req.body
    assert (b.cluster_id, b.timeout_ms, b.voter_id, b.voter_directory_id,
            b.listeners[0].host, b.listeners[0].port, b.ack_when_committed) == (
        "c", 5000, 4, d, "h", 9093, True)
    R = kc.response_class(kc.ADD_RAFT_VOTER, 1)
    got = kc.encode_response(req, R(throttle_time_ms=0, error_code=126, error_message="dup"))
    assert got == response_v1(3, struct.pack(">ih", 0, 126) + cstr("dup") + TAGS)
    req = kc.decode_request(request_v2(kc.REMOVE_RAFT_VOTER, 0, 4) + b"\x00"
                            + struct.pack(">i", 2) + d.bytes + TAGS)
    assert (req.body.cluster_id, req.body.voter_id, req.body.voter_directory_id) == (None, 2, d)


def test_the_node_image_carries_the_schemas():
    """The node reads its Kafka schemas at import time: an image built without them fails
    at start (as one did)."""
    from harness.images import ROOT, node_context_files
    shipped = {dest for _, dest in node_context_files()}
    schemas = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "node_image").rglob("*.json"))
    assert schemas and set(schemas) <= shipped, set(schemas) - shipped


def test_a_node_property_asks_format_for_a_dynamic_quorum(tmp_path):
    """How Docker and SSH clusters ask for one (the voters fault package's property): the
    voters they are given, at kraft.version 1."""
    props = tmp_path / "n1.properties"
    props.write_text(open(_props(tmp_path)).read() + "chaoskraft.bootstrap.kraft.version=1\n")
    assert main(["format", "--config", str(props), "--cluster-id", "c",
                 "--initial-controllers", f"1@h:1:{A.directory_id},2@h:2:{B.directory_id}",
                 "--directory-id", A.directory_id]) == 0
    assert _quorum_state(tmp_path, 1) == ElectionState(0, voters=(A, B), kraft_version=1)
    bad = tmp_path / "bad.properties"
    bad.write_text(open(_props(tmp_path, 2)).read() + "chaoskraft.bootstrap.kraft.version=2\n")
    assert main(["format", "--config", str(bad), "--cluster-id", "c"]) == 2
