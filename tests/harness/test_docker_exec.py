"""A command's output read back whole through the Docker API, however its frames arrive.

An exec is an HTTP upgrade; when the command writes before the client has read the
answer's headers, its first frames come in the same read as the headers. A stand-in
Docker daemon on a Unix socket sends exactly that: the headers and every frame in one
write, then closes."""
import json
import socket
import struct
import threading

import docker
import pytest

from harness.backends.docker_backend import exec_output

OUTPUT = [(1, b"s" * 5000), (2, b"warning\n"), (1, b"u" * 15000)]  # past one 8 KiB read
UPGRADED = (b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
            b"Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n")


def _request(conn) -> str:
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(4096)
    head, body = data.split(b"\r\n\r\n", 1)
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        body += conn.recv(4096)
    return head.split(b"\r\n")[0].decode()


def _answer(body: dict, status: str = "200 OK") -> bytes:
    data = json.dumps(body).encode()
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nConnection: close\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


def _serve(server) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            line = _request(conn)
            if line.startswith("POST") and line.split()[1].endswith("/containers/c1/exec"):
                conn.sendall(_answer({"Id": "e1"}, "201 Created"))
            elif line.startswith("POST") and "/exec/e1/start" in line:
                frames = b"".join(struct.pack(">BxxxL", kind, len(d)) + d for kind, d in OUTPUT)
                conn.sendall(UPGRADED + frames)
            elif line.startswith("GET") and "/exec/e1/json" in line:
                conn.sendall(_answer({"ExitCode": 3, "Running": False}))
            else:
                conn.sendall(_answer({"message": f"unexpected {line}"}, "404 Not Found"))


@pytest.fixture
def api(tmp_path):
    path = tmp_path / "docker.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    thread = threading.Thread(target=_serve, args=(server,), daemon=True)
    thread.start()
    client = docker.APIClient(base_url=f"unix://{path}", version="1.41", timeout=10)
    yield client
    client.close()
    server.close()


def test_frames_that_came_with_the_headers_are_kept(api):
    # docker-py's own exec reads past the buffer those frames are in: what it returns lacks
    # them, so this stand-in reproduces what the harness met
    lost = api.exec_start(api.exec_create("c1", ["cat", "f"])["Id"])
    assert lost != b"".join(d for _, d in OUTPUT)
    rc, out = exec_output(api, "c1", ["cat", "f"], {})
    assert (rc, out) == (3, b"".join(d for _, d in OUTPUT))
