"""The controller's connections to the brokers: Kafka's ControllerChannelManager.

One :class:`_BrokerSender` per registered broker (Kafka's RequestSendThread, as an
asyncio task): it keeps one :class:`~client.async_connection.AsyncBrokerConnection`
to the broker's ``inter.broker.listener.name`` endpoint and sends the controller's
LeaderAndIsr / UpdateMetadata / StopReplica requests in the order queued. A request
that fails (connection refused or lost, timeout) is sent again after a backoff, as
Kafka's thread does, until it is answered or the broker is removed (it went away, or
this controller resigned). A response goes to the request's callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from client.async_connection import AsyncBrokerConnection
from client.errors import KafkaClientError, NoCompatibleVersionError
from client.sasl import SaslSettings
from controller.zk.zk_data import BrokerInfo
from protocol.primitives import Message

__all__ = ["ControllerChannelManager", "ResponseCallback", "preferred_version"]

log = logging.getLogger(__name__)

#: Kafka 3.9's versions of the controller's requests (inter.broker.protocol.version 3.9).
PREFERRED_VERSIONS: dict[int, int] = {4: 7, 5: 4, 6: 8}

ResponseCallback = Callable[[Message], None]


def preferred_version(connection: AsyncBrokerConnection, api_key: int) -> int:
    """Kafka 3.9's version of a controller request, or the highest both sides know.

    A broker that does not list the inter-broker APIs in ApiVersions gets Kafka 3.9's
    version: Kafka's controller picks these from the inter-broker protocol version,
    not by negotiation.
    """
    wanted = PREFERRED_VERSIONS[api_key]
    try:
        return connection.version_for(api_key, max_version=wanted)
    except NoCompatibleVersionError:
        return wanted


def _api_key(request: Message) -> int:
    key = request.API_KEY
    if key is None:
        raise TypeError(f"{type(request).__name__} is not a request")
    return key


@dataclass(slots=True)
class _QueuedRequest:
    request: Message
    callback: ResponseCallback | None


class _BrokerSender:
    """Sends one broker the controller's requests, one at a time, retrying each until answered."""

    def __init__(
        self,
        broker: BrokerInfo,
        listener_name: str,
        controller_id: int,
        request_timeout_s: float,
        retry_backoff_s: float,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslSettings | None = None,
    ) -> None:
        self.broker = broker
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.listener_name = listener_name
        self.controller_id = controller_id
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s = retry_backoff_s
        self.queue: asyncio.Queue[_QueuedRequest] = asyncio.Queue()
        self.connection: AsyncBrokerConnection | None = None
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"controller-{self.controller_id}-to-broker-{self.broker.id}"
        )

    async def stop(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._close()

    def _close(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            connection.close()

    async def _connection(self) -> AsyncBrokerConnection:
        if self.connection is not None and self.connection.connected:
            return self.connection
        endpoint = self.broker.endpoint(self.listener_name)
        if endpoint is None:
            raise KafkaClientError(f"broker {self.broker.id} has no {self.listener_name} endpoint")
        connection = AsyncBrokerConnection(
            endpoint.host,
            endpoint.port,
            client_id=f"controller-{self.controller_id}",
            node_id=self.broker.id,
            request_timeout=self.request_timeout_s,
            ssl_context=self.ssl_context,
            sasl=self.sasl,
        )
        await connection.connect(timeout=self.request_timeout_s)
        self.connection = connection
        return connection

    async def _run(self) -> None:
        while True:
            queued = await self.queue.get()
            response = await self._send_until_answered(queued.request)
            if queued.callback is not None:
                try:
                    queued.callback(response)
                except Exception:
                    log.exception("controller %d: callback for %s from broker %d failed",
                                  self.controller_id, type(response).__name__, self.broker.id)

    async def _send_until_answered(self, request: Message) -> Message:
        backoff = self.retry_backoff_s
        while True:
            try:
                connection = await self._connection()
                version = preferred_version(connection, _api_key(request))
                return await connection.request(request, version=version)
            except (KafkaClientError, OSError) as exc:
                log.warning("controller %d: %s to broker %d failed (%s); retrying in %.2f s",
                            self.controller_id, type(request).__name__, self.broker.id, exc, backoff)
                self._close()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 10 * self.retry_backoff_s)


class ControllerChannelManager:
    """Kafka's ControllerChannelManager: a sender per live broker."""

    def __init__(
        self,
        controller_id: int,
        inter_broker_listener_name: str,
        *,
        request_timeout_s: float = 30.0,
        retry_backoff_s: float = 0.1,
        ssl_context: ssl.SSLContext | None = None,
        sasl: SaslSettings | None = None,
    ) -> None:
        self.controller_id = controller_id
        self.listener_name = inter_broker_listener_name
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s = retry_backoff_s
        self._senders: dict[int, _BrokerSender] = {}
        #: Aborted senders' tasks, referenced until their cancellation completes.
        self._aborted: set[asyncio.Task[None]] = set()

    @property
    def broker_ids(self) -> set[int]:
        return set(self._senders)

    def add_broker(self, broker: BrokerInfo) -> None:
        if broker.id in self._senders:
            return
        sender = _BrokerSender(broker, self.listener_name, self.controller_id, self.request_timeout_s,
                               self.retry_backoff_s, self.ssl_context, self.sasl)
        self._senders[broker.id] = sender
        sender.start()

    async def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            await sender.stop()

    def send_request(self, broker_id: int, request: Message, callback: ResponseCallback | None = None) -> None:
        sender = self._senders.get(broker_id)
        if sender is None:
            log.warning("controller %d: not sending %s to broker %d: it is not alive",
                        self.controller_id, type(request).__name__, broker_id)
            return
        sender.queue.put_nowait(_QueuedRequest(request, callback))

    def pending(self, broker_id: int) -> int:
        """Requests queued for ``broker_id`` and not yet taken by its sender."""
        sender = self._senders.get(broker_id)
        return sender.queue.qsize() if sender is not None else 0

    def abort(self) -> None:
        """Stop every sender now, without waiting (the controller was deposed)."""
        senders, self._senders = self._senders, {}
        for sender in senders.values():
            if sender.task is not None:
                sender.task.cancel()
                self._aborted.add(sender.task)
                sender.task.add_done_callback(self._aborted.discard)
            sender.task = None
            sender._close()

    async def shutdown(self) -> None:
        senders, self._senders = self._senders, {}
        for sender in senders.values():
            await sender.stop()
