"""Raw Kafka frames for the tests that must send what no client would."""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from testing.sockets import ConnectionClosed, read_frame

API_VERSIONS_KEY = 18


def encode_request(api_key: int, api_version: int, correlation_id: int, body: bytes = b"",
                   client_id: str = "pafka-tests") -> bytes:
    """A size-prefixed request with a v1 (non-flexible) header and ``body`` as given."""
    cid = client_id.encode()
    payload = struct.pack(">hhih", api_key, api_version, correlation_id, len(cid)) + cid + body
    return struct.pack(">i", len(payload)) + payload


def read_response(sock: socket.socket) -> bytes | None:
    """One response frame (without its size), or None if the connection closed."""
    try:
        return bytes(read_frame(sock))
    except ConnectionClosed:
        return None


@dataclass(frozen=True)
class ApiVersionsV0:
    correlation_id: int
    error_code: int
    api_keys: dict[int, tuple[int, int]]


def parse_api_versions_v0(frame: bytes) -> ApiVersionsV0:
    """A v0 response: correlation id, error code, [api key, min, max] (no tagged fields)."""
    correlation_id, error_code, count = struct.unpack_from(">ihi", frame, 0)
    keys: dict[int, tuple[int, int]] = {}
    pos = 10
    for _ in range(count):
        key, lo, hi = struct.unpack_from(">hhh", frame, pos)
        keys[key] = (lo, hi)
        pos += 6
    return ApiVersionsV0(correlation_id, error_code, keys)


def api_versions_v0(host: str, port: int, timeout: float = 2.0) -> ApiVersionsV0:
    """ApiVersions v0 on a new connection."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(encode_request(API_VERSIONS_KEY, 0, 1))
        frame = read_response(sock)
    if frame is None:
        raise ConnectionError("connection closed before the ApiVersions response")
    return parse_api_versions_v0(frame)
