"""Configuration errors name the key; the internal codec rejects bad frames."""
import pytest

from node_image import messages as m
from node_image.config import ConfigError, load_config, parse_properties

BASE = {"node.id": "1", "controller.quorum.voters": "1@h:9093,2@h:9094", "log.dirs": "/d"}


def test_defaults_are_kafkas():
    c = load_config(BASE)
    assert (c.raft.election_timeout_ms, c.raft.fetch_timeout_ms, c.raft.check_quorum_timeout_ms(),
            c.raft.request_timeout_ms, c.idle_interval_ms) == (1000, 2000, 3000, 2000, 500)


@pytest.mark.parametrize("props,needle", [
    ({**BASE, "controler.quorum.voters": "x"}, "unknown configuration key 'controler.quorum.voters'"),
    ({**BASE, "node.id": "one"}, "node.id"),
    ({**BASE, "controller.quorum.voters": "1@h"}, "controller.quorum.voters"),
    ({**BASE, "controller.quorum.fetch.timeout.ms": "-5"}, "controller.quorum.fetch.timeout.ms"),
    ({**BASE, "chaoskraft.bugs": "no-such-bug"}, "chaoskraft.bugs: unknown bug 'no-such-bug'"),
    ({**BASE, "node.id": "7"}, "node.id 7 has the controller role but is not a voter"),
    ({k: v for k, v in BASE.items() if k != "log.dirs"}, "log.dirs is required"),
    ({**BASE, "chaoskraft.metadata.max.version": "14"},
     "chaoskraft.metadata.max.version: must be 8 to 13, got 14"),
    ({**BASE, "chaoskraft.metadata.max.version": "7"}, "must be 8 to 13, got 7"),
    ({**BASE, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"},
     "authorizer.class.name: 'kafka.security.authorizer.AclAuthorizer' is not supported"),
    ({**BASE, "allow.everyone.if.no.acl.found": "yes"},
     "allow.everyone.if.no.acl.found: 'yes' is not true or false"),
    ({**BASE, "chaoskraft.bootstrap.kraft.version": "1",
      "chaoskraft.bootstrap.metadata.version": "20"},
     "needs chaoskraft.bootstrap.metadata.version 21"),
])
def test_config_errors_name_the_key(props, needle):
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        load_config(props)


def test_metadata_is_advertised_up_to_v8_unless_raised():
    assert load_config(BASE).broker.metadata_max_version == 8
    raised = load_config({**BASE, "chaoskraft.metadata.max.version": "12"})
    assert raised.broker.metadata_max_version == 12


def test_properties_syntax_error_names_the_line():
    with pytest.raises(ConfigError, match="cfg:2"):
        parse_properties("a=1\nnot a property\n", "cfg")


def test_codec_roundtrip():
    msgs = [
        m.VoteRequest("c", 1, 2, 3, None, 4, "d", 1, 10, True),
        m.FetchResponse(5, 0, 2, 1, 100, 0, b"\x00\x01", 1, 5),
        m.EndQuorumEpochRequest("c", 2, 3, 1, (2, 3)),
        m.RegisterRequest(9, "cas", "k", 2, 1),
    ]
    for msg in msgs:
        frame = m.encode(msg)
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        assert m.decode(frame[4:]) == msg


@pytest.mark.parametrize("body,needle", [
    (b"\xc1", "not msgpack"),
    (b"\x93\x01\x02\x03", "needs"),
    (b"\x91\x7f", "unknown message type"),
    (b"\xa3abc", "not a"),
])
def test_codec_rejects_garbage(body, needle):
    with pytest.raises(m.MessageError, match=needle):
        m.decode(body)


def test_codec_rejects_wrong_field_types():
    import msgpack
    body = msgpack.packb([m.TYPES.index(m.RegisterRequest), "one", "read", "k", None, None])
    with pytest.raises(m.MessageError, match="RegisterRequest.request_id"):
        m.decode(body)
