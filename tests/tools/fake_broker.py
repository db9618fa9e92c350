"""A scripted broker on a loopback socket for the client's protocol tests.

It decodes real request frames with ``protocol.api`` and answers each with
whatever the test's handler returns (a message to encode, or raw frame bytes),
so the client is exercised against exact wire bytes without a full broker.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

from protocol.api import DecodedRequest, decode_request, encode_response
from protocol.buffers import join_chunks
from protocol.messages.api_versions import ApiVersion, ApiVersionsResponse
from protocol.primitives import Message
from testing.sockets import read_frame

Handler = Callable[[DecodedRequest], "Message | bytes | None"]


def api_versions_response(ranges: dict[int, tuple[int, int]], error_code: int = 0) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=error_code,
        api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(ranges.items())],
    )


class FakeBroker:
    """Serves connections on 127.0.0.1 (a thread each) until closed."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[DecodedRequest] = []
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(4)
        self.port = self._server.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        # shutdown() wakes a thread blocked in accept(); close() alone does not on Linux.
        try:
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeBroker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve_and_close, args=(conn,), daemon=True).start()

    def _serve_and_close(self, conn: socket.socket) -> None:
        with conn:
            self._serve_connection(conn)

    def _serve_connection(self, conn: socket.socket) -> None:
        while True:
            try:
                frame = read_frame(conn)
            except OSError:  # the client hung up (or the test closed us)
                return
            request = decode_request(frame)
            self.requests.append(request)
            reply = self.handler(request)
            if reply is None:
                continue
            if isinstance(reply, bytes):
                conn.sendall(reply)
            else:
                conn.sendall(
                    join_chunks(encode_response(request.api_key, request.api_version, request.correlation_id, reply))
                )
