"""The broker's side of controlled shutdown (Kafka's KafkaServer.controlledShutdown).

A SIGTERMed broker asks the controller, over the inter-broker listener, to move
every leadership it holds to another in-sync replica (ControlledShutdown,
key 7) while it still serves, so no partition is ever without a leader. The
controller answers with the partitions it could not move yet; the broker asks
again after ``controlled.shutdown.retry.backoff.ms``, at most
``controlled.shutdown.max.retries`` times, then shuts down regardless (Kafka's
"unclean shutdown" warning). A controller that moved or died between attempts
is looked up again.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable

from broker.config.broker_config import BrokerConfig
from client.async_connection import AsyncBrokerConnection
from client.errors import KafkaClientError
from client.sasl import SaslSettings
from protocol.errors import ErrorCode
from protocol.messages.controlled_shutdown import ControlledShutdownRequest, ControlledShutdownResponse

log = logging.getLogger(__name__)

#: The newest ControlledShutdown version (Kafka 3.9): v2 adds the broker epoch, v3 is flexible.
MAX_VERSION = 3
ControllerLookup = Callable[[], Awaitable[tuple[int, str, int] | None]]


class ControlledShutdownClient:
    def __init__(self, broker_id: int, broker_epoch_fn: Callable[[], int], lookup_controller: ControllerLookup,
                 config: BrokerConfig, ssl_context: ssl.SSLContext | None = None,
                 sasl: SaslSettings | None = None) -> None:
        """``ssl_context``: TLS to the controller (an SSL inter-broker listener); None for plain TCP."""
        self.broker_id = broker_id
        self.ssl_context = ssl_context
        self.sasl = sasl
        self.broker_epoch_fn = broker_epoch_fn
        self.lookup_controller = lookup_controller
        self.max_retries = config.controlled_shutdown_max_retries
        self.backoff_s = config.controlled_shutdown_retry_backoff_ms / 1000
        self.timeout_s = config.controller_socket_timeout_ms / 1000

    async def run(self) -> bool:
        """True once the controller moved every leadership away; False after the last retry."""
        remaining = self.max_retries
        while remaining > 0:
            remaining -= 1
            if await self._attempt():
                log.info("[KafkaServer id=%d] controlled shutdown succeeded", self.broker_id)
                return True
            if remaining > 0:
                await asyncio.sleep(self.backoff_s)
                log.info("[KafkaServer id=%d] retrying controlled shutdown after the previous attempt failed",
                         self.broker_id)
        log.warning("[KafkaServer id=%d] proceeding to do an unclean shutdown as all the controlled shutdown "
                    "attempts failed", self.broker_id)
        return False

    async def _attempt(self) -> bool:
        try:
            controller = await self.lookup_controller()
        except Exception as exc:
            log.warning("[KafkaServer id=%d] cannot find the controller: %r", self.broker_id, exc)
            return False
        if controller is None:
            log.info("[KafkaServer id=%d] no controller yet for the controlled shutdown", self.broker_id)
            return False
        controller_id, host, port = controller
        connection = AsyncBrokerConnection(host, port, client_id=f"broker-{self.broker_id}-controlled-shutdown",
                                           node_id=controller_id, request_timeout=self.timeout_s,
                                           ssl_context=self.ssl_context, sasl=self.sasl)
        try:
            await connection.connect()
            version = connection.version_for(ControlledShutdownRequest.API_KEY, max_version=MAX_VERSION)
            response = await connection.request(
                ControlledShutdownRequest(broker_id=self.broker_id, broker_epoch=self.broker_epoch_fn()),
                version=version)
        except (KafkaClientError, OSError) as exc:
            log.warning("[KafkaServer id=%d] error during controlled shutdown, possibly because leader movement "
                        "took longer than controller.socket.timeout.ms: %r", self.broker_id, exc)
            return False
        finally:
            connection.close()
        assert isinstance(response, ControlledShutdownResponse)
        if response.error_code == ErrorCode.NO_ERROR and not response.remaining_partitions:
            return True
        if response.remaining_partitions:
            log.info("[KafkaServer id=%d] remaining partitions to move: %s", self.broker_id,
                     ", ".join(f"{p.topic_name}-{p.partition_index}" for p in response.remaining_partitions))
        if response.error_code != ErrorCode.NO_ERROR:
            log.info("[KafkaServer id=%d] error from controller: %s", self.broker_id,
                     ErrorCode(response.error_code).name)
        return False
