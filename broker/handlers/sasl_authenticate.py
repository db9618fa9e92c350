"""SaslAuthenticate (36): one SASL token each way, after a v1 SaslHandshake.

The token goes to the connection's SaslServer (``broker.security.sasl_authenticator``);
its answer comes back in ``auth_bytes``. Once the mechanism completes, the
connection acts as ``User:<authorization id>``. A failed authentication is
answered SASL_AUTHENTICATION_FAILED with Kafka's message after
``connection.failed.authentication.delay.ms``, and the connection closes. v1
adds ``session_lifetime_ms``: how long the session lasts before the client must
re-authenticate (KIP-368, ``connections.max.reauth.ms``; 0: forever); v2 is the
flexible form. A re-authentication must end as the session's principal.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from broker.security.sasl_authenticator import SaslState, client_message
from broker.security.sasl_server import SaslError
from protocol.errors import ErrorCode
from protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from broker.broker_services import BrokerServices
    from broker.request_context import RequestContext
    from protocol.primitives import Message

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: RequestContext, broker: BrokerServices,
           request: SaslAuthenticateRequest) -> SaslAuthenticateResponse | Awaitable[Message]:
    connection = ctx.connection
    sasl = connection.sasl
    if sasl is None or sasl.state is not SaslState.AUTHENTICATE:
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, auth_bytes=b"",
                                        error_message="SaslAuthenticate request received after successful "
                                                      "authentication")
    try:
        challenge = sasl.authenticate(request.auth_bytes)
    except SaslError as exc:
        assert sasl.server is not None
        message = client_message(exc, sasl.server.mechanism)
        response = SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message,
                                            auth_bytes=b"")
        return connection.refuse_authentication(message, response)
    lifetime_ms = 0
    if sasl.complete:
        if sasl.reauthenticating and sasl.authorization_id != sasl.session_authorization_id:
            sasl.fail()
            message = "Cannot change principals during re-authentication"
            response = SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                error_message=message, auth_bytes=b"")
            return connection.refuse_authentication(message, response)
        connection.authenticated(sasl.authorization_id)
        lifetime_ms = sasl.begin_session(asyncio.get_running_loop().time(), ctx.api_version)
    return SaslAuthenticateResponse(error_code=ErrorCode.NO_ERROR, error_message=None, auth_bytes=challenge,
                                    session_lifetime_ms=lifetime_ms)

