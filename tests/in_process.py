"""What the in-process rigs share: running a scenario on a fresh event loop, waiting on it, and a
Kafka protocol server on a loopback socket.

The two rigs (``tests/replication/replication_rig.py``: real replica managers under a hand-driven
controller; ``tests/controller/controller_rig.py``: real controllers over recording broker
endpoints) each put one side of a cluster under test against a scripted double of the other; the
real thing with both sides is the process cluster of ``pytest_pafka``.
"""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Awaitable, Callable
from typing import TypeVar

from protocol.api import DecodedRequest, decode_request, encode_response
from protocol.buffers import FileRange
from protocol.primitives import Message
from pytest_pafka.waiting import wait_until_async

T = TypeVar("T")
_SIZE = struct.Struct(">i")
#: What a server's ``answer`` gives for a request: the response, or an awaitable of it.
Answer = Callable[[DecodedRequest], "Message | Awaitable[Message]"]


def run(coro: Awaitable[T], timeout: float = 90.0) -> T:
    """Run ``coro`` on a fresh event loop, bounded by ``timeout`` (a hung scenario fails, it does not hang)."""
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


async def wait_for(predicate: Callable[[], object] | Callable[[], Awaitable[object]], what: str = "condition",
                   timeout: float = 15.0, *, interval: float = 0.02) -> None:
    """Poll ``predicate`` (plain or async) on the running loop until it is truthy; a timeout names ``what``."""
    await wait_until_async(predicate, timeout, what, interval=interval)


class KafkaFrameServer:
    """Reads request frames on 127.0.0.1, decodes them with ``protocol.api`` and writes back what
    ``answer`` returns (file ranges read with pread). :meth:`close` ends every connection."""

    def __init__(self, answer: Answer, host: str = "127.0.0.1", port: int = 0) -> None:
        self.answer = answer
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        """Listen (port 0: a free one) and return the port."""
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                decoded = decode_request(await reader.readexactly(size))
                answer = self.answer(decoded)
                body = answer if isinstance(answer, Message) else await answer
                for chunk in encode_response(decoded.api_key, decoded.api_version, decoded.correlation_id, body):
                    if isinstance(chunk, FileRange):
                        writer.write(os.pread(chunk.file.fileno(), chunk.length, chunk.offset))
                    else:
                        writer.write(bytes(chunk))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            self._connections.discard(task)

    async def close(self) -> None:
        """Stop listening and end the open connections (a second call does nothing)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()
