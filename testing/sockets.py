"""Blocking-socket helpers for code that talks to a broker without a client library.

pafka's own client (``client/connection.py``) reads through the sans-IO frame decoder
instead; these are for tests and benchmarks that must see exact frames.
"""

from __future__ import annotations

import socket
import struct
from typing import Any, Protocol

from protocol.api import decode_response, encode_request
from protocol.buffers import join_chunks
from protocol.primitives import Message

_SIZE = struct.Struct(">i")


class ConnectionClosed(ConnectionError):
    """The peer closed the connection before every byte asked for had arrived."""


class HasAddress(Protocol):
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...


def read_exactly_into(sock: socket.socket, view: memoryview) -> None:
    """Fill ``view`` from ``sock``; :class:`ConnectionClosed` if the peer closes first."""
    got, want = 0, len(view)
    while got < want:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionClosed(f"connection closed after {got} of {want} bytes")
        got += n


def read_exactly(sock: socket.socket, n: int) -> bytearray:
    """The next ``n`` bytes of ``sock``; :class:`ConnectionClosed` if the peer closes first."""
    buf = bytearray(n)
    read_exactly_into(sock, memoryview(buf))
    return buf


def read_frame(sock: socket.socket) -> bytearray:
    """One size-prefixed Kafka frame, without its size."""
    (size,) = _SIZE.unpack(read_exactly(sock, 4))
    return read_exactly(sock, size)


def send_request(broker: HasAddress, api_key: int, api_version: int, body: Message, timeout: float = 10.0) -> Any:
    """One request on a fresh connection; the decoded response body (for fields no client exposes).

    ``Any``: the body's class depends on ``api_key``, and callers read its fields.
    """
    frame = join_chunks(encode_request(api_key, api_version, 1, "pafka-tests", body))
    with socket.create_connection((broker.host, broker.port), timeout=timeout) as sock:
        sock.sendall(frame)
        _, response = decode_response(api_key, api_version, read_frame(sock))
    return response
