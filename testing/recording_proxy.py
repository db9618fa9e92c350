"""A TCP proxy that records what clients send: one thread with its own event loop, in front of
one broker listener (advertise the proxy's port so that clients keep going through it).

Every connection's client-to-broker bytes are kept under the label current when it was
accepted (``label``: which client drove it), for ``fuzz.record_traffic`` to split into frames.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from pytest_pafka.ports import free_port


@dataclass
class RecordedConnection:
    label: str
    sent: bytearray = field(default_factory=bytearray)


class RecordingProxy:
    def __init__(self, target_host: str, target_port: int, host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.host, self.port = host, free_port(host)
        self.label = "unlabelled"
        self.connections: list[RecordedConnection] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="recording-proxy", daemon=True)
        self._server: asyncio.base_events.Server | None = None

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, self.host, self.port), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        recorded = RecordedConnection(self.label)
        self.connections.append(recorded)
        try:
            broker_r, broker_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(self._pipe(client_r, broker_w, recorded.sent), self._pipe(broker_r, client_w, None),
                             return_exceptions=True)

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: bytearray | None) -> None:
        try:
            while data := await reader.read(65536):
                if record is not None:
                    record += data
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()
