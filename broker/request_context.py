"""What a handler knows about a request besides its body: :class:`RequestContext`.

The socket server (``broker.network.socket_server``) builds one for every request it
decodes. Handlers see the client's connection only through :class:`ClientConnection`,
the few things a handler may read or do with it, so neither they nor this module
depend on the network layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from broker.security.kafka_principal import KafkaPrincipal
    from broker.security.sasl_authenticator import SaslServerAuthenticator
    from protocol.api import DecodedRequest
    from protocol.primitives import Message


class ClientConnection(Protocol):
    """The connection a request came on, as its handler sees it."""

    @property
    def peer(self) -> str:
        """The client's ``host:port``, for log lines."""

    @property
    def client_host(self) -> str:
        """The client's IP address, as an ACL's host names it."""

    @property
    def sasl(self) -> SaslServerAuthenticator | None:
        """The connection's SASL authentication state; None on a listener without SASL."""

    def close(self) -> None:
        """Close the connection; answers not yet sent are dropped."""

    def throttle(self, delay_ms: int) -> None:
        """Read nothing more from the client for ``delay_ms`` (a quota's throttle)."""

    def authenticated(self, authorization_id: str) -> None:
        """SASL authentication completed: later requests act as ``User:<authorization_id>``."""

    async def refuse_authentication(self, reason: str, response: Message) -> Message:
        """A failed authentication's answer: sent after the failed-authentication delay, then the connection closes."""


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    request: DecodedRequest
    connection: ClientConnection
    listener_name: str
    #: Who the client is (User:ANONYMOUS unless it authenticated): what an authorizer checks.
    principal: KafkaPrincipal
    #: The request's size in bytes (what a producer byte-rate quota counts).
    size: int = 0

    @property
    def api_version(self) -> int:
        return self.request.header.request_api_version

    @property
    def client_id(self) -> str | None:
        return self.request.header.client_id
