"""`fleet --engine ray --address HOST:PORT` where something other than Ray listens (the dashboard's port,
any web server, a service that never answers) is a one-line error naming the address, exit 2, in
seconds: a gRPC handshake is tried before ray.init, which would retry such an address for minutes."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from logparse.cli import EXIT_ERROR
from logparse.handshake import grpc_refusal
from tests.conftest import ROOT, SAMPLES

SAMPLE = SAMPLES / "ray-actor-exception.log"
HANG_GUARD_S = 120  # ray.init's own retries last longer: a run past this is the old behaviour


@contextmanager
def http_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def tcp_server(on_connect) -> Iterator[int]:
    """A listening socket whose every connection is handed to `on_connect(conn)`."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)
            try:
                on_connect(conn)
            except OSError:  # the test is over and closed the connection
                return

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        for conn in held:
            conn.close()


def fleet_at(address: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = [sys.executable, "-m", "logparse", "fleet", str(SAMPLE), "--engine", "ray", "--address", address]
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=HANG_GUARD_S)


def assert_one_line_error(result: subprocess.CompletedProcess, address: str, why: str) -> None:
    assert result.returncode == EXIT_ERROR, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"verl-logscan: error: cannot reach Ray at {address}: {why}")
    assert result.stdout == ""


@pytest.mark.slow
def test_a_web_server_at_the_address_is_a_clear_error() -> None:
    pytest.importorskip("ray")
    with http_server() as port:
        result = fleet_at(f"127.0.0.1:{port}")
    assert_one_line_error(result, f"127.0.0.1:{port}", "a web server answers there")


@pytest.mark.slow
def test_a_service_that_never_answers_is_a_clear_error() -> None:
    pytest.importorskip("ray")
    with tcp_server(lambda conn: None) as port:  # accepts, reads nothing, says nothing
        result = fleet_at(f"ray://127.0.0.1:{port}")
    assert_one_line_error(result, f"ray://127.0.0.1:{port}", "no answer to a gRPC handshake within 5 s")


@pytest.mark.slow
def test_a_service_that_hangs_up_is_a_clear_error() -> None:
    pytest.importorskip("ray")
    with tcp_server(lambda conn: conn.close()) as port:
        result = fleet_at(f"127.0.0.1:{port}")
    assert_one_line_error(result, f"127.0.0.1:{port}", "the connection was closed")


def _answer_as_http2(conn: socket.socket) -> None:
    conn.sendall(b"\x00\x00\x06\x04\x00\x00\x00\x00\x00" + b"\x00\x03\x00\x00\x00\x64")  # SETTINGS


@pytest.mark.parametrize(
    "answer,refused",
    [
        (_answer_as_http2, None),  # what Ray's GCS (gRPC) sends first
        (lambda conn: conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n"), "a web server answers there"),
        (
            lambda conn: conn.sendall(b"-ERR unknown command 'PRI'\r\n"),
            "what answers there does not speak gRPC",
        ),
        (lambda conn: conn.sendall(b"\x00\x00\x08\x07\x00\x00\x00\x00\x00"), "does not speak gRPC"),  # GOAWAY
    ],
    ids=["grpc", "http1", "redis", "goaway"],
)
def test_the_handshake_tells_a_grpc_server_from_others(answer, refused: str | None) -> None:
    with tcp_server(answer) as port, socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        why = grpc_refusal(sock, 5.0)
    assert why is None if refused is None else refused in why
