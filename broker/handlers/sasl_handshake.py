"""SaslHandshake (17): the client names its SASL mechanism; the broker lists the ones it offers.

On a SASL listener before authentication, an enabled mechanism starts its
SaslServer: after v1 the tokens come in SaslAuthenticate requests, after v0 as
bare frames (``broker.network.socket_server``). A mechanism the listener does not offer
is answered UNSUPPORTED_SASL_MECHANISM with the ones it does, and the
connection closes as after any failed authentication. Anywhere else (a
PLAINTEXT or SSL listener, an authenticated connection) the answer is
ILLEGAL_SASL_STATE, as Kafka's KafkaApis gives. On an authenticated SASL
connection whose session has a lifetime, a v1 handshake with the session's
mechanism starts re-authentication (KIP-368).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.security.sasl_authenticator import SaslServerAuthenticator, SaslState
from protocol.errors import ErrorCode
from protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext
    from protocol.primitives import Message

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, broker: BrokerServices,
           request: SaslHandshakeRequest) -> SaslHandshakeResponse | Awaitable[Message]:
    sasl = ctx.connection.sasl
    if sasl is not None and sasl.state is SaslState.COMPLETE and sasl.session_expires_at is not None:
        return _reauthenticate(ctx, sasl, request)
    if sasl is None or sasl.state is not SaslState.HANDSHAKE_OR_VERSIONS_REQUEST:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    if sasl.handshake(request.mechanism, ctx.api_version):
        return SaslHandshakeResponse(error_code=ErrorCode.NO_ERROR, mechanisms=sasl.enabled_mechanisms)
    response = SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                     mechanisms=sasl.enabled_mechanisms)
    # The mechanism's name is the client's own text: quoted, not trusted.
    reason = f"Unsupported SASL mechanism {request.mechanism[:100]!r}"
    return ctx.connection.refuse_authentication(reason, response)


def _reauthenticate(ctx: RequestContext, sasl: SaslServerAuthenticator,
                    request: SaslHandshakeRequest) -> SaslHandshakeResponse | Awaitable[Message]:
    """KIP-368: a handshake on an authenticated connection starts re-authentication, with the
    session's mechanism; anything else fails the session and closes the connection."""
    refusal = sasl.reauthentication_refusal(request.mechanism, ctx.api_version)
    if refusal is None:
        sasl.reauthenticate(request.mechanism)
        return SaslHandshakeResponse(error_code=ErrorCode.NO_ERROR, mechanisms=sasl.enabled_mechanisms)
    response = SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=sasl.enabled_mechanisms)
    return ctx.connection.refuse_authentication(f"re-authentication refused: {refusal}", response)

