"""Is what listens at a Ray address a Ray server? A bounded HTTP/2 handshake, before ray.init.

Ray's GCS (`HOST:6379`) and its client server (`ray://HOST:10001`) speak gRPC, which is HTTP/2 over
plain TCP: sent the HTTP/2 client preface and an empty SETTINGS frame, such a server answers at once
with a SETTINGS frame of its own (RFC 9113 section 3.4). Anything else that listens on a port (the
dashboard's HTTP/1.1 on 8265, any web server, a database) answers otherwise, closes the connection or
stays silent, and ray.init would keep retrying it for minutes. `grpc_refusal` tells that in one round
trip, within a deadline.
"""

from __future__ import annotations

import socket
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # length 0, type SETTINGS, no flags, stream 0
FRAME_HEADER = 9
SETTINGS = 0x04


def grpc_refusal(sock: socket.socket, timeout: float, said: float | None = None) -> str | None:
    """None when the peer of the connected `sock` answers the HTTP/2 preface as a gRPC server does,
    else why not (a few words for an error message). Waits at most `timeout` seconds (`said`: the
    limit to name in the message, when it is not `timeout`)."""
    deadline = time.monotonic() + timeout
    head = b""
    try:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        sock.sendall(PREFACE + EMPTY_SETTINGS)
        while len(head) < FRAME_HEADER:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
            got = sock.recv(FRAME_HEADER - len(head))
            if not got:
                break
            head += got
    except TimeoutError:  # (socket.timeout is TimeoutError)
        return f"no answer to a gRPC handshake within {said or timeout:g} s"
    except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
        pass  # it hung up (while the preface was sent, or after it): judged by what it said before
    except OSError as exc:
        return f"the connection failed during a gRPC handshake ({exc.strerror or exc})"
    if len(head) == FRAME_HEADER and head[3] == SETTINGS and int.from_bytes(head[5:9], "big") == 0:
        return None
    if head.startswith(b"HTTP/") or head.lstrip().startswith(b"<"):
        return "a web server answers there (Ray's dashboard?), not Ray's gRPC"
    if not head:
        return "the connection was closed without an answer to a gRPC handshake"
    return "what answers there does not speak gRPC"
