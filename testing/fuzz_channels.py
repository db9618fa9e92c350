"""Client-side byte channels for fuzzing a broker: plain TCP, and TLS driven through memory BIOs.

TLS is run by hand (``ssl.SSLObject`` over ``ssl.MemoryBIO``) rather than by the event loop's SSL
transport because a fuzzer needs the raw handshake bytes: the ClientHello to truncate or corrupt,
the client's second flight to cut short, and a way to write bytes that bypass the TLS layer after
the handshake. Every wait is bounded: a read that times out raises :class:`TimeoutError`.

:class:`KafkaWire` puts Kafka framing on top of either channel: requests encoded with pafka's own
codecs, bare size-prefixed SASL tokens (after a v0 SaslHandshake), and "did the broker close?".
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from typing import Protocol

from protocol.api import decode_response, encode_request
from protocol.buffers import join_chunks
from protocol.primitives import Message

_READ_SIZE = 65536


class Closed(Exception):
    """The broker closed (or reset) the connection."""


class Channel(Protocol):
    async def send(self, data: bytes) -> None: ...

    async def recv(self, timeout: float) -> bytes:
        """Some bytes, or b'' once the broker has closed; TimeoutError if nothing comes in time."""
        ...

    def close(self) -> None: ...


class PlainChannel:
    """A TCP connection; ECONNRESET and friends read as a close, which is what they are."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.eof = False

    @classmethod
    async def open(cls, host: str, port: int, timeout: float) -> PlainChannel:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, limit=1 << 20), timeout)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        if self.eof:
            raise Closed("closed by the broker")
        try:
            self._writer.write(data)
            await self._writer.drain()
        except (ConnectionError, BrokenPipeError) as exc:
            self.eof = True
            raise Closed(str(exc)) from None

    async def recv(self, timeout: float) -> bytes:
        if self.eof:
            return b""
        try:
            data = await asyncio.wait_for(self._reader.read(_READ_SIZE), timeout)
        except ConnectionError:
            data = b""
        if not data:
            self.eof = True
        return data

    def close(self) -> None:
        # Abort rather than close: a fuzzer's client vanishing mid-exchange is the harder case for the
        # broker, and it leaves no TIME_WAIT state or unsent buffer on this side.
        self._writer.transport.abort()


class TlsChannel:
    """TLS over a :class:`PlainChannel`, through memory BIOs so the handshake bytes can be fuzzed."""

    def __init__(self, raw: PlainChannel, context: ssl.SSLContext) -> None:
        self.raw = raw
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=False)

    def first_flight(self) -> bytes:
        """The ClientHello (nothing is sent): what a handshake fuzz case truncates or corrupts."""
        try:
            self._tls.do_handshake()
        except ssl.SSLWantReadError:
            pass
        return self._outgoing.read()

    async def handshake(self, timeout: float, *, hold_last_flight: bool = False) -> bytes:
        """Complete the handshake; with ``hold_last_flight`` the client's final flight is returned unsent."""
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            await self._flush()
            await self._pull(timeout)
        if hold_last_flight:
            return self._outgoing.read()
        await self._flush()
        return b""

    async def _flush(self) -> None:
        pending = self._outgoing.read()
        if pending:
            await self.raw.send(pending)

    async def _pull(self, timeout: float) -> None:
        data = await self.raw.recv(timeout)
        if not data:
            raise Closed("closed by the broker during TLS")
        self._incoming.write(data)

    async def send(self, data: bytes) -> None:
        self._tls.write(data)
        await self._flush()

    async def recv(self, timeout: float) -> bytes:
        while True:
            try:
                return self._tls.read(_READ_SIZE)
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""
            except ssl.SSLError as exc:  # a broker answering garbage with an alert
                raise Closed(f"TLS error: {exc}") from None
            await self._flush()  # e.g. a key update the read produced
            data = await self.raw.recv(timeout)
            if not data:
                return b""
            self._incoming.write(data)

    def close(self) -> None:
        self.raw.close()


def _api_key(body: Message) -> int:
    api_key = type(body).API_KEY
    assert api_key is not None, f"{type(body).__name__} is not a request"
    return api_key


class KafkaWire:
    """Kafka frames over a channel: requests, responses, bare SASL tokens, and the broker's close."""

    def __init__(self, channel: Channel, client_id: str = "pafka-fuzz") -> None:
        self.channel = channel
        self.client_id = client_id
        self._buffer = bytearray()
        self._correlation_id = 0

    def frame(self, body: Message, version: int, correlation_id: int | None = None) -> bytes:
        """One request frame, size prefix included."""
        if correlation_id is None:
            self._correlation_id += 1
            correlation_id = self._correlation_id
        return join_chunks(encode_request(_api_key(body), version, correlation_id, self.client_id, body))

    async def request(self, body: Message, version: int, timeout: float) -> Message:
        """Send one request and decode its answer; Closed if the broker closes instead."""
        frame = self.frame(body, version)
        await self.channel.send(frame)
        return await self.response(_api_key(body), version, timeout)

    async def response(self, api_key: int, version: int, timeout: float) -> Message:
        correlation_id, body = decode_response(api_key, version, await self.read_frame(timeout))
        if correlation_id != self._correlation_id:
            raise AssertionError(f"correlation id {correlation_id}, expected {self._correlation_id}")
        return body

    async def token(self, token: bytes, timeout: float) -> bytes:
        """A bare SASL token (after a v0 SaslHandshake) and the bare answer."""
        await self.channel.send(struct.pack(">i", len(token)) + token)
        return await self.read_frame(timeout)

    async def read_frame(self, timeout: float) -> bytes:
        while True:
            if len(self._buffer) >= 4:
                size = struct.unpack_from(">i", self._buffer)[0]
                if size < 0:
                    raise AssertionError(f"the broker sent a frame size of {size}")
                if len(self._buffer) >= 4 + size:
                    frame = bytes(self._buffer[4 : 4 + size])
                    del self._buffer[: 4 + size]
                    return frame
            data = await self.channel.recv(timeout)
            if not data:
                raise Closed("closed by the broker")
            self._buffer += data

    async def closed_by_broker(self, timeout: float) -> bool:
        """Wait (bounded) for the broker to close, discarding what it sends; False if it did not."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while (left := deadline - loop.time()) > 0:
                if not await self.channel.recv(left):
                    return True
        except Closed:
            return True
        except TimeoutError:
            return False
        return False

    async def linger(self, seconds: float) -> None:
        """Read whatever comes for up to ``seconds`` (answers, alerts, the close); never raises for them."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        try:
            while (left := deadline - loop.time()) > 0:
                if not await self.channel.recv(left):
                    return
        except (TimeoutError, Closed):
            return

    def close(self) -> None:
        self.channel.close()
