"""SCRAM credentials (KIP-554): the keys kept (RFC 5802, checked against RFC 7677's
exchange), the controller's rules, and librdkafka's admin client altering and describing
them on three real node processes, with a restart reading them back from the log."""
import base64
import hashlib
import hmac

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

from conftest import wait_for
from node_clients import admin, three_brokers
from node_image import messages as m
from node_image import metadata_records as mr
from node_image import scram
from test_replication import image_with


def test_the_kept_keys_verify_rfc_7677s_exchange():
    """StoredKey and ServerKey from the salted password: the client's proof of RFC 7677's
    example opens to a ClientKey whose hash is StoredKey, and ServerKey signs the server's
    answer of the same exchange."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    stored, server = scram.keys(1, salted)
    auth = (b"n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
            b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,"
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    signature = hmac.new(stored, auth, hashlib.sha256).digest()
    client_key = bytes(a ^ b for a, b in zip(proof, signature))
    assert hashlib.sha256(client_key).digest() == stored
    assert base64.b64encode(hmac.new(server, auth, hashlib.sha256).digest()) == \
        b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_alterations_are_checked_as_kafka_checks_them():
    up = ("alice", 1, 8192, b"salt", b"salted")
    recs, results, _ = scram.alter_plan({}, (), (up,))
    assert results == [("alice", m.NONE, None)]
    [rec] = recs
    assert isinstance(rec, mr.UserScramCredentialRecord) and rec.iterations == 8192
    assert b"salted" not in (rec.stored_key, rec.server_key), "the salted password is not kept"
    credentials = image_with(recs).scram
    assert credentials[("alice", 1)][3] == 8192
    refused = [
        ((), (("bob", 3, 8192, b"s", b"p"),), scram.UNSUPPORTED_SASL_MECHANISM, "mechanism"),
        ((), (("bob", 1, 1000, b"s", b"p"),), scram.UNACCEPTABLE_CREDENTIAL, "Too few"),
        ((), (("bob", 2, 20000, b"s", b"p"),), scram.UNACCEPTABLE_CREDENTIAL, "Too many"),
        ((), (("", 1, 8192, b"s", b"p"),), scram.UNACCEPTABLE_CREDENTIAL, "empty"),
        ((("bob", 1),), (), scram.RESOURCE_NOT_FOUND, "does not exist"),
        ((("alice", 2),), (("alice", 1, 8192, b"s", b"p"),), scram.DUPLICATE_RESOURCE, "twice"),
    ]
    for deletions, upsertions, code, words in refused:
        recs, [(_, error, message)], _ = scram.alter_plan(credentials, deletions, upsertions)
        assert recs == [] and error == code and words in message, (deletions, upsertions)
    recs, results, _ = scram.alter_plan({}, (), (up,), {"metadata.version": 10})
    assert recs == [] and results == [("alice", m.UNSUPPORTED_VERSION, "The current metadata "
                                      "version does not support SCRAM")], "3.5-IV1"
    recs, results, _ = scram.alter_plan(credentials, (("alice", 1),), ())
    assert results == [("alice", m.NONE, None)]
    assert image_with(recs, image_with([rec])).scram == {}
    assert scram.describe(credentials, None) == [("alice", m.NONE, None, [(1, 8192)])]
    assert [r[:2] for r in scram.describe(credentials, ["alice", "bob", "bob"])] == [
        ("alice", m.NONE), ("bob", scram.DUPLICATE_RESOURCE)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from three_brokers(tmp_path_factory, "scram")


def test_librdkafka_alters_and_describes_credentials_that_outlive_a_restart(cluster):
    a = admin(cluster)
    user = "carol"
    with pytest.raises(KafkaException) as missing:
        a.describe_user_scram_credentials([user])[user].result(60)
    assert missing.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    a.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10000), b"pw", b"salt")])[
        user].result(60)
    a.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 5000), b"pw")])[user].result(60)
    with pytest.raises(KafkaException, match="Too few iterations"):
        a.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 10), b"pw")])[
            "dave"].result(60)

    def described():  # every broker reads its own image
        out = []
        for i in cluster.ids:
            one = admin_of(cluster, i)
            d = one.describe_user_scram_credentials([user])[user].result(60)
            out.append(sorted((c.mechanism, c.iterations) for c in d.scram_credential_infos))
        return out if all(o == out[0] for o in out) and len(out[0]) == 2 else None
    want = [(ScramMechanism.SCRAM_SHA_256, 10000), (ScramMechanism.SCRAM_SHA_512, 5000)]
    assert wait_for("both credentials on every broker", described, timeout_s=30)[0] == want
    cluster.kill(1)
    cluster.start(1)
    cluster.wait_serving()
    assert wait_for("both credentials after a restart", described, timeout_s=60)[0] == want
    a.alter_user_scram_credentials([UserScramCredentialDeletion(
        user, ScramMechanism.SCRAM_SHA_512)])[user].result(60)
    every = wait_for("one credential left", lambda: (
        lambda d: d if len(d[user].scram_credential_infos) == 1 else None)(
        a.describe_user_scram_credentials().result(60)), timeout_s=30)
    assert [(c.mechanism, c.iterations) for c in every[user].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 10000)]


def admin_of(cluster, i):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": f"{cluster.host(i)}:{cluster.kafka_port}",
                        "error_cb": lambda e: None})
