"""Requests sent on one connection and not yet answered, oldest first (Kafka's InFlightRequests).

Sans-IO: both connections encode through :meth:`InFlightRequests.add` and
decode every response frame through :meth:`InFlightRequests.complete`. Kafka
answers a connection's requests strictly in the order they were sent, so each
response must carry the correlation id of the oldest request in flight; one
that does not means the stream is out of step, and the caller closes the
connection.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

from client.errors import CorrelationIdMismatchError
from protocol.api import API_VERSIONS_KEY, APIS, ApiSpec, decode_response, encode_request
from protocol.buffers import Chunk
from protocol.errors import ProtocolError
from protocol.primitives import Message

__all__ = ["InFlightRequest", "InFlightRequests", "request_spec"]


@dataclass(frozen=True, slots=True)
class InFlightRequest:
    correlation_id: int
    spec: ApiSpec
    version: int


def request_spec(body: Message) -> ApiSpec:
    """The API whose request ``body`` is; TypeError for anything else (a response, a sub-struct)."""
    api_key = getattr(type(body), "API_KEY", None)
    spec = APIS.get(api_key) if api_key is not None else None
    if spec is None or spec.request is not type(body):
        raise TypeError(f"{type(body).__name__} is not a request message")
    return spec


class InFlightRequests:
    """Correlation ids, request encoding and in-order response matching for one connection."""

    def __init__(self, client_id: str | None, address: object) -> None:
        self.client_id = client_id
        self.address = address
        self._next_correlation_id = 0
        self._queue: collections.deque[InFlightRequest] = collections.deque()

    def add(self, spec: ApiSpec, version: int, body: Message, *, expect_response: bool = True) -> tuple[
        InFlightRequest, list[Chunk]
    ]:
        """The request's frame (size prefix included) under a fresh correlation id.

        With ``expect_response`` the request joins the queue of those awaiting
        a response; without (Produce with acks=0) the broker never answers it.
        """
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        chunks = encode_request(spec.api_key, version, correlation_id, self.client_id, body)
        request = InFlightRequest(correlation_id, spec, version)
        if expect_response:
            self._queue.append(request)
        return request, chunks

    def complete(self, frame: memoryview) -> tuple[InFlightRequest, Message]:
        """Decode ``frame`` as the response to the oldest request in flight, which it completes.

        Raises CorrelationIdMismatchError when the frame answers another
        request, ProtocolError when it is malformed or nothing is in flight.
        """
        if not self._queue:
            raise ProtocolError(f"{self.address}: a response arrived with no request in flight")
        expected = self._queue[0]
        correlation_id, body = _decode(expected, frame)
        if correlation_id != expected.correlation_id:
            raise CorrelationIdMismatchError(
                f"{self.address}: {expected.spec.name} response has correlation id {correlation_id}, "
                f"expected {expected.correlation_id}"
            )
        self._queue.popleft()
        return expected, body

    def clear(self) -> list[InFlightRequest]:
        """Forget every request in flight (the connection is gone); returns them, oldest first."""
        lost = list(self._queue)
        self._queue.clear()
        return lost

    def __len__(self) -> int:
        return len(self._queue)


def _decode(expected: InFlightRequest, frame: memoryview) -> tuple[int, Message]:
    try:
        return decode_response(expected.spec.api_key, expected.version, frame)
    except ProtocolError:
        if expected.spec.api_key != API_VERSIONS_KEY or expected.version == 0:
            raise
        # A broker that does not know our ApiVersions version answers in v0 (KIP-511).
        return decode_response(API_VERSIONS_KEY, 0, frame)
