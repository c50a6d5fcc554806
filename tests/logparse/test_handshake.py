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

from logparse.handshake import grpc_refusal
from logparse.process import EXIT_ERROR
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


# -- a gRPC server that is not Ray's: it answers the handshake, then not a call of Ray's ---------------

SETTINGS_FRAME = b"\x00\x00\x06\x04\x00\x00\x00\x00\x00" + b"\x00\x03\x00\x00\x00\x64"


def _read_request(conn: socket.socket) -> None:
    """Read what a client sends until its DATA frame with END_STREAM (the call's message) has come."""
    conn.settimeout(5)
    data = b""
    while b"\x00\x01\x00\x00\x00\x01" not in data:  # (type DATA, flags END_STREAM, stream 1)
        piece = conn.recv(65536)
        if not piece:
            return
        data += piece


def _unimplemented(conn: socket.socket) -> None:
    """What any gRPC server answers for a method it does not serve: trailers only (grpc-status 12)."""
    conn.sendall(SETTINGS_FRAME)
    _read_request(conn)
    trailers = b"\x88" + b"\x40\x0bgrpc-status\x0212"  # :status 200, grpc-status: 12 (UNIMPLEMENTED)
    conn.sendall(len(trailers).to_bytes(3, "big") + b"\x01\x05\x00\x00\x00\x01" + trailers)


def _silent_after_settings(conn: socket.socket) -> None:
    conn.sendall(SETTINGS_FRAME)


def _answers_like_ray(conn: socket.socket) -> None:
    conn.sendall(SETTINGS_FRAME)
    _read_request(conn)
    headers = b"\x88"
    message = b"\x00\x00\x00\x00\x04\x12\x02ab"  # a message of 4 bytes
    conn.sendall(len(headers).to_bytes(3, "big") + b"\x01\x04\x00\x00\x00\x01" + headers)
    conn.sendall(len(message).to_bytes(3, "big") + b"\x00\x00\x00\x00\x00\x01" + message)


@pytest.mark.slow  # the silent server's case waits out the 2 s handshake timeout
@pytest.mark.parametrize(
    "answer,refused",
    [
        (_answers_like_ray, None),
        (_unimplemented, "a gRPC server answers there, but not as Ray does"),
        (_silent_after_settings, "no answer to a gRPC call of /ray.rpc.NodeInfoGcsService/GetClusterId"),
        (
            lambda conn: (conn.sendall(SETTINGS_FRAME), _read_request(conn), conn.close()),
            "closed the connection",
        ),
    ],
    ids=["ray", "unimplemented", "silent", "hangs-up"],
)
def test_a_call_of_rays_tells_ray_from_another_grpc_server(answer, refused: str | None) -> None:
    from logparse.handshake import GCS_METHOD

    with tcp_server(answer) as port, socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        why = grpc_refusal(sock, 2.0, method=GCS_METHOD, authority=f"127.0.0.1:{port}")
    assert why is None if refused is None else refused in why, why


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_fleet_at_a_grpc_server_that_is_not_ray_fails_in_seconds(scheme: str) -> None:
    """A gRPC/HTTP2 server that answers SETTINGS: ray.init was still retrying after 400 s."""
    pytest.importorskip("ray")
    with tcp_server(_unimplemented) as port:
        result = fleet_at(f"{scheme}127.0.0.1:{port}")
    assert_one_line_error(
        result, f"{scheme}127.0.0.1:{port}", "a gRPC server answers there, but not as Ray does"
    )


@pytest.mark.slow
def test_sigterm_while_the_probe_waits_ends_at_once() -> None:
    """A SIGTERM took 21 s to end a fleet retrying a gRPC server."""
    import signal
    import time

    pytest.importorskip("ray")
    with tcp_server(_silent_after_settings) as port:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        args = [sys.executable, "-m", "logparse", "fleet", str(SAMPLE), "--engine", "ray"]
        proc = subprocess.Popen(
            [*args, "--address", f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True, env=env
        )
        time.sleep(3)  # (importing Ray, then the probe waits for its answer)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert time.monotonic() - sent < 5 and "Traceback" not in err, err
    assert proc.returncode in (143, -signal.SIGTERM), err
