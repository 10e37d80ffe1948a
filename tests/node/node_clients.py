"""Three real node processes for the admin and wire tests, and asking them: a librdkafka
admin client, a topic on every broker, one request on the wire at a chosen version."""
from confluent_kafka.admin import AdminClient

from conftest import create_topic_everywhere, local_brokers


def three_brokers(tmp_path_factory, name: str):
    """A module's cluster: three node processes, min.insync.replicas 1."""
    with local_brokers(tmp_path_factory.mktemp(name),
                       extra_config={"min.insync.replicas": "1"}) as c:
        yield c


def admin(cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap(), "error_cb": lambda e: None})


def create(cluster, name, config):
    create_topic_everywhere(cluster, name, 2, config, timeout_s=60)


def wire(cluster, host: str, api: int, version: int, body, client_id: str = "chaoskraft"):
    """One request on its own connection to `host`, as a client that knows `version` sends
    it, and the answer decoded."""
    import socket

    from node_image import kafka_codec as kc
    with socket.create_connection((host, cluster.kafka_port), timeout=10) as s:
        s.sendall(kc.encode_request(api, version, body, client_id=client_id))
        return kc.decode_response(api, version, kc.recv_frame(s))
