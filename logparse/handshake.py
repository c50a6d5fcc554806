"""Is what listens at a Ray address a Ray server? A bounded HTTP/2 handshake and one gRPC call, before
ray.init.

Ray's GCS (`HOST:6379`) and its client server (`ray://HOST:10001`) speak gRPC, which is HTTP/2 over
plain TCP: sent the HTTP/2 client preface and an empty SETTINGS frame, such a server answers at once
with a SETTINGS frame of its own (RFC 9113 section 3.4). Anything else that listens on a port (the
dashboard's HTTP/1.1 on 8265, any web server, a database) answers otherwise, closes the connection or
stays silent, and ray.init would keep retrying it for minutes. So would it a gRPC server that is not
Ray's (still retrying after 400 s): so the probe then calls one method Ray serves with an empty
request (`GetClusterId` of the GCS's NodeInfoGcsService; `ClusterInfo` PING of the client server's
RayletDriver). Ray answers with a message (a DATA frame); another gRPC server ends the call without
one (its trailers: UNIMPLEMENTED), resets the stream or goes away. `grpc_refusal` tells all that
within one deadline, reading frame headers only (no HPACK decoding: the request's headers are written
as literals, which any HTTP/2 server reads). A cluster that wants an authentication token
(RAY_AUTH_MODE=token) gets the token Ray's client would send (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or
~/.ray/auth_token); without one the call is not made.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # length 0, type SETTINGS, no flags, stream 0
FRAME_HEADER = 9
DATA, HEADERS, RST_STREAM, SETTINGS, GOAWAY = 0x00, 0x01, 0x03, 0x04, 0x07
END_STREAM, END_HEADERS, ACK = 0x01, 0x04, 0x01
MAX_FRAME_READ = 1 << 20  # bytes of one frame's payload read at most (the rest of the answer is not needed)
# (method, its request message serialized): Ray's GCS (HOST:6379), an empty GetClusterIdRequest; Ray's
# client server (ray://HOST:10001), a ClusterInfoRequest of type PING (6), the one its proxy answers
# for a client that has not connected yet
GCS_METHOD = ("/ray.rpc.NodeInfoGcsService/GetClusterId", b"")
CLIENT_METHOD = ("/ray.rpc.RayletDriver/ClusterInfo", b"\x08\x06")


def grpc_refusal(
    sock: socket.socket,
    timeout: float,
    said: float | None = None,
    method: tuple[str, bytes] | None = None,
    authority: str = "",
) -> str | None:
    """None when the peer of the connected `sock` answers the HTTP/2 preface as a gRPC server does (and,
    given `method`, answers a call of it with a message, as Ray does), else why not (a few words for
    an error message). Waits at most `timeout` seconds (`said`: the limit to name in the message,
    when it is not `timeout`)."""
    deadline = time.monotonic() + timeout
    limit = said or timeout
    try:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        sock.sendall(PREFACE + EMPTY_SETTINGS)
        head = _read(sock, FRAME_HEADER, deadline)
    except TimeoutError:  # (socket.timeout is TimeoutError)
        return f"no answer to a gRPC handshake within {limit:g} s"
    except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
        head = b""  # it hung up (while the preface was sent, or after it): judged by what it said before
    except OSError as exc:
        return f"the connection failed during a gRPC handshake ({exc.strerror or exc})"
    if len(head) == FRAME_HEADER and head[3] == SETTINGS and int.from_bytes(head[5:9], "big") == 0:
        token = _auth_token()
        if method is None or token is False:
            return None
        return _call_refusal(sock, head, method, authority, token or None, deadline, limit)
    if head.startswith(b"HTTP/") or head.lstrip().startswith(b"<"):
        return "a web server answers there (Ray's dashboard?), not Ray's gRPC"
    if not head:
        return "the connection was closed without an answer to a gRPC handshake"
    return "what answers there does not speak gRPC"


def _read(sock: socket.socket, size: int, deadline: float) -> bytes:
    """Up to `size` bytes (fewer when the peer closes), by `deadline` (TimeoutError after it)."""
    got = b""
    while len(got) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        piece = sock.recv(size - len(got))
        if not piece:
            break
        got += piece
    return got


def _call_refusal(
    sock: socket.socket,
    settings: bytes,
    method: tuple[str, bytes],
    authority: str,
    token: str | None,
    deadline: float,
    limit: float,
) -> str | None:
    """Call `method` with an empty request on stream 1: None when a message (DATA) comes back, else why
    not. `settings`: the header of the server's SETTINGS frame (its payload is skipped, then ACKed)."""
    path, message = method
    not_ray = f"a gRPC server answers there, but not as Ray does (it does not serve {path.split('/')[1]})"
    try:
        _read(sock, int.from_bytes(settings[:3], "big"), deadline)
        sock.sendall(_frame(SETTINGS, ACK, 0, b"") + _request(path, message, authority, token))
        while True:
            head = _read(sock, FRAME_HEADER, deadline)
            if len(head) < FRAME_HEADER:
                return f"{not_ray}: it closed the connection"
            size, kind, flags = int.from_bytes(head[:3], "big"), head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            _read(sock, min(size, MAX_FRAME_READ), deadline)
            if size > MAX_FRAME_READ:
                return None if kind == DATA and stream == 1 else not_ray
            if kind == DATA and stream == 1 and size:
                return None
            if kind == GOAWAY or (
                stream == 1 and (kind == RST_STREAM or (kind == HEADERS and flags & END_STREAM))
            ):
                return not_ray
    except TimeoutError:
        return f"no answer to a gRPC call of {path} within {limit:g} s"
    except OSError as exc:
        return f"the connection failed during a gRPC call ({exc.strerror or exc})"


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream.to_bytes(4, "big") + payload


def _literal(index: int, value: str, name: str = "") -> bytes:
    """An HPACK header field "without indexing" (RFC 7541 6.2.2): a static table name (`index`) or a
    literal `name`, a literal value; no Huffman coding."""

    def integer(n: int, prefix: int, first: int = 0) -> bytes:
        top = (1 << prefix) - 1
        if n < top:
            return bytes((first | n,))
        out = [first | top]
        n -= top
        while n >= 128:
            out.append(n % 128 + 128)
            n //= 128
        return bytes((*out, n))

    def string(text: str) -> bytes:
        data = text.encode()
        return integer(len(data), 7) + data

    return integer(index, 4) + (string(name) if not index else b"") + string(value)


def _request(path: str, message: bytes, authority: str, token: str | None) -> bytes:
    """The HEADERS and DATA frames of a unary gRPC call of `path` with `message` (serialized)."""
    block = b"\x83\x86"  # :method POST, :scheme http (static table entries 3 and 6)
    block += _literal(4, path) + _literal(1, authority or "localhost")  # :path, :authority
    block += _literal(31, "application/grpc") + _literal(0, "trailers", "te")
    if token:
        block += _literal(0, f"Bearer {token}", "authorization")
    framed = b"\x00" + len(message).to_bytes(4, "big") + message  # (not compressed)
    return _frame(HEADERS, END_HEADERS, 1, block) + _frame(DATA, END_STREAM, 1, framed)


def _auth_token() -> str | bool:
    """The token Ray's client sends when token authentication is on (RAY_AUTH_MODE=token): "" when it is
    off, False when it is on and no token is found (the call would be refused for that: not made)."""
    if os.environ.get("RAY_AUTH_MODE", "").strip().lower() != "token":
        return ""
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if token:
        return token
    where = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    try:
        return Path(where).read_text(encoding="utf-8", errors="replace").strip()[:4096] or False
    except OSError:
        return False
